// Level 5 — register blocking: each thread computes a TM×TN block of C in registers.
// 第 5 级：寄存器分块。每个线程在寄存器中计算 C 的一个 TM×TN 线程分块。
//
// A block of (BM/TM)·(BN/TN) threads computes a BM×BN tile of C, walking K in steps of BK.
// 一个由 (BM/TM)·(BN/TN) 个线程组成的线程块计算 C 的一个 BM×BN 线程块分块，沿 K 以 BK 为步长推进。
//
//            BK                         BN
//         ┌──────┐                ┌───────────────┐
//         │      │             BK │      Bs       │  Bs[k][n]
//      BM │  As  │                └───────────────┘
//         │      │   As stored transposed, As[k][m], so that a thread's TM values of A for one k
//         └──────┘   are consecutive in shared memory (Level 7 reads them as float4).
//
//   thread (tr, tc) owns rows tr·TM .. tr·TM+TM-1 and columns tc·TN .. tc·TN+TN-1 of the tile:
// 线程 (tr, tc) 负责分块中的第 tr·TM .. tr·TM+TM-1 行和第 tc·TN .. tc·TN+TN-1 列：
//
//      for each k in the tile:   a[i] = As[k][tr·TM + i]   (TM loads)
//                                b[j] = Bs[k][tc·TN + j]   (TN loads)
//                                acc[i][j] += a[i]·b[j]    (TM·TN FMAs)
//      对分块中的每个 k：   a[i] = As[k][tr·TM + i]   （TM 次加载）
//                           b[j] = Bs[k][tc·TN + j]   （TN 次加载）
//                           acc[i][j] += a[i]·b[j]    （TM·TN 次乘加）
//
// Level 2 did 1 FMA per shared load (or a little more); this does TM·TN FMAs per TM+TN loads:
// 8×8 gives 64 FMAs per 16 loads. The accumulators live in registers, which is why the loops
// over i and j must be fully unrolled (a register array indexed at run time goes to local memory).
// 第 2 级每次共享内存加载只做 1 次乘加（或稍多一点）；这里每 TM+TN 次加载做 TM·TN 次乘加：8×8 时每
// 16 次加载做 64 次乘加。累加器放在寄存器中，所以对 i 和 j 的循环必须完全展开（运行时才确定下标的寄
// 存器数组会被放进局部内存）。
//
// As's rows are padded by 4 floats: the tile load writes As[k][m] with k varying fastest across a
// warp, and a row length of BM (a multiple of 32) would put those lanes in a few banks (Level 3);
// BM+4 spreads them and keeps every row 16-byte aligned.
// As 的每行多填充 4 个 float：加载分块时写入 As[k][m]，一个线程束中 k 变化最快；若行长为 BM（32
// 的倍数），这些 lane 会挤在少数几个存储体上（见第 3 级）；BM+4 把它们分散开，同时每行仍然 16
// 字节对齐。
//
// Edges: elements outside A or B load as zeros; only elements inside C are stored. Any M, N, K.
// 边缘：A 或 B 之外的元素加载为 0；只写回 C 之内的元素。任意 M、N、K 都可以。

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
// 把双缓冲（第 4 级）带到本级：两个 RegisterTiles。线程在其中一个上对当前 k 分块做乘法时，下一个 k
// 分块已经在用 cp.async 拷贝进另一个（第 4 级的第二种拷贝方式，见 common.cuh），cp.async
// 把数据从全局内存拷贝到共享内存，不经过寄存器。这一点在这里很重要：若把下一个分块暂存在寄存器中，
// 每个线程还要多用 8 个寄存器，而在 128 个寄存器的上限下（每个 SM 两个 256 线程的线程块），
// 编译器会发生溢出。每个 k 分块一次屏障就够了：它既让新分块对所有线程可见，
// 也保证所有线程都用完了旧分块，下一次迭代才会覆盖它。sm_80 之前，
// 拷贝就是普通的加载和存储（结果正确，但没有重叠）。
//
// The main loop: acc[i][j] = sum over K of A[row0 + tr·TM + i][k] · B[k][col0 + tc·TN + j].
// 主循环：acc[i][j] = 对 K 求和 A[row0 + tr·TM + i][k] · B[k][col0 + tc·TN + j]。
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
    // 全局内存 → 共享内存，中途不经过寄存器：cp.async（sm_80 及以上；更早的架构用普通拷贝）。
    auto load = [&](RegisterTile<BM, BN, BK, TM, TN>& t, int k0) {
#pragma unroll
        for (int e = tid; e < BM * BK; e += THREADS) {  // A: k fastest (coalesced), stored transposed
                                                        // A：k 变化最快（合并访问），转置存放
            const int gr = row0 + e / BK, gk = k0 + e % BK;
            const bool ok = gr < M && gk < K;
            copy_async<4>(&t.As[e % BK][e / BK], ok ? A + (size_t)gr * K + gk : A, ok);
        }
#pragma unroll
        for (int e = tid; e < BK * BN; e += THREADS) {  // B: n fastest
                                                        // B：n 变化最快
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
                                                     // 对分块 k0 做乘法时，它在传输途中
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = s[cur].As[k][tr * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = s[cur].Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        copy_async_wait_all();
        __syncthreads();
    }
}

// Two blocks per SM (the compiler keeps registers ≤ 128 for 256 threads) unless a block is larger.
// 每个 SM 两个线程块（256 个线程时编译器把寄存器控制在 128 个以内），除非线程块更大。
#define REGISTER_BLOCKS_PER_SM(THREADS) ((THREADS) <= 256 ? 2 : 1)

// Write the thread's TM×TN accumulators to C, op(value, row, column) → the value to store (Level 6
// passes its epilogue here); elements outside C are skipped.
// 把线程的 TM×TN 个累加器写回 C，op(value, row, column) → 要写入的值（第 6 级在这里传入它的尾处理
// （epilogue））；C 之外的元素跳过。
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
                                                 // 一批矩阵乘中的一个，对应网格的一个 z 下标（见 common.cuh）
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    register_blocked_mainloop<BM, BN, BK, TM, TN>(A, B, M, N, K, row0, col0, acc);
    store_register_tile<BM, BN>(C, M, N, row0, col0, acc, [](float v, int, int) { return v; });
}
