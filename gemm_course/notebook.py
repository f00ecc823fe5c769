"""The few calls a level notebook makes, so notebook cells stay one line each.

Each works with a GPU (measured live) and without one (recorded measurements, clearly labelled).
"""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence

from . import device, results
from .check import ODD_SHAPES, check
from .levels import Level, get_level
from .models import KNOWN_GPUS, arithmetic_intensity, gemm_flops, naive_load_requests, spec_from_properties
from .plots import performance_figure, roofline_figure, show, sweep_figure

# Small enough to check quickly where kernels run on the CPU.
SMALL_ODD_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 131), (100, 1, 7), (1, 70, 50))

LIVE_SIZES = (256, 512, 1024, 2048, 4096)


def _html(en: str, zh: str) -> Any:
    from IPython.display import HTML

    return HTML(f'<div class="gemm-note"><p class="lang-en">{en}</p><p class="lang-zh">{zh}</p></div>')


def status() -> Any:
    """Say what this runtime will do: measure live on a GPU, or show recorded results."""
    files = results.recorded_files()
    recorded_on = sorted({results.load(f)["provenance"]["gpu"] + ", " + results.load(f)["provenance"]["date"][:10]
                          for f in files})
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


def check_table(level: str | int | Level, shapes: Optional[Sequence[tuple[int, int, int]]] = None,
                **params: Any) -> list:
    """Check a level on odd shapes (float64 reference, random inputs, poisoned output) and print."""
    lv = get_level(level)
    if shapes is None:
        shapes = ODD_SHAPES if device.gpu_available() else SMALL_ODD_SHAPES
    out = []
    for M, N, K in shapes:
        try:
            result = check(lv, M, N, K, **params)
        except RuntimeError as err:  # no GPU and no way to run the kernel here
            print(err)
            return out
        print(result)
        out.append(result)
    return out


def performance(level: str | int | Level, configs: Optional[Sequence[dict]] = None,
                sizes: Sequence[int] = LIVE_SIZES) -> list[dict]:
    """TFLOPS and time against cuBLAS over sizes: measured live on a GPU, else the recorded ones."""
    lv = get_level(level)
    configs = [dict(c) for c in (configs or lv.showcase)]
    if device.gpu_available():
        from .bench import bench

        records = bench([(lv.id, c) for c in configs], sizes)["records"]
        where = f"measured live on {device.gpu_name()}"
    else:
        wanted = [lv.resolve(**c) for c in configs]
        records = [r for r in results.recorded(lv.id)
                   if r["level"] == "cublas" or r["params"] in wanted]
        records = _dedupe(records)
        if not records:
            print("No recorded results for this level yet.")
            return []
        where = "recorded: " + results.provenance_line(records[0])
    show(performance_figure(records, "tflops", f"{lv.id}: TFLOPS vs cuBLAS", subtitle=where))
    show(performance_figure(records, "ms", f"{lv.id}: time · 时间", subtitle=where))
    return records


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
    records = _dedupe([r for r in results.recorded(lv.id)
                       if r["level"] == lv.id and (r["M"], r["N"], r["K"]) == (size, size, size)])
    if not records:
        print("No recorded sweep for this level.")
        return
    show(sweep_figure(records, x, y, by, title=f"{lv.id}: TFLOPS at {size}³ · {size}³ 时的 TFLOPS",
                      subtitle="recorded: " + results.provenance_line(records[0])))


def naive_roofline(size: int = 4096) -> None:
    """Level 1 on the fp32 roofline: the H200 from the recorded file, and the reader's GPU if any."""
    h200 = KNOWN_GPUS["NVIDIA H200"]
    n = size
    ideal = arithmetic_intensity(n, n, n)
    no_reuse = gemm_flops(n, n, n) / naive_load_requests(n, n, n)
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
