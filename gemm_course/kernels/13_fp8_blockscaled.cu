// Level 13 (groundwork) — FP8 on Hopper: e4m3 inputs, fp32 accumulation, scales, bf16 C.
// Needs sm_90a (H100, H200, GH200), like Level 11, whose machinery it reuses: TMA into a ring of
// mbarrier stages, one producer warpgroup and two consumer warpgroups (setmaxnreg), persistent blocks
// walking tiles in tile_origin's L2-friendly order.
//
// The inputs are e4m3 bytes (see gemm_course/fp8.py): 1 sign, 4 exponent, 3 mantissa bits, |x| ≤ 448.
// Such a narrow format only works with scales: a value is stored as bits = e4m3(x / s) and means
// decode(bits) · s. The kernel multiplies the bytes on the Tensor Cores and applies the scales itself.
//
// Both operands are K-MAJOR: FP8 wgmma reads A and B only with k contiguous (it has no transpose
// option), so B is stored N×K, "transposed" compared to Levels 1–11:
//
//     A: M×K bytes, row m contiguous along k       B: N×K bytes, row n contiguous along k
//        K →  |<-128->|<-128->|<-128->|               K →  |<-128->|<-128->|<-128->|
//     row 0   | a_s00 | a_s01 | a_s02 |              n 0…127 | b_s00 | b_s01 | b_s02 |
//     row 1   | a_s10 | a_s11 | a_s12 |           n 128…255 | b_s10 | b_s11 | b_s12 |
//     ...       one scale per row per 128 of k          ...   one scale per 128×128 tile
//     a_scales: M × ceil(K/128) floats              b_scales: ceil(N/128) × ceil(K/128) floats
//
//     C[m][n] = Σ over k-blocks kb of  a_scales[m][kb] · b_scales[n/128][kb] · Σ_{k in kb} A[m][k]·B[n][k]
//
// Three kernels, in the steps the chapter measures one by one:
//
//   (a) fp8_gemm_per_tensor<BN>   one scale for all of A, one for all of B: they factor out of the sum,
//                                 so the consumers accumulate the whole K in the Tensor Cores' registers
//                                 and multiply by a_scale · b_scale once, when they store C. Tiles of
//                                 128×BN; each consumer m64nBNk32. BN = 256 is the fast one (as Level 11
//                                 step 4); BN = 128 exists to separate the tile's size from the cost of
//                                 promotion: it is kernel (b)'s tile without promotion.
//   (b) fp8_gemm_blockwise<.., OVERLAP>   1×128 scales of A and 128×128 scales of B, which change every
//                                 128 of k, so they cannot wait for the end. 128×128 tiles, each consumer
//                                 m64n128k32. OVERLAP = false: each k-block is waited for, then promoted
//                                 (the Tensor Cores idle meanwhile); OVERLAP = true: two partial-sum
//                                 buffers, so the next k-block's wgmma runs while this one is promoted.
//                                 SCALES (b and c): where the consumers find the scales, see below.
//   (c) fp8_gemm_blockwise_m64    kernel (b) for few rows of A (decode shapes): 64×BN tiles (BN = 128,
//                                 64, 32 or 16) whose two consumers split the columns (m64n(BN/2)k32
//                                 each); see the end of the file.
//
// SPLIT-K (kernel b, `splits` > 1). When C has few tiles (M = 64 or 128 rows of tokens against a
// weight matrix: N/128 tiles for 132 SMs) each tile's k-blocks are cut into `splits` ranges, one work
// unit each, so that every SM has work. A unit writes its fp32 partial tile into its own slice of a
// workspace; the unit that arrives last at its tile (a counter per tile) adds the slices in split
// order and writes bf16 C. Adding in a fixed order (not with atomic additions, whose order changes
// from run to run) keeps C the same on every run. The counters are tagged with the launch's EPOCH, a
// number the host changes at every launch (arrive_epoch, tma.cuh): a count left by another launch,
// even one that stopped halfway, reads as zero, so no launch has to set them back.
//
// PROMOTION (kernel b). The Tensor Core adds FP8 products into its fp32 accumulator with fewer bits
// than a true fp32 addition (about 14 significant bits are kept, as measured by others), so a long
// sum drifts. Kernel (b) therefore lets wgmma accumulate only one 128-deep k-block (4 instructions
// of k = 32), into FRESH registers, and then adds that partial sum into the main accumulators with
// ordinary fp32 FMAs on the CUDA cores — "promoting" it — multiplied by the block's two scales:
//
//     for each k-block kb (128 of k; one stage of the ring):
//         part  = A_tile(64×128) · B_tile(128×128)ᵀ     4 × wgmma m64n128k32, part starts at 0
//         acc  += part · (a_scale[row][kb] · b_scale[nb][kb])     64 FMAs per thread, CUDA cores
//
//     per thread: 64 registers of part + 64 of acc (why the tile is 128×128, not 128×256)
//
// SCALES: WHERE THE CONSUMERS FIND THEM (kernels b and c; the template argument SCALES, three ways).
//
//   SCALES_GLOBAL  every consumer thread loads its three scales of a k-block (its two rows' of A, its
//                  tile's of B) from global memory itself: 8 warps × 3 load instructions per k-block and
//                  block, each reaching 8 rows of A that lie a whole row of scales apart.
//   SCALES_STAGED  the producer warp copies them into the stage, beside the k-block's A and B: each lane
//                  copies 4 bytes per row of the tile (cp.async, 4 rows per lane for 128 rows) and lane 0
//                  B's one scale; each lane's copies then arrive on the stage's full barrier on their own
//                  (cp.async.mbarrier.arrive.noinc), so the barrier counts 1 + 32 arrivals. 129 copies of
//                  4 bytes per stage, each its own 32-byte sector: A's scales are stored row-major, so a
//                  tile's 128 row scales of one k-block lie a whole row of scales apart.
//   SCALES_TMA     the host stores a copy of A's scales M-MAJOR (k-block by k-block, the M row scales of
//                  each side by side: a_scales_t below); then a tile's row scales of one k-block are BM
//                  consecutive floats, and the producer brings them with ONE TMA box (BM floats × 1) that
//                  completes on the stage's full barrier with A's and B's boxes (its bytes counted in the
//                  same expect_tx; rows past M arrive as zeros). B's one scale per k-block comes beside it
//                  by one 4-byte cp.async of the same thread, which arrives on the barrier too (count 2).
//
//   stage s (STAGED):  A 128 rows × 128 B | B 128 rows × 128 B  ...  scales: A[0…127], B, 3 floats pad
//   stage s (TMA):     A 128 rows × 128 B | B 128 rows × 128 B  ...  scales: A[0…127] (one box), B, pad to 128 B
//
//   a_scales (row-major, M × KB):          a_scales_t (M-major, KB × M_pad, M_pad = M rounded up to 4):
//     row m:  s[m][0] s[m][1] … s[m][KB-1]   row kb: s[0][kb] s[1][kb] … s[M-1][kb] (pad)
//   a tile's k-block kb: one float from each of BM rows    a tile's k-block kb: BM floats in a row
//
// A consumer reads its staged scales from shared memory once the stage is full, like A and B.
// While one consumer warpgroup promotes, the other one's wgmma keeps the Tensor Cores busy. Kernel
// (a) does no promotion: it is what cuBLAS calls "fast accumulation" (torch._scaled_mm with
// use_fast_accum=True), faster and less precise on long K.
//
// Shared memory: one stage holds a 128-deep k-block, 128 bytes per row = exactly one row of the
// 128-byte swizzle, so each k-tile of A or B is ONE TMA box (128 bytes × rows):
//
//   row r: 128 B = 8 chunks of 16 B, chunk c stored at position c ^ (r % 8) (as in Level 11)
//   A stage: 128 rows × 128 B = 16 KB      B stage: BN rows × 128 B = 16 KB (b) or 32 KB (a)
//
// wgmma descriptors: both operands K-major, like Level 11's A. 8-row groups lie 1024 B apart (the
// "stride" offset); one instruction reads k = 32 bytes of every row, so k-step kk of the k-block
// starts 32·kk bytes further (kk = 0…3). A consumer's 64 rows of A start 64 · 128 B = 8 KB in.
//
// The accumulator layout is Level 11's (it does not depend on the input type): warp w of a
// warpgroup holds rows 16w + lane/4 and +8, columns 8j + 2·(lane%4) + {0, 1}. So each thread needs
// the A scales of exactly two rows, and (b) one B scale per k-block: the tile's 128 columns are one
// 128-row tile of B.
//
// Preconditions (the host checks them): K a multiple of 16 (TMA needs 16-byte row strides); A and B
// start on 16-byte boundaries; SCALES_TMA: a_scales_t's rows a multiple of 4 floats apart and its start on
// 16 bytes (TMA's stride rule again), which the host's M-major copy guarantees. M and N are free: past the edges TMA fills zeros (a shorter last
// k-block of scales then covers only the real columns, as fp8.py defines it), and only elements
// inside C are stored (pairs of bf16 when N is even, single values when N is odd).
#include "tma.cuh"
#include "wgmma.cuh"

typedef unsigned short u16;  // bf16 bits

constexpr int FP8_BM = 128;               // rows of a tile: two consumers × 64
constexpr int FP8_BK = 128;               // k per stage: 128 bytes = one swizzle row = one scale block
constexpr int FP8_A_BYTES = FP8_BM * FP8_BK;
constexpr int FP8_CONSUMER_WARPS = 8;
constexpr int FP8_SCALE_N = 128;          // columns of C (rows of B) per scale of B: its 128×128 scale tiles

// Where the consumers find the scales (the template argument SCALES of kernels b and c; see above).
constexpr int SCALES_GLOBAL = 0, SCALES_STAGED = 1, SCALES_TMA = 2;

// One stage's scales: BM floats of A, then B's one at [BM]. STAGED: padded so every stage starts on 16 bytes.
// TMA: padded to 128 bytes, where a TMA box must land (the ring's start being 1024-aligned).
template <int BM, int SCALES>
__host__ __device__ constexpr int scale_slot_bytes()
{
    return SCALES == SCALES_STAGED ? (BM + 4) * 4 : SCALES == SCALES_TMA ? (BM + 32) * 4 : 0;
}

// A K-major operand with the 128-byte swizzle, as Level 11's A: 8-row groups 1024 B apart (the
// "leading" offset is not used by a swizzled K-major operand whose k fits in one swizzle row; 16 B as
// in Level 11). k-step kk (32 bytes of k) of a tile whose first row is at `tile` starts 32·kk further.
__device__ __forceinline__ unsigned long long kmajor_desc(unsigned tile, int kk) { return smem_descriptor(tile + kk * 32, 16, 1024); }

// The four k = 32 steps of one 128-deep k-block, for the 64 rows of A that start at a_rows.
// first: the first instruction overwrites d (scale-d = 0) instead of adding to it.
template <int REGS>
__device__ __forceinline__ void wgmma_k_block(float (&d)[REGS], unsigned a_rows, unsigned b_tile, bool first)
{
#pragma unroll
    for (int kk = 0; kk < FP8_BK / 32; ++kk)
        wgmma_m64k32_e4m3(d, kmajor_desc(a_rows, kk), kmajor_desc(b_tile, kk), (first && kk == 0) ? 0 : 1);
}

// bf16 rounding, to nearest even. cvt packs its first source into the upper half: hi, then lo.
__device__ __forceinline__ unsigned bf16x2(float lo, float hi)
{
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}
__device__ __forceinline__ u16 bf16(float x)
{
    u16 bits;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(bits) : "f"(x));
    return bits;
}

// A consumer's 64 rows × (REGS/2) columns of accumulators, times `scale`, → bf16 C at (m0, n0).
// Only elements inside C are written. With N even every row starts on a 4-byte boundary and c is
// even, so the two neighbours go out as one 32-bit store (c < N implies c + 1 < N); with N odd they
// go one by one.
template <int REGS>
__device__ __forceinline__ void store_tile_bf16(const float (&d)[REGS], float scale, u16* C, int M, int N,
                                                int m0, int n0, int thread)
{
    const int row = m0 + (thread / 32) * 16 + (thread % 32) / 4;
    const int col = n0 + (thread % 4) * 2;
    const bool pairs = N % 2 == 0;
#pragma unroll
    for (int j = 0; j < REGS / 4; ++j) {
        const int c = col + 8 * j;
        if (c >= N) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row + 8 * h;
            if (r >= M) continue;
            u16* p = C + (size_t)r * N + c;
            const float x = d[4 * j + 2 * h] * scale, y = d[4 * j + 2 * h + 1] * scale;
            if (pairs) {
                *reinterpret_cast<unsigned*>(p) = bf16x2(x, y);
            } else {
                p[0] = bf16(x);
                if (c + 1 < N) p[1] = bf16(y);
            }
        }
    }
}

// --- work units ------------------------------------------------------------------------------------
//
// Unit u covers one tile of C and one range of its k-blocks. With splits = 1 a unit is a tile. The
// split index is the slow one, so the units that run at the same time share k-ranges of A and B in L2.
struct WorkUnit {
    int tile, part, m0, n0, kb_begin, kb_end;
};

template <int BN, int BM = FP8_BM>
__device__ __forceinline__ WorkUnit work_unit(int u, int M, int N, int k_blocks, int splits)
{
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    WorkUnit w;
    w.tile = u % tiles;
    w.part = u / tiles;
    tile_origin<BM, BN>(w.tile, M, N, w.m0, w.n0);
    w.kb_begin = w.part * k_blocks / splits;          // the host keeps splits ≤ k_blocks: no empty unit
    w.kb_end = (w.part + 1) * k_blocks / splits;
    return w;
}

template <int BN, int BM = FP8_BM>
__device__ __forceinline__ int unit_count(int M, int N, int splits)
{
    return ((M + BM - 1) / BM) * ((N + BN - 1) / BN) * splits;
}

// --- the producer warpgroup (both kernels) ---------------------------------------------------------
//
//   warpgroup 0 (producer, 40 registers)         warpgroups 1, 2 (consumers, 232 registers)
//   ─ wait empty[s] ─ TMA A, B k-block into s ─┐     ┌─ wait full[s] ─ wgmma × 4 ─ arrive empty[s] ─
//                                         full[s] ───┘
// One thread walks the same units in the same order as the consumers and keeps the ring full; a
// stage is one TMA box of A (128 rows) and one of B (BN rows), both 128 bytes of k wide.

// 4 bytes from global to shared memory, asynchronously (cp.async: .ca, the only kind that copies 4 bytes).
__device__ __forceinline__ void copy_scale(unsigned dst, const float* src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(dst), "l"(src) : "memory");
}

// This thread arrives on `bar` once all the cp.async it has issued so far have landed. .noinc: the
// arrival counts against the barrier's initial count, like a plain arrive.
__device__ __forceinline__ void arrive_when_copied(unsigned bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(bar) : "memory");
}

// Thread 0 alone, except with SCALES_STAGED: the whole warp 0, every lane copying scales (above).
template <int BN, int STAGES, int BM, int SCALES>
__device__ __forceinline__ void produce(const TensorMap* map_a, const TensorMap* map_b, const TensorMap* map_a_scales,
                                        const float* a_scales, const float* b_scales, unsigned a_base,
                                        unsigned b_base, unsigned scale_base, unsigned long long* full,
                                        unsigned long long* empty, int M, int N, int K, int splits)
{
    constexpr int A_BYTES = BM * FP8_BK, B_BYTES = BN * FP8_BK;
    constexpr int SCALE_BYTES = SCALES == SCALES_TMA ? BM * 4 : 0;  // A's scales by TMA: one box, counted too
    constexpr int SLOT = scale_slot_bytes<BM, SCALES>();
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;
    const int lane = threadIdx.x % 32;
    int it = 0;  // k-blocks issued so far, over all units: position in the ring and its phase
    for (int u = blockIdx.x; u < unit_count<BN, BM>(M, N, splits); u += gridDim.x) {
        const WorkUnit w = work_unit<BN, BM>(u, M, N, k_blocks, splits);
        for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++it) {
            const int s = it % STAGES;
            const unsigned bar = smem_u32(&full[s]);
            mbar_wait(smem_u32(&empty[s]), (it / STAGES + 1) % 2);  // first round: passes at once
            if (lane == 0) {
                mbar_expect_bytes(bar, A_BYTES + B_BYTES + SCALE_BYTES);  // parts past the edges count too (zeros)
                tma_load(a_base + s * A_BYTES, map_a, kb * FP8_BK, w.m0, bar);
                tma_load(b_base + s * B_BYTES, map_b, kb * FP8_BK, w.n0, bar);
                if constexpr (SCALES == SCALES_TMA) {  // row kb of the M-major copy, its BM floats from row m0 on
                    tma_load(scale_base + s * SLOT, map_a_scales, w.m0, kb, bar);
                    copy_scale(scale_base + s * SLOT + 4 * BM, b_scales + (size_t)(w.n0 / FP8_SCALE_N) * k_blocks + kb);
                    arrive_when_copied(bar);  // B's scale: the barrier's second arrival
                }
            }
            if constexpr (SCALES == SCALES_STAGED) {
                const unsigned slot = scale_base + s * SLOT;
                // Rows past M (never stored) take row M - 1's scale: every address stays inside the array.
                for (int r = lane; r < BM; r += 32)
                    copy_scale(slot + 4 * r, a_scales + (size_t)min(w.m0 + r, M - 1) * k_blocks + kb);
                if (lane == 0) copy_scale(slot + 4 * BM, b_scales + (size_t)(w.n0 / FP8_SCALE_N) * k_blocks + kb);
                arrive_when_copied(bar);
                __syncwarp();
            }
        }
    }
    if constexpr (SCALES != SCALES_GLOBAL) asm volatile("cp.async.wait_all;\n" ::: "memory");  // none left in flight
}

// Barriers, then the producer's side. Returns false in the producer warpgroup (its work is done).
template <int BN, int STAGES, int BM = FP8_BM, int SCALES = SCALES_GLOBAL>
__device__ __forceinline__ bool start_roles(const TensorMap* map_a, const TensorMap* map_b,
                                            const TensorMap* map_a_scales, const float* a_scales,
                                            const float* b_scales, unsigned a_base, unsigned b_base,
                                            unsigned scale_base, unsigned long long* full,
                                            unsigned long long* empty, int M, int N, int K, int splits)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            // the producer's expect_tx, + each lane's copies (STAGED) or thread 0's copy of B's scale (TMA)
            mbar_init(smem_u32(&full[s]), SCALES == SCALES_STAGED ? 1 + 32 : SCALES == SCALES_TMA ? 2 : 1);
            mbar_init(smem_u32(&empty[s]), FP8_CONSUMER_WARPS);   // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x < (SCALES == SCALES_STAGED ? 32 : 1))
            produce<BN, STAGES, BM, SCALES>(map_a, map_b, map_a_scales, a_scales, b_scales, a_base, b_base,
                                            scale_base, full, empty, M, N, K, splits);
        return false;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    return true;
}

// --- (a) one scale per tensor, applied when C is stored ------------------------------------------------

template <int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
fp8_gemm_per_tensor(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                    const float* __restrict__ a_scale, const float* __restrict__ b_scale, u16* __restrict__ C,
                    int M, int N, int K)
{
    static_assert(BN == 128 || BN == 256, "one consumer's accumulators: m64n128 or m64n256");
    constexpr int B_BYTES = BN * FP8_BK;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * FP8_A_BYTES;
    if (!start_roles<BN, STAGES>(map_a, map_b, nullptr, nullptr, nullptr, a_base, b_base, 0, full, empty, M, N, K, 1))
        return;

    const int thread = threadIdx.x % 128, rows = (threadIdx.x / 128 - 1) * 64;  // this consumer's rows
    const bool releaser = thread % 32 == 0;
    const float scale = a_scale[0] * b_scale[0];  // both factor out of the whole sum
    const int tiles = unit_count<BN>(M, N, 1);
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_origin<FP8_BM, BN>(t, M, N, m0, n0);
        // Zeroed although the first wgmma overwrites d (scale-d = 0): the asm reads its accumulators as
        // "+f" operands, and reading an uninitialised register is undefined to the compiler.
        float d[BN / 2] = {};
        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
            const int s = it % STAGES;
            mbar_wait(smem_u32(&full[s]), (it / STAGES) % 2);
            wgmma_fence();
            wgmma_k_block(d, a_base + s * FP8_A_BYTES + rows * FP8_BK, b_base + s * B_BYTES, kb == 0);
            wgmma_commit();
            wgmma_wait<1>();  // keep this k-block's wgmma running; the previous one is done: free its stage
            if (kb > 0 && releaser) mbar_arrive(smem_u32(&empty[(it - 1) % STAGES]));
        }
        wgmma_wait<0>();
        if (releaser) mbar_arrive(smem_u32(&empty[(it - 1) % STAGES]));
        pin(d);
        store_tile_bf16(d, scale, C, M, N, m0 + rows, n0, thread);
    }
}

// --- (b) 1×128 scales of A, 128×128 scales of B, promotion once per k-block -----------------------------

// acc += part · scale of its row: registers 4j, 4j+1 belong to row my_row, 4j+2, 4j+3 to row my_row + 8.
template <int REGS>
__device__ __forceinline__ void promote(float (&acc)[REGS], const float (&part)[REGS], float top, float bottom)
{
#pragma unroll
    for (int j = 0; j < REGS / 4; ++j) {
        acc[4 * j] = fmaf(part[4 * j], top, acc[4 * j]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], top, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], bottom, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], bottom, acc[4 * j + 3]);
    }
}

// The scales of k-block kb (in ring stage s) for this thread's two rows, already multiplied by B's
// block scale, in two parts: before_wait, from global memory (SCALES_GLOBAL: the consumers load them before
// they wait for the stage, so the load's latency hides); after_wait, from the stage once it is full (STAGED,
// TMA: the producer put all three there).
template <int SCALES_, int BM>
struct BlockScales {
    static constexpr int SCALES = SCALES_;
    const float *a_top, *a_bottom, *b_row;  // global memory: this thread's rows of the scale arrays
    const float* stages;                    // STAGED, TMA: the scales of stage 0 in shared memory
    int row;                                // STAGED, TMA: the top row in the tile
    __device__ __forceinline__ void before_wait(int kb, float& top, float& bottom) const
    {
        if constexpr (SCALES == SCALES_GLOBAL) {
            const float b = b_row[kb];
            top = a_top[kb] * b;
            bottom = a_bottom[kb] * b;
        }
    }
    __device__ __forceinline__ void after_wait(int s, float& top, float& bottom) const
    {
        if constexpr (SCALES != SCALES_GLOBAL) {
            const float* slot = stages + s * (scale_slot_bytes<BM, SCALES>() / 4);
            top = slot[row] * slot[BM];  // a · b: the same product (and rounding) as from global memory
            bottom = slot[row + 8] * slot[BM];
        }
    }
};

// The scales a consumer thread of a tile at (m0, n0) reads; my_row: its top row in the tile (and + 8).
template <int SCALES, int BM>
__device__ __forceinline__ BlockScales<SCALES, BM> scales_for(const float* a_scales, const float* b_scales,
                                                              const float* stages, const WorkUnit& w, int M,
                                                              int k_blocks, int my_row)
{
    // Rows past M (never stored) read row M - 1's scales, so every address stays inside the array.
    return {a_scales + (size_t)min(w.m0 + my_row, M - 1) * k_blocks,
            a_scales + (size_t)min(w.m0 + my_row + 8, M - 1) * k_blocks,
            b_scales + (size_t)(w.n0 / FP8_SCALE_N) * k_blocks, stages, my_row};  // a tile lies in one scale tile of B
}

// The thread's two rows in one slice of the workspace: register 4j + i is row (+8 if i ≥ 2), column
// col + 8j + i%2, so every element is a fixed offset from one of two row pointers (64 separate addresses
// would not fit in registers beside the accumulators). A row past M takes the slice's first row as its
// pointer and is never touched: no address outside the workspace is ever formed, not even one left unused.
// `visit` stores one element.
struct StoreTo {
    __device__ void operator()(float* p, float& v) const { __stcg(p, v); }
};

// Row `row` of an M×N slice, or the slice itself for a row past M (never read or written through).
__device__ __forceinline__ float* slice_row(float* slice, int row, int M, int N)
{
    return row < M ? slice + (size_t)row * N : slice;
}

template <int REGS, typename Visit>
__device__ __forceinline__ void each_element(float (&acc)[REGS], float* slice, int M, int N, int row, int col,
                                             Visit visit)
{
    float* top = slice_row(slice, row, M, N);
    float* bottom = slice_row(slice, row + 8, M, N);
#pragma unroll
    for (int j = 0; j < REGS / 4; ++j) {
        const int c = col + 8 * j;
        if (c >= N) continue;
        const bool pair = c + 1 < N;
        if (row < M) {
            visit(top + c, acc[4 * j]);
            if (pair) visit(top + c + 1, acc[4 * j + 1]);
        }
        if (row + 8 < M) {
            visit(bottom + c, acc[4 * j + 2]);
            if (pair) visit(bottom + c + 1, acc[4 * j + 3]);
        }
    }
}

// A split unit's end: write the partial tile into this split's slice of the workspace (M×N floats
// per split); the last unit of the tile to arrive adds the slices in split order and writes bf16 C.
// Ordering: the consumers' stores, then the CTA barrier, then ONE acquire-release atomic on the
// tile's counter (arrive_epoch, tma.cuh), tagged with this launch's epoch.

template <int REGS>
__device__ __forceinline__ void finish_split_unit(float (&acc)[REGS], float* workspace, int* tile_counters,
                                                  unsigned epoch, int splits, const WorkUnit& w, u16* C, int M,
                                                  int N, int m0, int n0, int thread, int* last_flag)
{
    // m0, n0: where this consumer's 64 rows × REGS/2 columns of C start
    const int row = m0 + (thread / 32) * 16 + (thread % 32) / 4;  // and row + 8
    const int col = n0 + (thread % 4) * 2;
    const size_t slice = (size_t)M * N;
    each_element(acc, workspace + w.part * slice, M, N, row, col, StoreTo{});
    asm volatile("bar.sync 1, 256;\n" ::: "memory");  // both consumer warpgroups have stored
    if (threadIdx.x == 128) *last_flag = arrive_epoch(tile_counters + w.tile, epoch) == splits - 1;
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    if (!*last_flag) return;
    // Slice by slice, in split order. Plain loads: after the acquire (which also emptied this SM's L1)
    // they see the other units' stores, and unlike volatile-like ld.cg loads the compiler may issue all
    // of a row's loads before the first addition, so their latencies overlap instead of adding up.
    // acc, already stored, holds the total: no more registers than the main loop needs.
#pragma unroll
    for (int i = 0; i < REGS; ++i) acc[i] = 0.0f;
    const bool top_ok = row < M, bottom_ok = row + 8 < M;
    for (int q = 0; q < splits; ++q) {
        const float* top = slice_row(workspace + q * slice, row, M, N);
        const float* bottom = slice_row(workspace + q * slice, row + 8, M, N);
#pragma unroll
        for (int j = 0; j < REGS / 4; ++j) {
            const int c = col + 8 * j;
            const bool first = c < N, second = c + 1 < N;  // second implies first
            const float a = top_ok && first ? top[c] : 0.0f, b = top_ok && second ? top[c + 1] : 0.0f;
            const float d = bottom_ok && first ? bottom[c] : 0.0f;
            const float e = bottom_ok && second ? bottom[c + 1] : 0.0f;
            acc[4 * j] += a;
            acc[4 * j + 1] += b;
            acc[4 * j + 2] += d;
            acc[4 * j + 3] += e;
        }
    }
    store_tile_bf16(acc, 1.0f, C, M, N, m0, n0, thread);
}

// The overlapped k-loop of kernels (b) and (c): two partial sums in turn, so that while the CUDA cores
// promote one k-block, the Tensor Cores already sum the next one into the other buffer. Unrolled by
// two so that each buffer stays in fixed registers (a register array cannot be indexed by a run-time
// value). a_tile / b_tile: this consumer's operands in stage 0; a stage is a_bytes / b_bytes further.
//
//   wgmma  | kb   → p0 | kb+1 → p1 | kb+2 → p0 | ...
//   FMAs   |           | p0 += kb  | p1 += kb+1| ...
template <int STAGES, int REGS, typename Scales>
__device__ __forceinline__ void overlapped_k_blocks(float (&acc)[REGS], const WorkUnit& w, int& it,
                                                    const Scales& scales, unsigned a_tile, int a_bytes,
                                                    unsigned b_tile, int b_bytes, unsigned long long* full,
                                                    unsigned long long* empty, bool releaser)
{
    float p0[REGS] = {}, p1[REGS] = {};  // zeroed although each wgmma group overwrites them: see d above
    float top0, bottom0, top1, bottom1;  // each buffer's scales, loaded when its wgmma is issued
    auto issue = [&](float (&part)[REGS], float& top, float& bottom, int kb, int at) {
        const int s = at % STAGES;
        scales.before_wait(kb, top, bottom);  // from global memory: used only after the wgmma
        mbar_wait(smem_u32(&full[s]), (at / STAGES) % 2);
        scales.after_wait(s, top, bottom);    // from the stage, once it is full
        wgmma_fence();  // part was read by its last promotion: order that before wgmma rewrites it
        wgmma_k_block(part, a_tile + s * a_bytes, b_tile + s * b_bytes, true);
        wgmma_commit();
    };
    // After a k-block's sum is in `part` (ring position `at`): free its stage, promote it.
    auto retire = [&](float (&part)[REGS], float top, float bottom, int at) {
        pin(part);
        if (releaser) mbar_arrive(smem_u32(&empty[at % STAGES]));
        promote(acc, part, top, bottom);
    };
    const int first = it, count = w.kb_end - w.kb_begin;
    issue(p0, top0, bottom0, w.kb_begin, first);
    int i = 0;
    for (; i + 2 < count; i += 2) {  // on entry p0's k-block i is in flight, nothing else
        issue(p1, top1, bottom1, w.kb_begin + i + 1, first + i + 1);
        wgmma_wait<1>();  // p0's group is done; p1's keeps the Tensor Cores busy
        retire(p0, top0, bottom0, first + i);
        issue(p0, top0, bottom0, w.kb_begin + i + 2, first + i + 2);
        wgmma_wait<1>();
        retire(p1, top1, bottom1, first + i + 1);
    }
    if (i + 1 < count) {  // two k-blocks left: p0's is in flight
        issue(p1, top1, bottom1, w.kb_begin + i + 1, first + i + 1);
        wgmma_wait<1>();
        retire(p0, top0, bottom0, first + i);
        wgmma_wait<0>();
        retire(p1, top1, bottom1, first + i + 1);
    } else {              // one left
        wgmma_wait<0>();
        retire(p0, top0, bottom0, first + i);
    }
    it += count;
}

// map_a_scales: the M-major copy of A's scales (SCALES_TMA; unused otherwise, may be null). epoch: this
// launch's tag for the split-K counters (see SPLIT-K above).
template <int STAGES, bool OVERLAP, int SCALES = SCALES_GLOBAL>
__global__ void __launch_bounds__(384, 1)
fp8_gemm_blockwise(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                   const TensorMap* __restrict__ map_a_scales, const float* __restrict__ a_scales,
                   const float* __restrict__ b_scales, u16* __restrict__ C, int M, int N, int K, int splits,
                   float* __restrict__ workspace, int* __restrict__ tile_counters, unsigned epoch)
{
    constexpr int BN = 128, B_BYTES = BN * FP8_BK;  // BN = the side of B's scale tiles: one scale per k-block
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ int last_flag;
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * FP8_A_BYTES;
    const unsigned scale_base = b_base + STAGES * B_BYTES;  // STAGED, TMA: each stage's scales
    if (!start_roles<BN, STAGES, FP8_BM, SCALES>(map_a, map_b, map_a_scales, a_scales, b_scales, a_base, b_base,
                                                 scale_base, full, empty, M, N, K, splits))
        return;
    const float* stage_scales = reinterpret_cast<const float*>(smem + (scale_base - smem_u32(smem)));

    const int thread = threadIdx.x % 128, rows = (threadIdx.x / 128 - 1) * 64;
    const bool releaser = thread % 32 == 0;
    const int my_row = rows + (thread / 32) * 16 + (thread % 32) / 4;  // in the tile; and my_row + 8
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;  // also the row length of both scale arrays
    const unsigned a_rows = a_base + rows * FP8_BK;
    int it = 0;
    for (int u = blockIdx.x; u < unit_count<BN>(M, N, splits); u += gridDim.x) {
        const WorkUnit w = work_unit<BN>(u, M, N, k_blocks, splits);
        const auto scales = scales_for<SCALES, FP8_BM>(a_scales, b_scales, stage_scales, w, M, k_blocks, my_row);
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        if constexpr (!OVERLAP) {
            float part[BN / 2] = {};  // one k-block's sum, straight from the Tensor Cores (zeroed: see d above)
            float top, bottom;
            for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++it) {
                const int s = it % STAGES;
                scales.before_wait(kb, top, bottom);  // loaded here, used after the wgmma
                mbar_wait(smem_u32(&full[s]), (it / STAGES) % 2);
                scales.after_wait(s, top, bottom);
                wgmma_fence();  // part was read by the promotion below: order that before wgmma rewrites it
                wgmma_k_block(part, a_rows + s * FP8_A_BYTES, b_base + s * B_BYTES, true);
                wgmma_commit();
                wgmma_wait<0>();  // the promotion needs this k-block's sum now: the Tensor Cores wait
                pin(part);
                if (releaser) mbar_arrive(smem_u32(&empty[s]));  // stage s is read: the producer may refill it
                promote(acc, part, top, bottom);
            }
        } else {  // two partial sums in turn: promote one while the Tensor Cores sum the next
            overlapped_k_blocks<STAGES>(acc, w, it, scales, a_rows, FP8_A_BYTES, b_base, B_BYTES, full, empty,
                                        releaser);
        }
        if (splits == 1)
            store_tile_bf16(acc, 1.0f, C, M, N, w.m0 + rows, w.n0, thread);  // the scales are already in acc
        else
            finish_split_unit(acc, workspace, tile_counters, epoch, splits, w, C, M, N, w.m0 + rows, w.n0, thread,
                              &last_flag);
    }
}

// --- (c) the same scales and promotion for FEW ROWS of A: 64×BN tiles ----------------------------------
//
// With M = 64 tokens, kernel (b)'s 128-row tile computes 64 rows of zeros: half of every wgmma is
// wasted, and N/128 tiles leave most SMs idle. Here a tile is 64 rows × BN columns, and the two
// consumers split it by COLUMNS: consumer c computes columns c·BN/2 … (c+1)·BN/2 − 1 with m64n(BN/2)k32
// (BN/4 accumulators per thread: 32 for BN = 128, so acc + two partial sums = 96 registers). Both read
// the same 64 rows of A; their halves of B start BN/2 rows × 128 B apart in the stage. BN divides 128, so
// a tile's columns lie in one 128×128 scale tile of B and one B scale per k-block serves both. Promotion
// is overlapped as in (b), and split-K works the same way.
//
// BN < 128 (64, 32, 16) is for decode shapes whose N gives too few 128-wide tiles: at M = 64 and
// N = 2112, BN = 128 makes 17 tiles for 132 SMs (split-K then cuts each into k-ranges), BN = 16 makes 132.
// A narrower tile reads A again for every BN columns (from L2: A is small) and gives each wgmma less
// work; which width wins at which shape is measured, not assumed (the autotuner tries each).
//
//   stage (BN = 128):  A 64 rows × 128 B (8 KB)  |  B 128 rows × 128 B (16 KB): consumer 0 ← rows 0–63, 1 ← 64–127

template <int STAGES, int SCALES = SCALES_GLOBAL, int BN = 128>
__global__ void __launch_bounds__(384, 1)
fp8_gemm_blockwise_m64(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                       const TensorMap* __restrict__ map_a_scales, const float* __restrict__ a_scales,
                       const float* __restrict__ b_scales, u16* __restrict__ C, int M, int N, int K, int splits,
                       float* __restrict__ workspace, int* __restrict__ tile_counters, unsigned epoch)
{
    static_assert(BN == 128 || BN == 64 || BN == 32 || BN == 16, "BN divides B's 128-row scale tile; n = BN/2 ≥ 8");
    constexpr int BM = 64, REGS = BN / 4, A_BYTES = BM * FP8_BK, B_BYTES = BN * FP8_BK;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ int last_flag;
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const unsigned scale_base = b_base + STAGES * B_BYTES;  // STAGED, TMA: each stage's scales
    if (!start_roles<BN, STAGES, BM, SCALES>(map_a, map_b, map_a_scales, a_scales, b_scales, a_base, b_base,
                                             scale_base, full, empty, M, N, K, splits))
        return;
    const float* stage_scales = reinterpret_cast<const float*>(smem + (scale_base - smem_u32(smem)));

    const int thread = threadIdx.x % 128, cols = (threadIdx.x / 128 - 1) * (BN / 2);  // this consumer's columns
    const bool releaser = thread % 32 == 0;
    const int my_row = (thread / 32) * 16 + (thread % 32) / 4;  // in the tile; and my_row + 8
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;
    int it = 0;
    for (int u = blockIdx.x; u < unit_count<BN, BM>(M, N, splits); u += gridDim.x) {
        const WorkUnit w = work_unit<BN, BM>(u, M, N, k_blocks, splits);
        const auto scales = scales_for<SCALES, BM>(a_scales, b_scales, stage_scales, w, M, k_blocks, my_row);
        float acc[REGS];
#pragma unroll
        for (int i = 0; i < REGS; ++i) acc[i] = 0.0f;
        overlapped_k_blocks<STAGES>(acc, w, it, scales, a_base, A_BYTES, b_base + cols * FP8_BK, B_BYTES, full,
                                    empty, releaser);
        if (splits == 1)
            store_tile_bf16(acc, 1.0f, C, M, N, w.m0, w.n0 + cols, thread);
        else
            finish_split_unit(acc, workspace, tile_counters, epoch, splits, w, C, M, N, w.m0, w.n0 + cols, thread,
                              &last_flag);
    }
}
