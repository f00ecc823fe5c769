// Level 3 — coalescing and shared-memory bank conflicts, on Level 2's tiled kernel (TILE = 32).
// 第 3 级：合并访问与共享内存存储体冲突，基于第 2 级的分块内核（TILE = 32）。
//
// A warp is one row of the 32×32 thread block: ty fixed, tx = 0..31.
// 一个线程束是 32×32 线程块中的一行：ty 固定，tx = 0..31。
//
// Global memory serves a warp's load in 32-byte sectors: 32 consecutive floats take 4 sectors,
// 32 floats a whole row apart take 32.
// 全局内存以 32 字节扇区为单位响应一个线程束的加载：32 个连续的 float 占 4 个扇区，
// 彼此相隔整整一行的 32 个 float 占 32 个。
//
// Shared memory has 32 banks of 4 bytes; word w sits in bank w % 32. A warp's access costs as many
// passes (wavefronts) as the most distinct words any one bank must serve; lanes that read the same
// word share it (a broadcast).
// 共享内存有 32 个 4 字节宽的存储体；字 w 位于存储体 w % 32。
// 一个线程束的访问要花的波前（wavefront）数，等于单个存储体必须响应的不同字的最大个数；
// 读取同一个字的 lane 共享这次读取（广播）。
//
// Edges as in Level 2: out-of-range elements become zeros; only threads inside C write.
// 边缘处理与第 2 级相同：越界元素取 0；只有落在 C 内的线程才写回。

template <int TILE, int LOAD_ORDER, int A_LAYOUT, int B_LAYOUT = 0>
__global__ void __launch_bounds__(TILE * TILE)
gemm_coalescing_banks(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    // This exercise's copy writes its indexing out by hand and ignores the LOAD_ORDER, A_LAYOUT and
    // B_LAYOUT switches. It keeps the A tile transposed, As[k][m], as later levels do (they read A
    // along m). Your job: the same transposed tile, without the bank conflict on the store.
    // 本练习的拷贝代码手写了下标计算，不理会 LOAD_ORDER、A_LAYOUT 和 B_LAYOUT 这几个开关。它把 A
    // 分块按转置存放为 As[k][m]，与后面几级一样（它们沿 m 读取 A）。你的任务：得到同样的转置分块，
    // 但写入时没有存储体冲突。
    __shared__ float As[TILE][TILE];       // As[k][m]: transposed
                                           // As[k][m]：转置存放
    __shared__ float Bs[TILE][TILE];       // Bs[k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r = ty, c = tx;  // coalesced: a warp (fixed ty, tx = 0..31) copies one row segment
                               // 合并访问：一个线程束（ty 固定，tx = 0..31）拷贝一行中连续的一段
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // A tile element (m = r, k = c); B tile element (k = r, n = c)
        // A 分块的元素 (m = r, k = c)；B 分块的元素 (k = r, n = c)
        As[c][r] =
            (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : 0.0f;
        Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[k][ty] * Bs[k][tx];
        __syncthreads();
    }
    if (row0 + ty < M && col0 + tx < N)
        C[(size_t)(row0 + ty) * N + col0 + tx] = acc;
}
