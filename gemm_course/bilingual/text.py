"""What a notebook cell shows: text, tables and folded evidence, in one language at a time.

Every output of the course's display helpers is built from these pieces:

* :class:`Bilingual`: a text (or an HTML fragment) in English and in Chinese. As HTML it is two
  ``lang-en`` / ``lang-zh`` elements, of which the book's language switch shows one; after
  ``gc.language("en")`` or ``gc.language("zh")`` (Jupyter, Colab) only that language is emitted, as
  HTML and as plain text.
* :class:`Table`: rows under headers whose cells may be bilingual (one language per mode).
* :class:`Fold`: long evidence (listings, reports, tables) behind a ``<details>`` toggle whose
  summary says what is inside and the key result; closed unless ``open=True``.
* :func:`show`: display one of them (IPython's display; ``print`` outside IPython).
* :class:`Shown` / :class:`ShownDict`: the value a helper returns after it has displayed its result:
  a plain list or dict that Jupyter does not print a second time.
* :func:`one_language`, :func:`error_halves`, :func:`localize_error` and :func:`one_language_errors`: a
  message or an error written "English / 中文" in the language in force (unchanged when both are shown).
"""
from __future__ import annotations

import functools
import html
import re
from typing import Any, Iterable, Optional, Sequence, Union

from gemm_course.bilingual.language import SEP, current_language

_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def has_cjk(text: str) -> bool:
    """Whether a text holds Chinese characters or full-width punctuation."""
    return bool(_CJK.search(text))


def plain(en: str, zh: str) -> str:
    """One text for a terminal in the language in force: "both" gives English, then Chinese."""
    lang = current_language()
    if lang == "en" or en == zh:
        return en
    if lang == "zh":
        return zh
    return f"{en}{SEP}{zh}" if "\n" not in en + zh else f"{en}\n{zh}"


class Bilingual:
    """A text in both languages. en_html / zh_html: HTML (already escaped); en / zh: plain text."""

    def __init__(self, en: str, zh: str, en_html: Optional[str] = None, zh_html: Optional[str] = None,
                 block: bool = False) -> None:
        self.en, self.zh = en, zh
        self.en_html = html.escape(en) if en_html is None else en_html
        self.zh_html = html.escape(zh) if zh_html is None else zh_html
        self.block = block

    def html(self) -> str:
        tag = "div" if self.block else "span"
        lang = current_language()
        if lang == "en" or self.en_html == self.zh_html:
            return self.en_html
        if lang == "zh":
            return self.zh_html
        sep = "" if self.block else f'<span class="lang-sep">{SEP}</span>'
        return (f'<{tag} class="lang-en">{self.en_html}</{tag}>{sep}'
                f'<{tag} class="lang-zh">{self.zh_html}</{tag}>')

    def text(self) -> str:
        return plain(self.en, self.zh)

    def _repr_html_(self) -> str:
        return f'<div class="gemm-note">{self.html()}</div>' if not self.block else self.html()

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()


def text(en: str, zh: str) -> Bilingual:
    """A short text in both languages (escaped when shown as HTML)."""
    return Bilingual(en, zh)


def note(en_html: str, zh_html: str, en: Optional[str] = None, zh: Optional[str] = None) -> Bilingual:
    """A paragraph (or any HTML block) in both languages; en / zh: its plain text (default: tags removed)."""
    def strip(h: str) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", h))

    def para(h: str) -> str:
        return h if h.lstrip().startswith(("<table", "<pre", "<div", "<p")) else f"<p>{h}</p>"

    return Bilingual(en if en is not None else strip(en_html), zh if zh is not None else strip(zh_html),
                     para(en_html), para(zh_html), block=True)


def from_message(message: str) -> Bilingual:
    """A message written as "English / 中文", "English · 中文" or "English\\n中文" as two halves; a message
    without Chinese is code or a name, the same in both languages."""
    first = _CJK.search(message)
    if first is None:
        return Bilingual(message, message)
    head = message[:first.start()]
    cuts = [(head.rfind(sep), sep) for sep in ("\n", " / ", SEP, " | ")]
    at, sep = max(cuts)
    if at <= 0:
        return Bilingual(message, message)
    return Bilingual(message[:at].rstrip(), message[at + len(sep):].lstrip())


def one_language(message: str) -> str:
    """A message written "English / 中文" (or " · ", or on two lines) in the language in force; as it is when
    both languages are shown or when it has one language only."""
    if current_language() not in ("en", "zh"):
        return message
    return from_message(message).text()


def error_halves(err: BaseException) -> Bilingual:
    """An error's message as its English and Chinese halves: the halves it was given (an error of the CPU
    backend keeps them as .en and .zh; what follows them, a compiler's log, stays with each half), else its
    message split by from_message."""
    kept = err.__dict__.get("_halves") if hasattr(err, "__dict__") else None
    if isinstance(kept, Bilingual):
        return kept
    message = err.args[0] if len(err.args) == 1 and isinstance(err.args[0], str) else str(err)
    en, zh = getattr(err, "en", None), getattr(err, "zh", None)
    if isinstance(en, str) and isinstance(zh, str) and en and zh and en != zh:
        for sep in (" / ", SEP):
            if message.startswith(f"{en}{sep}{zh}"):
                tail = message[len(f"{en}{sep}{zh}"):]
                return Bilingual(en + tail, zh + tail)
    return from_message(message)


def localize_error(err: BaseException) -> BaseException:
    """The error's message in the language in force (its args rewritten in place, so that a traceback and
    str(err) show one language); both halves stay readable through error_halves(err). Nothing changes
    when both languages are shown or the message has one language only."""
    lang = current_language()
    if lang not in ("en", "zh") or not hasattr(err, "__dict__"):
        return err
    if not (len(err.args) == 1 and isinstance(err.args[0], str)) and "_halves" not in err.__dict__:
        return err
    halves = error_halves(err)
    if halves.en == halves.zh:
        return err
    err.__dict__["_halves"] = halves
    err.args = (halves.en if lang == "en" else halves.zh,)
    return err


ONE_LANGUAGE_ERRORS = (ValueError, KeyError, RuntimeError, TypeError)


def one_language_errors(function: Any) -> Any:
    """A public function whose errors (a wrong input, a missing tool) speak the language in force."""
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ONE_LANGUAGE_ERRORS as err:
            localize_error(err)
            raise
    return wrapper


Cell = Union[str, int, float, Bilingual]


def _cell_html(cell: Cell) -> str:
    return cell.html() if isinstance(cell, Bilingual) else html.escape(str(cell))


def _cell_text(cell: Cell) -> str:
    return cell.text() if isinstance(cell, Bilingual) else str(cell)


class Table:
    """Rows of cells under headers; a header or cell may be a Bilingual (one language shown per mode)."""

    def __init__(self, head: Sequence[Cell], rows: Iterable[Sequence[Cell]], caption: Optional[Bilingual] = None,
                 code_columns: Sequence[int] = ()) -> None:
        self.head, self.rows, self.caption = list(head), [list(r) for r in rows], caption
        self.code_columns = set(code_columns)

    def html(self) -> str:
        def td(i: int, c: Cell) -> str:
            inner = _cell_html(c)
            return f"<td><code>{inner}</code></td>" if i in self.code_columns else f"<td>{inner}</td>"

        head = "".join(f"<th>{_cell_html(h)}</th>" for h in self.head)
        body = "".join("<tr>" + "".join(td(i, c) for i, c in enumerate(r)) + "</tr>" for r in self.rows)
        cap = f"<p class='gemm-caption'><small>{self.caption.html()}</small></p>" if self.caption else ""
        return f"<table class='gemm-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{cap}"

    def text(self) -> str:
        grid = [[_cell_text(h) for h in self.head]] + [[_cell_text(c) for c in r] for r in self.rows]
        widths = [max(len(row[i]) if i < len(row) else 0 for row in grid) for i in range(len(self.head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in grid]
        return "\n".join(lines + ([self.caption.text()] if self.caption else []))

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return self.text()


Part = Union[str, Bilingual, Table, "Fold", "Page"]


def _part_html(part: Part) -> str:
    """HTML of one part; a str is HTML the same in both languages (code, a number)."""
    return part if isinstance(part, str) else part.html()


def _part_text(part: Part) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", part)) if isinstance(part, str) else part.text()


class Page:
    """Parts shown one below the other."""

    def __init__(self, *parts: Part) -> None:
        self.parts = [p for p in parts if p not in (None, "")]

    def html(self) -> str:
        return "".join(_part_html(p) for p in self.parts)

    def text(self) -> str:
        return "\n".join(_part_text(p) for p in self.parts)

    def _repr_html_(self) -> str:
        return f'<div class="gemm-note">{self.html()}</div>'

    def __repr__(self) -> str:
        return self.text()


class Fold:
    """Evidence behind a labelled toggle: the summary says what is inside and the key result."""

    def __init__(self, summary: Bilingual, *body: Part, open: bool = False) -> None:  # noqa: A002
        self.summary, self.body, self.open = summary, Page(*body), open

    def html(self) -> str:
        opened = " open" if self.open else ""
        return (f'<details class="gemm-fold"{opened}><summary>{self.summary.html()}</summary>'
                f'<div class="gemm-fold__body">{self.body.html()}</div></details>')

    def text(self) -> str:
        return f"{self.summary.text()}\n{self.body.text()}"

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return self.text()


def code_block(source: str, language: str = "cuda") -> str:
    """Source code as a highlighted HTML block (the book's and Jupyter's `highlight` style), the same in both
    languages; it keeps its line breaks."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name

        return highlight(source, get_lexer_by_name(language), HtmlFormatter(cssclass="highlight"))
    except Exception:  # no pygments or no such lexer: plain, still unwrapped
        return f"<pre><code class='language-{language}'>{html.escape(source)}</code></pre>"


def show(obj: Any) -> None:
    """Display one output: as HTML in Jupyter, Colab and the book; as plain text elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython is a dependency
        print(obj)
        return
    if get_ipython() is None:
        print(repr(obj) if hasattr(obj, "text") else obj)
    else:
        display(obj)


class Shown(list):
    """A list a helper returns after showing it: Jupyter does not print it a second time."""

    def _ipython_display_(self) -> None:
        return None


class ShownDict(dict):
    """A dict a helper returns after showing it: Jupyter does not print it a second time."""

    def _ipython_display_(self) -> None:
        return None


def say(en: str, zh: str) -> None:
    """Show one line of a cell's result in the language in force (both halves for the book's switch); a
    cell's `print("English · 中文")` would show both languages in every mode."""
    show(note(html.escape(en), html.escape(zh), en, zh))


def fold_lines(lines: Sequence[str], en: str, zh: str) -> None:
    """Numbers printed beside a chart, folded: they back the chart and the text, line by line."""
    if lines:
        show(Fold(text(f"{en} ({len(lines)} lines)", f"{zh}（{len(lines)} 行）"), code_block("\n".join(lines), "text")))
