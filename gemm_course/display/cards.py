"""The fp32 ladder on more than one card: the shipped H200 set beside the same `record` command run on another GPU.

Another card's files live in gemm_course/results/cards/, outside ``results.recorded_files()``: every lookup without a
file name, and every number the pages quote from the shipped set, stays the H200's. This module reads them by name.

A model, not a measurement, says how far another card should move a level's ratio to cuBLAS
(:func:`bandwidth_model`): a level whose time goes to the SMs' arithmetic moves with SM count × clock, as cuBLAS's
SGEMM does, so its ratio stays; a level whose time goes to device memory moves with the memory bandwidth, so its
ratio moves by the ratio of the two cards' bandwidths.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from gemm_course import models
from gemm_course.bilingual.text import Shown, Table, say, show as show_text, text
from gemm_course.measure import results

CARDS_DIR = results.RESULTS_DIR / "cards"


def card_files() -> list[Path]:
    """The result files of other cards, in gemm_course/results/cards/, by name."""
    return sorted(CARDS_DIR.glob("*.json"))


def ladder_by_card(sizes: Sequence[int] = (1024, 4096, 8192)) -> list[dict[str, Any]]:
    """Each fp32 level's default setting on every recorded card: first the shipped set (the H200), then each file of
    results/cards/. Per size n³ the record (TFLOPS, fraction of the cuBLAS timed in the same run on that card), or
    None where that card has none."""
    from gemm_course.levels import levels

    sources: list[Optional[str]] = [None, *(f"{CARDS_DIR.name}/{p.name}" for p in card_files())]
    rows = []
    for file in sources:
        for lv in levels():
            if lv.uses_tensor_cores:  # the fp32 ladder: one cuBLAS baseline
                continue
            records: dict[int, Optional[dict]] = {}
            for n in sizes:
                try:
                    records[n] = results.find(lv.id, n, file=file, **lv.resolve())
                except (KeyError, FileNotFoundError):
                    records[n] = None
            found = [r for r in records.values() if r]
            if found:
                rows.append({"level": lv.id, "gpu": found[0]["provenance"]["gpu"], "file": file, "records": records})
    return rows


def bandwidth_model(card: str, reference: str = "NVIDIA H200") -> dict[str, float]:
    """The datasheet ratios (models.KNOWN_GPUS) of `card` to `reference`: SMs × clock (what moves a compute-bound
    kernel and cuBLAS alike) and memory bandwidth (what moves a memory-bound one)."""
    a, b = models.KNOWN_GPUS[card], models.KNOWN_GPUS[reference]
    return {"compute": (a.sm_count * a.boost_clock_ghz) / (b.sm_count * b.boost_clock_ghz),
            "bandwidth": a.memory_bandwidth_gbs / b.memory_bandwidth_gbs}


def _card_line(records: list[dict[str, Any]]) -> tuple[str, str]:
    """One card's provenance (en, zh): the GPU, versions and date of its run, or of its runs (one `record` per level)."""
    lines = list(dict.fromkeys(results.provenance_line(r) for r in records))
    if len(lines) == 1:
        return lines[0], lines[0]
    p = records[0]["provenance"]
    dates = sorted({r["provenance"]["date"][:10] for r in records})
    gpu = (f"{p['gpu']} (sm_{p['compute_capability'].replace('.', '')}), driver {p['driver']}, CUDA {p['cuda_runtime']}, "
           f"CuPy {p['cupy']}")
    command = "`python -m gemm_course record --levels LEVEL --out FILE`"
    return (f"{gpu}, {dates[0]} to {dates[-1]}; {command}, one run per level",
            f"{gpu}，{dates[0]} 至 {dates[-1]}；{command}，每级运行一次")


def show_ladder_by_card(sizes: Sequence[int] = (1024, 4096, 8192)) -> list[dict[str, Any]]:
    """ladder_by_card as a table, one row per level and card; the caption names each card's run."""
    rows = ladder_by_card(sizes)
    if not rows:
        say("no recorded ladder", "没有实测记录")
        return Shown()

    def cell(r: Optional[dict]) -> str:
        return f"{r['tflops']:.2f} ({r['ratio_to_cublas']:.1%})" if r else "—"

    runs = [_card_line([r for row in rows if row["gpu"] == gpu for r in row["records"].values() if r])
            for gpu in dict.fromkeys(row["gpu"] for row in rows)]
    en_runs, zh_runs = " · ".join(en for en, _ in runs), " · ".join(zh for _, zh in runs)
    show_text(Table([text("level", "级别"), "GPU", *(f"{n}³" for n in sizes)],
                    [[row["level"], row["gpu"], *(cell(row["records"][n]) for n in sizes)] for row in rows],
                    caption=text("Each cell: TFLOPS, and in brackets the fraction of cuBLAS timed in the same run on the "
                                 "same card. Recorded: " + en_runs,
                                 "每格：TFLOPS，括号内为同一块卡上同一次运行中 cuBLAS 的百分比。实测记录：" + zh_runs)))
    return Shown(rows)
