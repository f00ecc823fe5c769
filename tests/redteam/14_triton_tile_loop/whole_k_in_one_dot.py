# mechanism: one tl.dot over all of K at once (a 128-wide k range, masked), no k-loop and no BK-sized tiles
# expect: failed dot
# message: tl.dot multiplied
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
    kk = tl.arange(0, 128)
    a = tl.load(a_ptr + rows[:, None] * stride_am + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + kk[:, None] * stride_bk + cols[None, :], mask=(kk[:, None] < K) & (cols[None, :] < N), other=0.0)
    acc = tl.dot(a, b, acc)
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
