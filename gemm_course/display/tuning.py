"""What the autotuner's recorded sweeps say: per shape, the fastest setting against the default one and the
baseline timed beside them (the tuning page's chart and its folded table)."""
from __future__ import annotations

import json
from typing import Any

from gemm_course.bilingual.text import Fold, Shown, Table, say, show as show_text, text
from gemm_course.display.plots import changed_params, show, tuned_figure
from gemm_course.levels import Level, get_level
from gemm_course.measure import autotune, results

# How the tuning page names each level's groups (the value of its output parameter) and its baselines.
_GROUP_NAMES = {
    "11_hopper_wgmma": {"c_type": {"input": "bf16 C · bf16 的 C", "float32": "fp32 C · fp32 的 C"}},
    results.FP8_LEVEL: {"scaling": {"blockwise": "fine-grained scales · 细粒度缩放",
                                    "per_tensor": "per-tensor scales · 逐张量缩放"}},
}
_BASELINES = {"11_hopper_wgmma": "baseline: cuBLAS bf16 · 基线：cuBLAS bf16",
              results.FP8_LEVEL: "baseline: cuBLASLt FP8, block-scaled or per-tensor fast · "
                                 "基线：cuBLASLt FP8，块缩放或逐张量快速模式"}


def _group_name(level_id: str, group: dict[str, Any]) -> str:
    if not group:
        return "all settings · 全部设置"
    (param, value), = group.items()
    return _GROUP_NAMES.get(level_id, {}).get(param, {}).get(value, f"{param}={value}")


def _setting(level_id: str, params: dict[str, Any]) -> str:
    """A registry level's setting as what it changes from the defaults; Level 13's in full (a few options)."""
    if level_id == results.FP8_LEVEL:
        return ", ".join(f"{k}={v}" for k, v in params.items())
    return changed_params(get_level(level_id).defaults, params)


def tuned(level: str | int | Level) -> list[dict[str, Any]]:
    """The recorded sweeps of one level at each of its sweep shapes: the tuned setting beside the default, as a
    fraction of the baseline in the same run (chart), and the numbers behind it (folded)."""
    rows = autotune.tuned_rows(level)
    if not rows:
        say("No recorded sweep for this level.", "这一级没有记录的参数扫描。")
        return Shown([])
    level_id = rows[0]["level"]
    groups = {json.dumps(r["group"], sort_keys=True): _group_name(level_id, r["group"]) for r in rows}
    rows = [{**r, "best_label": _setting(level_id, r["best"]["params"])} for r in rows]
    first = rows[0]["best"]
    show(tuned_figure(rows, groups, _BASELINES.get(level_id, "baseline: cuBLAS · 基线：cuBLAS"),
                      title=f"{level_id}: tuned against default · {level_id}：调优结果与默认设置",
                      subtitle="recorded: " + results.provenance_line(first)))
    def pct(x: Any) -> str:
        return "—" if x is None else f"{x:.1%}"

    cells = [["×".join(map(str, r["shape"])), _group_name(level_id, r["group"]), str(r["settings"]),
              r["best_label"], f"{r['best']['tflops']:.1f}", pct(r["best_ratio"]), pct(r["best_cycles"]),
              "—" if r["default"] is None else f"{r['default']['tflops']:.1f}", pct(r["default_ratio"]),
              "—" if r["gain"] is None else f"{r['gain'] - 1:+.1%}"] for r in rows]
    table = Table([text("M×N×K", "M×N×K"), text("settings of", "设置组"), text("timed", "计时数"),
                   text("fastest setting", "最快的设置"), text("TFLOPS", "TFLOPS"),
                   text("of the baseline (time)", "相对基线（时间）"), text("in cycles", "按周期"),
                   text("default TFLOPS", "默认设置 TFLOPS"), text("default, of the baseline", "默认设置相对基线"),
                   text("tuning gains", "调优收益")], cells, code_columns=(3,))
    show_text(Fold(text(f"The numbers behind the chart ({len(rows)} rows)", f"图中的数字（{len(rows)} 行）"), table))
    return Shown(rows)
