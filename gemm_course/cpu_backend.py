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
and the arrays live in guarded buffers, so an index past an edge is reported too.

Meant for small shapes: one CPU core emulates the whole grid, thread by thread.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
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

from .levels import KERNEL_DIR, Launch, Level

COMPILERS: tuple[str, ...] = ("g++", "c++", "clang++")
"""Tried in order when the environment variable CXX is not set."""

BASE_FLAGS: tuple[str, ...] = (
    "-std=c++17", "-O2", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
    "-fno-strict-aliasing",   # kernels reinterpret float* as float4*
    "-fdata-sections",        # one section per static, so the linker script can find __shared__ ones
    "-Wno-unknown-pragmas",   # #pragma unroll
)

# Tried once per compiler, each kept when it accepts it:
#   -fno-gnu-unique: template statics (our __shared__ arrays) stay private to their library.
#   -ftrivial-auto-var-init=pattern: uninitialised locals (a forgotten `acc = 0`) hold garbage.
#   -fsanitize=alignment, trapping: a misaligned access (a float4 load from an address that is not
#     a multiple of 16) stops the kernel, as it does on a GPU, instead of quietly working.
OPTIONAL_FLAGS: tuple[tuple[str, ...], ...] = (
    ("-fno-gnu-unique",), ("-ftrivial-auto-var-init=pattern",),
    ("-fsanitize=alignment", "-fsanitize-undefined-trap-on-error"),
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

    Attributes (where known): block, thread, signal_name (e.g. "SIGSEGV"), address (the faulting one)."""

    def __init__(self, en: str, zh: str = "", block: tuple = (), thread: tuple = (), signal_name: str = "",
                 address: int = 0):
        super().__init__(en, zh)
        self.block, self.thread, self.signal_name, self.address = block, thread, signal_name, address


class KernelMemoryError(KernelCrashError):
    """Out-of-bounds access, misaligned access, stack overflow."""


class KernelRaceError(CpuBackendError):
    """Two threads of a block touched one shared-memory word between two barriers, one of them writing.

    Attributes: block, threads (earlier, later: (x, y, z) each), lines (earlier, later: "file:line"),
    actions (earlier, later: "wrote" or "read"), shared_offset (the word's byte offset)."""

    def __init__(self, en: str, zh: str = "", block: tuple = (), threads: tuple = (), lines: tuple = (),
                 actions: tuple = (), shared_offset: int = 0):
        super().__init__(en, zh)
        self.block, self.threads, self.lines, self.actions = block, threads, lines, actions
        self.shared_offset = shared_offset


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
    """Where compiled kernels live: $GEMM_COURSE_CPU_CACHE, else ~/.cache/gemm_course/cpu."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gemm_course" / "cpu"


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
    tu = translation_unit(source, kernel, source_name)
    key = hashlib.sha256("\0".join(
        [_compiler_identity(cmd), " ".join(flags), LINKER_SCRIPT, _kernel_dir_headers(), tu]).encode()).hexdigest()[:32]
    with _lock:
        if key in _loaded:
            return _loaded[key]
        path = cache / f"{key}.so"
        if not path.exists():
            _build(cmd, flags, tu, kernel, path)
        compiled = CpuKernel(path, kernel, source_name, race_check)
        _loaded[key] = compiled
        return compiled


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
        if "-fsanitize=thread" in flags:
            # Two steps: instrument while compiling, but link without the flag, which would pull in
            # ThreadSanitizer's runtime; the compat header defines the hooks the instrumentation calls.
            obj = Path(tmp) / "kernel.o"
            result = _run_compiler([*cmd, *flags, "-c", f"-I{include}", f"-I{KERNEL_DIR}", str(cpp), "-o", str(obj)])
            if result.returncode == 0:
                link = [f for f in flags if f not in RACE_FLAGS]
                result = _run_compiler([*cmd, *link, str(obj), "-o", str(out)])
        else:
            result = _run_compiler([*cmd, *flags, f"-I{include}", f"-I{KERNEL_DIR}", str(cpp), "-o", str(out)])
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

class _LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_int * 3), ("block", ctypes.c_int * 3),
                ("dynamic_shared_bytes", ctypes.c_longlong), ("timeout_s", ctypes.c_double),
                ("stacks", ctypes.c_void_p), ("profile", ctypes.c_void_p), ("profile_capacity", ctypes.c_longlong)]


# One memory access of the first block (AccessRecord in the header).
ACCESS_RECORD = np.dtype([("interval", np.uint32), ("thread", np.uint16), ("size", np.uint8), ("flags", np.uint8),
                          ("pc", np.uint64), ("address", np.uint64)])
PROFILE_CAPACITY = 1 << 21  # accesses kept (the first block of a small problem needs far fewer)


class _ErrorInfo(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("signal", ctypes.c_int), ("address", ctypes.c_ulonglong),
                ("block", ctypes.c_int * 3), ("thread", ctypes.c_int * 3), ("line", ctypes.c_int),
                ("message", ctypes.c_char * 1024), ("other_thread", ctypes.c_int * 3),
                ("code_offset", ctypes.c_ulonglong * 2), ("shared_offset", ctypes.c_ulonglong),
                ("race_kind", ctypes.c_int), ("other_line", ctypes.c_int), ("count", ctypes.c_longlong)]


_OK, _BARRIER_PARTIAL, _BARRIER_DIVERGENT, _TIMEOUT, _FAULT, _STACK_OVERFLOW, _BAD_CONFIG, _RACE, _INTERRUPTED = range(9)
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


def default_timeout() -> float:
    """Seconds a thread may run without reaching a barrier: $GEMM_COURSE_CPU_TIMEOUT, else 10."""
    return float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))


# Fills the tail of each guarded buffer: a signalling NaN as float32. Reading it poisons the
# result (arithmetic turns it into a different, quiet NaN), and a kernel that stores anything
# there, even a NaN computed from it, changes the bytes.
_TAIL_PATTERN = bytes.fromhex("a5a5a57f")


class _Guarded:
    """A copy of one array argument between guard pages; the tail of its last page holds _TAIL_PATTERN."""

    def __init__(self, lib: ctypes.CDLL, array: np.ndarray, name: str, writable: bool):
        self.lib, self.array, self.name, self.writable = lib, array, name, writable
        self.nbytes = array.nbytes
        page = lib.gc_page_size()
        self.capacity = max(1, -(-self.nbytes // page)) * page
        self.page = page
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
        return self.address - self.page <= address < self.address + self.capacity + self.page

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
               timeout_s: Optional[float] = None, profile: bool = False) -> Optional["AccessLog"]:
        """Run the grid. args follow the kernel's parameters: NumPy arrays for pointers (copied
        into guarded buffers; arrays behind non-const pointers are copied back; None for a null
        pointer), Python or NumPy numbers for scalars. names label the arguments in error
        messages (default A, B, C, ...). timeout_s: how long one thread may run without reaching
        a barrier (default: default_timeout(); 0: no limit). Raises KernelBarrierError,
        KernelTimeoutError, KernelCrashError, KernelMemoryError or KernelRaceError for a broken
        kernel. profile (a race-check build only): return the first block's memory accesses as an
        AccessLog (see gemm_course.warp_access, which turns them into sectors and bank wavefronts)."""
        if profile and not self.race_check:
            raise CpuBackendError("profile=True needs a kernel compiled with race_check=True (the instrumented build)",
                                  "profile=True 需要用 race_check=True 编译的内核（带插桩的版本）")
        if len(args) != len(self.parameters):
            raise TypeError(bilingual(f"{self.kernel} takes {len(self.parameters)} arguments "
                                      f"({', '.join(self.parameters)}); got {len(args)}",
                                      f"{self.kernel} 接受 {len(self.parameters)} 个参数（{', '.join(self.parameters)}），"
                                      f"实际传入了 {len(args)} 个"))
        names = list(names or [chr(ord("A") + i) if i < 26 else f"arg{i}" for i in range(len(args))])
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
            with _launch_lock:
                config = _LaunchConfig((ctypes.c_int * 3)(*launch.grid), (ctypes.c_int * 3)(*launch.block),
                                       launch.dynamic_shared_bytes, timeout, self._stack_pool(),
                                       records.ctypes.data if profile else None, len(records))
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
                                truncated=count >= len(records))
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
        if code == _BARRIER_PARTIAL:
            total = config.block[0] * config.block[1] * config.block[2]
            waiting = int(err.count)
            return KernelBarrierError(
                en, f"{self.kernel}：线程块 {_xyz(block)} 的 {total} 个线程中只有 {waiting} 个到达了第 {err.line} 行的 "
                "__syncthreads()：屏障是否放在了并非所有线程都会进入的分支里？另外 "
                f"{total - waiting} 个线程已经从内核返回，第一个是线程 {_xyz(other)}。在 GPU 上这会让内核卡死，"
                "或者悄悄跳过这次同步。请把屏障移到分支之外（例如，在含 __syncthreads() 的内核里，不要让越界的线程"
                "提前 `return`）。",
                kind="partial", block=block, threads=(thread, other), lines=(err.line,), waiting=waiting, total=total)
        if code == _BARRIER_DIVERGENT:
            return KernelBarrierError(
                en, f"{self.kernel}：线程块 {_xyz(block)} 的线程停在了不同的 __syncthreads() 上：线程 {_xyz(other)} "
                f"在第 {err.other_line} 行，线程 {_xyz(thread)} 在第 {err.line} 行。一个线程块的所有线程必须到达同一个"
                "屏障；是否有 __syncthreads() 放在了各线程走向不同的分支或循环里？",
                kind="divergent", block=block, threads=(other, thread), lines=(err.other_line, err.line))
        if code == _TIMEOUT:
            seconds = float(config.timeout_s)
            return KernelTimeoutError(
                en, f"{self.kernel}：{who_zh} 运行了 {seconds:.3g} 秒，既没有到达 __syncthreads()，也没有返回：可能是"
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
            where = dict(block=block, thread=thread, signal_name=signal_name, address=int(err.address))
            if err.signal == signal.SIGFPE:
                return KernelCrashError(f"{self.kernel}: {who} divided an integer by zero ({signal_name})",
                                        f"{self.kernel}：{who_zh} 做了除数为零的整数除法（{signal_name}）", **where)
            if err.signal == signal.SIGILL:
                return KernelMemoryError(
                    f"{self.kernel}: {who} stopped at a trap ({signal_name}): a misaligned access — e.g. a "
                    "float4 load or store at an address that is not a multiple of 16 bytes, which faults on a "
                    "GPU too (is the row length a multiple of 4?) — or a __trap()",
                    f"{self.kernel}：{who_zh} 停在了一条陷阱指令上（{signal_name}）：可能是未对齐访问，例如 float4 的"
                    "读写地址不是 16 字节的整数倍，这在 GPU 上同样会出错（行长是 4 的倍数吗？），也可能是调用了 __trap()",
                    **where)
            for g in guarded:
                if g.contains(err.address):
                    offset = err.address - g.address
                    return KernelMemoryError(
                        f"{self.kernel}: {who} accessed {g.describe(offset)}, out of bounds "
                        f"(caught by a guard page, {signal_name}). An index off by one at an edge, or a "
                        "missing edge guard?",
                        f"{self.kernel}：{who_zh} 越界访问了 {g.describe(offset, 'zh')}，被保护页捕获（{signal_name}）。"
                        "是否在边界处下标差了一，或者漏了边界判断？", **where)
            if err.address == 0:
                return KernelMemoryError(
                    f"{self.kernel}: {who} crashed ({signal_name}, no address): a misaligned vector access "
                    "(a float4 load or store needs a 16-byte-aligned address, as on a GPU) or a null pointer",
                    f"{self.kernel}：{who_zh} 崩溃了（{signal_name}，没有给出地址）：可能是未对齐的向量访问（与 GPU 上"
                    "一样，float4 的读写需要 16 字节对齐的地址），或者空指针", **where)
            return KernelMemoryError(
                f"{self.kernel}: {who} crashed ({signal_name}) at address {err.address:#x}, which is not "
                "next to any argument array: a wild pointer, or an index far out of range",
                f"{self.kernel}：{who_zh} 在地址 {err.address:#x} 处崩溃（{signal_name}），这个地址不在任何参数数组"
                "附近：可能是野指针，或者下标远远超出了范围", **where)
        return CpuBackendError(en, f"{self.kernel}：CPU 后端报告了错误（代码 {code}），原文见英文部分")

    def source_line(self, offset: int) -> str:
        """'file:line' of a code offset in the library (addr2line), the kernel's own file preferred
        over the headers it inlines from; '?' when that cannot be found."""
        return self.source_lines([offset])[offset]

    def source_lines(self, offsets: Sequence[int]) -> dict[int, str]:
        """source_line for many offsets with one addr2line call."""
        tool = shutil.which("addr2line") or shutil.which("llvm-addr2line")
        wanted = [o for o in dict.fromkeys(offsets) if o]
        found = {o: "?" for o in offsets}
        if not wanted or not tool:
            return found
        try:
            out = subprocess.run([tool, "-i", "-a", "-e", str(self.path), *map(hex, wanted)], capture_output=True,
                                 text=True, timeout=60).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            return found
        current, places = None, {}
        for line in out:  # "0x...": a new address; then one "file:line" per inlined frame
            if line.startswith("0x"):
                current = int(line, 16)
                places[current] = []
            elif current is not None and ":" in line and not line.startswith("??"):
                places[current].append(Path(line.split(" (")[0]).name)
        for o in wanted:
            here = places.get(o, [])
            mine = [p for p in here if p.startswith(self.source_name + ":")]
            found[o] = (mine or here or ["?"])[0]
        return found

    def code_offset(self, pc: int) -> int:
        """The library offset of a hook's return address (0 if unknown)."""
        return int(self._lib.gc_code_offset(pc))

    def _race(self, err: _ErrorInfo) -> "KernelRaceError":
        kind = err.race_kind
        later, earlier = (tuple(err.thread), tuple(err.other_thread))
        lines = self.source_lines([err.code_offset[1], err.code_offset[0]])
        where = (lines[err.code_offset[1]], lines[err.code_offset[0]])
        actions = (_EARLIER_KINDS[kind], _RACE_KINDS[kind])
        return KernelRaceError(
            f"{self.kernel}: shared-memory race in block {_xyz(err.block)}: thread {_xyz(earlier)} "
            f"{actions[0]} a shared word (byte {err.shared_offset} of shared memory) at "
            f"{where[0]}, and thread {_xyz(later)} {actions[1]} it at "
            f"{where[1]} with no __syncthreads() between them. On a GPU the "
            "result depends on which thread runs first: put a __syncthreads() between the write and the "
            "other thread's access (or give each thread its own word).",
            f"{self.kernel}：线程块 {_xyz(err.block)} 中出现共享内存竞争：线程 {_xyz(earlier)} 在 {where[0]} "
            f"{_ACTIONS_ZH[actions[0]]}了共享内存中的一个字（第 {err.shared_offset} 字节），线程 {_xyz(later)} 在 "
            f"{where[1]} {_ACTIONS_ZH[actions[1]]}了同一个字，两者之间没有 __syncthreads()。在 GPU 上结果取决于哪个"
            "线程先执行：请在写入与另一个线程的访问之间加上 __syncthreads()（或者让每个线程使用自己的字）。",
            block=tuple(err.block), threads=(earlier, later), lines=where, actions=actions,
            shared_offset=int(err.shared_offset))


class AccessLog:
    """The first block's memory accesses of one launch, as the instrumented build recorded them:
    records (ACCESS_RECORD), the launch, and the array arguments (name → address, bytes, itemsize)."""

    def __init__(self, kernel: CpuKernel, records: np.ndarray, launch: Launch,
                 arrays: dict[str, tuple[int, int, int]], truncated: bool = False):
        self.kernel, self.records, self.launch, self.arrays, self.truncated = kernel, records, launch, arrays, truncated


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
    return int(os.environ.get(MAX_WORK_ENV, DEFAULT_MAX_WORK))


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
              profile: bool = False, source_name: Optional[str] = None) -> Optional[AccessLog]:
    """C = A @ B with a level's kernel on the CPU; operands already validated (see launch.gemm).

    params: what kernel_name() and geometry() take. The kernel gets (A, B, C, M, N, K, *extra_args)
    (e.g. an epilogue level's bias vector, alpha and beta; None for a null pointer). launch: the
    geometry (default: the level's for these shapes; a batch adds grid z). profile: return the first
    block's memory accesses (an AccessLog; needs race_check). source_name: the file name messages give the
    source (default: the level's file name; the grader passes the learner's).
    """
    require_simt(lv)
    (M, K), N = A.shape[-2:], B.shape[-1]
    text = source if source is not None else lv.path.read_text(encoding="utf-8")
    kernel = compile_kernel(text, lv.kernel_name(params), source_name or lv.source, race_check)
    names = ["A", "B", "C", "M", "N", "K"] + [f"argument {6 + i}" for i in range(len(extra_args))]
    if lv.epilogue and len(extra_args) == 3:
        names[6:] = ["bias", "alpha", "beta"]
    return kernel.launch(launch or lv.geometry(M, N, K, params), [A, B, C, M, N, K, *extra_args], names=names,
                         timeout_s=timeout_s, profile=profile)
