"""Exercises of the chapters outside the level registry (Level 0, 12 and 13; exercises/chapters.py):
every solution is solved, every starter fails at its step, and the answers a hurried learner would
write fail with a one-line verdict that names the mistake. No GPU needed."""
import json
import re
import time

import pytest

from gemm_course import exercises as ex
from gemm_course.exercises import chapters

CHAPTER_EXERCISES = [e for e in ex.exercises() if e.level in ex.CHAPTERS]
SEED = 2024


def _solution(exercise_id: str) -> str:
    return ex.get_exercise(exercise_id).solution


def _edit(exercise_id: str, old: str, new: str) -> str:
    """The solution with one piece of text replaced (which must be there)."""
    text = _solution(exercise_id)
    assert old in text, f"{exercise_id}: {old!r} is not in the solution"
    return text.replace(old, new, 1)


def _graded(exercise_id: str, source: str, seed: int = SEED) -> ex.Verdict:
    start = time.perf_counter()
    verdict = ex.grade(exercise_id, source, seed=seed)
    assert time.perf_counter() - start < 30, f"grading {exercise_id} took over 30 s"
    for step in verdict.steps:  # both languages, no traceback
        assert step.en and re.search(r"[\u4e00-\u9fff]", step.zh), step
        assert "Traceback" not in step.en + step.zh, step
    return verdict


def test_every_chapter_has_two_exercises_and_one_written_from_an_empty_body():
    for chapter in ex.CHAPTERS:
        mine = ex.exercises(chapter)
        assert len(mine) >= 2, chapter
        assert any(e.kind == "write" for e in mine), chapter
        for e in mine:
            data = json.loads((e.folder / "exercise.json").read_text(encoding="utf-8"))
            assert data["runner"] in chapters.TASKS and data["task"] in chapters.TASKS[data["runner"]]
            assert len(e.hints) >= 2 and e.starter != e.solution
            assert '"""' not in e.starter  # the notebook holds the starter in a r"""...""" cell


@pytest.mark.parametrize("exercise", CHAPTER_EXERCISES, ids=[e.id for e in CHAPTER_EXERCISES])
def test_solution_is_solved_at_another_seed(exercise):
    """tests/test_exercises.py grades each solution and starter once; the drawn shape changes with the seed
    (the fixed edge shapes do not), so the solution must hold at a second one too."""
    solved = _graded(exercise.id, exercise.solution, 7)
    assert solved.status == "solved", str(solved)


# (exercise, what the hurried learner wrote, the step that must fail, words the verdict must say)
WRONG = [
    # Level 0: a grid-stride loop
    ("00_grid_stride_saxpy", lambda: _edit("00_grid_stride_saxpy", "; i < n; i += threads_in_grid)", "; i < n; i += n)"),
     "correct", "never updated"),  # one element per thread: a grid smaller than n leaves the rest
    ("00_grid_stride_saxpy", lambda: _edit("00_grid_stride_saxpy", "i += threads_in_grid", "i += blockDim.x"),
     "blockconflict", "keep to its own part"),  # a block's stride: the blocks overlap (two blocks on one element)
    ("00_grid_stride_saxpy", lambda: _edit("00_grid_stride_saxpy",
                                           "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += threads_in_grid)\n"
                                           "        y[i] = a * x[i] + y[i];",
                                           "int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                           "    do { y[i] = a * x[i] + y[i]; i += threads_in_grid; } while (i < n);"),
     "memory", "out of bounds"),  # the guard checked only after the first element
    # Level 0: a 2-D launch
    ("00_launch_2d_transpose", lambda: _edit("00_launch_2d_transpose", "out[c * rows + r]", "out[c * cols + r]"),
     None, ""),  # the wrong row length of out: wrong elements or a write past its end
    ("00_launch_2d_transpose", lambda: _edit("00_launch_2d_transpose", "if (r >= rows || c >= cols) return;", "if (r >= rows) return;"),
     "memory", "out of bounds"),  # a guard on one dimension only
    ("00_launch_2d_transpose", lambda: _edit("00_launch_2d_transpose", "out[c * rows + r] = in[r * cols + c];",
                                      "out[r * cols + c] = in[r * cols + c];"),
     "correct", "holds in["),  # a copy, not a transpose
    # Level 0: the barrier after an early return
    ("00_return_before_barrier", lambda: _edit("00_return_before_barrier", "    __syncthreads();\n", ""),
     "race", "race"),  # the barrier removed instead of the return
    ("00_return_before_barrier", lambda: _edit("00_return_before_barrier", "tile[len - 1 - t]", "tile[blockDim.x - 1 - t]"),
     "correct", "mirror"),  # the short slice mirrored as if it were whole
    ("00_return_before_barrier", lambda: _solution("00_return_before_barrier").replace("if (t < len) ", ""),
     "memory", "out of bounds"),  # the guards dropped altogether
    # Level 12: rows of a rank
    ("12_row_split_uneven", lambda: "def my_rows(M, world_size, rank):\n    s = M // world_size\n"
                                    "    return rank * s, (rank + 1) * s\n",
     "correct", "to no rank"),
    ("12_row_split_uneven", lambda: "def my_rows(M, world_size, rank):\n    s = -(-M // world_size)\n"
                                    "    return min(M, rank * s), min(M, (rank + 1) * s)\n",
     "correct", "busiest"),  # ceil-sized shares: the last rank runs short
    ("12_row_split_uneven", lambda: "def my_rows(M, world_size, rank):\n    s = M // world_size\n"
                                    "    return rank * s, (rank + 1) * s + M % world_size\n",
     "correct", "ranks at once"),  # the remainder given to every rank
    ("12_row_split_uneven", lambda: "def my_rows(M, world_size, rank):\n    base, extra = divmod(M, world_size)\n"
                                    "    r = world_size - 1 - rank\n    first = r * base + min(r, extra)\n"
                                    "    return first, first + base + (1 if r < extra else 0)\n",
     "correct", "rank order"),  # a right partition, numbered backwards: the gather puts the blocks in reverse
    ("12_row_split_uneven", lambda: "def my_rows(M, world_size, rank):\n    return M / world_size * rank, M\n",
     "correct", "two ints"),
    ("12_row_split_uneven", lambda: "def my_rows(M, world_size, rank):\n    return divmod(M, world_size - rank - 1)\n",
     "run", "ZeroDivisionError"),
    ("12_row_split_uneven", lambda: "def my_rows(M, world_size, rank)\n    return 0, M\n", "answer", "line 1"),
    ("12_row_split_uneven", lambda: "from gemm_course.multigpu.tensor_parallel import split_even\n"
                                    "def my_rows(M, world_size, rank):\n    return split_even(M, world_size)[rank]\n",
     "answer", "gemm_course"),
    ("12_row_split_uneven", lambda: "def rows(M, world_size, rank):\n    return 0, M\n", "answer", "no function my_rows"),
    # Level 12: the ring all-reduce's time
    ("12_allreduce_ring_cost", lambda: "def ring_all_reduce_seconds(n_bytes, P, alpha, beta):\n"
                                        "    return (P - 1) * alpha + (P - 1) / P * n_bytes * beta\n",
     "correct", "latency term"),  # the reduce-scatter alone
    ("12_allreduce_ring_cost", lambda: "def ring_all_reduce_seconds(n_bytes, P, alpha, beta):\n"
                                        "    return 2 * (P - 1) * alpha + 2 * (P - 1) * n_bytes * beta\n",
     "correct", "bandwidth term"),  # every step sends the whole buffer
    ("12_allreduce_ring_cost", lambda: "import math\ndef ring_all_reduce_seconds(n_bytes, P, alpha, beta):\n"
                                        "    L = math.ceil(math.log2(P))\n"
                                        "    return 2 * L * alpha + 2 * (P - 1) / P * n_bytes * beta\n",
     "correct", "latency term"),  # the tree's latency
    ("12_allreduce_ring_cost", lambda: "def ring_all_reduce_seconds(n_bytes, P, alpha, beta):\n    return 'fast'\n",
     "correct", "one finite number"),
    ("12_allreduce_ring_cost", lambda: "", "answer", "empty"),
    # Level 12: the overlap of chunks
    ("12_tp_overlap_pipeline", lambda: "def overlapped_seconds(compute_s, comm_s):\n"
                                    "    return sum(compute_s) + comm_s[-1]\n",
     "correct", "communication the longer stage"),  # right only while the GEMMs are the longer stage
    ("12_tp_overlap_pipeline", lambda: "def overlapped_seconds(compute_s, comm_s):\n"
                                    "    return max(sum(compute_s), sum(comm_s))\n",
     "correct", "one chunk"),  # perfect overlap, even of the first GEMMs and the last collective
    ("12_tp_overlap_pipeline", lambda: "def overlapped_seconds(compute_s, comm_s):\n    n = len(compute_s)\n"
                                    "    return compute_s[0] + (n - 1) * max(compute_s[0], comm_s[0]) + comm_s[-1]\n",
     "correct", "unequal times"),  # the formula for equal chunks
    # Level 13: the 1x128 quantiser
    ("13_block_quantize_1x128", lambda: _edit("13_block_quantize_1x128", "const int first = s * 128, end = min(K, first + 128);",
                                        "const int first = 0, end = K;"),
     "blockconflict", "keep to its own part"),  # every strip's thread writes the whole row: blocks overlap
    ("13_block_quantize_1x128", lambda: _edit("13_block_quantize_1x128", "    for (int k = first; k < end; ++k)\n        amax = ",
                                        "    for (int k = 0; k < M * K; ++k)\n        amax = ").replace(
                                            "fabsf(row[k])", "fabsf(a[k])"),
     "correct", "every scale is the same"),  # one scale for the whole tensor
    ("13_block_quantize_1x128", lambda: _edit("13_block_quantize_1x128", "const int strips = (K + 127) / 128;",
                                        "const int strips = K / 128;"),
     "correct", "never written"),  # the short last strip forgotten
    ("13_block_quantize_1x128", lambda: _edit("13_block_quantize_1x128", "amax == 0.0f ? 1.0f : amax / 448.0f",
                                        "amax == 0.0f ? 1.0f : 448.0f / amax"),
     "correct", "inverse"),
    ("13_block_quantize_1x128", lambda: _edit("13_block_quantize_1x128", "amax == 0.0f ? 1.0f : amax / 448.0f", "amax / 448.0f"),
     "correct", "all zeros"),
    ("13_block_quantize_1x128", lambda: _edit("13_block_quantize_1x128", "encode_e4m3(row[k] / scale)", "encode_e4m3(row[k])"),
     "correct", "rounds to"),  # the scale stored but never applied
    # Level 13: promotion
    ("13_promote_per_kblock", lambda: _edit("13_promote_per_kblock",
                                            "acc += part * (a_scales[(size_t)m * KB + kb] * b_scales[(size_t)(n / 128) * KB + kb]);\n    }\n"
                                            "    C[(size_t)m * N + n] = acc;",
                                            "acc += part;\n    }\n"
                                            "    C[(size_t)m * N + n] = acc * a_scales[(size_t)m * KB + KB - 1] * "
                                            "b_scales[(size_t)(n / 128) * KB + KB - 1];"),
     "correct", "scaling once, with the last k-block's scales"),
    ("13_promote_per_kblock", lambda: _edit("13_promote_per_kblock", "b_scales[(size_t)(n / 128) * KB + kb]",
                                            "b_scales[(size_t)n * KB + kb]"),
     "memory", "b_scales"),  # a scale per column of B instead of per 128×128 tile
    ("13_promote_per_kblock", lambda: _edit("13_promote_per_kblock", "end = min(K, first + 128)", "end = first + 128"),
     None, ""),  # the short last k-block read in full: past the end of A, or wrong
    ("13_promote_per_kblock", lambda: _edit("13_promote_per_kblock", "a_scales[(size_t)m * KB + kb]",
                                            "a_scales[(size_t)m * (K / 128) + kb]"),
     None, ""),  # the scales' row length without the short block
]


@pytest.mark.parametrize("exercise_id,make,step,words", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_a_hurried_answer_fails_with_a_clear_verdict(exercise_id, make, step, words):
    verdict = _graded(exercise_id, make())
    assert verdict.status == "failed", str(verdict)
    failed = next(s for s in verdict.steps if s.passed is False)
    if step is not None:
        assert failed.name == step, str(verdict)
    assert words in failed.en, str(verdict)


def test_broken_kernel_files_get_one_line_verdicts():
    solution = _solution("00_grid_stride_saxpy")
    renamed = _graded("00_grid_stride_saxpy", solution.replace("void saxpy(", "void my_saxpy("))
    assert renamed.failed_step == "source" and "my_saxpy" in renamed.steps[0].en
    empty = _graded("13_block_quantize_1x128", "  \n")
    assert empty.failed_step == "source" and "empty" in empty.steps[0].en
    borrowed = _graded("13_promote_per_kblock", '#include "13_fp8_blockscaled.cu"\n' + _solution("13_promote_per_kblock"))
    assert borrowed.failed_step == "source" and "#include" in borrowed.steps[0].en
    broken = _graded("00_launch_2d_transpose", _solution("00_launch_2d_transpose").replace("return;", "return"))
    assert broken.failed_step == "compile" and "my_kernel.cu" in broken.steps[0].en
    assert len(broken.steps[0].en.splitlines()) <= 7  # the first error lines only
    signature = _graded("00_launch_2d_transpose", _solution("00_launch_2d_transpose").replace("int rows, int cols", "int rows, unsigned cols"))
    assert signature.failed_step == "signature" and "int rows, int cols" in signature.steps[-1].en


def test_the_learners_file_name_is_in_the_messages():
    verdict = ex.grade("12_row_split_uneven", "def my_rows(M, world_size, rank)\n", file_name="rows.py", seed=1)
    assert verdict.failed_step == "answer" and "rows.py" in verdict.steps[0].en
    compiled = ex.grade("13_promote_per_kblock", "__global__ void fp8_gemm_blockwise(", file_name="mine.cu", seed=1)
    assert compiled.failed_step == "compile" and "mine.cu" in compiled.steps[0].en


def test_an_endless_python_answer_is_stopped(monkeypatch):
    monkeypatch.setattr(chapters, "PYTHON_TIMEOUT_S", 1.0)
    verdict = _graded("12_allreduce_ring_cost", "def ring_all_reduce_seconds(n_bytes, P, alpha, beta):\n"
                                                 "    while True:\n        pass\n")
    assert verdict.failed_step == "run" and "did not finish" in verdict.steps[-1].en


def test_prints_in_a_python_answer_are_fine_and_numpy_is_refused_in_one_line():
    answer = ("import math\nprint('hello')\n"
              "def my_rows(M, world_size, rank):\n    base, extra = divmod(M, world_size)\n"
              "    first = rank * base + min(rank, extra)\n    print(first)\n"
              "    return int(math.floor(first)), first + base + (rank < extra)\n")
    assert _graded("12_row_split_uneven", answer).status == "solved"
    # no Level 12 statement offers NumPy ("`math` is fine"): the answer's interpreter has none
    refused = _graded("12_row_split_uneven", "import numpy as np\n" + answer)
    assert refused.failed_step == "answer" and "import numpy" in refused.steps[0].en and "math" in refused.steps[0].en


def test_a_kernel_that_never_ends_is_stopped(monkeypatch):
    monkeypatch.setattr(chapters, "KERNEL_TIMEOUT_S", 1.0)
    # block 0's stride is 0: its threads never leave the loop
    endless = _edit("00_grid_stride_saxpy", "i += threads_in_grid", "i += blockIdx.x * blockDim.x")
    verdict = _graded("00_grid_stride_saxpy", endless)
    assert verdict.failed_step == "timeout" and "neither reached" not in verdict.steps[-1].zh, str(verdict)


# Other right answers: the grader checks the result, not the spelling of the one reference solution.
RIGHT = [
    ("00_grid_stride_saxpy", lambda: _edit("00_grid_stride_saxpy",
                                           "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += threads_in_grid)\n"
                                           "        y[i] = a * x[i] + y[i];",
                                           "int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                           "    while (i < n) { y[i] = fmaf(a, x[i], y[i]); i += threads_in_grid; }")),
    ("00_launch_2d_transpose", lambda: _edit("00_launch_2d_transpose", "if (r >= rows || c >= cols) return;",
                                      "if (r < rows && c < cols)").replace("out[c * rows + r] = in[r * cols + c];",
                                                                           "    out[(size_t)c * rows + r] = in[(size_t)r * cols + c];")),
    ("13_block_quantize_1x128", lambda: _edit("13_block_quantize_1x128", "amax == 0.0f ? 1.0f : amax / 448.0f",
                                        "amax == 0.0f ? 1.0f : amax * (1.0f / 448.0f)").replace(
                                            "encode_e4m3(row[k] / scale)", "encode_e4m3(row[k] * (1.0f / scale))")),
    ("13_promote_per_kblock", lambda: _edit("13_promote_per_kblock",
                                            "acc += part * (a_scales[(size_t)m * KB + kb] * b_scales[(size_t)(n / 128) * KB + kb]);",
                                            "acc = fmaf(part, a_scales[(size_t)m * KB + kb] * b_scales[(size_t)(n / 128) * KB + kb], acc);")),
    ("12_row_split_uneven", lambda: "def my_rows(M, world_size, rank):\n"
                                    "    rows = [M // world_size + (r < M % world_size) for r in range(world_size)]\n"
                                    "    return sum(rows[:rank]), sum(rows[:rank + 1])\n"),
    ("12_allreduce_ring_cost", lambda: "def ring_all_reduce_seconds(n_bytes, P, alpha, beta):\n"
                                        "    reduce_scatter = (P - 1) * (alpha + n_bytes / P * beta)\n"
                                        "    return 2 * reduce_scatter\n"),
]


@pytest.mark.parametrize("exercise_id,make", RIGHT, ids=[r[0] for r in RIGHT])
def test_another_right_answer_is_solved(exercise_id, make):
    for seed in (SEED, 11):
        verdict = _graded(exercise_id, make(), seed)
        assert verdict.status == "solved", str(verdict)


def test_the_kernel_or_function_each_exercise_names_is_in_its_starter():
    for e in CHAPTER_EXERCISES:
        if e.kind == "predict":  # numbers, not code: its names are the quantities of its "predict" check
            continue
        name = e.data.get("kernel") or e.data.get("function")
        assert name and f"{name}(" in e.starter and f"{name}(" in e.solution, e.id
