"""The autotuner: sweep a level's valid configurations on this GPU and keep the best per size.

It skips, before timing anything, configurations that the compile report says cannot fit an SM or
spill registers; checks each survivor once for correctness; then times it with the one harness
(bench.time_gpu, L2 flushed, median). Level 13 (FP8, outside the level registry) goes through its own
record path, which pairs each setting with its cuBLASLt baseline. Without a GPU, `recorded_best` answers
from the H200 sweeps, at the sweep size and, for Levels 11 and 13, at the decode shapes.
"""
from __future__ import annotations


from typing import Any, Callable, Iterable, Optional, Sequence

from gemm_course import device
from gemm_course.measure import results
from gemm_course.measure.results import FP8_LEVEL
from gemm_course.levels import Level, get_level, is_fp8_level as _is_fp8


Shape = tuple[int, int, int]


def _level_id(level: str | int | Level) -> str:
    return FP8_LEVEL if _is_fp8(level) else get_level(level).id


def _shape(size: int | Sequence[int]) -> Shape:
    return (size, size, size) if isinstance(size, int) else tuple(int(v) for v in size)  # type: ignore[return-value]


def search_space(level: str | int | Level) -> list[dict[str, Any]]:
    """The configurations the tuner tries: the level's sweep filter over its valid settings (Level 13:
    fp8.gemm.search_space). The `record` command sweeps the same list (__main__.record_plan calls this), so a
    sweep recorded today covers it."""
    if _is_fp8(level):
        from gemm_course.fp8 import gemm as fp8_gemm

        return fp8_gemm.search_space()
    lv = get_level(level)
    keep = lv.sweep or (lambda p: True)
    return [s for s in lv.valid_settings() if keep(s)]


def sweep_shapes(level: str | int | Level) -> list[Shape]:
    """The shapes a level's sweep times: its sweep size cubed, then its extra sweep shapes (the decode shapes
    for Levels 11 and 13)."""
    if _is_fp8(level):
        from gemm_course.fp8 import gemm as fp8_gemm

        return list(fp8_gemm.SWEEP_SHAPES)
    lv = get_level(level)
    return [_shape(lv.sweep_size), *lv.sweep_shapes]


def _keyed_space(level: str | int | Level, shape: Shape) -> tuple[str, Callable[[dict[str, Any]], str], dict[str, Any]]:
    """(level id, a key that names a setting as its record does, today's space keyed by it) at one shape."""
    import json

    if _is_fp8(level):
        from gemm_course.fp8 import gemm as fp8_gemm

        key = lambda p: json.dumps(p, sort_keys=True)  # noqa: E731  (records carry resolved FP8 settings)
        return FP8_LEVEL, key, {key(fp8_gemm.resolved_setting(p, *shape)): p for p in search_space(level)}
    lv = get_level(level)
    names = {q.name for q in lv.params}
    key = lambda p: json.dumps(lv.resolve(**{k: v for k, v in p.items() if k in names}), sort_keys=True)  # noqa: E731
    return lv.id, key, {key(p): p for p in search_space(lv)}


def sweep_coverage(level: str | int | Level, size: Optional[int | Sequence[int]] = None) -> dict[str, Any]:
    """Today's search space beside the recorded sweep at one shape (default: the level's first sweep shape),
    both with every parameter filled in: how many settings each holds, and those only one of them holds. A
    recorded file was swept with the search space of its day; where the level's parameters or sweep filter
    changed since, they differ. Level 13's split-K "auto" is resolved at the shape (it may equal splits=1)."""
    shape = _shape(size) if size is not None else sweep_shapes(level)[0]
    level_id, key, space = _keyed_space(level, shape)
    recorded = {key(r["params"]): r["params"] for r in _sweep_rows(level_id, shape, passed_only=False)}
    return {"level": level_id, "shape": shape, "space": len(space), "recorded": len(recorded),
            "not_recorded": [space[k] for k in space.keys() - recorded.keys()],
            "not_in_space": [recorded[k] for k in recorded.keys() - space.keys()]}


def autotune(level: str | int | Level, sizes: Iterable[int | tuple[int, int, int]],
             configs: Optional[list[dict[str, Any]]] = None, progress: Callable[[str], None] = print,
             budget_s: float = 0.3, max_reps: int = 20) -> dict[str, Any]:
    """Time every configuration at every size on this GPU; return all timings and the best per size."""
    device.require_gpu("autotuning")
    if _is_fp8(level):
        return _autotune_fp8([_shape(s) for s in sizes], configs, progress, budget_s, max_reps)
    import cupy

    from gemm_course.measure.bench import time_gpu
    from gemm_course.run.check import random_operands, relative_error, tolerance
    from gemm_course.run.compile import compile_report
    from gemm_course.run.dtypes import storage_dtype, to_float64
    from gemm_course.run.launch import gemm
    from gemm_course.models import gemm_flops

    lv = get_level(level)
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
            M, N, K = _shape(size)
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
                progress(f"[{i + 1}/{len(candidates)}] {M}×{N}×{K} {p}: {row['tflops']:.2f} TFLOPS "
                         f"(best so far {_keep_best(best, row)['tflops']:.2f})")
    except KeyboardInterrupt:
        progress(f"interrupted: keeping {len(table)} timings")
    return {"level": lv.id, "gpu": device.gpu_name(), "table": table, "best": best}


def _keep_best(best: dict[str, dict[str, Any]], row: dict[str, Any]) -> dict[str, Any]:
    """Keep row as its shape's best (keyed "MxNxK") if it is the fastest so far; return that shape's best."""
    key = f"{row['M']}x{row['N']}x{row['K']}"
    if key not in best or row["tflops"] > best[key]["tflops"]:
        best[key] = row
    return best[key]


def _autotune_fp8(shapes: list[Shape], configs: Optional[list[dict[str, Any]]], progress: Callable[[str], None],
                  budget_s: float, max_reps: int) -> dict[str, Any]:
    """Level 13 through its own record path (the same harness; each setting checked, then timed with its
    cuBLASLt baseline right before it); the best passing setting per shape."""
    from gemm_course.fp8 import gemm as fp8_gemm

    result: dict[str, Any] = {"records": []}
    try:
        result = fp8_gemm.record_fp8(None, shapes, configs or fp8_gemm.search_space(), reps=5, max_reps=max_reps,
                                     budget_s=budget_s, bf16_baselines=False, progress=progress)
    except KeyboardInterrupt:
        progress("interrupted")
    table = [r for r in result["records"] if r["level"] == FP8_LEVEL and r["passed"]]
    best: dict[str, dict[str, Any]] = {}
    for row in table:
        _keep_best(best, row)
    return {"level": FP8_LEVEL, "gpu": device.gpu_name(), "table": table, "best": best}


# The parameter that changes what a setting computes rather than how fast: C's type (Level 11), the scaling of
# the FP8 inputs (Level 13). The tuner compares settings with the same value only, each against the baseline
# that computes the same thing (cuBLAS writes bf16 C; cuBLASLt's block-scaled or per-tensor FP8 GEMM).
OUTPUT_PARAM = {"11_hopper_wgmma": "c_type", FP8_LEVEL: "scaling"}


def _sweep_rows(level: str | int | Level, shape: Shape, passed_only: bool = True) -> list[dict[str, Any]]:
    """A level's sweep records at one shape, in its recorded input type (Level 13: e4m3); passed_only: without
    the settings whose check failed."""
    from gemm_course.fp8 import gemm as fp8_gemm

    level_id = _level_id(level)
    dtype = fp8_gemm.DTYPE if level_id == FP8_LEVEL else get_level(level_id).dtypes[0]
    rows = results.sweep_records(level_id, shape, dtype=dtype)
    return [r for r in rows if r.get("passed", True)] if passed_only else rows


def recorded_best(level: str | int | Level, size: Optional[int | Sequence[int]] = None, **fixed: Any) -> dict[str, Any]:
    """The fastest recorded configuration of a level at a shape (n for n³ or (M, N, K); default: its first
    sweep shape), among the runs that swept its settings; fixed: only settings with these values (e.g.
    c_type="input", scaling="blockwise")."""
    shape = _shape(size) if size is not None else sweep_shapes(level)[0]
    rows = [r for r in _sweep_rows(level, shape) if all(r["params"].get(k) == v for k, v in fixed.items())]
    if not rows:
        raise KeyError(f"no recorded sweep of {_level_id(level)} {fixed or ''} at {'×'.join(map(str, shape))}")
    return max(rows, key=lambda r: r["tflops"])


def _default_setting(level_id: str, shape: Shape, group: dict[str, Any]) -> dict[str, Any]:
    """The setting a call gets without options (with the output parameter's value fixed), as its record names it."""
    if level_id == FP8_LEVEL:
        from gemm_course.fp8 import gemm as fp8_gemm

        return fp8_gemm.resolved_setting({**group, "splits": "auto"}, *shape)
    return get_level(level_id).resolve(**group)


def tuned_rows(level: str | int | Level) -> list[dict[str, Any]]:
    """Per sweep shape (and per value of the level's output parameter): the fastest recorded setting of the
    sweep, its TFLOPS and ratio to the baseline timed beside it (in time and in cycles), and the same for
    the default setting in the same sweep (None where the sweep lacks it)."""
    level_id = _level_id(level)
    output = OUTPUT_PARAM.get(level_id)
    rows = []
    for shape in sweep_shapes(level_id):
        records = _sweep_rows(level_id, shape)
        for value in sorted({r["params"].get(output) for r in records}, key=str) if output else [None]:
            group = {output: value} if output else {}
            mine = [r for r in records if all(r["params"].get(k) == v for k, v in group.items())]
            if not mine:
                continue
            best = max(mine, key=lambda r: r["tflops"])
            wanted = _default_setting(level_id, shape, group)
            default = next((r for r in mine if r["params"] == wanted), None)
            rows.append({"level": level_id, "shape": shape, "group": group, "settings": len(mine),
                         "best": best, "best_ratio": best.get("ratio_to_cublas"), "best_cycles": results.in_cycles(best),
                         "default": default, "default_ratio": default and default.get("ratio_to_cublas"),
                         "default_cycles": default and results.in_cycles(default),
                         "gain": default and best["tflops"] / default["tflops"]})
    return rows


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
