"""One language choice reaches every output, tried as a reader would: gc.language("en" | "zh"), the command
line's --en / --zh, GEMM_COURSE_LANG and the system locale, in that order, for checks, verdicts, errors,
exercise lists, levels and the command line's messages; a console that cannot show Chinese gets one line of
advice and English, not a traceback. No GPU needed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gemm_course as gc
from gemm_course.bilingual import language as bilingual

ROOT = Path(__file__).resolve().parents[1]
CJK = re.compile(r"[\u4e00-\u9fff]")
LANGUAGE_VARIABLES = ("GEMM_COURSE_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "PYTHONIOENCODING")


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    """python -m gemm_course ARGS in a clean language environment (an English locale, UTF-8 output) plus env."""
    clean = {k: v for k, v in os.environ.items() if k not in LANGUAGE_VARIABLES}
    return subprocess.run([sys.executable, "-m", "gemm_course", *args], capture_output=True, text=True,
                          encoding="utf-8", errors="replace", timeout=300, cwd=ROOT,
                          env={**clean, "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8", **env})


def _last_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-800:]
    return done.stderr.strip().splitlines()[-1]


@pytest.fixture
def lang(monkeypatch):
    """Set the choice as a reader does; the environment cleared of any choice first, the default back after."""
    for name in LANGUAGE_VARIABLES[:4]:
        monkeypatch.delenv(name, raising=False)
    yield bilingual.language
    bilingual._choice = None


# --- the order ------------------------------------------------------------------------------------------------

def test_the_order_explicit_then_environment_then_locale_then_default(lang, monkeypatch):
    assert bilingual.current_language() == "both"  # Python, a notebook, the book
    with bilingual.command_line():
        assert bilingual.current_language() == "en"  # the command line
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert bilingual.current_language() == "zh"
    with bilingual.command_line():
        assert bilingual.current_language() == "zh"
    monkeypatch.setenv("LC_MESSAGES", "en_US.UTF-8")  # the more specific variable decides
    assert bilingual.current_language() == "both"
    monkeypatch.setenv("LC_ALL", "zh_TW.UTF-8")
    assert bilingual.current_language() == "zh"
    monkeypatch.setenv("GEMM_COURSE_LANG", "en")  # the course's own variable before the locale
    assert bilingual.current_language() == "en"
    monkeypatch.setenv("GEMM_COURSE_LANG", "both")
    assert bilingual.current_language() == "both"
    lang("zh")  # an explicit choice before everything
    assert bilingual.current_language() == "zh"
    with bilingual.command_line("en"):  # the command line's --en
        assert bilingual.current_language() == "en"
    assert bilingual.current_language() == "zh"


def test_the_order_asks_no_other_process(lang, monkeypatch):
    """The choice is read from the environment: grading and printing start no process to learn the locale."""
    def refuse(*args, **kwargs):
        raise AssertionError("a subprocess was started to find the language")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert bilingual.current_language() == "zh"
    from gemm_course.exercises.grade import Step, Verdict

    assert "通过" in str(Verdict("01_edge_guard", [Step("correct", True, "right", "正确")]))


# --- Python: checks, verdicts, errors ------------------------------------------------------------------------------

def test_a_check_prints_in_the_chosen_language(lang):
    result = gc.check("01_naive", 7, 13, 5, backend="cpu")
    lang("zh")
    assert str(result).startswith("通过 01_naive") and "相对误差" in str(result) and "relative" not in str(result)
    lang("en")
    assert str(result).startswith("PASS 01_naive") and not CJK.search(str(result))
    lang("both")
    assert "relative error" in str(result) and "相对误差" in str(result)


def test_errors_after_a_choice_are_in_that_language(lang):
    calls = [lambda: gc.check("01_naive", 0, 1, 1), lambda: gc.random_operands(4, 4, 4, dtype="int32"),
             lambda: gc.get_level("05_register_blocking").resolve(TM=3), lambda: gc.get_level("nope"),
             lambda: gc.compile_report("05_register_blocking", BM=63), lambda: gc.exercises.grade("nope", "")]
    for choice in ("zh", "en", "both"):
        lang(choice)
        for call in calls:
            with pytest.raises(ValueError) as err:
                call()
            message = str(err.value)
            if choice == "zh":
                assert CJK.search(message) and not re.search(r"\b(must|not|unknown|no)\b", message), message
            elif choice == "en":
                assert not CJK.search(message), message
            else:
                assert CJK.search(message) and re.search(r"[a-z]{4,} [a-z]{2,}", message), message


def test_an_error_keeps_both_halves_for_a_caller(lang):
    from gemm_course.bilingual.text import error_halves

    lang("zh")
    with pytest.raises(ValueError) as err:
        gc.check("01_naive", 0, 1, 1)
    halves = error_halves(err.value)
    assert halves.en.startswith("M must be") and halves.zh.startswith("M 必须") and str(err.value) == halves.zh


def test_a_printed_verdict_is_in_the_chosen_language(lang):
    verdict = gc.exercises.grade("01_edge_guard", "")
    lang("zh")
    assert str(verdict).startswith("未通过 01_edge_guard") and "FAIL" not in str(verdict) and repr(verdict) == str(verdict)
    lang("en")
    assert str(verdict).startswith("FAIL 01_edge_guard") and not CJK.search(str(verdict))
    lang("both")
    assert "FAIL 01_edge_guard" in str(verdict) and "未通过 01_edge_guard" in str(verdict)
    html = verdict._repr_html_()  # a notebook: both, for the book's switch
    assert 'class="lang-en"' in html and 'class="lang-zh"' in html


# --- the command line -----------------------------------------------------------------------------------------

def test_zh_on_the_command_line_reaches_its_errors():
    for args in (("report", "05_register_blocking:BM=63", "--zh"), ("exercises", "hint", "02_missing_barrier", "9", "--zh"),
                 ("--zh", "grade", "no_such_exercise", "--starter"), ("grade", "02_missing_barrier", "--zh"),
                 ("bench", "--config", "nope", "--zh")):
        line = _last_error(_cli(*args))
        assert CJK.search(line) and not re.search(r"\b(is not allowed|has hints|no exercise|exactly one|unknown)\b", line), \
            (args, line)


def test_en_on_the_command_line_beats_the_environment():
    line = _last_error(_cli("report", "05_register_blocking:BM=63", "--en", GEMM_COURSE_LANG="zh", LANG="zh_CN.UTF-8"))
    assert "is not allowed" in line and not CJK.search(line)
    assert not CJK.search(_cli("levels", "--en", GEMM_COURSE_LANG="zh").stdout)


def test_the_command_line_is_english_by_default():
    done = _cli("levels")
    assert done.returncode == 0 and "The naive kernel" in done.stdout and not CJK.search(done.stdout)
    line = _last_error(_cli("report", "05_register_blocking:BM=63"))
    assert "is not allowed" in line and not CJK.search(line)


@pytest.mark.parametrize("env", [{"GEMM_COURSE_LANG": "zh"}, {"LANG": "zh_CN.UTF-8"}, {"LC_ALL": "zh_CN.UTF-8"}],
                         ids=["GEMM_COURSE_LANG", "LANG", "LC_ALL"])
def test_the_environment_and_the_locale_switch_every_command(env, tmp_path):
    levels = _cli("levels", **env)
    assert "朴素内核" in levels.stdout and "The naive kernel" not in levels.stdout
    listed = _cli("exercises", "--level", "2", **env)
    assert CJK.search(listed.stdout) and "Find the missing barrier" not in listed.stdout
    answer = tmp_path / "empty.cu"
    answer.write_text("")
    graded = _cli("grade", "01_edge_guard", str(answer), GEMM_COURSE_PROGRESS=str(tmp_path / "p.json"), **env)
    assert graded.returncode == 1 and graded.stdout.startswith("未通过 01_edge_guard"), graded.stdout + graded.stderr
    assert not re.search(r"\b(FAIL|seed)\b", graded.stdout)
    line = _last_error(_cli("grade", "no_such_exercise", "--starter", **env))
    assert CJK.search(line) and "no exercise" not in line


def test_both_on_the_command_line_when_asked_for():
    done = _cli("exercises", "hint", "02_missing_barrier", "1", GEMM_COURSE_LANG="both")
    assert "Hint 1 of" in done.stdout and "提示 1/" in done.stdout


def test_a_console_that_cannot_show_chinese_gets_advice_and_english():
    cases = [(("levels",), {}), (("levels", "--zh"), {}), (("levels",), {"GEMM_COURSE_LANG": "zh"}),
             (("exercises", "--level", "2", "--zh"), {}), (("summary",), {}), (("grade", "nope", "--zh"), {})]
    for args, env in cases:
        done = _cli(*args, LANG="C", PYTHONIOENCODING="ascii", **env)
        assert "Traceback" not in done.stderr and "UnicodeEncodeError" not in done.stderr, (args, done.stderr[-600:])
        assert not CJK.search(done.stdout + done.stderr), args
        if "--zh" in args or env:
            advice = done.stderr.strip().splitlines()[0]
            assert advice.isascii() and "PYTHONIOENCODING=utf-8" in advice and "--en" in advice, advice
        else:
            assert "PYTHONIOENCODING" not in done.stderr, args
    assert "The naive kernel" in _cli("levels", "--zh", LANG="C", PYTHONIOENCODING="ascii").stdout
