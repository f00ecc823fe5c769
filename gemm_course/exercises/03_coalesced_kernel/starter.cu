// Level 3 — coalescing and bank conflicts: a tiled kernel whose every access is as cheap as it can
// be, written by you.
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
//
// The launch: blocks of TILE × TILE threads (32 × 32 here), ceil(N / TILE) blocks along x and
// ceil(M / TILE) along y. Block (blockIdx.y, blockIdx.x) owns the TILE×TILE tile of C that starts
// at row blockIdx.y·TILE, column blockIdx.x·TILE; thread (threadIdx.y, threadIdx.x) owns one of
// its elements. A warp is the 32 threads of one threadIdx.y.
//
// As in Level 2 the block walks K in TILE-wide steps through shared memory, each thread copying
// one element of the A piece and one of the B piece per step. Here the A piece is kept
// TRANSPOSED, k-major, as Levels 5-8 keep it (they read a thread's values of A along m):
// element (m, k) of the piece lives at As[k * A_STRIDE + m], or at a position of row k that you
// choose. Shared memory has 32 banks of 4 bytes; word w sits in bank w % 32.
//
// The template's switches (LOAD_ORDER, A_LAYOUT, B_LAYOUT) select variants of the course's own
// kernel; your kernel may ignore them.

template <int TILE, int LOAD_ORDER, int A_LAYOUT, int B_LAYOUT = 0>
__global__ void __launch_bounds__(TILE * TILE)
gemm_coalescing_banks(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    constexpr int A_STRIDE = TILE;  // words per row of the transposed A piece: yours to choose
    __shared__ float As[TILE * A_STRIDE];  // element (m, k) of the A piece: As[k * A_STRIDE + m]
    __shared__ float Bs[TILE][TILE];       // Bs[k][n]

    // Your kernel: which element of each piece this thread copies from global memory and where
    // it goes in shared memory, the loop over the steps of K with its barriers, the inner
    // product from shared memory, and the store.
}
