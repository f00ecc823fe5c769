"""The counters, SASS counts and model predictions that Levels 5, 6 and 7 quote ("Predict, then measure"
and the claims about shared memory and issue), recomputed from h200_counters.json and predictions.py."""
import json
from pathlib import Path

from gemm_course.measure import counters, predictions, results
from gemm_course.measure.predictions import _register_tile_reads, _shared_passes, _split_reads
from test_package import _english_prose, assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
L5, L6, L7 = "05_register_blocking", "06_fused_epilogue", "07_vectorized"
SMALL = dict(BM=64, BN=64, TM=4, TN=4)


def _prose(name):
    return _english_prose(ROOT / "notebooks" / f"{name}.ipynb")


def _row(level, **p):
    r = counters.find(level, **p)
    return r, r["metrics"], counters.derived(r["metrics"])


def _geometry(r):
    """(warps in the grid, k-tiles) of a counter row."""
    p, n = r["params"], r["M"]
    return (n // p["BM"]) * (n // p["BN"]) * (p["BM"] // p["TM"]) * (p["BN"] // p["TN"]) // 32, n // p["BK"]


def _predicted(level, **p):
    return {x["key"]: x for x in predictions.compare(level, **p)}


def _lds128(r):
    warps, ktiles = _geometry(r)
    p = r["params"]
    return warps * ktiles * p["BK"] * (p["TM"] // 4 + p["TN"] // 4)


def test_notebooks_have_predict_then_measure():
    for name in (L5, L6, L7):
        nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
        sources = ["".join(c["source"]) for c in nb["cells"]]
        assert "## Predict, then measure" in _prose(name)
        assert any("## 先预测，再测量" in s for s in sources)
        assert f'gc.notebook.predict_vs_measure("{name}")' in sources


def test_level5_counters():
    prose = _prose(L5)
    r, m, d = _row(L5)
    rs, ms, ds = _row(L5, **SMALL)
    warps, ktiles = _geometry(r)
    lds = _lds128(r)
    assert lds == warps * ktiles * 32
    empty = (m["shared_load_instructions"] - lds) / (warps * ktiles)
    empty_small = (ms["shared_load_instructions"] - _lds128(rs)) / (_geometry(rs)[0] * _geometry(rs)[1])
    assert (empty, empty_small) == (6, 12)
    pred, pred_s = _predicted(L5), _predicted(L5, **SMALL)
    assert pred["shared_load_instructions"]["predicted"] == m["shared_load_instructions"]  # exact
    assert pred_s["shared_load_instructions"]["predicted"] == ms["shared_load_instructions"]
    assert f"{d['sectors_per_load_request']:.1f}" == f"{ds['sectors_per_load_request']:.1f}" == "4.0"
    assert d["sectors_per_load_request"] == ds["sectors_per_load_request"] == 4 == pred["sectors_per_load_request"]["predicted"]
    # the bank model, per read of A and of B
    passes = [_shared_passes(a, 16) for a in _register_tile_reads(r["params"])]
    a, b = _split_reads(r["params"], passes)
    per_lds = sum(x for x, _ in passes) / len(passes)
    least = sum(y for _, y in passes) / len(passes)
    small = [_shared_passes(x, 16) for x in _register_tile_reads(rs["params"])]
    per_lds_small = sum(x for x, _ in small) / len(small)
    assert (a, b, per_lds, least, per_lds_small) == (2, 8, 5, 3, 3)
    assert all(y == x for x, y in small)  # no conflict in the 64×64 setting
    conflicts = m["shared_load_conflicts"] / lds
    claims = [
        "4 sectors per request. Measured: 4.0 for both settings",
        f"{int(empty)} of them are issued per warp per k-tile",
        f"{32 + int(empty)} per warp per k-tile, {ktiles} k-tiles, {warps} warps: {m['shared_load_instructions']:.0f}, "
        "exactly what ncu counted",
        f"issues 16 `LDS.128` and {int(empty_small)} of the empty ones per warp per k-tile",
        f"{ms['shared_load_instructions']:.0f}, again exact",
        f"(1 pass per half, {a:g} per `LDS.128`)",
        f"(4 passes per half, {b:g} per `LDS.128`, where their 256 bytes would need 2)",
        f"that averages {per_lds:.2f} passes per `LDS.128`",
        f"Spread over the 38 issued instructions it is {pred['wavefronts_per_shared_load']['predicted']:.2f} per shared load; "
        f"ncu measured {d['wavefronts_per_shared_load']:.2f}",
        f"are {per_lds - least:.2f} per `LDS.128`; ncu attributes {conflicts:.2f} per `LDS.128` to bank conflicts",
        f"{per_lds_small:.2f} passes per `LDS.128`, {pred_s['wavefronts_per_shared_load']['predicted']:.2f} per shared load "
        f"with the {int(empty_small)} empty ones; ncu measured {ds['wavefronts_per_shared_load']:.2f}, with "
        f"{ms['shared_load_conflicts'] / _lds128(rs):.2f} conflict passes",
        f"DRAM reads are {m['dram_read_bytes'] / 1e9:.2f} GB against the {pred['dram_read_bytes']['predicted'] / 1e9:.2f} GB",
        f"A and B ({4 * r['M'] * r['K'] / 1e6:.0f} MB each) do not fit together in the H200's "
        f"{r['provenance']['l2_bytes'] / 1e6:.0f} MB L2",
        f"Achieved occupancy is {m['achieved_occupancy_pct']:.0f}%, just under the "
        f"{pred['achieved_occupancy_pct']['predicted']:.0f}% the compile report allows",
    ]
    assert_prose_says(claims, prose)
    assert abs(pred["wavefronts_per_shared_load"]["ratio"] - 1) < 0.005  # the model within 0.5% of ncu


def test_level6_counters():
    prose = _prose(L6)
    opts = {"none": dict(activation="none", bias=False), "relu": dict(activation="relu"),
            "gelu": dict(activation="gelu"), "accumulate": dict(activation="none", bias=False, accumulate=True)}
    rows = {k: _row(L6, **v) for k, v in opts.items()}
    preds = {k: _predicted(L6, **v) for k, v in opts.items()}
    _, m5, d5 = _row(L5)
    assert {f"{d['wavefronts_per_shared_load']:.2f}" for _, _, d in rows.values()} == {f"{d5['wavefronts_per_shared_load']:.2f}"}
    for k in opts:  # the epilogue's loads: 64 per thread with bias or accumulate
        r, m, d = rows[k]
        extra = (m["global_load_requests"] - m5["global_load_requests"]) / _geometry(r)[0]
        assert extra == (0 if k == "none" else 64)
        assert abs(preds[k]["sectors_per_load_request"]["ratio"] - 1) < 1e-3
    relu, acc = rows["relu"][2], rows["accumulate"][2]
    assert_prose_says([
        f"5.00 passes per `LDS.128`, {preds['relu']['wavefronts_per_shared_load']['predicted']:.2f} per shared load; "
        f"ncu measured {d5['wavefronts_per_shared_load']:.2f} for every option",
        "adds 64 `LDG.32` per thread", "16 sectors per request",
        f"predicts {preds['relu']['sectors_per_load_request']['predicted']:.2f} sectors per request; measured "
        f"{relu['sectors_per_load_request']:.2f}",
        f"32 sectors: predicted {preds['accumulate']['sectors_per_load_request']['predicted']:.2f}, measured "
        f"{acc['sectors_per_load_request']:.2f}",
    ], prose)


def test_level7_counters():
    prose = _prose(L7)
    r, m, d = _row(L7)
    rb, mb, db = _row(L7, BK=16)
    _, m5, _ = _row(L5)
    pred, pred_b = _predicted(L7), _predicted(L7, BK=16)
    assert m["shared_load_instructions"] == _lds128(r) == pred["shared_load_instructions"]["predicted"]
    passes = [_shared_passes(a, 16) for a in _register_tile_reads(r["params"])]
    a, b = _split_reads(r["params"], passes)
    per_lds = pred["wavefronts_per_shared_load"]["predicted"]
    ffma = r["M"] * r["N"] * r["K"] / 32
    fewer = 1 - m["instructions"] / m5["instructions"]
    assert counters.top_stalls(m)[0][0] == "short_scoreboard"
    assert f"{d['sectors_per_load_request']:.1f}" == f"{db['sectors_per_load_request']:.1f}" == "16.0"
    assert_prose_says([
        "16 sectors per request, against Level 5's 4", "Measured: 16.0 for both settings",
        f"{m['global_load_requests']:.0f} against Level 5's {m5['global_load_requests']:.0f}",
        f"({m['shared_load_instructions']:.0f} in all, exactly what ncu counted)",
        f"gives each A read {a:g} passes and each B read {b:g}, {per_lds:.2f} per `LDS.128`; measured "
        f"{d['wavefronts_per_shared_load']:.2f}, and {db['wavefronts_per_shared_load']:.2f} with `BK = 16`",
        f"ncu attributes {m['shared_load_conflicts'] / m['shared_load_instructions']:.2f} passes per `LDS.128` to bank conflicts",
        f"8 passes for 5 stores, {pred['wavefronts_per_shared_store']['predicted']:.2f} per store; measured "
        f"{d['wavefronts_per_shared_store']:.2f}",
        f"2 passes per `STS.32`, {pred_b['wavefronts_per_shared_store']['predicted']:.2f} per store predicted, "
        f"{db['wavefronts_per_shared_store']:.2f} measured",
        f"issues {m['instructions'] / 1e9:.2f} G warp instructions against Level 5's {m5['instructions'] / 1e9:.2f} G, "
        f"{fewer:.0%} fewer, for the same {ffma / 1e9:.2f} G FFMA",
        f"({m['issue_active_pct']:.0f}% against {m5['issue_active_pct']:.0f}%)",
        f"busy {m['fma_pipe_pct']:.0f}% of the time against {m5['fma_pipe_pct']:.0f}%",
        f"at {m['stall_short_scoreboard']:.2f} warps per issued instruction against Level 5's {m5['stall_short_scoreboard']:.2f}",
        f"each of those loads takes {per_lds:.0f} passes through the banks",
        f"the same 32 `LDS.128` per k-tile at {per_lds:.2f} passes each, "
        f"{m['shared_load_conflicts'] / m['shared_load_instructions']:.0f} of them bank conflicts",
        f"{fewer:.0%} fewer instructions issued for the same FFMAs",
    ], prose)
    # the SASS: the same inner loop in both levels, no empty LDS in Level 7 (no cp.async)
    mix5 = next(s["summary"] for s in results.sass_records() if s["level"] == L5 and s["params"] == r["params"])
    mix7 = next(s["summary"] for s in results.sass_records() if s["level"] == L7 and s["params"] == r["params"])
    assert mix5["LDS.128"] == mix7["LDS.128"] == 32 and mix5["FFMA"] == mix7["FFMA"] and "LDS.32" not in mix7
