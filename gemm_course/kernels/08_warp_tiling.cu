// Level 8 — warp tiling: block tile → warp tile → thread tile, double-buffered, 16-byte accesses,
// and an L2-friendly order of blocks. The course's fastest FP32 kernel.
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
//
// Main loop, one barrier per k-tile (Level 4's scheme, 16-byte global loads staged in registers):
//   load tile 0 → registers → shared[0]; barrier
//   for t:  issue global loads of tile t+1 into registers;  compute on shared[t%2];
//           store registers → shared[(t+1)%2];  barrier
//
// Three settings for the last few percent (FRAG_BUFFERS, STEPPED, UNROLL_K; all off by default). The
// counters show the gap to cuBLAS as issue slots with nothing to issue, not as extra instructions:
// with 2 warps per scheduler, a warp that waits leaves its scheduler with one candidate or none.
//   FRAG_BUFFERS = 2: two sets of fragment registers, so the shared loads of step k+1 are in flight
//   while step k's FMAs run. Inside a k-tile the compiler already overlaps them (the k loop is
//   unrolled); what it cannot do is move loads across the barrier. With two sets, the barrier moves
//   before the last step's FMAs, and the next k-tile's first loads hide behind them (lds(k) loads
//   step k's fragments, fma(k) uses them; BK = 16):
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
//
// BK = 32 halves the barriers (and k-tile boundaries) per FMA; its two buffers (83 KB at 64×256) are over
// the 48 KB of static shared memory, so the host then sets DYNAMIC_SHARED and passes their size at launch.
//
// Block order: blocks are numbered along the grid's only dimension and mapped to tiles in groups of
// GROUP_M tile rows (column by column inside a group), so blocks running at the same time share
// rows of A and columns of B in the L2 cache instead of sweeping all of B. GROUP_M = 1 is the plain
// row-by-row order (kept as a setting so that the gain can be measured, not assumed).

#include "common.cuh"

// VEC (the host picks it): true needs K and N multiples of 4 and 16-byte aligned pointers; every
// float4 is then entirely inside or outside its matrix. false loads and stores element by element
// with a guard on each, for any shape. Out-of-range elements load as zeros; only C's elements are
// written.

// MIN_BLOCKS asks the compiler to fit that many blocks per SM (it caps registers accordingly):
// two 256-thread blocks need at most 128 registers per thread.
template <int BM, int BN, int BK, int WM, int WN, bool VEC, int MIN_BLOCKS = 2, int GROUP_M = 8,
          bool BATCHED = false, int FRAG_BUFFERS = 1, bool STEPPED = false, int UNROLL_K = BK,
          bool DYNAMIC_SHARED = false>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
gemm_warp_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K)
{
    if (BATCHED) BATCH_ENTRY(A, B, C, M, N, K);  // one product of a batch per grid z index (common.cuh)
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int WM_ITER = WM / 32, WN_ITER = WN / 16;
    constexpr int TM = 4 * WM_ITER, TN = 4 * WN_ITER;
    constexpr int A_STRIDE = BM + 4;  // breaks the transposed store's bank pattern, keeps 16 B rows
    constexpr int A_LOADS = BM * BK / 4 / THREADS;  // float4 per thread per k-tile
    constexpr int B_LOADS = BK * BN / 4 / THREADS;
    static_assert(A_LOADS * THREADS * 4 == BM * BK && B_LOADS * THREADS * 4 == BK * BN,
                  "each thread loads whole float4s of both tiles");
    static_assert(FRAG_BUFFERS == 1 || (FRAG_BUFFERS == 2 && BK % 2 == 0), "1 or 2 fragment sets, even BK");
    static_assert(BK % UNROLL_K == 0 && UNROLL_K % 2 == 0, "the k-tile is a whole number of unrolled passes");

    // The two buffers of A and B tiles live in static shared memory (at most 48 KB in all), or, with
    // DYNAMIC_SHARED (the host sets it when a deeper k-tile needs more), in dynamic shared memory.
    __shared__ __align__(16) float As_static[DYNAMIC_SHARED ? 4 : 2 * BK * A_STRIDE];
    __shared__ __align__(16) float Bs_static[DYNAMIC_SHARED ? 4 : 2 * BK * BN];
    extern __shared__ __align__(16) float dynamic_tiles[];
    float (*const As)[BK][A_STRIDE] =  // As[buf][k][m]: A transposed
        reinterpret_cast<float (*)[BK][A_STRIDE]>(DYNAMIC_SHARED ? dynamic_tiles : As_static);
    float (*const Bs)[BK][BN] =  // Bs[buf][k][n]
        reinterpret_cast<float (*)[BK][BN]>(DYNAMIC_SHARED ? dynamic_tiles + 2 * BK * A_STRIDE : Bs_static);

    // Grouped block order (see above).
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
    float4 a_next[A_LOADS], b_next[VEC ? 1 : B_LOADS];

    // STEPPED (vector path): a thread's loads of one k-tile lie a fixed number of rows apart (ROWS_A of
    // A, ROWS_B of B) in one column, so they start from one address per operand, which moves by a
    // k-tile per step, and each bounds check is one compare. Without it every load recomputes its
    // 64-bit address and both checks: at 64×256 the SASS of one k-tile holds about 50 more integer
    // instructions (out of about 2300).
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
    const size_t a_first = reinterpret_cast<size_t>(A) + ((size_t)(row0 + a_row) * K + a_col) * sizeof(float);
    const size_t b_first = reinterpret_cast<size_t>(B) + ((size_t)b_row * N + col0 + b_col) * sizeof(float);
    const size_t a_step = (size_t)ROWS_A * K * sizeof(float), b_step = (size_t)ROWS_B * N * sizeof(float);
    const int a_rows_left = M - row0 - a_row;  // load i is inside A if i · ROWS_A < a_rows_left
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
#pragma unroll 1
            for (int k0 = 0; k0 < BK; k0 += UNROLL_K)  // one pass unless UNROLL_K < BK
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
        float frag_a[2][TM], frag_b[2][TN];
        load_fragments(0, 0, frag_a[0], frag_b[0]);
        for (int t = 0; t < tiles_k; ++t) {
            const int cur = t & 1;
            const bool more = t + 1 < tiles_k;
            if (more) load_global((t + 1) * BK, cur ^ 1);
            // With UNROLL_K < BK, k0 is known only at run time, and so is whether this is the last step.
#pragma unroll 1
            for (int k0 = 0; k0 < BK; k0 += UNROLL_K) {
                const bool last_pass = k0 + UNROLL_K == BK;
#pragma unroll
                for (int u = 0; u < UNROLL_K; ++u) {
                    const int k = k0 + u;
                    const int now = u % 2, next = (u + 1) % 2;  // compile-time (UNROLL_K is even)
                    const bool last_step = u == UNROLL_K - 1 && last_pass;  // k == BK - 1
                    if (last_step) {  // every warp has read its last fragments of shared[cur]
                        if (more) store_shared(cur ^ 1);
                        copy_async_wait_all();
                        __syncthreads();
                    }
                    if (!last_step)
                        load_fragments(cur, k + 1, frag_a[next], frag_b[next]);
                    else if (more)
                        load_fragments(cur ^ 1, 0, frag_a[next], frag_b[next]);  // next is 0: BK is even
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
