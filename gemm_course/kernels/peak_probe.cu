// Peak probes — how fast an SM issues one instruction when nothing else is in the way: no memory
// traffic, no barriers, no address arithmetic, only independent chains of the instruction itself.
// The measured rate is the ceiling a GEMM kernel built on that instruction cannot pass, on this GPU
// at the clock it really runs at (the data sheet's peak assumes the top boost clock).
//
//   ffma_peak       CHAINS independent fmaf chains per thread: FP32 FMA rate (Levels 1-8)
//   mma_sync_peak   CHAINS independent m16n8k16 accumulators per warp: Level 10's own mma_16816,
//                   the Ampere-style warp-level Tensor Core instruction, fp16 or bf16 inputs
//   mma_sync_warp_tile
//                   Level 10's inner loop and nothing else: each warp multiplies its 64×(BN/4) warp
//                   tile from one k-tile that stays in shared memory, again and again. LDMATRIX=false
//                   loads the fragments once and repeats only the mma.sync (distinct registers, as in
//                   the kernel); LDMATRIX=true reloads them with ldmatrix every k-step, as the kernel
//                   does. No global memory and no barriers in the loop: the difference to Level 10's
//                   measured speed is what the copies and the pipeline cost.
//   shared_load_probe
//                   Level 8's fragment loads and nothing else: a block of Level 8's threads reads its A
//                   and B fragments (As[k][wm0 + wi·32 + lm·4], Bs[k][wn0 + wj·16 + ln·4], one LDS.128
//                   each, Level 8's tile sizes and padding) from one k-tile, again and again, so that
//                   Nsight Compute can count the passes (wavefronts) of exactly those access patterns
//                   (bank_probe.py). PATTERN: 0 A's loads, 1 B's, 2 both as in Level 8's k-step, 3 32
//                   distinct contiguous float4 per warp, 4 one float4 for the whole warp (the two
//                   bounds).
//
// Each chain depends only on itself, so with enough chains (and warps) the latency of one
// instruction is hidden behind the others and only the issue rate is left. The results are written
// only under a condition that never holds for these inputs, which keeps the compiler from deleting
// the chains without adding a store to the loop.

#include "10_mma_pipeline.cu"

// An empty kernel: timing it with the same events gives the fixed cost of one launch, which the
// probes' runs are made long enough to leave negligible (peak.py).
__global__ void empty_launch(float*) {}

template <int CHAINS>
__global__ void ffma_peak(float* out, int iterations, float scale)
{
    float v[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) v[c] = threadIdx.x * 1e-3f + c;
#pragma unroll 16
    for (int i = 0; i < iterations; ++i)
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) v[c] = fmaf(v[c], scale, 1e-3f);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) sum += v[c];
    if (sum == -1.0f) out[threadIdx.x] = sum;  // never true for these inputs
}

template <bool BF16, int CHAINS>
__global__ void mma_sync_peak(float* out, int iterations)
{
    // Operands: small numbers (1.0 in both formats, packed twice per register), so no chain overflows.
    const unsigned one = BF16 ? 0x3f803f80u : 0x3c003c00u;
    const unsigned a[4] = {one, one, one, one}, b[2] = {one, one};
    float acc[CHAINS][4];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[c][v] = 0.0f;
#pragma unroll 8
    for (int i = 0; i < iterations; ++i)
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) mma_16816<BF16>(acc[c], a, b);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    if (sum == -1.0f) out[threadIdx.x] = sum;  // never true: every accumulator only grows
}

template <bool BF16, int BN, bool LDMATRIX>
__global__ void __launch_bounds__(MMA_THREADS)
mma_sync_warp_tile(float* out, int iterations)
{
    constexpr int NT = BN / 32;  // n8 tiles per warp, as in Level 10
    __shared__ uint4 as[MMA_BM * 4], bs[MMA_BK * (BN / 8)];  // one k-tile, Level 10's swizzled layout
    const unsigned one = BF16 ? 0x3f803f80u : 0x3c003c00u;
    for (int e = threadIdx.x; e < MMA_BM * 4; e += MMA_THREADS) as[e] = make_uint4(one, one, one, one);
    for (int e = threadIdx.x; e < MMA_BK * (BN / 8); e += MMA_THREADS) bs[e] = make_uint4(one, one, one, one);
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * (BN / 4);
    unsigned a[4][4], b[NT][2];
    auto load_fragments = [&](int kk) {  // exactly Level 10's fragment loads
#pragma unroll
        for (int i = 0; i < 4; ++i)
            ldmatrix_x4<false>(a[i][0], a[i][1], a[i][2], a[i][3],
                               smem_u32(as + swizzle_a(wm + i * 16 + lane % 16, kk / 8 + lane / 16)));
#pragma unroll
        for (int j = 0; j < NT / 2; ++j)
            ldmatrix_x4<true>(b[2 * j][0], b[2 * j][1], b[2 * j + 1][0], b[2 * j + 1][1],
                              smem_u32(bs + swizzle_b<BN>(kk + lane % 16, (wn + j * 16) / 8 + lane / 16)));
    };
    float acc[4][NT][4] = {};
    load_fragments(0);
    for (int it = 0; it < iterations; ++it)
#pragma unroll
        for (int kk = 0; kk < MMA_BK; kk += 16) {
            if (LDMATRIX) load_fragments(kk);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) mma_16816<BF16>(acc[i][j], a[i], b[j]);
        }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) sum += acc[i][j][0] + acc[i][j][3];
    if (sum == -1.0f) out[threadIdx.x] = sum;  // never true: every accumulator only grows
}

// One 16-byte shared load that the compiler can neither merge, split nor move out of the loop.
__device__ __forceinline__ float4 lds128(const float* p)
{
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(smem_u32(p)));
    return v;
}

template <int BM, int BN, int WM, int WN, int PATTERN>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
shared_load_probe(float* out, int iterations)
{
    constexpr int BK = 16, A_STRIDE = BM + 4, WARPS_N = BN / WN, THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int WM_ITER = WM / 32, WN_ITER = WN / 16;
    __shared__ __align__(16) float As[BK][A_STRIDE];  // as Level 8: A transposed, rows padded by 4 floats
    __shared__ __align__(16) float Bs[BK][BN];
    for (int e = threadIdx.x; e < BK * A_STRIDE; e += THREADS) (&As[0][0])[e] = 1.0f;
    for (int e = threadIdx.x; e < BK * BN; e += THREADS) (&Bs[0][0])[e] = 1.0f;
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN, lm = lane / 4, ln = lane % 4;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    auto add = [&](float4 v) { sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w; };
    for (int it = 0; it < iterations; ++it)
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (PATTERN == 0 || PATTERN == 2)
#pragma unroll
                for (int wi = 0; wi < WM_ITER; ++wi) add(lds128(&As[k][wm0 + wi * 32 + lm * 4]));
            if (PATTERN == 1 || PATTERN == 2)
#pragma unroll
                for (int wj = 0; wj < WN_ITER; ++wj) add(lds128(&Bs[k][wn0 + wj * 16 + ln * 4]));
            if (PATTERN == 3) add(lds128(&Bs[k][(lane * 4) % BN]));
            if (PATTERN == 4) add(lds128(&Bs[k][0]));
        }
    if (sum.x + sum.y + sum.z + sum.w == -1.0f) out[threadIdx.x] = sum.x;  // never true: the sums only grow
}
