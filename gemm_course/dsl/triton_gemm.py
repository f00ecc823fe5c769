"""Level 14 in Triton: the course's GEMM, C = A · B (A: M×K, B: K×N, C: M×N, all row-major), in two kernels.

* :func:`tiled_gemm` (``tiled_gemm_kernel``): one program per BM×BN tile of C, a loop over k-tiles, masks at every
  edge, so any M, N, K ≥ 1 is right. float32 inputs with IEEE fp32 products (``input_precision="ieee"``, no TF32:
  comparable with the SIMT Levels 1–8) or bfloat16 inputs accumulated in fp32 (comparable with Levels 9–11); C is
  float32 either way, as Levels 9 and 10 write it. Runs compiled on a GPU (sm_80+) and, for float32, in Triton's
  interpreter on the CPU (gemm_course.dsl.interpreter).
* :func:`hopper_gemm` (``hopper_gemm_kernel``): bf16 on Hopper (sm_90). A, B and C reached through TMA tensor
  descriptors, one persistent program per SM walking the tiles (Level 11 step 4), the k-loop pipelined by the
  compiler into a ring of ``num_stages`` shared-memory buffers, C stored by TMA in float32 or bf16 (``c_type``, as
  Level 11's). TMA reads rows in whole 16-byte pieces, so K and N must be multiples of 8 (Level 11's rule).

Each kernel's lines, mapped to the course's levels and the CUDA C they stand for, are in gemm_course.dsl.line_maps
(TILED_LINE_MAP, HOPPER_LINE_MAP), which needs no triton: a page shows them beside line_maps.kernel_source.

What the compiler does that the CUDA levels wrote by hand: the shared-memory tiles and their layout (swizzled,
Level 10), the ring of cp.async or TMA copies and its waits (``num_stages``, Levels 4, 10, 11), the split of the
tile over warps and threads (``num_warps``, Levels 5 and 8), the Tensor Core instructions (mma.sync on sm_80,
wgmma on sm_90: Levels 10 and 11) and the vector width of loads and stores (Level 7). What stays with the
programmer: the block tile, the k-loop, the masks, the order of the blocks, the accumulator's type.

Importing this module imports triton (gemm_course.dsl.tensors.require_triton says what to install).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from gemm_course.dsl.tensors import require_triton

require_triton("gemm_course.dsl.triton_gemm")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.interpreter import InterpretedFunction  # noqa: E402


# ---------------------------------------------------------------------------------------------------------------
# The tiled kernel
#
#            tiles_n = cdiv(N, BN) columns of tiles
#          ┌──────┬──────┬──────┬──────┐   Programs are numbered down a group of GROUP_M tile rows first, then
#   group 0│ 0    │ 2    │ 4    │ 6    │   across (Level 8's block order): programs that run at the same time
#          │ 1    │ 3    │ 5    │ 7    │   share rows of A and columns of B in L2. The last group may hold fewer
#          ├──────┼──────┼──────┼──────┤   rows (group_rows); the last tile row and column may be partial (the
#   group 1│ 8    │ 9    │ 10   │ 11   │   masks). Each program: acc[BM, BN] = Σ over k-tiles A[rows, k:k+BK] ·
#          └──────┴──────┴──────┴──────┘   B[k:k+BK, cols], then one masked store.
# ---------------------------------------------------------------------------------------------------------------


@triton.jit
def tiled_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                      INPUT_PRECISION: tl.constexpr):
    # Which tile of C this program computes: Level 8's grouped block order.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    programs_per_group = GROUP_M * tiles_n
    first_tile_m = (pid // programs_per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_tile_m, GROUP_M)  # the last group may be shorter
    tile_m = first_tile_m + (pid % programs_per_group) % group_rows
    tile_n = (pid % programs_per_group) // group_rows
    # The tile's rows and columns, and the first k-tile of A and B: whole vectors of indices, not one per thread.
    rows = tile_m * BM + tl.arange(0, BM)
    cols = tile_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)  # fp32 accumulator for fp32 and bf16 inputs alike
    for k in range(0, K, BK):  # the compiler pipelines this loop: num_stages k-tiles in flight
        # Masked loads: outside A or B reads 0, which adds nothing to the sum (partial tiles in M, N and K).
        a = tl.load(a_tile, mask=(rows[:, None] < M) & (ks[None, :] < K - k), other=0.0)
        b = tl.load(b_tile, mask=(ks[:, None] < K - k) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_tile += BK
        b_tile += BK * stride_bk
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))




# ---------------------------------------------------------------------------------------------------------------
# The Hopper kernel: TMA descriptors, a persistent loop over the tiles
# ---------------------------------------------------------------------------------------------------------------


@triton.jit
def hopper_gemm_kernel(a_desc, b_desc, c_desc, M, N, K,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                       NUM_SMS: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    programs_per_group = GROUP_M * tiles_n
    # Persistent: one program per SM walks the tiles tile, tile + NUM_SMS, ...; flatten=True lets the compiler
    # pipeline across the tile boundary, so the next tile's first k-tiles load under this tile's last ones.
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_SMS, flatten=True):
        first_tile_m = (tile // programs_per_group) * GROUP_M
        group_rows = tl.minimum(tiles_m - first_tile_m, GROUP_M)
        off_m = (first_tile_m + (tile % programs_per_group) % group_rows) * BM
        off_n = ((tile % programs_per_group) // group_rows) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(k_tiles):
            # TMA: one copy per operand tile; the copy engine fills zeros beyond the matrix (no masks).
            a = a_desc.load([off_m, kk * BK])
            b = b_desc.load([kk * BK, off_n])
            acc = tl.dot(a, b, acc)  # wgmma on sm_90, the tiles read straight from shared memory
        # TMA store: rows and columns beyond C are clipped by the copy engine.
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))




# ---------------------------------------------------------------------------------------------------------------
# Settings and launches
# ---------------------------------------------------------------------------------------------------------------

TILED_DEFAULT = {"BM": 128, "BN": 128, "BK": 32, "group_m": 8, "num_warps": 8, "num_stages": 3}
HOPPER_DEFAULT = {"BM": 128, "BN": 256, "BK": 64, "group_m": 8, "num_warps": 8, "num_stages": 3, "c_type": "float32"}
TILED_DTYPES = ("float32", "bfloat16")
HOPPER_DTYPES = ("bfloat16",)
C_TYPES = ("float32", "input")  # Level 11's c_type: fp32 C, or C in the inputs' type (bf16, as cuBLAS writes it)
_POWERS_OF_TWO = (16, 32, 64, 128, 256)


def _plain(en: str, zh: str) -> str:
    return f"{en} / {zh}"


def resolve_tiled(**setting: Any) -> dict[str, Any]:
    """A tiled setting with its defaults filled in; ValueError (one line, both languages) for a wrong one."""
    return _resolve(TILED_DEFAULT, setting, "tiled_gemm")


def resolve_hopper(**setting: Any) -> dict[str, Any]:
    """A Hopper setting with its defaults filled in; ValueError (one line, both languages) for a wrong one."""
    out = _resolve(HOPPER_DEFAULT, setting, "hopper_gemm")
    if out["c_type"] not in C_TYPES:
        raise ValueError(_plain(f"hopper_gemm: c_type={out['c_type']!r}; choose one of {list(C_TYPES)}",
                                f"hopper_gemm：c_type={out['c_type']!r} 不可用；可选 {list(C_TYPES)}"))
    return out


def _resolve(defaults: Mapping[str, Any], setting: Mapping[str, Any], name: str) -> dict[str, Any]:
    unknown = sorted(set(setting) - set(defaults))
    if unknown:
        raise ValueError(_plain(f"{name} has no setting {', '.join(unknown)}; its settings: {', '.join(defaults)}",
                                f"{name} 没有设置 {', '.join(unknown)}；它的设置是：{', '.join(defaults)}"))
    out = {**defaults, **setting}
    for key in ("BM", "BN", "BK"):  # tl.dot needs each side a power of two of at least 16
        if out[key] not in _POWERS_OF_TWO:
            raise ValueError(_plain(f"{name}: {key}={out[key]!r}; choose one of {list(_POWERS_OF_TWO)} (tl.dot needs "
                                    "powers of two of at least 16)",
                                    f"{name}：{key}={out[key]!r} 不可用；可选 {list(_POWERS_OF_TWO)}（tl.dot 要求各边是"
                                    "不小于 16 的 2 的幂）"))
    for key, choices in (("num_warps", (1, 2, 4, 8, 16)), ("num_stages", (1, 2, 3, 4, 5, 6)),
                         ("group_m", (1, 2, 4, 8, 16))):
        if out[key] not in choices:
            raise ValueError(_plain(f"{name}: {key}={out[key]!r}; choose one of {list(choices)}",
                                    f"{name}：{key}={out[key]!r} 不可用；可选 {list(choices)}"))
    return out


def interpreting() -> bool:
    """Whether this process runs Triton kernels in the interpreter (TRITON_INTERPRET=1 when triton was imported)."""
    return isinstance(tiled_gemm_kernel, InterpretedFunction)


def _operands(A: Any, B: Any, dtypes: tuple[str, ...], name: str) -> tuple[int, int, int, str]:
    from gemm_course.dsl.tensors import element_type

    if getattr(A, "ndim", None) != 2 or getattr(B, "ndim", None) != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(_plain(f"{name}: A must be M×K and B K×N (got {getattr(A, 'shape', None)} and "
                                f"{getattr(B, 'shape', None)})",
                                f"{name}：A 须为 M×K，B 须为 K×N（当前为 {getattr(A, 'shape', None)} 与 "
                                f"{getattr(B, 'shape', None)}）"))
    dtype = element_type(A)
    if dtype != element_type(B) or dtype not in dtypes:
        raise ValueError(_plain(f"{name} takes A and B of one type among {', '.join(dtypes)} (bfloat16 as uint16 bit "
                                f"patterns), not {dtype} and {element_type(B)}",
                                f"{name} 要求 A 与 B 同为 {'、'.join(dtypes)} 之一（bfloat16 以 uint16 位模式存放），"
                                f"而不是 {dtype} 与 {element_type(B)}"))
    (M, K), N = A.shape, B.shape[1]
    return M, N, K, dtype


def _output(out: Any, M: int, N: int, c_type: str, name: str) -> Any:
    """The caller's C, checked: M×N of the type the kernel writes."""
    from gemm_course.dsl.tensors import element_type

    if tuple(getattr(out, "shape", ())) != (M, N) or element_type(out) != c_type:
        raise ValueError(_plain(f"{name}: out must be {M}×{N} {c_type} (got {tuple(out.shape)} {element_type(out)})",
                                f"{name}：out 须为 {M}×{N} 的 {c_type}（当前为 {tuple(out.shape)} {element_type(out)}）"))
    return out


def _new_output(like: Any, M: int, N: int, c_type: str) -> Any:
    from gemm_course.run.dtypes import storage_dtype

    xp = _array_module(like)
    return xp.empty((M, N), dtype=storage_dtype(c_type))


def _array_module(X: Any) -> Any:
    import numpy as np

    if isinstance(X, np.ndarray):
        return np
    import cupy

    return cupy


def _require_placement(A: Any, name: str) -> None:
    """NumPy arrays run in the interpreter only, CuPy arrays compiled only: say which way to go otherwise."""
    import numpy as np

    on_host = isinstance(A, np.ndarray)
    if on_host and not interpreting():
        raise ValueError(_plain(f"{name}: NumPy arrays run in Triton's interpreter, in its own process: use "
                                "gemm_course.dsl.interpreter.run_tiled(A, B, ...) (or pass CuPy arrays on a GPU)",
                                f"{name}：NumPy 数组要在 Triton 的解释器中运行，且须在单独的进程里：请用 "
                                "gemm_course.dsl.interpreter.run_tiled(A, B, ...)（或在 GPU 上传入 CuPy 数组）"))
    if not on_host and interpreting():
        raise ValueError(_plain(f"{name}: this process interprets Triton kernels (TRITON_INTERPRET=1): pass NumPy "
                                "arrays", f"{name}：本进程用解释器运行 Triton 内核（TRITON_INTERPRET=1）：请传入 NumPy 数组"))
    if not on_host:
        from gemm_course.dsl.tensors import use_cupy_driver

        use_cupy_driver()


def tiled_launch(A: Any, B: Any, C: Any, setting: Mapping[str, Any]) -> tuple[Any, tuple, dict[str, Any]]:
    """(grid, arguments, launch options) of tiled_gemm_kernel for C = A · B: what a launch passes, and what
    compile.py passes with shape-only tensors to compile the same kernel for a GPU target without a GPU."""
    from gemm_course.dsl.tensors import as_triton_tensor

    (M, K), N = A.shape, B.shape[1]
    a, b, c = (X if hasattr(X, "data_ptr") else as_triton_tensor(X) for X in (A, B, C))
    grid = (triton.cdiv(M, setting["BM"]) * triton.cdiv(N, setting["BN"]),)
    args = (a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), setting["BM"], setting["BN"], setting["BK"],
            setting["group_m"], "ieee")  # fp32: IEEE products, no TF32; bf16 products are exact in fp32 either way
    return grid, args, {"num_warps": setting["num_warps"], "num_stages": setting["num_stages"]}


def tiled_gemm(A: Any, B: Any, out: Optional[Any] = None, **setting: Any) -> Any:
    """C = A · B by the tiled Triton kernel; C is float32. A, B: CuPy arrays (compiled, GPU) or, in a process that
    interprets Triton (gemm_course.dsl.interpreter), NumPy arrays. setting: BM, BN, BK, group_m, num_warps,
    num_stages (TILED_DEFAULT)."""
    resolved = resolve_tiled(**setting)
    M, N, K, dtype = _operands(A, B, TILED_DTYPES, "tiled_gemm")
    _require_placement(A, "tiled_gemm")
    C = _new_output(A, M, N, "float32") if out is None else _output(out, M, N, "float32", "tiled_gemm")
    grid, args, options = tiled_launch(A, B, C, resolved)
    tiled_gemm_kernel[grid](*args, **options)
    return C


def sm_count() -> int:
    """SMs of the current GPU (the persistent grid); 132, an H100 SXM's, without one (compile-only reports)."""
    from gemm_course import device

    return int(device.properties()["multiProcessorCount"]) if device.gpu_available() else 132


def hopper_descriptors(A: Any, B: Any, C: Any, setting: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The host-side TMA descriptors of A (BM×BK boxes), B (BK×BN) and C (BM×BN)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from gemm_course.dsl.tensors import as_triton_tensor

    a, b, c = (X if hasattr(X, "data_ptr") else as_triton_tensor(X) for X in (A, B, C))
    BM, BN, BK = setting["BM"], setting["BN"], setting["BK"]
    return (TensorDescriptor(a, list(a.shape), list(a.stride()), [BM, BK]),
            TensorDescriptor(b, list(b.shape), list(b.stride()), [BK, BN]),
            TensorDescriptor(c, list(c.shape), list(c.stride()), [BM, BN]))


def hopper_launch(A: Any, B: Any, C: Any, setting: Mapping[str, Any],
                  sms: Optional[int] = None) -> tuple[Any, tuple, dict[str, Any]]:
    """(grid, arguments, launch options) of hopper_gemm_kernel: one program per SM, at most one per tile."""
    (M, K), N = A.shape, B.shape[1]
    sms = sms or sm_count()
    tiles = triton.cdiv(M, setting["BM"]) * triton.cdiv(N, setting["BN"])
    a_desc, b_desc, c_desc = hopper_descriptors(A, B, C, setting)
    args = (a_desc, b_desc, c_desc, M, N, K, setting["BM"], setting["BN"], setting["BK"], setting["group_m"], sms)
    return (min(sms, tiles),), args, {"num_warps": setting["num_warps"], "num_stages": setting["num_stages"]}


def tma_shape_problems(M: int, N: int, K: int) -> list[tuple[str, str]]:
    """Level 11's rule for TMA: every row of A, B and C a whole number of 16-byte pieces (K and N multiples of 8)."""
    if K % 8 or N % 8:
        return [(f"TMA copies rows in whole 16-byte pieces, so K and N must be multiples of 8 (got K={K}, N={N}); "
                 "pad the matrices with zeros",
                 f"TMA 以完整的 16 字节为单位拷贝每一行，K 和 N 须为 8 的倍数（当前 K={K}，N={N}）；请用 0 填充矩阵")]
    return []


def require_tma_shape(M: int, N: int, K: int, name: str) -> None:
    problems = tma_shape_problems(M, N, K)
    if problems:
        raise ValueError(_plain(f"{name}: {problems[0][0]}", f"{name}：{problems[0][1]}"))


def hopper_gemm(A: Any, B: Any, out: Optional[Any] = None, **setting: Any) -> Any:
    """C = A · B by the persistent TMA Triton kernel on Hopper; A, B: bf16 CuPy arrays (uint16 bit patterns),
    K and N multiples of 8. C is float32, or bf16 with c_type="input". setting: HOPPER_DEFAULT's keys."""
    resolved = resolve_hopper(**setting)
    M, N, K, dtype = _operands(A, B, HOPPER_DTYPES, "hopper_gemm")
    require_tma_shape(M, N, K, "hopper_gemm")
    _require_placement(A, "hopper_gemm")
    c_type = dtype if resolved["c_type"] == "input" else "float32"
    C = _new_output(A, M, N, c_type) if out is None else _output(out, M, N, c_type, "hopper_gemm")
    grid, args, options = hopper_launch(A, B, C, resolved)
    hopper_gemm_kernel[grid](*args, **options)
    return C
