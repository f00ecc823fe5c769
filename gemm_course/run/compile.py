"""One compile path for every level.

On a GPU, kernels are compiled by CuPy's RawModule (NVRTC under the hood) and cached per
(source text, options, kernel name), so moving a slider back to a known setting costs nothing.
Without a GPU, compile_report() compiles the very same source to a CUBIN with NVRTC (which needs
no GPU, only the nvidia-cuda-nvrtc wheel) and reads the resource usage from ptxas' log.
"""
from __future__ import annotations

import functools
import html
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from gemm_course import device
from gemm_course.levels import KERNEL_DIR, Level, get_level
from gemm_course.models import Occupancy, arch_limits, occupancy

COMPILE_OPTIONS: tuple[str, ...] = ("-std=c++17", f"-I{KERNEL_DIR}")
_HEADERS_NEEDED = ("cuda_fp16.h", "cuda_bf16.h", "mma.h", "crt/mma.h")


@functools.lru_cache(maxsize=1)
def cuda_include_dirs() -> tuple[str, ...]:
    """Directories that together hold cuda_fp16.h, cuda_bf16.h, mma.h and crt/mma.h, for NVRTC.

    NVRTC ships no CUDA headers. Looked for, in order: $CUDA_PATH or $CUDA_HOME; the pip wheels
    nvidia-cuda-runtime-cu12 and nvidia-cuda-nvcc-cu12 (or the CUDA 13 wheels' nvidia/cu13), which
    requirements.txt installs; /usr/local/cuda (a toolkit, as on Colab and most GPU machines).
    """
    import os
    from pathlib import Path

    candidates: list[list[Path]] = []
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            candidates.append([Path(os.environ[env]) / "include"])
    try:  # the wheels first: they match the NVRTC wheel that compiles with them
        import nvidia

        for root in map(Path, getattr(nvidia, "__path__", [])):
            candidates.append([root / "cuda_runtime" / "include", root / "cuda_nvcc" / "include"])
            candidates.append([root / "cu13" / "include"])
    except ImportError:
        pass
    candidates.append([Path("/usr/local/cuda/include")])
    for dirs in candidates:
        if all(any((d / h).is_file() for d in dirs) for h in _HEADERS_NEEDED):
            return tuple(str(d) for d in dirs if d.is_dir())
    raise RuntimeError(
        "the Tensor Core levels include cuda_fp16.h, cuda_bf16.h and mma.h, and no CUDA headers were found. Install "
        "them with `pip install nvidia-cuda-runtime-cu12 nvidia-cuda-nvcc-cu12` (requirements.txt does), "
        "or set CUDA_PATH to a CUDA toolkit / Tensor Core 各级的源码包含了 cuda_fp16.h、cuda_bf16.h 和 mma.h，但没有找到 "
        "CUDA 头文件。请用 `pip install nvidia-cuda-runtime-cu12 nvidia-cuda-nvcc-cu12` 安装（requirements.txt "
        "里已经包含），或者把 CUDA_PATH 设为一个 CUDA 工具包的目录")


def compile_options(level: Level) -> tuple[str, ...]:
    """NVRTC options for a level: the common ones, plus the CUDA include dirs where it needs them."""
    if not level.cuda_headers:
        return COMPILE_OPTIONS
    return COMPILE_OPTIONS + tuple(f"-I{d}" for d in cuda_include_dirs())


def kernel_source(level: str | int | Level) -> str:
    """The CUDA C source of a level, read from its file under gemm_course/kernels/."""
    return get_level(level).path.read_text(encoding="utf-8")


def show_source(level: str | int | Level, open: bool = False):  # noqa: A002
    """The level's source, folded behind a toggle that names its kernel and length (Jupyter, Colab and
    the built book); open=True shows it unfolded. Its comments come in English and Chinese twins: after
    gc.language("en") or ("zh") the listing keeps one language's (the book's switch picks one otherwise),
    and each label counts the lines of its own language's listing."""
    from gemm_course.bilingual.comments import in_chosen_language, in_language
    from gemm_course.bilingual.text import Fold, code_block, text

    lv = get_level(level)
    source = kernel_source(lv)
    n_en, n_zh = (len(in_language(source, lang).splitlines()) for lang in ("en", "zh"))
    name = lv.path.name
    return Fold(text(f"Kernel source: {name}, {n_en} lines (the full listing)",
                     f"内核源码：{name}，共 {n_zh} 行（完整代码）"), code_block(in_chosen_language(source)),
                open=open)


@functools.lru_cache(maxsize=256)
def _compiled_kernel(source: str, options: tuple[str, ...], name: str, arch: Optional[str] = None):
    """A cupy.RawKernel. arch=None: CuPy compiles for this GPU. arch="sm_90a" (an arch-specific
    target, which CuPy does not choose by itself): NVRTC builds the CUBIN here and CuPy loads it."""
    import cupy

    if arch is not None:
        import hashlib
        import tempfile
        from pathlib import Path

        cubin, mangled, _ = nvrtc_compile(source, name, arch, options)
        path = Path(tempfile.gettempdir()) / f"gemm_course_{hashlib.sha1(cubin).hexdigest()}.cubin"
        path.write_bytes(cubin)
        return cupy.RawModule(path=str(path)).get_function(mangled)
    module = cupy.RawModule(code=source, options=options, name_expressions=[name])
    try:
        return module.get_function(name)  # compiles here, on first use
    except Exception as err:  # NVRTC's message is long; lead with what was being compiled
        raise RuntimeError(f"compiling {name} failed / 编译 {name} 失败:\n{err}") from None


def get_kernel(level: str | int | Level, params: dict[str, Any], source: Optional[str] = None):
    """The compiled cupy.RawKernel for a resolved parameter setting (cached)."""
    lv = get_level(level)
    device.require_gpu(f"compiling level {lv.id} for launch")
    source = source if source is not None else kernel_source(lv)
    return _compiled_kernel(source, compile_options(lv), lv.kernel_name(params), lv.build_arch)


# --- the resource report ------------------------------------------------------------------------

@dataclass(frozen=True)
class CompileReport:
    level: str
    params: dict
    arch: str
    kernel: str
    registers: int
    static_shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    threads_per_block: int
    dynamic_shared_bytes: int
    occupancy: Occupancy
    log: str = field(repr=False)

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    def problems(self) -> list[tuple[str, str]]:
        """Hardware limits this configuration breaks or strains, as (english, chinese) messages."""
        lim = arch_limits(self.arch)
        out = []
        if self.static_shared_bytes > lim.static_shared_limit:
            out.append((f"static shared memory {self.static_shared_bytes} B exceeds the "
                        f"{lim.static_shared_limit} B static limit; use smaller tiles or dynamic "
                        "shared memory with the opt-in",
                        f"静态共享内存 {self.static_shared_bytes} B 超过 {lim.static_shared_limit} B "
                        "的静态上限；请减小分块，或改用动态共享内存并显式申请"))
        total_shared = self.static_shared_bytes + self.dynamic_shared_bytes
        if total_shared > lim.max_shared_per_block:
            out.append((f"{total_shared} B of shared memory per block exceeds {self.arch}'s "
                        f"{lim.max_shared_per_block} B", f"每个线程块 {total_shared} B 共享内存，超过 "
                        f"{self.arch} 的上限 {lim.max_shared_per_block} B"))
        if self.spills:
            out.append((f"registers spill to local memory ({self.spill_store_bytes} B stored, "
                        f"{self.spill_load_bytes} B loaded per thread); use smaller thread tiles",
                        f"寄存器溢出到局部内存（每线程写 {self.spill_store_bytes} B、读 "
                        f"{self.spill_load_bytes} B）；请减小线程分块"))
        if self.occupancy.blocks_per_sm == 0:
            out.append((f"not even one block fits on an SM of {self.arch} "
                        f"(limited by {self.occupancy.limited_by})",
                        f"{self.arch} 的一个 SM 连一个线程块都放不下"
                        f"（受限于{LIMITED_BY_ZH.get(self.occupancy.limited_by, self.occupancy.limited_by)}）"))
        return out

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("log")
        d["occupancy"]["fraction"] = self.occupancy.fraction
        return d

    def _rows(self) -> list[tuple[str, str, Any]]:
        """(English name, Chinese name, value): a value is a str (the same in both languages) or a Bilingual."""
        from gemm_course.bilingual.text import text

        occ = self.occupancy
        return [
            ("kernel", "内核", self.kernel),
            ("architecture", "架构", self.arch),
            ("threads per block", "每块线程数", str(self.threads_per_block)),
            ("registers per thread", "每线程寄存器", str(self.registers)),
            ("static shared memory per block", "每块静态共享内存", f"{self.static_shared_bytes} B"),
            ("dynamic shared memory per block", "每块动态共享内存", f"{self.dynamic_shared_bytes} B"),
            ("stack frame per thread", "每线程栈帧", f"{self.stack_bytes} B"),
            ("spill stores / loads", "溢出写 / 读", f"{self.spill_store_bytes} B / {self.spill_load_bytes} B"),
            ("resident blocks per SM", "每 SM 驻留线程块", str(occ.blocks_per_sm)),
            ("occupancy", "占用率",
             text(f"{occ.warps_per_sm}/{occ.max_warps_per_sm} warps = {occ.fraction:.0%} (limited by {occ.limited_by})",
                  f"{occ.warps_per_sm}/{occ.max_warps_per_sm} 个线程束 = {occ.fraction:.0%}"
                  f"（受限于{LIMITED_BY_ZH.get(occ.limited_by, occ.limited_by)}）")),
        ]

    def __str__(self) -> str:
        from gemm_course.bilingual.language import current_language

        lang = current_language()
        pick = {"en": lambda en, zh: en, "zh": lambda en, zh: zh}.get(lang, lambda en, zh: f"{en} / {zh}")
        lines = [f"{pick(en, zh)}: {v}" for en, zh, v in self._rows()]
        lines += [f"! {pick(en, zh)}" for en, zh in self.problems()]
        return "\n".join(lines)

    def summary(self):
        """One line with the key numbers, for the label of the folded report."""
        from gemm_course.bilingual.text import text

        occ = self.occupancy
        shared = self.static_shared_bytes + self.dynamic_shared_bytes
        warn_en = f"; ⚠ {len(self.problems())} problem(s)" if self.problems() else ""
        warn_zh = f"；⚠ {len(self.problems())} 个问题" if self.problems() else ""
        return text(f"Compile report, {self.kernel} on {self.arch}: {self.registers} registers, {shared} B shared "
                    f"memory, {self.threads_per_block} threads, occupancy {occ.fraction:.0%}{warn_en}",
                    f"编译报告，{self.kernel}（{self.arch}）：{self.registers} 个寄存器，共享内存 {shared} B，"
                    f"{self.threads_per_block} 个线程，占用率 {occ.fraction:.0%}{warn_zh}")

    def folded(self, open: bool = False):  # noqa: A002
        """The report as a table behind a toggle whose label carries its key numbers."""
        from gemm_course.bilingual.text import Fold, Table, text

        table = Table([text("quantity", "项目"), text("value", "数值")],
                      [[text(en, zh), v] for en, zh, v in self._rows()], code_columns=[1])
        warnings = [text(f"⚠ {en}", f"⚠ {zh}") for en, zh in self.problems()]
        return Fold(self.summary(), table, *[w.html() and f"<p>{w.html()}</p>" for w in warnings], open=open)

    def _repr_html_(self) -> str:
        return self.folded().html()


# what limits occupancy (models.Occupancy.limited_by), in Chinese
LIMITED_BY_ZH = {"threads": "线程数", "blocks": "线程块数", "registers": "寄存器", "shared memory": "共享内存"}

_PTXAS_PATTERNS = {
    "registers": r"Used (\d+) registers",
    "static_shared_bytes": r"(\d+) bytes smem",
    "stack_bytes": r"(\d+) bytes stack frame",
    "spill_store_bytes": r"(\d+) bytes spill stores",
    "spill_load_bytes": r"(\d+) bytes spill loads",
}


def parse_ptxas_log(log: str) -> dict[str, int]:
    """Registers, shared memory, stack and spill bytes from `ptxas -v` output (0 when absent)."""
    out = {}
    for key, pattern in _PTXAS_PATTERNS.items():
        m = re.search(pattern, log)
        out[key] = int(m.group(1)) if m else 0
    return out


def nvrtc_cache_dir():
    """Where NVRTC's results are kept between processes: $XDG_CACHE_HOME/gemm_course/nvrtc, else
    ~/.cache/gemm_course/nvrtc. The book's pages and the tests compile many of the same kernels in
    separate processes; each compiles a given one once. A temporary folder, with a one-line notice, where
    that cannot be written; pruned beyond $GEMM_COURSE_CACHE_MB (see run.disk_cache)."""
    from gemm_course.run import disk_cache

    return disk_cache.writable_folder(disk_cache.cache_home() / "gemm_course" / "nvrtc", "XDG_CACHE_HOME", "nvrtc")


@functools.lru_cache(maxsize=1)
def _kernel_headers_digest() -> str:
    """A digest of the course's own headers, which sources include (common.cuh, wgmma.cuh, ...)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(KERNEL_DIR.glob("*.cuh")) + sorted(KERNEL_DIR.glob("*.h")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def nvrtc_compile(source: str, name: str, arch: str, options: tuple[str, ...] = COMPILE_OPTIONS) -> tuple[bytes, str, str]:
    """Compile one kernel to a CUBIN with NVRTC. Returns (cubin, mangled name, log). No GPU needed.

    Cached on disk (nvrtc_cache_dir()) by source, kernel name, architecture, options, the course's
    headers and NVRTC's version; a cache that cannot be read or written is skipped."""
    import hashlib
    import json

    try:
        from cupy.cuda import nvrtc

        version = nvrtc.getVersion()
    except Exception:
        return _nvrtc_compile(source, name, arch, options)  # says what is missing
    key = hashlib.sha256("\0".join([source, name, arch, *options, repr(version), _kernel_headers_digest()])
                         .encode()).hexdigest()
    from gemm_course.run import disk_cache

    try:
        cache = nvrtc_cache_dir()
    except RuntimeError:  # no writable folder at all: compile every time
        return _nvrtc_compile(source, name, arch, options)
    try:
        meta = json.loads((cache / f"{key}.json").read_text(encoding="utf-8"))
        cubin = (cache / f"{key}.cubin").read_bytes()
        disk_cache.touch(cache / f"{key}.cubin")  # used now: pruning keeps both
        disk_cache.touch(cache / f"{key}.json")
        return cubin, meta["mangled"], meta["log"]
    except (OSError, ValueError, KeyError):
        pass
    cubin, mangled, log = _nvrtc_compile(source, name, arch, options)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".cubin", cubin), (".json", json.dumps({"mangled": mangled, "log": log}).encode())):
            tmp = cache / f"{key}.{os.getpid()}.tmp"
            tmp.write_bytes(data)
            tmp.replace(cache / f"{key}{suffix}")  # atomic: another process never reads half a file
    except OSError:
        pass
    disk_cache.prune(cache)
    return cubin, mangled, log


def _nvrtc_compile(source: str, name: str, arch: str, options: tuple[str, ...]) -> tuple[bytes, str, str]:
    try:
        from cupy.cuda import nvrtc
    except ImportError as err:
        raise RuntimeError("compile reports need CuPy: pip install -r requirements.txt / "
                           "编译报告需要 CuPy：pip install -r requirements.txt") from err
    try:
        nvrtc.getVersion()
    except Exception as err:
        raise RuntimeError(
            "NVRTC (libnvrtc) was not found. Install the wheel: pip install nvidia-cuda-nvrtc-cu12 "
            f"(or a CUDA toolkit); details: {err} / 没有找到 NVRTC（libnvrtc）。请安装 wheel：pip install "
            "nvidia-cuda-nvrtc-cu12（或者安装 CUDA 工具包）") from None
    program = nvrtc.createProgram(source, name.split("<")[0] + ".cu", [], [])
    try:
        nvrtc.addNameExpression(program, name)
        try:
            nvrtc.compileProgram(program, [*options, f"-arch={arch}", "--ptxas-options=-v"])
        except Exception:
            raise RuntimeError(f"NVRTC could not compile {name} for {arch} / NVRTC 无法为 {arch} 编译 {name}:\n"
                               f"{nvrtc.getProgramLog(program)}") from None
        cubin = _complete_elf(nvrtc.getCUBIN(program))
        return cubin, nvrtc.getLoweredName(program, name), nvrtc.getProgramLog(program)
    finally:
        nvrtc.destroyProgram(program)


def _complete_elf(image: bytes) -> bytes:
    """Restore the length of a CUBIN that CuPy's getCUBIN returned one byte short.

    CuPy's wrapper treats the image like a C string and drops its last byte, which is a zero
    in the final ELF header table; disassemblers reject the short file. The ELF header says how
    long the tables run, so we pad with zeros up to that length.
    """
    import struct

    if image[:4] != b"\x7fELF" or len(image) < 64:
        return image
    phoff, shoff = struct.unpack_from("<QQ", image, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", image, 0x36)
    end = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    return image + b"\0" * max(0, end - len(image))


@functools.lru_cache(maxsize=256)
def _report_cached(level_id: str, params_key: tuple, arch: str, source: str) -> CompileReport:
    lv = get_level(level_id)
    params = dict(params_key)
    name = lv.kernel_name(params)
    _, mangled, log = nvrtc_compile(source, name, arch, compile_options(lv))
    # ptxas prints one block per entry; keep the one for our kernel
    section = log[log.find(mangled):] if mangled in log else log
    usage = parse_ptxas_log(section)
    launch = lv.geometry(1024, 1024, 1024, params)
    shared = usage["static_shared_bytes"] + launch.dynamic_shared_bytes
    occ = occupancy(arch, launch.threads_per_block, usage["registers"], shared)
    return CompileReport(level=lv.id, params=params, arch=arch, kernel=name,
                         threads_per_block=launch.threads_per_block,
                         dynamic_shared_bytes=launch.dynamic_shared_bytes, occupancy=occ, log=log,
                         **usage)


def normalize_arch(arch: Any) -> str:
    """"sm_75" from "sm_75", "75", 75 or "SM_75" (and "sm_90a" from "90a"); a one-line error otherwise."""
    text = str(arch).strip().lower()
    if isinstance(arch, bool) or not text.removeprefix("sm_").rstrip("a").isdigit():
        raise ValueError(f"arch must name a GPU architecture such as 'sm_75', 'sm_90' or 'sm_90a', not {arch!r} / "
                         f"arch 应当是 'sm_75'、'sm_90' 或 'sm_90a' 这样的 GPU 架构名，而不是 {arch!r}")
    return text if text.startswith("sm_") else f"sm_{text}"


def default_arch() -> str:
    """The architecture pretended (gc.pretend_arch, GEMM_COURSE_ARCH), else the reader's GPU's, else the H200's
    (sm_90)."""
    return device.pretended_arch() or (device.arch() if device.gpu_available() else "sm_90")


def compile_report(level: str | int | Level, arch: Optional[str] = None, source: Optional[str] = None,
                   **params: Any) -> CompileReport:
    """Registers, shared memory, stack, spills and occupancy of a level's kernel on an architecture.

    Works with or without a GPU. arch defaults to the architecture pretended (gc.pretend_arch,
    GEMM_COURSE_ARCH), else the reader's GPU, or sm_90 without one; "sm_75", "75" and 75 name the same
    architecture. Parameters left out take the architecture's defaults (Level.defaults_for).
    """
    lv = get_level(level)
    arch = normalize_arch(arch) if arch is not None else default_arch()
    resolved = lv.resolve_for(arch, **params)  # the architecture's defaults (Level.arch_defaults)
    if lv.arch_specific:  # wgmma and setmaxnreg exist on sm_90a only
        if arch.rstrip("af") != f"sm_{lv.min_cc}":
            from gemm_course.support import hopper_refusal_text

            raise ValueError(hopper_refusal_text(lv.id, arch))
        arch = lv.build_arch
    arch_limits(arch)  # fail early, with the list of known architectures
    needed = lv.required_cc(resolved)
    if int(arch[3:].rstrip("a")) < needed:
        raise ValueError(f"level {lv.id} with {resolved} needs sm_{needed} or newer; {arch} is older. "
                         f"Pick arch='sm_{needed}' or a setting that older GPUs support / 第 {lv.number} 级（{lv.id}）"
                         f"取 {resolved} 时需要 sm_{needed} 或更新的架构，{arch} 太旧了。请选 arch='sm_{needed}'，"
                         "或者选一个旧 GPU 也支持的配置")
    src = source if source is not None else kernel_source(lv)
    return _report_cached(lv.id, tuple(sorted(resolved.items())), arch, src)


def cuda_headers_report() -> list[str]:
    """Where the CUDA headers that the Tensor Core levels include come from, without machine paths.

    One line per source, e.g. ``"cuda_fp16.h, cuda_bf16.h, mma.h: from the nvidia-cuda-runtime-cu12
    wheel"``. The directories themselves (:func:`cuda_include_dirs`) hold this machine's absolute
    paths, which do not belong in a printed page. Without any headers, the one line says how to
    install them.
    """
    from pathlib import Path

    try:
        dirs = [Path(d) for d in cuda_include_dirs()]
    except RuntimeError as err:
        return [str(err)]

    def origin(d: Path) -> str:
        parts = d.parts
        if "nvidia" in parts:
            package = parts[parts.index("nvidia") + 1] if parts.index("nvidia") + 1 < len(parts) else ""
            wheels = {"cuda_runtime": "nvidia-cuda-runtime-cu12", "cuda_nvcc": "nvidia-cuda-nvcc-cu12",
                      "cu13": "CUDA 13 (nvidia/cu13)"}
            return f"the {wheels.get(package, 'nvidia-' + package.replace('_', '-'))} wheel"
        return "a CUDA toolkit"

    by_origin: dict[str, list[str]] = {}
    for header in _HEADERS_NEEDED:
        home = next((d for d in dirs if (d / header).is_file()), None)
        if home is not None:
            by_origin.setdefault(origin(home), []).append(header)
    return [f"{', '.join(headers)}: from {source}" for source, headers in by_origin.items()]
