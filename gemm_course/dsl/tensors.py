"""What Triton needs from an array, given by thin adapters over the course's CuPy and NumPy arrays.

Triton was written against PyTorch: its launcher takes any argument with ``data_ptr()`` and a ``dtype`` whose
name it reads from ``str(dtype)`` ("torch.float32" → "float32" → fp32), and its interpreter also copies each
tensor "to the host and back" through ``untyped_storage()``, ``new_empty(...).set_(...)`` and ``copy_()``.
PyTorch is not a dependency of this course, so two small classes answer those calls:

* :class:`CupyTensor`: a CuPy array on the GPU, for the compiled kernels' launches (pointer, dtype, shape, strides
  in elements, what Triton's TMA descriptors read);
* :class:`NumpyTensor`: a NumPy array, for the interpreter. The array already lives in host memory, so the
  interpreter's "copy to the host" is the array itself and its "copy back" has nothing to do: the kernel's
  stores land in the caller's array directly.

bfloat16 travels the course's way, as uint16 bit patterns (gemm_course.run.dtypes); the adapter names it
"bfloat16" for Triton, which then reads and writes the same bits.

Which device and which stream a compiled kernel launches on is also PyTorch's answer in Triton's own CUDA driver
(``torch.cuda.current_stream()``), and without PyTorch that driver does not start at all. :func:`use_cupy_driver`
installs a driver that asks CuPy instead: the kernels then run on CuPy's current stream, the stream the course's
timing harness (``bench.time_gpu``) records its CUDA events on, so the events bracket exactly the launches they
time whether PyTorch is installed or not.
"""
from __future__ import annotations

import functools
import importlib.util
from typing import Any, Optional

import numpy as np

TRITON_VERSION = "3.6.0"  # the version the kernels were written and compiled for (pyproject's `triton` extra)

# Element types by the name the course gives them (gemm_course.run.dtypes) → bytes per element.
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "uint16": 2}


def triton_available() -> bool:
    """Whether triton can be imported here (without importing it)."""
    return importlib.util.find_spec("triton") is not None


def require_triton(what: str = "Level 14") -> None:
    """Refuse, in one line ("English / 中文"), to go on without triton, naming what to install."""
    if not triton_available():
        raise RuntimeError(f"{what} needs triton, which is not installed here: pip install triton=={TRITON_VERSION} "
                           f"(or pip install -e .[triton]) / {what} 需要 triton，这里没有安装：pip install "
                           f"triton=={TRITON_VERSION}（或 pip install -e .[triton]）")


class TritonDtype:
    """A dtype as Triton reads one: its name through str() (Triton keeps what follows the last dot), its size in
    bytes (TMA descriptors), and whether it is a floating-point type (the "nan" padding option asks)."""

    def __init__(self, name: str) -> None:
        if name not in _ITEMSIZE:
            raise ValueError(f"no Triton element type for {name!r} / {name!r} 没有对应的 Triton 元素类型")
        self.name = name
        self.itemsize = _ITEMSIZE[name]
        self.is_floating_point = name.startswith(("float", "bfloat"))

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TritonDtype) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


class _ArrayTensor:
    """What both adapters share: the array, the element type Triton sees, shape and strides in elements."""

    def __init__(self, array: Any, dtype: str) -> None:
        if not array.flags.c_contiguous:  # the kernels take row-major matrices with unit column stride
            raise ValueError("Level 14's kernels take row-major (C-contiguous) matrices; pass X.copy() or "
                             "ascontiguousarray(X) / 第 14 级的内核只接受行主序（C 连续）矩阵；请传入 X.copy() 或 "
                             "ascontiguousarray(X)")
        self.array = array  # kept: the memory must outlive every launch that reads it
        self.dtype = TritonDtype(dtype)
        self.shape = tuple(array.shape)

    def stride(self, dim: Optional[int] = None) -> Any:
        strides = tuple(s // self.array.itemsize for s in self.array.strides)
        return strides if dim is None else strides[dim]

    def size(self, dim: Optional[int] = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return int(self.array.size)

    def element_size(self) -> int:
        return self.dtype.itemsize


class CupyTensor(_ArrayTensor):
    """A CuPy array as a compiled Triton kernel's argument: the device pointer and the element type."""

    def data_ptr(self) -> int:
        return int(self.array.data.ptr)


class _HostStorage:
    """The interpreter's "untyped storage" of a NumPy array: the array's own memory, already on the host."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def data_ptr(self) -> int:
        return int(self.array.ctypes.data)

    def cpu(self) -> "_HostStorage":
        return self  # already host memory: the interpreter works on the caller's array itself

    def copy_(self, other: "_HostStorage") -> "_HostStorage":
        # "Copy the host copy back to the device": both are this memory. A different buffer would mean the
        # interpreter wrote somewhere the caller cannot see, which must not pass silently.
        if other.data_ptr() != self.data_ptr():
            raise RuntimeError("the interpreter copied a NumPy array to another buffer (unexpected in this adapter)")
        return self


class NumpyTensor(_ArrayTensor):
    """A NumPy array as an argument of a kernel run by Triton's interpreter (TRITON_INTERPRET=1).

    The interpreter moves each tensor to the host with ``t.untyped_storage().cpu()`` and
    ``t.new_empty(0, device="cpu").set_(storage, offset, size, stride)``, runs the kernel on host pointers, then
    copies back with ``storage.copy_(host_storage)``. A NumPy array is host memory already: every step hands back
    the same memory, so loads read the caller's inputs and stores write the caller's output in place."""

    def data_ptr(self) -> int:
        return int(self.array.ctypes.data)

    def untyped_storage(self) -> _HostStorage:
        return _HostStorage(self.array)

    def storage_offset(self) -> int:
        return 0  # C-contiguous arrays of their own (checked in __init__): the pointer is the storage's start

    def new_empty(self, *_: Any, **__: Any) -> "NumpyTensor":
        return NumpyTensor(self.array, self.dtype.name)

    def set_(self, storage: _HostStorage, offset: int, size: Any, stride: Any) -> "NumpyTensor":
        if storage.data_ptr() != self.data_ptr() or offset != 0:
            raise RuntimeError("the interpreter asked for a view this adapter does not make")
        return self

    def copy_(self, other: Any) -> "NumpyTensor":
        return self


def element_type(X: Any) -> str:
    """The course's name for an array's element type: "bfloat16" for uint16 bit patterns (gemm_course.run.dtypes)."""
    from gemm_course.run.dtypes import dtype_name

    return dtype_name(X)


def as_triton_tensor(X: Any, dtype: Optional[str] = None) -> _ArrayTensor:
    """X (CuPy or NumPy) as a Triton kernel argument; dtype: the element type by name (default: element_type(X))."""
    name = dtype or element_type(X)
    return NumpyTensor(X, name) if isinstance(X, np.ndarray) else CupyTensor(X, name)


class _CupyBuffer:
    """Global-memory scratch Triton asks for at some launches (an allocator's answer: an object with data_ptr)."""

    def __init__(self, nbytes: int) -> None:
        import cupy

        self.memory = cupy.cuda.alloc(max(nbytes, 1))

    def data_ptr(self) -> int:
        return int(self.memory.ptr)


@functools.lru_cache(maxsize=1)
def use_cupy_driver() -> Any:
    """Make Triton launch through CuPy's device and stream (once per process); returns the driver.

    Triton's CUDA driver takes four answers from PyTorch: the compute capability of a device, the current device,
    setting it, and the current stream. This driver takes them from CuPy, keeps everything else of Triton's (its
    launcher, its TMA descriptor filling), and also gives Triton a CuPy allocator for the scratch memory some
    kernels ask for at launch. Installed for the whole process: the compiled kernels launch on
    ``cupy.cuda.get_current_stream()``, where ``bench.time_gpu`` records its events."""
    require_triton()
    import cupy
    import triton
    from triton.backends.nvidia.driver import CudaDriver, CudaLauncher, CudaUtils

    class CupyCudaDriver(CudaDriver):
        def __init__(self) -> None:  # CudaDriver.__init__ minus GPUDriver.__init__, which imports torch
            self.utils = CudaUtils()
            self.launcher_cls = CudaLauncher

        def get_device_capability(self, device: int) -> tuple[int, int]:
            major, minor = divmod(int(cupy.cuda.Device(device).compute_capability), 10)  # "90" → (9, 0)
            return major, minor

        def get_current_device(self) -> int:
            return int(cupy.cuda.Device().id)

        def set_current_device(self, device: int) -> None:
            cupy.cuda.Device(device).use()

        def get_current_stream(self, device: Optional[int] = None) -> int:
            return int(cupy.cuda.get_current_stream().ptr)

    driver = CupyCudaDriver()
    triton.runtime.driver.set_active(driver)
    triton.set_allocator(lambda size, alignment, stream: _CupyBuffer(size))
    return driver


def launch_stream() -> dict[str, Any]:
    """Where the compiled kernels launch (after use_cupy_driver): Triton's stream and CuPy's current stream, which
    must be the same handle for the CUDA events of bench.time_gpu to bracket the launches."""
    import cupy
    import triton

    triton_stream = int(triton.runtime.driver.active.get_current_stream(cupy.cuda.Device().id))
    cupy_stream = int(cupy.cuda.get_current_stream().ptr)
    return {"triton_stream": triton_stream, "cupy_stream": cupy_stream, "same": triton_stream == cupy_stream,
            "driver": type(triton.runtime.driver.active).__name__}


class ShapeOnlyTensor:
    """A matrix's shape and element type with no memory behind it: what compiling a kernel for a GPU target needs
    where there is no GPU (compile.py). Its pointer is 0, aligned as any allocation is; nothing is launched, so
    nothing ever reads it."""

    def __init__(self, shape: tuple[int, ...], dtype: str) -> None:
        self.shape = tuple(shape)
        self.dtype = TritonDtype(dtype)

    def data_ptr(self) -> int:
        return 0

    def stride(self, dim: Optional[int] = None) -> Any:
        strides = tuple(int(np.prod(self.shape[i + 1:], dtype=np.int64)) for i in range(len(self.shape)))
        return strides if dim is None else strides[dim]

    def element_size(self) -> int:
        return self.dtype.itemsize
