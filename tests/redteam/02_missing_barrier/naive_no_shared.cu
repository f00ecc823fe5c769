// mechanism: replaces the tiled kernel by the naive one with no shared memory (the race is gone because shared memory is gone)
// expect: failed reuse
// message: fetched from global memory again and again
// Level 2 — shared-memory tiling: a block computes a TILE×TILE tile of C, staging TILE×TILE tiles
// of A and B in shared memory so that each value loaded from global memory is used TILE times.
//
//             k0      k0+TILE                        col0 .. col0+TILE
//        ┌────┬───────┬────┐                    ┌──────┬──────┬──────┐
//   row0 │    │  As   │    │  ×            k0   │      │  Bs  │      │
//        └────┴───────┴────┘               k0+T │      │      │      │
//        A: M×K, one TILE-wide strip            └──────┴──────┴──────┘
//        of rows, walked along k                B: K×N, one TILE-wide strip of columns
//
// Per k-step of TILE, every thread loads ONE element of As and ONE of Bs (coalesced: threadIdx.x
// walks along a row), the block waits at a barrier, then each thread does TILE multiply-adds
// reading shared memory. Global traffic falls from 2 floats per multiply-add (Level 1, without
// caches) to 2 floats per TILE multiply-adds.
//
// Edges: tiles that hang over M, N or K are filled with zeros, which add nothing to the sum, and
// only threads inside C write. So any M, N, K works.

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
gemm_smem_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    // No shared memory: the naive kernel, one element of C per thread, A and B read from global memory.
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
