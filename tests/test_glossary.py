"""The glossary (book/glossary.md, generated from gemm_course/display/glossary.py) and the links to it.

* The page is exactly what ``gemm_course.display.glossary.render_page()`` writes (``python -m
  gemm_course.display.glossary`` regenerates it), so its labels, terms and definitions have one source.
* Every entry has an English and a Chinese term and definition, and a stable label.
* Each entry's "first used" page is found in the pages (``glossary.first_used``: the first page in the
  reading order of _toc.yml whose prose uses the term), and the page shows it; recounted here by a scan
  of its own, so a page edit that moves a first use makes the stale glossary page fail.
* Every glossary link's words are a spelling of the entry it points to (``{ref}`显存 <glossary-global-memory>```
  fails: 显存 is device memory).
* In every chapter of CHAPTERS, the first use of each glossary term in the English prose, and the
  first in the Chinese prose, is a link ``{ref}`words <glossary-slug>```. ``python -m
  gemm_course.display.glossary link CHAPTER...`` adds the missing links (and nothing else).

To add a chapter, append its path to CHAPTERS and run the link command on it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from gemm_course import models
from gemm_course.display import glossary
from gemm_course.measure import results
from test_bilingual import CJK, read_myst  # tests/ is on sys.path (rootdir-less test modules)

REPO = Path(__file__).resolve().parents[1]

# The chapters whose prose links its first uses to the glossary: every page but the glossary, in the reading
# order of _toc.yml (test_chapters_follow_the_reading_order). A new page goes here too.
CHAPTERS = [
    "book/intro.md",
    "notebooks/00_cuda_basics.ipynb",
    "book/gpu_primer.md",
    "book/gemm_basics.md",
    "book/how_to_run.md",
    "notebooks/01_naive.ipynb",
    "notebooks/02_smem_tiling.ipynb",
    "notebooks/03_coalescing_banks.ipynb",
    "notebooks/04_double_buffering.ipynb",
    "notebooks/05_register_blocking.ipynb",
    "notebooks/06_fused_epilogue.ipynb",
    "notebooks/07_vectorized.ipynb",
    "notebooks/08_warp_tiling.ipynb",
    "notebooks/09_wmma.ipynb",
    "notebooks/10_mma_pipeline.ipynb",
    "notebooks/11_hopper_wgmma.ipynb",
    "book/tuning.md",
    "book/ladder.md",
    "book/blackwell.md",
    "notebooks/12_multi_gpu.ipynb",
    "notebooks/13_fp8_blockscaled.ipynb",
    "notebooks/14_triton_gluon.ipynb",
    "book/sass_cheatsheet.md",
    "book/command_line.md",
]

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def _page() -> str:
    return glossary.PAGE.read_text(encoding="utf-8")


# --- the page and the module -------------------------------------------------------------------------


def test_page_is_generated_from_the_module() -> None:
    assert _page() == glossary.render_page(), (
        "book/glossary.md differs from gemm_course/display/glossary.py; run `python -m gemm_course.display.glossary`")


def test_labels_match_the_module() -> None:
    slugs = [t.slug for t in glossary.TERMS]
    assert len(slugs) == len(set(slugs)), "two terms share a slug"
    assert all(SLUG.match(s) for s in slugs), [s for s in slugs if not SLUG.match(s)]
    assert glossary.page_labels(_page()) == [f"glossary-{s}" for s in slugs]


def test_every_entry_has_both_languages() -> None:
    for t in glossary.TERMS:
        assert t.en.strip() and t.zh.strip(), t.slug
        en, zh = t.definition("en"), t.definition("zh")
        assert en.strip() and not CJK.search(en), f"{t.slug}: English definition"
        assert CJK.search(zh), f"{t.slug}: the Chinese definition has no Chinese"
        assert "{" not in en + zh, f"{t.slug}: unfilled placeholder"
    # On the page: each label opens an English cell whose next cell is its Chinese twin.
    cells = read_myst(glossary.PAGE)
    by_label = {}
    for i, cell in enumerate(cells):
        for label in glossary.page_labels(cell.source):
            by_label[label] = i
    for t in glossary.TERMS:
        i = by_label[t.label]
        en, zh = cells[i], cells[i + 1]
        assert en.lang == "lang-en" and zh.lang == "lang-zh", t.slug
        assert f"### {t.en}" in en.source and t.zh in en.source, t.slug
        assert zh.source.startswith(f"### {t.zh}") and t.en in zh.source and CJK.search(zh.source), t.slug


def test_each_spelling_belongs_to_one_term() -> None:
    for lang in glossary.LANGS:
        owner: dict[str, str] = {}
        for t in glossary.TERMS:
            for form in (t.en_forms() if lang == "en" else t.zh_forms()):
                key = form.lower()
                assert owner.setdefault(key, t.slug) == t.slug, (
                    f"{lang} spelling {form!r} belongs to both {owner[key]!r} and {t.slug!r}")


def test_each_term_finds_itself() -> None:
    for t in glossary.TERMS:
        for lang, forms in (("en", t.en_forms()), ("zh", t.zh_forms())):
            for form in forms:
                found = glossary.find_terms(f"({form})", lang)
                assert found and found[0][2] == t.slug, f"{lang} {form!r} finds {found}"


@pytest.mark.parametrize("text, lang, slugs", [
    ("Each warp of a thread block has 32 threads", "en", ["warp", "block", "thread"]),
    ("bank conflicts in shared-memory tiles", "en", ["bank-conflict", "shared-memory", "tile"]),
    ("Register blocking keeps registers busy; LDS.128 feeds FFMAs", "en",
     ["register-blocking", "register", "ld-st", "ffma"]),
    ("the fp32 lanes of an SM", "en", ["sm"]),  # NOT_TERMS: FP32 units, not warp lanes
    ("线程束中的线程，线程块里的 bank 冲突", "zh", ["warp", "thread", "block", "bank-conflict"]),
    ("寄存器分块与寄存器，共享内存分块", "zh", ["register-blocking", "register", "shared-memory", "tile"]),
    ("按线程束组织工作，而线程束组有 4 个线程束", "zh", ["warp", "warpgroup", "warp"]),
])
def test_matching(text: str, lang: str, slugs: list[str]) -> None:
    assert [slug for _, _, slug, _ in glossary.uses(text, lang)] == slugs


def test_facts_come_from_the_package() -> None:
    f = glossary.FACTS
    h200 = models.KNOWN_GPUS["NVIDIA H200"]
    assert f["warp"] == "32" == str(models.arch_limits("sm_90").warp_size)
    assert f["banks"] == str(models.BANKS) and f["sector"] == str(models.SECTOR_BYTES)
    assert int(f["line"]) == int(f["sectors_per_line"]) * models.SECTOR_BYTES == 128
    assert int(f["bank_bytes"]) == int(f["fp32_bytes"]) == np.dtype(np.float32).itemsize
    assert int(f["half_bytes"]) == np.dtype(np.float16).itemsize
    assert int(f["vec_bytes"]) == int(f["vec_floats"]) * np.dtype(np.float32).itemsize
    assert int(f["wg_threads"]) == int(f["wg_warps"]) * int(f["warp"])
    assert f["h200_sms"] == str(h200.sm_count) == str(results.find("07_vectorized", 8192)["provenance"]["sm_count"])
    assert f["h200_tbs"] == "4.8" and f["h200_fp32"] == f"{h200.fp32_peak_tflops:.0f}"
    assert f["h200_ridge"] == f"{h200.ridge_point:.0f}"
    assert f["wave_blocks"] == str(2 * h200.sm_count)
    best = max(r["tflops"] for r in results.recorded("11_hopper_wgmma")
               if r["level"] == "11_hopper_wgmma" and r["dtype"] == "bfloat16")
    assert f["warp_last"] == "31"
    assert f["l11_tflops"] == f"{best:.0f}"


# --- the chapters ------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", glossary.LANGS)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_first_use_links_to_the_glossary(chapter: str, lang: str) -> None:
    path = REPO / chapter
    problems = glossary.first_use_problems(glossary.chapter_cells(path, lang), lang)
    if problems:
        pytest.fail(f"{chapter} ({lang}): fix with `python -m gemm_course.display.glossary link {chapter}`\n"
                    + "\n".join(problems), pytrace=False)


def test_chapters_exist() -> None:
    missing = [c for c in CHAPTERS if not (REPO / c).is_file()]
    assert not missing, missing


def test_chapters_follow_the_reading_order() -> None:
    order = [p.relative_to(REPO).as_posix() for p in glossary.reading_order()]
    assert order == CHAPTERS, "CHAPTERS should be every page but the glossary, in the order of _toc.yml"
    assert order[0] == "book/intro.md" and "book/glossary.md" not in order


def _first_pages(lang: str) -> dict[str, str]:
    """An independent recount: walk the pages of _toc.yml in order, and in each page's prose cells of one
    language take every term (plain mention or link) the first time it shows; then, for terms that no
    prose names, their first appearance in inline code."""
    toc = (REPO / "_toc.yml").read_text(encoding="utf-8")
    names = [re.search(r"(?m)^root:\s*(\S+)", toc).group(1)] + re.findall(r"(?m)^\s*-\s*file:\s*(\S+)", toc)
    first: dict[str, str] = {}
    code_first: dict[str, str] = {}
    for name in names:
        page = next(REPO / (name + e) for e in (".ipynb", ".md") if (REPO / (name + e)).is_file())
        if page == glossary.PAGE:
            continue
        for cell in glossary.chapter_cells(page, lang):
            for _, _, slug, _ in glossary.uses(cell, lang):
                first.setdefault(slug, name)
            for code in re.findall(r"`([^`\n]+)`", cell):
                for _, _, slug in glossary.find_terms(code, lang):
                    code_first.setdefault(slug, name)
    return {**code_first, **first}


@pytest.mark.parametrize("lang", glossary.LANGS)
def test_first_used_is_found_in_the_pages(lang: str) -> None:
    """Both twins of an entry show the earlier of the two languages' first uses."""
    toc_order = {p.relative_to(REPO).with_suffix("").as_posix(): i for i, p in enumerate(glossary.reading_order())}
    per_lang = [_first_pages(other) for other in glossary.LANGS]
    expected = {slug: min((f[slug] for f in per_lang if slug in f), key=toc_order.__getitem__)
                for slug in set().union(*per_lang)}
    cells = read_myst(glossary.PAGE)
    field = "**first used:**" if lang == "en" else "**首次出现：**"
    shown = {}
    for i, cell in enumerate(cells):
        for label in glossary.page_labels(cell.source):
            entry = cells[i] if lang == "en" else cells[i + 1]
            m = re.search(re.escape(field) + r" \{doc\}`[^`<]*</([^>]+)>`", entry.source)
            shown[label[len(glossary.LABEL_PREFIX):]] = m and m.group(1)
    wrong = [f"{slug}: page says {shown.get(slug)}, the pages say {page}" for slug, page in expected.items()
             if shown.get(slug) != page]
    unused = [t.slug for t in glossary.TERMS if t.slug not in expected]
    assert not wrong, "stale 'first used' (run `python -m gemm_course.display.glossary`):\n" + "\n".join(wrong)
    assert not unused, f"terms no page uses: {unused}"


def test_first_use_pages_link_the_term() -> None:
    """Where the glossary says a term is first used in prose, that page links it (in both languages)."""
    for lang in glossary.LANGS:
        for t in glossary.TERMS:
            page = glossary.first_used(t.slug)
            prose = [u for cell in glossary.chapter_cells(page, lang) for u in glossary.uses(cell, lang)
                     if u[2] == t.slug]
            if prose:
                assert prose[0][3], f"{t.slug} ({lang}): its first use on {page.name} is not a link"


def _all_pages() -> list[Path]:
    return sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "book").glob("*.md"))


def _text(path: Path) -> str:
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text(encoding="utf-8"))
        return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return path.read_text(encoding="utf-8")


def test_every_glossary_link_has_an_entry() -> None:
    known = {t.slug for t in glossary.TERMS}
    bad = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in _all_pages()
           for m in re.finditer(r"<glossary-([^>`]+)>`", _text(p)) if m.group(1) not in known]
    assert not bad, "links to glossary labels that do not exist:\n" + "\n".join(bad)


def test_every_link_names_its_entry() -> None:
    """The words of a glossary link are a spelling of the term it points to, in the page's language."""
    bad = []
    for p in _all_pages():
        if p == glossary.PAGE:
            continue
        for lang in glossary.LANGS:
            for cell in glossary.chapter_cells(p, lang):
                for m in re.finditer(r"\{ref\}`([^`<]*?)\s*<glossary-([a-z0-9-]+)>`", cell):
                    words, slug = m.group(1), m.group(2)
                    found = {s for _, _, s in glossary.find_terms(f" {words} ", lang)}
                    if slug not in found:
                        bad.append(f"{p.relative_to(REPO)} ({lang}): {m.group(0)} names {sorted(found) or 'nothing'}")
    assert not bad, "glossary links whose words are another term (or none):\n" + "\n".join(bad)


def test_plain_shows_what_the_reader_reads() -> None:
    assert glossary.plain("the 32 {ref}`lanes <glossary-lane>` of a {ref}`线程束 <glossary-warp>`") == \
        "the 32 lanes of a 线程束"
