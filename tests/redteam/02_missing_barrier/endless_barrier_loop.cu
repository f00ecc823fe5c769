// mechanism: keeps passing __syncthreads() forever (defeats the per-barrier watchdog)
// expect: failed run
// message: ran past its
// wall: 6
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
    __shared__ float As[TILE][TILE];  // As[m][k]
    __shared__ float Bs[TILE][TILE];  // Bs[k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();  // the whole tile is in shared memory before anyone reads it

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];  // As: one address per warp row (broadcast); Bs: 32 banks
        __syncthreads();  // everyone is done reading before the next tile overwrites it
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
    for (;;) { __syncthreads(); }
}
