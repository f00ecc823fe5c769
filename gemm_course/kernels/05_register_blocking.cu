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

template <int BM, int BN, int BK, int TM, int TN>
struct RegisterTile {
    static constexpr int THREADS = (BM / TM) * (BN / TN);
    static constexpr int A_STRIDE = BM + 4;
    float As[BK][A_STRIDE];
    float Bs[BK][BN];
};

// Load the k-tile starting at k0 into shared memory (all threads of the block take part).
template <int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void load_register_tile(RegisterTile<BM, BN, BK, TM, TN>& s,
                                                   const float* __restrict__ A, const float* __restrict__ B,
                                                   int M, int N, int K, int row0, int col0, int k0, int tid)
{
    constexpr int THREADS = RegisterTile<BM, BN, BK, TM, TN>::THREADS;
#pragma unroll
    for (int e = tid; e < BM * BK; e += THREADS) {  // A tile: k fastest, so global reads coalesce
        const int m = e / BK, k = e % BK;
        const int gr = row0 + m, gk = k0 + k;
        s.As[k][m] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
    }
#pragma unroll
    for (int e = tid; e < BK * BN; e += THREADS) {  // B tile: n fastest
        const int k = e / BN, n = e % BN;
        const int gk = k0 + k, gc = col0 + n;
        s.Bs[k][n] = (gk < K && gc < N) ? B[(size_t)gk * N + gc] : 0.0f;
    }
}

// The main loop: acc[i][j] = sum over K of A[row0 + tr·TM + i][k] · B[k][col0 + tc·TN + j].
template <int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void register_blocked_mainloop(const float* __restrict__ A,
                                                          const float* __restrict__ B, int M, int N, int K,
                                                          int row0, int col0, float (&acc)[TM][TN])
{
    __shared__ RegisterTile<BM, BN, BK, TM, TN> s;
    const int tid = threadIdx.x;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);

#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_register_tile(s, A, B, M, N, K, row0, col0, k0, tid);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = s.As[k][tr * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = s.Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_register_blocked(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    register_blocked_mainloop<BM, BN, BK, TM, TN>(A, B, M, N, K, row0, col0, acc);

    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);
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
