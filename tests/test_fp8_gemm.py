"""The FP8 (e4m3) GEMM kernels of gemm_course/kernels/13_fp8_blockscaled.cu and their host side.

Without a GPU: both kernels compile for sm_90a through NVRTC with no spills and fit in shared memory
at every ring depth; every precondition fails with a one-line bilingual message; and the accuracy
check itself is checked, on a CPU emulation of the kernel: exact fp32 promotion passes it, and the
bugs a kernel is likely to have (a dropped k-step, scales of the wrong row or k-block) fail it.

On an H100/H200 (skipped elsewhere): both kernels against fp8.reference_gemm_fp8 on odd shapes, every
ring depth, more tiles than SMs, output poisoned with NaN and guarded on both sides.

    python -m pytest -q tests/test_fp8_gemm.py -p no:cacheprovider          # add -s for the error table
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import gemm_course as gc
from gemm_course.fp8 import formats as fp8
from gemm_course.fp8 import gemm as fg
from gemm_course.run.dtypes import to_bfloat16, to_float64

HOPPER = gc.gpu_available() and gc.device.compute_capability() == 90
needs_hopper = pytest.mark.skipif(not HOPPER, reason="needs an sm_90 (Hopper) GPU")


def _nvrtc_available() -> bool:
    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
        return True
    except Exception:
        return False


def _bilingual_one_line(message: str) -> bool:
    return "\n" not in message and " / " in message and any("\u4e00" <= ch <= "\u9fff" for ch in message)


def _operands(M: int, N: int, K: int, scaling: str, seed: int = 0):
    """Quantised random operands, and the scales spread out as fp8.reference_gemm_fp8 takes them."""
    a_bits, a_s, b_bits, b_s = fg.random_fp8_operands(M, N, K, scaling, seed=seed)
    ref_sa, ref_sb = (a_s, b_s) if scaling == "blockwise" else fg.full_scales(a_s, b_s, M, N, K)
    return a_bits, a_s, b_bits, b_s, ref_sa, ref_sb


# --- compile reports (no GPU) ---------------------------------------------------------------------

# Every kernel the file defines: (scaling, options of fp8_compile_report).
KERNELS = [("per_tensor", {"block_n": 256}), ("per_tensor", {"block_n": 128}),
           ("blockwise", {"overlap": False}), ("blockwise", {"overlap": True}), ("blockwise", {"block_m": 64}),
           ("blockwise", {"overlap": False, "staged_scales": True}), ("blockwise", {"overlap": True, "staged_scales": True}),
           ("blockwise", {"block_m": 64, "staged_scales": True}),
           # A's scales by one TMA box per stage, from an M-major copy
           ("blockwise", {"overlap": False, "staged_scales": "tma"}), ("blockwise", {"overlap": True, "staged_scales": "tma"}),
           ("blockwise", {"block_m": 64, "staged_scales": "tma"})]
# The 64-row kernel's narrow tiles (block_n 64, 32, 16), one way to the scales each, at the deepest ring
NARROW_KERNELS = [({"block_n": 64}, False), ({"block_n": 32}, True), ({"block_n": 16}, "tma"), ({"block_n": 16}, True)]


@pytest.mark.skipif(not _nvrtc_available(), reason="needs NVRTC (cupy and the nvrtc wheel)")
@pytest.mark.parametrize("scaling, options", KERNELS)
def test_kernels_compile_for_sm90a_without_spills(scaling, options):
    """Each kernel at its shallowest and deepest ring (the depth changes the ring's offsets, not the registers a
    thread holds; the tuner's own compile reports cover the depths between)."""
    depths = fg.stage_choices(scaling, options.get("block_n"), options.get("block_m"),
                              staged_scales=options.get("staged_scales", False))
    for stages in dict.fromkeys((depths[0], depths[-1])):
        report = fg.fp8_compile_report(scaling, stages, **options)
        assert report.kernel == fg.kernel_name(scaling, stages, **options)
        assert not report.spills, str(report)
        assert report.problems() == [], str(report)
        assert report.occupancy.blocks_per_sm == 1, str(report)  # one persistent block per SM
        assert "serialized" not in report.log, report.log  # ptxas would say if it had to serialise wgmma


@pytest.mark.skipif(not _nvrtc_available(), reason="needs NVRTC (cupy and the nvrtc wheel)")
@pytest.mark.parametrize("options, way", NARROW_KERNELS)
def test_narrow_tiles_compile_for_sm90a_without_spills(options, way):
    report = fg.fp8_compile_report("blockwise", None, block_m=64, staged_scales=way, **options)
    deepest = fg.stage_choices("blockwise", options["block_n"], 64, staged_scales=way)[-1]
    assert deepest > 12 and report.kernel == f"fp8_gemm_blockwise_m64<{deepest}, {fg.scales_code(way)}, {options['block_n']}>"
    assert not report.spills and report.problems() == [] and report.occupancy.blocks_per_sm == 1, str(report)
    assert report.params["block_n"] == options["block_n"] and "serialized" not in report.log


def test_compile_report_refuses_other_architectures():
    with pytest.raises(ValueError, match="sm_90a") as err:
        fg.fp8_compile_report("blockwise", arch="sm_90")
    assert _bilingual_one_line(str(err.value))


# --- preconditions (no GPU: the checks run before anything touches one) -----------------------------

def _valid(M=7, N=136, K=256, scaling="blockwise"):
    a_bits, a_s, b_bits, b_s, _, _ = _operands(M, N, K, scaling)
    return a_bits, a_s, b_bits, b_s


def _misaligned(x: np.ndarray) -> np.ndarray:
    """A copy of x that starts 1 or 2 bytes past a 16-byte boundary."""
    buffer = np.zeros(x.nbytes + 32, dtype=np.uint8)
    offset = next(o for o in range(1, 16) if (buffer.ctypes.data + o) % 16)
    view = buffer[offset:offset + x.nbytes].view(x.dtype).reshape(x.shape)
    view[...] = x
    return view


@pytest.mark.parametrize("change, kwargs, match", [
    ("A float32", {}, "uint8"),
    ("A 1-D", {}, "2-D"),
    ("A not contiguous", {}, "contiguous"),
    ("K differs", {}, "same K"),
    ("K not a multiple of 16", {}, "multiple of 16"),
    ("A scales wrong shape", {}, "needs"),
    ("B scales wrong shape", {}, "needs"),
    ("scales not float", {}, "floating-point"),
    ("per-tensor given block scales", {"scaling": "per_tensor"}, "one A scale"),
    ("bad scaling", {"scaling": "rowwise"}, "scaling must be"),
    ("bad stages", {"stages": 8}, "stages=8"),
    ("bad block_n", {"block_n": 256}, "block_n=256"),
    ("narrow tiles without block_m=64", {"block_n": 32}, "block_n=32.*block_m=64"),
    ("splits zero", {"splits": 0}, "splits=0"),
    ("splits above the k-blocks", {"splits": 3}, "splits=3"),
    ("splits not a number", {"splits": "many"}, "splits='many'"),
    ("overlap not a bool", {"overlap": 1}, "overlap must be"),
    ("staged_scales not a bool", {"staged_scales": 1}, "staged_scales must be"),
    ("staged_scales an unknown way", {"staged_scales": "TMA"}, "staged_scales must be.*'tma'"),
    ("staged_scales for per_tensor", {"scaling": "per_tensor", "staged_scales": True}, "staged_scales belongs"),
    ("scales by TMA for per_tensor", {"scaling": "per_tensor", "staged_scales": "tma"}, "staged_scales belongs"),
    ("a ring too deep for staged scales", {"stages": 7, "staged_scales": True}, "stages=7.*staged scales"),
    ("a ring too deep for scales by TMA", {"stages": 7, "staged_scales": "tma"}, "stages=7.*scales by TMA"),
    ("splits given to per_tensor", {"scaling": "per_tensor", "splits": 2}, "blockwise kernel"),
    ("block_m for per_tensor", {"scaling": "per_tensor", "block_m": 64}, "block_m=64"),
    ("block_m 64 without overlap", {"block_m": 64, "overlap": False}, "overlap"),
    ("bad block_m", {"block_m": 32}, "block_m=32"),
    ("A misaligned", {}, "16-byte boundary"),
    ("out wrong shape", {}, "out must be"),
])
def test_preconditions_fail_with_one_bilingual_line(change, kwargs, match):
    a_bits, a_s, b_bits, b_s = _valid()
    out = None
    if change == "A float32":
        a_bits = a_bits.astype(np.float32)
    elif change == "A 1-D":
        a_bits = a_bits.reshape(-1)
    elif change == "A not contiguous":
        a_bits = np.asfortranarray(a_bits)
    elif change == "K differs":
        b_bits = np.ascontiguousarray(b_bits[:, :128])
    elif change == "K not a multiple of 16":
        a_bits, a_s, b_bits, b_s = _valid(K=200)
    elif change == "A scales wrong shape":
        a_s = a_s[:, :1].copy()
    elif change == "B scales wrong shape":
        b_s = b_s[:1].copy()
    elif change == "scales not float":
        a_s = a_s.astype(np.int32)
    elif change == "A misaligned":
        a_bits = _misaligned(a_bits)
    elif change == "out wrong shape":
        out = np.zeros((7, 135), dtype=np.uint16)
    if kwargs.get("scaling") == "per_tensor" and ({"splits", "block_m", "staged_scales"} & set(kwargs)):
        a_bits, a_s, b_bits, b_s = _valid(scaling="per_tensor")
    with pytest.raises((ValueError, TypeError), match=match) as err:
        fg.fp8_gemm(a_bits, a_s, b_bits, b_s, out=out, **{"scaling": "blockwise", **kwargs})
    assert _bilingual_one_line(str(err.value)), str(err.value)


@pytest.mark.parametrize("M, strips", [(1, 1), (7, 2), (128, 3), (129, 9), (300, 1)])
def test_a_scales_m_major_is_the_transpose_with_rows_padded_to_16_bytes(M, strips):
    """The layout the kernel with staged_scales="tma" reads: row kb = the M row scales of k-block kb, side by
    side, each row a whole number of 16-byte chunks (TMA's stride rule), the padding zero."""
    rng = np.random.default_rng(M)
    a_s = rng.uniform(0.5, 2, (M, strips)).astype(np.float32)
    t = fg.a_scales_m_major(a_s)
    assert t.dtype == np.float32 and t.flags.c_contiguous
    assert t.shape == (strips, fg.m_major_rows(M)) and t.shape[1] % 4 == 0 and M <= t.shape[1] < M + 4
    assert (t.shape[1] * 4) % 16 == 0
    assert np.array_equal(t[:, :M], a_s.T) and not t[:, M:].any()
    for m, kb in ((0, 0), (M - 1, strips - 1), (M // 2, strips // 2)):
        assert t[kb, m] == a_s[m, kb]
    # a tile's scales of one k-block are block_m consecutive floats: one TMA box (1 × block_m)
    m0, kb = (M // 128) * 128, strips - 1
    assert np.array_equal(t[kb, m0:m0 + 128][:M - m0], a_s[m0:m0 + 128, kb])
    with pytest.raises(ValueError, match="2-D") as err:
        fg.a_scales_m_major(a_s.reshape(-1))
    assert _bilingual_one_line(str(err.value))


def test_scales_by_tma_add_one_box_of_a_scales_to_each_stage():
    """A stage with staged_scales="tma" holds block_m floats of A (one TMA box) and B's one, padded so that every
    stage's box lands on 128 bytes (the ring starts on 1024); the kernel's template argument SCALES is 2 (0:
    global, 1: cp.async)."""
    for bm in (128, 64):
        plain = fg.stage_bytes("blockwise", block_m=bm)
        extra = fg.stage_bytes("blockwise", block_m=bm, staged_scales="tma") - plain
        assert extra >= 4 * bm + 4 and extra % 128 == 0 and extra == 4 * bm + 128
        assert fg.kernel_name("blockwise", 4, block_m=bm, staged_scales="tma").endswith(", 2>")
        assert fg.kernel_name("blockwise", 4, block_m=bm, staged_scales=True).endswith(", 1>")
    assert fg.setting_params("blockwise", staged_scales="tma")["staged_scales"] == "tma"
    assert fg.setting_params("blockwise", staged_scales=True)["staged_scales"] is True
    assert "staged_scales" not in fg.setting_params("blockwise")


def test_valid_operands_pass_the_checks_and_any_m_n_is_allowed():
    for M, N, K in ((1, 1, 16), (7, 13, 48), (300, 257, 1040)):
        for scaling in fg.SCALINGS:
            a_bits, a_s, b_bits, b_s = _valid(M, N, K, scaling)
            assert fg.check_operands(a_bits, a_s, b_bits, b_s, scaling) == (M, N, K)


@pytest.mark.skipif(gc.gpu_available(), reason="checks the message shown where there is no GPU")
def test_without_a_gpu_valid_operands_say_a_gpu_is_needed():
    a_bits, a_s, b_bits, b_s = _valid()
    with pytest.raises(RuntimeError, match="GPU"):
        fg.fp8_gemm(a_bits, a_s, b_bits, b_s)


# --- the accuracy check, checked on a CPU emulation of the kernels -----------------------------------

def _emulate(a_bits, sa, b_bits, sb, K, bug=None):
    """The blockwise kernel's arithmetic in NumPy: fp32 k-block sums, promoted with fp32 scales, bf16 C.
    (With the per-tensor scales spread out it is also the per-tensor kernel, with exact accumulation.)"""
    A = fp8.decode_e4m3(a_bits).astype(np.float32)
    B = fp8.decode_e4m3(b_bits).astype(np.float32)
    if bug == "dropped k-step":  # one wgmma of k = 32 missing
        A = A.copy()
        A[:, 32:64] = 0
    M, N = A.shape[0], B.shape[0]
    acc = np.zeros((M, N), np.float32)
    for kb in range(math.ceil(K / 128)):
        cols = slice(kb * 128, min(K, kb * 128 + 128))
        a_scale = np.roll(sa[:, kb], 1) if bug == "A scales of the wrong row" else sa[:, kb]
        b_scale = np.repeat(sb[:, 0 if bug == "B scales of k-block 0" else kb], 128)[:N]
        acc += (A[:, cols] @ B[:, cols].T) * (a_scale[:, None] * b_scale[None, :]).astype(np.float32)
    return to_float64(to_bfloat16(acc))


@pytest.mark.parametrize("shape", [(129, 136, 1152), (300, 264, 256)])
def test_accuracy_check_passes_exact_promotion_and_catches_likely_bugs(shape):
    M, N, K = shape
    for scaling in fg.SCALINGS:
        a_bits, _, b_bits, _, sa, sb = _operands(M, N, K, scaling, seed=3)
        ref = fp8.reference_gemm_fp8(a_bits, sa, b_bits, sb)
        allowed = fg.allowed_error(ref, fg.magnitude_gemm(a_bits, sa, b_bits, sb), K, scaling)
        ratio = lambda C: float(np.max(np.abs(C - ref) / allowed))  # noqa: E731
        assert ratio(_emulate(a_bits, sa, b_bits, sb, K)) < 0.75  # room left for the Tensor Core's truncation
        assert ratio(_emulate(a_bits, sa, b_bits, sb, K, "dropped k-step")) > 10
        if scaling == "blockwise":
            assert ratio(_emulate(a_bits, sa, b_bits, sb, K, "A scales of the wrong row")) > 10
            assert ratio(_emulate(a_bits, sa, b_bits, sb, K, "B scales of k-block 0")) > 10


def test_per_tensor_bound_grows_with_k_and_blockwise_does_not():
    assert fg.accumulation_error_bound(128, "blockwise") == fg.accumulation_error_bound(8192, "blockwise")
    assert fg.accumulation_error_bound(8192, "per_tensor") > fg.accumulation_error_bound(1152, "per_tensor") \
        > fg.accumulation_error_bound(128, "blockwise")


# --- on the GPU ----------------------------------------------------------------------------------

ODD_SHAPES = [(M, N, K) for M in (1, 7, 129, 300) for N in (8, 136, 264) for K in (128, 256, 1152)]
# K below one k-block and not a multiple of 128 (a shorter last scale strip, zero-filled by TMA), odd N
# (single bf16 stores), N below 8.
EDGE_SHAPES = [(1, 1, 16), (7, 13, 48), (129, 257, 1040), (300, 7, 1152), (65, 3, 2064)]
# More tiles than an H200's 132 SMs (per_tensor 16 × 9 = 144 tiles of 128×256, blockwise 16 × 17 = 272 of
# 128×128; 2000 × 1040: 144 blockwise tiles): the persistent loops wrap, the ring wraps many times.
MANY_TILES = [(2000, 1040, 1024), (2000, 2100, 1024)]
ERRORS: dict[tuple, tuple[float, float]] = {}  # (setting, shape) → (max error/allowed, max error/magnitude)

# The settings the chapter measures, and split-K forced where the shape would not choose it. splits=3 is
# cut to the k-blocks K has (K = 128: one k-block, so no split).
SETTINGS = [{"scaling": "per_tensor", "block_n": 256}, {"scaling": "per_tensor", "block_n": 128},
            {"scaling": "blockwise", "overlap": False, "splits": 1}, {"scaling": "blockwise", "overlap": True, "splits": 1},
            {"scaling": "blockwise", "overlap": True, "splits": "auto"}, {"scaling": "blockwise", "overlap": True, "splits": 3},
            {"scaling": "blockwise", "overlap": False, "splits": 3},
            {"scaling": "blockwise", "block_m": 64, "splits": 1}, {"scaling": "blockwise", "block_m": 64, "splits": "auto"},
            {"scaling": "blockwise", "block_m": 64, "splits": 3},
            # the scales staged in shared memory by the producer, in each kernel and with split-K
            {"scaling": "blockwise", "overlap": True, "splits": 1, "staged_scales": True},
            {"scaling": "blockwise", "overlap": False, "splits": 3, "staged_scales": True},
            {"scaling": "blockwise", "overlap": True, "splits": "auto", "staged_scales": True},
            {"scaling": "blockwise", "block_m": 64, "splits": 1, "staged_scales": True},
            {"scaling": "blockwise", "block_m": 64, "splits": 3, "staged_scales": True},
            # narrow tiles for decode shapes, without and with split-K
            {"scaling": "blockwise", "block_m": 64, "block_n": 16, "splits": 1},
            {"scaling": "blockwise", "block_m": 64, "block_n": 32, "splits": 3, "staged_scales": "tma"},
            {"scaling": "blockwise", "block_m": 64, "block_n": 64, "splits": "auto", "staged_scales": True},
            # A's scales by TMA from the M-major copy, in each kernel and with split-K
            {"scaling": "blockwise", "overlap": True, "splits": 1, "staged_scales": "tma"},
            {"scaling": "blockwise", "overlap": False, "splits": 3, "staged_scales": "tma"},
            {"scaling": "blockwise", "overlap": True, "splits": "auto", "staged_scales": "tma"},
            {"scaling": "blockwise", "block_m": 64, "splits": 1, "staged_scales": "tma"},
            {"scaling": "blockwise", "block_m": 64, "splits": 3, "staged_scales": "tma"}]


def _options(setting: dict, K: int) -> dict:
    options = {k: v for k, v in setting.items() if k != "scaling"}
    if isinstance(options.get("splits"), int):
        options["splits"] = min(options["splits"], math.ceil(K / 128))
    return options


def _run_and_compare(scaling: str, shape: tuple[int, int, int], stages=None, seed: int = 0, **options) -> None:
    import cupy

    M, N, K = shape
    a_bits, a_s, b_bits, b_s, sa, sb = _operands(M, N, K, scaling, seed=seed)
    ref = fp8.reference_gemm_fp8(a_bits, sa, b_bits, sb)
    mag = fg.magnitude_gemm(a_bits, sa, b_bits, sb)
    allowed = fg.allowed_error(ref, mag, K, scaling)
    guard = 16  # bf16 values on each side of C: 32 bytes, so C still starts on a 16-byte boundary
    buffer = cupy.full(M * N + 2 * guard, fg.BF16_NAN, dtype=cupy.uint16)  # poisoned: NaN everywhere
    out = buffer[guard:guard + M * N].reshape(M, N)
    C = fg.fp8_gemm(cupy.asarray(a_bits), a_s, cupy.asarray(b_bits), b_s, scaling=scaling, out=out, stages=stages,
                    **options)
    cupy.cuda.get_current_stream().synchronize()
    got = to_float64(cupy.asnumpy(C))
    whole = cupy.asnumpy(buffer)
    err = np.abs(got - ref)
    ratio = err / allowed
    depth = fg.resolve_stages(scaling, stages, options.get("block_n"), options.get("block_m"),
                              staged_scales=options.get("staged_scales", False))
    setting = f"{scaling} {options} stages={depth}"
    where = f"{setting} {M}×{N}×{K}"
    outside = int(np.count_nonzero(whole[:guard] != fg.BF16_NAN) + np.count_nonzero(whole[-guard:] != fg.BF16_NAN))
    assert outside == 0, f"{where}: {outside} values written outside C (guards of {guard} on each side)"
    unwritten = int(np.count_nonzero(np.isnan(got)))
    assert unwritten == 0, (f"{where}: {unwritten} of {M * N} elements of C still NaN (never written); first at "
                            f"{tuple(int(v) for v in np.argwhere(np.isnan(got))[0])}")
    ERRORS[(setting, shape)] = (float(ratio.max()), float((err / mag).max()))
    bad = ratio > 1
    if bad.any():
        r, c = (int(v) for v in np.argwhere(bad)[0])
        rows_bad = np.unique(np.argwhere(bad)[:, 0])
        cols_bad = np.unique(np.argwhere(bad)[:, 1])
        raise AssertionError(
            f"{where}: {int(bad.sum())} of {M * N} elements beyond the allowed error (max ratio {ratio.max():.3g}); "
            f"first C[{r}][{c}] = {got[r, c]!r}, reference {ref[r, c]!r}, allowed ±{allowed[r, c]:.3g}; "
            f"bad rows {rows_bad[:8].tolist()}{'…' if len(rows_bad) > 8 else ''} (of {len(rows_bad)}), "
            f"bad columns {cols_bad[:8].tolist()}{'…' if len(cols_bad) > 8 else ''} (of {len(cols_bad)}); "
            f"max |error| / Σ|a·b| = {(err / mag).max():.3g}")


@needs_hopper
@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("shape", ODD_SHAPES + EDGE_SHAPES)
def test_fp8_kernels_on_odd_shapes(setting, shape):
    _run_and_compare(setting["scaling"], shape, seed=hash(shape) % 1000, **_options(setting, shape[2]))


@needs_hopper
@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("shape", MANY_TILES + [(300, 264, 1152)])
def test_fp8_kernels_every_ring_depth_and_more_tiles_than_sms(setting, shape):
    for stages in fg.stage_choices(setting["scaling"], setting.get("block_n"), setting.get("block_m"),
                                   staged_scales=setting.get("staged_scales", False)):
        _run_and_compare(setting["scaling"], shape, stages=stages, seed=stages, **_options(setting, shape[2]))


@needs_hopper
@pytest.mark.parametrize("shape", [(64, 2112, 7168), (128, 7168, 2048), (100, 300, 4096)])
def test_split_k_on_projection_like_shapes(shape):
    """Few tiles, long K: the shapes split-K is for, with every split count up to 16 it accepts."""
    for splits in (2, 5, 16):
        _run_and_compare("blockwise", shape, seed=splits, overlap=True, splits=splits)
        _run_and_compare("blockwise", shape, seed=splits, block_m=64, splits=splits)
        _run_and_compare("blockwise", shape, seed=splits, block_m=64, splits=splits, staged_scales=True)
        _run_and_compare("blockwise", shape, seed=splits, block_m=64, splits=splits, staged_scales="tma")
        _run_and_compare("blockwise", shape, seed=splits, overlap=True, splits=splits, staged_scales="tma")


@needs_hopper
def test_fp8_gemm_refuses_host_arrays_on_a_gpu():
    a_bits, a_s, b_bits, b_s = _valid()
    with pytest.raises(TypeError, match="cupy.asarray"):
        fg.fp8_gemm(a_bits, a_s, b_bits, b_s)


@needs_hopper
@pytest.mark.parametrize("options", [{"splits": 4}, {"block_m": 64, "splits": 3},
                                     {"block_m": 64, "splits": 3, "staged_scales": "tma"}], ids=["m128", "m64", "m64-tma"])
def test_split_k_launched_twice_on_the_same_counters(options):
    """One prepared launch run twice: the second finds the tile counters the first left (tagged with the first
    launch's epoch, which reads as zero to the second), with C poisoned in between: every element written again,
    right, and bit for bit the same."""
    import cupy

    from gemm_course.run.dtypes import to_float64
    from gemm_course.fp8.formats import reference_gemm_fp8

    M, N, K = 64, 2112, 2048
    ops = fg.random_fp8_operands(M, N, K, "blockwise", seed=3, xp=cupy)
    launch, C = fg.prepare(*ops, scaling="blockwise", **options)
    results = []
    for _ in range(2):
        C.fill(fg.BF16_NAN)
        launch()
        cupy.cuda.get_current_stream().synchronize()
        results.append(C.copy())
    first, second = (to_float64(cupy.asnumpy(r)) for r in results)
    assert not np.isnan(second).any(), "the second launch left elements of C unwritten: its counters were not reset"
    assert bool((results[0] == results[1]).all())
    ref = reference_gemm_fp8(*(cupy.asnumpy(x) for x in ops))
    mag = fg.magnitude_gemm(*(cupy.asnumpy(x) for x in ops))
    assert float((np.abs(second - ref) / fg.allowed_error(ref, mag, K, "blockwise")).max()) <= 1


@needs_hopper
def test_fp8_gemm_allocates_c_and_runs_twice_the_same():
    import cupy

    a_bits, a_s, b_bits, b_s = (cupy.asarray(x) for x in _valid(129, 264, 1152))
    for splits in (1, 3):  # split-K adds its slices in a fixed order too
        first = fg.fp8_gemm(a_bits, a_s, b_bits, b_s, splits=splits)
        second = fg.fp8_gemm(a_bits, a_s, b_bits, b_s, splits=splits)
        assert first.dtype == cupy.uint16 and first.shape == (129, 264)
        assert bool((first == second).all())  # no atomics, a fixed order: bit for bit the same


@needs_hopper
def test_zz_print_error_table():
    """Printed with -s: how close each run came to the allowed error (for the chapter's accuracy table)."""
    for (setting, shape), (ratio, relative) in sorted(ERRORS.items()):
        print(f"{setting:<60} {'×'.join(map(str, shape)):>16}  error/allowed {ratio:.3f}  "
              f"max |error| / Σ|a·b| {relative:.2e}")
