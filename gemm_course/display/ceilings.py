"""How far a kernel is from the machine's ceilings: the roofline of Level 1, the FFMA and mma.sync ceilings, Level 8's gap to peak, its block order and last changes.

The notebooks call these through the façade (gemm_course.display.notebook).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence
from gemm_course import device
from gemm_course.measure import results
from gemm_course.bilingual.text import Shown, ShownDict, Table, show as show_text, text
from gemm_course.levels import Level, get_level
from gemm_course.models import KNOWN_GPUS, arithmetic_intensity, gemm_flops, tile_traffic, spec_from_properties
from gemm_course.display.plots import changed_params, roofline_figure, show
from gemm_course.bilingual.text import fold_lines, say
from gemm_course.display.runs import _record_or_none
from gemm_course.display.reports import instruction_mix


def naive_roofline(size: int = 4096) -> None:
    """Level 1 on the fp32 roofline: the H200 from the recorded file, and the reader's GPU if any."""
    h200 = KNOWN_GPUS["NVIDIA H200"]
    n = size
    ideal = arithmetic_intensity(n, n, n)
    no_reuse = gemm_flops(n, n, n) / tile_traffic(n, n, n)
    points = []
    for mapping in ("cols", "rows"):
        try:
            r = results.find("01_naive", n, mapping=mapping, block_x=32, block_y=8)
        except KeyError:
            continue
        points.append({"label": f"recorded {mapping}, at its no-reuse intensity", "intensity": no_reuse,
                       "tflops": r["tflops"]})
    cublas = [r for r in results.recorded("01_naive") if r["level"] == "cublas" and r["M"] == n]
    if cublas:
        points.append({"label": "recorded cuBLAS, at GEMM's ideal intensity", "intensity": ideal,
                       "tflops": cublas[0]["tflops"]})
    show(roofline_figure(h200, points, title=f"H200 fp32 roofline, {n}³ · H200 fp32 屋顶线"))
    if device.gpu_available():
        show(roofline_figure(spec_from_properties(device.properties()), [],
                             title=f"your GPU · 你的 GPU: {device.gpu_name()}"))


def _probe_rows(probes: Sequence[str]) -> tuple[list[dict], str]:
    """Instruction-ceiling probes: measured live on a GPU that can run them, else the recorded ones."""
    from gemm_course.measure.peak import PROBES, measure_peaks

    needs_80 = any(PROBES[p].dtype != "float32" for p in probes)
    if device.gpu_available() and (not needs_80 or device.compute_capability() >= 80):
        return measure_peaks(probes, progress=lambda _: None), f"measured live on {device.gpu_name()}"
    rows = [r for r in results.peaks() if r["probe"] in probes]
    return rows, ("recorded: " + results.provenance_line(rows[0]) if rows else "")


def ffma_ceiling(size: int = 8192) -> list[dict]:
    """The FP32 issue ceiling: the FFMA probe's TFLOPS at each occupancy (warps per SM), with Level 8's
    showcase settings placed at their own occupancy, cuBLAS, and the data-sheet peak."""
    import plotly.graph_objects as go

    from gemm_course.run.compile import compile_report
    from gemm_course.display.plots import CUBLAS_COLOR, PALETTE, _layout, add_subtitle

    rows, where = _probe_rows(["ffma"])
    if not rows:
        say("No recorded FFMA probe.", "没有记录的 FFMA 探针。")
        return []
    live = where.startswith("measured")
    if live:
        from gemm_course.measure.peak import launch_overhead

        overhead = launch_overhead(progress=lambda _: None)
    else:
        overhead = next((results.load(f)["launch_overhead"] for f in results.recorded_files()
                         if "launch_overhead" in results.load(f)), None)
    lv = get_level("08_warp_tiling")
    arch = device.arch() if live else "sm_90"
    points = []
    if live:
        from gemm_course.measure.bench import bench

        size = min(size, 4096)
        measured = bench([(lv.id, dict(c)) for c in lv.showcase], [size], budget_s=0.5, max_reps=10,
                         progress=lambda _: None)["records"]
    else:
        measured = [r for r in (_record_or_none(lv.id, size, **lv.resolve(**c)) for c in lv.showcase) if r]
        if measured:  # cuBLAS as measured in the same run as these records
            measured.append({"level": "cublas", "tflops": measured[0]["tflops"] / measured[0]["ratio_to_cublas"]})
    fig = go.Figure(go.Bar(x=[str(r["warps_per_sm"]) for r in rows], y=[r["tflops"] for r in rows],
                           name="FFMA probe · FFMA 探针", marker_color="#bbbbbb",
                           hovertemplate="%{x} warps per SM: %{y:.1f} TFLOPS<extra></extra>"))
    for i, r in enumerate(m for m in measured if m["level"] != "cublas"):
        warps = compile_report(lv, arch=arch, **r["params"]).occupancy.warps_per_sm
        points.append({"params": r["params"], "warps_per_sm": warps, "tflops": r["tflops"]})
        fig.add_trace(go.Scatter(x=[str(warps)], y=[r["tflops"]], mode="markers", marker=dict(size=13, color=PALETTE[i]),
                                 name=f"Level 8 {changed_params(lv.defaults, r['params'])}"))
    for r in measured:
        if r["level"] == "cublas":
            fig.add_hline(y=r["tflops"], line=dict(color=CUBLAS_COLOR, dash="dash"),
                          annotation_text=f"cuBLAS {r['tflops']:.1f}")
    prov = rows[0].get("provenance") or {}
    if prov:
        sheet = prov["sm_count"] * 128 * 2 * prov["sm_clock_max_mhz"] / 1e6
        fig.add_hline(y=sheet, line=dict(color="#d62728", dash="dot"),
                      annotation_text=f"data sheet {sheet:.1f} (128 FMA/SM/cycle at {prov['sm_clock_max_mhz']} MHz)")
    fig = _layout(fig, f"FP32: what the SM issues, and where Level 8 lands ({size}³) · FP32 指令发射上限与第 8 级的位置",
                  "warps per SM · 每 SM 线程束数", "TFLOPS")
    # warps per SM in numeric order: the showcase settings add categories (12) between the probe's
    fig.update_xaxes(type="category", categoryorder="array",
                     categoryarray=[str(w) for w in sorted({r["warps_per_sm"] for r in rows} | {p["warps_per_sm"] for p in points})])
    launch = (f"each probe launch ≥ 10 ms; an empty launch takes {overhead['median_ms'] * 1e3:.1f} µs; "
              if overhead else "")
    add_subtitle(fig, launch + where)
    show(fig)
    lines = []
    if overhead:
        lines.append(f"launch overhead (an empty kernel, timed the same way): {overhead['median_ms'] * 1e3:.1f} µs; "
              f"each probe launch lasts at least 10 ms, so it is under 0.1% of every figure below")
    lines += [f"FFMA probe, {r['warps_per_sm']:>2} warps per SM: {r['tflops']:.1f} TFLOPS" for r in rows]
    lines += [f"Level 8 {p['params']}: {p['warps_per_sm']} warps per SM, {p['tflops']:.2f} TFLOPS" for p in points]
    fold_lines(lines, "The numbers behind the chart", "图中的数字")
    return Shown(rows)


def mma_sync_ceiling(size: int = 8192, setting: Optional[dict] = None) -> list[dict]:
    """Where Level 10's time goes, as the time of one size³ bf16 GEMM: at the rate of mma.sync alone and
    of the warp tile (with and without ldmatrix), Level 10's math without its copies, the same math
    without its block-wide barrier, its copies without the math, their sum, the whole kernel, and cuBLAS."""
    import plotly.graph_objects as go

    from gemm_course.measure.peak import PARTS_SETTINGS, ceiling
    from gemm_course.display.plots import _layout

    setting = dict(setting or PARTS_SETTINGS[-1])
    rows, where = _probe_rows(["mma_sync_bf16", "warp_tile_64x64_mma", "warp_tile_64x64_ldmatrix"])
    if not rows:
        say("No recorded mma.sync probes.", "没有记录的 mma.sync 探针。")
        return []
    if where.startswith("measured"):
        import cupy

        from gemm_course.measure.bench import cublas_gemm, time_gpu
        from gemm_course.run.check import random_operands
        from gemm_course.measure.peak import pipeline_parts

        size = min(size, 4096)
        parts = pipeline_parts([size], [setting], progress=lambda _: None)
        A, B = random_operands(size, size, size, "bfloat16")
        C = cupy.empty((size, size), dtype=cupy.uint16)
        blas_ms = time_gpu(lambda: cublas_gemm(A, B, C)).median_ms
    else:
        parts = [r for r in results.level_10_parts() if r["M"] == size and r["params"] == setting]
        blas_ms = results.find("cublas", size, dtype="bfloat16")["median_ms"]
    if not parts:
        say(f"No recorded decomposition of Level 10 {setting} at {size}³.", f"没有第 10 级 {setting} 在 {size}³ 的分解记录。")
        return []
    part = parts[0]
    at_rate = lambda tflops: gemm_flops(size, size, size) / (tflops * 1e12) * 1e3  # noqa: E731  (ms)
    copies, math, whole = (part[k]["median_ms"] for k in ("copies", "math", "all"))
    bars = [("mma.sync alone, at its peak rate · 仅 mma.sync（峰值速率）", at_rate(ceiling(rows, "mma_sync_bf16")["tflops"])),
            ("64×64 warp tile, mma.sync only · 64×64 线程束分块，仅 mma.sync", at_rate(ceiling(rows, "warp_tile_64x64_mma")["tflops"])),
            ("64×64 warp tile, ldmatrix + mma.sync · 加上 ldmatrix", at_rate(ceiling(rows, "warp_tile_64x64_ldmatrix")["tflops"])),
            *([("Level 10, math only, no block barrier · 第 10 级，仅计算、无整块屏障", part["math_no_barrier"]["median_ms"])]
              if "math_no_barrier" in part else []),
            ("Level 10, math only · 第 10 级，仅计算", math),
            ("Level 10, copies only · 第 10 级，仅拷贝", copies),
            ("copies + math, if nothing overlapped · 拷贝 + 计算（若完全不重叠）", copies + math),
            ("Level 10, whole kernel · 第 10 级，完整内核", whole),
            ("cuBLAS bf16", blas_ms)]
    colors = ["#9ecae1", "#9ecae1", "#6baed6"] + ["#4a90c2"] * ("math_no_barrier" in part) + \
        ["#1f77b4", "#ff7f0e", "#cccccc", "#d62728", "#222222"]
    fig = go.Figure(go.Bar(y=[b[0] for b in bars][::-1], x=[b[1] for b in bars][::-1], orientation="h",
                           marker_color=colors[::-1], hovertemplate="%{y}: %{x:.3f} ms<extra></extra>"))
    label = ", ".join(f"{k}={v}" for k, v in setting.items())
    fig.update_layout(margin=dict(l=420))
    fig = _layout(fig, f"Where Level 10's time goes: one {size}³ bf16 GEMM ({label}) · 第 10 级的时间去向",
                  "ms (probes: the GEMM's flops at the probe's rate) · 毫秒（探针：按其速率折算 GEMM 的运算量）", "",
                  plot_height=340, subtitle=where or None)
    show(fig)
    fold_lines([f"{ms:7.3f} ms  {at_rate(1) / ms:7.1f} TFLOPS  {name.split(' · ')[0]}" for name, ms in bars],
               "The numbers behind the chart", "图中的数字")
    return Shown([{"label": b[0], "ms": b[1]} for b in bars])


def gap_to_peak(level: str | int | Level = "08_warp_tiling", size: int = 8192, **params: Any) -> dict:
    """Where a SIMT kernel's time goes, against the fp32 peak (132 SMs × 128 FMA × 2 × clock).

    From the recorded run: achieved FMAs per SM per cycle. From the recorded counters (4096³), for the
    level's showcase settings and cuBLAS: the share of issue slots that carry an FFMA, another
    instruction or nothing, the FMA pipe's utilisation and the top stall reasons. Each of an SM's 4
    schedulers issues at most one warp instruction per cycle, and 128 FMA per SM per cycle needs an
    FFMA in every slot. The FFMA count is M·N·K/32 warp instructions (one FFMA per multiply-add per
    thread: what Level 8's SASS holds, 1024 per thread per 128×128×16 k-tile; for cuBLAS an
    assumption that its fp32 GEMM does each multiply-add once).
    """
    import plotly.graph_objects as go

    from gemm_course.measure import counters
    from gemm_course.models import KNOWN_GPUS
    from gemm_course.display.plots import _layout

    lv = get_level(level)
    p = lv.resolve(**params)
    rec = results.find(lv.id, size, **p)
    prov = rec["provenance"]
    clock_ghz = prov["sm_clock_max_mhz"] / 1e3
    peak = prov["sm_count"] * 128 * 2 * clock_ghz / 1e3
    cublas = rec["tflops"] / rec["ratio_to_cublas"]
    fma_per_sm_cycle = rec["tflops"] * 1e12 / 2 / (prov["sm_count"] * clock_ghz * 1e9)
    mix = instruction_mix(lv, **p)
    slots = []
    for s in [*lv.showcase, None]:
        try:
            row = counters.find(counters.CUBLAS, dtype="float32") if s is None else counters.find(lv.id, **s)
        except KeyError:
            continue
        m = row["metrics"]
        ffma_share = row["M"] * row["N"] * row["K"] / 32 / m["instructions"]
        issue = m["issue_active_pct"]
        slots.append({"setting": "cuBLAS fp32" if s is None else counters.label(row), "params": row.get("params", {}),
                      "instructions": m["instructions"], "ffma_share": ffma_share, "issue_active_pct": issue,
                      "ffma_slots_pct": issue * ffma_share, "other_slots_pct": issue * (1 - ffma_share),
                      "idle_slots_pct": 100 - issue, "fma_pipe_pct": m["fma_pipe_pct"],
                      "warps_per_sm": m["achieved_occupancy_pct"] / 100 * 64, "top_stalls": counters.top_stalls(m)})
    out = {"peak_tflops": peak, "kernel_tflops": rec["tflops"], "cublas_tflops": cublas,
           "kernel_fraction_of_peak": rec["tflops"] / peak, "cublas_fraction_of_peak": cublas / peak,
           "fma_per_sm_per_cycle": fma_per_sm_cycle, "instruction_mix": mix, "issue_slots": slots}
    out = ShownDict(out)
    source = KNOWN_GPUS['NVIDIA H200'].source if prov['gpu'] == 'NVIDIA H200' else prov['gpu']
    say(f"fp32 peak {peak:.1f} TFLOPS ({prov['sm_count']} SMs × 128 FMA × 2 × {clock_ghz:.2f} GHz, {source}); "
        f"cuBLAS {cublas:.1f} ({cublas / peak:.0%} of peak); {lv.id} {rec['tflops']:.1f} "
        f"({rec['tflops'] / peak:.0%} of peak, {rec['ratio_to_cublas']:.1%} of cuBLAS); achieved "
        f"{fma_per_sm_cycle:.0f} of 128 FMA per SM per cycle",
        f"fp32 峰值 {peak:.1f} TFLOPS（{prov['sm_count']} 个 SM × 128 FMA × 2 × {clock_ghz:.2f} GHz，{source}）；"
        f"cuBLAS {cublas:.1f}（峰值的 {cublas / peak:.0%}）；{lv.id} {rec['tflops']:.1f}"
        f"（峰值的 {rec['tflops'] / peak:.0%}，cuBLAS 的 {rec['ratio_to_cublas']:.1%}）；实际达到每 SM 每周期 "
        f"{fma_per_sm_cycle:.0f} / 128 次 FMA")
    if not slots:
        return out
    names = [r["setting"] for r in slots]
    fig = go.Figure()
    for key, name, color in (("ffma_slots_pct", "FFMA · FFMA 指令", "#2ca02c"),
                             ("other_slots_pct", "other instructions · 其他指令", "#ff7f0e"),
                             ("idle_slots_pct", "nothing issued · 未发射", "#bbbbbb")):
        fig.add_trace(go.Bar(y=names, x=[r[key] for r in slots], orientation="h", name=name, marker_color=color,
                             hovertemplate="%{y}: %{x:.1f}% of issue slots<extra>" + name + "</extra>"))
    prov_c = counters.find(counters.CUBLAS, dtype="float32")["provenance"]
    fig = _layout(fig, f"Issue slots at {counters.COUNTER_SIZE}³ · {counters.COUNTER_SIZE}³ 时发射槽的去向",
                  "% of scheduler cycles · 占调度器周期的 %", "", barmode="stack", plot_height=200,
                  subtitle=f"recorded with Nsight Compute on {prov_c['gpu']}, {prov_c['date'][:10]}; FFMA = M·N·K/32")
    show(fig)
    lines = []
    for r in slots:
        stalls = ", ".join(f"{k} {v:.2f}" for k, v in r["top_stalls"])
        lines.append(f"{r['setting']:>22}: issue {r['issue_active_pct']:.0f}% of cycles, FFMA {r['ffma_share']:.0%} of "
              f"{r['instructions'] / 1e9:.2f} G instructions -> FFMA in {r['ffma_slots_pct']:.0f}% of slots; "
              f"FMA pipe {r['fma_pipe_pct']:.0f}%; {r['warps_per_sm']:.0f} warps/SM; stalls per issue: {stalls}")
    fold_lines(lines, "Issue slots, FMA pipe and top stalls per setting", "各设置的发射槽、FMA 流水线与主要停顿")
    return out


def block_order() -> list[dict]:
    """Level 8 with the grouped block order (group_m=8) and the plain one (group_m=1), for the default and
    the 64×256 tile: the recorded times at 4096³ and 8192³ (one run) and the 4096³ counters (L2 hit rate,
    DRAM read, issue-active cycles), as one table."""
    from gemm_course.measure import counters

    lv = get_level("08_warp_tiling")
    rows, cells = [], []
    for setting in ({}, {"BM": 64, "BN": 256, "WN": 64}):
        for g in (8, 1):
            p = lv.resolve(**setting, group_m=g)
            ms = [results.find(lv.id, n, file="h200_experiments.json", **p)["median_ms"] for n in (4096, 8192)]
            m = counters.find(lv.id, **p)["metrics"]
            name = changed_params(lv.defaults, dict(setting)) or "default"
            rows.append({"setting": name, "group_m": g, "ms_4096": ms[0], "ms_8192": ms[1], **{
                k: m[k] for k in ("l2_hit_pct", "dram_read_bytes", "issue_active_pct")}})
            cells.append([text(name, "默认") if name == "default" else name, str(g), f"{ms[0]:.3f}", f"{ms[1]:.2f}",
                          f"{m['l2_hit_pct']:.1f}%", f"{m['dram_read_bytes'] / 1e9:.2f}", f"{m['issue_active_pct']:.0f}%"])
    prov = results.find(lv.id, 4096, file="h200_experiments.json", **lv.resolve())["provenance"]
    show_text(Table([text("setting", "设置"), "group_m", text("ms at 4096³", "4096³ 毫秒"),
                     text("ms at 8192³", "8192³ 毫秒"), text("L2 hit rate", "L2 命中率"),
                     text("DRAM read (GB)", "DRAM 读取（GB）"), text("issue active", "发射活跃")], cells,
                    caption=text(f"Times: one recorded run ({prov['gpu']}, {prov['date'][:10]}); counters at 4096³, "
                                 "recorded with Nsight Compute.",
                                 f"时间：同一次记录的运行（{prov['gpu']}，{prov['date'][:10]}）；计数器为 4096³ 时"
                                 "用 Nsight Compute 记录的值。")))
    return Shown(rows)


def last_changes() -> list[dict]:
    """Level 8's 64×256 setting and its three last changes: the recorded time and share of cuBLAS at 4096³
    and 8192³ (with the SM clocks of the kernel and of the cuBLAS run paired with it), and the 4096³
    counters (instructions, issue-active cycles, the top four stall reasons), as one table."""
    from gemm_course.measure import counters

    lv = get_level("08_warp_tiling")
    rows, cells = [], []
    for setting in lv.showcase[2:]:  # the 64×256 setting, then its three changes
        p = lv.resolve(**setting)
        name = counters.label({"level": lv.id, "params": p})
        m = counters.find(lv.id, **p)["metrics"]
        stalls = ", ".join(f"{k} {v:.2f}" for k, v in counters.top_stalls(m, 4))
        for n in (4096, 8192):
            r = results.find(lv.id, n, file="h200_top_rungs_float32.json", **p)
            rows.append({"setting": name, "size": n, "ms": r["median_ms"], "ratio_to_cublas": r["ratio_to_cublas"],
                         "sm_clock_mhz": r["sm_clock_mhz"], "instructions": m["instructions"],
                         "issue_active_pct": m["issue_active_pct"], "top_stalls": counters.top_stalls(m, 4)})
            cells.append([name, f"{n}³", f"{r['median_ms']:.3f}", f"{r['ratio_to_cublas']:.1%}",
                          f"{r['sm_clock_mhz']:.0f} / {r['cublas_paired_sm_clock_mhz']:.0f}",
                          *([f"{m['instructions'] / 1e9:.2f}", f"{m['issue_active_pct']:.0f}%", stalls] if n == 4096
                            else ["", "", ""])])
    show_text(Table([text("setting", "设置"), text("size", "规模"), "ms", text("of cuBLAS", "占 cuBLAS"),
                     text("SM clock MHz (kernel / cuBLAS)", "SM 时钟 MHz（内核 / cuBLAS）"),
                     text("G instructions (4096³)", "指令数 G（4096³）"), text("issue active", "发射活跃"),
                     text("top stalls per issue (4096³)", "每次发射的主要停顿（4096³）")], cells,
                    code_columns=[0, 7],
                    caption=text("Times: the recorded run of these last changes (one run); counters recorded with "
                                 "Nsight Compute at 4096³.",
                                 "时间：记录这几项改动的同一次运行；计数器为 4096³ 时用 Nsight Compute 记录的值。")))
    return Shown(rows)
