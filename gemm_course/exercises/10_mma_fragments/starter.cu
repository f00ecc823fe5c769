// Level 10 — Tensor Cores without the WMMA wrapper: mma.sync + ldmatrix + a multi-stage cp.async
// pipeline, with an XOR-swizzled shared layout. fp16 or bf16 inputs (BF16), fp32 accumulation, fp32 C.
// sm_80+. (The level's file holds two more kernels, the same math fed by TMA and overlapped; this
// exercise's copy keeps the first one, with 32-deep k-tiles.)
// 第 10 级：不经 WMMA 封装使用张量核心。mma.sync + ldmatrix + 多流水级的 cp.async 流水线，
// 共享内存采用 XOR 重排布局。输入为 fp16 或 bf16（BF16），fp32 累加，C 为 fp32。sm_80 及以上。
// （本级的文件里还有两个内核，同样的计算改由 TMA 供数并相互重叠；本练习的代码只保留第一个，k 分块深
// 32。）
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
//
// cp.async copies without registers and fills zeros past the edges; of the STAGES buffers, tiles
// kt+1 … kt+STAGES-1 are in flight while tile kt is computed; one ldmatrix loads a warp's 8×8
// matrices.
// cp.async 拷贝时不经过寄存器，越过边缘的部分填 0；在 STAGES 个缓冲区中，计算分块 kt 的同时，分块
// kt+1 … kt+STAGES-1 在传输途中；一条 ldmatrix 加载一个线程束的多个 8×8 矩阵。
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
//     A：c ^ ((r / 2) % 4)          B：c ^ (r % 8)
// 就让任何一次这样的读取中的 8 个块落在 8 个不同的 16 字节存储体组上，没有冲突；拷贝进来和 ldmatrix
// 读出用的是同一个函数，所以这个置换对计算是透明的。BK = 64 时 A 的一行是 8 个块（128 B），A
// 的重排变成 c ^ (r % 8)，与 B 相同：每次浮点运算分摊的屏障减半，每个流水级的共享内存翻倍。
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

// ---- exercise: the index math of B's fragments and of the accumulators ---------------------------
// One ldmatrix.x4.trans loads the 16 (k) × 16 (n) piece of B at k-step kk and columns n0 … n0 + 15:
// lane gives the address of one 16-byte row, 8 columns of n at one k. b_ldmatrix_k(lane) is that
// row's k within the piece (0–15), b_ldmatrix_chunk(lane) which of the piece's two 8-column chunks
// (0: n0 …, 1: n0 + 8 …). Registers 0–3 then must hold b[2j][0], b[2j][1], b[2j+1][0], b[2j+1][1]:
// the B fragments of the n8 tiles at n0 and n0 + 8.
// ---- 练习：B 的片段和累加器的下标计算 ------------------------------------------------------------
// 一条 ldmatrix.x4.trans 加载 B 中位于 k 步 kk、第 n0 … n0 + 15 列的 16 (k) × 16 (n) 块：每个 lane
// 给出一个 16 字节行的地址，即同一个 k 上的 8 列 n。b_ldmatrix_k(lane) 是该行在块内的 k（0–15），
// b_ldmatrix_chunk(lane) 是块中两个 8 列块里的哪一个（0：n0 …，1：n0 + 8 …）。之后寄存器 0–3
// 必须依次存放 b[2j][0]、b[2j][1]、b[2j+1][0]、b[2j+1][1]：即 n0 和 n0 + 8 处两个 n8 分块的 B
// 片段。
__device__ __forceinline__ int b_ldmatrix_k(int lane)
{
    return 0;
}

__device__ __forceinline__ int b_ldmatrix_chunk(int lane)
{
    return 0;
}

// The element of a 16×8 tile of C that accumulator register `reg` (0–3) of `lane` holds after
// mma.sync.m16n8k16: its row (0–15) and its column (0–7).
// `lane` 的第 `reg` 个累加器寄存器（0–3）在 mma.sync.m16n8k16 之后持有 C 的一个 16×8
// 分块中的哪个元素：它的行（0–15）和列（0–7）。
__device__ __forceinline__ int accumulator_row(int lane, int reg)
{
    return 0;
}

__device__ __forceinline__ int accumulator_col(int lane, int reg)
{
    return 0;
}
// ---- end of the exercise ------------------------------------------------------------------------
// ---- 练习结束 -----------------------------------------------------------------------------------

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

// A warp's MT × NT accumulator tiles into C, whose tile starts at (row0, col0).
// 把一个线程束的 MT × NT 个累加器分块写入 C，其分块从 (row0, col0) 开始。
template <int MT, int NT>
__device__ __forceinline__ void store_accumulators(const float (&acc)[MT][NT][4], float* C, int M, int N,
                                                   int row0, int col0, int lane)
{
    // ---- exercise: write every accumulator of the warp's MT × NT tiles into C (only inside M × N) ----
    // ---- 练习：把线程束 MT × NT 个分块的每个累加器写入 C（只写 M × N 之内）----

    // ---- end of the exercise -----------------------------------------------------------------------
    // ---- 练习结束 ----------------------------------------------------------------------------------
}

template <int STAGES, bool BF16, int BN = 128, int BK = MMA_BK, int PARTS = MMA_ALL>
__global__ void __launch_bounds__(MMA_THREADS, BN == 128 ? 2 : 1)
gemm_mma_pipeline(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                  float* __restrict__ C, int M, int N, int K)
{
    static_assert(!((PARTS & MMA_NO_BARRIER) && (PARTS & MMA_COPIES)), "without the barrier, copies would race");
    extern __shared__ __align__(128) unsigned char smem[];
    static_assert(BK == 32, "this copy of the kernel is written for 32-deep k-tiles (swizzle_a)");
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
            // ---- exercise: this k-step's B fragments (ldmatrix_x4<true>), then acc += a · b for the warp's
            //      4 × NT tiles of 16×8 (mma_16816) ------------------------------------------------------
            // ---- 练习：本 k 步的 B 片段（ldmatrix_x4<true>），然后对线程束 4 × NT 个 16×8 分块
            //      计算 acc += a · b（mma_16816）---------------------------------------------------

            // ---- end of the exercise -----------------------------------------------------------------
            // ---- 练习结束 ----------------------------------------------------------------------------
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);

    store_accumulators(acc, C, M, N, row0 + wm, col0 + wn, lane);
}
