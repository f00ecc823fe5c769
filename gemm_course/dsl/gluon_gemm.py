"""Level 14 in Gluon: Level 11's Hopper GEMM written in Python, with nothing left to the compiler's choice.

Gluon is Triton's lower layer: the same Python front end, but the programmer places everything the Triton kernels
leave to the compiler: the layout of every tensor in registers and in shared memory, the TMA copies and the
mbarriers they complete on, the wgmma instructions and their waits, the ring of stages and who waits for whom,
and which warps do what (warp specialization). This kernel is Level 11 step 4 (gemm_course/kernels/
11_hopper_wgmma.cu) in those terms:

    C (BM×BN tiles) = A (M×K, bf16) · B (K×N, bf16), fp32 accumulators, C in fp32 or bf16 (c_type)

    one block per SM (persistent), its warps in two partitions:
    ┌────────────────────────────────────────────┐     ring of STAGES buffers in shared memory
    │ load partition: 1 warp                     │     ┌────────┬────────┬────────┐
    │   wait free[s] → expect ready[s] → TMA A,B ├────►│ A,B s0 │ A,B s1 │ A,B s2 │ ready[s]: TMA bytes landed
    ├────────────────────────────────────────────┤     └────────┴────────┴────────┘ free[s]:  wgmma done reading
    │ MMA partition (default): BM/16 warps       │◄────── wait ready[s] → wgmma (async) → wait for the one
    │   = BM/64 warpgroups, 64 rows each         │        before → arrive free[s-1]; after the tile:
    │   acc in the wgmma register layout         │        acc → shared (C tile) → TMA store
    └────────────────────────────────────────────┘

A and B are zero-filled by TMA beyond the matrices and C's TMA store clips its rows and columns, so partial tiles in
M, N and K are right; TMA reads rows in whole 16-byte pieces, so K and N must be multiples of 8 (Level 11's rule).
gemm_course.dsl.line_maps.GLUON_LINE_MAP maps the lines to the course's levels. GPU only (Hopper, sm_90); compile.py compiles it for
sm_90 without a GPU.

Importing this module imports triton (gemm_course.dsl.tensors.require_triton says what to install).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from gemm_course.dsl.tensors import require_triton

require_triton("gemm_course.dsl.gluon_gemm")
import triton  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (  # noqa: E402
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)



@gluon.constexpr_function
def wgmma_layout(BM: int, BN: int, num_warps: int) -> Any:
    """The accumulator's register layout for wgmma: warps stacked along M (each warpgroup of 4 owns 64 rows), one
    instruction m64nBNk16 per warpgroup and k-step (Level 11's m64n256k16 for BN = 256)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BN, 16])


@gluon.jit
def tile_offsets(tile, tiles_m, tiles_n, BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr):
    """The first row and column of a tile of C, tiles numbered in Level 8's grouped order."""
    programs_per_group = GROUP_M * tiles_n
    first_tile_m = (tile // programs_per_group) * GROUP_M
    group_rows = gl.minimum(tiles_m - first_tile_m, GROUP_M)
    off_m = (first_tile_m + (tile % programs_per_group) % group_rows) * BM
    off_n = ((tile % programs_per_group) // group_rows) * BN
    return off_m, off_n


@gluon.jit
def load_partition(a_desc, b_desc, a_ring, b_ring, ready, free, M, N, K,
                   GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr):
    """The producer: one warp issues the TMA copies of every k-tile of every tile this block owns, into the ring."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    tiles_m = gl.cdiv(M, BM)
    tiles_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    copied = 0  # k-tiles copied so far by this block: its stage and the lap of the ring it is on
    for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_SMS):
        off_m, off_n = tile_offsets(tile, tiles_m, tiles_n, BM, BN, GROUP_M)
        for kk in range(k_tiles):
            stage = copied % STAGES
            lap = (copied // STAGES) & 1
            # Wait until the MMA warps have finished reading this stage on the previous lap. On the first lap the
            # wait is for the phase "before" the barrier's first one, which counts as complete: it passes at once.
            mbarrier.wait(free.index(stage), lap ^ 1)
            mbarrier.expect(ready.index(stage), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [off_m, kk * BK], ready.index(stage), a_ring.index(stage))
            tma.async_copy_global_to_shared(b_desc, [kk * BK, off_n], ready.index(stage), b_ring.index(stage))
            copied += 1


@gluon.jit
def mma_partition(a_ring, b_ring, ready, free, c_desc, c_tile, M, N, K,
                  GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr):
    """The consumers: wgmma on each stage as it lands, one instruction group in flight, then the epilogue."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_ring.type.shape[2]
    layout: gl.constexpr = wgmma_layout(BM, BN, gl.num_warps())
    tiles_m = gl.cdiv(M, BM)
    tiles_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    used = 0  # k-tiles consumed so far by this block (the same count the producer keeps)
    for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_SMS):
        off_m, off_n = tile_offsets(tile, tiles_m, tiles_n, BM, BN, GROUP_M)
        acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
        for kk in range(k_tiles):
            stage = used % STAGES
            mbarrier.wait(ready.index(stage), (used // STAGES) & 1)
            acc = warpgroup_mma(a_ring.index(stage), b_ring.index(stage), acc, is_async=True)
            # Keep this wgmma in flight and wait for the one before it: its stage is read, give it back.
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
            mbarrier.arrive(free.index((used + STAGES - 1) % STAGES), pred=kk > 0)
            used += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(free.index((used + STAGES - 1) % STAGES))  # the tile's last stage
        # Epilogue: the previous tile's TMA store must have left c_tile before it is overwritten.
        tma.store_wait(pendings=0)
        c_tile.store(acc.to(c_desc.dtype))
        fence_async_shared()  # the generic-proxy writes above, visible to the TMA engine (async proxy)
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_tile)
    tma.store_wait(pendings=0)


@gluon.jit
def gluon_gemm_kernel(a_desc, b_desc, c_desc, M, N, K,
                      GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr):
    dtype: gl.constexpr = a_desc.dtype
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    # Shared memory, placed by hand: the ring of A and B stages in the descriptors' swizzled layouts, C's tile for
    # the TMA store, and two mbarriers per stage.
    a_ring = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], a_desc.layout)
    b_ring = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], b_desc.layout)
    c_tile = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)  # completed by the TMA bytes (expect) and the producer's arrival
        mbarrier.init(free.index(s), count=1)   # completed by one arrival of the MMA partition
    # Warp specialization: the kernel's num_warps run mma_partition; one more warp runs load_partition, with 24
    # registers per thread (setmaxnreg), which leaves the rest to the accumulators.
    gl.warp_specialize([(mma_partition, (a_ring, b_ring, ready, free, c_desc, c_tile, M, N, K, GROUP_M, STAGES,
                                         NUM_SMS)),
                        (load_partition, (a_desc, b_desc, a_ring, b_ring, ready, free, M, N, K, GROUP_M, STAGES,
                                          NUM_SMS))], [1], [24])




GLUON_DEFAULT = {"BM": 128, "BN": 256, "BK": 64, "group_m": 8, "stages": 3, "c_type": "input"}
GLUON_DTYPES = ("bfloat16",)


def resolve_gluon(**setting: Any) -> dict[str, Any]:
    """A Gluon setting with its defaults filled in; ValueError (one line, both languages) for a wrong one. BM is 64
    or 128 (one or two consumer warpgroups, num_warps = BM / 16), BN a multiple of 8 up to 256 (one wgmma wide)."""
    unknown = sorted(set(setting) - set(GLUON_DEFAULT))
    if unknown:
        raise ValueError(f"gluon_gemm has no setting {', '.join(unknown)}; its settings: {', '.join(GLUON_DEFAULT)} / "
                         f"gluon_gemm 没有设置 {', '.join(unknown)}；它的设置是：{', '.join(GLUON_DEFAULT)}")
    out = {**GLUON_DEFAULT, **setting}
    rules = (("BM", (64, 128)), ("BN", (64, 128, 256)), ("BK", (32, 64)), ("group_m", (1, 2, 4, 8, 16)),
             ("stages", (2, 3, 4, 5, 6)), ("c_type", ("float32", "input")))
    for key, choices in rules:
        if out[key] not in choices:
            raise ValueError(f"gluon_gemm: {key}={out[key]!r}; choose one of {list(choices)} / "
                             f"gluon_gemm：{key}={out[key]!r} 不可用；可选 {list(choices)}")
    return out


def gluon_descriptors(A: Any, B: Any, C: Any, setting: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The host-side TMA descriptors of A, B and C, each with the shared layout (swizzle) its tile gets."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from gemm_course.dsl.tensors import as_triton_tensor

    a, b, c = (X if hasattr(X, "data_ptr") else as_triton_tensor(X) for X in (A, B, C))
    BM, BN, BK = setting["BM"], setting["BN"], setting["BK"]
    descriptors = []
    for X, box in ((a, [BM, BK]), (b, [BK, BN]), (c, [BM, BN])):
        layout = gl.NVMMASharedLayout.get_default_for(box, getattr(gl, str(X.dtype)))
        descriptors.append(TensorDescriptor(X, list(X.shape), list(X.stride()), box, layout))
    return tuple(descriptors)


def gluon_launch(A: Any, B: Any, C: Any, setting: Mapping[str, Any],
                 sms: Optional[int] = None) -> tuple[Any, tuple, dict[str, Any]]:
    """(grid, arguments, launch options) of gluon_gemm_kernel: one block per SM, at most one per tile; num_warps
    = BM / 16 warps of consumers (the producer's warp comes on top)."""
    from gemm_course.dsl.triton_gemm import sm_count

    (M, K), N = A.shape, B.shape[1]
    sms = sms or sm_count()
    tiles = triton.cdiv(M, setting["BM"]) * triton.cdiv(N, setting["BN"])
    a_desc, b_desc, c_desc = gluon_descriptors(A, B, C, setting)
    args = (a_desc, b_desc, c_desc, M, N, K, setting["group_m"], setting["stages"], sms)
    return (min(sms, tiles),), args, {"num_warps": setting["BM"] // 16}


def gluon_gemm(A: Any, B: Any, out: Optional[Any] = None, **setting: Any) -> Any:
    """C = A · B by the Gluon kernel on Hopper; A, B: bf16 CuPy arrays (uint16 bit patterns), K and N multiples of
    8. C is bf16 (c_type="input", the default here, as cuBLAS writes it) or float32. setting: GLUON_DEFAULT's keys."""
    from gemm_course.dsl import triton_gemm as tg

    resolved = resolve_gluon(**setting)
    M, N, K, dtype = tg._operands(A, B, GLUON_DTYPES, "gluon_gemm")
    tg.require_tma_shape(M, N, K, "gluon_gemm")
    tg._require_placement(A, "gluon_gemm")
    if tg.interpreting():
        raise ValueError("gluon_gemm runs on a Hopper GPU only (Triton's interpreter does not run Gluon) / "
                         "gluon_gemm 只能在 Hopper GPU 上运行（Triton 的解释器不运行 Gluon）")
    c_type = dtype if resolved["c_type"] == "input" else "float32"
    C = tg._new_output(A, M, N, c_type) if out is None else tg._output(out, M, N, c_type, "gluon_gemm")
    grid, args, options = gluon_launch(A, B, C, resolved)
    gluon_gemm_kernel[grid](*args, **options)
    return C
