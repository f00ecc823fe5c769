// Level 9 — Tensor Cores through the WMMA API: fp16 or bf16 inputs (T = __half, sm_70+, or
// __nv_bfloat16, sm_80+), fp32 accumulation, fp32 C.
//
// A Tensor Core instruction multiplies small matrix tiles as one operation. CUDA's WMMA API exposes
// it per warp: the 32 lanes of a warp together hold a 16×16 "fragment" of A, of B and of the
// accumulator (the API hides which lane holds which element), and mma_sync computes
// acc += A_frag · B_frag for a 16×16×16 piece: 4096 multiply-adds in one warp-wide instruction
// sequence instead of 4096 FFMA lane-operations.
//
// Two kernels:
//   wmma_direct<WARPS_M, WARPS_N>  each warp owns one 16×16 tile of C and loads its fragments
//                                  straight from global memory. load_matrix_sync reads whole 16×16
//                                  tiles from 32-byte aligned addresses, so this kernel requires
//                                  M, N, K to be multiples of 16 (the launcher checks and says so).
//   wmma_shared<BM, BN, VEC>       a block stages BM×32 of A and 32×BN of B in shared memory
//                                  (zero-filled past the edges: any M, N, K; with VEC, chosen by
//                                  the launcher when K and N are multiples of 8 and the pointers
//                                  16-byte aligned, in 16-byte copies), each warp computes a
//                                  32×32 tile of C as 2×2 fragments, reusing every A fragment twice
//                                  and every B fragment twice; fragments inside C are stored
//                                  directly, edge fragments through a per-warp scratch tile.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

// ---- exercise: where each fragment of a warp starts ------------------------------------------------
// wmma_shared's block has warps_m × warps_n warps, numbered row by row over the block's grid of
// 32×32 warp tiles of C (warp = 0 … warps_m·warps_n − 1; warps_m is not needed here). A warp holds
// its tile as 2×2 accumulator fragments of 16×16, so at the 16-deep step kk of a k-tile it loads two
// 16×16 tiles of As, a[0] above a[1], and two of Bs, b[0] left of b[1]. a_tile_offset is the offset,
// in elements from &As[0][0], of the first element of the tile that a[i] loads; b_tile_offset the
// same in Bs for b[j]. lda and ldb are the length of one row of As and of Bs in elements.
__device__ __forceinline__ int a_tile_offset(int warp, int i, int kk, int warps_n, int lda)
{
    return ((warp / warps_n) * 32 + 16 * i) * lda + kk;  // row: the warp's row of tiles, then i
}

__device__ __forceinline__ int b_tile_offset(int warp, int j, int kk, int warps_n, int ldb)
{
    return kk * ldb + (warp % warps_n) * 32 + 16 * j;    // column: the warp's column of tiles, then j
}
// ---- end of the exercise ----------------------------------------------------------------------------

template <typename T, int WARPS_M, int WARPS_N>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32)
wmma_direct(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ C,
            int M, int N, int K)
{
    const int warp = threadIdx.x / 32;
    const int row = (blockIdx.y * WARPS_M + warp / WARPS_N) * 16;
    const int col = (blockIdx.x * WARPS_N + warp % WARPS_N) * 16;
    if (row >= M || col >= N) return;  // the whole warp leaves together: no barrier follows

    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + (size_t)row * K + k, K);  // 16 rows of A, stride K
        wmma::load_matrix_sync(b, B + (size_t)k * N + col, N);  // 16 rows of B, stride N
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + (size_t)row * N + col, acc, N, wmma::mem_row_major);
}

template <typename T, int BM, int BN, bool VEC>
__global__ void __launch_bounds__((BM / 32) * (BN / 32) * 32)
wmma_shared(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ C,
            int M, int N, int K)
{
    constexpr int BK = 32;
    constexpr int WARPS_N = BN / 32;
    constexpr int THREADS = (BM / 32) * WARPS_N * 32;
    constexpr int A_LD = BK + 8, B_LD = BN + 8;  // +16 bytes per row: rows start in other banks
    __shared__ __align__(32) T As[BM][A_LD];
    __shared__ __align__(32) T Bs[BK][B_LD];
    __shared__ __align__(32) float scratch[THREADS / 32][16 * 16];  // edge fragments of C

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int wm = (warp / WARPS_N) * 32, wn = (warp % WARPS_N) * 32;
    const T zero = static_cast<T>(0.0f);

    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b[2];
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        if (VEC) {  // 16-byte copies: 8 halves, wholly inside or outside (K, N multiples of 8)
            const uint4 none = make_uint4(0, 0, 0, 0);
            for (int e = threadIdx.x; e < BM * BK / 8; e += THREADS) {
                const int m = e / (BK / 8), k = (e % (BK / 8)) * 8;
                *reinterpret_cast<uint4*>(&As[m][k]) = (row0 + m < M && k0 + k < K)
                    ? *reinterpret_cast<const uint4*>(A + (size_t)(row0 + m) * K + k0 + k) : none;
            }
            for (int e = threadIdx.x; e < BK * BN / 8; e += THREADS) {
                const int k = e / (BN / 8), n = (e % (BN / 8)) * 8;
                *reinterpret_cast<uint4*>(&Bs[k][n]) = (k0 + k < K && col0 + n < N)
                    ? *reinterpret_cast<const uint4*>(B + (size_t)(k0 + k) * N + col0 + n) : none;
            }
        } else {  // element by element, for any shape
            for (int e = threadIdx.x; e < BM * BK; e += THREADS) {  // k fastest: coalesced
                const int m = e / BK, k = e % BK;
                As[m][k] = (row0 + m < M && k0 + k < K) ? A[(size_t)(row0 + m) * K + k0 + k] : zero;
            }
            for (int e = threadIdx.x; e < BK * BN; e += THREADS) {  // n fastest: coalesced
                const int k = e / BN, n = e % BN;
                Bs[k][n] = (k0 + k < K && col0 + n < N) ? B[(size_t)(k0 + k) * N + col0 + n] : zero;
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            // this warp's two A and two B fragments of step kk, then the four products
#pragma unroll
            for (int i = 0; i < 2; ++i)
                wmma::load_matrix_sync(a[i], &As[0][0] + a_tile_offset(warp, i, kk, WARPS_N, A_LD), A_LD);
#pragma unroll
            for (int j = 0; j < 2; ++j)
                wmma::load_matrix_sync(b[j], &Bs[0][0] + b_tile_offset(warp, j, kk, WARPS_N, B_LD), B_LD);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

    // A fragment wholly inside C, with a 32-byte aligned start, goes straight to global memory;
    // any other goes through this warp's scratch tile and is copied element by element.
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int r = row0 + wm + 16 * i, c = col0 + wn + 16 * j;
            if (r >= M || c >= N) continue;
            if (r + 16 <= M && c + 16 <= N && N % 8 == 0) {
                wmma::store_matrix_sync(C + (size_t)r * N + c, acc[i][j], N, wmma::mem_row_major);
            } else {
                wmma::store_matrix_sync(scratch[warp], acc[i][j], 16, wmma::mem_row_major);
                __syncwarp();
                for (int e = lane; e < 256; e += 32) {
                    const int rr = r + e / 16, cc = c + e % 16;
                    if (rr < M && cc < N) C[(size_t)rr * N + cc] = scratch[warp][e];
                }
                __syncwarp();
            }
        }
}
