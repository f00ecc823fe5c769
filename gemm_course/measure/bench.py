"""The one timing harness, and the benchmark that writes recorded results.

Method (recorded in every result file): CUDA events around each launch; one untimed call first
(compilation, module load, cuBLAS handle creation), then untimed launches for a short settling time
so the clock and power reach the state the timed launches see; then repetitions until both a minimum
count and a time budget are reached; before every repetition the L2 cache is flushed by writing a
buffer four times its size, so every launch reads its operands from DRAM as a real workload would
(this is why the inputs need no rotation through buffers larger than L2); we report the median and
the spread (quartiles, min, max). cuBLAS is timed the same way in the same process on the same
operands, so the ratio compares like with like.

The SM clock a kernel ran at is measured where it runs: a probe kernel of a few blocks per SM reads
each SM's cycle counter (clock64) and the GPU's nanosecond timer (%globaltimer) right before and
right after every timed launch, so cycles elapsed over nanoseconds elapsed, on the same SM, is the
clock across the timed region (``KernelClock``). NVML's reading is kept beside it as
``nvml_sm_clock_mhz``: on an H200 it reports 1980 MHz while power-limited Tensor Core kernels run
far below that.
"""
from __future__ import annotations

import ctypes
import datetime
import functools
import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from gemm_course import device
from gemm_course.run.check import epilogue_inputs, relative_error, tolerance
from gemm_course.run.dtypes import BFLOAT16, dtype_name, fill_nan, storage_dtype, to_float64
from gemm_course.levels import get_level
from gemm_course.run.launch import gemm
from gemm_course.models import gemm_flops

CLOCK_METHOD = ("sm_clock_mhz: the kernel's own SM clock, Σ cycles / Σ ns per SM between a clock64 + "
                "%globaltimer probe launched right before and right after each timed launch (one reading "
                "per SM, the median over SMs); nvml_sm_clock_mhz: NVML's SM clock sampled about every "
                "millisecond during the repetitions (median), a side reading only")
METHOD = ("CUDA events around each launch; 1 untimed call and {settle_s} s of untimed launches to settle "
          "the clock, then at least {min_reps} and at most "
          "{max_reps} timed repetitions within a {budget_s} s budget per configuration; L2 flushed "
          "before every repetition by writing 4×L2 bytes (so no buffer rotation is needed); median with "
          "quartiles, min and max; " + CLOCK_METHOD + "; "
          "cuBLAS (cupy.matmul on the same input dtype, CUPY_TF32={tf32}; fp16 inputs give fp16 C; "
          "bf16 inputs through cublasGemmEx with bf16 C and fp32 compute) timed the same way in the same "
          "run, once per size and again immediately before each kernel: the ratio to cuBLAS uses that "
          "paired timing, each with its own measured clock; inputs "
          "uniform(−1, 1), checked against a float64 product before timing.")


@dataclass(frozen=True)
class Timing:
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    reps: int
    # The SM clock the timed launches ran at (MHz), measured on the SMs (KernelClock): a power-limited
    # GPU lowers it, differently for different kernels, so two timings at different clocks are also
    # compared in cycles (median_ms × clock). None where it was not measured (several GPUs).
    sm_clock_mhz: Optional[float] = None
    # NVML's SM clock during the repetitions (median, MHz): a side reading; it need not be the
    # clock the kernel ran at. None where NVML is absent.
    nvml_sm_clock_mhz: Optional[float] = None

    @staticmethod
    def from_samples(samples_ms: Sequence[float], sm_clock_mhz: Optional[float] = None,
                     nvml_sm_clock_mhz: Optional[float] = None) -> "Timing":
        s = np.asarray(samples_ms, dtype=float)
        q1, med, q3 = np.percentile(s, [25, 50, 75])
        return Timing(float(med), float(q1), float(q3), float(s.min()), float(s.max()), len(s), sm_clock_mhz,
                      nvml_sm_clock_mhz)

    @property
    def megacycles(self) -> Optional[float]:
        """The median time in SM cycles (millions): what two kernels at different clocks compare by."""
        return None if self.sm_clock_mhz is None else self.median_ms * self.sm_clock_mhz / 1e3


_CLOCK_PROBE_SOURCE = r"""
// One reading per block: which SM, its cycle counter, the GPU's nanosecond timer. Thread 0 reads
// clock64 and %globaltimer back to back, so the pair belongs to one moment on one SM.
extern "C" __global__ void sm_clock_probe(unsigned long long* out) {
    if (threadIdx.x != 0) return;
    unsigned int sm;
    unsigned long long ns;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    long long cycles = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    out[3 * blockIdx.x] = sm;
    out[3 * blockIdx.x + 1] = (unsigned long long)cycles;
    out[3 * blockIdx.x + 2] = ns;
}

// The other way to read a clock: a probe that runs alone and spins for span_ns, one block per SM.
extern "C" __global__ void sm_clock_spin(unsigned long long* out, unsigned long long span_ns) {
    if (threadIdx.x != 0) return;
    unsigned int sm;
    unsigned long long t0, t1;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    long long c0 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1)); } while (t1 - t0 < span_ns);
    long long c1 = clock64();
    out[3 * blockIdx.x] = sm;
    out[3 * blockIdx.x + 1] = (unsigned long long)(c1 - c0);
    out[3 * blockIdx.x + 2] = t1 - t0;
}
"""


@functools.lru_cache(maxsize=None)
def _clock_kernels() -> tuple[Any, Any]:
    import cupy

    module = cupy.RawModule(code=_CLOCK_PROBE_SOURCE)
    return module.get_function("sm_clock_probe"), module.get_function("sm_clock_spin")


class KernelClock:
    """The SM clock across timed launches, read on the SMs themselves.

    before() and after() each launch a probe of PROBE_BLOCKS_PER_SM tiny blocks per SM on the
    current stream, right before and right after one timed launch; each block stores its SM's id,
    clock64 and %globaltimer. Per SM, the cycles between its last reading before and its first
    reading after, summed over the repetitions, over the nanoseconds between them, is the clock
    that SM ran at across the timed launches (the launch gaps add a few microseconds to
    milliseconds of kernel); the median over SMs is the kernel's clock. A probe that runs alone
    (``spin_clock_mhz``) need not see the same clock: a light probe is not power-limited the way a
    Tensor Core kernel is. The readings stay on the GPU until ``mhz`` (no synchronisation inside
    the timed loop)."""

    PROBE_BLOCKS_PER_SM = 2

    def __init__(self, max_reps: int) -> None:
        import cupy

        self._sms = int(device.properties()["multiProcessorCount"])
        self._blocks = self.PROBE_BLOCKS_PER_SM * self._sms
        self._readings = cupy.zeros((max_reps, 2, self._blocks, 3), dtype=cupy.uint64)
        self._rep = -1

    def _probe(self, which: int) -> None:
        probe, _ = _clock_kernels()
        probe((self._blocks,), (32,), (self._readings[self._rep, which],))

    def before(self) -> None:
        self._rep += 1
        self._probe(0)

    def after(self) -> None:
        self._probe(1)

    @property
    def mhz(self) -> Optional[float]:
        if self._rep < 0:
            return None
        return clock_from_readings(self._readings[: self._rep + 1].get())


def clock_from_readings(readings: Any) -> Optional[float]:
    """The SM clock (MHz) from probe readings shaped (reps, 2, blocks, 3): for each repetition, a probe
    before [0] and after [1] the timed launch, each block's (SM id, clock64, %globaltimer ns). Per SM, the
    cycles from its last reading before to its first reading after, summed over repetitions, over the
    nanoseconds between the same readings; the median over SMs. None without a usable pair."""
    readings = np.asarray(readings).astype(np.int64)
    cycles: dict[int, int] = {}
    nanoseconds: dict[int, int] = {}
    for rep in readings:
        before = {int(sm): (c, t) for sm, c, t in sorted(rep[0], key=lambda r: r[2])}  # last reading wins
        after = {int(sm): (c, t) for sm, c, t in sorted(rep[1], key=lambda r: -r[2])}  # first reading wins
        for sm in before.keys() & after.keys():
            dc, dt = after[sm][0] - before[sm][0], after[sm][1] - before[sm][1]
            if dc > 0 and dt > 0:
                cycles[sm] = cycles.get(sm, 0) + dc
                nanoseconds[sm] = nanoseconds.get(sm, 0) + dt
    per_sm = [cycles[sm] / nanoseconds[sm] * 1e3 for sm in cycles]
    return float(np.median(per_sm)) if per_sm else None


def spin_clock_mhz(span_ms: float = 5.0) -> Optional[float]:
    """The SM clock a light probe sees when it runs alone: one block per SM spins for span_ms,
    reading clock64 and %globaltimer at both ends (median over SMs, MHz)."""
    import cupy

    _, spin = _clock_kernels()
    sms = int(device.properties()["multiProcessorCount"])
    out = cupy.zeros((sms, 3), dtype=cupy.uint64)
    spin((sms,), (32,), (out, np.uint64(int(span_ms * 1e6))))
    rows = out.get().astype(np.int64)
    return float(np.median([c / t * 1e3 for _, c, t in rows if t > 0])) if len(rows) else None


class SmClockSampler:
    """Reads the SM clock through NVML (libnvidia-ml, loaded with ctypes) about every millisecond
    on a background thread while a timing loop runs; `median_mhz` afterwards. Does nothing, and
    reports None, where NVML cannot be loaded."""

    _NVML_CLOCK_SM = 1

    def __init__(self, cuda_device: int = 0) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._handle = _nvml_handle(cuda_device)

    def __enter__(self) -> "SmClockSampler":
        if self._handle is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        lib, handle = self._handle
        mhz = ctypes.c_uint()
        while not self._stop.is_set():
            if lib.nvmlDeviceGetClockInfo(handle, self._NVML_CLOCK_SM, ctypes.byref(mhz)) == 0:
                self.samples.append(mhz.value)
            time.sleep(0.001)

    @property
    def median_mhz(self) -> Optional[float]:
        return float(np.median(self.samples)) if self.samples else None


@functools.lru_cache(maxsize=None)
def _nvml_handle(cuda_device: int) -> Optional[tuple[Any, Any]]:
    """(library, device handle) for the CUDA device, found by PCI bus id; None without NVML."""
    try:
        import cupy

        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            return None
        bus_id = cupy.cuda.runtime.deviceGetPCIBusId(cuda_device).encode()
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bus_id), ctypes.byref(handle)) != 0:
            return None
        return lib, handle
    except (OSError, AttributeError, RuntimeError):
        return None


@functools.lru_cache(maxsize=1)
def _l2_flush_buffer():
    import cupy

    l2 = int(device.properties().get("l2CacheSize", 64 << 20))
    return cupy.empty(max(4 * l2, 64 << 20) // 4, dtype=cupy.int32)


SETTLE_S = 0.1  # untimed launches before the timed ones, so the clock settles where the kernel holds it


def time_gpu(fn: Callable[[], Any], *, min_reps: int = 5, max_reps: int = 50, budget_s: float = 2.0,
             flush_l2: bool = True, devices: Optional[Sequence[int]] = None, settle_s: float = SETTLE_S) -> Timing:
    """Time fn() on the GPU with CUDA events: median of repetitions, L2 flushed before each, the
    kernel's own SM clock measured across the timed launches (KernelClock), NVML's beside it.

    devices: for work spread over several GPUs, the host clock between synchronisations of all of
    them replaces the events (an event times one device's stream only); no kernel clock there.
    """
    import cupy

    device.require_gpu("timing a kernel")
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()

    def sync_all() -> None:
        for d in devices or ():
            cupy.cuda.Device(d).synchronize()

    def flush(rep: int) -> None:
        if not flush_l2:
            return
        for d in devices or [None]:
            if d is None:
                _l2_flush_buffer().fill(rep)
            else:
                with cupy.cuda.Device(d):
                    _l2_flush_buffer_on(d).fill(rep)

    fn()  # untimed: compile, load, create handles
    cupy.cuda.get_current_stream().synchronize()
    sync_all()
    settle_until = time.perf_counter() + settle_s
    while time.perf_counter() < settle_until:  # untimed: the clock settles under this kernel's load
        fn()
        cupy.cuda.get_current_stream().synchronize()
        sync_all()
    samples: list[float] = []
    kernel_clock = None if devices else KernelClock(max_reps)
    began = time.perf_counter()
    with SmClockSampler(cupy.cuda.Device().id) as clock:
        while len(samples) < max_reps and (len(samples) < min_reps or time.perf_counter() - began < budget_s):
            flush(len(samples))
            if devices:
                sync_all()
                t0 = time.perf_counter()
                fn()
                sync_all()
                samples.append((time.perf_counter() - t0) * 1e3)
                continue
            kernel_clock.before()
            start.record()
            fn()
            stop.record()
            kernel_clock.after()
            stop.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, stop))
    cupy.cuda.get_current_stream().synchronize()
    return Timing.from_samples(samples, kernel_clock.mhz if kernel_clock else None, clock.median_mhz)


@functools.lru_cache(maxsize=None)
def _l2_flush_buffer_on(dev: int):
    import cupy

    with cupy.cuda.Device(dev):
        l2 = cupy.cuda.runtime.getDeviceProperties(dev)["l2CacheSize"]
        return cupy.empty(max(4 * l2, 64 << 20) // 4, dtype=cupy.int32)


def _nvidia_smi(query: str) -> Optional[str]:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def recorded_command(argv: Sequence[str]) -> str:
    """The command line as a result file records it: `--out` keeps only the file's name, since the folder
    belongs to the machine that recorded it (whoever reruns the command writes where they like)."""
    from pathlib import Path

    words = list(argv)
    for i, word in enumerate(words):
        if word == "--out" and i + 1 < len(words):
            words[i + 1] = Path(words[i + 1]).name
        elif word.startswith("--out="):
            words[i] = "--out=" + Path(word[len("--out="):]).name
    return " ".join(["python -m gemm_course", *words])


def provenance(method: str) -> dict[str, Any]:
    """Where and how a measurement was made: GPU, clocks, driver, CUDA, CuPy, date, method."""
    import cupy

    props = device.properties()
    rt = cupy.cuda.runtime
    from cupy.cuda import nvrtc

    def version(v: int) -> str:
        return f"{v // 1000}.{(v % 1000) // 10}"

    return {
        "gpu": props["name"],
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": props["multiProcessorCount"],
        "sm_clock_max_mhz": props["clockRate"] // 1000,
        "sm_clock_smi": _nvidia_smi("clocks.sm,clocks.max.sm"),
        "l2_bytes": props.get("l2CacheSize"),
        "memory_bytes": props.get("totalGlobalMem"),
        "driver": _nvidia_smi("driver_version") or version(rt.driverGetVersion()),
        "cuda_driver_api": version(rt.driverGetVersion()),
        "cuda_runtime": version(rt.runtimeGetVersion()),
        "nvrtc": ".".join(map(str, nvrtc.getVersion())),
        "cupy": cupy.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": recorded_command(sys.argv[1:]) if sys.argv else "",
        "method": method,
    }


def _write_json(path: Path, payload: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)  # atomic: an interrupted run leaves the last complete file


def _record(level: str, params: dict, M: int, N: int, K: int, dtype: str, t: Timing,
            **extra: Any) -> dict[str, Any]:
    r = {"level": level, "params": params, "dtype": dtype, "M": M, "N": N, "K": K,
         **asdict(t), "tflops": gemm_flops(M, N, K) / (t.median_ms * 1e-3) / 1e12}
    r.update(extra)
    return r


Config = tuple[str, dict]

# cudaDataType and cublasComputeType_t values (library_types.h, cublas_api.h)
_CUDA_R_16BF, _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT = 14, 68, -1


def cublas_gemm(A: Any, B: Any, C: Any) -> Any:
    """C = A @ B by cuBLAS, C in the inputs' type: cupy.matmul, or for bfloat16 (which CuPy's matmul
    cannot take) cublasGemmEx with fp32 compute. The baseline every level is measured against."""
    import cupy

    if dtype_name(A) != BFLOAT16:
        return cupy.matmul(A, B, out=C)
    from cupy_backends.cuda.libs import cublas

    (M, K), N = A.shape, B.shape[1]
    handle = cupy.cuda.device.get_cublas_handle()
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    # Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: pass B first, no transposes.
    cublas.gemmEx(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, N, M, K, one.ctypes.data,
                  B.data.ptr, _CUDA_R_16BF, N, A.data.ptr, _CUDA_R_16BF, K, zero.ctypes.data,
                  C.data.ptr, _CUDA_R_16BF, N, _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT)
    return C


def bench(configs: Iterable[Config], sizes: Iterable[int | tuple[int, int, int]], *,
          dtype: Optional[str] = None, out: Optional[str | Path] = None,
          progress: Callable[[str], None] = print, min_reps: int = 5, max_reps: int = 50,
          budget_s: float = 2.0, result: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Check and time each (level, params) at each size, with cuBLAS in the same run.

    Results are kept as they come: written to `out` after every measurement, and returned
    (with what was measured so far) if the run is interrupted. Pass the `result` of an earlier
    call to append to it.
    """
    import cupy

    from gemm_course.run.check import random_operands

    resolved = [(get_level(lv).id, get_level(lv).resolve_here(**p)) for lv, p in configs]  # this GPU's defaults
    configs = [c for i, c in enumerate(resolved) if c not in resolved[:i]]  # "{}" may be another setting's twin here
    dtype = dtype or get_level(configs[0][0]).dtypes[0]
    device.require_gpu("benchmarking")
    cc = device.real_compute_capability()  # what the kernels run on, whatever is pretended
    for lv, p in configs:  # e.g. Level 10's copy='tma' on an A100: say so, measure the rest
        if not get_level(lv).setting_runs_on(cc, p):
            progress(f"skipping {lv} {p}: it needs sm_{get_level(lv).required_cc(p)}"
                     f"{'a' if get_level(lv).arch_specific else '+'}, and this GPU is sm_{cc}")
    configs = [(lv, p) for lv, p in configs if get_level(lv).setting_runs_on(cc, p)]
    tf32 = os.environ.get("CUPY_TF32", "0")
    if tf32 != "0":
        raise RuntimeError("CUPY_TF32 is set: cuBLAS would use TF32 and not be an fp32 baseline; unset it")
    method = METHOD.format(min_reps=min_reps, max_reps=max_reps, budget_s=budget_s, tf32=tf32, settle_s=SETTLE_S)
    if result is None:
        result = {"schema": 1, "provenance": provenance(method), "records": []}
    elif method != result["provenance"]["method"] and method not in result["provenance"].get("other_methods", []):
        result["provenance"].setdefault("other_methods", []).append(method)
    path = Path(out) if out else None
    timing = dict(min_reps=min_reps, max_reps=max_reps, budget_s=budget_s)
    try:
        for size in sizes:
            M, N, K = (size, size, size) if isinstance(size, int) else size
            A, B = random_operands(M, N, K, dtype)
            reference = to_float64(A) @ to_float64(B)
            C = cupy.empty((M, N), dtype=storage_dtype(dtype))
            t_blas = time_gpu(lambda: cublas_gemm(A, B, C), **timing)
            blas = _record("cublas", {}, M, N, K, dtype, t_blas, ratio_to_cublas=1.0,
                           relative_error=relative_error(C, reference))
            result["records"].append(blas)
            progress(f"{M}×{N}×{K} cuBLAS: {t_blas.median_ms:.3f} ms, {blas['tflops']:.2f} TFLOPS")
            if path:
                _write_json(path, result)
            C_blas = C
            outputs = {dtype: C}  # C per output type: Tensor Core levels write fp32 (or the input type)
            for level, params in configs:
                c_type = get_level(level).c_type(params, dtype)
                if c_type not in outputs:
                    outputs[c_type] = cupy.empty((M, N), dtype=storage_dtype(c_type))
                C = fill_nan(outputs[c_type], c_type)
                run, expected = dict(params), reference
                if get_level(level).epilogue:  # bias, alpha, beta and the matching reference
                    extra, C_initial, expected = epilogue_inputs(params, reference, dtype, cupy)
                    run.update(extra)
                    if C_initial is not None:
                        C[...] = C_initial
                gemm(A, B, level, out=C, **run)
                err = relative_error(C, expected)
                ok = err <= tolerance(dtype, K, c_type)
                if not ok:
                    progress(f"{M}×{N}×{K} {level} {params}: WRONG RESULT (error {err:.2e}); not timed")
                    continue
                # cuBLAS again right before the kernel: a long run heats the GPU and its power cap
                # lowers the clock, so the pair runs at about the same clock.
                paired = time_gpu(lambda: cublas_gemm(A, B, C_blas), **timing)
                t = time_gpu(lambda: gemm(A, B, level, out=C, **run), **timing)
                rec = _record(level, params, M, N, K, dtype, t, relative_error=err,
                              ratio_to_cublas=paired.median_ms / t.median_ms,
                              cublas_paired_ms=paired.median_ms, cublas_paired_sm_clock_mhz=paired.sm_clock_mhz,
                              cublas_paired_nvml_sm_clock_mhz=paired.nvml_sm_clock_mhz)
                result["records"].append(rec)
                progress(f"{M}×{N}×{K} {level} {params}: {t.median_ms:.3f} ms "
                         f"[{t.q1_ms:.3f}–{t.q3_ms:.3f}], {rec['tflops']:.2f} TFLOPS, "
                         f"{rec['ratio_to_cublas']:.1%} of cuBLAS")
                if path:
                    _write_json(path, result)
            del A, B, C, outputs, reference
            cupy.get_default_memory_pool().free_all_blocks()
    except KeyboardInterrupt:
        progress(f"interrupted: keeping the {len(result['records'])} measurements made so far")
        result["interrupted"] = True
    if path:
        _write_json(path, result)
    return result


FUSION_SHAPES: tuple[tuple[int, int, int], ...] = (
    (4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 512), (8192, 8192, 128), (16384, 8192, 64))


_BIAS_ACTIVATION = {  # C = act(C + bias) in one pass: one read and one write of C (8·M·N bytes)
    "relu": "float v = c + bias[i % n]; c = v > 0.0f ? v : 0.0f",
    "gelu": "float v = c + bias[i % n]; c = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))",
}


def bench_fusion(shapes: Sequence[tuple[int, int, int]] = FUSION_SHAPES, activation: str = "relu",
                 progress: Callable[[str], None] = print, one_kernel: bool = False, **timing: Any) -> list[dict[str, Any]]:
    """Fused C = act(A·B + bias) (Level 6) against the unfused sequence in the same run.

    Unfused: Level 5's GEMM with the same tiles, then a bias-add kernel and an activation kernel,
    each of which reads and writes C (2 × 8·M·N bytes). Also cuBLAS followed by the same two kernels.
    one_kernel: also the fairer baseline a framework would run, the GEMM followed by one element-wise
    kernel that adds the bias and applies the activation in a single pass over C (8·M·N bytes), after
    Level 5 and after cuBLAS.
    """
    import cupy

    from gemm_course.run.check import random_operands

    act = {"relu": lambda X: cupy.maximum(X, 0, out=X),
           "gelu": lambda X: cupy.multiply(X, 0.5 * (1 + cupy.tanh(0.7978845608028654 * (X + 0.044715 * X**3))),
                                           out=X)}[activation]
    bias_act = cupy.ElementwiseKernel("raw float32 bias, int32 n", "float32 c", _BIAS_ACTIVATION[activation],
                                      f"bias_{activation}")
    rows = []
    for M, N, K in shapes:
        A, B = random_operands(M, N, K)
        bias = (2 * cupy.random.default_rng(1).random(N) - 1).astype(cupy.float32)
        C = cupy.empty((M, N), dtype=cupy.float32)

        def unfused(gemm_fn: Callable[[], Any]) -> None:
            gemm_fn()
            cupy.add(C, bias, out=C)  # kernel 2: reads C and bias, writes C
            act(C)                    # kernel 3: reads C, writes C

        def one_pass(gemm_fn: Callable[[], Any]) -> None:
            gemm_fn()
            bias_act(bias, cupy.int32(N), C)  # kernel 2: reads and writes C once

        fused = time_gpu(lambda: gemm(A, B, "06_fused_epilogue", out=C, bias=bias, activation=activation,
                                      accumulate=False, beta=0.0), **timing)
        fused_out = C.copy()
        plain = time_gpu(lambda: gemm(A, B, "05_register_blocking", out=C), **timing)
        split = time_gpu(lambda: unfused(lambda: gemm(A, B, "05_register_blocking", out=C)), **timing)
        error = relative_error(fused_out, C.astype(cupy.float64))  # fused and unfused must agree
        blas = time_gpu(lambda: unfused(lambda: cupy.matmul(A, B, out=C)), **timing)
        row = {"M": M, "N": N, "K": K, "activation": activation, "fused_ms": fused.median_ms,
               "gemm_only_ms": plain.median_ms, "unfused_ms": split.median_ms, "cublas_unfused_ms": blas.median_ms,
               "fused_vs_unfused_error": error, "extra_bytes_unfused": 2 * 8 * M * N + 4 * N,
               "timings": {"fused": asdict(fused), "gemm_only": asdict(plain), "unfused": asdict(split),
                           "cublas_unfused": asdict(blas)}}
        if one_kernel:
            single = time_gpu(lambda: one_pass(lambda: gemm(A, B, "05_register_blocking", out=C)), **timing)
            row["one_kernel_error"] = relative_error(fused_out, C.astype(cupy.float64))
            blas_single = time_gpu(lambda: one_pass(lambda: cupy.matmul(A, B, out=C)), **timing)
            blas_only = time_gpu(lambda: cupy.matmul(A, B, out=C), **timing)
            row.update(unfused_one_kernel_ms=single.median_ms, cublas_one_kernel_ms=blas_single.median_ms,
                       cublas_only_ms=blas_only.median_ms, extra_bytes_one_kernel=8 * M * N + 4 * N)
            row["timings"].update(unfused_one_kernel=asdict(single), cublas_one_kernel=asdict(blas_single),
                                  cublas_only=asdict(blas_only))
        rows.append(row)
        progress(f"{M}×{N}×{K}: fused {fused.median_ms:.3f} ms, GEMM alone {plain.median_ms:.3f} ms, "
                 f"unfused {split.median_ms:.3f} ms ({split.median_ms / fused.median_ms - 1:+.1%}), "
                 f"cuBLAS+2 kernels {blas.median_ms:.3f} ms"
                 + (f", GEMM + one kernel {row['unfused_one_kernel_ms']:.3f} ms, cuBLAS + one kernel "
                    f"{row['cublas_one_kernel_ms']:.3f} ms" if one_kernel else ""))
        del A, B, C
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


BATCHED_CASES: tuple[tuple[int, int], ...] = ((1024, 64), (512, 128), (256, 256), (64, 512), (16, 1024))
BATCHED_CONFIGS: tuple[Config, ...] = (("08_warp_tiling", {"BM": 64, "BN": 64, "WM": 32, "WN": 32}),
                                       ("08_warp_tiling", {}))


def bench_batched(cases: Sequence[tuple[int, int]] = BATCHED_CASES, configs: Sequence[Config] = BATCHED_CONFIGS,
                  progress: Callable[[str], None] = print, **timing: Any) -> list[dict[str, Any]]:
    """A batch of independent n×n×n products (fp32): one batched launch of a level against the same
    kernel launched once per product, and against cuBLAS's strided-batched GEMM (cupy.matmul on 3-D
    arrays), all in the same run. Every result is checked against a float64 product first."""
    import cupy

    from gemm_course.run.check import random_operands

    device.require_gpu("timing batched GEMM")
    if os.environ.get("CUPY_TF32", "0") != "0":
        raise RuntimeError("CUPY_TF32 is set: cuBLAS would use TF32 and not be an fp32 baseline; unset it")
    rows = []
    for batch, n in cases:
        A, B = random_operands(n, n, n, "float32", batch=batch)
        reference = to_float64(A) @ to_float64(B)
        C = cupy.empty((batch, n, n), dtype=cupy.float32)
        flops = batch * gemm_flops(n, n, n)
        t_blas = time_gpu(lambda: cupy.matmul(A, B, out=C), **timing)
        row = {"batch": batch, "M": n, "N": n, "K": n, "cublas_batched": {**asdict(t_blas),
               "tflops": flops / t_blas.median_ms / 1e9, "relative_error": relative_error(C, reference)},
               "levels": []}
        for level, params in configs:
            C.fill(cupy.nan)
            gemm(A, B, level, out=C, **params)
            err = relative_error(C, reference)
            if not err <= tolerance("float32", n):
                progress(f"batch {batch} × {n}³ {level} {params}: WRONG RESULT (error {err:.2e}); not timed")
                continue
            batched = time_gpu(lambda: gemm(A, B, level, out=C, **params), **timing)
            looped = time_gpu(lambda: [gemm(A[i], B[i], level, out=C[i], **params) for i in range(batch)], **timing)
            row["levels"].append({"level": level, "params": get_level(level).resolve(**params), "relative_error": err,
                                  "batched": {**asdict(batched), "tflops": flops / batched.median_ms / 1e9},
                                  "looped": {**asdict(looped), "tflops": flops / looped.median_ms / 1e9}})
            progress(f"batch {batch} × {n}³ {level} {params}: one launch {batched.median_ms:.3f} ms, "
                     f"{batch} launches {looped.median_ms:.3f} ms, cuBLAS batched {t_blas.median_ms:.3f} ms")
        rows.append(row)
        del A, B, C, reference
        cupy.get_default_memory_pool().free_all_blocks()
    return rows
