"""A text in both languages, as HTML that the book's language switch shows one half of.

In the book, CSS hides `.lang-zh` in English mode, `.lang-en` in Chinese mode and the separator in
both; in Jupyter or Colab (no such CSS) the reader sees "English · 中文" as written, unless
language("en") / language("zh") or GEMM_COURSE_LANG picks one: then only that language is emitted.
"""
from __future__ import annotations

import contextlib
import html
from typing import Iterator

SEP = " · "


def spans(en: str, zh: str) -> str:
    """English and Chinese as two spans with the separator between them; after language("en") or
    language("zh") (or GEMM_COURSE_LANG), only that language, escaped."""
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


_choice: str | None = None  # set by language(); None: the environment variable, else "both"
LANGUAGES = ("en", "zh", "both")


def language(choice: str | None = None) -> str:
    """Pick the language the course's outputs show, and return the one in force.

    ``gc.language("zh")`` or ``gc.language("en")`` in a notebook's first cell (Jupyter, Colab): every
    table, check, report and message after it is in that language only. ``"both"`` (the default, what
    the book needs: its switch shows one half) emits both. Without a call, the environment variable
    GEMM_COURSE_LANG=en|zh decides. Plain text (a terminal, ``print``) follows the choice; with "both"
    it shows English, then Chinese.
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


def current_language() -> str:
    """The language the course's display helpers show: "en", "zh", or "both" (the default, what the book
    needs: its switch shows one half). Set with language() or the environment variable GEMM_COURSE_LANG=en|zh."""
    import os

    if _choice is not None:
        return _choice
    lang = os.environ.get("GEMM_COURSE_LANG", "").strip().lower()
    return lang if lang in ("en", "zh") else "both"
