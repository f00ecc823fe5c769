"""Level 12: a transformer MLP block split over P GPUs the way Megatron-LM does it (tensor parallelism),
with its communication overlapped with the GEMMs.

    Y = (X · W1) · W2        X: M × H (M tokens, hidden size H), W1: H × F, W2: F × H (F = 4H typically)

Cut W1 by COLUMNS and W2 by the matching ROWS. GPU p holds all of X, the F/P columns W1_p and the
F/P rows W2_p, and computes a full-size PARTIAL result without talking to anyone:

             H      F/P                 F/P      H                      H
         ┌──────┐ ┌────┐             ┌────┐  ┌──────┐               ┌──────┐
      M  │  X   │·│W1_p│  =  M  Z_p  │    │ ·│ W2_p │ F/P  =   M    │ Y_p  │   partial: Y = Σ_p Y_p
         └──────┘ └────┘             └────┘  └──────┘               └──────┘
                  H × F/P            M × F/P                          M × H

because X·W1·W2 = Σ_p (X·W1_p)·W2_p: the sum over F splits into the P slices. The only
communication is adding the P partials, M × H elements, once per block:

  form "all-reduce":                 all-reduce the partials; every GPU ends with all of Y.
  form "reduce-scatter/all-gather":  reduce-scatter (GPU p keeps the sum of rows p·M/P .. of Y),
                                     then all-gather them back: every GPU ends with all of Y, the
                                     input of the next block. Between the two, Megatron's
                                     "sequence parallelism" runs the row-wise work (layer norm,
                                     dropout, the residual add) on M/P rows per GPU instead of
                                     repeating it on all M; the ring moves the same bytes as one
                                     all-reduce (an all-reduce IS a reduce-scatter then an all-gather).

A pointwise nonlinearity between the GEMMs (ReLU, GELU) changes nothing here: it acts on each element
of Z = X·W1 alone, and GPU p holds whole columns of Z, so f(Z)_p = f(Z_p) and each GPU applies it to
its own slice. (activation="relu" runs it, to show that.) It would NOT commute with a split of W1 by
rows: then Z itself is a sum over GPUs, and f(a + b) ≠ f(a) + f(b).

Overlap: cut the M tokens into `chunks` row blocks. The GEMMs of chunk i run on each GPU's compute
stream; an event tells the communication stream when chunk i's partial is ready, and its collective
runs there while the compute stream goes on with chunk i+1:

    compute stream │ GEMMs c0 │ GEMMs c1 │ GEMMs c2 │ GEMMs c3 │
    comm stream               │ sum c0 │   │ sum c1 │ │ sum c2 │ │ sum c3 │

The NumPy `simulate` applies exactly the slicing and the sums the GPUs do, so the split can be
checked without a GPU; the GPU classes import CuPy and NCCL when they are used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

FORMS = ("all-reduce", "reduce-scatter/all-gather")
ACTIVATIONS = ("none", "relu")
MODES = ("compute", "communication", "serial", "overlap")
DTYPES = ("float16", "float32")
DEFAULT_SHAPE = (8192, 8192, 32768)  # M tokens, hidden H, feed-forward F = 4H: one large transformer block
# CUDA clamps a stream priority to the device's range; the most negative number is the highest priority,
# so the communication kernels get SMs as soon as any free up, rather than queueing behind GEMM blocks.
COMM_STREAM_PRIORITY = -100


def _error(en: str, zh: str) -> ValueError:
    return ValueError(f"{en} · {zh}")


def split_even(n: int, parts: int) -> list[tuple[int, int]]:
    """[start, end) of `parts` contiguous pieces of range(n), sizes differing by at most one
    (the first n % parts pieces one larger)."""
    if parts < 1 or n < parts:
        raise _error(f"cannot cut {n} into {parts} non-empty pieces", f"无法把 {n} 切成 {parts} 个非空的部分")
    base, extra = divmod(n, parts)
    bounds, start = [], 0
    for i in range(parts):
        end = start + base + (i < extra)
        bounds.append((start, end))
        start = end
    return bounds


def chunk_bounds(M: int, chunks: int, multiple: int = 1) -> list[tuple[int, int]]:
    """Row blocks [r0, r1) of M rows: `chunks` of them, as even as possible, each a multiple of
    `multiple` rows (the reduce-scatter form needs each chunk's rows to split evenly over P GPUs)."""
    if M % multiple:
        raise _error(f"M = {M} rows must be a multiple of {multiple} here (the reduce-scatter form gives "
                     f"each of the {multiple} GPUs the same number of rows)",
                     f"这里 M = {M} 行必须是 {multiple} 的倍数（reduce-scatter 形式让 {multiple} 个 GPU 各得相同行数）")
    if chunks < 1 or M // multiple < chunks:
        raise _error(f"cannot cut {M} rows into {chunks} chunks" + (f" of a multiple of {multiple} rows each"
                                                                    if multiple > 1 else ""),
                     f"无法把 {M} 行切成 {chunks} 块" + (f"（每块行数为 {multiple} 的倍数）" if multiple > 1 else ""))
    return [(r0 * multiple, r1 * multiple) for r0, r1 in split_even(M // multiple, chunks)]


@dataclass(frozen=True)
class Plan:
    """Which columns of W1 (rows of W2) each GPU holds, which rows each chunk covers, and, in the
    reduce-scatter form, which rows of each chunk each GPU keeps."""

    M: int
    H: int
    F: int
    P: int
    form: str
    chunks: int
    f_slices: tuple[tuple[int, int], ...]
    row_chunks: tuple[tuple[int, int], ...]

    def kept_rows(self, chunk: int, gpu: int) -> tuple[int, int]:
        """Rows of Y that GPU `gpu` holds after the reduce-scatter of chunk `chunk`."""
        r0, r1 = self.row_chunks[chunk]
        per = (r1 - r0) // self.P
        return r0 + gpu * per, r0 + (gpu + 1) * per

    def kept_offset(self, chunk: int) -> int:
        """Where chunk `chunk`'s kept rows start in a GPU's M/P-row buffer."""
        return sum((r1 - r0) // self.P for r0, r1 in self.row_chunks[:chunk])

    def chunk_bytes(self, chunk: int, itemsize: int) -> int:
        """Bytes of one chunk's partial (the full buffer of its all-reduce)."""
        r0, r1 = self.row_chunks[chunk]
        return (r1 - r0) * self.H * itemsize


def make_plan(M: int, H: int, F: int, P: int, form: str = "all-reduce", chunks: int = 1) -> Plan:
    """The split of one MLP block over P GPUs; a clear (English · 中文) ValueError if it cannot be made."""
    if min(M, H, F, P) < 1:
        raise _error(f"M, H, F and the GPU count must be positive (got {M}, {H}, {F}, {P})",
                     f"M、H、F 和 GPU 数都必须为正（现在是 {M}、{H}、{F}、{P}）")
    if form not in FORMS:
        raise _error(f"unknown form {form!r}: choose {' or '.join(FORMS)}", f"未知的形式 {form!r}：可选 {' 或 '.join(FORMS)}")
    if F < P:
        raise _error(f"F = {F} columns of W1 cannot be shared by {P} GPUs", f"W1 的 F = {F} 列不够分给 {P} 个 GPU")
    multiple = P if form == "reduce-scatter/all-gather" else 1
    return Plan(M, H, F, P, form, chunks, tuple(split_even(F, P)), tuple(chunk_bounds(M, chunks, multiple)))


def activate(Z: Any, activation: str) -> Any:
    """The pointwise function between the two GEMMs, in place (NumPy or CuPy)."""
    if activation == "relu":
        xp = np if isinstance(Z, np.ndarray) else __import__("cupy")
        xp.maximum(Z, 0, out=Z)  # one elementwise kernel, no host synchronisation (a masked store would sync)
    elif activation != "none":
        raise _error(f"unknown activation {activation!r}: choose {', '.join(ACTIVATIONS)}",
                     f"未知的激活函数 {activation!r}：可选 {', '.join(ACTIVATIONS)}")
    return Z


def simulate(X: np.ndarray, W1: np.ndarray, W2: np.ndarray, plan: Plan, activation: str = "none") -> list[np.ndarray]:
    """What every GPU ends with, computed with NumPy by the same slicing and the same sums as the
    GPU code: partial Y_p = f(X·W1_p)·W2_p per GPU, then per chunk either the all-reduce (Σ_p, in
    rank order) or the reduce-scatter (GPU p keeps its rows of Σ_p) and the all-gather. Returns Y
    as held by each GPU."""
    partials = [activate(X @ W1[:, f0:f1], activation) @ W2[f0:f1] for f0, f1 in plan.f_slices]
    Ys = [np.full((plan.M, plan.H), np.nan) for _ in range(plan.P)]
    for c, (r0, r1) in enumerate(plan.row_chunks):
        if plan.form == "all-reduce":
            total = partials[0][r0:r1].copy()
            for q in range(1, plan.P):
                total += partials[q][r0:r1]
            for Y in Ys:
                Y[r0:r1] = total
        else:
            kept = []
            for p in range(plan.P):
                k0, k1 = plan.kept_rows(c, p)
                piece = partials[0][k0:k1].copy()
                for q in range(1, plan.P):
                    piece += partials[q][k0:k1]
                kept.append(piece)
            for Y in Ys:  # all-gather: every GPU receives every GPU's kept rows, in rank order
                Y[r0:r1] = np.concatenate(kept)
    return Ys


def layer_flops(M: int, H: int, F: int) -> int:
    """Two GEMMs, M×H·H×F and M×F·F×H: 2·M·H·F each."""
    return 4 * M * H * F


_UNIT_ROUNDOFF = {"float16": 2.0**-11, "float32": 2.0**-24}


def layer_tolerance(dtype: str, H: int, F: int, P: int) -> float:
    """Bound on ‖Y − Y_ref‖_F / ‖Y_ref‖_F for a correct split, built from the course's per-GEMM
    tolerance (check.tolerance): the first GEMM (length-H dot products, Z rounded to dtype), the
    second (length ⌈F/P⌉, each partial rounded to dtype), and P − 1 additions of partials in dtype
    by NCCL (one unit roundoff each). Relative errors add to first order."""
    from gemm_course.run.check import tolerance

    c_type = dtype if dtype != "float32" else None
    return (tolerance(dtype, H, c_type) + tolerance(dtype, -(-F // P), c_type)
            + (P - 1) * _UNIT_ROUNDOFF[dtype])


def model(plan: Plan, links: Any, chunk_compute_s: Sequence[float], itemsize: int) -> dict[str, Any]:
    """Predicted times (ms) of one block: each chunk's GEMMs from a one-GPU measurement, each chunk's
    collective from the α-β model (gemm_course.multigpu.collectives.Links); serial = Σ(compute + comm);
    overlap = the two-stage pipeline (models.pipeline_seconds)."""
    from gemm_course.models import pipeline_seconds

    if len(chunk_compute_s) != len(plan.row_chunks):
        raise ValueError("one compute time per chunk")
    comm = []
    for c in range(len(plan.row_chunks)):
        n = plan.chunk_bytes(c, itemsize)
        if plan.P == 1:
            comm.append(0.0)
        elif plan.form == "all-reduce":
            comm.append(links.seconds("all-reduce", n, plan.P))
        else:
            comm.append(links.seconds("reduce-scatter", n, plan.P) + links.seconds("all-gather", n, plan.P))
    compute = list(chunk_compute_s)
    return {"compute_ms": sum(compute) * 1e3, "communication_ms": sum(comm) * 1e3,
            "serial_ms": (sum(compute) + sum(comm)) * 1e3, "overlap_ms": pipeline_seconds(compute, comm) * 1e3,
            "chunk_compute_ms": [c * 1e3 for c in compute], "chunk_communication_ms": [m * 1e3 for m in comm]}


def overlap_fraction(t_serial: float, t_overlap: float, t_comm: float) -> tuple[float, float]:
    """(clipped to [0, 1], raw): the share of the communication time that the overlap hid,
    (T_serial − T_overlap) / T_comm. Raw can leave [0, 1]: below 0 when overlapping made things
    slower (the two streams fought over SMs), above 1 when chunking also sped the compute up."""
    raw = (t_serial - t_overlap) / t_comm if t_comm > 0 else 0.0
    return min(1.0, max(0.0, raw)), raw


# --- on the GPUs ------------------------------------------------------------------------------------------

def nccl_type(dtype: str) -> int:
    from cupy.cuda import nccl

    return {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64}[dtype]


def copy_to_device(src: Any, device: int) -> Any:
    """A contiguous copy of a CuPy array on another GPU (a peer copy over NVLink where there is one)."""
    import cupy

    with cupy.cuda.Device(src.device.id):
        src = cupy.ascontiguousarray(src)
    with cupy.cuda.Device(device):
        dst = cupy.empty(src.shape, dtype=src.dtype)
        dst.data.copy_from_device(src.data, src.nbytes)
    return dst


class Shards:
    """X and each GPU's slices of W1 and W2, placed once per GPU count (not timed): every GPU holds
    all of X, W1[:, f0:f1] and W2[f0:f1]."""

    def __init__(self, group: Any, X0: Any, W1_0: Any, W2_0: Any):
        import cupy

        self.group, self.P = group, len(group.devices)
        (self.M, self.H), self.F = X0.shape, W1_0.shape[1]
        self.dtype = str(X0.dtype)
        self.f_slices = split_even(self.F, self.P)
        self.X, self.W1, self.W2 = [], [], []
        for rank, d in enumerate(group.devices):
            f0, f1 = self.f_slices[rank]
            with cupy.cuda.Device(X0.device.id):
                w1, w2 = W1_0[:, f0:f1], W2_0[f0:f1]
            self.X.append(X0 if d == X0.device.id else copy_to_device(X0, d))
            self.W1.append(copy_to_device(w1, d))
            self.W2.append(copy_to_device(w2, d))
        group.synchronize()


class TensorParallelMLP:
    """One MLP block over a multigpu.Group, in one form, cut into `chunks` row blocks.

    forward(mode): "compute" (the GEMMs alone), "communication" (the collectives alone, on partials
    already computed), "serial" (per chunk: GEMMs, then the collective, on one stream), "overlap"
    (GEMMs on the compute stream, collectives on a high-priority communication stream after an event).
    Every GPU ends with all of Y in self.Y[rank].
    """

    def __init__(self, shards: Shards, form: str = "all-reduce", chunks: int = 1, activation: str = "none"):
        import cupy

        if activation not in ACTIVATIONS:
            activate(None, activation)  # raises the bilingual error
        self.shards, self.group = shards, shards.group
        self.plan = make_plan(shards.M, shards.H, shards.F, shards.P, form, chunks)
        self.activation = activation
        self.nccl_type = nccl_type(shards.dtype)
        biggest = max(r1 - r0 for r0, r1 in self.plan.row_chunks)
        self.Z, self.partial, self.Y, self.kept, self.comm_streams, self.ready = [], [], [], [], [], []
        for rank, d in enumerate(self.group.devices):
            f0, f1 = self.plan.f_slices[rank]
            with cupy.cuda.Device(d):
                self.Z.append(cupy.empty((biggest, f1 - f0), dtype=shards.dtype))  # reused chunk after chunk
                self.partial.append(cupy.empty((shards.M, shards.H), dtype=shards.dtype))
                # one GPU: nothing to add up, the partial IS the result
                self.Y.append(self.partial[rank] if shards.P == 1
                              else cupy.empty((shards.M, shards.H), dtype=shards.dtype))
                self.kept.append(cupy.empty((shards.M // shards.P, shards.H), dtype=shards.dtype)
                                 if form == "reduce-scatter/all-gather" else None)
                self.comm_streams.append(cupy.cuda.Stream(non_blocking=True, priority=COMM_STREAM_PRIORITY))
                self.ready.append([cupy.cuda.Event(disable_timing=True) for _ in self.plan.row_chunks])

    def compute_chunk(self, rank: int, c: int) -> None:
        """partial[rows of chunk c] = f(X[rows]·W1_p)·W2_p on GPU `rank`, on the current stream."""
        import cupy

        r0, r1 = self.plan.row_chunks[c]
        s = self.shards
        Z = self.Z[rank][:r1 - r0]
        cupy.matmul(s.X[rank][r0:r1], s.W1[rank], out=Z)
        activate(Z, self.activation)
        cupy.matmul(Z, s.W2[rank], out=self.partial[rank][r0:r1])

    def communicate_chunk(self, c: int, streams: Sequence[Any]) -> None:
        """Add the partials of chunk c over the GPUs (one NCCL group per collective), on `streams`."""
        from cupy.cuda import nccl

        if self.shards.P == 1:
            return
        r0, r1 = self.plan.row_chunks[c]
        H, dt = self.shards.H, self.nccl_type
        rows = slice(r0, r1)
        if self.plan.form == "all-reduce":
            self.group.run(lambda r, comm, s: comm.allReduce(self.partial[r][rows].data.ptr, self.Y[r][rows].data.ptr,
                                                             (r1 - r0) * H, dt, nccl.NCCL_SUM, s.ptr), streams)
            return
        k0 = self.plan.kept_offset(c)
        per = (r1 - r0) // self.shards.P
        kept = slice(k0, k0 + per)
        self.group.run(lambda r, comm, s: comm.reduceScatter(self.partial[r][rows].data.ptr,
                                                             self.kept[r][kept].data.ptr, per * H, dt,
                                                             nccl.NCCL_SUM, s.ptr), streams)
        # (sequence-parallel work on each GPU's M/P kept rows would go here)
        self.group.run(lambda r, comm, s: comm.allGather(self.kept[r][kept].data.ptr, self.Y[r][rows].data.ptr,
                                                         per * H, dt, s.ptr), streams)

    def forward(self, mode: str = "overlap") -> None:
        """Issue one block on every GPU (asynchronously; the caller synchronises)."""
        import cupy

        if mode not in MODES:
            raise _error(f"unknown mode {mode!r}: choose {', '.join(MODES)}", f"未知的模式 {mode!r}：可选 {', '.join(MODES)}")
        devices, compute = self.group.devices, self.group.streams
        for c in range(len(self.plan.row_chunks)):
            if mode != "communication":
                for rank, d in enumerate(devices):
                    with cupy.cuda.Device(d), compute[rank]:
                        self.compute_chunk(rank, c)
                        if mode == "overlap":
                            self.ready[rank][c].record(compute[rank])
                            self.comm_streams[rank].wait_event(self.ready[rank][c])
            if mode == "communication":
                self.communicate_chunk(c, self.comm_streams)
            elif mode == "serial":
                self.communicate_chunk(c, compute)  # same stream: the next chunk's GEMMs wait for it
            elif mode == "overlap":
                self.communicate_chunk(c, self.comm_streams)
        if mode in ("overlap", "communication"):  # the compute streams (what Group.synchronize waits for) wait too
            for rank, d in enumerate(devices):
                with cupy.cuda.Device(d):
                    compute[rank].wait_event(self.comm_streams[rank].record())

    def poison(self) -> None:
        """NaN in every output and intermediate buffer, so nothing left unwritten can pass a check."""
        import cupy

        for rank, d in enumerate(self.group.devices):
            with cupy.cuda.Device(d):
                for buf in (self.partial[rank], self.Y[rank], self.kept[rank], self.Z[rank]):
                    if buf is not None:
                        buf.fill(float("nan"))
                cupy.cuda.Device(d).synchronize()

    def check(self, reference: Any, mode: str = "overlap") -> dict[str, Any]:
        """Poison, run, compare GPU 0's Y with the float64 reference; the other GPUs' Y must be the
        same bits (NCCL gives every rank the same sum). Returns the error, NaN count and verdict."""
        import cupy

        from gemm_course.run.check import relative_error

        self.poison()
        self.forward(mode)
        for d in self.group.devices:
            cupy.cuda.Device(d).synchronize()
        Y0 = self.Y[0]
        with cupy.cuda.Device(Y0.device.id):
            err = relative_error(Y0, reference)
            unwritten = int(cupy.isnan(Y0).sum())
            identical = all(bool((copy_to_device(Y, Y0.device.id) == Y0).all()) for Y in self.Y[1:])
        for d in self.group.devices[1:]:
            with cupy.cuda.Device(d):
                unwritten += int(cupy.isnan(self.Y[self.group.devices.index(d)]).sum())
        tol = layer_tolerance(self.shards.dtype, self.shards.H, self.shards.F, self.shards.P)
        return {"relative_error": err, "tolerance": tol, "unwritten": unwritten, "replicas_identical": identical,
                "passed": bool(err <= tol and unwritten == 0 and identical)}

    def time_chunk_compute(self, time_fn: Callable[..., Any]) -> list[float]:
        """Seconds of each chunk's GEMMs on GPU 0 alone (the model's compute stage), measured once per
        distinct chunk height with the same buffers and the same stream."""
        import cupy

        seen: dict[int, float] = {}
        out = []
        d0 = self.group.devices[0]
        for c, (r0, r1) in enumerate(self.plan.row_chunks):
            if r1 - r0 not in seen:
                def one(c: int = c) -> None:
                    with cupy.cuda.Device(d0), self.group.streams[0]:
                        self.compute_chunk(0, c)
                seen[r1 - r0] = time_fn(one, devices=[d0]).median_ms / 1e3
            out.append(seen[r1 - r0])
        return out


def reference(X0: Any, W1_0: Any, W2_0: Any, activation: str = "none") -> Any:
    """f(X·W1)·W2 in float64 on X0's GPU, from the rounded inputs exactly."""
    import cupy

    with cupy.cuda.Device(X0.device.id):
        Z = X0.astype(cupy.float64) @ W1_0.astype(cupy.float64)
        activate(Z, activation)
        Y = Z @ W2_0.astype(cupy.float64)
        del Z
        return Y


def random_layer(M: int, H: int, F: int, dtype: str, device: int = 0,
                 seed: Optional[int] = None) -> tuple[Any, Any, Any]:
    """X uniform(−1, 1); W1 and W2 uniform(−1, 1) scaled by 1/√H and 1/√F as a layer's initialisation
    would, so Z and Y stay near 1 whatever the size (fp16 tops out at 65504)."""
    import cupy

    with cupy.cuda.Device(device):
        rng = cupy.random.default_rng(seed)
        X = (2.0 * rng.random((M, H)) - 1.0).astype(dtype)
        W1 = ((2.0 * rng.random((H, F)) - 1.0) / math.sqrt(H)).astype(dtype)
        W2 = ((2.0 * rng.random((F, H)) - 1.0) / math.sqrt(F)).astype(dtype)
    return X, W1, W2
