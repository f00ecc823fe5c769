"""book/gpu_primer.md and book/sass_cheatsheet.md: every number in their English prose, recomputed from the
recorded H200 files, the occupancy calculator (NVRTC, no GPU) and the disassembly (nvdisasm, no GPU); every
mnemonic of the cheat sheet's table found in the SASS of the kernel it is attributed to, and its quoted source
line found in that kernel's source. Where no disassembler is installed, the mixes recorded with the H200
results stand in (the counts of Levels 1-4, which have none, are then skipped)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import gemm_course as gc
from gemm_course import models
from gemm_course.measure import counters, results
from gemm_course.inspect import sass, sass_reading
from gemm_course.levels import KERNEL_DIR

REPO = Path(__file__).resolve().parents[1]
L5 = "05_register_blocking"
needs_disassembler = pytest.mark.skipif(sass.find_disassembler() is None, reason="no nvdisasm/cuobjdump here")


def cells(page: str, lang: str) -> str:
    text = (REPO / "book" / page).read_text(encoding="utf-8")
    parts = re.split(r"(?m)^\+\+\+(.*)$", text)
    return "\n".join(body.split("```{code-cell}")[0] for meta, body in zip(parts[1::2], parts[2::2])
                     if f'"lang-{lang}"' in meta)


def english(page: str) -> str:
    from gemm_course.display import glossary

    return glossary.plain(cells(page, "en"))  # as the reader sees it: a glossary link reads as its words


def missing(page: str, claims: list[str]) -> list[str]:
    text = english(page)
    return [c for c in claims if c not in text]


def rec(level: str, n: int = 4096, **params) -> dict:
    lv = gc.get_level(level)
    return results.find(lv.id, n, **lv.resolve(**params))


def prov() -> dict:
    return rec(L5)["provenance"]


def limits() -> models.ArchLimits:
    return models.arch_limits("sm_" + prov()["compute_capability"].replace(".", ""))


def peak_tflops() -> float:
    p, lim = prov(), limits()
    return p["sm_count"] * lim.fp32_lanes * 2 * p["sm_clock_max_mhz"] / 1e6


# --- the GPU primer --------------------------------------------------------------------------------

def test_primer_sm_and_issue():
    p, lim = prov(), limits()
    schedulers = lim.fp32_lanes // lim.warp_size
    probe = max(results.peaks("ffma"), key=lambda r: r["tflops"])
    peak = peak_tflops()
    assert (schedulers, lim.fp32_lanes, lim.max_warps_per_sm, lim.max_threads_per_sm, lim.max_blocks_per_sm) == \
        (4, 128, 64, 2048, 32)
    assert 70 == 2 * lim.warp_size + 6
    assert not missing("gpu_primer.md", [
        f"has {p['sm_count']} of them",
        f"split into {schedulers} parts",
        f"{lim.warp_size} FP32 units, one for each lane of a warp: {lim.fp32_lanes} FP32 units per SM",
        f"at most {lim.max_warps_per_sm} warps ({lim.max_threads_per_sm} threads) and {lim.max_blocks_per_sm} blocks",
        f"up to {lim.max_warps_per_sm // schedulers} warps per scheduler",
        "thread 70 is lane 6 of warp 2, because 70 = 2 × 32 + 6",
        f"a clock of at most {p['sm_clock_max_mhz']} MHz",
        f"{p['sm_count']} × {schedulers} × {lim.warp_size} × 2 × {p['sm_clock_max_mhz'] / 1e3:.2f} GHz = {peak:.1f} TFLOPS",
        f"{probe['tflops']:.2f} TFLOPS, {probe['tflops'] / peak:.0%} of it",
    ])



def test_primer_clocks_measured_on_the_sms():
    """FP32 kernels hold the top clock, Tensor Core kernels run power-limited below it: the probe around the timed
    launches of h200_clock_methods.json (clock64 against %globaltimer), not NVML."""
    methods = {r["workload"]: r for r in results.load(results.RESULTS_DIR / "h200_clock_methods.json")["clock_methods"]}
    fp32 = [methods[w]["bracket_mhz"] for w in ("cublas_fp32", "level08_fp32")]
    tc = [r["bracket_mhz"] for w, r in methods.items() if w not in ("cublas_fp32", "level08_fp32")]
    assert len(tc) == 6 and max(tc) < 1980 - 300 and all(r["M"] == 4096 for r in methods.values())
    assert {f"{c:.0f}" for c in fp32} == {"1978"}
    assert not missing("gpu_primer.md", [
        "at the top clock. FP32 kernels hold that clock on this H200: measured on the SMs at 4096³, cuBLAS's SGEMM and "
        f"Level 8 ran at {fp32[0]:.0f} MHz",
        f"run power-limited at {min(tc):.0f} to {max(tc):.0f} MHz even at 4096³ (`h200_clock_methods.json`)",
        "compare cycles (time × SM clock) as well as time"])


def test_primer_latency_and_the_probe():
    rows = {r["warps_per_sm"]: r for r in results.peaks("ffma")}
    lanes2 = 2 * limits().fp32_lanes  # FLOP per SM per cycle at the peak
    one, two, most = rows[4], rows[8], rows[max(rows)]
    assert one["kernel"] == "ffma_peak<8>" and one["what"].startswith("8 independent FFMA chains per thread")
    assert lanes2 == 256
    # more warps than two per scheduler add nothing
    assert max(r["tflops"] for w, r in rows.items() if w >= 8) / min(r["tflops"] for w, r in rows.items() if w >= 8) < 1.002
    assert not missing("gpu_primer.md", [
        "L = 4 cycles", f"fills 1 slot in 4, {1 / 4:.0%} of the peak", "With 4 such warps",
        "runs 8 independent FFMA chains",
        f"one warp per scheduler (4 warps per SM), it reaches {one['tflops']:.2f} TFLOPS: "
        f"{one['flops_per_sm_per_cycle_at_max_clock']:.1f} of the {lanes2} FLOP an SM could do per cycle (cycles counted "
        "at the top clock), "
        f"{one['flops_per_sm_per_cycle_at_max_clock'] / lanes2:.0%}",
        f"(8 per SM) it reaches {two['flops_per_sm_per_cycle_at_max_clock']:.1f} FLOP per cycle, "
        f"{two['flops_per_sm_per_cycle_at_max_clock'] / lanes2:.0%}",
        f"at {max(rows)} warps per SM it is still {most['tflops']:.2f} TFLOPS",
    ])


@needs_disassembler
def test_primer_dependency_chains_from_the_disassembly():
    loop2 = sass_reading.main_loop(sass.disassemble("02_smem_tiling"))
    loop5 = sass_reading.main_loop(sass.disassemble(L5))
    ffma2 = sass_reading.mix(loop2)["FFMA"]
    assert sass_reading.chained_ffma(loop2) == ffma2 - 1  # "all but one"
    assert sass_reading.chained_ffma(loop5) == 0  # "none of its FFMAs waits for the one before"
    p = gc.get_level(L5).defaults
    assert p["TM"] * p["TN"] == 64
    assert not missing("gpu_primer.md", ["all but one of its FFMAs", "an 8 × 8 block of C, 64 independent accumulators"])


def test_primer_occupancy_arithmetic():
    lim = limits()
    r5 = gc.compile_report(L5, arch="sm_90")
    warps = r5.threads_per_block // lim.warp_size
    per_warp = r5.registers * lim.warp_size
    assert per_warp % lim.register_alloc_unit == 0
    shared = r5.static_shared_bytes + r5.dynamic_shared_bytes + lim.reserved_shared_per_block
    occ = r5.occupancy
    assert (occ.blocks_per_sm, occ.limited_by) == (lim.registers_per_sm // (per_warp * warps), "registers")
    r2 = gc.compile_report("02_smem_tiling", arch="sm_90", tile=32)
    assert r2.occupancy.limited_by == "threads"
    assert not missing("gpu_primer.md", [
        f"at most {lim.max_threads_per_sm} per SM", f"at most {lim.max_blocks_per_sm} per SM",
        f"{lim.registers_per_sm} per SM", f"in units of {lim.register_alloc_unit}",
        f"up to {lim.max_shared_per_sm // 1024} KiB per SM, plus {lim.reserved_shared_per_block // 1024} KiB",
        f"gives each thread {r5.registers} registers. A block has {r5.threads_per_block} threads, that is {warps} warps",
        f"{r5.registers} × {lim.warp_size} = {per_warp} per warp, {per_warp * warps} per block. "
        f"{lim.registers_per_sm} / {per_warp * warps} = {lim.registers_per_sm // (per_warp * warps)} blocks",
        f"{lim.max_threads_per_sm} / {r5.threads_per_block} = {lim.max_threads_per_sm // r5.threads_per_block} blocks",
        f"{r5.static_shared_bytes} bytes per block, plus the {lim.reserved_shared_per_block} reserved, makes {shared} "
        f"bytes; {lim.max_shared_per_sm // shared} blocks fit",
        f"Blocks: {lim.max_blocks_per_sm}.",
        f"{occ.blocks_per_sm} blocks: {occ.warps_per_sm} warps of {occ.max_warps_per_sm}, an occupancy of {occ.fraction:.0%}",
        f"{r2.threads_per_block} threads and {r2.registers} registers per thread, limited by threads to "
        f"{r2.occupancy.blocks_per_sm} blocks, which makes {r2.occupancy.warps_per_sm} warps, {r2.occupancy.fraction:.0%}",
    ])


def test_primer_occupancy_is_not_speed():
    m2 = counters.find("02_smem_tiling", tile=32)["metrics"]
    m5 = counters.find(L5, **gc.get_level(L5).defaults)["metrics"]
    stalls2 = {k: v for k, v in m2.items() if k.startswith("stall_") and k != "stall_selected" and v is not None}
    assert max(stalls2, key=stalls2.get) == "stall_mio_throttle"  # "mostly waited on the shared-memory pipeline"
    assert not missing("gpu_primer.md", [
        f"Level 2 kept {m2['achieved_occupancy_pct']:.1f}% of the warp slots filled, but its schedulers issued in only "
        f"{m2['issue_active_pct']:.1f}% of the cycles",
        f"Level 5 kept only {m5['achieved_occupancy_pct']:.1f}% filled, yet issued in {m5['issue_active_pct']:.1f}% of the cycles",
        f"Level 5 runs at {rec(L5)['tflops']:.2f} TFLOPS, Level 2 at {rec('02_smem_tiling', tile=32)['tflops']:.2f} TFLOPS",
    ])


def test_primer_waves():
    sms, lv = prov()["sm_count"], gc.get_level(L5)
    per_sm = gc.compile_report(L5, arch="sm_90").occupancy.blocks_per_sm
    wave = sms * per_sm
    g4, g1 = (lv.geometry(n, n, n, lv.defaults).grid for n in (4096, 1024))
    b4, b1 = g4[0] * g4[1], g1[0] * g1[1]
    tail = b4 - (b4 // wave) * wave
    assert b4 // wave == 3 and b1 < wave / 4
    rows = {r["size"]: r for r in gc.notebook.blocks_and_waves(L5, sm_count=sms)}
    assert rows[4096]["waves"] == 4 and f"{rows[4096]['last_wave_fill']:.0%}" == f"{tail / wave:.0%}"
    assert not missing("gpu_primer.md", [
        f"one wave is {sms} × {per_sm} = {wave} blocks",
        f"{g4[0]} × {g4[1]} = {b4} blocks. {b4} / {wave} = {b4 / wave:.2f} waves",
        f"a **tail** of {tail} blocks, which fills {tail / wave:.0%} of the last wave",
        f"{g1[0]} × {g1[1]} = {b1} blocks, less than a quarter of one wave: {sms - b1} of the {sms} SMs",
    ])


def test_primer_memory_hierarchy():
    p, lim = prov(), limits()
    regs = lim.registers_per_sm * 4
    bw = models.KNOWN_GPUS[p["gpu"]].memory_bandwidth_gbs / 1e3
    assert models.warp_sectors([4 * i for i in range(32)]) == 4
    assert models.warp_sectors([4 * 4096 * i for i in range(32)]) == 32
    assert not missing("gpu_primer.md", [
        f"{lim.registers_per_sm} registers of 4 bytes per SM: {regs // 1024} KiB per SM, "
        f"{regs * p['sm_count'] / 2**20:.0f} MiB over the {p['sm_count']} SMs",
        f"up to {lim.max_shared_per_sm // 1024} KiB of it can be shared memory",
        f"{models.BANKS} **banks**, each 4 bytes wide",
        f"{p['l2_bytes'] / 2**20:.0f} MiB on the H200",
        f"{p['memory_bytes'] / 1e9:.1f} GB ({p['memory_bytes'] / 2**30:.1f} GiB), with a datasheet bandwidth of {bw:.1f} TB/s",
        f"**sectors** of {models.SECTOR_BYTES} bytes",
        "32 neighbouring floats (128 bytes) needs 4 sectors, a warp reading 32 scattered floats needs 32",
    ])


def test_primer_memory_or_compute_bound():
    n, peak = 4096, peak_tflops()
    bw = models.KNOWN_GPUS[prov()["gpu"]].memory_bandwidth_gbs * 1e9
    flop, least, naive = models.gemm_flops(n, n, n), models.gemm_min_bytes(n, n, n), models.tile_traffic(n, n, n)
    assert not missing("gpu_primer.md", [
        f"2 × {n}³ = {flop / 1e9:.1f} GFLOP",
        f"FP32 peak of {peak:.1f} TFLOPS that takes {flop / (peak * 1e12) * 1e3:.2f} ms",
        f"{least / 1e6:.0f} MB. At {bw / 1e12:.1f} TB/s that takes {least / bw * 1e3:.3f} ms",
        f"would move {naive / 1e9:.0f} GB, which takes {naive / bw * 1e3:.1f} ms",
        f"Level 1 takes {rec('01_naive')['median_ms']:.1f} ms",
        f"gap between {naive / 1e9:.0f} GB and {least / 1e6:.0f} MB",
    ])


def test_primer_glossary_examples():
    occ = gc.compile_report(L5, arch="sm_90").occupancy
    sms = prov()["sm_count"]
    assert not missing("gpu_primer.md", [
        f"| {limits().fp32_lanes // limits().warp_size} per SM per cycle |",
        f"Level 5: {occ.warps_per_sm} of {occ.max_warps_per_sm}, {occ.fraction:.0%}",
        f"Level 5: {sms} × {occ.blocks_per_sm} = {sms * occ.blocks_per_sm} blocks",
        "32 neighbouring floats: 4 sectors",
    ])


# --- the SASS cheat sheet --------------------------------------------------------------------------

def kernel_text(level: str) -> str:
    """A level's source with the course headers it includes (recursively)."""
    seen, todo, out = set(), [gc.get_level(level).path.name], []
    while todo:
        name = todo.pop()
        if name in seen or not (KERNEL_DIR / name).is_file():
            continue
        seen.add(name)
        text = (KERNEL_DIR / name).read_text(encoding="utf-8")
        out.append(text)
        todo += re.findall(r'#include "([^"]+)"', text)
    return "\n".join(out)


def table_rows(lang: str) -> dict[str, str]:
    """The cheat sheet's table: each row by the backticked opcodes of its first column."""
    rows = {}
    for line in cells("sass_cheatsheet.md", lang).splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            for op in re.findall(r"`([^`]+)`", first):
                rows[op] = line
    return rows


@pytest.mark.parametrize("row", sass_reading.CHEAT_SHEET, ids=[", ".join(r.opcodes) for r in sass_reading.CHEAT_SHEET])
def test_cheat_sheet_row(row):
    number = int(row.level[:2])
    assert row.source in kernel_text(row.level), f"{row.source!r} is not in the source of {row.level}"
    en, zh = table_rows("en"), table_rows("zh")
    for op in row.opcodes:
        assert op in en and row.source in en[op] and f"| Level {number}" in en[op], en.get(op)
        assert op in zh and row.source in zh[op] and f"| 第 {number} 级" in zh[op], zh.get(op)
    try:
        mix, where = sass.kernel_mix(row.level, **row.params)
    except KeyError:
        pytest.skip(f"no disassembler and no recorded mix for {row.level}")
    absent = [op for op in row.opcodes if not mix.get(op)]
    assert not absent, f"{absent} do not occur in {row.level} {row.params} ({where})"


def test_cheat_sheet_table_is_covered_and_complete():
    covered = {op for r in sass_reading.CHEAT_SHEET for op in r.opcodes}
    assert set(table_rows("en")) == covered == set(table_rows("zh"))
    brief = ("FFMA", "FMUL", "FADD", "LDG", "LDG.E.128", "STG", "STG.E.128", "LDS", "LDS.128", "STS", "LDGSTS", "BAR.SYNC",
             "LDL", "STL", "LDSM", "HMMA", "HGMMA", "UTMALDG", "SYNCS", "IMAD", "IADD3", "LEA", "ISETP", "BRA", "S2R")
    assert all(any(op == b or op.startswith(b + ".") for op in covered) for b in brief)


def test_cheat_sheet_settings_differ_where_the_table_says():
    """With a bias, Level 6 fuses alpha·v + bias into FFMA (no FMUL); the table's FMUL needs bias=False."""
    try:
        with_bias, _ = sass.kernel_mix("06_fused_epilogue", activation="none", bias=True)
    except KeyError:
        pytest.skip("no disassembler")
    assert not with_bias.get("FMUL")
    r8, lv8 = gc.compile_report("08_warp_tiling", arch="sm_90"), gc.get_level("08_warp_tiling")
    cap = limits().registers_per_sm // (r8.threads_per_block * lv8.defaults["min_blocks"])
    assert cap == r8.registers == 128 and r8.spills  # "caps the registers at 128", and the compiler spills
    assert "caps the registers at 128" in table_rows("en")["LDL"]
    assert "As[ty][k]" in kernel_text("02_smem_tiling") and "float4" not in kernel_text("02_smem_tiling")


@needs_disassembler
def test_cheat_sheet_ptx_against_sass():
    """Level 2's PTX reads shared memory 4 bytes at a time; ptxas merges the As reads into LDS.128."""
    ptx2 = sass_reading.ptx("02_smem_tiling")
    m2 = sass_reading.mix(sass_reading.main_loop(sass.disassemble("02_smem_tiling")))
    loads = ptx2.count("ld.shared.f32")
    assert ptx2.count("ld.shared.v4") == 0 and loads == m2["LDS"] + 4 * m2["LDS.128"]
    assert not missing("sass_cheatsheet.md", [
        f"its PTX still holds {loads} separate 4-byte `ld.shared.f32`",
        f"its SASS holds {m2['LDS']} `LDS` and {m2['LDS.128']} `LDS.128`: each 16-byte `LDS.128` loads 4 of them",
    ])


@needs_disassembler
def test_cheat_sheet_worked_example():
    tile = gc.get_level("02_smem_tiling").defaults["tile"]
    bk = gc.get_level(L5).defaults["BK"]
    loop2 = sass_reading.main_loop(sass.disassemble("02_smem_tiling"))
    s2 = sass_reading.shared_loads(loop2)
    s5 = sass_reading.shared_loads(sass_reading.main_loop(sass.disassemble(L5)))
    m2 = sass_reading.mix(loop2)
    assert sass_reading.mix(loop2, skip_predicated_off=False) == m2  # nothing predicated off in Level 2
    lds2, lds128_2 = m2["LDS"], m2["LDS.128"]
    assert lds2 + lds128_2 == s2["loads"]
    assert not missing("sass_cheatsheet.md", [
        f"{s2['FFMA']} FFMA against {s2['loads']} shared loads",
        f"one {tile}-deep tile. It holds {s2['FFMA']} FFMA and {s2['loads']} shared-memory loads: {lds2} `LDS` for "
        f"`Bs[k][tx]` and {lds128_2} `LDS.128` for `As[ty][k]`, which read {s2['floats']} floats. That is "
        f"{s2['ffma_per_load']:.1f} FFMA per load and {s2['ffma_per_float']:.1f} FFMA per float",
        f"one k-tile of {bk}. It holds {s5['FFMA']} FFMA and {s5['loads']} `LDS.128`, which read {s5['floats']} floats, "
        f"plus {s5['predicated_off']} `@!PT LDS` that read nothing. That is {s5['ffma_per_load']:.0f} FFMA per load and "
        f"{s5['ffma_per_float']:.0f} FFMA per float",
        f"Level 5 does {s5['ffma_per_load'] / s2['ffma_per_load']:.0f} times the arithmetic of Level 2, and per float "
        f"read, {s5['ffma_per_float'] / s2['ffma_per_float']:.0f} times",
        "`.L_x_1:` in Level 2",
    ])
    assert any(i.opcode == "LDS.128" and not i.predicated_off for i in loop2)  # the compiler's LDS.128
    assert sass_reading.listing(loop2).count("BAR.SYNC") == 2


def test_cheat_sheet_whole_kernel_mix_and_speed():
    mix5, _ = sass.kernel_mix(L5)  # disassembled here, else recorded on the H200
    t5, t2 = rec(L5)["tflops"], rec("02_smem_tiling", tile=32)["tflops"]
    lds = mix5["LDS"] + mix5["LDS.128"]
    assert not missing("sass_cheatsheet.md", [
        f"lists {mix5['LDS']} `LDS` and {mix5['LDS.128']} `LDS.128` against {mix5['FFMA']} FFMA, which makes "
        f"{mix5['FFMA'] / lds:.1f} FFMA per load",
        f"Level 5 runs at {t5:.2f} TFLOPS at 4096³ against {t2:.2f} TFLOPS for Level 2: {t5 / t2:.1f} times faster",
    ])


# --- sass_reading on a listing written out here (no disassembler needed) ---------------------------

LISTING = """
        /*0000*/                   S2R R0, SR_TID.X ;                       /* 0x0000000000007919 */
.L_x_1:
        /*0010*/                   LDS R4, [R2] ;
        /*0020*/              @!PT LDS RZ, [RZ] ;
        /*0030*/                   FFMA R5, R4, R4, R5 ;
        /*0040*/                   FFMA R6, R4.reuse, R4, R5 ;
        /*0050*/                   FFMA R7, R4, R4, R8 ;
        /*0060*/                   LDS.128 R8, [R2+0x10] ;
        /*0070*/              @!P0 BRA `(.L_x_1) ;
        /*0080*/                   EXIT ;
"""


def test_sass_reading_on_a_small_listing():
    code = sass_reading.instructions(LISTING)
    assert [i.opcode for i in code] == ["S2R", "LDS", "LDS", "FFMA", "FFMA", "FFMA", "LDS.128", "BRA", "EXIT"]
    assert code[2].predicated_off and not code[7].predicated_off and code[7].predicate == "@!P0"
    loop = sass_reading.main_loop(LISTING)
    assert [i.address for i in loop] == [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70]
    assert sass_reading.mix(loop)["LDS"] == 1 and sass_reading.mix(loop, skip_predicated_off=False)["LDS"] == 2
    assert sass_reading.chained_ffma(loop) == 1
    s = sass_reading.shared_loads(loop)
    assert (s["FFMA"], s["loads"], s["floats"], s["predicated_off"]) == (3, 2, 5, 1)
    assert str(code[0]) == "/*0000*/ S2R R0, SR_TID.X ;"
    with pytest.raises(ValueError):
        sass_reading.main_loop("        /*0000*/ EXIT ;")
