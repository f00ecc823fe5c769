"""Every number the Level 7 and Level 8 prose quotes, recomputed from the recorded H200 files, the
compile reports and the disassembly (no GPU needed); plus the Level 8 tile-hierarchy figure."""
from collections import Counter
from pathlib import Path

import pytest

import gemm_course as gc
from gemm_course import diagrams, results
from gemm_course.levels import TUNED_WARP_TILING
from gemm_course.sass import find_disassembler
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
L5, L7, L8 = "05_register_blocking", "07_vectorized", "08_warp_tiling"
# The project's issue: the seed guide's Levels 5-7, as written, measured on an H200 (not a file of ours).
SEED_AS_WRITTEN_ON_H200 = ("58%", "58%", "61%")


def _rec(level, n, **p):
    """n: the size of a cube, or an (M, N, K) shape."""
    return results.find(level, *((n, n, n) if isinstance(n, int) else n), **gc.get_level(level).resolve(**p))


def _cublas(r):
    return r["tflops"] / r["ratio_to_cublas"]


def _sweep(level):
    lv = gc.get_level(level)
    n = lv.sweep_size
    return [r for r in results.recorded(level) if r["level"] == level and r["M"] == n == r["N"] == r["K"]]


def _mix(level, **p):
    lv = gc.get_level(level)
    pr = lv.resolve(**p)
    if find_disassembler():
        from gemm_course.sass import disassemble, instruction_mix, memory_summary
        return memory_summary(instruction_mix(disassemble(lv, arch="sm_90", **pr)))
    return next(s["summary"] for s in results.sass_records()
                if s["level"] == lv.id and s["params"] == pr)


def test_level7_prose_numbers():
    prose = _english_prose(ROOT / "notebooks" / "07_vectorized.ipynb")
    l5, l7, l7b = _rec(L5, 8192), _rec(L7, 8192), _rec(L7, 8192, BK=16)
    l5b4, l7b4 = _rec(L5, 4096, BK=16), _rec(L7, 4096, BK=16)
    settings = {tuple(sorted(r["params"].items())) for r in _sweep(L7)}
    best = max(_sweep(L7), key=lambda r: r["tflops"])
    assert best["params"] == {"BM": 128, "BN": 256, "BK": 8, "TM": 8, "TN": 8}
    l74 = _rec(L7, 4096)
    s1, s1b = _rec(L7, 1024), _rec(L7, 1024, BK=16)
    claims = [
        f"runs at {l7['tflops']:.2f} TFLOPS, {l7['ratio_to_cublas']:.1%} of cuBLAS's {_cublas(l7):.1f} TFLOPS, "
        f"against {l5['tflops']:.2f} TFLOPS ({l5['ratio_to_cublas']:.1%} of cuBLAS)",
        f"{l7['tflops'] / l5['tflops'] - 1:+.0%} from vector accesses alone",
        f"reaches {l7b['tflops']:.2f} TFLOPS at 8192³, {l7b['ratio_to_cublas']:.1%} of cuBLAS, slower than `BK = 8`",
        f"runs at {l5b4['tflops']:.2f} TFLOPS and Level 7 with `BK = 16` at {l7b4['tflops']:.2f} "
        f"({l7b4['tflops'] / l5b4['tflops'] - 1:+.0%})",
        f"The best of the {len(settings)} settings",
        f"at {best['tflops']:.2f} TFLOPS, {best['ratio_to_cublas']:.1%} of cuBLAS",
        f"runs at {s1['tflops']:.2f} TFLOPS ({s1['ratio_to_cublas']:.1%}) and the `BK = 16` setting at "
        f"{s1b['tflops']:.2f} ({s1b['ratio_to_cublas']:.1%})",
        f"Level 5's default at {l5['ratio_to_cublas']:.1%} at 8192³, Level 7's at {l7['ratio_to_cublas']:.1%} at 8192³ "
        f"({l74['ratio_to_cublas']:.1%} at 4096³), {best['ratio_to_cublas']:.1%} for the best setting at 4096³",
        f"only {gc.get_level(L7).geometry(1024, 1024, 1024, gc.get_level(L7).resolve()).grid[0] ** 2} blocks",
        f"the H200's {results.find(L7, 8192)['provenance']['sm_count']} SMs",
    ]
    claims.append("claims {:.0%}, {:.0%} and {:.0%} of cuBLAS".format(
        *(results.SEED_CLAIMS[i] for i in ("05_register_blocking", "06_fused_epilogue", "07_vectorized"))))
    claims.append("about {}, {} and {} on an H200".format(*SEED_AS_WRITTEN_ON_H200))
    assert_prose_says(claims, prose)
    # per k-tile copies of the default setting: 128×8 floats of A (and 8×128 of B) over 256 threads
    p = gc.get_level(L7).resolve()
    threads = (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
    per_thread = p["BM"] * p["BK"] // threads
    assert_prose_says([f"holds {p['BM'] * p['BK']} floats", f"copies {per_thread} floats of each",
                 f"{2 * per_thread} four-byte copies in Level 5, {2 * per_thread // 4} sixteen-byte",
                 f"`BK = {p['BK']}` and {threads} threads"], prose)
    r5, r7 = gc.compile_report(L5, arch="sm_90"), gc.compile_report(L7, arch="sm_90")
    assert r7.spill_store_bytes == r7.spill_load_bytes == 0 and r7.occupancy.blocks_per_sm == 2
    r7b = gc.compile_report(L7, arch="sm_90", BK=16)
    assert r7b.spill_store_bytes > 0 and l7b["tflops"] < l7["tflops"]  # "the compiler spills ... costs speed"
    assert_prose_says([f"{r7.registers} registers per thread against Level 5's {r5.registers}",
                       f"the compiler spills {r7b.spill_store_bytes} bytes per thread"], prose)
    m5, m7 = _mix(L5), _mix(L7)
    assert_prose_says([f"({m5['LDGSTS.32']} `LDGSTS.32`) and stores C four bytes at a time ({m5['STG.32']} `STG.32`)",
                 f"({m7['LDG.128']} `LDG.128`, {m7['STG.128']} `STG.128`",
                 f"from {m5['STG.32']} instructions to {m7['STG.128']}", f"{m7['FFMA']} `FFMA` against {m7['LDS.128']} `LDS.128`",
                 f"takes {m7['STG.128']} instructions instead of {m5['STG.32']}"], prose)
    assert m5["FFMA"] == m7["FFMA"] and m5["LDS.128"] == m7["LDS.128"]
    assert m7["LDG.128"] == 4  # "the two loads of a k-tile, written once for the first k-tile and once in the loop"
    assert not any(k.startswith(("LDG.", "STG.128")) for k in m5) and "LDG.32" not in m7 and "STG.32" not in m7
    assert "STS.128" in m7 and "STS.32" in m7


def test_level8_prose_numbers():
    prose = _english_prose(ROOT / "notebooks" / "08_warp_tiling.ipynb")
    d = {n: _rec(L8, n) for n in (1024, 2048, 4096, 8192)}
    s = {n: _rec(L8, n, BM=64) for n in (1024, 2048, 4096, 8192)}
    r, s8 = d[8192], s[8192]
    l7 = _rec(L7, 8192)
    pct = lambda x: f"{x['ratio_to_cublas']:.1%}"  # noqa: E731
    assert all(s[n]["tflops"] > d[n]["tflops"] for n in s)  # "better at every size"
    assert s[1024]["ratio_to_cublas"] > 1  # "faster than cuBLAS" at 1024³
    claims = [
        f"runs at {r['tflops']:.2f} TFLOPS at 8192³, {pct(r)} of cuBLAS's {_cublas(r):.2f} TFLOPS",
        f"median {r['median_ms']:.2f} ms over {r['reps']} runs, quartiles {r['q1_ms']:.2f} to {r['q3_ms']:.2f} ms, "
        f"fastest {r['min_ms']:.2f} ms, slowest {r['max_ms']:.2f} ms",
        f"Against Level 7's default ({l7['tflops']:.2f} TFLOPS at 8192³) that is {r['tflops'] / l7['tflops'] - 1:+.0%}",
        f"reaches {pct(d[1024])} of cuBLAS at 1024³, {pct(d[2048])} at 2048³, {pct(d[4096])} at 4096³ and {pct(d[8192])} at 8192³",
        f"runs at {s[1024]['tflops']:.2f} TFLOPS ({pct(s[1024])}) against {d[1024]['tflops']:.2f} ({pct(d[1024])})",
        f"{s[2048]['tflops']:.2f} TFLOPS ({pct(s[2048])}) at 2048³, {s[4096]['tflops']:.2f} ({pct(s[4096])}) at 4096³ and "
        f"{s8['tflops']:.2f} ({pct(s8)}) at 8192³",
        f"The default setting reaches {pct(d[4096])} at 4096³, {pct(d[8192])} at 8192³ and {pct(d[2048])} at 2048³ "
        f"(and {pct(d[1024])} at 1024³)",
        f"The 64×128 showcase reaches {pct(s[4096])}, {pct(s8)} and {pct(s[2048])}",
        f"{s[2048]['tflops']:.2f} TFLOPS ({pct(s[2048])}) at 2048³",
    ]
    lv = gc.get_level(L8)
    blocks = {bm: lv.geometry(1024, 1024, 1024, lv.resolve(BM=bm)).grid[0] for bm in (64, 128)}
    claims.append(f"gives {blocks[64]} blocks of 64×128 but only {blocks[128]} blocks of 128×128 for the H200's "
                  f"{r['provenance']['sm_count']} SMs")
    sweep = _sweep(L8)
    settings = {tuple(sorted(x["params"].items())) for x in sweep}
    ranked = sorted(sweep, key=lambda x: -x["tflops"])
    tuned = lv.resolve(**TUNED_WARP_TILING)
    best = ranked[0]
    assert {**best["params"], "min_blocks": 2} == tuned  # the sweep's best is the tuned tile (either min_blocks)
    twin_mb = next(x for x in ranked[1:] if x["params"] == {**tuned, "min_blocks": 3 - best["params"]["min_blocks"]})
    second = next(x for x in ranked if (x["params"]["BM"], x["params"]["BN"]) != (64, 256))
    assert second["params"]["WM"] == second["params"]["WN"] == 64 and second["params"]["BM"] == second["params"]["BN"] == 128
    twin = _rec(L8, 4096, min_blocks=1)
    assert twin["tflops"] > d[4096]["tflops"]  # "also above the default"
    ct = gc.compile_report(L8, arch="sm_90", **TUNED_WARP_TILING)
    assert ct.registers == gc.compile_report(L8, arch="sm_90", **{**TUNED_WARP_TILING, "min_blocks": 1}).registers
    t = {n: _rec(L8, n, **TUNED_WARP_TILING) for n in (1024, 2048, 4096, 8192)}
    swept_tuned = next(x for x in sweep if x["params"] == tuned and x["reps"] < t[4096]["reps"])
    claims += [f"tries {len(settings)} settings", f"at {best['tflops']:.2f} TFLOPS ({pct(best)}) with `min_blocks = {best['params']['min_blocks']}`",
               f"and {twin_mb['tflops']:.2f} ({pct(twin_mb)}) with `min_blocks = {twin_mb['params']['min_blocks']}`",
               f"at {ct.registers} registers only {ct.occupancy.blocks_per_sm} blocks of {ct.threads_per_block} threads fit",
               f"follows at {second['tflops']:.2f} ({pct(second)}), against {d[4096]['tflops']:.2f} for the default",
               f"runs at {twin['tflops']:.2f}, also above the default",
               f"At 8192³ it runs at {t[8192]['tflops']:.2f} TFLOPS, {pct(t[8192])} of cuBLAS (median {t[8192]['median_ms']:.2f} ms, "
               f"quartiles {t[8192]['q1_ms']:.2f} to {t[8192]['q3_ms']:.2f} ms), at 4096³ at {t[4096]['tflops']:.2f} ({pct(t[4096])}) "
               f"and at 2048³ at {t[2048]['tflops']:.2f} ({pct(t[2048])})",
               f"measured the same setting at 4096³ in the same run at {swept_tuned['tflops']:.2f} ({pct(swept_tuned)})",
               f"{t[1024]['tflops']:.2f} TFLOPS ({pct(t[1024])}) at 1024³, where its tiles make only "
               f"{lv.geometry(1024, 1024, 1024, tuned).grid[0]} blocks",
               f"The 64×256 setting reaches {pct(t[4096])} at 4096³, {pct(t[8192])} at 8192³ and {pct(t[2048])} at 2048³",
               f"and {pct(swept_tuned)} at 4096³ in the sweep of the same run"]
    assert all(x["ratio_to_cublas"] >= 0.85 for x in (d[2048], s[2048], t[2048]))  # "every setting meets the 2048³ target"
    assert max(swept_tuned["ratio_to_cublas"], t[4096]["ratio_to_cublas"]) >= 0.95 > min(t[4096]["ratio_to_cublas"], t[8192]["ratio_to_cublas"])
    # shapes that are not cubes
    shapes = lv.record_shapes
    ts, ds = [_rec(L8, x, **TUNED_WARP_TILING) for x in shapes], [_rec(L8, x) for x in shapes]
    assert all(ts[i]["tflops"] > _rec(L8, shapes[i], BM=64)["tflops"] > ds[i]["tflops"] for i in range(3))  # "same order"
    assert min(range(3), key=lambda i: ts[i]["ratio_to_cublas"]) == min(range(3), key=lambda i: ds[i]["ratio_to_cublas"]) == 2
    claims += [f"the 64×256 setting reaches {pct(ts[0])}, {pct(ts[1])} and {pct(ts[2])}, the default {pct(ds[0])}, "
               f"{pct(ds[1])} and {pct(ds[2])}"]
    # the FFMA probe against the showcase settings
    probes = {x["warps_per_sm"]: x for x in results.peaks("ffma")}
    top = max(probes.values(), key=lambda x: x["tflops"])
    c2d = gc.compile_report(L8, arch="sm_90")
    wt, wd = ct.occupancy.warps_per_sm, c2d.occupancy.warps_per_sm
    claims += [f"it reaches {top['tflops']:.1f} TFLOPS with {top['warps_per_sm']} warps per SM",
               f"but {probes[16]['tflops']:.1f} with 16 warps per SM and {probes[8]['tflops']:.1f} with 8",
               f"the default runs {wd} warps per SM, the 64×256 setting only {wt}, each of its threads holding 128 accumulators in {ct.registers} registers",
               f"At 8192³ that setting's {t[8192]['tflops']:.2f} TFLOPS is {t[8192]['tflops'] / probes[wt]['tflops']:.0%} of what the probe issues at {wt} warps per SM",
               f"the default's {r['tflops']:.2f} is {r['tflops'] / probes[wd]['tflops']:.0%} of the probe at {wd}",
               f"cuBLAS, at {_cublas(t[8192]):.2f} in the same run, is just below the probe's rate at 8 warps per SM"]
    assert 0.95 * probes[8]["tflops"] < _cublas(t[8192]) < probes[8]["tflops"]
    # compile reports
    c2, c1, c64 = (gc.compile_report(L8, arch="sm_90"), gc.compile_report(L8, arch="sm_90", min_blocks=1),
                   gc.compile_report(L8, arch="sm_90", BM=64))
    assert c2.threads_per_block == 256 and 65536 // (256 * 2) == c2.registers
    assert c1.spill_store_bytes == c1.spill_load_bytes == 0 and not c64.spills
    claims += [f"capped at {c2.registers} registers per thread", f"spills {c2.spill_store_bytes} B per thread",
               f"reads back {c2.spill_load_bytes} B", f"it uses {c1.registers} registers",
               f"only one block, {c1.occupancy.warps_per_sm} of {c1.occupancy.max_warps_per_sm} warps",
               f"against {c2.occupancy.warps_per_sm} of {c2.occupancy.max_warps_per_sm} with the default",
               f"with {c2.occupancy.warps_per_sm} warps per SM",
               f"has {c64.threads_per_block} threads per block: at {c64.registers} registers and no spills, "
               f"{c64.occupancy.blocks_per_sm} blocks fit on an SM, {c64.occupancy.warps_per_sm} of 64 warps"]
    assert c1.occupancy.blocks_per_sm == 1 and c2.occupancy.blocks_per_sm == 2
    # tile hierarchy: 128×128 / (64×32) = 8 warps; thread tile (4·64/32)×(4·32/16) = 8×8 = 64 accumulators
    p = lv.resolve()
    warps = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])
    tm, tn = 4 * p["WM"] // 32, 4 * p["WN"] // 16
    claims += [f"with {warps} warps, each owning a {p['WM']}×{p['WN']} warp tile", f"an {tm}×{tn} tile of C in {tm * tn} accumulator"]
    # gap to peak
    prov = r["provenance"]
    ghz = prov["sm_clock_max_mhz"] / 1e3
    peak = prov["sm_count"] * 128 * 2 * ghz / 1e3
    fma = r["tflops"] * 1e12 / 2 / (prov["sm_count"] * ghz * 1e9)
    claims += [f"{prov['sm_count']} SMs × 128 FMA", f"At the recorded {ghz:.2f} GHz that is {peak:.1f} TFLOPS",
               f"cuBLAS itself reaches {_cublas(r) / peak:.0%} of it; this kernel's default reaches {r['tflops'] / peak:.0%}, "
               f"that is {fma:.0f} of the 128 FMAs", f"the 64×128 showcase {s8['tflops'] / peak:.0%}",
               f"{pct(r)} of cuBLAS and {r['tflops'] / peak:.0%} of the FP32 peak"]
    m = _mix(L8)
    per_k = p["BK"]
    claims += [f"per k-tile of {per_k} the compiled kernel holds {m['FFMA']} `FFMA` against {m['LDS.128']} `LDS.128`, "
               f"per $k$ {m['FFMA'] // per_k} FMAs against {m['LDS.128'] // per_k} shared loads",
               f"B arrives through {m['LDGSTS.128']} `LDGSTS.128`",
               f"({m['LDL.32']} `LDL.32`, {m['LDL.64']} `LDL.64`, {m['STL.32']} `STL.32`, {m['STL.64']} `STL.64`)"]
    assert_prose_says(claims, prose)

def test_warp_tiling_figure_assigns_each_element_once():
    fig = diagrams.warp_tiling_figure(BM=128, BN=128, WM=64, WN=32, lane=5)
    traces = {t.name: t for t in fig.data}
    warps, lanes, lane = traces["warps"], traces["lanes"], traces["lane"]
    assert (len(warps.z), len(warps.z[0])) == (128, 128)
    assert Counter(v for row in warps.z for v in row) == {w: 64 * 32 for w in range(8)}
    assert (len(lanes.z), len(lanes.z[0])) == (64, 32)
    assert Counter(v for row in lanes.z for v in row) == {ln: 64 for ln in range(32)}  # 8×8 per lane
    cells = set(zip(lane.y, lane.x))
    lm, ln = 5 // 4, 5 % 4
    assert cells == {(wi * 32 + lm * 4 + i, wj * 16 + ln * 4 + j)
                     for wi in range(2) for wj in range(2) for i in range(4) for j in range(4)}
    assert len(fig.layout.shapes) == 4
    with pytest.raises(ValueError):
        diagrams.warp_tiling_figure(WM=48)
