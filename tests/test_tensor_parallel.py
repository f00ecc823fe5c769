"""The tensor-parallel MLP block of Level 12: the split (which columns and rows each GPU holds, which
token rows each chunk covers), checked on the CPU by a NumPy simulation that slices and sums exactly
as the GPUs do; its time model; and, on 2 GPUs with NCCL, the real thing (skipped otherwise)."""
import numpy as np
import pytest

from gemm_course.multigpu import collectives as co
from gemm_course.multigpu import tensor_parallel as tp


def test_split_even_covers_the_range_in_near_equal_pieces():
    for n in (1, 7, 64, 1001, 32768):
        for parts in (1, 2, 3, 4, 7, 8):
            if parts > n:
                with pytest.raises(ValueError):
                    tp.split_even(n, parts)
                continue
            b = tp.split_even(n, parts)
            assert b[0][0] == 0 and b[-1][1] == n and all(b[i][1] == b[i + 1][0] for i in range(parts - 1))
            sizes = [e - s for s, e in b]
            assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_chunk_boundaries_for_odd_M():
    assert tp.chunk_bounds(1001, 4) == [(0, 251), (251, 501), (501, 751), (751, 1001)]
    assert tp.chunk_bounds(7, 7) == [(i, i + 1) for i in range(7)]
    assert tp.chunk_bounds(1000, 3, multiple=2) == [(0, 334), (334, 668), (668, 1000)]
    assert all((e - s) % 4 == 0 for s, e in tp.chunk_bounds(4096, 3, multiple=4))
    with pytest.raises(ValueError, match=" · "):
        tp.chunk_bounds(1001, 2, multiple=2)  # reduce-scatter over 2 GPUs needs an even row count
    with pytest.raises(ValueError, match=" · "):
        tp.chunk_bounds(8, 5, multiple=2)


def test_plans_refuse_what_cannot_be_split():
    with pytest.raises(ValueError, match=" · "):
        tp.make_plan(64, 64, 3, 4)  # 3 columns of W1 for 4 GPUs
    with pytest.raises(ValueError, match=" · "):
        tp.make_plan(63, 64, 64, 2, "reduce-scatter/all-gather")
    with pytest.raises(ValueError, match=" · "):
        tp.make_plan(64, 64, 64, 2, "all-to-all")
    plan = tp.make_plan(12, 8, 10, 3, "reduce-scatter/all-gather", 2)
    assert plan.f_slices == ((0, 4), (4, 7), (7, 10)) and plan.row_chunks == ((0, 6), (6, 12))
    assert [plan.kept_rows(1, p) for p in range(3)] == [(6, 8), (8, 10), (10, 12)]
    assert plan.kept_offset(1) == 2 and plan.chunk_bytes(0, 2) == 6 * 8 * 2


CASES = [(7, 5, 9, 2, "all-reduce", 3), (13, 8, 16, 3, "all-reduce", 2), (12, 6, 10, 3, "reduce-scatter/all-gather", 2),
         (16, 4, 8, 4, "reduce-scatter/all-gather", 4), (9, 3, 5, 1, "all-reduce", 2), (32, 16, 64, 2, "all-reduce", 1),
         (40, 8, 33, 4, "reduce-scatter/all-gather", 1)]


@pytest.mark.parametrize("M,H,F,P,form,chunks", CASES)
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_simulated_split_gives_every_gpu_the_full_product(M, H, F, P, form, chunks, activation):
    rng = np.random.default_rng(M * H + F)
    X, W1, W2 = rng.uniform(-1, 1, (M, H)), rng.uniform(-1, 1, (H, F)), rng.uniform(-1, 1, (F, H))
    expected = tp.activate(X @ W1, activation) @ W2
    Ys = tp.simulate(X, W1, W2, tp.make_plan(M, H, F, P, form, chunks), activation)
    assert len(Ys) == P
    for Y in Ys:
        assert not np.isnan(Y).any()
        np.testing.assert_allclose(Y, expected, rtol=1e-12, atol=1e-12)


def test_a_nonlinearity_needs_the_column_split():
    """ReLU between the GEMMs works per GPU only because each GPU holds whole columns of Z = X·W1.
    Split W1 by rows instead (and X by columns) and each GPU holds a partial SUM of Z: ReLU of the
    parts is not ReLU of the sum."""
    rng = np.random.default_rng(1)
    X, W1 = rng.uniform(-1, 1, (8, 6)), rng.uniform(-1, 1, (6, 10))
    by_columns = np.concatenate([np.maximum(X @ W1[:, :5], 0), np.maximum(X @ W1[:, 5:], 0)], axis=1)
    by_rows = np.maximum(X[:, :3] @ W1[:3], 0) + np.maximum(X[:, 3:] @ W1[3:], 0)
    truth = np.maximum(X @ W1, 0)
    np.testing.assert_allclose(by_columns, truth)
    assert not np.allclose(by_rows, truth)


def test_time_model_of_both_forms_and_the_overlap():
    links = co.Links.uniform(10e-6, 300.0)
    plan = tp.make_plan(8192, 8192, 32768, 2, "all-reduce", 4)
    compute = [1e-3] * 4
    m = tp.model(plan, links, compute, 2)
    comm = links.seconds("all-reduce", 2048 * 8192 * 2, 2)
    assert m["communication_ms"] == pytest.approx(4 * comm * 1e3)
    assert m["serial_ms"] == pytest.approx(m["compute_ms"] + m["communication_ms"])
    assert m["overlap_ms"] == pytest.approx((1e-3 + 3 * max(1e-3, comm) + comm) * 1e3)
    rs = tp.model(tp.make_plan(8192, 8192, 32768, 2, "reduce-scatter/all-gather", 4), links, compute, 2)
    # on a ring, reduce-scatter + all-gather IS the all-reduce: same bytes, same latencies
    assert rs["communication_ms"] == pytest.approx(m["communication_ms"])
    one = tp.model(tp.make_plan(8192, 8192, 32768, 1), None, [4e-3], 2)
    assert one["communication_ms"] == 0 and one["overlap_ms"] == pytest.approx(4.0)
    with pytest.raises(ValueError):
        tp.model(plan, links, [1e-3], 2)


def test_overlap_fraction_is_clipped_and_raw():
    assert tp.overlap_fraction(10.0, 9.0, 2.0) == (0.5, 0.5)
    assert tp.overlap_fraction(10.0, 11.0, 2.0) == (0.0, -0.5)
    assert tp.overlap_fraction(10.0, 7.0, 2.0) == (1.0, 1.5)
    assert tp.overlap_fraction(10.0, 10.0, 0.0) == (0.0, 0.0)


def test_tolerance_and_flops():
    assert tp.layer_flops(8192, 8192, 32768) == 4 * 8192 * 8192 * 32768
    t16, t32 = tp.layer_tolerance("float16", 8192, 32768, 2), tp.layer_tolerance("float32", 8192, 32768, 2)
    assert 1e-4 < t32 < 1e-3 < t16 < 1e-2
    assert tp.layer_tolerance("float16", 8192, 32768, 4) > t16


# --- on 2 GPUs -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def group():
    from gemm_course.multigpu.schemes import Group, gpu_count

    if gpu_count() < 2:
        pytest.skip("needs 2 GPUs")
    from cupy.cuda import nccl

    if not nccl.available:
        pytest.skip("CuPy has no NCCL here")
    return Group([0, 1])


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("form,chunks,activation", [("all-reduce", 1, "none"), ("all-reduce", 3, "relu"),
                                                    ("reduce-scatter/all-gather", 1, "none"),
                                                    ("reduce-scatter/all-gather", 4, "relu")])
def test_tensor_parallel_block_on_two_gpus(group, dtype, form, chunks, activation):
    X0, W1, W2 = tp.random_layer(384, 256, 1024, dtype, seed=7)
    ref = tp.reference(X0, W1, W2, activation)
    block = tp.TensorParallelMLP(tp.Shards(group, X0, W1, W2), form, chunks, activation)
    for mode in ("serial", "overlap"):
        got = block.check(ref, mode)
        assert got["passed"], (mode, got)


def test_chunk_compute_timing_on_gpu0(group):
    from functools import partial

    from gemm_course.measure.bench import time_gpu

    X0, W1, W2 = tp.random_layer(256, 128, 512, "float16", seed=1)
    block = tp.TensorParallelMLP(tp.Shards(group, X0, W1, W2), "all-reduce", 3)
    times = block.time_chunk_compute(partial(time_gpu, min_reps=2, max_reps=3, budget_s=0.1))
    assert len(times) == 3 and all(t > 0 for t in times) and times[1] == times[2]  # rows 86, 85, 85
