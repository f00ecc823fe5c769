"""Level 14's hardware counters: one setting of each DSL kernel beside the CUDA levels it is compared with.

    python -m gemm_course dsl --counters --out FILE     (a GPU with Triton, and Nsight Compute's ncu)

The recorded run (record.py) says how fast each kernel is; these counters say where two of its comparisons
differ: the tiled Triton kernel against Level 10 (which instructions, how busy the Tensor Cores are), and the
Hopper Triton and Gluon kernels against Level 11 at its default and at step 6 (how C is stored, what is read
from L2). The method is the course's (measure.counters): ncu with --clock-control none over a small Python
process that launches each target once unprofiled (checked against float64) and once inside an NVTX range,
one ncu run per metric group, a few metrics each, at COUNTER_SHAPE in bf16.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

COUNTER_SHAPE = (8192, 8192, 8192)  # the shape of the page's chart
WIDE = {"BM": 128, "BN": 256, "BK": 64}
TARGETS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("10_mma_pipeline", {}),
    ("triton_tiled", {**WIDE, "group_m": 8, "num_warps": 8, "num_stages": 3}),
    ("11_hopper_wgmma", {"c_type": "input"}),
    ("11_hopper_wgmma", {"step": 6, "c_type": "input"}),
    ("triton_hopper", {**WIDE, "num_stages": 3, "c_type": "input"}),
    ("gluon", {**WIDE, "stages": 3, "c_type": "input"}),
    ("cublas", {}),                      # last: a library call may launch more than one kernel
)
DTYPE = "bfloat16"
COUNTERS_KEY = "dsl_counters"


def _run_targets(spec_path: str) -> None:
    """The program ncu profiles: each target launched once (checked), then once inside the NVTX range."""
    import cupy

    from gemm_course.dsl.record import c_type_of, prepared_launch
    from gemm_course.measure.counters import launch_profiled
    from gemm_course.run.check import random_operands, relative_error, tolerance
    from gemm_course.run.dtypes import nan_filled, to_float64

    spec = json.loads(Path(spec_path).read_text())
    M, N, K = spec["shape"]
    A, B = random_operands(M, N, K, DTYPE, seed=7, xp=cupy)
    reference = to_float64(A) @ to_float64(B)
    for kernel, setting in spec["targets"]:
        c_type = c_type_of(kernel, setting, DTYPE)
        C = nan_filled((M, N), c_type, cupy)
        launch = prepared_launch(kernel, setting, A, B, C)
        launch()
        err = relative_error(C, reference)
        if not err <= tolerance(DTYPE, K, c_type):
            print(f"WRONG RESULT for {kernel} {setting}: relative error {err:.2e}", file=sys.stderr)
            sys.exit(3)
        launch_profiled(launch)
        del C
        cupy.get_default_memory_pool().free_all_blocks()


def _profile(ncu: str, metric_names: list[str]) -> list[dict[str, Any]]:
    from gemm_course.measure.counters import NVTX_RANGE, parse_ncu_csv

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "targets.json"
        spec.write_text(json.dumps({"shape": COUNTER_SHAPE, "targets": [list(t) for t in TARGETS]}))
        command = [ncu, "--target-processes", "all", "--clock-control", "none", "--nvtx", "--nvtx-include",
                   f"{NVTX_RANGE}/", "--metrics", ",".join(metric_names), "--csv", "--page", "raw",
                   "--print-units", "base", sys.executable, "-m", "gemm_course.dsl.counters", str(spec)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    rows = parse_ncu_csv(done.stdout)
    if done.returncode != 0 or len(rows) < len(TARGETS):
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError("ncu failed for Level 14's kernels: " + " | ".join(tail))
    return rows


def record_counters(out: str | Path, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Profile every target in each metric group and write the file (provenance, the metrics chosen, one row per
    target: its kernel names and metric values; for cuBLAS, the longest of its kernels)."""
    from gemm_course import device
    from gemm_course.dsl.record import _provenance
    from gemm_course.measure.bench import _write_json
    from gemm_course.measure.counters import (GROUPS, METRICS, NO_NCU, NVTX_RANGE, available_metric_bases,
                                              choose_metrics, find_ncu, ncu_version)

    device.require_gpu("recording Level 14's counters")
    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError(NO_NCU)
    chosen = choose_metrics(available_metric_bases(ncu))
    method = (f"ncu {ncu_version(ncu)} --clock-control none --nvtx --nvtx-include '{NVTX_RANGE}/' --csv --page raw "
              f"--print-units base; caches flushed before every replay pass (ncu's default cache control); one launch "
              f"of each target at {'×'.join(map(str, COUNTER_SHAPE))} in {DTYPE} after one unprofiled launch checked "
              f"against float64 (gemm_course.dsl.counters); one ncu run per metric group ({', '.join(GROUPS)})")
    payload: dict[str, Any] = {"schema": 1, "provenance": {**_provenance(method), "ncu": ncu_version(ncu),
                                                            "metrics": chosen, "clock_control": "none"},
                               "records": [],  # every results file has this list (timings); this one holds none
                               COUNTERS_KEY: [{"kernel": k, "setting": dict(s), "dtype": DTYPE,
                                               "M": COUNTER_SHAPE[0], "N": COUNTER_SHAPE[1], "K": COUNTER_SHAPE[2],
                                               "kernels": [], "metrics": {}} for k, s in TARGETS]}
    duration = chosen["duration_ns"]
    for group in GROUPS:
        names = [chosen[m.key] for m in METRICS if m.group == group and m.key in chosen]
        names += [duration] if group != "issue" else []
        rows = _profile(ncu, names)
        per_target = [[r] for r in rows[:len(TARGETS) - 1]] + [rows[len(TARGETS) - 1:]]
        for row, kernels in zip(payload[COUNTERS_KEY], per_target):
            main = max(kernels, key=lambda k: k["values"].get(duration) or 0)
            row["kernels"] = sorted({*row["kernels"], *(k["kernel"] for k in kernels)})
            for m in METRICS:
                if m.group == group and m.key in chosen:
                    row["metrics"][m.key] = main["values"].get(chosen[m.key])
        progress(f"{group} counters read for {len(TARGETS)} targets")
        _write_json(Path(out), payload)
    return payload


def read_counters(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a counters file (empty when it holds none)."""
    return list(json.loads(Path(path).read_text(encoding="utf-8")).get(COUNTERS_KEY, []))


def find_row(rows: list[dict[str, Any]], kernel: str, setting: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The row of one target (KeyError if the file has none)."""
    for r in rows:
        if r["kernel"] == kernel and r["setting"] == (setting or {}):
            return r
    raise KeyError(f"{kernel} {setting}")


if __name__ == "__main__":
    _run_targets(sys.argv[1])
