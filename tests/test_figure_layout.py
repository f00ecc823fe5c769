"""Layout of the course's plotly figures: nothing overlaps, at desktop width and on a 400 px screen.

Plotly neither wraps text nor reflows a layout for a narrow screen, so the figures are laid out for
plots.NARROW_PX (400 px). These checks are a geometric estimate, not a measurement of the rendered
figure: text widths come from plots.text_px (Latin characters 0.6 em, CJK characters 1 em), line
heights from the font size. No GPU: every figure here draws recorded numbers.
"""
from __future__ import annotations

import pytest

from gemm_course.display import diagrams, notebook, plots
from gemm_course.display.plots import NARROW_PX, SEP, n_lines, text_px

from conftest import show_into


def _shown(monkeypatch, fn, *args, **kw):
    figs = []
    show_into(monkeypatch, figs.append)
    fn(*args, **kw)
    return figs


def _lines(text):
    return [line for line in (text or "").split("<br>")]


def _check_top(fig):
    """Title and subtitle lines fit the narrow width; the top margin holds all their lines."""
    title, sub = fig.layout.title.text or "", fig.layout.title.subtitle.text or ""
    for line in _lines(title):
        # (one character over is allowed: a line does not start with CJK punctuation)
        assert text_px(line, plots.TITLE_SIZE) <= NARROW_PX - 30 + plots.TITLE_SIZE or " " not in line.strip(), line
    for line in _lines(sub):
        assert text_px(line, plots.SUBTITLE_SIZE) <= NARROW_PX - 30 + plots.SUBTITLE_SIZE or " " not in line.strip(), line
    need = n_lines(title) * plots.TITLE_SIZE * 1.2 + n_lines(sub) * plots.SUBTITLE_SIZE * 1.2 + 12
    assert fig.layout.margin.t >= need
    # no provenance line left as an annotation above the plot, where it ran off the right edge
    assert not [a for a in fig.layout.annotations if a.yref == "paper" and (a.y or 0) > 1]


def _check_bottom(fig):
    """A horizontal legend lies below the x tick labels and the x axis title, and the bottom margin
    holds every legend row at the narrow width."""
    rows = plots.legend_rows(fig)
    if not rows:
        return
    t, b = fig.layout.margin.t, fig.layout.margin.b
    plot_h = fig.layout.height - t - b
    legend_top_px = -fig.layout.legend.y * plot_h  # px below the plot area
    assert fig.layout.legend.yanchor == "top" and fig.layout.legend.orientation == "h"
    ticks, _ = plots._ticks(fig)
    xtitle = fig.layout.xaxis.title.text or ""
    assert legend_top_px >= ticks + n_lines(xtitle) * 14 * 1.2, "legend covers the tick labels or axis title"
    assert b >= legend_top_px + rows * plots.LEGEND_SIZE * 1.3, "legend rows do not fit in the bottom margin"


def _check_axes(fig):
    """No empty axis title (plotly keeps its standoff and a line of space, which pushed a phone's plot area
    below 200 px in Chinese); the x axis title's lines fit the plot's width on a narrow screen."""
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert not (axis.title and axis.title.text == ""), "an empty axis title: leave the title out"
    xtitle = (fig.layout.xaxis.title.text or "") if fig.layout.xaxis.title else ""
    room = max(NARROW_PX - (fig.layout.margin.l or 80) - (fig.layout.margin.r or 80), 160)
    for line in _lines(xtitle):
        assert text_px(line, 14) <= room + 14 or " " not in line.strip(), line


def _check(fig):
    _check_top(fig)
    _check_bottom(fig)
    _check_axes(fig)


def test_wrap_keeps_the_halves_apart():
    text = "recorded: NVIDIA H200 (sm_90), driver 580.159.04, CUDA 13.2 · 实测结果：NVIDIA H200，驱动 580"
    out = plots.wrap(text, 200, 11)
    assert SEP + "<br>" in out  # one language a line; the book's switch still splits at " · "
    en, zh = out.split(SEP, 1)
    assert en.replace("<br>", " ") == text.split(SEP)[0]
    # (a line may run one character over rather than start with CJK punctuation)
    assert all(text_px(line, 11) <= 200 + 11 for line in out.split("<br>"))
    assert not any(line.startswith(("，", "：")) for line in out.split("<br>"))
    assert plots.wrap("short", 200) == "short"


@pytest.mark.parametrize("build", [diagrams.warp_tiling_figure, diagrams.multigpu_split_figure,
                                   diagrams.chunk_swizzle_figure])
def test_panels_stack_and_their_titles_do_not_overlap(build):
    """Panels stand one above the other, each the full width (side by side, each got ~130 px on a phone);
    each panel's title lies above its own panel, below the panel above it and its axis title."""
    fig = build()
    _check_top(fig)
    t, b = fig.layout.margin.t, fig.layout.margin.b
    area = fig.layout.height - t - b
    plot_w = NARROW_PX - fig.layout.margin.l - fig.layout.margin.r
    panels = list(fig.layout.annotations[:2])
    previous_bottom = None
    for ann, (xa, ya) in zip(panels, (("xaxis", "yaxis"), ("xaxis2", "yaxis2"))):
        assert tuple(fig.layout[xa].domain) == (0, 1)
        lo, hi = fig.layout[ya].domain
        assert (hi - lo) * area >= 150  # a usable plot area on a phone
        assert ann.y == pytest.approx(hi) and ann.yanchor == "bottom" and ann.x == 0.5
        for line in _lines(ann.text):  # within the width
            assert text_px(line, ann.font.size) <= plot_w + ann.font.size, ann.text
        title_px = n_lines(ann.text) * diagrams.PANEL_TITLE_SIZE * 1.2
        if previous_bottom is not None:  # clear of the panel above, its ticks and its axis title
            ticks = 20 if fig.layout["xaxis"].showticklabels is not False else 0
            below = ticks + n_lines(fig.layout["xaxis"].title.text) * 14 * 1.2
            assert (previous_bottom - hi) * area >= title_px + below
        previous_bottom = lo
        for line in _lines(fig.layout[xa].title.text):
            assert text_px(line, 14) <= plot_w + 21
    # the top margin holds the figure title; the bottom margin the last panel's axis title
    assert t >= n_lines(fig.layout.title.text) * plots.TITLE_SIZE * 1.2 + 12
    assert b >= 20 + n_lines(fig.layout["xaxis2"].title.text) * 14 * 1.2


def test_ladder(monkeypatch):
    figs = _shown(monkeypatch, notebook.ladder)
    assert len(figs) == 2
    for fig in figs:
        _check(fig)
    bars = figs[1]  # level ids under the bars: too long side by side on a phone, so turned
    assert bars.layout.xaxis.tickangle in (-45, -90)


@pytest.mark.parametrize("call", [
    lambda: notebook.performance("08_warp_tiling"),
    lambda: notebook.compare([("08_warp_tiling", {}), ("07_vectorized", {})]),
    lambda: notebook.ffma_ceiling(),
    lambda: notebook.mma_sync_ceiling(),
    lambda: notebook.predict_vs_measure("08_warp_tiling"),
    lambda: notebook.gap_to_peak(),
    lambda: notebook.multigpu(),
    lambda: notebook.batched(),
    lambda: notebook.tuned("10_mma_pipeline"),
], ids=["performance", "compare", "ffma_ceiling", "mma_sync_ceiling", "counters", "gap_to_peak",
        "multigpu", "batched", "tuned"])
def test_recorded_figures(monkeypatch, call):
    figs = []
    show_into(monkeypatch, figs.append)
    call()
    figs = [f for f in figs if hasattr(f, "layout")]
    assert figs
    for fig in figs:
        _check(fig)
    assert any(fig.layout.title.subtitle.text for fig in figs)  # the provenance line is there


def test_roofline_and_sweep():
    from gemm_course.measure import results
    from gemm_course.models import KNOWN_GPUS

    _check(plots.roofline_figure(KNOWN_GPUS["NVIDIA H200"]))
    records = [r for r in results.recorded("08_warp_tiling") if r["level"] != "cublas"][:40]
    keys = list(records[0]["params"])
    _check(plots.sweep_figure(records, keys[0], keys[1], by=keys[2], title="sweep · 扫描",
                              subtitle="recorded: " + results.provenance_line(records[0])))


def test_figure_html_puts_the_provenance_in_a_caption(monkeypatch):
    """On the page the subtitle is a caption under the plot (its `code` as <code>), the plot keeps its
    height, and the toolbar stays off phones."""
    import json
    import re

    monkeypatch.delenv("GEMM_COURSE_LANG", raising=False)
    fig = plots.performance_figure([
        dict(level="cublas", params={}, M=1024, N=1024, K=1024, tflops=40.0, median_ms=0.05, reps=50)],
        title="TFLOPS · 算力", subtitle="recorded: H200, 2026-11-29; `python -m gemm_course record --out FILE`")
    html = plots.figure_html(fig)
    drawn = json.loads(re.search(r"var fig = (\{.*?\}), id = ", html, re.S).group(1))
    assert not (drawn["layout"]["title"].get("subtitle") or {}).get("text")
    plot_h = lambda layout: layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]  # noqa: E731
    assert plot_h(drawn["layout"]) == plot_h(fig.layout.to_plotly_json())
    caption = html.split('class="gemm-figure-caption"', 1)[1]
    assert "<code>python -m gemm_course record --out FILE</code>" in caption and "`" not in caption
    assert '<span class="lang-zh">实测记录：' in caption  # an English-only provenance line gets its Chinese start
    assert "displayModeBar: window.innerWidth < 700 ? false" in html


def test_one_language_outside_the_book(monkeypatch):
    """A notebook that chose a language (GEMM_COURSE_LANG) gets figures in that language only; an English
    " · " (no Chinese after it) is not a separator."""
    monkeypatch.setenv("GEMM_COURSE_LANG", "zh")
    fig = plots.sweep_bar_figure([dict(label="row i of A · column j of B", tflops=1.0, cublas_tflops=2.0)],
                                 title="settings · 设置")
    zh = plots.pick_figure(fig, "zh")
    assert zh.layout.title.text == "设置" and zh.data[0].name == "内核"
    assert zh.data[0].x[0] == "row i of A · column j of B"
    import json
    import re

    drawn = json.loads(re.search(r"var fig = (\{.*?\}), id = ", plots.figure_html(fig), re.S).group(1))
    assert drawn["layout"]["title"]["text"] == "设置" and drawn["data"][0]["name"] == "内核"
    assert plots.pick("%{x}<extra>kernel · 内核</extra>", "en") == "%{x}<extra>kernel</extra>"


@pytest.mark.parametrize("level", ["01_naive", "03_coalescing_banks", "10_mma_pipeline", "11_hopper_wgmma"])
def test_counter_charts_name_their_quantities_in_both_languages(monkeypatch, level):
    """measured ÷ predicted charts: every quantity's label has an English and a Chinese half (the switch
    shows one), and the bars keep at least 200 px of a 360 px phone."""
    figs = [f for f in _shown(monkeypatch, notebook.predict_vs_measure, level) if hasattr(f, "layout")]
    assert figs
    for fig in figs:
        for label in {y for t in fig.data for y in t.y}:
            assert plots._WIDE.search(plots.pick(label, "zh")) and not plots._WIDE.search(plots.pick(label, "en")), label
        assert NARROW_PX - fig.layout.margin.l - fig.layout.margin.r >= 200


@pytest.mark.parametrize("level", ["11_hopper_wgmma", "13_fp8_blockscaled"])
def test_tuned_chart_reads_in_one_language(monkeypatch, level):
    """The tuning chart in Chinese names the level, its groups and the baseline in Chinese (no label left in English
    over the bars), and each default marker shares its bar's offset group."""
    import re

    figs = [f for f in _shown(monkeypatch, notebook.tuned, level) if hasattr(f, "layout")]
    fig, = figs
    zh = plots.pick_figure(fig, "zh")
    assert level in zh.layout.title.text and re.search(r"[\u4e00-\u9fff]", zh.layout.title.text)
    assert all(re.search(r"[\u4e00-\u9fff]", t.name) for t in zh.data if t.name)
    assert not fig.layout.annotations  # the baseline is named in the legend, not written on the plot
    groups = {t.offsetgroup for t in fig.data}
    assert groups == {"0", "1"} and fig.layout.scattermode == "group"
    _check(fig)


@pytest.mark.parametrize("rows, cols, block", [(1, 10, (4, 1)), (6, 10, (4, 2))])
def test_launch_map_has_a_usable_plot_area(rows, cols, block):
    """Level 0's launch maps keep a plot area of 150 px at least (the 1-D one had 64 px: a strip of cells
    under a title and a note that took the rest), with room above it for the title and the note's lines in
    either language, and below it for the ticks and the axis title."""
    fig = diagrams.launch_map_figure(rows, cols, *block)
    t, b = fig.layout.margin.t, fig.layout.margin.b
    assert fig.layout.height - t - b >= diagrams.LAUNCH_1D_PLOT_PX
    note = fig.layout.annotations[0].text
    lines = max(n_lines(plots.pick(note, lang)) for lang in ("en", "zh"))
    assert t >= n_lines(fig.layout.title.text) * plots.TITLE_SIZE * 1.2 + lines * 11 * 1.2 + 12
    assert b >= plots.TICK_SIZE * 1.5 + n_lines(fig.layout.xaxis.title.text) * 14 * 1.2


@pytest.mark.parametrize("stages", [1, 4])
def test_producer_consumer_chart_keeps_the_width_for_its_bars(stages):
    """Level 11's schedule charts name their two lanes above the bars, not as tick labels beside them, which took
    40% of a phone's width (a plot area of 192 px at 360 px; 297 px in headless Chromium after the change)."""
    from gemm_course.display import diagrams
    from gemm_course.display.plots import NARROW_PX

    fig = diagrams.producer_consumer_figure(stages)
    assert fig.layout.yaxis.showticklabels is False
    assert [a.text for a in fig.layout.annotations] == list(diagrams.PRODUCER_CONSUMER_LANES)
    assert NARROW_PX - fig.layout.margin.l - fig.layout.margin.r >= 280
    assert fig.layout.title.text.startswith(f"{stages} stage{'' if stages == 1 else 's'}:")
