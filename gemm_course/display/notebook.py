"""The few calls a level notebook makes, so notebook cells stay one line each.

Each works with a GPU (measured live) and without one (recorded measurements, clearly labelled).
"""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence

from gemm_course import device
from gemm_course.measure import results
from gemm_course.bilingual.text import Fold, Shown, ShownDict, Table, code_block, from_message, note, show as show_text, text
from gemm_course.run.check import MULTIPLE_OF_8_SHAPES, ODD_SHAPES, check
from gemm_course.run.dtypes import min_cc
from gemm_course.levels import Level, get_level
from gemm_course.models import KNOWN_GPUS, arithmetic_intensity, gemm_flops, tile_traffic, spec_from_properties
from gemm_course.display.plots import changed_params, performance_figure, roofline_figure, show, sweep_figure

# Small enough to check quickly where kernels run on the CPU.
SMALL_ODD_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 131), (100, 1, 7), (1, 70, 50))

LIVE_SIZES = (256, 512, 1024, 2048, 4096)


def _html(en: str, zh: str) -> Any:
    """A note in both languages (HTML halves); one language is shown (gemm_course.bilingual.text)."""
    return note(en, zh)


def _say(en: str, zh: str) -> None:
    """Show a one-line message in the language in force."""
    show_text(note(html.escape(en), html.escape(zh), en, zh))


def say(en: str, zh: str) -> None:
    """Show one line of a cell's result in the language in force (both halves for the book's switch); a
    cell's `print("English · 中文")` would show both languages in every mode."""
    _say(en, zh)


def _lines_fold(lines: Sequence[str], en: str, zh: str) -> None:
    """Numbers printed beside a chart, folded: they back the chart and the text, line by line."""
    if lines:
        show_text(Fold(text(f"{en} ({len(lines)} lines)", f"{zh}（{len(lines)} 行）"),
                       code_block("\n".join(lines), "text")))


def compile_report(level: str | int | Level, arch: Optional[str] = None, open: bool = False,  # noqa: A002
                   **params: Any) -> None:
    """Show a level's compile report folded behind a label with its key numbers (open=True: unfolded);
    a setting that cannot compile gets its one-line message instead of a traceback."""
    from gemm_course.run.compile import compile_report as report

    try:
        show_text(report(level, arch=arch, **params).folded(open=open))
    except (ValueError, RuntimeError) as err:
        show_text(note(*(html.escape(t) for t in _halves(str(err)))))


def _halves(message: str) -> tuple[str, str]:
    b = from_message(message)
    return b.en, b.zh


def status() -> Any:
    """Say what this runtime will do: measure live on a GPU, or show recorded results."""
    files = results.recorded_files()
    provs = [results.load(f)["provenance"] for f in files]
    recorded_on = sorted({f"{p['gpu']}, {p['date'][:10]}" for p in provs})
    rec = "; ".join(recorded_on) or "none"
    if device.gpu_available():
        name, arch = html.escape(device.gpu_name() or "?"), device.arch()
        return _html(f"GPU found: <b>{name}</b> ({arch}). Kernels below are compiled, checked and timed "
                     f"live on it. Recorded results ({html.escape(rec)}) are shown for comparison.",
                     f"检测到 GPU：<b>{name}</b>（{arch}）。下面的内核都会在这块 GPU 上实时编译、校验和计时；"
                     f"同时给出已记录的结果（{html.escape(rec)}）作对照。")
    return _html(f"No GPU here. Every cell still runs: kernels are compiled with NVRTC for compile "
                 f"reports, and the charts show <b>recorded measurements</b> ({html.escape(rec)}).",
                 f"当前环境没有 GPU。所有单元格照常运行：内核由 NVRTC 编译以生成编译报告，"
                 f"图表展示的是<b>已记录的测量结果</b>（{html.escape(rec)}）。")


class CheckResults(Shown):
    """The results of check_table: a list (Jupyter does not print it: its table was shown already)."""

    def __repr__(self) -> str:
        passed = sum(r.passed for r in self)
        return text(f"{passed} of {len(self)} checks passed", f"{len(self)} 项检查中 {passed} 项通过").text()


def check_table(level: str | int | Level, shapes: Optional[Sequence[tuple[int, int, int]]] = None,
                open: bool = False, **params: Any) -> list:  # noqa: A002
    """Check a level on odd shapes (float64 reference, random inputs, poisoned output) and show a folded
    table whose label gives the verdict (open when a check fails, or with open=True)."""
    lv = get_level(level)
    if shapes is None:  # the odd shapes the level's preconditions allow
        base = ODD_SHAPES + MULTIPLE_OF_8_SHAPES if device.gpu_available() else SMALL_ODD_SHAPES
        resolved = lv.resolve(**params)
        shapes = [s for s in base if not lv.shape_rules(*s, resolved)]
    if not device.gpu_available() and lv.uses_tensor_cores:
        _say(f"No GPU: {lv.id} uses Tensor Core instructions, which the CPU backend cannot run; its correctness "
             "was checked on the recorded GPU (tests/test_gpu.py).",
             f"没有 GPU：{lv.id} 使用张量核心指令，CPU 后端无法运行；它的正确性已在记录所用的 GPU 上检验"
             "（tests/test_gpu.py）。")
        return CheckResults()
    where = None
    if not device.gpu_available():
        where = text("No GPU: the same CUDA C source ran on the CPU backend (compiled as C++, one fiber per "
                     "thread). This checks correctness only; CPU timings say nothing about GPU speed.",
                     "没有 GPU：同一份 CUDA C 源码在 CPU 后端上运行（按 C++ 编译，每个线程一个纤程）。"
                     "这只检验正确性；CPU 上的耗时与 GPU 速度无关。")
    out = CheckResults()
    error = None
    for M, N, K in shapes:
        try:
            result = check(lv, M, N, K, **params)
        except RuntimeError as err:  # no GPU and no way to run the kernel here
            error = from_message(str(err))
            break
        out.append(result)
    setting = ", ".join(f"{k}={v}" for k, v in params.items()) or "default"
    failed = sum(not r.passed for r in out)
    verdict = (text("all pass", "全部通过") if not failed and out else
               text(f"{failed} fail", f"{failed} 个未通过") if out else text("none run", "未运行"))
    rows = [[f"{r.M}×{r.N}×{r.K}", r.dtype, f"{r.relative_error:.2e}", f"{r.tolerance:.2e}",
             text("PASS", "通过") if r.passed else
             text(f"FAIL{f', {r.unwritten} never written' if r.unwritten else ''}",
                  f"失败{f'，{r.unwritten} 个元素未写入' if r.unwritten else ''}")] for r in out]
    table = Table(["M×N×K", text("input type", "输入类型"), text("relative error", "相对误差"),
                   text("bound", "上限"), text("result", "结果")], rows, caption=where)
    show_text(Fold(text(f"Check of {lv.id} ({setting}): {len(out)} shapes, {verdict.en}",
                        f"{lv.id}（{setting}）正确性检查：{len(out)} 个形状，{verdict.zh}"),
                   table, *([f"<p>{error.html()}</p>"] if error else []), open=open or bool(failed or error)))
    return out


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
                _say(f"{lv.id} {c} needs sm_{lv.required_cc(lv.resolve(**c))}: not run on this GPU "
                     f"({device.gpu_name()})", f"{lv.id} {c} 需要 sm_{lv.required_cc(lv.resolve(**c))}："
                     f"这块 GPU（{device.gpu_name()}）上不运行")
        records = bench([(lv.id, c) for c in here], sizes, dtype=dtype)["records"]
        where = f"measured live on {device.gpu_name()}"
    else:
        wanted = [lv.resolve(**c) for c in configs]
        records = [r for r in results.recorded(lv.id, dtype=dtype)  # cubes; shapes() has the others
                   if (r["level"] == "cublas" or r["params"] in wanted) and r["M"] == r["N"] == r["K"]]
        records = _dedupe(records)
        if not records:
            _say("No recorded results for this level yet.", "这一级还没有记录的结果。")
            return Shown()
        where = "recorded: " + results.provenance_line(records[0])
    show(performance_figure(records, "tflops", f"{lv.id}: TFLOPS vs cuBLAS · {lv.id}：TFLOPS 与 cuBLAS 对比", subtitle=where))
    show(performance_figure(records, "ms", f"{lv.id}: time · 时间", subtitle=where))
    return Shown(records)


def shapes(level: str | int | Level) -> Any:
    """The recorded non-square shapes of a level (its record_shapes), every showcase setting, as a
    table of TFLOPS with the fraction of cuBLAS measured in the same run."""
    from gemm_course.measure.autotune import size_rows
    from gemm_course.display.diagrams import show_rows

    lv = get_level(level)
    return show_rows(size_rows([(lv.id, dict(c)) for c in lv.showcase], lv.record_shapes))


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
        _say("No recorded sweep for this level.", "这一级没有记录的参数扫描。")
        return
    show(sweep_figure(records, x, y, by, title=f"{lv.id}: TFLOPS at {size}³ · {size}³ 时的 TFLOPS",
                      subtitle="recorded: " + results.provenance_line(records[0])))


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


def _runs_here(level: str, params: dict, dtype: str) -> bool:
    """Whether this machine's GPU can run a level's resolved setting on this input type (bf16 needs
    sm_80; some settings need more than their level, e.g. Level 10's copy='tma' needs sm_90)."""
    if not device.gpu_available():
        return False
    cc = device.compute_capability()
    return get_level(level).setting_runs_on(cc, params) and cc >= min_cc(dtype)


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
                _say(f"not recorded: {lv} {p} at {size}³ in {dtype}", f"没有记录：{lv} {p}，{size}³，{dtype}")
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
                     text("predicted loads (GB)", "预测载入量（GB）"), text("time (ms)", "时间（毫秒）"),
                     text("loads / time (TB/s)", "载入量/时间（TB/s）"), "TFLOPS"], cells,
                    caption=text(f"{n}³, recorded: {where}", f"{n}³，记录于：{where}")))
    return Shown(rows)


def _record_or_none(level: str, n: int, **params: Any) -> Optional[dict]:
    try:
        return results.find(level, n, **params)
    except KeyError:
        return None


def instruction_mix(level: str | int | Level, arch: str = "sm_90", ops: Sequence[str] = (), open: bool = False,  # noqa: A002
                    **params: Any) -> dict:
    """The SASS instruction mix (FFMA, shared/global loads by width, barriers) of a kernel.

    Disassembled here with nvdisasm (no GPU needed); if no disassembler is installed, the mix
    recorded with the H200 results is shown instead. ops: opcode prefixes (e.g. "HGMMA") whose
    full spellings, with every modifier, are listed too.
    """
    from gemm_course.inspect.sass import kernel_mix, memory_summary

    lv = get_level(level)
    p = lv.resolve(**params)
    try:
        mix, where = kernel_mix(lv, arch, **p)
    except KeyError as err:
        show_text(from_message(err.args[0]))
        return ShownDict()
    summary = memory_summary(mix)
    where_zh = where.replace("disassembled here for", "在本机为").replace("recorded for", "记录于") + \
        ("反汇编" if where.startswith("disassembled") else "")
    counts = ", ".join(f"{k} × {v}" for k, v in summary.items())
    spelled = [[op, str(n)] for op, n in mix.items() if ops and op.startswith(tuple(ops))]
    body = [Table([text("instruction group", "指令组"), text("count", "条数")],
                  [[k, str(v)] for k, v in summary.items()], code_columns=[0])]
    if spelled:
        body += [Table([text("full spelling", "完整写法"), text("count", "条数")], spelled, code_columns=[0])]
    show_text(Fold(text(f"SASS instruction mix of {lv.kernel_name(p)} ({where}): {counts}",
                        f"{lv.kernel_name(p)} 的 SASS 指令构成（{where_zh}）：{counts}"), *body, open=open))
    return ShownDict(summary)


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
            _say("No recorded fusion measurement.", "没有记录的融合测量。")
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
        _lines_fold(lines, "The numbers behind the chart, per shape", "图中每个形状的数字")
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


def tail_schedules(sizes: Sequence[int] = (1024, 2048, 4096, 8192), tile: tuple[int, int, int] = (128, 256, 64),
                   sm_count: int = 132) -> list[dict]:
    """Level 11's whole-tile schedule beside stream-K's even split of the k-iterations, per square size
    (models.tail_schedule): a model, not a measurement; no kernel of the course runs stream-K."""
    from gemm_course.models import tail_schedule

    rows = [{"size": n, **tail_schedule(n, n, n, *tile, sm_count)} for n in sizes]
    cells = [[f"{r['size']}³", str(r["tiles"]), f"{r['waves']:.2f}", str(r["rounds"]), f"{r['data_parallel_busy']:.0%}",
              f"{r['stream_k_tiles']:.2f}", f"{r['stream_k_saving']:.1%}", str(r["split_tiles"])] for r in rows]
    show_text(Table([text("size", "规模"), text("tiles", "分块数"), text("waves", "波次"),
                     text("rounds, whole tiles", "整块调度的轮数"), text("slots used", "槽位利用率"),
                     text("stream-K: tiles of work per SM", "stream-K：每个 SM 的工作量（分块）"),
                     text("time saved at best", "最多节省的时间"), text("tiles split (fixups)", "被拆分的分块（需合并）")],
                    cells, caption=text(f"a model: {tile[0]}×{tile[1]} tiles, k-iterations of {tile[2]}, {sm_count} SMs",
                                        f"模型：{tile[0]}×{tile[1]} 分块，每次 k 迭代 {tile[2]}，{sm_count} 个 SM")))
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
    _say(f"fp32 peak {peak:.1f} TFLOPS ({prov['sm_count']} SMs × 128 FMA × 2 × {clock_ghz:.2f} GHz, {source}); "
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
    _lines_fold(lines, "Issue slots, FMA pipe and top stalls per setting", "各设置的发射槽、FMA 流水线与主要停顿")
    return out


def multigpu(model_gpus: Sequence[int] = (1, 2, 4, 8)) -> list[dict]:
    """Level 12: one GEMM over several GPUs. Live when this machine has 2+ GPUs (and NCCL), else the
    recorded runs: measured scaling and phases, each beside the cost model (gemm_course.multigpu.report
    draws them). Returns the end-to-end row split and SUMMA rows."""
    from gemm_course.multigpu.report import show_splits

    return show_splits(model_gpus, show)


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
            _say("No recorded batched measurement.", "没有记录的批量测量。")
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
        _say("No recorded FFMA probe.", "没有记录的 FFMA 探针。")
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
    _lines_fold(lines, "The numbers behind the chart", "图中的数字")
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
        _say("No recorded mma.sync probes.", "没有记录的 mma.sync 探针。")
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
        _say(f"No recorded decomposition of Level 10 {setting} at {size}³.", f"没有第 10 级 {setting} 在 {size}³ 的分解记录。")
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
    _lines_fold([f"{ms:7.3f} ms  {at_rate(1) / ms:7.1f} TFLOPS  {name.split(' · ')[0]}" for name, ms in bars],
                "The numbers behind the chart", "图中的数字")
    return Shown([{"label": b[0], "ms": b[1]} for b in bars])


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
            _say(f"No recorded counters for {lv.id} {s}.", f"没有 {lv.id} {s} 的计数器记录。")
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
_DERIVED_ZH = {"sectors_per_load_request": "每次载入请求的扇区数", "sectors_per_store_request": "每次写回请求的扇区数"}


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


# --- exercises ---------------------------------------------------------------------------------------

def _inline_markdown(text: str) -> str:
    """The little markdown an exercise statement uses (`code`, **bold**), as HTML."""
    import re

    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out).replace("\n\n", "</p><p>")


def exercise(exercise_id: str) -> Any:
    """Show an exercise's statement; the next cells hold its starter kernel and the grading call."""
    from IPython.display import display

    from gemm_course.exercises import get_exercise

    ex = get_exercise(exercise_id)
    kinds_zh = {"write": "编写", "fix": "修复", "design": "设计", "predict": "预测"}
    display(_html(f"<b>Exercise {html.escape(ex.id)}</b> ({ex.kind}, Level {ex.number}): "
                  f"<b>{html.escape(ex.title_en)}</b></p><p>{_inline_markdown(ex.statement_en)}",
                  f"<b>练习 {html.escape(ex.id)}</b>（{kinds_zh[ex.kind]}，第 {ex.number} 级）："
                  f"<b>{html.escape(ex.title_zh)}</b></p><p>{_inline_markdown(ex.statement_zh)}"))
    return None


def hint(exercise_id: str, n: int = 1) -> Any:
    """Hint n (1, 2, ...) of an exercise: each says a little more than the one before."""
    from IPython.display import display

    from gemm_course.exercises import get_exercise

    ex = get_exercise(exercise_id)
    if not 1 <= n <= len(ex.hints):
        _say(f"{ex.id} has hints 1 to {len(ex.hints)}", f"该练习的提示编号为 1 到 {len(ex.hints)}")
        return None
    en, zh = ex.hints[n - 1]
    display(_html(f"Hint {n} of {len(ex.hints)}: {_inline_markdown(en)}",
                  f"提示 {n}/{len(ex.hints)}：{_inline_markdown(zh)}"))
    return None


def grade(exercise_id: str, source: str) -> Any:
    """Grade your kernel (the whole file's text) for an exercise, on the CPU; show the verdict."""
    from IPython.display import display

    from gemm_course.exercises import grade as run_grade

    from gemm_course.exercises import progress

    verdict = run_grade(exercise_id, source)
    en, zh = ("\n".join(verdict.lines(lang)) for lang in ("en", "zh"))
    display(_html(f"<pre class='gemm-verdict'>{html.escape(en)}</pre>", f"<pre class='gemm-verdict'>{html.escape(zh)}</pre>"))
    warning = progress.record(verdict)
    if warning:
        show_text(from_message(warning))
    return None


def progress(level: Any = None) -> Any:
    """Your exercises so far (solved, not solved, compiled but not verified), from the progress file."""
    from IPython.display import display

    from gemm_course.exercises import progress as saved

    rows = saved.status_rows(level)

    def table(lang: str) -> str:
        head = ("exercise", "status", "attempts") if lang == "en" else ("练习", "状态", "尝试次数")
        body = "".join(f"<tr><td>{html.escape(r['id'])}</td><td>{saved.LABELS[r['best']][0 if lang == 'en' else 1]}</td>"
                       f"<td>{r['attempts'] or ''}</td></tr>" for r in rows)
        return (f"<div><p>{html.escape(saved.summary_line(rows, lang))}</p><table class='gemm-table'><thead><tr>"
                + "".join(f"<th>{h}</th>" for h in head) + f"</tr></thead><tbody>{body}</tbody></table></div>")

    display(_html(table("en"), table("zh")))
    return None


def solution(exercise_id: str) -> Any:
    """The reference solution, folded: open it after you have tried."""
    from gemm_course.exercises import get_exercise

    code = html.escape(_comments_in_language(get_exercise(exercise_id).solution))
    fold = Fold(text("Show the reference solution", "查看参考答案"),
                f"<pre><code class='language-cuda'>{code}</code></pre>")
    show_text(_Solution(fold))
    return None


def _comments_in_language(source: str) -> str:
    """A solution whose comments come in pairs (English lines, then their Chinese lines) with the other
    language's half left out after language("en") or language("zh"); as written otherwise."""
    import re

    from gemm_course.bilingual.language import current_language
    from gemm_course.bilingual.text import has_cjk

    lang = current_language()
    if lang == "both":
        return source
    comment = re.compile(r"^\s*(#|//)")
    lines, out, i = source.splitlines(), [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and comment.match(lines[j]) and not has_cjk(lines[j]):
            j += 1
        k = j
        while k < len(lines) and comment.match(lines[k]) and has_cjk(lines[k]):
            k += 1
        if j > i and k > j:  # an English comment block followed by its Chinese twin
            out += lines[i:j] if lang == "en" else lines[j:k]
            i = k
        elif k > j:  # Chinese comment lines alone: kept in Chinese mode only
            out += lines[j:k] if lang == "zh" else []
            i = k
        else:
            out += lines[i:j] or [lines[i]]
            i = max(j, i + 1)
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


class _Solution:
    """The folded solution, with the class the book's style gives reference solutions."""

    def __init__(self, fold: Fold) -> None:
        self.fold = fold

    def _repr_html_(self) -> str:
        return self.fold.html().replace('class="gemm-fold"', 'class="gemm-fold gemm-solution"', 1)

    def __repr__(self) -> str:
        return self.fold.text()


def show_error(err: BaseException) -> None:
    """An error a cell caught, shown as its one-line message in the language in force (no traceback)."""
    message = from_message(str(err))
    name = type(err).__name__
    show_text(note(f"<code>{name}</code>: {html.escape(message.en)}", f"<code>{name}</code>：{html.escape(message.zh)}",
                   f"{name}: {message.en}", f"{name}：{message.zh}"))


# --- small outputs a cell used to print -------------------------------------------------------------

def shape_rules(level: str | int | Level, M: int, N: int, K: int, **params: Any) -> list:
    """Ask a level's shape rule (its preconditions on M, N, K) without running anything: shows each
    broken rule as one line in the language in force, or that the shape is accepted; returns the
    (English, Chinese) pairs the rule gave (empty: accepted)."""
    lv = get_level(level)
    rules = lv.shape_rules(M, N, K, lv.resolve(**params))
    shape = f"{M}×{N}×{K}"
    if not rules:
        _say(f"{lv.id} accepts {shape}.", f"{lv.id} 接受 {shape}。")
    for en, zh in rules:
        show_text(note(f"<code>{html.escape(shape)}</code>: {html.escape(en)}",
                       f"<code>{html.escape(shape)}</code>：{html.escape(zh)}", f"{shape}: {en}", f"{shape}：{zh}"))
    return Shown(rules)


def cuda_headers() -> None:
    """Where the CUDA headers of the Tensor Core levels come from here (which wheel or toolkit), one line
    each, in the language in force; no machine paths."""
    from gemm_course.run.compile import cuda_headers_report

    for line in cuda_headers_report():
        headers, sep, source = line.partition(": from ")
        if not sep:  # no headers: the one-line message saying how to install them
            show_text(from_message(line))
            continue
        source_zh = source.replace("the ", "", 1).replace(" wheel", " wheel 包").replace("a CUDA toolkit", "CUDA 工具包")
        _say(f"{headers}: from {source}", f"{headers}：来自 {source_zh}")


def listing(source: str, name: str, language: str = "python", open: bool = False) -> Fold:  # noqa: A002
    """A source listing (Python or CUDA) folded behind a toggle that names it and its length; open=True
    shows it unfolded. The cell's last line: `gc.notebook.listing(inspect.getsource(f), "f")`."""
    n = len(source.splitlines())
    return Fold(text(f"Source: {name}, {n} lines (the full listing)", f"源码：{name}，共 {n} 行（完整代码）"),
                code_block(_comments_in_language(source), language), open=open)


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


def compile_summary(level: str | int | Level, settings: Sequence[dict], arch: Optional[str] = None) -> list:
    """Several settings' compile reports as one table, one row each: kernel, threads per block, registers,
    shared memory, spills, blocks and occupancy per SM. arch: as compile_report (default: this GPU, or
    sm_90 without one). Returns the reports."""
    from gemm_course.run.compile import compile_report as report

    lv = get_level(level)
    reports, cells = [], []
    for s in settings:
        r = report(lv, arch=arch, **s)
        reports.append(r)
        spill = f"{r.spill_store_bytes} / {r.spill_load_bytes} B"
        name = changed_params(lv.defaults, dict(s))
        cells.append([text("default", "默认") if name == "default" else name, r.kernel,
                      str(r.threads_per_block), str(r.registers), f"{r.static_shared_bytes + r.dynamic_shared_bytes} B",
                      text("none", "无") if not r.spills else spill, str(r.occupancy.blocks_per_sm),
                      f"{r.occupancy.fraction:.0%}"])
    archs = ", ".join(sorted({r.arch for r in reports}))
    show_text(Table([text("setting", "设置"), text("kernel", "内核"), text("threads per block", "每块线程数"),
                     text("registers per thread", "每线程寄存器"), text("shared memory per block", "每块共享内存"),
                     text("spills (store / load)", "溢出（写 / 读）"), text("blocks per SM", "每 SM 线程块"),
                     text("occupancy", "占用率")], cells, code_columns=[1],
                    caption=text(f"Compiled with NVRTC for {archs}; the same numbers as each compile report.",
                                 f"由 NVRTC 为 {archs} 编译；与各自的编译报告数字相同。")))
    return Shown(reports)
