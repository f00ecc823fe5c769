"""The autotuner: sweep a level's valid configurations on this GPU and keep the best per size.

It skips, before timing anything, configurations that the compile report says cannot fit an SM or
spill registers; checks each survivor once for correctness; then times it with the one harness
(bench.time_gpu, L2 flushed, median). Without a GPU, `recorded_best` answers from the H200 sweep.
"""
from __future__ import annotations


from typing import Any, Callable, Iterable, Optional

from gemm_course import device
from gemm_course.measure import results
from gemm_course.levels import Level, get_level


def search_space(level: str | int | Level) -> list[dict[str, Any]]:
    """The configurations the tuner tries: the level's sweep filter over its valid settings. The `record`
    command sweeps the same list (__main__.record_plan calls this), so a sweep recorded today covers it."""
    lv = get_level(level)
    keep = lv.sweep or (lambda p: True)
    return [s for s in lv.valid_settings() if keep(s)]


def sweep_coverage(level: str | int | Level) -> dict[str, Any]:
    """Today's search space beside the recorded sweep at the level's sweep size (both with every parameter
    filled in): how many settings each holds, and those only one of them holds. A recorded file was swept
    with the search space of its day; where the level's parameters or sweep filter changed since, they differ."""
    import json

    lv = get_level(level)
    key = lambda p: json.dumps(lv.resolve(**p), sort_keys=True)  # noqa: E731
    space = {key(p): p for p in search_space(lv)}
    names = {q.name for q in lv.params}
    recorded = {key({k: v for k, v in r["params"].items() if k in names}): r["params"]
                for r in results.sweep_records(lv.id, lv.sweep_size, dtype=lv.dtypes[0])}
    return {"level": lv.id, "space": len(space), "recorded": len(recorded),
            "not_recorded": [space[k] for k in space.keys() - recorded.keys()],
            "not_in_space": [recorded[k] for k in recorded.keys() - space.keys()]}


def autotune(level: str | int | Level, sizes: Iterable[int | tuple[int, int, int]],
             configs: Optional[list[dict[str, Any]]] = None, progress: Callable[[str], None] = print,
             budget_s: float = 0.3, max_reps: int = 20) -> dict[str, Any]:
    """Time every configuration at every size on this GPU; return all timings and the best per size."""
    import cupy

    from gemm_course.measure.bench import time_gpu
    from gemm_course.run.check import random_operands, relative_error, tolerance
    from gemm_course.run.compile import compile_report
    from gemm_course.run.dtypes import storage_dtype, to_float64
    from gemm_course.run.launch import gemm
    from gemm_course.models import gemm_flops

    lv = get_level(level)
    device.require_gpu("autotuning")
    candidates = []
    for p in configs or search_space(lv):
        report = compile_report(lv, **p)
        if report.spills or report.occupancy.blocks_per_sm == 0:
            progress(f"skip {p}: " + "; ".join(en for en, _ in report.problems()))
            continue
        candidates.append(p)
    table: list[dict[str, Any]] = []
    best: dict[str, dict[str, Any]] = {}
    try:
        for size in sizes:
            M, N, K = (size, size, size) if isinstance(size, int) else size
            A, B = random_operands(M, N, K, lv.dtypes[0])
            reference = to_float64(A) @ to_float64(B)
            for i, p in enumerate(candidates):
                C = cupy.empty((M, N), dtype=storage_dtype(lv.c_type(p, lv.dtypes[0])))
                gemm(A, B, lv, out=C, **p)
                if not relative_error(C, reference) <= tolerance(lv.dtypes[0], K, lv.c_type(p, lv.dtypes[0])):
                    progress(f"{p}: wrong result at {M}×{N}×{K}, skipped")
                    continue
                t = time_gpu(lambda: gemm(A, B, lv, out=C, **p), budget_s=budget_s, max_reps=max_reps)
                row = {"M": M, "N": N, "K": K, "params": p, "median_ms": t.median_ms,
                       "tflops": gemm_flops(M, N, K) / t.median_ms / 1e9}
                table.append(row)
                key = f"{M}x{N}x{K}"
                if key not in best or row["tflops"] > best[key]["tflops"]:
                    best[key] = row
                progress(f"[{i + 1}/{len(candidates)}] {M}×{N}×{K} {p}: {row['tflops']:.2f} TFLOPS "
                         f"(best so far {best[key]['tflops']:.2f})")
    except KeyboardInterrupt:
        progress(f"interrupted: keeping {len(table)} timings")
    return {"level": lv.id, "gpu": device.gpu_name(), "table": table, "best": best}


def recorded_best(level: str | int | Level, size: Optional[int] = None) -> dict[str, Any]:
    """The fastest recorded configuration of a level at a size (default: its sweep size), among the
    runs that swept its settings."""
    lv = get_level(level)
    n = size or lv.sweep_size
    rows = results.sweep_records(lv.id, n, dtype=lv.dtypes[0])
    if not rows:
        raise KeyError(f"no recorded sweep of {lv.id} at {n}³")
    return max(rows, key=lambda r: r["tflops"])


def _cell(level: str, shape: tuple[int, int, int], params: dict[str, Any]) -> str:
    try:
        r = results.find(level, *shape, **params)
    except KeyError:
        return "—"
    return f"{r['tflops']:.2f} ({r['ratio_to_cublas']:.1%})"


def size_rows(entries: Iterable[tuple[str, dict[str, Any]]],
              sizes: Iterable[int | tuple[int, int, int]] = (256, 512, 1024, 2048, 4096, 8192)) -> list[dict[str, str]]:
    """Recorded TFLOPS (and % of cuBLAS in the same run) of chosen (level, params) over sizes: n for
    n³, or (M, N, K)."""
    shapes = [(n, n, n) if isinstance(n, int) else tuple(n) for n in sizes]
    rows = []
    for level, params in entries:
        lv = get_level(level)
        p = lv.resolve(**params)
        row = {"level · 级别": lv.id, "setting · 设置": ", ".join(f"{k}={v}" for k, v in params.items()) or "default"}
        row.update({(f"{M}³" if M == N == K else f"{M}×{N}×{K}"): _cell(lv.id, (M, N, K), p) for M, N, K in shapes})
        rows.append(row)
    return rows


def ladder_rows(sizes: Iterable[int] = (1024, 4096, 8192)) -> list[dict[str, str]]:
    """The recorded ladder: each level's default setting, TFLOPS (% of cuBLAS) per size, seed claim."""
    from gemm_course.levels import levels

    fp32 = [lv for lv in levels() if not lv.uses_tensor_cores]  # the fp32 ladder, one cuBLAS baseline
    rows = size_rows([(lv.id, {}) for lv in fp32], sizes)
    for row, lv in zip(rows, fp32):
        row["setting · 设置"] = ", ".join(f"{k}={v}" for k, v in lv.defaults.items())
        claim = results.SEED_CLAIMS.get(lv.id)
        row["the original guide's claim, 1024³ · 最初那份指南的声称"] = f"{claim:.0%}" if claim is not None else "—"
    return rows
