"""The index math of the Tensor Core exercises (Levels 9–11), checked on the CPU.

A Tensor Core kernel's result can only be checked on a GPU, but most of what makes it right is
integer arithmetic: which lane supplies which row to ldmatrix, which 16×16 tile a warp's fragment
starts at, which stage of a ring k-tile `it` sits in, which parity an mbarrier wait needs. The
exercises ask for that arithmetic as named `__device__` functions of integers, which the kernel calls.
This check takes those functions out of the learner's file (by name, braces matched), compiles them
alone with the system C++ compiler (`__device__`, `__host__`, `__forceinline__` defined away; the
build cached on disk like cpu_backend's), evaluates them on every input that matters (all 32 lanes,
every register, every stage and many k-tiles) and compares with a model written here from the
documented layouts:

    mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), f16/bf16 inputs, f32 C, g = lane / 4,
    q = lane % 4:   A register r: row g + 8·(r % 2), columns 2q + 8·(r / 2) + {0, 1}
                    B register r: k rows 2q + 8·r + {0, 1}, column g
                    C element  r: row g + 8·(r / 2), column 2q + r % 2
    ldmatrix.x4:    lanes 8j … 8j+7 give the addresses of rows 0–7 of matrix j; register j of lane t
                    receives row t / 4, elements 2·(t % 4) and +1 of matrix j (.trans: column t / 4,
                    rows 2·(t % 4) and +1)
    mbarrier:       arrive counts down; the arrival that completes the count completes the phase and
                    flips the phase bit; try_wait.parity(p) returns once the phase of parity p has
                    completed, i.e. at once when p is the parity of the phase before the current one

For a ring of stages the model is a simulation: producer, consumer warps and the copy engine run in
many interleavings, over several ring depths and k-tile counts, and the learner's functions must
never let a consumer read a stage before its copy has landed, never let the producer overwrite a
stage a consumer has not released, and never deadlock.

Registered in grade.CHECKS as "index_math"; an exercise's check names its model:
    {"type": "index_math", "model": "ldmatrix_a"}
"""
from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from gemm_course.run import cpu_backend
from .grade import Attempt, Step, _code_only
from .sandbox import MEMORY_BYTES
from .zygote import set_limits
from .screen import Refusal as ScreenRefusal, screen_tokens

STEP = "index_math"
RUN_TIMEOUT_S = 5
HARNESS_FLAGS = ("-std=c++17", "-O1", "-w")


class Refusal(Exception):
    """The answer cannot be checked as it stands: one line saying what to change."""

    def __init__(self, en: str, zh: str):
        super().__init__(en)
        self.en, self.zh = en, zh


def _fail(en: str, zh: str) -> Step:
    return Step(STEP, False, en, zh)


# --- reading the learner's file -------------------------------------------------------------------

def code_only(source: str) -> str:
    """The source with comments and string literals blanked (same length, same lines): the grader's screen."""
    return _code_only(source)


def _matching(code: str, open_at: int) -> int:
    """Index just past the bracket that closes code[open_at] ('(' or '{'), or -1."""
    pairs = {"(": ")", "{": "}"}
    opening, closing = code[open_at], pairs[code[open_at]]
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == opening:
            depth += 1
        elif code[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


@dataclass(frozen=True)
class Function:
    name: str
    start: int        # where its declaration (return type) starts in the source
    end: int          # just past its closing brace
    line: int         # the source line of `start`, 1-based
    text: str         # the definition as the learner wrote it
    head: str         # what precedes the name: qualifiers and return type
    params: tuple[str, ...]
    declarations: tuple[str, ...]   # the parameters as declared ("int lane", "const unsigned it")


_QUALIFIERS = {"__device__", "__host__", "__forceinline__", "inline", "static", "constexpr", "const"}
_INTEGER_TYPES = {"int", "unsigned", "signed", "long", "short"}
_IMPURE = ("threadIdx", "blockIdx", "blockDim", "gridDim", "asm", "volatile", "__shared__", "extern", "printf",
           "malloc", "goto", "float", "double", "__syncthreads", "__syncwarp", "static")


def _preprocessor_depth(code: str, at: int) -> int:
    depth = 0
    for line in code[:at].splitlines():
        word = line.strip()
        if re.match(r"#\s*if", word):
            depth += 1
        elif re.match(r"#\s*endif", word):
            depth -= 1
    return depth


def find_function(source: str, code: str, name: str, arity: int) -> Function:
    """The definition of `name`: a non-template function of `arity` integers returning an integer,
    outside any #if; a Refusal saying what is wrong otherwise."""
    found = []
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", code):
        close = _matching(code, m.end() - 1)
        if close < 0:
            continue
        after = code[close:].lstrip()
        if after.startswith("{"):
            found.append((m, close, close + (len(code[close:]) - len(after))))
    if not found:
        raise Refusal(f"your file has no definition of the function `{name}`: the exercise asks for it by that name "
                      "(keep its signature from the starter)",
                      f"你的文件中没有函数 `{name}` 的定义：本练习按这个名字查找它（请保留初始代码中的函数签名）")
    if len(found) > 1:
        raise Refusal(f"`{name}` is defined {len(found)} times: keep one definition",
                      f"`{name}` 被定义了 {len(found)} 次：只保留一个定义")
    m, close, brace = found[0]
    end = _matching(code, brace)
    if end < 0:
        raise Refusal(f"the body of `{name}` has no closing brace", f"`{name}` 的函数体缺少右花括号")
    # The declaration starts after the previous statement or brace, past any preprocessor lines.
    statement_start = max(code.rfind(c, 0, m.start()) for c in (";", "}", "{")) + 1
    start = statement_start
    for piece in code[statement_start:m.start()].splitlines(keepends=True):
        if piece.strip() and not piece.strip().startswith("#"):
            break
        start += len(piece)
    start += len(code[start:m.start()]) - len(code[start:m.start()].lstrip())
    head = " ".join(code[start:m.start()].split())
    words = head.replace("*", " * ").replace("&", " & ").split()
    if "template" in head or "<" in head:
        raise Refusal(f"`{name}` must be a plain function, not a template: pass what varies as an int argument",
                      f"`{name}` 必须是普通函数而不是模板：会变化的量请作为 int 参数传入")
    if not words or not set(words) <= _QUALIFIERS | _INTEGER_TYPES or not set(words) & _INTEGER_TYPES:
        raise Refusal(f"`{name}` must return an integer (`__device__ int {name}(...)`), not `{head or '(nothing)'}`",
                      f"`{name}` 必须返回整数（`__device__ int {name}(...)`），而不是 `{head or '（无）'}`")
    raw_params = [p.strip() for p in code[m.end():close - 1].split(",")]
    raw_params = [p for p in raw_params if p and p != "void"]
    params, declarations = [], []
    for p in raw_params:
        words_p = p.split()
        if len(words_p) < 2 or not set(words_p[:-1]) <= _INTEGER_TYPES | {"const"} or \
                not re.fullmatch(r"[A-Za-z_]\w*", words_p[-1]):
            raise Refusal(f"`{name}` takes integers only (`int lane`, ...), not `{p}`",
                          f"`{name}` 只能接受整数参数（如 `int lane`），而不是 `{p}`")
        params.append(words_p[-1])
        declarations.append(" ".join(words_p))
    if len(params) != arity:
        raise Refusal(f"`{name}` takes {arity} int argument{'s' if arity > 1 else ''} in this exercise, yours takes "
                      f"{len(params)}: keep the starter's signature",
                      f"本练习中 `{name}` 接受 {arity} 个 int 参数，你的版本接受 {len(params)} 个：请保留初始代码中的签名")
    if _preprocessor_depth(code, start) > 0:
        raise Refusal(f"`{name}` sits inside an #if/#ifdef block: define it unconditionally, outside any #if",
                      f"`{name}` 位于 #if/#ifdef 块之内：请在所有 #if 之外无条件地定义它")
    body = code[brace:end]
    if re.search(r"^\s*#", body, re.M):
        raise Refusal(f"`{name}` has preprocessor lines inside its body: write it as plain C++",
                      f"`{name}` 的函数体中有预处理指令：请用普通的 C++ 写出它")
    for word in _IMPURE:
        if re.search(rf"\b{word}\b", body):
            raise Refusal(f"`{name}` uses `{word}`: it must be a pure function of its integer arguments "
                          "(the kernel passes lane, warp, stage, ... in)",
                          f"`{name}` 用到了 `{word}`：它必须是只依赖整数参数的纯函数（lane、warp、stage 等由内核传入）")
    line = source.count("\n", 0, start) + 1
    try:  # no builtin (__builtin_printf, ...), attribute or assembly: the value is all a function may produce
        screen_tokens(body, f"`{name}`")
    except ScreenRefusal as err:
        raise Refusal(err.en, err.zh) from None
    return Function(name, start, end, line, source[start:end], head, tuple(params), tuple(declarations))


def called_outside(code: str, name: str, definitions: Sequence[Function]) -> bool:
    """Whether `name(` appears (outside comments) anywhere but inside the checked functions' own
    definitions: the kernel, or a helper it calls, must use it."""
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", code):
        before = re.findall(r"[\w:]+", code[max(0, m.start() - 40):m.start()])
        if before and before[-1] in _QUALIFIERS | _INTEGER_TYPES:
            continue  # a declaration (`int name(int, int);`), not a use
        if not any(f.start <= m.start() < f.end for f in definitions):
            return True
    return False


# --- running the functions on the CPU -------------------------------------------------------------

def _harness(functions: Sequence[Function], helpers: Sequence[Function], file_name: str) -> str:
    # No header before the learner's functions: they can call nothing but min, max and each other (the C
    # library, which the harness uses to print the values, comes after them).
    parts = ["#define __device__", "#define __host__", "#define __forceinline__ inline", "#define __noinline__",
             "template <class T> inline T min(T a, T b) { return b < a ? b : a; }",
             "template <class T> inline T max(T a, T b) { return a < b ? b : a; }"]
    for f in (*helpers, *functions):  # prototypes: the functions may call one another in any order
        parts.append(f"{f.head} {f.name}({', '.join(f.declarations)});")
    for f in (*helpers, *functions):
        parts.append(f'#line {f.line} "{file_name}"\n{f.text}')
    cases = "\n".join(f"        case {i}: r = (long long){f.name}({', '.join(f'a[{k}]' for k in range(len(f.params)))}); break;"
                      for i, f in enumerate(functions))
    parts.append('#line 1 "index_math_harness"\n#include <cstdio>\n'
                 "int main() {\n    int f; int a[8];\n    while (std::scanf(\"%d\", &f) == 1) {\n"
                 "        for (int k = 0; k < 8; ++k) a[k] = 0;\n"
                 "        int n; std::scanf(\"%d\", &n);\n        for (int k = 0; k < n; ++k) std::scanf(\"%d\", &a[k]);\n"
                 "        long long r = 0;\n        switch (f) {\n" + cases + "\n        }\n"
                 "        std::printf(\"%lld\\n\", r); std::fflush(stdout);\n    }\n    return 0;\n}\n")
    return "\n".join(parts) + "\n"


def _build(text: str) -> Path:
    cmd = tuple(cpu_backend.find_compiler())
    key = hashlib.sha256("\0".join([cpu_backend._compiler_identity(cmd), " ".join(HARNESS_FLAGS), text])
                         .encode()).hexdigest()[:32]
    folder = cpu_backend.cache_dir() / "index_math"
    exe = folder / key
    if exe.exists():
        return exe
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        cpp, out = Path(tmp) / "harness.cpp", Path(tmp) / "harness"
        cpp.write_text(text, encoding="utf-8")
        result = cpu_backend._run_compiler([*cmd, *HARNESS_FLAGS, str(cpp), "-o", str(out)])
        if result.returncode != 0:
            errors = [line for line in (result.stderr + result.stdout).splitlines() if "error" in line]
            first = (errors or (result.stderr + result.stdout).strip().splitlines() or ["?"])[0]
            first = first.replace(str(cpp), "harness.cpp")
            raise Refusal(f"your functions do not compile on their own (they may use only their int arguments, "
                          f"integer arithmetic and each other): {first.strip()}",
                          f"你的函数无法单独编译（它们只能使用自己的 int 参数、整数运算和彼此）：{first.strip()}")
        os.replace(out, exe)  # atomic: a concurrent grading sees the whole program or none
    return exe


Calls = dict[str, list[tuple[int, ...]]]


def evaluate(functions: Sequence[Function], helpers: Sequence[Function], calls: Calls,
             file_name: str) -> dict[str, dict[tuple[int, ...], int]]:
    """Every function of `calls` on each of its argument tuples: name -> {arguments: value}."""
    exe = _build(_harness(functions, helpers, file_name))
    index = {f.name: i for i, f in enumerate(functions)}
    order = [(name, args) for name, many in calls.items() for args in many]
    stdin = "".join(f"{index[name]} {len(args)} {' '.join(map(str, args))}\n" for name, args in order)
    try:
        with tempfile.TemporaryDirectory(prefix="gemm_course_index_math_") as home:  # limits as a graded kernel's
            done = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                  cwd=home, env={"PATH": "/usr/bin:/bin", "HOME": home},
                                  preexec_fn=lambda: set_limits(RUN_TIMEOUT_S + 1, MEMORY_BYTES, 0))
        out, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        name, args = order[min(len(out.splitlines()), len(order) - 1)]
        raise Refusal(f"{name}{args} did not return within {RUN_TIMEOUT_S} s: a loop that never ends?",
                      f"{name}{args} 在 {RUN_TIMEOUT_S} 秒内没有返回：是否有永不结束的循环？") from None
    values = out.splitlines()
    if code != 0 or len(values) < len(order):
        name, args = order[min(len(values), len(order) - 1)]
        raise Refusal(f"{name}{args} crashed (a division by zero?)", f"{name}{args} 运行时崩溃（是否除以了零？）")
    table: dict[str, dict[tuple[int, ...], int]] = {name: {} for name in calls}
    for (name, args), value in zip(order, values):
        table[name][args] = int(value)
    return table


# --- the models -----------------------------------------------------------------------------------

Table = dict[str, dict[tuple[int, ...], int]]


@dataclass(frozen=True)
class Model:
    functions: tuple[tuple[str, int], ...]      # (name, arity) the learner writes
    helpers: tuple[tuple[str, int], ...]        # the file's own functions the answer may call
    calls: Callable[[], Calls]
    judge: Callable[[Table], Step]              # the verdict on the values


def _span(first: int, last: int) -> str:
    return f"{first}" if first == last else f"{first}–{last}"


# Level 9: the tile each WMMA fragment starts at ------------------------------------------------------

def _wmma_calls() -> Calls:
    args = sorted({(warp, i, kk, warps_n, ld) for warps_n in (1, 2, 4) for warps_m in (1, 2, 4)
                   for warp in range(warps_m * warps_n) for i in (0, 1) for kk in (0, 16) for ld in (40, 72, 136)})
    return {"a_tile_offset": args, "b_tile_offset": args}


def _wmma_judge(values: Table) -> Step:
    for (warp, i, kk, warps_n, ld), got in values["a_tile_offset"].items():
        row, col = 32 * (warp // warps_n) + 16 * i, kk
        want = row * ld + col
        if got != want:
            where = f"a_tile_offset(warp={warp}, i={i}, kk={kk}, warps_n={warps_n}, lda={ld})"
            return _fail(f"{where} = {got}, which is row {got // ld}, column {got % ld} of As; expected {want}: "
                         f"row {row}, column {col} (the first element of the 16×16 tile that a[{i}] holds)",
                         f"{where} = {got}，即 As 的第 {got // ld} 行、第 {got % ld} 列；应为 {want}："
                         f"第 {row} 行、第 {col} 列（a[{i}] 所持 16×16 分块的第一个元素）")
    for (warp, j, kk, warps_n, ld), got in values["b_tile_offset"].items():
        row, col = kk, 32 * (warp % warps_n) + 16 * j
        want = row * ld + col
        if got != want:
            where = f"b_tile_offset(warp={warp}, j={j}, kk={kk}, warps_n={warps_n}, ldb={ld})"
            return _fail(f"{where} = {got}, which is row {got // ld}, column {got % ld} of Bs; expected {want}: "
                         f"row {row}, column {col} (the first element of the 16×16 tile that b[{j}] holds)",
                         f"{where} = {got}，即 Bs 的第 {got // ld} 行、第 {got % ld} 列；应为 {want}："
                         f"第 {row} 行、第 {col} 列（b[{j}] 所持 16×16 分块的第一个元素）")
    return Step(STEP, True, "every warp's A and B fragments start at the right element, for 1–16 warps and "
                "three row lengths", "在 1–16 个线程束、三种行长下，每个线程束的 A、B 片段都从正确的元素开始")


# Level 9: the cp.async ring of wmma_pipelined ------------------------------------------------------

RING_STAGES = (2, 3, 4)
RING_K_TILES = 40


def _cp_async_ring_calls() -> Calls:
    return {"stage_of": [(kt, s) for s in RING_STAGES for kt in range(RING_K_TILES)],
            "groups_in_flight": [(s,) for s in RING_STAGES]}


def _cp_async_ring_judge(values: Table) -> Step:
    stage_of, in_flight = values["stage_of"], values["groups_in_flight"]
    for stages in RING_STAGES:
        for kt in range(RING_K_TILES):
            x = stage_of[(kt, stages)]
            if not 0 <= x < stages:
                return _fail(f"stage_of({kt}, {stages}) = {x}: with {stages} stages there are only stages 0–{stages - 1}",
                             f"stage_of({kt}, {stages}) = {x}：{stages} 个流水级时只有第 0–{stages - 1} 个流水级")
        holds: dict[int, int] = {}
        for t in range(stages - 1):  # the prologue: k-tiles 0 … STAGES-2 in flight
            x = stage_of[(t, stages)]
            if x in holds:
                return _fail(f"with {stages} stages, k-tiles {holds[x]} and {t} both go to stage {x} before either is "
                             f"read: stage_of({holds[x]}, {stages}) = stage_of({t}, {stages}) = {x}",
                             f"{stages} 个流水级时，k 分块 {holds[x]} 和 {t} 在被读取之前都被拷进第 {x} 级："
                             f"stage_of({holds[x]}, {stages}) = stage_of({t}, {stages}) = {x}")
            holds[x] = t
        for kt in range(RING_K_TILES):
            t = kt + stages - 1  # after the barrier of k-tile kt: every warp is done with kt - 1
            if t < RING_K_TILES:
                x = stage_of[(t, stages)]
                u = holds.get(x)
                if u is not None and u >= kt:
                    what_en = "which this very iteration is about to read" if u == kt else "not read yet"
                    what_zh = "本轮迭代正要读取它" if u == kt else "它还没有被读取"
                    free_en = f": only the stage of k-tile {kt - 1} is free then" if kt > 0 else ""
                    free_zh = f"：此时只有 k 分块 {kt - 1} 所在的流水级是空闲的" if kt > 0 else ""
                    return _fail(f"with {stages} stages, iteration {kt} copies k-tile {t} into stage "
                                 f"stage_of({t}, {stages}) = {x}, which still holds k-tile {u}, {what_en}{free_en}",
                                 f"{stages} 个流水级时，第 {kt} 轮迭代把 k 分块 {t} 拷进第 stage_of({t}, {stages}) = {x} "
                                 f"级，而该级仍存放着 k 分块 {u}，{what_zh}{free_zh}")
                holds[x] = t
    for stages in RING_STAGES:
        n = in_flight[(stages,)]
        if n < 0:
            return _fail(f"groups_in_flight({stages}) = {n}: cp.async.wait_group takes a count of groups, 0 or more",
                         f"groups_in_flight({stages}) = {n}：cp.async.wait_group 的参数是拷贝组的个数，不能小于 0")
        if n > stages - 2:
            return _fail(f"groups_in_flight({stages}) = {n}: with {stages} stages, when iteration kt waits, the groups of "
                         f"k-tiles up to kt + {stages - 2} have been committed, so leaving {n} in flight lets the warps "
                         f"read k-tile kt before its copies have landed; expected {stages - 2}",
                         f"groups_in_flight({stages}) = {n}：{stages} 个流水级时，第 kt 轮等待时已提交到 k 分块 "
                         f"kt + {stages - 2} 的拷贝组，允许 {n} 组仍在途，线程束就会在 k 分块 kt 的拷贝到达之前读取它；"
                         f"应为 {stages - 2}")
        if n < stages - 2:
            return _fail(f"groups_in_flight({stages}) = {n}: correct but slow — with {stages} stages the wait also waits "
                         f"for k-tiles the warps do not need yet, so only {n + 1} k-tile{'s overlap' if n else ' overlaps'} the "
                         f"math instead of {stages - 1}; expected {stages - 2}",
                         f"groups_in_flight({stages}) = {n}：结果正确但慢——{stages} 个流水级时，这次等待还会等那些线程束"
                         f"暂时用不到的 k 分块，于是只有 {n + 1} 个 k 分块与计算重叠，而不是 {stages - 1} 个；应为 {stages - 2}")
    return Step(STEP, True, f"the ring is safe and full for {', '.join(map(str, RING_STAGES))} stages over "
                f"{RING_K_TILES} k-tiles: every k-tile is read from its own stage after it has landed, and no copy "
                "lands in a stage still to be read",
                f"在 {'、'.join(map(str, RING_STAGES))} 个流水级、{RING_K_TILES} 个 k 分块上，环形缓冲既安全又满载："
                "每个 k 分块都在拷贝到达后从自己的流水级读取，没有拷贝落进仍待读取的流水级")


# Level 10: ldmatrix for the mma.sync fragments ------------------------------------------------------

def _swizzle_a(row: int, chunk: int) -> int:
    """10_mma_pipeline.cu's swizzle_a (BK = 32: 4 chunks of 16 bytes per row of A)."""
    return row * 4 + (chunk ^ ((row >> 1) & 3))


A_STAGE_ROWS = 128
_UNSWIZZLE_A = {_swizzle_a(r, c): (r, c) for r in range(A_STAGE_ROWS) for c in range(4)}
_A_REGISTER = ("a[i][0]", "a[i][1]", "a[i][2]", "a[i][3]")


def _ldmatrix_a_calls() -> Calls:
    return {"a_ldmatrix_chunk": [(lane, tile_row, kk) for tile_row in range(0, A_STAGE_ROWS, 16) for kk in (0, 16)
                                 for lane in range(32)]}


def _ldmatrix_a_judge(values: Table) -> Step:
    got = values["a_ldmatrix_chunk"]
    if all(got[(lane, tr, kk)] == (tr + lane % 16) * 4 + kk // 8 + lane // 16 for (lane, tr, kk) in got):
        return _fail("your lanes give the right rows and chunks, but unswizzled: the copy-in stored chunk c of row r at "
                     "swizzle_a(r, c), so the address each lane gives must go through swizzle_a too",
                     "你的各线程给出的行和块是对的，但没有经过 swizzle：拷入时第 r 行的第 c 块存放在 swizzle_a(r, c)，"
                     "所以每个线程给出的地址也必须经过 swizzle_a")
    for tile_row in range(0, A_STAGE_ROWS, 16):
        for kk in (0, 16):
            supplied = {}
            for lane in range(32):
                p = got[(lane, tile_row, kk)]
                if p not in _UNSWIZZLE_A:
                    return _fail(f"a_ldmatrix_chunk(lane={lane}, tile_row={tile_row}, kk={kk}) = {p}: outside A's stage "
                                 f"(chunks 0–{4 * A_STAGE_ROWS - 1})",
                                 f"a_ldmatrix_chunk(lane={lane}, tile_row={tile_row}, kk={kk}) = {p}：超出了 A 的流水级"
                                 f"（第 0–{4 * A_STAGE_ROWS - 1} 块）")
                supplied[lane] = _UNSWIZZLE_A[p]
            for lane in range(32):
                g, q = lane // 4, lane % 4
                for reg in range(4):
                    source_lane = 8 * reg + g  # ldmatrix: matrix `reg`, row g comes from this lane's address
                    row, chunk = supplied[source_lane]
                    got_row, got_col = row - tile_row, chunk * 8 - kk + 2 * q
                    want_row, want_col = g + 8 * (reg % 2), 2 * q + 8 * (reg // 2)
                    if (got_row, got_col) != (want_row, want_col):
                        where = (f"tile_row {tile_row}, kk {kk}: lane {lane}, register {reg} ({_A_REGISTER[reg]}, filled "
                                 f"from the row lane {source_lane} gives)")
                        inside = 0 <= got_row < 16 and 0 <= got_col < 16
                        got_en = (f"row {got_row}, columns {got_col}–{got_col + 1} of the 16×16 piece" if inside else
                                  f"row {row}, columns {chunk * 8 + 2 * q}–{chunk * 8 + 2 * q + 1} of the stage, "
                                  f"outside the piece (rows {tile_row}–{tile_row + 15}, columns {kk}–{kk + 15})")
                        got_zh = (f" 16×16 分块的第 {got_row} 行、第 {got_col}–{got_col + 1} 列" if inside else
                                  f"流水级的第 {row} 行、第 {chunk * 8 + 2 * q}–{chunk * 8 + 2 * q + 1} 列，在分块"
                                  f"（第 {tile_row}–{tile_row + 15} 行、第 {kk}–{kk + 15} 列）之外")
                        if got_row != want_row:
                            short_en, short_zh = f"your row {got_row}, expected {want_row}", f"你的行是 {got_row}，应为 {want_row}"
                        else:
                            short_en = f"your columns {got_col}–{got_col + 1}, expected {want_col}–{want_col + 1}"
                            short_zh = f"你的列是 {got_col}–{got_col + 1}，应为 {want_col}–{want_col + 1}"
                        return _fail(f"{where}: {short_en} — it receives {got_en}; "
                                     f"mma.sync wants row {want_row}, columns {want_col}–{want_col + 1}",
                                     f"tile_row {tile_row}，kk {kk}：线程 {lane} 的寄存器 {reg}（{_A_REGISTER[reg]}，由线程 "
                                     f"{source_lane} 给出的那一行填充）：{short_zh}——它拿到的是"
                                     f"{got_zh}；mma.sync 要求第 {want_row} 行、第 {want_col}–{want_col + 1} 列")
    return Step(STEP, True, "every lane's register of every A fragment holds the elements mma.sync.m16n8k16 expects "
                "(8 piece rows × 2 k-steps, all 32 lanes, 4 registers)",
                "所有 A 片段中每个线程的每个寄存器都存放着 mma.sync.m16n8k16 期望的元素（8 个分块行 × 2 个 k 步，"
                "32 个线程，4 个寄存器）")


_B_REGISTER = ("b[2j][0]", "b[2j][1]", "b[2j+1][0]", "b[2j+1][1]")


def _mma_b_c_calls() -> Calls:
    lanes = [(lane,) for lane in range(32)]
    pairs = [(lane, reg) for lane in range(32) for reg in range(4)]
    return {"b_ldmatrix_k": lanes, "b_ldmatrix_chunk": lanes, "accumulator_row": pairs, "accumulator_col": pairs}


def _mma_b_c_judge(values: Table) -> Step:
    bk, bc = values["b_ldmatrix_k"], values["b_ldmatrix_chunk"]
    for lane in range(32):
        k, c = bk[(lane,)], bc[(lane,)]
        if not (0 <= k < 16 and 0 <= c < 2):
            return _fail(f"lane {lane} gives k row {k}, chunk {c}: outside the 16 (k) × 16 (n) piece of B that one "
                         "ldmatrix.x4.trans reads (k rows 0–15, chunks 0–1 of 8 columns)",
                         f"线程 {lane} 给出第 {k} 个 k 行、第 {c} 块：超出了一条 ldmatrix.x4.trans 读取的 16（k）× 16（n）"
                         "的 B 分块（k 行 0–15，每块 8 列的第 0–1 块）")
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for reg in range(4):
            first = 8 * reg + 2 * q  # .trans: matrix reg's rows 2q and 2q+1 give this lane's pair, column g
            got = [(bk[(s,)], 8 * bc[(s,)] + g) for s in (first, first + 1)]
            want = [(2 * q + 8 * (reg % 2) + h, g + 8 * (reg // 2)) for h in (0, 1)]
            if got != want:
                return _fail(f"lane {lane}, register {reg} ({_B_REGISTER[reg]}, filled from the rows lanes {first} and "
                             f"{first + 1} give): your k rows {got[0][0]}, {got[1][0]} at columns n {got[0][1]}, "
                             f"{got[1][1]}; expected k rows {want[0][0]}, {want[1][0]} at column n {want[0][1]}",
                             f"线程 {lane} 的寄存器 {reg}（{_B_REGISTER[reg]}，由线程 {first} 和 {first + 1} 给出的行填充）："
                             f"你的是第 {got[0][0]}、{got[1][0]} 个 k 行，第 {got[0][1]}、{got[1][1]} 列（n）；"
                             f"应为第 {want[0][0]}、{want[1][0]} 个 k 行，第 {want[0][1]} 列（n）")
    rows, cols = values["accumulator_row"], values["accumulator_col"]
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for reg in range(4):
            want = (g + 8 * (reg // 2), 2 * q + reg % 2)
            got = (rows[(lane, reg)], cols[(lane, reg)])
            if got != want:
                return _fail(f"lane {lane}, accumulator register {reg} (acc[i][j][{reg}]): your row {got[0]}, column "
                             f"{got[1]}; expected row {want[0]}, column {want[1]} of the 16×8 tile of C",
                             f"线程 {lane} 的累加寄存器 {reg}（acc[i][j][{reg}]）：你的是第 {got[0]} 行、第 {got[1]} 列；"
                             f"应为 C 的 16×8 分块的第 {want[0]} 行、第 {want[1]} 列")
    return Step(STEP, True, "all 32 lanes give ldmatrix.trans the rows that build the B fragments of two n8 tiles, and "
                "every accumulator register goes to its element of C",
                "32 个线程给 ldmatrix.trans 的行恰好拼出两个 n8 分块的 B 片段，每个累加寄存器都写到 C 中属于它的元素")


# Level 11: the full/empty handshake of a TMA ring ----------------------------------------------------

HANDSHAKE_STAGES = (2, 3, 4)
CONSUMER_WARPS = 8   # empty[s] is initialised to expect one arrival per consumer warp
HANDSHAKE_IT = 48    # ring positions evaluated (k-tiles over all tiles of a persistent block)


class _Barrier:
    """An mbarrier: `pending` arrivals left in the current phase; `phase` phases completed so far."""

    def __init__(self, count: int):
        self.count, self.pending, self.phase = count, count, 0

    def arrive(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.phase += 1
            self.pending = self.count

    def passes(self, parity: int) -> bool:
        """try_wait.parity: the phase of this parity has completed (the current one is the other parity)."""
        return self.phase % 2 != parity % 2


@dataclass
class _RingProblem:
    en: str
    zh: str


def simulate_ring(stages: int, k_tiles: int, producer: tuple[Callable[[int], int], Callable[[int], int]],
                  consumer: tuple[Callable[[int], int], Callable[[int], int]], policy: str,
                  rng: random.Random) -> Optional[_RingProblem]:
    """One interleaving of a producer (wait empty[s] at a parity, then a TMA copy into s completing on
    full[s]), CONSUMER_WARPS consumer warps (wait full[s], read s, arrive on empty[s]) and the copy
    engine (lands the copies in flight in any order). producer/consumer: (stage of it, parity of it).
    None if nothing went wrong, else what did."""
    full = [_Barrier(1) for _ in range(stages)]
    empty = [_Barrier(CONSUMER_WARPS) for _ in range(stages)]
    holds: list[Optional[int]] = [None] * stages   # k-tile in each stage
    landed = [False] * stages
    released = [-1] * CONSUMER_WARPS              # last k-tile each warp has released
    reading = [False] * CONSUMER_WARPS            # passed its wait for k-tile it[w], not yet released
    produced, it = 0, [0] * CONSUMER_WARPS
    in_flight: list[int] = []                      # stages whose copy has not landed
    p_stage, p_parity = producer
    c_stage, c_parity = consumer
    where = f"{stages} stages, {k_tiles} k-tile{'s' if k_tiles > 1 else ''}"
    where_zh = f"{stages} 个流水级、{k_tiles} 个 k 分块"

    while True:
        moves: list[tuple[str, int]] = []
        if produced < k_tiles and empty[p_stage(produced)].passes(p_parity(produced)):
            moves.append(("producer", 0))
        for w in range(CONSUMER_WARPS):
            if it[w] < k_tiles and (reading[w] or full[c_stage(it[w])].passes(c_parity(it[w]))):
                moves.append(("consumer", w))
        if in_flight:
            moves.append(("tma", 0))
        if not moves:
            if produced == k_tiles and all(i == k_tiles for i in it):
                return None
            waits = []
            if produced < k_tiles:
                s = p_stage(produced)
                waits.append((f"the producer waits on empty[{s}] with parity {p_parity(produced) % 2} to refill it "
                              f"with k-tile {produced}",
                              f"生产者以相位 {p_parity(produced) % 2} 等待 empty[{s}]，准备把 k 分块 {produced} 填进去"))
            stuck = [w for w in range(CONSUMER_WARPS) if it[w] < k_tiles]
            if stuck:
                w = stuck[0]
                s = c_stage(it[w])
                waits.append((f"consumer warp {w} waits on full[{s}] with parity {c_parity(it[w]) % 2} for k-tile {it[w]}",
                              f"消费者线程束 {w} 以相位 {c_parity(it[w]) % 2} 等待 full[{s}]，等 k 分块 {it[w]}"))
            return _RingProblem(f"deadlock ({where}): " + "; ".join(e for e, _ in waits) + ", and no arrival that "
                                "would complete those phases can come",
                                f"死锁（{where_zh}）：" + "；".join(z for _, z in waits) + "，而能让这些相位完成的 arrive "
                                "永远不会到来")
        if policy == "producer_first":
            pick = next((m for m in moves if m[0] == "producer"), moves[0])
        elif policy == "consumers_first":
            pick = next((m for m in moves if m[0] == "consumer"), moves[0])
        elif policy == "late_copies":
            pick = next((m for m in moves if m[0] != "tma"), moves[0])
        else:
            pick = rng.choice(moves)
        kind, w = pick
        if kind == "producer":
            s = p_stage(produced)
            old = holds[s]
            if old is not None and not landed[s]:
                return _RingProblem(f"{where}: the producer refills stage {s} with k-tile {produced} while the copy of "
                                    f"k-tile {old} into it has not landed yet",
                                    f"{where_zh}：k 分块 {old} 拷进第 {s} 级的数据还没有到达，生产者就又把 k 分块 "
                                    f"{produced} 填进了这一级")
            if old is not None:
                late = [v for v in range(CONSUMER_WARPS) if released[v] < old]
                if late:
                    return _RingProblem(f"{where}: the producer overwrites stage {s} with k-tile {produced} while consumer "
                                        f"warp {late[0]} has not released k-tile {old} in it "
                                        f"({'still reading it' if reading[late[0]] and it[late[0]] == old else 'not done with it yet'})",
                                        f"{where_zh}：消费者线程束 {late[0]} 还没有释放第 {s} 级中的 k 分块 {old}"
                                        f"（{'仍在读取' if reading[late[0]] and it[late[0]] == old else '还没用完'}），"
                                        f"生产者就用 k 分块 {produced} 覆盖了它")
            holds[s], landed[s] = produced, False
            in_flight.append(s)
            produced += 1
        elif kind == "tma":
            s = in_flight.pop(rng.randrange(len(in_flight)) if policy == "random" else 0)
            landed[s] = True
            full[s].arrive()  # the copy's bytes complete the producer's expect_tx
        elif not reading[w]:
            s = c_stage(it[w])
            if holds[s] != it[w] or not landed[s]:
                state_en = ("nothing yet" if holds[s] is None else f"k-tile {holds[s]}" +
                            ("" if landed[s] else ", whose copy has not landed"))
                state_zh = ("还没有任何数据" if holds[s] is None else f"存放的是 k 分块 {holds[s]}" +
                            ("" if landed[s] else "，而且其拷贝尚未到达"))
                return _RingProblem(f"{where}: consumer warp {w} passes its wait on full[{s}] (parity "
                                    f"{c_parity(it[w]) % 2}) for k-tile {it[w]} and reads stage {s}, which holds {state_en}",
                                    f"{where_zh}：消费者线程束 {w} 为 k 分块 {it[w]} 以相位 {c_parity(it[w]) % 2} 等待 "
                                    f"full[{s}] 后便读取第 {s} 级，而这一级{state_zh}")
            reading[w] = True
        else:  # wgmma_wait<0>() is done: release the stage
            empty[c_stage(it[w])].arrive()
            released[w], reading[w] = it[w], False
            it[w] += 1


def _ring_reference(stages: int) -> tuple[tuple[Callable[[int], int], Callable[[int], int]],
                                          tuple[Callable[[int], int], Callable[[int], int]]]:
    """The level's own handshake: stage it % STAGES; the producer waits on empty at parity
    (it / STAGES + 1) % 2 (the first pass round the ring finds every stage free), the consumers on
    full at (it / STAGES) % 2."""
    return ((lambda i: i % stages, lambda i: (i // stages + 1) % 2), (lambda i: i % stages, lambda i: (i // stages) % 2))


def _handshake_calls(parity_name: str) -> Callable[[], Calls]:
    def calls() -> Calls:
        args = [(i, s) for s in HANDSHAKE_STAGES for i in range(HANDSHAKE_IT)]
        return {"stage_of": args, parity_name: args}
    return calls


def _handshake_judge(side: str, parity_name: str) -> Callable[[Table], Step]:
    """side: which half of the handshake the learner wrote ("consumer" or "producer")."""
    def judge(values: Table) -> Step:
        stage_of, parity = values["stage_of"], values[parity_name]
        for (i, stages), s in stage_of.items():
            if not 0 <= s < stages:
                return _fail(f"stage_of({i}, {stages}) = {s}: with {stages} stages there are only stages 0–{stages - 1}",
                             f"stage_of({i}, {stages}) = {s}：{stages} 个流水级时只有第 0–{stages - 1} 个流水级")
        for stages in HANDSHAKE_STAGES:
            reference_producer, reference_consumer = _ring_reference(stages)
            mine = (lambda i, st=stages: stage_of[(i, st)], lambda i, st=stages: parity[(i, st)])
            producer, consumer = (reference_producer, mine) if side == "consumer" else (mine, reference_consumer)
            reference = reference_consumer if side == "consumer" else reference_producer
            for k_tiles in sorted({1, stages, 2 * stages + 1, HANDSHAKE_IT}):
                for run, policy in enumerate(("producer_first", "consumers_first", "late_copies",
                                              "random", "random", "random")):
                    problem = simulate_ring(stages, k_tiles, producer, consumer, policy, random.Random(run))
                    if problem is None:
                        continue
                    wrong = next(((name, i, f(i), r(i)) for i in range(k_tiles)
                                  for name, f, r in (("stage_of", mine[0], reference[0]),
                                                     (parity_name, mine[1], reference[1]))
                                  if f(i) % (stages if name == "stage_of" else 2) != r(i)), None)
                    tail_en = tail_zh = ""
                    if wrong:
                        name, i, got, want = wrong
                        tail_en = f". First wrong input: {name}({i}, {stages}) = {got}, expected {want}"
                        tail_zh = f"。第一个出错的输入：{name}({i}, {stages}) = {got}，应为 {want}"
                        if name == parity_name and i >= stages and all(
                                parity[(j, stages)] % 2 == reference[1](j) for j in range(stages)):
                            tail_en += " (right on the first pass round the ring, wrong after it wraps)"
                            tail_zh += "（绕环第一圈是对的，绕回之后就错了）"
                    return _fail(problem.en + tail_en, problem.zh + tail_zh)
        return Step(STEP, True, f"no stage read before it is full, none overwritten before it is emptied, no deadlock: "
                    f"{', '.join(map(str, HANDSHAKE_STAGES))} stages, 1–{HANDSHAKE_IT} k-tiles, producer and "
                    f"{CONSUMER_WARPS} consumer warps in many interleavings",
                    f"没有流水级在装满前被读取，没有流水级在清空前被覆盖，也没有死锁："
                    f"{'、'.join(map(str, HANDSHAKE_STAGES))} 个流水级，1–{HANDSHAKE_IT} 个 k 分块，生产者与 "
                    f"{CONSUMER_WARPS} 个消费者线程束的多种交错执行")
    return judge


MODELS: dict[str, Model] = {
    "wmma_tile_offsets": Model((("a_tile_offset", 5), ("b_tile_offset", 5)), (), _wmma_calls, _wmma_judge),
    "cp_async_ring": Model((("stage_of", 2), ("groups_in_flight", 1)), (), _cp_async_ring_calls, _cp_async_ring_judge),
    "ldmatrix_a": Model((("a_ldmatrix_chunk", 3),), (("swizzle_a", 2),), _ldmatrix_a_calls, _ldmatrix_a_judge),
    "mma_b_and_c": Model((("b_ldmatrix_k", 1), ("b_ldmatrix_chunk", 1), ("accumulator_row", 2),
                          ("accumulator_col", 2)), (), _mma_b_c_calls, _mma_b_c_judge),
    "consumer_handshake": Model((("stage_of", 2), ("full_parity", 2)), (), _handshake_calls("full_parity"),
                                _handshake_judge("consumer", "full_parity")),
    "producer_handshake": Model((("stage_of", 2), ("empty_parity", 2)), (), _handshake_calls("empty_parity"),
                                _handshake_judge("producer", "empty_parity")),
}


def check(attempt: Attempt, check_dict: dict) -> Step:
    """The "index_math" check: the functions the exercise asks for, taken from the learner's file,
    run on the CPU over every input and compared with the model `check_dict["model"]`; once they are
    right, the kernel must call each of them."""
    model = MODELS[check_dict["model"]]
    source = attempt.source
    code = code_only(source)
    try:
        functions = [find_function(source, code, name, arity) for name, arity in model.functions]
        helpers = [find_function(source, code, name, arity) for name, arity in model.helpers]
        values = evaluate(functions, helpers, model.calls(), attempt.file_name)
        verdict = model.judge(values)
        if verdict.passed is False:
            return verdict
        for f in functions:  # right values: now the kernel must be using them
            if not called_outside(code, f.name, functions):
                raise Refusal(f"`{f.name}` is defined but never called: the kernel must use it for the index it "
                              "computes (the grader checks the function, so a kernel that works the index out "
                              "differently is not checked)",
                              f"`{f.name}` 定义了却从未被调用：内核必须用它来计算对应的下标（评分器检查的是这个函数，"
                              "内核若用别的方式算下标，就没有被检查到）")
    except Refusal as refused:
        return _fail(refused.en, refused.zh)
    except cpu_backend.CompilerNotFoundError as err:
        return Step(STEP, None, f"not checked here: {err.en}", f"这里未检查：{err.zh}")
    return verdict
