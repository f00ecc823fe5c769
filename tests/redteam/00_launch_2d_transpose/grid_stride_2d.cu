// mechanism: near miss: a 2-D grid-stride loop (each thread still gets exactly its element on the grids the grader launches), guard inside the loop bounds
// expect: solved
__global__ void transpose(const float* in, float* out, int rows, int cols)
{
    for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y)
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
            out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}
