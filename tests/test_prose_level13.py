"""Every number the Level 13 (FP8 GEMM with fine-grained scaling) prose quotes, recomputed from the recorded
H200 files (timings with their cuBLASLt and bf16 baselines, Nsight Compute counters, the accuracy studies),
from gemm_course.fp8.formats / fp8_gemm and from the kernel source; no GPU needed. Each claim is looked for in the
English prose, and each of its numbers in the Chinese prose. Also: the chapter's figures lay out at phone
width, and the CPU check passes the correct emulation and catches the planted bugs."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from gemm_course.fp8 import formats as fp8, gemm as fg, report as fr
from gemm_course.display import glossary
from gemm_course.fp8.gemm import LEVEL_ID
from test_fp8_gemm import _nvrtc_available  # tests/ is on sys.path (rootdir-less test modules)
from test_package import assert_prose_says

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks" / "13_fp8_blockscaled.ipynb"
RUN = fr.recorded_run()
R = RUN["records"]
PROV = RUN["provenance"]
COUNTERS = fr.recorded_counters()["rows"]
ACCURACY = fr.recorded_accuracy_file()
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e-\d+)?%?")


def _prose(lang: str) -> str:
    nb = json.loads(NB.read_text(encoding="utf-8"))
    return glossary.plain("\n".join("".join(c["source"]) for c in nb["cells"]
                                    if f"lang-{lang}" in c.get("metadata", {}).get("tags", [])))


EN, ZH = _prose("en"), _prose("zh")


def says(claims: list[str]) -> None:
    """Each claim verbatim in the English prose; each number of it somewhere in the Chinese prose."""
    assert_prose_says(claims, EN)
    for claim in claims:
        for number in NUMBER.findall(claim):
            assert number in ZH, f"the Chinese prose should say {number} (from {claim!r})"


def pct(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}%}".replace("-", "−")


def step(n_or_shape, key: str):
    shape = (n_or_shape,) * 3 if isinstance(n_or_shape, int) else tuple(n_or_shape)
    return next(r for r in R if r["level"] == LEVEL_ID and fr._is(r, shape) and fr.step_key(r["params"]) == key)


def cublaslt(n: int, fast: bool):
    return next(r for r in fr.square_rows(R, n) if r["level"] == "cublas" and r["dtype"] == fg.DTYPE
                and (f"use_fast_accum={fast}" in r["params"]["library"]))


def counter(shape, key: str) -> dict:
    return next(r for r in fr.counters_rows() if (r["M"], r["N"], r["K"]) == tuple(shape)
                and fr.step_key(r["params"]) == key)


# --- the idea, the format, the kernel, launch and test ---------------------------------------------

def test_the_idea_and_fp8_against_bf16():
    lt4, bf4 = cublaslt(4096, True), fr.cublas_bf16(R, (4096,) * 3)
    pt4 = step(4096, "per_tensor_256")
    l11 = next(r for r in fr.square_rows(R, 4096) if r["level"] == "11_hopper_wgmma")
    assert lt4["tflops"] == fr.fastest_cublaslt(R, (4096,) * 3)["tflops"]
    decode = (64, 7168, 16384)
    lt_d, bf_d = fr.fastest_cublaslt(R, decode), fr.cublas_bf16(R, decode)
    ours_d = fr.fastest_step(R, decode)
    small = (64, 2112, 7168)
    ours_s, bf_s = fr.fastest_step(R, small), fr.cublas_bf16(R, small)
    assert ours_s["tflops"] < bf_s["tflops"]  # "stay below cuBLAS's ... in bf16"
    says([
        f"cuBLASLt's FP8 GEMM reaches {lt4['tflops']:.1f} TFLOPS at 4096³ against {bf4['tflops']:.1f} TFLOPS for "
        f"cuBLAS in bf16, {lt4['tflops'] / bf4['tflops']:.2f} times as fast",
        f"At 4096³ cuBLASLt's FP8 GEMM is {lt4['tflops'] / bf4['tflops']:.2f} times cuBLAS in bf16 "
        f"({lt4['tflops']:.1f} against {bf4['tflops']:.1f} TFLOPS) and this level's per-tensor kernel "
        f"{pt4['tflops'] / bf4['tflops']:.2f} times ({pt4['tflops']:.1f} TFLOPS), while Level 11's step 6 reaches "
        f"{l11['tflops']:.1f} TFLOPS in bf16",
        f"at 64×7168×16384 cuBLASLt in FP8 is {lt_d['tflops'] / bf_d['tflops']:.2f} times cuBLAS in bf16 "
        f"({lt_d['tflops']:.1f} against {bf_d['tflops']:.1f} TFLOPS)",
        f"{ours_d['tflops']:.1f} TFLOPS or {ours_d['tflops'] / bf_d['tflops']:.2f} times, and at 64×2112×7168 their "
        f"{ours_s['tflops']:.1f} TFLOPS stay below cuBLAS's {bf_s['tflops']:.1f} in bf16",
    ])
    assert l11["params"]["step"] == 6 and l11["params"]["c_type"] == "input"


def test_the_e4m3_format():
    values = fp8.E4M3_VALUES[:0x7F].astype(np.float64)
    assert fp8.E4M3_MAX == values.max() == 448
    assert values[8] == fp8.E4M3_MIN_NORMAL == 2.0 ** -6 and values[1] == fp8.E4M3_MIN_SUBNORMAL == 2.0 ** -9
    assert np.count_nonzero((values > 0) & (values < fp8.E4M3_MIN_NORMAL)) == 7  # subnormals
    assert fp8.encode_e4m3(np.array([2.0 ** -10 * 0.99]))[0] == 0  # under half of 2^-9: zero
    normal = values[values >= fp8.E4M3_MIN_NORMAL]
    rel = np.diff(normal) / normal[:-1]
    assert rel.max() == pytest.approx(1 / 8) and rel.min() == pytest.approx(1 / 15)
    x = np.array([1000.0, 3.14159265, 0.001])
    got = fp8.decode_e4m3(fp8.encode_e4m3(x)).astype(np.float64)
    assert got[0] == 448 and got[2] == 2.0 ** -9
    says([
        "1 sign bit, 4 exponent bits and 3 fraction bits", "only S.1111.111 is NaN, so the largest value is 448",
        "7 subnormals reach down to $2^{-9}$",
        f"neighbours lie 1/8 to 1/15 of a value apart, so rounding to the nearest one costs up to {pct(2 ** -4, 2)}, "
        f"against {pct(2 ** -8, 2)} in bf16",
        f"1000 saturates to 448, π becomes {got[1]:.2f}, and 0.001 becomes $2^{{-9}}$, {got[2]:.5f}",
    ])


def test_the_kernel_and_its_compile_report():
    source = fg.kernel_source()
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in source and "setmaxnreg.inc.sync.aligned.u32 232;" in source
    assert fg.BK == fp8.SCALE_BLOCK == 128 and fg.BM == 128
    assert "wgmma_m64k32_e4m3" in source  # an FP8 wgmma reads k = 32
    assert 2 * 128 > 232 >= 3 * 64  # part and acc at 256 columns do not fit; p0, p1, acc at 128 do
    tiles17 = fg.tiles(64, 2112, "blockwise")
    says([
        "with 40 registers per thread", "with 232 registers per thread, each owning 64 rows of a 128-row tile",
        "An FP8 `wgmma` reads k = 32 per instruction, so a k-block is 4 instructions",
        "at 256, `part` and `acc` would need 256 registers, more than a consumer's 232",
        f"Three arrays of 64 now live in each consumer thread, {3 * 64} of its 232 registers",
        f"64×2112 is {tiles17} tiles of 128×128 for the H200's {PROV['sm_count']} SMs",
    ])
    stages = {bn: fg.resolve_stages("per_tensor", block_n=bn) for bn in (256, 128)}
    assert stages[128] == fg.resolve_stages("blockwise")
    stage_kb = {bn: (fg.BM + bn) * fg.BK // 1024 for bn in (256, 128)}
    cap = 65536 // 384 // 8 * 8
    says([
        f"All four kernels report {cap} registers per thread and no spills",
        f"`__launch_bounds__(384, 1)` sets for 384 threads at entry",
        f"{stages[256]} stages of {stage_kb[256]} KB for the 128×256 tile ({fg.shared_bytes('per_tensor', block_n=256)} "
        f"bytes, with 1024 bytes to align",
        f"{stages[128]} stages of {stage_kb[128]} KB for the 128×128 tiles ({fg.shared_bytes('blockwise')} bytes)",
        "So 1 block fits on an SM",
    ])


@pytest.mark.skipif(not _nvrtc_available(), reason="needs NVRTC (cupy and the nvrtc wheel)")
def test_compile_report_numbers():
    cap = 65536 // 384 // 8 * 8
    for row in fr.compile_rows():
        assert row["registers"] == cap and not row["spills"] and row["blocks_per_sm"] == 1, row["kernel"]


def test_the_allowed_error_and_the_recorded_checks():
    assert fg.accumulation_error_bound(512, "blockwise") == fg.accumulation_error_bound(65536, "blockwise") == 2 ** -10
    assert fg.accumulation_error_bound(4096, "per_tensor") == (4096 / 32) * 2 ** -14 == 2 ** -7
    assert fg.accumulation_error_bound(128, "per_tensor") == 2 ** -10  # "at least"
    ref = np.array([1.0])
    assert fg.allowed_error(ref, np.array([0.0]), 128, "blockwise")[0] == pytest.approx(2 ** -8)
    ours = [r for r in R if r["level"] == LEVEL_ID]
    assert all(r["passed"] for r in ours)
    assert "64 random rows of C checked" in PROV["method"]
    says([
        "$b = 2^{-10}$ at every K", "$(K/32) \\cdot 2^{-14}$ and at least $2^{-10}$, so $2^{-7}$ at K = 4096",
        "on 64 random rows of C",
        f"the largest error was {max(r['max_error_ratio'] for r in ours):.2f} of the allowed",
    ])


def test_the_cpu_check_passes_the_emulation_and_catches_the_bugs(monkeypatch):
    monkeypatch.setattr(fr, "_hopper", lambda: False)
    shown = []
    monkeypatch.setattr(fr, "show_text", shown.append)
    rows = fr.check()
    assert len(rows) == 3 * len(fr.EMULATED_SHAPES) and shown
    for r in rows:
        correct = "correct" in r["what"]
        assert r["passed"] == correct and (r["error_ratio"] < 0.75 if correct else r["error_ratio"] > 10), r


def test_benchmark_setup():
    shapes = fr.projection_shapes(R)
    assert sorted(shapes) == sorted((m, n, k) for n, k in fg.PROJECTION_NK for m in fg.PROJECTION_M)
    assert fg.PROJECTION_M == (64, 128, 4096) and fg.SQUARES == (4096, 8192)
    says(["M = 64, 128 and 4096 tokens against three weight matrices of N×K = "
          + ", ".join(f"{n}×{k}" for n, k in fg.PROJECTION_NK[:-1]) + f" and {'×'.join(map(str, fg.PROJECTION_NK[-1]))}"])
    assert "cublaslt_blockwise" in PROV["method"] and "for the blockwise kernels" in PROV["method"]
    assert "use_fast_accum=True, for the per-tensor kernels" in PROV["method"]


# --- what the numbers say --------------------------------------------------------------------------

def mcycles(r) -> float:
    """A record's median time in millions of SM cycles, at the clock measured on the SMs while it ran."""
    return r["median_ms"] * r["sm_clock_mhz"] / 1e3


def paired_cycle_ratio(r) -> float:
    """The baseline's cycles over the kernel's, each at its own measured clock (the pair timed together)."""
    return r["baseline_ms"] * r["baseline_sm_clock_mhz"] / (r["median_ms"] * r["sm_clock_mhz"])


def mhz(x: float) -> str:
    return f"{x:.0f} MHz"


def test_the_clock_is_measured_on_the_sms():
    """The run measured each kernel's own clock (not NVML's), and at 4096³ the four steps ran at different clocks."""
    assert "clock64" in PROV["method"] and "nvml_sm_clock_mhz" in PROV["method"]
    four = [step(4096, k) for k in ("per_tensor_256", "per_tensor_128", "serial", "overlapped")]
    assert len({round(r["sm_clock_mhz"]) for r in four}) == 4 and all(r["sm_clock_mhz"] < 1900 for r in four)
    assert all(r["nvml_sm_clock_mhz"] > r["sm_clock_mhz"] for r in four)  # NVML reads high
    lo, hi = min(r["sm_clock_mhz"] for r in four), max(r["sm_clock_mhz"] for r in four)
    says([f"This H200 ran these kernels power-limited at {mhz(lo)} to {mhz(hi)}, each at its own clock"])


def test_tile_size_or_promotion():
    pt256, pt128, serial, over = (step(4096, k) for k in ("per_tensor_256", "per_tensor_128", "serial", "overlapped"))
    c = {k: counter((4096,) * 3, k) for k in ("per_tensor_256", "per_tensor_128", "serial", "overlapped")}
    assert max(r["issue_active_pct"] for r in c.values()) < 50  # "no scheduler is near its limit"
    t_cost, c_save = 1 - pt128["tflops"] / pt256["tflops"], 1 - mcycles(pt128) / mcycles(pt256)
    assert t_cost > 0 and c_save > 0  # slower in time, cheaper in cycles: "its lower clock costs more"
    assert pt128["sm_clock_mhz"] < pt256["sm_clock_mhz"]
    s_t, s_c = 1 - serial["tflops"] / pt128["tflops"], mcycles(serial) / mcycles(pt128) - 1
    o_t, o_c = 1 - over["tflops"] / pt128["tflops"], mcycles(over) / mcycles(pt128) - 1
    says([
        f"{mhz(pt256['sm_clock_mhz'])} for the per-tensor 128×256 kernel, {mhz(pt128['sm_clock_mhz'])} for the 128×128 "
        f"one, {mhz(serial['sm_clock_mhz'])} with promotion waited for and {mhz(over['sm_clock_mhz'])} with promotion overlapped",
        f"In time the smaller tile costs {pct(t_cost)}: {pt128['tflops']:.1f} TFLOPS against {pt256['tflops']:.1f}; in "
        f"cycles it is {pct(c_save)} cheaper ({mcycles(pt128):.3f} against {mcycles(pt256):.3f} million cycles)",
        f"With promotion waited for it runs at {serial['tflops']:.1f} TFLOPS, {pct(s_t)} below the per-tensor 128×128 "
        f"kernel, in {pct(s_c)} more cycles",
        f"with promotion overlapped, at {over['tflops']:.1f} TFLOPS, {pct(o_t)} below, in {pct(o_c)} more cycles",
        f"Overlapping wins back {pct(over['tflops'] / serial['tflops'] - 1)} in time and saves "
        f"{pct(1 - mcycles(over) / mcycles(serial))} of the cycles",
        f"{c['per_tensor_256']['tensor_pipe_pct']:.1f}% and {c['per_tensor_128']['tensor_pipe_pct']:.1f}% for the two "
        f"per-tensor tiles, {c['serial']['tensor_pipe_pct']:.1f}% with promotion waited for, "
        f"{c['overlapped']['tensor_pipe_pct']:.1f}% with promotion overlapped",
        f"issuing in {c['serial']['issue_active_pct']:.1f}% and {c['overlapped']['issue_active_pct']:.1f}% of cycles "
        f"against {c['per_tensor_128']['issue_active_pct']:.1f}% for the per-tensor 128×128 kernel",
        f"In cycles, promotion as this kernel does it, not the smaller tile, is the cost: at 4096³ the 128×128 tile saves {pct(c_save)} of the "
        f"cycles (at its lower clock it costs {pct(t_cost)} in time), promotion waited for takes {pct(s_c)} more cycles, "
        f"promotion overlapped with the next k-block's `wgmma` {pct(o_c)} more",
    ])


def test_what_the_counters_show_promotion_costs():
    """The second profile at 4096³ (clocks/h200_13_promotion_counters.json): block-scaled cuBLASLt beside the course's
    kernels, cycles, instructions, global loads, lg_throttle, L2 and DRAM, recomputed."""
    from gemm_course.measure import results
    data = results.load(results.CLOCKS_DIR / "h200_13_promotion_counters.json")
    assert data["provenance"]["ncu"] and data["provenance"]["metrics"]["cycles_elapsed_avg"] == "sm__cycles_elapsed.avg"
    rows = {("lt" if r["kind"] == "cublaslt_blockwise" else "pt" if r["step"]["scaling"] == "per_tensor"
             else "over" if r["step"]["overlap"] else "serial"): r["metrics"] for r in data["promotion_counters"]}
    assert set(rows) == {"lt", "pt", "serial", "over"}
    k = lambda key: f"{rows[key]['cycles_elapsed_avg'] / 1e3:.0f}"  # noqa: E731
    lt, pt, over = rows["lt"], rows["pt"], rows["over"]
    assert lt["cycles_elapsed_avg"] < pt["cycles_elapsed_avg"] < over["cycles_elapsed_avg"] < rows["serial"]["cycles_elapsed_avg"]
    more_instr = over["instructions"] / lt["instructions"] - 1
    loads = over["global_load_instructions"] / lt["global_load_instructions"]
    tiles, k_blocks, consumer_warps = (4096 // 128) ** 2, 4096 // 128, 8
    assert over["global_load_instructions"] == 3 * tiles * k_blocks * consumer_warps  # three scales per thread and k-block
    l2 = lambda m: m["l2_read_sectors"] * 32 / 1e9  # noqa: E731
    dram = sorted(m["dram_read_bytes"] / 1e6 for m in rows.values())
    says([
        f"takes {k('lt')} thousand cycles, fewer than the per-tensor 128×128 kernel without promotion ({k('pt')} thousand); "
        f"this kernel takes {k('over')} thousand with promotion overlapped and {k('serial')} thousand with it waited for",
        f"it executes {more_instr:.0%} more instructions than cuBLASLt ({over['instructions'] / 1e6:.1f} against "
        f"{lt['instructions'] / 1e6:.1f} million), among them {loads:.0f} times as many global loads "
        f"({over['global_load_instructions'] / 1e3:.0f} thousand against {lt['global_load_instructions'] / 1e3:.0f} thousand",
        f"{over['stall_lg_throttle']:.2f} warps per issued instruction, against {lt['stall_lg_throttle']:.0f} for cuBLASLt",
        f"It also reads {l2(over) / l2(lt) - 1:.0%} more from L2 ({l2(over):.2f} against {l2(lt):.2f} GB), while all four "
        f"kernels read about the same from DRAM ({dram[0]:.0f} to {dram[-1]:.0f} MB)",
        f"Block-scaled cuBLASLt promotes in fewer cycles than the per-tensor 128×128 kernel takes without promotion "
        f"({k('lt')} against {k('pt')} thousand in Nsight Compute at 4096³)",
    ])
    assert pt["stall_lg_throttle"] == lt["stall_lg_throttle"] == 0


def test_against_cublaslt():
    pt4, pt8 = step(4096, "per_tensor_256"), step(8192, "per_tensor_256")
    ov4, ov8 = step(4096, "overlapped"), step(8192, "overlapped")
    assert ov4["baseline"] == ov8["baseline"] == "cublaslt_blockwise" and pt4["baseline"] == "cublaslt_fast"
    assert PROV["blockwise_baseline_api"].startswith("torch.nn.functional.scaled_mm(")
    fast4 = fr.cublaslt(R, (4096,) * 3, "cublaslt_fast")
    assert pt4["baseline_ms"] == pytest.approx(fast4["median_ms"])
    for n in (4096, 8192):  # the baselines computed the same function: checked like the kernels
        assert all(r["passed"] for r in fr.square_rows(R, n) if r["level"] == "cublas" and r["dtype"] == fg.DTYPE)
    best_fine = max(r["tflops"] for r in R if r["level"] == LEVEL_ID and r["params"]["scaling"] == "blockwise"
                    and r["M"] == r["N"] == r["K"])
    assert best_fine == ov8["tflops"] < fr.PUBLISHED_FINE_GRAINED_TFLOPS
    mark = fr.PUBLISHED_FINE_GRAINED_TFLOPS
    says([
        f"At 4096³ the kernel with overlapped promotion reaches {pct(ov4['ratio_to_baseline'])} of it in time "
        f"({ov4['tflops']:.1f} TFLOPS; the kernel ran at {mhz(ov4['sm_clock_mhz'])}, cuBLASLt at "
        f"{mhz(ov4['baseline_sm_clock_mhz'])}) and {pct(paired_cycle_ratio(ov4))} in cycles",
        f"at 8192³, {pct(ov8['ratio_to_baseline'])} in time ({ov8['tflops']:.1f} TFLOPS, at {mhz(ov8['sm_clock_mhz'])} "
        f"against {mhz(ov8['baseline_sm_clock_mhz'])}) and {pct(paired_cycle_ratio(ov8))} in cycles",
        f"The per-tensor kernel reaches {pct(pt4['ratio_to_baseline'])} of cuBLASLt with fast accumulation at 4096³: "
        f"{pt4['tflops']:.1f} TFLOPS against {fast4['tflops']:.1f}, at {mhz(pt4['sm_clock_mhz'])} against "
        f"{mhz(pt4['baseline_sm_clock_mhz'])}, {pct(paired_cycle_ratio(pt4))} in cycles; at 8192³ "
        f"{pct(pt8['ratio_to_baseline'])} ({pt8['tflops']:.1f} TFLOPS)",
        f"reports up to {mark:.0f} TFLOPS on an H800",
        f"its best square result is {ov8['tflops']:.1f} TFLOPS at 8192³",
        f"the fine-grained kernel reaches {pct(ov4['ratio_to_baseline'])} at 4096³ and {pct(ov8['ratio_to_baseline'])} "
        f"at 8192³; its best square result, {ov8['tflops']:.1f} TFLOPS, is well short of the up to {mark:.0f} TFLOPS",
        f"The per-tensor kernel reaches {pct(pt4['ratio_to_baseline'])} of cuBLASLt's per-tensor fast mode at 4096³",
    ])


def _best_fine(records, shape):
    return max((r for r in records if r["level"] == LEVEL_ID and fr._is(r, shape)
                and r["params"]["scaling"] == "blockwise"), key=lambda r: r["tflops"])


def test_small_m():
    decode = [s for s in fr.projection_shapes(R) if s[0] in (64, 128)]
    assert len(decode) == 6
    blockwise = {s: _best_fine(R, s)["ratio_to_baseline"] for s in decode}
    assert all(_best_fine(R, s)["baseline"] == "cublaslt_blockwise" for s in decode)
    passing = [s for s, v in blockwise.items() if v > 1 and pct(v) != "100.0%"]
    tied = [s for s, v in blockwise.items() if pct(v) == "100.0%"]
    assert passing == [(64, 2112, 7168)] and tied == [(64, 7168, 16384)]  # "passes it at ..., and ties it at ..."
    ratios = {s: fr.fastest_step(R, s)["tflops"] / fr.fastest_cublaslt(R, s)["tflops"] for s in decode}
    worst = min(ratios, key=ratios.get)
    assert worst == (64, 2112, 7168) and max(ratios.values()) < 1
    # "cuBLASLt's faster per-tensor mode": at every decode shape its fastest run is a per-tensor one
    assert all(fr.fastest_cublaslt(R, s)["baseline"] in ("cublaslt_fast", "cublaslt_promoted") for s in decode)
    b_bytes = 7168 * 16384  # one byte per e4m3 weight
    c_bytes = 64 * 7168 * 2  # bf16 C

    def split_gain(shape):
        one = next(r for r in R if r["level"] == LEVEL_ID and fr._is(r, shape) and fr.step_key(r["params"]) == "overlapped")
        many = next(r for r in R if r["level"] == LEVEL_ID and fr._is(r, shape) and fr.step_key(r["params"]) == "split")
        return one, many

    o1, m1 = split_gain((64, 2112, 7168))
    o2, m2 = split_gain((64, 7168, 16384))
    o3, m3 = split_gain((128, 7168, 16384))
    o4, m4 = split_gain((128, 2112, 7168))
    assert m1["params"]["splits"] == m4["params"]["splits"] == 4 and m2["params"]["splits"] == m3["params"]["splits"] == 2
    assert m4["tflops"] < o4["tflops"]
    n24 = fg.tiles(64, 24576, "blockwise")
    assert n24 > PROV["sm_count"] and fg.auto_splits(64, 24576, 1536) == fg.auto_splits(128, 24576, 1536) == 1
    assert not any(fr.step_key(r["params"]) == "split" for r in R if r["level"] == LEVEL_ID and r["N"] == 24576)
    pt = {bn: step((64, 2112, 7168), f"per_tensor_{bn}") for bn in (128, 256)}
    for shape in decode:  # "at the decode shapes with N = 2112 and 7168 its 128×128 tile beats its 128×256 one"
        if shape[1] in (2112, 7168):
            assert step(shape, "per_tensor_128")["tflops"] > step(shape, "per_tensor_256")["tflops"], shape
    dram = [r for r in fr.counters_rows() if (r["M"], r["N"], r["K"]) == (64, 7168, 16384)]
    reads = [r["dram_read_mb"] for r in dram]
    assert all(abs(r * 1e6 / b_bytes - 1) < 0.02 for r in reads)  # "B once"
    says([
        f"B is {b_bytes / 1e6:.1f} MB and C only {c_bytes / 1e6:.1f} MB",
        f"the fastest fine-grained step of this run reaches {pct(min(blockwise.values()))} to "
        f"{pct(max(blockwise.values()))} across the six shapes, and passes it at 64×2112×7168, and ties it at "
        "64×7168×16384 (100.0%)",
        f"the fastest step of any kind reaches {pct(min(ratios.values()))} to {pct(max(ratios.values()))}; the lowest is "
        f"64×2112×7168, where that mode reaches {fr.fastest_cublaslt(R, worst)['tflops']:.1f} TFLOPS",
        f"At 64×2112×7168 ({fg.tiles(64, 2112, 'blockwise')} tiles) four splits raise the fine-grained kernel from "
        f"{o1['tflops']:.1f} to {m1['tflops']:.1f} TFLOPS, {pct(m1['tflops'] / o1['tflops'] - 1)} more",
        f"at 64×7168×16384 ({fg.tiles(64, 7168, 'blockwise')} tiles) two splits add "
        f"{pct(m2['tflops'] / o2['tflops'] - 1)}, and at 128×7168×16384 {pct(m3['tflops'] / o3['tflops'] - 1)}",
        f"At 128×2112×7168 the same four splits cost {pct(1 - m4['tflops'] / o4['tflops'])} "
        f"({m4['tflops']:.1f} against {o4['tflops']:.1f} TFLOPS)",
        f"The shapes with N = 24576 have {n24} tiles, more than the {PROV['sm_count']} SMs",
        "at the decode shapes with N = 2112 and 7168 its 128×128 tile beats its 128×256 one",
        f"at 64×2112×7168, {pt[128]['tflops']:.1f} against {pt[256]['tflops']:.1f} TFLOPS",
        f"each reads {min(reads):.1f} to {max(reads):.1f} MB from DRAM, B once, while DRAM throughput stays between "
        f"{min(r['dram_pct'] for r in dram):.1f}% and {max(r['dram_pct'] for r in dram):.1f}% of its peak",
    ])


def _promotion(K, kind, kernel, bits=None):
    return next(r for r in ACCURACY["promotion"] if r["K"] == K and r["kind"] == kind and r["kernel"] == kernel
                and (bits is None or (r["fraction_bits"] == bits and r["promotion"] is False)))


def test_a_tile_for_few_rows():
    """The 64-row kernel's own recording: every decode shape, beside the 128-row kernel, paired with cuBLASLt."""
    run = fr.small_m_run()
    rows = [r for r in run["records"] if r["level"] == LEVEL_ID]
    assert all(r["passed"] and r["max_error_ratio"] <= 1 for r in rows)

    def get(shape, key):
        return next(r for r in rows if (r["M"], r["N"], r["K"]) == shape and fr.step_key(r["params"]) == key)

    shapes = sorted({(r["M"], r["N"], r["K"]) for r in rows})
    assert len(shapes) == 6 and all(m in (64, 128) for m, _, _ in shapes)
    gains = [get(s, "m64")["tflops"] / get(s, "overlapped")["tflops"] - 1 for s in shapes]
    assert min(gains) > 0  # "faster ... at every decode shape"
    best = {s: max((r for r in rows if (r["M"], r["N"], r["K"]) == s and fr.step_key(r["params"]).startswith("m64")),
                   key=lambda r: r["tflops"]) for s in shapes}
    ratios = {s: b["ratio_to_baseline"] for s, b in best.items()}
    assert all(b["baseline"] == "cublaslt_blockwise" for b in best.values())
    wins = sorted(s for s, v in ratios.items() if v > 1)
    assert len(wins) == 4 and {s[1] for s in wins} == {2112, 7168} and all(ratios[s] < 1 for s in shapes if s[1] == 24576)
    top_shape = max(ratios, key=ratios.get)
    top = best[top_shape]
    words = {2: "two", 3: "three", 4: "four"}
    C = {(fr.step_key(r["params"]), r["params"].get("splits")): r["metrics"] for r in fr.small_m_counters()
         if (r["M"], r["N"], r["K"]) == (64, 7168, 16384)}
    says([
        f"by {pct(min(gains))} to {pct(max(gains))}",
        f"its best reaches {pct(min(ratios.values()))} to {pct(max(ratios.values()))} of block-scaled cuBLASLt and "
        f"passes it at four of the six shapes, those with N = 2112 and 7168: at {'×'.join(map(str, top_shape))}, "
        f"{top['tflops']:.1f} TFLOPS with {words[top['params']['splits']]} splits, {ratios[top_shape]:.2f} times cuBLASLt",
        f"DRAM throughput rises from {C[('overlapped', 1)]['dram_pct']:.1f}% of its peak with the 128-row kernel to "
        f"{C[('m64', 1)]['dram_pct']:.1f}% with the 64-row one ({C[('m64_split', 2)]['dram_pct']:.1f}% with two splits)",
        f"falls from {C[('overlapped', 1)]['tensor_pipe_pct']:.1f}% to {C[('m64', 1)]['tensor_pipe_pct']:.1f}%",
        f"it passes block-scaled cuBLASLt at four of the six, up to {ratios[top_shape]:.2f} times",
    ])


def test_accuracy_what_promotion_buys():
    rows = ACCURACY["promotion"]
    Ks = sorted({r["K"] for r in rows})
    kinds = sorted({r["kind"] for r in rows})
    assert kinds == ["normal", "positive"] and {(r["M"], r["N"]) for r in rows} == {(256, 256)}
    floor_ratio = max(_promotion(K, k, "fp8_gemm_blockwise")["rel_fro"] / _promotion(K, k, "bf16_floor")["rel_fro"]
                      for K in Ks for k in kinds)
    bias = {K: _promotion(K, "positive", "fp8_gemm_per_tensor")["bias"] for K in Ks}
    assert all(bias[a] > bias[b] for a, b in zip(Ks, Ks[1:]))  # a growing share is lost
    top = Ks[-1]
    m13, m14 = (_promotion(top, "positive", "model", b)["bias"] for b in (13, 14))
    assert bias[top] < 5 * m13  # "predicts far less"
    normal_pt = _promotion(top, "normal", "fp8_gemm_per_tensor")
    normal_m13 = _promotion(top, "normal", "model", 13)
    normal_bias = max(abs(_promotion(K, "normal", "fp8_gemm_per_tensor")["bias"]) for K in Ks)
    floor = _promotion(top, "normal", "bf16_floor")
    says([
        f"at K from {Ks[0]} to {top} with M = N = 256",
        f"its relative error is at most {floor_ratio:.2f} times the floor's",
        f"the bias, is {pct(bias[512])} at K = 512, {pct(bias[4096])} at K = 4096 and {pct(bias[top])} at K = {top}",
        f"predicts far less: {pct(m13)} and {pct(m14)} at K = {top}",
        f"predicting a relative error of {normal_m13['rel_fro']:.1e} at K = {top} with 13 bits where the kernel shows "
        f"{normal_pt['rel_fro']:.1e}",
        f"keeps its bias within {pct(normal_bias, 2)} at every K, and its relative error at K = {top} is "
        f"{normal_pt['rel_fro'] / floor['rel_fro']:.1f} times the floor",
        f"all-positive sums lose {pct(-bias[top])} at K = {top}",
    ])
    assert "keeps only" not in EN  # the hardware's adder is reported by others, not stated as fact


def _outlier(magnitude, scaling):
    return next(r for r in ACCURACY["outliers"] if r["magnitude"] == magnitude and r["scaling"] == scaling)


def test_outlier_channels():
    from gemm_course.fp8.accuracy import quantize_dequantize

    rows = ACCURACY["outliers"]
    M, N, K, c, seed = (rows[0][k] for k in ("M", "N", "K", "outlier_channels", "seed"))
    base = _outlier(1, "per_tensor")
    pt3, pt4, pt5 = (_outlier(m, "per_tensor") for m in (1e3, 1e4, 1e5))
    rw5, fg5 = _outlier(1e5, "row_wise"), _outlier(1e5, "fine_grained")
    assert f"{pt3['rest_rel_fro']:.1%}" == f"{base['rest_rel_fro']:.1%}"  # "survives up to 10³"
    # which strips hold the outliers: the study's own random draws (fp8_accuracy.outlier_study, seed 0)
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K))
    rng.standard_normal((N, K))
    channels = np.sort(rng.choice(K, c, replace=False))
    strips = sorted({int(ch) // fp8.SCALE_BLOCK for ch in channels})
    in_strip = np.zeros(K, bool)
    for s in strips:
        in_strip[s * fp8.SCALE_BLOCK:(s + 1) * fp8.SCALE_BLOCK] = True
    A[:, channels] *= 1e5
    _, bits = quantize_dequantize(A, "fine_grained", "A")
    flushed = ((bits & 0x7F) == 0) & (A != 0)
    assert not flushed[:, ~in_strip].any()  # "and none elsewhere"
    assert flushed.mean() == pytest.approx(fg5["a_underflow_fraction"])
    says([
        f"quantises a {M}×{K} A and a {N}×{K} B, with {c} outlier channels",
        f"the ordinary part's error stays at {pct(base['rest_rel_fro'])}",
        f"e4m3's normal numbers alone span a factor of {fp8.E4M3_MAX / fp8.E4M3_MIN_NORMAL:.0f}",
        f"{pct(pt3['a_subnormal_fraction'])} of A's entries become subnormals and {pct(pt3['a_underflow_fraction'])} zero",
        f"At 10⁴, {pct(pt4['a_subnormal_fraction'])} are subnormals and {pct(pt4['a_underflow_fraction'])} zero, and the "
        f"error grows to {pct(pt4['rest_rel_fro'])}",
        f"at 10⁵, {pct(pt5['a_underflow_fraction'])} of A is flushed to zero and the error is {pct(pt5['rest_rel_fro'])}",
        f"At 10⁵ it flushes {pct(rw5['a_underflow_fraction'])} of A to zero and the error is {pct(rw5['rest_rel_fro'])}",
        f"the {c} channels lie in {len(strips)} of the {K // fp8.SCALE_BLOCK} strips of each row, {pct(in_strip.mean(), 0)} of A",
        f"At 10⁵, {pct(flushed[:, in_strip].mean())} of the entries in those strips are flushed to zero and none "
        f"elsewhere, {pct(fg5['a_underflow_fraction'])} of A in all, and the error is {pct(fg5['rest_rel_fro'])}, "
        f"twice the {pct(base['rest_rel_fro'])} without outliers",
    ])
    assert round(fg5["rest_rel_fro"] / base["rest_rel_fro"]) == 2  # "twice"
    assert pt5["rel_fro"] < 0.05  # the whole product hides the damage


# --- figures ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [fr.steps_figure, fr.projection_figure, fr.number_line_figure,
                                   lambda: fr.promotion_figure("bias"), fr.outlier_figure,
                                   lambda: fr.outlier_figure(("a_underflow_fraction", "a_subnormal_fraction"))])
def test_figures_lay_out_at_phone_width(build):
    from test_figure_layout import _check

    fig = build()
    _check(fig)
    texts = [fig.layout.title.text or "", fig.layout.title.subtitle.text or ""] + [t.name or "" for t in fig.data]
    assert all(t.replace("<br>", " ").count(" · ") <= 1 for t in texts)  # the language switch splits once


def test_steps_figure_bars_and_clocks():
    fig = fr.steps_figure()
    by_size = {t.name: t for t in fig.data}
    assert set(by_size) == {"4096³", "8192³"}
    for n in (4096, 8192):
        bars = fr.square_rows(R, n)
        assert len(bars) == 9 and list(by_size[f"{n}³"].y) == [r["tflops"] for r in bars]
        assert all(f"{r['sm_clock_mhz']:.0f} MHz" in t for r, t in zip(bars, by_size[f"{n}³"].text))


def test_live_without_hopper_says_so(monkeypatch, capsys):
    monkeypatch.setattr(fr, "_hopper", lambda: False)
    assert fr.live() == []
    out = capsys.readouterr().out
    assert "recorded H200 run" in out and " · " in out and out.count("\n") == 1


def test_decode_shapes_sentence_matches_the_tuning_sweep():
    """'at every decode shape its fastest fine-grained setting is the 64-row kernel, and it passes cuBLASLt at the
    same four shapes, those with N = 2112 and 7168' — from the tuner's sweep of Level 13."""
    from gemm_course.levels import DECODE_SHAPES
    from gemm_course.measure import autotune

    passed = set()
    for shape in DECODE_SHAPES:
        best = autotune.recorded_best("13_fp8_blockscaled", shape, scaling="blockwise")
        assert best["params"].get("block_m") == 64
        if best["ratio_to_baseline"] >= 1:
            passed.add(shape)
    assert passed == {s for s in DECODE_SHAPES if s[1] in (2112, 7168)}
    prose = _prose("en")
    assert "its fastest fine-grained setting is the 64-row kernel, and it passes cuBLASLt at the same four shapes, " \
           "those with N = 2112 and 7168" in prose
    # the chapter's own recording passes it at the same four ("passes it at four of the six shapes, those with N = 2112 and 7168")
    assert "passes it at four of the six shapes, those with N = 2112 and 7168" in prose


def test_scales_staged_by_the_producer():
    """The staged-scales section: the slot and the ring depths from fp8_gemm, the pairs from their own recording
    (each kernel without and with staged scales, cuBLASLt right before each), the counters at 4096³ and at
    64×7168×16384 from clocks/h200_13_staged_counters.json."""
    run = fr.staged_run()
    assert run["file"] == "h200_13_staged_scales.json" and "--staged" in run["provenance"]["command"]
    rows = [r for r in run["records"] if r["level"] == LEVEL_ID]
    assert all(r["passed"] and r["max_error_ratio"] <= 1 for r in rows)
    assert all(r["baseline"] == "cublaslt_blockwise" and r["reps"] >= 50 for r in rows)
    slot = {bm: fg.stage_bytes("blockwise", block_m=bm, staged_scales=True) - fg.stage_bytes("blockwise", block_m=bm)
            for bm in (128, 64)}
    deepest = lambda bm, staged: max(fg.stage_choices("blockwise", block_m=bm, staged_scales=staged))  # noqa: E731
    assert deepest(64, True) == deepest(64, False) == 9
    pairs = fr.staged_pairs(run["records"])
    assert all(p["unstaged"]["params"]["stages"] == deepest(p["block_m"], False)
               and p["staged"]["params"]["stages"] == deepest(p["block_m"], True) for p in pairs)
    square = [p for p in pairs if p["shape"][0] == p["shape"][1]]
    decode = {p["shape"]: p for p in pairs if p["block_m"] == 64 and p["shape"][0] != p["shape"][1]}
    assert len(square) == 4 and len(decode) == 6 and all(p["gain"] < 0 for p in square)
    tied = (64, 7168, 16384)
    gains = [p["gain"] for s, p in decode.items() if s != tied]
    assert min(gains) > 0.03 and abs(decode[tied]["gain"]) < 0.005
    best = {s: max((r for r in rows if fr._is(r, s) and r["params"].get("block_m") == 64), key=lambda r: r["tflops"])
            for s in decode}
    assert all(b["params"].get("staged_scales") for s, b in best.items() if s != tied)
    ratio = {s: b["ratio_to_baseline"] for s, b in best.items()}
    wins = [v for s, v in ratio.items() if v > 1]
    assert sorted(s for s, v in ratio.items() if v > 1) == sorted(s for s in decode if s[1] in (2112, 7168))
    m64sq = {p["shape"][0]: p for p in square if p["block_m"] == 64}
    # the tuning page: staged scales with 128-row tiles lose at the squares, never beat the 64-row kernel
    for s in decode:
        m128_staged = next(r for r in rows if fr._is(r, s) and r["params"].get("block_m") is None
                           and r["params"].get("staged_scales"))
        assert m128_staged["tflops"] < max(r["tflops"] for r in rows if fr._is(r, s) and r["params"].get("block_m") == 64)
    assert all(p["gain"] < 0 for p in square if p["block_m"] == 128)

    data = fr.staged_counters()
    assert data["provenance"]["ncu"] and data["provenance"]["clock_control"] == "none"
    C = {((r["M"], r["N"], r["K"]), "lt" if r["kind"] == "cublaslt_blockwise" else fr.step_key(r["step"])): r["metrics"]
         for r in data["rows"]}
    sq, dec = (4096,) * 3, (64, 7168, 16384)
    before, after, lt = C[sq, "overlapped"], C[sq, "overlapped_staged"], C[sq, "lt"]
    assert before["global_load_instructions"] == 3 * (4096 // 128) ** 2 * (4096 // 128) * 8 and after["global_load_instructions"] == 0
    d0, d1, dlt = C[dec, "m64_split"], C[dec, "m64_split_staged"], C[dec, "lt"]
    units, k_blocks, consumer_warps = 7168 // 128 * 2, 16384 // 128 // 2, 8
    assert d0["global_load_instructions"] - d1["global_load_instructions"] == 3 * units * k_blocks * consumer_warps
    k = lambda m: f"{m['cycles_elapsed_avg'] / 1e3:.1f}"  # noqa: E731
    from gemm_course.measure import results
    promo = results.load(results.CLOCKS_DIR / "h200_13_promotion_counters.json")["promotion_counters"]
    assert next(r for r in promo if r["kind"] == "fp8" and r["step"]["scaling"] == "per_tensor")["metrics"]["stall_lg_throttle"] == 0
    st = lambda m, s: f"{m['stall_' + s]:.2f}"  # noqa: E731
    says([
        f"three loads from global memory, {before['global_load_instructions'] / 1e3:.1f} thousand load instructions at 4096³",
        f"The slot takes {slot[128]} bytes per stage with 128-row tiles ({slot[64]} with 64 rows), and with 128 rows that "
        f"costs a stage: {deepest(128, True)} fit in 227 KB instead of {deepest(128, False)}. The 64-row kernel keeps its {deepest(64, True)}.",
        f"At five of the six decode shapes the 64-row kernel gains {pct(min(gains))} to {pct(max(gains))} in time; at "
        f"64×7168×16384 the two differ by {pct(abs(decode[tied]['gain']))}",
        f"now reaching {pct(min(wins))} to {pct(max(wins))} of it, comes to {pct(ratio[(64, 24576, 1536)])} at "
        f"64×24576×1536, and stays at {pct(ratio[(128, 24576, 1536)])} at 128×24576×1536",
        f"At the squares staging loses, {pct(-max(p['gain'] for p in square))} to {pct(-min(p['gain'] for p in square))} "
        "of the time across both kernels at 4096³ and 8192³",
        f"it still loses {pct(-m64sq[4096]['gain'])} at 4096³ and {pct(-m64sq[8192]['gain'])} at 8192³",
        f"the consumers' global loads are gone ({before['global_load_instructions'] / 1e3:.1f} thousand → 0)",
        f"`long_scoreboard` falls from {st(before, 'long_scoreboard')} to {st(after, 'long_scoreboard')} warps per issued instruction",
        f"the kernel takes {after['cycles_elapsed_avg'] / before['cycles_elapsed_avg'] - 1:.1%} more cycles ({k(after)} against "
        f"{k(before)} thousand; cuBLASLt {k(lt)} thousand), and the Tensor Cores' busy share falls from "
        f"{before['tensor_pipe_pct']:.1f}% to {after['tensor_pipe_pct']:.1f}%",
        f"What grows is `mio_throttle`, from {before['stall_mio_throttle']:.0f} to {st(after, 'mio_throttle')}, and "
        f"`short_scoreboard`, from {st(before, 'short_scoreboard')} to {st(after, 'short_scoreboard')}",
        f"`dispatch_stall` grows from {st(before, 'dispatch_stall')} to {st(after, 'dispatch_stall')}",
        f"`lg_throttle` {st(after, 'lg_throttle')} against {st(before, 'lg_throttle')}",
        f"staging cuts the global loads from {d0['global_load_instructions'] / 1e3:.1f} to "
        f"{d1['global_load_instructions'] / 1e3:.1f} thousand",
        f"`long_scoreboard` falls from {st(d0, 'long_scoreboard')} to {st(d1, 'long_scoreboard')}, and the kernel takes "
        f"{1 - d1['cycles_elapsed_avg'] / d0['cycles_elapsed_avg']:.1%} fewer cycles ({k(d1)} against {k(d0)} thousand; "
        f"cuBLASLt {k(dlt)} thousand)",
        f"gains up to {pct(max(gains))} more at the decode shapes and costs {pct(-max(p['gain'] for p in square))} to "
        f"{pct(-min(p['gain'] for p in square))} at the squares",
    ])
    # the MIO, long-scoreboard and lane counts the prose explains with
    assert after["stall_mio_throttle"] > before["stall_mio_throttle"] == 0
    assert fg.BM // 32 == 4


def test_staged_figure_and_table():
    fig = fr.staged_figure()
    assert [t.name for t in fig.data] == ["128-row tile · 128 行分块", "64-row tile · 64 行分块"]
    assert len(fig.data[0].x) == 8
    assert "23 rows" in fr.staged_table().text()


def test_split_k_where_tiles_outnumber_the_sms():
    """'every split loses there': the recording with explicit split counts at the two N = 24576 shapes."""
    from gemm_course.measure import results

    data = results.load(results.RESULTS_DIR / "h200_13_staged_splits.json")
    assert "--splits 1,2,3,4" in data["provenance"]["command"]
    rows = [r for r in data["records"] if r["level"] == LEVEL_ID]
    assert all(r["passed"] for r in rows)
    shapes = {(r["M"], r["N"], r["K"]) for r in rows}
    assert shapes == {(64, 24576, 1536), (128, 24576, 1536)}
    assert all(fg.tiles(M, N, "blockwise", block_m=64) > 132 and fg.auto_splits(M, N, K, block_m=64) == 1
               for M, N, K in shapes)
    key = lambda r: json.dumps({k: v for k, v in r["params"].items() if k not in ("splits", "stages")},  # noqa: E731
                               sort_keys=True)
    for r in rows:
        if r["params"]["splits"] > 1:
            one = next(o for o in rows if (o["M"], o["N"]) == (r["M"], r["N"]) and o["params"]["splits"] == 1
                       and key(o) == key(r))
            assert r["tflops"] < one["tflops"]
    pick = lambda M, splits: next(r for r in rows if r["M"] == M and r["params"].get("block_m") == 64  # noqa: E731
                                  and r["params"].get("staged_scales") and r["params"]["splits"] == splits)
    assert fg.BK == 128 and 1536 // fg.BK == 12
    says([f"the staged 64-row kernel falls from {pick(64, 1)['tflops']:.1f} to {pick(64, 2)['tflops']:.1f} TFLOPS at "
          f"64×24576×1536 with two splits, and from {pick(128, 1)['tflops']:.1f} to {pick(128, 2)['tflops']:.1f} at "
          "128×24576×1536",
          "With K = 1536 a tile has only 12 k-blocks"])


def test_scales_by_tma_numbers_come_from_the_h100_record():
    """The TMA-staged scales section: every ratio and TFLOPS figure from results/h100_13_tma_scales.json (one run on
    an H100, each setting beside the best recorded one in the same run), and no claim that cp.async staging is
    DeepGEMM's way (DeepGEMM brings A's scales by one TMA copy per stage from an M-major copy)."""
    data = json.loads((ROOT / "gemm_course" / "results" / "h100_13_tma_scales.json").read_text(encoding="utf-8"))
    assert "H100" in data["provenance"]["gpu"]
    best, tma, staged = {}, {}, {}
    for r in data["scale_records"]:
        if r["level"] != LEVEL_ID:
            continue
        shape, origin, way = (r["M"], r["N"], r["K"]), r["setting_from"] or "", r["params"].get("staged_scales")
        if origin.startswith(("tuner", "chapter")):
            best[shape] = r["tflops"]
        elif way == "tma":
            tma[shape] = r["tflops"]
        elif way is True:
            staged[shape] = r["tflops"]
    squares = [s for s in tma if s[0] >= 4096]
    decode = [s for s in tma if s[0] < 4096]
    assert len(squares) == 5 and len(decode) == 6

    def span(values: list[float]) -> str:
        return f"{min(values):.2f} to {max(values):.2f}"

    sq, dec = span([tma[s] / best[s] for s in squares]), span([tma[s] / best[s] for s in decode])
    vs_staged = span([tma[s] / staged[s] for s in squares if s in staged])
    q4, q8 = (4096, 4096, 4096), (8192, 8192, 8192)
    says([f"it is {sq} times as fast", f"{tma[q4]:.1f} TFLOPS against {best[q4]:.1f} at 4096³",
          f"{tma[q8]:.1f} against {best[q8]:.1f} at 8192³", f"{vs_staged} times the kernel staged by small copies",
          f"it matches the best, {dec} times", f"({tma[q4] / best[q4]:.2f} times at 4096³ in a run on an H100)"])
    for number in (f"{tma[q4]:.1f}", f"{best[q4]:.1f}", f"{tma[q8]:.1f}", f"{best[q8]:.1f}", *sq.split(" to "),
                   *dec.split(" to "), *vs_staged.split(" to ")):
        assert number in ZH, f"the Chinese prose lacks {number}"
    assert "as DeepGEMM does" not in EN and "DeepGEMM 就是这样做的" not in ZH
    assert "DeepGEMM's way, gains" not in EN and "（DeepGEMM 的做法）" not in ZH


def test_narrow_tiles_numbers_come_from_the_h100_record():
    """The narrow-tiles section: every TFLOPS figure and ratio from results/h100_13_narrow_tiles.json (one run on an
    H100: each narrow width, both ways to the scales, beside the best recorded setting, DeepGEMM and cuBLASLt), the
    tile counts from fp8.gemm, and the L2 bytes of A stated as counted, not measured."""
    data = json.loads((ROOT / "gemm_course" / "results" / "h100_13_narrow_tiles.json").read_text(encoding="utf-8"))
    assert "H100" in data["provenance"]["gpu"] and data["checks"] and all(c["passed"] for c in data["checks"])
    assert "--narrow-tiles --peer deepgemm" in data["provenance"]["command"]
    assert all(r["passed"] for r in data["narrow_records"])
    assert fr._recorded_file("narrow_records")["file"] == "h100_13_narrow_tiles.json"
    chosen = {r["shape"]: r for r in fr.narrow_rows()}  # the chapter's table: best, fastest narrow tile, DeepGEMM

    def parts(shape):
        narrow = [r for r in data["narrow_records"] if (r["M"], r["N"], r["K"]) == shape and r["level"] == LEVEL_ID
                  and r["params"].get("block_n", 128) < 128]
        row = chosen[shape]
        return row["best"], row["narrow"], row["deepgemm"], narrow

    def ratio(x, y) -> str:
        return f"{x['tflops'] / y['tflops']:.2f}"

    def setting(r):
        return r["params"]["block_n"], r["params"]["splits"], r["params"].get("staged_scales")

    a, b = parts((64, 2112, 7168)), parts((128, 2112, 7168))
    c, e = parts((64, 24576, 1536)), parts((64, 7168, 16384))
    f, h = parts((128, 24576, 1536)), parts((128, 7168, 16384))
    assert setting(a[1]) == (32, 2, "tma") and setting(b[1]) == (64, 2, "tma")
    assert setting(c[1])[:2] == setting(e[1])[:2] == (64, 1)
    assert f[1]["tflops"] < f[0]["tflops"] and h[1]["tflops"] < h[0]["tflops"]
    assert a[0]["params"]["splits"] == 4 and fg.tiles(64, 2112, "blockwise") == 17
    assert fg.tiles(64, 2112, "blockwise", 16, 64) == 132 and 17 * 4 == 68
    sixteen = {r["params"].get("staged_scales"): r for r in a[3] if r["params"]["block_n"] == 16 and r["params"]["splits"] == 1}
    assert max(a[3], key=lambda r: r["tflops"])["params"]["block_n"] != 16
    assert round(132 * 64 * 7168 / 1e6) == 61 and f"{17 * 64 * 7168 / 1e6:.1f}" == "7.8"
    assert abs(e[1]["tflops"] / e[2]["tflops"] - 1) < 0.01  # "level with it"
    en = [f"64×32 tiles with 2 splits and the scales by TMA reach {a[1]['tflops']:.1f} TFLOPS against "
          f"{a[0]['tflops']:.1f} ({ratio(a[1], a[0])} times); DeepGEMM reaches {a[2]['tflops']:.1f} in this run, so the "
          f"level now runs at {ratio(a[1], a[2])} of it ({ratio(a[0], a[2])} before)",
          f"64×64 tiles with 2 splits and the scales by TMA, {b[1]['tflops']:.1f} against {b[0]['tflops']:.1f} "
          f"({ratio(b[1], b[0])} times); {ratio(b[1], b[2])} of DeepGEMM's {b[2]['tflops']:.1f}",
          f"{ratio(c[1], c[0])} and {ratio(e[1], e[0])} times the best; {ratio(c[1], c[2])} of DeepGEMM at the first, "
          f"and level with it at the second ({e[1]['tflops']:.1f} against {e[2]['tflops']:.1f} TFLOPS)",
          f"narrow tiles lose ({ratio(f[1], f[0])} and {ratio(h[1], h[0])} times the best)",
          f"64×16 tiles without a split reach {sixteen['tma']['tflops']:.1f} TFLOPS with them and "
          f"{sixteen[True]['tflops']:.1f} with the small copies",
          f"DeepGEMM is still {ratio(a[2], a[1])} and {ratio(b[2], b[1])} times as fast",
          "about 60 MB, against 7.8 MB with 17 tiles of 128: counted from the tile sizes, not measured"]
    says(en)
    for number in re.findall(r"\d+\.\d+", " ".join(en)):
        assert number in ZH, f"the Chinese prose lacks {number}"
    assert "这是按分块大小算出的，不是实测" in ZH


def test_against_deepgemm_numbers_come_from_the_peer_record():
    """The "Against DeepGEMM" section: the spans and the squares' ratios from results/h100_13_deepgemm.json
    (fp8.deepgemm.peer_table), and the table that shows them is the chapter's."""
    from gemm_course.fp8.deepgemm import peer_table

    data = json.loads((ROOT / "gemm_course" / "results" / "h100_13_deepgemm.json").read_text(encoding="utf-8"))
    assert "H100" in data["provenance"]["gpu"] and all(r["passed"] for r in data["peer_records"])
    rows = peer_table(data["peer_records"])
    assert rows == fr.deepgemm_rows()
    ours = [r["level13_over_deepgemm"] for r in rows]
    theirs = [r["deepgemm_over_cublaslt"] for r in rows]
    square = {r["M"]: r["level13_over_deepgemm"] for r in rows if r["M"] == r["N"] == r["K"]}
    most = max(rows, key=lambda r: r["deepgemm_over_cublaslt"])
    assert most["N"] == 2112 and sorted(theirs)[-2] == max(r["deepgemm_over_cublaslt"] for r in rows
                                                               if r["N"] == 2112 and r is not most)
    claims = [f"is the faster kernel at every one of the {len(rows)} shapes",
              f"reaches {min(ours):.2f} to {max(ours):.2f} of its speed, {square[4096]:.2f} at 4096³ and "
              f"{square[8192]:.2f} at 8192³, and less than 0.80 at {sum(x < 0.8 for x in ours)} shapes",
              f"runs at {min(theirs):.2f} to {max(theirs):.2f} times the speed of block-scaled cuBLASLt"]
    assert max(ours) < 1
    says(claims)
    for number in (f"{min(ours):.2f}", f"{max(ours):.2f}", f"{square[4096]:.2f}", f"{square[8192]:.2f}",
                   f"{min(theirs):.2f}", f"{max(theirs):.2f}"):
        assert number in ZH, f"the Chinese prose lacks {number}"


def test_a_deeper_ring_does_not_help_the_narrowest_tile():
    """The sentence on ring depth: the 64×16 tile without a split, scales by TMA, at 10 stages and at the deepest
    ring that fits, from results/h100_13_narrow_depths.json (`fp8 --record --narrow-tiles --sizes ...`, no peer)."""
    data = json.loads((ROOT / "gemm_course" / "results" / "h100_13_narrow_depths.json").read_text(encoding="utf-8"))
    assert "H100" in data["provenance"]["gpu"] and all(c["passed"] for c in data["checks"])
    assert "--narrow-tiles --sizes" in data["provenance"]["command"] and "--peer" not in data["provenance"]["command"]
    rows = {r["params"]["stages"]: r for r in data["narrow_records"]
            if (r["M"], r["N"], r["K"]) == (64, 2112, 7168) and r["params"].get("block_n") == 16
            and r["params"].get("staged_scales") == "tma" and r["params"]["splits"] == 1}
    deepest = fg.stage_choices("blockwise", 16, 64, staged_scales="tma")[-1]
    assert set(rows) == {10, deepest} and deepest == 21
    assert round(fg.stage_bytes("blockwise", 16, 64, staged_scales="tma") / 1024) == 10
    says([f"it reaches {rows[10]['tflops']:.1f} TFLOPS with 10 stages and {rows[deepest]['tflops']:.1f} with "
          f"{deepest}, the most its 10 KB stages fit in shared memory"])
    assert abs(rows[deepest]["tflops"] / rows[10]["tflops"] - 1) < 0.03
    for number in (f"{rows[10]['tflops']:.1f}", f"{rows[deepest]['tflops']:.1f}", f"用 {deepest} 个流水级"):
        assert number in ZH, number


def test_the_tuning_page_names_deepgemm_with_the_recorded_ratios():
    """The tuning page's Level 13 bullet against DeepGEMM: the span over the peer run's shapes and the two N = 2112
    shapes with narrow tiles, from the same recorded files as the chapter (fp8.report)."""
    rows, narrow = fr.deepgemm_rows(), {r["shape"]: r for r in fr.narrow_rows()}
    ours = [r["level13_over_deepgemm"] for r in rows]
    fast = [narrow[s]["narrow"]["tflops"] / narrow[s]["deepgemm"]["tflops"] for s in ((64, 2112, 7168), (128, 2112, 7168))]
    text = (ROOT / "book" / "tuning.md").read_text(encoding="utf-8")
    en = (f"reaches {min(ours):.2f} to {max(ours):.2f} of DeepGEMM's speed over the {len(rows)} shapes of "
          f"`fp8 --record`")
    zh = f"上达到 DeepGEMM 速度的 {min(ours):.2f} 到 {max(ours):.2f}"
    assert en in text and zh in text
    assert f"with 2112 columns to {fast[0]:.2f} and {fast[1]:.2f} of it" in text
    assert f"提高到它的 {fast[0]:.2f} 和 {fast[1]:.2f}" in text
