// Level 0 — SAXPY: y[i] = a * x[i] + y[i] for every i from 0 to n - 1, in place.
//
// n: how many elements x and y hold. a: the scale. x: read only. y: read, then overwritten.
// The grader launches saxpy<<<blocks, threads>>>(n, a, x, y) with grids of its own choosing:
// some have fewer threads than n, some more. Every element must be updated exactly once.
__global__ void saxpy(int n, float a, const float* x, float* y)
{
    // A grid-stride loop: thread i takes elements i, i + T, i + 2T, ... where T is the number of
    // threads in the whole grid, so the grid slides over the array as a window of T elements.
    const int threads_in_grid = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += threads_in_grid)
        y[i] = a * x[i] + y[i];
}
