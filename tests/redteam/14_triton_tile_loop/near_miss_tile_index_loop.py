# mechanism: near-miss: a loop over k-tile numbers with the offsets recomputed each step and acc += tl.dot(a, b): right, and one dot per k-tile
# expect: solved
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
    for t in range(0, tl.cdiv(K, BK)):
        ks = t * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
