"""The learner's code runs in a child process, never in the grader's.

A kernel compiled for the CPU backend is native code: run inside the grader's process it could print a
verdict of its own and leave, rewrite the verdict object, or write the progress file. So every answer
(a compiled kernel, a Python function) runs in a child started here, with

    * a wall-clock limit for the whole grading (the parent kills the child's process group at the
      deadline) and a CPU-time limit, an address-space limit and a file-size limit of 0 bytes (the
      child writes no file: its answers travel over a pipe);
    * a scrubbed environment (PATH, a temporary HOME and TMPDIR, a UTF-8 locale, and what the runner
      adds) and a temporary working directory, removed afterwards;
    * its standard output and error read by the parent, capped, and never parsed: what the child
      hands back goes over a pipe of its own (RESULT_FD_ENV names it), as framed messages (a JSON
      header, then binary blobs of known length) that the parent checks before it uses them.

The verdict, the exit code and the progress entry are computed by the parent from that data; the
child's exit status and printed text count for nothing but saying why it stopped.

    with Child(argv, wall_s=60) as child:
        header, blobs = child.call({"op": "launch", ...}, [A, B])

The child's side (the framing, and giving up its right to write files: child_prelude.py) is plain
standard library, so that a child that must not import the course runs the same text."""
from __future__ import annotations

import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, BinaryIO, Optional, Sequence

from .child_prelude import RESULT_FD_ENV, read_message, write_message
from .zygote import ForkedProcess, Zygote, ZygoteUnavailable, set_limits

WALL_ENV = "GEMM_COURSE_GRADE_WALL_S"

DEFAULT_WALL_S = 60.0              # one whole grading: every launch of every shape
MEMORY_BYTES = 6 << 30            # address space: Python, NumPy, 1024 fiber stacks and guarded arrays
OUTPUT_CAP = 1 << 20              # printed text kept per stream (a GPU's printf buffer is 1 MB too)


class ChildFailed(RuntimeError):
    """The child stopped, or ran past a limit, before it answered. kind: "time", "cpu", "memory",
    "file", "signal", "exit", "protocol"; en, zh: one line each saying what happened and what to change;
    output: the start of what it printed (for the verdict to show)."""

    def __init__(self, kind: str, en: str, zh: str, output: str = ""):
        super().__init__(f"{en} / {zh}")
        self.kind, self.en, self.zh, self.output = kind, en, zh, output


def scrubbed_environment(home: str) -> dict[str, str]:
    """Everything a child's environment holds (before what its runner adds): PATH, its own HOME and TMPDIR, a
    UTF-8 locale. One BLAS thread: the child computes no large matrix products, and OpenBLAS's own threads,
    started at NumPy's import, doubled the CPU time of a child's start (0.40 against 0.22 CPU-s, measured)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TMPDIR": home,
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def wall_limit() -> float:
    """Seconds one grading may take: $GEMM_COURSE_GRADE_WALL_S, else DEFAULT_WALL_S."""
    from gemm_course.run.cpu_backend import env_number

    return env_number(WALL_ENV, DEFAULT_WALL_S, "120", zero_ok=False)


# --- the parent's side ------------------------------------------------------------------------------

class _Drain(threading.Thread):
    """Reads one of the child's output streams to its end, keeping the first `cap` bytes."""

    def __init__(self, stream: BinaryIO, cap: int):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.total = stream, cap, bytearray(), 0
        self.start()

    def run(self) -> None:
        while True:
            chunk = self.stream.read1(65536)  # what is there now (read() would wait for 64 KB or the end)
            if not chunk:
                return
            self.total += len(chunk)
            if len(self.kept) < self.cap:
                self.kept += chunk[: self.cap - len(self.kept)]

    def text(self) -> str:
        return self.kept.decode("utf-8", "replace")


class Child:
    """A child process that answers framed requests (call) until closed. argv: the command (its
    Python, say, with -I); wall_s: the limit for its whole life; env: variables added to the scrubbed
    environment; memory_bytes
    and file_bytes: the address-space and file-size limits (None: none, for a child that drives a GPU,
    whose driver maps far more address space and keeps a cache of compiled kernels)."""

    def __init__(self, argv: Sequence[str], *, wall_s: Optional[float] = None, memory_bytes: Optional[int] = MEMORY_BYTES,
                 file_bytes: Optional[int] = 0, env: Optional[dict[str, str]] = None, output_cap: int = OUTPUT_CAP,
                 zygote: Optional[Zygote] = None):
        self.wall_s = wall_limit() if wall_s is None else float(wall_s)
        self._tmp = tempfile.TemporaryDirectory(prefix="gemm_course_grading_")
        read_end, write_end = os.pipe()
        home = self._tmp.name
        scrubbed = {**scrubbed_environment(home), **(env or {})}
        cpu_s = int(self.wall_s) + 5  # CPU seconds: a spinning child meets the wall clock first
        try:
            self._proc = self._forked(zygote, scrubbed, home, (cpu_s, memory_bytes, file_bytes), write_end)
            if self._proc is None:
                self._proc = subprocess.Popen(
                    list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=home,
                    env={**scrubbed, RESULT_FD_ENV: str(write_end)}, pass_fds=(write_end,), start_new_session=True,
                    preexec_fn=lambda: set_limits(cpu_s, memory_bytes, file_bytes) if sys.platform != "win32" else None)
        finally:
            os.close(write_end)
        self._results = os.fdopen(read_end, "rb", buffering=0)
        self._stdout = _Drain(self._proc.stdout, output_cap)
        self._stderr = _Drain(self._proc.stderr, output_cap)
        self._deadline = time.monotonic() + self.wall_s
        self._failed: Optional[ChildFailed] = None

    @staticmethod
    def _forked(zygote: Optional[Zygote], env: dict[str, str], home: str, limits: tuple[int, Optional[int], Optional[int]],
                result_fd: int) -> Optional[ForkedProcess]:
        """The child forked by the zygote (same pipes, environment and limits), or None: start it with Popen."""
        if zygote is None:
            return None
        pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1], result_fd]
        try:
            pid = zygote.spawn(theirs, env=env, cwd=home, limits=limits, result_fd_env=RESULT_FD_ENV)
        except ZygoteUnavailable:
            for r, w in pipes:
                os.close(r)
                os.close(w)
            return None
        for fd in theirs[:3]:
            os.close(fd)
        return ForkedProcess(zygote, pid, pipes[0][1], pipes[1][0], pipes[2][0])

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def printed(self) -> str:
        """What the child printed so far (standard output, capped)."""
        return self._stdout.text()

    def _kill(self) -> None:
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _read(self, n: int) -> bytes:
        """Up to n bytes of the result pipe, waiting at most until the deadline."""
        left = self._deadline - time.monotonic()
        if left <= 0 or not select.select([self._results], [], [], left)[0]:
            self._kill()
            raise TimeoutError
        return self._results.read(n)

    def call(self, header: dict, blobs: Sequence[bytes] = ()) -> tuple[dict, list[bytes]]:
        """Send one request, return the child's answer. Raises ChildFailed when the child stops, runs
        past a limit or answers with something that is not a message."""
        if self._failed:
            raise self._failed
        try:
            write_message(self._proc.stdin, header, blobs)
            return read_message(self._read)
        except TimeoutError:
            self._failed = self._failure("time")
        except (EOFError, BrokenPipeError, ConnectionResetError):
            self._failed = self._failure("ended")
        except (ValueError, struct.error, UnicodeDecodeError):
            self._kill()
            self._failed = self._failure("protocol")
        raise self._failed

    def _failure(self, why: str) -> ChildFailed:  # the child has ended, or _read or call killed it
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self._proc.wait()
        self._stdout.join(1)
        self._stderr.join(1)
        printed = self._stdout.text()
        errors = self._stderr.text()
        return classify(why, code, self.wall_s, printed, errors)

    def close(self) -> None:
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            self._proc.wait()
        self._stdout.join(1)  # what it printed last is read before anyone asks for it
        self._stderr.join(1)
        self._results.close()
        self._tmp.cleanup()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def classify(why: str, code: Optional[int], wall_s: float, printed: str, errors: str) -> ChildFailed:
    """What stopped the child, as one line in each language."""
    if why == "time":
        return ChildFailed("time", f"the grading ran past its {wall_s:g} s limit and was stopped: a loop that never "
                           "ends (one that keeps passing __syncthreads() too), or far more work than the exercise needs",
                           f"评分超过了 {wall_s:g} 秒的上限，已被终止：是否有永不结束的循环（包括不断经过 __syncthreads() "
                           "的循环），或者做了远超练习所需的工作？", printed)
    if why == "protocol":
        return ChildFailed("protocol", "the grading process answered with something that is not the grader's data: "
                           "your code wrote to a place it may not write", "评分进程返回的不是评分器的数据：你的代码写到了"
                           "不允许写的地方", printed)
    if code is not None and code < 0:
        sig = -code
        if sig == signal.SIGXCPU:
            return ChildFailed("cpu", "the grading used up its CPU time and was stopped: a loop that never ends?",
                               "评分用完了它的 CPU 时间，已被终止：是否有永不结束的循环？", printed)
        if sig == signal.SIGXFSZ:
            return ChildFailed("file", "your code tried to write a file; a kernel writes only to its arrays",
                               "你的代码试图写文件；内核只应写它的数组", printed)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        hint_en, hint_zh = {
            "SIGABRT": ("abort() or a failed check in the C++ library", "abort() 或 C++ 库中的检查失败"),
            "SIGKILL": ("out of memory?", "内存耗尽？"),
            "SIGSEGV": ("a bad pointer or a stack overflow", "错误的指针或栈溢出"),
        }.get(name, ("", ""))
        return ChildFailed("signal", f"the grading process was stopped by {name}" + (f" ({hint_en})" if hint_en else ""),
                           f"评分进程被 {name} 终止" + (f"（{hint_zh}）" if hint_zh else ""), printed)
    if "MemoryError" in errors or "std::bad_alloc" in errors or "Cannot allocate memory" in errors:
        return ChildFailed("memory", f"the grading process ran out of its {MEMORY_BYTES >> 30} GiB of memory",
                           f"评分进程用完了它的 {MEMORY_BYTES >> 30} GiB 内存", printed)
    detail = _last_line(errors)
    return ChildFailed("exit", f"the grading process ended (exit status {code}) before it answered: a call to exit() "
                       "or _exit()? A kernel ends by returning" + (f"; it said: {detail}" if detail else ""),
                       f"评分进程在给出结果之前就结束了（退出状态 {code}）：是否调用了 exit() 或 _exit()？内核应当通过 return "
                       "结束" + (f"；它输出了：{detail}" if detail else ""), printed)


def course_root() -> str:
    """The folder that holds the gemm_course package (a child that runs the CPU backend imports it from there)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
