"""Wrong input on the command line: a one-line message that says what to change, a non-zero exit, never a
traceback. No GPU needed (commands that need one say so the same way)."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

WRONG = [
    ("bench", "--config", "01_naive", "--sizes", "1024x"),          # a malformed size
    ("bench", "--config", "nope"),                                   # an unknown level
    ("bench", "--config", "05_register_blocking:BM=64.0"),          # a float where an integer is wanted
    ("bench", "--config", "06_fused_epilogue:bias=maybe"),          # not a boolean
    ("bench", "--config", "01_naive:mapping"),                       # no value
    ("report", "05_register_blocking:BM=63"),                        # not one of the choices
    ("report", "02_smem_tiling", "--arch", "sm_20"),                 # an architecture with no table
    ("summary", "--level", "bogus"),
    ("counters", "--level", "bogus"),
    ("counters", "--record"),                                        # no --out
    ("sass", "09_wmma:staging=sideways"),
    ("check", "--levels", "nope"),
    ("grade", "no_such_exercise", "--starter"),
    ("grade", "02_missing_barrier"),                                 # neither a file nor a flag
    ("exercises", "--level", "99"),
    ("multigpu", "--gpus", "x"),
    ("report", "13:foo=1"),                                          # Level 13 has no such parameter
    ("record", "--levels", "01_naive", "--out", "gemm_course/results/h200_01_naive.json"),  # a shipped file
    ("check", "--all-settings", "--max-settings", "-1"),
]

# Input that used to be ignored, or to reach int(): each now gets one line saying what to change.
IGNORED = [
    (("bench", "--config", "01_naive:mapping=rows,mapping=cols"), "twice"),         # a parameter given twice
    (("bench", "--config", "01_naive", "--sizes", "1024", "--sizes", "4096"), "--sizes"),  # an option given twice
    (("check", "--levels", "01_naive", "--levels", "02_smem_tiling"), "--levels"),
    (("fp8", "--sizes", "4096"), "--record"),                                        # --sizes without --record
    (("fp8", "--small-m"), "--record"),
    (("check", "--max-settings", "2"), "--all-settings"),                            # without --all-settings
    (("bench", "--config", "01_naive", "--sizes", "4096³"), "4096x4096x1024"),       # a superscript digit
    (("report", "01_naive:block_x=1⁶"), "block_x"),
    (("multigpu", "--gpus", "1,²"), "GPU"),
    (("summary", "--level", "5²"), "known levels"),
    (("exercises", "hint", "02_missing_barrier", "²"), "hint"),
    (("grade", "02_missing_barier", "--starter"), "02_missing_barrier"),             # a mistyped exercise id
    (("exercises", "show", "02_missing_barier"), "02_missing_barrier"),
    (("exercises", "reveal", "missing_barrier"), "02_missing_barrier"),
]


@pytest.mark.parametrize("args, says", IGNORED, ids=[" ".join(a) for a, _ in IGNORED])
def test_ignored_or_garbled_input_gets_one_line(args, says):
    _one_line(_cli(*args), says)


def test_the_messages_follow_the_readers_language():
    english = _one_line(_cli("check", "--max-settings", "2", env={"GEMM_COURSE_LANG": "en"}), "--all-settings")
    chinese = _one_line(_cli("check", "--max-settings", "2", env={"GEMM_COURSE_LANG": "zh"}), "--all-settings")
    assert "须与" in chinese and "goes with" not in chinese and "须与" not in english


ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, env: Optional[dict] = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemm_course", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


def _one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    """The failed command's last stderr line, after asserting a non-zero exit and no traceback."""
    assert done.returncode != 0, f"exit 0: {done.stdout[-300:]}"
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-800:]
    message = done.stderr.strip().splitlines()
    assert message and len(message[-1]) > 20, "no message"
    assert all(w in message[-1] for w in words), message[-1]
    return message[-1]


@pytest.mark.parametrize("args", WRONG, ids=[" ".join(a) for a in WRONG])
def test_wrong_input_gets_one_line_and_a_nonzero_exit(args):
    _one_line(_cli(*args))


def test_shipped_results_are_never_overwritten():
    shipped = ROOT / "gemm_course" / "results" / "h200_01_naive.json"
    before = shipped.read_bytes()
    _one_line(_cli("bench", "--config", "01_naive", "--out", str(shipped)), "mine.json")
    assert shipped.read_bytes() == before


# The environment variables the CPU backend's size guard and deadlock timer name in their messages.
ENV_WRONG = [("GEMM_COURSE_CPU_TIMEOUT", "abc"), ("GEMM_COURSE_CPU_TIMEOUT", "-3"),
             ("GEMM_COURSE_CPU_MAX_WORK", "lots"), ("GEMM_COURSE_CPU_MAX_WORK", "-1"), ("GEMM_COURSE_CPU_MAX_WORK", "0")]


@pytest.mark.parametrize("name,value", ENV_WRONG, ids=[f"{n}={v}" for n, v in ENV_WRONG])
def test_a_wrong_environment_variable_is_named_with_what_to_set(name, value):
    _one_line(_cli("grade", "01_edge_guard", "--solution", env={name: value}), name, f"{name}=")
    from gemm_course.run import cpu_backend

    os.environ[name] = value
    try:
        with pytest.raises(ValueError, match=name) as err:
            cpu_backend.default_timeout() if "TIMEOUT" in name else cpu_backend.max_work()
        assert "\n" not in str(err.value)
    finally:
        del os.environ[name]


def test_the_size_guards_own_advice_is_accepted(monkeypatch):
    from gemm_course.run import cpu_backend

    monkeypatch.setenv("GEMM_COURSE_CPU_MAX_WORK", "1e9")  # as a reader raising the limit would write it
    assert cpu_backend.max_work() == 10**9
    monkeypatch.setenv("GEMM_COURSE_CPU_TIMEOUT", "0")  # 0: no limit, as launch() documents
    assert cpu_backend.default_timeout() == 0.0


PYTHON_WRONG = [
    ("check('01_naive', '64', 64, 64)", "M"), ("check('01_naive', -64, 64, 64)", "M"),
    ("check('01_naive', 64, 64.5, 64)", "N"), ("check('01_naive', 64, 64, 64, dtype='float17')", "float17"),
    ("random_operands(4, 4, 4, dtype='int32')", "int32"), ("compile_report('01_naive', arch=7.5)", "sm_75"),
    ("check('01_naive', 1, 1, 10**9, backend='cpu')", "GEMM_COURSE_CPU_MAX_WORK"),
]


@pytest.mark.parametrize("call,word", PYTHON_WRONG, ids=[c for c, _ in PYTHON_WRONG])
def test_wrong_python_calls_get_one_line(call, word):
    import time

    import gemm_course as gc

    start = time.perf_counter()
    with pytest.raises(ValueError, match=word) as err:
        eval(call, {"check": gc.check, "random_operands": gc.random_operands, "compile_report": gc.compile_report})
    assert "\n" not in str(err.value) and time.perf_counter() - start < 5  # refused before any work


def test_an_architecture_given_as_a_number_is_understood():
    import gemm_course as gc

    assert "sm_75" in str(gc.compile_report("01_naive", arch=75)).splitlines()[1]


def test_ctrl_c_is_one_line_at_any_moment():
    import signal
    import time

    # Before Python itself has started, no program can catch Ctrl-C; how long that takes here is measured
    # first (a busy machine is slower), so the first signal lands while the package loads.
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    ready = time.perf_counter() - start
    for delay in (ready + 0.05, ready + 0.3, 3.0):  # while the package loads, while the command starts, in the kernels
        proc = subprocess.Popen([sys.executable, "-m", "gemm_course", "check", "--all-settings", "--levels",
                                 "06_fused_epilogue", "--max-settings", "0"],  # hours of work: stopped early
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert "Traceback" not in out + err and "KeyboardInterrupt" not in err, err[-800:]
        assert proc.returncode != 0 and "Ctrl-C" in err.strip().splitlines()[-1], (delay, err[-300:])


def test_all_settings_without_a_gpu_is_bounded_and_says_so():
    from gemm_course import device, get_level

    if device.gpu_available():
        pytest.skip("on a GPU --all-settings checks every setting")
    done = _cli("check", "--all-settings", "--levels", "02_smem_tiling", "05_register_blocking", "--max-settings", "2")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-800:]
    assert "of 1490 settings" in done.stdout and "--max-settings 0" in done.stdout, done.stdout[:600]
    lv = get_level("05_register_blocking")
    assert f"{lv.id}: {len(lv.showcase) + len(lv.experiments) + 2} settings," in done.stdout, done.stdout[-600:]


def test_summary_is_one_line_per_level_with_detail_on_demand():
    from gemm_course.measure.results import summary

    rows = summary()
    short = _cli("summary").stdout.strip().splitlines()
    levels = list(dict.fromkeys(r["level"] for r in rows))
    assert len(short) == len(levels) + 2, short  # a header, one line per level, where the detail is
    best = max((r for r in rows if r["level"] == "08_warp_tiling"), key=lambda r: r["tflops"])
    line = next(s for s in short if s.startswith("08_warp_tiling"))
    assert f"{best['tflops']:.2f}" in line and f"{best['ratio_to_baseline']:.1%} of {best['baseline']}" in line
    assert len(_cli("summary", "--all").stdout.strip().splitlines()) == len(rows) + 1
    fp8 = _cli("summary", "--level", "13").stdout.strip().splitlines()
    assert len(fp8) == 1 + sum(r["level"] == "13_fp8_blockscaled" for r in rows) and "cublaslt" in fp8[1]


def test_report_runs_level_13():
    done = _cli("report", "13_fp8_blockscaled")
    assert done.returncode == 0 and "sm_90a" in done.stdout, done.stderr[-500:]


def test_booleans_and_sizes_are_understood():
    from gemm_course.__main__ import parse_config, parse_size

    assert parse_config("06_fused_epilogue:bias=False,activation=gelu") == (
        "06_fused_epilogue", {"bias": False, "activation": "gelu"})
    assert parse_size("4096x4096x1024") == (4096, 4096, 1024) and parse_size("512") == 512


def test_a_closed_pipe_ends_quietly():
    pipe = subprocess.Popen([sys.executable, "-m", "gemm_course", "summary"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    pipe.stdout.readline()
    pipe.stdout.close()  # like `summary | head -1`
    err = pipe.stderr.read()
    assert pipe.wait(timeout=120) == 0 and "Traceback" not in err and "BrokenPipe" not in err


SPLITS_WRONG = [
    (("fp8", "--splits", "1,2", "--out", "x.json"), "--splits goes with --record"),
    (("fp8", "--record", "--splits", "2", "--out", "x.json"), "--splits goes with --record"),
    (("fp8", "--record", "--staged", "--splits", "0,2", "--out", "x.json"), "bad --splits"),
    (("fp8", "--record", "--staged", "--splits", "2,17", "--out", "x.json"), "from 1 to 16"),
]


@pytest.mark.parametrize("args, says", SPLITS_WRONG, ids=[" ".join(a) for a, _ in SPLITS_WRONG])
def test_fp8_split_counts_are_checked_before_anything_runs(args, says) -> None:
    _one_line(_cli(*args), says)
