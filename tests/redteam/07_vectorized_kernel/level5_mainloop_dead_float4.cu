// mechanism: Level 5's main loop (4-byte cp.async copies of A and B) with float4 stores of C and two float4 loads whose values are unused
// expect: failed sass
// message: LDG.E.128
// Level 7 — vectorized loads and stores, written by you: Level 5's kernel moving 16 bytes per
// memory instruction (float4: LDG.E.128, LDS.128, STS.128, STG.E.128) instead of 4.
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats.
//
// Precondition (checked on the host before launch): K and N are multiples of 4, and A, B and C
// start at 16-byte aligned addresses. So a float4 of A that starts at a column k that is a multiple
// of 4 is either entirely inside its row (k < K) or entirely outside it, and its address is a
// multiple of 16; the same holds for B and C along n. When a problem breaks the precondition the
// launcher runs Level 5's scalar kernel instead (gemm_register_blocked, included below): your kernel
// is only ever launched on shapes that meet it. M is any size from 1 up.
//
// The launch is Level 5's: one-dimensional blocks of (BM/TM)·(BN/TN) threads (256 here, with
// BM = BN = 128, BK = 8, TM = TN = 8), ceil(N / BN) blocks along x and ceil(M / BM) along y. Block
// (blockIdx.y, blockIdx.x) owns the BM×BN tile of C at row blockIdx.y·BM, column blockIdx.x·BN;
// thread tid = threadIdx.x is (tr, tc) = (tid / (BN/TN), tid % (BN/TN)) and owns rows tr·TM … and
// columns tc·TN … of the tile. A float4 in shared memory needs a 16-byte aligned address too.
#include "05_register_blocking.cu"

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "vectors of 4 floats");
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
    // Level 5's main loop (4-byte cp.async copies), then float4 stores of C.
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    register_blocked_mainloop<BM, BN, BK, TM, TN>(A, B, M, N, K, row0, col0, acc);
    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);
    float4 extra = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // Two float4 loads whose values nobody uses.
    { const float4 a = *reinterpret_cast<const float4*>(A); const float4 b = *reinterpret_cast<const float4*>(B); (void)a; (void)b; }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + tr * TM + i;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int c = col0 + tc * TN + j;
            if (r < M && c < N)
                *reinterpret_cast<float4*>(C + (size_t)r * N + c) =
                    make_float4(acc[i][j] + extra.x, acc[i][j + 1] + extra.y, acc[i][j + 2] + extra.z, acc[i][j + 3] + extra.w);
        }
    }

    // Your kernel: the shared pieces of A and B, the loop over the steps of K with float4 loads of
    // A and B from global memory, the register outer products with float4 reads of shared memory,
    // and float4 stores of the thread's block of C.
}
