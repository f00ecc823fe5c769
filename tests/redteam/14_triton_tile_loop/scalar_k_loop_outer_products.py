# mechanism: a hurried k-loop one k at a time: a column of A times a row of B, summed element by element, no tl.dot
# expect: failed dot
# message: no tl.dot ran
import triton
import triton.language as tl


@triton.jit
def tile_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    rows = (pid // tiles_n) * BM + tl.arange(0, BM)
    cols = (pid % tiles_n) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + rows * stride_am + k, mask=rows < M, other=0.0)
        b = tl.load(b_ptr + k * stride_bk + cols, mask=cols < N, other=0.0)
        acc += a[:, None] * b[None, :]
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
