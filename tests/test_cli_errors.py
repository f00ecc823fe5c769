"""Wrong input on the command line: a one-line message that says what to change, a non-zero exit, never a
traceback. No GPU needed (commands that need one say so the same way)."""
import subprocess
import sys

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
]


@pytest.mark.parametrize("args", WRONG, ids=[" ".join(a) for a in WRONG])
def test_wrong_input_gets_one_line_and_a_nonzero_exit(args):
    done = subprocess.run([sys.executable, "-m", "gemm_course", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0, f"exit 0 for {args}: {done.stdout[-300:]}"
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-800:]
    message = done.stderr.strip().splitlines()
    assert message and len(message[-1]) > 20, f"no message for {args}"


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
