"""The line-by-line walk-throughs of what each of Levels 2-6 adds to its kernel.

* Right after a level's ``gc.show_source(...)`` cell comes a twin pair of markdown cells, English then
  Chinese, headed WALK_EN / WALK_ZH.
* Both name, as inline code, every line of NEW_LINES[n]: the lines this level adds to the previous
  kernel (Level 1 has its own walk-through, checked in tests/test_level_boxes.py).
* Each of those lines is a whole line of the level's .cu file (comments stripped) and none appears in the
  kernel it is compared with (PREVIOUS), so a kernel edit that removes or changes a line, or a line
  listed as new that is not, fails here.
* The worked example's arithmetic is recomputed from the registry defaults.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from gemm_course.levels import levels

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "gemm_course" / "kernels"
WALK_EN, WALK_ZH = "### What is new in this kernel, line by line", "### 本级新增代码逐行解读"
NAMES = {2: "02_smem_tiling", 3: "03_coalescing_banks", 4: "04_double_buffering",
         5: "05_register_blocking", 6: "06_fused_epilogue"}
# Level 4 builds on Level 2's kernel; Level 3's default is that same kernel with switches.
PREVIOUS = {2: ("01_naive",), 3: ("02_smem_tiling",), 4: ("02_smem_tiling", "03_coalescing_banks"),
            5: ("04_double_buffering",), 6: ("05_register_blocking",)}
DEFAULTS = {n: lv.resolve() for n, lv in enumerate(levels(), start=1) if n in NAMES}

NEW_LINES = {
    2: [
        "template <int TILE>",
        "__global__ void __launch_bounds__(TILE * TILE)",
        "__shared__ float As[TILE][TILE];",
        "__shared__ float Bs[TILE][TILE];",
        "const int tx = threadIdx.x, ty = threadIdx.y;",
        "const int row = blockIdx.y * TILE + ty;",
        "const int col = blockIdx.x * TILE + tx;",
        "for (int k0 = 0; k0 < K; k0 += TILE) {",
        "As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;",
        "Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;",
        "__syncthreads();",
        "#pragma unroll",
        "for (int k = 0; k < TILE; ++k)",
        "acc += As[ty][k] * Bs[k][tx];",
        "if (row < M && col < N)",
    ],
    3: [
        "template <int TILE, int A_LAYOUT>",
        "__device__ __forceinline__ int a_tile_index(int m, int k)",
        "if (A_LAYOUT == 0) return m * TILE + k;",
        "if (A_LAYOUT == 1) return m * (TILE + 1) + k;",
        "if (A_LAYOUT == 2) return k * TILE + m;",
        "if (A_LAYOUT == 3) return k * (TILE + 1) + m;",
        "return k * TILE + (m ^ k);",
        "template <int TILE, int LOAD_ORDER, int A_LAYOUT, int B_LAYOUT = 0>",
        "constexpr int A_STRIDE = (A_LAYOUT == 1 || A_LAYOUT == 3) ? TILE + 1 : TILE;",
        "__shared__ float As[TILE * A_STRIDE];",
        "__shared__ float Bs[TILE][B_LAYOUT == 1 ? TILE + 1 : TILE];",
        "const int r = LOAD_ORDER == 0 ? ty : tx;",
        "const int c = LOAD_ORDER == 0 ? tx : ty;",
        "const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;",
        "As[a_tile_index<TILE, A_LAYOUT>(r, c)] =",
        "(row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : 0.0f;",
        "Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;",
        "acc += As[a_tile_index<TILE, A_LAYOUT>(ty, k)] * Bs[k][tx];",
        "if (row0 + ty < M && col0 + tx < N)",
        "C[(size_t)(row0 + ty) * N + col0 + tx] = acc;",
    ],
    4: [
        '#include "common.cuh"',
        "template <int TILE, int COPY>",
        "__shared__ float As[2][TILE][TILE];",
        "__shared__ float Bs[2][TILE][TILE];",
        "const int tiles = (K + TILE - 1) / TILE;",
        "auto a_ok = [&](int t) { return row < M && t * TILE + tx < K; };",
        "auto b_ok = [&](int t) { return t * TILE + ty < K && col < N; };",
        "auto a_ptr = [&](int t) { return A + (a_ok(t) ? (size_t)row * K + t * TILE + tx : 0); };",
        "auto b_ptr = [&](int t) { return B + (b_ok(t) ? (size_t)(t * TILE + ty) * N + col : 0); };",
        "float a_next = 0.0f, b_next = 0.0f;",
        "if (COPY == 1) {",
        "copy_async<4>(&As[0][ty][tx], a_ptr(0), a_ok(0));",
        "copy_async<4>(&Bs[0][ty][tx], b_ptr(0), b_ok(0));",
        "copy_async_commit();",
        "As[0][ty][tx] = a_ok(0) ? *a_ptr(0) : 0.0f;",
        "Bs[0][ty][tx] = b_ok(0) ? *b_ptr(0) : 0.0f;",
        "for (int t = 0; t < tiles; ++t) {",
        "const int cur = t & 1, nxt = cur ^ 1;",
        "if (COPY == 1) copy_async_wait_all();",
        "const bool more = t + 1 < tiles;",
        "copy_async<4>(&As[nxt][ty][tx], a_ptr(t + 1), a_ok(t + 1));",
        "copy_async<4>(&Bs[nxt][ty][tx], b_ptr(t + 1), b_ok(t + 1));",
        "a_next = a_ok(t + 1) ? *a_ptr(t + 1) : 0.0f;",
        "b_next = b_ok(t + 1) ? *b_ptr(t + 1) : 0.0f;",
        "acc += As[cur][ty][k] * Bs[cur][k][tx];",
        "if (COPY == 0 && more) {",
        "As[nxt][ty][tx] = a_next;",
        "Bs[nxt][ty][tx] = b_next;",
    ],
    5: [
        "struct RegisterTile {",
        "static constexpr int THREADS = (BM / TM) * (BN / TN);",
        "static constexpr int A_STRIDE = BM + 4;",
        "float As[BK][A_STRIDE];",
        "float Bs[BK][BN];",
        "__shared__ RegisterTile<BM, BN, BK, TM, TN> s[2];",
        "const int tid = threadIdx.x;",
        "const int tr = tid / (BN / TN), tc = tid % (BN / TN);",
        "auto load = [&](RegisterTile<BM, BN, BK, TM, TN>& t, int k0) {",
        "for (int e = tid; e < BM * BK; e += THREADS) {",
        "const int gr = row0 + e / BK, gk = k0 + e % BK;",
        "copy_async<4>(&t.As[e % BK][e / BK], ok ? A + (size_t)gr * K + gk : A, ok);",
        "for (int e = tid; e < BK * BN; e += THREADS) {",
        "const int gk = k0 + e / BN, gc = col0 + e % BN;",
        "copy_async<4>(&t.Bs[e / BN][e % BN], ok ? B + (size_t)gk * N + gc : B, ok);",
        "for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;",
        "load(s[0], 0);",
        "for (int k0 = 0, cur = 0; k0 < K; k0 += BK, cur ^= 1) {",
        "if (k0 + BK < K) load(s[cur ^ 1], k0 + BK);",
        "float a[TM], b[TN];",
        "for (int i = 0; i < TM; ++i) a[i] = s[cur].As[k][tr * TM + i];",
        "for (int j = 0; j < TN; ++j) b[j] = s[cur].Bs[k][tc * TN + j];",
        "for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];",
        "#define REGISTER_BLOCKS_PER_SM(THREADS) ((THREADS) <= 256 ? 2 : 1)",
        "__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))",
        "if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);",
        "const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;",
        "float acc[TM][TN];",
        "register_blocked_mainloop<BM, BN, BK, TM, TN>(A, B, M, N, K, row0, col0, acc);",
        "store_register_tile<BM, BN>(C, M, N, row0, col0, acc, [](float v, int, int) { return v; });",
        "const int r = row0 + tr * TM + i;",
        "const int c = col0 + tc * TN + j;",
        "if (r < M && c < N) C[(size_t)r * N + c] = op(acc[i][j], r, c);",
    ],
    6: [
        '#include "05_register_blocking.cu"',
        "template <int ACT>",
        "__device__ __forceinline__ float activation(float x)",
        "if (ACT == 1) return fmaxf(x, 0.0f);",
        "if (ACT == 2) {",
        "const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);",
        "return 0.5f * x * (1.0f + tanhf(u));",
        "return x;",
        "template <int BM, int BN, int BK, int TM, int TN, int ACT, bool HAS_BIAS, bool HAS_BETA>",
        "int M, int N, int K, const float* __restrict__ bias, float alpha, float beta)",
        "store_register_tile<BM, BN>(C, M, N, row0, col0, acc, [&](float v, int r, int c) {",
        "v *= alpha;",
        "if (HAS_BIAS) v += bias[c];",
        "v = activation<ACT>(v);",
        "if (HAS_BETA) v += beta * C[(size_t)r * N + c];",
        "return v;",
    ],
}


def code_lines(name: str) -> list[str]:
    """The lines of a kernel file, comments removed and stripped, blank lines dropped."""
    text = (KERNELS / f"{name}.cu").read_text(encoding="utf-8")
    lines = [re.sub(r"\s*//.*$", "", ln).strip() for ln in text.splitlines()]
    return [ln for ln in lines if ln]


def _cells(n: int) -> list[dict]:
    return json.loads((REPO / "notebooks" / f"{NAMES[n]}.ipynb").read_text(encoding="utf-8"))["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"])


def walk_through(n: int) -> tuple[str, str]:
    """The (English, Chinese) walk-through: the two cells right after the show_source cell."""
    cells = _cells(n)
    i = next(i for i, c in enumerate(cells) if c["cell_type"] == "code"
             and _text(c).strip() == f'gc.show_source("{NAMES[n]}")')
    en, zh = cells[i + 1], cells[i + 2]
    assert en["metadata"].get("tags") == ["lang-en"] and zh["metadata"].get("tags") == ["lang-zh"], (
        f"Level {n}: the walk-through twins must follow gc.show_source")
    assert _text(en).startswith(WALK_EN + "\n"), f"Level {n}: the English walk-through should open with {WALK_EN!r}"
    assert _text(zh).startswith(WALK_ZH + "\n"), f"Level {n}: the Chinese walk-through should open with {WALK_ZH!r}"
    return _text(en), _text(zh)


@pytest.mark.parametrize("n", list(NAMES))
def test_chosen_lines_are_in_the_kernel_and_new(n: int) -> None:
    here = code_lines(NAMES[n])
    before = {ln for name in PREVIOUS[n] for ln in code_lines(name)}
    gone = [ln for ln in NEW_LINES[n] if ln not in here]
    assert not gone, f"Level {n}: {NAMES[n]}.cu no longer has {gone}; update the walk-through and NEW_LINES"
    old = [ln for ln in NEW_LINES[n] if ln in before]
    assert not old, f"Level {n}: {old} already exist in {PREVIOUS[n]}; they are not new"
    assert len(set(NEW_LINES[n])) == len(NEW_LINES[n])


@pytest.mark.parametrize("n", list(NAMES))
def test_walk_through_names_every_new_line(n: int) -> None:
    for lang, text in zip(("en", "zh"), walk_through(n)):
        missing = [ln for ln in NEW_LINES[n] if f"`{ln}`" not in text]
        assert not missing, f"Level {n}: the {lang} walk-through does not name {missing}"
        assert "//" not in text, "prose, not the kernel's comments copied in"
        # one bullet per group of lines: every bullet starts with a line of code
        bullets = [b for b in text.splitlines() if b.startswith("- ")]
        assert bullets and all(b.startswith("- `") for b in bullets)


def test_level2_barriers() -> None:
    """Level 2 has exactly two barriers, and the walk-through explains both."""
    assert code_lines(NAMES[2]).count("__syncthreads();") == 2
    en, zh = walk_through(2)
    assert en.count("`__syncthreads();`") == 2 and zh.count("`__syncthreads();`") == 2
    assert "the first one" in en and "the second one" in en and "（第一个）" in zh and "（第二个）" in zh


def _both(n: int, *phrases: str) -> None:
    for lang, text in zip(("en", "zh"), walk_through(n)):
        missing = [p for p in phrases if p not in text]
        assert not missing, f"Level {n} ({lang}) worked example should say {missing}"


def test_level2_worked_example() -> None:
    tile = DEFAULTS[2]["tile"]
    row, col, k0 = 1 * tile + 2, 3 * tile + 5, 2 * tile
    _both(2, f"{tile} × {tile} = {tile * tile}", f"2 × {tile} × {tile} × 4 = {2 * tile * tile * 4}",
          f"1 × {tile} + 2 = {row}", f"3 × {tile} + 5 = {col}", f"k0 = {k0}",
          f"A({row}, {k0 + 5})", f"B({k0 + 2}, {col})", f"A({row}, {k0}) × B({k0}, {col})",
          f"A({row}, {k0 + tile - 1}) × B({k0 + tile - 1}, {col})")


def test_level3_worked_example() -> None:
    tile, m, k = DEFAULTS[3]["tile"], 2, 5
    mk, km, km_padded, km_swizzled = m * tile + k, k * tile + m, k * (tile + 1) + m, k * tile + (m ^ k)
    banks = 32
    assert (mk % banks, km % banks, km_padded % banks, km_swizzled % banks) == (5, 2, 7, 7)
    # km: every lane of the warp (tx = 0..31, ty = 2) stores into one bank; padded and swizzled spread them
    assert len({(tx * tile + m) % banks for tx in range(32)}) == 1
    assert len({(tx * (tile + 1) + m) % banks for tx in range(32)}) == 32
    assert len({(tx * tile + (m ^ tx)) % banks for tx in range(32)}) == 32
    _both(3, f"{m} × {tile} + {k} = {mk}", f"{k} × {tile} + {m} = {km}", f"{k} × {tile + 1} + {m} = {km_padded}",
          f"{k} × {tile} + ({m} XOR {k}) = {k * tile} + {m ^ k} = {km_swizzled}")


def test_level4_worked_example() -> None:
    tile, K = DEFAULTS[4]["tile"], 100
    tiles = (K + tile - 1) // tile
    assert tiles == 4 and DEFAULTS[4]["copy"] == "registers"
    assert 3 * tile + 5 >= K  # a_ok(3) is false for tx = 5: the zero-fill
    _both(4, f"({K} + {tile - 1}) / {tile} = {tiles}", f"A(34, 2 × {tile} + 5) = A(34, {2 * tile + 5})",
          f"B(2 × {tile} + 2, 101) = B({2 * tile + 2}, 101)", f"3 × {tile} + 5 = {3 * tile + 5}",
          f"{2 * tile * tile * 4 * 2} ")


def test_level5_worked_example() -> None:
    p = DEFAULTS[5]
    bm, bn, bk, tm, tn = p["BM"], p["BN"], p["BK"], p["TM"], p["TN"]
    threads = (bm // tm) * (bn // tn)
    tid = 37
    tr, tc = tid // (bn // tn), tid % (bn // tn)
    row0, col0 = 1 * bm, 3 * bn
    a_elems = [tid + i * threads for i in range(bm * bk // threads)]
    b_slots = [f"`Bs[{e // bn}][{e % bn}]`" for e in range(tid, bk * bn, threads)]
    assert threads == 256 and 65536 // (2 * threads) == 128  # the registers __launch_bounds__ leaves
    _both(5, f"({bm} / {tm}) × ({bn} / {tn}) = {bn // tn} × {bm // tm} = {threads}",
          f"tr = {tid} / {bn // tn} = {tr}", f"tc = {tid} % {bn // tn} = {tc}",
          f"{tr} × {tm} = {tr * tm}", f"{tc} × {tn} = {tc * tn}", f"{tm * tn}",
          *(f"{e}" for e in a_elems), f"{bm} × {bk} = {bm * bk}",
          f"{tid} / {bk} = {tid // bk}", f"{tid} % {bk} = {tid % bk}",
          f"`As[{tid % bk}][{tid // bk}]`", *b_slots, f"{bm + 4}",
          f"`As[k][{tr * tm}]`", f"`As[k][{tr * tm + tm - 1}]`", f"`Bs[k][{tc * tn}]`", f"`Bs[k][{tc * tn + tn - 1}]`",
          f"65536 / (2 × {threads}) = 128", f"row0 = 1 × {bm} = {row0}", f"col0 = 3 × {bn} = {col0}",
          f"C({row0} + {tr * tm}, {col0} + {tc * tn}) = C({row0 + tr * tm}, {col0 + tc * tn})")


def test_level6_worked_example() -> None:
    alpha, bias, beta, old = 2, 0.25, 1, 3
    relu = lambda v: max(v, 0.0)  # noqa: E731
    assert relu(alpha * -0.75 + bias) + beta * old == 3 and relu(alpha * 0.5 + bias) + beta * old == 4.25
    u = math.sqrt(2 / math.pi) * (1 + 0.044715)
    gelu1 = 0.5 * (1 + math.tanh(u))
    assert f"{math.sqrt(2 / math.pi):.16f}" == "0.7978845608028654"
    _both(6, "2 × −0.75 = −1.5", "−1.5 + 0.25 = −1.25", "0 + 1 × 3 = 3", "1.25 + 3 = 4.25",
          f"u ≈ {u:.4f}", f"tanh({u:.4f})) ≈ {gelu1:.4f}")
