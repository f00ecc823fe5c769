"""gemm(): validate, compile (cached), launch. The one way every notebook runs a level's kernel,
on the GPU (CuPy) or, without one, on the CPU (cpu_backend: the same CUDA C source, emulated)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import device
from .compile import get_kernel
from .dtypes import BFLOAT16, dtype_name, min_cc, storage_dtype
from .levels import Launch, Level, get_level, levels

MAX_GRID_YZ = 65535


def _check_operands(lv: Level, params: dict[str, Any], A: Any, B: Any, out: Any,
                    xp: Any) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of valid operands (batch 0: one product of 2-D matrices), or a clear error."""
    array_type = xp.ndarray
    for name, X in (("A", A), ("B", B)):
        if not isinstance(X, array_type):
            raise TypeError(f"{name} must be a {xp.__name__}.ndarray (got {type(X).__name__}); "
                            f"convert it with {xp.__name__}.asarray({name})")
        if X.ndim == 3 and not lv.batched:
            batched = ", ".join(other.id for other in levels() if other.batched)
            raise ValueError(f"{name} has shape {X.shape}: level {lv.id} multiplies 2-D matrices only; "
                             f"for a batch of products use a batched level ({batched}), or loop")
        if X.ndim not in (2, 3):
            raise ValueError(f"{name} must be a 2-D matrix (or a 3-D batch of them); got shape {X.shape}")
        if dtype_name(X) not in lv.dtypes:
            how = (f"gemm_course.dtypes.to_bfloat16({name}) (uint16 bit patterns: {xp.__name__} has no "
                   "bfloat16)" if lv.dtypes[0] == BFLOAT16 else f"{name}.astype({xp.__name__}.{lv.dtypes[0]})")
            raise ValueError(f"level {lv.id} takes {', '.join(lv.dtypes)}; {name} is {X.dtype}. "
                             f"Convert it with {how}")
        if not X.flags.c_contiguous:
            raise ValueError(f"{name} must be row-major and contiguous (C order); "
                             f"use {xp.__name__}.ascontiguousarray({name})")
    if A.dtype != B.dtype:
        raise ValueError(f"A is {A.dtype} but B is {B.dtype}; give both the same dtype")
    if A.ndim != B.ndim or (A.ndim == 3 and A.shape[0] != B.shape[0]):
        raise ValueError(f"A {A.shape} and B {B.shape}: give two matrices, or two batches of the same length")
    batch = A.shape[0] if A.ndim == 3 else 0
    (M, K), (K2, N) = A.shape[-2:], B.shape[-2:]
    if K != K2:
        raise ValueError(f"shapes do not match for A @ B: A is {M}×{K}, B is {K2}×{N}; "
                         "A's column count must equal B's row count")
    if A.ndim == 3 and not 1 <= batch <= MAX_GRID_YZ:
        raise ValueError(f"a batch holds 1 to {MAX_GRID_YZ} products (one per grid z index); got {batch}")
    if min(M, N, K) < 1:
        raise ValueError(f"empty matrices are not supported: M={M}, N={N}, K={K} must all be ≥ 1")
    if max(M, N, K) >= 2**31:
        raise ValueError("each of M, N, K must be below 2**31 (the kernels index with int)")
    c_dtype = xp.dtype(storage_dtype(lv.c_type(params, dtype_name(A))))
    c_shape = (batch, M, N) if batch else (M, N)
    if out is not None:
        if not isinstance(out, array_type) or out.shape != c_shape or out.dtype != c_dtype \
                or not out.flags.c_contiguous:
            raise ValueError(f"out must be a contiguous {xp.__name__}.ndarray of shape {c_shape} "
                             f"and dtype {c_dtype}")
    if lv.alignment:
        for name, X in (("A", A), ("B", B), ("out", out)):
            if X is not None and _address(X) % lv.alignment:
                raise ValueError(f"level {lv.id} needs {name} to start on a {lv.alignment}-byte boundary; "
                                 f"copy it first ({xp.__name__}.ascontiguousarray of a fresh array) "
                                 "instead of passing an offset view")
    problems = lv.shape_rules(M, N, K, params)
    if problems:
        raise ValueError("; ".join(f"{en} / {zh}" for en, zh in problems))
    return batch, M, N, K


BACKENDS = ("auto", "cuda", "cpu")


def resolve_backend(backend: str) -> str:
    """"cuda" or "cpu": "auto" picks "cuda" when CuPy sees a GPU, else "cpu"."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {', '.join(map(repr, BACKENDS))}")
    if backend == "auto":
        return "cuda" if device.gpu_available() else "cpu"
    return backend


@dataclass(frozen=True)
class Epilogue:
    """The run-time arguments of an epilogue level: C = act(alpha·A·B + bias) + beta·C."""

    bias: Any = None   # a vector of N values, or None
    alpha: float = 1.0
    beta: float = 1.0  # read only when the setting has accumulate=True


def _split_epilogue(lv: Level, params: dict[str, Any]) -> tuple[dict[str, Any], Optional[Epilogue]]:
    """For an epilogue level, take the bias vector, alpha and beta out of params.

    bias=<vector> turns the `bias` setting on and passes the vector; bias=False turns it off.
    """
    if not lv.epilogue:
        return params, None
    params = dict(params)
    alpha, beta = float(params.pop("alpha", 1.0)), float(params.pop("beta", 1.0))
    bias = params.get("bias", lv.defaults.get("bias"))
    if bias is None or isinstance(bias, (bool, np.bool_)):
        if bias:
            raise ValueError(f"level {lv.id} adds a bias vector: pass it as bias=<array of N values>, "
                             "or bias=False")
        params["bias"] = False
        return params, Epilogue(None, alpha, beta)
    params["bias"] = True
    return params, Epilogue(bias, alpha, beta)


def _geometry(lv: Level, resolved: dict[str, Any], M: int, N: int, K: int, batch: int = 0) -> Launch:
    """The launch geometry (grid z = the batch), refused with a clear message where it breaks
    CUDA's grid limits."""
    launch = lv.geometry(M, N, K, resolved)
    if batch:
        launch = Launch(grid=(launch.grid[0], launch.grid[1], batch), block=launch.block,
                        dynamic_shared_bytes=launch.dynamic_shared_bytes)
    if launch.grid[1] > MAX_GRID_YZ or launch.grid[2] > MAX_GRID_YZ:
        raise ValueError(f"the grid {launch.grid} exceeds CUDA's limit of {MAX_GRID_YZ} blocks in y/z "
                         f"for M={M}, N={N}; use a larger block_y / tile, or split the product")
    return launch


def _check_bias(ep: Optional[Epilogue], N: int, dtype: Any, xp: Any) -> None:
    b = ep.bias if ep is not None else None
    if b is not None and (not isinstance(b, xp.ndarray) or b.shape != (N,) or b.dtype != dtype
                          or not b.flags.c_contiguous):
        raise ValueError(f"bias must be a contiguous {xp.__name__}.ndarray of shape ({N},) and dtype {dtype} "
                         "(one value per column of C)")


def _address(X: Any) -> int:
    return X.ctypes.data if isinstance(X, np.ndarray) else X.data.ptr


def _kernel_params(lv: Level, resolved: dict[str, Any], A: Any, B: Any, C: Any, N: int, K: int) -> dict[str, Any]:
    """What kernel_name() sees: the setting, plus "bf16" for a level that takes bfloat16 (the input
    type is a template argument), "batched" for a batch of products (3-D operands), and "aligned"
    for a level with a vector fast path (K and N multiples of the vector width, A, B, C on
    whole-vector addresses)."""
    if A.ndim == 3:
        resolved = resolved | {"batched": True}
    if BFLOAT16 in lv.dtypes:
        resolved = resolved | {"bf16": dtype_name(A) == BFLOAT16}
    if not lv.vector_width:
        return resolved
    w = lv.vector_width
    aligned = K % w == 0 and N % w == 0 and all(_address(X) % (w * X.itemsize) == 0 for X in (A, B, C))
    return resolved | {"aligned": aligned}


def gemm(A: Any, B: Any, level: str | int | Level = "01_naive", *, out: Any = None,
         source: Optional[str] = None, backend: str = "auto", race_check: bool = True,
         source_name: Optional[str] = None, **params: Any) -> Any:
    """C = A @ B with a level's kernel. Returns C (a new array or out).

    backend="cuda": A, B are row-major CuPy arrays and the kernel runs on the GPU.
    backend="cpu": A, B are row-major NumPy arrays and the same CUDA C source runs on the CPU,
    thread by thread (gemm_course.cpu_backend; small shapes; SIMT levels only).
    backend="auto" (the default): "cuda" when a GPU is visible, else "cpu".
    params are the level's tunable parameters (see levels()); missing ones take their defaults.
    A batched level (05, 07, 08) also takes 3-D A (batch × M × K) and B (batch × K × N): all the
    products in one launch, C of shape batch × M × N.
    An epilogue level (06) also takes bias=<vector of N values> (or bias=False), alpha and beta:
    C = act(alpha·A·B + bias) + beta·C, the last term with accumulate=True.
    source replaces the level's CUDA file with your own edited copy (same kernel names).
    race_check (CPU backend): report two threads touching one shared-memory word between two
    barriers, one of them writing, as cpu_backend.KernelRaceError (naming both lines); False
    skips the check (faster). source_name (CPU backend): the file name its messages give your source
    (default: the level's file name).
    """
    lv = get_level(level)
    params, epilogue = _split_epilogue(lv, params)
    resolved = lv.resolve(**params)
    if resolve_backend(backend) == "cpu":
        return _gemm_cpu(lv, resolved, A, B, out, source, epilogue, race_check, source_name)
    device.require_gpu(f"running level {lv.id}")
    import cupy

    batch, M, N, K = _check_operands(lv, resolved, A, B, out, cupy)
    _require_cc(lv, resolved, dtype_name(A))
    _check_bias(epilogue, N, A.dtype, cupy)
    launch = _geometry(lv, resolved, M, N, K, batch)
    C = out if out is not None else cupy.empty(A.shape[:-1] + (N,), dtype=storage_dtype(lv.c_type(resolved, dtype_name(A))))
    kernel_params = _kernel_params(lv, resolved, A, B, C, N, K)
    kernel = get_kernel(lv, kernel_params, source)
    if launch.dynamic_shared_bytes > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = launch.dynamic_shared_bytes
    args: tuple = (A, B, C, np.int32(M), np.int32(N), np.int32(K))
    if lv.kernel_args is not None:  # e.g. TMA tensor maps in place of the raw pointers
        args = lv.kernel_args(A, B, C, M, N, K, kernel_params)
    if epilogue is not None:  # no bias: a null pointer, never read
        bias = epilogue.bias if epilogue.bias is not None else np.uint64(0)
        args += (bias, np.float32(epilogue.alpha), np.float32(epilogue.beta))
    kernel(launch.grid, launch.block, args, shared_mem=launch.dynamic_shared_bytes)
    return C


def _require_cc(lv: Level, resolved: dict[str, Any], input_type: str) -> None:
    """Refuse, with what to do instead, a level or input type this GPU cannot run."""
    cc, name = device.compute_capability(), device.gpu_name()
    if lv.arch_specific and cc != lv.min_cc:
        raise RuntimeError(
            f"level {lv.id} uses instructions of {lv.build_arch} only (wgmma, setmaxnreg): it runs on "
            f"compute capability {lv.min_cc // 10}.{lv.min_cc % 10} exactly (H100, H200, GH200), and this "
            f"GPU ({name}) is sm_{cc}. Read the recorded H200 results, or compile_report(arch='sm_90a').")
    needed = max(lv.required_cc(resolved), min_cc(input_type))
    if cc < needed:
        raise RuntimeError(
            f"level {lv.id} with {resolved} on {input_type} inputs needs compute capability "
            f"{needed // 10}.{needed % 10} (sm_{needed}) or newer; this GPU ({name}) is sm_{cc}. "
            "Choose a setting or input type your GPU supports (bfloat16 needs sm_80), or read the "
            "recorded results for this one.")


def _gemm_cpu(lv: Level, resolved: dict[str, Any], A: Any, B: Any, out: Any, source: Optional[str],
              epilogue: Optional[Epilogue], race_check: bool = True, source_name: Optional[str] = None) -> Any:
    from . import cpu_backend

    cpu_backend.require_simt(lv)
    for name, X in (("A", A), ("B", B), ("out", out), ("bias", epilogue and epilogue.bias)):
        if type(X).__module__.split(".")[0] == "cupy":
            raise TypeError(f"{name} is a CuPy array, but backend='cpu' takes NumPy arrays; "
                            f"pass {name}.get() (or cupy.asnumpy({name})), or use backend='cuda'")
    batch, M, N, K = _check_operands(lv, resolved, A, B, out, np)
    cpu_backend.require_small(max(batch, 1) * M * N * K, f"{max(batch, 1)}×{M}×{N}×{K}" if batch else f"{M}×{N}×{K}")
    _check_bias(epilogue, N, A.dtype, np)
    launch = _geometry(lv, resolved, M, N, K, batch)  # the same limits as on a GPU
    C = out if out is not None else np.empty(A.shape[:-1] + (N,), dtype=storage_dtype(lv.c_type(resolved, dtype_name(A))))
    extra = [] if epilogue is None else [epilogue.bias, epilogue.alpha, epilogue.beta]
    cpu_backend.run_level(lv, _kernel_params(lv, resolved, A, B, C, N, K), A, B, C, source, extra_args=extra,
                          launch=launch, race_check=race_check, source_name=source_name)
    return C
