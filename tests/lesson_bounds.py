"""How much a level page puts in front of a reader before its exercises, measured on the built book.

A level page has two layers: the lesson (the idea, the kernel's new lines, one run, why it is faster, then the
exercises) and, after the exercises, the deeper layer (compile reports, counters, SASS, clocks, sweeps). Folded
content (a closed dropdown, a hidden input or output) costs the reader nothing until they open it, so it does
not count. What counts, in document order up to the Exercises heading, in the Chinese view:

- prose: Chinese characters of visible text outside code cells and code blocks, a Latin word or a number
  counted as one character (the way a reader takes it in);
- open code cells: cells whose input is shown;
- open outputs: a shown cell's output area;
- charts: figures and images, in the prose or in an output.

Run as a script on a built book to see every page: python tests/lesson_bounds.py [_build/html]
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bs4 import BeautifulSoup, Tag

LESSON_BOUNDS = {"prose": 4000, "code_cells": 6, "outputs": 4, "charts": 3}
# Level 0 is a page of small runnable examples: more cells and outputs, the same prose and charts.
LESSON_BOUNDS_BY_PAGE = {"00_cuda_basics": {"prose": 4000, "code_cells": 12, "outputs": 10, "charts": 3}}

_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[A-Za-z0-9_]+(?:[.'][A-Za-z0-9_]+)*")
_EXERCISES_TITLES = ("Exercises", "练习")
CHART = "figure, img, svg, div.gemm-figure, div.plotly-graph-div"  # a figure's own <img>/<svg> counts once


@dataclass
class Lesson:
    prose: int = 0
    code_cells: int = 0
    outputs: int = 0
    charts: int = 0
    found_exercises: bool = False

    def over(self, bounds: dict[str, int]) -> list[str]:
        return [f"{name} {getattr(self, name)} > {limit}" for name, limit in bounds.items()
                if getattr(self, name) > limit]


def _classes(el: Tag) -> set[str]:
    return set(el.get("class") or [])


def _folded(el: Tag) -> bool:
    """Inside a <details> that is closed when the page loads (dropdowns, hidden inputs and outputs)."""
    return any(node.name == "details" and not node.has_attr("open") for node in [el, *el.parents])


def _english_only(el: Tag) -> bool:
    """Hidden in the Chinese view: the element or a parent carries the English-only classes."""
    return any({"lang-en", "lang-section-en"} & _classes(node) for node in [el, *el.parents] if isinstance(node, Tag))


def _outermost(chart: Tag) -> bool:
    """A chart not inside another (a figure's own <img> or <svg>, a diagram's inner drawings)."""
    return not any(parent.name in ("figure", "img", "svg") or {"gemm-figure", "plotly-graph-div"} & _classes(parent)
                   for parent in chart.parents)


def _is_exercises_heading(el: Tag) -> bool:
    if el.name != "h2":
        return False
    title = el.get_text(" ", strip=True).rstrip("#").strip()
    return title in _EXERCISES_TITLES


def measure(html: str) -> Lesson:
    """The lesson layer of one built level page (see the module)."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article section") or soup  # the page's own content, not the header's buttons
    lesson = Lesson()
    stop = next((h for h in article.find_all("h2") if _is_exercises_heading(h)), None)
    lesson.found_exercises = stop is not None
    before = set()
    for el in article.find_all(True):
        if el is stop:
            break
        before.add(id(el))

    def counted(el: Tag) -> bool:
        return id(el) in before and not _folded(el) and not _english_only(el)

    for cell in article.select("div.cell"):
        if not counted(cell):
            continue
        cell_input = cell.select_one("div.cell_input")
        if cell_input is not None and not _folded(cell_input):
            lesson.code_cells += 1
        for output in cell.select("div.cell_output"):
            shown = [s for s in output.find_all(string=True) if s.strip() and not _folded(s.parent)
                     and not s.find_parent(["script", "style"]) and not _english_only(s.parent)]
            charts = [c for c in output.select(CHART) if not _folded(c) and not _english_only(c) and _outermost(c)]
            lesson.outputs += bool(shown or charts)
            lesson.charts += len(charts)
    for el in article.find_all(["p", "li", "dt", "dd", "th", "td", "h2", "h3", "h4", "figcaption", "caption"]):
        if not counted(el) or el.find_parent("div", class_="cell") or el.find_parent(["li", "td", "th", "dd"]):
            continue  # nested text is counted once, with its outermost block
        if not ({"lang-zh", "lang-section-zh"} & set().union(*(_classes(n) for n in [el, *el.parents]))):
            continue  # text that is not Chinese prose (an untagged title, code)
        text = " ".join(s for s in el.find_all(string=True)
                        if not s.find_parent(["pre", "script", "style"]) and not _folded(s.parent))
        lesson.prose += len(_WORD.findall(text.replace("#", "")))
    for figure in article.select(CHART):
        if counted(figure) and not figure.find_parent("div", class_="cell") and _outermost(figure):
            lesson.charts += 1
    return lesson


def level_pages(html_dir: Path) -> list[Path]:
    return sorted((html_dir / "notebooks").glob("[0-9][0-9]_*.html"))


def main(argv: list[str]) -> int:
    html_dir = Path(argv[1] if len(argv) > 1 else "_build/html")
    failed = 0
    for page in level_pages(html_dir):
        lesson = measure(page.read_text(encoding="utf-8"))
        bounds = LESSON_BOUNDS_BY_PAGE.get(page.stem, LESSON_BOUNDS)
        over = lesson.over(bounds) + ([] if lesson.found_exercises else ["no Exercises heading"])
        failed += bool(over)
        print(f"{page.stem:24} prose {lesson.prose:5}  cells {lesson.code_cells:2}  outputs {lesson.outputs:2}  "
              f"charts {lesson.charts:2}  {'OVER: ' + '; '.join(over) if over else 'ok'}")
    return 1 if failed else 0



# --- an estimate from the notebook itself (no build): for authors while they edit ------------------------
_FOLDING_DIRECTIVES = ("dropdown",)  # a <details> in the page; {toggle} and `:class: dropdown` fold by script only
_FENCE = re.compile(r"^(`{3,}|:{3,})\s*(\{([\w:-]+)\})?\s*(.*)$")
_ROLE = re.compile(r"\{(?:ref|term|doc|numref)\}`([^`<]*?)\s*(?:<[^`]*>)?`")


def _visible_markdown(text: str) -> str:
    """The prose of a markdown cell a reader sees with every fold closed: code blocks, dropdowns, HTML comments
    and link targets left out. An admonition with `:class: dropdown` stays in: it folds only through JavaScript,
    and measure() counts it as open too."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    lines, out, stack = text.splitlines(), [], []  # stack: (fence, hidden) of the open fences
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line.strip())
        if m and stack and m.group(1) == stack[-1][0] and not m.group(2) and not m.group(4):
            stack.pop()
            i += 1
            continue
        if m and (m.group(2) or not stack or m.group(1) != stack[-1][0]):
            name = m.group(3)
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith(":") and not _FENCE.match(lines[j].strip()):
                j += 1  # the directive's options are not prose
            hidden = name is None or name in ("code-block", "code", "code-cell") or name in _FOLDING_DIRECTIVES
            stack.append((m.group(1), hidden))
            if not hidden and m.group(4):
                out.append(m.group(4))  # an open directive's title
            i = j
            continue
        if not any(hidden for _, hidden in stack):
            out.append(line)
        i += 1
    prose = "\n".join(out)
    prose = _ROLE.sub(r"\1", prose)
    prose = re.sub(r"\]\([^)]*\)", "]", prose)
    prose = re.sub(r"`[^`]*`", lambda m: "x", prose)  # inline code: one word
    return prose


def measure_notebook(path: Path) -> Lesson:
    """An estimate of measure() from the .ipynb (prose within about 5% of the built page's): the Chinese markdown
    cells as they read with folds closed; code cells open unless tagged hide-input/remove-input; an output for every executed cell that is
    not tagged remove-output/hide-output (some print nothing: the build decides); charts not estimated."""
    import json

    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    lesson = Lesson()
    for cell in cells:
        source = "".join(cell["source"])
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown" and re.match(r"#{1,2}\s*(Exercises|练习)\s*$", source.strip().splitlines()[0]):
            lesson.found_exercises = True
            break
        if cell["cell_type"] == "markdown" and "lang-zh" in tags:
            lesson.prose += len(_WORD.findall(_visible_markdown(source).replace("#", "")))
        elif cell["cell_type"] == "code":
            if not tags & {"hide-input", "remove-input", "remove-cell"}:
                lesson.code_cells += 1
            if not tags & {"hide-output", "remove-output", "remove-cell", "skip-execution"}:
                lesson.outputs += 1
    return lesson


if __name__ == "__main__":
    sys.exit(main(sys.argv))
