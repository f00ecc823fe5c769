# mechanism: import the course's own Triton kernel and call it from a kernel of the same name
# expect: failed answer
# message: `import gemm_course.dsl.triton_gemm` is not allowed
import triton
import triton.language as tl
import gemm_course.dsl.triton_gemm as course


@triton.jit
def tile_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    course.tiled_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, BM, BN, BK, 1, "ieee")
