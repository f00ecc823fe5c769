"""Run the SIMT levels' CUDA C kernels on the CPU: for CI (no GPU) and for readers without one.

The very same .cu file is compiled as C++ together with kernels/cuda_cpu_compat.h (which maps
blockIdx, threadIdx, __shared__, __syncthreads(), float4, <cuda_pipeline.h>, ... onto a small
fiber runtime) by the system C++ compiler into a shared library, cached on disk per (source
text, kernel name expression, compiler and flags), loaded with ctypes and launched on NumPy
arrays. gemm(A, B, level, backend="cpu") goes through here, as does gemm() without a GPU.

How a launch runs (details in the header): blocks one after another; inside a block each CUDA
thread is a fiber, and the threads run one at a time in order of linear thread index, each until
its next __syncthreads() or its end. So a missing barrier reads stale (or NaN-poisoned) shared
memory every time, a barrier that not all threads reach is reported at once instead of hanging,
and the arrays live in guarded buffers, so an index past an edge is reported too. cp.async copies
land only at the issuing thread's wait. The instrumented (race-check) build, the default, reports
shared-memory races (naming the element, e.g. As[3][17]), any access to a word whose cp.async was not
yet waited for (KernelAsyncCopyError), and any global load or store outside the arrays before it
happens (KernelMemoryError with the array and element); a fault names its source line.

Meant for small shapes: one CPU core emulates the whole grid, thread by thread.
"""
from __future__ import annotations

import contextvars
import ctypes
import functools
import hashlib
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from gemm_course.levels import KERNEL_DIR, Launch, Level
from gemm_course.run import disk_cache

COMPILERS: tuple[str, ...] = ("g++", "c++", "clang++")
"""Tried in order when the environment variable CXX is not set."""

BASE_FLAGS: tuple[str, ...] = (
    "-std=c++17", "-O2", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
    "-g", "-gdwarf-4",        # line tables: a trap or a fault names its source line (no effect on the code);
                              # DWARF 4: addr2line (binutils 2.40) misreads DWARF 5 file numbers once a
                              # library holds two compilation units (the kernel's and the runtime's)
    "-fno-strict-aliasing",   # kernels reinterpret float* as float4*
    "-fdata-sections",        # one section per static, so the linker script can find __shared__ ones
    "-Wno-unknown-pragmas",   # #pragma unroll
)

# Tried once per compiler, each kept when it accepts it:
#   -fno-gnu-unique: template statics (our __shared__ arrays) stay private to their library.
#   -ftrivial-auto-var-init=pattern: uninitialised locals (a forgotten `acc = 0`) hold garbage.
#   -fsanitize=alignment, trapping: a misaligned access (a float4 load from an address that is not
#     a multiple of 16) stops the kernel, as it does on a GPU, instead of quietly working.
#   -fno-crossjumping (GCC): keeps those traps apart, so that the faulting one names its own line
#     (merged, they all carry the line of one of them).
OPTIONAL_FLAGS: tuple[tuple[str, ...], ...] = (
    ("-fno-gnu-unique",), ("-ftrivial-auto-var-init=pattern",),
    ("-fsanitize=alignment", "-fsanitize-undefined-trap-on-error"), ("-fno-crossjumping",),
)

# GNU ld / lld on Linux: gather function-local statics (the __shared__ variables) into one section
# that the runtime fills with NaN at the start of every block.
LINKER_SCRIPT = """\
SECTIONS
{
  gc_shared (NOLOAD) : ALIGN(128) { gc_shared_begin = .; *(.bss._ZZ*) gc_shared_end = .; }
}
INSERT AFTER .bss;
"""

# CUDA headers that kernels may include; each becomes a stub that includes the compat header.
CUDA_HEADERS: tuple[str, ...] = (
    "cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda_runtime.h", "device_launch_parameters.h",
    "cuda.h", "vector_types.h",
)

# The race detector (on by default): the kernel is compiled with -fsanitize=thread, whose calls before
# every load and store go to hooks in the compat header (ThreadSanitizer's own runtime is never linked),
# and with debug lines, so that a race names the source lines of both accesses.
RACE_FLAGS: tuple[str, ...] = ("-fsanitize=thread", "-g", "-gdwarf-4", "-DGC_CPU_RACE_CHECK")

# The most multiply-adds (batch·M·N·K) one CPU launch may do: about 512³, a few seconds thread by thread.
MAX_WORK_ENV = "GEMM_COURSE_CPU_MAX_WORK"
DEFAULT_MAX_WORK = 1 << 27

TIMEOUT_ENV = "GEMM_COURSE_CPU_TIMEOUT"
DEFAULT_TIMEOUT_S = 10.0
CACHE_ENV = "GEMM_COURSE_CPU_CACHE"


# --- errors --------------------------------------------------------------------------------------
#
# Every message a learner can meet here is one line "English / 中文", as elsewhere in the course. The
# errors a broken kernel raises keep the numbers they are made of as attributes (block, threads, lines,
# ...), and each language is written from them; en and zh hold the two halves for a caller that shows
# one language (the grader's English and Chinese verdicts).

def bilingual(en: str, zh: str) -> str:
    """The course's one-line form of a user-facing message: "English / 中文"."""
    return f"{en} / {zh}"


def _xyz(t: Sequence[int]) -> str:
    """(x,y,z), as CUDA's indices are written in every message."""
    return f"({t[0]},{t[1]},{t[2]})"


class CpuBackendError(RuntimeError):
    """Anything the CPU backend reports: compile problems, broken kernels, unsupported levels.

    str(err) is "English / 中文" on one line; err.en and err.zh are the two halves."""

    def __init__(self, en: str, zh: str = ""):
        self.en, self.zh = en, zh or en
        super().__init__(bilingual(en, zh) if zh else en)


class CompilerNotFoundError(CpuBackendError):
    """No C++ compiler on PATH (see COMPILERS and the CXX environment variable)."""


class CpuCompileError(CpuBackendError):
    """The C++ compiler rejected the kernel source. The first line says so in both languages; log (the
    compiler's output, and a hint when the cause is recognised) follows on the next lines."""

    def __init__(self, en: str, zh: str = "", log: str = ""):
        super().__init__(en, zh)
        self.log = log
        if log:
            self.args = (f"{self.args[0]}:\n{log}",)


class KernelBarrierError(CpuBackendError):
    """A __syncthreads() that not all threads of a block reach (or not the same one).

    Attributes: block; threads and lines (kind "partial": the first thread waiting and the first that
    had returned, and the barrier's line; kind "divergent": two threads at different barriers and
    their lines); waiting and total (threads at the barrier, threads in the block)."""

    def __init__(self, en: str, zh: str = "", kind: str = "", block: tuple = (), threads: tuple = (),
                 lines: tuple = (), waiting: int = 0, total: int = 0):
        super().__init__(en, zh)
        self.kind, self.block, self.threads, self.lines = kind, block, threads, lines
        self.waiting, self.total = waiting, total


class KernelTimeoutError(CpuBackendError):
    """A thread ran for timeout_s without reaching a barrier or returning. Attributes: block, thread, seconds."""

    def __init__(self, en: str, zh: str = "", block: tuple = (), thread: tuple = (), seconds: float = 0.0):
        super().__init__(en, zh)
        self.block, self.thread, self.seconds = block, thread, seconds


class KernelCrashError(CpuBackendError):
    """The kernel stopped with a signal: integer division by zero, __trap(), a crash.

    Attributes (where known): block, thread, signal_name (e.g. "SIGSEGV"; "" when no signal was
    involved), address (the faulting one), line ("file.cu:52" of the faulting instruction or access,
    the kernel's own file preferred over the headers; "" when unknown)."""

    def __init__(self, en: str, zh: str = "", block: tuple = (), thread: tuple = (), signal_name: str = "",
                 address: int = 0, line: str = ""):
        super().__init__(en, zh)
        self.block, self.thread, self.signal_name, self.address = block, thread, signal_name, address
        self.line = line


class KernelMemoryError(KernelCrashError):
    """Out-of-bounds access, misaligned access, stack overflow.

    For an out-of-bounds access also: array (the argument's name, e.g. "A": the array the access
    overran, or the nearest one), index (its element: (row, col) for a 2-D array, (i,) otherwise; a
    row past the last or a negative index says which way), write (True: a store, False: a load, None:
    unknown, e.g. a fault)."""

    def __init__(self, en: str, zh: str = "", block: tuple = (), thread: tuple = (), signal_name: str = "",
                 address: int = 0, line: str = "", array: str = "", index: tuple = (), write: Optional[bool] = None):
        super().__init__(en, zh, block, thread, signal_name, address, line)
        self.array, self.index, self.write = array, index, write


class KernelAsyncCopyError(CpuBackendError):
    """(race-check builds) A thread read or wrote a shared-memory word that an asynchronous copy
    (cp.async: copy_async, __pipeline_memcpy_async) writes, before the issuing thread waited for it.

    Attributes: block; thread (who accessed the word) and issuer (who issued the copy), (x, y, z)
    each; lines ("file:line" of the access, of the copy); action ("read" or "wrote"); element (the
    shared word, e.g. "As[0][3]", or "byte N of dynamic shared memory"); shared_offset (its byte
    offset in shared memory); issuer_returned (the issuer had returned from the kernel without
    waiting for its copy)."""

    def __init__(self, en: str, zh: str = "", block: tuple = (), thread: tuple = (), issuer: tuple = (),
                 lines: tuple = (), action: str = "", element: str = "", shared_offset: int = 0,
                 issuer_returned: bool = False):
        super().__init__(en, zh)
        self.block, self.thread, self.issuer, self.lines = block, thread, issuer, lines
        self.action, self.element, self.shared_offset = action, element, shared_offset
        self.issuer_returned = issuer_returned


class KernelRaceError(CpuBackendError):
    """Two threads of a block touched one shared-memory word between two barriers, one of them writing.

    Attributes: block, threads (earlier, later: (x, y, z) each), lines (earlier, later: "file:line"),
    actions (earlier, later: "wrote" or "read"), shared_offset (the word's byte offset), element (the
    word by name: "As[3][17]", "s[1].Bs[0][5]", or "byte N of dynamic shared memory"),
    crosses_iterations ((earlier, later): True for an access that belongs to the next iteration of
    the loop around the barrier its thread passed last, e.g. the next k-tile's write reaching a tile
    that another thread still reads; any() of it: the race crosses loop iterations), barrier_line
    ("file:line" of that barrier for the access that crosses, else "")."""

    def __init__(self, en: str, zh: str = "", block: tuple = (), threads: tuple = (), lines: tuple = (),
                 actions: tuple = (), shared_offset: int = 0, element: str = "",
                 crosses_iterations: tuple = (False, False), barrier_line: str = ""):
        super().__init__(en, zh)
        self.block, self.threads, self.lines, self.actions = block, threads, lines, actions
        self.shared_offset, self.element = shared_offset, element
        self.crosses_iterations, self.barrier_line = crosses_iterations, barrier_line


class KernelWildAccessError(KernelMemoryError):
    """(race-check builds) The kernel touched memory that is none of its arrays, its shared memory, its own
    stack, the built-in variables or its constants: a pointer computed from nothing the kernel was given,
    or a `__device__` variable. Attributes as KernelMemoryError (address: the one touched)."""


class KernelBlockConflictError(CpuBackendError):
    """(race-check builds) Two blocks touched one element of a writable array, one of them writing: on a
    GPU the result depends on the order blocks run in. Attributes: block (the later one), other_block,
    thread (of the later access), line, array, index (the element), kind ("write-write",
    "read-after-write", "write-after-read"), atomics (the earlier side were atomic updates)."""

    def __init__(self, en: str, zh: str = "", block: tuple = (), other_block: tuple = (), thread: tuple = (),
                 line: str = "", array: str = "", index: tuple = (), kind: str = "", atomics: bool = False):
        super().__init__(en, zh)
        self.block, self.other_block, self.thread, self.line = block, other_block, thread, line
        self.array, self.index, self.kind, self.atomics = array, index, kind, atomics


class KernelInputWriteError(KernelMemoryError):
    """(race-check builds) A store into an array the kernel takes as a const pointer (an input)."""


class UnsupportedLevelError(CpuBackendError, NotImplementedError):
    """The level needs hardware the CPU backend does not emulate (Tensor Cores)."""


# --- the compiler --------------------------------------------------------------------------------

def find_compiler() -> list[str]:
    """The C++ compiler command: $CXX if set (may carry arguments), else the first of COMPILERS on PATH."""
    env = os.environ.get("CXX", "").strip()
    if env:
        cmd = shlex.split(env)
        if shutil.which(cmd[0]):
            return cmd
        raise CompilerNotFoundError(
            f"the CPU backend needs a C++ compiler: CXX={env!r} is set, but {cmd[0]!r} was not found "
            "on PATH. Point CXX at an installed compiler (e.g. CXX=g++), or unset it to use "
            f"{', '.join(COMPILERS)}.",
            f"CPU 后端需要 C++ 编译器：环境变量 CXX={env!r} 已设置，但在 PATH 中找不到 {cmd[0]!r}。请让 CXX "
            f"指向一个已安装的编译器（例如 CXX=g++），或者取消设置 CXX，改用 {'、'.join(COMPILERS)}。")
    for name in COMPILERS:
        if shutil.which(name):
            return [name]
    raise CompilerNotFoundError(
        "the CPU backend needs a C++ compiler and none was found: looked for "
        f"{', '.join(COMPILERS)} on PATH, and the environment variable CXX is not set. Install one "
        "(Debian/Ubuntu: apt install g++; macOS: xcode-select --install; conda: conda install "
        "gxx_linux-64) or set CXX to its path.",
        f"CPU 后端需要 C++ 编译器，但没有找到：在 PATH 中查找了 {'、'.join(COMPILERS)}，环境变量 CXX 也没有设置。"
        "请安装一个（Debian/Ubuntu：apt install g++；macOS：xcode-select --install；conda：conda install "
        "gxx_linux-64），或者把 CXX 设为它的路径。")


@functools.lru_cache(maxsize=None)
def _compiler_identity(cmd: tuple[str, ...]) -> str:
    """Path and first --version line: part of the cache key, so a new compiler rebuilds."""
    try:
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return f"{shutil.which(cmd[0])} {' '.join(cmd[1:])} {out.splitlines()[0] if out else '?'}"


def cache_dir() -> Path:
    """Where compiled kernels live: $GEMM_COURSE_CPU_CACHE, else $XDG_CACHE_HOME/gemm_course/cpu (~/.cache/...);
    a temporary folder, with a one-line notice, where that cannot be written (see run.disk_cache)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return disk_cache.writable_folder(Path(env), CACHE_ENV, "cpu")
    return disk_cache.writable_folder(disk_cache.cache_home() / "gemm_course" / "cpu", "XDG_CACHE_HOME", "cpu")


def _run_compiler(cmd: list[str]) -> subprocess.CompletedProcess:
    """Run one compiler command (a separate function so tests can count compilations)."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@functools.lru_cache(maxsize=None)
def _flags(cmd: tuple[str, ...], cache: Path) -> tuple[str, ...]:
    """BASE_FLAGS plus the optional flags and the shared-memory linker script this compiler accepts."""
    flags = list(BASE_FLAGS)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        probe = Path(tmp) / "probe.cpp"
        probe.write_text(
            "#include <cstring>\n"
            "extern \"C\" char gc_shared_begin[] __attribute__((visibility(\"hidden\")));\n"
            "extern \"C\" char gc_shared_end[] __attribute__((visibility(\"hidden\")));\n"
            "template <int N> float* k() { static float s[N]; return s; }\n"
            "extern \"C\" long f() { std::memset(gc_shared_begin, 0, gc_shared_end - gc_shared_begin);"
            " return (long)(k<4>() - (float*)0); }\n")
        out = str(Path(tmp) / "probe.so")

        def accepts(extra: list[str]) -> bool:
            result = _run_compiler([*cmd, *flags, *extra, str(probe), "-o", out])
            return result.returncode == 0 and not result.stderr.strip()

        if sys.platform.startswith("linux"):
            script = cache / "gc_shared.ld"
            if not script.exists() or script.read_text() != LINKER_SCRIPT:
                (Path(tmp) / "gc_shared.ld").write_text(LINKER_SCRIPT)
                os.replace(Path(tmp) / "gc_shared.ld", script)  # atomic for concurrent processes
            extra = [f"-Wl,-T,{script}", "-DGC_CPU_POISON_SHARED"]
            if accepts(extra):
                flags += extra
        probe.write_text("int f() { return 0; }\n")
        for extra in OPTIONAL_FLAGS:
            if accepts(list(extra)):
                flags += extra
    return tuple(flags)


# --- building a kernel ---------------------------------------------------------------------------

_EXTERN_SHARED = re.compile(
    r"\bextern\s+__shared__\s+((?:(?:__align__|alignas)\s*\(\s*\w+\s*\)\s*)*)"
    r"([A-Za-z_][\w:<>, ]*?)\s*\b(\w+)\s*\[\s*\]\s*;")


def _rewrite_dynamic_shared(source: str) -> str:
    """`extern __shared__ float smem[];` -> a pointer to the launch's dynamic shared memory.

    The one textual change made to a kernel source (C++ has no unsized `static` array); the
    line count stays the same, so compiler messages point at the right lines.
    """
    def replace(m: re.Match) -> str:
        return f"GC_CPU_DYNAMIC_SHARED({m.group(2).strip()}, {m.group(3)});" + "\n" * m.group(0).count("\n")

    return _EXTERN_SHARED.sub(replace, source)


def translation_unit(source: str, kernel: str, source_name: str = "kernel.cu") -> str:
    """The C++ file compiled for one kernel: compat header, the source, the C entry points."""
    return (f'#include "cuda_cpu_compat.h"\n#line 1 "{source_name}"\n{_rewrite_dynamic_shared(source)}\n'
            f'#line 1 "gemm_course_cpu_entry"\nGC_CPU_ENTRY({kernel})\n')


def _kernel_dir_headers() -> str:
    """Every header under kernels/ (the compat header, shared .cuh files) for the cache key."""
    parts = []
    for path in sorted(KERNEL_DIR.glob("*")):
        if path.suffix in (".h", ".cuh", ".hpp"):
            parts.append(f"{path.name}\n{path.read_text(encoding='utf-8')}")
    return "\n".join(parts)


# Where compiled kernels are loaded and run. None: in this process. The grader sets a loader that runs
# them in a child process instead (gemm_course.exercises.native): a learner's kernel is native code and
# never runs in the process that judges it. The loader is called as loader(path, kernel, source_name,
# race_check) and returns an object with CpuKernel's launch() and parameters.
kernel_loader: contextvars.ContextVar[Optional[Any]] = contextvars.ContextVar("kernel_loader", default=None)

_lock = threading.RLock()         # compiling and loading
_launch_lock = threading.Lock()   # one launch at a time in this process (signal handlers, stacks)
_stacks: dict[int, int] = {}      # fiber stack pools by slot size, see gc_stack_pool() in the header
_loaded: dict[str, "CpuKernel"] = {}


def compile_kernel(source: str, kernel: str, source_name: str = "kernel.cu", race_check: bool = True) -> "CpuKernel":
    """The kernel `kernel` (a C++ name expression, e.g. "gemm_naive_cols<32, 8>") of `source`,
    compiled for the CPU and loaded. Cached in this process and on disk (cache_dir()) per
    (source text, kernel, compiler, flags, headers under kernels/). race_check: build with the
    shared-memory race detector (a launch then raises KernelRaceError for a race)."""
    if sys.platform == "win32":
        raise CpuBackendError("the CPU backend needs Linux or macOS (it uses ucontext and POSIX signals); "
                              "on Windows, run the course in WSL, or on a GPU",
                              "CPU 后端需要 Linux 或 macOS（它用到 ucontext 和 POSIX 信号）；在 Windows 上请在 WSL "
                              "中运行本课程，或者使用 GPU")
    cmd = tuple(find_compiler())
    cache = cache_dir()
    flags = _flags(cmd, cache)
    if race_check:
        flags = (*flags, *RACE_FLAGS)
    flags = (*flags, KERNEL_ONLY_FLAG)
    tu = translation_unit(source, kernel, source_name)
    key = hashlib.sha256("\0".join(
        [_compiler_identity(cmd), " ".join(flags), LINKER_SCRIPT, _kernel_dir_headers(), tu]).encode()).hexdigest()[:32]
    loader = kernel_loader.get()
    with _lock:
        if key in _loaded and loader is None:
            return _loaded[key]
        path = cache / f"{key}.so"
        if not path.exists():
            _build(cmd, flags, tu, kernel, path)
            disk_cache.prune(cache)  # every graded edit adds a library: least recently used go beyond the cap
        else:
            disk_cache.touch(path)  # used now: pruning keeps it
        if loader is not None:
            return loader(path, kernel, source_name, race_check)
        compiled = CpuKernel(path, kernel, source_name, race_check)
        _loaded[key] = compiled
        return compiled


COMPAT_HEADER = "cuda_cpu_compat.h"

# A kernel's translation unit sees the runtime's declarations only (the header's GC_CPU_KERNEL_ONLY); the
# runtime itself is compiled once per compiler and flags (_runtime_object) and linked into every kernel's
# library. Generating its code was most of every kernel's compile (GCC 12: the header alone took 0.43 s of CPU
# without the race detector, 0.83 s with it); a race-checked Level 5 kernel now compiles in 0.47 s, not 1.50 s.
KERNEL_ONLY_FLAG = "-DGC_CPU_KERNEL_ONLY"


def _object_flags(flags: tuple[str, ...]) -> list[str]:
    """The compile-only part of a kernel's flags (no linking options)."""
    return [f for f in flags if not f.startswith("-Wl,") and f != "-shared"]


def _runtime_object(cmd: tuple[str, ...], flags: tuple[str, ...], cache: Path) -> Path:
    """The CPU runtime (the compat header without GC_CPU_KERNEL_ONLY) compiled for one compiler and set of
    kernel flags, in the cache: built once (again only if pruning removed it), then linked into each kernel's
    library. Written atomically, so concurrent processes see the whole object or none."""
    header = (KERNEL_DIR / COMPAT_HEADER).read_text(encoding="utf-8")
    runtime_flags = [f for f in _object_flags(flags) if f != KERNEL_ONLY_FLAG]
    key = hashlib.sha256("\0".join([_compiler_identity(cmd), " ".join(runtime_flags), header]).encode()).hexdigest()[:32]
    folder = cache / "runtime"
    path = folder / f"{key}.o"
    if path.exists():
        disk_cache.touch(path)  # used now: pruning keeps it
    else:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            source = Path(tmp) / "runtime.cpp"
            source.write_text(f'#include "{COMPAT_HEADER}"\n', encoding="utf-8")
            obj = Path(tmp) / "runtime.o"
            result = _run_compiler([*cmd, *runtime_flags, f"-I{KERNEL_DIR}", "-c", str(source), "-o", str(obj)])
            if result.returncode != 0:
                raise CpuCompileError(f"compiling the CPU backend's runtime failed ({' '.join(cmd)})",
                                      f"编译 CPU 后端的运行时失败（{' '.join(cmd)}）",
                                      log=(result.stderr + result.stdout).strip())
            os.replace(obj, path)
    return path


@functools.lru_cache(maxsize=None)
def _precompiled_header(cmd: tuple[str, ...], flags: tuple[str, ...], cache: Path) -> tuple[str, ...]:
    """Include flags that let GCC read the compat header precompiled (parsing it and the system headers it
    includes; about 10% of a race-checked kernel's compile CPU time, measured: code generation is the rest). Built once per compiler, flags and header text, in the
    cache; the folder holds the header and its .gch side by side, so GCC takes the .gch when it matches the
    flags and the identical header text when it does not. () for compilers without GCC's .gch files (clang),
    or if building it fails: the kernels then compile from the header as before."""
    if "clang" in _compiler_identity(cmd).lower():
        return ()
    header = (KERNEL_DIR / COMPAT_HEADER).read_text(encoding="utf-8")
    key = hashlib.sha256("\0".join([_compiler_identity(cmd), " ".join(flags), header]).encode()).hexdigest()[:32]
    folder = cache / "pch" / key
    disk_cache.touch(folder)  # pruning keeps the newest precompiled headers
    if not (folder / f"{COMPAT_HEADER}.gch").exists():
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            source = Path(tmp) / COMPAT_HEADER
            source.write_text(header, encoding="utf-8")
            compile_flags = _object_flags(flags)
            result = _run_compiler([*cmd, *compile_flags, f"-I{KERNEL_DIR}",
                                    "-x", "c++-header", str(source), "-o", str(Path(tmp) / f"{COMPAT_HEADER}.gch")])
            if result.returncode != 0:
                return ()
            os.replace(source, folder / COMPAT_HEADER)  # atomic: concurrent builds see both files or the old ones
            os.replace(Path(tmp) / f"{COMPAT_HEADER}.gch", folder / f"{COMPAT_HEADER}.gch")
    return (f"-I{folder}",)


def _build(cmd: tuple[str, ...], flags: tuple[str, ...], tu: str, kernel: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        include = Path(tmp) / "include"
        include.mkdir()
        for header in CUDA_HEADERS:  # kernels may #include them; the compat header provides all
            (include / header).write_text('#include "cuda_cpu_compat.h"\n')
        cpp = Path(tmp) / "kernel.cpp"
        cpp.write_text(tu, encoding="utf-8")
        out = Path(tmp) / "kernel.so"
        headers = [*_precompiled_header(cmd, flags, path.parent), f"-I{include}", f"-I{KERNEL_DIR}"]
        runtime = _runtime_object(cmd, flags, path.parent)
        # Two steps: compile the kernel (instrumented, in a race-check build), then link it with the runtime's
        # object, without -fsanitize=thread, which would pull in ThreadSanitizer's runtime: the compat header
        # defines the hooks the instrumentation calls.
        obj = Path(tmp) / "kernel.o"
        result = _run_compiler([*cmd, *_object_flags(flags), "-c", *headers, str(cpp), "-o", str(obj)])
        if result.returncode == 0:
            link = [f for f in flags if f not in RACE_FLAGS and f != KERNEL_ONLY_FLAG]
            # The runtime's object first: where both objects hold a copy of the same inline function or variable,
            # the linker keeps the first, so the runtime always runs its own.
            result = _run_compiler([*cmd, *link, str(runtime), str(obj), "-o", str(out)])
        if result.returncode != 0:
            log = (result.stderr + result.stdout).replace(str(cpp), "kernel.cpp")
            hint = ""
            if re.search(r"\basm\b|no such instruction|unknown mnemonic|invalid instruction", log):
                hint = "\n" + bilingual(
                    "The kernel seems to contain inline PTX (asm). The CPU backend compiles PTX-free code "
                    "only: put the asm under `#ifndef GEMM_COURSE_CPU` with a plain C++ alternative.",
                    "内核里似乎有内联 PTX（asm）。CPU 后端只能编译不含 PTX 的代码：请把 asm 放进 "
                    "`#ifndef GEMM_COURSE_CPU` 分支，并提供一个普通 C++ 的替代实现。")
            raise CpuCompileError(f"compiling {kernel} for the CPU backend failed ({' '.join(cmd)})",
                                  f"为 CPU 后端编译 {kernel} 失败（{' '.join(cmd)}）", log=f"{log.strip()}{hint}")
        os.replace(out, path)  # atomic: a concurrent process sees the whole library or none


# --- launching -----------------------------------------------------------------------------------

class _ArrayInfo(ctypes.Structure):
    _fields_ = [("address", ctypes.c_ulonglong), ("bytes", ctypes.c_ulonglong), ("guard", ctypes.c_ulonglong),
                ("itemsize", ctypes.c_int), ("writable", ctypes.c_int)]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_int * 3), ("block", ctypes.c_int * 3),
                ("dynamic_shared_bytes", ctypes.c_longlong), ("timeout_s", ctypes.c_double),
                ("stacks", ctypes.c_void_p), ("profile", ctypes.c_void_p), ("profile_capacity", ctypes.c_longlong),
                ("arrays", ctypes.c_void_p), ("array_count", ctypes.c_int), ("profile_block_count", ctypes.c_int),
                ("profile_blocks", ctypes.c_void_p), ("profile_intervals", ctypes.c_void_p),
                ("block_order_seed", ctypes.c_ulonglong)]


# One memory access of a profiled block (AccessRecord in the header). flags: 1 write, 2 shared memory
# (address is then the byte offset in shared memory), 4 a cp.async (its source read or target write, at the issue).
ACCESS_RECORD = np.dtype({"names": ["interval", "block", "thread", "size", "flags", "pc", "address"],
                          "formats": [np.uint32, np.uint32, np.uint16, np.uint8, np.uint8, np.uint64, np.uint64],
                          "offsets": [0, 4, 8, 10, 11, 16, 24], "itemsize": 32})
PROFILE_CAPACITY = 1 << 21  # accesses kept (a few blocks of a small problem need far fewer)


class _ErrorInfo(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("signal", ctypes.c_int), ("address", ctypes.c_ulonglong),
                ("block", ctypes.c_int * 3), ("thread", ctypes.c_int * 3), ("line", ctypes.c_int),
                ("message", ctypes.c_char * 1024), ("other_thread", ctypes.c_int * 3),
                ("code_offset", ctypes.c_ulonglong * 2), ("shared_offset", ctypes.c_ulonglong),
                ("race_kind", ctypes.c_int), ("other_line", ctypes.c_int), ("count", ctypes.c_longlong),
                ("array", ctypes.c_int), ("write", ctypes.c_int), ("byte_offset", ctypes.c_longlong),
                ("access_size", ctypes.c_int), ("entry_line", ctypes.c_int * 2),
                ("entry_offset", ctypes.c_ulonglong * 2)]


(_OK, _BARRIER_PARTIAL, _BARRIER_DIVERGENT, _TIMEOUT, _FAULT, _STACK_OVERFLOW, _BAD_CONFIG, _RACE, _INTERRUPTED,
 _OUT_OF_BOUNDS, _ASYNC_COPY, _WILD_ACCESS, _BLOCK_CONFLICT, _INPUT_WRITE) = range(14)
_RACE_KINDS = ("wrote", "read", "wrote")  # what the later access did (write-write, read-after-write, write-after-read)
_EARLIER_KINDS = ("wrote", "wrote", "read")
_ACTIONS_ZH = {"wrote": "写入", "read": "读取"}

_SCALARS: dict[str, tuple[Any, str]] = {  # C++ parameter type -> (ctypes type, numpy dtype)
    "float": (ctypes.c_float, "float32"), "double": (ctypes.c_double, "float64"),
    "int": (ctypes.c_int32, "int32"), "unsigned int": (ctypes.c_uint32, "uint32"),
    "long long": (ctypes.c_int64, "int64"), "unsigned long long": (ctypes.c_uint64, "uint64"),
    "short": (ctypes.c_int16, "int16"), "char": (ctypes.c_int8, "int8"),
    "unsigned char": (ctypes.c_uint8, "uint8"), "bool": (ctypes.c_bool, "bool"),
}


def env_number(name: str, default: float, example: str, zero_ok: bool) -> float:
    """A number from the environment variable `name` (default when unset or empty), written as 600, 1e9 or
    2.5: anything else, or a negative number (or 0 where zero_ok is False), is refused in one line that
    says what to set."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        least = "0 or more" if zero_ok else "above 0"
        shown = f"{int(default):,}" if float(default).is_integer() else f"{default:g}"
        least_zh = "不小于 0 的数" if zero_ok else "大于 0 的数"
        raise ValueError(bilingual(
            f"the environment variable {name}={text!r} is not a number {least}: set it like {name}={example}, "
            f"or unset it for the default ({shown})",
            f"环境变量 {name}={text!r} 无效，应是{least_zh}：请写成 {name}={example}，或取消设置以使用默认值（{shown}）"))
    return value


def default_timeout() -> float:
    """Seconds a thread may run without reaching a barrier: $GEMM_COURSE_CPU_TIMEOUT (0: no limit), else 10."""
    return env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, "60", zero_ok=True)


# Fills the tail of each guarded buffer: a signalling NaN as float32. Reading it poisons the
# result (arithmetic turns it into a different, quiet NaN), and a kernel that stores anything
# there, even a NaN computed from it, changes the bytes.
_TAIL_PATTERN = bytes.fromhex("a5a5a57f")
NULL_PAGE_BYTES = 1 << 16  # an access this close to address 0 went through a null pointer


class _Guarded:
    """A copy of one array argument between guard pages; the tail of its last page holds _TAIL_PATTERN."""

    def __init__(self, lib: ctypes.CDLL, array: np.ndarray, name: str, writable: bool):
        self.lib, self.array, self.name, self.writable = lib, array, name, writable
        self.nbytes = array.nbytes
        page = lib.gc_page_size()
        self.capacity = max(1, -(-self.nbytes // page)) * page
        self.page = page
        self.guard = lib.gc_array_guard_bytes()  # unmapped before and after the data
        self.address = lib.gc_guarded_alloc(max(self.nbytes, 1))
        if not self.address:
            raise MemoryError(bilingual(f"could not map {self.capacity} bytes for {name}",
                                        f"无法为 {name} 映射 {self.capacity} 字节内存"))
        ctypes.memmove(self.address, array.ctypes.data, self.nbytes)
        self.tail = self._expected_tail()
        ctypes.memmove(self.address + self.nbytes, self.tail, len(self.tail))

    def _expected_tail(self) -> bytes:
        pattern = _TAIL_PATTERN * (self.capacity // len(_TAIL_PATTERN))  # aligned to the buffer start
        return pattern[self.nbytes:self.capacity]

    def free(self) -> None:
        self.lib.gc_guarded_free(self.address, max(self.nbytes, 1))

    def copy_back(self) -> None:
        ctypes.memmove(self.array.ctypes.data, self.address, self.nbytes)

    def first_tail_write(self) -> Optional[int]:
        """Byte offset (from the start) of the first byte past the end that the kernel changed."""
        tail = ctypes.string_at(self.address + self.nbytes, len(self.tail))
        if tail == self.tail:
            return None
        return self.nbytes + next(i for i, (a, b) in enumerate(zip(tail, self.tail)) if a != b)

    def contains(self, address: int) -> bool:
        return self.address - self.guard <= address < self.address + self.capacity + self.guard

    def index(self, byte_offset: int) -> tuple[int, ...]:
        """The element at byte_offset from the start: (row, col) for a 2-D array, (i,) otherwise."""
        element = byte_offset // self.array.itemsize
        if self.array.ndim == 2 and self.array.shape[1] > 0:
            return divmod(element, self.array.shape[1])
        return (element,)

    def describe(self, byte_offset: int, lang: str = "en") -> str:
        """e.g. "C[7, 0] (element 91, past its last element; C is 7×13)"; lang="zh": the same in Chinese."""
        a = self.array
        item = a.itemsize
        element = byte_offset // item
        before = element < 0
        if a.ndim == 2 and a.shape[1] > 0:
            r, c = divmod(element, a.shape[1])
            if lang == "zh":
                return (f"{self.name}[{r}, {c}]（元素 {element}，{'在第一个元素之前' if before else '在最后一个元素之后'}；"
                        f"{self.name} 的形状是 {a.shape[0]}×{a.shape[1]}）")
            return (f"{self.name}[{r}, {c}] (element {element}, "
                    f"{'before its first element' if before else 'past its last element'}; {self.name} is "
                    f"{a.shape[0]}×{a.shape[1]})")
        if lang == "zh":
            return (f"{self.name}[{element}]（{'在第一个元素之前' if before else '在最后一个元素之后'}；"
                    f"{self.name} 共有 {a.size} 个元素）")
        return (f"{self.name}[{element}] ({'before its first element' if before else 'past its last element'}; "
                f"{self.name} has {a.size} elements)")


class CpuKernel:
    """One compiled kernel instantiation, ready to launch on NumPy arrays."""

    def __init__(self, path: Path, kernel: str, source_name: str = "kernel.cu", race_check: bool = False):
        self.path = path
        self.kernel = kernel
        self.source_name = source_name
        self.race_check = race_check
        self._lib = lib = ctypes.CDLL(str(path))
        lib.gc_signature.restype = ctypes.c_char_p
        lib.gc_launch.restype = ctypes.c_int
        lib.gc_launch.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.POINTER(_ErrorInfo)]
        lib.gc_guarded_alloc.restype = ctypes.c_void_p
        lib.gc_guarded_alloc.argtypes = [ctypes.c_size_t]
        lib.gc_guarded_free.restype = None
        lib.gc_guarded_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.gc_page_size.restype = ctypes.c_size_t
        lib.gc_array_guard_bytes.restype = ctypes.c_size_t
        lib.gc_stack_pool.restype = ctypes.c_void_p
        lib.gc_stack_slot.restype = ctypes.c_size_t
        lib.gc_profile_count.restype = ctypes.c_longlong
        lib.gc_request_stop.restype = None
        lib.gc_code_offset.restype = ctypes.c_ulonglong
        lib.gc_code_offset.argtypes = [ctypes.c_ulonglong]
        self.parameters: tuple[str, ...] = tuple(lib.gc_signature().decode().split(","))
        """The kernel's C++ parameter types, e.g. ("const float*", "const float*", "float*", "int", ...)."""

    def __repr__(self) -> str:
        return f"CpuKernel({self.kernel}({', '.join(self.parameters)}))"

    def launch(self, launch: Launch, args: Sequence[Any], *, names: Optional[Sequence[str]] = None,
               timeout_s: Optional[float] = None, profile: bool = False,
               profile_blocks: Optional[Sequence[tuple[int, int, int]]] = None,
               block_order_seed: int = 0) -> Optional["AccessLog"]:
        """Run the grid. args follow the kernel's parameters: NumPy arrays for pointers (copied
        into guarded buffers; arrays behind non-const pointers are copied back; None for a null
        pointer), Python or NumPy numbers for scalars. names label the arguments in error
        messages (default A, B, C, ...). timeout_s: how long one thread may run without reaching
        a barrier (default: default_timeout(); 0: no limit). Raises KernelBarrierError,
        KernelTimeoutError, KernelCrashError, KernelMemoryError or KernelRaceError for a broken
        kernel (a race-check build also KernelAsyncCopyError, and reports an out-of-bounds load or
        store as KernelMemoryError before it happens). profile (a race-check build only): return the
        memory accesses of the blocks profile_blocks ((x, y, z) each; default: the first block only)
        as an AccessLog (see gemm_course.inspect.warp_access, which turns them into sectors and bank wavefronts).
        block_order_seed: 0 runs the blocks in CUDA's order; another number, in an order drawn from it (a GPU
        promises no order: a kernel whose result depends on it is wrong)."""
        if profile and not self.race_check:
            raise CpuBackendError("profile=True needs a kernel compiled with race_check=True (the instrumented build)",
                                  "profile=True 需要用 race_check=True 编译的内核（带插桩的版本）")
        if len(args) != len(self.parameters):
            raise TypeError(bilingual(f"{self.kernel} takes {len(self.parameters)} arguments "
                                      f"({', '.join(self.parameters)}); got {len(args)}",
                                      f"{self.kernel} 接受 {len(self.parameters)} 个参数（{', '.join(self.parameters)}），"
                                      f"实际传入了 {len(args)} 个"))
        names = list(names or [chr(ord("A") + i) if i < 26 else f"arg{i}" for i in range(len(args))])
        blocks = [tuple(int(v) for v in b) for b in (profile_blocks or [(0, 0, 0)])] if profile else []
        for b in blocks:
            if len(b) != 3 or not all(0 <= v < g for v, g in zip(b, launch.grid)):
                raise ValueError(bilingual(f"profile block {b} is not in the grid {_xyz(launch.grid)}",
                                           f"要记录的线程块 {b} 不在网格 {_xyz(launch.grid)} 之内"))
        guarded: list[_Guarded] = []
        values: list[Any] = []
        try:
            for i, (ctype, arg) in enumerate(zip(self.parameters, args)):
                if ctype.endswith("*") and arg is None:
                    values.append(ctypes.c_void_p(0))  # a null pointer
                elif ctype.endswith("*"):
                    guarded.append(self._guard(i, ctype, arg, names[i]))
                    values.append(ctypes.c_void_p(guarded[-1].address))
                else:
                    values.append(self._scalar(i, ctype, arg, names[i]))
            argv = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
            timeout = default_timeout() if timeout_s is None else timeout_s
            err = _ErrorInfo()
            records = np.empty(PROFILE_CAPACITY if profile else 0, dtype=ACCESS_RECORD)
            arrays = (_ArrayInfo * max(1, len(guarded)))(*[_ArrayInfo(g.address, g.nbytes, g.guard, g.array.itemsize,
                                                                      int(g.writable)) for g in guarded])
            block_list = np.array(blocks or [(0, 0, 0)], dtype=np.int32)
            intervals = np.zeros(len(block_list), dtype=np.int64)
            with _launch_lock:
                config = _LaunchConfig((ctypes.c_int * 3)(*launch.grid), (ctypes.c_int * 3)(*launch.block),
                                       launch.dynamic_shared_bytes, timeout, self._stack_pool(),
                                       records.ctypes.data if profile else None, len(records),
                                       ctypes.addressof(arrays), len(guarded), len(blocks),
                                       block_list.ctypes.data, intervals.ctypes.data,
                                       int(block_order_seed) % (1 << 64))
                code = self._run_interruptibly(config, argv, err)
                count = self._lib.gc_profile_count() if profile else 0
            if code == _INTERRUPTED:
                raise KeyboardInterrupt(self._stopped())
            if code != _OK:
                raise self._error(code, err, guarded, config)
            log = None
            if profile:
                log = AccessLog(self, records[:count].copy(), launch,
                                {g.name: (g.address, g.nbytes, g.array.itemsize) for g in guarded},
                                truncated=count >= len(records), blocks=[tuple(b) for b in blocks],
                                intervals=[int(n) for n in intervals],
                                shapes={g.name: tuple(g.array.shape) for g in guarded})
            for g in guarded:
                offset = g.first_tail_write()
                if offset is not None:
                    raise KernelMemoryError(
                        f"{self.kernel} wrote out of bounds: {g.describe(offset)}. An edge guard that lets "
                        "threads past the edge of the matrix (`<=` for `<`, or a missing check)?",
                        f"{self.kernel} 越界写入了 {g.describe(offset, 'zh')}。是否边界判断放过了矩阵边缘之外的线程"
                        "（把 `<` 写成了 `<=`，或者漏了判断）？")
            for g in guarded:
                if g.writable:
                    g.copy_back()
            return log
        finally:
            for g in guarded:
                g.free()

    def _run_interruptibly(self, config: "_LaunchConfig", argv: Any, err: "_ErrorInfo") -> int:
        """gc_launch in a worker thread, so that Ctrl-C (which Python only sees between bytecodes of
        the main thread) stops the kernel within a fraction of a second instead of after it ends."""
        done: dict[str, int] = {}
        finished = threading.Event()  # not Thread.join: a join interrupted by Ctrl-C can report a live thread as ended

        def work() -> None:
            try:
                if hasattr(signal, "pthread_sigmask"):  # Ctrl-C goes to the main thread, never onto a fiber's stack
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
                done["code"] = self._lib.gc_launch(ctypes.byref(config), argv, ctypes.byref(err))
            finally:
                finished.set()

        threading.Thread(target=work, daemon=True).start()
        interrupted = False
        while not finished.is_set():
            try:
                finished.wait(0.05)
            except KeyboardInterrupt:  # stop the kernel, then wait for it: its buffers are freed after
                interrupted = True
            if interrupted:  # asked again every 50 ms: a launch that had not started yet clears the request
                self._lib.gc_request_stop()
        if interrupted:
            raise KeyboardInterrupt(self._stopped())
        return done["code"]

    def _stopped(self) -> str:
        return bilingual(f"{self.kernel}: stopped on the CPU backend", f"{self.kernel}：已在 CPU 后端上中止")

    def _stack_pool(self) -> int:
        """The process's fiber stacks (allocated once; every kernel's launches share them)."""
        slot = self._lib.gc_stack_slot()
        if slot not in _stacks:
            pool = self._lib.gc_stack_pool()
            if not pool:
                raise MemoryError(bilingual("could not reserve address space for 1024 fiber stacks",
                                            "无法为 1024 个纤程栈预留地址空间"))
            _stacks[slot] = pool
        return _stacks[slot]

    def _guard(self, i: int, ctype: str, arg: Any, name: str) -> _Guarded:
        element = ctype[:-1].removeprefix("const ").strip()
        dtype = _SCALARS.get(element, (None, None))[1]
        if not isinstance(arg, np.ndarray):
            raise TypeError(bilingual(f"argument {i} ({name}) of {self.kernel} is {ctype}: pass a numpy.ndarray "
                                      f"(got {type(arg).__name__})",
                                      f"{self.kernel} 的参数 {i}（{name}）类型是 {ctype}：请传入 numpy.ndarray"
                                      f"（实际是 {type(arg).__name__}）"))
        if dtype is not None and str(arg.dtype) != dtype:
            raise TypeError(bilingual(f"argument {i} ({name}) of {self.kernel} is {ctype} but the array is {arg.dtype}; "
                                      f"convert it with .astype(numpy.{dtype})",
                                      f"{self.kernel} 的参数 {i}（{name}）类型是 {ctype}，但数组是 {arg.dtype}；"
                                      f"请用 .astype(numpy.{dtype}) 转换"))
        if not arg.flags.c_contiguous:
            raise ValueError(bilingual(f"argument {i} ({name}) must be C-contiguous; use numpy.ascontiguousarray",
                                       f"参数 {i}（{name}）必须是 C 连续的数组；请用 numpy.ascontiguousarray"))
        writable = not ctype.startswith("const ")
        if writable and not arg.flags.writeable:
            raise ValueError(bilingual(f"argument {i} ({name}) is {ctype}, but the array is read-only",
                                       f"参数 {i}（{name}）类型是 {ctype}，但数组是只读的"))
        return _Guarded(self._lib, arg, name, writable)

    def _scalar(self, i: int, ctype: str, arg: Any, name: str) -> Any:
        if ctype not in _SCALARS:
            raise TypeError(bilingual(f"parameter {i} of {self.kernel} has type {ctype!r}, which the CPU backend "
                                      "cannot pass; use float, double, an integer type or a pointer to one",
                                      f"{self.kernel} 的参数 {i} 类型是 {ctype!r}，CPU 后端无法传递这种类型；"
                                      "请使用 float、double、整数类型，或指向它们的指针"))
        c_type, dtype = _SCALARS[ctype]
        if isinstance(arg, np.ndarray) and arg.ndim == 0:
            arg = arg[()]
        if np.dtype(dtype).kind in "iub":
            if not isinstance(arg, (int, np.integer, bool, np.bool_)):
                raise TypeError(bilingual(f"argument {i} ({name}) of {self.kernel} is {ctype}; got {arg!r}",
                                          f"{self.kernel} 的参数 {i}（{name}）类型是 {ctype}；实际传入了 {arg!r}"))
            info = np.iinfo(dtype) if dtype != "bool" else None
            if info is not None and not info.min <= int(arg) <= info.max:
                raise OverflowError(bilingual(f"argument {i} ({name}) = {arg} does not fit in {ctype}",
                                              f"参数 {i}（{name}）= {arg} 超出了 {ctype} 的表示范围"))
            return c_type(int(arg))
        return c_type(float(arg))

    def _error(self, code: int, err: _ErrorInfo, guarded: list[_Guarded], config: "_LaunchConfig") -> CpuBackendError:
        """The exception for a failed launch. The English text is the header's message (or written here);
        the Chinese one is written here from err's numbers, never translated from the English."""
        message = err.message.decode(errors="replace")
        en = f"{self.kernel}: {message}"
        block, thread, other = tuple(err.block), tuple(err.thread), tuple(err.other_thread)
        who = f"thread {_xyz(thread)} of block {_xyz(block)}"
        who_zh = f"线程块 {_xyz(block)} 中的线程 {_xyz(thread)}"
        try:
            signal_name = signal.Signals(err.signal).name
        except ValueError:
            signal_name = f"signal {err.signal}"
        if code == _RACE:
            return self._race(err)
        if code == _ASYNC_COPY:
            return self._async_copy(err)
        if code in (_WILD_ACCESS, _BLOCK_CONFLICT, _INPUT_WRITE):
            return self._forbidden_access(code, err, guarded)
        if code == _OUT_OF_BOUNDS:
            g = guarded[err.array]
            offset, write = int(err.byte_offset), bool(err.write)
            line = self.source_line(int(err.code_offset[0]))
            action, action_zh = ("wrote", "写入") if write else ("read", "读取")
            hint = ("An edge guard that lets threads past the edge of the matrix (`<=` for `<`, or a missing check)?"
                    if write else "A missing edge guard on a load (a thread, or an element of a tile, past the edge "
                    "must not read: use 0 there instead), or an index off by one?")
            hint_zh = ("是否边界判断放过了矩阵边缘之外的线程（把 `<` 写成了 `<=`，或者漏了判断）？" if write else
                       "是否加载时漏了边界判断（越过边缘的线程或分块元素不能去读，应当改用 0），或者下标差了一？")
            return KernelMemoryError(
                f"{self.kernel}: {who} {action} {g.describe(offset)} at {line}, out of bounds. {hint}",
                f"{self.kernel}：{who_zh} 在 {line} 越界{action_zh}了 {g.describe(offset, 'zh')}。{hint_zh}",
                block=block, thread=thread, address=g.address + offset, line=line, array=g.name,
                index=tuple(int(v) for v in g.index(offset)), write=write)
        src = self.source_name  # __syncthreads() records __LINE__: a line of the kernel's own file
        if code == _BARRIER_PARTIAL:
            total = config.block[0] * config.block[1] * config.block[2]
            waiting = int(err.count)
            return KernelBarrierError(
                f"{self.kernel}: __syncthreads() reached by {waiting} of {total} threads of block {_xyz(block)}: a "
                f"barrier inside a branch that not all threads take? The barrier is at {src}:{err.line}; "
                f"{total - waiting} thread(s) had already returned from the kernel, the first of them thread "
                f"{_xyz(other)}. On a GPU this hangs or silently skips the synchronisation. Move the barrier out of "
                "the branch (e.g. no early `return` for out-of-range threads in a kernel with __syncthreads()).",
                f"{self.kernel}：线程块 {_xyz(block)} 的 {total} 个线程中只有 {waiting} 个到达了 {src}:{err.line} 的 "
                "__syncthreads()：屏障是否放在了并非所有线程都会进入的分支里？另外 "
                f"{total - waiting} 个线程已经从内核返回，第一个是线程 {_xyz(other)}。在 GPU 上这会让内核卡死，"
                "或者悄悄跳过这次同步。请把屏障移到分支之外（例如，在含 __syncthreads() 的内核里，不要让越界的线程"
                "提前 `return`）。",
                kind="partial", block=block, threads=(thread, other), lines=(err.line,), waiting=waiting, total=total)
        if code == _BARRIER_DIVERGENT:
            return KernelBarrierError(
                f"{self.kernel}: threads of block {_xyz(block)} wait at different __syncthreads(): thread "
                f"{_xyz(other)} at {src}:{err.other_line}, thread {_xyz(thread)} at {src}:{err.line}. All threads "
                "of a block must reach the same barrier; a __syncthreads() inside a branch or loop that threads "
                "take differently?",
                f"{self.kernel}：线程块 {_xyz(block)} 的线程停在了不同的 __syncthreads() 上：线程 {_xyz(other)} "
                f"在 {src}:{err.other_line}，线程 {_xyz(thread)} 在 {src}:{err.line}。一个线程块的所有线程必须到达同一个"
                "屏障；是否有 __syncthreads() 放在了各线程走向不同的分支或循环里？",
                kind="divergent", block=block, threads=(other, thread), lines=(err.other_line, err.line))
        if code == _TIMEOUT:
            seconds = float(config.timeout_s)
            line = self.source_line(int(err.code_offset[0]))
            if line != "?":
                en += f" (it was at {line} when stopped)"
            return KernelTimeoutError(
                en, f"{self.kernel}：{who_zh} 运行了 {seconds:.3g} 秒，既没有到达 __syncthreads()，也没有返回"
                f"{f'（被停下时位于 {line}）' if line != '?' else ''}：可能是"
                "死循环，或者在等待另一个线程的写入（CPU 后端把一个线程块的线程逐个执行，每个线程一直运行到它的下一个"
                "屏障，所以自旋等待另一个线程永远等不到）",
                block=block, thread=thread, seconds=seconds)
        if code == _STACK_OVERFLOW:
            return KernelMemoryError(
                en, f"{self.kernel}：{who_zh} 用完了它的 {int(err.count) // 1024} KiB 栈：局部数组太大，或者递归太深",
                block=block, thread=thread, signal_name=signal_name, address=int(err.address))
        if code == _BAD_CONFIG:
            grid, threads_per_block = tuple(config.grid), config.block[0] * config.block[1] * config.block[2]
            if min(grid) < 1 or min(config.block) < 1:
                zh = f"网格和线程块每一维的大小都必须至少为 1（grid={_xyz(grid)}，block={_xyz(config.block)}）"
            elif threads_per_block > 1024:
                zh = f"每个线程块 {threads_per_block} 个线程，超过了 CUDA 的上限 1024"
            else:
                zh = f"没有栈池，或者内存不足，无法分配 {config.dynamic_shared_bytes} 字节的动态共享内存"
            return CpuBackendError(en, f"{self.kernel}：{zh}")
        if code == _FAULT:
            # The faulting instruction's line (the signal's PC; the kernel's own file preferred).
            frames = self.source_frames([int(err.code_offset[0])])[int(err.code_offset[0])]
            line = self._pick_line(frames)
            at, at_zh = (f" at {line}", f"在 {line} ") if line != "?" else ("", "")
            where = dict(block=block, thread=thread, signal_name=signal_name, address=int(err.address), line=line)
            if err.signal == signal.SIGFPE:
                return KernelCrashError(f"{self.kernel}: {who} divided an integer by zero{at} ({signal_name})",
                                        f"{self.kernel}：{who_zh} {at_zh}做了除数为零的整数除法（{signal_name}）", **where)
            if err.signal == signal.SIGILL and err.count == 1:  # the runtime saw the __trap() call
                return KernelCrashError(f"{self.kernel}: {who} called __trap(){at} ({signal_name})",
                                        f"{self.kernel}：{who_zh} {at_zh}调用了 __trap()（{signal_name}）", **where)
            if err.signal == signal.SIGILL:
                return KernelMemoryError(
                    f"{self.kernel}: {who} stopped at a trap{at} ({signal_name}): a misaligned access — e.g. a "
                    "float4 load or store at an address that is not a multiple of 16 bytes, which faults on a "
                    "GPU too (is the row length a multiple of 4?) — or a __trap()",
                    f"{self.kernel}：{who_zh} {at_zh}停在了一条陷阱指令上（{signal_name}）：可能是未对齐访问，例如 float4 的"
                    "读写地址不是 16 字节的整数倍，这在 GPU 上同样会出错（行长是 4 的倍数吗？），也可能是调用了 __trap()",
                    **where)
            for g in guarded:
                if g.contains(err.address):
                    offset = err.address - g.address
                    return KernelMemoryError(
                        f"{self.kernel}: {who} accessed {g.describe(offset)}{at}, out of bounds "
                        f"(caught by a guard page, {signal_name}). An index off by one at an edge, or a "
                        "missing edge guard?",
                        f"{self.kernel}：{who_zh} {at_zh}越界访问了 {g.describe(offset, 'zh')}，被保护页捕获（{signal_name}）。"
                        "是否在边界处下标差了一，或者漏了边界判断？", array=g.name,
                        index=tuple(int(v) for v in g.index(offset)), **where)
            if err.address == 0:
                return KernelMemoryError(
                    f"{self.kernel}: {who} crashed{at} ({signal_name}, no address): a misaligned vector access "
                    "(a float4 load or store needs a 16-byte-aligned address, as on a GPU) or a null pointer",
                    f"{self.kernel}：{who_zh} {at_zh}崩溃了（{signal_name}，没有给出地址）：可能是未对齐的向量访问（与 GPU 上"
                    "一样，float4 的读写需要 16 字节对齐的地址），或者空指针", **where)
            return KernelMemoryError(
                f"{self.kernel}: {who} crashed{at} ({signal_name}) at address {err.address:#x}, which is not "
                "next to any argument array: a wild pointer, or an index far out of range",
                f"{self.kernel}：{who_zh} {at_zh}在地址 {err.address:#x} 处崩溃（{signal_name}），这个地址不在任何参数数组"
                "附近：可能是野指针，或者下标远远超出了范围", **where)
        return CpuBackendError(en, f"{self.kernel}：CPU 后端报告了错误（代码 {code}），原文见英文部分")

    def _forbidden_access(self, code: int, err: _ErrorInfo, guarded: list[_Guarded]) -> CpuBackendError:
        """A wild access, a store into an input, or two blocks on one element (race-check builds)."""
        block, thread = tuple(err.block), tuple(err.thread)
        who = f"thread {_xyz(thread)} of block {_xyz(block)}"
        who_zh = f"线程块 {_xyz(block)} 中的线程 {_xyz(thread)}"
        line = self.source_line(int(err.code_offset[0]))
        write = bool(err.write)
        action, action_zh = ("wrote", "写入") if write else ("read", "读取")
        if code == _WILD_ACCESS and int(err.address) < NULL_PAGE_BYTES:
            return KernelMemoryError(
                f"{self.kernel}: {who} {action} through a null pointer at {line} (address {int(err.address):#x}): an "
                "argument that is null in this setting (e.g. the bias when there is none) read or written anyway?",
                f"{self.kernel}：{who_zh} 在 {line} 通过空指针{action_zh}（地址 {int(err.address):#x}）：在这个配置下为空的"
                "参数（例如没有偏置时的 bias）是否仍被读写？",
                block=block, thread=thread, address=int(err.address), line=line, write=write)
        if code == _WILD_ACCESS:
            return KernelWildAccessError(
                f"{self.kernel}: {who} {action} {err.access_size} bytes at {line} at an address that is none of the "
                "kernel's arrays, its shared memory or its own local variables: a pointer made from something the "
                "kernel was not given, or a __device__ variable; a graded kernel touches only its arguments' "
                "arrays, shared memory and its locals",
                f"{self.kernel}：{who_zh} 在 {line} {action_zh}了 {err.access_size} 字节，地址既不属于内核的数组，也不属于"
                "它的共享内存或局部变量：指针是否来自内核没有拿到的东西，或者用了 __device__ 变量？被评分的内核只能访问"
                "参数中的数组、共享内存和它自己的局部变量",
                block=block, thread=thread, address=int(err.address), line=line, write=write)
        g = guarded[err.array]
        offset = int(err.byte_offset)
        index = tuple(int(v) for v in g.index(offset))
        element = f"{g.name}[{', '.join(map(str, index))}]"
        if code == _INPUT_WRITE:
            return KernelInputWriteError(
                f"{self.kernel}: {who} wrote {element} at {line}, but {g.name} is an input (a const pointer): "
                "a kernel writes only its output",
                f"{self.kernel}：{who_zh} 在 {line} 写入了 {element}，但 {g.name} 是输入（const 指针）：内核只应写它的输出",
                block=block, thread=thread, address=g.address + offset, line=line, array=g.name, index=index,
                write=True)
        other = tuple(err.other_thread)
        atomics = bool(err.count)
        kind = ("write-write", "read-after-write", "write-after-read")[int(err.race_kind)]
        earlier = "updated with atomics by other blocks" if atomics else {
            "write-write": f"written by block {_xyz(other)}", "read-after-write": f"written by block {_xyz(other)}",
            "write-after-read": f"read by block {_xyz(other)}"}[kind]
        earlier_zh = "已被其他线程块用原子操作更新" if atomics else {
            "write-write": f"已被线程块 {_xyz(other)} 写入", "read-after-write": f"已被线程块 {_xyz(other)} 写入",
            "write-after-read": f"已被线程块 {_xyz(other)} 读取"}[kind]
        return KernelBlockConflictError(
            f"{self.kernel}: {who} {action} {element} at {line}, an element {earlier}: each block must keep to its "
            "own part of the output (blocks run in no fixed order, so the result would depend on it)",
            f"{self.kernel}：{who_zh} 在 {line} {action_zh}了 {element}，而这个元素{earlier_zh}：每个线程块只能处理输出中"
            "属于自己的部分（线程块的执行顺序不固定，结果会随之改变）",
            block=block, other_block=other, thread=thread, line=line, array=g.name, index=index, kind=kind,
            atomics=atomics)

    def source_line(self, offset: int) -> str:
        """'file:line' of a code offset in the library (addr2line), the kernel's own file preferred
        over the headers it inlines from; '?' when that cannot be found."""
        return self.source_lines([offset])[offset]

    def source_lines(self, offsets: Sequence[int]) -> dict[int, str]:
        """source_line for many offsets with one addr2line call."""
        return {o: self._pick_line(frames) for o, frames in self.source_frames(offsets).items()}

    def _pick_line(self, frames: Sequence[tuple[str, str]]) -> str:
        mine = [place for _, place in frames if place.startswith(self.source_name + ":")]
        return (mine or [place for _, place in frames] or ["?"])[0]

    def source_frames(self, offsets: Sequence[int]) -> dict[int, list[tuple[str, str]]]:
        """For each code offset, its inlined frames, innermost first: (function, "file:line") each
        (addr2line -f -i); [] when unknown."""
        tool = shutil.which("addr2line") or shutil.which("llvm-addr2line")
        wanted = [o for o in dict.fromkeys(offsets) if o]
        found: dict[int, list[tuple[str, str]]] = {o: [] for o in offsets}
        if not wanted or not tool:
            return found
        try:
            out = subprocess.run([tool, "-C", "-f", "-i", "-a", "-e", str(self.path), *map(hex, wanted)],
                                 capture_output=True, text=True, timeout=60).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            return found
        current, function = None, None
        for line in out:  # "0x...": a new address; then a function name and a "file:line" per inlined frame
            if line.startswith("0x") and function is None:
                current = int(line, 16)
                found[current] = []
            elif current is not None and function is None:
                function = line
            elif current is not None:
                if ":" in line and not line.startswith("??"):
                    found[current].append((function, Path(line.split(" (")[0]).name))
                function = None
        return found

    def code_offset(self, pc: int) -> int:
        """The library offset of a hook's return address (0 if unknown)."""
        return int(self._lib.gc_code_offset(pc))

    # --- shared memory by name: the symbol table and the debug information of the build ---------

    @functools.cached_property
    def _shared_layout(self) -> tuple[int, list[tuple[int, int, str, Any]]]:
        """(static shared bytes, [(offset, bytes, name, type) per __shared__ variable]), offsets from the
        start of static shared memory; type: a small tree made from the variable's DWARF type."""
        try:
            from elftools.elf.elffile import ELFFile
        except ImportError:  # pyelftools missing: messages fall back to byte offsets
            return 0, []
        try:
            with open(self.path, "rb") as f:
                elf = ELFFile(f)
                symtab = elf.get_section_by_name(".symtab")
                if symtab is None:
                    return 0, []
                begin = symtab.get_symbol_by_name("gc_shared_begin")
                end = symtab.get_symbol_by_name("gc_shared_end")
                if not begin or not end:
                    return 0, []
                lo, hi = begin[0]["st_value"], end[0]["st_value"]
                variables = []
                if elf.has_dwarf_info():
                    for cu in elf.get_dwarf_info().iter_CUs():
                        for die in _variable_dies(cu.get_top_DIE()):
                            address = _dwarf_address(die)
                            if address is None or not lo <= address < hi:
                                continue
                            named = _dwarf_origin(die)
                            name = named.attributes.get("DW_AT_name")
                            type_die = _dwarf_type(named)
                            if name is None or type_die is None:
                                continue
                            tree = _type_tree(type_die)
                            variables.append((address - lo, _tree_size(tree), name.value.decode(), tree))
                return hi - lo, sorted(set((o, n, name, t) for o, n, name, t in variables), key=lambda v: v[0])
        except Exception:  # broken or unexpected debug information: names are a convenience
            return 0, []

    def shared_element(self, offset: int, lang: str = "en") -> str:
        """A shared-memory byte offset (as the race detector and the access profile give it) by name:
        "As[3][17]", "s[1].Bs[0][5]", "byte 40 of dynamic shared memory"; lang="zh": the same in Chinese."""
        static, variables = self._shared_layout
        for start, size, name, tree in variables:
            if start <= offset < start + size:
                return name + _element_path(tree, offset - start)
        dynamic = (static + 3) // 4 * 4  # the race detector's words: static shared memory, then dynamic
        if offset >= dynamic and (static or not variables):
            n = offset - dynamic
            return f"动态共享内存中偏移 {n} 字节处" if lang == "zh" else f"byte {n} of dynamic shared memory"
        return f"共享内存中偏移 {offset} 字节处" if lang == "zh" else f"byte {offset} of shared memory"

    def _crossing(self, access: int, barrier: int, frames: dict[int, list[tuple[str, str]]]) -> bool:
        """True when the access lies at an earlier line of the function that holds the barrier its
        thread passed last: it was reached by going around a loop after that barrier."""
        here, gate = frames.get(access, []), frames.get(barrier, [])
        gate_mine = [(fn, place) for fn, place in gate if place.startswith(self.source_name + ":")]
        if not gate_mine or not here:
            return False
        function, place = gate_mine[0]
        for fn, where in here:
            if fn == function and where.startswith(self.source_name + ":"):
                return int(where.rsplit(":", 1)[1]) < int(place.rsplit(":", 1)[1])
        return False

    def _race(self, err: _ErrorInfo) -> "KernelRaceError":
        kind = err.race_kind
        later, earlier = (tuple(err.thread), tuple(err.other_thread))
        offsets = [int(err.code_offset[1]), int(err.code_offset[0]), int(err.entry_offset[1]), int(err.entry_offset[0])]
        frames = self.source_frames(offsets)
        where = (self._pick_line(frames[offsets[0]]), self._pick_line(frames[offsets[1]]))
        actions = (_EARLIER_KINDS[kind], _RACE_KINDS[kind])
        crosses = (self._crossing(offsets[0], offsets[2], frames), self._crossing(offsets[1], offsets[3], frames))
        offset = int(err.shared_offset)
        element, element_zh = self.shared_element(offset), self.shared_element(offset, "zh")
        who = (earlier, later)
        note = note_zh = barrier_line = ""
        if any(crosses):
            i = 0 if crosses[0] else 1
            barrier_line = self._pick_line(frames[offsets[2 + i]])
            kind_en = "write" if actions[i] == "wrote" else "read"
            note = (f" The {kind_en} at {where[i]} by thread {_xyz(who[i])} belongs to the next iteration of the loop "
                    f"around the __syncthreads() at {barrier_line} (e.g. the next k-tile's): thread {_xyz(who[i])} "
                    f"passed that barrier, went around the loop and reached {element} while thread "
                    f"{_xyz(who[1 - i])} was still in the previous iteration. The loop needs a barrier between "
                    "the last use of the data in one iteration and the next iteration's access.")
            note_zh = (f"线程 {_xyz(who[i])} 在 {where[i]} 的{_ACTIONS_ZH[actions[i]]}属于 {barrier_line} 处 __syncthreads() "
                       f"所在循环的下一次迭代（例如下一个 k 分块）：线程 {_xyz(who[i])} 越过这道屏障、绕回循环开头，访问了 "
                       f"{element_zh}，而线程 {_xyz(who[1 - i])} 还在上一次迭代中。循环需要在一次迭代最后使用这些数据与下一次"
                       "迭代访问它们之间再加一道屏障。")
        return KernelRaceError(
            f"{self.kernel}: shared-memory race in block {_xyz(err.block)}: thread {_xyz(earlier)} "
            f"{actions[0]} {element} (byte {offset} of shared memory) at "
            f"{where[0]}, and thread {_xyz(later)} {actions[1]} it at "
            f"{where[1]} with no __syncthreads() between them. On a GPU the "
            "result depends on which thread runs first: put a __syncthreads() between the write and the "
            f"other thread's access (or give each thread its own word).{note}",
            f"{self.kernel}：线程块 {_xyz(err.block)} 中出现共享内存竞争：线程 {_xyz(earlier)} 在 {where[0]} "
            f"{_ACTIONS_ZH[actions[0]]}了 {element_zh}（共享内存中偏移 {offset} 字节处），线程 {_xyz(later)} 在 "
            f"{where[1]} {_ACTIONS_ZH[actions[1]]}了同一个字，两者之间没有 __syncthreads()。在 GPU 上结果取决于哪个"
            "线程先执行：请在写入与另一个线程的访问之间加上 __syncthreads()（或者让每个线程使用自己的字）。" + note_zh,
            block=tuple(err.block), threads=(earlier, later), lines=where, actions=actions,
            shared_offset=offset, element=element, crosses_iterations=crosses, barrier_line=barrier_line)

    def _async_copy(self, err: _ErrorInfo) -> "KernelAsyncCopyError":
        thread, issuer, block = tuple(err.thread), tuple(err.other_thread), tuple(err.block)
        lines = self.source_lines([int(err.code_offset[0]), int(err.code_offset[1])])
        access, issue = lines[int(err.code_offset[0])], lines[int(err.code_offset[1])]
        offset, write, returned = int(err.shared_offset), bool(err.write), bool(err.count)
        element, element_zh = self.shared_element(offset), self.shared_element(offset, "zh")
        action = "wrote" if write else "read"
        by = "by the same thread" if issuer == thread else f"by thread {_xyz(issuer)}"
        by_zh = "由同一个线程" if issuer == thread else f"由线程 {_xyz(issuer)} "
        if returned:
            why = (f" Thread {_xyz(issuer)} returned from the kernel without waiting for its copies, so nothing "
                   "says when they land.")
            why_zh = f"线程 {_xyz(issuer)} 没有等待自己的拷贝就从内核返回了，因此无从知道它们何时落地。"
        else:
            why = ""
            why_zh = ""
        return KernelAsyncCopyError(
            f"{self.kernel}: thread {_xyz(thread)} of block {_xyz(block)} {action} {element} at {access}, which a "
            f"cp.async issued at {issue} ({by}) writes, before that copy was waited for (cp.async.wait_group / "
            f"__pipeline_wait_prior): on a GPU the copy may not have landed yet.{why} The thread that issues a "
            "copy must wait for it (copy_async_wait_all() / __pipeline_wait_prior(0)) before anyone uses its "
            "target, and a __syncthreads() after that wait makes the data visible to the other threads "
            "(a barrier alone does not complete another thread's copies).",
            f"{self.kernel}：线程块 {_xyz(block)} 中的线程 {_xyz(thread)} 在 {access} {_ACTIONS_ZH[action]}了 {element_zh}，"
            f"而 {issue} 处{by_zh}发出的一条 cp.async 正要写入它，这条拷贝还没有被等待（cp.async.wait_group / "
            f"__pipeline_wait_prior）：在 GPU 上它可能还没有落地。{why_zh}发出拷贝的线程必须先等待它完成"
            "（copy_async_wait_all() / __pipeline_wait_prior(0)），其他线程才能使用目标位置；等待之后再用一道 "
            "__syncthreads() 把数据公布给其他线程（仅有屏障并不能让另一个线程的拷贝完成）。",
            block=block, thread=thread, issuer=issuer, lines=(access, issue), action=action, element=element,
            shared_offset=offset, issuer_returned=returned)


# --- reading the debug information (pyelftools) --------------------------------------------------

_SKIPPED_SCOPES = {b"std", b"__gnu_cxx", b"__cxxabiv1", b"gc_cpu"}  # no __shared__ variables in there


def _variable_dies(die: Any):
    """Every DW_TAG_variable below die, skipping the standard library's and the runtime's namespaces."""
    for child in die.iter_children():
        if child.tag == "DW_TAG_variable":
            yield child
        elif child.tag == "DW_TAG_namespace":
            name = child.attributes.get("DW_AT_name")
            if name is None or name.value not in _SKIPPED_SCOPES:
                yield from _variable_dies(child)
        elif child.tag in ("DW_TAG_subprogram", "DW_TAG_lexical_block", "DW_TAG_inlined_subroutine",
                           "DW_TAG_class_type", "DW_TAG_structure_type"):
            if child.has_children:
                yield from _variable_dies(child)


def _dwarf_address(die: Any) -> Optional[int]:
    """The static address of a variable located by DW_OP_addr, else None."""
    loc = die.attributes.get("DW_AT_location")
    if loc is None or loc.form != "DW_FORM_exprloc" or not loc.value or loc.value[0] != 0x03:
        return None
    size = die.cu.structs.address_size
    return int.from_bytes(bytes(loc.value[1:1 + size]), "little" if die.dwarfinfo.config.little_endian else "big")


def _dwarf_origin(die: Any) -> Any:
    """The declaration that has the name and type (a definition may point at it)."""
    for _ in range(4):
        for attr in ("DW_AT_abstract_origin", "DW_AT_specification"):
            if attr in die.attributes:
                die = die.get_DIE_from_attribute(attr)
                break
        else:
            return die
    return die


def _dwarf_type(die: Any) -> Any:
    return die.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in die.attributes else None


def _type_tree(die: Any, depth: int = 0) -> tuple:
    """("array", dims, element) / ("struct", [(offset, name, member)], bytes) / ("scalar", bytes)."""
    while die is not None and die.tag in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
                                          "DW_TAG_restrict_type", "DW_TAG_atomic_type"):
        die = _dwarf_type(die)
    if die is None or depth > 8:
        return ("scalar", 1)
    if die.tag == "DW_TAG_array_type":
        dims = []
        for sub in die.iter_children():
            if sub.tag != "DW_TAG_subrange_type":
                continue
            if "DW_AT_count" in sub.attributes:
                dims.append(int(sub.attributes["DW_AT_count"].value))
            elif "DW_AT_upper_bound" in sub.attributes:
                dims.append(int(sub.attributes["DW_AT_upper_bound"].value) + 1)
            else:
                dims.append(0)  # unknown extent
        return ("array", tuple(dims), _type_tree(_dwarf_type(die), depth + 1))
    size = int(die.attributes["DW_AT_byte_size"].value) if "DW_AT_byte_size" in die.attributes else 1
    if die.tag in ("DW_TAG_structure_type", "DW_TAG_class_type", "DW_TAG_union_type"):
        members = []
        for m in die.iter_children():
            loc = m.attributes.get("DW_AT_data_member_location")
            if m.tag != "DW_TAG_member" or "DW_AT_name" not in m.attributes or loc is None:
                continue  # no location: a static member (e.g. a constexpr), which takes no space here
            offset = int(loc.value) if isinstance(loc.value, int) else 0
            members.append((offset, m.attributes["DW_AT_name"].value.decode(), _type_tree(_dwarf_type(m), depth + 1)))
        return ("struct", tuple(members), size)
    return ("scalar", size)


def _tree_size(tree: tuple) -> int:
    if tree[0] == "array":
        n = 1
        for d in tree[1]:
            n *= max(d, 1)
        return n * _tree_size(tree[2])
    return tree[2] if tree[0] == "struct" else tree[1]


def _element_path(tree: tuple, offset: int) -> str:
    """"[3][17]", ".Bs[0][5]", "[2].y" for a byte offset into a value of this type."""
    if tree[0] == "array":
        item = _tree_size(tree[2])
        element, rest = divmod(offset, item) if item else (0, offset)
        index = []
        for d in reversed(tree[1]):
            element, i = divmod(element, d) if d else (0, element)
            index.append(i)
        return "".join(f"[{i}]" for i in reversed(index)) + _element_path(tree[2], rest)
    if tree[0] == "struct":
        for start, name, member in sorted(tree[1], reverse=True):
            if start <= offset:
                return f".{name}" + _element_path(member, offset - start)
        return f" (+{offset} B)"
    return f" (+{offset} B)" if offset else ""


class AccessLog:
    """The profiled blocks' memory accesses of one launch, as the instrumented build recorded them:
    records (ACCESS_RECORD, in the order they ran; record["block"] indexes blocks), the launch, the
    array arguments (name → address, bytes, itemsize), blocks (the profiled blocks' (x, y, z)),
    intervals (barrier intervals each profiled block went through: its __syncthreads() passed + 1)
    and shapes (name → the argument array's shape)."""

    def __init__(self, kernel: CpuKernel, records: np.ndarray, launch: Launch,
                 arrays: dict[str, tuple[int, int, int]], truncated: bool = False,
                 blocks: Optional[Sequence[tuple[int, int, int]]] = None, intervals: Optional[Sequence[int]] = None,
                 shapes: Optional[dict[str, tuple[int, ...]]] = None):
        self.kernel, self.records, self.launch, self.arrays, self.truncated = kernel, records, launch, arrays, truncated
        self.blocks: list[tuple[int, int, int]] = list(blocks or [(0, 0, 0)])
        self.intervals: list[int] = list(intervals or [0] * len(self.blocks))
        self.shapes: dict[str, tuple[int, ...]] = dict(shapes or {})


def launch_kernel(source: str, kernel: str, launch: Launch, args: Sequence[Any], *,
                  source_name: str = "kernel.cu", names: Optional[Sequence[str]] = None,
                  timeout_s: Optional[float] = None, race_check: bool = True) -> None:
    """Compile (cached) and run one kernel of a CUDA C source on the CPU with an explicit Launch.

    The lower-level door, for kernels outside the registry: e.g.
    launch_kernel(src, "tiled<16>", Launch((4, 4, 1), (16, 16, 1)), [A, B, C, M, N, K]).
    """
    compile_kernel(source, kernel, source_name, race_check).launch(launch, args, names=names, timeout_s=timeout_s)


# --- levels --------------------------------------------------------------------------------------

def max_work() -> int:
    """The largest batch·M·N·K one CPU launch may do: $GEMM_COURSE_CPU_MAX_WORK, else 2**27."""
    return int(env_number(MAX_WORK_ENV, DEFAULT_MAX_WORK, "1e9", zero_ok=False))  # 1e9 and 1000000000 alike


def require_small(work: int, what: str) -> None:
    """Refuse a problem the CPU backend would take minutes over, saying how to allow it anyway."""
    limit = max_work()
    if work > limit:
        raise ValueError(bilingual(
            f"{what} is {work:,} multiply-adds, over the CPU backend's limit of {limit:,} (about 512³): it "
            f"emulates one GPU thread at a time and would take minutes. Use a smaller problem, a GPU "
            f"(backend='cuda'), or raise the limit with the environment variable {MAX_WORK_ENV}.",
            f"{what} 需要 {work:,} 次乘加，超过了 CPU 后端的上限 {limit:,}（约 512³）：它一次只模拟一个 GPU 线程，"
            f"要跑好几分钟。请换一个更小的问题、使用 GPU（backend='cuda'），或者用环境变量 {MAX_WORK_ENV} 提高上限。"))


def require_simt(lv: Level) -> None:
    """Raise UnsupportedLevelError for a level the CPU backend cannot run (Tensor Cores)."""
    if lv.uses_tensor_cores:
        raise UnsupportedLevelError(
            f"level {lv.id} uses Tensor Cores (wmma/mma/wgmma), which the CPU backend does not emulate; "
            "it runs the SIMT levels only. Run this level on a GPU (backend='cuda') or read its "
            "recorded results.",
            f"第 {lv.number} 级（{lv.id}）用到了 Tensor Core（wmma/mma/wgmma），CPU 后端不模拟它们，只能运行 SIMT 的各级。"
            "请在 GPU 上运行这一级（backend='cuda'），或者阅读它的实测结果。")


def run_level(lv: Level, params: dict[str, Any], A: np.ndarray, B: np.ndarray, C: np.ndarray,
              source: Optional[str] = None, *, extra_args: Sequence[Any] = (),
              timeout_s: Optional[float] = None, launch: Optional[Launch] = None, race_check: bool = True,
              profile: bool = False, source_name: Optional[str] = None,
              profile_blocks: Optional[Sequence[tuple[int, int, int]]] = None) -> Optional[AccessLog]:
    """C = A @ B with a level's kernel on the CPU; operands already validated (see launch.gemm).

    params: what kernel_name() and geometry() take. The kernel gets (A, B, C, M, N, K, *extra_args)
    (e.g. an epilogue level's bias vector, alpha and beta; None for a null pointer). launch: the
    geometry (default: the level's for these shapes; a batch adds grid z). profile: return the memory
    accesses of the blocks profile_blocks ((x, y, z) each; default: the first block) as an AccessLog
    (needs race_check). source_name: the file name messages give the source (default: the level's file
    name; the grader passes the learner's).
    """
    require_simt(lv)
    (M, K), N = A.shape[-2:], B.shape[-1]
    text = source if source is not None else lv.path.read_text(encoding="utf-8")
    kernel = compile_kernel(text, lv.kernel_name(params), source_name or lv.source, race_check)
    names = ["A", "B", "C", "M", "N", "K"] + [f"argument {6 + i}" for i in range(len(extra_args))]
    if lv.epilogue and len(extra_args) == 3:
        names[6:] = ["bias", "alpha", "beta"]
    return kernel.launch(launch or lv.geometry(M, N, K, params), [A, B, C, M, N, K, *extra_args], names=names,
                         timeout_s=timeout_s, profile=profile, profile_blocks=profile_blocks)
