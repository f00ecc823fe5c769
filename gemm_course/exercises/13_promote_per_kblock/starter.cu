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

    // Per tensor: every value of A shares one scale and every value of B another, so the scales
    // factor out of the sum and are applied once, at the end.
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += decode_e4m3(A[(size_t)m * K + k]) * decode_e4m3(B[(size_t)n * K + k]);
    C[(size_t)m * N + n] = acc * a_scales[0] * b_scales[0];
}
