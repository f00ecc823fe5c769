// mechanism: one shared buffer per operand, register prefetch, two barriers per k-tile (no double buffering)
// expect: failed barriers
// message: barriers for
// Level 4 — double buffering: two shared-memory buffers per operand, so the loads of tile t+1 are
// in flight while the block computes on tile t. One barrier per k-tile.
//
//   iteration t:   barrier ─▶ load tile t+1 from global memory into registers (a_next, b_next)
//                             compute on buf[t%2]  (the loads travel meanwhile)
//                             store the registers into buf[(t+1)%2]
//
// The single barrier does two jobs: tile t is complete for every thread, and every thread has
// finished computing on tile t-1, whose buffer buf[(t+1)%2] the stores of this iteration overwrite.
//
// This exercise's copy moves the next tile through registers only (the level's COPY = 0); it
// ignores the COPY switch.
//
// Edges as in Level 2: out-of-range elements become zeros; only threads inside C write.

template <int TILE, int COPY>
__global__ void __launch_bounds__(TILE * TILE)
gemm_double_buffered(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K)
{
    __shared__ float As[TILE][TILE];  // one buffer per operand
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const int tiles = (K + TILE - 1) / TILE;

    auto a_elem = [&](int t) { return (row < M && t * TILE + tx < K) ? A[(size_t)row * K + t * TILE + tx] : 0.0f; };
    auto b_elem = [&](int t) { return (t * TILE + ty < K && col < N) ? B[(size_t)(t * TILE + ty) * N + col] : 0.0f; };

    As[ty][tx] = a_elem(0);
    Bs[ty][tx] = b_elem(0);

    float acc = 0.0f;
    float a_next = 0.0f, b_next = 0.0f;
    for (int t = 0; t < tiles; ++t) {
        __syncthreads();
        const bool more = t + 1 < tiles;
        if (more) {
            a_next = a_elem(t + 1);
            b_next = b_elem(t + 1);
        }
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        if (more) {
            __syncthreads();  // the only buffer: wait until everyone has read it
            As[ty][tx] = a_next;
            Bs[ty][tx] = b_next;
        }
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
