"""gemm-course: GEMM, level by level. The package every notebook imports.

    import gemm_course as gc
    gc.levels()                          # the registry, in teaching order
    C = gc.gemm(A, B, level="01_naive")  # run a level's kernel: CuPy arrays on a GPU, NumPy arrays on
                                         # the CPU backend (the same CUDA C source, for small shapes)
    gc.check("01_naive", 1000, 7, 4097)  # correctness against float64, random inputs, poisoned output
    gc.compile_report("01_naive", arch="sm_75")   # registers, shared memory, spills, occupancy: no GPU needed
    gc.bench([("01_naive", {})], [1024, 4096])    # timing against cuBLAS, L2 flushed, JSON with provenance
    gc.results.recorded("01_naive")      # measurements shipped with the course
"""
from __future__ import annotations

import importlib
import signal
import sys
from typing import Any

if sys.argv[:1] == ["-m"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    # `python -m gemm_course` is loading this package: Ctrl-C now is one line too
    def _interrupted_while_loading(signum: int, frame: Any) -> None:
        raise SystemExit("python -m gemm_course: interrupted (Ctrl-C) / 已中断（Ctrl-C）")

    signal.signal(signal.SIGINT, _interrupted_while_loading)  # __main__.main restores Python's own handler

from gemm_course.run import disk_cache as _disk_cache

_disk_cache.prepare_cupy_cache()  # before anything imports CuPy, which makes its kernel cache (~/.cupy) as it loads
from gemm_course.measure.bench import Timing, bench, time_gpu
from gemm_course.bilingual.language import language  # gc.language("zh") / ("en"): outputs in one language (Jupyter, Colab)
from gemm_course.run.check import CheckResult, check, random_operands, relative_error, tolerance
from gemm_course.run.compile import CompileReport, compile_report, kernel_source, show_source
from .device import gpu_available, pretend_arch  # gc.pretend_arch("sm_120"): another card's reports and decisions
from gemm_course.run.launch import gemm
from .levels import Launch, Level, Param, get_level, levels
from gemm_course.bilingual.text import one_language_errors

# A wrong input's message ("English / 中文") in the language in force: one language after gc.language("zh"),
# GEMM_COURSE_LANG or a Chinese locale; both halves when nothing chooses (the book's switch shows one).
bench, check, compile_report, gemm, get_level, kernel_source, language, random_operands, relative_error, \
    show_source, time_gpu, tolerance = map(one_language_errors, (
        bench, check, compile_report, gemm, get_level, kernel_source, language, random_operands, relative_error,
        show_source, time_gpu, tolerance))

# Short names the notebooks use (gc.notebook, gc.plots, ...): each module lives in its topic's folder and
# loads on first use, so `import gemm_course` stays light (plotly and ipywidgets load only when shown).
_LAZY = {
    "autotune": "measure.autotune", "compile": "run.compile", "counters": "measure.counters",
    "cpu_backend": "run.cpu_backend", "diagrams": "display.diagrams", "display_text": "bilingual.text", "dtypes": "run.dtypes",
    "exercises": "exercises", "models": "models", "notebook": "display.notebook", "plots": "display.plots",
    "predictions": "measure.predictions", "results": "measure.results", "sass": "inspect.sass", "support": "support",
    "warp_access": "inspect.warp_access", "widgets": "display.widgets",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{_LAZY[name]}")
    raise AttributeError(f"module 'gemm_course' has no attribute {name!r}")


__all__ = [
    "CheckResult", "CompileReport", "Launch", "Level", "Param", "Timing", "bench", "check",
    "compile_report", "gemm", "get_level", "gpu_available", "kernel_source", "language", "levels", "models",
    "pretend_arch",
    "random_operands", "relative_error", "results", "show_source", "time_gpu", "tolerance",
]
