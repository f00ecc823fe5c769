// Level 10 — Tensor Cores without the WMMA wrapper: mma.sync + ldmatrix + a multi-stage cp.async
// pipeline, with an XOR-swizzled shared layout. fp16 or bf16 inputs (BF16), fp32 accumulation, fp32 C.
// sm_80+. (The level's file holds two more kernels, the same math fed by TMA and overlapped; this
// exercise's copy keeps the first one, with 32-deep k-tiles.)
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

// ---- exercise: the index math of B's fragments and of the accumulators ---------------------------
// One ldmatrix.x4.trans loads the 16 (k) × 16 (n) piece of B at k-step kk and columns n0 … n0 + 15:
// lane gives the address of one 16-byte row, 8 columns of n at one k. b_ldmatrix_k(lane) is that
// row's k within the piece (0–15), b_ldmatrix_chunk(lane) which of the piece's two 8-column chunks
// (0: n0 …, 1: n0 + 8 …). Registers 0–3 then must hold b[2j][0], b[2j][1], b[2j+1][0], b[2j+1][1]:
// the B fragments of the n8 tiles at n0 and n0 + 8.
__device__ __forceinline__ int b_ldmatrix_k(int lane)
{
    return 0;
}

__device__ __forceinline__ int b_ldmatrix_chunk(int lane)
{
    return 0;
}

// The element of a 16×8 tile of C that accumulator register `reg` (0–3) of `lane` holds after
// mma.sync.m16n8k16: its row (0–15) and its column (0–7).
__device__ __forceinline__ int accumulator_row(int lane, int reg)
{
    return 0;
}

__device__ __forceinline__ int accumulator_col(int lane, int reg)
{
    return 0;
}
// ---- end of the exercise ------------------------------------------------------------------------

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

// A warp's MT × NT accumulator tiles into C, whose tile starts at (row0, col0).
template <int MT, int NT>
__device__ __forceinline__ void store_accumulators(const float (&acc)[MT][NT][4], float* C, int M, int N,
                                                   int row0, int col0, int lane)
{
    // ---- exercise: write every accumulator of the warp's MT × NT tiles into C (only inside M × N) ----
    // ---- end of the exercise -----------------------------------------------------------------------
}

template <int STAGES, bool BF16, int BN = 128, int BK = MMA_BK, int PARTS = MMA_ALL>
__global__ void __launch_bounds__(MMA_THREADS, BN == 128 ? 2 : 1)
gemm_mma_pipeline(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                  float* __restrict__ C, int M, int N, int K)
{
    static_assert(!((PARTS & MMA_NO_BARRIER) && (PARTS & MMA_COPIES)), "without the barrier, copies would race");
    extern __shared__ __align__(128) unsigned char smem[];
    static_assert(BK == 32, "this copy of the kernel is written for 32-deep k-tiles (swizzle_a)");
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
            // ---- exercise: this k-step's B fragments (ldmatrix_x4<true>), then acc += a · b for the warp's
            //      4 × NT tiles of 16×8 (mma_16816) ------------------------------------------------------
            // ---- end of the exercise -----------------------------------------------------------------
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);

    store_accumulators(acc, C, M, N, row0 + wm, col0 + wn, lane);
}
