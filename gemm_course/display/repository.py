"""Where the course's repository lives: one place, `repository.url` in _config.yml.

The book's launch buttons read it from there; the notebooks' install cell (for Colab and fresh runtimes,
written by install_block() from that URL) and the clone commands of book/how_to_run.md repeat it. A fork
sets the URL once in _config.yml, then rewrites the copies:

    python -m gemm_course.display.repository            # list the places that differ from _config.yml
    python -m gemm_course.display.repository --write    # rewrite them (and every notebook's install block)

The install block installs the package with the GPU requirements for the driver's CUDA and the GPU (the
`cuda12` or `cuda13` extra of pyproject.toml: CuPy, NVRTC, the CUDA headers, nvdisasm): `cuda13` where the
driver runs CUDA 13 and every GPU is sm_75 or newer (CUDA 13 dropped older ones), `cuda12` otherwise, with
CUDA 12.8 or newer for a Blackwell GPU (sm_100, sm_120: older NVRTCs cannot compile for it); it removes the
other CuPy package first (Colab ships cupy-cuda12x; two CuPy packages in one Python break each other). It
prints one line in the language of GEMM_COURSE_LANG (en, zh; both otherwise) and, if pip fails, stops with
one line instead of a traceback. The environment variable GEMM_COURSE_SOURCE, where set, replaces the
repository: a URL in pip's `name @ URL` form (e.g. git+file://localhost/path/to/a/clone), or a clone's
folder; tests/test_colab_install.py installs from a local clone that way, and runs the block against
simulated nvidia-smi outputs.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "_config.yml"
_URL = r"""https?://[^\s"'`)\\]+"""  # up to a space, quote, bracket or the backslash of a JSON escape
# (file pattern, regex whose group 1 is the URL)
PLACES: tuple[tuple[str, str], ...] = (
    ("notebooks/*.ipynb", r"git\+(" + _URL + r")"),
    ("book/how_to_run.md", r"git clone (" + _URL + r")"),
)


def configured_url(config: Path = CONFIG) -> str:
    """repository.url from _config.yml (read as text: the package does not need a YAML parser)."""
    text = config.read_text(encoding="utf-8")
    block = re.search(r"^repository:\s*\n((?:[ \t]+.*\n?)+)", text, flags=re.M)
    found = block and re.search(r"^\s+url:\s*(\S+)", block.group(1), flags=re.M)
    if not found:
        raise ValueError(f"{config} has no repository.url")
    return found.group(1).strip("\"'")


INSTALL_HEADING = "# Colab or a fresh runtime: install the course package if it is missing (no-op otherwise)"
INSTALL_TEMPLATE = INSTALL_HEADING + """
# Colab 或全新环境：若尚未安装课程包则先安装（已安装时什么也不做）
import importlib.util, os, re, subprocess, sys
if importlib.util.find_spec("gemm_course") is None:  # CuPy, NVRTC and CUDA headers for this driver and GPU
    say = lambda en, zh: {{"en": en, "zh": zh}}.get(os.environ.get("GEMM_COURSE_LANG", "").lower(), f"{{en}} · {{zh}}")
    smi = subprocess.run("nvidia-smi; nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader", shell=True,
                         capture_output=True, text=True).stdout
    gpus = {{name: int(a) * 10 + int(b) for name, a, b in re.findall(r"^(.+), (\\d+)\\.(\\d)$", smi, re.M)}}  # name: sm
    driver = int((re.search(r"CUDA Version: (\\d+)", smi) or [0, 0])[1])
    cuda = "cuda13" if driver >= 13 and min(gpus.values(), default=75) >= 75 else "cuda12"  # 13: sm_75 and newer
    pins = (["cupy-cuda12x>=13.4", "nvidia-cuda-nvrtc-cu12>=12.8", "nvidia-cuda-nvcc-cu12>=12.8"]  # Blackwell
            if cuda == "cuda12" and max(gpus.values(), default=0) >= 100 else [])
    source = os.environ.get("GEMM_COURSE_SOURCE", "git+{url}")  # a URL or a clone's folder
    spec = f"gemm-course[{{cuda}}] @ {{source}}" if "://" in source else f"{{os.path.abspath(source)}}[{{cuda}}]"
    start = say(f"installing the course for CUDA {{cuda[4:]}} ({{', '.join(gpus) or 'no GPU'}})",
                f"正在为 CUDA {{cuda[4:]}} 安装课程（{{'、'.join(gpus) or '没有 GPU'}}）")
    print(start)  # in one language where GEMM_COURSE_LANG chooses one
    other = "cupy-cuda13x" if cuda == "cuda12" else "cupy-cuda12x"  # two CuPy packages break each other
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", other], capture_output=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", spec, *pins], capture_output=True, text=True)
    if pip.returncode:
        why = (pip.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(say(f"pip could not install {{spec}} ({{why}}): check GEMM_COURSE_SOURCE and the network, "
                             "then run this cell again", f"pip 无法安装 {{spec}}（{{why}}）：请检查 "
                             "GEMM_COURSE_SOURCE 和网络，然后重新运行本单元格"))
    importlib.invalidate_caches()
"""


def install_block(url: Optional[str] = None) -> str:
    """The lines every notebook's first code cell starts with, for the repository at `url` (default:
    _config.yml's). They run before the package exists, so they are self-contained."""
    return INSTALL_TEMPLATE.format(url=url or configured_url())


def split_install_block(source: str) -> tuple[str, str]:
    """(install block, the rest) of a notebook's first code cell: the block is the heading comment up to
    the end of its `if ... find_spec` statement. Raises ValueError if the cell has no such block."""
    lines = source.splitlines(keepends=True)
    if not lines or not lines[0].startswith(INSTALL_HEADING[:30]):
        raise ValueError(f"the first code cell does not start with {INSTALL_HEADING[:30]!r}")
    start = next((i for i, line in enumerate(lines) if line.startswith("if importlib.util.find_spec")), None)
    if start is None:
        raise ValueError("the install block has no `if importlib.util.find_spec(...)` statement")
    end = start + 1
    while end < len(lines) and lines[end][:1] in (" ", "\t"):
        end += 1
    return "".join(lines[:end]), "".join(lines[end:])


def write_install_cells(root: Path = ROOT) -> list[Path]:
    """Rewrite the install block of every notebook's first code cell from install_block(); the files changed.
    Run it under the notebooks' lock when others may be editing them."""
    import nbformat

    block = install_block(configured_url(root / "_config.yml"))
    changed = []
    for path in sorted(root.glob("notebooks/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if c.cell_type == "code")
        old, rest = split_install_block(cell.source)
        if old != block:
            cell.source = block + rest
            nbformat.write(nb, path)
            changed.append(path)
    return changed


def mismatches(root: Path = ROOT) -> list[tuple[Path, str]]:
    """(file, URL found) for every copy of the URL that differs from _config.yml's."""
    url = configured_url(root / "_config.yml")
    out = []
    for pattern, regex in PLACES:
        for path in sorted(root.glob(pattern)):
            for found in re.findall(regex, path.read_text(encoding="utf-8")):
                if found != url:
                    out.append((path, found))
    return out


def write(root: Path = ROOT) -> list[Path]:
    """Rewrite every copy to _config.yml's URL; the files changed."""
    url = configured_url(root / "_config.yml")
    changed = []
    for pattern, regex in PLACES:
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            new = re.sub(regex, lambda m: m.group(0).replace(m.group(1), url), text)
            if new != text:
                path.write_text(new, encoding="utf-8")
                changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    if "--write" in argv:
        for path in dict.fromkeys([*write(), *write_install_cells()]):
            print(f"rewrote {path.relative_to(ROOT)}")
        return 0
    wrong = mismatches()
    for path, found in wrong:
        print(f"{path.relative_to(ROOT)}: {found} (_config.yml says {configured_url()})")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
