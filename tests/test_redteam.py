"""The grader attacked: every answer under tests/redteam/ is graded and must get its expected verdict.

Each file is an answer to the exercise its folder names (tests/redteam/<exercise id>/<name>.cu|.txt|.py)
and starts with comment lines (`//` or `#`) saying what it tries and what it must get:

    // mechanism: one line: the cheat, the hurried mistake, or the near-miss it is
    // expect: failed <step>          (or: expect: solved)
    // message: a piece of the English text of the failed step   (optional)
    // wall: seconds the grading may take (optional: for an answer that never ends, a shorter limit)

A cheat must fail at the named step with a one-line message in both languages, and must not reach the
progress file; a near-miss (another index order, loop form or padding of a right answer) must be solved.
To add one: drop a file with that header into the exercise's folder; this test picks it up."""
import re
from pathlib import Path

import pytest

from gemm_course import exercises as ex

HERE = Path(__file__).parent / "redteam"
CASES = sorted(p for p in HERE.glob("*/*") if p.suffix in (".cu", ".txt", ".py"))


def _header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\s*(?://|#)\s*(mechanism|expect|message|seed|wall):\s*(.*?)\s*$", line)
        if m:
            fields[m.group(1)] = m.group(2)
        elif line.strip() and not line.lstrip().startswith(("//", "#")):
            break
    return fields


def test_every_case_says_what_it_tries_and_expects():
    assert CASES, "no red-team cases found"
    for path in CASES:
        fields = _header(path)
        assert fields.get("mechanism"), f"{path}: no '// mechanism:' line"
        assert re.fullmatch(r"solved|failed \w+", fields.get("expect", "")), f"{path}: bad '// expect:' line"
        ex.get_exercise(path.parent.name)  # the folder names an exercise


def _graded_as_expected(path: Path, tmp_path, monkeypatch) -> None:
    if ex.get_exercise(path.parent.name).runner == "dsl":  # Level 14's answers run in Triton's interpreter
        pytest.importorskip("triton", reason="Level 14's exercises need triton: pip install -e .[triton]")
    progress = tmp_path / "progress.json"
    monkeypatch.setenv("GEMM_COURSE_PROGRESS", str(progress))
    fields = _header(path)
    if "wall" in fields:
        monkeypatch.setenv("GEMM_COURSE_GRADE_WALL_S", fields["wall"])
    verdict = ex.grade(path.parent.name, path.read_text(encoding="utf-8"), file_name=path.name,
                       seed=int(fields.get("seed", 12345)))
    expect = fields["expect"].split()
    if expect[0] == "solved":
        assert verdict.status == "solved", str(verdict)
    else:
        assert verdict.status == "failed" and verdict.failed_step == expect[1], str(verdict)
        failed = next(s for s in verdict.steps if s.passed is False)
        assert fields.get("message", "") in failed.en, str(verdict)
        assert failed.zh and failed.zh != failed.en and "\n" not in failed.en.strip().split("\n")[0]
    assert not progress.exists()  # grading never writes progress by itself; the answer cannot either


def _cases_of(exercise_id: str) -> type:
    """One test class per exercise: pytest-xdist's --dist loadscope spreads classes over the workers."""
    mine = [p for p in CASES if p.parent.name == exercise_id]

    @pytest.mark.parametrize("path", mine, ids=[p.name for p in mine])
    def test_red_team_case(self, path: Path, tmp_path, monkeypatch) -> None:
        _graded_as_expected(path, tmp_path, monkeypatch)

    return type(f"TestRedTeam_{exercise_id}", (), {"test_red_team_case": test_red_team_case})


for _exercise in sorted({p.parent.name for p in CASES}):
    globals()[f"TestRedTeam_{_exercise}"] = _cases_of(_exercise)


def test_a_byte_order_mark_is_not_part_of_the_answer():
    solution = ex.get_exercise("01_naive_kernel").solution
    assert ex.grade("01_naive_kernel", "\ufeff" + solution, seed=1).status == "solved"


@pytest.mark.parametrize("answer, needle", [(None, "no answer given"), (b"\xff\xfe", "not UTF-8"),
                                            ("my_kernel.cu", "not its text"), (42, "pass its text")])
def test_an_answer_that_is_not_text_gets_one_line(answer, needle):
    verdict = ex.grade("01_naive_kernel", answer, seed=1)
    assert verdict.failed_step == "answer" and needle in verdict.steps[0].en, str(verdict)


@pytest.mark.parametrize("seed", [-5, "abc", 2**40, True])
def test_a_bad_seed_gets_one_line(seed):
    verdict = ex.grade("01_naive_kernel", ex.get_exercise("01_naive_kernel").solution, seed=seed)
    assert verdict.failed_step == "seed" and "whole number" in verdict.steps[0].en


def test_a_chosen_seed_is_marked_and_a_fresh_one_is_not():
    solution = ex.get_exercise("01_naive_kernel").solution
    assert ex.grade("01_naive_kernel", solution, seed=7).seed_chosen
    assert not ex.grade("01_naive_kernel", solution).seed_chosen
