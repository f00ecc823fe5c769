"""FP8 (e4m3) GEMM on Hopper: the host side of gemm_course/kernels/13_fp8_blockscaled.cu.

    C (bf16) = A · Bᵀ,   A: M×K e4m3 bytes,   B: N×K e4m3 bytes (K contiguous in both)

with the scales of gemm_course.fp8 applied inside the kernel. Two kernels (see the .cu file's header):

- scaling="per_tensor": one scale for A and one for B (``fp8.quantize_per_tensor``), applied once when
  C is stored. 128×256 tiles; the Tensor Cores accumulate the whole K ("fast accumulation").
- scaling="blockwise": 1×128 scales of A (``fp8.quantize_rows_1x128``) and 128×128 scales of B
  (``fp8.quantize_blocks_128x128``). 128×128 tiles; each 128-deep k-block is summed by the Tensor
  Cores and then added, times its two scales, into fp32 registers by the CUDA cores ("promotion").

Matrices travel the way the course stores narrow types: e4m3 as uint8 bit patterns, bf16 C as uint16
bit patterns (decode with ``gemm_course.dtypes.to_float64``). Everything compiles through the course's
one compile path (``compile._compiled_kernel``, NVRTC for sm_90a) and is timed with the one timing
harness (``bench.time_gpu``). Importing this module needs no GPU; :func:`fp8_compile_report` works
without one too.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import device
from .fp8 import SCALE_BLOCK, _array_module, _bilingual

KERNEL_FILE = "13_fp8_blockscaled.cu"
ARCH = "sm_90a"            # wgmma and setmaxnreg exist on Hopper's arch-specific target only
SCALINGS = ("blockwise", "per_tensor")
THREADS = 384              # a producer warpgroup and two consumer warpgroups
BK = 128                   # bytes of k per stage: one 128-byte swizzle row, one scale block
TILES = {"per_tensor": (128, 256), "blockwise": (128, 128)}  # (BM, BN) of C per block
STAGE_CHOICES = {"per_tensor": (2, 3, 4), "blockwise": (2, 3, 4, 5, 6)}  # what fits in 227 KB
DEFAULT_STAGES = {"per_tensor": 4, "blockwise": 6}  # both 192 KB of ring
K_MULTIPLE = 16            # TMA: every row of A and B a whole number of 16-byte chunks
ALIGNMENT = 16             # bytes: TMA needs 16-byte aligned matrices
BF16_NAN = 0x7FC0


# --- settings ------------------------------------------------------------------------------------

def resolve_stages(scaling: str, stages: Optional[int] = None) -> int:
    """The ring depth for a kernel: the default, or a checked choice."""
    if scaling not in SCALINGS:
        raise ValueError(_bilingual(f"scaling must be one of {', '.join(map(repr, SCALINGS))}, not {scaling!r}",
                                    f"scaling 只能是 {', '.join(map(repr, SCALINGS))} 之一，而不是 {scaling!r}"))
    if stages is None:
        return DEFAULT_STAGES[scaling]
    if stages not in STAGE_CHOICES[scaling]:
        raise ValueError(_bilingual(
            f"stages={stages!r}: the {scaling} kernel takes {STAGE_CHOICES[scaling]} (more stages no longer "
            "fit in an SM's 227 KB of shared memory)",
            f"stages={stages!r}：{scaling} 内核可选 {STAGE_CHOICES[scaling]}（再多就放不进一个 SM 的 227 KB 共享内存）"))
    return stages


def kernel_name(scaling: str, stages: Optional[int] = None) -> str:
    """The kernel's name expression in 13_fp8_blockscaled.cu, e.g. "fp8_gemm_blockwise<6>"."""
    return f"fp8_gemm_{scaling}<{resolve_stages(scaling, stages)}>"


def shared_bytes(scaling: str, stages: Optional[int] = None) -> int:
    """Dynamic shared memory per block: the ring (A and B of each stage) + 1024 B to align it to the
    swizzle's 1024-byte period."""
    bm, bn = TILES[scaling] if scaling in TILES else (0, 0)
    return resolve_stages(scaling, stages) * (bm + bn) * BK + 1024


def tiles(M: int, N: int, scaling: str) -> int:
    """How many tiles of C the kernel computes (its persistent blocks share them out)."""
    bm, bn = TILES[scaling]
    return math.ceil(M / bm) * math.ceil(N / bn)


def kernel_source() -> str:
    """The CUDA C source of both kernels."""
    from .levels import KERNEL_DIR

    return (KERNEL_DIR / KERNEL_FILE).read_text(encoding="utf-8")


def _compile_options() -> tuple[str, ...]:
    from .compile import COMPILE_OPTIONS

    return COMPILE_OPTIONS  # the kernels include only the course's own headers


def fp8_compile_report(scaling: str = "blockwise", stages: Optional[int] = None, arch: str = ARCH) -> Any:
    """Registers, spills, shared memory and occupancy of one kernel, compiled by NVRTC (no GPU needed).

    Returns the course's ``compile.CompileReport`` (its ``problems()`` lists spills and shared-memory
    overflows; ``str()`` prints it bilingually).
    """
    from .compile import CompileReport, nvrtc_compile, parse_ptxas_log
    from .models import occupancy

    if arch != ARCH:
        raise ValueError(_bilingual(f"the FP8 kernels use wgmma and setmaxnreg, which exist on {ARCH} only; "
                                    f"{arch} cannot run them",
                                    f"FP8 内核用到 wgmma 和 setmaxnreg，它们只存在于 {ARCH}；{arch} 无法运行"))
    stages = resolve_stages(scaling, stages)
    name = kernel_name(scaling, stages)
    _, mangled, log = nvrtc_compile(kernel_source(), name, arch, _compile_options())
    usage = parse_ptxas_log(log[log.find(mangled):] if mangled in log else log)
    dynamic = shared_bytes(scaling, stages)
    occ = occupancy(arch, THREADS, usage["registers"], usage["static_shared_bytes"] + dynamic)
    return CompileReport(level="13_fp8_blockscaled", params={"scaling": scaling, "stages": stages}, arch=arch,
                         kernel=name, threads_per_block=THREADS, dynamic_shared_bytes=dynamic, occupancy=occ,
                         log=log, **usage)


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
            f"{name} must hold e4m3 bit patterns as uint8 (what gemm_course.fp8.quantize_* returns), not {x.dtype}",
            f"{name} 必须是 uint8 的 e4m3 位模式（即 gemm_course.fp8.quantize_* 的返回值），而不是 {x.dtype}"))
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
    device.require_gpu("running the FP8 kernels")
    cc = device.compute_capability()
    if cc != 90:
        raise RuntimeError(_bilingual(
            f"the FP8 kernels use wgmma and setmaxnreg, built for {ARCH}: they run on compute capability 9.0 "
            f"exactly (H100, H200, GH200), and this GPU ({device.gpu_name()}) is sm_{cc}",
            f"FP8 内核用到 wgmma 和 setmaxnreg，只为 {ARCH} 编译：只能在计算能力 9.0（H100、H200、GH200）上运行，"
            f"而这块 GPU（{device.gpu_name()}）是 sm_{cc}"))


def _device_scales(s: Any, cupy: Any) -> Any:
    """Scales as a contiguous float32 CuPy array (from NumPy, CuPy or a plain number)."""
    return cupy.ascontiguousarray(cupy.asarray(s, dtype=cupy.float32).reshape(-1))


def _sm_count() -> int:
    return int(device.properties()["multiProcessorCount"])


def prepare(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, *, scaling: str = "blockwise",
            out: Any = None, stages: Optional[int] = None) -> tuple[Callable[[], None], Any]:
    """Check, compile (cached), build the TMA maps; returns (launch, C).

    launch() runs the kernel once, writing C; nothing else happens per call, which is what a timing
    loop wants. fp8_gemm() is prepare() then one launch.
    """
    M, N, K = check_operands(a_bits, a_scales, b_bits, b_scales, scaling, out)
    stages = resolve_stages(scaling, stages)
    _require_hopper()
    import cupy

    for name, x in (("A bits", a_bits), ("B bits", b_bits), ("out", out)):
        if x is not None and not _is_cupy(x):
            raise TypeError(_bilingual(f"{name} must be a CuPy array on the GPU; convert it with cupy.asarray",
                                       f"{name} 必须是 GPU 上的 CuPy 数组；请用 cupy.asarray 转换"))
    from .compile import _compiled_kernel
    from .hopper import _device_tensor_map

    kernel = _compiled_kernel(kernel_source(), _compile_options(), kernel_name(scaling, stages), ARCH)
    shared = shared_bytes(scaling, stages)
    kernel.max_dynamic_shared_size_bytes = shared  # above 48 KB a kernel must ask for its shared memory
    bm, bn = TILES[scaling]
    dev = a_bits.device.id
    # Boxes of 128 bytes of k × the tile's rows: one TMA copy per operand per stage.
    map_a = _device_tensor_map(a_bits.data.ptr, "uint8", M, K, bm, dev)
    map_b = _device_tensor_map(b_bits.data.ptr, "uint8", N, K, bn, dev)
    sa, sb = _device_scales(a_scales, cupy), _device_scales(b_scales, cupy)
    C = out if out is not None else cupy.empty((M, N), dtype=cupy.uint16)
    grid = (min(tiles(M, N, scaling), _sm_count()), 1, 1)  # persistent: at most one block per SM
    args = (map_a, map_b, sa, sb, C, np.int32(M), np.int32(N), np.int32(K))

    def launch() -> None:
        kernel(grid, (THREADS, 1, 1), args, shared_mem=shared)

    return launch, C


def fp8_gemm(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, *, scaling: str = "blockwise",
             out: Any = None, stages: Optional[int] = None) -> Any:
    """C = A · Bᵀ of FP8 (e4m3) matrices with their scales, on a Hopper GPU; C is bf16 (uint16 bits).

    a_bits: M×K uint8 and b_bits: N×K uint8 CuPy arrays (B K-contiguous, as FP8 wgmma reads it).
    scaling="blockwise": a_scales (M, ceil(K/128)) and b_scales (ceil(N/128), ceil(K/128)), as
    fp8.quantize_rows_1x128 and fp8.quantize_blocks_128x128 return them.
    scaling="per_tensor": one number each, as fp8.quantize_per_tensor returns it.
    Scales may be NumPy or CuPy arrays (they are copied to the GPU as float32).
    out: an optional (M, N) uint16 CuPy array to write C into. stages: the ring depth (see
    STAGE_CHOICES; default DEFAULT_STAGES). Compare with fp8.reference_gemm_fp8.
    """
    launch, C = prepare(a_bits, a_scales, b_bits, b_scales, scaling=scaling, out=out, stages=stages)
    launch()
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
    from .fp8 import reference_gemm_fp8

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
    gemm_course.fp8 the way `scaling` expects. xp: numpy, or cupy to build the large arrays on the
    GPU (much faster for big sizes; the per-block sizes come from NumPy's generator either way)."""
    from . import fp8

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
    from . import fp8

    if not _is_cupy(x):
        return fp8.quantize_per_tensor(x)
    amax = float(abs(x).max())
    scale = np.float32(amax / fp8.E4M3_MAX if amax else 1.0)
    return fp8.encode_e4m3(x / float(scale)), scale


SizeLike = Union[int, Sequence[int]]


def bench_fp8(sizes: Sequence[SizeLike] = (4096, 8192), *, stages: Optional[dict[str, int]] = None,
              compare_torch: bool = True, check_rows: int = 64,
              progress: Optional[Callable[[str], None]] = print) -> list[dict[str, Any]]:
    """Time both FP8 kernels (and torch._scaled_mm per-tensor FP8, where PyTorch is installed) with
    bench.time_gpu, the course's one timing harness. Returns one row per (size, kernel):
    {"M", "N", "K", "kernel", "median_ms", "tflops", "sm_clock_mhz", "max_error_ratio"}.

    sizes: n for n×n×n, or (M, N, K). Before timing, `check_rows` random rows of each C are compared
    with fp8.reference_gemm_fp8 (max_error_ratio = max |C - ref| / allowed_error: ≤ 1 passes;
    None where no check was made). PyTorch is not a course requirement: it is imported only here.
    """
    import cupy

    from .bench import time_gpu
    from .dtypes import to_float64
    from .fp8 import reference_gemm_fp8

    _require_hopper()
    stages = stages or {}
    say = progress or (lambda _: None)
    rows: list[dict[str, Any]] = []
    for size in sizes:
        M, N, K = (size, size, size) if isinstance(size, (int, np.integer)) else tuple(int(v) for v in size)
        flops = 2.0 * M * N * K
        for scaling in SCALINGS:
            a_bits, a_s, b_bits, b_s = random_fp8_operands(M, N, K, scaling, xp=cupy)
            launch, C = prepare(a_bits, a_s, b_bits, b_s, scaling=scaling, stages=stages.get(scaling))
            launch()
            ratio = None
            if check_rows:
                pick = cupy.asarray(np.sort(np.random.default_rng(1).choice(M, min(M, check_rows), replace=False)))
                sa, sb = (a_s, b_s) if scaling == "blockwise" else full_scales(a_s, b_s, M, N, K)
                sa = cupy.asarray(sa)[pick]
                sb = cupy.asarray(sb)
                ref = reference_gemm_fp8(a_bits[pick], sa, b_bits, sb)
                mag = magnitude_gemm(a_bits[pick], sa, b_bits, sb)
                err = cupy.abs(to_float64(C[pick]) - ref)
                ratio = float(cupy.max(err / allowed_error(ref, mag, K, scaling)))
            t = time_gpu(launch)
            rows.append({"M": M, "N": N, "K": K, "kernel": f"fp8_gemm_{scaling}", "median_ms": t.median_ms,
                         "tflops": flops / (t.median_ms * 1e-3) / 1e12, "sm_clock_mhz": t.sm_clock_mhz,
                         "max_error_ratio": ratio})
            say(_row_text(rows[-1]))
            if scaling == "per_tensor" and compare_torch:
                for fast in (False, True):
                    row = _time_torch_scaled_mm(a_bits, a_s, b_bits, b_s, M, N, K, fast, time_gpu)
                    if row is not None:
                        rows.append(row)
                        say(_row_text(row))
            del a_bits, b_bits, C
    return rows


def _row_text(row: dict[str, Any]) -> str:
    check = "" if row.get("max_error_ratio") is None else f"  error/allowed {row['max_error_ratio']:.3f}"
    clock = "" if row.get("sm_clock_mhz") is None else f"  SM {row['sm_clock_mhz']:.0f} MHz"
    return (f"{row['M']}×{row['N']}×{row['K']}  {row['kernel']:<36} {row['median_ms']:8.3f} ms  "
            f"{row['tflops']:7.1f} TFLOPS{clock}{check}")


def _time_torch_scaled_mm(a_bits: Any, a_scale: Any, b_bits: Any, b_scale: Any, M: int, N: int, K: int,
                          fast_accum: bool, time_gpu: Callable[..., Any]) -> Optional[dict[str, Any]]:
    """torch._scaled_mm on the same bytes (shared through DLPack), per-tensor scales, bf16 out; None
    without PyTorch, or where its FP8 GEMM refuses the shape (it wants M, N, K multiples of 16)."""
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

    def run() -> Any:
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)

    try:
        run()
    except Exception:  # an older or newer signature: leave the row out rather than fail the bench
        return None
    t = time_gpu(run)
    name = f"torch._scaled_mm per-tensor{' fast_accum' if fast_accum else ''}"
    return {"M": M, "N": N, "K": K, "kernel": name, "median_ms": t.median_ms,
            "tflops": 2.0 * M * N * K / (t.median_ms * 1e-3) / 1e12, "sm_clock_mhz": t.sm_clock_mhz,
            "max_error_ratio": None}
