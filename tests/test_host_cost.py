"""`python -m gemm_course hostcost`: what a repeated gc.gemm call costs beside its kernel (gemm_course.measure.host_cost).

The measurement needs a GPU; everything around it is tried here: the plan of settings, the record each
setting becomes, the host-time loop, the command line's arguments and its one-line message without a GPU,
and the stage of the recording script that runs it.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_course import get_level, levels
from gemm_course.fp8 import gemm as fp8_gemm
from gemm_course.measure.results import summary

bench = importlib.import_module("gemm_course.measure.bench")  # the package's name `bench` is the function
from gemm_course.measure import host_cost as hc

ROOT = Path(__file__).resolve().parents[1]


def test_the_plan_takes_each_levels_fastest_recorded_setting_then_level_13() -> None:
    plan = hc.host_cost_plan()
    assert [level for level, _, _ in plan] == [lv.id for lv in levels()] + [fp8_gemm.LEVEL_ID] * 2
    for level, params, dtype in plan[:-2]:
        lv = get_level(level)
        assert lv.resolve(**params) == params and dtype in lv.dtypes
        rows = [r for r in summary(level) if (r["M"], r["N"], r["K"]) == (4096, 4096, 4096)]
        if rows:
            assert max(r["tflops"] for r in rows) == max(r["tflops"] for r in rows
                                                         if r["params"] == params and r["dtype"] == dtype)
    assert [p["scaling"] for _, p, _ in plan[-2:]] == list(fp8_gemm.SCALINGS)


def test_the_plan_filters_levels_and_can_take_every_showcase_setting() -> None:
    assert [x[0] for x in hc.host_cost_plan(["13", "8"])] == ["08_warp_tiling"] + [fp8_gemm.LEVEL_ID] * 2
    assert [x[0] for x in hc.host_cost_plan(["11_hopper_wgmma"])] == ["11_hopper_wgmma"]
    every = hc.host_cost_plan(["10"], all_showcase=True)
    assert [p for _, p, _ in every] == [get_level(10).resolve(**s) for s in get_level(10).showcase]
    with pytest.raises(ValueError, match="unknown level"):
        hc.host_cost_plan(["99"])


def test_a_record_holds_each_measurement_the_ratio_and_the_targets() -> None:
    def timing(ms: float) -> bench.Timing:
        return bench.Timing.from_samples([ms] * 50, sm_clock_mhz=1700.0)

    def host(gemm: float, prepared: float) -> dict:
        return {"gemm": {"median": gemm, "batch_mean": gemm + 9}, "prepared": {"median": prepared, "batch_mean": prepared}}

    rec = hc.host_cost_record("11_hopper_wgmma", {"step": 6}, "bfloat16", 4096, host(25.0, 6.0),
                                 {"gemm": timing(0.20), "prepared": timing(0.199)}, {"gemm": 0.19, "prepared": 0.19},
                                 {"prepared": timing(0.188), "gemm": timing(0.2)})
    # the ratio pairs the back-to-back timings (taken in turns); the harness's, taken at another clock, is beside it
    assert rec["ratio"] == pytest.approx(0.995) and rec["harness_ratio"] == pytest.approx(0.94)
    assert rec["meets_host_target"] and rec["meets_ratio_target"]
    assert rec["host_us"] == {"gemm": 25.0, "prepared": 6.0} and rec["host_us_batch_mean"]["gemm"] == 34.0
    assert rec["back_to_back"]["gemm"]["reps"] == 50 and rec["harness"]["prepared"]["sm_clock_mhz"] == 1700.0
    json.dumps(rec)  # what the result file holds
    slow = hc.host_cost_record("08_warp_tiling", {}, "float32", 4096, host(31.0, 6.0),
                                  {"gemm": timing(0.30), "prepared": timing(0.2)}, {"gemm": 0.3, "prepared": 0.2},
                                  {"prepared": timing(0.2), "gemm": timing(0.3)})
    assert not slow["meets_host_target"] and not slow["meets_ratio_target"]
    method = hc.HOST_COST_METHOD.format(settle_s=bench.SETTLE_S, settle_calls=hc.HOST_SETTLE_CALLS,
                                           batch=hc.HOST_BATCH, batches=hc.HOST_BATCHES, reps=hc.HOST_COST_REPS,
                                           target_us=hc.HOST_COST_TARGET_US, target_ratio=hc.HOST_COST_TARGET_RATIO)
    assert "{" not in method and "20 batches of 10 calls" in method and "30 µs" in method


def test_host_time_is_per_call_over_batches_synchronised_only_between_them() -> None:
    calls, syncs = [], []
    us = hc._host_us_per_call(lambda: calls.append(len(syncs)), lambda: syncs.append(1), batch=4, batches=3)
    assert set(us) == {"median", "batch_mean"} and min(us.values()) >= 0 and len(calls) == 12 and len(syncs) == 4
    assert calls == [1] * 4 + [2] * 4 + [3] * 4  # no synchronisation inside a batch


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemm_course", "hostcost", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "GEMM_COURSE_NO_GPU": "1"})


@pytest.mark.parametrize("args,words", [
    (("--out", "{tmp}/mine.json"), ("needs a CUDA GPU",)),
    (("--out", "{tmp}/mine.json", "--levels", "99"), ("unknown level",)),
    (("--out", "{tmp}/mine.json", "--size", "0"), ("--size",)),
    (("--out", "gemm_course/results/h200_host_cost.json"), ("mine.json",)),
])
def test_the_command_says_in_one_line_what_is_wrong(tmp_path: Path, args: tuple, words: tuple) -> None:
    done = _cli(*(a.format(tmp=tmp_path) for a in args))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-800:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m gemm_course hostcost: ") and all(w in last for w in words), last
    assert not (tmp_path / "mine.json").exists()


def test_the_recording_script_has_a_stage_that_runs_it() -> None:
    script = (ROOT / "gemm_course" / "results" / "record_h200_clocks.sh").read_text(encoding="utf-8")
    assert '-m gemm_course hostcost --out "$out/h200_host_cost.json"' in script
    done = subprocess.run(["bash", "-n", str(ROOT / "gemm_course" / "results" / "record_h200_clocks.sh")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_recorded_host_cost_file_is_consistent():
    """The shipped recording: every setting of the plan, quartiles in order, each ratio recomputed from its parts."""
    data = json.loads((Path(__file__).resolve().parents[1] / "gemm_course" / "results" / "h200_host_cost.json")
                      .read_text(encoding="utf-8"))
    assert {"gpu", "date", "command", "method"} <= set(data["provenance"]) and "hostcost" in data["provenance"]["command"]
    rows = data["host_cost"]
    assert [(r["level"], r["params"]) for r in rows] == [(lv, p) for lv, p, *_ in hc.host_cost_plan()]
    for r in rows:
        for part in ("back_to_back", "harness"):
            for t in r[part].values():
                assert t["min_ms"] <= t["q1_ms"] <= t["median_ms"] <= t["q3_ms"] <= t["max_ms"] and t["reps"] >= 50
        b2b = r["back_to_back"]
        assert r["ratio"] == pytest.approx(b2b["prepared"]["median_ms"] / b2b["gemm"]["median_ms"])
        assert r["harness_ratio"] == pytest.approx(r["harness"]["prepared"]["median_ms"] / b2b["gemm"]["median_ms"])
        assert all(t["sm_clock_mhz"] > 0 for t in (*b2b.values(), *r["harness"].values()))  # the clock they ran at
        assert 0 < r["host_us"]["prepared"] <= r["host_us"]["gemm"] <= r["host_us_batch_mean"]["gemm"] * 1.5
        assert r["meets_host_target"] == (r["host_us"]["gemm"] <= hc.HOST_COST_TARGET_US)
        assert r["meets_ratio_target"] == (r["ratio"] >= hc.HOST_COST_TARGET_RATIO)
