"""Every number the Level 12 prose quotes, recomputed from the recorded 2 × H200 multi-GPU files, the
course's recorded fp16 ladder and the models (gemm_course.models, collectives, tensor_parallel), with
no GPU; plus the chapter's figures and tables (gemm_course.multigpu_report), with the recorded files and
with a file of the newer format (collectives fitted, tensor-parallel rows measured)."""
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_course import collectives as co
from gemm_course import diagrams, multigpu_report as report, results
from gemm_course import tensor_parallel as tp
from gemm_course.check import tolerance
from gemm_course.collectives import Links
from gemm_course.models import gemm_flops, grid_words, pipeline_seconds, row_split_model, summa_model
from gemm_course.multigpu import grid_shape, paper_models
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "gemm_course" / "results"
NOTEBOOK = ROOT / "notebooks" / "12_multi_gpu.ipynb"
NETWORK_GBS = 50.0  # GPUs in separate machines, on paper (multigpu_report.NETWORK_GBS)


def _runs(name):
    return results.load(RESULTS / name)["multigpu"]


CUBLAS, LEVEL8 = _runs("h200x2_12_multigpu_cublas.json"), _runs("h200x2_12_multigpu_level8.json")


def _row(rows, scheme, gpus, n):
    return next(r for r in rows if r["scheme"] == scheme and r["gpus"] == gpus and r["M"] == n)


def _links(link_gbs):
    """The calibration of the recorded runs: α = 0, β = 1/(the run's 512 MiB broadcast bandwidth)."""
    return Links.uniform(0.0, link_gbs)


def _row_model(rows, n, scope="end to end"):
    one, two = _row(rows, "row split", 1, n), _row(rows, "row split", 2, n)
    return row_split_model(n, n, n, 2, _links(two["link_gbs"]), gemm_flops(n // 2, n, n) / (one["tflops"] * 1e12),
                           4, scope)


def _summa_model(n, scope="end to end"):
    one, two = _row(CUBLAS, "row split", 1, n), _row(CUBLAS, "SUMMA", 2, n)
    panel = gemm_flops(n, n // 2, n // 2) / (one["tflops"] * 1e12)  # 1×2 grid: 2 panels of K/2
    return summa_model(n, n, n, 1, 2, _links(two["link_gbs"]), panel, scope=scope)


def _phases(cost):
    return {p.name: p.seconds * 1e3 for p in cost.phases}


@pytest.fixture(scope="module")
def prose():
    return _english_prose(NOTEBOOK)


def test_recorded_hardware_and_what_is_not_measured(prose):
    prov = results.load(RESULTS / "h200x2_12_multigpu_cublas.json")["provenance"]
    assert prov["gpus_visible"] == 2 and prov["gpu"] == "NVIDIA H200"
    data = [results.load(f) for f in results.recorded_files()]
    rows = [r for d in data for r in d.get("multigpu", [])]
    assert {r["gpus"] for r in rows} == {1, 2}  # 4 and 8 GPUs: model only
    # the prose says the tensor-parallel block and the collectives are not measured: true of the files
    assert not [r for r in rows if r["scheme"] == "tensor parallel"] and not [d for d in data if d.get("collectives")]
    assert_prose_says([f"The recorded runs used {prov['gpus_visible']} NVIDIA H200 GPUs",
                       "The tensor-parallel MLP and the timing of each collective have not been measured on two "
                       "GPUs here yet", "No two-GPU measurement of the block exists here yet",
                       "The block has not been measured on two GPUs here yet; 4 and 8 GPUs are the model only"], prose)
    assert [grid_shape(p) for p in (2, 4, 8)] == [(1, 2), (2, 2), (2, 4)]
    assert_prose_says(["1×2 for 2 GPUs, 2×2 for 4, 2×4 for 8"], prose)


def test_alpha_beta_calibration(prose):
    links = [_row(rows, "row split", 2, m)["link_gbs"] for rows, m in ((CUBLAS, 8192), (CUBLAS, 16384), (LEVEL8, 16384))]
    two8 = _row(CUBLAS, "row split", 2, 8192)
    # every message the recorded 2-GPU runs send, in bytes over the link: the smallest is 134 MB
    n8, n16 = 8192, 16384
    messages = [4 * n * n * f for n in (n8, n16) for f in (1, 0.5)]  # B broadcast; halves of A, C; SUMMA panels
    small = min(messages)
    assert small == 4 * n8 * n8 / 2
    small_ms = small / (links[0] * 1e9) * 1e3
    assert co.predict_seconds("scatter", 4 * n8 * n8, 2, 0.0, 1 / (links[0] * 1e9)) * 1e3 == pytest.approx(small_ms)
    m8, m16 = _phases(_row_model(CUBLAS, n8)), _phases(_row_model(CUBLAS, n16))
    p8, p16 = two8["phases_ms"], _row(CUBLAS, "row split", 2, n16)["phases_ms"]
    comm = ("broadcast B", "scatter A", "gather C")
    res8, res16 = [p8[k] - m8[k] for k in comm], [p16[k] - m16[k] for k in comm]
    assert all(r > 0 for r in res8 + res16) and res16[2] > res8[2]  # "they grow with the size"
    run16 = _row(CUBLAS, "row split", 2, n16)["median_ms"]
    assert_prose_says([
        "(P-1) \\cdot \\alpha + n \\cdot \\beta",
        "{:.1f} GB/s, {:.1f} GB/s and {:.1f} GB/s in the three runs".format(*links),
        f"the smallest message they send, {small / 1e6:.0f} MB (half of A at 8192³, or one SUMMA panel), takes "
        f"{small_ms:.3f} ms at {links[0]:.1f} GB/s",
        f"of {small_ms * 1e3 * 0.01:.1f} µs would add 1% to it, and one of {small_ms * 1e3 * 0.1:.0f} µs 10%",
        "took {:.3f}, {:.3f} and {:.3f} ms longer than the model".format(*res8),
        f"at most {sum(res8):.2f} ms of that run, {sum(res8) / two8['median_ms']:.1%}",
        "At 16384³ the residuals are {:.2f}, {:.2f} and {:.2f} ms".format(*res16)
        + f" ({sum(res16) / run16:.1%} of the run)",
    ], prose)


def test_row_split_and_summa_traffic_and_the_lower_bound(prose):
    n = 16384
    rate, link = _row(CUBLAS, "row split", 1, n)["tflops"], _row(CUBLAS, "row split", 2, n)["link_gbs"]
    L = _links(link)
    e2e = {P: row_split_model(n, n, n, P, L, 1.0, 4, "end to end") for P in (2, 4, 8)}
    summa = {P: summa_model(n, n, n, *grid_shape(P), L, 0.0, scope="algorithm") for P in (2, 4, 8)}
    gb = lambda x: f"{x / 1e9:.2f} GB"  # noqa: E731
    assert len({gb(c.bytes_per_gpu) for c in e2e.values()}) == 1  # each GPU receives B once, whatever P
    assert len({gb(c.bytes_per_gpu) for c in summa.values()}) == 1
    # the ring broadcast's bandwidth term does not grow with P; the root's scatter does
    assert len({round(_phases(c)["broadcast B"], 9) for c in e2e.values()}) == 1
    assert _phases(e2e[8])["scatter A"] / _phases(e2e[2])["scatter A"] == pytest.approx((7 / 8) / (1 / 2))
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
    assert rate > 0


def test_correctness_numbers(prose):
    e = lambda r: f"{r['relative_error']:.1e}"  # noqa: E731
    assert all(r["passed"] for r in CUBLAS + LEVEL8)
    assert_prose_says([
        f"tolerance ({tolerance('float32', 8192):.1e} at 8192³, {tolerance('float32', 16384):.1e} at 16384³)",
        f"row split with cuBLAS at 8192³: {e(_row(CUBLAS, 'row split', 1, 8192))} on 1 GPU and "
        f"{e(_row(CUBLAS, 'row split', 2, 8192))} on 2 GPUs",
        f"row split with cuBLAS at 16384³: {e(_row(CUBLAS, 'row split', 1, 16384))} on 1 GPU and "
        f"{e(_row(CUBLAS, 'row split', 2, 16384))} on 2 GPUs",
        f"SUMMA on 2 GPUs: {e(_row(CUBLAS, 'SUMMA', 2, 8192))} at 8192³ and {e(_row(CUBLAS, 'SUMMA', 2, 16384))} at 16384³",
        f"row split with Level 8 at 16384³: {e(_row(LEVEL8, 'row split', 1, 16384))} on 1 GPU and "
        f"{e(_row(LEVEL8, 'row split', 2, 16384))} on 2 GPUs",
    ], prose)
    assert _row(LEVEL8, "row split", 1, 16384)["relative_error"] == _row(LEVEL8, "row split", 2, 16384)["relative_error"]


def test_measured_scaling(prose):
    c = {(s, p, n): _row(CUBLAS, s, p, n)["tflops"] for s in ("row split", "SUMMA") for p in (1, 2)
         for n in (8192, 16384) if not (s == "SUMMA" and p == 1)}
    one8, one16 = c["row split", 1, 8192], c["row split", 1, 16384]
    l1, l2, ls = (_row(LEVEL8, s, p, 16384)["tflops"] for s, p in (("row split", 1), ("row split", 2), ("SUMMA", 2)))
    assert_prose_says([
        f"one H200 runs 8192³ at {one8:.2f} TFLOPS and 16384³ at {one16:.2f} TFLOPS",
        f"the row split reaches {c['row split', 2, 8192]:.2f} TFLOPS at 8192³ ({c['row split', 2, 8192] / one8:.2f} times "
        f"one GPU) and {c['row split', 2, 16384]:.2f} TFLOPS at 16384³ ({c['row split', 2, 16384] / one16:.2f} times)",
        f"SUMMA reaches {c['SUMMA', 2, 8192]:.2f} TFLOPS ({c['SUMMA', 2, 8192] / one8:.2f} times) and "
        f"{c['SUMMA', 2, 16384]:.2f} TFLOPS ({c['SUMMA', 2, 16384] / one16:.2f} times)",
        f"16384³ runs at {l1:.2f} TFLOPS on one GPU and {l2:.2f} TFLOPS with the row split on two, {l2 / l1:.2f} times",
        f"The SUMMA row of that run, {ls:.2f} TFLOPS",
        f"reached {c['row split', 2, 16384]:.2f} TFLOPS at 16384³, {c['row split', 2, 16384] / one16:.2f} times one GPU",
    ], prose)


def test_row_split_model_against_measurement(prose):
    n = 16384
    one, two = _row(CUBLAS, "row split", 1, n), _row(CUBLAS, "row split", 2, n)
    rc = _row_model(CUBLAS, n)
    ph, m = two["phases_ms"], _phases(rc)
    comm = ph["broadcast B"] + ph["scatter A"] + ph["gather C"]
    mcomm = m["broadcast B"] + m["scatter A"] + m["gather C"]
    r8 = _row_model(CUBLAS, 8192)
    ideal = 2 * n**3 / m["compute"] / 1e9
    assert abs(two["median_ms"] / (rc.seconds * 1e3) - 1) < 0.01  # "within 1% of its model"
    assert ideal == pytest.approx(2 * one["tflops"])  # "exactly twice one GPU"
    assert m["scatter A"] == pytest.approx(m["gather C"])  # "in ... ms each"
    # on 2 GPUs the ring broadcast and one send from GPU 0 cost the same
    assert m["broadcast B"] == pytest.approx(4 * n * n / (two["link_gbs"] * 1e9) * 1e3)
    assert_prose_says([
        f"With $R$ = {one['tflops']:.2f} TFLOPS and the {two['link_gbs']:.1f} GB/s measured in the same run",
        f"the model gives {m['compute']:.1f} ms of compute, a broadcast of B in {m['broadcast B']:.2f} ms, and a "
        f"scatter of A and a gather of C in {m['scatter A']:.2f} ms each: {rc.seconds * 1e3:.1f} ms end to end",
        f"The measurement is {two['median_ms']:.2f} ms",
        f"broadcast B {ph['broadcast B']:.2f} ms, scatter A {ph['scatter A']:.2f} ms, compute {ph['compute']:.2f} ms, "
        f"gather C {ph['gather C']:.2f} ms, so {comm:.2f} ms of communication against the modelled {mcomm:.2f} ms",
        f"At 8192³ the model says {r8.seconds * 1e3:.2f} ms and the run took "
        f"{_row(CUBLAS, 'row split', 2, 8192)['median_ms']:.2f} ms",
        f"the model's {m['compute']:.1f} ms, which is {ideal:.1f} TFLOPS, exactly twice one GPU, and the measured "
        f"compute phase reached {2 * n**3 / ph['compute'] / 1e9:.1f} TFLOPS",
        f"the run's {two['tflops']:.2f} TFLOPS is {two['tflops'] / ideal:.1%} of that ideal",
    ], prose)


def test_summa_model_against_measurement(prose):
    n = 16384
    summa = _row(CUBLAS, "SUMMA", 2, n)
    e2e, alg = _summa_model(n), _summa_model(n, "algorithm")
    m = _phases(e2e)
    sp = summa["phases_ms"]
    distribution = summa["median_ms"] - sum(sp.values())
    assert set(sp) == {"panel loop", "gather C"}  # the recorded run timed two phases
    assert m["pack A, B blocks"] == m["pack panels"] == m["unpack C"] == 0  # never timed: priced at zero
    assert alg.seconds * 1e3 == pytest.approx(m["pack panels"] + m["panel broadcasts"] + m["panel GEMMs"])
    all_gather = row_split_model(n, n, n, 2, _links(summa["link_gbs"]), 0.0, 4, "even start").communication_s * 1e3
    assert all_gather == pytest.approx(m["panel broadcasts"] / 2)
    assert_prose_says([
        f"End to end it predicts {e2e.seconds * 1e3:.1f} ms: the blocks of A and B sent from GPU 0 "
        f"({m['send A, B blocks']:.2f} ms), the panel loop (two panel broadcasts, {m['panel broadcasts']:.2f} ms, and "
        f"the panel GEMMs, {m['panel GEMMs']:.1f} ms) and the gather of C's blocks ({m['gather C blocks']:.2f} ms)",
        f"The measurement is {summa['median_ms']:.2f} ms",
        f"the panel loop took {sp['panel loop']:.2f} ms against the modelled {alg.seconds * 1e3:.1f} ms",
        f"took {sp['gather C']:.2f} ms",
        f"The remaining {distribution:.2f} ms of the median is the distribution, against "
        f"{m['send A, B blocks']:.2f} ms for its transfers in the model",
        f"receives the other, {4 * n * n / 2 / 1e9:.2f} GB",
        f"would take {all_gather:.2f} ms",
    ], prose)
    assert summa["median_ms"] > e2e.seconds * 1e3  # the model still leaves local copies out
    assert_prose_says([f"SUMMA's measurement exceeded its model by {summa['median_ms'] - e2e.seconds * 1e3:.1f} ms"],
                      prose)


def test_model_on_paper(prose):
    n = 16384
    t1 = _row(CUBLAS, "row split", 1, n)["tflops"]
    link = _row(CUBLAS, "row split", 2, n)["link_gbs"]  # the 16384³ run: the same run as the one-GPU rate
    rows = paper_models(_links(link), n, t1, (1, 2, 4, 8), NETWORK_GBS)
    pick = {(r["scheme"], r["gpus"], r["scope"], "separate" in r["links"]): r for r in rows}
    tf = lambda P, s, scope, sep=False: f"{pick[s, P, scope, sep]['model_tflops']:.1f}"  # noqa: E731
    gb = lambda P, s, scope: f"{pick[s, P, scope, False]['bytes_per_gpu'] / 1e9:.2f} GB"  # noqa: E731
    cm = lambda P: pick["row split", P, "end to end", True]["communication_ms"]  # noqa: E731
    # what the prose concludes
    rs, su = "row split", "SUMMA"
    for P in (4, 8):
        assert pick[rs, P, "algorithm", False]["model_tflops"] == pytest.approx(P * t1)
        assert pick[rs, P, "end to end", False]["model_tflops"] > pick[su, P, "end to end", False]["model_tflops"]
    assert pick[su, 8, "even start", False]["model_tflops"] > pick[rs, 8, "even start", False]["model_tflops"]
    assert pick[su, 4, "even start", False]["model_tflops"] < pick[rs, 4, "even start", False]["model_tflops"]
    assert pick[su, 8, "even start", True]["model_tflops"] > pick[rs, 8, "even start", True]["model_tflops"]
    e2e_net = [pick[rs, P, "end to end", True]["model_tflops"] for P in (2, 4, 8)]
    assert e2e_net[0] < e2e_net[1] < e2e_net[2]  # the row split still gains with every GPU across machines
    assert_prose_says([
        f"the link of the 16384³ run ({link:.1f} GB/s, $\\alpha = 0$)",
        f"a network at {NETWORK_GBS:.0f} GB/s per GPU",
        f"its model is the ideal {4 * t1:.1f} and {8 * t1:.1f} TFLOPS on 4 and 8 GPUs, against SUMMA's "
        f"{tf(4, su, 'algorithm')} and {tf(8, su, 'algorithm')}",
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


def _fp16_rate():
    d = results.load(RESULTS / "h200_top_rungs_float16.json")
    rates = [r["tflops"] for r in d["records"] if r["level"] == "cublas" and r["dtype"] == "float16"
             and (r["M"], r["N"], r["K"]) == (8192, 8192, 8192)]
    return statistics.median(rates), len(rates)


def test_tensor_parallel_model(prose):
    M, H, F = tp.DEFAULT_SHAPE
    links = _links(_row(CUBLAS, "row split", 2, 16384)["link_gbs"])
    rate16, count = _fp16_rate()
    rate32 = _row(CUBLAS, "row split", 1, 8192)["tflops"]

    def model(rate, P, chunks, itemsize):
        plan = tp.make_plan(M, H, F, P, "all-reduce", chunks)
        compute = [tp.layer_flops(r1 - r0, H, F) / P / (rate * 1e12) for r0, r1 in plan.row_chunks]
        return tp.model(plan, links, compute, itemsize)

    flops = tp.layer_flops(M, H, F)
    a, b = model(rate16, 2, 1, 2), model(rate16, 2, 4, 2)
    c, d = model(rate32, 2, 1, 4), model(rate32, 2, 4, 4)
    e, f = model(rate16, 8, 1, 2), model(rate16, 8, 4, 2)
    hidden = tp.overlap_fraction(b["serial_ms"], b["overlap_ms"], b["communication_ms"])[1]
    assert hidden == pytest.approx(3 / 4)  # (c − 1)/c when the GEMMs are the longer stage
    chunk = M // 4 * H * 2
    chunk_us = co.predict_seconds("all-reduce", chunk, 2, 0.0, links.fit_for("all-reduce").beta_s_per_byte) * 1e6
    assert co.cost_terms("all-reduce", 2) == (2, 1.0)  # "two steps"
    assert_prose_says([
        f"{M} tokens, $H$ = {H} and $F$ = {F}, the partial sum is {M * H * 2 / 1e6:.0f} MB in fp16",
        f"For fp16 that rate is {rate16:.1f} TFLOPS, the median of the {count} cuBLAS timings at 8192³",
        f"for FP32 it is the {rate32:.2f} TFLOPS of the one-GPU row at 8192³",
        f"each GPU computes for {a['compute_ms']:.2f} ms and the all-reduce of the {M * H * 2 / 1e6:.0f} MB partial takes "
        f"{a['communication_ms']:.3f} ms, {a['communication_ms'] / a['compute_ms']:.1%} of the compute: "
        f"{a['serial_ms']:.2f} ms in series, {flops / a['serial_ms'] / 1e9:.0f} TFLOPS",
        f"the model says {b['overlap_ms']:.2f} ms, {flops / b['overlap_ms'] / 1e9:.0f} TFLOPS, with {hidden:.0%} of the "
        "communication hidden",
        f"In FP32 the compute is {c['compute_ms']:.1f} ms against {c['communication_ms']:.3f} ms of communication, and "
        f"overlap moves the model only from {flops / c['serial_ms'] / 1e9:.1f} to {flops / d['overlap_ms'] / 1e9:.1f} TFLOPS",
        f"fp16 compute drops to {e['compute_ms']:.2f} ms while the all-reduce grows to {e['communication_ms']:.2f} ms, "
        f"{e['communication_ms'] / e['compute_ms']:.0%} of it, and overlap takes the block from {e['serial_ms']:.2f} to "
        f"{f['overlap_ms']:.2f} ms",
        f"A quarter of the partial is {chunk / 1e6:.1f} MB, and its all-reduce on 2 GPUs is two steps with a bandwidth "
        f"term of {chunk_us:.1f} µs: an $\\alpha$ of {chunk_us * 0.01 / 2:.2f} µs would add 1%, one of "
        f"{chunk_us * 0.1 / 2:.1f} µs 10%",
    ], prose)


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
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"][1:]  # after the install cell
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
    # the model's phases carry the measured names: SUMMA's panel loop and its untimed distribution
    pairs = {(c["scheme"], c["n"]): report.phase_pairs(c["row"], c["model"]) for c in report.comparison(data)
             if c["gpus"] == 2 and c["scope"] == "end to end" and c["local"] == "cublas"}
    measured, modelled = pairs["SUMMA", 16384]
    assert set(measured) == set(modelled) == {"panel loop", "gather C", report.UNTIMED}


def test_tensor_parallel_table_says_when_it_is_a_model(monkeypatch):
    import IPython.display

    notes = []
    monkeypatch.setattr(IPython.display, "display", notes.append)
    html = report.tp_table(report.runs()).data
    assert "model compute ms" in html and "measured ms" not in html
    assert any("not been measured here yet" in n.data for n in notes)
    assert "ok" in report.simulated_check().data and "WRONG" not in report.simulated_check().data


def _newer_file(tmp_path):
    """The cuBLAS recording in the newer format: scopes, a model per row, collectives fitted, and
    tensor-parallel rows (numbers invented for the test, not measurements)."""
    old = results.load(RESULTS / "h200x2_12_multigpu_cublas.json")
    new = json.loads(json.dumps(old))
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
