// Level 7 — vectorized loads and stores: Level 5's kernel moving 16 bytes per instruction.
// 第 7 级：向量化加载与存储。第 5 级的内核，每条指令传输 16 字节。
//
// A float4 load or store moves four floats with one instruction (LDG.E.128, LDS.128, STG.E.128),
// so the same data needs a quarter of the memory instructions:
//   global A: four consecutive k of one row        global B: four consecutive n of one row
//   shared As[k][m..m+3]: a thread's TM values     shared Bs[k][n..n+3]: a thread's TN values
//   C: four consecutive columns per store
// 一次 float4 加载或存储用一条指令传输四个 float（LDG.E.128、LDS.128、STG.E.128），
// 同样的数据只需要四分之一的访存指令：
//   全局内存 A：同一行中连续的四个 k           全局内存 B：同一行中连续的四个 n
//   共享内存 As[k][m..m+3]：一个线程的 TM 个值  共享内存 Bs[k][n..n+3]：一个线程的 TN 个值
//   C：每次存储写连续的四列
//
// Tiles are double-buffered as in Level 5, but staged through registers: the next k-tile's float4
// loads are issued before the math on the current one and stored to the other buffer after it
// (a transposed A tile cannot be copied by 16-byte cp.async, and 2 float4 per thread fit in the
// register budget).
// 分块与第 5 级一样做双缓冲，但经由寄存器中转：下一个 k 分块的 float4
// 加载在当前分块的计算之前发出，计算之后再写入另一个缓冲区（转置存放的 A 分块无法用 16 字节的
// cp.async 拷贝，而每个线程 2 个 float4 也放得进寄存器预算）。
//
// Precondition for this kernel (checked on the host before launch): K and N are multiples of 4 and
// A, B, C start at 16-byte aligned addresses. Then every float4 lies entirely inside or entirely
// outside its matrix, and every vector access is aligned. When a problem breaks it, the launcher
// takes Level 5's scalar kernel instead (included below): correct for any shape, just slower.
// 本内核的前提条件（启动前在主机端检查）：K 和 N 是 4 的倍数，A、B、C 的起始地址 16 字节对齐。
// 这样每个 float4 要么完全落在矩阵内，要么完全落在矩阵外，并且每次向量访问都是对齐的。
// 问题不满足前提时，启动器改用第 5 级的标量内核（见下方包含的代码）：任何形状都正确，只是更慢。
#include "05_register_blocking.cu"

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "vectors of 4 floats");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    constexpr int A_STRIDE = BM + 4;  // padded like Level 5; rows stay 16-byte aligned
                                      // 与第 5 级一样做填充；每行仍然 16 字节对齐
    constexpr int A_LOADS = (BM * BK / 4 + THREADS - 1) / THREADS;  // float4 per thread per k-tile
                                                                    // 每个线程每个 k 分块的 float4 个数
    constexpr int B_LOADS = (BK * BN / 4 + THREADS - 1) / THREADS;
    __shared__ __align__(16) float As[2][BK][A_STRIDE];  // double-buffered, as in Level 5
                                                         // 双缓冲，与第 5 级相同
    __shared__ __align__(16) float Bs[2][BK][BN];

    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
                                                 // 一批矩阵乘中的一个，对应网格的一个 z 下标（见 common.cuh）
    const int tid = threadIdx.x;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float4 a_next[A_LOADS], b_next[B_LOADS];

    auto fetch = [&](int k0) {  // global → registers, one float4 per load
                                // 全局内存 → 寄存器，每次加载一个 float4
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {  // A: one float4 = 4 consecutive k of one row
                                             // A：一个 float4 = 同一行中连续的 4 个 k
            const int e = tid + i * THREADS;
            const int gr = row0 + e / (BK / 4), gk = k0 + (e % (BK / 4)) * 4;
            a_next[i] = (e < BM * BK / 4 && gr < M && gk < K)
                ? *reinterpret_cast<const float4*>(A + (size_t)gr * K + gk) : zero;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {  // B: one float4 = 4 consecutive n of one row
                                             // B：一个 float4 = 同一行中连续的 4 个 n
            const int e = tid + i * THREADS;
            const int gk = k0 + e / (BN / 4), gc = col0 + (e % (BN / 4)) * 4;
            b_next[i] = (e < BK * BN / 4 && gk < K && gc < N)
                ? *reinterpret_cast<const float4*>(B + (size_t)gk * N + gc) : zero;
        }
    };
    auto store = [&](int buf) {  // registers → shared memory
                                 // 寄存器 → 共享内存
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = tid + i * THREADS;
            if (e >= BM * BK / 4) continue;
            const int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
            As[buf][k + 0][m] = a_next[i].x;  // transposed: four scalar stores
                                              // 转置存放：四次标量存储
            As[buf][k + 1][m] = a_next[i].y;
            As[buf][k + 2][m] = a_next[i].z;
            As[buf][k + 3][m] = a_next[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int e = tid + i * THREADS;
            if (e < BK * BN / 4) *reinterpret_cast<float4*>(&Bs[buf][e / (BN / 4)][(e % (BN / 4)) * 4]) = b_next[i];
        }
    };

    float acc[TM][TN] = {};
    fetch(0);
    store(0);
    __syncthreads();
    for (int k0 = 0, cur = 0; k0 < K; k0 += BK, cur ^= 1) {
        const bool more = k0 + BK < K;
        if (more) fetch(k0 + BK);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[cur][k][tr * TM + i]);
                a[i] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][k][tc * TN + j]);
                b[j] = v.x, b[j + 1] = v.y, b[j + 2] = v.z, b[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        if (more) store(cur ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + tr * TM + i;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int c = col0 + tc * TN + j;
            if (r < M && c < N)
                *reinterpret_cast<float4*>(C + (size_t)r * N + c) =
                    make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        }
    }
}
