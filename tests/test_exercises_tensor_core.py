"""The Tensor Core exercises (Levels 9–11) without a GPU: each reference solution passes every step that
runs here (index math, GPU build, instruction mix) and is left "not verified" only for the GPU run; each
starter fails at the index math; the wrong answers a hurried student writes fail there with a message
that names the wrong input; the check refuses what it cannot check with one line."""
import time

import pytest

from gemm_course import exercises as ex
from gemm_course.exercises import index_math
from gemm_course.exercises.grade import Attempt

TENSOR_CORE = [e for e in ex.exercises() if e.number in (9, 10, 11)]


def test_each_tensor_core_level_has_two_exercises_checked_by_index_math():
    for number in (9, 10, 11):
        mine = [e for e in TENSOR_CORE if e.number == number]
        assert len(mine) >= 2, f"Level {number}: {[e.id for e in mine]}"
        for e in mine:
            kinds = [c["type"] for c in e.checks]
            assert kinds[0] == "index_math" and "sass" in kinds, (e.id, kinds)
            assert e.data["starter_fails"] == "index_math"
            assert len(e.hints) >= 3


@pytest.mark.parametrize("exercise", TENSOR_CORE, ids=[e.id for e in TENSOR_CORE])
def test_solution_reaches_not_verified_and_starter_fails(exercise):
    start = time.perf_counter()
    solved = ex.grade(exercise.id, exercise.solution, seed=1)
    assert [s.name for s in solved.steps][:3] == ["compile", "index_math", "sass"], str(solved)
    assert all(s.passed for s in solved.steps if s.name != "gpu"), str(solved)
    assert solved.status == "not_verified" and solved.exit_code == 3, str(solved)
    assert "COMPILED — not verified without a GPU" in str(solved)
    started = ex.grade(exercise.id, exercise.starter, seed=1)
    assert started.status == "failed" and started.failed_step == "index_math", str(started)
    assert time.perf_counter() - start < 30  # both gradings, first compilations included


# (exercise, text of the solution, what a hurried student writes instead, words the verdict must hold)
WRONG = [
    ("09_wmma_fragments", "return ((warp / warps_n) * 32 + 16 * i) * lda + kk;",
     "return ((warp % warps_n) * 32 + 16 * i) * lda + kk;", ["a_tile_offset(warp=1", "expected 1280", "row 32"]),
    ("09_wmma_fragments", "return ((warp / warps_n) * 32 + 16 * i) * lda + kk;",
     "return ((warp / warps_n) * 32 + 16 * i) * 32 + kk;", ["a_tile_offset(", "lda=40", "expected 640"]),
    ("09_wmma_fragments", "return kk * ldb + (warp % warps_n) * 32 + 16 * j;",
     "return kk * ldb + (warp % warps_n) * 32 + 8 * j;", ["b_tile_offset(", "j=1", "column 16"]),
    ("09_pipeline_stages", "return k_tile % stages;", "return k_tile % (stages - 1);",
     ["iteration 0 copies k-tile 1", "still holds k-tile 0"]),
    ("09_pipeline_stages", "return stages - 2;", "return stages - 1;",
     ["groups_in_flight(2) = 1", "before its copies have landed", "expected 0"]),
    ("09_pipeline_stages", "return stages - 2;", "return 0;", ["groups_in_flight(3) = 0", "correct but slow"]),
    ("10_ldmatrix", "return swizzle_a(tile_row + lane % 16, kk / 8 + lane / 16);",
     "return swizzle_a(tile_row + lane / 4, kk / 8 + lane / 16);", ["lane 0, register 1", "your row 2, expected 8"]),
    ("10_ldmatrix", "return swizzle_a(tile_row + lane % 16, kk / 8 + lane / 16);",
     "return swizzle_a(tile_row + lane % 16, kk / 8 + (lane / 8) % 2);",
     ["lane 0, register 1", "your columns 8–9, expected 0–1"]),
    ("10_ldmatrix", "return swizzle_a(tile_row + lane % 16, kk / 8 + lane / 16);",
     "return (tile_row + lane % 16) * 4 + kk / 8 + lane / 16;", ["unswizzled", "swizzle_a"]),
    ("10_mma_fragments", "return lane / 4 + 8 * (reg / 2);", "return lane % 4 + 8 * (reg / 2);",
     ["lane 1, accumulator register 0", "your row 1", "expected row 0"]),
    ("10_mma_fragments", "return 2 * (lane % 4) + reg % 2;", "return 2 * (lane % 4) + reg % 2 + 8 * (reg / 2);",
     ["accumulator register 2", "column 8", "expected row 8, column 0"]),
    ("10_mma_fragments", "return lane / 16;  //", "return (lane / 8) % 2;  //",
     ["lane 0, register 1 (b[2j][1]", "expected k rows 8, 9 at column n 0"]),
    ("11_consumer_handshake", "return (it / stages) % 2;", "return 0;",
     ["passes its wait on full[0]", "has not landed", "full_parity(2, 2) = 0, expected 1", "after it wraps"]),
    ("11_consumer_handshake", "return (it / stages) % 2;", "return it % 2;",
     ["full_parity(1, 2) = 1, expected 0", "has not landed"]),
    ("11_consumer_handshake", "return it % stages;", "return (it + 1) % stages;",
     ["deadlock", "waits on full[1]", "stage_of(0, 2) = 1, expected 0"]),
    ("11_producer_ring", "return (it / stages + 1) % 2;", "return (it / stages) % 2;",
     ["deadlock", "producer waits on empty[0] with parity 0", "empty_parity(0, 2) = 0, expected 1"]),
    ("11_producer_ring", "return (it / stages + 1) % 2;", "return 1;",
     ["refills stage 0 with k-tile 2", "empty_parity(2, 2) = 1, expected 0", "after it wraps"]),
    ("11_producer_ring", "return it % stages;", "return it % (stages - 1);", ["stage_of(1, 2) = 0, expected 1"]),
]


@pytest.mark.parametrize("exercise_id, right, wrong, words", WRONG, ids=[f"{w[0]}:{w[2]}" for w in WRONG])
def test_a_hurried_answer_fails_at_the_index_math_with_a_clear_message(exercise_id, right, wrong, words):
    e = ex.get_exercise(exercise_id)
    assert e.solution.count(right) == 1
    verdict = ex.grade(exercise_id, e.solution.replace(right, wrong), seed=1)
    assert verdict.status == "failed" and verdict.failed_step == "index_math", str(verdict)
    step = next(s for s in verdict.steps if s.name == "index_math")
    for word in words:
        assert word in step.en, f"{word!r} not in: {step.en}"
    assert step.zh and step.zh != step.en and "\n" not in step.en


def _index_math(exercise_id: str, source: str):
    e = ex.get_exercise(exercise_id)
    return index_math.check(Attempt(e, source), next(c for c in e.checks if c["type"] == "index_math"))


@pytest.mark.parametrize("change, words", [
    (("__device__ __forceinline__ int stage_of(int k_tile, int stages)",
      "#if 1\n__device__ __forceinline__ int stage_of(int k_tile, int stages)"), ["inside an #if"]),
    (("return k_tile % stages;", "return (threadIdx.x + k_tile) % stages;"), ["uses `threadIdx`", "pure function"]),
    (("__device__ __forceinline__ int stage_of(int k_tile, int stages)",
      "__device__ __forceinline__ float stage_of(int k_tile, int stages)"), ["must return an integer"]),
    (("__device__ __forceinline__ int stage_of(int k_tile, int stages)",
      "__device__ __forceinline__ int stage_of(int k_tile)"), ["takes 2 int arguments", "yours takes 1"]),
    (("__device__ __forceinline__ int stage_of(int k_tile, int stages)", "__device__ __forceinline__ int ring_stage(int k_tile, int stages)"),
     ["no definition of the function `stage_of`"]),
    (("return k_tile % stages;", "return k_tile % stagez;"), ["do not compile on their own", "stagez"]),
    (("return k_tile % stages;", "return k_tile % (stages - 2);"), ["crashed"]),
])
def test_what_cannot_be_checked_is_refused_in_one_line(change, words):
    e = ex.get_exercise("09_pipeline_stages")
    old, new = change
    assert e.solution.count(old) == 1
    step = _index_math(e.id, e.solution.replace(old, new))
    assert step.passed is False and "\n" not in step.en and step.zh, step.en
    for word in words:
        assert word in step.en, f"{word!r} not in: {step.en}"


def test_a_right_function_beside_a_kernel_that_does_not_use_it_fails():
    e = ex.get_exercise("10_ldmatrix")
    call = "smem_u32(as + a_ldmatrix_chunk(lane, wm + i * 16, kk))"
    assert e.solution.count(call) == 1
    hand_written = e.solution.replace(call, "smem_u32(as + swizzle_a(wm + i * 16 + lane % 8, kk / 8 + lane / 16))")
    step = _index_math(e.id, hand_written)
    assert step.passed is False and "never called" in step.en
    commented = e.solution.replace(call, "smem_u32(as /* a_ldmatrix_chunk(lane, wm, kk) */)")
    assert "never called" in _index_math(e.id, commented).en


def test_the_mbarrier_model_follows_the_ptx_parity_rule():
    bar = index_math._Barrier(2)
    assert bar.passes(1) and not bar.passes(0)   # phase 0 in progress: the phase "before" it (parity 1) counts as done
    bar.arrive()
    assert not bar.passes(0)                     # one of two arrivals: phase 0 still pending
    bar.arrive()
    assert bar.passes(0) and not bar.passes(1)   # phase 0 complete, phase 1 in progress


@pytest.mark.parametrize("exercise_id, right, wrong, words", [
    ("11_consumer_handshake", "if (releaser) mbar_arrive(smem_u32(&empty[s]));",
     "if (releaser) mbar_arrive(smem_u32(&empty[s]));\n            __syncthreads();", ["BAR.SYNC", "at most 1"]),
    ("09_pipeline_stages", "                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a, b[j], acc[i][j]);\n            }\n        }\n",
     "                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a, b[j], acc[i][j]);\n            }\n        }\n"
     "        __syncthreads();\n", ["BAR.SYNC", "at most 2"]),
])
def test_the_block_barrier_the_lesson_removes_is_bounded(exercise_id, right, wrong, words):
    """Right index math, but a block barrier per k-tile the ring does not need (step 2's habit, or
    wmma_shared's second barrier): the instruction mix says so."""
    e = ex.get_exercise(exercise_id)
    assert e.solution.count(right) == 1
    verdict = ex.grade(exercise_id, e.solution.replace(right, wrong), seed=1)
    assert verdict.failed_step == "sass", str(verdict)
    step = next(s for s in verdict.steps if s.name == "sass")
    assert all(w in step.en for w in words), step.en
