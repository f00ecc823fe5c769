"""The correctness checker: fresh random inputs, poisoned output, float64 reference."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from gemm_course.run.dtypes import cast, nan_filled, to_float64
from gemm_course.run.launch import gemm, resolve_backend
from gemm_course.levels import Level, get_level

# Unit roundoff of the arithmetic each dtype accumulates in. Level kernels accumulate in fp32.
_ACCUMULATOR_EPS = {"float32": float(np.finfo(np.float32).eps),
                    # fp16 and bf16 inputs, fp32 accumulation; the reference uses the rounded inputs
                    "float16": float(np.finfo(np.float32).eps),
                    "bfloat16": float(np.finfo(np.float32).eps)}


# Rounding C itself to a narrower type adds at most its unit roundoff to each element's error.
_OUTPUT_ROUNDING = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def tolerance(dtype: str, K: int, c_type: Optional[str] = None) -> float:
    """Bound on ‖C − C_ref‖_F / ‖C_ref‖_F for a correct kernel.

    A length-K dot product in fp32 has a worst-case relative error about K·eps and a typical one
    about √K·eps (errors of random sign). We allow 8·√K·eps: comfortably above what any correct
    summation order gives on random data, yet below what TF32 (eps 2⁻¹¹) or a single wrong
    element of C produces.
    """
    eps = _ACCUMULATOR_EPS.get(dtype)
    if eps is None:
        raise ValueError(f"no tolerance defined for {dtype}")
    # C written in bf16 or fp16 (c_type): plus the output's unit roundoff, a bound on ‖δC‖/‖C‖.
    return 8.0 * math.sqrt(max(K, 1)) * eps + _OUTPUT_ROUNDING.get(c_type or "float32", 0.0)


def relative_error(C: Any, reference: Any) -> float:
    """‖C − ref‖_F / ‖ref‖_F in float64; NaN anywhere in C gives NaN (which never passes)."""
    xp = _array_module(C)
    diff = float(xp.linalg.norm(to_float64(C) - reference))
    scale = float(xp.linalg.norm(reference))
    if scale == 0.0:  # e.g. a 1×1 product through a ReLU: only an exact 0 is right
        return diff if math.isnan(diff) or diff == 0.0 else math.inf
    return diff / scale


def _array_module(X: Any):
    if isinstance(X, np.ndarray):
        return np
    import cupy

    return cupy


@dataclass(frozen=True)
class CheckResult:
    level: str
    params: dict
    M: int
    N: int
    K: int
    dtype: str
    relative_error: float
    tolerance: float
    unwritten: int  # elements of C still NaN after the launch

    @property
    def passed(self) -> bool:
        return self.unwritten == 0 and self.relative_error <= self.tolerance  # NaN compares False

    def text(self):
        """The result as one line in English and in Chinese (a Bilingual: str() shows the language in force)."""
        from gemm_course.bilingual.text import Bilingual

        shape = f"{self.level} {self.params} {self.M}×{self.N}×{self.K} {self.dtype}"
        extra_en = f", {self.unwritten} elements never written" if self.unwritten else ""
        extra_zh = f"，{self.unwritten} 个元素未写入" if self.unwritten else ""
        return Bilingual(f"{'PASS' if self.passed else 'FAIL'} {shape}: relative error {self.relative_error:.2e} "
                         f"(bound {self.tolerance:.2e}){extra_en}",
                         f"{'通过' if self.passed else '失败'} {shape}：相对误差 {self.relative_error:.2e}"
                         f"（上限 {self.tolerance:.2e}）{extra_zh}")

    def __str__(self) -> str:
        """PASS/FAIL with the relative error, in the language in force (gc.language, GEMM_COURSE_LANG, the
        locale; both languages when nothing chooses)."""
        return str(self.text())

    def _repr_html_(self) -> str:
        return self.text()._repr_html_()


INPUT_TYPES = ("float32", "float64", "float16", "bfloat16")
"""The input types random_operands makes (the levels take float32, float16 and bfloat16)."""


def require_sizes(**sizes: Any) -> None:
    """Refuse, in one line, a problem size that is not a positive whole number (M=0, -1, 2.5, "64")."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, not {value!r} (e.g. {name}=64) / "
                             f"{name} 必须是正整数，而不是 {value!r}（例如 {name}=64）")


def require_seed(seed: Any) -> None:
    """Refuse, in one line, a seed NumPy's default_rng would reject deep inside (seed="abc", -1, 2.5)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        from gemm_course.bilingual.text import plain

        raise ValueError(plain(f"seed must be a whole number 0 or more (e.g. seed=1), or None for fresh inputs; "
                               f"not {seed!r}",
                               f"seed 必须是不小于 0 的整数（例如 seed=1），或者 None（每次取新的输入）；而不是 {seed!r}"))


def require_input_type(dtype: Any) -> None:
    if dtype not in INPUT_TYPES:
        raise ValueError(f"unknown input type {dtype!r}: use one of {', '.join(INPUT_TYPES)} / "
                         f"未知的输入类型 {dtype!r}：请使用 {'、'.join(INPUT_TYPES)} 之一")


def random_operands(M: int, N: int, K: int, dtype: str = "float32", seed: Optional[int] = None,
                    xp: Any = None, batch: int = 0) -> tuple[Any, Any]:
    """Uniform(−1, 1) matrices: never zeros, so unwritten or mis-indexed outputs cannot hide.

    dtype "bfloat16" gives uint16 arrays of bf16 bit patterns (see gemm_course.run.dtypes); an integer type
    is refused (U(−1, 1) would round to all zeros). batch > 0: a batch of that many products, A of shape
    batch × M × K and B batch × K × N.
    """
    require_sizes(M=M, N=N, K=K)
    require_input_type(dtype)
    require_seed(seed)
    if batch:
        require_sizes(batch=batch)
    if xp is None:  # CuPy arrays on a GPU, NumPy arrays (for the CPU backend) without one
        from gemm_course import device

        if device.gpu_available():
            import cupy as xp
        else:
            xp = np
    rng = xp.random.default_rng(seed)
    lead = (batch,) if batch else ()
    A = cast(2.0 * rng.random(lead + (M, K)) - 1.0, dtype)
    B = cast(2.0 * rng.random(lead + (K, N)) - 1.0, dtype)
    return A, B


def check(level: str | int | Level, M: int, N: int, K: int, *, dtype: Optional[str] = None,
          seed: Optional[int] = None, source: Optional[str] = None, backend: str = "auto",
          batch: int = 0, **params: Any) -> CheckResult:
    """Run a level once on fresh random inputs and compare with a float64 product.

    backend as for gemm(): "cuda" (CuPy), "cpu" (NumPy, the CPU backend) or "auto".
    batch > 0: a batch of that many independent products in one launch (batched levels).
    """
    lv = get_level(level)
    resolved = lv.resolve(**params) if backend == "cpu" else lv.resolve_here(**params)  # on a GPU: its defaults
    require_sizes(M=M, N=N, K=K)
    require_seed(seed)
    dtype = dtype or lv.dtypes[0]
    require_input_type(dtype)
    if dtype not in lv.dtypes:
        raise ValueError(f"level {lv.id} takes {', '.join(lv.dtypes)} inputs, not {dtype} / "
                         f"第 {lv.number} 级的输入类型是 {'、'.join(lv.dtypes)}，不是 {dtype}")
    if resolve_backend(backend) == "cpu":
        from gemm_course.run.cpu_backend import require_small

        require_small(max(batch, 1) * M * N * K, f"{M}×{N}×{K}")  # before any work: refused at once, not after minutes
        xp = np
    else:
        import cupy as xp
    A, B = random_operands(M, N, K, dtype, seed, xp, batch)
    c_type = lv.c_type(resolved, dtype)
    C = nan_filled(A.shape[:-1] + (N,), c_type, xp)  # poison: unwritten stays NaN
    reference = to_float64(A) @ to_float64(B)  # the rounded inputs, exactly
    run_params: dict[str, Any] = dict(resolved)
    terms = 0.0
    if lv.epilogue:
        product = reference
        extra, C_initial, reference = epilogue_inputs(resolved, reference, dtype, xp, seed)
        terms = epilogue_terms(product, extra, C_initial, xp)  # before the kernel overwrites C_initial
        run_params.update(extra)
        if C_initial is not None:
            C = C_initial  # read by the kernel: no poison
    gemm(A, B, lv, out=C, source=source, backend=backend, **run_params)
    unwritten = int(xp.isnan(to_float64(C)).sum())
    error = relative_error(C, reference)
    if terms and math.isfinite(error):
        error = min(error, float(xp.linalg.norm(to_float64(C) - reference)) / terms)
    params_shown = resolved | {"batch": batch} if batch else resolved
    return CheckResult(lv.id, params_shown, M, N, K, dtype, error, tolerance(dtype, K, c_type), unwritten)


def epilogue_terms(product: Any, extra: dict, C_initial: Any, xp: Any) -> float:
    """The size of what an epilogue adds up, alpha·‖A·B‖ + ‖bias‖ + beta·‖C_old‖ (bias over all M rows): an
    epilogue's result may nearly cancel (alpha·A·B + bias ≈ 0, at 1×1×1 say), and its error, made by rounding
    these terms, is then measured against their size rather than against the small result."""
    M, N = product.shape[-2:]
    terms = float(np.float32(extra["alpha"])) * float(xp.linalg.norm(product))
    if extra["bias"] is not False:
        terms += float(xp.linalg.norm(extra["bias"].astype(xp.float64))) * math.sqrt(M)
    if C_initial is not None:
        terms += float(np.float32(extra["beta"])) * float(xp.linalg.norm(C_initial.astype(xp.float64)))
    return terms


def epilogue_inputs(p: dict, AB: Any, dtype: str, xp: Any, seed: Optional[int] = None,
                    alpha: float = 0.75, beta: float = 0.5) -> tuple[dict, Any, Any]:
    """Operands for an epilogue level and the float64 result it must produce.

    Returns (gemm keyword arguments: a random bias if the setting has one, alpha, beta; the initial
    C to pass as out= when the setting accumulates, else None; the reference
    act(alpha·A·B + bias) + beta·C_old), given AB, the float64 product A·B.
    """
    M, N = AB.shape
    rng = xp.random.default_rng(None if seed is None else seed + 1)
    bias = (2.0 * rng.random(N) - 1.0).astype(dtype) if p["bias"] else None
    C_initial = (2.0 * rng.random((M, N)) - 1.0).astype(dtype) if p["accumulate"] else None
    C_old = C_initial.astype(xp.float64) if C_initial is not None else None
    extra = {"bias": bias if bias is not None else False, "alpha": alpha, "beta": beta}
    return extra, C_initial, _epilogue_reference(p, AB, bias, C_old, xp, alpha, beta)


def _epilogue_reference(p: dict, AB: Any, bias: Any, C_old: Any, xp: Any, alpha: float = 0.75,
                        beta: float = 0.5) -> Any:
    """act(alpha·A·B + bias) + beta·C_old in float64, as check() runs an epilogue level."""
    X = float(np.float32(alpha)) * AB
    if bias is not None:
        X = X + bias.astype(xp.float64)
    if p["activation"] == "relu":
        X = xp.maximum(X, 0.0)
    elif p["activation"] == "gelu":  # the tanh approximation, as the kernel computes it
        X = 0.5 * X * (1.0 + xp.tanh(0.7978845608028654 * (X + 0.044715 * X**3)))
    elif p["activation"] != "none":
        raise ValueError(f"check() has no reference for activation {p['activation']!r}")
    if p["accumulate"]:
        X = X + float(np.float32(beta)) * C_old
    return X


ODD_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 131), (1000, 1, 7), (1, 1000, 1000),
    (257, 4097, 65), (4097, 33, 1000), (129, 260, 68),
)

# Odd M with N and K multiples of 8 (but not of any tile): edge cases for the levels that copy whole
# 16-byte chunks (10_mma_pipeline, 11_hopper_wgmma), whose preconditions rule out ODD_SHAPES. The last
# has more tiles than an H200 holds blocks at once, so persistent kernels walk several tiles each.
MULTIPLE_OF_8_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 8, 8), (7, 16, 40), (33, 64, 72), (127, 136, 264), (257, 520, 1000), (1000, 8, 16), (4097, 264, 64),
    (3001, 2056, 520),
)
