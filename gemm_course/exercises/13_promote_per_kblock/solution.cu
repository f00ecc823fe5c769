// Level 13 — an FP8 GEMM with fine-grained scales, one thread per element of C, on the CPU.
//
// A: M × K e4m3 bytes, row-major. a_scales: M × KB floats, row-major, KB = ceil(K / 128): the scale of
//    row m in k-block kb, which covers k = 128·kb to min(K, 128·kb + 128) − 1.
// B: N × K e4m3 bytes, row-major (K contiguous, the layout FP8 wgmma reads). b_scales: ceil(N / 128) × KB
//    floats, row-major: one scale per 128 × 128 tile of B (rows n = 128·t to 128·t + 127, one k-block).
// C: M × N floats: C[m, n] = Σ over k of (A[m, k] times its scale) · (B[n, k] times its scale).
// The grader launches fp8_gemm_blockwise<<<grid, block>>>(A, a_scales, B, b_scales, C, M, N, K) with
// grid = (ceil(N / block.x), ceil(M / block.y)): x runs along the columns n of C, y down its rows m.

// e4m3 (Hopper's FP8 "e4m3fn"): 1 sign bit, 4 exponent bits (bias 7), 3 fraction bits; no infinities,
// S.1111.111 is NaN, the largest value is 448. Given: the conversion is not this exercise's lesson.
__device__ float decode_e4m3(unsigned char bits)
{
    const int exponent = (bits >> 3) & 0xF, fraction = bits & 0x7;
    if ((bits & 0x7F) == 0x7F) return nanf("");
    const float magnitude = exponent == 0 ? ldexpf((float)fraction, -9)                  // subnormal: 0.fff · 2^-6
                                          : ldexpf((float)(8 + fraction), exponent - 10); // 1.fff · 2^(e-7)
    return (bits & 0x80) ? -magnitude : magnitude;
}

__global__ void fp8_gemm_blockwise(const unsigned char* A, const float* a_scales, const unsigned char* B,
                                   const float* b_scales, float* C, int M, int N, int K)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;

    // The scales change every 128 of k, so they cannot factor out of the whole sum. Sum one k-block
    // at a time in fresh registers (on the GPU: what the Tensor Cores hand back), then promote that
    // partial sum into the fp32 total, multiplied by the k-block's two scales.
    const int KB = (K + 127) / 128;
    float acc = 0.0f;
    for (int kb = 0; kb < KB; ++kb) {
        const int first = kb * 128, end = min(K, first + 128);  // the last k-block may be shorter
        float part = 0.0f;
        for (int k = first; k < end; ++k)
            part += decode_e4m3(A[(size_t)m * K + k]) * decode_e4m3(B[(size_t)n * K + k]);
        acc += part * (a_scales[(size_t)m * KB + kb] * b_scales[(size_t)(n / 128) * KB + kb]);
    }
    C[(size_t)m * N + n] = acc;
}
