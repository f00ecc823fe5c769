// Level 7 — vectorized loads and stores, written by you: Level 5's kernel moving 16 bytes per
// memory instruction (float4: LDG.E.128, LDS.128, STS.128, STG.E.128) instead of 4.
// 第 7 级：向量化加载与存储，由你来写。第 5 级的内核，每条访存指令传输 16 字节（float4：LDG.E.128、
// LDS.128、STS.128、STG.E.128），而不是 4 字节。
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats.
// 输入：A 为 M×K，B 为 K×N，C 为 M×N，行主序 float。
//
// Precondition (checked on the host before launch): K and N are multiples of 4, and A, B and C
// start at 16-byte aligned addresses. So a float4 of A that starts at a column k that is a multiple
// of 4 is either entirely inside its row (k < K) or entirely outside it, and its address is a
// multiple of 16; the same holds for B and C along n. When a problem breaks the precondition the
// launcher runs Level 5's scalar kernel instead (gemm_register_blocked, included below): your kernel
// is only ever launched on shapes that meet it. M is any size from 1 up.
// 前提条件（启动前在主机端检查）：K 和 N 是 4 的倍数，A、B、C 的起始地址 16 字节对齐。因此 A 中从 4
// 的倍数列 k 开始的 float4 要么完全落在它所在的行内（k < K），要么完全落在行外，且其地址是 16
// 的倍数；B 和 C 沿 n 方向同理。问题不满足前提时，启动器改为运行第 5 级的标量内核
// （gemm_register_blocked，见下方包含的代码）：你的内核只会在满足前提的形状上启动。M 可以是从 1
// 起的任意大小。
//
// The launch is Level 5's: one-dimensional blocks of (BM/TM)·(BN/TN) threads (256 here, with
// BM = BN = 128, BK = 8, TM = TN = 8), ceil(N / BN) blocks along x and ceil(M / BM) along y. Block
// (blockIdx.y, blockIdx.x) owns the BM×BN tile of C at row blockIdx.y·BM, column blockIdx.x·BN;
// thread tid = threadIdx.x is (tr, tc) = (tid / (BN/TN), tid % (BN/TN)) and owns rows tr·TM … and
// columns tc·TN … of the tile. A float4 in shared memory needs a 16-byte aligned address too.
// 启动配置沿用第 5 级：一维线程块，每块 (BM/TM)·(BN/TN) 个线程（这里 BM = BN = 128、BK = 8、TM = TN
// = 8，即 256 个），沿 x 有 ceil(N / BN) 个线程块，沿 y 有 ceil(M / BM) 个。线程块 (blockIdx.y,
// blockIdx.x) 负责 C 中从第 blockIdx.y·BM 行、第 blockIdx.x·BN 列开始的 BM×BN 线程块分块；线程 tid
// = threadIdx.x 对应 (tr, tc) = (tid / (BN/TN), tid % (BN/TN))，负责该分块的第 tr·TM … 行和第 tc·TN
// … 列。共享内存中的 float4 同样需要 16 字节对齐的地址。
#include "05_register_blocking.cu"

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "vectors of 4 floats");
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
                                                 // 一批矩阵乘中的一个，对应网格的一个 z 下标（见 common.cuh）

    // Your kernel: the shared pieces of A and B, the loop over the steps of K with float4 loads of
    // A and B from global memory, the register outer products with float4 reads of shared memory,
    // and float4 stores of the thread's block of C.
    // 你的内核：A 和 B 的共享内存分块，沿 K 逐步推进的循环（用 float4 从全局内存加载 A 和 B），用
    // float4 读取共享内存完成寄存器中的外积，以及用 float4 写回本线程负责的 C 分块。
}
