// Level 0 — reverse each block's slice of x in place, through shared memory.
// 第 0 级：借助共享内存，把 x 中每个线程块负责的那一段原地反转。
//
// x: n floats. Block b owns the slice that starts at b * blockDim.x: blockDim.x elements, except
// the last block's when n is not a multiple of blockDim.x, which holds only the elements left and
// reverses just those. blockDim.x is at most 256.
// x：n 个 float。线程块 b 负责从 b * blockDim.x 开始的一段，共 blockDim.x 个元素；n 不是 blockDim.x
// 的整数倍时，最后一个线程块只拿到剩下的元素，也只反转这些元素。blockDim.x 不超过 256。
__global__ void reverse_each_block(float* x, int n)
{
    __shared__ float tile[256];
    const int t = threadIdx.x;
    const int start = blockIdx.x * blockDim.x;
    const int len = min((int)blockDim.x, n - start);  // the length of this block's slice
                                                      // 本线程块这一段的长度
    if (t >= len) return;                              // this thread has no element
                                                       // 本线程没有分到元素

    tile[t] = x[start + t];
    __syncthreads();
    x[start + t] = tile[len - 1 - t];
}
