"""One correctness check for Level 14's kernels, on the CPU (interpreter) and on the GPU alike.

Random U(−1, 1) inputs (never zero), C poisoned with NaN, the float64 product of the rounded inputs and the course's
tolerance (gemm_course.run.check.tolerance), as every level is checked; and one thing more, because a Triton kernel
computes its own addresses: A, B and C each sit inside a larger buffer whose extra elements (the guards) are NaN.
A load past the end of A or B that is not masked then reads NaN, which turns its products into NaN even where the
other operand's mask gives 0 (the Triton interpreter and the GPU both read memory beyond an array without
complaint), and a store past C's end changes a guard, which the check counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gemm_course.run.dtypes import nan_filled, to_float64


def guard_elements(M: int, N: int, K: int, tile: int = 256) -> int:
    """Guard elements on each side: more than any tile reaches past a matrix's end (a whole k-tile of rows of B,
    a whole tile of rows and columns of C), a multiple of 64 so every matrix stays 16-byte aligned for TMA."""
    need = tile * (max(M, N, K) + tile)
    return -(-need // 64) * 64


@dataclass
class GuardedProblem:
    A: Any
    B: Any
    C: Any
    buffers: tuple[Any, Any, Any]
    guard: int
    dtype: str
    c_type: str


def _inside(buffer: Any, guard: int, shape: tuple[int, int]) -> Any:
    return buffer[guard:guard + shape[0] * shape[1]].reshape(shape)


def guarded_problem(M: int, N: int, K: int, dtype: str, c_type: str, seed: int, xp: Any) -> GuardedProblem:
    """A and B (random, never zero) and C (all NaN), each inside a NaN-filled buffer with guard elements on both
    sides. xp: numpy (interpreter) or cupy (GPU)."""
    from gemm_course.run.check import random_operands

    guard = guard_elements(M, N, K)
    A0, B0 = random_operands(M, N, K, dtype, seed=seed, xp=xp)
    buffers = []
    views = []
    for X0, shape, kind in ((A0, (M, K), dtype), (B0, (K, N), dtype), (None, (M, N), c_type)):
        buffer = nan_filled((shape[0] * shape[1] + 2 * guard,), kind, xp)
        view = _inside(buffer, guard, shape)
        if X0 is not None:
            view[...] = X0
        buffers.append(buffer)
        views.append(view)
    return GuardedProblem(views[0], views[1], views[2], tuple(buffers), guard, dtype, c_type)


def verdict(problem: GuardedProblem) -> dict[str, Any]:
    """After the kernel ran on problem.C: relative error against the float64 product, the bound, elements of C left
    NaN, guard elements of C written, guard elements of A and B changed (the kernel wrote its inputs), passed."""
    from gemm_course.run.check import relative_error, tolerance

    xp = _array_module(problem.C)
    C64 = to_float64(problem.C)
    unwritten = int(xp.isnan(C64).sum())
    g = problem.guard
    c_buffer = problem.buffers[2]
    written_outside = int((~xp.isnan(to_float64(xp.concatenate([c_buffer[:g], c_buffer[-g:]])))).sum())
    inputs_changed = sum(int((~xp.isnan(to_float64(xp.concatenate([b[:g], b[-g:]])))).sum())
                         for b in problem.buffers[:2])
    K = problem.A.shape[1]
    error = relative_error(problem.C, to_float64(problem.A) @ to_float64(problem.B))
    bound = tolerance(problem.dtype, K, problem.c_type)
    return {"relative_error": error, "tolerance": bound, "unwritten": unwritten, "written_outside": written_outside,
            "input_guards_changed": inputs_changed,
            "passed": unwritten == 0 and written_outside == 0 and inputs_changed == 0 and error <= bound}


def _array_module(X: Any) -> Any:
    import numpy as np

    if isinstance(X, np.ndarray):
        return np
    import cupy

    return cupy

