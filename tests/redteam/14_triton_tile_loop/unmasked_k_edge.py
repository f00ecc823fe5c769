# mechanism: loads masked on rows and columns but not at the end of K: the last k-tile reads past A and B
# expect: failed masked
# message: from outside A and B
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
    ks = tl.arange(0, BK)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :]
    for k in range(0, K, BK):
        a = tl.load(a_tile, mask=rows[:, None] < M, other=0.0)
        b = tl.load(b_tile, mask=cols[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BK
        b_tile += BK * stride_bk
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
