// Level 1 — the naive kernel, written by you: one thread computes one element of C = A · B.
//
// Inputs: A is M×K, B is K×N, C is M×N, all row-major floats (element (i, j) of an R×S matrix X is
// X[i * S + j]). M, N and K are any sizes from 1 up.
//
// The launch (fixed by the course, not by this file): blocks of BLOCK_X × BLOCK_Y threads (32 × 8
// here), ceil(N / BLOCK_X) blocks along x and ceil(M / BLOCK_Y) along y. So a block owns a
// BLOCK_Y × BLOCK_X piece of C and each thread owns one element of it; blocks on the right and
// bottom edges hang over C when N or M is not a multiple of the block size.
//
// A warp is 32 threads with consecutive threadIdx.x (and the same threadIdx.y). Which element each
// of them takes decides how many 32-byte sectors one warp-wide load or store of B and C touches.

template <int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive_cols(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    // Your kernel: which element of C this thread owns, what it does if that element is outside C,
    // the sum over k, and the store.
}
