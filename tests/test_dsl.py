"""Level 14 (gemm_course.dsl) without a GPU: the package without triton, every GPU kernel compiled for sm_80/sm_90,
the tiled Triton kernel run by Triton's interpreter on odd shapes, the record reader, the command line's errors.

Tests that need triton skip with the reason when it is missing (pip install -e .[triton]).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


# --- without triton ------------------------------------------------------------------------------------------

def test_the_package_imports_without_triton_and_says_what_to_install() -> None:
    """`import gemm_course` imports no triton; with triton unimportable, the dsl command is one line naming the
    install, in the chosen language, and the record reader (no triton) still imports."""
    script = textwrap.dedent("""
        import sys
        sys.modules["triton"] = None  # as if it were not installed
        import gemm_course, gemm_course.dsl, gemm_course.dsl.record, gemm_course.dsl.tensors
        assert "triton" not in [m for m in sys.modules if sys.modules[m] is not None], "triton imported"
        assert not gemm_course.dsl.tensors.triton_available()
        from gemm_course.__main__ import main
        for argv in (["--en", "dsl"], ["--zh", "dsl"]):
            try:
                main(argv)
            except SystemExit as done:
                print(done.code)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    en, zh = done.stdout.strip().splitlines()
    assert en.startswith("python -m gemm_course dsl: Level 14's CPU path needs triton")
    assert "pip install triton==3.6.0" in en
    assert "需要 triton" in zh and "pip install triton==3.6.0" in zh and "needs" not in zh


def test_command_line_refuses_flags_without_record() -> None:
    from gemm_course.__main__ import main

    for argv, en_part in ((["--en", "dsl", "--check-only"], "--check-only goes with --record"),
                          (["--en", "dsl", "--sizes", "4096"], "--sizes goes with --record"),
                          (["--en", "dsl", "--record"], "give --out FILE"),
                          (["--en", "dsl", "--record", "--out", "x.json", "--check-only", "--sizes", "64"],
                           "--check-only times nothing"),
                          (["--en", "dsl", "--counters"], "give --out FILE: the counters file"),
                          (["--en", "dsl", "--counters", "--record", "--out", "x.json"], "leave out --record"),
                          (["--en", "dsl", "--counters", "--sizes", "64", "--out", "x.json"], "leave out --record")):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert str(done.value.code).startswith("python -m gemm_course dsl: ") and en_part in str(done.value.code)
        assert "\n" not in str(done.value.code)
    with pytest.raises(SystemExit) as done:
        main(["--zh", "dsl", "--check-only"])
    assert "须与 --record 一起用" in str(done.value.code) and "goes with" not in str(done.value.code)


# --- the record reader (no triton, no GPU): a synthetic record made here, never committed ----------------------

def _synthetic_record(path: Path) -> None:
    """A file in the shape record_dsl writes, with made-up numbers that only this test reads."""
    base = {"dtype": "bfloat16", "M": 256, "N": 512, "K": 128}
    data = {"schema": 1, "records": [],
            "provenance": {"gpu": "synthetic GPU", "date": "2000-01-02T03:04:05+00:00", "method": "test"},
            "dsl_checks": [{"kernel": "gluon", "setting": {"stages": 3}, "dtype": "bfloat16", "M": 1, "N": 8, "K": 8,
                            "relative_error": 1e-3, "tolerance": 4e-3, "unwritten": 0, "passed": True},
                           {"kernel": "triton_hopper", "setting": {}, "dtype": "bfloat16", "passed": False,
                            "error": "CompilationError: out of resources"}],
            "dsl_records": [
                {**base, "kernel": "cublas", "setting": {}, "c_type": "bfloat16", "median_ms": 2.0, "tflops": 10.0,
                 "ratio_to_cublas": 1.0, "sm_clock_mhz": 1500.0},
                {**base, "kernel": "gluon", "setting": {"stages": 3}, "c_type": "bfloat16", "median_ms": 4.0,
                 "tflops": 5.0, "ratio_to_cublas": 0.5, "sm_clock_mhz": 1400.0, "cublas_paired_ms": 2.0},
                {**base, "kernel": "triton_hopper", "setting": {}, "c_type": "float32",
                 "skipped": "failed its checks (see dsl_checks)"},
                {**base, "kernel": "triton_tiled", "setting": {"BM": 128}, "c_type": "float32",
                 "error": "wrong result: relative error nan > 1.00e-03; not timed"}]}
    path.write_text(json.dumps(data), encoding="utf-8")


def test_read_record_gives_one_row_per_kernel_and_shape(tmp_path: Path) -> None:
    from gemm_course.dsl.record import read_checks, read_record, table

    path = tmp_path / "synthetic.json"
    _synthetic_record(path)
    rows = read_record(path)
    assert [(r["kernel"], r["status"]) for r in rows] == [("cublas", "timed"), ("gluon", "timed"),
                                                          ("triton_hopper", "skipped"), ("triton_tiled", "failed")]
    gluon = rows[1]
    assert (gluon["ms"], gluon["tflops"], gluon["ratio_to_cublas"], gluon["sm_clock_mhz"]) == (4.0, 5.0, 0.5, 1400.0)
    assert (gluon["M"], gluon["N"], gluon["K"], gluon["c_type"], gluon["setting"]) == (256, 512, 128, "bfloat16",
                                                                                          {"stages": 3})
    assert (gluon["gpu"], gluon["date"], gluon["file"]) == ("synthetic GPU", "2000-01-02", "synthetic.json")
    assert rows[2]["why"].startswith("failed its checks") and rows[2]["ms"] is None
    assert rows[3]["why"].startswith("wrong result") and rows[3]["tflops"] is None
    assert [c["passed"] for c in read_checks(path)] == [True, False]
    lines = table(json.loads(path.read_text(encoding="utf-8")))
    assert any("gluon" in line and "50.0%" in line and "1400" in line for line in lines)
    assert lines[-1].startswith("checks: 2 run, 1 failed") and "out of resources" in lines[-1]


def test_read_record_refuses_another_file(tmp_path: Path) -> None:
    from gemm_course.dsl.record import read_record

    path = tmp_path / "ladder.json"
    path.write_text(json.dumps({"schema": 1, "provenance": {}, "records": []}), encoding="utf-8")
    with pytest.raises(ValueError, match="is not a Level 14 record"):
        read_record(path)


# --- with triton ---------------------------------------------------------------------------------------------

def test_numpy_adapter_is_what_triton_reads() -> None:
    pytest.importorskip("triton", reason="Level 14 needs triton: pip install -e .[triton]")
    from triton.runtime.jit import mangle_type

    from gemm_course.dsl.tensors import NumpyTensor, as_triton_tensor
    from gemm_course.run.dtypes import to_bfloat16

    X = np.zeros((3, 5), np.float32)
    assert mangle_type(as_triton_tensor(X)) == "*fp32"
    assert mangle_type(as_triton_tensor(to_bfloat16(X))) == "*bf16"  # uint16 bit patterns are the course's bf16
    t = NumpyTensor(X, "float32")
    assert t.stride() == (5, 1) and t.data_ptr() == X.ctypes.data
    host = t.new_empty(0, device="cpu").set_(t.untyped_storage().cpu(), 0, t.size(), t.stride())
    assert host.data_ptr() == X.ctypes.data  # the interpreter's "host copy" is the caller's array itself
    with pytest.raises(ValueError, match="row-major"):
        NumpyTensor(X.T, "float32")


def test_tiled_kernel_in_the_interpreter_on_odd_shapes() -> None:
    """Random inputs, C poisoned with NaN, float64 reference, the course's fp32 bound: 1×1×1, partial tiles in M, N
    and K, and a last group of tile rows shorter than group_m (16×16×16 tiles, group_m=2)."""
    pytest.importorskip("triton", reason="Level 14 needs triton: pip install -e .[triton]")
    from gemm_course.dsl.interpreter import CHECK_SHAPES, check_tiled

    rows = check_tiled(CHECK_SHAPES)
    assert [(r["M"], r["N"], r["K"]) for r in rows] == list(CHECK_SHAPES) == [(1, 1, 1), (33, 17, 65), (70, 40, 100)]
    for r in rows:
        assert r["unwritten"] == 0 and r["relative_error"] <= r["tolerance"] and r["passed"], r


def test_interpreter_refuses_bfloat16_and_large_shapes() -> None:
    pytest.importorskip("triton", reason="Level 14 needs triton: pip install -e .[triton]")
    from gemm_course.dsl.interpreter import run_tiled
    from gemm_course.run.dtypes import to_bfloat16

    A = to_bfloat16(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match="float32 only"):
        run_tiled(A, A)
    with pytest.raises(ValueError, match="too large for Triton's interpreter"):
        run_tiled(np.ones((200, 200), np.float32), np.ones((200, 200), np.float32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tiled_float32_compiles_to_ieee_fmas(arch: str) -> None:
    """input_precision="ieee": fp32 FMAs on the CUDA cores, no TF32 Tensor Core instruction, like Levels 1–8."""
    pytest.importorskip("triton", reason="Level 14 needs triton: pip install -e .[triton]")
    from gemm_course.dsl.compile import compile_kernel
    from gemm_course.dsl.record import TILED_SETTINGS

    report = compile_kernel("tiled", arch, "float32", TILED_SETTINGS["float32"][0], registers=False)
    ptx = report.instructions
    assert ptx["fma.rn.f32"] > 0 and ptx["tf32"] == 0 and ptx["mma.sync"] == 0 and ptx["wgmma.mma_async"] == 0
    assert ptx["cp.async"] > 0 and report.fits  # num_stages=3: a ring of cp.async copies (Level 4, 10)


def test_tiled_bfloat16_compiles_to_mma_on_sm80_and_wgmma_on_sm90() -> None:
    pytest.importorskip("triton", reason="Level 14 needs triton: pip install -e .[triton]")
    from gemm_course.dsl.compile import compile_kernel
    from gemm_course.dsl.record import TILED_SETTINGS

    small, large = TILED_SETTINGS["bfloat16"]
    ampere = compile_kernel("tiled", "sm_80", "bfloat16", small, registers=False)
    assert ampere.instructions["mma.sync"] > 0 and ampere.instructions["wgmma.mma_async"] == 0 and ampere.fits
    hopper = compile_kernel("tiled", "sm_90", "bfloat16", large, registers=False)
    assert hopper.instructions["wgmma.mma_async"] > 0 and hopper.fits


def test_hopper_triton_kernel_compiles_with_tma_and_fits() -> None:
    """Every Hopper setting the record times: TMA copies, wgmma, shared memory within an H100's 227 KB (a 128×256
    tile with fp32 C and 3 stages would need 272 KB: this is the check that fails then)."""
    pytest.importorskip("triton", reason="Level 14 needs triton: pip install -e .[triton]")
    from gemm_course.dsl.compile import SHARED_LIMIT_SM90, compile_kernel
    from gemm_course.dsl.record import HOPPER_SETTINGS

    for setting in HOPPER_SETTINGS:
        report = compile_kernel("hopper", "sm_90", "bfloat16", setting, registers=False)
        ptx = report.instructions
        assert ptx["cp.async.bulk.tensor"] > 0 and ptx["wgmma.mma_async"] > 0 and ptx["cp.async"] == 0, setting
        assert report.shared_bytes <= SHARED_LIMIT_SM90, (setting, report.shared_bytes)


def test_gluon_kernel_compiles_warp_specialized() -> None:
    """The Gluon kernel for sm_90 at every setting the record times: TMA, wgmma, mbarrier waits, a producer warp
    beside BM/16 consumer warps (padded to a warpgroup: setmaxnreg moves registers), no spills, within 227 KB."""
    pytest.importorskip("triton", reason="Level 14 needs triton: pip install -e .[triton]")
    from gemm_course.dsl.compile import compile_kernel
    from gemm_course.dsl.record import GLUON_SETTINGS

    for i, setting in enumerate(GLUON_SETTINGS):
        report = compile_kernel("gluon", "sm_90", "bfloat16", setting, registers=i == 0)
        ptx = report.instructions
        assert ptx["cp.async.bulk.tensor"] > 0 and ptx["wgmma.mma_async"] > 0 and ptx["mbarrier.try_wait"] > 0
        assert ptx["setmaxnreg"] > 0 and report.num_warps == setting["BM"] // 16 + 4, (setting, report.num_warps)
        assert report.fits, (setting, report.shared_bytes)
        if i == 0:
            assert report.registers is not None and report.spill_bytes == 0, report.row()


def test_line_maps_name_levels_and_both_languages() -> None:
    """Each row of the three tables: a line that is in its kernel ("..." for text left out), levels 1–13, the CUDA
    construct in English (no Chinese) and in Chinese. Read without triton, as a page built without it reads them."""
    from gemm_course.bilingual.text import has_cjk
    from gemm_course.dsl.line_maps import LINE_MAPS, kernel_source

    assert set(LINE_MAPS) == {"tiled", "hopper", "gluon"}
    for name, table in LINE_MAPS.items():
        compact = re.sub(r"\s+", "", kernel_source(name))
        for row in table:
            assert row.cuda_en and not has_cjk(row.cuda_en) and has_cjk(row.cuda_zh), row
            assert all(part.strip().isdigit() and 1 <= int(part) <= 13 for part in row.level.split(",")), row
            for piece in row.line.split("; "):  # each piece is in the kernel it maps, "..." standing for any text
                pattern = ".*?".join(map(re.escape, re.sub(r"\s+", "", piece).split("...")))
                assert re.search(pattern, compact), (name, piece)
    assert kernel_source("gluon").startswith("@gluon.jit\ndef gluon_gemm_kernel(")
    assert "def load_partition(" in kernel_source("gluon") and "def tiled_gemm_kernel(" not in kernel_source("hopper")
