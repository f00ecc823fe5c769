"""The registry of levels: one record per level, in teaching order.

A level knows everything the rest of the package needs to compile, launch, check and time it:
its CUDA C file, the C++ name of the kernel for a parameter setting, the launch geometry for a
problem size, its tunable parameters (compile-time template arguments) and what hardware it needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

KERNEL_DIR = Path(__file__).parent / "kernels"

MAX_THREADS_PER_BLOCK = 1024


@dataclass(frozen=True)
class Param:
    """A tunable parameter: a compile-time template argument of the kernel."""

    name: str
    default: Any
    choices: tuple
    doc_en: str
    doc_zh: str


@dataclass(frozen=True)
class Launch:
    """Launch geometry: grid and block in CUDA's (x, y, z) order, and dynamic shared memory."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_bytes: int = 0

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class Level:
    id: str
    number: int
    title_en: str
    title_zh: str
    source: str
    params: tuple[Param, ...]
    kernel_name: Callable[[Mapping[str, Any]], str]
    geometry: Callable[[int, int, int, Mapping[str, Any]], Launch]
    dtypes: tuple[str, ...] = ("float32",)
    min_cc: int = 50
    # Extra rules beyond "each value is one of its choices"; each returns (english, chinese)
    # messages for the violated ones.
    rules: Callable[[Mapping[str, Any]], list[tuple[str, str]]] = field(default=lambda p: [])
    uses_tensor_cores: bool = False
    # Some settings need a newer GPU than the level itself (e.g. cp.async needs sm_80).
    setting_min_cc: Callable[[Mapping[str, Any]], int] = field(default=lambda p: 0)
    # What `python -m gemm_course record` measures: these settings (overrides of the defaults) at
    # every recorded size and at the non-square `record_shapes` (M, N, K), and every valid setting
    # that `sweep` accepts at `sweep_size`.
    showcase: tuple[Mapping[str, Any], ...] = ({},)
    record_shapes: tuple[tuple[int, int, int], ...] = ()
    sweep: Optional[Callable[[Mapping[str, Any]], bool]] = None
    sweep_size: int = 4096
    # Settings that exist to separate two causes that change together in the showcase (e.g. Level 3's
    # strided load with conflict-free stores, Level 8 without its grouped block order): timed by
    # `python -m gemm_course experiments` and read by `counters --record`, beside the showcase.
    experiments: tuple[Mapping[str, Any], ...] = ()
    # > 0: the kernel has a fast path using vectors of this many floats, taken when K and N are
    # multiples of it and the pointers are aligned; the launcher passes "aligned" to kernel_name.
    vector_width: int = 0
    # The kernel takes (bias, alpha, beta) after (A, B, C, M, N, K): C = act(alpha·A·B + bias) + beta·C.
    epilogue: bool = False
    # C's dtype when it differs from the inputs' (Tensor Core levels: fp16 in, fp32 out).
    out_dtype: Optional[str] = None
    # The source includes CUDA headers (cuda_fp16.h, mma.h): compile with the toolkit's include dirs.
    cuda_headers: bool = False
    # > 0: A, B and C must start at addresses that are multiples of this many bytes (checked at launch).
    alignment: int = 0
    # Preconditions on the problem itself, as (english, chinese) messages for the violated ones.
    shape_rules: Callable[[int, int, int, Mapping[str, Any]], list[tuple[str, str]]] = field(
        default=lambda M, N, K, p: [])
    # The kernel uses instructions of one architecture only (sm_90a: wgmma, setmaxnreg): compiled
    # for sm_<min_cc>a, and run only on a GPU of exactly that compute capability.
    arch_specific: bool = False
    # The kernel's arguments when they are not (A, B, C, M, N, K): (A, B, C, M, N, K, params) → tuple.
    kernel_args: Optional[Callable[..., tuple]] = None
    # The kernel also computes a batch of independent products in one launch: 3-D A (batch × M × K),
    # B (batch × K × N) and C, one product per blockIdx.z (its geometry leaves grid z to the batch).
    batched: bool = False

    @property
    def path(self) -> Path:
        return KERNEL_DIR / self.source

    @property
    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def resolve(self, **params: Any) -> dict[str, Any]:
        """Fill in defaults and validate a parameter setting; raise ValueError naming the fix."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ValueError(
                f"level {self.id} has no parameter {', '.join(unknown)}; "
                f"its parameters are: {', '.join(known) or '(none)'}"
            )
        resolved = self.defaults | params
        for name, value in resolved.items():
            choices = known[name].choices
            if not any(type(value) is type(c) and value == c for c in choices):  # 64.0 is not 64, True not 1
                raise ValueError(
                    f"level {self.id}: {name}={value!r} is not allowed; choose one of {list(choices)}"
                )
        problems = self.rules(resolved)
        threads = self.geometry(1, 1, 1, resolved).threads_per_block
        if threads > MAX_THREADS_PER_BLOCK:
            problems.append((
                f"{threads} threads per block exceeds the hardware limit of {MAX_THREADS_PER_BLOCK}",
                f"每个线程块 {threads} 个线程，超过了硬件上限 {MAX_THREADS_PER_BLOCK}",
            ))
        if problems:
            detail = "; ".join(f"{en} / {zh}" for en, zh in problems)
            raise ValueError(f"level {self.id} with {resolved}: {detail}")
        return resolved

    def runs_on(self, cc: int) -> bool:
        """Whether a GPU of compute capability cc (e.g. 75) can run the level at all."""
        return cc == self.min_cc if self.arch_specific else cc >= self.min_cc

    @property
    def build_arch(self) -> Optional[str]:
        """The one target an arch-specific level is always compiled for ("sm_90a"), else None."""
        return f"sm_{self.min_cc}a" if self.arch_specific else None

    @property
    def needs(self) -> str:
        """The architectures the level runs on, e.g. "sm_80+" or "sm_90a only"."""
        return f"sm_{self.min_cc}a only" if self.arch_specific else f"sm_{self.min_cc}+"

    def required_cc(self, params: Mapping[str, Any]) -> int:
        """The compute capability (e.g. 80) a resolved setting needs."""
        return max(self.min_cc, self.setting_min_cc(params))

    def setting_runs_on(self, cc: int, params: Mapping[str, Any]) -> bool:
        """Whether a GPU of compute capability cc can run this resolved setting (e.g. Level 10's
        copy='tma' needs sm_90 where the level itself needs sm_80)."""
        return self.runs_on(cc) and cc >= self.required_cc(params)

    def valid_settings(self) -> list[dict[str, Any]]:
        """Every parameter setting that passes resolve(), in the order of the choices."""
        settings: list[dict[str, Any]] = [{}]
        for p in self.params:
            settings = [s | {p.name: v} for s in settings for v in p.choices]
        valid = []
        for s in settings:
            try:
                valid.append(self.resolve(**s))
            except ValueError:
                pass
        return valid


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- Level 1: the naive kernel -------------------------------------------------------------------

def _naive_kernel_name(p: Mapping[str, Any]) -> str:
    return f"gemm_naive_{p['mapping']}<{p['block_x']}, {p['block_y']}>"


def _naive_geometry(M: int, N: int, K: int, p: Mapping[str, Any]) -> Launch:
    bx, by = p["block_x"], p["block_y"]
    if p["mapping"] == "cols":  # x walks along the columns of C
        grid = (ceil_div(N, bx), ceil_div(M, by), 1)
    else:  # "rows": x walks down the rows of C
        grid = (ceil_div(M, bx), ceil_div(N, by), 1)
    return Launch(grid=grid, block=(bx, by, 1))


def _naive_rules(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    threads = p["block_x"] * p["block_y"]
    if threads < 32:
        return [(f"{threads} threads per block is less than one warp (32); enlarge block_x or block_y",
                 f"每个线程块只有 {threads} 个线程，不足一个线程束（32）；请增大 block_x 或 block_y")]
    return []


NAIVE = Level(
    id="01_naive",
    number=1,
    title_en="The naive kernel",
    title_zh="朴素内核",
    source="01_naive.cu",
    params=(
        Param("mapping", "cols", ("cols", "rows"),
              "which index threadIdx.x walks: 'cols' (neighbouring threads, neighbouring columns "
              "of C) or 'rows' (neighbouring threads, neighbouring rows)",
              "threadIdx.x 沿哪个方向走：'cols'（相邻线程对应 C 的相邻列）或 'rows'（相邻线程对应相邻行）"),
        Param("block_x", 32, (1, 2, 4, 8, 16, 32, 64, 128, 256),
              "threads per block along x", "线程块在 x 方向的线程数"),
        Param("block_y", 8, (1, 2, 4, 8, 16, 32, 64, 128, 256),
              "threads per block along y", "线程块在 y 方向的线程数"),
    ),
    kernel_name=_naive_kernel_name,
    geometry=_naive_geometry,
    rules=_naive_rules,
    showcase=({"mapping": "cols"}, {"mapping": "rows"}),
    sweep=lambda p: p["block_x"] >= 4 and p["block_y"] <= 64 and p["block_x"] * p["block_y"] >= 64,
)


# --- Levels 2-4: square tiles in shared memory ---------------------------------------------------

def _square_tile_geometry(M: int, N: int, K: int, p: Mapping[str, Any]) -> Launch:
    """One TILE×TILE block of threads per TILE×TILE tile of C."""
    t = p["tile"]
    return Launch(grid=(ceil_div(N, t), ceil_div(M, t), 1), block=(t, t, 1))


SMEM_TILING = Level(
    id="02_smem_tiling",
    number=2,
    title_en="Shared-memory tiling",
    title_zh="共享内存分块",
    source="02_smem_tiling.cu",
    params=(Param("tile", 32, (8, 16, 32), "tile edge: a block computes a tile×tile piece of C",
                  "分块边长：一个线程块计算 C 中 tile×tile 的一块"),),
    kernel_name=lambda p: f"gemm_smem_tiled<{p['tile']}>",
    geometry=_square_tile_geometry,
    showcase=({"tile": 8}, {"tile": 16}, {"tile": 32}),
)

LOAD_ORDERS = {"coalesced": 0, "strided": 1}
A_LAYOUTS = {"mk": 0, "mk_padded": 1, "km": 2, "km_padded": 3, "km_swizzled": 4}
B_LAYOUTS = {"kn": 0, "kn_padded": 1}

COALESCING_BANKS = Level(
    id="03_coalescing_banks",
    number=3,
    title_en="Coalescing and bank conflicts",
    title_zh="合并访问与存储体冲突",
    source="03_coalescing_banks.cu",
    params=(
        Param("tile", 32, (16, 32), "tile edge", "分块边长"),
        Param("load", "coalesced", tuple(LOAD_ORDERS),
              "how threads copy a tile from global memory: along rows (coalesced) or down columns",
              "线程从全局内存复制分块的方式：沿行（合并访问）或沿列（跨步）"),
        Param("a_layout", "mk", tuple(A_LAYOUTS),
              "where element (m, k) of the A tile lives in shared memory: As[m][k] or transposed "
              "As[k][m], plain, padded by one column, or XOR-swizzled",
              "A 分块的元素 (m, k) 在共享内存中的位置：As[m][k] 或转置的 As[k][m]，"
              "不加处理、每行填充一列，或按异或（XOR）重排"),
        Param("b_layout", "kn", tuple(B_LAYOUTS),
              "the B tile in shared memory: Bs[k][n] plain, or padded by one column (with a_layout="
              "'mk_padded' the strided load stores without bank conflicts, which isolates coalescing)",
              "B 分块在共享内存中的存放：Bs[k][n] 不加处理，或每行填充一列（与 a_layout='mk_padded' 一起使用时，"
              "跨步载入的写入不再有存储体冲突，从而单独测出合并访问的影响）"),
    ),
    kernel_name=lambda p: (f"gemm_coalescing_banks<{p['tile']}, {LOAD_ORDERS[p['load']]}, "
                           f"{A_LAYOUTS[p['a_layout']]}, {B_LAYOUTS[p['b_layout']]}>"),
    geometry=_square_tile_geometry,
    showcase=(
        {"a_layout": "mk"}, {"a_layout": "mk_padded"}, {"a_layout": "km"}, {"a_layout": "km_padded"},
        {"a_layout": "km_swizzled"}, {"load": "strided"},
    ),
    # Coalescing alone: both loads store into padded (conflict-free) tiles, so the two settings differ
    # only in how a warp reads global memory.
    experiments=({"load": "coalesced", "a_layout": "mk_padded", "b_layout": "kn_padded"},
                 {"load": "strided", "a_layout": "mk_padded", "b_layout": "kn_padded"}),
    sweep=lambda p: p["b_layout"] == "kn",
)

COPY_MODES = {"registers": 0, "cp_async": 1}

DOUBLE_BUFFERING = Level(
    id="04_double_buffering",
    number=4,
    title_en="Double buffering",
    title_zh="双缓冲",
    source="04_double_buffering.cu",
    params=(
        Param("tile", 32, (8, 16, 32), "tile edge", "分块边长"),
        Param("copy", "registers", tuple(COPY_MODES),
              "how the next tile travels: through registers (any GPU) or with cp.async (sm_80+)",
              "下一个分块的搬运方式：经由寄存器（任何 GPU）或使用 cp.async（sm_80 及以上）"),
    ),
    kernel_name=lambda p: f"gemm_double_buffered<{p['tile']}, {COPY_MODES[p['copy']]}>",
    geometry=_square_tile_geometry,
    setting_min_cc=lambda p: 80 if p["copy"] == "cp_async" else 0,
    showcase=({"copy": "registers"}, {"copy": "cp_async"}),
    sweep=lambda p: True,
)


# --- Levels 5-7: register blocking, fused epilogue, vectorized ------------------------------------

def _pow2(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(2 ** i for i in range(lo.bit_length() - 1, hi.bit_length()))


BLOCK_TILE_PARAMS = (
    Param("BM", 128, _pow2(16, 256), "rows of C per thread block", "每个线程块负责的 C 的行数"),
    Param("BN", 128, _pow2(16, 256), "columns of C per thread block", "每个线程块负责的 C 的列数"),
    Param("BK", 8, _pow2(4, 32), "depth of the k-tile staged in shared memory", "每次放入共享内存的 k 方向分块深度"),
    Param("TM", 8, _pow2(1, 16), "rows of C per thread (in registers)", "每个线程负责的 C 的行数（在寄存器中）"),
    Param("TN", 8, _pow2(1, 16), "columns of C per thread (in registers)", "每个线程负责的 C 的列数（在寄存器中）"),
)

STATIC_SHARED_LIMIT = 48 * 1024


def _thread_tile_threads(p: Mapping[str, Any]) -> int:
    return (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])


def _thread_tile_geometry(M: int, N: int, K: int, p: Mapping[str, Any]) -> Launch:
    return Launch(grid=(ceil_div(N, p["BN"]), ceil_div(M, p["BM"]), 1), block=(_thread_tile_threads(p), 1, 1))


def _thread_tile_rules(p: Mapping[str, Any], vector: int = 1) -> list[tuple[str, str]]:
    out = []
    for tile, thread in (("BM", "TM"), ("BN", "TN")):
        if p[tile] % p[thread]:
            out.append((f"{tile}={p[tile]} is not a multiple of {thread}={p[thread]}: threads cannot split "
                        "the tile evenly", f"{tile}={p[tile]} 不是 {thread}={p[thread]} 的整数倍：线程无法均分分块"))
    if out:
        return out
    threads = _thread_tile_threads(p)
    if threads < 32:
        out.append((f"only {threads} threads per block (BM/TM · BN/TN); a block needs at least one warp of 32",
                    f"每个线程块只有 {threads} 个线程（BM/TM · BN/TN）；至少需要一个 32 线程的线程束"))
    shared = 2 * 4 * p["BK"] * (p["BM"] + 4 + p["BN"])  # two (double-buffered) tiles of A and B
    if shared > STATIC_SHARED_LIMIT:
        out.append((f"the two buffered tiles need {shared} B of shared memory, over the 48 KB static limit; "
                    "lower BK, BM or BN", f"两组双缓冲分块需要 {shared} B 共享内存，超过 48 KB 的静态上限；"
                    "请减小 BK、BM 或 BN"))
    if p["TM"] * p["TN"] > 128:
        out.append((f"TM·TN = {p['TM'] * p['TN']} accumulators per thread cannot stay in 255 registers",
                    f"每线程 TM·TN = {p['TM'] * p['TN']} 个累加器，255 个寄存器放不下"))
    if vector > 1:
        bad = [n for n in ("BK", "BN", "TM", "TN") if p[n] % vector]
        if bad:
            out.append((f"{', '.join(bad)} must be multiples of {vector} for float4 accesses",
                        f"{', '.join(bad)} 必须是 {vector} 的整数倍才能使用 float4 访问"))
    return out


def _batched_suffix(p: Mapping[str, Any]) -> str:
    """The trailing template argument of a batched launch (the launcher sets "batched")."""
    return ", true" if p.get("batched") else ""


def _block_tile_name(kernel: str, p: Mapping[str, Any]) -> str:
    return f"{kernel}<{p['BM']}, {p['BN']}, {p['BK']}, {p['TM']}, {p['TN']}{_batched_suffix(p)}>"


def _tuning_sweep(p: Mapping[str, Any]) -> bool:
    """The autotuner's search space: every valid block tile with 64 to 512 threads."""
    return (64 <= _thread_tile_threads(p) <= 512 and p["BK"] in (8, 16) and p["TM"] in (4, 8)
            and p["TN"] in (4, 8) and p["BM"] >= 32 and p["BN"] >= 32)


REGISTER_BLOCKING = Level(
    id="05_register_blocking",
    number=5,
    title_en="Register blocking",
    title_zh="寄存器分块",
    source="05_register_blocking.cu",
    params=BLOCK_TILE_PARAMS,
    kernel_name=lambda p: _block_tile_name("gemm_register_blocked", p),
    geometry=_thread_tile_geometry,
    rules=_thread_tile_rules,
    showcase=({}, {"BM": 64, "BN": 64, "TM": 4, "TN": 4}),
    sweep=_tuning_sweep,
    batched=True,
)

ACTIVATIONS = {"none": 0, "relu": 1, "gelu": 2}

FUSED_EPILOGUE = Level(
    id="06_fused_epilogue",
    number=6,
    title_en="Fused epilogue",
    title_zh="融合尾处理",
    source="06_fused_epilogue.cu",
    params=BLOCK_TILE_PARAMS + (
        Param("activation", "relu", tuple(ACTIVATIONS), "activation applied to alpha·A·B + bias",
              "作用于 alpha·A·B + bias 的激活函数"),
        Param("bias", True, (False, True), "add a bias vector (one value per column of C)",
              "加上偏置向量（C 的每一列一个值）"),
        Param("accumulate", False, (False, True), "add beta · C (the old contents of C)",
              "加上 beta · C（C 原有的内容）"),
    ),
    kernel_name=lambda p: (f"gemm_fused_epilogue<{p['BM']}, {p['BN']}, {p['BK']}, {p['TM']}, {p['TN']}, "
                           f"{ACTIVATIONS[p['activation']]}, {str(p['bias']).lower()}, "
                           f"{str(p['accumulate']).lower()}>"),
    geometry=_thread_tile_geometry,
    rules=_thread_tile_rules,
    epilogue=True,
    showcase=({"activation": "none", "bias": False}, {"activation": "relu"}, {"activation": "gelu"},
              {"activation": "none", "bias": False, "accumulate": True}),
)

VECTORIZED = Level(
    id="07_vectorized",
    number=7,
    title_en="Vectorized loads and stores",
    title_zh="向量化访存",
    source="07_vectorized.cu",
    params=BLOCK_TILE_PARAMS,
    kernel_name=lambda p: _block_tile_name("gemm_vectorized" if p.get("aligned", True)
                                           else "gemm_register_blocked", p),
    geometry=_thread_tile_geometry,
    rules=lambda p: _thread_tile_rules(p, vector=4),
    vector_width=4,
    showcase=({}, {"BK": 16}),
    sweep=_tuning_sweep,
    batched=True,
)


# --- Level 8: warp tiling ----------------------------------------------------------------------------

def _warp_threads(p: Mapping[str, Any]) -> int:
    return (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32


def _warp_rules(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for tile, warp in (("BM", "WM"), ("BN", "WN")):
        if p[tile] % p[warp]:
            out.append((f"{tile}={p[tile]} is not a multiple of the warp tile {warp}={p[warp]}",
                        f"{tile}={p[tile]} 不是线程束分块 {warp}={p[warp]} 的整数倍"))
    if out:
        return out
    threads = _warp_threads(p)
    for name, elems in (("A", p["BM"] * p["BK"]), ("B", p["BK"] * p["BN"])):
        if elems % (4 * threads):
            out.append((f"the {name} tile ({elems} floats) does not split into whole float4s over {threads} threads; "
                        "change BK or the warp tiles", f"{name} 分块（{elems} 个 float）无法按 float4 均分给 "
                        f"{threads} 个线程；请调整 BK 或线程束分块"))
    shared = 2 * 4 * p["BK"] * (p["BM"] + 4 + p["BN"])
    if shared > STATIC_SHARED_LIMIT:
        out.append((f"two buffers need {shared} B of shared memory, over the 48 KB static limit",
                    f"两块缓冲区需要 {shared} B 共享内存，超过 48 KB 的静态上限"))
    accumulators = (4 * p["WM"] // 32) * (4 * p["WN"] // 16)
    if accumulators > 128:
        out.append((f"{accumulators} accumulators per thread (WM·WN/32) cannot stay in 255 registers",
                    f"每线程 {accumulators} 个累加器（WM·WN/32），255 个寄存器放不下"))
    return out


# The best setting of the recorded 4096³ sweep: 64×256 block tiles of 4 warps with 64×64 warp tiles
# (253 registers, 2 blocks and 8 warps per SM); recorded at every size beside the default.
TUNED_WARP_TILING: Mapping[str, Any] = {"BM": 64, "BN": 256, "WM": 64, "WN": 64}

WARP_TILING = Level(
    id="08_warp_tiling",
    number=8,
    title_en="Warp tiling",
    title_zh="线程束分块",
    source="08_warp_tiling.cu",
    params=(
        Param("BM", 128, (64, 128, 256), "rows of C per thread block", "每个线程块负责的 C 的行数"),
        Param("BN", 128, (64, 128, 256), "columns of C per thread block", "每个线程块负责的 C 的列数"),
        Param("BK", 16, (8, 16, 32), "depth of each k-tile", "每个 k 方向分块的深度"),
        Param("WM", 64, (32, 64, 128), "rows of C per warp", "每个线程束负责的 C 的行数"),
        Param("WN", 32, (16, 32, 64, 128), "columns of C per warp", "每个线程束负责的 C 的列数"),
        Param("min_blocks", 2, (1, 2), "blocks per SM the compiler must make room for (it caps registers "
              "at 65536 / (threads · min_blocks))", "编译器须保证每个 SM 能容纳的线程块数（寄存器上限随之为 "
              "65536 / (线程数 · min_blocks)）"),
        Param("group_m", 8, (1, 8), "tile rows per group of the block order: 8 makes blocks that run at "
              "the same time share rows of A and columns of B in L2; 1 is plain row-by-row order",
              "线程块顺序中每组的分块行数：8 让同时运行的线程块在 L2 中共享 A 的行与 B 的列；1 即逐行的普通顺序"),
    ),
    kernel_name=lambda p: (f"gemm_warp_tiled<{p['BM']}, {p['BN']}, {p['BK']}, {p['WM']}, {p['WN']}, "
                           f"{str(p.get('aligned', True)).lower()}, {p['min_blocks']}, {p['group_m']}"
                           f"{_batched_suffix(p)}>"),
    geometry=lambda M, N, K, p: Launch(grid=(ceil_div(M, p["BM"]) * ceil_div(N, p["BN"]), 1, 1),
                                       block=(_warp_threads(p), 1, 1)),
    rules=_warp_rules,
    vector_width=4,
    showcase=({}, {"BM": 64, "BN": 128}, TUNED_WARP_TILING),
    experiments=({"group_m": 1}, {**TUNED_WARP_TILING, "group_m": 1}),
    record_shapes=((4096, 4096, 1024), (8192, 1024, 4096), (1024, 8192, 4096)),
    sweep=lambda p: (128 <= _warp_threads(p) <= 512 and (p["min_blocks"] == 1 or _warp_threads(p) <= 256)
                     and p["group_m"] == 8),
    batched=True,
)


# --- Level 9: Tensor Cores through WMMA ------------------------------------------------------------

def _input_type(p: Mapping[str, Any]) -> str:
    """The C++ element type of the inputs; the launcher sets "bf16" from the arrays' type."""
    return "__nv_bfloat16" if p.get("bf16") else "__half"


def _wmma_threads(p: Mapping[str, Any]) -> int:
    tile = 16 if p["staging"] == "none" else 32  # a warp's tile of C: one fragment, or 2×2
    return (p["BM"] // tile) * (p["BN"] // tile) * 32


def _wmma_shape_rules(M: int, N: int, K: int, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if p["staging"] == "none" and (M % 16 or N % 16 or K % 16):
        return [(f"staging='none' loads whole 16×16 fragments from global memory, so M, N, K must be "
                 f"multiples of 16 (got {M}×{N}×{K}); use staging='shared', which handles any shape",
                 f"staging='none' 直接从全局内存载入完整的 16×16 片段，要求 M、N、K 都是 16 的倍数"
                 f"（当前为 {M}×{N}×{K}）；请改用可处理任意形状的 staging='shared'")]
    return []


WMMA = Level(
    id="09_wmma",
    number=9,
    title_en="Tensor Cores with WMMA",
    title_zh="用 WMMA 调用张量核心",
    source="09_wmma.cu",
    params=(
        Param("staging", "shared", ("none", "shared"),
              "fragments straight from global memory (one 16×16 tile per warp), or staged in shared "
              "memory (32×32 per warp, any shape)", "片段直接从全局内存载入（每个线程束一个 16×16 分块），"
              "或先放入共享内存（每个线程束 32×32，任意形状）"),
        Param("BM", 64, (32, 64, 128), "rows of C per thread block", "每个线程块负责的 C 的行数"),
        Param("BN", 64, (32, 64, 128), "columns of C per thread block", "每个线程块负责的 C 的列数"),
    ),
    kernel_name=lambda p: (f"wmma_direct<{_input_type(p)}, {p['BM'] // 16}, {p['BN'] // 16}>" if p["staging"] == "none"
                           else f"wmma_shared<{_input_type(p)}, {p['BM']}, {p['BN']}, "
                                f"{str(p.get('aligned', True)).lower()}>"),
    geometry=lambda M, N, K, p: Launch(grid=(ceil_div(N, p["BN"]), ceil_div(M, p["BM"]), 1),
                                       block=(_wmma_threads(p), 1, 1)),
    dtypes=("float16", "bfloat16"),
    out_dtype="float32",
    vector_width=8,
    min_cc=70,
    uses_tensor_cores=True,
    cuda_headers=True,
    shape_rules=_wmma_shape_rules,
    showcase=({"staging": "none"}, {}, {"BM": 128, "BN": 128}),
    sweep=lambda p: True,
)


# --- Level 10: mma.sync, ldmatrix and a multi-stage cp.async pipeline -------------------------------

def _mma_shape_rules(M: int, N: int, K: int, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if K % 8 or N % 8:
        return [(f"this kernel copies 16-byte chunks (8 halves), so K and N must be multiples of 8 (got "
                 f"K={K}, N={N}); pad the matrices with zeros, or use 09_wmma with staging='shared'",
                 f"该内核按 16 字节（8 个半精度数）拷贝，要求 K 和 N 都是 8 的倍数（当前 K={K}，N={N}）；"
                 "请用 0 填充矩阵，或改用 staging='shared' 的 09_wmma")]
    return []


def _mma_rules(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if p["copy"] == "tma" and p["BN"] != 256:
        return [("copy='tma' is written for the 128×256 block tile (64×64 warp tiles); set BN=256",
                 "copy='tma' 是为 128×256 的线程块分块（64×64 的线程束分块）编写的；请设置 BN=256")]
    return []


def _mma_kernel_args(A: Any, B: Any, C: Any, M: int, N: int, K: int, p: Mapping[str, Any]) -> tuple:
    """Raw pointers for the cp.async kernel; TMA tensor maps of A and B for copy='tma'."""
    import numpy as np

    if p["copy"] == "tma":
        from .hopper import tma_args

        return tma_args(A, B, C, M, N, K, 128)
    return (A, B, C, np.int32(M), np.int32(N), np.int32(K))


def _mma_geometry(M: int, N: int, K: int, p: Mapping[str, Any]) -> Launch:
    grid = (ceil_div(M, 128) * ceil_div(N, p["BN"]), 1, 1)
    if p["copy"] == "tma":  # stages of 64-deep k-tiles (16 KB of A, 32 KB of B), aligned to the swizzle's 1 KB
        return Launch(grid=grid, block=(256, 1, 1), dynamic_shared_bytes=p["stages"] * 48 * 1024 + 1024)
    return Launch(grid=grid, block=(256, 1, 1), dynamic_shared_bytes=p["stages"] * (8 + p["BN"] // 16) * 1024)


MMA_PIPELINE = Level(
    id="10_mma_pipeline",
    number=10,
    title_en="mma.sync, ldmatrix and a cp.async pipeline",
    title_zh="mma.sync、ldmatrix 与 cp.async 多级流水线",
    source="10_mma_pipeline.cu",
    params=(Param("stages", 3, (2, 3, 4), "shared-memory buffers in the cp.async pipeline (k-tiles in "
                  "flight + 1)", "cp.async 流水线中的共享内存缓冲区数（在途的 k 分块数 + 1）"),
            Param("BN", 128, (128, 256), "columns of C per thread block (each warp owns 64×BN/4)",
                  "每个线程块负责的 C 的列数（每个线程束负责 64×BN/4）"),
            Param("copy", "cp_async", ("cp_async", "tma"), "who copies the k-tiles: the warps themselves "
                  "(cp.async, sm_80+), or the TMA engine through mbarriers (sm_90, BN=256 only)",
                  "由谁拷贝 k 分块：线程束自己（cp.async，sm_80+），或经 mbarrier 由 TMA 引擎拷贝（sm_90，仅 BN=256）")),
    kernel_name=lambda p: (f"gemm_mma_tma<{str(p.get('bf16', False)).lower()}, {p['stages']}>" if p["copy"] == "tma"
                           else f"gemm_mma_pipeline<{p['stages']}, {str(p.get('bf16', False)).lower()}, {p['BN']}>"),
    geometry=_mma_geometry,
    rules=_mma_rules,
    setting_min_cc=lambda p: 90 if p["copy"] == "tma" else 0,
    kernel_args=_mma_kernel_args,
    dtypes=("float16", "bfloat16"),
    out_dtype="float32",
    min_cc=80,
    uses_tensor_cores=True,
    alignment=16,
    shape_rules=_mma_shape_rules,
    showcase=({"stages": 2}, {"stages": 3}, {"stages": 4}, {"stages": 4, "BN": 256},
              {"stages": 3, "BN": 256, "copy": "tma"}),
)


# --- Level 11: Hopper — wgmma, TMA, mbarriers, warp specialization ------------------------------------

# Per step: block tile (BM, BN), threads, and the kernel (see the diagram in 11_hopper_wgmma.cu).
HOPPER_STEPS = {1: (64, 128, 128), 2: (128, 128, 256), 3: (128, 256, 384), 4: (128, 256, 384)}


def _hopper_kernel_name(p: Mapping[str, Any]) -> str:
    bf16 = str(p.get("bf16", True)).lower()
    return {1: f"hopper_wgmma_plain<{bf16}>",
            2: f"hopper_wgmma_tma<{bf16}, {p['stages']}>",
            3: f"hopper_wgmma_specialized<{bf16}, {p['stages']}, false>",
            4: f"hopper_wgmma_specialized<{bf16}, {p['stages']}, true>"}[p["step"]]


def _sm_count() -> int:
    from . import device

    return int(device.properties()["multiProcessorCount"]) if device.gpu_available() else 132


def _hopper_geometry(M: int, N: int, K: int, p: Mapping[str, Any]) -> Launch:
    bm, bn, threads = HOPPER_STEPS[p["step"]]
    if p["step"] == 1:
        return Launch(grid=(ceil_div(N, bn), ceil_div(M, bm), 1), block=(threads, 1, 1))
    tiles = ceil_div(M, bm) * ceil_div(N, bn)
    blocks = min(tiles, _sm_count()) if p["step"] == 4 else tiles  # step 4: one persistent block per SM
    stage_bytes = (bm + bn) * 64 * 2
    return Launch(grid=(blocks, 1, 1), block=(threads, 1, 1),
                  dynamic_shared_bytes=p["stages"] * stage_bytes + 1024)  # +1024: align to the swizzle period


def _hopper_rules(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if p["step"] == 1 and p["stages"] != 4:
        return [("step 1 has no pipeline (every k-tile is loaded, then used): leave stages at 4",
                 "第 1 步没有流水线（每个 k 分块先载入再计算）：stages 请保持为 4")]
    return []


def _hopper_shape_rules(M: int, N: int, K: int, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if K % 8 or N % 8:
        return [(f"TMA and 16-byte loads need rows that are whole 16-byte chunks, so K and N must be "
                 f"multiples of 8 (got K={K}, N={N}); pad the matrices with zeros",
                 f"TMA 与 16 字节载入要求每行由完整的 16 字节块组成，K 和 N 须为 8 的倍数（当前 K={K}，"
                 f"N={N}）；请用 0 填充矩阵")]
    return []


def _hopper_args(*args: Any) -> tuple:
    from .hopper import kernel_args

    return kernel_args(*args)


HOPPER = Level(
    id="11_hopper_wgmma",
    number=11,
    title_en="Hopper: wgmma, TMA and warp specialization",
    title_zh="Hopper：wgmma、TMA 与线程束专用化",
    source="11_hopper_wgmma.cu",
    params=(
        Param("step", 4, (1, 2, 3, 4),
              "1: wgmma on tiles all threads copy in; 2: + TMA into a ring of mbarrier stages; 3: + a "
              "producer warpgroup and two consumer warpgroups, 128×256 tiles; 4: + persistent blocks, "
              "overlapped k-tiles and stores",
              "1：所有线程拷入分块后执行 wgmma；2：再加上 TMA 与 mbarrier 多级环形缓冲；3：再加上一个生产者"
              "线程束组和两个消费者线程束组，128×256 分块；4：再加上常驻线程块，k 分块之间与写回互相重叠"),
        Param("stages", 4, (2, 3, 4), "shared-memory buffers in the TMA ring (steps 2–4)",
              "TMA 环形缓冲中的共享内存缓冲区数（第 2–4 步）"),
    ),
    kernel_name=_hopper_kernel_name,
    geometry=_hopper_geometry,
    rules=_hopper_rules,
    dtypes=("bfloat16", "float16"),
    out_dtype="float32",
    min_cc=90,
    arch_specific=True,
    uses_tensor_cores=True,
    alignment=16,
    shape_rules=_hopper_shape_rules,
    kernel_args=_hopper_args,
    showcase=({"step": 1}, {"step": 2}, {"step": 3}, {"step": 4}, {"step": 4, "stages": 3}),
)

_LEVELS: tuple[Level, ...] = (NAIVE, SMEM_TILING, COALESCING_BANKS, DOUBLE_BUFFERING, REGISTER_BLOCKING,
                              FUSED_EPILOGUE, VECTORIZED, WARP_TILING, WMMA, MMA_PIPELINE, HOPPER)


def levels() -> tuple[Level, ...]:
    """The ordered registry of levels."""
    return _LEVELS


def get_level(level: str | int | Level) -> Level:
    """Look a level up by id ("01_naive"), number (1) or short name ("naive")."""
    if isinstance(level, Level):
        return level
    for lv in _LEVELS:
        if level in (lv.id, lv.number, lv.id.split("_", 1)[1]) or str(level) == str(lv.number) or \
                (isinstance(level, str) and level.isdigit() and int(level) == lv.number):
            return lv
    raise ValueError(f"unknown level {level!r}; known levels: {', '.join(lv.id for lv in _LEVELS)}")
