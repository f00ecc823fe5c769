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
PROFILE_SHAPE = (64, 64, 64)
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
    "sectors": "grade:profile_check",
    "wavefronts": "grade:profile_check",
    "sass": "grade:sass_check",
    "registers": "grade:registers_check",
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


def _correct_on_cpu(ex: Any, source: str, shapes: Sequence[tuple[int, int, int]],
                    file_name: str = "my_kernel.cu") -> list[Step]:
    from .. import cpu_backend as cb
    from ..check import epilogue_inputs, random_operands, relative_error, tolerance
    from ..launch import gemm

    lv = get_level(ex.level)
    resolved = lv.resolve(**ex.params)
    for M, N, K in shapes:
        A, B = random_operands(M, N, K, "float32", seed=M * 7 + N * 13 + K, xp=np)
        C = np.full((M, N), np.nan, dtype=np.float32)
        reference = A.astype(np.float64) @ B.astype(np.float64)
        run: dict[str, Any] = dict(ex.params)
        if lv.epilogue:
            extra, C_initial, reference = epilogue_inputs(resolved, reference, "float32", np, seed=M)
            run.update(extra)
            if C_initial is not None:
                C = C_initial
        try:
            gemm(A, B, lv, out=C, source=source, backend="cpu", source_name=file_name, **run)
        except cb.CpuCompileError as err:
            detail = _first_lines(err.log or str(err))
            return [Step("compile", False, f"your kernel does not compile:\n{detail}",
                         f"你的内核无法编译：\n{detail}")]
        except cb.CpuBackendError as err:  # a race, a barrier, a bad access, ...: each language from its half
            kind = type(err).__name__.replace("Kernel", "").replace("Error", "").lower() or "run"
            return [Step("compile", True, "compiles", "可以编译"),
                    Step(kind, False, f"at {M}×{N}×{K}: {err.en}", f"{M}×{N}×{K} 时内核出错：{err.zh}")]
        err = relative_error(C, reference)
        bound = tolerance("float32", K)
        if not err <= bound:
            (i, j), got, want = _worst(C, reference)
            unwritten = int(np.isnan(C).sum())
            note = (f"; {unwritten} elements are NaN: never written, or computed from shared memory nobody wrote "
                    "(it starts as NaN on the CPU backend)" if unwritten else "")
            note_zh = (f"；有 {unwritten} 个元素为 NaN：要么从未被写入，要么是用没有任何线程写过的共享内存算出来的"
                       "（CPU 后端中共享内存初值为 NaN）" if unwritten else "")
            return [Step("compile", True, "compiles", "可以编译"),
                    Step("correct", False,
                         f"wrong at {M}×{N}×{K}: relative error {err:.2e} (bound {bound:.1e}); worst element "
                         f"C[{i}, {j}] = {got:.6g}, expected {want:.6g}{note}",
                         f"{M}×{N}×{K} 时结果错误：相对误差 {err:.2e}（上限 {bound:.1e}）；误差最大的元素 "
                         f"C[{i}, {j}] = {got:.6g}，应为 {want:.6g}{note_zh}")]
    shown = ", ".join(f"{M}×{N}×{K}" for M, N, K in shapes)
    return [Step("compile", True, "compiles", "可以编译"),
            Step("correct", True, f"right on {shown}, no shared-memory race, no out-of-bounds access",
                 f"在 {shown} 上结果正确，没有共享内存竞争，没有越界访问")]


def profile_check(attempt: Attempt, check: dict) -> Step:
    from ..warp_access import profile

    ex, source = attempt.exercise, attempt.source
    rows = profile(ex.level, *PROFILE_SHAPE, source=source, **ex.params)
    space = "global" if check["type"] == "sectors" else "shared"
    chosen = [r for r in rows if r.space == space and check.get("write") in (None, r.write)
              and check.get("array") in (None, r.array)]
    limit = float(check.get("max_excess", 1.0))
    bad = [r for r in chosen if r.excess > limit + 1e-9]
    what_en = "sectors per request" if space == "global" else "bank wavefronts per instruction"
    what_zh = "每次请求的扇区数" if space == "global" else "每条指令的存储体轮数（wavefront）"
    if not chosen:
        return Step(check["type"], False, f"found no {space} access of the kind this check looks at",
                    f"没有找到此项检查所针对的{'全局' if space == 'global' else '共享'}内存访问")
    if bad:
        worst = bad[0]
        return Step(check["type"], False,
                    f"{worst.describe()}: {worst.excess:.1f}× the ideal (allowed {limit:g}×)",
                    f"{worst.line}：{what_zh}为 {worst.per_access:.2f}，是理想值的 {worst.excess:.1f} 倍"
                    f"（允许 {limit:g} 倍）")
    return Step(check["type"], True, f"every checked access within {limit:g}× the ideal {what_en}",
                f"所有被检查的访问都不超过理想{what_zh}的 {limit:g} 倍")


def sass_check(attempt: Attempt, check: dict) -> Step:
    from ..sass import disassemble, find_disassembler, instruction_mix

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
    for op in check.get("forbid", []):
        if count(op) > 0:
            return Step("sass", False, f"the {arch} build has {count(op)} {op} instructions; there should be none",
                        f"{arch} 编译结果中有 {count(op)} 条 {op} 指令；应当一条也没有")
    wanted = ", ".join([f"{op} ≥ {n}" for op, n in check.get("require", {}).items()]
                       + [f"no {op}" for op in check.get("forbid", [])])
    return Step("sass", True, f"{arch} instruction mix: {wanted}", f"{arch} 指令构成符合要求：{wanted}")


def registers_check(attempt: Attempt, check: dict) -> Step:
    from ..compile import compile_report

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
    from ..compile import compile_report

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

    from ..bench import cublas_gemm, time_gpu
    from ..check import check, epilogue_inputs, random_operands
    from ..dtypes import storage_dtype, to_float64
    from ..launch import gemm

    spec = json.loads(open(spec_path, encoding="utf-8").read())
    lv = get_level(spec["level"])
    params, source = spec["params"], spec["source"]
    shapes = TENSOR_CORE_SHAPES if lv.uses_tensor_cores else GRADE_SHAPES
    for M, N, K in shapes:
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
    """A SIMT level's kernel on the CPU backend on the graded shapes, then (with a GPU) timed."""
    return _correct_on_cpu(attempt.exercise, attempt.source, GRADE_SHAPES, attempt.file_name)


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
    attempt = Attempt(ex, source, file_name or f"my_kernel{ex.answer_suffix}", seed)
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
