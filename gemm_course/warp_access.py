"""Sectors and bank wavefronts of your own kernel, counted on the CPU.

The CPU backend's instrumented build (the one with the race detector) can also record every memory
access of the first block of a launch. This module groups those accesses the way a GPU issues them:
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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .models import SECTOR_BYTES, BankAccess, warp_sectors


@dataclass(frozen=True)
class LineAccess:
    """One source line's accesses of one kind in the first block, added up over its warp-wide accesses."""

    line: str            # "file.cu:57"
    space: str           # "global" or "shared"
    write: bool
    array: str           # the argument's name for global memory (A, B, C, ...), "shared" otherwise
    width: int           # bytes per lane
    warp_accesses: int   # warp-wide accesses (instructions executed by a warp)
    units: int           # sectors (global) or wavefronts (shared), summed
    ideal_units: int     # the fewest the same bytes could take: 128 contiguous bytes → 4 sectors / 1 wavefront

    @property
    def per_access(self) -> float:
        """Sectors per request (global) or wavefronts per instruction (shared)."""
        return self.units / self.warp_accesses

    @property
    def excess(self) -> float:
        """units ÷ ideal_units: 1 is perfectly coalesced / conflict-free."""
        return self.units / self.ideal_units if self.ideal_units else 1.0

    def describe(self) -> str:
        what = "sectors per request" if self.space == "global" else "wavefronts per instruction"
        kind = "store" if self.write else "load"
        target = self.array if self.space == "global" else "shared memory"
        return (f"{self.line}: {self.width}-byte {kind} of {target}: {self.per_access:.2f} {what} "
                f"over {self.warp_accesses} warp accesses (ideal {self.ideal_units / self.warp_accesses:.2f})")


def _ideal_global(lane_bytes: list[tuple[int, int]]) -> int:
    """Sectors the same number of distinct bytes would take if they were contiguous and aligned."""
    distinct = len({b for a, n in lane_bytes for b in range(a, a + n)})
    return max(1, -(-distinct // SECTOR_BYTES))


def summary(log: Any) -> list[LineAccess]:
    """The first block's accesses, one row per (source line, space, load/store, array), worst first."""
    rec = log.records
    if len(rec) == 0:
        return []
    kernel = log.kernel
    offsets = {int(pc): kernel.code_offset(int(pc)) for pc in np.unique(rec["pc"])}
    lines = kernel.source_lines(list(offsets.values()))
    arrays = sorted((address, address + nbytes, name) for name, (address, nbytes, _) in log.arrays.items())

    def array_of(address: int) -> Optional[str]:
        for lo, hi, name in arrays:
            if lo <= address < hi:
                return name
        return None  # the stack (local variables) or the runtime: not device memory of the kernel

    groups: dict[tuple, dict[int, tuple[int, int]]] = {}
    seen: dict[tuple, int] = {}
    for interval, thread, size, flags, pc, address in rec.tolist():
        shared = bool(flags & 2)
        name = "shared" if shared else array_of(address)
        if name is None:
            continue
        key = (interval, thread // 32, pc, bool(flags & 1), shared, name)
        n = seen.get((key, thread), 0)
        seen[(key, thread)] = n + 1
        groups.setdefault((key, n), {})[thread % 32] = (address, size)
    totals: dict[tuple, list[int]] = {}
    for (key, _), lanes in groups.items():
        _, _, pc, write, shared, name = key
        width = max(size for _, size in lanes.values())
        if shared:
            access = BankAccess("", tuple(lanes), tuple(a // 4 for a, _ in lanes.values()), width if width in (4, 8, 16) else 4)
            units, ideal = access.wavefronts, access.ideal_wavefronts
        else:
            units = warp_sectors([b for a, n in lanes.values() for b in range(a, a + n, 4)])
            ideal = _ideal_global(list(lanes.values()))
        row = totals.setdefault((lines[offsets[pc]], "shared" if shared else "global", write, name, width), [0, 0, 0])
        row[0] += 1
        row[1] += units
        row[2] += ideal
    out = [LineAccess(line, space, write, name, width, n, units, ideal)
           for (line, space, write, name, width), (n, units, ideal) in totals.items()]
    return sorted(out, key=lambda r: (-r.excess, r.line))


def profile(level: Any, M: int = 64, N: int = 64, K: int = 64, source: Optional[str] = None,
            **params: Any) -> list[LineAccess]:
    """Run a level's kernel (or your edited `source` of it) on the CPU on random M×N×K operands and
    return summary() of its first block's accesses. An epilogue level gets a bias vector."""
    from . import cpu_backend
    from .check import random_operands
    from .launch import _kernel_params
    from .levels import get_level

    lv = get_level(level)
    cpu_backend.require_simt(lv)
    resolved = lv.resolve(**params)
    A, B = random_operands(M, N, K, xp=np)
    C = np.full((M, N), np.nan, dtype=np.float32)
    kernel_params = _kernel_params(lv, resolved, A, B, C, N, K)
    extra = [np.linspace(-1, 1, N, dtype=np.float32) if resolved.get("bias") else None, 1.0, 0.0] if lv.epilogue else []
    log = cpu_backend.run_level(lv, kernel_params, A, B, C, source, extra_args=extra,
                                launch=lv.geometry(M, N, K, kernel_params), profile=True)
    return summary(log)
