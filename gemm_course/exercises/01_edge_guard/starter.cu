// Level 1 — the naive kernel: one thread computes one element of C = A · B.
// 第 1 级：朴素内核，一个线程计算 C = A · B 的一个元素。
//
// A is M×K, B is K×N, C is M×N, all row-major floats. Thread (row, col) reads row `row` of A and
// column `col` of B, K elements each, and writes one element of C. Nothing is reused on purpose:
// every multiply-add loads two floats from global memory (through the caches).
// A 为 M×K，B 为 K×N，C 为 M×N，都是行主序的 float。线程 (row, col) 读取 A 的第 `row` 行和 B
// 的第 `col` 列（各 K 个元素），写出 C 的一个元素。这里有意不做任何复用：
// 每次乘加都要从全局内存（经过缓存）加载两个 float。
//
// The two kernels below differ only in which index threadIdx.x walks. A warp is 32 threads with
// consecutive threadIdx.x, and the memory system serves a warp's load in 32-byte sectors, so that
// choice decides how many sectors one warp-wide load costs:
// 下面两个内核只有一处不同：threadIdx.x 沿哪个下标递增。一个线程束是 threadIdx.x 连续的 32 个线程，
// 内存系统以 32 字节的扇区为单位响应一个线程束的加载，所以这个选择决定了一次线程束级加载要花多少个
// 扇区：
//
//   gemm_naive_cols: lanes 0..31 take 32 neighbouring COLUMNS of one row of C
//   gemm_naive_cols：lane 0..31 取 C 中同一行里相邻的 32 列
//
//        B (K×N)                       A[row][k]   one address for the whole warp  -> 1 sector
//        k ─▶ ██████████ (32 floats)   B[k][col]   32 consecutive floats (128 B)   -> 4 sectors
//                                      C[row][col] 32 consecutive floats           -> 4 sectors
//        B (K×N)                       A[row][k]   整个线程束只有一个地址          -> 1 个扇区
//        k ─▶ ██████████ (32 个 float) B[k][col]   32 个连续 float (128 B)         -> 4 个扇区
//                                      C[row][col] 32 个连续 float                 -> 4 个扇区
//
//   gemm_naive_rows: lanes 0..31 take 32 neighbouring ROWS of one column of C
//   gemm_naive_rows：lane 0..31 取 C 中同一列里相邻的 32 行
//
//        A (M×K)                       A[row][k]   32 addresses, K floats apart    -> 32 sectors
//        █ row r                       B[k][col]   one address for the whole warp  -> 1 sector
//        █ row r+1   (stride K)        C[row][col] 32 addresses, N floats apart    -> 32 sectors
//        █ ...
//        A (M×K)                       A[row][k]   32 个地址，相隔 K 个 float      -> 32 个扇区
//        █ 第 r 行                     B[k][col]   整个线程束只有一个地址          -> 1 个扇区
//        █ 第 r+1 行 (跨度 K)          C[row][col] 32 个地址，相隔 N 个 float      -> 32 个扇区
//        █ ……（以此类推）
//
// In "rows" each A sector holds 8 consecutive k, so the next 7 iterations may hit in L1 — if it
// still holds them. Level 1's notebook measures how much that rescues.
// 在 "rows" 中，A 的每个扇区装有 8 个连续的 k，所以接下来 7 次迭代可能命中 L1——前提是 L1
// 还留着它们。第 1 级的笔记本会测量这能挽回多少。

template <int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive_cols(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    const int col = blockIdx.x * BLOCK_X + threadIdx.x;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row > M || col > N) return;  // the grid is rounded up to whole blocks
                                     // 网格向上取整到整数个线程块

    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}

template <int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive_rows(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    const int row = blockIdx.x * BLOCK_X + threadIdx.x;
    const int col = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row >= M || col >= N) return;

    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
