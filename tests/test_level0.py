"""Level 0 (notebooks/00_cuda_basics.ipynb): gemm_course.display.primer's kernels on the CPU backend, the
launch-map figure, and every number the notebook's prose quotes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gemm_course import models
from gemm_course.display import diagrams, primer
from gemm_course.measure import results
from gemm_course.run.cpu_backend import KernelMemoryError, KernelRaceError

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "00_cuda_basics.ipynb"


def cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def english() -> str:
    from gemm_course.display import glossary

    return glossary.plain("\n".join("".join(c["source"]) for c in cells() if "lang-en" in c["metadata"].get("tags", [])))


def code() -> str:
    return "\n".join("".join(c["source"]) for c in cells() if c["cell_type"] == "code")


def cpu(source: str, name: str, grid, block, args) -> None:
    assert primer.run_kernel(source, name, grid, block, args, backend="cpu") == "cpu"


# --- the kernels, run on the CPU backend ---------------------------------------------------------

@pytest.mark.parametrize("n", [1, 7, 1000, 1025])
def test_vector_add_odd_sizes(n):
    rng = np.random.default_rng(n)
    a, b = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    c = np.full(n, np.nan, dtype=np.float32)
    cpu(primer.VECTOR_ADD, "vector_add", primer.ceil_div(n, 256), 256, [a, b, c, n])
    assert np.array_equal(c, a + b)


def test_vector_add_without_guard_writes_past_the_end():
    no_guard = primer.VECTOR_ADD.replace("if (i < n)", "          ")
    assert no_guard != primer.VECTOR_ADD
    a = np.arange(10, dtype=np.float32)
    with pytest.raises(KernelMemoryError, match=r"read a\[10\]"):  # the load of a[i] comes before the store
        cpu(no_guard, "vector_add", 3, 4, [a, a.copy(), np.zeros(10, dtype=np.float32), 10])


def test_python_loops_are_the_launch():
    """The notebook's loops over (block, thread) give the kernel's array."""
    n, block = 1000, 256
    grid = primer.ceil_div(n, block)
    a, b = np.arange(n, dtype=np.float32), np.full(n, 0.5, dtype=np.float32)
    c = np.full(n, np.nan, dtype=np.float32)
    cpu(primer.VECTOR_ADD, "vector_add", grid, block, [a, b, c, n])
    gridDim, blockDim = primer.dim3(grid), primer.dim3(block)
    loops = np.full(n, np.nan, dtype=np.float32)
    for bx in range(gridDim.x):
        for tx in range(blockDim.x):
            i = bx * blockDim.x + tx
            if i < n:
                loops[i] = a[i] + b[i]
    assert np.array_equal(c, loops)
    assert "for bx in range(gridDim.x):" in code() and "for tx in range(blockDim.x):" in code()


@pytest.mark.parametrize("rows, cols, block", [(6, 10, (4, 2)), (5, 3, (2, 2)), (1, 10, (4, 1))])
def test_who_am_i_matches_the_launch_map(rows, cols, block):
    who = [np.full((rows, cols), -1, dtype=np.int32) for _ in range(4)]
    grid = (primer.ceil_div(cols, block[0]), primer.ceil_div(rows, block[1]))
    cpu(primer.WHO_AM_I, "who_am_i", grid, block, [*who, rows, cols])
    working = [t for t in diagrams.launch_map(rows, cols, *block) if t["works"]]
    assert len(working) == rows * cols
    for t in working:
        r, c = t["row"], t["col"]
        assert (who[0][r, c], who[1][r, c]) == t["block"]
        assert (who[2][r, c], who[3][r, c]) == t["thread"]


def test_naive_gemm_on_sizes_off_the_block():
    M, N, K = 33, 65, 17
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    grid = (primer.ceil_div(N, 16), primer.ceil_div(M, 16))
    assert grid == (5, 3)
    cpu(primer.NAIVE_GEMM, "gemm_naive", grid, (16, 16), [A, B, C, M, N, K])
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.linalg.norm(C - ref) / np.linalg.norm(ref) < 1e-6


def test_reverse_each_block():
    x = np.arange(16, dtype=np.float32)
    cpu(primer.REVERSE, "reverse_each_block", 2, 8, [x])
    assert x.tolist() == list(range(7, -1, -1)) + list(range(15, 7, -1))


def test_removing_the_barrier_is_a_race_named_by_threads_and_lines():
    lines = primer.REVERSE_NO_BARRIER.splitlines()
    assert lines[8].strip().startswith("// __syncthreads();")
    assert len(lines) == len(primer.REVERSE.splitlines())
    x = np.arange(16, dtype=np.float32)
    with pytest.raises(KernelRaceError) as caught:
        cpu(primer.REVERSE_NO_BARRIER, "reverse_each_block", 2, 8, [x])
    race = caught.value
    assert race.threads == ((3, 0, 0), (4, 0, 0))
    assert race.lines == ("primer.cu:11", "primer.cu:7")
    assert race.actions == ("read", "wrote")
    assert race.shared_offset == 16 and race.shared_offset // 4 == 4  # tile[4]
    assert "tile[t] = x[i]" in lines[6] and "tile[blockDim.x - 1 - t]" in lines[10]  # lines 7 and 11
    assert "thread (3,0,0)" in str(race) and "thread (4,0,0)" in str(race)


def test_features_kernel_by_its_name_expression():
    rows = 100
    X = np.random.default_rng(1).uniform(-1, 1, (rows, 16)).astype(np.float32)
    out = np.full(rows, np.nan, dtype=np.float32)
    cpu(primer.FEATURES, "row_norms<64>", primer.ceil_div(rows, 64), 64, [X, out, rows])
    assert np.allclose(out, (X.astype(np.float64) ** 2).sum(axis=1), rtol=1e-5)
    for feature in ("__global__", "__device__", "template <int THREADS>", "__launch_bounds__", "__restrict__",
                    "#pragma unroll", "float4"):
        assert feature in primer.FEATURES


def test_run_kernel_arguments():
    assert primer.parameter_names(primer.VECTOR_ADD, "vector_add") == ["a", "b", "c", "n"]
    assert primer.parameter_names(primer.FEATURES, "row_norms<64>") == ["x", "out", "rows"]
    assert primer.parameter_names(primer.VECTOR_ADD, "missing") is None
    assert primer._dim3(4) == (4, 1, 1) and primer._dim3((3, 2)) == primer.dim3(3, 2, 1)
    with pytest.raises(ValueError):
        primer._dim3((0, 1))
    with pytest.raises(ValueError, match="backend"):
        primer.run_kernel(primer.VECTOR_ADD, "vector_add", 1, 1, [], backend="tpu")
    assert primer.default_backend() in ("cuda", "cpu")


# --- the figure ----------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, cols, block, threads, idle", [(1, 10, (4, 1), 12, 2), (6, 10, (4, 2), 72, 12)])
def test_launch_map_figure_crosses_out_the_idle_threads(rows, cols, block, threads, idle):
    launch = diagrams.launch_map(rows, cols, *block)
    assert len(launch) == threads and sum(not t["works"] for t in launch) == idle
    fig = diagrams.launch_map_figure(rows, cols, *block)
    z = np.array(fig.data[0].z)
    assert fig.data[0].name == "threads" and z.size == threads and (z == -1).sum() == idle
    assert (z[:rows, :cols] >= 0).all()


# --- the notebook and its numbers ----------------------------------------------------------------

def test_notebook_cells():
    cs = cells()
    assert "".join(cs[0]["source"]) == "# Level 0: the CUDA programming model · 第 0 级：CUDA 编程模型"
    heads = [ln for ln in english().splitlines() if ln.startswith("## ")]
    assert heads == ["## Why a Level 0", "## A first kernel: vector add", "## The launch",
                     "## The same kernel as Python loops", "## Grid, blocks and threads",
                     "## One element of C per thread: the naive GEMM", "## Where data lives",
                     "## Run this page yourself", "## Exercises", "## Takeaways", "## Deeper: the evidence"]
    assert "### The C++ in the course's kernels" in english().splitlines()
    src = code()
    for call in ("primer.run_kernel(primer.VECTOR_ADD", "diagrams.launch_map_figure", "KernelRaceError",
                 "primer.REVERSE_NO_BARRIER", '"row_norms<64>"', "primer.NAIVE_GEMM"):
        assert call in src
    text = english()
    assert "(01_naive.ipynb)" in text and "(../book/gpu_primer.md)" in text


def test_prose_numbers():
    text = english()
    n, block = 1000, 256
    grid = primer.ceil_div(n, block)
    assert f"⌈{n} / {block}⌉ = {grid} blocks, or {grid * block} threads" in text
    assert f"The last {grid * block - n} threads" in text
    assert f"thread 5 of block 2 computes element 2 × {block} + 5 = {2 * block + 5}" in text

    one_d = diagrams.launch_map(1, 10, 4)
    assert f"⌈10 / 4⌉ = {primer.ceil_div(10, 4)} blocks, {len(one_d)} threads" in text
    assert f"The {sum(not t['works'] for t in one_d)} threads past the end" in text

    two_d = diagrams.launch_map(6, 10, 4, 2)
    gx, gy = primer.ceil_div(10, 4), primer.ceil_div(6, 2)
    assert f"⌈10 / 4⌉ × ⌈6 / 2⌉ = {gx} × {gy} blocks: {len(two_d)} threads for {6 * 10} elements" in text
    assert f"adds {gx * 4 - 10} columns past its right edge: {sum(not t['works'] for t in two_d)} threads" in text

    lim = models.arch_limits("sm_90")
    assert f"An H200 SM has {lim.registers_per_sm} registers of 32 bits" in text
    assert f"at most {lim.max_registers_per_thread} per thread" in text
    assert f"up to {lim.max_shared_per_block // 1024} KiB" in text
    prov = [results.load(f)["provenance"] for f in results.recorded_files()]
    h200 = {p["sm_count"] for p in prov if p["gpu"] == "NVIDIA H200"}
    assert h200 == {132} and "the whole H200, which has 132 SMs" in text
    assert f"a multiple of {16} bytes" in text and "4 `float4` loads per row" in text
    assert lim.warp_size == 32 and "Each 32 consecutive threads form a *warp*" in text
    barrierless = primer.REVERSE_NO_BARRIER.splitlines()  # the lines the race names, counted in the kernel shown
    read_at = 1 + next(n for n, line in enumerate(barrierless) if "= tile[blockDim.x - 1 - t]" in line)
    wrote_at = 1 + next(n for n, line in enumerate(barrierless) if "tile[t] = x[i]" in line)
    assert (f"Thread 3 read `tile[4]` (the 4 bytes at offset 16 of shared memory) at line {read_at} before thread 4 "
            f"wrote it at line {wrote_at}") in text
    page = (ROOT / "notebooks" / "00_cuda_basics.ipynb").read_text(encoding="utf-8")
    assert f"3 号线程在第 {read_at} 行读了" in page and f"还没有执行第 {wrote_at} 行的写入" in page
    import gemm_course as gc

    level2 = gc.get_level("02_smem_tiling")
    assert f'`"{level2.kernel_name(level2.defaults)}"` for Level 2' in text
    assert "template <int TILE>" in gc.kernel_source(level2)
