"""DeepGEMM as a recorded peer of Level 13: `python -m gemm_course fp8 --record --peer deepgemm --out FILE`.

DeepGEMM (github.com/deepseek-ai/DeepGEMM) is DeepSeek's open-source FP8 GEMM library with the same fine-grained
scales as Level 13's blockwise kernel: 1×128 of A, 128×128 of B, promotion into fp32, bf16 C. This module runs its
``fp8_gemm_nt`` on the very operands and scales the course makes for Level 13 (fp8.gemm.random_fp8_operands),
converting layouts only, never values; checks each output against the course's float64 reference with the course's
tolerance (fp8.gemm._check_rows, allowed_error); and times it with the course's one harness (bench.time_gpu), beside
block-scaled cuBLASLt and Level 13's best recorded setting, interleaved shape by shape in one run.

DeepGEMM is optional. The course neither ships nor builds it: install DeepGEMM from its own repository, following
its README (it needs a Hopper GPU, CUDA's nvcc for its run-time compilation, and PyTorch). ``import deep_gemm``
happens inside the functions here only, so importing this module needs neither DeepGEMM nor a GPU.

Layouts (DeepGEMM's README and its ``fp8_gemm_nt``): A is M×K e4m3, K-major (the course's uint8 bits, viewed as
torch.float8_e4m3fn through DLPack, no copy); A's scales float32 (M, K/128), stored M-major with M padded to a
TMA-aligned count (4 floats = 16 bytes), so one copy of the course's row-major scales into that layout, made once,
outside the timing; B is N×K e4m3, K-major (a view again); B's scales float32 (N/128, K/128), row-major, as the
course stores them (a view); D is M×N bf16, which the course reads as uint16 bits (a view).
"""
from __future__ import annotations

import math
import os
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from gemm_course.fp8.formats import SCALE_BLOCK, _bilingual

PEERS = ("deepgemm",)
PEER_NAME = "deepgemm"
PEER_DESCRIPTION = ("DeepGEMM fp8_gemm_nt, 1×128 A / 128×128 B scales, bf16 D "
                    "(github.com/deepseek-ai/DeepGEMM, installed from its own repository)")
NOT_INSTALLED = _bilingual(
    "DeepGEMM is not installed: build it from its own repository (see its README) on a Hopper GPU",
    "未安装 DeepGEMM：请在 Hopper GPU 上按其仓库的 README 从源码构建")
TMA_ALIGN_BYTES = 16  # DeepGEMM's get_tma_aligned_size: M of A's scales padded to whole 16-byte groups
API_NAMES = ("fp8_gemm_nt", "gemm_fp8_fp8_bf16_nt")  # today's name, then the name of DeepGEMM before mid-2025


class DeepGEMMNotInstalled(RuntimeError):
    """`import deep_gemm` failed: the message says how to get it."""


def require() -> Any:
    """The deep_gemm module, or DeepGEMMNotInstalled with the one-line bilingual message NOT_INSTALLED."""
    try:
        import deep_gemm  # noqa: PLC0415  (optional: only here)
    except ImportError as e:
        raise DeepGEMMNotInstalled(NOT_INSTALLED) from e
    return deep_gemm


def available() -> bool:
    """Whether `import deep_gemm` works here (no GPU needed to ask)."""
    try:
        require()
    except DeepGEMMNotInstalled:
        return False
    return True


def _api(dg: Any) -> tuple[str, Callable[..., Any]]:
    for name in API_NAMES:
        fn = getattr(dg, name, None)
        if fn is not None:
            return name, fn
    raise RuntimeError(_bilingual(
        f"this deep_gemm ({getattr(dg, '__version__', '?')}) has none of {', '.join(API_NAMES)}: its dense FP8 GEMM "
        "is missing (built without CUDA 12.1+?)",
        f"这个 deep_gemm（{getattr(dg, '__version__', '?')}）没有 {', '.join(API_NAMES)}：缺少其稠密 FP8 GEMM"))


def version_info() -> dict[str, Any]:
    """What a result file records of the DeepGEMM it ran: version, commit (git of its checkout, else the
    environment variable DEEPGEMM_COMMIT), where it was imported from, the function called, and its settings
    (SM count, programmatic dependent launch, JIT compiler) as it ran."""
    dg = require()
    where = Path(dg.__file__).resolve().parent
    info: dict[str, Any] = {"version": getattr(dg, "__version__", None), "path": str(where), "api": _api(dg)[0]}
    try:
        from importlib.metadata import version

        info["distribution"] = version("deep_gemm")
    except Exception:  # an in-place build has no installed metadata
        info["distribution"] = None
    commit = None
    try:  # a checkout of DeepGEMM itself (not a repository it happens to sit inside)
        done = subprocess.run(["git", "-C", str(where.parent), "rev-parse", "--show-toplevel", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        lines = done.stdout.split()
        if done.returncode == 0 and len(lines) == 2 and Path(lines[0]).resolve() == where.parent:
            commit = lines[1]
    except (OSError, subprocess.SubprocessError):
        pass
    info["commit"] = commit or os.environ.get("DEEPGEMM_COMMIT") or None
    for getter in ("get_num_sms", "get_pdl", "get_tc_util"):
        fn = getattr(dg, getter, None)
        if fn is not None:
            try:
                info[getter[4:]] = fn()
            except Exception:
                info[getter[4:]] = None
    info["jit_compiler"] = "nvrtc" if os.environ.get("DG_JIT_USE_NVRTC", "0") == "1" else "nvcc"
    info["jit_cache_dir"] = os.environ.get("DG_JIT_CACHE_DIR")
    return info


def _as_torch(x: Any) -> Any:
    import torch

    return torch.from_dlpack(x)


def tma_aligned_rows(M: int) -> int:
    """M rounded up to whole 16-byte groups of float32: the column stride of A's M-major scales."""
    per = TMA_ALIGN_BYTES // 4
    return math.ceil(M / per) * per


def a_scales_mn_major(a_scales: Any) -> Any:
    """A's (M, K/128) float32 scales (CuPy or NumPy, row-major) as a torch tensor of the same shape and the same
    values, stored M-major with the column stride padded to tma_aligned_rows(M): the layout DeepGEMM's SM90 kernel
    reads (its get_mn_major_tma_aligned_tensor). One copy, made once."""
    import cupy
    import torch

    s = _as_torch(cupy.ascontiguousarray(cupy.asarray(a_scales, dtype=cupy.float32)))
    M, strips = s.shape
    out = torch.empty_strided((M, strips), (1, tma_aligned_rows(M)), dtype=torch.float32, device=s.device)
    out.copy_(s)
    if not torch.equal(out, s):  # values unchanged: the conversion is a layout only
        raise RuntimeError("A's scales changed in the layout conversion")
    return out


def prepare_deepgemm(a_bits: Any, a_scales: Any, b_bits: Any, b_scales: Any) -> tuple[Callable[[], None], Any]:
    """(launch, D): launch() runs DeepGEMM's FP8 GEMM once, D = A·Bᵀ with the course's blockwise operands
    (a_bits M×K and b_bits N×K uint8 CuPy arrays, a_scales (M, K/128), b_scales (N/128, K/128), as
    fp8.gemm.random_fp8_operands makes them), writing D, returned as an (M, N) uint16 CuPy array of bf16 bits (the
    course's form of bf16; a view of DeepGEMM's output, no copy). Layout changes happen here, once; launch() is the
    library call alone. Checks that DeepGEMM would not convert A's scales again inside the call."""
    import cupy
    import torch

    dg = require()
    _, gemm = _api(dg)
    (M, K), (N, _) = a_bits.shape, b_bits.shape
    strips = math.ceil(K / SCALE_BLOCK)
    if tuple(a_scales.shape) != (M, strips) or tuple(b_scales.shape) != (math.ceil(N / SCALE_BLOCK), strips):
        raise ValueError(_bilingual("DeepGEMM's peer run takes blockwise scales: (M, K/128) of A, (N/128, K/128) of B",
                                    "DeepGEMM 对照只接受细粒度缩放：A 为 (M, K/128)，B 为 (N/128, K/128)"))
    a = _as_torch(a_bits).view(torch.float8_e4m3fn)   # M×K, K-major: a view of the course's bytes
    b = _as_torch(b_bits).view(torch.float8_e4m3fn)   # N×K, K-major
    sa = a_scales_mn_major(a_scales)
    sb = _as_torch(cupy.ascontiguousarray(cupy.asarray(b_scales, dtype=cupy.float32)))  # (N/128, K/128), K-major
    helper = getattr(dg, "get_mn_major_tma_aligned_tensor", None) or getattr(dg, "get_col_major_tma_aligned_tensor",
                                                                             None)
    if helper is not None and helper(sa).data_ptr() != sa.data_ptr():
        raise RuntimeError("DeepGEMM would transform A's scales again on every call: the layout here is not the one "
                           "it requires")
    d = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    # DeepGEMM launches on PyTorch's current stream; the course's events are recorded on CuPy's: the same stream,
    # or the events would time nothing
    if torch.cuda.current_stream().cuda_stream != cupy.cuda.get_current_stream().ptr:
        raise RuntimeError("PyTorch's current stream is not CuPy's: DeepGEMM's launches would escape the events")

    def launch() -> None:
        gemm((a, sa), (b, sb), d)

    bits = cupy.from_dlpack(d.view(torch.int16)).view(cupy.uint16)
    return launch, bits


# --- the recorded comparison ---------------------------------------------------------------------

def _default_sizes() -> list[tuple[int, int, int]]:
    """The shapes of `fp8 --record`: the two squares, then each projection (levels.PROJECTION_NK) at M = 64, 128
    (decode) and 4096 (prefill)."""
    from gemm_course.fp8.gemm import PROJECTION_M, PROJECTION_NK, SQUARES

    return [(n, n, n) for n in SQUARES] + [(m, n, k) for (n, k) in PROJECTION_NK for m in PROJECTION_M]


def level13_best(M: int, N: int, K: int) -> tuple[dict[str, Any], str]:
    """Level 13's blockwise setting to time at a shape, and where it comes from: the autotuner's recorded best
    (autotune.recorded_best, scaling="blockwise") where Level 13's sweep timed this shape; else the fastest passing
    blockwise record of the chapter's runs at this shape (fp8.gemm.recorded_fp8); else the default setting."""
    from gemm_course.fp8 import gemm as fp8_gemm
    from gemm_course.measure.autotune import recorded_best

    try:
        r = recorded_best(fp8_gemm.LEVEL_ID, (M, N, K), scaling="blockwise")
        return dict(r["params"]), f"tuner: autotune.recorded_best ({r['file']})"
    except KeyError:
        pass
    rows = [r for r in fp8_gemm.recorded_fp8() if (r["M"], r["N"], r["K"]) == (M, N, K)
            and r["params"].get("scaling") == "blockwise" and r.get("passed", True)]
    if rows:
        r = max(rows, key=lambda r: r["tflops"])
        return dict(r["params"]), f"chapter: fastest recorded blockwise setting ({r['file']})"
    return fp8_gemm.resolved_setting({"scaling": "blockwise", "splits": "auto"}, M, N, K), "default"


def _prepare_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    keys = ("stages", "block_m", "block_n", "overlap", "splits", "staged_scales")
    return {k: params[k] for k in keys if k in params}


PEER_METHOD = ("One run, shape by shape: at each shape the course's blockwise operands (fp8.gemm.random_fp8_operands, "
               "seed 0: normal random values whose size changes by up to 2^±3 from one 128-block to the next, "
               "quantised with 1×128 scales of A and 128×128 of B; never zero) are shared by three GEMMs: {peer}; "
               "cuBLASLt's block-scaled FP8 GEMM through PyTorch ({blockwise_api}); and Level 13's blockwise kernel "
               "at its best recorded setting (the tuner's recorded best where Level 13's sweep timed the shape, else "
               "the fastest blockwise setting of the chapter's runs; setting_from says which). Layouts only are "
               "converted for DeepGEMM (A's scales copied once into the M-major TMA-aligned layout it reads, outside "
               "the timing; the bytes of A and B and the other scales are views). Each output is poisoned with NaN, "
               "computed, and {rows} checked against fp8.reference_gemm_fp8 (float64, one reference per shape) with the "
               "course's tolerance (fp8.gemm.allowed_error, blockwise: max_error_ratio ≤ 1 passes), before timing; "
               "relative_error is ‖C − ref‖ / ‖ref‖ over the same rows, and bits_differing_from_level13 the share of a "
               "library's bf16 outputs whose bits differ from Level 13's. Then the three are timed one after another with "
               "the course's harness (bench.time_gpu: CUDA events around each launch, 1 untimed call and {settle_s} s "
               "of untimed launches to settle the clock, then at least {reps} timed repetitions (at most {max_reps}, "
               "within {budget_s} s), L2 flushed before each by writing 4×L2 bytes; median with quartiles; "
               + "{clock}), the order rotated by one place from shape to shape (timed_order: 0 first). Every record "
               "carries its own clock. DeepGEMM's kernels are compiled by its JIT on first use, before the timing.")


# Other Level 13 settings a run may time beside the best one at a shape: variants(M, N, K, best params) gives
# (params, where it comes from) pairs (fp8.tma_scales.variants: the three ways to the scales at one ring depth).
Variants = Callable[[int, int, int, dict[str, Any]], list[tuple[dict[str, Any], str]]]
LEVEL13 = "level13"  # the best setting's name among a shape's runs; a variant's is "level13 " + its params


def record_peer(out: Optional[str] = None, sizes: Optional[Sequence[Any]] = None, *, peer: Optional[str] = PEER_NAME,
                reps: int = 50, max_reps: int = 100, budget_s: float = 1.0, check_rows: Optional[int] = None,
                variants: Optional[Variants] = None, records_key: str = "peer_records",
                extra: Optional[dict[str, Any]] = None,
                progress: Optional[Callable[[str], None]] = print) -> dict[str, Any]:
    """Check and time DeepGEMM, block-scaled cuBLASLt and Level 13's best setting at every shape, interleaved, in
    one run; write a result file (schema 1, provenance with the DeepGEMM version and commit) after each shape.

    The comparison lives under "peer_records", apart from "records" (which the course's ladder and level pages
    read): per shape a Level 13 record (level fp8.gemm.LEVEL_ID, its setting in params, setting_from, and the
    ratio of each library's time to its own: ratio_to_deepgemm, ratio_to_cublaslt_blockwise) and one record per
    library (level "cublas", baseline "deepgemm" or "cublaslt_blockwise", as the course names baselines). Each
    record: Timing fields (its own SM clock), tflops, max_error_ratio (≤ 1 passes), passed, timed_order.
    check_rows: rows of each output checked (default: every row).

    peer=None leaves DeepGEMM out (cuBLASLt and Level 13 only). variants: more Level 13 settings per shape, each
    checked and timed in the same rotation, its record with ratio_to_level13_best (the best setting's time over its
    own) and bits_differing_from_level13_best. records_key: where the records go (another key than "peer_records"
    keeps a run out of the peer comparison the summary reads); extra: more top-level entries of the file."""
    if peer is not None and peer not in PEERS:
        raise ValueError(_bilingual(f"--peer {peer!r}: the peers are {', '.join(PEERS)}",
                                    f"--peer {peer!r}：可选的对照是 {', '.join(PEERS)}"))
    dg_info = version_info() if peer else None  # fails first, with the one-line message, where DeepGEMM is missing
    import cupy

    from gemm_course.fp8 import gemm as fp8_gemm
    from gemm_course.measure.bench import CLOCK_METHOD, SETTLE_S, _write_json, provenance, time_gpu

    fp8_gemm._require_hopper()
    say = progress or (lambda _: None)
    shapes = [fp8_gemm._shape(s) for s in sizes] if sizes else _default_sizes()
    api = fp8_gemm._blockwise_api()
    method = PEER_METHOD.format(peer=PEER_DESCRIPTION if peer else "no library peer (DeepGEMM left out)",
                                blockwise_api=api[0] if api else "absent",
                                rows="every row of each output" if check_rows is None else f"{check_rows} random rows of each output",
                                settle_s=SETTLE_S, reps=reps, max_reps=max_reps, budget_s=budget_s,
                                clock=CLOCK_METHOD)
    if variants is not None:
        method += (" Beside the best setting, more Level 13 settings per shape (setting_from says which), each checked "
                   "and timed in the same rotation.")
    result: dict[str, Any] = {"schema": 1, "provenance": provenance(method), "records": [], records_key: [],
                              **(extra or {})}
    prov = result["provenance"]
    prov["torch"] = fp8_gemm._torch_version()
    try:
        import torch

        prov["torch_cuda"] = torch.version.cuda
    except ImportError:
        prov["torch_cuda"] = None
    prov["blockwise_baseline_api"] = api[0] if api else None
    if dg_info is not None:
        prov["deepgemm"] = dg_info
    path = Path(out) if out else None
    timing = dict(min_reps=reps, max_reps=max_reps, budget_s=budget_s)

    def save() -> None:
        if path:
            _write_json(path, result)

    for index, (M, N, K) in enumerate(shapes):
        flops = 2.0 * M * N * K
        ops = fp8_gemm.random_fp8_operands(M, N, K, "blockwise", xp=cupy)
        a_bits, a_s, b_bits, b_s = ops
        # One float64 reference per shape (the rows fp8.gemm._check_rows would pick; every row by default), and
        # the course's tolerance (fp8.gemm.allowed_error): each output is checked against the same numbers.
        from gemm_course.fp8.formats import reference_gemm_fp8
        from gemm_course.run.dtypes import to_float64

        rows = M if check_rows is None else min(M, check_rows)
        pick = cupy.asarray(np.sort(np.random.default_rng(1).choice(M, rows, replace=False)))
        sa_rows = cupy.asarray(a_s)[pick]
        ref = reference_gemm_fp8(a_bits[pick], sa_rows, b_bits, cupy.asarray(b_s))
        allowed = fp8_gemm.allowed_error(ref, fp8_gemm.magnitude_gemm(a_bits[pick], sa_rows, b_bits, cupy.asarray(b_s)),
                                         K, "blockwise")
        ref_norm = float(cupy.linalg.norm(ref))
        outputs: dict[str, Any] = {}
        rel_errors: dict[str, float] = {}

        def check(C: Any, name: str) -> float:
            got = C[pick]
            outputs[name] = got.copy()
            x = to_float64(got)
            rel_errors[name] = float(cupy.linalg.norm(x - ref)) / ref_norm
            err = cupy.abs(x - ref) / allowed
            return float("inf") if bool(cupy.isnan(err).any()) else float(err.max())

        params, source = level13_best(M, N, K)
        runs: dict[str, Callable[[], Any]] = {}
        errors: dict[str, float] = {}
        if peer:  # DeepGEMM: poison D, run (its JIT compiles here on first use), check
            dg_launch, D = prepare_deepgemm(a_bits, a_s, b_bits, b_s)
            D.fill(fp8_gemm.BF16_NAN)
            dg_launch()
            errors[peer] = check(D, peer)
            runs[peer] = dg_launch
            del D
        # block-scaled cuBLASLt on the same bytes and scales
        blas = fp8_gemm._torch_blockwise_scaled_mm(a_bits, a_s, b_bits, b_s, M, N, K)
        if blas is not None:
            errors["cublaslt_blockwise"] = check(fp8_gemm._bf16_bits(blas, poison=True), "cublaslt_blockwise")
            runs["cublaslt_blockwise"] = blas
        # Level 13 at its best recorded setting, then the variants: poison C, run, check
        level13 = {LEVEL13: (params, source)}
        for v_params, v_source in (variants(M, N, K, params) if variants else []):
            level13[LEVEL13 + " " + ",".join(f"{k}={v}" for k, v in v_params.items())] = (v_params, v_source)
        for name, (p, _) in level13.items():
            launch, C = fp8_gemm.prepare(a_bits, a_s, b_bits, b_s, scaling="blockwise", **_prepare_kwargs(p))
            C.fill(fp8_gemm.BF16_NAN)
            launch()
            errors[name] = check(C, name)
            runs[name] = launch
            del C

        names = list(runs)
        shift = index % len(names)
        order = names[shift:] + names[:shift]
        timed = {name: time_gpu(runs[name], **timing) for name in order}

        def base(name: str) -> dict[str, Any]:
            t = timed[name]
            return {"dtype": fp8_gemm.DTYPE, "M": M, "N": N, "K": K, **asdict(t),
                    "tflops": flops / (t.median_ms * 1e-3) / 1e12, "max_error_ratio": errors[name],
                    "relative_error": rel_errors[name], "rows_checked": rows,
                    "passed": errors[name] <= 1, "timed_order": order.index(name)}

        mine_bits = outputs[LEVEL13]
        ours = []
        for name, (p, from_) in level13.items():
            rec = {"level": fp8_gemm.LEVEL_ID, "params": p, "setting_from": from_, **base(name)}
            for other in runs:
                if other not in level13:
                    rec[f"ratio_to_{other}"] = timed[other].median_ms / timed[name].median_ms
            if name != LEVEL13:
                rec["ratio_to_level13_best"] = timed[LEVEL13].median_ms / timed[name].median_ms
                rec["bits_differing_from_level13_best"] = float((outputs[name] != mine_bits).mean())
            ours.append(rec)
        libs = [{"level": "cublas", "baseline": name,
                 "params": {"library": PEER_DESCRIPTION if name == peer else fp8_gemm.BASELINES[name]},
                 **base(name),
                 # the share of checked bf16 outputs whose bits differ from Level 13's (its own computation, not a copy)
                 "bits_differing_from_level13": float((outputs[name] != mine_bits).mean())}
                for name in runs if name not in level13]
        result[records_key] += [*ours, *libs]
        for r in [*ours, *libs]:
            who = r.get("baseline") or "level13 " + ",".join(f"{k}={v}" for k, v in r["params"].items())
            differ = "" if "bits_differing_from_level13" not in r else \
                f"  differs from L13 {r['bits_differing_from_level13']:.1%}"
            say(f"{M}×{N}×{K}  {who:<72} {r['median_ms']:8.4f} ms  {r['tflops']:7.1f} TFLOPS  "
                f"SM {r['sm_clock_mhz'] or 0:.0f} MHz  error/allowed {r['max_error_ratio']:.3f}  "
                f"rel {r['relative_error']:.2e}  order {r['timed_order']}{differ}")
        save()
        del runs, launch, blas, ops, a_bits, a_s, b_bits, b_s, ref, allowed, outputs, mine_bits
        cupy.get_default_memory_pool().free_all_blocks()
        try:
            import torch

            torch.cuda.empty_cache()
        except ImportError:
            pass
    save()
    return result


def peer_table(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape of a peer file's records: each GEMM's TFLOPS and clock, and the ratios (higher = faster than)."""
    from gemm_course.fp8.gemm import LEVEL_ID

    out = []
    for r in records:
        if r["level"] != LEVEL_ID:
            continue
        shape = (r["M"], r["N"], r["K"])
        libs = {x["baseline"]: x for x in records if x["level"] == "cublas" and (x["M"], x["N"], x["K"]) == shape}
        row: dict[str, Any] = {"M": r["M"], "N": r["N"], "K": r["K"], "level13_params": r["params"],
                               "level13_tflops": r["tflops"], "level13_sm_clock_mhz": r["sm_clock_mhz"]}
        for name, x in libs.items():
            row[f"{name}_tflops"] = x["tflops"]
            row[f"{name}_sm_clock_mhz"] = x["sm_clock_mhz"]
        if "deepgemm" in libs and "cublaslt_blockwise" in libs:
            row["deepgemm_over_cublaslt"] = libs["deepgemm"]["tflops"] / libs["cublaslt_blockwise"]["tflops"]
        if "deepgemm" in libs:
            row["level13_over_deepgemm"] = r["tflops"] / libs["deepgemm"]["tflops"]
        if "cublaslt_blockwise" in libs:
            row["level13_over_cublaslt"] = r["tflops"] / libs["cublaslt_blockwise"]["tflops"]
        out.append(row)
    return out
