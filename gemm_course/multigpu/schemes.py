"""Level 12: one GEMM across several GPUs of one machine, with NCCL (cupy.cuda.nccl).

One Python process drives every GPU (one NCCL communicator per GPU, made with initAll), and each
GPU runs cuBLAS or the course's Level 8 kernel on its part. Two ways to split C = A·B over P GPUs:

row split (data parallel)          A is cut into P row blocks, B is replicated, GPU p computes rows
                                   p·M/P .. of C. Starting from A and B on GPU 0: broadcast B, scatter
                                   A's row blocks, compute, gather C's row blocks back to GPU 0.

2-D split (SUMMA)                  the GPUs form a pr × pc grid; GPU (i, j) owns block (i, j) of A, B
                                   and C. For each k-panel, the GPUs owning that panel of A broadcast
                                   it along their grid row, those owning the panel of B broadcast it
                                   along their grid column, and every GPU adds A_panel · B_panel to
                                   its block of C. Each GPU receives A and B blocks, never all of B.

Both are timed two ways: "algorithm" (the inputs already where the scheme wants them, C left
distributed as the scheme leaves it) and "end to end" (from A and B on GPU 0 to C on GPU 0: the
distribution and the gather included, all through NCCL). The cost model (gemm_course.models:
row_split_model, summa_model) prices each phase: communication by the α-β model of its collective,
fitted on NCCL timings of the same run (gemm_course.multigpu.collectives), local work by the same work timed
on one GPU. gemm_course.multigpu.tensor_parallel adds the transformer MLP block split over GPUs, with its
communication overlapped with compute.
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import asdict
from typing import Any, Callable, Optional, Sequence

import numpy as np

SCHEMES = ("row", "summa", "tp")
SCHEME_NAMES = {"row": "row split", "summa": "SUMMA", "tp": "tensor parallel"}


def gpu_count() -> int:
    from gemm_course import device

    if not device.gpu_available():  # also honours GEMM_COURSE_NO_GPU
        return 0
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def require_gpus(n: int) -> None:
    have = gpu_count()
    if have < n:
        raise RuntimeError(f"this needs {n} GPUs and {have} are visible; the notebook shows the recorded "
                           "multi-GPU runs instead")
    from cupy.cuda import nccl

    if not nccl.available:
        raise RuntimeError("CuPy was built without NCCL here: pip install the nvidia-nccl wheel for your CUDA")


class Group:
    """P GPUs, a stream and an NCCL communicator on each, and optional row/column sub-groups."""

    def __init__(self, devices: Sequence[int]):
        import cupy
        from cupy.cuda import nccl

        require_gpus(max(devices) + 1)
        self.devices = list(devices)
        self.comms = nccl.NcclCommunicator.initAll(self.devices)
        self.streams = []
        for d in self.devices:
            with cupy.cuda.Device(d):
                self.streams.append(cupy.cuda.Stream(non_blocking=True))

    def grid_comms(self) -> tuple[dict[int, list], dict[int, list]]:
        """Row and column communicators of the pr × pc grid (made once: initAll is collective and slow).
        GPU (i, j) has rank j in row i's communicator and rank i in column j's."""
        if not hasattr(self, "_grid"):
            from cupy.cuda import nccl

            pr, pc = grid_shape(len(self.devices))
            rows = {i: nccl.NcclCommunicator.initAll([self.devices[i * pc + j] for j in range(pc)]) for i in range(pr)}
            cols = {j: nccl.NcclCommunicator.initAll([self.devices[i * pc + j] for i in range(pr)]) for j in range(pc)}
            self._grid = (rows, cols)
        return self._grid

    def run(self, calls: Callable[[int, Any, Any], None], streams: Optional[Sequence[Any]] = None) -> None:
        """calls(rank, communicator, stream) on every GPU inside one NCCL group (on the group's
        streams, or on `streams`, one per GPU)."""
        import cupy
        from cupy.cuda import nccl

        nccl.groupStart()
        try:
            for rank, (d, comm, stream) in enumerate(zip(self.devices, self.comms, streams or self.streams)):
                with cupy.cuda.Device(d):
                    calls(rank, comm, stream)
        finally:
            nccl.groupEnd()

    def synchronize(self) -> None:
        for s in self.streams:
            s.synchronize()


def nccl_type(dtype: Any) -> int:
    from gemm_course.multigpu.tensor_parallel import nccl_type as by_name

    return by_name(str(np.dtype(dtype)))


def local_gemm(A: Any, B: Any, out: Any, local: str, params: Optional[dict] = None) -> None:
    """C = A·B on the current device and stream: cuBLAS, or a course level's kernel (e.g. "08_warp_tiling",
    with `params` its setting)."""
    import cupy

    if local == "cublas":
        cupy.matmul(A, B, out=out)
    else:
        from gemm_course.run.launch import gemm

        gemm(A, B, local, out=out, **(params or {}))


def _timed(group: Group, phases: Optional[dict[str, float]], name: str, step: Callable[[], None]) -> None:
    """Run one phase; with `phases`, synchronise every GPU before and after it and add its time (ms)."""
    import time

    if phases is None:
        step()
        return
    group.synchronize()
    t0 = time.perf_counter()
    step()
    group.synchronize()
    phases[name] = phases.get(name, 0.0) + (time.perf_counter() - t0) * 1e3


class RowSplit:
    """C = A·B with A's rows split over the group; A0, B0 and C0 live on GPU 0.

    Each phase is a method, so a run can time them apart: broadcast_B, scatter_A, compute, gather_C.
    GPU 0 keeps its own rows in place (views of A0 and C0); every other GPU gets buffers of its own.
    """

    def __init__(self, group: Group, A0: Any, B0: Any, local: str = "cublas", params: Optional[dict] = None):
        import cupy

        P = len(group.devices)
        (M, K), N = A0.shape, B0.shape[1]
        if M % P:
            raise ValueError(f"row split needs M divisible by the GPU count: M={M}, P={P} · "
                             f"行切分要求 M 能被 GPU 数整除：M={M}，P={P}")
        self.group, self.local, self.params = group, local, params
        self.rows, self.K, self.N, self.nccl = M // P, K, N, nccl_type(A0.dtype)
        self.A0, self.B0 = A0, B0
        with cupy.cuda.Device(group.devices[0]):
            self.C0 = cupy.empty((M, N), dtype=A0.dtype)
        self.As, self.Bs, self.Cs = [A0[:self.rows]], [B0], [self.C0[:self.rows]]
        for d in group.devices[1:]:
            with cupy.cuda.Device(d):
                self.As.append(cupy.empty((self.rows, K), dtype=A0.dtype))
                self.Bs.append(cupy.empty((K, N), dtype=A0.dtype))
                self.Cs.append(cupy.empty((self.rows, N), dtype=A0.dtype))

    def broadcast_B(self) -> None:  # NCCL pipelines it along a ring: every link busy at once
        self.group.run(lambda r, c, s: c.bcast(self.Bs[r].data.ptr, self.K * self.N, self.nccl, 0, s.ptr))

    def scatter_A(self) -> None:
        rows, K = self.rows, self.K

        def calls(r: int, c: Any, s: Any) -> None:
            if r == 0:
                for peer in range(1, len(self.group.devices)):
                    c.send(self.A0[peer * rows:(peer + 1) * rows].data.ptr, rows * K, self.nccl, peer, s.ptr)
            else:
                c.recv(self.As[r].data.ptr, rows * K, self.nccl, 0, s.ptr)
        self.group.run(calls)

    def compute(self) -> None:
        import cupy

        for r, d in enumerate(self.group.devices):
            with cupy.cuda.Device(d), self.group.streams[r]:
                local_gemm(self.As[r], self.Bs[r], self.Cs[r], self.local, self.params)

    def gather_C(self) -> None:
        rows, N = self.rows, self.N

        def calls(r: int, c: Any, s: Any) -> None:
            if r == 0:
                for peer in range(1, len(self.group.devices)):
                    c.recv(self.C0[peer * rows:(peer + 1) * rows].data.ptr, rows * N, self.nccl, peer, s.ptr)
            else:
                c.send(self.Cs[r].data.ptr, rows * N, self.nccl, 0, s.ptr)
        self.group.run(calls)

    def run(self, scope: str = "end to end", phases: Optional[dict[str, float]] = None) -> None:
        """"end to end": all four phases; "algorithm": compute only (A's rows and B already in place)."""
        steps = ((("broadcast B", self.broadcast_B), ("scatter A", self.scatter_A)) if scope == "end to end" else ())
        steps += (("compute", self.compute),)
        steps += ((("gather C", self.gather_C),) if scope == "end to end" else ())
        for name, step in steps:
            _timed(self.group, phases, name, step)

    def blocks(self) -> list[tuple[Any, slice, slice]]:
        """C as the algorithm leaves it: (block, its rows, its columns) per GPU."""
        return [(C, slice(r * self.rows, (r + 1) * self.rows), slice(0, self.N)) for r, C in enumerate(self.Cs)]


def row_split(group: Group, A0: Any, B0: Any, local: str = "cublas",
              phases: Optional[dict[str, float]] = None) -> Any:
    """C = A·B end to end: broadcast B, scatter A's row blocks, compute, gather C's row blocks;
    A0, B0, and the returned C live on GPU 0. If `phases` is a dict, the time of each phase in ms
    is added to it (each phase is then separated by a synchronisation)."""
    split = RowSplit(group, A0, B0, local)
    split.run("end to end", phases)
    group.synchronize()
    return split.C0


def grid_shape(P: int) -> tuple[int, int]:
    """The most square pr × pc grid with pr·pc = P (pr ≤ pc)."""
    pr = int(math.isqrt(P))
    while P % pr:
        pr -= 1
    return pr, P // pr


class Summa:
    """C = A·B on a pr × pc grid of GPUs (SUMMA), GPU (i, j) = rank i·pc + j.

    Phases: pack_blocks (GPU 0 copies each GPU's block of A and of B into a contiguous buffer),
    send_blocks (NCCL send/recv from GPU 0), panel_loop (the algorithm), gather_blocks (NCCL
    send/recv of C's blocks to GPU 0), unpack (GPU 0 copies them into C0).
    """

    def __init__(self, group: Group, A0: Any, B0: Any):
        import cupy

        P = len(group.devices)
        pr, pc = grid_shape(P)
        (M, K), N = A0.shape, B0.shape[1]
        L = pr * pc // math.gcd(pr, pc)
        if M % pr or N % pc or K % L:
            raise ValueError(f"SUMMA on a {pr}×{pc} grid needs M % {pr} == 0, N % {pc} == 0, K % {L} == 0 · "
                             f"{pr}×{pc} 网格上的 SUMMA 要求 M % {pr} == 0、N % {pc} == 0、K % {L} == 0")
        self.group, self.A0, self.B0 = group, A0, B0
        self.pr, self.pc, self.L = pr, pc, L
        self.mb, self.nb, self.kb = M // pr, N // pc, K // L
        self.ka, self.kB = K // pc, K // pr  # A's blocks are M/pr × K/pc, B's K/pr × N/pc
        self.coords = [(rank // pc, rank % pc) for rank in range(P)]
        self.nccl = nccl_type(A0.dtype)
        self.row_comms, self.col_comms = group.grid_comms()
        dt = A0.dtype
        self.A_blk, self.B_blk, self.C_blk, self.A_pan, self.B_pan = [], [], [], [], []
        for d in group.devices:
            with cupy.cuda.Device(d):
                self.A_blk.append(cupy.empty((self.mb, self.ka), dtype=dt))
                self.B_blk.append(cupy.empty((self.kB, self.nb), dtype=dt))
                self.C_blk.append(cupy.empty((self.mb, self.nb), dtype=dt))
                self.A_pan.append(cupy.empty((self.mb, self.kb), dtype=dt))
                self.B_pan.append(cupy.empty((self.kb, self.nb), dtype=dt))
        with cupy.cuda.Device(group.devices[0]):  # GPU 0's staging: what it sends and receives
            self.A_out = [self.A_blk[0]] + [cupy.empty((self.mb, self.ka), dtype=dt) for _ in range(1, P)]
            self.B_out = [self.B_blk[0]] + [cupy.empty((self.kB, self.nb), dtype=dt) for _ in range(1, P)]
            self.C_in = [self.C_blk[0]] + [cupy.empty((self.mb, self.nb), dtype=dt) for _ in range(1, P)]
            self.C0 = cupy.empty((M, N), dtype=dt)

    def _block(self, rank: int) -> tuple[tuple[slice, slice], tuple[slice, slice], tuple[slice, slice]]:
        i, j = self.coords[rank]
        a = (slice(i * self.mb, (i + 1) * self.mb), slice(j * self.ka, (j + 1) * self.ka))
        b = (slice(i * self.kB, (i + 1) * self.kB), slice(j * self.nb, (j + 1) * self.nb))
        c = (slice(i * self.mb, (i + 1) * self.mb), slice(j * self.nb, (j + 1) * self.nb))
        return a, b, c

    def pack_blocks(self) -> None:
        import cupy

        with cupy.cuda.Device(self.group.devices[0]), self.group.streams[0]:
            for rank in range(len(self.group.devices)):
                a, b, _ = self._block(rank)
                self.A_out[rank][...] = self.A0[a]
                self.B_out[rank][...] = self.B0[b]

    def send_blocks(self) -> None:
        def calls(r: int, c: Any, s: Any) -> None:
            if r == 0:
                for peer in range(1, len(self.group.devices)):
                    c.send(self.A_out[peer].data.ptr, self.mb * self.ka, self.nccl, peer, s.ptr)
                    c.send(self.B_out[peer].data.ptr, self.kB * self.nb, self.nccl, peer, s.ptr)
            else:
                c.recv(self.A_blk[r].data.ptr, self.mb * self.ka, self.nccl, 0, s.ptr)
                c.recv(self.B_blk[r].data.ptr, self.kB * self.nb, self.nccl, 0, s.ptr)
        self.group.run(calls)

    def pack_panel(self, rank: int, p: int) -> None:
        """Panel p's slices that GPU `rank` owns, copied into its contiguous panel buffers (current stream)."""
        i, j = self.coords[rank]
        a_owner, a_off = p // (self.L // self.pc), (p % (self.L // self.pc)) * self.kb  # grid column with A's panel
        b_owner, b_off = p // (self.L // self.pr), (p % (self.L // self.pr)) * self.kb  # grid row with B's panel
        if j == a_owner:
            self.A_pan[rank][...] = self.A_blk[rank][:, a_off:a_off + self.kb]
        if i == b_owner:
            self.B_pan[rank][...] = self.B_blk[rank][b_off:b_off + self.kb]

    def panel_gemm(self, rank: int, p: int) -> None:
        """C_blk += A_pan·B_pan (the first panel overwrites: β = 0, so C_blk needs no zeroing)."""
        import cupy.cublas  # C += A_panel · B_panel with beta = 1 (not imported by `import cupy`)

        cupy.cublas.gemm("N", "N", self.A_pan[rank], self.B_pan[rank], out=self.C_blk[rank],
                         alpha=1.0, beta=0.0 if p == 0 else 1.0)

    def panel_loop(self) -> None:
        import cupy
        from cupy.cuda import nccl

        for p in range(self.L):
            a_owner = p // (self.L // self.pc)
            b_owner = p // (self.L // self.pr)
            for rank, d in enumerate(self.group.devices):
                with cupy.cuda.Device(d), self.group.streams[rank]:
                    self.pack_panel(rank, p)
            nccl.groupStart()
            for rank, d in enumerate(self.group.devices):
                i, j = self.coords[rank]
                with cupy.cuda.Device(d):
                    s = self.group.streams[rank].ptr
                    self.row_comms[i][j].bcast(self.A_pan[rank].data.ptr, self.mb * self.kb, self.nccl, a_owner, s)
                    self.col_comms[j][i].bcast(self.B_pan[rank].data.ptr, self.kb * self.nb, self.nccl, b_owner, s)
            nccl.groupEnd()
            for rank, d in enumerate(self.group.devices):
                with cupy.cuda.Device(d), self.group.streams[rank]:
                    self.panel_gemm(rank, p)

    def gather_blocks(self) -> None:
        def calls(r: int, c: Any, s: Any) -> None:
            if r == 0:
                for peer in range(1, len(self.group.devices)):
                    c.recv(self.C_in[peer].data.ptr, self.mb * self.nb, self.nccl, peer, s.ptr)
            else:
                c.send(self.C_blk[r].data.ptr, self.mb * self.nb, self.nccl, 0, s.ptr)
        self.group.run(calls)

    def unpack(self) -> None:
        import cupy

        with cupy.cuda.Device(self.group.devices[0]), self.group.streams[0]:
            for rank in range(len(self.group.devices)):
                _, _, c = self._block(rank)
                self.C0[c] = self.C_in[rank]

    def run(self, scope: str = "end to end", phases: Optional[dict[str, float]] = None) -> None:
        """"end to end": from A0, B0 on GPU 0 to C0 on GPU 0; "algorithm": the panel loop alone
        (A and B already in their blocks, C left in blocks)."""
        if scope == "algorithm":
            _timed(self.group, phases, "panel loop", self.panel_loop)
            return
        for name, step in (("pack A, B blocks", self.pack_blocks), ("send A, B blocks", self.send_blocks),
                           ("panel loop", self.panel_loop), ("gather C blocks", self.gather_blocks),
                           ("unpack C", self.unpack)):
            _timed(self.group, phases, name, step)

    def blocks(self) -> list[tuple[Any, slice, slice]]:
        return [(C, *self._block(rank)[2]) for rank, C in enumerate(self.C_blk)]


def summa(group: Group, A0: Any, B0: Any, phases: Optional[dict[str, float]] = None) -> Any:
    """C = A·B with SUMMA, end to end (A0, B0 and the returned C on GPU 0); phases as row_split's."""
    s = Summa(group, A0, B0)
    s.run("end to end", phases)
    group.synchronize()
    return s.C0


def link_bandwidth(group: Group, megabytes: int = 512, reps: int = 5) -> float:
    """NCCL broadcast algorithm bandwidth (GB/s) of 512 MiB from GPU 0: the first chapter's link speed."""
    import time

    import cupy

    n = megabytes * (1 << 20) // 4
    bufs = []
    for d in group.devices:
        with cupy.cuda.Device(d):
            bufs.append(cupy.ones(n, dtype=cupy.float32))
    f32 = nccl_type("float32")
    samples = []
    for _ in range(reps + 1):
        group.synchronize()
        t0 = time.perf_counter()
        group.run(lambda r, c, s: c.bcast(bufs[r].data.ptr, n, f32, 0, s.ptr))
        group.synchronize()
        samples.append(time.perf_counter() - t0)
    return n * 4 / float(np.median(samples[1:])) / 1e9


# --- checking what a scheme leaves behind ----------------------------------------------------------------

def _poison(arrays: Sequence[Any]) -> None:
    import cupy

    for X in arrays:
        with cupy.cuda.Device(X.device.id):
            X.fill(float("nan"))
            cupy.cuda.Device(X.device.id).synchronize()


def blocks_error(blocks: Sequence[tuple[Any, slice, slice]], reference: Any) -> tuple[float, int]:
    """(‖C − ref‖_F / ‖ref‖_F, NaN count) for C held as blocks on several GPUs (each copied to the
    reference's GPU to compare); NaN anywhere gives NaN, which never passes."""
    import cupy

    from gemm_course.multigpu.tensor_parallel import copy_to_device

    d0 = reference.device.id
    diff2, nans = 0.0, 0
    with cupy.cuda.Device(d0):
        for C, rows, cols in blocks:
            here = C if C.device.id == d0 else copy_to_device(C, d0)
            nans += int(cupy.isnan(here).sum())
            diff2 += float(cupy.linalg.norm(here.astype(cupy.float64) - reference[rows, cols]) ** 2)
        scale = float(cupy.linalg.norm(reference))
    return math.sqrt(diff2) / scale, nans


# --- the model on paper: more GPUs, GPUs in different machines ------------------------------------------

def paper_models(links: Any, n: int, rate_tflops: float, gpus: Sequence[int] = (1, 2, 4, 8),
                 network_gbs: float = 50.0, itemsize: int = 4) -> list[dict[str, Any]]:
    """Row split and SUMMA at n³ on P GPUs, in each scope (models.SCOPES: "even start" is the fair
    comparison, where the row split must first all-gather B), priced by the α-β model: once with the links
    measured here (`links`, a collectives.Links calibrated on 2 GPUs: the ring formulas carry α and
    β to P GPUs), once with every link at `network_gbs` (GPUs in different machines, on paper).
    Local work at `rate_tflops` (one GPU's measured rate); packing copies left out. Each row also
    gives the communication lower bound of any scheme (collectives.lower_bound_bytes)."""
    from gemm_course.multigpu.collectives import lower_bound_bytes
    from gemm_course.models import gemm_flops, row_split_model, summa_model

    out = []
    here = f"one machine (measured, {links.fit_for('broadcast').link_gbs:.0f} GB/s broadcast)"
    apart = f"separate machines ({network_gbs:g} GB/s per GPU, on paper)"
    for label, net in ((here, links), (apart, links.with_bandwidth(network_gbs))):
        for P in gpus:
            pr, pc = grid_shape(P)
            L = pr * pc // math.gcd(pr, pc)
            row_compute = gemm_flops(n // P, n, n) / (rate_tflops * 1e12)
            panel = gemm_flops(n // pr, n // pc, n // L) / (rate_tflops * 1e12)
            for scope in ("algorithm", "even start", "end to end"):
                costs = [row_split_model(n, n, n, P, net, row_compute, itemsize, scope)]
                if P > 1:
                    costs.append(summa_model(n, n, n, pr, pc, net, panel, itemsize=itemsize, scope=scope))
                for cost in costs:
                    out.append(dict(cost.as_dict(), links=label, n=n, grid=[pr, pc],
                                    lower_bound_bytes=lower_bound_bytes(n, n, n, P, itemsize)))
    return out


# --- the benchmark ------------------------------------------------------------------------------------

def _bilingual(en: str, zh: str) -> ValueError:
    return ValueError(f"{en} · {zh}")


def validate_options(sizes: Sequence[int], gpu_counts: Optional[Sequence[int]], schemes: Sequence[str],
                     tp_shapes: Sequence[tuple[int, int, int]], chunks: Sequence[int], dtypes: Sequence[str],
                     forms: Sequence[str], activation: str) -> None:
    """Every option checked before any GPU work: a bilingual ValueError naming what to change."""
    from gemm_course.multigpu.tensor_parallel import ACTIVATIONS, DTYPES, FORMS

    bad = [s for s in schemes if s not in SCHEMES]
    if bad or not schemes:
        raise _bilingual(f"unknown scheme {', '.join(bad) or '(none)'}: choose from {', '.join(SCHEMES)}",
                         f"未知的方案 {', '.join(bad) or '（空）'}：可选 {', '.join(SCHEMES)}")
    if any(n < 1 for n in sizes):
        raise _bilingual("sizes must be positive integers", "尺寸必须是正整数")
    if gpu_counts is not None and (not gpu_counts or any(p < 1 for p in gpu_counts)):
        raise _bilingual("GPU counts must be positive integers, e.g. 1,2", "GPU 数必须是正整数，例如 1,2")
    if any(c < 1 for c in chunks) or not chunks:
        raise _bilingual("chunks must be positive integers, e.g. 1,4", "分块数必须是正整数，例如 1,4")
    if any(d not in DTYPES for d in dtypes) or not dtypes:
        raise _bilingual(f"the tensor-parallel dtype is one of {', '.join(DTYPES)}",
                         f"张量并行的数据类型只能是 {', '.join(DTYPES)}")
    if any(f not in FORMS for f in forms) or not forms:
        raise _bilingual(f"the tensor-parallel form is one of {', '.join(FORMS)}", f"张量并行的形式只能是 {', '.join(FORMS)}")
    if activation not in ACTIVATIONS:
        raise _bilingual(f"activation is one of {', '.join(ACTIVATIONS)}", f"激活函数只能是 {', '.join(ACTIVATIONS)}")
    if any(min(s) < 1 for s in tp_shapes):
        raise _bilingual("a tensor-parallel shape is MxHxF with positive integers, e.g. 8192x8192x32768",
                         "张量并行的形状写作 MxHxF（正整数），例如 8192x8192x32768")
    if "tp" in schemes:  # every split that will be asked for can be made (the error says what to change)
        from gemm_course.multigpu.tensor_parallel import make_plan

        for M, H, F in tp_shapes:
            for P in (p for p in (gpu_counts or (2,)) if p > 1):
                for form in forms:
                    for c in chunks:
                        make_plan(M, H, F, P, form, c)


def bench_multigpu(sizes: Sequence[int] = (8192, 16384), gpu_counts: Optional[Sequence[int]] = None,
                   local: str = "cublas", out: Optional[str] = None,
                   progress: Callable[[str], None] = print, *, local_params: Optional[dict] = None,
                   schemes: Sequence[str] = ("row", "summa", "tp"),
                   tp_shapes: Sequence[tuple[int, int, int]] = ((8192, 8192, 32768),),
                   chunks: Sequence[int] = (1, 4), dtypes: Sequence[str] = ("float16",),
                   forms: Sequence[str] = ("all-reduce", "reduce-scatter/all-gather"),
                   activation: str = "none", collective_sizes: Optional[Sequence[int]] = None) -> dict[str, Any]:
    """Level 12 on 1, 2, 4, … GPUs, every row checked against a float64 product on GPU 0 and timed,
    each beside its model; JSON with provenance, written after every row.

    1. the α-β fit of every NCCL collective on each GPU count > 1 ("collectives" in the file);
    2. row split and SUMMA (fp32, local GEMM cuBLAS or a level's kernel; SUMMA's panels always use
       cuBLAS, so it runs with local cuBLAS only), each in both scopes ("algorithm", "end to end");
    3. the tensor-parallel MLP block (cuBLAS, `dtypes`), in each form, cut into each number of
       chunks, without and (chunks > 1) with overlap.
    """
    from pathlib import Path

    from gemm_course.multigpu import collectives
    from gemm_course.multigpu.collectives import BANDWIDTH_REGIME_BYTES, MEASURED, Links, fit, fit_all, measure

    validate_options(sizes, gpu_counts, schemes, tp_shapes, chunks, dtypes, forms, activation)
    have = gpu_count()
    if have == 0:
        raise RuntimeError("Level 12 runs on GPUs and none is visible here; its recorded 2×H200 results are in "
                           "the Level 12 notebook (python -m gemm_course summary shows the single-GPU levels) · "
                           "第 12 级需要 GPU，这里一个也看不到；记录下来的 2×H200 结果在第 12 级的笔记本里")
    import cupy

    from gemm_course.measure.bench import METHOD, _write_json, provenance, time_gpu

    if os.environ.get("CUPY_TF32", "0") != "0":
        raise RuntimeError("CUPY_TF32 is set: cuBLAS would use TF32 and not be an fp32 baseline; unset it")
    counts = list(gpu_counts or [p for p in (1, 2, 4, 8) if p <= have])
    require_gpus(max(counts))
    method = ("host clock between synchronisations of all GPUs (CUDA events cannot span devices); 1 untimed "
              "call, then the median of 5-10 repetitions within a 2 s budget (tensor parallel: 5-20 within "
              "0.5 s), L2 of every GPU flushed before each; phases from one extra run with a synchronisation "
              "between phases; local work (a GEMM, a copy) of the model timed the same way on GPU 0 alone; "
              "NCCL collectives: 3 warm-up calls, then the median of 10, one call per sample; "
              "α-β fits weighted by 1/t, predictions from sizes ≥ 1 MiB; " + METHOD.split(";")[-1].strip())
    prov = provenance(method)
    from cupy.cuda import nccl

    prov.update({"gpus_visible": have, "nccl": str(nccl.get_version()), "local_gemm": local,
                 "local_params": local_params or {},
                 "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
                 "cuda_device_max_connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")})
    result: dict[str, Any] = {"schema": 1, "provenance": prov, "records": [], "multigpu": [], "collectives": []}
    path = Path(out) if out else None

    def save() -> None:
        if path:
            _write_json(path, result)

    groups = {P: Group(list(range(P))) for P in counts}
    timing = dict(min_reps=5, max_reps=10, budget_s=2.0)
    local_time = functools.partial(time_gpu, min_reps=5, max_reps=10, budget_s=0.5)  # devices=[0]: host clock

    # 1. what each collective costs on these links
    links: dict[int, Links] = {}
    for P in counts:
        if P < 2:
            continue
        points, all_sizes = [], {}
        for name in MEASURED:
            pts = measure(groups[P], name, collective_sizes or collectives.DEFAULT_SIZES)
            points += pts
            all_sizes[name] = fit(pts)
        links[P] = fit_all(points, BANDWIDTH_REGIME_BYTES, label=f"measured on {P} GPUs")
        result["collectives"].append({"gpus": P, "points": [dict(asdict(p), bus_gbs=p.bus_gbs) for p in points],
                                      "fits": links[P].as_dict(),
                                      "fits_all_sizes": {k: f.as_dict() for k, f in all_sizes.items()},
                                      "fit_min_bytes": BANDWIDTH_REGIME_BYTES})
        for name in MEASURED:
            f, a = links[P].fits[name], all_sizes[name]
            top = max((p for p in points if p.collective == name), key=lambda p: p.n_bytes)
            progress(f"{name} on {P} GPUs: α {f.alpha_s * 1e6:.1f} µs, 1/β {f.link_gbs:.0f} GB/s (sizes ≥ 1 MiB, "
                     f"rms residual {f.rms_relative_residual:.0%}); all sizes: α {a.alpha_s * 1e6:.1f} µs, "
                     f"1/β {a.link_gbs:.0f} GB/s; bus bandwidth at {top.n_bytes / 2**20:.0f} MiB "
                     f"{top.bus_gbs:.0f} GB/s")
        save()
        _free(groups[P].devices)

    if "row" in schemes or "summa" in schemes:
        _bench_split(result, groups, links, counts, sizes, local, local_params, schemes, timing, local_time,
                     progress, save)
    if "tp" in schemes:
        _bench_tensor_parallel(result, groups, links, counts, tp_shapes, dtypes, forms, chunks, activation,
                               local_time, progress, save)
    save()
    return result


def _free(devices: Sequence[int]) -> None:
    import cupy

    for d in devices:
        with cupy.cuda.Device(d):
            cupy.cuda.Device(d).synchronize()
            cupy.get_default_memory_pool().free_all_blocks()


_MODEL_TO_MEASURED = {"pack panels": "panel loop", "panel broadcasts": "panel loop", "panel GEMMs": "panel loop"}


def _split_row(scheme: str, scope: str, P: int, n: int, local: str, t: Any, phases: dict[str, float], cost: Any,
               err: float, ok: bool, link: Optional[float]) -> dict[str, Any]:
    model_phases: dict[str, float] = {}
    for ph in cost.phases:
        name = _MODEL_TO_MEASURED.get(ph.name, ph.name) if "panel loop" in phases else ph.name
        model_phases[name] = model_phases.get(name, 0.0) + ph.seconds * 1e3
    return {"scheme": scheme, "scope": scope, "gpus": P, "overlap": False, "dtype": "float32", "M": n, "N": n, "K": n,
            "grid": list(grid_shape(P)), "local": local if scheme == "row split" else "cublas",
            "median_ms": t.median_ms, "q1_ms": t.q1_ms, "q3_ms": t.q3_ms, "reps": t.reps,
            "tflops": 2 * n**3 / t.median_ms / 1e9, "model_ms": cost.seconds * 1e3, "model_tflops": cost.tflops,
            "phases_ms": phases, "model_phases_ms": model_phases, "model": cost.as_dict(),
            "relative_error": err, "passed": ok, "link_gbs": link}


def _bench_split(result: dict, groups: dict, links: dict, counts: Sequence[int], sizes: Sequence[int], local: str,
                 local_params: Optional[dict], schemes: Sequence[str], timing: dict, local_time: Callable,
                 progress: Callable[[str], None], save: Callable[[], None]) -> None:
    import cupy

    from gemm_course.measure.bench import time_gpu
    from gemm_course.run.check import random_operands, relative_error, tolerance
    from gemm_course.multigpu.collectives import Links
    from gemm_course.models import row_split_model, summa_model

    for n in sizes:
        with cupy.cuda.Device(0):
            A0, B0 = random_operands(n, n, n)
            reference = A0.astype(cupy.float64) @ B0.astype(cupy.float64)
        for P in counts:
            group, devices = groups[P], groups[P].devices
            link = link_bandwidth(group) if P > 1 else None
            net = links.get(P, Links())
            runs = []
            if "row" in schemes:
                runs.append(("row split", RowSplit(group, A0, B0, local, local_params)))
            if "summa" in schemes and P > 1 and local == "cublas":  # SUMMA's panels are cuBLAS (β = 1)
                runs.append(("SUMMA", Summa(group, A0, B0)))
            for name, split in runs:
                split.run("end to end")  # untimed: every buffer filled with real data, NCCL and cuBLAS warmed up
                group.synchronize()
                # the model's local work, each timed on GPU 0 alone
                if name == "row split":
                    def gemm0() -> None:
                        with cupy.cuda.Device(devices[0]), group.streams[0]:
                            local_gemm(split.As[0], split.Bs[0], split.Cs[0], split.local, split.params)
                    compute_s = local_time(gemm0, devices=[devices[0]]).median_ms / 1e3
                    model = lambda scope: row_split_model(n, n, n, P, net, compute_s, 4, scope)  # noqa: E731
                else:
                    def on_gpu0(step: Callable[[], None]) -> Callable[[], None]:
                        def go() -> None:
                            with cupy.cuda.Device(devices[0]), group.streams[0]:
                                step()
                        return go
                    # GPU 0 owns panel 0 of A and of B: the most packing any GPU does for one panel
                    pack_s = local_time(on_gpu0(lambda: split.pack_panel(0, 0)), devices=[devices[0]]).median_ms / 1e3
                    panel_s = local_time(on_gpu0(lambda: split.panel_gemm(0, 1)), devices=[devices[0]]).median_ms / 1e3
                    blocks_s = local_time(split.pack_blocks, devices=[devices[0]]).median_ms / 1e3
                    unpack_s = local_time(split.unpack, devices=[devices[0]]).median_ms / 1e3
                    pr, pc = grid_shape(P)
                    model = lambda scope: summa_model(n, n, n, pr, pc, net, panel_s, pack_s, blocks_s,  # noqa: E731
                                                      unpack_s, 4, scope)
                for scope in (("end to end",) if P == 1 else ("algorithm", "end to end")):
                    if scope == "end to end":
                        _poison([split.C0] + [C for C, _, _ in split.blocks()])
                        split.run(scope)
                        group.synchronize()
                        with cupy.cuda.Device(0):
                            err = relative_error(split.C0, reference)
                            unwritten = int(cupy.isnan(split.C0).sum())
                    else:  # C stays in blocks: compare each block where it lies
                        split.run("end to end")  # inputs in place
                        _poison([C for C, _, _ in split.blocks()])
                        split.run(scope)
                        group.synchronize()
                        err, unwritten = blocks_error(split.blocks(), reference)
                    ok = unwritten == 0 and err <= tolerance("float32", n)
                    with cupy.cuda.Device(0):
                        t = time_gpu(lambda: split.run(scope), devices=devices, **timing)
                    phases: dict[str, float] = {}
                    split.run(scope, phases)
                    cost = model(scope)
                    row = _split_row(name, scope, P, n, local, t, phases, cost, err, ok, link)
                    result["multigpu"].append(row)
                    if P == 1:  # one GPU: the algorithm is the whole run
                        result["multigpu"].append(dict(row, scope="algorithm",
                                                       model=dict(row["model"], scope="algorithm")))
                    progress(f"{n}³ {name} ({scope}) on {P} GPU(s): {t.median_ms:.2f} ms, {row['tflops']:.1f} TFLOPS; "
                             f"model {cost.seconds * 1e3:.2f} ms; error {err:.1e} {'ok' if ok else 'WRONG'}; phases "
                             + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()) + "; model "
                             + ", ".join(f"{k} {v:.2f}" for k, v in row["model_phases_ms"].items())
                             + (f"; link {link:.0f} GB/s" if link else ""))
                    save()
                del split
            runs.clear()
            _free(devices)
        del A0, B0, reference
        _free(range(max(counts)))


def _tp_rows(block: Any, P: int, form: str, dtype: str, activation: str, flops: float, T: dict, pred: dict,
             checks: dict) -> list[dict[str, Any]]:
    """The rows of one (GPU count, form, chunks) setting: without overlap, and with it when chunks > 1."""
    from gemm_course.multigpu import tensor_parallel as tp

    plan = block.plan
    itemsize = np.dtype(dtype).itemsize
    t_compute = T["compute"].median_ms
    t_comm = T["communication"].median_ms if P > 1 else 0.0
    t_serial = T["serial"].median_ms if P > 1 else t_compute
    t_overlap = T["overlap"].median_ms if "overlap" in T else None
    frac = tp.overlap_fraction(t_serial, t_overlap, t_comm) if t_overlap is not None else (None, None)
    rows = []
    for overlap in ([False, True] if t_overlap is not None else [False]):
        t = T["overlap" if overlap else ("serial" if P > 1 else "compute")]
        model_ms = pred["overlap_ms" if overlap else "serial_ms"]
        rows.append({
            "scheme": "tensor parallel", "form": form, "gpus": P, "overlap": overlap, "chunks": plan.chunks,
            "dtype": dtype, "activation": activation, "M": plan.M, "H": plan.H, "F": plan.F, "local": "cublas",
            "median_ms": t.median_ms, "q1_ms": t.q1_ms, "q3_ms": t.q3_ms, "reps": t.reps,
            "tflops": flops / t.median_ms / 1e9, "model_ms": model_ms, "model_tflops": flops / model_ms / 1e9,
            "phases_ms": {"compute": t_compute, "communication": t_comm},
            "model_phases_ms": {"compute": pred["compute_ms"], "communication": pred["communication_ms"]},
            "t_compute_ms": t_compute, "t_comm_ms": t_comm, "t_serial_ms": t_serial, "t_overlap_ms": t_overlap,
            "overlap_fraction": frac[0], "overlap_fraction_raw": frac[1], "model": pred,
            "comm_bytes_per_chunk": [plan.chunk_bytes(c, itemsize) for c in range(len(plan.row_chunks))],
            **checks["overlap" if overlap else "serial"]})
    return rows


def _bench_tensor_parallel(result: dict, groups: dict, links: dict, counts: Sequence[int],
                           shapes: Sequence[tuple[int, int, int]], dtypes: Sequence[str], forms: Sequence[str],
                           chunk_counts: Sequence[int], activation: str, local_time: Callable,
                           progress: Callable[[str], None], save: Callable[[], None]) -> None:
    import cupy

    from gemm_course.multigpu import tensor_parallel as tp
    from gemm_course.measure.bench import time_gpu

    timing = dict(min_reps=5, max_reps=20, budget_s=0.5)
    for dtype in dtypes:
        for M, H, F in shapes:
            X0, W1, W2 = tp.random_layer(M, H, F, dtype)
            reference = tp.reference(X0, W1, W2, activation)
            flops = tp.layer_flops(M, H, F)
            for P in counts:
                group, devices = groups[P], groups[P].devices
                shards = tp.Shards(group, X0, W1, W2)
                settings = [("one GPU", 1)] if P == 1 else [(f, c) for f in forms for c in chunk_counts]
                for form, chunks in settings:
                    try:
                        block = tp.TensorParallelMLP(shards, "all-reduce" if P == 1 else form, chunks, activation)
                    except ValueError as err:
                        progress(f"skipping {M}×{H}×{F} {form}, {chunks} chunks on {P} GPUs: {err}")
                        continue
                    modes = ["compute"]
                    if P > 1:
                        modes += ["communication", "serial"] + (["overlap"] if chunks > 1 else [])
                    checks = {m: block.check(reference, m) for m in ("serial", "overlap") if m == "serial" or m in modes}
                    pred = tp.model(block.plan, links.get(P), block.time_chunk_compute(local_time),
                                    np.dtype(dtype).itemsize)
                    with cupy.cuda.Device(0):
                        T = {m: time_gpu(lambda m=m: block.forward(m), devices=devices, **timing) for m in modes}
                    for row in _tp_rows(block, P, form, dtype, activation, flops, T, pred, checks):
                        result["multigpu"].append(row)
                        progress(f"{M}×{H}×{F} {dtype} MLP, {form}, {P} GPU(s), {chunks} chunk(s)"
                                 f"{', overlapped' if row['overlap'] else ''}: {row['median_ms']:.3f} ms, "
                                 f"{row['tflops']:.0f} TFLOPS; model {row['model_ms']:.3f} ms; compute "
                                 f"{row['t_compute_ms']:.3f} ms (model {pred['compute_ms']:.3f}), communication "
                                 f"{row['t_comm_ms']:.3f} ms (model {pred['communication_ms']:.3f})"
                                 + (f"; overlap hid {row['overlap_fraction_raw']:.0%} of it" if row["overlap"] else "")
                                 + f"; error {row['relative_error']:.1e} {'ok' if row['passed'] else 'WRONG'}")
                        save()
                    del block
                    _free(devices)
                del shards
                _free(devices)
            del X0, W1, W2, reference
            _free(range(max(counts)))
