// Level 11 — Hopper: wgmma, TMA, mbarriers, warp specialization, clusters. bf16 or fp16 in, fp32
// accumulation; C in fp32, or in the inputs' type (c_type = "input": bf16 or fp16, as cuBLAS writes it).
// Needs sm_90a (H100, H200, GH200): wgmma and setmaxnreg exist only there.
// 第 11 级：Hopper。wgmma、TMA、mbarrier、warp 特化（线程束专用化）、线程块簇。输入为 bf16 或
// fp16，fp32 累加；C 为 fp32，或与输入同类型（c_type = "input"：bf16 或 fp16，与 cuBLAS
// 的输出一致）。需要 sm_90a（H100、H200、GH200）：wgmma 和 setmaxnreg 只在那里才有。
//
// Seven steps, each one measured row in the chapter (steps 3–4 share a kernel template, and so do 5–7):
// 共七步，每一步在本章中各有一行实测结果（第 3、4 步共用一个内核模板，第 5–7 步也是）：
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
//   step 7  hopper_wgmma_streamk    step 6, and stream-K for the last rounds: when the pairs of tiles do
//                                   not divide evenly among the clusters, the last one or two rounds'
//                                   k-tiles are dealt out evenly instead, so no cluster idles through a
//                                   last, partly empty round; a pair whose k-tiles two or more clusters
//                                   share is summed through a workspace in global memory (a "fixup").
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
//   第 7 步  hopper_wgmma_streamk    第 6 步，再加上最后几轮的 stream-K：各对分块不能在簇之间均分时，
//                                    最后一两轮改为把 k 分块平均分给各簇，这样没有哪个簇要在最后那一轮
//                                    半空着等待；由两个或更多簇分担其 k 分块的分块对，经由全局内存中的
//                                    工作区求和（“fixup”）。
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
//        c: 0 1 2 3 4 5 6 7                       so the 8 rows that one 16-byte column of a
//   r=0:    0 1 2 3 4 5 6 7                       core matrix spans sit in 8 different bank
//   r=1:    1 0 3 2 5 4 7 6                       groups: no conflicts for either engine.
//   r=2:    2 3 0 1 6 7 4 5
//   ...
//        c: 0 1 2 3 4 5 6 7                       于是一个核心矩阵中 16 字节宽的一列
//   r=0:    0 1 2 3 4 5 6 7                       所跨的 8 行落在 8 个不同的存储体组
//   r=1:    1 0 3 2 5 4 7 6                       上：两种引擎都没有冲突。
//   r=2:    2 3 0 1 6 7 4 5                       （r 为行号，c 为块号）
//   ...     （以此类推）
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

// --- step 1: wgmma on tiles that every thread copies in ---------------------------------------------
// --- 第 1 步：对每个线程都参与拷贝的分块执行 wgmma ------------------------------------------------

template <bool BF16, typename OutT = float>
__global__ void __launch_bounds__(128)
hopper_wgmma_plain(const u16* __restrict__ A, const u16* __restrict__ B, OutT* __restrict__ C, int M, int N, int K)
{
    constexpr int BM = 64, BN = 128;
    __shared__ __align__(1024) uint4 a_tile[BM * 8];           // 64 rows × 8 chunks = 8 KB
                                                               // 64 行 × 8 块 = 8 KB
    __shared__ __align__(1024) uint4 b_tile[HOPPER_BK * 16];   // 2 chunks × 64 rows × 8 = 16 KB
                                                               // 2 块 × 64 行 × 8 = 16 KB
    const int tid = threadIdx.x, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    float d[BN / 2] = {};

    for (int k0 = 0; k0 < K; k0 += HOPPER_BK) {
#pragma unroll
        for (int i = 0; i < BM * 8 / 128; ++i) {  // A: row r, chunk c (8 values of k)
                                                  // A：第 r 行，第 c 块（8 个 k 值）
            const int e = tid + i * 128, r = e / 8, c = e % 8;
            const bool ok = m0 + r < M && k0 + c * 8 < K;
            a_tile[r * 8 + (c ^ (r % 8))] = ok ? *reinterpret_cast<const uint4*>(A + (size_t)(m0 + r) * K + k0 + c * 8) : zero;
        }
#pragma unroll
        for (int i = 0; i < HOPPER_BK * 16 / 128; ++i) {  // B: row r (k), chunk c (8 values of n)
                                                          // B：第 r 行 (k)，第 c 块（8 个 n 值）
            const int e = tid + i * 128, r = e / 16, c = e % 16;
            const bool ok = k0 + r < K && n0 + c * 8 < N;
            b_tile[(c / 8) * 512 + r * 8 + ((c % 8) ^ (r % 8))] =
                ok ? *reinterpret_cast<const uint4*>(B + (size_t)(k0 + r) * N + n0 + c * 8) : zero;
        }
        // Ordinary stores, read next by the tensor cores (the async proxy): fence, then barrier.
        // 普通的写入，接下来由张量核心（异步代理）读取：先栅栏，再屏障。
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        wgmma_fence();
        wgmma_k_tile<BF16>(d, smem_u32(a_tile), smem_u32(b_tile), k0 == 0);
        wgmma_commit();
        wgmma_wait<0>();
        pin(d);
        __syncthreads();  // everyone's wgmma has read the tiles before they are overwritten
                          // 所有线程的 wgmma 都读完这些分块之后才能覆盖它们
    }
    store_tile<BF16>(d, C, M, N, m0, n0, tid);
}

// --- step 2: TMA into a ring of STAGES buffers, completing on mbarriers ------------------------------
// --- 第 2 步：TMA 写入 STAGES 个缓冲区组成的环，在 mbarrier 上完成 --------------------------------

template <bool BF16, int STAGES, typename OutT = float>
__global__ void __launch_bounds__(256)
hopper_wgmma_tma(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b, OutT* __restrict__ C,
                 int M, int N, int K)
{
    constexpr int BM = 128, BN = 128, A_BYTES = BM * HOPPER_BK * 2, B_BYTES = BN * HOPPER_BK * 2;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const int tid = threadIdx.x, wg = tid / 128;
    int m0, n0;
    tile_origin<BM, BN>(blockIdx.x, M, N, m0, n0);
    const int tiles_k = (K + HOPPER_BK - 1) / HOPPER_BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) mbar_init(smem_u32(&full[s]), 1);
        fence_barrier_init();
        for (int s = 0; s < STAGES && s < tiles_k; ++s)
            tma_load_k_tile<BM, BN>(map_a, map_b, a_base + s * A_BYTES, b_base + s * B_BYTES, m0, n0,
                                    s * HOPPER_BK, smem_u32(&full[s]));
    }
    __syncthreads();

    float d[BN / 2] = {};
    for (int kt = 0; kt < tiles_k; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(smem_u32(&full[s]), (kt / STAGES) % 2);  // the phase flips each time round the ring
                                                           // 每绕环一圈，阶段的奇偶性翻转一次
        wgmma_fence();
        wgmma_k_tile<BF16>(d, a_base + s * A_BYTES + wg * (64 * 128), b_base + s * B_BYTES, kt == 0);
        wgmma_commit();
        wgmma_wait<0>();
        pin(d);
        __syncthreads();  // both warpgroups are done with stage s: refill it
                          // 两个线程束组都已用完流水级 s：重新填充它
        if (tid == 0 && kt + STAGES < tiles_k)
            tma_load_k_tile<BM, BN>(map_a, map_b, a_base + s * A_BYTES, b_base + s * B_BYTES, m0, n0,
                                    (kt + STAGES) * HOPPER_BK, smem_u32(&full[s]));
    }
    store_tile<BF16>(d, C, M, N, m0 + wg * 64, n0, tid % 128);
}

// --- steps 3 and 4: a producer warpgroup and two consumer warpgroups ----------------------------------
// --- 第 3、4 步：一个生产者线程束组和两个消费者线程束组 ----------------------------------------
//
//   warpgroup 0 (producer, 40 registers)      warpgroups 1, 2 (consumers, 232 registers)
//   ─ wait empty[s] ─ TMA A, B into s ─┐       ┌─ wait full[s] ─ wgmma × 4 ─ arrive empty[s] ─
//                                     full[s] ──┘
//   Each consumer owns 64 rows of the 128 × 256 tile: 128 fp32 accumulators per thread.

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
        float d[BN / 2] = {};  // zeroed: the first wgmma ignores d (scale-d = 0), but its asm reads it ("+f")
                               // 清零：第一条 wgmma 忽略 d（scale-d = 0），但它的 asm 会读取 d（"+f"）
        for (int kt = 0; kt < tiles_k; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(smem_u32(&full[s]), (it / STAGES) % 2);
            wgmma_fence();
            wgmma_k_tile<BF16>(d, a_base + s * A_BYTES + rows * 128, b_base + s * B_BYTES, kt == 0);
            wgmma_commit();
            if (PERSISTENT) {  // keep this k-tile's wgmma running; release the previous k-tile's stage
                               // 让这个 k 分块的 wgmma 继续执行；释放上一个 k 分块的流水级
                wgmma_wait<1>();
                if (kt > 0 && releaser) mbar_arrive(smem_u32(&empty[(it - 1) % STAGES]));
            } else {
                wgmma_wait<0>();
                if (releaser) mbar_arrive(smem_u32(&empty[s]));
            }
        }
        if (PERSISTENT) {
            wgmma_wait<0>();
            if (releaser) mbar_arrive(smem_u32(&empty[(it - 1) % STAGES]));
        }
        pin(d);
        store_tile<BF16>(d, C, M, N, m0 + rows, n0, thread);
    }
}

// --- step 5: clusters of two blocks share each k-tile of B through TMA multicast -----------------------
// --- 第 5 步：两个线程块组成的簇通过 TMA 多播共用 B 的每个 k 分块 ---------------------------------
//
// Step 4 at 128×256 tiles reads, per k-tile, 16 KB of A and 32 KB of B from L2 into each SM: two
// thirds of its L2 traffic is B. Two blocks whose tiles sit one above the other (rows m0 and
// m0 + 128, the same columns n0) need the same k-tile of B. Hopper can launch them as a *cluster*
// (both on one GPC, each able to reach the other's shared memory), and one TMA copy can then land
// in both blocks' shared memory at once (multicast). Each block's producer copies its own A and
// one half of B (two of the four 64-column boxes) to both blocks:
// 第 4 步用 128×256 的分块时，每个 k 分块要从 L2 向每个 SM 读取 16 KB 的 A 和 32 KB 的 B：它的 L2 流
// 量有三分之二是 B。分块上下相邻的两个线程块（行 m0 和 m0 + 128，列 n0 相同）需要 B 的同一个 k 分块。
// Hopper 可以把它们作为一个*簇*（cluster）启动（两者位于同一个 GPC，各自都能访问对方的共享内存），这
// 样一次 TMA 拷贝就能同时写进两个线程块的共享内存（多播）。每个线程块的生产者拷贝自己的 A，并把 B 的
// 一半（四个 64 列 box 中的两个）拷贝给两个线程块：
//
//      block rank 0                      block rank 1
//      A rows m0 … m0+127                A rows m0+128 … m0+255          (each: its own copy)
//      B boxes 0, 1  ──multicast──▶ both  B boxes 2, 3  ──multicast──▶ both
//
// so each SM asks L2 for 16 KB + 16 KB per k-tile instead of 16 + 32. The price is coordination:
// a producer may refill stage s only when the consumers of BOTH blocks have finished with it (its
// copy of B lands in both), so every consumer warp arrives on the "empty" barrier of its own block
// and on the peer's (16 arrivals complete a phase), and the "full" barrier of each block counts the
// bytes of A and of all four B boxes, whichever block's TMA delivered them. Both blocks walk the
// same pairs of tiles in the same order; a block whose tile lies wholly below M still copies its half
// of B (its peer needs it) and computes on stale A, and its stores are all masked. Neither block may
// exit while the other can still reach its shared memory: both meet at a cluster barrier at the end.
// 于是每个 SM 每个 k 分块向 L2 请求 16 KB + 16 KB，而不是 16 + 32。代价是协调：只有两个线程块的消费者都用
// 完流水级 s 之后，生产者才能重新填充它（它拷贝的 B 会落在两个线程块中），所以每个消费者线程束既在本线程
// 块的 "empty" 屏障上、也在对方线程块的 "empty" 屏障上执行 arrive（16 次 arrive 完成一个阶段），而每个线
// 程块的 "full" 屏障统计 A 和全部四个 B box 的字节数，不论是哪个线程块的 TMA 送来的。两个线程块按相同顺序
// 遍历相同的分块对；分块完全位于 M 之下的线程块仍然拷贝它那一半 B（对方需要），并在过时的 A 上计算，它的
// 写回全部被屏蔽。只要对方还能访问自己的共享内存，哪个线程块都不能退出：两者在结尾的簇级屏障处会合。

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// Every thread of both blocks: what happened before (barrier init, shared-memory use) is visible after.
// 两个线程块的每个线程：之前发生的事（屏障初始化、共享内存的使用）在之后都可见。
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// The address of the same shared-memory variable in block `rank` of the cluster.
// 簇中第 `rank` 个线程块里同一个共享内存变量的地址。
__device__ __forceinline__ unsigned cluster_address(unsigned address, unsigned rank)
{
    unsigned out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(address), "r"(rank));
    return out;
}

// Arrive on an mbarrier of any block in the cluster. Only the arrival itself must reach the other
// block: the consumer read the stage through wgmma, whose completion (wgmma_wait) already ordered
// those reads, so no memory needs to be published with it. Asking for more, with
// "mbarrier.arrive.release.cluster" (RELEASE_CLUSTER, kept as the experiment arrive_scope =
// "cluster"), makes every arrival a cluster-wide memory fence; the chapter measures what that costs.
// 在簇中任意线程块的 mbarrier 上执行 arrive。只有 arrive 本身必须到达另一个线程块：消费者是通过 wgmma 读
// 取流水级的，wgmma 的完成（wgmma_wait）已经给这些读取排好了顺序，所以不需要随它发布任何内存。要求更多，
// 即用 "mbarrier.arrive.release.cluster"（RELEASE_CLUSTER，保留为实验设置 arrive_scope = "cluster"），会
// 让每次 arrive 都成为簇范围的内存栅栏；本章测量了它的代价。
template <bool RELEASE_CLUSTER>
__device__ __forceinline__ void mbar_arrive_remote(unsigned cluster_bar)
{
    if constexpr (RELEASE_CLUSTER)
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" :: "r"(cluster_bar) : "memory");
    else
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" :: "r"(cluster_bar) : "memory");
}

// One TMA box into the same shared-memory offset of every block in `blocks` (a bit mask of ranks);
// each destination block's barrier at `bar`'s offset counts the bytes it receives.
// 一个 TMA box 写入 `blocks`（各 rank 的位掩码）中每个线程块里相同的共享内存偏移；每个目标线程块中位于
// `bar` 偏移处的屏障统计它收到的字节数。
__device__ __forceinline__ void tma_load_multicast(unsigned dst, const TensorMap* map, int inner, int outer,
                                                   unsigned bar, unsigned short blocks)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(dst), "l"(map), "r"(inner), "r"(outer), "r"(bar), "h"(blocks) : "memory");
}

// --- step 6: the epilogue leaves through shared memory and a TMA store --------------------------------
// --- 第 6 步：尾处理（epilogue）经由共享内存和 TMA 存储写出 -----------------------------------------
//
// In steps 4 and 5 the consumers write C from registers with ordinary stores, and the tensor cores
// wait until every store of a tile has been issued: 64 KB (fp32) or 32 KB (bf16) per consumer, at
// the SM's share of the memory system's bandwidth. Step 6 instead writes each 64-row × 128-byte
// piece of its 64 rows of C into shared memory (fast: the SM's own memory), and one thread asks the
// TMA engine to copy that piece to global memory. The copy runs on its own while the consumers go on
// to the next tile's wgmma. Two buffers per consumer let piece q+1 be written while piece q is still
// being copied out; before a buffer is reused, its thread waits until the TMA engine has read it
// (cp.async.bulk.wait_group.read). The pieces use the 128-byte swizzle, like A and B, so the
// consumers' writes (8 rows × 16 bytes per warp instruction) land in 8 different bank groups, and
// TMA clips the parts of a piece that fall outside C.
// 在第 4、5 步中，消费者用普通的存储指令把 C 从寄存器写出，张量核心要等一个分块的所有存储都发出之后才能
// 继续：每个消费者 64 KB（fp32）或 32 KB（bf16），速度受限于这个 SM 在内存系统带宽中的份额。第 6 步则把
// 它那 64 行 C 按 64 行 × 128 字节一块写入共享内存（很快：是 SM 自己的存储），再由一个线程请 TMA 引擎把
// 这一块拷贝到全局内存。拷贝自行进行，消费者同时继续下一个分块的 wgmma。每个消费者两个缓冲区，第 q 块还
// 在拷出时就能写第 q+1 块；复用一个缓冲区之前，它的线程要等 TMA 引擎读完它
// （cp.async.bulk.wait_group.read）。这些块与 A 和 B 一样采用 128 字节重排，所以消费者的写入（每条线程束
// 指令 8 行 × 16 字节）落在 8 个不同的存储体组上，而一块中落在 C 之外的部分由 TMA 裁掉。
//
//   registers ──st.shared──▶ buffer q%2 ──TMA store (async)──▶ C in global memory
//                 (consumer warpgroup, then a named barrier of its 128 threads)

constexpr int C_PIECE_BYTES = 64 * 128;  // 64 rows × 128 bytes: one TMA box of C
                                         // 64 行 × 128 字节：C 的一个 TMA box

// The named barrier of one consumer warpgroup (ids 1 and 2; 0 is __syncthreads).
// 一个消费者线程束组的具名屏障（id 为 1 和 2；0 是 __syncthreads）。
__device__ __forceinline__ void warpgroup_barrier(int consumer)
{
    asm volatile("bar.sync %0, 128;\n" :: "r"(consumer + 1) : "memory");
}

__device__ __forceinline__ void tma_store(const TensorMap* map, unsigned src, int inner, int outer)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 :: "l"(map), "r"(inner), "r"(outer), "r"(src) : "memory");
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// This consumer's 64 × 256 accumulators → C, one 64 × (128 / sizeof(OutT)) piece at a time.
// `pieces` counts the pieces this consumer has stored so far (over all tiles): it picks the buffer,
// and each stored piece is one committed group, which is what the wait before reuse counts on. A
// piece wholly outside C is skipped entirely (the test is the same for all 128 threads).
// 这个消费者的 64 × 256 个累加器 → C，每次一块 64 × (128 / sizeof(OutT))。`pieces` 记录这个消费者到目前
// 为止（所有分块合计）已写出的块数：它决定使用哪个缓冲区，而每写出一块就是一个已提交的组，复用前的等待
// 数的正是这些组。完全位于 C 之外的块整个跳过（对全部 128 个线程，这个判断结果都相同）。
template <bool BF16, typename OutT>
__device__ __forceinline__ void store_tile_tma(const float (&d)[128], unsigned char* buffers, unsigned buffers_u32,
                                               const TensorMap* map_c, int M, int N, int m0, int n0, int thread,
                                               int consumer, int& pieces)
{
    constexpr int PIECE_COLS = 128 / sizeof(OutT), J_PER_PIECE = PIECE_COLS / 8;  // j: 8 columns of d
                                                                                  // j：d 的 8 列
    const int row = (thread / 32) * 16 + (thread % 32) / 4;  // and row + 8
                                                             // 以及 row + 8
    const int byte_in_16 = (2 * (thread % 4) * sizeof(OutT)) % 16;
#pragma unroll
    for (int q = 0; q < 256 / PIECE_COLS; ++q) {
        if (m0 >= M || n0 + q * PIECE_COLS >= N) continue;
        const int b = pieces++ % 2;
        if (thread == 0) asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");  // buffer b was read
                                                                                           // 缓冲区 b 已被读完
        warpgroup_barrier(consumer);
        unsigned char* piece = buffers + b * C_PIECE_BYTES;
#pragma unroll
        for (int jj = 0; jj < J_PER_PIECE; ++jj) {
            const int j = q * J_PER_PIECE + jj;
            const int chunk = (8 * jj + 2 * (thread % 4)) * sizeof(OutT) / 16;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row + 8 * h;
                store_pair<BF16>(reinterpret_cast<OutT*>(piece + r * 128 + ((chunk ^ (r % 8)) << 4) + byte_in_16),
                                 d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
            }
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // visible to the TMA engine
                                                                        // 让 TMA 引擎能看到
        warpgroup_barrier(consumer);
        if (thread == 0)  // TMA clips the part of the piece that lies outside C
                          // TMA 裁掉这一块中落在 C 之外的部分
            tma_store(map_c, buffers_u32 + b * C_PIECE_BYTES, n0 + q * PIECE_COLS, m0);
    }
}

// --- step 7: stream-K, the last rounds' k-tiles dealt out evenly -----------------------------------
// --- 第 7 步：stream-K，把最后几轮的 k 分块平均分配 ------------------------------------------------
//
// Steps 4–6 hand out whole tiles (step 5 on: pairs of tiles, one per cluster). At 4096³ that is 256
// pairs for 66 clusters: three full rounds and a fourth in which 58 clusters work and 8 wait. Stream-K
// (Osama et al., 2023) counts the work in k-tiles instead: a pair at K = 4096 is 64 of them. The
// first rounds stay whole pairs, as before; the k-tiles of the rest (here 124 pairs × 64: the last
// round and one full round before it, so that each share is longer than one pair) are cut into one
// contiguous, equal share per cluster:
// 第 4–6 步按整个分块分配工作（从第 5 步起是分块对，每个簇一对）。4096³ 时是 66 个簇分 256 对：三个完整的
// 轮次，再加第四轮，其中 58 个簇在工作、8 个在等待。Stream-K（Osama et al., 2023）改用 k 分块来计量工作：K
// = 4096 时一对分块是 64 个 k 分块。前面几轮和以前一样仍按整对分配；其余部分的 k 分块（这里是 124 对 × 64：
// 最后一轮，加上它之前的一整轮，使每一份都长于一对）切成每个簇一份、连续且相等：
//
//      cluster c:   pairs c, c+66 (whole)   |   its share of the k-tiles of pairs 132 … 255
//                                               ── 120 or 121 k-tiles, which may start or end mid-pair
//
// A pair whose k-tiles two or more clusters hold is summed through a workspace (a "fixup"). Each
// consumer warpgroup does it for its own 64 rows, so every counter and workspace slot below is per
// (block rank, consumer). The cluster holding the pair's k-tile 0 (the "head") reaches that part
// last, at the end of its share; the others hold later k-tiles, at the start of theirs. So:
// 由两个或更多簇分担其 k 分块的分块对，经由工作区求和（“fixup”）。每个消费者线程束组处理自己的 64 行，
// 所以下面的每个计数器和工作区槽位都按（线程块 rank、消费者）各有一份。持有这对分块的 k 分块 0 的簇
// （“head”）最后才到达这一部分，即在它那一份的末尾；其他簇持有后面的 k 分块，在它们那一份的开头。所以：
//
//   a later part's cluster   writes its partial sums to its slot, then adds 1 to the pair's counter;
//   the head                 reads the counter: if every later part has arrived, it adds their slots
//                            to its registers and stores C; if not (a cluster started late), it
//                            writes its own partial sums too and adds 1 as well.
//   后面部分所在的簇         把部分和写入自己的槽位，然后给这对分块的计数器加 1；
//   head                     读取计数器：如果后面各部分都已到达，就把它们的槽位加到自己的寄存器上并写出
//                            C；如果没有（某个簇启动得晚），它也写出自己的部分和，并同样加 1。
//
// Whoever's 1 completes the count is the fixer: it sums the parts in k order (head, then the later
// clusters), so C is the same bit for bit whichever cluster finished last. The counters carry the
// launch's epoch (arrive_epoch, tma.cuh): a count another launch left, even one cut short, reads as
// zero, so nobody sets them back. Nobody waits for anybody, so the schedule cannot deadlock even when
// some clusters start only after others have finished.
// 谁的那个 1 让计数凑齐，谁就负责 fixup：它按 k 的顺序（先 head，再后面各簇）累加各部分，所以不论哪个簇最
// 后完成，C 都逐位相同。计数器带有本次启动的 epoch（arrive_epoch，tma.cuh）：另一次启动留下的计数，即使那
// 次启动被中途打断，读出来也是 0，所以没有人需要把它们清零。谁也不等谁，所以即使有些簇在别的簇完成之后才
// 启动，这个调度也不会死锁。

struct Segment { int pair, kb, ke; };  // k-tiles kb ≤ kt < ke of one pair
                                       // 一对分块中 kb ≤ kt < ke 的 k 分块

// The segments of one cluster, in the order both its blocks, producer and consumers alike, walk them.
// Unit u = pair · tiles_k + k-tile; the stream-K part starts at the unit sk_base.
// 一个簇的各个段，按它的两个线程块（生产者和消费者都一样）遍历它们的顺序排列。单元 u = pair · tiles_k + k
// 分块；stream-K 部分从单元 sk_base 开始。
struct ClusterWork {
    int tiles_k, cluster, clusters, dp_pairs, next_pair;
    long long sk_base, sk_units, unit, unit_end;

    __device__ ClusterWork(int pairs, int tiles_k_, int cluster_, int clusters_, bool stream_k)
        : tiles_k(tiles_k_), cluster(cluster_), clusters(clusters_), next_pair(cluster_)
    {
        // Whole pairs for all but the last two rounds (or the last one, if there is only one). All of them
        // when an even share would be no shorter than those rounds of whole pairs (they divide evenly, say),
        // or when the rest has fewer k-tiles than there are clusters: every share then holds at least one
        // k-tile, so each cluster between a pair's head and its last part has a part of it (the count the
        // fixup waits for).
        // 除最后两轮（只有一轮时为最后一轮）之外都按整对分配。以下情况全部按整对分配：平均的一份不会比这些整对的
        // 轮次更短时（例如它们正好能均分），或者剩余部分的 k 分块比簇还少时：这时每一份至少有一个 k 分块，所以在
        // 一对分块的 head 和它的最后一部分之间的每个簇都持有其中一部分（fixup 等待的正是这个计数）。
        dp_pairs = pairs;
        const int whole = max(pairs / clusters - 1, 0) * clusters;
        const long long rest = (long long)(pairs - whole) * tiles_k, share = (rest + clusters - 1) / clusters;
        const long long rounds_of_rest = (pairs - whole + clusters - 1) / clusters;
        if (stream_k && rest >= clusters && share < rounds_of_rest * tiles_k) dp_pairs = whole;
        sk_base = (long long)dp_pairs * tiles_k;
        sk_units = (long long)(pairs - dp_pairs) * tiles_k;
        unit = sk_base + cluster * sk_units / clusters;
        unit_end = sk_base + (cluster + 1) * sk_units / clusters;
    }

    __device__ bool next(Segment& s)
    {
        if (next_pair < dp_pairs) {
            s = {next_pair, 0, tiles_k};
            next_pair += clusters;
            return true;
        }
        if (unit >= unit_end) return false;
        s.pair = (int)(unit / tiles_k);
        s.kb = (int)(unit % tiles_k);
        s.ke = (int)min((long long)tiles_k, s.kb + (unit_end - unit));
        unit += s.ke - s.kb;
        return true;
    }

    // The cluster whose share holds stream-K unit u: the largest c with c · sk_units / clusters ≤ u - sk_base.
    // 其份额包含 stream-K 单元 u 的簇：满足 c · sk_units / clusters ≤ u - sk_base 的最大 c。
    __device__ int holder(long long u) const { return (int)(((u - sk_base + 1) * clusters - 1) / sk_units); }
};

constexpr int PARTIAL_FLOATS = 64 * 256;  // one consumer's 64 rows × 256 columns of fp32 partial sums
                                          // 一个消费者的 64 行 × 256 列 fp32 部分和

// A slot of the workspace: role 0 holds a cluster's first part (it starts after k-tile 0), role 1 a
// head's part written because the count was not complete. One per (cluster, role, rank, consumer).
// 工作区的一个槽位：角色 0 存放一个簇的第一部分（它从 k 分块 0 之后开始），角色 1 存放 head 因计数未凑
// 齐而写出的部分。每个（簇、角色、rank、消费者）一个。
__device__ __forceinline__ float* partial_slot(float* workspace, int cluster, int role, int rank, int consumer)
{
    return workspace + ((((size_t)cluster * 2 + role) * 2 + rank) * 2 + consumer) * PARTIAL_FLOATS;
}

// Partial sums in register order, 16 bytes per thread side by side: each instruction of the warpgroup
// moves 2 KB of consecutive memory, and the reader, the same thread of another cluster, finds its own.
// 部分和按寄存器顺序存放，每个线程 16 字节，依次相邻：线程束组的每条指令传输 2 KB 连续内存，而读取方，即另
// 一个簇中的同一个线程，找到的正是自己那部分。
template <int REGS>
__device__ __forceinline__ void write_partial(const float (&d)[REGS], float* slot, int thread)
{
    float4* out = reinterpret_cast<float4*>(slot) + thread;
#pragma unroll
    for (int i = 0; i < REGS / 4; ++i) out[i * 128] = make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]);
}

template <int REGS, bool ADD>
__device__ __forceinline__ void read_partial(float (&d)[REGS], const float* slot, int thread)
{
    const float4* in = reinterpret_cast<const float4*>(slot) + thread;
#pragma unroll
    for (int i = 0; i < REGS / 4; ++i) {
        const float4 v = in[i * 128];
        d[4 * i] = ADD ? d[4 * i] + v.x : v.x;
        d[4 * i + 1] = ADD ? d[4 * i + 1] + v.y : v.y;
        d[4 * i + 2] = ADD ? d[4 * i + 2] + v.z : v.z;
        d[4 * i + 3] = ADD ? d[4 * i + 3] + v.w : v.w;
    }
}

// The end of a segment that is only part of its pair's k-tiles. Returns whether this warpgroup now
// holds the pair's whole sum in d (it is the fixer and stores C); otherwise its part is in the workspace.
// The ordering is Level 13's split-K's: the warpgroup's stores, its barrier, then one acquire-release
// atomic by one thread; the fixer's threads read the slots after the barrier that follows its acquire.
// 一个段只是这对分块的部分 k 分块时，段的结尾。返回这个线程束组现在是否在 d 中持有这对分块的完整和（它负责
// fixup 并写出 C）；否则它的部分在工作区中。顺序与第 13 级的 split-K 相同：线程束组的存储，它的屏障，然后由一
// 个线程执行一次 acquire-release 原子操作；负责 fixup 的线程束组在它的 acquire 之后的屏障之后读取各槽位。
template <int REGS>
__device__ bool stream_k_fixup(float (&d)[REGS], const ClusterWork& work, const Segment& s, float* workspace,
                               int* counters, unsigned epoch, int rank, int consumer, int thread,
                               volatile int* flag)
{
    const long long first = (long long)s.pair * work.tiles_k;
    const int head = work.holder(first), last = work.holder(first + work.tiles_k - 1);
    const int later_parts = last - head;  // clusters after the head that hold some of this pair's k-tiles
                                          // head 之后持有这对分块部分 k 分块的簇数
    int* counter = counters + (s.pair * 2 + rank) * 2 + consumer;
    const bool is_head = s.kb == 0;
    if (thread == 0) *flag = is_head && epoch_count(load_acquire(counter), epoch) == later_parts;
    warpgroup_barrier(consumer);
    bool fixer = *flag;
    if (!fixer) {
        write_partial(d, partial_slot(workspace, work.cluster, is_head ? 1 : 0, rank, consumer), thread);
        warpgroup_barrier(consumer);  // every thread's part is stored before the one atomic publishes them
                                      // 每个线程的部分都已写出，然后才由那一次原子操作发布它们
        if (thread == 0) *flag = arrive_epoch(counter, epoch) == later_parts;
        warpgroup_barrier(consumer);
        fixer = *flag;
    }
    if (fixer) {
        // In k order whoever sums: the head's part first (from its registers if this is the head), then the
        // later clusters' parts, this one's own among them re-read from its slot.
        // 不论由谁累加，都按 k 的顺序：先 head 的部分（如果这就是 head，则取自它的寄存器），再后面各簇的部分，
        // 其中也包括这个簇自己的部分，从它的槽位重新读回。
        if (!is_head) read_partial<REGS, false>(d, partial_slot(workspace, head, 1, rank, consumer), thread);
        for (int c = head + 1; c <= last; ++c)
            read_partial<REGS, true>(d, partial_slot(workspace, c, 0, rank, consumer), thread);
    }
    warpgroup_barrier(consumer);  // the flag is read by all before thread 0 writes it again
                                  // 所有线程都读完标志之后，线程 0 才再次写它
    return fixer;
}

// Steps 5–7: the kernel body (two kernels below pick the template arguments and parameters).
// 第 5–7 步：内核主体（下面两个内核选定模板实参和参数）。
template <bool BF16, int STAGES, typename OutT, bool TMA_STORE, bool RELEASE_CLUSTER, bool STREAM_K>
__device__ __forceinline__ void clustered_gemm(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                                               const TensorMap* __restrict__ map_c, OutT* __restrict__ C, int M, int N,
                                               int K, float* __restrict__ workspace, int* __restrict__ counters,
                                               unsigned epoch)
{
    constexpr int BM = 128, BN = 256, A_BYTES = BM * HOPPER_BK * 2, B_BYTES = BN * HOPPER_BK * 2;
    constexpr int CLUSTER = 2, CONSUMER_WARPS = 8;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ int fixer_flag[2];  // step 7: one per consumer
                                   // 第 7 步：每个消费者一个
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;  // same offsets in both blocks
                                                                                     // 两个线程块中的偏移相同
    const unsigned c_base = b_base + STAGES * B_BYTES;  // steps 6, 7: 2 pieces of C per consumer
                                                        // 第 6、7 步：每个消费者 2 块 C
    const int tid = threadIdx.x, wg = tid / 128;
    const unsigned rank = cluster_rank();
    // A pair of tiles is a 256×256 piece of C: tile_origin walks pairs as step 4 walks tiles.
    // 一对分块是 C 的一个 256×256 块：tile_origin 遍历分块对，就像第 4 步遍历分块一样。
    const int pairs = ((M + 2 * BM - 1) / (2 * BM)) * ((N + BN - 1) / BN);
    const int tiles_k = (K + HOPPER_BK - 1) / HOPPER_BK;
    const int cluster = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), 1);                          // this block's expect_tx
                                                                       // 本线程块的 expect_tx
            mbar_init(smem_u32(&empty[s]), CLUSTER * CONSUMER_WARPS);  // every consumer warp of both blocks
                                                                       // 两个线程块的每个消费者线程束
        }
        fence_barrier_init();
    }
    cluster_sync();  // both blocks' barriers exist before any copy or arrival can reach them
                     // 两个线程块的屏障都已存在，之后才会有拷贝或 arrive 到达它们

    if (wg == 0) {  // producer
                    // 生产者
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        // Warp 0 runs the loop together and lane 0 issues the copies. (Were lane 0 alone in the loop,
        // the other 31 lanes of its warp would wait at the cluster barrier below on the same warp,
        // and the two diverged paths would share the warp's issue slots: the producer slows down.)
        // 线程束 0 一起执行这个循环，由 lane 0 发出拷贝。（如果只有 lane 0 在循环中，它所在线程束的另外
        // 31 个 lane 会在下面的簇级屏障处等待，同一个线程束的两条分歧路径要分享这个线程束的发射槽：生产者
        // 就会变慢。）
        if (tid < 32) {
            int it = 0;
            ClusterWork work(pairs, tiles_k, cluster, clusters, STREAM_K);
            for (Segment seg; work.next(seg);) {
                int m0, n0;
                tile_origin<2 * BM, BN>(seg.pair, M, N, m0, n0);
                m0 += rank * BM;
                const bool rows_inside = m0 < M;
                for (int kt = seg.kb; kt < seg.ke; ++kt, ++it) {
                    const int s = it % STAGES;
                    const unsigned bar = smem_u32(&full[s]);
                    mbar_wait(smem_u32(&empty[s]), (it / STAGES + 1) % 2);  // both blocks left s
                                                                            // 两个线程块都已离开 s
                    if (tid == 0) {
                        mbar_expect_bytes(bar, (rows_inside ? A_BYTES : 0) + B_BYTES);
                        if (rows_inside) tma_load(a_base + s * A_BYTES, map_a, kt * HOPPER_BK, m0, bar);
#pragma unroll
                        for (int j = 0; j < 2; ++j) {  // this block's half of B, to both blocks
                                                       // 本线程块那一半 B，发给两个线程块
                            const int box = 2 * rank + j;
                            tma_load_multicast(b_base + s * B_BYTES + box * 8192, map_b, n0 + box * 64,
                                               kt * HOPPER_BK, bar, 0b11);
                        }
                    }
                    __syncwarp();
                }
            }
        }
    } else {  // consumers, as in step 4; a stage is released to both blocks' producers
              // 消费者，与第 4 步相同；流水级释放给两个线程块的生产者
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int thread = tid % 128, rows = (wg - 1) * 64;
        const bool releaser = thread % 32 == 0;
        auto release = [&](int s) {
            const unsigned bar = smem_u32(&empty[s]);
            mbar_arrive_remote<RELEASE_CLUSTER>(cluster_address(bar, 0));
            mbar_arrive_remote<RELEASE_CLUSTER>(cluster_address(bar, 1));
        };
        const int consumer = wg - 1;
        unsigned char* c_buffers = smem + (c_base - smem_u32(smem)) + consumer * 2 * C_PIECE_BYTES;
        int it = 0, pieces = 0;
        ClusterWork work(pairs, tiles_k, cluster, clusters, STREAM_K);
        for (Segment seg; work.next(seg);) {
            int m0, n0;
            tile_origin<2 * BM, BN>(seg.pair, M, N, m0, n0);
            m0 += rank * BM;
            float d[BN / 2] = {};  // zeroed: the first wgmma ignores d (scale-d = 0), but its asm reads it ("+f")
                                   // 清零：第一条 wgmma 忽略 d（scale-d = 0），但它的 asm 会读取 d（"+f"）
            for (int kt = seg.kb; kt < seg.ke; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(smem_u32(&full[s]), (it / STAGES) % 2);
                wgmma_fence();
                wgmma_k_tile<BF16>(d, a_base + s * A_BYTES + rows * 128, b_base + s * B_BYTES, kt == seg.kb);
                wgmma_commit();
                wgmma_wait<1>();  // the previous k-tile's wgmma is done: its stage can go
                                  // 上一个 k 分块的 wgmma 已完成：它的流水级可以释放
                if (kt > seg.kb && releaser) release((it - 1) % STAGES);
            }
            wgmma_wait<0>();
            if (releaser) release((it - 1) % STAGES);
            pin(d);
            if constexpr (STREAM_K) {
                if ((seg.kb != 0 || seg.ke != tiles_k) &&
                    !stream_k_fixup(d, work, seg, workspace, counters, epoch, rank, consumer, thread,
                                    &fixer_flag[consumer]))
                    continue;  // this part waits in the workspace for the pair's fixer
                               // 这一部分在工作区中等待这对分块的 fixup
            }
            if constexpr (TMA_STORE)
                store_tile_tma<BF16, OutT>(d, c_buffers, c_base + consumer * 2 * C_PIECE_BYTES, map_c, M, N,
                                           m0 + rows, n0, thread, consumer, pieces);
            else
                store_tile<BF16>(d, C, M, N, m0 + rows, n0, thread);
        }
        if (TMA_STORE && thread == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // C is out
                                                                                                   // C 已写出
    }
    cluster_sync();  // neither block leaves while the other may still write to its shared memory
                     // 对方仍可能写自己的共享内存时，哪个线程块都不离开
}

// Steps 5 and 6.
// 第 5、6 步。
template <bool BF16, int STAGES, typename OutT = float, bool TMA_STORE = false, bool RELEASE_CLUSTER = false>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
hopper_wgmma_clustered(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                       const TensorMap* __restrict__ map_c, OutT* __restrict__ C, int M, int N, int K)
{
    clustered_gemm<BF16, STAGES, OutT, TMA_STORE, RELEASE_CLUSTER, false>(map_a, map_b, map_c, C, M, N, K, nullptr,
                                                                          nullptr, 0);
}

// Step 7: workspace holds clusters × 8 slots of PARTIAL_FLOATS floats; counters one int per (pair, rank,
// consumer), tagged with epoch, a number the host changes at every launch on them.
// 第 7 步：workspace 存放 clusters × 8 个槽位，每个 PARTIAL_FLOATS 个 float；counters 每个（分块对、rank、消
// 费者）一个 int，带有 epoch 标记，epoch 是主机端在每次对它们启动时都会改变的一个数。
template <bool BF16, int STAGES, typename OutT = float>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
hopper_wgmma_streamk(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                     const TensorMap* __restrict__ map_c, OutT* __restrict__ C, int M, int N, int K,
                     float* __restrict__ workspace, int* __restrict__ counters, unsigned epoch)
{
    clustered_gemm<BF16, STAGES, OutT, true, false, true>(map_a, map_b, map_c, C, M, N, K, workspace, counters,
                                                          epoch);
}
