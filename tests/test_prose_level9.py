"""Every number the Level 9 (WMMA) prose quotes, recomputed from the recorded H200 files, the compile
reports and the disassembly (no GPU needed)."""
from pathlib import Path

import gemm_course as gc
from gemm_course.inspect.sass import kernel_mix, memory_summary
from gemm_course.measure import results
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
L8, L9 = "08_warp_tiling", "09_wmma"
# The seed guide's "further directions": Tensor Cores (WMMA) "可达 2-4x FP32 性能" (not a file of ours).
SEED_TENSOR_CORE_SPEEDUP = (2, 4)


def _rec(level, n, **p):
    return results.find(level, n, **gc.get_level(level).resolve(**p))


FIRST_RUN = results.RESULTS_DIR / "h200_09_wmma.json"  # every size and the sweep; the sections before "Feeding WMMA"


def _cublas(n):
    return next(r for r in results.recorded(L9, files=[FIRST_RUN], dtype="float16")
                if r["level"] == "cublas" and r["M"] == n == r["N"] == r["K"])


def _sweep():
    n = gc.get_level(L9).sweep_size
    return [r for r in results.recorded(L9, files=[FIRST_RUN], dtype="float16")
            if r["level"] == L9 and r["M"] == n == r["N"] == r["K"]]


def _mix(full=False, **p):
    """The memory summary (or with full=True the whole instruction mix) for sm_90."""
    mix, _ = kernel_mix(L9, "sm_90", **p)
    return mix if full else memory_summary(mix)


def _pct(x):
    return f"{x:.1%}"


def _cyc(r):
    """A record's ratio to its paired cuBLAS in cycles (time × the clock measured on the SMs, each side)."""
    c = results.in_cycles(r)
    assert c is not None, f"{r['level']} {r['params']} has no measured clock for both sides"
    return c


def _paired_tflops(r):
    """The TFLOPS of the cuBLAS run timed right before a record's kernel (the pair its ratio uses)."""
    return r["tflops"] / r["ratio_to_cublas"]


def test_level9_recorded_numbers():
    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    sh, big, none = _rec(L9, 8192), _rec(L9, 8192, BM=128, BN=128), _rec(L9, 8192, staging="none")
    blas = _cublas(8192)
    trio = (sh, big, none)
    # each ratio uses the cuBLAS run timed right before the kernel, not the once-per-size timing
    assert all(abs(r["ratio_to_cublas"] - r["cublas_paired_ms"] / r["median_ms"]) < 1e-9 for r in trio)
    cub_tf = [blas["tflops"]] + [_paired_tflops(r) for r in trio]
    cub_clk = [blas["sm_clock_mhz"]] + [r["cublas_paired_sm_clock_mhz"] for r in trio]
    # measured on the SMs: all three kernels above the cuBLAS run paired with them, so each fares worse in cycles
    assert all(r["sm_clock_mhz"] > r["cublas_paired_sm_clock_mhz"] and _cyc(r) < r["ratio_to_cublas"] for r in trio)
    flat = [_rec(L9, n, staging="none")["tflops"] for n in (2048, 4096, 8192)]
    s512, n512 = _rec(L9, 512), _rec(L9, 512, staging="none")
    assert n512["tflops"] > s512["tflops"] and _cyc(n512) > _cyc(s512)
    claims = [
        f"cuBLAS's fp16 GEMM, timed once at each size and again right before each kernel, reaches {min(cub_tf):.1f} to "
        f"{max(cub_tf):.1f} TFLOPS at 8192³, at {min(cub_clk):.0f} to {max(cub_clk):.0f} MHz measured on the SMs",
        f"reaches {sh['tflops']:.2f} TFLOPS there, {_pct(sh['ratio_to_cublas'])} of the cuBLAS run right before it in time "
        f"and {_pct(_cyc(sh))} in cycles, at {sh['sm_clock_mhz']:.0f} MHz against {sh['cublas_paired_sm_clock_mhz']:.0f}",
        f"the 128×128 setting {big['tflops']:.2f} TFLOPS ({_pct(big['ratio_to_cublas'])}, {_pct(_cyc(big))} in cycles)",
        f"the direct kernel {none['tflops']:.2f} TFLOPS ({_pct(none['ratio_to_cublas'])}, {_pct(_cyc(none))} in cycles)",
        f"between {min(flat):.2f} and {max(flat):.2f} TFLOPS from 2048³ to 8192³",
        f"({n512['tflops']:.2f} against {s512['tflops']:.2f} TFLOPS at 512³)",
        f"the shared kernel, the best of the first two, gets {_pct(sh['ratio_to_cublas'])} of cuBLAS "
        f"({_pct(_cyc(sh))} in cycles)",
        f"({none['tflops']:.2f} TFLOPS at 8192³)",
        f"gives {sh['tflops']:.2f} TFLOPS",
        f"The shared kernel gets {_pct(sh['ratio_to_cublas'])} of cuBLAS ({_pct(_cyc(sh))} in cycles)",
    ]
    # the best of the first two kernels' showcase at 8192³ is the default, and these are the first run's numbers
    assert max(trio, key=lambda r: r["tflops"]) is sh
    assert {r["file"] for r in (sh, big, none, blas)} == {FIRST_RUN.name}
    # the first run holds all seven showcase settings at every size (the performance figure without a GPU)
    lv = gc.get_level(L9)
    sizes = {r["M"] for r in results.recorded(L9, files=[FIRST_RUN], dtype="float16") if r["level"] == "cublas"}
    assert all(results.find(L9, n, dtype="float16", file=FIRST_RUN.name, **lv.resolve(**c))
               for n in sizes for c in lv.showcase) and len(lv.showcase) == 7 and len(sizes) == 6
    sweep = _sweep()
    settings = {tuple(sorted(r["params"].items())) for r in sweep}
    by = {s: {tuple(sorted(r["params"].items())) for r in sweep if r["params"]["staging"] == s}
          for s in ("none", "shared", "pipelined")}
    assert sum(map(len, by.values())) == len(settings)
    # every valid setting of the first two kernels, and the pipelined ones the level's sweep rule keeps
    assert settings == {tuple(sorted(p.items())) for p in lv.valid_settings() if lv.sweep(p)}
    first_two = [r for r in sweep if r["params"]["staging"] != "pipelined"]
    best2 = max(first_two, key=lambda r: r["tflops"])
    assert best2["params"] == lv.resolve(staging="shared", BM=128, BN=32)  # the others at their defaults
    direct = [r["tflops"] for r in sweep if r["params"]["staging"] == "none"]
    piped = [r["tflops"] for r in sweep if r["params"]["staging"] == "pipelined"]
    best = max(sweep, key=lambda r: r["tflops"])
    assert best["params"] == lv.resolve(**STEPS[3])  # the last step of "Feeding WMMA"
    # that setting was timed twice in this run (showcase and sweep): apart in time, together in cycles
    twice = sorted((r for r in sweep if r["params"] == best["params"]), key=lambda r: -r["tflops"])
    assert len(twice) == 2 and twice[0] is best
    a, b = twice
    assert a["sm_clock_mhz"] > b["sm_clock_mhz"] and a["ratio_to_cublas"] < b["ratio_to_cublas"]
    assert abs(_cyc(a) - _cyc(b)) < 0.25 * abs(a["ratio_to_cublas"] - b["ratio_to_cublas"])
    claims += ["timed once per size and again right before each kernel (a kernel's ratio to cuBLAS uses that pair)",
               f"and {len(by['pipelined'])} settings of the pipelined one",
               f"tries {len(settings)} settings: {len(by['none'])} of the direct kernel, {len(by['shared'])} of the shared one "
               f"and {len(by['pipelined'])} of the pipelined one",
               f"a 128×32 block tile, at {best2['tflops']:.2f} TFLOPS, {_pct(best2['ratio_to_cublas'])} of cuBLAS "
               f"({_pct(_cyc(best2))} in cycles)",
               f"all direct settings lie between {min(direct):.2f} and {max(direct):.2f}",
               f"The pipelined settings lie between {min(piped):.2f} and {max(piped):.2f} TFLOPS",
               f"measured {a['tflops']:.2f} and {b['tflops']:.2f} TFLOPS, {_pct(a['ratio_to_cublas'])} and "
               f"{_pct(b['ratio_to_cublas'])} of the cuBLAS run before each, at {a['sm_clock_mhz']:.0f} and "
               f"{b['sm_clock_mhz']:.0f} MHz; in cycles the two agree, {_pct(_cyc(a))} and {_pct(_cyc(b))} of cuBLAS"]
    # Level 8 (FP32) for scale
    l8 = max((_rec(L8, 8192, **c) for c in gc.get_level(L8).showcase), key=lambda r: r["tflops"])  # its fastest setting
    ratio = sh["tflops"] / l8["tflops"]
    lo, hi = SEED_TENSOR_CORE_SPEEDUP
    assert f"{ratio:.1f}" == f"{lo:.1f}" and abs(ratio - lo) < 0.01  # "at the bottom": 2.0, rounded or not
    claims += [f"runs at {l8['tflops']:.2f} TFLOPS at 8192³ in its fastest setting, so this first Tensor Core kernel is {ratio:.1f} times faster",
               f"Its {ratio:.1f} times sits at the bottom of the {lo} to {hi} times that guide promises",
               f"{ratio:.1f} times the best FP32 kernel"]
    # accuracy: fp32-accumulation bound at K = 8192, recorded errors of every setting and of cuBLAS (fp16 C)
    errs = {f"{r['relative_error']:.1e}" for r in results.recorded(L9, dtype="float16") if r["level"] == L9 and r["M"] == 8192}
    assert len(errs) == 1
    tol = gc.tolerance("float16", 8192)
    assert all(r["relative_error"] < gc.tolerance("float16", r["K"])
               for r in results.recorded(L9, dtype="float16") if r["level"] == L9)
    assert blas["relative_error"] > tol
    claims += [f"At K = 8192 that bound is {tol:.1e}", f"relative error of {errs.pop()} for every setting at 8192³",
               f"its relative error is {blas['relative_error']:.1e}"]
    assert_prose_says(claims, prose)


def test_level9_compile_and_sass_numbers():
    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    lv = gc.get_level(L9)
    assert lv.min_cc == 70 and lv.uses_tensor_cores and lv.dtypes == ("float16", "bfloat16") and lv.out_dtype == "float32"
    r75, r90 = gc.compile_report(L9, arch="sm_75"), gc.compile_report(L9, arch="sm_90")
    big = gc.compile_report(L9, arch="sm_90", BM=128, BN=128)
    o75, o90 = r75.occupancy, r90.occupancy
    assert r75.threads_per_block == r90.threads_per_block == 128 and big.threads_per_block == 512
    assert o75.limited_by == o90.limited_by == "registers" and big.occupancy.blocks_per_sm == 1
    assert r90.registers == big.registers and r90.static_shared_bytes == r75.static_shared_bytes
    claims = [
        f"(64×64 block tile, 4 warps, {r75.threads_per_block} threads)",
        f"sm_75 uses {r75.registers} registers per thread and keeps {o75.warps_per_sm} of {o75.max_warps_per_sm} warps",
        f"sm_90 uses {r90.registers} and keeps {o90.warps_per_sm} of {o90.max_warps_per_sm}",
        f"Shared memory is {r90.static_shared_bytes} B per block",
        f"has {big.threads_per_block} threads per block; at {big.registers} registers only one such block fits "
        f"on an H200 SM, {big.occupancy.warps_per_sm} of {big.occupancy.max_warps_per_sm} warps",
        f"a {big.threads_per_block}-thread block at {big.registers} registers leaves only "
        f"{big.occupancy.warps_per_sm} warps on an SM",
    ]
    # shared memory: padded A (BM×40 halves), padded B (32×(BN+8) halves), 4 scratch tiles of 16×16 floats
    assert r90.static_shared_bytes == 64 * 40 * 2 + 32 * 72 * 2 + 4 * 256 * 4
    m, full = _mix(), _mix(full=True)
    d, dfull = _mix(staging="none"), _mix(full=True, staging="none")
    assert full["HMMA.16816.F32"] == m["HMMA"] == 2 * (2 * 2) * (32 // 16)  # 2 HMMA per mma_sync
    assert full["LDSM.16.M88.4"] == full["LDSM.16.MT88.4"] == m["LDSM"] // 2
    assert "LDG.128" in m and "STS.128" in m and "LDSM" not in d
    movm = sum(v for k, v in dfull.items() if k.startswith("MOVM"))
    claims += [f"holds {m['HMMA']} `HMMA`", f"compile to {m['LDSM']} `LDSM`", f"The {m['BAR']} `BAR` are",
               f"through {d['LDG.32']} four-byte `LDG.32` for {d['HMMA']} `HMMA`",
               f"transposed in registers by {movm} `MOVM` instructions"]
    assert_prose_says(claims, prose)


def test_level9_counters_and_predictions():
    """'Why so far from cuBLAS' and 'Predict, then measure': the counters recorded at 4096³ (fp16) beside
    the models of gemm_course.measure.predictions."""
    from gemm_course.measure import counters, predictions

    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    assert "not in the course yet" not in prose
    d, s, b = (counters.find(L9, **p) for p in ({"staging": "none"}, {}, {"BM": 128, "BN": 128}))
    assert {r["dtype"] for r in (d, s, b)} == {"float16"} and d["M"] == 4096
    dm, sm, bm = d["metrics"], s["metrics"], b["metrics"]
    cub = counters.find("cublas", dtype="float16")["metrics"]
    assert [k for k, _ in counters.top_stalls(sm, 2)] == ["long_scoreboard", "short_scoreboard"]
    assert [k for k, _ in counters.top_stalls(dm, 3)] == ["long_scoreboard", "mio_throttle", "lg_throttle"]
    claims = [f"busy {sm['tensor_pipe_pct']:.0f}% of the time in the 64×64 setting and {bm['tensor_pipe_pct']:.0f}% in the "
              f"128×128 one; cuBLAS's fp16 GEMM keeps it busy {cub['tensor_pipe_pct']:.0f}% of the time",
              f"{sm['stall_long_scoreboard']:.1f} warps per issued instruction, against {sm['stall_short_scoreboard']:.1f} for "
              f"the next reason (`short_scoreboard`) and {sm['stall_barrier']:.1f} for the barriers",
              f"Its tensor pipe is busy {dm['tensor_pipe_pct']:.0f}% of the time",
              f"L1 serves {dm['global_load_l1_hit_pct']:.0f}% of those sectors",
              f"it takes {dm['global_load_requests']:,.0f} load instructions at 4096³",
              f"`long_scoreboard` ({dm['stall_long_scoreboard']:.1f}), `mio_throttle` ({dm['stall_mio_throttle']:.1f}) and "
              f"`lg_throttle` ({dm['stall_lg_throttle']:.1f})"]
    assert "LDG.128" in _mix() and "LDG.32" not in _mix()  # the shared kernel's only global loads are 16-byte copies
    # predict, then measure
    rows = {k: {r["key"]: r for r in predictions.compare(L9, **p)}
            for k, p in (("d", {"staging": "none"}), ("s", {}), ("b", {"BM": 128, "BN": 128}))}
    pd, ps, pb = rows["d"], rows["s"], rows["b"]
    assert pd["global_load_requests"]["predicted"] == dm["global_load_requests"] == 134217728
    assert pd["sectors_per_load_request"]["predicted"] == pd["sectors_per_load_request"]["measured"] == 8
    assert ps["global_load_requests"]["predicted"] == sm["global_load_requests"] == 8388608
    assert ps["sectors_per_load_request"]["measured"] == pb["sectors_per_load_request"]["measured"] == 16
    assert ps["ldmatrix_instructions"]["predicted"] == sm["ldmatrix_instructions"] == bm["ldmatrix_instructions"] == 16777216
    assert sm["shared_load_instructions"] == bm["shared_load_instructions"] == 0
    wf = [m["shared_load_wavefronts"] / m["ldmatrix_instructions"] for m in (sm, bm)]
    assert sm["shared_load_conflicts"] < 0.01 * sm["shared_load_wavefronts"]
    occ = [f"{r['achieved_occupancy_pct'][k]:.0f}%" for k in ("measured", "predicted") for r in (pd, ps, pb)]
    l2 = [r["l2_read_bytes"]["ratio"] for r in (pd, ps, pb)]
    dram = [r["dram_read_bytes"]["ratio"] for r in (pd, ps, pb)]
    claims += [f"{pd['global_load_requests']['predicted']:,} load instructions at 4096³",
               f"{pd['global_load_l1_hit_pct']['predicted']:.1f}%, should hit in L1",
               f"{ps['global_load_requests']['predicted']:,} such loads for the 64×64 tiles",
               f"{ps['ldmatrix_instructions']['predicted']:,} at 4096³ in both shared settings",
               f"{dm['global_load_requests']:,.0f} requests, {pd['sectors_per_load_request']['measured']:.1f} sectors per request "
               f"and an L1 hit rate of {dm['global_load_l1_hit_pct']:.2f}% for the direct kernel",
               f"{sm['global_load_requests']:,.0f} requests of {ps['sectors_per_load_request']['measured']:.1f} sectors, "
               f"{sm['ldmatrix_instructions']:,.0f} `ldmatrix` and {wf[0]:.2f} and {wf[1]:.2f} passes per `ldmatrix`",
               f"it reports {sm['shared_load_conflicts']:,.0f} passes caused by conflicts, under 1% of them",
               f"The achieved occupancy is {occ[0]}, {occ[1]} and {occ[2]}, against the calculator's {occ[3]}, {occ[4]} and {occ[5]}",
               f"L2 reads are {l2[0]:.2f} times the tile-traffic model for the direct kernel but {l2[1]:.2f} and {l2[2]:.2f} "
               "times for the 64×64 and 128×128 shared settings",
               f"HBM reads are {min(dram):.1f} to {max(dram):.1f} times the {pd['dram_read_bytes']['predicted'] / 1e9:.2f} GB"]
    assert_prose_says(claims, prose)


# --- "Feeding WMMA: the pipelined kernel" and "What WMMA can and cannot do" ---------------------------

TOP = {"float16": "h200_top_rungs_float16.json", "bfloat16": "h200_top_rungs_bfloat16.json"}
# The four steps, in the order of the showcase (each adds one change to the one before).
STEPS = [s for s in gc.get_level(L9).showcase if s.get("staging") == "pipelined"]


def _top(n, dtype="float16", level=L9, **p):
    return results.find(level, n, dtype=dtype, file=TOP[dtype], **gc.get_level(level).resolve(**p))


def test_level9_pipelined_steps_are_the_showcase():
    assert STEPS == [{"staging": "pipelined", "BM": 128, "BN": 128, "stages": 4},
                     {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3},
                     {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3, "BK": 64},
                     {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3, "BK": 64, "frag_buffers": 2}]
    p = [gc.get_level(L9).resolve(**s) for s in STEPS]
    assert (p[0]["WM"], p[0]["WN"], p[0]["BK"], p[0]["frag_buffers"]) == (64, 32, 32, 1)
    assert (p[1]["WM"], p[1]["WN"]) == (64, 64)


def test_level9_pipelined_recorded_numbers():
    """Every timing the new section, 'What the numbers say' and the takeaways quote, from the second run
    (h200_top_rungs_<dtype>.json), each with its ratio to cuBLAS in time and in cycles."""
    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    prov = results.load(results.RESULTS_DIR / TOP["float16"])["provenance"]
    sh4 = _top(4096)  # the shared kernel's default, same run
    s4 = [_top(4096, **s) for s in STEPS]
    s8 = [_top(8192, **s) for s in STEPS]
    b4 = [_top(4096, "bfloat16", **s) for s in STEPS]
    # 4096³: every Level 9 kernel and its paired cuBLAS, each at its own clock measured on the SMs in this run
    at4096 = [r for r in results.recorded(L9, files=[results.RESULTS_DIR / TOP["float16"]], dtype="float16")
              if r["level"] == L9 and r["M"] == 4096]
    full = prov["sm_clock_max_mhz"]
    assert full == 1980 and "clock64" in prov["method"]
    assert all(r["cublas_paired_sm_clock_mhz"] < r["sm_clock_mhz"] < full for r in at4096)  # power-limited, apart
    clk = results.clock_range(L9, "float16")
    assert clk["file"] == TOP["float16"] and clk["cublas_max"] < clk["kernel_min"]
    # NVML, the side reading, put every kernel above the clock it ran at
    nvml = [r["nvml_sm_clock_mhz"] for r in at4096]
    assert all(r["nvml_sm_clock_mhz"] > r["sm_clock_mhz"] for r in at4096)
    assert "all of them ran at" not in prose and "ran at 1980 MHz, the H200's full clock" not in prose
    assert "reported the H200's full" not in prose
    for r in s4 + s8 + b4 + [sh4]:
        assert abs(r["ratio_to_cublas"] - r["cublas_paired_ms"] / r["median_ms"]) < 1e-9
    t = [r["tflops"] for r in s4]
    # the order the prose tells at 4096³: step 2 the slowest, step 3 level with step 1 (their quartiles overlap) and
    # behind it in cycles, step 4 the fastest (and the fastest WMMA anywhere)
    assert t[1] < min(t[0], t[2]) and max(t[:3]) < t[3]
    assert all(a["q1_ms"] <= b["median_ms"] <= a["q3_ms"] for a, b in ((s4[0], s4[2]), (s4[2], s4[0])))
    assert _cyc(s4[2]) < _cyc(s4[0]) and s4[2]["sm_clock_mhz"] > s4[0]["sm_clock_mhz"]
    assert _cyc(s4[1]) < _cyc(s4[0]) and _cyc(s4[3]) > max(map(_cyc, s4[:3]))
    assert max(r["tflops"] for r in results.recorded(L9, dtype="float16") if r["level"] == L9 and r["M"] == 4096) == t[3]
    # 8192³: step 2 the slowest, step 4 the fastest, step 3 ahead of step 1 beyond the quartiles, at a higher clock
    assert [r["tflops"] for r in s8][1] == min(r["tflops"] for r in s8) and max(s8, key=lambda r: r["tflops"]) is s8[3]
    assert s8[2]["q3_ms"] < s8[0]["q1_ms"] and s8[2]["sm_clock_mhz"] > s8[0]["sm_clock_mhz"]
    # ... through its clock: it takes more cycles than step 1 (time × its own clock), at both sizes
    assert all(s[2]["median_ms"] * s[2]["sm_clock_mhz"] > s[0]["median_ms"] * s[0]["sm_clock_mhz"] for s in (s4, s8))
    assert all(r["cublas_paired_sm_clock_mhz"] < r["sm_clock_mhz"] for r in s8)  # every kernel above its partner
    bt = [r["tflops"] for r in b4]
    assert bt[1] < bt[2] < bt[3] and bt[1] < bt[0]  # "the larger warp tiles alone lose, the two later steps win"
    assert _cyc(b4[1]) < _cyc(b4[0]) < _cyc(b4[2]) < _cyc(b4[3])  # the same in cycles
    claims = [
        f"at 4096³ this level's kernels ran at {clk['kernel_min']:.0f} to {clk['kernel_max']:.0f} MHz and their cuBLAS "
        f"partners at {clk['cublas_min']:.0f} to {clk['cublas_max']:.0f} MHz",
        f"NVML, sampled beside them, read {min(nvml):.0f} to {max(nvml):.0f} MHz for the kernels",
        f"In the same run the shared kernel's default measured {sh4['tflops']:.2f} TFLOPS at 4096³, "
        f"{_pct(sh4['ratio_to_cublas'])} of cuBLAS ({_pct(_cyc(sh4))} in cycles)",
        f"{t[0]:.2f} TFLOPS at 4096³, {_pct(s4[0]['ratio_to_cublas'])} of cuBLAS ({_pct(_cyc(s4[0]))} in cycles): "
        f"{t[0] / sh4['tflops']:.1f} times the shared kernel in the same run",
        f"It is slower: {t[1]:.2f} TFLOPS, {_pct(s4[1]['ratio_to_cublas'])} of cuBLAS ({_pct(_cyc(s4[1]))} in cycles), "
        f"{1 - t[1] / t[0]:.0%} below step 1",
        f"{t[2]:.2f} TFLOPS, {_pct(s4[2]['ratio_to_cublas'])} of cuBLAS ({_pct(_cyc(s4[2]))} in cycles), "
        f"{t[2] / t[1] - 1:.0%} faster than step 2 and level with step 1's {t[0]:.2f} in time, within the quartiles of both",
        f"In cycles it is still behind step 1: it ran at {s4[2]['sm_clock_mhz']:.0f} MHz, step 1 at "
        f"{s4[0]['sm_clock_mhz']:.0f} MHz",
        f"{t[3]:.2f} TFLOPS at 4096³, {_pct(s4[3]['ratio_to_cublas'])} of cuBLAS ({_pct(_cyc(s4[3]))} in cycles), "
        f"{t[3] / t[2] - 1:.0%} faster than step 3",
        # what the numbers say, the can/cannot section, the takeaways
        f"reaches {t[3]:.2f} TFLOPS at 4096³, {_pct(s4[3]['ratio_to_cublas'])} of cuBLAS ({_pct(_cyc(s4[3]))} in cycles), "
        f"{t[3] / sh4['tflops']:.1f} times the shared kernel's {sh4['tflops']:.2f}",
        f"WMMA reaches {_pct(s4[3]['ratio_to_cublas'])} of cuBLAS at 4096³ in time and {_pct(_cyc(s4[3]))} in cycles "
        f"({_pct(b4[3]['ratio_to_cublas'])} and {_pct(_cyc(b4[3]))} in bf16), {t[3] / sh4['tflops']:.1f} times the shared kernel",
        f"reach {t[3]:.2f} TFLOPS at 4096³, {_pct(s4[3]['ratio_to_cublas'])} of cuBLAS in time and {_pct(_cyc(s4[3]))} in "
        f"cycles ({_pct(b4[3]['ratio_to_cublas'])} and {_pct(_cyc(b4[3]))} in bf16). The larger warp tiles alone made it "
        f"slower ({_pct(s4[1]['ratio_to_cublas'])}, {_pct(_cyc(s4[1]))} in cycles)",
        # 8192³ with the clocks
        "At 8192³ the four steps measure " + ", ".join(_pct(r["ratio_to_cublas"]) for r in s8[:3])
        + f" and {_pct(s8[3]['ratio_to_cublas'])} of cuBLAS (" + ", ".join(f"{r['tflops']:.2f}" for r in s8[:3])
        + f" and {s8[3]['tflops']:.2f} TFLOPS)",
        "step 3 is ahead of step 1 here, beyond the quartiles",
        "measured on the SMs, the four kernels ran at " + ", ".join(f"{r['sm_clock_mhz']:.0f}" for r in s8[:3])
        + f" and {s8[3]['sm_clock_mhz']:.0f} MHz, the cuBLAS runs right before them at "
        + ", ".join(f"{r['cublas_paired_sm_clock_mhz']:.0f}" for r in s8[:3]) + f" and {s8[3]['cublas_paired_sm_clock_mhz']:.0f} MHz",
        # bf16
        "the same four steps measure " + ", ".join(_pct(r["ratio_to_cublas"]) for r in b4[:3])
        + f" and {_pct(b4[3]['ratio_to_cublas'])} of cuBLAS's bf16 GEMM at 4096³ ("
        + ", ".join(f"{r['tflops']:.2f}" for r in b4[:3]) + f" and {b4[3]['tflops']:.2f} TFLOPS), "
        + ", ".join(_pct(_cyc(r)) for r in b4[:3]) + f" and {_pct(_cyc(b4[3]))} in cycles",
    ]
    # the shared kernel, fp16 against bf16 (the plain load_matrix_sync): one run for each input type
    shb = _top(4096, "bfloat16")
    assert shb["tflops"] < sh4["tflops"]
    more = shb["median_ms"] * shb["sm_clock_mhz"] / (sh4["median_ms"] * sh4["sm_clock_mhz"]) - 1
    assert more > 0
    claims.append(f"the shared kernel measures {shb['tflops']:.2f} TFLOPS in bf16 against {sh4['tflops']:.2f} in fp16 at "
                  f"4096³, at {shb['sm_clock_mhz']:.0f} and {sh4['sm_clock_mhz']:.0f} MHz: {more:.0%} more cycles in bf16")
    assert "In the same recorded run the shared kernel" not in prose
    # Level 10's kernel with the same three choices (64×64 warp tiles, BK 64, two fragment sets), same run: slower in
    # time and in cycles, yet the higher ratio in time, through the cuBLAS run paired with it
    l10 = _top(4096, level="10_mma_pipeline", stages=4, BN=256, BK=64, frag_buffers=2)
    assert l10["tflops"] < t[3] and _cyc(l10) < _cyc(s4[3]) and l10["ratio_to_cublas"] > s4[3]["ratio_to_cublas"]
    assert _paired_tflops(l10) < _paired_tflops(s4[3])
    claims += [f"making the same three choices, measured {l10['tflops']:.2f} TFLOPS, {_pct(l10['ratio_to_cublas'])} of "
               f"cuBLAS ({_pct(_cyc(l10))} in cycles), against WMMA's {t[3]:.2f} ({_pct(_cyc(s4[3]))} in cycles)",
               f"the cuBLAS run paired with it measured {_paired_tflops(l10):.1f} TFLOPS, the one paired with WMMA's "
               f"{_paired_tflops(s4[3]):.1f}"]
    assert_prose_says(claims, prose)


def test_level9_pipelined_compile_and_sass():
    from gemm_course.models import arch_limits

    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    lim = arch_limits("sm_90")
    r = [gc.compile_report(L9, arch="sm_90", **s) for s in STEPS]
    assert all(x.spill_store_bytes == x.spill_load_bytes == x.stack_bytes == 0 for x in r)  # "and no spills"
    o = [x.occupancy for x in r]
    assert [x.blocks_per_sm for x in o] == [2, 1, 1, 1] and all(x.threads_per_block == 256 for x in r)
    schedulers = lim.fp32_lanes // lim.warp_size
    assert schedulers == 4 and o[1].warps_per_sm // schedulers == 2
    assert r[2].dynamic_shared_bytes == r[3].dynamic_shared_bytes
    p2 = gc.get_level(L9).resolve(**STEPS[1])
    accumulators = p2["WM"] * p2["WN"] // 32
    m1, m2 = _mix(**STEPS[0]), _mix(**STEPS[1])
    assert "LDGSTS.128" in m1 and m1["BAR"] == m2["BAR"] == 2
    # the loop is not unrolled: the whole kernel's HMMA and LDSM are one k-tile's (2 HMMA per mma_sync, 2 steps of 16)
    assert m1["HMMA"] == 2 * 2 * (64 // 16) * (32 // 16) and m1["LDSM"] == 2 * (64 // 16 + 32 // 16)
    assert m2["HMMA"] == 2 * 2 * (64 // 16) * (64 // 16) and m2["LDSM"] == 2 * (64 // 16 + 64 // 16)
    claims = [
        f"the copies of {STEPS[0]['stages'] - 1} tiles run",
        f"At {r[0].registers} registers per thread, {o[0].blocks_per_sm} blocks of {r[0].threads_per_block} threads fit on "
        f"an SM: {o[0].warps_per_sm} of {o[0].max_warps_per_sm} warps",
        f"the ring has {STEPS[1]['stages']} stages ({r[1].dynamic_shared_bytes:,} bytes of shared memory)",
        f"holds {m2['HMMA']} `HMMA` and {m2['LDSM']} `LDSM` per k-tile, {m2['HMMA'] / m2['LDSM']:.1f} `HMMA` per `ldmatrix`, "
        f"against {m1['HMMA']} and {m1['LDSM']} ({m1['HMMA'] / m1['LDSM']:.1f}) in step 1",
        f"gives each thread {accumulators} fp32 accumulators, the kernel needs {r[1].registers} registers per thread, and "
        f"only one block of {o[1].warps_per_sm} warps fits on an SM",
        f"{r[2].dynamic_shared_bytes:,} bytes for the {STEPS[2]['stages']} stages",
        f"The cost is registers: {r[3].registers} per thread, just under the {lim.max_registers_per_thread} a thread may have",
        f"their registers leave {o[3].warps_per_sm} warps per SM",
    ]
    assert_prose_says(claims, prose)


def test_level9_bf16_fragment_loads():
    """'bf16: getting ldmatrix back': the plain load_matrix_sync from shared memory (wmma_shared) in bf16 against
    fp16, and the pipelined kernel's PTX form, compiled here for sm_90."""
    import subprocess
    import tempfile

    import pytest
    from gemm_course.run.compile import compile_options, kernel_source, nvrtc_compile
    from gemm_course.inspect.sass import find_disassembler, instruction_mix

    tool = find_disassembler()
    if tool is None:
        pytest.skip("no disassembler: the bf16 builds are not recorded")
    lv = gc.get_level(L9)

    def mix(name):
        cubin, _, _ = nvrtc_compile(kernel_source(lv), name, "sm_90", compile_options(lv))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "kernel.cubin"
            path.write_bytes(cubin)
            args = [tool, "-sass", str(path)] if tool.endswith("cuobjdump") else [tool, str(path)]
            return instruction_mix(subprocess.run(args, capture_output=True, text=True, check=True).stdout)

    def bf16(p):
        return lv.kernel_name(p).replace("__half", "__nv_bfloat16")

    shared = lv.resolve()
    half, plain = mix(lv.kernel_name(shared)), mix(bf16(shared))
    ldsm = sum(v for k, v in half.items() if k.startswith("LDSM"))
    assert not any(k.startswith("LDSM") for k in plain) and not any(k.startswith("MOVM") for k in half)
    generic = plain["LD.E"]
    movm = sum(v for k, v in plain.items() if k.startswith("MOVM"))
    step1 = lv.resolve(**STEPS[0])
    p_half, p_bf16 = memory_summary(mix(lv.kernel_name(step1))), memory_summary(mix(bf16(step1)))
    assert p_half["LDSM"] == p_bf16["LDSM"] and not any(k.startswith(("LD.E", "MOVM")) for k in mix(bf16(step1)))
    src = kernel_source(lv)
    ptx = "wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16"
    assert ptx in src and "wmma.load.b.sync.aligned.row.m16n16k16.shared.bf16" in src
    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    assert_prose_says([f"its loop body holds {generic} four-byte `LD.E`", f"and {movm} `MOVM` that transpose B in registers, "
                       f"where the fp16 build holds {ldsm} `LDSM`",
                       f"step 1 compiles to the same {p_bf16['LDSM']} `LDSM` in bf16 as in fp16", f"`{ptx}`"], prose)


def test_level9_pipelined_counters():
    """The counters (Nsight Compute, 4096³, fp16) each step quotes, and the can/cannot section's."""
    from gemm_course.measure import counters

    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    sh = counters.find(L9)["metrics"]
    c = [counters.find(L9, **s) for s in STEPS]
    assert all(r["dtype"] == "float16" and r["M"] == 4096 for r in c)
    m = [r["metrics"] for r in c]
    cub = counters.find("cublas", dtype="float16")["metrics"]
    assert [k for k, _ in counters.top_stalls(m[3], 2)] == ["wait", "math_pipe_throttle"]
    assert m[1]["shared_load_conflicts"] == m[2]["shared_load_conflicts"] == 0
    assert m[1]["shared_load_wavefronts"] == 4 * m[1]["ldmatrix_instructions"]
    assert m[2]["instructions"] < m[1]["instructions"]
    claims = [
        f"`long_scoreboard` falls from {sh['stall_long_scoreboard']:.1f} to {m[0]['stall_long_scoreboard']:.1f} warps per "
        f"issued instruction, and the tensor pipe is busy {m[0]['tensor_pipe_pct']:.0f}% of the time instead of "
        f"{sh['tensor_pipe_pct']:.0f}%",
        f"{m[0]['achieved_occupancy_pct']:.0f}% occupancy measured",
        f"ncu counts {m[1]['ldmatrix_instructions']:,.0f} `ldmatrix` at 4096³ instead of {m[0]['ldmatrix_instructions']:,.0f}",
        f"{m[1]['achieved_occupancy_pct']:.0f}% occupancy, two warps for each of the SM's four schedulers",
        f"Issue-active falls from {m[0]['issue_active_pct']:.0f}% to {m[1]['issue_active_pct']:.0f}% of cycles and the tensor "
        f"pipe from {m[0]['tensor_pipe_pct']:.0f}% to {m[1]['tensor_pipe_pct']:.0f}%",
        f"The kernel issues {m[2]['instructions']:,.0f} instructions at 4096³ instead of {m[1]['instructions']:,.0f}, the "
        f"barrier stall falls from {m[1]['stall_barrier']:.2f} to {m[2]['stall_barrier']:.2f} warps per issued instruction, "
        f"and the tensor pipe is busy {m[2]['tensor_pipe_pct']:.0f}% of the time",
        f"The tensor pipe is busy {m[3]['tensor_pipe_pct']:.0f}% of the time instead of {m[2]['tensor_pipe_pct']:.0f}%, and "
        f"issue-active rises from {m[2]['issue_active_pct']:.0f}% to {m[3]['issue_active_pct']:.0f}%",
        f"`long_scoreboard` from {m[2]['stall_long_scoreboard']:.2f} to {m[3]['stall_long_scoreboard']:.2f} warps per issued "
        f"instruction, and `mio_throttle`, a full queue of shared-memory instructions, from {m[2]['stall_mio_throttle']:.2f} "
        f"to {m[3]['stall_mio_throttle']:.2f}",
        f"in step 2 ncu counts {m[1]['shared_load_wavefronts']:,.0f} passes for {m[1]['ldmatrix_instructions']:,.0f} "
        f"`ldmatrix`, exactly 4 each, the least a 512-byte `ldmatrix` can take, and {m[1]['shared_load_conflicts']:.0f} conflicts",
        f"keeps the tensor pipe busy {m[3]['tensor_pipe_pct']:.0f}% of the time against cuBLAS's {cub['tensor_pipe_pct']:.0f}%",
        f"`wait` ({m[3]['stall_wait']:.1f} warps per issued instruction",
        f"`math_pipe_throttle` ({m[3]['stall_math_pipe_throttle']:.1f}, the tensor pipe itself busy)",
    ]
    # the busy shares on one scale: FLOPs per busy cycle of the tensor pipe and per SM, from the same counters
    def per_busy_cycle(x, busy=True):
        cycles = x["duration_ns"] * 1e-9 * x["sm_clock_hz"] * 132 * (x["tensor_pipe_pct"] / 100 if busy else 1)
        return 2 * 4096**3 / cycles
    mine, blas = per_busy_cycle(m[3]), per_busy_cycle(cub)
    rows = [r for r in counters.recorded() if r["dtype"] in ("float16", "bfloat16") and not r.get("part")
            and r["metrics"].get("tensor_pipe_pct") and r["M"] == r["N"] == r["K"] == 4096]
    mma = [per_busy_cycle(r["metrics"]) for r in rows if r["level"] in (L9, "10_mma_pipeline")]
    wg = [per_busy_cycle(r["metrics"]) for r in rows if r["level"] in ("11_hopper_wgmma", "cublas")]
    assert len(mma) > 15 and len(wg) > 10 and max(mma) < 0.75 * min(wg)  # two scales, apart in every recorded row
    claims += [
        f"an SM does {mine:,.0f} FLOPs in this kernel and {blas:,.0f} in cuBLAS's",
        f"every `mma.sync` kernel of Levels 9 and 10 lands at {min(mma):,.0f} to {max(mma):,.0f}, every `wgmma` kernel of "
        f"Level 11 and cuBLAS at {min(wg):,.0f} to {max(wg):,.0f}",
        f"A busy `mma.sync` pipe does {mine / blas:.2f} of the work of a busy `wgmma` pipe, and per cycle this kernel does "
        f"{per_busy_cycle(m[3], False) / per_busy_cycle(cub, False):.0%} of cuBLAS's work",
    ]
    assert_prose_says(claims, prose)


def test_level9_cycles_in_the_same_run():
    """The SM clocks measured on the SMs in the same run as each timing (fp16): every kernel and its cuBLAS partner
    below 1980 MHz, cuBLAS at the lower clock at both sizes (NVML's side reading puts one kernel below its partner at
    8192³), so every step is further from cuBLAS in cycles than in time; in cycles the steps keep one order at both
    sizes, and the first run's timings of the same settings agree with these more closely in cycles than in time."""
    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    last = {n: results.clocked(L9, n, "float16", **STEPS[3]) for n in (4096, 8192)}
    s4 = [results.clocked(L9, 4096, "float16", **s) for s in STEPS]
    s8 = [results.clocked(L9, 8192, "float16", **s) for s in STEPS]
    assert all(r["cublas_paired_sm_clock_mhz"] < r["sm_clock_mhz"] < 1980 for r in s4 + s8)  # measured: every kernel higher
    nvml_low = [i for i, r in enumerate(s8) if r["nvml_sm_clock_mhz"] < r["cublas_paired_nvml_sm_clock_mhz"]]
    assert nvml_low == [2]  # NVML: step 3 below its partner
    n3 = s8[2]
    assert all(r["ratio_in_cycles"] < r["ratio_to_cublas"] for r in s4 + s8)
    c4, c8 = [r["ratio_in_cycles"] for r in s4], [r["ratio_in_cycles"] for r in s8]
    order = sorted(range(4), key=c4.__getitem__)
    assert order == sorted(range(4), key=c8.__getitem__) == [1, 2, 0, 3]  # step 2 < step 3 < step 1 < step 4
    # the first run (h200_09_wmma.json) timed the same settings: run to run, the ratios move less in cycles
    spread = {}
    for n, here in ((4096, s4), (8192, s8)):
        there = [_rec(L9, n, **s) for s in STEPS]
        assert {r["file"] for r in there} == {FIRST_RUN.name}
        spread[n] = (max(abs(a["ratio_to_cublas"] - b["ratio_to_cublas"]) for a, b in zip(here, there)),
                     max(abs(a["ratio_in_cycles"] - _cyc(b)) for a, b in zip(here, there)))
        assert spread[n][1] < spread[n][0]
    # the takeaway: at 4096³ and 8192³ every Level 9 record of both runs, in both input types, ran above its partner
    big = [r for f in (FIRST_RUN.name, TOP["float16"], TOP["bfloat16"])
           for r in results.recorded(L9, files=[results.RESULTS_DIR / f]) if r["level"] == L9 and r["M"] in (4096, 8192)]
    assert len(big) > 80 and all(r["cublas_paired_sm_clock_mhz"] < r["sm_clock_mhz"] and _cyc(r) < r["ratio_to_cublas"]
                                 for r in big)
    pts = lambda x: f"{100 * x:.1f}"  # noqa: E731  percentage points
    pct = lambda x: f"{x:.1%}"  # noqa: E731
    a, b = last[4096], last[8192]
    assert_prose_says([
        "The same run measured each kernel's own SM clock on the SMs",
        "Tensor Core kernels on this H200 run power-limited below 1980 MHz even at 4096³, a kernel and its partner each "
        "at its own clock, so each step below gives its ratio to cuBLAS in time and in cycles",
        f"the last step reaches {pct(a['ratio_to_cublas'])} of cuBLAS in time and {pct(a['ratio_in_cycles'])} in cycles, "
        f"at {a['sm_clock_mhz']:.0f} MHz against cuBLAS's {a['cublas_paired_sm_clock_mhz']:.0f} MHz",
        "In cycles the four steps reach " + ", ".join(pct(x) for x in c4[:3]) + f" and {pct(c4[3])} of cuBLAS at 4096³ and "
        + ", ".join(pct(x) for x in c8[:3]) + f" and {pct(c8[3])} at 8192³: the same order at both sizes",
        f"(the last step there: {pct(b['ratio_to_cublas'])} of cuBLAS in time, {pct(b['ratio_in_cycles'])} in cycles)",
        f"NVML's side reading would even put step 3 below its partner ({n3['nvml_sm_clock_mhz']:.0f} against "
        f"{n3['cublas_paired_nvml_sm_clock_mhz']:.0f} MHz)",
        f"differ by up to {pts(spread[4096][0])} percentage points in time but {pts(spread[4096][1])} in cycles at 4096³ "
        f"({pts(spread[8192][0])} and {pts(spread[8192][1])} at 8192³)",
        "not because the clocks agree",
        "at 4096³ and 8192³ each kernel here ran at a higher clock than its cuBLAS partner: counted in cycles it is "
        "further from cuBLAS than in time, and its ratio in cycles moves less from run to run"], prose)
    for gone in ("That run read the SM clock only through NVML", "in that later run", "so the percentages below compare times",
                 "so that a kernel and its cuBLAS partner run at about the same", "by NVML's reading the four kernels ran at"):
        assert gone not in prose
