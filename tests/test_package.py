"""Unit tests of the package that need no GPU: registry, validation, compile reports, models, results."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gemm_course as gc
from gemm_course import models
from gemm_course.display import glossary
from gemm_course.measure import results
from gemm_course.run.compile import parse_ptxas_log

ROOT = Path(__file__).resolve().parents[1]


# --- the registry ---------------------------------------------------------------------------------

def test_registry_is_ordered_and_complete():
    lvs = gc.levels()
    assert [lv.number for lv in lvs] == sorted(lv.number for lv in lvs)
    assert len({lv.id for lv in lvs}) == len(lvs)
    for lv in lvs:
        assert lv.id.startswith(f"{lv.number:02d}_")
        assert lv.path.is_file(), lv.path
        assert lv.title_en and re.search(r"[\u4e00-\u9fff]", lv.title_zh)
        source = lv.path.read_text()
        for setting in [lv.defaults, *lv.valid_settings()[:5]]:
            assert lv.kernel_name(setting).split("<")[0] in source


@pytest.mark.parametrize("lookup", ["01_naive", 1, "1", "naive"])
def test_get_level_accepts_id_number_and_name(lookup):
    assert gc.get_level(lookup).id == "01_naive"


def test_unknown_level_lists_known_ones():
    with pytest.raises(ValueError, match="01_naive"):
        gc.get_level("99_magic")


def test_resolve_fills_defaults_and_rejects_bad_settings():
    lv = gc.get_level("01_naive")
    assert lv.resolve() == lv.defaults
    with pytest.raises(ValueError, match="no parameter tile"):
        lv.resolve(tile=16)
    with pytest.raises(ValueError, match="choose one of"):
        lv.resolve(block_x=24)
    with pytest.raises(ValueError, match="exceeds the hardware limit of 1024"):
        lv.resolve(block_x=64, block_y=32)
    with pytest.raises(ValueError, match="less than one warp"):
        lv.resolve(block_x=4, block_y=4)


def test_valid_settings_all_resolve():
    for lv in gc.levels():
        settings = lv.valid_settings()
        assert lv.defaults in settings
        assert all(lv.resolve(**s) == s for s in settings)


def test_naive_geometry_covers_every_element():
    lv = gc.get_level("01_naive")
    for mapping in ("cols", "rows"):
        p = lv.resolve(mapping=mapping, block_x=32, block_y=8)
        launch = lv.geometry(1000, 7, 4097, p)
        (gx, gy, _), (bx, by, _) = launch.grid, launch.block
        rows_cols = (gy * by, gx * bx) if mapping == "cols" else (gx * bx, gy * by)
        assert rows_cols[0] >= 1000 and rows_cols[1] >= 7
        assert rows_cols[0] - 1000 < (by if mapping == "cols" else bx)  # no whole idle block row


# --- compile reports (NVRTC, no GPU) -------------------------------------------------------------

def test_parse_ptxas_log():
    log = ("ptxas info    : Function properties for k\n"
           "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 42 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]\n")
    assert parse_ptxas_log(log) == {"registers": 42, "static_shared_bytes": 4096, "stack_bytes": 16,
                                    "spill_store_bytes": 8, "spill_load_bytes": 12}


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_compile_report_without_gpu(arch):
    for lv in gc.levels():
        if lv.min_cc > int(arch[3:]):
            continue
        r = gc.compile_report(lv, arch=arch)
        assert r.arch == (f"{arch}a" if lv.arch_specific else arch) and 0 < r.registers <= 255
        assert r.spills == any("spill" in en for en, _ in r.problems())  # a spill is always reported
        if lv.number < 8:  # Level 8's default trades a small spill for two blocks per SM (measured faster)
            assert not r.spills and r.problems() == []
        assert r.occupancy.blocks_per_sm >= 1
        assert "registers" in str(r) and "<table" in r._repr_html_()


def test_compile_report_is_cached():
    a = gc.compile_report("01_naive", arch="sm_80", block_x=16)
    assert gc.compile_report("01_naive", arch="sm_80", block_x=16) is a


def test_compile_report_rejects_unknown_arch():
    with pytest.raises(ValueError, match="sm_90"):
        gc.compile_report("01_naive", arch="sm_42")


def test_edited_source_is_compiled_and_errors_are_readable():
    broken = gc.kernel_source("01_naive").replace("acc +=", "acc += undefined_name +")
    with pytest.raises(RuntimeError, match="undefined_name"):
        gc.compile_report("01_naive", arch="sm_90", source=broken)


# --- models --------------------------------------------------------------------------------------

def test_occupancy_calculator_known_cases():
    # 256 threads, 32 registers on sm_90: 8 blocks fill the 64 warps
    occ = models.occupancy("sm_90", 256, 32, 0)
    assert (occ.blocks_per_sm, occ.fraction, occ.limited_by) == (8, 1.0, "threads")
    # 1024 threads × 64 registers = 65536: exactly one block; 65 registers: none fits
    assert models.occupancy("sm_90", 1024, 64, 0).blocks_per_sm == 1
    assert models.occupancy("sm_90", 1024, 65, 0).blocks_per_sm == 0
    # 48 KB of shared memory per block: 4 blocks in 228 KB on sm_90 (1 KB reserved each), 1 on sm_75
    assert models.occupancy("sm_90", 128, 32, 48 * 1024).blocks_per_sm == 4
    assert models.occupancy("sm_75", 128, 32, 48 * 1024).limited_by == "shared memory"


def test_flops_bytes_intensity():
    assert models.gemm_flops(2, 3, 4) == 48
    assert models.gemm_min_bytes(2, 3, 4) == 4 * (8 + 12 + 6)
    n = 4096
    assert models.arithmetic_intensity(n, n, n) == pytest.approx(2 * n / 12)
    h200 = models.KNOWN_GPUS["NVIDIA H200"]
    assert h200.fp32_peak_tflops == pytest.approx(132 * 128 * 2 * 1.98 / 1000)
    assert models.roofline(0.25, h200.fp32_peak_tflops, h200.memory_bandwidth_gbs) == pytest.approx(1.2)


def test_tolerance_separates_fp32_from_tf32():
    for K in (1, 1000, 4097):
        assert gc.tolerance("float32", K) < 2.0 ** -11  # TF32's unit roundoff would fail
    assert gc.tolerance("float32", 4097) > gc.tolerance("float32", 7)


def test_relative_error_nan_never_passes():
    import numpy as np

    ref = np.ones((2, 2))
    C = np.ones((2, 2), dtype=np.float32)
    C[0, 0] = np.nan
    assert not gc.relative_error(C, ref) <= 1.0


# --- recorded results ----------------------------------------------------------------------------

REQUIRED_PROVENANCE = {"gpu", "compute_capability", "sm_count", "sm_clock_max_mhz", "driver", "cuda_runtime",
                       "nvrtc", "cupy", "date", "command", "method"}


@pytest.mark.parametrize("path", results.recorded_files(), ids=lambda p: p.name)
def test_recorded_files_are_consistent(path):
    data = results.load(path)
    assert REQUIRED_PROVENANCE <= set(data["provenance"])
    blas = {}
    for r in data.get("records", []):  # timing records (the host-cost file has its own key)
        assert r["min_ms"] <= r["q1_ms"] <= r["median_ms"] <= r["q3_ms"] <= r["max_ms"]
        assert r["tflops"] == pytest.approx(2 * r["M"] * r["N"] * r["K"] / r["median_ms"] / 1e9)
        if r["level"] == "cublas":
            blas[(r["M"], r["N"], r["K"])] = r["median_ms"]
            continue
        if r["level"] == results.FP8_LEVEL:  # Level 13 runs outside the registry: its own check and baseline
            assert r["dtype"] == "float8_e4m3" and r["passed"] and r["max_error_ratio"] <= 1
            assert r["ratio_to_cublas"] == pytest.approx(r["cublas_paired_ms"] / r["median_ms"])
            from gemm_course.__main__ import SWEEP_TIMING_FP8
            swept = results.SWEEP_ONLY_FLAG in data["provenance"]["command"].split() and \
                r["reps"] >= SWEEP_TIMING_FP8["reps"]  # the tuner's sweep: shorter runs, many settings
            assert r["sm_clock_mhz"] > 0 and (r["reps"] >= 50 or swept) and r["baseline"] in results.BASELINE_NAMES
            assert r["ratio_to_baseline"] == r["ratio_to_cublas"] and r["baseline_ms"] == r["cublas_paired_ms"]
            assert r["baseline"] == ("cublaslt_blockwise" if r["params"]["scaling"] == "blockwise" else "cublaslt_fast")
            continue
        lv = gc.get_level(r["level"])
        setting = lv.resolve(**r["params"])  # a setting the registry still accepts
        assert r["relative_error"] <= gc.tolerance(r["dtype"], r["K"], lv.c_type(setting, r["dtype"]))
        # the ratio uses cuBLAS timed right before the kernel where the file has that pairing (with the clocks
        # of both), else cuBLAS timed once for the size
        baseline = r.get("cublas_paired_ms", blas[(r["M"], r["N"], r["K"])])
        assert r["ratio_to_cublas"] == pytest.approx(baseline / r["median_ms"])
        if "cublas_paired_ms" in r:  # the showcase's timing, or the sweep's shorter one at the sweep size
            from gemm_course.__main__ import SWEEP_TIMING
            from gemm_course.measure.autotune import sweep_shapes
            swept = (r["M"], r["N"], r["K"]) in sweep_shapes(lv) and r["reps"] >= SWEEP_TIMING["min_reps"]
            assert r["sm_clock_mhz"] > 0 and r["cublas_paired_sm_clock_mhz"] > 0 and (r["reps"] >= 50 or swept)


def test_every_level_has_recorded_results():
    recorded_levels = {r["level"] for r in results.recorded()}
    assert {lv.id for lv in gc.levels()} <= recorded_levels


def test_summary_command_json():
    out = subprocess.run([sys.executable, "-m", "gemm_course", "summary", "--json"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    rows = json.loads(out)
    assert rows and {"level", "tflops", "cublas_tflops", "ratio_to_cublas", "gpu"} <= set(rows[0])
    # every row names the baseline its ratio is against; Level 13's fine-grained rows are against block-scaled
    # cuBLASLt, its per-tensor rows against cuBLASLt's per-tensor fast mode, every other level against cuBLAS
    assert all(r["baseline"] in results.BASELINE_NAMES and r["ratio_to_baseline"] > 0 for r in rows)
    fp8_rows = [r for r in rows if r["level"] == results.FP8_LEVEL]
    assert fp8_rows and {r["baseline"] for r in fp8_rows if r["params"]["scaling"] == "blockwise"} == {"cublaslt_blockwise"}
    assert {r["baseline"] for r in fp8_rows if r["params"]["scaling"] == "per_tensor"} == {"cublaslt_fast"}
    assert {r["baseline"] for r in rows if r["level"] != results.FP8_LEVEL} == {"cublas"}
    assert {r["clock_source"] for r in fp8_rows} == {"sm"}  # measured on the SMs, not NVML
    # cycles only where both clocks were measured on the SMs: every Level 13 kernel row, no NVML-era row
    assert all(r["ratio_in_cycles"] > 0 for r in fp8_rows)
    assert all(r["ratio_in_cycles"] is None for r in rows if r["clock_source"] != "sm")


def test_report_command_without_gpu():
    out = subprocess.run([sys.executable, "-m", "gemm_course", "report", "01_naive:mapping=rows",
                          "--arch", "sm_75"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "gemm_naive_rows<32, 8>" in out and "sm_75" in out


# --- figures -------------------------------------------------------------------------------------

def test_show_emits_html_that_draws_with_plotly(capsys):
    import plotly.graph_objects as go
    html = gc.plots.figure_html(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])))
    assert "Plotly.newPlot" in html and 'class="gemm-figure"' in html


def test_performance_figure_has_cublas_and_each_config():
    recs = [r for r in results.recorded("01_naive") if r["params"].get("block_y", 8) == 8
            and r["params"].get("block_x", 32) == 32]
    fig = gc.plots.performance_figure(recs)
    names = {t.name for t in fig.data}
    assert "cuBLAS" in names and any("mapping=rows" in n for n in names)


# --- the prose quotes the recorded file ----------------------------------------------------------

def _english_prose(notebook: Path) -> str:
    nb = json.loads(notebook.read_text())
    return glossary.plain("\n".join("".join(c["source"]) for c in nb["cells"]
                                     if "lang-en" in c.get("metadata", {}).get("tags", [])))


def assert_prose_says(claims, prose: str) -> None:
    """Every claim (a number formatted from the recorded files) appears verbatim in the prose
    (as the reader sees it: glossary links count as their words)."""
    prose = glossary.plain(prose)
    for claim in claims:
        assert claim in prose, f"the prose should say {claim!r}"


def test_level1_prose_numbers_come_from_the_recorded_file():
    prose = _english_prose(ROOT / "notebooks" / "01_naive.ipynb")
    cols = {n: results.find("01_naive", n, mapping="cols", block_x=32, block_y=8) for n in (1024, 4096, 8192)}
    rows = [results.find("01_naive", n, mapping="rows", block_x=32, block_y=8) for n in (1024, 2048, 4096, 8192)]
    c8 = cols[8192]
    claims = [
        f"{c8['tflops']:.2f} TFLOPS at 8192³, {c8['ratio_to_cublas']:.1%} of cuBLAS's "
        f"{c8['tflops'] / c8['ratio_to_cublas']:.1f} TFLOPS",
        f"{cols[1024]['tflops']:.2f} TFLOPS ({cols[1024]['ratio_to_cublas']:.1%}) at 1024³",
        f"{min(r['ratio_to_cublas'] for r in rows):.1%} to {max(r['ratio_to_cublas'] for r in rows):.1%} of cuBLAS",
        f"finishes in {cols[4096]['median_ms']:.1f} ms",
        f"{models.tile_traffic(4096, 4096, 4096) / 1e12:.2f} TB at 4096³",
    ]
    assert_prose_says(claims, prose)
    assert all(0.45 <= r["tflops"] <= 0.55 for r in rows)  # "stays near 0.5 TFLOPS"
    sweep = [r for r in results.recorded("01_naive") if r["M"] == 4096 and r["level"] == "01_naive"
             and r["params"]["mapping"] == "cols"]
    by_bx = {bx: [r["tflops"] for r in sweep if r["params"]["block_x"] == bx] for bx in (4, 8)}
    wide = [r["tflops"] for r in sweep if r["params"]["block_x"] >= 16]
    assert f"4 gives {max(by_bx[4]):.2f} TFLOPS, 8 gives {max(by_bx[8]):.1f}" in prose
    assert f"16 or more gives {min(wide):.1f} to {max(wide):.1f}" in prose


def _tf(level, n, **p):
    return results.find(level, n, **p)["tflops"]


def test_levels_2_to_4_prose_numbers_come_from_the_recorded_file():
    l1 = _tf("01_naive", 8192, mapping="cols", block_x=32, block_y=8)
    t = {tile: _tf("02_smem_tiling", 8192, tile=tile) for tile in (8, 16, 32)}
    prose2 = _english_prose(ROOT / "notebooks" / "02_smem_tiling.ipynb")
    for claim in (f"tile 32 reaches {t[32]:.2f} TFLOPS at 8192³, "
                  f"{results.find('02_smem_tiling', 8192, tile=32)['ratio_to_cublas']:.1%} of cuBLAS and "
                  f"{t[32] / l1:.2f} times Level 1's `cols` mapping ({l1:.2f} TFLOPS)",
                  f"Tile 16 gives {t[16]:.2f} and tile 8 gives {t[8]:.2f}",
                  f"it gives {models.tile_traffic(8192, 8192, 8192, 32, 32) / results.find('02_smem_tiling', 8192, tile=32)['median_ms'] / 1e9:.2f} TB/s",
                  f"that gives {models.tile_traffic(8192, 8192, 8192) / results.find('01_naive', 8192, mapping='cols', block_x=32, block_y=8)['median_ms'] / 1e9:.0f} TB/s"):
        assert claim in prose2, claim

    def l3(n, **p):
        return _tf("03_coalescing_banks", n, **{"tile": 32, "load": "coalesced", "a_layout": "mk", **p})

    prose3 = _english_prose(ROOT / "notebooks" / "03_coalescing_banks.ipynb")
    mk, pad, km, kmp, kms = (l3(8192, a_layout=a) for a in ("mk", "mk_padded", "km", "km_padded", "km_swizzled"))
    strided = l3(8192, load="strided")
    for claim in (f"from {mk:.2f} to {strided:.2f} TFLOPS at 8192³", f"{mk / strided:.1f} times slower",
                  f"costs {1 - pad / mk:.0%}: {mk:.2f} TFLOPS without it, {pad:.2f} with it",
                  f"`km` runs at {km:.2f} TFLOPS", f"runs at {kmp:.2f}, {kmp / km:.2f} times faster",
                  f"but runs at {kms:.2f}",
                  f"{l3(4096, tile=16, a_layout='km_swizzled'):.2f} TFLOPS against "
                  f"{l3(4096, tile=16, a_layout='km'):.2f} for the conflicted layout at 4096³"):
        assert claim in prose3, claim
    swz = gc.compile_report("03_coalescing_banks", arch="sm_90", a_layout="km_swizzled")
    assert f"{swz.registers} registers per thread instead of 32" in prose3
    assert f"halves the occupancy ({swz.occupancy.fraction:.0%})" in prose3

    prose4 = _english_prose(ROOT / "notebooks" / "04_double_buffering.ipynb")
    reg, cpa = (_tf("04_double_buffering", 8192, tile=32, copy=c) for c in ("registers", "cp_async"))
    assert f"{reg:.2f} TFLOPS with register prefetch and {cpa:.2f} with cp.async, against {mk:.2f}" in prose4
    assert f"{t[32]:.2f} and {mk:.2f} TFLOPS, {mk / t[32] - 1:.1%} apart" in prose4
    for tile in (8, 16, 32):
        before, after = _tf("02_smem_tiling", 4096, tile=tile), _tf("04_double_buffering", 4096, tile=tile,
                                                                      copy="registers")
        assert f"from {before:.2f} to {after:.2f}" in prose4 and f"({after / before - 1:+.0%})" in prose4
    for tile in (8, 16):
        cp = _tf("04_double_buffering", 4096, tile=tile, copy="cp_async")
        assert f"{cp:.2f}" in prose4 and f"{cp / _tf('02_smem_tiling', 4096, tile=tile) - 1:.0%}".replace("-", "−") in prose4


def test_widget_launch_kwargs_run_every_epilogue_setting():
    """The explorer's live path passes an epilogue level what gemm() needs (checked on the CPU backend)."""
    import numpy as np

    from gemm_course.display.widgets import launch_kwargs

    lv = gc.get_level("06_fused_epilogue")
    A, B = gc.random_operands(33, 40, 17, xp=np)
    for setting in lv.showcase:
        params = lv.resolve(**setting)
        run, C_initial = launch_kwargs(lv, params, 33, 40, np)
        C = C_initial if C_initial is not None else np.empty((33, 40), np.float32)
        gc.gemm(A, B, lv, out=C, backend="cpu", **run)
        assert np.isfinite(C).all()
    assert launch_kwargs(gc.get_level("01_naive"), {"mapping": "cols"}, 4, 4, np) == ({"mapping": "cols"}, None)


def test_find_cublas_defaults_to_the_fp32_baseline():
    r = results.find("cublas", 4096)
    assert r["level"] == "cublas" and r["dtype"] == "float32"
    assert results.find("cublas", 8192, dtype="bfloat16")["dtype"] == "bfloat16"


def test_peak_probes_compile_without_a_gpu():
    """The probe kernels build for sm_90 with NVRTC alone, with no spills (a spill would add memory
    traffic to a probe that must have none), and their flop counts match the instructions they issue."""
    import re

    from gemm_course.measure import peak
    from gemm_course.run.compile import COMPILE_OPTIONS, nvrtc_compile

    for name, probe in peak.PROBES.items():
        _, _, log = nvrtc_compile(peak.probe_source(), probe.kernel, "sm_90", COMPILE_OPTIONS)
        assert re.search(r"\b0 bytes spill stores", log), (name, log)
    assert peak.PROBES["ffma"].flops_per_warp_iteration == 8 * 32 * 2  # 8 chains × 32 lanes × one FMA
    assert peak.PROBES["warp_tile_64x64_mma"].flops_per_warp_iteration == 2 * (64 * 64 * 16 * 2)  # 2 k-steps of 16


def test_level10_parts_switch_leaves_the_kernel_alone():
    """PARTS defaults to the whole kernel, and pipeline_parts can find the default it rewrites."""
    src = gc.compile.kernel_source("10_mma_pipeline")
    assert "int PARTS = MMA_ALL" in src and "gemm_mma_pipeline<" in gc.get_level("10_mma_pipeline").kernel_name(
        gc.get_level("10_mma_pipeline").resolve())


def test_level10_tma_setting_rules_without_a_gpu():
    """copy='tma' needs sm_90 and the 128×256 tile; it compiles for sm_90 with no spills, and the
    cp.async settings still compile for sm_80 although the file now includes the TMA helpers."""
    lv = gc.get_level("10_mma_pipeline")
    tma = lv.resolve(stages=3, BN=256, copy="tma")
    assert lv.required_cc(tma) == 90 and lv.required_cc(lv.resolve()) == 80
    with pytest.raises(ValueError, match="BN=256"):
        lv.resolve(copy="tma")
    with pytest.raises(ValueError, match="needs sm_90"):
        gc.compile_report(lv, arch="sm_80", **tma)
    rep = gc.compile_report(lv, arch="sm_90", **tma)
    assert rep.kernel == "gemm_mma_tma<false, 3>" and not rep.spills and rep.occupancy.blocks_per_sm == 1
    assert rep.dynamic_shared_bytes == 3 * 48 * 1024 + 1024
    assert not gc.compile_report(lv, arch="sm_80").spills


def test_the_repository_url_has_one_source():
    """_config.yml's repository.url (launch buttons) is the one the notebooks install from and the
    how-to-run page clones; a fork changes it there and runs `python -m gemm_course.display.repository --write`."""
    from gemm_course.display import repository

    assert repository.configured_url().startswith("https://")
    assert repository.mismatches() == []
    count = sum(len(__import__("re").findall(regex, path.read_text(encoding="utf-8")))
                for pattern, regex in repository.PLACES for path in repository.ROOT.glob(pattern))
    assert count >= 14  # every level notebook's install cell and the page's clone commands


def test_level_13_is_known_by_every_spelling_in_one_place() -> None:
    from gemm_course.fp8.gemm import LEVEL_ID
    from gemm_course.levels import FP8_LEVEL_ID, get_level, is_fp8_level
    from gemm_course.measure.results import FP8_LEVEL

    assert LEVEL_ID == FP8_LEVEL == FP8_LEVEL_ID == "13_fp8_blockscaled"
    for spelling in (13, "13", "013", " 13_fp8_blockscaled ", "13_fp8", "fp8_blockscaled", "fp8"):
        assert is_fp8_level(spelling), spelling
    for other in (True, 12, "12", "3", "11_hopper_wgmma", None, 13.0, "fp16"):
        assert not is_fp8_level(other), other
    with pytest.raises(ValueError, match="not kernels of this registry"):
        get_level("fp8")
