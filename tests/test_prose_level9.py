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
    assert best["params"] == {"staging": "shared", "BM": 128, "BN": 32}
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
