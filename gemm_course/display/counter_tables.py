"""Hardware counters on the page: predicted against measured, and two levels side by side.

The notebooks call these through the façade (gemm_course.display.notebook).
"""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence
from gemm_course.measure import results
from gemm_course.bilingual.text import Fold, Shown, Table, note, show as show_text, text
from gemm_course.levels import Level, get_level
from gemm_course.display.plots import show
from gemm_course.bilingual.text import say


def predict_vs_measure(level: str | int | Level, settings: Optional[Sequence[dict]] = None,
                       part: Optional[str] = None, open: bool = False) -> list[dict]:  # noqa: A002
    """Predict, then measure: for each setting, the models' predictions beside the hardware counters
    recorded with Nsight Compute (`python -m gemm_course counters --record`), and a chart of
    measured ÷ predicted (1 = the model is right). Without a GPU, and with one, these are the
    recorded counters: reading counters needs ncu, which the notebook does not run."""
    from gemm_course.measure import counters, predictions
    from gemm_course.display.plots import counters_figure

    lv = get_level(level)
    settings = [dict(s) for s in (settings if settings is not None else lv.showcase)]
    shown, prov = [], None
    for s in settings:
        try:
            row = counters.find(lv.id, part=part, **s)
        except KeyError:
            say(f"No recorded counters for {lv.id} {s}.", f"没有 {lv.id} {s} 的计数器记录。")
            continue
        prov = prov or row["provenance"]
        shown.append((counters.label(row), predictions.compare_row(row)))
    if not shown:
        return Shown()
    where = (f"recorded with Nsight Compute on {prov['gpu']}, {prov['date'][:10]}, {prov['ncu']}, "
             f"{counters.COUNTER_SIZE}³; `{results.command_line(prov)}`")
    where_zh = (f"用 Nsight Compute 记录于 {prov['gpu']}，{prov['date'][:10]}，{prov['ncu']}，"
                f"{counters.COUNTER_SIZE}³；`{results.command_line(prov)}`")
    n_rows = sum(len(rows) for _, rows in shown)
    show_text(Fold(text(f"Predicted vs measured counters: {len(shown)} settings, {n_rows} quantities (table)",
                        f"预测与实测的计数器：{len(shown)} 个设置，{n_rows} 个量（表格）"),
                   note(_counter_table(shown, "en") + f"<small>{html.escape(where)}</small>",
                        _counter_table(shown, "zh") + f"<small>{html.escape(where_zh)}</small>"), open=open))
    show(counters_figure(shown, f"{lv.id}: measured ÷ predicted", f"{lv.id}：实测 ÷ 预测", where))
    return Shown([{"setting": label, **r} for label, rows in shown for r in rows])


def counter_comparison(*levels: str | int) -> list[dict]:
    """Two levels' recorded Nsight Compute counters side by side, default settings at 4096³ (default:
    Level 1 and Level 2): load instructions, sectors asked of L1, L2 and DRAM bytes, time, top stall."""
    from gemm_course.measure import counters

    rows = counters.comparison(levels or ("01_naive", "02_smem_tiling"))
    numbers = [int(i.split("_")[0]) for i in rows[0]["levels"]]
    unit_zh = {"million": "百万"}

    def cell(row: dict, v: Any) -> str:
        if row["key"] == "top_stall":
            return f"{v[0]} {v[1]:.1f}"
        return f"{v:,.0f}" if row["unit"] == "million" else f"{v:.1f}" if row["unit"] in ("%", "ms") else f"{v:.2f}"

    body = [[text(f"{r['en']} ({r['unit']})" if r["unit"] else r["en"],
                  f"{r['zh']}（{unit_zh.get(r['unit'], r['unit'])}）" if r["unit"] else r["zh"]),
             *(cell(r, v) for v in r["values"]), f"{r['ratio']:.2f}×" if r["ratio"] else "–"] for r in rows]
    head = [text("counter", "计数器"), *(text(f"Level {n}", f"第 {n} 级") for n in numbers),
            text(f"Level {numbers[0]} ÷ Level {numbers[-1]}", f"第 {numbers[0]} 级 ÷ 第 {numbers[-1]} 级")]
    prov = rows[0]["provenance"]
    params = [results._complete(lv, {}) for lv in rows[0]["levels"]]
    settings = [", ".join(f"{k}={v}" for k, v in p.items()) for p in params]
    show_text(Table(head, body, caption=text(
        "Default settings (" + "; ".join(f"Level {n}: {s}" for n, s in zip(numbers, settings)) + f"), "
        f"{counters.COUNTER_SIZE}³, recorded with Nsight Compute on {prov['gpu']}, {prov['date'][:10]}; "
        f"`{results.command_line(prov)}`",
        "默认配置（" + "；".join(f"第 {n} 级：{s}" for n, s in zip(numbers, settings)) + "），"
        f"{counters.COUNTER_SIZE}³，用 Nsight Compute 记录于 {prov['gpu']}，"
        f"{prov['date'][:10]}；`{results.command_line(prov)}`")))
    return Shown(rows)


def _format_value(key: str, value: Optional[float]) -> str:
    if value is None:
        return "–"
    if key.endswith("bytes"):
        return f"{value / 1e9:.2f} GB"
    if key.endswith("pct"):
        return f"{value:.0f}%"
    return f"{value:.2f}" if abs(value) < 100 else f"{value:,.0f}"


# quantities derived from two counters, which counters.METRIC_BY_KEY does not name
_DERIVED_ZH = {"sectors_per_load_request": "每次加载请求的扇区数", "sectors_per_store_request": "每次写回请求的扇区数"}


def _counter_table(shown: Sequence[tuple[str, list[dict]]], lang: str) -> str:
    from gemm_course.measure.counters import METRIC_BY_KEY

    head = ("setting", "quantity", "predicted", "measured", "why the model says so") if lang == "en" else \
           ("设置", "量", "预测", "实测", "模型依据")
    cells = []
    for label, rows in shown:
        for r in rows:
            metric = METRIC_BY_KEY.get(r["key"])
            name = (metric.en if lang == "en" else metric.zh) if metric else \
                (_DERIVED_ZH.get(r["key"], r["key"]) if lang == "zh" else r["key"].replace("_", " "))
            shown_label = label.replace("default", "默认") if lang == "zh" else label
            cells.append((shown_label, name, _format_value(r["key"], r["predicted"]), _format_value(r["key"], r["measured"]),
                          r["why_en"] if lang == "en" else r["why_zh"]))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in cells)
    return ("<table class='gemm-table'><thead><tr>" + "".join(f"<th>{h}</th>" for h in head)
            + f"</tr></thead><tbody>{body}</tbody></table>")
