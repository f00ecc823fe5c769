"""Code comments in two languages, from one source: each English comment is followed by its Chinese twin.

How a source writes them (the exercises' starters, the kernel files the lessons show whole):

* A paragraph of comment lines in English is followed at once by the same paragraph in Chinese, at the same
  indentation::

      // Each thread copies one element of each piece per step.
      // 每个线程每一步拷贝每个分块中的一个元素。

  A paragraph ends at an empty comment line (``//`` alone), at a line of code, or where the Chinese begins.
* A comment after code on the same line is followed by a comment-only line holding its Chinese, starting in
  the same column::

      __shared__ float As[TILE][TILE];  // As[m][k]: the piece of A for the current step
                                        // As[m][k]：本步用到的 A 分块

* A drawing (a paragraph with box-drawing characters) and comments without English words belong to both
  languages and stay as they are.

A live notebook cannot switch what a code cell shows, so there the reader sees both, English first.
``in_language`` gives the source in one language (the notebook's outputs after ``gc.language("zh")``), and
``mark_html`` marks a highlighted block's lines with the book's language classes, so that the page's
English | 中文 switch shows one language (bilingual.css, bilingual.js; the copy button copies what is shown).
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Optional, Sequence

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
BOX = re.compile(r"[\u2500-\u259f]")  # ─ │ ┌ ┼ ...: a drawing, shared by both languages
# Words to translate: two English words in a row, or one lowercase word of 3+ letters that is not code (an index
# such as As[buf][k], a call such as tanh(...), an exponent such as 2^binade).
PROSE = re.compile(r"[A-Za-z]{2,}[,;:.]?\s+(?:[A-Za-z0-9]+\s+)?[A-Za-z]{2,}"
                   r"|(?<![\w^.\[])[a-z]{3,}\b(?![\w(\]])")
HASH_COMMENT = re.compile(r"^\s*#(?:\s|$)")
# A notebook cell that holds a starter: `my_kernel = r"""` opens its first line.
CELL_PREFIX = re.compile(r'^\s*\w+\s*=\s*[rR]?"""')


def comment_marker(source: str) -> Optional[str]:
    """"//" for CUDA/C++ text, "#" for Python or a text answer, None without comments."""
    lines = source.splitlines()
    if any(comment_column(line, "//") >= 0 for line in lines):
        return "//"
    if any(HASH_COMMENT.match(line) or comment_column(line, "#") >= 0 for line in lines):
        return "#"
    return None


def comment_column(line: str, marker: str) -> int:
    """Where the line's comment starts, or -1. A line that starts with "//" or "# " is a comment whatever the
    marker (a listing may mix Python and CUDA); after code, only `marker` starts one, outside string literals.
    "#" starts a comment only before a space or the end of the line (`#pragma` is code)."""
    stripped = line.lstrip()
    if stripped.startswith("//") or HASH_COMMENT.match(line):
        return len(line) - len(stripped)
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch == '"' or (ch == "'" and marker == "#"):
            quote = ch
        elif line.startswith(marker, i):
            if marker != "#" or i + 1 == len(line) or line[i + 1].isspace():
                return i
        i += 1
    return -1


@dataclass
class Pair:
    """An English comment (line numbers, from 0) and its Chinese twin. trailing: en[0] is a line of code whose
    comment follows the code; its Chinese is zh[0], a comment-only line under it."""

    en: list[int]
    zh: list[int]
    trailing: bool = False


class Comments:
    """The comments of a source: which lines are English, which Chinese, which shared."""

    def __init__(self, lines: Sequence[str], marker: Optional[str] = None) -> None:
        self.lines = list(lines)
        self.marker = marker or comment_marker("\n".join(self.lines)) or "//"
        self.col = [comment_column(line, self.marker) for line in self.lines]
        self.pairs: list[Pair] = []
        self.orphans: list[int] = []  # Chinese lines with no English before them
        self._pair()

    # -- what each line is ---------------------------------------------------------------------------
    def comment(self, i: int) -> str:
        return self.lines[i][self.col[i]:] if self.col[i] >= 0 else ""

    def own(self, i: int) -> bool:
        """A comment-only line."""
        return self.col[i] >= 0 and not self.lines[i][:self.col[i]].strip()

    def trailing(self, i: int) -> bool:
        """Code, then a comment on the same line."""
        return self.col[i] >= 0 and bool(self.lines[i][:self.col[i]].strip())

    def chinese(self, i: int) -> bool:
        return bool(CJK.search(self.comment(i)))

    def words(self, i: int) -> str:
        """The comment's text after its marker."""
        text = self.comment(i)
        return text[2:] if text.startswith("//") else text[1:]

    def empty(self, i: int) -> bool:
        """A comment line with nothing after its marker: a paragraph break."""
        return self.own(i) and not self.words(i).strip()

    def _pair(self) -> None:
        n, i = len(self.lines), 0
        while i < n:
            if not (self.own(i) and self.chinese(i)):
                i += 1
                continue
            k = i
            while k < n and self.own(k) and self.chinese(k):
                k += 1
            zh = list(range(i, k))
            j = i - 1
            while j >= 0 and self.own(j) and not self.chinese(j) and not self.empty(j):
                j -= 1
            en = list(range(j + 1, i))
            column = self.col[i]
            head = (j >= 0 and self.trailing(j) and not self.chinese(j) and self.col[j] == column
                    and all(self.col[e] == column for e in en))
            if head:
                self.pairs.append(Pair([j, *en], zh, trailing=True))
            elif en:
                self.pairs.append(Pair(en, zh))
            else:
                self.orphans += zh
            i = k

    # -- roles ---------------------------------------------------------------------------------------
    def roles(self) -> dict[int, str]:
        """Line number -> "en" (an English comment line), "zh" (a Chinese one), "head" (code whose trailing English
        comment has its Chinese on the next line), "under" (that Chinese line); lines not listed are shared."""
        out: dict[int, str] = {}
        for p in self.pairs:
            for e in p.en:
                out[e] = "en"
            for z in p.zh:
                out[z] = "zh"
            if p.trailing:
                out[p.en[0]] = "head"
                out[p.zh[0]] = "under"
        for z in self.orphans:
            out[z] = "zh"
        return out

    def head_chinese(self) -> dict[int, int]:
        """A trailing English comment's line -> the line of its Chinese."""
        return {p.en[0]: p.zh[0] for p in self.pairs if p.trailing}

    def untranslated(self) -> list[int]:
        """Lines whose comment reads as English words but has no Chinese twin (a drawing's paragraph excepted)."""
        paired = {e for p in self.pairs for e in p.en}
        drawing = self._drawing_lines()
        return [i for i in range(len(self.lines)) if self.col[i] >= 0 and i not in paired and i not in drawing
                and not self.chinese(i) and PROSE.search(self.words(i))]

    def _drawing_lines(self) -> set[int]:
        """Comment-only lines of a paragraph that holds a drawing (box-drawing characters)."""
        out: set[int] = set()
        n, i = len(self.lines), 0
        while i < n:
            if not self.own(i) or self.empty(i):
                i += 1
                continue
            k = i
            while k < n and self.own(k) and not self.empty(k):
                k += 1
            if any(BOX.search(self.comment(x)) for x in range(i, k)):
                out.update(range(i, k))
            i = k
        return out

    def problems(self) -> list[str]:
        """What breaks the convention: a Chinese comment without English before it, an English comment without
        its Chinese, an English and a Chinese paragraph that do not start in the same column."""
        out = [f"line {z + 1}: Chinese comment with no English comment before it: {self.lines[z].strip()}"
               for z in self.orphans]
        out += [f"line {e + 1}: English comment with no Chinese line after it: {self.lines[e].strip()}"
                for e in self.untranslated()]
        for p in self.pairs:
            if len({self.col[x] for x in p.en + p.zh}) > 1:
                out.append(f"line {p.zh[0] + 1}: the Chinese comment does not start in the column of its English one")
        return out


def in_chosen_language(source: str) -> str:
    """The source with one language's comments after language("en") or language("zh") (the notebook's choice); as
    written otherwise, where the book's switch shows one."""
    from gemm_course.bilingual.language import current_language

    return in_language(source, current_language())


def in_language(source: str, lang: str, marker: Optional[str] = None) -> str:
    """The source with the other language's comments left out ("en" or "zh"); "both": as written. In Chinese,
    a trailing comment's Chinese takes the English one's place after the code."""
    if lang not in ("en", "zh"):
        return source
    lines = source.splitlines()
    c = Comments(lines, marker)
    roles, heads = c.roles(), c.head_chinese()
    out = []
    for i, line in enumerate(lines):
        role = roles.get(i)
        if role == "head" and lang == "zh":
            out.append(line[:c.col[i]] + c.comment(heads[i]))
        elif role == "under" or role == "en" and lang == "zh" or role == "zh" and lang == "en":
            continue
        else:
            out.append(line)
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def chinese_comments(source: str, marker: Optional[str] = None) -> list[str]:
    """The Chinese comment text of a source, one entry per line (markers stripped)."""
    c = Comments(source.splitlines(), marker)
    return [c.words(i).strip() for i in range(len(c.lines)) if c.own(i) and c.chinese(i)]


# --- the book: mark a highlighted block's lines with language classes ----------------------------------------

_TAG = re.compile(r"(<[^>]+>)")
_VOID = {"br", "img", "wbr", "hr"}


def _lines_of(inner: str) -> list[list[str]]:
    """A block's HTML cut into lines of balanced tokens: an inline element that crosses a line break is closed at
    the end of the line and opened again on the next (pygments' own output never crosses)."""
    lines: list[list[str]] = [[]]
    stack: list[str] = []
    for token in _TAG.split(inner):
        if not token:
            continue
        if token.startswith("<"):
            lines[-1].append(token)
            name = re.match(r"</?\s*([A-Za-z0-9]+)", token)
            if not name or token.endswith("/>") or name.group(1).lower() in _VOID:
                continue
            if token.startswith("</"):
                if stack:
                    stack.pop()
            else:
                stack.append(token)
            continue
        parts = token.split("\n")
        for n, part in enumerate(parts):
            if part:
                lines[-1].append(part)
            if n < len(parts) - 1:
                lines[-1] += [f"</{re.match(r'<([A-Za-z0-9]+)', t).group(1)}>" for t in reversed(stack)]
                lines.append(list(stack))
    return lines


def _text(tokens: Sequence[str]) -> str:
    return "".join(html.unescape(t) for t in tokens if not t.startswith("<"))


def _split(tokens: Sequence[str], column: int) -> tuple[str, str]:
    """The line's HTML before and from the character at `column` (its text, unescaped), tags kept balanced."""
    left: list[str] = []
    right: list[str] = []
    stack: list[str] = []
    seen = 0
    for t in tokens:
        if right:
            right.append(t)
            continue
        if t.startswith("<"):
            left.append(t)
            name = re.match(r"</?\s*([A-Za-z0-9]+)", t)
            if name and not t.endswith("/>") and name.group(1).lower() not in _VOID:
                if t.startswith("</"):
                    if stack:
                        stack.pop()
                else:
                    stack.append(t)
            continue
        text = html.unescape(t)
        if seen + len(text) <= column:
            left.append(t)
            seen += len(text)
            continue
        cut = column - seen
        if cut:
            left.append(html.escape(text[:cut], quote=False))
        left += [f"</{re.match(r'<([A-Za-z0-9]+)', s).group(1)}>" for s in reversed(stack)]
        right += [*stack, html.escape(text[cut:], quote=False)]
        seen = column
    return "".join(left), "".join(right)


def mark_html(inner: str) -> Optional[str]:
    """A <pre> block's inner HTML with its two-language comments marked: English comment lines in
    `<span class="lang-en">`, Chinese ones in `<span class="lang-zh">` (each with its line break), a trailing
    English comment followed by its Chinese (`lang-zh gemm-moved`, shown once a language is chosen) and that
    Chinese's own line marked `lang-zh gemm-under` (shown only without JavaScript). None: nothing to mark."""
    if not CJK.search(inner):
        return None
    wrapper = re.match(r"^(\s*<code\b[^>]*>)(.*)(</code>\s*)$", inner, re.S)  # <pre><code>...</code></pre>
    if wrapper:
        marked = mark_html(wrapper.group(2))
        return None if marked is None else wrapper.group(1) + marked + wrapper.group(3)
    lines = _lines_of(inner)
    texts = [_text(t) for t in lines]
    prefix = CELL_PREFIX.match(texts[0]) if texts else None
    offset = prefix.end() if prefix else 0  # a notebook cell's `my_kernel = r"""` comes before the source
    source = "\n".join([texts[0][offset:], *texts[1:]])
    marker = comment_marker(source)
    if marker is None:
        return None
    c = Comments(source.splitlines(), marker)
    roles = c.roles()
    if not roles:
        return None
    heads = c.head_chinese()
    out = []
    last = len(lines) - 1
    for i, tokens in enumerate(lines):
        end = "\n" if i < last else ""
        role = roles.get(i)
        lead, body = _split(tokens, offset) if i == 0 and offset else ("", "".join(tokens))
        if role in ("en", "zh"):
            out.append(f'{lead}<span class="lang-{role}">{body}{end}</span>')
        elif role == "under":
            out.append(f'{lead}<span class="lang-zh gemm-under">{body}{end}</span>')
        elif role == "head":
            shift = offset if i == 0 else 0
            code, english = _split(tokens, c.col[i] + shift)
            _, chinese = _split(lines[heads[i]], c.col[heads[i]] + (offset if heads[i] == 0 else 0))
            out.append(f'{code}<span class="lang-en">{english}</span>'
                       f'<span class="lang-zh gemm-moved">{chinese}</span>{end}')
        else:
            out.append(lead + body + end)
    return "".join(out)


_PRE = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre>)", re.S)


def mark_page(body: str) -> str:
    """Every <pre> block of a page's HTML through mark_html."""
    def one(m: "re.Match[str]") -> str:
        marked = mark_html(m.group(2))
        return m.group(0) if marked is None else m.group(1) + marked + m.group(3)

    return _PRE.sub(one, body)


class _Shown:
    """The text of marked HTML that a page shows, and its copy button copies, in one language."""

    def __init__(self, lang: str) -> None:
        self.hidden = {"en": ("lang-zh",), "zh": ("lang-en", "gemm-under"), "both": ("gemm-moved",)}[lang]

    def text(self, marked: str) -> str:
        from html.parser import HTMLParser

        out: list[str] = []
        depth = [0]  # inside a hidden element: its nesting depth
        hidden = self.hidden

        class Parser(HTMLParser):
            def handle_starttag(self, tag: str, attrs: list) -> None:
                if tag in _VOID:
                    return
                classes = (dict(attrs).get("class") or "").split()
                if depth[0] or any(h in classes for h in hidden):
                    depth[0] += 1

            def handle_endtag(self, tag: str) -> None:
                if tag not in _VOID and depth[0]:
                    depth[0] -= 1

            def handle_data(self, data: str) -> None:
                if not depth[0]:
                    out.append(data)

        parser = Parser(convert_charrefs=True)
        parser.feed(marked)
        parser.close()
        return "".join(out)


def text_shown(marked: str, lang: str) -> str:
    """What a reader sees of a marked block (mark_html) with the book's switch on `lang` ("both": a page without
    JavaScript, where no language is chosen)."""
    return _Shown(lang).text(marked)
