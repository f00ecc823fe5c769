"""Every number the Level 10 (mma.sync + ldmatrix + cp.async) prose quotes, recomputed from the recorded
H200 files, the compile reports and the disassembly (no GPU needed); and the figures it draws."""
from pathlib import Path

import gemm_course as gc
from gemm_course.sass import kernel_mix, memory_summary
from gemm_course import diagrams, results
from gemm_course.sass import find_disassembler
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks" / "10_mma_pipeline.ipynb"
L8, L9, L10 = "08_warp_tiling", "09_wmma", "10_mma_pipeline"
YARDSTICK = 0.60  # the page's yardstick: is 60% of cuBLAS at 4096³ and 8192³ within this design's reach?


def _rec(level, n, dtype=None, **p):
    return results.find(level, n, dtype=dtype, **gc.get_level(level).resolve(**p))


def _cublas(level, n):
    return next(r for r in results.recorded(level, dtype="float16") if r["level"] == "cublas" and r["M"] == n == r["N"] == r["K"])


def _mix(full=False, **p):
    """The memory summary (or with full=True the whole instruction mix) for sm_90."""
    mix, _ = kernel_mix(L10, "sm_90", **p)
    return mix if full else memory_summary(mix)


def test_level10_recorded_numbers():
    prose = _english_prose(NB)
    b4, b8 = _cublas(L10, 4096), _cublas(L10, 8192)
    s4 = {s: _rec(L10, 4096, stages=s) for s in (2, 3, 4)}
    s8 = {s: _rec(L10, 8192, stages=s) for s in (2, 3, 4)}
    best4, best8 = s4[4], s8[4]
    assert max(s4.values(), key=lambda r: r["tflops"]) is best4 and max(s8.values(), key=lambda r: r["tflops"]) is best8
    for r, b in ((best4, b4), (best8, b8)):
        assert abs(r["ratio_to_cublas"] - r["tflops"] / b["tflops"]) < 1e-9
        assert 0.42 <= r["ratio_to_cublas"] < 0.44 < YARDSTICK  # "about 42–43%", below 60%
    l9 = _rec(L9, 8192)  # Level 9's best showcase setting at 8192³ (the shared 64×64 default)
    assert max((_rec(L9, 8192, **c) for c in gc.get_level(L9).showcase), key=lambda r: r["tflops"]) == l9
    l8 = max((_rec(L8, 8192, **c) for c in gc.get_level(L8).showcase), key=lambda r: r["tflops"])  # the fastest FP32 setting
    lo8, hi8 = min(r["tflops"] for r in s8.values()), max(r["tflops"] for r in s8.values())
    assert s8[3]["tflops"] < s8[2]["tflops"]
    k1 = {s: _rec(L10, 1024, stages=s) for s in (2, 4)}
    blocks_1024 = gc.get_level(L10).geometry(1024, 1024, 1024, gc.get_level(L10).resolve()).grid[0]
    sms = results.load(next(f for f in results.recorded_files() if "10_mma_pipeline" in str(f)))["provenance"]["sm_count"]
    assert blocks_1024 < sms
    claims = [
        f"cuBLAS's fp16 GEMM reaches {b4['tflops']:.1f} TFLOPS at 4096³ and {b8['tflops']:.1f} TFLOPS at 8192³",
        f"reaches {best4['tflops']:.2f} TFLOPS at 4096³ ({best4['ratio_to_cublas']:.1%} of cuBLAS)",
        f"and {best8['tflops']:.2f} TFLOPS at 8192³ ({best8['ratio_to_cublas']:.1%})",
        f"That is {best8['tflops'] / l9['tflops']:.1f} times Level 9's best showcase setting "
        f"({l9['tflops']:.2f} TFLOPS at 8192³)",
        f"and {best8['tflops'] / l8['tflops']:.1f} times Level 8's fastest FP32 setting ({l8['tflops']:.2f} TFLOPS at 8192³)",
        f"lie between {lo8:.2f} and {hi8:.2f} TFLOPS",
        f"3 stages is not faster than 2 ({s8[3]['tflops']:.2f} against {s8[2]['tflops']:.2f})",
        f"at 1024³, 2 stages give {k1[2]['tflops']:.2f} TFLOPS and 4 stages {k1[4]['tflops']:.2f}",
        f"only {blocks_1024} blocks for the H200's {sms} SMs",
        f"takes {YARDSTICK:.0%} of cuBLAS at 4096³ and 8192³ as its yardstick",
        f"clearly below {YARDSTICK:.0%}",
        f"{best4['ratio_to_cublas']:.1%} at 4096³ and {best8['ratio_to_cublas']:.1%} at 8192³",
        f"better than Level 9's {l9['ratio_to_cublas']:.1%}",
        f"the cp.async kernel reaches {best8['tflops']:.2f} TFLOPS at 8192³, {best8['tflops'] / l9['tflops']:.1f} times "
        f"Level 9 but {best8['ratio_to_cublas']:.1%} of cuBLAS",
    ]
    # accuracy at K = 8192: the fp32-accumulation bound, the kernel's error (same for all stage counts), cuBLAS's
    errs = {f"{r['relative_error']:.1e}" for r in s8.values()}
    assert len(errs) == 1
    assert all(r["relative_error"] < gc.tolerance("float16", r["K"]) for r in results.recorded(L10) if r["level"] == L10)
    tol = gc.tolerance("float16", 8192)
    assert b8["relative_error"] > tol
    claims += [f"At K = 8192 the bound is {tol:.1e}",
               f"relative error of {errs.pop()} for all {len(s8)} stage counts at 8192³",
               f"cuBLAS, which returns fp16, measured {b8['relative_error']:.1e}"]
    # the 64×64 warp tile (BN = 256): measured, little gain; its resources
    w4, w8 = _rec(L10, 4096, stages=4, BN=256), _rec(L10, 8192, stages=4, BN=256)
    wb8 = _rec(L10, 8192, dtype="bfloat16", stages=4, BN=256)
    assert abs(w8["tflops"] / best8["tflops"] - 1) < 0.05 and abs(w4["tflops"] / best4["tflops"] - 1) < 0.05
    rep = gc.compile_report(L10, arch="sm_90", stages=4, BN=256)
    assert not rep.spills and rep.occupancy.blocks_per_sm == 1
    claims += [f"{w4['tflops']:.2f} TFLOPS at 4096³ ({w4['ratio_to_cublas']:.1%}) and {w8['tflops']:.2f} at 8192³ "
               f"({w8['ratio_to_cublas']:.1%}) in fp16; in bf16 {wb8['tflops']:.2f} TFLOPS at 8192³ ({wb8['ratio_to_cublas']:.1%})",
               f"needs {rep.registers} registers per thread for its 128 accumulators",
               f"and {rep.dynamic_shared_bytes} B of shared memory at 4 stages: one block per SM, "
               f"{rep.occupancy.warps_per_sm} of {rep.occupancy.max_warps_per_sm} warps"]
    l11 = _rec("11_hopper_wgmma", 8192, dtype="bfloat16")
    assert l11["tflops"] > 2 * _rec(L10, 8192, dtype="bfloat16", stages=4)["tflops"]  # "more than twice this speed"
    assert_prose_says(claims, prose)


def test_level10_edge_shapes_quoted_are_the_gpu_tests():
    prose = _english_prose(NB)
    gpu_tests = (ROOT / "tests" / "test_gpu.py").read_text()
    for shape in ("(1, 8, 8)", "(33, 64, 40)", "(127, 136, 264)", "(257, 520, 1000)"):
        assert shape in gpu_tests
    assert "odd M such as 1, 33, 127 and 257" in prose and "such as N = 136 and K = 264" in prose
    assert 136 % 8 == 0 and 136 % 128 and 264 % 8 == 0 and 264 % 32


def test_level10_compile_and_sass_numbers():
    prose = _english_prose(NB)
    lv = gc.get_level(L10)
    assert lv.min_cc == 80 and lv.uses_tensor_cores and lv.alignment == 16 and lv.resolve()["stages"] == 3
    reps = {s: gc.compile_report(L10, arch="sm_90", stages=s) for s in (2, 3, 4)}
    regs = {r.registers for r in reps.values()}
    assert len(regs) == 1
    for r in reps.values():
        assert r.threads_per_block == 256 and r.spill_store_bytes == r.spill_load_bytes == r.stack_bytes == 0
        o = r.occupancy
        assert (o.blocks_per_sm, o.warps_per_sm, o.max_warps_per_sm, o.limited_by) == (2, 16, 64, "registers")
    shm = {s: reps[s].dynamic_shared_bytes for s in reps}
    assert all(shm[s] == s * (128 * 32 + 32 * 128) * 2 for s in shm) and 128 * 32 * 2 == 8 * 1024
    o = reps[3].occupancy
    claims = [f"uses {reps[3].registers} registers per thread on sm_90, with no spills",
              f"{shm[2]} B for 2 stages, {shm[3]} B for 3 and {shm[4]} B for 4",
              f"{o.blocks_per_sm} blocks reside on an H200 SM, {o.warps_per_sm} of {o.max_warps_per_sm} warps"]
    mixes = {s: (_mix(stages=s), _mix(full=True, stages=s)) for s in (2, 3, 4)}
    m, full = mixes[4]
    per_kstep_mma = 4 * 4  # a 64×32 warp tile as 4×4 tiles of 16×8
    assert full["HMMA.16816.F32"] == m["HMMA"] == per_kstep_mma * (32 // 16)
    assert full["LDSM.16.M88.4"] == 2 * 4 and full["LDSM.16.MT88.4"] == 2 * 2 and m["LDSM"] == 12
    assert m["BAR"] == 1 and m["STG.64"] == 4 * 4 * 2
    ldgsts = [mixes[s][0]["LDGSTS.128"] for s in (2, 3, 4)]
    assert ldgsts == [4 * s for s in (2, 3, 4)]
    assert all(mixes[s][1]["LDGDEPBAR"] == s and mixes[s][0]["LDS.32"] == 3 * (s - 1 + 1) for s in (2, 3, 4))
    l9 = _mix_l9()
    claims += [f"The whole kernel holds {m['HMMA']} `HMMA.16816.F32`",
               f"{per_kstep_mma} per k-step, 2 k-steps per k-tile",
               f"Next to them, {m['LDSM']} `LDSM`: {full['LDSM.16.M88.4']} `LDSM.16.M88.4` for A and "
               f"{full['LDSM.16.MT88.4']} `LDSM.16.MT88.4`",
               f"each `ldmatrix` now feeds {m['HMMA'] / m['LDSM']:.1f} `HMMA` where Level 9's fed "
               f"{l9['HMMA'] // l9['LDSM']}",
               f"There is {m['BAR']} `BAR` in the loop",
               f"{ldgsts[0]}, {ldgsts[1]} and {ldgsts[2]} for 2, 3 and 4 stages",
               f"The {m['STG.64']} `STG.64` are",
               f"`LDS.32`, {m['LDS.32']} of them at 4 stages",
               f"issues {per_kstep_mma} `mma.sync` per {m['LDSM'] // 2} `ldmatrix`"]
    assert l9["HMMA"] == 2 * l9["LDSM"]
    assert_prose_says(claims, prose)


def _mix_l9():
    lv = gc.get_level(L9)
    pr = lv.resolve()
    if find_disassembler():
        from gemm_course.sass import disassemble, instruction_mix, memory_summary
        return memory_summary(instruction_mix(disassemble(lv, arch="sm_90", **pr)))
    return next(s for s in results.sass_records()
                if s["level"] == lv.id and s["params"] == pr)["summary"]


def test_level10_figures():
    # the accumulator layout the kernel's epilogue assumes: rows g and g+8, columns 2·(lane % 4) + {0, 1}
    seen = set()
    for lane in range(32):
        g, q = lane // 4, 2 * (lane % 4)
        mine = {(g + 8 * h, q + v) for h in (0, 1) for v in (0, 1)}
        for reg, (r, c) in enumerate(sorted(mine)):
            assert diagrams.mma_accumulator_owner(r, c)[0] == lane
        assert {diagrams.mma_accumulator_owner(r, c)[1] for r, c in mine} == {0, 1, 2, 3}
        seen |= mine
    assert len(seen) == 16 * 8
    fig = diagrams.mma_accumulator_figure(lane=5)
    marks = next(t for t in fig.data if t.name == "lane")
    assert sorted(zip(marks.y, marks.x)) == [(1, 2), (1, 3), (9, 2), (9, 3)]
    # the swizzle: a permutation of every row; plain reads conflict 4-way (A) and 8-way (B), swizzled ones not
    for op, per_row, plain in (("A", 4, 4), ("B", 16, 8)):
        for row in range(32):
            assert sorted(diagrams.chunk_position(op, row, c) - row * per_row for c in range(per_row)) == list(range(per_row))
        for c in range(per_row):
            for first in range(0, 32, 8):
                assert diagrams.ldmatrix_ways(op, c, first, swizzled=False) == plain
                assert diagrams.ldmatrix_ways(op, c, first, swizzled=True) == 1
        fig = diagrams.chunk_swizzle_figure(op)
        assert [a.text.split(" · ")[0] for a in fig.layout.annotations[:2]] == [f"plain: {plain}-way", "swizzled: 1-way"]
    prose = _english_prose(NB)
    assert_prose_says(["a 4-way conflict", "all 8 land in the same slot: 8-way"], prose)


def test_level10_ceiling_numbers():
    """The 'how far from cuBLAS' section: the probes, the kernel taken apart, and the verdict, all
    recomputed from h200_peaks.json and the bf16 recording."""
    from gemm_course.peak import ceiling

    prose = _english_prose(NB)
    peaks = results.peaks()
    mma = ceiling(peaks, "mma_sync_bf16")
    mma8 = next(r for r in peaks if r["probe"] == "mma_sync_bf16" and r["warps_per_sm"] == 8)
    wt, wtl = ceiling(peaks, "warp_tile_64x64_mma"), ceiling(peaks, "warp_tile_64x64_ldmatrix")
    part = next(r for r in results.level_10_parts() if r["M"] == 8192 and r["params"] == {"stages": 4, "BN": 256})
    blas = results.find("cublas", 8192, dtype="bfloat16")
    assert blas["file"] == "h200_09_10_bfloat16.json"
    whole, copies, math = (part[k]["median_ms"] for k in ("all", "copies", "math"))
    assert max(copies, math) < whole < copies + math  # the parts overlap, but only partly
    assert part["math"]["tflops"] < YARDSTICK * blas["tflops"] < mma["tflops"]  # "the yardstick is out of this design's reach"
    assert wtl["tflops"] < wt["tflops"] <= mma["tflops"] * 1.01
    claims = [f"It reaches {mma['tflops']:.1f} TFLOPS with {mma['warps_per_sm']} warps per SM ({mma8['tflops']:.1f} with 8)",
              f"{mma['tflops'] / blas['tflops']:.0%} of the {blas['tflops']:.2f} TFLOPS that cuBLAS's bf16 GEMM measured",
              f"{wt['tflops']:.1f} TFLOPS with the fragments kept in registers, {wtl['tflops']:.1f} when `ldmatrix` reloads them",
              f"The fragment loads cost {1 - wtl['tflops'] / wt['tflops']:.0%}",
              f"the whole kernel takes {whole:.3f} ms; its copies alone",
              f"{copies:.3f} ms; its math alone", f"{math:.3f} ms, that is {part['math']['tflops']:.1f} TFLOPS",
              f"runs at only {part['math']['tflops'] / wtl['tflops']:.0%} of the warp tile's rate",
              f"{copies:.3f} ms of copies and {math:.3f} ms of math add up to {copies + math:.3f} ms",
              f"only {copies + math - whole:.3f} ms of copying overlaps with math",
              f"60% of cuBLAS is {YARDSTICK * blas['tflops']:.0f} TFLOPS",
              f"`mma.sync` itself could do {mma['tflops']:.1f} TFLOPS"]
    claims.append("The next section keeps this level's math and changes only that")
    assert_prose_says(claims, prose)


def test_level10_tma_section_numbers():
    """The TMA-fed setting: its resources, its recorded speed in bf16 and fp16 against cuBLAS in the
    same run, the page's 60% yardstick, and the comparison with the probe and Level 11."""
    from gemm_course.peak import ceiling

    prose = _english_prose(NB)
    tma = dict(BN=256, copy="tma")
    b = {st: {n: _rec(L10, n, dtype="bfloat16", stages=st, **tma) for n in (1024, 4096, 8192)} for st in (2, 3, 4)}
    h = {n: _rec(L10, n, dtype="float16", stages=3, **tma) for n in (4096, 8192)}
    assert all(b[st][n]["ratio_to_cublas"] >= YARDSTICK for st in (2, 3, 4) for n in (4096, 8192))  # "clears this page's 60% yardstick"
    assert all(h[n]["ratio_to_cublas"] >= YARDSTICK for n in h)
    assert max((b[st][8192] for st in (2, 3, 4)), key=lambda r: r["tflops"]) is b[3][8192]
    cp = _rec(L10, 8192, dtype="bfloat16", stages=4, BN=256)
    rep = gc.compile_report(L10, arch="sm_90", stages=3, **tma)
    assert rep.occupancy.blocks_per_sm == 1 and rep.occupancy.warps_per_sm == 8 and not rep.spills
    mma = ceiling(results.peaks(), "mma_sync_bf16")
    l11 = _rec("11_hopper_wgmma", 8192, dtype="bfloat16")
    blocks = gc.get_level(L10).geometry(1024, 1024, 1024, gc.get_level(L10).resolve(stages=3, **tma)).grid[0]
    pct = lambda r: f"{r['ratio_to_cublas']:.1%}"  # noqa: E731
    claims = [f"It uses {rep.registers} registers per thread and {rep.dynamic_shared_bytes} B of shared memory with 3 stages",
              f"with 3 stages {b[3][4096]['tflops']:.2f} TFLOPS at 4096³ ({pct(b[3][4096])} of cuBLAS's bf16 GEMM) and "
              f"{b[3][8192]['tflops']:.2f} at 8192³ ({pct(b[3][8192])})",
              f"with 2 stages {pct(b[2][4096])} and {pct(b[2][8192])}, with 4 stages {pct(b[4][4096])} and {pct(b[4][8192])}",
              f"{h[4096]['tflops']:.2f} TFLOPS at 4096³ ({pct(h[4096])} of cuBLAS's fp16 GEMM) and {h[8192]['tflops']:.2f} at 8192³ ({pct(h[8192])})",
              f"reached {pct(cp)} ({cp['tflops']:.2f} TFLOPS in bf16 at 8192³) when the warps fed it themselves",
              f"at 1024³ it makes {blocks} blocks for {b[3][1024]['provenance']['sm_count']} SMs and reaches "
              f"{b[3][1024]['tflops']:.2f} TFLOPS ({pct(b[3][1024])})",
              f"It runs at {b[3][8192]['tflops'] / mma['tflops']:.0%} of the {mma['tflops']:.1f} TFLOPS",
              f"{l11['tflops']:.2f} TFLOPS in bf16 at 8192³, more than twice the cp.async kernel and "
              f"{l11['tflops'] / b[3][8192]['tflops']:.1f} times this one",
              f"reaches {pct(b[3][4096])} and {pct(b[3][8192])} of cuBLAS's bf16 GEMM at 4096³ and 8192³, above this page's {YARDSTICK:.0%} yardstick",
              f"That clears this page's {YARDSTICK:.0%} yardstick at both sizes"]
    assert l11["tflops"] > 2 * _rec(L10, 8192, dtype="bfloat16", stages=4)["tflops"]
    assert_prose_says(claims, prose)
    l11_prose = _english_prose(ROOT / "notebooks" / "11_hopper_wgmma.ipynb")
    assert f"the same `mma.sync` reached {b[3][8192]['tflops']:.2f} TFLOPS in bf16 ({pct(b[3][8192])})" in l11_prose
    ladder = (ROOT / "book" / "ladder.md").read_text(encoding="utf-8")
    assert f"{b[3][8192]['tflops']:.2f} TFLOPS in bf16, {pct(b[3][8192])} of cuBLAS's bf16 GEMM" in ladder


def _counter(part=None, **p):
    from gemm_course import counters

    row = counters.find(L10, part=part, **p)
    assert row["dtype"] == "float16" and row["M"] == 4096  # the counters are recorded in fp16 at 4096³
    return row["metrics"]


def test_level10_barrier_numbers():
    """The barrier-free math part (timed at 8192³ in bf16) and the counters of the parts (4096³, fp16)."""
    from gemm_course import counters
    from gemm_course.peak import ceiling

    prose = _english_prose(NB)
    peaks = results.peaks()
    wtl = ceiling(peaks, "warp_tile_64x64_ldmatrix")
    part = next(r for r in results.level_10_parts() if r["M"] == 8192 and r["params"] == {"stages": 4, "BN": 256})
    whole, copies, math, free = (part[k]["median_ms"] for k in ("all", "copies", "math", "math_no_barrier"))
    free_tf, math_tf = part["math_no_barrier"]["tflops"], part["math"]["tflops"]
    blas = results.find("cublas", 8192, dtype="bfloat16")
    peak_ms = 2 * 8192**3 / (ceiling(peaks, "mma_sync_bf16")["tflops"] * 1e12) * 1e3
    assert free < math < whole and blas["median_ms"] < peak_ms < free  # cuBLAS beats even mma.sync at its peak
    assert math_tf < YARDSTICK * blas["tflops"] < free_tf  # only the barrier-free math clears 60%
    m, f = _counter("math", stages=4, BN=256), _counter("math_no_barrier", stages=4, BN=256)
    c, w = _counter("copies", stages=4, BN=256), _counter(stages=4, BN=256)
    tma = _counter(stages=3, BN=256, copy="tma")
    assert m["tensor_pipe_pct"] < f["tensor_pipe_pct"] and w["tensor_pipe_pct"] < m["tensor_pipe_pct"]
    assert [s for s, _ in counters.top_stalls(m, 2)] == [s for s, _ in counters.top_stalls(f, 2)] == ["wait", "math_pipe_throttle"]
    assert [s for s, _ in counters.top_stalls(c, 2)] == ["barrier", "long_scoreboard"] and f["stall_barrier"] == 0
    claims = [f"The math then takes {free:.3f} ms, {free_tf:.1f} TFLOPS",
              f"without it the same math takes {free:.3f} ms instead of {math:.3f} ms, so the barrier costs "
              f"{1 - free / math:.0%} of the math-only time ({math - free:.3f} ms), and the math climbs to "
              f"{free_tf / wtl['tflops']:.0%} of the warp tile's rate",
              f"the Tensor Core pipe is busy {m['tensor_pipe_pct']:.0f}% of the math part's time and "
              f"{f['tensor_pipe_pct']:.0f}% without the barrier",
              f"`wait` ({m['stall_wait']:.1f} and {f['stall_wait']:.1f} warps per issued instruction",
              f"`math_pipe_throttle` ({m['stall_math_pipe_throttle']:.1f} and {f['stall_math_pipe_throttle']:.1f}: "
              f"the tensor pipe was busy); the barrier stall is {m['stall_barrier']:.1f} with the barrier and 0 without",
              f"the whole kernel is {whole - math:.3f} ms slower than its math alone",
              f"the tensor pipe is busy {w['tensor_pipe_pct']:.0f}% of the whole kernel's time",
              f"stalls most on the barrier ({c['stall_barrier']:.1f}) and on `long_scoreboard` ({c['stall_long_scoreboard']:.1f}",
              f"It costs the math {math - free:.3f} ms; the copies that do not overlap cost the whole kernel another "
              f"{whole - math:.3f} ms",
              f"cuBLAS's bf16 GEMM takes {blas['median_ms']:.3f} ms for this product, less than the barrier-free math "
              f"alone ({free:.3f} ms) and less than `mma.sync` would need even at the probe's peak ({peak_ms:.3f} ms)",
              f"with its barrier ({math_tf:.1f}) even with no copies at all; only the barrier-free math clears it ({free_tf:.1f})",
              f"the block-wide barrier costs {1 - free / math:.0%} of the math-only time"]
    # the TMA setting: between the two math-only parts in time (its own run), and its counters
    t = _rec(L10, 8192, dtype="bfloat16", stages=3, BN=256, copy="tma")
    assert free < t["median_ms"] < math and t["median_ms"] > blas["median_ms"]
    cub = counters.find("cublas", dtype="float16")["metrics"]
    claims += [f"{t['median_ms']:.3f} ms at 8192³ (in its own run), against {math:.3f} ms for the cp.async kernel's math "
               f"with its barrier and {free:.3f} ms without",
               f"its tensor pipe is busy {tma['tensor_pipe_pct']:.0f}% of the time, against {w['tensor_pipe_pct']:.0f}% "
               "for the cp.async kernel",
               f"cuBLAS's fp16 GEMM keeps its tensor pipe busy {cub['tensor_pipe_pct']:.0f}% of the time"]
    assert_prose_says(claims, prose)


def test_level10_ceiling_chart_has_the_barrier_free_part(monkeypatch):
    from gemm_course import notebook

    monkeypatch.setattr(notebook, "show", lambda fig: None)
    bars = {b["label"].split(" · ")[0]: b["ms"] for b in notebook.mma_sync_ceiling()}
    part = next(r for r in results.level_10_parts() if r["M"] == 8192 and r["params"] == {"stages": 4, "BN": 256})
    assert bars["Level 10, math only, no block barrier"] == part["math_no_barrier"]["median_ms"]
    assert bars["Level 10, math only"] == part["math"]["median_ms"] and len(bars) == 9


def test_level10_predict_then_measure_numbers():
    from gemm_course import counters, predictions

    prose = _english_prose(NB)
    lv = gc.get_level(L10)
    rows = {tuple(sorted(s.items())): {r["key"]: r for r in predictions.compare(L10, **s)} for s in lv.showcase}
    cp = [r for s, r in rows.items() if ("copy", "tma") not in s]
    small = [r for s, r in rows.items() if ("BN", 256) not in s]
    big = [r for s, r in rows.items() if ("BN", 256) in s]
    # the instruction models: exact
    assert {r["ldmatrix_instructions"]["predicted"] for r in small} == {12582912}
    assert {r["ldmatrix_instructions"]["predicted"] for r in big} == {8388608}
    assert all(r["ldmatrix_instructions"]["measured"] == r["ldmatrix_instructions"]["predicted"] for r in rows.values())
    per_ldsm = {f"{r['shared_load_wavefronts']['measured'] / r['ldmatrix_instructions']['measured']:.2f}" for r in rows.values()}
    assert per_ldsm == {"4.00"}
    for s in lv.showcase:  # the only LDS are the 3 predicated-off ones per warp and k-tile (SASS section)
        m, r = counters.find(L10, **s)["metrics"], rows[tuple(sorted(s.items()))]
        warp_ktiles = r["ldmatrix_instructions"]["predicted"] // (2 * (4 + lv.resolve(**s)["BN"] // 64))
        lds = 3 * warp_ktiles if lv.resolve(**s)["copy"] == "cp_async" else 0
        assert m["shared_load_instructions"] == lds
    assert counters.find(L10, stages=4, BN=256)["metrics"]["shared_load_wavefronts"] == 4 * 8388608
    assert counters.find(L10, stages=4)["metrics"]["shared_load_instructions"] == 3145728
    assert {f"{r['sectors_per_load_request']['measured']:.1f}" for r in cp} == {"16.0"}
    assert {r["global_load_requests"]["measured"] for r in small} == {4194304} == {r["global_load_requests"]["predicted"] for r in small}
    assert counters.find(L10, stages=3, BN=256, copy="tma")["metrics"]["global_load_requests"] == 0
    occ = sorted({f"{r['achieved_occupancy_pct']['measured']:.0f}%" for r in rows.values()})
    assert occ == ["12%", "24%"] and {r["achieved_occupancy_pct"]["predicted"] for r in rows.values()} == {25.0, 12.5}
    l2 = [r["l2_read_bytes"]["ratio"] for r in rows.values()]
    dram_cp = {f"{r['dram_read_bytes']['measured'] / 1e9:.2f}" for r in cp}
    ratio_cp = {f"{r['dram_read_bytes']['ratio']:.1f}" for r in cp}
    tma = rows[tuple(sorted({"stages": 3, "BN": 256, "copy": "tma"}.items()))]["dram_read_bytes"]
    least = tma["predicted"]
    assert len(dram_cp) == 1
    claims = ["3 per warp and k-tile (3,145,728 for the 128×128 `cp.async` settings)",
              "12,582,912 `ldmatrix` at 4096³ for the 128×128 settings and 8,388,608 for `BN = 256`",
              "the `ldmatrix` counts are 12,582,912 and 8,388,608, and the shared-memory passes are 4.00 per `ldmatrix`",
              "16.0 sectors per request, 4,194,304 requests for the 128×128 settings as predicted, and none for the TMA setting",
              f"The achieved occupancy, {occ[1]} and {occ[0]}, is the calculator's 25% and 12.5%",
              f"L2 reads are between {min(l2):.2f} and {max(l2):.2f} of the tile-traffic model",
              f"HBM reads are {dram_cp.pop()} GB for the `cp.async` settings and {tma['measured'] / 1e9:.2f} GB with TMA, "
              f"{min(ratio_cp)} to {max(ratio_cp)} times and {tma['ratio']:.1f} times the {least / 1e9:.2f} GB of reading A and B once",
              f"A and B read once from HBM are {least / 1e9:.2f} GB"]
    assert_prose_says(claims, prose)
