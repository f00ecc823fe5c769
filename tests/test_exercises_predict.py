"""Predict-then-check exercises (Levels 1-8): the reference predictions pass against live measurements,
the starter fails where it should, one quantity off fails naming only it and revealing nothing, the
numbers the level's page prints for its own setting fail, and malformed answers get a one-line verdict.
No GPU needed (the CPU backend's access profile and NVRTC's compile report)."""
import re
import time

import pytest

from gemm_course import exercises as ex
from gemm_course.exercises import predict

MINE = [e for e in ex.exercises() if e.kind == "predict" and e.runner == "prediction" and 1 <= e.number <= 8]


def _quantities(e):
    return [q for c in e.checks if c["type"] == "predict" for q in c["quantities"]]


def _answer(values: dict) -> str:
    return "\n".join(f"{name} = {value!r}" for name, value in values.items()) + "\n"


def _solution_values(e) -> dict:
    parsed = predict.parse_answer(e.solution, [q["name"] for q in _quantities(e)])
    assert parsed.problem is None, parsed.problem
    return parsed.values


def test_one_prediction_exercise_per_simt_level():
    assert sorted(e.number for e in MINE) == list(range(1, 9))


@pytest.mark.parametrize("exercise", MINE, ids=[e.id for e in MINE])
def test_exercise_is_well_formed(exercise):
    data = exercise.data
    qs = _quantities(exercise)
    names = [q["name"] for q in qs]
    assert len(qs) >= 3 and len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names)
    assert data["starter_fails"] == "answer" and len(exercise.hints) >= 3
    assert exercise.starter == predict.starter_text(data), "starter.txt: regenerate with predict.starter_text"
    for q in qs:
        assert q["what"]["en"] and q["what"]["zh"] and q["why"]["en"] and q["why"]["zh"]
        assert set(q["tolerance"]) in ({"abs"}, {"rel"})
        # the statement names every quantity, in both languages
        assert f"`{q['name']}`" in exercise.statement_en and f"`{q['name']}`" in exercise.statement_zh


@pytest.mark.parametrize("exercise", MINE, ids=[e.id for e in MINE])
def test_solution_is_solved_and_shows_the_measured_values(exercise):
    start = time.perf_counter()
    verdict = ex.grade(exercise.id, exercise.solution)
    assert verdict.status == "solved", str(verdict)
    shown = {s.name: s for s in verdict.steps}
    for q in _quantities(exercise):
        assert shown[q["name"]].passed is True and "measured" in shown[q["name"]].en and "实测" in shown[q["name"]].zh
    started = ex.grade(exercise.id, exercise.starter)
    assert started.failed_step == "answer" and len(started.steps) == 1, str(started)
    assert "?" in started.steps[0].en or "no prediction" in started.steps[0].en
    assert time.perf_counter() - start < 30


@pytest.mark.parametrize("exercise", MINE, ids=[e.id for e in MINE])
def test_one_quantity_off_fails_naming_only_it(exercise):
    right = _solution_values(exercise)
    names = list(right)
    for name in names:
        wrong = dict(right, **{name: right[name] * 2 + 1})  # outside any tolerance used here
        verdict = ex.grade(exercise.id, _answer(wrong))
        assert verdict.failed_step == "predict", f"{name}: {verdict}"
        step = verdict.steps[-1]
        assert len(verdict.steps) == 2 and step.passed is False
        assert step.en.split(":", 1)[1].split("(", 1)[0].strip() == name
        assert name in step.zh
        # nothing measured is shown: neither the value nor whether the guess is too high or too low
        value = predict._show(right[name])
        if len(value) >= 3:
            assert value not in step.en and value not in step.zh
        assert not re.search(r"\b(too (high|low)|higher|lower|larger|smaller)\b", step.en)


# What a hurried learner copies from the level's page: the numbers of the page's own setting (the
# default, or tile 32), most of them printed there. Each exercise asks about a setting where they are wrong.
PAGE_NUMBERS = {
    "01_predict_sectors": dict(sectors_a=1, sectors_b=4, sectors_c=4, blocks_per_sm=8),
    "02_predict_reuse": dict(loads_per_fma=2 / 32, shared_bytes=8192, blocks_per_sm=2, read_gb=2.147),
    "03_predict_conflicts": dict(sectors_strided=32, store_strided=32, store_km=32, store_km_padded=1),
    "04_predict_prefetch": dict(shared_bytes=16384, a_loads_per_warp=4, fma_per_thread=128, blocks_per_sm=2),
    "05_predict_register_tile": dict(fma_per_shared_value=4, copies_per_thread_per_ktile=8, shared_bytes=16640,
                                     sectors_c_store=32, blocks_per_sm=2),
    "06_predict_epilogue": dict(sectors_bias=16, sectors_old_c=32, sectors_c_store=32, bias_loads_per_thread=64),
    "07_predict_vector_counts": dict(loads_per_thread_per_ktile=2, shared_stores_per_thread_per_ktile=5,
                                     c_stores_per_thread=16, sectors_c_store=16),
    "08_predict_warp_tile": dict(threads_per_block=256, lds128_per_k=4, fma_per_lds128=16, shared_bytes=33280,
                                 a_store_wavefronts=2),
}


@pytest.mark.parametrize("exercise", MINE, ids=[e.id for e in MINE])
def test_numbers_copied_from_the_page_fail(exercise):
    copied = PAGE_NUMBERS[exercise.id]
    right = _solution_values(exercise)
    assert set(copied) == set(right)
    verdict = ex.grade(exercise.id, _answer(copied))
    assert verdict.failed_step == "predict", str(verdict)
    differing = [n for n in copied if not predict.within(copied[n], right[n], next(
        q["tolerance"] for q in _quantities(exercise) if q["name"] == n))]
    assert len(differing) >= len(copied) - 1  # at most one number coincides with the page's
    assert all(n in verdict.steps[-1].en for n in differing)


MALFORMED = [
    ("sectors_a 8\nsectors_b = 1\nsectors_c = 8\nblocks_per_sm = 16", "not of the form"),
    ("sector_a = 8\nsectors_b = 1\nsectors_c = 8\nblocks_per_sm = 16", "did you mean `sectors_a`"),
    ("sectors_a = 8\nsectors_a = 8\nsectors_b = 1\nsectors_c = 8\nblocks_per_sm = 16", "twice"),
    ("sectors_a = eight\nsectors_b = 1\nsectors_c = 8\nblocks_per_sm = 16", "not a number"),
    ("sectors_a = 8 sectors\nsectors_b = 1\nsectors_c = 8\nblocks_per_sm = 16", "not a number"),
    ("sectors_a = 8\nsectors_b = 1", "no prediction yet for sectors_c, blocks_per_sm"),
    ("", "no prediction yet"),
    ("__global__ void k() {\n  int i = 0;\n}\n", "not of the form"),
]


@pytest.mark.parametrize("answer, expected", MALFORMED)
def test_malformed_answer_gets_one_line_saying_what_to_fix(answer, expected):
    verdict = ex.grade("01_predict_sectors", answer)
    assert verdict.failed_step == "answer" and len(verdict.steps) == 1
    step = verdict.steps[0]
    assert expected in step.en and "\n" not in step.en and "\n" not in step.zh and step.zh


def test_answers_are_read_robustly():
    names = ["sectors_a", "sectors_b", "blocks_per_sm"]
    for text in ("sectors_a = 8\nsectors_b=1\nblocks_per_sm = 16",
                 "sectors_a = 8, sectors_b = 1; blocks_per_sm: 16",
                 "  Sectors A = 8   # a guess\nsectors-b = 1\nBLOCKS_PER_SM = 16",
                 "ｓｅｃｔｏｒｓ＿ａ ＝ ８\nsectors_b ＝ １\nblocks_per_sm：１６",
                 "sectors_a = 16/2\nsectors_b = 1.0\nblocks_per_sm = 1.6e1"):
        parsed = predict.parse_answer(text, names)
        assert parsed.problem is None and parsed.values == {"sectors_a": 8, "sectors_b": 1, "blocks_per_sm": 16}, text
    for raw, value in (("4,096", 4096), ("0,25", 0.25), ("12 544", 12544), ("12_544", 12544), (".5", 0.5),
                       ("8.59e9", 8.59e9), ("1/8", 0.125)):
        assert predict.parse_number(raw) == value, raw
    for raw in ("nan", "inf", "1/0", "1.2.3", "four", "4 sectors", "25%"):
        assert predict.parse_number(raw) is None, raw



def test_a_quantity_that_cannot_be_measured_here_is_not_verified(monkeypatch):
    import gemm_course.run.compile as compile_module

    def no_nvrtc(*args, **kwargs):
        raise RuntimeError("NVRTC (libnvrtc) was not found")

    monkeypatch.setattr(compile_module, "compile_report", no_nvrtc)
    exercise = ex.get_exercise("01_predict_sectors")
    verdict = ex.grade(exercise.id, exercise.solution)
    assert verdict.status == "not_verified", str(verdict)
    assert {s.name for s in verdict.steps if s.passed is None} == {"blocks_per_sm"}
    wrong = dict(_solution_values(exercise), sectors_a=3)
    assert ex.grade(exercise.id, _answer(wrong)).failed_step == "predict"
