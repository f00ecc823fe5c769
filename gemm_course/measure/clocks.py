"""Which SM clock did a kernel run at? Three readings of the same kernels, side by side.

- ``bracket``: bench.KernelClock, the harness's own method: clock64 and %globaltimer read on every SM
  by a probe launched right before and right after each timed launch (cycles over nanoseconds
  across the timed region, on the same SM).
- ``alone``: bench.spin_clock_mhz, a light probe that runs by itself for 5 ms right after the
  timed launches: the clock the GPU gives a kernel that is not power-limited.
- ``ncu``: Nsight Compute's ``smsp__cycles_elapsed.avg.per_second`` for one launch of the same kernel
  after the same settling (``--clock-control none``), in a separate process.
- ``nvml``: NVML's SM clock sampled during the repetitions, the reading the harness used to keep.

``record_clock_methods`` writes them for a few kernels at 4096³ (FP32, bf16 and FP8, the course's
and the libraries'), plus the bracket probe around an idle gap (does clock64 count while an SM
waits?). Needs a Hopper GPU for the FP8 rows; ncu where it is installed.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Optional

NVTX_RANGE = "gemm_course_clock"
NCU_METRICS = ("smsp__cycles_elapsed.avg.per_second", "gpu__time_duration.sum", "sm__cycles_elapsed.avg")
SETTLE_S = 0.3


def _workloads(n: int) -> list[tuple[str, Callable[[], Any], Callable[[], bool]]]:
    """(name, launch, check) of each kernel the study reads the clock of, on fresh random inputs."""
    import cupy

    from gemm_course.fp8 import gemm as fp8_gemm
    from gemm_course.measure.bench import cublas_gemm
    from gemm_course.run.check import random_operands, relative_error, tolerance
    from gemm_course.run.dtypes import storage_dtype, to_float64
    from gemm_course.run.launch import gemm

    jobs: list[tuple[str, Callable[[], Any], Callable[[], bool]]] = []
    A32, B32 = random_operands(n, n, n, "float32")
    ref32 = to_float64(A32) @ to_float64(B32)
    C32 = cupy.empty((n, n), dtype=cupy.float32)
    l8 = {"BM": 64, "BN": 256, "WM": 64, "WN": 64, "stepped": True}
    jobs.append(("cublas_fp32", lambda: cublas_gemm(A32, B32, C32),
                 lambda: relative_error(C32, ref32) <= tolerance("float32", n)))
    C8 = cupy.empty((n, n), dtype=cupy.float32)
    jobs.append(("level08_fp32", lambda: gemm(A32, B32, "08_warp_tiling", out=C8, **l8),
                 lambda: relative_error(C8, ref32) <= tolerance("float32", n)))
    A16, B16 = random_operands(n, n, n, "bfloat16")
    ref16 = to_float64(A16) @ to_float64(B16)
    Cb = cupy.empty((n, n), dtype=storage_dtype("bfloat16"))
    jobs.append(("cublas_bf16", lambda: cublas_gemm(A16, B16, Cb), lambda: relative_error(Cb, ref16) <= 1e-2))
    C11 = cupy.empty((n, n), dtype=storage_dtype("bfloat16"))
    jobs.append(("level11_step6_bf16", lambda: gemm(A16, B16, "11_hopper_wgmma", out=C11, step=6, c_type="input"),
                 lambda: relative_error(C11, ref16) <= tolerance("bfloat16", n, "bfloat16")))
    for scaling, opts in (("per_tensor", {"block_n": 256}), ("blockwise", {"overlap": True, "splits": 1})):
        ops = fp8_gemm.random_fp8_operands(n, n, n, scaling, xp=cupy)
        launch, C = fp8_gemm.prepare(*ops, scaling=scaling, **opts)
        jobs.append((f"level13_{scaling}", launch,
                     lambda C=C, ops=ops, scaling=scaling: fp8_gemm._check_rows(C, *ops, scaling, n, n, n, 16) <= 1))
        if scaling == "per_tensor":
            run = fp8_gemm._torch_scaled_mm(*ops, n, n, n, True)
            name = "cublaslt_fast"
        else:
            run = fp8_gemm._torch_blockwise_scaled_mm(*ops, n, n, n)
            name = "cublaslt_blockwise"
        if run is not None:
            jobs.append((name, run, lambda run=run, ops=ops, scaling=scaling: fp8_gemm._check_rows(
                fp8_gemm._bf16_bits(run, poison=True), *ops, scaling, n, n, n, 16) <= 1))
    return jobs


def _idle_bracket_mhz(gap_s: float = 0.005) -> Optional[float]:
    """The bracket probe around a host sleep with nothing launched between: if clock64 stopped while
    an SM is idle, this would read far below the clock."""
    import cupy

    from gemm_course.measure.bench import KernelClock

    clock = KernelClock(1)
    clock.before()
    cupy.cuda.get_current_stream().synchronize()
    time.sleep(gap_s)
    clock.after()
    return clock.mhz


def record_clock_methods(out: str, n: int = 4096, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Time each workload with bench.time_gpu (bracket + NVML), read the probe alone right after, then
    the same kernels under ncu; write one file with provenance."""
    import cupy

    from gemm_course import device
    from gemm_course.measure.bench import SETTLE_S as HARNESS_SETTLE_S, _write_json, provenance, spin_clock_mhz, time_gpu
    from gemm_course.measure.counters import find_ncu, ncu_version, parse_ncu_csv

    device.require_gpu("reading kernel clocks")
    rows: list[dict[str, Any]] = []
    idle_before = _idle_bracket_mhz()
    for name, launch, check in _workloads(n):
        launch()
        cupy.cuda.Device().synchronize()
        passed = bool(check())
        t = time_gpu(launch, min_reps=20, max_reps=50, budget_s=1.0)
        alone = spin_clock_mhz(5.0)
        rows.append({"workload": name, "M": n, "N": n, "K": n, "passed": passed, "timing": asdict(t),
                     "bracket_mhz": t.sm_clock_mhz, "nvml_mhz": t.nvml_sm_clock_mhz, "alone_mhz": alone})
        progress(f"{name:<22} {t.median_ms:7.3f} ms  bracket {t.sm_clock_mhz or 0:6.0f} MHz  "
                 f"alone {alone or 0:6.0f} MHz  NVML {t.nvml_sm_clock_mhz or 0:6.0f} MHz  checked {passed}")
    idle_after = _idle_bracket_mhz()
    ncu = find_ncu()
    ncu_rows: list[dict[str, Any]] = []
    ncu_note = "ncu not found"
    if ncu:
        with tempfile.TemporaryDirectory() as tmp:
            spec = Path(tmp) / "spec.json"
            spec.write_text(json.dumps({"n": n}))
            command = [ncu, "--target-processes", "all", "--clock-control", "none", "--nvtx", "--nvtx-include",
                       f"{NVTX_RANGE}/", "--metrics", ",".join(NCU_METRICS), "--csv", "--page", "raw",
                       "--print-units", "base", sys.executable, "-m", "gemm_course.measure.clocks", str(spec)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        parsed = parse_ncu_csv(done.stdout)
        ncu_note = f"{ncu_version(ncu)}: {len(parsed)} kernel rows, exit {done.returncode}"
        names = [r["workload"] for r in rows]
        one_each = len(parsed) == len(names)  # each workload launches one kernel: rows match in order
        for i, r in enumerate(parsed):
            v = r["values"]
            ncu_rows.append({"workload": names[i] if one_each else None, "kernel": r["kernel"][:200],
                             "sm_clock_mhz": (v.get(NCU_METRICS[0]) or 0) / 1e6 or None,
                             "duration_ns": v.get(NCU_METRICS[1]), "sm_cycles": v.get(NCU_METRICS[2])})
        if one_each:
            for row, nr in zip(rows, ncu_rows):
                row["ncu_mhz"] = nr["sm_clock_mhz"]
        progress(ncu_note)
    method = ("bracket: bench.KernelClock around each timed launch of bench.time_gpu (min 20, max 50 reps, 1 s, "
              f"L2 flushed, {HARNESS_SETTLE_S} s settle); alone: bench.spin_clock_mhz, one block per SM spinning 5 ms "
              "right after the timed launches; nvml: NVML during the repetitions; ncu: "
              f"{','.join(NCU_METRICS)} with --clock-control none for one launch inside an NVTX range after "
              f"{SETTLE_S} s of unprofiled launches of the same kernel, in a separate process; idle_bracket: the "
              "bracket probe around a 5 ms host sleep with nothing launched between")
    payload = {"schema": 1, "provenance": {**provenance(method), "ncu": ncu_note}, "records": [],
               "clock_methods": rows, "clock_methods_ncu": ncu_rows,
               "idle_bracket_mhz": {"before": idle_before, "after": idle_after}}
    _write_json(Path(out), payload)
    return payload


def _ncu_child(spec_path: str) -> None:
    """The program ncu profiles: each workload settles unprofiled, then launches once in the range."""
    import cupy
    from cupy.cuda import nvtx

    n = json.loads(Path(spec_path).read_text())["n"]
    for name, launch, _ in _workloads(n):
        until = time.perf_counter() + SETTLE_S
        while time.perf_counter() < until:
            launch()
            cupy.cuda.Device().synchronize()
        nvtx.RangePush(NVTX_RANGE)
        launch()
        cupy.cuda.Device().synchronize()
        nvtx.RangePop()


if __name__ == "__main__":
    _ncu_child(sys.argv[1])
