"""Runners for the exercises of the chapters outside the level registry (exercises.CHAPTERS):

    cuda_basics   Level 0   a small CUDA C kernel, launched on the CPU backend the way primer.run_kernel
                            launches it, with launches the learner did not choose (grids with fewer and
                            with more threads than elements, odd shapes, several block rows and columns)
    multi_gpu     Level 12  a Python function (the rows one rank owns, the time of a ring all-reduce, the
                            time of chunks that overlap), run in a child interpreter apart from the course
                            (standard library only, no file read or written) and checked against the
                            course's own split and models
    fp8           Level 13  a CUDA C kernel on e4m3 bytes (the 1x128 quantiser, the promotion loop), on
                            the CPU backend, against gemm_course.fp8.formats
    dsl           Level 14  a Triton kernel's k-loop, run by Triton's interpreter in a child process
                            (triton_answers.py), and a Triton configuration's course quantities, predicted

Each exercise.json of these chapters names its task ("task"), which picks the function that grades it
(TASKS). A kernel's result is checked first; then, where a right result does not show the lesson (a grid-
stride loop, a round trip through shared memory, one thread per element or per strip), a launch whose
every block is traced (_traced_launch) shows how the kernel did the work. Every task draws its random shape and values from attempt.rng, so the seed in the verdict
reproduces a failure, and answers every broken answer (an empty file, a renamed kernel, a syntax
error, a function that raises or loops) with one step saying what to change, never a traceback.
"""
from __future__ import annotations

import ast
import functools
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .grade import Attempt, Step, _first_lines, source_problems

KERNEL_TIMEOUT_S = 5.0    # one CPU-backend thread without a barrier: these kernels need milliseconds
PYTHON_TIMEOUT_S = 10.0   # the learner's whole Python answer, every call included


# --- shared: CUDA C answers on the CPU backend ----------------------------------------------------------

def _compiled(attempt: Attempt, kernel: str, parameters: Sequence[str],
              signature: str) -> tuple[Any, list[Step]]:
    """(the compiled kernel or None, the steps so far): the source screened (grade.source_problems), the
    kernel compiled for the CPU backend (race detector on), its parameter types the ones the grader
    passes (signature: as C)."""
    from gemm_course.run import cpu_backend as cb

    problem = source_problems(attempt, kernel)  # empty, renamed, an include or a build macro the grader refuses
    if problem:
        return None, [problem]
    try:
        compiled = cb.compile_kernel(attempt.source, kernel, attempt.file_name, race_check=True)
    except cb.CpuCompileError as err:
        detail = _first_lines(err.log or str(err), 6)
        return None, [Step("compile", False, f"{attempt.file_name} does not compile:\n{detail}",
                           f"{attempt.file_name} 无法编译：\n{detail}")]
    except cb.CpuBackendError as err:  # no C++ compiler, or no CPU backend on this system
        return None, [Step("compile", None, f"not run here: {err.en}", f"这里无法运行：{err.zh}")]
    if tuple(compiled.parameters) != tuple(parameters):
        got = ", ".join(compiled.parameters)
        return None, [Step("compile", True, "compiles", "可以编译"),
                      Step("signature", False, f"{kernel} takes ({got}); the grader passes {signature}",
                           f"{kernel} 的参数是（{got}）；评分器传入的是 {signature}")]
    return compiled, [Step("compile", True, "compiles", "可以编译")]


def _launch(kernel: Any, grid: tuple[int, int, int], block: tuple[int, int, int], args: Sequence[Any],
            names: Sequence[str], where_en: str, where_zh: str) -> Optional[Step]:
    """Run one launch; a failed step (named after what went wrong: memory, race, barrier, ...) or None."""
    from gemm_course.run import cpu_backend as cb
    from ..levels import Launch

    try:
        kernel.launch(Launch(grid, block), args, names=names, timeout_s=KERNEL_TIMEOUT_S)
    except cb.CpuBackendError as err:
        return _backend_failure(err, where_en, where_zh)
    return None


def _backend_failure(err: Any, where_en: str, where_zh: str) -> Step:
    """A CpuBackendError as a failed step named after what went wrong (memory, race, barrier, ...)."""
    kind = type(err).__name__.replace("Kernel", "").replace("Error", "").lower() or "run"
    kind = "run" if kind == "cpubackend" else kind
    return Step(kind, False, f"{where_en}: {err.en}", f"{where_zh}：{err.zh}")


def _launch_text(grid: tuple[int, int, int], block: tuple[int, int, int]) -> str:
    g = grid[0] if grid[1:] == (1, 1) else f"({grid[0]}, {grid[1]})"
    b = block[0] if block[1:] == (1, 1) else f"({block[0]}, {block[1]})"
    return f"<<<{g}, {b}>>>"


def _traced_launch(kernel: Any, grid: tuple[int, int, int], block: tuple[int, int, int], args: Sequence[Any],
                   names: Sequence[str], where_en: str, where_zh: str) -> tuple[Any, Optional[Step]]:
    """One launch with every block's memory accesses recorded, for the checks of how a kernel works (not
    only what it computes): (the AccessLog, None), or (None, the failed step) as _launch gives it."""
    from gemm_course.run import cpu_backend as cb
    from ..levels import Launch

    every_block = [(x, y, 0) for y in range(grid[1]) for x in range(grid[0])]
    try:
        log = kernel.launch(Launch(grid, block), args, names=names, timeout_s=KERNEL_TIMEOUT_S, profile=True,
                            profile_blocks=every_block)
    except cb.CpuBackendError as err:
        return None, _backend_failure(err, where_en, where_zh)
    return log, None


def _rows(indices: np.ndarray) -> str:
    """"row 4" or "rows 3..5, 9"."""
    return f"row {int(indices[0])}" if indices.size == 1 else f"rows {_ranges(indices)}"


def _ranges(indices: np.ndarray) -> str:
    """0, 1, 2, 5, 9, 10 → "0..2, 5, 9..10" (the first few runs)."""
    runs: list[str] = []
    start = prev = None
    for i in [int(x) for x in indices]:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            runs.append(f"{start}" if start == prev else f"{start}..{prev}")
            start = prev = i
    if start is not None:
        runs.append(f"{start}" if start == prev else f"{start}..{prev}")
    return ", ".join(runs[:4]) + (", …" if len(runs) > 4 else "")


# --- Level 0: the CUDA programming model -----------------------------------------------------------------

def _saxpy_launches(rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """(n, blocks, threads per block): a single element, grids with fewer threads than elements and with
    more, an odd n, and one drawn from the seed."""
    fixed = [(1, 1, 32), (1000, 2, 64), (100, 8, 256), (777, 3, 128)]
    drawn = (int(rng.integers(2, 5000)), int(rng.integers(1, 9)), int(rng.choice([32, 64, 128, 256])))
    return fixed + [drawn]


def _grade_saxpy(attempt: Attempt) -> list[Step]:
    """y = a·x + y in place, in a grid-stride loop: every element updated exactly once, whatever the grid."""
    kernel, steps = _compiled(attempt, "saxpy", ("int", "float", "const float*", "float*"),
                              "(int n, float a, const float* x, float* y)")
    if kernel is None:
        return steps
    rng = attempt.rng
    launches = _saxpy_launches(rng)
    for n, blocks, threads in launches:
        # Small integers and a scale of few bits: a·x + y is exact, so (y − y0) / (a·x) counts how many
        # times each element was updated.
        x = rng.integers(1, 9, n).astype(np.float32) * rng.choice([-1, 1], n).astype(np.float32)
        y0 = rng.integers(-100, 101, n).astype(np.float32)
        a = float(rng.choice([0.5, 1.5, 2.0, -0.75, 3.0]))
        y = y0.copy()
        total = blocks * threads
        launch = _launch_text((blocks, 1, 1), (threads, 1, 1))
        where_en = f"n = {n}, saxpy{launch} ({total} threads)"
        where_zh = f"n = {n}，saxpy{launch}（共 {total} 个线程）"
        failed = _launch(kernel, (blocks, 1, 1), (threads, 1, 1), [n, a, x, y], ["n", "a", "x", "y"],
                         where_en, where_zh)
        if failed:
            return steps + [failed]
        with np.errstate(invalid="ignore"):
            times = (y.astype(np.float64) - y0) / (a * x.astype(np.float64))
        if np.array_equal(times, np.ones(n)):
            continue
        never = np.nonzero(times == 0)[0]
        twice = np.nonzero((times >= 2) & (times == np.round(times)))[0]
        if never.size:
            more = "fewer" if total < n else "more"
            en = (f"at {where_en}: y[{_ranges(never)}] ({never.size} of {n} elements) were never updated; the grid "
                  f"has {more} threads than elements here")
            zh = (f"{where_zh}时：y[{_ranges(never)}]（{n} 个元素中的 {never.size} 个）从未被更新；这里元素数比线程数"
                  f"{'多' if total < n else '少'}")
        elif twice.size:
            worst = int(times[twice].max())
            en = (f"at {where_en}: y[{_ranges(twice)}] ({twice.size} elements) were updated more than once (up to "
                  f"{worst} times): two threads took the same element, or one thread took it twice")
            zh = (f"{where_zh}时：y[{_ranges(twice)}]（{twice.size} 个元素）被更新了不止一次（最多 {worst} 次）："
                  "有两个线程处理了同一个元素，或者同一个线程处理了它两次")
        else:
            i = int(np.nonzero(times != 1)[0][0])
            want = a * float(x[i]) + float(y0[i])
            en = f"at {where_en}: y[{i}] = {float(y[i]):.6g}, expected a·x[{i}] + y[{i}] = {want:.6g}"
            zh = f"{where_zh}时：y[{i}] = {float(y[i]):.6g}，应为 a·x[{i}] + y[{i}] = {want:.6g}"
        return steps + [Step("correct", False, en, zh)]
    shown = ", ".join(f"n = {n} on {b}×{t}" for n, b, t in launches)
    shown_zh = "、".join(f"n = {n}（{b}×{t} 个线程）" for n, b, t in launches)
    steps.append(Step("correct", True, f"every element updated exactly once: {shown}", f"每个元素恰好更新一次：{shown_zh}"))
    return steps + [_saxpy_grid_stride(kernel, rng)]


# Grids with fewer threads than elements, several blocks each: where a grid-stride loop shows.
_STRIDE_LAUNCHES = ((1000, 2, 64), (777, 3, 128))


def _elements(indices: list[int]) -> str:
    """[3, 131, 259, 387, 515] → "y[3], y[131], y[259], …" (the first three); [] → ""."""
    return ", ".join(f"y[{i}]" for i in indices[:3]) + (", …" if len(indices) > 3 else "")


def _saxpy_grid_stride(kernel: Any, rng: np.random.Generator) -> Step:
    """The lesson, read from the accesses of every block: thread g of a grid of T threads updates y[g],
    y[g + T], y[g + 2T], ... and nothing else, so every block does its share (a kernel where block 0
    does all the work, or each thread a contiguous chunk, is right but fails here)."""
    from gemm_course.inspect import warp_access

    for n, blocks, threads in _STRIDE_LAUNCHES:
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        launch = _launch_text((blocks, 1, 1), (threads, 1, 1))
        where_en, where_zh = f"n = {n}, saxpy{launch}", f"n = {n}，saxpy{launch}"
        log, failed = _traced_launch(kernel, (blocks, 1, 1), (threads, 1, 1), [n, 2.0, x, y], ["n", "a", "x", "y"],
                                     where_en, where_zh)
        if failed:
            return failed
        total = blocks * threads
        updated = {b: {t: sorted({a.index[0] for a in seq if a.array == "y" and a.write}) for t, seq in per_thread.items()}
                   for (b, _, _), per_thread in warp_access.sequences(log).items()}
        for b in range(blocks):  # a block left out is the plainer mistake: name it first
            if not any(updated.get(b, {}).values()):
                return Step("grid_stride", False,
                            f"at {where_en} ({total} threads for {n} elements) block {b} updated no element of y: every "
                            "block should take its share, through a grid-stride loop (i = blockIdx.x·blockDim.x + "
                            "threadIdx.x, then i += gridDim.x·blockDim.x)",
                            f"{where_zh}（{total} 个线程处理 {n} 个元素）时，线程块 {b} 没有更新 y 的任何元素：每个线程块都应当"
                            "分担一份工作，用网格跨步循环（i = blockIdx.x·blockDim.x + threadIdx.x，然后 i += gridDim.x·blockDim.x）")
        for b in range(blocks):
            for t in range(threads):
                g = b * threads + t
                want = list(range(g, n, total))
                got = updated[b].get((t, 0, 0), [])
                if got != want:
                    return Step("grid_stride", False,
                                f"at {where_en} ({total} threads for {n} elements) thread {t} of block {b} updated "
                                f"{_elements(got) or 'no element'}; a grid-stride loop gives it {_elements(want)}: start at "
                                "blockIdx.x·blockDim.x + threadIdx.x and step by gridDim.x·blockDim.x, the whole grid",
                                f"{where_zh}（{total} 个线程处理 {n} 个元素）时，线程块 {b} 的线程 {t} 更新了 "
                                f"{_elements(got) or '（没有元素）'}；网格跨步循环分给它的是 {_elements(want)}："
                                "从 blockIdx.x·blockDim.x + threadIdx.x 开始，每步跨过整个网格 gridDim.x·blockDim.x")
    shown = ", ".join(f"n = {n} on {b}×{t}" for n, b, t in _STRIDE_LAUNCHES)
    shown_zh = "、".join(f"n = {n}（{b}×{t} 个线程）" for n, b, t in _STRIDE_LAUNCHES)
    return Step("grid_stride", True, f"a grid-stride loop: thread g of T updates y[g], y[g + T], … in every block ({shown})",
                f"网格跨步循环：T 个线程中的第 g 个在每个线程块中都更新 y[g]、y[g + T]、…（{shown_zh}）")


_TRANSPOSE_BLOCKS = ((8, 4), (16, 8), (32, 4), (4, 16), (16, 16))


def _transpose_cases(rng: np.random.Generator) -> list[tuple[int, int, tuple[int, int]]]:
    """(rows, cols, (block x, block y)): a single element, fewer rows than a block, several block rows
    and columns with ragged edges on both sides, and one drawn from the seed."""
    fixed = [(1, 1, (8, 4)), (3, 37, (16, 8)), (33, 17, (8, 4)), (70, 20, (16, 8)), (45, 100, (32, 4))]
    blocks = _TRANSPOSE_BLOCKS[int(rng.integers(len(_TRANSPOSE_BLOCKS)))]
    return fixed + [(int(rng.integers(1, 90)), int(rng.integers(1, 90)), blocks)]


def _grade_transpose(attempt: Attempt) -> list[Step]:
    """out (cols×rows) = inᵀ, one thread per element of in, x along its columns."""
    kernel, steps = _compiled(attempt, "transpose", ("const float*", "float*", "int", "int"),
                              "(const float* in, float* out, int rows, int cols)")
    if kernel is None:
        return steps
    cases = _transpose_cases(attempt.rng)
    for rows, cols, (bx, by) in cases:
        # Element (r, c) of in holds r·cols + c + 1: a wrong value tells where it was read from.
        src = (np.arange(rows * cols, dtype=np.float32) + 1).reshape(rows, cols)
        out = np.full((cols, rows), np.nan, dtype=np.float32)
        grid = (-(-cols // bx), -(-rows // by), 1)
        launch = _launch_text(grid, (bx, by, 1))
        where_en, where_zh = f"{rows}×{cols}, transpose{launch}", f"{rows}×{cols}，transpose{launch}"
        failed = _launch(kernel, grid, (bx, by, 1), [src, out, rows, cols], ["in", "out", "rows", "cols"],
                         where_en, where_zh)
        if failed:
            return steps + [failed]
        want = src.T
        if np.array_equal(out, want):
            continue
        unwritten = np.isnan(out)
        if unwritten.any():
            j, i = (int(v) for v in np.argwhere(unwritten)[0])
            en = (f"at {where_en}: {int(unwritten.sum())} of {rows * cols} elements of out were never written, the "
                  f"first out[{j}, {i}] (it should hold in[{i}, {j}])")
            zh = (f"{where_zh}时：out 的 {rows * cols} 个元素中有 {int(unwritten.sum())} 个从未被写入，第一个是 "
                  f"out[{j}, {i}]（它应当是 in[{i}, {j}]）")
        else:
            j, i = (int(v) for v in np.argwhere(out != want)[0])
            got = float(out[j, i])
            if got == int(got) and 1 <= got <= rows * cols:
                r, c = divmod(int(got) - 1, cols)
                en = f"at {where_en}: out[{j}, {i}] holds in[{r}, {c}]; out[{j}, {i}] must be in[{i}, {j}]"
                zh = f"{where_zh}时：out[{j}, {i}] 中是 in[{r}, {c}]；out[{j}, {i}] 应当是 in[{i}, {j}]"
            else:
                en = f"at {where_en}: out[{j}, {i}] = {got:.6g}, which is no element of in; expected in[{i}, {j}]"
                zh = f"{where_zh}时：out[{j}, {i}] = {got:.6g}，不是 in 中的任何元素；应为 in[{i}, {j}]"
        return steps + [Step("correct", False, en, zh)]
    shown = ", ".join(f"{r}×{c} in blocks of {bx}×{by}" for r, c, (bx, by) in cases)
    shown_zh = "、".join(f"{r}×{c}（线程块 {bx}×{by}）" for r, c, (bx, by) in cases)
    steps.append(Step("correct", True, f"out = inᵀ on {shown}, no access out of bounds",
                      f"在 {shown_zh} 上 out = inᵀ，没有越界访问"))
    return steps + [_transpose_one_per_element(kernel)]


def _transpose_one_per_element(kernel: Any) -> Step:
    """The lesson, the 2-D launch's index math, read from the accesses of every block of 33×17 in blocks of
    8×4: thread (x, y) of block (bx, by) owns element (r, c) = (by·blockDim.y + y, bx·blockDim.x + x) of in,
    reads it and writes out[c, r], and a thread past the edge touches nothing. One thread copying the whole
    matrix is right but fails here."""
    from gemm_course.inspect import warp_access

    rows, cols, (bx, by) = 33, 17, (8, 4)
    src = (np.arange(rows * cols, dtype=np.float32) + 1).reshape(rows, cols)
    out = np.full((cols, rows), np.nan, dtype=np.float32)
    grid = (-(-cols // bx), -(-rows // by), 1)
    launch = _launch_text(grid, (bx, by, 1))
    where_en, where_zh = f"{rows}×{cols}, transpose{launch}", f"{rows}×{cols}，transpose{launch}"
    log, failed = _traced_launch(kernel, grid, (bx, by, 1), [src, out, rows, cols], ["in", "out", "rows", "cols"],
                                 where_en, where_zh)
    if failed:
        return failed
    for block, per_thread in sorted(warp_access.sequences(log).items(), key=lambda item: item[0][::-1]):
        for y in range(by):
            for x in range(bx):
                seq = per_thread.get((x, y, 0), [])
                r, c = block[1] * by + y, block[0] * bx + x
                inside = r < rows and c < cols
                read = sorted({tuple(a.index) for a in seq if a.array == "in" and not a.write})
                wrote = sorted({tuple(a.index) for a in seq if a.array == "out" and a.write})
                if (read, wrote) == (([(r, c)], [(c, r)]) if inside else ([], [])):
                    continue
                did_en = ", ".join([f"read {len(read)} element{'s' if len(read) != 1 else ''} of in"
                                    + (f" (in[{read[0][0]}, {read[0][1]}]{', …' if len(read) > 1 else ''})" if read else ""),
                                    f"wrote {len(wrote)} of out"
                                    + (f" (out[{wrote[0][0]}, {wrote[0][1]}]{', …' if len(wrote) > 1 else ''})" if wrote else "")])
                did_zh = "，".join([f"读了 in 的 {len(read)} 个元素"
                                   + (f"（in[{read[0][0]}, {read[0][1]}]{'、…' if len(read) > 1 else ''}）" if read else ""),
                                   f"写了 out 的 {len(wrote)} 个元素"
                                   + (f"（out[{wrote[0][0]}, {wrote[0][1]}]{'、…' if len(wrote) > 1 else ''}）" if wrote else "")])
                owns_en = (f"it owns in[{r}, {c}] and out[{c}, {r}], one element each" if inside else
                           f"it lies past the edge (row {r}, column {c}) and should touch nothing")
                owns_zh = (f"它负责 in[{r}, {c}] 和 out[{c}, {r}]，各一个元素" if inside else
                           f"它在边缘之外（第 {r} 行，第 {c} 列），什么都不应访问")
                b = ",".join(map(str, block[:2]))
                return Step("one_per_element", False,
                            f"at {where_en}, thread ({x},{y}) of block ({b}) {did_en}; with x along the columns of in "
                            f"and y down its rows, {owns_en}",
                            f"{where_zh}时，线程块 ({b}) 的线程 ({x},{y}) {did_zh}；x 沿 in 的列、y 沿 in 的行时，{owns_zh}")
    return Step("one_per_element", True, f"at {where_en}, thread (x, y) of every block copies exactly its element "
                "(row blockIdx.y·blockDim.y + y, column blockIdx.x·blockDim.x + x)",
                f"{where_zh}时，每个线程块的线程 (x, y) 恰好拷贝它自己的元素（第 blockIdx.y·blockDim.y + y 行，"
                "第 blockIdx.x·blockDim.x + x 列）")


def _reverse_cases(rng: np.random.Generator) -> list[tuple[int, int]]:
    """(n, threads per block): n a multiple of the block, a short last block, a single element, one drawn."""
    return [(64, 32), (100, 32), (1, 64), (300, 128), (int(rng.integers(2, 700)), int(rng.choice([32, 64, 256])))]


def _grade_reverse(attempt: Attempt) -> list[Step]:
    """Each block's slice of x reversed in place through shared memory; the last slice may be short."""
    kernel, steps = _compiled(attempt, "reverse_each_block", ("float*", "int"), "(float* x, int n)")
    if kernel is None:
        return steps
    rng = attempt.rng
    cases = _reverse_cases(rng)
    for n, threads in cases:
        x = rng.permutation(n).astype(np.float32) + 1
        original = x.copy()
        blocks = -(-n // threads)
        launch = _launch_text((blocks, 1, 1), (threads, 1, 1))
        where_en, where_zh = f"n = {n}, reverse_each_block{launch}", f"n = {n}，reverse_each_block{launch}"
        failed = _launch(kernel, (blocks, 1, 1), (threads, 1, 1), [x, n], ["x", "n"], where_en, where_zh)
        if failed:
            return steps + [failed]
        want = np.concatenate([original[s:s + threads][::-1] for s in range(0, n, threads)])
        if np.array_equal(x, want):
            continue
        i = int(np.nonzero(x != want)[0][0])
        start = i // threads * threads
        end = min(n, start + threads)
        src = np.nonzero(original == x[i])[0]
        came = f" (it holds the old x[{int(src[0])}])" if src.size else ""
        came_zh = f"（其中是原来的 x[{int(src[0])}]）" if src.size else ""
        en = (f"at {where_en}: x[{i}] should be the old x[{start + end - 1 - i}], the mirror of {i} in its block's "
              f"slice {start}..{end - 1}{came}")
        zh = (f"{where_zh}时：x[{i}] 应当是原来的 x[{start + end - 1 - i}]，即 {i} 在本线程块的片段 {start}..{end - 1} "
              f"中的镜像位置{came_zh}")
        return steps + [Step("correct", False, en, zh)]
    shown = ", ".join(f"n = {n} in blocks of {t}" for n, t in cases)
    shown_zh = "、".join(f"n = {n}（每块 {t} 个线程）" for n, t in cases)
    steps.append(Step("correct", True, f"every slice reversed, the short last one too: {shown}; no race, "
                      "every barrier reached by the whole block",
                      f"每个片段都已反转，包括较短的最后一段：{shown_zh}；没有竞争，每道屏障都由整个线程块到达"))
    return steps + [_reverse_round_trip(kernel, rng)]


def _reverse_round_trip(kernel: Any, rng: np.random.Generator) -> Step:
    """The lesson, read from the accesses of every block of n = 100 on blocks of 32 (the last block holds 4
    elements): each block passes a barrier, and every thread that writes an element of x but its slice's
    middle one read it, after a barrier, from a shared word another thread stored. A fix that drops the
    barrier (swapping in global memory) or lets one thread do the block's work is right but fails here."""
    from gemm_course.inspect import warp_access

    n, threads = 100, 32
    blocks = -(-n // threads)
    x = rng.permutation(n).astype(np.float32) + 1
    launch = _launch_text((blocks, 1, 1), (threads, 1, 1))
    where_en, where_zh = f"n = {n}, reverse_each_block{launch}", f"n = {n}，reverse_each_block{launch}"
    log, failed = _traced_launch(kernel, (blocks, 1, 1), (threads, 1, 1), [x, n], ["x", "n"], where_en, where_zh)
    if failed:
        return failed
    passed = warp_access.barrier_intervals(log)
    lesson_en = ("the lesson is the round trip through shared memory: every thread stores its element into the "
                 "tile, the whole block meets at __syncthreads(), then each thread reads the element another "
                 "thread stored")
    lesson_zh = "本练习要学的是经由共享内存的往返：每个线程把自己的元素存进共享数组，整个线程块在 __syncthreads() 处会合，" \
                "然后每个线程读出另一个线程存入的元素"
    for (b, _, _), per_thread in sorted(warp_access.sequences(log).items()):
        length = min(threads, n - b * threads)
        if passed[(b, 0, 0)] < 2:
            return Step("barrier", False, f"at {where_en}, block {b} ({length} elements) passed no __syncthreads(): "
                        f"{lesson_en}; keep the barrier, and let every thread of the block reach it",
                        f"{where_zh}时，线程块 {b}（{length} 个元素）没有经过任何 __syncthreads()：{lesson_zh}；"
                        "请保留这道屏障，并让线程块的每个线程都到达它")
        writer = {}  # shared word -> (thread, interval) of its last store
        for t, seq in per_thread.items():
            for a in seq:
                if a.space == "shared" and a.write:
                    writer[a.index[0] // 4] = (t, a.interval)
        for t, seq in sorted(per_thread.items()):
            stores = [a for a in seq if a.array == "x" and a.write and a.index[0] != 2 * b * threads + length - 1 - a.index[0]]
            if not stores:
                continue
            from_others = any(a.space == "shared" and not a.write and writer.get(a.index[0] // 4, (t, 0))[0] != t
                              and writer[a.index[0] // 4][1] < a.interval for a in seq)
            if not from_others:
                return Step("round_trip", False,
                            f"at {where_en}, thread {t[0]} of block {b} wrote x[{stores[0].index[0]}] without reading, "
                            f"after a barrier, any shared word another thread stored: {lesson_en}",
                            f"{where_zh}时，线程块 {b} 的线程 {t[0]} 写了 x[{stores[0].index[0]}]，却没有在屏障之后读取任何由"
                            f"其他线程存入的共享内存字：{lesson_zh}")
    return Step("round_trip", True, f"at {where_en}, every block (the short last one too) stores into shared memory, "
                "passes a barrier, and each thread reads the element another thread stored",
                f"{where_zh}时，每个线程块（包括较短的最后一个）都先存入共享内存、经过屏障，再由每个线程读出另一个线程存入的元素")


# --- shared: Python answers, run apart from the course ------------------------------------------------------
#
# A Python answer runs in a child interpreter started with -I -S: no site, so no .pth file and no editable
# finder; its sys.path is the standard library's folders only, so the course cannot be imported under any
# name. Before the answer runs, the child gives up writing any file and reading any file outside the
# standard library (child_prelude.restrict_filesystem: Landlock), so the course's files cannot be read by
# path either. The answer's values come back as one framed message on the child's result pipe
# (sandbox.Child); what it prints and how it exits count for nothing. A screen (_python_problem) refuses
# first, in one line, what such an answer could only use to reach around all that.

# What an answer may import. Every Level 12 statement says "`math` is fine", none offers NumPy: so the child
# gets no NumPy either (it would need a folder on sys.path holding the numpy package alone).
ANSWER_IMPORTS = ("math",)

# Names an answer may not use, with why (the refusal says what to do instead).
_REFUSED_NAMES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("__import__", "importlib", "sys", "os", "builtins", "subprocess"),
                    ("it reaches outside the answer: the answer runs apart from the course and the system",
                     "它会触及答案之外的东西：答案与课程和系统隔离运行")),
    "open": ("an answer reads and writes no file", "答案不读也不写任何文件"),
    **dict.fromkeys(("exec", "eval", "compile"), ("the code must be written out, not built from text at run time",
                                                  "代码要直接写出来，不能在运行时由文本生成")),
    **dict.fromkeys(("globals", "vars", "locals"), ("it reaches the grader's variables, not yours",
                                                    "它会触及评分器的变量，而不是你的")),
    **dict.fromkeys(("breakpoint", "input"), ("the grading runs without a terminal", "评分在没有终端的情况下运行")),
}
_ATTRIBUTE_FUNCTIONS = ("getattr", "setattr", "delattr")
# Attributes of frames, generators, coroutines, tracebacks and code objects: a way up to the grader's frame.
_INTROSPECTION = re.compile(r"(f|gi|cr|ag|tb|co)_\w+")


def _refused_attribute(attribute: str) -> bool:
    return attribute.startswith("_") or bool(_INTROSPECTION.fullmatch(attribute))


# The child's script after child_prelude's text: read the one request, import what an answer may use, give up
# the filesystem, run the answer in a namespace of its own (builtins narrowed to match the screen), answer.
_ANSWER_RUNNER = r'''
import builtins


def _plain(value, depth=0):
    """A returned value as JSON: exact ints, floats and bools, lists and tuples of them; anything else by name."""
    if type(value) is bool:
        return {"bool": value}
    if type(value) in (int, float):
        return value
    if type(value) in (tuple, list) and depth < 4 and len(value) <= 1000:
        return [_plain(v, depth + 1) for v in value]
    try:
        shown = repr(value)[:80]
    except BaseException:
        shown = "?"
    return {"repr": shown, "type": type(value).__name__}


def _one_line(error):
    try:
        text = str(error).splitlines()[0] if str(error) else ""
    except BaseException:
        text = ""
    return f"{type(error).__name__}: {text}"[:300] if text else type(error).__name__


def _answer_builtins(allowed, refused):
    real_import, real_getattr, real_setattr, real_delattr = (builtins.__import__, builtins.getattr,
                                                             builtins.setattr, builtins.delattr)

    def answer_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level or name.split(".")[0] not in allowed:
            raise ImportError(f"an answer may import only {', '.join(sorted(allowed))}, not {name}")
        return real_import(name, globals, locals, fromlist, level)

    def checked(name):
        if not isinstance(name, str) or name.startswith("_") or refused_attribute(name):
            raise AttributeError(f"{name!r} is not open to an answer")
        return name

    names = {k: v for k, v in vars(builtins).items() if k not in refused}
    names.update(__import__=answer_import,
                 getattr=lambda obj, name, *default: real_getattr(obj, checked(name), *default),
                 setattr=lambda obj, name, value: real_setattr(obj, checked(name), value),
                 delattr=lambda obj, name: real_delattr(obj, checked(name)))
    return names


def refused_attribute(name):
    return name[:3] in ("gi_", "cr_", "ag_", "tb_", "co_") or name[:2] == "f_"


def _run(request):
    out = {"results": []}
    namespace = {"__name__": "answer",
                 "__builtins__": _answer_builtins(frozenset(request["imports"]), frozenset(request["refused"]))}
    try:
        exec(compile(request["source"], request["file"], "exec"), namespace)
    except BaseException as error:
        out["load_error"] = _one_line(error)
        return out
    function = namespace.get(request["function"])
    if not callable(function):
        out["missing"] = True
        return out
    for i, args in enumerate(request["calls"]):
        try:
            out["results"].append(_plain(function(*args)))
        except BaseException as error:
            out["raised"] = {"call": i, "error": _one_line(error)}
            break
    return out


def _main():
    answers = result_stream()
    request, _ = read_message(sys.stdin.buffer.read)
    for name in request["imports"]:  # now: once the filesystem is given up, no module file can be read
        __import__(name)
    sys.path[:] = request["path"]
    restrict_filesystem(readable=request["readable"])
    write_message(answers, _run(request))
    answers.close()


_main()
'''


@functools.lru_cache(maxsize=1)
def _answer_script() -> str:
    from . import child_prelude

    return Path(child_prelude.__file__).read_text(encoding="utf-8") + "\n" + _ANSWER_RUNNER


@functools.lru_cache(maxsize=1)
def _standard_library() -> list[str]:
    """The standard library's folders: the child's sys.path, and all it may read. A folder that holds the
    course's package (site-packages sits inside the standard library's folder in an install outside a
    virtual environment) is left out: the modules an answer may import are imported before the child
    gives up the filesystem, so it needs no more."""
    import sysconfig

    stdlib, platstdlib = sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")
    folders = [stdlib, platstdlib, os.path.join(platstdlib, "lib-dynload")]
    folders = list(dict.fromkeys(os.path.realpath(f) for f in folders if os.path.isdir(f)))
    course = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [f for f in folders if not (course + os.sep).startswith(f + os.sep)]


def _python_problem(attempt: Attempt, function: str, signature: str) -> Optional[Step]:
    """A one-line verdict for an answer that cannot be run as asked (empty, a syntax error, an import of the
    course's package or of any module but math, a name or attribute that reaches outside the answer, no
    function of that name); None when it can. The child narrows its builtins the same way: this screen is
    where the learner is told what to change."""
    name, source = attempt.file_name, attempt.source
    if not source.strip():
        return Step("answer", False, f"{name} is empty: define {signature}", f"{name} 是空的：请定义 {signature}")
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as err:
        where = f"line {err.lineno}" if err.lineno else "somewhere"
        where_zh = f"第 {err.lineno} 行" if err.lineno else "某处"
        return Step("answer", False, f"{name}: Python cannot read it, {where}: {err.msg}",
                    f"{name}：Python 无法解析，{where_zh}：{err.msg}")
    allowed = ", ".join(ANSWER_IMPORTS)
    found: list[tuple[int, int, str, str]] = []  # (line, column, english, chinese): the first one is reported

    def refuse(node: ast.AST, en: str, zh: str) -> None:
        line = getattr(node, "lineno", 0)
        found.append((line, getattr(node, "col_offset", 0), f"{name}:{line}: {en}", f"{name}:{line}：{zh}"))

    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and "gemm_course" in node.value) or \
                (isinstance(node, ast.Name) and node.id == "gemm_course") or \
                (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "gemm_course" for a in node.names)) or \
                (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gemm_course"):
            refuse(node, "uses gemm_course: write the answer yourself, with plain Python (math is fine)",
                   "用到了 gemm_course：请自己用普通 Python 写出答案（可以用 math）")
            continue
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            ["." * node.level + (node.module or "")] if isinstance(node, ast.ImportFrom) else []
        for module in modules:
            if module.split(".")[0] not in ANSWER_IMPORTS:
                refuse(node, f"`import {module}` is not allowed: an answer may import only {allowed}; compute the "
                       "rest with plain Python", f"不允许 `import {module}`：答案只能导入 {allowed}；其余请用普通 Python 计算")
        if isinstance(node, ast.Name) and node.id in _REFUSED_NAMES:
            why_en, why_zh = _REFUSED_NAMES[node.id]
            refuse(node, f"`{node.id}` is not allowed in an answer ({why_en}): compute the result with plain Python "
                   f"({allowed} is fine)", f"答案中不允许使用 `{node.id}`（{why_zh}）：请用普通 Python 计算结果（可以用 {allowed}）")
        elif isinstance(node, ast.Name) and node.id.startswith("__") and node.id.endswith("__") and node.id != "__name__":
            refuse(node, f"`{node.id}` is not allowed: names like it are Python's internals, not part of an answer; "
                   "use the values the function is given", f"不允许使用 `{node.id}`：这类名字属于 Python 内部机制，"
                   "不是答案的一部分；请使用函数收到的参数")
        elif isinstance(node, ast.Attribute) and _refused_attribute(node.attr):
            refuse(node, f"`.{node.attr}` is not allowed: it reaches Python's internals (names starting with _, "
                   "frames, code objects); use the values the function is given",
                   f"不允许使用 `.{node.attr}`：它会触及 Python 的内部机制（以 _ 开头的名字、栈帧、代码对象）；"
                   "请使用函数收到的参数")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTRIBUTE_FUNCTIONS:
            attribute = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)):
                refuse(node, f"{node.func.id}() with a name computed at run time is not allowed: write the attribute "
                       "out (obj.name)", f"不允许用运行时拼出的名字调用 {node.func.id}()：请直接写出属性（obj.name）")
            elif _refused_attribute(attribute.value):
                refuse(node, f"{node.func.id}(…, {attribute.value!r}) is not allowed: it reaches Python's internals; "
                       "use the values the function is given",
                       f"不允许 {node.func.id}(…, {attribute.value!r})：它会触及 Python 的内部机制；请使用函数收到的参数")
    if found:
        _, _, en, zh = min(found)
        return Step("answer", False, en, zh)
    if not any(isinstance(node, (ast.FunctionDef, ast.Lambda, ast.Assign)) for node in tree.body):
        return Step("answer", False, f"{name} defines nothing: define {signature}",
                    f"{name} 什么也没有定义：请定义 {signature}")
    return None


def _answer_in_child(source: str, file_name: str, function: str, calls: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """The child's answer, checked for form: {"results": [one per call]}, or "load_error", "missing" or
    "raised" ({"call", "error"}). Raises sandbox.ChildFailed when the child stops, runs past its limit or
    answers with anything else."""
    from .sandbox import Child, classify

    stdlib = _standard_library()
    request = {"source": source, "file": file_name, "function": function, "calls": [list(c) for c in calls],
               "imports": list(ANSWER_IMPORTS), "refused": sorted(_REFUSED_NAMES), "path": stdlib, "readable": stdlib}
    with Child([sys.executable, "-I", "-S", "-c", _answer_script()], wall_s=PYTHON_TIMEOUT_S) as child:
        answer, _ = child.call(request)
    results = answer.get("results")
    raised = answer.get("raised")
    well_formed = isinstance(results, list) and (
        ("load_error" in answer and isinstance(answer["load_error"], str)) or answer.get("missing") is True
        or (isinstance(raised, dict) and isinstance(raised.get("error"), str) and type(raised.get("call")) is int
            and 0 <= raised["call"] < len(calls))
        or (set(answer) == {"results"} and len(results) == len(calls)))
    if not well_formed:
        raise classify("protocol", None, PYTHON_TIMEOUT_S, "", "")
    return answer


def _run_python(attempt: Attempt, function: str, signature: str,
                calls: Sequence[Sequence[Any]]) -> tuple[Optional[list[Any]], Optional[Step]]:
    """(the values of function(*call) for every call, None) or (None, a failed step saying why)."""
    from .sandbox import ChildFailed

    problem = _python_problem(attempt, function, signature)
    if problem:
        return None, problem
    name = attempt.file_name
    try:
        out = _answer_in_child(attempt.source, name, function, calls)
    except ChildFailed as failed:
        if failed.kind in ("time", "cpu"):
            return None, Step("run", False, f"{name} did not finish within {PYTHON_TIMEOUT_S:g} s: an endless loop?",
                              f"{name} 在 {PYTHON_TIMEOUT_S:g} 秒内没有结束：是否有死循环？")
        if failed.kind in ("exit", "signal"):
            return None, Step("run", False, f"{name} ended the grading process before it answered: the grader takes "
                              f"only what {function} returns, never what is printed, so let {function} return its value",
                              f"{name} 在给出结果之前就结束了评分进程：评分器只采用 {function} 的返回值，从不读取打印的内容，"
                              f"请让 {function} 返回它的值")
        return None, Step("run", False, failed.en, failed.zh)  # out of memory, or not the grader's data
    if "load_error" in out:
        return None, Step("run", False, f"running {name} raised {out['load_error']}",
                          f"运行 {name} 时抛出了 {out['load_error']}")
    if out.get("missing"):
        return None, Step("answer", False, f"{name} has no function {function}: define {signature}",
                          f"{name} 中没有函数 {function}：请定义 {signature}")
    if "raised" in out:
        args = ", ".join(f"{a:.4g}" if isinstance(a, float) else repr(a) for a in calls[out["raised"]["call"]])
        error = out["raised"]["error"]
        return None, Step("run", False, f"{function}({args}) raised {error}", f"{function}({args}) 抛出了 {error}")
    return out["results"], None


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return f"{value.get('repr', value)}" if "repr" in value else repr(value.get("bool"))
    return repr(value)


# --- Level 12: several GPUs ------------------------------------------------------------------------------

def _row_split_cases(rng: np.random.Generator) -> list[tuple[int, int]]:
    """(M, world size): every world size from 1 to 8 with M smaller than, equal to, one more than and
    not a multiple of it, and a few M drawn from the seed."""
    Ms = [1, 2, 3, 5, 7, 8, 9, 10, 16, 17, 100, 1023, 4099]
    Ms += [int(m) for m in rng.integers(1, 20000, 3)]
    return [(M, P) for M in Ms for P in range(1, 9)]


def _grade_row_split(attempt: Attempt) -> list[Step]:
    """my_rows(M, world_size, rank) -> (first, end): the ranks' rows simulated, gathered and checked."""
    signature = "my_rows(M, world_size, rank)"
    cases = _row_split_cases(attempt.rng)
    calls = [(M, P, r) for M, P in cases for r in range(P)]
    results, problem = _run_python(attempt, "my_rows", signature, calls)
    if problem:
        return [problem]
    steps = [Step("answer", True, "runs", "可以运行")]
    at = 0
    rng = attempt.rng
    for M, P in cases:
        mine, at = results[at:at + P], at + P
        for rank, value in enumerate(mine):
            ok = isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)
            if not ok:
                return steps + [Step("correct", False, f"my_rows({M}, {P}, {rank}) returned {_shown(value)}: return "
                                     "two ints, (first, end)",
                                     f"my_rows({M}, {P}, {rank}) 返回了 {_shown(value)}：应返回两个整数 (first, end)")]
            first, end = value
            if not 0 <= first <= end <= M:
                return steps + [Step("correct", False, f"my_rows({M}, {P}, {rank}) = ({first}, {end}): a rank's rows "
                                     f"must satisfy 0 ≤ first ≤ end ≤ M = {M} (an empty share is (s, s))",
                                     f"my_rows({M}, {P}, {rank}) = ({first}, {end})：每个 rank 的行必须满足 "
                                     f"0 ≤ first ≤ end ≤ M = {M}（没有分到行时返回 (s, s)）")]
        # Each rank computes C = A·B on its rows; count who owns each row, then gather the blocks in rank order.
        K, N = 3, 2
        A = rng.integers(-4, 5, (M, K)).astype(np.float64)
        B = rng.integers(-4, 5, (K, N)).astype(np.float64)
        owners = np.zeros(M, dtype=int)
        for first, end in mine:
            owners[first:end] += 1
        where_en, where_zh = f"M = {M} on {P} GPU{'s' if P > 1 else ''}", f"M = {M} 行分给 {P} 个 GPU 时"
        shares = ", ".join(f"({f}, {e})" for f, e in mine)
        shares_zh = "、".join(f"({f}, {e})" for f, e in mine)
        if (owners == 0).any():
            rows = np.nonzero(owners == 0)[0]
            one = rows.size == 1
            return steps + [Step("correct", False,
                                 f"{where_en}: {_rows(rows)} of C belong{'s' if one else ''} to no rank, so no GPU "
                                 f"computes {'it' if one else 'them'} (the ranks return {shares})",
                                 f"{where_zh}：C 的第 {_ranges(rows)} 行不属于任何 rank，没有 GPU 计算"
                                 f"（各 rank 返回 {shares_zh}）")]
        if (owners > 1).any():
            rows = np.nonzero(owners > 1)[0]
            return steps + [Step("correct", False,
                                 f"{where_en}: {_rows(rows)} of C belong{'s' if rows.size == 1 else ''} to "
                                 f"{int(owners.max())} ranks at once (the ranks return {shares}): those GPUs repeat "
                                 "each other's work",
                                 f"{where_zh}：C 的第 {_ranges(rows)} 行同时属于 {int(owners.max())} 个 rank"
                                 f"（各 rank 返回 {shares_zh}）：这些 GPU 在重复彼此的工作")]
        sizes = [e - f for f, e in mine]
        if max(sizes) - min(sizes) > 1:
            busy = int(np.argmax(sizes))
            return steps + [Step("correct", False,
                                 f"{where_en}: rank {busy} gets {max(sizes)} rows and rank {int(np.argmin(sizes))} gets "
                                 f"{min(sizes)} (the ranks return {shares}); the step lasts as long as the busiest "
                                 "GPU, so the shares may differ by one row at most",
                                 f"{where_zh}：rank {busy} 分到 {max(sizes)} 行，rank {int(np.argmin(sizes))} 只有 "
                                 f"{min(sizes)} 行（各 rank 返回 {shares_zh}）；这一步的耗时取决于最忙的 GPU，"
                                 "所以各份的行数最多只能相差一行")]
        gathered = np.concatenate([A[f:e] @ B for f, e in mine]) if M else np.zeros((0, N))
        if not np.array_equal(gathered, A @ B):
            return steps + [Step("correct", False,
                                 f"{where_en}: the ranks return {shares}; a gather puts the blocks in rank order, rank 0's "
                                 "rows first, then rank 1's, …, so rank r's rows must come right after rank r−1's",
                                 f"{where_zh}：各 rank 返回 {shares_zh}；gather 按 rank 顺序摆放各段，先放 rank 0 的行，再放 "
                                 "rank 1 的……所以 "
                                 "rank r 的行必须紧接在 rank r−1 的行之后")]
    return steps + [Step("correct", True,
                         f"{len(cases)} splits (world sizes 1 to 8, M from 1 to {max(M for M, _ in cases)}, M smaller "
                         "than the world size included): every row of C computed by exactly one rank, shares within "
                         "one row of each other, gathered in rank order into A·B",
                         f"{len(cases)} 种切分（world size 1 到 8，M 从 1 到 {max(M for M, _ in cases)}，包括 M 小于 "
                         "world size 的情形）：C 的每一行恰好由一个 rank 计算，各份行数最多相差一行，按 rank 顺序 gather "
                         "后等于 A·B")]


def _all_reduce_points(rng: np.random.Generator) -> list[tuple[float, int, float, float]]:
    """(n_bytes, P, alpha_s, beta_s_per_byte): one GPU; latency only (β = 0) and bandwidth only (α = 0)
    at a few P, so that a wrong term can be named; then points drawn over NCCL's whole range."""
    points: list[tuple[float, int, float, float]] = [(1 << 20, 1, 20e-6, 1 / 300e9)]
    points += [(1 << 26, P, 10e-6, 0.0) for P in (2, 3, 4, 8)]
    points += [(float(1 << 30), P, 0.0, 1 / 250e9) for P in (2, 3, 4, 8)]
    for _ in range(40):
        points.append((float(np.exp2(rng.uniform(10, 32))), int(rng.integers(1, 17)), float(rng.uniform(1e-6, 1e-4)),
                       float(1.0 / rng.uniform(10e9, 900e9))))
    return points


def _grade_ring_all_reduce(attempt: Attempt) -> list[Step]:
    """ring_all_reduce_seconds(n_bytes, P, alpha, beta) against collectives.predict_seconds."""
    from gemm_course.multigpu.collectives import predict_seconds

    signature = "ring_all_reduce_seconds(n_bytes, P, alpha, beta)"
    points = _all_reduce_points(attempt.rng)
    results, problem = _run_python(attempt, "ring_all_reduce_seconds", signature, points)
    if problem:
        return [problem]
    steps = [Step("answer", True, "runs", "可以运行")]
    for (n, P, alpha, beta), got in zip(points, results):
        call = f"ring_all_reduce_seconds({n:.0f}, {P}, {alpha:.3g}, {beta:.3g})"
        if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
            return steps + [Step("correct", False, f"{call} returned {_shown(got)}: return the time in seconds, "
                                 "one finite number", f"{call} 返回了 {_shown(got)}：应返回以秒为单位的时间，"
                                 "一个有限的数")]
        want = predict_seconds("all-reduce", n, P, alpha, beta, "ring")
        if abs(got - want) <= 1e-9 * abs(want) + 1e-18:
            continue
        if P == 1:
            en = f"{call} = {got:.4g} s: with one GPU nothing crosses a link, so the time is 0"
            zh = f"{call} = {got:.4g} 秒：只有一个 GPU 时没有数据经过链路，时间应为 0"
        elif beta == 0:
            en = (f"the latency term is off: with β = 0 (free bandwidth) and P = {P}, yours is {got / alpha:.4g}·α "
                  f"and the ring all-reduce's is {want / alpha:.4g}·α ({call})")
            zh = (f"延迟项不对：β = 0（带宽不计成本）、P = {P} 时，你的结果是 {got / alpha:.4g}·α，环形 all-reduce 应为 "
                  f"{want / alpha:.4g}·α（{call}）")
        elif alpha == 0:
            en = (f"the bandwidth term is off: with α = 0 and P = {P}, yours is {got / (n * beta):.4g}·n·β and the "
                  f"ring all-reduce's is {want / (n * beta):.4g}·n·β ({call})")
            zh = (f"带宽项不对：α = 0、P = {P} 时，你的结果是 {got / (n * beta):.4g}·n·β，环形 all-reduce 应为 "
                  f"{want / (n * beta):.4g}·n·β（{call}）")
        else:
            en = f"{call} = {got:.6g} s; the model gives {want:.6g} s"
            zh = f"{call} = {got:.6g} 秒；模型给出 {want:.6g} 秒"
        return steps + [Step("correct", False, en, zh)]
    return steps + [Step("correct", True, f"equal to the course's α-β model (collectives.predict_seconds) at "
                         f"{len(points)} points, P from 1 to 16, n from 1 KiB to 4 GiB",
                         f"在 {len(points)} 个点上（P 从 1 到 16，n 从 1 KiB 到 4 GiB）与课程的 α-β 模型"
                         "（collectives.predict_seconds）一致")]


def _pipeline_cases(rng: np.random.Generator) -> list[tuple[str, str, list[float], list[float]]]:
    """(what, 说明, compute_s, comm_s) per chunk: one chunk; equal chunks whose GEMMs are the longer stage,
    then whose collectives are; then chunks of unequal times drawn from the seed."""
    ms = 1e-3
    cases = [("one chunk", "只有一个分块", [2.0 * ms], [1.0 * ms]),
             ("4 equal chunks, compute the longer stage", "4 个相同的分块，计算是较长的流水级", [2.0 * ms] * 4, [0.5 * ms] * 4),
             ("4 equal chunks, communication the longer stage", "4 个相同的分块，通信是较长的流水级",
              [0.5 * ms] * 4, [2.0 * ms] * 4)]
    for _ in range(30):
        chunks = int(rng.integers(1, 9))
        compute = [float(t) for t in rng.uniform(0.1, 3.0, chunks) * ms]
        comm = [float(t) for t in rng.uniform(0.1, 3.0, chunks) * ms]
        cases.append(("chunks of unequal times", "各分块时间不等", compute, comm))
    return cases


def _grade_overlap_pipeline(attempt: Attempt) -> list[Step]:
    """overlapped_seconds(compute_s, comm_s) against models.pipeline_seconds."""
    from ..models import pipeline_seconds

    signature = "overlapped_seconds(compute_s, comm_s)"
    cases = _pipeline_cases(attempt.rng)
    results, problem = _run_python(attempt, "overlapped_seconds", signature, [(c, m) for _, _, c, m in cases])
    if problem:
        return [problem]
    steps = [Step("answer", True, "runs", "可以运行")]
    for (what, what_zh, compute, comm), got in zip(cases, results):
        times = f"compute [{', '.join(f'{t * 1e3:.3g}' for t in compute)}] ms, communication " \
                f"[{', '.join(f'{t * 1e3:.3g}' for t in comm)}] ms"
        times_zh = f"计算 [{', '.join(f'{t * 1e3:.3g}' for t in compute)}] ms，通信 " \
                   f"[{', '.join(f'{t * 1e3:.3g}' for t in comm)}] ms"
        if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
            return steps + [Step("correct", False, f"for {times}, overlapped_seconds returned {_shown(got)}: return "
                                 "the time in seconds, one finite number",
                                 f"对于{times_zh}，overlapped_seconds 返回了 {_shown(got)}：应返回以秒为单位的时间，"
                                 "一个有限的数")]
        want = pipeline_seconds(compute, comm)
        if abs(got - want) <= 1e-9 * want:
            continue
        serial = sum(compute) + sum(comm)
        note_en = note_zh = ""
        if abs(got - serial) <= 1e-9 * serial and len(compute) > 1:
            note_en, note_zh = " (that is the serial time: nothing overlapped)", "（这是串行时间：没有任何重叠）"
        return steps + [Step("correct", False,
                             f"{what}, {times}: yours is {got * 1e3:.6g} ms, the two-stage pipeline takes "
                             f"{want * 1e3:.6g} ms{note_en}",
                             f"{what_zh}，{times_zh}：你的结果是 {got * 1e3:.6g} ms，流水线模型应为 {want * 1e3:.6g} ms"
                             f"{note_zh}")]
    return steps + [Step("correct", True, f"equal to the course's pipeline model (models.pipeline_seconds) on "
                         f"{len(cases)} chunkings: one chunk, equal chunks bound by either stage, unequal chunks",
                         f"在 {len(cases)} 种分块方式上与课程的流水线模型（models.pipeline_seconds）一致：单个分块、"
                         "受任一流水级限制的相同分块、时间不等的分块")]


# --- Level 13: FP8 with fine-grained scales --------------------------------------------------------------

def _quantize_cases(rng: np.random.Generator) -> list[tuple[int, int, tuple[int, int]]]:
    """(M, K, (block x, block y)): K below, at and past a strip, K not a multiple of 128, several block
    rows and columns, and one drawn from the seed."""
    fixed = [(1, 1, (4, 8)), (3, 128, (4, 8)), (6, 300, (2, 4)), (19, 1000, (4, 8)), (40, 129, (1, 16))]
    return fixed + [(int(rng.integers(1, 48)), int(rng.integers(1, 800)), ((4, 8), (2, 16))[int(rng.integers(2))])]


def _quantize_input(M: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """Normal values whose size changes from strip to strip, a few outliers a thousand times larger, and
    (where there are two strips or more) one strip of zeros."""
    from gemm_course.fp8.formats import SCALE_BLOCK

    strips = -(-K // SCALE_BLOCK)
    sizes = np.repeat(np.exp2(rng.uniform(-4, 4, (M, strips))), SCALE_BLOCK, axis=1)[:, :K]
    a = rng.standard_normal((M, K)) * sizes
    for _ in range(max(1, M * strips // 4)):
        a[int(rng.integers(M)), int(rng.integers(K))] *= 1000.0
    if strips >= 2:
        r, s = int(rng.integers(M)), int(rng.integers(strips))
        a[r, s * SCALE_BLOCK:(s + 1) * SCALE_BLOCK] = 0.0
    return a.astype(np.float32)


def _nearest_e4m3(bits: np.ndarray, quotient: np.ndarray) -> np.ndarray:
    """True where bits is a nearest e4m3 value to quotient: the exact one, or one as near up to a hair
    (x / s in float32 may land on the other side of a midpoint than the exact quotient does)."""
    from gemm_course.fp8.formats import decode_e4m3, encode_e4m3

    best = decode_e4m3(encode_e4m3(quotient)).astype(np.float64)
    mine = decode_e4m3(bits).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.abs(mine - quotient) <= np.abs(best - quotient) + 2.0 ** -20 * np.abs(quotient)


def _grade_quantize(attempt: Attempt) -> list[Step]:
    """quantize_1x128: one thread per (row, 128-wide strip); scales and bits against fp8.quantize_rows_1x128."""
    from gemm_course.fp8.formats import E4M3_MAX, E4M3_NAN, SCALE_BLOCK, decode_e4m3, encode_e4m3, quantize_rows_1x128

    kernel, steps = _compiled(attempt, "quantize_1x128", ("const float*", "unsigned char*", "float*", "int", "int"),
                              "(const float* a, unsigned char* bits, float* scales, int M, int K)")
    if kernel is None:
        return steps
    rng = attempt.rng
    cases = _quantize_cases(rng)
    for M, K, (bx, by) in cases:
        a = _quantize_input(M, K, rng)
        strips = -(-K // SCALE_BLOCK)
        bits = np.full((M, K), E4M3_NAN, dtype=np.uint8)
        scales = np.full((M, strips), np.nan, dtype=np.float32)
        grid = (-(-strips // bx), -(-M // by), 1)
        launch = _launch_text(grid, (bx, by, 1))
        where_en = f"M×K = {M}×{K} ({strips} strip{'s' if strips > 1 else ''}), quantize_1x128{launch}"
        where_zh = f"M×K = {M}×{K}（{strips} 个条带），quantize_1x128{launch}"
        failed = _launch(kernel, grid, (bx, by, 1), [a, bits, scales, M, K], ["a", "bits", "scales", "M", "K"],
                         where_en, where_zh)
        if failed:
            return steps + [failed]
        _, want_scales = quantize_rows_1x128(a)
        wrong = ~np.isclose(scales, want_scales, rtol=2.0 ** -22, atol=0)
        if wrong.any():
            return steps + [_scale_verdict(a, scales, want_scales, wrong, where_en, where_zh)]
        quotient = a.astype(np.float64) / np.repeat(scales.astype(np.float64), SCALE_BLOCK, axis=1)[:, :K]
        unwritten = bits == E4M3_NAN  # the poison: no finite a / scale encodes to it
        if unwritten.any():
            r, c = (int(v) for v in np.argwhere(unwritten)[0])
            en = (f"at {where_en}: {int(unwritten.sum())} of the {M * K} bytes of bits were never written, the "
                  f"first bits[{r}, {c}] (strip {c // SCALE_BLOCK} of row {r})")
            zh = (f"{where_zh}时：bits 的 {M * K} 个字节中有 {int(unwritten.sum())} 个从未被写入，第一个是 "
                  f"bits[{r}, {c}]（第 {r} 行的第 {c // SCALE_BLOCK} 个条带）")
            return steps + [Step("correct", False, en, zh)]
        bad = ~_nearest_e4m3(bits, quotient)
        if bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            mine, nearest = int(bits[r, c]), int(encode_e4m3(quotient[r, c]))
            en = (f"at {where_en}: bits[{r}, {c}] = 0x{mine:02X} ({float(decode_e4m3(mine)):.4g}), but "
                  f"a[{r}, {c}] / scale = {quotient[r, c]:.6g} rounds to 0x{nearest:02X} "
                  f"({float(decode_e4m3(nearest)):.4g})")
            zh = (f"{where_zh}时：bits[{r}, {c}] = 0x{mine:02X}（{float(decode_e4m3(mine)):.4g}），但 "
                  f"a[{r}, {c}] / scale = {quotient[r, c]:.6g} 应舍入为 0x{nearest:02X}（{float(decode_e4m3(nearest)):.4g}）")
            return steps + [Step("correct", False, en, zh)]
    shown = ", ".join(f"{M}×{K}" for M, K, _ in cases)
    shown_zh = "、".join(f"{M}×{K}" for M, K, _ in cases)
    steps.append(Step("correct", True, f"scales and e4m3 bytes equal gemm_course.fp8.formats's on {shown} (outliers, "
                      f"short last strips and an all-zero strip included); every scale maps its strip's max |a| "
                      f"onto {E4M3_MAX:g}",
                      f"在 {shown_zh} 上缩放因子和 e4m3 字节都与 gemm_course.fp8.formats 的结果一致（含离群值、较短的最后一个条带"
                      f"和全零条带）；每个缩放因子都把所在条带的最大 |a| 映射到 {E4M3_MAX:g}"))
    return steps + [_quantize_one_thread_per_strip(kernel, rng)]


def _quantize_one_thread_per_strip(kernel: Any, rng: np.random.Generator) -> Step:
    """The lesson's parallel split, read from the stores of every block of a 19×1000 launch (8 strips per
    row, the last one short): each thread writes one strip's scale and only that strip's bytes. One thread
    per row (looping over its strips) is right but fails here."""
    from gemm_course.fp8.formats import E4M3_NAN, SCALE_BLOCK
    from gemm_course.inspect import warp_access

    M, K, (bx, by) = 19, 1000, (4, 8)
    strips = -(-K // SCALE_BLOCK)
    a = _quantize_input(M, K, rng)
    grid = (-(-strips // bx), -(-M // by), 1)
    launch = _launch_text(grid, (bx, by, 1))
    where_en = f"M×K = {M}×{K} ({strips} strips per row), quantize_1x128{launch}"
    where_zh = f"M×K = {M}×{K}（每行 {strips} 个条带），quantize_1x128{launch}"
    bits = np.full((M, K), E4M3_NAN, dtype=np.uint8)
    scales = np.full((M, strips), np.nan, dtype=np.float32)
    log, failed = _traced_launch(kernel, grid, (bx, by, 1), [a, bits, scales, M, K], ["a", "bits", "scales", "M", "K"],
                                 where_en, where_zh)
    if failed:
        return failed
    for block, per_thread in sorted(warp_access.sequences(log).items()):
        for thread, seq in sorted(per_thread.items()):
            owned = sorted({tuple(x.index) for x in seq if x.array == "scales" and x.write})
            byte_strips = sorted({(x.index[0], (x.index[1] + j) // SCALE_BLOCK) for x in seq
                                  if x.array == "bits" and x.write for j in range(x.size)})
            if len(owned) <= 1 and set(byte_strips) <= set(owned):
                continue
            t, b = ",".join(map(str, thread[:2])), ",".join(map(str, block[:2]))

            def listed(pairs: list, zh: bool = False) -> str:
                shown = [f"（第 {r} 行，第 {c} 个条带）" if zh else f"(row {r}, strip {c})" for r, c in pairs[:3]]
                return ("、" if zh else ", ").join(shown) + (("、…" if zh else ", …") if len(pairs) > 3 else "")

            if len(owned) > 1:
                what_en = f"the scales of {len(owned)} strips: {listed(owned)}"
                what_zh = f" {len(owned)} 个条带的缩放因子：{listed(owned, True)}"
            else:
                foreign = [p for p in byte_strips if p not in owned]
                mine_en = f"the strip whose scale it wrote, {listed(owned)}" if owned else "any strip whose scale it wrote"
                mine_zh = f"它写了缩放因子的条带{listed(owned, True)}" if owned else "它写了缩放因子的条带（它没有写任何缩放因子）"
                what_en = f"bytes of {listed(foreign)}, outside {mine_en}"
                what_zh = f"{listed(foreign, True)}的字节，不在{mine_zh}之内"
            return Step("one_per_strip", False,
                        f"at {where_en}, thread ({t}) of block ({b}) wrote {what_en}; "
                        "the kernel runs one thread per 1×128 strip: thread (x, y) of the grid owns strip x of row y, "
                        "its scale and its bytes, and nothing else",
                        f"{where_zh}时，线程块 ({b}) 的线程 ({t}) 写了{what_zh}；本内核"
                        "每个 1×128 条带一个线程：网格中的线程 (x, y) 负责第 y 行的第 x 个条带，只写它的缩放因子和字节")
    return Step("one_per_strip", True, f"one thread per 1×128 strip: at {where_en} each thread wrote one strip's scale "
                "and bytes", f"每个 1×128 条带一个线程：{where_zh}时每个线程只写一个条带的缩放因子和字节")


def _scale_verdict(a: np.ndarray, scales: np.ndarray, want: np.ndarray, wrong: np.ndarray,
                   where_en: str, where_zh: str) -> Step:
    """What a wrong set of scales looks like: unwritten, one per row, one per tensor, inverted, zero, or other."""
    from gemm_course.fp8.formats import E4M3_MAX, SCALE_BLOCK

    r, s = (int(v) for v in np.argwhere(wrong)[0])
    cols = f"{s * SCALE_BLOCK}..{min(a.shape[1], (s + 1) * SCALE_BLOCK) - 1}"
    row_scale = np.abs(a.astype(np.float64)).max(axis=1, keepdims=True) / E4M3_MAX
    close = dict(rtol=1e-6, atol=0)
    head_en, head_zh = f"at {where_en}: scales[{r}, {s}] (row {r}, columns {cols})", \
        f"{where_zh}时：scales[{r}, {s}]（第 {r} 行，第 {cols} 列）"
    got, expected = float(scales[r, s]), float(want[r, s])
    if np.isnan(scales).any():
        r, s = (int(v) for v in np.argwhere(np.isnan(scales))[0])
        unwritten = int(np.isnan(scales).sum())
        return Step("correct", False, f"at {where_en}: {unwritten} of the {scales.size} scales were never written, "
                    f"the first scales[{r}, {s}] (row {r}, strip {s}; a row of K = {a.shape[1]} has {scales.shape[1]} "
                    f"strip{'s' if scales.shape[1] > 1 else ''}, the last one may be shorter than 128)",
                    f"{where_zh}时：{scales.size} 个缩放因子中有 {unwritten} 个从未被写入，第一个是 scales[{r}, {s}]"
                    f"（第 {r} 行第 {s} 个条带；K = {a.shape[1]} 的一行有 {scales.shape[1]} 个条带，最后一个可能不足 128 列）")
    if np.allclose(scales, np.broadcast_to(row_scale, scales.shape), **close) and scales.shape[1] > 1:
        return Step("correct", False, f"{head_en} = {got:.6g}: your scales are one per row (max |a| of the whole "
                    f"row / 448); each 128-wide strip needs its own, here {expected:.6g}, so that an outlier only "
                    "coarsens its own strip",
                    f"{head_zh} = {got:.6g}：你的缩放因子是每行一个（整行的最大 |a| / 448）；每个 128 列宽的条带都需要"
                    f"自己的缩放因子，这里应为 {expected:.6g}，这样离群值只影响它所在的条带")
    if np.allclose(scales, np.abs(a.astype(np.float64)).max() / E4M3_MAX, **close) and scales.size > 1:
        return Step("correct", False, f"{head_en} = {got:.6g}: every scale is the same, max |a| of the whole tensor "
                    f"/ 448; each row's 128-wide strip needs its own, here {expected:.6g}",
                    f"{head_zh} = {got:.6g}：所有缩放因子都相同，即整个张量的最大 |a| / 448；每行的每个 128 列宽条带"
                    f"都需要自己的缩放因子，这里应为 {expected:.6g}")
    if got > 0 and np.isclose(got * expected, 1.0, rtol=1e-5):
        return Step("correct", False, f"{head_en} = {got:.6g}, the inverse of {expected:.6g}: the scale is what "
                    "the bytes are multiplied by to get a back, max |a| / 448",
                    f"{head_zh} = {got:.6g}，是 {expected:.6g} 的倒数：缩放因子是字节解码后要乘上的数，"
                    "才能还原 a，即最大 |a| / 448")
    if expected == 1.0 and not np.abs(a[r, s * SCALE_BLOCK:(s + 1) * SCALE_BLOCK]).any():
        return Step("correct", False, f"{head_en} = {got:.6g}: this strip is all zeros, and its scale must be 1 "
                    "(max |a| / 448 would be 0, and a / 0 is not a number)",
                    f"{head_zh} = {got:.6g}：这个条带全是零，它的缩放因子必须为 1（最大 |a| / 448 会是 0，而 a / 0 "
                    "不是一个数）")
    return Step("correct", False, f"{head_en} = {got:.6g}, expected max |a| / 448 over that strip = {expected:.6g}",
                f"{head_zh} = {got:.6g}，应为该条带的最大 |a| / 448 = {expected:.6g}")


def _promotion_cases(rng: np.random.Generator) -> list[tuple[int, int, int, tuple[int, int]]]:
    """(M, N, K, (block x, block y)): one element; one k-block; N across a 128-column tile of B's scales
    with K not a multiple of 128; several k-blocks; one drawn from the seed."""
    fixed = [(1, 1, 1, (16, 16)), (7, 13, 128, (16, 8)), (33, 130, 300, (16, 16)), (20, 260, 520, (32, 4))]
    drawn = (int(rng.integers(1, 33)), int(rng.integers(1, 270)), int(rng.integers(1, 530)),
             ((16, 16), (16, 8), (32, 4))[int(rng.integers(3))])
    return fixed + [drawn]


def _grade_promotion(attempt: Attempt) -> list[Step]:
    """fp8_gemm_blockwise: C = Σ over k-blocks of (fp32 k-block sum) · a_scale · b_scale, one thread per
    element of C, against fp8.reference_gemm_fp8."""
    from gemm_course.fp8.formats import SCALE_BLOCK, decode_e4m3, reference_gemm_fp8
    from gemm_course.fp8.gemm import magnitude_gemm, random_fp8_operands

    kernel, steps = _compiled(
        attempt, "fp8_gemm_blockwise",
        ("const unsigned char*", "const float*", "const unsigned char*", "const float*", "float*", "int", "int", "int"),
        "(const unsigned char* A, const float* a_scales, const unsigned char* B, const float* b_scales, float* C, "
        "int M, int N, int K)")
    if kernel is None:
        return steps
    rng = attempt.rng
    cases = _promotion_cases(rng)
    for M, N, K, (bx, by) in cases:
        a_bits, a_s, b_bits, b_s = random_fp8_operands(M, N, K, "blockwise", seed=int(rng.integers(1 << 31)))
        a_s, b_s = np.ascontiguousarray(a_s, np.float32), np.ascontiguousarray(b_s, np.float32)
        C = np.full((M, N), np.nan, dtype=np.float32)
        grid = (-(-N // bx), -(-M // by), 1)
        launch = _launch_text(grid, (bx, by, 1))
        kb = -(-K // SCALE_BLOCK)
        where_en = f"{M}×{N}×{K} ({kb} k-block{'s' if kb > 1 else ''}), fp8_gemm_blockwise{launch}"
        where_zh = f"{M}×{N}×{K}（{kb} 个 k 块），fp8_gemm_blockwise{launch}"
        failed = _launch(kernel, grid, (bx, by, 1), [a_bits, a_s, b_bits, b_s, C, M, N, K],
                         ["A", "a_scales", "B", "b_scales", "C", "M", "N", "K"], where_en, where_zh)
        if failed:
            return steps + [failed]
        ref = reference_gemm_fp8(a_bits, a_s, b_bits, b_s)
        # fp32 sums of at most 128 products, then K/128 promotions: far inside 2^-14 of Σ|a·b|.
        allowed = 2.0 ** -14 * magnitude_gemm(a_bits, a_s, b_bits, b_s) + 2.0 ** -20 * np.abs(ref) + 1e-30
        with np.errstate(invalid="ignore"):
            ratio = np.where(np.isnan(C), np.inf, np.abs(C - ref) / allowed)
        if ratio.max() <= 1:
            continue
        unwritten = np.isnan(C)
        if unwritten.any():
            m, n = (int(v) for v in np.argwhere(unwritten)[0])
            return steps + [Step("correct", False, f"at {where_en}: {int(unwritten.sum())} elements of C are NaN "
                                 f"(never written?), the first C[{m}, {n}]",
                                 f"{where_zh}时：C 中有 {int(unwritten.sum())} 个元素为 NaN（从未被写入？），第一个是 "
                                 f"C[{m}, {n}]")]
        m, n = (int(v) for v in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
        en = (f"at {where_en}: C[{m}, {n}] = {float(C[m, n]):.6g}, expected {ref[m, n]:.6g} (error {ratio[m, n]:.3g} "
              "times the allowed)")
        zh = f"{where_zh}时：C[{m}, {n}] = {float(C[m, n]):.6g}，应为 {ref[m, n]:.6g}（误差是允许值的 {ratio[m, n]:.3g} 倍）"
        # Name the mistake when C is what a known wrong loop computes.
        raw = decode_e4m3(a_bits).astype(np.float64) @ decode_e4m3(b_bits).astype(np.float64).T
        tile_of_column = np.arange(N) // SCALE_BLOCK
        guesses = (
            (raw * a_s[0, 0] * b_s[0, 0], "a single pair of scales for the whole product (a_scales[0] · b_scales[0])",
             "整个乘积只用一对缩放因子（a_scales[0] · b_scales[0]）"),
            (raw * a_s[:, -1:] * b_s[tile_of_column, -1][None, :],
             "summing all of K first and scaling once, with the last k-block's scales",
             "整个 K 上的和只用最后一个 k 块的缩放因子乘一次"),
            (raw * a_s[:, :1] * b_s[tile_of_column, 0][None, :],
             "summing all of K first and scaling once, with the first k-block's scales",
             "整个 K 上的和只用第一个 k 块的缩放因子乘一次"),
            (raw, "applying no scales at all", "完全不乘缩放因子"),
        )
        for guess, what_en, what_zh in guesses:
            if np.all(np.abs(C - guess) <= 2.0 ** -12 * np.abs(guess) + allowed):
                en += f"; your C is what you get from {what_en}: each k-block's sum needs that block's own two scales"
                zh += f"；你的 C 正是{what_zh}时得到的结果：每个 k 块的和都要乘上这个 k 块自己的两个缩放因子"
                break
        return steps + [Step("correct", False, en, zh)]
    shown = ", ".join(f"{M}×{N}×{K}" for M, N, K, _ in cases)
    shown_zh = "、".join(f"{M}×{N}×{K}" for M, N, K, _ in cases)
    return steps + [Step("correct", True, f"C equals the float64 reference (fp8.reference_gemm_fp8) within 2^-14 of "
                         f"Σ|a·b| on {shown}, with scales that change every k-block and every 128 columns",
                         f"在 {shown_zh} 上 C 与 float64 参考结果（fp8.reference_gemm_fp8）之差不超过 Σ|a·b| 的 2^-14，"
                         "缩放因子随每个 k 块、每 128 列而变")]


# --- the runners grade.RUNNERS names --------------------------------------------------------------------

TASKS: dict[str, dict[str, Callable[[Attempt], list[Step]]]] = {
    "cuda_basics": {"saxpy": _grade_saxpy, "transpose": _grade_transpose, "reverse": _grade_reverse},
    "multi_gpu": {"row_split": _grade_row_split, "ring_all_reduce": _grade_ring_all_reduce,
                  "overlap_pipeline": _grade_overlap_pipeline},
    "fp8": {"quantize_1x128": _grade_quantize, "promotion": _grade_promotion},
    "dsl": {"tile_loop": lambda attempt: _triton_answers().grade_tile_loop(attempt),
            "predict_config": lambda attempt: _predict_run(attempt)},
}


def _triton_answers() -> Any:
    from . import triton_answers

    return triton_answers


def _predict_run(attempt: Attempt) -> list[Step]:
    from .predict import run

    return run(attempt)


def _run(runner: str, attempt: Attempt) -> list[Step]:
    task = (attempt.exercise.data or {}).get("task")
    if task not in TASKS[runner]:
        raise ValueError(f"exercise {attempt.exercise.id}: its task must be one of {', '.join(TASKS[runner])}, "
                         f"not {task!r}")
    return TASKS[runner][task](attempt)


def run_cuda_basics(attempt: Attempt) -> list[Step]:
    """Level 0: a small kernel launched like primer.run_kernel, on the CPU backend."""
    return _run("cuda_basics", attempt)


def run_multi_gpu(attempt: Attempt) -> list[Step]:
    """Level 12: a Python answer, checked against the course's split and α-β model."""
    return _run("multi_gpu", attempt)


def run_fp8(attempt: Attempt) -> list[Step]:
    """Level 13: an FP8 kernel on e4m3 bytes, on the CPU backend, against gemm_course.fp8.formats."""
    return _run("fp8", attempt)


def run_dsl(attempt: Attempt) -> list[Step]:
    """Level 14: a Triton kernel run by Triton's interpreter in a child process (triton_answers), or the course
    quantities of a Triton configuration, predicted (predict.run; the "predict" check compiles the course's kernel)."""
    return _run("dsl", attempt)
