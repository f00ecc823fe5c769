"""Every number the Level 11 (Hopper: wgmma, TMA, warp specialization) prose quotes, recomputed from the
recorded H200 files, the compile reports and the disassembly (no GPU needed); and its figures."""
from pathlib import Path

import pytest

import gemm_course as gc
from gemm_course import diagrams, results
from gemm_course.hopper import encode_tensor_map
from gemm_course.sass import kernel_mix, memory_summary
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks" / "11_hopper_wgmma.ipynb"
L9, L10, L11 = "09_wmma", "10_mma_pipeline", "11_hopper_wgmma"
YARDSTICK = 0.90  # the prose's mark: step 4 is above 90% of cuBLAS bf16 at 4096³ and 8192³
BF16 = "bfloat16"


def _rec(level, n, dtype=None, **p):
    return results.find(level, n, dtype=dtype, **gc.get_level(level).resolve(**p))


def _cublas(n, dtype=BF16, level=L11):
    return next(r for r in results.recorded(level, dtype=dtype) if r["level"] == "cublas" and r["M"] == n)


def test_level11_recorded_numbers():
    prose = _english_prose(NB)
    steps8 = {s: _rec(L11, 8192, step=s) for s in (1, 2, 3, 4)}
    steps4 = {s: _rec(L11, 4096, step=s) for s in (1, 2, 3, 4)}
    steps1k = {s: _rec(L11, 1024, step=s) for s in (1, 2, 3, 4)}
    b4, b8 = _cublas(4096), _cublas(8192)
    s4, s8 = steps4[4], steps8[4]
    three = _rec(L11, 8192, step=4, stages=3)
    l10_bf16, l10_fp16 = _rec(L10, 8192, dtype=BF16, stages=4), _rec(L10, 8192, stages=4)
    # steps 1-3 large gains at both sizes; step 4 a gain at 4096³, level with step 3 at 8192³ (inside the spread)
    for steps in (steps4, steps8):
        assert steps[1]["tflops"] * 2 < steps[2]["tflops"] < steps[3]["tflops"] * 0.9
    gain4 = s4["tflops"] / steps4[3]["tflops"] - 1
    assert gain4 > 0.01 and abs(s8["tflops"] / steps8[3]["tflops"] - 1) < 0.01
    assert steps8[3]["q1_ms"] < s8["median_ms"] < steps8[3]["q3_ms"]  # "less than the spread"
    assert YARDSTICK <= s4["ratio_to_cublas"] < 1 and YARDSTICK <= s8["ratio_to_cublas"] < 1
    assert max(steps1k.values(), key=lambda r: r["tflops"]) is steps1k[2]
    sms = s8["provenance"]["sm_count"]
    blocks = {s: gc.get_level(L11).geometry(1024, 1024, 1024, gc.get_level(L11).resolve(step=s)).grid[0]
              for s in (2, 3)}
    assert blocks[2] < sms and blocks[3] < sms
    assert steps8[1]["tflops"] < l10_bf16["tflops"]  # "below Level 10"
    b8_other = _cublas(8192, level=L10)  # cuBLAS bf16 in the other recorded run (Levels 9-10 in bf16)
    claims = [
        f"it reached {l10_fp16['tflops']:.2f} TFLOPS in fp16 ({l10_fp16['ratio_to_cublas']:.1%} of cuBLAS) and "
        f"{l10_bf16['tflops']:.2f} TFLOPS in bf16 at 8192³ ({l10_bf16['ratio_to_cublas']:.1%} of cuBLAS's bf16 GEMM)",
        f"{steps8[1]['tflops']:.2f} TFLOPS at 8192³, {steps8[1]['ratio_to_cublas']:.1%} of cuBLAS, below Level 10",
        f"This reaches {steps8[2]['tflops']:.2f} TFLOPS at 8192³ ({steps8[2]['ratio_to_cublas']:.1%} of cuBLAS), "
        f"{steps8[2]['tflops'] / steps8[1]['tflops']:.1f} times step 1",
        f"{steps1k[2]['tflops']:.2f} TFLOPS ({steps1k[2]['ratio_to_cublas']:.1%}) against {steps1k[3]['tflops']:.2f} "
        "for step 3",
        f"its 128×128 tiles give {blocks[2]} blocks, the 128×256 tiles of steps 3 and 4 only {blocks[3]}, for the "
        f"H200's {sms} SMs",
        f"Step 3 reaches {steps4[3]['tflops']:.2f} TFLOPS at 4096³ ({steps4[3]['ratio_to_cublas']:.1%} of cuBLAS) "
        f"and {steps8[3]['tflops']:.2f} TFLOPS at 8192³ ({steps8[3]['ratio_to_cublas']:.1%})",
        f"Step 4 reaches {s4['tflops']:.2f} TFLOPS at 4096³ ({s4['ratio_to_cublas']:.1%} of cuBLAS), {gain4:.1%} more "
        f"than step 3, and {s8['tflops']:.2f} TFLOPS at 8192³ ({s8['ratio_to_cublas']:.1%}), level with step 3 there",
        f"step 3's interquartile range is {steps8[3]['q1_ms']:.3f}–{steps8[3]['q3_ms']:.3f} ms, step 4's "
        f"{s8['q1_ms']:.3f}–{s8['q3_ms']:.3f} ms around its median of {s8['median_ms']:.3f} ms",
        f"measured {b8['tflops']:.2f} and {b8_other['tflops']:.2f} TFLOPS at 8192³ in the two recorded runs",
        f"step 4 drops to {three['tflops']:.2f} TFLOPS ({three['ratio_to_cublas']:.1%}) at 8192³",
        f"cuBLAS's bf16 GEMM reaches {b4['tflops']:.2f} TFLOPS at 4096³ and {b8['tflops']:.2f} TFLOPS at 8192³",
        ", ".join(f"{steps8[s]['tflops']:.2f}" for s in (1, 2)) + f" and {steps8[3]['tflops']:.2f} TFLOPS at 8192³",
        f"step 4 adds {gain4:.1%} at 4096³",
        f"Step 4 is above {YARDSTICK:.0%} of cuBLAS at both sizes, {s4['ratio_to_cublas']:.1%} and {s8['ratio_to_cublas']:.1%}, "
        f"and {s8['tflops'] / l10_bf16['tflops']:.1f} times Level 10 in bf16",
        f"at 1024³ step 4 reaches {steps1k[4]['ratio_to_cublas']:.1%} of cuBLAS",
        f"{8192 * 8192 * 4 / 1e6:.0f} MB against {8192 * 8192 * 2 / 1e6:.0f} MB at 8192³",
        f"Step 4 reaches {s4['ratio_to_cublas']:.1%} and {s8['ratio_to_cublas']:.1%} of cuBLAS's bf16 GEMM at 4096³ "
        f"and 8192³: above {YARDSTICK:.0%} of cuBLAS, but not past it",
    ]
    # accuracy at K = 8192: the bound, the kernel's error (every step), cuBLAS's (bf16 output)
    errs = {f"{r['relative_error']:.1e}" for r in steps8.values()}
    assert len(errs) == 1
    tol = gc.tolerance(BF16, 8192)
    assert all(r["relative_error"] < gc.tolerance(BF16, r["K"]) for r in results.recorded(L11) if r["level"] == L11)
    assert b8["relative_error"] > tol
    claims += [f"At K = 8192 the bound is {tol:.1e}",
               f"relative error of {errs.pop()} for every step at 8192³",
               f"cuBLAS, which returns bf16, measured {b8['relative_error']:.1e}"]
    assert_prose_says(claims, prose)


def test_level11_compile_report_numbers():
    prose = _english_prose(NB)
    r1 = gc.compile_report(L11, arch="sm_90a", step=1)
    r2 = gc.compile_report(L11, arch="sm_90a", step=2)
    r4 = gc.compile_report(L11, arch="sm_90a", step=4)
    assert r4.registers == gc.compile_report(L11, arch="sm_90a", step=3).registers
    assert not (r1.spills or r2.spills or r4.spills)
    cap = 65536 // 384 // 8 * 8
    assert r4.registers == cap and r4.occupancy.blocks_per_sm == 1
    assert 128 * 40 + 256 * 232 <= 65536
    claims = [
        f"step 1 uses {r1.registers} registers per thread and {r1.static_shared_bytes} B of static shared memory",
        f"and {r1.occupancy.blocks_per_sm} blocks fit on an SM, limited by {r1.occupancy.limited_by}",
        f"Step 2 uses {r2.registers} registers and {r2.dynamic_shared_bytes} B of dynamic shared memory",
        f"Steps 3 and 4 report {r4.registers} registers",
        f"They use {r4.dynamic_shared_bytes} B of dynamic shared memory",
        f"caps the whole block at {cap} registers per thread at entry",
        f"128 × 40 + 256 × 232 = {128 * 40 + 256 * 232} of the SM's 65536 registers",
    ]
    assert_prose_says(claims, prose)


def test_level11_disassembly_quoted():
    prose = _english_prose(NB)
    mix, _ = kernel_mix(L11, "sm_90a", step=4)
    summary = memory_summary(mix)
    assert mix["HGMMA.64x256x16.F32.BF16"] == 4 and summary["UTMALDG"] == 5 and summary["BAR"] == 1
    assert summary["USETMAXREG"] == 2 and not any(k in summary for k in ("LDS.32", "LDS.128", "LDSM", "HMMA"))
    assert all(op in mix for op in ("SYNCS.EXCH.64", "SYNCS.PHASECHK.TRANS64.TRYWAIT",
                                    "USETMAXREG.DEALLOC.CTAPOOL", "USETMAXREG.TRY_ALLOC.CTAPOOL"))
    assert_prose_says(["`HGMMA.64x256x16.F32.BF16`", f"`UTMALDG.2D`, {summary['UTMALDG']} of them"], prose)


def test_level11_layout_figures():
    assert diagrams.ldmatrix_ways("sw128", 0, 0, swizzled=False) == 8
    assert diagrams.ldmatrix_ways("sw128", 0, 0, swizzled=True) == 1
    assert "8-way conflict" in _english_prose(NB)
    one, four = diagrams.producer_consumer_schedule(1, 10), diagrams.producer_consumer_schedule(4, 10)
    # with 4 stages the consumers never wait after the first copy; with 1 they wait for every copy
    assert all(b["mma_start"] == a["mma_end"] for a, b in zip(four, four[1:]))
    assert all(b["mma_start"] > a["mma_end"] for a, b in zip(one, one[1:]))
    assert len(diagrams.producer_consumer_figure(4, k_tiles=10).data) == 2 * 10  # a copy and an mma per k-tile


def test_level11_refuses_what_it_cannot_run():
    lv = gc.get_level(L11)
    assert lv.arch_specific and lv.needs == "sm_90a only"
    assert lv.runs_on(90) and not lv.runs_on(80) and not lv.runs_on(100)
    with pytest.raises(ValueError, match="sm_90a"):
        gc.compile_report(L11, arch="sm_80")
    with pytest.raises(ValueError, match="stages at 4"):
        lv.resolve(step=1, stages=3)
    assert lv.shape_rules(33, 64, 40, lv.resolve()) == [] and lv.shape_rules(33, 65, 40, lv.resolve())
    with pytest.raises(ValueError, match="multiple of 8"):
        encode_tensor_map(0, "bfloat16", 64, 65, 64)


def test_bfloat16_conversion_is_exact_and_rounds_to_even():
    import numpy as np

    x = np.array([1.0, 3.14159265, -0.1, 1 + 2**-8, 1 + 3 * 2**-8, 0.0], dtype=np.float32)
    bits = gc.dtypes.to_bfloat16(x)
    assert bits.dtype == np.uint16 and gc.dtypes.dtype_name(bits) == "bfloat16"
    back = gc.dtypes.to_float64(bits)
    assert back[0] == 1.0 and back[3] == 1.0 and back[4] == 1 + 4 * 2**-8  # ties go to even
    assert np.all(np.abs(back - x) <= np.abs(x) * 2**-8)
    A, B = gc.random_operands(5, 7, 3, "bfloat16", seed=1, xp=np)
    assert A.dtype == np.uint16 and np.all(np.abs(gc.dtypes.to_float64(A)) <= 1)


def test_ladder_page_quotes_level11():
    import re

    text = (ROOT / "book" / "ladder.md").read_text(encoding="utf-8")
    english = "\n".join(re.findall(r'\+\+\+ \{"tags": \["lang-en"\]\}\n(.*?)(?=\n\+\+\+|\n```|\Z)', text, re.S))
    s8 = _rec(L11, 8192, step=4)
    assert_prose_says([f"reaches {s8['tflops']:.2f} TFLOPS in bf16, {s8['ratio_to_cublas']:.1%} of cuBLAS's bf16 GEMM"],
                      english)


def test_level11_counters_and_predictions():
    """'What the counters say' and 'Predict, then measure': Nsight Compute counters of every step and of
    cuBLAS's bf16 GEMM at 4096³, beside the models of gemm_course.predictions."""
    from gemm_course import counters, predictions

    prose = _english_prose(NB)
    rows = {s: counters.find(L11, step=s) for s in (1, 2, 3, 4)}
    assert all(r["dtype"] == BF16 and r["M"] == 4096 for r in rows.values())
    m = {s: r["metrics"] for s, r in rows.items()}
    blas = counters.find("cublas", dtype=BF16)
    b = blas["metrics"]
    tc = [m[s]["tensor_pipe_pct"] for s in (1, 2, 3, 4)]
    assert tc == sorted(tc) and tc[-1] < b["tensor_pipe_pct"]
    bars = {s: memory_summary(kernel_mix(L11, "sm_90a", step=s)[0])["BAR"] for s in (1, 2, 3, 4)}
    assert bars == {1: 2, 2: 2, 3: 1, 4: 1}  # step 2: one at the start and one per k-tile
    l2 = {s: counters.derived(m[s])["l2_read_bytes"] / 1e9 for s in m}
    gb = lambda x: f"{x / 1e9:.2f} GB"  # noqa: E731
    dur4, durb = m[4]["duration_ns"] / 1e3, b["duration_ns"] / 1e3
    assert abs(m[4]["sm_clock_hz"] / b["sm_clock_hz"] - 1) < 0.01  # "at nearly the same clock"
    assert blas["kernels"] == ["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    claims = [f"busy {tc[0]:.0f}% of step 1's time, {tc[1]:.0f}% of step 2's, {tc[2]:.0f}% of step 3's and {tc[3]:.0f}% of "
              f"step 4's; cuBLAS keeps it busy {b['tensor_pipe_pct']:.0f}% of the time",
              f"their barrier stalls are {m[1]['stall_barrier']:.1f} and {m[2]['stall_barrier']:.1f} warps per issued instruction",
              f"ncu reports {m[3]['stall_barrier']:.1f} and {m[4]['stall_barrier']:.1f} there (cuBLAS: {b['stall_barrier']:.1f})",
              f"L2 reads fall from {l2[1]:.2f} GB (step 1, 64×128 tiles) to {l2[2]:.2f} GB (step 2, 128×128) and to "
              f"{l2[3]:.2f} and {l2[4]:.2f} GB (steps 3 and 4, 128×256)",
              f"HBM reads fall from {gb(m[1]['dram_read_bytes'])} to {gb(m[4]['dram_read_bytes'])}",
              f"cuBLAS reads {gb(b['dram_read_bytes'])} from HBM, the same as step 4, but only "
              f"{counters.derived(b)['l2_read_bytes'] / 1e9:.2f} GB from L2",
              "`nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT`",
              f"Step 4 writes {m[4]['dram_write_bytes'] / 1e9:.3f} GB to HBM, cuBLAS {b['dram_write_bytes'] / 1e9:.3f} GB",
              f"({m[4]['sm_clock_hz'] / 1e6:.0f} and {b['sm_clock_hz'] / 1e6:.0f} MHz), step 4 takes {dur4:.1f} µs and "
              f"cuBLAS {durb:.1f} µs",
              f"The ratio of the two times, {durb / dur4:.2f}, equals the ratio of their busy shares "
              f"({m[4]['tensor_pipe_pct']:.1f}% against {b['tensor_pipe_pct']:.1f}%)"]
    assert f"{durb / dur4:.2f}" == f"{m[4]['tensor_pipe_pct'] / b['tensor_pipe_pct']:.2f}"
    assert m[4]["dram_read_bytes"] / 1e9 == pytest.approx(b["dram_read_bytes"] / 1e9, abs=0.005)
    # predict, then measure
    pr = {s: {r["key"]: r for r in predictions.compare(L11, step=s)} for s in (1, 2, 3, 4)}
    assert pr[1]["global_load_requests"]["predicted"] == m[1]["global_load_requests"] == 6291456
    assert pr[1]["sectors_per_load_request"]["measured"] == 16
    assert all(m[s]["global_load_requests"] == 0 for s in (2, 3, 4))
    calc = {s: gc.compile_report(L11, arch="sm_90a", step=s).occupancy for s in (1, 3, 4)}
    assert all(o.warps_per_sm == 12 and o.max_warps_per_sm == 64 for o in calc.values())
    occ = {s: m[s]["achieved_occupancy_pct"] for s in m}
    c_bytes = 4 * 4096 * 4096
    writes = [r["metrics"]["dram_write_bytes"] for r in counters.recorded(L11) if r["level"] == L11]
    l2r = [pr[s]["l2_read_bytes"]["ratio"] for s in pr] + [predictions.compare(L11, step=4, stages=3)[1]["ratio"]]
    dr = [pr[s]["dram_read_bytes"]["ratio"] for s in pr]
    claims += [f"{pr[1]['global_load_requests']['predicted']:,} loads of 16 sectors each at 4096³",
               f"Measured: {m[1]['global_load_requests']:,.0f} requests of {pr[1]['sectors_per_load_request']['measured']:.1f} "
               "sectors for step 1, and none for steps 2 to 4",
               f"allows 12 of 64 warps per SM, {100 * 12 / 64:.2f}%",
               f"Step 1 achieves {occ[1]:.0f}%, but steps 3 and 4 only {occ[3]:.0f}%",
               f"9 of 64, {100 * 9 / 64:.1f}%; the counters measure {occ[3]:.2f}% and {occ[4]:.2f}%",
               f"C is {c_bytes / 1e9:.3f} GB at 4096³",
               f"HBM writes measure from {max(writes) / 1e9:.3f} GB (step 1) down to {min(writes) / 1e9:.3f} GB (steps 3 and 4)",
               f"L2 reads are {min(l2r):.2f} to {max(l2r):.2f} of the tile-traffic model",
               f"HBM reads are {min(dr):.1f} to {max(dr):.1f} times the {pr[1]['dram_read_bytes']['predicted'] / 1e9:.2f} GB"]
    assert max(writes) == m[1]["dram_write_bytes"] and f"{min(writes) / 1e9:.3f}" == f"{m[3]['dram_write_bytes'] / 1e9:.3f}" \
        == f"{m[4]['dram_write_bytes'] / 1e9:.3f}"
    assert_prose_says(claims, prose)
