"""How a kernel touches memory: sectors per warp access (Level 3), shared-memory banks, and the tiling traffic model against measurement (Level 2).

The notebooks call these through the façade (gemm_course.display.notebook).
"""
from __future__ import annotations

from typing import Any
from gemm_course.measure import results
from gemm_course.bilingual.text import Shown, Table, show as show_text, text
from gemm_course.levels import Level, get_level
from gemm_course.display.plots import show
from gemm_course.display.runs import _record_or_none


def coalescing_sectors(n: int = 4096) -> list[dict]:
    """Sectors per warp-wide access for the loads and stores of Levels 1 and 3, from lane addresses.

    Warp 0 of block (0, 0) with a 32-wide x dimension, n×n float matrices, k = 0.
    """
    from gemm_course.models import warp_sectors
    from gemm_course.display.plots import sectors_figure

    f = 4  # bytes per float
    lanes = range(32)
    rows = [  # (group, label, byte address of each lane's access)
        ("Level 1 cols", "A[row][k]", [0 * n * f for _ in lanes]),
        ("Level 1 cols", "B[k][col]", [lane * f for lane in lanes]),
        ("Level 1 cols", "C[row][col]", [lane * f for lane in lanes]),
        ("Level 1 rows", "A[row][k]", [lane * n * f for lane in lanes]),
        ("Level 1 rows", "B[k][col]", [0 for _ in lanes]),
        ("Level 1 rows", "C[row][col]", [lane * n * f for lane in lanes]),
        ("Level 3 coalesced", "A tile (ty, tx)", [lane * f for lane in lanes]),
        ("Level 3 coalesced", "B tile (ty, tx)", [lane * f for lane in lanes]),
        ("Level 3 strided", "A tile (tx, ty)", [lane * n * f for lane in lanes]),
        ("Level 3 strided", "B tile (tx, ty)", [lane * n * f for lane in lanes]),
    ]
    table = [{"group": g, "label": f"{g}: {label}", "sectors": warp_sectors(addr)} for g, label, addr in rows]
    show(sectors_figure(table, title=f"32-byte sectors per warp access ({n}×{n} floats) · 每次线程束访问的扇区数"))
    return Shown(table)


def banks(row: str, col: str, **kw: Any):
    """Show one warp's shared-memory access pattern: banks per lane and the conflict degree.

    width=8 or 16 models a float2 or float4 access starting at [row][col] (models.bank_access); the
    title then gives the wavefronts of the model in models.BankAccess."""
    from gemm_course.models import bank_access
    from gemm_course.display.plots import bank_figure

    access = bank_access(row, col, **kw)
    show(bank_figure(access))
    return access


def traffic(level: str | int | Level = "02_smem_tiling", size: int = 8192) -> list[dict]:
    """The tiling traffic model against measurement: bytes predicted (no cache), time, bandwidth."""
    from gemm_course.models import tile_traffic

    lv = get_level(level)
    n = size
    rows = [{"setting": "Level 1 (tile 1)", "record": _record_or_none("01_naive", n, mapping="cols", block_x=32,
                                                                      block_y=8), "tile": 1}]
    for s in lv.showcase:
        p = lv.resolve(**s)
        rows.append({"setting": f"tile {p['tile']}", "record": _record_or_none(lv.id, n, **p), "tile": p["tile"]})
    cells = []
    for r in rows:
        predicted = tile_traffic(n, n, n, r["tile"], r["tile"])
        rec = r["record"]
        measured = ([f"{rec['median_ms']:.1f}", f"{predicted / rec['median_ms'] / 1e9:.2f}", f"{rec['tflops']:.2f}"]
                    if rec else [text("not recorded", "未记录"), "–", "–"])
        setting = text(r["setting"], "第 1 级（分块边长 1）" if r["tile"] == 1 and "Level" in r["setting"]
                       else f"分块边长 {r['tile']}")
        cells.append([setting, f"{n // r['tile']}", f"{predicted / 1e9:,.0f}", *measured])
    where = results.provenance_line(rows[-1]["record"]) if rows[-1]["record"] else ""
    show_text(Table([text("setting", "设置"), text("times each element is read", "每个元素被读次数"),
                     text("predicted loads (GB)", "预测加载量（GB）"), text("time (ms)", "时间（毫秒）"),
                     text("loads / time (TB/s)", "加载量/时间（TB/s）"), "TFLOPS"], cells,
                    caption=text(f"{n}³, recorded: {where}", f"{n}³，记录于：{where}")))
    return Shown(rows)
