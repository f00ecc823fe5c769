"""The from-scratch exercises of Levels 1-8 (a kernel written from a nearly empty body): each reference
solution passes, each starter fails where its exercise.json says, and each test's kernels that a hurried
learner would write fail with the step the lesson is about. The wrong kernels are the reference solution
with one change, so each case names exactly one mistake. No GPU needed."""
import json

import pytest

from gemm_course import exercises as ex

FROM_SCRATCH = ("01_naive_kernel", "02_tiled_kernel", "03_coalesced_kernel", "04_double_buffered_kernel",
                "05_register_tiled_kernel", "06_fused_kernel", "07_vectorized_kernel", "08_warp_tiled_kernel")

SEED = 7  # fixed, so that a failure here can be reproduced


def _edit(exercise_id: str, *changes: tuple[str, str]) -> str:
    """The solution with each (old, new) replaced exactly once."""
    source = ex.get_exercise(exercise_id).solution
    for old, new in changes:
        assert source.count(old) == 1, f"{exercise_id}/solution.cu no longer holds {old!r} exactly once"
        source = source.replace(old, new)
    return source


def _everywhere(exercise_id: str, *changes: tuple[str, str]) -> str:
    """The solution with every occurrence of each old text replaced (a change of layout touches every use)."""
    source = ex.get_exercise(exercise_id).solution
    for old, new in changes:
        assert old in source, f"{exercise_id}/solution.cu no longer holds {old!r}"
        source = source.replace(old, new)
    return source


def _level2_as(name: str) -> str:
    """Level 2's single-buffered kernel under another level's kernel name and template."""
    return _edit("02_tiled_kernel", ("template <int TILE>\n", "template <int TILE, int COPY>\n"),
                 ("gemm_smem_tiled(", f"{name}("))


# (exercise, what the hurried learner did, their kernel, the step that must fail)
WRONG = [
    ("01_naive_kernel", "no guard on the column",
     lambda: _edit("01_naive_kernel", ("if (row >= M || col >= N) return;", "if (row >= M) return;")), "memory"),
    ("01_naive_kernel", "row and column swapped",
     lambda: _edit("01_naive_kernel", ("blockIdx.x * BLOCK_X + threadIdx.x;", "blockIdx.x * BLOCK_X + threadIdx.y;"),
                   ("blockIdx.y * BLOCK_Y + threadIdx.y;", "blockIdx.y * BLOCK_Y + threadIdx.x;")), "correct"),
    ("01_naive_kernel", "covers C, but a warp takes 8 rows of 4 columns",
     lambda: _edit("01_naive_kernel",
                   ("const int col = blockIdx.x * BLOCK_X + threadIdx.x;",
                    "const int t = threadIdx.y * BLOCK_X + threadIdx.x;\n"
                    "    const int col = blockIdx.x * BLOCK_X + t / BLOCK_Y;"),
                   ("const int row = blockIdx.y * BLOCK_Y + threadIdx.y;",
                    "const int row = blockIdx.y * BLOCK_Y + t % BLOCK_Y;")), "sectors"),

    ("02_tiled_kernel", "no barrier after the inner loop",
     lambda: _edit("02_tiled_kernel", ("        __syncthreads();  // everyone done reading", "        // everyone done reading")),
     "race"),
    ("02_tiled_kernel", "the inner loop reads A and B from global memory",
     lambda: _edit("02_tiled_kernel", ("acc += As[ty][k] * Bs[k][tx];",
                                       "acc += (row < M && k0 + k < K ? A[(size_t)row * K + k0 + k] : 0.0f) *\n"
                                       "                   (k0 + k < K && col < N ? B[(size_t)(k0 + k) * N + col] : 0.0f);")),
     "reuse"),
    ("02_tiled_kernel", "the last piece of K read without a guard",
     lambda: _edit("02_tiled_kernel", ("(row < M && a_k < K) ?", "(row < M) ?")), "memory"),

    ("03_coalesced_kernel", "transposed without padding",
     lambda: _edit("03_coalesced_kernel", ("constexpr int A_STRIDE = TILE + 1;", "constexpr int A_STRIDE = TILE;")),
     "wavefronts"),
    ("03_coalesced_kernel", "a warp reads A down a column",
     lambda: _edit("03_coalesced_kernel",
                   ("As[tx * A_STRIDE + ty] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;",
                    "As[ty * A_STRIDE + tx] = (blockIdx.y * TILE + tx < M && k0 + ty < K)\n"
                    "            ? A[(size_t)(blockIdx.y * TILE + tx) * K + k0 + ty] : 0.0f;")), "sectors"),
    ("03_coalesced_kernel", "Level 2's A layout, not transposed",
     lambda: _edit("03_coalesced_kernel", ("As[tx * A_STRIDE + ty] = ", "As[ty * A_STRIDE + tx] = "),
                   ("As[k * A_STRIDE + ty]", "As[ty * A_STRIDE + k]")), "transposed"),

    ("04_double_buffered_kernel", "the next piece stored into the current buffer",
     lambda: _edit("04_double_buffered_kernel", ("As[1 - cur][ty][tx] = a_next;", "As[cur][ty][tx] = a_next;"),
                   ("Bs[1 - cur][ty][tx] = b_next;", "Bs[cur][ty][tx] = b_next;")), "race"),
    ("04_double_buffered_kernel", "Level 2's single-buffered kernel",
     lambda: _level2_as("gemm_double_buffered"), "barriers"),
    ("04_double_buffered_kernel", "the next piece loaded after the multiply",
     lambda: _edit("04_double_buffered_kernel",
                   ("        if (more) {  // issued now, needed only after the multiply\n"
                    "            a_next = a_element((t + 1) * TILE);\n"
                    "            b_next = b_element((t + 1) * TILE);\n"
                    "        }\n", ""),
                   ("        if (more) {\n            As[1 - cur]",
                    "        if (more) {\n            a_next = a_element((t + 1) * TILE);\n"
                    "            b_next = b_element((t + 1) * TILE);\n            As[1 - cur]")), "prefetch"),

    ("05_register_tiled_kernel", "b indexed with a per-thread offset (local memory)",
     lambda: _edit("05_register_tiled_kernel", ("b[j] = Bs[k][tc * TN + j];",
                                                "{ const int jj = (j + tc) % TN; b[jj] = Bs[k][tc * TN + jj]; }")),
     "registers"),
    ("05_register_tiled_kernel", "the register values read straight from global memory",
     lambda: _edit("05_register_tiled_kernel",
                   ("a[i] = As[k][tr * TM + i];",
                    "{ const int r = row0 + tr * TM + i; a[i] = (r < M && k0 + k < K) ? A[(size_t)r * K + k0 + k] : 0.0f; }"),
                   ("b[j] = Bs[k][tc * TN + j];",
                    "{ const int c = col0 + tc * TN + j; b[j] = (k0 + k < K && c < N) ? B[(size_t)(k0 + k) * N + c] : 0.0f; }")),
     "sectors"),
    ("05_register_tiled_kernel", "no guard on the column of the store",
     lambda: _edit("05_register_tiled_kernel", ("if (r < M && c < N) C[", "if (r < M) C[")), "memory"),

    ("06_fused_kernel", "the bias indexed by row",
     lambda: _edit("06_fused_kernel", ("if (c >= N) continue;\n        const float column_bias = HAS_BIAS ? bias[c] : 0.0f;",
                                       "if (c >= N) continue;"),
                   ("float v = activate<ACT>(alpha * acc[i][j] + column_bias);",
                    "float v = activate<ACT>(alpha * acc[i][j] + (HAS_BIAS ? bias[r % N] : 0.0f));")), "correct"),
    ("06_fused_kernel", "beta·C_old added before the activation",
     lambda: _edit("06_fused_kernel", ("float v = activate<ACT>(alpha * acc[i][j] + column_bias);",
                                       "float v = alpha * acc[i][j] + column_bias;"),
                   ("if (HAS_BETA) v += beta * *out;  // C_old, read before it is overwritten",
                    "if (HAS_BETA) v += beta * *out;\n            v = activate<ACT>(v);")), "correct"),
    ("06_fused_kernel", "the bias read when there is none",
     lambda: _edit("06_fused_kernel", ("HAS_BIAS ? bias[c] : 0.0f;", "bias[c];")), "memory"),

    ("07_vectorized_kernel", "A still loaded one float at a time",
     lambda: _edit("07_vectorized_kernel",
                   ("const float4 x = (r < M && kk < K) ? *reinterpret_cast<const float4*>(A + (size_t)r * K + kk) : zero;",
                    "const float* p = A + (size_t)r * K + kk;\n"
                    "            const bool in = r < M && kk < K;\n"
                    "            const float4 x = make_float4(in ? p[0] : 0.0f, in ? p[1] : 0.0f, in ? p[2] : 0.0f, in ? p[3] : 0.0f);")),
     "sass"),
    ("07_vectorized_kernel", "rows of As padded by one float",
     lambda: _edit("07_vectorized_kernel", ("constexpr int A_STRIDE = BM + 4;", "constexpr int A_STRIDE = BM + 1;")),
     "memory"),
    ("07_vectorized_kernel", "no guard on the rows of A",
     lambda: _edit("07_vectorized_kernel", ("(r < M && kk < K) ?", "(kk < K) ?")), "memory"),

    ("08_warp_tiled_kernel", "consecutive lanes down m, each with one contiguous block",
     lambda: _everywhere("08_warp_tiled_kernel", ("const int lm = lane / 4, ln = lane % 4;", "const int lm = lane % 8, ln = lane / 8;"),
                         ("wi * 32 + lm * 4", "lm * TM + wi * 4"), ("wj * 16 + ln * 4", "ln * TN + wj * 4")),
     "wavefronts"),
    ("08_warp_tiled_kernel", "tile row and column swapped inside a group",
     lambda: _edit("08_warp_tiled_kernel", ("(first_m + in_group % group_rows) * BM", "(first_m + in_group / group_rows) * BM"),
                   ("(in_group / group_rows) * BN", "(in_group % group_rows) * BN")), "correct"),
    ("08_warp_tiled_kernel", "no guard on the columns of the scalar store",
     lambda: _edit("08_warp_tiled_kernel", ("if (c + j < N) C[", "C[")), "memory"),
]


# Other right answers the statements promise to accept.
RIGHT = [
    ("03_coalesced_kernel", "an XOR swizzle instead of padding",
     lambda: _edit("03_coalesced_kernel", ("constexpr int A_STRIDE = TILE + 1;", "constexpr int A_STRIDE = TILE;"),
                   ("As[tx * A_STRIDE + ty] = ", "As[tx * A_STRIDE + (ty ^ tx)] = "),
                   ("As[k * A_STRIDE + ty]", "As[k * A_STRIDE + (ty ^ k)]"))),
    ("08_warp_tiled_kernel", "plain row-by-row block order",
     lambda: _edit("08_warp_tiled_kernel", ("const int row0 = (first_m + in_group % group_rows) * BM;",
                                            "const int row0 = (blockIdx.x / tiles_n) * BM;"),
                   ("const int col0 = (in_group / group_rows) * BN;", "const int col0 = (blockIdx.x % tiles_n) * BN;"))),
]


# Each solution passing and each starter failing at its step: tests/test_exercises.py, for every exercise.


def test_every_exercise_has_at_least_two_wrong_kernels():
    for exercise_id in FROM_SCRATCH:
        assert sum(case[0] == exercise_id for case in WRONG) >= 2, exercise_id


@pytest.mark.parametrize("exercise_id, mistake, kernel, failed_step", WRONG, ids=[f"{c[0]}: {c[1]}" for c in WRONG])
def test_a_hurried_kernel_fails_where_the_mistake_is(exercise_id, mistake, kernel, failed_step):
    verdict = ex.grade(exercise_id, kernel(), seed=SEED)
    assert verdict.failed_step == failed_step, f"{mistake}:\n{verdict}"


@pytest.mark.parametrize("exercise_id, answer, kernel", RIGHT, ids=[f"{c[0]}: {c[1]}" for c in RIGHT])
def test_another_right_answer_passes(exercise_id, answer, kernel):
    verdict = ex.grade(exercise_id, kernel(), seed=SEED)
    assert verdict.passed, f"{answer}:\n{verdict}"
