"""The kernel-clock method of the timing harness (bench.KernelClock / clock_from_readings), the recorded
comparison of clock readings (h200_clock_methods.json), and the baselines Level 13 names; no GPU needed."""
from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest

from gemm_course.fp8 import gemm as fp8_gemm
from gemm_course.measure import results

bench = importlib.import_module("gemm_course.measure.bench")  # the module (the package exports a function of that name)


def _readings(clocks_mhz: dict[int, float], reps: int = 3, blocks_per_sm: int = 2, span_ns: int = 1_000_000,
              gap_ns: int = 5_000) -> np.ndarray:
    """Synthetic probe readings: each SM counts cycles at its own clock; blocks of one probe read a few
    microseconds apart; the after-probe comes span_ns after the before-probe."""
    rows = np.zeros((reps, 2, blocks_per_sm * len(clocks_mhz), 3), dtype=np.uint64)
    t = 10_000_000
    for rep in range(reps):
        for which, start in ((0, t), (1, t + span_ns)):
            for i, (sm, mhz) in enumerate(sorted(clocks_mhz.items())):
                for b in range(blocks_per_sm):
                    ns = start + b * gap_ns
                    rows[rep, which, i * blocks_per_sm + b] = (sm, int(ns * mhz / 1e3) + 12345 * sm, ns)
        t += 3 * span_ns
    return rows


def test_clock_from_readings_is_cycles_over_time_on_each_sm():
    # SM counters start at different values (12345·sm): only differences on the same SM count
    got = bench.clock_from_readings(_readings({0: 1500.0, 1: 1600.0, 2: 1700.0}))
    assert got == pytest.approx(1600.0, rel=1e-3)  # the median over SMs
    # the blocks of one probe read at different moments: any pair on one SM gives that SM's clock
    one = bench.clock_from_readings(_readings({5: 1550.0}, blocks_per_sm=4, gap_ns=50_000))
    assert one == pytest.approx(1550.0, rel=1e-3)


def test_clock_from_readings_skips_what_cannot_be_paired():
    r = _readings({0: 1500.0, 1: 1700.0})
    r[:, 1, 2:, 0] = 7  # SM 1 missing from every after-probe, SM 7 from every before-probe
    assert bench.clock_from_readings(r) == pytest.approx(1500.0, rel=1e-3)
    assert bench.clock_from_readings(np.zeros((0, 2, 4, 3))) is None


def test_timing_in_cycles():
    t = bench.Timing.from_samples([1.0, 2.0, 3.0], sm_clock_mhz=1500.0, nvml_sm_clock_mhz=1980.0)
    assert t.megacycles == pytest.approx(3.0) and t.nvml_sm_clock_mhz == 1980.0
    assert bench.Timing.from_samples([1.0]).megacycles is None
    assert "clock64" in bench.METHOD and "nvml_sm_clock_mhz" in bench.METHOD and "settle" in bench.METHOD


def test_recorded_clock_methods():
    """The recorded comparison: NVML and a probe running alone read near the full clock for every kernel,
    the bracket around the timed launches reads the Tensor Core kernels far lower, and in cycles the bracket
    agrees with Nsight Compute's reading of the same kernel."""
    data = results.load(results.RESULTS_DIR / "h200_clock_methods.json")
    rows = {r["workload"]: r for r in data["clock_methods"]}
    assert all(r["passed"] for r in rows.values())
    fp32 = [rows[w] for w in ("cublas_fp32", "level08_fp32")]
    tensor = [r for w, r in rows.items() if w not in ("cublas_fp32", "level08_fp32")]
    assert all(r["bracket_mhz"] > 1950 for r in fp32) and all(r["bracket_mhz"] < 1700 for r in tensor)
    assert all(r["alone_mhz"] > 1850 for r in rows.values())
    assert all(r["nvml_mhz"] > r["bracket_mhz"] + 100 and r["alone_mhz"] > r["bracket_mhz"] + 200 for r in tensor)
    for r in rows.values():
        ncu = next(n for n in data["clock_methods_ncu"] if n["workload"] == r["workload"])
        bracket_cycles = r["timing"]["median_ms"] * 1e-3 * r["bracket_mhz"] * 1e6
        assert bracket_cycles == pytest.approx(ncu["sm_cycles"], rel=0.06), r["workload"]
    assert all(v > 1900 for v in data["idle_bracket_mhz"].values())  # clock64 counts on an idle SM


def test_level13_baselines_are_named_and_absent_without_pytorch():
    assert set(fp8_gemm.BASELINES) == {"cublaslt_fast", "cublaslt_promoted", "cublaslt_blockwise"}
    assert set(fp8_gemm.BASELINES) < set(results.BASELINE_NAMES)
    if importlib.util.find_spec("torch") is None:
        fp8_gemm._blockwise_api.cache_clear()
        assert fp8_gemm._blockwise_api() is None
        assert fp8_gemm._torch_blockwise_scaled_mm(None, None, None, None, 128, 128, 128) is None
    # an older record that named its baseline by description still maps to the short name
    assert results.baseline_of({"baseline": fp8_gemm._baseline_name(True)}) == "cublaslt_fast"
    assert results.baseline_of({"baseline": fp8_gemm._baseline_name(False)}) == "cublaslt_promoted"
    assert results.baseline_of({}) == "cublas"
