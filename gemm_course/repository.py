"""Where the course's repository lives: one place, `repository.url` in _config.yml.

The book's launch buttons read it from there; the notebooks' install cell (`pip install git+URL`, for
Colab and fresh runtimes) and the clone commands of book/how_to_run.md repeat it. A fork sets the URL
once in _config.yml, then rewrites the copies:

    python -m gemm_course.repository            # list the places that differ from _config.yml
    python -m gemm_course.repository --write    # rewrite them
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
        for path in write():
            print(f"rewrote {path.relative_to(ROOT)}")
        return 0
    wrong = mismatches()
    for path, found in wrong:
        print(f"{path.relative_to(ROOT)}: {found} (_config.yml says {configured_url()})")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
