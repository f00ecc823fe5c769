"""Host side of the TMA kernels (Level 11, and Level 10 with copy="tma"): tensor maps and arguments.

A TMA copy (cp.async.bulk.tensor) is described by a 128-byte "tensor map": the matrix's address,
its sizes and row stride, the box one copy moves, and the shared-memory swizzle. The driver
builds it (cuTensorMapEncodeTiled). CuPy does not wrap that call, so we call libcuda through
ctypes (the driver is already loaded by CuPy: no extra package), copy the map to GPU memory and
pass its address; the kernel hands that address to the TMA instruction.
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from gemm_course.run.driver import LaunchEpoch, allow_shared, driver
from gemm_course.run.dtypes import dtype_name
from gemm_course.levels import HOPPER_STEPS, hopper_pairs

# CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion (cuda.h)
_TMA_DTYPE = {"float16": 6, "bfloat16": 9, "float32": 7, "uint8": 0}  # uint8: FP8 e4m3 bytes (13_fp8)
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "uint8": 1}
_SWIZZLE_NONE, _SWIZZLE_128B = 0, 3
_L2_PROMOTION_256B = 3
BOX_INNER = 64  # elements: 64 × 2 bytes = one 128-byte swizzle row


def encode_tensor_map(address: int, type_name: str, rows: int, cols: int, box_rows: int, *,
                      row_stride: Optional[int] = None, box_cols: Optional[int] = None) -> bytes:
    """The 128-byte CUtensorMap of a row-major rows × cols matrix, read or written in boxes of
    box_rows × 128 bytes (128 one-byte, 64 two-byte or 32 four-byte elements) with the 128-byte swizzle; reads
    outside the matrix give zeros, writes outside it are dropped.

    box_cols: boxes of box_rows × box_cols elements instead, not swizzled (e.g. one row of 128 floats: Level 13's
    scales). row_stride: elements from one row's start to the next (default cols; more for padded rows)."""
    size = _ITEMSIZE[type_name]
    stride = cols if row_stride is None else row_stride
    inner = 128 // size if box_cols is None else box_cols
    if stride * size % 16 or address % 16 or stride < cols:
        raise ValueError("TMA needs 16-byte aligned rows: each row must be a whole number of 16-byte chunks "
                         "and the matrix must start on a 16-byte boundary")
    if not 1 <= inner <= 256 or inner * size % 16 or not 1 <= box_rows <= 256:
        raise ValueError(f"a TMA box is 1 to 256 elements on each side, its rows whole 16-byte chunks: "
                         f"{box_rows}×{inner} of {size}-byte elements is not")
    tensor_map = (ctypes.c_uint64 * 16)()
    dims = (ctypes.c_uint64 * 2)(cols, rows)          # innermost first
    strides = (ctypes.c_uint64 * 1)(stride * size)    # bytes between rows
    box = (ctypes.c_uint32 * 2)(inner, box_rows)
    element_strides = (ctypes.c_uint32 * 2)(1, 1)
    swizzle = _SWIZZLE_128B if box_cols is None else _SWIZZLE_NONE
    status = driver().cuTensorMapEncodeTiled(ctypes.byref(tensor_map), _TMA_DTYPE[type_name], 2,
                                              ctypes.c_void_p(address), dims, strides, box, element_strides,
                                              0, swizzle, _L2_PROMOTION_256B, 0)
    if status != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {status} for a {rows}×{cols} "
                           f"{type_name} matrix at {address:#x}, box {box_rows}×{inner}")
    return bytes(tensor_map)


@functools.lru_cache(maxsize=64)
def _device_tensor_map(address: int, type_name: str, rows: int, cols: int, box_rows: int, device_id: int) -> Any:
    import cupy

    with cupy.cuda.Device(device_id):  # the map only describes memory: reuse it for the same matrix
        return cupy.asarray(np.frombuffer(encode_tensor_map(address, type_name, rows, cols, box_rows), np.uint64))


@functools.lru_cache(maxsize=64)
def _device_row_map(address: int, type_name: str, rows: int, cols: int, row_stride: int, box_cols: int,
                    device_id: int) -> Any:
    """A tensor map (in GPU memory) of a rows × cols matrix whose rows lie row_stride elements apart, read in
    boxes of one row × box_cols elements, not swizzled: Level 13's M-major scales (fp8.gemm.a_scales_m_major)."""
    import cupy

    with cupy.cuda.Device(device_id):
        return cupy.asarray(np.frombuffer(encode_tensor_map(address, type_name, rows, cols, 1, row_stride=row_stride,
                                                            box_cols=box_cols), np.uint64))


def tma_args(A: Any, B: Any, C: Any, M: int, N: int, K: int, block_rows: int) -> tuple:
    """(map of A, map of B, C, M, N, K) for a kernel that reads k-tiles of 64 by TMA: A in boxes of
    block_rows rows × 64 k, B in boxes of 64 k × 64 n."""
    type_name, dev = dtype_name(A), A.device.id
    map_a = _device_tensor_map(A.data.ptr, type_name, M, K, block_rows, dev)
    map_b = _device_tensor_map(B.data.ptr, type_name, K, N, BOX_INNER, dev)
    return (map_a, map_b, C, np.int32(M), np.int32(N), np.int32(K))


def mma_pipeline_args(A: Any, B: Any, C: Any, M: int, N: int, K: int, p: Mapping[str, Any]) -> tuple:
    """Level 10: raw pointers for the cp.async kernels; TMA tensor maps of A and B for copy='tma'."""
    if p["copy"] == "tma":
        return tma_args(A, B, C, M, N, K, 128)
    return (A, B, C, np.int32(M), np.int32(N), np.int32(K))


def kernel_args(A: Any, B: Any, C: Any, M: int, N: int, K: int, params: Mapping[str, Any]) -> tuple:
    """Level 11: (A, B, C, M, N, K) for step 1; tensor maps in place of A and B for the TMA steps."""
    if params["step"] == 1:
        return (A, B, C, np.int32(M), np.int32(N), np.int32(K))
    map_a, map_b, *rest = tma_args(A, B, C, M, N, K, HOPPER_STEPS[params["step"]][0])
    if params["step"] < 5:
        return (map_a, map_b, *rest)
    # Steps 5–7 also take a map of C (steps 6, 7 store through it in boxes of 64 rows; step 5 ignores it).
    map_c = _device_tensor_map(C.data.ptr, dtype_name(C), M, N, 64, C.device.id)
    if params["step"] < 7:
        return (map_a, map_b, map_c, *rest)
    import cupy

    # Step 7's stream-K fixup: a workspace of 8 slots of 64 × 256 floats per cluster, and a counter per
    # (pair of tiles, block, consumer warpgroup).
    stream = cupy.cuda.get_current_stream().ptr
    workspace = stream_k_workspace(C.device.id, stream)
    counters = fixup_counters(4 * hopper_pairs(M, N), C.device.id, stream)
    return (map_a, map_b, map_c, *rest, workspace, counters.array, counters.epoch)


@dataclass(frozen=True)
class FixupCounters:
    """Counters for a fixup between blocks (Level 11's stream-K, Level 13's split-K) and the epoch their
    launches tag them with: a kernel argument that is a new number at every launch (driver.LaunchEpoch), so a
    launch never reads a count that another one left, even one cut short (tma.cuh, arrive_epoch). The two live
    together: a new epoch sequence over old counters could meet an old epoch again."""

    array: Any  # int32, one per tile (or pair, block and consumer)
    epoch: LaunchEpoch


@functools.lru_cache(maxsize=32)
def fixup_counters(count: int, device_id: int, stream: int) -> FixupCounters:
    """The fixup counters of `count` tiles on one GPU and stream, zeroed once when made. Per stream: launches
    on one stream run one after another, so each launch's epoch is the only one counting while it runs (a
    stream of its own for concurrent calls)."""
    import cupy

    with cupy.cuda.Device(device_id):
        return FixupCounters(cupy.zeros(count, dtype=cupy.int32), LaunchEpoch())


@functools.lru_cache(maxsize=8)
def stream_k_workspace(device_id: int, stream: int) -> Any:
    """Level 11 step 7's partial sums: 8 slots of 64 × 256 floats per cluster, for at most SMs / 2 clusters
    (about 34 MB on 132 SMs). Per GPU and stream for the same reason as the counters: a launch on another
    stream could run at the same time."""
    import cupy

    from gemm_course import device

    with cupy.cuda.Device(device_id):
        clusters = int(device.properties()["multiProcessorCount"]) // 2
        return cupy.empty(clusters * 8 * 64 * 256, dtype=cupy.float32)


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig (cuda.h)
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


@functools.lru_cache(maxsize=None)
def _resident_clusters_cached(function_ptr: int, threads: int, shared: int, cluster: int) -> int:
    count = ctypes.c_int()
    # The kernel fixes its cluster shape (__cluster_dims__), so the config leaves it unspecified.
    config = _LaunchConfig(cluster * 64, 1, 1, threads, 1, 1, shared, None, None, 0)
    status = driver().cuOccupancyMaxActiveClusters(ctypes.byref(count), ctypes.c_void_p(function_ptr), ctypes.byref(config))
    if status != 0 or count.value < 1:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters failed (CUresult {status}, {count.value} clusters) for "
                           f"{threads} threads and {shared} B of shared memory per block")
    return count.value


def max_active_clusters(kernel: Any, threads: int, shared: int, cluster: int) -> int:
    """How many clusters of `cluster` blocks of a compiled kernel can be resident at once: a
    persistent kernel launches exactly that many, since one more would wait for a whole cluster to
    finish. The driver answers from the GPU's layout (SMs per GPC), not just SMs / cluster."""
    allow_shared(kernel, shared)  # the query, like a launch, needs the kernel allowed this much first
    return _resident_clusters_cached(int(kernel.kernel.ptr), threads, shared, cluster)
