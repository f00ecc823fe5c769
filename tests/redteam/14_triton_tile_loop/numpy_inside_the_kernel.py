# mechanism: no import, but the interpreter puts its own np into the kernel's globals: C computed by NumPy on the tensors' arrays
# expect: failed answer
# message: `np` inside the kernel
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
    a = tl.load(a_ptr + rows[:, None] * stride_am + tl.arange(0, 128)[None, :])
    acc = np.matmul(a.handle.data, a.handle.data.T)
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
