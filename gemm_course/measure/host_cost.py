"""What the public call costs beside the kernel: a repeated gc.gemm (fp8_gemm for Level 13) on the host,
timed back to back with CUDA events, against the timing harness's prepared launch of the same kernel.

`python -m gemm_course hostcost --out FILE` runs it (a GPU); the harness itself is bench.py.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from gemm_course import device
from gemm_course.measure.bench import SETTLE_S, KernelClock, Timing, _l2_flush_buffer, _write_json, provenance, time_gpu
from gemm_course.run.check import epilogue_inputs
from gemm_course.run.dtypes import storage_dtype
from gemm_course.run.launch import gemm
from gemm_course.levels import get_level, is_fp8_level

HOST_COST_SIZE = 4096
HOST_BATCH, HOST_BATCHES = 10, 20  # host time: 20 batches of 10 calls each
HOST_COST_REPS = 50                # CUDA-event timings: medians of 50
HOST_SETTLE_CALLS = 50             # untimed calls before the host timing, at most (a slow kernel queues up fast)
HOST_COST_TARGET_US = 30.0         # a repeated gc.gemm call, on the host before the kernel starts
HOST_COST_TARGET_RATIO = 0.97      # back-to-back gc.gemm within 3% of the harness's prepared launch
HOST_COST_METHOD = (
    "per setting at n³, after one untimed call (compilation) and {settle_s} s of untimed calls (at most "
    "{settle_calls}): host_us: time.perf_counter around each call of gc.gemm (fp8_gemm for Level 13, with out= "
    "given) and of its prepared launch (launch.prepare / fp8_gemm.prepare: the kernel launch alone, one driver call "
    "with its arguments packed once), in {batches} batches of {batch} calls one after another with no "
    "synchronisation inside a batch (the GPU synchronised between batches), the median over all calls; "
    "host_us_batch_mean: the median of the batches' means, which also carries the first call after each wait; "
    "back_to_back: CUDA events around each of {reps} calls of each, the two taking turns call by call without "
    "synchronising, the L2 flushed before each as the harness does (4×L2 bytes written), median, with the SM clock "
    "the kernels ran at; loop: CUDA events around {reps} back-to-back calls with no flush (warm L2), per call; "
    "harness: bench.time_gpu of the prepared launch ({reps} repetitions, the recorded method, with the kernel's SM "
    "clock) and of gc.gemm itself; ratio: back_to_back prepared median over back_to_back gc.gemm median (1: the "
    "public call costs nothing the kernel time shows); harness_ratio: harness prepared median over back_to_back "
    "gc.gemm median (measured at another time, so at another clock). Targets: host_us of gc.gemm ≤ {target_us:g} "
    "µs, ratio ≥ {target_ratio:g}.")


def host_cost_plan(level_ids: Optional[Sequence[str]] = None, all_showcase: bool = False,
                   size: int = HOST_COST_SIZE) -> list[tuple[str, dict[str, Any], str]]:
    """(level, setting, input type) to measure: per registry level, its fastest recorded setting at size³ (else its
    default), or with all_showcase every showcase setting in the level's first input type; then Level 13
    ("13_fp8_blockscaled") in both scalings with their defaults. level_ids: ids or numbers (default: all)."""
    from gemm_course.fp8.gemm import DTYPE, LEVEL_ID, SCALINGS, setting_params
    from gemm_course.levels import levels
    from gemm_course.measure.results import summary

    wanted = None if level_ids is None else {str(x).strip() for x in level_ids}
    fp8 = wanted is None or any(map(is_fp8_level, wanted))
    chosen = list(levels()) if wanted is None else [get_level(x) for x in wanted if not is_fp8_level(x)]
    plan: list[tuple[str, dict[str, Any], str]] = []
    for lv in sorted(chosen, key=lambda lv: lv.number):
        if all_showcase:
            plan += [(lv.id, lv.resolve(**s), lv.dtypes[0]) for s in lv.showcase]
            continue
        rows = [r for r in summary(lv.id) if (r["M"], r["N"], r["K"]) == (size, size, size)]
        best = max(rows, key=lambda r: r["tflops"], default=None)
        plan.append((lv.id, lv.resolve(**best["params"]), best["dtype"]) if best else (lv.id, lv.resolve(), lv.dtypes[0]))
    if fp8:
        plan += [(LEVEL_ID, setting_params(s), DTYPE) for s in SCALINGS]
    return plan


def host_cost_record(level: str, params: dict[str, Any], dtype: str, size: int, host_us: dict[str, dict[str, float]],
                     back_to_back: dict[str, Timing], loop_ms: dict[str, float], harness: dict[str, Timing]) -> dict[str, Any]:
    """One setting's measurements, the ratios and whether the targets hold (see HOST_COST_METHOD)."""
    ratio = back_to_back["prepared"].median_ms / back_to_back["gemm"].median_ms
    return {"level": level, "params": params, "dtype": dtype, "M": size, "N": size, "K": size,
            "host_us": {name: h["median"] for name, h in host_us.items()},
            "host_us_batch_mean": {name: h["batch_mean"] for name, h in host_us.items()},
            "back_to_back": {k: asdict(t) for k, t in back_to_back.items()}, "loop_ms": loop_ms,
            "harness": {k: asdict(t) for k, t in harness.items()}, "ratio": ratio,
            "harness_ratio": harness["prepared"].median_ms / back_to_back["gemm"].median_ms,
            "meets_host_target": host_us["gemm"]["median"] <= HOST_COST_TARGET_US,
            "meets_ratio_target": ratio >= HOST_COST_TARGET_RATIO}


def _host_us_per_call(fn: Callable[[], Any], sync: Callable[[], None], batch: int = HOST_BATCH,
                      batches: int = HOST_BATCHES) -> dict[str, float]:
    """Host microseconds per call of fn, in batches of calls one after another (the GPU synchronised between
    batches, never inside one): "median", the median over every call, and "batch_mean", the median of the
    batches' means (which also carries the first call after each wait, when the CPU has been idle)."""
    per_call, means = [], []
    for _ in range(batches):
        sync()
        began = time.perf_counter()
        for _ in range(batch):
            t0 = time.perf_counter()
            fn()
            per_call.append((time.perf_counter() - t0) * 1e6)
        means.append((time.perf_counter() - began) / batch * 1e6)
    sync()
    return {"median": float(np.median(per_call)), "batch_mean": float(np.median(means))}


def _events_back_to_back(calls: dict[str, Callable[[], Any]], reps: int, flush_l2: bool) -> dict[str, Timing]:
    """Per call: the milliseconds of each of reps launches made one after another with no synchronisation,
    CUDA events around each (and the L2 flushed before each where flush_l2), what a user's timing loop sees,
    with the SM clock the kernel ran at (KernelClock). The calls take turns, rep by rep, so that every one of
    them runs under the same clock and temperature."""
    import cupy

    events = {name: [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)] for name in calls}
    clocks = {name: KernelClock(reps) for name in calls}
    for rep in range(reps):
        for name, fn in calls.items():
            if flush_l2:
                _l2_flush_buffer().fill(rep)
            start, stop = events[name][rep]
            clocks[name].before()
            start.record()
            fn()
            stop.record()
            clocks[name].after()
    cupy.cuda.get_current_stream().synchronize()
    return {name: Timing.from_samples([cupy.cuda.get_elapsed_time(a, b) for a, b in events[name]], clocks[name].mhz)
            for name in calls}


def _loop_ms(fn: Callable[[], Any], reps: int) -> float:
    """CUDA events around reps back-to-back calls (warm L2), per call."""
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / reps


def _host_cost_calls(level: str, params: dict[str, Any], dtype: str, size: int) -> tuple[Callable, Callable, Any]:
    """(the public call, its prepared launch, the inputs kept alive) for one setting at size³."""
    import cupy

    from gemm_course.run.check import random_operands
    from gemm_course.run.launch import prepare

    if level == "13_fp8_blockscaled":
        from gemm_course.fp8 import gemm as fp8_gemm

        a_bits, a_s, b_bits, b_s = fp8_gemm.random_fp8_operands(size, size, size, params["scaling"], xp=cupy)
        # Scales on the GPU as float32 already, as a caller who repeats a call keeps them: fp8_gemm copies
        # NumPy scales to the GPU on every call (their values may have changed since the last).
        a_s, b_s = (cupy.asarray(s, dtype=cupy.float32) for s in (a_s, b_s))
        C = cupy.empty((size, size), dtype=cupy.uint16)
        launch, _ = fp8_gemm.prepare(a_bits, a_s, b_bits, b_s, out=C, **params)
        return (lambda: fp8_gemm.fp8_gemm(a_bits, a_s, b_bits, b_s, out=C, **params)), launch, (a_bits, b_bits, C)
    lv = get_level(level)
    A, B = random_operands(size, size, size, dtype)
    C = cupy.empty((size, size), dtype=storage_dtype(lv.c_type(params, dtype)))
    run = dict(params)
    if lv.epilogue:  # its bias (where the setting has one), alpha and beta, as the recorded runs pass them;
        # epilogue_inputs reads N from the product's shape (one row is enough: no reference is needed here)
        run.update(epilogue_inputs(params, cupy.zeros((1, size)), dtype, cupy)[0])
    launch, _ = prepare(A, B, level, out=C, **run)
    return (lambda: gemm(A, B, level, out=C, **run)), launch, (A, B, C, run)


def host_cost(plan: Optional[Sequence[tuple[str, dict[str, Any], str]]] = None, size: int = HOST_COST_SIZE, *,
              out: Optional[str | Path] = None, progress: Callable[[str], None] = print,
              reps: int = HOST_COST_REPS) -> dict[str, Any]:
    """What one repeated gc.gemm call costs beside its kernel, per setting of host_cost_plan() (see
    HOST_COST_METHOD): host µs per call, back-to-back calls timed with CUDA events, and the harness's prepared
    launch in the same run. Written to `out` after every setting; kept as measured if interrupted."""
    import cupy

    device.require_gpu("measuring the host cost of gc.gemm")
    plan = host_cost_plan(size=size) if plan is None else plan
    method = HOST_COST_METHOD.format(settle_s=SETTLE_S, settle_calls=HOST_SETTLE_CALLS, batch=HOST_BATCH,
                                     batches=HOST_BATCHES, reps=reps,
                                     target_us=HOST_COST_TARGET_US, target_ratio=HOST_COST_TARGET_RATIO)
    result: dict[str, Any] = {"schema": 1, "provenance": provenance(method), "host_cost": []}  # not timing records of the ladder: a key of its own
    path = Path(out) if out else None
    cc = device.compute_capability()
    sync = cupy.cuda.get_current_stream().synchronize
    try:
        for level, params, dtype in plan:
            if level != "13_fp8_blockscaled" and not get_level(level).setting_runs_on(cc, params):
                progress(f"skipping {level} {params}: this GPU (sm_{cc}) cannot run it")
                continue
            if level == "13_fp8_blockscaled" and cc != 90:
                progress(f"skipping {level} {params}: it runs on sm_90 only, this GPU is sm_{cc}")
                continue
            call, launch, keep = _host_cost_calls(level, params, dtype, size)
            call()  # untimed: compilation, module load
            sync()
            settle_until = time.perf_counter() + SETTLE_S
            for _ in range(HOST_SETTLE_CALLS):
                if time.perf_counter() >= settle_until:
                    break
                call()
            sync()
            host = {"gemm": _host_us_per_call(call, sync), "prepared": _host_us_per_call(launch, sync)}
            b2b = _events_back_to_back({"gemm": call, "prepared": launch}, reps, flush_l2=True)
            loop = {name: _loop_ms(fn, reps) for name, fn in (("gemm", call), ("prepared", launch))}
            harness = {name: time_gpu(fn, min_reps=reps, max_reps=reps) for name, fn in (("prepared", launch),
                                                                                        ("gemm", call))}
            rec = host_cost_record(level, params, dtype, size, host, b2b, loop, harness)
            result["host_cost"].append(rec)
            progress(f"{level} {params} {dtype} {size}³: host {rec['host_us']['gemm']:.1f} µs per call (prepared "
                     f"launch {rec['host_us']['prepared']:.1f} µs); back to back {b2b['gemm'].median_ms:.4f} ms, harness "
                     f"{harness['prepared'].median_ms:.4f} ms, ratio {rec['ratio']:.3f} (to the harness {rec['harness_ratio']:.3f})")
            if path:
                _write_json(path, result)
            del keep, call, launch
            cupy.get_default_memory_pool().free_all_blocks()
    except KeyboardInterrupt:
        progress(f"interrupted: keeping the {len(result['host_cost'])} settings measured so far")
        result["interrupted"] = True
    if path:
        _write_json(path, result)
    return result
