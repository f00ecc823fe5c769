"""The support matrix, Turing to Blackwell: one table of limits, each level's live / fallback / recorded per
architecture with why, no default that spills where it runs, the GEMM_COURSE_ARCH override, and the refusals of
Levels 11 and 13 in one line. No GPU needed; no kernel runs (NVRTC compiles, its results cached on disk)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import gemm_course as gc
from gemm_course import device, models, support
from gemm_course.bilingual.language import chosen
from gemm_course.bilingual.text import from_message

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_gpu(monkeypatch):
    """The no-GPU path, whatever this machine has, and no architecture pretended unless a test sets one."""
    monkeypatch.setenv(device.NO_GPU_ENV, "1")
    monkeypatch.delenv(device.ARCH_ENV, raising=False)
    device.gpu_available.cache_clear()
    device.pretend_arch("")
    yield
    device.pretend_arch("")
    device.gpu_available.cache_clear()


# --- the one table of limits ---------------------------------------------------------------------------

def test_every_matrix_architecture_has_limits_and_nvrtc_knows_the_newer_ones():
    for arch in support.MATRIX_ARCHS:
        assert models.arch_limits(arch).arch == arch
    pytest.importorskip("cupy")
    try:
        from cupy.cuda import nvrtc

        known = {f"sm_{a}" for a in nvrtc.getSupportedArchs()}
    except Exception:  # an NVRTC too old to list them
        pytest.skip("NVRTC cannot list its architectures")
    assert set(support.MATRIX_ARCHS) <= known | {"sm_103", "sm_121"}
    for arch in ("sm_103", "sm_121"):  # in the matrix exactly where this NVRTC compiles for them
        assert (arch in support.MATRIX_ARCHS) == (arch in known)


def _cccl_traits() -> dict[str, dict[str, int]]:
    """NVIDIA's table as CCCL writes it (cuda/__device/arch_traits.h, in CuPy's wheel): per architecture, the
    fields set in its block, with those of the block it copies first."""
    cupy = pytest.importorskip("cupy")
    header = next(Path(cupy.__file__).parent.rglob("__device/arch_traits.h"), None)
    if header is None:
        pytest.skip("this CuPy ships no CCCL arch_traits.h")
    text = header.read_text()
    out: dict[str, dict[str, int]] = {}
    blocks = re.findall(r"arch_traits<arch_id::(sm_\d+)>\(\) noexcept\s*\{(.*?)return __traits;", text, re.S)
    for arch, body in blocks:
        base = re.search(r"arch_traits<arch_id::(sm_\d+)>\(\)", body)
        fields = dict(out.get(base.group(1), {})) if base else {}
        for name, value in re.findall(r"__traits\.(\w+)\s*=\s*([\d\s\*]+);", body):
            fields[name] = eval(value)  # "100 * 1024": digits and * only, matched above
        out[arch] = fields
    return out


def test_the_limits_agree_with_nvidias_table():
    traits = _cccl_traits()
    for arch in support.MATRIX_ARCHS:
        if arch not in traits:
            continue
        t, lim = traits[arch], models.arch_limits(arch)
        assert lim.max_shared_per_sm == t["max_shared_memory_per_multiprocessor"], arch
        assert lim.max_blocks_per_sm == t["max_blocks_per_multiprocessor"], arch
        assert lim.max_threads_per_sm == t["max_threads_per_multiprocessor"], arch
        assert lim.max_shared_per_block == lim.max_shared_per_sm - lim.reserved_shared_per_block, arch
        assert (lim.registers_per_sm, lim.max_registers_per_thread, lim.static_shared_limit) == (65536, 255, 48 * 1024)


def test_an_unknown_architecture_is_one_line_in_both_languages():
    with pytest.raises(ValueError) as err:
        models.arch_limits("sm_99")
    halves = from_message(str(err.value))
    assert "\n" not in str(err.value) and "sm_120" in halves.en and "占用率" in halves.zh


# --- each level, each architecture ---------------------------------------------------------------------

def test_support_states_what_runs_where_and_why():
    s = support.support
    for arch in support.MATRIX_ARCHS:
        for level in ("11", "13"):
            assert s(level, arch).status == ("live" if arch == "sm_90" else "recorded"), (level, arch)
        for level in range(1, 9):
            assert s(level, arch).status in ("live", "fallback"), (level, arch)
    assert s(4, "sm_75").status == "fallback" and "cp.async" in s(4, "sm_75").en
    assert s(9, "sm_75").status == "fallback" and "bfloat16" in s(9, "sm_75").en
    assert s(10, "sm_75").status == "recorded" and "cp.async" in s(10, "sm_75").en
    assert s(10, "sm_86").status == "fallback" and "TMA" in s(10, "sm_86").en
    assert s(10, "sm_90").status == "live" and s(10, "sm_100").status == "live"
    assert s(10, "sm_120").status == "fallback" and "shared memory" in s(10, "sm_120").en
    blackwell = s(11, "sm_120")
    assert "no wgmma" in blackwell.en and "mma.sync" in blackwell.en and "TMA" in blackwell.en
    assert "wgmma" in blackwell.zh and "mma.sync" in blackwell.zh
    assert "tcgen05" in s(13, "sm_100").en
    assert s(12, "sm_89").status == "recorded" and "two or more GPUs" in s(12, "sm_89").en


def test_a_setting_that_does_not_fit_an_architectures_shared_memory_is_refused_there():
    lv = gc.get_level(10)
    big = lv.resolve(stages=4, BN=256, BK=64)  # 193 KB of shared memory: sm_90 and sm_100, not sm_120's 99 KB
    assert support.setting_refusal(lv, big, "sm_100") is None
    en, zh = support.setting_refusal(lv, big, "sm_120")
    assert "99 KB" in en and "99 KB" in zh


def test_the_listing_speaks_one_language_at_a_time(capsys):
    for lang, other in (("en", "\u4e00"), ("zh", "live")):
        with chosen(lang):
            support.main(["--arch", "sm_120", "--level", "11", "4"])
        out = capsys.readouterr().out
        assert out.count("\n") == 2 and "11_hopper_wgmma" in out
        assert (other not in out) if lang == "zh" else not any("\u4e00" <= ch <= "\u9fff" for ch in out)
    support.main(["--limits"])
    assert "sm_120" in capsys.readouterr().out
    with pytest.raises(SystemExit) as err:
        support.main(["--arch", "sm_99"])
    assert "\n" not in str(err.value.code) and "sm_99" in str(err.value.code)


# --- no default spills where it runs -------------------------------------------------------------------

@pytest.mark.parametrize("arch", support.MATRIX_ARCHS)
def test_no_levels_default_spills_on_an_architecture_it_runs_on(arch):
    """Every registry level's default setting (the architecture's own, Level.defaults_for), compiled by NVRTC for
    each architecture that runs it: no spill. NVRTC's results are cached, so a second run takes a second."""
    for lv in gc.levels():
        if not lv.runs_on(support.cc_of(arch)):
            continue
        if (lv.id, arch) == ("08_warp_tiling", "sm_90"):  # the recorded default: a small spill for two blocks per
            continue                                       # SM, measured faster on the H200 (its page shows it)
        report = gc.compile_report(lv, arch=arch)
        assert not report.spills, f"{lv.id} on {arch} spills: {report.spill_store_bytes} B stored"
        assert report.occupancy.blocks_per_sm >= 1, f"{lv.id} on {arch}"


def test_other_defaults_are_showcase_settings_and_the_page_names_them():
    """A family's default differs from the level's own in one parameter and is one of its showcase settings;
    sm_90 keeps the recorded H200's defaults; the how-to-run page says which levels and architectures."""
    page = (ROOT / "book" / "how_to_run.md").read_text(encoding="utf-8")
    changed_by_level = {}
    for lv in gc.levels():
        assert lv.defaults_for("sm_90") == lv.defaults == lv.defaults_for(None) == lv.defaults_for("sm_90a")
        changed = [a for a in support.MATRIX_ARCHS if lv.defaults_for(a) != lv.defaults]
        for arch in changed:
            diff = {k: v for k, v in lv.defaults_for(arch).items() if lv.defaults[k] != v}
            assert len(diff) == 1 and lv.resolve_for(arch) in [lv.resolve(**s) for s in lv.showcase], (lv.id, arch)
        if changed:
            changed_by_level[lv.number] = changed
    assert changed_by_level == {7: ["sm_120", "sm_121"], 8: [a for a in support.MATRIX_ARCHS if a != "sm_90"]}
    assert gc.get_level(7).defaults_for("sm_120")["BK"] == 16 and gc.get_level(8).defaults_for("sm_80")["BM"] == 64
    assert "Level 7 from 16-deep k-tiles on sm_120 and sm_121, Level 8 from the 64×128 block tile on every " \
           "architecture but sm_90" in page
    assert "第 7 级在 sm_120 和 sm_121 上用 16 深的 k 分块，第 8 级在 sm_90 以外的所有架构上用 64×128 的线程块分块" in page
    assert gc.compile_report(8, arch="sm_90").spills  # the exception the page names


# --- another card's view: GEMM_COURSE_ARCH and gc.pretend_arch -------------------------------------------

@pytest.mark.parametrize("arch", support.MATRIX_ARCHS)
def test_the_architecture_dependent_cells_run_under_each_override(arch, no_gpu, monkeypatch):
    """What the notebooks' architecture-dependent cells call, under GEMM_COURSE_ARCH: the "your GPU" compile
    reports of Levels 1, 4, 5 and 8, the folded reports, the page's status note, a level's runs (recorded here),
    the refusals of Levels 11 and 13. No traceback, and the reports are for that architecture."""
    monkeypatch.setenv(device.ARCH_ENV, arch)
    assert device.pretended_arch() == arch and device.arch() == arch
    for level in (1, 4, 5, 8):
        assert gc.compile_report(level).arch == arch
    for tile in (8, 16, 32):
        gc.notebook.compile_report("02_smem_tiling", tile=tile)
    gc.notebook.compile_report("04_double_buffering", arch="sm_75", copy="cp_async")
    assert arch in gc.notebook.status().en
    gc.notebook.compile_report("11_hopper_wgmma")  # refused in one line where arch is not sm_90, no traceback
    if arch != "sm_90":
        with pytest.raises(ValueError) as err:
            gc.compile_report("11_hopper_wgmma")
        assert "\n" not in str(err.value) and "wgmma" in str(err.value)
    gc.notebook.performance("04_double_buffering")
    support.table().html()


def test_pretend_arch_sets_and_clears_and_refuses_an_unknown_card(no_gpu):
    assert gc.pretend_arch() is None and gc.compile_report(1).arch == "sm_90"  # no GPU: the recorded H200's
    assert gc.pretend_arch("sm_120") == "sm_120" and gc.compile_report(1).arch == "sm_120"
    assert gc.pretend_arch("") is None
    with pytest.raises(ValueError) as err:
        gc.pretend_arch("sm_99")
    assert "\n" not in str(err.value) and "sm_120" in str(err.value)


# --- the refusals of Levels 11 and 13 ---------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_75", "sm_89", "sm_100", "sm_120"])
def test_levels_11_and_13_refuse_other_architectures_in_one_line_each_language(arch):
    from gemm_course.fp8 import gemm as fp8_gemm

    for call in (lambda: gc.compile_report("11_hopper_wgmma", arch=arch),
                 lambda: fp8_gemm.fp8_compile_report(arch=arch)):
        with pytest.raises(ValueError) as err:
            call()
        message = err.value.args[0]
        halves = from_message(message)
        assert "\n" not in message and halves.en != halves.zh, message
        assert "wgmma" in halves.en and "sm_90" in halves.en and "级" in halves.zh


# --- the how-to-run page shows the generated matrix ---------------------------------------------------------

def test_the_how_to_run_page_shows_the_generated_matrix():
    page = (ROOT / "book" / "how_to_run.md").read_text(encoding="utf-8")
    assert "support.table()" in page and "support.limits_table()" in page
    assert "GEMM_COURSE_ARCH" in page and "python -m gemm_course.support" in page


def test_the_listing_plugs_into_a_subcommand(capsys):
    """add_arguments and run: what a `support` subcommand of `python -m gemm_course` needs (its errors are
    ValueErrors in the package's one-line form, for that command line's one error path)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m gemm_course")
    sub = parser.add_subparsers(dest="command", required=True)
    support.add_arguments(sub.add_parser("support"))
    with chosen("en"):
        support.run(parser.parse_args(["support", "--arch", "sm_89", "--level", "13"]))
    assert capsys.readouterr().out.startswith("13_fp8_blockscaled   sm_89   recorded run: ")
    with pytest.raises(ValueError) as err:
        support.run(parser.parse_args(["support", "--arch", "sm_99"]))
    assert "\n" not in str(err.value) and " / " in str(err.value)


def test_the_course_command_line_lists_support_too():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "gemm_course", "support", "--arch", "sm_120", "--level", "11"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "11_hopper_wgmma" in out.stdout and "wgmma" in out.stdout, out.stderr
    bad = subprocess.run([sys.executable, "-m", "gemm_course", "support", "--arch", "sm_999"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "sm_999" in bad.stderr
