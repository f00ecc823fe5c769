// Level 8 — warp tiling: block tile → warp tile → thread tile, double-buffered, 16-byte accesses,
// and an L2-friendly order of blocks. The course's fastest FP32 kernel.
// 第 8 级：线程束分块。线程块分块 → 线程束分块 → 线程分块，双缓冲，16 字节访问，以及对 L2
// 友好的线程块顺序。这是课程中最快的 FP32 内核。
//
//   block tile BM×BN (one thread block)        warp tile WM×WN (one warp)     thread: (4·WM/32)×(4·WN/16)
//   ┌──────────┬──────────┐                    lanes as an 8 (m) × 4 (n) grid; each lane owns 4×4
//   │  warp 0  │  warp 1  │ ...                sub-tiles repeated every 32 rows and 16 columns:
//   ├──────────┼──────────┤
//   │  warp 2  │  warp 3  │                       cols  ln·4 .. ln·4+3   and  16+ln·4 .. (WN = 32)
//   └──────────┴──────────┘                       rows  lm·4 .. lm·4+3   and  32+lm·4 .. (WM = 64)
//
// Why this shape: for each k, a warp reads its A values as 8 distinct float4 (lanes with the same
// lm share one: a broadcast) and its B values as 4 distinct float4, each set contiguous in shared
// memory, so every shared load is 16 bytes wide and, by the bank model, conflict-free (Nsight Compute
// agrees for A; B's loads take 4 passes, twice the model's, which it counts as the ideal for that
// pattern, not as conflicts: see peak_probe.cu's shared_load_probe), and each thread turns
// (TM + TN)/4 shared loads into TM·TN FMAs (8×8: 4 LDS.128 per 64 FFMA).
// 为什么是这种形状：对每个 k，一个线程束读取的 A 值是 8 个不同的 float4（lm 相同的 lane 共用一个：广播），
// B 值是 4 个不同的 float4，每一组在共享内存中都是连续的，所以每次共享内存加载都是 16 字节宽，按存储体模
// 型也没有冲突（Nsight Compute 对 A 的结论相同；B 的加载需要 4 个波前，是模型的两倍，而它把这算作该访问模
// 式的理想值，不算冲突：见 peak_probe.cu 的 shared_load_probe）；并且每个线程用 (TM + TN)/4 次共享内存加
// 载换来 TM·TN 次 FMA（8×8：每 64 条 FFMA 对应 4 条 LDS.128）。
//
// Main loop, one barrier per k-tile (Level 4's scheme, 16-byte global loads staged in registers):
//   load tile 0 → registers → shared[0]; barrier
//   for t:  issue global loads of tile t+1 into registers;  compute on shared[t%2];
//           store registers → shared[(t+1)%2];  barrier
// 主循环，每个 k 分块一次屏障（第 4 级的方案，16 字节的全局内存加载经由寄存器中转）：
//   分块 0 加载 → 寄存器 → shared[0]；屏障
//   对每个 t：发出分块 t+1 到寄存器的全局内存加载；在 shared[t%2] 上计算；
//             寄存器 → shared[(t+1)%2]；屏障
//
// Three settings for the last few percent (FRAG_BUFFERS, STEPPED, UNROLL_K; all off by default). The
// counters show the gap to cuBLAS as issue slots with nothing to issue, not as extra instructions:
// with 2 warps per scheduler, a warp that waits leaves its scheduler with one candidate or none.
//   FRAG_BUFFERS = 2: two sets of fragment registers, so the shared loads of step k+1 are in flight
//   while step k's FMAs run. Inside a k-tile the compiler already overlaps them (the k loop is
//   unrolled); what it cannot do is move loads across the barrier. With two sets, the barrier moves
//   before the last step's FMAs, and the next k-tile's first loads hide behind them (lds(k) loads
//   step k's fragments, fma(k) uses them; BK = 16):
// 为最后几个百分点准备的三个设置（FRAG_BUFFERS、STEPPED、UNROLL_K；默认都关闭）。计数器显示，与 cuBLAS
// 的差距是有发射槽却无指令可发，而不是多出来的指令：每个调度器只有 2 个线程束时，一个线程束在等待，它的
// 调度器就只剩一个候选甚至没有候选。
//   FRAG_BUFFERS = 2：两套片段寄存器，这样第 k+1 步的共享内存加载在途时，第 k 步的 FMA 正在执行。在一个
//   k 分块之内，编译器已经让二者重叠（k 循环是展开的）；它做不到的是把加载移到屏障的另一侧。有两套寄存器
//   时，屏障移到最后一步的 FMA 之前，下一个 k 分块最初的加载就藏在这些 FMA 后面（lds(k) 加载第 k 步的片
//   段，fma(k) 使用它们；BK = 16）：
//
//     1 set:   ... lds(15) fma(14) fma(15) store barrier │ lds(0) ··wait·· fma(0) lds(1) ...
//     2 sets:  ... lds(15) fma(14) store barrier lds(0) fma(15) │ lds(1) fma(0) ...
//
//   STEPPED = true: a thread's global loads of one k-tile start from one address per operand (an integer) that
//   moves a k-tile per step, instead of each recomputing a 64-bit address and two bounds.
//   UNROLL_K < BK: the k-tile runs as BK / UNROLL_K passes over one copy of UNROLL_K unrolled steps.
//   Fully unrolled, a 64×64 warp tile at BK = 16 is a loop of about 2300 instructions (36 KB), which
//   may outgrow the instruction cache (the 64×256 setting's counters show more no_instruction
//   stalls than the default's); 8 steps halve the code.
//   STEPPED = true：一个线程在一个 k 分块中的全局加载，每个操作数从一个地址（一个整数）出发，这个地址每步前进一个
//   k 分块，而不是每次加载都重新计算 64 位地址和两个边界。
//   UNROLL_K < BK：一个 k 分块分成 BK / UNROLL_K 趟，反复执行同一份展开了 UNROLL_K 步的代码。完全展开时，BK = 16
//   下 64×64 的线程束分块是一个约 2300 条指令（36 KB）的循环，可能超出指令缓存（64×256 设置的计数器显示
//   no_instruction 停顿比默认设置多）；8 步一趟可让代码量减半。
//
// BK = 32 halves the barriers (and k-tile boundaries) per FMA; its two buffers (83 KB at 64×256) are over
// the 48 KB of static shared memory, so the host then sets DYNAMIC_SHARED and passes their size at launch.
// BK = 32 让每次 FMA 分摊的屏障（以及 k 分块边界）减半；它的两个缓冲区（64×256 时为 83 KB）超过了 48 KB 的静态
// 共享内存，所以这时主机端设置 DYNAMIC_SHARED，并在启动时传入它们的大小。
//
// Block order: blocks are numbered along the grid's only dimension and mapped to tiles in groups of
// GROUP_M tile rows (column by column inside a group), so blocks running at the same time share
// rows of A and columns of B in the L2 cache instead of sweeping all of B. GROUP_M = 1 is the plain
// row-by-row order (kept as a setting so that the gain can be measured, not assumed).
// 线程块顺序：线程块沿网格唯一的维度编号，并以 GROUP_M 行分块为一组映射到分块上（组内逐列推进），
// 这样同时运行的线程块在 L2 缓存中共用 A 的行和 B 的列，而不必扫过整个 B。GROUP_M = 1
// 就是普通的逐行顺序（保留为一个设置，以便实测收益，而不是想当然）。

#include "common.cuh"

// VEC (the host picks it): true needs K and N multiples of 4 and 16-byte aligned pointers; every
// float4 is then entirely inside or outside its matrix. false loads and stores element by element
// with a guard on each, for any shape. Out-of-range elements load as zeros; only C's elements are
// written.
// VEC（由主机端选定）：为 true 时要求 K 和 N 是 4 的倍数、指针 16 字节对齐，这样每个 float4
// 要么完全落在矩阵内，要么完全落在矩阵外。为 false 时逐个元素加载和存储，每个元素都做边界判断，
// 适用于任何形状。越界元素加载为 0；只写 C 中的元素。

// MIN_BLOCKS asks the compiler to fit that many blocks per SM (it caps registers accordingly):
// two 256-thread blocks need at most 128 registers per thread.
// MIN_BLOCKS 要求编译器让每个 SM 容纳这么多线程块（编译器据此限制寄存器数）：两个 256
// 线程的线程块要求每个线程最多 128 个寄存器。
template <int BM, int BN, int BK, int WM, int WN, bool VEC, int MIN_BLOCKS = 2, int GROUP_M = 8,
          bool BATCHED = false, int FRAG_BUFFERS = 1, bool STEPPED = false, int UNROLL_K = BK,
          bool DYNAMIC_SHARED = false>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
gemm_warp_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
                                                 // 一批矩阵乘中的一个，对应网格的一个 z 下标（见 common.cuh）
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int WM_ITER = WM / 32, WN_ITER = WN / 16;
    constexpr int TM = 4 * WM_ITER, TN = 4 * WN_ITER;
    constexpr int A_STRIDE = BM + 4;  // breaks the transposed store's bank pattern, keeps 16 B rows
                                      // 打破转置写入的存储体分布规律，同时保持每行 16 字节对齐
    constexpr int A_LOADS = BM * BK / 4 / THREADS;  // float4 per thread per k-tile
                                                    // 每个线程每个 k 分块的 float4 个数
    constexpr int B_LOADS = BK * BN / 4 / THREADS;
    static_assert(A_LOADS * THREADS * 4 == BM * BK && B_LOADS * THREADS * 4 == BK * BN,
                  "each thread loads whole float4s of both tiles");
    static_assert(FRAG_BUFFERS == 1 || (FRAG_BUFFERS == 2 && BK % 2 == 0), "1 or 2 fragment sets, even BK");
    static_assert(BK % UNROLL_K == 0 && UNROLL_K % 2 == 0, "the k-tile is a whole number of unrolled passes");

    // The two buffers of A and B tiles live in static shared memory (at most 48 KB in all), or, with
    // DYNAMIC_SHARED (the host sets it when a deeper k-tile needs more), in dynamic shared memory.
    // A 和 B 分块的两个缓冲区放在静态共享内存中（总共最多 48 KB）；设置了 DYNAMIC_SHARED 时（k 分块更深、
    // 需要更多空间时由主机端设置）则放在动态共享内存中。
    __shared__ __align__(16) float As_static[DYNAMIC_SHARED ? 4 : 2 * BK * A_STRIDE];
    __shared__ __align__(16) float Bs_static[DYNAMIC_SHARED ? 4 : 2 * BK * BN];
    extern __shared__ __align__(16) float dynamic_tiles[];
    float (*const As)[BK][A_STRIDE] =  // As[buf][k][m]: A transposed
                                       // As[buf][k][m]：A 转置存放
        reinterpret_cast<float (*)[BK][A_STRIDE]>(DYNAMIC_SHARED ? dynamic_tiles : As_static);
    float (*const Bs)[BK][BN] =  // Bs[buf][k][n]
        reinterpret_cast<float (*)[BK][BN]>(DYNAMIC_SHARED ? dynamic_tiles + 2 * BK * A_STRIDE : Bs_static);

    // Grouped block order (see above).
    // 分组的线程块顺序（见上文）。
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (blockIdx.x / per_group) * GROUP_M;
    const int group_rows = min(tiles_m - first_m, GROUP_M);
    const int tile_m = first_m + (blockIdx.x % per_group) % group_rows;
    const int tile_n = (blockIdx.x % per_group) / group_rows;
    const int row0 = tile_m * BM, col0 = tile_n * BN;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
    const int lm = lane / 4, ln = lane % 4;

    // The next k-tile of B goes straight to shared memory with 16-byte cp.async on the vector path
    // (common.cuh; no staging registers, which keeps the kernel under the 128-register cap of two
    // blocks per SM); A, stored transposed, still travels through registers.
    // 在向量路径上，B 的下一个 k 分块用 16 字节的 cp.async 直接拷贝到共享内存（见 common.cuh；
    // 不经寄存器中转，使内核保持在每 SM 两个线程块所要求的 128 个寄存器以内）；转置存放的 A
    // 仍经由寄存器传输。
    float4 a_next[A_LOADS], b_next[VEC ? 1 : B_LOADS];

    // STEPPED (vector path): a thread's loads of one k-tile lie a fixed number of rows apart (ROWS_A of
    // A, ROWS_B of B) in one column, so they start from one address per operand, which moves by a
    // k-tile per step, and each bounds check is one compare. Without it every load recomputes its
    // 64-bit address and both checks: at 64×256 the SASS of one k-tile holds about 50 more integer
    // instructions (out of about 2300).
    // STEPPED（向量路径）：一个线程在一个 k 分块中的各次加载位于同一列、彼此相隔固定的行数（A 为 ROWS_A，B
    // 为 ROWS_B），所以每个操作数都从一个地址出发，这个地址每步前进一个 k 分块，每次边界检查只需一次比较。
    // 没有它时，每次加载都要重新计算 64 位地址和两项检查：64×256 时，一个 k 分块的 SASS 中要多出约 50 条整
    // 数指令（总共约 2300 条）。
    constexpr int ROWS_A = THREADS / (BK / 4), ROWS_B = THREADS / (BN / 4);
    static_assert(!STEPPED || (THREADS % (BK / 4) == 0 && THREADS % (BN / 4) == 0),
                  "a thread's loads of one k-tile share one column");
    const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
    const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
    // Addresses as integers, not pointers: in the last tile row or column a thread's loads may lie outside
    // A or B, and C++ does not allow even forming a pointer outside an array, so a pointer is made from an
    // address only after its check. (Offsets in elements instead cost about 45 more instructions per k-tile
    // at 64×256, the compiler scaling each offset again; __ldg keeps the read-only global load that
    // __restrict__ gave, which a pointer made from an integer would lose.)
    // 地址用整数而不是指针表示：在最后一行或最后一列的分块中，线程的加载可能落在 A 或 B 之外，而 C++ 连在数组之
    // 外构造指针都不允许，所以只有在检查通过之后才由地址构造指针。（改用以元素计的偏移，64×256 时每个 k 分块要
    // 多约 45 条指令，因为编译器要再次缩放每个偏移；__ldg 保留了 __restrict__ 带来的只读全局加载，而由整数构造
    // 的指针会丢掉它。）
    const size_t a_first = reinterpret_cast<size_t>(A) + ((size_t)(row0 + a_row) * K + a_col) * sizeof(float);
    const size_t b_first = reinterpret_cast<size_t>(B) + ((size_t)b_row * N + col0 + b_col) * sizeof(float);
    const size_t a_step = (size_t)ROWS_A * K * sizeof(float), b_step = (size_t)ROWS_B * N * sizeof(float);
    const int a_rows_left = M - row0 - a_row;  // load i is inside A if i · ROWS_A < a_rows_left
                                               // i · ROWS_A < a_rows_left 时，第 i 次加载落在 A 之内
    const bool b_col_inside = col0 + b_col < N;

    auto load_global = [&](int k0, int buf) {
        if constexpr (STEPPED && VEC) {
            size_t a_src = a_first + (size_t)k0 * sizeof(float);
            const bool a_col_inside = k0 + a_col < K;
#pragma unroll
            for (int i = 0; i < A_LOADS; ++i, a_src += a_step)
                a_next[i] = (a_col_inside && i * ROWS_A < a_rows_left)
                                ? __ldg(reinterpret_cast<const float4*>(a_src)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            size_t b_src = b_first + (size_t)k0 * N * sizeof(float);
            const int b_rows_left = K - k0 - b_row;
#pragma unroll
            for (int i = 0; i < B_LOADS; ++i, b_src += b_step) {
                const bool ok = b_col_inside && i * ROWS_B < b_rows_left;
                copy_async<16>(&Bs[buf][b_row + i * ROWS_B][b_col], ok ? reinterpret_cast<const float*>(b_src) : B, ok);
            }
            copy_async_commit();
            return;
        }
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = tid + i * THREADS;
            const int gr = row0 + e / (BK / 4), gk = k0 + (e % (BK / 4)) * 4;
            const size_t o = (size_t)gr * K + gk;  // an offset: A + o is formed only where it is inside A
                                                   // 偏移量：只有在 A 之内时才构造 A + o
            if (VEC) {
                a_next[i] = (gr < M && gk < K) ? *reinterpret_cast<const float4*>(A + o)
                                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            } else {
                const bool r = gr < M;
                a_next[i] = make_float4(r && gk < K ? A[o] : 0.0f, r && gk + 1 < K ? A[o + 1] : 0.0f,
                                        r && gk + 2 < K ? A[o + 2] : 0.0f, r && gk + 3 < K ? A[o + 3] : 0.0f);
            }
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int e = tid + i * THREADS;
            const int gk = k0 + e / (BN / 4), gc = col0 + (e % (BN / 4)) * 4;
            const size_t o = (size_t)gk * N + gc;
            if (VEC) {
                const bool ok = gk < K && gc < N;
                copy_async<16>(&Bs[buf][e / (BN / 4)][(e % (BN / 4)) * 4], B + (ok ? o : 0), ok);
            } else {
                const bool r = gk < K;
                b_next[i] = make_float4(r && gc < N ? B[o] : 0.0f, r && gc + 1 < N ? B[o + 1] : 0.0f,
                                        r && gc + 2 < N ? B[o + 2] : 0.0f, r && gc + 3 < N ? B[o + 3] : 0.0f);
            }
        }
        copy_async_commit();
    };
    auto store_shared = [&](int buf) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = tid + i * THREADS;
            const int m = e / (BK / 4), k = (e % (BK / 4)) * 4;
            As[buf][k + 0][m] = a_next[i].x;
            As[buf][k + 1][m] = a_next[i].y;
            As[buf][k + 2][m] = a_next[i].z;
            As[buf][k + 3][m] = a_next[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS && !VEC; ++i) {
            const int e = tid + i * THREADS;
            *reinterpret_cast<float4*>(&Bs[buf][e / (BN / 4)][(e % (BN / 4)) * 4]) = b_next[i];
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    load_global(0, 0);
    store_shared(0);
    copy_async_wait_all();
    __syncthreads();

    const int tiles_k = (K + BK - 1) / BK;
    // A warp's fragments of k-step k from shared buffer buf: its TM values of A and TN of B, as float4s.
    // 一个线程束在共享缓冲区 buf 中第 k 步的片段：它的 TM 个 A 值和 TN 个 B 值，以 float4 读取。
    auto load_fragments = [&](int buf, int k, float (&a)[TM], float (&b)[TN]) {
#pragma unroll
        for (int wi = 0; wi < WM_ITER; ++wi) {
            const float4 v = *reinterpret_cast<const float4*>(&As[buf][k][wm0 + wi * 32 + lm * 4]);
            a[wi * 4 + 0] = v.x, a[wi * 4 + 1] = v.y, a[wi * 4 + 2] = v.z, a[wi * 4 + 3] = v.w;
        }
#pragma unroll
        for (int wj = 0; wj < WN_ITER; ++wj) {
            const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][k][wn0 + wj * 16 + ln * 4]);
            b[wj * 4 + 0] = v.x, b[wj * 4 + 1] = v.y, b[wj * 4 + 2] = v.z, b[wj * 4 + 3] = v.w;
        }
    };
    if constexpr (FRAG_BUFFERS == 1) {
        for (int t = 0; t < tiles_k; ++t) {
            const int cur = t & 1;
            const bool more = t + 1 < tiles_k;
            if (more) load_global((t + 1) * BK, cur ^ 1);  // in flight during the compute below
                                                           // 下面计算期间它在传输途中
#pragma unroll 1
            for (int k0 = 0; k0 < BK; k0 += UNROLL_K)  // one pass unless UNROLL_K < BK
                                                       // 除非 UNROLL_K < BK，否则只有一趟
#pragma unroll
            for (int k = k0; k < k0 + UNROLL_K; ++k) {
                float a[TM], b[TN];
                load_fragments(cur, k, a, b);
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
            }
            if (more) store_shared(cur ^ 1);
            copy_async_wait_all();
            __syncthreads();
        }
    } else {
        // Two sets of fragment registers (see the top of the file): step k+1's shared loads are issued
        // before step k's FMAs, and at the last step of a k-tile the next tile is stored and the
        // barrier passed before those FMAs, so that the next tile's first loads fly meanwhile.
        // 两套片段寄存器（见文件开头）：第 k+1 步的共享内存加载在第 k 步的 FMA 之前发出；到一个 k 分块的最
        // 后一步，先把下一个分块写入共享内存、通过屏障，再执行这些 FMA，让下一个分块最初的加载在此期间进行。
        float frag_a[2][TM], frag_b[2][TN];
        load_fragments(0, 0, frag_a[0], frag_b[0]);
        for (int t = 0; t < tiles_k; ++t) {
            const int cur = t & 1;
            const bool more = t + 1 < tiles_k;
            if (more) load_global((t + 1) * BK, cur ^ 1);
            // With UNROLL_K < BK, k0 is known only at run time, and so is whether this is the last step.
            // UNROLL_K < BK 时，k0 要到运行时才知道，这一步是不是最后一步也一样。
#pragma unroll 1
            for (int k0 = 0; k0 < BK; k0 += UNROLL_K) {
                const bool last_pass = k0 + UNROLL_K == BK;
#pragma unroll
                for (int u = 0; u < UNROLL_K; ++u) {
                    const int k = k0 + u;
                    const int now = u % 2, next = (u + 1) % 2;  // compile-time (UNROLL_K is even)
                                                                // 编译期已知（UNROLL_K 是偶数）
                    const bool last_step = u == UNROLL_K - 1 && last_pass;  // k == BK - 1
                    if (last_step) {  // every warp has read its last fragments of shared[cur]
                                      // 每个线程束都已读完它在 shared[cur] 中的最后一批片段
                        if (more) store_shared(cur ^ 1);
                        copy_async_wait_all();
                        __syncthreads();
                    }
                    if (!last_step)
                        load_fragments(cur, k + 1, frag_a[next], frag_b[next]);
                    else if (more)
                        load_fragments(cur ^ 1, 0, frag_a[next], frag_b[next]);  // next is 0: BK is even
                                                                                 // next 为 0：BK 是偶数
#pragma unroll
                    for (int i = 0; i < TM; ++i)
#pragma unroll
                        for (int j = 0; j < TN; ++j) acc[i][j] += frag_a[now][i] * frag_b[now][j];
                }
            }
        }
    }

#pragma unroll
    for (int wi = 0; wi < WM_ITER; ++wi)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = row0 + wm0 + wi * 32 + lm * 4 + i;
#pragma unroll
            for (int wj = 0; wj < WN_ITER; ++wj) {
                const int c = col0 + wn0 + wj * 16 + ln * 4;
                const int ai = wi * 4 + i, bj = wj * 4;
                if (VEC) {
                    if (r < M && c < N)
                        *reinterpret_cast<float4*>(C + (size_t)r * N + c) =
                            make_float4(acc[ai][bj], acc[ai][bj + 1], acc[ai][bj + 2], acc[ai][bj + 3]);
                } else if (r < M) {
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        if (c + j < N) C[(size_t)r * N + c + j] = acc[ai][bj + j];
                }
            }
        }
}
