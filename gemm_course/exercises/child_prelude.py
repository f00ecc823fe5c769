"""What every grading child runs first: the framing of its messages and giving up the filesystem.

Standard library only, no import of the course: a child that must not see the course's package (a
Python answer) is sent this file's text (PRELUDE_PATH) ahead of its own; the grader and the CPU-backend
child import it as a module.

    write_message(stream, header, blobs)   one framed message: a JSON header, then binary blobs
    read_message(read)                     the next one, checked for size and form
    restrict_filesystem(readable)          from now on this process may write no file, and, where
                                           `readable` is given, read only below those paths (Linux's
                                           Landlock; a no-op where the kernel lacks it)
"""
import ctypes
import json
import os
import struct
import sys

RESULT_FD_ENV = "GEMM_COURSE_RESULT_FD"
MESSAGE_CAP = 256 << 20            # one message: outputs and access logs
_HEADER = struct.Struct(">I")      # length of a message's JSON header
_BLOB = struct.Struct(">Q")        # length of each blob after it


def write_message(stream, header, blobs=()):
    """One message: a JSON header (with "blobs": their count), then each blob with its length."""
    head = json.dumps(dict(header, blobs=len(blobs))).encode()
    stream.write(_HEADER.pack(len(head)) + head)
    for blob in blobs:
        view = memoryview(blob).cast("B")
        stream.write(_BLOB.pack(view.nbytes))
        stream.write(view)
    stream.flush()


def _read_exactly(read, n):
    parts, left = [], n
    while left:
        chunk = read(left)
        if not chunk:
            raise EOFError
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_message(read, cap=MESSAGE_CAP):
    """The next message from read(n) -> bytes; EOFError at the end, ValueError for a malformed one."""
    (size,) = _HEADER.unpack(_read_exactly(read, _HEADER.size))
    if size > cap:
        raise ValueError("a message header of %d bytes" % size)
    header = json.loads(_read_exactly(read, size))
    if not isinstance(header, dict) or not isinstance(header.get("blobs"), int) or not 0 <= header["blobs"] < 4096:
        raise ValueError("a message without its blob count")
    blobs, total = [], 0
    for _ in range(header.pop("blobs")):
        (n,) = _BLOB.unpack(_read_exactly(read, _BLOB.size))
        total += n
        if total > cap:
            raise ValueError("a message over %d bytes" % cap)
        blobs.append(_read_exactly(read, n))
    return header, blobs


def result_stream():
    """The pipe this child answers on (its number is in RESULT_FD_ENV)."""
    return os.fdopen(int(os.environ.pop(RESULT_FD_ENV)), "wb")


# Landlock (Linux 5.13+): a process limits its own access to files, for good (its children too).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446   # the same numbers on x86-64 and arm64
_PR_SET_NO_NEW_PRIVS = 38
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_WRITES_V1 = sum(1 << b for b in range(4, 13))   # remove dir/file, make char/dir/reg/sock/fifo/block/sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14               # ABI 2 and 3
_SCOPE_SIGNAL = 1 << 1                             # ABI 6: no signals to processes outside the sandbox


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def restrict_filesystem(readable=None):
    """Give up writing any file (and, with `readable`, reading outside those paths). Returns the Landlock
    ABI version in force, or 0 where the kernel has none (then the file-size limit of 0 bytes that the
    grader sets still stops any write, and the screens refuse code that opens files)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        abi = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    if abi < 1:
        return 0
    writes = _WRITE_FILE | _WRITES_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    reads = _EXECUTE | _READ_FILE | _READ_DIR
    handled = writes | (reads if readable is not None else 0)
    attr = _RulesetAttr(handled, 0, _SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    try:
        for path in readable or ():
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights = reads if os.path.isdir(path) else (_EXECUTE | _READ_FILE)
                rule = _PathBeneath(rights, fd)
                libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return 0
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return 0
    finally:
        os.close(ruleset)
    return abi
