"""Plotly figure builders, and show(): the one way a figure reaches the reader.

show() emits a MIME bundle with two entries:
- application/vnd.plotly.v1+json, which JupyterLab and VS Code render natively;
- text/html, a <div> and a script that draws it with window.Plotly. In the built book the page
  carries plotly.min.js in _static (no CDN: it works offline); the script waits for it. Anywhere
  else without Plotly loaded (classic Jupyter, Colab) it loads plotly.js from the CDN first.
"""
from __future__ import annotations

import json
import re
import uuid
from typing import Any, Iterable, Mapping, Optional, Sequence

import plotly.graph_objects as go

from gemm_course.models import GpuSpec, roofline

CUBLAS_COLOR = "#222222"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")

# The config every figure is drawn with: no plotly logo; the toolbar (modebar) only while the mouse is over
# a desktop-sized chart, never on a phone, where it would sit over the title (double-click or double-tap
# still resets a zoom).
_CONFIG_JS = '{responsive: true, displaylogo: false, displayModeBar: window.innerWidth < 700 ? false : "hover"}'

_SCRIPT = """<script type="text/javascript">(function () {
  var fig = %(fig)s, id = "%(id)s", config = %(config)s;
  function draw() {  // the book's bilingual.js draws it in the reader's language and redraws it on a switch
    if (window.gemmDrawFigure) window.gemmDrawFigure(id, fig, config);
    else Plotly.newPlot(id, fig.data, fig.layout, config);
  }
  function ready() {  // bilingual.js (deferred) has run by DOMContentLoaded
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw); else draw();
  }
  if (window.Plotly) { ready(); return; }
  if (document.querySelector('script[src*="plotly.min.js"]')) {  // the book: wait for _static/plotly.min.js
    var tries = 0;
    (function wait() { if (window.Plotly) ready(); else if (tries++ < 400) setTimeout(wait, 25); })();
    return;
  }
  var s = document.createElement("script");  // a notebook front end without Plotly: fetch it
  s.src = "https://cdn.plot.ly/plotly-%(version)s.min.js";
  s.onload = draw;
  document.head.appendChild(s);
})();</script>"""

_CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef]")
_EXTRA = re.compile(r"(<extra>)(.*?)(</extra>)", re.S)
_EDGE_BR = re.compile(r"^(\s*<br>\s*)+|(\s*<br>\s*)+$")
# Captions written in English only that start with one of these get a Chinese twin of the start (the rest
# is names, versions and a command, the same in both languages).
_CAPTION_ZH = (("recorded with Nsight Compute on ", "用 Nsight Compute 记录于 "), ("recorded: ", "实测记录："),
               ("measured live on ", "实时测量于 "), ("model: ", "模型："))


def pick(text: str, lang: str) -> str:
    """The `lang` ("en" or "zh") half of "English · 中文" (each <br> line kept in its half); any other text
    as it is. Only a separator with Latin text before it and Chinese after it splits, so an English
    " · " (a dot product, "row i of A · column j of B") stays. Hover templates keep their fields: only
    the label inside <extra>…</extra> is picked."""
    if lang not in ("en", "zh") or SEP not in text:
        return text
    if "<extra>" in text:
        return _EXTRA.sub(lambda m: m.group(1) + pick(m.group(2), lang) + m.group(3), text)
    i = text.find(SEP)
    en, zh = text[:i], text[i + len(SEP):]
    if _CJK.search(en) or not _CJK.search(zh):
        return text
    return _EDGE_BR.sub("", en if lang == "en" else zh)


def _pick_all(obj: Any, lang: str) -> Any:
    if isinstance(obj, str):
        return pick(obj, lang)
    if isinstance(obj, list):
        return [_pick_all(v, lang) for v in obj]
    if isinstance(obj, dict):
        return {k: (v if k == "template" else _pick_all(v, lang)) for k, v in obj.items()}
    return obj


def pick_figure(fig: go.Figure, lang: str) -> go.Figure:
    """A copy of `fig` with every "English · 中文" text (titles, axes, legend, hover labels, annotations,
    category labels) in one language; `fig` itself is unchanged."""
    return go.Figure(_pick_all(fig.to_plotly_json(), lang))


def _caption_html(text: str) -> str:
    """The subtitle as an HTML caption: "English · 中文" as the book's language spans, `code` as <code>."""
    import html as _html

    from gemm_course.bilingual import language as bilingual

    text = re.sub(r"\s*<br>\s*", " ", text).strip()
    if SEP in text and not _CJK.search(text.split(SEP, 1)[0]) and _CJK.search(text.split(SEP, 1)[1]):
        en, zh = text.split(SEP, 1)
    else:
        en = zh = text
        for start, start_zh in _CAPTION_ZH:
            if text.startswith(start) and not _CJK.search(text):
                zh = start_zh + text[len(start):]
                break

    def inline(t: str) -> str:
        return re.sub(r"`([^`]+)`", r"<code>\1</code>", _html.escape(t, quote=False))

    lang = bilingual.current_language()
    if en == zh or lang == "en":
        body = inline(en)
    elif lang == "zh":
        body = inline(zh)
    else:
        body = (f'<span class="lang-en">{inline(en)}</span><span class="lang-sep">{SEP}</span>'
                f'<span class="lang-zh">{inline(zh)}</span>')
    return f'<div class="gemm-figure-caption" style="font-size:0.8em;color:#666;margin:0.2em 0 1em">{body}</div>'


def _without_subtitle(fig: go.Figure) -> tuple[go.Figure, str]:
    """A copy of `fig` whose subtitle is taken out (returned as text) and whose top margin gives back
    the room fit_top made for it, so the plot keeps its height."""
    sub = fig.layout.title.subtitle.text if fig.layout.title and fig.layout.title.subtitle else None
    if not sub:
        return fig, ""
    out = go.Figure(fig)
    room = int(n_lines(sub) * SUBTITLE_SIZE * 1.4) + 8
    t = _margin(out, "t", 100)
    out.update_layout(title_subtitle_text=None, margin_t=max(t - room, 20),
                      height=(out.layout.height or 450) - min(room, t - 20))
    return _place_title(out), sub


def figure_html(fig: go.Figure) -> str:
    """The figure as an HTML fragment that draws itself (see the module docstring); its subtitle, the
    line that says where the numbers come from, becomes a caption under the plot."""
    from plotly.offline import get_plotlyjs_version

    from gemm_course.bilingual import language as bilingual

    lang = bilingual.current_language()
    fig, caption = _without_subtitle(pick_figure(fig, lang) if lang in ("en", "zh") else fig)
    div_id = f"gemm-fig-{uuid.uuid4().hex[:12]}"
    height = fig.layout.height or 450
    return (f'<div id="{div_id}" class="gemm-figure" style="width:100%;height:{height}px"></div>'
            + _SCRIPT % {"fig": fig.to_json(), "id": div_id, "config": _CONFIG_JS,
                         "version": get_plotlyjs_version()}
            + (_caption_html(caption) if caption else ""))


def show(fig: go.Figure) -> None:
    """Display a plotly figure in JupyterLab, Colab, VS Code and the built book alike, in the course's
    language (gemm_course.bilingual.language.current_language(): one language in a notebook that chose one; both,
    for the book's switch, otherwise)."""
    from IPython.display import display

    from gemm_course.bilingual import language as bilingual

    lang = bilingual.current_language()
    native = pick_figure(fig, lang) if lang in ("en", "zh") else fig
    bundle = {
        "application/vnd.plotly.v1+json": json.loads(native.to_json()),
        "text/html": figure_html(fig),
        "text/plain": f"<plotly figure: {pick(fig.layout.title.text or 'untitled', lang)}>",
    }
    display(bundle, raw=True)


# --- Layout that fits: wrapped titles and subtitles, legends that clear the axes ----------------
# Plotly does not wrap text and does not reflow a layout for a narrow screen. The figures are laid out
# for the narrowest width a reader may have (NARROW_PX, a phone) with a geometric estimate of text
# widths (an estimate, not a measurement: Latin characters ~0.6 em, CJK characters 1 em wide).

NARROW_PX = 330  # the content width of a 360 px phone (the page keeps ~15 px each side)
SEP = " · "  # between the English and the Chinese half; the book's language switch splits there
TITLE_SIZE, SUBTITLE_SIZE, LEGEND_SIZE, TICK_SIZE = 17, 11, 12, 12
_WIDE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")
_TAG = re.compile(r"<[^>]*>")
_NO_BREAK_BEFORE = set("，。：；、）》」』！？")


def text_px(line: str, size: float) -> float:
    """Estimated width in pixels of one line of plotly text at font size `size`."""
    line = _TAG.sub("", line)
    return sum(size if _WIDE.match(ch) else 0.6 * size for ch in line)


def _wrap_plain(text: str, max_px: float, size: float) -> list[str]:
    lines: list[str] = []
    for para in text.split("<br>"):
        line = ""
        for token in re.findall(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+|\s+", para):
            if (line.strip() and not token.isspace() and token not in _NO_BREAK_BEFORE
                    and text_px(line + token, size) > max_px):
                lines.append(line.rstrip())
                line = ""
            if line or not token.isspace():
                line += token
        lines.append(line.rstrip())
    return lines


def wrap(text: str, max_px: float, size: float = SUBTITLE_SIZE) -> str:
    """`text` broken with <br> at word boundaries (anywhere between CJK characters) into lines at most
    `max_px` wide at font size `size` (a word longer than that keeps a line of its own).

    "English · 中文" that does not fit on one line breaks right after the separator, " · <br>", so
    each line holds one language and the book's switch, which splits at " · ", still finds the halves.
    """
    if text_px(text, size) <= max_px and "<br>" not in text:
        return text
    if SEP in text:
        en, zh = text.split(SEP, 1)
        if en.strip() and _WIDE.search(zh) and not _WIDE.search(en):
            return "<br>".join(_wrap_plain(en, max_px - text_px(SEP, size), size)) + SEP + "<br>" + \
                "<br>".join(_wrap_plain(zh.lstrip(), max_px, size))
    return "<br>".join(_wrap_plain(text, max_px, size))


def n_lines(text: Optional[str]) -> int:
    return 0 if not text else text.count("<br>") + 1


def _margin(fig: go.Figure, side: str, default: int = 80) -> int:
    v = getattr(fig.layout.margin, side)
    return default if v is None else int(v)


def fit_top(fig: go.Figure, subtitle: Optional[str] = None, extra: int = 0) -> go.Figure:
    """Wrap the title (and the subtitle, a small grey line under it, e.g. where the numbers come from)
    to the narrow width, put them at the top left of the figure, and make the top margin hold them all
    (plus `extra` pixels, e.g. for a menu above the plot). The plot area keeps its height."""
    width = NARROW_PX - 30
    title = wrap(fig.layout.title.text or "", width, TITLE_SIZE)
    if subtitle is None:
        subtitle = fig.layout.title.subtitle.text
    subtitle = wrap(subtitle, width, SUBTITLE_SIZE) if subtitle else None
    top = 12 + int(n_lines(title) * TITLE_SIZE * 1.35) + (int(n_lines(subtitle) * SUBTITLE_SIZE * 1.4) + 8 if subtitle else 0)
    t = top + 14 + extra
    height = (fig.layout.height or 450) + t - _margin(fig, "t", 100)
    fig.update_layout(title=dict(text=title, x=0, xref="container", xanchor="left", yref="container",
                                 yanchor="top", pad=dict(l=12), font=dict(size=TITLE_SIZE),
                                 subtitle=dict(text=subtitle, font=dict(size=SUBTITLE_SIZE, color="#666"))),
                      margin=dict(t=t), height=height)
    return _place_title(fig)


def _place_title(fig: go.Figure) -> go.Figure:
    # 12 px below the top edge (title.pad.t does not work for a title of several lines)
    fig.update_layout(title_y=1 - (12 + TITLE_SIZE * 0.35) / (fig.layout.height or 450))
    return fig


def _break_label(label: str, max_px: float, size: float = TICK_SIZE) -> str:
    """A category label wrapped with <br> into lines at most `max_px` wide (after commas too)."""
    return wrap(re.sub(r",(?=\S)", ", ", label), max_px, size)


def _ticks(fig: go.Figure) -> tuple[float, Optional[int]]:
    """Estimated height of the x tick labels at the narrow width, and the angle to fix them at (None:
    plotly's own). Category labels too long to stand side by side at the narrow width are wrapped onto
    a few lines and turned by 90° at every width (fit_bottom sets them as tick texts), so the estimate
    holds at any width; a 90° label, unlike a 45° one, does not reach left past the plot and squeeze it."""
    labels = _x_labels(fig)
    if not labels:
        return TICK_SIZE * 1.8, None
    plot_w = max(NARROW_PX - _margin(fig, "l") - _margin(fig, "r"), 100)
    per, longest = plot_w / len(labels), max(text_px(v, TICK_SIZE) for v in labels)
    if longest <= 0.9 * per and not any("<br>" in v for v in labels):
        return TICK_SIZE * 1.8, None
    broken = _x_ticktext(fig, labels)
    return max(text_px(line, TICK_SIZE) for t in broken for line in t.split("<br>")) + 10, -90


def _x_labels(fig: go.Figure) -> list[str]:
    seen: dict[str, None] = {}
    for t in fig.data:
        if getattr(t, "orientation", None) != "h":
            for v in (getattr(t, "x", None) or []):
                if isinstance(v, str):
                    seen.setdefault(v)
    return list(seen)


def _x_ticktext(fig: go.Figure, labels: list[str]) -> list[str]:
    """Turned x labels, each on as many lines as fit side by side in its category's width."""
    plot_w = max(NARROW_PX - _margin(fig, "l") - _margin(fig, "r"), 100)
    lines = max(1, int(plot_w / len(labels) // (TICK_SIZE * 1.25)))
    out = []
    for v in labels:
        width = max(text_px(v, TICK_SIZE) / lines * 1.15, 110)
        out.append(_break_label(v, width) if SEP not in v else v)
    return out


def fit_left(fig: go.Figure) -> go.Figure:
    """Horizontal bars: category labels wrapped to at most a quarter of the narrow width, and a left
    margin that holds them, so the bars keep most of a phone's width."""
    labels: dict[str, None] = {}
    for t in fig.data:
        if getattr(t, "orientation", None) == "h":
            for v in (getattr(t, "y", None) or []):
                if isinstance(v, str):
                    labels.setdefault(v)
    if not labels:
        return fig
    max_px = NARROW_PX / 4  # the bars keep at least 200 px of a 360 px phone
    text = [_break_label(v, max_px) if SEP not in v else wrap(v, max_px, TICK_SIZE) for v in labels]
    widest = max(text_px(line, TICK_SIZE) for t in text for line in t.split("<br>"))
    fig.update_yaxes(tickmode="array", tickvals=list(labels), ticktext=text, automargin=True)
    # (a narrow right margin too: the x axis' automargin still makes room for its last tick label)
    fig.update_layout(margin=dict(l=int(min(widest, max_px + TICK_SIZE)) + 8, r=min(_margin(fig, "r", 20), 12)))
    fig.update_xaxes(automargin=True)
    # plotly gives the rows equal heights and centres each label on its row: two neighbours' labels stay
    # apart when a row is as tall as half of each of them together
    lines = [max(n_lines(pick(t, "en")), n_lines(pick(t, "zh"))) for t in text]  # one language is shown
    pair = max([(a + b) / 2 for a, b in zip(lines, lines[1:])] or lines)
    fig._gemm_min_plot_height = int(len(text) * (pair * TICK_SIZE * 1.3 + 8))  # type: ignore[attr-defined]
    return fig


def legend_entries(fig: go.Figure) -> list[str]:
    shown = [t.name or "" for t in fig.data if t.showlegend is not False and t.name]
    if fig.layout.showlegend is False or (len(shown) < 2 and fig.layout.showlegend is not True):
        return []
    return shown


def legend_rows(fig: go.Figure) -> int:
    """Rows a horizontal legend takes at the narrow width (each entry: symbol 40 px + its text)."""
    rows, used, avail = 0, 0.0, NARROW_PX - _margin(fig, "l") // 2
    for name in legend_entries(fig):
        w = 40 + max(text_px(line, LEGEND_SIZE) for line in name.split("<br>"))
        if rows == 0 or used + w > avail:
            rows, used = rows + n_lines(name) if rows else n_lines(name), w
        else:
            used += w
    return rows


def fit_bottom(fig: go.Figure, plot_height: Optional[int] = None) -> go.Figure:
    """Put a horizontal legend under the x axis title, clear of the tick labels, and make the bottom
    margin hold the tick labels, the axis title and every legend row at the narrow width. The figure
    grows so that the plot area keeps `plot_height` (default: what it has now)."""
    t, b = _margin(fig, "t", 100), _margin(fig, "b")
    plot_h = plot_height or max((fig.layout.height or 450) - t - b, 200)
    ticks, angle = _ticks(fig)
    xtitle = (fig.layout.xaxis.title.text or "") if fig.layout.xaxis.title else ""
    if xtitle:  # the axis title, too, wrapped to the plot's width on a narrow screen
        xtitle = wrap(xtitle, max(NARROW_PX - _margin(fig, "l") - _margin(fig, "r"), 160), 14)
        fig.layout.xaxis.title.text = xtitle
    below_axis = ticks + (n_lines(xtitle) * 14 * 1.3 + 10 if xtitle else 0) + 8
    for trace in fig.data:  # a legend entry wider than a phone wraps (one language a line)
        if trace.name and legend_entries(fig) and text_px(trace.name, LEGEND_SIZE) > NARROW_PX - 60:
            trace.name = wrap(re.sub(r",(?=\S)", ", ", trace.name), NARROW_PX - 60, LEGEND_SIZE)  # (after commas too)
    rows = legend_rows(fig)
    legend_px = rows * LEGEND_SIZE * 1.6 + 10 if rows else 0
    b = int(below_axis + legend_px + 10)
    fig.update_layout(margin=dict(b=b), height=t + plot_h + b,
                      legend=dict(orientation="h", x=0, xanchor="left", yanchor="top", y=-below_axis / plot_h,
                                  font=dict(size=LEGEND_SIZE)))
    fig.update_xaxes(automargin=True)
    if angle is not None:
        labels = _x_labels(fig)
        fig.update_xaxes(tickangle=angle, tickmode="array", tickvals=labels, ticktext=_x_ticktext(fig, labels))
    return _place_title(fig)


def _layout(fig: go.Figure, title: str, xtitle: str, ytitle: str, *, plot_height: int = 340,
            subtitle: Optional[str] = None, **kw: Any) -> go.Figure:
    # an empty axis title would still keep its standoff and a line of space beside the axis (about 25 px a
    # phone's plot cannot spare): no title at all instead
    fig.update_layout(title=title, xaxis_title=xtitle or None, yaxis_title=ytitle or None, template="plotly_white",
                      height=460, margin=dict(l=_margin(fig, "l", 60), r=_margin(fig, "r", 20), t=60, b=40), **kw)
    fit_left(fig)  # wrapped bar labels need rows tall enough to keep apart
    plot_height = max(plot_height, getattr(fig, "_gemm_min_plot_height", 0))
    fit_top(fig, subtitle)
    fig.update_layout(height=_margin(fig, "t") + plot_height + 40)
    return fit_bottom(fig, plot_height)


def add_subtitle(fig: go.Figure, text: str, extra: int = 0) -> go.Figure:
    """The small grey line under the title (where the numbers come from), wrapped to fit a narrow
    screen; the top margin grows to hold it and the plot keeps its height."""
    return fit_top(fig, text, extra)


def config_label(record: Mapping[str, Any]) -> str:
    """A short legend label for a measured configuration: level and the parameters it sets away from
    the level's defaults ("default" when none)."""
    if record["level"] == "cublas":
        return "cuBLAS"
    from gemm_course.levels import get_level

    return f"{record['level']} {changed_params(get_level(record['level']).defaults, record['params'])}"


def changed_params(defaults: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    """The parameters of a setting that differ from the defaults, as "k=v, …" ("default" if none)."""
    return ", ".join(f"{k}={v}" for k, v in params.items() if defaults.get(k, v) != v) or "default"


def size_label(record: Mapping[str, Any]) -> str:
    M, N, K = record["M"], record["N"], record["K"]
    return str(M) if M == N == K else f"{M}×{N}×{K}"


def performance_figure(records: Iterable[Mapping[str, Any]], metric: str = "tflops",
                       title: Optional[str] = None, subtitle: str = "") -> go.Figure:
    """TFLOPS (or time in ms) against matrix size: one line per configuration, cuBLAS in black."""
    key = {"tflops": "tflops", "ms": "median_ms"}[metric]
    series: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        series.setdefault(config_label(r), []).append(r)
    fig = go.Figure()
    for i, (label, rows) in enumerate(sorted(series.items(), key=lambda kv: kv[0] != "cuBLAS")):
        rows = sorted(rows, key=lambda r: r["M"] * r["N"] * r["K"])
        err = None
        if metric == "ms":
            err = dict(type="data", symmetric=False, array=[r["q3_ms"] - r["median_ms"] for r in rows],
                       arrayminus=[r["median_ms"] - r["q1_ms"] for r in rows])
        color = CUBLAS_COLOR if label == "cuBLAS" else PALETTE[i % len(PALETTE)]
        fig.add_trace(go.Scatter(
            x=[size_label(r) for r in rows], y=[r[key] for r in rows], name=label, mode="lines+markers",
            error_y=err, line=dict(color=color, dash="dash" if label == "cuBLAS" else "solid"),
            customdata=[[r.get("ratio_to_cublas", 1.0), r["median_ms"], r["reps"]] for r in rows],
            hovertemplate="%{x}: %{y:.3g}<br>%{customdata[0]:.1%} of cuBLAS, median %{customdata[1]:.3g} ms"
                          " over %{customdata[2]} reps<extra>" + label + "</extra>"))
    ytitle = "TFLOPS" if metric == "tflops" else "time (ms, median; bars: quartiles) · 时间（毫秒）"
    fig = _layout(fig, title or "", "matrix size (M = N = K) · 矩阵规模", ytitle, subtitle=subtitle or None)
    fig.update_xaxes(type="category")
    if metric == "ms":
        fig.update_yaxes(type="log")
    return fig


def sweep_figure(records: Sequence[Mapping[str, Any]], x: str, y: str, by: Optional[str | Sequence[str]] = None,
                 title: str = "", subtitle: str = "") -> go.Figure:
    """Heatmap of TFLOPS over two parameters; a menu picks the values of the others (`by`).

    Works in the static book: the interactivity is plotly's own, no kernel needed. Where several
    records share a cell (e.g. a parameter not named in x, y or by), the best one is shown.
    """
    by_names = [by] if isinstance(by, str) else list(by or [])

    def group_of(r: Mapping[str, Any]) -> tuple:
        return tuple(r["params"][b] for b in by_names)

    groups = sorted({group_of(r) for r in records}, key=str)
    xs = sorted({r["params"][x] for r in records}, key=str)
    ys = sorted({r["params"][y] for r in records}, key=str)
    if all(isinstance(v, int) for v in xs):
        xs = sorted(xs)
    if all(isinstance(v, int) for v in ys):
        ys = sorted(ys)
    fig = go.Figure()
    for gi, g in enumerate(groups):
        grid: list[list[Optional[float]]] = [[None] * len(xs) for _ in ys]
        for r in records:
            if group_of(r) == g:
                i, j = ys.index(r["params"][y]), xs.index(r["params"][x])
                grid[i][j] = max(grid[i][j] or 0.0, round(r["tflops"], 2))
        fig.add_trace(go.Heatmap(z=grid, x=[str(v) for v in xs], y=[str(v) for v in ys], visible=gi == 0,
                                 colorscale="Viridis", colorbar=dict(title="TFLOPS"),
                                 texttemplate="%{z}", hovertemplate=f"{x}=%{{x}} {y}=%{{y}}: "
                                 "%{z} TFLOPS<extra></extra>"))
    if by_names and len(groups) > 1:
        buttons = [dict(label=", ".join(f"{b}={v}" for b, v in zip(by_names, g)), method="update",
                        args=[{"visible": [i == gi for i in range(len(groups))]}])
                   for gi, g in enumerate(groups)]
        fig.update_layout(updatemenus=[dict(buttons=buttons, x=1.0, xanchor="right", y=1.0, yanchor="bottom",
                                            pad=dict(b=28))])
    fig = _layout(fig, title, x, y, subtitle=subtitle or None)
    if by_names and len(groups) > 1:  # room above the plot for the menu (26 px tall, 28 px above the plot)
        fit_top(fig, extra=60)
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    return _colorbar_below(fig)


def _colorbar_below(fig: go.Figure) -> go.Figure:
    """A colour bar (heatmap, or markers coloured by value) as a thin horizontal bar under the x tick labels
    and axis title: at the right, plotly's place, it took 60-80 px of a 360 px phone's plot width."""
    t, b = _margin(fig, "t", 100), _margin(fig, "b")
    plot_h = (fig.layout.height or 450) - t - b
    xtitle = (fig.layout.xaxis.title.text or "") if fig.layout.xaxis.title else ""
    below = _ticks(fig)[0] + (n_lines(xtitle) * 14 * 1.3 + 10 if xtitle else 0) + 8
    bar = dict(orientation="h", x=0, xanchor="left", y=-below / plot_h, yanchor="top", thickness=12, len=1,
               title=dict(side="right"))
    fig.update_traces(colorbar=bar, selector=dict(type="heatmap"))
    for trace in fig.data:
        if trace.type == "scatter" and trace.marker.colorbar and trace.marker.colorbar.title.text:
            trace.marker.colorbar.update(bar)
    need = int(below + 44)
    grow = max(0, need - b)
    return fig.update_layout(margin=dict(b=b + grow), height=(fig.layout.height or 450) + grow)


def roofline_figure(spec: GpuSpec, points: Sequence[Mapping[str, Any]] = (), title: str = "") -> go.Figure:
    """The fp32 roofline of a GPU, with measured points: each {label, intensity, tflops}."""
    lo, hi = 0.05, 2000.0
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig = go.Figure(go.Scatter(
        x=xs, y=[roofline(v, spec.fp32_peak_tflops, spec.memory_bandwidth_gbs) for v in xs],
        name=f"{spec.name} roof · 屋顶线", mode="lines", line=dict(color=CUBLAS_COLOR, width=3),
        hovertemplate="%{x:.3g} FLOP/B → %{y:.3g} TFLOPS<extra></extra>"))
    for i, p in enumerate(points):
        fig.add_trace(go.Scatter(x=[p["intensity"]], y=[p["tflops"]], name=p["label"], mode="markers",
                                 marker=dict(size=12, color=PALETTE[i % len(PALETTE)]),
                                 hovertemplate="%{x:.3g} FLOP/B, %{y:.3g} TFLOPS<extra>" + p["label"]
                                 + "</extra>"))
    # The ridge as a trace, not a shape: shapes and annotations on log axes take log10 coordinates.
    fig.add_trace(go.Scatter(x=[spec.ridge_point] * 2, y=[spec.fp32_peak_tflops / 1e4,
                                                          spec.fp32_peak_tflops],
                             mode="lines+text", line=dict(color="#888", dash="dot"), showlegend=False,
                             text=["", f"ridge {spec.ridge_point:.1f} FLOP/B"], textposition="top left",
                             hoverinfo="skip"))
    fig = _layout(fig, title or f"fp32 roofline: {spec.name}",
                  "arithmetic intensity (FLOP/byte) · 计算强度", "TFLOPS",
                  subtitle=f"peak {spec.fp32_peak_tflops:.1f} TFLOPS, {spec.memory_bandwidth_gbs:.0f} GB/s "
                           f"({spec.source})")
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return fig


def sweep_bar_figure(tried: Sequence[Mapping[str, Any]], title: str = "") -> go.Figure:
    """Bars of TFLOPS for each setting tried (each {label, tflops, cublas_tflops}), cuBLAS as markers."""
    labels = [t["label"] for t in tried]
    fig = go.Figure([
        go.Bar(x=labels, y=[t["tflops"] for t in tried], name="kernel · 内核", marker_color=PALETTE[0]),
        go.Scatter(x=labels, y=[t["cublas_tflops"] for t in tried], name="cuBLAS", mode="markers",
                   marker=dict(color=CUBLAS_COLOR, symbol="line-ew-open", size=30, line=dict(width=3))),
    ])
    return _layout(fig, title, "setting · 设置", "TFLOPS")


def bank_figure(access: Any, title: str = "") -> go.Figure:
    """Which of the 32 banks each lane of a warp hits (a models.BankAccess), and the passes it takes.

    Lanes that read the same word share one access (a broadcast); lanes that need different words
    of one bank are served one after another. The colour is the pass (wavefront) that serves a lane.
    A 4-byte access: the tallest column is the conflict degree. An 8- or 16-byte access puts 2 or 4
    marks per lane (one per word) and, in the model, is served a half-warp at a time (dotted line).
    """
    passes = access.lane_passes()
    xs, ys, colours, data = [], [], [], []
    for lane, words, lane_passes in zip(access.lanes, access.lane_words, passes):
        for word, served in zip(words, lane_passes):
            xs.append(word % 32)
            ys.append(lane)
            colours.append(served)
            data.append((word, served))
    total = access.wavefronts
    fig = go.Figure(go.Scatter(
        x=xs, y=ys, mode="markers",
        marker=dict(size=13 if access.width == 4 else 9, color=colours, colorscale="Reds", cmin=1, cmax=max(2, total),
                    colorbar=dict(title="pass · 波前序号"), line=dict(width=1, color="#333"), symbol="square"),
        customdata=data,
        hovertemplate="lane %{y} → bank %{x}, word %{customdata[0]}, pass %{customdata[1]}<extra></extra>"))
    if access.width == 4:
        verdict = ("conflict-free · 无冲突" if access.degree == 1
                   else f"{access.degree}-way conflict · {access.degree} 路冲突")
    else:
        verdict = (f"{total} wavefronts, fewest possible {access.ideal_wavefronts} (model) · "
                   f"{total} 个波前，最少 {access.ideal_wavefronts} 个波前（模型）")
        for edge in range(access.phase_lanes, 32, access.phase_lanes):
            fig.add_hline(y=edge - 0.5, line=dict(color="#888", dash="dot"))
    fig = _layout(fig, title or f"{access.description}: {verdict}", "bank · 存储体", "lane · 线程")
    fig.update_xaxes(range=[-0.5, 31.5], dtick=4)
    fig.update_yaxes(range=[31.5, -0.5], dtick=4)
    fig.update_layout(height=420, showlegend=False)
    return _colorbar_below(fig)


def sectors_figure(rows: Sequence[Mapping[str, Any]], title: str = "") -> go.Figure:
    """Bars of 32-byte sectors per warp-wide access: each row {label, sectors, group}."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    fig = go.Figure([go.Bar(x=[r["label"] for r in rs], y=[r["sectors"] for r in rs], name=g,
                            marker_color=PALETTE[i % len(PALETTE)], text=[r["sectors"] for r in rs],
                            textposition="outside") for i, (g, rs) in enumerate(groups.items())])
    fig.add_hline(y=4, line_dash="dot", annotation_text="ideal for 32 floats: 4 · 32 个 float 的理想值：4")
    return _layout(fig, title, "access · 访问", "32-byte sectors per warp access · 每次线程束访问的扇区数")


# Short names of the quantities the models predict (predictions.py), for a chart's category labels; a key not
# listed shows as its words ("shared_store_wavefronts" -> "shared store wavefronts").
COUNTER_NAMES = {
    "achieved_occupancy_pct": "achieved occupancy (%) · 实际占用率（%）",
    "dram_read_bytes": "DRAM bytes read · 显存读取字节数",
    "dram_write_bytes": "DRAM bytes written · 显存写入字节数",
    "global_load_l1_hit_pct": "global loads' L1 hits (%) · 全局加载的 L1 命中率（%）",
    "global_load_requests": "global load requests · 全局加载请求数",
    "instructions": "warp instructions · 线程束指令数",
    "l2_read_bytes": "L2 bytes read · 从 L2 读取的字节数",
    "ldmatrix_instructions": "ldmatrix instructions · ldmatrix 指令数",
    "sectors_per_load_request": "sectors per load request · 每次加载请求的扇区数",
    "sectors_per_store_request": "sectors per store request · 每次存储请求的扇区数",
    "shared_load_conflicts": "shared-load conflict passes · 共享内存加载冲突波前数",
    "shared_load_instructions": "shared-load instructions · 共享内存加载指令数",
    "shared_load_wavefronts": "shared-load wavefronts · 共享内存加载波前数",
    "wavefronts_per_shared_load": "wavefronts per shared load · 每次共享内存加载的波前数",
    "wavefronts_per_shared_store": "wavefronts per shared store · 每次共享内存存储的波前数",
}


def counter_name(key: str) -> str:
    """A predicted quantity's chart label, "English · 中文" where the course names it in both."""
    return COUNTER_NAMES.get(key, key.replace("_", " "))


def counters_figure(shown: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], title_en: str, title_zh: str,
                    subtitle: str = "") -> go.Figure:
    """Predict, then measure: one bar per (setting, quantity), the recorded counter divided by the
    model's prediction; the line at 1 is a model that is exactly right."""
    fig = go.Figure()
    for i, (label, rows) in enumerate(shown):
        kept = [r for r in rows if r.get("ratio") is not None]
        fig.add_trace(go.Bar(y=[counter_name(r["key"]) for r in kept], x=[r["ratio"] for r in kept],
                             orientation="h", name=label, marker_color=PALETTE[i % len(PALETTE)],
                             hovertemplate="%{y}: %{x:.2f}<extra>" + label + "</extra>"))
    fig.add_vline(x=1, line=dict(color="#444", dash="dash"))
    fig.update_layout(margin=dict(l=200))
    fig = _layout(fig, f"{title_en} · {title_zh}", "measured ÷ predicted · 实测 ÷ 预测", "", barmode="group",
                  plot_height=max(220, 26 * sum(len(r) for _, r in shown)), subtitle=subtitle or None)
    fig.update_xaxes(type="log")
    return fig


def tuned_figure(rows: Sequence[Mapping[str, Any]], group_names: Mapping[str, str], baseline: str,
                 title: str = "", subtitle: str = "") -> go.Figure:
    """Per shape, the sweep's fastest setting as a bar and the default setting as a marker, each as a fraction of
    the baseline timed beside it (1.0: as fast); one colour per group (the value of the output parameter). A row's
    best_label, where given, names the fastest setting in its bar's hover text."""
    def label(shape: Sequence[int]) -> str:
        return size_label(dict(zip("MNK", shape)))

    labels = [label(s) for s in dict.fromkeys(r["shape"] for r in rows)]
    fig = go.Figure()
    for i, (key, name) in enumerate(group_names.items()):
        mine = {label(r["shape"]): r for r in rows if json.dumps(r["group"], sort_keys=True) == key}
        color = PALETTE[i % len(PALETTE)]
        fig.add_bar(x=labels, y=[mine[x]["best_ratio"] if x in mine else None for x in labels], marker_color=color,
                    offsetgroup=str(i),
                    name=f"{pick(name, 'en')}: tuned · {pick(name, 'zh')}：调优后",
                    hovertext=[mine[x].get("best_label", "") if x in mine else "" for x in labels])
        fig.add_scatter(x=labels, y=[mine[x]["default_ratio"] if x in mine else None for x in labels], mode="markers",
                        offsetgroup=str(i),
                        name=f"{pick(name, 'en')}: default · {pick(name, 'zh')}：默认设置",
                        marker=dict(color=color, symbol="line-ew-open", size=26, line=dict(width=3)))
    # the baseline's line, named in the legend (a label written over the plot would sit on the bars): the
    # legend's entry draws nothing itself and joins the first group, so the markers keep their bars' offsets
    fig.add_hline(y=1.0, line=dict(color=CUBLAS_COLOR, dash="dash", width=1.5))
    fig.add_scatter(x=labels[:1], y=[None], mode="lines", name=baseline, hoverinfo="skip", offsetgroup="0",
                    line=dict(color=CUBLAS_COLOR, dash="dash", width=1.5))
    fig.update_layout(barmode="group", scattermode="group")  # each default marker above its own group's bar
    fig.update_yaxes(tickformat=".0%")
    return _layout(fig, title, "M×N×K", "of the baseline's speed (time) · 相对基线的速度（按时间）", subtitle=subtitle or None)
