"""The zygote that forks grading children (gemm_course/exercises/zygote.py): a forked child is set up as one
started afresh (its own session, the scrubbed environment, a temporary folder, the limits), it is not the
grader's process, and a zygote that is gone costs a grading nothing but the time of a fresh start. No GPU."""
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from gemm_course import exercises as ex
from gemm_course.exercises import native, sandbox, zygote

pytestmark = pytest.mark.skipif(not zygote._usable(), reason="zygotes need Linux with pidfd_open")


def _proc_status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _running_child() -> tuple[native.Session, sandbox.Child]:
    session = native.Session()
    return session, session.child


PROBE = """
import os, resource, sys
from gemm_course.exercises.child_prelude import read_message, result_stream, write_message
def main():
    read_message(sys.stdin.buffer.read)
    limits = {name: resource.getrlimit(getattr(resource, name))[0]
              for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_CORE")}
    write_message(result_stream(), {"env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid(),
                                    "sid": os.getsid(0), "ppid": os.getppid(), "limits": limits,
                                    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd"))})
"""


def test_a_forked_child_is_set_up_as_one_started_afresh():
    """What the child sees of itself: its session, environment, folder, limits and open files."""
    root = sandbox.course_root()
    preamble = (f"import sys, types, os; sys.path.insert(0, {root!r})\n"
                "for name in ('gemm_course', 'gemm_course.exercises'):\n"
                "    package = types.ModuleType(name)\n"
                f"    package.__path__ = [os.path.join({root!r}, *name.split('.'))]\n"
                "    sys.modules[name] = package\n"
                f"probe = types.ModuleType('probe'); exec({PROBE!r}, probe.__dict__); sys.modules['probe'] = probe")
    maker = zygote.Zygote.shared("probe", preamble, "probe:main", sandbox.scrubbed_environment("/"))
    with sandbox.Child(["false"], wall_s=30, zygote=maker) as child:
        assert isinstance(child._proc, zygote.ForkedProcess)
        seen, _ = child.call({"op": "probe"})
    home = seen["env"]["HOME"]
    assert seen["pid"] == child._proc.pid != os.getpid() and seen["ppid"] not in (1, os.getpid())
    assert seen["sid"] == seen["pid"]  # a session of its own: the grader kills its whole process group
    assert os.path.basename(home).startswith("gemm_course_grading_") and seen["cwd"] == home
    assert seen["env"] == sandbox.scrubbed_environment(home)  # the result pipe's variable is taken as it is opened
    assert seen["limits"] == {"RLIMIT_CPU": 35, "RLIMIT_AS": sandbox.MEMORY_BYTES, "RLIMIT_FSIZE": 0, "RLIMIT_CORE": 0}
    # stdin, stdout, stderr, the result pipe and the one listdir opens: nothing of the zygote's or of other children
    assert len(seen["fds"]) == 5, seen["fds"]
    assert child._proc.wait(timeout=10) == 0


def test_a_grading_child_comes_from_the_zygote():
    session, child = _running_child()
    try:
        assert isinstance(child._proc, zygote.ForkedProcess)
        assert int(_proc_status(child._proc.pid)["PPid"]) not in (1, os.getpid())
    finally:
        session.close()
    assert child._proc.wait(timeout=10) == 0  # it ends when the grader closes its input, and the zygote says so


def test_what_a_forked_child_computes_and_prints_comes_back():
    e = ex.get_exercise("02_tiled_kernel")
    assert ex.grade(e.id, e.solution).status == "solved"
    assert ex.grade(e.id, e.starter).failed_step == "correct"
    printing = (Path(__file__).parent / "redteam" / "02_tiled_kernel" / "prints_while_right.cu").read_text()
    verdict = ex.grade(e.id, printing)  # printf's buffer is flushed when the forked child ends, as at a normal exit
    assert verdict.status == "solved" and "C[0][0] = " in verdict.printed, str(verdict)


def test_a_zygote_that_was_killed_is_replaced_and_the_grading_still_runs():
    e = ex.get_exercise("02_missing_barrier")
    session, child = _running_child()
    first = child._proc
    session.close()
    zygote_pid = int(_proc_status(first.pid)["PPid"]) if os.path.exists(f"/proc/{first.pid}") else None
    if zygote_pid is None:  # the child ended already: find the zygote through a new one
        session, child = _running_child()
        zygote_pid = int(_proc_status(child._proc.pid)["PPid"])
        session.close()
    os.kill(zygote_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{zygote_pid}") and "Z" not in _proc_status(zygote_pid).get("State", "Z"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert ex.grade(e.id, e.solution).status == "solved"
    assert ex.grade(e.id, e.starter).failed_step == "race"


def test_without_the_zygote_each_child_starts_python_itself(monkeypatch):
    monkeypatch.setenv(native.ZYGOTE_ENV, "0")
    session, child = _running_child()
    try:
        assert not isinstance(child._proc, zygote.ForkedProcess)
        assert int(_proc_status(child._proc.pid)["PPid"]) == os.getpid()
    finally:
        session.close()
    e = ex.get_exercise("02_missing_barrier")
    assert ex.grade(e.id, e.starter).failed_step == "race"


def test_a_child_stopped_by_a_signal_reports_it_through_the_zygote():
    session, child = _running_child()
    try:
        pid = child._proc.pid
        os.kill(pid, signal.SIGSEGV)
        with pytest.raises(sandbox.ChildFailed) as stopped:
            child.call({"op": "load", "path": "/nonexistent", "kernel": "k", "source_name": "k.cu",
                        "race_check": True})
        assert stopped.value.kind == "signal" and "SIGSEGV" in stopped.value.en
    finally:
        session.close()


def test_a_zygote_that_cannot_start_leaves_children_to_start_afresh():
    """A zygote whose imports fail dies before its first child: that child is started with Popen, and that kind of
    zygote is not tried again in this process."""
    import subprocess

    broken = zygote.Zygote.shared("broken-for-a-test", "raise SystemExit(1)", "nowhere:main",
                                  sandbox.scrubbed_environment("/"))
    with sandbox.Child([sys.executable, "-I", "-c", "import sys; sys.stdin.read()"], wall_s=30, zygote=broken) as child:
        assert isinstance(child._proc, subprocess.Popen)
    assert zygote.Zygote.shared("broken-for-a-test", "", "nowhere:main", {}) is None
