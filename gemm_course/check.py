"""The correctness checker: fresh random inputs, poisoned output, float64 reference."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .launch import gemm
from .levels import Level, get_level

# Unit roundoff of the arithmetic each dtype accumulates in. Level kernels accumulate in fp32.
_ACCUMULATOR_EPS = {"float32": float(np.finfo(np.float32).eps)}


def tolerance(dtype: str, K: int) -> float:
    """Bound on ‖C − C_ref‖_F / ‖C_ref‖_F for a correct kernel.

    A length-K dot product in fp32 has a worst-case relative error about K·eps and a typical one
    about √K·eps (errors of random sign). We allow 8·√K·eps: comfortably above what any correct
    summation order gives on random data, yet below what TF32 (eps 2⁻¹¹) or a single wrong
    element of C produces.
    """
    eps = _ACCUMULATOR_EPS.get(dtype)
    if eps is None:
        raise ValueError(f"no tolerance defined for {dtype}")
    return 8.0 * math.sqrt(max(K, 1)) * eps


def relative_error(C: Any, reference: Any) -> float:
    """‖C − ref‖_F / ‖ref‖_F in float64; NaN anywhere in C gives NaN (which never passes)."""
    xp = _array_module(C)
    diff = C.astype(xp.float64) - reference
    return float(xp.linalg.norm(diff) / xp.linalg.norm(reference))


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

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        extra = f", {self.unwritten} elements never written" if self.unwritten else ""
        return (f"{verdict} {self.level} {self.params} {self.M}×{self.N}×{self.K} {self.dtype}: "
                f"relative error {self.relative_error:.2e} (bound {self.tolerance:.2e}){extra}")


def random_operands(M: int, N: int, K: int, dtype: str = "float32", seed: Optional[int] = None,
                    xp: Any = None) -> tuple[Any, Any]:
    """Uniform(−1, 1) matrices: never zeros, so unwritten or mis-indexed outputs cannot hide."""
    if xp is None:
        import cupy as xp
    rng = xp.random.default_rng(seed)
    A = (2.0 * rng.random((M, K)) - 1.0).astype(dtype)
    B = (2.0 * rng.random((K, N)) - 1.0).astype(dtype)
    return A, B


def check(level: str | int | Level, M: int, N: int, K: int, *, dtype: str = "float32",
          seed: Optional[int] = None, source: Optional[str] = None, **params: Any) -> CheckResult:
    """Run a level once on fresh random inputs and compare with a float64 product."""
    import cupy

    lv = get_level(level)
    resolved = lv.resolve(**params)
    A, B = random_operands(M, N, K, dtype, seed, cupy)
    C = cupy.full((M, N), cupy.nan, dtype=dtype)  # poison: anything not written stays NaN
    gemm(A, B, lv, out=C, source=source, **resolved)
    reference = A.astype(cupy.float64) @ B.astype(cupy.float64)
    unwritten = int(cupy.isnan(C).sum())
    return CheckResult(lv.id, resolved, M, N, K, dtype, relative_error(C, reference),
                       tolerance(dtype, K), unwritten)


ODD_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 131), (1000, 1, 7), (1, 1000, 1000),
    (257, 4097, 65), (4097, 33, 1000),
)
