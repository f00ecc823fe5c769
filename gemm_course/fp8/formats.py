"""FP8 (e4m3) numbers and the block scales that FP8 GEMMs on Hopper use, computed on the CPU.

Hopper's Tensor Cores multiply 8-bit floats. This module is the CPU side of that story: it turns
float matrices into FP8 bit patterns plus scales, turns them back, and computes the product a
kernel must reproduce. NumPy, no GPU needed; CuPy arrays are accepted too (the code uses only
functions both libraries have, and imports CuPy only when it is handed a CuPy array).

The e4m3 format (OCP FP8 E4M3, the "fn" variant Hopper uses), one byte per value:

    bit:    7   6 5 4 3   2 1 0
            S   E E E E   M M M          bias 7, no infinities
    E = 1..15:  (-1)^S · 2^(E-7) · 1.MMM  normal numbers, 2^-6 ... 448
    E = 0:      (-1)^S · 2^-6  · 0.MMM    subnormals 2^-9 ... 7·2^-9 (and ±0)
    S.1111.111: NaN (0x7F, 0xFF)          the one pattern given up, so 448 stays finite

Three significant bits means each value is within 2^-4 (6 %) of the number it stands for, and the
range 2^-9 ... 448 is tiny. So a matrix is not converted as it is: it is first divided by a scale
that maps the largest |x| of a block onto 448, the top of the range. The smaller the blocks, the
less one large value (an "outlier channel") squashes its neighbours towards the subnormals:

    A (M×K, activations): 1×128 strips       B (N×K, weights, K contiguous): 128×128 tiles

      K →  |<-128->|<-128->|<-128->|<-72->|      K →  |<-128->|<-128->|<-72->|
    row 0  |  s00  |  s01  |  s02  | s03  |          +-------+-------+------+
    row 1  |  s10  |  s11  |  s12  | s13  |      128 |  t00  |  t01  | t02  |
     ...   |  ...  |  ...  |  ...  | ...  |          +-------+-------+------+
                                                  128 |  t10  |  t11  | t12  |
    scales: (M, ceil(K/128))                          +-------+-------+------+
    (the last strip is shorter when 128 ∤ K)      scales: (ceil(N/128), ceil(K/128))

A value is stored as bits = e4m3(x / s) and means decode(bits) · s. The scales are float32, the
type a kernel reads them in. Matrices are stored the way the course stores bfloat16: as arrays of
bit patterns (here uint8), because NumPy has no FP8 dtype.
"""
from __future__ import annotations

import math
from typing import Any, Tuple

import numpy as np

E4M3_MAX = 448.0              # S.1111.110 = 1.75 · 2^8, the largest finite value
E4M3_MIN_NORMAL = 2.0 ** -6   # S.0001.000
E4M3_MIN_SUBNORMAL = 2.0 ** -9  # S.0000.001
E4M3_NAN = 0x7F               # the NaN encode_e4m3 writes (0xFF is NaN too)
SCALE_BLOCK = 128             # strip width and tile side of the fine-grained scales


def _bilingual(en: str, zh: str) -> str:
    """The course's one-line form of a user-facing message: "English / 中文"."""
    return f"{en} / {zh}"


def _build_e4m3_table() -> np.ndarray:
    """All 256 bit patterns decoded, straight from the format's definition above."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    normal = sign * np.exp2(exponent - 7.0) * (1.0 + mantissa / 8.0)
    subnormal = sign * E4M3_MIN_NORMAL * (mantissa / 8.0)  # no implicit leading 1
    values = np.where(exponent == 0, subnormal, normal)
    values[(codes & 0x7F) == 0x7F] = np.nan
    table = values.astype(np.float32)  # every e4m3 value is exact in float32
    table.flags.writeable = False
    return table


E4M3_VALUES = _build_e4m3_table()
"""The 256 e4m3 values as float32, indexed by bit pattern (read-only)."""

# The 127 non-negative finite values 0x00 ... 0x7E increase with their bit pattern, so rounding is
# a search on the number line: a value rounds to the nearer of its two neighbours, and the
# midpoints between neighbours are the places where the answer changes.
_POSITIVE = E4M3_VALUES[:0x7F].astype(np.float64)
_MIDPOINTS = (_POSITIVE[:-1] + _POSITIVE[1:]) / 2  # exact: 5 significant bits


def _array_module(x: Any) -> Any:
    """numpy, or cupy for a CuPy array (cupy is imported only when one is passed)."""
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy.get_array_module(x)
    return np


def _as_bits(bits: Any, name: str) -> Any:
    """bits as a uint8 array; other integer arrays are accepted when every entry fits a byte."""
    xp = _array_module(bits)
    bits = xp.asarray(bits)
    if bits.dtype == np.uint8:
        return bits
    if bits.dtype.kind in "iu" and (bits.size == 0 or (int(bits.min()) >= 0 and int(bits.max()) <= 255)):
        return bits.astype(np.uint8)
    raise ValueError(_bilingual(
        f"{name} must hold e4m3 bit patterns as uint8 (what encode_e4m3 returns), not {bits.dtype} values",
        f"{name} 必须是 uint8 的 e4m3 位模式（即 encode_e4m3 的返回值），而不是 {bits.dtype} 数值"))


def decode_e4m3(bits: Any) -> Any:
    """The float32 value of each e4m3 bit pattern (exact: a lookup in E4M3_VALUES).

    0x7F and 0xFF decode to NaN; 0x80 decodes to -0.0.
    """
    bits = _as_bits(bits, "bits")
    xp = _array_module(bits)
    return xp.asarray(E4M3_VALUES)[bits]


def encode_e4m3(x: Any) -> Any:
    """Round values to e4m3, as Hopper's ``cvt.rn.satfinite.e4m3x2.f32`` does; returns uint8 bits.

    - round to nearest, ties to the even bit pattern (the one whose last mantissa bit is 0);
    - satfinite: anything beyond ±448, ±inf included, becomes ±448 (e4m3 has no infinity, and
      without saturation an overflow would become NaN);
    - NaN becomes 0x7F; -0.0 keeps its sign (0x80); |x| ≤ 2^-10 rounds to ±0.

    Inputs are rounded once, from their own precision: a float32 input gives exactly the
    hardware's answer; a float64 input is not rounded to float32 first.
    """
    xp = _array_module(x)
    values = xp.asarray(x)
    if values.dtype.kind not in "fiu":
        raise ValueError(_bilingual(f"encode_e4m3 takes real numbers, not {values.dtype}",
                                    f"encode_e4m3 只接受实数，而不是 {values.dtype}"))
    with np.errstate(invalid="ignore"):  # a signalling NaN warns when widened; it stays NaN
        values = values.astype(np.float64)  # float16/32 are exact in float64: no rounding here
    magnitude = xp.abs(values)
    midpoints = xp.asarray(_MIDPOINTS)
    # i = how many midpoints lie below |x|: |x| is nearest to _POSITIVE[i]. Past the last midpoint
    # i is 126, the pattern of 448: saturation needs no extra step.
    index = xp.searchsorted(midpoints, magnitude, side="left")
    # On a midpoint exactly (a tie) the search picked the lower neighbour; take the even one.
    on_midpoint = magnitude == midpoints[xp.minimum(index, len(_MIDPOINTS) - 1)]
    index = xp.where(on_midpoint & (index % 2 == 1), index + 1, index)
    bits = index.astype(np.uint8) | (xp.signbit(values).astype(np.uint8) << 7)
    return xp.where(xp.isnan(values), np.uint8(E4M3_NAN), bits).astype(np.uint8)


# --- quantisation with scales ---------------------------------------------------------------------

def _as_values(x: Any, name: str) -> Any:
    """x as a float64 array of finite values, with a message that says what to change otherwise."""
    xp = _array_module(x)
    x = xp.asarray(x)
    if x.dtype == np.uint16:  # the course's bfloat16 storage (see dtypes.py)
        from gemm_course.run.dtypes import to_float64

        return _check_finite(to_float64(x), name)
    if x.dtype == np.uint8:
        raise ValueError(_bilingual(
            f"{name} is uint8, which looks like e4m3 bits already; decode or dequantize it first, "
            "or pass the float values",
            f"{name} 是 uint8，看起来已经是 e4m3 位模式；请先解码或反量化，或直接传入浮点数值"))
    if x.dtype.kind not in "fiu":
        raise ValueError(_bilingual(
            f"{name} has dtype {x.dtype}; pass real numbers (float16/32/64, or bfloat16 as uint16 bits)",
            f"{name} 的类型是 {x.dtype}；请传入实数（float16/32/64，或以 uint16 位模式存放的 bfloat16）"))
    return _check_finite(x.astype(np.float64), name)


def _check_finite(x: Any, name: str) -> Any:
    xp = _array_module(x)
    bad = int(xp.count_nonzero(~xp.isfinite(x)))
    if bad:
        raise ValueError(_bilingual(
            f"{name} has {bad} non-finite value(s) (NaN or ±inf); a scale needs a finite max |x|: "
            "replace or remove them before quantising",
            f"{name} 含有 {bad} 个非有限值（NaN 或 ±inf）；缩放因子需要有限的最大 |x|：量化前请替换或去掉它们"))
    return x


def _check_matrix(x: Any, name: str, shape_hint: str) -> None:
    if x.ndim != 2:
        raise ValueError(_bilingual(
            f"{name} must be a 2-D matrix ({shape_hint}), but it has {x.ndim} dimension(s); reshape it",
            f"{name} 必须是二维矩阵（{shape_hint}），但它有 {x.ndim} 维；请先 reshape"))


def _scales_for(amax: Any, name: str) -> Any:
    """float32 scales that map each block's max |x| onto 448; an all-zero block gets scale 1.

    float32 rounding may leave amax / scale a hair above 448; the saturating encode then stores
    448, an error of at most 2^-24 relative.
    """
    xp = _array_module(amax)
    with np.errstate(over="ignore"):  # too large for float32 becomes inf, reported just below
        scales = xp.where(amax == 0, 1.0, amax / E4M3_MAX).astype(np.float32)
    tiny = float(np.finfo(np.float32).tiny)
    out_of_range = ~xp.isfinite(scales) | (scales < tiny)
    if bool(xp.any(out_of_range)):
        worst = float(amax[out_of_range].max())
        raise ValueError(_bilingual(
            f"{name}: a block's max |x| = {worst:.3g} gives a scale max|x|/448 outside float32's normal range "
            f"({tiny:.3g} ... {float(np.finfo(np.float32).max):.3g}); rescale the input",
            f"{name}：某个块的最大 |x| = {worst:.3g}，缩放因子 max|x|/448 超出 float32 正规数范围；请先整体缩放输入"))
    return scales


def _padded_blocks(x: Any, rows: int, cols: int) -> Any:
    """x zero-padded to multiples of rows × cols, viewed as (row blocks, rows, col blocks, cols).

    Zeros change no block's max |x|, which is how the shorter last strip or tile gets its scale.
    """
    xp = _array_module(x)
    M, K = x.shape
    padded = xp.pad(x, ((0, -M % rows), (0, -K % cols)))
    return padded.reshape(padded.shape[0] // rows, rows, padded.shape[1] // cols, cols)


def _expand(scales: Any, rows: int, cols: int, shape: Tuple[int, int]) -> Any:
    """Each scale repeated over its block, cut to the matrix's shape (float64)."""
    xp = _array_module(scales)
    full = xp.repeat(xp.repeat(scales.astype(np.float64), rows, axis=0), cols, axis=1)
    return full[:shape[0], :shape[1]]


def quantize_per_tensor(x: Any) -> Tuple[Any, np.float32]:
    """One scale for the whole array: (uint8 bits, float32 scale), with x ≈ decode(bits) · scale.

    The simplest scheme, and the one an outlier hurts most: every value is divided by the same
    scale, so a single large |x| pushes all the small ones down into the subnormals.
    """
    values = _as_values(x, "x")
    xp = _array_module(values)
    amax = xp.max(xp.abs(values)) if values.size else xp.asarray(0.0)
    scale = _scales_for(xp.asarray(amax).reshape(1), "x")[0]
    scale = float(scale)  # a host number, from NumPy or CuPy alike
    return encode_e4m3(values / scale), np.float32(scale)


def dequantize_per_tensor(bits: Any, scale: Any) -> Any:
    """decode(bits) · scale in float64, exact (a 4-bit by 24-bit significand product)."""
    bits = _as_bits(bits, "bits")
    scale = _check_scales(scale, (), "scale", "a single number", like=np.empty(0))
    return decode_e4m3(bits).astype(np.float64) * float(scale)


def quantize_rows_1x128(a: Any) -> Tuple[Any, Any]:
    """Activations A (M×K): one float32 scale per row per 128-wide strip of K.

    Returns (bits (M, K) uint8, scales (M, ceil(K/128)) float32). When K is not a multiple of 128
    the last strip of each row is shorter (K mod 128 columns) and its scale covers just those.
    A strip's scale follows its own max |x|, so an outlier channel only coarsens its own strip.
    """
    values = _as_values(a, "A")
    _check_matrix(values, "A", "M×K")
    xp = _array_module(values)
    M, K = values.shape
    amax = xp.abs(_padded_blocks(values, 1, SCALE_BLOCK)).max(axis=(1, 3))  # (M, ceil(K/128))
    scales = _scales_for(amax, "A")
    bits = encode_e4m3(values / _expand(scales, 1, SCALE_BLOCK, (M, K)))
    return bits, scales


def dequantize_rows_1x128(bits: Any, scales: Any) -> Any:
    """The inverse of quantize_rows_1x128: decode(bits) · its strip's scale, float64 (exact)."""
    bits = _as_bits(bits, "A bits")
    _check_matrix(bits, "A bits", "M×K")
    M, K = bits.shape
    scales = _check_scales(scales, (M, math.ceil(K / SCALE_BLOCK)), "A scales",
                           f"one per row per 128-wide strip of a {M}×{K} matrix", like=bits)
    return decode_e4m3(bits).astype(np.float64) * _expand(scales, 1, SCALE_BLOCK, (M, K))


def quantize_blocks_128x128(b: Any) -> Tuple[Any, Any]:
    """Weights B stored N×K (K contiguous, the layout FP8 wgmma reads): one scale per 128×128 tile.

    Returns (bits (N, K) uint8, scales (ceil(N/128), ceil(K/128)) float32); tiles on the bottom
    and right edges are smaller when 128 does not divide N or K.
    """
    values = _as_values(b, "B")
    _check_matrix(values, "B", "N×K, K contiguous")
    xp = _array_module(values)
    N, K = values.shape
    amax = xp.abs(_padded_blocks(values, SCALE_BLOCK, SCALE_BLOCK)).max(axis=(1, 3))
    scales = _scales_for(amax, "B")
    bits = encode_e4m3(values / _expand(scales, SCALE_BLOCK, SCALE_BLOCK, (N, K)))
    return bits, scales


def dequantize_blocks_128x128(bits: Any, scales: Any) -> Any:
    """The inverse of quantize_blocks_128x128: decode(bits) · its tile's scale, float64 (exact)."""
    bits = _as_bits(bits, "B bits")
    _check_matrix(bits, "B bits", "N×K, K contiguous")
    N, K = bits.shape
    scales = _check_scales(scales, (math.ceil(N / SCALE_BLOCK), math.ceil(K / SCALE_BLOCK)), "B scales",
                           f"one per 128×128 tile of a {N}×{K} matrix", like=bits)
    return decode_e4m3(bits).astype(np.float64) * _expand(scales, SCALE_BLOCK, SCALE_BLOCK, (N, K))


def _check_scales(scales: Any, shape: Tuple[int, ...], name: str, what: str, like: Any) -> Any:
    """scales as float32 of the expected shape, every one finite and positive, in the same
    module (NumPy or CuPy) as the array `like`, so that they can multiply it."""
    xp = _array_module(like)
    if xp is np and _array_module(scales) is not np:
        scales = scales.get()  # CuPy scales with NumPy bits: bring them to the host
    scales = xp.asarray(scales)
    if scales.shape != shape:
        raise ValueError(_bilingual(f"{name} has shape {scales.shape}, but needs {shape}: {what}",
                                    f"{name} 的形状是 {scales.shape}，应为 {shape}"))
    if scales.dtype.kind not in "fiu" or not bool(xp.all(xp.isfinite(scales) & (scales > 0))):
        raise ValueError(_bilingual(f"{name} must be finite positive numbers (what quantize_* returns)",
                                    f"{name} 必须是有限的正数（即 quantize_* 的返回值）"))
    return scales.astype(np.float32)


# --- the reference product ------------------------------------------------------------------------

def reference_gemm_fp8(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any) -> Any:
    """C = A · Bᵀ of the dequantised inputs (A: M×K in 1×128 strips, B: N×K in 128×128 tiles), float64.

    This is the answer an FP8 kernel is checked against. It is computed the way a block-scaled
    kernel is built, one 128-wide K strip at a time, which makes the strip products exact:

        C = Σ over strips k of  sA[:, k] · sB[:, k]ᵀ  ∘  (decode(A)[:, strip k] · decode(B)[:, strip k]ᵀ)
                                 (the scales)              (pure e4m3 products: exact in float64)

    Why exact: every e4m3 value is an integer times 2^-9 (up to 448 = 229376 · 2^-9), so a product
    is an integer times 2^-18 and a 128-term sum stays below 2^43 such units: within float64's 53
    bits, whatever order BLAS adds in. Only the ceil(K/128) scaled sums round, each by 2^-53, far
    below any FP8 kernel's own error. NaN bit patterns give NaN, as they would on the GPU.
    CuPy inputs are multiplied on the GPU, NumPy inputs on the CPU.
    """
    a_bits = _as_bits(a_bits, "A bits")
    b_bits = _as_bits(b_bits, "B bits")
    _check_matrix(a_bits, "A bits", "M×K")
    _check_matrix(b_bits, "B bits", "N×K, K contiguous")
    if _array_module(a_bits) is not _array_module(b_bits):
        raise ValueError(_bilingual("A bits and B bits must live in the same place: both NumPy or both CuPy arrays",
                                    "A 和 B 的位模式必须在同一处：都是 NumPy 数组或都是 CuPy 数组"))
    (M, K), (N, K_b) = a_bits.shape, b_bits.shape
    if K != K_b:
        raise ValueError(_bilingual(
            f"A is {M}×{K} but B is {N}×{K_b}: B is stored N×K (K contiguous), so both need the same K",
            f"A 是 {M}×{K}，B 是 {N}×{K_b}：B 按 N×K 存放（K 连续），两者的 K 必须相同"))
    strips = math.ceil(K / SCALE_BLOCK)
    a_scales = _check_scales(a_scales, (M, strips), "A scales", f"one per row per 128-wide strip of a {M}×{K} A",
                             like=a_bits)
    b_scales = _check_scales(b_scales, (math.ceil(N / SCALE_BLOCK), strips), "B scales",
                             f"one per 128×128 tile of a {N}×{K} B", like=a_bits)
    xp = _array_module(a_bits)
    A = decode_e4m3(a_bits).astype(np.float64)
    B = decode_e4m3(b_bits).astype(np.float64)
    C = xp.zeros((M, N), dtype=np.float64)
    for k in range(strips):
        strip = slice(k * SCALE_BLOCK, min(K, (k + 1) * SCALE_BLOCK))
        exact = A[:, strip] @ B[:, strip].T
        row_scale = a_scales[:, k].astype(np.float64)[:, None]
        col_scale = xp.repeat(b_scales[:, k].astype(np.float64), SCALE_BLOCK)[:N][None, :]
        C += (row_scale * col_scale) * exact  # sA·sB is exact too: 24-bit times 24-bit significands
    return C
