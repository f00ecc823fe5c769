// mechanism: thread (0, 0) of block (0, 0) transposes the whole matrix in two loops; every other thread returns
// expect: failed one_per_element
// message: read 561 elements of in
__global__ void transpose(const float* in, float* out, int rows, int cols)
{
    if (blockIdx.x != 0 || blockIdx.y != 0 || threadIdx.x != 0 || threadIdx.y != 0) return;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            out[c * rows + r] = in[r * cols + c];
}
