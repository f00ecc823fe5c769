// Level 13 — an FP8 GEMM with fine-grained scales, one thread per element of C, on the CPU.
// 第 13 级：带细粒度缩放的 FP8 GEMM，在 CPU 上运行，每个线程计算 C 的一个元素。
//
// A: M × K e4m3 bytes, row-major. a_scales: M × KB floats, row-major, KB = ceil(K / 128): the scale of
//    row m in k-block kb, which covers k = 128·kb to min(K, 128·kb + 128) − 1.
// B: N × K e4m3 bytes, row-major (K contiguous, the layout FP8 wgmma reads). b_scales: ceil(N / 128) × KB
//    floats, row-major: one scale per 128 × 128 tile of B (rows n = 128·t to 128·t + 127, one k-block).
// C: M × N floats: C[m, n] = Σ over k of (A[m, k] times its scale) · (B[n, k] times its scale).
// The grader launches fp8_gemm_blockwise<<<grid, block>>>(A, a_scales, B, b_scales, C, M, N, K) with
// grid = (ceil(N / block.x), ceil(M / block.y)): x runs along the columns n of C, y down its rows m.
// A：M × K 个 e4m3 字节，行主序。a_scales：M × KB 个 float，行主序，KB = ceil(K / 128)：第 m 行在
//    第 kb 个 k 块中的缩放因子，该块覆盖 k = 128·kb 到 min(K, 128·kb + 128) − 1。
// B：N × K 个 e4m3 字节，行主序（K 连续，即 FP8 wgmma 读取的布局）。b_scales：ceil(N / 128) × KB 个
//    float，行主序：B 的每个 128 × 128 分块一个缩放因子（第 n = 128·t 到 128·t + 127 行，一个 k 块）。
// C：M × N 个 float：C[m, n] = 对 k 求和 (A[m, k] 乘以其缩放因子) · (B[n, k] 乘以其缩放因子)。
// 评分器启动 fp8_gemm_blockwise<<<grid, block>>>(A, a_scales, B, b_scales, C, M, N, K)，
// grid = (ceil(N / block.x), ceil(M / block.y))：x 对应 C 的列号 n（横向），y 对应行号 m（纵向）。

// e4m3 (Hopper's FP8 "e4m3fn"): 1 sign bit, 4 exponent bits (bias 7), 3 fraction bits; no infinities,
// S.1111.111 is NaN, the largest value is 448. Given: the conversion is not this exercise's lesson.
// e4m3（Hopper 的 FP8 “e4m3fn”）：1 个符号位，4 个指数位（偏置 7），3 个尾数位；没有无穷大，
// S.1111.111 是 NaN，最大值为 448。这部分直接给出：格式转换不是本练习的内容。
__device__ float decode_e4m3(unsigned char bits)
{
    const int exponent = (bits >> 3) & 0xF, fraction = bits & 0x7;
    if ((bits & 0x7F) == 0x7F) return nanf("");
    const float magnitude = exponent == 0 ? ldexpf((float)fraction, -9)                  // subnormal: 0.fff · 2^-6
                                                                                         // 次正规数：0.fff · 2^-6
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
    // 按张量缩放：A 的所有值共用一个缩放因子，B 的所有值共用另一个，所以缩放因子可以提到求和之外，
    // 最后只乘一次。
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += decode_e4m3(A[(size_t)m * K + k]) * decode_e4m3(B[(size_t)n * K + k]);
    C[(size_t)m * N + n] = acc * a_scales[0] * b_scales[0];
}
