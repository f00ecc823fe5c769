"""Every number the Level 9 (WMMA) prose quotes, recomputed from the recorded H200 files, the compile
reports and the disassembly (no GPU needed)."""
from pathlib import Path

import gemm_course as gc
from gemm_course.sass import kernel_mix, memory_summary
from gemm_course import results
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
L8, L9 = "08_warp_tiling", "09_wmma"
# The seed guide's "further directions": Tensor Cores (WMMA) "可达 2-4x FP32 性能" (not a file of ours).
SEED_TENSOR_CORE_SPEEDUP = (2, 4)


def _rec(level, n, **p):
    return results.find(level, n, **gc.get_level(level).resolve(**p))


def _cublas(n):
    return next(r for r in results.recorded(L9, dtype="float16") if r["level"] == "cublas" and r["M"] == n == r["N"] == r["K"])


def _sweep():
    n = gc.get_level(L9).sweep_size
    return [r for r in results.recorded(L9, dtype="float16") if r["level"] == L9 and r["M"] == n == r["N"] == r["K"]]


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
        f"best showcase setting gets {sh['ratio_to_cublas']:.1%} of cuBLAS",
        f"({none['tflops']:.2f} TFLOPS at 8192³)",
        f"gives {sh['tflops']:.2f} TFLOPS",
        f"That is still {sh['ratio_to_cublas']:.1%} of cuBLAS",
    ]
    # the best of the showcase at 8192³ is the default
    assert max((sh, big, none), key=lambda r: r["tflops"]) is sh
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
    assert lo <= ratio <= hi
    claims += [f"runs at {l8['tflops']:.2f} TFLOPS at 8192³ in its fastest setting, so this first Tensor Core kernel is {ratio:.1f} times faster",
               f"within the {lo} to {hi} times the seed guide promises", f"{ratio:.1f} times the best FP32 kernel"]
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
    the models of gemm_course.predictions."""
    from gemm_course import counters, predictions

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
