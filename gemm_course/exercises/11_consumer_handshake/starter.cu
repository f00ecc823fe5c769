// Level 11 — Hopper: wgmma, TMA, mbarriers, warp specialization, clusters. bf16 or fp16 in, fp32
// accumulation; C in fp32, or in the inputs' type (c_type = "input": bf16 or fp16, as cuBLAS writes it).
// Needs sm_90a (H100, H200, GH200): wgmma and setmaxnreg exist only there.
// 第 11 级：Hopper。wgmma、TMA、mbarrier、warp 特化（线程束专用化）、线程块簇。输入为 bf16 或
// fp16，fp32 累加；C 为 fp32，或与输入同类型（c_type = "input"：bf16 或 fp16，与 cuBLAS
// 的输出一致）。需要 sm_90a（H100、H200、GH200）：wgmma 和 setmaxnreg 只在那里才有。
//
// Six steps, each one measured row in the chapter (steps 3–4 share a kernel template, and so do 5–6):
// 共六步，每一步在本章中各有一行实测结果（第 3、4 步共用一个内核模板，第 5、6 步也是）：
//
//   step 1  hopper_wgmma_plain      one warpgroup (4 warps, 128 threads) per 64×128 tile of C.
//                                   All threads copy a k-tile into shared memory with 16-byte loads,
//                                   then the warpgroup issues wgmma (m64n128k16) on it, waits, repeats.
//   step 2  hopper_wgmma_tma        two warpgroups per 128×128 tile. One thread asks the TMA engine
//                                   (cp.async.bulk.tensor) for whole tiles; each copy completes on an
//                                   mbarrier of a STAGES-deep ring, so k-tiles kt+1 … arrive while
//                                   kt is multiplied.
//   step 3  hopper_wgmma_specialized producer/consumer warp specialization, 128×256 tiles: warpgroup
//                                   0 only issues TMA (and gives its registers away with setmaxnreg),
//                                   warpgroups 1–2 only issue wgmma (m64n256k16, 128 accumulators
//                                   each); "full" and "empty" mbarriers hand each stage back and forth.
//   step 4  …specialized, PERSISTENT one block per SM walks over tiles in an L2-friendly order; the
//                                   producer runs ahead into the next tile while the consumers store
//                                   C, and consumers keep one wgmma group in flight across k-tiles.
//   step 5  hopper_wgmma_clustered  clusters of 2 blocks whose tiles lie one above the other share each
//                                   k-tile of B: each producer copies its own A and multicasts one half
//                                   of B to both blocks (TMA multicast); a stage's "empty" barrier
//                                   completes on 16 arrivals, the consumer warps of both blocks; a
//                                   cluster barrier at the start and at the end. Persistent clusters:
//                                   as many as can be resident (cuOccupancyMaxActiveClusters).
//   step 6  …clustered, TMA_STORE   C leaves through shared memory: each consumer writes 64-row ×
//                                   128-byte swizzled pieces into 2 buffers, and one thread sends each
//                                   piece out with a TMA store under the next tile's wgmma; before a
//                                   buffer is reused, cp.async.bulk.wait_group.read says TMA has read it.
//   第 1 步  hopper_wgmma_plain      每个 64×128 的 C 分块一个线程束组（4 个线程束，128 个线程）。
//                                    所有线程用 16 字节加载把一个 k 分块拷贝到共享内存，然后线程束组
//                                    在其上发出 wgmma（m64n128k16），等待，重复。
//   第 2 步  hopper_wgmma_tma        每个 128×128 分块两个线程束组。由一个线程请 TMA 引擎
//                                    （cp.async.bulk.tensor）拷贝整个分块；每次拷贝在 STAGES 深的
//                                    mbarrier 环上完成，所以 k 分块 kt 相乘时，kt+1 … 已在到达。
//   第 3 步  hopper_wgmma_specialized 生产者/消费者 warp 特化，128×256 分块：线程束组 0 只发出 TMA
//                                    （并用 setmaxnreg 让出寄存器），线程束组 1–2 只发出 wgmma
//                                    （m64n256k16，各 128 个累加器）；“full” 和 “empty” 两组 mbarrier
//                                    把每个流水级来回交接。
//   第 4 步  …specialized, PERSISTENT 每个 SM 一个线程块，按对 L2 友好的顺序遍历各分块；消费者写回 C
//                                    时，生产者已经提前进入下一个分块，消费者跨 k 分块保持一组 wgmma
//                                    在执行途中。
//   第 5 步  hopper_wgmma_clustered  2 个线程块组成一个簇，它们的分块上下相邻，共用 B 的每个 k 分块：
//                                    每个生产者拷贝自己的 A，并把 B 的一半多播给两个线程块（TMA 多播）；
//                                    流水级的 “empty” 屏障要等 16 次 arrive（两个线程块的消费者线程束）
//                                    才完成；开头和结尾各有一次簇级屏障。持久化的簇：同时驻留得下多少
//                                    就启动多少（cuOccupancyMaxActiveClusters）。
//   第 6 步  …clustered, TMA_STORE   C 经由共享内存写出：每个消费者把 64 行 × 128 字节的重排块写入 2 个
//                                    缓冲区，由一个线程在下一个分块的 wgmma 期间用 TMA 存储把每块发出；
//                                    复用缓冲区之前，cp.async.bulk.wait_group.read 确认 TMA 已读完它。
//
// Shared-memory layout (all steps): the 128-byte swizzle that TMA writes and wgmma reads.
// 共享内存布局（所有步骤）：TMA 写入、wgmma 读取的 128 字节重排。
//
//   A stage, BM rows × 64 k (K-major)          B stage, 64 k × BN (MN-major), in 64-column chunks
//   row r: 128 B = 8 chunks of 16 B            chunk j: 64 rows (k) × 128 B (64 columns of n)
//   chunk c stored at position c ^ (r % 8)     16-byte piece c of row r at c ^ (r % 8)
//   A 的流水级，BM 行 × 64 k（K 主序）           B 的流水级，64 k × BN（MN 主序），按 64 列分块
//   第 r 行：128 B = 8 个 16 B 的块              第 j 块：64 行 (k) × 128 B（n 方向 64 列）
//   第 c 块存放在位置 c ^ (r % 8)                第 r 行的第 c 个 16 字节块存放在 c ^ (r % 8)
//
//        c: 0 1 2 3 4 5 6 7
//   r=0:    0 1 2 3 4 5 6 7
//   r=1:    1 0 3 2 5 4 7 6
//   r=2:    2 3 0 1 6 7 4 5
//   ...
//
// So the 8 rows that one 16-byte column of a core matrix spans sit in 8 different bank groups: no
// conflicts for either engine.
// 于是一个核心矩阵（core matrix）中 16 字节宽的一列所跨的 8 行落在 8 个不同的存储体组上：两种引擎
// 都没有冲突。
//
// wgmma finds its operand through a 64-bit descriptor: start address, swizzle mode, and two strides
//   A (K-major):  stride between 8-row groups = 1024 B; a k-step of 16 moves the start by 32 B.
//   B (MN-major): "leading" offset between 64-column chunks = 64 rows × 128 B = 8192 B; stride
//                 between 8-row (k) groups = 1024 B; a k-step of 16 moves the start by 16 rows = 2048 B.
// wgmma 通过一个 64 位描述符找到操作数：起始地址、重排模式和两个跨度
//   A（K 主序）： 8 行组之间的跨度 = 1024 B；k 每前进 16，起始地址移动 32 B。
//   B（MN 主序）：64 列块之间的 “leading” 偏移 = 64 行 × 128 B = 8192 B；8 行 (k) 组之间的
//                跨度 = 1024 B；k 每前进 16，起始地址移动 16 行 = 2048 B。
//
// Preconditions (the launcher checks them): K and N multiples of 8 and 16-byte aligned A, B, C
// (TMA needs 16-byte row strides; 16-byte loads need whole chunks). M is free. Past the edges TMA
// fills zeros (steps 2–6) and step 1 stores zero chunks; only elements inside C are written (step 6:
// TMA clips the pieces of C that stick out).
// 前提条件（启动器会检查）：K 和 N 是 8 的倍数，A、B、C 16 字节对齐（TMA 要求行跨度是 16
// 字节的倍数；16 字节加载要求块是完整的）。M 不受限制。越过边缘时 TMA 填 0（第 2–6 步），
// 第 1 步写入全 0 的块；只写 C 之内的元素（第 6 步：TMA 会裁掉 C 分块中伸出去的部分）。
#include "tma.cuh"
#include "wgmma.cuh"

typedef unsigned short u16;  // bf16 or fp16 bits: the kernels never do arithmetic on them
                             // bf16 或 fp16 的位模式：内核从不对它们做算术

// A: K-major, 8-row groups 1024 B apart. B: MN-major, 64-column chunks 8192 B apart.
// A：K 主序，8 行组相隔 1024 B。B：MN 主序，64 列块相隔 8192 B。
__device__ __forceinline__ unsigned long long desc_a(unsigned tile, int kk) { return smem_descriptor(tile + kk * 32, 16, 1024); }
__device__ __forceinline__ unsigned long long desc_b(unsigned tile, int kk) { return smem_descriptor(tile + kk * 2048, 8192, 1024); }

// The four k16 steps of one 64-deep k-tile, for the 64 rows of A that start at a_tile.
// 一个 64 深的 k 分块中的四个 k16 步，针对从 a_tile 开始的 64 行 A。
template <bool BF16, int REGS>
__device__ __forceinline__ void wgmma_k_tile(float (&d)[REGS], unsigned a_tile, unsigned b_tile, bool first)
{
#pragma unroll
    for (int kk = 0; kk < HOPPER_BK / 16; ++kk)
        wgmma_m64k16<BF16>(d, desc_a(a_tile, kk), desc_b(b_tile, kk), (first && kk == 0) ? 0 : 1);
}

// Two neighbouring elements of C: as a float2 for fp32 C, or rounded (to nearest even) into one
// 32-bit word of two bf16 or fp16 values when C has the inputs' type (c_type = "input").
// C 中相邻的两个元素：C 为 fp32 时写成一个 float2；C 与输入同类型时（c_type = "input"），
// 舍入（就近取偶）成两个 bf16 或 fp16 值，拼成一个 32 位字。
template <bool BF16>
__device__ __forceinline__ void store_pair(float* p, float x, float y) { *reinterpret_cast<float2*>(p) = make_float2(x, y); }
template <bool BF16>
__device__ __forceinline__ void store_pair(u16* p, float x, float y)
{
    unsigned packed;  // cvt packs its first source into the upper half: y, then x
                      // cvt 把第一个源操作数放进高半部分：先 y 后 x
    if constexpr (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(y), "f"(x));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(y), "f"(x));
    *reinterpret_cast<unsigned*>(p) = packed;
}

// The accumulator layout of wgmma m64nN: warp w of the warpgroup holds rows 16w + lane/4 and +8,
// columns 8j + 2·(lane%4) + {0, 1} for j < N/8 — pairs of values, written together.
// wgmma m64nN 的累加器布局：线程束组中的线程束 w 持有第 16w + lane/4 行和第 16w + lane/4 + 8 行，j
// < N/8 时的第 8j + 2·(lane%4) + {0, 1} 列——成对的值，一起写出。
template <bool BF16, int REGS, typename OutT>
__device__ __forceinline__ void store_tile(const float (&d)[REGS], OutT* C, int M, int N, int m0, int n0, int thread)
{
    const int row = m0 + (thread / 32) * 16 + (thread % 32) / 4;
    const int col = n0 + (thread % 4) * 2;
#pragma unroll
    for (int j = 0; j < REGS / 4; ++j) {
        const int c = col + 8 * j;
        if (c >= N) continue;  // N is a multiple of 8 and c is even: c + 1 < N too
                               // N 是 8 的倍数且 c 为偶数：c + 1 < N 也成立
        if (row < M) store_pair<BF16>(C + (size_t)row * N + c, d[4 * j], d[4 * j + 1]);
        if (row + 8 < M) store_pair<BF16>(C + (size_t)(row + 8) * N + c, d[4 * j + 2], d[4 * j + 3]);
    }
}

// (Steps 1 and 2 are in the level's file; this copy keeps step 3, the warp-specialized kernel.)
// （第 1、2 步在本级的文件里；这份代码保留第 3 步，即 warp 特化的内核。）

// ---- exercise: the consumers' index math of the ring ------------------------------------------------
// `it` counts the k-tiles a consumer has taken from the ring so far, over all its tiles of C (the
// producer counts the same way). stage_of(it, stages) is the stage that k-tile `it` sits in;
// full_parity(it, stages) the parity a consumer waits for on full[stage_of(it, stages)] before it
// reads that stage. (full[s] and empty[s] start in phase 0; every completed phase flips the parity.)
// ---- 练习：消费者对环的下标计算 ----------------------------------------------------------------
// `it` 计数一个消费者到目前为止从环中取走的 k 分块，跨它负责的所有 C 分块累计（生产者也这样计数）。
// stage_of(it, stages) 是第 `it` 个 k 分块所在的流水级；full_parity(it, stages)
// 是消费者读取该流水级之前，在 full[stage_of(it, stages)] 上等待的相位奇偶（parity）。（full[s] 和
// empty[s] 从相位 0 开始；每完成一个相位，奇偶就翻转一次。）
__device__ __forceinline__ int stage_of(int it, int stages)
{
    return 0;
}

__device__ __forceinline__ int full_parity(int it, int stages)
{
    return 0;
}
// ---- end of the exercise ------------------------------------------------------------------------
// ---- 练习结束 -----------------------------------------------------------------------------------

// --- steps 3 and 4: a producer warpgroup and two consumer warpgroups ----------------------------------
// --- 第 3、4 步：一个生产者线程束组和两个消费者线程束组 ----------------------------------------
//
//   warpgroup 0 (producer, 40 registers)      warpgroups 1, 2 (consumers, 232 registers)
//   ─ wait empty[s] ─ TMA A, B into s ─┐       ┌─ wait full[s] ─ wgmma × 4 ─ arrive empty[s] ─
//                                     full[s] ──┘
//
// Each consumer owns 64 rows of the 128 × 256 tile: 128 fp32 accumulators per thread.
// 每个消费者负责 128 × 256 分块中的 64 行：每个线程 128 个 fp32 累加器。

template <bool BF16, int STAGES, bool PERSISTENT, typename OutT = float>
__global__ void __launch_bounds__(384, 1)
hopper_wgmma_specialized(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                         OutT* __restrict__ C, int M, int N, int K)
{
    constexpr int BM = 128, BN = 256, A_BYTES = BM * HOPPER_BK * 2, B_BYTES = BN * HOPPER_BK * 2;
    constexpr int CONSUMER_WARPS = 8;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const int tid = threadIdx.x, wg = tid / 128;
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const int tiles_k = (K + HOPPER_BK - 1) / HOPPER_BK;
    const int first = blockIdx.x, step = PERSISTENT ? gridDim.x : tiles;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), 1);                // the producer's expect_tx
                                                             // 生产者的 expect_tx
            mbar_init(smem_u32(&empty[s]), CONSUMER_WARPS);  // one arrival per consumer warp
                                                             // 每个消费者线程束 arrive 一次
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {  // producer
                    // 生产者
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid != 0) return;
        int it = 0;  // k-tiles issued so far, over all tiles: position in the ring and its phase
                     // 到目前为止发出的 k 分块数，跨所有分块累计：它在环中的位置及其相位
        for (int t = first; t < tiles; t += step) {
            int m0, n0;
            tile_origin<BM, BN>(t, M, N, m0, n0);
            for (int kt = 0; kt < tiles_k; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(smem_u32(&empty[s]), (it / STAGES + 1) % 2);  // first round: passes at once
                                                                        // 第一轮：直接通过
                tma_load_k_tile<BM, BN>(map_a, map_b, a_base + s * A_BYTES, b_base + s * B_BYTES, m0, n0,
                                        kt * HOPPER_BK, smem_u32(&full[s]));
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int thread = tid % 128, rows = (wg - 1) * 64;  // this consumer's rows of the tile
                                                         // 本消费者在分块中负责的行
    const bool releaser = thread % 32 == 0;
    int it = 0;
    for (int t = first; t < tiles; t += step) {
        int m0, n0;
        tile_origin<BM, BN>(t, M, N, m0, n0);
        float d[BN / 2];
        for (int kt = 0; kt < tiles_k; ++kt, ++it) {
            // ---- exercise: consume k-tile `it` of the ring (step 3; step 4's overlap is in the level's file) ----
            // ---- 练习：消费环中的第 `it` 个 k 分块（第 3 步；第 4 步的重叠在本级的文件里）----

            // ---- end of the exercise -----------------------------------------------------------------
            // ---- 练习结束 ----------------------------------------------------------------------------
        }
        pin(d);
        store_tile<BF16>(d, C, M, N, m0 + rows, n0, thread);
    }
}
