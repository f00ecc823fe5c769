// mechanism: A from the shared tile as float4s (ideal wavefronts, LDS.128), but B read from global memory in the inner loop
// expect: failed reuse
// message: fetched from global memory again and again
// Level 8 — warp tiling: block tile → warp tile → lane sub-tiles, conflict-free float4 shared reads.
//
//   block tile BM×BN, (BM/WM)·(BN/WN) warps      warp tile WM×WN: lanes as an 8 (m) × 4 (n) grid,
//   ┌─────────┬─────────┐                        lm = lane / 4, ln = lane % 4; lane (lm, ln) owns the
//   │ warp 0  │ warp 1  │                        4×4 sub-tiles at rows wi·32 + lm·4 and columns
//   ├─────────┼─────────┤                        wj·16 + ln·4 of the warp tile (wi < WM/32, wj < WN/16)
//   │ warp 2  │ warp 3  │
//   └─────────┴─────────┘
//
// Why that layout: for one k, lanes 0-15 (a half-warp, one phase of a float4 read) have lm = 0..3 and
// ln = 0..3. Their A values are 4 consecutive float4 of As[k] (lanes with the same lm share one) and
// their B values 4 consecutive float4 of Bs[k] (lanes with the same ln share one): 64 bytes each, no
// bank twice, so each read takes the fewest passes. Had consecutive lanes gone down m with contiguous
// 8-row blocks, a half-warp's A reads would be 32 bytes apart and meet two by two in 16 banks.
//
// Block order: the 1-D grid is walked in groups of GROUP_M tile rows, column by column inside a group,
// so blocks that run together share rows of A and columns of B in L2. Main loop: one shared buffer,
// two barriers per step of K. Global loads: float4 when VEC (K, N multiples of 4, aligned pointers),
// else one guarded element at a time; out-of-range elements load as zeros. Any M, N, K.
#include "common.cuh"

template <int BM, int BN, int BK, int WM, int WN, bool VEC, int MIN_BLOCKS = 2, int GROUP_M = 8,
          bool BATCHED = false>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
gemm_warp_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int WM_ITER = WM / 32, WN_ITER = WN / 16;  // sub-tiles per lane along m and n
    constexpr int TM = 4 * WM_ITER, TN = 4 * WN_ITER;
    constexpr int A_STRIDE = BM + 4;  // rows stay 16-byte aligned
    static_assert(BK % 4 == 0 && WM % 32 == 0 && WN % 16 == 0, "whole float4s and whole sub-tiles");
    __shared__ __align__(16) float As[BK][A_STRIDE];  // As[k][m]: A transposed
    __shared__ __align__(16) float Bs[BK][BN];        // Bs[k][n]

    // This block's tile: grouped order over the 1-D grid.
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int per_group = GROUP_M * tiles_n;
    const int group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
    const int first_m = group * GROUP_M;
    const int group_rows = min(GROUP_M, tiles_m - first_m);  // the last group may be shorter
    const int row0 = (first_m + in_group % group_rows) * BM;
    const int col0 = (in_group / group_rows) * BN;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;  // the warp's tile in the block
    const int lm = lane / 4, ln = lane % 4;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Copy the pieces, counted in groups of 4 consecutive elements (k for A, n for B).
        for (int v = tid; v < BM * BK / 4; v += THREADS) {
            const int m = v / (BK / 4), k = (v % (BK / 4)) * 4;
            const int r = row0 + m, kk = k0 + k;
            const size_t o = (size_t)r * K + kk;  // an offset: A + o is formed only where it is inside A
            float4 x = zero;
            if (VEC) {
                if (r < M && kk < K) x = *reinterpret_cast<const float4*>(A + o);
            } else if (r < M) {
                x = make_float4(kk < K ? A[o] : 0.0f, kk + 1 < K ? A[o + 1] : 0.0f,
                                kk + 2 < K ? A[o + 2] : 0.0f, kk + 3 < K ? A[o + 3] : 0.0f);
            }
            As[k + 0][m] = x.x;
            As[k + 1][m] = x.y;
            As[k + 2][m] = x.z;
            As[k + 3][m] = x.w;
        }
        for (int v = tid; v < BK * BN / 4; v += THREADS) {
            const int k = v / (BN / 4), n = (v % (BN / 4)) * 4;
            const int kk = k0 + k, c = col0 + n;
            const size_t o = (size_t)kk * N + c;
            float4 x = zero;
            if (VEC) {
                if (kk < K && c < N) x = *reinterpret_cast<const float4*>(B + o);
            } else if (kk < K) {
                x = make_float4(c < N ? B[o] : 0.0f, c + 1 < N ? B[o + 1] : 0.0f,
                                c + 2 < N ? B[o + 2] : 0.0f, c + 3 < N ? B[o + 3] : 0.0f);
            }
            *reinterpret_cast<float4*>(&Bs[k][n]) = x;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int wi = 0; wi < WM_ITER; ++wi) {
                const float4 x = *reinterpret_cast<const float4*>(&As[k][wm0 + wi * 32 + lm * 4]);
                a[wi * 4 + 0] = x.x, a[wi * 4 + 1] = x.y, a[wi * 4 + 2] = x.z, a[wi * 4 + 3] = x.w;
            }
#pragma unroll
            for (int wj = 0; wj < WN_ITER; ++wj) {
                // B straight from global memory: every warp row of the block fetches it again
                const int c = col0 + wn0 + wj * 16 + ln * 4, kk = k0 + k;
#pragma unroll
                for (int q = 0; q < 4; ++q) b[wj * 4 + q] = kk < K && c + q < N ? B[(size_t)kk * N + c + q] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int wi = 0; wi < WM_ITER; ++wi)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = row0 + wm0 + wi * 32 + lm * 4 + i;
            if (r >= M) continue;
#pragma unroll
            for (int wj = 0; wj < WN_ITER; ++wj) {
                const int c = col0 + wn0 + wj * 16 + ln * 4;
                const float* v = &acc[wi * 4 + i][wj * 4];
                if (VEC) {  // c is a multiple of 4 and so is N: c < N means all four are inside
                    if (c < N) *reinterpret_cast<float4*>(C + (size_t)r * N + c) = make_float4(v[0], v[1], v[2], v[3]);
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        if (c + j < N) C[(size_t)r * N + c + j] = v[j];
                }
            }
        }
}
