"""The grader against a hurried student: for each way to pass an exercise without its lesson, a kernel
of our own that does it, and the verdict it must get. Each variant is made from the exercise's reference
solution by one edit, so it is otherwise right; each must fail at the named step. No GPU needed."""
import json
import re
import subprocess
import sys

import pytest

from gemm_course import exercises as ex


def _variant(exercise_id: str, old: str, new: str, count: int = 1) -> str:
    solution = ex.get_exercise(exercise_id).solution
    assert solution.count(old) >= count, f"{exercise_id}: the solution no longer contains {old!r}"
    return solution.replace(old, new)


def _fails_at(exercise_id: str, source: str, step: str, needle: str = "") -> None:
    verdict = ex.grade(exercise_id, source, seed=12345)
    assert verdict.status == "failed" and verdict.failed_step == step, str(verdict)
    failed = next(s for s in verdict.steps if s.passed is False)
    assert needle in failed.en, str(verdict)
    assert failed.zh and failed.zh != failed.en  # both languages, each its own


# --- shapes that were too narrow -------------------------------------------------------------------

def test_a_kernel_wrong_only_when_K_is_a_multiple_of_the_tile_fails():
    src = _variant("02_tiled_kloop", "for (int k0 = 0; k0 < K; k0 += TILE)",
                   "for (int k0 = 0; k0 < (K % TILE == 0 ? K - TILE : K); k0 += TILE)")
    _fails_at("02_tiled_kloop", src, "correct")


def test_dropping_the_column_block_offset_fails():
    src = _variant("05_outer_product", "blockIdx.x * BN", "0 * BN")  # every block column writes the first one
    _fails_at("05_outer_product", src, "blockconflict", "each block must keep to its own part")


def test_a_block_order_that_never_leaves_the_first_group_fails():
    src = _variant("08_block_order", "(blockIdx.x / per_group) * GROUP_M", "0 * GROUP_M")  # groups overlap
    _fails_at("08_block_order", src, "blockconflict", "each block must keep to its own part")


def test_graded_shapes_cover_tile_multiples_several_blocks_and_a_random_shape():
    from gemm_course.exercises.grade import graded_shapes, tile_shape
    from gemm_course.levels import get_level
    import numpy as np

    for exercise in ex.exercises():
        if exercise.runner != "level_kernel":
            continue
        lv = get_level(exercise.level)
        p = lv.resolve(**exercise.params)
        tm, tn, tk = tile_shape(lv, p)
        shapes = graded_shapes(lv, p, np.random.default_rng(1))
        assert any(M % tm == 0 and N % tn == 0 and K % tk == 0 and M > tm and N > tn for M, N, K in shapes)
        assert any(M > 2 * tm and N > 2 * tn for M, N, K in shapes), exercise.id  # three blocks each way
        assert any(K % tk for M, N, K in shapes) or tk == 1
        if p.get("group_m", 1) > 1:
            assert any(M > p["group_m"] * tm for M, N, K in shapes)
        other = graded_shapes(lv, p, np.random.default_rng(2))
        assert shapes[:-2] == other[:-2] and shapes[-2] != other[-2]  # the one before the last is the seed's
        M, N, K = shapes[-1]  # the last: many blocks, three groups of tile rows or more
        group = p.get("group_m", 1)
        assert -(-M // tm) * -(-N // tn) > 150 and -(-M // tm) >= 3 * group + 1 and M % tm and N % tn, exercise.id


def test_the_verdict_names_the_seed_and_the_same_seed_grades_the_same_shapes():
    first = ex.grade("02_tiled_kloop", ex.get_exercise("02_tiled_kloop").solution, seed=77)
    again = ex.grade("02_tiled_kloop", ex.get_exercise("02_tiled_kloop").solution, seed=77)
    assert "seed 77" in first.lines("en")[0] and "随机种子 77" in first.lines("zh")[0]
    assert first.steps == again.steps


def test_a_vector_path_that_ignores_the_block_row_fails():
    src = _variant("07_float4_load", "const int gr = row0 + e / (BK / 4)", "const int gr = e / (BK / 4)")
    _fails_at("07_float4_load", src, "correct")


# --- lesson checks that looked at one block, at one shape -----------------------------------------------

def test_a_load_coalesced_only_in_the_first_block_fails():
    src = _variant("03_coalesce_the_load", "const int r = ty, c = tx;",
                   "const bool first = blockIdx.x == 0 && blockIdx.y == 0;\n    const int r = first ? ty : tx, "
                   "c = first ? tx : ty;")
    _fails_at("03_coalesce_the_load", src, "sectors", "block (")


def test_a_load_coalesced_only_at_one_shape_fails():
    src = _variant("03_coalesce_the_load", "const int r = ty, c = tx;",
                   "const int r = M == 64 ? ty : tx, c = M == 64 ? tx : ty;")
    _fails_at("03_coalesce_the_load", src, "sectors")


# --- what the CPU backend now sees ----------------------------------------------------------------------

def test_a_missing_load_guard_is_named_as_an_out_of_bounds_read():
    src = _variant("02_tiled_kloop", "As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;",
                   "As[ty][tx] = A[(size_t)row * K + k0 + tx];")
    verdict = ex.grade("02_tiled_kloop", src, seed=3)
    failed = next(s for s in verdict.steps if s.passed is False)
    assert verdict.failed_step == "memory" and "read A[" in failed.en and "my_kernel.cu:" in failed.en, str(verdict)


def test_a_race_names_the_shared_element_and_the_learners_line():
    starter = ex.get_exercise("02_missing_barrier").starter
    verdict = ex.grade("02_missing_barrier", starter, seed=3)  # no barrier before the loads
    failed = next(s for s in verdict.steps if s.passed is False)
    store = 1 + next(n for n, line in enumerate(starter.splitlines()) if line.strip().startswith("As[ty][tx] ="))
    assert verdict.failed_step == "race" and "wrote As[0][0]" in failed.en and f"my_kernel.cu:{store}" in failed.en, \
        str(verdict)
    assert "next iteration of the loop" in failed.en and "下一次迭代" in failed.zh and "As[0][0]" in failed.zh
    assert "02_smem_tiling.cu" not in failed.en


# --- the lesson itself checked -------------------------------------------------------------------

def test_inner_products_from_global_memory_behind_a_decoy_shared_read_fail():
    src = _variant("02_tiled_kloop", "acc += As[ty][k] * Bs[k][tx];",
                   "acc += (As[ty][k] * 0.0f + ((row < M && k0 + k < K) ? A[(size_t)row * K + k0 + k] : 0.0f)) * Bs[k][tx];")
    _fails_at("02_tiled_kloop", src, "reuse", "from global memory")


def test_computing_before_loading_the_next_tile_fails_the_prefetch_check():
    src = _variant("04_prefetch", """        if (more) {  // issue the loads early: they travel while the loop below computes
            a_next = a_elem(t + 1);
            b_next = b_elem(t + 1);
        }
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[cur][ty][k] * Bs[cur][k][tx];""", """#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[cur][ty][k] * Bs[cur][k][tx];
        if (more) {
            a_next = a_elem(t + 1);
            b_next = b_elem(t + 1);
        }""")
    _fails_at("04_prefetch", src, "prefetch", "before the compute loop")


def test_one_buffer_and_an_extra_barrier_fails_the_double_buffer_exercise():
    src = _variant("04_wrong_buffer", """        if (more) {  // nobody reads buf[nxt] before the next barrier
            As[nxt][ty][tx] = a_next;
            Bs[nxt][ty][tx] = b_next;
        }""", """        __syncthreads();
        if (more) {
            As[cur ^ 1][ty][tx] = a_next;
            Bs[cur ^ 1][ty][tx] = b_next;
        }""")
    src = src.replace("const int cur = t & 1, nxt = cur ^ 1;", "const int cur = 0;")
    src = src.replace("As[cur ^ 1]", "As[cur]").replace("Bs[cur ^ 1]", "Bs[cur]")
    _fails_at("04_wrong_buffer", src, "barriers", "one barrier per k-tile")


def test_an_untransposed_tile_fails_the_transposed_store_exercise():
    src = _variant("03_transposed_store", "As[c][r] =", "As[r][c] =")
    src = src.replace("acc += As[k][ty] * Bs[k][tx];", "acc += As[ty][k] * Bs[k][tx];")
    _fails_at("03_transposed_store", src, "transposed", "not stored transposed")


def test_an_epilogue_that_ignores_its_switches_fails():
    src = _variant("06_bias_relu", "v = activation<ACT>(v);", "v = activation<1>(v);")  # always ReLU
    _fails_at("06_bias_relu", src, "correct", "activation=none")
    src = _variant("06_bias_relu", "if (HAS_BETA)", "if (true)")  # always adds beta · C_old
    _fails_at("06_bias_relu", src, "correct", "accumulate=False")


def test_a_hard_coded_alpha_fails():
    src = _variant("06_bias_index", "v *= alpha;", "v *= 0.75f;")  # the value a fixed grader used
    _fails_at("06_bias_index", src, "correct")


# --- bypasses ----------------------------------------------------------------------------------------

def test_a_branch_on_the_build_is_the_same_branch_in_both_builds():
    """No compiler's macro is defined when the answer is preprocessed, once, for both builds: a branch on
    __CUDA_ARCH__, GEMM_COURSE_CPU or __NVCC__ is taken the same way by the CPU run and the GPU build."""
    solution, starter = ex.get_exercise("02_tiled_kloop").solution, ex.get_exercise("02_tiled_kloop").starter
    for macro in ("__CUDA_ARCH__", "GEMM_COURSE_CPU", "__NVCC__"):
        right_on_the_gpu_only = f"#ifdef {macro}\n{solution}\n#else\n{starter}\n#endif\n"
        _fails_at("02_tiled_kloop", right_on_the_gpu_only, "correct")  # the CPU run sees the starter, as the GPU build does
        assert ex.grade("02_tiled_kloop", f"#ifndef {macro}\n{solution}\n#endif\n", seed=5).status == "solved"


def test_including_the_shipped_level_kernel_is_refused():
    _fails_at("05_outer_product", '#include "05_register_blocking.cu"\n', "source", "#include")
    src = '#define LEVEL "../kernels/05_register_blocking.cu"\n#include LEVEL\n' + ex.get_exercise("05_outer_product").solution
    _fails_at("05_outer_product", src, "source", "05_register_blocking.cu")


def test_a_never_executed_float4_load_beside_scalar_loads_fails():
    starter = ex.get_exercise("07_float4_load").starter  # scalar loads everywhere
    src = starter.replace("a_next[i] = zero;", "a_next[i] = M == -7 - k0 ? *reinterpret_cast<const float4*>(A + gk) : zero;")
    src = src.replace("b_next[i] = zero;", "b_next[i] = N == -9 - k0 ? *reinterpret_cast<const float4*>(B + gc) : zero;")
    assert src.count("reinterpret_cast") >= starter.count("reinterpret_cast") + 2
    _fails_at("07_float4_load", src, "sass", "32-bit")


# --- answers the grader cannot take ----------------------------------------------------------------

@pytest.mark.parametrize("text, needle", [("", "empty"), ("   \n\n", "empty"), ("\0\1\2binary" * 20, "not text"),
                                          ("__global__ void renamed(float* a) {}\n", "no kernel named")])
def test_an_empty_binary_or_renamed_answer_gets_one_line(text, needle):
    verdict = ex.grade("02_tiled_kloop", text)
    assert verdict.failed_step == "source" and len(verdict.steps) == 1
    assert needle in verdict.steps[0].en and "\n" not in verdict.steps[0].en


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gemm_course", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_the_command_line_shows_statements_hints_and_progress(tmp_path):
    import os

    env = dict(os.environ, GEMM_COURSE_PROGRESS=str(tmp_path / "progress.json"))
    shown = _cli("exercises", "show", "02_tiled_kloop", env=env)
    assert shown.returncode == 0 and ex.get_exercise("02_tiled_kloop").statement_en[:40] in shown.stdout
    shown_zh = _cli("exercises", "show", "02_tiled_kloop", "--zh", env=env)
    assert ex.get_exercise("02_tiled_kloop").statement_zh[:20] in shown_zh.stdout
    hint = _cli("exercises", "hint", "02_tiled_kloop", "2", env=env)
    assert hint.returncode == 0 and ex.get_exercise("02_tiled_kloop").hints[1][0][:30] in hint.stdout
    for bad in (("exercises", "hint", "02_tiled_kloop", "9"), ("exercises", "show"), ("exercises", "show", "nope")):
        result = _cli(*bad, env=env)
        assert result.returncode != 0 and "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    mine = tmp_path / "mine.cu"
    mine.write_text(ex.get_exercise("02_tiled_kloop").starter)
    assert _cli("grade", "02_tiled_kloop", str(mine), env=env).returncode == 1
    mine.write_text(ex.get_exercise("02_tiled_kloop").solution)
    graded = _cli("grade", "02_tiled_kloop", str(mine), env=env)
    assert graded.returncode == 0 and "mine.cu" not in graded.stderr
    status = _cli("exercises", "--status", "--json", env=env)
    row = next(r for r in json.loads(status.stdout) if r["id"] == "02_tiled_kloop")
    assert row["best"] == "solved" and row["attempts"] == 2
    assert "1 of" in _cli("exercises", "--status", env=env).stdout
    latin1 = tmp_path / "latin1.cu"
    latin1.write_bytes("// é\n".encode("latin-1"))
    result = _cli("grade", "02_tiled_kloop", str(latin1), env=env)
    assert result.returncode == 2 and "UTF-8" in result.stderr and "Traceback" not in result.stderr


def test_a_tensor_core_answer_without_a_gpu_is_compiled_not_verified():
    from gemm_course import device

    if device.gpu_available():
        pytest.skip("a GPU verifies it here")
    verdict = ex.grade("10_ldmatrix", ex.get_exercise("10_ldmatrix").solution)
    assert verdict.status == "not_verified" and verdict.exit_code == 3
    assert verdict.lines("en")[0].startswith("COMPILED — not verified without a GPU")
