// Level 4 — double buffering, written by you: the next piece of A and B travels while the block
// computes on the current one, with one barrier per step of K.
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
//
// The launch, as in Level 2: blocks of TILE × TILE threads (16 × 16 here), ceil(N / TILE) blocks
// along x and ceil(M / TILE) along y. Block (blockIdx.y, blockIdx.x) owns the TILE×TILE tile of C
// that starts at row blockIdx.y·TILE, column blockIdx.x·TILE; thread (threadIdx.y, threadIdx.x)
// owns one of its elements and copies one element of each TILE×TILE piece of A and B per step.
//
// What changes from Level 2: two shared buffers per operand. While the block multiplies the piece
// of step t in one buffer, each thread's loads of step t+1 from global memory are already in
// flight (parked in registers), and they go into the other buffer after the multiply.
//
// COPY selects how the course's own kernel moves the next piece (0: through registers, 1: with
// cp.async, common.cuh); the exercise runs COPY = 0, and your kernel may ignore the switch.
#include "common.cuh"

template <int TILE, int COPY>
__global__ void __launch_bounds__(TILE * TILE)
gemm_double_buffered(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K)
{
    // Your kernel: the two buffers of each operand in shared memory, the first piece before the
    // loop, then per step: the barrier, the loads of the next piece into registers, the multiply
    // on the current buffer, the stores into the other buffer; last, the guarded store of C.
}
