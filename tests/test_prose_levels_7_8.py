"""Every number the Level 7 and Level 8 prose quotes, recomputed from the recorded H200 files, the
compile reports and the disassembly (no GPU needed); plus the Level 8 tile-hierarchy figure."""
import json
import re
from collections import Counter
from pathlib import Path

import pytest

import gemm_course as gc
from gemm_course.display import diagrams
from gemm_course.measure import results
from gemm_course.levels import TUNED_WARP_TILING
from gemm_course.inspect.sass import find_disassembler
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
# Level 8's counters of the current kernel, re-recorded after its last edit, with cuBLAS fp32 of the same run
# (counters.find takes the newest record of a setting, so every counter Level 8's page quotes comes from it)
COUNTERS_08 = "h200_counters_08_warp_tiling.json"
# the first counter run's rows of the stepped settings, recorded before that edit
COUNTERS_BEFORE_EDIT = "h200_counters_top_rungs.json"
L5, L7, L8 = "05_register_blocking", "07_vectorized", "08_warp_tiling"


def _rec(level, n, **p):
    """n: the size of a cube, or an (M, N, K) shape."""
    return results.find(level, *((n, n, n) if isinstance(n, int) else n), **gc.get_level(level).resolve(**p))


def _cublas(r):
    return r["tflops"] / r["ratio_to_cublas"]


def _sweep(level):
    """The records at the sweep size from the runs that swept the settings (not the later showcase-only runs)."""
    lv = gc.get_level(level)
    n = lv.sweep_size
    return [r for r in results.recorded(level) if r["level"] == level and r["M"] == n == r["N"] == r["K"]
            and "--showcase-only" not in r["provenance"]["command"]]


def _mix(level, **p):
    lv = gc.get_level(level)
    pr = lv.resolve(**p)
    if find_disassembler():
        from gemm_course.inspect.sass import disassemble, instruction_mix, memory_summary
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
        f"{l7['tflops'] / l5['tflops'] - 1:+.0%} from this level's two changes together",
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
    assert_prose_says(claims, prose)
    assert "vector accesses alone" not in prose and "project's issue" not in prose  # no unrecorded comparison
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
    from gemm_course.__main__ import SWEEP_TIMING
    # the sweep's own run (its shorter timing), not the experiments nor the showcase timed at the sweep size
    sweep = [x for x in _sweep(L8) if x["file"] != "h200_experiments.json" and x["reps"] <= SWEEP_TIMING["max_reps"]]
    settings = {tuple(sorted(x["params"].items())) for x in sweep}
    ranked = sorted(sweep, key=lambda x: -x["tflops"])
    tuned = lv.resolve(**TUNED_WARP_TILING)
    best = ranked[0]
    # the sweep's best is a 128×256 tile (dynamic shared memory made BK = 16 possible for it), one block per SM
    assert {k: best["params"][k] for k in ("BM", "BN", "WM", "WN", "min_blocks")} == dict(BM=128, BN=256, WM=64, WN=64, min_blocks=1)
    cb = gc.compile_report(L8, arch="sm_90", **best["params"])
    assert cb.occupancy.blocks_per_sm == 1 and not cb.spills
    t = {n: _rec(L8, n, **TUNED_WARP_TILING) for n in (1024, 2048, 4096, 8192)}
    swept_tuned = next(x for x in sweep if x["params"] == tuned and x["reps"] < t[4096]["reps"])
    assert ranked[1] is swept_tuned  # "follows"
    square = next(x for x in ranked if x["params"]["BM"] == x["params"]["BN"] == 128)
    assert square["params"]["WM"] == square["params"]["WN"] == 64
    twin = _rec(L8, 4096, min_blocks=1)
    assert twin["tflops"] > d[4096]["tflops"]  # "also above the default"
    ct = gc.compile_report(L8, arch="sm_90", **TUNED_WARP_TILING)
    claims += [f"tries {len(settings)} settings",
               f"The best is a 128×256 block tile with 64×64 warp tiles and `min_blocks = 1`, at {best['tflops']:.2f} TFLOPS "
               f"({pct(best)}): {cb.threads_per_block} threads at {cb.registers} registers, one block per SM",
               f"The 64×256 tile with the same warp tiles follows at {swept_tuned['tflops']:.2f} ({pct(swept_tuned)})",
               f"at {ct.registers} registers only {ct.occupancy.blocks_per_sm} blocks of {ct.threads_per_block} threads fit",
               f"The best square tile, 128×128 with 64×64 warp tiles, follows at {square['tflops']:.2f} ({pct(square)}), "
               f"against {d[4096]['tflops']:.2f} for the default",
               f"runs at {twin['tflops']:.2f}, also above the default",
               f"At 8192³ it runs at {t[8192]['tflops']:.2f} TFLOPS, {pct(t[8192])} of cuBLAS (median {t[8192]['median_ms']:.2f} ms, "
               f"quartiles {t[8192]['q1_ms']:.2f} to {t[8192]['q3_ms']:.2f} ms), at 4096³ at {t[4096]['tflops']:.2f} ({pct(t[4096])}) "
               f"and at 2048³ at {t[2048]['tflops']:.2f} ({pct(t[2048])})",
               f"measured the same setting at 4096³ in the same run at {swept_tuned['tflops']:.2f} ({pct(swept_tuned)})",
               f"{t[1024]['tflops']:.2f} TFLOPS ({pct(t[1024])}) at 1024³, where its tiles make only "
               f"{lv.geometry(1024, 1024, 1024, tuned).grid[0]} blocks",
               f"The 64×256 setting reaches {pct(t[4096])} at 4096³, {pct(t[8192])} at 8192³ and {pct(t[2048])} at 2048³",
               f"and {pct(swept_tuned)} at 4096³ in the sweep of the same run"]
    assert abs(swept_tuned["ratio_to_cublas"] - t[4096]["ratio_to_cublas"]) < 0.015  # "moves by about one percent"
    # shapes that are not cubes
    shapes = lv.record_shapes
    ts, ds = [_rec(L8, x, **TUNED_WARP_TILING) for x in shapes], [_rec(L8, x) for x in shapes]
    assert all(ts[i]["tflops"] > _rec(L8, shapes[i], BM=64)["tflops"] > ds[i]["tflops"] for i in range(3))  # "same order"
    assert min(range(3), key=lambda i: ts[i]["ratio_to_cublas"]) == min(range(3), key=lambda i: ds[i]["ratio_to_cublas"]) == 2
    claims += [f"the 64×256 setting reaches {pct(ts[0])}, {pct(ts[1])} and {pct(ts[2])}, the default {pct(ds[0])}, "
               f"{pct(ds[1])} and {pct(ds[2])}"]
    # the FFMA probe (launches of at least 10 ms; the empty launch recorded beside it) against the showcase settings
    probes = {x["warps_per_sm"]: x for x in results.peaks("ffma")}
    overhead = next(results.load(f)["launch_overhead"] for f in results.recorded_files()
                    if "launch_overhead" in results.load(f))
    assert all(x["median_ms"] >= 10 for x in probes.values()) and overhead["median_ms"] * 1e3 < 0.001 * 10_000
    top = max(probes.values(), key=lambda x: x["tflops"])
    assert top["warps_per_sm"] == 8 and {f"{probes[w]['tflops']:.1f}" for w in (8, 16, 32, 64)} == {f"{top['tflops']:.1f}"}
    assert probes[4]["tflops"] < 0.95 * top["tflops"]  # "only with 4 warps per SM ... does it drop"
    prov = r["provenance"]
    sheet = prov["sm_count"] * 128 * 2 * prov["sm_clock_max_mhz"] / 1e6
    c2d = gc.compile_report(L8, arch="sm_90")
    wt, wd = ct.occupancy.warps_per_sm, c2d.occupancy.warps_per_sm
    cub = _cublas(t[8192])
    claims += [f"an empty kernel, timed the same way) is under 0.1%", f"({overhead['median_ms'] * 1e3:.1f} µs for an empty kernel",
               f"it reaches {top['tflops']:.1f} TFLOPS with {top['warps_per_sm']} warps per SM, {top['tflops'] / sheet:.0%} of the data sheet's figure",
               f"and the same {probes[16]['tflops']:.1f} with 16, 32 and 64 warps per SM",
               f"only with 4 warps per SM, one per scheduler, does it drop, to {probes[4]['tflops']:.1f}",
               f"the default runs {wd} warps per SM, the 64×256 setting only {wt}, each of its threads holding 128 accumulators in {ct.registers} registers",
               f"At 8192³ that setting's {t[8192]['tflops']:.2f} TFLOPS is {t[8192]['tflops'] / probes[wt]['tflops']:.0%} of what the probe issues at {wt} warps per SM",
               f"the default's {r['tflops']:.2f} is {r['tflops'] / probes[wd]['tflops']:.0%} of the probe at {wd}",
               f"cuBLAS, at {cub:.2f} in the same run, reaches {cub / probes[8]['tflops']:.0%} of the probe's rate"]
    # the scheduler slots at 4096³, from the counters: FFMA = M·N·K/32 warp instructions (1024 per thread per k-tile in the SASS)
    from gemm_course.measure import counters
    from test_prose_pages import issue_slots
    cd, cs, ctu, ccb = (counters.find(L8), counters.find(L8, BM=64), counters.find(L8, **TUNED_WARP_TILING),
                        counters.find("cublas", dtype="float32"))
    assert {x["file"] for x in (cd, cs, ctu, ccb)} == {COUNTERS_08}  # one counter run of the current kernel
    sd, st, sc = issue_slots(cd), issue_slots(ctu), issue_slots(ccb)
    pd = lv.resolve()
    assert _mix(L8)["FFMA"] == pd["BM"] * pd["BN"] * pd["BK"] // 256  # one FFMA per multiply-add per thread
    occ = lambda row: round(row["metrics"]["achieved_occupancy_pct"] / 100 * 64)  # noqa: E731
    assert occ(ccb) == occ(ctu) == 8  # "cuBLAS runs 8 warps per SM, as the 64×256 setting does"
    fma = lambda row: f"{row['metrics']['fma_pipe_pct']:.0f}%"  # noqa: E731
    assert all(abs(x["metrics"]["fma_pipe_pct"] - issue_slots(x)["ffma"]) < 1.5 for x in (cd, ctu, ccb))  # "within about a point"
    stall = lambda row, k: f"{row['metrics']['stall_' + k]:.2f}"  # noqa: E731
    assert [k for k, _ in counters.top_stalls(cd["metrics"])] == ["not_selected", "dispatch_stall", "barrier"]
    claims += [f"the default issues in {sd['issue']:.0f}% of its cycles, the 64×256 setting in {st['issue']:.0f}%, cuBLAS in {sc['issue']:.0f}%",
               f"the product needs 4096³/32 = {4096 ** 3 / 32 / 1e9:.2f} billion warp FFMAs",
               f"the default executes {cd['metrics']['instructions'] / 1e9:.2f} billion instructions in all, so {sd['share']:.0%} of them are FFMA; "
               f"the 64×256 setting has {st['share']:.0%} and cuBLAS {sc['share']:.0%}",
               f"the default issues an FFMA in {sd['ffma']:.0f}% of its scheduler slots, loses {sd['other']:.0f}% to other instructions and "
               f"{sd['idle']:.0f}% to cycles with nothing issued; the 64×256 setting issues an FFMA in {st['ffma']:.0f}% of its slots "
               f"({st['other']:.0f}% other, {st['idle']:.0f}% nothing); cuBLAS in {sc['ffma']:.0f}% ({sc['other']:.0f}% other, {sc['idle']:.0f}% nothing)",
               f"within about a point: {fma(cd)}, {fma(ctu)} and {fma(ccb)}",
               f"and {1 - sd['share']:.0%} of what the default issues is not an FFMA",
               f"`not_selected`, {stall(cd, 'not_selected')} warps per issued instruction",
               f"dispatch stalls ({stall(cd, 'dispatch_stall')}) and the block-wide barrier ({stall(cd, 'barrier')}); cuBLAS has "
               f"{stall(ccb, 'dispatch_stall')} and {stall(ccb, 'barrier')} of these, the 64×256 setting {stall(ctu, 'dispatch_stall')} and {stall(ctu, 'barrier')}",
               f"as the 64×256 setting does, and issues in {sc['issue']:.0f}% of its cycles",
               f"the 64×256 setting issues an FFMA in {st['ffma']:.0f}% of its scheduler slots against cuBLAS's {sc['ffma']:.0f}%; its share of "
               f"other instructions is already lower than cuBLAS's ({st['other']:.0f}% against {sc['other']:.0f}%), and the difference lies in "
               f"the cycles with nothing issued ({st['idle']:.0f}% against {sc['idle']:.0f}%)",
               f"which issues an FFMA in {st['ffma']:.0f}% of its scheduler slots against cuBLAS's {sc['ffma']:.0f}%",
               f"(64.9 TFLOPS in a probe)".replace("64.9", f"{top['tflops']:.1f}")]
    # the block order: group_m = 8 against 1, timed in the same run (h200_experiments.json), counters at 4096³
    ex = lambda n, **p: results.find(L8, n, file="h200_experiments.json", **lv.resolve(**p))["median_ms"]  # noqa: E731
    g8, g1 = counters.find(L8)["metrics"], counters.find(L8, group_m=1)["metrics"]
    tg8, tg1 = counters.find(L8, **TUNED_WARP_TILING)["metrics"], counters.find(L8, **TUNED_WARP_TILING, group_m=1)["metrics"]
    gb = lambda x: f"{x / 1e9:.2f} GB"  # noqa: E731
    changes = [ex(n, **p, group_m=1) / ex(n, **p) - 1 for n in (4096, 8192) for p in ({}, TUNED_WARP_TILING)]
    from gemm_course.models import KNOWN_GPUS
    bw = KNOWN_GPUS[prov["gpu"]].memory_bandwidth_gbs
    rate = g8["dram_read_bytes"] / (g8["duration_ns"] * 1e-9)
    claims += [f"raises the L2 hit rate from {g1['l2_hit_pct']:.1f}% to {g8['l2_hit_pct']:.1f}% and cuts the DRAM reads from "
               f"{gb(g1['dram_read_bytes'])} to {gb(g8['dram_read_bytes'])} (A and B are {2 * 4 * 4096 ** 2 / 1e9:.2f} GB together)",
               f"the time moves by only {abs(changes[0]):.1%} ({ex(4096):.3f} ms grouped, {ex(4096, group_m=1):.3f} ms plain)",
               f"At 8192³ the plain order is {changes[2]:.1%} slower ({ex(8192, group_m=1):.2f} against {ex(8192):.2f} ms)",
               f"{ex(4096, **TUNED_WARP_TILING):.3f} against {ex(4096, **TUNED_WARP_TILING, group_m=1):.3f} ms at 4096³ and "
               f"{ex(8192, **TUNED_WARP_TILING):.2f} against {ex(8192, **TUNED_WARP_TILING, group_m=1):.2f} ms at 8192³, with "
               f"{tg8['dram_read_bytes'] / 1e9:.2f} and {tg1['dram_read_bytes'] / 1e9:.2f} GB of DRAM reads",
               f"{gb(g8['dram_read_bytes'])} in {g8['duration_ns'] / 1e6:.1f} ms is {rate / 1e12:.2f} TB/s, {rate / 1e9 / bw:.0%} of the "
               f"H200's {bw / 1e3:.1f} TB/s",
               (f"with and without grouping the default issues in {g8['issue_active_pct']:.0f}% of its cycles"
                if f"{g8['issue_active_pct']:.0f}" == f"{g1['issue_active_pct']:.0f}" else
                f"the default issues in {g8['issue_active_pct']:.0f}% and {g1['issue_active_pct']:.0f}% of its cycles"),
               f"({gb(g1['dram_read_bytes'])} to {gb(g8['dram_read_bytes'])} at 4096³) but changes the time by at most {max(map(abs, changes)):.1%}"]
    assert abs(changes[1]) < 0.01 and abs(changes[3]) < 0.01  # "no measurable difference" for 64×256
    # predict, then measure
    from gemm_course.measure import predictions
    pv = {k: {r["key"]: r for r in predictions.compare(L8, **p)} for k, p in
          (("d", {}), ("t", TUNED_WARP_TILING))}
    assert pv["d"]["sectors_per_load_request"]["ratio"] == 1.0
    warp_k = {k: 4096 * (4096 // p["BM"]) * (4096 // p["BN"]) * (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])
              for k, p in (("d", lv.resolve()), ("t", tuned))}  # warps × k steps at 4096³
    per_k = {k: row["metrics"]["shared_load_wavefronts"] / warp_k[k] for k, row in (("d", cd), ("t", ctu))}
    # the reads per k and warp: (A, B) = (2, 2) for the default, (2, 4) for 64×256; solve for the passes of each
    b_pass = round((per_k["t"] - per_k["d"]) / 2)
    a_pass = round((per_k["d"] - 2 * b_pass) / 2)
    # the half-warp bank model (models.BankAccess, width 16) per read of A and of B, and per k and warp
    a_reads, b_reads = predictions._warp_tile_reads(lv.resolve())
    model_a, model_b = {predictions._shared_passes(x, 16)[0] for x in a_reads}, {predictions._shared_passes(x, 16)[0] for x in b_reads}
    assert len(model_a) == len(model_b) == 1
    model_a, model_b = model_a.pop(), model_b.pop()
    assert f"{pv['d']['wavefronts_per_shared_load']['predicted']:.2f}" == f"{pv['t']['wavefronts_per_shared_load']['predicted']:.2f}" == f"{model_a:.2f}"
    model_k = {k: pv[k]["shared_load_wavefronts"]["predicted"] / warp_k[k] for k in pv}
    assert model_k == {"d": 2 * model_a + 2 * model_b, "t": 2 * model_a + 4 * model_b}
    claims += [f"occupancy ({pv['d']['achieved_occupancy_pct']['measured']:.0f}% against the {pv['d']['achieved_occupancy_pct']['predicted']:.0f}%",
               f"The instruction count is {pv['d']['instructions']['ratio']:.2f} times the FFMA-only count for the default and "
               f"{pv['t']['instructions']['ratio']:.2f} times for the 64×256 setting",
               f"The shared load instructions are {pv['d']['shared_load_instructions']['ratio']:.2f} times the main loop's `LDS.128`",
               f"{model_a:g} passes (wavefronts) per `LDS.128`, for A and for B alike",
               f"per $k$ and warp that makes {model_k['d']:.0f} passes for the default (2 reads of A, 2 of B) and "
               f"{model_k['t']:.0f} for the 64×256 setting (2 of A, 4 of B)",
               f"The passes per shared load measure {pv['d']['wavefronts_per_shared_load']['measured']:.2f} for the default and "
               f"{pv['t']['wavefronts_per_shared_load']['measured']:.2f} for the 64×256 setting against the model's "
               f"{pv['d']['wavefronts_per_shared_load']['predicted']:.2f}",
               f"per $k$ and warp the default takes {per_k['d']:.0f} passes where the model says {model_k['d']:.0f}, "
               f"the 64×256 setting {per_k['t']:.0f} where it says {model_k['t']:.0f}",
               f"each read of B takes about {b_pass:.0f} passes and each read of A about {a_pass:.0f}",
               f"it gives a read of B the same {model_b:g} passes as a read of A",
               f"The DRAM reads are {pv['d']['dram_read_bytes']['ratio']:.1f} times the compulsory A and B for the default",
               f"A and B take {2 * 4 * 4096 ** 2 / 1e6:.0f} MB together, more than the {prov['l2_bytes'] / 1e6:.0f} MB L2 cache",
               f"({pv['d']['l2_read_bytes']['ratio']:.2f} times for the default, {pv['t']['l2_read_bytes']['ratio']:.2f} times for the 64×256 setting)"]
    assert (per_k["t"] - per_k["d"]) / 2 == pytest.approx(4, abs=0.05) and (per_k["d"] - 2 * 4) / 2 == pytest.approx(2, abs=0.05)
    assert model_a == model_b == a_pass and b_pass == 2 * model_b  # "right for A and wrong for B", "twice that"
    assert cd["metrics"]["shared_load_conflicts"] < 0.001 * cd["metrics"]["shared_load_instructions"]  # "near zero"
    # compile reports
    c2, c1, c64 = (gc.compile_report(L8, arch="sm_90"), gc.compile_report(L8, arch="sm_90", min_blocks=1),
                   gc.compile_report(L8, arch="sm_90", BM=64))
    assert c2.threads_per_block == 256 and 65536 // (256 * 2) == c2.registers
    assert c1.spill_store_bytes == c1.spill_load_bytes == 0 and not c64.spills
    claims += [f"capped at {c2.registers} registers per thread", f"spills {c2.spill_store_bytes} B per thread",
               f"reads back {c2.spill_load_bytes} B", f"it uses {c1.registers} registers",
               f"only one block, {c1.occupancy.warps_per_sm} of {c1.occupancy.max_warps_per_sm} warps",
               f"against {c2.occupancy.warps_per_sm} of {c2.occupancy.max_warps_per_sm} with the default",
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

def test_level8_bank_probe_and_source_counters():
    """The probe of Level 8's fragment loads, the kernel without parts of its shared traffic, and ncu's counters per
    instruction (clocks/h200_08_bank_probe.json): the passes the prose quotes, recomputed."""
    prose = _english_prose(ROOT / "notebooks" / "08_warp_tiling.ipynb")
    data = results.load(results.CLOCKS_DIR / "h200_08_bank_probe.json")
    rows = data["bank_probe"]
    # the probe builds with NVRTC alone and spills nothing (it must touch no memory but shared)
    from gemm_course.measure import peak
    from gemm_course.run.compile import COMPILE_OPTIONS, nvrtc_compile
    for r in rows:
        if r["kind"] == "probe":
            bm, bn, wm, wn = r["tile"]
            _, _, log = nvrtc_compile(peak.probe_source(), f"shared_load_probe<{bm}, {bn}, {wm}, {wn}, {r['pattern']}>",
                                      "sm_90", COMPILE_OPTIONS)
            assert re.search(r"\b0 bytes spill stores", log), log
    per = lambda m: m["shared_load_wavefronts"] / m["shared_load_instructions"]  # noqa: E731
    probe = {(tuple(r["tile"]), r["pattern"]): per(r["metrics"]) for r in rows if r["kind"] == "probe"}
    for tile in ((128, 128, 64, 32), (64, 256, 64, 64)):  # the same at both of Level 8's tiles
        assert [round(probe[tile, p], 3) for p in (0, 1, 3, 4)] == [2, 4, 4, 2]
    a, b, distinct, one = (probe[(64, 256, 64, 64), p] for p in (0, 1, 3, 4))
    kernel = {(r["params"].get("BN", 128), r["params"].get("stepped", False), r["variant"]): r["metrics"]
              for r in rows if r["kind"] == "level8"}
    for bn in (128, 256):
        waves = [kernel[bn, False, v]["shared_load_wavefronts"] for v in ("as_is", "no_b_copies", "no_a_stores", "neither")]
        assert (max(waves) - min(waves)) / min(waves) < 1e-4  # "within 0.01% of each other"
    only_lds = {bn: per(kernel[bn, False, "no_b_copies"]) for bn in (128, 256)}  # no copies: no @!PT LDS beside them
    assert only_lds[128] == pytest.approx((2 * a + 2 * b) / 4, abs=0.002) and only_lds[256] == pytest.approx((2 * a + 4 * b) / 6, abs=0.002)
    # the excess shared load instructions: those the copies bring, per warp and k-tile, and in the SASS counters
    lv = gc.get_level(L8)
    extra = {}
    for bn, p in ((128, {}), (256, TUNED_WARP_TILING)):
        r = lv.resolve(**p)
        warps_ktiles = (4096 // r["BM"]) * (4096 // r["BN"]) * (r["BM"] // r["WM"]) * (r["BN"] // r["WN"]) * (4096 // r["BK"])
        extra[bn] = (kernel[bn, False, "as_is"]["shared_load_instructions"] - kernel[bn, False, "no_b_copies"]["shared_load_instructions"]) / warps_ktiles
    src = data["source_counters"]["by_opcode"]
    r = lv.resolve(**TUNED_WARP_TILING)
    warps_ktiles = (4096 // r["BM"]) * (4096 // r["BN"]) * (r["BM"] // r["WM"]) * (r["BN"] // r["WN"]) * (4096 // r["BK"])
    never = src["never-executed LDS"]
    assert extra[128] == extra[256] == never["executed"] / warps_ktiles == 3 and never["wavefronts"] == 0
    lds = src["LDS.128"]
    assert lds["wavefronts"] == lds["wavefronts_ideal"] and lds["wavefronts_excessive"] == 0  # "the ideal number, not as excess"
    by_passes = data["source_counters"]["lds128_by_passes_per_instruction"]
    assert by_passes == {"2.0": 32, "4.0": 64}
    assert_prose_says([
        f"the excess is {extra[128]:.0f} instructions per warp and k-tile that load nothing (`@!PT LDS`",
        f"{a:.2f} passes for a read of A and {b:.2f} for a read of B, where 32 distinct contiguous `float4` take {distinct:.2f} "
        f"and one `float4` read by the whole warp {one:.2f}",
        f"give each of the {by_passes['2.0']} reads of A in a 64×256 k-tile 2 passes and each of the {by_passes['4.0']} reads of B 4",
        f"the passes per shared load are {only_lds[128]:.2f} for the default and {only_lds[256]:.2f} for the 64×256 setting, "
        f"exactly the mix of 2 and 4 (the {per(kernel[128, False, 'as_is']):.2f} and {per(kernel[256, False, 'as_is']):.2f} above",
    ], prose)


def test_level8_after_its_last_edit():
    """The kernel before and after its last edit (no pointer formed outside A or B), timed in turn in one process
    (clocks/h200_08_edit_ab.json), and the instructions the edit took out of the stepped loop."""
    from gemm_course.measure import counters
    prose = _english_prose(ROOT / "notebooks" / "08_warp_tiling.ipynb")
    lv = gc.get_level(L8)
    rows = results.load(results.CLOCKS_DIR / "h200_08_edit_ab.json")["level8_edit_ab"]

    def ms(n, source, **p):
        mine = [r["median_ms"] for r in rows if r["M"] == n and r["source"] == source and lv.resolve(**r["params"]) == lv.resolve(**p)]
        assert len(mine) == 2  # two passes
        return sum(mine) / 2

    change = {(n, json.dumps(p, sort_keys=True)): ms(n, "current", **p) / ms(n, "earlier", **p) - 1
              for n in (4096, 8192) for p in lv.showcase}
    others = [abs(v) for (n, p), v in change.items() if '"BK": 32' not in p]
    assert max(others) < 0.004  # "within 0.4%"
    bk4, bk8 = (-change[n, json.dumps(BK32, sort_keys=True)] for n in (4096, 8192))
    st4, st8 = ms(4096, "current", **STEPPED), ms(8192, "current", **STEPPED)
    b4, b8 = ms(4096, "current", **BK32), ms(8192, "current", **BK32)
    # the stepped loop before the edit, from the counters recorded then, less the code around the loop (measured after)
    after = results.load(results.RESULTS_DIR / COUNTERS_08)["counters"]
    before = results.load(results.RESULTS_DIR / COUNTERS_BEFORE_EDIT)["counters"]
    r = lv.resolve(**STEPPED)
    warps_ktiles = (4096 // r["BM"]) * (4096 // r["BN"]) * (r["BM"] // r["WM"]) * (r["BN"] // r["WN"]) * (4096 // r["BK"])
    loop_now = len(_main_loop(**STEPPED)) if find_disassembler() else 2243
    around = next(x for x in after if x["level"] == L8 and lv.resolve(**x["params"]) == r)["metrics"]["instructions"] / warps_ktiles - loop_now
    then = next(x for x in before if x["level"] == L8 and lv.resolve(**x["params"]) == r)["metrics"]["instructions"]
    loop_then = round(then / warps_ktiles - around)
    assert counters.find(L8, **STEPPED)["file"] == COUNTERS_08  # what the page quotes is the current kernel's
    assert_prose_says([
        f"the edit took {loop_then - loop_now} more instructions out of this loop",
        f"every showcase setting stays within {max(others):.1%} of it except `BK = 32` below",
        f"this setting is {bk4:.1%} faster at 4096³ and {bk8:.1%} faster at 8192³ than before it: in that A/B run it takes "
        f"{b8:.2f} ms at 8192³ against {st8:.2f} for `stepped=True` alone, {1 - b8 / st8:.1%} less, and at 4096³ still "
        f"{b4 / st4 - 1:.1%} more ({b4:.3f} against {st4:.3f} ms)",
    ], prose)


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


TOP_RUNGS = "h200_top_rungs_float32.json"  # the second run: every showcase setting, cuBLAS paired with each
STEPPED = {**TUNED_WARP_TILING, "stepped": True}
BK32 = {**STEPPED, "BK": 32}
FRAG2 = {**TUNED_WARP_TILING, "frag_buffers": 2}


def _top(n, **p):
    return results.find(L8, n, file=TOP_RUNGS, **gc.get_level(L8).resolve(**p))


def _after_fix_counters(level, **p):
    """Level 8's counters of the current kernel (COUNTERS_08), and cuBLAS's of the same run."""
    rows = results.load(results.RESULTS_DIR / COUNTERS_08)["counters"]
    if level == "cublas":
        return next(x for x in rows if x["level"] == "cublas")
    lv = gc.get_level(L8)
    return next(x for x in rows if x["level"] == L8 and lv.resolve(**x["params"]) == lv.resolve(**p))


def test_level8_second_run_and_the_last_few_percent():
    """The second run (paired cuBLAS, the kernel's own SM clock), the three changes to the 64×256 setting: times,
    ratios, clocks, counters of the current kernel (scheduler slots, stalls, shared-store passes) and compile reports."""
    from test_prose_pages import issue_slots
    prose = _english_prose(ROOT / "notebooks" / "08_warp_tiling.ipynb")
    lv = gc.get_level(L8)
    pct = lambda x: f"{x['ratio_to_cublas']:.1%}"  # noqa: E731
    recs = [r for r in results.recorded(L8, files=[results.RESULTS_DIR / TOP_RUNGS]) if r["level"] == L8]
    assert len(recs) == 2 * len(lv.showcase)
    assert "clock64" in results.load(results.RESULTS_DIR / TOP_RUNGS)["provenance"]["method"]  # the kernel's own clock
    assert {x for r in recs for x in (r["nvml_sm_clock_mhz"], r["cublas_paired_nvml_sm_clock_mhz"])} == {1980}
    k4 = [x for r in recs if r["M"] == 4096 for x in (r["sm_clock_mhz"], r["cublas_paired_sm_clock_mhz"])]
    kk8, kc8 = [r["sm_clock_mhz"] for r in recs if r["M"] == 8192], [r["cublas_paired_sm_clock_mhz"] for r in recs if r["M"] == 8192]
    assert (max(k4) - min(k4)) / max(k4) < 0.003 and f"{min(kc8):.0f}" == f"{max(kc8):.0f}"  # "one clock within 0.3%"
    d, s, t = ({n: _top(n, **p) for n in (4096, 8192)} for p in ({}, {"BM": 64, "BN": 128}, TUNED_WARP_TILING))
    st, bk, fb = ({n: _top(n, **p) for n in (4096, 8192)} for p in (STEPPED, BK32, FRAG2))
    first = {n: {k: _rec(L8, n, **p) for k, p in (("d", {}), ("s", {"BM": 64}), ("t", TUNED_WARP_TILING))} for n in (4096, 8192)}
    assert all(abs(x[n]["ratio_to_cublas"] - first[n][k]["ratio_to_cublas"]) < 0.01
               for n in (4096, 8192) for k, x in (("d", d), ("t", t)))  # "within a point of the first run"
    low = [r for r in recs if r["M"] == 8192 and r["sm_clock_mhz"] < min(k4)]
    assert low == [s[8192]]  # "it alone ran at a lower clock"
    s8 = s[8192]
    slower = 1 - s8["sm_clock_mhz"] / s8["cublas_paired_sm_clock_mhz"]
    cycles = s8["ratio_to_cublas"] * s8["cublas_paired_sm_clock_mhz"] / s8["sm_clock_mhz"]
    claims = [f"In this run the default reaches {pct(d[4096])} at 4096³ and {pct(d[8192])} at 8192³ and the 64×256 setting "
              f"{pct(t[4096])} and {pct(t[8192])}, within a point of the first run",
              f"At 4096³ every kernel and its cuBLAS pair ran at {min(k4):.0f} to {max(k4):.0f} MHz, one clock within 0.3%; at 8192³ "
              f"the kernels ran at {min(kk8):.0f} to {max(kk8):.0f} MHz and cuBLAS at {min(kc8):.0f} MHz (NVML, read beside them, said "
              f"1980 MHz throughout",
              f"The 64×128 setting reaches {pct(s[4096])} at 4096³ ({pct(first[4096]['s'])} in the first run) and {pct(s8)} at 8192³ "
              f"({pct(first[8192]['s'])}): at 8192³ it alone ran at a lower clock, {s8['sm_clock_mhz']:.0f} MHz against its paired "
              f"cuBLAS's {s8['cublas_paired_sm_clock_mhz']:.0f} MHz, {slower:.1%} lower, and in cycles (time × clock on each side) it is "
              f"at {cycles:.1%} of cuBLAS"]
    assert 1 - max(t[n]["ratio_to_cublas"] for n in t) > 0.04 and 1 - min(t[n]["ratio_to_cublas"] for n in t) < 0.06  # "about 5% ahead"
    four = [x for k in (t, st, bk, fb) for n in (4096, 8192) for x in (k[n]["sm_clock_mhz"], k[n]["cublas_paired_sm_clock_mhz"])]
    assert all(abs(k[n]["sm_clock_mhz"] / k[n]["cublas_paired_sm_clock_mhz"] - 1) < 0.003 for k in (t, st, bk, fb) for n in (4096, 8192))
    claims.append(f"at 4096³ and at 8192³ all of them and their paired cuBLAS ran at {min(four):.0f} to {max(four):.0f} MHz, measured on "
                  f"the SMs, so both sizes count as evidence")
    # the counters at 4096³, every row from the one counter run of the current kernel
    rows = {k: _after_fix_counters(L8, **p) for k, p in (("t", TUNED_WARP_TILING), ("st", STEPPED), ("bk", BK32), ("fb", FRAG2))}
    rows["cub"] = _after_fix_counters("cublas")
    sl = {k: issue_slots(r) for k, r in rows.items()}
    m = {k: r["metrics"] for k, r in rows.items()}
    g = lambda x: f"{x / 1e9:.2f}"  # noqa: E731
    f1 = lambda x: f"{x:.1f}"  # noqa: E731
    stall = lambda k, name: f"{m[k]['stall_' + name]:.2f}"  # noqa: E731
    ms = lambda r, f: f"{r['median_ms']:{f}}"  # noqa: E731
    change = lambda a, b: b["median_ms"] / a["median_ms"] - 1  # noqa: E731
    p = lv.resolve(**TUNED_WARP_TILING)
    threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
    warps = (4096 // p["BM"]) * (4096 // p["BN"]) * threads // 32
    per_warp_tile = lambda k, bk_: m[k]["instructions"] / (warps * 4096 // bk_)  # noqa: E731
    ct, cs, cb, cf = (gc.compile_report(L8, arch="sm_90", **x) for x in (TUNED_WARP_TILING, STEPPED, BK32, FRAG2))
    assert cs.occupancy.blocks_per_sm == cb.occupancy.blocks_per_sm == 2 and cs.occupancy.warps_per_sm == 8
    assert cf.registers == 255 and not (ct.spills or cs.spills or cb.spills or cf.spills)
    # step 1: stepped pointers
    claims += [f"In each k-tile a thread issues {p['BM'] * p['BK'] // 4 // threads} loads of A (`LDG.128`) and "
               f"{p['BK'] * p['BN'] // 4 // threads} sixteen-byte copies of B",
               f"The counter agrees: {g(m['t']['instructions'])} billion warp instructions become {g(m['st']['instructions'])} billion, "
               f"that is {per_warp_tile('t', 16):.0f} and {per_warp_tile('st', 16):.0f} per warp and k-tile over {warps} warps and "
               f"{4096 // 16} k-tiles",
               "These counters and the times in this section are of the current kernel",
               f"The share of cycles that issue moves from {f1(sl['t']['issue'])}% to {f1(sl['st']['issue'])}%, and the slots that carry "
               f"an FFMA rise from {f1(sl['t']['ffma'])}% to {f1(sl['st']['ffma'])}% while those with another instruction fall from "
               f"{f1(sl['t']['other'])}% to {f1(sl['st']['other'])}%",
               f"The time falls by {-change(t[4096], st[4096]):.1%} at 4096³, from {ms(t[4096], '.3f')} to {ms(st[4096], '.3f')} ms, "
               f"which takes the setting from {pct(t[4096])} to {pct(st[4096])} of cuBLAS; at 8192³ from {ms(t[8192], '.2f')} to "
               f"{ms(st[8192], '.2f')} ms, {pct(t[8192])} to {pct(st[8192])}",
               f"{cs.registers} registers instead of {ct.registers}, still {cs.occupancy.blocks_per_sm} blocks and "
               f"{cs.occupancy.warps_per_sm} warps per SM"]
    # step 2: BK = 32 (dynamic shared memory: two buffers of A, padded by 4, and of B)
    pb = lv.resolve(**BK32)
    tiles = 2 * pb["BK"] * (pb["BM"] + 4) * 4 + 2 * pb["BK"] * pb["BN"] * 4
    assert tiles > 48 * 1024 and cb.dynamic_shared_bytes == tiles
    sts = lambda k: f"{m[k]['shared_store_wavefronts'] / m[k]['shared_store_instructions']:.2f}"  # noqa: E731
    clocks_file = "clocks/h200_top_rungs_float32_clocks.json"  # the run before, after the same edit
    cl = {(n, k): results.find(L8, n, file=clocks_file, **lv.resolve(**x)) for n in (4096, 8192) for k, x in (("bk", BK32), ("st", STEPPED))}
    assert all(change(st[n], bk[n]) < 0 for n in (4096, 8192)) and cl[8192, "bk"]["tflops"] > cl[8192, "st"]["tflops"]  # "ahead in both"
    assert cl[4096, "bk"]["tflops"] < cl[4096, "st"]["tflops"]  # "disagree" at 4096³
    assert abs(change(st[4096], bk[4096])) < abs(cl[4096, "bk"]["median_ms"] / cl[4096, "st"]["median_ms"] - 1)
    assert m["bk"]["stall_no_instruction"] / m["st"]["stall_no_instruction"] > 2  # "more than doubles"
    assert m["bk"]["stall_short_scoreboard"] > m["st"]["stall_short_scoreboard"]
    claims += [f"The two buffers of A and B then take {tiles / 1000:.0f} KB, more than the 48 KB",
               f"the counter counts {g(m['bk']['instructions'])} billion instructions against {g(m['st']['instructions'])}, "
               f"and the barrier stall falls from {stall('st', 'barrier')} to {stall('bk', 'barrier')} warps per issued instruction",
               f"In the second run the kernel takes {ms(bk[4096], '.3f')} ms at 4096³, {-change(st[4096], bk[4096]):.1%} less than with "
               f"`stepped=True` alone ({pct(bk[4096])} of cuBLAS against {pct(st[4096])}), and {ms(bk[8192], '.2f')} against "
               f"{ms(st[8192], '.2f')} ms at 8192³ ({pct(bk[8192])} against {pct(st[8192])}), {-change(st[8192], bk[8192]):.1%} less",
               f"(`{clocks_file}`), measured {pct(cl[4096, 'bk'])} against {pct(cl[4096, 'st'])} at 4096³ and {pct(cl[8192, 'bk'])} "
               f"against {pct(cl[8192, 'st'])} at 8192³",
               f"the share of cycles that issue moves from {f1(sl['st']['issue'])}% to {f1(sl['bk']['issue'])}%, so the slots with an "
               f"FFMA rise only from {f1(sl['st']['ffma'])}% to {f1(sl['bk']['ffma'])}%",
               f"`no_instruction` (a warp waits for its next instruction to be fetched) from {stall('st', 'no_instruction')} to "
               f"{stall('bk', 'no_instruction')}; `short_scoreboard` (a warp waits for the result of a shared-memory access) grows from "
               f"{stall('st', 'short_scoreboard')} to {stall('bk', 'short_scoreboard')}",
               f"the passes per shared store go from {sts('st')} to {sts('bk')}",
               f"A's rows are {pb['BM'] + 4} floats apart, so `As[k][m]` lies in bank ({(pb['BM'] + 4) % 32}k + m) mod 32"]
    # the bank model of A's transposed store (store_shared): lane → (m, k) = (e / (BK/4), 4·(e % (BK/4))), word (k·68 + m)
    for bk_, passes in ((16, 2), (32, 4)):
        words = {(lane // (bk_ // 4), 4 * (lane % (bk_ // 4))) for lane in range(32)}
        per_bank = Counter(((k * (pb["BM"] + 4) + mm) % 32) for mm, k in words)
        assert max(per_bank.values()) == passes and abs(float(sts("st" if bk_ == 16 else "bk")) - passes) < 0.02
    # step 3: fragment double buffering (against the plain 64×256 setting)
    assert sl["fb"]["issue"] < sl["t"]["issue"] and m["fb"]["instructions"] / m["t"]["instructions"] < 1.005
    assert all(m["fb"]["stall_" + k] > m["t"]["stall_" + k] for k in ("short_scoreboard", "wait", "dispatch_stall"))  # "grow"
    claims += [f"The kernel got slower all the same: {ms(fb[4096], '.3f')} ms at 4096³ against {ms(t[4096], '.3f')}, "
               f"{change(t[4096], fb[4096]):.1%} more time, {pct(fb[4096])} of cuBLAS against {pct(t[4096])}; at 8192³ "
               f"{ms(fb[8192], '.2f')} against {ms(t[8192], '.2f')} ms, {pct(fb[8192])} against {pct(t[8192])}",
               f"It issues less often: in {sl['fb']['issue']:.0f}% of the cycles against {sl['t']['issue']:.0f}%, with an FFMA in "
               f"{sl['fb']['ffma']:.0f}% of the slots against {sl['t']['ffma']:.0f}%",
               f"`short_scoreboard` from {stall('t', 'short_scoreboard')} to {stall('fb', 'short_scoreboard')}, `wait`",
               f"of an instruction it depends on) from {stall('t', 'wait')} to {stall('fb', 'wait')} and `dispatch_stall` from "
               f"{stall('t', 'dispatch_stall')} to {stall('fb', 'dispatch_stall')}",
               f"the second set is {4 * p['WM'] // 32 + 4 * p['WN'] // 16} more values to hold, and the kernel sits at "
               f"{cf.registers} registers, the most a thread can have ({ct.registers} before)"]
    # together
    occ = round(m["st"]["achieved_occupancy_pct"] / 100 * 64)
    assert occ == round(m["bk"]["achieved_occupancy_pct"] / 100 * 64) == round(m["cub"]["achieved_occupancy_pct"] / 100 * 64) == 8
    assert max((STEPPED, BK32, FRAG2, TUNED_WARP_TILING), key=lambda x: _top(8192, **x)["tflops"]) == BK32
    # one number where both settings round to it, else the two (stepped=True first)
    both = {k: x if x == y else f"{x}% and {y}" for k in ("other", "idle")
            for x, y in [(f"{sl['st'][k]:.0f}", f"{sl['bk'][k]:.0f}")]}
    claims += [f"the two fastest FP32 settings of the course are the 64×256 tile with `stepped=True`, {st[4096]['tflops']:.2f} TFLOPS "
               f"at 4096³ ({pct(st[4096])} of cuBLAS) and {st[8192]['tflops']:.2f} at 8192³ ({pct(st[8192])}), and the same with "
               f"`BK = 32`, {bk[4096]['tflops']:.2f} ({pct(bk[4096])}) and {bk[8192]['tflops']:.2f} ({pct(bk[8192])}) in the same run, "
               f"each at the same clock as its paired cuBLAS within 0.3%: {1 - bk[8192]['ratio_to_cublas']:.1%} short of cuBLAS at "
               f"8192³ with the deeper k-tiles",
               f"fewer other instructions than cuBLAS's ({both['other']}% against {sl['cub']['other']:.0f}%); what remains is the cycles "
               f"with nothing issued, {both['idle']}% against {sl['cub']['idle']:.0f}%, with the same {occ} warps per SM",
               # how close to cuBLAS, takeaways
               f"With one moving pointer per operand it reaches {pct(st[4096])} at 4096³ and {pct(st[8192])} at 8192³ in the second "
               f"run, and with 32-deep k-tiles on top {pct(bk[4096])} and {pct(bk[8192])}",
               f"In the counter run of the current kernel the moving pointers lower the other instructions to {sl['st']['other']:.0f}% "
               f"and leave the empty cycles at {sl['st']['idle']:.0f}%",
               f"gives the fastest FP32 settings: {pct(st[4096])} of cuBLAS at 4096³ and {pct(st[8192])} at 8192³ with moving pointers, "
               f"{pct(bk[4096])} and {pct(bk[8192])} with 32-deep k-tiles as well, each kernel at its paired cuBLAS's clock within 0.3% "
               f"({min(four):.0f} to {max(four):.0f} MHz measured on the SMs)",
               f"Double-buffered fragments, at {cf.registers} registers, lose time ({pct(fb[4096])} and {pct(fb[8192])}). "
               f"What is left is the cycles with nothing issued: {sl['st']['idle']:.0f}% against cuBLAS's {sl['cub']['idle']:.0f}%"]
    assert_prose_says(claims, prose)


_SASS = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_LABEL = re.compile(r"^\s*\.(L_x_\d+):")
_REG = re.compile(r"(?<![A-Z])R(\d+)")


def _main_loop(**params):
    """The (opcode, operands) of the main loop's SASS: the backward branch whose body holds the most FFMAs."""
    from gemm_course.inspect.sass import disassemble
    lv = gc.get_level(L8)
    code, labels = [], {}
    for line in disassemble(lv, arch="sm_90", **lv.resolve(**params)).splitlines():
        if m := _LABEL.match(line):
            labels[m.group(1)] = len(code)
        elif m := _SASS.search(line):
            code.append((m.group(1), m.group(2)))
    loops = [code[labels[m.group(1)]:i + 1] for i, (op, args) in enumerate(code)
             if op == "BRA" and (m := re.search(r"\.(L_x_\d+)", args)) and labels.get(m.group(1), i + 1) <= i]
    return max(loops, key=lambda body: sum(op == "FFMA" for op, _ in body))


def _lds_distances(body):
    """For each LDS.128 of a loop body: (FFMAs before it in the body, instructions until one reads its registers),
    going round the loop."""
    out, ffma = [], 0
    for i, (op, args) in enumerate(body):
        ffma += op == "FFMA"
        if op != "LDS.128":
            continue
        first = int(_REG.search(args).group(1))
        dest = {first, first + 1, first + 2, first + 3}
        for j in range(1, len(body)):
            op2, args2 = body[(i + j) % len(body)]
            regs = [int(r) for r in _REG.findall(args2)]
            sources = regs if op2.startswith("ST") else regs[1:]
            if dest & set(sources):
                out.append((ffma, j))
                break
    return out


@pytest.mark.skipif(not find_disassembler(), reason="needs nvdisasm (nvidia-cuda-nvdisasm wheel) or cuobjdump")
def test_level8_main_loop_sass():
    """The per-k-tile SASS numbers of the last-few-percent section: the loop's length and mix, and how soon each
    shared load is read (one fragment set against two)."""
    prose = _english_prose(ROOT / "notebooks" / "08_warp_tiling.ipynb")
    loops = {k: _main_loop(**p) for k, p in (("t", TUNED_WARP_TILING), ("st", STEPPED), ("bk", BK32), ("fb", FRAG2))}
    mix = {k: Counter(op for op, _ in body) for k, body in loops.items()}
    n = {k: len(body) for k, body in loops.items()}
    same = ("FFMA", "LDS.128", "LDG.E.128.CONSTANT", "LDGSTS.E.BYPASS.128", "STS", "BAR.SYNC.DEFER_BLOCKING")
    # "the FFMAs, the LDS.128 and the copies are the same": the instructions removed are the integer work around them
    assert all(mix["t"][op] == mix["st"][op] == mix["fb"][op] for op in same)
    assert all(mix["bk"][op] == 2 * mix["st"][op] for op in same[:-1]) and mix["bk"][same[-1]] == 1  # a barrier per k-tile
    # the counters: instructions = warps × k-tiles × the loop, plus the code around it. The loop is the kernel as it
    # is now, so the counters are those recorded after its last edit (no pointer formed outside A or B)
    lv = gc.get_level(L8)
    after_fix = results.load(results.RESULTS_DIR / COUNTERS_08)["counters"]
    for k, p in (("t", TUNED_WARP_TILING), ("st", STEPPED), ("bk", BK32), ("fb", FRAG2)):
        r = lv.resolve(**p)
        warps, ktiles = (4096 // r["BM"]) * (4096 // r["BN"]) * (r["BM"] // r["WM"]) * (r["BN"] // r["WN"]), 4096 // r["BK"]
        row = next(x for x in after_fix if x["level"] == L8 and lv.resolve(**x["params"]) == r)
        assert 0 < row["metrics"]["instructions"] / (warps * ktiles) - n[k] < 3
    dist = {k: _lds_distances(loops[k]) for k in ("t", "fb")}
    near = lambda k, x: [f for f, d in dist[k] if d <= x]  # noqa: E731
    assert near("t", 10) == near("t", 30) == [0, 0, 0]  # all three at the first step after the barrier
    after_barrier = [d for f, d in dist["fb"] if f == mix["fb"]["FFMA"] - 128]  # the loads between the barrier and the last step
    assert len(after_barrier) == 6 and all(f > 0 for f in near("fb", 30))
    claims = [f"the loop of one k-tile shrinks from {n['t']} instructions to {n['st']}; the {mix['t']['FFMA']} FFMAs, the "
              f"{mix['t']['LDS.128']} `LDS.128` and the copies are the same, and the {n['t'] - n['st']} removed ones",
              f"Per 16 steps of k the SASS holds {n['bk'] // 2} instructions ({n['bk']} per 32-deep k-tile) against {n['st']}",
              f"the loop body doubles to {n['bk']} instructions, {n['bk'] * 16 / 1000:.0f} KB of code at 16 bytes per instruction",
              f"{len(near('t', 10))} of the {mix['t']['LDS.128']} `LDS.128` of a k-tile are read within 10 instructions of being issued",
              f"the loads after the barrier are read {min(after_barrier)} or more instructions later",
              f"It does not execute more: {n['fb']} instructions per k-tile against {n['t']}",
              f"the compiler now issues {len(near('fb', 10))} of the {mix['fb']['LDS.128']} shared loads within 10 instructions of "
              f"their first use and {len(near('fb', 30))} within 30, where the one-set kernel has {len(near('t', 30))} of each",
              f"removes {n['t'] - n['st']} of the {n['t']} instructions of a 64×256 k-tile"]
    assert_prose_says(claims, prose)
