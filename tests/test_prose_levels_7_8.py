"""Every number the Level 7 and Level 8 prose quotes, recomputed from the recorded H200 files, the
compile reports and the disassembly (no GPU needed); plus the Level 8 tile-hierarchy figure."""
import re
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
    sweep = [x for x in _sweep(L8) if x["file"] != "h200_experiments.json"]  # the sweep's own run, not the experiments
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
    from gemm_course import counters
    from test_prose_pages import issue_slots
    cd, cs, ctu, ccb = (counters.find(L8), counters.find(L8, BM=64), counters.find(L8, **TUNED_WARP_TILING),
                        counters.find("cublas", dtype="float32"))
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
               f"the default issues in {g8['issue_active_pct']:.0f}% and {g1['issue_active_pct']:.0f}% of its cycles",
               f"({gb(g1['dram_read_bytes'])} to {gb(g8['dram_read_bytes'])} at 4096³) but changes the time by at most {max(map(abs, changes)):.1%}"]
    assert abs(changes[1]) < 0.01 and abs(changes[3]) < 0.01  # "no measurable difference" for 64×256
    # predict, then measure
    from gemm_course import predictions
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
               f"What the {b_pass - model_b:.0f} extra passes of each read of B are",
               f"The DRAM reads are {pv['d']['dram_read_bytes']['ratio']:.1f} times the compulsory A and B for the default",
               f"A and B take {2 * 4 * 4096 ** 2 / 1e6:.0f} MB together, more than the {prov['l2_bytes'] / 2 ** 20:.0f} MB L2 cache",
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


def test_level8_second_run_and_the_last_few_percent():
    """The second run (paired cuBLAS, SM clock), the three changes to the 64×256 setting: times, ratios,
    clocks, counters (scheduler slots, stalls, shared-store passes) and compile reports."""
    from gemm_course import counters
    from test_prose_pages import issue_slots
    prose = _english_prose(ROOT / "notebooks" / "08_warp_tiling.ipynb")
    lv = gc.get_level(L8)
    pct = lambda x: f"{x['ratio_to_cublas']:.1%}"  # noqa: E731
    # the second run: clocks. Every kernel and its paired cuBLAS at the top clock, but the 64×128 one at 8192³
    recs = [r for r in results.recorded(L8, files=[results.RESULTS_DIR / TOP_RUNGS]) if r["level"] == L8]
    assert len(recs) == 2 * len(lv.showcase)
    top_mhz = results.load(results.RESULTS_DIR / TOP_RUNGS)["provenance"]["sm_clock_max_mhz"]
    low = [r for r in recs if r["sm_clock_mhz"] != top_mhz or r["cublas_paired_sm_clock_mhz"] != top_mhz]
    assert [(r["params"]["BN"], r["M"]) for r in low] == [(128, 8192)] and low[0]["cublas_paired_sm_clock_mhz"] == top_mhz
    # those are NVML's readings; the re-recording measured the clock on the SMs (bench.KernelClock)
    c4, c8 = results.clock_range(L8, "float32", 4096), results.clock_range(L8, "float32", 8192)
    lo4, hi4 = min(c4["kernel_min"], c4["cublas_min"]), max(c4["kernel_max"], c4["cublas_max"])
    assert (hi4 - lo4) / hi4 < 0.002  # "one clock within 0.2%"
    assert_prose_says([
        "by NVML's reading",
        f"at 4096³ these FP32 kernels and their cuBLAS pairs ran at {lo4:.0f} to {hi4:.0f} MHz, one clock within 0.2%, "
        f"and at 8192³ the kernels at {c8['kernel_min']:.0f} to {c8['kernel_max']:.0f} MHz and cuBLAS at "
        f"{c8['cublas_min']:.0f} to {c8['cublas_max']:.0f}",
        f"by NVML's reading ({lo4:.0f} to {hi4:.0f} MHz measured on the SMs at 4096³)",
        "the clock measured on the SMs in the later run stayed within 2% of that",
    ], prose)
    assert min(c8["kernel_min"], c8["cublas_min"], lo4) > 0.98 * top_mhz  # "within 2%" at both sizes
    d, s, t = ({n: _top(n, **p) for n in (4096, 8192)} for p in ({}, {"BM": 64, "BN": 128}, TUNED_WARP_TILING))
    st, bk, fb = ({n: _top(n, **p) for n in (4096, 8192)} for p in (STEPPED, BK32, FRAG2))
    first = {n: {k: _rec(L8, n, **p) for k, p in (("d", {}), ("s", {"BM": 64}), ("t", TUNED_WARP_TILING))} for n in (4096, 8192)}
    assert all(abs(x[n]["ratio_to_cublas"] - first[n][k]["ratio_to_cublas"]) < 0.01
               for n in (4096, 8192) for k, x in (("d", d), ("t", t)))  # "within a point of the first run"
    assert abs(s[4096]["ratio_to_cublas"] - first[4096]["s"]["ratio_to_cublas"]) < 0.002
    drop = 1 - s[8192]["ratio_to_cublas"] / first[8192]["s"]["ratio_to_cublas"]
    slower = 1 - s[8192]["sm_clock_mhz"] / s[8192]["cublas_paired_sm_clock_mhz"]
    assert abs(drop - slower) < 0.005  # "about the size of the drop"
    claims = [f"In this run the default reaches {pct(d[4096])} at 4096³ and {pct(d[8192])} at 8192³ and the 64×256 setting "
              f"{pct(t[4096])} and {pct(t[8192])}, within a point of the first run",
              f"at {top_mhz} MHz, the top clock",
              f"The 64×128 setting reaches {pct(s[4096])} at 4096³ ({pct(first[4096]['s'])} in the first run), but {pct(s[8192])} at 8192³ against "
              f"{pct(first[8192]['s'])}: it alone ran at a lower clock there, {s[8192]['sm_clock_mhz']:.0f} MHz against its "
              f"paired cuBLAS's {s[8192]['cublas_paired_sm_clock_mhz']:.0f} MHz, {slower:.1%} lower"]
    assert 1 - max(t[n]["ratio_to_cublas"] for n in t) > 0.04 and 1 - min(t[n]["ratio_to_cublas"] for n in t) < 0.06  # "about 5% ahead"
    # the counters at 4096³: the 64×256 setting and cuBLAS from the first counter run, the three changes from the second
    rows = {k: counters.find(L8, **p) for k, p in (("t", TUNED_WARP_TILING), ("st", STEPPED), ("bk", BK32), ("fb", FRAG2))}
    rows["cub"] = counters.find("cublas", dtype="float32")
    assert rows["t"]["file"] == rows["cub"]["file"] != rows["st"]["file"] == rows["bk"]["file"] == rows["fb"]["file"]
    sl = {k: issue_slots(r) for k, r in rows.items()}
    m = {k: r["metrics"] for k, r in rows.items()}
    g = lambda x: f"{x / 1e9:.2f}"  # noqa: E731
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
    assert m["st"]["issue_active_pct"] == pytest.approx(m["t"]["issue_active_pct"], abs=0.1)  # "stays at"
    claims += [f"In each k-tile a thread issues {p['BM'] * p['BK'] // 4 // threads} loads of A (`LDG.128`) and "
               f"{p['BK'] * p['BN'] // 4 // threads} sixteen-byte copies of B",
               f"The counter agrees: {g(m['t']['instructions'])} billion warp instructions become {g(m['st']['instructions'])} billion, "
               f"that is {per_warp_tile('t', 16):.0f} and {per_warp_tile('st', 16):.0f} per warp and k-tile over {warps} warps and "
               f"{4096 // 16} k-tiles",
               f"The share of cycles that issue stays at {sl['st']['issue']:.0f}%, so the slots that carry an FFMA rise from "
               f"{sl['t']['ffma']:.0f}% to {sl['st']['ffma']:.0f}% and those with another instruction fall from {sl['t']['other']:.0f}% "
               f"to {sl['st']['other']:.0f}%",
               f"The time falls by {-change(t[4096], st[4096]):.1%} at 4096³, from {ms(t[4096], '.3f')} to {ms(st[4096], '.3f')} ms, "
               f"which takes the setting from {pct(t[4096])} to {pct(st[4096])} of cuBLAS; at 8192³ from {ms(t[8192], '.2f')} to "
               f"{ms(st[8192], '.2f')} ms, {pct(t[8192])} to {pct(st[8192])}",
               f"{cs.registers} registers instead of {ct.registers}, still {cs.occupancy.blocks_per_sm} blocks and "
               f"{cs.occupancy.warps_per_sm} warps per SM"]
    # step 2: BK = 32 (dynamic shared memory: two buffers of A, padded by 4, and of B)
    pb = lv.resolve(**BK32)
    tiles = 2 * pb["BK"] * (pb["BM"] + 4) * 4 + 2 * pb["BK"] * pb["BN"] * 4
    assert tiles > 48 * 1024 and cb.dynamic_shared_bytes == tiles
    assert sl["bk"]["issue"] < sl["st"]["issue"] and change(st[4096], bk[4096]) > 0 and abs(change(st[8192], bk[8192])) < 0.002
    sts = lambda k: f"{m[k]['shared_store_wavefronts'] / m[k]['shared_store_instructions']:.2f}"  # noqa: E731
    claims += [f"The two buffers of A and B then take {tiles / 1000:.0f} KB, more than the 48 KB",
               f"the counter counts {g(m['bk']['instructions'])} billion instructions against {g(m['st']['instructions'])}, "
               f"and the barrier stall falls from {stall('st', 'barrier')} to {stall('bk', 'barrier')} warps per issued instruction",
               f"At 4096³ the kernel takes {ms(bk[4096], '.3f')} ms, {change(st[4096], bk[4096]):.1%} more than with `stepped=True` "
               f"alone ({pct(bk[4096])} of cuBLAS against {pct(st[4096])}); at 8192³ {ms(bk[8192], '.2f')} against "
               f"{ms(st[8192], '.2f')} ms ({pct(bk[8192])} against {pct(st[8192])}), a difference of {abs(change(st[8192], bk[8192])):.1%}",
               f"the share of cycles that issue falls from {sl['st']['issue']:.0f}% to {sl['bk']['issue']:.0f}%, so the slots "
               f"with an FFMA are {sl['bk']['ffma']:.0f}% against {sl['st']['ffma']:.0f}%",
               f"`short_scoreboard` (a warp waits for the result of a shared-memory access) from {stall('st', 'short_scoreboard')} to "
               f"{stall('bk', 'short_scoreboard')}, and `no_instruction` (a warp waits for its next instruction to be fetched) from "
               f"{stall('st', 'no_instruction')} to {stall('bk', 'no_instruction')}",
               f"the passes per shared store go from {sts('st')} to {sts('bk')}",
               f"A's rows are {pb['BM'] + 4} floats apart, so `As[k][m]` lies in bank ({(pb['BM'] + 4) % 32}k + m) mod 32"]
    for k in ("short_scoreboard", "no_instruction"):  # "Two stall reasons double"
        assert m["bk"]["stall_" + k] / m["st"]["stall_" + k] == pytest.approx(2.2, abs=0.3)
    # the bank model of A's transposed store (store_shared): lane → (m, k) = (e / (BK/4), 4·(e % (BK/4))), word (k·68 + m)
    for bk_, passes in ((16, 2), (32, 4)):
        words = {(lane // (bk_ // 4), 4 * (lane % (bk_ // 4))) for lane in range(32)}
        per_bank = Counter(((k * (pb["BM"] + 4) + mm) % 32) for mm, k in words)
        assert max(per_bank.values()) == passes and abs(float(sts("st" if bk_ == 16 else "bk")) - passes) < 0.02
    # step 3: fragment double buffering (against the plain 64×256 setting)
    assert sl["fb"]["issue"] < sl["t"]["issue"] and m["fb"]["instructions"] / m["t"]["instructions"] < 1.005
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
    best = max((STEPPED, BK32, FRAG2, TUNED_WARP_TILING), key=lambda x: _top(4096, **x)["tflops"])
    assert best == STEPPED and bk[8192]["tflops"] / st[8192]["tflops"] - 1 < 0.002  # "ties at 8192³"
    claims += [f"the fastest FP32 setting of the course is the 64×256 tile with `stepped=True`: {st[4096]['tflops']:.2f} TFLOPS "
               f"at 4096³, {pct(st[4096])} of cuBLAS, and {st[8192]['tflops']:.2f} at 8192³, {pct(st[8192])}, that is "
               f"{1 - st[4096]['ratio_to_cublas']:.1%} and {1 - st[8192]['ratio_to_cublas']:.1%} short of cuBLAS",
               f"With `BK = 32` it ties at 8192³ ({pct(bk[8192])}) and loses at 4096³",
               f"fewer other instructions than cuBLAS's ({sl['st']['other']:.0f}% against {sl['cub']['other']:.0f}%); what remains is "
               f"the cycles with nothing issued, {sl['st']['idle']:.0f}% against {sl['cub']['idle']:.0f}%, with the same "
               f"{round(m['st']['achieved_occupancy_pct'] / 100 * 64)} warps per SM",
               # how close to cuBLAS, takeaways
               f"With one moving pointer per operand it gets closest, {pct(st[4096])} at 4096³ and {pct(st[8192])} at 8192³ in the second run",
               f"The moving pointers lower the other instructions to {sl['st']['other']:.0f}% and leave the empty cycles at "
               f"{sl['st']['idle']:.0f}%",
               f"gives the fastest FP32 setting: {pct(st[4096])} of cuBLAS at 4096³ and {pct(st[8192])} at 8192³, with kernel and "
               f"cuBLAS at {top_mhz} MHz by NVML's reading ({lo4:.0f} to {hi4:.0f} MHz measured on the SMs at 4096³). "
               f"32-deep k-tiles save instructions but not time ({pct(bk[4096])} and {pct(bk[8192])}), "
               f"and double-buffered fragments, at {cf.registers} registers, lose time ({pct(fb[4096])} and {pct(fb[8192])}). "
               f"What is left is the cycles with nothing issued: {sl['st']['idle']:.0f}% against cuBLAS's {sl['cub']['idle']:.0f}%"]
    assert round(m["st"]["achieved_occupancy_pct"] / 100 * 64) == round(m["cub"]["achieved_occupancy_pct"] / 100 * 64) == 8
    assert_prose_says(claims, prose)


_SASS = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_LABEL = re.compile(r"^\s*\.(L_x_\d+):")
_REG = re.compile(r"(?<![A-Z])R(\d+)")


def _main_loop(**params):
    """The (opcode, operands) of the main loop's SASS: the backward branch whose body holds the most FFMAs."""
    from gemm_course.sass import disassemble
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
    # the counters: instructions = warps × k-tiles × the loop, plus the code around it
    from gemm_course import counters
    lv = gc.get_level(L8)
    for k, p in (("t", TUNED_WARP_TILING), ("st", STEPPED), ("bk", BK32), ("fb", FRAG2)):
        r = lv.resolve(**p)
        warps, ktiles = (4096 // r["BM"]) * (4096 // r["BN"]) * (r["BM"] // r["WM"]) * (r["BN"] // r["WN"]), 4096 // r["BK"]
        per = counters.find(L8, **p)["metrics"]["instructions"] / (warps * ktiles)
        assert 0 < per - n[k] < 3
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
