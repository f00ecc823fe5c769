// Level 3 — coalescing and shared-memory bank conflicts, as two switches on Level 2's kernel.
// 第 3 级：合并访问与共享内存存储体冲突，作为第 2 级内核上的两个开关。
//
// LOAD_ORDER decides which tile element a thread copies from global memory:
//   0 coalesced: thread (ty, tx) copies element (r, c) = (ty, tx): a warp reads one row segment,
//                32 consecutive floats = 4 sectors of 32 B.
//   1 strided:   thread (ty, tx) copies element (r, c) = (tx, ty): a warp reads one column segment,
//                32 floats a whole row apart = 32 sectors.
// LOAD_ORDER 决定线程从全局内存拷贝分块中的哪个元素：
//   0 coalesced：线程 (ty, tx) 拷贝元素 (r, c) = (ty, tx)：一个线程束读取一行中的一段，
//                即 32 个连续的 float = 4 个 32 B 扇区。
//   1 strided：  线程 (ty, tx) 拷贝元素 (r, c) = (tx, ty)：一个线程束读取一列中的一段，
//                32 个 float 彼此相隔一整行 = 32 个扇区。
//
// A_LAYOUT decides where element (m, k) of the A tile lives in shared memory (32 banks of 4 B;
// word address w sits in bank w % 32; a warp's access costs as many passes as the most distinct
// words any one bank must serve):
//   0 mk           As[m][k]                Level 2's layout
//   1 mk_padded    As[m][k], rows TILE+1   the seed guide's padding: no conflict to remove here
//   2 km           As[k][m]                transposed (later levels read A along m with vectors)
//   3 km_padded    As[k][m], rows TILE+1   padding breaks the stride
//   4 km_swizzled  As[k][m ^ k]            XOR swizzle: a permutation within each row
// A_LAYOUT 决定 A 分块的元素 (m, k) 放在共享内存的什么位置（32 个 4 B 的存储体；字地址 w 位于存储体
// w % 32；一个线程束的访问需要的波前数，等于任一存储体要服务的不同字的最大个数）：
//   0 mk           As[m][k]                第 2 级的布局
//   1 mk_padded    As[m][k]，每行 TILE+1   那份指南里的填充：这里本来就没有冲突可消
//   2 km           As[k][m]                转置（后面各级用向量沿 m 读取 A）
//   3 km_padded    As[k][m]，每行 TILE+1   填充打破了步长
//   4 km_swizzled  As[k][m ^ k]            XOR 重排：每一行之内的一个置换
//
//   Storing the coalesced load into "km": lane tx writes As[tx][ty] = word tx*TILE + ty.
//   With TILE = 32 every lane hits bank ty: a 32-way conflict.
//     km_padded:   word tx*33 + ty       -> bank (tx + ty) % 32: all different
//     km_swizzled: word tx*32 + (ty^tx)  -> bank ty ^ tx:       all different
//   The inner loop reads A(m = ty, k) with ty fixed across a warp row: one word, a broadcast, in
//   every layout.
//   把合并的加载写入 "km"：lane tx 写 As[tx][ty] = 字 tx*TILE + ty。
//   TILE = 32 时每个 lane 都落在存储体 ty 上：32 路冲突。
//     km_padded：  字 tx*33 + ty       -> 存储体 (tx + ty) % 32：互不相同
//     km_swizzled：字 tx*32 + (ty^tx)  -> 存储体 ty ^ tx：      互不相同
//   内层循环读取 A(m = ty, k)，同一线程束行中 ty 固定：在每种布局下都是同一个字，即一次广播。
//
// B_LAYOUT pads the rows of the B tile (0 kn: Bs[k][n], 1 kn_padded: rows TILE+1). It exists to
// separate two causes: the strided load also stores each tile down a column of shared memory, a
// 32-way bank conflict in the plain layouts. With both tiles padded, load="strided" differs from
// load="coalesced" in its global accesses alone.
// B_LAYOUT 给 B 分块的每行加填充（0 kn：Bs[k][n]，1 kn_padded：每行 TILE+1）。它用来区分两个原因：跨
// 步加载还会把每个分块沿共享内存的一列（纵向）写入，在不加填充的布局下是 32 路存储体冲突。两个分块都
// 加填充后，load="strided" 与 load="coalesced" 的差别就只剩全局内存访问。

template <int TILE, int A_LAYOUT>
__device__ __forceinline__ int a_tile_index(int m, int k)
{
    if (A_LAYOUT == 0) return m * TILE + k;
    if (A_LAYOUT == 1) return m * (TILE + 1) + k;
    if (A_LAYOUT == 2) return k * TILE + m;
    if (A_LAYOUT == 3) return k * (TILE + 1) + m;
    return k * TILE + (m ^ k);  // 4: XOR swizzle, TILE is a power of two so m ^ k < TILE
                                // 4：XOR 重排，TILE 是 2 的幂，所以 m ^ k < TILE
}

template <int TILE, int LOAD_ORDER, int A_LAYOUT, int B_LAYOUT = 0>
__global__ void __launch_bounds__(TILE * TILE)
gemm_coalescing_banks(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    constexpr int A_STRIDE = (A_LAYOUT == 1 || A_LAYOUT == 3) ? TILE + 1 : TILE;
    __shared__ float As[TILE * A_STRIDE];
    __shared__ float Bs[TILE][B_LAYOUT == 1 ? TILE + 1 : TILE];  // Bs[k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r = LOAD_ORDER == 0 ? ty : tx;  // which tile element this thread copies
                                              // 这个线程拷贝分块中的哪个元素
    const int c = LOAD_ORDER == 0 ? tx : ty;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // A tile element (m = r, k = c); B tile element (k = r, n = c)
        // A 分块的元素 (m = r, k = c)；B 分块的元素 (k = r, n = c)
        As[a_tile_index<TILE, A_LAYOUT>(r, c)] =
            (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : 0.0f;
        Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[a_tile_index<TILE, A_LAYOUT>(ty, k)] * Bs[k][tx];
        __syncthreads();
    }
    if (row0 + ty < M && col0 + tx < N)
        C[(size_t)(row0 + ty) * N + col0 + tx] = acc;
}
