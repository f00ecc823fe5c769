"""The glossary (book/glossary.md, generated from gemm_course/glossary.py) and the links to it.

* The page is exactly what ``gemm_course.glossary.render_page()`` writes (``python -m
  gemm_course.glossary`` regenerates it), so its labels, terms and definitions have one source.
* Every entry has an English and a Chinese term and definition, and a stable label.
* In every chapter of CHAPTERS, the first use of each glossary term in the English prose, and the
  first in the Chinese prose, is a link ``{ref}`words <glossary-slug>```. ``python -m
  gemm_course.glossary link CHAPTER...`` adds the missing links (and nothing else).

To add a chapter, append its path to CHAPTERS and run the link command on it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from gemm_course import glossary, models, results
from test_bilingual import CJK, read_myst  # tests/ is on sys.path (rootdir-less test modules)

REPO = Path(__file__).resolve().parents[1]

# The chapters whose prose links its first uses to the glossary. Extend this list when a chapter is
# ready (00_cuda_basics, 08-11, gpu_primer, sass_cheatsheet are still being written).
CHAPTERS = [
    "book/intro.md",
    "book/gpu_primer.md",
    "book/gemm_basics.md",
    "book/how_to_run.md",
    "notebooks/00_cuda_basics.ipynb",
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
    "notebooks/12_multi_gpu.ipynb",
    "notebooks/13_fp8_blockscaled.ipynb",
    "book/sass_cheatsheet.md",
]

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def _page() -> str:
    return glossary.PAGE.read_text(encoding="utf-8")


# --- the page and the module -------------------------------------------------------------------------


def test_page_is_generated_from_the_module() -> None:
    assert _page() == glossary.render_page(), (
        "book/glossary.md differs from gemm_course/glossary.py; run `python -m gemm_course.glossary`")


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
        assert 0 <= t.level <= 13, t.slug
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
        pytest.fail(f"{chapter} ({lang}): fix with `python -m gemm_course.glossary link {chapter}`\n"
                    + "\n".join(problems), pytrace=False)


def test_chapters_exist() -> None:
    missing = [c for c in CHAPTERS if not (REPO / c).is_file()]
    assert not missing, missing


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


def test_plain_shows_what_the_reader_reads() -> None:
    assert glossary.plain("the 32 {ref}`lanes <glossary-lane>` of a {ref}`线程束 <glossary-warp>`") == \
        "the 32 lanes of a 线程束"
