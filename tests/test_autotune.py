"""The autotuner's search spaces, shapes and record plan (no GPU needed): every Tensor Core level has a space,
Levels 11 and 13 are tuned at the decode shapes, `record --sweep-only` times exactly the tuner's list, and the
tuner compares settings that compute the same thing."""
from __future__ import annotations

import json

import pytest

from gemm_course.__main__ import main, record_plan
from gemm_course.fp8 import gemm as fp8_gemm
from gemm_course.levels import DECODE_SHAPES, get_level, levels
from gemm_course.measure import autotune


def test_every_tensor_core_level_has_a_search_space_that_holds_its_showcase() -> None:
    for lv in levels():
        if not lv.uses_tensor_cores:
            continue
        space = autotune.search_space(lv)
        assert lv.sweep is not None and 0 < len(space) <= len(lv.valid_settings()), lv.id
        resolved = {json.dumps(lv.resolve(**p), sort_keys=True) for p in space}
        missing = [s for s in lv.showcase if json.dumps(lv.resolve(**s), sort_keys=True) not in resolved]
        # Level 10's two-stage first kernel is in; only settings a filter leaves out on purpose may be missing
        assert not [s for s in missing if s.get("arrive_scope") != "cluster"], (lv.id, missing)


def test_level_10_space_changes_one_schedule_option_at_a_time() -> None:
    lv = get_level("10_mma_pipeline")
    space = [lv.resolve(**p) for p in autotune.search_space(lv)]
    schedule = {"copy_issue": "burst", "refill_lag": 1, "ldmatrix_issue": "burst", "mma_order": "rows"}
    assert all(sum(p[k] != v for k, v in schedule.items()) <= 1 for p in space)
    for name in schedule:  # each option is tried away from its default somewhere
        assert any(p[name] != schedule[name] for p in space), name
    assert {p["copy"] for p in space} == {"cp_async", "cp_async_mbarrier", "tma"}
    assert len(space) < len(lv.valid_settings()) / 4


def test_decode_shapes_are_swept_for_levels_11_and_13_only() -> None:
    assert autotune.sweep_shapes("11_hopper_wgmma") == [(4096, 4096, 4096), *DECODE_SHAPES]
    assert autotune.sweep_shapes("13_fp8_blockscaled") == [(4096, 4096, 4096), *DECODE_SHAPES]
    assert autotune.sweep_shapes("10_mma_pipeline") == [(4096, 4096, 4096)]
    assert all(m in (64, 128) for m, _, _ in DECODE_SHAPES) and len(DECODE_SHAPES) == 6
    assert fp8_gemm.SMALL_M_SHAPES == DECODE_SHAPES


def test_record_sweep_only_times_the_tuners_list_at_its_shapes() -> None:
    for lv in ("09_wmma", "10_mma_pipeline", "11_hopper_wgmma"):
        plan = record_plan([lv], sweep_only=True)
        assert len(plan) == 1
        configs, shapes, _ = plan[0]
        assert [p for _, p in configs] == autotune.search_space(lv) and shapes == autotune.sweep_shapes(lv)
        full = record_plan([lv])
        assert full[-1][:2] == plan[0][:2] and len(full) == 2  # the showcase first, then the same sweep
    with pytest.raises(ValueError, match="exclude each other"):
        record_plan(["09_wmma"], showcase_only=True, sweep_only=True)


def test_fp8_sweep_only_records_the_fp8_space(monkeypatch, tmp_path) -> None:
    seen = {}
    monkeypatch.setattr(fp8_gemm, "record_fp8", lambda out, sizes, steps, **kw: seen.update(sizes=sizes, steps=steps))
    main(["fp8", "--record", "--sweep-only", "--out", str(tmp_path / "x.json")])
    assert seen == {"sizes": fp8_gemm.SWEEP_SHAPES, "steps": autotune.search_space("13_fp8_blockscaled")}


def test_fp8_space_every_ring_depth_both_kernels_and_split_k() -> None:
    space = autotune.search_space("13_fp8_blockscaled")
    for p in space:
        fp8_gemm.resolve_stages(p["scaling"], p["stages"], p.get("block_n"), p.get("block_m"))  # each one valid
    per_tensor = {(p["block_n"], p["stages"]) for p in space if p["scaling"] == "per_tensor"}
    assert per_tensor == {(bn, s) for bn in (256, 128) for s in fp8_gemm.stage_choices("per_tensor", bn)}
    blockwise = [p for p in space if p["scaling"] == "blockwise"]
    assert {p.get("block_m", 128) for p in blockwise} == {128, 64} and {p["splits"] for p in blockwise} == {1, "auto"}
    assert not any(p.get("overlap") is False for p in space)  # promotion waited for is a step, not a choice
    # at 4096³ split-K "auto" resolves to no split: the same setting as splits=1, so fewer distinct records
    distinct = {json.dumps(fp8_gemm.resolved_setting(p, 4096, 4096, 4096), sort_keys=True) for p in space}
    assert len(distinct) < len(space)
    assert len({json.dumps(fp8_gemm.resolved_setting(p, 64, 2112, 7168), sort_keys=True) for p in space}) == len(space)


def test_fp8_records_name_the_ring_depth_they_ran() -> None:
    assert fp8_gemm.resolved_setting({"scaling": "per_tensor", "block_n": 128, "stages": 3}, 64, 2112, 7168)["stages"] == 3
    assert fp8_gemm.setting_params("blockwise", stages=2, splits=1)["stages"] == 2


def test_tuner_without_a_gpu_says_so(monkeypatch) -> None:
    from gemm_course import device

    monkeypatch.setattr(device, "gpu_available", lambda: False)
    for lv in ("10_mma_pipeline", "13_fp8_blockscaled"):
        with pytest.raises(Exception, match="GPU"):
            autotune.autotune(lv, [64])


def test_tuned_rows_compare_within_one_output_type() -> None:
    """Level 11's fp32-C and bf16-C settings compute different outputs, Level 13's scalings different products:
    each row holds one group only, and its default is the level's default with that group's value."""
    assert autotune.OUTPUT_PARAM == {"11_hopper_wgmma": "c_type", "13_fp8_blockscaled": "scaling"}
    for lv in ("10_mma_pipeline", "11_hopper_wgmma", "13_fp8_blockscaled"):
        for row in autotune.tuned_rows(lv):
            (param, value), = row["group"].items() if row["group"] else (("", None),)
            if param:
                assert row["best"]["params"][param] == value
                if row["default"] is not None:
                    assert row["default"]["params"][param] == value
            assert row["best"]["tflops"] >= (row["default"] or row["best"])["tflops"]
