// Level 4 — double buffering: two shared-memory buffers per operand, so the loads of tile t+1 are
// in flight while the block computes on tile t. One barrier per k-tile.
// 第 4 级：双缓冲。每个操作数有两个共享内存缓冲区，线程块在分块 t 上计算时，分块 t+1
// 的加载已经在传输途中。沿 K 每个分块只需一次屏障。
//
//   iteration t:   wait for tile t ─▶ barrier ─▶ start loading tile t+1 into buf[(t+1)%2]
//                                               compute on buf[t%2]  (overlaps the loads)
//
// The single barrier does two jobs: tile t is complete for every thread, and every thread has
// finished computing on tile t-1, whose buffer buf[(t+1)%2] the next loads overwrite.
// 唯一的一次屏障同时完成两件事：分块 t 对所有线程都已完整；所有线程都已算完分块 t-1，而下一批加载
// 要覆盖的正是它的缓冲区 buf[(t+1)%2]。
//
// COPY chooses how the next tile travels:
//   0 registers: global -> registers at the top of the iteration, registers -> shared after the
//                compute (any GPU). The loads are issued early; the stores wait for the data.
//   1 cp_async:  global -> shared directly with cp.async (sm_80+), no registers involved; the
//                thread waits for its own copies with cp.async.wait_group before the barrier.
// COPY 选择下一个分块怎样传输：
//   0 registers：迭代开始时 global -> registers（加载到寄存器），计算之后 registers -> shared
//                （写入共享内存；任何 GPU）。加载提早发出，写入共享内存要等数据到达。
//   1 cp_async： 用 cp.async 直接 global -> shared（sm_80 及以上），不经过寄存器；
//                线程在屏障之前用 cp.async.wait_group 等待自己发出的拷贝完成。
//
// Edges as in Level 2: out-of-range elements become zeros; only threads inside C write.
// 边缘处理与第 2 级相同：越界元素取 0；只有落在 C 内的线程才写回。
#include "common.cuh"

template <int TILE, int COPY>
__global__ void __launch_bounds__(TILE * TILE)
gemm_double_buffered(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K)
{
    __shared__ float As[2][TILE][TILE];  // As[buf][m][k]
    __shared__ float Bs[2][TILE][TILE];  // Bs[buf][k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const int tiles = (K + TILE - 1) / TILE;

    // This thread's element of each tile, and whether it lies inside the matrices.
    // 这个线程在每个分块中对应的元素，以及它是否落在矩阵之内。
    auto a_ok = [&](int t) { return row < M && t * TILE + tx < K; };
    auto b_ok = [&](int t) { return t * TILE + ty < K && col < N; };
    auto a_ptr = [&](int t) { return A + (a_ok(t) ? (size_t)row * K + t * TILE + tx : 0); };
    auto b_ptr = [&](int t) { return B + (b_ok(t) ? (size_t)(t * TILE + ty) * N + col : 0); };

    float a_next = 0.0f, b_next = 0.0f;  // COPY == 0: the next tile, parked in registers
                                         // COPY == 0：下一个分块，暂存在寄存器中
    if (COPY == 1) {
        copy_async<4>(&As[0][ty][tx], a_ptr(0), a_ok(0));
        copy_async<4>(&Bs[0][ty][tx], b_ptr(0), b_ok(0));
        copy_async_commit();
    } else {
        As[0][ty][tx] = a_ok(0) ? *a_ptr(0) : 0.0f;
        Bs[0][ty][tx] = b_ok(0) ? *b_ptr(0) : 0.0f;
    }

    float acc = 0.0f;
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1, nxt = cur ^ 1;
        if (COPY == 1) copy_async_wait_all();
        __syncthreads();

        const bool more = t + 1 < tiles;
        if (more) {
            if (COPY == 1) {
                copy_async<4>(&As[nxt][ty][tx], a_ptr(t + 1), a_ok(t + 1));
                copy_async<4>(&Bs[nxt][ty][tx], b_ptr(t + 1), b_ok(t + 1));
                copy_async_commit();
            } else {
                a_next = a_ok(t + 1) ? *a_ptr(t + 1) : 0.0f;
                b_next = b_ok(t + 1) ? *b_ptr(t + 1) : 0.0f;
            }
        }
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[cur][ty][k] * Bs[cur][k][tx];
        if (COPY == 0 && more) {
            As[nxt][ty][tx] = a_next;
            Bs[nxt][ty][tx] = b_next;
        }
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
