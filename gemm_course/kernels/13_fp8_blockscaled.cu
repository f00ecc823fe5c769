// Level 13 (groundwork) — FP8 on Hopper: e4m3 inputs, fp32 accumulation, scales, bf16 C.
// Needs sm_90a (H100, H200, GH200), like Level 11, whose machinery it reuses: TMA into a ring of
// mbarrier stages, one producer warpgroup and two consumer warpgroups (setmaxnreg), persistent blocks
// walking tiles in tile_origin's L2-friendly order.
// 第 13 级（基础部分）：Hopper 上的 FP8。输入为 e4m3，fp32 累加，带缩放因子，C 为 bf16。与第 11 级一样需
// 要 sm_90a（H100、H200、GH200），并沿用它的机制：TMA 写入由 mbarrier 管理的流水级环，一个生产者线程束组
// 和两个消费者线程束组（setmaxnreg），持久化的线程块按 tile_origin 对 L2 友好的顺序遍历分块。
//
// The inputs are e4m3 bytes (see gemm_course/fp8.py): 1 sign, 4 exponent, 3 mantissa bits, |x| ≤ 448.
// Such a narrow format only works with scales: a value is stored as bits = e4m3(x / s) and means
// decode(bits) · s. The kernel multiplies the bytes on the Tensor Cores and applies the scales itself.
// 输入是 e4m3 字节（见 gemm_course/fp8.py）：1 位符号、4 位指数、3 位尾数，|x| ≤ 448。这么窄的格式只有配合
// 缩放因子才能用：一个值存为 bits = e4m3(x / s)，表示 decode(bits) · s。内核在张量核心上对这些字节做乘法，
// 缩放因子由它自己施加。
//
// Both operands are K-MAJOR: FP8 wgmma reads A and B only with k contiguous (it has no transpose
// option), so B is stored N×K, "transposed" compared to Levels 1–11:
// 两个操作数都是 K 主序（K-MAJOR）：FP8 的 wgmma 只能读取 k 连续的 A 和 B（它没有转置选项），所以 B
// 存为 N×K，与第 1–11 级相比是“转置”的：
//
//     A: M×K bytes, row m contiguous along k       B: N×K bytes, row n contiguous along k
//        K →  |<-128->|<-128->|<-128->|               K →  |<-128->|<-128->|<-128->|
//     row 0   | a_s00 | a_s01 | a_s02 |              n 0…127 | b_s00 | b_s01 | b_s02 |
//     row 1   | a_s10 | a_s11 | a_s12 |           n 128…255 | b_s10 | b_s11 | b_s12 |
//     ...       one scale per row per 128 of k          ...   one scale per 128×128 tile
//     a_scales: M × ceil(K/128) floats              b_scales: ceil(N/128) × ceil(K/128) floats
//     A：M×K 字节，第 m 行沿 k 连续                B：N×K 字节，第 n 行沿 k 连续
//     沿 K →  |<-128->|<-128->|<-128->|            沿 K →  |<-128->|<-128->|<-128->|
//     第 0 行 | a_s00 | a_s01 | a_s02 |        第 0…127 行 | b_s00 | b_s01 | b_s02 |
//     第 1 行 | a_s10 | a_s11 | a_s12 |      第 128…255 行 | b_s10 | b_s11 | b_s12 |
//     ...       每行每 128 个 k 一个缩放因子              ...   每个 128×128 分块一个缩放因子
//     a_scales：M × ceil(K/128) 个 float           b_scales：ceil(N/128) × ceil(K/128) 个 float
//
//     C[m][n] = Σ over k-blocks kb of  a_scales[m][kb] · b_scales[n/128][kb] · Σ_{k in kb} A[m][k]·B[n][k]
//     C[m][n] = 对所有 k 块 kb 求和  a_scales[m][kb] · b_scales[n/128][kb] · Σ_{k in kb} A[m][k]·B[n][k]
//
// Three kernels, in the steps the chapter measures one by one:
// 三个内核，对应本章逐一测量的各个步骤：
//
//   (a) fp8_gemm_per_tensor<BN>   one scale for all of A, one for all of B: they factor out of the sum,
//                                 so the consumers accumulate the whole K in the Tensor Cores' registers
//                                 and multiply by a_scale · b_scale once, when they store C. Tiles of
//                                 128×BN; each consumer m64nBNk32. BN = 256 is the fast one (as Level 11
//                                 step 4); BN = 128 exists to separate the tile's size from the cost of
//                                 promotion: it is kernel (b)'s tile without promotion.
//   (b) fp8_gemm_blockwise<.., OVERLAP>   1×128 scales of A and 128×128 scales of B, which change every
//                                 128 of k, so they cannot wait for the end. 128×128 tiles, each consumer
//                                 m64n128k32. OVERLAP = false: each k-block is waited for, then promoted
//                                 (the Tensor Cores idle meanwhile); OVERLAP = true: two partial-sum
//                                 buffers, so the next k-block's wgmma runs while this one is promoted.
//                                 SCALES (b and c): where the consumers find the scales, see below.
//   (c) fp8_gemm_blockwise_m64    kernel (b) for few rows of A (decode shapes): 64×BN tiles (BN = 128,
//                                 64, 32 or 16) whose two consumers split the columns (m64n(BN/2)k32
//                                 each); see the end of the file.
//   (a) fp8_gemm_per_tensor<BN>   A 整体一个缩放因子，B 整体一个：它们可以提到求和之外，所以消费者
//                                 在张量核心的寄存器中累加整个 K，写回 C 时再乘一次 a_scale · b_scale。
//                                 分块为 128×BN；每个消费者 m64nBNk32。BN = 256 是快的那个（同第 11 级
//                                 第 4 步）；BN = 128 用来把分块大小与提升（promotion）的代价区分开：
//                                 它就是内核 (b) 的分块，只是不做提升。
//   (b) fp8_gemm_blockwise<.., OVERLAP>   A 为 1×128 缩放因子，B 为 128×128 缩放因子，每 128 个 k
//                                 就变一次，所以不能等到最后再乘。128×128 分块，每个消费者
//                                 m64n128k32。OVERLAP = false：等每个 k 块算完再提升（其间张量核心空闲）；
//                                 OVERLAP = true：两个部分和缓冲区，提升这个 k 块的同时，下一个 k 块的
//                                 wgmma 已在执行。
//                                 SCALES（b 和 c）：消费者从哪里取缩放因子，见下文。
//   (c) fp8_gemm_blockwise_m64    内核 (b) 的少行版本，用于 A 只有少量行的情形（解码形状）：64×BN 分块
//                                 （BN = 128、64、32 或 16），两个消费者按列分工（各 m64n(BN/2)k32）；
//                                 见文件末尾。
//
// SPLIT-K (kernel b, `splits` > 1). When C has few tiles (M = 64 or 128 rows of tokens against a
// weight matrix: N/128 tiles for 132 SMs) each tile's k-blocks are cut into `splits` ranges, one work
// unit each, so that every SM has work. A unit writes its fp32 partial tile into its own slice of a
// workspace; the unit that arrives last at its tile (a counter per tile) adds the slices in split
// order and writes bf16 C. Adding in a fixed order (not with atomic additions, whose order changes
// from run to run) keeps C the same on every run. The counters are tagged with the launch's EPOCH, a
// number the host changes at every launch (arrive_epoch, tma.cuh): a count left by another launch,
// even one that stopped halfway, reads as zero, so no launch has to set them back.
// SPLIT-K（内核 b，`splits` > 1）。C 的分块很少时（M = 64 或 128 行 token 乘一个权重矩阵：132 个 SM 只有
// N/128 个分块），把每个分块的 k 块切成 `splits` 段，每段一个工作单元，让每个 SM 都有活干。一个单元把它的
// fp32 部分分块写进工作区中属于自己的切片；最后到达其分块的单元（每个分块一个计数器）按 split 的顺序把各
// 切片相加，写出 bf16 的 C。按固定顺序相加（而不是用原子加法，它的顺序每次运行都不同），让每次运行的 C 都
// 一样。计数器带有本次启动的 EPOCH 标记，这是主机端每次启动都会改变的一个数（arrive_epoch，tma.cuh）：另
// 一次启动留下的计数，即使那次启动中途停下，读出来也是 0，所以不需要哪次启动把它们清零。
//
// PROMOTION (kernel b). The Tensor Core adds FP8 products into its fp32 accumulator with fewer bits
// than a true fp32 addition (about 14 significant bits are kept, as measured by others), so a long
// sum drifts. Kernel (b) therefore lets wgmma accumulate only one 128-deep k-block (4 instructions
// of k = 32), into FRESH registers, and then adds that partial sum into the main accumulators with
// ordinary fp32 FMAs on the CUDA cores — "promoting" it — multiplied by the block's two scales:
// 提升（PROMOTION，内核 b）。张量核心把 FP8 乘积加进 fp32 累加器时，用的位数比真正的 fp32 加法少（据他
// 人测量约保留 14 位有效位），所以长的求和会漂移。因此内核 (b) 只让 wgmma 累加一个 128 深的 k 块（4 条
// k = 32 的指令），累加到全新的寄存器中，然后在 CUDA 核心上用普通的 fp32 FMA 把这个部分和乘上该块的两个
// 缩放因子，加进主累加器，即“提升”它：
//
//     for each k-block kb (128 of k; one stage of the ring):
//         part  = A_tile(64×128) · B_tile(128×128)ᵀ     4 × wgmma m64n128k32, part starts at 0
//         acc  += part · (a_scale[row][kb] · b_scale[nb][kb])     64 FMAs per thread, CUDA cores
//     对每个 k 块 kb（128 个 k；环中的一个流水级）：
//         part  = A_tile(64×128) · B_tile(128×128)ᵀ     4 条 wgmma m64n128k32，part 从 0 开始
//         acc  += part · (a_scale[row][kb] · b_scale[nb][kb])     每个线程 64 次 FMA，在 CUDA 核心上
//
//     per thread: 64 registers of part + 64 of acc (why the tile is 128×128, not 128×256)
//     每个线程：part 64 个寄存器 + acc 64 个（这就是分块为 128×128 而不是 128×256 的原因）
//
// SCALES: WHERE THE CONSUMERS FIND THEM (kernels b and c; the template argument SCALES, three ways).
// 缩放因子：消费者从哪里取（内核 b 和 c；模板实参 SCALES，三种方式）。
//
//   SCALES_GLOBAL  every consumer thread loads its three scales of a k-block (its two rows' of A, its
//                  tile's of B) from global memory itself: 8 warps × 3 load instructions per k-block and
//                  block, each reaching 8 rows of A that lie a whole row of scales apart.
//   SCALES_STAGED  the producer warp copies them into the stage, beside the k-block's A and B: each lane
//                  copies 4 bytes per row of the tile (cp.async, 4 rows per lane for 128 rows) and lane 0
//                  B's one scale; each lane's copies then arrive on the stage's full barrier on their own
//                  (cp.async.mbarrier.arrive.noinc), so the barrier counts 1 + 32 arrivals. 129 copies of
//                  4 bytes per stage, each its own 32-byte sector: A's scales are stored row-major, so a
//                  tile's 128 row scales of one k-block lie a whole row of scales apart.
//   SCALES_TMA     the host stores a copy of A's scales M-MAJOR (k-block by k-block, the M row scales of
//                  each side by side: a_scales_t below); then a tile's row scales of one k-block are BM
//                  consecutive floats, and the producer brings them with ONE TMA box (BM floats × 1) that
//                  completes on the stage's full barrier with A's and B's boxes (its bytes counted in the
//                  same expect_tx; rows past M arrive as zeros). B's one scale per k-block comes beside it
//                  by one 4-byte cp.async of the same thread, which arrives on the barrier too (count 2).
//   SCALES_GLOBAL  每个消费者线程自己从全局内存加载一个 k 块的三个缩放因子（它那两行的 A 缩放因子、
//                  它所在分块的 B 缩放因子）：每个 k 块每个线程块 8 个线程束 × 3 条加载指令，每条都要
//                  访问 A 的 8 行，彼此相隔一整行缩放因子。
//   SCALES_STAGED  生产者线程束把它们拷贝进流水级，放在该 k 块的 A 和 B 旁边：每个 lane 为分块的每一行
//                  拷贝 4 字节（cp.async，128 行时每个 lane 4 行），lane 0 拷贝 B 的那一个缩放因子；
//                  然后每个 lane 的拷贝各自在流水级的 full 屏障上执行 arrive（cp.async.mbarrier.arrive.noinc），
//                  所以屏障计数为 1 + 32 次 arrive。每个流水级 129 次 4 字节的拷贝，各占一个 32 字节扇区：
//                  A 的缩放因子按行主序存放，所以一个分块在一个 k 块中的 128 个行缩放因子彼此相隔一整行。
//   SCALES_TMA     主机端另存一份 M 主序（M-MAJOR）的 A 缩放因子（逐个 k 块，每块的 M 个行缩放因子
//                  并排存放：即下面的 a_scales_t）；这样一个分块在一个 k 块中的行缩放因子就是 BM 个
//                  连续的 float，生产者用一个 TMA box（BM 个 float × 1）取来，它与 A、B 的 box 一起在
//                  流水级的 full 屏障上完成（字节数计入同一个 expect_tx；M 之外的行以 0 到达）。每个 k 块
//                  B 的那一个缩放因子由同一个线程用一次 4 字节的 cp.async 一并取来，它也在屏障上执行
//                  arrive（计数为 2）。
//
//   stage s (STAGED):  A 128 rows × 128 B | B 128 rows × 128 B  ...  scales: A[0…127], B, 3 floats pad
//   stage s (TMA):     A 128 rows × 128 B | B 128 rows × 128 B  ...  scales: A[0…127] (one box), B, pad to 128 B
//   流水级 s（STAGED）：A 128 行 × 128 B | B 128 行 × 128 B  ...  缩放因子：A[0…127]、B、3 个 float 填充
//   流水级 s（TMA）：   A 128 行 × 128 B | B 128 行 × 128 B  ...  缩放因子：A[0…127]（一个 box）、B、填充到 128 B
//
//   a_scales (row-major, M × KB):          a_scales_t (M-major, KB × M_pad, M_pad = M rounded up to 4):
//     row m:  s[m][0] s[m][1] … s[m][KB-1]   row kb: s[0][kb] s[1][kb] … s[M-1][kb] (pad)
//   a tile's k-block kb: one float from each of BM rows    a tile's k-block kb: BM floats in a row
//   a_scales（行主序，M × KB）：           a_scales_t（M 主序，KB × M_pad，M_pad = M 向上取整到 4 的倍数）：
//     第 m 行：s[m][0] s[m][1] … s[m][KB-1]  第 kb 行：s[0][kb] s[1][kb] … s[M-1][kb]（填充）
//   分块的 k 块 kb：BM 行中每行一个 float     分块的 k 块 kb：一行中连续的 BM 个 float
//
// A consumer reads its staged scales from shared memory once the stage is full, like A and B.
// While one consumer warpgroup promotes, the other one's wgmma keeps the Tensor Cores busy. Kernel
// (a) does no promotion: it is what cuBLAS calls "fast accumulation" (torch._scaled_mm with
// use_fast_accum=True), faster and less precise on long K.
// 流水级满了之后，消费者从共享内存读取暂存的缩放因子，与 A 和 B 一样。一个消费者线程束组做提升时，另一
// 个的 wgmma 让张量核心保持忙碌。内核 (a) 不做提升：它就是 cuBLAS 所说的“快速累加”（torch._scaled_mm
// 中 use_fast_accum=True），更快，但 K 很长时精度较低。
//
// Shared memory: one stage holds a 128-deep k-block, 128 bytes per row = exactly one row of the
// 128-byte swizzle, so each k-tile of A or B is ONE TMA box (128 bytes × rows):
// 共享内存：一个流水级存放一个 128 深的 k 块，每行 128 字节 = 恰好是 128 字节重排的一行，所以 A 或
// B 的每个 k 分块都是一个 TMA box（128 字节 × 行数）：
//
//   row r: 128 B = 8 chunks of 16 B, chunk c stored at position c ^ (r % 8) (as in Level 11)
//   A stage: 128 rows × 128 B = 16 KB      B stage: BN rows × 128 B = 16 KB (b) or 32 KB (a)
//   第 r 行：128 B = 8 个 16 B 的块，第 c 块存放在位置 c ^ (r % 8)（同第 11 级）
//   A 的流水级：128 行 × 128 B = 16 KB      B 的流水级：BN 行 × 128 B = 16 KB (b) 或 32 KB (a)
//
// wgmma descriptors: both operands K-major, like Level 11's A. 8-row groups lie 1024 B apart (the
// "stride" offset); one instruction reads k = 32 bytes of every row, so k-step kk of the k-block
// starts 32·kk bytes further (kk = 0…3). A consumer's 64 rows of A start 64 · 128 B = 8 KB in.
// wgmma 描述符：两个操作数都是 K 主序，与第 11 级的 A 相同。8 行组之间相隔 1024 B（“stride” 偏移）；
// 一条指令读取每行的 k = 32 字节，所以 k 块中第 kk 个 k 步的起始地址再往后 32·kk 字节（kk = 0…3）。一
// 个消费者的 64 行 A 从 64 · 128 B = 8 KB 处开始。
//
// The accumulator layout is Level 11's (it does not depend on the input type): warp w of a
// warpgroup holds rows 16w + lane/4 and +8, columns 8j + 2·(lane%4) + {0, 1}. So each thread needs
// the A scales of exactly two rows, and (b) one B scale per k-block: the tile's 128 columns are one
// 128-row tile of B.
// 累加器布局与第 11 级相同（与输入类型无关）：线程束组中的线程束 w 持有第 16w + lane/4 行和再往下 8 行，
// 第 8j + 2·(lane%4) + {0, 1} 列。所以每个线程恰好需要两行的 A 缩放因子，而 (b) 每个 k 块只需一个 B 缩
// 放因子：分块的 128 列正好是 B 的一个 128 行分块。
//
// Preconditions (the host checks them): K a multiple of 16 (TMA needs 16-byte row strides); A and B
// start on 16-byte boundaries; SCALES_TMA: a_scales_t's rows a multiple of 4 floats apart and its start on
// 16 bytes (TMA's stride rule again), which the host's M-major copy guarantees. M and N are free: past the edges TMA fills zeros (a shorter last
// k-block of scales then covers only the real columns, as fp8.py defines it), and only elements
// inside C are stored (pairs of bf16 when N is even, single values when N is odd).
// 前提条件（主机端会检查）：K 是 16 的倍数（TMA 要求行跨度是 16 字节的倍数）；A 和 B 从 16 字节边界开始；SCALES_TMA：
// a_scales_t 的行间相隔 4 个 float 的倍数，起始地址 16 字节对齐（又是 TMA 的跨度规则），主机端生成的 M 主序副本保证了
// 这一点。M 和 N 不受限制：越过边缘的部分由 TMA 填 0（最后一个较短的 k 块的缩放因子这时只覆盖真实的列，与 fp8.py 的定
// 义一致），只写 C 之内的元素（N 为偶数时成对写 bf16，N 为奇数时逐个写）。
#include "tma.cuh"
#include "wgmma.cuh"

typedef unsigned short u16;  // bf16 bits
                             // bf16 的位模式

constexpr int FP8_BM = 128;               // rows of a tile: two consumers × 64
                                          // 分块的行数：两个消费者 × 64
constexpr int FP8_BK = 128;               // k per stage: 128 bytes = one swizzle row = one scale block
                                          // 每个流水级的 k：128 字节 = 一行重排 = 一个缩放块
constexpr int FP8_A_BYTES = FP8_BM * FP8_BK;
constexpr int FP8_CONSUMER_WARPS = 8;
constexpr int FP8_SCALE_N = 128;          // columns of C (rows of B) per scale of B: its 128×128 scale tiles
                                          // B 的每个缩放因子对应的 C 列数（B 的行数）：B 的 128×128 缩放分块

// Where the consumers find the scales (the template argument SCALES of kernels b and c; see above).
// 消费者从哪里取缩放因子（内核 b 和 c 的模板实参 SCALES；见上文）。
constexpr int SCALES_GLOBAL = 0, SCALES_STAGED = 1, SCALES_TMA = 2;

// One stage's scales: BM floats of A, then B's one at [BM]. STAGED: padded so every stage starts on 16 bytes.
// TMA: padded to 128 bytes, where a TMA box must land (the ring's start being 1024-aligned).
// 一个流水级的缩放因子：A 的 BM 个 float，然后是 B 的那一个，位于 [BM]。STAGED：填充到让每个流水级都从 16 字节边
// 界开始。TMA：填充到 128 字节，TMA box 必须落在这样的位置（环的起始地址按 1024 对齐）。
template <int BM, int SCALES>
__host__ __device__ constexpr int scale_slot_bytes()
{
    return SCALES == SCALES_STAGED ? (BM + 4) * 4 : SCALES == SCALES_TMA ? (BM + 32) * 4 : 0;
}

// A K-major operand with the 128-byte swizzle, as Level 11's A: 8-row groups 1024 B apart (the
// "leading" offset is not used by a swizzled K-major operand whose k fits in one swizzle row; 16 B as
// in Level 11). k-step kk (32 bytes of k) of a tile whose first row is at `tile` starts 32·kk further.
// 采用 128 字节重排的 K 主序操作数，与第 11 级的 A 相同：8 行组之间相隔 1024 B（k 能放进一行重排的 K 主序
// 重排操作数不使用 “leading” 偏移；与第 11 级一样取 16 B）。首行位于 `tile` 的分块，其第 kk 个 k 步（32 字
// 节的 k）的起始地址再往后 32·kk。
__device__ __forceinline__ unsigned long long kmajor_desc(unsigned tile, int kk) { return smem_descriptor(tile + kk * 32, 16, 1024); }

// The four k = 32 steps of one 128-deep k-block, for the 64 rows of A that start at a_rows.
// first: the first instruction overwrites d (scale-d = 0) instead of adding to it.
// 一个 128 深 k 块中的四个 k = 32 步，作用于从 a_rows 开始的 64 行 A。first：第一条指令覆盖 d
// （scale-d = 0），而不是累加到 d 上。
template <int REGS>
__device__ __forceinline__ void wgmma_k_block(float (&d)[REGS], unsigned a_rows, unsigned b_tile, bool first)
{
#pragma unroll
    for (int kk = 0; kk < FP8_BK / 32; ++kk)
        wgmma_m64k32_e4m3(d, kmajor_desc(a_rows, kk), kmajor_desc(b_tile, kk), (first && kk == 0) ? 0 : 1);
}

// bf16 rounding, to nearest even. cvt packs its first source into the upper half: hi, then lo.
// bf16 舍入，就近舍入到偶数。cvt 把第一个源操作数放进高半部分：先 hi，再 lo。
__device__ __forceinline__ unsigned bf16x2(float lo, float hi)
{
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}
__device__ __forceinline__ u16 bf16(float x)
{
    u16 bits;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(bits) : "f"(x));
    return bits;
}

// A consumer's 64 rows × (REGS/2) columns of accumulators, times `scale`, → bf16 C at (m0, n0).
// Only elements inside C are written. With N even every row starts on a 4-byte boundary and c is
// even, so the two neighbours go out as one 32-bit store (c < N implies c + 1 < N); with N odd they
// go one by one.
// 一个消费者的 64 行 × (REGS/2) 列累加器，乘以 `scale`，→ 位于 (m0, n0) 的 bf16 C。只写 C 之内的元素。N
// 为偶数时每行都从 4 字节边界开始，且 c 为偶数，所以相邻的两个值用一次 32 位存储写出（c < N 意味着 c +
// 1 < N）；N 为奇数时逐个写出。
template <int REGS>
__device__ __forceinline__ void store_tile_bf16(const float (&d)[REGS], float scale, u16* C, int M, int N,
                                                int m0, int n0, int thread)
{
    const int row = m0 + (thread / 32) * 16 + (thread % 32) / 4;
    const int col = n0 + (thread % 4) * 2;
    const bool pairs = N % 2 == 0;
#pragma unroll
    for (int j = 0; j < REGS / 4; ++j) {
        const int c = col + 8 * j;
        if (c >= N) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row + 8 * h;
            if (r >= M) continue;
            u16* p = C + (size_t)r * N + c;
            const float x = d[4 * j + 2 * h] * scale, y = d[4 * j + 2 * h + 1] * scale;
            if (pairs) {
                *reinterpret_cast<unsigned*>(p) = bf16x2(x, y);
            } else {
                p[0] = bf16(x);
                if (c + 1 < N) p[1] = bf16(y);
            }
        }
    }
}

// --- work units ------------------------------------------------------------------------------------
// --- 工作单元 --------------------------------------------------------------------------------------
//
// Unit u covers one tile of C and one range of its k-blocks. With splits = 1 a unit is a tile. The
// split index is the slow one, so the units that run at the same time share k-ranges of A and B in L2.
// 单元 u 覆盖 C 的一个分块及其 k 块的一段范围。splits = 1 时一个单元就是一个分块。split 下标是变化慢的那一
// 维，所以同时运行的各单元在 L2 中共用 A 和 B 的同一段 k 范围。
struct WorkUnit {
    int tile, part, m0, n0, kb_begin, kb_end;
};

template <int BN, int BM = FP8_BM>
__device__ __forceinline__ WorkUnit work_unit(int u, int M, int N, int k_blocks, int splits)
{
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    WorkUnit w;
    w.tile = u % tiles;
    w.part = u / tiles;
    tile_origin<BM, BN>(w.tile, M, N, w.m0, w.n0);
    w.kb_begin = w.part * k_blocks / splits;          // the host keeps splits ≤ k_blocks: no empty unit
                                                      // 主机端保证 splits ≤ k_blocks：没有空单元
    w.kb_end = (w.part + 1) * k_blocks / splits;
    return w;
}

template <int BN, int BM = FP8_BM>
__device__ __forceinline__ int unit_count(int M, int N, int splits)
{
    return ((M + BM - 1) / BM) * ((N + BN - 1) / BN) * splits;
}

// --- the producer warpgroup (both kernels) ---------------------------------------------------------
// --- 生产者线程束组（两个内核共用）-----------------------------------------------------------------
//
//   warpgroup 0 (producer, 40 registers)         warpgroups 1, 2 (consumers, 232 registers)
//   ─ wait empty[s] ─ TMA A, B k-block into s ─┐     ┌─ wait full[s] ─ wgmma × 4 ─ arrive empty[s] ─
//                                         full[s] ───┘
// One thread walks the same units in the same order as the consumers and keeps the ring full; a
// stage is one TMA box of A (128 rows) and one of B (BN rows), both 128 bytes of k wide.

// 4 bytes from global to shared memory, asynchronously (cp.async: .ca, the only kind that copies 4 bytes).
// 从全局内存异步拷贝 4 字节到共享内存（cp.async：.ca，唯一能拷贝 4 字节的一种）。
__device__ __forceinline__ void copy_scale(unsigned dst, const float* src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(dst), "l"(src) : "memory");
}

// This thread arrives on `bar` once all the cp.async it has issued so far have landed. .noinc: the
// arrival counts against the barrier's initial count, like a plain arrive.
// 当这个线程此前发出的所有 cp.async 都到达之后，它在 `bar` 上执行 arrive。.noinc：这次 arrive 计入屏障
// 的初始计数，与普通的 arrive 一样。
__device__ __forceinline__ void arrive_when_copied(unsigned bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(bar) : "memory");
}

// Thread 0 alone, except with SCALES_STAGED: the whole warp 0, every lane copying scales (above).
// 只有线程 0，SCALES_STAGED 时除外：那时是整个线程束 0，每个 lane 都拷贝缩放因子（见上文）。
template <int BN, int STAGES, int BM, int SCALES>
__device__ __forceinline__ void produce(const TensorMap* map_a, const TensorMap* map_b, const TensorMap* map_a_scales,
                                        const float* a_scales, const float* b_scales, unsigned a_base,
                                        unsigned b_base, unsigned scale_base, unsigned long long* full,
                                        unsigned long long* empty, int M, int N, int K, int splits)
{
    constexpr int A_BYTES = BM * FP8_BK, B_BYTES = BN * FP8_BK;
    constexpr int SCALE_BYTES = SCALES == SCALES_TMA ? BM * 4 : 0;  // A's scales by TMA: one box, counted too
                                                                    // A 的缩放因子经 TMA：一个 box，字节也要计入
    constexpr int SLOT = scale_slot_bytes<BM, SCALES>();
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;
    const int lane = threadIdx.x % 32;
    int it = 0;  // k-blocks issued so far, over all units: position in the ring and its phase
                 // 到目前为止（所有单元合计）已发出的 k 块数：在环中的位置及其阶段
    for (int u = blockIdx.x; u < unit_count<BN, BM>(M, N, splits); u += gridDim.x) {
        const WorkUnit w = work_unit<BN, BM>(u, M, N, k_blocks, splits);
        for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++it) {
            const int s = it % STAGES;
            const unsigned bar = smem_u32(&full[s]);
            mbar_wait(smem_u32(&empty[s]), (it / STAGES + 1) % 2);  // first round: passes at once
                                                                    // 第一轮：直接通过
            if (lane == 0) {
                mbar_expect_bytes(bar, A_BYTES + B_BYTES + SCALE_BYTES);  // parts past the edges count too (zeros)
                                                                          // 越过边缘的部分也计入（填 0）
                tma_load(a_base + s * A_BYTES, map_a, kb * FP8_BK, w.m0, bar);
                tma_load(b_base + s * B_BYTES, map_b, kb * FP8_BK, w.n0, bar);
                if constexpr (SCALES == SCALES_TMA) {  // row kb of the M-major copy, its BM floats from row m0 on
                                                       // M 主序副本的第 kb 行，从第 m0 行起的 BM 个 float
                    tma_load(scale_base + s * SLOT, map_a_scales, w.m0, kb, bar);
                    copy_scale(scale_base + s * SLOT + 4 * BM, b_scales + (size_t)(w.n0 / FP8_SCALE_N) * k_blocks + kb);
                    arrive_when_copied(bar);  // B's scale: the barrier's second arrival
                                              // B 的缩放因子：屏障的第二次 arrive
                }
            }
            if constexpr (SCALES == SCALES_STAGED) {
                const unsigned slot = scale_base + s * SLOT;
                // Rows past M (never stored) take row M - 1's scale: every address stays inside the array.
                // M 之外的行（永远不会写出）取第 M - 1 行的缩放因子：每个地址都留在数组之内。
                for (int r = lane; r < BM; r += 32)
                    copy_scale(slot + 4 * r, a_scales + (size_t)min(w.m0 + r, M - 1) * k_blocks + kb);
                if (lane == 0) copy_scale(slot + 4 * BM, b_scales + (size_t)(w.n0 / FP8_SCALE_N) * k_blocks + kb);
                arrive_when_copied(bar);
                __syncwarp();
            }
        }
    }
    if constexpr (SCALES != SCALES_GLOBAL) asm volatile("cp.async.wait_all;\n" ::: "memory");  // none left in flight
                                                                                               // 不留任何在途的拷贝
}

// Barriers, then the producer's side. Returns false in the producer warpgroup (its work is done).
// 屏障，然后是生产者这一侧。在生产者线程束组中返回 false（它的工作已完成）。
template <int BN, int STAGES, int BM = FP8_BM, int SCALES = SCALES_GLOBAL>
__device__ __forceinline__ bool start_roles(const TensorMap* map_a, const TensorMap* map_b,
                                            const TensorMap* map_a_scales, const float* a_scales,
                                            const float* b_scales, unsigned a_base, unsigned b_base,
                                            unsigned scale_base, unsigned long long* full,
                                            unsigned long long* empty, int M, int N, int K, int splits)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            // the producer's expect_tx, + each lane's copies (STAGED) or thread 0's copy of B's scale (TMA)
            // 生产者的 expect_tx，加上每个 lane 的拷贝（STAGED）或线程 0 对 B 缩放因子的拷贝（TMA）
            mbar_init(smem_u32(&full[s]), SCALES == SCALES_STAGED ? 1 + 32 : SCALES == SCALES_TMA ? 2 : 1);
            mbar_init(smem_u32(&empty[s]), FP8_CONSUMER_WARPS);   // one arrival per consumer warp
                                                                  // 每个消费者线程束 arrive 一次
        }
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x < (SCALES == SCALES_STAGED ? 32 : 1))
            produce<BN, STAGES, BM, SCALES>(map_a, map_b, map_a_scales, a_scales, b_scales, a_base, b_base,
                                            scale_base, full, empty, M, N, K, splits);
        return false;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    return true;
}

// --- (a) one scale per tensor, applied when C is stored ------------------------------------------------
// --- (a) 每个张量一个缩放因子，在写回 C 时施加 ----------------------------------------------------------

template <int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
fp8_gemm_per_tensor(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                    const float* __restrict__ a_scale, const float* __restrict__ b_scale, u16* __restrict__ C,
                    int M, int N, int K)
{
    static_assert(BN == 128 || BN == 256, "one consumer's accumulators: m64n128 or m64n256");
    constexpr int B_BYTES = BN * FP8_BK;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * FP8_A_BYTES;
    if (!start_roles<BN, STAGES>(map_a, map_b, nullptr, nullptr, nullptr, a_base, b_base, 0, full, empty, M, N, K, 1))
        return;

    const int thread = threadIdx.x % 128, rows = (threadIdx.x / 128 - 1) * 64;  // this consumer's rows
                                                                                // 这个消费者的行
    const bool releaser = thread % 32 == 0;
    const float scale = a_scale[0] * b_scale[0];  // both factor out of the whole sum
                                                  // 两者都可以提到整个求和之外
    const int tiles = unit_count<BN>(M, N, 1);
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_origin<FP8_BM, BN>(t, M, N, m0, n0);
        // Zeroed although the first wgmma overwrites d (scale-d = 0): the asm reads its accumulators as
        // "+f" operands, and reading an uninitialised register is undefined to the compiler.
        // 虽然第一条 wgmma 会覆盖 d（scale-d = 0），仍然清零：asm 把累加器作为 "+f" 操作数读取，而读取未初
        // 始化的寄存器对编译器来说是未定义行为。
        float d[BN / 2] = {};
        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
            const int s = it % STAGES;
            mbar_wait(smem_u32(&full[s]), (it / STAGES) % 2);
            wgmma_fence();
            wgmma_k_block(d, a_base + s * FP8_A_BYTES + rows * FP8_BK, b_base + s * B_BYTES, kb == 0);
            wgmma_commit();
            wgmma_wait<1>();  // keep this k-block's wgmma running; the previous one is done: free its stage
                              // 让这个 k 块的 wgmma 继续执行；上一个已完成：释放它的流水级
            if (kb > 0 && releaser) mbar_arrive(smem_u32(&empty[(it - 1) % STAGES]));
        }
        wgmma_wait<0>();
        if (releaser) mbar_arrive(smem_u32(&empty[(it - 1) % STAGES]));
        pin(d);
        store_tile_bf16(d, scale, C, M, N, m0 + rows, n0, thread);
    }
}

// --- (b) 1×128 scales of A, 128×128 scales of B, promotion once per k-block -----------------------------
// --- (b) A 为 1×128 缩放因子，B 为 128×128 缩放因子，每个 k 块提升一次 ---------------------------------

// acc += part · scale of its row: registers 4j, 4j+1 belong to row my_row, 4j+2, 4j+3 to row my_row + 8.
// acc += part · 所在行的缩放因子：寄存器 4j、4j+1 属于 my_row 行，4j+2、4j+3 属于 my_row + 8 行。
template <int REGS>
__device__ __forceinline__ void promote(float (&acc)[REGS], const float (&part)[REGS], float top, float bottom)
{
#pragma unroll
    for (int j = 0; j < REGS / 4; ++j) {
        acc[4 * j] = fmaf(part[4 * j], top, acc[4 * j]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], top, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], bottom, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], bottom, acc[4 * j + 3]);
    }
}

// The scales of k-block kb (in ring stage s) for this thread's two rows, already multiplied by B's
// block scale, in two parts: before_wait, from global memory (SCALES_GLOBAL: the consumers load them before
// they wait for the stage, so the load's latency hides); after_wait, from the stage once it is full (STAGED,
// TMA: the producer put all three there).
// k 块 kb（位于环的流水级 s）中这个线程两行的缩放因子，已乘上 B 的块缩放因子，分两部分取得：before_wait，从全局
// 内存（SCALES_GLOBAL：消费者在等待流水级之前就加载它们，把加载延迟藏起来）；after_wait，流水级满了之后从流水级
// 中取（STAGED、TMA：生产者把三个都放在那里）。
template <int SCALES_, int BM>
struct BlockScales {
    static constexpr int SCALES = SCALES_;
    const float *a_top, *a_bottom, *b_row;  // global memory: this thread's rows of the scale arrays
                                            // 全局内存：这个线程在各缩放数组中对应的行
    const float* stages;                    // STAGED, TMA: the scales of stage 0 in shared memory
                                            // STAGED、TMA：共享内存中流水级 0 的缩放因子
    int row;                                // STAGED, TMA: the top row in the tile
                                            // STAGED、TMA：分块中的上面那一行
    __device__ __forceinline__ void before_wait(int kb, float& top, float& bottom) const
    {
        if constexpr (SCALES == SCALES_GLOBAL) {
            const float b = b_row[kb];
            top = a_top[kb] * b;
            bottom = a_bottom[kb] * b;
        }
    }
    __device__ __forceinline__ void after_wait(int s, float& top, float& bottom) const
    {
        if constexpr (SCALES != SCALES_GLOBAL) {
            const float* slot = stages + s * (scale_slot_bytes<BM, SCALES>() / 4);
            top = slot[row] * slot[BM];  // a · b: the same product (and rounding) as from global memory
                                         // a · b：与从全局内存取时相同的乘积（以及舍入）
            bottom = slot[row + 8] * slot[BM];
        }
    }
};

// The scales a consumer thread of a tile at (m0, n0) reads; my_row: its top row in the tile (and + 8).
// 位于 (m0, n0) 的分块中，一个消费者线程读取的缩放因子；my_row：它在分块中的上面那一行（以及 + 8）。
template <int SCALES, int BM>
__device__ __forceinline__ BlockScales<SCALES, BM> scales_for(const float* a_scales, const float* b_scales,
                                                              const float* stages, const WorkUnit& w, int M,
                                                              int k_blocks, int my_row)
{
    // Rows past M (never stored) read row M - 1's scales, so every address stays inside the array.
    // M 之外的行（永远不会写出）读取第 M - 1 行的缩放因子，这样每个地址都留在数组之内。
    return {a_scales + (size_t)min(w.m0 + my_row, M - 1) * k_blocks,
            a_scales + (size_t)min(w.m0 + my_row + 8, M - 1) * k_blocks,
            b_scales + (size_t)(w.n0 / FP8_SCALE_N) * k_blocks, stages, my_row};  // a tile lies in one scale tile of B
                                                                                  // 一个分块落在 B 的一个缩放分块之内
}

// The thread's two rows in one slice of the workspace: register 4j + i is row (+8 if i ≥ 2), column
// col + 8j + i%2, so every element is a fixed offset from one of two row pointers (64 separate addresses
// would not fit in registers beside the accumulators). A row past M takes the slice's first row as its
// pointer and is never touched: no address outside the workspace is ever formed, not even one left unused.
// `visit` stores one element.
// 线程在工作区一个切片中的两行：寄存器 4j + i 对应该行（i ≥ 2 时为 +8 行）、第 col + 8j + i%2 列，所以每个元素
// 都是相对两个行指针之一的固定偏移（64 个各自独立的地址在累加器之外放不进寄存器）。M 之外的行以切片的第一行作
// 为指针，且从不访问：绝不会构造工作区之外的地址，哪怕是一个不用的地址。`visit` 写一个元素。
struct StoreTo {
    __device__ void operator()(float* p, float& v) const { __stcg(p, v); }
};

// Row `row` of an M×N slice, or the slice itself for a row past M (never read or written through).
// M×N 切片的第 `row` 行；M 之外的行则为切片本身（从不通过它读写）。
__device__ __forceinline__ float* slice_row(float* slice, int row, int M, int N)
{
    return row < M ? slice + (size_t)row * N : slice;
}

template <int REGS, typename Visit>
__device__ __forceinline__ void each_element(float (&acc)[REGS], float* slice, int M, int N, int row, int col,
                                             Visit visit)
{
    float* top = slice_row(slice, row, M, N);
    float* bottom = slice_row(slice, row + 8, M, N);
#pragma unroll
    for (int j = 0; j < REGS / 4; ++j) {
        const int c = col + 8 * j;
        if (c >= N) continue;
        const bool pair = c + 1 < N;
        if (row < M) {
            visit(top + c, acc[4 * j]);
            if (pair) visit(top + c + 1, acc[4 * j + 1]);
        }
        if (row + 8 < M) {
            visit(bottom + c, acc[4 * j + 2]);
            if (pair) visit(bottom + c + 1, acc[4 * j + 3]);
        }
    }
}

// A split unit's end: write the partial tile into this split's slice of the workspace (M×N floats
// per split); the last unit of the tile to arrive adds the slices in split order and writes bf16 C.
// Ordering: the consumers' stores, then the CTA barrier, then ONE acquire-release atomic on the
// tile's counter (arrive_epoch, tma.cuh), tagged with this launch's epoch.
// split 单元的结尾：把部分分块写进工作区中属于这个 split 的切片（每个 split M×N 个 float）；分块最后到
// 达的那个单元按 split 的顺序把各切片相加，写出 bf16 的 C。顺序：先是消费者的存储，然后是 CTA 屏障，然
// 后在分块的计数器上执行一次 acquire-release 原子操作（arrive_epoch，tma.cuh），带有本次启动的 epoch 标
// 记。

template <int REGS>
__device__ __forceinline__ void finish_split_unit(float (&acc)[REGS], float* workspace, int* tile_counters,
                                                  unsigned epoch, int splits, const WorkUnit& w, u16* C, int M,
                                                  int N, int m0, int n0, int thread, int* last_flag)
{
    // m0, n0: where this consumer's 64 rows × REGS/2 columns of C start
    // m0、n0：这个消费者负责的 64 行 × REGS/2 列 C 的起点
    const int row = m0 + (thread / 32) * 16 + (thread % 32) / 4;  // and row + 8
                                                                  // 以及 row + 8
    const int col = n0 + (thread % 4) * 2;
    const size_t slice = (size_t)M * N;
    each_element(acc, workspace + w.part * slice, M, N, row, col, StoreTo{});
    asm volatile("bar.sync 1, 256;\n" ::: "memory");  // both consumer warpgroups have stored
                                                      // 两个消费者线程束组都已写完
    if (threadIdx.x == 128) *last_flag = arrive_epoch(tile_counters + w.tile, epoch) == splits - 1;
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    if (!*last_flag) return;
    // Slice by slice, in split order. Plain loads: after the acquire (which also emptied this SM's L1)
    // they see the other units' stores, and unlike volatile-like ld.cg loads the compiler may issue all
    // of a row's loads before the first addition, so their latencies overlap instead of adding up.
    // acc, already stored, holds the total: no more registers than the main loop needs.
    // 逐个切片，按 split 的顺序。普通加载：在 acquire（它同时清空了这个 SM 的 L1）之后，它们能看到其他单元
    // 的存储；而且与类似 volatile 的 ld.cg 加载不同，编译器可以在第一次加法之前发出一行的全部加载，让它们的
    // 延迟相互重叠而不是累加。acc 已经写出，保存着总和：所需寄存器不比主循环多。
#pragma unroll
    for (int i = 0; i < REGS; ++i) acc[i] = 0.0f;
    const bool top_ok = row < M, bottom_ok = row + 8 < M;
    for (int q = 0; q < splits; ++q) {
        const float* top = slice_row(workspace + q * slice, row, M, N);
        const float* bottom = slice_row(workspace + q * slice, row + 8, M, N);
#pragma unroll
        for (int j = 0; j < REGS / 4; ++j) {
            const int c = col + 8 * j;
            const bool first = c < N, second = c + 1 < N;  // second implies first
                                                           // second 意味着 first
            const float a = top_ok && first ? top[c] : 0.0f, b = top_ok && second ? top[c + 1] : 0.0f;
            const float d = bottom_ok && first ? bottom[c] : 0.0f;
            const float e = bottom_ok && second ? bottom[c + 1] : 0.0f;
            acc[4 * j] += a;
            acc[4 * j + 1] += b;
            acc[4 * j + 2] += d;
            acc[4 * j + 3] += e;
        }
    }
    store_tile_bf16(acc, 1.0f, C, M, N, m0, n0, thread);
}

// The overlapped k-loop of kernels (b) and (c): two partial sums in turn, so that while the CUDA cores
// promote one k-block, the Tensor Cores already sum the next one into the other buffer. Unrolled by
// two so that each buffer stays in fixed registers (a register array cannot be indexed by a run-time
// value). a_tile / b_tile: this consumer's operands in stage 0; a stage is a_bytes / b_bytes further.
// 内核 (b) 和 (c) 的重叠 k 循环：两个部分和轮流使用，这样 CUDA 核心提升一个 k 块时，张量核心已经在另一个缓
// 冲区中累加下一个。按两次展开，让每个缓冲区固定在一组寄存器中（寄存器数组不能用运行时的值做下标）。a_tile
// / b_tile：这个消费者在流水级 0 中的操作数；每个流水级再往后 a_bytes / b_bytes。
//
//   wgmma  | kb   → p0 | kb+1 → p1 | kb+2 → p0 | ...
//   FMAs   |           | p0 += kb  | p1 += kb+1| ...
//   wgmma  | kb   → p0 | kb+1 → p1 | kb+2 → p0 | ...   （张量核心）
//   FMA    |           | p0 += kb  | p1 += kb+1| ...   （CUDA 核心上的提升）
template <int STAGES, int REGS, typename Scales>
__device__ __forceinline__ void overlapped_k_blocks(float (&acc)[REGS], const WorkUnit& w, int& it,
                                                    const Scales& scales, unsigned a_tile, int a_bytes,
                                                    unsigned b_tile, int b_bytes, unsigned long long* full,
                                                    unsigned long long* empty, bool releaser)
{
    float p0[REGS] = {}, p1[REGS] = {};  // zeroed although each wgmma group overwrites them: see d above
                                         // 虽然每组 wgmma 都会覆盖它们，仍然清零：见上文关于 d 的说明
    float top0, bottom0, top1, bottom1;  // each buffer's scales, loaded when its wgmma is issued
                                         // 每个缓冲区的缩放因子，在发出它的 wgmma 时加载
    auto issue = [&](float (&part)[REGS], float& top, float& bottom, int kb, int at) {
        const int s = at % STAGES;
        scales.before_wait(kb, top, bottom);  // from global memory: used only after the wgmma
                                              // 从全局内存：只在 wgmma 之后使用
        mbar_wait(smem_u32(&full[s]), (at / STAGES) % 2);
        scales.after_wait(s, top, bottom);    // from the stage, once it is full
                                              // 从流水级，等它满了之后
        wgmma_fence();  // part was read by its last promotion: order that before wgmma rewrites it
                        // part 已被它上一次的提升读过：在 wgmma 重写它之前先确立这个顺序
        wgmma_k_block(part, a_tile + s * a_bytes, b_tile + s * b_bytes, true);
        wgmma_commit();
    };
    // After a k-block's sum is in `part` (ring position `at`): free its stage, promote it.
    // 一个 k 块的和进入 `part`（环中位置 `at`）之后：释放它的流水级，提升它。
    auto retire = [&](float (&part)[REGS], float top, float bottom, int at) {
        pin(part);
        if (releaser) mbar_arrive(smem_u32(&empty[at % STAGES]));
        promote(acc, part, top, bottom);
    };
    const int first = it, count = w.kb_end - w.kb_begin;
    issue(p0, top0, bottom0, w.kb_begin, first);
    int i = 0;
    for (; i + 2 < count; i += 2) {  // on entry p0's k-block i is in flight, nothing else
                                     // 进入时 p0 的 k 块 i 正在执行，没有别的
        issue(p1, top1, bottom1, w.kb_begin + i + 1, first + i + 1);
        wgmma_wait<1>();  // p0's group is done; p1's keeps the Tensor Cores busy
                          // p0 那一组已完成；p1 那一组让张量核心保持忙碌
        retire(p0, top0, bottom0, first + i);
        issue(p0, top0, bottom0, w.kb_begin + i + 2, first + i + 2);
        wgmma_wait<1>();
        retire(p1, top1, bottom1, first + i + 1);
    }
    if (i + 1 < count) {  // two k-blocks left: p0's is in flight
                          // 还剩两个 k 块：p0 的正在执行
        issue(p1, top1, bottom1, w.kb_begin + i + 1, first + i + 1);
        wgmma_wait<1>();
        retire(p0, top0, bottom0, first + i);
        wgmma_wait<0>();
        retire(p1, top1, bottom1, first + i + 1);
    } else {              // one left
                          // 还剩一个
        wgmma_wait<0>();
        retire(p0, top0, bottom0, first + i);
    }
    it += count;
}

// map_a_scales: the M-major copy of A's scales (SCALES_TMA; unused otherwise, may be null). epoch: this
// launch's tag for the split-K counters (see SPLIT-K above).
// map_a_scales：A 缩放因子的 M 主序副本（SCALES_TMA；其他情况下不用，可以为空）。epoch：本次启动给 split-K
// 计数器的标记（见上文 SPLIT-K）。
template <int STAGES, bool OVERLAP, int SCALES = SCALES_GLOBAL>
__global__ void __launch_bounds__(384, 1)
fp8_gemm_blockwise(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                   const TensorMap* __restrict__ map_a_scales, const float* __restrict__ a_scales,
                   const float* __restrict__ b_scales, u16* __restrict__ C, int M, int N, int K, int splits,
                   float* __restrict__ workspace, int* __restrict__ tile_counters, unsigned epoch)
{
    constexpr int BN = 128, B_BYTES = BN * FP8_BK;  // BN = the side of B's scale tiles: one scale per k-block
                                                    // BN = B 的缩放分块的边长：每个 k 块一个缩放因子
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ int last_flag;
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * FP8_A_BYTES;
    const unsigned scale_base = b_base + STAGES * B_BYTES;  // STAGED, TMA: each stage's scales
                                                            // STAGED、TMA：每个流水级的缩放因子
    if (!start_roles<BN, STAGES, FP8_BM, SCALES>(map_a, map_b, map_a_scales, a_scales, b_scales, a_base, b_base,
                                                 scale_base, full, empty, M, N, K, splits))
        return;
    const float* stage_scales = reinterpret_cast<const float*>(smem + (scale_base - smem_u32(smem)));

    const int thread = threadIdx.x % 128, rows = (threadIdx.x / 128 - 1) * 64;
    const bool releaser = thread % 32 == 0;
    const int my_row = rows + (thread / 32) * 16 + (thread % 32) / 4;  // in the tile; and my_row + 8
                                                                       // 在分块中；以及 my_row + 8
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;  // also the row length of both scale arrays
                                                     // 也是两个缩放数组的行长
    const unsigned a_rows = a_base + rows * FP8_BK;
    int it = 0;
    for (int u = blockIdx.x; u < unit_count<BN>(M, N, splits); u += gridDim.x) {
        const WorkUnit w = work_unit<BN>(u, M, N, k_blocks, splits);
        const auto scales = scales_for<SCALES, FP8_BM>(a_scales, b_scales, stage_scales, w, M, k_blocks, my_row);
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        if constexpr (!OVERLAP) {
            float part[BN / 2] = {};  // one k-block's sum, straight from the Tensor Cores (zeroed: see d above)
                                      // 一个 k 块的和，直接来自张量核心（清零：见上文关于 d 的说明）
            float top, bottom;
            for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++it) {
                const int s = it % STAGES;
                scales.before_wait(kb, top, bottom);  // loaded here, used after the wgmma
                                                      // 在这里加载，在 wgmma 之后使用
                mbar_wait(smem_u32(&full[s]), (it / STAGES) % 2);
                scales.after_wait(s, top, bottom);
                wgmma_fence();  // part was read by the promotion below: order that before wgmma rewrites it
                                // part 已被下面的提升读过：在 wgmma 重写它之前先确立这个顺序
                wgmma_k_block(part, a_rows + s * FP8_A_BYTES, b_base + s * B_BYTES, true);
                wgmma_commit();
                wgmma_wait<0>();  // the promotion needs this k-block's sum now: the Tensor Cores wait
                                  // 提升现在就需要这个 k 块的和：张量核心等待
                pin(part);
                if (releaser) mbar_arrive(smem_u32(&empty[s]));  // stage s is read: the producer may refill it
                                                                 // 流水级 s 已读完：生产者可以重新填充它
                promote(acc, part, top, bottom);
            }
        } else {  // two partial sums in turn: promote one while the Tensor Cores sum the next
                  // 两个部分和轮流使用：张量核心累加下一个的同时提升这一个
            overlapped_k_blocks<STAGES>(acc, w, it, scales, a_rows, FP8_A_BYTES, b_base, B_BYTES, full, empty,
                                        releaser);
        }
        if (splits == 1)
            store_tile_bf16(acc, 1.0f, C, M, N, w.m0 + rows, w.n0, thread);  // the scales are already in acc
                                                                             // 缩放因子已经乘进 acc
        else
            finish_split_unit(acc, workspace, tile_counters, epoch, splits, w, C, M, N, w.m0 + rows, w.n0, thread,
                              &last_flag);
    }
}

// --- (c) the same scales and promotion for FEW ROWS of A: 64×BN tiles ----------------------------------
// --- (c) 同样的缩放因子和提升，用于 A 只有少量行的情形：64×BN 分块 --------------------------------------
//
// With M = 64 tokens, kernel (b)'s 128-row tile computes 64 rows of zeros: half of every wgmma is
// wasted, and N/128 tiles leave most SMs idle. Here a tile is 64 rows × BN columns, and the two
// consumers split it by COLUMNS: consumer c computes columns c·BN/2 … (c+1)·BN/2 − 1 with m64n(BN/2)k32
// (BN/4 accumulators per thread: 32 for BN = 128, so acc + two partial sums = 96 registers). Both read
// the same 64 rows of A; their halves of B start BN/2 rows × 128 B apart in the stage. BN divides 128, so
// a tile's columns lie in one 128×128 scale tile of B and one B scale per k-block serves both. Promotion
// is overlapped as in (b), and split-K works the same way.
// M = 64 个 token 时，内核 (b) 的 128 行分块有 64 行算的是 0：每条 wgmma 浪费一半，而 N/128 个分块让大多数 SM
// 空闲。这里一个分块是 64 行 × BN 列，两个消费者按列分工：消费者 c 用 m64n(BN/2)k32 计算第 c·BN/2 …
// (c+1)·BN/2 − 1 列（每个线程 BN/4 个累加器：BN = 128 时 32 个，所以 acc 加两个部分和 = 96 个寄存器）。两者读
// 取 A 的同样 64 行；它们那两半 B 在流水级中相隔 BN/2 行 × 128 B。BN 整除 128，所以一个分块的列落在 B 的一个
// 128×128 缩放分块之内，每个 k 块一个 B 缩放因子就能同时供两者使用。提升与 (b) 一样相互重叠，split-K 的做法也
// 相同。
//
// BN < 128 (64, 32, 16) is for decode shapes whose N gives too few 128-wide tiles: at M = 64 and
// N = 2112, BN = 128 makes 17 tiles for 132 SMs (split-K then cuts each into k-ranges), BN = 16 makes 132.
// A narrower tile reads A again for every BN columns (from L2: A is small) and gives each wgmma less
// work; which width wins at which shape is measured, not assumed (the autotuner tries each).
// BN < 128（64、32、16）用于 N 给出的 128 宽分块太少的解码形状：M = 64、N = 2112 时，BN = 128 只有 17 个分块对
// 应 132 个 SM（这时由 split-K 把每个分块切成若干 k 段），BN = 16 则有 132 个。更窄的分块每 BN 列就要再读一遍
// A（从 L2 读：A 很小），每条 wgmma 的工作量也更少；哪种宽度在哪种形状下胜出，靠测量而不是假设（自动调优器会逐
// 一尝试）。
//
//   stage (BN = 128):  A 64 rows × 128 B (8 KB)  |  B 128 rows × 128 B (16 KB): consumer 0 ← rows 0–63, 1 ← 64–127
//   流水级（BN = 128）：A 64 行 × 128 B（8 KB）  |  B 128 行 × 128 B（16 KB）：消费者 0 ← 第 0–63 行，1 ← 第 64–127 行

template <int STAGES, int SCALES = SCALES_GLOBAL, int BN = 128>
__global__ void __launch_bounds__(384, 1)
fp8_gemm_blockwise_m64(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                       const TensorMap* __restrict__ map_a_scales, const float* __restrict__ a_scales,
                       const float* __restrict__ b_scales, u16* __restrict__ C, int M, int N, int K, int splits,
                       float* __restrict__ workspace, int* __restrict__ tile_counters, unsigned epoch)
{
    static_assert(BN == 128 || BN == 64 || BN == 32 || BN == 16, "BN divides B's 128-row scale tile; n = BN/2 ≥ 8");
    constexpr int BM = 64, REGS = BN / 4, A_BYTES = BM * FP8_BK, B_BYTES = BN * FP8_BK;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ int last_flag;
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const unsigned scale_base = b_base + STAGES * B_BYTES;  // STAGED, TMA: each stage's scales
                                                            // STAGED、TMA：每个流水级的缩放因子
    if (!start_roles<BN, STAGES, BM, SCALES>(map_a, map_b, map_a_scales, a_scales, b_scales, a_base, b_base,
                                             scale_base, full, empty, M, N, K, splits))
        return;
    const float* stage_scales = reinterpret_cast<const float*>(smem + (scale_base - smem_u32(smem)));

    const int thread = threadIdx.x % 128, cols = (threadIdx.x / 128 - 1) * (BN / 2);  // this consumer's columns
                                                                                      // 这个消费者的列
    const bool releaser = thread % 32 == 0;
    const int my_row = (thread / 32) * 16 + (thread % 32) / 4;  // in the tile; and my_row + 8
                                                                // 在分块中；以及 my_row + 8
    const int k_blocks = (K + FP8_BK - 1) / FP8_BK;
    int it = 0;
    for (int u = blockIdx.x; u < unit_count<BN, BM>(M, N, splits); u += gridDim.x) {
        const WorkUnit w = work_unit<BN, BM>(u, M, N, k_blocks, splits);
        const auto scales = scales_for<SCALES, BM>(a_scales, b_scales, stage_scales, w, M, k_blocks, my_row);
        float acc[REGS];
#pragma unroll
        for (int i = 0; i < REGS; ++i) acc[i] = 0.0f;
        overlapped_k_blocks<STAGES>(acc, w, it, scales, a_base, A_BYTES, b_base + cols * FP8_BK, B_BYTES, full,
                                    empty, releaser);
        if (splits == 1)
            store_tile_bf16(acc, 1.0f, C, M, N, w.m0, w.n0 + cols, thread);
        else
            finish_split_unit(acc, workspace, tile_counters, epoch, splits, w, C, M, N, w.m0, w.n0 + cols, thread,
                              &last_flag);
    }
}
