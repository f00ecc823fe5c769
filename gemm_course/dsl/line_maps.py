"""Level 14's kernels read against the course's CUDA C, without triton: what each DSL line stands for, and the kernels'
source text.

A page or a notebook shows a kernel's Python beside the CUDA C of the levels it condenses. Both live here in a form
that needs neither triton nor a GPU (the book is built where triton may not be installed): the tables are plain
data, and :func:`kernel_source` reads a kernel's definition from its module's file instead of importing it.

Each row of a table (``LineMap``): the DSL line (pieces joined by "; ", "..." standing for text left out; each piece is
in the kernel, which tests/test_dsl.py checks), the course's levels it stands for, and the CUDA construct in English
and in Chinese.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

_HERE = Path(__file__).resolve().parent


class LineMap(NamedTuple):
    """One line (or short run of lines) of a DSL kernel and what it stands for in the course's CUDA C."""

    line: str
    level: str
    cuda_en: str
    cuda_zh: str


# --- the tiled Triton kernel (triton_gemm.tiled_gemm_kernel) ---------------------------------------------------

TILED_LINE_MAP: tuple[LineMap, ...] = (
    LineMap("pid = tl.program_id(0)", "1",
            "blockIdx: one program per tile of C, a whole thread block's work",
            "blockIdx：每个程序（program）负责 C 的一个分块，即一个线程块的工作"),
    LineMap("first_tile_m = ...; group_rows = ...; tile_m = ...; tile_n = ...", "8",
            "the grouped block order (group_m = 8): blocks that run together share rows of A and columns of B in L2",
            "分组的线程块顺序（group_m = 8）：同时运行的线程块在 L2 中共用 A 的行与 B 的列"),
    LineMap("rows = tile_m * BM + tl.arange(0, BM)", "2",
            "the BM×BN block tile; tl.arange is a whole vector of indices, the threads are the "
            "compiler's to place", "BM×BN 的线程块分块；tl.arange 是一整个下标向量，线程如何摆放由编译器决定"),
    LineMap("a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :]", "2, 3",
            "the addresses of one k-tile of A; unit column stride lets the compiler coalesce and vectorize "
            "(Levels 3 and 7)", "A 的一个 k 分块的地址；列步长为 1，编译器据此合并访问并向量化（第 3、7 级）"),
    LineMap("acc = tl.zeros((BM, BN), dtype=tl.float32)", "5, 8",
            "the accumulators in registers, split over the threads' TM×TN thread tiles by num_warps",
            "寄存器中的累加器，由 num_warps 决定如何分到各线程的 TM×TN 线程分块"),
    LineMap("for k in range(0, K, BK):", "2, 4, 10",
            "the k-loop over tiles staged in shared memory; num_stages makes it a ring of cp.async copies "
            "(Level 4's double buffer, Level 10's multi-stage pipeline), the barriers included",
            "沿 k 方向逐个分块的循环，分块放在共享内存中；num_stages 把它变成一个 cp.async 拷贝的环形缓冲"
            "（第 4 级的双缓冲、第 10 级的多个流水级），屏障也由编译器插入"),
    LineMap("a = tl.load(a_tile, mask=(rows[:, None] < M) & (ks[None, :] < K - k), other=0.0)", "1, 4",
            "the bounds check of every load (if (row < M && k < K)), a zero outside the matrix",
            "每次加载的边界检查（if (row < M && k < K)），矩阵之外取 0"),
    LineMap("acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)", "5, 8, 9, 10",
            "fp32: the FFMA outer products of the register tile (\"ieee\": no TF32); bf16: mma.sync on sm_80 "
            "(Level 10), wgmma on sm_90 (Level 11), ldmatrix and the swizzled shared layout included",
            "fp32：寄存器分块上的 FFMA 外积（\"ieee\"：不用 TF32）；bf16：sm_80 上是 mma.sync（第 10 级），"
            "sm_90 上是 wgmma（第 11 级），ldmatrix 与重排（swizzle）的共享内存布局一并生成"),
    LineMap("tl.store(c_tile, acc, mask=...)", "1, 6, 7",
            "the epilogue: the bounds-checked store of C, vectorized where the compiler can",
            "尾处理（epilogue）：带边界检查的 C 写回，编译器能向量化时即向量化"),
)


# --- the Hopper Triton kernel (triton_gemm.hopper_gemm_kernel) -------------------------------------------------

HOPPER_LINE_MAP: tuple[LineMap, ...] = (
    LineMap("def hopper_gemm_kernel(a_desc, b_desc, c_desc, ...)", "10, 11",
            "the TMA tensor maps (cuTensorMapEncodeTiled, hopper.py), made on the host by TensorDescriptor; the "
            "swizzle chosen by the compiler", "TMA 张量描述符（cuTensorMapEncodeTiled，见 hopper.py），在主机端由 "
            "TensorDescriptor 生成；重排（swizzle）方式由编译器选择"),
    LineMap("for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_SMS, flatten=True):", "11",
            "step 4's persistent kernel: grid = the SM count, each block walks tiles",
            "第 4 步的持久化内核：网格大小等于 SM 数，每个线程块依次处理多个分块"),
    LineMap("off_m = ...; off_n = ...", "8",
            "the grouped block order, now over the tiles a persistent program visits",
            "分组的线程块顺序，这里作用于持久化程序依次访问的分块"),
    LineMap("a = a_desc.load([off_m, kk * BK])", "10, 11",
            "cp.async.bulk.tensor: one thread issues the tile's copy, completing on an mbarrier of the ring "
            "(num_stages stages); zeros beyond the matrix",
            "cp.async.bulk.tensor：一个线程发出整块拷贝，在环形缓冲某个流水级的 mbarrier 上完成（共 num_stages "
            "个流水级）；矩阵之外填 0"),
    LineMap("acc = tl.dot(a, b, acc)", "11",
            "wgmma.mma_async on 64-row slices per warpgroup, operands from shared memory, waits by wgmma.wait_group",
            "wgmma.mma_async，每个线程束组负责 64 行，操作数直接取自共享内存，用 wgmma.wait_group 等待"),
    LineMap("c_desc.store([off_m, off_n], acc.to(c_desc.dtype))", "11",
            "step 6's epilogue: C through shared memory and a TMA store, rows and columns beyond C clipped",
            "第 6 步的尾处理（epilogue）：C 经共享内存由 TMA 存储写出，超出 C 的行列被裁掉"),
)


# --- the Gluon kernel (gluon_gemm.gluon_gemm_kernel and its two partitions) ------------------------------------

GLUON_LINE_MAP: tuple[LineMap, ...] = (
    LineMap("gl.allocate_shared_memory(dtype, [STAGES, BM, BK], a_desc.layout)", "10, 11",
            "extern __shared__ ring of stages, 128-byte swizzled (NVMMASharedLayout: the layout wgmma and TMA agree "
            "on)", "extern __shared__ 的多个流水级环形缓冲，128 字节重排（swizzle）布局（NVMMASharedLayout：wgmma "
            "与 TMA 共同认可的布局）"),
    LineMap("mbarrier.init(ready.index(s), count=1); mbarrier.init(free.index(s), count=1)", "11",
            "the full and empty mbarriers of each stage (mbarrier.init)",
            "每个流水级的 full 与 empty 两个 mbarrier（mbarrier.init）"),
    LineMap("gl.warp_specialize([(mma_partition, ...), (load_partition, ...)], [1], [24])", "11",
            "step 3's warp specialization: a producer and consumers, setmaxnreg moving registers to the consumers",
            "第 3 步的 warp 特化：一个生产者与若干消费者，setmaxnreg 把寄存器让给消费者"),
    LineMap("for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_SMS):", "11",
            "step 4's persistent kernel: one block per SM walks the tiles", "第 4 步的持久化内核：每个 SM 一个线程块，依次处理各分块"),
    LineMap("mbarrier.wait(free.index(stage), lap ^ 1)", "11",
            "the producer waits for an empty stage (the parity of the ring's lap)", "生产者等待空闲的流水级（按环形缓冲圈数的奇偶）"),
    LineMap("mbarrier.expect(ready.index(stage), ...); tma.async_copy_global_to_shared(a_desc, [off_m, kk * BK], ...)",
            "10, 11",
            "mbarrier.arrive.expect_tx and cp.async.bulk.tensor: the TMA copy completes on the stage's full barrier",
            "mbarrier.arrive.expect_tx 与 cp.async.bulk.tensor：TMA 拷贝在该流水级的 full 屏障上完成"),
    LineMap("layout: gl.constexpr = wgmma_layout(BM, BN, gl.num_warps()); acc = gl.zeros((BM, BN), dtype=gl.float32, "
            "layout=layout)", "11",
            "the accumulator fragments of wgmma in registers, their layout written down instead of implied",
            "wgmma 累加器片段位于寄存器中，其布局明确写出而不是隐含"),
    LineMap("warpgroup_mma(a_ring.index(stage), b_ring.index(stage), acc, is_async=True)", "11",
            "wgmma.fence, wgmma.mma_async (m64nBNk16, operands from shared memory), wgmma.commit_group",
            "wgmma.fence、wgmma.mma_async（m64nBNk16，操作数取自共享内存）、wgmma.commit_group"),
    LineMap("acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, )); mbarrier.arrive(free.index(...), pred=kk > 0)",
            "11",
            "wgmma.wait_group 1, then arrive on the previous stage's empty barrier",
            "wgmma.wait_group 1，然后在上一个流水级的 empty 屏障上执行 arrive"),
    LineMap("c_tile.store(...); fence_async_shared(); tma.async_copy_shared_to_global(...)", "11",
            "step 6's epilogue: C through shared memory, fence.proxy.async, a TMA store, overlapped with the next tile",
            "第 6 步的尾处理（epilogue）：C 经共享内存、fence.proxy.async、TMA 存储写出，与下一个分块重叠"),
)


# Which functions of which file make up each kernel, in the order a reader meets them.
KERNEL_FUNCTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tiled": ("triton_gemm.py", ("tiled_gemm_kernel",)),
    "hopper": ("triton_gemm.py", ("hopper_gemm_kernel",)),
    "gluon": ("gluon_gemm.py", ("gluon_gemm_kernel", "load_partition", "mma_partition")),
}
LINE_MAPS: dict[str, tuple[LineMap, ...]] = {"tiled": TILED_LINE_MAP, "hopper": HOPPER_LINE_MAP, "gluon": GLUON_LINE_MAP}


def kernel_source(name: str) -> str:
    """The Python source of a kernel ("tiled", "hopper", "gluon"; the Gluon kernel with its partitions), decorators
    included, read from its module's file (no triton needed)."""
    if name not in KERNEL_FUNCTIONS:
        raise ValueError(f"no Level 14 kernel {name!r}; the kernels: {', '.join(KERNEL_FUNCTIONS)} / 第 14 级没有内核 "
                         f"{name!r}；已有的内核：{'、'.join(KERNEL_FUNCTIONS)}")
    file, functions = KERNEL_FUNCTIONS[name]
    text = (_HERE / file).read_text(encoding="utf-8")
    lines = text.splitlines()
    found = {node.name: node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)}
    parts = []
    for function in functions:
        node = found[function]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        parts.append("\n".join(lines[first - 1:node.end_lineno]))
    return "\n\n\n".join(parts) + "\n"
