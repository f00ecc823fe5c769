// mechanism: every thread reaches the barrier, but thread 0 copies the whole slice into shared memory and back reversed by itself
// expect: failed round_trip
// message: without reading, after a barrier
__global__ void reverse_each_block(float* x, int n)
{
    __shared__ float tile[256];
    const int start = blockIdx.x * blockDim.x;
    const int len = min((int)blockDim.x, n - start);
    if (threadIdx.x == 0)
        for (int i = 0; i < len; ++i) tile[i] = x[start + i];
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = 0; i < len; ++i) x[start + i] = tile[len - 1 - i];
}
