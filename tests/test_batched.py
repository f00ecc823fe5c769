"""Batched GEMM (Levels 5, 7, 8): a batch of independent products in one launch, one grid z index each.
Run on the CPU backend here (the same CUDA C); tests/test_gpu.py runs them on a GPU."""
import numpy as np
import pytest

import gemm_course as gc

BATCHED = [lv.id for lv in gc.levels() if lv.batched]


def test_the_batched_levels():
    assert BATCHED == ["05_register_blocking", "07_vectorized", "08_warp_tiling"]


@pytest.mark.parametrize("level", BATCHED)
@pytest.mark.parametrize("batch, shape", [(3, (33, 40, 17)), (2, (64, 64, 64)), (4, (7, 13, 5)), (1, (1, 1, 1))])
def test_batched_levels_correct_on_the_cpu_backend(level, batch, shape):
    params = {"BM": 64, "BN": 64, "WM": 32, "WN": 32} if level == "08_warp_tiling" else {}
    result = gc.check(level, *shape, batch=batch, backend="cpu", **params)
    assert result.passed, str(result)
    assert result.params["batch"] == batch


def test_each_product_of_a_batch_is_its_own():
    """Not the same product repeated: swapping two entries of the batch swaps the results."""
    A, B = gc.random_operands(16, 24, 8, seed=3, xp=np, batch=2)
    C = gc.gemm(A, B, "07_vectorized", backend="cpu")
    C_swapped = gc.gemm(A[::-1].copy(), B[::-1].copy(), "07_vectorized", backend="cpu")
    assert not np.allclose(C[0], C[1]) and np.array_equal(C, C_swapped[::-1])


def test_batch_errors_are_clear():
    A, B = gc.random_operands(8, 8, 8, xp=np, batch=2)
    with pytest.raises(ValueError, match="multiplies 2-D matrices only; for a batch of products use a batched"):
        gc.gemm(A, B, "02_smem_tiling", backend="cpu")
    with pytest.raises(ValueError, match="batches of the same length"):
        gc.gemm(A, B[:1].copy(), "05_register_blocking", backend="cpu")
    with pytest.raises(ValueError, match="batches of the same length"):
        gc.gemm(A, B[0].copy(), "05_register_blocking", backend="cpu")
    with pytest.raises(ValueError, match=r"shape \(2, 8, 8\)"):
        gc.gemm(A, B, "05_register_blocking", backend="cpu", out=np.empty((8, 8), np.float32))
