// mechanism: leaves beta·C_old out
// expect: failed correct
// message: HAS_BETA ignored
// Level 6 — fused epilogue: C = act(alpha · A·B + bias) + beta · C, in the GEMM's last step.
//
// Unfused, a layer's "GEMM, add bias, activation" is three kernels, and the two after the GEMM each
// read C from memory and write it back: 4·M·N extra bytes apiece. Fused, the values are still in
// registers when the GEMM finishes, so the bias is added and the activation applied on the way out,
// and C is written once. The main loop is Level 5's, unchanged.
//
// Compile-time options (template arguments), so that an unused feature costs nothing:
//   ACT       0 none, 1 ReLU, 2 GELU (tanh approximation)
//   HAS_BIAS  add bias[col] (one value per column of C, as in a linear layer)
//   HAS_BETA  read the old C and add beta · C_old (the BLAS form C = alpha·A·B + beta·C)
#include "05_register_blocking.cu"

template <int ACT>
__device__ __forceinline__ float activation(float x)
{
    if (ACT == 1) return fmaxf(x, 0.0f);
    if (ACT == 2) {  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
        const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
    return x;
}

template <int BM, int BN, int BK, int TM, int TN, int ACT, bool HAS_BIAS, bool HAS_BETA>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_fused_epilogue(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                    int M, int N, int K, const float* __restrict__ bias, float alpha, float beta)
{
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    register_blocked_mainloop<BM, BN, BK, TM, TN>(A, B, M, N, K, row0, col0, acc);

    store_register_tile<BM, BN>(C, M, N, row0, col0, acc, [&](float v, int r, int c) {
        v *= alpha;
        if (HAS_BIAS) v += bias[c];
        v = activation<ACT>(v);
        return v;
    });
}
