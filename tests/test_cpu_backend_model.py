"""The CPU backend models what a GPU does where a learner's kernel can get it wrong: cp.async lands only
at its wait, reads past an array's end are reported, a trap names its line, a race names the shared
element and whether it crosses loop iterations, and the access profile covers more than the first
block (with the ordered accesses of each thread for ordering checks). Each test uses a small kernel
of its own that a plain C++ emulation would let through. Needs a C++ compiler, no GPU.
"""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import gemm_course as gc
from gemm_course.run import cpu_backend as cb
from gemm_course.inspect import warp_access
from gemm_course.levels import Launch, ceil_div

pytestmark = pytest.mark.skipif(
    not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")),
    reason="the CPU backend needs a C++ compiler")

_CJK = re.compile(r"[\u4e00-\u9fff]")
NAME = "my_kernel.cu"


def line_of(source: str, marker: str) -> int:
    """1-based line of the only line of source containing marker."""
    found = [n + 1 for n, line in enumerate(source.splitlines()) if marker in line]
    assert len(found) == 1, (marker, found)
    return found[0]


def assert_both_languages(err: cb.CpuBackendError) -> None:
    assert str(err).splitlines()[0] == f"{err.en} / {err.zh}"
    assert not _CJK.search(err.en) and _CJK.search(err.zh)


def assert_lines_named(err: cb.CpuBackendError, name: str = NAME) -> None:
    """Every source place the message gives is the learner's file:line, in both halves."""
    for half in (err.en, err.zh):
        places = re.findall(r"([\w.]+\.(?:cu|cuh|h)):(\d+)", half)
        assert places and all(file == name for file, _ in places), half


# --- 1. cp.async completes only at its wait ---------------------------------------------------------

# Each thread copies one element of x into a shared tile with common.cuh's copy_async, waits, and
# after a barrier reads its right neighbour's element.
COPY_TILE = r"""
#include "common.cuh"

template <int T>
__global__ void neighbour_sum(const float* __restrict__ x, float* __restrict__ y, int n)
{
    __shared__ float tile[T];
    const int i = blockIdx.x * T + threadIdx.x;
    copy_async<4>(&tile[threadIdx.x], i < n ? x + i : x, i < n);  // COPY
    copy_async_commit();
    copy_async_wait_all();  // WAIT
    __syncthreads();  // BARRIER
    const float right = tile[(threadIdx.x + 1) % T];  // READ
    if (i < n) y[i] = tile[threadIdx.x] + right;  // OWN
}
"""


def run_copy_tile(source: str, n: int = 50, T: int = 16, **kw) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(1, n + 1, dtype=np.float32)
    y = np.full(n, np.nan, np.float32)
    cb.launch_kernel(source, f"neighbour_sum<{T}>", Launch((ceil_div(n, T), 1, 1), (T, 1, 1)), [x, y, n],
                     names=["x", "y", "n"], source_name=NAME, **kw)
    padded = np.concatenate([x, np.zeros(ceil_div(n, T) * T - n, np.float32)]).reshape(-1, T)
    return y, (padded + np.roll(padded, -1, axis=1)).reshape(-1)[:n]


def test_copy_async_with_its_wait_is_correct():
    y, expected = run_copy_tile(COPY_TILE)
    np.testing.assert_array_equal(y, expected)


def test_a_barrier_does_not_complete_another_threads_copy():
    broken = COPY_TILE.replace("copy_async_wait_all();  // WAIT", "")
    with pytest.raises(cb.KernelAsyncCopyError) as caught:
        run_copy_tile(broken)
    err = caught.value
    assert isinstance(err, cb.CpuBackendError)
    assert (err.block, err.thread, err.issuer, err.action) == ((0, 0, 0), (0, 0, 0), (1, 0, 0), "read")
    assert err.element == "tile[1]" and not err.issuer_returned
    assert err.lines == (f"{NAME}:{line_of(COPY_TILE, '// READ')}", f"{NAME}:{line_of(COPY_TILE, '// COPY')}")
    assert (f"thread (0,0,0) of block (0,0,0) read tile[1] at {err.lines[0]}, which a cp.async issued at "
            f"{err.lines[1]} (by thread (1,0,0)) writes, before that copy was waited for") in err.en
    assert f"在 {err.lines[0]} 读取了 tile[1]" in err.zh and "还没有被等待" in err.zh
    assert_both_languages(err)
    assert_lines_named(err)


def test_without_the_race_check_a_missing_wait_reads_stale_shared_memory():
    y, _ = run_copy_tile(COPY_TILE.replace("copy_async_wait_all();  // WAIT", ""), race_check=False)
    assert np.isnan(y).all()  # nothing landed: shared memory still holds its NaN fill


def test_a_thread_reading_its_own_copy_before_the_wait_is_reported():
    early = COPY_TILE.replace("    copy_async_commit();\n", "    copy_async_commit();\n    y[0] = tile[threadIdx.x];  // EARLY\n")
    with pytest.raises(cb.KernelAsyncCopyError) as caught:
        run_copy_tile(early)
    err = caught.value
    assert err.thread == err.issuer == (0, 0, 0) and err.element == "tile[0]"
    assert err.lines[0] == f"{NAME}:{line_of(early, '// EARLY')}" and "by the same thread" in err.en


def test_the_wait_without_a_barrier_is_a_race_with_the_copy():
    # Thread t waits for its own copy, then reads thread t+1's element, which t+1 copies later:
    # on a GPU that copy may land before or after the read.
    no_barrier = COPY_TILE.replace("__syncthreads();  // BARRIER", "")
    with pytest.raises(cb.KernelRaceError) as caught:
        run_copy_tile(no_barrier)
    err = caught.value
    assert err.element == "tile[1]" and err.actions == ("read", "wrote")
    assert err.lines == (f"{NAME}:{line_of(COPY_TILE, '// READ')}", f"{NAME}:{line_of(COPY_TILE, '// COPY')}")


def test_copies_a_thread_returns_without_waiting_for_never_complete():
    # Thread 0 issues its copy and returns; thread 1 then reads that element (no barrier can follow
    # an early return). The copy was never waited for, so nothing orders it before the read.
    src = COPY_TILE.replace("    copy_async_commit();\n    copy_async_wait_all();  // WAIT\n    __syncthreads();  // BARRIER\n",
                            "    copy_async_commit();\n    if (threadIdx.x == 0) return;  // RETURN\n"
                            "    copy_async_wait_all();\n    y[i] = tile[threadIdx.x - 1];  // LEFT\n    return;\n")
    with pytest.raises(cb.KernelAsyncCopyError) as caught:
        run_copy_tile(src)
    err = caught.value
    assert (err.thread, err.issuer, err.issuer_returned) == ((1, 0, 0), (0, 0, 0), True)
    assert "returned from the kernel without waiting" in err.en and "没有等待自己的拷贝就从内核返回" in err.zh


PIPELINE_PRIMITIVES = r"""
#include <cuda_pipeline.h>

template <int T>
__global__ void reverse(const float* __restrict__ x, float* __restrict__ y)
{
    __shared__ float tile[2][T];
    const int t = threadIdx.x;
    __pipeline_memcpy_async(&tile[0][t], &x[t], sizeof(float));
    __pipeline_commit();
    __pipeline_memcpy_async(&tile[1][t], &x[T + t], sizeof(float));
    __pipeline_commit();
    __pipeline_wait_prior(1);  // the first batch only
    __syncthreads();
    y[t] = tile[0][T - 1 - t];
    y[T + t] = tile[1][T - 1 - t];  // SECOND
}
"""


def test_wait_prior_completes_only_the_older_batches():
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    with pytest.raises(cb.KernelAsyncCopyError) as caught:
        cb.launch_kernel(PIPELINE_PRIMITIVES, "reverse<16>", Launch((1, 1, 1), (16, 1, 1)), [x, y], source_name=NAME)
    assert caught.value.element == "tile[1][15]" and caught.value.issuer == (15, 0, 0)
    assert caught.value.lines[0] == f"{NAME}:{line_of(PIPELINE_PRIMITIVES, '// SECOND')}"
    fixed = PIPELINE_PRIMITIVES.replace("__pipeline_wait_prior(1);", "__pipeline_wait_prior(0);")
    cb.launch_kernel(fixed, "reverse<16>", Launch((1, 1, 1), (16, 1, 1)), [x, y])
    np.testing.assert_array_equal(y, np.concatenate([x[:16][::-1], x[16:][::-1]]))


@pytest.mark.parametrize("level, params, wait", [
    ("04_double_buffering", {"copy": "cp_async"}, "if (COPY == 1) copy_async_wait_all();"),
    ("05_register_blocking", {}, "        copy_async_wait_all();\n        __syncthreads();\n    }\n}"),
])
def test_a_shipped_kernel_without_its_wait_is_reported(level, params, wait):
    src = gc.kernel_source(level)
    assert src.count(wait) == 1
    broken = src.replace(wait, wait.replace("copy_async_wait_all();", ""))
    assert gc.check(level, 33, 65, 40, backend="cpu", source=src, **params).passed
    with pytest.raises(cb.KernelAsyncCopyError) as caught:
        gc.check(level, 33, 65, 40, backend="cpu", source=broken, **params)
    assert caught.value.lines[1].startswith(gc.get_level(level).source + ":")  # the copy's line, not common.cuh's


# --- 2. reads past the end of an array --------------------------------------------------------------

TILED = r"""
template <int TILE>
__global__ void tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;  // LOAD A
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;  // LOAD B
        __syncthreads();  // BARRIER 1
        for (int k = 0; k < TILE; ++k)
            acc = fmaf(As[ty][k], Bs[k][tx], acc);  // COMPUTE
        __syncthreads();  // BARRIER 2
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
"""


def run_tiled(source: str, M: int = 33, N: int = 65, K: int = 17, tile: int = 16, **kw) -> float:
    A, B = gc.random_operands(M, N, K, seed=0, xp=np)
    C = np.full((M, N), np.nan, np.float32)
    cb.launch_kernel(source, f"tiled<{tile}>", Launch((ceil_div(N, tile), ceil_div(M, tile), 1), (tile, tile, 1)),
                     [A, B, C, M, N, K], names=["A", "B", "C", "M", "N", "K"], source_name=NAME, **kw)
    return gc.relative_error(C, A.astype(np.float64) @ B.astype(np.float64))


def test_the_tiled_kernel_is_correct():
    assert run_tiled(TILED) <= gc.tolerance("float32", 17)


def test_a_missing_load_guard_is_an_out_of_bounds_read_not_nan():
    # B's guard removed: the last k-tile (k0 = 16 of K = 17) reads rows 17.. of a 17-row B.
    unguarded = TILED.replace("(k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f",
                              "B[(size_t)(k0 + ty) * N + col]")
    with pytest.raises(cb.KernelMemoryError) as caught:
        run_tiled(unguarded)
    err = caught.value
    assert (err.array, err.write, err.index, err.block) == ("B", False, (17, 0), (0, 0, 0))
    assert err.thread == (0, 1, 0) and err.signal_name == ""
    assert err.line == f"{NAME}:{line_of(TILED, '// LOAD B')}"
    assert f"thread (0,1,0) of block (0,0,0) read B[17, 0] (element 1105, past its last element; B is 17×65) at {err.line}" in err.en
    assert f"在 {err.line} 越界读取了 B[17, 0]" in err.zh
    assert_both_languages(err)
    assert_lines_named(err)


def test_a_read_thousands_of_elements_past_the_end_names_the_array():
    far = TILED.replace("A[(size_t)row * K + k0 + tx]", "A[(size_t)row * K + k0 + tx + 5000]")
    for race_check in (True, False):  # the instrumented build before the access; the plain one by its fault
        with pytest.raises(cb.KernelMemoryError) as caught:
            run_tiled(far, race_check=race_check)
        err = caught.value
        assert err.array == "A" and err.index == divmod(5000, 17) and err.thread == (0, 0, 0), str(err)
        assert err.line == f"{NAME}:{line_of(TILED, '// LOAD A')}", str(err)


def test_an_out_of_bounds_write_is_reported_before_it_happens():
    lax = TILED.replace("if (row < M && col < N)", "if (row <= M && col < N)")
    with pytest.raises(cb.KernelMemoryError) as caught:
        run_tiled(lax)
    err = caught.value
    assert (err.array, err.write, err.index) == ("C", True, (33, 0))
    assert "wrote C[33, 0]" in err.en and "越界写入了 C[33, 0]" in err.zh


def test_a_read_before_the_start_is_reported():
    before = TILED.replace("A[(size_t)row * K + k0 + tx]", "A[(size_t)row * K + k0 + tx - 1]")
    with pytest.raises(cb.KernelMemoryError) as caught:
        run_tiled(before)
    assert (caught.value.array, caught.value.index) == ("A", (-1, 16))
    assert "before its first element" in caught.value.en and "在第一个元素之前" in caught.value.zh


# --- 3. a trap or a fault names its line ------------------------------------------------------------

@pytest.mark.parametrize("race_check", [True, False])
def test_a_trap_and_a_division_by_zero_name_their_line(race_check):
    trap = TILED.replace("    if (row < M && col < N)\n", "    if (acc != acc) __trap();  // TRAP\n    if (row < M && col < N)\n")
    trap = trap.replace("float acc = 0.0f;", "float acc = 0.0f * __int_as_float(0x7fc00000);")  # NaN: every thread traps
    with pytest.raises(cb.KernelCrashError) as caught:
        run_tiled(trap, race_check=race_check)
    err = caught.value
    assert err.line == f"{NAME}:{line_of(trap, '// TRAP')}" and "called __trap()" in err.en and err.signal_name == "SIGILL"
    assert_lines_named(err)
    divide = TILED.replace("float acc = 0.0f;", "volatile int zero = 0;\n    float acc = (float)(N / zero);  // DIVIDE")
    with pytest.raises(cb.KernelCrashError) as caught:
        run_tiled(divide, race_check=race_check)
    err = caught.value
    assert err.signal_name == "SIGFPE" and err.line == f"{NAME}:{line_of(divide, '// DIVIDE')}"
    assert f"divided an integer by zero at {err.line}" in err.en and f"在 {err.line} 做了除数为零的整数除法" in err.zh


def test_a_misaligned_float4_load_names_its_line():
    if "-fsanitize=alignment" not in cb._flags(tuple(cb.find_compiler()), cb.cache_dir()):
        pytest.skip("this compiler cannot trap on misaligned accesses")
    vec = TILED.replace("float acc = 0.0f;",
                        "float acc = reinterpret_cast<const float4*>(A + (size_t)row * K)->x * 0.0f;  // VEC")
    with pytest.raises(cb.KernelMemoryError) as caught:
        run_tiled(vec, race_check=False)  # row 1 starts 68 bytes in
    assert caught.value.line == f"{NAME}:{line_of(vec, '// VEC')}" and "misaligned access" in caught.value.en


def test_a_guard_page_hit_names_its_line():
    far = TILED.replace("A[(size_t)row * K + k0 + tx]", "A[(size_t)row * K + k0 + tx + 3000]")
    with pytest.raises(cb.KernelMemoryError) as caught:
        run_tiled(far, race_check=False)
    err = caught.value
    assert err.signal_name in ("SIGSEGV", "SIGBUS") and err.line == f"{NAME}:{line_of(TILED, '// LOAD A')}"
    assert f"accessed A[{3000 // 17}, {3000 % 17}]" in err.en and err.line in err.en and err.line in err.zh


# --- 4. race verdicts name the element and the loop iteration --------------------------------------

def test_a_race_within_one_iteration_names_the_element():
    broken = TILED.replace("__syncthreads();  // BARRIER 1", "")
    with pytest.raises(cb.KernelRaceError) as caught:
        run_tiled(broken)
    err = caught.value
    assert err.element == "As[0][1]" and err.crosses_iterations == (False, False) and err.barrier_line == ""
    assert err.lines == (f"{NAME}:{line_of(TILED, '// COMPUTE')}", f"{NAME}:{line_of(TILED, '// LOAD A')}")
    assert "read As[0][1] (byte" in err.en and "读取了 As[0][1]" in err.zh and "next iteration" not in err.en
    assert_both_languages(err)
    assert_lines_named(err)


def test_a_race_across_k_tiles_says_so():
    broken = TILED.replace("__syncthreads();  // BARRIER 2", "")
    with pytest.raises(cb.KernelRaceError) as caught:
        run_tiled(broken)
    err = caught.value
    load, barrier = line_of(TILED, "// LOAD A"), line_of(TILED, "// BARRIER 1")
    assert err.element == "As[0][0]" and err.actions == ("wrote", "read")
    assert err.crosses_iterations == (True, False) and err.barrier_line == f"{NAME}:{barrier}"
    assert (f"The write at {NAME}:{load} by thread (0,0,0) belongs to the next iteration of the loop around the "
            f"__syncthreads() at {NAME}:{barrier}") in err.en
    assert f"{NAME}:{load} 的写入属于 {NAME}:{barrier} 处 __syncthreads() 所在循环的下一次迭代" in err.zh
    assert_lines_named(err)


def test_a_race_names_an_element_of_a_struct_and_of_dynamic_shared_memory():
    struct = r"""
struct Tiles { float a[4][8]; float b[2][3][5]; };
__global__ void k(float* out)
{
    __shared__ Tiles s[2];
    s[1].b[1][2][threadIdx.x] = 1.0f;
    out[threadIdx.x] = s[1].b[1][2][(threadIdx.x + 1) % 4];
}
"""
    out = np.zeros(4, np.float32)
    with pytest.raises(cb.KernelRaceError) as caught:
        cb.launch_kernel(struct, "k", Launch((1, 1, 1), (4, 1, 1)), [out])
    assert caught.value.element == "s[1].b[1][2][1]"
    dynamic = r"""
__global__ void k(float* out)
{
    extern __shared__ float buf[];
    buf[threadIdx.x] = 1.0f;
    out[threadIdx.x] = buf[(threadIdx.x + 1) % 4];
}
"""
    with pytest.raises(cb.KernelRaceError) as caught:
        cb.launch_kernel(dynamic, "k", Launch((1, 1, 1), (4, 1, 1), 64), [out])
    assert caught.value.element == "byte 4 of dynamic shared memory"
    assert "动态共享内存中偏移 4 字节处" in caught.value.zh


def test_every_message_names_the_learners_file():
    # A level's source run under the learner's file name: races, missing waits, bad accesses.
    src = gc.kernel_source("04_double_buffering")
    cases = [
        (src.replace("        __syncthreads();\n\n        const bool more", "\n\n        const bool more"),
         {"copy": "registers"}, cb.KernelRaceError),
        (src.replace("if (COPY == 1) copy_async_wait_all();", ""), {"copy": "cp_async"}, cb.KernelAsyncCopyError),
        (src.replace("(a_ok(t) ? (size_t)row * K + t * TILE + tx : 0)", "((size_t)row * K + t * TILE + tx)")
            .replace("a_ok(t + 1) ? *a_ptr(t + 1) : 0.0f", "*a_ptr(t + 1)"), {"copy": "registers"}, cb.KernelMemoryError),
        (src.replace("    float acc = 0.0f;\n", "    float acc = 0.0f;\n    if (row >= M) return;\n"), {"copy": "registers"},
         cb.KernelBarrierError),
        (src.replace("    float acc = 0.0f;\n", "    float acc = 0.0f;\n    if (row >= M) __trap();\n"), {"copy": "registers"},
         cb.KernelCrashError),
    ]
    A, B = gc.random_operands(33, 65, 40, seed=1, xp=np)
    for source, params, kind in cases:
        assert source != src
        with pytest.raises(kind) as caught:
            gc.gemm(A, B, "04_double_buffering", backend="cpu", source=source, source_name="answer.cu", **params)
        assert_lines_named(caught.value, "answer.cu")
    with pytest.raises(cb.KernelRaceError) as caught:
        warp_access.profile(4, 32, 32, 32, source=cases[0][0], source_name="answer.cu", **cases[0][1])
    assert_lines_named(caught.value, "answer.cu")
    rows = warp_access.profile(4, 32, 32, 32, source=src, source_name="answer.cu", copy="registers")
    assert rows and all(r.line.startswith("answer.cu:") for r in rows)


# --- 6. profiling more than the first block ---------------------------------------------------------

def _first_block_only_source() -> str:
    """Level 1's kernel, coalesced only in block (0,0): elsewhere consecutive threads take consecutive rows."""
    src = gc.kernel_source("01_naive")
    col = "const int col = blockIdx.x * BLOCK_X + threadIdx.x;"
    row = "const int row = blockIdx.y * BLOCK_Y + threadIdx.y;"
    assert src.count(col) == 1 and src.count(row) == 1
    return (src.replace(col, "const bool first_ = blockIdx.x == 0 && blockIdx.y == 0;\n"
                             "    const int col = blockIdx.x * BLOCK_X + (first_ ? threadIdx.x : threadIdx.y);")
               .replace(row, "const int row = blockIdx.y * BLOCK_Y + (first_ ? threadIdx.y : threadIdx.x);"))


def test_a_kernel_coalesced_only_in_the_first_block_fails_when_more_blocks_are_profiled():
    src = _first_block_only_source()
    params = {"mapping": "cols", "block_x": 16, "block_y": 16}
    assert gc.check(1, 40, 40, 8, backend="cpu", source=src, **params).passed
    first = {r.array: r for r in warp_access.profile(1, 64, 64, 16, source=src, **params)}
    assert first["C"].excess == 1.0 and first["C"].worst_block == (0, 0, 0)  # the default: block (0,0,0) only
    sampled = {r.array: r for r in warp_access.profile(1, 64, 64, 16, source=src, blocks=3, rng=1, **params)}
    store = sampled["C"]
    assert store.write and store.worst_block != (0, 0, 0) and store.worst_excess == 4.0 and store.excess > 2
    assert store.warp_accesses == 3 * first["C"].warp_accesses  # all three blocks added up
    assert f"worst block {store.worst_block}" in store.describe()
    listed = {r.array: r for r in warp_access.profile(1, 64, 64, 16, source=src, blocks=[(1, 2, 0)], **params)}
    assert listed["C"].worst_block == (1, 2, 0)  # the first of the equally bad blocks (1,2,0) and the last, (3,3,0)


def test_choose_blocks_always_takes_the_first_and_the_last():
    assert warp_access.choose_blocks((4, 3, 1)) == [(0, 0, 0)]
    picked = warp_access.choose_blocks((4, 3, 1), 5, rng=7)
    assert len(picked) == 5 and picked[0] == (0, 0, 0) and picked[-1] == (3, 2, 0) and len(set(picked)) == 5
    assert picked == warp_access.choose_blocks((4, 3, 1), 5, rng=np.random.default_rng(7))
    assert warp_access.choose_blocks((4, 3, 1), 100) == [(x, y, 0) for y in range(3) for x in range(4)]
    assert warp_access.choose_blocks((4, 3, 1), [(2, 1, 0)]) == [(0, 0, 0), (2, 1, 0), (3, 2, 0)]
    with pytest.raises(ValueError, match="not in the grid"):
        warp_access.choose_blocks((4, 3, 1), [(4, 0, 0)])
    with pytest.raises(ValueError, match="positive"):
        warp_access.choose_blocks((4, 3, 1), 0)


# --- 7. ordered accesses for ordering checks --------------------------------------------------------

def _first(seq, pred):
    return next(n for n, a in enumerate(seq) if pred(a))


@pytest.mark.parametrize("copy", ["registers", "cp_async"])
def test_the_prefetch_order_and_the_barriers_per_tile_are_visible(copy):
    # 16×16 tiles, K = 48: three k-tiles, one barrier per k-tile (three), so four intervals.
    log = warp_access.access_log(4, 32, 32, 48, blocks=[(1, 1, 0)], tile=16, copy=copy)
    assert log.blocks == [(0, 0, 0), (1, 1, 0)] and log.shapes["A"] == (32, 48)
    assert warp_access.barrier_intervals(log) == {(0, 0, 0): 4, (1, 1, 0): 4}
    seqs = warp_access.sequences(log)
    thread = seqs[(1, 1, 0)][(3, 2, 0)]  # row 16 + 2, column 16 + 3
    # In interval 1 (tile 0 is computed): tile 1's global load of A comes before tile 0's shared reads.
    loads = [a for a in thread if a.interval == 1 and a.space == "global" and a.array == "A"]
    assert loads and loads[0].index == (18, 16 + 3) and loads[0].cp_async == (copy == "cp_async")
    reads = _first(thread, lambda a: a.interval == 1 and a.space == "shared" and not a.write)
    assert _first(thread, lambda a: a.interval == 1 and a.space == "global") < reads
    assert thread[reads].element.startswith("As[0][2][")
    assert all(a.line.startswith("04_double_buffering.cu:") for a in thread)
    assert {a.array for a in thread if a.space == "shared"} == {"As", "Bs"}


def test_a_prefetch_after_the_compute_shows_in_the_order():
    src = gc.kernel_source("04_double_buffering")
    prefetch = ("                a_next = a_ok(t + 1) ? *a_ptr(t + 1) : 0.0f;\n"
                "                b_next = b_ok(t + 1) ? *b_ptr(t + 1) : 0.0f;\n")
    late_store = "        if (COPY == 0 && more) {\n"
    assert prefetch in src and late_store in src
    late = src.replace(prefetch, "").replace(late_store, late_store + prefetch.replace("                ", "            "))
    assert gc.check(4, 33, 40, 48, backend="cpu", source=late, tile=16, copy="registers").passed  # right, not overlapped
    log = warp_access.access_log(4, 32, 32, 48, source=late, tile=16, copy="registers")
    thread = warp_access.sequences(log)[(0, 0, 0)][(0, 0, 0)]
    first_load = _first(thread, lambda a: a.interval == 1 and a.space == "global")
    first_read = _first(thread, lambda a: a.interval == 1 and a.space == "shared" and not a.write)
    assert first_read < first_load
