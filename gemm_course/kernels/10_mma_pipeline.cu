// Level 10 — Tensor Cores without the WMMA wrapper: mma.sync + ldmatrix + a multi-stage cp.async
// pipeline, with an XOR-swizzled shared layout. fp16 or bf16 inputs (BF16), fp32 accumulation, fp32 C.
// sm_80+; the copy = "tma" setting (the second kernel) needs sm_90. Three kernels: this one; the same
// math fed by TMA; and, at the end of the file, the same math again with the feeding overlapped.
// 第 10 级：不经 WMMA 封装使用张量核心。mma.sync + ldmatrix + 多流水级的 cp.async 流水线，共享内存采用 XOR
// 重排布局。输入为 fp16 或 bf16（BF16），fp32 累加，C 为 fp32。sm_80 及以上；copy = "tma" 设置（第二个内核）
// 需要 sm_90。共三个内核：这一个；同样的计算改由 TMA 供数；以及文件末尾的第三个，同样的计算，供数与计算相
// 互重叠。
//
// Block tile 128×BN (BN = 128 or 256), k-tile 32 (or BK = 64, below), 8 warps as 2 (m) × 4 (n);
// each warp owns a 64×(BN/4) tile of C as 4 × (BN/32) mma tiles of 16×8 (m16n8k16: one instruction
// multiplies a 16×16 piece of A by a 16×8 piece of B). Per 16-deep k-step a warp issues 4
// ldmatrix.x4 for A, BN/64 ldmatrix.x4.trans for B and BN/8 mma.sync: with BN = 256 each fragment
// of A feeds twice as many mma.sync (the 64×64 warp tile), at the price of 128 accumulators per
// thread and one block per SM.
// 线程块分块 128×BN（BN = 128 或 256），k 分块 32（或下文的 BK = 64），8 个线程束排成 2 (m) × 4
// (n)；每个线程束负责 C 的一个 64×(BN/4) 分块，由 4 × (BN/32) 个 16×8 的 mma 分块组成（m16n8k16：
// 一条指令把 A 的 16×16 块与 B 的 16×8 块相乘）。沿 k 每走 16 深的一步，一个线程束为 A 发出 4 条
// ldmatrix.x4，为 B 发出 BN/64 条 ldmatrix.x4.trans，以及 BN/8 条 mma.sync：BN = 256 时每个 A
// 片段供给的 mma.sync 翻倍（64×64 的线程束分块），代价是每个线程 128 个累加器、每个 SM
// 只能放一个线程块。
//
//   global ──cp.async 16 B──▶ shared stage s ──ldmatrix──▶ registers ──mma.sync──▶ accumulators
//            (no registers,      (STAGES buffers:          (one instruction
//             zero-fill past     tiles kt+1 … kt+STAGES-1   loads a warp's
//             the edges)         are in flight while        8×8 matrices)
//                                tile kt is computed)
//
// Shared layout and swizzle. A stage holds A as 128 rows × 32 halves (4 chunks of 16 B per row)
// and B as 32 rows (k) × BN halves (BN/8 chunks per row). ldmatrix reads one 16-byte chunk from each
// of 8 consecutive rows at once. Unswizzled, those 8 chunks would sit 64 B (A) or 2·BN B (B) apart
// and share banks (4-way and 8-way conflicts). Storing chunk c of row r at position
//     A: c ^ ((r / 2) % 4)          B: c ^ (r % 8)
// puts the 8 chunks of any such read in 8 different 16-byte bank groups, conflict-free; the copy
// in and the ldmatrix out apply the same function, so the permutation is invisible to the math.
// With BK = 64 an A row is 8 chunks (128 B) and A's swizzle becomes c ^ (r % 8), as B's: half the
// barriers per flop, twice the shared memory per stage.
// 共享内存布局与重排（swizzle）。一个流水级中，A 存为 128 行 × 32 个 half（每行 4 个 16 B 的块），B
// 存为 32 行 (k) × BN 个 half（每行 BN/8 个块）。ldmatrix 一次从 8 个相邻的行中各读一个 16 字节块。
// 不重排时，这 8 个块彼此相隔 64 B（A）或 2·BN B（B），落在相同的存储体上（4 路和 8 路冲突）。
// 把第 r 行的第 c 块存放在位置
//
// Preconditions (the launcher checks them): K and N multiples of 8 and 16-byte aligned pointers,
// so every 16-byte chunk is wholly inside or outside its matrix. M is free. Out-of-range chunks are
// zero-filled by cp.async (source size 0); only elements inside C are stored.
// 前提条件（启动器会检查）：K 和 N 是 8 的倍数，指针 16 字节对齐，这样每个 16
// 字节块要么完全落在矩阵内，要么完全落在矩阵外。M 不受限制。越界的块由 cp.async 填 0（源大小为
// 0）；只写 C 之内的元素。

#include "tma.cuh"

#define MMA_BM 128
#define MMA_BK 32
#define MMA_THREADS 256

__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ int swizzle_a(int row, int chunk) { return row * 4 + (chunk ^ ((row >> 1) & 3)); }
template <int BN>
__device__ __forceinline__ int swizzle_b(int row, int chunk) { return row * (BN / 8) + (chunk ^ (row & 7)); }
// BK = 64: an A row is 8 chunks (128 B), so 8 consecutive rows already start on the same bank and the
// row's low 3 bits pick the position, as in B (and as TMA's 128-byte swizzle does).
// BK = 64：A 的一行是 8 个块（128 B），所以 8 个相邻的行本来就从同一个存储体开始，由行号的低 3
// 位选择位置，与 B 相同（也与 TMA 的 128 字节重排相同）。
__device__ __forceinline__ int swizzle_a64(int row, int chunk) { return row * 8 + (chunk ^ (row & 7)); }
template <int BK>
__device__ __forceinline__ int swizzle_a_bk(int row, int chunk)
{
    if constexpr (BK == 32) return swizzle_a(row, chunk);
    else return swizzle_a64(row, chunk);
}

// Four 8×8 matrices of 16-bit elements from shared memory, one per register; each lane supplies the
// address of one 16-byte row. TRANS transposes each matrix on the way (B as the .col operand).
// 从共享内存加载四个 16 位元素的 8×8 矩阵，每个寄存器一个；每个 lane 提供一个 16 字节行的地址。
// TRANS 在加载途中转置每个矩阵（B 作为 .col 操作数）。
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned address)
{
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));
}

// acc += a · b for one m16n8k16 tile; the input type only changes the instruction's name.
// 对一个 m16n8k16 分块计算 acc += a · b；输入类型只改变指令的名字。
template <bool BF16>
__device__ __forceinline__ void mma_16816(float (&acc)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
    if constexpr (BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// PARTS, for measurement only (python -m gemm_course peak): 3 runs the kernel; 1 keeps only the copies
// and the pipeline (no ldmatrix, no mma.sync), 2 keeps only the barriers and the math on whatever the
// shared buffers hold. Timing the three shows which part sets the kernel's speed. MMA_NO_BARRIER (4)
// added to MMA_MATH also drops the block-wide barrier, so that the barrier's own cost is measured
// rather than assumed (with copies it would be a race: never combine it with MMA_COPIES).
// PARTS 只用于测量（python -m gemm_course peak）：3 运行完整内核；1 只保留拷贝和流水线（没有
// ldmatrix，没有 mma.sync），2 只保留屏障和对共享缓冲区中现有数据的计算。对三者计时，
// 就能看出哪一部分决定了内核的速度。在 MMA_MATH 上再加 MMA_NO_BARRIER (4) 还会去掉线程块级屏障，
// 这样屏障本身的开销是测出来的，而不是假设的（与拷贝同时存在时会产生竞争：绝不要与 MMA_COPIES
// 同时使用）。
enum MmaPipelineParts { MMA_COPIES = 1, MMA_MATH = 2, MMA_ALL = 3, MMA_NO_BARRIER = 4 };

// A warp's MT × NT accumulator tiles into C, whose tile starts at (row0, col0). The m16n8 layout:
// lane holds rows g and g+8 (g = lane / 4), columns 2·(lane % 4) + {0, 1}: pairs of floats (float2).
// 把一个线程束的 MT × NT 个累加器分块写入 C，其分块从 (row0, col0) 开始。m16n8 布局：lane
// 持有第 g 行和第 g+8 行（g = lane / 4），第 2·(lane % 4) + {0, 1} 列：成对的 float（float2）。
template <int MT, int NT>
__device__ __forceinline__ void store_accumulators(const float (&acc)[MT][NT][4], float* C, int M, int N,
                                                   int row0, int col0, int lane)
{
    const int g = lane / 4, q = (lane % 4) * 2;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row0 + i * 16 + g + h * 8, c = col0 + j * 8 + q;
                if (r < M && c < N)  // N is a multiple of 8 and c is even: c + 1 < N too
                                     // N 是 8 的倍数且 c 为偶数：c + 1 < N 也成立
                    *reinterpret_cast<float2*>(C + (size_t)r * N + c) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
}

template <int STAGES, bool BF16, int BN = 128, int BK = MMA_BK, int PARTS = MMA_ALL>
__global__ void __launch_bounds__(MMA_THREADS, BN == 128 ? 2 : 1)
gemm_mma_pipeline(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                  float* __restrict__ C, int M, int N, int K)
{
    static_assert(!((PARTS & MMA_NO_BARRIER) && (PARTS & MMA_COPIES)), "without the barrier, copies would race");
    extern __shared__ __align__(128) unsigned char smem[];
    static_assert(BK == 32 || BK == 64, "k-tiles of 32 or 64");
    constexpr int NT = BN / 32;  // n8 tiles per warp
                                 // 每个线程束的 n8 分块数
    constexpr int A_ROW = BK / 8;  // chunks per row of A's tile
                                   // A 分块每行的块数
    // Stage s: A chunks [s][128 × BK/8], then B chunks [s][BK × BN/8]; a chunk is 16 bytes (uint4).
    // 流水级 s：先是 A 的块 [s][128 × BK/8]，再是 B 的块 [s][BK × BN/8]；一个块 16 字节（uint4）。
    uint4* const a_chunks = reinterpret_cast<uint4*>(smem);
    uint4* const b_chunks = a_chunks + STAGES * MMA_BM * A_ROW;

    // Grouped block order for L2 reuse (as in Level 8).
    // 为 L2 复用而分组的线程块顺序（与第 8 级相同）。
    const int tiles_m = (M + MMA_BM - 1) / MMA_BM, tiles_n = (N + BN - 1) / BN;
    const int per_group = 8 * tiles_n;
    const int first_m = (blockIdx.x / per_group) * 8;
    const int group_rows = min(tiles_m - first_m, 8);
    const int row0 = (first_m + (blockIdx.x % per_group) % group_rows) * MMA_BM;
    const int col0 = ((blockIdx.x % per_group) / group_rows) * BN;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * (BN / 4);  // this warp's 64×(BN/4) tile
                                                                 // 本线程束的 64×(BN/4) 分块

    // Issue the copies of k-tile kt into stage s: 16·BK A chunks and BK·BN/8 B chunks; with BK = 32
    // that is 2 + BN/64 per thread.
    // 发出 k 分块 kt 到流水级 s 的拷贝：16·BK 个 A 块和 BK·BN/8 个 B 块；BK = 32 时每个线程 2 +
    // BN/64 个。
    auto load_tile = [&](int kt, int s) {
        const int k0 = kt * BK;
#pragma unroll
        for (int i = 0; i < BK / 16; ++i) {
            const int e = tid + i * MMA_THREADS;
            const int r = e / A_ROW, c = e % A_ROW;  // A: row r of the tile, chunk c (8 halves of k)
                                                     // A：分块的第 r 行、第 c 块（k 方向的 8 个 half）
            const bool ok = row0 + r < M && k0 + c * 8 < K;
            const unsigned short* src = ok ? A + (size_t)(row0 + r) * K + k0 + c * 8 : A;
            cp_async_16(smem_u32(a_chunks + s * MMA_BM * A_ROW + swizzle_a_bk<BK>(r, c)), src, ok);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 2048; ++i) {
            const int e = tid + i * MMA_THREADS;
            const int r = e / (BN / 8), c = e % (BN / 8);  // B: row r (k) of the tile, chunk c (8 halves of n)
                                                           // B：分块的第 r 行 (k)、第 c 块（n 方向的 8 个 half）
            const bool ok = k0 + r < K && col0 + c * 8 < N;
            const unsigned short* src = ok ? B + (size_t)(k0 + r) * N + col0 + c * 8 : B;
            cp_async_16(smem_u32(b_chunks + s * BK * (BN / 8) + swizzle_b<BN>(r, c)), src, ok);
        }
    };

    float acc[4][NT][4];  // [m16 tile][n8 tile][fragment element]
                          // [m16 分块][n8 分块][片段元素]
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    const int tiles_k = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {  // fill the pipeline
                                            // 填满流水线
        if (PARTS & MMA_COPIES && s < tiles_k) load_tile(s, s);
        asm volatile("cp.async.commit_group;\n" ::);
    }

    for (int kt = 0; kt < tiles_k; ++kt) {
        // Tile kt has landed once at most STAGES-2 newer groups are still in flight.
        // 当仍在传输途中的较新拷贝组不超过 STAGES-2 组时，分块 kt 已经到达。
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        if constexpr (!(PARTS & MMA_NO_BARRIER))
            __syncthreads();  // everyone's copies of tile kt are visible; everyone is done with kt-1
                              // 所有线程对分块 kt 的拷贝都已可见；所有线程都用完了 kt-1
        const int next = kt + STAGES - 1;  // refill the stage that tile kt-1 used
                                           // 重新填充分块 kt-1 用过的那个流水级
        if (PARTS & MMA_COPIES && next < tiles_k) load_tile(next, next % STAGES);
        asm volatile("cp.async.commit_group;\n" ::);  // an empty group keeps the count uniform
                                                      // 提交一个空组，让计数保持一致

        if constexpr (!(PARTS & MMA_MATH)) continue;
        const int s = kt % STAGES;
        const uint4* as = a_chunks + s * MMA_BM * A_ROW;
        const uint4* bs = b_chunks + s * BK * (BN / 8);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[4][4], b[NT][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {  // A 16×16: lanes 0-15 rows at k chunk 0, lanes 16-31 at chunk 1
                                           // A 16×16：lane 0-15 给出 k 方向第 0 块的各行，lane 16-31 给出第 1 块的
                const int r = wm + i * 16 + lane % 16, c = kk / 8 + lane / 16;
                ldmatrix_x4<false>(a[i][0], a[i][1], a[i][2], a[i][3], smem_u32(as + swizzle_a_bk<BK>(r, c)));
            }
#pragma unroll
            for (int j = 0; j < NT / 2; ++j) {  // B 16(k)×16(n), transposed: two n8 tiles per ldmatrix
                                                // B 16(k)×16(n)，转置：每条 ldmatrix 加载两个 n8 分块
                const int r = kk + lane % 16, c = (wn + j * 16) / 8 + lane / 16;
                ldmatrix_x4<true>(b[2 * j][0], b[2 * j][1], b[2 * j + 1][0], b[2 * j + 1][1],
                                  smem_u32(bs + swizzle_b<BN>(r, c)));
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j)
                    mma_16816<BF16>(acc[i][j], a[i], b[j]);
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);

    store_accumulators(acc, C, M, N, row0 + wm, col0 + wn, lane);
}


// --- copy = "tma" (sm_90): the same math, fed by the TMA engine --------------------------------------
// --- copy = "tma"（sm_90）：同样的计算，由 TMA 引擎供数 ----------------------------------------------
//
// The kernel above issues its own copies (a third of its warps' memory instructions) and meets the
// whole block at a barrier every k-tile; the chapter measures what both cost. Here one thread asks
// the TMA engine for whole k-tiles, 64 deep, each completing on the "full" mbarrier of its stage. A
// warp that has read a stage arrives on the stage's "empty" mbarrier, and thread 0 refills the stage
// once all 8 warps have. No warp waits for another except through the data it needs. The math is
// the BN = 256 setting's: 8 warps as 2 (m) × 4 (n), a 64×64 warp tile, ldmatrix + mma.sync.
// 上面的内核自己发出拷贝（占其线程束访存指令的三分之一），并且每个 k 分块都要让整个线程块在屏障处会合；
// 本章测量了这两者的代价。这里由一个线程向 TMA 引擎请求整个 k 分块（64 深），每个分块在其流水级的 "full"
// mbarrier 上完成。读完一个流水级的线程束在该流水级的 "empty" mbarrier 上执行 arrive，8 个线程束都执行之
// 后，线程 0 重新填充这个流水级。除了等待自己需要的数据之外，没有哪个线程束要等别的线程束。计算与 BN =
// 256 的设置相同：8 个线程束排成 2 (m) × 4 (n)，64×64 的线程束分块，ldmatrix + mma.sync。
//
//   stage s   A: 128 rows × 64 k, row r = 8 chunks of 16 B, chunk c stored at c ^ (r % 8)
//             B: 4 boxes of 64 k × 64 n (box j at +8192 B), row k = 8 chunks, chunk c at c ^ (k % 8)
//             (TMA's 128-byte swizzle: the same conflict-free pattern as above, written by the engine)
//   流水级 s  A：128 行 × 64 个 k，第 r 行 = 8 个 16 B 的块，第 c 块存放在 c ^ (r % 8)
//             B：4 个 64 k × 64 n 的 box（第 j 个位于 +8192 B），第 k 行 = 8 个块，第 c 块位于 c ^ (k % 8)
//             （TMA 的 128 字节重排：与上文相同的无冲突模式，由引擎写入）
//
//   thread 0     issue k-tiles 0 … STAGES-1; at k-tile kt ≥ 1: wait empty[(kt-1) % STAGES], issue
//                k-tile kt-1+STAGES into that stage
//   every warp   wait full[kt % STAGES] → 4 k-steps of ldmatrix + mma.sync → arrive empty[kt % STAGES]
//   线程 0       发出 k 分块 0 … STAGES-1；在 k 分块 kt ≥ 1 时：等待 empty[(kt-1) % STAGES]，
//                把 k 分块 kt-1+STAGES 发往那个流水级
//   每个线程束   等待 full[kt % STAGES] → 4 个 k 步的 ldmatrix + mma.sync → 在 empty[kt % STAGES] 上执行 arrive
//
// Preconditions as above (TMA needs 16-byte row strides: K and N multiples of 8); TMA fills zeros
// past the edges of A and B.
// 前提条件同上（TMA 要求行跨度是 16 字节的倍数：K 和 N 是 8 的倍数）；越过 A 和 B 边缘的部分由 TMA 填
// 0。
template <bool BF16, int STAGES>
__global__ void __launch_bounds__(MMA_THREADS, 1)
gemm_mma_tma(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
             float* __restrict__ C, int M, int N, int K)
{
    constexpr int BM = MMA_BM, BN = 256, A_BYTES = BM * HOPPER_BK * 2, B_BYTES = BN * HOPPER_BK * 2;
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 64;  // this warp's 64×64 tile
                                                           // 这个线程束的 64×64 分块
    int m0, n0;
    tile_origin<BM, BN>(blockIdx.x, M, N, m0, n0);
    const int tiles_k = (K + HOPPER_BK - 1) / HOPPER_BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), 1);   // the expect_tx of thread 0
                                                // 线程 0 的 expect_tx
            mbar_init(smem_u32(&empty[s]), 8);  // one arrival per warp
                                                // 每个线程束 arrive 一次
        }
        fence_barrier_init();
    }
    __syncthreads();
    auto issue = [&](int kt) {
        const int s = kt % STAGES;
        tma_load_k_tile<BM, BN>(map_a, map_b, a_base + s * A_BYTES, b_base + s * B_BYTES, m0, n0,
                                kt * HOPPER_BK, smem_u32(&full[s]));
    };
    if (tid == 0)
        for (int kt = 0; kt < STAGES && kt < tiles_k; ++kt) issue(kt);

    float acc[4][8][4] = {};
    for (int kt = 0; kt < tiles_k; ++kt) {
        const int s = kt % STAGES;
        if (tid == 0 && kt > 0 && kt - 1 + STAGES < tiles_k) {  // the stage of k-tile kt-1, once all warps left it
                                                                // k 分块 kt-1 的流水级，等所有线程束都离开之后
            mbar_wait(smem_u32(&empty[(kt - 1) % STAGES]), ((kt - 1) / STAGES) % 2);
            issue(kt - 1 + STAGES);
        }
        mbar_wait(smem_u32(&full[s]), (kt / STAGES) % 2);
        // The warp meets again before the warp-wide ldmatrix and mma.sync (.aligned): thread 0 may have
        // waited on "empty" and issued copies alone, and each lane left its own wait loop.
        // 在线程束级的 ldmatrix 和 mma.sync（.aligned）之前，线程束再会合一次：线程 0 可能独自等待过
        // "empty" 并发出了拷贝，而每个 lane 都是各自离开等待循环的。
        __syncwarp();
        const unsigned as = a_base + s * A_BYTES, bs = b_base + s * B_BYTES;
#pragma unroll
        for (int kk = 0; kk < HOPPER_BK; kk += 16) {
            unsigned a[4][4], b[8][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {  // as in the kernel above, on TMA's swizzle
                                           // 与上面的内核相同，只是用 TMA 的重排
                const int r = wm + i * 16 + lane % 16, c = kk / 8 + lane / 16;
                ldmatrix_x4<false>(a[i][0], a[i][1], a[i][2], a[i][3], as + r * 128 + ((c ^ (r & 7)) << 4));
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = wn + j * 16, k = kk + lane % 16, c = (n % 64) / 8 + lane / 16;
                ldmatrix_x4<true>(b[2 * j][0], b[2 * j][1], b[2 * j + 1][0], b[2 * j + 1][1],
                                  bs + (n / 64) * 8192 + k * 128 + ((c ^ (k & 7)) << 4));
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) mma_16816<BF16>(acc[i][j], a[i], b[j]);
        }
        __syncwarp();  // every lane's ldmatrix of this stage is done
                       // 每个 lane 对这个流水级的 ldmatrix 都已完成
        if (lane == 0) mbar_arrive(smem_u32(&empty[s]));
    }
    store_accumulators(acc, C, M, N, m0 + wm, n0 + wn, lane);
}


// --- The overlapped kernel: the same math, fed without stopping it -----------------------------------
// --- 重叠的内核：同样的计算，供数时不让计算停下 ------------------------------------------------------
//
// Both kernels above leave the Tensor Cores idle at moments the chapter measures: after each barrier
// every warp computes its copy addresses at the same time (about 140 instructions per thread and
// k-tile in the cp.async kernel, with no mma.sync among them), the first mma.sync of a k-tile waits
// for that k-tile's ldmatrix, and the block barrier lines all the warps up once per k-tile. This
// kernel keeps the math (64×64 warp tiles, ldmatrix + mma.sync, 2 warps down and BN/64 across: 8
// warps for 128×256, 4 for 128×128) and the TMA kernel's shared layout, and changes how it is fed.
// Each change is one parameter:
// 上面两个内核都会在本章测量到的时刻让张量核心空闲：每次屏障之后，所有线程束同时计算各自的拷贝地址
// （cp.async 内核中每个线程每个 k 分块约 140 条指令，其间没有一条 mma.sync），一个 k 分块的第一条
// mma.sync 要等这个 k 分块的 ldmatrix，而线程块屏障每个 k 分块都让所有线程束排齐一次。这个内核保留计算
// （64×64 的线程束分块，ldmatrix + mma.sync，纵向 2 个线程束、横向 BN/64 个：128×256 时 8 个线程束，
// 128×128 时 4 个）和 TMA 内核的共享内存布局，只改变供数方式。每项改动对应一个参数：
//
//   frag_buffers = 2     two sets of fragment registers: the ldmatrix of k-step t+1 is issued before
//                        the mma.sync of k-step t, across k-tiles too, so a k-tile's first fragments
//                        (and the wait for that k-tile) come before the last mma.sync of the k-tile
//                        before it: the Tensor Cores have work while the warp waits
//   copy_issue = spread  the cp.async of a k-tile go one after each row of 8 mma.sync, 3 or 4 per
//                        k-step, instead of all at once after the barrier
//   copy = cp_async_mbarrier  no block barrier: each thread's copies of a stage complete on the
//                        stage's "full" mbarrier (cp.async.mbarrier.arrive, sm_80), and each warp
//                        frees a stage on its "empty" mbarrier right after its last ldmatrix there
//   BK = 32 or 64        the k-tile depth (64: half the waits per flop, twice the shared memory)
//   BN = 128             4 warps; with at most 96 KB of stages (BK = 64: 3 stages; BK = 32: 4) two
//                        blocks share an SM (2 × 128 threads × 255 registers fit): one block's waits
//                        and its final stores of C run beside the other block's mma.sync
//   copy = tma           (frag_buffers = 2) the TMA kernel with the same fragment pipelining, each
//                        stage released after its last ldmatrix instead of after its last mma.sync
//   frag_buffers = 2     两套片段寄存器：k 步 t+1 的 ldmatrix 在 k 步 t 的 mma.sync 之前发出，跨越
//                        k 分块时也是如此，所以一个 k 分块最初的片段（以及对这个 k 分块的等待）出现在
//                        前一个 k 分块的最后一条 mma.sync 之前：线程束等待时，张量核心仍有活干
//   copy_issue = spread  一个 k 分块的 cp.async 分散发出，每行 8 条 mma.sync 之后发一条，每个 k 步
//                        3 或 4 条，而不是在屏障之后一次全部发出
//   copy = cp_async_mbarrier  没有线程块屏障：每个线程对一个流水级的拷贝在该流水级的 "full" mbarrier
//                        上完成（cp.async.mbarrier.arrive，sm_80），每个线程束在某个流水级上的最后一条
//                        ldmatrix 完成后，立即在它的 "empty" mbarrier 上释放这个流水级
//   BK = 32 或 64        k 分块的深度（64：每次浮点运算分摊的等待减半，共享内存翻倍）
//   BN = 128             4 个线程束；各流水级合计不超过 96 KB 时（BK = 64：3 个流水级；BK = 32：4 个），
//                        两个线程块共用一个 SM（2 × 128 个线程 × 255 个寄存器放得下）：一个线程块的
//                        等待和最后对 C 的写回，与另一个线程块的 mma.sync 同时进行
//   copy = tma           （frag_buffers = 2）带同样片段流水的 TMA 内核，每个流水级在它的最后一条
//                        ldmatrix 之后释放，而不是在最后一条 mma.sync 之后
//
// Three more change only the schedule of the same instructions (frag_buffers = 2):
// 另外三个参数只改变同样这些指令的调度（frag_buffers = 2）：
//
//   refill_lag = 2       (mbarrier feeds) a refill reuses the stage of k-tile kt-2, not kt-1. With 1,
//                        the refilling thread (thread 0 for TMA, every thread for cp_async_mbarrier)
//                        waits for the slowest warp to finish k-tile kt-1, so the "empty" wait ties
//                        the warps together much like a barrier; every warp left kt-2 a k-tile ago,
//                        so that wait is almost always over already. The price: one k-tile less in
//                        flight (stages - 2).
//   ldmatrix_issue = spread  the next k-step's 8 ldmatrix go one A and one B after each row of 8
//                        mma.sync, instead of all 8 before the k-step: shared memory sees a steady
//                        trickle rather than bursts, and a wait for a new k-tile comes after the
//                        first row, with 8 mma.sync already queued.
//   mma_order = serpentine  odd rows of the 4×8 mma.sync run right to left, so consecutive mma.sync
//                        share a fragment at the turn too (A within a row, B at the turn): fewer
//                        register reads.
//   refill_lag = 2       （mbarrier 供数）重新填充复用 k 分块 kt-2 的流水级，而不是 kt-1。取 1 时，负责
//                        填充的线程（TMA 时是线程 0，cp_async_mbarrier 时是每个线程）要等最慢的线程束
//                        算完 k 分块 kt-1，于是 "empty" 上的等待像屏障一样把各线程束捆在一起；而 kt-2
//                        每个线程束在一个 k 分块之前就已离开，这个等待几乎总是早已结束。代价：在途的
//                        k 分块少一个（stages - 2）。
//   ldmatrix_issue = spread  下一个 k 步的 8 条 ldmatrix 分散发出，每行 8 条 mma.sync 之后发一条 A
//                        的和一条 B 的，而不是在 k 步之前全部发出：共享内存看到的是平稳的细流而不是
//                        突发，对新 k 分块的等待出现在第一行之后，此时已有 8 条 mma.sync 在排队。
//   mma_order = serpentine  4×8 个 mma.sync 中的奇数行从右往左执行，这样在拐弯处相邻的 mma.sync
//                        也共用一个片段（行内共用 A，拐弯处共用 B）：寄存器读取更少。
//
//   one k-step, ldmatrix_issue = burst and spread (A_i: A's m16 tile i, B_j: B's n-pair j):
//   一个 k 步，ldmatrix_issue = burst 与 spread（A_i：A 的第 i 个 m16 分块，B_j：B 的第 j 个 n 对）：
//
//   burst:   A0 A1 A2 A3 B0 B1 B2 B3 │ row0 (8 mma) │ row1 │ row2 │ row3
//   spread:  row0 │ wait? A0 B0 │ row1 │ A1 B1 │ row2 │ A2 B2 │ row3 │ A3 B3 free?
//
// In every setting each thread's copy addresses and ldmatrix offsets are computed once, before the
// loop: the layout below makes the offset of k-step p one XOR with the constant p << 5, and the
// stage only adds a base.
// 在每种设置下，每个线程的拷贝地址和 ldmatrix 偏移都只在循环之前算一次：下面的布局让 k 步 p 的偏移等于
// 与常数 p << 5 做一次 XOR，流水级只是再加一个基址。
//
//   the k-steps of one 64-deep k-tile (p = 0..3) in one warp, frag_buffers = 1 and 2:
//   一个 64 深 k 分块的各个 k 步（p = 0..3），一个线程束，frag_buffers = 1 与 2：
//
//   1:  wait·ldsm 0·mma 0 │ ldsm 1·mma 1 │ ldsm 2·mma 2 │ ldsm 3·mma 3 │ wait·ldsm 0'·mma 0' …
//                            (each mma.sync waits for the ldmatrix just before it)
//   2:  ldsm 1·mma 0 │ ldsm 2·mma 1 │ ldsm 3·free·mma 2 │ wait·ldsm 0'·mma 3 │ ldsm 1'·mma 0' …
//                            (each mma.sync uses registers loaded one k-step earlier; "free": the
//                             warp's last ldmatrix of the stage is done, mbarrier and TMA release it)
//
//   stage s   A: 128 rows × BK k, row r = BK/8 chunks of 16 B; BK = 64: chunk c at c ^ (r % 8) (as
//             TMA writes it), BK = 32: chunk c at c ^ ((r / 2) % 4) (as swizzle_a above)
//             B: BN/64 boxes of BK k × 64 n (box j at + BK·128 B), row k = 8 chunks, chunk c at
//             c ^ (k % 8)
//   流水级 s  A：128 行 × BK 个 k，第 r 行 = BK/8 个 16 B 的块；BK = 64：第 c 块位于 c ^ (r % 8)
//             （与 TMA 的写法相同），BK = 32：第 c 块位于 c ^ ((r / 2) % 4)（与上文的 swizzle_a 相同）
//             B：BN/64 个 BK k × 64 n 的 box（第 j 个位于 + BK·128 B），第 k 行 = 8 个块，
//             第 c 块位于 c ^ (k % 8)
//
//   refill    between the waits for k-tiles kt and kt+1, each thread copies its share of k-tile
//             kt + STAGES - 1 into the stage k-tile kt-1 used (barrier: every warp has passed the
//             barrier before kt, so has left kt-1; mbarrier: after waiting for kt-1's "empty";
//             TMA: thread 0 waits for that "empty" and asks for the whole k-tile)
//   重新填充  在等待 k 分块 kt 和 kt+1 之间，每个线程把自己负责的那份 k 分块 kt + STAGES - 1 拷贝到
//             k 分块 kt-1 用过的流水级（barrier：每个线程束都已通过 kt 之前的屏障，所以都已离开
//             kt-1；mbarrier：在等到 kt-1 的 "empty" 之后；TMA：线程 0 等这个 "empty"，然后请求
//             整个 k 分块）
//
// Preconditions as the kernels above (K and N multiples of 8, 16-byte aligned pointers).
// 前提条件与上面的内核相同（K 和 N 是 8 的倍数，指针 16 字节对齐）。

enum MmaFeed { FEED_CP_ASYNC_BARRIER = 0, FEED_CP_ASYNC_MBARRIER = 1, FEED_TMA = 2 };

// Wait for the phase of an mbarrier with this parity. sm_90's try_wait lets the hardware suspend the
// thread for a while; sm_80 has only test_wait, polled.
// 等待 mbarrier 上奇偶性为此值的阶段。sm_90 的 try_wait 允许硬件把线程挂起一段时间；sm_80 只有 test_wait，
// 只能轮询。
__device__ __forceinline__ void wait_phase(unsigned bar, unsigned parity)
{
#if __CUDA_ARCH__ >= 900
    mbar_wait(bar, parity);
#else
    unsigned done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
#endif
}

// This thread arrives on `bar` once all the cp.async it has issued so far have landed. .noinc: the
// arrival counts against the barrier's initial count (here one per thread), like a plain arrive.
// 当这个线程此前发出的所有 cp.async 都到达之后，它在 `bar` 上执行 arrive。.noinc：这次 arrive 计入屏障
// 的初始计数（这里每个线程一次），与普通的 arrive 一样。
__device__ __forceinline__ void cp_async_arrive(unsigned bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(bar) : "memory");
}

// Byte offset of chunk `chunk` of row `row` in A's tile of a stage (BK/8 chunks per row).
// 一个流水级中 A 分块第 `row` 行第 `chunk` 块的字节偏移（每行 BK/8 个块）。
template <int BK>
__device__ __forceinline__ unsigned a_tile_offset(int row, int chunk)
{
    if constexpr (BK == 64) return row * 128 + ((chunk ^ (row & 7)) << 4);
    else return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}

template <bool BF16, int STAGES, int FEED, int BN, int BK, int FRAG_BUFFERS, bool SPREAD_COPIES, int REFILL_LAG,
          bool SPREAD_LDMATRIX, bool SERPENTINE, int PARTS>
__device__ __forceinline__ void mma_overlapped(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                                               const TensorMap* map_a, const TensorMap* map_b,
                                               float* __restrict__ C, int M, int N, int K)
{
    // BN/64 warps across (64×64 each), 2 down: 8 warps for 128×256, 4 for 128×128; one thread per column.
    // 横向 BN/64 个线程束（每个 64×64），纵向 2 个：128×256 时 8 个线程束，128×128 时 4 个；每列一个线程。
    constexpr int BM = MMA_BM, THREADS = BN, WARPS = BN / 32, WARPS_N = BN / 64, KSTEPS = BK / 16;
    constexpr int A_ROW_BYTES = BK * 2, A_BYTES = BM * BK * 2, BOX_BYTES = BK * 128, B_BYTES = BN * BK * 2;
    // Per thread and k-tile: A_COPIES chunks of A (rows A_ROW_STEP apart) and BK/8 of B (k-rows 8 apart).
    // 每个线程每个 k 分块：A 的 A_COPIES 个块（行间相隔 A_ROW_STEP），B 的 BK/8 个块（k 行间相隔 8）。
    constexpr int A_CHUNKS = BK / 8, A_ROW_STEP = THREADS / A_CHUNKS, B_CHUNKS = BN / 8;
    constexpr int A_COPIES = BM / A_ROW_STEP, COPIES = A_COPIES + BK / 8;
    constexpr int PER_STEP = SPREAD_COPIES ? COPIES / KSTEPS : COPIES;  // copies issued in one k-step
                                                                        // 一个 k 步中发出的拷贝数
    constexpr int COMMIT_STEP = SPREAD_COPIES ? KSTEPS - 1 : 0;          // the k-step that issues the last ones
                                                                         // 发出最后几次拷贝的 k 步
    constexpr bool MBARRIERS = FEED != FEED_CP_ASYNC_BARRIER, COPY = PARTS & MMA_COPIES, MATH = PARTS & MMA_MATH;
    static_assert(BK == 32 || BK == 64, "k-tiles of 32 or 64");
    static_assert(BN == 128 || BN == 256, "4 or 8 warps of 64×64");
    static_assert(FEED != FEED_TMA || (BK == 64 && !SPREAD_COPIES), "TMA copies whole 64-deep k-tiles");
    static_assert(COPIES % KSTEPS == 0 && COPIES / KSTEPS <= 4, "the copies spread evenly, at most one per row of mma");
    static_assert(!((PARTS & MMA_NO_BARRIER) && (PARTS & MMA_COPIES)), "without the barrier, copies would race");
    static_assert(REFILL_LAG == 1 || (MBARRIERS && REFILL_LAG < STAGES),
                  "a later refill needs the per-stage mbarriers and a k-tile still in flight");
    static_assert(!SPREAD_LDMATRIX || FRAG_BUFFERS == 2, "spreading the next k-step's ldmatrix needs a second set");

    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned a_base = aligned_base(smem), b_base = a_base + STAGES * A_BYTES;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / WARPS_N) * 64, wn = (warp % WARPS_N) * 64;  // this warp's 64×64 tile
                                                                       // 这个线程束的 64×64 分块
    int m0, n0;
    tile_origin<BM, BN>(blockIdx.x, M, N, m0, n0);
    const int tiles_k = (K + BK - 1) / BK;

    if (MBARRIERS && tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), FEED == FEED_TMA ? 1 : THREADS);  // TMA: thread 0's expect_tx
                                                                            // TMA：线程 0 的 expect_tx
            mbar_init(smem_u32(&empty[s]), WARPS);                          // one arrival per warp
                                                                            // 每个线程束 arrive 一次
        }
        if constexpr (FEED == FEED_TMA) fence_barrier_init();  // visible to the TMA engine too
                                                               // 让 TMA 引擎也能看到
    }
    __syncthreads();

    // This thread's copies, fixed for the whole loop: A row a_row + i·A_ROW_STEP, chunk a_chunk; B
    // k-row b_row + 8i, chunk b_chunk of the BN/8 across the tile (box b_chunk / 8, chunk b_chunk % 8
    // in it). Every A row this thread copies has the same swizzle (A_ROW_STEP is a multiple of 8), and
    // so has every B row (8 apart): the shared offsets are one base plus constants.
    // 这个线程的拷贝，整个循环中固定不变：A 的第 a_row + i·A_ROW_STEP 行、第 a_chunk 块；B 的第 b_row + 8i
    // 个 k 行、整个分块横向 BN/8 个块中的第 b_chunk 块（第 b_chunk / 8 个 box 中的第 b_chunk % 8 块）。这
    // 个线程拷贝的每个 A 行重排方式都相同（A_ROW_STEP 是 8 的倍数），每个 B 行（相隔 8）也一样：共享内存偏
    // 移就是一个基址加若干常数。
    const int a_row = tid / A_CHUNKS, a_chunk = tid % A_CHUNKS, b_row = tid / B_CHUNKS, b_chunk = tid % B_CHUNKS;
    const unsigned a_dst = a_tile_offset<BK>(a_row, a_chunk);
    const unsigned b_dst = (b_chunk / 8) * BOX_BYTES + b_row * 128 + (((b_chunk % 8) ^ b_row) << 4);
    const unsigned short* const a_src = A + (size_t)(m0 + a_row) * K + a_chunk * 8;  // + i·A_ROW_STEP·K + k0
    const unsigned short* const b_src = B + (size_t)b_row * N + n0 + b_chunk * 8;    // + (k0 + 8i)·N
    const size_t a_rows_apart = (size_t)A_ROW_STEP * K, b_rows_apart = (size_t)8 * N;
    unsigned a_rows_inside = 0;  // bit i: this thread's i-th A row is inside A
                                 // 第 i 位：这个线程的第 i 个 A 行是否落在 A 之内
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) a_rows_inside |= (m0 + a_row + i * A_ROW_STEP < M ? 1u : 0u) << i;
    const bool b_columns_inside = n0 + b_chunk * 8 < N;

    // Copy number q (A's first, then B's) of this thread's share of k-tile kt into its stage. Past the
    // last k-tile every chunk is past K: zeros, into a stage no one reads again, and no branch needed.
    // 把这个线程负责的 k 分块 kt 中的第 q 次拷贝（先 A 后 B）拷贝到它的流水级。越过最后一个 k 分块时每个块
    // 都在 K 之外：写入的是 0，写进一个没有人再读的流水级，也不需要分支。
    auto copy_chunk = [&](int q, int kt) {
        const int k0 = kt * BK, s = kt % STAGES;
        if (q < A_COPIES) {
            const bool ok = (a_rows_inside >> q & 1) && k0 + a_chunk * 8 < K;
            cp_async_16(a_base + s * A_BYTES + a_dst + q * A_ROW_STEP * A_ROW_BYTES,
                        ok ? a_src + (k0 + q * a_rows_apart) : A, ok);
        } else {
            const int i = q - A_COPIES;
            const bool ok = b_columns_inside && k0 + b_row + 8 * i < K;
            cp_async_16(b_base + s * B_BYTES + b_dst + i * 8 * 128,
                        ok ? b_src + ((size_t)(unsigned)k0 * (unsigned)N + i * b_rows_apart) : B, ok);
        }
    };

    // ldmatrix offsets, fixed: lanes 0-15 address rows 0-15 of a 16×16 piece, lanes 16-31 the same
    // rows one chunk (8 k) further. The chunk of k-step p is 2p + lane/16, and (2p + h) ^ x equals
    // (h ^ x) ^ 2p: so the swizzled offset for k-step p is the offset for k-step 0 XOR (p << 5), and for
    // B's n-pair j (chunk 2j + h) the offset for j = 0 XOR (j << 5).
    // ldmatrix 偏移，固定不变：lane 0-15 寻址一个 16×16 块的第 0-15 行，lane 16-31 寻址同样的行、再往后一个
    // 块（8 个 k）。k 步 p 的块号是 2p + lane/16，而 (2p + h) ^ x 等于 (h ^ x) ^ 2p：所以 k 步 p 的重排后偏
    // 移等于 k 步 0 的偏移 XOR (p << 5)；B 的第 j 个 n 对（第 2j + h 块）的偏移等于 j = 0 时的偏移 XOR (j <<
    // 5)。
    const unsigned a_lane = a_tile_offset<BK>(wm + lane % 16, lane / 16);
    const unsigned b_lane = (wn / 64) * BOX_BYTES + (lane % 16) * 128 + (((lane / 16) ^ (lane & 7)) << 4);

    using AFrag = unsigned[4][4];
    using BFrag = unsigned[8][2];
    // One piece of k-step p's fragments from stage s: A's m16 tile `part` (rows 16·part …) and B's
    // n-pair `part` (two n8 tiles). The four pieces make the whole k-step.
    // 从流水级 s 取 k 步 p 的一部分片段：A 的第 `part` 个 m16 分块（第 16·part … 行）和 B 的第 `part`
    // 个 n 对（两个 n8 分块）。四部分合起来是整个 k 步。
    auto load_fragment_piece = [&](int s, int p, int part, AFrag& a, BFrag& b) {
        const unsigned as = a_base + s * A_BYTES, bs = b_base + s * B_BYTES;
        ldmatrix_x4<false>(a[part][0], a[part][1], a[part][2], a[part][3],
                           as + (a_lane ^ (p << 5)) + part * 16 * A_ROW_BYTES);
        ldmatrix_x4<true>(b[2 * part][0], b[2 * part][1], b[2 * part + 1][0], b[2 * part + 1][1],
                          bs + (b_lane ^ (part << 5)) + p * 16 * 128);
    };

    auto issue_tma = [&](int kt) {
        const int s = kt % STAGES;
        tma_load_k_tile<BM, BN>(map_a, map_b, a_base + s * A_BYTES, b_base + s * B_BYTES, m0, n0, kt * BK,
                                smem_u32(&full[s]));
    };

    // Wait until every warp has left the stage of k-tile `done` (its "empty" mbarrier), before
    // refilling that stage. refill_lag = 1: done = kt - 1, the k-tile just finished, so the waiting
    // thread keeps pace with the slowest warp; 2: done = kt - 2, which every warp left a whole k-tile
    // ago, so the wait is almost always already over (one k-tile less in flight).
    // 重新填充 k 分块 `done` 的流水级之前，先等每个线程束都离开它（它的 "empty" mbarrier）。refill_lag =
    // 1：done = kt - 1，即刚算完的 k 分块，等待的线程要跟上最慢的线程束；取 2：done = kt - 2，每个线程束
    // 在整整一个 k 分块之前就已离开，所以这个等待几乎总是早已结束（在途的 k 分块少一个）。
    auto wait_stage_free = [&](int done) {
        if (done >= 0) wait_phase(smem_u32(&empty[done % STAGES]), (done / STAGES) % 2);
    };

    // One slot: load the fragments of k-step p of k-tile kt, with whatever must happen at that point.
    // From the slot of k-tile kt's k-step 0 to the slot of k-tile kt+1's k-step 0, this thread issues
    // its copies of k-tile kt + STAGES - refill_lag into the stage that k-tile kt - refill_lag used:
    // in burst here, at k-step 0; spread, in mma_step. live = kt < tiles_k (false: the slot after the
    // last k-step, nothing to load), passed in so that the compiler sees it constant wherever it is.
    // A slot is three parts: the wait for the k-tile (k-step 0 only), the four pieces of fragments,
    // and what follows the last piece (freeing the stage, burst copies). ldmatrix_issue = spread runs
    // them inside the previous k-step's mma.sync (see mma_step); slot runs them back to back.
    // 一个槽位：加载 k 分块 kt 中 k 步 p 的片段，以及此时必须做的其他事。从 k 分块 kt 的 k 步 0 的槽位到
    // k 分块 kt+1 的 k 步 0 的槽位之间，这个线程把它负责的 k 分块 kt + STAGES - refill_lag 拷贝到 k 分块
    // kt - refill_lag 用过的流水级：burst 时在这里（k 步 0）发出；spread 时在 mma_step 中发出。live = kt
    // < tiles_k（false：最后一个 k 步之后的槽位，没有东西要加载），作为参数传入，让编译器在每个调用处都把
    // 它看作常量。
    // 一个槽位分三部分：对 k 分块的等待（只在 k 步 0）、四部分片段、以及最后一部分之后的事（释放流水级、
    // burst 拷贝）。ldmatrix_issue = spread 把它们放进前一个 k 步的 mma.sync 之间执行（见 mma_step）；
    // slot 则把它们紧挨着依次执行。
    auto slot_wait = [&](int kt, int p) {
        if (p != 0) return;  // k-tile kt's first fragments: it must have landed
                             // k 分块 kt 最初的片段：它必须已经到达
        if constexpr (FEED == FEED_CP_ASYNC_BARRIER) {
            if (COPY) asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
            if constexpr (!(PARTS & MMA_NO_BARRIER))
                __syncthreads();  // everyone's copies of kt are visible; everyone has left kt-1
                                  // 所有线程对 kt 的拷贝都已可见；所有线程都已离开 kt-1
        } else if (COPY) {
            wait_phase(smem_u32(&full[kt % STAGES]), (kt / STAGES) % 2);
        }
    };
    auto slot_finish = [&](int kt, int p) {
        if (MBARRIERS && COPY && p == KSTEPS - 1) {  // this warp's last ldmatrix of the stage is done
                                                     // 这个线程束在该流水级上的最后一条 ldmatrix 已完成
            __syncwarp();
            if (lane == 0) mbar_arrive(smem_u32(&empty[kt % STAGES]));
        }
        if (FEED != FEED_TMA && !SPREAD_COPIES && COPY && p == 0) {  // burst: all the refill, now
                                                                     // burst：现在发出全部重新填充的拷贝
            if (MBARRIERS) wait_stage_free(kt - REFILL_LAG);
#pragma unroll
            for (int q = 0; q < COPIES; ++q) copy_chunk(q, kt + STAGES - REFILL_LAG);
        }
    };
    auto slot = [&](int kt, int p, AFrag& a, BFrag& b, bool live) {
        if (!live) return;
        slot_wait(kt, p);
        if (MATH) {
#pragma unroll
            for (int part = 0; part < 4; ++part) load_fragment_piece(kt % STAGES, p, part, a, b);
        }
        slot_finish(kt, p);
    };

    float acc[4][8][4];  // [m16 tile][n8 tile][fragment element]
                         // [m16 分块][n8 分块][片段元素]
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    // The mma.sync of one k-step, which follows slot (kt, p). copy_issue = spread: that slot's share of
    // the copies goes between the rows of mma.sync, one after each row of 8 (and a wait for a stage
    // to be free goes after the first row, so the Tensor Cores have work during it; TMA: thread 0's
    // refill too). The k-step that ends the slots' copies closes them: a commit group (barrier), or
    // this thread's arrival on the stage's "full" mbarrier once they land (mbarrier). math = false:
    // only the copies (the first slot of frag_buffers = 2 has no mma.sync after it).
    // ldmatrix_issue = spread (load_next): the slot itself also happens here, one piece after each
    // row, into a_next / b_next; the wait for a new k-tile after the first row.
    // mma_order = serpentine: odd rows run their 8 mma.sync right to left, so the row's first
    // mma.sync uses the B fragment that the previous one just used.
    // 一个 k 步的 mma.sync，跟在槽位 (kt, p) 之后。copy_issue = spread：这个槽位的那份拷贝穿插在各行
    // mma.sync 之间，每行 8 条之后发一条（等待某个流水级空出来的操作放在第一行之后，让张量核心在等待期间有
    // 活干；TMA 时线程 0 的重新填充也是如此）。这些拷贝由最后发出它们的那个 k 步了结：提交一个 commit group
    // （barrier），或者等拷贝到达后由这个线程在流水级的 "full" mbarrier 上执行 arrive（mbarrier）。math =
    // false：只发拷贝（frag_buffers = 2 时第一个槽位之后没有 mma.sync）。
    // ldmatrix_issue = spread（load_next）：槽位本身也在这里执行，每行之后加载一部分，写进 a_next / b_next；
    // 对新 k 分块的等待放在第一行之后。
    // mma_order = serpentine：奇数行的 8 条 mma.sync 从右往左执行，这样一行的第一条 mma.sync 用的正是上一条
    // 刚用过的 B 片段。
    auto mma_step = [&](const AFrag& a, const BFrag& b, AFrag& a_next, BFrag& b_next, int kt, int p, bool math,
                        bool live, bool load_next) {
        const int fill = kt + STAGES - REFILL_LAG;
        const bool refill = COPY && live;  // not live: no slot before, nothing to refill
                                           // 不是 live：之前没有槽位，没有要重新填充的
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if (MATH && math) {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const int n = SERPENTINE && i % 2 ? 7 - j : j;
                    mma_16816<BF16>(acc[i][n], a[i], b[n]);
                }
            }
            // The barrier feed's refill may start only after the barrier of k-tile kt (it is what says
            // every warp has left the stage): with ldmatrix_issue = spread that barrier is here.
            // barrier 供数时，重新填充只能在 k 分块 kt 的屏障之后开始（正是这个屏障说明每个线程束都已离开
            // 该流水级）：ldmatrix_issue = spread 时，这个屏障就在这里。
            constexpr bool BARRIER_FIRST = FEED == FEED_CP_ASYNC_BARRIER;
            if (BARRIER_FIRST && load_next && live && i == 0) slot_wait(kt, p);
            if (refill && i == 0 && p == 0) {  // a refill starts: wait until every warp has left its stage
                                               // 开始一次重新填充：等到每个线程束都离开它的流水级
                if constexpr (FEED == FEED_TMA) {
                    if (tid == 0 && fill < tiles_k) {
                        wait_stage_free(kt - REFILL_LAG);
                        issue_tma(fill);
                    }
                } else if constexpr (MBARRIERS && SPREAD_COPIES) {
                    wait_stage_free(kt - REFILL_LAG);
                }
            }
            if (refill && FEED != FEED_TMA && SPREAD_COPIES && i < PER_STEP) copy_chunk(p * PER_STEP + i, fill);
            if (load_next && live) {
                if (!BARRIER_FIRST && i == 0) slot_wait(kt, p);  // after the refill's start: TMA asks early
                                                                 // 在重新填充开始之后：TMA 提早发出请求
                if (MATH) load_fragment_piece(kt % STAGES, p, i, a_next, b_next);
                if (i == 3) slot_finish(kt, p);
            }
        }
        if (FEED != FEED_TMA && COPY && p == COMMIT_STEP && live) {
            if constexpr (MBARRIERS) {
                if (fill < tiles_k) cp_async_arrive(smem_u32(&full[fill % STAGES]));
            } else {
                asm volatile("cp.async.commit_group;\n" ::);  // an empty group keeps the count uniform
                                                              // 提交一个空组，让计数保持一致
            }
        }
    };

    // Fill the pipeline: k-tiles 0 … STAGES-1-refill_lag (the slots of k-tile 0 issue the next one).
    // 填满流水线：k 分块 0 … STAGES-1-refill_lag（k 分块 0 的各个槽位再发出下一个）。
    for (int kt = 0; kt < STAGES - REFILL_LAG; ++kt) {
        if (COPY && kt < tiles_k) {
            if constexpr (FEED == FEED_TMA) {
                if (tid == 0) issue_tma(kt);
            } else {
#pragma unroll
                for (int q = 0; q < COPIES; ++q) copy_chunk(q, kt);
            }
        }
        if constexpr (FEED == FEED_CP_ASYNC_BARRIER) asm volatile("cp.async.commit_group;\n" ::);
        if constexpr (FEED == FEED_CP_ASYNC_MBARRIER) if (COPY && kt < tiles_k) cp_async_arrive(smem_u32(&full[kt]));
    }

    AFrag a_frag[FRAG_BUFFERS];
    BFrag b_frag[FRAG_BUFFERS];
    if constexpr (FRAG_BUFFERS == 2) {
        slot(0, 0, a_frag[0], b_frag[0], tiles_k > 0);
        mma_step(a_frag[0], b_frag[0], a_frag[1], b_frag[1], 0, 0, false, tiles_k > 0, false);  // its copies, no math
                                                                                                // 只发拷贝，不计算
    }
    for (int kt = 0; kt < tiles_k; ++kt) {
#pragma unroll
        for (int p = 0; p < KSTEPS; ++p) {
            if constexpr (FRAG_BUFFERS == 1) {
                slot(kt, p, a_frag[0], b_frag[0], true);
                mma_step(a_frag[0], b_frag[0], a_frag[0], b_frag[0], kt, p, true, true, false);
            } else {  // the next k-step's fragments (possibly the next k-tile's), then or during this k-step's math
                      // 下一个 k 步的片段（可能属于下一个 k 分块），在这个 k 步的计算之前或之中加载
                const int next_kt = p == KSTEPS - 1 ? kt + 1 : kt, next_p = (p + 1) % KSTEPS;
                const bool live = p < KSTEPS - 1 || kt + 1 < tiles_k;
                if constexpr (!SPREAD_LDMATRIX) slot(next_kt, next_p, a_frag[(p + 1) % 2], b_frag[(p + 1) % 2], live);
                mma_step(a_frag[p % 2], b_frag[p % 2], a_frag[(p + 1) % 2], b_frag[(p + 1) % 2], next_kt, next_p,
                         true, live, SPREAD_LDMATRIX);
            }
        }
    }
    if constexpr (FEED != FEED_TMA) asm volatile("cp.async.wait_all;\n" ::);  // the zeros past the end too
                                                                              // 也包括越过末尾写入的 0

    store_accumulators(acc, C, M, N, m0 + wm, n0 + wn, lane);
}

// copy = "cp_async" (frag_buffers = 2 or copy_issue = "spread") and copy = "cp_async_mbarrier". BN
// threads; with BN = 128 two blocks share an SM (registers: 2 × 128 × 255 fit), so one block's barrier
// waits and stores run beside the other's mma.sync.
// copy = "cp_async"（frag_buffers = 2 或 copy_issue = "spread"）和 copy = "cp_async_mbarrier"。BN 个线程；
// BN = 128 时两个线程块共用一个 SM（寄存器：2 × 128 × 255 放得下），所以一个线程块在屏障处的等待和写回，与
// 另一个线程块的 mma.sync 同时进行。
template <bool BF16, int STAGES, bool MBARRIERS, int BN, int BK, int FRAG_BUFFERS, bool SPREAD_COPIES,
          int REFILL_LAG = 1, bool SPREAD_LDMATRIX = false, bool SERPENTINE = false, int PARTS = MMA_ALL>
__global__ void __launch_bounds__(BN, BN == 128 ? 2 : 1)
gemm_mma_overlapped(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                    float* __restrict__ C, int M, int N, int K)
{
    mma_overlapped<BF16, STAGES, MBARRIERS ? FEED_CP_ASYNC_MBARRIER : FEED_CP_ASYNC_BARRIER, BN, BK, FRAG_BUFFERS,
                   SPREAD_COPIES, REFILL_LAG, SPREAD_LDMATRIX, SERPENTINE, PARTS>(A, B, nullptr, nullptr, C, M, N, K);
}

// copy = "tma" with frag_buffers = 2.
// copy = "tma"，frag_buffers = 2。
template <bool BF16, int STAGES, int BN, int REFILL_LAG = 1, bool SPREAD_LDMATRIX = false, bool SERPENTINE = false,
          int PARTS = MMA_ALL>
__global__ void __launch_bounds__(BN, BN == 128 ? 2 : 1)
gemm_mma_tma_overlapped(const TensorMap* __restrict__ map_a, const TensorMap* __restrict__ map_b,
                        float* __restrict__ C, int M, int N, int K)
{
    mma_overlapped<BF16, STAGES, FEED_TMA, BN, HOPPER_BK, 2, false, REFILL_LAG, SPREAD_LDMATRIX, SERPENTINE, PARTS>(
        nullptr, nullptr, map_a, map_b, C, M, N, K);
}
