"""Level 2's reason, fewer global loads, against the recorded Level 1 and Level 2 counters.

The section "What the counters say changed" of notebooks/02_smem_tiling.ipynb sits right before the
one-line cell ``gc.notebook.counter_comparison("01_naive", "02_smem_tiling")``. Every number it quotes is
recomputed here from gemm_course/results (counters.comparison, the same function the table uses), and what
it concludes is checked against those numbers: Level 1 far from the DRAM bandwidth, load instructions and
L1 sectors cut far more than DRAM bytes, the time cut less than the load instructions.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemm_course import models
from gemm_course.measure import counters
from gemm_course.display import glossary

REPO = Path(__file__).resolve().parents[1]
CALL = 'gc.notebook.counter_comparison("01_naive", "02_smem_tiling")'


def _section() -> tuple[str, str]:
    cells = json.loads((REPO / "notebooks" / "02_smem_tiling.ipynb").read_text(encoding="utf-8"))["cells"]
    i = next(i for i, c in enumerate(cells) if c["cell_type"] == "code" and "".join(c["source"]).strip() == CALL)
    en, zh = ("".join(cells[j]["source"]) for j in (i - 2, i - 1))
    assert "lang-en" in cells[i - 2]["metadata"]["tags"] and "lang-zh" in cells[i - 1]["metadata"]["tags"]
    return glossary.plain(en), glossary.plain(zh)


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    return {r["key"]: r for r in counters.comparison(("01_naive", "02_smem_tiling"))}


def test_the_two_settings_are_the_defaults(rows: dict[str, dict]) -> None:
    r = rows["global_load_requests"]
    assert r["levels"] == ["01_naive", "02_smem_tiling"]
    assert counters.find("01_naive")["params"]["mapping"] == "cols"
    assert counters.find("02_smem_tiling")["params"]["tile"] == 32
    en, zh = _section()
    assert "Level 1's `cols` mapping, Level 2's tile 32" in en and "4096³" in en
    assert "第 1 级用 `cols` 映射，第 2 级分块边长 32" in zh and counters.COUNTER_SIZE == 4096


SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(millions: float) -> str:
    """A count given in millions, as the prose writes it: 4.29 × 10⁹."""
    mantissa, exponent = f"{millions * 1e6:.2e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def test_numbers(rows: dict[str, dict]) -> None:
    en, zh = _section()
    req, sec, hit = rows["global_load_requests"], rows["global_load_sectors"], rows["global_load_l1_hit_pct"]
    l2, dram, rate, ms = rows["l2_read_bytes"], rows["dram_read_bytes"], rows["dram_read_tbs"], rows["duration_ms"]
    stall1, stall2 = rows["top_stall"]["values"]
    peak = models.KNOWN_GPUS["NVIDIA H200"].memory_bandwidth_gbs / 1000
    en_parts = [
        f"read {dram['values'][0]:.2f} GB from it in {ms['values'][0]:.1f} ms, {rate['values'][0]:.2f} TB/s",
        f"the datasheet's {peak:.1f} TB/s",
        f"{req['ratio']:.0f} times fewer global load instructions ({sci(req['values'][0])} to {sci(req['values'][1])})",
        f"{sec['ratio']:.0f} times fewer", f"({sci(sec['values'][0])} to {sci(sec['values'][1])})",
        f"L2 reads fall {l2['ratio']:.2f} times ({l2['values'][0]:.2f} GB to {l2['values'][1]:.2f} GB)",
        f"DRAM reads only {dram['ratio']:.2f} times ({dram['values'][0]:.2f} GB to {dram['values'][1]:.2f} GB)",
        f"({hit['values'][0]:.1f}% of its sectors hit in L1)",
        f"falls {ms['ratio']:.2f} times",
        f"`{stall1[0]}`, {stall1[1]:.1f} cycles per issued instruction",
        f"also reads as {stall1[1]:.1f} warps waiting per issued instruction",
        f"Level 2's largest is `{stall2[0]}`, {stall2[1]:.1f} cycles per issued instruction",
    ]
    zh_parts = [
        f"它在 {ms['values'][0]:.1f} ms 内从 DRAM 读取 {dram['values'][0]:.2f} GB，即 {rate['values'][0]:.2f} TB/s",
        f"数据手册标称 {peak:.1f} TB/s",
        f"全局加载指令只剩原来的 1/{req['ratio']:.0f}（从 {sci(req['values'][0])} 条降到 {sci(req['values'][1])} 条）",
        f"只剩 1/{sec['ratio']:.0f}（从 {sci(sec['values'][0])} 个降到 {sci(sec['values'][1])} 个）",
        f"L2 读取量降为 1/{l2['ratio']:.2f}（从 {l2['values'][0]:.2f} GB 降到 {l2['values'][1]:.2f} GB）",
        f"DRAM 读取量只降为 1/{dram['ratio']:.2f}（从 {dram['values'][0]:.2f} GB 降到 {dram['values'][1]:.2f} GB）",
        f"{hit['values'][0]:.1f}% 的扇区在 L1 命中", f"耗时只缩短为 1/{ms['ratio']:.2f}",
        f"`{stall1[0]}`，平均每条已发射指令 {stall1[1]:.1f} 个周期", f"每条已发射指令对应 {stall1[1]:.1f} 个等待的线程束",
        f"第 2 级最大的是 `{stall2[0]}`，平均每条已发射指令 {stall2[1]:.1f} 个周期",
    ]
    missing = [p for p in en_parts if p not in en] + [p for p in zh_parts if p not in zh]
    assert not missing, missing


def test_what_the_numbers_say(rows: dict[str, dict]) -> None:
    """The conclusions, from the numbers: Level 1 uses about an eighth of the bandwidth (and Level 2 no
    more); the cut shrinks from load instructions to L1 sectors to L2 to DRAM; time falls less than load
    instructions; Level 1 waits on global loads, Level 2 on the MIO (shared-memory) queue."""
    peak = models.KNOWN_GPUS["NVIDIA H200"].memory_bandwidth_gbs / 1000
    share = [v / peak for v in rows["dram_read_tbs"]["values"]]
    assert 1 / 9 < share[0] < 1 / 7 and share[1] < share[0]  # "about an eighth"; "neither came close"
    cuts = [rows[k]["ratio"] for k in ("global_load_requests", "global_load_sectors", "l2_read_bytes", "dram_read_bytes")]
    assert cuts == sorted(cuts, reverse=True) and cuts[-1] > 1
    assert rows["duration_ms"]["ratio"] < cuts[-1] < cuts[0]
    assert rows["global_load_l1_hit_pct"]["values"][0] > 80  # "caught most repeats"
    assert [s[0] for s in rows["top_stall"]["values"]] == ["long_scoreboard", "mio_throttle"]
