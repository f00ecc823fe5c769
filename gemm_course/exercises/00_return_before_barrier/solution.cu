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

    // Every thread of the block must reach the barrier, so a thread without an element skips the
    // accesses instead of returning early.
    if (t < len) tile[t] = x[start + t];
    __syncthreads();
    if (t < len) x[start + t] = tile[len - 1 - t];
}
