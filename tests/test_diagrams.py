"""The explanatory figures build, without a GPU, and show what their docstrings claim."""
import plotly.graph_objects as go
import pytest

from gemm_course import models
from gemm_course.display import diagrams
from gemm_course.measure import results
from gemm_course.levels import get_level


def _trace(fig: go.Figure, name: str):
    found = [t for t in fig.data if t.name == name]
    assert len(found) == 1, f"expected one trace named {name!r}, found {len(found)}"
    return found[0]


def _bilingual(text: str) -> bool:
    return " · " in text and any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_matmul_figure_highlights_row_column_and_element():
    M, N, K, i, j = 4, 5, 6, 1, 3
    fig = diagrams.matmul_figure(M, N, K, i, j)
    assert isinstance(fig, go.Figure)
    A, B, C = (_trace(fig, n) for n in "ABC")
    assert [len(A.z), len(A.z[0])] == [M, K]
    assert [len(B.z), len(B.z[0])] == [K, N]
    assert [len(C.z), len(C.z[0])] == [M, N]
    assert {(r, c) for r in range(M) for c in range(K) if A.z[r][c]} == {(i, k) for k in range(K)}
    assert {(r, c) for r in range(K) for c in range(N) if B.z[r][c]} == {(k, j) for k in range(K)}
    assert {(r, c) for r in range(M) for c in range(N) if C.z[r][c]} == {(i, j)}
    assert C.z[i][j] == 2
    # row-major offsets in the hover text
    assert A.customdata[i][2].endswith(f"A[{i * K + 2}]")
    assert _bilingual(fig.layout.title.text)


def test_matmul_figure_rejects_element_outside_c():
    with pytest.raises(ValueError):
        diagrams.matmul_figure(4, 5, 6, i=4, j=0)


@pytest.mark.parametrize("mapping", ["cols", "rows"])
def test_naive_element_matches_level_geometry(mapping):
    """Every element of C is computed by exactly one thread of the grid that levels.py launches."""
    lv = get_level("01_naive")
    p = lv.resolve(mapping=mapping, block_x=16, block_y=4)
    M, N = 37, 50
    launch = lv.geometry(M, N, 8, p)
    seen = []
    for by in range(launch.grid[1]):
        for bx in range(launch.grid[0]):
            for ty in range(p["block_y"]):
                for tx in range(p["block_x"]):
                    r, c = diagrams.naive_element(mapping, 16, 4, (bx, by), (tx, ty))
                    if r < M and c < N:
                        seen.append((r, c))
    assert sorted(seen) == [(r, c) for r in range(M) for c in range(N)]


def test_warp_outline_is_a_row_segment_for_cols():
    fig = diagrams.thread_map_figure("cols", block_x=32, block_y=8, M=64, N=64)
    warp = _trace(fig, "warp")
    assert len(warp.x) == 32
    assert len(set(warp.y)) == 1                        # one row
    assert sorted(warp.x) == list(range(min(warp.x), min(warp.x) + 32))  # 32 neighbouring columns
    assert list(warp.x) == sorted(warp.x)               # lane order follows the columns


def test_warp_outline_is_a_column_segment_for_rows():
    fig = diagrams.thread_map_figure("rows", block_x=32, block_y=8, M=64, N=64)
    warp = _trace(fig, "warp")
    assert len(warp.y) == 32
    assert len(set(warp.x)) == 1                        # one column
    assert sorted(warp.y) == list(range(min(warp.y), min(warp.y) + 32))
    red = [s for s in fig.layout.shapes if s.line.color == diagrams._WARP]
    assert len(red) == 1 and red[0].y1 - red[0].y0 == 32 and red[0].x1 - red[0].x0 == 1


def test_narrow_blocks_split_a_warp_over_rows():
    """With blockDim.x = 16 a warp of "cols" covers two half-rows, drawn as two outlines."""
    cells = diagrams.warp_elements("cols", 16, 16, (0, 0), 0)
    assert len(cells) == 32 and len({r for r, _ in cells}) == 2
    fig = diagrams.thread_map_figure("cols", block_x=16, block_y=16, M=32, N=32, block=(0, 0), warp=0)
    assert len([s for s in fig.layout.shapes if s.line.color == diagrams._WARP]) == 2


def test_thread_map_colours_neighbouring_blocks_differently():
    fig = diagrams.thread_map_figure("cols", block_x=32, block_y=8, M=64, N=64)
    z = _trace(fig, "blocks").z
    assert len(z) == 64 and len(z[0]) == 64
    assert z[0][31] != z[0][32]   # left/right neighbours across a block edge
    assert z[7][0] != z[8][0]     # up/down neighbours
    assert z[0][0] == z[7][31]    # same block, same colour
    assert _bilingual(fig.layout.xaxis.title.text) and _bilingual(fig.layout.yaxis.title.text)


def test_thread_map_partial_blocks_stay_inside_c():
    fig = diagrams.thread_map_figure("rows", block_x=32, block_y=8, M=40, N=20, block=(1, 2), warp=0)
    warp = _trace(fig, "warp")
    assert len(warp.y) == 8 and max(warp.y) == 39   # rows 32..39 exist, 40..63 are masked off


def test_thread_map_rejects_bad_arguments():
    with pytest.raises(ValueError):
        diagrams.thread_map_figure("diagonal")
    with pytest.raises(ValueError):
        diagrams.thread_map_figure("cols", M=64, N=64, block=(5, 0))
    with pytest.raises(ValueError):
        diagrams.warp_elements("cols", 32, 8, warp=8)


def test_memory_hierarchy_uses_recorded_provenance():
    prov = results.load(results.recorded_files()[0])["provenance"]
    fig = diagrams.memory_hierarchy_figure(prov)
    bars = _trace(fig, "capacity")
    lim = models.arch_limits("sm_" + prov["compute_capability"].replace(".", ""))
    assert list(bars.x) == [lim.registers_per_sm * 4 * prov["sm_count"],
                            lim.max_shared_per_sm * prov["sm_count"], prov["l2_bytes"],
                            prov["memory_bytes"]]
    assert all(_bilingual(name) for name in bars.y)


def test_table_escapes_and_aligns():
    out = diagrams.table(["a · 甲", "b"], [["<x>", 1.5]]).data
    assert "&lt;x&gt;" in out and out.count("<tr>") == 2
    assert 'text-align:right' in out.split("1.5")[0].rsplit("<td", 1)[1]  # numbers right-aligned
    assert 'text-align' not in out.split("&lt;x&gt;")[0].rsplit("<td", 1)[1]
