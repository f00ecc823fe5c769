"""Level 14's recorded run: every DSL kernel checked, then timed beside cuBLAS and the course's own CUDA levels.

    python -m gemm_course dsl --record --out FILE [--sizes 4096,8192,...] [--check-only]

On one GPU (Hopper for the TMA kernels), in one process:

1. checks every kernel and setting (:data:`CONTENDERS`) on odd shapes: fresh U(−1, 1) inputs (never zero), C
   poisoned with NaN, the float64 product of the rounded inputs, the course's tolerance (check.tolerance, which
   counts a bf16 C's rounding), and NaN guards around A, B and C that catch an unmasked read or a stray store
   (gemm_course.dsl.checking); the tiled kernel at check.ODD_SHAPES (1×1×1, 127×129×131, a partial last tile in
   every dimension), the TMA kernels at check.MULTIPLE_OF_8_SHAPES (TMA's rule: K and N multiples of 8; a partial
   tile in every dimension and more tiles than SMs). Every check is a row of the file's "dsl_checks";
2. times, at each shape, cuBLAS in the same input type and, beside it, the course's matching CUDA level (Level 8 for
   fp32; Levels 10 and 11 for bf16) and every DSL setting that passed its checks, with bench.time_gpu (CUDA events on
   CuPy's stream, where the DSL kernels launch too: tensors.use_cupy_driver; the L2 flushed before every
   repetition; the kernel's own SM clock), cuBLAS timed again right before each contender as bench.bench does, and
   every output checked against the float64 product before it is timed. Rows go under "dsl_records" (not
   "records": the ladder of gemm_course.measure.results reads those, and its levels are the registry's);
3. never stops at one failure: a kernel that does not compile, launch or check is a row with its one-line error,
   and the run goes on; Ctrl-C keeps what was measured. The file is rewritten after every row.

:func:`read_record` reads a record back into flat rows (one per kernel, setting and shape) for a chart or a table.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

RECORDS_KEY = "dsl_records"
CHECKS_KEY = "dsl_checks"
DEFAULT_SHAPES: tuple[tuple[int, int, int], ...] = (
    (4096, 4096, 4096), (8192, 8192, 8192),
    (8192, 2112, 7168), (4096, 24576, 1536),  # two projection shapes (levels.PROJECTION_NK) at 8192 and 4096 tokens
)
TIMING = {"min_reps": 50, "max_reps": 100, "budget_s": 1.5}  # 34 timings per shape: the whole run in a few minutes

# What is timed: (name, input type, setting). The DSL kernels' settings: a block tile like the CUDA level they stand
# beside, and a larger one of the kind Triton's own tutorials use on Hopper. Each fits in an H100's shared memory
# (tests/test_dsl.py compiles every one for sm_90 and checks it).
TILED_SETTINGS: dict[str, tuple[dict[str, Any], ...]] = {
    "float32": ({"BM": 128, "BN": 128, "BK": 16, "group_m": 8, "num_warps": 8, "num_stages": 3},  # Level 8's tile
                {"BM": 128, "BN": 128, "BK": 32, "group_m": 8, "num_warps": 8, "num_stages": 3}),
    "bfloat16": ({"BM": 128, "BN": 128, "BK": 32, "group_m": 8, "num_warps": 8, "num_stages": 4},  # Level 10's ring
                 {"BM": 128, "BN": 256, "BK": 64, "group_m": 8, "num_warps": 8, "num_stages": 3}),
}
HOPPER_SETTINGS: tuple[dict[str, Any], ...] = (
    {"BM": 128, "BN": 128, "BK": 64, "num_stages": 4, "c_type": "float32"},
    {"BM": 128, "BN": 256, "BK": 64, "num_stages": 3, "c_type": "input"},  # Level 11's 128×256 tile, bf16 C
)
GLUON_SETTINGS: tuple[dict[str, Any], ...] = (
    {"BM": 128, "BN": 128, "BK": 64, "stages": 4, "c_type": "float32"},
    {"BM": 128, "BN": 256, "BK": 64, "stages": 3, "c_type": "input"},
)
# The course's CUDA levels timed beside them: each level's registry default and its fastest recorded setting at
# 4096³ and 8192³ (Level 8: the stepped 64×256 tile with BK = 32; Level 10: TMA, 2 stages, 128×256; Level 11: step 5
# with fp32 C and step 6 with bf16 C, as cuBLAS writes), so that a DSL kernel is set beside the best the course has.
LEVEL_BASELINES: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "float32": (("08_warp_tiling", {}),
                ("08_warp_tiling", {"BM": 64, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "stepped": True})),
    "bfloat16": (("10_mma_pipeline", {}), ("10_mma_pipeline", {"stages": 2, "BN": 256, "copy": "tma"}),
                 ("11_hopper_wgmma", {}), ("11_hopper_wgmma", {"c_type": "input"}),
                 ("11_hopper_wgmma", {"step": 5}), ("11_hopper_wgmma", {"step": 6, "c_type": "input"})),
}
DSL_KERNELS = ("triton_tiled", "triton_hopper", "gluon")
METHOD = ("checks: U(−1, 1) inputs, C poisoned with NaN, float64 product of the rounded inputs, gemm_course.run.check."
          "tolerance(dtype, K, C's type), NaN guard elements around A, B and C (gemm_course.dsl.checking); the tiled "
          "kernel at check.ODD_SHAPES, the TMA kernels at "
          "check.MULTIPLE_OF_8_SHAPES. Timing: bench.time_gpu (CUDA events on CuPy's current stream, which is the "
          "stream Triton launches on through gemm_course.dsl.tensors.use_cupy_driver; 1 untimed call and "
          "{settle_s} s of untimed launches, then at least {min_reps} and at most {max_reps} repetitions within "
          "{budget_s} s; L2 flushed before every repetition; median with quartiles; the kernel's own SM clock); "
          "cuBLAS in the same input type (fp32: cupy.matmul with CUPY_TF32=0; bf16: cublasGemmEx, bf16 C, fp32 "
          "compute) timed once per shape and input type and again right before each contender, whose ratio uses "
          "that paired timing; the DSL kernels launched through their Python launch (triton_gemm.tiled_gemm, "
          "hopper_gemm, gluon_gemm.gluon_gemm with the arguments prepared once); every output checked against the "
          "float64 product before it is timed.")


def _one_line(err: BaseException) -> str:
    """An error as one line: its type and the last non-empty line of its message (Triton's are long)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:500]


def contenders(dtype: str) -> list[tuple[str, dict[str, Any]]]:
    """Every (kernel, setting) timed for an input type: the course's levels, then the DSL kernels."""
    out: list[tuple[str, dict[str, Any]]] = list(LEVEL_BASELINES[dtype])
    out += [("triton_tiled", dict(s)) for s in TILED_SETTINGS[dtype]]
    if dtype == "bfloat16":
        out += [("triton_hopper", dict(s)) for s in HOPPER_SETTINGS]
        out += [("gluon", dict(s)) for s in GLUON_SETTINGS]
    return out


def c_type_of(kernel: str, setting: Mapping[str, Any], dtype: str) -> str:
    """The type of C a kernel writes: the input type for c_type="input" (and cuBLAS), else float32."""
    if kernel == "cublas":
        return dtype
    return dtype if setting.get("c_type") == "input" else "float32"


def prepared_launch(kernel: str, setting: Mapping[str, Any], A: Any, B: Any, C: Any) -> Callable[[], Any]:
    """A function that computes C = A · B with a kernel and setting, its arguments prepared once (the TMA
    descriptors too), as it is timed. kernel: a DSL kernel (DSL_KERNELS) or a registry level's id."""
    if kernel == "triton_tiled":
        from gemm_course.dsl import triton_gemm as tg

        tg._require_placement(A, "tiled_gemm")
        grid, args, options = tg.tiled_launch(A, B, C, tg.resolve_tiled(**setting))
        return lambda: tg.tiled_gemm_kernel[grid](*args, **options)
    if kernel == "triton_hopper":
        from gemm_course.dsl import triton_gemm as tg

        tg.require_tma_shape(A.shape[0], B.shape[1], A.shape[1], "hopper_gemm")
        tg._require_placement(A, "hopper_gemm")
        grid, args, options = tg.hopper_launch(A, B, C, tg.resolve_hopper(**setting))
        return lambda: tg.hopper_gemm_kernel[grid](*args, **options)
    if kernel == "gluon":
        from gemm_course.dsl import gluon_gemm as gg
        from gemm_course.dsl import triton_gemm as tg

        tg.require_tma_shape(A.shape[0], B.shape[1], A.shape[1], "gluon_gemm")
        tg._require_placement(A, "gluon_gemm")
        grid, args, options = gg.gluon_launch(A, B, C, gg.resolve_gluon(**setting))
        return lambda: gg.gluon_gemm_kernel[grid](*args, **options)
    if kernel == "cublas":
        from gemm_course.measure.bench import cublas_gemm

        return lambda: cublas_gemm(A, B, C)
    from gemm_course.run.launch import gemm

    return lambda: gemm(A, B, kernel, out=C, **setting)


def _compiled_facts(result: Any) -> dict[str, Any]:
    """Registers, spills and shared memory of a Triton launch's compiled kernel (what the launch returned)."""
    try:
        return {"registers": int(result.n_regs), "spills": int(result.n_spills),
                "shared_bytes": int(result.metadata.shared),
                "num_warps": int(result.metadata.num_warps)}
    except (AttributeError, TypeError, ValueError):
        return {}


def check_once(kernel: str, setting: Mapping[str, Any], dtype: str, shape: tuple[int, int, int],
               seed: int) -> dict[str, Any]:
    """One check on the GPU (checking.verdict: random inputs, C poisoned with NaN, the float64 product, the course's
    tolerance, NaN guards around A, B and C); a row, with the compiled kernel's registers and shared memory."""
    import cupy

    from gemm_course.dsl.checking import guarded_problem, verdict

    M, N, K = shape
    c_type = c_type_of(kernel, setting, dtype)
    row: dict[str, Any] = {"kernel": kernel, "setting": dict(setting), "dtype": dtype, "c_type": c_type,
                           "M": M, "N": N, "K": K}
    try:
        problem = guarded_problem(M, N, K, dtype, c_type, seed, cupy)
        result = prepared_launch(kernel, setting, problem.A, problem.B, problem.C)()
        cupy.cuda.get_current_stream().synchronize()
        row.update(**verdict(problem), **_compiled_facts(result))
    except Exception as err:  # a kernel that does not compile or launch: its row says why, the run goes on
        row.update(passed=False, error=_one_line(err))
    return row


def check_shapes(kernel: str) -> tuple[tuple[int, int, int], ...]:
    """The odd shapes a kernel is checked at: any shape for the tiled kernel, K and N multiples of 8 for TMA."""
    from gemm_course.run.check import MULTIPLE_OF_8_SHAPES, ODD_SHAPES

    return ODD_SHAPES if kernel == "triton_tiled" else MULTIPLE_OF_8_SHAPES


def run_checks(progress: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Step 1 (the module's docstring): every DSL kernel and setting at its odd shapes; one row per check."""
    rows = []
    for dtype in ("float32", "bfloat16"):
        for kernel, setting in contenders(dtype):
            if kernel not in DSL_KERNELS:
                continue
            if kernel != "triton_tiled" and not _hopper_here():
                rows.append({"kernel": kernel, "setting": setting, "dtype": dtype, "passed": False,
                             "error": "skipped: needs a Hopper GPU (sm_90)"})
                continue
            began = time.perf_counter()
            these = [check_once(kernel, setting, dtype, shape, seed=i + 1)
                     for i, shape in enumerate(check_shapes(kernel))]
            failed = [r for r in these if not r["passed"]]
            progress(f"check {kernel} {dtype} {setting}: {len(these) - len(failed)}/{len(these)} passed "
                     f"({time.perf_counter() - began:.1f} s)" + (f"; first failure: {_failure_text(failed[0])}"
                                                                 if failed else ""))
            rows += these
    return rows


def _failure_text(row: Mapping[str, Any]) -> str:
    if "error" in row:
        return row["error"]
    return (f"{row['M']}×{row['N']}×{row['K']}: relative error {row['relative_error']:.2e} (bound "
            f"{row['tolerance']:.2e}), {row['unwritten']} unwritten, {row.get('written_outside', 0)} written outside "
            "C, "
            f"{row.get('input_guards_changed', 0)} input guards changed")


def _hopper_here() -> bool:
    from gemm_course import device

    return device.real_compute_capability() == 90


def _passed(checks: Sequence[Mapping[str, Any]], kernel: str, setting: Mapping[str, Any], dtype: str) -> bool:
    mine = [r for r in checks if r["kernel"] == kernel and r["setting"] == dict(setting) and r["dtype"] == dtype]
    return bool(mine) and all(r["passed"] for r in mine)


def _shape_runs(kernel: str, setting: Mapping[str, Any], shape: tuple[int, int, int]) -> Optional[str]:
    """Why a contender cannot run at a shape here (None: it can)."""
    from gemm_course import device
    from gemm_course.dsl.triton_gemm import tma_shape_problems
    from gemm_course.levels import get_level

    M, N, K = shape
    if kernel in ("triton_hopper", "gluon"):
        if not _hopper_here():
            return "needs a Hopper GPU (sm_90)"
        problems = tma_shape_problems(M, N, K)
        return problems[0][0] if problems else None
    if kernel in ("triton_tiled", "cublas"):
        return None
    lv = get_level(kernel)
    params = lv.resolve_here(**setting)
    if not lv.setting_runs_on(device.real_compute_capability(), params):
        return f"needs {lv.needs}"
    problems = lv.shape_rules(M, N, K, params)
    return problems[0][0] if problems else None


def time_shape(shape: tuple[int, int, int], dtype: str, checks: Sequence[Mapping[str, Any]], result: dict[str, Any],
               write: Callable[[], None], progress: Callable[[str], None] = print) -> None:
    """Step 2 at one shape and input type: cuBLAS, then each contender beside a paired cuBLAS timing."""
    import cupy

    from gemm_course.measure.bench import time_gpu
    from gemm_course.models import gemm_flops
    from gemm_course.run.check import random_operands, relative_error, tolerance
    from gemm_course.run.dtypes import fill_nan, storage_dtype, to_float64

    M, N, K = shape
    flops = gemm_flops(M, N, K)
    rows = result[RECORDS_KEY]
    A, B = random_operands(M, N, K, dtype, seed=7, xp=cupy)
    reference = to_float64(A) @ to_float64(B)
    outputs = {c: cupy.empty((M, N), dtype=storage_dtype(c)) for c in {dtype, "float32"}}
    base = {"dtype": dtype, "M": M, "N": N, "K": K}

    try:
        blas = time_gpu(prepared_launch("cublas", {}, A, B, outputs[dtype]), **TIMING)
        rows.append({**base, "kernel": "cublas", "setting": {}, "c_type": dtype, **asdict(blas),
                     "tflops": flops / (blas.median_ms * 1e-3) / 1e12, "ratio_to_cublas": 1.0,
                     "relative_error": relative_error(outputs[dtype], reference)})
        progress(f"{M}×{N}×{K} {dtype} cuBLAS: {blas.median_ms:.3f} ms, {rows[-1]['tflops']:.1f} TFLOPS")
    except Exception as err:
        rows.append({**base, "kernel": "cublas", "setting": {}, "error": _one_line(err)})
        progress(f"{M}×{N}×{K} {dtype} cuBLAS failed: {_one_line(err)}; this shape is skipped")
        return
    write()
    for kernel, setting in contenders(dtype):
        c_type = c_type_of(kernel, setting, dtype)
        row: dict[str, Any] = {**base, "kernel": kernel, "setting": dict(setting), "c_type": c_type}
        why_not = _shape_runs(kernel, setting, shape)
        if why_not is None and kernel in DSL_KERNELS and not _passed(checks, kernel, setting, dtype):
            why_not = "failed its checks (see dsl_checks)"
        if why_not is not None:
            rows.append({**row, "skipped": why_not})
            progress(f"{M}×{N}×{K} {dtype} {kernel} {setting}: skipped, {why_not}")
            write()
            continue
        try:
            C = fill_nan(outputs[c_type], c_type)
            launch = prepared_launch(kernel, setting, A, B, C)
            facts = _compiled_facts(launch())
            err = relative_error(C, reference)
            bound = tolerance(dtype, K, c_type)
            row.update(relative_error=err, tolerance=bound, **facts)
            if not err <= bound:  # NaN (an unwritten element) fails too
                row["error"] = f"wrong result: relative error {err:.2e} > {bound:.2e}; not timed"
            else:
                paired = time_gpu(prepared_launch("cublas", {}, A, B, outputs[dtype]), **TIMING)
                t = time_gpu(launch, **TIMING)
                row.update(**asdict(t), tflops=flops / (t.median_ms * 1e-3) / 1e12,
                           ratio_to_cublas=paired.median_ms / t.median_ms, cublas_paired_ms=paired.median_ms,
                           cublas_paired_sm_clock_mhz=paired.sm_clock_mhz)
        except Exception as err:
            row["error"] = _one_line(err)
        rows.append(row)
        progress(f"{M}×{N}×{K} {dtype} {kernel} {setting}: " + (
            row["error"] if "error" in row else
            f"{row['median_ms']:.3f} ms, {row['tflops']:.1f} TFLOPS, {row['ratio_to_cublas']:.1%} of cuBLAS"
            + (f", {row['sm_clock_mhz']:.0f} MHz" if row.get("sm_clock_mhz") else "")))
        write()


def _provenance(method: str) -> dict[str, Any]:
    """bench.provenance (GPU, clocks, driver, CUDA, CuPy, date, command) plus Triton's version, torch's if it is
    installed (read from its metadata, not imported), and the stream check of tensors.launch_stream."""
    import importlib.metadata

    import triton

    from gemm_course.dsl.tensors import launch_stream
    from gemm_course.measure.bench import provenance

    prov = provenance(method)
    try:
        torch_version: Optional[str] = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = None
    prov.update(triton=triton.__version__, torch_installed=torch_version, launch_stream=launch_stream())
    return prov


def record_dsl(out: str | Path, shapes: Optional[Sequence[tuple[int, int, int]]] = None, check_only: bool = False,
               progress: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole run (the module's docstring): checks, then (unless check_only) timings; the file at `out`."""
    import os

    import cupy

    from gemm_course import device
    from gemm_course.dsl.tensors import launch_stream, require_triton, use_cupy_driver
    from gemm_course.measure.bench import SETTLE_S, _write_json

    require_triton("python -m gemm_course dsl --record")
    device.require_gpu("recording Level 14")
    if os.environ.get("CUPY_TF32", "0") != "0":
        raise RuntimeError("CUPY_TF32 is set: cuBLAS would use TF32 and not be an fp32 baseline; unset it / "
                           "设置了 CUPY_TF32：cuBLAS 会使用 TF32，不再是 fp32 基准；请取消该环境变量")
    shapes = [tuple(s) for s in (shapes or DEFAULT_SHAPES)]
    path = Path(out)
    began = time.perf_counter()
    use_cupy_driver()
    stream = launch_stream()
    if not stream["same"]:  # the events of time_gpu would not bracket the launches they time
        raise RuntimeError(f"Triton launches on stream {stream['triton_stream']:#x} but CuPy's current stream is "
                           f"{stream['cupy_stream']:#x} / Triton 在流 {stream['triton_stream']:#x} 上启动，而 CuPy 的"
                           f"当前流是 {stream['cupy_stream']:#x}")
    checks_method = "checks only: " + METHOD.split(" Timing:")[0]
    method = checks_method if check_only else METHOD.format(settle_s=SETTLE_S, **TIMING)
    result: dict[str, Any] = {"schema": 1, "provenance": _provenance(method), "records": [], CHECKS_KEY: [],
                              RECORDS_KEY: [], "shapes": [list(s) for s in shapes]}

    def write() -> None:
        _write_json(path, result)

    try:
        result[CHECKS_KEY] = run_checks(progress)
        write()
        progress(f"checks: {len(result[CHECKS_KEY])} run, {sum(not r['passed'] for r in result[CHECKS_KEY])} failed "
                 f"({time.perf_counter() - began:.0f} s so far)")
        if not check_only:
            for shape in shapes:
                for dtype in ("float32", "bfloat16"):
                    time_shape(shape, dtype, result[CHECKS_KEY], result, write, progress)
                    cupy.get_default_memory_pool().free_all_blocks()  # this shape's matrices, before the next's
    except KeyboardInterrupt:
        progress(f"interrupted: keeping the {len(result[RECORDS_KEY])} rows measured so far")
        result["interrupted"] = True
    result["seconds"] = round(time.perf_counter() - began, 1)
    write()
    for line in table(result):
        progress(line)
    progress(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


def read_record(path: str | Path) -> list[dict[str, Any]]:
    """A Level 14 record as flat rows, one per kernel, setting and shape (cuBLAS included): kernel, setting, dtype,
    c_type, M, N, K, status ("timed", "skipped", "failed"), ms, tflops, ratio_to_cublas, sm_clock_mhz,
    cublas_paired_ms, why (for a row not timed), with the file's GPU, date and name. Reads any file written by
    record_dsl, a check-only one (no timing rows) or an interrupted one."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("schema") != 1 or "provenance" not in data or RECORDS_KEY not in data:
        raise ValueError(f"{path} is not a Level 14 record (schema 1 with provenance and {RECORDS_KEY}) / "
                         f"{path} 不是第 14 级的实测记录（schema 1，含 provenance 与 {RECORDS_KEY}）")
    prov = data["provenance"]
    rows = []
    for r in data[RECORDS_KEY]:
        status = "timed" if "median_ms" in r else ("skipped" if "skipped" in r else "failed")
        rows.append({"kernel": r["kernel"], "setting": dict(r.get("setting", {})), "dtype": r["dtype"],
                     "c_type": r.get("c_type", r["dtype"]), "M": r["M"], "N": r["N"], "K": r["K"], "status": status,
                     "ms": r.get("median_ms"), "tflops": r.get("tflops"), "ratio_to_cublas": r.get("ratio_to_cublas"),
                     "sm_clock_mhz": r.get("sm_clock_mhz"), "cublas_paired_ms": r.get("cublas_paired_ms"),
                     "why": r.get("skipped", r.get("error")), "gpu": prov.get("gpu"),
                     "date": str(prov.get("date", ""))[:10], "file": path.name})
    return rows


def read_checks(path: str | Path) -> list[dict[str, Any]]:
    """The check rows of a Level 14 record (kernel, setting, dtype, shape, error, bound, unwritten, passed)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [dict(r) for r in data.get(CHECKS_KEY, [])]


def _setting_text(setting: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in setting.items()) or "defaults"


def table(result: Mapping[str, Any]) -> list[str]:
    """The short table the run prints at its end: per shape and input type, each timed row's TFLOPS, its ratio to
    cuBLAS and its clock; a row not timed says why."""
    lines = [f"{'shape':<17} {'dtype':<9} {'kernel':<16} {'setting':<60} {'TFLOPS':>7} {'vs cuBLAS':>9} {'MHz':>5}"]
    for r in result.get(RECORDS_KEY, []):
        shape = f"{r['M']}×{r['N']}×{r['K']}"
        head = f"{shape:<17} {r['dtype']:<9} {r['kernel']:<16} {_setting_text(r.get('setting', {}))[:60]:<60}"
        if "median_ms" in r:
            clock = f"{r['sm_clock_mhz']:.0f}" if r.get("sm_clock_mhz") else "—"
            lines.append(f"{head} {r['tflops']:7.1f} {r['ratio_to_cublas']:9.1%} {clock:>5}")
        else:
            lines.append(f"{head} {'—':>7} {'':>9} {'':>5}  {r.get('skipped', r.get('error', ''))[:80]}")
    checks = result.get(CHECKS_KEY, [])
    failed = [r for r in checks if not r["passed"]]
    lines.append(f"checks: {len(checks)} run, {len(failed)} failed" + "".join(
        f"\n  FAILED {r['kernel']} {r['dtype']} {_setting_text(r.get('setting', {}))}: {_failure_text(r)}"
        for r in failed[:10]))
    return lines

