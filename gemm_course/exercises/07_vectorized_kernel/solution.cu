// Level 7 — vectorized loads and stores: Level 5's kernel moving 16 bytes per memory instruction.
//
// Launched only when K and N are multiples of 4 and A, B, C are 16-byte aligned (else the launcher
// takes Level 5's gemm_register_blocked, included below). Then every float4 starting at a column that
// is a multiple of 4 lies entirely inside or entirely outside its row, and its address is aligned:
//   A: one float4 = 4 consecutive k of one row m; stored transposed as four scalars As[k..k+3][m]
//   B: one float4 = 4 consecutive n of one row k; stored as one float4 into Bs[k][n..n+3]
//   math: a thread's TM values of A for one k are consecutive in As[k], its TN values of B in Bs[k]:
//         TM/4 + TN/4 float4 reads of shared memory per k. As's rows are BM + 4 floats: a multiple of
//         4 (every row 16-byte aligned) that also spreads the transposed stores over the banks.
//   C: one float4 = 4 consecutive columns of one row.
// Single-buffered (two barriers per step of K): the lesson here is the width of each access.
#include "05_register_blocking.cu"

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "vectors of 4 floats");
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);
    constexpr int THREADS = (BM / TM) * (BN / TN);
    constexpr int A_STRIDE = BM + 4;
    __shared__ __align__(16) float As[BK][A_STRIDE];  // As[k][m]: A transposed
    __shared__ __align__(16) float Bs[BK][BN];        // Bs[k][n]

    const int tid = threadIdx.x;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int v = tid; v < BM * BK / 4; v += THREADS) {  // float4 number v of the A piece
            const int m = v / (BK / 4), k = (v % (BK / 4)) * 4;
            const int r = row0 + m, kk = k0 + k;
            const float4 x = (r < M && kk < K) ? *reinterpret_cast<const float4*>(A + (size_t)r * K + kk) : zero;
            As[k + 0][m] = x.x;
            As[k + 1][m] = x.y;
            As[k + 2][m] = x.z;
            As[k + 3][m] = x.w;
        }
        for (int v = tid; v < BK * BN / 4; v += THREADS) {  // float4 number v of the B piece
            const int k = v / (BN / 4), n = (v % (BN / 4)) * 4;
            const int kk = k0 + k, c = col0 + n;
            *reinterpret_cast<float4*>(&Bs[k][n]) =
                (kk < K && c < N) ? *reinterpret_cast<const float4*>(B + (size_t)kk * N + c) : zero;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 x = *reinterpret_cast<const float4*>(&As[k][tr * TM + i]);
                a[i] = x.x, a[i + 1] = x.y, a[i + 2] = x.z, a[i + 3] = x.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 x = *reinterpret_cast<const float4*>(&Bs[k][tc * TN + j]);
                b[j] = x.x, b[j + 1] = x.y, b[j + 2] = x.z, b[j + 3] = x.w;
            }
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
        for (int j = 0; j < TN; j += 4) {
            const int c = col0 + tc * TN + j;  // a multiple of 4: c < N means c + 3 < N
            if (r < M && c < N)
                *reinterpret_cast<float4*>(C + (size_t)r * N + c) =
                    make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        }
    }
}
