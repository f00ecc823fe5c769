"""The course's glossary: one record per term, in English and Chinese.

This module is the one source of truth for the glossary. ``book/glossary.md`` is generated
from it (``python -m gemm_course.display.glossary`` rewrites the page; ``tests/test_glossary.py``
checks that the page is up to date), and the same records tell the tests which words of a
chapter must link to the glossary at their first use.

A record holds:

* ``slug``: the stable label is ``glossary-<slug>`` (link with ``{ref}`warp <glossary-warp>```);
* ``en`` and ``en_aliases``: the term as it is written in English prose, and other spellings
  (plurals ending in -s/-es are matched without listing them; a space also matches a hyphen);
* ``zh`` and ``zh_aliases``: the Chinese term the course uses (see the terminology table of
  the style guide) and the other spellings found in Chinese prose and Chinese blogs;
* where a term is first used is not written here: :func:`first_used` finds it in the pages, in
  reading order (``_toc.yml``), and the page shows that;
* ``en_def`` / ``zh_def``: one or two sentences. Every number in them is a ``{placeholder}``
  filled from :data:`FACTS`, which reads the numbers from the package.

Example::

    >>> from gemm_course import glossary
    >>> glossary.term("warp").zh
    '线程束'
    >>> glossary.find_terms("每个线程束有 32 个线程", "zh")[0][2]
    'warp'
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

from gemm_course import get_level as _get_level
from gemm_course.levels import MAX_THREADS_PER_BLOCK as _MAX_THREADS_PER_BLOCK
from gemm_course.fp8 import formats as _fp8
from gemm_course import models as _models
from gemm_course.measure import results as _results

PAGE = Path(__file__).resolve().parents[2] / "book" / "glossary.md"
LABEL_PREFIX = "glossary-"

# --- the numbers the definitions quote, read from the package --------------------------------------

_SM90 = _models.arch_limits("sm_90")
_H200 = _models.KNOWN_GPUS["NVIDIA H200"]
_L2 = _get_level(2).resolve()
_L5 = _get_level(5).resolve()
_L11_BEST = max(r["tflops"] for r in _results.recorded("11_hopper_wgmma")
                if r["level"] == "11_hopper_wgmma" and r["dtype"] == "bfloat16")

FACTS: dict[str, str] = {
    "warp": str(_SM90.warp_size),                                  # threads per warp
    "warp_last": str(_SM90.warp_size - 1),                         # the last lane
    "banks": str(_models.BANKS),                                   # shared-memory banks
    "bank_bytes": "4",                                             # one bank serves a 4-byte word
    "sector": str(_models.SECTOR_BYTES),                           # bytes per sector
    "line": str(4 * _models.SECTOR_BYTES),                         # a 128-byte line = 4 sectors
    "sectors_per_line": "4",
    "max_block": str(_MAX_THREADS_PER_BLOCK),               # threads per block, at most
    "max_regs": str(_SM90.max_registers_per_thread),               # registers per thread, at most
    "regs_per_sm": str(_SM90.registers_per_sm),
    "smem_per_sm": str(_SM90.max_shared_per_sm // 1024),           # KB on sm_90
    "h200_sms": str(_H200.sm_count),
    "h200_tbs": f"{_H200.memory_bandwidth_gbs / 1000:.1f}",        # TB/s, datasheet
    "h200_fp32": f"{_H200.fp32_peak_tflops:.0f}",                  # TFLOPS, datasheet
    "h200_ridge": f"{_H200.ridge_point:.0f}",                      # FLOP per byte
    "fp32_bytes": "4",
    "half_bytes": "2",
    "fp8_bytes": "1",
    "vec_bytes": "16",                                             # float4: one 128-bit access
    "vec_floats": "4",
    "wg_warps": "4",                                               # warps per warpgroup
    "wg_threads": str(4 * _SM90.warp_size),
    "wmma_shape": "16×16×16",                                      # the fp16 WMMA fragment shape
    "two": "2",
    "max_warps_sm": str(_SM90.max_warps_per_sm),
    "static_smem": str(_SM90.static_shared_limit // 1024),         # KB of static shared memory per block
    "max_smem_block": str(_SM90.max_shared_per_block // 1024),     # KB of dynamic shared memory per block                   # warps per SM on sm_90
    "wave_blocks": str(2 * _H200.sm_count),                        # one wave at 2 blocks per SM
    "l2_tile": str(_L2["tile"]),                                   # Level 2's default tile
    "l5_tm": str(_L5["TM"]),
    "l5_tn": str(_L5["TN"]),
    "l5_acc": str(_L5["TM"] * _L5["TN"]),                          # accumulators per thread, Level 5
    "l5_loads": str(_L5["TM"] + _L5["TN"]),
    "l11_tflops": f"{_L11_BEST:.0f}",                              # best recorded Level 11 run, H200
    "e4m3_max": f"{_fp8.E4M3_MAX:.0f}",                            # the largest e4m3 value
    "scale_block": str(_fp8.SCALE_BLOCK),                          # Level 13's scale strips and tiles
    "tmem_rows": "128",                                            # tensor memory per SM: rows (lanes) ...
    "tmem_cols": "512",                                            # ... × columns of 32-bit cells (PTX ISA)
}


@dataclass(frozen=True)
class Term:
    slug: str
    en: str
    zh: str
    en_def: str
    zh_def: str
    en_aliases: tuple[str, ...] = ()
    zh_aliases: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return LABEL_PREFIX + self.slug

    def en_forms(self) -> tuple[str, ...]:
        return (self.en, *self.en_aliases)

    def zh_forms(self) -> tuple[str, ...]:
        return (self.zh, *self.zh_aliases)

    def definition(self, lang: str) -> str:
        return (self.en_def if lang == "en" else self.zh_def).format(**FACTS)


@dataclass(frozen=True)
class Group:
    en: str
    zh: str
    terms: tuple[Term, ...]


T = Term  # short name for the table below

GROUPS: tuple[Group, ...] = (
    Group("Kernels, threads and the SM", "内核、线程与 SM", (
        T("kernel", "kernel", "内核",
          "A function that runs on the GPU, launched from the host once and executed by many threads at the same time. "
          "Each level of the course is one kernel: `gemm_naive` of Level 1 runs one thread per element of C.",
          "在 GPU 上运行的函数：主机启动一次，由大量线程同时执行。本课程的每一级都是一个内核，"
          "例如第 1 级的 `gemm_naive` 为 C 的每个元素安排一个线程。",
          zh_aliases=("核函数", "kernel")),
        T("thread", "thread", "线程",
          "The smallest unit of execution: one instance of the kernel with its own registers and its own indices "
          "`threadIdx` and `blockIdx`. In Level 1 one thread computes one element of C.",
          "最小的执行单位：内核的一个实例，有自己的寄存器和自己的下标 `threadIdx`、`blockIdx`。"
          "第 1 级中一个线程计算 C 的一个元素。"),
        T("warp", "warp", "线程束",
          "A group of {warp} consecutive threads of a block that the SM schedules together: one instruction is issued "
          "for all {warp} at once. A block of 256 threads is 8 warps.",
          "线程块中连续的 {warp} 个线程组成的一组，SM 把它们作为一个整体调度：一条指令同时为这 {warp} 个线程发射。"
          "256 个线程的线程块就是 8 个线程束。",
          zh_aliases=("warp",)),
        T("lane", "lane", "lane",
          "A thread's position inside its warp, from 0 to {warp_last} (`threadIdx.x % {warp}` for a one-dimensional "
          "block). Which addresses neighbouring lanes touch decides coalescing and bank conflicts.",
          "线程在所属线程束中的位置，取值 0 到 {warp_last}（一维线程块中为 `threadIdx.x % {warp}`）。"
          "相邻 lane 访问哪些地址，决定了能否合并访问、是否发生存储体冲突。",
          en_aliases=("lane id", "lane index"), zh_aliases=("lane 编号", "线程道")),  # not 通道: NCCL channels, outlier channels
        T("block", "thread block", "线程块",
          "A group of up to {max_block} threads that run on one SM, can share shared memory and can wait for each "
          "other at a barrier. Level 2 uses blocks of {l2_tile}×{l2_tile} threads, one per {l2_tile}×{l2_tile} tile of C.",
          "最多 {max_block} 个线程组成的一组，运行在同一个 SM 上，可以共用共享内存，也可以在屏障处互相等待。"
          "第 2 级使用 {l2_tile}×{l2_tile} 个线程的线程块，每块负责 C 的一个 {l2_tile}×{l2_tile} 分块。",
          en_aliases=("block", "CTA"), zh_aliases=("CTA", "block", "线程块（block）")),
        T("grid", "grid", "网格",
          "All the blocks of one kernel launch, numbered by `blockIdx`. A GEMM kernel's grid is usually C divided "
          "into block tiles, rounded up: {two} × {two} blocks for a 64×64 C and 32×32 tiles.",
          "一次内核启动的全部线程块，用 `blockIdx` 编号。GEMM 内核的网格通常就是把 C 按线程块分块切分、向上取整："
          "C 为 64×64、分块为 32×32 时是 {two} × {two} 个线程块。",
          zh_aliases=("线程网格", "grid")),
        T("sm", "SM", "SM",
          "Streaming multiprocessor: one of the GPU's processors, with its own schedulers, registers, shared memory "
          "and L1 cache. The H200 has {h200_sms} SMs; every block runs on exactly one of them.",
          "流式多处理器（streaming multiprocessor），GPU 上的一个处理器，有自己的调度器、寄存器、共享内存和 L1 缓存。"
          "H200 有 {h200_sms} 个 SM，每个线程块都只在其中一个上运行。",
          en_aliases=("streaming multiprocessor",), zh_aliases=("流式多处理器",)),
        T("simt", "SIMT", "SIMT",
          "Single instruction, multiple threads: the threads of a warp run the same instruction, each on its own "
          "data. The course calls the fp32 levels without Tensor Cores the SIMT levels.",
          "单指令多线程（single instruction, multiple threads）：一个线程束的线程执行同一条指令，各自处理自己的数据。"
          "本课程把不用张量核心的 fp32 各级称为 SIMT 各级。",
          zh_aliases=("单指令多线程",)),
        T("occupancy", "occupancy", "占用率",
          "The warps resident on an SM divided by the most it can hold ({max_warps_sm} on sm_90). Registers, shared memory and "
          "block size limit it; more warps give the scheduler more to choose from while others wait.",
          "SM 上驻留的线程束数与它最多能容纳的线程束数（sm_90 上为 {max_warps_sm}）之比。寄存器、共享内存和线程块大小都会限制它；"
          "线程束越多，其他线程束等待时调度器可选的就越多。",
          zh_aliases=("占有率", "occupancy")),
        T("latency", "latency", "延迟",
          "How long one operation takes from issue to result, for example a few hundred cycles for a load from "
          "global memory. A GPU hides latency by running other warps, or other independent instructions, meanwhile.",
          "一个操作从发射到得到结果所需的时间，例如从全局内存加载要数百个周期。"
          "GPU 靠在此期间运行其他线程束或其他相互独立的指令来隐藏延迟。",
          zh_aliases=("时延", "latency")),
        T("ilp", "ILP", "指令级并行",
          "Instruction-level parallelism: independent instructions of one thread that can be in flight at the same "
          "time. Register blocking gives each thread many independent FMAs, so one warp keeps the FP32 units busy.",
          "指令级并行（instruction-level parallelism）：同一线程中彼此独立、可以同时在途的指令。"
          "寄存器分块让每个线程有许多相互独立的 FMA，一个线程束就能让 FP32 单元保持忙碌。",
          en_aliases=("instruction-level parallelism",), zh_aliases=("ILP",)),
        T("issue-slot", "issue slot", "发射槽",
          "One chance per cycle for a warp scheduler to issue one instruction. Every load, address computation or "
          "branch takes a slot that an FFMA could have used.",
          "线程束调度器每个周期发射一条指令的机会。每条加载、地址计算或分支指令都会占去一个本可以留给 FFMA 的发射槽。",
          zh_aliases=("发射时隙", "issue slot")),
        T("wave", "wave", "波次",
          "The set of blocks that run on the SMs at the same time. With {h200_sms} SMs and 2 blocks per SM, a wave "
          "is {wave_blocks} blocks; a last wave that is nearly empty leaves SMs idle.",
          "同时在各个 SM 上运行的一批线程块。{h200_sms} 个 SM、每个 SM 2 个线程块时，一个波次是 {wave_blocks} 个线程块；"
          "最后一个波次几乎空着时，许多 SM 就会闲置。",
          zh_aliases=("wave",)),
        T("compute-capability", "compute capability", "计算能力",
          "The version number of a GPU's architecture, written sm_XY: sm_80 is Ampere (A100), sm_90 is Hopper "
          "(H100, H200). It decides which instructions a kernel can use, for example `cp.async` needs sm_80.",
          "GPU 架构的版本号，写作 sm_XY：sm_80 是 Ampere（A100），sm_90 是 Hopper（H100、H200）。"
          "它决定内核能用哪些指令，例如 `cp.async` 需要 sm_80。",
          zh_aliases=("compute capability",)),
    )),
    Group("Memory", "存储层次", (
        T("global-memory", "global memory", "全局内存",
          "CUDA's name for the memory a kernel reaches through its pointer arguments (`A`, `B`, `C`): every thread "
          "of every block can read and write it, and its loads pass through L1 and L2. It lives in device memory, "
          "so it is large and slow: hundreds of cycles per load.",
          "CUDA 对内核通过指针参数（`A`、`B`、`C`）访问的那块内存的叫法：所有线程块的所有线程都能读写，"
          "加载要经过 L1 和 L2。它位于显存中，所以容量大、速度慢：一次加载要数百个周期。",
          zh_aliases=("global memory",)),
        T("device-memory", "device memory", "显存",
          "The GPU's own memory chips, HBM on the H200 (also called DRAM): the hardware under global memory. The "
          "course says device memory, HBM or DRAM for its size, its bandwidth ({h200_tbs} TB/s on the H200's "
          "datasheet) and the bytes that really reach it, as Nsight Compute's DRAM counters show.",
          "GPU 自己的存储芯片，H200 上是 HBM（也叫 DRAM）：全局内存背后的硬件。本课程谈容量、带宽"
          "（H200 数据手册标称 {h200_tbs} TB/s）以及真正到达它的字节数（Nsight Compute 的 DRAM 计数器）时，说显存、HBM 或 DRAM。",
          en_aliases=("HBM", "HBM3e", "DRAM"), zh_aliases=("设备内存", "HBM", "DRAM", "device memory")),
        T("l2", "L2 cache", "L2 缓存",
          "The cache shared by all SMs, between them and global memory. Blocks that read the same rows of A or "
          "columns of B close together in time find them in L2 instead of DRAM.",
          "所有 SM 共享的缓存，位于 SM 与全局内存之间。在时间上相近地读取 A 的同几行或 B 的同几列的线程块，"
          "会在 L2 中命中，而不必访问 DRAM。",
          en_aliases=("L2",), zh_aliases=("L2",)),
        T("l1", "L1 cache", "L1 缓存",
          "The cache inside each SM, built from the same storage as shared memory. It serves repeated loads by "
          "the threads of one SM, which is why Level 1 is not even slower than it is.",
          "每个 SM 内部的缓存，与共享内存用的是同一块存储。它为同一 SM 上线程的重复加载提供数据，"
          "这也是第 1 级没有慢得更多的原因。",
          en_aliases=("L1",), zh_aliases=("L1",)),
        T("shared-memory", "shared memory", "共享内存",
          "A small, fast memory on each SM ({smem_per_sm} KB on sm_90) that the threads of one block share and "
          "manage themselves, declared with `__shared__`. Tiles of A and B are staged there for reuse.",
          "每个 SM 上一块容量不大的高速存储（sm_90 上为 {smem_per_sm} KB），由一个线程块的线程共享并自行管理，"
          "用 `__shared__` 声明。A 和 B 的分块就暂存在这里反复使用。",
          en_aliases=("smem",), zh_aliases=("shared memory", "smem")),
        T("static-shared-memory", "static shared memory", "静态共享内存",
          "Shared memory declared with a fixed size inside the kernel (`__shared__ float As[32][32];`), so the "
          "compiler knows its size. A block may declare at most {static_smem} KB of it; more takes dynamic shared "
          "memory.",
          "在内核中以固定大小声明的共享内存（`__shared__ float As[32][32];`），编译器知道它的大小。"
          "每个线程块最多只能这样声明 {static_smem} KB；要用更多，就得用动态共享内存。",
          en_aliases=("statically declared shared memory",)),
        T("dynamic-shared-memory", "dynamic shared memory", "动态共享内存",
          "Shared memory declared `extern __shared__` without a size; the size is passed at launch. It is the only "
          "way past the {static_smem} KB per block that static shared memory allows: on sm_90 a kernel that opts in "
          "with an attribute (`cudaFuncAttributeMaxDynamicSharedMemorySize`) may take up to {max_smem_block} KB per "
          "block.",
          "用 `extern __shared__` 声明、不写大小的共享内存，大小在启动时传入。每个线程块的静态共享内存最多 "
          "{static_smem} KB，要超过它只能用动态共享内存：在 sm_90 上，内核用一个属性"
          "（`cudaFuncAttributeMaxDynamicSharedMemorySize`）声明允许之后，每个线程块最多可用 {max_smem_block} KB。",
          en_aliases=("dynamic shared-memory",)),
        T("register", "register", "寄存器",
          "The fastest storage, private to one thread; a thread may use up to {max_regs} of them, and an SM has "
          "{regs_per_sm} to share among its threads. Accumulators live in registers from Level 5 on.",
          "最快的存储，每个线程私有；一个线程最多可用 {max_regs} 个，一个 SM 共有 {regs_per_sm} 个供其上的线程分配。"
          "从第 5 级开始，累加器都放在寄存器中。",
          zh_aliases=("register",)),
        T("local-memory", "local memory", "局部内存",
          "Per-thread memory that actually lives in global memory (cached in L1 and L2). The compiler puts arrays "
          "indexed at run time and spilled registers there, which is slow.",
          "每个线程私有、实际位于全局内存中的存储（经 L1、L2 缓存）。编译器会把运行时才能确定下标的数组和溢出的寄存器放在这里，"
          "访问很慢。",
          zh_aliases=("本地内存", "local memory")),
        T("register-spill", "register spill", "寄存器溢出",
          "When a kernel needs more registers than it may use, the compiler stores some values to local memory and "
          "reloads them. `ptxas` reports spill stores and loads in bytes per thread.",
          "内核需要的寄存器超过可用数量时，编译器把一部分值存到局部内存、用时再读回。"
          "`ptxas` 会以每线程字节数报告溢出的写入和读取。",
          en_aliases=("spill", "spilled", "spilling"), zh_aliases=("溢出", "spill")),
        T("bandwidth", "bandwidth", "带宽",
          "Bytes moved per second. The H200's datasheet gives {h200_tbs} TB/s for global memory; shared memory and "
          "L2 deliver much more.",
          "每秒传输的字节数。H200 的规格表给出的全局内存带宽为 {h200_tbs} TB/s；共享内存和 L2 的带宽要高得多。",
          zh_aliases=("bandwidth",)),
        T("sector", "sector", "扇区",
          "The {sector}-byte unit in which global memory and the caches serve a warp's load; {sectors_per_line} "
          "sectors make a {line}-byte line. {warp} consecutive floats need {sectors_per_line} sectors, {warp} "
          "scattered ones up to {warp}.",
          "全局内存和缓存为线程束的加载提供数据时的 {sector} 字节单位；{sectors_per_line} 个扇区组成一条 {line} 字节的缓存行。"
          "{warp} 个连续的 float 需要 {sectors_per_line} 个扇区，分散的 {warp} 个最多需要 {warp} 个。",
          zh_aliases=("sector",)),
        T("coalescing", "coalescing", "合并访问",
          "Neighbouring lanes of a warp reading or writing neighbouring addresses, so that one instruction needs "
          "the fewest sectors: {warp} consecutive floats take {sectors_per_line}.",
          "线程束中相邻的 lane 读写相邻的地址，使一条指令所需的扇区数最少：{warp} 个连续的 float 只需 {sectors_per_line} 个。",
          en_aliases=("coalesced", "coalesce", "uncoalesced"),
          zh_aliases=("访存合并", "内存合并", "合并的访问", "coalescing")),
        T("broadcast", "broadcast", "广播",
          "One value delivered to many receivers. In a warp's load: lanes that read the same address share one "
          "fetch, so a warp reading one element of A needs one sector (a broadcast sector), and lanes reading one "
          "shared-memory word cost no extra wavefront. Between GPUs (Level 12): the collective that copies one "
          "GPU's buffer to all the others.",
          "把同一个值送给多个接收者。在线程束的加载中：读同一地址的 lane 共用一次读取，所以一个线程束读 A 的同一个元素"
          "只需一个扇区（广播扇区），读同一个共享内存字的 lane 也不多占波前。在 GPU 之间（第 12 级）："
          "把一个 GPU 的缓冲区拷贝到其他所有 GPU 的集合通信。",
          en_aliases=("broadcast sector",), zh_aliases=("广播扇区",)),
        T("bank", "bank", "存储体",
          "Shared memory is split into {banks} banks; the {bank_bytes}-byte word at byte address a sits in bank "
          "(a / {bank_bytes}) mod {banks}. Each bank serves one word per pass.",
          "共享内存分为 {banks} 个存储体；字节地址为 a 的 {bank_bytes} 字节字位于第 (a / {bank_bytes}) mod {banks} 个存储体。"
          "每个存储体每个波前只能提供一个字。",
          zh_aliases=("bank", "内存库")),
        T("bank-conflict", "bank conflict", "存储体冲突",
          "Two or more lanes of a warp asking one bank for different words in the same access, so the access takes "
          "several passes (wavefronts). A column of a 32×32 float tile puts all {warp} lanes in one bank.",
          "同一次访问中，线程束的两个或更多 lane 向同一个存储体请求不同的字，这次访问就要分几个波前（wavefront）完成。"
          "读取 32×32 float 分块的一列时，{warp} 个 lane 全落在同一个存储体上。",
          en_aliases=("conflict-free",), zh_aliases=("bank 冲突", "bank conflict", "存储体访问冲突")),
        T("wavefront", "wavefront", "波前",
          "One pass of a shared-memory access through the {banks} banks. A conflict-free {bank_bytes}-byte access "
          "takes 1; a {vec_bytes}-byte access takes at least {two}; an n-way conflict takes n.",
          "共享内存访问经过 {banks} 个存储体的一遍，每个存储体在一个波前中提供一个字。无冲突的 {bank_bytes} 字节访问"
          "需要 1 个波前；{vec_bytes} 字节访问至少 {two} 个；n 路冲突需要 n 个。有的中文资料直接写 wavefront，"
          "也有的说“轮”。",
          zh_aliases=("wavefront", "轮数", "遍数")),
        T("swizzle", "swizzle", "重排",
          "Storing a tile at permuted addresses, usually by XOR-ing the column with the row, so that the lanes of a "
          "warp reach different banks without padding. Levels 3 and 10 swizzle by hand; TMA can do it in hardware.",
          "把分块存放到经过置换的地址上，通常把列号与行号做异或，使线程束的各 lane 不必填充就能落到不同的存储体。"
          "第 3 级和第 10 级手工实现异或重排，TMA 则能由硬件完成。",
          en_aliases=("swizzled", "swizzling", "XOR swizzle"),
          zh_aliases=("异或重排", "swizzle", "XOR swizzle")),
        T("barrier", "barrier", "屏障",
          "A point every thread of the block must reach before any goes on: `__syncthreads()`. Level 2 needs two "
          "per tile, one before reading shared memory and one before overwriting it.",
          "线程块中所有线程都到达之后才允许任何线程继续执行的位置，即 `__syncthreads()`。"
          "第 2 级每个分块需要两个：一个在读共享内存之前，一个在覆盖它之前。",
          zh_aliases=("同步屏障", "同步点", "barrier")),
        T("row-major", "row-major", "行主序",
          "Storing a matrix row after row, as C and NumPy do: element (i, k) of an M × K matrix is at offset "
          "i·K + k. Moving across, along a row (the column number grows), is the next address; moving down a column "
          "(the row number grows) jumps a whole row. In the course a thread's x index goes with the column number "
          "(across) and y with the row number (down).",
          "按一行接一行的顺序存放矩阵，C 语言和 NumPy 默认如此：M × K 矩阵的元素 (i, k) 位于偏移 i·K + k。"
          "横向移动（沿一行，列号递增）就是下一个地址，纵向移动（沿一列，行号递增）则要跳过一整行。"
          "本课程中线程下标 x 对应列号（横向）、y 对应行号（纵向）。",
          en_aliases=("row major",), zh_aliases=("行优先",)),
    )),
    Group("Performance models", "性能模型", (
        T("sm-clock", "SM clock", "SM 时钟频率",
          "The frequency the SMs run at. The GPU raises and lowers it by itself; under a long heavy load the power "
          "cap lowers it, so the same kernel runs slower late in a run, and a power-hungry Tensor Core kernel runs at a "
          "lower clock than a light one. The course measures it on the SMs (cycles counted over nanoseconds elapsed "
          "across the timed launches) and records it beside every timing; NVML's reading, which can show the full "
          "clock while a kernel runs below it, is kept beside it.",
          "SM 的运行频率。GPU 会自行升降频率；在长时间的重负载下，功耗上限会把它压低，所以同一个内核在一次测量的后段"
          "会变慢，而耗电多的张量核心内核比轻负载的内核运行在更低的频率上。本课程在 SM 上直接测量它（计时启动期间经过的"
          "周期数除以经过的纳秒数），记在每条计时记录旁；NVML 的读数也一并保留，它可能在内核低于满频运行时仍显示满频。",
          ),
        T("power-cap", "power cap", "功耗上限",
          "The most power the GPU's firmware lets the board draw. It is a different thing from the clock: under a "
          "long heavy load the GPU lowers its SM clock to stay under the cap, which is why a power-hungry Tensor "
          "Core kernel runs at a lower clock than a light one.",
          "GPU 固件允许整块卡消耗的最大功率。它和时钟频率是两回事：在长时间的重负载下，GPU 会降低 SM 时钟频率，"
          "使功耗不超过这个上限，所以耗电多的张量核心内核比轻负载的内核运行在更低的频率上。",
          en_aliases=("power limit",), zh_aliases=("功率上限", "功耗墙")),
        T("gemm", "GEMM", "GEMM",
          "General matrix multiply, C ← αAB + βC; SGEMM is the fp32 version. The course's levels compute C = AB.",
          "通用矩阵乘法（general matrix multiply），C ← αAB + βC；SGEMM 是其 fp32 版本。本课程各级计算的是 C = AB。",
          en_aliases=("SGEMM", "general matrix multiply"), zh_aliases=("SGEMM", "通用矩阵乘法", "通用矩阵乘")),
        T("flop", "FLOP", "FLOP",
          "One floating-point operation; FLOPS (or FLOP/s) counts them per second, and TFLOPS is a trillion per "
          "second. A GEMM of size M × N × K performs 2MNK FLOP.",
          "一次浮点运算；FLOPS（或 FLOP/s）是每秒的浮点运算次数，TFLOPS 表示每秒一万亿次。"
          "规模为 M × N × K 的 GEMM 共执行 2MNK 次浮点运算。",
          en_aliases=("FLOPs", "FLOPS", "FLOP/s", "TFLOPS", "TFLOP/s", "GFLOPS", "floating-point operation"),
          zh_aliases=("FLOPs", "FLOPS", "FLOP/s", "TFLOPS", "GFLOPS", "浮点运算")),
        T("fma", "FMA", "乘加",
          "Fused multiply-add, a·b + c in one instruction with one rounding; it counts as 2 FLOP. "
          "Each term of a GEMM's sum is one FMA.",
          "融合乘加（fused multiply-add），一条指令算出 a·b + c，只舍入一次；按 2 次浮点运算计。GEMM 求和中的每一项就是一次乘加。",
          en_aliases=("fused multiply-add", "multiply-add"), zh_aliases=("FMA", "融合乘加")),
        T("arithmetic-intensity", "arithmetic intensity", "计算强度",
          "FLOP performed per byte moved to or from DRAM. A square fp32 GEMM of size n can reach n/6; a kernel "
          "that loads both operands of every FMA from memory gets 0.25.",
          "每从 DRAM 传输一个字节所完成的浮点运算次数。边长为 n 的 fp32 方阵 GEMM 最高可达 n/6；"
          "每次乘加都从内存读取两个操作数的内核只有 0.25。",
          zh_aliases=("算术强度", "运算强度", "arithmetic intensity")),
        T("roofline", "roofline", "屋顶线模型",
          "The bound min(P, W·I) on the speed of a kernel with arithmetic intensity I on a GPU with peak compute P "
          "and memory bandwidth W: a slanted roof for memory, a flat one for compute.",
          "计算强度为 I 的内核在峰值算力为 P、内存带宽为 W 的 GPU 上所能达到速度的上限 min(P, W·I)："
          "斜的屋顶对应访存，平的屋顶对应算力。",
          en_aliases=("roofline model",), zh_aliases=("屋顶线", "Roofline 模型", "roofline")),
        T("ridge-point", "ridge point", "屋脊点",
          "The intensity P / W where the two roofs meet. For the H200's fp32 datasheet numbers it is about "
          "{h200_ridge} FLOP per byte: below it a kernel is memory-bound, above it compute-bound.",
          "两段屋顶相交处的计算强度 P / W。按 H200 规格表的 fp32 数字约为每字节 {h200_ridge} FLOP："
          "低于它内核访存受限，高于它计算受限。",
          en_aliases=("ridge",), zh_aliases=("拐点", "ridge point")),
        T("memory-bound", "memory-bound", "访存受限",
          "Limited by how fast data arrives, not by arithmetic: speeding up the math would not help, moving fewer "
          "bytes would. Level 1 behaves memory-bound.",
          "速度受限于数据到达的快慢而不是运算：加快计算无济于事，减少传输的字节数才有用。第 1 级就表现为访存受限。",
          en_aliases=("bandwidth-bound",), zh_aliases=("受访存限制", "带宽受限", "内存受限", "memory-bound")),
        T("compute-bound", "compute-bound", "计算受限",
          "Limited by the arithmetic units: the kernel issues math as fast as the SMs can execute it. A large GEMM "
          "is compute-bound in principle, and the levels try to make it so in practice.",
          "速度受限于运算单元：内核发射运算指令的速度已达到 SM 的执行能力。大规模 GEMM 原则上是计算受限的，"
          "后续各级都在设法让它在实际中也如此。",
          zh_aliases=("受算力限制", "算力受限", "compute-bound")),
    )),
    Group("Techniques of the fp32 levels", "fp32 各级的优化技术", (
        T("tile", "tile", "分块",
          "A rectangular piece of a matrix that one block, warp or thread works on; tiling splits the work into "
          "tiles so each piece loaded from memory is reused many times. With {l2_tile}×{l2_tile} tiles each loaded element is "
          "used {l2_tile} times. A block's tile (BM×BN) and a thread's tile (TM×TN) are two different tiles.",
          "线程块、线程束或线程负责处理的矩阵中的一个矩形块；分块（tiling）把工作切成这样的块，"
          "使从内存加载的每一块数据都被多次复用。分块为 {l2_tile}×{l2_tile} 时，每个加载的元素被使用 {l2_tile} 次。线程块负责的分块叫线程块分块（BM×BN），一个线程在寄存器中负责的叫线程分块（TM×TN）。",
          en_aliases=("tiling", "tiled"), zh_aliases=("tile", "tiling", "小块")),
        T("double-buffering", "double buffering", "双缓冲",
          "Two shared-memory buffers per operand: while the block computes on one tile, the next is loaded into the "
          "other, so load and compute overlap and one barrier per tile suffices.",
          "每个操作数准备两块共享内存缓冲区：线程块在一块上计算时，下一个分块加载到另一块，"
          "从而让加载与计算重叠，每个分块也只需一个屏障。",
          en_aliases=("double-buffered", "double buffer"), zh_aliases=("双缓存", "double buffering")),
        T("cp-async", "cp.async", "cp.async",
          "An sm_80 instruction that copies 4, 8 or {vec_bytes} bytes from global to shared memory without passing "
          "through registers; the thread goes on and waits for the copy later with `cp.async.wait_group`.",
          "sm_80 引入的指令，把 4、8 或 {vec_bytes} 字节从全局内存直接拷贝到共享内存，不经过寄存器；"
          "线程可以继续执行，之后再用 `cp.async.wait_group` 等待拷贝完成。"),
        T("pipeline-stage", "pipeline stage", "流水级",
          "One buffer of a ring of shared-memory buffers: with S stages, the copies for S − 1 future tiles are in "
          "flight while the block computes on the current one.",
          "共享内存环形缓冲区中的一块：有 S 个流水级（stage）时，线程块计算当前分块的同时，"
          "后面 S − 1 个分块的拷贝都在进行中。",
          en_aliases=("multi-stage pipeline", "multi-stage"), zh_aliases=("多级流水线", "stage")),
        T("register-blocking", "register blocking", "寄存器分块",
          "Each thread computes a small TM × TN tile of C in registers, so every value it loads from shared "
          "memory feeds several FMAs: with Level 5's {l5_tm} × {l5_tn}, {l5_loads} loads feed {l5_acc} FMAs.",
          "每个线程在寄存器中计算 C 的一个 TM × TN 小分块，从共享内存加载的每个值都参与多次乘加："
          "第 5 级的 {l5_tm} × {l5_tn} 配置中，{l5_loads} 次加载供给 {l5_acc} 次乘加。",
          en_aliases=("register tiling", "register tile"), zh_aliases=("register blocking", "寄存器分片")),
        T("accumulator", "accumulator", "累加器",
          "The variable that holds a running sum of C, kept in a register (or a Tensor Core fragment) until the "
          "epilogue writes it out. A thread of Level 5 holds {l5_acc} of them.",
          "保存 C 的部分和的变量，一直放在寄存器（或张量核心的片段）中，直到尾处理把它写出。"
          "第 5 级的每个线程持有 {l5_acc} 个累加器。",
          zh_aliases=("accumulator",)),
        T("epilogue", "epilogue", "尾处理",
          "The last step of a GEMM kernel, which writes the accumulators to C; applying α, β, a bias or an "
          "activation there costs almost nothing because the values are still in registers.",
          "GEMM 内核的最后一步，把累加器写回 C；在这里施加 α、β、偏置或激活函数几乎没有代价，因为这些值还在寄存器中。",
          zh_aliases=("epilogue", "收尾")),
        T("fusion", "fusion", "融合",
          "Doing several operations in one kernel instead of one kernel each, so the intermediate result never "
          "travels through global memory: GEMM + bias + ReLU in one pass.",
          "把几个操作放进同一个内核，而不是每个操作一个内核，中间结果就不必经过全局内存：一次完成 GEMM + 偏置 + ReLU。",
          en_aliases=("fused",), zh_aliases=("算子融合", "内核融合", "fusion")),
        T("vectorized-access", "vectorized access", "向量化访存",
          "Loading or storing {vec_floats} floats ({vec_bytes} bytes) with one instruction (`float4`, `LDG.128`) "
          "instead of four. The address must be {vec_bytes}-byte aligned.",
          "用一条指令（`float4`、`LDG.128`）而不是四条来加载或存储 {vec_floats} 个 float（{vec_bytes} 字节）。"
          "地址必须按 {vec_bytes} 字节对齐。",
          en_aliases=("vectorized load", "vectorized store", "vector load", "vectorized", "vectorization"),
          zh_aliases=("向量化访问", "向量化加载", "向量化")),
        T("warp-tiling", "warp tiling", "线程束分块",
          "A middle level of tiling between block and thread: each warp owns a warp tile of C and its threads "
          "split it, so the warp's shared-memory reads stay conflict-free and reuse grows.",
          "介于线程块和线程之间的一层分块：每个线程束负责 C 的一个线程束分块，再由其中的线程切分，"
          "使线程束读取共享内存时不发生冲突，复用也更多。",
          en_aliases=("warp tile", "warp-level tiling"), zh_aliases=("warp tiling", "warp 分块")),
        T("autotuning", "autotuning", "自动调优",
          "Timing many settings of a kernel's parameters on the reader's GPU and keeping the fastest for each "
          "matrix size.",
          "在读者的 GPU 上对内核参数的许多设置逐一计时，并为每种矩阵规模保留最快的那个。",
          en_aliases=("autotuner", "autotune"), zh_aliases=("自动调优器", "autotuning")),
        T("split-k", "split-K", "split-K",
          "Splitting the K dimension among several blocks that each compute a partial C, then adding the parts. "
          "It gives a small or thin GEMM enough blocks to fill the SMs.",
          "把 K 维分给几个线程块，各自算出 C 的部分和，再把各部分相加。它让规模小或形状细长的 GEMM 也有足够的线程块填满各个 SM。",
          en_aliases=("split K", "split-k"), zh_aliases=("K 维切分", "split K")),
        T("stream-k", "stream-K", "stream-K",
          "A schedule that deals out the k-tiles of all tiles of C, rather than whole tiles, in equal contiguous "
          "shares, one per SM (or cluster), so that no SM idles through a last, partly full round. A tile whose "
          "k-tiles two workers share is summed by a fixup.",
          "一种调度：不是按完整分块，而是把 C 所有分块的 k 分块按连续、等长的份额分给各个 SM（或簇），每个一份，"
          "使没有哪个 SM 在只部分填满的最后一轮里闲着。k 分块由两个执行者分担的分块，要经过合并（fixup）求和。",
          en_aliases=("stream K", "streamK"), zh_aliases=("stream K",)),
        T("fixup", "fixup", "合并（fixup）",
          "In split-K or stream-K: adding up the partial sums of a tile that several blocks computed, through a "
          "workspace in global memory, before the tile's epilogue writes C.",
          "在 split-K 或 stream-K 中：几个线程块各算出同一分块的部分和，经全局内存中的工作区把它们相加，"
          "然后由该分块的尾处理写出 C。",
          en_aliases=("fix-up",), zh_aliases=("fixup",)),
        T("persistent-kernel", "persistent kernel", "持久化内核",
          "A kernel that launches only as many blocks as fit on the SMs at once; each block loops over many tiles "
          "of C, so setup is paid once and one tile's epilogue overlaps the next tile's loads.",
          "只启动恰好能同时驻留在各 SM 上的线程块的内核；每个线程块循环处理 C 的许多分块，"
          "初始化只做一次，一个分块的尾处理也能与下一个分块的加载重叠。",
          en_aliases=("persistent grid", "persistent block"),
          zh_aliases=("持久化线程块", "持久内核", "常驻线程块网格", "persistent kernel")),
    )),
    Group("Tensor Cores and number formats", "张量核心与数据格式", (
        T("tensor-core", "Tensor Core", "张量核心",
          "A unit in each SM that multiplies small matrix tiles in one instruction, many times faster than FFMA "
          "in low precision: Level 11 reaches {l11_tflops} TFLOPS in bf16 on the H200, against an fp32 FFMA peak of {h200_fp32}.",
          "SM 中用一条指令完成小矩阵块乘法的单元，在低精度下比 FFMA 快许多倍：H200 上第 11 级以 bf16 达到 {l11_tflops} TFLOPS，而 fp32 FFMA 的峰值只有 {h200_fp32}。",
          en_aliases=("tensor core",), zh_aliases=("Tensor Core", "张量核")),
        T("wmma", "WMMA", "WMMA",
          "Warp matrix multiply-accumulate, CUDA C++'s portable API for Tensor Cores (`nvcuda::wmma`): a warp "
          "loads fragments, multiplies {wmma_shape} tiles and stores the result.",
          "线程束矩阵乘累加（warp matrix multiply-accumulate），CUDA C++ 中使用张量核心的可移植 API（`nvcuda::wmma`）："
          "一个线程束加载片段、计算 {wmma_shape} 的分块乘法并存回结果。",
          en_aliases=("wmma",), zh_aliases=("wmma",)),
        T("fragment", "fragment", "片段",
          "A tile of A, B or the accumulator spread across the registers of the {warp} threads of a warp, in a "
          "layout the Tensor Core instruction defines.",
          "分布在一个线程束 {warp} 个线程的寄存器中的 A、B 或累加器分块，其布局由张量核心指令规定。",
          zh_aliases=("fragment",)),
        T("mma-sync", "mma.sync", "mma.sync",
          "The PTX instruction behind WMMA, used directly: `mma.sync.aligned.m16n8k16` multiplies a 16×16 tile of "
          "A by a 16×8 tile of B for one warp, with a register layout you control.",
          "WMMA 背后的 PTX 指令，这里直接使用：`mma.sync.aligned.m16n8k16` 让一个线程束把 A 的 16×16 分块与 "
          "B 的 16×8 分块相乘，寄存器布局由你掌控。"),
        T("ldmatrix", "ldmatrix", "ldmatrix",
          "A warp-wide PTX instruction that loads 8×8 matrices from shared memory straight into the fragment "
          "layout of `mma.sync`, optionally transposed.",
          "线程束级的 PTX 指令，把 8×8 矩阵从共享内存直接加载成 `mma.sync` 所需的片段布局，可选择同时转置。"),
        T("fp32", "fp32", "fp32",
          "IEEE single precision, {fp32_bytes} bytes per value (`float`). Levels 1 to 8 compute in fp32.",
          "IEEE 单精度浮点，每个值 {fp32_bytes} 字节（`float`）。第 1 到 8 级都用 fp32 计算。",
          en_aliases=("FP32", "float32", "single precision"), zh_aliases=("FP32", "float32", "单精度")),
        T("tf32", "tf32", "tf32",
          "TensorFloat-32: fp32's range with fp16's precision, a Tensor Core input format that cuBLAS may use "
          "for fp32 GEMMs when allowed to.",
          "TensorFloat-32：范围同 fp32、精度同 fp16 的张量核心输入格式；在允许的情况下，cuBLAS 可以用它计算 fp32 GEMM。",
          en_aliases=("TF32", "TensorFloat-32"), zh_aliases=("TF32", "TensorFloat-32")),
        T("fp16", "fp16", "fp16",
          "IEEE half precision, {half_bytes} bytes per value: more precision than bf16 but a much smaller range.",
          "IEEE 半精度浮点，每个值 {half_bytes} 字节：精度比 bf16 高，但范围小得多。",
          en_aliases=("FP16", "float16", "half precision"), zh_aliases=("FP16", "float16", "半精度")),
        T("bf16", "bf16", "bf16",
          "bfloat16, {half_bytes} bytes per value with fp32's range and less precision; the usual input format "
          "of Tensor Core GEMMs in deep learning. Accumulation stays in fp32.",
          "bfloat16，每个值 {half_bytes} 字节，范围与 fp32 相同、精度更低；深度学习中张量核心 GEMM 常用的输入格式。"
          "累加仍用 fp32。",
          en_aliases=("BF16", "bfloat16"), zh_aliases=("BF16", "bfloat16")),
        T("fp8", "fp8", "fp8",
          "{fp8_bytes}-byte floating-point formats for Hopper's fastest Tensor Core instructions. e4m3 has 1 sign, "
          "4 exponent and 3 fraction bits and reaches {e4m3_max}; so few bits only work with a scale factor.",
          "{fp8_bytes} 字节的浮点格式，用于 Hopper 上最快的张量核心指令。e4m3 有 1 个符号位、4 个指数位和 3 个尾数位，"
          "最大为 {e4m3_max}；位数这么少，必须配合缩放因子使用。",
          en_aliases=("FP8", "e4m3", "float8_e4m3"), zh_aliases=("FP8", "e4m3", "float8_e4m3")),
        T("scale-factor", "scale factor", "缩放因子",
          "The number an FP8 value is multiplied by to mean what it stands for: x is stored as e4m3(x / s). "
          "A scale maps the largest |x| of its block onto {e4m3_max}, the top of e4m3's range.",
          "FP8 值要乘上的那个数，乘完才是它所代表的值：x 存为 e4m3(x / s)。缩放因子把所在块的最大 |x| 映射到 "
          "e4m3 的上限 {e4m3_max}。",
          en_aliases=("scaling factor",), zh_aliases=("比例因子",)),
        T("fine-grained-scaling", "fine-grained scaling", "细粒度缩放",
          "One scale factor per small block instead of one per tensor: in Level 13, per 1×{scale_block} strip of A "
          "and per {scale_block}×{scale_block} tile of B, so one large value coarsens only its own block.",
          "每个小数据块一个缩放因子，而不是整个张量一个：第 13 级中 A 每个 1×{scale_block} 的条带、B 每个 "
          "{scale_block}×{scale_block} 的分块各一个，一个大值只会让它所在的块变粗糙。",
          en_aliases=("blockwise scaling", "block scaling", "fine-grained scales"), zh_aliases=("块级缩放",)),
        T("outlier-channel", "outlier channel", "离群通道",
          "A column of an activation matrix whose values are hundreds or thousands of times larger than the rest. "
          "Under one scale per tensor it pushes every ordinary value down towards e4m3's subnormals, or to zero.",
          "激活矩阵中数值比其余部分大数百、数千倍的某一列。整个张量只有一个缩放因子时，它会把所有普通值压向 "
          "e4m3 的次正规数，甚至压成零。",
          en_aliases=("outlier",), zh_aliases=("离群值", "异常通道")),
        T("promotion", "promotion", "累加提升",
          "Adding the Tensor Cores' partial sum into true fp32 registers with ordinary FMAs at fixed intervals "
          "(every {scale_block} of k in Level 13) and restarting it from zero, because an FP8 wgmma adds with fewer "
          "bits than fp32 keeps.",
          "每隔固定的长度（第 13 级中 k 方向每 {scale_block}）用普通 FMA 把张量核心的部分和加进真正的 fp32 寄存器，"
          "再让部分和从零开始，因为 FP8 wgmma 累加时保留的位数比 fp32 少。",
          en_aliases=("promoted", "promoting"), zh_aliases=("两级累加", "精度提升")),
        T("fast-accumulation", "fast accumulation", "快速累加",
          "Letting the Tensor Cores accumulate the whole K of an FP8 GEMM without promotion: faster, less accurate "
          "on long sums. cuBLASLt offers it as an option (use_fast_accum in PyTorch).",
          "FP8 GEMM 中让张量核心不经累加提升、直接累加整个 K：更快，但长求和的精度较差。cuBLASLt 把它作为一个选项"
          "提供（PyTorch 中的 use_fast_accum）。",
          en_aliases=("fast-accum",), zh_aliases=("fast accumulation",)),
    )),
    Group("Hopper", "Hopper 架构", (
        T("tma", "TMA", "TMA",
          "Tensor Memory Accelerator: a Hopper unit that copies a whole tile between global and shared memory from "
          "one instruction and a descriptor, swizzling on the way, and signals an mbarrier when done.",
          "张量内存加速器（Tensor Memory Accelerator）：Hopper 上的硬件单元，凭一条指令和一个描述符就能在全局内存与共享内存之间拷贝整个分块，"
          "途中完成重排，结束时通知 mbarrier。",
          en_aliases=("Tensor Memory Accelerator",), zh_aliases=("张量内存加速器",)),
        T("mbarrier", "mbarrier", "mbarrier",
          "A barrier object in shared memory that counts arrivals and bytes: a TMA copy completes on it, and "
          "threads wait on it until the tile is there.",
          "位于共享内存中的屏障对象，统计到达的线程数和字节数：TMA 拷贝在它上面完成，线程在它上面等待分块到齐。",
          zh_aliases=("异步屏障",)),
        T("wgmma", "wgmma", "wgmma",
          "Hopper's asynchronous warpgroup MMA: {wg_warps} warps issue one Tensor Core multiply whose B (and "
          "possibly A) operand is read straight from shared memory.",
          "Hopper 的异步线程束组矩阵乘：{wg_warps} 个线程束发射一次张量核心乘法，B（也可以包括 A）操作数直接从共享内存读取。",
          zh_aliases=("WGMMA",)),
        T("warpgroup", "warpgroup", "线程束组",
          "{wg_warps} consecutive warps ({wg_threads} threads) that issue a wgmma together.",
          "连续的 {wg_warps} 个线程束（{wg_threads} 个线程），共同发射一条 wgmma。",
          en_aliases=("warp group",), zh_aliases=("warpgroup", "warp group")),
        T("warp-specialization", "warp specialization", "warp 特化",
          "Giving warps different jobs in one block: producer warps only issue TMA loads, consumer warpgroups only "
          "compute, and they hand tiles over through mbarriers.",
          "让同一线程块中的线程束各司其职：生产者线程束只发出 TMA 加载，消费者线程束组只做计算，双方通过 mbarrier 交接分块。",
          en_aliases=("warp-specialized",), zh_aliases=("线程束专用化", "线程束特化", "warp specialization")),
        T("cluster", "thread block cluster", "线程块簇",
          "A group of blocks on neighbouring SMs (sm_90) that can read each other's shared memory; TMA can "
          "multicast one tile to all of them.",
          "位于相邻 SM 上的一组线程块（sm_90），可以互相读取对方的共享内存；TMA 可以把一个分块多播给其中所有线程块。",
          en_aliases=("thread-block cluster", "cluster"), zh_aliases=("线程块集群", "cluster")),
        T("multicast", "TMA multicast", "TMA 多播",
          "One TMA copy that lands in the shared memory of several blocks of a cluster at once, at the same offset, "
          "completing on each block's mbarrier: two blocks that need the same tile ask L2 for it once.",
          "一次 TMA 拷贝同时写入簇内多个线程块的共享内存（偏移相同），并在每个线程块的 mbarrier 上完成："
          "需要同一分块的两个线程块只向 L2 请求一次。",
          en_aliases=("multicast",), zh_aliases=("多播",)),
        T("tma-store", "TMA store", "TMA 存储",
          "The TMA copy in the other direction, shared to global memory: threads write a tile into shared memory, "
          "one thread asks for the copy and the warps go on while it runs; parts outside the matrix are dropped.",
          "反方向的 TMA 拷贝，从共享内存到全局内存：线程先把分块写入共享内存，由一个线程发起拷贝，拷贝进行时"
          "各线程束继续工作；矩阵之外的部分被丢弃。",
          zh_aliases=("TMA store",)),
    )),
    Group("Blackwell", "Blackwell 架构", (
        T("tcgen05", "tcgen05", "tcgen05",
          "The fifth-generation Tensor Core instructions of data-centre Blackwell (sm_100a, sm_103a, sm_100f), which "
          "take the place of wgmma there: one thread issues `tcgen05.mma`, which reads A and B from shared memory "
          "(A also from tensor memory), accumulates in tensor memory and, through `tcgen05.commit`, signals an "
          "mbarrier when done.",
          "数据中心 Blackwell（sm_100a、sm_103a、sm_100f）的第五代张量核心指令，在那里取代 wgmma：`tcgen05.mma` "
          "由一个线程发射，从共享内存读取 A 和 B（A 也可以来自张量内存），在张量内存中累加，完成后经 "
          "`tcgen05.commit` 通知 mbarrier。",
          en_aliases=("tcgen05.mma",), zh_aliases=("tcgen05.mma",)),
        T("tensor-memory", "tensor memory", "张量内存",
          "On-chip memory in every SM of data-centre Blackwell that holds the Tensor Cores' accumulators: "
          "{tmem_rows} rows (lanes) × {tmem_cols} columns of 32-bit cells. A kernel allocates columns with "
          "`tcgen05.alloc`, the MMAs accumulate there, and the epilogue copies the results to registers with "
          "`tcgen05.ld`, so the accumulators no longer take the registers that wgmma's did.",
          "数据中心 Blackwell 每个 SM 上存放张量核心累加器的片上存储：{tmem_rows} 行（lane）× {tmem_cols} 列、"
          "每格 32 位。内核用 `tcgen05.alloc` 按列分配，MMA 在这里累加，尾处理再用 `tcgen05.ld` 把结果拷贝到寄存器；"
          "累加器因此不再像 wgmma 那样占用寄存器。",
          en_aliases=("TMEM", "Tensor Memory"), zh_aliases=("TMEM", "Tensor Memory")),
        T("cta-pair", "CTA pair", "CTA 对",
          "Two thread blocks of a cluster, on two SMs, that execute one `tcgen05.mma` together (`.cta_group::2`): "
          "a thread of one issues it, each block holds half of the rows of A and half of the columns of B in its "
          "shared memory and half of the accumulator in its tensor memory, so the pair computes a tile twice as tall "
          "while each SM loads only half of B.",
          "簇中位于两个 SM 上的两个线程块，共同执行一条 `tcgen05.mma`（`.cta_group::2`）：由其中一个线程块的一个线程"
          "发射；每个线程块在共享内存中放 A 的一半行和 B 的一半列，在张量内存中放一半累加器。于是这一对线程块算出"
          "高一倍的分块，而每个 SM 只需加载一半的 B。",
          en_aliases=("two-CTA MMA", "2-CTA MMA"), zh_aliases=("CTA pair", "双 CTA")),
    )),
    Group("Tools and instructions", "工具与指令", (
        T("cuda", "CUDA", "CUDA",
          "NVIDIA's platform for GPU programs: the CUDA C++ language for kernels, the runtime that launches them "
          "and the libraries around them.",
          "NVIDIA 的 GPU 编程平台：编写内核的 CUDA C++ 语言、启动内核的运行时（runtime，即负责启动内核、管理显存的 CUDA 运行时库），以及配套的各种库。"),
        T("cublas", "cuBLAS", "cuBLAS",
          "NVIDIA's BLAS library. Every level is timed against cuBLAS in the same run, and its speed is the "
          "yardstick of the course.",
          "NVIDIA 的 BLAS 库。每一级都在同一次运行中与 cuBLAS 对比计时，它的速度是本课程的标尺。"),
        T("cublaslt", "cuBLASLt", "cuBLASLt",
          "The lightweight cuBLAS API with more options per call: layouts, epilogues, FP8 inputs with their scale "
          "factors. Level 13's FP8 baselines are cuBLASLt, reached through PyTorch: torch._scaled_mm with per-tensor "
          "scales, and torch.nn.functional.scaled_mm with 1×128 and 128×128 block scales.",
          "cuBLAS 的轻量级 API，每次调用可设置更多选项：布局、尾处理、带缩放因子的 FP8 输入。第 13 级的 FP8 "
          "对照基准就是 cuBLASLt，经 PyTorch 调用：逐张量缩放用 torch._scaled_mm，1×128 与 128×128 块缩放用 "
          "torch.nn.functional.scaled_mm。"),
        T("ptx", "PTX", "PTX",
          "NVIDIA's virtual instruction set: CUDA C++ compiles to PTX, which `ptxas` turns into SASS. Inline PTX "
          "gives access to instructions such as `mma.sync` and `ldmatrix`.",
          "NVIDIA 的虚拟指令集：CUDA C++ 先编译成 PTX，再由 `ptxas` 转成 SASS。内联 PTX 可以直接使用 `mma.sync`、`ldmatrix` 等指令。"),
        T("sass", "SASS", "SASS",
          "The GPU's real machine code for one architecture. Reading it shows what the compiler did: how many "
          "FFMAs, which loads, whether they are vectorized.",
          "面向某一架构的 GPU 真实机器码。读它可以看出编译器做了什么：有多少条 FFMA、用了哪些加载、是否向量化。"),
        T("ptxas", "ptxas", "ptxas",
          "The assembler that turns PTX into SASS and reports each kernel's registers, shared memory and spills; "
          "the course's compile reports come from it.",
          "把 PTX 转成 SASS 的汇编器，会报告每个内核的寄存器、共享内存和溢出情况；本课程的编译报告就来自它。"),
        T("nvrtc", "NVRTC", "NVRTC",
          "NVIDIA's runtime compiler library, which compiles CUDA C++ from Python; the course uses it to build and "
          "inspect kernels even without a GPU.",
          "NVIDIA 的运行时编译库，可以在 Python 中编译 CUDA C++；本课程即使没有 GPU 也用它编译和检查内核。"),
        T("ffma", "FFMA", "FFMA",
          "The SASS instruction for an fp32 fused multiply-add. A kernel's inner loop should be mostly FFMAs; "
          "counting them against the loads measures how well it reuses data.",
          "fp32 融合乘加的 SASS 指令。内核的内层循环应以 FFMA 为主；把它的数量与加载指令对比，就能衡量数据复用得如何。"),
        T("ld-st", "LDG, STG, LDS, STS", "LDG、STG、LDS、STS",
          "SASS loads and stores: LDG and STG for global memory, LDS and STS for shared memory. A suffix gives "
          "the width, for example `LDS.128` moves {vec_bytes} bytes per lane.",
          "SASS 的加载与存储指令：LDG、STG 访问全局内存，LDS、STS 访问共享内存。后缀表示宽度，例如 `LDS.128` 每个 lane 读写 {vec_bytes} 字节。",
          en_aliases=("LDG", "STG", "LDS", "STS"), zh_aliases=("LDG", "STG", "LDS", "STS")),
        T("nsight-compute", "Nsight Compute", "Nsight Compute",
          "NVIDIA's kernel profiler; `ncu` is its command-line program. It reruns a kernel under hardware counters "
          "and reports them: sectors per request, bytes from DRAM, bank wavefronts, stall reasons. The course "
          "records them for chosen settings at 4096³ (`python -m gemm_course counters` prints them).",
          "NVIDIA 的内核性能分析工具，`ncu` 是它的命令行程序。它在硬件计数器下重新运行内核并报告结果：每次请求的扇区数、"
          "从 DRAM 读取的字节数、存储体波前数、停顿原因。本课程为选定的配置在 4096³ 下记录了这些计数器"
          "（`python -m gemm_course counters` 可以打印出来）。",
          en_aliases=("ncu",), zh_aliases=("ncu",)),
        T("stall-reason", "stall reason", "停顿原因",
          "Why a warp could not issue an instruction, as Nsight Compute counts it, in cycles per issued instruction "
          "(how long, on average, warps waited for that reason per instruction issued; Nsight Compute reads the "
          "same number as warps waiting per issued instruction): `long_scoreboard`, waiting for data from global or local memory; `short_scoreboard`, for "
          "shared memory; `lg_throttle`, the queue for global loads is full; `mio_throttle`, the MIO queue is "
          "full; `barrier`, waiting at `__syncthreads()`; `wait`, a fixed latency; `not_selected`, ready but "
          "another warp issued.",
          "线程束无法发射指令的原因，由 Nsight Compute 统计，单位是每条已发射指令的周期数（平均每发射一条指令，线程束因这个原因等待多久；Nsight Compute 也把同一个数读作每条已发射指令对应的等待线程束数）："
          "`long_scoreboard` 在等全局或局部内存的数据；`short_scoreboard` 在等共享内存；`lg_throttle` 是全局加载的队列已满；"
          "`mio_throttle` 是 MIO 队列已满；`barrier` 在 `__syncthreads()` 处等待；`wait` 是固定延迟；"
          "`not_selected` 是已就绪、但这一周期别的线程束发射了。",
          en_aliases=("stall", "stalled"), zh_aliases=("停顿",)),
        T("mio-queue", "MIO queue", "MIO 队列",
          "The queue in front of an SM's memory input/output unit, which takes shared-memory instructions (LDS, "
          "STS) among others. When a kernel issues them faster than they are served, the queue fills and warps "
          "stall with `mio_throttle`, as in Level 2.",
          "SM 中内存输入输出单元前的队列，共享内存指令（LDS、STS）等都经由它。内核发出这些指令快于它们被服务时，"
          "队列就会填满，线程束以 `mio_throttle` 停顿，第 2 级就是这样。",
          en_aliases=("MIO",), zh_aliases=("MIO", "访存指令队列", "共享内存流水线")),
        T("cuda-event", "CUDA event", "CUDA 事件",
          "A marker recorded into a GPU's stream; the time between two events is measured on the GPU, so it "
          "covers the work between them and not the Python around it. The course's timing places one before "
          "and one after each launch.",
          "记录到 GPU 流中的一个标记；两个事件之间的时间在 GPU 上测量，只包含两者之间的工作，不包含外面的 Python 开销。"
          "本课程计时时在每次启动的前后各放一个事件。",
          en_aliases=("cudaEvent",), zh_aliases=("cuda 事件",)),
        T("name-expression", "name expression", "名字表达式",
          "The C++ spelling of one instance of a template kernel, such as `\"gemm_smem_tiled<32>\"`. NVRTC "
          "compiles that instance and reports its mangled symbol name, by which the host finds and launches it.",
          "模板内核某个实例的 C++ 写法，例如 `\"gemm_smem_tiled<32>\"`。NVRTC 编译这个实例并给出它经过名字修饰的符号名，"
          "主机端凭这个名字找到并启动它。",
          en_aliases=("name expressions",)),
        T("launch-bounds", "launch bounds", "启动边界",
          "`__launch_bounds__(N, B)` on a kernel promises the compiler at most N threads per block and asks for "
          "at least B resident blocks per SM. ptxas then keeps each thread within {regs_per_sm} / (N·B) "
          "registers, spilling if it must: Level 5's `__launch_bounds__(256, 2)` allows 128.",
          "内核上的 `__launch_bounds__(N, B)` 向编译器保证每个线程块最多 N 个线程，并要求每个 SM 至少驻留 B 个线程块。"
          "于是 ptxas 把每个线程的寄存器控制在 {regs_per_sm} / (N·B) 个以内，必要时溢出：第 5 级的 "
          "`__launch_bounds__(256, 2)` 允许 128 个。",
          en_aliases=("__launch_bounds__",), zh_aliases=("__launch_bounds__", "launch bounds")),
        T("ldgsts", "LDGSTS", "LDGSTS",
          "The SASS instruction of `cp.async`: a load from global memory whose data goes straight into shared "
          "memory, without a register in between. `LDGSTS.E.BYPASS.128` copies {vec_bytes} bytes per lane and "
          "skips L1.",
          "`cp.async` 对应的 SASS 指令：从全局内存加载，数据直接写入共享内存，中间不经过寄存器。"
          "`LDGSTS.E.BYPASS.128` 每个 lane 拷贝 {vec_bytes} 字节，并绕过 L1。"),
        T("blas", "BLAS", "BLAS",
          "Basic Linear Algebra Subprograms: the standard set of vector and matrix routines. A routine's name "
          "starts with its data type, so SGEMM is the single-precision (fp32) GEMM and DGEMM the double-precision "
          "one; cuBLAS is NVIDIA's BLAS for the GPU.",
          "基础线性代数子程序（Basic Linear Algebra Subprograms）：向量与矩阵运算的标准接口。例程名以数据类型打头，"
          "所以 SGEMM 是单精度（fp32）GEMM，DGEMM 是双精度 GEMM；cuBLAS 是 NVIDIA 在 GPU 上的 BLAS 实现。",
          en_aliases=("Basic Linear Algebra Subprograms",), zh_aliases=("基础线性代数子程序",)),
    )),
    Group("Several GPUs", "多 GPU", (
        T("nvlink", "NVLink", "NVLink",
          "NVIDIA's direct link between GPUs, much faster than PCIe; it carries the tiles that GPUs exchange in "
          "a multi-GPU GEMM.",
          "NVIDIA 的 GPU 间直连链路，比 PCIe 快得多；多 GPU GEMM 中各 GPU 交换的分块就经由它传输。"),
        T("nccl", "NCCL", "NCCL",
          "NVIDIA's library of collective operations between GPUs (broadcast, all-gather, all-reduce).",
          "NVIDIA 的 GPU 间集合通信库（广播、all-gather、all-reduce 等）。"),
        T("summa", "SUMMA", "SUMMA",
          "Scalable universal matrix multiplication: the GPUs form a grid, each owns a block of C, and at each step "
          "one panel of A and one of B are broadcast along the rows and columns of GPUs.",
          "可扩展通用矩阵乘法（scalable universal matrix multiplication）：各 GPU 排成网格，每个 GPU 负责 C 的一块，"
          "每一步沿 GPU 的行和列广播 A 的一个条带和 B 的一个条带。"),
        T("alpha-beta-model", "α-β model", "α-β 模型",
          "The time of a message or a collective as a fixed cost plus bytes over bandwidth: steps·α + factor·n·β, "
          "where α is a fixed cost per step, β the seconds per byte over one link, and the steps and the factor "
          "depend on the collective and its algorithm (ring or tree). Fitted to measured times, α is the line's "
          "intercept, not a measured latency of one step.",
          "把一条消息或一次集合通信的时间写成固定开销加上字节数除以带宽：步数·α + 系数·n·β。α 是每一步的固定开销，"
          "β 是一条链路上每字节所需的秒数，步数和系数取决于集合通信的种类及其算法（环或树）。用实测时间拟合时，"
          "α 是拟合直线的截距，而不是实测的单步延迟。",
          en_aliases=("alpha-beta model",), zh_aliases=("alpha-beta 模型",)),
        T("all-reduce", "all-reduce", "all-reduce",
          "A collective that adds one buffer over all GPUs and leaves the sum on every GPU. On a ring it is a "
          "reduce-scatter followed by an all-gather; each GPU sends and receives almost twice the buffer.",
          "把同一个缓冲区在所有 GPU 上求和、并让每个 GPU 都得到这个和的集合通信。在环上它就是 reduce-scatter 之后"
          "再做一次 all-gather；每个 GPU 收发的数据接近缓冲区的两倍。",
          en_aliases=("allreduce",), zh_aliases=("全归约", "AllReduce")),
        T("reduce-scatter", "reduce-scatter", "reduce-scatter",
          "A collective that adds a buffer over all GPUs and leaves each GPU a different piece of the sum: the first "
          "half of a ring all-reduce. Megatron-LM's sequence parallelism works on each GPU's piece (its rows) before "
          "the all-gather.",
          "把一个缓冲区在所有 GPU 上求和、每个 GPU 只留下和中各不相同的一块的集合通信：环形 all-reduce 的前一半。"
          "Megatron-LM 的序列并行在 all-gather 之前，先在每个 GPU 自己的那一块（它的那些行）上做逐行运算。",
          zh_aliases=("ReduceScatter",)),
        T("all-gather", "all-gather", "all-gather",
          "A collective in which every GPU contributes one piece and every GPU ends with all the pieces, in rank "
          "order: the second half of a ring all-reduce, and the way the row split collects B when each GPU starts "
          "with a slice of it.",
          "每个 GPU 贡献一块、最后每个 GPU 都按编号顺序得到全部各块的集合通信：环形 all-reduce 的后一半；"
          "当每个 GPU 起初只持有 B 的一片时，按行划分也用它收齐 B。",
          zh_aliases=("AllGather",)),
        T("tensor-parallelism", "tensor parallelism", "张量并行",
          "Splitting one layer's weight matrices over GPUs so that each GPU computes part of every product. In a "
          "transformer's MLP block (Megatron-LM's split) the first weight matrix is cut by columns and the second by "
          "rows, so the only communication is one sum of partial results per block.",
          "把同一层的权重矩阵切分到多个 GPU 上，让每个 GPU 计算每个乘积的一部分。在 Transformer 的 MLP 块中"
          "（Megatron-LM 的切法），第一个权重矩阵按列切、第二个按行切，于是每个块只需要一次对部分结果求和的通信。",
          en_aliases=("tensor parallel",)),
        T("column-parallel-layer", "column-parallel layer", "列并行层",
          "A linear layer whose weight matrix is cut by columns: each GPU holds all of the input and computes its own "
          "columns of the output, with no communication; a pointwise activation can follow on each GPU's slice.",
          "权重矩阵按列切分的线性层：每个 GPU 持有完整的输入，计算输出中属于自己的那些列，不需要通信；"
          "逐元素的激活函数可以直接作用在每个 GPU 自己的切片上。",
          en_aliases=("column-parallel",)),
        T("row-parallel-layer", "row-parallel layer", "行并行层",
          "A linear layer whose weight matrix is cut by rows: each GPU multiplies its columns of the input by its "
          "rows of the weights and gets a partial result the size of the whole output; the partials are added over "
          "the GPUs by an all-reduce.",
          "权重矩阵按行切分的线性层：每个 GPU 用输入中属于自己的那些列乘以自己那部分权重行，得到与整个输出同样大小的"
          "部分结果；各 GPU 的部分结果再由 all-reduce 相加。",
          en_aliases=("row-parallel",)),
        T("communication-overlap", "overlap of communication and compute", "通信与计算重叠",
          "Running the collectives while the GPUs keep computing, so that the transfers hide under the arithmetic: "
          "the work is cut into chunks, and one chunk's collective runs on a second stream while the next chunk's "
          "GEMMs run. The share hidden is (serial time − overlapped time) / communication time.",
          "在 GPU 继续计算的同时做集合通信，让传输藏在计算之下：把工作切成若干块，一块的集合通信在第二个流上进行，"
          "同时下一块的 GEMM 照常运行。被隐藏的比例是（串行时间 − 重叠时间）/ 通信时间。",
          en_aliases=("communication overlap", "overlap communication with compute"),
          zh_aliases=("通信重叠", "计算与通信重叠")),
    )),
    Group("Triton and Gluon", "Triton 与 Gluon", (
        T("triton", "Triton", "Triton",
          "A language embedded in Python for GPU kernels: a kernel is written on whole tiles (`tl.load` of a tile, "
          "`tl.dot` of two tiles) and the compiler decides what the CUDA levels write by hand: threads, shared-memory "
          "layout, copies in flight, Tensor Core instructions.",
          "嵌入在 Python 中、用来编写 GPU 内核的语言：内核直接写在整个分块上（用 `tl.load` 加载一个分块，用 `tl.dot` "
          "乘两个分块），CUDA 各级手工写出的内容由编译器决定：线程、共享内存布局、在途的拷贝、张量核心指令。",
          en_aliases=("Triton kernel",), zh_aliases=("Triton 内核",)),
        T("gluon", "Gluon", "Gluon",
          "Triton's lower layer: the same Python front end, but the programmer places what Triton leaves to its "
          "compiler: every tensor's layout, TMA copies, mbarriers, wgmma and its waits, and warp specialization.",
          "Triton 的下层：同样的 Python 前端，但 Triton 交给编译器决定的内容要由程序员写明：每个张量的布局、TMA "
          "拷贝、mbarrier、wgmma 及其等待，以及 warp 特化。",
          en_aliases=("Gluon kernel",), zh_aliases=("Gluon 内核",)),
        T("triton-program", "Triton program", "Triton 程序",
          "One instance of a Triton kernel, numbered by `tl.program_id`: it runs on one thread block and computes "
          "one tile of C, as one block of a CUDA level does.",
          "Triton 内核的一个实例，由 `tl.program_id` 编号：它运行在一个线程块上，计算 C 的一个分块，相当于 CUDA 各级中的"
          "一个线程块。",
          en_aliases=("program_id", "tl.program_id"), zh_aliases=("program_id",)),
        T("num-warps", "num_warps", "num_warps",
          "A Triton launch option: the warps of the block that runs each program ({warp} threads each). The "
          "compiler splits the tile over them, as Levels 5 and 8 split it over threads and warps by hand.",
          "Triton 的启动选项：运行每个程序的线程块有多少个线程束（每个 {warp} 个线程）。编译器把分块分给它们，"
          "就像第 5 级和第 8 级手工把分块分给线程和线程束一样。",
          en_aliases=("num warps",)),
        T("num-stages", "num_stages", "num_stages",
          "A Triton launch option: how many k-tiles the compiler keeps in flight in its ring of shared-memory "
          "buffers, the ring of copies Levels 4, 10 and 11 build by hand.",
          "Triton 的启动选项：编译器在共享内存环形缓冲中同时保持多少个在途的 k 分块，也就是第 4、10、11 级手工搭建的"
          "拷贝环。",
          en_aliases=("num stages",)),
        T("tensor-descriptor", "tensor descriptor", "张量描述符",
          "The host's description of a matrix for TMA (base address, shape, strides, the box a copy moves); a "
          "Triton or Gluon kernel loads a tile through it with one call, as Level 11 does with its tensor map.",
          "主机端为 TMA 描述一个矩阵的数据（基地址、形状、步长、一次拷贝传输的区块）；Triton 或 Gluon 内核通过它用一次"
          "调用加载一个分块，就像第 11 级用张量映射（tensor map）所做的那样。",
          en_aliases=("TensorDescriptor",), zh_aliases=("TensorDescriptor",)),
        T("interpreter-mode", "interpreter mode", "解释器模式",
          "Triton run with TRITON_INTERPRET=1: each program of the grid runs in turn as Python, with NumPy doing the "
          "arithmetic, on the CPU. It checks what a kernel computes, not how fast it runs or how it uses the GPU.",
          "设置 TRITON_INTERPRET=1 运行 Triton：网格中的每个程序依次作为 Python 在 CPU 上运行，运算由 NumPy 完成。"
          "它检查内核算出了什么，而不是它跑得多快、如何使用 GPU。",
          en_aliases=("Triton's interpreter",), zh_aliases=("Triton 解释器",)),
    )),
)

TERMS: tuple[Term, ...] = tuple(t for g in GROUPS for t in g.terms)


def term(slug: str) -> Term:
    """The record for a slug, e.g. ``term("bank-conflict")``."""
    for t in TERMS:
        if t.slug == slug:
            return t
    raise KeyError(f"no glossary term {slug!r}; known: {', '.join(t.slug for t in TERMS)}")


def ref(slug: str, text: Optional[str] = None, lang: str = "en") -> str:
    """The MyST role that links ``text`` (default: the term) to the entry: {ref}`text <glossary-slug>`."""
    t = term(slug)
    return f"{{ref}}`{text or (t.en if lang == 'en' else t.zh)} <{t.label}>`"


# --- finding terms in prose --------------------------------------------------------------------------

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_SASS_OPS = {"LDG", "STG", "LDS", "STS", "FFMA", "LDGSTS"}
# 线程束组织 is 线程束 + 组织 ("to organise"), not a warpgroup.
_NOT_FOLLOWED_BY = {"线程束组": "(?!织)", "CTA 对": "(?![应于比照称齐])"}  # CTA 对应 ("corresponds to"): no pair

# Phrases in which a glossary word means something else; they are not uses of the term.
NOT_TERMS: dict[str, tuple[str, ...]] = {
    "en": (
        r"fp32 lanes",                  # the SM's FP32 units, not the lanes of a warp
        r"process grid",                # a grid of GPUs (Level 12), not a CUDA grid
        r"grid (?:row|column)s?",       # a row of that grid of GPUs
        r"\d+ ?× ?\d+ grids?",          # "a 2×4 grid" of GPUs
        r"\$P\$ blocks",                # row blocks of a matrix split among GPUs
        r"TM×TN block",                 # a block of C held by one thread
        r"one thread that launched",    # a CPU thread
        r"k-blocks?",                   # 128 of k (Level 13's scale block), not a thread block
        r"block-scaled",                # scales per block of a matrix (cuBLASLt's FP8 GEMM), not a thread block
    ),
    "zh": (
        r"进程网格",                    # a grid of GPUs (Level 12)
        r"网格(?:第|行|列)",            # a row or column of that grid of GPUs
        r"\d+ ?× ?\d+ 网格",            # "2×4 网格" of GPUs
        r"一个线程单独发起",            # a CPU thread
    ),
}
_WORD = "A-Za-z0-9_"


def _alias_pattern(alias: str, lang: str) -> str:
    """A regex for one spelling: word boundaries around ASCII ends, an optional plural, a space that also
    matches a hyphen or a line break (and nothing at all next to a Chinese character), and a capital first
    letter for lowercase words at the start of a sentence."""
    parts = re.split(r"[ -]", alias)
    out = ""
    for i, part in enumerate(parts):
        if i:
            cjk_join = bool(re.match(f"[{_CJK}]", part[:1])) or bool(re.search(f"[{_CJK}]$", parts[i - 1]))
            out += r"[\s-]*" if cjk_join else r"[\s-]+"
        out += re.escape(part)
    first = alias[:1]
    if first.islower() and first.isascii():
        out = f"[{first}{first.upper()}]" + out[1:]
    if re.search(f"[{_WORD}]$", alias) and lang == "en":
        out += "(?:s|es)?"
    if re.match(f"[{_WORD}]", alias):
        out = f"(?<![{_WORD}.]){out}"
    if alias in _SASS_OPS:
        out += r"(?:\.\d+)?"  # LDS.128, STG.64: the width belongs to the instruction's name
    if re.search(f"[{_WORD}]$", alias):
        out += f"(?![{_WORD}])"
    return out + _NOT_FOLLOWED_BY.get(alias, "")


@lru_cache(maxsize=None)
def _matcher(lang: str) -> tuple[re.Pattern, dict[str, str]]:
    """One regex with every spelling of every term, longest spelling first (so "bank conflict" wins over
    "bank" and "线程块" over "线程"), and a map from the group name to the term's slug."""
    forms: list[tuple[str, str]] = []
    for t in TERMS:
        for form in (t.en_forms() if lang == "en" else t.zh_forms()):
            forms.append((form, t.slug))
    forms.sort(key=lambda f: -len(f[0]))
    groups: dict[str, str] = {}
    alternatives = []
    for i, (form, slug) in enumerate(forms):
        name = f"t{i}"
        groups[name] = slug
        alternatives.append(f"(?P<{name}>{_alias_pattern(form, lang)})")
    return re.compile("|".join(alternatives)), groups


@lru_cache(maxsize=None)
def _matchers_by_first_char(lang: str) -> dict[str, re.Pattern]:
    """_matcher's alternatives split by the character a spelling starts with (both cases for a lowercase
    ASCII letter), in the same longest-first order: the same matches, tried only where they can start."""
    _, groups = _matcher(lang)
    forms: list[tuple[str, str]] = []
    for t in TERMS:
        for form in (t.en_forms() if lang == "en" else t.zh_forms()):
            forms.append((form, t.slug))
    forms.sort(key=lambda f: -len(f[0]))
    by_first: dict[str, list[str]] = {}
    for i, (form, _slug) in enumerate(forms):
        first = form[:1]
        for key in ({first, first.upper()} if first.islower() and first.isascii() else {first}):
            by_first.setdefault(key, []).append(f"(?P<t{i}>{_alias_pattern(form, lang)})")
    return {key: re.compile("|".join(alts)) for key, alts in by_first.items()}


def find_terms(text: str, lang: str) -> list[tuple[int, int, str]]:
    """(start, end, slug) of every glossary term in ``text``, left to right, longest spelling first (what
    ``_matcher(lang)[0].finditer`` finds, tried only at characters a spelling can start with)."""
    _, groups = _matcher(lang)
    patterns = _matchers_by_first_char(lang)
    found, i, n = [], 0, len(text)
    while i < n:
        pattern = patterns.get(text[i])
        m = pattern.match(text, i) if pattern is not None else None
        if m:
            found.append((m.start(), m.end(), groups[m.lastgroup]))
            i = m.end()
        else:
            i += 1
    return found



# --- first uses in a chapter ---------------------------------------------------------------------------
# A chapter is a notebook (markdown cells tagged lang-en / lang-zh) or a MyST page (blocks after
# `+++ {"tags": ["lang-en"]}` breaks). In each language, the first use of every term in the prose must be
# a {ref} link to its entry. Prose excludes headings, code, math, figures, HTML, existing links and cells
# tagged "exercise" (those are the exercises' own text).

LANGS = ("en", "zh")
SKIP_TAGS = ("exercise",)

_MASKS = (
    re.compile(r"(?ms)^ {0,3}(`{3,}|~{3,}|:{3,}).*?^ {0,3}\1[`~:]*[ \t]*$"),  # fenced code, directives, figures
    re.compile(r"(?m)^ {0,3}#{1,6}(?:[ \t].*)?$"),                        # headings
    re.compile(r"(?m)^\([\w-]+\)=[ \t]*$"),                                # labels
    re.compile(r"(?m)^[ \t]*:[\w-]+:.*$"),                                  # directive options
    re.compile(r"<!--.*?-->", re.S),                                        # HTML comments
    re.compile(r"\$\$.*?\$\$", re.S),                                       # display math
    re.compile(r"(?<![\\$])\$(?!\s)[^$\n]+?(?<!\s)\$"),                    # inline math
    re.compile(r"\{[\w:-]+\}`[^`]*`"),                                      # roles, glossary links included
    re.compile(r"(`+).*?\1", re.S),                                         # inline code
    re.compile(r"!?\[[^\]]*\]\([^)]*\)"),                                   # links and images
    re.compile(r"<[^>\n]+>"),                                               # HTML tags
    re.compile(r"https?://\S+"),                                            # bare URLs
)


def _masked(text: str, lang: str) -> list[bool]:
    """For each character of a markdown cell: True where it is not prose (see _MASKS) or where a word
    means something else (NOT_TERMS)."""
    hidden = bytearray(len(text))
    masks = [*_MASKS, *(re.compile(p) for p in NOT_TERMS[lang])]
    for mask in masks:
        for m in mask.finditer(text):
            hidden[m.start():m.end()] = b"\x01" * (m.end() - m.start())
    return hidden


def uses(text: str, lang: str) -> list[tuple[int, int, str, bool]]:
    """(start, end, slug, linked) for every use of a term in one cell's prose, in order: glossary links
    (linked=True) and plain mentions outside code, math, headings and other links (linked=False)."""
    found = [(a, b, slug, True) for a, b, slug in iter_links(text)]
    hidden = _masked(text, lang)
    found += [(a, b, slug, False) for a, b, slug in find_terms(text, lang)
              if not any(hidden[a:b])]
    return sorted(found)


def first_use_problems(cells: list[str], lang: str) -> list[str]:
    """What is wrong with the first uses in a chapter's cells of one language (in reading order)."""
    known = {t.slug for t in TERMS}
    seen: set[str] = set()
    problems = []
    for i, text in enumerate(cells):
        for a, b, slug, linked in uses(text, lang):
            if linked and slug not in known:
                problems.append(f"cell {i}: {text[a:b]!r} links to an unknown glossary label")
            if slug in seen:
                continue
            seen.add(slug)
            if not linked:
                line = text[max(0, a - 30):b + 30].replace("\n", " ")
                problems.append(f"cell {i}: first use of {slug!r} is not linked: ...{line}...  "
                                f"write {ref(slug, text[a:b])}")
    return problems


def link_first_uses(cells: list[str], lang: str) -> list[str]:
    """The cells with the first use of each term turned into a glossary link (idempotent)."""
    seen: set[str] = set()
    out = []
    for text in cells:
        edits = []
        for a, b, slug, linked in uses(text, lang):
            if slug in seen:
                continue
            seen.add(slug)
            if not linked:
                edits.append((a, b, slug))
        for a, b, slug in reversed(edits):
            word = text[a:b]
            if lang == "zh":
                # `*术语*` next to a Chinese character: an emphasis that opens before a role is not
                # emphasis in CommonMark (the `{` is punctuation), so the link replaces the emphasis.
                m = re.search(r"(\*{1,2}|_{1,2})$", text[:a])
                if m and text[b:b + len(m.group(1))] == m.group(1):
                    a, b = a - len(m.group(1)), b + len(m.group(1))
            text = text[:a] + ref(slug, word) + text[b:]
        out.append(text)
    return out


# --- reading and writing a chapter's prose cells ---------------------------------------------------

_BREAK = re.compile(r"^\+\+\+[ \t]*(.*)$")
_CODE_CELL = re.compile(r"^ {0,3}(`{3,}|~{3,})\{(code-cell|raw-cell)\}")


def _md_blocks(text: str) -> list[tuple[int, int, list[str]]]:
    """(start, end, tags) of the markdown blocks of a MyST notebook page, by character offsets."""
    import json

    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    blocks: list[tuple[int, int, list[str]]] = []
    start, tags, i = None, [], 0
    if lines and lines[0].strip() == "---":  # front matter
        i = next(j for j in range(1, len(lines)) if lines[j].strip() == "---") + 1
    start = offsets[i]
    while i < len(lines):
        line = lines[i].rstrip("\n")
        brk, code = _BREAK.match(line), _CODE_CELL.match(line)
        if brk or code:
            blocks.append((start, offsets[i], tags))
            if brk:
                meta = brk.group(1).strip()
                tags = list(json.loads(meta).get("tags", [])) if meta else []
                start = offsets[i + 1]
                i += 1
                continue
            fence = code.group(1)
            j = i + 1
            while j < len(lines) and lines[j].strip() != fence:
                j += 1
            tags, start, i = [], offsets[min(j + 1, len(lines))], j + 1
            continue
        i += 1
    blocks.append((start, offsets[-1], tags))
    return [b for b in blocks if text[b[0]:b[1]].strip()]


def chapter_cells(path: Path, lang: str) -> list[str]:
    """The prose cells of one language of a chapter, in reading order (exercise cells left out)."""
    path = Path(path)
    tag = f"lang-{lang}"
    if path.suffix == ".ipynb":
        import json

        nb = json.loads(path.read_text(encoding="utf-8"))
        return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
                and tag in c["metadata"].get("tags", [])
                and not set(SKIP_TAGS) & set(c["metadata"].get("tags", []))]
    text = path.read_text(encoding="utf-8")
    return [text[a:b] for a, b, tags in _md_blocks(text)
            if tag in tags and not set(SKIP_TAGS) & set(tags)]


def link_chapter(path: Path) -> bool:
    """Link the first use of each term in both languages of a chapter; True if the file changed."""
    import json

    path = Path(path)
    if path.suffix == ".ipynb":
        raw = path.read_text(encoding="utf-8")
        nb = json.loads(raw)
        for lang in LANGS:
            tag = f"lang-{lang}"
            cells = [c for c in nb["cells"] if c["cell_type"] == "markdown"
                     and tag in c["metadata"].get("tags", [])
                     and not set(SKIP_TAGS) & set(c["metadata"].get("tags", []))]
            new = link_first_uses(["".join(c["source"]) for c in cells], lang)
            for cell, text in zip(cells, new):
                if text != "".join(cell["source"]):
                    cell["source"] = text.splitlines(keepends=True)
        out = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    else:
        raw = out = path.read_text(encoding="utf-8")
        for lang in LANGS:
            tag = f"lang-{lang}"
            blocks = [(a, b) for a, b, tags in _md_blocks(out)
                      if tag in tags and not set(SKIP_TAGS) & set(tags)]
            new = link_first_uses([out[a:b] for a, b in blocks], lang)
            for (a, b), text in reversed(list(zip(blocks, new))):
                out = out[:a] + text + out[b:]
    if out != raw:
        path.write_text(out, encoding="utf-8")
    return out != raw

# --- the page ----------------------------------------------------------------------------------------

FRONT_MATTER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  name: python3
  display_name: Python 3
  language: python
---
"""

INTRO_EN = (
    "This page explains, in a sentence or two each, the {n} terms the course uses. Every chapter links the first "
    "use of each term to its entry here. An entry gives the Chinese term the course uses, the other spellings you "
    "will meet in Chinese blogs and in NVIDIA's Chinese documents, the page where the course first uses it (found "
    "in the pages themselves, in reading order), and a definition with an example from the course."
)
INTRO_ZH = (
    "本页用一两句话解释本课程用到的 {n} 个术语。每一章都把某个术语的第一次出现链接到这里的对应条目。"
    "每个条目给出英文原文、中文博客和 NVIDIA 中文文档中常见的其他写法、本课程按阅读顺序第一次用到它的页面"
    "（从各页正文中查出），"
    "以及一段结合本课程例子的定义。"
)


REPO = PAGE.parents[1]


def reading_order() -> list[Path]:
    """The book's pages in reading order: ``_toc.yml``'s root, then its chapters; the glossary left out."""
    toc = (REPO / "_toc.yml").read_text(encoding="utf-8")
    names = re.findall(r"(?m)^root:\s*(\S+)", toc) + re.findall(r"(?m)^\s*-\s*file:\s*(\S+)", toc)
    pages = []
    for name in names:
        page = next((REPO / (name + ext) for ext in (".ipynb", ".md") if (REPO / (name + ext)).is_file()), None)
        if page is not None and page != PAGE:
            pages.append(page)
    return pages


@lru_cache(maxsize=None)
def first_uses(lang: str) -> dict[str, Path]:
    """For each term, the first page (in reading order) whose prose in ``lang`` uses it, linked or not.
    A term that prose never uses outside code (`wgmma`, `__launch_bounds__`) gets the first page whose
    markdown shows it in inline code."""
    found: dict[str, Path] = {}
    in_code: dict[str, Path] = {}
    for page in reading_order():
        for text in chapter_cells(page, lang):
            for _, _, slug, _ in uses(text, lang):
                found.setdefault(slug, page)
            for code in re.findall(r"`([^`\n]+)`", text):
                for _, _, slug in find_terms(code, lang):
                    in_code.setdefault(slug, page)
    return {**{s: p for s, p in in_code.items() if s not in found}, **found}


def first_used(slug: str) -> Optional[Path]:
    """The page where the term is first used, in either language (the twins of a page say the same
    things, but one may name a term a sentence earlier): the earlier of the two first uses."""
    order = {page: i for i, page in enumerate(reading_order())}
    pages = [p for p in (first_uses(lang).get(term(slug).slug) for lang in LANGS) if p is not None]
    return min(pages, key=order.__getitem__) if pages else None


def page_title(page: Path, lang: str) -> str:
    """A page's short name: "Level 2" / "第 2 级" for a level, else its heading in that language."""
    if page.suffix == ".ipynb":
        import json

        cells = json.loads(page.read_text(encoding="utf-8"))["cells"]
        heading = next(ln for c in cells for ln in "".join(c["source"]).splitlines() if ln.startswith("# "))
    else:
        heading = next(ln for ln in page.read_text(encoding="utf-8").splitlines() if ln.startswith("# "))
    en, _, zh = heading[2:].partition(" · ")
    title = (en if lang == "en" else zh or en).strip()
    return re.split(r"[:：]", title)[0] if re.match(r"(Level \d+|第 \d+ 级)[:：]", title) else title


def _where(slug: str, lang: str) -> str:
    page = first_used(slug)
    if page is None:
        return "only here" if lang == "en" else "仅见于本页"
    return f"{{doc}}`{page_title(page, lang)} </{page.relative_to(REPO).with_suffix('').as_posix()}>`"


def _entry(t: Term, lang: str) -> str:
    if lang == "en":
        zh = "、".join(t.zh_aliases)
        also = f" · **other Chinese spellings:** {zh}" if zh else ""
        return (f"({t.label})=\n### {t.en}\n\n"
                f"**中文：** {t.zh}{also} · **first used:** {_where(t.slug, 'en')}\n\n"
                f"{t.definition('en')}\n")
    title = t.zh if t.zh == t.en else f"{t.zh}（{t.en}）"
    also = "、".join(a for a in t.zh_aliases if a != t.en)
    also = f" · **其他写法：** {also}" if also else ""
    return (f"### {title}\n\n"
            f"**英文：** {t.en}{also} · **首次出现：** {_where(t.slug, 'zh')}\n\n"
            f"{t.definition('zh')}\n")


def render_page() -> str:
    """The text of book/glossary.md."""
    cell_en = '+++ {"tags": ["lang-en"]}\n\n'
    cell_zh = '+++ {"tags": ["lang-zh"]}\n\n'
    parts = [FRONT_MATTER, "\n# Glossary · 术语表\n\n"]
    n = len(TERMS)
    parts += [cell_en, INTRO_EN.format(n=n), "\n\n", cell_zh, INTRO_ZH.format(n=n), "\n\n"]
    for g in GROUPS:
        parts += [cell_en, f"## {g.en}\n\n", cell_zh, f"## {g.zh}\n\n"]
        for t in g.terms:
            parts += [cell_en, _entry(t, "en"), "\n", cell_zh, _entry(t, "zh"), "\n"]
    return "".join(parts).rstrip("\n") + "\n"


def page_labels(text: str) -> list[str]:
    """The ``glossary-*`` labels defined in a page, in order."""
    return re.findall(rf"(?m)^\(({LABEL_PREFIX}[a-z0-9-]+)\)=\s*$", text)


def iter_links(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, slug) of every ``{ref}`...<glossary-slug>``` role in ``text``."""
    for m in re.finditer(rf"\{{ref\}}`[^`<]*<{LABEL_PREFIX}([a-z0-9-]+)>`", text):
        yield m.start(), m.end(), m.group(1)


def plain(text: str) -> str:
    """``text`` with every glossary link replaced by its words: what a reader sees, for tests that look
    for a sentence in the prose. ``plain("32 {ref}`lanes <glossary-lane>`") == "32 lanes"``."""
    return re.sub(rf"\{{ref\}}`([^`<]*?)\s*<{LABEL_PREFIX}[a-z0-9-]+>`", r"\1", text)


def write_page(path: Path = PAGE) -> Path:
    path.write_text(render_page(), encoding="utf-8")
    return path


def main(argv: Optional[list[str]] = None) -> None:
    """``python -m gemm_course.display.glossary``: rewrite book/glossary.md from this module.
    ``python -m gemm_course.display.glossary link CHAPTER...``: link the first uses of terms in chapters."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["link"]:
        for name in args[1:]:
            print(("linked  " if link_chapter(Path(name)) else "as was   ") + name)
    else:
        print(write_page())


if __name__ == "__main__":
    main()
