"""Small facts the pages state about the course itself, checked against the course.

* The introduction's "next page" is the page after it in _toc.yml, in both languages.
* The errors how-to-run names exist in the CPU backend, and what it says Level 0 shows is what Level 0's
  cells catch.
* Level 0's count of barriers per k-tile for Levels 2 to 8 is what the kernels pass on the CPU backend.
* No page and no displayed command shows a folder of the machine that built or recorded it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gemm_course import get_level
from gemm_course.run import cpu_backend
from gemm_course.display import glossary
from gemm_course.measure import results
from gemm_course.inspect import sass, warp_access
from gemm_course.exercises.grade import tile_shape

REPO = Path(__file__).resolve().parents[1]


def _cells(path: str, lang: str) -> list[str]:
    return [glossary.plain(c) for c in glossary.chapter_cells(REPO / path, lang)]


def test_intro_names_the_next_page() -> None:
    order = glossary.reading_order()
    assert order[0].name == "intro.md"
    nxt = order[1].relative_to(REPO / "book").as_posix() if order[1].parent.name == "book" else \
        "../" + order[1].relative_to(REPO).as_posix()
    en = next(c for c in _cells("book/intro.md", "en") if "The next page" in c)
    zh = next(c for c in _cells("book/intro.md", "zh") if "下一页" in c)
    assert re.search(r"The next page, \[[^\]]+\]\(" + re.escape(nxt) + r"\)", en)
    assert re.search(r"下一页 \[[^\]]+\]\(" + re.escape(nxt) + r"\)", zh)


def test_how_to_run_errors() -> None:
    text = "\n".join(_cells("book/how_to_run.md", "en") + _cells("book/how_to_run.md", "zh"))
    named = set(re.findall(r"`(Kernel\w+Error)`", text))
    assert named >= {"KernelRaceError", "KernelMemoryError", "KernelBarrierError"}
    assert all(issubclass(getattr(cpu_backend, n), cpu_backend.CpuBackendError) for n in named)
    level0 = json.loads((REPO / "notebooks" / "00_cuda_basics.ipynb").read_text(encoding="utf-8"))["cells"]
    caught = {n for c in level0 if c["cell_type"] == "code" for n in re.findall(r"except (Kernel\w+Error)", "".join(c["source"]))}
    assert caught == {"KernelMemoryError", "KernelRaceError"}
    en = next(c for c in _cells("book/how_to_run.md", "en") if "KernelBarrierError" in c)
    assert "shows the first, and a race of the same kind (`KernelRaceError`)" in en
    zh = next(c for c in _cells("book/how_to_run.md", "zh") if "KernelBarrierError" in c)
    assert "演示了前一种，并在一个更小的内核里演示了同类的竞争（`KernelRaceError`）" in zh


def _barriers_per_tile(n: int) -> float:
    """Barriers a block passes per k-tile of Level n's default, on the CPU backend (4 k-tiles; a barrier
    before the loop, as Levels 5 to 8 have after their first copy, does not count)."""
    lv = get_level(n)
    bm, bn, bk = tile_shape(lv, lv.resolve())
    tiles = 4
    log = warp_access.access_log(n, bm, bn, tiles * bk)
    (intervals,) = warp_access.barrier_intervals(log).values()
    return (intervals - 1) // tiles


def test_level0_barriers_per_tile() -> None:
    per_tile = {n: _barriers_per_tile(n) for n in range(2, 9)}
    assert {n for n, b in per_tile.items() if b == 2} == {2, 3}
    assert {n for n, b in per_tile.items() if b == 1} == {4, 5, 6, 7, 8}
    en = next(c for c in _cells("notebooks/00_cuda_basics.ipynb", "en") if "Levels 2 to 8 stage" in c)
    zh = next(c for c in _cells("notebooks/00_cuda_basics.ipynb", "zh") if "第 2 到第 8 级正是这样" in c)
    assert "Levels 2 and 3 keep one copy of each tile and pass two barriers per tile" in en
    assert "Levels 4 to 8 keep two copies" in en and "pass one barrier per tile" in en
    assert "第 2、3 级每个分块只有一份，每个分块要过两道屏障" in zh
    assert "第 4 到第 8 级每个分块有两份" in zh and "每个分块只需一道屏障" in zh


MACHINE_PATH = re.compile(r"/(?:home|root|work|tmp|Users|opt|usr)/|site-packages|[A-Za-z]:\\\\|/venv/|\.venv")


def test_no_machine_paths_in_pages() -> None:
    bad = []
    for page in sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "book").glob("*.md")):
        for m in MACHINE_PATH.finditer(page.read_text(encoding="utf-8")):
            bad.append(f"{page.name}: {m.group(0)}")
    assert not bad, bad


def test_displayed_commands_name_no_folder() -> None:
    for path in results.recorded_files():
        prov = results.load(path)["provenance"]
        shown = results.command_line(prov)
        assert "--out FILE" in shown or "--out" not in prov.get("command", ""), (path.name, shown)
        assert not MACHINE_PATH.search(shown) and not re.search(r"--out \S*/", shown), (path.name, shown)


def test_disassembler_is_named_without_its_path() -> None:
    name = sass.disassembler_name()
    assert "/" not in name and "\\" not in name
    assert name == "none" or name.split()[0] in ("nvdisasm", "cuobjdump")


@pytest.mark.parametrize("argv", [["counters", "--level", "2"], ["counters", "--level", "1", "--json"]])
def test_counters_command_shows_no_folder(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from gemm_course.__main__ import main

    main(argv)
    out = capsys.readouterr().out
    assert "--out FILE" in out and "--out gemm_course/" not in out


def test_l2_size_in_one_unit() -> None:
    """The H200's L2 is quoted in decimal megabytes, like the matrix sizes beside it, from the recorded
    provenance (62914560 bytes = 60 MiB = 63 MB); no page quotes it in another unit."""
    l2 = results.find("05_register_blocking", 4096)["provenance"]["l2_bytes"]
    quoted = f"{l2 / 1e6:.0f} MB"
    assert quoted == "63 MB"
    for page in ("notebooks/05_register_blocking.ipynb", "notebooks/08_warp_tiling.ipynb",
                 "notebooks/11_hopper_wgmma.ipynb"):
        for lang in ("en", "zh"):
            text = "\n".join(_cells(page, lang))
            assert re.search(re.escape(quoted) + r"( 的)? L2", text), (page, lang)
            assert not re.search(r"\b60 (MB|MiB)\b", text), (page, lang)


def test_level0_static_and_dynamic_shared_memory() -> None:
    """Level 0 reconciles the 48 KB of static shared memory a block may declare with the 227 KiB of dynamic
    shared memory it may opt into on Hopper; both numbers come from the architecture table."""
    from gemm_course import models

    lim = models.arch_limits("sm_90")
    static, dynamic = f"{lim.static_shared_limit // 1024} KB", f"{lim.max_shared_per_block // 1024} KiB"
    assert (static, dynamic) == ("48 KB", "227 KiB")
    for lang, words in (("en", ("static shared memory", "dynamic shared memory", "opts in")),
                        ("zh", ("静态共享内存", "动态共享内存", "声明允许"))):
        cell = next(c for c in _cells("notebooks/00_cuda_basics.ipynb", lang) if dynamic in c and static in c)
        assert all(w in cell for w in words), (lang, cell)


def test_level0_names_the_other_cpp_features() -> None:
    """Level 0 says which C++ features Levels 1 to 8 use beyond its table, and each one is really there."""
    kernels = REPO / "gemm_course" / "kernels"
    source = "\n".join((kernels / name).read_text(encoding="utf-8") for name in
                       [p.name for p in sorted(kernels.glob("0[1-8]_*.cu"))] + ["common.cuh"])
    en = next(c for c in _cells("notebooks/00_cuda_basics.ipynb", "en") if "The kernels of Levels 1 to 8" in c)
    zh = next(c for c in _cells("notebooks/00_cuda_basics.ipynb", "zh") if "第 1 到第 8 级的内核" in c)
    for word, pattern in (("constexpr", r"\bconstexpr\b"), ("lambda", r"\[[&=]?\]\s*\("), ("struct", r"\bstruct\b"),
                          ("#define", r"#define"), ("asm volatile", r"asm volatile")):
        assert re.search(pattern, source), word
        assert word in en and word in zh, word
