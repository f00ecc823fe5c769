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


def test_level9_recorded_numbers():
    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    sh, big, none = _rec(L9, 8192), _rec(L9, 8192, BM=128, BN=128), _rec(L9, 8192, staging="none")
    blas = _cublas(8192)
    assert abs(sh["ratio_to_cublas"] - sh["tflops"] / blas["tflops"]) < 1e-9
    flat = [_rec(L9, n, staging="none")["tflops"] for n in (2048, 4096, 8192)]
    s512, n512 = _rec(L9, 512), _rec(L9, 512, staging="none")
    assert n512["tflops"] > s512["tflops"]
    claims = [
        f"cuBLAS's fp16 GEMM reaches {blas['tflops']:.1f} TFLOPS at 8192³",
        f"reaches {sh['tflops']:.2f} TFLOPS there, {sh['ratio_to_cublas']:.1%} of cuBLAS",
        f"the 128×128 setting {big['tflops']:.2f} TFLOPS ({big['ratio_to_cublas']:.1%})",
        f"the direct kernel {none['tflops']:.2f} TFLOPS ({none['ratio_to_cublas']:.1%})",
        f"between {min(flat):.2f} and {max(flat):.2f} TFLOPS from 2048³ to 8192³",
        f"({n512['tflops']:.2f} against {s512['tflops']:.2f} TFLOPS at 512³)",
        f"the shared kernel, the best of the first two, gets {sh['ratio_to_cublas']:.1%} of cuBLAS",
        f"({none['tflops']:.2f} TFLOPS at 8192³)",
        f"gives {sh['tflops']:.2f} TFLOPS",
        f"The shared kernel gets {sh['ratio_to_cublas']:.1%} of cuBLAS",
    ]
    # the best of the first two kernels' showcase at 8192³ is the default, and these are the first run's numbers
    assert max((sh, big, none), key=lambda r: r["tflops"]) is sh
    assert {r["file"] for r in (sh, big, none, blas)} == {FIRST_RUN.name}
    sweep = _sweep()
    settings = {tuple(sorted(r["params"].items())) for r in sweep}
    best = max(sweep, key=lambda r: r["tflops"])
    assert best["params"] == gc.get_level(L9).resolve(staging="shared", BM=128, BN=32)  # the others at their defaults
    direct = [r["tflops"] for r in sweep if r["params"]["staging"] == "none"]
    claims += [f"tries {len(settings)} settings",
               f"a 128×32 block tile, at {best['tflops']:.2f} TFLOPS, {best['ratio_to_cublas']:.1%} of cuBLAS",
               f"all direct settings lie between {min(direct):.2f} and {max(direct):.2f}"]
    # Level 8 (FP32) for scale
    l8 = max((_rec(L8, 8192, **c) for c in gc.get_level(L8).showcase), key=lambda r: r["tflops"])  # its fastest setting
    ratio = sh["tflops"] / l8["tflops"]
    lo, hi = SEED_TENSOR_CORE_SPEEDUP
    assert ratio < lo and f"{ratio:.1f}" == f"{lo:.1f}"  # "falls just short": 2.0 rounded, under 2 unrounded
    claims += [f"runs at {l8['tflops']:.2f} TFLOPS at 8192³ in its fastest setting, so this first Tensor Core kernel is {ratio:.1f} times faster",
               f"Its {ratio:.1f} times, {ratio:.2f} before rounding, falls just short of the {lo} to {hi} times that guide promises",
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


def _pct(x):
    return f"{x:.1%}"


def test_level9_pipelined_steps_are_the_showcase():
    assert STEPS == [{"staging": "pipelined", "BM": 128, "BN": 128, "stages": 4},
                     {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3},
                     {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3, "BK": 64},
                     {"staging": "pipelined", "BM": 256, "BN": 128, "WN": 64, "stages": 3, "BK": 64, "frag_buffers": 2}]
    p = [gc.get_level(L9).resolve(**s) for s in STEPS]
    assert (p[0]["WM"], p[0]["WN"], p[0]["BK"], p[0]["frag_buffers"]) == (64, 32, 32, 1)
    assert (p[1]["WM"], p[1]["WN"]) == (64, 64)


def test_level9_pipelined_recorded_numbers():
    """Every timing the new section, 'What the numbers say' and the takeaways quote, from the one later run."""
    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    prov = results.load(results.RESULTS_DIR / TOP["float16"])["provenance"]
    sh4 = _top(4096)  # the shared kernel's default, same run
    s4 = [_top(4096, **s) for s in STEPS]
    s8 = [_top(8192, **s) for s in STEPS]
    b4 = [_top(4096, "bfloat16", **s) for s in STEPS]
    # 4096³: every Level 9 kernel and its paired cuBLAS at the full clock
    at4096 = [r for r in results.recorded(L9, files=[results.RESULTS_DIR / TOP["float16"]], dtype="float16")
              if r["level"] == L9 and r["M"] == 4096]
    full = prov["sm_clock_max_mhz"]
    assert full == 1980 and all(r["sm_clock_mhz"] == r["cublas_paired_sm_clock_mhz"] == full for r in at4096)
    # ... as NVML read it; measured on the SMs in the re-recording, the kernels ran power-limited, apart from cuBLAS
    clk = results.clock_range(L9, "float16")
    assert clk["kernel_max"] < 1900 and clk["cublas_max"] < clk["kernel_min"]
    assert "all of them ran at" not in prose and "ran at 1980 MHz, the H200's full clock" not in prose
    for r in s4 + s8 + b4 + [sh4]:
        assert abs(r["ratio_to_cublas"] - r["cublas_paired_ms"] / r["median_ms"]) < 1e-9
    t = [r["tflops"] for r in s4]
    # the order the prose tells: step 1 beats step 2, then steps 3 and 4 gain; step 4 is the fastest WMMA anywhere
    assert t[1] < t[0] and t[1] < t[2] < t[0] < t[3]
    assert max(r["tflops"] for r in results.recorded(L9, dtype="float16") if r["level"] == L9 and r["M"] == 4096) == t[3]
    assert [r["tflops"] for r in s8][1] == min(r["tflops"] for r in s8) and max(s8, key=lambda r: r["tflops"]) is s8[3]
    bt = [r["tflops"] for r in b4]
    assert bt[1] < bt[2] < bt[3] and bt[1] < bt[0]  # "the larger warp tiles alone lose, the two later steps win"
    claims = [
        f"which reported the H200's full {full} MHz at 4096³",
        f"found this level's kernels at 4096³ at {clk['kernel_min']:.0f} to {clk['kernel_max']:.0f} MHz and their cuBLAS "
        f"partners at {clk['cublas_min']:.0f} to {clk['cublas_max']:.0f} MHz",
        f"In the same run the shared kernel's default measured {sh4['tflops']:.2f} TFLOPS at 4096³, "
        f"{_pct(sh4['ratio_to_cublas'])} of cuBLAS",
        f"{t[0]:.2f} TFLOPS at 4096³, {_pct(s4[0]['ratio_to_cublas'])} of cuBLAS: {t[0] / sh4['tflops']:.1f} times the "
        "shared kernel in the same run",
        f"It is slower: {t[1]:.2f} TFLOPS, {_pct(s4[1]['ratio_to_cublas'])} of cuBLAS, {1 - t[1] / t[0]:.0%} below step 1",
        f"{t[2]:.2f} TFLOPS, {_pct(s4[2]['ratio_to_cublas'])} of cuBLAS, {t[2] / t[1] - 1:.0%} faster than step 2 but still "
        "below step 1",
        f"{t[3]:.2f} TFLOPS at 4096³, {_pct(s4[3]['ratio_to_cublas'])} of cuBLAS, {t[3] / t[2] - 1:.0%} faster than step 3",
        # what the numbers say, the can/cannot section, the takeaways
        f"reaches {t[3]:.2f} TFLOPS at 4096³, {_pct(s4[3]['ratio_to_cublas'])} of cuBLAS, {t[3] / sh4['tflops']:.1f} times "
        f"the shared kernel's {sh4['tflops']:.2f}",
        f"WMMA reaches {_pct(s4[3]['ratio_to_cublas'])} of cuBLAS at 4096³ ({_pct(b4[3]['ratio_to_cublas'])} in bf16), "
        f"{t[3] / sh4['tflops']:.1f} times the shared kernel",
        f"reach {t[3]:.2f} TFLOPS at 4096³, {_pct(s4[3]['ratio_to_cublas'])} of cuBLAS ({_pct(b4[3]['ratio_to_cublas'])} "
        f"in bf16). The larger warp tiles alone made it slower ({_pct(s4[1]['ratio_to_cublas'])})",
        # 8192³ with the clocks
        "keep their order: " + ", ".join(_pct(r["ratio_to_cublas"]) for r in s8[:3]) + f" and {_pct(s8[3]['ratio_to_cublas'])} "
        "of cuBLAS (" + ", ".join(f"{r['tflops']:.2f}" for r in s8[:3]) + f" and {s8[3]['tflops']:.2f} TFLOPS)",
        "the four kernels ran at " + ", ".join(f"{r['sm_clock_mhz']:.0f}" for r in s8[:3]) + f" and {s8[3]['sm_clock_mhz']:.0f} "
        "MHz, the cuBLAS runs right before them at " + ", ".join(f"{r['cublas_paired_sm_clock_mhz']:.0f}" for r in s8[:3])
        + f" and {s8[3]['cublas_paired_sm_clock_mhz']:.0f} MHz",
        "by NVML's reading the four kernels ran at",
        # bf16
        "the same four steps measure " + ", ".join(_pct(r["ratio_to_cublas"]) for r in b4[:3])
        + f" and {_pct(b4[3]['ratio_to_cublas'])} of cuBLAS's bf16 GEMM at 4096³ ("
        + ", ".join(f"{r['tflops']:.2f}" for r in b4[:3]) + f" and {b4[3]['tflops']:.2f} TFLOPS)",
    ]
    # the clocks at 8192³: the kernel below its partner in three of the four, which is the point of the paragraph
    assert sum(r["sm_clock_mhz"] < r["cublas_paired_sm_clock_mhz"] for r in s8) == 3
    # the shared kernel, fp16 against bf16, same run (the plain load_matrix_sync)
    shb = _top(4096, "bfloat16")
    assert shb["tflops"] < sh4["tflops"]
    claims.append(f"measures {shb['tflops']:.2f} TFLOPS in bf16 against {sh4['tflops']:.2f} in fp16 at 4096³")
    # Level 10's kernel with the same three choices (64×64 warp tiles, BK 64, two fragment sets), same run
    l10 = _top(4096, level="10_mma_pipeline", stages=4, BN=256, BK=64, frag_buffers=2)
    assert l10["tflops"] < t[3]
    claims.append(f"making the same three choices, measured {l10['tflops']:.2f} TFLOPS, {_pct(l10['ratio_to_cublas'])} of cuBLAS")
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


def test_level9_cycles_from_the_clock_re_recording():
    """The clocks measured on the SMs in the re-recording (fp16): below 1980 MHz, cuBLAS at the lower clock at both
    sizes (the opposite of NVML's reading at 8192³), so the last step is further from cuBLAS in cycles than in time."""
    prose = _english_prose(ROOT / "notebooks" / "09_wmma.ipynb")
    last = {n: results.clocked(L9, n, "float16", **STEPS[3]) for n in (4096, 8192)}
    s8 = [results.clocked(L9, 8192, "float16", **s) for s in STEPS]
    nvml8 = [_top(8192, **s) for s in STEPS]
    assert all(r["sm_clock_mhz"] > r["cublas_paired_sm_clock_mhz"] for r in s8)  # measured: every kernel higher
    assert sum(r["sm_clock_mhz"] < r["cublas_paired_sm_clock_mhz"] for r in nvml8) == 3  # NVML: three lower
    assert all(r["ratio_in_cycles"] < r["ratio_to_cublas"] for r in s8 + [last[4096]])
    pct = lambda x: f"{x:.1%}"  # noqa: E731
    a, b = last[4096], last[8192]
    assert_prose_says([
        "That run read the SM clock only through NVML",
        "Tensor Core kernels on this H200 run power-limited below 1980 MHz even at 4096³, a kernel and its partner each "
        "at its own clock, so the percentages below compare times, not work per cycle",
        f"in that later run the last step reaches {pct(a['ratio_to_cublas'])} of cuBLAS in time and "
        f"{pct(a['ratio_in_cycles'])} in cycles, at {a['sm_clock_mhz']:.0f} MHz against cuBLAS's "
        f"{a['cublas_paired_sm_clock_mhz']:.0f} MHz",
        f"the four kernels ran at 8192³ at {min(r['sm_clock_mhz'] for r in s8):.0f} to "
        f"{max(r['sm_clock_mhz'] for r in s8):.0f} MHz and their cuBLAS partners at "
        f"{min(r['cublas_paired_sm_clock_mhz'] for r in s8):.0f} to {max(r['cublas_paired_sm_clock_mhz'] for r in s8):.0f} MHz",
        f"(the last step there: {pct(b['ratio_to_cublas'])} of cuBLAS in time, {pct(b['ratio_in_cycles'])} in cycles)",
        "not because the clocks agree"], prose)
    assert "so that a kernel and its cuBLAS partner run at about the same" not in prose
