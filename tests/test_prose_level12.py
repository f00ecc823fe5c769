"""Every number the Level 12 prose quotes, recomputed from the recorded 2 × H200 multi-GPU files and
the cost models in gemm_course.models (no GPU needed); plus the Level 12 split figure."""
from pathlib import Path

import pytest

from gemm_course import diagrams, results
from gemm_course.check import tolerance
from gemm_course.models import row_split_cost, summa_cost
from gemm_course.multigpu import grid_shape
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "gemm_course" / "results"
NETWORK_GBS = 50.0  # the separate-nodes case of gc.notebook.multigpu (its default network_gbs)


def _runs(name):
    return results.load(RESULTS / name)["multigpu"]


CUBLAS, LEVEL8 = _runs("h200x2_12_multigpu_cublas.json"), _runs("h200x2_12_multigpu_level8.json")


def _row(rows, scheme, gpus, n):
    return next(r for r in rows if r["scheme"] == scheme and r["gpus"] == gpus and r["M"] == n)


def _tflops(n, cost, overlap=False):
    return 2 * n**3 / cost.time_s(overlap) / 1e12


@pytest.fixture(scope="module")
def prose():
    return _english_prose(ROOT / "notebooks" / "12_multi_gpu.ipynb")


def test_recorded_hardware(prose):
    prov = results.load(RESULTS / "h200x2_12_multigpu_cublas.json")["provenance"]
    assert prov["gpus_visible"] == 2 and prov["gpu"] == "NVIDIA H200"
    assert {r["gpus"] for r in CUBLAS + LEVEL8} == {1, 2}  # 4 and 8 GPUs: model only
    assert_prose_says([f"The recorded runs used {prov['gpus_visible']} NVIDIA H200 GPUs"], prose)
    assert [grid_shape(p) for p in (2, 4, 8)] == [(1, 2), (2, 2), (2, 4)]
    assert_prose_says(["1×2 for 2 GPUs, 2×2 for 4, 2×4 for 8"], prose)


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
    # "With Level 8 locally ... the error is the same"
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


def test_model_against_measurement(prose):
    n = 16384
    one, two, summa = (_row(CUBLAS, s, p, n) for s, p in (("row split", 1), ("row split", 2), ("SUMMA", 2)))
    links = [_row(rows, "row split", 2, m)["link_gbs"] for rows, m in ((CUBLAS, 8192), (CUBLAS, 16384), (LEVEL8, 16384))]
    rc = row_split_cost(n, n, n, 2, one["tflops"], two["link_gbs"])
    sc = summa_cost(n, n, n, 1, 2, one["tflops"], summa["link_gbs"])
    ph, sp = two["phases_ms"], summa["phases_ms"]
    comm = ph["broadcast B"] + ph["scatter A"] + ph["gather C"]
    r8 = row_split_cost(8192, 8192, 8192, 2, _row(CUBLAS, "row split", 1, 8192)["tflops"],
                        _row(CUBLAS, "row split", 2, 8192)["link_gbs"])
    assert abs(two["median_ms"] / (rc.time_s() * 1e3) - 1) < 0.01  # "within 1% of its model"
    assert_prose_says([
        "which measured {:.1f} GB/s, {:.1f} GB/s and {:.1f} GB/s in the three recorded runs".format(*links),
        f"With $R$ = {one['tflops']:.2f} TFLOPS and the {two['link_gbs']:.1f} GB/s measured in the same run",
        f"the model gives {rc.compute_s * 1e3:.1f} ms of compute and {rc.bytes_per_gpu / 1e9:.2f} GB over the link in "
        f"{rc.comm_s * 1e3:.2f} ms: {rc.time_s() * 1e3:.1f} ms without overlap",
        f"The measurement is {two['median_ms']:.2f} ms",
        f"broadcast B {ph['broadcast B']:.2f} ms, scatter A {ph['scatter A']:.2f} ms, compute {ph['compute']:.2f} ms, "
        f"gather C {ph['gather C']:.2f} ms, so {comm:.2f} ms of communication against the modelled {rc.comm_s * 1e3:.2f} ms",
        f"At 8192³ the model says {r8.time_s() * 1e3:.2f} ms and the run took "
        f"{_row(CUBLAS, 'row split', 2, 8192)['median_ms']:.2f} ms",
        f"the model's {rc.time_s(overlap=True) * 1e3:.1f} ms, which is {_tflops(n, rc, overlap=True):.1f} TFLOPS",
        f"its {two['tflops']:.2f} TFLOPS is {two['tflops'] / _tflops(n, rc, overlap=True):.1%} of that ideal",
        # SUMMA on 1×2
        f"{sc.bytes_per_gpu / 1e9:.2f} GB per GPU in {sc.comm_s * 1e3:.2f} ms, so it predicts {sc.time_s() * 1e3:.1f} ms",
        f"The measurement is {summa['median_ms']:.2f} ms",
        f"the panel loop took {sp['panel loop']:.2f} ms, and gathering C's blocks to GPU 0 took {sp['gather C']:.2f} ms",
        f"The remaining {summa['median_ms'] - sum(sp.values()):.2f} ms of the median",
    ], prose)
    assert abs(_tflops(n, rc, overlap=True) - 2 * one["tflops"]) < 1e-9  # "exactly twice one GPU"
    assert sp["gather C"] > ph["gather C"] and sc.time_s() < rc.time_s()  # "more than the row split's", "less than"
    # "B alone is 1.07 GB"
    assert_prose_says([f"B alone is {4 * n * n / 1e9:.2f} GB; on 2 GPUs GPU 0 moves {rc.bytes_per_gpu / 1e9:.2f} GB in all",
                 "an NCCL broadcast of 512 MiB"], prose)


def test_model_on_paper(prose):
    n = 16384
    t1 = _row(CUBLAS, "row split", 1, n)["tflops"]
    link = next(r["link_gbs"] for r in CUBLAS if r["link_gbs"])  # what gc.notebook.multigpu uses
    row = {(P, bw): row_split_cost(n, n, n, P, t1, bw) for P in (2, 4, 8) for bw in (link, NETWORK_GBS)}
    sm = {(P, bw): summa_cost(n, n, n, *grid_shape(P), t1, bw) for P in (2, 4, 8) for bw in (link, NETWORK_GBS)}
    gb = lambda c: f"{c.bytes_per_gpu / 1e9:.2f} GB"  # noqa: E731
    tf = lambda c: f"{_tflops(n, c):.1f}"  # noqa: E731
    assert len({gb(sm[P, link]) for P in (2, 4, 8)}) == 1  # SUMMA's traffic stays the same
    assert _tflops(n, row[8, NETWORK_GBS]) < _tflops(n, row[4, NETWORK_GBS]) < _tflops(n, row[2, NETWORK_GBS])
    assert_prose_says([
        f"At 16384³ that is {gb(sm[2, link])} per GPU on a 1×2 grid, and again {gb(sm[4, link])} on 2×2 and on 2×4",
        f"the first recorded link measurement ({link:.1f} GB/s, the one the chart uses)",
        f"at {NETWORK_GBS:.0f} GB/s per GPU",
        f"SUMMA's traffic stays at {gb(sm[8, link])} per GPU",
        f"grows to {tf(sm[4, link])} TFLOPS on 4 GPUs and {tf(sm[8, link])} TFLOPS on 8, close to the ideal "
        f"{4 * t1:.1f} and {8 * t1:.1f}",
        f"{gb(row[4, link])} on 4 and {gb(row[8, link])} on 8, and it reaches only {tf(row[4, link])} and "
        f"{tf(row[8, link])} TFLOPS",
        f"{tf(row[2, NETWORK_GBS])} TFLOPS on 2 GPUs, {tf(row[4, NETWORK_GBS])} on 4 and {tf(row[8, NETWORK_GBS])} on 8",
        f"SUMMA still scales: {tf(sm[2, NETWORK_GBS])}, {tf(sm[4, NETWORK_GBS])} and {tf(sm[8, NETWORK_GBS])} TFLOPS",
        f"each GPU's traffic stays at {gb(sm[2, link])} at 16384³ on 2, 4 or 8 GPUs",
    ], prose)


def test_split_figure():
    for pr, pc in ((1, 2), (2, 2), (2, 4)):
        L = pr * pc // __import__("math").gcd(pr, pc)
        for panel in range(L):
            fig = diagrams.multigpu_split_figure(pr, pc, panel)
            names = [a.name for a in fig.layout.annotations if a.name]
            assert names.count("A") == pr * (pc - 1) and names.count("B") == pc * (pr - 1)
            summa = next(t for t in fig.data if t.name == "SUMMA")
            assert [list(r) for r in summa.z] == [[i * pc + j for j in range(pc)] for i in range(pr)]
            assert len(next(t for t in fig.data if t.name == "row split").z) == pr * pc
    with pytest.raises(ValueError):
        diagrams.multigpu_split_figure(2, 4, panel=4)
