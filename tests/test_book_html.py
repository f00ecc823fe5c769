"""Checks of the built book in _build/html (run `jupyter-book build .` first; GEMM_COURSE_BUILD=DIR
checks a book built with `--path-output DIR` instead).

Skipped when the book is not built, except under CI=true where that is a failure.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
HTML = (Path(os.environ["GEMM_COURSE_BUILD"]).resolve() / "_build" / "html" if os.environ.get("GEMM_COURSE_BUILD")
        else REPO / "_build" / "html")
MAX_PAGE_BYTES = 3_000_000  # a page's own HTML; the shared _static files (plotly.js among them) load once
PLOTLY_LIBRARY = re.compile(r"\* plotly\.js v\d|/\*\*\s*\* plotly\.js")
# A page must not *load* plotly from the network: no <script src> / <link href> to it.
# (A figure script may keep a CDN fallback for Jupyter/Colab as a string; in the book
# it is dead code because _static/plotly.min.js is loaded before it runs.)
PLOTLY_CDN = re.compile(
    r"""<(?:script|link)\b[^>]*\s(?:src|href)\s*=\s*["'](?:https?:)?//[^"']*plot\.?ly""", re.I)
FIGURE = re.compile(r"Plotly\.(?:newPlot|react|plot)\b")


def _toc_docs() -> list[str]:
    """Every `root`/`file` of _toc.yml, in order, without file extension."""

    def walk(node: object) -> list[str]:
        if isinstance(node, list):
            return [d for item in node for d in walk(item)]
        if not isinstance(node, dict):
            return []
        own = [str(node[k]) for k in ("root", "file") if k in node]
        return own + [d for k, v in node.items() if k not in ("root", "file") for d in walk(v)]

    toc = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf-8"))
    return [re.sub(r"\.(md|ipynb)$", "", d) for d in walk(toc)]


DOCS = _toc_docs()


class Page(HTMLParser):
    """The bits of a page the tests look at: classes, scripts, where <body> starts."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.classes: set[str] = set()
        self.ids: set[str] = set()
        self.scripts: list[dict[str, str | None]] = []  # in document order
        self.h1_classes: set[str] = set()
        self.body_script_index: int | None = None
        self._in_h1 = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        cls = set((a.get("class") or "").split())
        self.classes |= cls
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "h1":
            self._in_h1 = True
        elif self._in_h1:
            self.h1_classes |= cls
        if tag == "body":
            self.body_script_index = len(self.scripts)
        if tag == "script":
            self.scripts.append(a)

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1":
            self._in_h1 = False


@pytest.fixture(scope="module")
def html_dir() -> Path:
    if not (HTML / "index.html").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("build the book first: jupyter-book build .", pytrace=False)
        pytest.skip("book not built; run: jupyter-book build .")
    return HTML


def _page(html_dir: Path, doc: str) -> tuple[str, Page]:
    path = html_dir / f"{doc}.html"
    if not path.is_file():
        pytest.fail(f"{doc} is in _toc.yml but {path.relative_to(REPO)} was not built",
                    pytrace=False)
    text = path.read_text(encoding="utf-8")
    return text, Page(text)


def _source(doc: str) -> Path | None:
    return next((p for ext in (".ipynb", ".md") if (p := REPO / f"{doc}{ext}").is_file()),
                None)


def _is_bilingual(src: Path) -> bool:
    text = src.read_text(encoding="utf-8")
    return bool(re.search(r"[\"']lang-en[\"']", text) and re.search(r"[\"']lang-zh[\"']", text))


docs = pytest.mark.parametrize("doc", DOCS)


@docs
def test_page_built(html_dir: Path, doc: str) -> None:
    assert (html_dir / f"{doc}.html").is_file(), f"{doc}.html missing from _build/html"


@docs
def test_language_switch(html_dir: Path, doc: str) -> None:
    text, page = _page(html_dir, doc)
    assert "lang-switch" in page.ids, f"{doc}.html: no element with id='lang-switch'"
    srcs = [s.get("src") or "" for s in page.scripts]
    assert any("_static/bilingual.js" in s for s in srcs), f"{doc}.html lacks bilingual.js"
    assert "_static/bilingual.css" in text, f"{doc}.html lacks bilingual.css"
    head = text.split("<body", 1)[0]
    assert "dataset.lang" in head, f"{doc}.html: no early <head> script setting data-lang"


@docs
def test_language_classes(html_dir: Path, doc: str) -> None:
    src = _source(doc)
    if src is None or not _is_bilingual(src):
        pytest.skip(f"{doc}: source has no lang-en/lang-zh cells")
    _, page = _page(html_dir, doc)
    for cls in ("lang-en", "lang-zh"):
        assert cls in page.classes, f"{doc}.html: no element has class {cls!r}"
    assert {"lang-en", "lang-zh"} <= page.h1_classes, (
        f"{doc}.html: page H1 not split into lang-en / lang-zh halves "
        "(is it '# English · 中文' in an untagged first cell?)")


def test_plotly_bundled(html_dir: Path) -> None:
    js = html_dir / "_static" / "plotly.min.js"
    assert js.is_file() and js.stat().st_size > 1_000_000, "_static/plotly.min.js missing"
    with_figures = []
    for path in sorted(html_dir.rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        if not FIGURE.search(text):
            continue
        with_figures.append(path)
        page = Page(text)
        rel = path.relative_to(html_dir)
        tags = [s for s in page.scripts if "_static/plotly.min.js" in (s.get("src") or "")]
        assert tags, f"{rel} draws a Plotly figure but does not load _static/plotly.min.js"
        assert "defer" not in tags[0] and "async" not in tags[0], (
            f"{rel}: plotly.min.js must load blocking so figure scripts find window.Plotly")
        first = page.scripts.index(tags[0])
        assert page.body_script_index is not None and first < page.body_script_index, (
            f"{rel}: plotly.min.js must be loaded in <head>, before the figure scripts")
    if not with_figures:
        pytest.skip("no page draws a Plotly figure yet; plotly.min.js is bundled")


def test_pages_are_light_and_never_embed_plotly(html_dir: Path) -> None:
    """Plotly's library is one static file for the whole book (the browser caches it): no page carries a
    copy, and no page's own HTML weighs over 3 MB."""
    heavy, embedding = [], []
    for path in sorted(html_dir.rglob("*.html")):
        rel = path.relative_to(html_dir).as_posix()
        if path.stat().st_size > MAX_PAGE_BYTES:
            heavy.append(f"{rel} ({path.stat().st_size / 1e6:.1f} MB)")
        if PLOTLY_LIBRARY.search(path.read_text(encoding="utf-8")):
            embedding.append(rel)
    assert not heavy, f"pages over 3 MB: {heavy}"
    assert not embedding, f"pages embed plotly.js instead of loading _static/plotly.min.js: {embedding}"


def test_figures_have_no_subtitle_and_no_modebar_on_phones(html_dir: Path) -> None:
    """A chart's provenance line is a caption under the plot, not a subtitle squeezed above it; the
    plotly toolbar stays off narrow screens (where it would sit on the title)."""
    for path in sorted(html_dir.glob("notebooks/*.html")):
        text = path.read_text(encoding="utf-8")
        for fig in re.findall(r"var fig = (\{.*?\}), id = ", text, re.S):
            assert '"subtitle":{"text"' not in fig.replace(" ", ""), f"{path.name}: a figure keeps a subtitle"
        if "gemm-figure" in text:
            assert "displayModeBar: window.innerWidth < 700 ? false" in text, path.name


def test_no_plotly_cdn(html_dir: Path) -> None:
    offenders = [
        str(p.relative_to(html_dir))
        for p in sorted(html_dir.rglob("*.html"))
        if PLOTLY_CDN.search(p.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"pages load plotly from a CDN (must be offline): {offenders}"


def test_no_external_scripts(html_dir: Path) -> None:
    """The book works offline: plotly, MathJax and everything else load from _static."""
    external = re.compile(r'<script[^>]*\bsrc="https?://')
    offenders = [p.relative_to(html_dir).as_posix() for p in html_dir.rglob("*.html")
                 if external.search(p.read_text(encoding="utf-8"))]
    assert not offenders, f"pages load scripts from the network: {offenders}"


def test_mathjax_is_served_locally(html_dir: Path) -> None:
    assert (html_dir / "_static" / "mathjax" / "tex-chtml.js").is_file()


@docs
def test_launch_links_open_something(html_dir: Path, doc: str) -> None:
    """Colab opens notebooks only: a notebook page links Colab to its .ipynb, a MyST .md page has no Colab link."""
    text, _ = _page(html_dir, doc)
    colab = re.findall(r"https://colab\.research\.google\.com/github/[^\"'<> ]+", text)
    src = _source(doc)
    if src is not None and src.suffix == ".md":
        assert not colab, f"{doc}.html links Colab to a .md file: {colab[:1]}"
    elif src is not None:
        assert colab and all(link.endswith(".ipynb") for link in colab), f"{doc}.html: {colab[:1]}"


def test_switch_reaches_figures_and_theme_labels(html_dir: Path) -> None:
    """The language switch relabels plotly figures (titles, axes, legends) and the theme's own labels."""
    script = (html_dir / "_static" / "bilingual.js").read_text(encoding="utf-8")
    assert "gemmDrawFigure" in script and "Plotly.react" in script and '"Contents": "目录"' in script
    figure_page = next(p for p in sorted(html_dir.glob("notebooks/*.html")) if "Plotly.newPlot" in p.read_text())
    assert "window.gemmDrawFigure" in figure_page.read_text(encoding="utf-8")
    css = (html_dir / "_static" / "bilingual.css").read_text(encoding="utf-8")
    assert "pre-wrap" in css and "max-width: 480px" in css
    # kernel listings keep their lines (they scroll); only printed sentences wrap
    assert re.search(r"div\.highlight pre[^{]*\{\s*white-space: pre;", css)


def test_search_finds_chinese_and_english_words(html_dir: Path) -> None:
    """The search index holds Chinese words (segmented) as well as English stems."""
    import json

    text = (html_dir / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])  # Search.setIndex({...}), \\u-escaped
    terms = set(index["terms"])
    for word in ("共享内存", "线程束", "warp", "coalesc"):
        assert any(t.startswith(word) for t in terms), f"the search index has no term starting with {word!r}"


def test_no_page_shows_the_builders_exercise_progress(html_dir: Path) -> None:
    """Every progress table in the book is a fresh reader's: nothing solved, no attempts (the build reads an
    empty progress file of its own, whatever the builder has solved)."""
    seen = 0
    for path in sorted(html_dir.glob("notebooks/*.html")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"(\d+) of (\d+) exercises solved, (\d+) compiled", text):
            seen += 1
            assert m.group(1) == "0" and m.group(3) == "0", f"{path.name}: shows progress {m.group(0)!r}"
        for m in re.finditer(r"共 (\d+) 个练习：已完成 (\d+) 个", text):
            assert m.group(2) == "0", f"{path.name}: shows progress {m.group(0)!r}"
    assert seen, "no progress table found in the built notebooks"


LEVEL_DOCS = [d for d in DOCS if re.fullmatch(r"notebooks/\d\d_\w+", d)]


@pytest.mark.parametrize("doc", LEVEL_DOCS)
def test_the_lesson_before_the_exercises_stays_short(html_dir: Path, doc: str) -> None:
    """Two layers per level: before its Exercises heading a page shows the lesson only (tests/lesson_bounds.py
    says what counts); compile reports, counters, SASS, clocks and sweeps come after the exercises."""
    import lesson_bounds

    text, _ = _page(html_dir, doc)
    lesson = lesson_bounds.measure(text)
    assert lesson.found_exercises, f"{doc}: no Exercises heading"
    stem = doc.split("/")[-1]
    over = lesson.over(lesson_bounds.LESSON_BOUNDS_BY_PAGE.get(stem, lesson_bounds.LESSON_BOUNDS))
    assert not over, f"{doc}: the lesson before the exercises is too long: {', '.join(over)}"


def test_the_lesson_measure_sees_what_a_reader_sees() -> None:
    """The measure counts open prose, cells, outputs and charts in the Chinese view, and nothing folded or English."""
    import lesson_bounds

    page = """<article><section>
      <p class="lang-zh">共享内存 shared memory 很快。</p><p class="lang-en">English words are not counted here</p>
      <details><summary>x</summary><p class="lang-zh">折叠的内容不算</p></details>
      <div class="cell"><div class="cell_input">code</div><div class="cell_output"><div class="gemm-figure"></div></div></div>
      <div class="cell"><details class="hide above-input"><div class="cell_input">folded</div></details>
        <div class="cell_output"><details class="gemm-fold"><summary>s</summary>folded output</details></div></div>
      <section class="lang-section-zh"><h2 class="lang-zh">练习</h2><p class="lang-zh">之后的内容不算</p>
      <div class="cell"><div class="cell_input">code</div></div></section></section></article>"""
    lesson = lesson_bounds.measure(page)
    assert lesson.found_exercises
    # 共享内存 (4) + "shared" + "memory" (1 each) + 很快 (2); the heading 练习 is where counting stops
    assert (lesson.prose, lesson.code_cells, lesson.outputs, lesson.charts) == (8, 1, 1, 1)


# Runs the book's own search (searchtools.js, language_data.js with book/_ext/search_scorer.js inlined, and
# searchindex.js) under Node with the few browser names it touches; prints the top results of each query.
SEARCH_RUNNER = r"""
const vm = require("vm"), fs = require("fs"), path = require("path");
const html = process.argv[2], queries = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
Object.assign(globalThis, {window: globalThis, DOCUMENTATION_OPTIONS: {}, SPHINX_HIGHLIGHT_ENABLED: false,
  _ready: () => {}, _: (s) => s, localStorage: {setItem() {}},
  document: {getElementById: () => null, querySelectorAll: () => []}});
for (const f of ["_static/searchtools.js", "_static/language_data.js", "searchindex.js"])
  vm.runInThisContext(fs.readFileSync(path.join(html, f), "utf8"), {filename: f});
const out = {};
for (const q of queries) {  // the order the page shows them in: best first
  const results = Search._performSearch(...Search._parseQuery(q));
  out[q] = results.reverse().slice(0, 3).map((r) => [r[0], r[2], r[4]]);
}
console.log(JSON.stringify(out));
"""


def test_search_puts_a_levels_own_page_first(html_dir: Path, tmp_path: Path) -> None:
    """Searching a level's title words, in either language, with or without "Level N:", shows that level's
    page first (Sphinx alone ranked the glossary and every page with the words in a section title alike,
    then alphabetically, and found nothing for a Chinese title the index had split into words)."""
    import json
    import shutil
    import subprocess

    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("this check runs the book's search with Node.js: install nodejs", pytrace=False)
        pytest.skip("Node.js not installed: the book's search cannot run here")
    assert "pageTitleBoost" in (html_dir / "_static" / "language_data.js").read_text(encoding="utf-8"), \
        "language_data.js lacks book/_ext/search_scorer.js (html_search_scorer)"
    text = (html_dir / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    queries: dict[str, str] = {}
    for doc, title in zip(index["docnames"], index["titles"]):
        if not re.fullmatch(r"notebooks/\d\d_\w+", doc):
            continue
        plain = re.sub(r"<[^>]+>", "", title).replace("&amp;", "&")
        en, zh = plain.split(" · ", 1)
        for q in (en, zh, re.sub(r"^Level \d+:\s*", "", en), re.sub(r"^第 \d+ 级：", "", zh)):
            queries[q] = doc
    assert len(set(queries.values())) == len(LEVEL_DOCS), "a level page is missing from the search index"
    (tmp_path / "queries.json").write_text(json.dumps(list(queries), ensure_ascii=False), encoding="utf-8")
    (tmp_path / "run.js").write_text(SEARCH_RUNNER, encoding="utf-8")
    run = subprocess.run([node, str(tmp_path / "run.js"), str(html_dir), str(tmp_path / "queries.json")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout)
    wrong = {q: found[q] for q, doc in queries.items() if not found[q] or found[q][0][:2] != [doc, ""]}
    assert not wrong, f"the level's own page is not the first result: {wrong}"


def test_code_comments_show_one_language(html_dir: Path) -> None:
    """Each exercise's starter cell shows, and its copy button copies, the comments of the chosen language only
    (gemm_course/bilingual/comments.py marks the lines; bilingual.css and bilingual.js hide the other language)."""
    from gemm_course.bilingual.comments import in_language, text_shown
    from gemm_course.exercises import exercises
    from gemm_course.exercises.cells import answer_variable

    pres: dict[str, list[str]] = {}
    bad = []
    for e in exercises():
        doc = f"notebooks/{e.level}"
        if doc not in pres:
            text, _ = _page(html_dir, doc)
            pres[doc] = re.findall(r"<pre\b[^>]*>(.*?)</pre>", text, re.S)
        want = {lang: f'{answer_variable(e)} = r"""{in_language(e.starter, lang)}"""' for lang in ("en", "zh")}
        if not any(all(text_shown(inner, lang).strip() == want[lang].strip() for lang in want) for inner in pres[doc]):
            bad.append(f"{doc}.html: no block shows {e.id}'s starter with one language's comments")
    assert not bad, "\n".join(bad)
    copy = (html_dir / "_static" / "copybutton.js").read_text(encoding="utf-8")
    assert "gemm-off" in copy, "the copy button would copy the hidden language's comments"


def test_kernel_listings_show_one_language(html_dir: Path) -> None:
    """Each kernel file a level page shows whole (gc.show_source's output; Level 13's listing of its file) shows,
    and its copy button copies, the comments of the chosen language only, and every line of code."""
    from gemm_course.bilingual.comments import in_language, text_shown
    from gemm_course.fp8 import gemm as fp8_gemm
    from gemm_course.levels import levels

    files = {f"notebooks/{lv.id}": lv.path for lv in levels()}
    files["notebooks/13_fp8_blockscaled"] = fp8_gemm._kernel_path()
    bad = []
    for doc, path in files.items():
        text, _ = _page(html_dir, doc)
        source = path.read_text(encoding="utf-8")
        want = {lang: in_language(source, lang).strip() for lang in ("en", "zh")}
        pres = re.findall(r"<pre\b[^>]*>(.*?)</pre>", text, re.S)
        if not any(all(text_shown(inner, lang).strip() == want[lang] for lang in want) for inner in pres):
            bad.append(f"{doc}.html: no block shows {path.name} with one language's comments")
    assert not bad, "\n".join(bad)
