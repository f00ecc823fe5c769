// mechanism: no shared memory: every thread reads its A and B values from global memory for every k, in warp-wide loads at the ideal sector count
// expect: failed reuse
// message: fetched from global memory again and again
// Level 5 — register blocking, written by you: each thread computes a TM×TN block of C in registers.
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
//
// The launch: one-dimensional blocks of (BM/TM)·(BN/TN) threads (16·16 = 256 here, with
// BM = BN = 128, BK = 8, TM = TN = 8), ceil(N / BN) blocks along x and ceil(M / BM) along y.
// Block (blockIdx.y, blockIdx.x) owns the BM×BN tile of C that starts at row blockIdx.y·BM,
// column blockIdx.x·BN. Inside it, thread tid = threadIdx.x is (tr, tc) = (tid / (BN/TN),
// tid % (BN/TN)) and owns rows tr·TM … tr·TM+TM−1 and columns tc·TN … tc·TN+TN−1 of the tile.
//
// The block walks K in steps of BK through shared memory: per step a BM×BK piece of A and a BK×BN
// piece of B, which the block's threads copy together (BM·BK / threads elements each). Then, for
// each k of the step, a thread reads its TM values of A and its TN values of B once into registers
// and does TM·TN multiply-adds with them into TM·TN accumulators that stay in registers.
// Edge blocks hang over C, and the last step over K.
#include "common.cuh"

// Two blocks per SM (the compiler keeps registers ≤ 128 for 256 threads) unless a block is larger.
#define REGISTER_BLOCKS_PER_SM(THREADS) ((THREADS) <= 256 ? 2 : 1)

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_register_blocked(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
    // No shared memory: each warp owns 16 rows of the block's tile, each lane 4 columns 32 apart, and
    // every thread reads its values of A and B straight from global memory for every k. A warp's loads
    // still touch the fewest sectors (one row of A: a broadcast; 32 consecutive floats of B).
    constexpr int ROWS = 16, COLS = 4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = blockIdx.y * BM + warp * ROWS, col0 = blockIdx.x * BN + lane;
    float acc[ROWS][COLS] = {};
    for (int k = 0; k < K; ++k) {
        float a[ROWS], b[COLS];
#pragma unroll
        for (int i = 0; i < ROWS; ++i) a[i] = row0 + i < M ? A[(size_t)(row0 + i) * K + k] : 0.0f;
#pragma unroll
        for (int j = 0; j < COLS; ++j) b[j] = col0 + 32 * j < N ? B[(size_t)k * N + col0 + 32 * j] : 0.0f;
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
#pragma unroll
            for (int j = 0; j < COLS; ++j) acc[i][j] += a[i] * b[j];
    }
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int j = 0; j < COLS; ++j)
            if (row0 + i < M && col0 + 32 * j < N) C[(size_t)(row0 + i) * N + col0 + 32 * j] = acc[i][j];

    // Your kernel: the shared pieces of A and B, the loop over the steps of K (the block's copy,
    // a barrier, the register outer products, a barrier), and the guarded store of the thread's
    // TM×TN block of C.
}
