"""Every number quoted in the prose of book/tuning.md and book/ladder.md, recomputed from the
recorded H200 files (and the level registry), must appear as the exact string in the English cells."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import pytest

from gemm_course import get_level, levels
from gemm_course.measure import autotune, results
from gemm_course.display import glossary
from gemm_course.levels import TUNED_WARP_TILING

REPO = Path(__file__).resolve().parents[1]
L8_64 = {"BM": 64, "BN": 128}


def english(page: str) -> str:
    """The English prose: text after each `+++ {"tags": ["lang-en"]}` line up to the next `+++`."""
    text = (REPO / "book" / page).read_text(encoding="utf-8")
    parts = re.split(r"(?m)^\+\+\+(.*)$", text)
    return glossary.plain("\n".join(body for meta, body in zip(parts[1::2], parts[2::2]) if '"lang-en"' in meta))


def rec(level: str, n: int, **params: Any) -> dict:
    lv = get_level(level)
    return results.find(lv.id, n, **lv.resolve(**params))


def tf(level: str, n: int, **params: Any) -> str:
    return f"{rec(level, n, **params)['tflops']:.2f}"


def pct(level: str, n: int, **params: Any) -> str:
    return f"{rec(level, n, **params)['ratio_to_cublas']:.1%}"


def sweep_rows(level: str, n: int = 4096, **match: Any) -> list[dict]:
    return [r for r in results.sweep_records(level, n) if all(r["params"][k] == v for k, v in match.items())]


def best(level: str, **match: Any) -> dict:
    return max(sweep_rows(level, **match), key=lambda r: r["tflops"])


def blocks(level: str, n: int, **params: Any) -> str:
    lv = get_level(level)
    g = lv.geometry(n, n, n, lv.resolve(**params)).grid
    return str(g[0] * g[1] * g[2])


def FP32() -> list:
    """The pages discuss the fp32 levels (1-8) and their fp32 cuBLAS baseline, not fp16 Tensor Cores."""
    return [r for r in results.recorded() if r["dtype"] == "float32"]


def cublas_range(n: int) -> tuple[str, str]:
    t = [r["tflops"] for r in FP32() if r["level"] == "cublas" and r["M"] == n == r["N"] == r["K"]]
    return f"{min(t):.2f}", f"{max(t):.2f}"


def sm_count() -> str:
    return str(rec("08_warp_tiling", 4096)["provenance"]["sm_count"])


def _gap() -> dict[str, str]:
    r = rec("08_warp_tiling", 8192)
    p = r["provenance"]
    ghz = p["sm_clock_max_mhz"] / 1e3
    peak = p["sm_count"] * 128 * 2 * ghz / 1e3
    cublas = r["tflops"] / r["ratio_to_cublas"]
    return {"clock GHz": f"{ghz:.2f} GHz", "peak": f"{peak:.1f} TFLOPS", "cuBLAS 8192": f"{cublas:.1f} TFLOPS",
            "cuBLAS of peak": f"{cublas / peak:.0%}", "L8 8192": f"{r['tflops']:.1f} TFLOPS",
            "L8 of peak": f"{r['tflops'] / peak:.0%}",
            "FMA per SM per cycle": f"{r['tflops'] * 1e12 / 2 / (p['sm_count'] * ghz * 1e9):.0f} of the 128",
            **_issue_slots()}


def issue_slots(row: dict) -> dict[str, float]:
    """A counter row's scheduler slots (%): issued at all, FFMA share of the instructions (M·N·K/32 FFMA),
    slots with an FFMA, with another instruction, with nothing."""
    m = row["metrics"]
    share = row["M"] * row["N"] * row["K"] / 32 / m["instructions"]
    issue = m["issue_active_pct"]
    return {"issue": issue, "share": share, "ffma": issue * share, "other": issue * (1 - share), "idle": 100 - issue}


def _issue_slots() -> dict[str, str]:
    from gemm_course.measure import counters
    d, c = issue_slots(counters.find("08_warp_tiling")), issue_slots(counters.find("cublas", dtype="float32"))
    return {"slots": (f"its default setting issues in {d['issue']:.0f}% of the cycles, and {d['share']:.0%} of what it "
                      f"issues is FFMA, so an FFMA fills {d['ffma']:.0f}% of its slots; cuBLAS issues in {c['issue']:.0f}% "
                      f"of the cycles, {c['share']:.0%} of it FFMA, and fills {c['ffma']:.0f}%"),
            "slots lost": (f"({d['idle']:.0f}% for Level 8, {c['idle']:.0f}% for cuBLAS) and other instructions "
                           f"({d['other']:.0f}% and {c['other']:.0f}%)")}


def _tuning() -> dict[str, str]:
    b5, b7, b8 = (autotune.recorded_best(x) for x in ("05_register_blocking", "07_vectorized", "08_warp_tiling"))
    worst8 = min(sweep_rows("08_warp_tiling"), key=lambda r: r["tflops"])
    assert worst8["params"] == {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "min_blocks": 1, "group_m": 8,
                                "frag_buffers": 2, "stepped": True, "unroll_k": 0}
    assert not __import__("gemm_course").compile_report("08_warp_tiling", arch="sm_90", **worst8["params"]).spills
    assert b5["params"] == {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8}
    assert b7["params"] == {"BM": 128, "BN": 256, "BK": 8, "TM": 8, "TN": 8}
    assert b8["params"] == {"BM": 64, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "min_blocks": 2, "group_m": 8,
                            "frag_buffers": 1, "stepped": True, "unroll_k": 0}  # a showcase setting timed at 4096³
    in_space = autotune.search_space("08_warp_tiling")  # once: it enumerates every valid setting of the level
    space8 = max((r for r in sweep_rows("08_warp_tiling") if r["params"] in in_space),
                 key=lambda r: r["tflops"])  # "within the search space the best is a 128×256 tile ..."
    assert {k: space8["params"][k] for k in ("BM", "BN", "WM", "WN", "min_blocks")} == dict(BM=128, BN=256, WM=64, WN=64, min_blocks=1)
    assert best("08_warp_tiling", BM=128, BN=256)["tflops"] > best("08_warp_tiling", BM=128, BN=128)["tflops"]
    assert best("05_register_blocking", BM=128, BN=256)["tflops"] < best("05_register_blocking", BM=128, BN=128)["tflops"]
    l8_1024, l8_64_1024 = rec("08_warp_tiling", 1024), rec("08_warp_tiling", 1024, **L8_64)
    at256 = max((r for r in FP32() if r["level"] != "cublas" and r["M"] == 256),
                key=lambda r: r["tflops"])
    assert at256["level"] == "04_double_buffering" and at256["params"]["copy"] == "cp_async"
    at512 = max((r for r in FP32() if r["level"] != "cublas" and r["M"] == 512),
                key=lambda r: r["tflops"])
    assert at512["level"] == "08_warp_tiling" and at512["params"]["BM"] == 64
    l4_512 = rec("04_double_buffering", 512, copy="cp_async")
    return {
        "L5 best": f"{b5['tflops']:.2f} TFLOPS ({b5['ratio_to_cublas']:.1%} of cuBLAS)",
        "L5 worst": f"{min(r['tflops'] for r in sweep_rows('05_register_blocking')):.2f} TFLOPS",
        "L7 best": f"{b7['tflops']:.2f} TFLOPS ({b7['ratio_to_cublas']:.1%})",
        "L7 128x128 BK8": f"{best('07_vectorized', BM=128, BN=128, BK=8)['tflops']:.2f} TFLOPS",
        "L8 best": f"{b8['tflops']:.2f} TFLOPS ({b8['ratio_to_cublas']:.1%})",
        "L8 worst": f"{worst8['tflops']:.2f} TFLOPS",
        "blocks 128x128 at 1024": f"cut into {blocks('05_register_blocking', 1024)} blocks",
        "SMs": f"H200 has {sm_count()} SMs",
        "blocks 128x128 at 256": f"only {blocks('05_register_blocking', 256)} blocks",
        "blocks 64x128 at 1024": f"launches {blocks('08_warp_tiling', 1024, **L8_64)} blocks at 1024³",
        "L8 64x128 1024": f"{l8_64_1024['tflops']:.2f} TFLOPS ({l8_64_1024['ratio_to_cublas']:.1%} of cuBLAS)",
        "L8 128x128 1024": f"{l8_1024['tflops']:.2f} TFLOPS ({l8_1024['ratio_to_cublas']:.1%})",
        "gain at 1024": f"{l8_64_1024['tflops'] / l8_1024['tflops'] - 1:.0%} faster",
        "L8 64x128 4096": f"{tf('08_warp_tiling', 4096, **L8_64)} TFLOPS ({pct('08_warp_tiling', 4096, **L8_64)})",
        "L8 128x128 4096": f"{tf('08_warp_tiling', 4096)} TFLOPS ({pct('08_warp_tiling', 4096)})",
        "L4 256": f"{at256['tflops']:.2f} TFLOPS ({at256['ratio_to_cublas']:.1%} of cuBLAS)",
        "L8 64x128 256": f"{tf('08_warp_tiling', 256, **L8_64)} TFLOPS ({pct('08_warp_tiling', 256, **L8_64)})",
        "L8 64x128 512": f"{at512['tflops']:.2f} TFLOPS ({at512['ratio_to_cublas']:.1%}) against {l4_512['tflops']:.2f} TFLOPS",
        "L4 blocks at 256": f"yields {blocks('04_double_buffering', 256)} blocks at 256³",
        "blocks 128x128 at 2048": f"launches {blocks('08_warp_tiling', 2048)} blocks",
        "L8 2048": f"reaches {tf('08_warp_tiling', 2048)} TFLOPS there",
        "L8 64x128 2048": f"reaches {tf('08_warp_tiling', 2048, **L8_64)} TFLOPS",
        "blocks 64x128 at 2048": f"with {blocks('08_warp_tiling', 2048, **L8_64)} blocks of 128 threads",
        "L8 128x256": (f"{best('08_warp_tiling', BM=128, BN=256)['tflops']:.2f} TFLOPS at 4096³, above its best 128×128 "
                       f"setting ({best('08_warp_tiling', BM=128, BN=128)['tflops']:.2f})"),
        "L8 default 4096 (best)": f"against {tf('08_warp_tiling', 4096)} TFLOPS for its default",
        "L5 128x256": f"{best('05_register_blocking', BM=128, BN=256)['tflops']:.2f} TFLOPS, below its 128×128 counterpart",
        "L5 64x64 vs 128x128 at 256": (f"({tf('05_register_blocking', 256, BM=64, BN=64, TM=4, TN=4)} against "
                                       f"{tf('05_register_blocking', 256)} TFLOPS)"),
        "gain at 1024 (strategy)": f"is {l8_64_1024['tflops'] / l8_1024['tflops'] - 1:.0%} faster in Level 8",
    }


def _ladder() -> dict[str, str]:
    lo1024, hi1024 = cublas_range(1024)
    lo4096, hi4096 = cublas_range(4096)
    l3, l3p = rec("03_coalescing_banks", 4096), rec("03_coalescing_banks", 4096, a_layout="mk_padded")
    occ = __import__("gemm_course").compile_report("04_double_buffering", arch="sm_90").occupancy
    return {
        "cuBLAS 1024": f"between {lo1024} and {hi1024} TFLOPS",
        "cuBLAS 4096": f"between {lo4096} and {hi4096} TFLOPS at 4096³",
        "L1 1024": f"{pct('01_naive', 1024)} of cuBLAS at 1024³",
        "L1 8192": f"{pct('01_naive', 8192)} at 8192³",
        "L2 1024": f"{pct('02_smem_tiling', 1024)} at 1024³",
        "L2 4096": f"{pct('02_smem_tiling', 4096)} at 4096³",
        "L3 1024": f"reaches {pct('03_coalescing_banks', 1024)} at 1024³",
        "L3 padding cost": f"costs {1 - l3p['tflops'] / l3['tflops']:.0%} of the speed at 4096³",
        "L4 1024": f"{pct('04_double_buffering', 1024)} at 1024³, no gain",
        "L4 warps": f"holds {occ.warps_per_sm} resident warps",
        "L5 1024": f"{pct('05_register_blocking', 1024)} at 1024³, where",
        "L5 SMs": f"only {blocks('05_register_blocking', 1024)} of the {sm_count()} SMs",
        "L5 4096": f"{pct('05_register_blocking', 4096)} at 4096³ once",
        "L6 1024": f"{pct('06_fused_epilogue', 1024)} at 1024³",
        "L6 4096": f"{pct('06_fused_epilogue', 4096)} at 4096³ ({tf('06_fused_epilogue', 4096)} TFLOPS, "
                   f"against {tf('05_register_blocking', 4096)} for Level 5)",
        "L7 1024": f"{pct('07_vectorized', 1024)} at 1024³",
        "L7 4096": f"{pct('07_vectorized', 4096)} at 4096³ with the default",
        "L7 BK16 4096": f"reaches {pct('07_vectorized', 4096, BK=16)} at 4096³",
        "L8 ladder": (f"{pct('08_warp_tiling', 1024)} at 1024³, {pct('08_warp_tiling', 4096)} at 4096³ and "
                      f"{pct('08_warp_tiling', 8192)} at 8192³"),
        **{f"seed {lv}": f"{claim:.0%}" for lv, claim in results.SEED_CLAIMS.items()},
        **_gap(),
    }


def _batched() -> dict[str, str]:
    data = next(results.load(f) for f in results.recorded_files() if results.load(f).get("batched"))
    rows = {(r["batch"], r["M"]): r for r in data["batched"]}

    def level(r: dict, bm: int) -> dict:
        return next(x for x in r["levels"] if x["params"]["BM"] == bm)

    ms = lambda t: f"{t['median_ms']:.3f} ms"  # noqa: E731
    a, b, c = rows[1024, 64], rows[256, 256], rows[16, 1024]
    a64, b128, c128 = level(a, 64), level(b, 128), level(c, 128)
    share = lambda r, x: f"{r['cublas_batched']['median_ms'] / x['batched']['median_ms']:.0%}"  # noqa: E731
    assert a64["looped"]["median_ms"] > 100 * a64["batched"]["median_ms"]  # "almost all of that is the host"
    return {
        "batch 64": f"takes {ms(a64['batched'])} against {ms(a['cublas_batched'])} for cuBLAS ({share(a, a64)} of its speed)",
        "batch 64 128x128": f"while the 128×128 default takes {ms(level(a, 128)['batched'])}",
        "batch 64 loop": f"takes {a64['looped']['median_ms']:.2f} ms, {a64['looped']['median_ms'] / a['batch'] * 1000:.0f} µs per product",
        "batch 256": f"256 products of 256³ take {ms(b128['batched'])} against {ms(b['cublas_batched'])} for cuBLAS ({share(b, b128)})",
        "batch 1024": f"16 products of 1024³ {ms(c128['batched'])} against {ms(c['cublas_batched'])} ({share(c, c128)})",
        "batch 1024 loop": f"a loop of 16 launches ({c128['looped']['median_ms']:.2f} ms) costs about twice as much",
    }


PAGES: dict[str, Callable[[], dict[str, str]]] = {"tuning.md": lambda: _tuning() | _batched(), "ladder.md": _ladder}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_quoted_numbers_match_recorded(page: str) -> None:
    prose = english(page)
    missing = {k: v for k, v in PAGES[page]().items() if v not in prose}
    assert not missing, f"book/{page}: these recomputed strings are not in the English prose: {missing}"


def test_english_cells_found() -> None:
    for page in PAGES:
        assert len(english(page)) > 1000


def test_ladder_tensor_core_paragraph_numbers() -> None:
    text = english("ladder.md")
    wmma = rec("09_wmma", 8192, staging="shared", BM=64, BN=64)
    mma = rec("10_mma_pipeline", 8192, stages=4)
    fp32 = [rec(lv.id, 8192, **c) for lv in levels() if not lv.uses_tensor_cores for c in lv.showcase]
    best_fp32 = max(fp32, key=lambda r: r["tflops"])
    assert best_fp32["level"] == "08_warp_tiling"
    tuned = {n: rec("08_warp_tiling", n, **TUNED_WARP_TILING) for n in (4096, 8192)}
    tma = results.find("10_mma_pipeline", 8192, dtype="bfloat16",
                       **get_level("10_mma_pipeline").resolve(stages=3, BN=256, copy="tma"))
    wgmma = rec("11_hopper_wgmma", 8192, step=4)
    four = (wmma, mma, tma, wgmma)
    # each timed with its own clock and its cuBLAS pair's, measured on the SMs in the same run; no shared clock
    assert all("clock64" in r["provenance"]["method"] for r in four)
    assert all(abs(r["sm_clock_mhz"] / r["cublas_paired_sm_clock_mhz"] - 1) > 0.01 for r in four)
    top = wmma["provenance"]["sm_clock_max_mhz"]
    assert all(r["sm_clock_mhz"] < top for r in four)
    clocks = [r["sm_clock_mhz"] for r in four]
    pairs = [r["cublas_paired_sm_clock_mhz"] for r in four]
    cycles = ", ".join(f"{results.in_cycles(r):.1%}" for r in four[:3]) + f" and {results.in_cycles(four[3]):.1%}"
    for claim in (f"reaches {wmma['tflops']:.2f} TFLOPS, {wmma['ratio_to_cublas']:.1%} of cuBLAS fp16",
                  f"reaches {mma['tflops']:.2f} TFLOPS, {mma['ratio_to_cublas']:.1%}",
                  f"already {mma['tflops'] / best_fp32['tflops']:.1f} times the fastest fp32 setting",
                  f"reaches {tma['tflops']:.2f} TFLOPS in bf16, {tma['ratio_to_cublas']:.1%} of cuBLAS's bf16 GEMM",
                  f"reaches {wgmma['tflops']:.2f} TFLOPS in bf16, {wgmma['ratio_to_cublas']:.1%} of cuBLAS's bf16 GEMM",
                  f"the four kernels ran at {min(clocks):.0f} to {max(clocks):.0f} MHz, below the H200's {top} MHz "
                  f"maximum, and their cuBLAS pairs at {min(pairs):.0f} to {max(pairs):.0f} MHz",
                  f"counted in cycles (time × clock on each side) the four fractions are {cycles}",
                  f"reaches {tuned[4096]['ratio_to_cublas']:.1%} at 4096³ and {tuned[8192]['ratio_to_cublas']:.1%} at "
                  f"8192³ ({tuned[8192]['tflops']:.2f} TFLOPS"):
        assert claim in text, claim


def test_ladder_top_rungs_paragraph_numbers() -> None:
    """The one-run comparison of the best settings of Levels 8-11 (record --showcase-only), every timing with the
    kernel's own SM clock and its cuBLAS pair's, measured on the SMs in the same run (NVML only beside them)."""
    text = english("ladder.md")
    F16, B16, F32 = "h200_top_rungs_float16.json", "h200_top_rungs_bfloat16.json", "h200_top_rungs_float32.json"

    def top(level: str, n: int, dtype: str, file: str, **p: Any) -> dict:
        return results.find(level, n, dtype=dtype, file=file, **get_level(level).resolve(**p))

    def cyc(r: dict) -> str:
        return f"{results.in_cycles(r):.1%}"

    l8 = top("08_warp_tiling", 4096, "float32", F32, **TUNED_WARP_TILING, stepped=True)
    l9 = top("09_wmma", 4096, "float16", F16, staging="pipelined", BM=256, BN=128, WN=64, stages=3, BK=64,
             frag_buffers=2)
    l10 = top("10_mma_pipeline", 4096, "float16", F16, stages=4, BN=256, BK=64, frag_buffers=2,
              copy_issue="spread", copy="cp_async_mbarrier")
    tma = top("10_mma_pipeline", 4096, "bfloat16", B16, stages=4, BN=256, copy="tma", frag_buffers=2,
              ldmatrix_issue="spread")
    l11 = {n: top("11_hopper_wgmma", n, "bfloat16", B16, step=6, c_type="input") for n in (4096, 8192)}
    # every file of the comparison carries the kernel's own clock (clock64), NVML beside it
    assert all("clock64" in results.load(results.RESULTS_DIR / f)["provenance"]["method"] for f in (F16, B16, F32))
    assert l8["nvml_sm_clock_mhz"] == l8["cublas_paired_nvml_sm_clock_mhz"] == 1980
    assert f"{l8['sm_clock_mhz']:.0f}" == f"{l8['cublas_paired_sm_clock_mhz']:.0f}" and cyc(l8) == f"{l8['ratio_to_cublas']:.1%}"
    assert (f"(kernel and cuBLAS both at {l8['sm_clock_mhz']:.0f} MHz, so {cyc(l8)} in cycles too)") in text
    tc_ids = ("09_wmma", "10_mma_pipeline", "11_hopper_wgmma")
    tc = [results.clock_range(lv, d) for lv in tc_ids for d in ("float16", "bfloat16")]
    lo, hi = min(c["kernel_min"] for c in tc), max(c["kernel_max"] for c in tc)
    clo, chi = min(c["cublas_min"] for c in tc), max(c["cublas_max"] for c in tc)
    assert hi < 1900 and chi < hi  # below the 1980 MHz maximum, and not at the clock of their pairs
    every = [r for lv in levels() if lv.number >= 8 for r in results.recorded(lv.id)
             if r["level"] == lv.id and r["file"].startswith("h200_top_rungs")]
    tc4 = [r for r in every if r["level"] in tc_ids and r["M"] == 4096]
    nvml = [c for r in tc4 for c in (r["nvml_sm_clock_mhz"], r["cublas_paired_nvml_sm_clock_mhz"])]
    # NVML's side reading is not the clock a kernel runs at: above the clock measured on the SMs in every timing
    assert all(r["nvml_sm_clock_mhz"] > r["sm_clock_mhz"] + 100 and
               r["cublas_paired_nvml_sm_clock_mhz"] > r["cublas_paired_sm_clock_mhz"] + 100 for r in tc4)
    assert (f"the Tensor Core kernels of Levels 9 to 11 ran power-limited at {lo:.0f} to {hi:.0f} MHz and their "
            f"cuBLAS pairs at {clo:.0f} to {chi:.0f} MHz; NVML read {min(nvml):.0f} to {max(nvml):.0f} MHz beside them, "
            "a side reading that is not the clock a kernel runs at") in text
    assert "where every kernel and its cuBLAS ran at 1980 MHz" not in text and "in a later run" not in text
    # at 4096³: none past cuBLAS in time or in cycles; Levels 9 and 10 above their pair's clock in every
    # measurement (both sizes), Level 11's steps on both sides of it
    assert all(r["ratio_to_cublas"] < 1 and results.in_cycles(r) < 1 for r in every if r["M"] == 4096)
    assert all(r["sm_clock_mhz"] > r["cublas_paired_sm_clock_mhz"] for r in every if r["level"] in tc_ids[:2])
    s11 = [r for r in tc4 if r["level"] == "11_hopper_wgmma"]
    assert any(r["sm_clock_mhz"] > r["cublas_paired_sm_clock_mhz"] for r in s11)
    assert any(r["sm_clock_mhz"] < r["cublas_paired_sm_clock_mhz"] for r in s11)
    k11, p11 = [r["sm_clock_mhz"] for r in s11], [r["cublas_paired_sm_clock_mhz"] for r in s11]
    # cuBLAS on its own in bf16 at 4096³, three times in the run: far apart in time, close in cycles
    blas = [r for r in results.load(results.RESULTS_DIR / B16)["records"] if r["level"] == "cublas" and r["M"] == 4096]
    assert len(blas) == 3 and blas[0]["sm_clock_mhz"] > blas[1]["sm_clock_mhz"] > blas[2]["sm_clock_mhz"]
    ms = [r["median_ms"] for r in blas]
    cycles = [r["median_ms"] * r["sm_clock_mhz"] for r in blas]
    assert max(cycles) / min(cycles) - 1 < (max(ms) / min(ms) - 1) / 5
    # the chart's cuBLAS bar: the run's first cuBLAS record at 4096³ (display.runs.compare with file=)
    bar = next(r for r in results.recorded(l11[4096]["level"], files=[results.RESULTS_DIR / B16], dtype="bfloat16")
               if r["level"] == "cublas" and r["M"] == 4096)
    assert bar["median_ms"] == blas[0]["median_ms"]
    # at 8192³: the lowest clock, cuBLAS's wider spread, the one ratio above 100% in time, those above it in cycles
    clocks = [c for f in (B16, F16) for r in results.load(results.RESULTS_DIR / f)["records"] if r["M"] == 8192
              for c in (r["sm_clock_mhz"], r.get("cublas_paired_sm_clock_mhz")) if c]
    spread = [r["q3_ms"] / r["q1_ms"] - 1 for f in (B16, F16) for r in results.load(results.RESULTS_DIR / f)["records"]
              if r["level"] == "cublas" and r["M"] == 8192]
    at8192 = [r for r in every if r["M"] == 8192 and r["level"] in tc_ids]
    above = [r for r in at8192 if r["ratio_to_cublas"] > 1]
    assert len(above) == 1 and above[0]["level"] == "11_hopper_wgmma"
    (a,) = above
    assert a["sm_clock_mhz"] < a["cublas_paired_sm_clock_mhz"]  # the kernel at the lower clock
    assert a["ratio_to_cublas"] - 1 < a["q3_ms"] / a["q1_ms"] - 1  # by less than the spread of its own timings
    past = [r for r in at8192 if results.in_cycles(r) > 1]
    n11 = [r for r in at8192 if r["level"] == "11_hopper_wgmma"]
    assert past and all(r["level"] == "11_hopper_wgmma" for r in past)
    assert max(results.in_cycles(r) for r in past) - 1 < min(spread)  # each by less than cuBLAS's own spread
    for claim in (f"Level 11's steps ran at {min(k11):.0f} to {max(k11):.0f} MHz against their pairs' {min(p11):.0f} "
                  f"to {max(p11):.0f} MHz",
                  "Levels 9 and 10 ran at a higher clock than their cuBLAS pair in every measurement of this run",
                  "None of the course's kernels passes cuBLAS at 4096³, in time (at most "
                  f"{max(r['ratio_to_cublas'] for r in tc4):.1%}) or in cycles (at most "
                  f"{max(results.in_cycles(r) for r in tc4):.1%})",
                  f"cuBLAS's bf16 GEMM took {ms[0]:.3f} ms at {blas[0]['sm_clock_mhz']:.0f} MHz, then {ms[1]:.3f} ms at "
                  f"{blas[1]['sm_clock_mhz']:.0f} MHz and {ms[2]:.3f} ms at {blas[2]['sm_clock_mhz']:.0f} MHz, "
                  f"{max(ms) / min(ms) - 1:.0%} apart in time but {max(cycles) / min(cycles) - 1:.1%} in cycles",
                  f"the clock falls as low as {min(clocks):.0f} MHz and differs",
                  f"(cuBLAS's quartiles lie {min(spread):.1%} to {max(spread):.1%} apart)",
                  f"({l11[8192]['ratio_to_cublas']:.1%} for step 6, {cyc(l11[8192])} in cycles)",
                  f"step {a['params']['step']} in {'bf16' if a['dtype'] == 'bfloat16' else 'fp16'} at "
                  f"{a['ratio_to_cublas']:.1%}, by less than the spread of its own timings, with the kernel at a lower "
                  f"clock than its cuBLAS pair ({a['sm_clock_mhz']:.0f} against {a['cublas_paired_sm_clock_mhz']:.0f} MHz)",
                  f"in cycles {len(past)} of Level 11's {len(n11)} measurements at that size come out above cuBLAS "
                  f"(at most {max(results.in_cycles(r) for r in past):.1%}), each by less than the spread of cuBLAS's "
                  "own timings at that size",
                  f"its cuBLAS bar is cuBLAS's first timing in the run ({bar['tflops']:.2f} TFLOPS, at "
                  f"{bar['sm_clock_mhz']:.0f} MHz)"):
        assert claim in text, claim
    pair = lambda r: f"{r['tflops']:.2f} TFLOPS, {r['ratio_to_cublas']:.1%}"  # noqa: E731
    for claim in (f"reaches {pair(l8)} of cuBLAS SGEMM", f"reaches {pair(l9)} of cuBLAS fp16 ({cyc(l9)} in cycles)",
                  f"reaches {pair(l10)} ({cyc(l10)} in cycles), and its TMA setting {tma['tflops']:.2f} TFLOPS in bf16, "
                  f"{tma['ratio_to_cublas']:.1%} ({cyc(tma)} in cycles)",
                  f"reaches {pair(l11[4096])} of cuBLAS bf16 ({cyc(l11[4096])} in cycles)"):
        assert claim in text, claim


def test_ladder_fp8_paragraph_numbers() -> None:
    """Level 13 beside cuBLASLt and bf16 cuBLAS, at 4096³ in its recorded run."""
    from gemm_course.fp8 import report as fp8_report

    text = english("ladder.md")
    R = fp8_report.recorded_run()["records"]
    at = [r for r in R if r["M"] == r["N"] == r["K"] == 4096]
    lt = fp8_report.fastest_cublaslt(R, (4096,) * 3)
    assert lt["baseline"] == "cublaslt_fast"
    bf16 = next(r for r in at if r["level"] == "cublas" and r["dtype"] == "bfloat16")
    pt = next(r for r in at if r["level"] == fp8_report.LEVEL_ID and r["params"] == {
        "scaling": "per_tensor", "stages": 4, "block_n": 256})
    ov = next(r for r in at if r["level"] == fp8_report.LEVEL_ID and r["params"].get("overlap") is True
              and r["params"].get("splits") == 1)
    assert pt["baseline"] == "cublaslt_fast" and ov["baseline"] == "cublaslt_blockwise"
    assert pt["baseline_ms"] == pytest.approx(lt["median_ms"])
    steps = [r for r in at if r["level"] == fp8_report.LEVEL_ID]
    lo, hi = min(r["sm_clock_mhz"] for r in steps), max(r["sm_clock_mhz"] for r in steps)
    for claim in (f"the level's kernels ran power-limited at {lo:.0f} to {hi:.0f} MHz",
                  f"reaches {lt['tflops']:.1f} TFLOPS, {lt['tflops'] / bf16['tflops']:.2f} times cuBLAS in bf16 "
                  f"({bf16['tflops']:.1f} TFLOPS)",
                  f"per-tensor kernel reaches {pt['tflops']:.1f} TFLOPS, {pt['ratio_to_baseline']:.1%} of cuBLASLt's "
                  "per-tensor GEMM with fast accumulation",
                  f"{ov['tflops']:.1f} TFLOPS, {ov['ratio_to_baseline']:.1%} of cuBLASLt's block-scaled GEMM"):
        assert claim in text, claim


def test_tuning_search_space_against_the_recorded_sweeps() -> None:
    """The record command sweeps the tuner's search space at the tuner's shapes (one definition); the recorded
    files match today's space for Levels 5, 7, 8 and 9, and, at every sweep shape, for Levels 10, 11 and 13."""
    import json

    from gemm_course.measure import autotune
    from gemm_course.__main__ import record_plan

    for lv in ("05_register_blocking", "08_warp_tiling", "09_wmma", "10_mma_pipeline", "11_hopper_wgmma"):
        sweep = [c for configs, sizes, _ in record_plan([lv]) for c in configs if sizes == autotune.sweep_shapes(lv)]
        assert [p for _, p in sweep] == autotune.search_space(lv)
    ids = ("05_register_blocking", "07_vectorized", "08_warp_tiling", "09_wmma")
    cov = {lv: autotune.sweep_coverage(lv) for lv in ids}
    for lv in ("05_register_blocking", "07_vectorized"):
        assert cov[lv]["space"] == cov[lv]["recorded"] == 90 and not cov[lv]["not_recorded"] and not cov[lv]["not_in_space"]
    c8, c9 = cov["08_warp_tiling"], cov["09_wmma"]
    assert c9["space"] == c9["recorded"] and not c9["not_in_space"] and not c9["not_recorded"]
    assert {p["staging"] for p in autotune.search_space("09_wmma")} == {"none", "shared", "pipelined"}
    # "Level 9, the first Tensor Core level ... (the Level 9 page shows it as a heatmap)"
    assert min(lv.number for lv in levels() if lv.uses_tensor_cores) == 9
    nb9 = json.loads((REPO / "notebooks" / "09_wmma.ipynb").read_text(encoding="utf-8"))
    assert any('notebook.sweep("09_wmma"' in "".join(c["source"]) for c in nb9["cells"] if c["cell_type"] == "code")
    # Levels 10, 11, 13: every setting of today's space recorded at every sweep shape, nothing outside it
    for lv in ("10_mma_pipeline", "11_hopper_wgmma", "13_fp8_blockscaled"):
        for shape in autotune.sweep_shapes(lv):
            c = autotune.sweep_coverage(lv, shape)
            assert c["space"] == c["recorded"] > 0 and not c["not_recorded"] and not c["not_in_space"], (lv, shape)
            # one dedicated run per level: the records come from the --sweep-only files
            files = {r["file"] for r in results.sweep_records(c["level"], shape,
                                                             dtype="float8_e4m3" if lv.startswith("13") else None)
                     if r["level"] == c["level"]}
            assert len(files) == 1 and next(iter(files)).startswith("h200_tuning_"), (lv, shape, files)
    assert autotune.sweep_shapes("10_mma_pipeline") == [(4096, 4096, 4096)]
    assert len(autotune.sweep_shapes("11_hopper_wgmma")) == len(autotune.sweep_shapes("13_fp8_blockscaled")) == 7
    l10, l11 = get_level("10_mma_pipeline"), get_level("11_hopper_wgmma")
    assert {p.get("arrive_scope", "cta") for p in autotune.search_space(l11)} == {"cta"}
    assert {l11.resolve(**p)["arrive_scope"] for p in l11.valid_settings()} == {"cta", "cluster"}
    space13 = autotune.search_space("13_fp8_blockscaled")
    assert {p.get("block_m", 128) for p in space13 if p["scaling"] == "blockwise"} == {64, 128}
    assert {p["splits"] for p in space13 if p["scaling"] == "blockwise"} == {1, "auto"}
    text = english("tuning.md")
    for claim in (f"For Levels 5 and 7 that is today's space, setting for setting ({cov['05_register_blocking']['space']} each)",
                  f"its recorded sweep holds all {c9['space']} settings of its space today",
                  f"of the {c8['space']} settings in today's space, {len(c8['not_recorded'])} are not in the recorded sweep, "
                  f"which holds {c8['recorded']} settings, {len(c8['not_in_space'])} of them outside today's space",
                  f"Level 10's holds {len(autotune.search_space(l10))} of its {len(l10.valid_settings())} valid settings",
                  f"Level 11's holds {len(autotune.search_space(l11))} of its {len(l11.valid_settings())}",
                  f"Level 13's holds {len(space13)} (both FP8 kernels at every ring depth that fits",
                  "At every one of those shapes `autotune.sweep_coverage` finds each setting of today's space in the "
                  "recorded sweep, and none outside it"):
        assert claim in text, claim
    assert "Nothing here tunes" not in text
    assert "every setting of the search space, timed with the same harness" not in text
    assert "before the pipelined kernel" not in text


def test_tuning_tensor_core_levels_and_decode_shapes() -> None:
    """The tuning page's section on Levels 10, 11 and 13 at 4096³ and the decode shapes: every number recomputed
    from the dedicated sweep files (autotune.tuned_rows), every verdict checked against them."""
    from gemm_course.levels import DECODE_SHAPES

    text = english("tuning.md")
    r10, = autotune.tuned_rows("10_mma_pipeline")
    b10 = r10["best"]["params"]
    assert (b10["copy"], b10["stages"], b10["BN"], b10["frag_buffers"]) == ("tma", 2, 256, 1)  # the plain TMA kernel
    top8 = sorted(results.sweep_records("10_mma_pipeline", 4096, dtype="float16"), key=lambda r: -r["tflops"])[:8]
    assert {r["params"]["copy"] for r in top8} == {"tma"}
    assert get_level("10_mma_pipeline").resolve()["copy"] != "tma"
    rows11 = autotune.tuned_rows("11_hopper_wgmma")
    at = lambda rows, shape, **g: next(r for r in rows if r["shape"] == shape and r["group"] == g)  # noqa: E731
    sq = (4096, 4096, 4096)
    f32, bf = at(rows11, sq, c_type="float32"), at(rows11, sq, c_type="input")
    assert (f32["best"]["params"]["step"], f32["best"]["params"]["stages"]) == (3, 3) and f32["gain"] < 1.03
    assert (bf["best"]["params"]["step"], bf["best"]["params"]["stages"]) == (6, 4)
    assert bf["best_ratio"] > 1 > bf["best_cycles"]  # ahead in time, behind in cycles: the clocks say why
    long_k = [r for r in rows11 if r["shape"] in DECODE_SHAPES and r["shape"][2] in (7168, 16384)]
    wide = [r for r in rows11 if r["shape"] in DECODE_SHAPES and r["shape"][1] == 24576]
    assert len(long_k) == 8 and len(wide) == 4
    assert {(r["best"]["params"]["step"], r["best"]["params"]["stages"]) for r in long_k} == {(7, 4)}
    assert {(r["best"]["params"]["step"], r["best"]["params"]["stages"]) for r in wide} == {(2, 3), (3, 3)}
    # the model's tile counts at M = 64, N = 2112 (step 4: 128×256 tiles; step 2: 128×128), and at N = 24576
    assert -(-64 // 128) * -(-2112 // 256) == 9 and -(-2112 // 128) == 17 and 24576 // 256 == 96
    rows13 = autotune.tuned_rows("13_fp8_blockscaled")
    fine = [r for r in rows13 if r["group"] == {"scaling": "blockwise"} and r["shape"] in DECODE_SHAPES]
    passed = [r for r in fine if r["best_ratio"] >= 1]
    behind = {r["shape"]: r for r in fine if r["best_ratio"] < 1}
    assert len(passed) == 4 and set(behind) == {(64, 24576, 1536), (128, 24576, 1536)}
    assert all(r["best"]["params"].get("block_m") == 64 and r["best"]["params"].get("staged_scales") for r in fine)
    assert sum(r["best"]["params"]["splits"] > 1 for r in passed) == 3
    sq13 = at(rows13, sq, scaling="blockwise")
    assert sq13["best"]["params"].get("block_m") is None and sq13["default"]["params"]["stages"] == 7
    depth = [r for r in results.sweep_records("13_fp8_blockscaled", (64, 2112, 7168), dtype="float8_e4m3")
             if r["params"].get("block_m") == 64 and r["params"]["splits"] == 4 and 4 <= r["params"]["stages"] <= 9
             and not r["params"].get("staged_scales")]
    assert len(depth) == 6
    per = [r for r in rows13 if r["group"] == {"scaling": "per_tensor"} and r["shape"] in DECODE_SHAPES]
    assert sum(r["best"]["params"]["block_n"] == 128 for r in per) == 5
    same = lambda rows: next(r for r in rows if r["level"] == "13_fp8_blockscaled" and r["M"] == 64 and r["N"] == 2112  # noqa: E731
                             and r["params"].get("block_m") == 64 and r["params"].get("splits") == 4
                             and r["params"]["stages"] == 9 and not r["params"].get("staged_scales"))
    from gemm_course.fp8 import report as fp8_report

    chapter = same(fp8_report.small_m_run()["records"])
    tuned = same(results.sweep_records("13_fp8_blockscaled", (64, 2112, 7168), dtype="float8_e4m3"))
    assert abs(tuned["tflops"] / chapter["tflops"] - 1) < 0.03  # "lands within a few percent across the two"
    rng = lambda xs, f=lambda v: f"{v:.1%}": f"{f(min(xs))} to {f(max(xs))}"  # noqa: E731
    reps = {r["reps"] for shape in autotune.sweep_shapes("13_fp8_blockscaled")
            for r in results.sweep_records("13_fp8_blockscaled", shape, dtype="float8_e4m3")}
    reps |= {r["reps"] for shape in autotune.sweep_shapes("11_hopper_wgmma")
             for r in results.sweep_records("11_hopper_wgmma", shape, dtype="bfloat16")}
    reps |= {r["reps"] for r in results.sweep_records("10_mma_pipeline", 4096, dtype="float16")}
    assert reps == {20}
    for claim in (
            f"the fastest of its {r10['settings']} settings is the plain TMA kernel with 2 stages and 128×256 tiles, "
            f"{r10['best']['tflops']:.1f} TFLOPS ({r10['best_ratio']:.1%} of cuBLAS, {r10['best_cycles']:.1%} in cycles), "
            f"{r10['gain'] - 1:.1%} faster than its default",
            f"Its eight fastest settings all copy with TMA and lie within {top8[0]['tflops'] / top8[-1]['tflops'] - 1:.1%} "
            "of each other, too close for 20 repetitions each to rank them",
            f"with fp32 C the fastest setting is step 3 with 3 stages, {f32['best']['tflops']:.1f} TFLOPS "
            f"({f32['best_ratio']:.1%} of cuBLAS), {f32['gain'] - 1:.1%} ahead of the default",
            f"the fastest, step 6 with 4 stages, is {bf['gain'] - 1:.1%} ahead of the default: "
            f"{bf['best']['tflops']:.1f} TFLOPS, {bf['best_ratio']:.1%} of cuBLAS in time but {bf['best_cycles']:.1%} in "
            f"cycles, because it ran at {bf['best']['sm_clock_mhz']:.0f} MHz and its cuBLAS pair at "
            f"{bf['best']['cublas_paired_sm_clock_mhz']:.0f} MHz",
            f"{rng([r['gain'] - 1 for r in long_k])} faster than the default, yet only "
            f"{rng([r['best_ratio'] for r in long_k])} of cuBLAS in time ({rng([r['best_cycles'] for r in long_k])} in "
            "cycles)",
            "step 4's 128×256 tiles number 9, so 9 of the 132 SMs have work, and step 2's 128×128 tiles number 17",
            f"(96 or more tiles) the fastest reaches {rng([r['best_ratio'] for r in wide])} of cuBLAS",
            f"at four of the six decode shapes, from {rng([r['best_ratio'] for r in passed])}",
            f"reaches {rng([r['default_ratio'] for r in passed])} at those shapes, so tuning adds "
            f"{rng([r['gain'] - 1 for r in passed])}",
            f"lies within {max(r['tflops'] for r in depth) / min(r['tflops'] for r in depth) - 1:.1%} from 4 to 9 stages",
            f"64×24576×1536 ({behind[(64, 24576, 1536)]['best_ratio']:.1%}) and 128×24576×1536 "
            f"({behind[(128, 24576, 1536)]['best_ratio']:.1%}), nor at 4096³ ({sq13['best_ratio']:.1%}, the 128-row "
            f"kernel with {sq13['best']['params']['stages']} stages, {sq13['gain'] - 1:.1%} ahead of its default of "
            f"{sq13['default']['params']['stages']})",
            f"reaches {rng([r['best_ratio'] for r in per])} at the decode shapes and "
            f"{at(rows13, sq, scaling='per_tensor')['best_ratio']:.1%} at 4096³",
            f"up to {max(r['gain'] for r in per) - 1:.1%} faster there than the default 256-column tile",
            f"ran at {tuned['tflops']:.1f} TFLOPS here and {chapter['tflops']:.1f} TFLOPS in Level 13's decode-shape recording"):
        assert claim in text, claim


def test_ladder_card_model_numbers() -> None:
    """'Your card beside the recorded one': the published figures come from models.KNOWN_GPUS (datasheets), the
    SM count also from the recorded runs, and the model's bandwidth ratio is computed from them."""
    from gemm_course import models
    from gemm_course.display import cards

    text = english("ladder.md")
    h100, h200 = models.KNOWN_GPUS["NVIDIA H100 80GB HBM3"], models.KNOWN_GPUS["NVIDIA H200"]
    model = cards.bandwidth_model("NVIDIA H100 80GB HBM3")
    assert model["compute"] == 1.0 and h100.sm_count == h200.sm_count == int(sm_count())
    assert h100.boost_clock_ghz == h200.boost_clock_ghz
    for claim in (f"the same {h200.sm_count} SMs", f"the same {h200.boost_clock_ghz:.2f} GHz maximum clock",
                  f"HBM3 at {h100.memory_bandwidth_gbs / 1000:.2f} TB/s against HBM3e at "
                  f"{h200.memory_bandwidth_gbs / 1000:.1f} TB/s, {model['bandwidth']:.2f} of the bandwidth",
                  f"by up to {1 - model['bandwidth']:.0%} only where"):
        assert claim in text, claim


def test_blackwell_page_h200_sm_count() -> None:
    """book/blackwell.md measures nothing; the one number it takes from the course's recordings is the H200's SMs."""
    text = (REPO / "book" / "blackwell.md").read_text(encoding="utf-8")
    assert f"{sm_count()} SMs, as the course's recordings report them" in text
    assert "not measured here" in text and "未在本课程中实测" in text


def test_ladder_card_measured_numbers() -> None:
    """The H100 run of the fp32 ladder (results/cards/) beside the shipped H200 runs: the largest gap between the two
    cards' fractions of cuBLAS, and the range of their TFLOPS ratio, over the levels' defaults and the table's sizes."""
    from gemm_course.display import cards

    text = english("ladder.md")
    rows = cards.ladder_by_card((1024, 4096, 8192))
    h200 = {r["level"]: r["records"] for r in rows if r["file"] is None}
    h100 = {r["level"]: r["records"] for r in rows if r["file"] and r["gpu"] == "NVIDIA H100 80GB HBM3"}
    assert set(h100) == set(h200) and all(r["gpu"] == "NVIDIA H200" for r in rows if r["file"] is None)
    pairs = [(h100[lv][n], h200[lv][n]) for lv in h200 for n in (1024, 4096, 8192)]
    gap = max(abs(a["ratio_to_cublas"] - b["ratio_to_cublas"]) for a, b in pairs) * 100
    speed = [a["tflops"] / b["tflops"] for a, b in pairs]
    for claim in (f"lies within {gap:.1f} percentage points of the H200's",
                  f"its TFLOPS within {min(speed):.2f} to {max(speed):.2f} times the H200's"):
        assert claim in text, claim
