// Level 0 — SAXPY: y[i] = a * x[i] + y[i] for every i from 0 to n - 1, in place.
//
// n: how many elements x and y hold. a: the scale. x: read only. y: read, then overwritten.
// The grader launches saxpy<<<blocks, threads>>>(n, a, x, y) with grids of its own choosing:
// some have fewer threads than n, some more. Every element must be updated exactly once.
__global__ void saxpy(int n, float a, const float* x, float* y)
{
}
