"""Level 0: the CUDA programming model, by running it. Launch any CUDA C kernel from Python.

    from gemm_course.display import primer
    a, b = np.arange(1000, dtype=np.float32), np.ones(1000, dtype=np.float32)
    c = np.zeros_like(a)
    primer.run_kernel(primer.VECTOR_ADD, "vector_add", grid=4, block=256, args=[a, b, c, 1000])
    # c == a + b now: on a GPU through CuPy, without one on the CPU backend (cpu_backend)

The kernels of notebooks/00_cuda_basics.ipynb live here as CUDA C strings, so that the notebook,
the tests and a reader's own experiments launch the very same text.
"""
from __future__ import annotations

import html
import re
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from gemm_course import device
from gemm_course.levels import ceil_div  # noqa: F401  (the grid size: blocks of b threads that cover a elements)

SOURCE_NAME = "primer.cu"
"""The file name error messages use for a kernel launched through run_kernel (e.g. primer.cu:12)."""

# One thread adds one pair of elements. Thread i of the whole grid handles element i.
VECTOR_ADD = r"""__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // which element is mine?
                                                    // 我负责哪个元素？
    if (i < n)                                      // the last block may hang over the end
                                                    // 最后一个线程块可能超出数组末尾
        c[i] = a[i] + b[i];
}
"""

# Each thread writes down who it is, so Python can see which thread handled which element.
WHO_AM_I = r"""__global__ void who_am_i(int* block_x, int* block_y, int* thread_x, int* thread_y,
                         int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {
        int e = row * cols + col;                   // row-major, as NumPy stores it
                                                    // 行优先，与 NumPy 的存放方式相同
        block_x[e] = blockIdx.x;  block_y[e] = blockIdx.y;
        thread_x[e] = threadIdx.x;  thread_y[e] = threadIdx.y;
    }
}
"""

# Level 1's idea in its plainest form: one thread computes one element of C = A · B.
NAIVE_GEMM = r"""__global__ void gemm_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;

    float acc = 0.0f;                               // a local variable: lives in a register
                                                    // 局部变量：放在寄存器里
    for (int k = 0; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];     // A, B, C: global memory
                                                    // A、B、C：都在全局内存中
    C[row * N + col] = acc;
}
"""

# Reverse each block's slice of x in place, through shared memory. Needs blockDim.x <= 256.
REVERSE = r"""__global__ void reverse_each_block(float* x)
{
    __shared__ float tile[256];                     // one copy per block, seen by all its threads
                                                    // 每个线程块一份，块内所有线程都能看到
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    tile[t] = x[i];                                 // every thread writes one word ...
                                                    // 每个线程写一个字……
    __syncthreads();                                // ... and waits until all have written
                                                    // ……并等待所有线程都写完
    x[i] = tile[blockDim.x - 1 - t];                // then reads a word another thread wrote
                                                    // 然后读取另一个线程写入的字
}
"""

# The same kernel without its barrier: a thread may read tile[...] before its owner has written it.
REVERSE_NO_BARRIER = REVERSE.replace(
    "    __syncthreads();                                // ... and waits until all have written\n"
    "                                                    // ……并等待所有线程都写完\n",
    "    // __syncthreads();  (removed)\n"
    "    // __syncthreads();（已删除）\n")

# Every C++ feature the course's kernels use, in one small kernel: |row|² of each row of 16 floats.
FEATURES = r"""__device__ float dot4(float4 a, float4 b)          // __device__: called by kernels, not by the host
                                                   // __device__：由内核调用，不由主机调用
{
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

template <int THREADS>                              // a constant the compiler knows: row_norms<64>
                                                    // 编译器已知的常量：row_norms<64>
__global__ void __launch_bounds__(THREADS)          // promise: at most THREADS threads per block
                                                    // 承诺：每个线程块最多 THREADS 个线程
row_norms(const float* __restrict__ x, float* __restrict__ out, int rows)  // no aliasing
                                                                           // 指针之间没有别名
{
    int r = blockIdx.x * THREADS + threadIdx.x;
    if (r >= rows) return;
    const float4* row = reinterpret_cast<const float4*>(x + r * 16);  // 16-byte loads
                                                                      // 16 字节的加载
    float acc = 0.0f;
    #pragma unroll                                  // 4 copies of the body, no loop left
                                                    // 循环体展开成 4 份，不再有循环
    for (int j = 0; j < 4; ++j)
        acc += dot4(row[j], row[j]);
    out[r] = acc;
}
"""


class dim3(NamedTuple):
    """CUDA's dim3 in Python: gridDim, blockDim, blockIdx and threadIdx have .x, .y and .z."""
    x: int
    y: int = 1
    z: int = 1


def _dim3(v: int | Sequence[int]) -> dim3:
    """(x, y, z) from an int or a sequence of up to three ints; missing ones are 1, as in dim3."""
    t = (int(v),) if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)
    if not 1 <= len(t) <= 3 or min(t) < 1:
        raise ValueError(f"grid and block are 1 to 3 positive sizes (x, y, z); got {v!r}")
    return dim3(*t)


def _scalar(arg: Any) -> Any:
    """Python int → int32 and float → float32, the C types `int` and `float` the kernels take."""
    if isinstance(arg, (bool, np.bool_)):
        return np.bool_(arg)
    if isinstance(arg, int):
        return np.int32(arg)
    if isinstance(arg, float):
        return np.float32(arg)
    return arg


def parameter_names(source: str, name: str) -> Optional[list[str]]:
    """The parameter names of kernel `name` (template arguments ignored) in `source`, e.g.
    ["a", "b", "c", "n"] for vector_add; None when the signature cannot be found."""
    base = re.escape(name.split("<")[0].strip())
    found = re.search(rf"\b{base}\s*\(([^)]*)\)", source)
    if not found:
        return None
    names = [re.findall(r"\w+", p)[-1] for p in found.group(1).split(",") if re.findall(r"\w+", p)]
    return names or None


def default_backend() -> str:
    """Where run_kernel runs by default: "cuda" (a GPU, through CuPy) or "cpu" (cpu_backend)."""
    return "cuda" if device.gpu_available() else "cpu"


def backend_note() -> Any:
    """Where this page's kernels run, as one line in the language in force (Jupyter, Colab, the book)."""
    from gemm_course.bilingual.text import note

    if default_backend() == "cuda":
        name = html.escape(device.gpu_name() or "GPU")
        return note(f"The kernels on this page run on this machine's GPU, <b>{name}</b>, through CuPy.",
                    f"本页的内核通过 CuPy 在本机的 GPU（<b>{name}</b>）上运行。")
    return note("No GPU here: the kernels on this page run on the course's <b>CPU backend</b> (the same CUDA C "
                "source, compiled as C++, one fiber per CUDA thread: a light thread of execution that the CPU "
                "switches between in turn).",
                "这里没有 GPU：本页的内核在课程的 <b>CPU 后端</b>上运行（同一份 CUDA C 源码，按 C++ 编译，"
                "每个 CUDA 线程一个纤程，即由 CPU 轮流切换执行的轻量执行流）。")


def run_kernel(source: str, name: str, grid: int | Sequence[int], block: int | Sequence[int],
               args: Sequence[Any], *, backend: Optional[str] = None, shared_bytes: int = 0) -> str:
    """Compile the kernel `name` of a CUDA C `source` and launch it as name<<<grid, block>>>(args...).

    name: the kernel's name, or a template instance such as "row_norms<64>" (as the level
    registry passes them). grid, block: an int (x) or up to three sizes (x, y, z). args: NumPy
    arrays for pointers, numbers for scalars (a Python int is passed as a C int, a float as a
    C float). The arrays are updated in place with what the kernel wrote, as if the kernel ran on
    them. shared_bytes: dynamic shared memory per block.

    backend: "cuda" (CuPy RawModule; arrays are copied to the GPU and back), "cpu" (the CPU
    backend: the same source compiled as C++, one thread at a time, with out-of-bounds accesses,
    broken barriers and shared-memory races reported as cpu_backend errors), or None: "cuda" when
    a GPU is visible, else "cpu". Returns the backend used.
    """
    chosen = backend or default_backend()
    grid3, block3 = _dim3(grid), _dim3(block)
    values = [_scalar(a) for a in args]
    if chosen == "cpu":
        from gemm_course.run import cpu_backend
        from gemm_course.levels import Launch

        cpu_backend.launch_kernel(source, name, Launch(grid3, block3, shared_bytes), values,
                                  source_name=SOURCE_NAME, names=parameter_names(source, name))
        return chosen
    if chosen != "cuda":
        raise ValueError(f'backend must be "cuda", "cpu" or None, not {backend!r}')
    device.require_gpu(f"running {name} with backend='cuda'")
    import cupy

    from gemm_course.run.compile import _compiled_kernel

    kernel = _compiled_kernel(source, ("-std=c++17",), name)
    on_gpu = [cupy.asarray(v) if isinstance(v, np.ndarray) else v for v in values]
    kernel(tuple(grid3), tuple(block3), tuple(on_gpu), shared_mem=shared_bytes)  # plain tuples: CuPy checks the exact type
    for host, dev in zip(values, on_gpu):
        if isinstance(host, np.ndarray) and host.flags.writeable:
            host[...] = cupy.asnumpy(dev)
    return chosen


def show(source: str) -> Any:
    """A kernel source as a highlighted code block (Jupyter, Colab and the built book)."""
    from IPython.display import Code

    from gemm_course.bilingual.comments import in_chosen_language

    return Code(in_chosen_language(source), language="cuda")  # one language's comments after gc.language()
