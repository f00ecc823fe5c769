// mechanism: no shared memory: every thread reads float4s of A and B from global memory for every 4 k and stores float4s of C
// expect: failed reuse
// message: fetched from global memory again and again
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
    // No shared memory: each warp owns 16 rows of the block's tile (8 at a time), each lane 4 consecutive columns, and
    // every thread reads float4s of A and B straight from global memory for every 4 steps of k.
    constexpr int ROWS = 8;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int col = blockIdx.x * BN + 4 * lane;
    for (int half = 0; half < 2; ++half) {  // 8 rows at a time: few enough accumulators for registers
    const int row0 = blockIdx.y * BM + warp * 2 * ROWS + half * ROWS;
    float acc[ROWS][4] = {};
    for (int k = 0; k < K; k += 4) {
        float4 b[4];
#pragma unroll
        for (int q = 0; q < 4; ++q)
            b[q] = col < N ? *reinterpret_cast<const float4*>(&B[(size_t)(k + q) * N + col]) : make_float4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const float4 a = row0 + i < M ? *reinterpret_cast<const float4*>(&A[(size_t)(row0 + i) * K + k])
                                          : make_float4(0, 0, 0, 0);
            const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                acc[i][0] += av[q] * b[q].x;
                acc[i][1] += av[q] * b[q].y;
                acc[i][2] += av[q] * b[q].z;
                acc[i][3] += av[q] * b[q].w;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
        if (row0 + i < M && col < N)
            *reinterpret_cast<float4*>(&C[(size_t)(row0 + i) * N + col]) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }

    // Your kernel: the shared pieces of A and B, the loop over the steps of K with float4 loads of
    // A and B from global memory, the register outer products with float4 reads of shared memory,
    // and float4 stores of the thread's block of C.
}
