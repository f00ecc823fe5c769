"""FP8 (e4m3) GEMM on Hopper: the host side of gemm_course/kernels/13_fp8_blockscaled.cu.

    C (bf16) = A · Bᵀ,   A: M×K e4m3 bytes,   B: N×K e4m3 bytes (K contiguous in both)

with the scales of gemm_course.fp8.formats applied inside the kernel. Two kernels (see the .cu file's header):

- scaling="per_tensor": one scale for A and one for B (``fp8.quantize_per_tensor``), applied once when
  C is stored. 128×256 tiles; the Tensor Cores accumulate the whole K ("fast accumulation").
- scaling="blockwise": 1×128 scales of A (``fp8.quantize_rows_1x128``) and 128×128 scales of B
  (``fp8.quantize_blocks_128x128``). 128×128 tiles; each 128-deep k-block is summed by the Tensor
  Cores and then added, times its two scales, into fp32 registers by the CUDA cores ("promotion").

Matrices travel the way the course stores narrow types: e4m3 as uint8 bit patterns, bf16 C as uint16
bit patterns (decode with ``gemm_course.run.dtypes.to_float64``). Everything compiles through the course's
one compile path (``compile._compiled_kernel``, NVRTC for sm_90a) and is timed with the one timing
harness (``bench.time_gpu``). Importing this module needs no GPU; :func:`fp8_compile_report` works
without one too.
"""
from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from gemm_course import device
from gemm_course.measure.bench import CLOCK_METHOD
from gemm_course.fp8.formats import SCALE_BLOCK, _array_module, _bilingual
from gemm_course.levels import DECODE_SHAPES, FP8_LEVEL_ID, PROJECTION_NK, kernel_version
from gemm_course.run.driver import PackedLaunch, allow_shared, key_of_array, launch_values, packed_launch, remember

KERNEL_FILE = "13_fp8_blockscaled.cu"
LEVEL_ID = FP8_LEVEL_ID  # the id its records carry in result files (FP8 is not in the Level registry:
                                 # its B is N×K and it takes scales, so the generic launcher cannot run it)
DTYPE = "float8_e4m3"
ARCH = "sm_90a"            # wgmma and setmaxnreg exist on Hopper's arch-specific target only
SCALINGS = ("blockwise", "per_tensor")
THREADS = 384              # a producer warpgroup and two consumer warpgroups
BM = 128                   # rows of C per tile: two consumers × 64
BK = 128                   # bytes of k per stage: one 128-byte swizzle row, one scale block
# First = default. blockwise: 128, B's scale tile; the 64-row kernel also narrower widths that divide it (decode
# shapes whose N gives too few 128-wide tiles for the SMs).
BLOCK_N_CHOICES = {"per_tensor": (256, 128), "blockwise": (128, 64, 32, 16)}
SCALE_TILE = 128           # B's scales: one per 128×128 tile, so a blockwise tile's width divides 128
BLOCK_M_CHOICES = {"per_tensor": (128,), "blockwise": (128, 64)}   # 64: the kernel for few rows of A
SHARED_LIMIT = 227 * 1024  # dynamic shared memory one block may use on sm_90
MAX_SPLITS = 16            # split-K: enough to fill 132 SMs from 9 tiles up
MAX_STAGES = 24            # the deepest ring any kernel is built with (only narrow tiles fit more than 12)
STATIC_PER_STAGE = 16      # bytes of static shared memory per stage: its full and empty mbarriers
STATIC_FIXED = 16          # and the split-K flag, aligned
K_MULTIPLE = 16            # TMA: every row of A and B a whole number of 16-byte chunks
ALIGNMENT = 16             # bytes: TMA needs 16-byte aligned matrices
BF16_NAN = 0x7FC0
# Where the blockwise kernels' consumers find the scales (staged_scales; the kernel's SCALES, see its header):
# False: each thread loads its own from global memory; True: the producer warp copies them into each stage,
# 4 bytes per row (cp.async); "tma": one TMA box of an M-major copy of A's scales per stage (a_scales_m_major),
# B's one scale beside it by a single cp.async.
STAGED_SCALES = (False, True, "tma")
SCALE_ROW_ALIGN = 4        # floats: the M-major copy's rows start 16 bytes apart at least (TMA's stride rule)


def scales_code(staged_scales: Any) -> int:
    """The kernel's SCALES template argument for a staged_scales setting: 0 global, 1 cp.async, 2 TMA."""
    return 2 if isinstance(staged_scales, str) else int(bool(staged_scales))


# --- settings ------------------------------------------------------------------------------------

def _check_scaling(scaling: str) -> None:
    if scaling not in SCALINGS:
        raise ValueError(_bilingual(f"scaling must be one of {', '.join(map(repr, SCALINGS))}, not {scaling!r}",
                                    f"scaling 只能是 {', '.join(map(repr, SCALINGS))} 之一，而不是 {scaling!r}"))


def resolve_block_n(scaling: str, block_n: Optional[int] = None) -> int:
    """The tile's width: per_tensor takes 256 (default) or 128; blockwise 128 (default, B's scale tile), or with
    block_m=64 also 64, 32 or 16 (a tile then lies inside one scale tile of B)."""
    _check_scaling(scaling)
    choices = BLOCK_N_CHOICES[scaling]
    if block_n is None:
        return choices[0]
    if block_n not in choices:
        raise ValueError(_bilingual(
            f"block_n={block_n!r}: the {scaling} kernel takes {choices}"
            + (" (one scale of B per 128×128 tile, so a tile's width divides 128)" if scaling == "blockwise" else ""),
            f"block_n={block_n!r}：{scaling} 内核可选 {choices}"
            + ("（B 每个 128×128 块一个缩放因子，所以分块宽度须整除 128）" if scaling == "blockwise" else "")))
    return block_n


def resolve_block_m(scaling: str, block_m: Optional[int] = None) -> int:
    """The tile's height: 128 (two consumers × 64 rows), or 64 for blockwise (the consumers split the
    128 columns instead), the kernel for few rows of A."""
    _check_scaling(scaling)
    choices = BLOCK_M_CHOICES[scaling]
    if block_m is None:
        return choices[0]
    if block_m not in choices:
        raise ValueError(_bilingual(f"block_m={block_m!r}: the {scaling} kernel takes {choices}",
                                    f"block_m={block_m!r}：{scaling} 内核可选 {choices}"))
    return block_m


def stage_bytes(scaling: str, block_n: Optional[int] = None, block_m: Optional[int] = None, *,
                staged_scales: Any = False) -> int:
    """Shared memory per stage: block_m rows of A and block_n rows of B, 128 B each; with staged_scales=True,
    also the stage's scales (block_m of A, one of B, padded to 16 bytes); with "tma", the same padded to 128 bytes
    (block_m floats of A are one TMA box, which lands on 128 bytes)."""
    bn, bm = resolve_block_n(scaling, block_n), resolve_block_m(scaling, block_m)
    return (bm + bn) * BK + {0: 0, 1: (bm + 4) * 4, 2: (bm + 32) * 4}[scales_code(staged_scales)]


def stage_choices(scaling: str, block_n: Optional[int] = None, block_m: Optional[int] = None, *,
                  staged_scales: Any = False) -> tuple[int, ...]:
    """Ring depths that fit in 227 KB: stage_bytes each, + 1024 B to align the ring, + the static shared memory the
    kernels declare beside it (two mbarriers of 8 bytes per stage, and a flag)."""
    per_stage = stage_bytes(scaling, block_n, block_m, staged_scales=staged_scales)
    return tuple(s for s in range(2, MAX_STAGES + 1)
                 if s * (per_stage + STATIC_PER_STAGE) + 1024 + STATIC_FIXED <= SHARED_LIMIT)


def resolve_stages(scaling: str, stages: Optional[int] = None, block_n: Optional[int] = None,
                   block_m: Optional[int] = None, *, staged_scales: Any = False) -> int:
    """The ring depth for a kernel: the deepest that fits (default), or a checked choice."""
    choices = stage_choices(scaling, block_n, block_m, staged_scales=staged_scales)
    if stages is None:
        return choices[-1]
    if stages not in choices:
        staged_en, staged_zh = {0: ("", ""), 1: (" and staged scales", "、缩放因子经共享内存"),
                                2: (" and scales by TMA", "、缩放因子经 TMA")}[scales_code(staged_scales)]
        raise ValueError(_bilingual(
            f"stages={stages!r}: the {scaling} kernel with block_n={resolve_block_n(scaling, block_n)}{staged_en} "
            f"takes {choices} (more stages no longer fit in an SM's 227 KB of shared memory)",
            f"stages={stages!r}：block_n={resolve_block_n(scaling, block_n)}{staged_zh} 的 {scaling} 内核可选 {choices}"
            "（再多就放不进一个 SM 的 227 KB 共享内存）"))
    return stages


def kernel_name(scaling: str, stages: Optional[int] = None, block_n: Optional[int] = None,
                overlap: bool = True, block_m: Optional[int] = None, *, staged_scales: Any = False) -> str:
    """The kernel's name expression in 13_fp8_blockscaled.cu, e.g. "fp8_gemm_blockwise<6, true>"."""
    st = resolve_stages(scaling, stages, block_n, block_m, staged_scales=staged_scales)
    code = scales_code(staged_scales)
    staged = f", {code}" if code else ""  # the template's last argument, SCALES_GLOBAL (0) by default
    if resolve_block_m(scaling, block_m) == 64:
        bn = resolve_block_n(scaling, block_n)
        return f"fp8_gemm_blockwise_m64<{st}{staged}>" if bn == SCALE_TILE else f"fp8_gemm_blockwise_m64<{st}, {code}, {bn}>"
    if scaling == "per_tensor":
        return f"fp8_gemm_per_tensor<{resolve_block_n(scaling, block_n)}, {st}>"
    return f"fp8_gemm_blockwise<{st}, {'true' if overlap else 'false'}{staged}>"


def shared_bytes(scaling: str, stages: Optional[int] = None, block_n: Optional[int] = None,
                 block_m: Optional[int] = None, *, staged_scales: Any = False) -> int:
    """Dynamic shared memory per block: the ring (stage_bytes per stage) + 1024 B to align it to the
    swizzle's 1024-byte period."""
    stages = resolve_stages(scaling, stages, block_n, block_m, staged_scales=staged_scales)
    return stages * stage_bytes(scaling, block_n, block_m, staged_scales=staged_scales) + 1024


def tiles(M: int, N: int, scaling: str, block_n: Optional[int] = None, block_m: Optional[int] = None) -> int:
    """How many tiles of C the kernel computes (its persistent blocks share them out)."""
    return math.ceil(M / resolve_block_m(scaling, block_m)) * math.ceil(N / resolve_block_n(scaling, block_n))


def auto_splits(M: int, N: int, K: int, sm_count: int = 132, block_m: Optional[int] = None,
                block_n: Optional[int] = None) -> int:
    """Split-K for the blockwise kernel: how many k-ranges each tile is cut into so that the SMs are
    busy. A model, in k-block times: the units run in rounds of sm_count; a unit costs its k-blocks,
    plus, when split, a fixed cost (its slice stores, the counter, the first loads of a new k-range)
    and the last unit's reading of every slice. The two costs (6 and 2 per split) are rough values
    read off trial runs on an H200 at M = 64 and 128. With at least one tile per SM, no split."""
    n_tiles, k_blocks = tiles(M, N, "blockwise", block_n, block_m), math.ceil(K / BK)
    if n_tiles >= sm_count:
        return 1

    def cost(s: int) -> float:
        per_unit = math.ceil(k_blocks / s) + (6 + 2 * s if s > 1 else 0)
        return math.ceil(n_tiles * s / sm_count) * per_unit

    return min(range(1, min(MAX_SPLITS, k_blocks) + 1), key=lambda s: (cost(s), s))


def resolve_splits(splits: Any, M: int, N: int, K: int, sm_count: int = 132, block_m: Optional[int] = None,
                   block_n: Optional[int] = None) -> int:
    """splits: "auto" (auto_splits), or a whole number from 1 to min(16, the k-blocks of K)."""
    k_blocks = math.ceil(K / BK)
    if splits in (None, "auto"):
        return auto_splits(M, N, K, sm_count, block_m, block_n)
    top = min(MAX_SPLITS, k_blocks)
    if isinstance(splits, bool) or not isinstance(splits, (int, np.integer)) or not 1 <= splits <= top:
        raise ValueError(_bilingual(
            f"splits={splits!r}: give 'auto' or a whole number from 1 to {top} (K={K} has {k_blocks} k-blocks "
            "of 128, and every split needs at least one)",
            f"splits={splits!r}：请给 'auto' 或 1 到 {top} 的整数（K={K} 有 {k_blocks} 个 128 宽的 k 块，"
            "每份至少要一个）"))
    return int(splits)


@functools.lru_cache(maxsize=1)
def _kernel_path() -> Path:
    from gemm_course.levels import KERNEL_DIR

    return KERNEL_DIR / KERNEL_FILE


def kernel_source() -> str:
    """The CUDA C source of both kernels."""
    return _kernel_path().read_text(encoding="utf-8")


def _compile_options() -> tuple[str, ...]:
    from gemm_course.run.compile import COMPILE_OPTIONS

    return COMPILE_OPTIONS  # the kernels include only the course's own headers


def fp8_compile_report(scaling: str = "blockwise", stages: Optional[int] = None, arch: str = ARCH, *,
                       block_n: Optional[int] = None, overlap: bool = True, block_m: Optional[int] = None,
                       staged_scales: Any = False) -> Any:
    """Registers, spills, shared memory and occupancy of one kernel, compiled by NVRTC (no GPU needed).

    Returns the course's ``compile.CompileReport`` (its ``problems()`` lists spills and shared-memory
    overflows; ``str()`` prints it bilingually).
    """
    from gemm_course.run.compile import CompileReport, nvrtc_compile, parse_ptxas_log
    from gemm_course.models import occupancy

    if str(arch).lower().removeprefix("sm_").rstrip("af") != "90":
        from gemm_course.support import hopper_refusal_text

        raise ValueError(hopper_refusal_text("13", str(arch) if str(arch).startswith("sm_") else f"sm_{arch}"))
    if arch != ARCH:
        raise ValueError(_bilingual(f"the FP8 kernels use wgmma and setmaxnreg, which exist on {ARCH} only; "
                                    f"{arch} cannot run them: use arch='{ARCH}'",
                                    f"FP8 内核用到 wgmma 和 setmaxnreg，它们只存在于 {ARCH}；{arch} 无法运行它们："
                                    f"请用 arch='{ARCH}'"))
    _check_setting(scaling, block_n, overlap, "auto", block_m, staged_scales)
    staged = dict(staged_scales=staged_scales)
    stages = resolve_stages(scaling, stages, block_n, block_m, **staged)
    name = kernel_name(scaling, stages, block_n, overlap, block_m, **staged)
    _, mangled, log = nvrtc_compile(kernel_source(), name, arch, _compile_options())
    usage = parse_ptxas_log(log[log.find(mangled):] if mangled in log else log)
    dynamic = shared_bytes(scaling, stages, block_n, block_m, **staged)
    occ = occupancy(arch, THREADS, usage["registers"], usage["static_shared_bytes"] + dynamic)
    params = setting_params(scaling, stages=stages, block_n=block_n, overlap=overlap, block_m=block_m, **staged)
    return CompileReport(level=LEVEL_ID, params=params, arch=arch,
                         kernel=name, threads_per_block=THREADS, dynamic_shared_bytes=dynamic, occupancy=occ,
                         log=log, **usage)


def _check_setting(scaling: str, block_n: Optional[int], overlap: Any, splits: Any,
                   block_m: Optional[int] = None, staged_scales: Any = False) -> None:
    """Options that belong to the other kernel are refused, not silently ignored."""
    if not isinstance(overlap, (bool, np.bool_)):
        raise ValueError(_bilingual(f"overlap must be True or False, not {overlap!r}",
                                    f"overlap 只能是 True 或 False，而不是 {overlap!r}"))
    if not (isinstance(staged_scales, (bool, np.bool_)) or (isinstance(staged_scales, str) and staged_scales == "tma")):
        raise ValueError(_bilingual(
            f"staged_scales must be False (each thread loads its scales), True (the producer copies them, 4 bytes "
            f"a row) or 'tma' (one TMA box of A's scales stored M-major), not {staged_scales!r}",
            f"staged_scales 只能是 False（每个线程自己加载缩放因子）、True（生产者逐行拷贝 4 字节）或 'tma'（按 M 连续存放的 "
            f"A 缩放因子，一个 TMA 盒子），而不是 {staged_scales!r}"))
    if scaling == "per_tensor" and staged_scales:
        raise ValueError(_bilingual(
            "staged_scales belongs to the blockwise kernels (their scales change every k-block); the per_tensor "
            "kernel reads its two scales once: leave it out",
            "staged_scales 属于 blockwise 内核（它们的缩放因子每个 k 块都变）；per_tensor 内核只读一次两个缩放因子："
            "请不要传入它"))
    if scaling == "blockwise" and resolve_block_n(scaling, block_n) != SCALE_TILE and resolve_block_m(scaling, block_m) != 64:
        raise ValueError(_bilingual(
            f"block_n={block_n}: tiles narrower than 128 exist in the 64-row kernel only: add block_m=64",
            f"block_n={block_n}：窄于 128 的分块只有 64 行的内核才有：请加上 block_m=64"))
    if resolve_block_m(scaling, block_m) == 64 and not overlap:
        raise ValueError(_bilingual(
            "block_m=64 exists with overlapped promotion only: leave overlap at True",
            "block_m=64 只有重叠累加提升的版本：请让 overlap 保持 True"))
    if scaling == "per_tensor" and (not overlap or splits not in (None, "auto", 1)):
        raise ValueError(_bilingual(
            "overlap and splits belong to the blockwise kernel (its promotion and split-K); the per_tensor "
            "kernel has no promotion: leave them out",
            "overlap 与 splits 属于 blockwise 内核（提升与 split-K）；per_tensor 内核没有提升：请不要传入它们"))


def setting_params(scaling: str, *, stages: Optional[int] = None, block_n: Optional[int] = None,
                   overlap: bool = True, splits: Optional[int] = None, block_m: Optional[int] = None,
                   staged_scales: Any = False) -> dict[str, Any]:
    """A setting as the params dict its records carry (only the options that apply to the kernel;
    staged_scales only where it is True or "tma", so that the records of the kernel before it keep their
    params)."""
    bn, bm = resolve_block_n(scaling, block_n), resolve_block_m(scaling, block_m)
    params: dict[str, Any] = {"scaling": scaling,
                              "stages": resolve_stages(scaling, stages, bn, bm, staged_scales=staged_scales)}
    if bm != BM:
        params["block_m"] = bm
    if scaling == "per_tensor":
        params["block_n"] = bn
    else:
        if bn != SCALE_TILE:  # records of the 128-wide tiles keep their params
            params["block_n"] = bn
        params["overlap"] = bool(overlap)
        if splits is not None:
            params["splits"] = int(splits)
        if scales_code(staged_scales):
            params["staged_scales"] = staged_scales if isinstance(staged_scales, str) else True
    return params


# --- operands ------------------------------------------------------------------------------------

def _is_cupy(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


def _address(x: Any) -> int:
    return x.data.ptr if _is_cupy(x) else x.ctypes.data


def _check_bits(x: Any, name: str, shape_hint: str) -> None:
    if not hasattr(x, "dtype") or not hasattr(x, "ndim"):
        raise TypeError(_bilingual(f"{name} must be an array of e4m3 bits (uint8), got {type(x).__name__}",
                                   f"{name} 必须是 e4m3 位模式数组（uint8），而不是 {type(x).__name__}"))
    if x.dtype != np.uint8:
        raise ValueError(_bilingual(
            f"{name} must hold e4m3 bit patterns as uint8 (what gemm_course.fp8.formats.quantize_* returns), not {x.dtype}",
            f"{name} 必须是 uint8 的 e4m3 位模式（即 gemm_course.fp8.formats.quantize_* 的返回值），而不是 {x.dtype}"))
    if x.ndim != 2:
        raise ValueError(_bilingual(f"{name} must be a 2-D matrix ({shape_hint}), but it has shape {x.shape}",
                                    f"{name} 必须是二维矩阵（{shape_hint}），但它的形状是 {x.shape}"))
    if not x.flags.c_contiguous:
        raise ValueError(_bilingual(f"{name} must be row-major and contiguous: pass ascontiguousarray({name})",
                                    f"{name} 必须按行存放且连续：请传入 ascontiguousarray({name})"))


def _scale_array(s: Any, shape: tuple[int, ...], name: str, what: str) -> Any:
    """The scales as a float array of the expected shape (a per-tensor scale: any 1-element input)."""
    if shape == (1,):
        size = getattr(s, "size", 1)
        if size != 1:
            raise ValueError(_bilingual(
                f"per_tensor scaling takes one {name} (a number, what fp8.quantize_per_tensor returns), "
                f"not {size} values; for 1×128 / 128×128 scales use scaling='blockwise'",
                f"per_tensor 缩放只接受一个 {name}（一个数，即 fp8.quantize_per_tensor 的返回值），而不是 {size} 个；"
                "1×128 / 128×128 缩放请用 scaling='blockwise'"))
        return s
    got = getattr(s, "shape", ())
    if tuple(got) != shape:
        raise ValueError(_bilingual(f"{name} has shape {tuple(got)}, but needs {shape}: {what}",
                                    f"{name} 的形状是 {tuple(got)}，应为 {shape}"))
    if getattr(s, "dtype", np.dtype("O")).kind != "f":
        raise ValueError(_bilingual(f"{name} must be floating-point scales (float32, what fp8.quantize_* returns)",
                                    f"{name} 必须是浮点缩放因子（float32，即 fp8.quantize_* 的返回值）"))
    return s


def check_operands(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, scaling: str = "blockwise",
                   out: Any = None) -> tuple[int, int, int]:
    """(M, N, K) of valid operands, or a one-line bilingual error that says what to change.

    Works on NumPy or CuPy arrays and needs no GPU, so the preconditions can be tried anywhere:
    - A is M×K and B is N×K uint8 (e4m3 bits), row-major; both K-major is what FP8 wgmma reads;
    - K a multiple of 16: TMA copies rows of whole 16-byte chunks (M and N are free);
    - A, B (and out) start on 16-byte boundaries: TMA's requirement for the start of a matrix;
    - blockwise: a_scales (M, ceil(K/128)) and b_scales (ceil(N/128), ceil(K/128)), one per 128 of k;
      per_tensor: one number each.
    """
    resolve_stages(scaling)
    _check_bits(a_bits, "A bits", "M×K")
    _check_bits(b_bits, "B bits", "N×K, K contiguous")
    (M, K), (N, K_b) = a_bits.shape, b_bits.shape
    if K != K_b:
        raise ValueError(_bilingual(
            f"A is {M}×{K} but B is {N}×{K_b}: B is stored N×K (K contiguous, FP8 wgmma reads both operands "
            "K-major), so both need the same K; transpose a K×N B with ascontiguousarray(B.T)",
            f"A 是 {M}×{K}，B 是 {N}×{K_b}：B 按 N×K 存放（K 连续，FP8 wgmma 只读 K 连续的操作数），两者的 K 必须"
            "相同；K×N 的 B 请用 ascontiguousarray(B.T) 转置"))
    if min(M, N, K) < 1:
        raise ValueError(_bilingual(f"empty matrices are not supported: M={M}, N={N}, K={K} must all be ≥ 1",
                                    f"不支持空矩阵：M={M}、N={N}、K={K} 都必须 ≥ 1"))
    if max(M, N, K) >= 2**31:
        raise ValueError(_bilingual("each of M, N, K must be below 2**31 (the kernels index with int)",
                                    "M、N、K 都必须小于 2**31（内核用 int 做下标）"))
    if K % K_MULTIPLE:
        raise ValueError(_bilingual(
            f"K={K} must be a multiple of {K_MULTIPLE}: TMA copies rows of whole 16-byte chunks (16 e4m3 values); "
            "pad A and B with zero columns",
            f"K={K} 必须是 {K_MULTIPLE} 的倍数：TMA 按完整的 16 字节块（16 个 e4m3 值）拷贝每一行；请给 A 和 B "
            "补零列"))
    strips = math.ceil(K / SCALE_BLOCK)
    if scaling == "blockwise":
        _scale_array(a_scales, (M, strips), "A scales", f"one per row per 128-wide strip of a {M}×{K} A")
        _scale_array(b_scales, (math.ceil(N / SCALE_BLOCK), strips), "B scales",
                     f"one per 128×128 tile of a {N}×{K} B")
    else:
        _scale_array(a_scales, (1,), "A scale", "")
        _scale_array(b_scales, (1,), "B scale", "")
    if out is not None:
        ok = (hasattr(out, "dtype") and out.dtype == np.uint16 and tuple(out.shape) == (M, N)
              and out.flags.c_contiguous)
        if not ok:
            raise ValueError(_bilingual(f"out must be a contiguous uint16 array (bf16 bits) of shape {(M, N)}",
                                        f"out 必须是形状为 {(M, N)} 的连续 uint16 数组（bf16 位模式）"))
    for name, x in (("A bits", a_bits), ("B bits", b_bits), ("out", out)):
        if x is not None and _address(x) % ALIGNMENT:
            raise ValueError(_bilingual(
                f"{name} must start on a {ALIGNMENT}-byte boundary (TMA and vector stores need it); pass a fresh "
                "array instead of an offset view",
                f"{name} 必须从 {ALIGNMENT} 字节边界开始（TMA 与向量存储的要求）；请传入新分配的数组，而不是偏移视图"))
    return M, N, K


def _require_hopper() -> None:
    from gemm_course.support import hopper_refusal_text

    device.require_gpu("running the FP8 kernels")
    for cc in sorted({device.compute_capability(), device.real_compute_capability()}):  # pretended and real
        if cc != 90:  # one line, "English / 中文": why this architecture cannot, what to read instead
            raise RuntimeError(hopper_refusal_text("13", f"sm_{cc}"))


def _scales_read_in_place(s: Any) -> bool:
    """Whether the kernel reads these scales where they are: a contiguous float32 CuPy array (its shape does not
    matter to a pointer). Any other scales are copied to such an array on every call."""
    return _is_cupy(s) and s.dtype == np.float32 and s.flags.c_contiguous


def _device_scales(s: Any, cupy: Any) -> Any:
    """Scales as a contiguous float32 CuPy array (from NumPy, CuPy or a plain number)."""
    if _scales_read_in_place(s):
        return s  # already what the kernel reads: no conversion
    return cupy.ascontiguousarray(cupy.asarray(s, dtype=cupy.float32).reshape(-1))


def _sm_count() -> int:
    return int(device.properties()["multiProcessorCount"])


@dataclass(frozen=True)
class _Plan:
    """What prepare() decides from a call's shapes, types and setting: kept for the calls that repeat it
    (see _plan_key). It holds no array of the caller."""

    M: int
    N: int
    K: int
    kernel: Any
    shared: int
    block_m: int
    block_n: int
    n_splits: int  # 0: the per-tensor kernel (no split-K arguments)
    tiles: int
    grid: tuple[int, int, int]
    scales: int = 0  # the kernel's SCALES (scales_code): 2 = A's scales by TMA, from an M-major copy


PREPARED_CACHE_SIZE = 64  # distinct calls remembered (least recently used dropped first)
_PLANS: "OrderedDict[tuple, _Plan]" = OrderedDict()
_PLANS_LOCK = threading.Lock()


def _plan_key(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, scaling: str, out: Any,
              setting: dict[str, Any], exact: bool = False) -> Optional[tuple]:
    """Everything prepare()'s checks and decisions read, or None where an input is not an array (that call
    is not remembered: its checks run and say what is wrong). exact: also everything the kernel's arguments
    hold (the addresses of the bits, the scales and out; the stream, whose split-K counters they are; the thread,
    in whose context CuPy set up the first launch), or
    None where the scales are not read in place (a NumPy array or a number is copied on every call)."""
    def matrix(x: Any) -> Optional[tuple]:  # type, shape, dtype, contiguity, and the start's 16-byte alignment
        return None if x is None else (type(x), x.shape, x.dtype, x.flags.c_contiguous, _address(x) % ALIGNMENT)

    def scales(s: Any) -> tuple:  # a number or an array: what _scale_array reads
        return (type(s), getattr(s, "shape", None), getattr(s, "dtype", None), getattr(s, "size", 1))

    def scales_in_place(s: Any) -> tuple:
        if not _scales_read_in_place(s):
            raise TypeError("copied per call")
        return key_of_array(s)

    try:
        where = None
        if device.gpu_available():
            import cupy

            where = cupy.cuda.runtime.getDevice()  # compute capability, SM count and kernel are per GPU
        # the type beside each value: overlap=1 is refused where overlap=True is not
        options = tuple((name, type(value), value) for name, value in sorted(setting.items()))
        source_version = kernel_version(KERNEL_FILE)  # an edited kernel file is a new kernel
        if exact:
            if where is None:  # no GPU: nothing was launched to repeat
                return None
            key = (scaling, options, key_of_array(a_bits), scales_in_place(a_scales), key_of_array(b_bits),
                   scales_in_place(b_scales), key_of_array(out), where, source_version,
                   cupy.cuda.get_current_stream().ptr, threading.get_ident())
        else:
            key = (scaling, options, matrix(a_bits), scales(a_scales), matrix(b_bits), scales(b_scales),
                   matrix(out), where, source_version)
        hash(key)
        return key
    except (AttributeError, TypeError, OSError):
        return None


def _make_plan(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, scaling: str, out: Any, stages: Optional[int],
               block_n: Optional[int], overlap: bool, splits: Any, block_m: Optional[int],
               staged_scales: Any = False) -> _Plan:
    """Every check of a call, then its kernel and geometry."""
    M, N, K = check_operands(a_bits, a_scales, b_bits, b_scales, scaling, out)
    bn, bm = resolve_block_n(scaling, block_n), resolve_block_m(scaling, block_m)
    _check_setting(scaling, block_n, overlap, splits, bm, staged_scales)
    staged = dict(staged_scales=staged_scales)
    stages = resolve_stages(scaling, stages, bn, bm, **staged)
    if scaling == "blockwise":
        resolve_splits(splits, M, N, K, block_m=bm, block_n=bn)  # a bad split count fails here, before a GPU is needed
    _require_hopper()
    for name, x in (("A bits", a_bits), ("B bits", b_bits), ("out", out)):
        if x is not None and not _is_cupy(x):
            raise TypeError(_bilingual(f"{name} must be a CuPy array on the GPU; convert it with cupy.asarray",
                                       f"{name} 必须是 GPU 上的 CuPy 数组；请用 cupy.asarray 转换"))
    from gemm_course.run.compile import _compiled_kernel

    kernel = _compiled_kernel(kernel_source(), _compile_options(), kernel_name(scaling, stages, bn, overlap, bm, **staged),
                              ARCH)
    units = tiles(M, N, scaling, bn, bm)
    n_splits = resolve_splits(splits, M, N, K, _sm_count(), bm, bn) if scaling == "blockwise" else 0
    grid = (min(units * max(n_splits, 1), _sm_count()), 1, 1)  # persistent: at most one block per SM
    return _Plan(M, N, K, kernel, shared_bytes(scaling, stages, bn, bm, **staged), bm, bn, n_splits, units, grid,
                 scales_code(staged_scales))


def _planned(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, scaling: str, out: Any, **setting: Any) -> _Plan:
    """The plan of this call: remembered from an identical earlier call, else made (every check runs)."""
    key = _plan_key(a_bits, a_scales, b_bits, b_scales, scaling, out, setting)
    with _PLANS_LOCK:
        plan = _PLANS.get(key) if key is not None else None
        if plan is not None:
            _PLANS.move_to_end(key)
    if plan is None:
        plan = _make_plan(a_bits, a_scales, b_bits, b_scales, scaling, out, **setting)
        if key is not None:
            with _PLANS_LOCK:
                _PLANS[key] = plan
                while len(_PLANS) > PREPARED_CACHE_SIZE:
                    _PLANS.popitem(last=False)
    return plan


# A call that repeats an earlier one with the very same arrays and stream starts the packed launch made then
# (driver.PackedLaunch: no look-up, no conversion); keyed by _plan_key(exact=True).
REPEAT_CACHE_SIZE = 32  # calls remembered with their arrays (the oldest dropped first)
_REPEATS: "dict[tuple, tuple[_Plan, Any]]" = {}


def clear_prepared() -> None:
    """Forget every remembered plan (the next call of each kind checks and compiles again)."""
    with _PLANS_LOCK:
        _PLANS.clear()
        _REPEATS.clear()


def prepare(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, *, scaling: str = "blockwise",
            out: Any = None, stages: Optional[int] = None, block_n: Optional[int] = None, overlap: bool = True,
            splits: Any = "auto", block_m: Optional[int] = None,
            staged_scales: Any = False) -> tuple[Callable[[], None], Any]:
    """Check, compile (cached), build the TMA maps; returns (launch, C).

    launch() runs the kernel once, writing C; nothing else happens per call, which is what a timing
    loop wants (one driver call: its arguments are packed once, and every array they point to is kept alive
    with it; each launch takes a new epoch for the split-K counters). fp8_gemm() is the same checks then one
    launch. A call that repeats an earlier one (same shapes, types, alignment, setting, out given or not, GPU)
    skips the checks and the kernel look-up; the tensor maps (cached by address and shape), the scales, C and
    the split-K slices are this call's own, and the tile counters are kept per stream (hopper.fixup_counters).
    With staged_scales="tma", the M-major copy of A's scales is made here, once: launch() reads that copy, as a
    model would keep its scales in the layout its GEMM reads (prepare again after changing the scales).
    """
    plan = _planned(a_bits, a_scales, b_bits, b_scales, scaling, out, stages=stages, block_n=block_n,
                    overlap=overlap, splits=splits, block_m=block_m, staged_scales=staged_scales)
    args, C, keep = _arguments(plan, a_bits, a_scales, b_bits, b_scales, out)
    return _packed(plan, args, keep=keep).start, C


def _arguments(plan: _Plan, a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any,
               out: Any) -> tuple[tuple, Any, tuple]:
    """The kernel's arguments for this call's arrays, C, and the arrays the kernel reads through a tensor map
    that no argument holds (A's M-major scales with staged_scales="tma"): a packed launch keeps them alive."""
    import cupy

    from gemm_course.run.hopper import _device_row_map, _device_tensor_map, fixup_counters

    M, N, K = plan.M, plan.N, plan.K
    dev = a_bits.device.id
    # Boxes of 128 bytes of k × the tile's rows: one TMA copy per operand per stage.
    map_a = _device_tensor_map(a_bits.data.ptr, "uint8", M, K, plan.block_m, dev)
    map_b = _device_tensor_map(b_bits.data.ptr, "uint8", N, K, plan.block_n, dev)
    # The scales are read each call: a NumPy array's values may have changed since the last one.
    sa, sb = _device_scales(a_scales, cupy), _device_scales(b_scales, cupy)
    C = out if out is not None else cupy.empty((M, N), dtype=cupy.uint16)
    if not plan.n_splits:  # the per-tensor kernel
        return (map_a, map_b, sa, sb, C, np.int32(M), np.int32(N), np.int32(K)), C, ()
    map_sa: Any = np.uint64(0)  # a null map: only the kernel with A's scales by TMA reads it
    keep: tuple = ()
    if plan.scales == 2:
        sa_t = a_scales_m_major(sa.reshape(M, -1), cupy)
        # Row kb of the copy holds the M row scales of k-block kb; a box is one row × block_m floats, so a
        # stage's scales of A are ONE copy (columns past M: zeros, in rows never stored).
        map_sa = _device_row_map(sa_t.data.ptr, "float32", sa_t.shape[0], M, sa_t.shape[1], plan.block_m, dev)
        keep = (sa_t,)
    # Split-K: one fp32 M×N slice per split (each unit writes its part, the last adds them in order), a counter
    # per tile and the launch's epoch (a new number at every launch: see hopper.FixupCounters).
    counters = fixup_counters(plan.tiles, dev, cupy.cuda.get_current_stream().ptr)
    args: tuple = (map_a, map_b, map_sa, sa, sb, C, np.int32(M), np.int32(N), np.int32(K), np.int32(plan.n_splits),
                   _split_slices(plan), counters.array, counters.epoch)
    return args, C, keep


_SLICES_ARG = 10  # the split-K slices' position in _arguments' tuple


def m_major_rows(M: int) -> int:
    """The row length of A's M-major scales: M rounded up to whole 16-byte groups of floats (TMA's stride rule)."""
    return -(-M // SCALE_ROW_ALIGN) * SCALE_ROW_ALIGN


def a_scales_m_major(a_scales: Any, xp: Any = np) -> Any:
    """A's (M, KB) row-major 1×128 scales as the kernel with staged_scales="tma" reads them: a (KB, m_major_rows(M))
    float32 array whose row kb holds the M row scales of k-block kb side by side (padding columns zero).

    Why: a tile of C needs, per k-block, one scale from each of its block_m rows. Row-major, those lie a whole row
    of scales apart (KB floats), one 32-byte sector each; M-major, they are block_m consecutive floats, which one
    TMA box (1 × block_m) brings into the stage. TMA needs every row of a tensor 16 bytes apart: hence the padding
    of M to a multiple of 4 floats. The values are the same numbers, moved: out[kb, m] == a_scales[m, kb]."""
    s = xp.asarray(a_scales, dtype=xp.float32)
    if s.ndim != 2:
        raise ValueError(_bilingual(f"A's scales must be a 2-D (M, KB) array, not shape {tuple(s.shape)}",
                                    f"A 的缩放因子必须是二维 (M, KB) 数组，而不是形状 {tuple(s.shape)}"))
    M, kb = s.shape
    out = xp.zeros((kb, m_major_rows(M)), dtype=xp.float32)
    out[:, :M] = s.T
    return out


def _split_slices(plan: _Plan) -> Any:
    import cupy

    return cupy.empty((plan.n_splits, plan.M, plan.N) if plan.n_splits > 1 else (1,), dtype=cupy.float32)


def _packed(plan: _Plan, args: tuple, callers: tuple = (), fresh_slices: bool = False,
            keep: tuple = ()) -> PackedLaunch:
    """The plan's launch with these arguments packed for the driver (see driver.packed_launch); fresh_slices:
    start() takes new split-K slices each time (a remembered call must not hold an M×N×splits array)."""
    fresh = (_SLICES_ARG,) if fresh_slices and plan.n_splits > 1 else ()
    return packed_launch(plan.kernel, plan.grid, (THREADS, 1, 1), plan.shared, args, callers, fresh, keep)


def fp8_gemm(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, *, scaling: str = "blockwise",
             out: Any = None, stages: Optional[int] = None, block_n: Optional[int] = None, overlap: bool = True,
             splits: Any = "auto", block_m: Optional[int] = None, staged_scales: Any = False) -> Any:
    """C = A · Bᵀ of FP8 (e4m3) matrices with their scales, on a Hopper GPU; C is bf16 (uint16 bits).

    a_bits: M×K uint8 and b_bits: N×K uint8 CuPy arrays (B K-contiguous, as FP8 wgmma reads it).
    scaling="blockwise": a_scales (M, ceil(K/128)) and b_scales (ceil(N/128), ceil(K/128)), as
    fp8.quantize_rows_1x128 and fp8.quantize_blocks_128x128 return them.
    scaling="per_tensor": one number each, as fp8.quantize_per_tensor returns it.
    Scales may be NumPy or CuPy arrays (they are copied to the GPU as float32).
    out: an optional (M, N) uint16 CuPy array to write C into. stages: the ring depth (see
    stage_choices; default the deepest). block_n (per_tensor): 256 or 128, the tile's width.
    overlap (blockwise): promote one k-block while the Tensor Cores sum the next (True) or wait
    for each (False). splits (blockwise): split-K, "auto" or 1…16. block_m (blockwise): 128, or 64 for few
    rows of A (64×128 tiles whose two consumers split the columns). staged_scales (blockwise): where the
    consumers find the scales: every consumer thread loads its own from global memory (False), the producer
    copies each k-block's scales into its stage of shared memory, 4 bytes a row (True), or the producer brings
    A's as one TMA box of an M-major copy made on each call (a_scales_m_major) ("tma"). Compare with
    fp8.reference_gemm_fp8.
    A call that repeats an earlier one with the same arrays (out given, scales as float32 CuPy arrays) and on
    the same stream starts the launch packed then: what it costs on the host is about the driver call ("tma"
    excepted: its M-major copy is made again on every call, since the scales may have changed in place).
    """
    setting = dict(stages=stages, block_n=block_n, overlap=overlap, splits=splits, block_m=block_m,
                   staged_scales=staged_scales)
    fixed_args = out is not None and scales_code(staged_scales) != 2
    repeat = _plan_key(a_bits, a_scales, b_bits, b_scales, scaling, out, setting, exact=True) if fixed_args else None
    seen = _REPEATS.get(repeat) if repeat is not None else None
    if seen is not None:
        plan, launch = seen
        launch.start(*((_split_slices(plan),) if plan.n_splits > 1 else ()))
        return out
    plan = _planned(a_bits, a_scales, b_bits, b_scales, scaling, out, **setting)
    args, C, _ = _arguments(plan, a_bits, a_scales, b_bits, b_scales, out)  # the M-major copy: freed in stream order
    allow_shared(plan.kernel, plan.shared)
    plan.kernel(plan.grid, (THREADS, 1, 1), launch_values(args), shared_mem=plan.shared)  # CuPy names any error
    if repeat is not None:
        launch = _packed(plan, args, callers=(a_bits, a_scales, b_bits, b_scales, out), fresh_slices=True)
        remember(_REPEATS, _PLANS_LOCK, repeat, (plan, launch), REPEAT_CACHE_SIZE)
    return C


# --- accuracy ------------------------------------------------------------------------------------

def accumulation_error_bound(K: int, scaling: str) -> float:
    """The accumulation error allowed, as a fraction of Σ_k |a_k·b_k| (see allowed_error).

    The Tensor Core keeps about 13 fraction bits when it adds FP8 products into its fp32
    accumulator, dropping (truncating) the rest, a relative error of up to 2^-13 per instruction.
    blockwise: a k-block is 4 instructions, then it is promoted into true fp32: 2^-10 covers
    the block's truncations with room to spare, whatever K is. per_tensor: all K/32 instructions
    truncate into the same running sum; their errors can add up, so the bound grows with K.
    """
    if scaling == "blockwise":
        return 2.0 ** -10
    return max(2.0 ** -10, (K / 32) * 2.0 ** -14)


def allowed_error(reference: Any, magnitude: Any, K: int, scaling: str) -> Any:
    """Per element: 2^-8·|reference| (bf16 rounding of C: half a unit in the last of its 8 significant
    bits) + accumulation_error_bound · magnitude, where magnitude = Σ_k |a_k·b_k| (the size of the
    terms the sum cancels, which sets how large the accumulator's rounding can be)."""
    xp = _array_module(reference)
    tiny = np.finfo(np.float64).tiny  # keeps error / allowed finite where a whole row of A is zero
    return 2.0 ** -8 * xp.abs(reference) + 1.01 * accumulation_error_bound(K, scaling) * magnitude + tiny


def magnitude_gemm(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any) -> Any:
    """Σ_k |a_k|·|b_k| of the dequantised inputs: the reference product with every sign bit cleared
    (the scales are positive)."""
    from gemm_course.fp8.formats import reference_gemm_fp8

    return reference_gemm_fp8(a_bits & 0x7F, a_scales, b_bits & 0x7F, b_scales)


def full_scales(a_scale: Any, b_scale: Any, M: int, N: int, K: int) -> tuple[Any, Any]:
    """Per-tensor scales spread into the blockwise layout, for fp8.reference_gemm_fp8."""
    strips = math.ceil(K / SCALE_BLOCK)
    a = np.full((M, strips), float(np.asarray(a_scale).reshape(-1)[0]), dtype=np.float32)
    b = np.full((math.ceil(N / SCALE_BLOCK), strips), float(np.asarray(b_scale).reshape(-1)[0]), dtype=np.float32)
    return a, b


# --- timing --------------------------------------------------------------------------------------

def random_fp8_operands(M: int, N: int, K: int, scaling: str, seed: int = 0, xp: Any = np) -> tuple:
    """(a_bits, a_scales, b_bits, b_scales): normal random values (never zero), with sizes that change
    by up to 2^±3 from one 128-block to the next so that every scale differs, quantised with
    gemm_course.fp8.formats the way `scaling` expects. xp: numpy, or cupy to build the large arrays on the
    GPU (much faster for big sizes; the per-block sizes come from NumPy's generator either way)."""
    from gemm_course.fp8 import formats as fp8

    rng = np.random.default_rng(seed)
    strips = math.ceil(K / SCALE_BLOCK)
    row_sizes = xp.asarray(np.exp2(rng.uniform(-3, 3, (M, strips))))
    tile_sizes = xp.asarray(np.exp2(rng.uniform(-3, 3, (math.ceil(N / SCALE_BLOCK), strips))))
    if xp is np:
        normal = rng.standard_normal
    else:
        normal = xp.random.RandomState(seed).standard_normal
    a = normal((M, K)) * xp.repeat(row_sizes, SCALE_BLOCK, axis=1)[:, :K]
    b = normal((N, K)) * xp.repeat(xp.repeat(tile_sizes, SCALE_BLOCK, axis=0), SCALE_BLOCK, axis=1)[:N, :K]
    if scaling == "per_tensor":
        (a_bits, a_s), (b_bits, b_s) = _quantize_per_tensor(a), _quantize_per_tensor(b)
    else:
        (a_bits, a_s), (b_bits, b_s) = fp8.quantize_rows_1x128(a), fp8.quantize_blocks_128x128(b)
    return a_bits, a_s, b_bits, b_s


def _quantize_per_tensor(x: Any) -> tuple[Any, np.float32]:
    """fp8.quantize_per_tensor for NumPy; for a CuPy array the same arithmetic, with the scale brought
    to the host explicitly (one number: max|x| / 448 rounded to float32, as fp8._scales_for does)."""
    from gemm_course.fp8 import formats as fp8

    if not _is_cupy(x):
        return fp8.quantize_per_tensor(x)
    amax = float(abs(x).max())
    scale = np.float32(amax / fp8.E4M3_MAX if amax else 1.0)
    return fp8.encode_e4m3(x / float(scale)), scale


SizeLike = Union[int, Sequence[int]]

# The projection shapes of a published mixture-of-experts model's attention and dense layers (N×K of
# its weight matrices, levels.PROJECTION_NK), each at a decode-sized M (64, 128 tokens) and a prefill-sized one (4096).
PROJECTION_M = (64, 128, 4096)
SQUARES = (4096, 8192)

# The settings the chapter measures, step by step: per-tensor (the fast tile, then kernel (b)'s tile
# without promotion), fine-grained scales with promotion waited for, promotion overlapped, + split-K.
STEPS: tuple[dict[str, Any], ...] = (
    {"scaling": "per_tensor", "block_n": 256},
    {"scaling": "per_tensor", "block_n": 128},
    {"scaling": "blockwise", "overlap": False, "splits": 1},
    {"scaling": "blockwise", "overlap": True, "splits": 1},
    {"scaling": "blockwise", "overlap": True, "splits": "auto"},
)

# Decode shapes (M = 64, 128 tokens): the 64-row kernel beside the 128-row one and the per-tensor kernel
# with 128×128 tiles (the fastest of the first run at these shapes), each with cuBLASLt in the same run.
SMALL_M_SHAPES = DECODE_SHAPES
SMALL_M_STEPS: tuple[dict[str, Any], ...] = (
    {"scaling": "per_tensor", "block_n": 128},
    {"scaling": "blockwise", "overlap": True, "splits": 1},
    {"scaling": "blockwise", "overlap": True, "splits": "auto"},
    {"scaling": "blockwise", "block_m": 64, "splits": 1},
    {"scaling": "blockwise", "block_m": 64, "splits": "auto"},
)

# Scales staged in shared memory by the producer (staged_scales=True) against the same kernels reading them
# from global memory, at the squares and the decode shapes: `fp8 --record --staged`.
STAGED_STEPS: tuple[dict[str, Any], ...] = tuple(
    {"scaling": "blockwise", **rows, "splits": "auto", "skip_unsplit": False, **staged}
    for rows in ({"overlap": True}, {"block_m": 64}) for staged in ({}, {"staged_scales": True}))
STAGED_SHAPES = tuple((n, n, n) for n in SQUARES) + DECODE_SHAPES


def with_split_counts(steps: Sequence[dict[str, Any]], counts: Sequence[int]) -> list[dict[str, Any]]:
    """The steps with each blockwise one timed at every split count in `counts` instead of its own (a
    measurement of the split-K model: `fp8 --record --staged --splits 1,2,3`); per-tensor steps as they are."""
    if not counts or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 1 <= c <= MAX_SPLITS
                         for c in counts):
        raise ValueError(_bilingual(f"--splits {list(counts)}: give whole numbers from 1 to {MAX_SPLITS}, e.g. 1,2,3",
                                    f"--splits {list(counts)}：请给 1 到 {MAX_SPLITS} 的整数，例如 1,2,3"))
    out: list[dict[str, Any]] = []
    for step in steps:
        if step["scaling"] != "blockwise":
            out.append(dict(step))
            continue
        base = {k: v for k, v in step.items() if k not in ("splits", "skip_unsplit")}
        out += [{**base, "splits": int(c)} for c in dict.fromkeys(counts)]
    return out


STAGED_MIN_DEPTH = 4   # the shallowest ring the tuner tries with staged scales (search_space says why)

# The autotuner's shapes for Level 13: the square it sweeps the other levels at, and the decode shapes.
SWEEP_SHAPES = ((4096, 4096, 4096),) + DECODE_SHAPES


def search_space() -> list[dict[str, Any]]:
    """The settings the autotuner tries for Level 13 (`fp8 --record --sweep-only` times the same list): the
    per-tensor kernel with both tile widths, the blockwise kernel with 128-row and 64-row tiles, each at every
    ring depth that fits in shared memory; the blockwise ones without split-K and with the model's split-K
    ("auto", timed only at shapes where it does split); the 64-row kernel also with its scales staged by the
    producer, from STAGED_MIN_DEPTH stages up (shallower rings are the slowest blockwise settings at every sweep
    shape; tests/test_autotune.py checks it in the recorded sweep). Promotion waited for (overlap=False) is a
    step the chapter measures, not a choice a tuner needs, and so are staged scales with 128-row tiles: in the
    staged record they lose at the squares and never beat the 64-row kernel at a decode shape."""
    space: list[dict[str, Any]] = []
    for bn in BLOCK_N_CHOICES["per_tensor"]:
        space += [{"scaling": "per_tensor", "block_n": bn, "stages": st} for st in stage_choices("per_tensor", bn)]
    for bm in BLOCK_M_CHOICES["blockwise"]:
        rows = {} if bm == BM else {"block_m": bm}
        space += [{"scaling": "blockwise", **rows, "stages": st, "splits": splits}
                  for st in stage_choices("blockwise", block_m=bm) for splits in (1, "auto")]
    space += [{"scaling": "blockwise", "block_m": 64, "stages": st, "splits": splits, "staged_scales": True}
              for st in stage_choices("blockwise", block_m=64, staged_scales=True) if st >= STAGED_MIN_DEPTH
              for splits in (1, "auto")]
    return space


def resolved_setting(setting: dict[str, Any], M: int, N: int, K: int, sm_count: int = 132) -> dict[str, Any]:
    """A setting (a step, or one of search_space()) as the params its record carries at one shape (split-K
    resolved; record_fp8 names its records with this)."""
    opts = {k: v for k, v in setting.items() if k != "scaling"}
    scaling = setting["scaling"]
    splits = (resolve_splits(opts.get("splits", "auto"), M, N, K, sm_count, opts.get("block_m"), opts.get("block_n"))
              if scaling == "blockwise" else None)
    return setting_params(scaling, stages=opts.get("stages"), block_n=opts.get("block_n"),
                          overlap=opts.get("overlap", True), splits=splits, block_m=opts.get("block_m"),
                          staged_scales=opts.get("staged_scales", False))


FP8_METHOD = ("CUDA events around each launch (bench.time_gpu): 1 untimed call and {settle_s} s of untimed launches "
              "to settle the clock, then at least {reps} timed repetitions (at most {max_reps}, within {budget_s} s), "
              "L2 flushed before each by writing 4×L2 bytes; median with quartiles; " + CLOCK_METHOD + ". Inputs: "
              "normal random values whose size changes by up to 2^±3 from one 128-block to the next, quantised to e4m3 "
              "with gemm_course.fp8.formats (per tensor for per_tensor, 1×128 / 128×128 for blockwise); each output poisoned "
              "with NaN, then {check_rows} random rows of C checked against fp8.reference_gemm_fp8 (float64) before "
              "timing, the baselines' outputs too. Baselines, on the same bytes, bf16 C, each timed immediately before "
              "the kernel it pairs with: cublaslt_blockwise, cuBLASLt's block-scaled FP8 GEMM (1×128 scales of A, "
              "128×128 of B) through PyTorch ({blockwise_api}), for the blockwise kernels; cublaslt_fast, "
              "torch._scaled_mm with per-tensor scales and use_fast_accum=True, for the per-tensor kernels; "
              "cublaslt_promoted (use_fast_accum=False) timed once per shape as an extra row; "
              "bf16 rows: cuBLAS (cublasGemmEx) and Level 11 step 6 with bf16 C, bench.bench.")

# The baselines of Level 13, by the name records carry in "baseline".
BASELINES = {
    "cublaslt_fast": "cuBLASLt per-tensor FP8 (torch._scaled_mm, use_fast_accum=True)",
    "cublaslt_promoted": "cuBLASLt per-tensor FP8 (torch._scaled_mm, use_fast_accum=False)",
    "cublaslt_blockwise": "cuBLASLt block-scaled FP8, 1×128 A / 128×128 B (torch.nn.functional.scaled_mm)",
}


def _shape(size: SizeLike) -> tuple[int, int, int]:
    return (size, size, size) if isinstance(size, (int, np.integer)) else tuple(int(v) for v in size)


def record_fp8(out: Optional[str] = None, sizes: Optional[Sequence[SizeLike]] = None,
               steps: Sequence[dict[str, Any]] = STEPS, *, reps: int = 50, max_reps: int = 100,
               budget_s: float = 1.0, check_rows: int = 64, bf16_baselines: bool = True,
               progress: Optional[Callable[[str], None]] = print) -> dict[str, Any]:
    """Check and time every FP8 step at every size against cuBLASLt in the same run; write a result
    file (schema 1, provenance) after each measurement, so an interrupted run keeps what it measured.

    Records carry level LEVEL_ID, dtype "float8_e4m3", the setting in params, Timing fields, tflops,
    max_error_ratio (≤ 1 passes), the paired baseline (baseline: its name in BASELINES, baseline_ms,
    its own measured clock) and ratio_to_baseline (also under the course's older names cublas_paired_ms,
    cublas_paired_sm_clock_mhz, ratio_to_cublas). The blockwise kernels pair with cuBLASLt's block-scaled
    GEMM where PyTorch offers it (left out, and said so, where it does not), the per-tensor ones with
    cuBLASLt's per-tensor fast accumulation. The baselines are also records (level "cublas", dtype
    float8_e4m3, one per baseline and shape, promoted per-tensor included), checked like the kernels. With
    bf16_baselines, cuBLAS bf16 and Level 11 (step 6, bf16 C) run at the same sizes (bench.bench) and
    are kept under "bf16_baselines".
    """
    import cupy

    from gemm_course.measure.bench import SETTLE_S, _write_json, provenance, time_gpu

    _require_hopper()
    say = progress or (lambda _: None)
    sizes = list(sizes) if sizes is not None else (
        list(SQUARES) + [(m, n, k) for (n, k) in PROJECTION_NK for m in PROJECTION_M])
    api = _blockwise_api()
    method = FP8_METHOD.format(reps=reps, max_reps=max_reps, budget_s=budget_s, check_rows=check_rows,
                               settle_s=SETTLE_S, blockwise_api=api[0] if api else "absent")
    result: dict[str, Any] = {"schema": 1, "provenance": provenance(method), "records": []}
    result["provenance"]["torch"] = _torch_version()
    result["provenance"]["blockwise_baseline_api"] = api[0] if api else None
    if api is None:
        say(_bilingual("cuBLASLt's block-scaled FP8 GEMM is not reachable here (no PyTorch, or its "
                       "torch.nn.functional.scaled_mm lacks 1×128 / 128×128 block scaling): the blockwise kernels are "
                       "timed without their baseline",
                       "这里无法调用 cuBLASLt 的块缩放 FP8 GEMM（没有 PyTorch，或其 torch.nn.functional.scaled_mm 不支持 "
                       "1×128 / 128×128 块缩放）：细粒度内核在没有对照基准的情况下计时"))
    path = Path(out) if out else None
    timing = dict(min_reps=reps, max_reps=max_reps, budget_s=budget_s)

    def save() -> None:
        if path:
            _write_json(path, result)

    for size in sizes:
        M, N, K = _shape(size)
        flops = 2.0 * M * N * K
        operands = {sc: random_fp8_operands(M, N, K, sc, xp=cupy) for sc in SCALINGS}
        runs = {"cublaslt_fast": _torch_scaled_mm(*operands["per_tensor"], M, N, K, True),
                "cublaslt_promoted": _torch_scaled_mm(*operands["per_tensor"], M, N, K, False),
                "cublaslt_blockwise": _torch_blockwise_scaled_mm(*operands["blockwise"], M, N, K)}
        baseline_checks = {}
        for name, run in runs.items():
            if run is not None:  # the baseline computes the same function too: poison, run, check
                scaling = "blockwise" if name == "cublaslt_blockwise" else "per_tensor"
                baseline_checks[name] = _check_rows(_bf16_bits(run, poison=True), *operands[scaling], scaling,
                                                    M, N, K, check_rows)
        timed: dict[str, Any] = {}
        for step in steps:
            scaling = step["scaling"]
            a_bits, a_s, b_bits, b_s = operands[scaling]
            opts = {k: v for k, v in step.items() if k not in ("scaling", "skip_unsplit")}
            params = resolved_setting({"scaling": scaling, **opts}, M, N, K, _sm_count())
            splits = params.get("splits")
            if step.get("splits") == "auto" and splits == 1 and step.get("skip_unsplit", True):
                continue  # the same as the split-free step
            if scaling == "blockwise":
                opts["splits"] = splits
            launch, C = prepare(a_bits, a_s, b_bits, b_s, scaling=scaling, **opts)
            C.fill(BF16_NAN)
            launch()
            ratio = _check_rows(C, a_bits, a_s, b_bits, b_s, scaling, M, N, K, check_rows)
            name = "cublaslt_fast" if scaling == "per_tensor" else "cublaslt_blockwise"
            base = runs[name]
            paired = time_gpu(base, **timing) if base else None
            t = time_gpu(launch, **timing)
            row = {"level": LEVEL_ID, "params": params, "dtype": DTYPE, "M": M, "N": N, "K": K, **asdict(t),
                   "tflops": flops / (t.median_ms * 1e-3) / 1e12, "max_error_ratio": ratio, "passed": ratio <= 1}
            if paired:
                row.update({"baseline": name, "baseline_ms": paired.median_ms,
                            "baseline_sm_clock_mhz": paired.sm_clock_mhz,
                            "baseline_nvml_sm_clock_mhz": paired.nvml_sm_clock_mhz,
                            "ratio_to_baseline": paired.median_ms / t.median_ms,
                            # the names the course's other records use for the same pair
                            "cublas_paired_ms": paired.median_ms, "cublas_paired_sm_clock_mhz": paired.sm_clock_mhz,
                            "ratio_to_cublas": paired.median_ms / t.median_ms})
                timed.setdefault(name, paired)
            result["records"].append(row)
            say(_row_text(row))
            save()
            del launch, C
        for name, run in runs.items():  # one row per baseline and shape; promoted is timed here only
            if run is None:
                continue
            t = timed.get(name) or time_gpu(run, **timing)
            result["records"].append({"level": "cublas", "params": {"library": BASELINES[name]}, "baseline": name,
                                      "dtype": DTYPE, "M": M, "N": N, "K": K, **asdict(t),
                                      "tflops": flops / (t.median_ms * 1e-3) / 1e12,
                                      "max_error_ratio": baseline_checks[name],
                                      "passed": baseline_checks[name] <= 1})
            say(f"{M}×{N}×{K}  {name:<48} {t.median_ms:8.3f} ms  {flops / t.median_ms / 1e9:7.1f} TFLOPS  "
                f"SM {t.sm_clock_mhz or 0:.0f} MHz (NVML {t.nvml_sm_clock_mhz or 0:.0f})  "
                f"error/allowed {baseline_checks[name]:.3f}")
        save()
        del operands, runs
        cupy.get_default_memory_pool().free_all_blocks()
    if bf16_baselines:
        # Kept apart from "records" (which the course's ladder and level pages read): they are this
        # chapter's comparison, not another recording of Level 11.
        from gemm_course.measure.bench import bench

        bf16 = bench([("11_hopper_wgmma", {"step": 6, "c_type": "input"})], [_shape(s) for s in sizes],
                     dtype="bfloat16", progress=say, min_reps=reps, max_reps=max_reps, budget_s=budget_s)
        result["bf16_baselines"] = bf16["records"]
        result["provenance"]["bf16_method"] = bf16["provenance"]["method"]
    save()
    return result


def _check_rows(C: Any, a_bits: Any, a_s: Any, b_bits: Any, b_s: Any, scaling: str, M: int, N: int, K: int,
                check_rows: int) -> float:
    """max |C − reference| / allowed over `check_rows` random rows of C (every column); NaN fails."""
    import cupy

    from gemm_course.run.dtypes import to_float64
    from gemm_course.fp8.formats import reference_gemm_fp8 as reference
    pick = cupy.asarray(np.sort(np.random.default_rng(1).choice(M, min(M, check_rows), replace=False)))
    sa, sb = (a_s, b_s) if scaling == "blockwise" else full_scales(a_s, b_s, M, N, K)
    sa, sb = cupy.asarray(sa)[pick], cupy.asarray(sb)
    ref = reference(a_bits[pick], sa, b_bits, sb)
    mag = magnitude_gemm(a_bits[pick], sa, b_bits, sb)
    err = cupy.abs(to_float64(C[pick]) - ref) / allowed_error(ref, mag, K, scaling)
    return float("inf") if bool(cupy.isnan(err).any()) else float(err.max())


def _baseline_name(fast_accum: bool) -> str:
    return BASELINES["cublaslt_fast" if fast_accum else "cublaslt_promoted"]


def _bf16_bits(run: Callable[[], Any], poison: bool = False) -> Any:
    """A PyTorch baseline's bf16 output as a CuPy uint16 array (bf16 bits), shared through DLPack.
    poison: fill the output with NaN first and run again into it, so an unwritten element fails the check."""
    import cupy
    import torch

    out = run()
    if poison:
        out.view(torch.int16).fill_(BF16_NAN)  # 0x7FC0 fits in int16: the same bits
        run(out)
    return cupy.from_dlpack(out.view(torch.int16)).view(cupy.uint16)


@functools.lru_cache(maxsize=1)
def _blockwise_api() -> Optional[tuple[str, Any, Any, Any, str]]:
    """(name, scaled_mm, recipe of A, recipe of B, output-type keyword) for cuBLASLt's block-scaled FP8
    GEMM through PyTorch's torch.nn.functional.scaled_mm; None without PyTorch or without block scaling."""
    try:
        import inspect

        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    scaled_mm = getattr(F, "scaled_mm", None)
    kinds = getattr(F, "ScalingType", None)
    if scaled_mm is None or kinds is None:
        return None

    def recipe(*names: str) -> Any:
        return next((getattr(kinds, n) for n in names if hasattr(kinds, n)), None)

    a_kind = recipe("BlockWise1x128", "Blockwise_1x128", "Blockwise1x128")
    b_kind = recipe("BlockWise128x128", "Blockwise_128x128", "Blockwise128x128")
    if a_kind is None or b_kind is None:
        return None
    keywords = inspect.signature(scaled_mm).parameters
    out_kw = next((k for k in ("output_dtype", "out_dtype") if k in keywords), None)
    if out_kw is None:
        return None
    return (f"torch.nn.functional.scaled_mm(a, b, scale_a, ScalingType.{a_kind.name}, scale_b, "
            f"ScalingType.{b_kind.name}, {out_kw}=torch.bfloat16)", scaled_mm, a_kind, b_kind, out_kw)


def _torch_blockwise_scaled_mm(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, M: int, N: int,
                               K: int) -> Optional[Callable[..., Any]]:
    """cuBLASLt's block-scaled FP8 GEMM on the same bytes and scales: A M×K row-major with its (M, K/128)
    scales stored column-major (strides (1, M)), B as the K×N column-major view of its N×K bytes with the
    transposed view of its contiguous (N/128, K/128) scales; bf16 C. run(out=None) returns C.
    None where PyTorch lacks it or refuses the shape."""
    api = _blockwise_api()
    if api is None or M % 16 or N % 16 or K % 128:
        return None
    import torch

    _, scaled_mm, a_kind, b_kind, out_kw = api
    a = torch.from_dlpack(a_bits).view(torch.float8_e4m3fn)
    b = torch.from_dlpack(b_bits).view(torch.float8_e4m3fn).t()
    sa = torch.from_dlpack(_device_scales_2d(a_scales)).t().contiguous().t()   # (M, K/128), strides (1, M)
    sb = torch.from_dlpack(_device_scales_2d(b_scales)).t()                    # (K/128, N/128) view

    def run(out: Any = None) -> Any:
        C = scaled_mm(a, b, sa, a_kind, sb, b_kind, **{out_kw: torch.bfloat16})
        if out is not None:
            out.copy_(C)
            return out
        return C

    try:
        run()
        torch.cuda.synchronize()
    except Exception:  # a shape or layout this PyTorch refuses: leave the baseline out, say nothing wrong
        return None
    return run


def _device_scales_2d(s: Any) -> Any:
    import cupy

    return cupy.ascontiguousarray(cupy.asarray(s, dtype=cupy.float32))


def _torch_version() -> Optional[str]:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


def _torch_scaled_mm(a_bits: Any, a_scale: Any, b_bits: Any, b_scale: Any, M: int, N: int, K: int,
                     fast_accum: bool) -> Optional[Callable[[], Any]]:
    """A call of torch._scaled_mm on the same bytes (shared through DLPack), per-tensor scales, bf16 out;
    None without PyTorch, or where its FP8 GEMM refuses the shape (it wants M, N, K multiples of 16)."""
    try:
        import torch
    except ImportError:
        return None
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn") or M % 16 or N % 16 or K % 16:
        return None
    a = torch.from_dlpack(a_bits).view(torch.float8_e4m3fn)          # M×K, row-major
    b = torch.from_dlpack(b_bits).view(torch.float8_e4m3fn).t()      # K×N, column-major: what it wants
    sa = torch.tensor(float(np.asarray(a_scale).reshape(-1)[0]), device=a.device, dtype=torch.float32)
    sb = torch.tensor(float(np.asarray(b_scale).reshape(-1)[0]), device=a.device, dtype=torch.float32)

    def run(out: Any = None) -> Any:
        if out is not None:
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                    use_fast_accum=fast_accum, out=out)
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)

    try:
        run()
    except Exception:  # an older or newer signature: leave the baseline out rather than fail the run
        return None
    return run


def _row_text(row: dict[str, Any]) -> str:
    check = "" if row.get("max_error_ratio") is None else f"  error/allowed {row['max_error_ratio']:.3f}"
    clock = "" if row.get("sm_clock_mhz") is None else f"  SM {row['sm_clock_mhz']:.0f} MHz"
    base = "" if "ratio_to_cublas" not in row else (
        f"  {row['ratio_to_cublas']:.1%} of {row.get('baseline') or 'cuBLASLt'}"
        + ("" if row.get("cublas_paired_sm_clock_mhz") is None else f" ({row['cublas_paired_sm_clock_mhz']:.0f} MHz)"))
    setting = ",".join(f"{k}={v}" for k, v in row["params"].items())
    return (f"{row['M']}×{row['N']}×{row['K']}  {setting:<48} {row['median_ms']:8.3f} ms  "
            f"{row['tflops']:7.1f} TFLOPS{clock}{base}{check}")


# --- counters ------------------------------------------------------------------------------------

# What the chapter reads from Nsight Compute for each step: the Tensor Cores' busy share, how often a
# scheduler issued, the SM clock, the kernel's time and its DRAM traffic (the small-M shapes are a
# stream of B's bytes).
FP8_COUNTER_METRICS = {
    "tensor_pipe_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm_clock_hz": "smsp__cycles_elapsed.avg.per_second",
    "duration_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
}
COUNTER_SHAPES = ((4096, 4096, 4096), (64, 7168, 16384))


def record_fp8_counters(out: str, shapes: Sequence[SizeLike] = COUNTER_SHAPES,
                        steps: Sequence[dict[str, Any]] = STEPS,
                        progress: Optional[Callable[[str], None]] = print) -> dict[str, Any]:
    """Run each step once per shape in one Python process under ncu (a few metrics, --clock-control
    none, caches flushed before each pass by ncu's default) and write the counters with provenance."""
    import json
    import subprocess
    import sys
    import tempfile

    from gemm_course.measure.bench import _write_json, provenance
    from gemm_course.measure.counters import NO_NCU, find_ncu, ncu_version, parse_ncu_csv

    _require_hopper()
    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError(NO_NCU)
    say = progress or (lambda _: None)
    plan = [(_shape(size), dict(step)) for size in shapes for step in steps
            if not (step.get("splits") == "auto"
                    and auto_splits(*_shape(size), _sm_count(), step.get("block_m"), step.get("block_n")) == 1)]
    method = (f"ncu {ncu_version(ncu)} --clock-control none -k regex:fp8_gemm --metrics "
              f"{','.join(FP8_COUNTER_METRICS.values())} --csv --page raw --print-units base; one launch per "
              "(shape, step) in one process after an unprofiled launch of the same kernel (compile, checked)")
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "plan.json"
        spec.write_text(json.dumps(plan))
        command = [ncu, "--target-processes", "all", "--clock-control", "none", "-k", "regex:fp8_gemm",
                   "--launch-skip-before-match", "0", "--metrics", ",".join(FP8_COUNTER_METRICS.values()),
                   "--csv", "--page", "raw", "--print-units", "base", sys.executable, "-m", "gemm_course.fp8.gemm",
                   str(spec)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    rows = parse_ncu_csv(done.stdout)
    # Each (shape, step) launches twice (unprofiled-by-intent warm-up, then the measured one): keep the second.
    if done.returncode != 0 or len(rows) != 2 * len(plan):
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"ncu gave {len(rows)} kernel rows for {2 * len(plan)} launches: " + " | ".join(tail))
    payload: dict[str, Any] = {"schema": 1, "provenance": {**provenance(method), "ncu": ncu_version(ncu)},
                               "records": [], "fp8_counters": []}
    for i, ((M, N, K), step) in enumerate(plan):
        values = rows[2 * i + 1]["values"]
        metrics = {key: values.get(name) for key, name in FP8_COUNTER_METRICS.items()}
        splits = (resolve_splits(step.get("splits"), M, N, K, _sm_count(), step.get("block_m"), step.get("block_n"))
                  if step["scaling"] == "blockwise" else None)
        params = setting_params(step["scaling"], block_n=step.get("block_n"), overlap=step.get("overlap", True),
                                splits=splits, block_m=step.get("block_m"))
        payload["fp8_counters"].append({"level": LEVEL_ID, "params": params, "dtype": DTYPE, "M": M, "N": N, "K": K,
                                        "kernel": rows[2 * i + 1]["kernel"], "metrics": metrics})
        say(f"{M}×{N}×{K} {params}: " + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if v is not None))
    _write_json(Path(out), payload)
    return payload


def _launch_plan(spec: str) -> None:
    """The program record_fp8_counters profiles: each (shape, step) launched twice on random operands."""
    import json

    import cupy

    for (M, N, K), step in json.loads(Path(spec).read_text()):
        scaling = step.pop("scaling")
        a_bits, a_s, b_bits, b_s = random_fp8_operands(M, N, K, scaling, xp=cupy)
        launch, _ = prepare(a_bits, a_s, b_bits, b_s, scaling=scaling, **step)
        launch()
        launch()
        cupy.cuda.Device().synchronize()


if __name__ == "__main__":  # the program record_fp8_counters runs under ncu
    import sys

    _launch_plan(sys.argv[1])


def recorded_fp8(dtype: str = DTYPE) -> list[dict[str, Any]]:
    """The recorded FP8 records (every step and size), each with its file's GPU, date and provenance."""
    from gemm_course.measure.results import recorded

    return [r for r in recorded(LEVEL_ID, dtype=dtype) if r["level"] == LEVEL_ID]
