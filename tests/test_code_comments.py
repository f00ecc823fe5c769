"""Code comments in the reader's language, from one source (gemm_course/bilingual/comments.py).

* Every exercise's starter writes each English comment with its Chinese twin right after it (and no Chinese
  comment without its English one), with some Chinese on every line of a twin; a drawing is shared by both
  languages. A reference solution that carries Chinese comments follows the same convention.
* Either language's version of a starter (what the book's switch shows, what gc.language("en"/"zh") gives)
  keeps every line of code, and shows no comment of the other language.
* The book's marking of a highlighted block (the notebook's starter cell, a CUDA listing) shows, for each
  language, exactly that version: in the page and in what its copy button copies.
* The grader reads an answer whose comments are in either language, or in both, the same way.
* The kernel files a lesson shows in full (gc.show_source for Levels 1-11, the listing of Level 13's file) follow
  the same convention, both ways; gc.show_source shows one language after gc.language("en"/"zh"), keeping every
  line of code, and the book's marking of its highlighted listing shows and copies one language.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gemm_course import exercises as ex
from gemm_course.bilingual.comments import CJK, Comments, in_language, mark_html, text_shown

REPO = Path(__file__).resolve().parents[1]
ALL = ex.exercises()
ids = pytest.mark.parametrize("exercise", ALL, ids=[e.id for e in ALL])


def _code(text: str) -> list[str]:
    """The lines of code (comments, blank lines and comment-only lines left out)."""
    c = Comments(text.splitlines())
    return [line[:c.col[i]].rstrip() if c.col[i] >= 0 else line.rstrip()
            for i, line in enumerate(c.lines) if not c.own(i) and line.strip()]


def _split_twins(c: Comments) -> list[str]:
    """Comment lines without Chinese right under a Chinese line of the same column: a Chinese twin with a line
    that holds no Chinese (a formula, a row of a table) ends there, so that line shows in English (as a second
    pair's English, or shared) and not in Chinese. Write some Chinese on every line of a twin, and start a new
    English paragraph after a blank line, a `//` line or code rather than right under a Chinese one (an
    exercise's empty body between its header and its end holds a blank line)."""
    english = {e for p in c.pairs if not p.trailing for e in p.en}
    return [f"line {i + 1}: {c.lines[i].strip()}" for i in range(1, len(c.lines))
            if c.own(i) and not c.chinese(i) and not c.empty(i) and c.own(i - 1) and c.chinese(i - 1)
            and c.col[i - 1] == c.col[i] and (i in english or i not in c.roles())]


@ids
def test_each_comment_has_its_twin(exercise):
    c = Comments(exercise.starter.splitlines())
    problems = c.problems() + _split_twins(c)
    assert not problems, f"{exercise.id}'s starter:\n" + "\n".join(problems)


BILINGUAL_SOLUTIONS = [e for e in ALL if CJK.search(e.solution)]


def test_some_solutions_carry_chinese_comments():
    """The solutions' check below has something to check (the prediction answers and Level 14's Triton loop
    comment in both languages; the kernel solutions are English only)."""
    assert BILINGUAL_SOLUTIONS


@pytest.mark.parametrize("exercise", BILINGUAL_SOLUTIONS, ids=[e.id for e in BILINGUAL_SOLUTIONS])
def test_each_comment_of_a_bilingual_solution_has_its_twin(exercise):
    c = Comments(exercise.solution.splitlines())
    problems = c.problems() + _split_twins(c)
    assert not problems, f"{exercise.id}'s solution:\n" + "\n".join(problems)


@ids
def test_each_language_keeps_the_code_and_only_its_comments(exercise):
    starter = exercise.starter
    en, zh = in_language(starter, "en"), in_language(starter, "zh")
    assert _code(en) == _code(starter) == _code(zh), exercise.id
    assert not CJK.search(en), f"{exercise.id}: a Chinese comment in the English version"
    chinese = Comments(zh.splitlines())
    assert not chinese.untranslated(), (
        f"{exercise.id}: English comments left in the Chinese version: "
        + "; ".join(chinese.lines[i].strip() for i in chinese.untranslated()))
    # Some Chinese was written for this starter (a starter with no words to translate has none)
    if Comments(en.splitlines()).untranslated():
        assert CJK.search(zh), exercise.id


def test_a_trailing_comment_takes_its_chinese_in_place():
    src = ("__shared__ float As[T];  // the piece of A for this step\n"
           "                         // 本步用到的 A 分块\n"
           "// Two English lines\n// of one paragraph.\n// 同一段的中文。\n"
           "//\n//   ┌──┐ a drawing, shared\n//   └──┘\n")
    assert in_language(src, "en") == ("__shared__ float As[T];  // the piece of A for this step\n"
                                      "// Two English lines\n// of one paragraph.\n"
                                      "//\n//   ┌──┐ a drawing, shared\n//   └──┘\n")
    assert in_language(src, "zh") == ("__shared__ float As[T];  // 本步用到的 A 分块\n// 同一段的中文。\n"
                                      "//\n//   ┌──┐ a drawing, shared\n//   └──┘\n")
    assert in_language(src, "both") == src
    lonely = Comments("x = 1;\n// 只有中文\n".splitlines())
    assert lonely.problems() and "no English" in lonely.problems()[0]
    untranslated = Comments("// English words, alone\nx = 1;  // also alone\n".splitlines())
    assert len(untranslated.problems()) == 2


def _highlighted(code: str, lexer: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name

    html = highlight(code, get_lexer_by_name(lexer), HtmlFormatter())
    return re.search(r"<pre[^>]*>(.*)</pre>", html, re.S).group(1)


@ids
def test_the_book_shows_one_language_of_the_starter_cell(exercise):
    """The notebook's starter cell as the book highlights it (ipython3), marked as the book's extension marks
    it: each language shows (and copies) exactly that language's version of the starter."""
    from gemm_course.exercises.cells import answer_variable

    cell = f'{answer_variable(exercise)} = r"""{exercise.starter}"""'
    marked = mark_html(_highlighted(cell, "ipython3"))
    assert marked is not None, exercise.id
    for lang in ("en", "zh"):
        shown = text_shown(marked, lang)
        assert shown == f'{answer_variable(exercise)} = r"""{in_language(exercise.starter, lang)}"""\n', (
            exercise.id, lang)
    assert text_shown(marked, "both") == cell + "\n"  # without JavaScript no language is chosen: as written


def test_the_book_marks_a_cuda_listing_and_a_plain_block():
    source = next(e for e in ALL if e.id == "02_tiled_kernel").starter
    for inner in (_highlighted(source, "cuda"), f"<code class='language-cuda'>{__import__('html').escape(source)}</code>"):
        marked = mark_html(inner)
        for lang in ("en", "zh"):
            assert text_shown(marked, lang).rstrip("\n") == in_language(source, lang).rstrip("\n"), lang
    assert mark_html(_highlighted("x = 1  # no Chinese here\n", "python")) is None


def test_the_page_hides_and_the_copy_button_skips_the_other_language():
    css = (REPO / "book" / "_static" / "bilingual.css").read_text(encoding="utf-8")
    js = (REPO / "book" / "_static" / "bilingual.js").read_text(encoding="utf-8")
    ext = (REPO / "book" / "_ext" / "bilingual.py").read_text(encoding="utf-8")
    assert re.search(r"html:not\(\[data-lang\]\) pre \.gemm-moved,\s*html\[data-lang\] pre \.gemm-under", css)
    assert "gemm-off" in js and "function codeLang" in js and "codeLang(lang)" in js
    assert "copybutton_exclude" in ext and "mark_page" in ext


def test_the_grader_reads_either_language():
    """The starter fails at its step with English, Chinese or both comments; the solution passes with the
    starter's Chinese comments above it."""
    e = ex.get_exercise("00_grid_stride_saxpy")
    expected = e.data["starter_fails"]
    for lang in ("en", "zh"):
        verdict = ex.grade(e.id, in_language(e.starter, lang), seed=1)
        assert verdict.status == "failed" and verdict.failed_step == expected, (lang, str(verdict))
    header = "\n".join(line for line in in_language(e.starter, "zh").splitlines() if line.startswith("//"))
    assert CJK.search(header)
    assert ex.grade(e.id, header + "\n" + e.solution, seed=1).status == "solved"


# --- the kernel listings ---------------------------------------------------------------------------------------

def _listings() -> list[Path]:
    """The kernel files the lessons show whole: each level's (gc.show_source) and Level 13's (gc.notebook.listing)."""
    from gemm_course.fp8 import gemm as fp8_gemm
    from gemm_course.levels import levels

    return [lv.path for lv in levels()] + [fp8_gemm._kernel_path()]


LISTINGS = _listings()
listings = pytest.mark.parametrize("path", LISTINGS, ids=[p.name for p in LISTINGS])


def test_the_listings_are_the_ones_the_notebooks_show():
    import json

    shown = set()
    for nb_path in sorted((REPO / "notebooks").glob("*.ipynb")):
        for c in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
            code = "".join(c["source"]) if c["cell_type"] == "code" else ""
            shown.update(f"{m}.cu" for m in re.findall(r'gc\.show_source\("([^"]+)"\)', code))
            shown.update(re.findall(r'listing\([^\n]*"(\w+\.cuh?)"', code))
    assert shown == {p.name for p in LISTINGS}, sorted(shown ^ {p.name for p in LISTINGS})


@listings
def test_each_kernel_comment_has_its_twin(path):
    c = Comments(path.read_text(encoding="utf-8").splitlines())
    problems = c.problems() + _split_twins(c)
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


@listings
def test_each_language_of_a_listing_keeps_the_code(path):
    source = path.read_text(encoding="utf-8")
    en, zh = in_language(source, "en"), in_language(source, "zh")
    assert _code(en) == _code(source) == _code(zh), path.name
    assert not CJK.search(en), f"{path.name}: a Chinese comment in the English version"
    assert CJK.search(zh), path.name
    chinese = Comments(zh.splitlines())
    assert not chinese.untranslated(), (
        f"{path.name}: English comments left in the Chinese version: "
        + "; ".join(chinese.lines[i].strip() for i in chinese.untranslated()))
    # the English version is the file as it was written before its Chinese twins: every line of it, in order
    assert [line for line in source.splitlines() if not CJK.search(line)] == en.splitlines()


def test_show_source_follows_the_language():
    import html

    import gemm_course as gc
    from gemm_course.bilingual.language import current_language

    before = current_language()
    source = LISTINGS[4].read_text(encoding="utf-8")
    try:
        for lang in ("en", "zh"):
            gc.language(lang)
            shown = gc.show_source(LISTINGS[4].stem)._repr_html_()
            body = shown.split("</summary>", 1)[1]
            text = html.unescape(re.sub(r"<[^>]+>", "", body))
            assert text.strip("\n") == in_language(source, lang).strip("\n"), lang
            label = re.search(r"<summary>(.*?)</summary>", shown, re.S).group(1)
            assert f"{len(in_language(source, lang).splitlines())}" in label, (lang, label)
    finally:
        gc.language(before)


@listings
def test_the_book_shows_one_language_of_a_listing(path):
    """The listing as show_source highlights it (cuda), marked as the book's extension marks a page: each language
    shows, and its copy button copies, exactly that language's version."""
    from gemm_course.bilingual.text import code_block

    source = path.read_text(encoding="utf-8")
    inner = re.search(r"<pre[^>]*>(.*)</pre>", code_block(source), re.S).group(1)
    marked = mark_html(inner)
    assert marked is not None, path.name
    for lang in ("en", "zh"):
        assert text_shown(marked, lang).rstrip("\n") == in_language(source, lang).rstrip("\n"), (path.name, lang)
    assert text_shown(marked, "both").rstrip("\n") == source.rstrip("\n")
