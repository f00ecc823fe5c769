// Level 5 — register blocking: each thread computes a TM×TN block of C in registers.
//
// A block of (BM/TM)·(BN/TN) threads computes a BM×BN tile of C, walking K in steps of BK.
//
//            BK                         BN
//         ┌──────┐                ┌───────────────┐
//         │      │             BK │      Bs       │  Bs[k][n]
//      BM │  As  │                └───────────────┘
//         │      │   As stored transposed, As[k][m], so that a thread's TM values of A for one k
//         └──────┘   are consecutive in shared memory (Level 7 reads them as float4).
//
//   thread (tr, tc) owns rows tr·TM .. tr·TM+TM-1 and columns tc·TN .. tc·TN+TN-1 of the tile:
//
//      for each k in the tile:   a[i] = As[k][tr·TM + i]   (TM loads)
//                                b[j] = Bs[k][tc·TN + j]   (TN loads)
//                                acc[i][j] += a[i]·b[j]    (TM·TN FMAs)
//
// Level 2 did 1 FMA per shared load (or a little more); this does TM·TN FMAs per TM+TN loads:
// 8×8 gives 64 FMAs per 16 loads. The accumulators live in registers, which is why the loops
// over i and j must be fully unrolled (a register array indexed at run time goes to local memory).
//
// As's rows are padded by 4 floats: the tile load writes As[k][m] with k varying fastest across a
// warp, and a row length of BM (a multiple of 32) would put those lanes in a few banks (Level 3);
// BM+4 spreads them and keeps every row 16-byte aligned.
//
// Edges: elements outside A or B load as zeros; only elements inside C are stored. Any M, N, K.

#include "common.cuh"

template <int BM, int BN, int BK, int TM, int TN>
struct RegisterTile {
    static constexpr int THREADS = (BM / TM) * (BN / TN);
    static constexpr int A_STRIDE = BM + 4;
    float As[BK][A_STRIDE];
    float Bs[BK][BN];
};

// Double buffering (Level 4) carried into this level: two RegisterTiles. While the threads multiply
// the k-tile in one, the next k-tile is already being copied into the other with cp.async (Level 4's
// second copy mode, common.cuh), which moves data from global to shared memory without passing
// through registers. That matters here: staging the next tile in registers would cost 8 more per
// thread, and at 128 registers (two 256-thread blocks per SM) the compiler would spill. One barrier
// per k-tile suffices: it publishes the new tile and also guarantees that everyone has finished
// with the old one before it is overwritten in the next iteration. Before sm_80 the copies are
// ordinary loads and stores (correct, not overlapped).
//
// The main loop: acc[i][j] = sum over K of A[row0 + tr·TM + i][k] · B[k][col0 + tc·TN + j].
template <int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void register_blocked_mainloop(const float* __restrict__ A,
                                                          const float* __restrict__ B, int M, int N, int K,
                                                          int row0, int col0, float (&acc)[TM][TN])
{
    constexpr int THREADS = RegisterTile<BM, BN, BK, TM, TN>::THREADS;
    __shared__ RegisterTile<BM, BN, BK, TM, TN> s[2];
    const int tid = threadIdx.x;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);

    // Global → shared without a stop in registers: cp.async (sm_80+; an ordinary copy before).
    auto load = [&](RegisterTile<BM, BN, BK, TM, TN>& t, int k0) {
#pragma unroll
        for (int e = tid; e < BM * BK; e += THREADS) {  // A: k fastest (coalesced), stored transposed
            const int gr = row0 + e / BK, gk = k0 + e % BK;
            const bool ok = gr < M && gk < K;
            copy_async<4>(&t.As[e % BK][e / BK], ok ? A + (size_t)gr * K + gk : A, ok);
        }
#pragma unroll
        for (int e = tid; e < BK * BN; e += THREADS) {  // B: n fastest
            const int gk = k0 + e / BN, gc = col0 + e % BN;
            const bool ok = gk < K && gc < N;
            copy_async<4>(&t.Bs[e / BN][e % BN], ok ? B + (size_t)gk * N + gc : B, ok);
        }
        copy_async_commit();
    };

#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    load(s[0], 0);
    copy_async_wait_all();
    __syncthreads();
    for (int k0 = 0, cur = 0; k0 < K; k0 += BK, cur ^= 1) {
        if (k0 + BK < K) load(s[cur ^ 1], k0 + BK);  // in flight while tile k0 is multiplied
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            /* TODO (the exercise): step k's contribution to this thread's TM×TN accumulators, from
               the tile in s[cur]. a and b are there to hold the thread's values of A and of B for
               this k; acc, a and b must all stay in registers. */
        }
        copy_async_wait_all();
        __syncthreads();
    }
}

// Two blocks per SM (the compiler keeps registers ≤ 128 for 256 threads) unless a block is larger.
#define REGISTER_BLOCKS_PER_SM(THREADS) ((THREADS) <= 256 ? 2 : 1)

// Write the thread's TM×TN accumulators to C, op(value, row, column) → the value to store (Level 6
// passes its epilogue here); elements outside C are skipped.
template <int BM, int BN, int TM, int TN, typename Op>
__device__ __forceinline__ void store_register_tile(float* __restrict__ C, int M, int N, int row0, int col0,
                                                    const float (&acc)[TM][TN], Op op)
{
    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + tr * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + tc * TN + j;
            if (r < M && c < N) C[(size_t)r * N + c] = op(acc[i][j], r, c);
        }
    }
}

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_register_blocked(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    register_blocked_mainloop<BM, BN, BK, TM, TN>(A, B, M, N, K, row0, col0, acc);
    store_register_tile<BM, BN>(C, M, N, row0, col0, acc, [](float v, int, int) { return v; });
}
