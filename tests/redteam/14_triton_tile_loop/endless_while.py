# mechanism: a while loop whose condition never changes: the grading is stopped at its wall-clock limit
# expect: failed run
# message: did not finish within
# wall: 5
import triton
import triton.language as tl


@triton.jit
def tile_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    left = K
    while left > 0:
        left = left + 1
