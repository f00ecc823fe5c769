"""FP8 e4m3 on the CPU: the decode table, rounding (ties to even, saturation, subnormals), block
scales (per tensor, 1×128, 128×128) and the reference product an FP8 kernel is checked against.
NumPy only, no GPU; a few seconds.

    python -m pytest -q tests/test_fp8.py -p no:cacheprovider
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from gemm_course.fp8 import formats as fp8

CODES = np.arange(256, dtype=np.uint8)
FINITE = CODES[(CODES & 0x7F) != 0x7F]          # 254 patterns: everything but the two NaNs
POSITIVE = np.arange(0x7F, dtype=np.uint8)      # 0x00 ... 0x7E: +0 up to 448


def value_by_definition(code: int) -> float:
    """Independent of the module's table: significand as an integer, then one ldexp."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0:
        return sign * math.ldexp(mantissa, -9)            # 0.MMM · 2^-6
    return sign * math.ldexp(8 + mantissa, exponent - 10)  # 1.MMM · 2^(E-7)


# --- the decode table --------------------------------------------------------------------------

def test_decode_matches_the_format_definition():
    decoded = fp8.decode_e4m3(FINITE)
    assert decoded.dtype == np.float32
    assert [float(v) for v in decoded] == [value_by_definition(int(c)) for c in FINITE]


def test_decode_table_properties():
    table = fp8.decode_e4m3(CODES)
    positive = table[:0x7F]
    assert np.all(np.diff(positive) > 0), "non-negative values must increase with the bit pattern"
    assert np.array_equal(table[0x80:0xFF], -positive)            # the sign bit only flips the sign
    assert table[0x7E] == fp8.E4M3_MAX == 448.0 and np.nanmax(table) == 448.0
    assert table[0x01] == fp8.E4M3_MIN_SUBNORMAL == 2.0 ** -9     # smallest positive value
    assert table[0x07] == 7 * 2.0 ** -9                            # largest subnormal
    assert table[0x08] == fp8.E4M3_MIN_NORMAL == 2.0 ** -6         # smallest normal
    assert table[0x38] == 1.0 and table[0x77] == 240.0
    assert list(CODES[np.isnan(table)]) == [0x7F, 0xFF]            # exactly the two NaN patterns
    assert table[0x80] == 0.0 and np.signbit(table[0x80])           # 0x80 is -0.0
    assert not np.isinf(table).any()                                # e4m3 has no infinities
    with pytest.raises(ValueError):
        fp8.E4M3_VALUES[0] = 1.0                                     # the shared table is read-only


# --- encode: rounding ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_encode_round_trips_every_finite_pattern(dtype):
    values = fp8.decode_e4m3(FINITE).astype(dtype)
    bits = fp8.encode_e4m3(values)
    assert bits.dtype == np.uint8
    assert np.array_equal(bits, FINITE)  # -0.0 included: it comes back as 0x80


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_every_midpoint_rounds_to_the_even_neighbour(sign):
    lower = fp8.decode_e4m3(POSITIVE[:-1]).astype(np.float32)
    upper = fp8.decode_e4m3(POSITIVE[1:]).astype(np.float32)
    midpoint = (lower + upper) / 2  # 5 significant bits: exact in float32
    assert np.array_equal(midpoint.astype(np.float64), (lower.astype(np.float64) + upper) / 2)
    even = np.where(POSITIVE[:-1] % 2 == 0, POSITIVE[:-1], POSITIVE[1:])
    sign_bit = np.uint8(0x80 if sign < 0 else 0)
    assert np.array_equal(fp8.encode_e4m3(sign * midpoint), even | sign_bit)
    # One float32 step either side of a midpoint is no longer a tie.
    above = np.nextafter(midpoint, np.float32(np.inf))
    below = np.nextafter(midpoint, np.float32(0))
    assert np.array_equal(fp8.encode_e4m3(sign * above), POSITIVE[1:] | sign_bit)
    assert np.array_equal(fp8.encode_e4m3(sign * below), POSITIVE[:-1] | sign_bit)


def test_ties_to_even_across_a_binade_and_into_the_normals():
    encode = lambda v: int(fp8.encode_e4m3(np.float32(v)))  # noqa: E731
    assert encode(1.0625) == 0x38        # between 1.0 (0x38, even) and 1.125 (0x39)
    assert encode(1.1875) == 0x3A        # between 1.125 (0x39) and 1.25 (0x3A, even)
    assert encode(0.96875) == 0x38       # between 0.9375 (0x37) and 1.0 (0x38): up a binade
    assert encode(7.5 * 2 ** -9) == 0x08  # largest subnormal and smallest normal: the normal is even
    assert encode(432.0) == 0x7E         # between 416 (0x7D) and 448 (0x7E, even)


def test_encode_matches_brute_force_nearest_value():
    """Random float32 values over the whole range against "the nearest value; on a tie, the
    even bit pattern; beyond 448, 448", found by comparing with all 127 candidates."""
    rng = np.random.default_rng(1)
    magnitude = np.exp2(rng.uniform(-12, 10, 40_000)).astype(np.float32)
    x = np.where(rng.random(magnitude.size) < 0.5, -magnitude, magnitude)
    candidates = fp8.decode_e4m3(POSITIVE).astype(np.float64)
    distance = np.abs(np.abs(x.astype(np.float64))[:, None] - candidates[None, :])
    best = distance.min(axis=1, keepdims=True)
    ties = distance == best
    # Among the nearest candidates, prefer an even pattern (only ties have two).
    choice = np.where(ties & (POSITIVE % 2 == 0)[None, :], 2, ties.astype(int)).argmax(axis=1)
    expected = POSITIVE[choice] | np.where(x < 0, 0x80, 0).astype(np.uint8)
    assert np.array_equal(fp8.encode_e4m3(x), expected)


def test_satfinite_clamps_to_448_instead_of_nan():
    big = np.array([448.0, 448.5, 463.99, 464.0, 465.0, 1e4, 1e30, np.finfo(np.float32).max, np.inf])
    assert list(fp8.encode_e4m3(big)) == [0x7E] * big.size
    assert list(fp8.encode_e4m3(-big)) == [0xFE] * big.size
    assert list(fp8.encode_e4m3(np.array([1e300, -1e300]))) == [0x7E, 0xFE]  # float64 too


def test_subnormal_rounding():
    step = 2.0 ** -9  # the subnormal spacing
    values = np.array([1e-30, 0.5 * step, 0.5000001 * step, step, 1.5 * step, 2.5 * step, 6.5 * step,
                       6.75 * step, 7.0 * step], dtype=np.float64)
    # 0.5 step is a tie between 0 (even) and 0x01; 1.5 → 2 (even), 2.5 → 2 (even), 6.5 → 6 (even)
    assert list(fp8.encode_e4m3(values)) == [0x00, 0x00, 0x01, 0x01, 0x02, 0x02, 0x06, 0x07, 0x07]
    assert list(fp8.encode_e4m3(-values)) == [0x80, 0x80, 0x81, 0x81, 0x82, 0x82, 0x86, 0x87, 0x87]


def test_nan_and_signed_zero():
    x = np.array([np.nan, -np.nan, 0.0, -0.0], dtype=np.float32)
    assert list(fp8.encode_e4m3(x)) == [0x7F, 0x7F, 0x00, 0x80]
    assert int(fp8.encode_e4m3(np.float64(-0.0))) == 0x80


def test_float64_input_is_rounded_once():
    """Just above the 1.0 | 1.125 midpoint in float64 rounds up; the same number rounded to
    float32 first lands on the midpoint and then goes to the even 1.0 (double rounding)."""
    x = 1.0625 * (1 + 2.0 ** -40)
    assert int(fp8.encode_e4m3(np.float64(x))) == 0x39
    assert int(fp8.encode_e4m3(np.float32(x))) == 0x38


def test_encode_accepts_lists_and_keeps_the_shape():
    bits = fp8.encode_e4m3([[1.0, -2.0], [0.5, 448.0]])
    assert bits.shape == (2, 2) and bits.dtype == np.uint8
    assert np.array_equal(fp8.decode_e4m3(bits), [[1.0, -2.0], [0.5, 448.0]])


# --- quantisation with scales ----------------------------------------------------------------------

def _rows(a):
    bits, scales = fp8.quantize_rows_1x128(a)
    return bits, scales, fp8.dequantize_rows_1x128(bits, scales), np.repeat(scales, 128, axis=1)[:, :a.shape[1]]


def _blocks(b):
    bits, scales = fp8.quantize_blocks_128x128(b)
    expanded = np.repeat(np.repeat(scales, 128, axis=0), 128, axis=1)[:b.shape[0], :b.shape[1]]
    return bits, scales, fp8.dequantize_blocks_128x128(bits, scales), expanded


def _tensor(x):
    bits, scale = fp8.quantize_per_tensor(x)
    return bits, scale, fp8.dequantize_per_tensor(bits, scale), np.full(x.shape, scale)


SCHEMES = {"per_tensor": _tensor, "rows_1x128": _rows, "blocks_128x128": _blocks}
SHAPES = [(1, 1), (3, 300), (130, 257), (5, 128), (129, 1)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_quantisation_error_bound(scheme, shape):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape) * np.exp2(rng.uniform(-8, 8, shape))  # 16 binades of magnitudes
    bits, _, back, scale = SCHEMES[scheme](x)
    assert bits.shape == x.shape and bits.dtype == np.uint8 and back.dtype == np.float64
    scaled = np.abs(x) / scale
    normal = scaled >= fp8.E4M3_MIN_NORMAL
    # Three significant bits: half a unit in the last place is 2^-4 of the value, at most.
    relative = np.abs(back - x)[normal] / np.abs(x)[normal]
    assert relative.max() <= 2.0 ** -4 * (1 + 1e-12)
    # Below the normals the spacing is 2^-9 · scale, so the error is at most half of that.
    assert np.all(np.abs(back - x)[~normal] <= 2.0 ** -10 * scale[~normal] * (1 + 1e-12))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_each_blocks_largest_value_lands_on_448(scheme):
    x = np.random.default_rng(3).standard_normal((200, 300))
    bits, _, _, _ = SCHEMES[scheme](x)
    magnitude = np.abs(fp8.decode_e4m3(bits))
    if scheme == "per_tensor":
        assert magnitude.max() == 448.0
    elif scheme == "rows_1x128":
        for k in range(0, 300, 128):
            assert np.all(magnitude[:, k:k + 128].max(axis=1) == 448.0)
    else:
        for n in range(0, 200, 128):
            for k in range(0, 300, 128):
                assert magnitude[n:n + 128, k:k + 128].max() == 448.0


def test_scale_shapes_and_the_shorter_last_strip():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((7, 300))  # strips of 128, 128 and 44 columns
    _, scales = fp8.quantize_rows_1x128(a)
    assert scales.shape == (7, 3) and scales.dtype == np.float32
    assert np.array_equal(scales[:, 2], (np.abs(a[:, 256:]).max(axis=1) / 448).astype(np.float32))
    b = rng.standard_normal((130, 300))  # tiles: 2 rows (128, 2) by 3 columns (128, 128, 44)
    _, scales = fp8.quantize_blocks_128x128(b)
    assert scales.shape == (2, 3) and scales.dtype == np.float32
    assert scales[1, 2] == np.float32(np.abs(b[128:, 256:]).max() / 448)


def test_all_zero_blocks_get_scale_one():
    a = np.zeros((4, 300))
    a[1, 130] = -7.0  # scale 7/448 = 2^-6, so the value comes back exactly
    bits, scales = fp8.quantize_rows_1x128(a)
    expected = np.ones((4, 3), dtype=np.float32)
    expected[1, 1] = 2.0 ** -6
    assert np.array_equal(scales, expected)
    assert np.array_equal(fp8.dequantize_rows_1x128(bits, scales), a)  # zeros stay exact zeros
    bits, scales = fp8.quantize_blocks_128x128(np.zeros((129, 5)))
    assert np.array_equal(scales, np.ones((2, 1), dtype=np.float32)) and not bits.any()
    bits, scale = fp8.quantize_per_tensor(np.zeros(10))
    assert scale == 1.0 and not bits.any()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_quantising_dequantised_values_changes_nothing(scheme):
    x = np.random.default_rng(5).standard_normal((130, 257))
    bits, scales, back, _ = SCHEMES[scheme](x)
    bits_again, scales_again, _, _ = SCHEMES[scheme](back)
    assert np.array_equal(bits_again, bits) and np.array_equal(scales_again, scales)


def test_bfloat16_bits_are_quantised_as_their_values():
    from gemm_course.run.dtypes import to_bfloat16, to_float64

    a = to_bfloat16(np.random.default_rng(6).standard_normal((3, 200)).astype(np.float32))
    bits, scales = fp8.quantize_rows_1x128(a)
    bits_f, scales_f = fp8.quantize_rows_1x128(to_float64(a))
    assert np.array_equal(bits, bits_f) and np.array_equal(scales, scales_f)


def test_fine_grained_scales_survive_outlier_channels():
    """A few activation channels (columns of A) 10^5 times larger than the rest, as in LLM
    activations. One scale for the whole tensor pushes every ordinary value into the subnormals
    (or to zero); 1×128 strips confine the damage to the strips that hold an outlier."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 512))
    outliers = [5, 300]  # in strips 0 and 2; strips 1 and 3 are clean
    a[:, outliers] *= 1e5
    ordinary = np.ones(a.shape, dtype=bool)
    ordinary[:, outliers] = False

    def error(back):  # relative error on the ordinary values, which the outliers must not ruin
        return np.linalg.norm((back - a)[ordinary]) / np.linalg.norm(a[ordinary])

    coarse = fp8.dequantize_per_tensor(*fp8.quantize_per_tensor(a))
    fine = fp8.dequantize_rows_1x128(*fp8.quantize_rows_1x128(a))
    assert error(coarse) > 0.2 and (coarse[ordinary] == 0).mean() > 0.3  # a third rounded to 0
    assert error(fine) < error(coarse) / 3  # the strips holding an outlier still suffer
    clean = np.r_[128:256, 384:512]
    clean_error = np.linalg.norm(fine[:, clean] - a[:, clean]) / np.linalg.norm(a[:, clean])
    assert clean_error < 0.04  # the clean strips keep e4m3's usual few per cent


# --- the reference product -------------------------------------------------------------------------

def _operands(M: int, N: int, K: int, seed: int = 8):
    rng = np.random.default_rng(seed)
    a_bits, a_scales = fp8.quantize_rows_1x128(rng.standard_normal((M, K)) * rng.uniform(0.1, 10, (M, 1)))
    b_bits, b_scales = fp8.quantize_blocks_128x128(rng.standard_normal((N, K)) * rng.uniform(0.1, 10, (N, 1)))
    return a_bits, a_scales, b_bits, b_scales


@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (5, 7, 128), (33, 130, 300), (64, 256, 1000)])
def test_reference_gemm_matches_float64_of_the_dequantised_inputs(M, N, K):
    a_bits, a_scales, b_bits, b_scales = _operands(M, N, K)
    C = fp8.reference_gemm_fp8(a_bits, a_scales, b_bits, b_scales)
    assert C.shape == (M, N) and C.dtype == np.float64
    A = fp8.dequantize_rows_1x128(a_bits, a_scales)
    B = fp8.dequantize_blocks_128x128(b_bits, b_scales)
    bound = 1e-13 * (np.abs(A) @ np.abs(B).T)  # float64 rounding of either order, far above 2^-52·K
    assert np.all(np.abs(C - A @ B.T) <= bound)


def test_reference_gemm_is_exact_up_to_float64_rounding_of_the_strip_sums():
    """Against exact rational arithmetic: 3 strips (the last of 44), 2 tile rows of B."""
    M, N, K = 2, 130, 300
    a_bits, a_scales, b_bits, b_scales = _operands(M, N, K, seed=9)
    C = fp8.reference_gemm_fp8(a_bits, a_scales, b_bits, b_scales)
    A = fp8.dequantize_rows_1x128(a_bits, a_scales)  # exact values (checked in the tests above)
    B = fp8.dequantize_blocks_128x128(b_bits, b_scales)
    for m in range(M):
        for n in (0, 127, 128, 129):  # both tile rows of B
            exact = sum(Fraction(A[m, k]) * Fraction(B[n, k]) for k in range(K))
            magnitude = float(np.abs(A[m]) @ np.abs(B[n]))
            strips = math.ceil(K / 128)
            assert abs(Fraction(C[m, n]) - exact) <= Fraction(2 * strips * 2.0 ** -53 * magnitude)


def test_reference_gemm_nan_bits_give_nan():
    a_bits, a_scales, b_bits, b_scales = _operands(4, 4, 130)
    a_bits[1, 129] = fp8.E4M3_NAN
    C = fp8.reference_gemm_fp8(a_bits, a_scales, b_bits, b_scales)
    assert np.isnan(C[1]).all() and np.isfinite(np.delete(C, 1, axis=0)).all()


# --- bad input: one line, both languages, what to change ----------------------------------------------

def _bad_calls():
    a_bits, a_scales, b_bits, b_scales = _operands(3, 4, 200)
    nan_matrix = np.ones((3, 3))
    nan_matrix[1, 1] = np.nan
    return [
        ("1-d A", lambda: fp8.quantize_rows_1x128(np.ones(5)), "2-D matrix"),
        ("3-d B", lambda: fp8.quantize_blocks_128x128(np.ones((2, 2, 2))), "2-D matrix"),
        ("NaN", lambda: fp8.quantize_rows_1x128(nan_matrix), "non-finite"),
        ("inf", lambda: fp8.quantize_per_tensor(np.array([1.0, np.inf])), "non-finite"),
        ("complex", lambda: fp8.quantize_per_tensor(np.ones(3, dtype=complex)), "real numbers"),
        ("bool", lambda: fp8.quantize_blocks_128x128(np.ones((2, 2), dtype=bool)), "real numbers"),
        ("bits again", lambda: fp8.quantize_rows_1x128(a_bits), "e4m3 bits already"),
        ("too large", lambda: fp8.quantize_per_tensor(np.array([1e300])), "float32"),
        ("float bits", lambda: fp8.decode_e4m3(np.ones(3)), "uint8"),
        ("bits > 255", lambda: fp8.decode_e4m3(np.array([256])), "uint8"),
        ("scales shape", lambda: fp8.dequantize_rows_1x128(a_bits, a_scales.T), "needs (3, 2)"),
        ("scales zero", lambda: fp8.dequantize_blocks_128x128(b_bits, 0 * b_scales), "finite positive"),
        ("scale NaN", lambda: fp8.dequantize_per_tensor(a_bits, np.nan), "finite positive"),
        ("K differs", lambda: fp8.reference_gemm_fp8(a_bits, a_scales, b_bits[:, :100], b_scales[:, :1]),
         "same K"),
        ("B scales", lambda: fp8.reference_gemm_fp8(a_bits, a_scales, b_bits, a_scales), "needs (1, 2)"),
        ("complex encode", lambda: fp8.encode_e4m3(np.ones(2, dtype=complex)), "real numbers"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())))
def test_bad_input_says_what_to_change(case):
    label, call, words = _bad_calls()[case]
    with pytest.raises(ValueError) as caught:
        call()
    message = str(caught.value)
    assert words in message, label
    assert "\n" not in message and " / " in message, label          # one line, English / 中文
    assert any("\u4e00" <= ch <= "\u9fff" for ch in message), label  # the Chinese half is there


def test_the_module_imports_without_cupy():
    """NumPy inputs never touch CuPy: the module must load on a machine without a GPU."""
    import subprocess
    import sys

    code = "import sys, gemm_course.fp8.formats as f; f.reference_gemm_fp8(*f.quantize_rows_1x128([[1.0]]), " \
           "*f.quantize_blocks_128x128([[2.0]])); print('cupy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
