"""Sectors and bank wavefronts of your own kernel, counted on the CPU.

The CPU backend's instrumented build (the one with the race detector) can also record every memory
access of some blocks of a launch (the first one, unless you ask for more). This module groups those
accesses the way a GPU issues them:
the n-th execution of one instruction (one source address) by the 32 lanes of a warp, between the
same two barriers, is one warp-wide access. For each one it counts what the course's models count:

- global memory: the 32-byte sectors the warp touches (`models.warp_sectors`): 4 for 32 consecutive
  floats, 32 for floats a row apart;
- shared memory: the wavefronts (passes) the bank model gives (`models.BankAccess`), and the fewest
  the same bytes could take.

These are the course's models applied to the real addresses of your kernel, not hardware counters:
Nsight Compute on a GPU measures the real thing (`python -m gemm_course counters`). The models agree
with the recorded H200 counters on the course's kernels (see each level's "predict, then measure").

    for row in warp_access.profile("03_coalescing_banks", 64, 64, 64, load="strided"):
        print(row.describe())

With blocks=, several blocks are profiled (always including the first and the last of the grid) and
each row adds up all of them, keeping the worst block. access_log() returns the raw log, and
sequences() the ordered accesses of each thread (for checks of order: which loads come before which
shared reads, how many barrier intervals a block went through).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Sequence, Union

import numpy as np

from gemm_course.models import SECTOR_BYTES, BankAccess, warp_sectors


@dataclass(frozen=True)
class LineAccess:
    """One source line's accesses of one kind in the profiled blocks, added up over its warp-wide
    accesses; worst_block is the profiled block whose own units ÷ ideal_units for this row is the
    highest (the first such block on a tie), worst_per_access and worst_excess its per_access and excess."""

    line: str            # "file.cu:57"
    space: str           # "global" or "shared"
    write: bool
    array: str           # the argument's name for global memory (A, B, C, ...), "shared" otherwise
    width: int           # bytes per lane
    warp_accesses: int   # warp-wide accesses (instructions executed by a warp)
    units: int           # sectors (global) or wavefronts (shared), summed
    ideal_units: int     # the fewest the same bytes could take: 128 contiguous bytes → 4 sectors / 1 wavefront
    worst_block: tuple[int, int, int] = (0, 0, 0)
    worst_per_access: float = 0.0
    worst_excess: float = 1.0

    @property
    def per_access(self) -> float:
        """Sectors per request (global) or wavefronts per instruction (shared)."""
        return self.units / self.warp_accesses

    @property
    def excess(self) -> float:
        """units ÷ ideal_units: 1 is perfectly coalesced / conflict-free."""
        return self.units / self.ideal_units if self.ideal_units else 1.0

    def describe(self, lang: str = "en") -> str:
        """One line for this access; lang="zh": in Chinese."""
        if lang == "zh":
            what = "个扇区/次请求" if self.space == "global" else "个波前/条指令"
            kind = "写入" if self.write else "读取"
            target = self.array if self.space == "global" else "共享内存"
            worst = (f"；最差的线程块 {self.worst_block}：{self.worst_per_access:.2f}"
                     if self.worst_excess > self.excess + 1e-9 else "")
            return (f"{self.line}：{target} 的 {self.width} 字节{kind}：{self.per_access:.2f} {what}，"
                    f"共 {self.warp_accesses} 次线程束访问（理想值 {self.ideal_units / self.warp_accesses:.2f}）{worst}")
        what = "sectors per request" if self.space == "global" else "wavefronts per instruction"
        kind = "store" if self.write else "load"
        target = self.array if self.space == "global" else "shared memory"
        worst = (f"; worst block {self.worst_block}: {self.worst_per_access:.2f}"
                 if self.worst_excess > self.excess + 1e-9 else "")
        return (f"{self.line}: {self.width}-byte {kind} of {target}: {self.per_access:.2f} {what} "
                f"over {self.warp_accesses} warp accesses (ideal {self.ideal_units / self.warp_accesses:.2f}){worst}")


def _ideal_global(lane_bytes: list[tuple[int, int]]) -> int:
    """Sectors the same number of distinct bytes would take if they were contiguous and aligned."""
    distinct = len({b for a, n in lane_bytes for b in range(a, a + n)})
    return max(1, -(-distinct // SECTOR_BYTES))


def _line_names(log: Any) -> dict[int, str]:
    """pc → "file:line" for every pc in the log (one addr2line call)."""
    kernel = log.kernel
    offsets = {int(pc): kernel.code_offset(int(pc)) for pc in np.unique(log.records["pc"])}
    lines = kernel.source_lines(list(offsets.values()))
    return {pc: lines[o] for pc, o in offsets.items()}


def _array_codes(log: Any, address: np.ndarray, shared: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per record, the index of the name it is counted under (names: "shared" first, then the arrays),
    or -1 for what is no array (the stack, the runtime)."""
    spans = sorted((a, a + n, name) for name, (a, n, _) in log.arrays.items())
    names = ["shared"] + [name for _, _, name in spans]
    code = np.full(len(address), -1, dtype=np.int64)
    if spans:
        starts = np.array([lo for lo, _, _ in spans], dtype=np.uint64)
        ends = np.array([hi for _, hi, _ in spans], dtype=np.uint64)
        at = np.searchsorted(starts, address, side="right") - 1
        inside = (at >= 0) & (address < ends[np.clip(at, 0, None)])
        code[inside] = at[inside] + 1
    code[shared] = 0
    return code, names


def _groups(columns: list[np.ndarray], tiebreak: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Records sorted by `columns` (the first the primary key) and, within equal keys, by `tiebreak`: (order, the
    positions in `order` where each group of equal keys starts)."""
    order = np.lexsort([tiebreak] + columns[::-1])
    same = np.zeros(len(order), dtype=bool)
    if len(order):
        same[1:] = True
        for column in columns:
            same[1:] &= column[order][1:] == column[order][:-1]
    return order, np.nonzero(~same)[0]


def summary(log: Any) -> list[LineAccess]:
    """The profiled blocks' accesses, one row per (source line, space, load/store, array), worst first.

    A warp-wide access is the n-th execution of one instruction (pc) by the lanes of one warp in one
    barrier interval: records are grouped by (block, interval, warp, pc, store, space, array) and by how
    many times the same thread had made that access before (n). Grouping is done with NumPy; each
    group's sectors or wavefronts come from the course's models."""
    rec = log.records
    if len(rec) == 0:
        return []
    lines = _line_names(log)
    blocks = list(getattr(log, "blocks", None) or [(0, 0, 0)])
    flags = rec["flags"].astype(np.int64)
    shared = (flags & 2) != 0
    address = rec["address"].astype(np.uint64)
    code, names = _array_codes(log, address, shared)
    keep = np.nonzero(code >= 0)[0]
    if not len(keep):
        return []
    thread = rec["thread"].astype(np.int64)[keep]
    columns = [rec["block"].astype(np.int64)[keep], rec["interval"].astype(np.int64)[keep], thread // 32,
               rec["pc"].astype(np.uint64)[keep].astype(np.int64), (flags[keep] & 1), code[keep]]
    # n: how many earlier records of the same thread share the key (the record index breaks ties: program order)
    order, runs = _groups(columns + [thread], keep)
    run_start = np.zeros(len(order), dtype=np.int64)
    run_start[runs] = runs
    run_start = np.maximum.accumulate(run_start)
    occurrence = np.empty(len(order), dtype=np.int64)
    occurrence[order] = np.arange(len(order)) - run_start
    # groups: (key, n), in the order of their first record
    group_order, starts = _groups(columns + [occurrence], keep)
    # Per group (in the order of its first record): its block, pc, store flag and array; per record of a group
    # (sorted by lane): lane, address relative to the group's 128-byte-aligned lowest address, and size.
    ends = np.r_[starts[1:], len(group_order)]
    group_of = np.repeat(np.arange(len(starts)), ends - starts)
    lane = thread[group_order] % 32
    size = rec["size"].astype(np.int64)[keep][group_order]
    where = address[keep].astype(np.int64)[group_order]
    base = np.minimum.reduceat(where, starts) // 128 * 128
    width = np.maximum.reduceat(size, starts)
    rel = where - base[group_of]
    by_lane = np.lexsort([lane, group_of])  # within each group, lanes in order (a group has each lane once)
    packed = (rel[by_lane] << 13) | (size[by_lane] << 5) | lane[by_lane]
    packed_bytes = packed.astype("<i8").tobytes()
    first_record = group_order[starts]
    group_block, group_pc = columns[0][first_record], columns[3][first_record]
    group_write, group_name = columns[4][first_record], columns[5][first_record]
    # The same pattern recurs (every k-tile reads the same shared words): count each pattern once, moved
    # by a multiple of 128 bytes, which keeps every bank and sector boundary where it was.
    counted: dict[tuple, tuple[int, int]] = {}
    units = np.empty(len(starts), dtype=np.int64)
    ideal = np.empty(len(starts), dtype=np.int64)
    for g, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist())):
        is_shared = int(group_name[g]) == 0
        pattern = (is_shared, int(width[g]), packed_bytes[8 * lo:8 * hi])
        found = counted.get(pattern)
        if found is None:
            lanes = [(int(v) & 31, int(v) >> 13, (int(v) >> 5) & 255) for v in packed[lo:hi]]
            if is_shared:
                w = int(width[g])
                access = BankAccess("", tuple(l for l, _, _ in lanes), tuple(a // 4 for _, a, _ in lanes),
                                    w if w in (4, 8, 16) else 4)
                found = access.wavefronts, access.ideal_wavefronts
            else:
                moved = [(a, n) for _, a, n in lanes]
                found = warp_sectors([b for a, n in moved for b in range(a, a + n, 4)]), _ideal_global(moved)
            counted[pattern] = found
        units[g], ideal[g] = found
    # Rows (line, space, store, array, width), in the order of their first group; totals per row and per block.
    groups_in_order = np.argsort(first_record, kind="stable")
    totals: dict[tuple, list[int]] = {}
    per_block: dict[tuple, dict[int, list[int]]] = {}
    row_keys = {}
    for g in groups_in_order.tolist():
        name = int(group_name[g])
        raw = (int(group_pc[g]), name, int(group_write[g]), int(width[g]))
        row_key = row_keys.get(raw)
        if row_key is None:
            row_key = row_keys[raw] = (lines[raw[0]], "shared" if name == 0 else "global", bool(raw[2]), names[name], raw[3])
        u, i, b = int(units[g]), int(ideal[g]), int(group_block[g])
        for row in (totals.setdefault(row_key, [0, 0, 0]), per_block.setdefault(row_key, {}).setdefault(b, [0, 0, 0])):
            row[0] += 1
            row[1] += u
            row[2] += i
    out = []
    for row_key, (n, row_units, row_ideal) in totals.items():
        # The worst block: the highest units ÷ ideal, then the most units per access; the lowest index on a tie.
        b, (bn, bu, bi) = max(per_block[row_key].items(),
                              key=lambda item: (item[1][1] / item[1][2] if item[1][2] else 1.0, item[1][1] / item[1][0], -item[0]))
        out.append(LineAccess(*row_key, n, row_units, row_ideal, worst_block=tuple(blocks[b]), worst_per_access=bu / bn,
                              worst_excess=bu / bi if bi else 1.0))
    return sorted(out, key=lambda r: (-r.excess, r.line))


class Access(NamedTuple):
    """One memory access of one thread, in the order the thread made it."""

    interval: int           # barrier interval of its block: 0 before the first __syncthreads(), 1 after it, ...
    space: str              # "global" or "shared"
    array: str              # the argument's name (A, B, C, ...) or the shared element's variable ("As")
    write: bool
    line: str               # "file.cu:57"
    index: tuple            # global: (row, col) for a 2-D argument, (i,) for 1-D; shared: (byte offset,)
    element: str            # "A[3, 17]" or the shared element "As[1][3][17]" ("byte N of dynamic shared memory")
    size: int               # bytes
    cp_async: bool = False  # the source read or the target write of an asynchronous copy (at its issue)


def _global_index(shape: tuple[int, ...], element: int) -> tuple[int, ...]:
    if len(shape) >= 2 and shape[-1] > 0:
        return divmod(element, shape[-1]) if len(shape) == 2 else (element // (shape[-2] * shape[-1]),
                                                                    *divmod(element % (shape[-2] * shape[-1]), shape[-1]))
    return (element,)


def sequences(log: Any) -> dict[tuple[int, int, int], dict[tuple[int, int, int], list[Access]]]:
    """Per profiled block, per thread ((x, y, z) each), its accesses of global arrays and shared memory
    in program order (the stack and the runtime's own data left out). A cp.async appears at its issue:
    a global read and a shared write, both with cp_async=True. (Each distinct element, line and thread
    is named once; the records are only gathered per thread here.)"""
    rec = log.records
    bx, by, _ = log.launch.block
    blocks = list(getattr(log, "blocks", None) or [(0, 0, 0)])
    out: dict[tuple, dict[tuple, list[Access]]] = {tuple(b): {} for b in blocks}
    if len(rec) == 0:
        return out
    lines = _line_names(log)
    flags = rec["flags"].astype(np.int64)
    shared = (flags & 2) != 0
    address = rec["address"].astype(np.uint64)
    code, names = _array_codes(log, address, shared)
    keep = np.nonzero(code >= 0)[0]
    shapes = getattr(log, "shapes", {}) or {}
    kernel = log.kernel
    # Each distinct (array, address) named once: its array, index and element text.
    where = code[keep].astype(np.uint64) << np.uint64(48) | address[keep]
    distinct, inverse = np.unique(where, return_inverse=True)
    named: list[tuple[str, tuple, str]] = []
    for key in distinct.tolist():
        c, a = key >> 48, key & ((1 << 48) - 1)
        if c == 0:
            element = kernel.shared_element(a)
            name = "shared" if element.startswith("byte ") else element.split("[")[0].split(".")[0].split(" ")[0]
            named.append((name, (a,), element))
        else:
            name = names[c]
            base, _, item = log.arrays[name]
            index = tuple(int(v) for v in _global_index(shapes.get(name, ()), (a - base) // item))
            named.append((name, index, f"{name}[{', '.join(map(str, index))}]"))
    # Equal accesses (element, interval, line, size, kind) are one Access object, made once from the first record
    # of each kind; the records are then gathered per (block, thread), each thread's in program order.
    kept = rec[keep]
    pcs, pc_code = np.unique(kept["pc"], return_inverse=True)
    line_of = [lines[int(pc)] for pc in pcs.tolist()]
    every = np.arange(len(kept))
    fields = [inverse.reshape(-1), kept["interval"], pc_code.reshape(-1), kept["size"], kept["flags"] & 7]
    by_kind, kind_starts = _groups(fields, every)
    starts_here = np.zeros(len(kept), dtype=np.int64)
    starts_here[kind_starts] = 1
    kind_of = np.empty(len(kept), dtype=np.int64)
    kind_of[by_kind] = np.cumsum(starts_here) - 1
    made = []
    for n, interval, pc, size, flag in zip(*(f[by_kind[kind_starts]].tolist() for f in fields)):
        name, index, element = named[n]
        made.append(Access(interval, "shared" if flag & 2 else "global", name, bool(flag & 1), line_of[pc], index,
                           element, size, bool(flag & 4)))
    block_of, thread_of = kept["block"].astype(np.int64), kept["thread"].astype(np.int64)
    order, starts = _groups([block_of, thread_of], every)
    accesses = [made[k] for k in kind_of[order].tolist()]
    ends = np.r_[starts[1:], len(order)]
    for i in np.argsort(order[starts], kind="stable").tolist():  # threads in the order they first appear
        first = order[starts[i]]
        t = int(thread_of[first])
        out[tuple(blocks[int(block_of[first])])][(t % bx, t // bx % by, t // (bx * by))] = accesses[starts[i]:ends[i]]
    return out


def barrier_intervals(log: Any) -> dict[tuple[int, int, int], int]:
    """Per profiled block, the barrier intervals it went through (the __syncthreads() it passed + 1)."""
    return {tuple(b): int(n) for b, n in zip(log.blocks, log.intervals)}


BlockChoice = Union[None, int, Sequence[Sequence[int]]]


def choose_blocks(grid: Sequence[int], blocks: BlockChoice = None,
                  rng: Union[None, int, np.random.Generator] = None) -> list[tuple[int, int, int]]:
    """The blocks to profile in a grid: None → the first block only; an int n → n blocks: the first,
    the last, and n − 2 others drawn without replacement by rng (a seed or a numpy Generator; default
    seed 0); a list of (x, y, z) → those, with the first and the last block added when missing."""
    gx, gy, gz = (int(g) for g in grid)
    first, last = (0, 0, 0), (gx - 1, gy - 1, gz - 1)
    if blocks is None:
        return [first]
    if isinstance(blocks, (int, np.integer)) and not isinstance(blocks, bool):
        if blocks < 1:
            raise ValueError(f"blocks={blocks}: give a positive number of blocks to profile / "
                             f"blocks={blocks}：要记录的线程块数必须是正整数")
        total = gx * gy * gz
        generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(0 if rng is None else rng)
        linear = [0, total - 1]
        others = [i for i in range(1, total - 1)]
        extra = min(max(int(blocks) - 2, 0), len(others))
        linear += [int(i) for i in generator.choice(others, size=extra, replace=False)] if extra else []
        chosen = [(i % gx, i // gx % gy, i // (gx * gy)) for i in dict.fromkeys(linear)]
        return sorted(set(chosen), key=lambda b: (b[2], b[1], b[0]))
    try:
        listed = [tuple(int(v) for v in b) for b in blocks]
    except (TypeError, ValueError):
        raise TypeError(f"blocks={blocks!r}: give None, a number of blocks, or a list of (x, y, z) / "
                        f"blocks={blocks!r}：请传入 None、线程块的数目，或者 (x, y, z) 的列表") from None
    for b in listed:
        if len(b) != 3 or not all(0 <= v < g for v, g in zip(b, (gx, gy, gz))):
            raise ValueError(f"block {b} is not in the grid ({gx},{gy},{gz}) / 线程块 {b} 不在网格 ({gx},{gy},{gz}) 之内")
    return sorted(set(listed) | {first, last}, key=lambda b: (b[2], b[1], b[0]))


def access_log(level: Any, M: int = 64, N: int = 64, K: int = 64, source: Optional[str] = None, *,
               blocks: BlockChoice = None, rng: Union[None, int, np.random.Generator] = None,
               source_name: Optional[str] = None, **params: Any) -> Any:
    """Run a level's kernel (or your edited `source` of it) on the CPU on random M×N×K operands and
    return the AccessLog of the blocks chosen by choose_blocks(grid, blocks, rng). An epilogue level
    gets a bias vector. source_name: the file name lines are given in (default: the level's)."""
    from gemm_course.run import cpu_backend
    from gemm_course.run.check import random_operands
    from gemm_course.run.launch import _kernel_params
    from gemm_course.levels import get_level

    lv = get_level(level)
    cpu_backend.require_simt(lv)
    resolved = lv.resolve(**params)
    A, B = random_operands(M, N, K, xp=np)
    C = np.full((M, N), np.nan, dtype=np.float32)
    kernel_params = _kernel_params(lv, resolved, A, B, C, N, K)
    extra = [np.linspace(-1, 1, N, dtype=np.float32) if resolved.get("bias") else None, 1.0, 0.0] if lv.epilogue else []
    launch = lv.geometry(M, N, K, kernel_params)
    return cpu_backend.run_level(lv, kernel_params, A, B, C, source, extra_args=extra, launch=launch, profile=True,
                                 source_name=source_name, profile_blocks=choose_blocks(launch.grid, blocks, rng))


def profile(level: Any, M: int = 64, N: int = 64, K: int = 64, source: Optional[str] = None, *,
            blocks: BlockChoice = None, rng: Union[None, int, np.random.Generator] = None,
            source_name: Optional[str] = None, **params: Any) -> list[LineAccess]:
    """Run a level's kernel (or your edited `source` of it) on the CPU on random M×N×K operands and
    return summary() of the accesses of its first block, or of the blocks `blocks` asks for (see
    choose_blocks: a count drawn with rng, or a list of (x, y, z); the first and last blocks always
    come along). An epilogue level gets a bias vector. source_name: the file name lines are given in."""
    return summary(access_log(level, M, N, K, source, blocks=blocks, rng=rng, source_name=source_name, **params))
