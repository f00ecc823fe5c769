"""Level 13's A scales by TMA (staged_scales="tma"), checked and measured in one run:

    python -m gemm_course fp8 --record --tma-scales [--peer deepgemm] --out FILE

The blockwise kernels of gemm_course/kernels/13_fp8_blockscaled.cu can find their scales three ways (the kernel's
SCALES): each consumer thread loads its own from global memory (staged_scales=False); the producer warp copies
them into each stage, one 4-byte cp.async per row of the tile (True: 129 copies a stage, each its own sector,
since A's scales are stored row-major); or the producer brings A's as ONE TMA box per stage from an M-major copy
(fp8.gemm.a_scales_m_major), completing on the stage's full barrier like A and B ("tma"; B's one scale per k-block
comes beside it by one 4-byte cp.async of the same thread). This run, on one GPU, in one process:

1. checks every way against fp8.reference_gemm_fp8 (float64) with the course's tolerance (fp8.gemm.allowed_error)
   on odd shapes (M, N, K not multiples of the tiles), split-K and every ring depth of the new way: random inputs
   (never zero), C poisoned with NaN and guarded on both sides, so an element left unwritten or written outside C
   fails;
2. checks the split-K fixup counters (Level 13's and Level 11 step 7's, hopper.fixup_counters) against a launch
   cut short: the counters are set to what such a launch leaves (its epoch with some arrivals, or stale values),
   then the next launch must still write every element of C right and bit for bit as before;
3. times, shape by shape at the shapes of `fp8 --record` (fp8.deepgemm._default_sizes), Level 13's best recorded
   setting, the three ways to the scales at one ring depth (the deepest all three can use: 6 stages for 128-row
   tiles, where the extra box costs the seventh), block-scaled cuBLASLt and, with --peer deepgemm, DeepGEMM, all
   through deepgemm.record_peer (bench.time_gpu, every output checked, the order rotated shape by shape).

The checks go under "checks" and the timings under "scale_records" of the result file (not "records" or
"peer_records": the ladder and the DeepGEMM comparison read those). A failed check stops the run before timing.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from gemm_course.fp8 import gemm as fg

SCALE_WAYS = fg.STAGED_SCALES  # False, True, "tma"
RECORDS_KEY = "scale_records"

# Odd shapes: M, N, K not multiples of the tiles (K a multiple of 16, TMA's rule, which check_operands enforces),
# a K shorter than one k-block, N odd and below 8, more tiles than SMs, and projection-like split-K shapes.
CHECK_SHAPES = ((1, 8, 16), (7, 13, 48), (129, 257, 1040), (300, 264, 1152), (65, 3, 2064), (2000, 2100, 1024),
                (64, 2112, 7168), (100, 300, 4096))
# Each way to the scales in each kernel, with split-K forced (cut to the k-blocks K has) and chosen by the model.
CHECK_SETTINGS = tuple(
    {**s, **({"staged_scales": way} if way is not False else {})} for way in SCALE_WAYS for s in (
        {"overlap": True, "splits": 1}, {"overlap": False, "splits": 3}, {"overlap": True, "splits": "auto"},
        {"block_m": 64, "splits": 1}, {"block_m": 64, "splits": 3}))
DEPTH_SHAPE = (300, 264, 1152)  # every ring depth of the new way, here
CUT_SHORT_SHAPE = (64, 2112, 2048)
STREAM_K_SHAPES = ((300, 1032, 2048), (3000, 3000, 520), (64, 2112, 7168))  # Level 11 step 7 (test_gpu's, in part)


def _setting_text(setting: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in setting.items())


def _splits_for(setting: dict[str, Any], K: int) -> dict[str, Any]:
    options = dict(setting)
    if isinstance(options.get("splits"), int):
        options["splits"] = min(options["splits"], math.ceil(K / fg.BK))
    return options


def check_shape(setting: dict[str, Any], shape: tuple[int, int, int], seed: int = 0,
                stages: Optional[int] = None) -> dict[str, Any]:
    """One blockwise launch on fresh random operands against the float64 reference, C poisoned with NaN and 16
    guard values on each side: max error / allowed (≤ 1 passes), elements left NaN, values written outside C."""
    import cupy

    from gemm_course.fp8.formats import reference_gemm_fp8
    from gemm_course.run.dtypes import to_float64

    M, N, K = shape
    a_bits, a_s, b_bits, b_s = fg.random_fp8_operands(M, N, K, "blockwise", seed=seed, xp=cupy)
    ref = reference_gemm_fp8(a_bits, cupy.asarray(a_s), b_bits, cupy.asarray(b_s))
    allowed = fg.allowed_error(ref, fg.magnitude_gemm(a_bits, cupy.asarray(a_s), b_bits, cupy.asarray(b_s)), K,
                               "blockwise")
    guard = 16  # bf16 values: C still starts on a 16-byte boundary
    buffer = cupy.full(M * N + 2 * guard, fg.BF16_NAN, dtype=cupy.uint16)
    out = buffer[guard:guard + M * N].reshape(M, N)
    options = _splits_for(setting, K)
    fg.fp8_gemm(a_bits, a_s, b_bits, b_s, scaling="blockwise", out=out, stages=stages, **options)
    cupy.cuda.get_current_stream().synchronize()
    got = to_float64(out)
    unwritten = int(cupy.isnan(got).sum())
    outside = int((buffer[:guard] != fg.BF16_NAN).sum() + (buffer[-guard:] != fg.BF16_NAN).sum())
    err = cupy.abs(got - ref) / allowed
    ratio = float("inf") if unwritten else float(err.max())
    depth = fg.resolve_stages("blockwise", stages, options.get("block_n"), options.get("block_m"),
                              staged_scales=options.get("staged_scales", False))
    return {"check": "odd shape", "setting": {**options, "stages": depth}, "M": M, "N": N, "K": K,
            "max_error_ratio": ratio, "unwritten": unwritten, "written_outside": outside,
            "passed": ratio <= 1 and unwritten == 0 and outside == 0}


def check_counters_cut_short(options: dict[str, Any], shape: tuple[int, int, int] = CUT_SHORT_SHAPE,
                             seed: int = 5) -> list[dict[str, Any]]:
    """Level 13's split-K after a launch cut short. A launch, then its tile counters set to what a launch that
    stopped halfway leaves (its own epoch with 1 or splits - 1 arrivals: the count a next launch would finish
    wrongly if it kept counting from there; stale untagged counts; random words), then the same launch again on
    a poisoned C: every element must be written, right, and bit for bit the first launch's."""
    import cupy

    from gemm_course.fp8.formats import reference_gemm_fp8
    from gemm_course.run.dtypes import to_float64
    from gemm_course.run.hopper import fixup_counters

    M, N, K = shape
    ops = fg.random_fp8_operands(M, N, K, "blockwise", seed=seed, xp=cupy)
    launch, C = fg.prepare(*ops, scaling="blockwise", **options)
    bm = fg.resolve_block_m("blockwise", options.get("block_m"))
    counters = fixup_counters(fg.tiles(M, N, "blockwise", options.get("block_n"), bm), C.device.id,
                              cupy.cuda.get_current_stream().ptr)
    splits = options["splits"]
    C.fill(fg.BF16_NAN)
    launch()
    cupy.cuda.get_current_stream().synchronize()
    first = C.copy()
    ref = reference_gemm_fp8(*ops)
    allowed = fg.allowed_error(ref, fg.magnitude_gemm(*ops), K, "blockwise")
    rng = np.random.default_rng(seed)
    rows = []
    for state in ("this epoch, splits - 1 arrivals", "this epoch, 1 arrival", "untagged, splits - 1", "random words"):
        last = int(counters.epoch.last)  # the epoch the launch before used
        n = counters.array.size
        if state.startswith("this epoch"):
            count = splits - 1 if "splits - 1" in state else 1
            values = np.full(n, (last << 8) | count, np.uint32)
        elif state.startswith("untagged"):
            values = np.full(n, splits - 1, np.uint32)
        else:
            values = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
            values[(values >> 8) == last + 1] ^= 1 << 31  # never the next launch's own epoch
        counters.array[...] = cupy.asarray(values.view(np.int32))
        C.fill(fg.BF16_NAN)
        launch()
        cupy.cuda.get_current_stream().synchronize()
        got = to_float64(C)
        unwritten = int(cupy.isnan(got).sum())
        ratio = float("inf") if unwritten else float((cupy.abs(got - ref) / allowed).max())
        same = bool((C == first).all())
        rows.append({"check": "split-K counters after a launch cut short", "level": fg.LEVEL_ID,
                     "setting": options, "M": M, "N": N, "K": K, "counters_left": state,
                     "max_error_ratio": ratio, "unwritten": unwritten, "bit_identical_to_first": same,
                     "passed": ratio <= 1 and unwritten == 0 and same})
    return rows


def check_stream_k_cut_short(shape: tuple[int, int, int] = (3000, 3000, 520), seed: int = 7) -> list[dict[str, Any]]:
    """The same for Level 11 step 7 (stream-K), whose fixup counters are hopper.fixup_counters too: gc.check
    at STREAM_K_SHAPES first (float64 reference, poisoned output), then at one shape the counters set as a launch
    cut short leaves them, and the product again: every element written and bit for bit the first one's."""
    import cupy

    import gemm_course as gc
    from gemm_course.levels import hopper_pairs
    from gemm_course.run.hopper import fixup_counters

    lv = "11_hopper_wgmma"
    rows = []
    for M, N, K in STREAM_K_SHAPES:
        result = gc.check(lv, M, N, K, step=7)
        rows.append({"check": "stream-K on odd shapes", "level": lv, "setting": {"step": 7}, "M": M, "N": N, "K": K,
                     "relative_error": float(result.relative_error), "tolerance": float(result.tolerance),
                     "unwritten": int(result.unwritten), "passed": bool(result.passed)})
    M, N, K = shape
    A, B = gc.random_operands(M, N, K, "bfloat16", seed=seed)
    first = gc.gemm(A, B, lv, step=7)
    cupy.cuda.get_current_stream().synchronize()
    counters = fixup_counters(4 * hopper_pairs(M, N), first.device.id, cupy.cuda.get_current_stream().ptr)
    rng = np.random.default_rng(seed)
    for state in ("this epoch, 1 arrival", "untagged, 1", "random words"):
        last = int(counters.epoch.last)
        n = counters.array.size
        if state.startswith("this epoch"):
            values = np.full(n, (last << 8) | 1, np.uint32)
        elif state.startswith("untagged"):
            values = np.full(n, 1, np.uint32)
        else:
            values = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
            values[(values >> 8) == last + 1] ^= 1 << 31
        counters.array[...] = cupy.asarray(values.view(np.int32))
        out = cupy.full_like(first, cupy.nan)
        gc.gemm(A, B, lv, step=7, out=out)
        cupy.cuda.get_current_stream().synchronize()
        unwritten = int(cupy.isnan(out).sum())
        same = bool((out == first).all())
        rows.append({"check": "stream-K counters after a launch cut short", "level": lv, "setting": {"step": 7},
                     "M": M, "N": N, "K": K, "counters_left": state, "unwritten": unwritten,
                     "bit_identical_to_first": same, "passed": unwritten == 0 and same})
    return rows


def kernel_names() -> list[str]:
    """Every Level 13 kernel the checks and the timing compile (warm_compile builds them in parallel first)."""
    names = set()
    for setting in CHECK_SETTINGS:
        names.add(fg.kernel_name("blockwise", None, overlap=setting.get("overlap", True), block_m=setting.get("block_m"),
                                 staged_scales=setting.get("staged_scales", False)))
    for bm in (128, 64):
        for st in fg.stage_choices("blockwise", block_m=bm, staged_scales="tma"):
            names.add(fg.kernel_name("blockwise", st, block_m=bm, staged_scales="tma"))
    from gemm_course.fp8.deepgemm import _default_sizes, level13_best

    for shape in _default_sizes():
        best, _ = level13_best(*shape)
        for p in [best] + [v for v, _ in variants(*shape, best)]:
            names.add(fg.kernel_name("blockwise", p["stages"], overlap=p.get("overlap", True), block_m=p.get("block_m"),
                                     staged_scales=p.get("staged_scales", False)))
    return sorted(names)


def _compile_one(name: str) -> str:
    from gemm_course.run.compile import nvrtc_compile

    nvrtc_compile(fg.kernel_source(), name, fg.ARCH, fg._compile_options())
    return name


def warm_compile(names: Sequence[str], processes: int = 16) -> None:
    """Compile the kernels in parallel processes into NVRTC's disk cache (compile.nvrtc_cache_dir), so that the
    run's first launches only load them."""
    import concurrent.futures as cf
    import multiprocessing

    with cf.ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_compile_one, names))


def variants(M: int, N: int, K: int, best: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The settings timed beside the best recorded one at a shape: the three ways to the scales (global, cp.async
    staged, TMA) at one ring depth, the best's or the deepest the TMA way fits (6 stages with 128-row tiles: its
    extra 512 bytes a stage cost the seventh), the best's other options kept; the best itself is not repeated."""
    bm = best.get("block_m")
    depth = min(best["stages"], max(fg.stage_choices("blockwise", block_m=bm, staged_scales="tma")))
    out = []
    for way in SCALE_WAYS:
        p = fg.setting_params("blockwise", stages=depth, block_m=bm, overlap=best.get("overlap", True),
                              splits=best.get("splits"), staged_scales=way)
        if p != best:
            out.append((p, f"variant: the best setting with staged_scales={way!r} at {depth} stages"))
    return out


def run_checks(progress: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Steps 1 and 2 of the module's run (see its docstring); one row per check."""
    rows = []
    for setting in CHECK_SETTINGS:
        for i, shape in enumerate(CHECK_SHAPES):
            rows.append(check_shape(setting, shape, seed=i + 1))
    for bm in (128, 64):
        for st in fg.stage_choices("blockwise", block_m=bm, staged_scales="tma"):
            setting = {"splits": 1, "staged_scales": "tma", **({"block_m": 64} if bm == 64 else {})}
            rows.append(check_shape(setting, DEPTH_SHAPE, seed=st, stages=st))
    for options in ({"splits": 4}, {"block_m": 64, "splits": 3}, {"splits": 4, "staged_scales": True},
                    {"block_m": 64, "splits": 3, "staged_scales": "tma"}, {"splits": 4, "staged_scales": "tma"}):
        rows += check_counters_cut_short(options)
    rows += check_stream_k_cut_short()
    return reported(rows, progress)


def reported(rows: list[dict[str, Any]], progress: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """The check rows, after saying how many failed and which (the first 20)."""
    failed = [r for r in rows if not r["passed"]]
    progress(f"checks: {len(rows)} run, {len(failed)} failed")
    for r in failed[:20]:
        progress(f"FAILED {r}")
    return rows


def record_tma_scales(out: str, sizes: Optional[Sequence[Any]] = None, peer: Optional[str] = None,
                      progress: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole run (see the module's docstring): compile, check, then time; the result file at `out`."""
    return checked_then_timed(out, kernel_names(), run_checks, sizes, peer, variants, RECORDS_KEY, progress)


def checked_then_timed(out: str, names: Sequence[str], checks: Callable[[Callable[[str], None]], list[dict[str, Any]]],
                       sizes: Optional[Sequence[Any]], peer: Optional[str], variants: Any, records_key: str,
                       progress: Callable[[str], None] = print) -> dict[str, Any]:
    """A checked recording (this module's, fp8.narrow_tiles'): compile `names` in parallel, run `checks`; a failed
    check writes the checks alone and stops before timing; else deepgemm.record_peer times the variants, the checks
    kept in the file under "checks"."""
    import time
    from pathlib import Path

    from gemm_course.fp8 import deepgemm
    from gemm_course.measure.bench import _write_json, provenance

    fg._require_hopper()
    t0 = time.time()
    warm_compile(names)
    progress(f"compiled {len(names)} kernels in {time.time() - t0:.0f} s")
    t0 = time.time()
    rows = checks(progress)
    progress(f"checks took {time.time() - t0:.0f} s")
    if not all(r["passed"] for r in rows):
        _write_json(Path(out), {"schema": 1, "provenance": provenance("checks only: a check failed, nothing timed"),
                                "records": [], "checks": rows})
        raise SystemExit("a check failed: nothing timed (see the file's checks)")
    return deepgemm.record_peer(out, sizes, peer=peer, variants=variants, records_key=records_key,
                                extra={"checks": rows}, progress=progress)
