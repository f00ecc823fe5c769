// mechanism: only the first block row works: each of its threads walks down its column of in, one row of blocks after another
// expect: failed one_per_element
__global__ void transpose(const float* in, float* out, int rows, int cols)
{
    if (blockIdx.y != 0) return;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int r = threadIdx.y; r < rows; r += blockDim.y)
        out[c * rows + r] = in[r * cols + c];
}
