// Level 8 — warp tiling: block tile → warp tile → thread tile, double-buffered, 16-byte accesses,
// and an L2-friendly order of blocks. The course's fastest FP32 kernel.
// 第 8 级：线程束分块。线程块分块 → 线程束分块 → 线程分块，双缓冲，16 字节访问，以及对 L2
// 友好的线程块顺序。这是课程中最快的 FP32 内核。
//
//   block tile BM×BN               warp tile WM×WN               thread: (4·WM/32)×(4·WN/16)
//   ┌──────────┬──────────┐
//   │  warp 0  │  warp 1  │ ...
//   ├──────────┼──────────┤
//   │  warp 2  │  warp 3  │
//   └──────────┴──────────┘
//
// The block tile belongs to one thread block, the warp tile to one warp. The 32 lanes of a warp form
// an 8 (m) × 4 (n) grid; each lane owns 4×4 sub-tiles repeated every 32 rows and 16 columns:
//   cols  ln·4 .. ln·4+3   and  16+ln·4 .. (WN = 32)
//   rows  lm·4 .. lm·4+3   and  32+lm·4 .. (WM = 64)
// 线程块分块归一个线程块，线程束分块归一个线程束。一个线程束的 32 个 lane 排成 8 (m) × 4 (n)
// 的网格；每个 lane 负责若干 4×4 的子分块，每隔 32 行、16 列重复一次：
//   列  ln·4 .. ln·4+3   以及  16+ln·4 ..（WN = 32）
//   行  lm·4 .. lm·4+3   以及  32+lm·4 ..（WM = 64）
//
// Why this shape: for each k, a warp reads its A values as 8 distinct float4 (lanes with the same
// lm share one: a broadcast) and its B values as 4 distinct float4, each set contiguous in shared
// memory, so every shared load is 16 bytes wide and conflict-free, and each thread turns
// (TM + TN)/4 shared loads into TM·TN FMAs (8×8: 4 LDS.128 per 64 FFMA).
// 为什么取这个形状：对每个 k，一个线程束以 8 个不同的 float4 读取它的 A 值（lm 相同的 lane
// 共用一个：广播），以 4 个不同的 float4 读取它的 B 值，每组在共享内存中都是连续的；
// 于是每次共享内存加载都是 16 字节宽、没有存储体冲突，每个线程用 (TM + TN)/4 次共享内存加载完成
// TM·TN 次乘加（8×8 时：每 64 条 FFMA 对应 4 条 LDS.128）。
//
// Main loop, one barrier per k-tile (Level 4's scheme, 16-byte global loads staged in registers):
//   load tile 0 → registers → shared[0]; barrier
//   for t:  issue global loads of tile t+1 into registers;  compute on shared[t%2];
//           store registers → shared[(t+1)%2];  barrier
// 主循环，每个 k 分块一次屏障（第 4 级的方案，16 字节的全局内存加载经由寄存器中转）：
//   分块 0 加载 → 寄存器 → shared[0]；屏障
//   对每个 t：发出分块 t+1 到寄存器的全局内存加载；在 shared[t%2] 上计算；
//             寄存器 → shared[(t+1)%2]；屏障
//
// Block order: blocks are numbered along the grid's only dimension and mapped to tiles in groups of
// GROUP_M tile rows (column by column inside a group), so blocks running at the same time share
// rows of A and columns of B in the L2 cache instead of sweeping all of B. GROUP_M = 1 is the plain
// row-by-row order (kept as a setting so that the gain can be measured, not assumed).
// 线程块顺序：线程块沿网格唯一的维度编号，并以 GROUP_M 行分块为一组映射到分块上（组内逐列推进），
// 这样同时运行的线程块在 L2 缓存中共用 A 的行和 B 的列，而不必扫过整个 B。GROUP_M = 1
// 就是普通的逐行顺序（保留为一个设置，以便实测收益，而不是想当然）。

#include "common.cuh"

// VEC (the host picks it): true needs K and N multiples of 4 and 16-byte aligned pointers; every
// float4 is then entirely inside or outside its matrix. false loads and stores element by element
// with a guard on each, for any shape. Out-of-range elements load as zeros; only C's elements are
// written.
// VEC（由主机端选定）：为 true 时要求 K 和 N 是 4 的倍数、指针 16 字节对齐，这样每个 float4
// 要么完全落在矩阵内，要么完全落在矩阵外。为 false 时逐个元素加载和存储，每个元素都做边界判断，
// 适用于任何形状。越界元素加载为 0；只写 C 中的元素。

// MIN_BLOCKS asks the compiler to fit that many blocks per SM (it caps registers accordingly):
// two 256-thread blocks need at most 128 registers per thread.
// MIN_BLOCKS 要求编译器让每个 SM 容纳这么多线程块（编译器据此限制寄存器数）：两个 256
// 线程的线程块要求每个线程最多 128 个寄存器。
template <int BM, int BN, int BK, int WM, int WN, bool VEC, int MIN_BLOCKS = 2, int GROUP_M = 8,
          bool BATCHED = false>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
gemm_warp_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
                                                 // 一批矩阵乘中的一个，对应网格的一个 z 下标（见 common.cuh）
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int WM_ITER = WM / 32, WN_ITER = WN / 16;
    constexpr int TM = 4 * WM_ITER, TN = 4 * WN_ITER;
    constexpr int A_STRIDE = BM + 4;  // breaks the transposed store's bank pattern, keeps 16 B rows
                                      // 打破转置写入的存储体分布规律，同时保持每行 16 字节对齐
    constexpr int A_LOADS = BM * BK / 4 / THREADS;  // float4 per thread per k-tile
                                                    // 每个线程每个 k 分块的 float4 个数
    constexpr int B_LOADS = BK * BN / 4 / THREADS;
    static_assert(A_LOADS * THREADS * 4 == BM * BK && B_LOADS * THREADS * 4 == BK * BN,
                  "each thread loads whole float4s of both tiles");

    __shared__ __align__(16) float As[2][BK][A_STRIDE];  // As[buf][k][m]: A transposed
                                                         // As[buf][k][m]：A 转置存放
    __shared__ __align__(16) float Bs[2][BK][BN];        // Bs[buf][k][n]

    // ===== The exercise: grouped block order ==================================================
    // The grid is one-dimensional: blockIdx.x = 0 .. tiles_m·tiles_n - 1. Map it to the tile
    // (tile_m, tile_n) of C this block computes, in groups of GROUP_M tile rows (the last group may
    // have fewer), column by column inside a group (see the comment at the top of the file).
    // ===== 练习：分组的线程块顺序 ==================================================
    // 网格是一维的：blockIdx.x = 0 .. tiles_m·tiles_n - 1。把它映射到本线程块要计算的 C 分块
    // (tile_m, tile_n)：以 GROUP_M 行分块为一组（最后一组可以不足），
    // 组内逐列推进（见文件开头的注释）。
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    int tile_m = 0, tile_n = 0;  /* TODO (the exercise) */
    // ========================================================================================
    const int row0 = tile_m * BM, col0 = tile_n * BN;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
    const int lm = lane / 4, ln = lane % 4;

    // The next k-tile of B goes straight to shared memory with 16-byte cp.async on the vector path
    // (common.cuh; no staging registers, which keeps the kernel under the 128-register cap of two
    // blocks per SM); A, stored transposed, still travels through registers.
    // 在向量路径上，B 的下一个 k 分块用 16 字节的 cp.async 直接拷贝到共享内存（见 common.cuh；
    // 不经寄存器中转，使内核保持在每 SM 两个线程块所要求的 128 个寄存器以内）；转置存放的 A
    // 仍经由寄存器传输。
    float4 a_next[A_LOADS], b_next[VEC ? 1 : B_LOADS];

    auto load_global = [&](int k0, int buf) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = tid + i * THREADS;
            const int gr = row0 + e / (BK / 4), gk = k0 + (e % (BK / 4)) * 4;
            const size_t o = (size_t)gr * K + gk;  // an offset: A + o is formed only where it is inside A
                                                   // 偏移量：只有在 A 之内时才构造 A + o
            if (VEC) {
                a_next[i] = (gr < M && gk < K) ? *reinterpret_cast<const float4*>(A + o)
                                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            } else {
                const bool r = gr < M;
                a_next[i] = make_float4(r && gk < K ? A[o] : 0.0f, r && gk + 1 < K ? A[o + 1] : 0.0f,
                                        r && gk + 2 < K ? A[o + 2] : 0.0f, r && gk + 3 < K ? A[o + 3] : 0.0f);
            }
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int e = tid + i * THREADS;
            const int gk = k0 + e / (BN / 4), gc = col0 + (e % (BN / 4)) * 4;
            const size_t o = (size_t)gk * N + gc;
            if (VEC) {
                const bool ok = gk < K && gc < N;
                copy_async<16>(&Bs[buf][e / (BN / 4)][(e % (BN / 4)) * 4], B + (ok ? o : 0), ok);
            } else {
                const bool r = gk < K;
                b_next[i] = make_float4(r && gc < N ? B[o] : 0.0f, r && gc + 1 < N ? B[o + 1] : 0.0f,
                                        r && gc + 2 < N ? B[o + 2] : 0.0f, r && gc + 3 < N ? B[o + 3] : 0.0f);
            }
        }
        copy_async_commit();
    };
    auto store_shared = [&](int buf) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = tid + i * THREADS;
            const int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
            As[buf][k + 0][m] = a_next[i].x;
            As[buf][k + 1][m] = a_next[i].y;
            As[buf][k + 2][m] = a_next[i].z;
            As[buf][k + 3][m] = a_next[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS && !VEC; ++i) {
            const int e = tid + i * THREADS;
            *reinterpret_cast<float4*>(&Bs[buf][e / (BN / 4)][(e % (BN / 4)) * 4]) = b_next[i];
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    load_global(0, 0);
    store_shared(0);
    copy_async_wait_all();
    __syncthreads();

    const int tiles_k = (K + BK - 1) / BK;
    for (int t = 0; t < tiles_k; ++t) {
        const int cur = t & 1;
        const bool more = t + 1 < tiles_k;
        if (more) load_global((t + 1) * BK, cur ^ 1);  // in flight during the compute below
                                                       // 下面计算期间它在传输途中
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int wi = 0; wi < WM_ITER; ++wi) {
                const float4 v = *reinterpret_cast<const float4*>(&As[cur][k][wm0 + wi * 32 + lm * 4]);
                a[wi * 4 + 0] = v.x, a[wi * 4 + 1] = v.y, a[wi * 4 + 2] = v.z, a[wi * 4 + 3] = v.w;
            }
#pragma unroll
            for (int wj = 0; wj < WN_ITER; ++wj) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][k][wn0 + wj * 16 + ln * 4]);
                b[wj * 4 + 0] = v.x, b[wj * 4 + 1] = v.y, b[wj * 4 + 2] = v.z, b[wj * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        if (more) store_shared(cur ^ 1);
        copy_async_wait_all();
        __syncthreads();
    }

#pragma unroll
    for (int wi = 0; wi < WM_ITER; ++wi)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = row0 + wm0 + wi * 32 + lm * 4 + i;
#pragma unroll
            for (int wj = 0; wj < WN_ITER; ++wj) {
                const int c = col0 + wn0 + wj * 16 + ln * 4;
                const int ai = wi * 4 + i, bj = wj * 4;
                if (VEC) {
                    if (r < M && c < N)
                        *reinterpret_cast<float4*>(C + (size_t)r * N + c) =
                            make_float4(acc[ai][bj], acc[ai][bj + 1], acc[ai][bj + 2], acc[ai][bj + 3]);
                } else if (r < M) {
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        if (c + j < N) C[(size_t)r * N + c + j] = acc[ai][bj + j];
                }
            }
        }
}
