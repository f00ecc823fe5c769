// mechanism: near miss: one thread per strip, the max |a| found walking the strip backwards
// expect: solved
// Level 13 — the 1×128 quantiser of A: one float32 scale per row and per 128 columns.
//
// a:      M × K floats, row-major: element (r, k) is a[r * K + k].
// bits:   M × K bytes, row-major: the e4m3 bit pattern of a[r, k] divided by its strip's scale.
// scales: M × S floats, row-major, S = ceil(K / 128): the scale of row r's strip s, which covers
//         columns 128·s to min(K, 128·s + 128) − 1 (the last strip is shorter when 128 does not divide K).
// A strip's scale maps its largest |a| onto 448, the largest e4m3 value; a strip of zeros gets scale 1.
// The grader launches one thread per strip: quantize_1x128<<<grid, block>>>(a, bits, scales, M, K) with
// grid = (ceil(S / block.x), ceil(M / block.y)): x runs along the strips, y down the rows.

// e4m3 (Hopper's FP8 "e4m3fn"): 1 sign bit, 4 exponent bits (bias 7), 3 fraction bits; no infinities,
// S.1111.111 is NaN, the largest value is 448. Given: the conversion is not this exercise's lesson.
__device__ unsigned char encode_e4m3(float x)  // round to nearest even, saturate at ±448
{
    if (x != x) return 0x7F;
    const unsigned char sign = copysignf(1.0f, x) < 0.0f ? 0x80 : 0x00;
    const float m = fabsf(x);
    if (m >= 448.0f) return sign | 0x7E;
    int binade;
    frexpf(m, &binade);                          // m = f · 2^binade, 0.5 <= f < 1
    const int e = binade - 1 < -6 ? -6 : binade - 1;  // below 2^-6 the subnormals share 2^-6's spacing
    int steps = (int)rintf(ldexpf(m, 3 - e));    // m in units of the spacing 2^(e-3), ties to even
    if (m == 0.0f) return sign;
    int exponent = e + 7;
    if (steps >= 16) { steps /= 2; exponent += 1; }   // rounded up into the next binade
    if (steps < 8) return sign | (unsigned char)steps; // a subnormal (only when e == -6)
    return sign | (unsigned char)((exponent << 3) | (steps - 8));
}

__global__ void quantize_1x128(const float* a, unsigned char* bits, float* scales, int M, int K)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;  // which strip of the row
    const int r = blockIdx.y * blockDim.y + threadIdx.y;  // which row
    const int strips = (K + 127) / 128;
    if (r >= M || s >= strips) return;

    const int first = s * 128, end = min(K, first + 128);  // the last strip may be shorter
    const float* row = a + (size_t)r * K;
    float amax = 0.0f;
    for (int k = end - 1; k >= first; --k)  // the strip walked backwards: another loop, the same strip
        amax = fmaxf(fabsf(row[k]), amax);
    const float scale = amax == 0.0f ? 1.0f : amax / 448.0f;  // a zero strip: any scale works, 1 by convention
    scales[(size_t)r * strips + s] = scale;
    for (int k = first; k < end; ++k)
        bits[(size_t)r * K + k] = encode_e4m3(row[k] / scale);
}
