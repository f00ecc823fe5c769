"""Explanatory figures (drawn from definitions, not measured) and a small table helper.

    from gemm_course.display import diagrams, plots
    plots.show(diagrams.matmul_figure())                      # C[i, j] = row i of A · column j of B
    plots.show(diagrams.thread_map_figure("cols"))            # Level 1: who computes which C[i, j]
    plots.show(diagrams.memory_hierarchy_figure())            # capacities from a recorded GPU
    diagrams.table(["a", "b"], [[1, 2]])                      # an HTML table for a page

Every figure is a plotly ``go.Figure``; pages display it with ``gemm_course.display.plots.show``.
Axis titles read "English · 中文", like the measured figures in ``plots``.
"""
from __future__ import annotations

import html
import math
from typing import Any, Mapping, Optional, Sequence

import plotly.graph_objects as go

from gemm_course import models
from gemm_course.levels import ceil_div

WARP_SIZE = 32

# Light fills for the background, strong ones for what a figure points at.
_GREY = "#eeeeee"
_ROW = "#9ecae1"      # the row of A / column of B that one element of C reads
_HIT = "#d62728"      # the element of C
_BLOCK_FILLS = ("#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb")  # four, so neighbouring blocks differ
_WARP = "#d62728"


def _discrete_scale(colors: Sequence[str]) -> list[list[Any]]:
    """A plotly colorscale that maps the integers 0..len-1 (with zmin=0, zmax=len-1) to colors."""
    n = len(colors)
    scale: list[list[Any]] = []
    for i, c in enumerate(colors):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return scale


def _base_layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    from gemm_course.display.plots import fit_left, fit_top

    fig.update_layout(title=title, template="plotly_white", height=height, showlegend=False,
                      margin=dict(l=60, r=20, t=70, b=40))
    # a title that fits a phone (wrapped, the top margin grows to hold it) and bar labels that leave the
    # bars most of its width
    top = _margin_t(fig)
    fit_top(fit_left(fig))
    if (fig.layout.margin.t or 0) < top:  # never less room above the plot than the figure asked for
        fig.update_layout(margin=dict(t=top), height=height)
    _fit_x_title(fig)
    return fig


def _fit_x_title(fig: go.Figure) -> None:
    """The x axis title wrapped to the plot's width on a phone (plots.NARROW_PX), the bottom margin and the
    figure growing by its extra lines (a one-line title past the right edge was cut off there)."""
    from gemm_course.display.plots import NARROW_PX, n_lines, wrap

    xtitle = fig.layout.xaxis.title.text if fig.layout.xaxis.title else None
    if not xtitle:
        return
    width = NARROW_PX - (fig.layout.margin.l or 60) - (fig.layout.margin.r or 20)
    wrapped = wrap(xtitle, max(width, 150), 14)
    extra = int((n_lines(wrapped) - n_lines(xtitle)) * 14 * 1.3)
    fig.layout.xaxis.title.text = wrapped
    if extra > 0:
        fig.update_layout(margin=dict(b=(fig.layout.margin.b or 40) + extra), height=(fig.layout.height or 450) + extra)


def _margin_t(fig: go.Figure) -> int:
    return int(fig.layout.margin.t or 70)


PANEL_TITLE_SIZE = 12


def _panel_layout(fig: go.Figure, title: str, plot_height: int, panels: int = 2) -> go.Figure:
    """_base_layout for a figure of `panels` panels (make_subplots, one row): the panels are stacked, one
    above the other and each the full width, so each keeps a usable size on a 360 px phone (side by side,
    each got about 130 px). Each panel's title (the first `panels` annotations) sits above its panel and
    its axis title below it, both wrapped to the narrow width (plots.NARROW_PX), one language a line; each
    panel's plot area is `plot_height` × 0.7 px tall (square tiles keep their shape: plotly fits them in)."""
    from gemm_course.display.plots import NARROW_PX, fit_top, n_lines, wrap

    fig = _base_layout(fig, title, plot_height + 110)
    plot_w = NARROW_PX - 60 - 20
    axes = [("xaxis", "yaxis"), ("xaxis2", "yaxis2"), ("xaxis3", "yaxis3")][:panels]
    blocks = []  # per panel: (title px, plot px, px below the plot for ticks and the axis title)
    for ann, (xa, _) in zip(fig.layout.annotations[:panels], axes):
        ann.text = wrap(ann.text, plot_w, PANEL_TITLE_SIZE)
        ann.font = dict(size=PANEL_TITLE_SIZE)
        xtitle = fig.layout[xa].title.text
        if xtitle:
            fig.layout[xa].title.text = wrap(xtitle, plot_w + 20, 14)
        ticks = 22 if fig.layout[xa].showticklabels is not False else 4
        below = ticks + (int(n_lines(fig.layout[xa].title.text) * 14 * 1.3) + 8 if xtitle else 0)
        blocks.append((int(n_lines(ann.text) * PANEL_TITLE_SIZE * 1.35) + 10, int(plot_height * 0.7), below))
    area = sum(t + h + b for t, h, b in blocks) - blocks[-1][2]  # the last panel's axis title: bottom margin
    cursor = area
    for ann, (xa, ya), (t, h, b) in zip(fig.layout.annotations[:panels], axes, blocks):
        cursor -= t
        top = cursor / area
        cursor -= h
        fig.layout[xa].domain = [0, 1]
        fig.layout[ya].domain = [cursor / area, top]
        ann.update(x=0.5, xanchor="center", xref="paper", y=top, yanchor="bottom", yref="paper")
        cursor -= b
    fig = fit_top(fig)
    bottom = blocks[-1][2] + 12
    fig.update_layout(margin=dict(b=bottom), height=int(fig.layout.margin.t + area + bottom))
    return fig


# --- C = A · B, one element ------------------------------------------------------------------------

def matmul_figure(M: int = 4, N: int = 5, K: int = 6, i: int = 1, j: int = 3) -> go.Figure:
    """C[i, j] is the dot product of row i of A and column j of B, drawn as three small grids.

    B sits above C and A to its left, so the highlighted row of A lines up with row i of C and
    the highlighted column of B with column j of C. Hovering a cell shows its row-major offset
    (e.g. A[i][k] is A[i*K + k]). Traces are named "A", "B", "C"; their z is 0 for a plain cell,
    1 for the row/column that is read and 2 for the element of C that is written.
    """
    if not (0 <= i < M and 0 <= j < N):
        raise ValueError(f"(i, j) = ({i}, {j}) is outside C, which is {M}×{N}")
    gap = 1.0
    x0 = K + gap  # column offset of B and C
    y0 = K + gap  # row offset of A and C
    fig = go.Figure()

    def grid(name: str, rows: int, cols: int, dx: float, dy: float, level, label) -> None:
        z = [[level(r, c) for c in range(cols)] for r in range(rows)]
        text = [[label(r, c) if z[r][c] else "" for c in range(cols)] for r in range(rows)]
        ncols = {"A": K, "B": N, "C": N}[name]
        hover = [[f"{name}[{r}][{c}] = {name}[{r}*{ncols} + {c}] = {name}[{r * ncols + c}]"
                  for c in range(cols)] for r in range(rows)]
        fig.add_trace(go.Heatmap(
            name=name, z=z, x=[dx + c for c in range(cols)], y=[dy + r for r in range(rows)],
            zmin=0, zmax=2, colorscale=_discrete_scale((_GREY, _ROW, _HIT)), showscale=False,
            xgap=2, ygap=2, text=text, texttemplate="%{text}", textfont=dict(size=10),
            customdata=hover, hovertemplate="%{customdata}<extra></extra>"))

    grid("A", M, K, 0, y0, lambda r, c: int(r == i), lambda r, c: f"A[{r},{c}]")
    grid("B", K, N, x0, 0, lambda r, c: int(c == j), lambda r, c: f"B[{r},{c}]")
    grid("C", M, N, x0, y0, lambda r, c: 2 if (r, c) == (i, j) else 0, lambda r, c: f"C[{r},{c}]")

    for text, x, y in ((f"A  ({M}×{K})", (K - 1) / 2, y0 - 0.9),
                       (f"B  ({K}×{N})", x0 + (N - 1) / 2, -0.9),
                       (f"C = A·B  ({M}×{N})", x0 + (N - 1) / 2, y0 + M - 0.1)):
        fig.add_annotation(text=text, x=x, y=y, showarrow=False, font=dict(size=13),
                           yanchor="bottom" if y < y0 + M - 1 else "top")
    fig.add_annotation(
        text=f"C[{i},{j}] = Σ<sub>k</sub> A[{i},k] · B[k,{j}],  k = 0 … {K - 1}:  "
             f"{K} multiply-adds · {K} 次乘加", xref="paper", yref="paper", x=0, y=1.07,
        showarrow=False, xanchor="left", font=dict(size=12, color="#444"))
    fig.update_xaxes(visible=False, range=[-0.6, x0 + N - 0.4])
    fig.update_yaxes(visible=False, autorange="reversed", scaleanchor="x", scaleratio=1)
    height = int(140 + 38 * (K + gap + M + 1))
    return _base_layout(fig, "One element of C · C 的一个元素", height)


# --- Level 1: which thread computes which element of C ---------------------------------------------

def naive_element(mapping: str, block_x: int, block_y: int, block: tuple[int, int],
                  thread: tuple[int, int]) -> tuple[int, int]:
    """(row, col) of C that thread (threadIdx.x, threadIdx.y) of block (blockIdx.x, blockIdx.y)
    computes in Level 1, exactly as ``kernels/01_naive.cu`` indexes it."""
    (bx, by), (tx, ty) = block, thread
    if mapping == "cols":  # threadIdx.x walks along the columns of C
        return by * block_y + ty, bx * block_x + tx
    if mapping == "rows":  # threadIdx.x walks down the rows of C
        return bx * block_x + tx, by * block_y + ty
    raise ValueError(f"mapping must be 'cols' or 'rows', not {mapping!r}")


def warp_elements(mapping: str, block_x: int, block_y: int, block: tuple[int, int] = (0, 0),
                  warp: int = 0) -> list[tuple[int, int]]:
    """The (row, col) elements of C that the 32 lanes of one warp compute, lane 0 first.

    A warp is 32 threads with consecutive linear index threadIdx.y * blockDim.x + threadIdx.x.
    """
    threads = block_x * block_y
    if not 0 <= warp < ceil_div(threads, WARP_SIZE):
        raise ValueError(f"a block of {threads} threads has warps 0..{ceil_div(threads, WARP_SIZE) - 1}")
    lanes = range(warp * WARP_SIZE, min((warp + 1) * WARP_SIZE, threads))
    return [naive_element(mapping, block_x, block_y, block, (t % block_x, t // block_x)) for t in lanes]


def _runs(cells: Sequence[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """Group cells into rectangles (row0, col0, row1, col1), merging straight neighbours."""
    todo = set(cells)
    rects = []
    for r, c in sorted(cells):
        if (r, c) not in todo:
            continue
        if (r, c + 1) in todo or (r + 1, c) not in todo:  # grow along the row
            c1 = c
            while (r, c1 + 1) in todo:
                c1 += 1
            rects.append((r, c, r, c1))
            todo -= {(r, x) for x in range(c, c1 + 1)}
        else:  # grow down the column
            r1 = r
            while (r1 + 1, c) in todo:
                r1 += 1
            rects.append((r, c, r1, c))
            todo -= {(y, c) for y in range(r, r1 + 1)}
    return rects


def thread_map_figure(mapping: str = "cols", block_x: int = 32, block_y: int = 8, M: int = 64,
                      N: int = 64, block: tuple[int, int] = (1, 1), warp: int = 2) -> go.Figure:
    """Which block, warp and thread of Level 1 computes each element of C (M×N).

    Cells are coloured by thread block (four colours, so neighbours differ); one block is framed
    with a dashed line and one of its warps is outlined and marked: in "cols" a warp covers a
    segment of a row of C, in "rows" a segment of a column. The marked warp is the trace named
    "warp" (x = columns, y = rows of its elements). Hover a cell for its block, thread, warp, lane.
    """
    if mapping not in ("cols", "rows"):
        raise ValueError(f"mapping must be 'cols' or 'rows', not {mapping!r}")
    grid_x, grid_y = (ceil_div(N, block_x), ceil_div(M, block_y)) if mapping == "cols" else \
        (ceil_div(M, block_x), ceil_div(N, block_y))
    if not (0 <= block[0] < grid_x and 0 <= block[1] < grid_y):
        raise ValueError(f"block {block} is outside the grid ({grid_x}, {grid_y})")

    z = [[0] * N for _ in range(M)]
    info = [[""] * N for _ in range(M)]
    for by in range(grid_y):
        for bx in range(grid_x):
            for ty in range(block_y):
                for tx in range(block_x):
                    r, c = naive_element(mapping, block_x, block_y, (bx, by), (tx, ty))
                    if r < M and c < N:  # the kernel's bounds check
                        t = ty * block_x + tx
                        z[r][c] = (bx % 2) + 2 * (by % 2)
                        info[r][c] = (f"C[{r},{c}]<br>blockIdx = ({bx}, {by}), threadIdx = ({tx}, {ty})"
                                      f"<br>warp {t // WARP_SIZE}, lane {t % WARP_SIZE}")
    fig = go.Figure(go.Heatmap(
        name="blocks", z=z, x=list(range(N)), y=list(range(M)), zmin=0, zmax=3,
        colorscale=_discrete_scale(_BLOCK_FILLS), showscale=False, xgap=1, ygap=1,
        customdata=info, hovertemplate="%{customdata}<extra></extra>"))

    # the framed block
    cells = [naive_element(mapping, block_x, block_y, block, (tx, ty))
             for ty in range(block_y) for tx in range(block_x)]
    cells = [(r, c) for r, c in cells if r < M and c < N]
    if cells:
        rows, cols = [r for r, _ in cells], [c for _, c in cells]
        fig.add_shape(type="rect", x0=min(cols) - 0.5, x1=max(cols) + 0.5, y0=min(rows) - 0.5,
                      y1=max(rows) + 0.5, line=dict(color="#333", width=2, dash="dash"))

    # the outlined warp
    lanes = [(r, c) for r, c in warp_elements(mapping, block_x, block_y, block, warp) if r < M and c < N]
    for r0, c0, r1, c1 in _runs(lanes):
        fig.add_shape(type="rect", x0=c0 - 0.5, x1=c1 + 0.5, y0=r0 - 0.5, y1=r1 + 0.5,
                      line=dict(color=_WARP, width=3))
    fig.add_trace(go.Scatter(
        name="warp", x=[c for _, c in lanes], y=[r for r, _ in lanes], mode="markers",
        marker=dict(color=_WARP, size=4), customdata=list(range(len(lanes))),
        hovertemplate=f"warp {warp} of block {block}, lane %{{customdata}}<extra></extra>"))

    n_rows = len({r for r, _ in lanes})
    n_cols = len({c for _, c in lanes})
    from gemm_course.display.plots import SEP, fit_top

    # what the colours mean: one "English · 中文" line, the subtitle (a caption under the plot in the book)
    en_what, zh_what = {"cols": ("column", "列"), "rows": ("row", "行")}[mapping]
    key = (f"threadIdx.x → {en_what} of C; blockDim = ({block_x}, {block_y}); red: warp {warp} of block {block}, "
           f"{len(lanes)} elements in {n_rows} row(s) × {n_cols} column(s)" + SEP +
           f"threadIdx.x 对应 C 的{zh_what}；blockDim = ({block_x}, {block_y})；红色：线程块 {block} 的 {warp} 号线程束，"
           f"{len(lanes)} 个元素，{n_rows} 行 × {n_cols} 列")
    fig.update_xaxes(title="column of C (n) · C 的列号", range=[-0.5, N - 0.5], showgrid=False,
                     zeroline=False, constrain="domain")
    fig.update_yaxes(title="row of C (m) · C 的行号", autorange="reversed", scaleanchor="x",
                     scaleratio=1, showgrid=False, zeroline=False)
    title = f'Level 1, mapping="{mapping}" · 第 1 级，mapping="{mapping}"'
    return fit_top(_base_layout(fig, title, 600), key)


# --- the memory hierarchy --------------------------------------------------------------------------

def _bytes_label(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def memory_hierarchy_figure(provenance: Optional[Mapping[str, Any]] = None) -> go.Figure:
    """How much data each level of the memory hierarchy holds on a whole GPU (log scale).

    Registers and shared memory are per SM (from the architecture limits in ``models``) times
    the SM count; L2 and device memory are what the GPU reported. ``provenance`` is the
    provenance of a recorded result file (default: the first shipped one).
    """
    if provenance is None:
        from gemm_course.measure import results

        provenance = results.load(results.recorded_files()[0])["provenance"]
    arch = "sm_" + str(provenance["compute_capability"]).replace(".", "")
    lim = models.arch_limits(arch)
    sms = int(provenance["sm_count"])
    per_sm_regs = lim.registers_per_sm * 4
    levels = [  # (name, total bytes, per-SM note, who shares it)
        ("registers · 寄存器", per_sm_regs * sms, f"{_bytes_label(per_sm_regs)} per SM · 每个 SM",
         "one thread · 单个线程私有"),
        ("shared memory · 共享内存", lim.max_shared_per_sm * sms,
         f"up to {_bytes_label(lim.max_shared_per_sm)} per SM · 每个 SM 最多",
         "one thread block · 线程块内共享"),
        ("L2 cache · L2 缓存", int(provenance["l2_bytes"]), "one for the GPU · 全 GPU 一份",
         "all SMs · 所有 SM 共享"),
        ("HBM (global memory) · HBM（全局内存）", int(provenance["memory_bytes"]),
         "device memory · 显存", "all SMs, all kernels · 所有 SM 与内核"),
    ]
    fig = go.Figure(go.Bar(
        name="capacity", orientation="h", y=[lv[0] for lv in levels], x=[lv[1] for lv in levels],
        marker_color=["#2ca02c", "#1f77b4", "#ff7f0e", "#7f7f7f"],
        text=[f"{_bytes_label(lv[1])} ({lv[2]})" for lv in levels], textposition="auto",
        customdata=[lv[3] for lv in levels],
        hovertemplate="%{y}: %{text}<br>shared by · 共享范围: %{customdata}<extra></extra>"))
    ticks = [10 ** e for e in range(6, 13)]
    fig.update_xaxes(type="log", range=[6, math.log10(3 * levels[-1][1])], tickvals=ticks,
                     ticktext=["1 MB", "10 MB", "100 MB", "1 GB", "10 GB", "100 GB", "1 TB"], title="capacity on the whole GPU (bytes, log scale from 1 MB) · 全 GPU 容量（字节，对数坐标，从 1 MB 起）")
    fig.update_yaxes(autorange="reversed", title=None)  # no empty title: it would keep a line of space a phone needs
    from gemm_course.display.plots import fit_top

    fig = _base_layout(fig, "The memory hierarchy · 存储层次", 380)
    # the GPU and the reading order as the subtitle (a caption under the plot in the book), and the labels'
    # own left margin (fit_left): a fixed 260 px one left a phone's plot 50 px wide
    fit_top(fig, f"{provenance['gpu']} ({arch}, {sms} SMs); faster and closer to the arithmetic at the top · "
                 f"{provenance['gpu']}（{arch}，{sms} 个 SM）；越靠上越快、离运算单元越近")
    fig.update_layout(margin=dict(b=60), height=fig.layout.height + 20)
    return fig


# --- tables ----------------------------------------------------------------------------------------

def table(header: Sequence[str], rows: Sequence[Sequence[Any]]):
    """A small HTML table (numbers right-aligned, unbroken) for Jupyter, Colab and the book."""
    from IPython.display import HTML

    from gemm_course.bilingual.language import split

    def cell(tag: str, v: Any) -> str:
        numeric = isinstance(v, (int, float)) or str(v)[:1].isdigit()
        align = ' style="text-align:right;white-space:nowrap"' if numeric else ""
        return f"<{tag}{align}>{split(str(v))}</{tag}>"  # "English · 中文" follows the book's switch

    head = "".join(f"<th>{split(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(cell("td", v) for v in r) + "</tr>" for r in rows)
    return HTML(f"<table class='gemm-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def show_rows(rows: list[dict[str, str]]) -> Any:
    """Display rows of `size_rows` or `ladder_rows` as a table (TFLOPS, % of cuBLAS in brackets), with a
    caption that says what the cells are and where they were recorded."""
    from IPython.display import HTML

    from gemm_course.bilingual.text import text
    from gemm_course.measure import results

    provs = [results.recorded(r["level · 级别"])[0]["provenance"] for r in rows if results.recorded(r["level · 级别"])]
    where = "; ".join(sorted({f"{p['gpu']}, {p['date'][:10]}" for p in provs}))
    caption = text(f"Each cell: TFLOPS, and in brackets the fraction of cuBLAS measured in the same run. "
                   f"Recorded on {where}.", f"每格：TFLOPS，括号内为同一次运行中 cuBLAS 的百分比。实测于 {where}。")
    caption = f"<p class='gemm-caption'>{caption.html()}</p>"
    return HTML(table(list(rows[0]), [list(r.values()) for r in rows]).data + caption)


# --- Level 8: block tile → warp tile → thread tile -----------------------------------------------

def warp_tile_owner(row: int, col: int, BN: int = 128, WM: int = 64, WN: int = 32) -> tuple[int, int]:
    """(warp, lane) of Level 8's kernel that computes element (row, col) of a BM×BN block tile.

    Warps tile the block row by row (BN/WN warps per row of warp tiles); inside a WM×WN warp tile the
    lanes form an 8 (m) × 4 (n) grid, lane = 4·lm + ln, and each lane owns 4×4 sub-tiles repeated
    every 32 rows and every 16 columns (as in ``08_warp_tiling.cu``).
    """
    warp = (row // WM) * (BN // WN) + col // WN
    r, c = row % WM, col % WN
    lm, ln = (r % 32) // 4, (c % 16) // 4
    return warp, 4 * lm + ln


def warp_tiling_figure(BM: int = 128, BN: int = 128, WM: int = 64, WN: int = 32, lane: int = 5) -> go.Figure:
    """Level 8's tile hierarchy in two panels.

    Left, trace "warps": the BM×BN block tile, each element coloured by the warp that computes it
    (z = warp index). Right, trace "lanes": warp 0's WM×WN tile, z = the lane that computes each
    element; the chosen lane's (4·WM/32)×(4·WN/16) elements, 4×4 sub-tiles spread every 32 rows and
    16 columns, are outlined and form the trace "lane" (x = columns, y = rows).
    """
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    pastel = qualitative.Pastel

    if WM % 32 or WN % 16 or BM % WM or BN % WN:
        raise ValueError(f"need WM a multiple of 32, WN of 16, BM of WM and BN of WN; got "
                         f"BM={BM}, BN={BN}, WM={WM}, WN={WN}")
    if not 0 <= lane < WARP_SIZE:
        raise ValueError(f"lane must be in 0..31, not {lane}")
    warps = (BM // WM) * (BN // WN)
    TM, TN = 4 * WM // 32, 4 * WN // 16
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.14, subplot_titles=(
        f"block tile {BM}×{BN}: {warps} warps of {WM}×{WN} · 线程块分块：{warps} 个线程束",
        f"warp 0: 32 lanes, {TM}×{TN} each · 0 号线程束：32 个线程，各 {TM}×{TN}"))
    wz = [[warp_tile_owner(r, c, BN, WM, WN)[0] for c in range(BN)] for r in range(BM)]
    fig.add_trace(go.Heatmap(
        name="warps", z=wz, zmin=0, zmax=max(warps, 2) - 1,
        colorscale=_discrete_scale([pastel[w % len(pastel)] for w in range(max(warps, 2))]),
        showscale=False, hovertemplate="C[%{y},%{x}] of the block tile: warp %{z}<extra></extra>"), 1, 1)
    for w in range(warps):
        r0, c0 = (w // (BN // WN)) * WM, (w % (BN // WN)) * WN
        fig.add_annotation(text=f"warp {w}", x=c0 + WN / 2 - 0.5, y=r0 + WM / 2 - 0.5, showarrow=False,
                           font=dict(size=11, color="#333"), row=1, col=1)
    lz = [[warp_tile_owner(r, c, BN, WM, WN)[1] for c in range(WN)] for r in range(WM)]
    fig.add_trace(go.Heatmap(
        name="lanes", z=lz, zmin=0, zmax=31, colorscale="Viridis", showscale=False, xgap=1, ygap=1,
        hovertemplate="C[%{y},%{x}] of warp 0's tile: lane %{z}<extra></extra>"), 1, 2)
    mine = [(r, c) for r in range(WM) for c in range(WN) if lz[r][c] == lane]
    lm, ln = lane // 4, lane % 4
    for wi in range(WM // 32):
        for wj in range(WN // 16):
            y0, x0 = wi * 32 + lm * 4, wj * 16 + ln * 4
            fig.add_shape(type="rect", x0=x0 - 0.5, x1=x0 + 3.5, y0=y0 - 0.5, y1=y0 + 3.5,
                          line=dict(color=_HIT, width=2), row=1, col=2)
    fig.add_trace(go.Scatter(name="lane", x=[c for _, c in mine], y=[r for r, _ in mine], mode="markers",
                             marker=dict(color=_HIT, size=4),
                             hovertemplate=f"lane {lane}: C[%{{y}},%{{x}}]<extra></extra>"), 1, 2)
    fig.update_xaxes(title="column n · 列", showgrid=False, zeroline=False)
    fig.update_yaxes(title="row m · 行", autorange="reversed", showgrid=False, zeroline=False)
    fig.update_yaxes(scaleanchor="x", row=1, col=1)
    fig.update_yaxes(scaleanchor="x2", row=1, col=2)
    return _panel_layout(fig, f"Level 8: block → warp → thread tiles; red: lane {lane} · "
                              f"第 8 级：线程块 → 线程束 → 线程分块；红框：{lane} 号线程", 410)


# --- Level 12: one GEMM over several GPUs --------------------------------------------------------

def multigpu_split_figure(pr: int = 2, pc: int = 4, panel: int = 0) -> go.Figure:
    """The two ways Level 12 splits C = A·B over P = pr·pc GPUs, side by side.

    Left, trace "row split": C (and A) cut into P row blocks, z = the GPU that owns each; every GPU
    also holds all of B. Right, trace "SUMMA": C as a pr × pc grid of blocks, z = the GPU (rank
    i·pc + j, as in ``gemm_course.multigpu.schemes.summa``) that owns block (i, j) of A, B and C. For k-panel
    `panel`, arrows show the traffic: in every grid row the owner of that panel of A broadcasts it
    to the pr·(pc−1) others along the row (blue), and in every grid column the owner of the panel of
    B broadcasts it down the column (red), pc·(pr−1) arrows; each arrow is an annotation whose
    ``name`` is "A" or "B".
    """
    from plotly.subplots import make_subplots

    if pr < 1 or pc < 1:
        raise ValueError(f"need a grid of at least 1×1 GPUs, not {pr}×{pc}")
    P = pr * pc
    L = pr * pc // math.gcd(pr, pc)
    if not 0 <= panel < L:
        raise ValueError(f"a {pr}×{pc} grid has {L} k-panels: panel must be in 0..{L - 1}")
    a_owner, b_owner = panel // (L // pc), panel // (L // pr)
    from plotly.colors import qualitative

    pastel = qualitative.Pastel
    scale = _discrete_scale([pastel[g % len(pastel)] for g in range(max(P, 2))])
    fig = make_subplots(rows=1, cols=2, column_widths=[0.35, 0.65], horizontal_spacing=0.14, subplot_titles=(
        "row split: every GPU holds all of B · 按行划分：每个 GPU 持有整个 B",
        f"SUMMA on {pr}×{pc}: panel {panel} of A (blue) and B (red) · "
        f"SUMMA {pr}×{pc}：第 {panel} 个面板的广播"))
    fig.add_trace(go.Heatmap(
        name="row split", z=[[g] for g in range(P)], zmin=0, zmax=max(P, 2) - 1, colorscale=scale,
        showscale=False, xgap=2, ygap=2, hovertemplate="rows of C on GPU %{z}<extra></extra>"), 1, 1)
    for g in range(P):
        fig.add_annotation(text=f"GPU {g}", x=0, y=g, showarrow=False, font=dict(size=12, color="#333"),
                           row=1, col=1)
    fig.add_trace(go.Heatmap(
        name="SUMMA", z=[[i * pc + j for j in range(pc)] for i in range(pr)], zmin=0, zmax=max(P, 2) - 1,
        colorscale=scale, showscale=False, xgap=2, ygap=2,
        hovertemplate="block (%{y}, %{x}) of A, B, C: GPU %{z}<extra></extra>"), 1, 2)
    for i in range(pr):
        for j in range(pc):
            fig.add_annotation(text=f"GPU {i * pc + j}<br>({i}, {j})", x=j, y=i, showarrow=False,
                               font=dict(size=12, color="#333"), row=1, col=2)
    blue, red = "#1f77b4", _HIT
    for i in range(pr):  # A's panel along each grid row
        for j in range(pc):
            if j != a_owner:
                fig.add_annotation(name="A", x=j, y=i - 0.2, ax=a_owner, ay=i - 0.2, xref="x2", yref="y2",
                                   axref="x2", ayref="y2", text="", showarrow=True, arrowhead=2,
                                   arrowwidth=2, arrowcolor=blue)
    for j in range(pc):  # B's panel down each grid column
        for i in range(pr):
            if i != b_owner:
                fig.add_annotation(name="B", x=j + 0.25, y=i, ax=j + 0.25, ay=b_owner, xref="x2", yref="y2",
                                   axref="x2", ayref="y2", text="", showarrow=True, arrowhead=2,
                                   arrowwidth=2, arrowcolor=red)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_xaxes(title="grid column j · 列", row=1, col=2)
    fig.update_yaxes(autorange="reversed", showgrid=False, zeroline=False, showticklabels=False)
    fig.update_yaxes(title="grid row i · 行", row=1, col=2)
    return _panel_layout(fig, f"one GEMM on {P} GPUs · {P} 个 GPU 上的一个 GEMM", 310)


# --- Level 10: the m16n8 accumulator layout and the 16-byte-chunk swizzle --------------------------

def mma_accumulator_owner(row: int, col: int) -> tuple[int, int]:
    """(lane, register) holding element (row, col) of the 16×8 fp32 accumulator of mma.sync m16n8k16.

    Lane = 4·(row mod 8) + col // 2 (groups of 4 lanes share a row); register = 2·(row // 8) + col mod 2,
    so lane l holds rows l // 4 and l // 4 + 8, columns 2·(l mod 4) and the next one (as stored by
    ``10_mma_pipeline.cu``).
    """
    if not (0 <= row < 16 and 0 <= col < 8):
        raise ValueError(f"the m16n8 accumulator is 16×8; ({row}, {col}) is outside it")
    return 4 * (row % 8) + col // 2, 2 * (row // 8) + col % 2


def mma_accumulator_figure(lane: int = 5) -> go.Figure:
    """The 16×8 accumulator tile of one mma.sync m16n8k16, each cell labelled with its lane and register.

    One heatmap trace "accumulator": z = the register (0–3) that holds the element, text "lane/register";
    the four elements of `lane` are outlined (one scatter trace named "lane").
    """
    if not 0 <= lane < WARP_SIZE:
        raise ValueError(f"a warp has lanes 0..{WARP_SIZE - 1}, not {lane}")
    owners = [[mma_accumulator_owner(r, c) for c in range(8)] for r in range(16)]
    fig = go.Figure(go.Heatmap(
        name="accumulator", z=[[reg for _, reg in row] for row in owners], zmin=0, zmax=3,
        colorscale=_discrete_scale(_BLOCK_FILLS), showscale=False, xgap=2, ygap=2,
        text=[[f"{ln}/{reg}" for ln, reg in row] for row in owners], texttemplate="%{text}",
        hovertemplate="C[%{y}, %{x}]: lane / register %{text}<extra></extra>"))
    mine = [(r, c) for r in range(16) for c in range(8) if owners[r][c][0] == lane]
    fig.add_trace(go.Scatter(name="lane", x=[c for _, c in mine], y=[r for r, _ in mine], mode="markers",
                             marker=dict(symbol="square-open", size=26, color=_HIT, line=dict(width=3)),
                             hoverinfo="skip", showlegend=False))
    fig.update_xaxes(title="column n · 列", dtick=1, showgrid=False, zeroline=False)
    fig.update_yaxes(title="row m · 行", dtick=1, autorange="reversed", showgrid=False, zeroline=False)
    return _base_layout(fig, f"m16n8 accumulator: lane/register, lane {lane} outlined · "
                             f"m16n8 累加器：线程/寄存器，框出线程 {lane}", 560)


# Level 10: a stage's A tile is 128×32 halves, its B tile 32×128. "sw128": Level 11's 128-byte rows
# (64 halves), the swizzle that TMA writes and wgmma reads.
_CHUNKS_PER_ROW = {"A": 4, "B": 16, "sw128": 8}
_OPERAND_NAMES = {"A": "A", "B": "B", "sw128": "128-byte swizzle (Level 11)"}


def chunk_position(operand: str, row: int, chunk: int, swizzled: bool = True) -> int:
    """Where chunk `chunk` (16 bytes) of row `row` lies in a shared tile, in chunks from the start.

    Level 10: A rows hold 4 chunks and are swizzled chunk ^ ((row // 2) mod 4); B rows hold 16 and use
    chunk ^ (row mod 8), as ``swizzle_a`` / ``swizzle_b`` in ``10_mma_pipeline.cu``. "sw128": Level 11's
    128-byte rows of 8 chunks, chunk ^ (row mod 8), the hardware's 128-byte swizzle.
    """
    if operand not in _CHUNKS_PER_ROW:
        raise ValueError(f"operand must be one of {', '.join(map(repr, _CHUNKS_PER_ROW))}, not {operand!r}")
    per_row = _CHUNKS_PER_ROW[operand]
    if not 0 <= chunk < per_row:
        raise ValueError(f"a row of {operand} has chunks 0..{per_row - 1}, not {chunk}")
    if swizzled:
        chunk ^= ((row // 2) % 4) if operand == "A" else (row % 8)
    return row * per_row + chunk


def ldmatrix_ways(operand: str, chunk: int = 0, first_row: int = 0, swizzled: bool = True) -> int:
    """The bank-conflict degree of one 8×8 matrix of an ldmatrix: chunk `chunk` of 8 consecutive rows.

    Shared memory serves 128 bytes (32 banks of 4 bytes) per pass, that is 8 chunk slots of 16 bytes;
    the degree is the largest number of the 8 chunks that fall in the same slot (1 = conflict-free).
    """
    slots = [chunk_position(operand, first_row + r, chunk, swizzled) % 8 for r in range(8)]
    return max(slots.count(s) for s in set(slots))


def chunk_swizzle_figure(operand: str = "B", chunk: int = 0) -> go.Figure:
    """Level 10's shared tile of A or B, first 8 rows, without and with the XOR swizzle, side by side.

    Traces "plain" and "swizzled": z[r][p] = the logical chunk stored at physical chunk p of row r, and
    text = its 16-byte bank slot (p mod 8). Scatter traces "read plain" / "read swizzled" mark where
    the 8 copies of logical chunk `chunk` lie, the 8 addresses one ldmatrix matrix reads; the subplot
    titles give the conflict degree of that read (``ldmatrix_ways``).
    """
    from plotly.subplots import make_subplots

    per_row = _CHUNKS_PER_ROW.get(operand)
    if per_row is None:
        raise ValueError(f"operand must be one of {', '.join(map(repr, _CHUNKS_PER_ROW))}, not {operand!r}")
    ways = {s: ldmatrix_ways(operand, chunk, 0, s) for s in (False, True)}
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14, subplot_titles=[
        f"{'swizzled' if s else 'plain'}: {ways[s]}-way · {'异或重排' if s else '不重排'}：{ways[s]} 路"
        for s in (False, True)])
    for col, s in ((1, False), (2, True)):
        z = [[0] * per_row for _ in range(8)]
        for r in range(8):
            for c in range(per_row):
                z[r][chunk_position(operand, r, c, s) - r * per_row] = c
        name = "swizzled" if s else "plain"
        fig.add_trace(go.Heatmap(
            name=name, z=z, zmin=0, zmax=per_row - 1, colorscale="Blues", showscale=False, xgap=2, ygap=2,
            text=[[str(p % 8) for p in range(per_row)] for _ in range(8)], texttemplate="%{text}",
            hovertemplate="row %{y}, position %{x}: chunk %{z}, slot %{text}<extra></extra>"), 1, col)
        read = [chunk_position(operand, r, chunk, s) - r * per_row for r in range(8)]
        fig.add_trace(go.Scatter(name=f"read {name}", x=read, y=list(range(8)), mode="markers",
                                 marker=dict(symbol="square-open", size=22, color=_HIT, line=dict(width=3)),
                                 hoverinfo="skip", showlegend=False), 1, col)
    fig.update_xaxes(title="16-byte position in the row · 行内 16 字节位置", dtick=1, showgrid=False,
                     zeroline=False)
    fig.update_yaxes(title="row · 行", dtick=1, autorange="reversed", showgrid=False, zeroline=False)
    name = _OPERAND_NAMES[operand]
    return _panel_layout(fig, f"{name} tile: where chunk {chunk} of 8 rows lies (text: bank slot) · "
                              f"{name} 分块：8 行的第 {chunk} 块所在位置（数字：存储体槽）", 310)


def producer_consumer_schedule(stages: int = 4, k_tiles: int = 10, copy_time: int = 3,
                               mma_time: int = 1) -> list[dict[str, Any]]:
    """A schematic schedule of Level 11's warp-specialized main loop (unit times, not measurements).

    The producer issues the copy of k-tile t into stage t mod `stages` as soon as that stage is
    empty (its previous k-tile has been consumed); a copy takes `copy_time`, and several are in flight
    at once. The consumers multiply k-tile t once it has landed and once they finished t − 1
    (`mma_time` each), then hand its stage back. Returns one row per k-tile: stage, issue, landed,
    mma start and end.
    """
    rows: list[dict[str, Any]] = []
    for t in range(k_tiles):
        freed = rows[t - stages]["mma_end"] if t >= stages else 0
        issue = max(freed, rows[t - 1]["issue"] if t else 0)
        landed = issue + copy_time
        start = max(landed, rows[t - 1]["mma_end"] if t else 0)
        rows.append({"k_tile": t, "stage": t % stages, "issue": issue, "landed": landed,
                     "mma_start": start, "mma_end": start + mma_time})
    return rows


PRODUCER_CONSUMER_LANES = ("TMA (producer) · TMA（生产者）", "wgmma (consumers) · wgmma（消费者）")  # the chart's two lanes


def producer_consumer_figure(stages: int = 4, k_tiles: int = 10) -> go.Figure:
    """Gantt chart of ``producer_consumer_schedule``: TMA copies in flight above, wgmma below,
    coloured by stage; with 1 stage the consumers wait for every copy, with enough they never do."""
    rows = producer_consumer_schedule(stages, k_tiles)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    fig = go.Figure()
    for r in rows:
        color = colors[r["stage"] % len(colors)]
        for lane, x0, x1, label in ((PRODUCER_CONSUMER_LANES[0], r["issue"], r["landed"], "copy"),
                                    (PRODUCER_CONSUMER_LANES[1], r["mma_start"], r["mma_end"], "mma")):
            fig.add_trace(go.Bar(
                name=f"stage {r['stage']}", y=[lane], x=[x1 - x0], base=[x0], orientation="h",
                marker=dict(color=color, line=dict(color="white", width=1)), showlegend=False,
                text=[f"k{r['k_tile']}"], textposition="inside", insidetextanchor="middle",
                hovertemplate=f"{label} of k-tile {r['k_tile']} in stage {r['stage']}: "
                              f"{x0}–{x1}<extra></extra>"))
    busy = sum(r["mma_end"] - r["mma_start"] for r in rows) / rows[-1]["mma_end"]
    fig.update_layout(barmode="overlay", bargap=0.45)
    fig.update_xaxes(title="time (schematic units: a copy takes 3, a k-tile of wgmma 1) · 时间（示意单位：拷贝 3，"
                           "一个 k 分块的 wgmma 1）")
    # Each lane named above its bars, at the left edge, not beside them as a tick label: on a phone the tick
    # labels took 40% of the width from the plot.
    fig.update_yaxes(showticklabels=False, categoryorder="array", categoryarray=list(PRODUCER_CONSUMER_LANES)[::-1])
    for lane in PRODUCER_CONSUMER_LANES:
        fig.add_annotation(text=lane, xref="paper", x=0, xanchor="left", y=lane, yanchor="bottom", yshift=26,
                           showarrow=False, font=dict(size=12, color="#333"))
    fig = _base_layout(fig, f"{stages} stage{'' if stages == 1 else 's'}: tensor cores busy {busy:.0%} of the time · "
                            f"{stages} 个流水级：张量核心忙碌时间占 {busy:.0%}", 300)
    fig.update_layout(margin=dict(l=20))
    return fig


# --- Level 0: which thread of a launch handles which element ---------------------------------------

def launch_map(rows: int, cols: int, block_x: int, block_y: int = 1) -> list[dict[str, Any]]:
    """Every thread of the launch that covers a rows×cols array (one element per thread, threadIdx.x
    along the columns, as primer.WHO_AM_I does it), in launch order: blockIdx, threadIdx, the
    (row, col) it computes, and whether it passes the `if (row < rows && col < cols)` guard."""
    grid_x, grid_y = ceil_div(cols, block_x), ceil_div(rows, block_y)
    return [{"block": (bx, by), "thread": (tx, ty), "row": by * block_y + ty, "col": bx * block_x + tx,
             "works": by * block_y + ty < rows and bx * block_x + tx < cols}
            for by in range(grid_y) for bx in range(grid_x) for ty in range(block_y) for tx in range(block_x)]


def launch_map_figure(rows: int = 1, cols: int = 10, block_x: int = 4, block_y: int = 1) -> go.Figure:
    """The threads of a launch laid over the array they cover: one cell per thread, coloured by its
    block and labelled with its threadIdx; threads past the edge of the array (the rounded-up part of
    the grid, stopped by the guard) are grey with a cross. rows=1 draws a 1-D launch. The dashed frame
    is the array. The heatmap trace "threads" has z = -1 for a guarded-off thread, else the block colour."""
    threads = launch_map(rows, cols, block_x, block_y)
    grid_x, grid_y = ceil_div(cols, block_x), ceil_div(rows, block_y)
    height, width = grid_y * block_y, grid_x * block_x
    z = [[0] * width for _ in range(height)]
    text = [[""] * width for _ in range(height)]
    hover = [[""] * width for _ in range(height)]
    one_d = rows == 1 and block_y == 1
    for t in threads:
        (bx, by), (tx, ty), r, c = t["block"], t["thread"], t["row"], t["col"]
        z[r][c] = (bx % 2) + 2 * (by % 2) if t["works"] else -1
        text[r][c] = (f"{tx}" if one_d else f"{tx},{ty}") if t["works"] else "×"
        where = (f"element {c}" if one_d else f"element ({r}, {c})") if t["works"] else \
            "past the edge: the guard stops it · 越界：被边界判断挡住"
        hover[r][c] = f"blockIdx = ({bx}, {by}), threadIdx = ({tx}, {ty})<br>{where}"
    fig = go.Figure(go.Heatmap(
        name="threads", z=z, x=list(range(width)), y=list(range(height)), zmin=-1, zmax=3,
        colorscale=_discrete_scale(("#f4f4f4",) + _BLOCK_FILLS), showscale=False, xgap=2, ygap=2,
        text=text, texttemplate="%{text}", textfont=dict(size=11), customdata=hover,
        hovertemplate="%{customdata}<extra></extra>"))
    fig.add_shape(type="rect", x0=-0.5, x1=cols - 0.5, y0=-0.5, y1=rows - 0.5,
                  line=dict(color="#333", width=2, dash="dash"))
    idle = sum(not t["works"] for t in threads)
    dims = (f"gridDim = {grid_x}, blockDim = {block_x}" if one_d else
            f"gridDim = ({grid_x}, {grid_y}), blockDim = ({block_x}, {block_y})")
    size = f"n = {cols}" if one_d else f"{rows}×{cols}"
    from gemm_course.display.plots import NARROW_PX, SEP, wrap

    fig.add_annotation(  # one language a line, wrapped to a phone's width: the book's switch shows one half
        text=wrap(f"{dims}: {len(threads)} threads for {size} elements; colour = block, label = threadIdx, "
                  f"× = {idle} idle" + SEP + f"{len(threads)} 个线程计算 {size} 个元素；颜色 = 线程块，"
                  f"数字 = threadIdx，× = {idle} 个空闲线程", NARROW_PX - 40, 11),
        xref="paper", yref="paper", x=0, y=1.02, yanchor="bottom", showarrow=False, xanchor="left",
        align="left", font=dict(size=11, color="#444"))
    fig.update_xaxes(title=("element i · 元素 i" if one_d else "column · 列"), range=[-0.5, width - 0.5],
                     showgrid=False, zeroline=False, dtick=1 if width <= 24 else None, constrain="domain")
    # square cells in 2-D; a 1-D launch's one row of cells fills the plot's height (square cells left it a
    # strip as tall as one cell is wide: 64 px on a desktop)
    fig.update_yaxes(title=None if one_d else "row · 行", autorange="reversed",
                     showgrid=False, zeroline=False, visible=not one_d)
    if not one_d:
        fig.update_yaxes(scaleanchor="x", scaleratio=1)
    title = ("A 1-D launch · 一维启动" if one_d else "A 2-D launch · 二维启动")
    plot_h = LAUNCH_1D_PLOT_PX if one_d else 30 + 34 * height
    fig = _base_layout(fig, title, 300)
    # above the plot: the title (fit_top's margin) and the note's lines in the longer of its two languages
    from gemm_course.display.plots import _place_title, n_lines, pick

    note = fig.layout.annotations[0].text
    t = (fig.layout.margin.t or 70) + int(max(n_lines(pick(note, "en")), n_lines(pick(note, "zh"))) * 11 * 1.35) + 10
    # below: the tick labels and the axis title's lines (plotly's automargin would take them from the plot)
    xtitle = fig.layout.xaxis.title.text or ""
    b = max(fig.layout.margin.b or 40, int(12 * 1.8 + n_lines(xtitle) * 14 * 1.3 + 14))
    fig.update_layout(margin=dict(t=t, b=b), height=t + plot_h + b)
    return _place_title(fig)


LAUNCH_1D_PLOT_PX = 150  # the 1-D launch map's plot area (a usable height: tests/browser_check.py's minimum)


# --- Level 11 step 7: whole pairs of tiles against stream-K's even shares ---------------------------

def stream_k_figure(pairs: int = 10, tiles_k: int = 8, clusters: int = 4) -> go.Figure:
    """Which cluster computes which k-tiles of which pair of tiles, in the order it computes them (time in
    k-tiles, as a model: every k-tile takes the same time, a fixup none): above, step 6's whole pairs round
    robin; below, step 7's schedule (models.stream_k_segments), the same arithmetic as its kernel. A bar is
    one segment, coloured by its pair; a pair cut between clusters is labelled with its k-tiles."""
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    palette = qualitative.Pastel
    whole = [[(p, 0, tiles_k) for p in range(c, pairs, clusters)] for c in range(clusters)]
    streamed = models.stream_k_segments(pairs, tiles_k, clusters)
    busiest = [max(sum(ke - kb for _, kb, ke in s) for s in schedule) for schedule in (whole, streamed)]
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2, subplot_titles=(
        f"step 6, whole pairs: the busiest cluster computes {busiest[0]} k-tiles · "
        f"第 6 步，整块对：最忙的簇计算 {busiest[0]} 个 k 分块",
        f"step 7, stream-K: {busiest[1]} k-tiles · 第 7 步，stream-K：{busiest[1]} 个 k 分块"))
    for row, schedule in enumerate((whole, streamed), start=1):
        for c, segments in enumerate(schedule):
            start = 0
            for p, kb, ke in segments:
                split = ke - kb < tiles_k
                fig.add_trace(go.Bar(
                    y=[f"cluster {c} · 簇 {c}"], x=[ke - kb], base=[start], orientation="h", showlegend=False,
                    marker=dict(color=palette[p % len(palette)], line=dict(color="#333" if split else "white",
                                                                       width=2 if split else 1)),
                    text=[f"p{p} k{kb}–{ke - 1}" if split else f"p{p}"], textposition="inside",
                    insidetextanchor="middle", hovertemplate=f"pair {p}, k-tiles {kb}–{ke - 1}<extra></extra>"),
                    row, 1)
                start += ke - kb
        fig.update_yaxes(autorange="reversed", row=row, col=1)
        fig.update_xaxes(range=[0, busiest[0] + 0.5], title="k-tiles computed (time, as a model) · 已计算的 k 分块"
                                                            "（时间，模型）", row=row, col=1)
    fig.update_layout(barmode="overlay")
    return _panel_layout(fig, f"{pairs} pairs of tiles × {tiles_k} k-tiles on {clusters} clusters · "
                              f"{clusters} 个簇上的 {pairs} 个分块对 × {tiles_k} 个 k 分块", 40 * clusters + 60)
