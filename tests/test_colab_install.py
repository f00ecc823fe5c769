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


# What `nvidia-smi; nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader` prints on the runtimes learners
# meet: the header's CUDA version (the driver's), then one line per GPU.
SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+
|   0  {name:<36} Off |   00000000:00:04.0 Off |                    0 |
+-----------------------------------------+------------------------+----------------------+
{name}, {cc}
"""
RUNTIMES = [  # (GPU, compute capability, driver, its CUDA) -> the extra, and whether Blackwell's CUDA 12.8 is pinned
    ("Tesla T4", "7.5", "550.54.15", "12.4", "cuda12", False),
    ("Tesla T4", "7.5", "580.82.07", "13.0", "cuda13", False),
    ("NVIDIA L4", "8.9", "535.104.05", "12.2", "cuda12", False),
    ("NVIDIA A100-SXM4-40GB", "8.0", "580.82.07", "13.0", "cuda13", False),
    ("NVIDIA A100-SXM4-40GB", "8.0", "550.54.15", "12.4", "cuda12", False),
    ("Tesla P100-PCIE-16GB", "6.0", "580.82.07", "13.0", "cuda12", False),  # CUDA 13 has no sm_60
    ("NVIDIA B200", "10.0", "570.124.06", "12.8", "cuda12", True),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", "575.57.08", "12.9", "cuda12", True),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", "580.82.07", "13.0", "cuda13", False),
    (None, None, None, None, "cuda12", False),  # no GPU: nvidia-smi is not there
]


def _run_block(monkeypatch, smi: str, **env: str) -> tuple[list, list, str]:
    """Run the install block as if the course were missing, with nvidia-smi printing `smi` and pip faked:
    (pip install command, pip uninstall command, what the block printed)."""
    import contextlib
    import importlib.util
    import io

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gemm_course"
                        else real_find_spec(name, *a))
    for name in ("GEMM_COURSE_LANG", "GEMM_COURSE_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    calls = {}

    def fake_run(cmd, *args, **kw):
        if isinstance(cmd, str):  # the shell line that asks nvidia-smi
            return subprocess.CompletedProcess(cmd, 0 if smi else 127, smi, "" if smi else "nvidia-smi: not found")
        calls[cmd[3]] = cmd  # python -m pip install|uninstall ...
        failed = cmd[3] == "install" and env.get("PIP_FAILS")
        return subprocess.CompletedProcess(cmd, 1 if failed else 0, "", "ERROR: No matching distribution" if failed else "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(repository.install_block(), {})
    return calls.get("install"), calls.get("uninstall"), out.getvalue()


@pytest.mark.parametrize("gpu, cc, driver, cuda, extra, pinned", RUNTIMES,
                         ids=[f"{r[0]} CUDA {r[3]}" for r in RUNTIMES])
def test_the_block_picks_the_extra_for_the_driver_and_the_gpu(monkeypatch, gpu, cc, driver, cuda, extra, pinned):
    smi = SMI.format(driver=driver, cuda=cuda, name=gpu, cc=cc) if gpu else ""
    install, uninstall, printed = _run_block(monkeypatch, smi)
    assert f"gemm-course[{extra}] @ git+{repository.configured_url()}" in install
    assert any(a.startswith("nvidia-cuda-nvrtc-cu12>=12.8") for a in install) == pinned
    assert uninstall[-1] == ("cupy-cuda13x" if extra == "cuda12" else "cupy-cuda12x")  # never two CuPy packages
    assert len(printed.strip().splitlines()) == 1 and f"CUDA {extra[4:]}" in printed
    assert (gpu or "no GPU") in printed


def test_the_block_speaks_one_language_when_one_is_chosen(monkeypatch):
    smi = SMI.format(driver="550.54.15", cuda="12.4", name="Tesla T4", cc="7.5")
    english = _run_block(monkeypatch, smi, GEMM_COURSE_LANG="en")[2]
    chinese = _run_block(monkeypatch, smi, GEMM_COURSE_LANG="zh")[2]
    both = _run_block(monkeypatch, smi)[2]
    assert "installing" in english and "安装" not in english
    assert "安装" in chinese and "installing" not in chinese
    assert "installing" in both and "安装" in both


def test_the_source_may_be_a_clone_s_folder(monkeypatch, tmp_path):
    install = _run_block(monkeypatch, "", GEMM_COURSE_SOURCE=str(tmp_path))[0]
    assert install[-1] == f"{tmp_path}[cuda12]"
    monkeypatch.chdir(tmp_path.parent)
    install = _run_block(monkeypatch, "", GEMM_COURSE_SOURCE=tmp_path.name)[0]  # relative to the notebook
    assert install[-1] == f"{tmp_path}[cuda12]"
    install = _run_block(monkeypatch, "", GEMM_COURSE_SOURCE="git+file://localhost/srv/clone")[0]
    assert install[-1] == "gemm-course[cuda12] @ git+file://localhost/srv/clone"


def test_a_failed_pip_is_one_line_not_a_traceback(monkeypatch):
    with pytest.raises(SystemExit) as stop:
        _run_block(monkeypatch, "", PIP_FAILS="1", GEMM_COURSE_LANG="en")
    message = str(stop.value)
    assert "\n" not in message and "No matching distribution" in message and "run this cell again" in message


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
