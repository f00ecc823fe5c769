// Level 9 — Tensor Cores through the WMMA API: fp16 or bf16 inputs (T = __half, sm_70+, or
// __nv_bfloat16, sm_80+), fp32 accumulation, fp32 C.
//
// A Tensor Core instruction multiplies small matrix tiles as one operation. CUDA's WMMA API exposes
// it per warp: the 32 lanes of a warp together hold a 16×16 "fragment" of A, of B and of the
// accumulator (the API hides which lane holds which element), and mma_sync computes
// acc += A_frag · B_frag for a 16×16×16 piece: 4096 multiply-adds in one warp-wide instruction
// sequence instead of 4096 FFMA lane-operations.
//
// Three kernels:
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
//   wmma_pipelined<BM, BN, WM, WN, STAGES, ALIGNED, BK, FRAG_BUFFERS>
//                                  the same WMMA calls, fed properly: a ring of STAGES shared
//                                  buffers filled by cp.async (sm_80+) while the warps compute,
//                                  WM×WN warp tiles (up to 4×4 fragments), BK-deep k-tiles (32 or
//                                  64), optionally two sets of fragment registers, and an
//                                  L2-friendly block order. See the diagram above that kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

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
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[wm + 16 * i][kk], A_LD);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wn + 16 * j], B_LD);
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


// --- staging = "pipelined": how far WMMA goes when it is fed properly --------------------------------
//
// wmma_shared spends most of its time waiting: each k-tile is loaded, then a barrier, then the math,
// then another barrier, so the Tensor Cores idle while global memory answers. Here the copies of the
// next STAGES-1 k-tiles are in flight while the warps compute on the current one:
//
//   global ──cp.async 16 B──▶ a stage of the ring ──load_matrix_sync──▶ fragments ──mma_sync──▶ acc
//            (no registers;       ┌─────────┬─────────┬─────────┐
//             zero-fill past      │ tile kt │ kt+1 ⇣  │ kt+2 ⇣  │   STAGES = 3: while tile kt is
//             the edges)          │ (math)  │ landing │ landing │   computed, kt+1 and kt+2 land
//                                 └─────────┴─────────┴─────────┘
//
//   block tile BM×BN, k-tile BK        warp tile WM×WN = (WM/16)×(WN/16) fragments, e.g. 64×64:
//   ┌─────────┬─────────┬───┐          ┌──┬──┬──┬──┐  per 16-deep k-step a warp loads 4 A and
//   │ warp 0  │ warp 1  │ … │          ├──┼──┼──┼──┤  4 B fragments and issues 16 mma_sync:
//   ├─────────┼─────────┼───┤          ├──┼──┼──┼──┤  every A fragment is reused across the
//   │ warp 4  │ …       │   │          ├──┼──┼──┼──┤  row, every B fragment down the column
//   └─────────┴─────────┴───┘          └──┴──┴──┴──┘  (128 fp32 accumulators per thread)
//
// What WMMA still does not let us do: the fragment layout is hidden, so we cannot pick a swizzled
// shared layout that matches it (Level 10 does). Padding each shared row by 8 halves (16 bytes) is
// the one tool left: the 8 rows that one load reads then start in 8 different 16-byte bank groups.
//
// Preconditions (the launcher checks them): K and N multiples of 8, so every 16-byte chunk of 8
// halves is wholly inside or wholly outside its matrix; M is free. With ALIGNED (A and B on 16-byte
// addresses, C on 32-byte addresses, chosen by the launcher) the chunks travel with cp.async and
// inner fragments of C are stored straight to global memory; otherwise (an offset view) the same
// pipeline copies element by element and stores every fragment through the scratch tile.

__device__ __forceinline__ unsigned wmma_shared_address(const void* pointer)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// One 16-byte chunk (8 halves) from global to shared memory. inside == false writes 8 zeros (the
// copy reads 0 source bytes), so a tile that hangs over the edge of A or B adds nothing to C.
template <bool ASYNC, typename T>
__device__ __forceinline__ void copy_chunk(T* shared_dst, const T* global_src, bool inside)
{
    if constexpr (ASYNC) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                     :: "r"(wmma_shared_address(shared_dst)), "l"(global_src), "r"(inside ? 16 : 0));
    } else {  // misaligned pointers: plain loads and stores, the barrier publishes them
#pragma unroll
        for (int i = 0; i < 8; ++i) shared_dst[i] = inside ? global_src[i] : static_cast<T>(0.0f);
    }
}

// A 16×16 fragment of A or B from shared memory. For fp16, load_matrix_sync compiles to one ldmatrix
// per fragment. For bf16 the compiler does not carry the knowledge that the pointer is in shared
// memory into the WMMA load: it emits four generic 4-byte loads per lane and transposes B in
// registers (MOVM). The PTX form of the same WMMA load, with the .shared state space spelled out,
// gets ldmatrix back; the fragment's registers are the ones load_matrix_sync would fill.
template <typename Use>
__device__ __forceinline__ void load_shared_fragment(wmma::fragment<Use, 16, 16, 16, __half, wmma::row_major>& f,
                                                     const __half* p, unsigned ldm)
{
    wmma::load_matrix_sync(f, p, ldm);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800  // bf16 fragments exist from sm_80 on
__device__ __forceinline__ void load_shared_fragment(
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>& f, const __nv_bfloat16* p, unsigned ldm)
{
    unsigned* r = reinterpret_cast<unsigned*>(f.x);  // 8 bf16 values = 4 registers per lane
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16 {%0,%1,%2,%3}, [%4], %5;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(wmma_shared_address(p)), "r"(ldm));
}

__device__ __forceinline__ void load_shared_fragment(
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>& f, const __nv_bfloat16* p, unsigned ldm)
{
    unsigned* r = reinterpret_cast<unsigned*>(f.x);
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.bf16 {%0,%1,%2,%3}, [%4], %5;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(wmma_shared_address(p)), "r"(ldm));
}
#endif

// ---- exercise: the ring's index math ----------------------------------------------------------------
// The k-tiles go round a ring of `stages` shared buffers. stage_of(k_tile, stages) is the stage
// (0 … stages − 1) that k-tile k_tile is copied into and read from. groups_in_flight(stages) is the
// count handed to cp.async.wait_group at the top of each k-tile: how many of the newest committed
// groups of copies may still be in flight when the warps go on to compute.
__device__ __forceinline__ int stage_of(int k_tile, int stages)
{
    return 0;
}

__device__ __forceinline__ constexpr int groups_in_flight(int stages)
{
    return 0;
}
// ---- end of the exercise ------------------------------------------------------------------------

// Two blocks per SM where the accumulators leave room (at most 128 registers per thread for 8 warps);
// a 64×64 warp tile (128 accumulators per thread) or a larger block gets one.
//
// BK (32 or 64) is the depth of one k-tile: 64 halves the barriers, the cp.async waits and the
// address arithmetic per multiply-add, at twice the shared memory per stage (128×128 with 3 stages:
// 105 KB, still two blocks per SM on sm_90).
//
template <typename T, int BM, int BN, int WM, int WN, int STAGES, bool ALIGNED, int BK = 32, int FRAG_BUFFERS = 1>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32,
                                  WM * WN < 64 * 64 && (BM / WM) * (BN / WN) <= 8 ? 2 : 1)
wmma_pipelined(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ C,
               int M, int N, int K)
{
    static_assert(BK == 32 || BK == 64, "a k-tile is 32 or 64 deep: two or four 16-deep steps");
    static_assert(FRAG_BUFFERS == 1, "this copy of the kernel keeps one set of fragment registers");
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int FM = WM / 16, FN = WN / 16;      // fragments per warp, down and across
    constexpr int A_LD = BK + 8, B_LD = BN + 8;    // +16 bytes per row: rows start in other banks
    constexpr int A_STAGE = BM * A_LD, B_STAGE = BK * B_LD;  // elements per stage
    static_assert(STAGES * (A_STAGE + B_STAGE) * sizeof(T) >= THREADS / 32 * 256 * sizeof(float),
                  "the epilogue reuses the stages as one 16×16 float scratch tile per warp");

    // Dynamic shared memory (more than the 48 KB a static array may have): STAGES A tiles, then
    // STAGES B tiles. Every fragment starts on a 32-byte boundary, as load_matrix_sync requires.
    extern __shared__ __align__(128) unsigned char wmma_stages[];
    T* const a_stages = reinterpret_cast<T*>(wmma_stages);
    T* const b_stages = a_stages + STAGES * A_STAGE;

    // Grouped block order (Level 8's idea): consecutive blocks walk down a group of 8 tile rows
    // before moving right, so the blocks that run together share rows of A and columns of B in L2.
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int blocks_per_group = 8 * tiles_n;
    const int first_tile_row = (blockIdx.x / blocks_per_group) * 8;
    const int rows_in_group = min(tiles_m - first_tile_row, 8);
    const int index_in_group = blockIdx.x % blocks_per_group;
    const int row0 = (first_tile_row + index_in_group % rows_in_group) * BM;
    const int col0 = (index_in_group / rows_in_group) * BN;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;  // this warp's tile in the block

    // The copies. Consecutive threads take consecutive 16-byte chunks of a row (coalesced); a pass
    // of all THREADS covers ROWS_PER_PASS rows, and the passes repeat down the tile. A thread copies
    // the same chunk positions in every k-tile, so its pointers and its row tests are worked out
    // once here, and the pointers move one k-tile along after each copy.
    constexpr int A_CHUNKS_PER_ROW = BK / 8, B_CHUNKS_PER_ROW = BN / 8;
    constexpr int A_ROWS_PER_PASS = THREADS / A_CHUNKS_PER_ROW, B_ROWS_PER_PASS = THREADS / B_CHUNKS_PER_ROW;
    constexpr int A_PASSES = (BM + A_ROWS_PER_PASS - 1) / A_ROWS_PER_PASS;
    constexpr int B_PASSES = (BK + B_ROWS_PER_PASS - 1) / B_ROWS_PER_PASS;
    const int a_row = threadIdx.x / A_CHUNKS_PER_ROW, a_col = (threadIdx.x % A_CHUNKS_PER_ROW) * 8;
    const int b_row = threadIdx.x / B_CHUNKS_PER_ROW, b_col = (threadIdx.x % B_CHUNKS_PER_ROW) * 8;
    const size_t a_pass_step = (size_t)A_ROWS_PER_PASS * K, b_pass_step = (size_t)B_ROWS_PER_PASS * N;
    const T* a_next = A + (size_t)(row0 + a_row) * K + a_col;  // this thread's first chunk of the next k-tile
    const T* b_next = B + (size_t)b_row * N + col0 + b_col;
    const bool b_col_inside = col0 + b_col < N;
    int k_next = 0;  // where the next k-tile to copy starts

    // Start the copies of the next k-tile into stage s (chunks outside A or B become zeros).
    auto copy_next_k_tile = [&](int s) {
        T* const as = a_stages + s * A_STAGE;
        T* const bs = b_stages + s * B_STAGE;
        const bool a_k_inside = k_next + a_col < K;
#pragma unroll
        for (int i = 0; i < A_PASSES; ++i) {
            const int m = a_row + i * A_ROWS_PER_PASS;
            if (BM % A_ROWS_PER_PASS == 0 || m < BM) {  // the last pass may be partial
                const bool inside = a_k_inside && row0 + m < M;
                copy_chunk<ALIGNED>(as + m * A_LD + a_col, inside ? a_next + i * a_pass_step : A, inside);
            }
        }
#pragma unroll
        for (int i = 0; i < B_PASSES; ++i) {
            const int k = b_row + i * B_ROWS_PER_PASS;
            if (BK % B_ROWS_PER_PASS == 0 || k < BK) {
                const bool inside = b_col_inside && k_next + k < K;
                copy_chunk<ALIGNED>(bs + k * B_LD + b_col, inside ? b_next + i * b_pass_step : B, inside);
            }
        }
        a_next += BK;
        b_next += (size_t)BK * N;
        k_next += BK;
    };

    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b[FN];
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    const int tiles_k = (K + BK - 1) / BK;
    // ---- exercise: the pipeline — fill it, then one k-tile per iteration: wait, barrier, refill,
    //      the math on the tile (load_shared_fragment, wmma::mma_sync) ---------------------------------
    // ---- end of the exercise -----------------------------------------------------------------------
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();  // every warp is done with the stages: they become the scratch tiles below

    // A fragment wholly inside C goes straight to global memory (N % 8 == 0 and, with ALIGNED, C on
    // a 32-byte boundary: every row of the fragment starts 32-byte aligned); any other goes through
    // this warp's 16×16 scratch tile and is copied element by element, inside C only.
    float* const scratch = reinterpret_cast<float*>(wmma_stages) + warp * 256;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            const int r = row0 + wm + 16 * i, c = col0 + wn + 16 * j;
            if (r >= M || c >= N) continue;
            if (ALIGNED && r + 16 <= M && c + 16 <= N) {
                wmma::store_matrix_sync(C + (size_t)r * N + c, acc[i][j], N, wmma::mem_row_major);
            } else {
                wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
                __syncwarp();
                for (int e = lane; e < 256; e += 32) {
                    const int rr = r + e / 16, cc = c + e % 16;
                    if (rr < M && cc < N) C[(size_t)rr * N + cc] = scratch[e];
                }
                __syncwarp();
            }
        }
}
