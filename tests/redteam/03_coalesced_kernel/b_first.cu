// mechanism: near miss: the transposed, padded tile, with B loaded and stored before A
// expect: solved
// Level 3 — a tiled kernel with every access at its ideal cost: coalesced global loads and stores,
// conflict-free shared stores and reads, with the A piece kept transposed (k-major) in shared memory.
//
// Thread (ty, tx) copies element (ty, tx) of each piece: a warp (fixed ty) reads 32 consecutive
// floats of one row of A and of B (4 sectors each). The A element is (m = ty, k = tx) and goes to
// row k = tx of the transposed piece: lane tx writes word tx * A_STRIDE + ty. With A_STRIDE = TILE
// every lane would hit bank ty (a 32-way conflict); one padding word per row puts lane tx in bank
// (tx + ty) % 32, all different. The inner loop reads A(m = ty, k): one word per warp, a broadcast.

template <int TILE, int LOAD_ORDER, int A_LAYOUT, int B_LAYOUT = 0>
__global__ void __launch_bounds__(TILE * TILE)
gemm_coalescing_banks(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
    constexpr int A_STRIDE = TILE + 1;  // odd: consecutive k rows start in different banks
    __shared__ float As[TILE * A_STRIDE];  // element (m, k): As[k * A_STRIDE + m]
    __shared__ float Bs[TILE][TILE];       // Bs[k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const float b = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        const float a = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = b;
        As[tx * A_STRIDE + ty] = a;   // B loaded and stored first
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[k * A_STRIDE + ty] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
