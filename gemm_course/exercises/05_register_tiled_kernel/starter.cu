// Level 5 — register blocking, written by you: each thread computes a TM×TN block of C in registers.
// 第 5 级：寄存器分块，由你来写：每个线程在寄存器中计算 C 的一个 TM×TN 线程分块。
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
// 输入：A 为 M×K，B 为 K×N，C 为 M×N，行主序 float；M、N、K 可以是从 1 起的任意大小。
//
// The launch: one-dimensional blocks of (BM/TM)·(BN/TN) threads (16·16 = 256 here, with
// BM = BN = 128, BK = 8, TM = TN = 8), ceil(N / BN) blocks along x and ceil(M / BM) along y.
// Block (blockIdx.y, blockIdx.x) owns the BM×BN tile of C that starts at row blockIdx.y·BM,
// column blockIdx.x·BN. Inside it, thread tid = threadIdx.x is (tr, tc) = (tid / (BN/TN),
// tid % (BN/TN)) and owns rows tr·TM … tr·TM+TM−1 and columns tc·TN … tc·TN+TN−1 of the tile.
// 启动配置：一维线程块，每块 (BM/TM)·(BN/TN) 个线程（这里 BM = BN = 128、BK = 8、TM = TN = 8，即
// 16·16 = 256 个），沿 x 有 ceil(N / BN) 个线程块，沿 y 有 ceil(M / BM) 个。线程块 (blockIdx.y,
// blockIdx.x) 负责 C 中从第 blockIdx.y·BM 行、第 blockIdx.x·BN 列开始的 BM×BN 线程块分块。块内线程
// tid = threadIdx.x 对应 (tr, tc) = (tid / (BN/TN), tid % (BN/TN))，负责该分块的第 tr·TM …
// tr·TM+TM−1 行和第 tc·TN … tc·TN+TN−1 列。
//
// The block walks K in steps of BK through shared memory: per step a BM×BK piece of A and a BK×BN
// piece of B, which the block's threads copy together (BM·BK / threads elements each). Then, for
// each k of the step, a thread reads its TM values of A and its TN values of B once into registers
// and does TM·TN multiply-adds with them into TM·TN accumulators that stay in registers.
// Edge blocks hang over C, and the last step over K.
// 线程块借助共享内存沿 K 以 BK 为步长推进：每一步是 A 的一个 BM×BK 分块和 B 的一个 BK×BN 分块，
// 由线程块中的线程合作拷贝（每个线程 BM·BK / threads 个元素）。然后对这一步中的每个 k，线程把它的
// TM 个 A 值和 TN 个 B 值各读进寄存器一次，用它们做 TM·TN 次乘加，累加到始终留在寄存器里的 TM·TN
// 个累加器中。边缘的线程块会超出 C，最后一步会超出 K。
#include "common.cuh"

// Two blocks per SM (the compiler keeps registers ≤ 128 for 256 threads) unless a block is larger.
// 每个 SM 两个线程块（256 个线程时编译器把寄存器控制在 128 个以内），除非线程块更大。
#define REGISTER_BLOCKS_PER_SM(THREADS) ((THREADS) <= 256 ? 2 : 1)

template <int BM, int BN, int BK, int TM, int TN, bool BATCHED = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), REGISTER_BLOCKS_PER_SM((BM / TM) * (BN / TN)))
gemm_register_blocked(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
                                                 // 一批矩阵乘中的一个，对应网格的一个 z 下标（见 common.cuh）

    // Your kernel: the shared pieces of A and B, the loop over the steps of K (the block's copy,
    // a barrier, the register outer products, a barrier), and the guarded store of the thread's
    // TM×TN block of C.
    // 你的内核：A 和 B 的共享内存分块，沿 K 逐步推进的循环（线程块合作拷贝、屏障、寄存器中的外积、
    // 屏障），以及本线程 TM×TN 线程分块带边界判断的写回。
}
