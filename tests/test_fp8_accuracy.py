"""Level 13's FP8 accuracy studies on the CPU: the outlier study (quantisation), the model of the
Tensor Core's truncating accumulator, the promotion study without the GPU kernels, the figures and
the messages for bad inputs. NumPy only, no GPU; a few seconds.

    python -m pytest -q tests/test_fp8_accuracy.py -p no:cacheprovider
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from gemm_course import device
from gemm_course.fp8 import formats as fp8
from gemm_course.fp8 import accuracy as acc
from gemm_course.run.dtypes import to_bfloat16


def one_line_bilingual(err: pytest.ExceptionInfo) -> None:
    text = str(err.value)
    assert "\n" not in text and " / " in text, text
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text), text


def by(rows, **keys):
    found = [r for r in rows if all(r[k] == v for k, v in keys.items())]
    assert len(found) == 1, keys
    return found[0]


# --- outlier study ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def outlier_rows():
    return acc.outlier_study(M=128, N=128, K=1024, magnitudes=(1, 100, 10_000, 100_000), seed=0)


def test_outlier_study_shape_and_determinism(outlier_rows):
    assert len(outlier_rows) == 4 * len(acc.OUTLIER_SCALINGS)
    assert acc.outlier_study(M=128, N=128, K=1024, magnitudes=(1, 100, 10_000, 100_000), seed=0) == outlier_rows
    for r in outlier_rows:
        assert set(r) >= {"magnitude", "scaling", "rel_fro", "rest_rel_fro", "median_row_rel",
                          "a_underflow_fraction", "a_subnormal_fraction"}
        # e4m3 keeps 3 mantissa bits: about 2^-4 relative per value, a few % on a product
        assert 0.01 < r["rel_fro"] < 0.1


def test_per_tensor_error_grows_with_the_outlier_fine_grained_stays_flat(outlier_rows):
    def rest(scaling, m):
        return by(outlier_rows, scaling=scaling, magnitude=float(m))["rest_rel_fro"]

    for scaling in acc.OUTLIER_SCALINGS:  # without outliers the three scalings are alike
        assert rest(scaling, 1) == pytest.approx(rest("per_tensor", 1), rel=0.1)
    assert rest("per_tensor", 1e4) > 1.2 * rest("per_tensor", 1)
    assert rest("per_tensor", 1e5) > 5 * rest("per_tensor", 1)
    assert rest("fine_grained", 1e4) == pytest.approx(rest("fine_grained", 1), rel=0.05)
    assert rest("fine_grained", 1e5) < rest("row_wise", 1e5) < rest("per_tensor", 1e5)
    flushed = [by(outlier_rows, scaling="per_tensor", magnitude=float(m))["a_underflow_fraction"]
               for m in (1, 100, 1e4, 1e5)]
    assert flushed == sorted(flushed) and flushed[-1] > 0.3
    for m in (100, 1e4, 1e5):
        fractions = [by(outlier_rows, scaling=s, magnitude=float(m))["a_underflow_fraction"]
                     for s in ("fine_grained", "row_wise", "per_tensor")]
        assert fractions == sorted(fractions)


def test_outlier_study_underflow_matches_an_independent_count():
    rows = acc.outlier_study(M=64, N=32, K=256, magnitudes=(3e4,), outlier_channels=1, seed=3)
    rng = np.random.default_rng(3)
    A = rng.standard_normal((64, 256))
    rng.standard_normal((32, 256))
    channel = rng.choice(256, 1, replace=False)
    A[:, channel] *= 3e4
    scale = float(np.float32(np.abs(A).max() / 448))
    # below half the smallest subnormal (2^-10) a value rounds to 0; exactly on it, to even: 0 too
    expected = np.mean((np.abs(A) / scale <= 2.0 ** -10) & (A != 0))
    assert by(rows, scaling="per_tensor")["a_underflow_fraction"] == pytest.approx(expected, abs=1e-12)
    assert expected > 0.01


def test_constructed_underflow_per_scaling():
    A = np.ones((4, 256))
    A[0, 0] = 2.0 ** 20  # one huge value: 1.0 / (2^20 / 448) = 2^-11.2 < 2^-10 rounds to 0
    flushed = {s: int(np.count_nonzero(acc.quantize_dequantize(A, s, "A")[0] == 0)) for s in acc.OUTLIER_SCALINGS}
    assert flushed == {"per_tensor": 4 * 256 - 1, "row_wise": 256 - 1, "fine_grained": 128 - 1}
    values, bits = acc.quantize_dequantize(A, "fine_grained", "A")
    assert values[0, 0] == pytest.approx(2.0 ** 20, rel=1e-6) and np.allclose(values[1:], 1.0, rtol=1e-6) and bits.dtype == np.uint8


def test_row_wise_quantisation_uses_one_scale_per_row():
    x = np.array([[1.0, -2.0, 4.0], [1000.0, 0.5, 0.25]])
    values, bits = acc.quantize_dequantize(x, "row_wise", "B")
    assert values[0, 2] == pytest.approx(4.0, rel=1e-6) and values[1, 0] == pytest.approx(1000.0, rel=1e-6)
    assert np.max(np.abs(fp8.decode_e4m3(bits)), axis=1).tolist() == [448.0, 448.0]


# --- the truncating accumulator --------------------------------------------------------------------

def e4m3_values(shape, seed, positive=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 16
    if positive:
        x = np.abs(x)
    return fp8.decode_e4m3(fp8.encode_e4m3(x)).astype(np.float64)


def test_truncate_toward_zero():
    x = np.array([1 + 2.0 ** -14, -(1 + 2.0 ** -13 + 2.0 ** -14), 3 * 2.0 ** 40 + 1, 0.0, -0.0])
    out = acc.truncate_toward_zero(x, 13)
    assert out.tolist() == [1.0, -(1 + 2.0 ** -13), 3 * 2.0 ** 40, 0.0, 0.0]
    y = np.random.default_rng(0).standard_normal(1000)
    assert np.array_equal(acc.truncate_toward_zero(y, 52), y)  # keeps every bit of a float64
    assert np.all(np.abs(acc.truncate_toward_zero(y, 10)) <= np.abs(y))


def test_model_with_52_bits_is_exact_summation():
    a, b = e4m3_values((16, 1000), 1), e4m3_values((24, 1000), 2)  # K not a multiple of 32: padded
    exact = a @ b.T
    model = acc.simulate_truncated_accumulation(a, b, 52)
    np.testing.assert_allclose(model, exact, rtol=1e-13, atol=1e-9)
    promoted = acc.simulate_truncated_accumulation(a, b, 52, promote_every=128)  # fp32 promotion
    np.testing.assert_allclose(promoted, exact, rtol=1e-5, atol=1e-2)


def test_truncation_biases_positive_sums_down_and_promotion_helps():
    a, b = e4m3_values((16, 4096), 3, positive=True), e4m3_values((16, 4096), 4, positive=True)
    exact = a @ b.T
    plain = acc.simulate_truncated_accumulation(a, b, 13)
    promoted = acc.simulate_truncated_accumulation(a, b, 13, promote_every=128)
    assert np.all(plain <= exact)               # truncating a positive sum only ever loses
    bias = np.mean((plain - exact) / exact)
    assert bias < 0
    err_plain = np.linalg.norm(plain - exact) / np.linalg.norm(exact)
    err_promoted = np.linalg.norm(promoted - exact) / np.linalg.norm(exact)
    assert err_promoted < err_plain / 4
    # more kept bits, less error
    err_14 = np.linalg.norm(acc.simulate_truncated_accumulation(a, b, 14) - exact) / np.linalg.norm(exact)
    assert err_14 < err_plain


def test_model_rejects_bad_arguments():
    a = np.ones((2, 64))
    for kwargs in ({"fraction_bits": 0}, {"fraction_bits": 60}, {"fraction_bits": 13, "promote_every": 48},
                   {"fraction_bits": 13, "group": 0}):
        with pytest.raises(ValueError) as err:
            acc.simulate_truncated_accumulation(a, a, **kwargs)
        one_line_bilingual(err)
    with pytest.raises(ValueError) as err:
        acc.simulate_truncated_accumulation(a, np.ones((2, 32)), 13)
    one_line_bilingual(err)


def test_accuracy_metrics_on_a_known_case():
    ref = np.array([[1.0, 2.0], [4.0, 1e-9]])
    C = ref * (1 - 2.0 ** -8)
    C[1, 1] = np.nan
    m = acc.accuracy_metrics(C, ref, magnitude=np.abs(ref))
    assert m["nonfinite"] == 1
    assert m["bias"] == pytest.approx(-2.0 ** -8) and m["max_rel"] == pytest.approx(2.0 ** -8)  # 1e-9 left out


# --- the promotion study without the GPU --------------------------------------------------------

def test_promotion_operands_are_per_tensor_and_never_zero():
    a_bits, a_s, b_bits, b_s = acc.promotion_operands(32, 16, 256, "positive", seed=5)
    assert a_bits.shape == (32, 256) and b_bits.shape == (16, 256) and a_bits.dtype == np.uint8
    assert np.all(a_bits & 0x7F) and np.all(b_bits & 0x7F)   # no ±0
    assert not np.any(a_bits & 0x80)                           # positive: no sign bits
    assert isinstance(a_s, np.float32) and a_s > 0
    again = acc.promotion_operands(32, 16, 256, "positive", seed=5)
    assert np.array_equal(again[0], a_bits) and again[1] == a_s
    normal = acc.promotion_operands(32, 16, 256, "normal", seed=5)[0]
    assert np.any(normal & 0x80) and np.all(normal & 0x7F)


def test_promotion_study_model_and_floor_on_the_cpu():
    rows = acc.promotion_study([256, 2048], M=16, N=16, measured=False, progress=None)
    assert len(rows) == 2 * 2 * (2 * 2 + 1)
    for r in rows:
        assert r["nonfinite"] == 0 and r["rel_fro"] > 0
    floor = by(rows, K=2048, kind="positive", kernel="bf16_floor")
    plain = by(rows, K=2048, kind="positive", kernel="model", fraction_bits=13, promotion=False)
    promoted = by(rows, K=2048, kind="positive", kernel="model", fraction_bits=13, promotion=True)
    assert plain["bias"] < 0 and plain["bias"] < promoted["bias"]
    assert floor["rel_fro"] <= promoted["rel_fro"] * 1.01 < plain["rel_fro"]
    assert floor["rel_fro"] < 2.0 ** -8  # bf16 rounding alone: under half a unit in the 8th bit


def test_promotion_study_with_a_stand_in_kernel():
    calls = []

    def exact_kernel(a_bits, a_s, b_bits, b_s, scaling):  # a perfect FP8 GEMM: the reference in bf16
        calls.append(scaling)
        sa, sb = np.full((a_bits.shape[0], 4), a_s, np.float32), np.full((1, 4), b_s, np.float32)
        return to_bfloat16(fp8.reference_gemm_fp8(a_bits, sa, b_bits, sb))

    rows = acc.promotion_study([512], M=16, N=16, kinds=("normal",), fraction_bits=(13,),
                               measure=exact_kernel, progress=None)
    assert calls == ["per_tensor", "blockwise"]
    floor = by(rows, kernel="bf16_floor")
    for kernel in ("fp8_gemm_per_tensor", "fp8_gemm_blockwise"):
        assert by(rows, kernel=kernel)["rel_fro"] == floor["rel_fro"]


@pytest.mark.parametrize("Ks", [[100], [0], [512, 8], ["512"], [], [True]])
def test_bad_K_is_a_one_line_bilingual_error(Ks):
    with pytest.raises(ValueError) as err:
        acc.promotion_study(Ks, measured=False, progress=None)
    one_line_bilingual(err)


def test_bad_kind_and_scaling_are_one_line_bilingual_errors():
    with pytest.raises(ValueError) as err:
        acc.promotion_study([512], kinds=("uniform",), measured=False, progress=None)
    one_line_bilingual(err)
    with pytest.raises(ValueError) as err:
        acc.promotion_operands(16, 16, 64, "gaussian")
    one_line_bilingual(err)
    with pytest.raises(ValueError) as err:
        acc.quantize_dequantize(np.ones((2, 2)), "per_channel")
    one_line_bilingual(err)
    with pytest.raises(ValueError) as err:
        acc.outlier_study(K=64, outlier_channels=64)
    one_line_bilingual(err)


@pytest.mark.skipif(device.gpu_available(), reason="checks the message shown where there is no GPU")
def test_without_a_gpu_the_kernels_say_so_in_one_line(tmp_path):
    with pytest.raises(RuntimeError) as err:
        acc.promotion_study([512], progress=None)
    assert "\n" not in str(err.value) and "GPU" in str(err.value)
    with pytest.raises(RuntimeError):
        acc.record_accuracy(tmp_path / "x.json", progress=None)
    assert not (tmp_path / "x.json").exists()


# --- figures and recorded rows -------------------------------------------------------------------

def synthetic_promotion_rows():
    rows = []
    for K in (512, 1024, 2048, 4096):
        for kind in acc.INPUT_KINDS:
            base = {"K": K, "M": 256, "N": 256, "kind": kind, "seed": 0, "nonfinite": 0,
                    "max_err_over_magnitude": 1e-4}
            growth = K / 512
            rows.append({**base, "kernel": "fp8_gemm_per_tensor", "promotion": False, "fraction_bits": None,
                         "rel_fro": 2e-3 * growth, "max_rel": 5e-3 * growth, "bias": -1e-3 * growth})
            rows.append({**base, "kernel": "fp8_gemm_blockwise", "promotion": True, "fraction_bits": None,
                         "rel_fro": 1.7e-3, "max_rel": 4e-3, "bias": -1e-4})
            for bits in (13, 14):
                for promotion in (False, True):
                    rows.append({**base, "kernel": "model", "promotion": promotion, "fraction_bits": bits,
                                 "rel_fro": 1.8e-3 * (1 if promotion else growth), "max_rel": 4e-3,
                                 "bias": -2e-4})
            rows.append({**base, "kernel": "bf16_floor", "promotion": None, "fraction_bits": None,
                         "rel_fro": 1.6e-3, "max_rel": 3.5e-3, "bias": 1e-5})
    return rows


def test_promotion_figure_from_rows():
    fig = acc.promotion_figure(synthetic_promotion_rows())
    assert len(fig.data) == 2 * 7                     # 7 curves per input kind
    assert sum(bool(t.visible) for t in fig.data) == 7  # one kind shown, a menu for the other
    assert len(fig.layout.updatemenus[0].buttons) == 2
    assert " · " in fig.layout.title.text and fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert all(" · " in t.name for t in fig.data)
    bias = acc.promotion_figure([r for r in synthetic_promotion_rows() if r["kind"] == "positive"], metric="bias")
    assert len(bias.data) == 7 and bias.layout.yaxis.type != "log" and not bias.layout.updatemenus
    with pytest.raises(ValueError) as err:
        acc.promotion_figure(synthetic_promotion_rows(), metric="speed")
    one_line_bilingual(err)


def test_outlier_figure_from_rows(outlier_rows):
    fig = acc.outlier_figure(outlier_rows)
    assert len(fig.data) == 3 * 2 and " · " in fig.layout.title.text and fig.layout.yaxis.type == "log"
    flushed = acc.outlier_figure(outlier_rows, metrics=("a_underflow_fraction",))
    assert len(flushed.data) == 3 and flushed.layout.yaxis.type == "linear"
    for metrics in (("rel_fro", "a_underflow_fraction"), ("nope",), ()):
        with pytest.raises(ValueError) as err:
            acc.outlier_figure(outlier_rows, metrics=metrics)
        one_line_bilingual(err)


def test_recorded_accuracy_returns_two_lists():
    promotion, outliers = acc.recorded_accuracy()
    assert isinstance(promotion, list) and isinstance(outliers, list)
    for r in promotion:
        assert {"K", "kind", "kernel", "rel_fro", "gpu", "file"} <= set(r)
    for r in outliers:
        assert {"magnitude", "scaling", "rel_fro", "file"} <= set(r)


def test_result_file_layout_is_accepted_by_results_load(tmp_path, monkeypatch):
    """What record_accuracy writes (schema 1, provenance, records, the two lists) loads as a result
    file, and recorded_accuracy finds its rows; the GPU part is faked with the CPU-only study."""
    import json

    from gemm_course.measure import results

    payload = {"schema": 1, "provenance": {"gpu": "test GPU", "date": "2025-01-01T00:00:00"}, "records": [],
               "fp8_outliers": acc.outlier_study(M=16, N=16, K=256, magnitudes=(1, 10)),
               "fp8_promotion": acc.promotion_study([256], M=8, N=8, measured=False, progress=None)}
    path = tmp_path / "h200_13_fp8_accuracy.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    assert results.load(path)["fp8_promotion"] == payload["fp8_promotion"]
    monkeypatch.setattr(results, "recorded_files", lambda: [path])
    promotion, outliers = acc.recorded_accuracy()
    assert len(promotion) == len(payload["fp8_promotion"]) and len(outliers) == 6
    assert promotion[0]["gpu"] == "test GPU" and promotion[0]["file"] == path.name
    assert results.recorded() == []  # no timing records: the ladder pages are unaffected
    assert math.isfinite(outliers[0]["rel_fro"])
    acc.promotion_figure(promotion)
    acc.outlier_figure(outliers)


def test_record_accuracy_writes_after_each_K(tmp_path, monkeypatch):
    """record_accuracy's bookkeeping on the CPU: the GPU check, the provenance and the kernels are
    stood in for; the file is complete after every K and loads as a result file."""
    import importlib

    from gemm_course.measure import results

    bench = importlib.import_module("gemm_course.measure.bench")  # the module (the package exports a function of that name)

    def exact_kernel(a_bits, a_s, b_bits, b_s, scaling):
        strips = math.ceil(a_bits.shape[1] / 128)
        sa = np.full((a_bits.shape[0], strips), a_s, np.float32)
        sb = np.full((math.ceil(b_bits.shape[0] / 128), strips), b_s, np.float32)
        return to_bfloat16(fp8.reference_gemm_fp8(a_bits, sa, b_bits, sb))

    monkeypatch.setattr(device, "require_gpu", lambda what: None)
    monkeypatch.setattr(bench, "provenance", lambda method: {"gpu": "stand-in", "date": "2025-01-01", "method": method})
    monkeypatch.setattr(acc, "_course_kernels", exact_kernel)
    lines: list[str] = []
    path = tmp_path / "acc.json"
    result = acc.record_accuracy(path, Ks=[256, 512], M=16, N=16, magnitudes=(1, 100), progress=lines.append)
    data = results.load(path)
    assert data == result and data["records"] == []
    assert len(data["fp8_outliers"]) == 2 * 3
    assert len(data["fp8_promotion"]) == 2 * 2 * (2 + 4 + 1)
    assert sum(line.startswith("K=") and "written" in line for line in lines) == 2
    assert data["provenance"]["command"].startswith("python -m gemm_course fp8 --accuracy") and "256, 512" in data["provenance"]["command"]
    measured = by(data["fp8_promotion"], K=512, kind="positive", kernel="fp8_gemm_per_tensor")
    assert measured["promotion"] is False and measured["fraction_bits"] is None


def test_figure_texts_have_one_language_separator(outlier_rows):
    """The book's language switch splits a text at its one " · " into English and Chinese."""
    for fig in (acc.promotion_figure(synthetic_promotion_rows()), acc.outlier_figure(outlier_rows),
                acc.outlier_figure(outlier_rows, metrics=("a_subnormal_fraction",))):
        texts = [fig.layout.title.text, fig.layout.title.subtitle.text, fig.layout.xaxis.title.text,
                 fig.layout.yaxis.title.text] + [t.name for t in fig.data]
        for text in texts:
            assert text.count(" · ") == 1, text
