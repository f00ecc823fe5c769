"""Exercises: every reference solution passes, every starter fails with the diagnostic its exercise is
about, the command line answers with the right exit codes, and each level's notebook carries its
exercises (the starter cell identical to starter.cu). No GPU needed."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemm_course import exercises as ex
from gemm_course.levels import get_level, levels

ROOT = Path(__file__).resolve().parents[1]
ALL = ex.exercises()


def test_at_least_two_exercises_per_simt_level_and_one_per_tensor_core_level():
    for lv in levels():
        count = len(ex.exercises(lv.id))
        assert count >= (1 if lv.uses_tensor_cores else 2), f"{lv.id} has {count} exercises"


def test_each_exercise_is_complete_in_both_languages():
    for e in ALL:
        assert e.kind in ex.KINDS and e.title_en and e.title_zh and e.statement_en and e.statement_zh
        assert len(e.hints) >= 2 and all(en and zh for en, zh in e.hints)
        assert e.starter != e.solution
        data = json.loads((e.folder / "exercise.json").read_text(encoding="utf-8"))
        assert data.get("starter_fails"), f"{e.id}: say which step the starter fails (starter_fails)"


@pytest.mark.parametrize("exercise", ALL, ids=[e.id for e in ALL])
def test_solution_passes_and_starter_fails_where_the_lesson_is(exercise):
    start = time.perf_counter()
    solved = ex.grade(exercise.id, exercise.solution)
    assert solved.passed, str(solved)
    assert all(step.passed is not None for step in solved.steps
               if step.name != "gpu"), f"a check did not run here:\n{solved}"
    started = ex.grade(exercise.id, exercise.starter)
    expected = json.loads((exercise.folder / "exercise.json").read_text(encoding="utf-8"))["starter_fails"]
    assert not started.passed and started.failed_step == expected, str(started)
    assert time.perf_counter() - start < 30  # both gradings, first compilations included


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gemm_course", *args], capture_output=True, text=True, timeout=300)


def test_command_line_lists_and_grades_with_exit_codes(tmp_path):
    rows = json.loads(_cli("exercises", "--json").stdout)
    assert {r["id"] for r in rows} == {e.id for e in ALL} and {"id", "level", "kind"} <= set(rows[0])
    first = ALL[0]
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
    starter_cell = f'my_kernel = r"""{exercise.starter}"""'
    assert any(cell.strip() == starter_cell.strip() for cell in cells), \
        f"{notebook.name} has no cell `my_kernel = r\"\"\"...\"\"\"` identical to {exercise.id}/starter.cu"
    for call in (f'gc.notebook.exercise("{exercise.id}")', f'gc.notebook.grade("{exercise.id}", my_kernel)',
                 f'gc.notebook.hint("{exercise.id}", 1)', f'gc.notebook.solution("{exercise.id}")'):
        assert any(call in cell for cell in cells), f"{notebook.name} lacks {call}"
