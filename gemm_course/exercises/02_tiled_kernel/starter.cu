// Level 2 — shared-memory tiling, written by you.
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
//
// The launch: blocks of TILE × TILE threads (16 × 16 here), ceil(N / TILE) blocks along x and
// ceil(M / TILE) along y. Block (blockIdx.y, blockIdx.x) owns the TILE×TILE tile of C that starts
// at row blockIdx.y·TILE, column blockIdx.x·TILE; thread (threadIdx.y, threadIdx.x) owns one
// element of that tile. Tiles on the bottom and right edges hang over C.
//
// The point of the level: the block walks K one TILE-wide step at a time, copying a TILE×TILE
// piece of A and one of B into shared memory, and every value it copies is then used by TILE
// threads. Each thread copies one element of each piece per step.

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
gemm_smem_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    __shared__ float As[TILE][TILE];  // As[m][k]: the piece of A for the current step
    __shared__ float Bs[TILE][TILE];  // Bs[k][n]: the piece of B for the current step

    // Your kernel: the element this thread owns, the loop over the steps of K (copy, wait,
    // multiply from shared memory, wait), and the store.
}
