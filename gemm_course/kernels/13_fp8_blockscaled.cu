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
// Two kernels, one measured step each:
//
//   (a) fp8_gemm_per_tensor   one scale for all of A, one for all of B: they factor out of the sum,
//                             so the consumers accumulate the whole K in the Tensor Cores' registers and
//                             multiply by a_scale · b_scale once, when they store C. 128×256 tiles, each
//                             consumer m64n256k32 (128 accumulators per thread), as Level 11 step 4.
//   (b) fp8_gemm_blockwise    1×128 scales of A and 128×128 scales of B, which change every 128 of k,
//                             so they cannot wait for the end. 128×128 tiles, each consumer m64n128k32.
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
// start on 16-byte boundaries. M and N are free: past the edges TMA fills zeros (a shorter last
// k-block of scales then covers only the real columns, as fp8.py defines it), and only elements
// inside C are stored (pairs of bf16 when N is even, single values when N is odd).
#include "tma.cuh"
#include "wgmma.cuh"

typedef unsigned short u16;  // bf16 bits

constexpr int FP8_BM = 128;               // rows of a tile: two consumers × 64
constexpr int FP8_BK = 128;               // k per stage: 128 bytes = one swizzle row = one scale block
constexpr int FP8_A_BYTES = FP8_BM * FP8_BK;
constexpr int FP8_CONSUMER_WARPS = 8;

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

// --- the producer warpgroup (both kernels) ---------------------------------------------------------
//
//   warpgroup 0 (producer, 40 registers)         warpgroups 1, 2 (consumers, 232 registers)
//   ─ wait empty[s] ─ TMA A, B k-block into s ─┐     ┌─ wait full[s] ─ wgmma × 4 ─ arrive empty[s] ─
//                                         full[s] ───┘
// One thread walks the same tiles in the same order as the consumers and keeps the ring full; a
// stage is one TMA box of A (128 rows) and one of B (BN rows), both 128 bytes of k wide.

template <int BN, int STAGES>
__device__ __forceinline__ void produce(const TensorMap* map_a, const TensorMap* map_b, unsigned a_base,
                                        unsigned b_base, unsigned long long* full, unsigned long long* empty,
                                        int M, int N, int K)
{
    constexpr int B_BYTES = BN * FP8_BK;
    const int tiles = ((M + FP8_BM - 1) / FP8_BM) * ((N + BN - 1) / BN);
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;
    int it = 0;  // k-blocks issued so far, over all tiles: position in the ring and its phase
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_origin<FP8_BM, BN>(t, M, N, m0, n0);
        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
            const int s = it % STAGES;
            const unsigned bar = smem_u32(&full[s]);
            mbar_wait(smem_u32(&empty[s]), (it / STAGES + 1) % 2);  // first round: passes at once
            mbar_expect_bytes(bar, FP8_A_BYTES + B_BYTES);          // parts past the edges count too (zeros)
            tma_load(a_base + s * FP8_A_BYTES, map_a, kb * FP8_BK, m0, bar);
            tma_load(b_base + s * B_BYTES, map_b, kb * FP8_BK, n0, bar);
        }
    }
}

// Barriers, then the producer's side. Returns false in the producer warpgroup (its work is done).
template <int BN, int STAGES>
__device__ __forceinline__ bool start_roles(const TensorMap* map_a, const TensorMap* map_b, unsigned a_base,
                                            unsigned b_base, unsigned long long* full, unsigned long long* empty,
                                            int M, int N, int K)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), 1);                     // the producer's expect_tx
            mbar_init(smem_u32(&empty[s]), FP8_CONSUMER_WARPS);   // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) produce<BN, STAGES>(map_a, map_b, a_base, b_base, full, empty, M, N, K);
        return false;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    return true;
}

// --- (a) one scale per tensor, applied when C is stored ------------------------------------------------

template <int STAGES>
__global__ void __launch_bounds__(384, 1)
fp8_gemm_per_tensor(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                    const float* __restrict__ a_scale, const float* __restrict__ b_scale, u16* __restrict__ C,
                    int M, int N, int K)
{
    constexpr int BN = 256, B_BYTES = BN * FP8_BK;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * FP8_A_BYTES;
    if (!start_roles<BN, STAGES>(map_a, map_b, a_base, b_base, full, empty, M, N, K)) return;

    const int thread = threadIdx.x % 128, rows = (threadIdx.x / 128 - 1) * 64;  // this consumer's rows
    const bool releaser = thread % 32 == 0;
    const float scale = a_scale[0] * b_scale[0];  // both factor out of the whole sum
    const int tiles = ((M + FP8_BM - 1) / FP8_BM) * ((N + BN - 1) / BN);
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_origin<FP8_BM, BN>(t, M, N, m0, n0);
        float d[BN / 2];
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

template <int STAGES>
__global__ void __launch_bounds__(384, 1)
fp8_gemm_blockwise(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                   const float* __restrict__ a_scales, const float* __restrict__ b_scales, u16* __restrict__ C,
                   int M, int N, int K)
{
    constexpr int BN = 128, B_BYTES = BN * FP8_BK;  // BN = the side of B's scale tiles: one scale per k-block
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * FP8_A_BYTES;
    if (!start_roles<BN, STAGES>(map_a, map_b, a_base, b_base, full, empty, M, N, K)) return;

    const int thread = threadIdx.x % 128, rows = (threadIdx.x / 128 - 1) * 64;
    const bool releaser = thread % 32 == 0;
    const int my_row = rows + (thread / 32) * 16 + (thread % 32) / 4;  // in the tile; and my_row + 8
    const int tiles = ((M + FP8_BM - 1) / FP8_BM) * ((N + BN - 1) / BN);
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;  // also the row length of both scale arrays
    float part[BN / 2];  // one k-block's sum, straight from the Tensor Cores
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_origin<FP8_BM, BN>(t, M, N, m0, n0);
        // The scale rows this thread needs. Rows past M (never stored) read row M - 1's scales, so
        // every address stays inside the array.
        const float* a_top = a_scales + (size_t)min(m0 + my_row, M - 1) * k_blocks;
        const float* a_bottom = a_scales + (size_t)min(m0 + my_row + 8, M - 1) * k_blocks;
        const float* b_row = b_scales + (size_t)(n0 / BN) * k_blocks;
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
            const int s = it % STAGES;
            // Read here, used only after the wgmma: the loads' latency hides behind the Tensor Core work.
            const float b_s = b_row[kb], a_s_top = a_top[kb], a_s_bottom = a_bottom[kb];
            mbar_wait(smem_u32(&full[s]), (it / STAGES) % 2);
            wgmma_fence();  // part was read by the promotion below: order that before wgmma rewrites it
            wgmma_k_block(part, a_base + s * FP8_A_BYTES + rows * FP8_BK, b_base + s * B_BYTES, true);
            wgmma_commit();
            wgmma_wait<0>();  // the promotion needs this k-block's sum now
            pin(part);
            if (releaser) mbar_arrive(smem_u32(&empty[s]));  // stage s is read: the producer may refill it
            const float top = a_s_top * b_s, bottom = a_s_bottom * b_s;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {  // registers 4j, 4j+1: row my_row; 4j+2, 4j+3: row my_row + 8
                acc[4 * j] = fmaf(part[4 * j], top, acc[4 * j]);
                acc[4 * j + 1] = fmaf(part[4 * j + 1], top, acc[4 * j + 1]);
                acc[4 * j + 2] = fmaf(part[4 * j + 2], bottom, acc[4 * j + 2]);
                acc[4 * j + 3] = fmaf(part[4 * j + 3], bottom, acc[4 * j + 3]);
            }
        }
        store_tile_bf16(acc, 1.0f, C, M, N, m0 + rows, n0, thread);  // the scales are already in acc
    }
}
