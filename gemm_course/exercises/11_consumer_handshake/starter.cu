// Level 11 — Hopper: wgmma, TMA, mbarriers, warp specialization, clusters. bf16 or fp16 in, fp32
// accumulation; C in fp32, or in the inputs' type (c_type = "input": bf16 or fp16, as cuBLAS writes it).
// Needs sm_90a (H100, H200, GH200): wgmma and setmaxnreg exist only there.
//
// Six steps, each one measured row in the chapter (steps 3–4 share a kernel template, and so do 5–6):
//
//   step 1  hopper_wgmma_plain      one warpgroup (4 warps, 128 threads) per 64×128 tile of C.
//                                   All threads copy a k-tile into shared memory with 16-byte loads,
//                                   then the warpgroup issues wgmma (m64n128k16) on it, waits, repeats.
//   step 2  hopper_wgmma_tma        two warpgroups per 128×128 tile. One thread asks the TMA engine
//                                   (cp.async.bulk.tensor) for whole tiles; each copy completes on an
//                                   mbarrier of a STAGES-deep ring, so k-tiles kt+1 … arrive while
//                                   kt is multiplied.
//   step 3  hopper_wgmma_specialized producer/consumer warp specialization, 128×256 tiles: warpgroup
//                                   0 only issues TMA (and gives its registers away with setmaxnreg),
//                                   warpgroups 1–2 only issue wgmma (m64n256k16, 128 accumulators
//                                   each); "full" and "empty" mbarriers hand each stage back and forth.
//   step 4  …specialized, PERSISTENT one block per SM walks over tiles in an L2-friendly order; the
//                                   producer runs ahead into the next tile while the consumers store
//                                   C, and consumers keep one wgmma group in flight across k-tiles.
//   step 5  hopper_wgmma_clustered  clusters of 2 blocks whose tiles lie one above the other share each
//                                   k-tile of B: each producer copies its own A and multicasts one half
//                                   of B to both blocks (TMA multicast); a stage's "empty" barrier
//                                   completes on 16 arrivals, the consumer warps of both blocks; a
//                                   cluster barrier at the start and at the end. Persistent clusters:
//                                   as many as can be resident (cuOccupancyMaxActiveClusters).
//   step 6  …clustered, TMA_STORE   C leaves through shared memory: each consumer writes 64-row ×
//                                   128-byte swizzled pieces into 2 buffers, and one thread sends each
//                                   piece out with a TMA store under the next tile's wgmma; before a
//                                   buffer is reused, cp.async.bulk.wait_group.read says TMA has read it.
//
// Shared-memory layout (all steps): the 128-byte swizzle that TMA writes and wgmma reads.
//
//   A stage, BM rows × 64 k (K-major)          B stage, 64 k × BN (MN-major), in 64-column chunks
//   row r: 128 B = 8 chunks of 16 B            chunk j: 64 rows (k) × 128 B (64 columns of n)
//   chunk c stored at position c ^ (r % 8)     16-byte piece c of row r at c ^ (r % 8)
//
//        c: 0 1 2 3 4 5 6 7                       so the 8 rows that one 16-byte column of a
//   r=0:    0 1 2 3 4 5 6 7                       core matrix spans sit in 8 different bank
//   r=1:    1 0 3 2 5 4 7 6                       groups: no conflicts for either engine.
//   r=2:    2 3 0 1 6 7 4 5
//   ...
//
// wgmma finds its operand through a 64-bit descriptor: start address, swizzle mode, and two strides
//   A (K-major):  stride between 8-row groups = 1024 B; a k-step of 16 moves the start by 32 B.
//   B (MN-major): "leading" offset between 64-column chunks = 64 rows × 128 B = 8192 B; stride
//                 between 8-row (k) groups = 1024 B; a k-step of 16 moves the start by 16 rows = 2048 B.
//
// Preconditions (the launcher checks them): K and N multiples of 8 and 16-byte aligned A, B, C
// (TMA needs 16-byte row strides; 16-byte loads need whole chunks). M is free. Past the edges TMA
// fills zeros (steps 2–6) and step 1 stores zero chunks; only elements inside C are written (step 6:
// TMA clips the pieces of C that stick out).
#include "tma.cuh"
#include "wgmma.cuh"

typedef unsigned short u16;  // bf16 or fp16 bits: the kernels never do arithmetic on them

// A: K-major, 8-row groups 1024 B apart. B: MN-major, 64-column chunks 8192 B apart.
__device__ __forceinline__ unsigned long long desc_a(unsigned tile, int kk) { return smem_descriptor(tile + kk * 32, 16, 1024); }
__device__ __forceinline__ unsigned long long desc_b(unsigned tile, int kk) { return smem_descriptor(tile + kk * 2048, 8192, 1024); }

// The four k16 steps of one 64-deep k-tile, for the 64 rows of A that start at a_tile.
template <bool BF16, int REGS>
__device__ __forceinline__ void wgmma_k_tile(float (&d)[REGS], unsigned a_tile, unsigned b_tile, bool first)
{
#pragma unroll
    for (int kk = 0; kk < HOPPER_BK / 16; ++kk)
        wgmma_m64k16<BF16>(d, desc_a(a_tile, kk), desc_b(b_tile, kk), (first && kk == 0) ? 0 : 1);
}

// Two neighbouring elements of C: as a float2 for fp32 C, or rounded (to nearest even) into one
// 32-bit word of two bf16 or fp16 values when C has the inputs' type (c_type = "input").
template <bool BF16>
__device__ __forceinline__ void store_pair(float* p, float x, float y) { *reinterpret_cast<float2*>(p) = make_float2(x, y); }
template <bool BF16>
__device__ __forceinline__ void store_pair(u16* p, float x, float y)
{
    unsigned packed;  // cvt packs its first source into the upper half: y, then x
    if constexpr (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(y), "f"(x));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(y), "f"(x));
    *reinterpret_cast<unsigned*>(p) = packed;
}

// The accumulator layout of wgmma m64nN: warp w of the warpgroup holds rows 16w + lane/4 and +8,
// columns 8j + 2·(lane%4) + {0, 1} for j < N/8 — pairs of values, written together.
template <bool BF16, int REGS, typename OutT>
__device__ __forceinline__ void store_tile(const float (&d)[REGS], OutT* C, int M, int N, int m0, int n0, int thread)
{
    const int row = m0 + (thread / 32) * 16 + (thread % 32) / 4;
    const int col = n0 + (thread % 4) * 2;
#pragma unroll
    for (int j = 0; j < REGS / 4; ++j) {
        const int c = col + 8 * j;
        if (c >= N) continue;  // N is a multiple of 8 and c is even: c + 1 < N too
        if (row < M) store_pair<BF16>(C + (size_t)row * N + c, d[4 * j], d[4 * j + 1]);
        if (row + 8 < M) store_pair<BF16>(C + (size_t)(row + 8) * N + c, d[4 * j + 2], d[4 * j + 3]);
    }
}

// (Steps 1 and 2 are in the level's file; this copy keeps step 3, the warp-specialized kernel.)

// ---- exercise: the consumers' index math of the ring ------------------------------------------------
// `it` counts the k-tiles a consumer has taken from the ring so far, over all its tiles of C (the
// producer counts the same way). stage_of(it, stages) is the stage that k-tile `it` sits in;
// full_parity(it, stages) the parity a consumer waits for on full[stage_of(it, stages)] before it
// reads that stage. (full[s] and empty[s] start in phase 0; every completed phase flips the parity.)
__device__ __forceinline__ int stage_of(int it, int stages)
{
    return 0;
}

__device__ __forceinline__ int full_parity(int it, int stages)
{
    return 0;
}
// ---- end of the exercise ------------------------------------------------------------------------

// --- steps 3 and 4: a producer warpgroup and two consumer warpgroups ----------------------------------
//
//   warpgroup 0 (producer, 40 registers)      warpgroups 1, 2 (consumers, 232 registers)
//   ─ wait empty[s] ─ TMA A, B into s ─┐       ┌─ wait full[s] ─ wgmma × 4 ─ arrive empty[s] ─
//                                     full[s] ──┘
//   Each consumer owns 64 rows of the 128 × 256 tile: 128 fp32 accumulators per thread.

template <bool BF16, int STAGES, bool PERSISTENT, typename OutT = float>
__global__ void __launch_bounds__(384, 1)
hopper_wgmma_specialized(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                         OutT* __restrict__ C, int M, int N, int K)
{
    constexpr int BM = 128, BN = 256, A_BYTES = BM * HOPPER_BK * 2, B_BYTES = BN * HOPPER_BK * 2;
    constexpr int CONSUMER_WARPS = 8;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const int tid = threadIdx.x, wg = tid / 128;
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const int tiles_k = (K + HOPPER_BK - 1) / HOPPER_BK;
    const int first = blockIdx.x, step = PERSISTENT ? gridDim.x : tiles;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), 1);                // the producer's expect_tx
            mbar_init(smem_u32(&empty[s]), CONSUMER_WARPS);  // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {  // producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid != 0) return;
        int it = 0;  // k-tiles issued so far, over all tiles: position in the ring and its phase
        for (int t = first; t < tiles; t += step) {
            int m0, n0;
            tile_origin<BM, BN>(t, M, N, m0, n0);
            for (int kt = 0; kt < tiles_k; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(smem_u32(&empty[s]), (it / STAGES + 1) % 2);  // first round: passes at once
                tma_load_k_tile<BM, BN>(map_a, map_b, a_base + s * A_BYTES, b_base + s * B_BYTES, m0, n0,
                                        kt * HOPPER_BK, smem_u32(&full[s]));
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int thread = tid % 128, rows = (wg - 1) * 64;  // this consumer's rows of the tile
    const bool releaser = thread % 32 == 0;
    int it = 0;
    for (int t = first; t < tiles; t += step) {
        int m0, n0;
        tile_origin<BM, BN>(t, M, N, m0, n0);
        float d[BN / 2];
        for (int kt = 0; kt < tiles_k; ++kt, ++it) {
            // ---- exercise: consume k-tile `it` of the ring (step 3; step 4's overlap is in the level's file) ----
            // ---- end of the exercise -----------------------------------------------------------------
        }
        pin(d);
        store_tile<BF16>(d, C, M, N, m0 + rows, n0, thread);
    }
}
