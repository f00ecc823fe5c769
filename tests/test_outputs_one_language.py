"""What a notebook cell shows follows the language choice: one language per mode, long evidence folded,
no machine paths. The façade runs on the CPU here (recorded results, the CPU backend, NVRTC)."""
from __future__ import annotations

import re

import pytest

import gemm_course as gc
from gemm_course import bilingual, display_text
from gemm_course import notebook as nb

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


CALLS = {
    "check_table": lambda: nb.check_table("01_naive", shapes=[(7, 13, 5), (33, 65, 17)], mapping="cols"),
    "compile_report": lambda: nb.compile_report("02_smem_tiling", tile=16),
    "compile_report_refused": lambda: nb.compile_report("05_register_blocking", BM=256, BN=256, BK=32),
    "instruction_mix": lambda: nb.instruction_mix("02_smem_tiling", tile=32),
    "predict_vs_measure": lambda: nb.predict_vs_measure("01_naive"),
    "traffic": lambda: nb.traffic("02_smem_tiling", size=8192),
    "blocks_and_waves": lambda: nb.blocks_and_waves("05_register_blocking"),
    "hint": lambda: nb.hint("01_edge_guard", 1),
    "solution": lambda: nb.solution("01_edge_guard"),
    "show_error": lambda: nb.show_error(ValueError("the shape is too small / 形状太小")),
}

FOLDED = {"check_table", "compile_report", "instruction_mix", "predict_vs_measure", "solution"}


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
    assert outs
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
    summary = re.search(r"<summary>(.*?)</summary>", _outputs(CALLS["check_table"])[0]).group(1)
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
