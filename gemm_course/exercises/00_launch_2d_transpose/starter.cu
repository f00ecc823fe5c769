// Level 0 — transpose: out = in transposed.
// 第 0 级：转置，out 等于 in 的转置。
//
// in:  rows × cols floats, row-major: element (r, c) is in[r * cols + c].
// out: cols × rows floats, row-major: element (c, r) of out is element (r, c) of in.
// The grader launches transpose<<<grid, block>>>(in, out, rows, cols) with 2-D blocks of several
// shapes and grid = (ceil(cols / block.x), ceil(rows / block.y)): x runs along the columns of in,
// y down its rows, and the grid is rounded up to whole blocks.
// in：rows × cols 个 float，行主序：元素 (r, c) 位于 in[r * cols + c]。
// out：cols × rows 个 float，行主序：out 的元素 (c, r) 就是 in 的元素 (r, c)。
// 评分器以多种形状的二维线程块启动 transpose<<<grid, block>>>(in, out, rows, cols)，
// grid = (ceil(cols / block.x), ceil(rows / block.y))：x 对应 in 的列号（横向），y 对应行号（纵向），
// 网格向上取整到整数个线程块。
__global__ void transpose(const float* in, float* out, int rows, int cols)
{
}
