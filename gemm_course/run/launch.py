"""gemm(): validate, compile (cached), launch. The one way every notebook runs a level's kernel,
on the GPU (CuPy) or, without one, on the CPU (cpu_backend: the same CUDA C source, emulated).
A call that repeats an earlier one reuses what that one prepared (PreparedLaunch); one on the very same arrays
starts the launch packed then (driver.PackedLaunch)."""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from gemm_course import device
from gemm_course.run import hopper
from gemm_course.run.compile import get_kernel
from gemm_course.run.driver import (PackedLaunch, allow_shared, is_gpu_array, key_of_array, launch_values,
                                     packed_launch, remember)
from gemm_course.run.dtypes import BFLOAT16, dtype_name, min_cc, storage_dtype
from gemm_course.levels import Launch, Level, get_level, install_resident_clusters_query, kernel_version, levels

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
            how = (f"gemm_course.run.dtypes.to_bfloat16({name}) (uint16 bit patterns: {xp.__name__} has no "
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


def _scalar(name: str, value: Any) -> float:
    """alpha or beta as a float: a real number (int, float, a NumPy scalar), else one line naming it."""
    import math

    from gemm_course.bilingual.text import plain

    try:
        number = None if isinstance(value, (bool, np.bool_, str, bytes)) else float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not math.isfinite(number):
        raise ValueError(plain(f"{name} must be a finite real number, e.g. {name}=0.5, not {value!r}",
                               f"{name} 必须是有限的实数，例如 {name}=0.5，而不是 {value!r}"))
    return number


def _split_epilogue(lv: Level, params: dict[str, Any]) -> tuple[dict[str, Any], Optional[Epilogue]]:
    """For an epilogue level, take the bias vector, alpha and beta out of params.

    bias=<vector> turns the `bias` setting on and passes the vector; bias=False turns it off.
    """
    if not lv.epilogue:
        return params, None
    params = dict(params)
    alpha, beta = _scalar("alpha", params.pop("alpha", 1.0)), _scalar("beta", params.pop("beta", 1.0))
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


def _refuse_overlap(A: Any, B: Any, out: Any, epilogue: Optional["Epilogue"]) -> None:
    """out sharing memory with an input (out=A, or a view into it): the kernel would overwrite what other
    threads still read, and C would be wrong without a word. Refused in one line."""
    try:
        start = _address(out)
        end = start + out.nbytes
        inputs = [("A", A), ("B", B)] + ([("bias", epilogue.bias)] if epilogue and epilogue.bias is not None else [])
        for name, X in inputs:
            begin = _address(X)
            if begin < end and start < begin + X.nbytes:
                from gemm_course.bilingual.text import plain

                raise ValueError(plain(
                    f"out shares memory with {name}: the kernel would overwrite {name} while other threads still "
                    f"read it; give out a separate array, or leave out unset for a new one",
                    f"out 与 {name} 共用同一块内存：内核会在其他线程还在读 {name} 时覆盖它；请给 out 一个"
                    "单独的数组（或者不传 out=，让它新建一个）"))
    except (AttributeError, TypeError):  # not arrays: _check_operands says what they should be
        return


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
    aligned = K % w == 0 and N % w == 0 and all(_vector_aligned(lv, X) for X in (A, B, C))
    return resolved | {"aligned": aligned}


def _vector_aligned(lv: Level, X: Any, address: Optional[int] = None) -> bool:
    """Whether X starts on a whole vector of a level with a vector path (always true without one). address:
    X's address where the caller has already read it (reading it builds an object, CuPy and NumPy alike)."""
    return not lv.vector_width or (_address(X) if address is None else address) % (lv.vector_width * X.itemsize) == 0


# --- repeated calls: the prepared launch --------------------------------------------------------------
#
# Everything gemm() works out before the kernel starts (the setting resolved, the operands checked, the
# geometry, the kernel compiled and looked up) depends only on what _call_key collects. A call whose key
# was seen before takes the PreparedLaunch made then, so a loop of identical calls costs about what the
# launch itself costs on the host; a call with any other key goes through every check, exactly as a first
# call does. The checks exist once (_prepare); the key only decides whether they have already passed.

PREPARED_CACHE_SIZE = 128  # distinct calls remembered (least recently used dropped first)


@dataclass(frozen=True)
class PreparedLaunch:
    """What one call's shapes, types and setting decided: kept and reused by the calls that repeat it.

    It holds no array of the caller (a cache must not keep GPU memory alive): A, B, C and the bias come
    with each call, and the TMA levels' tensor maps come from hopper's cache, keyed by address and shape,
    so a different pointer always gets its own map."""

    level: Level
    resolved: dict[str, Any]
    batch: int
    M: int
    N: int
    K: int
    launch: Launch
    c_shape: tuple[int, ...]
    c_dtype: Any
    c_vector_aligned: bool        # whether C started on a whole vector when prepared (see _prepared)
    kernel_params: dict[str, Any]
    kernel: Any = None            # the compiled kernel; None for the CPU backend

    def arguments(self, A: Any, B: Any, C: Any, epilogue: Optional[Epilogue]) -> tuple:
        """The kernel's arguments for this call's arrays."""
        lv, M, N, K = self.level, self.M, self.N, self.K
        if lv.kernel_args is not None:  # e.g. TMA tensor maps in place of the raw pointers
            args = getattr(hopper, lv.kernel_args)(A, B, C, M, N, K, self.kernel_params)
        else:
            args = (A, B, C, np.int32(M), np.int32(N), np.int32(K))
        if epilogue is not None:  # no bias: a null pointer, never read
            bias = epilogue.bias if epilogue.bias is not None else np.uint64(0)
            args += (bias, np.float32(epilogue.alpha), np.float32(epilogue.beta))
        return args

    def start(self, args: tuple) -> None:
        """Launch the kernel (GPU) with arguments from arguments()."""
        launch, kernel = self.launch, self.kernel
        allow_shared(kernel, launch.dynamic_shared_bytes)
        kernel(launch.grid, launch.block, launch_values(args), shared_mem=launch.dynamic_shared_bytes)

    def packed(self, args: tuple, callers: tuple = ()) -> PackedLaunch:
        """This launch with arguments() packed for the driver (GPU): keeps every array of args alive except
        the callers' (see driver.packed_launch)."""
        launch = self.launch
        return packed_launch(self.kernel, launch.grid, launch.block, launch.dynamic_shared_bytes, args, callers)


_PREPARED: "OrderedDict[tuple, PreparedLaunch]" = OrderedDict()
_PREPARED_LOCK = threading.Lock()


# A call that repeats an earlier one with the very same arrays (a timing loop, a layer run again on its buffers)
# has its arguments fixed too: it starts the packed launch made then, with no look-up or conversion at all.
# Keyed by _call_key(exact=True): the arrays' addresses and the epilogue's values besides what the checks read.
REPEAT_CACHE_SIZE = 64  # calls remembered with their arrays (the oldest dropped first)
_REPEATS: "dict[tuple, tuple[Level, PackedLaunch]]" = {}


def clear_prepared() -> None:
    """Forget every prepared launch (the next call of each kind checks and looks up everything again)."""
    with _PREPARED_LOCK:
        _PREPARED.clear()
        _REPEATS.clear()


def _operand_key(lv: Level, X: Any) -> Optional[tuple]:
    """What the checks read of an array: its type, shape (so its ndim), dtype, C-contiguity (with the shape,
    that fixes the strides wherever they matter) and of its address what the level's alignment rule and its
    vector path read. None for no array."""
    if X is None:
        return None
    address = _address(X)  # read once, for both the alignment and the vector path
    return (type(X), X.shape, X.dtype, X.flags.c_contiguous, address % lv.alignment if lv.alignment else 0,
            _vector_aligned(lv, X, address))


def _call_key(lv: Level, params: dict[str, Any], A: Any, B: Any, out: Any, epilogue: Optional[Epilogue],
              source: Optional[str], backend: str, exact: bool = False) -> Optional[tuple]:
    """Everything the checks and the preparation of a call read, or None where some input is not an array
    (that call is not remembered: its checks run and say what is wrong).

    exact (GPU): the call's own keywords as given (params before _split_epilogue, epilogue None) and everything
    its kernel's arguments hold, the arrays' addresses and the bias, alpha and beta among the keywords, the
    thread and the stream: a call with an equal exact key may start the packed launch of the earlier one."""
    try:
        operand = key_of_array if exact else functools.partial(_operand_key, lv)
        # The type beside each value: resolve() refuses BM=64.0 and bias=1, which equal 64 and True. An array
        # among them (exact: a bias vector) by what the kernel reads of it.
        setting = tuple((name, type(value), operand(value) if is_gpu_array(value) else value)
                        for name, value in sorted(params.items()))
        # Without source=, the level's file is compiled: an edit to it (its modification time) is a new kernel.
        file_version = kernel_version(lv.source) if source is None else None
        if backend == "cuda":
            import cupy

            where: Any = cupy.cuda.runtime.getDevice()  # the compute capability, SM count and kernel are per GPU
        else:
            where = None
        key = (lv.id, backend, where, source, file_version, setting, operand(A), operand(B), operand(out),
               operand(epilogue.bias if epilogue is not None else None))
        if exact:  # the thread too: the driver launches in the calling thread's context, which CuPy sets up
            key += (threading.get_ident(),)
            if backend == "cuda":  # and the stream: Level 11 step 7 keeps its fixup's counters per stream
                key += (cupy.cuda.get_current_stream().ptr,)
        hash(key)  # an unhashable parameter value (a list, say): not remembered, resolve() names it
        return key
    except (AttributeError, TypeError, OSError):
        return None


def _prepare(lv: Level, params: dict[str, Any], epilogue: Optional[Epilogue], A: Any, B: Any, out: Any,
             source: Optional[str], xp: Any) -> tuple[PreparedLaunch, Any]:
    """Every check of a call, then its geometry, output and kernel: (the prepared launch, C)."""
    on_gpu = xp is not np
    resolved = lv.resolve_here(**params) if on_gpu else lv.resolve(**params)  # the GPU's defaults (Level.arch_defaults)
    batch, M, N, K = _check_operands(lv, resolved, A, B, out, xp)
    if on_gpu:
        _require_cc(lv, resolved, dtype_name(A))
    else:
        _require_small(batch, M, N, K)
    _check_bias(epilogue, N, A.dtype, xp)
    launch = _geometry(lv, resolved, M, N, K, batch)  # the same limits on the CPU as on a GPU
    c_shape, c_dtype = A.shape[:-1] + (N,), xp.dtype(storage_dtype(lv.c_type(resolved, dtype_name(A))))
    C = out if out is not None else xp.empty(c_shape, dtype=c_dtype)
    kernel_params = _kernel_params(lv, resolved, A, B, C, N, K)
    kernel = get_kernel(lv, kernel_params, source) if on_gpu else None
    prepared = PreparedLaunch(lv, resolved, batch, M, N, K, launch, c_shape, c_dtype, _vector_aligned(lv, C),
                              kernel_params, kernel)
    return prepared, C


def _prepared(lv: Level, params: dict[str, Any], epilogue: Optional[Epilogue], A: Any, B: Any, out: Any,
              source: Optional[str], xp: Any, backend: str) -> tuple[PreparedLaunch, Any]:
    """The prepared launch of this call and its C: remembered from an identical earlier call, else _prepare."""
    if out is not None:
        _refuse_overlap(A, B, out, epilogue)
    key = _call_key(lv, params, A, B, out, epilogue, source, backend)
    with _PREPARED_LOCK:
        prepared = _PREPARED.get(key) if key is not None else None
        if prepared is not None:
            _PREPARED.move_to_end(key)
    if prepared is not None and prepared.level is lv:  # the same object: a Level made elsewhere may reuse an id
        if xp is np:  # the CPU backend's size limit comes from the environment, which may have changed
            _require_small(prepared.batch, prepared.M, prepared.N, prepared.K)
        if out is not None:
            return prepared, out
        C = xp.empty(prepared.c_shape, dtype=prepared.c_dtype)
        # A fresh C's address decides one thing, a vector level's kernel; it is as the first one's as a rule
        # (CuPy's pool: always); where it is not, this call is prepared from the start.
        if _vector_aligned(lv, C) == prepared.c_vector_aligned:
            return prepared, C
    prepared, C = _prepare(lv, params, epilogue, A, B, out, source, xp)
    if key is not None:
        with _PREPARED_LOCK:
            _PREPARED[key] = prepared
            while len(_PREPARED) > PREPARED_CACHE_SIZE:
                _PREPARED.popitem(last=False)
    return prepared, C


def _require_small(batch: int, M: int, N: int, K: int) -> None:
    from gemm_course.run import cpu_backend

    cpu_backend.require_small(max(batch, 1) * M * N * K, f"{batch}×{M}×{N}×{K}" if batch else f"{M}×{N}×{K}")


def gemm(A: Any, B: Any, level: str | int | Level = "01_naive", *, out: Any = None,
         source: Optional[str] = None, backend: str = "auto", race_check: bool = True,
         source_name: Optional[str] = None, **params: Any) -> Any:
    """C = A @ B with a level's kernel. Returns C (a new array or out).

    backend="cuda": A, B are row-major CuPy arrays and the kernel runs on the GPU.
    backend="cpu": A, B are row-major NumPy arrays and the same CUDA C source runs on the CPU,
    thread by thread (gemm_course.run.cpu_backend; small shapes; SIMT levels only).
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
    A call that repeats an earlier one (same level, setting, source, shapes, dtypes, contiguity, alignment,
    out given or not, GPU) reuses what the earlier one prepared, so that it costs little more than the
    launch on the host; any difference is checked in full. One that also has the very same arrays (out given,
    the same A, B, bias, alpha and beta, thread) starts the launch packed by the first: one driver call.
    """
    lv = get_level(level)
    backend = resolve_backend(backend)
    repeat = None
    if out is not None and backend == "cuda" and device.gpu_available():
        repeat = _call_key(lv, params, A, B, out, None, source, backend, exact=True)  # the keywords as given
        seen = _REPEATS.get(repeat) if repeat is not None else None
        if seen is not None and seen[0] is lv:  # the same Level object: one made elsewhere may reuse an id
            seen[1].start()
            return out
    params, epilogue = _split_epilogue(lv, params)
    if backend == "cpu":
        return _gemm_cpu(lv, params, A, B, out, source, epilogue, race_check, source_name)
    _require_gpu(lv, params)
    import cupy

    prepared, C = _prepared(lv, params, epilogue, A, B, out, source, cupy, backend)
    args = prepared.arguments(A, B, C, epilogue)
    prepared.start(args)  # a first call launches through CuPy, whose errors name what went wrong
    if repeat is not None:
        packed = prepared.packed(args, callers=(A, B, C, epilogue and epilogue.bias))
        remember(_REPEATS, _PREPARED_LOCK, repeat, (lv, packed), REPEAT_CACHE_SIZE)
    return C


def prepare(A: Any, B: Any, level: str | int | Level = "01_naive", *, out: Any = None,
            source: Optional[str] = None, **params: Any) -> tuple[Callable[[], None], Any]:
    """gemm() in two parts, on the GPU: everything before the kernel now, and a function that starts the
    kernel, nothing else, each time it is called. Returns (launch, C).

    What the timing harness times as "the kernel"; a repeated gemm() call should cost little more (see
    host_cost.host_cost)."""
    lv = get_level(level)
    params, epilogue = _split_epilogue(lv, params)
    _require_gpu(lv, params)
    import cupy

    prepared, C = _prepared(lv, params, epilogue, A, B, out, source, cupy, "cuda")
    # Packed once for the driver, keeping every array it reads alive (A, B, C too): launch() is one driver call.
    return prepared.packed(prepared.arguments(A, B, C, epilogue)).start, C


def _require_gpu(lv: Level, params: dict[str, Any]) -> None:
    """Without a GPU, a wrong setting is named first (as with one), then the missing GPU."""
    if not device.gpu_available():
        lv.resolve(**params)
        device.require_gpu(f"running level {lv.id}")


def _require_cc(lv: Level, resolved: dict[str, Any], input_type: str) -> None:
    """Refuse, with what to do instead, a level or input type this GPU cannot run."""
    # The architecture pretended (gc.pretend_arch) decides, and the real GPU must be able to run the kernel too.
    name = device.gpu_name()
    real = device.real_compute_capability()
    cc = min(device.compute_capability(), real)
    for arch_cc in sorted({device.compute_capability(), real}):
        if lv.arch_specific and arch_cc != lv.min_cc:
            from gemm_course.support import hopper_refusal_text

            raise RuntimeError(hopper_refusal_text(lv.id, f"sm_{arch_cc}"))
    needed = max(lv.required_cc(resolved), min_cc(input_type))
    if cc < needed:
        raise RuntimeError(
            f"level {lv.id} with {resolved} on {input_type} inputs needs compute capability "
            f"{needed // 10}.{needed % 10} (sm_{needed}) or newer; this GPU ({name}) is sm_{cc}. "
            "Choose a setting or input type your GPU supports (bfloat16 needs sm_80), or read the "
            "recorded results for this one.")


def _gemm_cpu(lv: Level, params: dict[str, Any], A: Any, B: Any, out: Any, source: Optional[str],
              epilogue: Optional[Epilogue], race_check: bool = True, source_name: Optional[str] = None) -> Any:
    from gemm_course.run import cpu_backend

    cpu_backend.require_simt(lv)
    for name, X in (("A", A), ("B", B), ("out", out), ("bias", epilogue and epilogue.bias)):
        if type(X).__module__.split(".")[0] == "cupy":
            raise TypeError(f"{name} is a CuPy array, but backend='cpu' takes NumPy arrays; "
                            f"pass {name}.get() (or cupy.asnumpy({name})), or use backend='cuda'")
    prepared, C = _prepared(lv, params, epilogue, A, B, out, source, np, "cpu")
    extra = [] if epilogue is None else [epilogue.bias, epilogue.alpha, epilogue.beta]
    cpu_backend.run_level(lv, prepared.kernel_params, A, B, C, source, extra_args=extra,
                          launch=prepared.launch, race_check=race_check, source_name=source_name)
    return C


def resident_clusters(level: Level, params: Any, threads: int, shared: int, cluster: int) -> int:
    """How many clusters of a level's kernel fit on this GPU at once: the driver's answer for the compiled kernel."""
    return hopper.max_active_clusters(get_kernel(level, dict(params)), threads, shared, cluster)


install_resident_clusters_query(resident_clusters)  # the registry's geometry asks it (levels.py)
