// TMA and mbarriers (Hopper, sm_90): what Level 11 and Level 10's TMA setting share.
//
// A TMA copy (cp.async.bulk.tensor) moves a whole box of a matrix into shared memory. One thread
// issues it; the copy engine carries it out and counts the bytes it delivers on an mbarrier, so
// consumers wait on that barrier's phase instead of on a block-wide __syncthreads(). The host
// builds the box's description (a CUtensorMap) with the 128-byte swizzle: a row of 64 two-byte
// elements is 8 chunks of 16 B, and chunk c of row r lands at position c ^ (r % 8).
#pragma once

struct __align__(64) TensorMap { unsigned long long opaque[16]; };  // CUtensorMap, built on the host

constexpr int HOPPER_BK = 64;  // 64 bf16 = 128 B per row: one swizzle row

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// --- mbarrier and TMA ---------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count));
}

__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    unsigned done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

// Make the barriers' initialisation visible to the TMA engine (the "async proxy").
__device__ __forceinline__ void fence_barrier_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}

// Copy the box at (inner, outer) of a 2-D tensor into shared memory; completes `bar`'s bytes.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int inner, int outer, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(map), "r"(inner), "r"(outer), "r"(bar) : "memory");
}

// One k-tile of A (BM × 64, box 64 × BM) and of B (64 × BN, BN/64 boxes of 64 × 64) into a stage.
template <int BM, int BN>
__device__ __forceinline__ void tma_load_k_tile(const TensorMap* map_a, const TensorMap* map_b, unsigned a_stage,
                                                unsigned b_stage, int m0, int n0, int k0, unsigned bar)
{
    mbar_expect_bytes(bar, (BM + BN) * HOPPER_BK * 2);  // OOB parts of a box count too (as zeros)
    tma_load(a_stage, map_a, k0, m0, bar);
#pragma unroll
    for (int j = 0; j < BN / 64; ++j) tma_load(b_stage + j * 8192, map_b, n0 + j * 64, k0, bar);
}

// Shared memory for dynamic buffers: rounded up to the 1024-byte period of the swizzle.
__device__ __forceinline__ unsigned aligned_base(const unsigned char* smem) { return (smem_u32(smem) + 1023) & ~1023u; }

// Tile t → origin of C, walking 16 tile-rows down before moving right: blocks running at the same
// time share the same few columns of B and rows of A in L2.
template <int BM, int BN>
__device__ __forceinline__ void tile_origin(int t, int M, int N, int& m0, int& n0)
{
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int per_group = 16 * tiles_n, first_m = (t / per_group) * 16;
    const int rows = min(tiles_m - first_m, 16);
    m0 = (first_m + (t % per_group) % rows) * BM;
    n0 = ((t % per_group) / rows) * BN;
}


// --- counters in global memory, between blocks (split-K and stream-K fixups) -------------------------
//
// A counter is tagged with the EPOCH of the launch that counts in it: bits 8… hold the epoch, bits 0–7 the
// arrivals (at most 255). The host gives each launch on a set of counters a new epoch (1 … 2^24 - 1, then 1
// again), so a count left by an earlier launch, complete or cut short, reads as zero: no launch needs to set
// the counters back, and none can inherit a wrong count.
constexpr unsigned EPOCH_SHIFT = 8;

// The arrivals of this launch in a counter's value (0 when another launch's epoch is in it).
__device__ __forceinline__ int epoch_count(unsigned value, unsigned epoch)
{
    return (value >> EPOCH_SHIFT) == epoch ? (int)(value & ((1u << EPOCH_SHIFT) - 1)) : 0;
}

// Arrive once on a counter for this launch's epoch and return the arrivals before this one. Called by one
// thread after a barrier, where __threadfence would be a full fence in every thread: the compare-and-swap's
// release publishes every store the barrier ordered before it; its acquire, in the block that finds the count
// complete, makes the other blocks' stores visible before the barrier that lets its threads read them. A value
// of another epoch is replaced by this epoch's first arrival.
__device__ __forceinline__ int arrive_epoch(int* counter, unsigned epoch)
{
    unsigned seen;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
    for (;;) {
        const int before = epoch_count(seen, epoch);
        const unsigned next = (epoch << EPOCH_SHIFT) | (unsigned)(before + 1);
        unsigned found;
        asm volatile("atom.acq_rel.gpu.global.cas.b32 %0, [%1], %2, %3;\n"
                     : "=r"(found) : "l"(counter), "r"(seen), "r"(next) : "memory");
        if (found == seen) return before;
        seen = found;  // another block arrived in between: count again from what it left
    }
}

// Read a counter with acquire semantics: the stores published by the arrivals it counts are visible after.
__device__ __forceinline__ int load_acquire(const int* counter)
{
    int value;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(value) : "l"(counter) : "memory");
    return value;
}
