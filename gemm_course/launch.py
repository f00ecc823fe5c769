"""gemm(): validate, compile (cached), launch. The one way every notebook runs a level's kernel."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import device
from .compile import get_kernel
from .levels import Level, get_level

MAX_GRID_YZ = 65535


def _check_operands(lv: Level, A: Any, B: Any, out: Any, xp: Any) -> tuple[int, int, int]:
    array_type = xp.ndarray
    for name, X in (("A", A), ("B", B)):
        if not isinstance(X, array_type):
            raise TypeError(f"{name} must be a {xp.__name__}.ndarray (got {type(X).__name__}); "
                            f"convert it with {xp.__name__}.asarray({name})")
        if X.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix; got shape {X.shape}")
        if str(X.dtype) not in lv.dtypes:
            raise ValueError(f"level {lv.id} takes {', '.join(lv.dtypes)}; {name} is {X.dtype}. "
                             f"Convert it with {name}.astype({xp.__name__}.{lv.dtypes[0]})")
        if not X.flags.c_contiguous:
            raise ValueError(f"{name} must be row-major and contiguous (C order); "
                             f"use {xp.__name__}.ascontiguousarray({name})")
    if A.dtype != B.dtype:
        raise ValueError(f"A is {A.dtype} but B is {B.dtype}; give both the same dtype")
    (M, K), (K2, N) = A.shape, B.shape
    if K != K2:
        raise ValueError(f"shapes do not match for A @ B: A is {M}×{K}, B is {K2}×{N}; "
                         "A's column count must equal B's row count")
    if min(M, N, K) < 1:
        raise ValueError(f"empty matrices are not supported: M={M}, N={N}, K={K} must all be ≥ 1")
    if max(M, N, K) >= 2**31:
        raise ValueError("each of M, N, K must be below 2**31 (the kernels index with int)")
    if out is not None:
        if not isinstance(out, array_type) or out.shape != (M, N) or out.dtype != A.dtype \
                or not out.flags.c_contiguous:
            raise ValueError(f"out must be a contiguous {xp.__name__}.ndarray of shape ({M}, {N}) "
                             f"and dtype {A.dtype}")
    return M, N, K


def gemm(A: Any, B: Any, level: str | int | Level = "01_naive", *, out: Any = None,
         source: Optional[str] = None, **params: Any) -> Any:
    """C = A @ B with a level's kernel. A, B: row-major CuPy arrays. Returns C (a new array or out).

    params are the level's tunable parameters (see levels()); missing ones take their defaults.
    source replaces the level's CUDA file with your own edited copy (same kernel names).
    """
    lv = get_level(level)
    resolved = lv.resolve(**params)
    device.require_gpu(f"running level {lv.id}")
    import cupy

    if device.compute_capability() < lv.min_cc:
        raise RuntimeError(
            f"level {lv.id} needs compute capability {lv.min_cc // 10}.{lv.min_cc % 10} (sm_{lv.min_cc}) "
            f"or newer; this GPU ({device.gpu_name()}) is sm_{device.compute_capability()}. "
            "Read the recorded results for this level, or use a newer GPU.")
    M, N, K = _check_operands(lv, A, B, out, cupy)
    launch = lv.geometry(M, N, K, resolved)
    if launch.grid[1] > MAX_GRID_YZ or launch.grid[2] > MAX_GRID_YZ:
        raise ValueError(f"the grid {launch.grid} exceeds CUDA's limit of {MAX_GRID_YZ} blocks in y/z "
                         f"for M={M}, N={N}; use a larger block_y / tile, or split the product")
    kernel = get_kernel(lv, resolved, source)
    if launch.dynamic_shared_bytes > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = launch.dynamic_shared_bytes
    C = out if out is not None else cupy.empty((M, N), dtype=A.dtype)
    kernel(launch.grid, launch.block, (A, B, C, np.int32(M), np.int32(N), np.int32(K)),
           shared_mem=launch.dynamic_shared_bytes)
    return C
