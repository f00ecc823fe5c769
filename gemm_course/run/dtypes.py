"""Input types by name, including bfloat16, which NumPy and CuPy have no dtype for.

A bfloat16 matrix is stored as a uint16 array of its bit patterns (the upper half of a float32).
Every level that takes bfloat16 reads a uint16 array that way; no level takes real uint16 data.
"""
from __future__ import annotations

import functools
from typing import Any

BFLOAT16 = "bfloat16"
_STORAGE = {BFLOAT16: "uint16"}
_MIN_CC = {BFLOAT16: 80}  # bf16 Tensor Core instructions arrived with sm_80


def min_cc(name: str) -> int:
    """The least compute capability any kernel needs for inputs of this type (0: no constraint)."""
    return _MIN_CC.get(name, 0)


def storage_dtype(name: str) -> str:
    """The array dtype that holds values of the named type ("bfloat16" → "uint16")."""
    return _STORAGE.get(name, name)


def dtype_name(X: Any) -> str:
    """The element type an array holds, by name: "bfloat16" for uint16 storage, else its dtype."""
    return _type_name(X.dtype)


@functools.lru_cache(maxsize=None)
def _type_name(dtype: Any) -> str:
    # Remembered per dtype: str(dtype) runs Python code inside NumPy, and a repeated gemm() call asks often.
    name = str(dtype)
    return BFLOAT16 if name == "uint16" else name


def _xp(X: Any) -> Any:
    import numpy as np

    if isinstance(X, np.ndarray):
        return np
    import cupy

    return cupy


def to_bfloat16(X: Any) -> Any:
    """Round a float array to bfloat16 (nearest, ties to even); returns the uint16 bit patterns."""
    xp = _xp(X)
    bits = xp.ascontiguousarray(X, dtype=xp.float32).view(xp.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF  # ties go to the even neighbour
    return ((bits + rounding) >> 16).astype(xp.uint16)


def to_float64(X: Any) -> Any:
    """The values of an array as float64, decoding bfloat16 bit patterns (uint16) exactly."""
    xp = _xp(X)
    if dtype_name(X) == BFLOAT16:
        return (X.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
    return X.astype(xp.float64)


_NAN_BITS = {BFLOAT16: 0x7FC0}  # NaN of a type stored as bit patterns


def nan_filled(shape: tuple[int, ...], name: str, xp: Any) -> Any:
    """An array for values of the named type, every element NaN (bfloat16: the bit pattern 0x7FC0).
    Filled before a launch, any element a kernel fails to write is still NaN afterwards."""
    return xp.full(shape, _NAN_BITS.get(name, xp.nan), dtype=storage_dtype(name))


def fill_nan(X: Any, name: str) -> Any:
    """nan_filled in place: poison an existing array that holds values of the named type."""
    X.fill(_NAN_BITS.get(name, float("nan")))
    return X


def cast(X: Any, name: str) -> Any:
    """Convert a float array to the named type (bfloat16 gives uint16 bit patterns)."""
    return to_bfloat16(X) if name == BFLOAT16 else X.astype(name)
