"""Level 12's communication model: the α-β formulas of each collective (ring and tree), the fit that
recovers α and β, the lower bound that no distributed GEMM beats, and the phase models of the row
split and SUMMA. CPU only, except the last tests, which need 2 GPUs with NCCL (skipped otherwise)."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from gemm_course.multigpu import collectives as co
from gemm_course.models import grid_words, pipeline_seconds, row_split_model, summa_model

ALPHA, GBS = 12e-6, 300.0
BETA = 1 / (GBS * 1e9)
LINKS = co.Links.uniform(ALPHA, GBS)


@pytest.mark.parametrize("P", [2, 4, 8])
def test_ring_and_tree_formulas(P):
    n = 3 << 20
    L = int(math.log2(P))
    ring = {"broadcast": (P - 1) * ALPHA + n * BETA,
            "all-gather": (P - 1) * ALPHA + (P - 1) / P * n * BETA,
            "reduce-scatter": (P - 1) * ALPHA + (P - 1) / P * n * BETA,
            "all-reduce": 2 * (P - 1) * ALPHA + 2 * (P - 1) / P * n * BETA,
            "send/recv": ALPHA + n * BETA,
            "scatter": (P - 1) * (ALPHA + n / P * BETA), "gather": (P - 1) * (ALPHA + n / P * BETA)}
    tree = {"broadcast": L * (ALPHA + n * BETA),
            "all-gather": L * ALPHA + (P - 1) / P * n * BETA,
            "reduce-scatter": L * ALPHA + (P - 1) / P * n * BETA,
            "all-reduce": 2 * L * ALPHA + 2 * (P - 1) / P * n * BETA}
    for name, t in ring.items():
        assert co.predict_seconds(name, n, P, ALPHA, BETA, "ring") == pytest.approx(t, rel=1e-12), name
    for name, t in tree.items():
        assert co.predict_seconds(name, n, P, ALPHA, BETA, "tree") == pytest.approx(t, rel=1e-12), name
    # an all-reduce is a reduce-scatter then an all-gather; the ring moves 2(P−1)/P of the buffer per GPU
    assert co.predict_seconds("all-reduce", n, P, ALPHA, BETA) == pytest.approx(
        co.predict_seconds("reduce-scatter", n, P, ALPHA, BETA) + co.predict_seconds("all-gather", n, P, ALPHA, BETA))
    # the tree pays fewer latencies, the pipelined ring broadcast fewer bytes (for P > 2)
    assert co.cost_terms("all-reduce", P, "tree")[0] <= co.cost_terms("all-reduce", P, "ring")[0]
    if P > 2:
        assert co.cost_terms("broadcast", P, "ring")[1] < co.cost_terms("broadcast", P, "tree")[1]


def test_one_gpu_costs_nothing_and_bad_names_are_refused():
    assert all(co.cost_terms(c, 1, a) == (0.0, 0.0) for c in co.COLLECTIVES for a in co.ALGORITHMS)
    with pytest.raises(ValueError):
        co.cost_terms("alltoall", 2)
    with pytest.raises(ValueError):
        co.cost_terms("broadcast", 2, "butterfly")


def test_bus_bandwidth_is_ncclts_convention():
    n, t = 1 << 30, 3e-3
    algbw = n / t / 1e9
    assert co.bus_bandwidth("all-reduce", n, t, 2) == pytest.approx(algbw)  # 2(P−1)/P = 1 at P = 2
    assert co.bus_bandwidth("all-reduce", n, t, 8) == pytest.approx(algbw * 14 / 8)
    assert co.bus_bandwidth("all-gather", n, t, 4) == pytest.approx(algbw * 3 / 4)
    assert co.bus_bandwidth("broadcast", n, t, 8) == pytest.approx(algbw)
    # the bus bandwidth of a collective that runs exactly at the model's β is 1/β (large n)
    for c in ("all-reduce", "all-gather", "reduce-scatter", "broadcast"):
        t_model = co.predict_seconds(c, 1 << 34, 4, 0.0, BETA)
        assert co.bus_bandwidth(c, 1 << 34, t_model, 4) == pytest.approx(GBS, rel=1e-9), c


def _points(collective, P, alpha, beta, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for n in co.DEFAULT_SIZES:
        t = co.predict_seconds(collective, n, P, alpha, beta) * (1 + noise * rng.standard_normal())
        out.append(co.Point(collective, P, n, t, t, t, 10))
    return out


@pytest.mark.parametrize("collective", co.MEASURED)
@pytest.mark.parametrize("P", [2, 4, 8])
def test_fit_recovers_alpha_and_beta(collective, P):
    exact = co.fit(_points(collective, P, ALPHA, BETA))
    assert exact.alpha_s == pytest.approx(ALPHA, rel=1e-6) and exact.beta_s_per_byte == pytest.approx(BETA, rel=1e-6)
    assert exact.link_gbs == pytest.approx(GBS, rel=1e-6) and exact.rms_relative_residual < 1e-9
    noisy = co.fit(_points(collective, P, ALPHA, BETA, noise=0.02, seed=P))
    assert noisy.alpha_s == pytest.approx(ALPHA, rel=0.1) and noisy.link_gbs == pytest.approx(GBS, rel=0.05)
    # the bandwidth-regime fit (sizes ≥ 1 MiB) sees the same link
    assert co.fit(_points(collective, P, ALPHA, BETA), min_bytes=co.BANDWIDTH_REGIME_BYTES).link_gbs == pytest.approx(GBS)


def test_fit_keeps_alpha_non_negative_and_refuses_bad_input():
    # times with no latency at all and a little noise: α would go negative unconstrained
    pts = _points("broadcast", 2, 0.0, BETA, noise=0.01, seed=3)
    f = co.fit(pts)
    assert f.alpha_s >= 0 and f.link_gbs == pytest.approx(GBS, rel=0.05)
    with pytest.raises(ValueError):
        co.fit(pts[:1])
    with pytest.raises(ValueError):
        co.fit(pts + _points("all-reduce", 2, ALPHA, BETA))


def test_links_price_scatter_with_send_recv_and_round_trip_json():
    pts = [p for c in co.MEASURED for p in _points(c, 2, ALPHA, BETA)]
    links = co.fit_all(pts)
    assert set(links.fits) == set(co.MEASURED)
    assert links.seconds("scatter", 1 << 30, 4) == pytest.approx(3 * (ALPHA + (1 << 28) * BETA))
    back = co.Links.from_dict(json.loads(json.dumps(links.as_dict())))
    assert back.seconds("all-reduce", 12345678, 8) == pytest.approx(links.seconds("all-reduce", 12345678, 8))
    slow = links.with_bandwidth(50.0)
    assert slow.fit_for("broadcast").link_gbs == pytest.approx(50.0)
    assert slow.fit_for("broadcast").alpha_s == pytest.approx(ALPHA)
    with pytest.raises(ValueError):
        co.Links().seconds("broadcast", 1, 2)


def _grids(P):
    return [(a, b, P // (a * b)) for a in range(1, P + 1) if P % a == 0 for b in range(1, P // a + 1)
            if (P // a) % b == 0]


SHAPES = [(64, 64, 64), (512, 64, 64), (64, 512, 8), (4096, 256, 16), (100, 37, 300), (16384, 16384, 16384),
          (8192, 8192, 32768), (7, 1000, 13)]


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_no_grid_algorithm_beats_the_lower_bound(M, N, K):
    for P in (2, 3, 4, 6, 8, 12, 16, 27, 64):
        bound = co.lower_bound_words(M, N, K, P)
        best = min(grid_words(M, N, K, *g) for g in _grids(P))
        assert bound >= 0 and best >= bound * (1 - 1e-12), (P, best, bound)
        assert co.lower_bound_bytes(M, N, K, P, 2) == pytest.approx(2 * bound)


def test_the_bound_is_tight_in_each_of_its_three_cases():
    # cube on 8 = 2·2·2 GPUs: the 3-D algorithm meets 3(n³/P)^(2/3) − 3n²/P exactly
    n = 1024
    assert grid_words(n, n, n, 2, 2, 2) == pytest.approx(co.lower_bound_words(n, n, n, 8))
    assert co.lower_bound_words(n, n, n, 8) == pytest.approx(3 * (n**3 / 8) ** (2 / 3) - 3 * n * n / 8)
    # one long dimension, few GPUs: the 1-D split (replicate the smallest matrix) is optimal
    assert grid_words(4096, 64, 64, 4, 1, 1) == pytest.approx(co.lower_bound_words(4096, 64, 64, 4))
    # one short dimension: the 2-D grid that does not split it is optimal
    assert grid_words(64, 64, 4, 2, 2, 1) == pytest.approx(co.lower_bound_words(64, 64, 4, 4)) == 128
    # the row split of a cube on 2 GPUs (all-gather B) is NOT optimal: the bound is lower
    assert grid_words(n, n, n, 2, 1, 1) == n * n / 2 > co.lower_bound_words(n, n, n, 2)


@pytest.mark.parametrize("P", [1, 2, 4, 8])
def test_row_split_phases(P):
    n, s = 16384, 4
    e2e = row_split_model(n, n, n, P, LINKS, 0.08, s, "end to end")
    alg = row_split_model(n, n, n, P, LINKS, 0.08, s, "algorithm")
    assert [p.name for p in alg.phases] == ["compute"] and alg.seconds == pytest.approx(0.08)
    if P == 1:
        assert e2e.seconds == pytest.approx(0.08)
        return
    assert [p.name for p in e2e.phases] == ["broadcast B", "scatter A", "compute", "gather C"]
    ph = {p.name: p.seconds for p in e2e.phases}
    assert ph["broadcast B"] == pytest.approx((P - 1) * ALPHA + s * n * n * BETA)  # the pipelined ring
    assert ph["scatter A"] == pytest.approx((P - 1) * (ALPHA + s * n * n / P * BETA))
    assert ph["gather C"] == pytest.approx(ph["scatter A"])
    assert e2e.flops == 2 * n**3 and e2e.tflops == pytest.approx(2 * n**3 / e2e.seconds / 1e12)
    # P−1 serial sends of B from GPU 0 would cost the same as the ring broadcast on 2 GPUs, more on more
    serial_sends = (P - 1) * (ALPHA + s * n * n * BETA)
    assert serial_sends >= ph["broadcast B"] - 1e-15 and (P == 2) == (serial_sends == pytest.approx(ph["broadcast B"]))


def test_summa_phases_count_the_distribution_too():
    n, s = 16384, 4
    one_by_two = summa_model(n, n, n, 1, 2, LINKS, panel_s=0.04, pack_panels_s=1e-4, pack_blocks_s=2e-4,
                             unpack_s=3e-4, itemsize=s, scope="end to end")
    names = [p.name for p in one_by_two.phases]
    assert names == ["pack A, B blocks", "send A, B blocks", "pack panels", "panel broadcasts", "panel GEMMs",
                     "gather C blocks", "unpack C"]
    ph = {p.name: p.seconds for p in one_by_two.phases}
    # 2 panels of K/2; A's panel (n × n/2) broadcast over the 2 GPUs of the grid row, B's over a column of 1
    assert ph["panel broadcasts"] == pytest.approx(2 * (ALPHA + s * n * n / 2 * BETA))
    assert ph["panel GEMMs"] == pytest.approx(0.08) and ph["pack panels"] == pytest.approx(2e-4)
    assert ph["send A, B blocks"] == pytest.approx(2 * (ALPHA + s * n * n / 2 * BETA))
    algorithm = summa_model(n, n, n, 1, 2, LINKS, 0.04, 1e-4, itemsize=s, scope="algorithm")
    assert [p.name for p in algorithm.phases] == ["pack panels", "panel broadcasts", "panel GEMMs"]
    # each GPU receives the A panels of its grid row and the B panels of its column that it does not own:
    # the grid algorithm's count, above the lower bound, and n²/2 words on 1×2, 2×2 and 2×4 alike
    for pr, pc in ((1, 2), (2, 2), (2, 4)):
        c = summa_model(n, n, n, pr, pc, LINKS, 0.0, itemsize=s, scope="algorithm")
        assert c.bytes_per_gpu == pytest.approx(s * grid_words(n, n, n, pr, pc, 1)) == pytest.approx(s * n * n / 2)
        assert c.bytes_per_gpu >= co.lower_bound_bytes(n, n, n, pr * pc, s)
        even = summa_model(n, n, n, pr, pc, LINKS, 0.0, itemsize=s, scope="even start")
        assert even.phases == c.phases
    for P in (2, 4, 8):  # the row split from an even start all-gathers B: (P−1)/P of it per GPU
        r = row_split_model(n, n, n, P, LINKS, 0.0, s, "even start")
        assert [p.name for p in r.phases] == ["all-gather B", "compute"]
        assert r.bytes_per_gpu == pytest.approx(s * grid_words(n, n, n, P, 1, 1))
        assert r.communication_s == pytest.approx((P - 1) * ALPHA + (P - 1) / P * s * n * n * BETA)
    with pytest.raises(ValueError):
        summa_model(n, n, n, 1, 2, LINKS, 0.0, scope="everything")


def test_pipeline_of_chunks():
    c, m = 2.0, 1.0
    assert pipeline_seconds([c] * 4, [m] * 4) == pytest.approx(c + 3 * max(c, m) + m)  # compute-bound
    assert pipeline_seconds([m] * 4, [c] * 4) == pytest.approx(m + 4 * c)  # communication-bound
    assert pipeline_seconds([c], [m]) == c + m  # one chunk: nothing to overlap
    assert pipeline_seconds([1, 5, 1], [4, 1, 1]) == pytest.approx(8.0)  # 1 → comm 1..5; c1 ends 6 → 7; c2 ends 7 → 8
    with pytest.raises(ValueError):
        pipeline_seconds([1.0], [1.0, 2.0])


def test_paper_models_extend_the_measured_links():
    from gemm_course.multigpu.schemes import paper_models

    rows = paper_models(LINKS, 16384, 50.0, network_gbs=50.0)
    assert {r["gpus"] for r in rows} == {1, 2, 4, 8}
    assert {r["scope"] for r in rows} == {"algorithm", "even start", "end to end"}
    pick = {(r["scheme"], r["scope"], r["gpus"], "separate" in r["links"]): r for r in rows}
    for scheme in ("row split", "SUMMA"):  # a slower network only slows a scheme down
        assert pick[scheme, "end to end", 8, True]["model_tflops"] < pick[scheme, "end to end", 8, False]["model_tflops"]
    # from an even start, SUMMA's traffic per GPU stays put as the grid grows, the row split's grows
    summa = [pick["SUMMA", "even start", P, False]["bytes_per_gpu"] for P in (2, 4, 8)]
    rows_ = [pick["row split", "even start", P, False]["bytes_per_gpu"] for P in (2, 4, 8)]
    assert summa[0] == pytest.approx(summa[1]) == pytest.approx(summa[2])
    assert rows_[0] < rows_[1] < rows_[2] and rows_[2] > summa[2]
    assert all(r["lower_bound_bytes"] >= 0 for r in rows)


MULTIGPU_WRONG = [("--schemes", "rows"), ("--tp-shape", "8192x8192"), ("--chunks", "0"), ("--dtype", "int8"),
                  ("--forms", "alltoall"), ("--sizes", "big"), ("--activation", "tanh"),
                  ("--tp-shape", "1001x64x64", "--gpus", "2")]


@pytest.mark.parametrize("args", MULTIGPU_WRONG, ids=[" ".join(a) for a in MULTIGPU_WRONG])
def test_multigpu_cli_says_what_to_change_in_both_languages(args):
    """One line in the reader's language (English by default, --zh Chinese), both halves when both are asked for."""
    import os
    import re

    for extra, env, expect in (((), {}, "en"), (("--zh",), {}, "zh"), ((), {"GEMM_COURSE_LANG": "both"}, "both")):
        done = subprocess.run([sys.executable, "-m", "gemm_course", "multigpu", *args, *extra], capture_output=True,
                              text=True, timeout=300, env={**os.environ, "GEMM_COURSE_LANG": "", **env})
        assert done.returncode != 0 and "Traceback" not in done.stderr + done.stdout, done.stderr[-800:]
        lines = done.stderr.strip().splitlines()
        chinese = re.search(r"[\u4e00-\u9fff]", lines[-1])
        assert len(lines) == 1 and (" · " in lines[0]) == (expect == "both") and bool(chinese) == (expect != "en"), lines


# --- on 2 GPUs ---------------------------------------------------------------------------------------

def _two_gpus():
    from gemm_course.multigpu.schemes import gpu_count

    if gpu_count() < 2:
        pytest.skip("needs 2 GPUs")
    from cupy.cuda import nccl

    if not nccl.available:
        pytest.skip("CuPy has no NCCL here")
    from gemm_course.multigpu.schemes import Group

    return Group([0, 1])


def test_measured_collectives_fit_on_two_gpus():
    group = _two_gpus()
    sizes = [1 << 16, 1 << 20, 1 << 24, 1 << 26]
    pts = [p for c in co.MEASURED for p in co.measure(group, c, sizes, reps=5, warmups=2)]
    assert len(pts) == len(co.MEASURED) * len(sizes) and all(p.median_s > 0 for p in pts)
    links = co.fit_all(pts, min_bytes=0)
    for c in co.MEASURED:
        assert 1 < links.fits[c].link_gbs < 5000, (c, links.fits[c])


def test_row_split_and_summa_on_two_gpus_both_scopes():
    import cupy

    from gemm_course.run.check import random_operands, relative_error, tolerance
    from gemm_course.multigpu.schemes import RowSplit, Summa, blocks_error, row_split, summa

    group = _two_gpus()
    n = 512
    with cupy.cuda.Device(0):
        A0, B0 = random_operands(n, n, n)
        ref = A0.astype(cupy.float64) @ B0.astype(cupy.float64)
    for C in (row_split(group, A0, B0), summa(group, A0, B0)):
        with cupy.cuda.Device(0):
            assert relative_error(C, ref) <= tolerance("float32", n)
    for split in (RowSplit(group, A0, B0), Summa(group, A0, B0)):
        split.run("end to end")
        for C, _, _ in split.blocks():
            with cupy.cuda.Device(C.device.id):
                C.fill(float("nan"))
        phases = {}
        split.run("algorithm", phases)
        group.synchronize()
        err, nans = blocks_error(split.blocks(), ref)
        assert nans == 0 and err <= tolerance("float32", n) and phases


def test_notebook_chart_reads_old_and_new_rows(capture_shown, tmp_path, monkeypatch):
    """gc.notebook.multigpu() charts the row split and SUMMA end to end from recorded files of either
    format: the first chapter's rows, and the new ones (scopes, tensor-parallel rows, collectives)."""
    pytest.importorskip("plotly")
    from gemm_course.display import notebook
    from gemm_course.measure import results

    old = results.load(results.RESULTS_DIR / "h200x2_12_multigpu.json")
    new = json.loads(json.dumps(old))
    # the first chapter's format: end-to-end row split and SUMMA rows only, no scopes, no collectives
    new["multigpu"] = [{k: v for k, v in r.items() if k not in ("scope", "model")} for r in new["multigpu"]
                       if r["scheme"] != "tensor parallel" and r.get("scope") == "end to end"]
    extra = [dict(r, scope="algorithm", median_ms=r["median_ms"] / 2) for r in new["multigpu"]]
    tp_row = {"scheme": "tensor parallel", "form": "all-reduce", "gpus": 2, "overlap": True, "chunks": 4,
              "dtype": "float16", "M": 8192, "H": 8192, "F": 32768, "median_ms": 8.0, "tflops": 1000.0,
              "phases_ms": {"compute": 7.0, "communication": 0.5}, "link_gbs": None}
    new["multigpu"] = [dict(r, scope="end to end") for r in new["multigpu"]] + extra + [tp_row]
    new["collectives"] = [{"gpus": 2, "points": [], "fits": LINKS.as_dict()}]
    path = tmp_path / "h200x2_12_multigpu_new.json"
    path.write_text(json.dumps(new), encoding="utf-8")
    capture_shown(lambda fig: None)  # first: it imports every display module, some of which read the recorded files
    monkeypatch.setattr(results, "recorded_files", lambda: [path])
    monkeypatch.setattr("gemm_course.multigpu.schemes.gpu_count", lambda: 0)
    rows = notebook.multigpu()
    assert {r["scheme"] for r in rows} == {"row split", "SUMMA"}
    assert all(r.get("scope", "end to end") == "end to end" for r in rows)
    assert sorted(r["median_ms"] for r in rows) == sorted(r["median_ms"] for r in old["multigpu"]
                                                          if r["scheme"] != "tensor parallel" and r["scope"] == "end to end")
