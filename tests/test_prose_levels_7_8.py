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
