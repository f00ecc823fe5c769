"""Hardware counters: what the GPU did while a kernel ran, read with Nsight Compute (ncu).

Timings say how fast a kernel is; the SASS says what the compiler emitted; the counters say what the
hardware did: how many 32-byte sectors a warp's global load touched, how many passes (wavefronts) a
shared-memory instruction took, how often a scheduler issued, which pipe was busy, why warps waited.
Every level's "predict, then measure" section sets the course's models beside these numbers.

Recording (a GPU and Nsight Compute's `ncu` on the PATH or in /opt/nvidia/nsight-compute):

    python -m gemm_course counters --record --out gemm_course/results/h200_counters.json

runs, for each level, one small Python process under `ncu` per group of metrics (a few metrics per
run), which launches every showcase setting once at 4096³ inside an NVTX range; only those launches
are profiled. ncu runs with `--clock-control none` (the GPU keeps the clock it has, as in the timed
runs) and flushes the caches before every replay pass (its default), so every kernel starts from a
cold L2, as the timings do. Reading the recorded table needs no GPU:

    python -m gemm_course counters [--level 03] [--json]
"""
from __future__ import annotations

import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from gemm_course.measure import results
from gemm_course.levels import get_level, levels

COUNTER_SIZE = 4096
NVTX_RANGE = "gemm_course"


@dataclass(frozen=True)
class Metric:
    """One quantity the course reads: its short key, the ncu metric names that measure it (the first
    one this ncu knows is used), the run it belongs to, and what it means."""

    key: str
    names: tuple[str, ...]
    group: str
    en: str
    zh: str


def _m(key: str, names: str | tuple[str, ...], group: str, en: str, zh: str) -> Metric:
    return Metric(key, (names,) if isinstance(names, str) else names, group, en, zh)


_STALLS = ("long_scoreboard", "short_scoreboard", "barrier", "mio_throttle", "math_pipe_throttle", "wait",
           "not_selected", "lg_throttle", "dispatch_stall", "no_instruction", "branch_resolving", "membar",
           "sleeping", "tex_throttle", "selected", "drain", "imc_miss", "misc")

# A documented metric set, chosen by topic. "memory", "shared" and "issue" are three separate ncu runs.
METRICS: tuple[Metric, ...] = (
    # global memory, L2, DRAM
    _m("global_load_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "memory",
       "global load instructions executed by warps (requests)", "线程束执行的全局加载指令数（请求数）"),
    _m("global_load_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "memory",
       "32-byte sectors those loads touched", "这些加载涉及的 32 字节扇区数"),
    _m("global_load_l1_hit_pct", "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct", "memory",
       "share of those sectors found in L1 (%)", "这些扇区在 L1 中命中的比例（%）"),
    _m("cp_async_sectors", ("l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
                            "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum"), "memory",
       "32-byte sectors read by cp.async that go through L1 (LDGSTS, .ca)",
       "经过 L1 的 cp.async（LDGSTS，.ca）读取的 32 字节扇区数"),
    _m("cp_async_bypass_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum", "memory",
       "32-byte sectors read by cp.async that bypass L1 (LDGSTS, .cg)",
       "绕过 L1 的 cp.async（LDGSTS，.cg）读取的 32 字节扇区数"),
    _m("global_store_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "memory",
       "global store instructions executed by warps", "线程束执行的全局存储指令数"),
    _m("global_store_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "memory",
       "32-byte sectors those stores touched", "这些存储涉及的 32 字节扇区数"),
    _m("l2_read_sectors", "lts__t_sectors_op_read.sum", "memory",
       "32-byte sectors read from L2 (by L1, cp.async and TMA)", "从 L2 读取的 32 字节扇区数（L1、cp.async 与 TMA）"),
    _m("l2_hit_pct", "lts__t_sector_hit_rate.pct", "memory", "share of L2 sectors that hit (%)",
       "L2 扇区命中率（%）"),
    _m("dram_read_bytes", "dram__bytes_read.sum", "memory", "bytes read from device memory (HBM)",
       "从显存（HBM）读取的字节数"),
    _m("dram_write_bytes", "dram__bytes_write.sum", "memory", "bytes written to device memory (HBM)",
       "写入显存（HBM）的字节数"),
    # shared memory
    _m("shared_load_instructions", "smsp__inst_executed_op_shared_ld.sum", "shared",
       "shared-memory load instructions executed by warps", "线程束执行的共享内存加载指令数"),
    _m("shared_load_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "shared",
       "passes (wavefronts) those loads took", "这些加载所用的波前数（wavefront）"),
    _m("shared_load_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "shared",
       "extra passes ncu attributes to bank conflicts on loads", "ncu 归因于加载存储体冲突的额外波前数"),
    _m("shared_store_instructions", "smsp__inst_executed_op_shared_st.sum", "shared",
       "shared-memory store instructions executed by warps", "线程束执行的共享内存存储指令数"),
    _m("shared_store_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "shared",
       "passes (wavefronts) those stores took", "这些存储所用的波前数（wavefront）"),
    _m("shared_store_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "shared",
       "extra passes ncu attributes to bank conflicts on stores", "ncu 归因于存储存储体冲突的额外波前数"),
    _m("ldmatrix_instructions", "smsp__inst_executed_op_ldsm.sum", "shared",
       "ldmatrix instructions executed by warps", "线程束执行的 ldmatrix 指令数"),
    _m("ldmatrix_wavefronts", ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
                               "l1tex__data_pipe_lsu_wavefronts_mem_shared_cmd_ldsm.sum"), "shared",
       "passes (wavefronts) ldmatrix took", "ldmatrix 所用的波前数（wavefront）"),
    # issue, pipes, occupancy, clock, stalls
    _m("issue_active_pct", "smsp__issue_active.avg.pct_of_peak_sustained_active", "issue",
       "cycles in which a scheduler issued an instruction (%)", "调度器发射了指令的周期比例（%）"),
    _m("instructions", "smsp__inst_executed.sum", "issue", "warp instructions executed", "执行的线程束指令数"),
    _m("fma_pipe_pct", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "issue",
       "FMA pipe busy (% of its peak)", "FMA 流水线繁忙程度（占其峰值的 %）"),
    _m("tensor_pipe_pct", ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                           "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"), "issue",
       "Tensor Core pipe busy (% of its peak)", "张量核心流水线繁忙程度（占其峰值的 %）"),
    _m("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active", "issue",
       "achieved occupancy: resident warps over the SM's maximum (%)", "实际占用率：驻留线程束数占 SM 上限的比例（%）"),
    _m("sm_clock_hz", "smsp__cycles_elapsed.avg.per_second", "issue", "SM clock while the kernel ran (Hz)",
       "内核运行时的 SM 时钟（Hz）"),
    _m("duration_ns", "gpu__time_duration.sum", "issue", "kernel duration under the profiler (ns)",
       "分析器下的内核耗时（ns）"),
    *(_m(f"stall_{s}", f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio", "issue",
         f"warps waiting for reason '{s}', per issued instruction", f"因“{s}”而等待的线程束数（每条已发射指令）")
      for s in _STALLS),
)
GROUPS = ("memory", "shared", "issue")
METRIC_BY_KEY = {m.key: m for m in METRICS}
CUBLAS = "cublas"


# --- what is recorded ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """One profiled launch: a level's setting (or cuBLAS), its input type, and for Level 10 a part of
    the kernel (peak.PARTS) when it is taken apart."""

    level: str
    params: Mapping[str, Any]
    dtype: str
    part: Optional[str] = None

    def as_json(self) -> dict[str, Any]:
        return {"level": self.level, "params": dict(self.params), "dtype": self.dtype, "part": self.part}


# Level 10 taken apart (as `peak` times it): its copies alone, its math alone, and its math without
# the block-wide barrier, on the 4-stage 128×256 setting.
LEVEL_10_PARTS: tuple[str, ...] = ("copies", "math", "math_no_barrier")


def default_targets(level_ids: Optional[Sequence[str]] = None) -> list[list[Target]]:
    """Groups of targets, one group per ncu process: each level's showcase and experiment settings in
    its first input type, then cuBLAS in each input type those levels use."""
    from gemm_course.measure.peak import PARTS_SETTINGS

    chosen = [get_level(i) for i in level_ids] if level_ids else list(levels())
    groups, dtypes = [], []
    for lv in chosen:
        dtype = lv.dtypes[0]
        settings = [lv.resolve(**s) for s in (*lv.showcase, *lv.experiments)]
        group = [Target(lv.id, s, dtype) for s in settings]
        if lv.id == "10_mma_pipeline":
            group += [Target(lv.id, lv.resolve(**PARTS_SETTINGS[-1]), dtype, part) for part in LEVEL_10_PARTS]
        groups.append(group)
        dtypes += [d for d in (dtype,) if d not in dtypes]
    groups += [[Target(CUBLAS, {}, d)] for d in dtypes]
    return groups


# --- ncu --------------------------------------------------------------------------------------------

def find_ncu() -> Optional[str]:
    """Nsight Compute's command line, on the PATH or where the CUDA toolkit installs it."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/bin/ncu", "/usr/local/cuda*/nsight-compute*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


NO_NCU = ("Nsight Compute (ncu) was not found: install it (it comes with the CUDA toolkit, or as "
          "'nsight-compute' from NVIDIA) and put ncu on the PATH; reading the recorded counters "
          "(python -m gemm_course counters) needs neither ncu nor a GPU")


def ncu_version(ncu: str) -> str:
    """The 'Version …' line of `ncu --version`, e.g. 'Version 2025.3.1.0 (build …)'."""
    out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    return next((line.strip() for line in out.splitlines() if line.strip().startswith("Version")),
                out.strip().splitlines()[-1] if out.strip() else "unknown")


def available_metric_bases(ncu: str) -> set[str]:
    """The base names (before the first '.') of the metrics this ncu can collect on this GPU."""
    out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=300).stdout
    return set(re.findall(r"^\s*([a-z0-9]+__[a-z0-9_]+)", out, flags=re.M))


def choose_metrics(bases: set[str]) -> dict[str, str]:
    """key → the first ncu name of each metric that this ncu offers (all of them if the query said nothing)."""
    chosen = {}
    for m in METRICS:
        for name in m.names:
            if not bases or name.split(".")[0] in bases:
                chosen[m.key] = name
                break
    return chosen


def _number(text: str) -> Optional[float]:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Rows of `ncu --csv --page raw --print-units base`: kernel name, then metric name → value. The
    CSV starts at the header line beginning with "ID"; anything the program printed before is skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    table = list(csv.reader(lines[start:]))
    header, body = table[0], table[1:]
    if body and body[0] and body[0][0] == "":  # the units row
        body = body[1:]
    rows = []
    for cells in body:
        if len(cells) != len(header):
            continue
        row = dict(zip(header, cells))
        rows.append({"kernel": row.get("Kernel Name", ""),
                     "values": {k: _number(v) for k, v in row.items() if "__" in k}})
    return rows


def _profile_group(ncu: str, group: list[Target], metric_names: Sequence[str], size: int) -> list[dict[str, Any]]:
    """Run one Python process under ncu that launches each target once, inside the NVTX range."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "targets.json"
        spec.write_text(json.dumps({"size": size, "targets": [t.as_json() for t in group]}))
        command = [ncu, "--target-processes", "all", "--clock-control", "none", "--nvtx",
                   "--nvtx-include", f"{NVTX_RANGE}/", "--metrics", ",".join(metric_names), "--csv",
                   "--page", "raw", "--print-units", "base", sys.executable, "-m", "gemm_course.measure.counters",
                   str(spec)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    rows = parse_ncu_csv(done.stdout)
    if done.returncode != 0 or not rows:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"ncu failed for {group[0].level}: " + " | ".join(tail))
    return rows


def _assign(group: list[Target], rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The profiled kernels of each target, in launch order: one kernel per target of a level; every
    kernel for a cuBLAS target (a library call may launch more than one)."""
    if group[0].level == CUBLAS:
        return [rows]
    if len(rows) != len(group):
        raise RuntimeError(f"{group[0].level}: {len(group)} launches but {len(rows)} profiled kernels")
    return [[r] for r in rows]


def _already_recorded(t: Target) -> bool:
    try:
        find(t.level, part=t.part, dtype=t.dtype, **({} if t.level == CUBLAS else t.params))
        return True
    except KeyError:
        return False


def record(out: str | Path, level_ids: Optional[Sequence[str]] = None, size: int = COUNTER_SIZE,
           progress: Callable[[str], None] = print, missing_only: bool = False) -> dict[str, Any]:
    """Profile every target group and write the counters file as it goes (an interrupted run keeps
    the groups already read). missing_only: only the settings no recorded counters file has yet
    (e.g. settings added to a level's showcase since), into a file of their own."""
    from gemm_course import device
    from gemm_course.measure.bench import _write_json, provenance

    device.require_gpu("recording hardware counters")
    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError(NO_NCU)
    chosen = choose_metrics(available_metric_bases(ncu))
    missing = [m.key for m in METRICS if m.key not in chosen]
    method = (f"ncu {ncu_version(ncu)} --clock-control none --nvtx --nvtx-include '{NVTX_RANGE}/' --csv --page raw "
              f"--print-units base; caches flushed before every replay pass (ncu's default cache control); one "
              f"launch of each setting at {size}³ after one unprofiled launch that is checked against float64; "
              f"one ncu run per metric group ({', '.join(GROUPS)}), a few metrics each; inputs uniform(−1, 1)")
    payload: dict[str, Any] = {"schema": 1, "provenance": {**provenance(method), "ncu": ncu_version(ncu),
                                                            "metrics": chosen, "metrics_not_offered": missing,
                                                            "clock_control": "none"},
                               "records": [], "counters": []}
    path = Path(out)
    groups = default_targets(level_ids)
    if missing_only:
        groups = [g for g in ([t for t in group if not _already_recorded(t)] for group in groups) if g]
        payload["provenance"]["missing_only"] = True
    try:
        for group in groups:
            merged: list[dict[str, Any]] = [dict(t.as_json(), M=size, N=size, K=size, metrics={}, kernels=[])
                                            for t in group]
            for g in GROUPS:
                names = [chosen[m.key] for m in METRICS if m.group == g and m.key in chosen]
                names += [chosen["duration_ns"]] if g != "issue" else []
                per_target = _assign(group, _profile_group(ncu, group, names, size))
                for row, kernels in zip(merged, per_target):
                    main = max(kernels, key=lambda k: k["values"].get(chosen["duration_ns"]) or 0)
                    row["kernels"] = sorted({*row["kernels"], *(k["kernel"] for k in kernels)})
                    for m in METRICS:
                        if m.group == g and m.key in chosen:
                            row["metrics"][m.key] = main["values"].get(chosen[m.key])
                progress(f"{group[0].level}: {g} counters read for {len(group)} launches")
            payload["counters"] += merged
            _write_json(path, payload)
    except KeyboardInterrupt:
        progress(f"interrupted: keeping the {len(payload['counters'])} rows read so far")
        payload["interrupted"] = True
    _write_json(path, payload)
    return payload


def launch_profiled(run: Callable[[], Any]) -> None:
    """One more launch, alone inside the NVTX range that ncu profiles (the GPU idle before and after it)."""
    import cupy
    from cupy.cuda import nvtx

    cupy.cuda.Device().synchronize()
    nvtx.RangePush(NVTX_RANGE)
    run()
    cupy.cuda.Device().synchronize()
    nvtx.RangePop()


def _run_targets(spec_path: str) -> None:
    """The program ncu profiles: launch each target once unprofiled (checked), then once inside the
    NVTX range that ncu is told to profile."""
    import cupy

    from gemm_course.measure.bench import cublas_gemm
    from gemm_course.run.check import epilogue_inputs, random_operands, relative_error, tolerance
    from gemm_course.run.dtypes import nan_filled, to_float64
    from gemm_course.run.launch import gemm
    from gemm_course.measure.peak import part_source

    spec = json.loads(Path(spec_path).read_text())
    n = spec["size"]
    for t in spec["targets"]:
        A, B = random_operands(n, n, n, t["dtype"])
        reference = to_float64(A) @ to_float64(B)
        if t["level"] == CUBLAS:
            C = nan_filled((n, n), t["dtype"], cupy)
            run: Callable[[], Any] = lambda: cublas_gemm(A, B, C)  # noqa: E731
            expected = reference
        else:
            lv = get_level(t["level"])
            params, expected = dict(t["params"]), reference
            c_type = lv.c_type(lv.resolve(**params), t["dtype"])
            C = nan_filled((n, n), c_type, cupy)
            if lv.epilogue:
                extra, C_initial, expected = epilogue_inputs(params, reference, t["dtype"], cupy)
                params.update(extra)
                if C_initial is not None:
                    C[...] = C_initial
            if t["part"]:
                params["source"] = part_source(t["part"])
            run = lambda: gemm(A, B, t["level"], out=C, **params)  # noqa: E731
        run()
        err = relative_error(C, expected)
        # cuBLAS writes C in the input type (fp16/bf16 round C itself): a loose bound still catches garbage.
        bound = 1e-2 if t["level"] == CUBLAS else tolerance(t["dtype"], n, c_type)
        if not t["part"] and not err <= bound:
            print(f"WRONG RESULT for {t['level']} {t['params']}: error {err:.2e}", file=sys.stderr)
            sys.exit(3)
        launch_profiled(run)
        del A, B, C, reference, expected
        cupy.get_default_memory_pool().free_all_blocks()


# --- reading what was recorded -------------------------------------------------------------------------

def recorded(level: Optional[str] = None) -> list[dict[str, Any]]:
    """Recorded counter rows (optionally one level's, with cuBLAS), each with its file's provenance."""
    rows = []
    for path in results.recorded_files():
        data = results.load(path)
        for r in data.get("counters", []):
            if level in (None, r["level"]) or (level is not None and r["level"] == CUBLAS):
                rows.append({**r, "params": results._complete(r["level"], r["params"]),
                             "gpu": data["provenance"]["gpu"], "date": data["provenance"]["date"][:10],
                             "file": path.name, "provenance": data["provenance"]})
    return rows


def _setting(row: Mapping[str, Any]) -> tuple[str, str, Optional[str], str]:
    return row["level"], json.dumps(row["params"], sort_keys=True), row.get("part"), row["dtype"]


def current(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows no newer record replaces: per setting (level, params, part, input type) the one of the latest
    provenance date (the first of those, in file order), kept in file order."""
    rows = list(rows)
    newest: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        j = newest.get(_setting(r))
        if j is None or r["provenance"]["date"] > rows[j]["provenance"]["date"]:
            newest[_setting(r)] = i
    keep = set(newest.values())
    return [dict(r) for i, r in enumerate(rows) if i in keep]


def find(level: str, part: Optional[str] = None, dtype: Optional[str] = None, **params: Any) -> dict[str, Any]:
    """The recorded counter row of one setting (KeyError if none): a level's, resolved with its
    defaults, or cuBLAS's in an input type. Where several files hold the setting, the newest record wins
    (latest provenance date; a kernel re-recorded after an edit replaces its earlier counters)."""
    if level == CUBLAS:
        rows = [r for r in recorded() if r["level"] == CUBLAS and r["dtype"] == (dtype or "float32")]
    else:
        lv = get_level(level)
        wanted = lv.resolve(**params)
        rows = [r for r in recorded(lv.id) if r["level"] == lv.id and r["params"] == wanted
                and r.get("part") == part and dtype in (None, r["dtype"])]
    if not rows:
        raise KeyError(f"no recorded counters for {level} {params} {part or ''}".strip())
    return current(rows)[0]  # one setting: its newest record


def derived(metrics: Mapping[str, Optional[float]]) -> dict[str, Optional[float]]:
    """Ratios a reader compares with the models: sectors per request, wavefronts per instruction,
    the top stall reasons, the clock in MHz."""

    def ratio(a: str, b: str) -> Optional[float]:
        x, y = metrics.get(a), metrics.get(b)
        return x / y if x is not None and y else None

    out = {"sectors_per_load_request": ratio("global_load_sectors", "global_load_requests"),
           "sectors_per_store_request": ratio("global_store_sectors", "global_store_requests"),
           "wavefronts_per_shared_load": ratio("shared_load_wavefronts", "shared_load_instructions"),
           "wavefronts_per_shared_store": ratio("shared_store_wavefronts", "shared_store_instructions"),
           "wavefronts_per_ldmatrix": ratio("ldmatrix_wavefronts", "ldmatrix_instructions"),
           "sm_clock_mhz": (metrics["sm_clock_hz"] / 1e6) if metrics.get("sm_clock_hz") else None}
    sectors = metrics.get("l2_read_sectors")
    out["l2_read_bytes"] = sectors * 32 if sectors is not None else None
    return out


def top_stalls(metrics: Mapping[str, Optional[float]], n: int = 3) -> list[tuple[str, float]]:
    """The n largest stall reasons (warps waiting per issued instruction), excluding 'selected' (a warp
    that issues counts as selected; it is not a stall)."""
    stalls = [(k[len("stall_"):], v) for k, v in metrics.items()
              if k.startswith("stall_") and v is not None and k != "stall_selected"]
    return sorted(stalls, key=lambda kv: -kv[1])[:n]


def label(row: Mapping[str, Any]) -> str:
    """A short label for a row: the level's parameters that differ from its defaults, and the part."""
    if row["level"] == CUBLAS:
        return f"cuBLAS {row['dtype']}"
    defaults = get_level(row["level"]).defaults
    changed = ",".join(f"{k}={v}" for k, v in row["params"].items() if defaults.get(k) != v) or "default"
    return changed + (f" [{row['part']}]" if row.get("part") else "")


TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (  # (key, header, format)
    ("sectors_per_load_request", "sect/ld", "{:.1f}"), ("global_load_l1_hit_pct", "L1hit%", "{:.0f}"),
    ("l2_read_bytes", "L2 GB", "{:.2f}"), ("dram_read_bytes", "DRAM GB", "{:.2f}"),
    ("wavefronts_per_shared_load", "wf/lds", "{:.2f}"), ("wavefronts_per_shared_store", "wf/sts", "{:.2f}"),
    ("issue_active_pct", "issue%", "{:.0f}"), ("fma_pipe_pct", "fma%", "{:.0f}"), ("tensor_pipe_pct", "tc%", "{:.0f}"),
    ("achieved_occupancy_pct", "occ%", "{:.0f}"), ("sm_clock_mhz", "MHz", "{:.0f}"),
)


def table_rows(level: Optional[str] = None) -> list[dict[str, Any]]:
    """The recorded rows with their derived values and top stalls, as `counters --json` prints them."""
    out = []
    for r in current(recorded(level)):  # a setting recorded again appears once, as its newest record
        more = derived(r["metrics"])
        out.append({"level": r["level"], "params": r["params"], "part": r.get("part"), "dtype": r["dtype"],
                    "M": r["M"], "N": r["N"], "K": r["K"], "metrics": r["metrics"],
                    "derived": more, "top_stalls": top_stalls(r["metrics"]),
                    "kernels": r.get("kernels", []), "gpu": r["gpu"], "date": r["date"], "file": r["file"],
                    "provenance": {**{k: r["provenance"].get(k) for k in ("gpu", "date", "ncu", "method", "driver",
                                                                          "cuda_runtime", "metrics")},
                                   "command": results.command_line(r["provenance"])},
                    "_values": {**r["metrics"], **more}})
    return out


# What changes between two levels' recorded counters, in the order a reader follows a load: the warp
# instructions, the sectors they ask of L1, what L1 misses to L2, what reaches DRAM, and the time.
COMPARISON: tuple[tuple[str, str, str, str], ...] = (  # (key, English, Chinese, unit)
    ("global_load_requests", "global load instructions (warp requests)", "全局加载指令（线程束请求）", "million"),
    ("global_load_sectors", "sectors those loads ask of L1", "这些加载向 L1 请求的扇区", "million"),
    ("global_load_l1_hit_pct", "share of them that hit in L1", "其中在 L1 命中的比例", "%"),
    ("l2_read_bytes", "bytes read from L2", "从 L2 读取的字节", "GB"),
    ("dram_read_bytes", "bytes read from DRAM", "从 DRAM 读取的字节", "GB"),
    ("dram_read_tbs", "DRAM read rate", "DRAM 读取速率", "TB/s"),
    ("duration_ms", "kernel time under the profiler", "分析器下的内核耗时", "ms"),
)


def comparison(levels: Sequence[str | int] = ("01_naive", "02_smem_tiling")) -> list[dict[str, Any]]:
    """The recorded counters of the levels' default settings side by side (at COUNTER_SIZE³): one row
    per quantity of COMPARISON, with each level's value and the ratio first / last (how many times
    fewer), and a last row with each level's largest stall reason."""
    found = [find(get_level(lv).id) for lv in levels]
    values = []
    for r in found:
        m = r["metrics"]
        v = {**m, **derived(m)}
        v["duration_ms"] = m["duration_ns"] / 1e6
        v["dram_read_tbs"] = m["dram_read_bytes"] / m["duration_ns"] / 1e3
        values.append(v)
    scale = {"million": 1e-6, "GB": 1e-9, "%": 1.0, "TB/s": 1.0, "ms": 1.0}
    rows = []
    for key, en, zh, unit in COMPARISON:
        vals = [v[key] * scale[unit] for v in values]
        ratio = vals[0] / vals[-1] if vals[-1] and unit != "%" else None
        rows.append({"key": key, "en": en, "zh": zh, "unit": unit, "values": vals, "ratio": ratio})
    rows.append({"key": "top_stall", "en": "largest stall reason (warps waiting per issued instruction)",
                 "zh": "最大的停顿原因（每条已发射指令对应的等待线程束数）", "unit": "",
                 "values": [top_stalls(r["metrics"], 1)[0] for r in found], "ratio": None})
    for row in rows:
        row["levels"] = [r["level"] for r in found]
        row["settings"] = [label(r) for r in found]
        row["provenance"] = found[0]["provenance"]
    return rows


def format_table(rows: Iterable[Mapping[str, Any]]) -> str:
    lines = [f"{'level':<20} {'setting':<40} " + " ".join(f"{h:>8}" for _, h, _ in TABLE_COLUMNS) + "  top stalls"]
    for r in rows:
        v = r["_values"]
        cells = []
        for key, _, fmt in TABLE_COLUMNS:
            x = v.get(key)
            if x is not None and key.endswith("bytes"):
                x /= 1e9
            cells.append(f"{fmt.format(x) if x is not None else '–':>8}")
        stalls = ", ".join(f"{name} {value:.1f}" for name, value in r["top_stalls"])
        lines.append(f"{r['level']:<20} {label(r)[:40]:<40} " + " ".join(cells) + f"  {stalls}")
    return "\n".join(lines)


if __name__ == "__main__":  # the program ncu profiles (see _profile_group)
    _run_targets(sys.argv[1])
