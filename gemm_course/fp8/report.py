"""Level 13 (FP8 GEMM with fine-grained scaling) for the notebook: its recorded runs as figures and tables.

Each function reads the recorded result files (``gemm_course/results``: the timing run with its cuBLASLt
and bf16 baselines, the Nsight Compute counters, the accuracy studies) and builds one bilingual figure or
table; the notebook shows them with ``gc.plots.show``. Two calls do more on a Hopper GPU:

- :func:`live` times the chapter's steps at 4096³ against cuBLASLt, as the recorded run did;
- :func:`check` runs both kernels on odd shapes against the float64 reference.

Elsewhere :func:`live` says that the recorded run is shown, and :func:`check` runs the same accuracy
check on a NumPy emulation of the blockwise kernel's arithmetic (with and without a planted bug), so
the reader sees what the allowed error accepts and what it catches. Nothing here needs a GPU to import.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from gemm_course.fp8 import formats as fp8, gemm as fp8_gemm
from gemm_course.measure import results
from gemm_course.bilingual.text import Fold, Shown, Table, from_message, show as show_text, text as bilingual_text
from gemm_course.fp8.gemm import DTYPE, LEVEL_ID, STEPS

# A published kernel of this kind: DeepGEMM, DeepSeek's open-source FP8 GEMM library with 1×128 / 128×128
# scales and promotion, reports "up to 1550 TFLOPS" on H800 GPUs (README of github.com/deepseek-ai/DeepGEMM,
# news of 2025.04.18; its first release said "1350+"; measured by its authors). A claim, not a measurement of
# this course: the chapter quotes it only as a mark, and does not subtract a number measured on another GPU.
PUBLISHED_FINE_GRAINED_TFLOPS = 1550.0
PUBLISHED_FINE_GRAINED_SOURCE = "DeepGEMM (github.com/deepseek-ai/DeepGEMM), README: up to 1550 TFLOPS on H800"

SQUARE_SIZES = fp8_gemm.SQUARES                 # 4096³ and 8192³
CHECK_SHAPES = ((1, 8, 16), (7, 13, 48), (129, 136, 1152), (300, 264, 1040))
EMULATED_SHAPES = ((129, 136, 1152), (300, 264, 1040))
BF16 = "bfloat16"


# --- names -----------------------------------------------------------------------------------------

def step_key(params: Mapping[str, Any]) -> str:
    """A step's short name: per_tensor_256, per_tensor_128, serial, overlapped, split (split-K > 1), and
    for the 64-row kernel m64 and m64_split; a blockwise step with staged scales adds "_staged"."""
    if params.get("scaling") == "per_tensor":
        return f"per_tensor_{params.get('block_n', 256)}"
    staged = "_staged" if params.get("staged_scales") else ""
    if params.get("block_m") == 64:
        return ("m64_split" if (params.get("splits") or 1) > 1 else "m64") + staged
    if (params.get("splits") or 1) > 1:
        return "split" + staged
    return ("overlapped" if params.get("overlap", True) else "serial") + staged


_SHORT = {"serial": "fine-grained, serial · 细粒度，串行累加提升", "overlapped": "fine-grained, overlapped · 细粒度，重叠累加提升"}


def step_label(params: Mapping[str, Any], short: bool = False) -> str:
    """A step as "English · 中文", for tables; short: for the categories of a bar chart."""
    if params.get("staged_scales"):
        en, zh = step_label({k: v for k, v in params.items() if k != "staged_scales"}, short).split(" · ")
        return f"{en}, scales staged · {zh}，缩放因子经共享内存"
    key = step_key(params)
    if key.startswith("m64"):
        split_en = f", split-K ×{params['splits']}" if key == "m64_split" else ""
        split_zh = f"，split-K ×{params['splits']}" if key == "m64_split" else ""
        return f"fine-grained, 64×128 tile{split_en} · 细粒度，64×128 分块{split_zh}"
    if short and key in _SHORT:
        return _SHORT[key]
    if short and key.startswith("per_tensor"):
        return f"per-tensor 128×{params.get('block_n', 256)} · 逐张量 128×{params.get('block_n', 256)}"
    if short:
        return f"fine-grained, split-K ×{params['splits']} · 细粒度，split-K ×{params['splits']}"
    if key.startswith("per_tensor"):
        bn = params.get("block_n", 256)
        return f"per-tensor, 128×{bn} tile · 逐张量缩放，128×{bn} 分块"
    if key == "serial":
        return "fine-grained, promotion waited for · 细粒度，等待累加提升"
    if key == "overlapped":
        return "fine-grained, promotion overlapped · 细粒度，重叠累加提升"
    return f"fine-grained, overlapped, split-K ×{params['splits']} · 细粒度，重叠，split-K ×{params['splits']}"


def _baseline_label(record: Mapping[str, Any], short: bool = False) -> str:
    if record["level"] == "cublas" and record["dtype"] == DTYPE:
        if record.get("baseline") == "cublaslt_blockwise":
            return "cuBLASLt, block-scaled · cuBLASLt，块缩放" if short else \
                "cuBLASLt FP8, block-scaled 1×128 / 128×128 · cuBLASLt FP8，1×128 / 128×128 块缩放"
        if "use_fast_accum=True" in record["params"].get("library", ""):
            return "cuBLASLt, fast accum. · cuBLASLt，快速累加" if short else \
                "cuBLASLt FP8, fast accumulation · cuBLASLt FP8，快速累加"
        return "cuBLASLt, promoted · cuBLASLt，累加提升" if short else "cuBLASLt FP8, promoted · cuBLASLt FP8，累加提升"
    if record["level"] == "cublas":
        return "cuBLAS bf16"
    return "Level 11, bf16 · 第 11 级，bf16" if short else "Level 11 step 6, bf16 · 第 11 级第 6 步，bf16"


def label(record: Mapping[str, Any], short: bool = False) -> str:
    """The label of any record of the FP8 run: a step of Level 13 or a baseline (short: a bar's)."""
    return step_label(record["params"], short) if record["level"] == LEVEL_ID else _baseline_label(record, short)


def shape_label(record: Mapping[str, Any]) -> str:
    M, N, K = record["M"], record["N"], record["K"]
    return f"{M}³" if M == N == K else f"{M}×{N}×{K}"


# --- the recorded files ------------------------------------------------------------------------------

def recorded_run() -> dict[str, Any]:
    """The recorded FP8 timing run: {"records", "provenance", "file"} of the first result file holding
    Level 13 records; "records" holds them, the cuBLASLt FP8 baselines and the bf16 baselines (cuBLAS
    and Level 11, kept under "bf16_baselines" in the file) measured in the same run."""
    for path in results.recorded_files():
        data = results.load(path)
        if any(r["level"] == LEVEL_ID for r in data.get("records", [])):
            return {"records": data["records"] + data.get("bf16_baselines", []), "provenance": data["provenance"],
                    "file": path.name}
    raise LookupError("no recorded Level 13 run in gemm_course/results · gemm_course/results 中没有第 13 级的实测记录")


def recorded_counters() -> dict[str, Any]:
    """The recorded Nsight Compute counters of the FP8 steps: {"rows", "provenance", "file"}. A step
    that the profile plan repeated (the auto split count resolved to 1 at 4096³) keeps its first row."""
    for path in results.recorded_files():
        data = results.load(path)
        if data.get("fp8_counters"):
            rows, seen = [], set()
            for r in data["fp8_counters"]:
                key = (r["M"], r["N"], r["K"], tuple(sorted(r["params"].items())))
                if key not in seen:
                    seen.add(key)
                    rows.append(r)
            return {"rows": rows, "provenance": data["provenance"], "file": path.name}
    raise LookupError("no recorded FP8 counters · 没有 FP8 计数器的实测记录")


def recorded_accuracy_file() -> dict[str, Any]:
    """The recorded accuracy studies: {"promotion", "outliers", "provenance", "file"}."""
    for path in results.recorded_files():
        data = results.load(path)
        if data.get("fp8_promotion") or data.get("fp8_outliers"):
            return {"promotion": data.get("fp8_promotion", []), "outliers": data.get("fp8_outliers", []),
                    "provenance": data["provenance"], "file": path.name}
    raise LookupError("no recorded FP8 accuracy study · 没有 FP8 精度研究的实测记录")


def where(provenance: Mapping[str, Any], what: str = "timing") -> str:
    """The subtitle that says where the numbers come from: GPU, date, versions and the method, as
    "English · 中文" (one separator: the book's language switch splits there)."""
    p = provenance
    versions = f"driver {p['driver']}, CUDA {p['cuda_runtime']}, CuPy {p['cupy']}"
    versions_zh = f"驱动 {p['driver']}，CUDA {p['cuda_runtime']}，CuPy {p['cupy']}"
    if p.get("torch"):
        versions += f", PyTorch {p['torch']}"
        versions_zh += f"，PyTorch {p['torch']}"
    if what == "timing":
        method = ("median of ≥ 50 launches, L2 flushed, SM clock measured on the SMs; cuBLASLt via PyTorch, "
                  "timed just before each kernel")
        method_zh = "至少 50 次启动的中位数，清空 L2，SM 时钟在 SM 上实测；cuBLASLt 经 PyTorch 调用，紧接在每个内核之前计时"
    elif what == "counters":
        method = f"Nsight Compute ({p.get('ncu', 'ncu').split(' (')[0]}), one profiled launch per step, clocks not locked"
        method_zh = f"Nsight Compute（{p.get('ncu', 'ncu').split(' (')[0]}），每步分析一次启动，时钟未锁定"
    else:
        method = "errors against the exact float64 product of the same bytes"
        method_zh = "误差相对于同一组字节的 float64 精确乘积"
    return (f"recorded on {p['gpu']}, {p['date'][:10]}; {versions}; {method} · "
            f"实测：{p['gpu']}，{p['date'][:10]}；{versions_zh}；{method_zh}")


def _is(record: Mapping[str, Any], size: Sequence[int]) -> bool:
    return (record["M"], record["N"], record["K"]) == tuple(size)


def square_rows(records: Sequence[Mapping[str, Any]], n: int) -> list[Mapping[str, Any]]:
    """The bars of steps_figure at n³, in the chapter's order: the steps, then cuBLASLt FP8 (fast
    accumulation, promoted), cuBLAS bf16 and Level 11 step 6 in bf16 (those that were recorded)."""
    at = [r for r in records if _is(r, (n, n, n))]
    order = {"per_tensor_256": 0, "per_tensor_128": 1, "serial": 2, "overlapped": 3, "split": 4}
    def rank(r: Mapping[str, Any]) -> float:  # a staged step right after the same step unstaged
        key = step_key(r["params"])
        return order[key.removesuffix("_staged")] + 0.5 * key.endswith("_staged")
    steps = sorted((r for r in at if r["level"] == LEVEL_ID), key=rank)
    fast = [r for r in at if r["level"] == "cublas" and r["dtype"] == DTYPE and "True" in r["params"]["library"]]
    promoted = [r for r in at if r["level"] == "cublas" and r["dtype"] == DTYPE and "False" in r["params"]["library"]]
    blockwise = [r for r in at if r["level"] == "cublas" and r.get("baseline") == "cublaslt_blockwise"]
    bf16 = [r for r in at if r["level"] == "cublas" and r["dtype"] == BF16]
    level11 = [r for r in at if r["level"] == "11_hopper_wgmma" and r["dtype"] == BF16]
    return steps + fast[:1] + promoted[:1] + blockwise[:1] + bf16[:1] + level11[:1]


def fastest_step(records: Sequence[Mapping[str, Any]], size: Sequence[int],
                 scaling: Optional[str] = None) -> Mapping[str, Any]:
    """The fastest recorded Level 13 step at one shape (optionally of one scaling)."""
    rows = [r for r in records if r["level"] == LEVEL_ID and _is(r, size)
            and scaling in (None, r["params"]["scaling"])]
    return max(rows, key=lambda r: r["tflops"])


def fastest_cublaslt(records: Sequence[Mapping[str, Any]], size: Sequence[int]) -> Mapping[str, Any]:
    """The fastest of cuBLASLt's FP8 runs at one shape (per-tensor fast or promoted, or block-scaled)."""
    return max((r for r in records if r["level"] == "cublas" and r["dtype"] == DTYPE and _is(r, size)),
               key=lambda r: r["tflops"])


def cublaslt(records: Sequence[Mapping[str, Any]], size: Sequence[int], baseline: str) -> Optional[Mapping[str, Any]]:
    """cuBLASLt's FP8 row at one shape by its baseline name (fp8_gemm.BASELINES), None if not recorded."""
    return next((r for r in records if r["level"] == "cublas" and r["dtype"] == DTYPE and _is(r, size)
                 and r.get("baseline") == baseline), None)


def cublas_bf16(records: Sequence[Mapping[str, Any]], size: Sequence[int]) -> Mapping[str, Any]:
    return next(r for r in records if r["level"] == "cublas" and r["dtype"] == BF16 and _is(r, size))


def projection_shapes(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, int, int]]:
    """The recorded non-square shapes, N×K first, then M (decode-sized M first)."""
    shapes = {(r["M"], r["N"], r["K"]) for r in records if r["level"] == LEVEL_ID and not r["M"] == r["N"] == r["K"]}
    return sorted(shapes, key=lambda s: (fp8_gemm.PROJECTION_NK.index((s[1], s[2]))
                                         if (s[1], s[2]) in fp8_gemm.PROJECTION_NK else 99, s[1], s[2], s[0]))


# --- figures -----------------------------------------------------------------------------------------

def _clock(record: Mapping[str, Any]) -> str:
    mhz = record.get("sm_clock_mhz")
    return f"{mhz:.0f} MHz" if mhz else "clock not sampled"


def steps_figure(records: Optional[Sequence[Mapping[str, Any]]] = None, subtitle: Optional[str] = None,
                 sizes: Sequence[int] = SQUARE_SIZES) -> Any:
    """TFLOPS of every step at 4096³ and 8192³ beside cuBLASLt FP8 (fast accumulation and promoted),
    cuBLAS bf16 and Level 11 in bf16; each bar is labelled with its SM clock (the power cap lowers it
    at 8192³, so compare at 4096³). records: a run's records (default: the recorded run)."""
    import plotly.graph_objects as go

    from gemm_course.display.plots import PALETTE, _layout

    if records is None:
        run = recorded_run()
        records, subtitle = run["records"], subtitle or where(run["provenance"])
    fig = go.Figure()
    for i, n in enumerate(sizes):
        bars = square_rows(records, n)
        if not bars:
            continue
        hover = []
        for r in bars:
            extra = ""
            if r.get("ratio_to_cublas") is not None and r["level"] == LEVEL_ID:
                extra = (f"<br>{r['ratio_to_cublas']:.1%} of {r.get('baseline') or 'cuBLASLt'} timed just before it "
                         f"({r['cublas_paired_sm_clock_mhz']:.0f} MHz)")
            hover.append(f"{label(r).split(' · ')[0]}<br>{r['tflops']:.1f} TFLOPS at {_clock(r)}, "
                         f"median {r['median_ms']:.3f} ms{extra}")
        fig.add_trace(go.Bar(
            name=f"{n}³", x=[label(r, short=True) for r in bars], y=[r["tflops"] for r in bars],
            text=[f"{r['tflops']:.0f}<br>{r.get('sm_clock_mhz') or 0:.0f} MHz" for r in bars], textposition="outside",
            marker_color=PALETTE[i % len(PALETTE)], customdata=hover,
            hovertemplate="%{customdata}<extra>" + f"{n}³" + "</extra>"))
    fig.update_layout(barmode="group", uniformtext=dict(minsize=8, mode="show"))
    fig = _layout(fig, "FP8 steps against cuBLASLt and bf16 · FP8 各步与 cuBLASLt、bf16 的对比", "",
                  "TFLOPS (bar label: SM clock) · TFLOPS（柱上标注 SM 时钟频率）", subtitle=subtitle, plot_height=380)
    top = max((t for tr in fig.data for t in tr.y), default=1)
    fig.update_yaxes(range=[0, top * 1.22])
    return fig


def projection_figure(records: Optional[Sequence[Mapping[str, Any]]] = None, subtitle: Optional[str] = None) -> Any:
    """The projection shapes (M = 64, 128 and 4096 against three weight matrices): Level 13's fastest
    step at each, beside the fastest of cuBLASLt's FP8 runs, its block-scaled GEMM (the fine-grained kernels'
    baseline) and cuBLAS in bf16 (log scale)."""
    import plotly.graph_objects as go

    from gemm_course.display.plots import CUBLAS_COLOR, PALETTE, _layout

    if records is None:
        run = recorded_run()
        records, subtitle = run["records"], subtitle or where(run["provenance"])
    shapes = projection_shapes(records)
    x = [f"{M}×{N}×{K}" for M, N, K in shapes]
    ours = [fastest_step(records, s) for s in shapes]
    lt = [fastest_cublaslt(records, s) for s in shapes]
    bf = [cublas_bf16(records, s) for s in shapes]
    blockwise = [cublaslt(records, s, "cublaslt_blockwise") for s in shapes]
    series = [("Level 13, fastest step · 第 13 级最快的一步", ours, PALETTE[0], lambda r: label(r).split(" · ")[0]),
              ("cuBLASLt FP8, faster mode · cuBLASLt FP8，较快的模式", lt, CUBLAS_COLOR, lambda r: label(r).split(" · ")[0])]
    if all(blockwise):  # the fine-grained kernels' own baseline, where this run had it
        series.append(("cuBLASLt FP8, block-scaled · cuBLASLt FP8，块缩放", blockwise, PALETTE[1 % len(PALETTE)],
                       lambda r: label(r).split(" · ")[0]))
    series.append(("cuBLAS bf16", bf, "#999999", lambda r: "bf16"))
    fig = go.Figure()
    for name, rows, color, note in series:
        fig.add_trace(go.Bar(
            name=name, x=x, y=[r["tflops"] for r in rows], marker_color=color,
            text=[f"{r['tflops']:.0f}" for r in rows], textposition="outside",
            customdata=[f"{note(r)}, {r['tflops']:.1f} TFLOPS at {_clock(r)}" for r in rows],
            hovertemplate="%{x}<br>%{customdata}<extra></extra>"))
    fig.update_layout(barmode="group")
    fig = _layout(fig, "Projection shapes: M tokens × a weight matrix · 投影形状：M 个 token × 一个权重矩阵",
                  "M×N×K", "TFLOPS (log scale) · TFLOPS（对数坐标）", subtitle=subtitle, plot_height=380)
    fig.update_yaxes(type="log")
    fig.update_xaxes(type="category")
    return fig


def number_line_figure() -> Any:
    """What 8 bits hold: every positive e4m3 value, with the gap to the next value relative to it.
    Normal numbers keep 3 fraction bits (a gap of 1/8 to 1/15 of the value); the subnormals below
    2^-6 keep fewer, and the gap grows to the whole value at 2^-9."""
    import plotly.graph_objects as go

    from gemm_course.display.plots import PALETTE, _layout

    values = fp8.E4M3_VALUES[1:0x7F].astype(np.float64)  # 0x01 … 0x7E: the positive finite values
    gaps = np.diff(fp8.E4M3_VALUES[1:0x7F].astype(np.float64))
    rel = gaps / values[:-1]
    normal = values[:-1] >= fp8.E4M3_MIN_NORMAL
    fig = go.Figure()
    for name, keep, color in (("normal: 1.MMM × 2^(E−7) · 正规数", normal, PALETTE[0]),
                              ("subnormal: 0.MMM × 2^−6 · 次正规数", ~normal, PALETTE[1])):
        fig.add_trace(go.Scatter(x=values[:-1][keep].tolist(), y=rel[keep].tolist(), mode="markers", name=name,
                                 marker=dict(color=color, size=6),
                                 hovertemplate="%{x:.4g}: next value %{y:.1%} higher<extra></extra>"))
    for x, text in ((fp8.E4M3_MIN_SUBNORMAL, "2⁻⁹"), (fp8.E4M3_MIN_NORMAL, "2⁻⁶"), (fp8.E4M3_MAX, "448")):
        fig.add_vline(x=x, line=dict(color="#999", dash="dot"), annotation_text=text, annotation_position="top")
    fig = _layout(fig, "What 8 bits hold: the positive e4m3 values · 8 位能表示什么：e4m3 的正数",
                  "value (log scale) · 数值（对数坐标）", "gap to the next value, relative · 到下一个值的相对间距",
                  plot_height=300)
    fig.update_xaxes(type="log", exponentformat="power")
    fig.update_yaxes(type="log", tickformat=".0%")
    return fig


def promotion_figure(metric: str = "rel_fro") -> Any:
    """fp8_accuracy.promotion_figure of the recorded promotion study, with where it was measured."""
    from gemm_course.fp8.accuracy import promotion_figure as draw

    study = recorded_accuracy_file()
    rows = study["promotion"]
    p = study["provenance"]
    M, N = rows[0]["M"], rows[0]["N"]
    sub = (f"per-tensor e4m3 inputs, {M}×{N}×K; the model is a model, not the hardware; measured on {p['gpu']}, "
           f"{p['date'][:10]} · 逐张量 e4m3 输入，{M}×{N}×K；模型只是模型，不是硬件；{p['gpu']} 实测，{p['date'][:10]}")
    return draw(rows, metric, subtitle=sub)


def outlier_figure(metrics: Sequence[str] = ("rest_rel_fro", "rel_fro")) -> Any:
    """fp8_accuracy.outlier_figure of the recorded outlier study (errors, or fractions of A)."""
    from gemm_course.fp8.accuracy import outlier_figure as draw

    study = recorded_accuracy_file()
    rows = study["outliers"]
    M, N, K, c = rows[0]["M"], rows[0]["N"], rows[0]["K"], rows[0]["outlier_channels"]
    sub = (f"{M}×{N}×{K}, {c} outlier channels in A; quantisation error only, against the float64 product "
           f"(NumPy, seed {rows[0]['seed']}) · {M}×{N}×{K}，A 有 {c} 个离群通道；仅量化误差，与 float64 乘积比较"
           f"（NumPy，种子 {rows[0]['seed']}）")
    return draw(rows, metrics, subtitle=sub)


# --- tables ------------------------------------------------------------------------------------------

def counters_rows() -> list[dict[str, Any]]:
    """One row per (shape, step) of the recorded counters, with the numbers the table shows."""
    data = recorded_counters()
    out = []
    for r in data["rows"]:
        m = r["metrics"]
        out.append({"shape": shape_label(r), "M": r["M"], "N": r["N"], "K": r["K"], "params": r["params"],
                    "step": step_label(r["params"]), "tensor_pipe_pct": m["tensor_pipe_pct"],
                    "issue_active_pct": m["issue_active_pct"], "sm_clock_mhz": m["sm_clock_hz"] / 1e6,
                    "duration_us": m["duration_ns"] / 1e3, "dram_read_mb": m["dram_read_bytes"] / 1e6,
                    "dram_pct": m["dram_pct"]})
    return out


def small_m_run() -> dict[str, Any]:
    """The recorded run of the decode shapes (M = 64, 128): the 64-row kernel beside the 128-row one and
    the per-tensor 128×128 kernel, each paired with cuBLASLt: {"records", "provenance", "file"}."""
    for path in results.recorded_files():
        data = results.load(path)
        if any(r["level"] == LEVEL_ID and r["params"].get("block_m") == 64 for r in data.get("records", [])):
            return {"records": data["records"], "provenance": data["provenance"], "file": path.name}
    raise LookupError("no recorded run of the 64-row FP8 kernel · 没有 64 行 FP8 内核的实测记录")


def small_m_counters() -> list[dict[str, Any]]:
    """The recorded counters of the decode-shape steps at 64×7168×16384 (the file that profiles block_m=64)."""
    for path in results.recorded_files():
        data = results.load(path)
        rows = data.get("fp8_counters", [])
        if any(r["params"].get("block_m") == 64 for r in rows):
            return [{**r, "provenance": data["provenance"]} for r in rows]
    raise LookupError("no recorded counters of the 64-row FP8 kernel · 没有 64 行 FP8 内核的计数器记录")


def small_m_table() -> Any:
    """TFLOPS and the share of cuBLASLt (timed right before) of every decode-shape step, shape by shape;
    then the counters at 64×7168×16384."""
    from IPython.display import HTML

    from gemm_course.bilingual.language import split
    from gemm_course.display.diagrams import table

    run = small_m_run()
    rows = [r for r in run["records"] if r["level"] == LEVEL_ID]
    body = [[shape_label(r), step_label(r["params"]), f"{r['tflops']:.1f}",
             f"{r['ratio_to_cublas']:.1%} ({r.get('baseline', 'cuBLASLt')})", f"{r['sm_clock_mhz']:.0f} MHz"] for r in rows]
    first = table(["shape · 形状", "step · 步骤", "TFLOPS", "of its baseline · 占其基准", "SM clock · SM 时钟"], body)
    counters = small_m_counters()
    body2 = [[shape_label(r), step_label(r["params"]), f"{r['metrics']['tensor_pipe_pct']:.1f}%",
              f"{r['metrics']['dram_pct']:.1f}%", f"{r['metrics']['duration_ns'] / 1e3:.1f} µs"] for r in counters]
    second = table(["shape · 形状", "step · 步骤", "Tensor pipe busy · 张量流水线忙碌", "DRAM, % of peak · DRAM 占峰值",
                    "time · 时间"], body2)
    notes = f"<p><small>{split(where(run['provenance']))}</small></p>"
    notes2 = f"<p><small>{split(where(counters[0]['provenance'], 'counters'))}</small></p>"
    return HTML(first.data + notes + second.data + notes2)


def staged_run() -> dict[str, Any]:
    """The recorded run of staged scales (fp8 --record --staged): the blockwise kernels with 128-row and
    64-row tiles, each without and with staged scales, at the squares and the decode shapes, each right after
    block-scaled cuBLASLt: {"records", "provenance", "file"}."""
    for path in results.recorded_files():
        data = results.load(path)
        if any(r["level"] == LEVEL_ID and r["params"].get("staged_scales") for r in data.get("records", [])):
            return {"records": data["records"], "provenance": data["provenance"], "file": path.name}
    raise LookupError("no recorded run of staged scales · 没有缩放因子经共享内存的实测记录")


def staged_pairs(records: Optional[Sequence[Mapping[str, Any]]] = None) -> list[dict[str, Any]]:
    """Per shape and tile height (128 or 64 rows): the kernel without and with staged scales, from one run;
    squares first, then the decode shapes. gain: the staged kernel's time saved (its TFLOPS over the other's,
    minus one); cycle_gain: the same in SM cycles (time × the kernel's own clock)."""
    records = staged_run()["records"] if records is None else records
    ours = [r for r in records if r["level"] == LEVEL_ID]
    shapes = sorted({(r["M"], r["N"], r["K"]) for r in ours}, key=lambda s: (s[0] != s[1] or s[1] != s[2], s))
    cycles = lambda r: r["median_ms"] * r["sm_clock_mhz"]  # noqa: E731
    out = []
    for shape in shapes:
        for rows in (128, 64):
            pick = {bool(r["params"].get("staged_scales")): r for r in ours
                    if _is(r, shape) and r["params"].get("block_m", 128) == rows}
            if set(pick) == {False, True}:
                out.append({"shape": shape, "block_m": rows, "unstaged": pick[False], "staged": pick[True],
                            "gain": pick[True]["tflops"] / pick[False]["tflops"] - 1,
                            "cycle_gain": cycles(pick[False]) / cycles(pick[True]) - 1})
    return out


def staged_counters() -> dict[str, Any]:
    """The recorded counters of staged scales (fp8 --counters --staged, clocks/h200_13_staged_counters.json):
    {"rows", "provenance"}, each row a kernel at one shape with its metrics."""
    data = results.load(results.CLOCKS_DIR / "h200_13_staged_counters.json")
    return {"rows": data["promotion_counters"], "provenance": data["provenance"]}


def staged_figure(pairs: Optional[Sequence[Mapping[str, Any]]] = None, subtitle: Optional[str] = None) -> Any:
    """What staging the scales changes, shape by shape: the time it saves (or costs) the 128-row and the
    64-row kernel, each pair from one run."""
    import plotly.graph_objects as go

    from gemm_course.display.plots import PALETTE, _layout

    if pairs is None:
        run = staged_run()
        pairs, subtitle = staged_pairs(run["records"]), subtitle or where(run["provenance"])
    x = list(dict.fromkeys(shape_label(p["unstaged"]) for p in pairs))
    fig = go.Figure()
    for i, (rows, name) in enumerate(((128, "128-row tile · 128 行分块"), (64, "64-row tile · 64 行分块"))):
        mine = {shape_label(p["unstaged"]): p for p in pairs if p["block_m"] == rows}
        ys = [100 * mine[k]["gain"] if k in mine else None for k in x]
        fig.add_trace(go.Bar(
            name=name, x=x, y=ys, marker_color=PALETTE[i % len(PALETTE)],
            text=[f"{y:+.1f}%" if y is not None else "" for y in ys], textposition="outside",
            customdata=[f"{mine[k]['unstaged']['tflops']:.1f} → {mine[k]['staged']['tflops']:.1f} TFLOPS"
                        if k in mine else "" for k in x],
            hovertemplate="%{x}<br>%{customdata}<extra></extra>"))
    fig.add_hline(y=0, line_color="#666666", line_width=1)
    fig.update_layout(barmode="group")
    fig = _layout(fig, "Scales staged by the producer: time saved · 缩放因子由生产者送入共享内存：节省的时间",
                  "M×N×K", "faster by, % · 加快，%", subtitle=subtitle, plot_height=360)
    fig.update_xaxes(type="category")
    return fig


def staged_table() -> Any:
    """Folded: every pair of the staged recording (TFLOPS, share of cuBLASLt, clock), then the counters."""
    run, counters = staged_run(), staged_counters()
    timing = Table([bilingual_text("shape", "形状"), bilingual_text("tile", "分块"), bilingual_text("TFLOPS, loaded → staged", "TFLOPS，自行加载 → 经共享内存"),
                    bilingual_text("of cuBLASLt", "占 cuBLASLt"), bilingual_text("faster: time, cycles", "加快：时间，周期")],
                   [[shape_label(p["unstaged"]), f"{p['block_m']}×128",
                     f"{p['unstaged']['tflops']:.1f} → {p['staged']['tflops']:.1f}",
                     f"{p['unstaged']['ratio_to_baseline']:.1%} → {p['staged']['ratio_to_baseline']:.1%}",
                     f"{p['gain']:+.1%} / {p['cycle_gain']:+.1%}"] for p in staged_pairs(run["records"])],
                   caption=from_message(where(run["provenance"])))
    m = lambda r, k: r["metrics"].get(k)  # noqa: E731
    lt = _baseline_label({"level": "cublas", "dtype": DTYPE, "baseline": "cublaslt_blockwise", "params": {}}, short=True)
    rows = [[shape_label(r), from_message(step_label(r["step"]) if r["kind"] == "fp8" else lt),
             f"{m(r, 'cycles_elapsed_avg') / 1e3:.1f}k", f"{m(r, 'global_load_instructions') / 1e3:.1f}k",
             f"{m(r, 'tensor_pipe_pct'):.1f}%", f"{m(r, 'stall_long_scoreboard'):.2f}", f"{m(r, 'stall_lg_throttle'):.2f}",
             f"{m(r, 'stall_mio_throttle'):.2f}", f"{m(r, 'stall_dispatch_stall'):.2f}"] for r in counters["rows"]]
    profile = Table([bilingual_text("shape", "形状"), bilingual_text("kernel", "内核"), bilingual_text("cycles", "周期"),
                     bilingual_text("global loads", "全局加载指令"), bilingual_text("Tensor pipe busy", "张量流水线忙碌"),
                     "long_scoreboard", "lg_throttle", "mio_throttle", "dispatch_stall"], rows,
                    caption=from_message(where(counters["provenance"], "counters")))
    lines = len(timing.rows) + len(profile.rows)
    return Fold(bilingual_text(f"Staged scales: the recorded pairs and their counters ({lines} rows)",
                      f"缩放因子经共享内存：实测的成对结果及其计数器（{lines} 行）"), timing, profile)


def _recorded_file(key: str, with_baseline: str = "deepgemm") -> dict[str, Any]:
    """The recorded file holding `key` ("peer_records", "narrow_records") with a record of `with_baseline` among
    them (the narrow-tiles run beside DeepGEMM, not the one without it): {"records", "provenance", "file"}."""
    for path in results.recorded_files():
        data = results.load(path)
        if any(r.get("baseline") == with_baseline for r in data.get(key) or ()):
            return {"records": data[key], "provenance": data["provenance"], "file": path.name}
    raise LookupError(f"no recorded file with {key} · 没有含 {key} 的实测记录")


def deepgemm_rows(peer: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """The DeepGEMM comparison (fp8.deepgemm.peer_table of the recorded peer run, or of `peer`, a
    _recorded_file("peer_records") already found): one row per shape."""
    from gemm_course.fp8.deepgemm import peer_table

    return peer_table((peer or _recorded_file("peer_records"))["records"])


def narrow_rows(narrow: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """Per decode shape of the narrow-tiles run (or of `narrow`, a _recorded_file("narrow_records") already found):
    the best recorded setting, the fastest narrow tile and DeepGEMM, all from that one run."""
    run = (narrow or _recorded_file("narrow_records"))["records"]
    out = []
    for shape in dict.fromkeys((r["M"], r["N"], r["K"]) for r in run):
        rs = [r for r in run if (r["M"], r["N"], r["K"]) == shape]
        best = next(r for r in rs if r["level"] == LEVEL_ID and (r["setting_from"] or "").startswith(("tuner", "chapter")))
        top = max((r for r in rs if r["level"] == LEVEL_ID and r["params"].get("block_n", 128) < 128),
                  key=lambda r: r["tflops"])
        peer = next(r for r in rs if r.get("baseline") == "deepgemm")
        out.append({"shape": shape, "best": best, "narrow": top, "deepgemm": peer})
    return out


def deepgemm_table() -> Any:
    """Folded: the recorded DeepGEMM run (every shape: the three GEMMs and their ratios), then the narrow-tiles run."""
    peer, narrow_run = _recorded_file("peer_records"), _recorded_file("narrow_records")
    rows = deepgemm_rows(peer)
    timing = Table([bilingual_text("shape", "形状"), "DeepGEMM", bilingual_text("cuBLASLt, block-scaled", "cuBLASLt，分块缩放"),
                    bilingual_text("Level 13", "第 13 级"), bilingual_text("Level 13 / DeepGEMM", "第 13 级 / DeepGEMM"),
                    bilingual_text("DeepGEMM / cuBLASLt", "DeepGEMM / cuBLASLt")],
                   [[f"{r['M']}×{r['N']}×{r['K']}", f"{r['deepgemm_tflops']:.1f}", f"{r['cublaslt_blockwise_tflops']:.1f}",
                     f"{r['level13_tflops']:.1f}", f"{r['level13_over_deepgemm']:.2f}", f"{r['deepgemm_over_cublaslt']:.2f}"]
                    for r in rows],
                   caption=from_message(where(peer["provenance"])))
    narrow = Table([bilingual_text("shape", "形状"), bilingual_text("best so far", "此前最佳"),
                    bilingual_text("fastest narrow tile", "最快的窄分块"), "DeepGEMM",
                    bilingual_text("narrow / DeepGEMM", "窄分块 / DeepGEMM")],
                   [["×".join(map(str, r["shape"])), f"{r['best']['tflops']:.1f}",
                     f"{r['narrow']['tflops']:.1f} (64×{r['narrow']['params']['block_n']}, "
                     f"splits={r['narrow']['params']['splits']})", f"{r['deepgemm']['tflops']:.1f}",
                     f"{r['narrow']['tflops'] / r['deepgemm']['tflops']:.2f}"] for r in narrow_rows(narrow_run)],
                   caption=from_message(where(narrow_run["provenance"])))
    lines = len(timing.rows) + len(narrow.rows)
    return Fold(bilingual_text(f"Against DeepGEMM: the recorded runs in TFLOPS ({lines} rows)",
                               f"与 DeepGEMM 对比：实测结果，单位 TFLOPS（{lines} 行）"), timing, narrow)


def counters_table() -> Any:
    """The recorded counters of every step at 4096³ and 64×7168×16384, as a table."""
    from IPython.display import HTML

    from gemm_course.bilingual.language import split
    from gemm_course.display.diagrams import table

    rows = counters_rows()
    header = ["shape · 形状", "step · 步骤", "Tensor pipe busy · 张量流水线忙碌", "issue active · 发射活跃",
              "SM clock · SM 时钟", "time · 时间", "DRAM read · DRAM 读取", "DRAM, % of peak · DRAM 占峰值"]
    body = [[r["shape"], r["step"], f"{r['tensor_pipe_pct']:.1f}%", f"{r['issue_active_pct']:.1f}%",
             f"{r['sm_clock_mhz']:.0f} MHz", f"{r['duration_us']:.1f} µs", f"{r['dram_read_mb']:.1f} MB",
             f"{r['dram_pct']:.1f}%"] for r in rows]
    note = where(recorded_counters()["provenance"], "counters")
    return HTML(table(header, body).data + f"<p><small>{split(note)}</small></p>")


def compile_rows() -> list[dict[str, Any]]:
    """Each kernel of 13_fp8_blockscaled.cu at its default ring depth, compiled by NVRTC for sm_90a (no
    GPU needed): registers, spills, shared memory, blocks per SM."""
    rows = []
    for scaling, options in (("per_tensor", {"block_n": 256}), ("per_tensor", {"block_n": 128}),
                             ("blockwise", {"overlap": False}), ("blockwise", {"overlap": True})):
        r = fp8_gemm.fp8_compile_report(scaling, **options)
        rows.append({"kernel": r.kernel, "registers": r.registers, "spills": bool(r.spills),
                     "static_shared_bytes": r.static_shared_bytes, "dynamic_shared_bytes": r.dynamic_shared_bytes,
                     "blocks_per_sm": r.occupancy.blocks_per_sm, "report": r})
    return rows


def compile_table() -> Any:
    """compile_rows as a table."""
    from gemm_course.display.diagrams import table

    header = ["kernel · 内核", "registers per thread · 每线程寄存器", "spills · 溢出",
              "shared memory (dynamic + static) · 共享内存（动态 + 静态）", "blocks per SM · 每 SM 线程块"]
    rows = compile_rows()
    grid = table(header, [[r["kernel"], r["registers"], "yes · 有" if r["spills"] else "none · 无",
                           f"{r['dynamic_shared_bytes']} + {r['static_shared_bytes']} B", r["blocks_per_sm"]]
                          for r in rows])
    spills = sum(r["spills"] for r in rows)
    regs = "/".join(sorted({str(r["registers"]) for r in rows}))
    per_sm = "/".join(sorted({str(r["blocks_per_sm"]) for r in rows}))
    return Fold(bilingual_text(f"Compile reports of the {len(rows)} FP8 kernels (sm_90a): {regs} registers, "
                     f"{'no spills' if not spills else f'{spills} with spills'}, {per_sm} block per SM",
                     f"{len(rows)} 个 FP8 内核的编译报告（sm_90a）：{regs} 个寄存器，"
                     f"{'无溢出' if not spills else f'{spills} 个有溢出'}，每 SM {per_sm} 个线程块"),
                grid.data)


# --- the accuracy check ------------------------------------------------------------------------------

def emulate_blockwise(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any, bug: Optional[str] = None) -> Any:
    """The blockwise kernel's arithmetic in NumPy (float64 result): for each 128-deep k-block, the fp32
    sum of the e4m3 products, times the block's two scales, added into an fp32 accumulator (what
    promotion does); C rounded to bf16. bug: "dropped k-step" (one k = 32 slice of every k-block
    missing) or "wrong row's scales" (each row of C takes the A scales of the row above): the two
    mistakes the allowed error must catch."""
    from gemm_course.run.dtypes import to_bfloat16, to_float64

    A = fp8.decode_e4m3(a_bits).astype(np.float32)
    B = fp8.decode_e4m3(b_bits).astype(np.float32)
    M, K = A.shape
    N = B.shape[0]
    acc = np.zeros((M, N), np.float32)
    for kb in range(math.ceil(K / fp8.SCALE_BLOCK)):
        lo, hi = kb * fp8.SCALE_BLOCK, min(K, (kb + 1) * fp8.SCALE_BLOCK)
        a = A[:, lo:hi]
        if bug == "dropped k-step":
            a = a.copy()
            a[:, 32:64] = 0
        part = a @ B[:, lo:hi].T                                           # the Tensor Cores' k-block sum
        sa = np.roll(a_scales[:, kb], 1) if bug == "wrong row's scales" else a_scales[:, kb]
        sb = np.repeat(b_scales[:, kb], fp8.SCALE_BLOCK)[:N]
        acc += part * (sa[:, None] * sb[None, :]).astype(np.float32)      # promotion: fp32 FMAs
    return to_float64(to_bfloat16(acc))


def _error_ratio(C: Any, a_bits: Any, a_s: Any, b_bits: Any, b_s: Any, K: int, scaling: str) -> float:
    """max |C − reference| / allowed over all of C (NaN, an unwritten element, counts as infinite)."""
    xp = fp8._array_module(C)
    ref = fp8.reference_gemm_fp8(a_bits, a_s, b_bits, b_s)
    allowed = fp8_gemm.allowed_error(ref, fp8_gemm.magnitude_gemm(a_bits, a_s, b_bits, b_s), K, scaling)
    err = xp.abs(C - ref) / allowed
    return float("inf") if bool(xp.isnan(err).any()) else float(err.max())


def _hopper() -> bool:
    try:
        fp8_gemm._require_hopper()
    except RuntimeError:
        return False
    return True


def check(shapes: Sequence[tuple[int, int, int]] = CHECK_SHAPES) -> list[dict[str, Any]]:
    """On a Hopper GPU: every step of the chapter on odd shapes, C poisoned with NaN first, against the
    float64 reference (error / allowed ≤ 1 passes). Elsewhere: the same check applied to a NumPy
    emulation of the blockwise kernel, correct and with two planted bugs. Shows a table; returns rows."""
    from gemm_course.display.diagrams import table
    from gemm_course.run.dtypes import to_float64

    rows: list[dict[str, Any]] = []
    if _hopper():
        import cupy

        for M, N, K in shapes:
            for step in STEPS:
                scaling = step["scaling"]
                opts = {k: v for k, v in step.items() if k != "scaling"}
                if step.get("splits") == "auto" and fp8_gemm.resolve_splits("auto", M, N, K, fp8_gemm._sm_count()) == 1:
                    continue  # the same kernel as the step before it (as in record_fp8)
                a_bits, a_s, b_bits, b_s = fp8_gemm.random_fp8_operands(M, N, K, scaling, seed=M + N + K)
                sa, sb = (a_s, b_s) if scaling == "blockwise" else fp8_gemm.full_scales(a_s, b_s, M, N, K)
                launch, C = fp8_gemm.prepare(cupy.asarray(a_bits), a_s, cupy.asarray(b_bits), b_s, scaling=scaling, **opts)
                C.fill(fp8_gemm.BF16_NAN)
                launch()
                got = to_float64(cupy.asnumpy(C))
                ratio = _error_ratio(got, a_bits, sa, b_bits, sb, K, scaling)
                rows.append({"shape": f"{M}×{N}×{K}", "what": step_label(step), "error_ratio": ratio,
                             "passed": ratio <= 1})
        where_ = "measured live · 实时运行"
    else:
        for M, N, K in EMULATED_SHAPES:
            a_bits, a_s, b_bits, b_s = fp8_gemm.random_fp8_operands(M, N, K, "blockwise", seed=M + N + K)
            for bug, what in ((None, "emulated kernel, correct · 模拟内核，正确"),
                              ("dropped k-step", "emulated, one k-step of 32 dropped per k-block · 模拟，每个 k 块丢掉一个 32 深的 k 步"),
                              ("wrong row's scales", "emulated, the wrong row's A scales · 模拟，用了错误行的 A 缩放因子")):
                C = emulate_blockwise(a_bits, a_s, b_bits, b_s, bug)
                ratio = _error_ratio(C, a_bits, a_s, b_bits, b_s, K, "blockwise")
                rows.append({"shape": f"{M}×{N}×{K}", "what": what, "error_ratio": ratio, "passed": ratio <= 1})
        where_ = "no Hopper GPU: a NumPy emulation of the blockwise kernel · 没有 Hopper GPU：blockwise 内核的 NumPy 模拟"
    grid = table(["shape · 形状", "what ran · 运行内容", "max error / allowed · 最大误差 / 允许误差", "passed · 通过"],
                 [[r["shape"], r["what"], f"{r['error_ratio']:.3g}", "yes · 是" if r["passed"] else "no · 否"]
                  for r in rows])
    passed = sum(r["passed"] for r in rows)
    en, zh = where_.split(" · ", 1)
    show_text(Fold(bilingual_text(f"Check ({en}): {len(rows)} rows, {passed} pass",
                        f"正确性检查（{zh}）：{len(rows)} 行，{passed} 行通过"), grid.data))
    return Shown(rows)


# --- live --------------------------------------------------------------------------------------------

def live(size: int = 4096) -> list[dict[str, Any]]:
    """On a Hopper GPU: check and time the chapter's steps at size³ against cuBLASLt (fp8_gemm.record_fp8,
    no bf16 baselines) and draw them like steps_figure. Elsewhere: one line saying the recorded run
    is what the figures below show. Returns the live records (none without a Hopper GPU)."""
    from gemm_course import device
    from gemm_course.display.plots import show

    if not _hopper():
        show_text(bilingual_text("The FP8 kernels need a Hopper GPU (sm_90a) and this runtime has none: the figures below "
                       "show the recorded H200 run.", "FP8 内核需要 Hopper GPU（sm_90a），当前环境没有：下面的图展示 "
                       "H200 上的实测结果。"))
        return Shown()
    run = fp8_gemm.record_fp8(None, [size], bf16_baselines=False)
    name = device.gpu_name()
    show(steps_figure(run["records"], subtitle=f"measured live on {name} · 在 {name} 上实时测量", sizes=(size,)))
    return run["records"]
