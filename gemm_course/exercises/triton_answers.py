"""Level 14's exercises: a Triton kernel the learner writes, run by Triton's interpreter in a child process, and a
Triton configuration whose course quantities the learner predicts, measured by compiling the course's own kernel.

The tile loop (task "tile_loop"). The answer is a Python file holding ``@triton.jit def tile_gemm_kernel(...)``.

* A screen (:func:`screen`) reads its syntax tree first. Outside the kernel: ``import triton`` and ``import
  triton.language as tl`` only, and functions decorated ``@triton.jit``. Inside: ``tl.*``, arithmetic, indexing,
  ``range`` loops, ``if``, names the kernel defines. Triton's interpreter runs a kernel as Python with NumPy doing
  the arithmetic, and it puts its own module's names (``np`` among them) into the kernel's globals: a kernel that
  called NumPy, or reached a tensor's NumPy array (``a.handle.data``), would compute C on the host and still pass.
  The screen refuses both, and every import, in one line that says what to write instead.
* The kernel then runs in a child Python (``-I -S``: no site, no course package on its path), with
  TRITON_INTERPRET=1, under the sandbox's limits (sandbox.Child: wall clock, CPU time, address space, no file
  written). The child imports numpy and triton, then keeps only the standard library on ``sys.path`` and gives up
  reading any file outside the standard library, triton and numpy (child_prelude.restrict_filesystem), before
  the answer's text is executed in a namespace whose builtins import nothing but triton.
* The child launches the kernel at each graded shape and setting on matrices the grader made (checking.
  guarded_problem: random A and B, C poisoned with NaN, NaN guards around all three) and reports, as data, what
  Triton's interpreter saw: every ``tl.dot`` (its program and operand shapes) and every load or store whose
  address is outside A, B and C (the masks). The grader judges that data and the arrays it gets back
  (checking.verdict). What the child prints or how it exits counts for nothing.

The prediction (task "predict_config"): the quantities of a Triton configuration, measured by compiling the
course's tiled kernel (gemm_course.dsl.compile) for the target the exercise names, with no GPU: threads per block
(the compiled num_warps), the CUDA level whose instructions ``tl.dot`` became (wgmma: 11, mma.sync: 10, fp32 FMAs
on the CUDA cores: 8), the shared memory the compiled kernel asks for (the ring of A and B tiles) and the fp32
values each thread stores of C (its accumulators).
"""
from __future__ import annotations

import ast
import functools
import math
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np

from .grade import Attempt, Step

FUNCTION = "tile_gemm_kernel"
SIGNATURE = ("@triton.jit def tile_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, "
             "BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr)")
# Tiles the kernel is graded with: the smallest tl.dot takes (16), and a wider one, so that no size is baked in.
SETTINGS: tuple[dict[str, int], ...] = ({"BM": 16, "BN": 16, "BK": 16}, {"BM": 32, "BN": 16, "BK": 32})
# A lone element; partial tiles in M, N and K; several tiles in every direction with a long k-loop.
SHAPES: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (33, 17, 65), (70, 40, 100))
WALL_S = 60.0  # the whole grading's child: start, imports and every launch (about 3 s on a busy 2-core machine)


def wall_s() -> float:
    """The child's wall-clock limit: WALL_S, or less where $GEMM_COURSE_GRADE_WALL_S says so (sandbox.wall_limit)."""
    from .sandbox import wall_limit

    return min(WALL_S, wall_limit())

# What a kernel may name besides its parameters, its own variables and tl: Python's range and a few builtins
# Triton's front end also accepts.
KERNEL_BUILTINS = frozenset({"range", "min", "max", "print", "float", "int", "bool"})
# Attributes of a tensor a kernel may read (a.to(tl.float32), a.T, a.shape, a.dtype).
TENSOR_ATTRIBUTES = frozenset({"to", "T", "shape", "dtype"})
# Modules inside triton.language: their functions are Triton's internals, not the language of a kernel.
TL_REFUSED = frozenset({"core", "semantic", "math", "extra", "standard", "random", "libdevice", "target_info",
                        "inline_asm_elementwise", "tensor", "constexpr_function", "builtin"})
STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.While, ast.If, ast.Expr, ast.Pass, ast.Return)
EXPRESSIONS = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
               ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.keyword, ast.operator,
               ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context, ast.arguments, ast.arg)


def _refusal(name: str, node: Optional[ast.AST], en: str, zh: str) -> Step:
    line = getattr(node, "lineno", None)
    where, where_zh = (f"{name}:{line}: ", f"{name}:{line}：") if line else (f"{name}: ", f"{name}：")
    return Step("answer", False, where + en, where_zh + zh)


def _is_triton_jit(decorator: ast.AST) -> bool:
    return (isinstance(decorator, ast.Attribute) and decorator.attr == "jit" and isinstance(decorator.value, ast.Name)
            and decorator.value.id == "triton")


def _what(node: ast.AST) -> str:
    """A node as the learner wrote it, shortened (for a message)."""
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 — a message only
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def screen(source: str, name: str) -> Optional[Step]:
    """The first reason the answer cannot be run as a Triton kernel of this exercise, as a failed "answer" step
    with one line in each language; None when it can (see the module's docstring)."""
    if not source.strip():
        return _refusal(name, None, f"the file is empty: define {SIGNATURE}", f"文件是空的：请定义 {SIGNATURE}")
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as err:
        return Step("answer", False, f"{name}: Python cannot read it, line {err.lineno}: {err.msg}",
                    f"{name}：Python 无法解析，第 {err.lineno} 行：{err.msg}")
    kernels = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.name, alias.asname) not in (("triton", None), ("triton.language", "tl")):
                    return _refusal(name, node, f"`import {alias.name}` is not allowed: a kernel file imports triton "
                                    "and triton.language as tl, nothing else (the kernel computes with tl.* only)",
                                    f"不允许 `import {alias.name}`：内核文件只导入 triton 和 triton.language as tl"
                                    "（内核只用 tl.* 计算）")
        elif isinstance(node, ast.ImportFrom):
            return _refusal(name, node, f"`from {node.module} import ...` is not allowed: write `import triton` and "
                            "`import triton.language as tl`", f"不允许 `from {node.module} import ...`：请写 "
                            "`import triton` 和 `import triton.language as tl`")
        elif isinstance(node, ast.FunctionDef):
            if [_is_triton_jit(d) for d in node.decorator_list] != [True]:
                return _refusal(name, node, f"`{node.name}` is not a Triton kernel: every function of the file is a "
                                "@triton.jit function (plain Python would run on the host)",
                                f"`{node.name}` 不是 Triton 内核：文件中的每个函数都必须是 @triton.jit 函数"
                                "（普通 Python 会在主机上运行）")
            kernels.append(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # a docstring
        else:
            return _refusal(name, node, f"`{_what(node)}` is not allowed outside the kernel: the file holds the "
                            "imports and @triton.jit functions only", f"内核之外不允许 `{_what(node)}`：文件中只能有"
                            "导入语句和 @triton.jit 函数")
    if not any(k.name == FUNCTION for k in kernels):
        found = ", ".join(k.name for k in kernels)
        return _refusal(name, None, f"no kernel named {FUNCTION}" + (f" (the file defines {found})" if found else "")
                        + f": keep the starter's {SIGNATURE}",
                        f"没有名为 {FUNCTION} 的内核" + (f"（文件中定义的是 {found}）" if found else "")
                        + f"：请保留初始代码中的 {SIGNATURE}")
    helpers = {k.name for k in kernels}
    for kernel in kernels:
        problem = _screen_kernel(kernel, helpers, name)
        if problem:
            return problem
    return None


def _screen_kernel(kernel: ast.FunctionDef, helpers: set[str], name: str) -> Optional[Step]:
    """Inside one @triton.jit function: tl.*, arithmetic, indexing, loops and names the kernel defines. Of all it
    finds, the most telling is reported: a name (np, exit) before an attribute before a call or a statement."""
    args = kernel.args
    known = {a.arg for a in args.args + args.posonlyargs + args.kwonlyargs} | helpers | KERNEL_BUILTINS | {"tl"}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            known.add(node.id)
    host = ("np", "numpy", "torch", "math", "triton")
    found: list[tuple[int, int, int, Step]] = []  # (rank, line, column, step)

    def refuse(node: ast.AST, en: str, zh: str) -> None:
        rank = 0 if isinstance(node, ast.Name) else 1 if isinstance(node, ast.Attribute) else 2
        found.append((rank, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), _refusal(name, node, en, zh)))

    inside = [node for part in [*kernel.body, *(a.annotation for a in args.args if a.annotation)]
              for node in ast.walk(part)]  # the decorator (triton.jit) is the file's, checked by screen()
    for node in inside:
        if isinstance(node, ast.stmt) and not isinstance(node, STATEMENTS):
            word = type(node).__name__.lower()
            refuse(node, f"a `{word}` statement is not part of a Triton kernel: inside the kernel write tl.* calls, "
                   "arithmetic, `for ... in range(...)` and `if`",
                   f"`{word}` 语句不属于 Triton 内核：内核中只写 tl.* 调用、算术、`for ... in range(...)` 和 `if`")
        elif isinstance(node, ast.Return) and node.value is not None:
            refuse(node, "a kernel returns nothing: it writes C with tl.store", "内核没有返回值：它用 tl.store 写出 C")
        elif isinstance(node, ast.expr) and not isinstance(node, EXPRESSIONS):
            refuse(node, f"`{_what(node)}` is not allowed inside the kernel: write tl.* calls and arithmetic on tiles "
                   "(no lambdas, comprehensions, dictionaries or f-strings)",
                   f"内核中不允许 `{_what(node)}`：请只写 tl.* 调用和分块上的算术（不用 lambda、推导式、字典或 f-string）")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
            if node.id in host:
                refuse(node, f"`{node.id}` inside the kernel: the kernel computes with tl.* on the GPU, and a kernel "
                       "that calls the host's libraries (NumPy, math) does not compile for one; use tl.load, tl.dot "
                       "and tl.store", f"内核中出现了 `{node.id}`：内核在 GPU 上用 tl.* 计算，调用主机端库（NumPy、"
                       "math）的内核无法为 GPU 编译；请用 tl.load、tl.dot 和 tl.store")
            elif node.id in ("exit", "quit"):
                refuse(node, f"`{node.id}` would end the grading process, not the kernel: a kernel ends by returning, "
                       "and the grader reads C, never how a process ends",
                       f"`{node.id}` 结束的是评分进程而不是内核：内核应当通过 return 结束，评分器读取 C，从不看进程如何结束")
            else:
                refuse(node, f"`{node.id}` is not defined in the kernel: use its parameters, names it assigns, tl.* "
                       "and range", f"内核中没有定义 `{node.id}`：请使用它的参数、它自己赋值的名字、tl.* 和 range")
        elif isinstance(node, ast.Attribute):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                refuse(node, f"`{_what(node)} = ...` changes Triton itself: a kernel assigns to its own names only",
                       f"`{_what(node)} = ...` 会改动 Triton 本身：内核只给它自己的名字赋值")
            elif node.attr.startswith("_"):
                refuse(node, f"`.{node.attr}` reaches Triton's internals: a kernel uses tl.* and its tensors",
                       f"`.{node.attr}` 会触及 Triton 的内部实现：内核只使用 tl.* 和它的张量")
            elif isinstance(node.value, ast.Name) and node.value.id == "tl":
                if node.attr in TL_REFUSED:
                    refuse(node, f"`tl.{node.attr}` is Triton's machinery, not its language: use the tl.* functions "
                           "(tl.load, tl.dot, tl.store, ...)", f"`tl.{node.attr}` 属于 Triton 的内部机制，而不是它的"
                           "语言：请使用 tl.* 函数（tl.load、tl.dot、tl.store 等）")
            elif node.attr not in TENSOR_ATTRIBUTES:
                refuse(node, f"`{_what(node)}`: inside the kernel an attribute is tl.<name> or a tensor's "
                       f"{', '.join(sorted(TENSOR_ATTRIBUTES))} (a tensor's other attributes are the interpreter's, "
                       "and do not exist on a GPU)", f"`{_what(node)}`：内核中的属性只能是 tl.<名字> 或张量的 "
                       f"{', '.join(sorted(TENSOR_ATTRIBUTES))}（张量的其他属性属于解释器，在 GPU 上并不存在）")
        elif isinstance(node, ast.Call):
            func = node.func
            ok = (isinstance(func, ast.Attribute) and (
                (isinstance(func.value, ast.Name) and func.value.id == "tl") or func.attr in TENSOR_ATTRIBUTES)) or \
                (isinstance(func, ast.Name) and func.id in helpers | KERNEL_BUILTINS)
            if not ok:
                refuse(node, f"`{_what(node)}`: inside the kernel call tl.* functions, range and your own @triton.jit "
                       "functions", f"`{_what(node)}`：内核中只能调用 tl.* 函数、range 和你自己的 @triton.jit 函数")
    return min(found, key=lambda f: f[:3])[3] if found else None


# --- the child ---------------------------------------------------------------------------------------------------
#
# Its script: child_prelude's text (framing, restrict_filesystem), then _RUNNER. Standard library, numpy and
# triton only: the course's package is never imported there. Two of the course's files are executed as text into
# private modules: tensors.py (the NumPy adapter Triton's interpreter reads) and interpreter.py (the one-line mend
# for NumPy 2.4 that Triton 3.6's interpreter needs); neither imports the course at its top.

_RUNNER = r'''
import builtins
import linecache
import types


def _one_line(error):
    try:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    except BaseException:
        lines = []
    text = lines[-1] if lines else ""
    return (f"{type(error).__name__}: {text}" if text else type(error).__name__)[:300]


def _course_text(name, text):
    module = types.ModuleType(name)
    exec(compile(text, name, "exec"), module.__dict__)
    return module


def _answer_builtins(refused):
    real_import = builtins.__import__

    def answer_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level or name.split(".")[0] != "triton":
            raise ImportError(f"a kernel file may import only triton, not {name}")
        return real_import(name, globals, locals, fromlist, level)

    names = {k: v for k, v in vars(builtins).items() if k not in refused}
    names["__import__"] = answer_import
    return names


class _Seen:
    """What the interpreter did for one launch: tl.dot calls and accesses outside A, B and C."""

    def __init__(self, builder, ranges):
        self.builder, self.ranges = builder, ranges
        self.dots = {}        # program -> count
        self.dot_shapes = []  # distinct [[a rows, a cols], [b rows, b cols]]
        self.outside_loads = self.outside_stores = 0
        self.first_outside = None

    def program(self):
        return int(self.builder.grid_idx[0])

    def dot(self, a, b):
        p = self.program()
        self.dots[p] = self.dots.get(p, 0) + 1
        shape = [list(a.data.shape), list(b.data.shape)]
        if shape not in self.dot_shapes and len(self.dot_shapes) < 20:
            self.dot_shapes.append(shape)

    def access(self, ptrs, mask, names, store):
        import numpy as np

        p = np.asarray(ptrs.data).astype(np.uint64).ravel()
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data)).ravel()
        inside = np.zeros(p.shape, dtype=bool)
        for name in names:
            lo, hi = self.ranges[name]
            inside |= (p >= lo) & (p < hi)
        bad = int((m & ~inside).sum())
        if bad:
            if store:
                self.outside_stores += bad
            else:
                self.outside_loads += bad
            if self.first_outside is None:
                self.first_outside = {"program": self.program(), "store": store}


def _instrument(interpreter):
    builder = interpreter.interpreter_builder
    real_dot, real_load, real_store = builder.create_dot, builder.create_masked_load, builder.create_masked_store
    state = {"seen": None}

    def create_dot(a, b, d, *rest):
        if state["seen"] is not None:
            state["seen"].dot(a, b)
        return real_dot(a, b, d, *rest)

    def create_masked_load(ptrs, mask, *rest):
        if state["seen"] is not None:
            state["seen"].access(ptrs, mask, ("A", "B"), False)
        return real_load(ptrs, mask, *rest)

    def create_masked_store(ptrs, value, mask, *rest):
        if state["seen"] is not None:
            state["seen"].access(ptrs, mask, ("C",), True)
        return real_store(ptrs, value, mask, *rest)

    builder.create_dot, builder.create_masked_load = create_dot, create_masked_load
    builder.create_masked_store = create_masked_store
    return builder, state


def _main():
    answers = result_stream()
    request, blobs = read_message(sys.stdin.buffer.read)
    sys.path[:0] = request["import_path"]
    import numpy as np
    import triton
    import triton.language
    from triton.runtime import interpreter as triton_interpreter
    tensors = _course_text("_level14_tensors", request["tensors_py"])
    mend = _course_text("_level14_interpreter", request["interpreter_py"])
    mend._index_scalars_by_item()
    builder, state = _instrument(triton_interpreter)
    sys.path[:] = request["path"]  # the standard library only, from here on
    restrict_filesystem(readable=request["readable"])

    source, file = request["source"], request["file"]
    linecache.cache[file] = (len(source), None, source.splitlines(True), file)  # Triton reads the kernel's source
    namespace = {"__name__": "answer", "__builtins__": _answer_builtins(frozenset(request["refused"]))}
    try:
        exec(compile(source, file, "exec"), namespace)
        kernel = namespace[request["function"]]
    except BaseException as error:
        write_message(answers, {"load_error": _one_line(error)})
        return
    runs, out = [], []
    for i, run in enumerate(request["runs"]):
        M, N, K, setting, guard = run["M"], run["N"], run["K"], run["setting"], run["guard"]
        buffers = [np.frombuffer(bytearray(blobs[3 * i + j]), dtype=np.float32) for j in range(3)]
        views = [b[guard:guard + r * c].reshape(r, c) for b, (r, c) in zip(buffers, ((M, K), (K, N), (M, N)))]
        ranges = {name: (int(v.ctypes.data), int(v.ctypes.data) + v.nbytes) for name, v in zip("ABC", views)}
        seen = _Seen(builder, ranges)
        state["seen"] = seen
        grid = (((M + setting["BM"] - 1) // setting["BM"]) * ((N + setting["BN"] - 1) // setting["BN"]),)
        a, b, c = (tensors.NumpyTensor(v, "float32") for v in views)
        row = {}
        try:
            kernel[grid](a, b, c, M, N, K, K, N, N, **setting)
        except BaseException as error:
            row["error"] = _one_line(error)
        state["seen"] = None
        row.update(programs=grid[0], dots={str(k): v for k, v in seen.dots.items()}, dot_shapes=seen.dot_shapes,
                   outside_loads=seen.outside_loads, outside_stores=seen.outside_stores,
                   first_outside=seen.first_outside)
        runs.append(row)
        out += [b.tobytes() for b in buffers]
        if "error" in row or not seen.dots:  # a kernel without tl.dot fails the lesson whatever comes next
            break
    write_message(answers, {"runs": runs}, out)
    answers.close()


_main()
'''


@functools.lru_cache(maxsize=1)
def _child_script() -> str:
    from . import child_prelude

    return Path(child_prelude.__file__).read_text(encoding="utf-8") + "\n" + _RUNNER


def _package_dir(name: str) -> Optional[str]:
    import importlib.util

    spec = importlib.util.find_spec(name)
    return os.path.dirname(spec.origin) if spec and spec.origin else None


def _paths() -> dict[str, list[str]]:
    """sys.path for the child's imports (the folders holding numpy and triton), then the standard library alone;
    what it may read afterwards: the standard library, and the triton and numpy packages (with numpy's bundled
    libraries)."""
    from .chapters import _standard_library

    stdlib = _standard_library()
    packages = [p for p in (_package_dir("triton"), _package_dir("numpy")) if p]
    holders = list(dict.fromkeys(os.path.dirname(p) for p in packages))
    libs = [p + ".libs" for p in packages if os.path.isdir(p + ".libs")]
    return {"import_path": holders, "path": stdlib, "readable": stdlib + packages + libs}


def _shapes(rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """SHAPES, then one drawn from the seed: 2 to 3 tiles of 32 in M, N and K, none a multiple of 16."""
    drawn = tuple(int(rng.integers(33, 80)) | 1 for _ in range(3))
    return list(SHAPES) + [drawn]


def _setting_text(setting: Mapping[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in setting.items())


def _where(setting: Mapping[str, int], M: int, N: int, K: int) -> tuple[str, str]:
    """A launch as the verdicts name it: its shape and tile setting, in English and in Chinese."""
    return f"{M}×{N}×{K} ({_setting_text(setting)})", f"{M}×{N}×{K}（{_setting_text(setting)}）"


def _in_child(attempt: Attempt, runs: list[dict[str, Any]], blobs: list[bytes]) -> dict[str, Any]:
    from .chapters import _REFUSED_NAMES
    from .sandbox import Child, classify

    here = Path(__file__).resolve().parents[1] / "dsl"
    request = {"source": attempt.source, "file": attempt.file_name, "function": FUNCTION, "runs": runs,
               "refused": sorted(set(_REFUSED_NAMES) | {"exit", "quit"}),
               "tensors_py": (here / "tensors.py").read_text(encoding="utf-8"),
               "interpreter_py": (here / "interpreter.py").read_text(encoding="utf-8"), **_paths()}
    with Child([sys.executable, "-I", "-S", "-c", _child_script()], wall_s=wall_s(),
               env={"TRITON_INTERPRET": "1"}) as child:
        answer, out = child.call(request, blobs)
    ok = isinstance(answer.get("load_error"), str) or (
        isinstance(answer.get("runs"), list) and 0 < len(answer["runs"]) <= len(runs)
        and len(out) == 3 * len(answer["runs"])
        and all(len(o) == len(b) for o, b in zip(out, blobs)))
    if not ok:
        raise classify("protocol", None, wall_s(), "", "")
    answer["buffers"] = out
    return answer


def grade_tile_loop(attempt: Attempt) -> list[Step]:
    """The tile-loop task: screen, run in the child at every setting and shape, then the masks and the result.
    The tl.dot calls are kept in attempt.cache["triton_runs"] for the "triton_dot" check."""
    from gemm_course.dsl.checking import guarded_problem, verdict
    from gemm_course.dsl.tensors import require_triton, triton_available

    from .sandbox import ChildFailed

    name = attempt.file_name
    problem = screen(attempt.source, name)
    if problem:
        return [problem]
    if not triton_available():
        attempt.cache["triton_missing"] = True
        try:
            require_triton("This exercise")
        except RuntimeError as err:
            en, _, zh = str(err).partition(" / ")
            return [Step("triton", None, en, zh or en)]
    shapes = _shapes(attempt.rng)  # the second tile setting on the two largest: the edges are the first's to find
    cases = [(SETTINGS[0], shape) for shape in shapes] + [(s, shape) for s in SETTINGS[1:] for shape in shapes[-2:]]
    problems, runs, blobs = [], [], []
    for i, (setting, (M, N, K)) in enumerate(cases):
        p = guarded_problem(M, N, K, "float32", "float32", seed=attempt.seed * 31 + i, xp=np)
        problems.append(p)
        runs.append({"M": M, "N": N, "K": K, "setting": dict(setting), "guard": p.guard})
        blobs += [b.tobytes() for b in p.buffers]
    try:
        answer = _in_child(attempt, runs, blobs)
    except ChildFailed as failed:
        if failed.kind in ("time", "cpu"):
            return [Step("run", False, f"{name} did not finish within {wall_s():g} s: a loop that never ends (a "
                         "while loop whose condition never changes), or far more work than the tiles need?",
                         f"{name} 在 {wall_s():g} 秒内没有结束：是否有永不结束的循环（条件从不改变的 while），或者做了远超"
                         "分块所需的工作？")]
        if failed.kind in ("exit", "signal"):
            return [Step("run", False, f"{name} ended the grading process before it answered ({failed.en}): a "
                         "kernel ends by returning; the grader reads C, never what is printed",
                         f"{name} 在给出结果之前就结束了评分进程（{failed.zh}）：内核应当通过 return 结束；评分器读取 C，"
                         "从不读取打印的内容")]
        return [Step("run", False, failed.en, failed.zh)]
    if "load_error" in answer:
        return [Step("run", False, f"running {name} raised {answer['load_error']}",
                     f"运行 {name} 时抛出了 {answer['load_error']}")]
    steps = [Step("answer", True, "a Triton kernel that computes with tl.* only", "只用 tl.* 计算的 Triton 内核")]
    for i, row in enumerate(answer["runs"]):
        setting, (M, N, K) = cases[i][0], (runs[i]["M"], runs[i]["N"], runs[i]["K"])
        where, where_zh = _where(setting, M, N, K)
        if "error" in row:
            return steps + [Step("run", False, f"at {where} the kernel raised {row['error']}",
                                 f"{where_zh} 时内核抛出了 {row['error']}")]
        if row["outside_loads"]:
            return steps + [Step("masked", False,
                                 f"at {where} the loads read {row['outside_loads']} elements from outside A and B "
                                 f"(program {row['first_outside']['program']} first): a tile that runs past row M, "
                                 "column N or the end of K needs a mask on its load (mask=..., other=0.0), which on a "
                                 "GPU is the bounds check of every CUDA level",
                                 f"{where_zh} 时，加载从 A 和 B 之外读取了 {row['outside_loads']} 个元素（最先是程序 "
                                 f"{row['first_outside']['program']}）：超出第 M 行、第 N 列或 K 末尾的分块，加载时需要掩码"
                                 "（mask=...、other=0.0），这就是每个 CUDA 级别里的边界检查")]
        if row["outside_stores"]:
            return steps + [Step("masked", False,
                                 f"at {where}, {row['outside_stores']} elements were stored outside C: keep the "
                                 "starter's masked tl.store", f"{where_zh} 时有 {row['outside_stores']} 个元素写到了 "
                                 "C 之外：请保留初始代码中带掩码的 tl.store")]
        p = problems[i]
        for buffer, blob in zip(p.buffers, answer["buffers"][3 * i:3 * i + 3]):
            buffer[...] = np.frombuffer(blob, dtype=np.float32)
        v = verdict(p)
        if not v["passed"]:
            if v["unwritten"]:
                detail = (f"{v['unwritten']} of the {M * N} elements of C are NaN: left unwritten (C starts as NaN), "
                          "or summed from a NaN read beyond a matrix",
                          f"C 的 {M * N} 个元素中有 {v['unwritten']} 个是 NaN：没有写入（C 的初值是 NaN），或者累加了"
                          "矩阵之外读到的 NaN")
            elif not np.any(p.C):
                detail = ("every element of C is 0: nothing was added to acc (the k-loop's tl.dot is missing, or its "
                          "result is not kept: acc = tl.dot(a, b, acc))", "C 的每个元素都是 0：acc 上什么也没有累加"
                          "（缺少 k 循环中的 tl.dot，或者没有保存它的结果：acc = tl.dot(a, b, acc)）")
            elif v["written_outside"] or v["input_guards_changed"]:
                detail = ("elements outside C (or inside A or B) were written", "写到了 C 之外（或 A、B 之中）")
            else:
                detail = (f"relative error {v['relative_error']:.2e} (bound {v['tolerance']:.1e}): each k-tile must "
                          "be multiplied once, at its own k", f"相对误差 {v['relative_error']:.2e}（上限 "
                          f"{v['tolerance']:.1e}）：每个 k 分块都要在它自己的 k 处恰好乘一次")
            return steps + [Step("correct", False, f"wrong at {where}: {detail[0]}",
                                 f"{where_zh} 时结果错误：{detail[1]}")]
    attempt.cache["triton_runs"] = [(cases[i][0], (runs[i]["M"], runs[i]["N"], runs[i]["K"]), row)
                                    for i, row in enumerate(answer["runs"])]
    ran = len(answer["runs"])  # all of them, unless a launch ran no tl.dot (the child stops there: "dot" fails)
    shapes = list(dict.fromkeys((runs[i]["M"], runs[i]["N"], runs[i]["K"]) for i in range(ran)))
    shown = ", ".join(f"{M}×{N}×{K}" for M, N, K in shapes)
    tiles = " and ".join(dict.fromkeys(f"{c[0]['BM']}×{c[0]['BN']}×{c[0]['BK']}" for c in cases[:ran]))
    return steps + [Step("masked", True, "every load and store inside A, B and C", "每次加载和存储都在 A、B、C 之内"),
                    Step("correct", True, f"right on {shown}, with {tiles} tiles (BM×BN×BK)",
                         f"在 {shown} 上结果正确，分块为 {tiles}（BM×BN×BK）")]


def dot_check(attempt: Attempt, check: dict) -> Step:
    """The lesson: one tl.dot of a BM×BK tile of A by a BK×BN tile of B per program and k-tile, as counted by the
    child (nothing counted is a failure, never a pass)."""
    runs = attempt.cache.get("triton_runs")
    if attempt.cache.get("triton_missing"):
        return Step("dot", None, "not checked here: the kernel could not run without triton",
                    "这里没有检查：没有 triton，内核无法运行")
    if not runs:
        return Step("dot", False, "no launch was recorded, so the tl.dot calls could not be counted",
                    "没有记录到任何启动，因此无法统计 tl.dot 调用")
    for setting, (M, N, K), row in runs:
        BM, BN, BK = setting["BM"], setting["BN"], setting["BK"]
        where, where_zh = _where(setting, M, N, K)
        want = math.ceil(K / BK)
        if not row["dots"]:
            return Step("dot", False, f"at {where} no tl.dot ran: the right C came from element-wise products. The "
                        "lesson's k-loop multiplies whole tiles, acc = tl.dot(a, b, acc): that one line is what "
                        "becomes the FFMA tiles of Levels 5–8, mma.sync (Level 10) or wgmma (Level 11)",
                        f"{where_zh} 时没有执行任何 tl.dot：正确的 C 来自逐元素的乘积。本课的 k 循环乘的是整块，"
                        "acc = tl.dot(a, b, acc)：正是这一行变成第 5–8 级的 FFMA 分块、mma.sync（第 10 级）或 wgmma"
                        "（第 11 级）")
        wrong_shape = next((s for s in row["dot_shapes"] if s != [[BM, BK], [BK, BN]]), None)
        if wrong_shape:
            (ar, ac), (br, bc) = wrong_shape
            return Step("dot", False, f"at {where} tl.dot multiplied {ar}×{ac} by {br}×{bc}: the k-loop multiplies a "
                        f"BM×BK tile of A by a BK×BN tile of B ({BM}×{BK} by {BK}×{BN}) at each step",
                        f"{where_zh} 时 tl.dot 乘的是 {ar}×{ac} 与 {br}×{bc}：k 循环每一步用 A 的 BM×BK 分块乘 B 的 "
                        f"BK×BN 分块（{BM}×{BK} 乘 {BK}×{BN}）")
        counts = {int(p): n for p, n in row["dots"].items()}
        missing = [p for p in range(row["programs"]) if p not in counts]
        odd = next(((p, n) for p, n in sorted(counts.items()) if n != want), None)
        if missing or odd:
            p, n = (missing[0], 0) if missing else odd
            return Step("dot", False, f"at {where} program {p} ran {n} tl.dot; the k-loop runs one per k-tile, "
                        f"ceil({K} / {BK}) = {want} (each a tile of BK = {BK}: the tiles are what fits in registers "
                        "and shared memory, however long K is)",
                        f"{where_zh} 时程序 {p} 执行了 {n} 次 tl.dot；k 循环每个 k 分块执行一次，ceil({K} / {BK}) = "
                        f"{want}（每次一个 BK = {BK} 的分块：无论 K 多长，分块的大小都由寄存器和共享内存能容纳多少决定）")
    last = runs[-1]
    M, N, K = last[1]
    BK = last[0]["BK"]
    return Step("dot", True, f"one tl.dot of a BM×BK by a BK×BN tile per program and k-tile (at {M}×{N}×{K} with "
                f"BK = {BK}: {math.ceil(K / BK)} per program)",
                f"每个程序每个 k 分块一次 tl.dot，乘 BM×BK 与 BK×BN 的分块（{M}×{N}×{K}、BK = {BK} 时每个程序 "
                f"{math.ceil(K / BK)} 次）")


# --- the prediction: a configuration's quantities, measured by compiling the course's kernel ----------------------

CONFIG_KEYS = ("BM", "BN", "BK", "num_warps", "num_stages")
QUANTITIES = ("threads_per_block", "cuda_level", "ring_bytes", "acc_per_thread")


@functools.lru_cache(maxsize=16)
def _compiled(arch: str, dtype: str, setting_key: tuple) -> Any:
    from gemm_course.dsl.compile import compile_kernel

    return compile_kernel("tiled", arch, dtype, dict(setting_key), registers=False)


def cuda_level(instructions: Mapping[str, int]) -> int:
    """The course level whose instructions tl.dot became: wgmma (11), mma.sync (10), fp32 FMAs (the register and
    warp tiles of Levels 5–8: 8)."""
    if instructions.get("wgmma.mma_async"):
        return 11
    if instructions.get("mma.sync"):
        return 10
    return 8


def stored_values_per_thread(ptx: str) -> int:
    """32-bit values one thread stores to global memory (the kernel's only stores are those of C)."""
    import re

    total = 0
    for width in re.findall(r"\bst\.global(?:\.\w+)*?(?:\.v(\d))?\.(?:b32|f32)\b", ptx):
        total += int(width or 1)
    return total


def measure_config(params: Mapping[str, Any], spec: Mapping[str, Any]) -> float:
    """One quantity (spec["field"]) of a Triton configuration (params: BM, BN, BK, num_warps, num_stages, dtype,
    arch), from the compiled tiled kernel; predict.MeasureError where it cannot be compiled here."""
    from gemm_course.dsl.tensors import triton_available

    from .predict import MeasureError

    if not triton_available():
        raise MeasureError("needs triton: pip install -e .[triton]")
    setting = tuple((k, params[k]) for k in CONFIG_KEYS)
    try:
        report = _compiled(params.get("arch", "sm_90"), params.get("dtype", "bfloat16"), setting)
    except Exception as err:  # noqa: BLE001 — a compiler that cannot run here
        raise MeasureError(str(err).strip().splitlines()[-1][:200] if str(err).strip() else type(err).__name__) from None
    field = spec["field"]
    if field == "threads_per_block":
        return float(32 * report.num_warps)
    if field == "cuda_level":
        return float(cuda_level(report.instructions))
    if field == "ring_bytes":
        return float(report.shared_bytes)
    if field == "acc_per_thread":
        return float(stored_values_per_thread(report.ptx))
    raise ValueError(f"unknown quantity {field!r}; the quantities: {', '.join(QUANTITIES)}")
