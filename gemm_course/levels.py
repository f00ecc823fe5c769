"""The registry of levels: one record per level, in teaching order.

A level knows everything the rest of the package needs to compile, launch, check and time it:
its CUDA C file, the C++ name of the kernel for a parameter setting, the launch geometry for a
problem size, its tunable parameters (compile-time template arguments) and what hardware it needs.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from gemm_course.bilingual.text import one_language_errors

KERNEL_DIR = Path(__file__).parent / "kernels"


@functools.lru_cache(maxsize=None)
def _kernel_file(name: str) -> str:
    return str(KERNEL_DIR / name)  # made once: a repeated call stats it


def kernel_version(name: str) -> int:
    """The modification time (ns) of a kernel file of KERNEL_DIR: an edited file is a new kernel, so the caches
    of repeated calls key on it."""
    return os.stat(_kernel_file(name)).st_mtime_ns

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


# The projection shapes of a published mixture-of-experts model's attention and dense layers (N×K of its
# weight matrices); at M = 64 or 128 rows (tokens) they are the shapes of decoding, where a 128-row tile
# of C is half empty or the grid has fewer tiles than the GPU has SMs. Level 11 (bf16) and Level 13 (FP8)
# are tuned at them.
PROJECTION_NK = ((2112, 7168), (24576, 1536), (7168, 16384))
DECODE_SHAPES = tuple((m, n, k) for (n, k) in PROJECTION_NK for m in (64, 128))


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
    # that `sweep` accepts at `sweep_size`³ and at the `sweep_shapes` (M, N, K) (the autotuner's search space).
    showcase: tuple[Mapping[str, Any], ...] = ({},)
    record_shapes: tuple[tuple[int, int, int], ...] = ()
    sweep: Optional[Callable[[Mapping[str, Any]], bool]] = None
    sweep_size: int = 4096
    sweep_shapes: tuple[tuple[int, int, int], ...] = ()
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
    # The parameter, if any, that lets a setting write C in the inputs' own type instead (value
    # "input": bf16 C for bf16 inputs, as cuBLAS writes it); see c_type().
    c_type_param: Optional[str] = None
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
    # The kernel's arguments when they are not (A, B, C, M, N, K): the name of a function of
    # gemm_course's Hopper host side (hopper.py), (A, B, C, M, N, K, params) → tuple, which the launch calls.
    kernel_args: Optional[str] = None
    # The kernel also computes a batch of independent products in one launch: 3-D A (batch × M × K),
    # B (batch × K × N) and C, one product per blockIdx.z (its geometry leaves grid z to the batch).
    batched: bool = False
    # Defaults of an architecture family where the level's own defaults (the recorded H200's) would not suit it,
    # e.g. spill registers there: ((architectures, {parameter: value}), ...). Compile reports for such an
    # architecture and runs on such a GPU start from them (defaults_for, resolve_for, resolve_here).
    arch_defaults: tuple[tuple[tuple[str, ...], Mapping[str, Any]], ...] = ()

    @property
    def path(self) -> Path:
        return KERNEL_DIR / self.source

    def c_type(self, params: Mapping[str, Any], input_type: str) -> str:
        """C's element type by name for a setting and input type ("bfloat16" is stored as uint16)."""
        if self.c_type_param and params.get(self.c_type_param) == "input":
            return input_type
        return self.out_dtype or input_type

    @property
    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def defaults_for(self, arch: Optional[str]) -> dict[str, Any]:
        """The defaults on an architecture ("sm_80", "sm_90a"; None: the level's own, the recorded H200's)."""
        out = self.defaults
        key = arch.rstrip("af") if arch else None
        for archs, overrides in self.arch_defaults:
            if key in archs:
                out |= dict(overrides)
        return out

    def resolve_for(self, arch: Optional[str], **params: Any) -> dict[str, Any]:
        """resolve() starting from the defaults of an architecture (defaults_for) instead of the level's own."""
        return self.resolve(**(self.defaults_for(arch) | params))

    def resolve_here(self, **params: Any) -> dict[str, Any]:
        """resolve() for a kernel built here: from the real GPU's defaults (whatever is pretended), else the
        level's own."""
        from . import device

        return self.resolve_for(device.real_arch() if device.gpu_available() else None, **params)

    @one_language_errors  # a setting refused in the language in force
    def resolve(self, **params: Any) -> dict[str, Any]:
        """Fill in defaults and validate a parameter setting; raise ValueError naming the fix."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ValueError(
                f"level {self.id} has no parameter {', '.join(unknown)}; "
                f"its parameters are: {', '.join(known) or '(none)'} / "
                f"{self.id} 没有参数 {', '.join(unknown)}；它的参数是：{', '.join(known) or '（无）'}"
            )
        resolved = self.defaults | params
        for name, value in resolved.items():
            choices = known[name].choices
            if not any(type(value) is type(c) and value == c for c in choices):  # 64.0 is not 64, True not 1
                raise ValueError(
                    f"level {self.id}: {name}={value!r} is not allowed; choose one of {list(choices)} / "
                    f"{self.id}：不允许 {name}={value!r}；可选值为 {list(choices)}"
                )
        problems = self.rules(resolved)
        threads = self.geometry(1, 1, 1, resolved).threads_per_block
        if threads > MAX_THREADS_PER_BLOCK:
            problems.append((
                f"{threads} threads per block exceeds the hardware limit of {MAX_THREADS_PER_BLOCK}",
                f"每个线程块 {threads} 个线程，超过了硬件上限 {MAX_THREADS_PER_BLOCK}",
            ))
        if problems:
            # "English / 中文" in two halves, as every one-line message: a cell shows one of them
            raise ValueError(f"level {self.id} with {resolved}: {'; '.join(en for en, _ in problems)} / "
                             f"{self.id}（{resolved}）：{'；'.join(zh for _, zh in problems)}")
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
              "线程从全局内存拷贝分块的方式：横向沿一行（合并访问）或纵向沿一列（跨步）"),
        Param("a_layout", "mk", tuple(A_LAYOUTS),
              "where element (m, k) of the A tile lives in shared memory: As[m][k] or transposed "
              "As[k][m], plain, padded by one column, or XOR-swizzled",
              "A 分块的元素 (m, k) 在共享内存中的位置：As[m][k] 或转置的 As[k][m]，"
              "不加处理、每行填充一列，或按异或（XOR）重排"),
        Param("b_layout", "kn", tuple(B_LAYOUTS),
              "the B tile in shared memory: Bs[k][n] plain, or padded by one column (with a_layout="
              "'mk_padded' the strided load stores without bank conflicts, which isolates coalescing)",
              "B 分块在共享内存中的存放：Bs[k][n] 不加处理，或每行填充一列（与 a_layout='mk_padded' 一起使用时，"
              "跨步加载的写入不再有存储体冲突，从而单独测出合并访问的影响）"),
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
              "下一个分块的传输方式：经由寄存器（任何 GPU）或使用 cp.async（sm_80 及以上）"),
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
    # BK = 8 spills 36 B per thread on Blackwell RTX (sm_120, sm_121); BK = 16, the other showcase setting, does not.
    arch_defaults=((("sm_120", "sm_121"), {"BK": 16}),),
    sweep=_tuning_sweep,
    batched=True,
)


# --- Level 8: warp tiling ----------------------------------------------------------------------------

def _warp_threads(p: Mapping[str, Any]) -> int:
    return (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32


def _warp_shared_bytes(p: Mapping[str, Any]) -> int:
    """The two buffered tiles of A (transposed, rows padded by 4) and B."""
    return 2 * 4 * p["BK"] * (p["BM"] + 4 + p["BN"])


def _warp_dynamic_shared(p: Mapping[str, Any]) -> bool:
    """Over the 48 KB static limit (BK = 32 with wide tiles) the tiles go to dynamic shared memory."""
    return _warp_shared_bytes(p) > STATIC_SHARED_LIMIT


def _warp_tiles_divide(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A block tile must be a whole number of warp tiles in both directions (Levels 8 and 9)."""
    return [(f"{tile}={p[tile]} is not a multiple of the warp tile {warp}={p[warp]}",
             f"{tile}={p[tile]} 不是线程束分块 {warp}={p[warp]} 的整数倍")
            for tile, warp in (("BM", "WM"), ("BN", "WN")) if p[tile] % p[warp]]


def _warp_rules(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    out += _warp_tiles_divide(p)
    if out:
        return out
    threads = _warp_threads(p)
    for name, elems in (("A", p["BM"] * p["BK"]), ("B", p["BK"] * p["BN"])):
        if elems % (4 * threads):
            out.append((f"the {name} tile ({elems} floats) does not split into whole float4s over {threads} threads; "
                        "change BK or the warp tiles", f"{name} 分块（{elems} 个 float）无法按 float4 均分给 "
                        f"{threads} 个线程；请调整 BK 或线程束分块"))
    shared = _warp_shared_bytes(p)
    if shared > 227 * 1024:
        out.append((f"two buffers need {shared} B of shared memory, over the 227 KB a block can have (sm_90)",
                    f"两块缓冲区需要 {shared} B 共享内存，超过一个线程块最多可用的 227 KB（sm_90）"))
    if p["unroll_k"] and p["unroll_k"] >= p["BK"]:
        out.append((f"unroll_k={p['unroll_k']} is not below BK={p['BK']}: that is the whole k-tile, unroll_k=0",
                    f"unroll_k={p['unroll_k']} 不小于 BK={p['BK']}：这就是整个 k 分块，请用 unroll_k=0"))
    accumulators = (4 * p["WM"] // 32) * (4 * p["WN"] // 16)
    if accumulators > 128:
        out.append((f"{accumulators} accumulators per thread (WM·WN/32) cannot stay in 255 registers",
                    f"每线程 {accumulators} 个累加器（WM·WN/32），255 个寄存器放不下"))
    return out


def _warp_kernel_name(p: Mapping[str, Any]) -> str:
    name = (f"gemm_warp_tiled<{p['BM']}, {p['BN']}, {p['BK']}, {p['WM']}, {p['WN']}, "
            f"{str(p.get('aligned', True)).lower()}, {p['min_blocks']}, {p['group_m']}")
    # The last template arguments at their defaults: the name the recorded results were made with.
    dynamic = _warp_dynamic_shared(p)
    if p["frag_buffers"] == 1 and not p["stepped"] and not p["unroll_k"] and not dynamic:
        return name + f"{_batched_suffix(p)}>"
    return name + (f", {str(bool(p.get('batched'))).lower()}, {p['frag_buffers']}, {str(p['stepped']).lower()}, "
                   f"{p['unroll_k'] or p['BK']}" + (", true>" if dynamic else ">"))


def _warp_sweep(p: Mapping[str, Any]) -> bool:
    """The settings the sweep times (44): 4 to 8 warps with 64×32, 64×64 or 128×32 warp tiles, BK 8 or 16,
    wide or square block tiles; min_blocks 2, and also 1 for 8 warps (only 1 where 8 warps of 64×64 need
    255 registers). Each as the plain kernel and with fragment double buffering plus stepped pointers,
    and at BK = 16 also with that loop unrolled 8 steps at a time (unroll_k = 8)."""
    threads, accumulators = _warp_threads(p), p["WM"] * p["WN"] // 32
    blocks = (1,) if threads == 256 and accumulators == 128 else (1, 2) if threads == 256 else (2,)
    pipelines = ((1, False, 0), (2, True, 0)) + (((2, True, 8),) if p["BK"] == 16 else ())
    return (p["group_m"] == 8 and 128 <= threads <= 256 and p["BK"] in (8, 16) and p["BN"] >= 128
            and (p["WM"], p["WN"]) in ((64, 32), (64, 64), (128, 32)) and p["min_blocks"] in blocks
            and (p["frag_buffers"], p["stepped"], p["unroll_k"]) in pipelines)


# 64×256 block tiles of 4 warps with 64×64 warp tiles (253 registers, 2 blocks and 8 warps per SM): the best
# setting of the sweep when it was chosen, second in today's recorded 4096³ sweep (after 128×256 with one block
# per SM, within 1.5%); recorded at every size beside the default, and the base of the last three showcase settings.
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
        Param("frag_buffers", 1, (1, 2), "sets of fragment registers: 2 loads the A and B values of step k+1 "
              "from shared memory while the FMAs of step k run (and the next k-tile's first ones across "
              "the barrier)", "片段寄存器的份数：2 表示在第 k 步的 FMA 执行时，从共享内存读取第 k+1 步的 A、B "
              "值（跨过屏障时读取下一个 k 分块的第一步）"),
        Param("stepped", False, (False, True), "global loads start from one address per operand (kept as an integer, "
              "made a pointer only after its bounds check) that moves by a k-tile per step, instead of recomputing each "
              "load's 64-bit address and bounds (vector path)",
              "全局加载从每个操作数的一个地址出发（以整数保存，通过边界检查后才变成指针），该地址每步前移一个 k 分块，"
              "而不是为每次加载重新计算 64 位地址与边界（向量路径）"),
        Param("unroll_k", 0, (0, 8), "k steps per copy of the unrolled loop body: 0 unrolls the whole k-tile (BK "
              "steps of straight code); 8 runs it as BK/8 passes over 8 steps, less code for the instruction cache",
              "展开后循环体每份包含的 k 步数：0 表示把整个 k 分块（BK 步）展开成直线代码；8 表示分 BK/8 趟执行同一份 "
              "8 步代码，指令缓存中的代码更少"),
    ),
    kernel_name=_warp_kernel_name,
    geometry=lambda M, N, K, p: Launch(grid=(ceil_div(M, p["BM"]) * ceil_div(N, p["BN"]), 1, 1),
                                       block=(_warp_threads(p), 1, 1),
                                       dynamic_shared_bytes=_warp_shared_bytes(p) if _warp_dynamic_shared(p) else 0),
    # Dynamic shared memory over 48 KB: up to 163 KB per block from sm_80 (A100), 227 KB on sm_90.
    setting_min_cc=lambda p: (0 if not _warp_dynamic_shared(p) else 80 if _warp_shared_bytes(p) <= 163 * 1024
                              else 90),
    rules=_warp_rules,
    vector_width=4,
    showcase=({}, {"BM": 64, "BN": 128}, TUNED_WARP_TILING, {**TUNED_WARP_TILING, "stepped": True},
              {**TUNED_WARP_TILING, "stepped": True, "BK": 32}, {**TUNED_WARP_TILING, "frag_buffers": 2}),
    experiments=({"group_m": 1}, {**TUNED_WARP_TILING, "group_m": 1}),
    record_shapes=((4096, 4096, 1024), (8192, 1024, 4096), (1024, 8192, 4096)),
    sweep=_warp_sweep,
    batched=True,
    # The recorded default trades a small spill for two blocks per SM on sm_90 (measured faster there). Elsewhere
    # that spill is not measured to pay: 32 to 76 B per thread from sm_75 to sm_121 (NVRTC 12.9). The 64×128
    # showcase setting spills on none of them and keeps 3 blocks (12 warps) per SM where registers allow.
    arch_defaults=((("sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_100", "sm_103", "sm_120", "sm_121"),
                    {"BM": 64}),),
)


# --- Level 9: Tensor Cores through WMMA ------------------------------------------------------------

def _input_type(p: Mapping[str, Any]) -> str:
    """The C++ element type of the inputs; the launcher sets "bf16" from the arrays' type."""
    return "__nv_bfloat16" if p.get("bf16") else "__half"


# staging='pipelined' only: its default k-tile depth, and its parameters' values under the other stagings.
WMMA_PIPELINE_BK = 32
WMMA_PIPELINE_ONLY = {"stages": 3, "WM": 64, "WN": 32, "BK": WMMA_PIPELINE_BK, "frag_buffers": 1}


def _wmma_threads(p: Mapping[str, Any]) -> int:
    if p["staging"] == "pipelined":  # a warp's tile of C: WM×WN
        return (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
    tile = 16 if p["staging"] == "none" else 32  # a warp's tile of C: one fragment, or 2×2
    return (p["BM"] // tile) * (p["BN"] // tile) * 32


def _wmma_pipeline_bytes(p: Mapping[str, Any]) -> int:
    """Dynamic shared memory of staging='pipelined': STAGES × (BM×(BK+8) A + BK×(BN+8) B) halves."""
    bk = p.get("BK", WMMA_PIPELINE_BK)
    return p["stages"] * (p["BM"] * (bk + 8) + bk * (p["BN"] + 8)) * 2


def _wmma_geometry(M: int, N: int, K: int, p: Mapping[str, Any]) -> Launch:
    threads = _wmma_threads(p)
    if p["staging"] == "pipelined":  # one block per tile in a 1-D grid: the kernel orders the tiles
        return Launch(grid=(ceil_div(M, p["BM"]) * ceil_div(N, p["BN"]), 1, 1), block=(threads, 1, 1),
                      dynamic_shared_bytes=_wmma_pipeline_bytes(p))
    return Launch(grid=(ceil_div(N, p["BN"]), ceil_div(M, p["BM"]), 1), block=(threads, 1, 1))


def _wmma_kernel_name(p: Mapping[str, Any]) -> str:
    t, aligned = _input_type(p), str(p.get("aligned", True)).lower()
    if p["staging"] == "none":
        return f"wmma_direct<{t}, {p['BM'] // 16}, {p['BN'] // 16}>"
    if p["staging"] == "shared":
        return f"wmma_shared<{t}, {p['BM']}, {p['BN']}, {aligned}>"
    name = f"wmma_pipelined<{t}, {p['BM']}, {p['BN']}, {p['WM']}, {p['WN']}, {p['stages']}, {aligned}"
    if p.get("BK", WMMA_PIPELINE_BK) == WMMA_PIPELINE_BK and p.get("frag_buffers", 1) == 1:
        return name + ">"  # the defaults: the same instantiation as before these two parameters
    return name + f", {p['BK']}, {p['frag_buffers']}>"


def _wmma_rules(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    if p["staging"] != "pipelined":
        changed = [f"{k}={p[k]}" for k, v in WMMA_PIPELINE_ONLY.items() if p[k] != v]
        if changed:
            defaults = ", ".join(f"{k}={v}" for k, v in WMMA_PIPELINE_ONLY.items())
            out.append((f"{', '.join(changed)} only shape staging='pipelined'; leave {defaults} for "
                        f"staging='{p['staging']}'",
                        f"{', '.join(changed)} 只对 staging='pipelined' 起作用；staging='{p['staging']}' 时请保持 "
                        f"{defaults}"))
        for tile in ("BM", "BN"):
            if p[tile] > 128:
                out.append((f"{tile}={p[tile]} is for staging='pipelined'; staging='{p['staging']}' takes 32 to 128",
                            f"{tile}={p[tile]} 仅用于 staging='pipelined'；staging='{p['staging']}' 只接受 32 到 128"))
        return out
    out += _warp_tiles_divide(p)
    if out:
        return out
    # Each thread holds WM·WN/32 fp32 accumulators and needs about 40 more registers (fragments,
    # addresses); an SM has 65536, shared by the block's threads (at most 255 each).
    threads, accumulators = _wmma_threads(p), p["WM"] * p["WN"] // 32
    if accumulators + 40 > min(255, 65536 // threads):
        out.append((f"{threads} threads with {accumulators} accumulators each (WM·WN/32) do not fit in the "
                    f"{min(255, 65536 // threads)} registers per thread an SM can give them; use fewer warps "
                    "(larger warp tiles or a smaller block tile)",
                    f"{threads} 个线程、每线程 {accumulators} 个累加器（WM·WN/32），超出 SM 能分给每个线程的 "
                    f"{min(255, 65536 // threads)} 个寄存器；请减少线程束（加大线程束分块或缩小线程块分块）"))
    return out


def _wmma_shape_rules(M: int, N: int, K: int, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if p["staging"] == "none" and (M % 16 or N % 16 or K % 16):
        return [(f"staging='none' loads whole 16×16 fragments from global memory, so M, N, K must be "
                 f"multiples of 16 (got {M}×{N}×{K}); use staging='shared', which handles any shape",
                 f"staging='none' 直接从全局内存加载完整的 16×16 片段，要求 M、N、K 都是 16 的倍数"
                 f"（当前为 {M}×{N}×{K}）；请改用可处理任意形状的 staging='shared'")]
    if p["staging"] == "pipelined" and (K % 8 or N % 8):
        return [(f"staging='pipelined' copies 16-byte chunks (8 halves) with cp.async, so K and N must be "
                 f"multiples of 8 (got K={K}, N={N}); pad the matrices with zeros, or use staging='shared', "
                 "which handles any shape",
                 f"staging='pipelined' 用 cp.async 按 16 字节（8 个半精度数）拷贝，要求 K 和 N 都是 8 的倍数"
                 f"（当前 K={K}，N={N}）；请用 0 填充矩阵，或改用可处理任意形状的 staging='shared'")]
    return []


def _wmma_sweep(p: Mapping[str, Any]) -> bool:
    """Every setting of the first two stagings; for 'pipelined', block tiles of 128 or 256 with 4 or 8 warps,
    and BK=64 or frag_buffers=2 only with 64×64 warp tiles (with 64×32 ones they spill at 128 registers)."""
    if p["staging"] != "pipelined":
        return True
    deeper = p["BK"] != WMMA_PIPELINE_BK or p["frag_buffers"] != 1
    return (min(p["BM"], p["BN"]) >= 128 and 128 <= _wmma_threads(p) <= 256
            and (not deeper or p["WM"] * p["WN"] == 64 * 64))


WMMA = Level(
    id="09_wmma",
    number=9,
    title_en="Tensor Cores with WMMA",
    title_zh="用 WMMA 调用张量核心",
    source="09_wmma.cu",
    params=(
        Param("staging", "shared", ("none", "shared", "pipelined"),
              "fragments straight from global memory (one 16×16 tile per warp), staged in shared "
              "memory (32×32 per warp, any shape), or 'pipelined': a ring of shared buffers filled by "
              "cp.async while the warps compute (WM×WN per warp, sm_80+, K and N multiples of 8)",
              "片段直接从全局内存加载（每个线程束一个 16×16 分块），先放入共享内存（每个线程束 32×32，"
              "任意形状），或 'pipelined'：线程束计算的同时由 cp.async 填充共享内存环形缓冲"
              "（每个线程束 WM×WN，sm_80+，K 和 N 须为 8 的倍数）"),
        Param("BM", 64, (32, 64, 128, 256), "rows of C per thread block (256: staging='pipelined' only)",
              "每个线程块负责的 C 的行数（256 仅用于 staging='pipelined'）"),
        Param("BN", 64, (32, 64, 128, 256), "columns of C per thread block (256: staging='pipelined' only)",
              "每个线程块负责的 C 的列数（256 仅用于 staging='pipelined'）"),
        Param("stages", WMMA_PIPELINE_ONLY["stages"], (2, 3, 4),
              "shared-memory buffers in the cp.async ring (k-tiles in flight + 1); staging='pipelined' only",
              "cp.async 环形缓冲中的共享内存缓冲区数（在途的 k 分块数 + 1）；仅用于 staging='pipelined'"),
        Param("WM", WMMA_PIPELINE_ONLY["WM"], (32, 64),
              "rows of C per warp (WM/16 fragments down); staging='pipelined' only",
              "每个线程束负责的 C 的行数（纵向 WM/16 个片段）；仅用于 staging='pipelined'"),
        Param("WN", WMMA_PIPELINE_ONLY["WN"], (32, 64),
              "columns of C per warp (WN/16 fragments across); staging='pipelined' only",
              "每个线程束负责的 C 的列数（横向 WN/16 个片段）；仅用于 staging='pipelined'"),
        Param("BK", WMMA_PIPELINE_ONLY["BK"], (32, 64),
              "depth of one k-tile (2 or 4 WMMA steps of 16): 64 halves the barriers and cp.async waits "
              "per multiply-add, at twice the shared memory per stage; staging='pipelined' only",
              "每个 k 分块的深度（2 或 4 个 16 深的 WMMA 步）：64 让每次乘加分摊到的栅栏和 cp.async 等待减半，"
              "代价是每级缓冲的共享内存翻倍；仅用于 staging='pipelined'"),
        Param("frag_buffers", WMMA_PIPELINE_ONLY["frag_buffers"], (1, 2),
              "sets of fragment registers: 2 loads the fragments of the next 16-deep step (across the "
              "k-tile barrier too) before the mma_sync of the current one; staging='pipelined' only",
              "片段寄存器的份数：2 表示在当前一步的 mma_sync 之前先加载下一个 16 深步的片段（跨过 k 分块的"
              "栅栏也如此）；仅用于 staging='pipelined'"),
    ),
    kernel_name=_wmma_kernel_name,
    geometry=_wmma_geometry,
    rules=_wmma_rules,
    setting_min_cc=lambda p: 80 if p["staging"] == "pipelined" else 0,  # cp.async arrived with sm_80
    dtypes=("float16", "bfloat16"),
    out_dtype="float32",
    vector_width=8,
    min_cc=70,
    uses_tensor_cores=True,
    cuda_headers=True,
    shape_rules=_wmma_shape_rules,
    showcase=({"staging": "none"}, {}, {"BM": 128, "BN": 128},
              {"staging": "pipelined", "BM": 128, "BN": 128, "stages": 4},
              {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3},
              {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3, "BK": 64},
              {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3, "BK": 64, "frag_buffers": 2}),
    sweep=_wmma_sweep,
)


# --- Level 10: mma.sync, ldmatrix and a multi-stage cp.async pipeline -------------------------------

def _mma_shape_rules(M: int, N: int, K: int, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if K % 8 or N % 8:
        return [(f"this kernel copies 16-byte chunks (8 halves), so K and N must be multiples of 8 (got "
                 f"K={K}, N={N}); pad the matrices with zeros, or use 09_wmma with staging='shared'",
                 f"该内核按 16 字节（8 个半精度数）拷贝，要求 K 和 N 都是 8 的倍数（当前 K={K}，N={N}）；"
                 "请用 0 填充矩阵，或改用 staging='shared' 的 09_wmma")]
    return []


def _mma_overlapped(p: Mapping[str, Any]) -> bool:
    """Whether a setting runs the overlapped kernel (gemm_mma_overlapped, gemm_mma_tma_overlapped:
    64×64 warp tiles, BN/32 warps) rather than the first kernel of the file (gemm_mma_pipeline) or
    the plain TMA kernel (gemm_mma_tma)."""
    if p["copy"] == "tma":
        return p["frag_buffers"] == 2
    return p["copy"] == "cp_async_mbarrier" or p["frag_buffers"] == 2 or p["copy_issue"] == "spread"


def _mma_shared_bytes(p: Mapping[str, Any]) -> int:
    """Dynamic shared memory: the stages of A (128 × BK) and B (BK × BN) tiles, in 2-byte elements;
    the TMA and overlapped kernels align them to the swizzle's 1 KB period (+1024)."""
    bk = 64 if p["copy"] == "tma" else p["BK"]  # TMA: 64-deep k-tiles (BN = 256: 16 KB of A, 32 KB of B)
    stage = (128 + p["BN"]) * bk * 2
    return p["stages"] * stage + (1024 if p["copy"] == "tma" or _mma_overlapped(p) else 0)


def _mma_rules(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    problems = []
    if p["copy"] == "tma" and p["frag_buffers"] == 1 and p["BN"] != 256:
        problems.append(("copy='tma' is written for the 128×256 block tile (64×64 warp tiles); set BN=256 "
                         "(or frag_buffers=2: the overlapped kernel also takes BN=128, with 4 warps)",
                         "copy='tma' 是为 128×256 的线程块分块（64×64 的线程束分块）编写的；请设置 BN=256"
                         "（或 frag_buffers=2：重叠内核也接受 BN=128，用 4 个线程束）"))
    if p["copy"] == "tma" and p["BK"] != 32:
        problems.append(("copy='tma' always copies 64-deep k-tiles (128-byte rows, TMA's swizzle); BK sets the "
                         "cp.async settings' k-tile: leave it at its default",
                         "copy='tma' 总是拷贝深度为 64 的 k 分块（128 字节的行，TMA 的 swizzle）；BK 只用于 cp.async "
                         "设置的 k 分块：请保持默认值"))
    if p["copy"] == "tma" and p["copy_issue"] != "burst":
        problems.append(("with copy='tma' one thread asks for each whole k-tile: leave copy_issue at 'burst'",
                         "copy='tma' 时由一个线程一次请求整个 k 分块：copy_issue 请保持为 'burst'"))
    schedule = p["refill_lag"] != 1 or p["ldmatrix_issue"] != "burst" or p["mma_order"] != "rows"
    if schedule and not _mma_overlapped(p):
        problems.append(("refill_lag, ldmatrix_issue and mma_order change the overlapped kernel: set frag_buffers=2",
                         "refill_lag、ldmatrix_issue 和 mma_order 只作用于重叠内核：请设置 frag_buffers=2"))
    if p["ldmatrix_issue"] == "spread" and p["frag_buffers"] != 2:
        problems.append(("ldmatrix_issue='spread' loads the next k-step's fragments during this k-step's mma.sync, "
                         "into a second register set: set frag_buffers=2",
                         "ldmatrix_issue='spread' 在本 k 步的 mma.sync 期间把下一 k 步的片段加载到第二组寄存器："
                         "请设置 frag_buffers=2"))
    if p["refill_lag"] == 2 and p["copy"] == "cp_async":
        problems.append(("refill_lag=2 waits on the per-stage 'empty' mbarriers; copy='cp_async' has a block barrier "
                         "instead: use copy='cp_async_mbarrier' or 'tma'",
                         "refill_lag=2 等待每个流水级的 'empty' mbarrier；copy='cp_async' 用的是线程块屏障："
                         "请改用 copy='cp_async_mbarrier' 或 'tma'"))
    if p["refill_lag"] == 2 and p["stages"] < 3:
        problems.append(("refill_lag=2 keeps stages-2 k-tiles in flight: set stages=3 or 4",
                         "refill_lag=2 时在途的 k 分块数为 stages-2：请设置 stages=3 或 4"))
    if p["copy"] == "cp_async" and not _mma_overlapped(p) and p["BK"] == 64 and p["BN"] != 256:
        problems.append(("BK=64 in the first kernel is for the 128×256 tile: with BN=128 two blocks share an SM, "
                         "each thread gets 128 registers and the compiler spills; set BN=256, or frag_buffers=2",
                         "第一个内核中 BK=64 用于 128×256 分块：BN=128 时两个线程块共享一个 SM，每个线程只有 128 个"
                         "寄存器，编译器会溢出；请设置 BN=256，或 frag_buffers=2"))
    return problems


def _mma_schedule_args(p: Mapping[str, Any]) -> str:
    """The overlapped kernels' last template arguments (refill_lag, ldmatrix_issue, mma_order); empty
    at their defaults, so that the earlier settings keep their kernel names."""
    if p["refill_lag"] == 1 and p["ldmatrix_issue"] == "burst" and p["mma_order"] == "rows":
        return ""
    return (f", {p['refill_lag']}, {str(p['ldmatrix_issue'] == 'spread').lower()}, "
            f"{str(p['mma_order'] == 'serpentine').lower()}")


_MMA_SCHEDULE_DEFAULTS = {"copy_issue": "burst", "refill_lag": 1, "ldmatrix_issue": "burst", "mma_order": "rows"}


def _mma_sweep(p: Mapping[str, Any]) -> bool:
    """The autotuner's search space: the first kernel (gemm_mma_pipeline) at every stage count, tile and
    k-depth; the overlapped kernels (cp.async, cp.async with mbarriers, TMA) with their 128×256 tile and
    3 or 4 stages (BN = 128 gives them 4 warps, half the SM's schedulers idle), each with the schedule of its
    k-loop as written or with one of its four schedule options changed (copy_issue, refill_lag,
    ldmatrix_issue, mma_order), not their combinations: about a fifth of all valid settings."""
    changed = sum(p[k] != v for k, v in _MMA_SCHEDULE_DEFAULTS.items())
    return changed <= 1 and (not _mma_overlapped(p) or (p["BN"] == 256 and p["stages"] >= 3))


def _mma_kernel_name(p: Mapping[str, Any]) -> str:
    bf16 = str(p.get("bf16", False)).lower()
    if p["copy"] == "tma":
        return (f"gemm_mma_tma_overlapped<{bf16}, {p['stages']}, {p['BN']}{_mma_schedule_args(p)}>"
                if _mma_overlapped(p) else f"gemm_mma_tma<{bf16}, {p['stages']}>")
    if _mma_overlapped(p):
        return (f"gemm_mma_overlapped<{bf16}, {p['stages']}, {str(p['copy'] == 'cp_async_mbarrier').lower()}, "
                f"{p['BN']}, {p['BK']}, {p['frag_buffers']}, {str(p['copy_issue'] == 'spread').lower()}"
                f"{_mma_schedule_args(p)}>")
    bk = "" if p["BK"] == 32 else f", {p['BK']}"  # the template's default: the same name as before BK existed
    return f"gemm_mma_pipeline<{p['stages']}, {bf16}, {p['BN']}{bk}>"


def _mma_min_cc(p: Mapping[str, Any]) -> int:
    """TMA needs sm_90; so does shared memory beyond the A100's 163 KB per block (sm_90: 227 KB)."""
    return 90 if p["copy"] == "tma" or _mma_shared_bytes(p) > 163 * 1024 else 0




def _mma_geometry(M: int, N: int, K: int, p: Mapping[str, Any]) -> Launch:
    grid = (ceil_div(M, 128) * ceil_div(N, p["BN"]), 1, 1)
    threads = p["BN"] if _mma_overlapped(p) else 256  # the overlapped kernel: one warp per 64×64 of C
    return Launch(grid=grid, block=(threads, 1, 1), dynamic_shared_bytes=_mma_shared_bytes(p))


MMA_PIPELINE = Level(
    id="10_mma_pipeline",
    number=10,
    title_en="mma.sync, ldmatrix and a cp.async pipeline",
    title_zh="mma.sync、ldmatrix 与 cp.async 多级流水线",
    source="10_mma_pipeline.cu",
    params=(Param("stages", 3, (2, 3, 4), "shared-memory buffers in the cp.async pipeline (k-tiles in "
                  "flight + 1)", "cp.async 流水线中的共享内存缓冲区数（在途的 k 分块数 + 1）"),
            Param("BN", 128, (128, 256), "columns of C per thread block (8 warps of 64×BN/4; the overlapped "
                  "kernel: BN/32 warps of 64×64)", "每个线程块负责的 C 的列数（8 个线程束，每个负责 64×BN/4；"
                  "重叠内核：BN/32 个线程束，每个负责 64×64）"),
            Param("copy", "cp_async", ("cp_async", "cp_async_mbarrier", "tma"),
                  "who copies the k-tiles and how the warps learn they have landed: the warps themselves with "
                  "cp.async and a block barrier per k-tile (sm_80+); cp.async completing on per-stage mbarriers, "
                  "no block barrier (overlapped kernel); or the TMA engine through mbarriers (sm_90)",
                  "由谁拷贝 k 分块、线程束如何得知数据已到：线程束自己用 cp.async，每个 k 分块一次线程块屏障"
                  "（sm_80+）；cp.async 在每个流水级的 mbarrier 上完成，没有线程块屏障（重叠内核）；"
                  "或经 mbarrier 由 TMA 引擎拷贝（sm_90）"),
            Param("BK", 32, (32, 64), "k-tile depth of the cp.async settings (64: half the barriers per flop, "
                  "twice the shared memory); TMA's k-tiles are always 64 deep",
                  "cp.async 设置的 k 分块深度（64：每次浮点运算的屏障减半，共享内存加倍）；TMA 的 k 分块总是 64"),
            Param("frag_buffers", 1, (1, 2), "fragment register sets: 2 loads the next k-step's fragments with "
                  "ldmatrix before this k-step's mma.sync, across k-tiles too (overlapped kernel)",
                  "片段寄存器组数：2 表示在本 k 步的 mma.sync 之前就用 ldmatrix 加载下一 k 步的片段，"
                  "跨 k 分块也如此（重叠内核）"),
            Param("copy_issue", "burst", ("burst", "spread"), "a k-tile's cp.async all at once after the "
                  "barrier, or spread one per row of mma.sync over the k-steps (overlapped kernel)",
                  "一个 k 分块的 cp.async 在屏障后一次发出，或分散到各 k 步、每行 mma.sync 之后发一条"
                  "（重叠内核）"),
            Param("refill_lag", 1, (1, 2), "which stage a refill reuses (mbarrier feeds, overlapped kernel): 1, the "
                  "k-tile just finished (wait for the slowest warp to leave it); 2, the one before it, which every "
                  "warp has already left (one k-tile less in flight)",
                  "补充拷贝复用哪个流水级（mbarrier 供数，重叠内核）：1 表示刚算完的 k 分块（要等最慢的线程束离开）；"
                  "2 表示再前一个，所有线程束早已离开（在途的 k 分块少一个）"),
            Param("ldmatrix_issue", "burst", ("burst", "spread"), "the next k-step's ldmatrix all before this "
                  "k-step's mma.sync, or one A and one B ldmatrix after each row of 8 mma.sync (frag_buffers=2)",
                  "下一 k 步的 ldmatrix 全部在本 k 步的 mma.sync 之前发出，或每行 8 条 mma.sync 之后发一条 A、"
                  "一条 B 的 ldmatrix（frag_buffers=2）"),
            Param("mma_order", "rows", ("rows", "serpentine"), "order of a warp's 4×8 mma.sync per k-step: row by "
                  "row left to right, or odd rows right to left (a B fragment used twice in a row; overlapped kernel)",
                  "线程束每个 k 步 4×8 条 mma.sync 的顺序：逐行从左到右，或奇数行从右到左（相邻两条共用一个 B 片段；"
                  "重叠内核）")),
    kernel_name=_mma_kernel_name,
    geometry=_mma_geometry,
    rules=_mma_rules,
    setting_min_cc=_mma_min_cc,
    kernel_args="mma_pipeline_args",
    dtypes=("float16", "bfloat16"),
    out_dtype="float32",
    min_cc=80,
    uses_tensor_cores=True,
    alignment=16,
    shape_rules=_mma_shape_rules,
    sweep=_mma_sweep,
    showcase=({"stages": 2}, {"stages": 3}, {"stages": 4}, {"stages": 4, "BN": 256},
              {"stages": 3, "BN": 256, "copy": "tma"},
              # the overlapped kernel, one change at a time (BK alone first, in the first kernel)
              {"stages": 4, "BN": 256, "BK": 64},
              {"stages": 4, "BN": 256, "BK": 64, "frag_buffers": 2},
              {"stages": 4, "BN": 256, "BK": 64, "frag_buffers": 2, "copy_issue": "spread"},
              {"stages": 4, "BN": 256, "BK": 64, "frag_buffers": 2, "copy_issue": "spread", "copy": "cp_async_mbarrier"},
              {"stages": 4, "BN": 256, "copy": "tma", "frag_buffers": 2},
              {"stages": 4, "BN": 256, "copy": "tma", "frag_buffers": 2, "ldmatrix_issue": "spread"}),
)


# --- Level 11: Hopper — wgmma, TMA, mbarriers, warp specialization ------------------------------------

# Per step: block tile (BM, BN), threads, and the kernel (see the diagram in 11_hopper_wgmma.cu).
HOPPER_STEPS = {1: (64, 128, 128), 2: (128, 128, 256), 3: (128, 256, 384), 4: (128, 256, 384),
                5: (128, 256, 384), 6: (128, 256, 384), 7: (128, 256, 384)}
HOPPER_CLUSTER = 2  # steps 5–7: blocks per cluster (two tiles, one above the other, share B)
HOPPER_C_PIECES_BYTES = 4 * 64 * 128  # steps 6, 7: two 64-row × 128-byte pieces of C per consumer


def hopper_pairs(M: int, N: int) -> int:
    """Steps 5–7: how many pairs of tiles (256×256 pieces of C, one cluster's work) C holds."""
    bm, bn, _ = HOPPER_STEPS[5]
    return ceil_div(M, HOPPER_CLUSTER * bm) * ceil_div(N, bn)


def _hopper_kernel_name(p: Mapping[str, Any]) -> str:
    bf16 = str(p.get("bf16", True)).lower()
    out = "unsigned short" if p["c_type"] == "input" else "float"
    return {1: f"hopper_wgmma_plain<{bf16}, {out}>",
            2: f"hopper_wgmma_tma<{bf16}, {p['stages']}, {out}>",
            3: f"hopper_wgmma_specialized<{bf16}, {p['stages']}, false, {out}>",
            4: f"hopper_wgmma_specialized<{bf16}, {p['stages']}, true, {out}>",
            5: f"hopper_wgmma_clustered<{bf16}, {p['stages']}, {out}, false{_release_cluster(p)}>",
            6: f"hopper_wgmma_clustered<{bf16}, {p['stages']}, {out}, true{_release_cluster(p)}>",
            7: f"hopper_wgmma_streamk<{bf16}, {p['stages']}, {out}>"}[p["step"]]


def _release_cluster(p: Mapping[str, Any]) -> str:
    """The experiment arrive_scope="cluster" as the kernel's last template argument (else the default)."""
    return ", true" if p.get("arrive_scope") == "cluster" else ""


def _sm_count() -> int:
    from . import device

    return int(device.properties()["multiProcessorCount"]) if device.gpu_available() else 132


def _hopper_geometry(M: int, N: int, K: int, p: Mapping[str, Any]) -> Launch:
    bm, bn, threads = HOPPER_STEPS[p["step"]]
    if p["step"] == 1:
        return Launch(grid=(ceil_div(N, bn), ceil_div(M, bm), 1), block=(threads, 1, 1))
    tiles = ceil_div(M, bm) * ceil_div(N, bn)
    stage_bytes = (bm + bn) * 64 * 2
    shared = p["stages"] * stage_bytes + 1024  # +1024: align to the swizzle period
    if p["step"] >= 6:
        shared += HOPPER_C_PIECES_BYTES
    blocks = min(tiles, _sm_count()) if p["step"] == 4 else tiles  # step 4: one persistent block per SM
    if p["step"] >= 5:  # one persistent cluster per resident pair of SMs, each walking pairs of tiles
        pairs = hopper_pairs(M, N)
        if p["step"] == 7:  # stream-K deals out k-tiles: every resident cluster, even for fewer pairs
            blocks = HOPPER_CLUSTER * _resident_clusters(p, threads, shared)
        else:
            blocks = HOPPER_CLUSTER * (pairs if pairs <= 1 else min(pairs, _resident_clusters(p, threads, shared)))
    return Launch(grid=(blocks, 1, 1), block=(threads, 1, 1), dynamic_shared_bytes=shared)


# Asking the driver how many clusters fit needs the compiled kernel, and the compile path sits above this
# registry, so the launch (launch.py, which `import gemm_course` loads) installs the question here:
# query(level, params, threads, shared bytes, cluster size) -> clusters.
resident_clusters_query: Optional[Callable[["Level", Mapping[str, Any], int, int, int], int]] = None


def install_resident_clusters_query(query: Callable[["Level", Mapping[str, Any], int, int, int], int]) -> None:
    """Let the registry's geometry ask the driver how many clusters fit (the launch installs it)."""
    global resident_clusters_query
    resident_clusters_query = query


def _resident_clusters(p: Mapping[str, Any], threads: int, shared: int) -> int:
    """How many clusters of step 5 fit on the GPU at once (the driver's answer: a GPC's SM count may
    be odd, so it can be fewer than SMs / 2); without a GPU, SMs / 2 for reports."""
    from . import device

    if not device.gpu_available() or resident_clusters_query is None:
        return _sm_count() // HOPPER_CLUSTER
    return resident_clusters_query(HOPPER, p, threads, shared, HOPPER_CLUSTER)


def _hopper_rules(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if p["step"] == 1 and p["stages"] != 4:
        return [("step 1 has no pipeline (every k-tile is loaded, then used): leave stages at 4",
                 "第 1 步没有流水线（每个 k 分块先加载再计算）：stages 请保持为 4")]
    if p["step"] not in (5, 6) and p["arrive_scope"] != "cta":
        return [("arrive_scope concerns the arrivals between the two blocks of a cluster: steps 5 and 6 only",
                 "arrive_scope 针对簇内两个线程块之间的到达：只用于第 5、6 步")]
    return []


def _hopper_shape_rules(M: int, N: int, K: int, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if K % 8 or N % 8:
        return [(f"TMA and 16-byte loads need rows that are whole 16-byte chunks, so K and N must be "
                 f"multiples of 8 (got K={K}, N={N}); pad the matrices with zeros",
                 f"TMA 与 16 字节加载要求每行由完整的 16 字节块组成，K 和 N 须为 8 的倍数（当前 K={K}，"
                 f"N={N}）；请用 0 填充矩阵")]
    return []




HOPPER = Level(
    id="11_hopper_wgmma",
    number=11,
    title_en="Hopper: wgmma, TMA and warp specialization",
    title_zh="Hopper：wgmma、TMA 与 warp 特化",
    source="11_hopper_wgmma.cu",
    params=(
        Param("step", 4, (1, 2, 3, 4, 5, 6, 7),
              "1: wgmma on tiles all threads copy in; 2: + TMA into a ring of mbarrier stages; 3: + a "
              "producer warpgroup and two consumer warpgroups, 128×256 tiles; 4: + persistent blocks, "
              "overlapped k-tiles and stores; 5: + clusters of two blocks that share each k-tile of B "
              "through TMA multicast; 6: + C leaves through shared memory and TMA stores, under the next "
              "tile's math; 7: + stream-K, the last rounds' k-tiles dealt out evenly to the clusters, a pair "
              "that two clusters share summed through a workspace",
              "1：所有线程拷入分块后执行 wgmma；2：再加上 TMA 与 mbarrier 多级环形缓冲；3：再加上一个生产者"
              "线程束组和两个消费者线程束组，128×256 分块；4：再加上常驻线程块，k 分块之间与写回互相重叠；"
              "5：再加上两个线程块组成的簇，借 TMA 多播共享 B 的每个 k 分块；6：再让 C 经共享内存由 TMA "
              "存储写出，与下一个分块的计算重叠；7：再加上 stream-K，把最后几轮的 k 分块平均分给各个簇，由两个簇分担"
              "的分块对经全局内存中的工作区合并"),
        Param("stages", 4, (2, 3, 4), "shared-memory buffers in the TMA ring (steps 2–7)",
              "TMA 环形缓冲中的共享内存缓冲区数（第 2–7 步）"),
        Param("c_type", "float32", ("float32", "input"),
              "C's element type: fp32, or the inputs' own type (bf16 or fp16, rounded to nearest even), "
              "which is what cuBLAS writes and half the bytes",
              "C 的元素类型：fp32，或与输入相同的类型（bf16 或 fp16，就近舍入到偶数）——cuBLAS 写出的正是"
              "这种类型，字节数减半"),
        Param("arrive_scope", "cta", ("cta", "cluster"),
              "steps 5–6, an experiment: how a consumer tells both blocks' producers that a stage is free — a "
              "plain arrival (cta), or one with release semantics at cluster scope, a cluster-wide memory fence "
              "on every arrival (cluster)",
              "第 5–6 步的实验：消费者如何告诉两个线程块的生产者某个缓冲区已空闲——普通的到达（cta），或带有"
              "簇范围 release 语义的到达，即每次到达都是一次簇范围的内存栅栏（cluster）"),
    ),
    kernel_name=_hopper_kernel_name,
    geometry=_hopper_geometry,
    rules=_hopper_rules,
    dtypes=("bfloat16", "float16"),
    out_dtype="float32",
    c_type_param="c_type",
    min_cc=90,
    arch_specific=True,
    uses_tensor_cores=True,
    alignment=16,
    shape_rules=_hopper_shape_rules,
    kernel_args="kernel_args",
    showcase=({"step": 1}, {"step": 2}, {"step": 3}, {"step": 4}, {"step": 4, "stages": 3},
              {"step": 4, "c_type": "input"}, {"step": 5}, {"step": 6}, {"step": 6, "c_type": "input"},
              {"step": 7}, {"step": 7, "c_type": "input"}),
    experiments=({"step": 5, "arrive_scope": "cluster"},),
    # The search space: every step, stage count and C type; arrive_scope="cluster" is an experiment (the
    # chapter times it: a cluster-wide fence on every arrival), not a choice a tuner needs.
    sweep=lambda p: p["arrive_scope"] == "cta",
    sweep_shapes=DECODE_SHAPES,
)

_LEVELS: tuple[Level, ...] = (NAIVE, SMEM_TILING, COALESCING_BANKS, DOUBLE_BUFFERING, REGISTER_BLOCKING,
                              FUSED_EPILOGUE, VECTORIZED, WARP_TILING, WMMA, MMA_PIPELINE, HOPPER)


def levels() -> tuple[Level, ...]:
    """The ordered registry of levels."""
    return _LEVELS


# id ("01_naive"), number (1), its text ("1") and short name ("naive") of every level: what get_level accepts first.
_BY_NAME: dict[Any, Level] = {key: lv for lv in _LEVELS
                              for key in (lv.id, lv.number, str(lv.number), lv.id.split("_", 1)[1])}


FP8_LEVEL_ID = "13_fp8_blockscaled"  # Level 13, FP8 GEMM: not a kernel of this registry (gemm_course.fp8.gemm)
_FP8_LEVEL_NAMES = frozenset({FP8_LEVEL_ID, "13_fp8", "fp8_blockscaled", "fp8"})


def is_fp8_level(level: Any) -> bool:
    """Whether a level as one spells it (13, "13", "013", "13_fp8_blockscaled", "fp8_blockscaled", "fp8") is
    Level 13, which runs outside this registry (its B is N×K and it takes scales): the one place that knows."""
    if isinstance(level, bool) or not isinstance(level, (int, str)):
        return False
    text = str(level).strip()
    return text in _FP8_LEVEL_NAMES or (text.isascii() and text.isdigit() and int(text) == 13)


def get_level(level: str | int | Level) -> Level:
    """Look a level up by id ("01_naive"), number (1) or short name ("naive")."""
    if isinstance(level, Level):
        return level
    try:  # the usual spellings, looked up at once: a repeated gc.gemm call asks on every call
        return _BY_NAME[level]
    except (KeyError, TypeError):
        pass
    for lv in _LEVELS:  # other spellings ("01" for 1), then the message for an unknown name
        if level in (lv.id, lv.number, lv.id.split("_", 1)[1]) or str(level) == str(lv.number) or \
                (isinstance(level, str) and level.isascii() and level.isdigit() and int(level) == lv.number):
            return lv
    beyond = beyond_zh = ""
    if str(level).startswith(("12", "13")) or str(level) == "multi_gpu" or is_fp8_level(level):
        beyond = ("; Levels 12 and 13 are not kernels of this registry: use `python -m gemm_course multigpu` "
                  "(gemm_course.multigpu.schemes) and `python -m gemm_course fp8` (gemm_course.fp8.gemm)")
        beyond_zh = ("；第 12 级和第 13 级不在这个注册表里：请用 `python -m gemm_course multigpu`"
                     "（gemm_course.multigpu.schemes）和 `python -m gemm_course fp8`（gemm_course.fp8.gemm）")
    known = ", ".join(lv.id for lv in _LEVELS)
    raise ValueError(f"unknown level {level!r}; known levels: {known}{beyond} / "
                     f"没有级别 {level!r}；已有的级别：{known}{beyond_zh}")
