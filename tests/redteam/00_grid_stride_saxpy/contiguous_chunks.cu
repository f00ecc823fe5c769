// mechanism: each thread updates one contiguous chunk of ceil(n / threads) elements (right, but not a grid-stride loop)
// expect: failed grid_stride
// message: a grid-stride loop gives it
__global__ void saxpy(int n, float a, const float* x, float* y)
{
    const int threads = gridDim.x * blockDim.x;
    const int chunk = (n + threads - 1) / threads;
    const int first = (blockIdx.x * blockDim.x + threadIdx.x) * chunk;
    for (int i = first; i < first + chunk && i < n; ++i)
        y[i] = a * x[i] + y[i];
}
