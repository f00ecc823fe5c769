"""Level 12's communication model: what each NCCL collective costs, measured and fitted on the GPUs
at hand, and the least communication any distributed GEMM needs.

The α-β model (latency + bytes / bandwidth) prices one collective over P GPUs on n bytes:

    time = steps · α + factor · n · β

    α       the latency of one step: a launch, a handshake, a synchronisation (seconds)
    β       seconds per byte over one GPU's link (1/β is the link bandwidth)
    n       bytes of the FULL buffer: the buffer of a broadcast or an all-reduce, the gathered result
            of an all-gather, the input on each GPU of a reduce-scatter (NCCL's own convention)

ring: the GPUs pass pieces to their neighbour, all links busy at once (NCCL's choice inside a machine)

    GPU0 ──► GPU1 ──► GPU2 ──► GPU3 ─┐       reduce-scatter: P−1 steps; each step every GPU sends
      ▲──────────────────────────────┘       one n/P piece on and adds the piece it receives.
                                             all-gather: P−1 more steps pass the finished pieces on.

    collective                                  steps        factor (× n · β)
    broadcast, pipelined along the ring         P−1          1          (large n: the pipeline fills once)
    all-gather / reduce-scatter                 P−1          (P−1)/P
    all-reduce (reduce-scatter + all-gather)    2(P−1)       2(P−1)/P

tree: log2 P rounds (written L = ⌈log2 P⌉), fewer latencies, used across machines for small messages

    broadcast (binomial tree)                   L            L
    all-gather (recursive doubling)             L            (P−1)/P
    reduce-scatter (recursive halving)          L            (P−1)/P
    all-reduce (halving, then doubling)         2L           2(P−1)/P

point to point

    send/recv (one GPU to one other)            1            1
    scatter / gather (one root sends or         P−1          (P−1)/P    (the root's link carries every
      receives every other GPU's piece)                                 piece but its own)

These are the textbook forms (Thakur, Rabenseifner and Gropp, "Optimization of collective
communication operations in MPICH", 2005; Chan et al., "Collective communication: theory, practice,
and experience", 2007). The arithmetic of a reduction (adding the pieces) is left out: it runs at
memory speed, far above the link's.

`measure` times real NCCL calls; `fit` recovers α and β from them by least squares on the model's
own (steps, factor), so an all-reduce's fit gives the link's β, comparable with a broadcast's.
`lower_bound_bytes` is the communication no distributed matrix product can avoid.

Nothing here needs a GPU except `measure` (CuPy and NCCL are imported inside it).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

COLLECTIVES = ("broadcast", "all-gather", "reduce-scatter", "all-reduce", "send/recv", "scatter", "gather")
ALGORITHMS = ("ring", "tree")
MEASURED = ("broadcast", "all-gather", "reduce-scatter", "all-reduce", "send/recv")  # what `measure` times
# 4 KiB to 1 GiB in steps of 4: latency-bound at the small end, bandwidth-bound at the large end
DEFAULT_SIZES = tuple(4096 * 4**i for i in range(10))
# The phases of Level 12 move tens of MB to GBs: predictions use the fit over sizes from here up
BANDWIDTH_REGIME_BYTES = 1 << 20

# scatter and gather are priced with the link that a send/recv measures
_FIT_OF = {"scatter": "send/recv", "gather": "send/recv"}


def cost_terms(collective: str, P: int, algorithm: str = "ring") -> tuple[float, float]:
    """(steps, factor) of the α-β model: time = steps·α + factor·n·β. See the module docstring."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    if P < 1:
        raise ValueError(f"a collective needs at least one GPU, not {P}")
    if P == 1:
        return 0.0, 0.0  # nothing leaves the GPU
    share = (P - 1) / P
    if collective == "send/recv":
        return 1.0, 1.0
    if collective in ("scatter", "gather"):
        return float(P - 1), share
    if algorithm == "ring":
        return {"broadcast": (P - 1, 1.0), "all-gather": (P - 1, share), "reduce-scatter": (P - 1, share),
                "all-reduce": (2 * (P - 1), 2 * share)}[collective]
    rounds = math.ceil(math.log2(P))
    return {"broadcast": (rounds, float(rounds)), "all-gather": (rounds, share), "reduce-scatter": (rounds, share),
            "all-reduce": (2 * rounds, 2 * share)}[collective]


def predict_seconds(collective: str, n_bytes: float, P: int, alpha_s: float, beta_s_per_byte: float,
                    algorithm: str = "ring") -> float:
    """The α-β model's time for one collective on n bytes (the full buffer) over P GPUs."""
    steps, factor = cost_terms(collective, P, algorithm)
    return steps * alpha_s + factor * n_bytes * beta_s_per_byte


def bus_bandwidth(collective: str, n_bytes: float, seconds: float, P: int) -> float:
    """NCCL's bus bandwidth in GB/s (nccl-tests' convention): the algorithm bandwidth n/t times
    2(P−1)/P for an all-reduce, (P−1)/P for all-gather, reduce-scatter, scatter and gather, 1 for a
    broadcast or a send/recv. It is what one link carries, so different collectives compare."""
    factor = {"all-reduce": 2 * (P - 1) / P, "all-gather": (P - 1) / P, "reduce-scatter": (P - 1) / P,
              "scatter": (P - 1) / P, "gather": (P - 1) / P, "broadcast": 1.0, "send/recv": 1.0}[collective]
    return n_bytes / seconds * factor / 1e9


@dataclass(frozen=True)
class Point:
    """One collective at one size, timed: the median (and quartiles) of `reps` repetitions."""

    collective: str
    gpus: int
    n_bytes: int
    median_s: float
    q1_s: float
    q3_s: float
    reps: int

    @property
    def bus_gbs(self) -> float:
        return bus_bandwidth(self.collective, self.n_bytes, self.median_s, self.gpus)


@dataclass(frozen=True)
class Fit:
    """α and β of one collective, fitted on measured points (or set on paper, points = 0)."""

    collective: str
    gpus: int
    algorithm: str
    alpha_s: float
    beta_s_per_byte: float
    min_bytes: int = 0
    max_bytes: int = 0
    points: int = 0
    rms_relative_residual: float = 0.0
    max_relative_residual: float = 0.0
    source: str = "measured"

    @property
    def link_gbs(self) -> float:
        """1/β in GB/s: the link bandwidth this fit implies."""
        return 1.0 / self.beta_s_per_byte / 1e9

    def seconds(self, n_bytes: float, P: Optional[int] = None, collective: Optional[str] = None) -> float:
        """Predicted time of this collective (or another priced by the same link) on n bytes over P GPUs."""
        return predict_seconds(collective or self.collective, n_bytes, self.gpus if P is None else P,
                               self.alpha_s, self.beta_s_per_byte, self.algorithm)

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), link_gbs=self.link_gbs)


def fit(points: Sequence[Point], algorithm: str = "ring", min_bytes: int = 0) -> Fit:
    """α (s) and β (s/byte) from measured points of ONE collective on one GPU count.

    Least squares on the model's own terms, t ≈ steps·α + factor·n·β, weighted by 1/t: the sizes span
    six orders of magnitude, and unweighted the largest would decide both numbers alone. α is kept
    ≥ 0 (if the unconstrained fit goes negative, α = 0 and β is refitted alone).
    """
    pts = [p for p in points if p.n_bytes >= min_bytes]
    if len({(p.collective, p.gpus) for p in pts}) != 1:
        raise ValueError("fit takes the points of one collective on one GPU count")
    if len({p.n_bytes for p in pts}) < 2:
        raise ValueError("fit needs points at two sizes at least")
    collective, P = pts[0].collective, pts[0].gpus
    steps, factor = cost_terms(collective, P, algorithm)
    t = np.array([p.median_s for p in pts])
    n = np.array([float(p.n_bytes) for p in pts])
    design = np.column_stack([np.full_like(n, steps), factor * n]) / t[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:  # a negative latency means the small sizes carry no information on α: drop it
        alpha = 0.0
        x = factor * n / t
        beta = float(x.sum() / (x * x).sum())
    if beta <= 0:
        raise ValueError(f"the {collective} times do not grow with size: no bandwidth can be fitted")
    residual = (steps * alpha + factor * n * beta - t) / t
    return Fit(collective, P, algorithm, float(alpha), float(beta), int(n.min()), int(n.max()), len(pts),
               float(np.sqrt(np.mean(residual**2))), float(np.abs(residual).max()))


@dataclass
class Links:
    """The α-β model of every collective over one set of links: one fit per collective.

    A collective with no fit of its own is priced with `fallback`'s α and β (scatter and gather with
    the send/recv fit). Calibrated on 2 GPUs, the same α and β price 4 or 8 GPUs through the formulas.
    """

    fits: dict[str, Fit] = field(default_factory=dict)
    fallback: str = "broadcast"
    label: str = ""

    def fit_for(self, collective: str) -> Fit:
        name = _FIT_OF.get(collective, collective)
        found = self.fits.get(name) or self.fits.get(self.fallback)
        if found is None:
            raise ValueError(f"no α-β fit for {collective!r} (fits: {', '.join(self.fits) or 'none'})")
        return found

    def seconds(self, collective: str, n_bytes: float, P: int, algorithm: Optional[str] = None) -> float:
        f = self.fit_for(collective)
        return predict_seconds(collective, n_bytes, P, f.alpha_s, f.beta_s_per_byte, algorithm or f.algorithm)

    def with_bandwidth(self, link_gbs: float, label: str = "") -> "Links":
        """The same latencies over links of another bandwidth (e.g. a network between machines, on paper)."""
        beta = 1.0 / (link_gbs * 1e9)
        fits = {k: Fit(f.collective, f.gpus, f.algorithm, f.alpha_s, beta, source=f"on paper: {link_gbs:g} GB/s")
                for k, f in self.fits.items()}
        return Links(fits, self.fallback, label or f"{link_gbs:g} GB/s per GPU (on paper)")

    @staticmethod
    def uniform(alpha_s: float, link_gbs: float, algorithm: str = "ring", label: str = "") -> "Links":
        """Every collective over the same α and bandwidth (on paper)."""
        beta = 1.0 / (link_gbs * 1e9)
        fits = {c: Fit(c, 2, algorithm, alpha_s, beta, source="on paper") for c in MEASURED}
        return Links(fits, label=label or f"α {alpha_s * 1e6:g} µs, {link_gbs:g} GB/s (on paper)")

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "fallback": self.fallback, "fits": {k: f.as_dict() for k, f in self.fits.items()}}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Links":
        names = {f.name for f in fields(Fit)}
        fits = {k: Fit(**{n: v for n, v in f.items() if n in names}) for k, f in d["fits"].items()}
        return Links(fits, d.get("fallback", "broadcast"), d.get("label", ""))


def fit_all(points: Sequence[Point], min_bytes: int = BANDWIDTH_REGIME_BYTES, algorithm: str = "ring",
            label: str = "") -> Links:
    """One fit per collective found in `points` (all on the same GPU count), sizes ≥ min_bytes."""
    by: dict[str, list[Point]] = {}
    for p in points:
        by.setdefault(p.collective, []).append(p)
    return Links({c: fit(ps, algorithm, min_bytes) for c, ps in by.items()}, label=label)


# --- timing real NCCL calls ----------------------------------------------------------------------------

def _nccl_call(collective: str, P: int, send: Sequence[Any], recv: Sequence[Any], count: int,
               nccl_type: int) -> Callable[[int, Any, Any], None]:
    """calls(rank, communicator, stream) for Group.run: one collective on `count` elements of the
    full buffer (the all-gather's result, the reduce-scatter's input)."""
    from cupy.cuda import nccl

    def calls(r: int, c: Any, s: Any) -> None:
        if collective == "broadcast":
            c.bcast(send[r].data.ptr, count, nccl_type, 0, s.ptr)
        elif collective == "all-gather":
            c.allGather(send[r].data.ptr, recv[r].data.ptr, count // P, nccl_type, s.ptr)
        elif collective == "reduce-scatter":
            c.reduceScatter(send[r].data.ptr, recv[r].data.ptr, count // P, nccl_type, nccl.NCCL_SUM, s.ptr)
        elif collective == "all-reduce":
            c.allReduce(send[r].data.ptr, recv[r].data.ptr, count, nccl_type, nccl.NCCL_SUM, s.ptr)
        elif collective == "send/recv":  # GPU 0 to GPU 1; the others sit out
            if r == 0:
                c.send(send[0].data.ptr, count, nccl_type, 1, s.ptr)
            elif r == 1:
                c.recv(recv[1].data.ptr, count, nccl_type, 0, s.ptr)
        else:
            raise ValueError(f"measure times {', '.join(MEASURED)}, not {collective!r}")
    return calls


def measure(group: Any, collective: str, sizes_bytes: Sequence[int] = DEFAULT_SIZES, reps: int = 10,
            warmups: int = 3) -> list[Point]:
    """Time one NCCL collective over a gemm_course.multigpu.schemes.Group at each size (bytes of the full
    buffer, float32 elements, rounded down to a multiple of P elements).

    One call per repetition: synchronise every GPU, read the host clock, issue the call on every GPU
    in one NCCL group, synchronise every GPU again, read the clock. A CUDA event on GPU 0's stream
    would time GPU 0 only; the collective ends when the LAST GPU is done. `warmups` untimed calls
    first (NCCL sets up its channels and buffers on first use); the median of `reps`. The host's
    launch and synchronisation are inside every sample, as they are inside every phase that Level 12
    times, so α carries them too.
    """
    import time

    import cupy
    from cupy.cuda import nccl

    P = len(group.devices)
    if P < 2:
        raise ValueError("a collective needs 2 GPUs at least · 集合通信至少需要 2 个 GPU")
    largest = max(sizes_bytes) // 4
    send, recv = [], []
    for d in group.devices:
        with cupy.cuda.Device(d):
            send.append(cupy.zeros(largest, dtype=cupy.float32))
            recv.append(cupy.zeros(largest, dtype=cupy.float32))
    points = []
    for n in sizes_bytes:
        count = max(P, (n // 4) // P * P)
        call = _nccl_call(collective, P, send, recv, count, nccl.NCCL_FLOAT32)
        samples = []
        for i in range(warmups + reps):
            group.synchronize()
            t0 = time.perf_counter()
            group.run(call)
            group.synchronize()
            if i >= warmups:
                samples.append(time.perf_counter() - t0)
        q1, med, q3 = np.percentile(samples, [25, 50, 75])
        points.append(Point(collective, P, count * 4, float(med), float(q1), float(q3), len(samples)))
    del send, recv
    return points


# --- the least communication of any distributed GEMM ---------------------------------------------------

def lower_bound_words(M: int, N: int, K: int, P: int) -> float:
    """Words (matrix elements) that the busiest of P processors must send or receive to compute the
    M×N product C = A·B (A: M×K, B: K×N) with the classical algorithm, when A, B and C each start
    (and C ends) in one copy spread evenly over the processors, however much memory each has.

    With the dimensions sorted d1 ≥ d2 ≥ d3, and D the data one processor must touch:

        P ≤ d1/d2               D = d2·d3 + (d1·d2 + d1·d3)/P      (1-D: split the largest dimension)
        d1/d2 ≤ P ≤ d1·d2/d3²   D = 2·(d1·d2·d3²/P)^(1/2) + d1·d2/P  (2-D grid)
        P ≥ d1·d2/d3²           D = 3·(d1·d2·d3/P)^(2/3)             (3-D grid)

    and the bound is D − (MN + NK + MK)/P: what it touches minus the share it already owns. For
    cubes only the 3-D case applies: 3·(n³/P)^(2/3) − 3n²/P. The 3-D term's order is from Ballard,
    Demmel, Holtz, Lipshitz and Schwartz (2012, memory-independent bounds); the constants and the
    three cases, tight (an algorithm attains each), from Al Daas, Ballard, Grigori, Kumar and
    Rouse, "Tight memory-independent parallel matrix multiplication communication lower bounds"
    (SPAA 2022).
    """
    if min(M, N, K, P) < 1:
        raise ValueError("dimensions and P must be positive")
    d1, d2, d3 = sorted((float(M), float(N), float(K)), reverse=True)
    if P <= d1 / d2:
        touched = d2 * d3 + (d1 * d2 + d1 * d3) / P
    elif P <= d1 * d2 / d3**2:
        touched = 2 * math.sqrt(d1 * d2 * d3**2 / P) + d1 * d2 / P
    else:
        touched = 3 * (d1 * d2 * d3 / P) ** (2 / 3)
    return max(0.0, touched - (M * N + N * K + M * K) / P)


def lower_bound_bytes(M: int, N: int, K: int, P: int, itemsize: int = 4) -> float:
    """lower_bound_words in bytes: no distributed GEMM moves less through its busiest GPU."""
    return itemsize * lower_bound_words(M, N, K, P)
