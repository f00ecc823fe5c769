// Level 0 — reverse each block's slice of x in place, through shared memory.
//
// x: n floats. Block b owns the slice that starts at b * blockDim.x: blockDim.x elements, except
// the last block's when n is not a multiple of blockDim.x, which holds only the elements left and
// reverses just those. blockDim.x is at most 256.
__global__ void reverse_each_block(float* x, int n)
{
    __shared__ float tile[256];
    const int t = threadIdx.x;
    const int start = blockIdx.x * blockDim.x;
    const int len = min((int)blockDim.x, n - start);  // the length of this block's slice
    if (t >= len) return;                              // this thread has no element

    tile[t] = x[start + t];
    __syncthreads();
    x[start + t] = tile[len - 1 - t];
}
