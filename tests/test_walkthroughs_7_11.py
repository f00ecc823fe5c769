"""The line-by-line walk-throughs of Levels 7-11, and Level 9's report of where the CUDA headers come from.

* Right after the cell that shows a level's source (``gc.show_source(...)``) come two markdown cells, the
  English "### What is new in this kernel, line by line" and its Chinese twin "### 本级新增代码逐行解读".
  Both name, as inline code, every line chosen below (LINES). Each chosen line is read from the kernel
  files (the level's .cu and the course headers it includes), so a kernel edit that removes or rewrites
  a line fails here until the walk-through follows; and each is new against the previous level's files.
* The worked examples' numbers are recomputed from the level's registry default and the kernel files.
* Level 9 shows where cuda_fp16.h and mma.h come from without this machine's paths:
  ``gc.compile.cuda_headers_report()`` names packages, never folders.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import gemm_course as gc
from gemm_course.run import compile as gcompile
from gemm_course.display import glossary
from gemm_course.levels import KERNEL_DIR
from gemm_course.models import arch_limits

REPO = Path(__file__).resolve().parents[1]
HEADING_EN = "### What is new in this kernel, line by line"
HEADING_ZH = "### 本级新增代码逐行解读"
PREVIOUS = {"07_vectorized": "06_fused_epilogue", "08_warp_tiling": "07_vectorized", "09_wmma": "08_warp_tiling",
            "10_mma_pipeline": "09_wmma", "11_hopper_wgmma": "10_mma_pipeline"}

# The lines each walk-through explains: the ones that carry the level's new idea.
LINES: dict[str, list[str]] = {
    "07_vectorized": [
        'static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "vectors of 4 floats");',
        "float4 a_next[A_LOADS], b_next[B_LOADS];",
        "const int gr = row0 + e / (BK / 4), gk = k0 + (e % (BK / 4)) * 4;",
        "? *reinterpret_cast<const float4*>(A + (size_t)gr * K + gk) : zero;",
        "? *reinterpret_cast<const float4*>(B + (size_t)gk * N + gc) : zero;",
        "As[buf][k + 0][m] = a_next[i].x;",
        "if (e < BK * BN / 4) *reinterpret_cast<float4*>(&Bs[buf][e / (BN / 4)][(e % (BN / 4)) * 4]) = b_next[i];",
        "if (more) fetch(k0 + BK);",
        "const float4 v = *reinterpret_cast<const float4*>(&As[cur][k][tr * TM + i]);",
        "const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][k][tc * TN + j]);",
        "if (more) store(cur ^ 1);",
        "make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);",
    ],
    "08_warp_tiling": [
        "__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)",
        "const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;",
        "const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;",
        "const int lm = lane / 4, ln = lane % 4;",
        "const float4 v = *reinterpret_cast<const float4*>(&As[buf][k][wm0 + wi * 32 + lm * 4]);",
        "const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][k][wn0 + wj * 16 + ln * 4]);",
        "const int r = row0 + wm0 + wi * 32 + lm * 4 + i;",
        "const int c = col0 + wn0 + wj * 16 + ln * 4;",
        "copy_async<16>(&Bs[buf][e / (BN / 4)][(e % (BN / 4)) * 4], B + (ok ? o : 0), ok);",
        "copy_async_wait_all();",
        "const int per_group = GROUP_M * tiles_n;",
        "const int first_m = (blockIdx.x / per_group) * GROUP_M;",
        "const int group_rows = min(tiles_m - first_m, GROUP_M);",
        "const int tile_m = first_m + (blockIdx.x % per_group) % group_rows;",
        "const int tile_n = (blockIdx.x % per_group) / group_rows;",
    ],
    "09_wmma": [
        "#include <mma.h>",
        "using namespace nvcuda;",
        "const int row = (blockIdx.y * WARPS_M + warp / WARPS_N) * 16;",
        "wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;",
        "wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;",
        "wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;",
        "wmma::fill_fragment(acc, 0.0f);",
        "wmma::load_matrix_sync(a, A + (size_t)row * K + k, K);",
        "wmma::load_matrix_sync(b, B + (size_t)k * N + col, N);",
        "wmma::mma_sync(acc, a, b, acc);",
        "wmma::store_matrix_sync(C + (size_t)row * N + col, acc, N, wmma::mem_row_major);",
        "for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[wm + 16 * i][kk], A_LD);",
        "for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);",
    ],
    "10_mma_pipeline": [
        'asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n"',
        'asm volatile("cp.async.commit_group;\\n" ::);',
        'asm volatile("cp.async.wait_group %0;\\n" :: "n"(STAGES - 2));',
        "const int next = kt + STAGES - 1;  // refill the stage that tile kt-1 used",
        "if (PARTS & MMA_COPIES && next < tiles_k) load_tile(next, next % STAGES);",
        "__device__ __forceinline__ int swizzle_a(int row, int chunk) { return row * 4 + (chunk ^ ((row >> 1) & 3)); }",
        "__device__ __forceinline__ int swizzle_b(int row, int chunk) { return row * (BN / 8) + (chunk ^ (row & 7)); }",
        'asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n"',
        "const int r = wm + i * 16 + lane % 16, c = kk / 8 + lane / 16;",
        'asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\\n"',
        'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "',
        "float acc[4][NT][4];  // [m16 tile][n8 tile][fragment element]",
        "const int g = lane / 4, q = (lane % 4) * 2;",
    ],
    "11_hopper_wgmma": [
        "if (wg == 0) {  // producer",
        'asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\\n");',
        "if (tid != 0) return;",
        'asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\\n");',
        "mbar_init(smem_u32(&empty[s]), CONSUMER_WARPS);  // one arrival per consumer warp",
        "mbar_wait(smem_u32(&empty[s]), (it / STAGES + 1) % 2);  // first round: passes at once",
        "mbar_expect_bytes(bar, (BM + BN) * HOPPER_BK * 2);  // OOB parts of a box count too (as zeros)",
        'asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "',
        "mbar_wait(smem_u32(&full[s]), (it / STAGES) % 2);",
        "wgmma_fence();",
        "wgmma_k_tile<BF16>(d, a_base + s * A_BYTES + rows * 128, b_base + s * B_BYTES, kt == 0);",
        "__device__ __forceinline__ unsigned long long desc_a(unsigned tile, int kk) "
        "{ return smem_descriptor(tile + kk * 32, 16, 1024); }",
        "wgmma_commit();",
        "wgmma_wait<1>();",
        "if (kt > 0 && releaser) mbar_arrive(smem_u32(&empty[(it - 1) % STAGES]));",
        "const int first = blockIdx.x, step = PERSISTENT ? gridDim.x : tiles;",
    ],
}
# Lines the previous level's files already hold, though not in its kernel: Level 7 includes all of Level 5,
# whose cp.async path waits the same way; Level 10's copy='tma' setting includes tma.cuh, whose TMA copies
# Level 11 makes its main path.
SHARED_WITH_PREVIOUS = {
    "08_warp_tiling": {"copy_async_wait_all();"},
    # Level 9's staging='pipelined' kernel already feeds WMMA through the same cp.async ring
    "10_mma_pipeline": {
        'asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n"',
        'asm volatile("cp.async.commit_group;\\n" ::);',
        'asm volatile("cp.async.wait_group %0;\\n" :: "n"(STAGES - 2));',
    },
    "11_hopper_wgmma": {
        "mbar_expect_bytes(bar, (BM + BN) * HOPPER_BK * 2);  // OOB parts of a box count too (as zeros)",
        'asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "',
    },
}
LEVELS = list(LINES)


def _files(level: str) -> list[Path]:
    """The level's .cu file and every course file it includes with quotes, recursively."""
    seen: list[Path] = []
    todo = [KERNEL_DIR / f"{level}.cu"]
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.append(path)
        todo += [KERNEL_DIR / name for name in re.findall(r'^#include "([^"]+)"', path.read_text(), re.M)]
    return seen


def _source_lines(level: str) -> list[str]:
    return [line.strip() for path in _files(level) for line in path.read_text(encoding="utf-8").splitlines()]


def _in_source(snippet: str, level: str) -> bool:
    return any(snippet in line for line in _source_lines(level))


def _cells(level: str) -> list[dict]:
    return json.loads((REPO / "notebooks" / f"{level}.ipynb").read_text(encoding="utf-8"))["cells"]


def walkthrough(level: str) -> tuple[str, str]:
    """The (English, Chinese) walk-through: the two cells right after the source cell, as read."""
    cells = _cells(level)
    i = next(i for i, c in enumerate(cells) if c["cell_type"] == "code"
             and "".join(c["source"]).strip() == f'gc.show_source("{level}")')
    en, zh = cells[i + 1], cells[i + 2]
    assert en["cell_type"] == zh["cell_type"] == "markdown"
    assert en["metadata"].get("tags") == ["lang-en"] and zh["metadata"].get("tags") == ["lang-zh"]
    return glossary.plain("".join(en["source"])), glossary.plain("".join(zh["source"]))


def _bullet_codes(text: str) -> list[str]:
    """The inline code spans that bullets of a walk-through name (every span of a bullet's first clause)."""
    codes = []
    for line in text.splitlines():
        if line.startswith("- `"):
            ends = [line.index(mark) for mark in ("`:", "`：") if mark in line]
            head = line[2:min(ends) + 1] if ends else line[2:]
            codes += re.findall(r"`([^`]+)`", head)
    return codes


@pytest.mark.parametrize("level", LEVELS)
def test_walkthrough_follows_the_source(level):
    en, zh = walkthrough(level)
    assert en.startswith(HEADING_EN + "\n"), en[:80]
    assert zh.startswith(HEADING_ZH + "\n"), zh[:80]


@pytest.mark.parametrize("level", LEVELS)
def test_chosen_lines_are_in_the_kernel_and_new(level):
    shared = SHARED_WITH_PREVIOUS.get(level, set())
    for snippet in LINES[level]:
        assert _in_source(snippet, level), f"{level}: the kernel files no longer hold {snippet!r}"
        if snippet not in shared:
            assert not _in_source(snippet, PREVIOUS[level]), f"{level}: {snippet!r} is not new against {PREVIOUS[level]}"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("lang", [0, 1], ids=["en", "zh"])
def test_walkthrough_names_every_chosen_line(level, lang):
    text = walkthrough(level)[lang]
    named = _bullet_codes(text)
    missing = [s for s in LINES[level] if s not in named]
    assert not missing, f"{level}: the walk-through does not name {missing}"
    assert 8 <= len(LINES[level]) <= 16


@pytest.mark.parametrize("level", LEVELS)
def test_every_bullet_quotes_a_real_line(level):
    """A bullet's code is a line of the level's files (or a short piece of one: `.x`, `float4`)."""
    en, _ = walkthrough(level)
    for code in _bullet_codes(en):
        assert _in_source(code, level), f"{level}: the walk-through quotes {code!r}, not in the kernel files"


# --- the worked examples' numbers --------------------------------------------------------------------

def _says(level: str, claims: list[str]) -> None:
    en, zh = walkthrough(level)
    for claim in claims:
        assert claim in en, f"{level}: the walk-through should say {claim!r}"


def test_level7_worked_example():
    p = gc.get_level("07_vectorized").resolve()
    bm, bn, bk, tm, tn = p["BM"], p["BN"], p["BK"], p["TM"], p["TN"]
    threads = (bm // tm) * (bn // tn)
    a_loads = (bm * bk // 4 + threads - 1) // threads
    tid = 5
    tr, tc = tid // (bn // tn), tid % (bn // tn)
    e = tid
    m, k = e // (bk // 4), (e % (bk // 4)) * 4
    _says("07_vectorized", [
        f"`BM = BN = {bm}`, `BK = {bk}`, `TM = TN = {tm}`, so {bm // tm} × {bn // tn} = {threads} threads",
        f"`tr = 5 / {bn // tn} = {tr}`, `tc = 5 % {bn // tn} = {tc}`",
        f"`A_LOADS = ({bm} × {bk} / 4 + {threads - 1}) / {threads} = {a_loads}`",
        f"row `row0 + {m}`, columns `k0 + {k}` to `k0 + {k + 3}`",
        f"columns `col0 + {(e % (bn // 4)) * 4}` to `col0 + {(e % (bn // 4)) * 4 + 3}`",
        f"`As[buf][{k}][{m}]` to `As[buf][{k + 3}][{m}]`",
        f"`Bs[cur][k][{tc * tn}]` to `Bs[cur][k][{tc * tn + tn - 1}]` ({tc} × {tn} = {tc * tn})",
        f"{tm} rows of the thread's tile takes {tn // 4} stores instead of {tn}, so {tm * tn // 4} stores instead of {tm * tn}",
    ])


def test_level8_worked_example():
    p = gc.get_level("08_warp_tiling").resolve()
    bm, bn, wm, wn, group_m = p["BM"], p["BN"], p["WM"], p["WN"], p["group_m"]
    warps_n = bn // wn
    warps = (bm // wm) * warps_n
    tid = 165
    warp, lane = tid // 32, tid % 32
    wm0, wn0 = (warp // warps_n) * wm, (warp % warps_n) * wn
    lm, ln = lane // 4, lane % 4
    rows = [wm0 + wi * 32 + lm * 4 for wi in range(wm // 32)]
    cols = [wn0 + wj * 16 + ln * 4 for wj in range(wn // 16)]
    tiles_n = 8192 // bn
    _says("08_warp_tiling", [
        f"`WARPS_N = {bn} / {wn} = {warps_n}` warps across and {warps} warps, {warps * 32} threads",
        f"warp {tid} / 32 = {warp}, lane {tid} % 32 = {lane}",
        f"so `wm0 = {wm0}`, `wn0 = {wn0}`",
        f"Lane {lane} is at `lm = {lm}`, `ln = {ln}`",
        f"= {rows[0]} to {rows[0] + 3}, then {wm0} + 32 + {lm * 4} = {rows[1]} to {rows[1] + 3}",
        f"= {cols[0]} to {cols[0] + 3}, then {wn0} + 16 + {ln * 4} = {cols[1]} to {cols[1] + 3}",
        f"8192 / {bn} = {tiles_n} tiles per row, so a group holds {group_m} × {tiles_n} = {group_m * tiles_n} blocks",
        f"Block 9 gets tile row 9 % {group_m} = {9 % group_m} and tile column 9 / {group_m} = {9 // group_m}",
    ])


def test_level9_worked_example():
    lv = gc.get_level("09_wmma")
    name = lv.kernel_name(lv.resolve(staging="none"))
    warps_m, warps_n = map(int, re.fullmatch(r"wmma_direct<__half, (\d+), (\d+)>", name).groups())
    warp = 200 // 32
    row = (0 * warps_m + warp // warps_n) * 16
    col = (1 * warps_n + warp % warps_n) * 16
    a_ld = int(re.search(r"constexpr int BK = (\d+);", gc.kernel_source(lv)).group(1)) + 8
    _says("09_wmma", [
        f"`{name}` (the `staging=\"none\"` setting: {warps_m} × {warps_n} = {warps_m * warps_n} warps, "
        f"{warps_m * warps_n * 32} threads per block)",
        f"warp 200 / 32 = {warp}, so its tile row is (0 × {warps_m} + {warp} / {warps_n}) × 16 = {row}",
        f"(1 × {warps_n} + {warp} % {warps_n}) × 16 = {col}",
        f"rows {row} to {row + 15}, columns {col} to {col + 15} of C",
        f"16 × 16 × 16 = {16 ** 3} multiply-adds",
        f"256 / 16 = {256 // 16} such steps",
        f"`A_LD = {a_ld - 8} + 8 = {a_ld}` halves",
    ])


def test_level10_worked_example():
    lv = gc.get_level("10_mma_pipeline")
    p = lv.resolve()
    stages, bn = p["stages"], p["BN"]
    bk = int(re.search(r"#define MMA_BK (\d+)", gc.kernel_source(lv)).group(1))

    def swizzle_a(row, chunk):  # the kernel's swizzle_a
        return row * 4 + (chunk ^ ((row >> 1) & 3))

    swizzled = [swizzle_a(r, 0) for r in range(8)]
    assert sorted(s % 8 for s in swizzled) == list(range(8))  # conflict-free, as the prose says
    _says("10_mma_pipeline", [
        f"`STAGES = {stages}`, `BN = {bn}`, k-tiles of {bk}",
        f"`tiles_k = 8192 / {bk} = {8192 // bk}`",
        f"`wait_group {stages - 2}`",
        f"`next = {stages - 1}` goes into stage {stages - 1} % {stages} = {(stages - 1) % stages}",
        f"`next = {stages}` goes into stage {stages} % {stages} = 0",
        "the positions are " + ", ".join(map(str, swizzled)),
        "which are slots " + ", ".join(str(s % 8) for s in swizzled),
        f"`BN / 8 = {bn // 8}` chunks",
        f"`NT = {bn} / 32 = {bn // 32}`",
        f"{4 * (bn // 32) * 4} accumulators per thread",
        "lane 5 holds rows `g = 1` and 1 + 8 = 9, columns `q = 2` and 3",
    ])


def test_level11_worked_example():
    lv = gc.get_level("11_hopper_wgmma")
    p = lv.resolve()
    stages = p["stages"]
    src = "\n".join(_source_lines("11_hopper_wgmma"))
    dec = int(re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32 (\d+)", src).group(1))
    inc = int(re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32 (\d+)", src).group(1))
    bk = int(re.search(r"constexpr int HOPPER_BK = (\d+);", src).group(1))
    bm, bn = map(int, re.search(r"constexpr int BM = (\d+), BN = (\d+), A_BYTES", src.rsplit("hopper_wgmma_specialized", 1)[1]).groups())
    regs = arch_limits("sm_90").registers_per_sm
    assert 128 * dec + 256 * inc <= regs
    _says("11_hopper_wgmma", [
        f"`PERSISTENT = true` and {stages} stages",
        f"8192 / {bk} = {8192 // bk} k-tiles",
        f"k-tiles 0, {stages}, {2 * stages}",
        f"register budget to {dec} per thread",
        f"raise theirs to {inc}",
        f"128 × {dec} + 256 × {inc} = {128 * dec + 256 * inc} of its {regs} registers",
        f"(0 / {stages} + 1) % 2 = 1",
        f"For k-tile {stages} (stage 0 again) it is ({stages} / {stages} + 1) % 2 = 0",
        f"({bm} + {bn}) × {bk} × 2 = {(bm + bn) * bk * 2} per k-tile",
        f"one box of A ({bk} × {bm}) and {bn // 64} boxes of B (64 × 64)",
    ])


# --- Level 9: where the headers come from, without machine paths ------------------------------------

MACHINE_PATHS = ("/work/", "/root/", "/home/", "site-packages")


def _level9_header_cell() -> str:
    cells = [c for c in _cells("09_wmma") if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in cells]
    assert not any("cuda_include_dirs" in s for s in sources), "the cell would print this machine's paths"
    return next(s for s in sources if "cuda_headers" in s)


def test_level9_cell_reports_packages_not_paths(capsys):
    cell = _level9_header_cell()
    exec(cell, {"gc": gc})  # outside IPython the display helpers print their plain text
    out = capsys.readouterr().out
    assert out.strip()
    for marker in MACHINE_PATHS:
        assert marker not in out, out
    for directory in gcompile.cuda_include_dirs():
        assert directory not in out
    for header in ("cuda_fp16.h", "mma.h"):
        assert header in out


def _fake_headers(root: Path, dirs: dict[str, list[str]]) -> tuple[str, ...]:
    out = []
    for d, headers in dirs.items():
        for h in headers:
            (root / d / h).parent.mkdir(parents=True, exist_ok=True)
            (root / d / h).write_text("")
        out.append(str(root / d))
    return tuple(out)


def test_headers_report_names_the_wheels(tmp_path, monkeypatch):
    site = "home/reader/venv/lib/python3.11/site-packages/nvidia"
    dirs = _fake_headers(tmp_path, {f"{site}/cuda_runtime/include": ["cuda_fp16.h", "cuda_bf16.h", "mma.h"],
                                    f"{site}/cuda_nvcc/include": ["crt/mma.h"]})
    monkeypatch.setattr(gcompile, "cuda_include_dirs", lambda: dirs)
    assert gcompile.cuda_headers_report() == [
        "cuda_fp16.h, cuda_bf16.h, mma.h: from the nvidia-cuda-runtime-cu12 wheel",
        "crt/mma.h: from the nvidia-cuda-nvcc-cu12 wheel",
    ]


def test_headers_report_names_a_toolkit(tmp_path, monkeypatch):
    dirs = _fake_headers(tmp_path, {"usr/local/cuda/include": ["cuda_fp16.h", "cuda_bf16.h", "mma.h", "crt/mma.h"]})
    monkeypatch.setattr(gcompile, "cuda_include_dirs", lambda: dirs)
    out = gcompile.cuda_headers_report()
    assert out == ["cuda_fp16.h, cuda_bf16.h, mma.h, crt/mma.h: from a CUDA toolkit"]
    assert str(tmp_path) not in "\n".join(out)


def test_headers_report_without_headers(monkeypatch):
    def missing():
        raise RuntimeError("no CUDA headers were found. Install them with pip")

    monkeypatch.setattr(gcompile, "cuda_include_dirs", missing)
    assert gcompile.cuda_headers_report() == ["no CUDA headers were found. Install them with pip"]
