"""What a notebook cell shows follows the language choice: one language per mode, long evidence folded,
no machine paths. The façade runs on the CPU here (recorded results, the CPU backend, NVRTC)."""
from __future__ import annotations

import re

import pytest

import gemm_course as gc
from gemm_course.bilingual import language as bilingual, text as display_text
from gemm_course.display import notebook as nb

CJK = re.compile(r"[\u4e00-\u9fff]")
# an English sentence: three English words in a row (identifiers and code are stripped first)
ENGLISH_RUN = re.compile(r"\b[A-Za-z]{2,}\b(?:[ ,]+\b[a-z]{2,}\b){2,}")
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:home|work|usr|tmp|root|opt|content|mnt|var)/|site-packages|\.venv|/venv/")


def _outputs(call) -> list[str]:
    """The HTML of every output a façade call displays."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    with capture_output() as captured:
        call()
    assert not captured.stdout.strip(), f"printed instead of displayed: {captured.stdout[:200]}"
    return [o.data.get("text/html", "") for o in captured.outputs]


def _visible_text(html: str) -> str:
    """Text outside code, identifiers and tags."""
    html = re.sub(r"<(code|pre)[^>]*>.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r"<div class=\"highlight\">.*?</div>", " ", html, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", html)
    return re.sub(r"\S*[_/()=\[\]<>{}.]\S*", " ", text)  # identifiers, settings, kernel names, numbers


def _primer():
    from gemm_course.display import primer
    return primer


def _report():
    from gemm_course.multigpu import report as multigpu_report
    return multigpu_report


def _fp8_report():
    from gemm_course.fp8 import report as fp8_report
    return fp8_report


# Every call a notebook cell makes whose output is text, a table or a fold, under the name the cell uses
# ("name:variant" for a second case of the same call). test_every_notebook_call_is_covered fails on a call
# in a notebook that is neither here nor in VALUES.
CALLS = {
    "gc.notebook.check_table": lambda: nb.check_table("01_naive", shapes=[(7, 13, 5), (33, 65, 17)], mapping="cols"),
    "gc.notebook.check_table:tensor_cores": lambda: nb.check_table("10_mma_pipeline"),
    "gc.notebook.compile_report": lambda: nb.compile_report("02_smem_tiling", tile=16),
    "gc.notebook.compile_report:refused": lambda: nb.compile_report("05_register_blocking", BM=256, BN=256, BK=32),
    "gc.notebook.compile_report:not_allowed": lambda: nb.compile_report("05_register_blocking", TM=3),
    "gc.notebook.compile_report:arch": lambda: nb.compile_report("04_double_buffering", arch="sm_75", copy="cp_async"),
    "gc.notebook.compile_summary": lambda: nb.compile_summary("04_double_buffering", [dict(tile=8), {}]),
    "gc.compile_report": lambda: display_text.show(gc.compile_report("07_vectorized", arch="sm_90")),
    "gc.show_source": lambda: display_text.show(gc.show_source("02_smem_tiling")),
    "gc.notebook.instruction_mix": lambda: nb.instruction_mix("02_smem_tiling", tile=32),
    "gc.notebook.instruction_mix:ops": lambda: nb.instruction_mix("11_hopper_wgmma", ops=("HGMMA",), step=4),
    "gc.notebook.predict_vs_measure": lambda: nb.predict_vs_measure("01_naive"),
    "gc.notebook.traffic": lambda: nb.traffic("02_smem_tiling", size=8192),
    "gc.notebook.counter_comparison": lambda: nb.counter_comparison("01_naive", "02_smem_tiling"),
    "gc.notebook.blocks_and_waves": lambda: nb.blocks_and_waves("05_register_blocking"),
    "gc.notebook.stream_k_table": lambda: nb.stream_k_table(),
    "gc.notebook.shapes": lambda: display_text.show(nb.shapes("08_warp_tiling")),
    "gc.notebook.command": lambda: nb.command(["levels"]),
    "gc.notebook.block_order": lambda: nb.block_order(),
    "gc.notebook.last_changes": lambda: nb.last_changes(),
    "gc.notebook.gap_to_peak": lambda: nb.gap_to_peak("08_warp_tiling"),
    "gc.notebook.ffma_ceiling": lambda: nb.ffma_ceiling(),
    "gc.notebook.mma_sync_ceiling": lambda: nb.mma_sync_ceiling(),
    "gc.notebook.fusion": lambda: nb.fusion(),
    "gc.notebook.performance": lambda: nb.performance("02_smem_tiling"),
    "gc.notebook.compare": lambda: nb.compare([("02_smem_tiling", {}), ("07_vectorized", {})], size=4096),
    "gc.notebook.compare:missing": lambda: nb.compare([("02_smem_tiling", {"tile": 8}), ("02_smem_tiling", {})], size=3000),
    "gc.notebook.sweep": lambda: nb.sweep("01_naive", x="block_x", y="block_y", by="mapping"),
    "gc.notebook.naive_roofline": lambda: nb.naive_roofline(4096),
    "gc.notebook.coalescing_sectors": lambda: nb.coalescing_sectors(),
    "gc.notebook.banks": lambda: nb.banks("ty", "tx"),
    "gc.notebook.multigpu": lambda: nb.multigpu(),
    "gc.notebook.status": lambda: display_text.show(nb.status()),
    "gc.notebook.shape_rules": lambda: nb.shape_rules("10_mma_pipeline", 33, 65, 17),
    "gc.notebook.shape_rules:accepted": lambda: nb.shape_rules("09_wmma", 32, 32, 64, staging="none"),
    "gc.notebook.cuda_headers": lambda: nb.cuda_headers(),
    "gc.notebook.listing": lambda: display_text.show(nb.listing("def f():\n    return 1\n", "f")),
    "gc.notebook.exercise": lambda: nb.exercise("01_edge_guard"),
    "gc.notebook.hint": lambda: nb.hint("01_edge_guard", 1),
    "gc.notebook.hint:out_of_range": lambda: nb.hint("01_edge_guard", 99),
    "gc.notebook.solution": lambda: nb.solution("01_edge_guard"),
    "gc.notebook.solution:predict": lambda: nb.solution("01_predict_sectors"),
    "gc.notebook.grade": lambda: nb.grade("01_edge_guard", ""),
    "gc.notebook.progress": lambda: nb.progress("01_naive"),
    "gc.notebook.show_error": lambda: nb.show_error(ValueError("the shape is too small / 形状太小")),
    "gc.notebook.show_error:race": lambda: nb.show_error(_race()),
    "primer.backend_note": lambda: display_text.show(_primer().backend_note()),
    "report.scopes_table": lambda: display_text.show(_report().scopes_table(_report().runs())),
    "report.paper_table": lambda: display_text.show(_report().paper_table(_report().runs())),
    "report.tp_table": lambda: display_text.show(_report().tp_table(_report().runs())),
    "report.simulated_check": lambda: display_text.show(_report().simulated_check()),
    "fp8_report.compile_table": lambda: display_text.show(_fp8_report().compile_table()),
    "fp8_report.check": lambda: _fp8_check(),
    "fp8_report.live": lambda: _fp8_report().live(),
    "fp8_report.counters_table": lambda: display_text.show(_fp8_report().counters_table()),
    "fp8_report.small_m_table": lambda: display_text.show(_fp8_report().small_m_table()),
    "fp8_report.staged_table": lambda: display_text.show(_fp8_report().staged_table()),
    "fp8_report.deepgemm_table": lambda: display_text.show(_fp8_report().deepgemm_table()),
}

# Calls whose result is a value (a number, an array, a launch, a level), a chart (the figure tests check
# charts), code (the same in both languages), a widget, or an exception a later call shows.
VALUES = {
    "gc.get_level", "gc.check", "gc.gemm", "gc.tolerance", "gc.relative_error", "gc.kernel_source",
    "gc.dtypes.to_bfloat16", "gc.dtypes.to_float64", "level.geometry", "lv.kernel_name", "lv.resolve",
    "gc.plots.show", "plots.show", "primer.show", "primer.run_kernel", "primer.ceil_div", "primer.dim3",
    "primer.VECTOR_ADD.replace", "primer.REVERSE_NO_BARRIER.splitlines", "gc.widgets.explorer",
    "report.runs", "multigpu.gpu_count", "inspect.getsource", "fp8.encode_e4m3", "fp8.decode_e4m3",
    "fp8.quantize_rows_1x128", "fp8_gemm.check_operands", "fp8_gemm.kernel_source", "fp8_gemm.random_fp8_operands",
}
FACADE_PREFIXES = ("gc.", "report.", "fp8_report.", "fp8_gemm.", "fp8.", "primer.", "multigpu.", "level.", "lv.")

# calls whose every output is a chart (checked by tests/test_figure_layout.py), here checked for printing
CHARTS_ONLY = {"gc.notebook.banks", "gc.notebook.coalescing_sectors", "gc.notebook.compare", "gc.notebook.multigpu",
               "gc.notebook.naive_roofline", "gc.notebook.performance", "gc.notebook.sweep"}

FOLDED = {"gc.notebook.check_table", "gc.notebook.compile_report", "gc.notebook.instruction_mix",
          "gc.notebook.predict_vs_measure", "gc.notebook.solution", "gc.show_source", "gc.compile_report",
          "gc.notebook.listing", "report.simulated_check", "fp8_report.compile_table", "fp8_report.check"}


def _fp8_check():
    """fp8_report.check on one small shape: what it shows, not what it catches (test_prose_level13 checks that)."""
    fr = _fp8_report()
    shapes, fr.EMULATED_SHAPES = fr.EMULATED_SHAPES, ((64, 128, 256),)
    try:
        return fr.check()
    finally:
        fr.EMULATED_SHAPES = shapes


def _race():
    from gemm_course.display import primer
    from gemm_course.run.cpu_backend import KernelRaceError

    import numpy as np
    try:
        primer.run_kernel(primer.REVERSE_NO_BARRIER, "reverse_each_block", 2, 8, [np.arange(16, dtype=np.float32)],
                          backend="cpu")
    except KernelRaceError as race:
        return race
    raise AssertionError("the race was not caught")


def _notebook_calls() -> dict[str, set[str]]:
    """Every dotted call a notebook's code cells make, by the notebook that makes it."""
    import ast

    def dotted(node) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            head = dotted(node.value)
            return head and f"{head}.{node.attr}"
        return None

    found: dict[str, set[str]] = {}
    for page, source in _code_cells():
        if page[:2].isdigit():  # the level notebooks; the book's pages print and tabulate on their own
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Call) and (name := dotted(node.func)):
                    found.setdefault(name, set()).add(page)
    return found


def test_every_notebook_call_is_covered():
    """A notebook call to the course's package is either checked here for one language per mode (CALLS)
    or named as a value, chart, code or widget (VALUES): a new display call needs its case in CALLS."""
    covered = {name.split(":")[0] for name in CALLS} | VALUES
    calls = _notebook_calls()
    missing = sorted(f"{c} ({', '.join(sorted(calls[c]))})" for c in calls
                     if c.startswith(FACADE_PREFIXES) and c not in covered and not c.endswith("_figure"))
    assert not missing, f"notebook calls without a one-language check: {missing}"


def _code_cells() -> list[tuple[str, str]]:
    """(page, source) of every code cell of the notebooks and of the book's MyST pages."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cells = [(path.stem, "".join(cell["source"])) for path in sorted((root / "notebooks").glob("*.ipynb"))
             for cell in json.loads(path.read_text(encoding="utf-8"))["cells"] if cell["cell_type"] == "code"]
    for path in sorted((root / "book").glob("*.md")):
        for block in re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", path.read_text(encoding="utf-8"),
                                flags=re.S | re.M):
            cells.append((path.stem, "\n".join(line for line in block.split("\n") if not line.startswith(":"))))
    return cells


def test_no_cell_prints_two_languages():
    """A print() in a cell shows its text in every mode, the book's too: a text in Chinese belongs in a
    display helper (gc.notebook.say, a table, a fold), which shows one language per mode."""
    import ast

    bad = []
    for page, source in _code_cells():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                text = " ".join(c.value for a in node.args for c in ast.walk(a)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str))
                if CJK.search(text):
                    bad.append(f"{page}: {ast.unparse(node)[:80]}")
    assert not bad, bad


@pytest.fixture
def lang():
    def set_to(choice: str) -> None:
        bilingual.language(choice)
    yield set_to
    bilingual._choice = None


@pytest.mark.parametrize("name", sorted(CALLS))
def test_english_mode_shows_no_chinese(name, lang):
    lang("en")
    for out in _outputs(CALLS[name]):
        if "plotly" in out.lower():  # charts belong to the plotting helper
            continue
        assert not CJK.search(re.sub(r"<[^>]+>", " ", out)), f"{name}: Chinese in English mode"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_chinese_mode_shows_no_english_sentence(name, lang):
    lang("zh")
    for out in _outputs(CALLS[name]):
        if "plotly" in out.lower():
            continue
        words = ENGLISH_RUN.findall(_visible_text(out))
        assert not words, f"{name}: English in Chinese mode: {words[:3]}"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_both_mode_pairs_every_english_span_with_a_chinese_one(name, lang):
    lang("both")
    outs = [o for o in _outputs(CALLS[name]) if "plotly" not in o.lower()]
    assert outs or name in CHARTS_ONLY, f"{name}: nothing shown"
    for out in outs:
        assert out.count('class="lang-en"') == out.count('class="lang-zh"') > 0, name
        assert not MACHINE_PATH.search(out), f"{name}: a machine path in the output"


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_long_evidence_is_folded_with_a_labelled_summary(name, lang):
    lang("both")
    out = next(o for o in _outputs(CALLS[name]) if "<details" in o)
    summary = re.search(r"<summary>(.*?)</summary>", out, flags=re.S).group(1)
    assert 'class="lang-en"' in summary and 'class="lang-zh"' in summary
    assert "<details class=\"gemm-fold" in out and " open" not in out.split(">", 1)[0]


def test_a_failed_check_opens_its_fold_and_open_true_opens_any(lang):
    lang("en")
    assert "<details class=\"gemm-fold\" open>" in _outputs(
        lambda: nb.compile_report("02_smem_tiling", tile=16, open=True))[0]
    summary = re.search(r"<summary>(.*?)</summary>", _outputs(CALLS["gc.notebook.check_table"])[0]).group(1)
    assert "2 shapes, all pass" in summary


def test_kernel_listing_and_bare_compile_report_fold(lang):
    lang("both")
    listing = gc.show_source("02_smem_tiling")._repr_html_()
    assert listing.startswith('<details class="gemm-fold">') and "__syncthreads" in listing
    assert "Kernel source: 02_smem_tiling.cu" in listing
    report = gc.compile_report("02_smem_tiling", arch="sm_90")._repr_html_()
    assert report.startswith('<details class="gemm-fold">') and "registers" in report


def test_returned_values_are_not_printed_again():
    """A helper that displayed its result returns a list or dict Jupyter does not show a second time."""
    rows = nb.blocks_and_waves("05_register_blocking")
    assert isinstance(rows, list) and rows and hasattr(rows, "_ipython_display_")
    assert hasattr(nb.predict_vs_measure("01_naive"), "_ipython_display_")


def test_plain_text_follows_the_choice(lang):
    t = display_text.text("registers", "寄存器")
    lang("en")
    assert str(t) == "registers" and "寄存器" not in str(gc.compile_report("01_naive", arch="sm_90"))
    lang("zh")
    assert str(t) == "寄存器" and "registers" not in str(gc.compile_report("01_naive", arch="sm_90"))
    lang("both")
    assert str(t) == "registers · 寄存器"


def test_language_choice_env_and_bad_value(monkeypatch):
    bilingual._choice = None
    monkeypatch.setenv("GEMM_COURSE_LANG", "zh")
    assert gc.language() == "zh" == bilingual.current_language()
    monkeypatch.delenv("GEMM_COURSE_LANG")
    assert gc.language() == "both"
    with pytest.raises(ValueError, match="'en', 'zh' or 'both'"):
        gc.language("fr")
    assert gc.language("EN ") == "en"
    bilingual._choice = None


def test_messages_split_into_their_halves():
    m = display_text.from_message("no GPU here / 这里没有 GPU")
    assert (m.en, m.zh) == ("no GPU here", "这里没有 GPU")
    assert display_text.from_message("PASS 01_naive").zh == "PASS 01_naive"


def test_solutions_and_listings_keep_one_language_of_their_comment_pairs(lang):
    source = "# the sum\n# 求和\nx = 1 + 2  # 3\n// a kernel comment, English only\ny = x\n"
    lang("en")
    assert nb.in_chosen_language(source) == "# the sum\nx = 1 + 2  # 3\n// a kernel comment, English only\ny = x\n"
    lang("zh")
    assert nb.in_chosen_language(source) == "# 求和\nx = 1 + 2  # 3\n// a kernel comment, English only\ny = x\n"
    lang("both")
    assert nb.in_chosen_language(source) == source


def test_two_language_table_cells_show_one_language(lang):
    from gemm_course.display import diagrams

    lang("zh")
    html = diagrams.table(["size · 规模", "M×N×K"], [["yes · 是", 3]]).data
    assert "规模" in html and "size" not in html and "是" in html and "yes" not in html
    lang("en")
    html = diagrams.table(["size · 规模"], [["yes · 是"]]).data
    assert "size" in html and not CJK.search(html)
    lang("both")
    assert bilingual.split("yes · 是").count("lang-") == 3  # en, separator, zh: the book's switch picks one


def test_level_setting_errors_have_both_halves(lang):
    with pytest.raises(ValueError) as err:
        gc.get_level("05_register_blocking").resolve(TM=3)
    message = display_text.from_message(str(err.value))
    assert "is not allowed" in message.en and "不允许" in message.zh and not CJK.search(message.en)
    with pytest.raises(ValueError) as err:
        gc.get_level("05_register_blocking").resolve(BM=256, BN=256, BK=32)
    message = display_text.from_message(str(err.value))
    assert message.en.startswith("level 05_register_blocking with") and CJK.search(message.zh) and not CJK.search(message.en)


def test_the_explorer_header_follows_the_choice(lang):
    lang("zh")
    from gemm_course.display import widgets

    header = widgets.explorer("01_naive").children[0].value
    assert "没有 GPU" in header and "recorded" not in header
    lang("en")
    header = widgets.explorer("01_naive").children[0].value
    assert "no GPU" in header and not CJK.search(header)
