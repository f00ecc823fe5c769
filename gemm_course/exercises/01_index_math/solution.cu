// Level 1 — the naive kernel: one thread computes one element of C = A · B.
//
// A is M×K, B is K×N, C is M×N, all row-major floats. Thread (row, col) reads row `row` of A and
// column `col` of B, K elements each, and writes one element of C. Nothing is reused on purpose:
// every multiply-add loads two floats from global memory (through the caches).
//
// The two kernels below differ only in which index threadIdx.x walks. A warp is 32 threads with
// consecutive threadIdx.x, and the memory system serves a warp's load in 32-byte sectors, so that
// choice decides how many sectors one warp-wide load costs:
//
//   gemm_naive_cols: lanes 0..31 take 32 neighbouring COLUMNS of one row of C
//
//        B (K×N)                       A[row][k]   one address for the whole warp  -> 1 sector
//        k ─▶ ██████████ (32 floats)   B[k][col]   32 consecutive floats (128 B)   -> 4 sectors
//                                      C[row][col] 32 consecutive floats           -> 4 sectors
//
//   gemm_naive_rows: lanes 0..31 take 32 neighbouring ROWS of one column of C
//
//        A (M×K)                       A[row][k]   32 addresses, K floats apart    -> 32 sectors
//        █ row r                       B[k][col]   one address for the whole warp  -> 1 sector
//        █ row r+1   (stride K)        C[row][col] 32 addresses, N floats apart    -> 32 sectors
//        █ ...
//
// In "rows" each A sector holds 8 consecutive k, so the next 7 iterations may hit in L1 — if it
// still holds them. Level 1's notebook measures how much that rescues.

template <int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive_cols(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    const int col = blockIdx.x * BLOCK_X + threadIdx.x;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row >= M || col >= N) return;  // the grid is rounded up to whole blocks

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
