// Level 10 — Tensor Cores without the WMMA wrapper: mma.sync + ldmatrix + a multi-stage cp.async
// pipeline, with an XOR-swizzled shared layout. fp16 or bf16 inputs (BF16), fp32 accumulation, fp32 C.
// sm_80+; the copy = "tma" setting (the second kernel) needs sm_90. Three kernels: this one; the same
// math fed by TMA; and, at the end of the file, the same math again with the feeding overlapped.
//
// Block tile 128×BN (BN = 128 or 256), k-tile 32 (or BK = 64, below), 8 warps as 2 (m) × 4 (n);
// each warp owns a 64×(BN/4) tile of C as 4 × (BN/32) mma tiles of 16×8 (m16n8k16: one instruction
// multiplies a 16×16 piece of A by a 16×8 piece of B). Per 16-deep k-step a warp issues 4
// ldmatrix.x4 for A, BN/64 ldmatrix.x4.trans for B and BN/8 mma.sync: with BN = 256 each fragment
// of A feeds twice as many mma.sync (the 64×64 warp tile), at the price of 128 accumulators per
// thread and one block per SM.
//
//   global ──cp.async 16 B──▶ shared stage s ──ldmatrix──▶ registers ──mma.sync──▶ accumulators
//            (no registers,      (STAGES buffers:          (one instruction
//             zero-fill past     tiles kt+1 … kt+STAGES-1   loads a warp's
//             the edges)         are in flight while        8×8 matrices)
//                                tile kt is computed)
//
// Shared layout and swizzle. A stage holds A as 128 rows × 32 halves (4 chunks of 16 B per row)
// and B as 32 rows (k) × BN halves (BN/8 chunks per row). ldmatrix reads one 16-byte chunk from each
// of 8 consecutive rows at once. Unswizzled, those 8 chunks would sit 64 B (A) or 2·BN B (B) apart
// and share banks (4-way and 8-way conflicts). Storing chunk c of row r at position
//     A: c ^ ((r / 2) % 4)          B: c ^ (r % 8)
// puts the 8 chunks of any such read in 8 different 16-byte bank groups, conflict-free; the copy
// in and the ldmatrix out apply the same function, so the permutation is invisible to the math.
// With BK = 64 an A row is 8 chunks (128 B) and A's swizzle becomes c ^ (r % 8), as B's: half the
// barriers per flop, twice the shared memory per stage.
//
// Preconditions (the launcher checks them): K and N multiples of 8 and 16-byte aligned pointers,
// so every 16-byte chunk is wholly inside or outside its matrix. M is free. Out-of-range chunks are
// zero-filled by cp.async (source size 0); only elements inside C are stored.

#include "tma.cuh"

#define MMA_BM 128
#define MMA_BK 32
#define MMA_THREADS 256

__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ int swizzle_a(int row, int chunk) { return row * 4 + (chunk ^ ((row >> 1) & 3)); }
template <int BN>
__device__ __forceinline__ int swizzle_b(int row, int chunk) { return row * (BN / 8) + (chunk ^ (row & 7)); }
// BK = 64: an A row is 8 chunks (128 B), so 8 consecutive rows already start on the same bank and the
// row's low 3 bits pick the position, as in B (and as TMA's 128-byte swizzle does).
__device__ __forceinline__ int swizzle_a64(int row, int chunk) { return row * 8 + (chunk ^ (row & 7)); }
template <int BK>
__device__ __forceinline__ int swizzle_a_bk(int row, int chunk)
{
    if constexpr (BK == 32) return swizzle_a(row, chunk);
    else return swizzle_a64(row, chunk);
}

// Four 8×8 matrices of 16-bit elements from shared memory, one per register; each lane supplies the
// address of one 16-byte row. TRANS transposes each matrix on the way (B as the .col operand).
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned address)
{
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));
}

// acc += a · b for one m16n8k16 tile; the input type only changes the instruction's name.
template <bool BF16>
__device__ __forceinline__ void mma_16816(float (&acc)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
    if constexpr (BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// PARTS, for measurement only (python -m gemm_course peak): 3 runs the kernel; 1 keeps only the copies
// and the pipeline (no ldmatrix, no mma.sync), 2 keeps only the barriers and the math on whatever the
// shared buffers hold. Timing the three shows which part sets the kernel's speed. MMA_NO_BARRIER (4)
// added to MMA_MATH also drops the block-wide barrier, so that the barrier's own cost is measured
// rather than assumed (with copies it would be a race: never combine it with MMA_COPIES).
enum MmaPipelineParts { MMA_COPIES = 1, MMA_MATH = 2, MMA_ALL = 3, MMA_NO_BARRIER = 4 };

// A warp's MT × NT accumulator tiles into C, whose tile starts at (row0, col0). The m16n8 layout:
// lane holds rows g and g+8 (g = lane / 4), columns 2·(lane % 4) + {0, 1}: pairs of floats (float2).
template <int MT, int NT>
__device__ __forceinline__ void store_accumulators(const float (&acc)[MT][NT][4], float* C, int M, int N,
                                                   int row0, int col0, int lane)
{
    const int g = lane / 4, q = (lane % 4) * 2;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row0 + i * 16 + g + h * 8, c = col0 + j * 8 + q;
                if (r < M && c < N)  // N is a multiple of 8 and c is even: c + 1 < N too
                    *reinterpret_cast<float2*>(C + (size_t)r * N + c) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
}

template <int STAGES, bool BF16, int BN = 128, int BK = MMA_BK, int PARTS = MMA_ALL>
__global__ void __launch_bounds__(MMA_THREADS, BN == 128 ? 2 : 1)
gemm_mma_pipeline(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                  float* __restrict__ C, int M, int N, int K)
{
    static_assert(!((PARTS & MMA_NO_BARRIER) && (PARTS & MMA_COPIES)), "without the barrier, copies would race");
    extern __shared__ __align__(128) unsigned char smem[];
    static_assert(BK == 32 || BK == 64, "k-tiles of 32 or 64");
    constexpr int NT = BN / 32;  // n8 tiles per warp
    constexpr int A_ROW = BK / 8;  // chunks per row of A's tile
    // Stage s: A chunks [s][128 × BK/8], then B chunks [s][BK × BN/8]; a chunk is 16 bytes (uint4).
    uint4* const a_chunks = reinterpret_cast<uint4*>(smem);
    uint4* const b_chunks = a_chunks + STAGES * MMA_BM * A_ROW;

    // Grouped block order for L2 reuse (as in Level 8).
    const int tiles_m = (M + MMA_BM - 1) / MMA_BM, tiles_n = (N + BN - 1) / BN;
    const int per_group = 8 * tiles_n;
    const int first_m = (blockIdx.x / per_group) * 8;
    const int group_rows = min(tiles_m - first_m, 8);
    const int row0 = (first_m + (blockIdx.x % per_group) % group_rows) * MMA_BM;
    const int col0 = ((blockIdx.x % per_group) / group_rows) * BN;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * (BN / 4);  // this warp's 64×(BN/4) tile

    // Issue the copies of k-tile kt into stage s: 16·BK A chunks and BK·BN/8 B chunks; with BK = 32
    // that is 2 + BN/64 per thread.
    auto load_tile = [&](int kt, int s) {
        const int k0 = kt * BK;
#pragma unroll
        for (int i = 0; i < BK / 16; ++i) {
            const int e = tid + i * MMA_THREADS;
            const int r = e / A_ROW, c = e % A_ROW;  // A: row r of the tile, chunk c (8 halves of k)
            const bool ok = row0 + r < M && k0 + c * 8 < K;
            const unsigned short* src = ok ? A + (size_t)(row0 + r) * K + k0 + c * 8 : A;
            cp_async_16(smem_u32(a_chunks + s * MMA_BM * A_ROW + swizzle_a_bk<BK>(r, c)), src, ok);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 2048; ++i) {
            const int e = tid + i * MMA_THREADS;
            const int r = e / (BN / 8), c = e % (BN / 8);  // B: row r (k) of the tile, chunk c (8 halves of n)
            const bool ok = k0 + r < K && col0 + c * 8 < N;
            const unsigned short* src = ok ? B + (size_t)(k0 + r) * N + col0 + c * 8 : B;
            cp_async_16(smem_u32(b_chunks + s * BK * (BN / 8) + swizzle_b<BN>(r, c)), src, ok);
        }
    };

    float acc[4][NT][4];  // [m16 tile][n8 tile][fragment element]
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    const int tiles_k = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {  // fill the pipeline
        if (PARTS & MMA_COPIES && s < tiles_k) load_tile(s, s);
        asm volatile("cp.async.commit_group;\n" ::);
    }

    for (int kt = 0; kt < tiles_k; ++kt) {
        // Tile kt has landed once at most STAGES-2 newer groups are still in flight.
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        if constexpr (!(PARTS & MMA_NO_BARRIER))
            __syncthreads();  // everyone's copies of tile kt are visible; everyone is done with kt-1
        const int next = kt + STAGES - 1;  // refill the stage that tile kt-1 used
        if (PARTS & MMA_COPIES && next < tiles_k) load_tile(next, next % STAGES);
        asm volatile("cp.async.commit_group;\n" ::);  // an empty group keeps the count uniform

        if constexpr (!(PARTS & MMA_MATH)) continue;
        const int s = kt % STAGES;
        const uint4* as = a_chunks + s * MMA_BM * A_ROW;
        const uint4* bs = b_chunks + s * BK * (BN / 8);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[4][4], b[NT][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {  // A 16×16: lanes 0-15 rows at k chunk 0, lanes 16-31 at chunk 1
                const int r = wm + i * 16 + lane % 16, c = kk / 8 + lane / 16;
                ldmatrix_x4<false>(a[i][0], a[i][1], a[i][2], a[i][3], smem_u32(as + swizzle_a_bk<BK>(r, c)));
            }
#pragma unroll
            for (int j = 0; j < NT / 2; ++j) {  // B 16(k)×16(n), transposed: two n8 tiles per ldmatrix
                const int r = kk + lane % 16, c = (wn + j * 16) / 8 + lane / 16;
                ldmatrix_x4<true>(b[2 * j][0], b[2 * j][1], b[2 * j + 1][0], b[2 * j + 1][1],
                                  smem_u32(bs + swizzle_b<BN>(r, c)));
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j)
                    mma_16816<BF16>(acc[i][j], a[i], b[j]);
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);

    store_accumulators(acc, C, M, N, row0 + wm, col0 + wn, lane);
}


// --- copy = "tma" (sm_90): the same math, fed by the TMA engine --------------------------------------
//
// The kernel above issues its own copies (a third of its warps' memory instructions) and meets the
// whole block at a barrier every k-tile; the chapter measures what both cost. Here one thread asks
// the TMA engine for whole k-tiles, 64 deep, each completing on the "full" mbarrier of its stage. A
// warp that has read a stage arrives on the stage's "empty" mbarrier, and thread 0 refills the stage
// once all 8 warps have. No warp waits for another except through the data it needs. The math is
// the BN = 256 setting's: 8 warps as 2 (m) × 4 (n), a 64×64 warp tile, ldmatrix + mma.sync.
//
//   stage s   A: 128 rows × 64 k, row r = 8 chunks of 16 B, chunk c stored at c ^ (r % 8)
//             B: 4 boxes of 64 k × 64 n (box j at +8192 B), row k = 8 chunks, chunk c at c ^ (k % 8)
//             (TMA's 128-byte swizzle: the same conflict-free pattern as above, written by the engine)
//
//   thread 0     issue k-tiles 0 … STAGES-1; at k-tile kt ≥ 1: wait empty[(kt-1) % STAGES], issue
//                k-tile kt-1+STAGES into that stage
//   every warp   wait full[kt % STAGES] → 4 k-steps of ldmatrix + mma.sync → arrive empty[kt % STAGES]
//
// Preconditions as above (TMA needs 16-byte row strides: K and N multiples of 8); TMA fills zeros
// past the edges of A and B.
template <bool BF16, int STAGES>
__global__ void __launch_bounds__(MMA_THREADS, 1)
gemm_mma_tma(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
             float* __restrict__ C, int M, int N, int K)
{
    constexpr int BM = MMA_BM, BN = 256, A_BYTES = BM * HOPPER_BK * 2, B_BYTES = BN * HOPPER_BK * 2;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 64;  // this warp's 64×64 tile
    int m0, n0;
    tile_origin<BM, BN>(blockIdx.x, M, N, m0, n0);
    const int tiles_k = (K + HOPPER_BK - 1) / HOPPER_BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), 1);   // the expect_tx of thread 0
            mbar_init(smem_u32(&empty[s]), 8);  // one arrival per warp
        }
        fence_barrier_init();
    }
    __syncthreads();
    auto issue = [&](int kt) {
        const int s = kt % STAGES;
        tma_load_k_tile<BM, BN>(map_a, map_b, a_base + s * A_BYTES, b_base + s * B_BYTES, m0, n0,
                                kt * HOPPER_BK, smem_u32(&full[s]));
    };
    if (tid == 0)
        for (int kt = 0; kt < STAGES && kt < tiles_k; ++kt) issue(kt);

    float acc[4][8][4] = {};
    for (int kt = 0; kt < tiles_k; ++kt) {
        const int s = kt % STAGES;
        if (tid == 0 && kt > 0 && kt - 1 + STAGES < tiles_k) {  // the stage of k-tile kt-1, once all warps left it
            mbar_wait(smem_u32(&empty[(kt - 1) % STAGES]), ((kt - 1) / STAGES) % 2);
            issue(kt - 1 + STAGES);
        }
        mbar_wait(smem_u32(&full[s]), (kt / STAGES) % 2);
        // The warp meets again before the warp-wide ldmatrix and mma.sync (.aligned): thread 0 may have
        // waited on "empty" and issued copies alone, and each lane left its own wait loop.
        __syncwarp();
        const unsigned as = a_base + s * A_BYTES, bs = b_base + s * B_BYTES;
#pragma unroll
        for (int kk = 0; kk < HOPPER_BK; kk += 16) {
            unsigned a[4][4], b[8][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {  // as in the kernel above, on TMA's swizzle
                const int r = wm + i * 16 + lane % 16, c = kk / 8 + lane / 16;
                ldmatrix_x4<false>(a[i][0], a[i][1], a[i][2], a[i][3], as + r * 128 + ((c ^ (r & 7)) << 4));
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = wn + j * 16, k = kk + lane % 16, c = (n % 64) / 8 + lane / 16;
                ldmatrix_x4<true>(b[2 * j][0], b[2 * j][1], b[2 * j + 1][0], b[2 * j + 1][1],
                                  bs + (n / 64) * 8192 + k * 128 + ((c ^ (k & 7)) << 4));
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) mma_16816<BF16>(acc[i][j], a[i], b[j]);
        }
        __syncwarp();  // every lane's ldmatrix of this stage is done
        if (lane == 0) mbar_arrive(smem_u32(&empty[s]));
    }
    store_accumulators(acc, C, M, N, m0 + wm, n0 + wn, lane);
}


// --- The overlapped kernel: the same math, fed without stopping it -----------------------------------
//
// Both kernels above leave the Tensor Cores idle at moments the chapter measures: after each barrier
// every warp computes its copy addresses at the same time (about 140 instructions per thread and
// k-tile in the cp.async kernel, with no mma.sync among them), the first mma.sync of a k-tile waits
// for that k-tile's ldmatrix, and the block barrier lines all the warps up once per k-tile. This
// kernel keeps the math (64×64 warp tiles, ldmatrix + mma.sync, 2 warps down and BN/64 across: 8
// warps for 128×256, 4 for 128×128) and the TMA kernel's shared layout, and changes how it is fed.
// Each change is one parameter:
//
//   frag_buffers = 2     two sets of fragment registers: the ldmatrix of k-step t+1 is issued before
//                        the mma.sync of k-step t, across k-tiles too, so a k-tile's first fragments
//                        (and the wait for that k-tile) come before the last mma.sync of the k-tile
//                        before it: the Tensor Cores have work while the warp waits
//   copy_issue = spread  the cp.async of a k-tile go one after each row of 8 mma.sync, 3 or 4 per
//                        k-step, instead of all at once after the barrier
//   copy = cp_async_mbarrier  no block barrier: each thread's copies of a stage complete on the
//                        stage's "full" mbarrier (cp.async.mbarrier.arrive, sm_80), and each warp
//                        frees a stage on its "empty" mbarrier right after its last ldmatrix there
//   BK = 32 or 64        the k-tile depth (64: half the waits per flop, twice the shared memory)
//   BN = 128             4 warps; with at most 96 KB of stages (BK = 64: 3 stages; BK = 32: 4) two
//                        blocks share an SM (2 × 128 threads × 255 registers fit): one block's waits
//                        and its final stores of C run beside the other block's mma.sync
//   copy = tma           (frag_buffers = 2) the TMA kernel with the same fragment pipelining, each
//                        stage released after its last ldmatrix instead of after its last mma.sync
//
// Three more change only the schedule of the same instructions (frag_buffers = 2):
//
//   refill_lag = 2       (mbarrier feeds) a refill reuses the stage of k-tile kt-2, not kt-1. With 1,
//                        the refilling thread (thread 0 for TMA, every thread for cp_async_mbarrier)
//                        waits for the slowest warp to finish k-tile kt-1, so the "empty" wait ties
//                        the warps together much like a barrier; every warp left kt-2 a k-tile ago,
//                        so that wait is almost always over already. The price: one k-tile less in
//                        flight (stages - 2).
//   ldmatrix_issue = spread  the next k-step's 8 ldmatrix go one A and one B after each row of 8
//                        mma.sync, instead of all 8 before the k-step: shared memory sees a steady
//                        trickle rather than bursts, and a wait for a new k-tile comes after the
//                        first row, with 8 mma.sync already queued.
//   mma_order = serpentine  odd rows of the 4×8 mma.sync run right to left, so consecutive mma.sync
//                        share a fragment at the turn too (A within a row, B at the turn): fewer
//                        register reads.
//
//   one k-step, ldmatrix_issue = burst and spread (A_i: A's m16 tile i, B_j: B's n-pair j):
//
//   burst:   A0 A1 A2 A3 B0 B1 B2 B3 │ row0 (8 mma) │ row1 │ row2 │ row3
//   spread:  row0 │ wait? A0 B0 │ row1 │ A1 B1 │ row2 │ A2 B2 │ row3 │ A3 B3 free?
//
// In every setting each thread's copy addresses and ldmatrix offsets are computed once, before the
// loop: the layout below makes the offset of k-step p one XOR with the constant p << 5, and the
// stage only adds a base.
//
//   the k-steps of one 64-deep k-tile (p = 0..3) in one warp, frag_buffers = 1 and 2:
//
//   1:  wait·ldsm 0·mma 0 │ ldsm 1·mma 1 │ ldsm 2·mma 2 │ ldsm 3·mma 3 │ wait·ldsm 0'·mma 0' …
//                            (each mma.sync waits for the ldmatrix just before it)
//   2:  ldsm 1·mma 0 │ ldsm 2·mma 1 │ ldsm 3·free·mma 2 │ wait·ldsm 0'·mma 3 │ ldsm 1'·mma 0' …
//                            (each mma.sync uses registers loaded one k-step earlier; "free": the
//                             warp's last ldmatrix of the stage is done, mbarrier and TMA release it)
//
//   stage s   A: 128 rows × BK k, row r = BK/8 chunks of 16 B; BK = 64: chunk c at c ^ (r % 8) (as
//             TMA writes it), BK = 32: chunk c at c ^ ((r / 2) % 4) (as swizzle_a above)
//             B: BN/64 boxes of BK k × 64 n (box j at + BK·128 B), row k = 8 chunks, chunk c at
//             c ^ (k % 8)
//
//   refill    between the waits for k-tiles kt and kt+1, each thread copies its share of k-tile
//             kt + STAGES - 1 into the stage k-tile kt-1 used (barrier: every warp has passed the
//             barrier before kt, so has left kt-1; mbarrier: after waiting for kt-1's "empty";
//             TMA: thread 0 waits for that "empty" and asks for the whole k-tile)
//
// Preconditions as the kernels above (K and N multiples of 8, 16-byte aligned pointers).

enum MmaFeed { FEED_CP_ASYNC_BARRIER = 0, FEED_CP_ASYNC_MBARRIER = 1, FEED_TMA = 2 };

// Wait for the phase of an mbarrier with this parity. sm_90's try_wait lets the hardware suspend the
// thread for a while; sm_80 has only test_wait, polled.
__device__ __forceinline__ void wait_phase(unsigned bar, unsigned parity)
{
#if __CUDA_ARCH__ >= 900
    mbar_wait(bar, parity);
#else
    unsigned done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
#endif
}

// This thread arrives on `bar` once all the cp.async it has issued so far have landed. .noinc: the
// arrival counts against the barrier's initial count (here one per thread), like a plain arrive.
__device__ __forceinline__ void cp_async_arrive(unsigned bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(bar) : "memory");
}

// Byte offset of chunk `chunk` of row `row` in A's tile of a stage (BK/8 chunks per row).
template <int BK>
__device__ __forceinline__ unsigned a_tile_offset(int row, int chunk)
{
    if constexpr (BK == 64) return row * 128 + ((chunk ^ (row & 7)) << 4);
    else return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}

template <bool BF16, int STAGES, int FEED, int BN, int BK, int FRAG_BUFFERS, bool SPREAD_COPIES, int REFILL_LAG,
          bool SPREAD_LDMATRIX, bool SERPENTINE, int PARTS>
__device__ __forceinline__ void mma_overlapped(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                                               const TensorMap* map_a, const TensorMap* map_b,
                                               float* __restrict__ C, int M, int N, int K)
{
    // BN/64 warps across (64×64 each), 2 down: 8 warps for 128×256, 4 for 128×128; one thread per column.
    constexpr int BM = MMA_BM, THREADS = BN, WARPS = BN / 32, WARPS_N = BN / 64, KSTEPS = BK / 16;
    constexpr int A_ROW_BYTES = BK * 2, A_BYTES = BM * BK * 2, BOX_BYTES = BK * 128, B_BYTES = BN * BK * 2;
    // Per thread and k-tile: A_COPIES chunks of A (rows A_ROW_STEP apart) and BK/8 of B (k-rows 8 apart).
    constexpr int A_CHUNKS = BK / 8, A_ROW_STEP = THREADS / A_CHUNKS, B_CHUNKS = BN / 8;
    constexpr int A_COPIES = BM / A_ROW_STEP, COPIES = A_COPIES + BK / 8;
    constexpr int PER_STEP = SPREAD_COPIES ? COPIES / KSTEPS : COPIES;  // copies issued in one k-step
    constexpr int COMMIT_STEP = SPREAD_COPIES ? KSTEPS - 1 : 0;          // the k-step that issues the last ones
    constexpr bool MBARRIERS = FEED != FEED_CP_ASYNC_BARRIER, COPY = PARTS & MMA_COPIES, MATH = PARTS & MMA_MATH;
    static_assert(BK == 32 || BK == 64, "k-tiles of 32 or 64");
    static_assert(BN == 128 || BN == 256, "4 or 8 warps of 64×64");
    static_assert(FEED != FEED_TMA || (BK == 64 && !SPREAD_COPIES), "TMA copies whole 64-deep k-tiles");
    static_assert(COPIES % KSTEPS == 0 && COPIES / KSTEPS <= 4, "the copies spread evenly, at most one per row of mma");
    static_assert(!((PARTS & MMA_NO_BARRIER) && (PARTS & MMA_COPIES)), "without the barrier, copies would race");
    static_assert(REFILL_LAG == 1 || (MBARRIERS && REFILL_LAG < STAGES),
                  "a later refill needs the per-stage mbarriers and a k-tile still in flight");
    static_assert(!SPREAD_LDMATRIX || FRAG_BUFFERS == 2, "spreading the next k-step's ldmatrix needs a second set");

    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / WARPS_N) * 64, wn = (warp % WARPS_N) * 64;  // this warp's 64×64 tile
    int m0, n0;
    tile_origin<BM, BN>(blockIdx.x, M, N, m0, n0);
    const int tiles_k = (K + BK - 1) / BK;

    if (MBARRIERS && tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), FEED == FEED_TMA ? 1 : THREADS);  // TMA: thread 0's expect_tx
            mbar_init(smem_u32(&empty[s]), WARPS);                          // one arrival per warp
        }
        if constexpr (FEED == FEED_TMA) fence_barrier_init();  // visible to the TMA engine too
    }
    __syncthreads();

    // This thread's copies, fixed for the whole loop: A row a_row + i·A_ROW_STEP, chunk a_chunk; B
    // k-row b_row + 8i, chunk b_chunk of the BN/8 across the tile (box b_chunk / 8, chunk b_chunk % 8
    // in it). Every A row this thread copies has the same swizzle (A_ROW_STEP is a multiple of 8), and
    // so has every B row (8 apart): the shared offsets are one base plus constants.
    const int a_row = tid / A_CHUNKS, a_chunk = tid % A_CHUNKS, b_row = tid / B_CHUNKS, b_chunk = tid % B_CHUNKS;
    const unsigned a_dst = a_tile_offset<BK>(a_row, a_chunk);
    const unsigned b_dst = (b_chunk / 8) * BOX_BYTES + b_row * 128 + (((b_chunk % 8) ^ b_row) << 4);
    const unsigned short* const a_src = A + (size_t)(m0 + a_row) * K + a_chunk * 8;  // + i·A_ROW_STEP·K + k0
    const unsigned short* const b_src = B + (size_t)b_row * N + n0 + b_chunk * 8;    // + (k0 + 8i)·N
    const size_t a_rows_apart = (size_t)A_ROW_STEP * K, b_rows_apart = (size_t)8 * N;
    unsigned a_rows_inside = 0;  // bit i: this thread's i-th A row is inside A
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) a_rows_inside |= (m0 + a_row + i * A_ROW_STEP < M ? 1u : 0u) << i;
    const bool b_columns_inside = n0 + b_chunk * 8 < N;

    // Copy number q (A's first, then B's) of this thread's share of k-tile kt into its stage. Past the
    // last k-tile every chunk is past K: zeros, into a stage no one reads again, and no branch needed.
    auto copy_chunk = [&](int q, int kt) {
        const int k0 = kt * BK, s = kt % STAGES;
        if (q < A_COPIES) {
            const bool ok = (a_rows_inside >> q & 1) && k0 + a_chunk * 8 < K;
            cp_async_16(a_base + s * A_BYTES + a_dst + q * A_ROW_STEP * A_ROW_BYTES,
                        ok ? a_src + (k0 + q * a_rows_apart) : A, ok);
        } else {
            const int i = q - A_COPIES;
            const bool ok = b_columns_inside && k0 + b_row + 8 * i < K;
            cp_async_16(b_base + s * B_BYTES + b_dst + i * 8 * 128,
                        ok ? b_src + ((size_t)(unsigned)k0 * (unsigned)N + i * b_rows_apart) : B, ok);
        }
    };

    // ldmatrix offsets, fixed: lanes 0-15 address rows 0-15 of a 16×16 piece, lanes 16-31 the same
    // rows one chunk (8 k) further. The chunk of k-step p is 2p + lane/16, and (2p + h) ^ x equals
    // (h ^ x) ^ 2p: so the swizzled offset for k-step p is the offset for k-step 0 XOR (p << 5), and for
    // B's n-pair j (chunk 2j + h) the offset for j = 0 XOR (j << 5).
    const unsigned a_lane = a_tile_offset<BK>(wm + lane % 16, lane / 16);
    const unsigned b_lane = (wn / 64) * BOX_BYTES + (lane % 16) * 128 + (((lane / 16) ^ (lane & 7)) << 4);

    using AFrag = unsigned[4][4];
    using BFrag = unsigned[8][2];
    // One piece of k-step p's fragments from stage s: A's m16 tile `part` (rows 16·part …) and B's
    // n-pair `part` (two n8 tiles). The four pieces make the whole k-step.
    auto load_fragment_piece = [&](int s, int p, int part, AFrag& a, BFrag& b) {
        const unsigned as = a_base + s * A_BYTES, bs = b_base + s * B_BYTES;
        ldmatrix_x4<false>(a[part][0], a[part][1], a[part][2], a[part][3],
                           as + (a_lane ^ (p << 5)) + part * 16 * A_ROW_BYTES);
        ldmatrix_x4<true>(b[2 * part][0], b[2 * part][1], b[2 * part + 1][0], b[2 * part + 1][1],
                          bs + (b_lane ^ (part << 5)) + p * 16 * 128);
    };

    auto issue_tma = [&](int kt) {
        const int s = kt % STAGES;
        tma_load_k_tile<BM, BN>(map_a, map_b, a_base + s * A_BYTES, b_base + s * B_BYTES, m0, n0, kt * BK,
                                smem_u32(&full[s]));
    };

    // Wait until every warp has left the stage of k-tile `done` (its "empty" mbarrier), before
    // refilling that stage. refill_lag = 1: done = kt - 1, the k-tile just finished, so the waiting
    // thread keeps pace with the slowest warp; 2: done = kt - 2, which every warp left a whole k-tile
    // ago, so the wait is almost always already over (one k-tile less in flight).
    auto wait_stage_free = [&](int done) {
        if (done >= 0) wait_phase(smem_u32(&empty[done % STAGES]), (done / STAGES) % 2);
    };

    // One slot: load the fragments of k-step p of k-tile kt, with whatever must happen at that point.
    // From the slot of k-tile kt's k-step 0 to the slot of k-tile kt+1's k-step 0, this thread issues
    // its copies of k-tile kt + STAGES - refill_lag into the stage that k-tile kt - refill_lag used:
    // in burst here, at k-step 0; spread, in mma_step. live = kt < tiles_k (false: the slot after the
    // last k-step, nothing to load), passed in so that the compiler sees it constant wherever it is.
    // A slot is three parts: the wait for the k-tile (k-step 0 only), the four pieces of fragments,
    // and what follows the last piece (freeing the stage, burst copies). ldmatrix_issue = spread runs
    // them inside the previous k-step's mma.sync (see mma_step); slot runs them back to back.
    auto slot_wait = [&](int kt, int p) {
        if (p != 0) return;  // k-tile kt's first fragments: it must have landed
        if constexpr (FEED == FEED_CP_ASYNC_BARRIER) {
            if (COPY) asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
            if constexpr (!(PARTS & MMA_NO_BARRIER))
                __syncthreads();  // everyone's copies of kt are visible; everyone has left kt-1
        } else if (COPY) {
            wait_phase(smem_u32(&full[kt % STAGES]), (kt / STAGES) % 2);
        }
    };
    auto slot_finish = [&](int kt, int p) {
        if (MBARRIERS && COPY && p == KSTEPS - 1) {  // this warp's last ldmatrix of the stage is done
            __syncwarp();
            if (lane == 0) mbar_arrive(smem_u32(&empty[kt % STAGES]));
        }
        if (FEED != FEED_TMA && !SPREAD_COPIES && COPY && p == 0) {  // burst: all the refill, now
            if (MBARRIERS) wait_stage_free(kt - REFILL_LAG);
#pragma unroll
            for (int q = 0; q < COPIES; ++q) copy_chunk(q, kt + STAGES - REFILL_LAG);
        }
    };
    auto slot = [&](int kt, int p, AFrag& a, BFrag& b, bool live) {
        if (!live) return;
        slot_wait(kt, p);
        if (MATH) {
#pragma unroll
            for (int part = 0; part < 4; ++part) load_fragment_piece(kt % STAGES, p, part, a, b);
        }
        slot_finish(kt, p);
    };

    float acc[4][8][4];  // [m16 tile][n8 tile][fragment element]
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    // The mma.sync of one k-step, which follows slot (kt, p). copy_issue = spread: that slot's share of
    // the copies goes between the rows of mma.sync, one after each row of 8 (and a wait for a stage
    // to be free goes after the first row, so the Tensor Cores have work during it; TMA: thread 0's
    // refill too). The k-step that ends the slots' copies closes them: a commit group (barrier), or
    // this thread's arrival on the stage's "full" mbarrier once they land (mbarrier). math = false:
    // only the copies (the first slot of frag_buffers = 2 has no mma.sync after it).
    // ldmatrix_issue = spread (load_next): the slot itself also happens here, one piece after each
    // row, into a_next / b_next; the wait for a new k-tile after the first row.
    // mma_order = serpentine: odd rows run their 8 mma.sync right to left, so the row's first
    // mma.sync uses the B fragment that the previous one just used.
    auto mma_step = [&](const AFrag& a, const BFrag& b, AFrag& a_next, BFrag& b_next, int kt, int p, bool math,
                        bool live, bool load_next) {
        const int fill = kt + STAGES - REFILL_LAG;
        const bool refill = COPY && live;  // not live: no slot before, nothing to refill
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if (MATH && math) {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const int n = SERPENTINE && i % 2 ? 7 - j : j;
                    mma_16816<BF16>(acc[i][n], a[i], b[n]);
                }
            }
            // The barrier feed's refill may start only after the barrier of k-tile kt (it is what says
            // every warp has left the stage): with ldmatrix_issue = spread that barrier is here.
            constexpr bool BARRIER_FIRST = FEED == FEED_CP_ASYNC_BARRIER;
            if (BARRIER_FIRST && load_next && live && i == 0) slot_wait(kt, p);
            if (refill && i == 0 && p == 0) {  // a refill starts: wait until every warp has left its stage
                if constexpr (FEED == FEED_TMA) {
                    if (tid == 0 && fill < tiles_k) {
                        wait_stage_free(kt - REFILL_LAG);
                        issue_tma(fill);
                    }
                } else if constexpr (MBARRIERS && SPREAD_COPIES) {
                    wait_stage_free(kt - REFILL_LAG);
                }
            }
            if (refill && FEED != FEED_TMA && SPREAD_COPIES && i < PER_STEP) copy_chunk(p * PER_STEP + i, fill);
            if (load_next && live) {
                if (!BARRIER_FIRST && i == 0) slot_wait(kt, p);  // after the refill's start: TMA asks early
                if (MATH) load_fragment_piece(kt % STAGES, p, i, a_next, b_next);
                if (i == 3) slot_finish(kt, p);
            }
        }
        if (FEED != FEED_TMA && COPY && p == COMMIT_STEP && live) {
            if constexpr (MBARRIERS) {
                if (fill < tiles_k) cp_async_arrive(smem_u32(&full[fill % STAGES]));
            } else {
                asm volatile("cp.async.commit_group;\n" ::);  // an empty group keeps the count uniform
            }
        }
    };

    // Fill the pipeline: k-tiles 0 … STAGES-1-refill_lag (the slots of k-tile 0 issue the next one).
    for (int kt = 0; kt < STAGES - REFILL_LAG; ++kt) {
        if (COPY && kt < tiles_k) {
            if constexpr (FEED == FEED_TMA) {
                if (tid == 0) issue_tma(kt);
            } else {
#pragma unroll
                for (int q = 0; q < COPIES; ++q) copy_chunk(q, kt);
            }
        }
        if constexpr (FEED == FEED_CP_ASYNC_BARRIER) asm volatile("cp.async.commit_group;\n" ::);
        if constexpr (FEED == FEED_CP_ASYNC_MBARRIER) if (COPY && kt < tiles_k) cp_async_arrive(smem_u32(&full[kt]));
    }

    AFrag a_frag[FRAG_BUFFERS];
    BFrag b_frag[FRAG_BUFFERS];
    if constexpr (FRAG_BUFFERS == 2) {
        slot(0, 0, a_frag[0], b_frag[0], tiles_k > 0);
        mma_step(a_frag[0], b_frag[0], a_frag[1], b_frag[1], 0, 0, false, tiles_k > 0, false);  // its copies, no math
    }
    for (int kt = 0; kt < tiles_k; ++kt) {
#pragma unroll
        for (int p = 0; p < KSTEPS; ++p) {
            if constexpr (FRAG_BUFFERS == 1) {
                slot(kt, p, a_frag[0], b_frag[0], true);
                mma_step(a_frag[0], b_frag[0], a_frag[0], b_frag[0], kt, p, true, true, false);
            } else {  // the next k-step's fragments (possibly the next k-tile's), then or during this k-step's math
                const int next_kt = p == KSTEPS - 1 ? kt + 1 : kt, next_p = (p + 1) % KSTEPS;
                const bool live = p < KSTEPS - 1 || kt + 1 < tiles_k;
                if constexpr (!SPREAD_LDMATRIX) slot(next_kt, next_p, a_frag[(p + 1) % 2], b_frag[(p + 1) % 2], live);
                mma_step(a_frag[p % 2], b_frag[p % 2], a_frag[(p + 1) % 2], b_frag[(p + 1) % 2], next_kt, next_p,
                         true, live, SPREAD_LDMATRIX);
            }
        }
    }
    if constexpr (FEED != FEED_TMA) asm volatile("cp.async.wait_all;\n" ::);  // the zeros past the end too

    store_accumulators(acc, C, M, N, m0 + wm, n0 + wn, lane);
}

// copy = "cp_async" (frag_buffers = 2 or copy_issue = "spread") and copy = "cp_async_mbarrier". BN
// threads; with BN = 128 two blocks share an SM (registers: 2 × 128 × 255 fit), so one block's barrier
// waits and stores run beside the other's mma.sync.
template <bool BF16, int STAGES, bool MBARRIERS, int BN, int BK, int FRAG_BUFFERS, bool SPREAD_COPIES,
          int REFILL_LAG = 1, bool SPREAD_LDMATRIX = false, bool SERPENTINE = false, int PARTS = MMA_ALL>
__global__ void __launch_bounds__(BN, BN == 128 ? 2 : 1)
gemm_mma_overlapped(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                    float* __restrict__ C, int M, int N, int K)
{
    mma_overlapped<BF16, STAGES, MBARRIERS ? FEED_CP_ASYNC_MBARRIER : FEED_CP_ASYNC_BARRIER, BN, BK, FRAG_BUFFERS,
                   SPREAD_COPIES, REFILL_LAG, SPREAD_LDMATRIX, SERPENTINE, PARTS>(A, B, nullptr, nullptr, C, M, N, K);
}

// copy = "tma" with frag_buffers = 2.
template <bool BF16, int STAGES, int BN, int REFILL_LAG = 1, bool SPREAD_LDMATRIX = false, bool SERPENTINE = false,
          int PARTS = MMA_ALL>
__global__ void __launch_bounds__(BN, BN == 128 ? 2 : 1)
gemm_mma_tma_overlapped(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                        float* __restrict__ C, int M, int N, int K)
{
    mma_overlapped<BF16, STAGES, FEED_TMA, BN, HOPPER_BK, 2, false, REFILL_LAG, SPREAD_LDMATRIX, SERPENTINE, PARTS>(
        nullptr, nullptr, map_a, map_b, C, M, N, K);
}
