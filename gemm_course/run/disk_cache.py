"""Where compiled kernels are kept between processes, and how that folder stays small.

Two caches live under $XDG_CACHE_HOME/gemm_course (else ~/.cache/gemm_course): `cpu/` (the CPU backend's
shared libraries, its precompiled compat header, pch/, and its runtime compiled once, runtime/;
$GEMM_COURSE_CPU_CACHE moves it) and `nvrtc/`
(NVRTC's CUBINs for the compile reports). CuPy keeps its own in $CUPY_CACHE_DIR, else ~/.cupy/kernel_cache.

A folder that cannot be written (a read-only home) is replaced by one under the system's temporary folder,
with a one-line notice naming the variable that moves it for good; if that cannot be written either, the
error says so in one line.

Every edit a learner grades compiles a new kernel (about 170 KB), so each cache is pruned, at most once per
process when it is first written: beyond $GEMM_COURSE_CACHE_MB megabytes (default 256; 0: no limit) the
least recently used files go first (a file is touched each time it is used), and of the precompiled headers
and of the runtime objects only the two newest stay (one with the race detector, one without).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

LIMIT_ENV = "GEMM_COURSE_CACHE_MB"
DEFAULT_LIMIT_MB = 256
KEEP_BUILT = 2          # of each kind built once, the newest kept: the race-detector build's and the plain one's
BUILT_ONCE = ("pch", "runtime")  # folders of things built once per compiler and flags (cpu_backend)
RECENT_S = 600          # a file used this recently is never removed (another process may be loading it)
STALE_TMP_S = 3600      # a temporary folder left by a process that was killed

_notified = False
_pruned: set[Path] = set()
_resolved: dict[tuple[Path, str], Path] = {}


def _say(en: str, zh: str) -> str:
    from gemm_course.bilingual.text import plain

    return plain(en, zh)


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe"):
            pass
        return True
    except OSError:
        return False


def _fallback_root() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"gemm_course-cache-{uid}"


def _notice(folder: Path, variable: str, fallback: Path) -> None:
    """Once per process: the first folder that could not be written, and where compiled kernels go instead."""
    global _notified
    if _notified:
        return
    _notified = True
    fallback = fallback.parent  # every cache's temporary folder lies under it
    print(_say(f"gemm_course: cannot write the cache folder {folder} (a read-only home?); compiled kernels are kept "
               f"under {fallback} for now: set {variable} (and CUPY_CACHE_DIR for CuPy's cache) to a writable folder "
               "to keep them",
               f"gemm_course：无法写入缓存目录 {folder}（主目录是只读的？）；编译好的内核暂时存放在 {fallback}：请把 "
               f"{variable}（以及 CuPy 缓存用的 CUPY_CACHE_DIR）设为一个可写的目录，以便长期保留"), file=sys.stderr)


def writable_folder(folder: Path, variable: str = "XDG_CACHE_HOME", name: str = "") -> Path:
    """`folder` if it can be written; else <temp>/gemm_course-cache-<uid>/<name> with a one-line notice that
    names `variable`; a RuntimeError in one line if neither can be written. Checked once per process."""
    key = (Path(folder), name)
    if key in _resolved:
        return _resolved[key]
    if _writable(folder):
        _resolved[key] = folder
        return folder
    fallback = _fallback_root() / (name or folder.name)
    if _writable(fallback):
        _notice(folder, variable, fallback)
        _resolved[key] = fallback
        return fallback
    raise RuntimeError(_say(
        f"cannot write the cache folder {folder}, nor {fallback}: set {variable} to a writable folder "
        "(e.g. XDG_CACHE_HOME=/tmp/cache)",
        f"无法写入缓存目录 {folder}，也无法写入 {fallback}：请把 {variable} 设为一个可写的目录"
        "（例如 XDG_CACHE_HOME=/tmp/cache）"))


def cache_home() -> Path:
    """$XDG_CACHE_HOME, else ~/.cache (not created)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def _could_write(folder: Path) -> bool:
    """Whether `folder` is writable, or could be made: its nearest existing ancestor is a writable folder. Creates
    nothing."""
    for path in (folder, *folder.parents):
        if path.exists():
            return path.is_dir() and os.access(path, os.W_OK | os.X_OK)
    return False


def prepare_cupy_cache() -> None:
    """Point CuPy at a writable kernel cache before it is imported (CuPy makes ~/.cupy/kernel_cache as it loads,
    and a read-only home ends that import with a long traceback): where CuPy is installed, CUPY_CACHE_DIR is not
    set and that folder cannot be written, a temporary folder, with the one-line notice."""
    import importlib.util

    if os.environ.get("CUPY_CACHE_DIR") or "cupy" in sys.modules or importlib.util.find_spec("cupy") is None:
        return
    default = Path.home() / ".cupy" / "kernel_cache"
    if _could_write(default):
        return
    fallback = _fallback_root() / "cupy"
    if _writable(fallback):
        os.environ["CUPY_CACHE_DIR"] = str(fallback)
        _notice(default, "XDG_CACHE_HOME", fallback)  # which names CUPY_CACHE_DIR too


def limit_bytes() -> float:
    """$GEMM_COURSE_CACHE_MB in bytes (0: no limit); a wrong value is refused in one line."""
    from gemm_course.run.cpu_backend import env_number

    return env_number(LIMIT_ENV, DEFAULT_LIMIT_MB, "512", zero_ok=True) * 2**20


def touch(path: Path) -> None:
    """Mark a cached file as used now (what pruning orders by); never an error."""
    try:
        os.utime(path)
    except OSError:
        pass


def _size(path: Path) -> int:
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        return path.stat().st_size
    except OSError:
        return 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _remove(path: Path) -> None:
    try:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    except OSError:
        pass


def prune(folder: Path, limit: Optional[float] = None, now: Optional[float] = None, force: bool = False) -> list[Path]:
    """Remove from `folder` the least recently used entries beyond `limit` bytes (default limit_bytes()), every
    precompiled header folder in pch/ and runtime object in runtime/ but the KEEP_BUILT newest of each, and
    temporary folders of killed processes.
    At most once per process and folder unless force; entries used in the last RECENT_S seconds stay. Returns
    what was removed."""
    folder = Path(folder)
    if (folder in _pruned and not force) or not folder.is_dir():
        return []
    _pruned.add(folder)
    limit = limit_bytes() if limit is None else limit
    now = time.time() if now is None else now
    removed = []
    for tmp in folder.glob("tmp*"):  # tempfile.TemporaryDirectory of a process that did not finish
        if tmp.is_dir() and now - _mtime(tmp) > STALE_TMP_S:
            _remove(tmp)
            removed.append(tmp)
    for kept in BUILT_ONCE:  # precompiled headers and runtime objects: the newest few of each
        built = sorted((p for p in (folder / kept).glob("*") if not p.name.startswith("tmp")), key=_mtime,
                       reverse=True)
        for old in built[KEEP_BUILT:]:
            if now - _mtime(old) > RECENT_S:
                _remove(old)
                removed.append(old)
    if not limit:
        return removed
    entries = [p for p in (*folder.iterdir(), *(q for kept in BUILT_ONCE for q in (folder / kept).glob("*")))
               if p.name not in BUILT_ONCE and p not in removed and not (p.is_dir() and p.name.startswith("tmp"))]
    sizes = {p: _size(p) for p in entries}
    total = sum(sizes.values())
    for path in sorted(entries, key=_mtime):  # least recently used first
        if total <= limit:
            break
        if now - _mtime(path) <= RECENT_S or path.name.endswith(".ld"):
            continue
        _remove(path)
        removed.append(path)
        total -= sizes[path]
    return removed
