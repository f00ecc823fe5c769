"""A learner's kernel, compiled for the CPU backend here and run in a child process (sandbox.Child).

While a grading runs (`with native.session():`), cpu_backend.compile_kernel builds the library in this
process as always (the compiler does not run the kernel) but hands back a RemoteKernel: launching it
sends the arguments to the child (native_child.py), which loads the library, runs the grid and answers
with the arrays the kernel wrote, its access records, or the error it hit, as data. Nothing the kernel
does can reach the grader: no verdict object, no progress file, no exit code that counts. The data is
checked (dtype and size of every array, the kind of every error) before it is used.

Everything else stays as it was: a RemoteKernel is a CpuKernel to its callers (gemm(), warp_access's
profiles, the chapters' own launches), errors arrive as the same exception classes with the same
attributes, an AccessLog as an AccessLog.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from gemm_course.levels import Launch
from gemm_course.run import cpu_backend as cb

from .sandbox import Child, ChildFailed, course_root, scrubbed_environment
from .zygote import Zygote

_BUILTIN_ERRORS = {"TypeError": TypeError, "ValueError": ValueError, "OverflowError": OverflowError,
                   "MemoryError": MemoryError, "KeyError": KeyError}


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _rebuilt(error: dict) -> BaseException:
    """The exception the child reported, rebuilt here from its data (known classes only)."""
    name = str(error.get("type", ""))
    cls = getattr(cb, name, None)
    if isinstance(cls, type) and issubclass(cls, cb.CpuBackendError):
        err = cls.__new__(cls)
        cb.CpuBackendError.__init__(err, str(error.get("en", "")), str(error.get("zh", "")))
        for key, value in (error.get("attrs") or {}).items():
            if isinstance(key, str) and not key.startswith("_"):
                setattr(err, key, _tuples(value))
        return err
    return _BUILTIN_ERRORS.get(name, RuntimeError)(str(error.get("text", "")))


class ProtocolError(ChildFailed):
    def __init__(self, what: str, output: str = ""):
        super().__init__("protocol", f"the grading process sent data that does not fit ({what}): your code wrote "
                         "where it may not", f"评分进程发回的数据不对（{what}）：你的代码写到了不允许写的地方", output)


class KernelRefusedError(cb.CpuCompileError):
    """The CPU build holds what the grader does not run (see screen.indirect_calls)."""


ZYGOTE_ENV = "GEMM_COURSE_GRADE_ZYGOTE"


def _zygote(preamble: str) -> Optional[Zygote]:
    """The zygote that forks this process's grading children (zygote.py), unless $GEMM_COURSE_GRADE_ZYGOTE is 0:
    then each child starts Python itself, as where zygotes cannot work."""
    import os
    import tempfile

    if os.environ.get(ZYGOTE_ENV, "1").strip() == "0":
        return None
    return Zygote.shared("native", preamble, "gemm_course.exercises.native_child:main",
                         scrubbed_environment(tempfile.gettempdir()))


class Session:
    """One grading's child process, started at the first kernel loaded. block_order_seed: the order of
    blocks for launches that name none (0: CUDA's; the grader draws one per graded shape)."""

    def __init__(self, wall_s: Optional[float] = None):
        self.wall_s = wall_s
        self.block_order_seed = 0
        self._child: Optional[Child] = None
        # A grading builds the same library for every shape and profile; the child loads it once, and the
        # library's code is screened once (indirect_calls runs objdump over it).
        self._loaded: dict[tuple[str, str, str, bool], RemoteKernel] = {}

    @property
    def child(self) -> Child:
        if self._child is None:
            # The packages gemm_course and gemm_course.exercises stand in as bare namespaces, so that their
            # __init__ (the notebooks' facade: plotting, timing, widgets) is not imported: the child needs the
            # CPU backend alone, and starts in about half the time (0.25 s against 0.45 s, measured).
            preamble = (f"import sys, types, os; root = {course_root()!r}; sys.path.insert(0, root)\n"
                        "for name in ('gemm_course', 'gemm_course.exercises'):\n"
                        "    package = types.ModuleType(name)\n"
                        "    package.__path__ = [os.path.join(root, *name.split('.'))]\n"
                        "    sys.modules[name] = package\n"
                        "from gemm_course.exercises.native_child import main")
            self._child = Child([sys.executable, "-I", "-c", preamble + "; main()"], wall_s=self.wall_s,
                                zygote=_zygote(preamble))
        return self._child

    @property
    def printed(self) -> str:
        """What the kernels printed so far (capped)."""
        return self._child.printed if self._child else ""

    def load(self, path: Path, kernel: str, source_name: str, race_check: bool) -> "RemoteKernel":
        key = (str(path), kernel, source_name, bool(race_check))
        if key not in self._loaded:
            self._loaded[key] = self._load(path, kernel, source_name, race_check)
        return self._loaded[key]

    def _load(self, path: Path, kernel: str, source_name: str, race_check: bool) -> "RemoteKernel":
        from .screen import indirect_calls

        where = indirect_calls(path, source_name)
        if where:
            en = (f"{where}: the CPU build calls through a pointer here (a function pointer or a virtual call); "
                  "a graded kernel calls its functions by name")
            zh = f"{where}：CPU 编译结果在这里通过指针调用（函数指针或虚函数）；被评分的内核应当按名字调用函数"
            raise KernelRefusedError(en, zh, log=f"{en} / {zh}")
        answer, _ = self.child.call({"op": "load", "path": str(path), "kernel": kernel, "source_name": source_name,
                                     "race_check": bool(race_check)})
        if "error" in answer:
            raise _rebuilt(answer["error"])
        parameters = answer.get("parameters")
        if not isinstance(parameters, list) or not all(isinstance(p, str) for p in parameters):
            raise ProtocolError("parameters", self.printed)
        return RemoteKernel(self, int(answer["id"]), path, kernel, source_name, race_check, tuple(parameters))

    def close(self) -> None:
        if self._child is not None:
            self._child.close()


class RemoteKernel(cb.CpuKernel):
    """A CpuKernel whose library is loaded and run in the session's child process."""

    def __init__(self, session: Session, kernel_id: int, path: Path, kernel: str, source_name: str,
                 race_check: bool, parameters: tuple[str, ...]):
        self.session, self.kernel_id = session, kernel_id
        self.path, self.kernel, self.source_name, self.race_check = path, kernel, source_name, race_check
        self.parameters = parameters

    def code_offset(self, pc: int) -> int:
        return int(pc)  # the child sends library offsets already

    def launch(self, launch: Launch, args: Sequence[Any], *, names: Optional[Sequence[str]] = None,
               timeout_s: Optional[float] = None, profile: bool = False,
               profile_blocks: Optional[Sequence[tuple[int, int, int]]] = None,
               block_order_seed: int = 0) -> Optional[cb.AccessLog]:
        specs: list[dict] = []
        blobs: list[bytes] = []
        for arg in args:
            if isinstance(arg, np.ndarray):
                specs.append({"array": len(blobs), "dtype": arg.dtype.str, "shape": list(arg.shape)})
                blobs.append(np.ascontiguousarray(arg).tobytes())
            elif arg is None:
                specs.append({"none": True})
            else:
                specs.append({"scalar": arg.item() if isinstance(arg, np.generic) else arg})
        request = {"op": "launch", "id": self.kernel_id, "grid": list(launch.grid), "block": list(launch.block),
                   "dynamic_shared_bytes": int(launch.dynamic_shared_bytes), "args": specs,
                   "names": list(names) if names else None,
                   "timeout_s": cb.default_timeout() if timeout_s is None else float(timeout_s),
                   "profile": bool(profile),
                   "profile_blocks": [list(map(int, b)) for b in profile_blocks] if profile_blocks else None,
                   "block_order_seed": int(block_order_seed or self.session.block_order_seed)}
        answer, out = self.session.child.call(request, blobs)
        if "error" in answer:
            raise _rebuilt(answer["error"])
        outputs = answer.get("outputs")
        printed = self.session.printed
        if not isinstance(outputs, list) or len(out) < len(outputs):
            raise ProtocolError("outputs", printed)
        for blob, index in zip(out, outputs):
            target = args[index] if isinstance(index, int) and 0 <= index < len(args) else None
            if not isinstance(target, np.ndarray) or len(blob) != target.nbytes or not target.flags.writeable:
                raise ProtocolError("an output array", printed)
            target[...] = np.frombuffer(blob, dtype=target.dtype).reshape(target.shape)
        log = answer.get("log")
        if log is None:
            return None
        if len(out) != len(outputs) + 1 or len(out[-1]) % cb.ACCESS_RECORD.itemsize:
            raise ProtocolError("the access records", printed)
        records = np.frombuffer(out[-1], dtype=cb.ACCESS_RECORD).copy()
        return cb.AccessLog(self, records, launch, {k: tuple(v) for k, v in log["arrays"].items()},
                            truncated=bool(log["truncated"]), blocks=[tuple(b) for b in log["blocks"]],
                            intervals=[int(n) for n in log["intervals"]],
                            shapes={k: tuple(v) for k, v in log["shapes"].items()})


@contextlib.contextmanager
def session(wall_s: Optional[float] = None) -> Iterator[Session]:
    """Within it, every kernel compiled for the CPU backend runs in one child process (see the module)."""
    current = Session(wall_s)
    token = cb.kernel_loader.set(current.load)
    try:
        yield current
    finally:
        cb.kernel_loader.reset(token)
        current.close()


def active() -> Optional[Session]:
    """The session of the grading in progress, if any."""
    loader = cb.kernel_loader.get()
    return getattr(loader, "__self__", None)
