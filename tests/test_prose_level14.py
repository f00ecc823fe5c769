"""Every number the Level 14 page quotes, recomputed from its recorded run (gemm_course.dsl.lesson.RECORD_FILE), in
both languages."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemm_course.dsl import lesson
from gemm_course.dsl.record import read_record
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "14_triton_gluon.ipynb"
BIG, SMALL = (8192, 8192, 8192), (4096, 4096, 4096)
WIDE_TILED = {"BM": 128, "BN": 256, "BK": 64, "group_m": 8, "num_warps": 8, "num_stages": 3}
LEVEL10_TILED = {"BM": 128, "BN": 128, "BK": 32, "group_m": 8, "num_warps": 8, "num_stages": 4}
WIDE_TMA = {"BM": 128, "BN": 256, "BK": 64, "num_stages": 3, "c_type": "input"}
WIDE_GLUON = {"BM": 128, "BN": 256, "BK": 64, "stages": 3, "c_type": "input"}
LEVEL10_BEST = {"stages": 2, "BN": 256, "copy": "tma"}    # each level's fastest setting in its own chapter
LEVEL11_BEST = {"step": 6, "c_type": "input"}


def _rows():
    path = lesson.record_path()
    if path is None:
        pytest.skip("no Level 14 record named yet (gemm_course.dsl.lesson.RECORD_FILE)")
    return [r for r in read_record(path) if r["status"] == "timed" and r["dtype"] == "bfloat16"]


def _row(rows, shape, kernel, setting):
    return next(r for r in rows if (r["M"], r["N"], r["K"]) == shape and r["kernel"] == kernel and r["setting"] == setting)


def _shapes(rows):
    return list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows))


def claims() -> dict[str, str]:
    """The page's numbers, formatted as the prose gives them (English; the Chinese prose has the same numbers)."""
    rows = _rows()
    big = [r for r in rows if (r["M"], r["N"], r["K"]) == BIG]
    wide, narrow = _row(rows, BIG, "triton_tiled", WIDE_TILED), _row(rows, BIG, "triton_tiled", LEVEL10_TILED)
    l10 = _row(rows, BIG, "10_mma_pipeline", {})
    tma, gluon = _row(rows, BIG, "triton_hopper", WIDE_TMA), _row(rows, BIG, "gluon", WIDE_GLUON)
    l11, l11_bf16 = _row(rows, BIG, "11_hopper_wgmma", {}), _row(rows, BIG, "11_hopper_wgmma", {"c_type": "input"})
    paired = [r["tflops"] / r["ratio_to_cublas"] for r in big if r["kernel"] != "cublas"]
    clocks = [r["sm_clock_mhz"] for r in big]
    beat = [_row(rows, s, "triton_hopper", WIDE_TMA)["tflops"] / _row(rows, s, "11_hopper_wgmma", {"c_type": "input"})["tflops"]
            for s in _shapes(rows)]
    small_tma = _row(rows, SMALL, "triton_hopper", WIDE_TMA)
    small_l11 = _row(rows, SMALL, "11_hopper_wgmma", {"c_type": "input"})
    step5 = _row(rows, BIG, "11_hopper_wgmma", {"step": 5})
    assert abs(step5["tflops"] / l11["tflops"] - 1) < 0.02, "the prose says step 5 ran level with the default"
    l10_best, l11_best = _row(rows, BIG, "10_mma_pipeline", LEVEL10_BEST), _row(rows, BIG, "11_hopper_wgmma", LEVEL11_BEST)
    against_best = {kernel: [_row(rows, s, kernel, setting)["tflops"] / _row(rows, s, "11_hopper_wgmma", LEVEL11_BEST)["tflops"]
                             for s in _shapes(rows)] for kernel, setting in (("triton_hopper", WIDE_TMA), ("gluon", WIDE_GLUON))}
    return {
        "tiled": f"{wide['tflops']:.1f} TFLOPS with its larger tile (128×256×64, 3 stages), {wide['ratio_to_cublas']:.1%} "
                 f"of cuBLAS, and {narrow['tflops']:.1f} TFLOPS ({narrow['ratio_to_cublas']:.1%}) with Level 10's tile",
        "level10": f"Level 10 at its default setting reached {l10['tflops']:.1f} TFLOPS ({l10['ratio_to_cublas']:.1%})",
        "tiled_over_10": f"{wide['tflops'] / l10['tflops']:.2f}×",
        "hopper": f"The Hopper Triton kernel with bf16 C reached {tma['tflops']:.1f} TFLOPS ({tma['ratio_to_cublas']:.1%} "
                  f"of cuBLAS), the Gluon kernel {gluon['tflops']:.1f} TFLOPS ({gluon['ratio_to_cublas']:.1%})",
        "level11": f"{l11['tflops']:.1f} TFLOPS ({l11['ratio_to_cublas']:.1%}) with fp32 C and {l11_bf16['tflops']:.1f} "
                   f"TFLOPS ({l11_bf16['ratio_to_cublas']:.1%}) with bf16 C",
        "spread": f"cuBLAS measured {min(paired):.1f} to {max(paired):.1f} TFLOPS across its pairings",
        "clocks": f"SM clocks of {min(clocks):.0f} to {max(clocks):.0f} MHz",
        "beat": f"{min(beat):.2f}× to {max(beat):.2f}×",
        "shapes": f"At all {len(beat)} recorded shapes",
        "small": f"{small_tma['tflops']:.1f} TFLOPS against {small_l11['tflops']:.1f}",
        "level10_best": f"Level 10's fastest setting, with TMA copies, reached {l10_best['tflops']:.1f} TFLOPS "
                        f"({l10_best['ratio_to_cublas']:.1%})",
        "level11_best": f"at its chapter's fastest setting (step 6, bf16 C) Level 11 reached {l11_best['tflops']:.1f} "
                        f"TFLOPS ({l11_best['ratio_to_cublas']:.1%})",
        "tma_vs_best": f"{min(against_best['triton_hopper']):.2f}× to {max(against_best['triton_hopper']):.2f}× as fast "
                       f"(at 8192³, {tma['tflops']:.1f} TFLOPS against {l11_best['tflops']:.1f})",
        "gluon_vs_best": f"the Gluon kernel {min(against_best['gluon']):.2f}× to {max(against_best['gluon']):.2f}×",
        "step5": f"ran level with the default ({step5['tflops']:.1f} TFLOPS against {l11['tflops']:.1f} at 8192³, both "
                 "with fp32 C)",
    }


def test_the_english_prose_quotes_the_recorded_run():
    assert_prose_says(claims().values(), _english_prose(NOTEBOOK))


def test_the_chinese_prose_has_the_same_numbers():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    chinese = "\n".join("".join(c["source"]) for c in nb["cells"] if "lang-zh" in c.get("metadata", {}).get("tags", []))
    import re

    for claim in claims().values():
        for number in re.findall(r"\d+(?:\.\d+)?", claim):
            if number not in ("128", "256", "64", "3", "10", "32", "16"):
                assert number in chinese, f"the Chinese prose should give {number} (from {claim!r})"


def test_the_record_shows_what_the_prose_compares():
    """The comparison in the prose is within one run and one card: every quoted row is from the named file."""
    rows = _rows()
    assert len({(r["gpu"], r["date"], r["file"]) for r in rows}) == 1
    assert all(r["ratio_to_cublas"] and r["sm_clock_mhz"] for r in rows)


def test_the_ladder_page_quotes_the_same_run():
    """book/ladder.md's side branch: the same numbers as Level 14's page, from the same file, in both languages."""
    import re

    from test_prose_pages import english

    c = claims()
    rows = _rows()
    wide = _row(rows, BIG, "triton_tiled", WIDE_TILED)
    l11_bf16 = _row(rows, BIG, "11_hopper_wgmma", {"c_type": "input"})
    quoted = [c["hopper"], c["spread"], c["level11_best"],
              f"the tiled Triton kernel reached {wide['tflops']:.1f} TFLOPS, {wide['ratio_to_cublas']:.1%} of cuBLAS",
              f"Level 11 at its default setting {l11_bf16['tflops']:.1f} TFLOPS ({l11_bf16['ratio_to_cublas']:.1%}) with bf16 C"]
    assert_prose_says(quoted, english("ladder.md"))
    text = (ROOT / "book" / "ladder.md").read_text(encoding="utf-8")
    chinese = text[text.index("### 一条支线"):]
    for claim in quoted:
        for number in re.findall(r"\d+\.\d+", claim):
            assert number in chinese, f"book/ladder.md's Chinese side branch should give {number}"


def counter_claims() -> dict[str, str]:
    """The Deeper section's counter numbers, formatted as its English prose gives them, from lesson.COUNTERS_FILE."""
    from gemm_course.dsl.counters import find_row, read_counters
    from gemm_course.measure.results import RESULTS_DIR

    if lesson.COUNTERS_FILE is None:
        pytest.skip("no Level 14 counters named yet (gemm_course.dsl.lesson.COUNTERS_FILE)")
    rows = read_counters(RESULTS_DIR / lesson.COUNTERS_FILE)
    m = {name: find_row(rows, kernel, setting)["metrics"] for name, kernel, setting in (
        ("l10", "10_mma_pipeline", {}), ("tiled", "triton_tiled", WIDE_TILED), ("l11", "11_hopper_wgmma", {"c_type": "input"}),
        ("step6", "11_hopper_wgmma", LEVEL11_BEST), ("tma", "triton_hopper", WIDE_TMA), ("gluon", "gluon", WIDE_GLUON),
        ("cublas", "cublas", {}))}
    million = lambda v: f"{v / 1e6:.1f} million"  # noqa: E731
    return {
        "instructions": f"The tiled Triton kernel executed {million(m['tiled']['instructions'])} warp instructions where "
                        f"Level 10 executed {million(m['l10']['instructions'])}",
        "busy": f"busy {m['tiled']['tensor_pipe_pct']:.1f}% of the time against {m['l10']['tensor_pipe_pct']:.1f}%",
        "ldmatrix": f"({million(m['l10']['ldmatrix_instructions'])} of its instructions)",
        "pipe": f"goes from {m['l11']['tensor_pipe_pct']:.1f}% to {m['tma']['tensor_pipe_pct']:.1f}% busy",
        "stores": f"with {m['l11']['global_store_requests']:,.0f} global store instructions, the Triton kernel with "
                  f"{'none' if m['tma']['global_store_requests'] == 0 else int(m['tma']['global_store_requests'])}",
        "step6": f"as step 6 does ({m['step6']['tensor_pipe_pct']:.1f}% busy)",
        "l2": f"{million(m['tma']['l2_read_sectors'])} against {million(m['l11']['l2_read_sectors'])} for Level 11's default "
              f"and {million(m['step6']['l2_read_sectors'])} for step 6",
        "gluon": f"The Gluon kernel executed the fewest instructions ({million(m['gluon']['instructions'])}) at "
                 f"{m['gluon']['tensor_pipe_pct']:.1f}% busy, and cuBLAS's kernel ran at {m['cublas']['tensor_pipe_pct']:.1f}%",
    }


def test_the_counters_prose_quotes_the_recorded_counters():
    """Every counter the Deeper section quotes, in English as written and in Chinese by its numbers; step 6 and the
    Triton kernel store C with no global store instruction (what the prose says a TMA store means)."""
    import re

    claims = counter_claims()
    assert_prose_says(claims.values(), _english_prose(NOTEBOOK))
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    chinese = "\n".join("".join(c["source"]) for c in nb["cells"] if "lang-zh" in c.get("metadata", {}).get("tags", []))
    section = chinese[chinese.index("### 计数器说明了什么"):]
    for claim in claims.values():
        for number in re.findall(r"\d[\d,]*(?:\.\d+)?", claim):
            if number not in ("6", "10", "11"):
                assert number in section, f"the Chinese counters section should give {number} (from {claim!r})"
