"""Level 12 for the notebook: the multi-GPU runs beside the cost model, as figures and tables.

Where the numbers come from (:func:`runs`): on a machine with 2 or more GPUs, one live run of
``multigpu.bench_multigpu`` (made once per session); elsewhere every recorded result file with
"multigpu" rows (``gemm_course/results``), newest first.

How the model is calibrated (:func:`calibration`, :func:`split_model`):

* communication: a file with "collectives" holds an α-β fit of each NCCL collective, and each
  collective is priced with its own fit. A file without them holds one link measurement per row
  (``link_gbs``: the bandwidth of a 512 MiB NCCL broadcast between the GPUs); then β = 1/link_gbs for
  every collective and α = 0, which is safe only while the bandwidth term dominates (the chapter
  does the arithmetic);
* local work: a row that carries its model (newer files: the local GEMMs and copies timed on GPU 0
  alone) keeps it; an older row gets 2·flops / (one GPU's rate at the same size), and SUMMA's local
  copies, never timed there, are left at 0.

Every function works without a GPU. Figures are plotly figures (show them with ``plots.show``),
tables are HTML (``diagrams.table``).
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Mapping, Optional, Sequence

import plotly.graph_objects as go

from gemm_course.multigpu import collectives
from gemm_course.measure import results
from gemm_course.multigpu.collectives import Links
from gemm_course.models import gemm_flops, row_split_model, summa_model

SPLITS = ("row split", "SUMMA")
TENSOR_PARALLEL = "tensor parallel"
FP16_RATE_FILE = "h200_top_rungs_float16.json"  # the course's recorded single-GPU fp16 ladder (cuBLAS inside)
FP16_RATE_SIZE = 8192
NETWORK_GBS = 50.0  # GPUs in separate machines, on paper: one network link per GPU
_LIVE: list[dict[str, Any]] = []


# --- the data ----------------------------------------------------------------------------------------

def runs() -> list[dict[str, Any]]:
    """The result dicts with multi-GPU rows: one live run on 2+ GPUs (cached), else the recorded files,
    newest first (so a newer recording of the same setting wins)."""
    from gemm_course.multigpu import schemes as multigpu

    if multigpu.gpu_count() >= 2:
        if not _LIVE:
            data = multigpu.bench_multigpu()
            data["provenance"]["live"] = True
            _LIVE.append(data)
        return list(_LIVE)
    data = [d for d in (results.load(f) for f in results.recorded_files()) if d.get("multigpu")]
    # newest day first; within a day, a run with cuBLAS locally before one with a course kernel (both
    # time SUMMA with cuBLAS: the first one's SUMMA rows are the ones shown)
    return sorted(data, key=lambda d: (d["provenance"].get("date", "")[:10],
                                       d["provenance"].get("local_gemm", "cublas") == "cublas"), reverse=True)


def where(data: Sequence[Mapping[str, Any]]) -> str:
    """One line for a figure: live or recorded, on what."""
    if not data:
        return ""
    p = data[0]["provenance"]
    if p.get("live"):
        return f"measured live on {p['gpus_visible']} × {p['gpu']}"
    dates = sorted({d["provenance"]["date"][:10] for d in data})
    return (f"recorded: {p['gpus_visible']} × {p['gpu']}, NCCL {p['nccl']}, CuPy {p['cupy']}, "
            f"{', '.join(dates)}")


def _local(data: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """The local GEMM of a row: SUMMA's panel updates are always cuBLAS (they need β = 1)."""
    if row["scheme"] != "row split":
        return "cublas"
    return row.get("local") or data["provenance"].get("local_gemm", "cublas")


def split_rows(data: Sequence[Mapping[str, Any]], scope: str = "end to end") -> list[dict[str, Any]]:
    """Row split and SUMMA rows of one scope, one per (scheme, size, local GEMM, GPUs), newest file first.
    Rows of files that predate scopes are "end to end"."""
    rows, seen = [], set()
    for d in data:
        for r in d["multigpu"]:
            if r["scheme"] not in SPLITS or r.get("scope", "end to end") != scope:
                continue
            local = _local(d, r)
            key = (r["scheme"], r["M"], local, r["gpus"])
            if key not in seen:
                seen.add(key)
                rows.append(dict(r, local=local, provenance=d["provenance"]))
    return rows


def one_gpu_rate(data: Sequence[Mapping[str, Any]], n: int, local: str = "cublas") -> Optional[float]:
    """TFLOPS of the one-GPU row split (the plain GEMM) at n³ with this local GEMM, if recorded."""
    for r in split_rows(data):
        if r["scheme"] == "row split" and r["gpus"] == 1 and r["M"] == n and r["local"] == local:
            return float(r["tflops"])
    return None


def fp16_rate() -> tuple[float, str]:
    """(TFLOPS, source) of cuBLAS in fp16 at 8192³ on one GPU: the median of the cuBLAS timings in the
    course's recorded fp16 ladder (each kernel there is timed beside cuBLAS, so there are several)."""
    d = results.load(results.RESULTS_DIR / FP16_RATE_FILE)
    n = FP16_RATE_SIZE
    rates = [r["tflops"] for r in d["records"]
             if r["level"] == "cublas" and r["dtype"] == "float16" and (r["M"], r["N"], r["K"]) == (n, n, n)]
    return statistics.median(rates), (f"median of {len(rates)} cuBLAS fp16 timings at {n}³ in {FP16_RATE_FILE} "
                                      f"({d['provenance']['gpu']}, {d['provenance']['date'][:10]})")


def fp32_rate(data: Sequence[Mapping[str, Any]], n: int = FP16_RATE_SIZE) -> tuple[float, str]:
    """(TFLOPS, source) of cuBLAS in fp32 at n³ on one GPU, from the multi-GPU run's one-GPU row."""
    rate = one_gpu_rate(data, n)
    if rate is None:
        raise ValueError(f"no one-GPU cuBLAS row at {n}³ in the multi-GPU runs")
    return rate, f"the one-GPU cuBLAS row at {n}³ of the multi-GPU run"


# --- the calibration ---------------------------------------------------------------------------------

def _fits(data: Sequence[Mapping[str, Any]], gpus: int = 2) -> Optional[dict[str, Any]]:
    for d in data:
        for c in d.get("collectives", []):
            if c["gpus"] == gpus and c.get("fits"):
                return c
    return None


def _row_links(row: Mapping[str, Any], data: Sequence[Mapping[str, Any]]) -> Links:
    """The links that price one recorded row: the fits of its own run if it has them, else α = 0 and
    β from the row's broadcast measurement."""
    for d in data:
        if row.get("provenance") is d["provenance"] or any(r is row for r in d["multigpu"]):
            c = _fits([d], row["gpus"])
            if c:
                return Links.from_dict(c["fits"])
    if row.get("link_gbs"):
        return Links.uniform(0.0, row["link_gbs"], label=f"α = 0, 1/β = {row['link_gbs']:.1f} GB/s (broadcast)")
    return Links()


def calibration(data: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The links that price the model on paper, and where they come from.

    Measured fits on 2 GPUs if a run has them; else α = 0 and β = 1/link_gbs of the row-split row at
    the largest size with cuBLAS locally (the same run as the one-GPU rate that prices its compute)."""
    c = _fits(data)
    if c:
        links = Links.from_dict(c["fits"])
        bc = links.fit_for("broadcast")
        return {"links": links, "measured_alpha": True, "alpha_s": bc.alpha_s, "link_gbs": bc.link_gbs,
                "source": "α-β fits of the NCCL collectives measured on 2 GPUs"}
    rows = [r for r in split_rows(data) if r["scheme"] == "row split" and r["local"] == "cublas" and r.get("link_gbs")]
    if not rows:
        raise ValueError("no recorded link measurement to calibrate the model with")
    row = max(rows, key=lambda r: r["M"])
    link = float(row["link_gbs"])
    return {"links": Links.uniform(0.0, link, label=f"α = 0, 1/β = {link:.1f} GB/s"), "measured_alpha": False,
            "alpha_s": 0.0, "link_gbs": link, "n": row["M"],
            "source": f"α = 0; β from the 512 MiB NCCL broadcast of the {row['M']}³ run ({link:.1f} GB/s)"}


# --- the model of a recorded row ---------------------------------------------------------------------

def split_model(row: Mapping[str, Any], data: Sequence[Mapping[str, Any]],
                scope: Optional[str] = None) -> dict[str, Any]:
    """The corrected model of one row split or SUMMA row (models.SchemeCost.as_dict()): the row's own
    if it carries one for this scope, else built from the recorded rate and link (see the module
    docstring)."""
    scope = scope or row.get("scope", "end to end")
    if row.get("model") and row["model"].get("scope") == scope:
        return dict(row["model"])
    n, P = row["M"], row["gpus"]
    rate = one_gpu_rate(data, n, row.get("local", "cublas") if row["scheme"] == "row split" else "cublas")
    if rate is None:
        raise ValueError(f"no one-GPU rate at {n}³ to price the local work of {row['scheme']}")
    links = _row_links(row, data)
    if row["scheme"] == "row split":
        compute_s = gemm_flops(n // P, n, n) / (rate * 1e12)
        return row_split_model(n, n, n, P, links, compute_s, 4, scope).as_dict()
    from gemm_course.multigpu.schemes import grid_shape

    pr, pc = grid_shape(P)
    L = pr * pc // math.gcd(pr, pc)
    panel_s = gemm_flops(n // pr, n // pc, n // L) / (rate * 1e12)
    return summa_model(n, n, n, pr, pc, links, panel_s, scope=scope).as_dict()


# Model phases under the names the measured runs use: a run times SUMMA's panel loop as one phase.
_PANEL_LOOP = {"pack panels": "panel loop", "panel broadcasts": "panel loop", "panel GEMMs": "panel loop"}
# A run with only "panel loop" and "gather C" timed SUMMA's distribution as part of the median only,
# and copied C into place inside its gather.
_TWO_PHASE_SUMMA = {"pack A, B blocks": "distribution", "send A, B blocks": "distribution",
                    "gather C blocks": "gather C", "unpack C": "gather C"}
UNTIMED = "distribution"


def phase_pairs(row: Mapping[str, Any], model: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """(measured, model) phase times in ms under the same names. Measured phases come from one extra
    run with a synchronisation between phases; where a run timed SUMMA's distribution only as part of
    the median, "distribution" is the median minus the timed phases."""
    measured = dict(row.get("phases_ms", {}))
    rename: dict[str, str] = {}
    if "panel loop" in measured:
        rename.update(_PANEL_LOOP)
    if row["scheme"] == "SUMMA" and "gather C" in measured and "gather C blocks" not in measured:
        rename.update(_TWO_PHASE_SUMMA)
        measured[UNTIMED] = max(0.0, row["median_ms"] - sum(measured.values()))
    modelled: dict[str, float] = {}
    for ph in model["phases"]:
        name = rename.get(ph["name"], ph["name"])
        modelled[name] = modelled.get(name, 0.0) + ph["ms"]
    return measured, modelled


def comparison(data: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every measured row split and SUMMA row beside its model, in both scopes.

    "algorithm" rows come from the run when it timed that scope; for a run that did not, from its
    phases (row split: "compute"; SUMMA: "panel loop"), marked from_phases."""
    out = []
    e2e = split_rows(data, "end to end")
    algorithm = {(r["scheme"], r["M"], r["local"], r["gpus"]): r for r in split_rows(data, "algorithm")}
    for r in e2e:
        key = (r["scheme"], r["M"], r["local"], r["gpus"])
        for scope in ("algorithm", "end to end"):
            m = split_model(r, data, scope)
            if scope == "end to end":
                measured_ms, from_phases = r["median_ms"], False
            elif key in algorithm:
                measured_ms, from_phases = algorithm[key]["median_ms"], False
                m = split_model(algorithm[key], data, scope)
            else:
                phase = "compute" if r["scheme"] == "row split" else "panel loop"
                measured_ms, from_phases = r.get("phases_ms", {}).get(phase), True
                if r["gpus"] == 1:
                    measured_ms, from_phases = r["median_ms"], False  # one GPU: the algorithm is the run
            if measured_ms is None:
                continue
            flops = 2 * r["M"] ** 3
            out.append({"scheme": r["scheme"], "n": r["M"], "local": r["local"], "gpus": r["gpus"], "scope": scope,
                        "measured_ms": measured_ms, "measured_tflops": flops / measured_ms / 1e9,
                        "model_ms": m["model_ms"], "model_tflops": m["model_tflops"], "from_phases": from_phases,
                        "model": m, "row": r})
    return out


# --- figures and tables of the row split and SUMMA ---------------------------------------------------

def _colors() -> Sequence[str]:
    from gemm_course.display.plots import PALETTE

    return PALETTE


def scaling_figure(data: Sequence[Mapping[str, Any]], model_gpus: Sequence[int] = (1, 2, 4, 8)) -> go.Figure:
    """TFLOPS against GPUs, end to end: measured (markers and lines) and the model at the same points
    (open markers), with the ideal P × one GPU."""
    from gemm_course.display.plots import _layout

    rows = [c for c in comparison(data) if c["scope"] == "end to end"]
    fig = go.Figure()
    series = sorted({(c["scheme"], c["n"], c["local"]) for c in rows})
    for i, (scheme, n, local) in enumerate(series):
        pts = sorted((c for c in rows if (c["scheme"], c["n"], c["local"]) == (scheme, n, local)),
                     key=lambda c: c["gpus"])
        color = _colors()[i % len(_colors())]
        name, name_zh = f"{scheme}, {n}³, local {local}", f"{_zh(scheme)}，{n}³，本地 {local}"
        fig.add_trace(go.Scatter(x=[c["gpus"] for c in pts], y=[c["measured_tflops"] for c in pts],
                                 mode="lines+markers", name=f"measured: {name} · 实测：{name_zh}", line=dict(color=color)))
        fig.add_trace(go.Scatter(x=[c["gpus"] for c in pts], y=[c["model_tflops"] for c in pts], mode="markers",
                                 name=f"model: {name} · 模型：{name_zh}",
                                 marker=dict(color=color, symbol="circle-open", size=12)))
    for n in sorted({c["n"] for c in rows}):
        t1 = one_gpu_rate(data, n)
        if t1:
            fig.add_trace(go.Scatter(x=list(model_gpus), y=[t1 * g for g in model_gpus], mode="lines",
                                     name=f"ideal (P × one GPU), {n}³ · 理想值（P × 单 GPU），{n}³",
                                     line=dict(dash="dot", color="#999")))
    return _layout(fig, "one GEMM over several GPUs, end to end · 多 GPU 上的一个 GEMM（端到端）",
                   "GPUs · GPU 数", "TFLOPS", subtitle=where(data) or None)


def phases_figure(data: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Each run on 2+ GPUs as two stacked bars: the measured phases and the model's, same names."""
    from gemm_course.display.plots import _layout

    fig = go.Figure()
    labels, stacks = [], []
    for c in comparison(data):
        if c["gpus"] < 2 or c["scope"] != "end to end":
            continue
        measured, modelled = phase_pairs(c["row"], c["model"])
        base, base_zh = f"{c['scheme']} {c['n']}³ {c['local']}", f"{_zh(c['scheme'])} {c['n']}³ {c['local']}"
        labels += [f"{base}: measured · {base_zh}：实测", f"{base}: model · {base_zh}：模型"]
        stacks += [measured, modelled]
    names: list[str] = []
    for s in stacks:
        names += [k for k in s if k not in names]
    for i, phase in enumerate(names):
        fig.add_trace(go.Bar(name=f"{phase} · {_PHASE_ZH[phase]}" if phase in _PHASE_ZH else phase, x=labels,
                             y=[s.get(phase, 0.0) for s in stacks],
                             marker_color=_colors()[i % len(_colors())]))
    fig.update_layout(barmode="stack")
    return _layout(fig, "where the time goes: measured phases and the model's · 时间构成：实测各阶段与模型",
                   "", "ms", subtitle=(where(data) + "; " + calibration(data)["source"]) if data else None)


def _gb(x: float) -> str:
    return f"{x / 1e9:.2f}"


def paper_rows(data: Sequence[Mapping[str, Any]], n: int = 16384, gpus: Sequence[int] = (1, 2, 4, 8),
               network_gbs: float = NETWORK_GBS) -> list[dict[str, Any]]:
    """multigpu.paper_models at n³, calibrated by :func:`calibration` and the one-GPU rate at n³."""
    from gemm_course.multigpu.schemes import paper_models

    cal = calibration(data)
    rate = one_gpu_rate(data, n)
    if rate is None:
        raise ValueError(f"no one-GPU rate at {n}³ to price the model with")
    return paper_models(cal["links"], n, rate, gpus, network_gbs)


# the scheme and scope names as table cells show them, "English · 中文": one language per mode
_CELL_ZH = {"row split": "行划分", "end to end": "端到端", "even start": "均匀起点", "algorithm": "算法本身",
            "one GPU": "单 GPU"}
# chart labels' Chinese halves: the names above, the collectives as the prose names them, a lane's work
_CHART_ZH = {**_CELL_ZH, "row split": "按行划分", "broadcast": "广播", "compute": "计算", "communication": "通信"}


_PHASE_ZH = {"broadcast B": "广播 B", "scatter A": "分发 A", "compute": "计算", "gather C": "收集 C",
             "pack A, B blocks": "打包 A、B 的各块", "send A, B blocks": "发送 A、B 的各块", "panel loop": "面板循环",
             "gather C blocks": "收集 C 的各块", "unpack C": "解包 C"}


def _zh(name: str) -> str:
    return _CHART_ZH.get(name, name)


def _cell(name: str) -> str:
    zh = _CELL_ZH.get(name)
    return f"{name} · {zh}" if zh else name


def paper_table(data: Sequence[Mapping[str, Any]], separate_machines: bool = False, n: int = 16384,
                gpus: Sequence[int] = (2, 4, 8), network_gbs: float = NETWORK_GBS):
    """The model at n³ on P GPUs (on paper beyond what was measured): GB each GPU receives in each scope
    beside the lower bound of any scheme, and the model's TFLOPS in each scope."""
    from gemm_course.display.diagrams import table

    rows = [r for r in paper_rows(data, n, (1, *gpus), network_gbs)
            if ("separate" in r["links"]) == separate_machines and r["gpus"] in gpus]
    pick = {(r["scheme"], r["gpus"], r["scope"]): r for r in rows}
    body = []
    for P in gpus:
        for scheme in SPLITS:
            if (scheme, P, "end to end") not in pick:
                continue
            e2e, even, alg = (pick[scheme, P, s] for s in ("end to end", "even start", "algorithm"))
            body.append([P, _cell(scheme), _gb(alg["bytes_per_gpu"]), _gb(even["bytes_per_gpu"]),
                         _gb(e2e["bytes_per_gpu"]), _gb(e2e["lower_bound_bytes"]),
                         f"{alg['model_tflops']:.1f}", f"{even['model_tflops']:.1f}", f"{e2e['model_tflops']:.1f}"])
    return table(["GPUs · GPU 数", "scheme · 方案", "GB/GPU algorithm · 算法本身", "GB/GPU even start · 均匀起点",
                  "GB/GPU end to end · 端到端", "lower bound GB · 下界", "TFLOPS algorithm · 算法本身",
                  "TFLOPS even start · 均匀起点", "TFLOPS end to end · 端到端"], body)


def scopes_table(data: Sequence[Mapping[str, Any]]):
    """Measured beside the model, in both scopes, for every run on 2+ GPUs (and its one-GPU base)."""
    from gemm_course.display.diagrams import table

    body = []
    for c in comparison(data):
        run = f"{c['scheme']} {c['n']}³ {c['local']}"
        zh_run = f"{_CELL_ZH.get(c['scheme'], c['scheme'])} {c['n']}³ {c['local']}"
        measured = f"{c['measured_ms']:.2f}"
        body.append([c["gpus"], f"{run} · {zh_run}" if zh_run != run else run, _cell(c["scope"]),
                     f"{measured} (phase) · {measured}（阶段）" if c["from_phases"] else measured, f"{c['model_ms']:.2f}",
                     f"{c['measured_tflops']:.1f}", f"{c['model_tflops']:.1f}"])
    return table(["GPUs · GPU 数", "run · 运行", "scope · 范围", "measured ms · 实测 ms", "model ms · 模型 ms",
                  "measured TFLOPS · 实测 TFLOPS", "model TFLOPS · 模型 TFLOPS"], body)


def paper_figure(data: Sequence[Mapping[str, Any]], n: int = 16384, gpus: Sequence[int] = (1, 2, 4, 8)) -> go.Figure:
    """The model at n³ on 1 to 8 GPUs of one machine (lines: scheme × scope) with the measured points."""
    from gemm_course.display.plots import _layout

    rows = [r for r in paper_rows(data, n, gpus) if "separate" not in r["links"]]
    fig = go.Figure()
    dash = {"algorithm": "dot", "even start": "dash", "end to end": "solid"}
    for i, scheme in enumerate(SPLITS):
        for scope in ("algorithm", "even start", "end to end"):
            pts = sorted((r for r in rows if r["scheme"] == scheme and r["scope"] == scope), key=lambda r: r["gpus"])
            if scheme == "SUMMA":  # one GPU is no grid: start SUMMA's lines at the plain GEMM
                pts = [r for r in rows if r["scheme"] == "row split" and r["scope"] == scope and r["gpus"] == 1] + pts
            fig.add_trace(go.Scatter(x=[r["gpus"] for r in pts], y=[r["model_tflops"] for r in pts], mode="lines",
                                     name=f"model: {scheme}, {scope} · 模型：{_zh(scheme)}，{_zh(scope)}",
                                     line=dict(color=_colors()[i], dash=dash[scope])))
    measured = [c for c in comparison(data) if c["n"] == n and c["local"] == "cublas" and c["scope"] == "end to end"]
    for i, scheme in enumerate(SPLITS):
        pts = [c for c in measured if c["scheme"] == scheme]
        fig.add_trace(go.Scatter(x=[c["gpus"] for c in pts], y=[c["measured_tflops"] for c in pts], mode="markers",
                                 name=f"measured: {scheme}, end to end · 实测：{_zh(scheme)}，端到端",
                                 marker=dict(size=11, color=_colors()[i], line=dict(color="#222", width=1.5))))
    cal = calibration(data)
    return _layout(fig, f"the model on paper, {n}³, one machine · 纸上推演：{n}³，单机", "GPUs · GPU 数", "TFLOPS",
                   subtitle=f"model: {cal['source']}; 4 and 8 GPUs never measured · 4 和 8 个 GPU 从未实测")


# --- the α-β model of the links ----------------------------------------------------------------------

def collectives_figure(data: Sequence[Mapping[str, Any]], gpus: int = 2) -> go.Figure:
    """Time of each NCCL collective against size (log-log): the measured points and their α-β fits when
    a run measured them; else the model (α = 0, recorded β) with the only measured points there are, the
    512 MiB broadcasts."""
    from gemm_course.display.plots import _layout

    fig = go.Figure()
    sizes = [float(s) for s in collectives.DEFAULT_SIZES]
    c = _fits(data, gpus)
    if c:
        links = Links.from_dict(c["fits"])
        for i, name in enumerate(collectives.MEASURED):
            pts = sorted((p for p in c.get("points", []) if p["collective"] == name), key=lambda p: p["n_bytes"])
            color = _colors()[i % len(_colors())]
            if pts:
                fig.add_trace(go.Scatter(x=[p["n_bytes"] for p in pts], y=[p["median_s"] * 1e3 for p in pts],
                                         mode="markers", name=f"measured: {name} · 实测：{_zh(name)}",
                                         marker=dict(color=color)))
            if name in links.fits:
                f = links.fits[name]
                fig.add_trace(go.Scatter(x=sizes, y=[f.seconds(s) * 1e3 for s in sizes], mode="lines",
                                         name=f"fit: α {f.alpha_s * 1e6:.1f} µs, 1/β {f.link_gbs:.0f} GB/s · "
                                              f"拟合：α {f.alpha_s * 1e6:.1f} µs，1/β {f.link_gbs:.0f} GB/s",
                                         line=dict(color=color)))
        subtitle = f"measured on {gpus} GPUs; fits from {collectives.BANDWIDTH_REGIME_BYTES >> 20} MiB up"
    else:
        cal = calibration(data)
        links = cal["links"]
        for i, name in enumerate(("broadcast", "all-reduce", "all-gather")):  # (on 2 GPUs the first two coincide)
            fig.add_trace(go.Scatter(x=sizes, y=[links.seconds(name, s, gpus) * 1e3 for s in sizes], mode="lines",
                                     name=f"model: {name} (α = 0) · 模型：{_zh(name)}（α = 0）",
                                     line=dict(color=_colors()[i], dash="dash" if i else "solid", width=5 if i == 0 else 2)))
        pts = [r for r in split_rows(data) if r.get("link_gbs") and r["gpus"] == gpus]
        links_seen = sorted({r["link_gbs"] for r in pts})
        mib512 = 512 * (1 << 20)
        fig.add_trace(go.Scatter(x=[mib512] * len(links_seen), y=[mib512 / (g * 1e9) * 1e3 for g in links_seen],
                                 mode="markers", name="measured: 512 MiB broadcast · 实测：512 MiB 广播",
                                 marker=dict(color="#222", size=10)))
        subtitle = ("no collective measured here yet: the model only, α = 0 and β from the recorded broadcasts · "
                    "这里尚未实测集合通信：仅为模型，α = 0，β 取自已记录的广播")
    fig.update_xaxes(type="log", tickvals=[10.0**e for e in range(4, 10)],
                     ticktext=["10 kB", "100 kB", "1 MB", "10 MB", "100 MB", "1 GB"])
    fig.update_yaxes(type="log", tickvals=[10.0**e for e in range(-3, 2)], ticktext=["0.001", "0.01", "0.1", "1", "10"])
    return _layout(fig, f"NCCL collectives on {gpus} GPUs: the α-β model · {gpus} 个 GPU 上的 NCCL 集合通信：α-β 模型",
                   "bytes (the full buffer) · 字节（完整缓冲区）", "ms", subtitle=subtitle)


# --- tensor parallelism --------------------------------------------------------------------------------

def _gpu_colors(P: int) -> list[str]:
    from plotly.colors import qualitative

    pastel = qualitative.Pastel  # the colours of multigpu_split_figure: GPU g has the same colour there
    return [pastel[g % len(pastel)] for g in range(P)]


def tensor_parallel_figure(P: int = 2, form: str = "all-reduce") -> go.Figure:
    """The MLP block Y = f(X·W1)·W2 split over P GPUs (schematic sizes: F drawn as 2H, not to scale).

    Top: X (on every GPU, grey) · W1 cut into P column slices = Z in P column slices (GPU p computes
    slice p alone). Bottom: Z · W2 cut into the matching P row slices = P partial products, each the
    full size of Y, added by the collective of `form`: an all-reduce leaves all of Y on every GPU; a
    reduce-scatter leaves each GPU its rows of Y (coloured by GPU), and the all-gather that follows
    copies them to every GPU. Each slice is a layout shape named "<matrix> <p>" (e.g. "W1 0")."""
    from gemm_course.display.diagrams import _base_layout
    from gemm_course.display.plots import fit_top
    from gemm_course.multigpu.tensor_parallel import FORMS, split_even

    if P < 1:
        raise ValueError(f"need at least one GPU, not {P}")
    if form not in FORMS:
        raise ValueError(f"form is one of {', '.join(FORMS)}, not {form!r}")
    M, H, F = 2.0, 1.0, 2.0  # schematic
    colors = _gpu_colors(P)
    grey = "#dddddd"
    fig = go.Figure()
    gap = 0.55

    def rect(name: str, x0: float, y0: float, w: float, h: float, color: str, dash: bool = False) -> None:
        fig.add_shape(type="rect", name=name, x0=x0, x1=x0 + w, y0=y0, y1=y0 + h, fillcolor=color,
                      line=dict(color="#555", width=1, dash="dot" if dash else "solid"), layer="below")

    def label(text: str, x: float, y: float, size: int = 13, color: str = "#222") -> None:
        fig.add_annotation(text=text, x=x, y=y, showarrow=False, font=dict(size=size, color=color))

    def sliced(name: str, x0: float, y0: float, w: float, h: float, by: str, units: int) -> None:
        """A matrix cut into P slices (by "columns" or "rows"), in proportion to split_even(units, P)."""
        for p, (a, b) in enumerate(split_even(units, P)):
            if by == "columns":
                rect(f"{name} {p}", x0 + w * a / units, y0, w * (b - a) / units, h, colors[p])
            else:
                rect(f"{name} {p}", x0, y0 + h * a / units, w, h * (b - a) / units, colors[p])

    units = 12 * P  # fine enough to show split_even's proportions
    # top row: X · W1 = Z (y grows downwards: the axis is reversed)
    x = 0.0
    rect("X", x, 0, H, M, grey)
    label("X", x + H / 2, M / 2)
    label("·", x + H + gap / 2, M / 2, 18)
    x += H + gap
    sliced("W1", x, 0, F, H, "columns", units)
    label("W1", x + F / 2, H / 2)
    label("=", x + F + gap / 2, M / 2, 18)
    x += F + gap
    sliced("Z", x, 0, F, M, "columns", units)
    label("Z", x + F / 2, M / 2)
    # bottom row: Z · W2 = Σ partials → collective → Y
    y = M + 1.0
    x = 0.0
    sliced("f(Z)", x, y, F, M, "columns", units)
    label("f(Z)", x + F / 2, y + M / 2)
    label("·", x + F + gap / 2, y + M / 2, 18)
    x += F + gap
    sliced("W2", x, y, H, F, "rows", units)
    label("W2", x + H / 2, y + F / 2)
    label("=", x + H + gap / 2, y + M / 2, 18)
    x += H + gap
    step = 0.12
    for p in reversed(range(P)):  # the partials, stacked: GPU p's on top of p+1's
        rect(f"partial {p}", x + p * step, y + p * step, H, M, colors[p])
    label("Σ Y<sub>p</sub>", x + H / 2, y + M / 2)
    x += H + P * step + gap
    fig.add_annotation(x=x + 0.25, y=y + M / 2, ax=x - gap + 0.1, ay=y + M / 2, xref="x", yref="y", axref="x",
                       ayref="y", text="", showarrow=True, arrowhead=2, arrowwidth=2, arrowcolor="#333")
    x += 0.4
    if form == "all-reduce":
        rect("Y", x, y, H, M, grey)
        label("Y", x + H / 2, y + M / 2)
        how = ("all-reduce: all of Y on every GPU", "all-reduce：每个 GPU 都得到完整的 Y")
    else:
        sliced("Y", x, y, H, M, "rows", units)
        label("Y", x + H / 2, y + M / 2)
        how = ("reduce-scatter: GPU p keeps its rows of Y; an all-gather follows",
               "reduce-scatter：GPU p 保留 Y 中属于自己的行，随后做 all-gather")
    names = ", ".join(f"GPU {p}" for p in range(P))
    fig.update_xaxes(visible=False, range=[-0.2, x + H + 0.3])
    fig.update_yaxes(visible=False, range=[y + max(M, F) + P * step + 0.3, -0.3], scaleanchor="x", scaleratio=1)  # downwards
    fig = _base_layout(fig, f"a tensor-parallel MLP block on {P} GPUs · {P} 个 GPU 上的张量并行 MLP 块", 330)
    fig.update_layout(margin=dict(l=10, r=10, b=10))
    return fit_top(fig, f"{how[0]}; colours: {names}; grey: on every GPU; F drawn as 2H · "
                        f"{how[1]}；颜色区分 GPU，灰色：每个 GPU 都有；F 画成 2H")


def simulated_check(shapes: Sequence[tuple[int, int, int]] = ((96, 64, 256), (97, 48, 130)),
                    gpus: Sequence[int] = (2, 4), chunks: Sequence[int] = (1, 3), seed: int = 0):
    """The split checked without a GPU: tensor_parallel.simulate (the GPUs' slicing and sums, in NumPy,
    float32) against the float64 product, for each form, GPU count and chunk count, with ReLU between
    the GEMMs. Every GPU's copy of Y must be written, equal the others', and be within the tolerance."""
    import numpy as np

    from gemm_course.multigpu import tensor_parallel as tp
    from gemm_course.display.diagrams import table
    from gemm_course.bilingual.text import Fold, text

    rng = np.random.default_rng(seed)
    body = []
    for M, H, F in shapes:
        X = rng.uniform(-1, 1, (M, H)).astype(np.float32)
        W1 = (rng.uniform(-1, 1, (H, F)) / math.sqrt(H)).astype(np.float32)
        W2 = (rng.uniform(-1, 1, (F, H)) / math.sqrt(F)).astype(np.float32)
        ref = np.maximum(X.astype(np.float64) @ W1.astype(np.float64), 0) @ W2.astype(np.float64)
        for P in gpus:
            for form in tp.FORMS:
                for c in chunks:
                    try:
                        plan = tp.make_plan(M, H, F, P, form, c)
                    except ValueError:
                        continue  # e.g. 97 rows do not split evenly over 2 GPUs in the reduce-scatter form
                    Ys = tp.simulate(X, W1, W2, plan, "relu")
                    err = float(np.linalg.norm(Ys[0] - ref) / np.linalg.norm(ref))
                    same = all(np.array_equal(Y, Ys[0]) for Y in Ys[1:])
                    unwritten = int(sum(np.isnan(Y).sum() for Y in Ys))
                    tol = tp.layer_tolerance("float32", H, F, P)
                    ok = err <= tol and same and unwritten == 0
                    body.append([f"{M}×{H}×{F}", P, form, c, f"{err:.1e}", f"{tol:.1e}",
                                 "yes · 是" if same else "no · 否", unwritten, "ok · 通过" if ok else "WRONG · 错误"])
    grid = table(["M×H×F", "GPUs · GPU 数", "form · 形式", "chunks · 分块", "error · 误差", "tolerance · 容差",
                  "replicas equal · 副本一致", "unwritten · 未写入", "verdict · 结论"], body)
    wrong = sum(row[-1] != "ok · 通过" for row in body)
    verdict = text("all pass", "全部通过") if not wrong else text(f"{wrong} wrong", f"{wrong} 个错误")
    return Fold(text(f"Check of the simulated split: {len(body)} runs, {verdict.en}",
                     f"模拟切分的正确性检查：{len(body)} 次运行，{verdict.zh}"), grid.data, open=bool(wrong))


def pipeline_schedule(compute_s: Sequence[float], comm_s: Sequence[float], overlap: bool = True) -> list[dict]:
    """When each chunk computes and communicates. overlap=False: one stream, chunk i's collective
    before chunk i+1's GEMMs; overlap=True: the two-stage pipeline of models.pipeline_seconds (the
    GEMMs run on, each collective waits for its chunk and for the previous collective)."""
    if len(compute_s) != len(comm_s):
        raise ValueError("one compute time and one communication time per chunk")
    out, compute_end, comm_end = [], 0.0, 0.0
    for i, (c, m) in enumerate(zip(compute_s, comm_s)):
        start = compute_end if overlap else comm_end
        compute_end = start + c
        comm_start = max(comm_end, compute_end)
        comm_end = comm_start + m
        out.append({"chunk": i, "compute": (start, compute_end), "communication": (comm_start, comm_end)})
    return out


def tp_model_rows(data: Sequence[Mapping[str, Any]], gpus: Sequence[int] = (2, 4, 8), chunks: Sequence[int] = (1, 4),
                  dtypes: Sequence[str] = ("float16", "float32"), shape: Optional[tuple[int, int, int]] = None,
                  form: str = "all-reduce") -> list[dict[str, Any]]:
    """The model of the tensor-parallel block on paper: compute at one GPU's recorded cuBLAS rate (fp16:
    :func:`fp16_rate`; fp32: :func:`fp32_rate`), split evenly over P GPUs and the chunks; communication
    by :func:`calibration`'s links."""
    import numpy as np

    from gemm_course.multigpu import tensor_parallel as tp

    M, H, F = shape or tp.DEFAULT_SHAPE
    links = calibration(data)["links"]
    out = []
    for dtype in dtypes:
        rate, source = tp_one_gpu_rate(data, dtype, (M, H, F)) or (fp16_rate() if dtype == "float16" else fp32_rate(data))
        for P in gpus:
            for c in chunks:
                plan = tp.make_plan(M, H, F, P, form, c)
                compute = [tp.layer_flops(r1 - r0, H, F) / P / (rate * 1e12) for r0, r1 in plan.row_chunks]
                m = tp.model(plan, links, compute, np.dtype(dtype).itemsize)
                flops = tp.layer_flops(M, H, F)
                frac = tp.overlap_fraction(m["serial_ms"], m["overlap_ms"], m["communication_ms"])[1]
                out.append(dict(m, dtype=dtype, gpus=P, chunks=c, form=form, M=M, H=H, F=F, rate_tflops=rate,
                                rate_source=source, serial_tflops=flops / m["serial_ms"] / 1e9,
                                overlap_tflops=flops / m["overlap_ms"] / 1e9, overlap_fraction=frac))
    return out


def tp_measured(data: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The recorded tensor-parallel rows (empty until a run has measured them)."""
    return [dict(r, provenance=d["provenance"]) for d in data for r in d["multigpu"] if r["scheme"] == TENSOR_PARALLEL]


def tp_one_gpu_rate(data: Sequence[Mapping[str, Any]], dtype: str,
                    shape: tuple[int, int, int]) -> Optional[tuple[float, str]]:
    """(TFLOPS, source) of the whole block on one GPU in this dtype, if a run measured it: the rate
    that prices the model's compute on paper (the same GEMMs, one GPU, cuBLAS)."""
    for r in tp_measured(data):
        if r["gpus"] == 1 and r["dtype"] == dtype and (r["M"], r["H"], r["F"]) == tuple(shape):
            return float(r["tflops"]), f"the measured one-GPU {dtype} block at {r['M']}×{r['H']}×{r['F']}"
    return None


def tp_measured_overlap(data: Sequence[Mapping[str, Any]], dtype: str, gpus: int = 2) -> dict[str, float]:
    """The measured share of the communication that overlap hid, raw (it can be below 0), per form."""
    return {r["form"]: float(r["overlap_fraction_raw"]) for r in tp_measured(data)
            if r["overlap"] and r["dtype"] == dtype and r["gpus"] == gpus and r.get("overlap_fraction_raw") is not None}


def pipeline_figure(data: Sequence[Mapping[str, Any]], gpus: int = 8, chunks: int = 4,
                    dtype: str = "float16") -> go.Figure:
    """The model's schedule of one block cut into chunks, without overlap (one stream) and with it (a
    communication stream), from :func:`tp_model_rows`."""
    from gemm_course.display.diagrams import _base_layout
    from gemm_course.display.plots import fit_top

    m = next(r for r in tp_model_rows(data, (gpus,), (chunks,), (dtype,)))
    fig = go.Figure()
    lanes = (("one stream: GEMMs, then the collective · 单个流：先 GEMM 后集合通信", False),
             ("two streams: the collective overlapped · 两个流：集合通信与计算重叠", True))
    for title, overlap in lanes:
        sched = pipeline_schedule(m["chunk_compute_ms"], m["chunk_communication_ms"], overlap)
        for kind, color in (("compute", "#1f77b4"), ("communication", "#d62728")):
            lane = (f"overlap: {kind} · 重叠：{_zh(kind)}" if overlap else f"serial: {kind} · 串行：{_zh(kind)}")
            fig.add_trace(go.Bar(
                name=kind, y=[lane] * len(sched), x=[s[kind][1] - s[kind][0] for s in sched],
                base=[s[kind][0] for s in sched], orientation="h", showlegend=False,
                marker=dict(color=color, line=dict(color="white", width=1)),
                text=[f"c{s['chunk']}" for s in sched], textposition="inside", insidetextanchor="middle",
                hovertemplate=f"{title}<br>{kind} of chunk %{{text}}: %{{base:.3f}} ms + %{{x:.3f}} ms<extra></extra>"))
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="ms (model) · 毫秒（模型）")
    hidden = m["overlap_fraction"]
    fig = _base_layout(fig, f"one MLP block in {chunks} chunks on {gpus} GPUs (model) · {gpus} 个 GPU 上分成 "
                            f"{chunks} 块的一个 MLP 块（模型）", 290)
    fig.update_layout(margin=dict(r=10, b=50))  # the lanes' labels keep fit_left's margin: the bars 200+ px on a phone
    measured = tp_measured_overlap(data, dtype, gpus)
    seen = "; ".join(f"{form} {frac:.0%}" for form, frac in sorted(measured.items()))
    note = (f"; measured: {seen} · 实测：{seen}") if seen else ""
    return fit_top(fig, f"{dtype}, {m['M']}×{m['H']}×{m['F']}: the model hides {hidden:.0%} of the communication · "
                        f"模型隐藏 {hidden:.0%} 的通信{note}")


def tp_table(data: Sequence[Mapping[str, Any]], gpus: Sequence[int] = (2, 4, 8), chunks: Sequence[int] = (1, 4)):
    """Measured beside the model when a run measured the block; else the model only, labelled, and a note
    that says so."""
    from gemm_course.display.diagrams import table
    from gemm_course.bilingual.text import note as _html

    measured = tp_measured(data)
    if measured:
        body = []
        for r in sorted(measured, key=lambda r: (r["dtype"], r["gpus"], r.get("form", ""), r["chunks"], r["overlap"])):
            frac = r.get("overlap_fraction_raw")
            body.append([r["dtype"], r["gpus"], _cell(r.get("form", "")), r["chunks"], "yes · 是" if r["overlap"] else "no · 否",
                         f"{r['median_ms']:.3f}", f"{r['model_ms']:.3f}", f"{r['tflops']:.0f}", f"{r['model_tflops']:.0f}",
                         "" if frac is None or not r["overlap"] else f"{frac:.0%}",
                         "ok · 通过" if r.get("passed") else "WRONG · 错误"])
        return table(["dtype", "GPUs · GPU 数", "form · 形式", "chunks · 分块", "overlap · 重叠", "measured ms · 实测 ms",
                      "model ms · 模型 ms", "measured TFLOPS · 实测", "model TFLOPS · 模型", "hidden · 隐藏比例",
                      "check · 校验"], body)
    from IPython.display import display

    rows = tp_model_rows(data, gpus, chunks)
    display(_html("The tensor-parallel block has <b>not been measured here yet</b>: every number below is the "
                  "model (communication: α = 0 and the recorded β; compute: one GPU's recorded cuBLAS rate).",
                  "张量并行块在这里<b>尚未实测</b>：下表全部是模型的数值（通信：α = 0，β 取实测记录；"
                  "计算：单 GPU 上记录的 cuBLAS 速率）。"))
    body = [[r["dtype"], r["gpus"], r["chunks"], f"{r['rate_tflops']:.1f}", f"{r['compute_ms']:.3f}",
             f"{r['communication_ms']:.3f}", f"{r['serial_ms']:.3f}", f"{r['overlap_ms']:.3f}",
             f"{r['serial_tflops']:.0f}", f"{r['overlap_tflops']:.0f}",
             f"{r['overlap_fraction']:.0%}" if r["chunks"] > 1 else "—"] for r in rows]
    return table(["dtype", "GPUs · GPU 数", "chunks · 分块", "one-GPU TFLOPS · 单 GPU", "model compute ms · 模型计算",
                  "model comm ms · 模型通信", "model serial ms · 模型串行", "model overlap ms · 模型重叠",
                  "model TFLOPS serial · 模型串行", "model TFLOPS overlap · 模型重叠", "hidden · 隐藏比例"], body)


# --- the notebook's first call ------------------------------------------------------------------------

def show_splits(model_gpus: Sequence[int] = (1, 2, 4, 8), show: Optional[Any] = None) -> list[dict[str, Any]]:
    """Level 12's measured scaling and phases beside the model (live on 2+ GPUs, else recorded), shown
    with `show` (default plots.show). Returns the end-to-end row split and SUMMA rows."""
    if show is None:
        from gemm_course.display.plots import show

    data = runs()
    if not data:
        from gemm_course.bilingual.text import show as show_text, text

        show_text(text("No recorded multi-GPU runs.", "没有已记录的多 GPU 测量。"))
        return []
    show(scaling_figure(data, model_gpus))
    show(phases_figure(data))
    return [{k: v for k, v in r.items() if k != "provenance"} for r in split_rows(data)]
