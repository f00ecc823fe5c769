"""Pure-Python models (no GPU needed): FLOP and byte counts, the roofline, occupancy, GPU specs."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

# --- per-architecture limits -----------------------------------------------------------------------
# The one table of per-architecture limits: every compile report, occupancy computation and model reads it.
# From NVIDIA's CUDA C++ Programming Guide, "Compute Capabilities", table "Technical Specifications per
# Compute Capability" (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#compute-capabilities): 64 K
# 32-bit registers per SM, at most 255 per thread; 48 KB of static shared memory per block; shared memory per
# SM, the dynamic opt-in maximum per block (the SM's shared memory less the 1 KB the runtime reserves per
# block from sm_80 on), resident threads (warps) and blocks per SM. NVIDIA's own machine-readable copy of the
# same table is CCCL's cuda/__device/arch_traits.h (shipped inside CuPy's wheel: cupy/_cccl/libcudacxx/), which
# the entries from sm_100 on were checked against. fp32_lanes is the number of FP32 FMA results one SM can
# produce per clock (the guide's "Arithmetic Instructions" throughput table). The last rows are the
# architectures that NVRTC 12.9 compiles for (nvrtcGetSupportedArchs) beyond Hopper: sm_100 and sm_103
# (data-centre Blackwell: B200, GB200, B300), sm_120 and sm_121 (Blackwell RTX 50 and workstation cards, DGX
# Spark). L2 size is a property of a GPU, not of an architecture: the models read it from a run's provenance.


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
        ArchLimits("sm_50", 2048, 32, 64 * 1024, 48 * 1024, 0, 128, shared_alloc_unit=256),
        ArchLimits("sm_52", 2048, 32, 96 * 1024, 48 * 1024, 0, 128, shared_alloc_unit=256),
        ArchLimits("sm_53", 2048, 32, 64 * 1024, 48 * 1024, 0, 128, shared_alloc_unit=256),
        ArchLimits("sm_60", 2048, 32, 64 * 1024, 48 * 1024, 0, 64, shared_alloc_unit=256),
        ArchLimits("sm_61", 2048, 32, 96 * 1024, 48 * 1024, 0, 128, shared_alloc_unit=256),
        ArchLimits("sm_62", 2048, 32, 64 * 1024, 48 * 1024, 0, 128, shared_alloc_unit=256),
        ArchLimits("sm_70", 2048, 32, 96 * 1024, 96 * 1024, 0, 64, shared_alloc_unit=256),
        ArchLimits("sm_72", 2048, 32, 96 * 1024, 96 * 1024, 0, 64, shared_alloc_unit=256),
        ArchLimits("sm_75", 1024, 16, 64 * 1024, 64 * 1024, 0, 64, shared_alloc_unit=256),
        ArchLimits("sm_80", 2048, 32, 164 * 1024, 163 * 1024, 1024, 64),
        ArchLimits("sm_86", 1536, 16, 100 * 1024, 99 * 1024, 1024, 128),
        ArchLimits("sm_87", 1536, 16, 164 * 1024, 163 * 1024, 1024, 128),
        ArchLimits("sm_89", 1536, 24, 100 * 1024, 99 * 1024, 1024, 128),
        ArchLimits("sm_90", 2048, 32, 228 * 1024, 227 * 1024, 1024, 128),
        ArchLimits("sm_100", 2048, 32, 228 * 1024, 227 * 1024, 1024, 128),
        ArchLimits("sm_103", 2048, 32, 228 * 1024, 227 * 1024, 1024, 128),
        ArchLimits("sm_120", 1536, 24, 100 * 1024, 99 * 1024, 1024, 128),
        ArchLimits("sm_121", 1536, 24, 100 * 1024, 99 * 1024, 1024, 128),
    )
}


def arch_limits(arch: str) -> ArchLimits:
    """Limits for an architecture name such as "sm_90", "sm_90a" or "sm_100f" (the suffix is ignored)."""
    key = arch.rstrip("af")
    if key not in ARCHS:
        raise ValueError(f"no occupancy table for {arch}; known: {', '.join(ARCHS)} / "
                         f"没有 {arch} 的占用率参数表；已知的架构：{'、'.join(ARCHS)}")
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


def tile_traffic(M: int, N: int, K: int, tile_m: int = 1, tile_n: int = 1, itemsize: int = 4) -> int:
    """Bytes a tiled kernel loads from global memory, if no cache helped: each block reads a
    tile_m-row strip of A and a tile_n-column strip of B, so A is read ⌈N/tile_n⌉ times and B
    ⌈M/tile_m⌉ times; C is written once. tile 1×1 is Level 1's "two floats per multiply-add".
    """
    ceil = lambda a, b: -(-a // b)  # noqa: E731
    return itemsize * (M * K * ceil(N, tile_n) + K * N * ceil(M, tile_m) + M * N)


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
    if arch not in ARCHS:  # unknown arch: use the nearest older one we know
        arch = max((a for a in ARCHS if int(a[3:]) <= props["major"] * 10 + props["minor"]),
                   key=lambda a: int(a[3:]), default="sm_70")
    bandwidth = 2 * props["memoryClockRate"] * 1e3 * props["memoryBusWidth"] / 8 / 1e9
    return GpuSpec(str(name), arch, int(props["multiProcessorCount"]),
                   props["clockRate"] / 1e6, bandwidth, "device properties (peak clock, bus width)")


def roofline(intensity: float, peak_tflops: float, bandwidth_gbs: float) -> float:
    """Attainable TFLOPS at an arithmetic intensity: min(peak, bandwidth × intensity)."""
    return min(peak_tflops, bandwidth_gbs * intensity / 1e3)


# --- warp access patterns: sectors (global memory) and banks (shared memory) -------------------------

SECTOR_BYTES = 32
BANKS = 32


def warp_sectors(byte_addresses: Sequence[int]) -> int:
    """How many 32-byte sectors one warp-wide access touches (4 is ideal for 32 floats)."""
    return len({a // SECTOR_BYTES for a in byte_addresses})


@dataclass(frozen=True)
class BankAccess:
    """One warp's access to a 2-D shared array: which words and banks each lane touches.

    words holds each lane's first 4-byte word; a lane of a `width`-byte access (4, 8 or 16: a
    float, float2 or float4) touches width/4 consecutive words from there.

    `wavefronts` is a model of how many passes the hardware needs, not a documented rule:
      - a 4-byte access is served for the whole warp at once;
      - an 8- or 16-byte access is served one half-warp (16 lanes) at a time;
      - each phase costs as many passes as the most distinct words any one bank must serve in it
        (lanes reading the same word share it: a broadcast). A 16-lane phase of 16-byte accesses
        moves up to 256 bytes, so even without a conflict it costs 2.
    For 16-byte loads the half-warp phase is inferred from the H200 counters, which a quarter-warp
    phase (8 lanes x 16 bytes = 128 bytes) does not reproduce: Level 2's loop (8 broadcast LDS.128
    and 32 conflict-free LDS per 32 FFMA) measures 1.20 wavefronts per shared load, this model gives
    (8*2 + 32)/40 = 1.20 and quarter-warps would give 1.60; Levels 5 and 7 (per k step: two LDS.128
    of A, each shared by half a warp, and two of B, where lanes l and l+16 share an address) measure
    160 wavefronts per warp per k-tile, this model 160, quarter-warps 192. The 8-byte rule is not
    checked against any counter in this course.
    """

    description: str
    lanes: tuple[int, ...]
    words: tuple[int, ...]
    width: int = 4

    @property
    def lane_words(self) -> tuple[tuple[int, ...], ...]:
        """The 4-byte words each lane touches."""
        return tuple(tuple(range(w, w + self.width // 4)) for w in self.words)

    @property
    def banks(self) -> tuple[int, ...]:
        """The bank of each lane's first word (its only word for a 4-byte access)."""
        return tuple(w % BANKS for w in self.words)

    @property
    def words_per_bank(self) -> dict[int, int]:
        """Distinct words each bank must serve over the whole warp (lanes reading the same word
        share it: a broadcast)."""
        return _words_per_bank(self.lane_words)

    @property
    def degree(self) -> int:
        """The conflict degree of a 4-byte access: passes the hardware needs (1 = conflict-free).
        For wider accesses, the most distinct words one bank serves in any one phase."""
        return max(max(_words_per_bank(ws).values()) for ws in self._phase_words())

    @property
    def phase_lanes(self) -> int:
        """Lanes served together (model): 32 for 4-byte accesses, 16 for 8- and 16-byte ones."""
        return 32 if self.width == 4 else 16

    def _phase_words(self) -> list[tuple[tuple[int, ...], ...]]:
        by_lane = dict(zip(self.lanes, self.lane_words))
        phases = []
        for first in range(0, 32, self.phase_lanes):
            ws = tuple(by_lane[lane] for lane in range(first, first + self.phase_lanes) if lane in by_lane)
            if ws:
                phases.append(ws)
        return phases

    @property
    def phase_wavefronts(self) -> tuple[int, ...]:
        """Passes each phase takes: the most distinct words any one bank serves in it."""
        return tuple(max(_words_per_bank(ws).values()) for ws in self._phase_words())

    @property
    def wavefronts(self) -> int:
        """Passes (wavefronts) the whole warp's access takes, by the model in the class docstring."""
        return sum(self.phase_wavefronts)

    @property
    def ideal_wavefronts(self) -> int:
        """The fewest passes these phases could take: 128 bytes per pass, one pass per phase at least."""
        return sum(max(1, -(-len({w for lane in ws for w in lane}) // BANKS)) for ws in self._phase_words())

    def lane_passes(self) -> tuple[tuple[int, ...], ...]:
        """For each lane and each of its words, the pass (1, 2, ...) that serves it: passes of earlier
        phases first, then the word's rank among its bank's distinct words in its phase."""
        out: dict[int, tuple[int, ...]] = {}
        offset = 0
        by_lane = dict(zip(self.lanes, self.lane_words))
        for first in range(0, 32, self.phase_lanes):
            lanes = [lane for lane in range(first, first + self.phase_lanes) if lane in by_lane]
            if not lanes:
                continue
            per: dict[int, list[int]] = {}
            for lane in lanes:
                for w in by_lane[lane]:
                    if w not in per.setdefault(w % BANKS, []):
                        per[w % BANKS].append(w)
            for lane in lanes:
                out[lane] = tuple(offset + sorted(per[w % BANKS]).index(w) + 1 for w in by_lane[lane])
            offset += max(len(ws) for ws in per.values())
        return tuple(out[lane] for lane in self.lanes)


def _words_per_bank(lane_words) -> dict[int, int]:
    per: dict[int, set] = {}
    for ws in lane_words:
        for w in ws:
            per.setdefault(w % BANKS, set()).add(w)
    return {b: len(ws) for b, ws in sorted(per.items())}


def bank_access(row: str, col: str, shape: tuple[int, int] = (32, 32), pad: int = 0,
                swizzle: bool = False, block: tuple[int, int] = (32, 32), warp: int = 0,
                width: int = 4, **constants: int) -> BankAccess:
    """Model one warp's access `array[row][col]` to a shared array of 4-byte words.

    row and col are index expressions in the thread indices tx, ty (and any constants you pass,
    such as k=0), e.g. row="tx", col="ty" for a transposed store As[tx][ty]. pad adds words to
    each row (As[32][33] is pad=1); swizzle stores column col ^ (row % columns), the XOR swizzle.
    block is (blockDim.x, blockDim.y); warp picks which 32 consecutive threads. width is the bytes
    each lane moves (4: float, 8: float2, 16: float4, starting at [row][col]); a wide access must be
    aligned to its width, as the hardware requires. See BankAccess for the wavefront model.
    """
    if width not in (4, 8, 16):
        raise ValueError(f"width is bytes per lane: 4, 8 or 16, not {width}")
    rows, cols = shape
    stride = cols + pad
    vector = width // 4
    lanes, words = [], []
    for lane in range(32):
        linear = warp * 32 + lane
        tx, ty = linear % block[0], linear // block[0]
        if ty >= block[1]:
            break
        env = {"tx": tx, "ty": ty, **constants}
        r, c = eval(row, {"__builtins__": {}}, env), eval(col, {"__builtins__": {}}, env)  # noqa: S307
        if not (0 <= r < rows and 0 <= c <= cols - vector):
            raise ValueError(f"lane {lane} indexes [{r}][{c}:{c + vector}], outside the {rows}×{cols} array")
        if swizzle:
            c ^= r % cols
        word = r * stride + c
        if word % vector:
            raise ValueError(f"lane {lane}: word {word} is not {width}-byte aligned; a {width}-byte "
                             f"access needs a word address divisible by {vector}")
        lanes.append(lane)
        words.append(word)
    desc = f"[{row}][{col}] in {rows}×{cols}" + (f" + pad {pad}" if pad else "") + (" swizzled" if swizzle else "")
    if width != 4:
        desc += f", {width}-byte"
    return BankAccess(desc, tuple(lanes), tuple(words), width)


# --- several GPUs: communication cost of splitting one GEMM (Level 12) ------------------------------
#
# Every scheme is a list of phases, each communication phase priced by the α-β model of the NCCL
# collective it uses (gemm_course.multigpu.collectives: a broadcast is NCCL's pipelined ring, (P−1)·α + n·β, not
# P−1 serial sends from the root), each local phase by a one-GPU measurement; every scheme is charged
# for the same things in each scope (SchemeCost: "algorithm", "end to end", "even start").


def grid_words(M: int, N: int, K: int, p_m: int, p_n: int, p_k: int) -> float:
    """Words each GPU sends or receives in the grid algorithm on p_m × p_n × p_k GPUs, starting from
    A, B and C spread evenly (one copy) and ending so.

    GPU (i, j, l) computes the partial product A[i, l]·B[l, j] of the (M/p_m × N/p_n) block C[i, j]
    over the l-th K/p_k slice. A[i, l] is needed by the p_n GPUs of that (i, l) and starts spread
    over them: each receives the (1 − 1/p_n) it lacks. Likewise B[l, j] over p_m GPUs, and the
    p_k partial sums of C[i, j] are reduced (reduce-scatter) over the p_k GPUs that made them:

        words = (1 − 1/p_n)·MK/(p_m·p_k) + (1 − 1/p_m)·KN/(p_k·p_n) + (1 − 1/p_k)·MN/(p_m·p_n)

    p_m = P, p_n = p_k = 1 is the row split (all-gather B); p_k = 1 is a 2-D split such as SUMMA;
    p_m = p_n = p_k = P^(1/3) the 3-D algorithm, which meets collectives.lower_bound_words on cubes.
    """
    return ((1 - 1 / p_n) * M * K / (p_m * p_k) + (1 - 1 / p_m) * K * N / (p_k * p_n)
            + (1 - 1 / p_k) * M * N / (p_m * p_n))


@dataclass(frozen=True)
class Phase:
    """One step of a distributed GEMM and its predicted time.

    kind "communication": priced by the α-β model of the NCCL collective named in `how`;
    kind "local": work each GPU does alone (a GEMM, a copy), priced by the same work timed on one GPU.
    bytes: what the GPU that receives the most in this phase receives (summed over phases: an upper
    bound on any one GPU's total, comparable with collectives.lower_bound_bytes).
    """

    name: str
    seconds: float
    kind: str
    how: str = ""
    bytes: float = 0.0


@dataclass(frozen=True)
class SchemeCost:
    """A scheme's predicted time as its phases, run one after the other (no overlap).

    scope "algorithm": the inputs already where the scheme wants them, C left distributed as the
    scheme leaves it; "end to end": from A and B on GPU 0 to C on GPU 0 (distribution and gather
    included); "even start": A, B and C each spread evenly over the GPUs in one copy, as the lower
    bound (collectives.lower_bound_words) assumes, C left distributed.
    """

    scheme: str
    scope: str
    gpus: int
    flops: float
    phases: tuple[Phase, ...]

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    @property
    def communication_s(self) -> float:
        return sum(p.seconds for p in self.phases if p.kind == "communication")

    @property
    def local_s(self) -> float:
        return sum(p.seconds for p in self.phases if p.kind == "local")

    @property
    def bytes_per_gpu(self) -> float:
        return sum(p.bytes for p in self.phases)

    @property
    def tflops(self) -> float:
        return self.flops / self.seconds / 1e12

    def phases_ms(self) -> dict[str, float]:
        return {p.name: p.seconds * 1e3 for p in self.phases}

    def as_dict(self) -> dict:
        return {"scheme": self.scheme, "scope": self.scope, "gpus": self.gpus, "model_ms": self.seconds * 1e3,
                "model_tflops": self.tflops, "communication_ms": self.communication_s * 1e3,
                "local_ms": self.local_s * 1e3, "bytes_per_gpu": self.bytes_per_gpu,
                "phases": [dict(name=p.name, ms=p.seconds * 1e3, kind=p.kind, how=p.how, bytes=p.bytes)
                           for p in self.phases]}


SCOPES = ("algorithm", "end to end", "even start")


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise ValueError(f"scope is one of {', '.join(SCOPES)}, not {scope!r}")


def row_split_model(M: int, N: int, K: int, P: int, links, compute_s: float, itemsize: int = 4,
                    scope: str = "end to end") -> SchemeCost:
    """The row split as phases. `links` is a gemm_course.multigpu.collectives.Links (α, β per collective);
    compute_s the time of one GPU's (M/P × K)·(K × N) product, measured alone on one GPU (or
    2·(M/P)·N·K / rate on paper).

    end to end:  broadcast B from GPU 0 (ring broadcast: (P−1)·α + n·β, the pipelined ring, not P−1
                 serial sends), scatter A's row blocks and gather C's (the root's link carries every
                 block but its own: (P−1)·α + (P−1)/P·n·β), compute.
    algorithm:   compute only; A's rows and all of B already sit on every GPU, C stays in row blocks.
    even start:  each GPU starts with its rows of A and 1/P of B: all-gather B (ring), then compute.
    """
    _check_scope(scope)
    phases = [Phase("compute", compute_s, "local", f"({M}/{P} × {K})·({K} × {N}) on each GPU")]
    if scope == "even start" and P > 1:
        b = itemsize * K * N
        phases.insert(0, Phase("all-gather B", links.seconds("all-gather", b, P), "communication",
                               f"ring all-gather of {b / 1e9:.3g} GB over {P} GPUs", b * (P - 1) / P))
    if scope == "end to end" and P > 1:
        b, a, c = itemsize * K * N, itemsize * M * K, itemsize * M * N
        share = (P - 1) / P
        phases = [Phase("broadcast B", links.seconds("broadcast", b, P), "communication",
                        f"ring broadcast of {b / 1e9:.3g} GB over {P} GPUs", b),
                  Phase("scatter A", links.seconds("scatter", a, P), "communication",
                        f"GPU 0 sends {P - 1} row blocks of A ({share * a / 1e9:.3g} GB)", a / P),
                  *phases,
                  Phase("gather C", links.seconds("gather", c, P), "communication",
                        f"GPU 0 receives {P - 1} row blocks of C ({share * c / 1e9:.3g} GB)", share * c)]
    return SchemeCost("row split", scope, P, gemm_flops(M, N, K), tuple(phases))


def summa_model(M: int, N: int, K: int, pr: int, pc: int, links, panel_s: float, pack_panels_s: float = 0.0,
                pack_blocks_s: float = 0.0, unpack_s: float = 0.0, itemsize: int = 4,
                scope: str = "end to end") -> SchemeCost:
    """SUMMA on a pr × pc grid as phases, with L = lcm(pr, pc) k-panels of width K/L.

    Each panel: the GPUs owning it copy their slice of the A panel (M/pr × K/L) and of the B panel
    (K/L × N/pc) into contiguous buffers (pack_panels_s, measured on one GPU), broadcast the A panel
    along their grid row (over pc GPUs) and the B panel down their grid column (over pr), then every
    GPU adds A_panel·B_panel to its block of C (panel_s, one GPU's (M/pr × K/L)·(K/L × N/pc) with
    β = 1, measured alone). The two broadcasts share each GPU's links, so their times add.

    end to end adds: GPU 0 packs every GPU's blocks of A and B (pack_blocks_s) and sends them (a
    scatter from the root: (P−1)·α + (P−1)/P·n·β for A and again for B), and at the end receives
    every block of C (a gather) and copies them into place (unpack_s). "even start" is the algorithm:
    SUMMA's blocks ARE an even distribution.
    """
    _check_scope(scope)
    P = pr * pc
    L = pr * pc // math.gcd(pr, pc)
    mb, nb, kb = M / pr, N / pc, K / L
    a_panel, b_panel = itemsize * mb * kb, itemsize * kb * nb
    bcast_a = links.seconds("broadcast", a_panel, pc)
    bcast_b = links.seconds("broadcast", b_panel, pr)
    # Every GPU owns 1/pc of the A panels of its grid row and receives the rest, likewise for B
    received = L * (a_panel * (pc - 1) / pc + b_panel * (pr - 1) / pr)
    phases = [Phase("pack panels", L * pack_panels_s, "local", f"{L} panels copied into contiguous buffers"),
              Phase("panel broadcasts", L * (bcast_a + bcast_b), "communication",
                    f"{L} × (ring broadcast of {a_panel / 1e9:.3g} GB over {pc} GPUs + {b_panel / 1e9:.3g} GB "
                    f"over {pr})", received),
              Phase("panel GEMMs", L * panel_s, "local", f"{L} × ({mb:g} × {kb:g})·({kb:g} × {nb:g}), β = 1")]
    if scope == "end to end" and P > 1:
        a, b, c = itemsize * M * K, itemsize * K * N, itemsize * M * N
        share = (P - 1) / P
        phases = [Phase("pack A, B blocks", pack_blocks_s, "local", "GPU 0 copies each GPU's blocks"),
                  Phase("send A, B blocks", links.seconds("scatter", a, P) + links.seconds("scatter", b, P),
                        "communication", f"GPU 0 sends {P - 1} blocks of A and of B ({share * (a + b) / 1e9:.3g} GB)",
                        (a + b) / P),
                  *phases,
                  Phase("gather C blocks", links.seconds("gather", c, P), "communication",
                        f"GPU 0 receives {P - 1} blocks of C ({share * c / 1e9:.3g} GB)", share * c),
                  Phase("unpack C", unpack_s, "local", "GPU 0 copies the blocks into C")]
    return SchemeCost("SUMMA", scope, P, gemm_flops(M, N, K), tuple(phases))


def pipeline_seconds(compute_s: Sequence[float], comm_s: Sequence[float]) -> float:
    """Chunks through two stages: chunk i's communication starts once its compute is done and the
    previous chunk's communication has finished; compute runs on without waiting.

        compute │c0│c1│c2│c3│
        comm        │m0 │m1 │m2 │m3 │      ends at max(end of m(i−1), end of c(i)) + m(i)

    Equal chunks: c + (n−1)·max(c, m) + m, the first chunk's compute, the slower stage for each
    chunk after it, the last chunk's communication. It assumes the two stages do not slow each
    other down (they share the GPU's SMs and memory; the measurement shows how much they do).
    """
    if len(compute_s) != len(comm_s):
        raise ValueError("one compute time and one communication time per chunk")
    compute_end = comm_end = 0.0
    for c, m in zip(compute_s, comm_s):
        compute_end += c
        comm_end = max(comm_end, compute_end) + m
    return comm_end


def stream_k_segments(pairs: int, tiles_k: int, clusters: int) -> list[list[tuple[int, int, int]]]:
    """Level 11 step 7's schedule, the same integer arithmetic as ClusterWork in 11_hopper_wgmma.cu: for each
    cluster, its segments (pair, first k-tile, end k-tile) in the order it computes them.

    All pairs but those of the last two rounds (the last one, if there is only one) are computed whole, round
    robin; the k-tiles of the rest are cut into one contiguous share per cluster (stream-K). When an even share
    would be no shorter than those rounds of whole pairs (the pairs divide evenly among the clusters, say), or
    the rest has fewer k-tiles than there are clusters, every pair is computed whole."""
    if min(pairs, tiles_k, clusters) < 1:
        raise ValueError("pairs, tiles_k and clusters must be at least 1")
    whole = max(pairs // clusters - 1, 0) * clusters
    rest = (pairs - whole) * tiles_k
    shorter = math.ceil(rest / clusters) < math.ceil((pairs - whole) / clusters) * tiles_k
    dp_pairs = whole if rest >= clusters and shorter else pairs
    sk_base, sk_units = dp_pairs * tiles_k, (pairs - dp_pairs) * tiles_k
    schedule = []
    for c in range(clusters):
        segments = [(p, 0, tiles_k) for p in range(c, dp_pairs, clusters)]
        unit, end = sk_base + c * sk_units // clusters, sk_base + (c + 1) * sk_units // clusters
        while unit < end:
            pair, kb = divmod(unit, tiles_k)
            ke = min(tiles_k, kb + end - unit)
            segments.append((pair, kb, ke))
            unit += ke - kb
        schedule.append(segments)
    return schedule


def stream_k_summary(M: int, N: int, K: int, clusters: int, pair_m: int = 256, pair_n: int = 256,
                     tile_k: int = 64) -> dict[str, float]:
    """Step 7's schedule at one shape, counted (a model of time: every k-tile costs the same, a fixup nothing):
    the busiest cluster's k-tiles beside step 6's (whole pairs round robin), the share that saves, and how many
    pairs are split between clusters."""
    pairs, tiles_k = math.ceil(M / pair_m) * math.ceil(N / pair_n), math.ceil(K / tile_k)
    schedule = stream_k_segments(pairs, tiles_k, clusters)
    busiest = max(sum(ke - kb for _, kb, ke in segments) for segments in schedule)
    whole_pairs = math.ceil(pairs / clusters) * tiles_k
    split = {p for segments in schedule for p, kb, ke in segments if ke - kb < tiles_k}
    return {"pairs": pairs, "k_tiles": tiles_k, "clusters": clusters, "step6_k_tiles": whole_pairs,
            "step7_k_tiles": busiest, "saving": 1 - busiest / whole_pairs, "split_pairs": len(split)}
