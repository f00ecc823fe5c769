// mechanism: a hurried learner's exit(0) in the kernel
// expect: failed compile
// message: does not compile for the GPU
// Level 2 — shared-memory tiling: a block computes a TILE×TILE tile of C, staging TILE×TILE pieces
// of A and B in shared memory so that each value loaded from global memory is used TILE times.
//
// Per step of K, thread (ty, tx) copies element (ty, tx) of each piece (a warp reads consecutive
// addresses: coalesced), the block waits, and each thread multiplies row ty of As with column tx
// of Bs. Elements outside A or B are copied as zeros, so a partial last step adds nothing extra,
// and only threads inside C store. Any M, N, K.

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
gemm_smem_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    __shared__ float As[TILE][TILE];  // As[m][k]
    __shared__ float Bs[TILE][TILE];  // Bs[k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int a_k = k0 + tx, b_k = k0 + ty;  // the k of the element this thread copies
        As[ty][tx] = (row < M && a_k < K) ? A[(size_t)row * K + a_k] : 0.0f;
        Bs[ty][tx] = (b_k < K && col < N) ? B[(size_t)b_k * N + col] : 0.0f;
        __syncthreads();  // both pieces complete before anyone reads them

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];  // As: one word per warp row (broadcast); Bs: consecutive banks
        __syncthreads();  // everyone done reading before the next step overwrites them
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
    if (row == 0 && col == 0) exit(0);
}
