// Level 9 — Tensor Cores through the WMMA API: fp16 or bf16 inputs (T = __half, sm_70+, or
// __nv_bfloat16, sm_80+), fp32 accumulation, fp32 C.
// 第 9 级：通过 WMMA API 使用张量核心。输入为 fp16 或 bf16（T = __half，sm_70 及以上；或
// __nv_bfloat16，sm_80 及以上），fp32 累加，C 为 fp32。
//
// A Tensor Core instruction multiplies small matrix tiles as one operation. CUDA's WMMA API exposes
// it per warp: the 32 lanes of a warp together hold a 16×16 "fragment" of A, of B and of the
// accumulator (the API hides which lane holds which element), and mma_sync computes
// acc += A_frag · B_frag for a 16×16×16 piece: 4096 multiply-adds in one warp-wide instruction
// sequence instead of 4096 FFMA lane-operations.
// 一条张量核心指令把小的矩阵分块作为一次操作相乘。CUDA 的 WMMA API 以线程束为单位暴露它：
// 一个线程束的 32 个 lane 共同持有 A、B 和累加器各一个 16×16 的“片段”（fragment）（API 不公开哪个
// lane 持有哪个元素），mma_sync 对一个 16×16×16 的块计算 acc += A_frag · B_frag：4096
// 次乘加由一个线程束级指令序列完成，而不是 4096 次 lane 级的 FFMA。
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
// 两个内核：
//   wmma_direct<WARPS_M, WARPS_N>  每个线程束负责 C 的一个 16×16 分块，直接从全局内存加载片段。
//                                  load_matrix_sync 从 32 字节对齐的地址读取完整的 16×16 分块，
//                                  所以本内核要求 M、N、K 是 16 的倍数（启动器会检查并给出提示）。
//   wmma_shared<BM, BN, VEC>       线程块把 A 的 BM×32 和 B 的 32×BN 暂存在共享内存中（越过边缘的
//                                  部分填 0：任意 M、N、K；启动器在 K 和 N 是 8 的倍数且指针 16 字节
//                                  对齐时选用 VEC，以 16 字节为单位拷贝），每个线程束以 2×2 个片段
//                                  计算 C 的一个 32×32 分块，每个 A 片段和 B 片段各复用两次；C 内的
//                                  片段直接写回，边缘片段经由每个线程束的暂存分块写回。
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
// ---- 练习：线程束的每个片段从哪里开始 --------------------------------------------------------------
// wmma_shared 的线程块有 warps_m × warps_n 个线程束，在线程块的 32×32
// 线程束分块网格上逐行编号（warp = 0 … warps_m·warps_n − 1；这里用不到 warps_m）。一个线程束以
// 2×2 个 16×16 的累加器片段持有它的分块，所以在 k 分块中 16 深的第 kk 步，它加载 As 的两个 16×16
// 分块（a[0] 在 a[1] 上方）和 Bs 的两个（b[0] 在 b[1] 左边）。a_tile_offset 是 a[i]
// 所加载分块的第一个元素相对 &As[0][0] 的偏移（以元素计）；b_tile_offset 是 Bs 中 b[j] 的同一偏移。
// lda 和 ldb 是 As 和 Bs 一行的长度（以元素计）。
__device__ __forceinline__ int a_tile_offset(int warp, int i, int kk, int warps_n, int lda)
{
    return 0;
}

__device__ __forceinline__ int b_tile_offset(int warp, int j, int kk, int warps_n, int ldb)
{
    return 0;
}
// ---- end of the exercise ----------------------------------------------------------------------------
// ---- 练习结束 ---------------------------------------------------------------------------------------

template <typename T, int WARPS_M, int WARPS_N>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32)
wmma_direct(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ C,
            int M, int N, int K)
{
    const int warp = threadIdx.x / 32;
    const int row = (blockIdx.y * WARPS_M + warp / WARPS_N) * 16;
    const int col = (blockIdx.x * WARPS_N + warp % WARPS_N) * 16;
    if (row >= M || col >= N) return;  // the whole warp leaves together: no barrier follows
                                       // 整个线程束一起退出：后面没有屏障

    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + (size_t)row * K + k, K);  // 16 rows of A, stride K
                                                                // A 的 16 行，跨度 K
        wmma::load_matrix_sync(b, B + (size_t)k * N + col, N);  // 16 rows of B, stride N
                                                                // B 的 16 行，跨度 N
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
                                                 // 每行多 16 字节：各行从不同的存储体开始
    __shared__ __align__(32) T As[BM][A_LD];
    __shared__ __align__(32) T Bs[BK][B_LD];
    __shared__ __align__(32) float scratch[THREADS / 32][16 * 16];  // edge fragments of C
                                                                    // C 的边缘片段

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
                    // 16 字节拷贝：8 个 half，要么完全在内，要么完全在外（K、N 是 8 的倍数）
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
                  // 逐个元素，适用于任何形状
            for (int e = threadIdx.x; e < BM * BK; e += THREADS) {  // k fastest: coalesced
                                                                    // k 变化最快：合并访问
                const int m = e / BK, k = e % BK;
                As[m][k] = (row0 + m < M && k0 + k < K) ? A[(size_t)(row0 + m) * K + k0 + k] : zero;
            }
            for (int e = threadIdx.x; e < BK * BN; e += THREADS) {  // n fastest: coalesced
                                                                    // n 变化最快：合并访问
                const int k = e / BN, n = e % BN;
                Bs[k][n] = (k0 + k < K && col0 + n < N) ? B[(size_t)(k0 + k) * N + col0 + n] : zero;
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            // ---- exercise: this warp's part of the 16-deep step kk ----------------------------------
            // ---- 练习：本线程束在 16 深的第 kk 步中负责的部分 ----------------------------------

            // ---- end of the exercise ---------------------------------------------------------------
            // ---- 练习结束 --------------------------------------------------------------------------
        }
        __syncthreads();
    }

    // A fragment wholly inside C, with a 32-byte aligned start, goes straight to global memory;
    // any other goes through this warp's scratch tile and is copied element by element.
    // 完全落在 C 内、起始地址 32 字节对齐的片段直接写到全局内存；其他片段经由本线程束的暂存分块，
    // 逐个元素拷贝。
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
