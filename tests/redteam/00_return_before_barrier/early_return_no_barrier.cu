// mechanism: keeps the early return and simply deletes the barrier
// expect: failed race
// message: shared-memory race
__global__ void reverse_each_block(float* x, int n)
{
    __shared__ float tile[256];
    const int t = threadIdx.x;
    const int start = blockIdx.x * blockDim.x;
    const int len = min((int)blockDim.x, n - start);
    if (t >= len) return;
    tile[t] = x[start + t];
    x[start + t] = tile[len - 1 - t];
}
