// Level 3 — coalescing and shared-memory bank conflicts, as two switches on Level 2's kernel.
//
// LOAD_ORDER decides which tile element a thread copies from global memory:
//   0 coalesced: thread (ty, tx) copies element (r, c) = (ty, tx): a warp reads one row segment,
//                32 consecutive floats = 4 sectors of 32 B.
//   1 strided:   thread (ty, tx) copies element (r, c) = (tx, ty): a warp reads one column segment,
//                32 floats a whole row apart = 32 sectors.
//
// A_LAYOUT decides where element (m, k) of the A tile lives in shared memory (32 banks of 4 B;
// word address w sits in bank w % 32; a warp's access costs as many passes as the most distinct
// words any one bank must serve):
//   0 mk           As[m][k]                Level 2's layout
//   1 mk_padded    As[m][k], rows TILE+1   the seed guide's padding: no conflict to remove here
//   2 km           As[k][m]                transposed (later levels read A along m with vectors)
//   3 km_padded    As[k][m], rows TILE+1   padding breaks the stride
//   4 km_swizzled  As[k][m ^ k]            XOR swizzle: a permutation within each row
//
//   Storing the coalesced load into "km": lane tx writes As[tx][ty] = word tx*TILE + ty.
//   With TILE = 32 every lane hits bank ty: a 32-way conflict.
//     km_padded:   word tx*33 + ty       -> bank (tx + ty) % 32: all different
//     km_swizzled: word tx*32 + (ty^tx)  -> bank ty ^ tx:       all different
//   The inner loop reads A(m = ty, k) with ty fixed across a warp row: one word, a broadcast, in
//   every layout.
//
// B_LAYOUT pads the rows of the B tile (0 kn: Bs[k][n], 1 kn_padded: rows TILE+1). It exists to
// separate two causes: the strided load also stores each tile down a column of shared memory, a
// 32-way bank conflict in the plain layouts. With both tiles padded, load="strided" differs from
// load="coalesced" in its global accesses alone.

template <int TILE, int A_LAYOUT>
__device__ __forceinline__ int a_tile_index(int m, int k)
{
    if (A_LAYOUT == 0) return m * TILE + k;
    if (A_LAYOUT == 1) return m * (TILE + 1) + k;
    if (A_LAYOUT == 2) return k * TILE + m;
    if (A_LAYOUT == 3) return k * (TILE + 1) + m;
    return k * TILE + (m ^ k);  // 4: XOR swizzle, TILE is a power of two so m ^ k < TILE
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
    const int c = LOAD_ORDER == 0 ? tx : ty;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // A tile element (m = r, k = c); B tile element (k = r, n = c)
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
