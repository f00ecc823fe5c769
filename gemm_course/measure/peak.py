"""Measured instruction ceilings: how fast this GPU issues FFMA and mma.sync when nothing else runs.

A data sheet's peak is SMs × operations per SM per cycle × the top boost clock. What a kernel can
reach is set by the rate the SMs really sustain, at the clock they really run at under load, for
the instruction the kernel really uses. The probes in kernels/peak_probe.cu measure exactly that:
independent chains of one instruction, no memory traffic, timed with the course's one harness
(without the L2 flush, which has nothing to flush here). Level 8's gap to the FP32 peak and
Level 10's gap to cuBLAS are read against these numbers.

    python -m gemm_course peak --out mine.json
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from gemm_course import device
from gemm_course.levels import KERNEL_DIR

PROBE_FILE = "peak_probe.cu"
CHAIN_OCCUPANCIES = ((4, 1), (8, 1), (8, 2), (16, 2), (16, 4))  # (warps per block, blocks per SM)
MMA = 16 * 8 * 16 * 2  # flops of one m16n8k16
# Each timed launch of a probe runs at least this long, so the fixed cost of a launch (measured with an
# empty kernel and recorded beside the probes, about 10 µs) stays under 1% of every figure.
PROBE_MIN_MS = 10.0
METHOD = ("CUDA events around each launch; 1 untimed call, then at least 5 and at most 20 timed repetitions "
          "within a 1 s budget per probe and occupancy; the loop count of each probe and occupancy is raised "
          f"(by powers of two) until one launch lasts at least {PROBE_MIN_MS:g} ms, so the launch's fixed cost "
          "(an empty kernel timed the same way, recorded as launch_overhead) is under 1%; no L2 flush (the "
          "probes touch no memory in their loops); median with quartiles; grid = SMs × blocks per SM; flops "
          "counted from the instructions the loop issues (FFMA: 2, m16n8k16: 4096 per warp). Level 10's "
          "parts (pipeline_parts) are timed "
          "like the GEMMs: L2 flushed before every repetition, at least 5 and at most 50 repetitions within "
          "2 s, bf16 inputs uniform(−1, 1).")


@dataclass(frozen=True)
class Probe:
    kernel: str
    dtype: str
    flops_per_warp_iteration: int  # flops one warp does in one trip of the probe's loop
    iterations: int
    occupancies: tuple[tuple[int, int], ...]  # (warps per block, blocks per SM) to try
    what: str


PROBES: dict[str, Probe] = {
    "ffma": Probe("ffma_peak<8>", "float32", 8 * 32 * 2, 1 << 12, CHAIN_OCCUPANCIES,
                  "8 independent FFMA chains per thread"),
    "mma_sync_fp16": Probe("mma_sync_peak<false, 8>", "float16", 8 * MMA, 1 << 13, CHAIN_OCCUPANCIES,
                           "8 independent mma.sync chains per warp, fp16"),
    "mma_sync_bf16": Probe("mma_sync_peak<true, 8>", "bfloat16", 8 * MMA, 1 << 13, CHAIN_OCCUPANCIES,
                           "8 independent mma.sync chains per warp, bf16"),
    "warp_tile_64x32_mma": Probe("mma_sync_warp_tile<true, 128, false>", "bfloat16", 2 * 16 * MMA, 1 << 12,
                                 ((8, 1), (8, 2)), "Level 10's 64×32 warp tile, mma.sync only"),
    "warp_tile_64x32_ldmatrix": Probe("mma_sync_warp_tile<true, 128, true>", "bfloat16", 2 * 16 * MMA, 1 << 12,
                                      ((8, 1), (8, 2)), "Level 10's 64×32 warp tile, ldmatrix + mma.sync"),
    "warp_tile_64x64_mma": Probe("mma_sync_warp_tile<true, 256, false>", "bfloat16", 2 * 32 * MMA, 1 << 11,
                                 ((8, 1),), "the 64×64 warp tile (BN = 256), mma.sync only"),
    "warp_tile_64x64_ldmatrix": Probe("mma_sync_warp_tile<true, 256, true>", "bfloat16", 2 * 32 * MMA, 1 << 11,
                                      ((8, 1),), "the 64×64 warp tile (BN = 256), ldmatrix + mma.sync"),
}


def probe_source() -> str:
    return (KERNEL_DIR / PROBE_FILE).read_text(encoding="utf-8")


def launch_overhead(progress: Callable[[str], None] = print) -> dict[str, Any]:
    """The fixed cost of one launch as the course's events see it: an empty kernel on one block."""
    import cupy

    from gemm_course.measure.bench import time_gpu
    from gemm_course.run.compile import COMPILE_OPTIONS, _compiled_kernel

    device.require_gpu("timing an empty launch")
    kernel = _compiled_kernel(probe_source(), COMPILE_OPTIONS, "empty_launch", None)
    sink = cupy.zeros(1, dtype=cupy.float32)
    t = time_gpu(lambda: kernel((1,), (32,), (sink,)), flush_l2=False, min_reps=20, max_reps=200, budget_s=0.5)
    progress(f"empty launch: {t.median_ms * 1e3:.1f} µs")
    return {"median_ms": t.median_ms, "q1_ms": t.q1_ms, "q3_ms": t.q3_ms, "reps": t.reps}


def measure_peaks(probes: Sequence[str] = tuple(PROBES), progress: Callable[[str], None] = print,
                  min_ms: float = PROBE_MIN_MS) -> list[dict[str, Any]]:
    """Time every probe at each of its occupancies; one row each. The best row of a probe is its
    ceiling: more warps only help until the issue rate, not the latency, is the limit.

    Each launch is made to last at least min_ms (the loop count doubles until it does), so the
    launch's own fixed cost, some 10 µs, cannot pass for an SM that sits idle."""
    import cupy

    from gemm_course.measure.bench import time_gpu
    from gemm_course.run.compile import COMPILE_OPTIONS, _compiled_kernel

    device.require_gpu("measuring instruction peaks")
    sms = int(device.properties()["multiProcessorCount"])
    clock_hz = int(device.properties()["clockRate"]) * 1e3
    sink = cupy.zeros(1024, dtype=cupy.float32)
    rows = []
    for name in probes:
        probe = PROBES[name]
        kernel = _compiled_kernel(probe_source(), COMPILE_OPTIONS, probe.kernel, None)
        for warps, blocks in probe.occupancies:
            grid, threads = sms * blocks, 32 * warps
            iterations = probe.iterations

            def run() -> None:
                extra = (cupy.float32(0.999),) if name == "ffma" else ()
                kernel((grid,), (threads,), (sink, cupy.int32(iterations)) + extra)

            while True:
                t = time_gpu(run, flush_l2=False, min_reps=5, max_reps=20, budget_s=1.0)
                if t.median_ms >= min_ms or iterations >= 1 << 26:
                    break
                iterations *= 2 ** max(1, math.ceil(math.log2(min_ms / max(t.median_ms, 1e-3))))
            flops = grid * warps * iterations * probe.flops_per_warp_iteration
            tflops = flops / (t.median_ms * 1e-3) / 1e12
            rows.append({"probe": name, "kernel": probe.kernel, "what": probe.what, "dtype": probe.dtype,
                         "warps_per_block": warps, "blocks_per_sm": blocks, "warps_per_sm": warps * blocks,
                         "iterations": iterations, "median_ms": t.median_ms, "q1_ms": t.q1_ms,
                         "q3_ms": t.q3_ms, "reps": t.reps, "tflops": tflops,
                         "flops_per_sm_per_cycle_at_max_clock": flops / (t.median_ms * 1e-3) / sms / clock_hz})
            progress(f"{name}: {warps * blocks} warps per SM, {iterations} iterations, {t.median_ms:.3f} ms, "
                     f"{tflops:.1f} TFLOPS")
    return rows


def ceiling(rows: Sequence[dict[str, Any]], probe: str) -> Optional[dict[str, Any]]:
    """The fastest measured row of a probe (None if it was not measured)."""
    mine = [r for r in rows if r["probe"] == probe]
    return max(mine, key=lambda r: r["tflops"]) if mine else None


PARTS = {"all": "MMA_ALL", "copies": "MMA_COPIES", "math": "MMA_MATH",
         "math_no_barrier": "MMA_MATH | MMA_NO_BARRIER"}
_DEFAULT_PART = "int PARTS = MMA_ALL"


def part_source(part: str) -> str:
    """Level 10's source with the PARTS template default switched to one part (see PARTS)."""
    from gemm_course.run.compile import kernel_source

    source = kernel_source("10_mma_pipeline")
    if _DEFAULT_PART not in source:
        raise RuntimeError("10_mma_pipeline.cu no longer declares `int PARTS = MMA_ALL`; update peak.part_source")
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; choose one of {', '.join(PARTS)}")
    return source.replace(_DEFAULT_PART, f"int PARTS = {PARTS[part]}")
PARTS_SETTINGS: tuple[dict[str, Any], ...] = ({"stages": 4}, {"stages": 4, "BN": 256})


def pipeline_parts(sizes: Sequence[int] = (4096, 8192), settings: Sequence[dict[str, Any]] = PARTS_SETTINGS,
                   dtype: str = "bfloat16", progress: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Level 10 taken apart: the whole kernel, its copies alone (cp.async pipeline and barriers, no
    ldmatrix or mma.sync), its math alone (barriers, ldmatrix and mma.sync on whatever shared
    memory holds, no copies) and the math without the block-wide barrier, each timed like a GEMM
    (L2 flushed). The kernel's PARTS template parameter selects the part; here its default is
    changed in Level 10's own source, so the same launcher runs all of them."""
    import cupy

    from gemm_course.measure.bench import time_gpu
    from gemm_course.run.check import random_operands
    from gemm_course.run.launch import gemm
    from gemm_course.models import gemm_flops

    device.require_gpu("timing Level 10's parts")
    rows = []
    for n in sizes:
        A, B = random_operands(n, n, n, dtype)
        C = cupy.empty((n, n), dtype=cupy.float32)
        for setting in settings:
            row: dict[str, Any] = {"M": n, "N": n, "K": n, "dtype": dtype, "params": dict(setting)}
            for part in PARTS:
                src = part_source(part)
                t = time_gpu(lambda: gemm(A, B, "10_mma_pipeline", out=C, source=src, **setting))
                row[part] = {"median_ms": t.median_ms, "q1_ms": t.q1_ms, "q3_ms": t.q3_ms, "reps": t.reps,
                             "tflops": gemm_flops(n, n, n) / (t.median_ms * 1e-3) / 1e12}
                progress(f"{n}³ {setting} {part}: {t.median_ms:.3f} ms")
            rows.append(row)
        A = B = C = None  # free before the next size
        cupy.get_default_memory_pool().free_all_blocks()
    return rows
