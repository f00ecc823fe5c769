// mechanism: block 0 strides over all n elements by blockDim.x; the other blocks do nothing
// expect: failed grid_stride
// message: updated no element of y
__global__ void saxpy(int n, float a, const float* x, float* y)
{
    if (blockIdx.x != 0) return;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        y[i] = a * x[i] + y[i];
}
