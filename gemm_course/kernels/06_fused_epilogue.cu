// Level 6 — fused epilogue: C = act(alpha · A·B + bias) + beta · C, in the GEMM's last step.
// 第 6 级：融合尾处理（epilogue）。在 GEMM 的最后一步计算 C = act(alpha · A·B + bias) + beta · C。
//
// Unfused, a layer's "GEMM, add bias, activation" is three kernels, and the two after the GEMM each
// read C from memory and write it back: 4·M·N extra bytes apiece. Fused, the values are still in
// registers when the GEMM finishes, so the bias is added and the activation applied on the way out,
// and C is written once. The main loop is Level 5's, unchanged.
// 不融合时，一层网络的“GEMM、加偏置、激活”是三个内核，GEMM 之后的两个内核各自要从内存读取 C
// 再写回：每个多出 4·M·N 字节。融合后，GEMM 结束时结果还在寄存器里，于是在写出的途中加上偏置、
// 做激活，C 只写一次。主循环就是第 5 级的，原样不动。
//
// Compile-time options (template arguments), so that an unused feature costs nothing:
//   ACT       0 none, 1 ReLU, 2 GELU (tanh approximation)
//   HAS_BIAS  add bias[col] (one value per column of C, as in a linear layer)
//   HAS_BETA  read the old C and add beta · C_old (the BLAS form C = alpha·A·B + beta·C)
// 编译期选项（模板参数），这样不用的功能不产生任何开销：
//   ACT       0 无，1 ReLU，2 GELU（tanh 近似）
//   HAS_BIAS  加上 bias[col]（C 的每列一个值，和线性层一样）
//   HAS_BETA  读取旧的 C 并加上 beta · C_old（BLAS 形式 C = alpha·A·B + beta·C）
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
        if (HAS_BETA) v += beta * C[(size_t)r * N + c];  // the old C, read before it is overwritten
                                                         // 旧的 C，在被覆盖之前读取
        return v;
    });
}
