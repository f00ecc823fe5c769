"""Measurements behind single claims of Levels 8, 10 and 13 (a Hopper GPU; Nsight Compute for the counters).

- `record_promotion_counters`: Level 13 at 4096³, what promotion costs in the counters: the block-scaled
  kernels (promotion waited for, overlapped), the per-tensor 128×128 kernel (no promotion) and cuBLASLt's
  block-scaled GEMM, each with its elapsed cycles, instructions, global loads, stall reasons per issued
  instruction, L2 reads and DRAM traffic.
- `record_bank_probe`: Level 8's shared loads, counted pass by pass: the probe `shared_load_probe` of
  kernels/peak_probe.cu (A's and B's fragment loads alone, with Level 8's addressing), and Level 8 itself
  with and without B's copies and A's stores, loads and stores apart.
- `record_barrier_blocks`: Level 10's math with and without its block barrier at one and at two blocks per
  SM, timed with the kernel clock.

Each ncu run launches every target once unprofiled, then once inside the NVTX range `gemm_course` that ncu
is told to profile (`--clock-control none`, caches flushed before each replay pass, ncu's default).

    python -c "from gemm_course.measure import ncu_probes as p; p.record_promotion_counters('FILE')"
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

NVTX = "gemm_course"
SIZE = 4096
STALLS = ("long_scoreboard", "short_scoreboard", "barrier", "mio_throttle", "math_pipe_throttle", "wait",
          "not_selected", "lg_throttle", "dispatch_stall", "no_instruction", "branch_resolving", "membar",
          "sleeping", "tex_throttle", "selected", "drain", "imc_miss", "misc")
PROMOTION_METRICS = {  # key → ncu name; two runs: "work" then "stalls"
    "work": {"cycles_elapsed_avg": "sm__cycles_elapsed.avg", "cycles_elapsed_max": "sm__cycles_elapsed.max",
             "sm_clock_hz": "smsp__cycles_elapsed.avg.per_second", "duration_ns": "gpu__time_duration.sum",
             "instructions": "smsp__inst_executed.sum", "global_load_instructions": "smsp__inst_executed_op_global_ld.sum",
             "global_load_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
             "l2_read_sectors": "lts__t_sectors_op_read.sum", "dram_read_bytes": "dram__bytes_read.sum",
             "dram_write_bytes": "dram__bytes_write.sum",
             "tensor_pipe_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
             "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active"},
    "stalls": {"instructions": "smsp__inst_executed.sum", "duration_ns": "gpu__time_duration.sum",
               **{f"stall_{s}": f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS}},
}
SHARED_METRICS = {
    "shared_load_instructions": "smsp__inst_executed_op_shared_ld.sum",
    "shared_load_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "shared_load_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "shared_store_instructions": "smsp__inst_executed_op_shared_st.sum",
    "shared_store_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "shared_store_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "shared_wavefronts_all": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "duration_ns": "gpu__time_duration.sum",
}
# Level 13's steps profiled for the promotion question (the per-tensor 128×128 kernel has no promotion).
PROMOTION_STEPS: tuple[dict[str, Any], ...] = (
    {"scaling": "per_tensor", "block_n": 128},
    {"scaling": "blockwise", "overlap": False, "splits": 1},
    {"scaling": "blockwise", "overlap": True, "splits": 1},
)
# Scales staged by the producer against the overlapped kernel that loads them in the consumers (and that
# kernel waiting for promotion, to see the same counters as the promotion question).
STAGED_COUNTER_STEPS: tuple[dict[str, Any], ...] = (
    {"scaling": "blockwise", "overlap": True, "splits": 1},
    {"scaling": "blockwise", "overlap": True, "splits": 1, "staged_scales": True},
    {"scaling": "blockwise", "overlap": False, "splits": 1, "staged_scales": True},
)
# ... and at the decode shape Level 13's small-M counters profile, the 64-row kernel with the two splits its
# model picks there, without and with staged scales.
STAGED_DECODE_SHAPE = (64, 7168, 16384)
STAGED_DECODE_COUNTER_STEPS: tuple[dict[str, Any], ...] = (
    {"scaling": "blockwise", "block_m": 64, "splits": 2},
    {"scaling": "blockwise", "block_m": 64, "splits": 2, "staged_scales": True},
)
STAGED_COUNTER_PLAN = (((SIZE,) * 3, STAGED_COUNTER_STEPS), (STAGED_DECODE_SHAPE, STAGED_DECODE_COUNTER_STEPS))
# The probe's settings: Level 8's default (128×128, 64×32 warp tiles) and the 64×256 setting (64×64).
PROBE_TILES = ((128, 128, 64, 32), (64, 256, 64, 64))
PROBE_PATTERNS = {0: "A's fragment loads", 1: "B's fragment loads", 2: "A's and B's, as in a k-step of Level 8",
                  3: "32 distinct contiguous float4 per warp", 4: "one float4 for the whole warp"}
PROBE_ITERATIONS = 64
# Level 8 taken apart for the shared-memory counters: the code removed from its source (the results are
# then wrong, which is why these variants exist only here).
LEVEL8_VARIANTS = ("as_is", "no_b_copies", "no_a_stores", "neither")
_B_COPY = ("copy_async<16>(&Bs[buf][b_row + i * ROWS_B][b_col], ok ? reinterpret_cast<const float*>(b_src) : B, ok);",
           "copy_async<16>(&Bs[buf][e / (BN / 4)][(e % (BN / 4)) * 4], B + (ok ? o : 0), ok);")
_A_STORES = ("As[buf][k + 0][m] = a_next[i].x;", "As[buf][k + 1][m] = a_next[i].y;",
             "As[buf][k + 2][m] = a_next[i].z;", "As[buf][k + 3][m] = a_next[i].w;")


def level8_variant_source(variant: str) -> str:
    """Level 8's source with B's copies and/or A's shared stores removed (see LEVEL8_VARIANTS)."""
    from gemm_course.run.compile import kernel_source

    src = kernel_source("08_warp_tiling")
    if variant not in LEVEL8_VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(LEVEL8_VARIANTS)}")
    cut = (_B_COPY if variant in ("no_b_copies", "neither") else ()) + (_A_STORES if variant in ("no_a_stores", "neither") else ())
    for text in cut:
        if text not in src:
            raise RuntimeError(f"08_warp_tiling.cu no longer holds `{text}`; update ncu_probes")
        src = src.replace(text, "")
    return src


def _ncu() -> tuple[str, str]:
    from gemm_course.measure.counters import NO_NCU, find_ncu, ncu_version

    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError(NO_NCU)
    return ncu, ncu_version(ncu)


@functools.lru_cache(maxsize=None)
def _bases(ncu: str) -> frozenset[str]:
    from gemm_course.measure.counters import available_metric_bases

    return frozenset(available_metric_bases(ncu))


def _offered(ncu: str, names: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    bases = _bases(ncu)
    keep = {k: v for k, v in names.items() if not bases or v.split(".")[0] in bases}
    return keep, sorted(set(names) - set(keep))


def _profile(ncu: str, targets: list[dict[str, Any]], metrics: dict[str, str]) -> tuple[list[dict[str, Any]], list[str]]:
    """One ncu process over the targets; the profiled kernels in launch order, and the command line."""
    from gemm_course.measure.counters import parse_ncu_csv

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "targets.json"
        spec.write_text(json.dumps(targets))
        command = [ncu, "--target-processes", "all", "--clock-control", "none", "--nvtx", "--nvtx-include",
                   f"{NVTX}/", "--metrics", ",".join(metrics.values()), "--csv", "--page", "raw", "--print-units",
                   "base", sys.executable, "-m", "gemm_course.measure.ncu_probes", str(spec)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    rows = parse_ncu_csv(done.stdout)
    if done.returncode != 0 or not rows:
        tail = (done.stderr or done.stdout).strip().splitlines()[-6:]
        raise RuntimeError("ncu failed: " + " | ".join(tail))
    return rows, [Path(c).name if i == 0 else c for i, c in enumerate(command[:-1])] + ["TARGETS.json"]


def _assign(targets: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each target's kernels, in launch order: a course kernel's one; a library call's (it may launch helpers)
    the kernels up to the next FP8 course kernel (named fp8_gemm_*) where a course target follows it, else the
    rest. A profile that does not fit the targets is refused."""
    ours = lambda row: row["kernel"].removeprefix("void ").startswith("fp8_gemm")  # noqa: E731
    library = [t["kind"] == "cublaslt_blockwise" for t in targets]
    out, j = [], 0
    for i, is_library in enumerate(library):
        left = len(rows) - j
        if not is_library:
            take = 1
        elif not all(library[i + 1:]):  # a course kernel follows: stop at it
            take = next((n for n in range(left) if ours(rows[j + n])), left)
        else:
            take = left
        if take == 0 or take > left:
            break
        out.append(rows[j:j + take])
        j += take
    if len(out) != len(targets) or j != len(rows):
        raise RuntimeError(f"{len(targets)} targets but the {len(rows)} profiled kernels do not match them: "
                           + ", ".join(r["kernel"][:40] for r in rows))
    return out


def _merge(targets: list[dict[str, Any]], runs: Sequence[tuple[dict[str, str], list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    merged = [dict(t, metrics={}, kernels=[]) for t in targets]
    for metrics, rows in runs:
        for row, kernels in zip(merged, _assign(targets, rows)):
            dur = metrics.get("duration_ns", "gpu__time_duration.sum")
            main = max(kernels, key=lambda k: k["values"].get(dur) or 0)  # a library call may launch helpers
            row["kernels"] = sorted({*row["kernels"], *(k["kernel"] for k in kernels)})
            row["kernel_count"] = len(kernels)
            for key, name in metrics.items():
                row["metrics"][key] = main["values"].get(name)
    return merged


def _write(out: str | Path, method: str, extra: dict[str, Any], key: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from gemm_course.measure.bench import _write_json, provenance

    payload = {"schema": 1, "provenance": {**provenance(method), **extra}, "records": [], key: rows}
    _write_json(Path(out), payload)
    return payload


def record_promotion_counters(out: str | Path, progress: Callable[[str], None] = print,
                              plan: Sequence[tuple[tuple[int, int, int], Sequence[dict[str, Any]]]]
                              = (((SIZE,) * 3, PROMOTION_STEPS),)) -> dict[str, Any]:
    """Level 13's promotion question in the counters at 4096³ (see the module's docstring); plan: per shape
    (M, N, K), the kernels profiled there beside cuBLASLt (STAGED_COUNTER_PLAN: where the scales come from)."""
    from gemm_course.fp8.gemm import _require_hopper

    _require_hopper()
    ncu, version = _ncu()
    targets: list[dict[str, Any]] = []
    for (M, N, K), steps in plan:
        targets += [{"kind": "fp8", "step": dict(s), "M": M, "N": N, "K": K} for s in steps]
        targets.append({"kind": "cublaslt_blockwise", "M": M, "N": N, "K": K})
    runs, used, missing, commands = [], {}, [], []
    for group, names in PROMOTION_METRICS.items():
        keep, lost = _offered(ncu, names)
        rows, command = _profile(ncu, targets, keep)
        runs.append((keep, rows))
        used.update(keep)
        missing += lost
        commands.append(" ".join(command))
        progress(f"promotion counters: {group} read for {len(targets)} targets ({len(rows)} kernels)")
    merged = _merge(targets, runs)
    for r in merged:
        m = r["metrics"]
        progress(f"{r['kind']} {r.get('step', '')}: " + ", ".join(f"{k} {v:.4g}" for k, v in m.items() if v is not None))
    method = (f"ncu {version}; one process per metric group ({', '.join(PROMOTION_METRICS)}), each launching every target "
              f"once unprofiled, then once inside the NVTX range '{NVTX}' that ncu profiles; --clock-control none; "
              "caches flushed before each replay pass; operands from fp8_gemm.random_fp8_operands (seed 0); "
              "cuBLASLt's block-scaled GEMM through fp8_gemm._torch_blockwise_scaled_mm on the same kind of operands "
              "(its metrics are those of its longest kernel, kernel_count says how many it launched)")
    return _write(out, method, {"ncu": version, "metrics": used, "metrics_not_offered": sorted(set(missing)),
                                "clock_control": "none", "ncu_commands": commands}, "promotion_counters", merged)


def record_bank_probe(out: str | Path, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Level 8's shared-memory passes: the probe's patterns, then Level 8 (default and the 64×256 settings,
    stepped) as it is and with parts of its shared-memory traffic removed."""
    from gemm_course.levels import TUNED_WARP_TILING

    ncu, version = _ncu()
    keep, lost = _offered(ncu, SHARED_METRICS)
    targets: list[dict[str, Any]] = [{"kind": "probe", "tile": list(t), "pattern": p, "iterations": PROBE_ITERATIONS,
                                      "what": PROBE_PATTERNS[p]} for t in PROBE_TILES for p in PROBE_PATTERNS]
    for params in ({}, dict(TUNED_WARP_TILING), {**TUNED_WARP_TILING, "stepped": True}):
        targets += [{"kind": "level8", "params": params, "variant": v, "M": SIZE, "N": SIZE, "K": SIZE}
                    for v in LEVEL8_VARIANTS]
    rows, command = _profile(ncu, targets, keep)
    merged = _merge(targets, [(keep, rows)])
    for r in merged:
        m = r["metrics"]
        ld = m["shared_load_wavefronts"] / m["shared_load_instructions"] if m.get("shared_load_instructions") else None
        st = m["shared_store_wavefronts"] / m["shared_store_instructions"] if m.get("shared_store_instructions") else None
        progress(f"{r['kind']} {r.get('tile', r.get('params'))} {r.get('pattern', r.get('variant'))}: "
                 f"wavefronts per shared load {ld if ld is None else round(ld, 3)}, per store {st if st is None else round(st, 3)}")
    method = (f"ncu {version}; one process launching every target once unprofiled, then once inside the NVTX range "
              f"'{NVTX}' that ncu profiles; --clock-control none. Probe: shared_load_probe<BM, BN, WM, WN, PATTERN> "
              f"of kernels/peak_probe.cu, one block per SM (132), {PROBE_ITERATIONS} iterations of 16 k-steps. "
              f"Level 8 at {SIZE}³ on uniform(−1, 1) inputs; variants other than as_is have B's cp.async and/or A's "
              "shared stores removed from the source (ncu_probes.level8_variant_source) and compute wrong results")
    return _write(out, method, {"ncu": version, "metrics": keep, "metrics_not_offered": lost, "clock_control": "none",
                                "ncu_command": " ".join(command)}, "bank_probe", merged)


def record_barrier_blocks(out: str | Path, sizes: Sequence[int] = (4096, 8192), passes: int = 2,
                          progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Level 10's math part with and without its barrier (peak.PARTS), at two blocks per SM (4 stages,
    BN = 128) and at one (BN = 256), each timed with the kernel's own SM clock, passes times in turn."""
    import cupy

    from gemm_course.measure.bench import CLOCK_METHOD, time_gpu
    from gemm_course.run.check import random_operands
    from gemm_course.run.compile import compile_report
    from gemm_course.run.launch import gemm
    from gemm_course.models import gemm_flops
    from gemm_course.measure.peak import PARTS_SETTINGS, part_source

    rows = []
    sources = {part: part_source(part) for part in ("math", "math_no_barrier")}
    for n in sizes:
        A, B = random_operands(n, n, n, "bfloat16")
        C = cupy.empty((n, n), dtype=cupy.float32)
        for setting in PARTS_SETTINGS:
            rep = compile_report("10_mma_pipeline", **setting)
            for k in range(passes):
                row: dict[str, Any] = {"M": n, "N": n, "K": n, "dtype": "bfloat16", "params": dict(setting), "pass": k,
                                       "blocks_per_sm": rep.occupancy.blocks_per_sm, "registers": rep.registers}
                for part, src in sources.items():
                    t = time_gpu(lambda: gemm(A, B, "10_mma_pipeline", out=C, source=src, **setting))
                    row[part] = {"median_ms": t.median_ms, "q1_ms": t.q1_ms, "q3_ms": t.q3_ms, "reps": t.reps,
                                 "sm_clock_mhz": t.sm_clock_mhz, "nvml_sm_clock_mhz": t.nvml_sm_clock_mhz,
                                 "tflops": gemm_flops(n, n, n) / (t.median_ms * 1e-3) / 1e12}
                progress(f"{n}³ {setting} ({rep.occupancy.blocks_per_sm} blocks/SM) pass {k}: math "
                         f"{row['math']['median_ms']:.3f} ms at {row['math']['sm_clock_mhz']:.0f} MHz, no barrier "
                         f"{row['math_no_barrier']['median_ms']:.3f} ms at {row['math_no_barrier']['sm_clock_mhz']:.0f} MHz")
                rows.append(row)
        A = B = C = None
        cupy.get_default_memory_pool().free_all_blocks()
    method = ("bench.time_gpu (L2 flushed before every repetition, 0.1 s of untimed launches to settle the clock, "
              "at least 5 and at most 50 repetitions within 2 s, median); " + CLOCK_METHOD + "; Level 10's math part "
              "(peak.part_source('math')) and the same without its block barrier ('math_no_barrier'), bf16 inputs "
              f"uniform(−1, 1); {passes} passes over both settings in turn")
    return _write(out, method, {}, "level_10_barrier", rows)


def record_level8_edit_ab(out: str | Path, earlier_source: str | Path, earlier_commit: str,
                          sizes: Sequence[int] = (4096, 8192), passes: int = 2,
                          progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Level 8's showcase settings timed with an earlier source of the kernel and with the current one, in
    turn in one process (A/B), passes times at each size, kernel clock measured; each output checked first."""
    import cupy

    from gemm_course.measure.bench import CLOCK_METHOD, time_gpu
    from gemm_course.run.check import random_operands, relative_error, tolerance
    from gemm_course.run.compile import kernel_source
    from gemm_course.levels import get_level
    from gemm_course.run.launch import gemm
    from gemm_course.models import gemm_flops

    lv = get_level("08_warp_tiling")
    sources = {"earlier": Path(earlier_source).read_text(encoding="utf-8"), "current": kernel_source(lv.id)}
    rows = []
    for n in sizes:
        A, B = random_operands(n, n, n)
        C = cupy.empty((n, n), dtype=cupy.float32)
        reference = A.astype(cupy.float64) @ B.astype(cupy.float64)
        for params in lv.showcase:
            for name, src in sources.items():  # checked once per source and size: NaN-poisoned, then compared
                C.fill(cupy.nan)
                gemm(A, B, lv.id, out=C, source=src, **params)
                err = relative_error(C, reference)
                if not err <= tolerance("float32", n):
                    raise RuntimeError(f"{name} source, {params}, {n}³: relative error {err:.2e}")
            for k in range(passes):
                for name, src in sources.items():
                    t = time_gpu(lambda: gemm(A, B, lv.id, out=C, source=src, **params))
                    rows.append({"M": n, "N": n, "K": n, "params": dict(params), "source": name, "pass": k,
                                 "median_ms": t.median_ms, "q1_ms": t.q1_ms, "q3_ms": t.q3_ms, "reps": t.reps,
                                 "sm_clock_mhz": t.sm_clock_mhz, "nvml_sm_clock_mhz": t.nvml_sm_clock_mhz,
                                 "tflops": gemm_flops(n, n, n) / (t.median_ms * 1e-3) / 1e12})
                    progress(f"{n}³ {params} {name} pass {k}: {t.median_ms:.3f} ms at {t.sm_clock_mhz:.0f} MHz")
        A = B = C = reference = None
        cupy.get_default_memory_pool().free_all_blocks()
    method = ("bench.time_gpu (L2 flushed before every repetition, 0.1 s of untimed launches to settle the clock, at "
              "least 5 and at most 50 repetitions within 2 s, median); " + CLOCK_METHOD + f"; Level 8's showcase settings, "
              f"the earlier source (08_warp_tiling.cu at commit {earlier_commit}) and the current one timed in turn, "
              f"{passes} passes, uniform(−1, 1) inputs, each source's output checked against float64 first (NaN-poisoned C)")
    return _write(out, method, {"earlier_commit": earlier_commit}, "level8_edit_ab", rows)


def _run(spec_path: str) -> None:
    """The program ncu profiles: each target once unprofiled, then once inside the NVTX range."""
    import cupy
    from cupy.cuda import nvtx

    targets = json.loads(Path(spec_path).read_text())
    for t in targets:
        run = _prepare(t)
        if run is None:
            print(f"skipped (not available here): {t}", file=sys.stderr)
            continue
        run()
        cupy.cuda.Device().synchronize()
        nvtx.RangePush(NVTX)
        run()
        cupy.cuda.Device().synchronize()
        nvtx.RangePop()


def _prepare(t: dict[str, Any]) -> Optional[Callable[[], Any]]:
    import cupy

    if t["kind"] == "fp8":
        from gemm_course.fp8.gemm import prepare, random_fp8_operands

        step = dict(t["step"])
        scaling = step.pop("scaling")
        launch, _ = prepare(*random_fp8_operands(t["M"], t["N"], t["K"], scaling, xp=cupy), scaling=scaling, **step)
        return launch
    if t["kind"] == "cublaslt_blockwise":
        from gemm_course.fp8.gemm import _torch_blockwise_scaled_mm, random_fp8_operands

        ops = random_fp8_operands(t["M"], t["N"], t["K"], "blockwise", xp=cupy)
        return _torch_blockwise_scaled_mm(*ops, t["M"], t["N"], t["K"])
    if t["kind"] == "probe":
        from gemm_course.run.compile import COMPILE_OPTIONS, _compiled_kernel
        from gemm_course.device import properties
        from gemm_course.measure.peak import probe_source

        bm, bn, wm, wn = t["tile"]
        kernel = _compiled_kernel(probe_source(), COMPILE_OPTIONS, f"shared_load_probe<{bm}, {bn}, {wm}, {wn}, {t['pattern']}>", None)
        sink = cupy.zeros(1024, dtype=cupy.float32)
        grid, threads = int(properties()["multiProcessorCount"]), (bm // wm) * (bn // wn) * 32
        return lambda: kernel((grid,), (threads,), (sink, cupy.int32(t["iterations"])))
    if t["kind"] == "level8":
        from gemm_course.run.check import random_operands
        from gemm_course.run.launch import gemm

        A, B = random_operands(t["M"], t["N"], t["K"])
        C = cupy.empty((t["M"], t["N"]), dtype=cupy.float32)
        src = level8_variant_source(t["variant"])
        return lambda: gemm(A, B, "08_warp_tiling", out=C, source=src, **t["params"])
    raise ValueError(f"unknown target kind {t['kind']!r}")


if __name__ == "__main__":  # the program ncu runs (see _profile)
    _run(sys.argv[1])
