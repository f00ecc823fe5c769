"""A repeated gemm() call reuses what the first one prepared (launch.PreparedLaunch), and only then.

No GPU is needed: a stand-in for CuPy (NumPy arrays that carry .data.ptr and .device.id), a stand-in H200
(compute capability 9.0, 132 SMs) and a stand-in kernel that records each launch instead of running it.
Everything before the launch is the launcher's own code: the checks, the geometry, the kernel choice,
the tensor maps' keys.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import time
import types
from typing import Any

import numpy as np
import pytest

from gemm_course.run import compile as comp
from gemm_course import device
from gemm_course.fp8 import gemm as fp8_gemm
from gemm_course.run import driver, hopper, launch
from gemm_course.run.dtypes import storage_dtype
from gemm_course.levels import get_level, levels


class GpuArray(np.ndarray):
    """A NumPy array that passes for a CuPy one: the launchers read .data.ptr, .device.id and the module."""

    @property
    def data(self) -> Any:  # type: ignore[override]
        return types.SimpleNamespace(ptr=self.ctypes.data)

    @property
    def device(self) -> Any:
        return types.SimpleNamespace(id=0)


GpuArray.__module__ = "cupy"  # what fp8_gemm tells a CuPy array by


class Kernel:
    """Records what it would launch."""

    def __init__(self, name: str, launches: list) -> None:
        self.name, self._launches = name, launches
        self.max_dynamic_shared_size_bytes = 0

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
        self._launches.append({"kernel": self.name, "grid": grid, "block": block, "shared": shared_mem, "args": args})


class PackedStandIn:
    """driver.PackedLaunch without a driver: start() hands the kernel its arguments (the fresh ones replaced)."""

    def __init__(self, kernel: Kernel, grid: tuple, block: tuple, shared_bytes: int, args: tuple,
                 keep_alive: tuple = (), fresh: tuple = ()) -> None:
        self.kernel, self.grid, self.block, self.shared = kernel, tuple(grid), tuple(block), shared_bytes
        self.args, self.keep_alive, self.fresh = tuple(args), tuple(keep_alive), tuple(fresh)

    def start(self, *fresh_arrays: Any) -> None:
        assert len(fresh_arrays) == len(self.fresh)
        args = list(self.args)
        for position, array in zip(self.fresh, fresh_arrays):
            args[position] = array
        self.kernel(self.grid, self.block, tuple(args), shared_mem=self.shared)


class StandIn:
    """What the stand-ins recorded: kernels compiled (looked up), launches, tensor maps encoded, preparations."""

    def __init__(self) -> None:
        self.compiled: list[str] = []
        self.launches: list[dict] = []
        self.maps: list[tuple] = []
        self.prepared = 0
        self.device = 0


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    seen = StandIn()
    fake = types.ModuleType("cupy")
    fake.ndarray = GpuArray
    fake.dtype = np.dtype
    fake.empty = lambda shape, dtype: np.empty(shape, dtype).view(GpuArray)
    fake.zeros = lambda shape, dtype: np.zeros(shape, dtype).view(GpuArray)
    fake.asarray = lambda x, dtype=None: np.asarray(x, dtype).view(GpuArray)
    fake.ascontiguousarray = lambda x: np.ascontiguousarray(x).view(GpuArray)
    fake.uint16, fake.float32, fake.int32 = np.uint16, np.float32, np.int32
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: seen.device),
                                      get_current_stream=lambda: types.SimpleNamespace(ptr=0),
                                      Device=lambda device_id: contextlib.nullcontext())
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(device, "gpu_available", lambda: True)
    monkeypatch.setattr(device, "properties",
                        lambda: {"major": 9, "minor": 0, "name": "H200 (stand-in)", "multiProcessorCount": 132})

    def get_kernel(lv: Any, params: dict, source: Any = None) -> Kernel:
        # What the real lookup does on the host before its cache hands back the compiled kernel.
        lv = get_level(lv)
        name = lv.kernel_name(params)
        comp.kernel_source(lv) if source is None else source
        comp.compile_options(lv)
        seen.compiled.append(name)
        return Kernel(name, seen.launches)

    def tensor_map(address: int, type_name: str, rows: int, cols: int, box_rows: int, device_id: int) -> Any:
        seen.maps.append((address, type_name, rows, cols, box_rows, device_id))
        # 128 bytes on the "GPU" ([1]: the address they describe), as a real map's array holds its encoding
        return np.array([0, address, rows, cols, box_rows] + [0] * 11, np.uint64).view(GpuArray)

    def compiled_kernel(source: str, options: tuple, name: str, arch: Any = None) -> Kernel:  # Level 13's look-up
        seen.compiled.append(name)
        return Kernel(name, seen.launches)

    real_prepare, real_plan = launch._prepare, fp8_gemm._make_plan

    def counting_plan(*args: Any, **kwargs: Any) -> Any:
        seen.prepared += 1
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(comp, "_compiled_kernel", compiled_kernel)
    monkeypatch.setattr(fp8_gemm, "_make_plan", counting_plan)
    fp8_gemm.clear_prepared()
    hopper.fixup_counters.cache_clear()  # the stand-in's counters must not outlive the test
    hopper.stream_k_workspace.cache_clear()

    def counting_prepare(*args: Any) -> Any:
        seen.prepared += 1
        return real_prepare(*args)

    monkeypatch.setattr(launch, "get_kernel", get_kernel)
    monkeypatch.setattr(comp, "get_kernel", get_kernel)  # Level 11's cluster count looks its kernel up
    monkeypatch.setattr(hopper, "_device_tensor_map", tensor_map)
    monkeypatch.setattr(hopper, "max_active_clusters", lambda kernel, threads, shared, cluster: 66)
    monkeypatch.setattr(launch, "_prepare", counting_prepare)
    monkeypatch.setattr(driver, "PackedLaunch", PackedStandIn)
    launch.clear_prepared()
    yield seen
    launch.clear_prepared()
    fp8_gemm.clear_prepared()
    hopper.fixup_counters.cache_clear()
    hopper.stream_k_workspace.cache_clear()


def operands(M: int, N: int, K: int, dtype: str = "float32") -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    store = storage_dtype(dtype)
    A = (rng.random((M, K)) * 100).astype(store).view(GpuArray)
    B = (rng.random((K, N)) * 100).astype(store).view(GpuArray)
    return A, B


def _output(lv: Any, dtype: str, shape: tuple, **params: Any) -> Any:
    return np.empty(shape, storage_dtype(lv.c_type(lv.resolve(**params), dtype))).view(GpuArray)


SIZE = (256, 256, 256)  # whole tiles of every level, K and N multiples of 8 (Levels 10, 11)


@pytest.mark.parametrize("level", [lv.id for lv in levels()])
def test_a_repeated_call_launches_the_same_kernel_without_preparing_again(gpu: StandIn, level: str) -> None:
    lv = get_level(level)
    dtype = lv.dtypes[0]
    for setting in lv.showcase:
        launch.clear_prepared()
        gpu.prepared, gpu.compiled, gpu.launches = 0, [], []
        A, B = operands(*SIZE[:2], SIZE[2], dtype)
        C = _output(lv, dtype, SIZE[:2], **setting)
        if lv.epilogue and setting.get("bias", True):  # the bias vector itself, one value per column
            setting = {**setting, "bias": np.ones(SIZE[1], np.float32).view(GpuArray)}
        for _ in range(3):
            assert launch.gemm(A, B, lv, out=C, **setting) is C
        assert gpu.prepared == 1, (setting, gpu.prepared)
        first, *again = gpu.launches
        assert len(again) == 2 and all((g["kernel"], g["grid"], g["block"], g["shared"]) ==
                                       (first["kernel"], first["grid"], first["block"], first["shared"]) for g in again)
        (prepared,) = launch._PREPARED.values()  # what the first call prepared is what each call launched
        assert prepared.kernel.name == first["kernel"] and prepared.launch.grid == first["grid"]


def test_each_part_of_the_key_prepares_the_call_again(gpu: StandIn) -> None:
    lv = get_level("10_mma_pipeline")
    A, B = operands(256, 256, 256, "float16")
    C = _output(lv, "float16", (256, 256))

    def call(A: Any = A, B: Any = B, out: Any = C, source: Any = None, **params: Any) -> None:
        launch.gemm(A, B, lv, out=out, source=source, **params)

    call()
    call()
    assert gpu.prepared == 1
    A_bf16, B_bf16 = operands(256, 256, 256, "bfloat16")
    A_tall, _ = operands(384, 256, 256, "float16")
    C_tall = _output(lv, "float16", (384, 256))
    _, B_deep = operands(256, 256, 512, "float16")
    A_deep, _ = operands(256, 256, 512, "float16")
    edited = comp.kernel_source(lv) + "\n// edited\n"

    def other_gpu() -> None:
        gpu.device = 1  # its own compute capability, SM count and kernel
        call()
        gpu.device = 0

    variants = {
        "a parameter": lambda: call(stages=2),
        "two parameters named in either order": lambda: call(BN=128, stages=3) if gpu.device == 0 else None,
        "the input type": lambda: call(A_bf16, B_bf16),
        "M": lambda: call(A_tall, out=C_tall),
        "K": lambda: call(A_deep, B_deep),
        "out not given": lambda: call(out=None),
        "an edited source": lambda: call(source=edited),
        "another GPU": other_gpu,
    }
    for what, variant in variants.items():
        before = gpu.prepared
        variant()
        variant()
        assert gpu.prepared == before + 1, what
    before = gpu.prepared
    call(stages=3, BN=128)  # the same setting as BN=128, stages=3
    call()  # the first GPU's preparation is still there
    assert gpu.prepared == before


def test_the_level_and_the_backend_are_part_of_the_key(gpu: StandIn) -> None:
    A, B = operands(64, 64, 64)
    launch.gemm(A, B, "05_register_blocking")
    launch.gemm(A, B, "07_vectorized")
    launch.gemm(A, B, "05_register_blocking")
    assert gpu.prepared == 2
    a, b = np.asarray(A).copy(), np.asarray(B).copy()  # plain NumPy arrays: the CPU backend
    C = launch.gemm(a, b, "05_register_blocking", backend="cpu")
    C2 = launch.gemm(a, b, "05_register_blocking", backend="cpu")
    assert gpu.prepared == 3, "the CPU backend prepares once too"
    np.testing.assert_allclose(C, a @ b, rtol=1e-5)
    np.testing.assert_allclose(C2, a @ b, rtol=1e-5)


def test_an_offset_pointer_changes_the_vector_kernel_and_a_bias_the_epilogue(gpu: StandIn) -> None:
    lv = get_level("07_vectorized")
    A, B = operands(64, 64, 65)
    A2 = A.reshape(-1)[:64 * 64].reshape(64, 64)
    shifted = np.asarray(B).reshape(-1)[1:1 + 64 * 64].reshape(64, 64).view(GpuArray)  # 4 bytes off
    launch.gemm(A2, B[:64].copy().view(GpuArray), lv)
    launch.gemm(A2, shifted, lv)
    kernels = [g["kernel"] for g in gpu.launches]
    assert kernels[0].startswith("gemm_vectorized") and kernels[1].startswith("gemm_register_blocked"), kernels
    assert gpu.prepared == 2
    ep = get_level("06_fused_epilogue")
    A, B = operands(128, 128, 128)
    bias = np.ones(128, np.float32).view(GpuArray)
    launch.gemm(A, B, ep, bias=bias)
    launch.gemm(A, B, ep, bias=False)
    launch.gemm(A, B, ep, bias=bias, alpha=2.0)  # alpha and beta travel with each call: the same preparation
    assert gpu.prepared == 4
    assert gpu.launches[-1]["args"][-2] == np.float32(2.0) and gpu.launches[-1]["args"][-3] is bias


def test_new_pointers_get_their_own_tensor_maps(gpu: StandIn) -> None:
    lv = get_level("11_hopper_wgmma")
    for step in (2, 6):
        launch.clear_prepared()
        gpu.prepared, gpu.maps = 0, []
        shapes = []
        for _ in range(3):
            A, B = operands(256, 256, 256, "bfloat16")
            C = _output(lv, "bfloat16", (256, 256), step=step)
            launch.gemm(A, B, lv, out=C, step=step)
            shapes.append((A.data.ptr, B.data.ptr, C.data.ptr))
            maps = gpu.launches[-1]["args"][: 3 if step == 6 else 2]
            assert [m[1] for m in maps] == [A.data.ptr, B.data.ptr, C.data.ptr][: len(maps)]
        assert gpu.prepared == 1
        assert {m[0] for m in gpu.maps} >= {p for ptrs in shapes for p in ptrs[:2]}


BAD_CALLS = [
    ("wrong K", lambda A, B, C: (A, B[:128].copy().view(GpuArray), C, {})),
    ("wrong dtype", lambda A, B, C: (A.astype(np.float32).view(GpuArray), B.astype(np.float32).view(GpuArray), C, {})),
    ("non-contiguous A", lambda A, B, C: (A[:, ::2], B[:128].copy().view(GpuArray), C, {})),
    ("too small out", lambda A, B, C: (A, B, C[:128], {})),
    ("out of another dtype", lambda A, B, C: (A, B, C.astype(np.float16).view(GpuArray), {})),
    ("an offset view", lambda A, B, C: (A.reshape(-1)[4:4 + 256 * 248].reshape(256, 248).view(GpuArray),
                                        B[:248].copy().view(GpuArray), C, {})),
    ("a NumPy array", lambda A, B, C: (np.asarray(A), B, C, {})),
    ("a list", lambda A, B, C: (A.tolist(), B, C, {})),
    ("a value not among the choices", lambda A, B, C: (A, B, C, {"stages": 5})),
    ("a float for an integer", lambda A, B, C: (A, B, C, {"stages": 3.0})),
    ("an unknown parameter", lambda A, B, C: (A, B, C, {"stage": 3})),
    ("an unhashable value", lambda A, B, C: (A, B, C, {"stages": [3]})),
]


@pytest.mark.parametrize("what,bad", BAD_CALLS, ids=[w for w, _ in BAD_CALLS])
def test_a_repeated_call_with_bad_inputs_gets_the_same_one_line_error(gpu: StandIn, what: str, bad: Any) -> None:
    lv = get_level("10_mma_pipeline")
    A, B = operands(256, 256, 256, "float16")
    C = _output(lv, "float16", (256, 256))
    args = bad(A, B, C)

    def error() -> str:
        with pytest.raises((ValueError, TypeError)) as err:
            launch.gemm(args[0], args[1], lv, out=args[2], **args[3])
        assert "\n" not in str(err.value)
        return str(err.value)

    fresh = error()  # what a first call says
    launch.gemm(A, B, lv, out=C)
    launch.gemm(A, B, lv, out=C)
    assert error() == fresh  # the same after good calls with the same level and shapes
    assert error() == fresh


def test_the_cache_is_bounded(gpu: StandIn) -> None:
    for M in range(1, launch.PREPARED_CACHE_SIZE + 20):
        A, B = operands(M, 32, 32)
        launch.gemm(A, B, "05_register_blocking")
    assert len(launch._PREPARED) == launch.PREPARED_CACHE_SIZE
    A, B = operands(1, 32, 32)
    before = gpu.prepared
    launch.gemm(A, B, "05_register_blocking")  # the oldest was dropped: prepared again
    assert gpu.prepared == before + 1


def test_prepare_returns_a_launch_that_only_launches(gpu: StandIn) -> None:
    A, B = operands(256, 256, 256, "bfloat16")
    start, C = launch.prepare(A, B, "11_hopper_wgmma", step=6)
    n = len(gpu.launches)
    start()
    start()
    assert len(gpu.launches) == n + 2 and gpu.prepared == 1 and C.shape == (256, 256)
    launch.gemm(A, B, "11_hopper_wgmma", step=6)  # gemm() finds prepare()'s preparation (out not given both times)
    assert gpu.prepared == 1


def _host_us(fn: Any, reps: int) -> float:
    """The least of reps timings: on a shared, busy CPU the other processes only ever add time."""
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return min(samples) * 1e6


@pytest.mark.parametrize("level,setting,dtype", [("08_warp_tiling", {}, "float32"),
                                                 ("10_mma_pipeline", {"stages": 4, "BN": 256, "copy": "tma"}, "bfloat16"),
                                                 ("11_hopper_wgmma", {"step": 6}, "bfloat16")])
def test_a_repeated_call_costs_the_host_far_less_than_the_first(gpu: StandIn, level: str, setting: dict,
                                                                dtype: str, capsys: Any) -> None:
    """The host work before the kernel, kernel launch stubbed: a first call (checks, geometry, kernel lookup)
    against a repeated one. A shared CPU: only the ratio is asserted, never microseconds."""
    lv = get_level(level)
    A, B = operands(512, 512, 512, dtype)
    C = _output(lv, dtype, (512, 512), **setting)

    def first() -> None:
        launch.clear_prepared()
        launch.gemm(A, B, lv, out=C, **setting)

    first_us = _host_us(first, 30)
    launch.gemm(A, B, lv, out=C, **setting)
    again_us = _host_us(lambda: launch.gemm(A, B, lv, out=C, **setting), 300)
    with capsys.disabled():
        print(f"\n{level} {setting}: first call {first_us:.0f} µs, repeated {again_us:.1f} µs (host, launch stubbed)")
    assert again_us * 2.5 < first_us, (first_us, again_us)


def _fp8(M: int, N: int, K: int, scaling: str) -> tuple:
    a_bits, a_s, b_bits, b_s = fp8_gemm.random_fp8_operands(M, N, K, scaling)
    return a_bits.view(GpuArray), a_s, b_bits.view(GpuArray), b_s


@pytest.mark.parametrize("scaling", fp8_gemm.SCALINGS)
def test_level_13_repeats_a_call_without_planning_it_again(gpu: StandIn, scaling: str) -> None:
    ops = _fp8(256, 256, 512, scaling)
    C = np.empty((256, 256), np.uint16).view(GpuArray)
    for _ in range(3):
        assert fp8_gemm.fp8_gemm(*ops, scaling=scaling, out=C) is C
    assert gpu.prepared == 1 and len(gpu.compiled) == 1
    first, *again = gpu.launches
    assert all((g["grid"], g["shared"]) == (first["grid"], first["shared"]) for g in again)
    fp8_gemm.fp8_gemm(*ops, scaling=scaling, out=C, stages=2)  # another setting
    fp8_gemm.fp8_gemm(*ops, scaling=scaling)                  # out not given
    other = _fp8(256, 256, 512, scaling)                       # new pointers: their own tensor maps
    fp8_gemm.fp8_gemm(*other, scaling=scaling, out=C)
    assert gpu.prepared == 3
    assert gpu.launches[-1]["args"][0][1] == other[0].data.ptr and gpu.launches[-1]["args"][1][1] == other[2].data.ptr


FP8_BAD = [
    ("B with another K", lambda a, sa, b, sb, C: ((a, sa, b[:, :256].copy().view(GpuArray), sb[:, :2] if sb.ndim == 2 else sb,
                                                  C), {})),
    ("A of another dtype", lambda a, sa, b, sb, C: ((a.astype(np.int8).view(GpuArray), sa, b, sb, C), {})),
    ("an offset view of A", lambda a, sa, b, sb, C: ((a.reshape(-1)[8:8 + 256 * 496].reshape(256, 496).view(GpuArray),
                                                      sa, b[:, :496].copy().view(GpuArray), sb, C), {})),
    ("too small out", lambda a, sa, b, sb, C: ((a, sa, b, sb, C[:128]), {})),
    ("overlap=1", lambda a, sa, b, sb, C: ((a, sa, b, sb, C), {"overlap": 1})),
    ("a NumPy A", lambda a, sa, b, sb, C: ((np.asarray(a), sa, b, sb, C), {})),
]


@pytest.mark.parametrize("what,bad", FP8_BAD, ids=[w for w, _ in FP8_BAD])
def test_level_13_still_refuses_bad_inputs_after_good_calls(gpu: StandIn, what: str, bad: Any) -> None:
    ops = _fp8(256, 256, 512, "blockwise")
    C = np.empty((256, 256), np.uint16).view(GpuArray)
    args, options = bad(*ops, C)

    def error() -> str:
        with pytest.raises((ValueError, TypeError)) as err:
            fp8_gemm.fp8_gemm(*args[:4], out=args[4], **options)
        assert "\n" not in str(err.value)
        return str(err.value)

    fresh = error()
    fp8_gemm.fp8_gemm(*ops, out=C)
    fp8_gemm.fp8_gemm(*ops, out=C)
    assert error() == fresh


def test_level_13_repeated_call_costs_the_host_far_less_than_the_first(gpu: StandIn, capsys: Any) -> None:
    ops = _fp8(512, 512, 512, "blockwise")
    ops = (ops[0], np.asarray(ops[1], np.float32).view(GpuArray), ops[2], np.asarray(ops[3], np.float32).view(GpuArray))
    C = np.empty((512, 512), np.uint16).view(GpuArray)

    def first() -> None:
        fp8_gemm.clear_prepared()
        fp8_gemm.fp8_gemm(*ops, out=C)

    first_us = _host_us(first, 30)
    fp8_gemm.fp8_gemm(*ops, out=C)
    again_us = _host_us(lambda: fp8_gemm.fp8_gemm(*ops, out=C), 300)
    with capsys.disabled():
        print(f"\n13_fp8_blockscaled: first call {first_us:.0f} µs, repeated {again_us:.1f} µs (host, launch stubbed)")
    assert again_us * 2.5 < first_us, (first_us, again_us)


# --- on a GPU: the reused preparations give the right products ------------------------------------------

ON_GPU = device.gpu_available()
HOPPER = ON_GPU and device.compute_capability() == 90
on_gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
on_hopper = pytest.mark.skipif(not HOPPER, reason="needs an sm_90 (Hopper) GPU")
# The settings `hostcost` times (each level's fastest recorded one, from Level 5 on), so that one GPU run
# compiles each kernel once for both; plus Level 11's step 4 with a bf16 C.
REUSED = [x for x in importlib.import_module("gemm_course.measure.host_cost").host_cost_plan(
    [lv.id for lv in levels() if lv.number >= 5])] + [("11_hopper_wgmma", {"step": 4, "c_type": "input"}, "bfloat16")]


@on_gpu
@pytest.mark.parametrize("level,setting,dtype", REUSED, ids=[f"{lv}-{i}" for i, (lv, _, _) in enumerate(REUSED)])
def test_on_the_gpu_calls_that_reuse_a_preparation_on_new_operands_are_right(level: str, setting: dict,
                                                                            dtype: str) -> None:
    """check() makes new random A, B and a NaN-poisoned C for every call: the second and third calls of a
    shape reuse the first one's preparation, with their own pointers (and tensor maps)."""
    from gemm_course.run.check import check

    lv = get_level(level)
    if not lv.setting_runs_on(device.compute_capability(), lv.resolve(**setting)):
        pytest.skip(f"{level} {setting} needs a newer GPU")
    launch.clear_prepared()
    shapes = [s for s in ((257, 520, 1000), (4097, 264, 64)) if not lv.shape_rules(*s, lv.resolve(**setting))]
    for shape in shapes:
        results = [check(lv, *shape, dtype=dtype, **setting) for _ in range(3)]
        assert all(r.passed for r in results), [str(r) for r in results]
    assert len(launch._PREPARED) == len(shapes)  # one preparation per shape, reused twice each


@on_gpu
def test_on_the_gpu_prepare_and_a_repeated_gemm_write_the_same_bits() -> None:
    import cupy

    import gemm_course as gc

    level, dtype = ("11_hopper_wgmma", "bfloat16") if HOPPER else ("08_warp_tiling", "float32")
    A, B = gc.random_operands(1000, 1032, 520, dtype)
    start, C = launch.prepare(A, B, level)
    start()
    again = [gc.gemm(A, B, level) for _ in range(2)]
    cupy.cuda.get_current_stream().synchronize()
    assert all(bool((C == x).all()) for x in again)


@on_hopper
def test_on_the_gpu_level_13_repeated_calls_on_new_operands_are_right() -> None:
    import cupy

    from gemm_course.run.dtypes import to_float64
    from gemm_course.fp8.formats import reference_gemm_fp8

    M, N, K = 257, 2112, 1024
    fp8_gemm.clear_prepared()
    for scaling, options in (("blockwise", {"splits": 4}), ("per_tensor", {})):
        for seed in range(3):  # new operands, the same shapes: the first call's plan, new tensor maps
            ops = fp8_gemm.random_fp8_operands(M, N, K, scaling, seed=seed, xp=cupy)
            C = to_float64(cupy.asnumpy(fp8_gemm.fp8_gemm(*ops, scaling=scaling, **options)))
            a, sa, b, sb = (cupy.asnumpy(x) for x in ops)
            if scaling == "per_tensor":  # the reference takes the blockwise layout
                sa, sb = fp8_gemm.full_scales(sa, sb, M, N, K)
            ref = reference_gemm_fp8(a, sa, b, sb)
            bound = fp8_gemm.allowed_error(ref, fp8_gemm.magnitude_gemm(a, sa, b, sb), K, scaling)
            assert float((np.abs(C - ref) / bound).max()) <= 1, (scaling, seed)
    assert len(fp8_gemm._PLANS) == 2


@on_gpu
@pytest.mark.parametrize("level,setting,dtype", REUSED, ids=[f"{lv}-{i}" for i, (lv, _, _) in enumerate(REUSED)])
def test_on_the_gpu_a_call_repeated_on_its_own_arrays_reads_their_new_values(level: str, setting: dict,
                                                                            dtype: str) -> None:
    """The packed launch of a repeated call (the same A, B, out and bias) starts the kernel on whatever those
    arrays hold now: new values written in place, C poisoned again; then another out gets its own launch."""
    import cupy

    from gemm_course.run.check import epilogue_inputs, random_operands, relative_error, tolerance
    from gemm_course.run.dtypes import fill_nan, nan_filled, to_float64

    lv = get_level(level)
    resolved = lv.resolve(**setting)
    if not lv.setting_runs_on(device.compute_capability(), resolved):
        pytest.skip(f"{level} {setting} needs a newer GPU")
    M, N, K = next(s for s in ((257, 520, 1000), (4097, 264, 64), (512, 512, 512)) if not lv.shape_rules(*s, resolved))
    c_type = lv.c_type(resolved, dtype)
    launch.clear_prepared()
    A, B = random_operands(M, N, K, dtype, seed=1, xp=cupy)
    outs = [nan_filled((M, N), c_type, cupy) for _ in range(2)]
    bias = None
    for call, (seed, C) in enumerate(((1, outs[0]), (2, outs[0]), (3, outs[0]), (4, outs[1]))):
        new_A, new_B = random_operands(M, N, K, dtype, seed=seed, xp=cupy)
        A[...], B[...] = new_A, new_B  # in place: the same addresses
        reference = to_float64(A) @ to_float64(B)
        run = dict(resolved)
        if lv.epilogue:
            extra, _, reference = epilogue_inputs(resolved, reference, dtype, cupy, seed)
            if extra["bias"] is not False:
                bias = extra["bias"] if bias is None else bias
                bias[...] = extra["bias"]
                extra["bias"] = bias
            run.update(extra)
        fill_nan(C, c_type)
        assert launch.gemm(A, B, lv, out=C, **run) is C
        cupy.cuda.get_current_stream().synchronize()
        error = relative_error(C, reference)
        assert error <= tolerance(dtype, K, c_type) and not bool(cupy.isnan(to_float64(C)).any()), (call, error)
    assert len(launch._REPEATS) == 2  # one packed launch per out array, the first reused twice


@on_hopper
def test_on_the_gpu_level_13_repeated_on_its_own_arrays_reads_their_new_values() -> None:
    import cupy

    from gemm_course.run.dtypes import to_float64
    from gemm_course.fp8.formats import reference_gemm_fp8

    M, N, K = 257, 2112, 1024
    fp8_gemm.clear_prepared()
    for scaling, options in (("blockwise", {"splits": 4}), ("blockwise", {}), ("per_tensor", {})):
        ops = [cupy.asarray(x, dtype=cupy.float32) if i % 2 else x
               for i, x in enumerate(fp8_gemm.random_fp8_operands(M, N, K, scaling, seed=0, xp=cupy))]
        C = cupy.empty((M, N), dtype=cupy.uint16)
        for seed in range(1, 4):  # new values in the same arrays: the packed launch of the first call
            for x, new in zip(ops, fp8_gemm.random_fp8_operands(M, N, K, scaling, seed=seed, xp=cupy)):
                x[...] = new
            C.fill(0x7FC0)  # bf16 NaN
            assert fp8_gemm.fp8_gemm(*ops, scaling=scaling, out=C, **options) is C
            a, sa, b, sb = (cupy.asnumpy(x) for x in ops)
            if scaling == "per_tensor":
                sa, sb = fp8_gemm.full_scales(sa, sb, M, N, K)
            ref = reference_gemm_fp8(a, sa, b, sb)
            bound = fp8_gemm.allowed_error(ref, fp8_gemm.magnitude_gemm(a, sa, b, sb), K, scaling)
            assert float((np.abs(to_float64(cupy.asnumpy(C)) - ref) / bound).max()) <= 1, (scaling, options, seed)
    assert len(fp8_gemm._REPEATS) == 3


def test_a_call_repeated_on_its_own_arrays_starts_its_packed_launch_and_holds_none_of_them(gpu: StandIn) -> None:
    lv = get_level("11_hopper_wgmma")
    A, B = operands(256, 256, 256, "bfloat16")
    C = _output(lv, "bfloat16", (256, 256), step=6)
    for _ in range(3):
        launch.gemm(A, B, lv, out=C, step=6)
    assert gpu.prepared == 1 and len(gpu.launches) == 3
    ((level, packed),) = launch._REPEATS.values()
    assert level is lv and isinstance(packed, PackedStandIn)
    # It keeps its own tensor maps alive, never the caller's arrays (a cache must not hold their memory).
    assert all(x is not A and x is not B and x is not C for x in packed.keep_alive)
    maps = [x for x in packed.args if isinstance(x, GpuArray) and x.shape == (16,)]
    assert len(maps) == 3 and len(packed.keep_alive) == 3 and all(any(m is x for x in packed.keep_alive) for m in maps)
    # Another out array, or new values of a keyword, is a call of its own: checked, then packed for itself.
    launch.gemm(A, B, lv, out=_output(lv, "bfloat16", (256, 256), step=6), step=6)
    assert len(launch._REPEATS) == 2 and gpu.prepared == 1  # the same preparation, another packed launch


def test_an_epilogue_call_repeats_only_with_the_same_bias_alpha_and_beta(gpu: StandIn) -> None:
    lv = get_level("06_fused_epilogue")
    A, B = operands(256, 256, 256)
    C = _output(lv, "float32", (256, 256))
    bias = np.ones(256, np.float32).view(GpuArray)
    for alpha in (1.0, 1.0, 0.5):
        launch.gemm(A, B, lv, out=C, bias=bias, alpha=alpha)
    launch.gemm(A, B, lv, out=C, bias=np.ones(256, np.float32).view(GpuArray), alpha=0.5)
    assert len(launch._REPEATS) == 3  # alpha 1, alpha 0.5, another bias vector
    assert [g["args"][-2] for g in gpu.launches] == [np.float32(1.0)] * 2 + [np.float32(0.5)] * 2


def test_a_packed_launch_takes_arrays_and_numpy_scalars_only() -> None:
    import ctypes

    assert driver._packed(np.int32(7)).value == 7 and isinstance(driver._packed(np.float32(0.5)), ctypes.c_float)
    on_gpu = np.ones(4, np.float32).view(GpuArray)
    assert driver._packed(on_gpu).value == on_gpu.ctypes.data  # an array: its address
    with pytest.raises(TypeError, match="CuPy arrays and NumPy scalars"):
        driver._packed(3)  # a Python int: its C width would be a guess
    with pytest.raises(TypeError, match="CuPy arrays and NumPy scalars"):
        driver._packed(np.ones(3))  # a NumPy array lives on the host
