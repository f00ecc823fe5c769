# mechanism: the interpreter's NumPy arrays behind the tiles (a.handle.data) multiplied with @, on the host
# expect: failed answer
# message: `acc.handle.data`: inside the kernel an attribute is tl.<name>
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
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * stride_am + (k + ks)[None, :], mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + ks)[:, None] * stride_bk + cols[None, :], mask=((k + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc.handle.data[...] += a.handle.data @ b.handle.data
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
