"""The registry of levels: one record per level, in teaching order.

A level knows everything the rest of the package needs to compile, launch, check and time it:
its CUDA C file, the C++ name of the kernel for a parameter setting, the launch geometry for a
problem size, its tunable parameters (compile-time template arguments) and what hardware it needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

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
    # every recorded size, and every valid setting that `sweep` accepts at `sweep_size`.
    showcase: tuple[Mapping[str, Any], ...] = ({},)
    sweep: Optional[Callable[[Mapping[str, Any]], bool]] = None
    sweep_size: int = 4096

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
            if value not in choices:
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

    def required_cc(self, params: Mapping[str, Any]) -> int:
        """The compute capability (e.g. 80) a resolved setting needs."""
        return max(self.min_cc, self.setting_min_cc(params))

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
    ),
    kernel_name=lambda p: (f"gemm_coalescing_banks<{p['tile']}, {LOAD_ORDERS[p['load']]}, "
                           f"{A_LAYOUTS[p['a_layout']]}>"),
    geometry=_square_tile_geometry,
    showcase=(
        {"a_layout": "mk"}, {"a_layout": "mk_padded"}, {"a_layout": "km"}, {"a_layout": "km_padded"},
        {"a_layout": "km_swizzled"}, {"load": "strided"},
    ),
    sweep=lambda p: True,
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

_LEVELS: tuple[Level, ...] = (NAIVE, SMEM_TILING, COALESCING_BANKS, DOUBLE_BUFFERING)


def levels() -> tuple[Level, ...]:
    """The ordered registry of levels."""
    return _LEVELS


def get_level(level: str | int | Level) -> Level:
    """Look a level up by id ("01_naive"), number (1) or short name ("naive")."""
    if isinstance(level, Level):
        return level
    for lv in _LEVELS:
        if level in (lv.id, lv.number, lv.id.split("_", 1)[1]) or str(level) == str(lv.number):
            return lv
    raise ValueError(f"unknown level {level!r}; known levels: {', '.join(lv.id for lv in _LEVELS)}")


def describe(levels_: Sequence[Level] | None = None) -> list[dict[str, Any]]:
    """A plain table of the registry (for printing or a DataFrame)."""
    return [
        {"id": lv.id, "title_en": lv.title_en, "title_zh": lv.title_zh, "source": lv.source,
         "params": {p.name: p.default for p in lv.params}, "dtypes": lv.dtypes,
         "min_cc": f"sm_{lv.min_cc}"}
        for lv in (levels_ or _LEVELS)
    ]
