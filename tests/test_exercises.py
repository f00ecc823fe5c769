"""Exercises: every reference solution passes, every starter fails with the diagnostic its exercise is
about, the command line answers with the right exit codes, and each level's notebook carries its
exercises (the starter cell identical to starter.cu). No GPU needed."""
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemm_course import exercises as ex
from gemm_course.levels import get_level, levels

ROOT = Path(__file__).resolve().parents[1]
ALL = ex.exercises()


def _written_and_replaced(starter: str, solution: str) -> tuple[int, int]:
    """(code lines the solution adds to the starter, code lines of the starter it drops or rewrites), comments
    and blank lines left out."""
    import difflib

    from gemm_course.exercises.grade import _code_only

    def lines(text: str) -> list[str]:  # a Python answer's "# " comments are comments too (#pragma is code)
        return [line.strip() for line in _code_only(text).splitlines()
                if line.strip() and not re.match(r"#(\s|$)", line.strip())]

    added = replaced = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, lines(starter), lines(solution), autojunk=False).get_opcodes():
        replaced += (i2 - i1) if op in ("replace", "delete") else 0
        added += (j2 - j1) if op in ("replace", "insert") else 0
    return added, replaced


def test_every_level_has_two_exercises_one_from_a_nearly_empty_body_and_a_prediction():
    for number in range(0, 14):
        mine = [e for e in ALL if e.number == number]
        assert len(mine) >= 2, f"Level {number} has {len(mine)} exercises"
        scratch = [e for e in mine if (e.data or {}).get("from_scratch")]
        assert scratch, f"Level {number} has no exercise written from a nearly empty body (from_scratch)"
        if 1 <= number <= 8:
            assert any(e.kind == "predict" for e in mine), f"Level {number} has no predict-then-check question"


def test_a_from_scratch_exercise_is_written_into_empty_space():
    """Where an exercise says the learner writes from a nearly empty body, the learner writes the code: the
    solution adds at least 3 code lines and drops or rewrites at most 4 of the starter's (placeholders such
    as `return 0;`), so nothing of the answer is there to edit."""
    for e in ALL:
        if (e.data or {}).get("from_scratch"):
            added, replaced = _written_and_replaced(e.starter, e.solution)
            assert added >= 3 and replaced <= 4, f"{e.id}: the solution adds {added} code lines and rewrites {replaced}"


def test_each_exercise_is_complete_in_both_languages():
    for e in ALL:
        assert e.kind in ex.KINDS and e.title_en and e.title_zh and e.statement_en and e.statement_zh
        assert len(e.hints) >= 2 and all(en and zh for en, zh in e.hints)
        assert e.starter != e.solution
        data = json.loads((e.folder / "exercise.json").read_text(encoding="utf-8"))
        assert data.get("starter_fails"), f"{e.id}: say which step the starter fails (starter_fails)"


def _solution_passes_and_starter_fails_where_the_lesson_is(exercise):
    from gemm_course import device

    start = time.perf_counter()
    solved = ex.grade(exercise.id, exercise.solution)
    unchecked = [step.name for step in solved.steps if step.passed is None]
    if unchecked and not device.gpu_available():  # a Tensor Core kernel's run needs a GPU: nothing else may be left out
        assert solved.status == "not_verified" and unchecked == ["gpu"], str(solved)
    else:
        assert solved.status == "solved", str(solved)
    started = ex.grade(exercise.id, exercise.starter)
    expected = json.loads((exercise.folder / "exercise.json").read_text(encoding="utf-8"))["starter_fails"]
    assert started.status == "failed" and started.failed_step == expected, str(started)
    assert time.perf_counter() - start < 60  # both gradings, first compilations included (a busy 2-core machine: 15–40 s)


def _level_class(number: int) -> type:
    """One test class per level: pytest-xdist's --dist loadscope spreads classes over the workers."""
    mine = [e for e in ALL if e.number == number]

    @pytest.mark.parametrize("exercise", mine, ids=[e.id for e in mine])
    def test_solution_passes_and_starter_fails_where_the_lesson_is(self, exercise):
        _solution_passes_and_starter_fails_where_the_lesson_is(exercise)

    return type(f"TestLevel{number:02d}", (), {"test_solution_passes_and_starter_fails_where_the_lesson_is":
                                               test_solution_passes_and_starter_fails_where_the_lesson_is})


for _number in sorted({e.number for e in ALL}):
    globals()[f"TestLevel{_number:02d}"] = _level_class(_number)


def _cli(*args):
    import os
    import tempfile

    env = dict(os.environ, GEMM_COURSE_PROGRESS=os.path.join(tempfile.gettempdir(), "gemm_course_test_progress.json"))
    return subprocess.run([sys.executable, "-m", "gemm_course", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_command_line_lists_and_grades_with_exit_codes(tmp_path):
    rows = json.loads(_cli("exercises", "--json").stdout)
    assert {r["id"] for r in rows} == {e.id for e in ALL} and {"id", "level", "kind"} <= set(rows[0])
    first = ex.get_exercise("02_missing_barrier")
    assert _cli("grade", first.id, "--solution").returncode == 0
    assert _cli("grade", first.id, "--starter").returncode == 1
    mine = tmp_path / "mine.cu"
    mine.write_text(first.solution)
    assert _cli("grade", first.id, str(mine)).returncode == 0
    broken = tmp_path / "broken.cu"
    broken.write_text(first.solution.replace(";", "", 1))
    result = _cli("grade", first.id, str(broken))
    assert result.returncode == 1 and "does not compile" in result.stdout and "Traceback" not in result.stderr
    for bad in (("grade", "no_such_exercise", "--starter"), ("grade", first.id), ("grade", first.id, "missing.cu")):
        result = _cli(*bad)
        assert result.returncode == 2 and "Traceback" not in result.stderr and result.stderr.strip()


def _code_cells(notebook: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("exercise", ALL, ids=[e.id for e in ALL])
def test_the_level_notebook_carries_the_exercise(exercise):
    notebook = next((ROOT / "notebooks").glob(f"{exercise.level}.ipynb"))
    cells = _code_cells(notebook)
    from gemm_course.exercises.cells import answer_variable

    answer = answer_variable(exercise)
    starter_cell = f'{answer} = r"""{exercise.starter}"""'
    assert any(cell.strip() == starter_cell.strip() for cell in cells), \
        f"{notebook.name} has no cell `{answer} = r\"\"\"...\"\"\"` identical to {exercise.id}'s starter"
    for call in (f'gc.notebook.exercise("{exercise.id}")', f'gc.notebook.grade("{exercise.id}", {answer})',
                 f'gc.notebook.hint("{exercise.id}", 1)', f'gc.notebook.solution("{exercise.id}")'):
        assert any(call in cell for cell in cells), f"{notebook.name} lacks {call}"
