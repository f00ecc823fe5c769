"""File checks of the bilingual (English / 简体中文) page convention. No build needed.

Pages: every ``notebooks/*.ipynb`` (and ``book/*.ipynb``) and every ``book/*.md`` that is a MyST text notebook
(front matter with ``jupytext:`` or ``kernelspec:``). The convention:

* the first cell is an untagged markdown cell with one H1 ``# English title · 中文标题``
  and otherwise only language-neutral content (badges, images, HTML comments);
* all other prose is in markdown cells tagged ``lang-en`` / ``lang-zh``, in twins: each
  ``lang-en`` cell is immediately followed by its ``lang-zh`` twin, which has the same
  heading levels, contains Chinese, and repeats every number of the English cell;
* code cells carry no language tag; notebooks are committed without outputs.

MyST text notebooks are split into cells here the way myst-nb reads them (``+++`` breaks
with optional JSON metadata, top-level ``{code-cell}``/``{raw-cell}`` fences; metadata of
a break is dropped at the next code cell), so jupytext is not needed.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SEP = " · "  # space, U+00B7 MIDDLE DOT, space
LANG_TAGS = ("lang-en", "lang-zh")
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
BLOCK_BREAK = re.compile(r"^ {0,3}\+\+\+(.*)$")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")


@dataclass
class Cell:
    kind: str  # "markdown" | "code" | "raw"
    source: str
    tags: list[str] = field(default_factory=list)
    line: int | None = None  # 1-based start line in a .md file

    @property
    def lang(self) -> str | None:
        found = [t for t in LANG_TAGS if t in self.tags]
        return found[0] if len(found) == 1 else None


# --- reading pages ------------------------------------------------------------------


def _is_myst_notebook(path: Path) -> bool:
    front = _front_matter(path.read_text(encoding="utf-8").splitlines())
    return front is not None and bool({"jupytext", "kernelspec"} & set(front[0]))


def _front_matter(lines: list[str]) -> tuple[dict, int] | None:
    """(parsed front matter, index of the first line after it), or None."""
    if not lines or lines[0].strip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            data = yaml.safe_load("\n".join(lines[1:i])) or {}
            return (data if isinstance(data, dict) else {}), i + 1
    return None


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return s.startswith(fence) and set(s) == {fence[0]}


def read_myst(path: Path) -> list[Cell]:
    lines = path.read_text(encoding="utf-8").splitlines()
    front = _front_matter(lines)
    start = front[1] if front else 0
    cells: list[Cell] = []
    md: list[str] = []
    md_start, md_tags = start, []

    def flush() -> None:
        text = "\n".join(md).strip("\n")
        if text.strip():
            cells.append(Cell("markdown", text, md_tags, md_start + 1))
        md.clear()

    i = start
    while i < len(lines):
        line = lines[i]
        fence = FENCE_OPEN.match(line)
        brk = BLOCK_BREAK.match(line)
        if fence:
            # skip to the closing fence (a fence inside markdown keeps its lines)
            j = i + 1
            while j < len(lines) and not _closes(lines[j], fence.group(1)):
                j += 1
            info = fence.group(2).strip()
            if info.startswith(("{code-cell}", "{raw-cell}")):
                flush()
                kind = "code" if info.startswith("{code-cell}") else "raw"
                cells.append(Cell(kind, "\n".join(lines[i + 1 : j]), [], i + 1))
                md_start, md_tags = j + 1, []
            else:
                md.extend(lines[i : j + 1])
            i = j + 1
            continue
        if brk:
            flush()
            meta_text = brk.group(1).strip()
            try:
                meta = json.loads(meta_text) if meta_text else {}
            except json.JSONDecodeError as err:
                pytest.fail(f"{_rel(path)}:{i + 1}: cell break metadata is not JSON: {err}")
            md_start, md_tags = i + 1, list(meta.get("tags", []))
        else:
            md.append(line)
        i += 1
    flush()
    return cells


def read_ipynb(path: Path) -> list[Cell]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [
        Cell(
            c["cell_type"],
            "".join(c["source"]) if isinstance(c["source"], list) else c["source"],
            list(c.get("metadata", {}).get("tags", [])),
        )
        for c in nb["cells"]
    ]


def read_cells(path: Path) -> list[Cell]:
    return read_ipynb(path) if path.suffix == ".ipynb" else read_myst(path)


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def pages() -> list[Path]:
    nbs = sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "book").glob("*.ipynb"))
    mds = [p for p in sorted((REPO / "book").glob("*.md")) if _is_myst_notebook(p)]
    return nbs + mds


PAGES = pages()
NOTEBOOKS = [p for p in PAGES if p.suffix == ".ipynb"]
page_params = pytest.mark.parametrize("path", PAGES, ids=[_rel(p) for p in PAGES])


# --- text helpers -------------------------------------------------------------------


def _outside_fences(text: str, directives: bool = True) -> list[str]:
    """Lines of markdown outside fenced code blocks; directive fences (``{note}``...)
    and their content are kept when ``directives`` is true."""
    out: list[str] = []
    stack: list[tuple[str, bool]] = []  # open fences: (fence, dropped)
    for line in text.splitlines():
        if stack and _closes(line, stack[-1][0]):
            _, dropped = stack.pop()
            if not dropped:
                out.append(line)
            continue
        if any(dropped for _, dropped in stack):
            continue  # e.g. inside a code block: its '#' lines are not headings
        m = FENCE_OPEN.match(line)
        if m:
            is_directive = m.group(2).strip().startswith("{")
            dropped = not (is_directive and directives)
            stack.append((m.group(1), dropped))
            if dropped:
                continue
        out.append(line)
    return out


def headings(text: str, directives: bool = True) -> list[tuple[int, str]]:
    found = []
    for line in _outside_fences(HTML_COMMENT.sub("", text), directives):
        m = HEADING.match(line)
        if m:
            found.append((len(m.group(1)), (m.group(2) or "").strip()))
    return found


def _is_h1(line: str) -> bool:
    m = HEADING.match(line)
    return bool(m) and m.group(1) == "#"


def numbers(text: str) -> set[str]:
    return set(NUMBER.findall(unicodedata.normalize("NFKC", HTML_COMMENT.sub("", text))))


def prose(text: str) -> str:
    """What is left of a markdown cell once language-neutral parts are removed."""
    t = HTML_COMMENT.sub("", text)
    t = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", t)  # images (alt text is not prose)
    t = re.sub(r"\[\s*\]\([^)]*\)", "", t)  # links left empty, e.g. badges
    t = re.sub(r"<[^>]*>", "", t)  # HTML tags, e.g. <img>, <figure>, <div>
    t = re.sub(r"(?m)^\s*(`{3,}|~{3,}|:{3,})\s*(\{(figure|image)\}.*)?$", "", t)
    t = re.sub(r"(?m)^\s*:[\w-]+:.*$", "", t)  # directive options
    t = re.sub(r"(?m)^\s*\[[^\]]+\]:\s*\S+.*$", "", t)  # link reference definitions
    t = re.sub(rf"(?m)^.*\S{SEP}.*{CJK.pattern}.*$", "", t)  # "English · 中文" captions
    return t.strip() if re.search(r"[^\W\d_]", t) else ""


def _where(path: Path, idx: int, cell: Cell) -> str:
    line = f" (line {cell.line})" if cell.line else ""
    return f"{_rel(path)} cell {idx}{line}"


def _fail(problems: list[str]) -> None:
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


# --- tests --------------------------------------------------------------------------


@page_params
def test_title_cell(path: Path) -> None:
    cells = read_cells(path)
    problems: list[str] = []
    if not cells or cells[0].kind != "markdown":
        _fail([f"{_rel(path)}: the first cell must be a markdown cell "
               f"'# English title{SEP}中文标题'"])
    first = cells[0]
    where = _where(path, 0, first)
    if first.tags and set(first.tags) & set(LANG_TAGS):
        problems.append(f"{where}: the title cell must not be tagged lang-en/lang-zh")
    h1 = [h for h in headings(first.source) if h[0] == 1]
    if len(h1) != 1:
        problems.append(f"{where}: needs exactly one H1 '# English title{SEP}中文标题', "
                        f"found {len(h1)}")
    else:
        title = h1[0][1]
        en, sep, zh = title.partition(SEP)
        if not sep or not en.strip() or not zh.strip():
            problems.append(f"{where}: H1 {title!r} must read 'English title{SEP}中文标题' "
                            "(space, U+00B7 middle dot, space; both halves non-empty)")
        elif not CJK.search(zh):
            problems.append(f"{where}: second half of the H1 {title!r} has no Chinese")
    rest = "\n".join(ln for ln in _outside_fences(first.source) if not _is_h1(ln))
    if prose(rest):
        problems.append(f"{where}: the title cell may only add language-neutral content "
                        f"(badges, images); move {prose(rest)[:60]!r} into lang-en/lang-zh "
                        "twin cells")
    for i, cell in enumerate(cells[1:], start=1):
        if cell.kind == "markdown" and any(lvl == 1 for lvl, _ in headings(cell.source)):
            problems.append(f"{_where(path, i, cell)}: only the title cell may have an H1 "
                            "('# ...'); use '##' or deeper")
    _fail(problems)


@page_params
def test_twins_pair_up(path: Path) -> None:
    cells = read_cells(path)
    problems: list[str] = []

    def is_(i: int, tag: str) -> bool:
        return 0 <= i < len(cells) and cells[i].kind == "markdown" and cells[i].lang == tag

    for i, cell in enumerate(cells):
        where = _where(path, i, cell)
        tagged = [t for t in LANG_TAGS if t in cell.tags]
        if cell.kind != "markdown":
            if tagged:
                problems.append(f"{where}: {cell.kind} cells are shown in both languages; "
                                f"remove the tag {tagged[0]}")
            continue
        if len(tagged) == 2:
            problems.append(f"{where}: tagged both lang-en and lang-zh; keep one")
        elif cell.lang == "lang-en" and not is_(i + 1, "lang-zh"):
            problems.append(f"{where}: lang-en cell must be immediately followed by its "
                            "lang-zh twin (a markdown cell tagged lang-zh)")
        elif cell.lang == "lang-zh" and not is_(i - 1, "lang-en"):
            problems.append(f"{where}: lang-zh cell must immediately follow its lang-en "
                            "twin; put the English cell right before it")
        elif cell.lang == "lang-zh" and not CJK.search(cell.source):
            problems.append(f"{where}: lang-zh cell contains no Chinese characters")
    _fail(problems)


def _twins(cells: list[Cell]) -> list[tuple[int, Cell, Cell]]:
    return [
        (i, c, cells[i + 1])
        for i, c in enumerate(cells[:-1])
        if c.kind == "markdown" and c.lang == "lang-en"
        and cells[i + 1].kind == "markdown" and cells[i + 1].lang == "lang-zh"
    ]


@page_params
def test_twins_same_headings(path: Path) -> None:
    problems = []
    for i, en, zh in _twins(read_cells(path)):
        en_levels = [lvl for lvl, _ in headings(en.source)]
        zh_levels = [lvl for lvl, _ in headings(zh.source)]
        if en_levels != zh_levels:
            problems.append(
                f"{_where(path, i, en)} and cell {i + 1}: twins need the same heading "
                f"levels; English has {['#' * n for n in en_levels]}, "
                f"Chinese has {['#' * n for n in zh_levels]}")
    _fail(problems)


@page_params
def test_heading_levels_consecutive(path: Path) -> None:
    """myst warns (and -W fails the build) when a heading skips a level, e.g. # -> ###."""
    problems, last = [], 0
    for i, cell in enumerate(read_cells(path)):
        if cell.kind != "markdown":
            continue
        for level, text in headings(cell.source, directives=False):
            if last and level > last + 1:
                problems.append(f"{_where(path, i, cell)}: heading {'#' * level} {text!r} "
                                f"follows a level-{last} heading; use {'#' * (last + 1)}")
            last = level
    _fail(problems)


@page_params
def test_twins_same_numbers(path: Path) -> None:
    problems = []
    for i, en, zh in _twins(read_cells(path)):
        missing = sorted(numbers(en.source) - numbers(zh.source), key=lambda s: float(s))
        if missing:
            problems.append(f"{_where(path, i + 1, zh)}: the Chinese twin lacks the "
                            f"number(s) {', '.join(missing)} of the English cell {i}; "
                            "write them as digits in both")
    _fail(problems)


@page_params
def test_no_untagged_prose(path: Path) -> None:
    problems = []
    for i, cell in enumerate(read_cells(path)):
        if i == 0 or cell.kind != "markdown" or set(cell.tags) & set(LANG_TAGS):
            continue
        text = prose(cell.source)
        if text:
            problems.append(f"{_where(path, i, cell)}: untagged markdown holds prose "
                            f"{text[:60]!r}; tag it lang-en and add a lang-zh twin (only "
                            "images, figures and HTML comments may stay untagged)")
    _fail(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[_rel(p) for p in NOTEBOOKS])
def test_notebook_committed_without_outputs(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    problems = [
        f"{_rel(path)} cell {i}: committed with "
        + " and ".join(w for w, bad in (("outputs", c.get("outputs")),
                                        ("an execution count", c.get("execution_count")))
                       if bad)
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))
    ]
    if problems:
        problems.append("fix: jupyter nbconvert --clear-output --inplace " + _rel(path))
    _fail(problems)


def test_toc_pages_exist() -> None:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf-8"))
    missing = [
        name for name in _toc_files(toc)
        if not any((REPO / f"{name}{ext}").is_file() for ext in ("", ".md", ".ipynb"))
    ]
    _fail([f"_toc.yml lists {name!r} but neither {name}.md nor {name}.ipynb exists; "
           "create the page or remove its line" for name in missing])


def _toc_files(node: object) -> list[str]:
    """Every `root`/`file` entry of a jb-book _toc.yml, in order."""
    if isinstance(node, list):
        return [f for item in node for f in _toc_files(item)]
    if not isinstance(node, dict):
        return []
    own = [str(node[k]) for k in ("root", "file") if k in node]
    return own + [f for k, v in node.items() if k not in ("root", "file")
                  for f in _toc_files(v)]


def test_tagged_md_pages_are_notebooks() -> None:
    """Cell tags only exist in MyST *notebooks*; in plain MyST they are silently ignored."""
    _fail([
        f"{_rel(p)}: has lang-en/lang-zh cell breaks but no jupytext/kernelspec front "
        "matter, so the tags are ignored; add the MyST-NB front matter"
        for p in sorted((REPO / "book").glob("*.md"))
        if not _is_myst_notebook(p)
        and re.search(r"(?m)^\+\+\+\s*\{.*lang-(en|zh)", p.read_text(encoding="utf-8"))
    ])
