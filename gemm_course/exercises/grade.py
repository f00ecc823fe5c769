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

PRINTED_LINES = 10  # of what an answer printed, shown under its verdict
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
    """One grading: the exercise, the learner's answer, the name its messages use, the seed of the random
    shape and inputs (printed in the verdict, so that a failure can be reproduced) and the grader's own
    seed for what the learner does not choose (which blocks are profiled, the blocks' orders)."""
    exercise: Any
    source: str
    file_name: str = "my_kernel.cu"
    seed: int = 0
    cache: dict = field(default_factory=dict)  # what several checks share (e.g. the access profiles)
    grader_seed: int = 0

    @property
    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)


@dataclass
class Verdict:
    exercise: str
    steps: list[Step] = field(default_factory=list)
    seed: Optional[int] = None
    seed_chosen: bool = False   # the caller chose the seed (to reproduce a failure): progress marks such a pass
    printed: str = ""           # what the answer printed while it ran (capped), shown after the steps

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
        lines = [head] + [f"  {mark[s.passed]} {s.name}: {s.en if lang == 'en' else s.zh}" for s in self.steps]
        shown = self.printed.strip().splitlines()
        if shown:
            lines.append(("  your code printed" if lang == "en" else "  你的代码输出了") +
                         (f" ({len(shown)} lines, the first {PRINTED_LINES}):" if len(shown) > PRINTED_LINES and lang == "en"
                          else f"（共 {len(shown)} 行，前 {PRINTED_LINES} 行）：" if len(shown) > PRINTED_LINES else
                          (":" if lang == "en" else "：")))
            lines += [f"    {line[:160]}" for line in shown[:PRINTED_LINES]]
        return lines

    def text(self, lang: Optional[str] = None) -> str:
        """The verdict in one language ("en", "zh"), or English then Chinese ("both"); by default the language
        in force (gc.language, the command line's --en / --zh, GEMM_COURSE_LANG, the locale)."""
        from ..bilingual.language import current_language

        lang = lang or current_language()
        if lang in ("en", "zh"):
            return "\n".join(self.lines(lang))
        return "\n".join(self.lines("en") + [""] + self.lines("zh"))

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        """In a notebook: the verdict in each language, of which the book's switch shows one."""
        import html

        from ..bilingual.text import note

        en, zh = (html.escape("\n".join(self.lines(lang))) for lang in ("en", "zh"))
        return note(f"<pre class='gemm-verdict'>{en}</pre>", f"<pre class='gemm-verdict'>{zh}</pre>").html()


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
    "dsl": "chapters:run_dsl",                       # Level 14: Triton, in Triton's interpreter
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
    "triton_dot": "triton_answers:dot_check",        # Level 14: one tl.dot per program and k-tile
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
    return fitted + [many_blocks_shape(tm, tn, tk, group)]


MANY_BLOCKS = 151  # a grid bigger than any small shape's: a bug that needs many blocks, or a late group, shows


def many_blocks_shape(tm: int, tn: int, tk: int, group: int = 1) -> tuple[int, int, int]:
    """A shape of more than MANY_BLOCKS blocks with at least three groups of tile rows (three tile rows
    without a grouped order), partial last tiles in M and N, and a short K (a k-tile and one more: the
    other shapes see long k-loops; this one is about the grid)."""
    tiles_m = max(3 * group, 3) + 1
    tiles_n = max(2, -(-MANY_BLOCKS // tiles_m))
    return tiles_m * tm - max(1, tm // 2), tiles_n * tn - 1, tk + 1


def _settings(ex: Any) -> list[dict[str, Any]]:
    """The settings an exercise is graded in: its params, then each of exercise.json's "also" settings (for a
    kernel with switches, e.g. an epilogue's activation, bias and accumulate, each seen on and off)."""
    also = (ex.data or {}).get("also", [])
    return [dict(ex.params)] + [dict(ex.params) | dict(extra) for extra in also]


def _describe_setting(params: dict[str, Any], base: dict[str, Any]) -> str:
    changed = {k: v for k, v in params.items() if base.get(k) != v}
    return "" if not changed else " (" + ", ".join(f"{k}={v}" for k, v in changed.items()) + ")"


def graded_operands(M: int, N: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A and B for a graded shape: multiples of 1/4 in [-8, 8], never all zero. Wider than [-1, 1] (a kernel
    that clamps its inputs fails) and exact: every product and every sum up to K = 2**14 is a float32
    number, so a right kernel matches the float64 reference whatever its order of additions."""
    rng = np.random.default_rng(seed)
    A = (rng.integers(-32, 33, (M, K)) / 4).astype(np.float32)
    B = (rng.integers(-32, 33, (K, N)) / 4).astype(np.float32)
    A[A == 0] = 0.25  # no zeros: a zero hides an element that was never read
    B[B == 0] = -0.25
    return A, B


UNSET_LOCAL = 1e30  # |C| beyond this: the CPU backend's pattern for an uninitialised local (about -1.7e38)


def epilogue_mistake(resolved: dict[str, Any], product: np.ndarray, extra: dict[str, Any],
                     C_initial: Optional[np.ndarray], C: np.ndarray, alpha: float, beta: float,
                     bound: float) -> Optional[tuple[str, str]]:
    """Which switch of an epilogue a wrong C got wrong, when C is exactly the result of one such mistake
    (the bias left out, the activation left out or applied after beta·C_old, beta·C_old left out, or C read
    although the setting does not accumulate); None when it is none of them."""
    from gemm_course.run.check import _epilogue_reference, relative_error

    bias = extra["bias"] if extra["bias"] is not False else None
    C_old = C_initial.astype(np.float64) if C_initial is not None else None

    def result(**change: Any) -> np.ndarray:
        p = dict(resolved) | change
        return _epilogue_reference(p, product, bias if p["bias"] else None, C_old, np, alpha, beta)

    if C_initial is None and np.isnan(C).all():
        return ("every element is NaN: with accumulate off (HAS_BETA false) C is no input and starts as NaN here, so "
                "a kernel that reads it anyway (beta·C is NaN even when it should not count) gets NaN",
                "所有元素都是 NaN：累加关闭（HAS_BETA 为假）时 C 不是输入，这里它的初值是 NaN；内核若仍然读取它"
                "（此时 beta·C 也是 NaN）就会得到 NaN")
    candidates = []
    if resolved.get("bias"):
        candidates.append(({"bias": False}, ("C matches the result without the bias: the bias is not added (HAS_BIAS "
                                             "ignored?)", "C 与不加偏置的结果一致：偏置没有加上（忽略了 HAS_BIAS？）")))
    if resolved.get("activation", "none") != "none":
        candidates.append(({"activation": "none"}, ("C matches the result without the activation: it is not applied "
                                                    "(ACT ignored?)", "C 与不做激活的结果一致：激活没有执行（忽略了 ACT？）")))
    if resolved.get("accumulate"):
        candidates.append(({"accumulate": False}, ("C matches the result without beta·C_old: the old C is not added "
                                                   "(HAS_BETA ignored?)", "C 与不加 beta·C_old 的结果一致：没有加上旧的 C"
                                                   "（忽略了 HAS_BETA？）")))
    matching = [named for change, named in candidates if relative_error(C, result(**change)) <= bound]
    if resolved.get("accumulate") and resolved.get("activation") == "relu":
        X = float(np.float32(alpha)) * product + (bias.astype(np.float64) if bias is not None else 0.0)
        if relative_error(C, np.maximum(X + float(np.float32(beta)) * C_old, 0.0)) <= bound:
            matching.append(("C matches the activation applied after beta·C_old: add beta·C_old last",
                             "C 与先加 beta·C_old 再做激活的结果一致：beta·C_old 应当最后再加"))
    return matching[0] if len(matching) == 1 else None  # two explanations fit (a tiny shape): name neither


def _correct_on_cpu(ex: Any, source: str, shapes: Sequence[tuple[int, int, int]], file_name: str = "my_kernel.cu",
                    params: Optional[dict[str, Any]] = None, seed: int = 0, order_seed: int = 0,
                    compare_orders: bool = True) -> list[Step]:
    """Run the answer as the level's kernel on every shape; the first failure ends the run. Inputs come
    from graded_operands, C starts as NaN (an element never written shows), an epilogue setting gets a
    random bias, alpha and beta. Blocks run in an order drawn from order_seed for each shape (the grader's,
    not the learner's); with compare_orders the small shape with the most blocks runs in a second order
    too, and C must come out the same, bit for bit."""
    from gemm_course.run import cpu_backend as cb
    from gemm_course.run.check import epilogue_inputs, epilogue_terms, relative_error, tolerance
    from gemm_course.run.launch import gemm

    lv = get_level(ex.level)
    params = dict(ex.params) if params is None else params
    resolved = lv.resolve(**params)
    setting = _describe_setting(params, dict(ex.params))
    from . import native

    session = native.active()
    first_failure: Optional[tuple[tuple[str, str], str, str]] = None
    # The shape run in a second order of blocks too: the small shape with the most blocks (cheap, and a
    # kernel that depends on the order shows there as well as on the largest grid).
    tm, tn, _ = tile_shape(lv, resolved)
    compared = max(shapes, key=lambda s: (-(-s[0] // tm) * -(-s[1] // tn) if s[0] * s[1] * s[2] <= MAX_SHAPE_WORK else 0))
    for n, (M, N, K) in enumerate(shapes):
        A, B = graded_operands(M, N, K, seed * 31 + n)
        C = np.full((M, N), np.nan, dtype=np.float32)
        reference = A.astype(np.float64) @ B.astype(np.float64)
        run: dict[str, Any] = dict(params)
        terms = 0.0  # an epilogue's result may cancel (alpha·A·B + bias ≈ 0): errors count against its terms' size
        C_initial = None
        if lv.epilogue:
            rng = np.random.default_rng(seed + n)
            alpha, beta = (float(np.float32(x)) for x in rng.uniform(0.25, 1.75, 2))
            product = reference
            extra, C_initial, reference = epilogue_inputs(resolved, reference, "float32", np, seed=seed + n,
                                                          alpha=alpha, beta=beta)
            run.update(extra)
            terms = epilogue_terms(product, extra, C_initial, np)
            if C_initial is not None:
                C = C_initial
        shape = f"{M}×{N}×{K}{setting}"
        second = compare_orders and (M, N, K) == compared
        orders = [order_seed * 1009 + n + 1] + ([order_seed * 1009 + n + 7919] if second else [])
        if session is None:
            orders = orders[:1]
        results: list[np.ndarray] = []
        try:
            for order in orders:
                if session is not None:
                    session.block_order_seed = order
                C = np.full((M, N), np.nan, dtype=np.float32) if C_initial is None else C_initial.copy()
                gemm(A, B, lv, out=C, source=source, backend="cpu", source_name=file_name, **run)
                results.append(C)
        except native.KernelRefusedError as err:
            return [Step("source", False, err.en, err.zh)]
        except cb.CpuCompileError as err:
            detail = _first_lines(err.log or str(err))
            return [Step("compile", False, f"your kernel does not compile:\n{detail}", f"你的内核无法编译：\n{detail}")]
        except cb.CpuBackendError as err:  # a race, a barrier, a bad access, ...: each language from its half
            kind = type(err).__name__.replace("Kernel", "").replace("Error", "").lower() or "run"
            return [Step("compile", True, "compiles", "可以编译"),
                    Step(kind, False, f"at {shape}: {err.en}", f"{shape} 时内核出错：{err.zh}")]
        first_C = results[0]
        if not np.array_equal(first_C, C, equal_nan=True):
            (i, j) = np.unravel_index(int(np.argmax(first_C != C)), C.shape)
            return [Step("compile", True, "compiles", "可以编译"),
                    Step("order", False, f"at {shape} C depends on the order the blocks run in: C[{i}, {j}] was "
                         f"{first_C[i, j]:.6g} in one order and {C[i, j]:.6g} in another; a GPU runs blocks in no "
                         "order a kernel may rely on", f"{shape} 时 C 取决于线程块的执行顺序：C[{i}, {j}] 在一种顺序下是 "
                         f"{first_C[i, j]:.6g}，在另一种顺序下是 {C[i, j]:.6g}；GPU 不保证线程块按任何顺序执行")]
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
            if abs(got) > UNSET_LOCAL:
                note += ("; a value near ±1.7e38 is what the CPU run puts in a local variable that was never "
                         "given a value: an accumulator without `= 0`?")
                note_zh += "；接近 ±1.7e38 的值是 CPU 运行给从未赋值的局部变量填入的值：是否有累加器没有初始化为 0？"
            failed = (f"wrong at {shape}: relative error {err:.2e} (bound {bound:.1e}); worst element "
                      f"C[{i}, {j}] = {got:.6g}, expected {want:.6g}",
                      f"{shape} 时结果错误：相对误差 {err:.2e}（上限 {bound:.1e}）；误差最大的元素 "
                      f"C[{i}, {j}] = {got:.6g}，应为 {want:.6g}")
            named = epilogue_mistake(resolved, product, extra, C_initial, C, alpha, beta, bound) if lv.epilogue else None
            if lv.epilogue and not named and first_failure is None and n + 1 < len(shapes):
                first_failure = (failed, note, note_zh)  # a tiny shape fits several mistakes: a bigger one names it
                continue
            if first_failure is not None:
                failed, note, note_zh = first_failure
            if named:
                note, note_zh = f"; {named[0]}", f"；{named[1]}"
            return [Step("compile", True, "compiles", "可以编译"),
                    Step("correct", False, failed[0] + note, failed[1] + note_zh)]
    if first_failure is not None:
        failed, note, note_zh = first_failure
        return [Step("compile", True, "compiles", "可以编译"), Step("correct", False, failed[0] + note, failed[1] + note_zh)]
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
            also_zh = f"（包括 4 字节的 cp.async 拷贝 {copies}：{count_32bit(copies)} 条）" if copies else ""
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
    import sys

    from .sandbox import Child, ChildFailed, course_root

    code = f"import sys; sys.path.insert(0, {course_root()!r}); from gemm_course.exercises.grade import _gpu_child; _gpu_child()"
    try:  # the child answers over its own pipe: what the kernel prints (GPU printf included) counts for nothing
        with Child([sys.executable, "-I", "-c", code], wall_s=GPU_TIMEOUT_S, memory_bytes=None, file_bytes=None) as child:
            answer, _ = child.call({"level": lv.id, "params": dict(ex.params), "source": source})
    except ChildFailed as err:
        if err.kind == "time":
            return [Step("gpu", False, f"the kernel did not finish within {GPU_TIMEOUT_S} s on the GPU: a wait on an "
                         "mbarrier or barrier that never completes (a missing arrive, a wrong phase)?",
                         f"内核在 GPU 上 {GPU_TIMEOUT_S} 秒内没有结束：是否在等待一个永远不会完成的 mbarrier 或屏障"
                         "（少了 arrive，或相位不对）？")]
        return [Step("gpu", False, f"the GPU run failed: {err.en}", f"GPU 运行失败：{err.zh}")]
    checks = answer.get("checks") if isinstance(answer.get("checks"), list) else []
    if answer.get("error") or not checks:
        detail = str(answer.get("error") or "no shape was checked")[:300]
        return [Step("gpu", False, f"the GPU run failed: {detail}", f"GPU 运行失败：{detail}")]
    for passed, text in checks:
        if not passed:
            return [Step("gpu", False, f"wrong on the GPU: {text}", f"在 GPU 上结果错误：{text}")]
    steps = [Step("gpu", True, f"right on the GPU ({len(checks)} shapes)", f"在 GPU 上结果正确（{len(checks)} 个形状）")]
    timing = answer.get("timing")
    if isinstance(timing, dict):
        n, gpu = timing["n"], timing["gpu"]
        tf = {k: 2 * n**3 / (timing[k] * 1e-3) / 1e12 for k in ("yours_ms", "level_ms", "cublas_ms")}
        steps.append(Step("speed", True,
                          f"{gpu}, {n}³ (median, L2 flushed): yours {tf['yours_ms']:.2f} TFLOPS, the level's kernel "
                          f"{tf['level_ms']:.2f}, cuBLAS {tf['cublas_ms']:.2f} ({tf['yours_ms'] / tf['cublas_ms']:.0%} of cuBLAS)",
                          f"{gpu}，{n}³（中位数，已清空 L2）：你的内核 {tf['yours_ms']:.2f} TFLOPS，本级内核 "
                          f"{tf['level_ms']:.2f}，cuBLAS {tf['cublas_ms']:.2f}（为 cuBLAS 的 {tf['yours_ms'] / tf['cublas_ms']:.0%}）"))
    return steps


def _gpu_child() -> None:
    """The child process of _gpu_run: reads its request, answers with the checked shapes and the timings
    over its result pipe (never on standard output, which the kernel's printf shares)."""
    import sys

    from .child_prelude import read_message, result_stream, write_message

    results = result_stream()
    spec, _ = read_message(sys.stdin.buffer.read)
    answer: dict = {"checks": []}
    try:
        _gpu_checks(spec, answer)
    except Exception as err:  # noqa: BLE001 — any failure of the run is reported as data
        answer["error"] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    write_message(results, answer)


def _gpu_checks(spec: dict, answer: dict) -> None:
    import cupy

    from gemm_course.measure.bench import cublas_gemm, time_gpu
    from gemm_course.run.check import check, epilogue_inputs, random_operands
    from gemm_course.run.dtypes import storage_dtype, to_float64
    from gemm_course.run.launch import gemm

    lv = get_level(spec["level"])
    params, source = spec["params"], spec["source"]
    shapes = TENSOR_CORE_SHAPES if lv.uses_tensor_cores else GRADE_SHAPES
    resolved = lv.resolve(**params)
    for M, N, K in shapes:
        if lv.shape_rules(M, N, K, resolved):  # a precondition of this setting (e.g. K a multiple of 16)
            continue
        r = check(lv, M, N, K, source=source, backend="cuda", **params)
        answer["checks"].append([bool(r.passed), str(r)])
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
    answer["timing"] = timing


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
        # The other settings on the last small shapes only (the many-blocks shape is the first setting's)
        result = _correct_on_cpu(ex, attempt.source, shapes if n == 0 else shapes[-5:-1], attempt.file_name,
                                 params, attempt.seed, attempt.grader_seed, compare_orders=n == 0)
        steps += result if n == 0 else result[1:]
        if any(step.passed is False for step in result):
            return steps if result[0].passed else result
    return steps


# --- what the source may not do ------------------------------------------------------------------
#
# The CPU run and the GPU build (SASS, registers) must grade one and the same kernel, and the kernel may
# do nothing a GPU kernel cannot: screen.py asks the preprocessor and both compilers (one token stream,
# only the starter's headers, no attribute, builtin or assembly that dodges the CPU run's checks, device
# code only). The answer that survives is the preprocessed text, which every later step compiles.


def _code_only(text: str, keep_strings: bool = False) -> str:
    """The source with comments (and, unless keep_strings, string and char literals) blanked; line breaks
    are kept, so line numbers still count."""
    import re

    def blank(m: "re.Match[str]") -> str:
        if keep_strings and m.group(0)[0] in "\"'":
            return m.group(0)
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text, flags=re.S)


def _gpu_compile(attempt: Attempt, kernel_name: str, text: str) -> Callable[[], Any]:
    """How the GPU compiler builds this exercise's kernel from `text` (a level's own options, or a chapter's)."""
    from gemm_course.run.compile import compile_report, nvrtc_compile, parse_ptxas_log

    ex = attempt.exercise
    if ex.level in _chapters():
        def build() -> Any:
            _, _, log = nvrtc_compile(text, kernel_name, "sm_90")
            return type("Report", (), {"stack_bytes": parse_ptxas_log(log).get("stack_bytes", 0)})()
        return build
    lv = get_level(ex.level)
    return lambda: compile_report(lv, arch=lv.build_arch or "sm_90", source=text, **ex.params)


def _chapters() -> Any:
    from . import CHAPTERS

    return CHAPTERS


def source_problems(attempt: Attempt, kernel_name: str) -> Optional[Step]:
    """The first reason the grader cannot grade this source, as a failed "source" step with one line
    saying what to change; None when there is none. On the way, attempt.source becomes the preprocessed
    text that both builds compile (screen.preprocess)."""
    import re

    from . import screen

    text, name = attempt.source, attempt.file_name
    kernel = kernel_name.split("<")[0].strip()

    def refuse(en: str, zh: str) -> Step:
        return Step("source", False, en, zh)

    if not text.strip():
        return refuse(f"{name} is empty: the grader expected the kernel {kernel} (start from the exercise's starter)",
                      f"{name} 是空的：评分器需要内核 {kernel}（请从练习给出的初始代码开始）")
    if "\0" in text or sum(not (c.isprintable() or c in "\t\n\r") for c in text) > len(text) // 100:
        return refuse(f"{name} is not text (it holds control bytes): the grader expected CUDA C source with the kernel {kernel}",
                      f"{name} 不是文本文件（含有控制字节）：评分器需要包含内核 {kernel} 的 CUDA C 源码")
    try:
        text = screen.preprocess(text, attempt.exercise.starter, name)
        screen.screen_tokens(text, name)
    except screen.Refusal as err:
        return refuse(err.en, err.zh)
    code = _code_only(text)
    signatures = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", code)
    if not re.search(rf"__global__[^;{{}}]*?\b{re.escape(kernel)}\s*\(", signatures):
        found = sorted(set(re.findall(r"__global__[^;{}(]*?\b(\w+)\s*\(", signatures)))
        seen = f" (it defines {', '.join(found)})" if found else " (it defines no __global__ function)"
        seen_zh = f"（文件中定义的是 {'、'.join(found)}）" if found else "（文件中没有 __global__ 函数）"
        return refuse(f"{name} has no kernel named {kernel}{seen}: the grader launches {kernel_name}; keep the "
                      "starter's kernel name and template parameters",
                      f"{name} 中没有名为 {kernel} 的内核{seen_zh}：评分器启动的是 {kernel_name}；请保留初始代码中的内核名"
                      "和模板参数")
    try:
        screen.gpu_build(_gpu_compile(attempt, kernel_name, text), name)
    except screen.Refusal as err:  # the same text as the GPU builds it: what does not compile there does not count
        return Step("compile", False, err.en, err.zh)
    attempt.source = text
    return None


def run_tensor_core_kernel(attempt: Attempt) -> list[Step]:
    """A Tensor Core level's kernel: its GPU build (NVRTC) here; its run comes last, on a GPU only."""
    return [_compile_for_gpu(attempt.exercise, attempt.source)]


def _answer_text(source: Any, file_name: str) -> tuple[Optional[str], Optional[Step]]:
    """The answer as text, or a failed step saying what to pass instead (one line, both languages)."""
    import os

    if source is None:
        return None, Step("answer", False, "no answer given: pass your answer's text, e.g. grade(ID, "
                          "open('my_kernel.cu').read()); the starter is exercise.starter",
                          "没有给出答案：请传入答案的文本，例如 grade(ID, open('my_kernel.cu').read())；初始代码是 "
                          "exercise.starter")
    if isinstance(source, (bytes, bytearray)):
        try:
            source = bytes(source).decode("utf-8")
        except UnicodeDecodeError as err:
            return None, Step("answer", False, f"{file_name} is not UTF-8 text (byte {err.start}): save it as UTF-8",
                              f"{file_name} 不是 UTF-8 文本（第 {err.start} 个字节）：请以 UTF-8 编码保存")
    if not isinstance(source, str):
        return None, Step("answer", False, f"the answer is a {type(source).__name__}; pass its text (a str)",
                          f"答案是 {type(source).__name__} 类型；请传入它的文本（str）")
    source = source.removeprefix("\ufeff")  # a byte-order mark some editors write
    looks_like_path = "\n" not in source.strip() and source.strip().endswith((".cu", ".txt", ".py", ".cuh"))
    if looks_like_path and (os.path.exists(source.strip()) or len(source.strip()) < 200):
        return None, Step("answer", False, f"the answer is the name {source.strip()!r}, not its text: pass "
                          f"open({source.strip()!r}).read(), or on the command line give the file",
                          f"答案是文件名 {source.strip()!r}，而不是文件内容：请传入 open({source.strip()!r}).read()，"
                          "或者在命令行里给出这个文件")
    return source, None


def grade(exercise_id: str, source: Any = None, *, file_name: Optional[str] = None,
          seed: Optional[int] = None) -> Verdict:
    """Grade `source` (a whole kernel file's text, or the answer an exercise asks for) for an exercise.
    file_name: what messages call your file (default my_kernel.cu); seed: the random shape's and inputs'
    seed (default: a fresh one, printed; pass one only to reproduce a failure: the verdict says it was
    chosen). The answer runs in a child process (native.py, sandbox.py); the verdict is made here."""
    from . import get_exercise, native
    from .sandbox import ChildFailed

    ex = get_exercise(exercise_id)
    name = file_name or ("my_kernel.cu" if ex.answer_suffix == ".cu" else "my_answer.txt")
    chosen = seed is not None
    if chosen and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**32):
        return Verdict(ex.id, [Step("seed", False, f"seed={seed!r}: give a whole number from 0 to {2**32 - 1}",
                                    f"seed={seed!r}：请给出 0 到 {2**32 - 1} 之间的整数")])
    seed = random.SystemRandom().randrange(1, 10**6) if seed is None else int(seed)
    verdict = Verdict(ex.id, seed=seed, seed_chosen=chosen)
    text, problem = _answer_text(source, name)
    if problem:
        verdict.steps.append(problem)
        return verdict
    attempt = Attempt(ex, text, name, seed, grader_seed=random.SystemRandom().randrange(1, 2**31))
    with native.session() as child:
        try:
            verdict.steps += _resolve(RUNNERS[ex.runner])(attempt)
            if not verdict.failed_step:  # the lesson's checks assume an answer that runs and is right
                for check in ex.checks:
                    kind = check["type"]
                    if kind not in CHECKS:
                        raise ValueError(f"exercise {ex.id}: unknown check {kind!r}")
                    result = _resolve(CHECKS[kind])(attempt, check)
                    verdict.steps += result if isinstance(result, list) else [result]
                    if verdict.failed_step:
                        break
        except ChildFailed as err:
            verdict.steps.append(Step("run", False, err.en, err.zh))
    verdict.printed = child.printed  # read once the child has ended: everything it printed is in
    if not verdict.failed_step and ex.runner in ("level_kernel", "tensor_core"):
        verdict.steps += _gpu_run(ex, attempt.source)
    return verdict


