"""A text in both languages, as HTML that the book's language switch shows one half of.

In the book, CSS hides `.lang-zh` in English mode, `.lang-en` in Chinese mode and the separator in
both; in Jupyter or Colab (no such CSS) the reader sees "English · 中文" as written.
"""
from __future__ import annotations

import html

SEP = " · "


def spans(en: str, zh: str) -> str:
    """English and Chinese as two spans with the separator between them."""
    return (f'<span class="lang-en">{html.escape(en)}</span><span class="lang-sep">{SEP}</span>'
            f'<span class="lang-zh">{html.escape(zh)}</span>')


def split(text: str) -> str:
    """"English · 中文" as spans(); any other text escaped as it is."""
    if SEP in text:
        en, zh = text.split(SEP, 1)
        return spans(en, zh)
    return html.escape(text)
