"""What the grader asks the compilers before it runs an answer: one token stream, device code only.

A regex over the source cannot tell what the compiler will see (a digraph `%:include`, an `#include` split
by a backslash-newline, a macro name rebuilt by token pasting). So:

1. **The preprocessor reads the answer once** (`g++ -E -undef -nostdinc -H`): no compiler's own macros are
   defined (so no `#if` can tell the CPU run from the GPU build), and only the headers the exercise's
   starter includes can be found; `-H` lists every file the answer really opened, and anything else is
   refused. Those headers stay `#include` lines in the result, so each build includes the course's own
   header its own way; the learner's tokens are the same in both builds.
2. **The tokens are screened**: nothing that switches the CPU run's instrumentation off or steps around it
   (`__attribute__`, `[[...]]` attributes, `asm`, `#pragma` other than `unroll`, compiler builtins such as
   `__atomic_*` / `__sync_*` / `__builtin_*`), and no reserved name (`__x`, `_X`) that is not part of the
   CUDA C the course runs (RESERVED_ALLOWED, taken from the CPU backend's own header), and no name of the CPU
   runtime's own (`gc_...`: the runtime is linked into the answer's library, where a definition of the same name
   would replace its checks).
3. **The GPU compiler builds the very same text** (NVRTC and ptxas, no GPU needed): a call to anything
   that is not device code (`exit`, `fopen`, `dlsym`, a function declared but never defined) fails there,
   and so do more shared memory than a block may have; local memory over what a GPU thread may use is
   refused from the compile report.
4. After the CPU build, **its machine code is read** (objdump): no indirect call or jump in the answer's own
   lines (a function pointer made from an integer could call anything in the process).

screen(...) returns the preprocessed text that both builds compile, or a failed Step saying what to change.
"""
from __future__ import annotations

import bisect
import functools
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from ..levels import KERNEL_DIR

PREPROCESS_TIMEOUT_S = 30
LOCAL_MEMORY_LIMIT = 256 * 1024   # bytes per thread: the CPU run's stack (a GPU allows 512 KiB)
_MARK = "GC_ALLOWED_INCLUDE_"


@functools.lru_cache(maxsize=1)
def reserved_allowed() -> frozenset[str]:
    """The reserved names (`__x`, `_X`) an answer may use: those of the CUDA C surface the CPU backend
    provides (part 1 of cuda_cpu_compat.h), less the compiler's own."""
    text = (KERNEL_DIR / "cuda_cpu_compat.h").read_text(encoding="utf-8")
    surface = text[text.index("Part 1"):text.index("Part 2")]
    names = set(re.findall(r"\b_[_A-Z]\w*", surface))
    return frozenset(names - {"__attribute__", "__builtin_return_address", "__printf__", "__LINE__"} | {"__restrict"})


REFUSED_WORDS = {
    "asm": "inline assembly runs outside the CPU run's checks",
    "__asm__": "inline assembly runs outside the CPU run's checks",
    "__asm": "inline assembly runs outside the CPU run's checks",
    "__attribute__": "an attribute can switch the CPU run's checks off",
    "__attribute": "an attribute can switch the CPU run's checks off",
    "__declspec": "an attribute can switch the CPU run's checks off",
}
REFUSED_WORDS_ZH = {
    "asm": "内联汇编不受 CPU 运行的检查", "__asm__": "内联汇编不受 CPU 运行的检查", "__asm": "内联汇编不受 CPU 运行的检查",
    "__attribute__": "属性可以关掉 CPU 运行的检查", "__attribute": "属性可以关掉 CPU 运行的检查",
    "__declspec": "属性可以关掉 CPU 运行的检查",
}


class Refusal(Exception):
    def __init__(self, en: str, zh: str):
        super().__init__(en)
        self.en, self.zh = en, zh


def _includes_of(starter: str) -> list[str]:
    """The spellings of the starter's includes ("common.cuh", <cuda_pipeline.h>), as the preprocessor
    would find them (the starter is the course's own text: a plain reading is enough)."""
    return [m.group(1) for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*([<"][^>"]+[>"])', starter, re.M)]


def preprocess(source: str, starter: str, file_name: str) -> str:
    """The answer preprocessed once with no compiler's macros and only the starter's headers (kept as
    #include lines); raises Refusal for anything else the answer opens or for a preprocessor error."""
    from gemm_course.run.cpu_backend import find_compiler

    allowed = _includes_of(starter)
    with tempfile.TemporaryDirectory(prefix="gemm_course_screen_") as tmp:
        folder = Path(tmp) / "allowed"
        folder.mkdir()
        for n, spelled in enumerate(allowed):
            stub = folder / spelled[1:-1]
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text(f"{_MARK}{n}\n", encoding="utf-8")
        answer = Path(tmp) / file_name
        answer.write_text(source, encoding="utf-8")
        cmd = [*find_compiler(), "-E", "-H", "-undef", "-nostdinc", "-x", "c++", "-std=c++17", f"-I{folder}",
               f"-iquote{folder}", file_name]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=PREPROCESS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Refusal(f"{file_name}: the preprocessor did not finish within {PREPROCESS_TIMEOUT_S} s",
                          f"{file_name}：预处理在 {PREPROCESS_TIMEOUT_S} 秒内没有完成") from None
        opened = [line.lstrip(".").strip() for line in done.stderr.splitlines() if re.match(r"^\.+ ", line)]
        outside = [p for p in opened if not Path(tmp, p).resolve().is_relative_to(folder.resolve())]
        missing = re.search(r"fatal error: ([^:\n]+): No such file or directory", done.stderr)
        if outside or missing:
            what = outside[0] if outside else missing.group(1)
            raise Refusal(f"{file_name}: #include {what} is not allowed here: write the kernel yourself, with the "
                          f"includes the starter has ({', '.join(allowed) or 'none'})",
                          f"{file_name}：这里不允许 #include {what}：请自己写出内核，只使用初始代码已有的 include"
                          f"（{'、'.join(allowed) or '无'}）")
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:200])
            raise Refusal(f"{file_name}: the preprocessor stopped: {first.replace(tmp + '/', '')}",
                          f"{file_name}：预处理出错：{first.replace(tmp + '/', '')}")
    text = done.stdout
    for n, spelled in enumerate(allowed):
        text = re.sub(rf"^{_MARK}{n}$", f"#include {spelled}", text, flags=re.M)
    # GNU line markers (# 12 "file" 2) as #line directives, which every compiler reads alike; the
    # preprocessor's own (line 0, <built-in>) dropped.
    # Only the answer's own markers are kept: the stubs' (and the preprocessor's <built-in>) name this
    # grading's temporary folder, which would make every grading's text, and so every cache key, new.
    text = re.sub(r'^# \d+ "(?!' + re.escape(file_name) + r'")[^"]*"[ \d]*$|^# 0 "[^"]*"[ \d]*$', "", text, flags=re.M)
    return re.sub(r'^# (\d+) ("[^"]*")[ \d]*$', r"#line \1 \2", text, flags=re.M)


def _code_tokens(text: str) -> str:
    """The text with string and character literals blanked and directive lines dropped (line count kept)."""
    text = re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', lambda m: " " * len(m.group(0)), text)
    return re.sub(r"^[ \t]*#[^\n]*", lambda m: " " * len(m.group(0)), text, flags=re.M)


def _line_in(text: str, index: int, file_name: str) -> int:
    """The answer's line of a position in the preprocessed text (from its #line directives)."""
    line, here = 1, 0
    for m in re.finditer(r'^#line (\d+) "([^"]*)"[^\n]*\n', text[:index], flags=re.M):
        line, here = int(m.group(1)), m.end()
    return line + text.count("\n", here, index)


def screen_tokens(text: str, file_name: str) -> None:
    """Raise Refusal for what would dodge the CPU run's checks or tell the builds apart."""
    for m in re.finditer(r"^[ \t]*#[ \t]*pragma\b(.*)$", text, re.M):
        if not re.fullmatch(r"\s*unroll(\s*\(?\s*\d*\s*\)?)?\s*", m.group(1)):
            line = _line_in(text, m.start(), file_name)
            raise Refusal(f"{file_name}:{line}: #pragma{m.group(1)} is not allowed here (only #pragma unroll): it "
                          "could change how the CPU run is checked",
                          f"{file_name}:{line}：这里不允许 #pragma{m.group(1)}（只允许 #pragma unroll）：它可能改变 CPU "
                          "运行的检查方式")
    code = _code_tokens(text)
    m = re.search(r"\[\s*\[", code)
    if m:
        line = _line_in(text, m.start(), file_name)
        raise Refusal(f"{file_name}:{line}: a [[...]] attribute is not allowed here: an attribute can switch the CPU "
                      "run's checks off", f"{file_name}:{line}：这里不允许 [[...]] 属性：属性可以关掉 CPU 运行的检查")
    allowed = reserved_allowed()
    for m in re.finditer(r"\b[A-Za-z_]\w*", code):
        word = m.group(0)
        if word.lower().startswith("gc_"):
            line = _line_in(text, m.start(), file_name)
            raise Refusal(f"{file_name}:{line}: {word} is not allowed here: names starting with gc_ belong to the CPU "
                          "run's own runtime, which an answer may not define or change; rename it",
                          f"{file_name}:{line}：这里不允许使用 {word}：以 gc_ 开头的名称属于 CPU 运行自己的运行时，"
                          "答案不能定义或修改它们；请换个名字")
        if word in REFUSED_WORDS or (re.match(r"_[_A-Z]", word) and word not in allowed):
            line = _line_in(text, m.start(), file_name)
            why = REFUSED_WORDS.get(word) or ("a compiler builtin runs outside the CPU run's checks" if
                                              re.match(r"__(builtin|atomic|sync)_", word) else
                                              "a reserved name that is not part of the CUDA C the course runs "
                                              "(it can mean one thing to the GPU compiler and another on the CPU)")
            why_zh = REFUSED_WORDS_ZH.get(word) or ("编译器内建函数不受 CPU 运行的检查" if
                                                    re.match(r"__(builtin|atomic|sync)_", word) else
                                                    "这是保留名称，不属于本课程运行的 CUDA C（它在 GPU 编译器和 CPU 上可能含义不同）")
            raise Refusal(f"{file_name}:{line}: {word} is not allowed here: {why}",
                          f"{file_name}:{line}：这里不允许使用 {word}：{why_zh}")


def gpu_build(compile_text: Callable[[], Any], file_name: str) -> Optional[Any]:
    """Build the text for the GPU (NVRTC + ptxas, no GPU needed); returns the compile report (or None
    where NVRTC is missing here); raises Refusal with the compiler's first error."""
    try:
        report = compile_text()
    except RuntimeError as err:
        text = str(err)
        if "was not found" in text or "need CuPy" in text:
            return None
        keep = [line.strip() for line in text.splitlines()[1:] if "error" in line.lower() or "fatal" in line]
        first = (keep or [line.strip() for line in text.splitlines()[1:] if line.strip()] or ["?"])[0]
        first = re.sub(r"^\S+\.cu\((\d+)\)", rf"{file_name}:\1", first)
        hint_en, hint_zh = "", ""
        if "Unresolved extern function" in first or "host function" in first or "is undefined" in first:
            hint_en = ("; a kernel may call only device code (its own __device__ functions and CUDA's), not the C "
                       "library or the system")
            hint_zh = "；内核只能调用设备代码（它自己的 __device__ 函数和 CUDA 的函数），不能调用 C 库或系统函数"
        elif "shared data" in first or "too much shared" in first.lower():
            hint_en, hint_zh = "; a block may use at most 48 KB of static shared memory", "；一个线程块最多使用 48 KB 静态共享内存"
        raise Refusal(f"{file_name} does not compile for the GPU: {first}{hint_en}",
                      f"{file_name} 无法为 GPU 编译：{first}{hint_zh}") from None
    stack = int(getattr(report, "stack_bytes", 0) or 0)
    if stack > LOCAL_MEMORY_LIMIT:
        raise Refusal(f"{file_name} needs {stack:,} bytes of local memory per thread (its local arrays); a graded "
                      f"kernel may use at most {LOCAL_MEMORY_LIMIT:,} (keep large data in the arrays you are given)",
                      f"{file_name} 每个线程需要 {stack:,} 字节的局部内存（局部数组）；被评分的内核最多只能用 "
                      f"{LOCAL_MEMORY_LIMIT:,} 字节（大块数据请放在给定的数组里）")
    return report


@functools.lru_cache(maxsize=256)  # a library's path names its contents (the compile cache's key)
def indirect_calls(library: Path, source_name: str) -> Optional[str]:
    """The first "file:line" of the answer whose machine code calls or jumps through a pointer, or None.
    None too where objdump is missing (the file-size limit and the child's filesystem rules still hold)."""
    tool = shutil.which("objdump")
    if not tool:
        return None
    try:
        out = subprocess.run([tool, "-d", "-l", "--no-show-raw-insn", str(library)], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    # objdump -l puts a "file:line" line before the instructions of each source line. Both kinds of line are found
    # by one pass of a regular expression over the whole text (a library's listing has thousands of lines); each
    # indirect call or jump is then given the last location line before it.
    locations = [(m.start(), m.group(0).split(" (")[0]) for m in _LOCATION_LINE.finditer(out)]
    starts = [at for at, _ in locations]
    for call in _INDIRECT_CALL.finditer(out):
        i = bisect.bisect_right(starts, call.start()) - 1
        where = locations[i][1] if i >= 0 else ""
        if Path(where.rsplit(":", 1)[0]).name == source_name:
            return f"{source_name}:{where.rsplit(':', 1)[-1]}"
    return None


_LOCATION_LINE = re.compile(r"^(?:/|[\w./-]+:\d+).*$", re.M)  # "/path/file.cu:57" or "file.cu:57 (discriminator 1)"
_INDIRECT_CALL = re.compile(r"^(?!/|[\w./-]+:\d+).*\b(?:call|jmp)q?\s+\*.*$", re.M)
