"""The autotuner's search spaces, shapes and record plan (no GPU needed): every Tensor Core level has a space,
Levels 11 and 13 are tuned at the decode shapes, `record --sweep-only` times exactly the tuner's list, and the
tuner compares settings that compute the same thing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemm_course.__main__ import main, record_plan
from gemm_course.fp8 import gemm as fp8_gemm
from gemm_course.levels import DECODE_SHAPES, get_level, levels
from gemm_course.measure import autotune

ROOT = Path(__file__).resolve().parents[1]


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
        fp8_gemm.resolve_stages(p["scaling"], p["stages"], p.get("block_n"), p.get("block_m"),
                                staged_scales=p.get("staged_scales", False))  # each one valid
    per_tensor = {(p["block_n"], p["stages"]) for p in space if p["scaling"] == "per_tensor"}
    assert per_tensor == {(bn, s) for bn in (256, 128) for s in fp8_gemm.stage_choices("per_tensor", bn)}
    blockwise = [p for p in space if p["scaling"] == "blockwise"]
    assert {p.get("block_m", 128) for p in blockwise} == {128, 64} and {p["splits"] for p in blockwise} == {1, "auto"}
    assert not any(p.get("overlap") is False for p in space)  # promotion waited for is a step, not a choice
    staged = {(p["block_m"], p["stages"], p["splits"]) for p in space if p.get("staged_scales")}
    assert staged == {(64, s, splits) for s in fp8_gemm.stage_choices("blockwise", block_m=64, staged_scales=True)
                      if s >= fp8_gemm.STAGED_MIN_DEPTH for splits in (1, "auto")}
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


def test_fp8_sweep_bears_out_the_shallowest_staged_ring() -> None:
    """The tuner tries staged scales only from STAGED_MIN_DEPTH stages up, because shallower rings lose: in the
    recorded sweep, at every shape, the fastest blockwise setting with fewer stages is at least 5% slower than the
    fastest with STAGED_MIN_DEPTH or more."""
    from gemm_course.measure import results

    for shape in fp8_gemm.SWEEP_SHAPES:
        rows = [r for r in results.sweep_records("13_fp8_blockscaled", shape)
                if r["params"].get("scaling") == "blockwise" and "stages" in r["params"]]
        shallow = [r["median_ms"] for r in rows if r["params"]["stages"] < fp8_gemm.STAGED_MIN_DEPTH]
        deep = [r["median_ms"] for r in rows if r["params"]["stages"] >= fp8_gemm.STAGED_MIN_DEPTH]
        assert shallow and deep and min(shallow) >= 1.05 * min(deep), shape
    tuning = (ROOT / "book" / "tuning.md").read_text(encoding="utf-8")
    assert (f"from {fp8_gemm.STAGED_MIN_DEPTH} stages up, since no blockwise setting with 2 or 3 stages comes within 5% "
            "of the fastest at any sweep shape") in tuning and fp8_gemm.STAGED_MIN_DEPTH == 4
    # its other reason, "in the chapter's recording they lose at the squares and never beat the 64-row kernel at a
    # decode shape", is checked against that recording in test_prose_level13.test_scales_staged_by_the_producer
    assert "staged scales with 128-row tiles are left out, since in the chapter's recording they lose at the squares " \
           "and never beat the 64-row kernel at a decode shape" in tuning


def test_split_counts_replace_the_models_choice_in_blockwise_steps() -> None:
    steps = fp8_gemm.with_split_counts(fp8_gemm.STAGED_STEPS, [1, 2, 2, 3])
    assert len(steps) == 3 * len(fp8_gemm.STAGED_STEPS)
    assert all("skip_unsplit" not in s and s["splits"] in (1, 2, 3) for s in steps)
    shape = (64, 24576, 1536)  # 192 tiles of 64 rows: the model does not split it
    assert fp8_gemm.auto_splits(*shape, block_m=64) == 1
    assert {fp8_gemm.resolved_setting(s, *shape)["splits"] for s in steps} == {1, 2, 3}
    assert fp8_gemm.with_split_counts([{"scaling": "per_tensor", "block_n": 128}], [2]) == [
        {"scaling": "per_tensor", "block_n": 128}]
