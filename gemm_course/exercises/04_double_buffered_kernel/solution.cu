// Level 4 — double buffering: two shared buffers per operand, so the loads of step t+1 are in flight
// while the block computes on step t. One barrier per step of K:
//
//   piece 0 → buffer 0
//   step t:  barrier (piece t complete; everyone done with buffer (t+1)%2, read in step t-1)
//            issue the global loads of piece t+1 into registers
//            multiply on buffer t%2           (the loads travel meanwhile)
//            registers → buffer (t+1)%2       (nobody reads it before the next barrier)
//
// Elements outside A or B are zeros; only threads inside C store. Any M, N, K. COPY is ignored:
// the next piece always travels through registers.

template <int TILE, int COPY>
__global__ void __launch_bounds__(TILE * TILE)
gemm_double_buffered(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K)
{
    __shared__ float As[2][TILE][TILE];  // As[buffer][m][k]
    __shared__ float Bs[2][TILE][TILE];  // Bs[buffer][k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    const int steps = (K + TILE - 1) / TILE;

    // This thread's element of the pieces that start at k0 (zero outside the matrices).
    auto a_element = [&](int k0) { return (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f; };
    auto b_element = [&](int k0) { return (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f; };

    As[0][ty][tx] = a_element(0);
    Bs[0][ty][tx] = b_element(0);

    float acc = 0.0f;
    for (int t = 0; t < steps; ++t) {
        const int cur = t % 2;
        __syncthreads();
        const bool more = t + 1 < steps;
        float a_next = 0.0f, b_next = 0.0f;
        if (more) {  // issued now, needed only after the multiply
            a_next = a_element((t + 1) * TILE);
            b_next = b_element((t + 1) * TILE);
        }
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[cur][ty][k] * Bs[cur][k][tx];
        if (more) {
            As[1 - cur][ty][tx] = a_next;
            Bs[1 - cur][ty][tx] = b_next;
        }
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
