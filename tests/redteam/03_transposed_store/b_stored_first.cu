// mechanism: near miss: the transposed, padded tile, both loads first and the B tile stored before the A tile
// expect: solved
// Level 3 — coalescing and shared-memory bank conflicts, on Level 2's tiled kernel (TILE = 32).
//
// A warp is one row of the 32×32 thread block: ty fixed, tx = 0..31.
//
// Global memory serves a warp's load in 32-byte sectors: 32 consecutive floats take 4 sectors,
// 32 floats a whole row apart take 32.
//
// Shared memory has 32 banks of 4 bytes; word w sits in bank w % 32. A warp's access costs as many
// passes (wavefronts) as the most distinct words any one bank must serve; lanes that read the same
// word share it (a broadcast).
//
// Edges as in Level 2: out-of-range elements become zeros; only threads inside C write.

template <int TILE, int LOAD_ORDER, int A_LAYOUT, int B_LAYOUT = 0>
__global__ void __launch_bounds__(TILE * TILE)
gemm_coalescing_banks(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    // This exercise's copy writes its indexing out by hand and ignores the LOAD_ORDER, A_LAYOUT and
    // B_LAYOUT switches. It keeps the A tile transposed, As[k][m], as later levels do (they read A
    // along m). One padding word per row moves
    // element (k, m) to bank (k * (TILE + 1) + m) % 32 = (k + m) % 32: the store As[tx][ty] of a warp
    // (tx = 0..31) now hits 32 different banks.
    __shared__ float As[TILE][TILE + 1];   // As[k][m]: transposed, rows padded by one word
    __shared__ float Bs[TILE][TILE];       // Bs[k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r = ty, c = tx;  // coalesced: a warp (fixed ty, tx = 0..31) copies one row segment
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // A tile element (m = r, k = c); B tile element (k = r, n = c)
        const float a = (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : 0.0f;
        const float b = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;
        Bs[r][c] = b;   // B stored first: the order of the stores is no part of the layout
        As[c][r] = a;
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[k][ty] * Bs[k][tx];
        __syncthreads();
    }
    if (row0 + ty < M && col0 + tx < N)
        C[(size_t)(row0 + ty) * N + col0 + tx] = acc;
}
