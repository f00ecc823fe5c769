// mechanism: the epilogue is right but the product skips Level 5's main loop: every thread reads its A and B values from global memory for every k
// expect: failed reuse
// message: fetched from global memory again and again
// Level 6 — fused epilogue: C = act(alpha · A·B + bias) + beta · C_old, in the GEMM's last step.
//
// The main loop is Level 5's (register_blocked_mainloop, included). Each thread then walks its TM×TN
// accumulators: element (r, c) of C with r = row0 + tr·TM + i, c = col0 + tc·TN + j. Inside C it
// scales, adds the column's bias, applies the activation, adds beta times the old value it reads
// just before overwriting it, and stores: one read (with HAS_BETA) and one write of C per element.
// The switches are template arguments, so `if (HAS_BIAS)` and the activation's branches cost nothing
// when they are off, and bias is never touched when it is a null pointer.
#include "05_register_blocking.cu"

template <int ACT>
__device__ __forceinline__ float activate(float x)
{
    if (ACT == 1) return x > 0.0f ? x : 0.0f;
    if (ACT == 2) {
        const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(inner));
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

    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);
    // The product straight from global memory: no shared tiles, each value of A read by every thread
    // of its row, each value of B by every thread of its column.
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    for (int k = 0; k < K; ++k) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = row0 + tr * TM + i < M ? A[(size_t)(row0 + tr * TM + i) * K + k] : 0.0f;
#pragma unroll
        for (int j = 0; j < TN; ++j) b[j] = col0 + tc * TN + j < N ? B[(size_t)k * N + col0 + tc * TN + j] : 0.0f;
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int c = col0 + tc * TN + j;
        if (c >= N) continue;
        const float column_bias = HAS_BIAS ? bias[c] : 0.0f;  // one load per column, not per element
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int r = row0 + tr * TM + i;
            if (r >= M) continue;
            float v = activate<ACT>(alpha * acc[i][j] + column_bias);
            float* out = C + (size_t)r * N + c;
            if (HAS_BETA) v += beta * *out;  // C_old, read before it is overwritten
            *out = v;
        }
    }
}
