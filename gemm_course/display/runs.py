"""Recorded and live runs as figures and tables: a level against cuBLAS, sweeps, comparisons, the ladder, fusion, batched products, blocks and waves, the tail of a schedule.

The notebooks call these through the façade (gemm_course.display.notebook).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence
from gemm_course import device
from gemm_course.measure import results
from gemm_course.bilingual.text import Fold, Shown, Table, show as show_text, text
from gemm_course.levels import Level, get_level
from gemm_course.display.plots import performance_figure, show, sweep_figure
from gemm_course.bilingual.text import fold_lines, say


LIVE_SIZES = (256, 512, 1024, 2048, 4096)


def performance(level: str | int | Level, configs: Optional[Sequence[dict]] = None,
                sizes: Sequence[int] = LIVE_SIZES, dtype: Optional[str] = None) -> list[dict]:
    """TFLOPS and time against cuBLAS over sizes: measured live on a GPU, else the recorded ones.

    dtype: the input type (default: the level's first, e.g. float16 for Levels 9–10).
    """
    lv = get_level(level)
    configs = [dict(c) for c in (configs or lv.showcase)]
    dtype = dtype or lv.dtypes[0]
    here = [c for c in configs if _runs_here(lv.id, lv.resolve(**c), dtype)]
    if here:
        from gemm_course.measure.bench import bench

        for c in configs:
            if c not in here:
                en, zh = _why_not_here(lv.id, lv.resolve(**c), dtype) or ("", "")
                say(f"{lv.id} {c}: {en}; not run on {device.arch()} ({device.gpu_name()})",
                    f"{lv.id} {c}：{zh}；不在 {device.arch()}（{device.gpu_name()}）上运行")
        records = bench([(lv.id, c) for c in here], sizes, dtype=dtype)["records"]
        where = f"measured live on {device.gpu_name()}"
    else:
        wanted = [lv.resolve(**c) for c in configs]
        records = [r for r in results.recorded(lv.id, dtype=dtype)  # cubes; shapes() has the others
                   if (r["level"] == "cublas" or r["params"] in wanted) and r["M"] == r["N"] == r["K"]]
        records = _dedupe(records)
        if not records:
            say("No recorded results for this level yet.", "这一级还没有记录的结果。")
            return Shown()
        where = "recorded: " + results.provenance_line(records[0])
    show(performance_figure(records, "tflops", f"{lv.id}: TFLOPS vs cuBLAS · {lv.id}：TFLOPS 与 cuBLAS 对比", subtitle=where))
    show(performance_figure(records, "ms", f"{lv.id}: time · 时间", subtitle=where))
    return Shown(records)


def _dedupe(records: list[dict]) -> list[dict]:
    """Keep the first record of each (level, params, shape): a sweep may re-measure a showcase point."""
    seen, out = set(), []
    for r in records:
        key = (r["level"], tuple(sorted(r["params"].items())), r["M"], r["N"], r["K"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def sweep(level: str | int | Level, x: str, y: str, by: Optional[str] = None) -> None:
    """The recorded parameter sweep of a level as a heatmap (works in the static book)."""
    lv = get_level(level)
    size = lv.sweep_size
    records = _dedupe(results.sweep_records(lv.id, size, dtype=lv.dtypes[0]))
    if not records:
        say("No recorded sweep for this level.", "这一级没有记录的参数扫描。")
        return
    show(sweep_figure(records, x, y, by, title=f"{lv.id}: TFLOPS at {size}³ · {size}³ 时的 TFLOPS",
                      subtitle="recorded: " + results.provenance_line(records[0])))


def _why_not_here(level: str, params: dict, dtype: str) -> Optional[tuple[str, str]]:
    """Why this machine's GPU cannot run a level's resolved setting on this input type (en, zh), or None if it
    can: bf16 needs sm_80, some settings need more than their level (Level 10's copy='tma' needs sm_90), some
    more shared memory than the architecture has (support.setting_refusal). The architecture pretended
    (gc.pretend_arch) decides, and the real GPU must be able to run the kernel too."""
    from gemm_course.support import setting_refusal

    if not device.gpu_available():
        return ("no GPU here", "这里没有 GPU")
    for arch in dict.fromkeys((device.arch(), device.real_arch())):
        why = setting_refusal(level, params, arch, dtype)
        if why:
            return why
    return None


def _runs_here(level: str, params: dict, dtype: str) -> bool:
    """Whether this machine's GPU can run a level's resolved setting on this input type (_why_not_here)."""
    return _why_not_here(level, params, dtype) is None


def _all_run_here(entries: Sequence[tuple[str, dict]], dtype: str) -> bool:
    """Whether this machine's GPU can run every one of these (level, resolved setting) on this input type."""
    return all(_runs_here(lv, p, dtype) for lv, p in entries)


def compare(entries: Sequence[tuple[str, dict]], size: int = 4096, title: str = "",
            dtype: Optional[str] = None, file: Optional[str] = None) -> list[dict]:
    """Bars of TFLOPS for chosen (level, params) at one size, with cuBLAS: live on a GPU, else recorded.

    dtype: the input type of every entry (default: the first level's first, e.g. bfloat16 for Level 11).
    file: take the recorded numbers, cuBLAS's too, from this one result file (one run), e.g.
    "h200_experiments.json".
    """
    import plotly.graph_objects as go

    from gemm_course.display.plots import CUBLAS_COLOR, PALETTE, _layout, config_label

    wanted = [(get_level(lv).id, get_level(lv).resolve(**p)) for lv, p in entries]
    if _all_run_here(wanted, dtype or get_level(wanted[0][0]).dtypes[0]):
        from gemm_course.measure.bench import bench

        records = bench(wanted, [size], dtype=dtype)["records"]
        where = f"measured live on {device.gpu_name()}"
    else:
        dtype = dtype or get_level(wanted[0][0]).dtypes[0]
        records = []
        for lv, p in wanted:
            try:
                records.append(results.find(lv, size, dtype=dtype, file=file, **p))
            except KeyError:
                say(f"not recorded: {lv} {p} at {size}³ in {dtype}", f"没有记录：{lv} {p}，{size}³，{dtype}")
        files = [results.RESULTS_DIR / records[0]["file"]] if records else None
        blas = [r for r in results.recorded(records[0]["level"], files=files, dtype=dtype)
                if r["level"] == "cublas" and r["M"] == size] if records else []
        records = blas[:1] + records
        where = "recorded: " + results.provenance_line(records[0]) if records else ""
    labels = [config_label(r) for r in records]
    fig = go.Figure(go.Bar(x=labels, y=[r["tflops"] for r in records], text=[
        f"{r['tflops']:.2f}<br>{r.get('ratio_to_cublas', 1):.0%}" for r in records], textposition="outside",
        marker_color=[CUBLAS_COLOR if r["level"] == "cublas" else PALETTE[0] for r in records]))
    fig = _layout(fig, title or f"TFLOPS at {size}³ · {size}³ 时的 TFLOPS", "", "TFLOPS", subtitle=where or None)
    show(fig)
    return Shown(records)


def _record_or_none(level: str, n: int, **params: Any) -> Optional[dict]:
    try:
        return results.find(level, n, **params)
    except KeyError:
        return None


def fusion() -> list[dict]:
    """Fused epilogue (Level 6) against the GEMM followed by separate element-wise kernels: live, else
    recorded. Every baseline is timed in the same run as the fused kernel: Level 5's GEMM alone; the
    GEMM followed by one kernel that adds the bias and applies the activation in one pass over C
    (8·M·N bytes, what a framework runs; shown when the run has it); followed by two kernels, bias then
    activation (16·M·N bytes); and cuBLAS alone and followed by one or two kernels. cuBLAS's own fused
    epilogues (cuBLASLt) are not measured. Recorded: the run with the one-kernel baseline first, then
    the earlier five-shape run, which has only the two-kernel one."""
    import plotly.graph_objects as go

    from gemm_course.display.plots import CUBLAS_COLOR, PALETTE, _layout

    if device.gpu_available():
        from gemm_course.measure.bench import bench_fusion

        runs = [(bench_fusion(one_kernel=True), f"measured live on {device.gpu_name()}")]
    else:
        runs = []
        for key in ("fusion_one_kernel", "fusion"):
            data = next((d for d in map(results.load, results.recorded_files()) if d.get(key)), None)
            if data is not None:
                p = data["provenance"]
                runs.append((data[key], f"recorded: {p['gpu']}, {p['date'][:10]}, CuPy {p['cupy']}"))
        if not runs:
            say("No recorded fusion measurement.", "没有记录的融合测量。")
            return []
    series = (("fused (Level 6) · 融合", "fused_ms", PALETTE[0]),
              ("GEMM alone (Level 5) · 仅 GEMM", "gemm_only_ms", PALETTE[2]),
              ("GEMM + one bias-and-activation kernel · GEMM + 一个逐元素内核", "unfused_one_kernel_ms", PALETTE[3]),
              ("GEMM + bias kernel + activation kernel · GEMM + 两个逐元素内核", "unfused_ms", PALETTE[1]),
              ("cuBLAS alone · 仅 cuBLAS", "cublas_only_ms", "#999999"),
              ("cuBLAS + one kernel · cuBLAS + 一个内核", "cublas_one_kernel_ms", "#666666"),
              ("cuBLAS + two kernels · cuBLAS + 两个内核", "cublas_unfused_ms", CUBLAS_COLOR))
    shown = []
    for rows, where in runs:
        one = all("unfused_one_kernel_ms" in r for r in rows)
        labels = [f"{r['M']}×{r['N']}×{r['K']}" for r in rows]
        fig = go.Figure([go.Bar(name=name, x=labels, y=[r[key] for r in rows], marker_color=color)
                         for name, key, color in series if all(key in r for r in rows)])
        title = ("fused vs GEMM + one or two element-wise kernels, same run · 融合与 GEMM + 一个或两个逐元素内核（同一次运行）"
                 if one else "fused vs GEMM + two element-wise kernels (no one-kernel baseline in this run) · "
                             "融合与 GEMM + 两个逐元素内核（此次运行没有单内核基线）")
        fig = _layout(fig, title, "M×N×K", "time (ms, median) · 时间（毫秒）", subtitle=where or None)
        fig.update_yaxes(type="log")
        show(fig)
        lines = []
        for r in rows:
            line = f"{r['M']}×{r['N']}×{r['K']}: fused {r['fused_ms']:.3f} ms, GEMM alone {r['gemm_only_ms']:.3f} ms"
            if one:
                line += (f", GEMM + one kernel {r['unfused_one_kernel_ms']:.3f} ms "
                         f"({r['unfused_one_kernel_ms'] / r['fused_ms']:.3f}×, {r['extra_bytes_one_kernel'] / 1e6:,.0f} MB)")
            line += (f", GEMM + two kernels {r['unfused_ms']:.3f} ms ({r['unfused_ms'] / r['fused_ms']:.3f}×, "
                     f"{r['extra_bytes_unfused'] / 1e6:,.0f} MB)")
            if one:
                line += f"; cuBLAS alone {r['cublas_only_ms']:.3f}, + one kernel {r['cublas_one_kernel_ms']:.3f}"
            lines.append(line + f", cuBLAS + two kernels {r['cublas_unfused_ms']:.3f} ms")
        fold_lines(lines, "The numbers behind the chart, per shape", "图中每个形状的数字")
        shown += rows
    return Shown(shown)


def blocks_and_waves(level: str | int | Level, sizes: Sequence[int] = (256, 512, 1024, 2048, 4096, 8192),
                     sm_count: int = 132, **params: Any) -> list[dict]:
    """How many thread blocks a size launches, and how many SMs the last 'wave' leaves idle.

    sm_count defaults to the H200's 132; each SM may hold several blocks at once (from the compile
    report's occupancy), so a wave is sm_count × blocks_per_sm blocks.
    """
    from gemm_course.run.compile import compile_report

    lv = get_level(level)
    p = lv.resolve(**params)
    per_sm = compile_report(lv, arch="sm_90", **p).occupancy.blocks_per_sm
    rows = []
    for n in sizes:
        launch = lv.geometry(n, n, n, p)
        blocks = launch.grid[0] * launch.grid[1] * launch.grid[2]
        wave = sm_count * per_sm
        waves = -(-blocks // wave)
        busy = min(blocks, sm_count)
        rows.append({"size": n, "blocks": blocks, "blocks_per_sm": per_sm, "waves": waves,
                     "sms_busy": busy, "last_wave_fill": (blocks - (waves - 1) * wave) / wave})
    cells = [[f"{r['size']}³", str(r["blocks"]), f"{r['sms_busy']} / {sm_count}", str(r["waves"]),
              f"{r['last_wave_fill']:.0%}"] for r in rows]
    show_text(Table([text("size", "规模"), text("blocks", "线程块数"), text("SMs with work", "有任务的 SM"),
                     text("waves", "波次"), text("last wave filled", "最后一波填充率")], cells,
                    caption=text(f"{lv.kernel_name(p)}, {per_sm} blocks per SM (sm_90)",
                                 f"{lv.kernel_name(p)}，每个 SM {per_sm} 个线程块（sm_90）")))
    return Shown(rows)


STREAM_K_FILE = "h200_11_stream_k.json"  # Level 11 steps 6 and 7 in one run, at squares and the decode shapes


def stream_k_rows(file: str = STREAM_K_FILE, c_type: str = "input") -> list[dict[str, Any]]:
    """Per recorded shape: step 7's schedule counted (models.stream_k_summary, with the recorded GPU's SMs / 2
    clusters, the driver's answer on the H200) beside steps 6 and 7 measured in one run, each with its own
    clock: step 7's time and cycles over step 6's, and both against the cuBLAS timing paired with each."""
    from gemm_course.models import stream_k_summary

    level, path = "11_hopper_wgmma", results.RESULTS_DIR / file
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    step7 = [r for r in results.recorded(level, files=[path], dtype="bfloat16")
             if r["level"] == level and r["params"]["step"] == 7 and r["params"]["c_type"] == c_type]
    for r7 in step7:
        shape = (r7["M"], r7["N"], r7["K"])
        r6 = results.find(level, *shape, dtype="bfloat16", file=file, step=6, c_type=c_type)
        model = stream_k_summary(*shape, r7["provenance"]["sm_count"] // 2)
        rows.append({"shape": shape, **model, "step6_ms": r6["median_ms"], "step7_ms": r7["median_ms"],
                     "time_ratio": r6["median_ms"] / r7["median_ms"],
                     "cycle_ratio": (r6["median_ms"] * r6["sm_clock_mhz"]) / (r7["median_ms"] * r7["sm_clock_mhz"]),
                     "step6_vs_cublas": r6["ratio_to_cublas"], "step7_vs_cublas": r7["ratio_to_cublas"],
                     "step6_vs_cublas_cycles": results.in_cycles(r6), "step7_vs_cublas_cycles": results.in_cycles(r7),
                     "step6_record": r6, "step7_record": r7})
    return rows


def stream_k_table(file: str = STREAM_K_FILE, c_type: str = "input") -> list[dict[str, Any]]:
    """stream_k_rows as a table, folded: what the model promised and what the H200 measured, shape by shape."""
    rows = stream_k_rows(file, c_type)
    if not rows:
        say(f"not recorded: {file}", f"没有记录：{file}")
        return Shown()
    cells = [["×".join(map(str, r["shape"])), str(r["pairs"]), str(r["k_tiles"]),
              f"{r['step6_k_tiles']} → {r['step7_k_tiles']}", f"{r['saving']:.0%}", str(r["split_pairs"]),
              f"{r['time_ratio']:.2f}×", f"{r['cycle_ratio']:.2f}×",
              f"{r['step6_vs_cublas']:.0%} → {r['step7_vs_cublas']:.0%}"] for r in rows]
    saved = sum(r["time_ratio"] > 1 for r in rows)
    prov = results.provenance_line(rows[0]["step7_record"])
    show_text(Fold(text(f"Stream-K at {len(rows)} shapes: the model's saving beside the measured speed-up, faster at "
                        f"{saved} (table)",
                        f"{len(rows)} 个形状上的 stream-K：模型预计的节省与实测的加速，{saved} 个形状更快（表）"),
                   Table([text("shape", "形状"), text("pairs of tiles", "分块对"), text("k-tiles per pair", "每对的 k 分块"),
                          text("k-tiles, busiest cluster: step 6 → 7", "最忙的簇的 k 分块：第 6 步 → 第 7 步"),
                          text("model: saved", "模型：节省"), text("pairs split", "被拆分的分块对"),
                          text("measured: step 7 faster, in time", "实测：第 7 步加速（时间）"),
                          text("in cycles", "（周期）"), text("of cuBLAS, in time: step 6 → 7", "相对 cuBLAS（时间）：第 6 步 → 7")],
                         cells, caption=text(f"C in bf16; model: every k-tile the same time, a fixup none; {prov}",
                                             f"C 为 bf16；模型：每个 k 分块耗时相同，合并不计时间；{prov}"))))
    return Shown(rows)


def ladder(sizes: Sequence[int] = (256, 512, 1024, 2048, 4096, 8192)) -> list[dict]:
    """Every level's default setting against cuBLAS over sizes (recorded, or live on a GPU), and the
    seed guide's claimed percentages beside our measured ones."""
    import plotly.graph_objects as go

    from gemm_course.levels import levels
    from gemm_course.display.plots import _layout, performance_figure

    if device.gpu_available():
        from gemm_course.measure.bench import bench

        live_sizes = [n for n in sizes if n <= 4096]
        records = bench([(lv.id, lv.defaults) for lv in levels() if not lv.uses_tensor_cores], live_sizes,
                        budget_s=0.5, max_reps=10)["records"]
        records = _dedupe([r for r in records if r["level"] != "cublas"]) + \
            _dedupe([r for r in records if r["level"] == "cublas"])[: len(live_sizes)]
        where = f"measured live on {device.gpu_name()}"
    else:
        records = []
        for lv in levels():
            if lv.uses_tensor_cores:  # another dtype and another cuBLAS baseline: not this fp32 ladder
                continue
            for n in sizes:
                r = _record_or_none(lv.id, n, **lv.defaults)
                if r:
                    records.append(r)
        blas = {}
        for r in results.recorded():
            if r["level"] == "cublas" and r["M"] == r["N"] == r["K"] and r["M"] in sizes:
                blas.setdefault(r["M"], r)
        records += list(blas.values())
        where = "recorded: " + results.provenance_line(records[0]) if records else ""
    show(performance_figure(records, "tflops", "the ladder: every level's default setting · 各级默认设置",
                            subtitle=where))
    n_claim = 1024
    ours = {r["level"]: r["ratio_to_cublas"] for r in records if r["M"] == n_claim and r["level"] != "cublas"}
    lv_ids = [lv.id for lv in levels() if not lv.uses_tensor_cores and (lv.id in results.SEED_CLAIMS or lv.id in ours)]
    fig = go.Figure([
        go.Bar(name="the original guide's claim (RTX 3080, 1024³) · 最初那份指南的声称", x=lv_ids,
               y=[results.SEED_CLAIMS.get(i) for i in lv_ids], marker_color="#bbbbbb"),
        go.Bar(name=f"measured here ({n_claim}³) · 本课程实测", x=lv_ids, y=[ours.get(i) for i in lv_ids],
               marker_color="#1f77b4")])
    fig = _layout(fig, "% of cuBLAS: claimed vs measured · 相对 cuBLAS：声称与实测", "level · 级别",
                  "fraction of cuBLAS · 相对 cuBLAS 的比例")
    fig.update_yaxes(tickformat=".0%")
    show(fig)
    return Shown(records)


def batched(cases: Optional[Sequence[tuple[int, int]]] = None) -> list[dict]:
    """A batch of small products: one batched launch, one launch per product, and cuBLAS's
    strided-batched GEMM, in TFLOPS per case. Live on a GPU (small cases), else the recorded run."""
    import plotly.graph_objects as go

    from gemm_course.measure.bench import bench_batched
    from gemm_course.display.plots import CUBLAS_COLOR, PALETTE, _layout, config_label

    if device.gpu_available():
        rows = bench_batched(cases or ((1024, 64), (256, 256)))
        where = f"measured live on {device.gpu_name()}"
    else:
        data = next((d for d in (results.load(f) for f in results.recorded_files()) if d.get("batched")), None)
        if data is None:
            say("No recorded batched measurement.", "没有记录的批量测量。")
            return []
        rows, p = data["batched"], data["provenance"]
        where = f"recorded: {p['gpu']}, {p['date'][:10]}, CuPy {p['cupy']}"
    labels = [f"{r['batch']} × {r['M']}³" for r in rows]
    fig = go.Figure([go.Bar(name="cuBLAS strided-batched · cuBLAS 跨步批量", x=labels,
                            y=[r["cublas_batched"]["tflops"] for r in rows], marker_color=CUBLAS_COLOR)])
    settings = [(lv["level"], lv["params"]) for lv in rows[0]["levels"]] if rows else []
    for i, (level, params) in enumerate(settings):
        name = config_label({"level": level, "params": params})
        for mode, label_en, label_zh, pattern in (("batched", "one launch", "一次启动", ""),
                                                   ("looped", "one launch per product", "每个乘积一次启动", "/")):
            y = [next((lv[mode]["tflops"] for lv in r["levels"] if (lv["level"], lv["params"]) == (level, params)),
                      None) for r in rows]
            fig.add_trace(go.Bar(name=f"{name}: {label_en} · {label_zh}", x=labels, y=y,
                                 marker=dict(color=PALETTE[i % len(PALETTE)], pattern_shape=pattern)))
    fig = _layout(fig, "batched GEMM (fp32) · 批量 GEMM（fp32）", "batch × n³ · 批次数 × n³", "TFLOPS",
                  barmode="group", subtitle=where or None)
    show(fig)
    return rows
