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

The cost model for both lives in gemm_course.models (comm_bytes_*), so it can be read and extended
(to several nodes) without GPUs.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np


def gpu_count() -> int:
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

    def run(self, calls: Callable[[int, Any, Any], None]) -> None:
        """calls(rank, communicator, stream) on every GPU inside one NCCL group."""
        import cupy
        from cupy.cuda import nccl

        nccl.groupStart()
        try:
            for rank, (d, comm, stream) in enumerate(zip(self.devices, self.comms, self.streams)):
                with cupy.cuda.Device(d):
                    calls(rank, comm, stream)
        finally:
            nccl.groupEnd()

    def synchronize(self) -> None:
        for s in self.streams:
            s.synchronize()


def _nccl_float() -> int:
    from cupy.cuda import nccl

    return nccl.NCCL_FLOAT32


def local_gemm(A: Any, B: Any, out: Any, local: str) -> None:
    """C = A·B on the current device: cuBLAS, or a course level's kernel (e.g. "08_warp_tiling")."""
    import cupy

    if local == "cublas":
        cupy.matmul(A, B, out=out)
    else:
        from .launch import gemm

        gemm(A, B, local, out=out)


def row_split(group: Group, A0: Any, B0: Any, local: str = "cublas",
              phases: Optional[dict[str, float]] = None) -> Any:
    """C = A·B with A's rows split over the group; A0, B0, and the returned C live on GPU 0.

    If `phases` is a dict, the time of each phase (broadcast, scatter, compute, gather) in ms is
    added to it (each phase is then separated by a synchronisation).
    """
    import time

    import cupy

    P = len(group.devices)
    M, K = A0.shape
    N = B0.shape[1]
    if M % P:
        raise ValueError(f"row split needs M divisible by the GPU count: M={M}, P={P}")
    rows = M // P
    Bs, As, Cs = [], [], []
    for rank, d in enumerate(group.devices):
        with cupy.cuda.Device(d):
            Bs.append(B0 if rank == 0 else cupy.empty((K, N), dtype=cupy.float32))
            As.append(A0[:rows] if rank == 0 else cupy.empty((rows, K), dtype=cupy.float32))
            Cs.append(cupy.empty((M, N) if rank == 0 else (rows, N), dtype=cupy.float32))
    f32 = _nccl_float()

    def timed(name: str, step: Callable[[], None]) -> None:
        if phases is None:
            step()
            return
        group.synchronize()
        t0 = time.perf_counter()
        step()
        group.synchronize()
        phases[name] = phases.get(name, 0.0) + (time.perf_counter() - t0) * 1e3

    def broadcast() -> None:
        group.run(lambda r, c, s: c.bcast(Bs[r].data.ptr, K * N, f32, 0, s.ptr))

    def scatter() -> None:
        def calls(r: int, c: Any, s: Any) -> None:
            if r == 0:
                for peer in range(1, P):
                    c.send(A0[peer * rows:(peer + 1) * rows].data.ptr, rows * K, f32, peer, s.ptr)
            else:
                c.recv(As[r].data.ptr, rows * K, f32, 0, s.ptr)
        group.run(calls)

    def compute() -> None:
        for r, d in enumerate(group.devices):
            with cupy.cuda.Device(d), group.streams[r]:
                local_gemm(As[r], Bs[r], Cs[r][:rows] if r == 0 else Cs[r], local)

    def gather() -> None:
        def calls(r: int, c: Any, s: Any) -> None:
            if r == 0:
                for peer in range(1, P):
                    c.recv(Cs[0][peer * rows:(peer + 1) * rows].data.ptr, rows * N, f32, peer, s.ptr)
            else:
                c.send(Cs[r].data.ptr, rows * N, f32, 0, s.ptr)
        group.run(calls)

    for name, step in (("broadcast B", broadcast), ("scatter A", scatter), ("compute", compute),
                       ("gather C", gather)):
        timed(name, step)
    group.synchronize()
    return Cs[0]


def grid_shape(P: int) -> tuple[int, int]:
    """The most square pr × pc grid with pr·pc = P (pr ≤ pc)."""
    pr = int(math.isqrt(P))
    while P % pr:
        pr -= 1
    return pr, P // pr


def summa(group: Group, A0: Any, B0: Any, phases: Optional[dict[str, float]] = None) -> Any:
    """C = A·B on a pr × pc grid of GPUs (SUMMA). A0, B0 on GPU 0 are distributed first (not
    timed as part of the algorithm); the blocks of C are gathered back to GPU 0 at the end.
    phases (if given) receives the time of the panel loop and of the final gather, in ms."""
    import time

    import cupy
    import cupy.cublas  # C += A_panel · B_panel with beta = 1 (not imported by `import cupy`)
    from cupy.cuda import nccl

    P = len(group.devices)
    pr, pc = grid_shape(P)
    M, K = A0.shape
    N = B0.shape[1]
    L = pr * pc // math.gcd(pr, pc)
    if M % pr or N % pc or K % L:
        raise ValueError(f"SUMMA on a {pr}×{pc} grid needs M % {pr} == 0, N % {pc} == 0, K % {L} == 0")
    mb, nb, kb = M // pr, N // pc, K // L
    coords = [(rank // pc, rank % pc) for rank in range(P)]
    row_comms, col_comms = group.grid_comms()
    A_blk, B_blk, C_blk, A_pan, B_pan = [], [], [], [], []
    for rank, d in enumerate(group.devices):
        i, j = coords[rank]
        a_src = cupy.ascontiguousarray(A0[i * mb:(i + 1) * mb, j * (K // pc):(j + 1) * (K // pc)])
        b_src = cupy.ascontiguousarray(B0[i * (K // pr):(i + 1) * (K // pr), j * nb:(j + 1) * nb])
        with cupy.cuda.Device(d):
            A_blk.append(cupy.asarray(a_src))  # peer copy from GPU 0: the initial distribution
            B_blk.append(cupy.asarray(b_src))
            C_blk.append(cupy.zeros((mb, nb), dtype=cupy.float32))
            A_pan.append(cupy.empty((mb, kb), dtype=cupy.float32))
            B_pan.append(cupy.empty((kb, nb), dtype=cupy.float32))
    group.synchronize()
    for d in group.devices:
        cupy.cuda.Device(d).synchronize()
    f32 = _nccl_float()
    t0 = time.perf_counter()
    for p in range(L):
        a_owner, a_off = p // (L // pc), (p % (L // pc)) * kb  # grid column holding A's panel
        b_owner, b_off = p // (L // pr), (p % (L // pr)) * kb  # grid row holding B's panel
        for rank, d in enumerate(group.devices):
            i, j = coords[rank]
            with cupy.cuda.Device(d), group.streams[rank]:
                if j == a_owner:
                    A_pan[rank][...] = A_blk[rank][:, a_off:a_off + kb]
                if i == b_owner:
                    B_pan[rank][...] = B_blk[rank][b_off:b_off + kb]
        nccl.groupStart()
        for rank, d in enumerate(group.devices):
            i, j = coords[rank]
            with cupy.cuda.Device(d):
                s = group.streams[rank].ptr
                row_comms[i][j].bcast(A_pan[rank].data.ptr, mb * kb, f32, a_owner, s)
                col_comms[j][i].bcast(B_pan[rank].data.ptr, kb * nb, f32, b_owner, s)
        nccl.groupEnd()
        for rank, d in enumerate(group.devices):
            with cupy.cuda.Device(d), group.streams[rank]:
                cupy.cublas.gemm("N", "N", A_pan[rank], B_pan[rank], out=C_blk[rank], alpha=1.0, beta=1.0)
    group.synchronize()
    t1 = time.perf_counter()
    with cupy.cuda.Device(group.devices[0]):
        C = cupy.empty((M, N), dtype=cupy.float32)
        for rank in range(P):
            i, j = coords[rank]
            C[i * mb:(i + 1) * mb, j * nb:(j + 1) * nb] = cupy.asarray(C_blk[rank])  # peer copies
        cupy.cuda.Device(group.devices[0]).synchronize()
    if phases is not None:
        phases["panel loop"] = phases.get("panel loop", 0.0) + (t1 - t0) * 1e3
        phases["gather C"] = phases.get("gather C", 0.0) + (time.perf_counter() - t1) * 1e3
    return C


def link_bandwidth(group: Group, megabytes: int = 512, reps: int = 5) -> float:
    """NCCL broadcast bus bandwidth (GB/s) from GPU 0 over the group: the model's link speed."""
    import time

    import cupy

    n = megabytes * (1 << 20) // 4
    bufs = []
    for d in group.devices:
        with cupy.cuda.Device(d):
            bufs.append(cupy.ones(n, dtype=cupy.float32))
    f32 = _nccl_float()
    samples = []
    for _ in range(reps + 1):
        group.synchronize()
        t0 = time.perf_counter()
        group.run(lambda r, c, s: c.bcast(bufs[r].data.ptr, n, f32, 0, s.ptr))
        group.synchronize()
        samples.append(time.perf_counter() - t0)
    return n * 4 / float(np.median(samples[1:])) / 1e9


def bench_multigpu(sizes: Sequence[int] = (8192, 16384), gpu_counts: Optional[Sequence[int]] = None,
                   local: str = "cublas", out: Optional[str] = None,
                   progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Row split and SUMMA on 1, 2, 4, … GPUs: correctness against a float64 product on GPU 0,
    time per phase, total time, and the measured NCCL link bandwidth; JSON with provenance."""
    from pathlib import Path

    import cupy

    from .bench import METHOD, _write_json, provenance, time_gpu
    from .check import random_operands, relative_error, tolerance

    have = gpu_count()
    if have == 0:
        raise RuntimeError("Level 12 runs on GPUs and none is visible here; its recorded 2×H200 results are in "
                           "the Level 12 notebook (python -m gemm_course summary shows the single-GPU levels)")
    counts = list(gpu_counts or [p for p in (1, 2, 4, 8) if p <= have])
    require_gpus(max(counts))
    method = ("host clock between synchronisations of all GPUs (CUDA events cannot span devices); 1 untimed "
              "call, then the median of 5-10 repetitions within a 2 s budget, L2 of every GPU flushed before "
              "each; phases from one extra run with a synchronisation between phases; " + METHOD.split(";")[-1].strip())
    prov = provenance(method)
    from cupy.cuda import nccl

    prov.update({"gpus_visible": have, "nccl": str(nccl.get_version()), "local_gemm": local})
    result: dict[str, Any] = {"schema": 1, "provenance": prov, "records": [], "multigpu": []}
    for n in sizes:
        with cupy.cuda.Device(0):
            A0, B0 = random_operands(n, n, n)
            reference = A0.astype(cupy.float64) @ B0.astype(cupy.float64)
        for P in counts:
            devices = list(range(P))
            group = Group(devices)
            link = link_bandwidth(group) if P > 1 else None
            schemes = [("row split", lambda ph=None: row_split(group, A0, B0, local, ph))]
            if P > 1 and local == "cublas":  # SUMMA accumulates panels with cuBLAS (beta = 1) only
                schemes.append(("SUMMA", lambda ph=None: summa(group, A0, B0, ph)))
            for name, run in schemes:
                with cupy.cuda.Device(0):
                    err = relative_error(run(), reference)
                    ok = err <= tolerance("float32", n)
                    t = time_gpu(lambda: run(), devices=devices, min_reps=5, max_reps=10, budget_s=2.0)
                phases: dict[str, float] = {}
                run(phases)
                row = {"scheme": name, "gpus": P, "M": n, "N": n, "K": n, "grid": list(grid_shape(P)),
                       "median_ms": t.median_ms, "q1_ms": t.q1_ms, "q3_ms": t.q3_ms, "reps": t.reps,
                       "tflops": 2 * n**3 / t.median_ms / 1e9, "phases_ms": phases, "relative_error": err,
                       "passed": ok, "link_gbs": link}
                result["multigpu"].append(row)
                progress(f"{n}³ {name} on {P} GPU(s): {t.median_ms:.2f} ms, {row['tflops']:.1f} TFLOPS, "
                         f"error {err:.1e} {'ok' if ok else 'WRONG'}; phases "
                         + ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
                         + (f"; link {link:.0f} GB/s" if link else ""))
                if out:
                    _write_json(Path(out), result)
        del A0, B0, reference
        cupy.get_default_memory_pool().free_all_blocks()
    return result
