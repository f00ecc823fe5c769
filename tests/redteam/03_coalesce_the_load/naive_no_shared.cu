// mechanism: replaces the tiled kernel by the naive one with no shared memory (a warp reads one address of A (1 sector, ideal) and 32 consecutive floats of B)
// expect: failed reuse
// message: fetched from global memory again and again
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
    // No shared memory: the naive kernel, one element of C per thread, A and B read from global memory.
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
