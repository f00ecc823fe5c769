"""Tests that need a CUDA GPU (skipped without one; run them on a GPU machine with `pytest tests/test_gpu.py`)."""
import pytest

import gemm_course as gc
from gemm_course.run.check import MULTIPLE_OF_8_SHAPES, ODD_SHAPES

pytestmark = pytest.mark.skipif(not gc.gpu_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("level", [lv.id for lv in gc.levels() if not lv.uses_tensor_cores])
@pytest.mark.parametrize("shape", ODD_SHAPES)
def test_levels_correct_on_odd_shapes(level, shape):
    lv = gc.get_level(level)
    for params in lv.showcase:
        result = gc.check(level, *shape, **params)
        assert result.passed, str(result)


def test_operand_errors_are_clear():
    import cupy

    A = cupy.ones((4, 3), dtype=cupy.float32)
    with pytest.raises(ValueError, match="float32"):
        gc.gemm(A.astype(cupy.float64), A.T.copy())
    with pytest.raises(ValueError, match="shapes do not match"):
        gc.gemm(A, A)
    with pytest.raises(ValueError, match="contiguous"):
        gc.gemm(A, A.T)
    with pytest.raises(TypeError, match="cupy.asarray"):
        gc.gemm(A.get(), A.T.copy())
    with pytest.raises(ValueError, match="empty"):
        gc.gemm(cupy.ones((0, 3), cupy.float32), cupy.ones((3, 2), cupy.float32))


def test_kernel_cache_returns_same_object():
    from gemm_course.run.compile import get_kernel

    p = gc.get_level("01_naive").resolve(block_x=16)
    assert get_kernel("01_naive", p) is get_kernel("01_naive", p)


def test_a_broken_kernel_fails_the_check():
    src = gc.kernel_source("01_naive").replace("for (int k = 0; k < K; ++k)", "for (int k = 1; k < K; ++k)")
    assert not gc.check("01_naive", 33, 65, 17, source=src).passed


def test_timing_harness_reports_spread():
    import cupy

    A, B = gc.random_operands(512, 512, 512)
    t = gc.time_gpu(lambda: cupy.matmul(A, B), min_reps=5, max_reps=10, budget_s=0.1)
    assert 5 <= t.reps <= 10 and 0 < t.min_ms <= t.q1_ms <= t.median_ms <= t.q3_ms <= t.max_ms


@pytest.mark.parametrize("level", ["07_vectorized", "08_warp_tiling"])
def test_vector_levels_are_correct_on_misaligned_pointers(level):
    """Views that start 4 bytes into an allocation break 16-byte alignment: the scalar path must run."""
    import cupy

    M, N, K = 130, 132, 68  # N and K multiples of 4, so only the pointers are misaligned
    _, A_buf = gc.random_operands(1, M * K + 1, 1)  # the second operand is 1 × (M·K + 1)
    _, B_buf = gc.random_operands(1, K * N + 1, 1)
    A, B = A_buf.ravel()[1:].reshape(M, K), B_buf.ravel()[1:].reshape(K, N)
    assert A.data.ptr % 16 and A.flags.c_contiguous
    C = gc.gemm(A, B, level)
    ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
    assert gc.relative_error(C, ref) <= gc.tolerance("float32", K)


def test_fused_epilogue_matches_unfused():
    import cupy

    A, B = gc.random_operands(257, 260, 129)
    bias = (2 * cupy.random.default_rng(3).random(260) - 1).astype(cupy.float32)
    ref = A.astype(cupy.float64) @ B.astype(cupy.float64) * 0.5 + bias
    C = gc.gemm(A, B, "06_fused_epilogue", bias=bias, alpha=0.5, activation="relu")
    assert gc.relative_error(C, cupy.maximum(ref, 0)) <= gc.tolerance("float32", 129)


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() < 70, reason="needs sm_70+")
def test_wmma_level_on_odd_and_aligned_shapes():
    for shape in ((1, 1, 1), (33, 65, 17), (127, 129, 131), (257, 520, 100)):
        for params in ({}, {"BM": 128, "BN": 128}, {"BM": 32, "BN": 64}):
            result = gc.check("09_wmma", *shape, **params)
            assert result.passed, str(result)
    for shape in ((16, 16, 16), (64, 48, 32), (512, 256, 1024)):
        result = gc.check("09_wmma", *shape, staging="none")
        assert result.passed, str(result)
    A, B = gc.random_operands(33, 65, 17, "float16")
    with pytest.raises(ValueError, match="multiples of 16"):
        gc.gemm(A, B, "09_wmma", staging="none")


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() < 80, reason="needs sm_80+")
def test_wmma_pipelined_correct_and_preconditions_enforced():
    settings = ({"BM": 128, "BN": 128}, {"BM": 128, "BN": 256, "WN": 64, "stages": 4},
                {"BM": 256, "BN": 128, "WN": 64, "stages": 2}, {"BM": 32, "BN": 32, "WM": 32, "WN": 32})
    for shape in ((1, 8, 8), (33, 64, 40), (127, 136, 264), (257, 520, 1000), (1000, 8, 16), (300, 1024, 2048)):
        for params in settings:
            for dtype in ("float16", "bfloat16"):
                result = gc.check("09_wmma", *shape, dtype=dtype, staging="pipelined", **params)
                assert result.passed, str(result)
    A, B = gc.random_operands(33, 65, 17, "float16")
    with pytest.raises(ValueError, match="multiples of 8"):
        gc.gemm(A, B, "09_wmma", staging="pipelined")
    # views two bytes into an allocation: not 16-byte aligned, so the element-by-element copies run
    M, N, K = 130, 136, 72
    ref_A, ref_B = gc.random_operands(M, N, K, "float16")
    _, buf = gc.random_operands(1, M * K + K * N + 2, 1, "float16")
    A = buf.ravel()[1:M * K + 1].reshape(M, K)
    B = buf.ravel()[M * K + 2:M * K + K * N + 2].reshape(K, N)
    A[...], B[...] = ref_A, ref_B
    assert A.data.ptr % 16
    C = gc.gemm(A, B, "09_wmma", staging="pipelined", BM=128, BN=128)
    assert gc.relative_error(C, ref_A.astype("float64") @ ref_B.astype("float64")) <= gc.tolerance("float16", K)


def test_notebook_calls_measure_live_on_a_gpu():
    """The promise 'with a GPU everything is measured live': the notebooks' calls, at small sizes."""
    records = gc.notebook.performance("02_smem_tiling", sizes=(256, 512))
    assert {r["level"] for r in records} == {"cublas", "02_smem_tiling"} and all(r["reps"] >= 5 for r in records)
    bars = gc.notebook.compare([("01_naive", {}), ("08_warp_tiling", {})], size=512)
    assert [r["level"] for r in bars] == ["cublas", "01_naive", "08_warp_tiling"]
    assert len(gc.notebook.check_table("09_wmma", shapes=[(33, 65, 17)])) == 1
    ladder = gc.notebook.ladder(sizes=(256,))
    assert {r["level"] for r in ladder} >= {"01_naive", "08_warp_tiling", "cublas"}
    tuned = gc.autotune.autotune("05_register_blocking", [256], configs=[{}, {"BM": 64, "BN": 64, "TM": 4, "TN": 4}])
    assert len(tuned["table"]) == 2 and "256x256x256" in tuned["best"]
    panel = gc.widgets.explorer("03_coalescing_banks", size=1024, sizes=(1024,))
    assert panel.children  # built, and its first update measured live without raising


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() < 80, reason="needs sm_80+")
def test_mma_pipeline_level_correct_and_preconditions_enforced():
    for shape in ((1, 8, 8), (33, 64, 40), (127, 136, 264), (257, 520, 1000), (1000, 8, 16), (300, 1024, 2048)):
        for params in ({"stages": 2}, {"stages": 3}, {"stages": 4}, {"stages": 4, "BN": 256}, {"stages": 2, "BN": 256}):
            result = gc.check("10_mma_pipeline", *shape, **params)
            assert result.passed, str(result)
    A, B = gc.random_operands(33, 65, 17, "float16")
    with pytest.raises(ValueError, match="multiples of 8"):
        gc.gemm(A, B, "10_mma_pipeline")
    _, buf = gc.random_operands(1, 64 * 64 + 8, 1, "float16")
    with pytest.raises(ValueError, match="16-byte boundary"):
        gc.gemm(buf.ravel()[1:64 * 64 + 1].reshape(64, 64), buf.ravel()[:64 * 64].reshape(64, 64), "10_mma_pipeline")


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() < 80, reason="needs sm_80+")
@pytest.mark.parametrize("level", ["09_wmma", "10_mma_pipeline"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_core_showcase_settings_on_odd_shapes(level, dtype):
    """Every recorded setting of Levels 9 and 10, in both input types, on every odd shape it accepts."""
    lv, cc = gc.get_level(level), gc.device.compute_capability()
    for params in lv.showcase:
        resolved = lv.resolve(**params)
        if not lv.setting_runs_on(cc, resolved):
            continue
        for shape in ODD_SHAPES + MULTIPLE_OF_8_SHAPES:
            if lv.shape_rules(*shape, resolved):
                continue
            result = gc.check(level, *shape, dtype=dtype, **params)
            assert result.passed, str(result)


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() < 80, reason="needs sm_80+")
def test_tensor_core_levels_take_bfloat16():
    for shape in ((1, 8, 8), (33, 64, 40), (127, 136, 264), (257, 520, 1000)):
        for level, params in (("09_wmma", {}), ("09_wmma", {"BM": 128, "BN": 128}), ("10_mma_pipeline", {"stages": 4}),
                              ("10_mma_pipeline", {"stages": 4, "BN": 256})):
            result = gc.check(level, *shape, dtype="bfloat16", **params)
            assert result.passed, str(result)
    result = gc.check("09_wmma", 64, 48, 32, dtype="bfloat16", staging="none")
    assert result.passed, str(result)
    A, B = gc.random_operands(64, 64, 64, "float16")
    with pytest.raises(ValueError, match="same dtype"):
        gc.gemm(A, gc.dtypes.to_bfloat16(B.astype("float32")), "10_mma_pipeline")


HOPPER_SHAPES = ((1, 8, 8), (7, 16, 40), (33, 64, 72), (127, 136, 264), (129, 264, 1000), (257, 520, 1000),
                 (1000, 8, 16), (300, 1032, 2048), (4097, 264, 64), (1024, 1024, 1024))


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() < 90, reason="needs sm_90+")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mma_pipeline_fed_by_tma_on_odd_shapes(dtype):
    """Level 10 with copy='tma': every stage count, edges in M, N and K, k-tiles that wrap the ring
    many times (K = 3000: 47 k-tiles of 64), and a partial last k-tile."""
    for shape in HOPPER_SHAPES + ((2000, 1040, 3000),):
        for stages in (2, 3, 4):
            result = gc.check("10_mma_pipeline", *shape, dtype=dtype, stages=stages, BN=256, copy="tma")
            assert result.passed, str(result)
    with pytest.raises(ValueError, match="BN=256"):
        gc.gemm(*gc.random_operands(64, 64, 64, dtype), "10_mma_pipeline", copy="tma")


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() != 90, reason="needs sm_90 (Hopper)")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_hopper_level_correct_on_odd_shapes(dtype):
    for shape in HOPPER_SHAPES:
        for params in gc.get_level("11_hopper_wgmma").showcase:
            result = gc.check("11_hopper_wgmma", *shape, dtype=dtype, **params)
            assert result.passed, str(result)


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() != 90, reason="needs sm_90 (Hopper)")
def test_hopper_level_preconditions_and_many_tiles():
    for step, stages in ((2, 2), (3, 3), (4, 2), (5, 2), (6, 2), (6, 3)):  # a ring that wraps many times
        for c_type in ("float32", "input"):
            result = gc.check("11_hopper_wgmma", 2000, 1040, 3000, step=step, stages=stages, c_type=c_type)
            assert result.passed, str(result)
    # Steps 5 and 6: more pairs of tiles than clusters fit at once, an odd count of tile rows (the last
    # cluster's second block lies wholly below M) and pieces of C that TMA must clip.
    for step in (5, 6):
        for shape in ((8200, 1032, 200), (136, 4104, 72)):
            result = gc.check("11_hopper_wgmma", *shape, step=step, c_type="input")
            assert result.passed, str(result)
    A, B = gc.random_operands(33, 65, 17, "bfloat16")
    with pytest.raises(ValueError, match="multiples of 8"):
        gc.gemm(A, B, "11_hopper_wgmma")
    A, B = gc.random_operands(64, 64, 64, "float32")
    with pytest.raises(ValueError, match="to_bfloat16"):
        gc.gemm(A, B, "11_hopper_wgmma")
    with pytest.raises(ValueError, match="stages at 4"):
        gc.gemm(A, B, "11_hopper_wgmma", step=1, stages=2)


# Step 7 (stream-K) at shapes where its schedule splits pairs of tiles between clusters: a few pairs with long K
# (a dozen clusters per pair), whole rounds before the stream-K part, a decode shape, rows of a pair below M.
STREAM_K_SHAPES = ((257, 520, 1000), (300, 1032, 2048), (2000, 2056, 1000), (3000, 3000, 520), (64, 2112, 7168),
                   (4096, 4096, 4096))


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() != 90, reason="needs sm_90 (Hopper)")
def test_hopper_stream_k_correct_where_it_splits_and_the_same_bit_for_bit():
    import cupy

    from gemm_course.models import stream_k_summary

    lv = gc.get_level("11_hopper_wgmma")
    for shape in STREAM_K_SHAPES:
        for c_type in ("float32", "input"):
            for stages in (2, 4):
                params = lv.resolve(step=7, stages=stages, c_type=c_type)
                clusters = lv.geometry(*shape, params).grid[0] // 2
                assert stream_k_summary(*shape, clusters)["split_pairs"] > 0, shape  # the fixup really runs
                result = gc.check(lv.id, *shape, step=7, stages=stages, c_type=c_type)
                assert result.passed, str(result)
    # Whichever cluster sums a split pair, it adds the parts in k order: the same C every time, and the same on a
    # second stream (which has its own counters and workspace).
    A, B = gc.random_operands(3000, 3000, 520, "bfloat16")
    first = gc.gemm(A, B, lv.id, step=7)
    for _ in range(5):
        assert bool((gc.gemm(A, B, lv.id, step=7) == first).all())
    out = cupy.full_like(first, cupy.nan)
    with cupy.cuda.Stream():
        gc.gemm(A, B, lv.id, step=7, out=out)
        gc.gemm(A, B, lv.id, step=7, out=out)  # the packed launch, on this stream's counters
        cupy.cuda.get_current_stream().synchronize()
    assert bool((out == first).all())
    with pytest.raises(ValueError, match="steps 5 and 6 only"):
        gc.gemm(A, B, lv.id, step=7, arrive_scope="cluster")


@pytest.mark.parametrize("level", [lv.id for lv in gc.levels() if lv.batched])
def test_batched_levels_on_odd_shapes(level):
    for batch, shape in ((3, (33, 65, 17)), (5, (127, 129, 131)), (2, (257, 64, 1000)), (64, (64, 64, 64))):
        for params in gc.get_level(level).showcase:
            result = gc.check(level, *shape, batch=batch, **params)
            assert result.passed, str(result)


@pytest.mark.skipif(not gc.gpu_available() or gc.device.compute_capability() < 80, reason="needs sm_80+")
def test_peak_probes_and_level10_parts():
    """The ceilings are ceilings: no probe is slower than the real kernels it bounds, and Level 10's
    whole kernel is not faster than either of its parts alone."""
    from gemm_course.measure import peak

    rows = peak.measure_peaks(["ffma", "mma_sync_bf16", "warp_tile_64x64_ldmatrix"], progress=lambda _: None)
    assert all(r["reps"] >= 5 and r["tflops"] > 0 for r in rows)
    assert peak.ceiling(rows, "mma_sync_bf16")["tflops"] > 5 * peak.ceiling(rows, "ffma")["tflops"]
    whole, = peak.pipeline_parts([2048], settings=[{"stages": 4}], progress=lambda _: None)
    assert whole["all"]["median_ms"] >= 0.95 * max(whole["copies"]["median_ms"], whole["math"]["median_ms"])
    assert peak.ceiling(rows, "warp_tile_64x64_ldmatrix")["tflops"] > whole["all"]["tflops"]


def test_level0_kernels_run_on_the_gpu():
    """Level 0's run_kernel on a GPU: the same kernels and results as on the CPU backend."""
    import numpy as np

    from gemm_course.display import primer

    n = 1025
    a, b = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    c = np.full(n, np.nan, dtype=np.float32)
    assert primer.run_kernel(primer.VECTOR_ADD, "vector_add", primer.ceil_div(n, 256), 256, [a, b, c, n]) == "cuda"
    assert np.array_equal(c, a + b)
    M, N, K = 33, 65, 17
    rng = np.random.default_rng(0)
    A, B = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    grid = (primer.ceil_div(N, 16), primer.ceil_div(M, 16))
    primer.run_kernel(primer.NAIVE_GEMM, "gemm_naive", grid, (16, 16), [A, B, C, M, N, K])
    assert np.abs(C - A.astype(np.float64) @ B).max() < 1e-5
    x = np.arange(16, dtype=np.float32)
    primer.run_kernel(primer.REVERSE, "reverse_each_block", 2, 8, [x])
    assert np.array_equal(x, np.concatenate([np.arange(8)[::-1], np.arange(8, 16)[::-1]]).astype(np.float32))
    rows = 100
    X = rng.random((rows, 16), dtype=np.float32)  # row_norms reads 16 floats a row and sums their squares
    norms = np.full(rows, np.nan, dtype=np.float32)
    primer.run_kernel(primer.FEATURES, "row_norms<64>", primer.ceil_div(rows, 64), 64, [X, norms, rows])
    assert np.allclose(norms, (X.astype(np.float64) ** 2).sum(axis=1), rtol=1e-5)


def test_fp8_quantisation_on_cupy_matches_numpy():
    """The FP8 helpers take CuPy arrays too and give the same bits, scales and reference product."""
    import cupy
    import numpy as np

    from gemm_course.fp8 import formats as fp8

    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((300, 1000)), rng.standard_normal((260, 1000))
    bits, scale = fp8.quantize_per_tensor(cupy.asarray(a))
    assert (cupy.asnumpy(bits) == fp8.quantize_per_tensor(a)[0]).all() and float(scale) == fp8.quantize_per_tensor(a)[1]
    on_cpu = fp8.quantize_rows_1x128(a) + fp8.quantize_blocks_128x128(b)
    on_gpu = fp8.quantize_rows_1x128(cupy.asarray(a)) + fp8.quantize_blocks_128x128(cupy.asarray(b))
    for x, y in zip(on_gpu, on_cpu):
        assert (cupy.asnumpy(x) == y).all()
    reference = fp8.reference_gemm_fp8(*on_cpu)
    assert abs(cupy.asnumpy(fp8.reference_gemm_fp8(*on_gpu)) - reference).max() <= 1e-12 * abs(reference).max()


# --- exercises whose result only a GPU can check ----------------------------------------------------------

def _tensor_core_exercises():
    from gemm_course import exercises as ex
    from gemm_course.levels import get_level

    return [e for e in ex.exercises() if e.runner == "tensor_core" and get_level(e.level).setting_runs_on(
        gc.device.compute_capability(), get_level(e.level).resolve(**e.params))] if gc.gpu_available() else []


@pytest.mark.parametrize("exercise", _tensor_core_exercises(), ids=lambda e: e.id)
def test_tensor_core_exercise_solutions_are_right_on_the_gpu(exercise):
    """Without a GPU their verdict is "compiled, not verified"; on one the grader runs them on odd shapes
    against the float64 reference and times them against the level's kernel and cuBLAS."""
    from gemm_course import exercises as ex

    verdict = ex.grade(exercise.id, exercise.solution, seed=1)
    assert verdict.status == "solved", str(verdict)
    assert any(s.name == "gpu" and s.passed for s in verdict.steps) and any(s.name == "speed" for s in verdict.steps)
    print("\n".join(verdict.lines("en")))
