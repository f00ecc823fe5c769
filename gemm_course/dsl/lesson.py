"""What the Level 14 page shows, one call per cell: the kernels and their line maps, the run (live on a GPU, in
Triton's interpreter without one), the recorded run beside the CUDA levels, the compile reports.

    from gemm_course.dsl import lesson
    lesson.walk_through("tiled")  # the tiled Triton kernel's source (no triton needed), then its line map:
                                  # each line, the course level and the CUDA C it stands for
    lesson.run()                  # GPU: check + one timing beside cuBLAS and the matching CUDA level, live;
                                  # no GPU: the interpreter's check on a small odd shape, then the recorded run
    lesson.record_chart()         # the recorded run at one shape: the DSL kernels beside Levels 8, 10, 11
    lesson.record_table()         # every recorded row; lesson.compile_table(): what the compiler made

Every function works without triton and without a GPU: what needs one says so in one line, in the language in
force, and the recorded run is shown instead. The recorded run is the file RECORD_FILE in the course's results
(written by ``python -m gemm_course dsl --record``); until a run is recorded, RECORD_FILE is None and the cells
that show it say so in one line.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from gemm_course.bilingual.text import Fold, Shown, Table, code_block, from_message, note, say, show, text
from gemm_course.dsl.line_maps import LINE_MAPS, kernel_source

# The recorded run of this level in gemm_course/results/ (e.g. "h100_14_dsl.json"): set it when the file is
# committed; tests/test_dsl_lesson.py then requires the file, and the page shows it.
RECORD_FILE: Optional[str] = "h100_14_dsl.json"
LESSON_SHAPE = (33, 17, 65)           # the interpreter's check: partial tiles in M, N and K
LIVE_SIZE = 4096                      # the live timing on a GPU
HEADLINE_SHAPE = (8192, 8192, 8192)   # the recorded shape the lesson quotes
KERNEL_TITLES = {"tiled": ("the tiled Triton kernel", "分块 Triton 内核"),
                 "hopper": ("the Hopper Triton kernel (TMA descriptors, persistent)", "Hopper Triton 内核（TMA 描述符，持久化）"),
                 "gluon": ("the Gluon kernel (Level 11 in Python)", "Gluon 内核（用 Python 写的第 11 级）")}


# --- the kernels and their line maps (no triton needed) ----------------------------------------------------------

def kernel(name: str = "tiled", open: bool = True) -> Fold:  # noqa: A002
    """A kernel's Python source (its functions from gemm_course/dsl), open or folded."""
    source = kernel_source(name)
    en, zh = KERNEL_TITLES[name]
    n = len(source.rstrip().splitlines())
    return Fold(text(f"Source: {en}, {n} lines", f"源码：{zh}，共 {n} 行"), code_block(source, "python"), open=open)


def walk_through(name: str = "tiled") -> None:
    """A kernel's source, open, then its line map: the lesson's reading of the kernel in one output."""
    show(kernel(name, open=True))
    show(line_map(name))


def kernels(*names: str, open: bool = False) -> None:  # noqa: A002
    """Several kernels' sources, each folded (open=False) behind a toggle that names it."""
    for name in names:
        show(kernel(name, open=open))


def line_map(name: str = "tiled") -> Table:
    """Each mapped line of a kernel: the line, the course levels it stands for, and the CUDA C it replaces."""
    rows = [[row.line, row.level, text(row.cuda_en, row.cuda_zh)] for row in LINE_MAPS[name]]
    return Table([text("line", "代码行"), text("level", "级别"), text("what it is in the course's CUDA C",
                                                                     "在课程的 CUDA C 中对应什么")],
                 rows, code_columns=(0,))


# --- the recorded run -------------------------------------------------------------------------------------------

def record_path(path: Optional[str | Path] = None) -> Optional[Path]:
    """The recorded run to show: `path` when given, else RECORD_FILE in the course's results; None if there is
    none."""
    if path is not None:
        return Path(path)
    if RECORD_FILE is None:
        return None
    from gemm_course.measure.results import RESULTS_DIR

    found = RESULTS_DIR / RECORD_FILE
    return found if found.is_file() else None


def _say_no_record() -> None:
    record, chart = "python -m gemm_course dsl --record --out mine.json", 'lesson.record_chart("mine.json")'
    en = ("No recorded GPU run of this level ships with the course yet: on an H100 or H200, {0} records one, and {1} "
          "shows it.")
    zh = "课程还没有附带本级在 GPU 上的实测记录：在 H100 或 H200 上，{0} 可以记录一份，{1} 显示它。"
    code = [f"<code>{html.escape(c)}</code>" for c in (record, chart)]
    show(note(en.format(*code), zh.format(*code), en.format(record, chart), zh.format(record, chart)))


def _label(kernel_id: str, setting: Mapping[str, Any], c_type: str, dtype: str) -> str:
    """A short, language-neutral name for a row: the CUDA level or the DSL kernel, and its tile."""
    tile = "×".join(str(setting[k]) for k in ("BM", "BN", "BK") if k in setting)
    c = ", bf16 C" if c_type != "float32" and dtype != "float32" else ""
    if kernel_id == "cublas":
        return "cuBLAS"
    if kernel_id[:2].isdigit():  # a course level: its setting as given (empty for the registry default)
        given = ",".join(f"{k}={v}" for k, v in setting.items() if k != "c_type")
        return f"L{int(kernel_id[:2])} CUDA" + (f" {given}" if given else "") + c
    name = {"triton_tiled": "Triton", "triton_hopper": "Triton TMA", "gluon": "Gluon"}.get(kernel_id, kernel_id)
    stages = setting.get("num_stages", setting.get("stages"))
    return f"{name} {tile}" + (f"/{stages}" if stages else "") + c


def _rows(path: Path) -> list[dict[str, Any]]:
    from gemm_course.dsl.record import read_record

    return read_record(path)


def record_chart(path: Optional[str | Path] = None, shape: Sequence[int] = HEADLINE_SHAPE,
                 dtype: str = "bfloat16") -> Optional[Any]:
    """The recorded run at one shape and input type: each kernel's TFLOPS as a bar, the cuBLAS timing paired with
    it as a marker (plots.sweep_bar_figure), and under it the one comparison the lesson draws; one line if there
    is no recorded run."""
    from gemm_course.display.plots import add_subtitle, show as show_figure, sweep_bar_figure

    found = record_path(path)
    if found is None:
        _say_no_record()
        return None
    M, N, K = shape
    rows = [r for r in _rows(found) if (r["M"], r["N"], r["K"]) == (M, N, K) and r["dtype"] == dtype
            and r["status"] == "timed" and r["kernel"] != "cublas" and r["ratio_to_cublas"]]
    if not rows:
        say(f"{found.name} has no timed row at {M}×{N}×{K} in {dtype}.", f"{found.name} 中没有 {M}×{N}×{K}、{dtype} 的计时行。")
        return None
    tried = [{"label": _label(r["kernel"], r["setting"], r["c_type"], dtype), "tflops": r["tflops"],
              "cublas_tflops": r["tflops"] / r["ratio_to_cublas"]} for r in rows]
    size = f"{M}³" if M == N == K else f"{M}×{N}×{K}"
    fig = sweep_bar_figure(tried, title=f"Recorded, {size}, {dtype} · 实测记录：{size}，{dtype}")
    gpu, date = rows[0]["gpu"], rows[0]["date"]
    add_subtitle(fig, f"{found.name} ({gpu}, {date}); markers: cuBLAS timed right before each kernel · "
                      f"{found.name}（{gpu}，{date}）；标记：紧接在每个内核之前计时的 cuBLAS")
    show_figure(fig)
    _say_headline(rows, dtype)
    return Shown(rows)


def _best(rows: Sequence[Mapping[str, Any]], kernel_id: str) -> Optional[Mapping[str, Any]]:
    mine = [r for r in rows if r["kernel"] == kernel_id]
    return max(mine, key=lambda r: r["tflops"]) if mine else None


def _say_headline(rows: Sequence[Mapping[str, Any]], dtype: str) -> None:
    """The lesson's one number: the tiled Triton kernel against cuBLAS, beside the CUDA level it stands for."""
    triton, level = _best(rows, "triton_tiled"), _best(rows, "10_mma_pipeline" if dtype != "float32" else
                                                         "08_warp_tiling")
    if triton is None or level is None:
        return
    n = 10 if dtype != "float32" else 8
    say(f"The tiled Triton kernel: {triton['tflops']:.1f} TFLOPS, {triton['ratio_to_cublas']:.0%} of cuBLAS; Level {n}, "
        f"written by hand in CUDA C: {level['tflops']:.1f} TFLOPS, {level['ratio_to_cublas']:.0%} of cuBLAS.",
        f"分块 Triton 内核：{triton['tflops']:.1f} TFLOPS，为 cuBLAS 的 {triton['ratio_to_cublas']:.0%}；手写 CUDA C 的第 {n} 级："
        f"{level['tflops']:.1f} TFLOPS，为 cuBLAS 的 {level['ratio_to_cublas']:.0%}。")


def record_table(path: Optional[str | Path] = None) -> Optional[Table]:
    """Every row of the recorded run: shape, input type, kernel and tile, TFLOPS, share of cuBLAS, SM clock; a
    row not timed says why. One line if there is no recorded run."""
    found = record_path(path)
    if found is None:
        _say_no_record()
        return None
    from gemm_course.dsl.record import read_checks

    checks = read_checks(found)
    failed = [c for c in checks if not c["passed"]]
    out = []
    for r in _rows(found):
        shape = f"{r['M']}×{r['N']}×{r['K']}"
        label = _label(r["kernel"], r["setting"], r["c_type"], r["dtype"])
        if r["status"] == "timed":
            clock = f"{r['sm_clock_mhz']:.0f}" if r.get("sm_clock_mhz") else "—"
            out.append([shape, r["dtype"], label, f"{r['tflops']:.1f}", f"{r['ratio_to_cublas']:.1%}", clock])
        else:
            out.append([shape, r["dtype"], label, "—", "", str(r.get("why") or "")[:80]])
    first = _rows(found)[0] if out else {"gpu": "", "date": ""}
    caption = text(f"recorded: {found.name} ({first['gpu']}, {first['date']}); checks on odd shapes: {len(checks)} run, "
                   f"{len(failed)} failed", f"实测记录：{found.name}（{first['gpu']}，{first['date']}）；不规则形状上的校验："
                   f"共 {len(checks)} 项，{len(failed)} 项未通过")
    return Table([text("shape", "形状"), text("inputs", "输入"), text("kernel", "内核"), "TFLOPS",
                  text("of cuBLAS", "相对 cuBLAS"), text("SM MHz", "SM 频率")], out, caption=caption)


COUNTERS_FILE: Optional[str] = "h100_14_dsl_counters.json"    # the recorded counters of the page's Deeper section (dsl.counters)
COUNTER_COLUMNS = (  # (metric key, English header, Chinese header, how the value is shown)
    ("duration_ns", "µs", "µs", lambda v: f"{v / 1e3:.0f}"),
    ("sm_clock_hz", "SM MHz", "SM 频率", lambda v: f"{v / 1e6:.0f}"),
    ("instructions", "warp instructions (M)", "线程束指令（百万）", lambda v: f"{v / 1e6:.1f}"),
    ("tensor_pipe_pct", "Tensor pipe busy", "张量流水线繁忙", lambda v: f"{v:.1f}%"),
    ("issue_active_pct", "issue active", "发射活跃", lambda v: f"{v:.1f}%"),
    ("global_store_requests", "global stores (K)", "全局存储指令（千）", lambda v: f"{v / 1e3:.0f}"),
    ("shared_store_wavefronts", "shared-store wavefronts (K)", "共享内存存储波前（千）", lambda v: f"{v / 1e3:.0f}"),
    ("l2_read_sectors", "L2 read sectors (M)", "L2 读扇区（百万）", lambda v: f"{v / 1e6:.1f}"),
    ("dram_read_bytes", "DRAM read (MB)", "显存读取（MB）", lambda v: f"{v / 1e6:.0f}"),
)


def counters_table(path: Optional[str | Path] = None) -> Optional[Table]:
    """The recorded counters of one setting of each DSL kernel beside Levels 10 and 11 and cuBLAS (dsl.counters):
    duration and clock under the profiler, instructions, Tensor pipe, stores, L2 and DRAM. One line if none."""
    from gemm_course.dsl.counters import read_counters
    from gemm_course.measure.results import RESULTS_DIR

    found = Path(path) if path is not None else (RESULTS_DIR / COUNTERS_FILE if COUNTERS_FILE else None)
    if found is None or not found.is_file():
        command = "python -m gemm_course dsl --counters --out mine.json"
        show(note(f"No recorded counters of this level ship with the course: on a GPU with Nsight Compute, "
                  f"<code>{command}</code> reads them.", f"课程没有附带本级的计数器记录：在装有 Nsight Compute 的 GPU 上，"
                  f"<code>{command}</code> 可以读取它们。", f"No recorded counters of this level ship with the course: "
                  f"on a GPU with Nsight Compute, {command} reads them.",
                  f"课程没有附带本级的计数器记录：在装有 Nsight Compute 的 GPU 上，{command} 可以读取它们。"))
        return None
    rows = read_counters(found)
    provenance = json.loads(found.read_text(encoding="utf-8"))["provenance"]
    out = []
    for r in rows:
        c_type = r["dtype"] if r["setting"].get("c_type") == "input" or r["kernel"] == "cublas" else "float32"
        values = r["metrics"]
        out.append([_label(r["kernel"], r["setting"], c_type, r["dtype"])] +
                   [shown(values[key]) if values.get(key) is not None else "—" for key, _, _, shown in COUNTER_COLUMNS])
    shape = "×".join(str(rows[0][k]) for k in ("M", "N", "K")) if rows else ""
    caption = text(f"recorded: {found.name} ({provenance['gpu']}, {provenance['date'][:10]}); Nsight Compute, one launch "
                   f"of each at {shape} in bf16, the GPU's own clock (--clock-control none); cuBLAS: its longest kernel",
                   f"实测记录：{found.name}（{provenance['gpu']}，{provenance['date'][:10]}）；Nsight Compute，每个内核在 "
                   f"{shape}、bf16 下启动一次，GPU 按自己的时钟运行（--clock-control none）；cuBLAS 取其耗时最长的内核")
    return Table([text("kernel", "内核")] + [text(en, zh) for _, en, zh, _ in COUNTER_COLUMNS], out, caption=caption)


# --- the run ----------------------------------------------------------------------------------------------------

def run(shape: Sequence[int] = LESSON_SHAPE, path: Optional[str | Path] = None) -> Optional[Shown]:
    """On a GPU with triton: the tiled kernel checked at `shape` (NaN guards around A, B and C), then timed once
    at LIVE_SIZE³ beside cuBLAS and the CUDA level it stands for. Without a GPU: the same check in Triton's
    interpreter on the CPU (float32), then the recorded run's checks. Without triton: one line, then the
    recorded run's checks."""
    from gemm_course import device
    from gemm_course.dsl.tensors import require_triton, triton_available

    if not triton_available():
        try:
            require_triton("Running this level's kernels")
        except RuntimeError as err:
            show(from_message(str(err)))
    elif device.gpu_available():
        try:
            return _live(tuple(shape))
        except Exception as err:  # noqa: BLE001 — a GPU Triton cannot use: one line, then the recorded run
            first = str(err).strip().splitlines()[-1][:200] if str(err).strip() else type(err).__name__
            say(f"The live run failed here ({type(err).__name__}: {first}); the recorded run follows.",
                f"实时运行在这里失败了（{type(err).__name__}：{first}）；下面是实测记录。")
    else:
        _interpreted(tuple(shape))
    _say_recorded_checks(path)
    return None


def _interpreted(shape: tuple[int, int, int]) -> None:
    from gemm_course.dsl.interpreter import SMALL_TILES, check_tiled

    row = check_tiled([shape])[0]
    M, N, K = shape
    tile = f"{SMALL_TILES['BM']}×{SMALL_TILES['BN']}×{SMALL_TILES['BK']}"
    verdict_en = "right" if row["passed"] else "WRONG"
    verdict_zh = "正确" if row["passed"] else "错误"
    say(f"No GPU here: Triton's interpreter ran the tiled kernel on the CPU, float32, {M}×{N}×{K} with {tile} tiles: "
        f"relative error {row['relative_error']:.1e} (bound {row['tolerance']:.1e}), {row['unwritten']} elements "
        f"left NaN, {row['written_outside'] + row['input_guards_changed']} guard elements touched: {verdict_en}.",
        f"这里没有 GPU：Triton 的解释器在 CPU 上以 float32 运行了分块内核，{M}×{N}×{K}，分块 {tile}：相对误差 "
        f"{row['relative_error']:.1e}（上限 {row['tolerance']:.1e}），{row['unwritten']} 个元素仍为 NaN，"
        f"{row['written_outside'] + row['input_guards_changed']} 个保护元素被改动：{verdict_zh}。")


def _say_recorded_checks(path: Optional[str | Path]) -> None:
    found = record_path(path)
    if found is None:
        _say_no_record()
        return
    from gemm_course.dsl.record import read_checks

    checks = read_checks(found)
    rows = _rows(found)
    gpu, date = (rows[0]["gpu"], rows[0]["date"]) if rows else ("", "")
    kernels = sorted({c["kernel"] for c in checks})
    failed = [c for c in checks if not c["passed"]]
    say(f"The recorded run ({found.name}, {gpu}, {date}) checked {', '.join(kernels)} on odd shapes: {len(checks)} "
        f"checks, {len(failed)} failed; its timings are in the chart below.",
        f"实测记录（{found.name}，{gpu}，{date}）在不规则形状上校验了 {'、'.join(kernels)}：共 {len(checks)} 项，"
        f"{len(failed)} 项未通过；计时见下图。")


def _live(shape: tuple[int, int, int]) -> Shown:
    """The GPU path of run(): one check at `shape` and one timing at LIVE_SIZE³, in bf16 where the GPU has it."""
    import cupy

    from gemm_course import device
    from gemm_course.dsl import triton_gemm as tg
    from gemm_course.dsl.checking import guarded_problem, verdict
    from gemm_course.dsl.record import TILED_SETTINGS, prepared_launch
    from gemm_course.dsl.tensors import use_cupy_driver
    from gemm_course.measure.bench import time_gpu
    from gemm_course.models import gemm_flops
    from gemm_course.run.check import random_operands
    from gemm_course.run.dtypes import storage_dtype

    use_cupy_driver()
    dtype = "bfloat16" if device.real_compute_capability() >= 80 else "float32"
    setting = TILED_SETTINGS[dtype][0]
    level = "10_mma_pipeline" if dtype == "bfloat16" else "08_warp_tiling"
    M, N, K = shape
    problem = guarded_problem(M, N, K, dtype, "float32", seed=1, xp=cupy)
    tg.tiled_gemm(problem.A, problem.B, out=problem.C, **setting)
    cupy.cuda.get_current_stream().synchronize()
    v = verdict(problem)
    say(f"{device.gpu_name()}: the tiled Triton kernel, {dtype}, {M}×{N}×{K}: relative error {v['relative_error']:.1e} "
        f"(bound {v['tolerance']:.1e}), {v['unwritten']} elements left NaN: {'right' if v['passed'] else 'WRONG'}.",
        f"{device.gpu_name()}：分块 Triton 内核，{dtype}，{M}×{N}×{K}：相对误差 {v['relative_error']:.1e}（上限 "
        f"{v['tolerance']:.1e}），{v['unwritten']} 个元素仍为 NaN：{'正确' if v['passed'] else '错误'}。")
    n = LIVE_SIZE
    A, B = random_operands(n, n, n, dtype, seed=7, xp=cupy)
    rows = []
    for name, kernel_id, params, c_type in (("cuBLAS", "cublas", {}, dtype), (_label("triton_tiled", setting, "float32",
                                            dtype), "triton_tiled", setting, "float32"),
                                            (_label(level, {}, "float32", dtype), level, {}, "float32")):
        C = cupy.empty((n, n), dtype=storage_dtype(c_type))
        t = time_gpu(prepared_launch(kernel_id, params, A, B, C), budget_s=1.0, max_reps=30)
        rows.append([name, f"{t.median_ms:.3f}", f"{gemm_flops(n, n, n) / (t.median_ms * 1e-3) / 1e12:.1f}"])
    blas_ms = float(rows[0][1])
    for r in rows:
        r.append(f"{blas_ms / float(r[1]):.0%}")
    show(Table([text("kernel", "内核"), text("ms (median)", "毫秒（中位数）"), "TFLOPS", text("of cuBLAS", "相对 cuBLAS")],
               rows, caption=text(f"measured live on {device.gpu_name()}, {n}³, {dtype}, L2 flushed before every "
                                  "repetition", f"实时测量于 {device.gpu_name()}，{n}³，{dtype}，每次重复前清空 L2")))
    return Shown(rows)


# --- what the compiler made (no GPU needed) ---------------------------------------------------------------------

def compile_rows() -> list[tuple[str, str, str, dict]]:
    """(kernel, target, input type, setting) of the compile table: the tiled kernel in fp32 and bf16 for sm_80 and
    sm_90 at the recorded settings, the Hopper Triton kernel and the Gluon kernel for sm_90."""
    from gemm_course.dsl.record import GLUON_SETTINGS, HOPPER_SETTINGS, TILED_SETTINGS

    return [("tiled", "sm_80", "float32", TILED_SETTINGS["float32"][0]),
            ("tiled", "sm_90", "float32", TILED_SETTINGS["float32"][0]),
            ("tiled", "sm_80", "bfloat16", TILED_SETTINGS["bfloat16"][0]),
            ("tiled", "sm_90", "bfloat16", TILED_SETTINGS["bfloat16"][0]),
            ("hopper", "sm_90", "bfloat16", HOPPER_SETTINGS[1]),
            ("gluon", "sm_90", "bfloat16", GLUON_SETTINGS[1])]


def compile_table(rows: Optional[Sequence[tuple[str, str, str, dict]]] = None) -> Optional[Table]:
    """Each kernel compiled for its target without a GPU (compile.compile_kernel): threads, registers and spills
    (ptxas), shared memory, and the PTX instructions each level is about. One line without triton."""
    from gemm_course.dsl.tensors import require_triton, triton_available

    if not triton_available():
        try:
            require_triton("Compiling this level's kernels")
        except RuntimeError as err:
            show(from_message(str(err)))
        return None
    from gemm_course.dsl.compile import compile_kernel

    out = []
    for name, arch, dtype, setting in rows or compile_rows():
        r = compile_kernel(name, arch, dtype, setting)
        ins = r.instructions
        tile = "×".join(str(setting[k]) for k in ("BM", "BN", "BK"))
        stages = setting.get("num_stages", setting.get("stages", ""))
        out.append([name, arch, dtype, f"{tile}/{stages}", str(32 * r.num_warps), str(r.registers), str(r.spill_bytes),
                    f"{r.shared_bytes / 1024:.0f}", str(ins["wgmma.mma_async"]), str(ins["mma.sync"]),
                    str(ins["fma.rn.f32"]), str(ins["cp.async.bulk.tensor"]), str(ins["cp.async"])])
    return Table([text("kernel", "内核"), text("target", "目标"), text("inputs", "输入"),
                  text("tile/stages", "分块/流水级数"), text("threads", "线程"), text("registers", "寄存器"),
                  text("spill B", "溢出 B"), text("shared KB", "共享内存 KB"), "wgmma", "mma.sync", "fma.f32",
                  "TMA", "cp.async"], out,
                 caption=text("compiled here by Triton for each target, no GPU; registers and spills from ptxas -v; "
                              "instructions counted in the PTX",
                              "由 Triton 在这里为各目标编译，不需要 GPU；寄存器与溢出来自 ptxas -v；指令数取自 PTX"))
