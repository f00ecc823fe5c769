"""Every number the Level 12 prose quotes, recomputed from the recorded 2 × H200 multi-GPU files, the
course's recorded fp16 ladder and the models (gemm_course.models, collectives, tensor_parallel), with
no GPU; plus the chapter's figures and tables (gemm_course.multigpu.report), with the recorded files and
with a file of the newer format (collectives fitted, tensor-parallel rows measured)."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_course.multigpu import collectives as co
from gemm_course.display import diagrams
from gemm_course.multigpu import report
from gemm_course.measure import results
from gemm_course.multigpu import tensor_parallel as tp
from gemm_course.run.check import tolerance
from gemm_course.multigpu.collectives import Links
from gemm_course.models import gemm_flops, grid_words, pipeline_seconds, row_split_model, summa_model
from gemm_course.multigpu.schemes import grid_shape, paper_models
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "gemm_course" / "results"
NOTEBOOK = ROOT / "notebooks" / "12_multi_gpu.ipynb"
NETWORK_GBS = 50.0  # GPUs in separate machines, on paper (multigpu_report.NETWORK_GBS)


def _runs(name):
    return results.load(RESULTS / name)["multigpu"]


MAIN, LEVEL8 = _runs("h200x2_12_multigpu.json"), _runs("h200x2_12_multigpu_level8.json")
FITS = results.load(RESULTS / "h200x2_12_multigpu.json")["collectives"][0]


def _row(rows, scheme, gpus, n, scope="end to end"):
    return next(r for r in rows if r["scheme"] == scheme and r["gpus"] == gpus and r["M"] == n
                and r.get("scope", "end to end") == scope)


def _tp(dtype, form, chunks, overlap, gpus=2):
    return next(r for r in MAIN if r["scheme"] == "tensor parallel" and r["dtype"] == dtype and r["gpus"] == gpus
                and (gpus == 1 or (r["form"] == form and r["chunks"] == chunks and r["overlap"] == overlap)))


LINKS = Links.from_dict(FITS["fits"])


def _pct(measured, model):
    return abs(measured / model - 1) * 100


@pytest.fixture(scope="module")
def prose():
    return _english_prose(NOTEBOOK)


def test_recorded_hardware_and_what_is_measured(prose):
    prov = results.load(RESULTS / "h200x2_12_multigpu.json")["provenance"]
    assert prov["gpus_visible"] == 2 and prov["gpu"] == "NVIDIA H200" and prov["nccl"].startswith("228")
    assert not (RESULTS / "h200x2_12_multigpu_cublas.json").exists()
    data = [results.load(f) for f in results.recorded_files()]
    rows = [r for d in data for r in d.get("multigpu", [])]
    assert {r["gpus"] for r in rows} == {1, 2}  # 4 and 8 GPUs: model only
    assert [r for r in rows if r["scheme"] == "tensor parallel"] and FITS["gpus"] == 2
    # "each prediction is within 15% of its measurement"
    assert all(_pct(r["median_ms"], r["model_ms"]) < 15 for r in MAIN + LEVEL8)
    assert "not been measured" not in prose and "not measured here yet" not in prose
    assert_prose_says([f"The recorded runs used {prov['gpus_visible']} NVIDIA H200 GPUs",
                       "(NCCL 2.28)", "each prediction is within 15% of its measurement",
                       "calibrated by the $\\alpha$ and $\\beta$ measured on two"], prose)
    assert [grid_shape(p) for p in (2, 4, 8)] == [(1, 2), (2, 2), (2, 4)]
    assert_prose_says(["1×2 for 2 GPUs, 2×2 for 4, 2×4 for 8"], prose)


def test_alpha_beta_calibration(prose):
    f = FITS["fits"]["fits"]
    assert FITS["fit_min_bytes"] == 1 << 20 and all(x["min_bytes"] == 1 << 20 for x in f.values())
    fit = lambda c: f"{f[c]['alpha_s'] * 1e6:.1f} µs and {f[c]['link_gbs']:.0f} GB/s"  # noqa: E731
    bc = f["broadcast"]
    small = 4 * 8192 * 8192 / 2
    term = small * bc["beta_s_per_byte"]
    assert LINKS.fit_for("broadcast").alpha_s == pytest.approx(bc["alpha_s"])
    assert_prose_says([
        "(P-1) \\cdot \\alpha + n \\cdot \\beta",
        "fitted $\\alpha$ and $\\beta$ to the sizes from 1 MiB up",
        f"The broadcast gives $\\alpha$ = {bc['alpha_s'] * 1e6:.1f} µs and $1/\\beta$ = {bc['link_gbs']:.0f} GB/s "
        f"(rms residual {bc['rms_relative_residual']:.0%})",
        f"the all-reduce {fit('all-reduce')}, the all-gather {fit('all-gather')}, the reduce-scatter "
        f"{fit('reduce-scatter')}, and a send/recv pair {fit('send/recv')}",
        f"the smallest message the GEMM runs send, {small / 1e6:.0f} MB (half of A at 8192³, or one SUMMA panel), has a "
        f"bandwidth term of {term * 1e3:.3f} ms at the broadcast's $\\beta$, and the broadcast's $\\alpha$ adds "
        f"{bc['alpha_s'] / term:.1%} to it",
    ], prose)


def test_row_split_and_summa_traffic_and_the_lower_bound(prose):
    n = 16384
    L = LINKS
    e2e = {P: row_split_model(n, n, n, P, L, 1.0, 4, "end to end") for P in (2, 4, 8)}
    summa = {P: summa_model(n, n, n, *grid_shape(P), L, 0.0, scope="algorithm") for P in (2, 4, 8)}
    gb = lambda x: f"{x / 1e9:.2f} GB"  # noqa: E731
    assert len({gb(c.bytes_per_gpu) for c in e2e.values()}) == 1  # each GPU receives B once, whatever P
    assert len({gb(c.bytes_per_gpu) for c in summa.values()}) == 1
    lb = {P: co.lower_bound_bytes(n, n, n, P) for P in (2, 4, 8)}
    assert all(summa[P].bytes_per_gpu > lb[P] for P in lb)
    assert 4 * grid_words(n, n, n, 2, 2, 2) == pytest.approx(lb[8])  # the 3-D split meets the bound on 8 GPUs
    assert_prose_says([
        f"at 16384³ in FP32 that is {gb(4 * n * n)}",
        f"what the busiest GPU of that phase receives gives {gb(e2e[2].bytes_per_gpu)} on 2 GPUs",
        f"At 16384³ that is {gb(summa[2].bytes_per_gpu)} per GPU on a 1×2 grid, and again {gb(summa[4].bytes_per_gpu)} "
        "on 2×2 and on 2×4",
        f"At 16384³ in FP32 that is {gb(lb[2])} on 2 GPUs, {gb(lb[4])} on 4 and {gb(lb[8])} on 8",
        f"SUMMA's {gb(summa[2].bytes_per_gpu)} stays above it",
        f"meets it: {gb(4 * grid_words(n, n, n, 2, 2, 2))} per GPU",
        f"({gb(lb[8])} per GPU on 8 GPUs at 16384³)",
    ], prose)


def test_correctness_numbers(prose):
    e = lambda r: f"{r['relative_error']:.1e}"  # noqa: E731
    assert all(r["passed"] for r in MAIN + LEVEL8)
    assert_prose_says([
        f"tolerance ({tolerance('float32', 8192):.1e} at 8192³, {tolerance('float32', 16384):.1e} at 16384³)",
        f"row split with cuBLAS at 8192³: {e(_row(MAIN, 'row split', 1, 8192))} on 1 GPU and "
        f"{e(_row(MAIN, 'row split', 2, 8192))} on 2 GPUs",
        f"row split with cuBLAS at 16384³: {e(_row(MAIN, 'row split', 1, 16384))} on 1 GPU and "
        f"{e(_row(MAIN, 'row split', 2, 16384))} on 2 GPUs",
        f"SUMMA on 2 GPUs: {e(_row(MAIN, 'SUMMA', 2, 8192))} at 8192³ and {e(_row(MAIN, 'SUMMA', 2, 16384))} at 16384³",
        f"row split with Level 8 at 16384³: {e(_row(LEVEL8, 'row split', 1, 16384))} on 1 GPU and "
        f"{e(_row(LEVEL8, 'row split', 2, 16384))} on 2 GPUs",
    ], prose)
    assert _row(LEVEL8, "row split", 1, 16384)["relative_error"] == _row(LEVEL8, "row split", 2, 16384)["relative_error"]


def test_measured_scaling(prose):
    c = {(s, p, n): _row(MAIN, s, p, n)["tflops"] for s in ("row split", "SUMMA") for p in (1, 2)
         for n in (8192, 16384) if not (s == "SUMMA" and p == 1)}
    one8, one16 = c["row split", 1, 8192], c["row split", 1, 16384]
    l1, l2 = (_row(LEVEL8, "row split", p, 16384) for p in (1, 2))
    assert LEVEL8 and not [r for r in LEVEL8 if r["scheme"] != "row split"]
    prov = results.load(RESULTS / "h200x2_12_multigpu_level8.json")["provenance"]
    assert prov["local_params"]["BM"] == 64 and prov["local_params"]["BN"] == 256
    assert_prose_says([
        f"one H200 runs 8192³ at {one8:.2f} TFLOPS and 16384³ at {one16:.2f} TFLOPS",
        f"the row split reaches {c['row split', 2, 8192]:.2f} TFLOPS at 8192³ ({c['row split', 2, 8192] / one8:.2f} times "
        f"one GPU) and {c['row split', 2, 16384]:.2f} TFLOPS at 16384³ ({c['row split', 2, 16384] / one16:.2f} times)",
        f"SUMMA reaches {c['SUMMA', 2, 8192]:.2f} TFLOPS ({c['SUMMA', 2, 8192] / one8:.2f} times) and "
        f"{c['SUMMA', 2, 16384]:.2f} TFLOPS ({c['SUMMA', 2, 16384] / one16:.2f} times)",
        f"16384³ runs at {l1['tflops']:.2f} TFLOPS on one GPU and {l2['tflops']:.2f} TFLOPS with the row split on two, "
        f"{l2['tflops'] / l1['tflops']:.2f} times; its model says {l2['model_ms']:.2f} ms and the run took "
        f"{l2['median_ms']:.2f} ms",
        f"the row split reached {c['row split', 2, 16384]:.2f} TFLOPS at 16384³, {c['row split', 2, 16384] / one16:.2f} "
        f"times one GPU, {_pct(_row(MAIN, 'row split', 2, 16384)['median_ms'], _row(MAIN, 'row split', 2, 16384)['model_ms']):.1f}% "
        "from its model",
        f"SUMMA, {c['SUMMA', 2, 16384]:.2f} TFLOPS, "
        f"{_pct(_row(MAIN, 'SUMMA', 2, 16384)['median_ms'], _row(MAIN, 'SUMMA', 2, 16384)['model_ms']):.1f}% from its model",
    ], prose)
    assert "before Level 8's B" not in prose


def test_row_split_model_against_measurement(prose):
    n = 16384
    two, alg = _row(MAIN, "row split", 2, n), _row(MAIN, "row split", 2, n, "algorithm")
    ph, m = two["phases_ms"], two["model_phases_ms"]
    comm = ph["broadcast B"] + ph["scatter A"] + ph["gather C"]
    mcomm = m["broadcast B"] + m["scatter A"] + m["gather C"]
    r8 = _row(MAIN, "row split", 2, 8192)
    ideal = 2 * n**3 / m["compute"] / 1e9
    # the row's model is the corrected model with the measured fits and the timed local GEMM
    rebuilt = row_split_model(n, n, n, 2, LINKS, m["compute"] / 1e3, 4, "end to end")
    assert rebuilt.seconds * 1e3 == pytest.approx(two["model_ms"], rel=1e-6)
    assert m["scatter A"] == pytest.approx(m["gather C"])
    assert_prose_says([
        f"The model gives {m['compute']:.2f} ms of compute, a broadcast of B in {m['broadcast B']:.2f} ms, and a "
        f"scatter of A and a gather of C in {m['scatter A']:.2f} ms each: {two['model_ms']:.2f} ms end to end",
        f"The measurement is {two['median_ms']:.2f} ms, {_pct(two['median_ms'], two['model_ms']):.1f}% below",
        f"broadcast B {ph['broadcast B']:.2f} ms, scatter A {ph['scatter A']:.2f} ms, compute {ph['compute']:.2f} ms, "
        f"gather C {ph['gather C']:.2f} ms, so {comm:.2f} ms of communication against the modelled {mcomm:.2f} ms",
        f"At 8192³ the model says {r8['model_ms']:.2f} ms and the run took {r8['median_ms']:.2f} ms",
        f"the model's {m['compute']:.2f} ms is {ideal:.1f} TFLOPS, and the run took {alg['median_ms']:.2f} ms",
        f"the run's {two['tflops']:.2f} TFLOPS is {two['tflops'] / ideal:.1%} of the model's compute alone",
    ], prose)
    assert two["median_ms"] < two["model_ms"]


def test_summa_model_against_measurement(prose):
    n = 16384
    summa, s8 = _row(MAIN, "SUMMA", 2, n), _row(MAIN, "SUMMA", 2, 8192)
    m = {p["name"]: p["ms"] for p in summa["model"]["phases"]}
    sp = summa["phases_ms"]
    loop = m["pack panels"] + m["panel broadcasts"] + m["panel GEMMs"]
    assert set(sp) == {"pack A, B blocks", "send A, B blocks", "panel loop", "gather C blocks", "unpack C"}
    assert all(v > 0 for v in m.values())  # local copies are timed and priced now
    all_gather = row_split_model(n, n, n, 2, LINKS, 0.0, 4, "even start").communication_s * 1e3
    assert_prose_says([
        f"End to end it predicts {summa['model_ms']:.2f} ms: packing the blocks of A and B on GPU 0 "
        f"({m['pack A, B blocks']:.2f} ms) and sending them ({m['send A, B blocks']:.2f} ms), the panel loop "
        f"({loop:.2f} ms: copying the panels into contiguous buffers, {m['pack panels']:.2f} ms, two panel broadcasts, "
        f"{m['panel broadcasts']:.2f} ms, and the panel GEMMs, {m['panel GEMMs']:.2f} ms), the gather of C's blocks "
        f"({m['gather C blocks']:.2f} ms) and copying them into C ({m['unpack C']:.2f} ms)",
        f"The measurement is {summa['median_ms']:.2f} ms, {_pct(summa['median_ms'], summa['model_ms']):.1f}% below",
        f"packing {sp['pack A, B blocks']:.2f} ms, sending {sp['send A, B blocks']:.2f} ms, the panel loop "
        f"{sp['panel loop']:.2f} ms, the gather {sp['gather C blocks']:.2f} ms and the unpacking {sp['unpack C']:.2f} ms",
        f"At 8192³ the model says {s8['model_ms']:.2f} ms and the run took {s8['median_ms']:.2f} ms, "
        f"{_pct(s8['median_ms'], s8['model_ms']):.1f}% below",
        f"receives the other, {4 * n * n / 2 / 1e9:.2f} GB",
        f"each uses the link in one direction only: {m['panel broadcasts']:.2f} ms",
        f"would take {all_gather:.2f} ms at the measured all-gather fit",
    ], prose)
    assert summa["median_ms"] < summa["model_ms"] and s8["median_ms"] < s8["model_ms"]


def test_model_on_paper(prose):
    n = 16384
    t1 = _row(MAIN, "row split", 1, n)["tflops"]
    rows = paper_models(LINKS, n, t1, (1, 2, 4, 8), NETWORK_GBS)
    pick = {(r["scheme"], r["gpus"], r["scope"], "separate" in r["links"]): r for r in rows}
    tf = lambda P, s, scope, sep=False: f"{pick[s, P, scope, sep]['model_tflops']:.1f}"  # noqa: E731
    gb = lambda P, s, scope: f"{pick[s, P, scope, False]['bytes_per_gpu'] / 1e9:.2f} GB"  # noqa: E731
    cm = lambda P: pick["row split", P, "end to end", True]["communication_ms"]  # noqa: E731
    rs, su = "row split", "SUMMA"
    for P in (4, 8):
        assert pick[rs, P, "algorithm", False]["model_tflops"] == pytest.approx(P * t1)
        assert pick[rs, P, "end to end", False]["model_tflops"] > pick[su, P, "end to end", False]["model_tflops"]
    assert pick[su, 8, "even start", False]["model_tflops"] > pick[rs, 8, "even start", False]["model_tflops"]
    # "the two tie on 4 GPUs": within 1%
    assert abs(pick[su, 4, "even start", False]["model_tflops"] / pick[rs, 4, "even start", False]["model_tflops"] - 1) < 0.01
    assert pick[su, 8, "even start", True]["model_tflops"] > pick[rs, 8, "even start", True]["model_tflops"]
    e2e_net = [pick[rs, P, "end to end", True]["model_tflops"] for P in (2, 4, 8)]
    assert e2e_net[0] < e2e_net[1] < e2e_net[2]
    bc = LINKS.fit_for("broadcast")
    assert_prose_says([
        f"calibrated by the one-GPU rate of the 16384³ run ({t1:.2f} TFLOPS) and the α-β fits measured on two GPUs "
        f"(broadcast: $\\alpha$ = {bc.alpha_s * 1e6:.1f} µs, {bc.link_gbs:.0f} GB/s)",
        f"a network at {NETWORK_GBS:.0f} GB/s per GPU",
        f"its model is the ideal {tf(4, rs, 'algorithm')} and {tf(8, rs, 'algorithm')} TFLOPS on 4 and 8 GPUs, against "
        f"SUMMA's {tf(4, su, 'algorithm')} and {tf(8, su, 'algorithm')}",
        f"grows from {gb(2, rs, 'even start')} per GPU to {gb(4, rs, 'even start')} on 4 and {gb(8, rs, 'even start')} "
        f"on 8 ({tf(4, rs, 'even start')} and {tf(8, rs, 'even start')} TFLOPS), while SUMMA's traffic stays at "
        f"{gb(8, su, 'algorithm')} ({tf(4, su, 'even start')} and {tf(8, su, 'even start')} TFLOPS)",
        f"the row split reaches {tf(4, rs, 'end to end')} and {tf(8, rs, 'end to end')} TFLOPS, SUMMA "
        f"{tf(4, su, 'end to end')} and {tf(8, su, 'end to end')}",
        f"{tf(2, rs, 'end to end', True)}, {tf(4, rs, 'end to end', True)} and {tf(8, rs, 'end to end', True)} TFLOPS "
        "on 2, 4 and 8 GPUs",
        f"grows from {cm(2):.1f} ms to {cm(8):.1f} ms through GPU 0's link",
        f"SUMMA gets {tf(2, su, 'end to end', True)}, {tf(4, su, 'end to end', True)} and {tf(8, su, 'end to end', True)}",
        f"the row split gets {tf(2, rs, 'even start', True)}, {tf(4, rs, 'even start', True)} and "
        f"{tf(8, rs, 'even start', True)} TFLOPS, SUMMA {tf(2, su, 'even start', True)}, {tf(4, su, 'even start', True)} "
        f"and {tf(8, su, 'even start', True)}",
    ], prose)


def test_tensor_parallel_measured_beside_the_model(prose):
    M, H, F = tp.DEFAULT_SHAPE
    assert (M, H, F) == (8192, 8192, 32768)
    tps = [r for r in MAIN if r["scheme"] == "tensor parallel"]
    assert all(r["passed"] for r in tps) and len(tps) == 14
    fp32 = [r for r in tps if r["dtype"] == "float32"]
    assert max(_pct(r["median_ms"], r["model_ms"]) for r in fp32) < 0.6  # "within 0.6%"
    one16 = _tp("float16", None, 1, False, gpus=1)
    a1, a4, ao = _tp("float16", "all-reduce", 1, False), _tp("float16", "all-reduce", 4, False), _tp("float16", "all-reduce", 4, True)
    rs1, rs4, rso = (_tp("float16", "reduce-scatter/all-gather", c, o) for c, o in ((1, False), (4, False), (4, True)))
    worst = max((r for r in tps if r["gpus"] == 2), key=lambda r: _pct(r["median_ms"], r["model_ms"]))
    assert worst is rso
    flops = tp.layer_flops(M, H, F)
    comp, mcomp = a1["t_compute_ms"], a1["model_phases_ms"]["compute"]
    same_gemms = [r["model_phases_ms"]["compute"] for r in (a1, rs1)]  # one chunk: identical GEMMs, both forms
    f32a, f32r = _tp("float32", "all-reduce", 4, True), _tp("float32", "reduce-scatter/all-gather", 4, True)
    f32a_serial = _tp("float32", "all-reduce", 4, False)
    hid = tp.overlap_fraction(a4["median_ms"], ao["median_ms"], a4["t_comm_ms"])[1]
    assert hid == pytest.approx(ao["overlap_fraction_raw"]) and hid < 0
    assert ao["median_ms"] > a4["t_compute_ms"] + a4["t_comm_ms"]  # slower than its phases added
    model_hidden = report.tp_model_rows(report.runs(), (2,), (4,), ("float32",))[0]["overlap_fraction"]
    quarter = M // 4 * H * 2
    ar = LINKS.fit_for("all-reduce")
    term, alphas = quarter * ar.beta_s_per_byte * 1e6, 2 * ar.alpha_s * 1e6
    assert co.cost_terms("all-reduce", 2) == (2, 1.0)
    assert_prose_says([
        f"{M} tokens, $H$ = {H} and $F$ = {F}, the partial sum is {M * H * 2 / 1e6:.0f} MB in fp16",
        f"In fp16 the block on one GPU took {one16['median_ms']:.3f} ms against the model's {one16['model_ms']:.3f} ms "
        f"({one16['tflops']:.0f} TFLOPS), and on 2 GPUs with one all-reduce {a1['median_ms']:.3f} ms against "
        f"{a1['model_ms']:.3f} ms, {_pct(a1['median_ms'], a1['model_ms']):.1f}% over",
        f"the reduce-scatter form overlapped, {rso['median_ms']:.3f} ms against {rso['model_ms']:.3f} ms, "
        f"{_pct(rso['median_ms'], rso['model_ms']):.1f}%",
        f"the GEMMs of the all-reduce row took {comp:.3f} ms, {_pct(comp, mcomp):.1f}% more than the model's "
        f"{mcomp:.3f} ms, which is {flops / 2 / comp / 1e9:.0f} TFLOPS per GPU",
        f"range from {min(same_gemms):.3f} ms to {max(same_gemms):.3f} ms between rows",
        f"it hid {f32a['overlap_fraction_raw']:.0%} of the all-reduce ({f32a_serial['median_ms']:.3f} ms in series in 4 "
        f"chunks, {f32a['median_ms']:.3f} ms overlapped, against {f32a['t_comm_ms']:.3f} ms of communication) and "
        f"{f32r['overlap_fraction_raw']:.0%} of the reduce-scatter and all-gather; the model says {model_hidden:.0%}",
        f"the reduce-scatter form hid {rso['overlap_fraction_raw']:.0%} ({rs4['median_ms']:.3f} to {rso['median_ms']:.3f} ms)",
        f"{a4['median_ms']:.3f} ms in series, {ao['median_ms']:.3f} ms overlapped, so the overlap fraction is "
        f"{hid:.0%}".replace("-", "−"),
        f"measured compute phase and communication phase added ({a4['t_compute_ms'] + a4['t_comm_ms']:.3f} ms)",
        f"The fastest fp16 block on 2 GPUs is the all-reduce in 4 chunks without overlap, {a4['median_ms']:.3f} ms, "
        f"{a4['tflops']:.0f} TFLOPS, {a4['tflops'] / one16['tflops']:.2f} times one GPU; the overlapped reduce-scatter "
        f"form comes within {_pct(rso['median_ms'], a4['median_ms']):.1f}%",
        "In FP32 every prediction is within 0.6% of its measurement",
        f"A quarter of the fp16 partial is {quarter / 1e6:.1f} MB: its all-reduce on 2 GPUs has a bandwidth term of "
        f"{term:.1f} µs at the measured {ar.link_gbs:.0f} GB/s, and the two steps' $\\alpha$ add {alphas:.1f} µs, "
        f"{alphas / term:.0%} more",
    ], prose)
    assert a4["median_ms"] == min(r["median_ms"] for r in tps if r["dtype"] == "float16" and r["gpus"] == 2)


MEASURE_ARGS = ["--gpus", "1,2", "--sizes", "8192,16384", "--schemes", "row,summa,tp", "--tp-shape", "8192x8192x32768",
                "--chunks", "1,4", "--dtype", "float16,float32", "--forms", "all-reduce,reduce-scatter",
                "--out", "gemm_course/results/h200x2_12_multigpu.json"]


def test_the_measurement_command_is_valid(prose):
    command = ("python -m gemm_course multigpu " + " ".join(MEASURE_ARGS[:6]) + " \\\n    "
               + " ".join(MEASURE_ARGS[6:12]) + " \\\n    " + " ".join(MEASURE_ARGS[12:]))
    assert command in prose
    # without a GPU the options are checked first, then the run stops for want of GPUs (not for an option)
    env = dict(os.environ, GEMM_COURSE_NO_GPU="1")
    done = subprocess.run([sys.executable, "-m", "gemm_course", "multigpu", *MEASURE_ARGS[:-2]], capture_output=True,
                          text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode != 0 and "Level 12 runs on GPUs" in done.stderr, done.stderr[-800:]


def test_notebook_code_cells_are_short():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] == 4
    assert all("id" not in c and not c.get("outputs") for c in nb["cells"])
    assert NOTEBOOK.read_text(encoding="utf-8") == json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"  # after the install cell;
            and "exercise" not in c["metadata"].get("tags", [])][1:]  # an exercise's starter is the learner's to edit
    assert all(len(src.splitlines()) <= 4 for src in code), [s for s in code if len(s.splitlines()) > 4]


# --- the figures and tables --------------------------------------------------------------------------

def test_split_figure():
    for pr, pc in ((1, 2), (2, 2), (2, 4)):
        L = pr * pc // math.gcd(pr, pc)
        for panel in range(L):
            fig = diagrams.multigpu_split_figure(pr, pc, panel)
            names = [a.name for a in fig.layout.annotations if a.name]
            assert names.count("A") == pr * (pc - 1) and names.count("B") == pc * (pr - 1)
            summa = next(t for t in fig.data if t.name == "SUMMA")
            assert [list(r) for r in summa.z] == [[i * pc + j for j in range(pc)] for i in range(pr)]
            assert len(next(t for t in fig.data if t.name == "row split").z) == pr * pc
    with pytest.raises(ValueError):
        diagrams.multigpu_split_figure(2, 4, panel=4)


@pytest.mark.parametrize("P", [1, 2, 3, 4])
@pytest.mark.parametrize("form", tp.FORMS)
def test_tensor_parallel_figure_slices_follow_the_plan(P, form):
    fig = report.tensor_parallel_figure(P, form)
    shapes = {s.name: s for s in fig.layout.shapes}
    for name, by in (("W1", "x"), ("Z", "x"), ("W2", "y")):
        slices = [shapes[f"{name} {p}"] for p in range(P)]
        widths = [getattr(s, f"{by}1") - getattr(s, f"{by}0") for s in slices]
        expect = [b - a for a, b in tp.split_even(12 * P, P)]
        assert widths == pytest.approx([w * widths[0] / expect[0] for w in expect])
    assert sum(name.startswith("partial ") for name in shapes) == P
    assert ("Y 0" in shapes) == (form != "all-reduce") and ("Y" in shapes) == (form == "all-reduce")
    with pytest.raises(ValueError):
        report.tensor_parallel_figure(2, "all-to-all")


def test_pipeline_schedule_is_the_model():
    compute, comm = [1.0, 5.0, 1.0, 2.0], [4.0, 1.0, 1.0, 3.0]
    sched = report.pipeline_schedule(compute, comm)
    assert sched[-1]["communication"][1] == pytest.approx(pipeline_seconds(compute, comm))
    serial = report.pipeline_schedule(compute, comm, overlap=False)
    assert serial[-1]["communication"][1] == pytest.approx(sum(compute) + sum(comm))
    for s in sched:  # a chunk's collective never starts before its GEMMs end
        assert s["communication"][0] >= s["compute"][1]


def test_recorded_figures_fit_a_narrow_screen(monkeypatch):
    from test_figure_layout import _check, _check_top

    data = report.runs()
    for fig in (report.scaling_figure(data), report.phases_figure(data), report.paper_figure(data),
                report.collectives_figure(data)):
        _check(fig)
        assert fig.layout.title.subtitle.text
    for fig in (report.tensor_parallel_figure(2), report.pipeline_figure(data)):
        _check_top(fig)
    # the model's phases carry the measured names: SUMMA's five phases, its panel loop as one
    pairs = {(c["scheme"], c["n"]): report.phase_pairs(c["row"], c["model"]) for c in report.comparison(data)
             if c["gpus"] == 2 and c["scope"] == "end to end" and c["local"] == "cublas"}
    measured, modelled = pairs["SUMMA", 16384]
    assert set(measured) == set(modelled) == {"pack A, B blocks", "send A, B blocks", "panel loop", "gather C blocks",
                                              "unpack C"}
    sub = report.pipeline_figure(data, gpus=2, chunks=4).layout.title.subtitle.text.replace("<br>", " ")
    assert "all-reduce -23%" in sub and "reduce-scatter/all-gather 38%" in sub


def test_tensor_parallel_table_is_measured_beside_the_model(monkeypatch):
    import IPython.display

    notes = []
    monkeypatch.setattr(IPython.display, "display", notes.append)
    html = report.tp_table(report.runs()).data
    assert "measured ms" in html and "7.225" in html and "6.345" in html and "-23%" in html and not notes
    check = report.simulated_check()._repr_html_()  # folded, closed: every run passes
    assert "ok" in check and "WRONG" not in check and "all pass" in check and "<details class=\"gemm-fold\">" in check
    # on paper, the block's compute is priced at its measured one-GPU rate
    rate, source = report.tp_one_gpu_rate(report.runs(), "float16", tp.DEFAULT_SHAPE)
    assert rate == pytest.approx(_tp("float16", None, 1, False, gpus=1)["tflops"]) and "measured" in source


def _newer_file(tmp_path):
    """The cuBLAS recording in the newer format: scopes, a model per row, collectives fitted, and
    tensor-parallel rows (numbers invented for the test, not measurements)."""
    old = results.load(RESULTS / "h200x2_12_multigpu.json")
    new = json.loads(json.dumps(old))
    new["multigpu"] = [{k: v for k, v in r.items() if k not in ("scope", "model")} for r in new["multigpu"]
                       if r["scheme"] != "tensor parallel" and r.get("scope") == "end to end"]
    links = Links.uniform(12e-6, 300.0)
    rows = []
    for r in new["multigpu"]:
        for scope in ("end to end", "algorithm"):
            cost = row_split_model(r["M"], r["M"], r["M"], r["gpus"], links, 0.01, 4, scope) \
                if r["scheme"] == "row split" else summa_model(r["M"], r["M"], r["M"], 1, 2, links, 0.005, scope=scope)
            rows.append(dict(r, scope=scope, model=cost.as_dict(), median_ms=r["median_ms"] / (2 if scope == "algorithm" else 1)))
    tp_row = {"scheme": "tensor parallel", "form": "all-reduce", "gpus": 2, "overlap": True, "chunks": 4,
              "dtype": "float16", "M": 8192, "H": 8192, "F": 32768, "median_ms": 6.2, "model_ms": 6.04,
              "tflops": 1400.0, "model_tflops": 1456.0, "overlap_fraction_raw": 0.4, "passed": True,
              "phases_ms": {"compute": 5.9, "communication": 0.4}}
    new["multigpu"] = rows + [tp_row, dict(tp_row, overlap=False, chunks=1, median_ms=6.5, overlap_fraction_raw=None)]
    points = [co.Point(c, 2, s, links.seconds(c, s, 2), 0, 0, 10) for c in co.MEASURED for s in co.DEFAULT_SIZES]
    new["collectives"] = [{"gpus": 2, "points": [dict(p.__dict__) for p in points], "fits": links.as_dict()}]
    new["provenance"]["date"] = "2099-01-01T00:00:00+00:00"
    path = tmp_path / "h200x2_12_multigpu_new.json"
    path.write_text(json.dumps(new), encoding="utf-8")
    return path


def test_a_newer_recording_is_shown_beside_its_model(tmp_path, monkeypatch):
    path = _newer_file(tmp_path)
    monkeypatch.setattr(results, "recorded_files", lambda: [*sorted(RESULTS.glob("*.json")), path])
    data = report.runs()
    assert data[0]["provenance"]["date"].startswith("2099")  # newest first
    cal = report.calibration(data)
    assert cal["measured_alpha"] and cal["alpha_s"] == pytest.approx(12e-6)
    fig = report.collectives_figure(data)
    assert sum(t.name.startswith("measured:") for t in fig.data) == len(co.MEASURED)
    assert sum(t.name.startswith("fit:") for t in fig.data) == len(co.MEASURED)
    table = report.tp_table(data).data
    assert "measured ms" in table and "6.200" in table and "40%" in table
    # the rows' own models are used, in both scopes, and the algorithm rows are measured, not phases
    comp = [c for c in report.comparison(data) if c["gpus"] == 2 and c["local"] == "cublas"]
    assert comp and not any(c["from_phases"] for c in comp)
    row = next(c for c in comp if c["scheme"] == "row split" and c["n"] == 16384 and c["scope"] == "end to end")
    assert row["model_ms"] == pytest.approx(row["row"]["model"]["model_ms"])


def test_alpha_is_a_fit_intercept(prose):
    """α is the intercept of the line fitted from 1 MiB up, not a measured latency: the broadcast's α exceeds a whole
    small broadcast of the same run, and the all-reduce's two steps of α exceed a whole small all-reduce."""
    f = FITS["fits"]["fits"]
    small = lambda c: min((p for p in FITS["points"] if p["collective"] == c and p["n_bytes"] < FITS["fit_min_bytes"]),  # noqa: E731
                          key=lambda p: p["median_s"])
    bc, ar = small("broadcast"), small("all-reduce")
    assert f["broadcast"]["alpha_s"] > bc["median_s"] and 2 * f["all-reduce"]["alpha_s"] > ar["median_s"]
    kib = lambda p: f"{p['n_bytes'] // 1024} KiB"  # noqa: E731
    us = lambda s: f"{s * 1e6:.1f} µs"  # noqa: E731
    assert_prose_says([
        "These $\\alpha$ are fit intercepts, not measured latencies of one step",
        f"The broadcast's {us(f['broadcast']['alpha_s'])} is more than a whole {kib(bc)} broadcast took in the same run, "
        f"{us(bc['median_s'])}; the all-reduce's two steps of {us(f['all-reduce']['alpha_s'])} make "
        f"{us(2 * f['all-reduce']['alpha_s'])}, against {us(ar['median_s'])} for a whole {kib(ar)} all-reduce",
        "The usual remedy, known from practice and not measured here",
        "`NCCL_MAX_CTAS` or `NCCL_MAX_NCHANNELS`, or `maxCTAs` in a communicator's `ncclConfig_t`"], prose)
    assert "is the latency of one step (a launch" not in prose
