"""A process that has imported a grading child's modules once and forks a fresh child for every grading.

A grading child that runs a learner's compiled kernel starts Python and imports NumPy and the CPU backend
before it runs anything: about 0.2 CPU-seconds, paid again for every grading. The zygote pays it once per
grader process. It runs only the course's own code (it never receives a learner's code or data), and for
each request it forks a child that, before it runs anything else, takes the standard streams and the
result pipe the grader sent, starts a session of its own, moves into its temporary folder, replaces its
environment with the scrubbed one and sets its limits: what sandbox.Child gives a child it starts itself.
The grader then talks to that child exactly as to one it started: the same pipes, the same wall-clock
kill of its process group, the same exit status (reported by the zygote, the child's parent, which alone
can read it).

Where it cannot be used (not Linux, no pidfd, the zygote died or would not start), sandbox.Child starts
its child as before; nothing else changes.

    zygote = Zygote.shared("native", preamble, "gemm_course.exercises.native_child:main", environment)
    pid = zygote.spawn([stdin, stdout, stderr, result], env=..., cwd=..., limits=(cpu_s, memory_bytes, file_bytes),
                       result_fd_env=RESULT_FD_ENV)
    ForkedProcess(zygote, pid, ...).wait(timeout=5)        # what sandbox.Child does with it

The zygote's side (serve) is standard library only, apart from what the preamble imports.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Optional, Sequence

ZYGOTE_FD_ENV = "GEMM_COURSE_ZYGOTE_FD"
PACKET = 1 << 16  # one request or answer: a JSON object (the environment is the largest part)


class ZygoteUnavailable(OSError):
    """The zygote cannot fork a child now: the caller starts its child itself."""


def _usable() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


class ForkedProcess:
    """A child forked by the zygote, as much of subprocess.Popen as sandbox.Child uses: pid, stdin, stdout,
    stderr and wait(timeout) -> returncode (negative: the signal that ended it)."""

    def __init__(self, zygote: "Zygote", pid: int, stdin: int, stdout: int, stderr: int):
        self._zygote, self.pid = zygote, pid
        self.stdin = os.fdopen(stdin, "wb")
        self.stdout = os.fdopen(stdout, "rb")
        self.stderr = os.fdopen(stderr, "rb")
        self.returncode: Optional[int] = None

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid, timeout)
        return self.returncode


class Zygote:
    """One per grader process and kind of child (shared()); started at the first spawn."""

    _shared: dict[tuple[int, str], "Zygote"] = {}
    _never_started: set[tuple[int, str]] = set()  # kinds whose zygote died before its first child: not tried again
    _shared_lock = threading.Lock()

    def __init__(self, preamble: str, target: str, env: dict[str, str], key: tuple[int, str] = (0, "")):
        self._preamble, self._target, self._env, self._key = preamble, target, env, key
        self._spawned = 0
        self._lock = threading.Lock()       # one conversation at a time on the socket
        self._exits: dict[int, Optional[int]] = {}
        self._sock: Optional[socket.socket] = None
        self._proc: Optional[subprocess.Popen] = None
        self._dead = False

    @classmethod
    def shared(cls, kind: str, preamble: str, target: str, env: dict[str, str]) -> Optional["Zygote"]:
        """This process's zygote for `kind` (None where zygotes cannot work here)."""
        if not _usable():
            return None
        with cls._shared_lock:
            key = (os.getpid(), kind)
            if key in cls._never_started:
                return None
            zygote = cls._shared.get(key)
            if zygote is None or zygote._dead:
                zygote = cls._shared[key] = cls(preamble, target, env, key)
            return zygote

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = f"{self._preamble}\nfrom gemm_course.exercises.zygote import serve\nserve({self._target!r})"
        try:
            # Its own session: a Ctrl-C meant for the grader does not reach it; it ends when this process closes
            # the socket (serve returns at end of file).
            self._proc = subprocess.Popen([sys.executable, "-I", "-c", code], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          env={**self._env, ZYGOTE_FD_ENV: str(theirs.fileno())},
                                          pass_fds=(theirs.fileno(),), start_new_session=True, cwd="/")
        except OSError as err:
            ours.close()
            raise ZygoteUnavailable(str(err)) from None
        finally:
            theirs.close()
        self._sock = ours

    def _fail(self) -> ZygoteUnavailable:
        self._dead = True
        if not self._spawned:  # it never forked a child (its imports failed?): start children afresh from now on
            Zygote._never_started.add(self._key)
        if self._sock is not None:
            self._sock.close()
        if self._proc is not None:
            try:
                self._proc.kill()
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        return ZygoteUnavailable("the zygote stopped")

    def _receive(self, timeout: Optional[float]) -> Optional[dict]:
        """One answer from the zygote (None when none came within timeout); records exit statuses."""
        assert self._sock is not None
        if not select.select([self._sock], [], [], timeout)[0]:
            return None
        data = self._sock.recv(PACKET)
        if not data:
            raise self._fail()
        answer = json.loads(data)
        if "exited" in answer:
            self._exits[int(answer["exited"])] = answer.get("code")
        return answer

    def spawn(self, fds: Sequence[int], *, env: dict[str, str], cwd: str, limits: tuple[int, Optional[int], Optional[int]],
              result_fd_env: str) -> int:
        """Fork a child with fds (its stdin, stdout, stderr, result pipe) and return its pid."""
        with self._lock:
            if self._dead:
                raise ZygoteUnavailable("the zygote stopped")
            try:
                if self._sock is None:
                    self._start()
                request = {"env": env, "cwd": cwd, "limits": list(limits), "result_fd_env": result_fd_env}
                socket.send_fds(self._sock, [json.dumps(request).encode()], list(fds))
                deadline = time.monotonic() + 30  # the first spawn waits for the zygote's imports
                while True:
                    answer = self._receive(max(0.0, deadline - time.monotonic()))
                    if answer is None:
                        raise self._fail()
                    if "pid" in answer:
                        self._spawned += 1
                        return int(answer["pid"])
                    if "error" in answer:
                        raise ZygoteUnavailable(str(answer["error"]))
            except (OSError, ValueError) as err:
                if isinstance(err, ZygoteUnavailable):
                    raise
                raise self._fail() from None

    def exit_code(self, pid: int, timeout: Optional[float]) -> int:
        """The exit status of a child it forked, as subprocess gives it; subprocess.TimeoutExpired if the child
        has not ended within timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if pid in self._exits:
                    code = self._exits.pop(pid)
                    return -int(signal.SIGKILL) if code is None else int(code)
                if self._dead:
                    return self._orphan_exit(pid, deadline, timeout)
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    self._receive(min(0.5, left) if left is not None else 0.5)
                except ZygoteUnavailable:
                    continue
            if deadline is not None and time.monotonic() >= deadline and pid not in self._exits:
                raise subprocess.TimeoutExpired("grading child", timeout or 0)

    @staticmethod
    def _orphan_exit(pid: int, deadline: Optional[float], timeout: Optional[float]) -> int:
        """With the zygote gone its status is lost: wait for the child to disappear, then say it was killed."""
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return -int(signal.SIGKILL)
            except PermissionError:
                pass
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired("grading child", timeout or 0)
            time.sleep(0.05)


# --- the zygote's side ---------------------------------------------------------------------------------

def set_limits(cpu_s: int, memory_bytes: Optional[int], file_bytes: Optional[int]) -> None:
    """In a grading child, before it runs anything: CPU seconds, address space, file size (0: no file written), no
    core file."""
    import resource

    limits = [(resource.RLIMIT_CPU, cpu_s), (resource.RLIMIT_CORE, 0)]
    limits += [(resource.RLIMIT_AS, memory_bytes)] if memory_bytes is not None else []
    limits += [(resource.RLIMIT_FSIZE, file_bytes)] if file_bytes is not None else []
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):  # e.g. RLIMIT_AS on macOS: the wall-clock limit still holds
            pass


def _set_dumpable(value: int) -> None:
    import ctypes

    try:
        ctypes.CDLL(None).prctl(4, value, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


def _become_child(request: dict, fds: list[int], keep_closed: list[int]) -> None:
    """In the forked child, before anything else runs: what Popen and set_limits do for a child started afresh."""
    for fd in keep_closed:
        os.close(fd)
    _set_dumpable(1)  # as a process started afresh is (the zygote is not: see serve)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    for target, fd in zip((0, 1, 2), fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in request["env"].items()})
    os.environ[request["result_fd_env"]] = str(fds[3])
    set_limits(*request["limits"])


def _run_child(request: dict, fds: list[int], keep_closed: list[int], target: str) -> None:
    """The forked child's whole life; never returns."""
    code = 1
    try:
        _become_child(request, fds, keep_closed)
        module, _, name = target.rpartition(":")
        getattr(sys.modules[module], name)()
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # noqa: BLE001 - the child's last word goes to its stderr, as Python's would
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            import ctypes

            ctypes.CDLL(None).fflush(None)  # what a kernel printed with printf, as a normal exit would
        finally:
            os._exit(code)


def serve(target: str) -> None:
    """The zygote's loop: target ("module:function", already imported by the preamble) is what each forked
    child runs. Answers {"pid"} for each request and {"exited", "code"} when a child ends; returns when the
    grader closes the socket."""
    module, _, _ = target.rpartition(":")
    __import__(module)
    sock = socket.socket(fileno=int(os.environ.pop(ZYGOTE_FD_ENV)))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the grader's to handle
    # Not dumpable: no process of the same user (a grading child included) may attach to it with ptrace or
    # read its memory, so that nothing can change what the next child starts from.
    _set_dumpable(0)
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        ready = select.select([sock, *children], [], [])[0]
        for pidfd in [fd for fd in ready if fd in children]:
            pid = children.pop(pidfd)
            os.close(pidfd)
            _, status = os.waitpid(pid, 0)
            sock.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode())
        if sock not in ready:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(sock, PACKET, 4)
        except OSError:
            return
        if not message:
            return
        try:
            request = json.loads(message)
            if len(fds) != 4:
                raise ValueError(f"{len(fds)} descriptors")
            pid = os.fork()
        except (OSError, ValueError) as err:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"error": str(err)}).encode())
            continue
        if pid == 0:
            _run_child(request, fds, [sock.fileno(), *children], target)
        for fd in fds:
            os.close(fd)
        children[os.pidfd_open(pid)] = pid
        sock.send(json.dumps({"pid": pid}).encode())


__all__ = ["Zygote", "ZygoteUnavailable", "ForkedProcess", "serve", "set_limits", "ZYGOTE_FD_ENV"]
