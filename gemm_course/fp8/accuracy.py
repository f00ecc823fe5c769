"""How accurate is an FP8 GEMM? Two studies for Level 13, and the figures that show them.

An FP8 GEMM loses accuracy in two separate places, and this module measures each on its own:

1. **Quantisation** (before the GEMM): each input is divided by a scale and rounded to e4m3. One
   scale for a whole tensor is set by its single largest value; LLM activations have a few *outlier
   channels* (columns of A that are 100×, 1000× or more larger than the rest), and under one shared
   scale every ordinary value is pushed down the e4m3 number line, into the subnormals (fewer bits)
   or all the way to zero. :func:`outlier_study` compares three ways to choose scales (CPU, NumPy):

       per tensor        row-wise (cuBLASLt on Hopper)      fine-grained (Level 13)
       one scale         one per row of A, one per row of B  1×128 strips of A, 128×128 tiles of B
       +-----------+     +-----------+                       +--+--+--+--+
       |     s     |     |    s0     |                       |s |s |s |s |   an outlier channel
       |           |     |    s1     |                       +--+--+--+--+   only coarsens the
       |           |     |    ...    |                       |s |s |s |s |   strips it lies in
       +-----------+     +-----------+                       +--+--+--+--+

2. **Accumulation** (inside the GEMM): Hopper's Tensor Cores add FP8 products into their fp32
   accumulator keeping only about 13-14 fraction bits and dropping the rest (truncation, towards
   zero). Over a long K those small losses pile up. The fix Level 13's blockwise kernel uses is
   *promotion*: every 128 of k, the Tensor Core's partial sum is added into a true fp32 register by
   the CUDA cores, and the Tensor Core starts again from zero:

       no promotion:  acc ← trunc(acc + Σ 32 products)   for all K/32 instructions      error grows with K
       promotion:     part ← trunc(part + Σ 32 products) for 4 instructions (k = 128)
                      acc  ← acc + part  (fp32, round to nearest); part ← 0             error stays flat

   :func:`promotion_study` runs both kernels of Level 13 on the *same bytes* (per-tensor scales, so
   there is no quantisation difference between them) against the exact float64 product of those
   bytes, beside :func:`simulate_truncated_accumulation`, a NumPy model of the truncating
   accumulator, and beside the floor that rounding C to bf16 alone sets.

:func:`record_accuracy` records both studies into a result file (GPU); :func:`recorded_accuracy`
reads them back, and :func:`promotion_figure` / :func:`outlier_figure` draw them (no GPU needed).
Run ``python -m gemm_course fp8 --accuracy --out FILE`` on a Hopper GPU to record.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from gemm_course import device
from gemm_course.fp8.formats import E4M3_MAX, _array_module, _bilingual

OUTLIER_SCALINGS = ("per_tensor", "row_wise", "fine_grained")
INPUT_KINDS = ("normal", "positive")
DEFAULT_KS = tuple(512 * 2 ** i for i in range(8))            # 512, 1024, ..., 65536
DEFAULT_MAGNITUDES = (1, 10, 100, 1_000, 10_000, 100_000)
DEFAULT_FRACTION_BITS = (13, 14)
WGMMA_K = 32               # k of one FP8 wgmma instruction: its 32 products are summed together
PROMOTION_K = 128          # the blockwise kernel promotes into fp32 every 128 of k
K_MULTIPLE = 16            # what the FP8 kernels accept (TMA copies rows of 16-byte chunks)
RELATIVE_FLOOR = 1e-2      # max_rel and bias count elements with |ref| > 1 % of rms(ref)

_SCALING_LABELS = {
    "per_tensor": "per tensor · 逐张量",
    "row_wise": "row-wise · 逐行",
    "fine_grained": "fine-grained 1×128 / 128×128 · 细粒度",
}
_OUTLIER_METRICS = {
    "rel_fro": "whole product C · 整个乘积 C",
    "rest_rel_fro": "ordinary channels' part of C · C 中普通通道的部分",
    "median_row_rel": "median row of C · C 的中位行",
    "a_underflow_fraction": "A's entries flushed to 0 · A 中被清零的元素",
    "a_subnormal_fraction": "A's entries stored as subnormals · A 中落入次正规数的元素",
}
_PROMOTION_METRICS = {
    "rel_fro": "relative error ‖C − ref‖ / ‖ref‖ · 相对误差",
    "max_rel": "max |C − ref| / |ref| · 最大相对误差",
    "bias": "mean (C − ref) / ref (bias) · 平均有符号相对误差（偏差）",
    "max_err_over_magnitude": "max |C − ref| / Σ|a·b| · 最大误差 / Σ|a·b|",
}


# --- checks --------------------------------------------------------------------------------------

def _check_kind(kind: str) -> None:
    if kind not in INPUT_KINDS:
        raise ValueError(_bilingual(
            f"kind must be one of {', '.join(map(repr, INPUT_KINDS))}, not {kind!r}",
            f"kind 只能是 {', '.join(map(repr, INPUT_KINDS))} 之一，而不是 {kind!r}"))


def _check_scaling(scaling: str) -> None:
    if scaling not in OUTLIER_SCALINGS:
        raise ValueError(_bilingual(
            f"scaling must be one of {', '.join(map(repr, OUTLIER_SCALINGS))}, not {scaling!r}",
            f"scaling 只能是 {', '.join(map(repr, OUTLIER_SCALINGS))} 之一，而不是 {scaling!r}"))


def _check_Ks(Ks: Iterable[Any]) -> list[int]:
    Ks = list(Ks)
    if not Ks:
        raise ValueError(_bilingual("Ks is empty: give at least one K, e.g. Ks=(512, 1024)",
                                    "Ks 为空：至少给一个 K，例如 Ks=(512, 1024)"))
    for K in Ks:
        if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < K_MULTIPLE or K % K_MULTIPLE:
            raise ValueError(_bilingual(
                f"K={K!r}: each K must be a whole number ≥ {K_MULTIPLE} and a multiple of {K_MULTIPLE} "
                "(the FP8 kernels copy rows of 16-byte chunks), e.g. 512, 1024, …",
                f"K={K!r}：每个 K 必须是 ≥ {K_MULTIPLE} 且为 {K_MULTIPLE} 的倍数的整数（FP8 内核按 16 字节块拷贝行），"
                "例如 512、1024……"))
    return [int(K) for K in Ks]


def _check_size(name: str, value: Any, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(_bilingual(f"{name}={value!r} must be a whole number ≥ {least}",
                                    f"{name}={value!r} 必须是 ≥ {least} 的整数"))
    return int(value)


# --- 1. quantisation: outlier channels -----------------------------------------------------------

def quantize_dequantize(x: Any, scaling: str, operand: str = "A") -> tuple[Any, Any]:
    """x rounded to FP8 with scales of one kind, and back: (dequantised values float64, e4m3 bits).

    scaling: "per_tensor" (one scale), "row_wise" (one scale per row: per row of A, and per row of
    B stored N×K, i.e. per output column) or "fine_grained" (1×128 strips for operand "A", 128×128
    tiles for operand "B", as Level 13's blockwise kernel reads them). Each scale maps its block's
    max |x| onto 448, the largest e4m3 value.
    """
    from gemm_course.fp8 import formats as fp8

    _check_scaling(scaling)
    if operand not in ("A", "B"):
        raise ValueError(_bilingual(f"operand must be 'A' (M×K) or 'B' (N×K), not {operand!r}",
                                    f"operand 只能是 'A'（M×K）或 'B'（N×K），而不是 {operand!r}"))
    if scaling == "per_tensor":
        bits, scale = fp8.quantize_per_tensor(x)
        return fp8.dequantize_per_tensor(bits, scale), bits
    if scaling == "row_wise":
        values = np.asarray(x, dtype=np.float64)
        if values.ndim != 2:
            raise ValueError(_bilingual(f"{operand} must be a 2-D matrix, but it has {values.ndim} dimension(s)",
                                        f"{operand} 必须是二维矩阵，但它有 {values.ndim} 维"))
        amax = np.abs(values).max(axis=1)
        scales = np.where(amax == 0, 1.0, amax / E4M3_MAX).astype(np.float32).astype(np.float64)[:, None]
        bits = fp8.encode_e4m3(values / scales)
        return fp8.decode_e4m3(bits).astype(np.float64) * scales, bits
    if operand == "A":
        bits, scales = fp8.quantize_rows_1x128(x)
        return fp8.dequantize_rows_1x128(bits, scales), bits
    bits, scales = fp8.quantize_blocks_128x128(x)
    return fp8.dequantize_blocks_128x128(bits, scales), bits


def outlier_study(M: int = 256, N: int = 256, K: int = 1024,
                  magnitudes: Sequence[float] = DEFAULT_MAGNITUDES, outlier_channels: int = 2,
                  seed: int = 0) -> list[dict[str, Any]]:
    """Quantisation error of A·Bᵀ under three scalings as a few channels of A grow large (CPU, NumPy).

    A (M×K, "activations") and B (N×K, "weights") are standard normal; `outlier_channels` columns
    of A, chosen at random, are multiplied by each magnitude in turn (1 = no outliers). Both inputs
    are quantised with each scaling of OUTLIER_SCALINGS, dequantised, and multiplied exactly in
    float64; the result is compared with the float64 product of the unquantised inputs. Only
    quantisation is measured here: no accumulation, no output rounding.

    One row per (magnitude, scaling), deterministic for a seed:
    - rel_fro: ‖Ĉ − C‖_F / ‖C‖_F for the whole product. The outlier channels dominate C at large
      magnitudes, so this number hides what happens to everything else;
    - rest_rel_fro: the same for the part of C that the ordinary (non-outlier) channels contribute:
      the signal that one shared scale squashes;
    - median_row_rel: the median over rows i of ‖Ĉ_i − C_i‖ / ‖C_i‖;
    - a_underflow_fraction: A's non-zero entries that became 0 (below half of e4m3's smallest
      subnormal, 2^-9, after division by the scale) — the mechanism, made visible;
    - a_subnormal_fraction: A's entries stored as subnormals (|value| < 2^-6 after scaling), which keep
      fewer than e4m3's 3 mantissa bits.
    """
    M, N, K = (_check_size(n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    outlier_channels = _check_size("outlier_channels", outlier_channels, 0)
    if outlier_channels >= K:
        raise ValueError(_bilingual(f"outlier_channels={outlier_channels} must be smaller than K={K}",
                                    f"outlier_channels={outlier_channels} 必须小于 K={K}"))
    for m in magnitudes:
        if not (isinstance(m, (int, float, np.integer, np.floating)) and math.isfinite(m) and m > 0):
            raise ValueError(_bilingual(f"each outlier magnitude must be a finite number > 0, not {m!r}",
                                        f"每个离群值倍数都必须是有限的正数，而不是 {m!r}"))
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((M, K))
    B = rng.standard_normal((N, K))
    channels = np.sort(rng.choice(K, outlier_channels, replace=False))
    ordinary = np.ones(K, dtype=bool)
    ordinary[channels] = False
    B_hat = {s: quantize_dequantize(B, s, "B")[0] for s in OUTLIER_SCALINGS}  # B has no outliers
    rows: list[dict[str, Any]] = []
    for magnitude in magnitudes:
        A = base.copy()
        A[:, channels] *= float(magnitude)
        C = A @ B.T
        C_rest = A[:, ordinary] @ B[:, ordinary].T
        for scaling in OUTLIER_SCALINGS:
            A_hat, a_bits = quantize_dequantize(A, scaling, "A")
            C_hat = A_hat @ B_hat[scaling].T
            C_hat_rest = A_hat[:, ordinary] @ B_hat[scaling][:, ordinary].T
            row_err = np.linalg.norm(C_hat - C, axis=1) / np.linalg.norm(C, axis=1)
            stored = a_bits & 0x7F  # magnitude bits: 0 is ±0, 1...7 the subnormals
            rows.append({
                "magnitude": float(magnitude), "scaling": scaling, "M": M, "N": N, "K": K,
                "outlier_channels": outlier_channels, "seed": seed,
                "rel_fro": float(np.linalg.norm(C_hat - C) / np.linalg.norm(C)),
                "rest_rel_fro": float(np.linalg.norm(C_hat_rest - C_rest) / np.linalg.norm(C_rest)),
                "median_row_rel": float(np.median(row_err)),
                "a_underflow_fraction": float(np.mean((stored == 0) & (A != 0))),
                "a_subnormal_fraction": float(np.mean((stored >= 1) & (stored <= 7))),
            })
    return rows


# --- 2. accumulation: the truncating accumulator and promotion ----------------------------------

def truncate_toward_zero(x: Any, fraction_bits: int) -> Any:
    """x with its significand cut to 1 + `fraction_bits` bits, dropping the rest (towards zero).

    frexp writes x = m · 2^e with 0.5 ≤ |m| < 1; keeping fraction_bits bits after the leading one
    is trunc(m · 2^(fraction_bits+1)) · 2^(e − fraction_bits − 1). Exact in float64 for
    fraction_bits ≤ 52 (52 keeps every bit: nothing changes). NumPy or CuPy arrays.
    """
    xp = _array_module(x)
    mantissa, exponent = xp.frexp(x)
    kept = xp.trunc(xp.ldexp(mantissa, fraction_bits + 1))
    return xp.ldexp(kept, exponent - (fraction_bits + 1))


def simulate_truncated_accumulation(a_vals: Any, b_vals: Any, fraction_bits: int, group: int = WGMMA_K,
                                    promote_every: Optional[int] = None) -> Any:
    """A model of a Tensor Core's FP8 accumulator: C = A · Bᵀ (A: M×K, B: N×K), float64 result.

    - the products of each k-group of `group` (one wgmma instruction: 32) are summed exactly;
    - each group sum is added into the running accumulator, and the sum is truncated towards zero
      to `fraction_bits` fraction bits (see truncate_toward_zero) after every add;
    - promote_every=None: one accumulator for all of K (Level 13's per_tensor kernel);
      promote_every=128: the truncating accumulator restarts from 0 every 128 of k and its value is
      added into a separate fp32 accumulator, rounded to nearest (Level 13's blockwise kernel).

    Pass e4m3 *values* (fp8.decode_e4m3 of the bits), without scales: every such product is an
    integer times 2^-18, so the group sums are exact in float64. Multiply by the scales afterwards.
    Vectorised over rows and columns: a loop over the K/group groups only. NumPy or CuPy arrays
    (CuPy runs on the GPU). With fraction_bits=52 and no promotion the model is exact float64
    summation, a check that it adds what it should.
    """
    xp = _array_module(a_vals)
    A = xp.asarray(a_vals, dtype=np.float64)
    B = xp.asarray(b_vals, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1]:
        raise ValueError(_bilingual(
            f"a_vals must be M×K and b_vals N×K with the same K, not {A.shape} and {B.shape}",
            f"a_vals 必须是 M×K，b_vals 必须是 N×K，且 K 相同，而不是 {A.shape} 和 {B.shape}"))
    group = _check_size("group", group)
    if isinstance(fraction_bits, bool) or not isinstance(fraction_bits, (int, np.integer)) \
            or not 1 <= fraction_bits <= 52:
        raise ValueError(_bilingual(f"fraction_bits={fraction_bits!r} must be a whole number from 1 to 52",
                                    f"fraction_bits={fraction_bits!r} 必须是 1 到 52 之间的整数"))
    fraction_bits = int(fraction_bits)
    groups_per_block = None
    if promote_every is not None:
        promote_every = _check_size("promote_every", promote_every)
        if promote_every % group:
            raise ValueError(_bilingual(
                f"promote_every={promote_every} must be a multiple of group={group}: promotion happens "
                "between instructions, never inside one",
                f"promote_every={promote_every} 必须是 group={group} 的倍数：累加提升发生在指令之间，而不在指令内部"))
        groups_per_block = promote_every // group
    (M, K), N = A.shape, B.shape[0]
    groups = max(1, math.ceil(K / group))
    pad = groups * group - K  # zero products change no sum
    if pad:
        A = xp.pad(A, ((0, 0), (0, pad)))
        B = xp.pad(B, ((0, 0), (0, pad)))
    A3 = A.reshape(M, groups, group)
    B3 = B.reshape(N, groups, group)
    chunk = max(1, (16 << 20) // (8 * max(1, M * N)))  # groups per batched matmul: ~16 MB of sums
    part = xp.zeros((M, N), dtype=np.float64)    # the Tensor Core's (truncating) accumulator
    total = xp.zeros((M, N), dtype=np.float32)   # the promoted fp32 accumulator (blockwise only)
    for start in range(0, groups, chunk):
        stop = min(groups, start + chunk)
        # (g, M, group) @ (g, group, N): each group's M×N sums of 32 products at once, exact.
        sums = xp.matmul(A3[:, start:stop].transpose(1, 0, 2), B3[:, start:stop].transpose(1, 2, 0))
        for i in range(stop - start):
            part = truncate_toward_zero(part + sums[i], fraction_bits)
            g = start + i
            if groups_per_block and ((g + 1) % groups_per_block == 0 or g == groups - 1):
                total = total + part.astype(np.float32)  # float32 + float32: rounded to nearest
                part = xp.zeros_like(part)
    return total.astype(np.float64) if groups_per_block else part


def accuracy_metrics(C: Any, reference: Any, magnitude: Any = None,
                     relative_floor: float = RELATIVE_FLOOR) -> dict[str, Any]:
    """How far C is from the reference (float64 arrays of one shape, NumPy or CuPy).

    - rel_fro: ‖C − ref‖_F / ‖ref‖_F;
    - max_rel: max |C − ref| / |ref| over elements with |ref| > relative_floor · rms(ref) (a
      zero-mean product has elements near 0, whose relative error says nothing);
    - bias: mean of (C − ref) / ref over the same elements: negative when C is pulled towards zero;
    - max_err_over_magnitude: max |C − ref| / Σ_k |a_k·b_k| (when `magnitude` is given): the error
      measured against the size of the terms the sum adds, the scale an accumulator rounds at;
    - nonfinite: how many elements of C are NaN or ±inf (a kernel that did not write them).
    """
    xp = _array_module(reference)
    C = xp.asarray(C, dtype=np.float64)
    ref = xp.asarray(reference, dtype=np.float64)
    finite = xp.isfinite(C)
    nonfinite = int(C.size - int(xp.count_nonzero(finite)))
    diff = C - ref
    norm = float(xp.linalg.norm(ref))
    rms = norm / math.sqrt(max(ref.size, 1))
    keep = xp.abs(ref) > relative_floor * rms
    rel = diff[keep] / ref[keep]
    out: dict[str, Any] = {
        "rel_fro": float(xp.linalg.norm(diff)) / norm if norm else float("nan"),
        "max_rel": float(xp.max(xp.abs(rel))) if rel.size else float("nan"),
        "bias": float(xp.mean(rel)) if rel.size else float("nan"),
        "nonfinite": nonfinite,
    }
    if magnitude is not None:
        mag = xp.asarray(magnitude, dtype=np.float64)
        tiny = np.finfo(np.float64).tiny
        out["max_err_over_magnitude"] = float(xp.max(xp.abs(diff) / (mag + tiny)))
    return out


def promotion_operands(M: int, N: int, K: int, kind: str = "normal", seed: int = 0,
                       xp: Any = np) -> tuple[Any, np.float32, Any, np.float32]:
    """(a_bits, a_scale, b_bits, b_scale): A (M×K) and B (N×K) quantised per tensor, never zero.

    kind "normal": standard normal values, products of both signs (sums cancel);
    kind "positive": |standard normal|, every product positive, so the accumulator only grows and
    a truncation's loss always has the same sign.
    The values come from NumPy's generator (the same for a seed wherever it runs); xp=cupy
    quantises on the GPU. An entry that rounds to ±0 is replaced by the smallest subnormal of its
    sign, so that every product is non-zero.
    """
    from gemm_course.fp8 import formats as fp8

    _check_kind(kind)
    M, N, K = (_check_size(n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    rng = np.random.default_rng([seed, K, INPUT_KINDS.index(kind)])
    out = []
    for rows in (M, N):
        values = rng.standard_normal((rows, K))
        if kind == "positive":
            values = np.abs(values)
        bits, scale = fp8.quantize_per_tensor(xp.asarray(values))
        bits = xp.where((bits & 0x7F) == 0, bits | np.uint8(1), bits).astype(np.uint8)
        out += [xp.ascontiguousarray(bits), scale]
    return out[0], out[1], out[2], out[3]


Measure = Callable[[Any, Any, Any, Any, str], Any]


def _course_kernels(a_bits: Any, a_scale: Any, b_bits: Any, b_scale: Any, scaling: str) -> Any:
    """Level 13's kernels on per-tensor operands: per_tensor as it is; blockwise with the two
    scales spread into its 1×128 / 128×128 layout (fp8_gemm.full_scales)."""
    from gemm_course.fp8.gemm import fp8_gemm, full_scales

    if scaling == "per_tensor":
        return fp8_gemm(a_bits, a_scale, b_bits, b_scale, scaling="per_tensor")
    (M, K), N = a_bits.shape, b_bits.shape[0]
    sa, sb = full_scales(a_scale, b_scale, M, N, K)
    return fp8_gemm(a_bits, sa, b_bits, sb, scaling="blockwise")


def promotion_study(Ks: Sequence[int] = DEFAULT_KS, M: int = 256, N: int = 256,
                    kinds: Sequence[str] = INPUT_KINDS,
                    fraction_bits: Sequence[int] = DEFAULT_FRACTION_BITS, seed: int = 0, *,
                    measured: bool = True, measure: Optional[Measure] = None,
                    progress: Optional[Callable[[str], None]] = print) -> list[dict[str, Any]]:
    """Accumulation error of Level 13's two kernels against K, beside a model and the bf16 floor.

    For each K and input kind (INPUT_KINDS), one set of per-tensor FP8 operands
    (promotion_operands) goes through:
    - kernel "fp8_gemm_per_tensor" (promotion False): the Tensor Cores accumulate all of K;
    - kernel "fp8_gemm_blockwise" (promotion True): the same bytes, promoted into fp32 every 128;
    - kernel "model" (one row per fraction_bits, with and without promotion):
      simulate_truncated_accumulation times the scales, rounded to bf16 like the kernels' C;
    - kernel "bf16_floor": the exact product rounded to bf16, the error no bf16 C can avoid.
    Each is compared (accuracy_metrics) with fp8.reference_gemm_fp8, the exact float64 product of
    the same dequantised bytes: quantisation error is left out, only accumulation and the bf16
    output remain. One row per (K, kind, kernel[, fraction_bits, promotion]).

    measured=False skips the GPU kernels (model and floor only: runs on the CPU, slowly for large K).
    measure: a function (a_bits, a_scale, b_bits, b_scale, scaling) → C as bf16 bits, in place of
    the course's kernels (e.g. another library's FP8 GEMM); by default Level 13's kernels, which
    need a Hopper GPU. Arrays are CuPy where a GPU is visible, NumPy otherwise.
    """
    from gemm_course.fp8 import formats as fp8
    from gemm_course.run.dtypes import to_bfloat16, to_float64
    from gemm_course.fp8.gemm import full_scales, magnitude_gemm

    Ks = _check_Ks(Ks)
    kinds = list(kinds)
    for kind in kinds:
        _check_kind(kind)
    M, N = _check_size("M", M), _check_size("N", N)
    fraction_bits = list(fraction_bits)
    if measured and measure is None:
        device.require_gpu("the FP8 promotion study (Level 13's kernels)")
    say = progress or (lambda _: None)
    if device.gpu_available():
        import cupy as xp
    else:
        xp = np
    rows: list[dict[str, Any]] = []
    for K in Ks:
        for kind in kinds:
            a_bits, a_s, b_bits, b_s = promotion_operands(M, N, K, kind, seed, xp)
            sa, sb = (xp.asarray(s) for s in full_scales(a_s, b_s, M, N, K))
            reference = fp8.reference_gemm_fp8(a_bits, sa, b_bits, sb)
            magnitude = magnitude_gemm(a_bits, sa, b_bits, sb)
            common = {"K": K, "M": M, "N": N, "kind": kind, "seed": seed}

            def add(kernel: str, C: Any, promotion: Optional[bool], bits: Optional[int] = None) -> None:
                row = {**common, "kernel": kernel, "promotion": promotion, "fraction_bits": bits,
                       **accuracy_metrics(C, reference, magnitude)}
                rows.append(row)
                say(_promotion_row_text(row))

            if measured:
                run = measure or _course_kernels
                for scaling, promotion in (("per_tensor", False), ("blockwise", True)):
                    C = run(a_bits, a_s, b_bits, b_s, scaling)
                    add(f"fp8_gemm_{scaling}", to_float64(xp.asarray(C)), promotion)
            scale = float(a_s) * float(b_s)
            a_vals, b_vals = fp8.decode_e4m3(a_bits), fp8.decode_e4m3(b_bits)
            for bits in fraction_bits:
                for promotion in (False, True):
                    model = simulate_truncated_accumulation(a_vals, b_vals, bits,
                                                            promote_every=PROMOTION_K if promotion else None)
                    add("model", to_float64(to_bfloat16(model * scale)), promotion, bits)
            add("bf16_floor", to_float64(to_bfloat16(reference)), None)
    return rows


def _promotion_row_text(row: Mapping[str, Any]) -> str:
    what = row["kernel"]
    if row["kernel"] == "model":
        what = f"model {row['fraction_bits']} bits, {'promotion' if row['promotion'] else 'no promotion'}"
    extra = f"  non-finite {row['nonfinite']}" if row.get("nonfinite") else ""
    return (f"K={row['K']:<6} {row['kind']:<8} {what:<36} rel {row['rel_fro']:.3e}  max rel {row['max_rel']:.3e}"
            f"  bias {row['bias']:+.3e}{extra}")


# --- 3. recording --------------------------------------------------------------------------------

METHOD = ("fp8_promotion: per K and input kind, one set of per-tensor e4m3 operands (M×K, N×K, NumPy "
          "generator, seed {seed}) run through Level 13's per_tensor kernel (no promotion) and blockwise kernel "
          "(same bytes, scales spread into 1×128/128×128, promotion every 128 of k); errors against "
          "fp8.reference_gemm_fp8 in float64 on the GPU; beside simulate_truncated_accumulation (fraction bits "
          "{bits}) and the exact product rounded to bf16. fp8_outliers: outlier_study on the CPU (NumPy), "
          "seed {seed}.")


def record_accuracy(out_path: str | Path, Ks: Sequence[int] = DEFAULT_KS, M: int = 256, N: int = 256,
                    magnitudes: Sequence[float] = DEFAULT_MAGNITUDES,
                    fraction_bits: Sequence[int] = DEFAULT_FRACTION_BITS, seed: int = 0,
                    progress: Optional[Callable[[str], None]] = print) -> dict[str, Any]:
    """Record both studies in one result file (the course's schema 1, with provenance): keys
    "fp8_outliers" (outlier_study) and "fp8_promotion" (promotion_study, one K at a time, the file
    rewritten after each, so an interrupted run keeps what it measured). Needs a Hopper GPU."""
    from gemm_course.measure.bench import _write_json, provenance

    Ks = _check_Ks(Ks)
    device.require_gpu("recording the FP8 accuracy study")
    say = progress or (lambda _: None)
    path = Path(out_path)
    prov = provenance(METHOD.format(seed=seed, bits=", ".join(map(str, fraction_bits))))
    prov["command"] = f"python -m gemm_course fp8 --accuracy --out {path.name}" + (  # not the folder: it is this machine's
        "" if tuple(Ks) == DEFAULT_KS else f"  (K = {', '.join(map(str, Ks))})")
    result: dict[str, Any] = {"schema": 1, "provenance": prov, "records": [],
                              "fp8_outliers": [], "fp8_promotion": []}
    result["fp8_outliers"] = outlier_study(magnitudes=magnitudes, seed=seed)
    for row in result["fp8_outliers"]:
        say(f"outliers ×{row['magnitude']:<8g} {row['scaling']:<13} rel {row['rel_fro']:.3e}  "
            f"ordinary part {row['rest_rel_fro']:.3e}  A flushed {row['a_underflow_fraction']:.2%}")
    _write_json(path, result)
    for K in Ks:
        result["fp8_promotion"] += promotion_study([K], M, N, fraction_bits=fraction_bits, seed=seed,
                                                   progress=progress)
        _write_json(path, result)
        say(f"K={K} done, written to {path}")
    return result


def recorded_accuracy() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(promotion rows, outlier rows) from the result files in gemm_course/results, each row with
    its file's GPU, date and file name; two empty lists where nothing is recorded yet."""
    from gemm_course.measure import results

    promotion: list[dict[str, Any]] = []
    outliers: list[dict[str, Any]] = []
    for path in results.recorded_files():
        data = results.load(path)
        prov = data["provenance"]
        where = {"gpu": prov.get("gpu"), "date": str(prov.get("date", ""))[:10], "file": path.name}
        promotion += [{**r, **where} for r in data.get("fp8_promotion", [])]
        outliers += [{**r, **where} for r in data.get("fp8_outliers", [])]
    return promotion, outliers


# --- 4. figures ----------------------------------------------------------------------------------

def _series_style(row: Mapping[str, Any], fraction_bits: Sequence[int]) -> tuple[str, dict[str, Any], int]:
    """(legend label, line style, sort order) of one curve of promotion_figure."""
    from gemm_course.display.plots import PALETTE

    no_promo, promo, floor = PALETTE[1], PALETTE[0], "#666666"
    kernel = row["kernel"]
    if kernel == "fp8_gemm_per_tensor":
        return ("per_tensor kernel, no promotion (measured) · per_tensor 内核，无累加提升（实测）",
                dict(color=no_promo, width=3), 0)
    if kernel == "fp8_gemm_blockwise":
        return ("blockwise kernel, promotion every 128 (measured) · blockwise 内核，每 128 累加提升一次（实测）",
                dict(color=promo, width=3), 1)
    if kernel == "bf16_floor":
        return "bf16 rounding of C alone · 仅 C 的 bf16 舍入", dict(color=floor, dash="dashdot"), 9
    bits = row.get("fraction_bits")
    dash = ("dash", "dot", "longdash", "dashdot")[list(fraction_bits).index(bits) % 4] if bits in fraction_bits \
        else "dash"
    if row.get("promotion"):
        return (f"model: {bits} bits, promotion · 模型：{bits} 位，有累加提升", dict(color=promo, dash=dash), 4 + 2 * (bits or 0))
    return (f"model: {bits} bits, no promotion · 模型：{bits} 位，无累加提升", dict(color=no_promo, dash=dash),
            3 + 2 * (bits or 0))


def promotion_figure(rows: Sequence[Mapping[str, Any]], metric: str = "rel_fro", title: Optional[str] = None,
                     subtitle: Optional[str] = None) -> Any:
    """Error against K (log-log) for each kernel, the model curves and the bf16 floor; a menu picks
    the input kind where the rows hold both. metric: a key of accuracy_metrics ("bias" is drawn on
    a linear axis: it has a sign)."""
    import plotly.graph_objects as go

    from gemm_course.display.plots import _layout, fit_top

    if metric not in _PROMOTION_METRICS:
        raise ValueError(_bilingual(f"metric must be one of {', '.join(map(repr, _PROMOTION_METRICS))}, not {metric!r}",
                                    f"metric 只能是 {', '.join(map(repr, _PROMOTION_METRICS))} 之一，而不是 {metric!r}"))
    kinds = [k for k in INPUT_KINDS if any(r["kind"] == k for r in rows)]
    fraction_bits = sorted({r["fraction_bits"] for r in rows if r["kernel"] == "model"})
    fig = go.Figure()
    owners: list[str] = []
    for kind in kinds:
        series: dict[str, tuple[dict[str, Any], int, list[Mapping[str, Any]]]] = {}
        for r in rows:
            if r["kind"] == kind and r.get(metric) is not None:
                label, line, order = _series_style(r, fraction_bits)
                series.setdefault(label, (line, order, []))[2].append(r)
        for label, (line, order, points) in sorted(series.items(), key=lambda kv: kv[1][1]):
            points = sorted(points, key=lambda r: r["K"])
            fig.add_trace(go.Scatter(
                x=[r["K"] for r in points], y=[r[metric] for r in points], name=label,
                mode="lines+markers", line=line, visible=kind == kinds[0], showlegend=kind == kinds[0],
                hovertemplate="K=%{x}: %{y:.3g}<extra>" + label.split(" · ")[0] + "</extra>"))
            owners.append(kind)
    kind_text = {"normal": "zero-mean normal inputs · 零均值正态输入",
                 "positive": "all-positive inputs |normal| · 全正输入 |正态|"}
    default_title = ("FP8 accumulation error against K: what promotion fixes · "
                     "FP8 累加误差随 K 的变化：累加提升修正了什么")
    sizes = sorted({(r["M"], r["N"]) for r in rows})
    shape = ", ".join(f"{m}×{n}" for m, n in sizes)
    sub = subtitle if subtitle is not None else (  # one " · " only: the book's language switch splits there
        f"per-tensor e4m3 inputs, M×N = {shape}; error against the exact product of the same bytes · "
        f"逐张量 e4m3 输入，M×N = {shape}；与相同字节的精确乘积比较")
    fig = _layout(fig, title or default_title, "K (depth of the sum) · K（求和长度）", _PROMOTION_METRICS[metric],
                  subtitle=sub)
    fig.update_xaxes(type="log")
    if metric != "bias":
        fig.update_yaxes(type="log", exponentformat="power")
    if len(kinds) > 1:
        # hidden curves leave the legend too, so that it (and the margin fit_bottom leaves) lists one kind
        buttons = [dict(label=kind_text[k], method="update",
                        args=[{"visible": [o == k for o in owners], "showlegend": [o == k for o in owners]}])
                   for k in kinds]
        fig.update_layout(updatemenus=[dict(buttons=buttons, x=1.0, xanchor="right", y=1.0, yanchor="bottom",
                                            pad=dict(b=28))])
        fit_top(fig, extra=36)
    return fig


def outlier_figure(rows: Sequence[Mapping[str, Any]],
                   metrics: Sequence[str] = ("rest_rel_fro", "rel_fro"), title: Optional[str] = None,
                   subtitle: Optional[str] = None) -> Any:
    """Quantisation error (or the fraction of A flushed to zero) against the outlier magnitude, one
    colour per scaling, one line style per metric (keys of an outlier_study row)."""
    import plotly.graph_objects as go

    from gemm_course.display.plots import PALETTE, _layout

    metrics = list(metrics)
    if not metrics or any(m not in _OUTLIER_METRICS for m in metrics):
        raise ValueError(_bilingual(f"metrics must be chosen from {', '.join(map(repr, _OUTLIER_METRICS))}, "
                                    f"not {metrics!r}",
                                    f"metrics 只能从 {', '.join(map(repr, _OUTLIER_METRICS))} 中选，而不是 {metrics!r}"))
    fractions = [m.endswith("fraction") for m in metrics]
    if any(fractions) and not all(fractions):
        raise ValueError(_bilingual("draw errors and fractions of A in separate figures (their axes differ)",
                                    "误差与 A 的比例请分开画（它们的坐标轴不同）"))
    fig = go.Figure()
    dashes = ("solid", "dash", "dot", "dashdot")
    for si, scaling in enumerate(s for s in OUTLIER_SCALINGS if any(r["scaling"] == s for r in rows)):
        points = sorted((r for r in rows if r["scaling"] == scaling), key=lambda r: r["magnitude"])
        for mi, metric in enumerate(metrics):
            name = _SCALING_LABELS[scaling] if len(metrics) == 1 else \
                f"{_SCALING_LABELS[scaling].split(' · ')[0]}: {_OUTLIER_METRICS[metric].split(' · ')[0]} · " \
                f"{_SCALING_LABELS[scaling].split(' · ')[1]}：{_OUTLIER_METRICS[metric].split(' · ')[1]}"
            fig.add_trace(go.Scatter(
                x=[r["magnitude"] for r in points], y=[r[metric] for r in points], name=name,
                mode="lines+markers", line=dict(color=PALETTE[si % len(PALETTE)], dash=dashes[mi % len(dashes)]),
                hovertemplate="outlier ×%{x:.3g}: %{y:.3g}<extra>" + name.split(" · ")[0] + "</extra>"))
    if all(fractions):
        ytitle = "fraction of A's entries · A 中元素的比例"
        default_title = "Where one scale sends A's small values · 一个缩放因子把 A 的小值送到哪里"
    else:
        ytitle = "relative error ‖Ĉ − C‖ / ‖C‖ · 相对误差"
        default_title = "FP8 quantisation error with outlier channels in A · A 含离群通道时的 FP8 量化误差"
    shapes = sorted({(r["M"], r["N"], r["K"], r["outlier_channels"]) for r in rows})
    sub = subtitle if subtitle is not None else (  # one " · " only: the book's language switch splits there
        "; ".join(f"{M}×{N}×{K}, {c} outlier channel(s) of A" for M, N, K, c in shapes)
        + "; quantisation error only, against the exact float64 product · "
        + "；".join(f"{M}×{N}×{K}，A 有 {c} 个离群通道" for M, N, K, c in shapes) + "；仅量化误差，与 float64 精确乘积比较")
    fig = _layout(fig, title or default_title, "outlier magnitude (× the other channels) · 离群值倍数", ytitle,
                  subtitle=sub)
    fig.update_xaxes(type="log", exponentformat="power")
    fig.update_yaxes(type="log" if not all(fractions) else "linear",
                     **({"exponentformat": "power"} if not all(fractions) else {"tickformat": ".0%"}))
    return fig
