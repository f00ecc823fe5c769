"""The reader's language, and a text in both languages as HTML that the book's language switch shows one half of.

One order decides the language of every output (tables, checks, verdicts, errors, exercise lists, levels,
reports, the command line's messages); current_language() applies it:

1. an explicit choice: ``gc.language("en" | "zh" | "both")``, or the command line's ``--en`` / ``--zh``;
2. the environment variable ``GEMM_COURSE_LANG=en|zh|both``;
3. the system locale: ``LC_ALL``, else ``LC_MESSAGES``, else ``LANG`` (the first one set) starting with ``zh``
   gives Chinese;
4. otherwise both languages in Python, a notebook and the book (the book's switch shows one half), and
   English on the command line (``python -m gemm_course``).

In the book, CSS hides `.lang-zh` in English mode, `.lang-en` in Chinese mode and the separator in
both; in Jupyter or Colab (no such CSS) the reader sees "English · 中文" as written unless the order above
picks one language: then only that language is emitted. The book's build runs its notebooks with
GEMM_COURSE_LANG=both, whatever the builder's locale.
"""
from __future__ import annotations

import contextlib
import html
import os
from typing import Iterator

SEP = " · "


def spans(en: str, zh: str) -> str:
    """English and Chinese as two spans with the separator between them; where one language is chosen
    (current_language()), only that language, escaped."""
    lang = current_language()
    if lang in ("en", "zh"):
        return html.escape(en if lang == "en" else zh)
    return (f'<span class="lang-en">{html.escape(en)}</span><span class="lang-sep">{SEP}</span>'
            f'<span class="lang-zh">{html.escape(zh)}</span>')


def split(text: str) -> str:
    """"English · 中文" as spans() (one language where one is chosen); any other text escaped as it is."""
    if SEP in text:
        en, zh = text.split(SEP, 1)
        return spans(en, zh)
    return html.escape(text)


_choice: str | None = None  # set by language() (and the command line's --en / --zh); None: the order below decides
_default = "both"  # nothing chose: both in Python, a notebook and the book; the command line sets "en" while it runs
LANGUAGES = ("en", "zh", "both")
LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")  # POSIX: the first one set decides the messages' language


def language(choice: str | None = None) -> str:
    """Pick the language the course's outputs show, and return the one in force.

    ``gc.language("zh")`` or ``gc.language("en")`` in a notebook's first cell (Jupyter, Colab) or a script:
    every table, check, verdict, report and error message after it is in that language only. ``"both"``
    emits both (what the book needs: its switch shows one half). Without a call, the environment variable
    GEMM_COURSE_LANG=en|zh|both decides, else a Chinese system locale (LC_ALL, LC_MESSAGES or LANG starting
    with zh), else both languages (English on the command line). Plain text (a terminal, ``print``) follows
    the choice; with "both" it shows English, then Chinese.
    """
    global _choice
    if choice is not None:
        text = str(choice).strip().lower()
        if text not in LANGUAGES:
            raise ValueError(f"language must be 'en', 'zh' or 'both', not {choice!r} / "
                             f"语言只能是 'en'、'zh' 或 'both'，而不是 {choice!r}")
        _choice = text
    return current_language()


@contextlib.contextmanager
def chosen(choice: str) -> Iterator[None]:
    """language(choice) for the lines inside the `with`, then the choice that was in force before."""
    global _choice
    previous = _choice
    language(choice)
    try:
        yield
    finally:
        _choice = previous


@contextlib.contextmanager
def command_line(choice: str | None = None) -> Iterator[None]:
    """The command line's rules for the lines inside the `with`: its --en / --zh (choice) above everything,
    else the order of current_language() with English, not both, when nothing chooses."""
    global _default
    previous = _default
    _default = "en"
    try:
        if choice is None:
            yield
        else:
            with chosen(choice):
                yield
    finally:
        _default = previous


def locale_language() -> str | None:
    """"zh" when the system locale is Chinese (the first of LC_ALL, LC_MESSAGES, LANG that is set starts
    with zh), else None. Only the environment is read: no subprocess, nothing slow."""
    for name in LOCALE_VARIABLES:
        value = _environment(name).strip()
        if value:
            return "zh" if value.lower().startswith("zh") else None
    return None


def _environment(name: str) -> str:
    """os.environ.get(name, "") without the two exceptions a missing name costs inside it (about 6 µs): every
    bilingual cell a table shows asks for the language."""
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return os.environ.get(name, "")
    key = _ENCODED.get(name)
    if key is None:
        key = _ENCODED[name] = os.environ.encodekey(name)
    value = data.get(key)
    return "" if value is None else os.environ.decodevalue(value)


_ENCODED: dict[str, object] = {}  # the names as os.environ keeps them (bytes on POSIX)


def current_language() -> str:
    """The language the course's outputs show: "en", "zh" or "both" (both halves; the book's switch shows
    one). In order: language() (or the command line's --en / --zh), GEMM_COURSE_LANG=en|zh|both, a Chinese
    system locale, else both (English on the command line)."""
    if _choice is not None:
        return _choice
    lang = _environment("GEMM_COURSE_LANG").strip().lower()
    if lang in LANGUAGES:
        return lang
    return locale_language() or _default
