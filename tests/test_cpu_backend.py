"""The CPU backend: every SIMT level's CUDA C source, run on the CPU, must match a float64 product;
broken kernels (edge guards, barriers) must be caught. Needs a C++ compiler, no GPU.

    time pytest tests/test_cpu_backend.py -p no:cacheprovider -o addopts=""
"""
from __future__ import annotations

import dataclasses
import shutil
import re
import time

import numpy as np
import pytest

import gemm_course as gc
from gemm_course.run import cpu_backend as cb
from gemm_course.levels import Launch, ceil_div

pytestmark = pytest.mark.skipif(
    not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")),
    reason="the CPU backend needs a C++ compiler")

SHAPES = (
    (1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 131),  # odd, square-ish
    (1, 70, 9), (65, 3, 40), (20, 100, 1), (3, 2, 300),    # thin, wide, K=1, long K
    (13, 36, 20), (70, 132, 68),  # N, K multiples of 4: the float4 paths of vectorized levels
)


# --- the correctness sweep -----------------------------------------------------------------------

def _key(setting: dict) -> tuple:
    return tuple(sorted(setting.items()))


def sample_settings(lv: gc.Level, spread: int = 4) -> list[dict]:
    """Deterministic sample: defaults, the showcase settings, the setting with the most threads
    per block, and `spread` settings evenly spaced through valid_settings()."""
    valid = lv.valid_settings()
    picks = [lv.resolve()] + [lv.resolve(**s) for s in lv.showcase]
    picks.append(max(valid, key=lambda s: lv.geometry(64, 64, 64, s).threads_per_block))
    if len(valid) > 1:
        picks += [valid[round(i * (len(valid) - 1) / (spread - 1))] for i in range(spread)]
    unique: dict[tuple, dict] = {}
    for s in picks:
        unique.setdefault(_key(s), s)
    return list(unique.values())


SIMT_CASES = [(lv.id, s) for lv in gc.levels() if not lv.uses_tensor_cores for s in sample_settings(lv)]

_elapsed: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def report_time(request):
    """Print how long the sweep and the whole file took (shown even when output is captured)."""
    start = time.perf_counter()
    yield
    total = time.perf_counter() - start
    line = (f"[cpu backend] correctness sweep: {len(_elapsed)} of {len(SIMT_CASES)} settings × {len(SHAPES)} "
            f"shapes passed in {sum(_elapsed.values()):.1f} s; whole file {total:.1f} s")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("\n" + line)
    else:
        print(line)


@pytest.mark.parametrize("level, params", SIMT_CASES,
                         ids=[f"{lv}-" + "-".join(f"{k}={v}" for k, v in s.items()) for lv, s in SIMT_CASES])
def test_level_matches_float64_on_odd_shapes(level, params):
    start = time.perf_counter()
    for seed, shape in enumerate(SHAPES):
        result = gc.check(level, *shape, seed=seed, backend="cpu", **params)
        assert result.passed, str(result)
    _elapsed[f"{level}{params}"] = time.perf_counter() - start


def test_vector_levels_take_their_vector_path_on_multiples_of_the_width():
    from gemm_course.run.launch import _kernel_params

    for lv in gc.levels():
        if lv.vector_width and not lv.uses_tensor_cores:
            p = lv.resolve()
            for M, N, K in SHAPES:
                A, B = gc.random_operands(M, N, K, seed=0, xp=np)
                C = np.empty((M, N), np.float32)
                expected = N % lv.vector_width == 0 and K % lv.vector_width == 0
                assert _kernel_params(lv, p, A, B, C, N, K)["aligned"] == expected
                if expected:  # a misaligned view of the same numbers takes the scalar path
                    Ab = np.empty(A.size + 1, np.float32)[1:].reshape(A.shape)
                    Ab[...] = A
                    assert not _kernel_params(lv, p, Ab, B, C, N, K)["aligned"]


def test_sweep_covers_every_simt_level():
    simt = {lv.id for lv in gc.levels() if not lv.uses_tensor_cores}
    assert {level for level, _ in SIMT_CASES} == simt
    assert "01_naive" in simt


def test_naive_127_is_fast_once_compiled():
    A, B = gc.random_operands(127, 129, 131, seed=0, xp=np)
    gc.gemm(A, B, "01_naive", backend="cpu")  # compile (or load from the cache)
    start = time.perf_counter()
    C = gc.gemm(A, B, "01_naive", backend="cpu")
    assert time.perf_counter() - start < 0.5
    assert gc.relative_error(C, A.astype(np.float64) @ B.astype(np.float64)) < gc.tolerance("float32", 131)


# --- a broken edge guard -------------------------------------------------------------------------

NAIVE_GUARD = "if (row >= M || col >= N) return;"


def test_too_strict_edge_guard_leaves_elements_unwritten():
    src = gc.kernel_source("01_naive")
    assert NAIVE_GUARD in src
    result = gc.check("01_naive", 33, 65, 17, backend="cpu", source=src.replace(
        NAIVE_GUARD, "if (row >= M - 1 || col >= N) return;"))  # off by one: skips the last row
    assert not result.passed and result.unwritten == 65, str(result)


def _naive(source: str, M: int, N: int, K: int, **kw) -> None:
    """Level 1's default kernel of `source` through the lower-level door (race_check=False possible)."""
    A, B = gc.random_operands(M, N, K, seed=0, xp=np)
    C = np.full((M, N), np.nan, dtype=np.float32)
    cb.launch_kernel(source, "gemm_naive_cols<32, 8>", Launch((ceil_div(N, 32), ceil_div(M, 8), 1), (32, 8, 1)),
                     [A, B, C, M, N, K], names=["A", "B", "C", "M", "N", "K"], source_name="01_naive.cu", **kw)


def test_too_lax_edge_guard_is_an_out_of_bounds_access():
    src = gc.kernel_source("01_naive").replace(NAIVE_GUARD, "if (row > M || col > N) return;")
    # The instrumented build stops at the first one, before it happens: column 65 of B's last row.
    with pytest.raises(cb.KernelMemoryError, match=r"thread \(1,0,0\) of block \(2,0,0\) read B\[17, 0\].*"
                                                   r"past its last element.* at 01_naive\.cu:\d+, out of bounds"):
        gc.check("01_naive", 33, 65, 17, backend="cpu", source=src)
    # The plain build: the reads land in the tail padding; the write into it is found after the launch.
    with pytest.raises(cb.KernelMemoryError, match=r"wrote out of bounds: C\[33, 0\].*past its last"):
        _naive(src, 33, 65, 17, race_check=False)


def test_out_of_bounds_read_is_caught_before_it_happens_or_by_the_guard_page():
    src = gc.kernel_source("01_naive").replace("A[(size_t)row * K + k]", "A[(size_t)row * K + k - 1]")
    with pytest.raises(cb.KernelMemoryError, match=r"thread \(0,0,0\) of block \(0,0,0\) read A\[-1, 16\]"):
        gc.check("01_naive", 33, 65, 17, backend="cpu", source=src)
    with pytest.raises(cb.KernelMemoryError, match=r"thread \(0,0,0\) of block \(0,0,0\) accessed A\[-1, 16\] "
                                                   r".*at 01_naive\.cu:\d+, out of bounds \(caught by a guard page"):
        _naive(src, 33, 65, 17, race_check=False)


def test_misaligned_float4_load_is_caught_as_on_a_gpu():
    if "-fsanitize=alignment" not in cb._flags(tuple(cb.find_compiler()), cb.cache_dir()):
        pytest.skip("this compiler cannot trap on misaligned accesses")
    src = gc.kernel_source("01_naive").replace(
        "float acc = 0.0f;", "float acc = reinterpret_cast<const float4*>(A + (size_t)row * K)->x * 0.0f;")
    assert gc.check("01_naive", 33, 65, 16, backend="cpu", source=src).passed  # rows 64 bytes apart
    with pytest.raises(cb.KernelMemoryError, match=r"thread \(0,1,0\) of block \(0,0,0\).*misaligned access"):
        gc.check("01_naive", 33, 65, 17, backend="cpu", source=src)  # row 1 starts 68 bytes in


def test_wrong_loop_bound_fails_the_check():
    src = gc.kernel_source("01_naive").replace("for (int k = 0; k < K; ++k)", "for (int k = 1; k < K; ++k)")
    assert not gc.check("01_naive", 33, 65, 17, backend="cpu", source=src).passed


def test_uninitialised_accumulator_fails_the_check():
    src = gc.kernel_source("01_naive").replace("float acc = 0.0f;", "float acc;")
    assert not gc.check("01_naive", 33, 65, 17, backend="cpu", source=src).passed


# --- barriers: a test-only shared-memory kernel --------------------------------------------------

TILED = r"""
// Test kernel: each TILE×TILE block computes one TILE×TILE tile of C, staging tiles of A and B
// through shared memory.
template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
tiled_gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
           int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();  // BARRIER 1: the tiles are loaded
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();  // BARRIER 2: everyone is done with the tiles
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
"""


def run_tiled(source: str, tile: int, M: int, N: int, K: int, seed: int = 0, **kw) -> float:
    """Launch the test kernel through the lower-level door; return the relative error."""
    A, B = gc.random_operands(M, N, K, seed=seed, xp=np)
    C = np.full((M, N), np.nan, dtype=np.float32)
    launch = Launch(grid=(ceil_div(N, tile), ceil_div(M, tile), 1), block=(tile, tile, 1))
    cb.launch_kernel(source, f"tiled_gemm<{tile}>", launch, [A, B, C, M, N, K], **kw)
    return gc.relative_error(C, A.astype(np.float64) @ B.astype(np.float64))


@pytest.mark.parametrize("tile", [4, 16, 32])  # 32: a 1024-thread block
def test_tiled_test_kernel_is_correct(tile):
    for M, N, K in ((1, 1, 1), (33, 65, 17), (70, 40, 100)):
        assert run_tiled(TILED, tile, M, N, K) <= gc.tolerance("float32", K)


@pytest.mark.parametrize("barrier", ["BARRIER 1", "BARRIER 2"])
@pytest.mark.parametrize("tile", [4, 16])
def test_a_removed_barrier_gives_a_wrong_result_every_time(barrier, tile):
    # The guarantee (see cuda_cpu_compat.h): threads run one at a time in thread-index order, each
    # until its next barrier. Without BARRIER 1, thread 0 computes before the others have loaded
    # their elements (it reads the NaN that fills shared memory when a block starts); without
    # BARRIER 2, thread 0 overwrites the tiles with the next ones before the others used them.
    # (With the race detector off: this is the schedule's own guarantee.)
    broken = TILED.replace(f"__syncthreads();  // {barrier}", f"// {barrier} removed")
    assert broken != TILED
    for M, N, K in ((33, 65, 17), (70, 40, 100)):
        err = run_tiled(broken, tile, M, N, K, race_check=False)
        assert not err <= gc.tolerance("float32", K), f"missing {barrier} went unnoticed ({err})"


@pytest.mark.parametrize("barrier", ["BARRIER 1", "BARRIER 2"])
def test_the_race_detector_names_both_threads_and_both_lines(barrier):
    broken = TILED.replace(f"__syncthreads();  // {barrier}", f"// {barrier} removed")
    lines = {n + 1 for n, line in enumerate(TILED.splitlines()) if "As[ty][tx] =" in line or "As[ty][k]" in line}
    with pytest.raises(cb.KernelRaceError) as caught:
        run_tiled(broken, 16, 33, 65, 17)
    message = str(caught.value)
    assert "shared-memory race in block (0,0,0): thread (0,0,0)" in message and "thread (1,0,0)" in message
    named = {int(place.split(":")[1]) for place in caught.value.lines}
    assert all(place in message for place in caught.value.lines) and len(named) == 2 and named <= lines | {n + 1 for n, line in enumerate(TILED.splitlines()) if "Bs[" in line}


def test_the_race_detector_is_silent_without_a_race_and_can_be_turned_off():
    assert run_tiled(TILED, 16, 33, 65, 17) <= gc.tolerance("float32", 17)  # on by default, no report
    broken = TILED.replace("__syncthreads();  // BARRIER 1", "// BARRIER 1 removed")
    assert not run_tiled(broken, 16, 33, 65, 17, race_check=False) <= gc.tolerance("float32", 17)  # NaN too


def test_barrier_that_not_all_threads_reach_raises_at_once():
    early_return = TILED.replace("float acc = 0.0f;", "float acc = 0.0f;\n    if (row >= M || col >= N) return;")
    cb.compile_kernel(early_return, "tiled_gemm<16>")  # the time below is the launch only
    start = time.perf_counter()
    with pytest.raises(cb.KernelBarrierError,
                       match=r"__syncthreads\(\) reached by 16 of 256 threads of block \(2,0,0\): "
                             r"a barrier inside a branch that not all threads take\? The barrier is at kernel\.cu:19;"):
        run_tiled(early_return, 16, 20, 33, 17)  # block (2,0,0): columns 32..47, only 32 is in range
    assert time.perf_counter() - start < 5


def test_threads_waiting_at_different_barriers_raise():
    src = TILED.replace("__syncthreads();  // BARRIER 1",
                        "if (tx == 0) {\n            __syncthreads();\n        } else {\n"
                        "            __syncthreads();\n        }  //")
    with pytest.raises(cb.KernelBarrierError, match=r"wait at different __syncthreads\(\).*at kernel\.cu:19.*at kernel\.cu:21\."):
        run_tiled(src, 16, 33, 65, 17)


def test_spin_wait_on_another_thread_times_out():
    src = TILED.replace("float acc = 0.0f;", "float acc = 0.0f;\n    __shared__ volatile int flag;\n"
                        "    if (tx == 1 && ty == 0) flag = 1;\n    while (flag != 1) {}")
    start = time.perf_counter()
    with pytest.raises(cb.KernelTimeoutError, match=r"thread \(0,0,0\) of block \(0,0,0\) ran for 0.5 s"):
        run_tiled(src, 4, 8, 8, 8, timeout_s=0.5)
    assert time.perf_counter() - start < 10
    assert run_tiled(TILED, 4, 8, 8, 8) < 1e-6  # the library is still usable afterwards


# --- pipeline primitives, dynamic shared memory, general arguments -------------------------------

PIPELINED = r"""
#include <cuda_pipeline.h>

// Copy a tile of x into dynamic shared memory asynchronously, then y[i] = alpha * (sum of the
// tile) + bias[i] — with extra scalar and pointer arguments beyond (A, B, C, M, N, K).
template <int T>
__global__ void tile_sum(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                         float alpha, int n)
{
    extern __shared__ __align__(16) float tile[];
    const int i = blockIdx.x * T + threadIdx.x;
    __pipeline_memcpy_async(&tile[threadIdx.x], &x[i < n ? i : 0], sizeof(float), i < n ? 0 : sizeof(float));
    __pipeline_commit();
    __pipeline_wait_prior(0);  // WAIT
    __syncthreads();
    float s = 0.0f;
    for (int j = 0; j < T; ++j) s += tile[j];
    if (i < n) y[i] = alpha * s + bias[i];
}
"""


def _tile_sum(source: str, n: int = 100, T: int = 32, **kw) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x, bias = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    y = np.full(n, np.nan, dtype=np.float32)
    cb.launch_kernel(source, f"tile_sum<{T}>", Launch((ceil_div(n, T), 1, 1), (T, 1, 1), T * 4),
                     [x, bias, y, 0.5, n], names=["x", "bias", "y", "alpha", "n"], **kw)
    xp = np.concatenate([x, np.zeros(ceil_div(n, T) * T - n, np.float32)]).reshape(-1, T)
    expected = 0.5 * np.repeat(xp.sum(axis=1), T)[:n] + bias
    return y, expected


def test_pipeline_copies_dynamic_shared_memory_and_extra_arguments():
    y, expected = _tile_sum(PIPELINED)
    np.testing.assert_allclose(y, expected, rtol=1e-5)
    assert cb.compile_kernel(PIPELINED, "tile_sum<32>").parameters == (
        "const float*", "const float*", "float*", "float", "int")


def test_missing_pipeline_wait_reads_stale_shared_memory():
    broken = PIPELINED.replace("__pipeline_wait_prior(0);  // WAIT", "")
    y, _ = _tile_sum(broken, race_check=False)
    assert np.isnan(y).all()  # the copies land only when the thread waits (here: never)
    with pytest.raises(cb.KernelAsyncCopyError, match=r"thread \(0,0,0\) of block \(0,0,0\) read byte 0 of dynamic "
                                                      r"shared memory at kernel\.cu:\d+, which a cp\.async issued at "
                                                      r"kernel\.cu:\d+ \(by the same thread\)"):
        _tile_sum(broken)


def test_arguments_are_checked_against_the_kernel_signature():
    kernel = cb.compile_kernel(PIPELINED, "tile_sum<32>")
    x = np.zeros(32, np.float32)
    launch = Launch((1, 1, 1), (32, 1, 1), 128)
    with pytest.raises(TypeError, match="takes 5 arguments"):
        kernel.launch(launch, [x, x, x, 1.0])
    with pytest.raises(TypeError, match=r"argument 0 \(A\) of tile_sum<32> is const float\* but the array is float64"):
        kernel.launch(launch, [x.astype(np.float64), x, x, 1.0, 32])
    with pytest.raises(TypeError, match=r"argument 4 \(E\) of tile_sum<32> is int"):
        kernel.launch(launch, [x, x, x, 1.0, 32.5])


# --- the gemm() integration ----------------------------------------------------------------------

def test_gemm_takes_numpy_on_the_cpu_backend_with_the_usual_messages():
    A = np.ones((4, 3), dtype=np.float32)
    C = gc.gemm(A, A.T.copy(), backend="cpu")
    assert isinstance(C, np.ndarray) and np.allclose(C, 3.0)
    with pytest.raises(ValueError, match="float32"):
        gc.gemm(A.astype(np.float64), A.T.copy(), backend="cpu")
    with pytest.raises(ValueError, match="shapes do not match"):
        gc.gemm(A, A, backend="cpu")
    with pytest.raises(ValueError, match="contiguous"):
        gc.gemm(A, A.T, backend="cpu")
    with pytest.raises(TypeError, match=r"numpy\.asarray"):
        gc.gemm(A.tolist(), A.T.copy(), backend="cpu")
    with pytest.raises(ValueError, match="empty"):
        gc.gemm(np.ones((0, 3), np.float32), np.ones((3, 2), np.float32), backend="cpu")
    with pytest.raises(ValueError, match="backend='gpu' is not one of"):
        gc.gemm(A, A.T.copy(), backend="gpu")


@pytest.mark.skipif(gc.gpu_available(), reason="'auto' picks the GPU here")
def test_auto_backend_runs_on_the_cpu_without_a_gpu():
    A, B = gc.random_operands(9, 10, 11, seed=3, xp=np)
    C = gc.gemm(A, B, "01_naive", block_x=16, block_y=4)
    assert gc.relative_error(C, A.astype(np.float64) @ B.astype(np.float64)) < gc.tolerance("float32", 11)
    assert gc.check("01_naive", 9, 10, 11).passed


@pytest.mark.skipif(not any(lv.epilogue for lv in gc.levels()), reason="no epilogue level yet")
def test_epilogue_arguments_reach_the_kernel():
    lv = next(lv for lv in gc.levels() if lv.epilogue)
    A, B = gc.random_operands(37, 44, 29, seed=5, xp=np)
    bias = np.linspace(-1, 1, 44, dtype=np.float32)
    ref = 0.5 * (A.astype(np.float64) @ B.astype(np.float64)) + bias
    C = gc.gemm(A, B, lv, bias=bias, alpha=0.5, activation="relu", backend="cpu")
    assert gc.relative_error(C, np.maximum(ref, 0)) <= gc.tolerance("float32", 29)
    C0 = np.ones((37, 44), np.float32)
    C = gc.gemm(A, B, lv, out=C0, bias=False, alpha=0.5, activation="none", accumulate=True, beta=2.0,
                backend="cpu")
    assert gc.relative_error(C, ref - bias + 2.0) <= gc.tolerance("float32", 29)
    with pytest.raises(ValueError, match="pass it as bias="):
        gc.gemm(A, B, lv, backend="cpu")
    with pytest.raises(ValueError, match=r"bias must be a contiguous numpy.ndarray of shape \(44,\)"):
        gc.gemm(A, B, lv, bias=bias[:40], backend="cpu")


def test_tensor_core_levels_are_refused_clearly():
    tc = dataclasses.replace(gc.get_level("01_naive"), id="99_tensor_cores", uses_tensor_cores=True)
    A = np.ones((4, 4), np.float32)
    with pytest.raises(cb.UnsupportedLevelError, match="99_tensor_cores uses Tensor Cores.*does not emulate"):
        gc.gemm(A, A, tc, backend="cpu")


def test_compile_errors_name_the_kernel_and_the_line():
    src = gc.kernel_source("01_naive").replace("float acc = 0.0f;", "float acc = 0.0f")
    with pytest.raises(cb.CpuCompileError, match=r"(?s)gemm_naive_cols<32, 8>.*01_naive.cu:\d+"):
        gc.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), backend="cpu", source=src)


# --- compiler and cache --------------------------------------------------------------------------

def test_no_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(cb.CompilerNotFoundError, match=r"CXX='no-such-compiler-xyz' is set.*not found"):
        gc.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), backend="cpu")
    monkeypatch.delenv("CXX")
    monkeypatch.setattr(cb, "COMPILERS", ("no-such-g++", "no-such-clang++"))
    with pytest.raises(cb.CompilerNotFoundError, match=r"looked for no-such-g\+\+, no-such-clang\+\+.*CXX"):
        gc.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), backend="cpu")


def _compilations_of(source_file: str, monkeypatch, tmp_path) -> list:
    """An empty cache in tmp_path, nothing loaded in this process, and the compiler commands that compile
    `source_file` (kernel.cpp: a kernel; runtime.cpp: the runtime) from here on, as they run."""
    monkeypatch.setenv(cb.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(cb, "_loaded", {})
    seen = []
    real = cb._run_compiler

    def counting(cmd):
        if any(arg.endswith(source_file) for arg in cmd):
            seen.append(cmd)
        return real(cmd)

    monkeypatch.setattr(cb, "_run_compiler", counting)
    return seen


def test_cache_compiles_once_per_source_and_setting(monkeypatch, tmp_path):
    builds = _compilations_of("kernel.cpp", monkeypatch, tmp_path)
    A, B = gc.random_operands(5, 6, 7, seed=0, xp=np)
    gc.gemm(A, B, "01_naive", backend="cpu", block_x=8)
    assert len(builds) == 1 and len(list(tmp_path.glob("*.so"))) == 1
    gc.gemm(A, B, "01_naive", backend="cpu", block_x=8)       # in-process cache
    monkeypatch.setattr(cb, "_loaded", {})                     # as in a new process:
    gc.gemm(A, B, "01_naive", backend="cpu", block_x=8)       # loaded from disk
    assert len(builds) == 1
    gc.gemm(A, B, "01_naive", backend="cpu", block_x=16)      # another setting
    gc.gemm(A, B, "01_naive", backend="cpu", block_x=8,       # another source
            source=gc.kernel_source("01_naive") + "\n// edited\n")
    assert len(builds) == 3 and len(list(tmp_path.glob("*.so"))) == 3


def test_the_runtime_is_compiled_once_and_rebuilt_when_pruned(monkeypatch, tmp_path):
    """The runtime (the compat header's part 2) is one object per compiler and flags, linked into every kernel's
    library: two kernels compile it once; removed (as pruning may), the next kernel builds it again."""
    runtimes = _compilations_of("runtime.cpp", monkeypatch, tmp_path)
    A, B = gc.random_operands(5, 6, 7, seed=0, xp=np)
    gc.gemm(A, B, "01_naive", backend="cpu", block_x=8)
    gc.gemm(A, B, "01_naive", backend="cpu", block_x=16)
    objects = list((tmp_path / "runtime").glob("*.o"))
    assert len(runtimes) == 1 and len(objects) == 1 and cb.KERNEL_ONLY_FLAG not in runtimes[0]
    objects[0].unlink()
    C = gc.gemm(A, B, "01_naive", backend="cpu", block_x=4)
    assert len(runtimes) == 2 and np.allclose(C, A.astype(np.float64) @ B, rtol=1e-5)


def test_ctrl_c_stops_a_long_launch_within_a_second():
    import os
    import signal
    import threading

    spin = TILED.replace("float acc = 0.0f;", "float acc = 0.0f;\n    for (volatile long i = 0; i >= 0; ++i) {}")
    kernel = cb.compile_kernel(spin, "tiled_gemm<4>")
    A = np.ones((4, 4), np.float32)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        kernel.launch(Launch((1, 1, 1), (4, 4, 1)), [A, A, A.copy(), 4, 4, 4], timeout_s=0)
    assert time.perf_counter() - start < 1.5
    assert run_tiled(TILED, 4, 7, 9, 5) <= gc.tolerance("float32", 5)  # the backend still works after


# --- every message in two languages --------------------------------------------------------------

_CJK = re.compile(r"[\u4e00-\u9fff]")


def assert_bilingual(err: BaseException) -> tuple[str, str]:
    """The course's form: the first line is "English / 中文"; a CpuBackendError also keeps the halves."""
    first = str(err).splitlines()[0].removesuffix(":")  # a compiler's log may follow on the next lines
    if isinstance(err, cb.CpuBackendError):
        en, zh = err.en, err.zh
        assert first == f"{en} / {zh}", first
    else:
        en, _, zh = first.rpartition(" / ")
    assert en and not _CJK.search(en), f"English half: {en!r}"
    assert _CJK.search(zh) and not zh.startswith(en), f"Chinese half: {zh!r}"
    return en, zh


def raised(kind: type, call, *args, **kw) -> BaseException:
    """The exception of type `kind` that call(*args, **kw) raises."""
    with pytest.raises(kind) as caught:
        call(*args, **kw)
    return caught.value


def test_barrier_errors_are_bilingual_and_keep_their_numbers():
    early_return = TILED.replace("float acc = 0.0f;", "float acc = 0.0f;\n    if (row >= M || col >= N) return;")
    err = raised(cb.KernelBarrierError, run_tiled, early_return, 16, 20, 33, 17)
    _, zh = assert_bilingual(err)
    assert (err.kind, err.block, err.waiting, err.total, err.lines) == ("partial", (2, 0, 0), 16, 256, (19,))
    assert "256 个线程中只有 16 个到达了 kernel.cu:19 的 __syncthreads()" in zh and "240 个线程已经从内核返回" in zh
    diverging = TILED.replace("__syncthreads();  // BARRIER 1",
                              "if (tx == 0) {\n            __syncthreads();\n        } else {\n"
                              "            __syncthreads();\n        }  //")
    err = raised(cb.KernelBarrierError, run_tiled, diverging, 16, 33, 65, 17)
    _, zh = assert_bilingual(err)
    assert err.kind == "divergent" and err.lines == (19, 21) and err.threads[0] == (0, 0, 0)
    assert "线程 (0,0,0) 在 kernel.cu:19" in zh and f"线程 {cb._xyz(err.threads[1])} 在 kernel.cu:21" in zh


def test_timeout_is_bilingual():
    src = TILED.replace("float acc = 0.0f;", "float acc = 0.0f;\n    __shared__ volatile int flag;\n"
                        "    if (tx == 1 && ty == 0) flag = 1;\n    while (flag != 1) {}")
    with pytest.raises(cb.KernelTimeoutError) as caught:
        run_tiled(src, 4, 8, 8, 8, timeout_s=0.5)
    _, zh = assert_bilingual(caught.value)
    assert (caught.value.thread, caught.value.seconds) == ((0, 0, 0), 0.5)
    assert "线程块 (0,0,0) 中的线程 (0,0,0) 运行了 0.5 秒" in zh


def test_memory_errors_are_bilingual():
    naive = gc.kernel_source("01_naive")
    lax = naive.replace(NAIVE_GUARD, "if (row > M || col > N) return;")
    with pytest.raises(cb.KernelMemoryError) as caught:  # past the end: the instrumented build's check
        gc.check("01_naive", 33, 65, 17, backend="cpu", source=lax)
    _, zh = assert_bilingual(caught.value)
    assert "越界读取了 B[17, 0]" in zh and "在最后一个元素之后" in zh
    with pytest.raises(cb.KernelMemoryError) as caught:  # past the end: the plain build's tail bytes
        _naive(lax, 33, 65, 17, race_check=False)
    _, zh = assert_bilingual(caught.value)
    assert "越界写入了 C[33, 0]" in zh and "在最后一个元素之后" in zh
    early = naive.replace("A[(size_t)row * K + k]", "A[(size_t)row * K + k - 1]")
    with pytest.raises(cb.KernelMemoryError) as caught:  # before the start: the instrumented build's check
        gc.check("01_naive", 33, 65, 17, backend="cpu", source=early)
    _, zh = assert_bilingual(caught.value)
    assert "越界读取了 A[-1, 16]" in zh and "在第一个元素之前" in zh and caught.value.line in zh
    with pytest.raises(cb.KernelMemoryError) as caught:  # before the start: the plain build's guard page
        _naive(early, 33, 65, 17, race_check=False)
    _, zh = assert_bilingual(caught.value)
    assert caught.value.signal_name in zh and "越界访问了 A[-1, 16]" in zh and "在第一个元素之前" in zh


def test_stack_overflow_and_division_by_zero_are_bilingual():
    deep = TILED.replace("template <int TILE>", "__device__ int depth(int n) {\n    volatile char frame[1024];\n"
                         "    frame[0] = (char)n;\n    return n ? depth(n - 1) + frame[0] : 0;\n}\ntemplate <int TILE>") \
                .replace("float acc = 0.0f;", "float acc = (float)depth(M * 100000);")
    with pytest.raises(cb.KernelMemoryError) as caught:
        run_tiled(deep, 4, 4, 4, 4, race_check=False)
    _, zh = assert_bilingual(caught.value)
    assert "用完了它的 256 KiB 栈" in zh
    divide = TILED.replace("float acc = 0.0f;", "volatile int zero = 0;\n    float acc = (float)(N / zero);")
    with pytest.raises(cb.KernelCrashError) as caught:
        run_tiled(divide, 4, 4, 4, 4, race_check=False)
    _, zh = assert_bilingual(caught.value)
    assert caught.value.signal_name == "SIGFPE" and "除数为零" in zh


def test_bad_launch_configs_are_bilingual():
    kernel = cb.compile_kernel(TILED, "tiled_gemm<4>")
    A = np.ones((4, 4), np.float32)
    for launch, said in ((Launch((1, 1, 1), (64, 32, 1)), "超过了 CUDA 的上限 1024"),
                         (Launch((0, 1, 1), (4, 4, 1)), "都必须至少为 1")):
        with pytest.raises(cb.CpuBackendError) as caught:
            kernel.launch(launch, [A, A, A.copy(), 4, 4, 4])
        assert said in assert_bilingual(caught.value)[1]


def test_the_race_report_is_bilingual():
    broken = TILED.replace("__syncthreads();  // BARRIER 1", "// BARRIER 1 removed")
    err = raised(cb.KernelRaceError, run_tiled, broken, 16, 33, 65, 17)
    en, zh = assert_bilingual(err)
    assert en.startswith("tiled_gemm<16>: shared-memory race in block (0,0,0)")
    assert "共享内存竞争" in zh and all(line in zh for line in err.lines)


def test_compile_and_setup_errors_are_bilingual(monkeypatch):
    src = gc.kernel_source("01_naive").replace("float acc = 0.0f;", "float acc = 0.0f")
    ones = np.ones((2, 2), np.float32)
    with pytest.raises(cb.CpuCompileError) as caught:
        gc.gemm(ones, ones, backend="cpu", source=src)
    _, zh = assert_bilingual(caught.value)
    assert "为 CPU 后端编译 gemm_naive_cols<32, 8> 失败" in zh and "01_naive.cu:" in caught.value.log
    tc = dataclasses.replace(gc.get_level("01_naive"), id="99_tensor_cores", uses_tensor_cores=True)
    with pytest.raises(cb.UnsupportedLevelError) as caught:
        gc.gemm(ones, ones, tc, backend="cpu")
    assert "Tensor Core" in assert_bilingual(caught.value)[1]
    with pytest.raises(ValueError) as caught:
        cb.require_small(1 << 40, "8192×8192×16384")
    assert "乘加" in assert_bilingual(caught.value)[1]
    kernel = cb.compile_kernel(TILED, "tiled_gemm<4>")
    with pytest.raises(TypeError) as caught:
        kernel.launch(Launch((1, 1, 1), (4, 4, 1)), [ones, ones, ones, 2, 2])
    assert "实际传入了 5 个" in assert_bilingual(caught.value)[1]
    with pytest.raises(TypeError) as caught:
        kernel.launch(Launch((1, 1, 1), (4, 4, 1)), [ones.astype(np.float64), ones, ones, 2, 2, 2])
    assert_bilingual(caught.value)
    assert "已在 CPU 后端上中止" in kernel._stopped()
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(cb.CompilerNotFoundError) as caught:
        cb.find_compiler()
    assert "找不到 'no-such-compiler-xyz'" in assert_bilingual(caught.value)[1]
    monkeypatch.delenv("CXX")
    monkeypatch.setattr(cb, "COMPILERS", ("no-such-g++",))
    with pytest.raises(cb.CompilerNotFoundError) as caught:
        cb.find_compiler()
    assert_bilingual(caught.value)


def test_the_grader_shows_the_chinese_half_in_its_chinese_verdict():
    from gemm_course import exercises

    verdict = exercises.grade("02_missing_barrier", exercises.get_exercise("02_missing_barrier").starter)  # a race
    step = verdict.steps[-1]
    assert step.name == "race" and step.passed is False
    assert "shared-memory race" in step.en and not _CJK.search(step.en)
    assert "共享内存竞争" in step.zh and "shared-memory race" not in step.zh


def test_an_epilogue_that_nearly_cancels_is_judged_against_its_terms():
    """At 1×1×1, alpha·a·b + bias (+ beta·c) can nearly cancel: the rounding of those terms is then large next to the
    result, and check() measures the error against the terms' size, as the grader does. These seeds failed when the
    error was taken relative to the result alone (about 1 check in 800 of --all-settings at the small shapes)."""
    from gemm_course.run.check import check

    lv = gc.get_level("06_fused_epilogue")
    tile = dict(BM=16, BN=16, BK=4, TM=1, TN=1)
    for seed, epilogue in ((46, dict(activation="none", bias=True, accumulate=False)),
                           (58, dict(activation="gelu", bias=False, accumulate=True)),
                           (1061, dict(activation="relu", bias=True, accumulate=True))):
        result = check(lv, 1, 1, 1, seed=seed, backend="cpu", **tile, **epilogue)
        assert result.passed, result
    # A kernel that drops the bias still fails, at 1×1×1 and at a larger shape: the missing term is the size of
    # the terms, not of their rounding.
    from gemm_course.run.compile import kernel_source

    source = kernel_source(lv)
    broken = source.replace("if (HAS_BIAS) v += bias[c];", "if (HAS_BIAS) v += 0.0f;")
    assert broken != source
    for shape in ((1, 1, 1), (33, 65, 17)):
        result = check(lv, *shape, seed=46, backend="cpu", source=broken, **tile, activation="none", bias=True,
                       accumulate=False)
        assert not result.passed, result
