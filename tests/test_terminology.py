"""One Chinese term for one idea: the table "Chinese terminology · 中文术语" of README.md.

Each row names an idea, the spelling the course uses and the spellings it avoids. An avoided spelling may
not appear in the Chinese prose of any page (notebooks' lang-zh markdown cells, exercises included, and the
lang-zh blocks of book/*.md; the generated glossary page lists other spellings on purpose and is checked
through its source instead), in the Chinese comments of an exercise's starter or of a kernel file a lesson
shows whole (Levels 1-11 and 13), in a Chinese glossary definition, or in a Chinese string of the package (the
glossary's lists of other spellings excepted). An avoided spelling in Latin letters (notebook) counts only
next to a Chinese character: `notebooks/` in a path or an English sentence is not Chinese prose.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gemm_course.display import glossary

REPO = Path(__file__).resolve().parents[1]
CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"


def _table() -> list[tuple[str, str, list[str]]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Chinese terminology · 中文术语", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("idea", "---"):
            continue
        avoid = [a.strip() for a in cells[2].split(",") if a.strip() not in ("—", "")]
        rows.append((cells[0], cells[1], [a for a in avoid if " " not in a]))  # "级 alone (...)": not a spelling
    return rows


def _pattern(word: str) -> re.Pattern:
    if re.search(f"[{CJK}]", word):
        return re.compile(re.escape(word))
    return re.compile(rf"(?<=[{CJK}（“，、])\s*{re.escape(word)}|{re.escape(word)}\s*(?=[{CJK}）”，。、；：])")


def _visible(markdown: str) -> str:
    """What a reader reads: code blocks and inline code dropped, a role's words kept, link targets dropped."""
    text = re.sub(r"(?ms)^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[ \t]*$", "", markdown)
    text = re.sub(r"\{[\w:-]+\}`([^`<]*)(?:<[^>`]*>)?`", r"\1", text)
    text = re.sub(r"`[^`\n]*`", " ", text)
    return re.sub(r"\]\([^)]*\)|https?://\S+", "]", text)


def _zh_prose() -> list[tuple[str, str]]:
    out = []
    for nb_path in sorted((REPO / "notebooks").glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb_path.read_text(encoding="utf-8"))["cells"]):
            if c["cell_type"] == "markdown" and "lang-zh" in c["metadata"].get("tags", []):
                out.append((f"{nb_path.name} cell {i}", _visible("".join(c["source"]))))
    from gemm_course.bilingual.comments import chinese_comments
    from gemm_course.exercises import exercises

    for e in exercises():  # the starter's Chinese comments: what a Chinese reader reads in the code
        out.append((f"{e.id} starter comments", "\n".join(chinese_comments(e.starter))))
    from gemm_course.fp8 import gemm as fp8_gemm
    from gemm_course.levels import levels

    for path in [lv.path for lv in levels()] + [fp8_gemm._kernel_path()]:  # the kernel listings' Chinese comments
        out.append((f"{path.name} comments", "\n".join(chinese_comments(path.read_text(encoding="utf-8")))))
    for page in sorted((REPO / "book").glob("*.md")):
        if page == glossary.PAGE:
            continue
        text = page.read_text(encoding="utf-8")
        for a, b, tags in glossary._md_blocks(text):
            if "lang-zh" in tags:
                out.append((f"{page.name} line {text[:a].count(chr(10)) + 1}", _visible(text[a:b])))
    return out


def test_the_table_is_there() -> None:
    rows = _table()
    assert len(rows) >= 15
    uses = [use for _, use, _ in rows]
    assert "计算受限" in uses and "屏障" in uses and "笔记本" in uses


@pytest.mark.parametrize("idea, use, avoid", [r for r in _table() if r[2]], ids=lambda x: str(x)[:20])
def test_avoided_spellings(idea: str, use: str, avoid: list[str]) -> None:
    bad = []
    for word in avoid:
        pat = _pattern(word)
        for where, text in _zh_prose():
            for m in pat.finditer(text):
                bad.append(f"{where}: {word!r} in ...{text[max(0, m.start() - 20):m.end() + 20]}...")
        for t in glossary.TERMS:
            if pat.search(t.zh_def):
                bad.append(f"glossary {t.slug}: {word!r} in its Chinese definition")
        for py in sorted((REPO / "gemm_course").rglob("*.py")):
            if py.name == "glossary.py":  # its zh_aliases list the other spellings on purpose
                continue
            for n, line in enumerate(py.read_text(encoding="utf-8").splitlines(), 1):
                if pat.search(line):
                    bad.append(f"{py.relative_to(REPO)}:{n}: {word!r}")
    assert not bad, f"{idea}: write {use}\n" + "\n".join(bad)


def test_a_pipeline_stage_is_never_bare_ji() -> None:
    """The README's row for a pipeline stage avoids 级 alone (it collides with the course's levels, 第 N 级): a ring of
    N stages is "N 个流水级", their count "流水级数", never "N 级流水线" or a bare "级数"."""
    bare = re.compile(r"\d+ 级流水线|(?<!流水)(?<!第 \d)(?<!第 \d\d)级数(?!出)")
    found = [(where, m.group(0)) for where, text in _zh_prose() for m in bare.finditer(text)]
    assert not found, found[:5]
