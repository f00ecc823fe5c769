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
// 三个内核：
//   wmma_direct<WARPS_M, WARPS_N>  每个线程束负责 C 的一个 16×16 分块，直接从全局内存加载片段。
//                                  load_matrix_sync 从 32 字节对齐的地址读取完整的 16×16 分块，
//                                  所以本内核要求 M、N、K 是 16 的倍数（启动器会检查并给出提示）。
//   wmma_shared<BM, BN, VEC>       线程块把 A 的 BM×32 和 B 的 32×BN 暂存在共享内存中（越过边缘的
//                                  部分填 0：任意 M、N、K；启动器在 K 和 N 是 8 的倍数且指针 16 字节
//                                  对齐时选用 VEC，以 16 字节为单位拷贝），每个线程束以 2×2 个片段
//                                  计算 C 的一个 32×32 分块，每个 A 片段和 B 片段各复用两次；C 内的
//                                  片段直接写回，边缘片段经由每个线程束的暂存分块写回。
//   wmma_pipelined<BM, BN, WM, WN, STAGES, ALIGNED, BK, FRAG_BUFFERS>  同样的 WMMA 调用，但喂饱了：
//                                  由 STAGES 个共享内存缓冲区组成的环，在线程束计算的同时由
//                                  cp.async（sm_80 及以上）填充；WM×WN 的线程束分块（最多 4×4 个片段），
//                                  BK 深的 k 分块（32 或 64），可选两组片段寄存器，以及对 L2 友好的
//                                  线程块顺序。见该内核上方的示意图。
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


// --- staging = "pipelined": how far WMMA goes when it is fed properly --------------------------------
// --- staging = "pipelined"：喂饱 WMMA 时它能走多远 ---------------------------------------------
//
// wmma_shared spends most of its time waiting: each k-tile is loaded, then a barrier, then the math,
// then another barrier, so the Tensor Cores idle while global memory answers. Here the copies of the
// next STAGES-1 k-tiles are in flight while the warps compute on the current one:
// wmma_shared 大部分时间都在等待：每个 k 分块先加载，然后屏障，然后计算，再一次屏障，
// 于是全局内存响应期间张量核心一直空闲。这里在线程束计算当前 k 分块的同时，后面 STAGES-1 个 k
// 分块的拷贝已经在传输途中：
//
//   global ──cp.async 16 B──▶ a stage of the ring ──load_matrix_sync──▶ fragments ──mma_sync──▶ acc
//                                 ┌─────────┬─────────┬─────────┐
//                                 │ tile kt │ kt+1 ⇣  │ kt+2 ⇣  │
//                                 │ (math)  │ landing │ landing │
//                                 └─────────┴─────────┴─────────┘
//
// cp.async copies without registers and fills zeros past the edges. With STAGES = 3, while tile kt is
// computed, kt+1 and kt+2 land.
// cp.async 拷贝时不经过寄存器，越过边缘的部分填 0。STAGES = 3 时，在计算分块 kt 的同时，kt+1 和
// kt+2 正在到达。
//
//   block tile BM×BN, k-tile BK        warp tile WM×WN = (WM/16)×(WN/16) fragments, e.g. 64×64:
//   ┌─────────┬─────────┬───┐          ┌──┬──┬──┬──┐
//   │ warp 0  │ warp 1  │ … │          ├──┼──┼──┼──┤
//   ├─────────┼─────────┼───┤          ├──┼──┼──┼──┤
//   │ warp 4  │ …       │   │          ├──┼──┼──┼──┤
//   └─────────┴─────────┴───┘          └──┴──┴──┴──┘
//
// Per 16-deep k-step a warp loads 4 A and 4 B fragments and issues 16 mma_sync: every A fragment is
// reused across the row, every B fragment down the column (128 fp32 accumulators per thread).
// 沿 k 每走 16 深的一步，一个线程束加载 4 个 A 片段和 4 个 B 片段，发出 16 次 mma_sync：每个 A
// 片段沿一行（横向）复用，每个 B 片段沿一列（纵向）复用（每个线程 128 个 fp32 累加器）。
//
// What WMMA still does not let us do: the fragment layout is hidden, so we cannot pick a swizzled
// shared layout that matches it (Level 10 does). Padding each shared row by 8 halves (16 bytes) is
// the one tool left: the 8 rows that one load reads then start in 8 different 16-byte bank groups.
// WMMA 仍然做不到的事：片段布局是隐藏的，所以我们无法选一个与之匹配的重排（swizzle）
// 共享内存布局（第 10 级可以）。剩下的唯一手段是给共享内存的每行填充 8 个 half（16 字节）：
// 这样一次加载读取的 8 行会从 8 个不同的 16 字节存储体组开始。
//
// Preconditions (the launcher checks them): K and N multiples of 8, so every 16-byte chunk of 8
// halves is wholly inside or wholly outside its matrix; M is free. With ALIGNED (A and B on 16-byte
// addresses, C on 32-byte addresses, chosen by the launcher) the chunks travel with cp.async and
// inner fragments of C are stored straight to global memory; otherwise (an offset view) the same
// pipeline copies element by element and stores every fragment through the scratch tile.
// 前提条件（启动器会检查）：K 和 N 是 8 的倍数，这样每个由 8 个 half 组成的 16
// 字节块要么完全落在矩阵内，要么完全落在矩阵外；M 不受限制。启用 ALIGNED 时（A 和 B 位于 16
// 字节对齐的地址，C 位于 32 字节对齐的地址，由启动器选定），这些块用 cp.async 传输，C
// 内部的片段直接写到全局内存；否则（偏移视图）同一条流水线逐个元素拷贝，
// 每个片段都经由暂存分块写回。

__device__ __forceinline__ unsigned wmma_shared_address(const void* pointer)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// One 16-byte chunk (8 halves) from global to shared memory. inside == false writes 8 zeros (the
// copy reads 0 source bytes), so a tile that hangs over the edge of A or B adds nothing to C.
// 把一个 16 字节块（8 个 half）从全局内存拷贝到共享内存。inside == false 时写入 8 个
// 0（这次拷贝读取 0 字节源数据），所以越过 A 或 B 边缘的分块对 C 没有贡献。
template <bool ASYNC, typename T>
__device__ __forceinline__ void copy_chunk(T* shared_dst, const T* global_src, bool inside)
{
    if constexpr (ASYNC) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                     :: "r"(wmma_shared_address(shared_dst)), "l"(global_src), "r"(inside ? 16 : 0));
    } else {  // misaligned pointers: plain loads and stores, the barrier publishes them
              // 指针未对齐：普通的加载和存储，由屏障让它们对其他线程可见
#pragma unroll
        for (int i = 0; i < 8; ++i) shared_dst[i] = inside ? global_src[i] : static_cast<T>(0.0f);
    }
}

// A 16×16 fragment of A or B from shared memory. For fp16, load_matrix_sync compiles to one ldmatrix
// per fragment. For bf16 the compiler does not carry the knowledge that the pointer is in shared
// memory into the WMMA load: it emits four generic 4-byte loads per lane and transposes B in
// registers (MOVM). The PTX form of the same WMMA load, with the .shared state space spelled out,
// gets ldmatrix back; the fragment's registers are the ones load_matrix_sync would fill.
// 从共享内存加载 A 或 B 的一个 16×16 片段。对 fp16，load_matrix_sync 编译成每个片段一条 ldmatrix。
// 对 bf16，编译器没有把“指针位于共享内存”这一信息带进 WMMA 加载：它为每个 lane 生成四次通用的 4
// 字节加载，并在寄存器中转置 B（MOVM）。同一个 WMMA 加载的 PTX 形式显式写出 .shared 状态空间，
// 就能重新得到 ldmatrix；片段的寄存器与 load_matrix_sync 所填的相同。
template <typename Use>
__device__ __forceinline__ void load_shared_fragment(wmma::fragment<Use, 16, 16, 16, __half, wmma::row_major>& f,
                                                     const __half* p, unsigned ldm)
{
    wmma::load_matrix_sync(f, p, ldm);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800  // bf16 fragments exist from sm_80 on
                                                     // bf16 片段从 sm_80 起才有
__device__ __forceinline__ void load_shared_fragment(
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>& f, const __nv_bfloat16* p, unsigned ldm)
{
    unsigned* r = reinterpret_cast<unsigned*>(f.x);  // 8 bf16 values = 4 registers per lane
                                                     // 8 个 bf16 值 = 每个 lane 4 个寄存器
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
// ---- 练习：环的下标计算 -----------------------------------------------------------------------------
// k 分块在一个由 `stages` 个共享内存缓冲区组成的环上轮转。stage_of(k_tile, stages) 是 k 分块 k_tile
// 被拷贝进去、又从中读取的那个流水级（0 … stages − 1）。groups_in_flight(stages) 是每个 k
// 分块开头传给 cp.async.wait_group 的数：线程束开始计算时，最新提交的拷贝组中最多可以有几组仍在传输
// 途中。
__device__ __forceinline__ int stage_of(int k_tile, int stages)
{
    return 0;
}

__device__ __forceinline__ constexpr int groups_in_flight(int stages)
{
    return 0;
}
// ---- end of the exercise ------------------------------------------------------------------------
// ---- 练习结束 -----------------------------------------------------------------------------------

// Two blocks per SM where the accumulators leave room (at most 128 registers per thread for 8 warps);
// a 64×64 warp tile (128 accumulators per thread) or a larger block gets one.
// 累加器留有余地时每个 SM 两个线程块（8 个线程束时每个线程最多 128 个寄存器）；64×64
// 的线程束分块（每个线程 128 个累加器）或更大的线程块则每个 SM 一个。
//
// BK (32 or 64) is the depth of one k-tile: 64 halves the barriers, the cp.async waits and the
// address arithmetic per multiply-add, at twice the shared memory per stage (128×128 with 3 stages:
// 105 KB, still two blocks per SM on sm_90).
// BK（32 或 64）是一个 k 分块的深度：取 64 时，每次乘加分摊到的屏障、cp.async 等待和地址计算减半，
// 代价是每个流水级的共享内存翻倍（128×128、3 个流水级：105 KB，在 sm_90 上仍是每个 SM
// 两个线程块）。
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
                                                   // 每个线程束的片段数，纵向和横向
    constexpr int A_LD = BK + 8, B_LD = BN + 8;    // +16 bytes per row: rows start in other banks
                                                   // 每行多 16 字节：各行从不同的存储体开始
    constexpr int A_STAGE = BM * A_LD, B_STAGE = BK * B_LD;  // elements per stage
                                                             // 每个流水级的元素数
    static_assert(STAGES * (A_STAGE + B_STAGE) * sizeof(T) >= THREADS / 32 * 256 * sizeof(float),
                  "the epilogue reuses the stages as one 16×16 float scratch tile per warp");

    // Dynamic shared memory (more than the 48 KB a static array may have): STAGES A tiles, then
    // STAGES B tiles. Every fragment starts on a 32-byte boundary, as load_matrix_sync requires.
    // 动态共享内存（超过静态数组所能用的 48 KB）：先是 STAGES 个 A 分块，再是 STAGES 个 B 分块。
    // 每个片段都从 32 字节边界开始，这是 load_matrix_sync 的要求。
    extern __shared__ __align__(128) unsigned char wmma_stages[];
    T* const a_stages = reinterpret_cast<T*>(wmma_stages);
    T* const b_stages = a_stages + STAGES * A_STAGE;

    // Grouped block order (Level 8's idea): consecutive blocks walk down a group of 8 tile rows
    // before moving right, so the blocks that run together share rows of A and columns of B in L2.
    // 分组的线程块顺序（第 8 级的思路）：相邻的线程块先沿一组 8 行分块纵向走完，再向右移动，
    // 这样一起运行的线程块在 L2 中共用 A 的行和 B 的列。
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int blocks_per_group = 8 * tiles_n;
    const int first_tile_row = (blockIdx.x / blocks_per_group) * 8;
    const int rows_in_group = min(tiles_m - first_tile_row, 8);
    const int index_in_group = blockIdx.x % blocks_per_group;
    const int row0 = (first_tile_row + index_in_group % rows_in_group) * BM;
    const int col0 = (index_in_group / rows_in_group) * BN;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;  // this warp's tile in the block
                                                                       // 本线程束在线程块中的分块

    // The copies. Consecutive threads take consecutive 16-byte chunks of a row (coalesced); a pass
    // of all THREADS covers ROWS_PER_PASS rows, and the passes repeat down the tile. A thread copies
    // the same chunk positions in every k-tile, so its pointers and its row tests are worked out
    // once here, and the pointers move one k-tile along after each copy.
    // 拷贝。相邻线程取一行中相邻的 16 字节块（合并访问）；全部 THREADS 个线程走一遍覆盖
    // ROWS_PER_PASS 行，沿分块纵向重复多遍。每个线程在每个 k 分块中拷贝的块位置都相同，
    // 所以它的指针和行判断在这里只算一次，每次拷贝后指针前移一个 k 分块。
    constexpr int A_CHUNKS_PER_ROW = BK / 8, B_CHUNKS_PER_ROW = BN / 8;
    constexpr int A_ROWS_PER_PASS = THREADS / A_CHUNKS_PER_ROW, B_ROWS_PER_PASS = THREADS / B_CHUNKS_PER_ROW;
    constexpr int A_PASSES = (BM + A_ROWS_PER_PASS - 1) / A_ROWS_PER_PASS;
    constexpr int B_PASSES = (BK + B_ROWS_PER_PASS - 1) / B_ROWS_PER_PASS;
    const int a_row = threadIdx.x / A_CHUNKS_PER_ROW, a_col = (threadIdx.x % A_CHUNKS_PER_ROW) * 8;
    const int b_row = threadIdx.x / B_CHUNKS_PER_ROW, b_col = (threadIdx.x % B_CHUNKS_PER_ROW) * 8;
    const size_t a_pass_step = (size_t)A_ROWS_PER_PASS * K, b_pass_step = (size_t)B_ROWS_PER_PASS * N;
    const T* a_next = A + (size_t)(row0 + a_row) * K + a_col;  // this thread's first chunk of the next k-tile
                                                               // 本线程在下一个 k 分块中的第一个块
    const T* b_next = B + (size_t)b_row * N + col0 + b_col;
    const bool b_col_inside = col0 + b_col < N;
    int k_next = 0;  // where the next k-tile to copy starts
                     // 下一个要拷贝的 k 分块的起点

    // Start the copies of the next k-tile into stage s (chunks outside A or B become zeros).
    // 发出下一个 k 分块到流水级 s 的拷贝（A 或 B 之外的块变成 0）。
    auto copy_next_k_tile = [&](int s) {
        T* const as = a_stages + s * A_STAGE;
        T* const bs = b_stages + s * B_STAGE;
        const bool a_k_inside = k_next + a_col < K;
#pragma unroll
        for (int i = 0; i < A_PASSES; ++i) {
            const int m = a_row + i * A_ROWS_PER_PASS;
            if (BM % A_ROWS_PER_PASS == 0 || m < BM) {  // the last pass may be partial
                                                        // 最后一遍可能不满
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
    // ---- 练习：流水线——先把它填满，然后每次迭代处理一个 k 分块：等待、屏障、补充拷贝、
    //      对该分块的计算（load_shared_fragment、wmma::mma_sync）--------------------------------

    // ---- end of the exercise -----------------------------------------------------------------------
    // ---- 练习结束 ----------------------------------------------------------------------------------
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();  // every warp is done with the stages: they become the scratch tiles below
                      // 所有线程束都用完了各流水级：它们变成下面的暂存分块

    // A fragment wholly inside C goes straight to global memory (N % 8 == 0 and, with ALIGNED, C on
    // a 32-byte boundary: every row of the fragment starts 32-byte aligned); any other goes through
    // this warp's 16×16 scratch tile and is copied element by element, inside C only.
    // 完全落在 C 内的片段直接写到全局内存（N % 8 == 0，且启用 ALIGNED 时 C 位于 32 字节边界：
    // 片段的每一行都从 32 字节对齐处开始）；其他片段经由本线程束 16×16 的暂存分块，逐个元素拷贝，
    // 只写 C 之内的部分。
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
