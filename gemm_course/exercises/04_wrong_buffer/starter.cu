// Level 4 — double buffering: two shared-memory buffers per operand, so the loads of tile t+1 are
// in flight while the block computes on tile t. One barrier per k-tile.
// 第 4 级：双缓冲。每个操作数有两个共享内存缓冲区，线程块在分块 t 上计算时，分块 t+1
// 的加载已经在传输途中。沿 K 每个分块只需一次屏障。
//
//   iteration t:   barrier ─▶ load tile t+1 from global memory into registers (a_next, b_next)
//                             compute on buf[t%2]  (the loads travel meanwhile)
//                             store the registers into buf[(t+1)%2]
//   第 t 次迭代：  屏障 ─▶ 把分块 t+1 从全局内存加载到寄存器（a_next, b_next）
//                        在 buf[t%2] 上计算（同时加载仍在传输途中）
//                        把寄存器中的数据写入 buf[(t+1)%2]
//
// The single barrier does two jobs: tile t is complete for every thread, and every thread has
// finished computing on tile t-1, whose buffer buf[(t+1)%2] the stores of this iteration overwrite.
// 这一次屏障同时完成两件事：分块 t 对每个线程都已完整；每个线程都已算完分块 t-1，
// 而本次迭代的写入会覆盖它所在的缓冲区 buf[(t+1)%2]。
//
// This exercise's copy moves the next tile through registers only (the level's COPY = 0); it
// ignores the COPY switch.
// 本练习只经由寄存器拷贝下一个分块（即本级的 COPY = 0），不理会 COPY 开关。
//
// Edges as in Level 2: out-of-range elements become zeros; only threads inside C write.
// 边缘处理与第 2 级相同：越界元素取 0；只有落在 C 内的线程才写回。

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

    // This thread's element of tile t of A and of B, or 0 where it lies outside the matrix.
    // 本线程在 A 和 B 的分块 t 中负责的元素；落在矩阵之外时为 0。
    auto a_elem = [&](int t) { return (row < M && t * TILE + tx < K) ? A[(size_t)row * K + t * TILE + tx] : 0.0f; };
    auto b_elem = [&](int t) { return (t * TILE + ty < K && col < N) ? B[(size_t)(t * TILE + ty) * N + col] : 0.0f; };

    As[0][ty][tx] = a_elem(0);  // tile 0 goes straight into buffer 0
                                // 分块 0 直接写入缓冲区 0
    Bs[0][ty][tx] = b_elem(0);

    float acc = 0.0f;
    float a_next = 0.0f, b_next = 0.0f;  // the next tile, parked in registers
                                         // 下一个分块，暂存在寄存器中
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1, nxt = cur ^ 1;
        __syncthreads();

        const bool more = t + 1 < tiles;
        if (more) {  // issue the loads early: they travel while the loop below computes
                     // 提前发出加载：下面的循环计算时它们一路传输
            a_next = a_elem(t + 1);
            b_next = b_elem(t + 1);
        }
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[cur][ty][k] * Bs[cur][k][tx];
        if (more) {  // nobody reads buf[nxt] before the next barrier
                     // 下一次屏障之前没有线程读取 buf[nxt]
            As[cur][ty][tx] = a_next;
            Bs[cur][ty][tx] = b_next;
        }
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
