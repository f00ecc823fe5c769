"""The notebooks' first cell, which installs the course on Colab or any fresh runtime.

Every notebook's first code cell starts with the install block that gemm_course.display.repository writes from
_config.yml's repository.url (no second copy of the URL to drift). The slow test runs that cell for real: a
clone of this repository (with the working tree's changes), a bare virtual environment with only what a
Colab runtime already has for running notebooks (ipykernel, nbclient), then Level 0's notebook executed in
it, first cell included, installing from the clone through GEMM_COURSE_SOURCE. It takes a few minutes
(pip installs CuPy and the CUDA wheels), so it runs only with GEMM_COURSE_COLAB_TEST=1.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from gemm_course.display import repository

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _first_code_cell(path: Path) -> str:
    return next(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_starts_with_the_generated_install_block(path):
    block, rest = repository.split_install_block(_first_code_cell(path))
    assert block == repository.install_block(), (
        f"{path.name}: the install block differs from _config.yml's; run python -m gemm_course.display.repository --write")
    assert "import gemm_course" in rest  # the cell then loads the package it made sure of


def test_the_install_block_uses_the_configured_url_and_an_extra_that_exists():
    block = repository.install_block()
    assert f'"git+{repository.configured_url()}"' in block and "GEMM_COURSE_SOURCE" in block
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for extra in ("cuda12", "cuda13"):  # the two extras the block picks between
        assert f'"{extra}"' in block and f"\n{extra} = [" in pyproject
    compile(block, "install block", "exec")


def _clean_env(**extra: str) -> dict:
    """This machine's environment without the test run's own virtual environment or Python paths."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
           and not k.startswith(("PYTEST", "GEMM_COURSE_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not (Path(p).parent / "pyvenv.cfg").exists())
    return {**env, **extra}


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.skipif(os.environ.get("GEMM_COURSE_COLAB_TEST") != "1",
                    reason="slow (pip installs the course in a bare venv): set GEMM_COURSE_COLAB_TEST=1")
def test_the_first_cell_installs_the_course_in_a_bare_venv_and_level_0_runs(tmp_path):
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(ROOT), str(clone)])
    # the working tree as it is (tracked and untracked, not ignored), committed in the clone for pip's git install
    files = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout
    for name in filter(None, files.split("\0")):
        source, target = ROOT / name, clone / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.exists():  # deleted in the working tree
            target.unlink()
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost"]
    _run([*git, "add", "-A"], cwd=clone)
    _run([*git, "commit", "-q", "--allow-empty", "-m", "working tree"], cwd=clone)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    # file://localhost/...: older pips refuse a PEP 508 URL with an empty host (file:///...)
    env = _clean_env(GEMM_COURSE_SOURCE=f"git+file://localhost{clone}", VIRTUAL_ENV=str(venv),
                     GEMM_COURSE_PROGRESS=str(tmp_path / "progress.json"), GEMM_COURSE_CPU_CACHE=str(tmp_path / "cpu"))
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    # what a Colab runtime already has for running notebooks; the course and its GPU requirements it does not
    _run([str(python), "-m", "pip", "install", "-q", "ipykernel>=6.29,<7", "nbclient", "nbformat"], env=env,
         timeout=600)
    work = tmp_path / "colab"  # an empty folder, as Colab opens a notebook: no repository files beside it
    work.mkdir()
    assert _run([str(python), "-c", "import importlib.util as u; print(u.find_spec('gemm_course'))"],
                env=env, cwd=work).stdout.strip() == "None"
    shutil.copy(ROOT / "notebooks" / "00_cuda_basics.ipynb", work)
    runner = ("import nbclient, nbformat, sys\n"
              "nb = nbformat.read(sys.argv[1], as_version=4)\n"
              "nbclient.NotebookClient(nb, timeout=900, kernel_name='python3', allow_errors=False,\n"
              "                        resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
              "nbformat.write(nb, sys.argv[1])\n")
    _run([str(python), "-c", runner, str(work / "00_cuda_basics.ipynb"), str(work)], env=env, cwd=work, timeout=1500)

    installed = _run([str(python), "-c", "import gemm_course, cupy; from cupy.cuda import nvrtc; "
                      "print(gemm_course.__file__, nvrtc.getVersion())"], env=env, cwd=work).stdout
    assert str(venv) in installed, installed  # installed into the venv from the clone, not imported from the tree
    executed = nbformat.read(work / "00_cuda_basics.ipynb", as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert outputs and not any(o.get("output_type") == "error" for o in outputs)
