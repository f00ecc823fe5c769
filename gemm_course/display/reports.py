"""What the compiler made, shown folded: compile reports and summaries, SASS instruction mixes, a level's shape rules, where the CUDA headers come from, and source listings in one language.

The notebooks call these through the façade (gemm_course.display.notebook).
"""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence
from gemm_course.bilingual.text import Fold, Shown, ShownDict, Table, code_block, from_message, note, show as show_text, text
from gemm_course.levels import Level, get_level
from gemm_course.display.plots import changed_params
from gemm_course.bilingual.text import say


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


def shape_rules(level: str | int | Level, M: int, N: int, K: int, **params: Any) -> list:
    """Ask a level's shape rule (its preconditions on M, N, K) without running anything: shows each
    broken rule as one line in the language in force, or that the shape is accepted; returns the
    (English, Chinese) pairs the rule gave (empty: accepted)."""
    lv = get_level(level)
    rules = lv.shape_rules(M, N, K, lv.resolve(**params))
    shape = f"{M}×{N}×{K}"
    if not rules:
        say(f"{lv.id} accepts {shape}.", f"{lv.id} 接受 {shape}。")
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
        say(f"{headers}: from {source}", f"{headers}：来自 {source_zh}")


def listing(source: str, name: str, language: str = "python", open: bool = False) -> Fold:  # noqa: A002
    """A source listing (Python or CUDA) folded behind a toggle that names it and its length; open=True
    shows it unfolded. The cell's last line: `gc.notebook.listing(inspect.getsource(f), "f")`. Each label
    counts the lines of its own language's listing (comments in English and Chinese twins keep one language)."""
    from gemm_course.bilingual.comments import in_chosen_language, in_language

    n_en, n_zh = (len(in_language(source, lang).splitlines()) for lang in ("en", "zh"))
    return Fold(text(f"Source: {name}, {n_en} lines (the full listing)", f"源码：{name}，共 {n_zh} 行（完整代码）"),
                code_block(in_chosen_language(source), language), open=open)
