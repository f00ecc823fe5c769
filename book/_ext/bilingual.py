"""Bilingual (English / 简体中文) pages for the gemm-course Jupyter Book.

Authoring convention (checked by ``tests/test_bilingual.py``): the page starts with an
untagged markdown cell ``# English title · 中文标题``; all other prose lives in markdown
cells tagged ``lang-en`` / ``lang-zh`` that come in twins (English first).

What this extension does at build time:

1. Wraps myst-nb's markdown-cell renderer: every docutils node created by a tagged cell
   gets the class ``lang-en`` / ``lang-zh`` (on itself and all descendants).  Sections
   get ``lang-section-en`` / ``lang-section-zh`` instead (their title and body still get
   ``lang-xx``), because later untagged code cells are appended into the section and
   must stay visible in both languages.
2. Splits untagged titles ``A · B`` into ``<span class="lang-en">A</span><span
   class="lang-sep"> · </span><span class="lang-zh">B</span>`` (the text of the title is
   unchanged, so the nav / ``<title>`` still read ``A · B``; bilingual.js splits those).
3. Adds the ``English | 中文`` switch (``<div id="lang-switch">``) to the article
   header, bilingual.css / bilingual.js, and an inline ``<head>`` script that sets
   ``<html data-lang="en|zh">`` before first paint (stored choice in localStorage key
   ``gemm-course-lang``; else ``zh`` if navigator.language starts with "zh", else ``en``).
   Without JavaScript ``data-lang`` is never set and both languages stay visible.
4. Copies ``plotly/package_data/plotly.min.js`` to ``_static/plotly.min.js`` (no CDN).
5. Code comments in two languages (``gemm_course.bilingual.comments``: an English comment, then its Chinese
   twin): every ``<pre>`` block of a page gets its comment lines marked ``lang-en`` / ``lang-zh``, so the
   switch shows the comments of one language in code cells and listings; bilingual.js marks the hidden
   language ``gemm-off``, which the copy button leaves out (``copybutton_exclude``).
6. Search: the index splits Chinese into words (jieba, taught the glossary's terms) and
   ``search_scorer.js`` (``html_search_scorer``) puts the page whose title names the query first and
   cuts a Chinese query into the words the index holds.

Contract for figure scripts (``gemm_course.display.plots.show`` emits a ``text/html`` output):

* On every page whose rendered body contains the word ``Plotly``, ``_static/plotly.min.js``
  is loaded by a plain blocking ``<script>`` in ``<head>`` (not ``defer``/``async``), so
  ``window.Plotly`` is already defined when inline ``<script>`` tags in the body run.
  Polling for ``window.Plotly`` is harmless and also fine.
* ``window.PlotlyConfig = {MathJaxConfig: "local"}`` is set before plotly loads, so
  plotly leaves Sphinx's MathJax alone.
* The current language is ``document.documentElement.dataset.lang`` (``"en"``/``"zh"``,
  or unset without JS); on change, ``document`` receives a ``CustomEvent("gemm:lang",
  {detail: {lang}})`` that a figure may use to relabel itself.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.transforms import SphinxTransform

LANGS = ("en", "zh")
SEP = " · "  # space, U+00B7 MIDDLE DOT, space
STATIC_DIR = Path(__file__).resolve().parent.parent / "_static"
SWITCH_TEMPLATE = "bilingual-lang-switch.html"
SEARCH_SCORER = Path(__file__).resolve().parent / "search_scorer.js"  # inlined into _static/language_data.js
SILENT_MIME_TYPES = {"application/vnd.plotly.v1+json"}

# Runs in <head> before first paint: pick the language so only one is ever shown.
HEAD_SCRIPT = """(function () {
  var l = null;
  try { l = localStorage.getItem("gemm-course-lang"); } catch (e) {}
  if (l !== "en" && l !== "zh") {
    l = /^zh/i.test(navigator.language || "") ? "zh" : "en";
  }
  document.documentElement.dataset.lang = l;
  document.documentElement.lang = l === "zh" ? "zh-CN" : "en";
  window.PlotlyConfig = window.PlotlyConfig || {MathJaxConfig: "local"};
})();"""

SWITCH_HTML = """<div id="lang-switch" class="lang-switch" role="group" \
aria-label="Language / 语言">
<button type="button" class="btn btn-sm lang-switch__btn" data-set-lang="en" \
lang="en" title="Show the English text">English</button>
<span class="lang-switch__sep" aria-hidden="true">|</span>
<button type="button" class="btn btn-sm lang-switch__btn" data-set-lang="zh" \
lang="zh-CN" title="显示中文内容">中文</button>
</div>
"""


# --- 1. language classes on the nodes of tagged markdown cells -----------------------


def _cell_lang(metadata: dict[str, Any]) -> str | None:
    tags = metadata.get("tags") or []
    return next((lang for lang in LANGS if f"lang-{lang}" in tags), None)


def _add_class(node: nodes.Element, cls: str) -> None:
    if cls not in node["classes"]:
        node["classes"].append(cls)


def _mark(node: nodes.Node, lang: str) -> None:
    """Give a node created by a ``lang`` cell its language class (sections: see above)."""
    if isinstance(node, nodes.section):
        _add_class(node, f"lang-section-{lang}")
        for child in node.children:
            _mark(child, lang)
    elif isinstance(node, nodes.Element):
        for sub in node.findall(nodes.Element):  # includes node itself
            _add_class(sub, f"lang-{lang}")


def _patch_markdown_cells() -> None:
    from myst_nb.core.render import MditRenderMixin

    original = MditRenderMixin.render_nb_cell_markdown
    if getattr(original, "_bilingual", False):  # setup() may run more than once
        return

    def render_nb_cell_markdown(self: Any, token: Any) -> None:
        lang = _cell_lang(token.meta.get("metadata") or {})
        if lang is None:
            original(self, token)
            return
        # Headings may attach new sections to an ancestor of the current node, so find
        # the cell's top-level nodes as "new node whose parent existed before".
        old = list(self.document.findall())  # keeps them alive, so ids stay unique
        before = {id(n) for n in old}
        original(self, token)
        created = [
            n
            for n in self.document.findall()
            if id(n) not in before and n.parent is not None and id(n.parent) in before
        ]
        for node in created:
            _mark(node, lang)

    render_nb_cell_markdown._bilingual = True  # type: ignore[attr-defined]
    MditRenderMixin.render_nb_cell_markdown = render_nb_cell_markdown


def _silence_plotly_json() -> None:
    """Drop the ``application/vnd.plotly.v1+json`` twin of a figure without a warning.

    myst-nb renders every mime type of an output while parsing and warns for unknown
    ones; the ``text/html`` entry of the same output is what the HTML page shows.
    """
    from myst_nb.core.render import NbElementRenderer

    for name in ("render_unhandled", "render_unhandled_inline"):
        original = getattr(NbElementRenderer, name)
        if getattr(original, "_bilingual", False):
            continue

        def quiet(self: Any, data: Any, _original: Any = original) -> list[nodes.Element]:
            if data.mime_type in SILENT_MIME_TYPES:
                return []
            return _original(self, data)

        quiet._bilingual = True  # type: ignore[attr-defined]
        setattr(NbElementRenderer, name, quiet)


# --- 2. split "English · 中文" titles -------------------------------------------------


def split_title(title: nodes.Element) -> bool:
    """Wrap the halves of ``A · B`` in lang-en / lang-sep / lang-zh inlines."""
    kids = list(title.children)
    for i, kid in enumerate(kids):
        if isinstance(kid, nodes.Text) and SEP in kid:
            left, right = str(kid).split(SEP, 1)
            en = nodes.inline("", "", *kids[:i], classes=["lang-en"])
            if left:
                en += nodes.Text(left)
            zh = nodes.inline("", "", classes=["lang-zh"])
            if right:
                zh += nodes.Text(right)
            zh.extend(kids[i + 1 :])
            title.clear()  # detaches kids; en/zh re-parent them
            title += [en, nodes.inline("", SEP, classes=["lang-sep"]), zh]
            return True
    return False


class SplitBilingualTitles(SphinxTransform):
    """Split untagged section titles (the page H1) before Sphinx collects titles."""

    default_priority = 500  # < 880, where doctree-read (title/toc collection) fires

    def apply(self, **kwargs: Any) -> None:
        for title in list(self.document.findall(nodes.title)):
            tagged = any(c in title["classes"] for c in ("lang-en", "lang-zh"))
            if not tagged and isinstance(title.parent, nodes.section):
                split_title(title)


def _tag_page_toc(app: Sphinx, doctree: nodes.document) -> None:
    """Give "on this page" entries the language of the section they point to.

    Runs after Sphinx collected ``env.tocs`` (same event, later priority), so the
    rendered ``<a>`` carries ``lang-en``/``lang-zh`` and CSS hides the other language
    without waiting for JavaScript.
    """
    langs: dict[str, str] = {}
    for section in doctree.findall(nodes.section):
        for lang in LANGS:
            if f"lang-section-{lang}" in section["classes"]:
                langs.update((f"#{i}", lang) for i in section["ids"])
    toc = app.env.tocs.get(app.env.docname)
    if toc is None or not langs:
        return
    for ref in toc.findall(nodes.reference):
        lang = langs.get(ref.get("anchorname", ""))
        if lang:
            _add_class(ref, f"lang-{lang}")


# --- 3./4. assets, switch template, plotly --------------------------------------------


def _config_inited(app: Sphinx, config: Config) -> None:
    # The header switch is a theme template; write it where the builder will find it
    # (templates are loaded when the builder is created, right after this event).
    tmpl_dir = Path(app.doctreedir) / "_bilingual_templates"
    tmpl_dir.mkdir(parents=True, exist_ok=True)
    (tmpl_dir / SWITCH_TEMPLATE).write_text(SWITCH_HTML, encoding="utf-8")
    config.templates_path = [*config.templates_path, str(tmpl_dir)]

    opts = dict(config.html_theme_options or {})
    end = opts.get("article_header_end", ["article-header-buttons.html"])
    end = [s.strip() for s in end.split(",")] if isinstance(end, str) else list(end)
    if SWITCH_TEMPLATE not in end:
        opts["article_header_end"] = [SWITCH_TEMPLATE, *end]
    config.html_theme_options = opts
    _search_words(app, config)
    # The copy button leaves out what the switch hides (bilingual.js marks it gemm-off).
    exclude = getattr(config, "copybutton_exclude", None)
    if isinstance(exclude, str) and "gemm-off" not in exclude:
        config.copybutton_exclude = f"{exclude}, .gemm-off" if exclude.strip() else ".gemm-off"
        if "copybutton_exclude" in (config.html_context or {}):  # sphinx-copybutton read it already
            config.html_context["copybutton_exclude"] = config.copybutton_exclude
    if not config.html_search_scorer:  # a level's own page first for its title's words (see the file)
        config.html_search_scorer = str(SEARCH_SCORER)


def _search_words(app: Sphinx, config: Config) -> None:
    # With html_search_language "zh" the index splits Chinese into words (jieba), but a reader's query
    # is not split: searching 线程束 finds it only if the index keeps 线程束 whole. Teach the splitter
    # the course's own terms, from the glossary (one source), as a user dictionary.
    if config.html_search_language != "zh":
        return
    try:
        from gemm_course.display.glossary import TERMS
    except ImportError:  # the package is not importable: the default dictionary still works
        return
    words = sorted({w for t in TERMS for w in t.zh_forms()
                    if re.search(r"[\u4e00-\u9fff]", w) and not re.search(r"\s", w)})
    path = Path(app.doctreedir) / "search_words.txt"
    path.write_text("".join(f"{w} 100000\n" for w in words), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(path)}


class _TermSet(set):
    """Sphinx's Chinese search keeps every Latin word of every page in one list (SearchChinese.latin_terms)
    and asks `word in list` for each word of each page: quadratic in the book's size, about three minutes of
    this book's build. A set gives the same answers at once; `extend` is the one list method it uses."""

    def extend(self, words: Any) -> None:
        self.update(words)


def _fast_latin_terms() -> None:
    try:
        from sphinx.search import zh
    except ImportError:  # the Chinese search module needs its optional dependencies: nothing to speed up
        return
    terms = getattr(zh.SearchChinese, "latin_terms", None)
    if isinstance(terms, list):
        zh.SearchChinese.latin_terms = _TermSet(terms)


def _builder_inited(app: Sphinx) -> None:
    # The notebooks run during the build show a fresh reader's exercise progress, never the builder's own:
    # their kernels inherit this environment, so they read an empty progress file of this build's.
    os.environ["GEMM_COURSE_PROGRESS"] = str(Path(tempfile.mkdtemp(prefix="gemm_course_book_")) / "progress.json")
    # Every output in both languages, whatever the builder's locale or GEMM_COURSE_LANG: the page's switch shows one.
    os.environ["GEMM_COURSE_LANG"] = "both"
    if app.builder.format != "html":
        return
    import plotly

    src = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
    stage = Path(app.doctreedir) / "_bilingual_static"
    stage.mkdir(parents=True, exist_ok=True)
    dst = stage / "plotly.min.js"
    if not dst.exists() or dst.stat().st_size != src.stat().st_size:
        shutil.copyfile(src, dst)
    # Absolute paths: Sphinx joins them onto confdir, which keeps them as they are.
    app.config.html_static_path = [
        *app.config.html_static_path,
        str(STATIC_DIR),
        str(stage),
    ]


def _page_context(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    # Only pages with figures pay for the 4.8 MB plotly bundle; blocking load in <head>
    # so inline figure scripts in the body find window.Plotly (see module docstring).
    if "Plotly" in (context.get("body") or ""):
        app.add_js_file("plotly.min.js", priority=200)


def _mark_code_comments(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    # Starters and listings carry each comment in English, then in Chinese: mark each language's lines.
    body = context.get("body")
    if not body:
        return
    try:
        from gemm_course.bilingual.comments import mark_page
    except ImportError:  # the package is not importable: both languages stay visible, as written
        return
    context["body"] = mark_page(body)


def _drop_widget_cdn(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    # myst-nb adds require.js and the ipywidgets HTML manager from CDNs to any page whose notebook
    # stored widget state. Widget outputs are removed in this book (their cells carry the
    # remove-output tag: sliders need a live kernel), so the book keeps no external scripts.
    if "script_files" in context:
        context["script_files"] = [js for js in context["script_files"]
                                   if not str(getattr(js, "filename", js)).startswith(("http://", "https://"))]


def _drop_colab_for_text_pages(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    # Colab opens .ipynb files only; a page written as a MyST .md file would get a link Colab cannot
    # open. Such pages keep their other header buttons (download, repository).
    try:
        source = app.env.doc2path(pagename)
    except Exception:  # a generated page (search, genindex): nothing to launch
        return
    if str(source).endswith(".ipynb"):
        return
    kept = []
    for button in context.get("header_buttons", []):
        if button.get("type") == "group" and button.get("buttons"):
            button = {**button, "buttons": [b for b in button["buttons"] if "colab" not in str(b.get("url", ""))]}
            if not button["buttons"]:
                continue
        kept.append(button)
    if "header_buttons" in context:
        context["header_buttons"] = kept


def setup(app: Sphinx) -> dict[str, Any]:
    _patch_markdown_cells()
    _silence_plotly_json()
    _fast_latin_terms()
    app.add_transform(SplitBilingualTitles)
    app.connect("doctree-read", _tag_page_toc, priority=900)
    app.connect("config-inited", _config_inited)
    app.connect("builder-inited", _builder_inited)
    app.connect("html-page-context", _page_context)
    app.connect("html-page-context", _mark_code_comments)
    app.connect("html-page-context", _drop_widget_cdn, priority=900)
    app.connect("html-page-context", _drop_colab_for_text_pages, priority=900)
    app.add_js_file(None, body=HEAD_SCRIPT, priority=1)
    app.add_css_file("bilingual.css")
    app.add_js_file("bilingual.js", loading_method="defer")
    return {
        "version": "1.0",
        "env_version": 1,  # bump when the doctree changes, so cached pages are re-read
        "parallel_read_safe": True,
        "parallel_write_safe": True,
    }
