// mechanism: replaces the buggy double-buffered kernel by a naive one with no shared memory and no barrier (0 barriers is "at most one per k-tile")
// expect: failed barriers
// message: needs at least one per k-tile
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
    // No shared memory, no barrier: every thread reads its row of A and column of B from global memory.
    const int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
