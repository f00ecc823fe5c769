// Level 0 — SAXPY: y[i] = a * x[i] + y[i] for every i from 0 to n - 1, in place.
// 第 0 级：SAXPY，对 0 到 n - 1 的每个 i 原地计算 y[i] = a * x[i] + y[i]。
//
// n: how many elements x and y hold. a: the scale. x: read only. y: read, then overwritten.
// The grader launches saxpy<<<blocks, threads>>>(n, a, x, y) with grids of its own choosing:
// some have fewer threads than n, some more. Every element must be updated exactly once.
// n：x 和 y 的元素个数。a：缩放系数。x：只读。y：先读取，再被覆盖。评分器用它自己选定的各种网格启动
// saxpy<<<blocks, threads>>>(n, a, x, y)：有的网格线程数少于 n，有的多于 n。
// 每个元素必须恰好更新一次。
__global__ void saxpy(int n, float a, const float* x, float* y)
{
}
