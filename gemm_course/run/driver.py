"""The CUDA driver through ctypes: the calls CuPy does not wrap (tensor maps, cluster occupancy), and a kernel
launch whose arguments are packed once.

CuPy's RawKernel call converts every argument on every launch; on the H200 machine the course was measured
on, an empty kernel with six arguments took about 7.5 µs of host time that way against about 4.4 µs for the
driver call alone with its arguments already packed. A call that repeats with the same arrays (a timing loop,
a layer run again) has nothing new to convert, so `PackedLaunch` packs the arguments once, as the driver
reads them (an array as its address, a number as its C type), and each `start()` is one driver call on the
current stream. The driver library is the one CuPy has already loaded: no extra package.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any, Optional, Sequence

import numpy as np

SHARED_OPT_IN_BYTES = 48 * 1024  # above this a kernel must be allowed its dynamic shared memory first

# NumPy scalar types a kernel argument may have, and the C type the driver reads for each.
_C_TYPES = {np.int32: ctypes.c_int32, np.uint32: ctypes.c_uint32, np.int64: ctypes.c_int64,
            np.uint64: ctypes.c_uint64, np.float32: ctypes.c_float, np.float64: ctypes.c_double}


@functools.lru_cache(maxsize=1)
def driver() -> Any:
    """The CUDA driver library (CuPy has loaded it already), for the calls CuPy does not wrap."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        raise RuntimeError("TMA tensor maps, cluster occupancy and packed launches need the CUDA driver "
                           f"(libcuda.so.1), which is not loadable here: {err}") from None
    for name in ("cuTensorMapEncodeTiled", "cuOccupancyMaxActiveClusters", "cuLaunchKernel", "cuGetErrorName"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def allow_shared(kernel: Any, shared_bytes: int) -> None:
    """Allow a compiled kernel its dynamic shared memory where a launch (or an occupancy query) needs that first:
    above 48 KB. Callers do it before every launch: one attribute call, and another setting sharing the kernel
    may have set a different limit since."""
    if shared_bytes > SHARED_OPT_IN_BYTES:
        kernel.max_dynamic_shared_size_bytes = shared_bytes


def error_name(status: int) -> str:
    """The driver's name for a CUresult (CUDA_ERROR_…), or the number where it has none."""
    name = ctypes.c_char_p()
    if driver().cuGetErrorName(status, ctypes.byref(name)) != 0 or not name.value:
        return f"CUresult {status}"
    return name.value.decode()


def is_gpu_array(value: Any) -> bool:
    """A CuPy array (its .data is device memory with an address; a NumPy array's or scalar's is a memoryview)."""
    return hasattr(getattr(value, "data", None), "ptr")


class LaunchEpoch:
    """A kernel argument that is a new number at every launch: the epoch with which the split-K and stream-K
    fixups tag their counters between blocks (tma.cuh, arrive_epoch). A count that an earlier launch left in
    them, finished or cut short, then reads as zero, so no launch depends on another having ended cleanly.
    next() counts 1, 2, … 2^24 - 1 and starts at 1 again (the epoch shares a 32-bit counter with 8 bits of
    arrivals); a packed launch and a CuPy call alike take next() at every start (launch_values)."""

    LIMIT = 1 << 24

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> np.uint32:
        with self._lock:
            self._last = self._last % (self.LIMIT - 1) + 1
            return np.uint32(self._last)

    @property
    def last(self) -> int:
        """The number the latest launch took (0 before the first)."""
        return self._last


def launch_values(args: Sequence[Any]) -> tuple:
    """The arguments of one launch as CuPy's kernel call takes them: each LaunchEpoch's next number."""
    return tuple(a.next() if isinstance(a, LaunchEpoch) else a for a in args)


def _packed(value: Any) -> ctypes._SimpleCData:
    """One kernel argument as the driver reads it: a GPU array as its address, a NumPy scalar as its C type
    (a LaunchEpoch: an unsigned int that start() sets)."""
    if isinstance(value, LaunchEpoch):
        return ctypes.c_uint32(0)
    if is_gpu_array(value):
        return ctypes.c_uint64(value.data.ptr)
    c_type = _C_TYPES.get(type(value))
    if c_type is None:
        raise TypeError(f"a packed launch takes CuPy arrays and NumPy scalars "
                        f"({', '.join(t.__name__ for t in _C_TYPES)}); got {type(value).__name__}")
    return c_type(value.item())


class PackedLaunch:
    """A compiled kernel with its geometry and arguments packed for the driver: start() launches it.

    It keeps the objects in keep_alive (tensor maps and scratch arrays of its own, or the caller's arrays
    where the caller wants that): the driver reads addresses only, so whatever they point to must outlive
    every launch. fresh: argument positions whose array each start() supplies (scratch that must be new
    per call, such as split-K's slices); their packed addresses change under a lock, and so does each
    LaunchEpoch argument's number, a new one at every start()."""

    def __init__(self, kernel: Any, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
                 args: Sequence[Any], keep_alive: Sequence[Any] = (), fresh: Sequence[int] = ()) -> None:
        import cupy

        if len(grid) != 3 or len(block) != 3:
            raise ValueError(f"grid and block are (x, y, z) triples; got grid {tuple(grid)}, block {tuple(block)}")
        self._current_stream = cupy.cuda.get_current_stream
        self._kernel = kernel  # keeps its module loaded, and sets its shared-memory limit
        self._values = [_packed(a) for a in args]
        self._pointers = (ctypes.c_void_p * len(self._values))(*(ctypes.addressof(v) for v in self._values))
        self._shared = int(shared_bytes)
        # cuLaunchKernel(function, grid x y z, block x y z, shared bytes, stream, parameters, extra)
        self._head = (ctypes.c_void_p(int(kernel.kernel.ptr)), *(ctypes.c_uint(int(g)) for g in grid),
                      *(ctypes.c_uint(int(b)) for b in block), ctypes.c_uint(self._shared))
        self._keep_alive = tuple(keep_alive)
        self._fresh = tuple(fresh)
        self._epochs = tuple((i, a) for i, a in enumerate(args) if isinstance(a, LaunchEpoch))
        self._lock = threading.Lock() if fresh or self._epochs else None
        self._launch = driver().cuLaunchKernel

    def start(self, *fresh_arrays: Any) -> None:
        """Launch the kernel once on the current stream (fresh_arrays: one per position given as fresh)."""
        allow_shared(self._kernel, self._shared)
        stream = ctypes.c_void_p(self._current_stream().ptr)
        if self._lock is None:
            status = self._launch(*self._head, stream, self._pointers, None)
        else:
            if len(fresh_arrays) != len(self._fresh):
                raise TypeError(f"this launch takes {len(self._fresh)} fresh array(s), got {len(fresh_arrays)}")
            with self._lock:  # the driver copies the arguments during the call: patch, launch, then release
                for position, array in zip(self._fresh, fresh_arrays):
                    self._values[position].value = array.data.ptr
                for position, epoch in self._epochs:
                    self._values[position].value = int(epoch.next())
                status = self._launch(*self._head, stream, self._pointers, None)
        if status != 0:
            raise RuntimeError(f"the kernel launch failed: {error_name(status)} (grid "
                               f"{tuple(h.value for h in self._head[1:4])}, block "
                               f"{tuple(h.value for h in self._head[4:7])}, {self._shared} B of shared memory)")


def packed_launch(kernel: Any, grid: Sequence[int], block: Sequence[int], shared_bytes: int, args: Sequence[Any],
                  callers: Sequence[Any] = (), fresh: Sequence[int] = (), keep: Sequence[Any] = ()) -> PackedLaunch:
    """A PackedLaunch that keeps every array argument alive except the caller's own (callers: compared by
    identity) and the fresh ones: a cache of launches must not hold its callers' memory. keep: more arrays
    the kernel reads through an argument (e.g. the memory a tensor map describes)."""
    theirs = {id(x) for x in callers if x is not None}
    own = [a for i, a in enumerate(args) if i not in fresh and is_gpu_array(a) and id(a) not in theirs]
    return PackedLaunch(kernel, grid, block, shared_bytes, args, keep_alive=own + list(keep), fresh=fresh)


def remember(cache: dict, lock: threading.Lock, key: tuple, entry: Any, size: int) -> None:
    """Keep entry under key in a cache of repeated calls' launches, at most size of them (the oldest dropped
    first): what a repeated call finds with cache.get(key), which needs no lock."""
    with lock:
        cache[key] = entry
        while len(cache) > size:
            del cache[next(iter(cache))]


def key_of_array(x: Optional[Any]) -> Optional[tuple]:
    """What a packed launch depends on of a GPU array: its type, address, shape, dtype and C-contiguity (with
    the shape, that fixes the strides wherever they matter). None for no array."""
    if x is None:
        return None
    return (type(x), x.data.ptr, x.shape, x.dtype, x.flags.c_contiguous)
