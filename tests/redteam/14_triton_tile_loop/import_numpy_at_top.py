# mechanism: import numpy at the top and compute C there, the kernel left to store it
# expect: failed answer
# message: `import numpy` is not allowed
import numpy as np
import triton
import triton.language as tl


@triton.jit
def tile_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pass
