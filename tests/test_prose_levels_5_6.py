"""Every number the Level 5 and Level 6 notebooks quote comes from the recorded files (or ptxas)."""
from pathlib import Path

import gemm_course as gc
from gemm_course.measure import results
from gemm_course.models import occupancy
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
L4, L5, L6 = "04_double_buffering", "05_register_blocking", "06_fused_epilogue"
DEFAULT = dict(BM=128, BN=128, BK=8, TM=8, TN=8)
SMALL = dict(BM=64, BN=64, BK=8, TM=4, TN=4)
EPILOGUES = {"none": dict(activation="none", bias=False, accumulate=False),
             "relu": dict(activation="relu", bias=True, accumulate=False),
             "gelu": dict(activation="gelu", bias=True, accumulate=False),
             "accumulate": dict(activation="none", bias=False, accumulate=True)}


def _find(level, n, **p):
    return results.find(level, n, **p)


def _cublas(record):
    return record["tflops"] / record["ratio_to_cublas"]


def _sass(level, params):
    return next(s["summary"] for s in results.sass_records()
                if s["level"] == level and s["params"] == params)


def _sweep():
    seen, out = set(), []
    for r in results.recorded(L5):
        key = tuple(sorted(r["params"].items()))
        if r["level"] == L5 and r["M"] == r["N"] == r["K"] == 4096 and key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _minus(s: str) -> str:
    return s.replace("-", "−")


def test_level5_prose_numbers_come_from_the_recorded_file():
    prose = _english_prose(ROOT / "notebooks" / "05_register_blocking.ipynb")
    d = {n: _find(L5, n, **DEFAULT) for n in (1024, 2048, 4096, 8192)}
    s = {n: _find(L5, n, **SMALL) for n in (1024, 2048, 8192)}
    l4 = _find(L4, 8192, tile=32, copy="registers")
    sweep = _sweep()
    best = max(sweep, key=lambda r: r["tflops"])
    assert best["params"] == dict(DEFAULT, BK=16)
    claims = [
        f"the default reaches {d[8192]['tflops']:.2f} TFLOPS, {d[8192]['ratio_to_cublas']:.1%} of cuBLAS's "
        f"{_cublas(d[8192]):.1f} TFLOPS and {d[8192]['tflops'] / l4['tflops']:.1f} times Level 4's tile 32 with "
        f"register prefetch ({l4['tflops']:.2f} TFLOPS)",
        f"reaches {s[8192]['tflops']:.2f} TFLOPS ({s[8192]['ratio_to_cublas']:.1%})",
        f"{1 - s[8192]['tflops'] / d[8192]['tflops']:.0%} slower than the larger tile",
        f"We measure {d[8192]['ratio_to_cublas']:.1%} at 8192³",
        f"the best setting of the sweep below reaches {best['ratio_to_cublas']:.1%} at 4096³",
        f"all {len(sweep)} settings",
        f"{best['tflops']:.2f} TFLOPS, {best['ratio_to_cublas']:.1%} of cuBLAS, against {d[4096]['tflops']:.2f} for BK = 8",
        f"The worst is {min(r['tflops'] for r in sweep):.2f} TFLOPS",
        f"the 64×64 tile runs at {s[1024]['tflops']:.2f} TFLOPS ({s[1024]['ratio_to_cublas']:.1%} of cuBLAS) and the "
        f"default at {d[1024]['tflops']:.2f} ({d[1024]['ratio_to_cublas']:.1%})",
        f"{d[2048]['tflops']:.2f} TFLOPS ({d[2048]['ratio_to_cublas']:.1%}) against {s[2048]['tflops']:.2f} "
        f"({s[2048]['ratio_to_cublas']:.1%})",
        f"claims {results.SEED_CLAIMS[L5]:.0%} of cuBLAS for this level",
        f"{d[8192]['tflops'] / l4['tflops']:.1f} times Level 4 at 8192³, {d[8192]['ratio_to_cublas']:.1%} of cuBLAS",
        f"reaches {best['ratio_to_cublas']:.1%} of cuBLAS at 4096³",
    ]
    assert_prose_says(claims, prose)

    # the sweep's ranking claims
    ranked = sorted(sweep, key=lambda r: -r["tflops"])
    assert sum((r["params"]["TM"], r["params"]["TN"]) == (8, 8) for r in ranked[:6]) == 5
    slow = [r for r in ranked[-8:] if gc.compile_report(L5, arch="sm_90", **r["params"]).threads_per_block == 512]
    assert len(slow) == 5 and all((r["params"]["TM"], r["params"]["TN"]) in ((4, 4), (4, 8)) for r in slow)
    assert all(gc.compile_report(L5, arch="sm_90", **r["params"]).occupancy.blocks_per_sm == 1 for r in slow)
    rest = [r for r in ranked[-8:] if r not in slow]
    assert all(gc.compile_report(L5, arch="sm_90", **r["params"]).threads_per_block == 64 and r["params"]["BM"] == 32
               for r in rest)
    assert "Five of the six fastest settings use 8×8 thread tiles" in prose
    assert "Five of the eight slowest are 512-thread blocks with 4×4 or 4×8 thread tiles" in prose
    assert "(16 per 8, or 32 per 12, instead of 64 per 16)" in prose and "the other three are 64-thread blocks" in prose

    # the three refused settings
    assert f"2×2 per thread ({(256 // 2) * (256 // 2)} threads)" in prose
    assert f"need {2 * 4 * 32 * (256 + 4 + 256)} B" in prose
    for bad in (dict(BM=256, BN=256, TM=2, TN=2), dict(TM=3), dict(BM=256, BN=256, BK=32)):
        try:
            gc.compile_report(L5, **bad)
        except ValueError as err:
            assert str((256 // 2) ** 2) in str(err) or "TM=3" in str(err) or str(2 * 4 * 32 * 516) in str(err)
        else:
            raise AssertionError(f"{bad} should be refused")

    # ptxas against the seed's arithmetic
    rep = gc.compile_report(L5, arch="sm_90")
    per_block = rep.registers * rep.threads_per_block
    assert f"The shared memory is {rep.static_shared_bytes} B instead of {(128 * 8 + 8 * 128) * 4} B: two buffers of " \
           f"{rep.static_shared_bytes // 2} B" in prose
    assert f"ptxas uses {rep.registers} per thread" in prose and rep.threads_per_block == 256
    assert f"takes {per_block} of an SM's 65536 registers, so {rep.occupancy.blocks_per_sm} blocks fit, " \
           f"{rep.occupancy.warps_per_sm} of {rep.occupancy.max_warps_per_sm} warps, {rep.occupancy.fraction:.0%} occupancy" in prose
    assert occupancy("sm_90", 256, 100, 8192).blocks_per_sm == rep.occupancy.blocks_per_sm  # "the same 2 blocks"
    # the 128-register bound is the kernel's own __launch_bounds__(256, 2); without it ptxas still picks 128
    bounds = "__launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))"
    source = gc.kernel_source(L5)
    assert bounds in source and "((THREADS) <= 256 ? 2 : 1)" in source
    unbounded = gc.compile_report(L5, arch="sm_90", source=source.replace(bounds, ""))
    assert 65536 // (2 * rep.threads_per_block) == rep.registers == unbounded.registers and not unbounded.spills
    assert "`__launch_bounds__(256, 2)` in the source asks for two 256-thread blocks per SM, and 65536 registers / " \
           f"(2 × 256) = {rep.registers}" in prose
    assert f"compiled without `__launch_bounds__` (the third cell below), ptxas still chooses {unbounded.registers}" in prose
    assert "58%" not in prose and "project's issue" not in prose
    assert rep.spill_store_bytes == rep.spill_load_bytes == 0  # "With no spills"
    assert "the 4 floats of padding on each of the 8 rows" in prose and rep.static_shared_bytes // 2 - 8192 == 4 * 4 * 8

    # the instruction mix (recorded for sm_90)
    mix, small_mix = _sass(L5, DEFAULT), _sass(L5, SMALL)
    assert f"{mix['FFMA']} FFMA instructions and {mix['LDS.128']} LDS.128" in prose
    assert f"feeds {mix['FFMA'] // mix['LDS.128']} FMAs" in prose
    assert f"{small_mix['FFMA']} FFMA against {small_mix['LDS.128']} LDS.128, " \
           f"{small_mix['FFMA'] // small_mix['LDS.128']} FMAs per load" in prose
    assert "LDG.32" not in mix and mix["LDGSTS.32"] > 0 and "the `LDGSTS.32` of `cp.async`" in prose  # copies bypass registers
    assert mix["LDS.32"] == small_mix["LDS.32"] == 36 and "also has 36 four-byte `LDS` in each of the two kernels" in prose
    # Level 2's count is the one its own notebook quotes (32 FMAs, 32 LDS.32 + 8 LDS.128)
    assert "40 shared-memory loads for 32 FMAs" in _english_prose(ROOT / "notebooks" / "02_smem_tiling.ipynb")
    assert "Level 2 managed 32 FMAs for 40 shared loads" in prose and "(Level 2 counted 40 loads for 32 FMAs)" in prose

    # blocks and waves at 1024³
    launch = gc.get_level(L5).geometry(1024, 1024, 1024, DEFAULT)
    small_launch = gc.get_level(L5).geometry(1024, 1024, 1024, SMALL)
    assert launch.grid[0] * launch.grid[1] == 64 and small_launch.grid[0] * small_launch.grid[1] == 256
    assert d[1024]["provenance"]["sm_count"] == 132
    assert "into only 64 blocks, and the H200 has 132 SMs" in prose and "launches 256 blocks" in prose


def test_level6_prose_numbers_come_from_the_recorded_file():
    prose = _english_prose(ROOT / "notebooks" / "06_fused_epilogue.ipynb")
    e = {k: _find(L6, 8192, **DEFAULT, **v) for k, v in EPILOGUES.items()}
    none = e["none"]["tflops"]
    l5 = _find(L5, 8192, **DEFAULT)
    claims = [
        f"no epilogue {none:.2f} TFLOPS ({e['none']['ratio_to_cublas']:.1%} of cuBLAS; Level 5 measured "
        f"{l5['tflops']:.2f} for the same main loop)",
        _minus(f"ReLU with bias {e['relu']['tflops']:.2f} ({e['relu']['tflops'] / none - 1:+.1%})"),
        _minus(f"GELU with bias {e['gelu']['tflops']:.2f} ({e['gelu']['tflops'] / none - 1:+.1%})"),
        _minus(f"accumulate {e['accumulate']['tflops']:.2f} ({e['accumulate']['tflops'] / none - 1:+.1%})"),
    ]
    # "within about 1.5%", "ReLU with bias even measuring a little faster", GELU and accumulate the costs
    assert all(abs(r["tflops"] / none - 1) < 0.015 for r in e.values())
    assert e["relu"]["tflops"] > none > max(e["gelu"]["tflops"], e["accumulate"]["tflops"])
    fusion = next(results.load(f)["fusion"] for f in results.recorded_files() if results.load(f).get("fusion"))
    row = {(r["M"], r["N"], r["K"]): r for r in fusion}
    k512, k128, k64 = row[8192, 8192, 512], row[8192, 8192, 128], row[16384, 8192, 64]
    for r in fusion:  # the byte count the prose quotes
        assert r["extra_bytes_unfused"] == 16 * r["M"] * r["N"] + 4 * r["N"]
    # the run with the one-kernel baseline (GEMM + one bias-and-ReLU pass over C), all in the same run
    one = {r["M"]: r for r in results.load(results.RESULTS_DIR / "h200_experiments.json")["fusion_one_kernel"]}
    o8, o4 = one[8192], one[4096]
    for r in one.values():
        assert r["extra_bytes_one_kernel"] == 8 * r["M"] * r["N"] + 4 * r["N"]
        assert r["one_kernel_error"] == r["fused_vs_unfused_error"] == 0.0
    assert o8["fused_ms"] <= o8["gemm_only_ms"]  # "it took no longer than the GEMM alone"

    def saved(r, key):
        return f"{1 - r['fused_ms'] / r[key]:.1%}"

    # the model for small K: one pass moves half the bytes of two; if it took half their time
    model = k128["gemm_only_ms"] + (k128["unfused_ms"] - k128["gemm_only_ms"]) / 2
    claims += [
        f"{row[4096, 4096, 4096]['extra_bytes_unfused'] / 1e6:.0f} MB at 4096³",
        f"{o8['extra_bytes_unfused'] / 1e9:.2f} GB for an 8192×8192 output",
        f"{k64['extra_bytes_unfused'] / 1e9:.2f} GB for 16384×8192",
        f"8·M·N + 4·N bytes that the fused kernel does not ($C$ read and written, plus the bias vector), "
        f"{o8['extra_bytes_one_kernel'] / 1e6:.0f} MB at 8192³; two passes move 16·M·N + 4·N, "
        f"{o8['extra_bytes_unfused'] / 1e9:.2f} GB",
        f"the fused kernel takes {o8['fused_ms']:.2f} ms and Level 5's GEMM followed by one kernel "
        f"{o8['unfused_one_kernel_ms']:.2f} ms, {saved(o8, 'unfused_one_kernel_ms')} less",
        f"Against two kernels ({o8['unfused_ms']:.2f} ms in the same run) it is {saved(o8, 'unfused_ms')} less",
        f"The one kernel adds {o8['unfused_one_kernel_ms'] - o8['gemm_only_ms']:.2f} ms to a {o8['gemm_only_ms']:.2f} ms "
        f"GEMM, the two kernels {o8['unfused_ms'] - o8['gemm_only_ms']:.2f} ms",
        f"At 4096³ the fused kernel takes {o4['fused_ms']:.2f} ms, {saved(o4, 'unfused_one_kernel_ms')} less than with one "
        f"kernel ({o4['unfused_one_kernel_ms']:.2f} ms) and {saved(o4, 'unfused_ms')} less than with two ({o4['unfused_ms']:.2f} ms)",
        f"the fused kernel is {k512['unfused_ms'] / k512['fused_ms']:.2f} times faster at 8192×8192×512, "
        f"{k128['unfused_ms'] / k128['fused_ms']:.2f} times at 8192×8192×128 ({k128['fused_ms']:.2f} ms against "
        f"{k128['unfused_ms']:.2f} ms), and {k64['unfused_ms'] / k64['fused_ms']:.2f} times at 16384×8192×64",
        f"{k128['fused_ms']:.2f} ms against {k128['cublas_unfused_ms']:.2f} ms, and {k64['fused_ms']:.2f} ms against "
        f"{k64['cublas_unfused_ms']:.2f} ms",
        f"Level 5's GEMM plus one kernel would take about {model:.2f} ms at 8192×8192×128, and fusion would be about "
        f"{model / k128['fused_ms']:.2f} times faster instead of {k128['unfused_ms'] / k128['fused_ms']:.2f}",
        f"the two kernels add {k128['unfused_ms'] - k128['gemm_only_ms']:.2f} ms to a {k128['gemm_only_ms']:.2f} ms GEMM",
        "2048 at $K = 8192$, 32 at $K = 128$, 16 at $K = 64$",  # K/4 FLOPs per byte of one pass (8MN bytes)
        f"{saved(o8, 'unfused_one_kernel_ms')} at 8192³ against one separate kernel ({saved(o8, 'unfused_ms')} against two), "
        f"up to {k64['unfused_ms'] / k64['fused_ms']:.2f} times at $K = 64$ against two",
        f"Against one separate kernel, fusion saves {saved(o8, 'unfused_one_kernel_ms')} at 8192³ ({saved(o8, 'unfused_ms')} "
        f"against two). Against two kernels it is {k128['unfused_ms'] / k128['fused_ms']:.2f} to "
        f"{k64['unfused_ms'] / k64['fused_ms']:.2f} times faster",
        f"at {results.SEED_CLAIMS[L6]:.0%} of cuBLAS against {results.SEED_CLAIMS[L5]:.0%} for Level 5",
        f"Level 5 reaches {_find(L5, 1024, **DEFAULT)['ratio_to_cublas']:.1%} of cuBLAS and the fused kernel with ReLU "
        f"and bias {_find(L6, 1024, **DEFAULT, **EPILOGUES['relu'])['ratio_to_cublas']:.1%}",
    ]
    assert "cuBLAS's own fused epilogues (cuBLASLt) were not measured" in prose
    assert "No one-kernel time was recorded at small $K$" in prose
    assert_prose_says(claims, prose)
    assert k128["cublas_unfused_ms"] > k128["fused_ms"] and k64["cublas_unfused_ms"] > k64["fused_ms"]
    assert k512["cublas_unfused_ms"] < k512["fused_ms"]  # "at those two smallest shapes" only

    # registers and instruction mix of the epilogue options (ptxas here, SASS as recorded)
    regs = {gc.compile_report(L6, arch="sm_90", **v).registers for v in EPILOGUES.values()}
    assert regs == {gc.compile_report(L5, arch="sm_90").registers}
    assert f"{regs.pop()} registers per thread for every option" in prose
    mix = {k: _sass(L6, {**DEFAULT, **v}) for k, v in EPILOGUES.items()}
    assert f"the kernel has {mix['none']['FFMA']} FFMA" in prose
    assert f"and {mix['none']['LDGSTS.32']} four-byte copies into shared memory (`LDGSTS.32`" in prose
    assert "LDG.32" not in mix["none"]
    assert mix["relu"]["FFMA"] - mix["none"]["FFMA"] == mix["relu"]["LDG.32"] == 64
    assert mix["accumulate"]["LDG.32"] == 64
    assert "adds 64 FFMA and 64 global loads per thread" in prose and "adds the same 64 loads" in prose
    assert f"brings the FFMA count to {mix['gelu']['FFMA']}" in prose
