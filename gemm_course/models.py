"""Pure-Python models (no GPU needed): FLOP and byte counts, the roofline, occupancy, GPU specs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

# --- per-architecture limits -----------------------------------------------------------------------
# From the CUDA C++ Programming Guide's "compute capabilities" tables. fp32_lanes is the number of
# FP32 FMA results one SM can produce per clock.


@dataclass(frozen=True)
class ArchLimits:
    arch: str
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_shared_per_sm: int          # bytes, the largest carve-out
    max_shared_per_block: int       # bytes, with the dynamic opt-in
    reserved_shared_per_block: int  # bytes the runtime keeps per block (sm_80+)
    fp32_lanes: int
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256  # registers, allocated per warp
    shared_alloc_unit: int = 128    # bytes
    static_shared_limit: int = 48 * 1024
    warp_size: int = 32

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


ARCHS: dict[str, ArchLimits] = {
    a.arch: a
    for a in (
        ArchLimits("sm_70", 2048, 32, 96 * 1024, 96 * 1024, 0, 64, shared_alloc_unit=256),
        ArchLimits("sm_75", 1024, 16, 64 * 1024, 64 * 1024, 0, 64, shared_alloc_unit=256),
        ArchLimits("sm_80", 2048, 32, 164 * 1024, 163 * 1024, 1024, 64),
        ArchLimits("sm_86", 1536, 16, 100 * 1024, 99 * 1024, 1024, 128),
        ArchLimits("sm_89", 1536, 24, 100 * 1024, 99 * 1024, 1024, 128),
        ArchLimits("sm_90", 2048, 32, 228 * 1024, 227 * 1024, 1024, 128),
    )
}


def arch_limits(arch: str) -> ArchLimits:
    """Limits for an architecture name such as "sm_90" or "sm_90a" (the suffix is ignored)."""
    key = arch.rstrip("a")
    if key not in ARCHS:
        raise ValueError(f"no occupancy table for {arch}; known: {', '.join(ARCHS)}")
    return ARCHS[key]


@dataclass(frozen=True)
class Occupancy:
    arch: str
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limited_by: str  # "threads", "blocks", "registers", "shared memory"

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm


def occupancy(arch: str, threads_per_block: int, registers_per_thread: int,
              shared_bytes_per_block: int) -> Occupancy:
    """Resident blocks and warps per SM, and which resource limits them (the occupancy calculator)."""
    lim = arch_limits(arch)
    warps_per_block = -(-threads_per_block // lim.warp_size)
    candidates = {
        "threads": lim.max_warps_per_sm // warps_per_block,
        "blocks": lim.max_blocks_per_sm,
    }
    if registers_per_thread > 0:
        unit = lim.register_alloc_unit
        regs_per_warp = -(-registers_per_thread * lim.warp_size // unit) * unit
        candidates["registers"] = (lim.registers_per_sm // regs_per_warp) // warps_per_block
    if shared_bytes_per_block > 0:
        unit = lim.shared_alloc_unit
        per_block = -(-(shared_bytes_per_block + lim.reserved_shared_per_block) // unit) * unit
        candidates["shared memory"] = lim.max_shared_per_sm // per_block
    limited_by = min(candidates, key=lambda k: candidates[k])
    blocks = max(candidates[limited_by], 0)
    return Occupancy(arch, blocks, blocks * warps_per_block, lim.max_warps_per_sm, limited_by)


# --- counting work and bytes -------------------------------------------------------------------------

def gemm_flops(M: int, N: int, K: int) -> int:
    """One multiply and one add per (m, n, k): 2·M·N·K."""
    return 2 * M * N * K


def gemm_min_bytes(M: int, N: int, K: int, itemsize: int = 4) -> int:
    """The least DRAM traffic: read A and B once, write C once."""
    return itemsize * (M * K + K * N + M * N)


def arithmetic_intensity(M: int, N: int, K: int, itemsize: int = 4) -> float:
    """FLOP per byte of the least traffic: the best any kernel can do."""
    return gemm_flops(M, N, K) / gemm_min_bytes(M, N, K, itemsize)


def naive_load_requests(M: int, N: int, K: int, itemsize: int = 4) -> int:
    """Bytes the naive kernel asks the memory system for: 2 operands per multiply-add, plus C.

    Caches serve most of these requests; this is the traffic with no reuse at all, the number
    that tiling (Level 2) attacks.
    """
    return itemsize * (2 * M * N * K + M * N)


# --- the GPUs the course talks about -----------------------------------------------------------------


@dataclass(frozen=True)
class GpuSpec:
    name: str
    arch: str
    sm_count: int
    boost_clock_ghz: float
    memory_bandwidth_gbs: float  # datasheet
    source: str

    @property
    def fp32_peak_tflops(self) -> float:
        lanes = arch_limits(self.arch).fp32_lanes
        return self.sm_count * lanes * 2 * self.boost_clock_ghz / 1e3

    @property
    def ridge_point(self) -> float:
        """FLOP/byte above which fp32 work is compute-bound on this GPU."""
        return self.fp32_peak_tflops * 1e12 / (self.memory_bandwidth_gbs * 1e9)


# Datasheet numbers: ceilings to reason with, not measurements.
KNOWN_GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec("NVIDIA H200", "sm_90", 132, 1.98, 4800, "NVIDIA H200 datasheet (SXM)"),
        GpuSpec("NVIDIA H100 80GB HBM3", "sm_90", 132, 1.98, 3350, "NVIDIA H100 datasheet (SXM)"),
        GpuSpec("NVIDIA A100-SXM4-40GB", "sm_80", 108, 1.41, 1555, "NVIDIA A100 datasheet"),
        GpuSpec("NVIDIA L4", "sm_89", 58, 2.04, 300, "NVIDIA L4 datasheet"),
        GpuSpec("Tesla T4", "sm_75", 40, 1.59, 320, "NVIDIA T4 datasheet"),
    )
}


def spec_from_properties(props: Mapping[str, object]) -> GpuSpec:
    """A GpuSpec for the reader's GPU from cudaGetDeviceProperties (the peak clock, the bus width)."""
    name = props["name"]
    if isinstance(name, bytes):
        name = name.decode()
    arch = f"sm_{props['major']}{props['minor']}"
    if arch.rstrip("a") not in ARCHS:  # unknown arch: use the nearest older one we know
        older = [a for a in ARCHS if a <= arch] or ["sm_70"]
        arch = max(older)
    bandwidth = 2 * props["memoryClockRate"] * 1e3 * props["memoryBusWidth"] / 8 / 1e9
    return GpuSpec(str(name), arch, int(props["multiProcessorCount"]),
                   props["clockRate"] / 1e6, bandwidth, "device properties (peak clock, bus width)")


def roofline(intensity: float, peak_tflops: float, bandwidth_gbs: float) -> float:
    """Attainable TFLOPS at an arithmetic intensity: min(peak, bandwidth × intensity)."""
    return min(peak_tflops, bandwidth_gbs * intensity / 1e3)


def lookup_gpu(name: Optional[str]) -> Optional[GpuSpec]:
    return KNOWN_GPUS.get(name or "")
