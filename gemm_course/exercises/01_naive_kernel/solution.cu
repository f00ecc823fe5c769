// Level 1 — the naive kernel: one thread computes one element of C = A · B.
//
// Inputs: A is M×K, B is K×N, C is M×N, all row-major floats. Blocks of BLOCK_X × BLOCK_Y threads,
// ceil(N / BLOCK_X) blocks along x and ceil(M / BLOCK_Y) along y.
//
// threadIdx.x walks along a row of C, so the 32 lanes of a warp take 32 neighbouring columns:
//   A[row][k]   one address for the whole warp   -> 1 sector
//   B[k][col]   32 consecutive floats (128 B)    -> 4 sectors
//   C[row][col] 32 consecutive floats            -> 4 sectors

template <int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive_cols(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    const int col = blockIdx.x * BLOCK_X + threadIdx.x;  // neighbouring lanes, neighbouring columns
    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row >= M || col >= N) return;  // the grid is rounded up to whole blocks

    const float* a = A + (size_t)row * K;  // row `row` of A
    const float* b = B + col;              // column `col` of B, N floats between its elements
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += a[k] * b[(size_t)k * N];
    C[(size_t)row * N + col] = acc;
}
