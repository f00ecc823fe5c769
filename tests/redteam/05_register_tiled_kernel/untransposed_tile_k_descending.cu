// mechanism: near miss: A tile kept as it is (As[m][k], padded) and the k loop counting down
// expect: solved
// Level 5 — register blocking: each thread computes a TM×TN block of C in registers.
//
// Block (blockIdx.y, blockIdx.x) owns the BM×BN tile of C at (blockIdx.y·BM, blockIdx.x·BN); thread
// (tr, tc) = (tid / (BN/TN), tid % (BN/TN)) owns rows tr·TM.., columns tc·TN.. of it. Per step of BK:
//   copy: the block's threads copy the BM×BK piece of A (k fastest across a warp: coalesced) into
//         As[k][m], transposed, rows padded to BM+4 so that those stores spread over the banks; and
//         the BK×BN piece of B (n fastest) into Bs[k][n]. Elements outside A or B become zeros.
//   math: for each k, a[i] = As[k][tr·TM+i], b[j] = Bs[k][tc·TN+j], acc[i][j] += a[i]·b[j]:
//         TM + TN shared loads feed TM·TN FMAs.
// Every loop that indexes a register array has a compile-time trip count and is unrolled, so the
// arrays stay in registers. Only elements inside C are stored. Any M, N, K.
#include "common.cuh"

#define REGISTER_BLOCKS_PER_SM(THREADS) ((THREADS) <= 256 ? 2 : 1)

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_register_blocked(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);
    constexpr int THREADS = (BM / TM) * (BN / TN);
    constexpr int A_STRIDE = BM + 4;
    __shared__ float As[BM][BK + 1];    // As[m][k]: A as it is, rows padded by one word
    __shared__ float Bs[BK][BN];        // Bs[k][n]

    const int tid = threadIdx.x;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += THREADS) {
            const int m = e / BK, k = e % BK;
            const int r = row0 + m, kk = k0 + k;
            As[m][k] = (r < M && kk < K) ? A[(size_t)r * K + kk] : 0.0f;
        }
        for (int e = tid; e < BK * BN; e += THREADS) {
            const int k = e / BN, n = e % BN;
            const int kk = k0 + k, c = col0 + n;
            Bs[k][n] = (kk < K && c < N) ? B[(size_t)kk * N + c] : 0.0f;
        }
        __syncthreads();
        // the k loop counts down: another order of the same products

#pragma unroll
        for (int k = BK - 1; k >= 0; --k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[tr * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + tr * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + tc * TN + j;
            if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
        }
    }
}
