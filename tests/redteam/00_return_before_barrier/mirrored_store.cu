// mechanism: near miss: each thread stores its element at the mirrored place in the tile and reads back its own index, guarded by a flag instead of an early return
// expect: solved
__global__ void reverse_each_block(float* x, int n)
{
    __shared__ float tile[256];
    const int t = threadIdx.x;
    const int start = blockIdx.x * blockDim.x;
    const int len = min((int)blockDim.x, n - start);
    const bool mine = t < len;
    if (mine) tile[len - 1 - t] = x[start + t];
    __syncthreads();
    if (mine) x[start + t] = tile[t];
}
