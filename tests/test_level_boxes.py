"""The "why faster (or not)" box at the top of every level page (Levels 1-11), and Level 1's line-by-line
walk-through of its kernel.

* Each level notebook opens, right after its title, with a twin pair of markdown cells (lang-en, lang-zh),
  each one MyST admonition. Every number a box quotes is recomputed here from the recorded files
  (gemm_course.measure.results.find, the level's registry default at 8192³), and nothing else may appear in it.
* A level is *faster* when its default beats the previous level's default at 8192³ by more than
  FASTER_THAN (5%): twice the 2.5% by which two separate runs of the same computation differ (Level 2's
  tile 32 and Level 3's default are one kernel, recorded in two runs). Where it is not, the box says
  NOT_FASTER_EN / NOT_FASTER_ZH, and only there.
* Box and dropdown titles are in one language each: the English twin's title is English only, the
  Chinese twin's Chinese only (the language switch hides one twin, so a two-language title would show
  the other language's half in each view).
* Seed-guide comparisons are folded into {dropdown} boxes with one title per language.
* Level 1's walk-through names every line of `gemm_naive_cols` (read from the .cu file) as inline code,
  in both languages.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gemm_course import kernel_source
from gemm_course.display import glossary
from gemm_course.measure import results
from gemm_course.levels import levels

REPO = Path(__file__).resolve().parents[1]
SIZE = 8192
FASTER_THAN = 1.05
NOT_FASTER_EN, NOT_FASTER_ZH = "Not faster", "没有更快"
# The box titles, (English, Chinese): Level 1 has no earlier level to beat.
BOX_TITLES = {"start": ("The starting point", "起点"), "faster": ("Why faster", "为什么更快"),
              "not faster": (NOT_FASTER_EN, NOT_FASTER_ZH)}
DROPDOWN_TITLES = {"en": "The guide this course grew from", "zh": "本课程最初依据的指南"}
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
LEVELS = {i + 1: lv for i, lv in enumerate(levels()) if i < 11}


def _notebook(n: int) -> Path:
    return next((REPO / "notebooks").glob(f"{n:02d}_*.ipynb"))


def _cells(n: int) -> list[dict]:
    return json.loads(_notebook(n).read_text(encoding="utf-8"))["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"])


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def box(n: int) -> tuple[str, str]:
    """The (English, Chinese) box: the first markdown cells after the title."""
    cells = [c for c in _cells(n)[1:] if c["cell_type"] == "markdown"]
    en, zh = cells[0], cells[1]
    assert _tags(en) == ["lang-en"] and _tags(zh) == ["lang-zh"], f"Level {n}: the box must be a lang-en/lang-zh twin"
    for cell in (en, zh):
        t = _text(cell)
        assert re.match(r"```\{admonition\} .+\n:class: \w+\n\n", t) and t.rstrip().endswith("```"), (
            f"Level {n}: the box must be one ```{{admonition}} directive")
    return _text(en), _text(zh)


def body(text: str) -> str:
    """The box's prose: without the directive lines, glossary links as their words, code spans dropped."""
    lines = [ln for ln in text.splitlines() if not ln.startswith(("```", ":class:"))]
    return re.sub(r"`[^`]*`", "", glossary.plain("\n".join(lines)))


def quoted_numbers(text: str) -> set[str]:
    """Numbers in the prose; names such as fp16, bf16 or float4 are not numbers, nor is the ³ of 8192³."""
    text = re.sub(r"\b[A-Za-z_]+\d+\w*", "", text)
    return set(re.findall(r"\d+(?:\.\d+)?%?", text))


def rec(n: int, size: int = SIZE, **params) -> dict:
    lv = LEVELS[n]
    return results.find(lv.id, size, **{**lv.resolve(), **params})


def ratio(n: int) -> float:
    return rec(n)["tflops"] / rec(n - 1)["tflops"]


def faster(n: int) -> bool:
    return n > 1 and ratio(n) > FASTER_THAN


def expected(n: int) -> dict[str, str]:
    """Every number Level n's box quotes, formatted from the recorded files and the registry."""
    lv = LEVELS[n]
    e = {"size": str(SIZE), "TFLOPS": f"{rec(n)['tflops']:.2f}", "of cuBLAS": f"{rec(n)['ratio_to_cublas']:.1%}"}
    if n > 1:
        r = ratio(n)
        e |= {"previous level": str(n - 1), "previous TFLOPS": f"{rec(n - 1)['tflops']:.2f}"}
        if r <= FASTER_THAN:
            e["difference"] = f"{r - 1:.1%}"
        elif r < 1.5:
            e["gain"] = f"{r - 1:.0%}"
        else:
            e["times"] = f"{r:.1f}"
    if n == 1:
        rows = results.find(lv.id, SIZE, mapping="rows")
        e |= {"warp": "32", "rows TFLOPS": f"{rows['tflops']:.2f}",
              "rows slower": f"{rec(1)['tflops'] / rows['tflops']:.0f}"}
    if n == 2:
        e["tile"] = str(lv.resolve()["tile"])
    if n == 3:
        strided = rec(3, load="strided")["tflops"]
        padded = rec(3, a_layout="mk_padded")["tflops"]
        e |= {"strided": f"{strided:.2f}", "strided slower": f"{rec(3)['tflops'] / strided:.1f}",
              "padded": f"{padded:.2f}", "padding costs": f"{1 - padded / rec(3)['tflops']:.0%}"}
    if n == 4:
        e |= {"tile": str(lv.resolve()["tile"]), "small size": "4096"}
        for t in (8, 16):
            gain = rec(4, 4096, tile=t)["tflops"] / results.find(LEVELS[2].id, 4096, tile=t)["tflops"] - 1
            e |= {f"tile {t}": str(t), f"tile {t} gain": f"{gain:.0%}"}
    if n == 5:
        p = lv.resolve()
        # an LDS.128 carries 4 floats; a thread's TM + TN values per k take (TM + TN) / 4 of them
        e |= {"TM": str(p["TM"]), "bytes": "16", "FMAs per load": str(p["TM"] * p["TN"] * 4 // (p["TM"] + p["TN"])),
              "Levels 2 to 4": "2", "to 4": "4"}
    if n == 6:
        e["Level 5"] = "5"
    if n == 7:
        e |= {"Level 5": "5", "bytes": "16", "scalar bytes": "4"}
    if n == 8:
        # warp tiling: a lane reads 2 A and 2 B float4 per k (4 LDS.128) for its 8×8 = 64 FMAs
        p = lv.resolve()
        assert (p["WM"] * p["WN"]) // 32 == 64
        e |= {"warp": "32", "bytes": "16", "loads": "4", "FMAs": "64"}
    if n == 9:
        r8 = rec(8)
        e |= {"WMMA shape": "16", "FMAs per instruction": str(16 ** 3),
              "cuBLAS fp16": f"{rec(9)['tflops'] / rec(9)['ratio_to_cublas']:.1f}",
              "Level 8 of cuBLAS": f"{r8['ratio_to_cublas']:.1%}"}
        assert glossary.FACTS["wmma_shape"] == "16×16×16"
    if n == 10:
        e["stages"] = str(lv.resolve()["stages"])
    if n == 11:
        e |= {"step": str(lv.resolve()["step"]), "Level 10 of cuBLAS": f"{rec(10)['ratio_to_cublas']:.1%}"}
        assert lv.dtypes[0] == "bfloat16" and LEVELS[10].dtypes[0] == "float16"  # the box names both types
    return e


def test_levels_3_4_and_6_are_the_ones_not_faster() -> None:
    """The recorded files decide; this pins what the boxes say today, so a new recording that changes the
    answer fails here first. Also pins the rationale of FASTER_THAN: Level 2's tile 32 and Level 3's default are
    the same kernel, and their two runs differ by less than half the threshold."""
    assert [n for n in LEVELS if n > 1 and not faster(n)] == [3, 4, 6]
    assert rec(2)["params"]["tile"] == rec(3)["params"]["tile"]
    assert 2 * (ratio(3) - 1) <= FASTER_THAN - 1


@pytest.mark.parametrize("n", list(LEVELS))
def test_box_numbers_come_from_the_recorded_files(n: int) -> None:
    want = expected(n)
    allowed = {v for v in want.values()} | {str(n)}
    for lang, text in zip(("en", "zh"), box(n)):
        prose = body(text)
        missing = {k: v for k, v in want.items() if v not in quoted_numbers(prose)}
        assert not missing, f"Level {n} ({lang}) box should quote {missing}"
        stray = quoted_numbers(prose) - allowed
        assert not stray, f"Level {n} ({lang}) box quotes {sorted(stray)}, which no recorded number gives"


@pytest.mark.parametrize("n", list(LEVELS))
def test_box_says_not_faster_exactly_where_it_is_not(n: int) -> None:
    en, zh = box(n)
    slow = n > 1 and not faster(n)
    assert (NOT_FASTER_EN.lower() in body(en).lower()) == slow, f"Level {n}: 'not faster' in English"
    assert (NOT_FASTER_ZH in body(zh)) == slow, f"Level {n}: '没有更快' in Chinese"
    if slow:  # said first
        assert body(en).strip().startswith(NOT_FASTER_EN) and body(zh).strip().startswith(NOT_FASTER_ZH)
    kind = "start" if n == 1 else "not faster" if slow else "faster"
    want_en, want_zh = BOX_TITLES[kind]
    title_en, title_zh = (re.match(r"```\{admonition\} (.+)", t).group(1) for t in (en, zh))
    assert title_en == want_en, f"Level {n}: the English box title should be {want_en!r}, not {title_en!r}"
    assert title_zh == want_zh, f"Level {n}: the Chinese box title should be {want_zh!r}, not {title_zh!r}"


def _directive_titles(n: int):
    """(level, language, title) of every admonition and dropdown in Level n's prose twins."""
    for cell in _cells(n):
        langs = [t[len("lang-"):] for t in _tags(cell) if t in ("lang-en", "lang-zh")]
        if cell["cell_type"] != "markdown" or not langs:
            continue
        for m in re.finditer(r"```\{(admonition|dropdown)\} *(.*)", _text(cell)):
            yield langs[0], m.group(1), m.group(2).strip()


@pytest.mark.parametrize("n", list(LEVELS))
def test_titles_are_in_one_language(n: int) -> None:
    """No " · " two-language titles inside a twin: English cells carry no Chinese, Chinese cells no
    English letters (TFLOPS-style names aside, none of the titles needs them)."""
    found = list(_directive_titles(n))
    assert found, f"Level {n}: no box found"
    for lang, kind, title in found:
        assert " · " not in title, f"Level {n} ({lang}) {kind} title {title!r} is in two languages"
        if lang == "en":
            assert not CJK.search(title), f"Level {n}: the English {kind} title {title!r} has Chinese"
        else:
            assert CJK.search(title) and not re.search(r"[A-Za-z]", title), (
                f"Level {n}: the Chinese {kind} title {title!r} should be Chinese only")


@pytest.mark.parametrize("n", list(LEVELS))
def test_seed_guide_comparisons_are_folded(n: int) -> None:
    """A sentence that names the guide this course grew from sits inside a dropdown with the agreed title of
    its language (Level 1's opening paragraph only mentions it in passing and stays open). It is described,
    not nicknamed: a reader does not know what "the seed guide" or 原教程 is."""
    for cell in _cells(n):
        if cell["cell_type"] != "markdown" or "exercise" in _tags(cell):
            continue
        text = _text(cell)
        assert not re.search(r"种子教程|原教程|seed guide|seed's", text), (
            f"Level {n}: describe the guide (本课程最初依据的指南, then 那份指南; the guide this course grew from)")
        open_text = re.sub(r"(?ms)^```\{dropdown\}.*?^```[ \t]*$", "", text)
        lang = "zh" if "lang-zh" in _tags(cell) else "en"
        for m in re.finditer(r"(?ms)^```\{dropdown\}(.*?)$(.*?)^```[ \t]*$", text):
            # a fold of other detail (a long walk-through) has its own title; one that names the guide has the agreed one
            if re.search(r"grew from|[Tt]hat guide|最初依据的|那份指南", m.group(0)):
                assert m.group(1).strip() == DROPDOWN_TITLES[lang], (
                    f"Level {n}: a {lang} dropdown about the guide should be titled {DROPDOWN_TITLES[lang]!r}")
        leftover = [s for s in re.split(r"(?<=[.。])\s*", open_text)
                    if re.search(r"grew from|[Tt]hat guide|最初依据的|那份指南", s) and "mentions in passing" not in s
                    and "一笔带过" not in s]
        assert not leftover, f"Level {n}: unfolded seed-guide comparison: {leftover}"


def _kernel_lines() -> list[str]:
    """The lines of gemm_naive_cols, from its template line to its closing brace, comments removed."""
    src = kernel_source("01_naive").splitlines()
    start = next(i for i, ln in enumerate(src) if "gemm_naive_cols(" in ln) - 2
    assert src[start].startswith("template")
    end = next(i for i in range(start, len(src)) if src[i].startswith("}"))
    lines = [re.sub(r"\s*//.*$", "", ln).strip() for ln in src[start:end + 1]]
    return [ln for ln in lines if ln]


def test_level1_walk_through_names_every_line() -> None:
    cells = _cells(1)
    i = next(i for i, c in enumerate(cells) if c["cell_type"] == "code"
             and _text(c).strip() == 'gc.show_source("01_naive")')
    en, zh = cells[i + 1], cells[i + 2]
    assert _tags(en) == ["lang-en"] and _tags(zh) == ["lang-zh"]
    lines = _kernel_lines()
    assert len(lines) == 13 and lines[-1] == "}"
    for lang, cell in (("en", en), ("zh", zh)):
        text = _text(cell)
        missing = [ln for ln in lines if f"`{ln}`" not in text]
        assert not missing, f"the {lang} walk-through does not name {missing}"
        # prose, not the kernel's comments copied in
        assert "//" not in text
    # the worked example's arithmetic: block (3, 1), thread (5, 2) of a 32×8 block
    p = LEVELS[1].resolve()
    col, row = 3 * p["block_x"] + 5, 1 * p["block_y"] + 2
    for cell in (en, zh):
        text = _text(cell)
        assert f"3 × {p['block_x']} + 5 = {col}" in text and f"1 × {p['block_y']} + 2 = {row}" in text
        assert f"({row}, {col})" in text and f"{p['block_x']} × {p['block_y']} = {p['block_x'] * p['block_y']}" in text
