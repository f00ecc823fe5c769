"""The few calls a level notebook makes, so notebook cells stay one line each.

Each works with a GPU (measured live) and without one (recorded measurements, clearly labelled).
"""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence

from gemm_course import device
from gemm_course.measure import results
from gemm_course.bilingual.text import Bilingual, Fold, Shown, Table, code_block, from_message, note, show as show_text, text
from gemm_course.run.check import MULTIPLE_OF_8_SHAPES, ODD_SHAPES, check
from gemm_course.levels import Level, get_level
from gemm_course.display.plots import show
from gemm_course.bilingual.text import fold_lines, say  # noqa: F401
# The calls by topic (the notebooks reach them all here, as gc.notebook.<name>):
from gemm_course.display.ceilings import (  # noqa: F401
    naive_roofline, ffma_ceiling, mma_sync_ceiling, gap_to_peak, block_order, last_changes)
from gemm_course.display.memory import (  # noqa: F401
    coalescing_sectors, banks, traffic)
from gemm_course.display.runs import (  # noqa: F401
    LIVE_SIZES, performance, sweep, compare, fusion, blocks_and_waves, stream_k_table, ladder, batched)
from gemm_course.display.tuning import tuned  # noqa: F401
from gemm_course.display.counter_tables import (  # noqa: F401
    predict_vs_measure, counter_comparison)
from gemm_course.display.reports import (  # noqa: F401
    compile_report, instruction_mix, compile_summary, shape_rules, cuda_headers, listing)
from gemm_course.bilingual.comments import in_chosen_language

# Small enough to check quickly where kernels run on the CPU.
SMALL_ODD_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 131), (100, 1, 7), (1, 70, 50))


def status() -> Any:
    """Say what this runtime will do: measure live on a GPU, or show recorded results."""
    files = results.recorded_files()
    provs = [results.load(f)["provenance"] for f in files]
    recorded_on = sorted({f"{p['gpu']}, {p['date'][:10]}" for p in provs})
    rec = "; ".join(recorded_on) or "none"
    pretended = device.pretended_arch()
    if pretended:  # gc.pretend_arch / GEMM_COURSE_ARCH: say so first, the reports and decisions follow it
        real = f"{device.gpu_name()} ({device.real_arch()})" if device.gpu_available() else None
        en = (f"Pretending to be {pretended} ({device.ARCH_ENV} or gc.pretend_arch): compile reports, the choice "
              "between live and recorded runs and the notes below follow it"
              + (f"; kernels that run are built for the real GPU, {real}." if real else "; there is no GPU here."))
        zh = (f"正在假装成 {pretended}（{device.ARCH_ENV} 或 gc.pretend_arch）：编译报告、实时运行还是展示实测记录的"
              "选择以及下面的说明都以它为准" + (f"；真正运行的内核仍为本机的 GPU {real} 编译。" if real else "；这里没有 GPU。"))
        return note(f"{html.escape(en)} Recorded results: {html.escape(rec)}.",
                    f"{html.escape(zh)}实测记录：{html.escape(rec)}。")
    if device.gpu_available():
        name, arch = html.escape(device.gpu_name() or "?"), device.arch()
        return note(f"GPU found: <b>{name}</b> ({arch}). Kernels below are compiled, checked and timed "
                    f"live on it. Recorded results ({html.escape(rec)}) are shown for comparison.",
                    f"检测到 GPU：<b>{name}</b>（{arch}）。下面的内核都会在这块 GPU 上实时编译、校验和计时；"
                    f"同时给出已记录的结果（{html.escape(rec)}）作对照。")
    return note(f"No GPU here. Every cell still runs: kernels are compiled with NVRTC for compile "
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
        say(f"No GPU: {lv.id} uses Tensor Core instructions, which the CPU backend cannot run; its correctness "
            "was checked on the recorded GPU (tests/test_gpu.py).",
            f"没有 GPU：{lv.id} 使用张量核心指令，CPU 后端无法运行；它的正确性已在记录所用的 GPU 上检验"
            "（tests/test_gpu.py）。")
        return CheckResults()
    where = None
    if not device.gpu_available():
        where = text("No GPU: the same CUDA C source ran on the CPU backend (compiled as C++, one fiber per CUDA "
                     "thread: a light thread of execution that the CPU switches between in turn). This checks "
                     "correctness only; CPU timings say nothing about GPU speed.",
                     "没有 GPU：同一份 CUDA C 源码在 CPU 后端上运行（按 C++ 编译，每个 CUDA 线程一个纤程，"
                     "即由 CPU 轮流切换执行的轻量执行流）。"
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


def shapes(level: str | int | Level) -> Any:
    """The recorded non-square shapes of a level (its record_shapes), every showcase setting, as a
    table of TFLOPS with the fraction of cuBLAS measured in the same run."""
    from gemm_course.measure.autotune import size_rows
    from gemm_course.display.diagrams import show_rows

    lv = get_level(level)
    return show_rows(size_rows([(lv.id, dict(c)) for c in lv.showcase], lv.record_shapes))


def multigpu(model_gpus: Sequence[int] = (1, 2, 4, 8)) -> list[dict]:
    """Level 12: one GEMM over several GPUs. Live when this machine has 2+ GPUs (and NCCL), else the
    recorded runs: measured scaling and phases, each beside the cost model (gemm_course.multigpu.report
    draws them). Returns the end-to-end row split and SUMMA rows."""
    from gemm_course.multigpu.report import show_splits

    return show_splits(model_gpus, show)


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
    display(note(f"<b>Exercise {html.escape(ex.id)}</b> ({ex.kind}, Level {ex.number}): "
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
        say(f"{ex.id} has hints 1 to {len(ex.hints)}", f"该练习的提示编号为 1 到 {len(ex.hints)}")
        return None
    en, zh = ex.hints[n - 1]
    display(note(f"Hint {n} of {len(ex.hints)}: {_inline_markdown(en)}",
                 f"提示 {n}/{len(ex.hints)}：{_inline_markdown(zh)}"))
    return None


def grade(exercise_id: str, source: str) -> Any:
    """Grade your kernel (the whole file's text) for an exercise, on the CPU; show the verdict."""
    from IPython.display import display

    from gemm_course.exercises import grade as run_grade

    from gemm_course.exercises import progress

    verdict = run_grade(exercise_id, source)
    en, zh = ("\n".join(verdict.lines(lang)) for lang in ("en", "zh"))
    display(note(f"<pre class='gemm-verdict'>{html.escape(en)}</pre>", f"<pre class='gemm-verdict'>{html.escape(zh)}</pre>"))
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

    display(note(table("en"), table("zh")))
    return None


def solution(exercise_id: str) -> Any:
    """The reference solution, folded: open it after you have tried."""
    from gemm_course.exercises import get_exercise

    code = html.escape(in_chosen_language(get_exercise(exercise_id).solution))
    fold = Fold(text("Show the reference solution", "查看参考答案"),
                f"<pre><code class='language-cuda'>{code}</code></pre>")
    show_text(_Solution(fold))
    return None


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


def command(argv: Sequence[str]) -> None:
    """Run `python -m gemm_course ARGV...` here and show what it prints, in the language in force (the book's
    switch: each language's output, one shown at a time)."""
    import contextlib
    import io

    from gemm_course.__main__ import main
    from gemm_course.bilingual import language as choice

    def printed(lang: str) -> str:
        out = io.StringIO()
        with choice.chosen(lang), contextlib.redirect_stdout(out):
            main(list(argv))
        return out.getvalue().rstrip("\n")

    en, zh = printed("en"), printed("zh")
    show_text(Bilingual(en, zh, code_block(en, "text"), code_block(zh, "text"), block=True))

