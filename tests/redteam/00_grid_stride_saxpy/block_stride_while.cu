// mechanism: near miss: the grid-stride loop written as a while loop over block-sized steps (block b takes blocks b, b + gridDim.x, ...)
// expect: solved
__global__ void saxpy(int n, float a, const float* x, float* y)
{
    int tile = blockIdx.x;
    while (tile * blockDim.x < n) {
        const int i = tile * blockDim.x + threadIdx.x;
        if (i < n) y[i] = fmaf(a, x[i], y[i]);
        tile += gridDim.x;
    }
}
