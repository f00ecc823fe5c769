// Level 2 — shared-memory tiling: a block computes a TILE×TILE tile of C, staging TILE×TILE tiles
// of A and B in shared memory so that each value loaded from global memory is used TILE times.
// 第 2 级：共享内存分块。一个线程块计算 C 的一个 TILE×TILE 分块，把 A 和 B 的 TILE×TILE
// 分块暂存在共享内存中，使得从全局内存加载的每个值都被使用 TILE 次。
//
//             k0      k0+TILE                        col0 .. col0+TILE
//        ┌────┬───────┬────┐                    ┌──────┬──────┬──────┐
//   row0 │    │  As   │    │  ×            k0   │      │  Bs  │      │
//        └────┴───────┴────┘               k0+T │      │      │      │
//        A: M×K, one TILE-wide strip            └──────┴──────┴──────┘
//        of rows, walked along k                B: K×N, one TILE-wide strip of columns
//
// Per k-step of TILE, every thread loads ONE element of As and ONE of Bs (coalesced: threadIdx.x
// walks along a row), the block waits at a barrier, then each thread does TILE multiply-adds
// reading shared memory. Global traffic falls from 2 floats per multiply-add (Level 1, without
// caches) to 2 floats per TILE multiply-adds.
// 沿 k 每走一步（TILE 宽），每个线程向 As 和 Bs 各加载一个元素（合并访问：threadIdx.x
// 沿一行横向递增），线程块在屏障处等待，然后每个线程读取共享内存做 TILE 次乘加。
// 全局内存流量从每次乘加 2 个 float（第 1 级，不计缓存）降到每 TILE 次乘加 2 个 float。
//
// Edges: tiles that hang over M, N or K are filled with zeros, which add nothing to the sum, and
// only threads inside C write. So any M, N, K works.
// 边缘：超出 M、N 或 K 的分块用 0 填充，0 对求和没有贡献，并且只有落在 C 内的线程才写回。所以任意
// M、N、K 都可以。

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
gemm_smem_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    __shared__ float As[TILE][TILE];  // As[m][k]
    __shared__ float Bs[TILE][TILE];  // Bs[k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();  // the whole tile is in shared memory before anyone reads it
                          // 整个分块都进入共享内存后，才有线程读取它

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];  // As: one address per warp row (broadcast); Bs: 32 banks
                                           // As：线程束的一行只读一个地址（广播）；Bs：分布在 32 个存储体上
        __syncthreads();  // everyone is done reading before the next tile overwrites it
                          // 所有线程都读完后，下一个分块才能覆盖它
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
