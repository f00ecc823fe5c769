// Level 0 — transpose: out = in transposed.
//
// in:  rows × cols floats, row-major: element (r, c) is in[r * cols + c].
// out: cols × rows floats, row-major: element (c, r) of out is element (r, c) of in.
// The grader launches transpose<<<grid, block>>>(in, out, rows, cols) with 2-D blocks of several
// shapes and grid = (ceil(cols / block.x), ceil(rows / block.y)): x runs along the columns of in,
// y down its rows, and the grid is rounded up to whole blocks.
__global__ void transpose(const float* in, float* out, int rows, int cols)
{
}
