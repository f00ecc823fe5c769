"""Levels 1-4, "Predict, then measure" and the rewritten Level 3 coalescing story: every number the
notebooks quote is formatted here from the recorded counters, the same-run experiments file or the
models, and must appear verbatim in the English prose (tests/test_bilingual.py checks the Chinese)."""
import json
from pathlib import Path

import pytest

from gemm_course.measure import counters, predictions, results
from gemm_course.display import glossary
from test_package import assert_prose_says  # tests/ is on sys.path (rootdir-less test modules)

ROOT = Path(__file__).resolve().parents[1]
L1, L2, L3, L4 = "01_naive", "02_smem_tiling", "03_coalescing_banks", "04_double_buffering"
ISO = dict(a_layout="mk_padded", b_layout="kn_padded")  # both tiles padded: stores conflict-free


def _prose(level: str) -> str:
    nb = json.loads(next((ROOT / "notebooks").glob(f"{level}.ipynb")).read_text())
    return glossary.plain("\n".join("".join(c["source"]) for c in nb["cells"]
                                     if "lang-en" in c.get("metadata", {}).get("tags", [])))


def _counted(level: str, **params) -> dict:
    m = counters.find(level, **params)["metrics"]
    return {**m, **counters.derived(m)}


def _predicted(level: str, **params) -> dict:
    return {r["key"]: r["predicted"] for r in predictions.compare(level, **params)}


def _gb(value: float, digits: int = 1) -> str:
    return f"{value / 1e9:.{digits}f} GB"


# --- the models agree with the counters where the pages say they do ---------------------------------

@pytest.mark.parametrize("level, params", [
    (L1, {}), (L1, {"mapping": "rows"}), (L2, {"tile": 8}), (L2, {"tile": 32}), (L3, {}), (L3, {"load": "strided"}),
    (L3, {"a_layout": "mk_padded"}), (L3, ISO), (L3, dict(load="strided", **ISO)), (L4, {}), (L4, {"copy": "cp_async"})])
def test_sector_and_wavefront_predictions_match_the_counters(level, params):
    rows = {r["key"]: r for r in predictions.compare(level, **params)}
    assert rows["sectors_per_load_request"]["ratio"] == pytest.approx(1)
    if level != L1:
        assert rows["wavefronts_per_shared_load"]["ratio"] == pytest.approx(1, abs=0.002)
        assert rows["shared_load_instructions"]["ratio"] == pytest.approx(1, abs=1e-6)


def test_l1_hit_model_for_the_naive_and_strided_loads():
    assert _predicted(L1)["global_load_l1_hit_pct"] == pytest.approx(87.5)
    assert _predicted(L3, load="strided")["global_load_l1_hit_pct"] == pytest.approx(87.5)
    assert _counted(L3, load="strided")["global_load_l1_hit_pct"] == pytest.approx(87.5)
    assert _predicted(L3)["global_load_l1_hit_pct"] == 0 == _counted(L3)["global_load_l1_hit_pct"]


def test_conflicted_store_predictions():
    assert _predicted(L3, load="strided")["wavefronts_per_shared_store"] == 32
    assert _predicted(L3, a_layout="km")["wavefronts_per_shared_store"] == 16.5
    assert _counted(L3, load="strided")["wavefronts_per_shared_store"] == pytest.approx(32, rel=0.01)


def test_cp_async_counts_three_predicated_off_loads_per_k_tile():
    reg, cpa = _counted(L4), _counted(L4, copy="cp_async")
    assert cpa["shared_load_instructions"] / reg["shared_load_instructions"] == pytest.approx(43 / 40)
    assert cpa["shared_load_wavefronts"] == pytest.approx(reg["shared_load_wavefronts"], rel=1e-3)
    assert cpa["shared_store_instructions"] == 0


# --- the prose quotes these numbers ---------------------------------------------------------------

def test_level1_predict_then_measure_prose():
    c, r = _counted(L1), _counted(L1, mapping="rows")
    pc, pr = _predicted(L1), _predicted(L1, mapping="rows")
    assert_prose_says([
        f"{pc['sectors_per_load_request']:.1f} per load on average", f"B one, {pr['sectors_per_load_request']:.1f}",
        f"{pc['global_load_l1_hit_pct']:.1f}% for `cols`, {pr['global_load_l1_hit_pct']:.1f}% for `rows`",
        f"measured exactly {c['sectors_per_load_request']:.1f} and {r['sectors_per_load_request']:.1f} sectors per load",
        f"and {c['global_load_l1_hit_pct']:.1f}% and {r['global_load_l1_hit_pct']:.1f}% L1 hits",
        f"reads {_gb(r['l2_read_bytes'])} from L2 against {_gb(c['l2_read_bytes'])} for `cols`",
        f"{_gb(r['dram_read_bytes'])} from DRAM against {_gb(c['dram_read_bytes'])}",
        f"{r['dram_read_bytes'] / c['dram_read_bytes']:.1f} times the DRAM bytes",
        f"wait {r['stall_lg_throttle']:.0f} cycles", f"(lg_throttle) against {c['stall_lg_throttle']:.1f} for `cols`",
        f"issue in {r['issue_active_pct']:.0f}% of cycles against {c['issue_active_pct']:.0f}%",
        f"asks for {r['sectors_per_load_request'] / c['sectors_per_load_request']:.1f} times as many",
        f"the compulsory {pc['dram_read_bytes'] / 1e9:.2f} GB",
        # the takeaway
        f"{c['sectors_per_load_request']:.1f} per load with `cols`", f"{r['sectors_per_load_request']:.1f} with `rows`",
        f"although {r['global_load_l1_hit_pct']:.1f}% of its sectors hit in L1 and it reads only "
        f"{r['dram_read_bytes'] / c['dram_read_bytes']:.1f} times the DRAM bytes",
    ], _prose(L1))


def test_level2_predict_then_measure_prose():
    t = {tile: _counted(L2, tile=tile) for tile in (8, 16, 32)}
    p = _predicted(L2, tile=32)
    stores = sorted(t[tile]["wavefronts_per_shared_store"] for tile in t)
    assert_prose_says([
        f"= {p['wavefronts_per_shared_load']:.2f} wavefronts per shared load",
        f"measured {t[32]['sectors_per_load_request']:.1f} sectors per load, and "
        f"{t[32]['wavefronts_per_shared_load']:.2f} wavefronts per shared load at tile 32 and tile 8, "
        f"{t[16]['wavefronts_per_shared_load']:.2f} at tile 16",
        f"counts {t[16]['wavefronts_per_shared_load'] - p['wavefronts_per_shared_load']:.2f} more wavefronts",
        f"take {stores[0]:.2f} to {stores[-1]:.2f} wavefronts",
        f"the L2 reads are {_gb(t[32]['l2_read_bytes'])} where the tile-traffic model says {_gb(p['l2_read_bytes'])}",
        f"reads {_gb(t[32]['dram_read_bytes'])} from DRAM in {t[32]['duration_ns'] / 1e6:.1f} ms, about "
        f"{t[32]['dram_read_bytes'] / t[32]['duration_ns'] / 1e3:.1f} TB/s",
        f"mio_throttle ({t[32]['stall_mio_throttle']:.1f} cycles per issued instruction)",
    ], _prose(L2))
    assert f"{t[8]['wavefronts_per_shared_load']:.2f}" == f"{t[32]['wavefronts_per_shared_load']:.2f}"


def test_level3_coalescing_story_prose():
    def tf(**p):
        return results.find(L3, 8192, file="h200_experiments.json", **p)["tflops"]

    mk, st, ic, is_ = tf(), tf(load="strided"), tf(**ISO), tf(load="strided", **ISO)
    cmk, cst, cic, cis = _counted(L3), _counted(L3, load="strided"), _counted(L3, **ISO), _counted(L3, load="strided", **ISO)
    l1r, l1c = _counted(L1, mapping="rows"), _counted(L1)
    assert_prose_says([
        f"the `rows` mapping, {l1r['sectors_per_load_request']:.1f} sectors per load against "
        f"{l1c['sectors_per_load_request']:.1f}",
        f"{cst['wavefronts_per_shared_store']:.2f} wavefronts per shared store measured against "
        f"{cmk['wavefronts_per_shared_store']:.2f} for the coalesced copy",
        f"({cic['wavefronts_per_shared_store']:.2f} and {cis['wavefronts_per_shared_store']:.2f} wavefronts per store)",
        f"coalesced {ic:.2f} TFLOPS, strided {is_:.2f}", f"Coalescing alone costs {ic / is_:.2f} times",
        f"the unpadded pair gives {mk:.2f} and {st:.2f}", f"strided kernel {is_ / st:.2f} times faster",
        f"costs the coalesced kernel {1 - ic / mk:.0%} ({mk:.2f} to {ic:.2f}",
        f"touches {cst['sectors_per_load_request'] / cmk['sectors_per_load_request']:.0f} times as many sectors",
        f"{cst['global_load_l1_hit_pct']:.1f}% of them hit in L1, against {cmk['global_load_l1_hit_pct']:.0f}%",
        f"read {_gb(cic['l2_read_bytes'], 2)} and {_gb(cis['l2_read_bytes'], 2)} from L2 and "
        f"{_gb(cic['dram_read_bytes'], 2)} and {_gb(cis['dram_read_bytes'], 2)} from DRAM",
        f"wait {cis['stall_long_scoreboard']:.1f} cycles for loaded data (long_scoreboard) against "
        f"{cic['stall_long_scoreboard']:.1f}",
        f"and {cis['stall_mio_throttle']:.1f} cycles", f"(mio_throttle) against {cic['stall_mio_throttle']:.1f}",
        f"{ic / is_:.2f} times slower with conflict-free stores",
    ], _prose(L3))


def test_level3_predict_then_measure_prose():
    km = _counted(L3, a_layout="km")
    cmk, cst = _counted(L3), _counted(L3, load="strided")
    pmk = _predicted(L3)
    free = [_counted(L3, **p)["wavefronts_per_shared_store"] for p in
            ({}, {"a_layout": "mk_padded"}, {"a_layout": "km_padded"}, {"a_layout": "km_swizzled"}, ISO,
             dict(load="strided", **ISO))]
    pad = _counted(L3, a_layout="mk_padded")
    assert_prose_says([
        f"{pmk['wavefronts_per_shared_load']:.2f} for `mk`",
        f"measured {cmk['sectors_per_load_request']:.1f} and {cst['sectors_per_load_request']:.1f} sectors per load",
        f"{cmk['global_load_l1_hit_pct']:.0f}% and {cst['global_load_l1_hit_pct']:.1f}% L1 hits",
        f"{cmk['wavefronts_per_shared_load']:.2f} and {pad['wavefronts_per_shared_load']:.2f} wavefronts per shared load",
        f"{cst['wavefronts_per_shared_store']:.2f} and {km['wavefronts_per_shared_store']:.2f} wavefronts per store",
        f"take {min(free):.2f} to {max(free):.2f} wavefronts instead of 1",
        # the 128-bit bank example
        f"the {cmk['wavefronts_per_shared_load']:.2f} wavefronts per shared load measured for the `mk` layout",
    ], _prose(L3))


def test_level4_counters_prose():
    r4, a4, mk = _counted(L4), _counted(L4, copy="cp_async"), _counted(L3)
    p = _predicted(L4, copy="cp_async")
    assert_prose_says([
        f"wait {r4['stall_long_scoreboard']:.1f} cycles for loaded data (long_scoreboard) instead of "
        f"{mk['stall_long_scoreboard']:.1f} in Level 3's `mk`",
        f"{r4['stall_barrier']:.1f} cycles at a barrier instead of {mk['stall_barrier']:.1f}",
        f"issues {r4['instructions'] / mk['instructions'] - 1:.0%} more instructions "
        f"({r4['instructions'] / 1e9:.2f} × 10⁹ against {mk['instructions'] / 1e9:.2f} × 10⁹)",
        f"(mio_throttle, {r4['stall_mio_throttle']:.1f} cycles per instruction against {mk['stall_mio_throttle']:.1f})",
        f"{r4['duration_ns'] / 1e6:.2f} ms against {mk['duration_ns'] / 1e6:.2f} ms under the profiler",
        f"48 / 43 = {p['wavefronts_per_shared_load']:.3f} wavefronts per load",
        f"Measured: {r4['wavefronts_per_shared_load']:.2f} for registers and {a4['wavefronts_per_shared_load']:.3f} for cp.async",
        f"{a4['shared_load_instructions'] / 1e9:.2f} × 10⁹ shared-load instructions against "
        f"{r4['shared_load_instructions'] / 1e9:.2f} × 10⁹",
        f"adds {r4['instructions'] / mk['instructions'] - 1:.0%} more instructions",
    ], _prose(L4))
    assert p["wavefronts_per_shared_load"] == pytest.approx(48 / 43)
