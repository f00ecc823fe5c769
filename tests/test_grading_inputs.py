"""Grading you can trust, from the learner's side: a Python answer (Level 12) runs apart from the course and
is refused in one line where it reaches outside itself; predict-then-check rewards predicting, not stepping
values; the progress file is read safely and a pass with a chosen seed does not count; the command line
checks --seed and suggests a mistyped exercise id. No GPU needed.

The red-team answers of tests/redteam/ are graded one at a time by tests/test_redteam.py; the cheats that
take several gradings (stepping a prediction through the progress file) are tested here."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from gemm_course import exercises as ex
from gemm_course.exercises import chapters, predict, progress
from gemm_course.exercises.child_prelude import restrict_filesystem
from gemm_course.exercises.grade import Step, Verdict

ROOT = Path(__file__).resolve().parents[1]
SEED = 12345
CJK = re.compile(r"[\u4e00-\u9fff]")
ROWS_RIGHT = ("def my_rows(M, world_size, rank):\n    base, extra = divmod(M, world_size)\n"
              "    first = rank * base + min(rank, extra)\n    return first, first + base + (1 if rank < extra else 0)\n")


def _one_line_both(step: Step) -> None:
    assert "\n" not in step.en and "\n" not in step.zh, step
    assert step.en and CJK.search(step.zh) and "Traceback" not in step.en + step.zh, step


@pytest.fixture
def progress_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "progress.json"
    monkeypatch.setenv(progress.PROGRESS_ENV, str(path))
    return path


def _cli(*args: str, env: Optional[dict] = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemm_course", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


# --- Python answers run apart from the course ---------------------------------------------------------------

REFUSED = [  # (answer, words of the refusal)
    ("import numpy as np\n" + ROWS_RIGHT, "`import numpy` is not allowed"),
    ("from os import path\n" + ROWS_RIGHT, "`import os` is not allowed"),
    ("import math, importlib\n" + ROWS_RIGHT, "`import importlib` is not allowed"),
    ("from . import tensor_parallel\n" + ROWS_RIGHT, "`import .` is not allowed"),
    (ROWS_RIGHT + "m = __import__('ma' + 'th')\n", "`__import__` is not allowed"),
    (ROWS_RIGHT + "text = open('x').read()\n", "`open` is not allowed"),
    (ROWS_RIGHT + "eval('1')\n", "`eval` is not allowed"),
    (ROWS_RIGHT + "c = compile('1', 'x', 'eval')\n", "`compile` is not allowed"),
    (ROWS_RIGHT + "g = globals()\n", "`globals` is not allowed"),
    (ROWS_RIGHT + "v = vars()\n", "`vars` is not allowed"),
    (ROWS_RIGHT + "k = (1).__class__\n", "`.__class__` is not allowed"),
    (ROWS_RIGHT + "k = my_rows._private\n", "`._private` is not allowed"),
    (ROWS_RIGHT + "c = my_rows.f_code\n", "`.f_code` is not allowed"),
    (ROWS_RIGHT + "setattr(my_rows, '__doc__', 'x')\n", "setattr(…, '__doc__') is not allowed"),
    (ROWS_RIGHT + "name = 'x'\ngetattr(my_rows, name)\n", "getattr() with a name computed at run time"),
    (ROWS_RIGHT + "b = __builtins__\n", "`__builtins__` is not allowed"),
    ("import gemm_course\n" + ROWS_RIGHT, "uses gemm_course"),
]


@pytest.mark.parametrize("answer,words", REFUSED, ids=[w for _, w in REFUSED])
def test_a_python_answer_that_reaches_outside_itself_is_refused_in_one_line(answer, words):
    verdict = ex.grade("12_row_split_uneven", answer, seed=SEED)
    assert verdict.failed_step == "answer" and len(verdict.steps) == 1, str(verdict)
    step = verdict.steps[0]
    _one_line_both(step)
    assert words in step.en, step.en
    assert re.match(r"my_answer\.txt:\d+: ", step.en), step.en  # where, then what to change


def test_plain_python_with_math_getattr_of_a_plain_name_and_underscore_names_is_fine():
    answer = ("import math\n_cache = {}\n\ndef my_rows(M, world_size, rank):\n"
              "    base, extra = divmod(M, world_size)\n    _ = getattr(math, 'floor')(0.5)\n"
              "    first = rank * base + min(rank, extra)\n    return first, first + base + (1 if rank < extra else 0)\n")
    assert ex.grade("12_row_split_uneven", answer, seed=SEED).status == "solved"


@pytest.fixture
def unscreened(monkeypatch):
    """The screen off and os, sys, importlib importable: what the child itself stops (the screen is one layer)."""
    monkeypatch.setattr(chapters, "_python_problem", lambda *args: None)
    monkeypatch.setattr(chapters, "ANSWER_IMPORTS", ("math", "os", "sys", "importlib"))


# Whether this kernel has Landlock (tried in a throwaway process: restricting is for good).
LANDLOCK = sys.platform.startswith("linux") and subprocess.run(
    [sys.executable, "-c", "from gemm_course.exercises.child_prelude import restrict_filesystem as r; "
                           "raise SystemExit(0 if r([]) > 0 else 1)"], cwd=ROOT).returncode == 0


def test_the_course_cannot_be_imported_in_the_child_under_any_name(unscreened):
    pieced = ("import importlib, sys\nsys.modules.pop('gemm_course', None)\n"
              "course = importlib.import_module('gemm' + '_course')\n" + ROWS_RIGHT)
    verdict = ex.grade("12_row_split_uneven", pieced, seed=SEED)
    assert verdict.failed_step == "run" and "ModuleNotFoundError" in verdict.steps[-1].en, str(verdict)
    # -S: no site, so no .pth and no editable finder; the child's sys.path is the standard library only
    probe = "import sys\ndef my_rows(M, world_size, rank):\n    return int(sys.flags.no_site), len([p for p in sys.path if 'site-packages' in p])\n"
    assert chapters._answer_in_child(probe, "a.py", "my_rows", [(1, 1, 0)])["results"] == [[1, 0]]


@pytest.mark.skipif(not LANDLOCK, reason="no Landlock in this kernel: the screen alone keeps files out of reach")
def test_the_child_reads_no_file_of_the_course_and_writes_no_file(unscreened, progress_file):
    progress_file.write_text('{"12_row_split_uneven": {"best": "failed", "attempts": 1}}\n')
    before = progress_file.read_text()
    course_file = Path(chapters.__file__)
    by_path = ("import sys\nsys.path.insert(0, %r)\nimport importlib\n" % str(ROOT)
               + "m = importlib.import_module('gemm' + '_course')\n" + ROWS_RIGHT)
    assert ex.grade("12_row_split_uneven", by_path, seed=SEED).failed_step == "run"
    reads = "import os\ndef my_rows(M, world_size, rank):\n    os.open(%r, os.O_RDONLY)\n    return 0, M\n" % str(course_file)
    verdict = ex.grade("12_row_split_uneven", reads, seed=SEED)
    assert verdict.failed_step == "run" and "PermissionError" in verdict.steps[-1].en, str(verdict)
    writes = ("import os\ndef my_rows(M, world_size, rank):\n"
              "    fd = os.open(%r, os.O_WRONLY | os.O_TRUNC)\n    return 0, M\n" % str(progress_file))
    verdict = ex.grade("12_row_split_uneven", writes, seed=SEED)
    assert verdict.failed_step == "run" and "PermissionError" in verdict.steps[-1].en, str(verdict)
    assert progress_file.read_text() == before


def test_a_child_that_prints_a_fake_result_and_leaves_ended_before_it_answered(unscreened):
    fake = ("import os, sys\n" + ROWS_RIGHT +
            "print('{\"results\": [' + ', '.join(['[0, 1]'] * 10000) + ']}')\nsys.stdout.flush()\nos._exit(0)\n")
    verdict = ex.grade("12_row_split_uneven", fake, seed=SEED)
    assert verdict.status == "failed" and verdict.failed_step == "run", str(verdict)
    step = verdict.steps[-1]
    _one_line_both(step)
    assert "ended the grading process before it answered" in step.en


def test_what_a_python_answer_prints_is_never_read():
    answer = "print('{\"results\": []}')\n" + ROWS_RIGHT.replace("    return", "    print('{}')\n    return")
    assert ex.grade("12_row_split_uneven", answer, seed=SEED).status == "solved"


# --- predict-then-check rewards predicting ------------------------------------------------------------------

def _prediction(exercise_id: str, value: float) -> str:
    names = [q["name"] for q in predict._quantities(ex.get_exercise(exercise_id))]
    return "".join(f"{name} = {value}\n" for name in names)


def _graded_and_recorded(exercise_id: str, text: str) -> Verdict:
    verdict = ex.grade(exercise_id, text)  # a fresh seed: a pass with a chosen one would not count
    assert progress.record(verdict) is None
    return verdict


def test_stepping_one_value_through_every_field_does_not_solve_a_prediction(progress_file):
    exercise = ex.get_exercise("01_predict_sectors")
    names = [q["name"] for q in predict._quantities(exercise)]
    right = predict.parse_answer(exercise.solution, names).values
    for value in range(0, 20):  # one value in every field, one step per grading: the cheat
        verdict = _graded_and_recorded(exercise.id, _prediction(exercise.id, value))
        step = verdict.steps[-1]
        assert verdict.status == "failed" and step.name == "predict", str(verdict)
        _one_line_both(step)
        named = [n for n in names if n in step.en]
        if value < predict.COUNTED_TRIES:
            assert named, step.en  # the first tries name the quantities off ...
        else:  # ... later ones only how many, and how to give up
            assert not named and not any(n in step.zh for n in names), step.en
            assert re.search(r"\d of 4 predictions", step.en) and f"exercises reveal {exercise.id}" in step.en
    # the right answer after the limit: shown as right (exit code 0), recorded as not counting
    late = _graded_and_recorded(exercise.id, exercise.solution)
    assert late.status == "solved" and late.exit_code == 0
    assert "without counting it as solved" in late.steps[1].en and "不计为已完成" in late.steps[1].zh
    row = progress.load()[exercise.id]
    assert row["best"] == "failed" and row["late_pass"] and row["tries"] == 21
    note = {r["id"]: r for r in progress.status_rows(1)}[exercise.id]
    assert "not counted" in note["note_en"] and CJK.search(note["note_zh"])
    assert predict.parse_answer(exercise.solution, names).values == right


def test_a_right_prediction_within_the_counted_tries_is_solved(progress_file):
    exercise = ex.get_exercise("02_predict_reuse")
    for value in range(predict.COUNTED_TRIES - 1):
        assert _graded_and_recorded(exercise.id, _prediction(exercise.id, value)).status == "failed"
    solved = _graded_and_recorded(exercise.id, exercise.solution)
    assert solved.status == "solved" and f"try {predict.COUNTED_TRIES} of {predict.COUNTED_TRIES}" in solved.steps[1].en
    assert progress.load()[exercise.id]["best"] == "solved"
    # an answer refused for its form is not a try
    assert _graded_and_recorded("03_predict_conflicts", "store_km = ?\n").failed_step == "answer"
    assert progress.load()["03_predict_conflicts"]["tries"] == 0


def test_reveal_gives_up_and_shows_the_measured_values_with_their_reasons(progress_file):
    exercise = ex.get_exercise("01_predict_sectors")
    done = _cli("exercises", "reveal", exercise.id, env={progress.PROGRESS_ENV: str(progress_file)})
    assert done.returncode == 0, done.stderr
    for q in predict._quantities(exercise):
        assert re.search(rf"{q['name']} = \d", done.stdout) and q["why"]["en"][:30] in done.stdout
    assert progress.load()[exercise.id]["revealed"] is True
    after = _graded_and_recorded(exercise.id, exercise.solution)
    assert after.status == "solved" and "after you revealed the values" in after.steps[1].en
    assert progress.load()[exercise.id]["best"] == "failed"
    zh = _cli("exercises", "reveal", exercise.id, "--zh", env={progress.PROGRESS_ENV: str(progress_file)})
    assert "实测值" in zh.stdout and CJK.search(zh.stdout)
    refused = _cli("exercises", "reveal", "02_missing_barrier", env={progress.PROGRESS_ENV: str(progress_file)})
    assert refused.returncode == 1 and "no measured predictions" in refused.stderr and "Traceback" not in refused.stderr


# --- the progress file --------------------------------------------------------------------------------------

def _verdict(exercise_id: str, passed: bool, seed_chosen: bool = False) -> Verdict:
    verdict = Verdict(exercise_id, [Step("correct", passed, "x", "x")], seed=7)
    verdict.seed_chosen = seed_chosen  # Verdict.seed_chosen: True when grade() was given seed=
    return verdict


@pytest.mark.parametrize("kind", ["/dev/full", "folder", "fifo", "large"])
def test_a_progress_path_that_is_not_a_small_regular_file_is_refused_in_one_line(kind, tmp_path, monkeypatch):
    path = {"/dev/full": Path("/dev/full"), "folder": tmp_path, "fifo": tmp_path / "fifo",
            "large": tmp_path / "large.json"}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a blocking read would wait for ever
    if kind == "large":
        path.write_bytes(b" " * (progress.MAX_BYTES + 1))
    monkeypatch.setenv(progress.PROGRESS_ENV, str(path))
    with pytest.raises(progress.ProgressError) as err:
        progress.load()
    assert "\n" not in str(err.value) and " / " in str(err.value) and CJK.search(err.value.zh)
    warning = progress.record(_verdict("02_tiled_kernel", True))
    assert warning and warning.startswith("progress not saved") and "\n" not in warning
    assert progress.prediction_tries("01_predict_sectors") == (0, False)


def test_grading_with_a_device_as_progress_file_ends_and_exits_with_the_verdicts_code(tmp_path):
    answer = tmp_path / "rows.py"
    answer.write_text(ROWS_RIGHT)
    done = _cli("grade", "12_row_split_uneven", str(answer), env={progress.PROGRESS_ENV: "/dev/full"}, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("PASS"), done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "not a regular file" in done.stderr
    status = _cli("exercises", "--status", env={progress.PROGRESS_ENV: "/dev/full"}, timeout=60)
    assert status.returncode == 1 and status.stderr.count("\n") == 1 and "Traceback" not in status.stderr


BAD_ROWS = {"not_a_table": [1, 2], "no_best": {"attempts": 1}, "best_unknown": {"best": "done", "attempts": 1},
            "attempts_text": {"best": "solved", "attempts": "x"}, "attempts_negative": {"best": "failed", "attempts": -1},
            "attempts_bool": {"best": "failed", "attempts": True}, "seed_float": {"best": "failed", "attempts": 1, "seed": 1.5},
            "tries_text": {"best": "failed", "attempts": 1, "tries": "3"},
            "revealed_number": {"best": "failed", "attempts": 1, "revealed": 1}}


def test_a_malformed_row_is_reported_in_one_line_and_ignored(progress_file, tmp_path):
    good = {"best": "solved", "last": "solved", "attempts": 2, "seed": 3, "time": "2026-01-01 00:00:00"}
    progress_file.write_text(json.dumps({**BAD_ROWS, "02_tiled_kernel": good}))
    rows, warning = progress.read()
    assert set(rows) == {"02_tiled_kernel"} and rows["02_tiled_kernel"]["best"] == "solved"
    assert warning and "\n" not in warning and f"ignored {len(BAD_ROWS)} malformed rows" in warning and CJK.search(warning)
    # grading still records, and the exit code is the verdict's: PASS exits 0
    answer = tmp_path / "rows.py"
    answer.write_text(ROWS_RIGHT)
    done = _cli("grade", "12_row_split_uneven", str(answer), env={progress.PROGRESS_ENV: str(progress_file)}, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("PASS"), done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1 and "malformed" in done.stderr
    table = json.loads(progress_file.read_text())
    assert table["12_row_split_uneven"]["best"] == "solved" and table["attempts_text"] == BAD_ROWS["attempts_text"]
    # a malformed row of the exercise graded starts afresh
    progress_file.write_text(json.dumps({"02_tiled_kernel": {"best": "solved", "attempts": "x"}}))
    assert progress.record(_verdict("02_tiled_kernel", False)) is None
    assert progress.load()["02_tiled_kernel"]["attempts"] == 1
    progress_file.write_text("{not json")
    with pytest.raises(progress.ProgressError):
        progress.load()


def test_a_pass_with_a_chosen_seed_does_not_count(progress_file):
    assert progress.record(_verdict("02_tiled_kernel", True, seed_chosen=True)) is None
    row = progress.load()["02_tiled_kernel"]
    assert row["best"] == "failed" and row["last"] == "solved" and row["last_pass_seed_chosen"] is True
    status = {r["id"]: r for r in progress.status_rows(2)}["02_tiled_kernel"]
    assert status["note_en"] == "passed with a seed you chose: grade again without --seed to count it"
    assert "--seed" in status["note_zh"] and CJK.search(status["note_zh"])
    shown = _cli("exercises", "--status", "--level", "2", env={progress.PROGRESS_ENV: str(progress_file)})
    assert "grade again without --seed to count it" in shown.stdout
    assert progress.record(_verdict("02_tiled_kernel", True)) is None
    row = progress.load()["02_tiled_kernel"]
    assert row["best"] == "solved" and row["last_pass_seed_chosen"] is False
    assert {r["id"]: r for r in progress.status_rows(2)}["02_tiled_kernel"]["note_en"] == ""


# --- the command line ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", ["-5", str(2**32), "abc", "1.5"])
def test_a_seed_out_of_range_is_refused_in_one_line(seed):
    done = _cli("grade", "02_missing_barrier", "--starter", "--seed", seed)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert f"--seed {seed}" in done.stderr and "0 to 4294967295" in done.stderr
    zh = _cli("grade", "02_missing_barrier", "--starter", "--seed", seed, "--zh")
    assert zh.returncode == 2 and CJK.search(zh.stderr)


def test_the_largest_seed_is_accepted():
    done = _cli("grade", "12_row_split_uneven", "--solution", "--seed", str(2**32 - 1))
    assert done.returncode == 0 and f"seed {2**32 - 1}" in done.stdout, done.stdout + done.stderr


def test_a_mistyped_exercise_id_gets_a_suggestion():
    done = _cli("grade", "02_mising_barrier", "--starter")
    assert done.returncode == 2 and "did you mean 02_missing_barrier" in done.stderr and done.stderr.count("\n") == 1
    shown = _cli("exercises", "show", "01_predict_sector", "--zh")
    assert shown.returncode == 1 and "01_predict_sectors" in shown.stderr and "是不是" in shown.stderr
    action = _cli("exercises", "reveel", "01_predict_sectors")
    assert action.returncode == 1 and "did you mean reveal" in action.stderr
