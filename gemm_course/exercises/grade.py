"""The one grader: the answer is run (for a kernel: on the CPU backend on graded shapes, race detector
on), then the checks the lesson is about. A verdict is a list of steps, each passed, failed, or not
verified here, with a message the learner can act on, in English and Chinese with the same detail.

How an answer is run is the exercise's runner (RUNNERS; "level_kernel" launches it as the level's
kernel); each check of exercise.json names its type in CHECKS. Both tables hold "module:function"
paths inside gemm_course.exercises, imported when first used, so a topic's grading lives beside it.

    runner(attempt) -> list[Step]            the steps that run the answer (compile, correct, ...)
    check(attempt, check_dict) -> Step | list[Step]

A verdict's status: "solved" (every step passed), "failed" (a step failed), "not_verified" (none
failed, but a step could not run here, e.g. a Tensor Core kernel's result without a GPU). The command
line exits 0, 1 and 3 for them."""
from __future__ import annotations

import importlib
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import device
from ..levels import get_level

# Small odd shapes: every edge case of a tiled kernel (a single element, fewer rows than a tile,
# one more than a tile, non-multiples of every tile size) at sizes the CPU runs in seconds.
GRADE_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (7, 13, 5), (33, 65, 17), (70, 40, 100), (129, 127, 131))
TENSOR_CORE_SHAPES: tuple[tuple[int, int, int], ...] = ((64, 64, 64), (128, 200, 72), (256, 256, 256))
GPU_TIMEOUT_S = 120
TIMING_SIZE = 2048  # big enough to fill an H200 with any level's tiles, small enough to time in seconds

EXIT_CODES = {"solved": 0, "failed": 1, "not_verified": 3}
"""The command line's exit code per verdict status (2 is a usage error)."""


@dataclass(frozen=True)
class Step:
    name: str          # "compile", "correct", "race", "sectors", "wavefronts", "sass", "registers", "gpu", ...
    passed: Optional[bool]   # None: could not be checked here
    en: str
    zh: str


@dataclass
class Attempt:
    """One grading: the exercise, the learner's answer, the name its messages use, and the seed of the
    random shape and inputs (printed in the verdict, so that a failure can be reproduced)."""
    exercise: Any
    source: str
    file_name: str = "my_kernel.cu"
    seed: int = 0
    cache: dict = field(default_factory=dict)  # what several checks share (e.g. the access profiles)

    @property
    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)


@dataclass
class Verdict:
    exercise: str
    steps: list[Step] = field(default_factory=list)
    seed: Optional[int] = None

    @property
    def status(self) -> str:
        """"solved", "failed" or "not_verified" (no step failed, but one could not be checked here)."""
        if not self.steps or any(s.passed is False for s in self.steps):
            return "failed"
        return "not_verified" if any(s.passed is None for s in self.steps) else "solved"

    @property
    def passed(self) -> bool:
        return self.status == "solved"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def failed_step(self) -> Optional[str]:
        return next((s.name for s in self.steps if s.passed is False), None)

    def lines(self, lang: str = "en") -> list[str]:
        mark = {True: "✓", False: "✗", None: "–"}
        unchecked = [s.name for s in self.steps if s.passed is None]
        status = self.status
        if lang == "en":
            head = {"solved": "PASS", "failed": "FAIL", "not_verified": "COMPILED — not verified without a GPU"
                    if "gpu" in unchecked else "NOT VERIFIED here"}[status] + f" {self.exercise}"
            if status == "not_verified":
                head += f" (not checked here: {', '.join(unchecked)})"
            if self.seed is not None:
                head += f" · seed {self.seed}"
        else:
            head = {"solved": "通过", "failed": "未通过", "not_verified": "已编译——没有 GPU，无法验证"
                    if "gpu" in unchecked else "这里无法验证"}[status] + f" {self.exercise}"
            if status == "not_verified":
                head += f"（这里未检查：{', '.join(unchecked)}）"
            if self.seed is not None:
                head += f" · 随机种子 {self.seed}"
        return [head] + [f"  {mark[s.passed]} {s.name}: {s.en if lang == 'en' else s.zh}" for s in self.steps]

    def __str__(self) -> str:
        return "\n".join(self.lines("en") + [""] + self.lines("zh"))


def _resolve(path: str) -> Callable:
    """'module:function' inside gemm_course.exercises → the function."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


RUNNERS: dict[str, str] = {
    "level_kernel": "grade:run_level_kernel",        # a SIMT level's kernel, on the CPU backend
    "tensor_core": "grade:run_tensor_core_kernel",   # a Tensor Core level's kernel: GPU build, GPU run where one is
    "prediction": "predict:run",                     # numbers the learner predicts, measured by the checks
    "cuda_basics": "chapters:run_cuda_basics",       # Level 0: a kernel launched like primer.run_kernel
    "multi_gpu": "chapters:run_multi_gpu",           # Level 12
    "fp8": "chapters:run_fp8",                       # Level 13
}

CHECKS: dict[str, str] = {
    "sectors": "lesson_checks:profile_check",
    "wavefronts": "lesson_checks:profile_check",
    "sass": "grade:sass_check",
    "registers": "grade:registers_check",
    "reuse": "lesson_checks:reuse_check",
    "barriers": "lesson_checks:barriers_check",
    "prefetch": "lesson_checks:prefetch_check",
    "transposed": "lesson_checks:transposed_check",
    "block_order": "lesson_checks:block_order_check",
    "index_math": "index_math:check",                # Tensor Core index math, run on the CPU
    "predict": "predict:check",
}


def _first_lines(text: str, n: int = 8) -> str:
    """The compiler's first error lines (the rest is usually a consequence)."""
    keep = [line for line in text.splitlines() if "error" in line or "note" in line or line.startswith(" ")]
    return "\n".join((keep or text.splitlines())[:n])


def _worst(C: np.ndarray, reference: np.ndarray) -> tuple[tuple[int, ...], float, float]:
    diff = np.where(np.isnan(C), np.inf, np.abs(C.astype(np.float64) - reference))
    index = np.unravel_index(int(np.argmax(diff)), C.shape)
    return tuple(int(i) for i in index), float(C[index]), float(reference[index])


def tile_shape(lv: Any, resolved: dict[str, Any]) -> tuple[int, int, int]:
    """(rows of C, columns of C, depth in k) one block of a SIMT setting works on per step."""
    if "BM" in resolved:
        return resolved["BM"], resolved["BN"], resolved["BK"]
    if "tile" in resolved:
        return (resolved["tile"],) * 3
    bx, by = resolved["block_x"], resolved["block_y"]  # Level 1: no k-tile
    return (by, bx, 1) if resolved["mapping"] == "cols" else (bx, by, 1)


MAX_SHAPE_WORK = 1 << 22  # multiply-adds per graded shape: about 0.2 s on the CPU backend


def graded_shapes(lv: Any, resolved: dict[str, Any], rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """The shapes a SIMT kernel is graded on: the fixed odd ones (GRADE_SHAPES), one tile exactly, tile
    multiples with several block rows and columns and K a multiple of the k-tile, a partial last tile in
    every dimension, a multi-block shape that takes the vector path (K and N multiples of its width), a
    second block group for a grouped block order, and one random shape (from rng: the attempt's seed)."""
    tm, tn, tk = tile_shape(lv, resolved)
    shapes = list(GRADE_SHAPES) + [(tm, tn, tk), (2 * tm, 3 * tn, 2 * tk), (3 * tm - 1, 2 * tn + 1, 2 * tk + 3)]
    if lv.vector_width:
        w = lv.vector_width
        shapes.append((2 * tm + 3, 2 * tn + w, 3 * tk + w))
    group = resolved.get("group_m", 1)
    if group > 1:
        shapes.append(((group + 1) * tm + 3, 2 * tn + 1, tk + 1))
    shapes.append((int(rng.integers(1, 3 * tm + 2)), int(rng.integers(1, 3 * tn + 2)), int(rng.integers(1, 4 * tk + 24))))
    fitted = []
    for M, N, K in shapes:  # keep the CPU run short: shrink K first, never below two k-tiles
        while M * N * K > MAX_SHAPE_WORK and K > 2 * tk + 1:
            K = max(2 * tk + 1, K // 2)
        if (M, N, K) not in fitted:
            fitted.append((M, N, K))
    return fitted


def _settings(ex: Any) -> list[dict[str, Any]]:
    """The settings an exercise is graded in: its params, then each of exercise.json's "also" settings (for a
    kernel with switches, e.g. an epilogue's activation, bias and accumulate, each seen on and off)."""
    also = (ex.data or {}).get("also", [])
    return [dict(ex.params)] + [dict(ex.params) | dict(extra) for extra in also]


def _describe_setting(params: dict[str, Any], base: dict[str, Any]) -> str:
    changed = {k: v for k, v in params.items() if base.get(k) != v}
    return "" if not changed else " (" + ", ".join(f"{k}={v}" for k, v in changed.items()) + ")"


def _correct_on_cpu(ex: Any, source: str, shapes: Sequence[tuple[int, int, int]], file_name: str = "my_kernel.cu",
                    params: Optional[dict[str, Any]] = None, seed: int = 0) -> list[Step]:
    """Run the answer as the level's kernel on every shape; the first failure ends the run. Inputs are
    U[-1, 1] from the seed, C starts as NaN (an element never written shows), an epilogue setting gets a
    random bias, alpha and beta."""
    from gemm_course.run import cpu_backend as cb
    from gemm_course.run.check import epilogue_inputs, random_operands, relative_error, tolerance
    from gemm_course.run.launch import gemm

    lv = get_level(ex.level)
    params = dict(ex.params) if params is None else params
    resolved = lv.resolve(**params)
    setting = _describe_setting(params, dict(ex.params))
    for n, (M, N, K) in enumerate(shapes):
        A, B = random_operands(M, N, K, "float32", seed=seed * 31 + n, xp=np)
        C = np.full((M, N), np.nan, dtype=np.float32)
        reference = A.astype(np.float64) @ B.astype(np.float64)
        run: dict[str, Any] = dict(params)
        terms = 0.0  # an epilogue's result may cancel (alpha·A·B + bias ≈ 0): errors count against its terms' size
        if lv.epilogue:
            rng = np.random.default_rng(seed + n)
            alpha, beta = (float(np.float32(x)) for x in rng.uniform(0.25, 1.75, 2))
            product = reference
            extra, C_initial, reference = epilogue_inputs(resolved, reference, "float32", np, seed=seed + n,
                                                          alpha=alpha, beta=beta)
            run.update(extra)
            terms = alpha * float(np.linalg.norm(product))
            if extra["bias"] is not False:
                terms += float(np.linalg.norm(np.broadcast_to(extra["bias"].astype(np.float64), (M, N))))
            if C_initial is not None:
                terms += beta * float(np.linalg.norm(C_initial.astype(np.float64)))
                C = C_initial
        shape = f"{M}×{N}×{K}{setting}"
        try:
            gemm(A, B, lv, out=C, source=source, backend="cpu", source_name=file_name, **run)
        except cb.CpuCompileError as err:
            detail = _first_lines(err.log or str(err))
            return [Step("compile", False, f"your kernel does not compile:\n{detail}", f"你的内核无法编译：\n{detail}")]
        except cb.CpuBackendError as err:  # a race, a barrier, a bad access, ...: each language from its half
            kind = type(err).__name__.replace("Kernel", "").replace("Error", "").lower() or "run"
            return [Step("compile", True, "compiles", "可以编译"),
                    Step(kind, False, f"at {shape}: {err.en}", f"{shape} 时内核出错：{err.zh}")]
        err = relative_error(C, reference)
        if terms and np.isfinite(err):
            err = min(err, float(np.linalg.norm(C.astype(np.float64) - reference)) / terms)
        bound = tolerance("float32", K)
        if not err <= bound:
            (i, j), got, want = _worst(C, reference)
            unwritten = int(np.isnan(C).sum())
            note = (f"; {unwritten} of the {M * N} elements are NaN: never written (C starts as NaN), or computed from "
                    "shared memory nobody wrote (it starts as NaN on the CPU backend)" if unwritten else "")
            note_zh = (f"；{M * N} 个元素中有 {unwritten} 个为 NaN：要么从未被写入（C 的初值是 NaN），要么是用没有任何线程写过的"
                       "共享内存算出来的（CPU 后端中共享内存初值为 NaN）" if unwritten else "")
            return [Step("compile", True, "compiles", "可以编译"),
                    Step("correct", False,
                         f"wrong at {shape}: relative error {err:.2e} (bound {bound:.1e}); worst element "
                         f"C[{i}, {j}] = {got:.6g}, expected {want:.6g}{note}",
                         f"{shape} 时结果错误：相对误差 {err:.2e}（上限 {bound:.1e}）；误差最大的元素 "
                         f"C[{i}, {j}] = {got:.6g}，应为 {want:.6g}{note_zh}")]
    shown = ", ".join(f"{M}×{N}×{K}" for M, N, K in shapes)
    return [Step("compile", True, "compiles", "可以编译"),
            Step("correct", True, f"right on {shown}{setting}, no shared-memory race, no out-of-bounds access",
                 f"在 {shown}{setting} 上结果正确，没有共享内存竞争，没有越界访问")]


def sass_check(attempt: Attempt, check: dict) -> Step:
    from gemm_course.inspect.sass import disassemble, find_disassembler, instruction_mix

    ex, source = attempt.exercise, attempt.source

    if find_disassembler() is None:
        return Step("sass", None, "no disassembler here (pip install nvidia-cuda-nvdisasm): not checked",
                    "这里没有反汇编器（pip install nvidia-cuda-nvdisasm）：未检查")
    arch = get_level(ex.level).build_arch or check.get("arch", "sm_90")  # what disassemble() builds
    mix = instruction_mix(disassemble(ex.level, arch=arch, source=source, **ex.params))

    def count(prefix: str) -> int:
        return sum(n for op, n in mix.items() if op == prefix or op.startswith(prefix + "."))

    for op, least in check.get("require", {}).items():
        if count(op) < least:
            return Step("sass", False, f"the {arch} build has {count(op)} {op} instructions; the lesson needs at least {least}",
                        f"{arch} 编译结果中 {op} 指令有 {count(op)} 条；本练习要求至少 {least} 条")
    def count_32bit(prefix: str) -> int:  # the scalar form only: no .64 / .128 (or byte / half) width suffix
        widths = {"64", "128", "U8", "S8", "U16", "S16"}
        return sum(n for op, n in mix.items()
                   if (op == prefix or op.startswith(prefix + ".")) and not widths & set(op[len(prefix):].split(".")))

    def cp_async_form(op: str) -> Optional[str]:
        """A global load's cp.async form (LDG.E → LDGSTS.E): its 4-byte copies move one float per instruction
        as the scalar loads do, only into shared memory instead of a register, so they count with them."""
        return "LDGSTS" + op[len("LDG"):] if op == "LDG" or op.startswith("LDG.") else None

    def count_narrow(op: str) -> int:
        copies = cp_async_form(op)
        return count_32bit(op) + (count_32bit(copies) if copies else 0)

    for op, most in check.get("max_32bit", {}).items():
        if count_narrow(op) > most:
            copies = cp_async_form(op)
            also_en = f" (4-byte cp.async copies, {copies}, included: {count_32bit(copies)})" if copies else ""
            also_zh = f"（包括 4 字节的 cp.async 复制 {copies}：{count_32bit(copies)} 条）" if copies else ""
            return Step("sass", False, f"the {arch} build still has {count_narrow(op)} 32-bit {op} instructions{also_en} "
                        f"(at most {most} allowed): some loads the lesson vectorises are still done one float at a time",
                        f"{arch} 编译结果中仍有 {count_narrow(op)} 条 32 位的 {op} 指令{also_zh}（最多允许 {most} 条）：本练习要"
                        "向量化的读取中，仍有一些是逐个 float 进行的")
    for op, most in check.get("at_most", {}).items():  # what the lesson's instruction replaces
        if count(op) > most:
            return Step("sass", False, f"the {arch} build has {count(op)} {op} instructions; the lesson leaves at most {most}",
                        f"{arch} 编译结果中 {op} 指令有 {count(op)} 条；本练习最多允许 {most} 条")
    for op in check.get("forbid", []):
        if count(op) > 0:
            return Step("sass", False, f"the {arch} build has {count(op)} {op} instructions; there should be none",
                        f"{arch} 编译结果中有 {count(op)} 条 {op} 指令；应当一条也没有")
    wanted = ", ".join([f"{op} ≥ {n}" for op, n in check.get("require", {}).items()]
                       + [f"32-bit {op} ≤ {n}" for op, n in check.get("max_32bit", {}).items()]
                       + [f"{op} ≤ {n}" for op, n in check.get("at_most", {}).items()]
                       + [f"no {op}" for op in check.get("forbid", [])])
    wanted_zh = "，".join([f"{op} ≥ {n}" for op, n in check.get("require", {}).items()]
                         + [f"32 位 {op} ≤ {n}" for op, n in check.get("max_32bit", {}).items()]
                         + [f"{op} ≤ {n}" for op, n in check.get("at_most", {}).items()]
                         + [f"没有 {op}" for op in check.get("forbid", [])])
    return Step("sass", True, f"{arch} instruction mix: {wanted}", f"{arch} 指令构成符合要求：{wanted_zh}")


def registers_check(attempt: Attempt, check: dict) -> Step:
    from gemm_course.run.compile import compile_report

    ex, source = attempt.exercise, attempt.source

    lv = get_level(ex.level)
    report = compile_report(lv, arch=lv.build_arch or check.get("arch", "sm_90"), source=source, **ex.params)
    spills = report.spill_store_bytes + report.spill_load_bytes
    if check.get("no_spill") and (spills or report.stack_bytes):
        return Step("registers", False,
                    f"{report.registers} registers, {report.stack_bytes} B stack frame, {spills} B spilled: an array "
                    "went to local memory (indexed with a value the compiler cannot know?)",
                    f"{report.registers} 个寄存器，栈帧 {report.stack_bytes} B，溢出 {spills} B：有数组被放进了局部内存"
                    "（是否用编译器无法确定的值做了下标？）")
    if "max" in check and report.registers > check["max"]:
        return Step("registers", False, f"{report.registers} registers per thread; at most {check['max']} allowed",
                    f"每线程 {report.registers} 个寄存器；最多允许 {check['max']} 个")
    return Step("registers", True, f"{report.registers} registers, no local memory",
                f"{report.registers} 个寄存器，没有使用局部内存")


def _compile_for_gpu(ex: Any, source: str) -> Step:
    from gemm_course.run.compile import compile_report

    lv = get_level(ex.level)
    try:
        report = compile_report(lv, arch=lv.build_arch or "sm_90", source=source, **ex.params)
    except Exception as err:  # NVRTC's log, which names the learner's lines
        detail = _first_lines(str(err))
        return Step("compile", False, f"your kernel does not compile for the GPU:\n{detail}",
                    f"你的内核无法为 GPU 编译：\n{detail}")
    return Step("compile", True, f"compiles for {report.arch} ({report.registers} registers)",
                f"可以为 {report.arch} 编译（{report.registers} 个寄存器）")


def _gpu_run(ex: Any, source: str) -> list[Step]:
    """On a GPU that runs the level: the learner's kernel checked on odd shapes, then timed against the
    level's own kernel and cuBLAS. In a child process with a time limit: a kernel that waits on a barrier
    nobody arrives at hangs its GPU context, and must not take the notebook's process with it."""
    lv = get_level(ex.level)
    if not device.gpu_available() or not lv.setting_runs_on(device.compute_capability(), lv.resolve(**ex.params)):
        if not lv.uses_tensor_cores:
            return []  # the CPU run above is the check; a GPU would only add a timing
        return [Step("gpu", None, "no GPU here that runs this level: correctness is checked on a GPU only",
                     "这里没有能运行这一级的 GPU：正确性只能在 GPU 上检查")]
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        spec = f"{tmp}/spec.json"
        with open(spec, "w", encoding="utf-8") as f:
            json.dump({"level": lv.id, "params": dict(ex.params), "source": source}, f)
        try:
            done = subprocess.run([sys.executable, "-m", "gemm_course.exercises.grade", spec],
                                  capture_output=True, text=True, timeout=GPU_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return [Step("gpu", False, f"the kernel did not finish within {GPU_TIMEOUT_S} s on the GPU: a wait on an "
                         "mbarrier or barrier that never completes (a missing arrive, a wrong phase)?",
                         f"内核在 GPU 上 {GPU_TIMEOUT_S} 秒内没有结束：是否在等待一个永远不会完成的 mbarrier 或屏障"
                         "（少了 arrive，或相位不对）？")]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    checks = [r["check"] for r in rows if "check" in r]
    if done.returncode != 0 or not checks:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [Step("gpu", False, f"the GPU run failed: {tail}", f"GPU 运行失败：{tail}")]
    for passed, text in checks:
        if not passed:
            return [Step("gpu", False, f"wrong on the GPU: {text}", f"在 GPU 上结果错误：{text}")]
    steps = [Step("gpu", True, f"right on the GPU ({len(checks)} shapes)", f"在 GPU 上结果正确（{len(checks)} 个形状）")]
    timing = next((r["timing"] for r in rows if "timing" in r), None)
    if timing:
        n, gpu = timing["n"], timing["gpu"]
        tf = {k: 2 * n**3 / (timing[k] * 1e-3) / 1e12 for k in ("yours_ms", "level_ms", "cublas_ms")}
        steps.append(Step("speed", True,
                          f"{gpu}, {n}³ (median, L2 flushed): yours {tf['yours_ms']:.2f} TFLOPS, the level's kernel "
                          f"{tf['level_ms']:.2f}, cuBLAS {tf['cublas_ms']:.2f} ({tf['yours_ms'] / tf['cublas_ms']:.0%} of cuBLAS)",
                          f"{gpu}，{n}³（中位数，已清空 L2）：你的内核 {tf['yours_ms']:.2f} TFLOPS，本级内核 "
                          f"{tf['level_ms']:.2f}，cuBLAS {tf['cublas_ms']:.2f}（为 cuBLAS 的 {tf['yours_ms'] / tf['cublas_ms']:.0%}）"))
    return steps


def _gpu_child(spec_path: str) -> None:
    """The child process of _gpu_run: print one JSON line per checked shape, then one with the timings."""
    import json

    import cupy

    from gemm_course.measure.bench import cublas_gemm, time_gpu
    from gemm_course.run.check import check, epilogue_inputs, random_operands
    from gemm_course.run.dtypes import storage_dtype, to_float64
    from gemm_course.run.launch import gemm

    spec = json.loads(open(spec_path, encoding="utf-8").read())
    lv = get_level(spec["level"])
    params, source = spec["params"], spec["source"]
    shapes = TENSOR_CORE_SHAPES if lv.uses_tensor_cores else GRADE_SHAPES
    resolved = lv.resolve(**params)
    for M, N, K in shapes:
        if lv.shape_rules(M, N, K, resolved):  # a precondition of this setting (e.g. K a multiple of 16)
            continue
        r = check(lv, M, N, K, source=source, backend="cuda", **params)
        print(json.dumps({"check": [r.passed, str(r)]}), flush=True)
        if not r.passed:
            return
    n = TIMING_SIZE
    dtype = lv.dtypes[0]
    A, B = random_operands(n, n, n, dtype)
    C = cupy.empty((n, n), dtype=lv.out_dtype or storage_dtype(dtype))
    run = dict(params)
    if lv.epilogue:
        extra, C_initial, _ = epilogue_inputs(lv.resolve(**params), to_float64(A[:1]) @ to_float64(B), dtype, cupy)
        run.update(extra)
    timing = {"n": n, "gpu": device.gpu_name(),
              "yours_ms": time_gpu(lambda: gemm(A, B, lv, out=C, source=source, **run)).median_ms,
              "level_ms": time_gpu(lambda: gemm(A, B, lv, out=C, **run)).median_ms}
    C_blas = cupy.empty((n, n), dtype=storage_dtype(dtype))
    timing["cublas_ms"] = time_gpu(lambda: cublas_gemm(A, B, C_blas)).median_ms
    print(json.dumps({"timing": timing}), flush=True)


def run_level_kernel(attempt: Attempt) -> list[Step]:
    """A SIMT level's kernel on the CPU backend: screened (source_problems), then run on the graded shapes
    (graded_shapes) in every setting the exercise names, the settings after the first on the last four."""
    ex = attempt.exercise
    lv = get_level(ex.level)
    problem = source_problems(attempt, lv.kernel_name(lv.resolve(**ex.params)))
    if problem:
        return [problem]
    steps: list[Step] = []
    for n, params in enumerate(_settings(ex)):
        shapes = graded_shapes(lv, lv.resolve(**params), attempt.rng)
        result = _correct_on_cpu(ex, attempt.source, shapes if n == 0 else shapes[-4:], attempt.file_name,
                                 params, attempt.seed)
        steps += result if n == 0 else result[1:]
        if any(step.passed is False for step in result):
            return steps if result[0].passed else result
    return steps


# --- what the source may not do ------------------------------------------------------------------
#
# The CPU run and the GPU build (SASS, registers) must grade one and the same kernel. So the grader
# refuses conditional compilation on anything the two compilers define differently, and includes of
# anything the starter does not include (the course's own level files would hand over the answer).

BUILD_MACROS = ("__CUDA_ARCH__", "__CUDACC__", "__CUDACC_RTC__", "__NVCC__", "__CUDA_ARCH_LIST__", "GEMM_COURSE_CPU",
                "__GNUC__", "__GNUG__", "__clang__", "__x86_64__", "__aarch64__", "__linux__", "__unix__",
                "__OPTIMIZE__", "__SANITIZE_THREAD__", "GC_CPU_RACE_CHECK", "GC_CPU_POISON_SHARED")


def _code_only(text: str, keep_strings: bool = False) -> str:
    """The source with comments (and, unless keep_strings, string and char literals) blanked; line breaks
    are kept, so line numbers still count."""
    import re

    def blank(m: "re.Match[str]") -> str:
        if keep_strings and m.group(0)[0] in "\"'":
            return m.group(0)
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text, flags=re.S)


def _includes(text: str) -> set[str]:
    import re

    return {m.group(1).strip() for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*(.*?)[ \t]*$', text, re.M)}


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def source_problems(attempt: Attempt, kernel_name: str) -> Optional[Step]:
    """The first reason the grader cannot grade this source, as a failed "source" step with one line
    saying what to change; None when there is none."""
    import re

    text, starter, name = attempt.source, attempt.exercise.starter, attempt.file_name
    kernel = kernel_name.split("<")[0].strip()

    def refuse(en: str, zh: str) -> Step:
        return Step("source", False, en, zh)

    if not text.strip():
        return refuse(f"{name} is empty: the grader expected the kernel {kernel} (start from the exercise's starter)",
                      f"{name} 是空的：评分器需要内核 {kernel}（请从练习给出的初始代码开始）")
    if "\0" in text or sum(not (c.isprintable() or c in "\t\n\r") for c in text) > len(text) // 100:
        return refuse(f"{name} is not text (it holds control bytes): the grader expected CUDA C source with the kernel {kernel}",
                      f"{name} 不是文本文件（含有控制字节）：评分器需要包含内核 {kernel} 的 CUDA C 源码")
    code = _code_only(text)
    allowed_includes = _includes(_code_only(starter, keep_strings=True))
    for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*(.*?)[ \t]*$', _code_only(text, keep_strings=True), re.M):
        wanted = m.group(1).strip()
        if wanted not in allowed_includes:
            line = _line_of(code, m.start())
            return refuse(f"{name}:{line}: #include {wanted} is not allowed here: write the kernel yourself, with the "
                          f"includes the starter has ({', '.join(sorted(allowed_includes)) or 'none'})",
                          f"{name}:{line}：这里不允许 #include {wanted}：请自己写出内核，只使用初始代码已有的 include"
                          f"（{'、'.join(sorted(allowed_includes)) or '无'}）")
    signatures = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", code)
    if not re.search(rf"__global__[^;{{}}]*?\b{re.escape(kernel)}\s*\(", signatures):
        found = sorted(set(re.findall(r"__global__[^;{}(]*?\b(\w+)\s*\(", signatures)))
        seen = f" (it defines {', '.join(found)})" if found else " (it defines no __global__ function)"
        seen_zh = f"（文件中定义的是 {'、'.join(found)}）" if found else "（文件中没有 __global__ 函数）"
        return refuse(f"{name} has no kernel named {kernel}{seen}: the grader launches {kernel_name}; keep the "
                      "starter's kernel name and template parameters",
                      f"{name} 中没有名为 {kernel} 的内核{seen_zh}：评分器启动的是 {kernel_name}；请保留初始代码中的内核名"
                      "和模板参数")
    starter_words = set(re.findall(r"\w+", _code_only(starter)))
    defined_here = set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", code, re.M))
    for m in re.finditer(r"\b(" + "|".join(map(re.escape, BUILD_MACROS)) + r")\b", code):
        if m.group(1) not in starter_words:
            line = _line_of(code, m.start())
            return refuse(f"{name}:{line}: {m.group(1)} tells the CPU run and the GPU build apart; the grader checks one "
                          "kernel in both, so write one version of the code, without it",
                          f"{name}:{line}：{m.group(1)} 会区分 CPU 运行与 GPU 编译；评分器要在两者中检查同一个内核，"
                          "请只写一份代码，不要用它")
    for m in re.finditer(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif)\b(.*)$", code, re.M):
        unknown = [w for w in re.findall(r"[A-Za-z_]\w*", m.group(2))
                   if w not in defined_here and w not in starter_words and w != "defined"]
        if unknown:
            line = _line_of(code, m.start())
            return refuse(f"{name}:{line}: #{m.group(1)} on {unknown[0]}, which this file does not #define: the CPU run "
                          "and the GPU build must compile the same code",
                          f"{name}:{line}：#{m.group(1)} 用到了 {unknown[0]}，而本文件并没有 #define 它：CPU 运行与 GPU "
                          "编译必须编译同一份代码")
    return None


def run_tensor_core_kernel(attempt: Attempt) -> list[Step]:
    """A Tensor Core level's kernel: its GPU build (NVRTC) here; its run comes last, on a GPU only."""
    return [_compile_for_gpu(attempt.exercise, attempt.source)]


def grade(exercise_id: str, source: Optional[str] = None, *, file_name: Optional[str] = None,
          seed: Optional[int] = None) -> Verdict:
    """Grade `source` (a whole kernel file's text, or the answer an exercise asks for; default: the
    exercise's starter) for an exercise. file_name: what messages call your file (default
    my_kernel.cu); seed: the random shape's and inputs' seed (default: a fresh one, printed)."""
    from . import get_exercise

    ex = get_exercise(exercise_id)
    source = ex.starter if source is None else source
    seed = random.SystemRandom().randrange(1, 10**6) if seed is None else int(seed)
    attempt = Attempt(ex, source, file_name or ("my_kernel.cu" if ex.answer_suffix == ".cu" else "my_answer.txt"), seed)
    verdict = Verdict(ex.id, seed=seed)
    verdict.steps += _resolve(RUNNERS[ex.runner])(attempt)
    if verdict.failed_step:
        return verdict  # the lesson's checks assume an answer that runs and is right
    for check in ex.checks:
        kind = check["type"]
        if kind not in CHECKS:
            raise ValueError(f"exercise {ex.id}: unknown check {kind!r}")
        result = _resolve(CHECKS[kind])(attempt, check)
        verdict.steps += result if isinstance(result, list) else [result]
        if verdict.failed_step:
            return verdict
    if ex.runner in ("level_kernel", "tensor_core"):
        verdict.steps += _gpu_run(ex, source)
    return verdict


if __name__ == "__main__":  # the child process of _gpu_run
    import sys

    _gpu_child(sys.argv[1])
