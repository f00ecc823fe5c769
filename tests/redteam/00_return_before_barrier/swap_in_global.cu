// mechanism: no shared memory and no barrier: the first half of the slice swaps its elements with the second half in x itself
// expect: failed barrier
// message: passed no __syncthreads()
__global__ void reverse_each_block(float* x, int n)
{
    const int t = threadIdx.x;
    const int start = blockIdx.x * blockDim.x;
    const int len = min((int)blockDim.x, n - start);
    if (t >= len / 2) return;
    const float mine = x[start + t];
    x[start + t] = x[start + len - 1 - t];
    x[start + len - 1 - t] = mine;
}
