// Level 6 — a fused epilogue, written by you: C = act(alpha · A·B + bias) + beta · C_old, computed on
// the way out while the results are still in registers, so that C is written once.
// 第 6 级：融合尾处理，由你来写。C = act(alpha · A·B + bias) + beta · C_old，在结果还在寄存器中时、
// 写出的途中计算，使 C 只写一次。
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up. bias
// holds N floats, one per column of C (as in a linear layer y = x·W + b); it is a null pointer
// when HAS_BIAS is false. alpha and beta are scalars. When HAS_BETA is true, C holds C_old on
// entry and each element must be read before it is overwritten.
// 输入：A 为 M×K，B 为 K×N，C 为 M×N，行主序 float；M、N、K 可以是从 1 起的任意大小。bias 有 N 个
// float，C 的每列一个（和线性层 y = x·W + b 一样）；HAS_BIAS 为 false 时它是空指针。alpha 和 beta
// 是标量。HAS_BETA 为 true 时，C 在进入内核时存放 C_old，每个元素必须在被覆盖之前读取。
//
// Compile-time switches (template arguments), so that an unused feature costs nothing:
//   ACT       0: none, the value passes unchanged
//             1: ReLU, max(x, 0)
//             2: GELU, tanh approximation 0.5·x·(1 + tanh(0.7978845608028654·(x + 0.044715·x³)))
//   HAS_BIAS  add bias[column] after alpha, before the activation
//   HAS_BETA  add beta · C_old after the activation
// 编译期开关（模板参数），这样不用的功能不产生任何开销：
//   ACT       0：无，值原样通过
//             1：ReLU，max(x, 0)
//             2：GELU，tanh 近似 0.5·x·(1 + tanh(0.7978845608028654·(x + 0.044715·x³)))
//   HAS_BIAS  在乘 alpha 之后、激活之前加上 bias[column]
//   HAS_BETA  在激活之后加上 beta · C_old
//
// The launch and the main loop are Level 5's (included below): blocks of (BM/TM)·(BN/TN) threads,
// ceil(N / BN) blocks along x and ceil(M / BM) along y; block (blockIdx.y, blockIdx.x) owns the
// BM×BN tile of C at row blockIdx.y·BM, column blockIdx.x·BN. register_blocked_mainloop(A, B, M, N,
// K, row0, col0, acc) leaves in acc[i][j] the sum over k of A·B for row row0 + tr·TM + i, column
// col0 + tc·TN + j of C, where thread tid = threadIdx.x is (tr, tc) = (tid / (BN/TN), tid % (BN/TN)).
// 启动配置和主循环都沿用第 5 级（见下方包含的代码）：每个线程块 (BM/TM)·(BN/TN) 个线程，沿 x 有
// ceil(N / BN) 个线程块，沿 y 有 ceil(M / BM) 个；线程块 (blockIdx.y, blockIdx.x) 负责 C
// 中从第 blockIdx.y·BM 行、第 blockIdx.x·BN 列开始的 BM×BN 线程块分块。register_blocked_mainloop(A,
// B, M, N, K, row0, col0, acc) 在 acc[i][j] 中留下 C 的第 row0 + tr·TM + i 行、第 col0 + tc·TN + j
// 列上 A·B 对 k 的求和，其中线程 tid = threadIdx.x 对应 (tr, tc) = (tid / (BN/TN), tid % (BN/TN))。
#include "05_register_blocking.cu"

template <int BM, int BN, int BK, int TM, int TN, int ACT, bool HAS_BIAS, bool HAS_BETA>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_fused_epilogue(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                    int M, int N, int K, const float* __restrict__ bias, float alpha, float beta)
{
    // Your kernel: the block's tile, Level 5's main loop into acc, then the epilogue and the store
    // of every accumulator that lies inside C.
    // 你的内核：线程块负责的分块，用第 5 级的主循环累加到 acc，然后对落在 C
    // 内的每个累加器做尾处理并写回。
}
