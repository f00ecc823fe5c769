"""DeepGEMM as a recorded peer of Level 13 (gemm_course/fp8/deepgemm.py, `fp8 --record --peer deepgemm`).

No GPU and no DeepGEMM needed: the module's optional import, the command's refusals, the setting it times for
Level 13, and the recorded peer file (every output checked, three GEMMs per shape in one run, each with its clock)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_course.fp8 import deepgemm
from gemm_course.fp8 import gemm as fp8_gemm
from gemm_course.measure import results

ROOT = Path(__file__).resolve().parents[1]
PEER_FILES = [p for p in results.recorded_files() if results.load(p).get("peer_records")]


def test_importing_the_module_needs_no_deepgemm():
    # the module imports deep_gemm inside its functions only
    out = subprocess.run([sys.executable, "-c", "import sys, gemm_course.fp8.deepgemm; "
                          "print('deep_gemm' in sys.modules)"], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert out.strip() == "False"


@pytest.mark.skipif(deepgemm.available(), reason="DeepGEMM is installed here")
def test_missing_deepgemm_says_how_to_get_it_in_one_bilingual_line(tmp_path):
    with pytest.raises(deepgemm.DeepGEMMNotInstalled) as err:
        deepgemm.require()
    message = str(err.value)
    assert message == deepgemm.NOT_INSTALLED and "\n" not in message
    assert "build it from its own repository (see its README) on a Hopper GPU" in message and "README" in message
    assert any("\u4e00" <= ch <= "\u9fff" for ch in message)
    out = tmp_path / "peer.json"
    done = subprocess.run([sys.executable, "-m", "gemm_course", "fp8", "--record", "--peer", "deepgemm", "--out",
                           str(out)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0 and "DeepGEMM is not installed" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("extra", [[], ["--record", "--small-m"], ["--record", "--staged"],
                                   ["--record", "--sweep-only"]])
def test_peer_goes_with_record_alone(tmp_path, extra):
    done = subprocess.run([sys.executable, "-m", "gemm_course", "fp8", *extra, "--peer", "deepgemm", "--out",
                           str(tmp_path / "x.json")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0 and "--peer goes with --record alone" in done.stderr


def test_a_scales_column_stride_is_tma_aligned():
    assert [deepgemm.tma_aligned_rows(m) for m in (1, 4, 63, 64, 128, 4097)] == [4, 4, 64, 64, 128, 4100]


def test_the_default_shapes_are_the_fp8_record_shapes():
    shapes = deepgemm._default_sizes()
    assert len(shapes) == 11 and (4096, 4096, 4096) in shapes and (8192, 8192, 8192) in shapes
    assert (4096, 7168, 16384) in shapes and set(fp8_gemm.DECODE_SHAPES) <= set(shapes)


def test_level13_is_timed_at_its_best_recorded_blockwise_setting():
    for shape in deepgemm._default_sizes():
        params, source = deepgemm.level13_best(*shape)
        assert params["scaling"] == "blockwise"
        if shape in fp8_gemm.SWEEP_SHAPES:  # the tuner's recorded best
            from gemm_course.measure.autotune import recorded_best

            assert source.startswith("tuner") and params == recorded_best(fp8_gemm.LEVEL_ID, shape,
                                                                           scaling="blockwise")["params"]
        else:  # the fastest passing blockwise run of the chapter at that shape
            rows = [r for r in fp8_gemm.recorded_fp8() if (r["M"], r["N"], r["K"]) == shape
                    and r["params"]["scaling"] == "blockwise" and r["passed"]]
            assert source.startswith("chapter") and params == max(rows, key=lambda r: r["tflops"])["params"]


@pytest.mark.skipif(not PEER_FILES, reason="no recorded peer run")
@pytest.mark.parametrize("path", PEER_FILES, ids=lambda p: p.name)
def test_recorded_peer_run_checked_every_output_and_timed_all_three_per_shape(path):
    data = results.load(path)
    prov = data["provenance"]
    assert data["records"] == []  # the comparison stays out of the ladder's records
    assert prov["deepgemm"]["version"] and prov["deepgemm"]["commit"] and prov["deepgemm"]["api"] == "fp8_gemm_nt"
    assert prov["torch"] and "clock64" in prov["method"] and "--peer deepgemm" in prov["command"]
    recs = data["peer_records"]
    shapes = {(r["M"], r["N"], r["K"]) for r in recs}
    assert shapes == set(deepgemm._default_sizes())
    for shape in shapes:
        group = [r for r in recs if (r["M"], r["N"], r["K"]) == shape]
        mine = [r for r in group if r["level"] == fp8_gemm.LEVEL_ID]
        libs = {r["baseline"]: r for r in group if r["level"] == "cublas"}
        assert len(mine) == 1 and set(libs) == {"deepgemm", "cublaslt_blockwise"} and len(group) == 3
        assert sorted(r["timed_order"] for r in group) == [0, 1, 2]
        for r in group:
            M, N, K = shape
            assert r["dtype"] == "float8_e4m3" and r["passed"] and 0 < r["max_error_ratio"] <= 1
            assert r["rows_checked"] == M and 0 < r["relative_error"] < 1e-2
            assert r["reps"] >= 50 and r["sm_clock_mhz"] > 0
            assert r["min_ms"] <= r["q1_ms"] <= r["median_ms"] <= r["q3_ms"] <= r["max_ms"]
            assert r["tflops"] == pytest.approx(2 * M * N * K / r["median_ms"] / 1e9)
        (l13,) = mine
        assert l13["params"] == deepgemm.level13_best(*shape)[0]
        for name, lib in libs.items():
            assert l13[f"ratio_to_{name}"] == pytest.approx(lib["median_ms"] / l13["median_ms"])
            # the same algorithm (128-deep FP8 wgmma sums promoted into fp32 in k order) gives the same bf16 bits,
            # except where Level 13 splits K and adds the slices in another order: a few elements in ten thousand
            assert 0 <= lib["bits_differing_from_level13"] < 1e-2
            if l13["params"].get("splits", 1) > 1:
                assert lib["bits_differing_from_level13"] > 0  # computed by the library, not a copy of Level 13's


@pytest.mark.skipif(not PEER_FILES, reason="no recorded peer run")
def test_summary_takes_baseline_deepgemm():
    rows = results.summary(baseline="deepgemm")
    peer = [r for p in PEER_FILES for r in results.load(p)["peer_records"] if r["level"] == fp8_gemm.LEVEL_ID]
    assert len(rows) == len(peer) and {r["baseline"] for r in rows} == {"deepgemm"}
    assert {r["level"] for r in rows} == {fp8_gemm.LEVEL_ID} and all(r["ratio_in_cycles"] > 0 for r in rows)
    # the default ladder is unchanged: no row against DeepGEMM, no peer run's record
    assert all(r["baseline"] != "deepgemm" for r in results.summary())
    out = subprocess.run([sys.executable, "-m", "gemm_course", "summary", "--baseline", "deepgemm", "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert [r["ratio_to_baseline"] for r in json.loads(out)] == pytest.approx([r["ratio_to_baseline"] for r in rows])


def test_summary_refuses_an_unknown_baseline():
    with pytest.raises(ValueError, match="the baselines are"):
        results.summary(baseline="nobody")


@pytest.mark.parametrize("extra", [["--narrow-tiles"], ["--record", "--narrow-tiles", "--staged"],
                                   ["--record", "--narrow-tiles", "--tma-scales"]])
def test_narrow_tiles_go_with_record_alone(tmp_path, extra):
    done = subprocess.run([sys.executable, "-m", "gemm_course", "fp8", *extra, "--out", str(tmp_path / "x.json")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0 and "goes with --record" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.json").exists()


def test_narrow_tiles_variants_and_checks_cover_every_width():
    """What `fp8 --record --narrow-tiles` times and checks, listed without a GPU: each narrow width with both ways to
    the scales, split-K only where the model splits, the best recorded setting never repeated."""
    from gemm_course.fp8 import narrow_tiles

    assert narrow_tiles.NARROW_WIDTHS == (64, 32, 16)
    assert {(s["block_n"], s.get("staged_scales", False)) for s in narrow_tiles.CHECK_SETTINGS} == {
        (bn, way) for bn in (64, 32, 16) for way in (False, True, "tma")}
    for shape in narrow_tiles.decode_shapes():
        best, _ = deepgemm.level13_best(*shape)
        settings = [p for p, _ in narrow_tiles.variants(*shape, best)]
        assert best not in settings and {p["block_n"] for p in settings} == {64, 32, 16}
        assert all(p["splits"] == 1 or p["splits"] == fp8_gemm.auto_splits(*shape, 132, 64, p["block_n"])
                   for p in settings)
