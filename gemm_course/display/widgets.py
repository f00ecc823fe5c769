"""Sliders for a level's parameters.

On a GPU, every change recompiles (cached), checks and times the kernel at the chosen size against
cuBLAS, and adds the result to a chart of everything tried so far. Without a GPU the same sliders
update the compile report (NVRTC, no GPU needed) and show the recorded measurement of that setting.
Widgets need a live kernel: the static book shows plotly figures with their own sliders instead.
"""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence

from gemm_course import device
from gemm_course.measure import results
from gemm_course.run.compile import compile_report
from gemm_course.bilingual.text import from_message, plain, text
from gemm_course.levels import Level, get_level


def _control(p: Any):
    import ipywidgets as w

    if all(isinstance(c, int) for c in p.choices):
        return w.SelectionSlider(options=list(p.choices), value=p.default, description=p.name,
                                 continuous_update=False, style={"description_width": "initial"})
    return w.ToggleButtons(options=list(p.choices), value=p.default, description=p.name)


def explorer(level: str | int | Level, size: int = 4096, sizes: Sequence[int] = (1024, 2048, 4096),
             arch: Optional[str] = None):
    """An ipywidgets panel: parameter sliders, compile report, and live or recorded performance."""
    import ipywidgets as w
    from IPython.display import HTML, display

    lv = get_level(level)
    controls = {p.name: _control(p) for p in lv.params}
    size_control = w.Dropdown(options=list(sizes), value=size if size in sizes else sizes[-1],
                              description="M = N = K")
    report_out, perf_out = w.Output(), w.Output()
    tried: list[dict[str, Any]] = []  # live measurements of this session, for the chart
    live = device.gpu_available() and lv.runs_on(device.compute_capability())
    if arch is None and (lv.arch_specific or not live):  # report for the GPU the level was built for
        arch = lv.build_arch or (device.arch() if live else None)

    def update(_change: Any = None) -> None:
        values = {name: c.value for name, c in controls.items()}
        report_out.clear_output(wait=True)
        perf_out.clear_output(wait=True)
        try:
            params = lv.resolve(**values)
        except ValueError as err:
            with report_out:
                display(HTML(f"<p>⚠ {from_message(str(err)).html()}</p>"))
            return
        with report_out:
            try:
                display(compile_report(lv, arch=arch, **params))
            except ValueError as err:  # a setting this architecture cannot run
                display(HTML(f"<p>⚠ {from_message(str(err)).html()}</p>"))
        with perf_out:
            if live and lv.setting_runs_on(device.compute_capability(), params):
                _measure_live(lv, params, size_control.value, tried)
            else:
                _show_recorded(lv, params)

    for c in [*controls.values(), size_control]:
        c.observe(update, names="value")
    name = device.gpu_name()
    mode = text(f"live on {name}", f"在 {name} 上实时测量") if live else (
        text(f"{name} cannot run this level: compile report + recorded results",
             f"{name} 无法运行这一级：编译报告 + 已记录的结果") if device.gpu_available()
        else text("no GPU: compile report + recorded results", "没有 GPU：编译报告 + 已记录的结果"))
    header = w.HTML(f"<b>{html.escape(lv.id)}</b>: {mode.html()}")
    update()
    return w.VBox([header, w.HBox([w.VBox(list(controls.values()) + [size_control]), report_out]), perf_out])


def _measure_live(lv: Level, params: dict[str, Any], n: int, tried: list[dict[str, Any]]) -> None:
    import cupy

    from gemm_course.measure.bench import cublas_gemm, time_gpu
    from gemm_course.run.check import check, random_operands
    from gemm_course.run.dtypes import storage_dtype
    from gemm_course.models import gemm_flops
    from gemm_course.display.plots import show, sweep_bar_figure

    # an odd shape, or the least odd one the level's preconditions allow (multiples of 8 or 16)
    shape = next(s for s in ((127, 129, 131), (127, 136, 264), (128, 144, 272)) if not lv.shape_rules(*s, params))
    result = check(lv, *shape, **params)
    print(result)
    if not result.passed:
        return
    A, B = random_operands(n, n, n, lv.dtypes[0])
    C = cupy.empty((n, n), dtype=storage_dtype(lv.c_type(lv.resolve(**params), lv.dtypes[0])))
    from gemm_course.run.launch import gemm

    run, C_initial = launch_kwargs(lv, params, n, n, cupy)
    if C_initial is not None:
        C[...] = C_initial
    t = time_gpu(lambda: gemm(A, B, lv, out=C, **run), budget_s=0.5, max_reps=20)
    C_blas = cupy.empty((n, n), dtype=A.dtype)  # cuBLAS returns C in the input type
    t_blas = time_gpu(lambda: cublas_gemm(A, B, C_blas), budget_s=0.5, max_reps=20)
    flops = gemm_flops(n, n, n)
    tried.append({"label": " ".join(f"{k}={v}" for k, v in params.items()) + f" @ {n}",
                  "tflops": flops / t.median_ms / 1e9, "cublas_tflops": flops / t_blas.median_ms / 1e9})
    ratio = t_blas.median_ms / t.median_ms
    print(plain(f"{n}³: {t.median_ms:.3f} ms ({tried[-1]['tflops']:.2f} TFLOPS), cuBLAS {t_blas.median_ms:.3f} ms "
                f"({tried[-1]['cublas_tflops']:.2f} TFLOPS): {ratio:.1%} of cuBLAS",
                f"{n}³：{t.median_ms:.3f} 毫秒（{tried[-1]['tflops']:.2f} TFLOPS），cuBLAS {t_blas.median_ms:.3f} 毫秒"
                f"（{tried[-1]['cublas_tflops']:.2f} TFLOPS）：cuBLAS 的 {ratio:.1%}"))
    show(sweep_bar_figure(tried, title=f"{lv.id}: settings tried in this session · 本次会话尝试过的设置"))


def launch_kwargs(lv: Level, params: dict[str, Any], M: int, N: int, xp: Any) -> tuple[dict[str, Any], Any]:
    """gemm() keyword arguments for a setting: an epilogue level also needs a bias vector, alpha and
    beta (and, when it accumulates, an initial C, returned second; else None)."""
    if not lv.epilogue:
        return dict(params), None
    from gemm_course.run.check import epilogue_inputs

    extra, C_initial, _ = epilogue_inputs(params, xp.zeros((M, N)), lv.dtypes[0], xp)
    return {**params, **extra}, C_initial


def _show_recorded(lv: Level, params: dict[str, Any]) -> None:
    matches = [r for r in results.recorded(lv.id, dtype=lv.dtypes[0]) if r["level"] == lv.id and r["params"] == params]
    if not matches:
        print(plain("No recorded measurement for this setting.", "此设置没有记录的测量结果。"))
        return
    for r in sorted(matches, key=lambda r: r["M"]):
        shape, where = f"{r['M']}×{r['N']}×{r['K']}", results.provenance_line(r)
        print(plain(f"{shape}: {r['median_ms']:.3f} ms, {r['tflops']:.2f} TFLOPS, {r['ratio_to_cublas']:.1%} of cuBLAS "
                    f"(recorded: {where})", f"{shape}：{r['median_ms']:.3f} 毫秒，{r['tflops']:.2f} TFLOPS，"
                    f"cuBLAS 的 {r['ratio_to_cublas']:.1%}（记录于：{where}）"))
