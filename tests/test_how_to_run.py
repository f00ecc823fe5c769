"""book/how_to_run.md and book/intro.md: their code runs, the commands they show work, their numbers hold.

* Every ``{code-cell}`` of each page is executed, in order, in one namespace (as the book build does),
  so a broken call fails here. No GPU is needed: the cells ask for the CPU backend explicitly.
* Every shell command of the English ``bash`` blocks of how_to_run.md that needs no GPU is run in a
  scratch directory (the install lines, which need the network, are left out; a command whose
  subcommand the page marks "GPU" is left out too). A line whose comment says FAIL must exit 1.
* Every number the new prose quotes is recomputed from the package.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gemm_course import get_level, levels
from gemm_course.measure import counters
from gemm_course.run import cpu_backend
from gemm_course.inspect import warp_access
from gemm_course.exercises import exercises
from gemm_course.models import SECTOR_BYTES
from test_bilingual import read_myst  # tests/ is on sys.path (rootdir-less test modules)
from test_prose_pages import english

REPO = Path(__file__).resolve().parents[1]
PAGES = ["book/how_to_run.md", "book/command_line.md", "book/intro.md"]
NO_NETWORK = ("git clone", "cd gemm-course", "pip install", "jupyter lab")


def _code_cells(page: str) -> list[str]:
    return [c.source for c in read_myst(REPO / page) if c.kind == "code"]


@pytest.mark.parametrize("page", PAGES)
def test_code_cells_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cells = _code_cells(page)
    assert cells, f"{page} has no code cells"
    monkeypatch.chdir(tmp_path)  # the cells look for my_gpu.json in the working directory
    namespace: dict = {"__name__": "__page__"}
    for i, source in enumerate(cells):
        try:
            exec(compile(source, f"{page}[code cell {i}]", "exec"), namespace)
        except Exception as err:  # name the cell that broke
            pytest.fail(f"{page}, code cell {i} raised {type(err).__name__}: {err}\n{source}")


def _commands(pages: tuple[str, ...] = ("how_to_run.md", "command_line.md")) -> list[tuple[str, str]]:
    """(command, comment) for every line of the bash blocks in the English prose of the pages."""
    text = "\n".join(english(page) for page in pages)
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            if command.strip():
                out.append((command.strip(), comment.strip()))
    return out


def _subcommand(command: str) -> str:
    words = shlex.split(command)
    return words[3] if words[:3] == ["python", "-m", "gemm_course"] and len(words) > 3 else ""


def test_shell_commands_work(tmp_path: Path) -> None:
    commands = _commands()
    gpu = {_subcommand(c) for c, comment in commands if "GPU" in comment} - {""}
    assert {"bench", "record", "check"} <= gpu, gpu
    (tmp_path / "gemm_course").symlink_to(REPO / "gemm_course")  # paths as in a clone of the repository
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    ran = []
    for command, comment in commands:
        if command.startswith(NO_NETWORK) or _subcommand(command) in gpu:
            continue
        line = re.sub(r"^python ", shlex.quote(sys.executable) + " ", command)
        done = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        expected = 1 if "FAIL" in comment else 0
        assert done.returncode == expected, f"`{command}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        ran.append(_subcommand(command) or command.split()[0])
    assert {"exercises", "grade", "counters", "levels", "report", "summary"} <= set(ran), ran


def test_the_install_lines_are_shown() -> None:
    shown = [c for c, _ in _commands()]
    assert "pip install -r requirements.txt" in shown
    assert "pip install jupyterlab" in shown  # requirements.txt installs ipykernel, not JupyterLab
    requirements = (REPO / "requirements.txt").read_text(encoding="utf-8")
    assert "ipykernel" in requirements and "jupyterlab\n" not in requirements.replace("jupyterlab_", "")


# --- the numbers of the prose -----------------------------------------------------------------------------


def _simt_levels() -> list[int]:
    return [lv.number for lv in levels() if not lv.uses_tensor_cores]


def _tensor_core_levels() -> list[int]:
    return [lv.number for lv in levels() if lv.uses_tensor_cores]


def test_how_to_run_numbers() -> None:
    text = english("how_to_run.md")
    # Levels 0 (the primer) and 1 to 8 run on the CPU; 9 to 11 are Tensor Core levels
    assert _simt_levels() == list(range(1, 9)) and "Levels 1 to 8" in text
    assert _tensor_core_levels() == [9, 10, 11] and text.count("Levels 9 to 11") == 2
    # every level from 0 to 14 has exercises; 1 to 11 have recorded counters
    assert {e.number for e in exercises()} == set(range(0, 15)) and "Every level from 0 to 14 ends with exercises" in text
    assert all(counters.table_rows(lv.id) for lv in levels() if 1 <= lv.number <= 11)
    assert {r["gpu"] for r in counters.recorded()} == {"NVIDIA H200"}
    assert text.count("Levels 1 to 11") == 1
    # the CPU backend's limit: about 512³ multiply-adds
    assert cpu_backend.DEFAULT_MAX_WORK == 512 ** 3
    assert f"about 512³ multiply-adds ({cpu_backend.DEFAULT_MAX_WORK:,} by default)" in text
    assert cpu_backend.MAX_WORK_ENV in text
    # the race of Level 2 without its first barrier
    A, B = np.ones((100, 40), np.float32), np.ones((40, 70), np.float32)
    broken = get_level(2).path.read_text(encoding="utf-8").replace("__syncthreads();", "", 1)
    with pytest.raises(cpu_backend.KernelRaceError) as race:
        import gemm_course as gc
        gc.gemm(A, B, 2, source=broken, backend="cpu")
    (t0, t1), (l0, l1), (a0, a1) = race.value.threads, race.value.lines, race.value.actions
    assert (a0, a1) == ("read", "wrote")
    assert (f"thread ({','.join(map(str, t0))}) read a word at line {l0.split(':')[1]} that thread "
            f"({','.join(map(str, t1))}) wrote at line {l1.split(':')[1]}") in text
    assert l0.startswith("02_smem_tiling.cu:") and "`02_smem_tiling.cu`" in text
    # ... and the Chinese twin names the same lines (the kernel's comments, in two languages, move them)
    zh = "\n".join(c.source for c in read_myst(REPO / "book" / "how_to_run.md") if "lang-zh" in c.tags)
    assert (f"线程 ({','.join(map(str, t0))}) 在第 {l0.split(':')[1]} 行读取了一个字，而线程 "
            f"({','.join(map(str, t1))}) 在第 {l1.split(':')[1]} 行写入了这个字") in zh
    # Level 1 with mapping=rows: 32 sectors per load of A where 4 would do
    loads = [r for r in warp_access.profile(1, 64, 64, 64, mapping="rows") if r.array == "A"]
    assert len(loads) == 1 and loads[0].per_access == 32 and loads[0].ideal_units / loads[0].warp_accesses == 4
    assert f"{SECTOR_BYTES}-byte sectors" in text and "32 threads of a warp" in text
    assert "each load of A touches 32 sectors where 4 would do, and so does each store of C" in text
    rows = {(r.array, r.write): r.per_access for r in warp_access.profile(1, 64, 64, 64, mapping="rows")}
    cols = {(r.array, r.write): r.per_access for r in warp_access.profile(1, 64, 64, 64, mapping="cols")}
    assert rows[("C", True)] == 32 and cols[("B", False)] == 4 and cols[("A", False)] == 1
    assert "a warp reads 32 neighbouring floats of B, 4 sectors, and one float of A that all its threads " \
           "share, 1 sector" in text
    # grade's exit status
    from gemm_course.exercises.grade import EXIT_CODES

    assert EXIT_CODES == {"solved": 0, "failed": 1, "not_verified": 3}
    assert "exits with 0 when your kernel passes, 1 when it fails and 3 when it compiled but could not be verified" in text


def test_intro_numbers() -> None:
    text = english("intro.md")
    assert "Level 0, [the CUDA programming model](../notebooks/00_cuda_basics.ipynb)" in text
    assert (REPO / "notebooks" / "00_cuda_basics.ipynb").is_file()
    for page in ("gpu_primer.md", "sass_cheatsheet.md", "glossary.md"):
        assert f"]({page})" in (REPO / "book" / "intro.md").read_text(encoding="utf-8"), page
    assert {e.number for e in exercises()} == set(range(0, 15))
    assert all(counters.table_rows(lv.id) for lv in levels() if 1 <= lv.number <= 11)
    assert "Levels 1 to 11 also set the models' predictions beside hardware counters measured with Nsight " \
           "Compute on the H200, and every level from 0 to 14 ends with exercises" in text
    assert _simt_levels() == list(range(1, 9)) and "the kernels of Levels 0 to 8 run on your CPU" in text


def test_how_to_run_host_cost_numbers() -> None:
    """The repeated call's host cost, as the shipped hostcost recording has it, in both languages."""
    import json

    from gemm_course.measure import host_cost as hc

    rows = json.loads((REPO / "gemm_course" / "results" / "h200_host_cost.json").read_text(encoding="utf-8"))["host_cost"]
    assert [(r["level"], r["params"]) for r in rows] == [(lv, p) for lv, p, *_ in hc.host_cost_plan()]
    assert {r["M"] for r in rows} == {4096}

    def span(values: list) -> str:
        return f"{min(values):.0f}–{max(values):.0f} µs"

    gemm, alone = span([r["host_us"]["gemm"] for r in rows]), span([r["host_us"]["prepared"] for r in rows])
    waited = span([r["host_us_batch_mean"]["gemm"] for r in rows])
    worst = max(abs(1 - r["ratio"]) for r in rows)
    assert all(r["meets_host_target"] and r["meets_ratio_target"] for r in rows)
    text = english("how_to_run.md")
    assert f"such a call spent {gemm} on the host" in text and f"the kernel launch alone {alone[:-3]} µs)" in text
    assert f"ran within {worst:.1%} of the launch alone, at every level" in text
    assert f"averaged over batches of ten calls that each start with such a wait, {waited} per call" in text
    zh = (REPO / "book" / "how_to_run.md").read_text(encoding="utf-8")
    assert f"这样一次调用在主机上花费 {gemm}" in zh and f"单独启动内核为 {alone}" in zh
    assert f"每一级都与单独启动内核相差不到 {worst:.1%}" in zh and f"按批平均，每次调用 {waited}" in zh
