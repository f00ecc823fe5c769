// Level 8 — warp tiling, written by you: block tile → warp tile → thread tile.
// 第 8 级：线程束分块，由你来写。线程块分块 → 线程束分块 → 线程分块。
//
// Inputs: A is M×K, B is K×N, C is M×N, row-major floats; M, N, K are any sizes from 1 up.
// 输入：A 为 M×K，B 为 K×N，C 为 M×N，行主序 float；M、N、K 可以是从 1 起的任意大小。
//
// The launch: a ONE-dimensional grid of tiles_m · tiles_n blocks, tiles_m = ceil(M / BM) and
// tiles_n = ceil(N / BN), each of (BM/WM)·(BN/WN) warps (here BM = BN = 64, BK = 16, WM = 64,
// WN = 32: 2 warps, 64 threads). Each block computes one BM×BN tile of C; which tile follows from
// blockIdx.x, and every tile must be computed by exactly one block. GROUP_M names the course's
// order (groups of GROUP_M tile rows, column by column inside a group); any order that covers each
// tile once is right.
// 启动配置：一维网格，共 tiles_m · tiles_n 个线程块，tiles_m = ceil(M / BM)，tiles_n = ceil(N /
// BN)，每个线程块有 (BM/WM)·(BN/WN) 个线程束（这里 BM = BN = 64、BK = 16、WM = 64、WN = 32：2
// 个线程束，64 个线程）。每个线程块计算 C 的一个 BM×BN 线程块分块；具体是哪个分块由 blockIdx.x
// 决定，并且每个分块必须恰好由一个线程块计算。GROUP_M 对应课程采用的顺序（以 GROUP_M 行分块为一组，
// 组内逐列推进）；任何让每个分块恰好被覆盖一次的顺序都是对的。
//
//   block tile BM×BN                warp tile WM×WN
//   ┌─────────┬─────────┐
//   │ warp 0  │ warp 1  │ ...
//   └─────────┴─────────┘
//
// The warp tile belongs to one warp. Its 32 lanes form an 8 (m) × 4 (n) grid; each lane owns
// (WM/32)·(WN/16) sub-tiles of 4×4 accumulators, i.e. TM = 4·WM/32 rows by TN = 4·WN/16 columns of
// the warp tile (8 × 8 here). Which rows and columns: yours to choose.
// 线程束分块归一个线程束。它的 32 个 lane 排成 8 (m) × 4 (n) 的网格；每个 lane 负责
// (WM/32)·(WN/16) 个 4×4 的累加器子分块，即线程束分块中的 TM = 4·WM/32 行、TN = 4·WN/16 列（这里是
// 8 × 8）。具体是哪些行和列：由你选定。
//
// The block walks K in steps of BK through shared memory (a BM×BK piece of A, a BK×BN piece of B).
// For each k of a step, a lane reads its values of A and of B from shared memory, 4 at a time as
// float4 (16-byte aligned addresses), and does its TM·TN multiply-adds. In the course's bank model
// a float4 read is served half a warp (16 lanes) at a time; lanes that read the same float4 share
// it (a broadcast), and the others cost an extra pass whenever two of their words fall in one bank.
// So which lanes own which sub-tiles decides whether the reads conflict.
// 线程块借助共享内存沿 K 以 BK 为步长推进（A 的一个 BM×BK 分块，B 的一个 BK×BN 分块）。
// 对一步中的每个 k，每个 lane 从共享内存读取它要用的 A 值和 B 值，每次以 float4 读 4 个（地址 16
// 字节对齐），然后做 TM·TN 次乘加。在课程的存储体模型中，一次 float4 读取每次响应半个线程束（16 个
// lane）；读取同一个 float4 的 lane 共用它（广播），其余 lane 只要有两个字落在同一个存储体上，
// 就要多花一个波前。所以哪些 lane 负责哪些子分块，决定了这些读取会不会冲突。
//
// VEC (the host sets it): true when K and N are multiples of 4 and A, B, C are 16-byte aligned, so a
// float4 of A along k or of B and C along n is entirely inside or outside its matrix; false for any
// other shape. Your kernel may use it for 16-byte global accesses, or load element by element with
// a guard on each. MIN_BLOCKS and BATCHED belong to the course's launcher.
// VEC（由主机端设置）：当 K 和 N 是 4 的倍数、A、B、C 都 16 字节对齐时为 true，此时 A 沿 k、B 和 C
// 沿 n 的每个 float4 要么完全落在矩阵内，要么完全落在矩阵外；其他形状为 false。你的内核可以借它做
// 16 字节的全局内存访问，也可以逐个元素加载并逐个做边界判断。MIN_BLOCKS 和 BATCHED
// 属于课程的启动器。
#include "common.cuh"

template <int BM, int BN, int BK, int WM, int WN, bool VEC, int MIN_BLOCKS = 2, int GROUP_M = 8,
          bool BATCHED = false>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
gemm_warp_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
                                                 // 一批矩阵乘中的一个，对应网格的一个 z 下标（见 common.cuh）

    // Your kernel: the block's tile from blockIdx.x, the warp's tile in it, the lane's sub-tiles,
    // the shared pieces of A and B, the loop over the steps of K, the float4 reads and the FMAs,
    // and the guarded store of the lane's accumulators.
    // 你的内核：由 blockIdx.x 得出线程块的分块，其中线程束的分块，lane 的子分块，A 和 B
    // 的共享内存分块，沿 K 逐步推进的循环，float4 读取与乘加，以及对 lane
    // 的累加器带边界判断的写回。
}
