// Level 6 — a fused epilogue, written by you: C = act(alpha · A·B + bias) + beta · C_old, computed on
// the way out while the results are still in registers, so that C is written once.
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up. bias
// holds N floats, one per column of C (as in a linear layer y = x·W + b); it is a null pointer
// when HAS_BIAS is false. alpha and beta are scalars. When HAS_BETA is true, C holds C_old on
// entry and each element must be read before it is overwritten.
//
// Compile-time switches (template arguments), so that an unused feature costs nothing:
//   ACT       0: none, the value passes unchanged
//             1: ReLU, max(x, 0)
//             2: GELU, tanh approximation 0.5·x·(1 + tanh(0.7978845608028654·(x + 0.044715·x³)))
//   HAS_BIAS  add bias[column] after alpha, before the activation
//   HAS_BETA  add beta · C_old after the activation
//
// The launch and the main loop are Level 5's (included below): blocks of (BM/TM)·(BN/TN) threads,
// ceil(N / BN) blocks along x and ceil(M / BM) along y; block (blockIdx.y, blockIdx.x) owns the
// BM×BN tile of C at row blockIdx.y·BM, column blockIdx.x·BN. register_blocked_mainloop(A, B, M, N,
// K, row0, col0, acc) leaves in acc[i][j] the sum over k of A·B for row row0 + tr·TM + i, column
// col0 + tc·TN + j of C, where thread tid = threadIdx.x is (tr, tc) = (tid / (BN/TN), tid % (BN/TN)).
#include "05_register_blocking.cu"

template <int BM, int BN, int BK, int TM, int TN, int ACT, bool HAS_BIAS, bool HAS_BETA>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_fused_epilogue(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                    int M, int N, int K, const float* __restrict__ bias, float alpha, float beta)
{
    // Your kernel: the block's tile, Level 5's main loop into acc, then the epilogue and the store
    // of every accumulator that lies inside C.
}
