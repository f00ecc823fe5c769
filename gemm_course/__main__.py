"""Command line: python -m gemm_course {bench,record,check,summary,report,sass,batched,multigpu,peak,levels} ...

  bench    time chosen levels against cuBLAS over sizes, write a result file
  record   the course's recorded set for chosen levels (what ships in gemm_course/results/)
  check    correctness of every level on odd shapes, default and swept settings
  summary  the recorded ladder from the shipped result files (no GPU needed)
  report   a level's compile report for an architecture (no GPU needed)
  sass     a kernel's instruction mix or full disassembly (needs cuobjdump or nvdisasm)
  batched  a batch of small products in one launch, against one launch each and cuBLAS batched
  multigpu Level 12: row split, SUMMA and a tensor-parallel MLP block over several GPUs with NCCL
  fp8      Level 13: FP8 GEMM with block scales (recorded results; --record etc. on a Hopper GPU)
  dsl      Level 14: the GEMM in Triton and Gluon; --record checks and times them on a GPU, without it the
           tiled Triton kernel runs in Triton's interpreter on the CPU
  peak     measured instruction ceilings: FFMA, mma.sync, and Level 10's warp tile without its copies
  experiments  settings that separate two causes (Level 3, 8), Level 6 against a one-kernel epilogue
  counters hardware counters read with Nsight Compute: the recorded table, or --record on a GPU
  exercises  the exercises of every level;  grade  grade your kernel for one (CPU, no GPU needed)
  levels   the registry
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional

from .bilingual.language import chosen, command_line
from .bilingual.text import localize_error, one_language
from .levels import get_level, levels

DEFAULT_SIZES = (256, 512, 1024, 2048, 4096, 8192)


def _value(text: str) -> Any:
    """A parameter value as typed: an integer, True/False, or the text itself (e.g. a mode name)."""
    if text.lstrip("-").isascii() and text.lstrip("-").isdigit():  # not "4³": str.isdigit takes superscripts
        return int(text)
    return {"true": True, "false": False}.get(text.lower(), text)


def _plain(en: str, zh: str) -> str:
    """A command-line message in the reader's language (both, "English · 中文", when none is chosen)."""
    from gemm_course.bilingual.text import plain

    return plain(en, zh)


def parse_config(text: str) -> tuple[str, dict[str, Any]]:
    """'01_naive:mapping=rows,block_x=16' -> ('01_naive', {'mapping': 'rows', 'block_x': 16})."""
    level, params = _split_config(text)
    return get_level(level).id, params


def _split_config(text: str) -> tuple[str, dict[str, Any]]:
    """'LEVEL:name=value,...' -> (LEVEL as typed, parameters), for levels inside and outside the registry."""
    level, _, rest = text.partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"bad parameter {item!r} in {text!r}; write name=value")
        if key.strip() in params:  # the second would silently replace the first
            raise ValueError(_plain(f"{key.strip()} is given twice in {text!r}: keep one {key.strip()}=value",
                                    f"{text!r} 中 {key.strip()} 出现了两次：只保留一个 {key.strip()}=值"))
        params[key.strip()] = _value(value.strip())
    return level.strip(), params


def parse_size(text: str) -> int | tuple[int, int, int]:
    """'4096' → 4096 (a cube), '4096x4096x1024' → (M, N, K)."""
    parts = text.lower().replace("×", "x").split("x")  # 4096×4096×1024, as summary prints it, too
    if len(parts) not in (1, 3) or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        cube = text.rstrip("³ ")
        cubed = text.endswith("³") and cube.isascii() and cube.isdigit()
        raise ValueError(_plain(f"bad size {text!r}{f' (for {cube}³ write {cube})' if cubed else ''}: write n (for n×n×n) "
                                "or MxNxK with positive integers, e.g. 4096x4096x1024",
                                f"尺寸 {text!r} 有误{f'（{cube}³ 写作 {cube}）' if cubed else ''}：请写 n（表示 n×n×n）或 "
                                "MxNxK，均为正整数，例如 4096x4096x1024"))
    numbers = [int(p) for p in parts]
    return numbers[0] if len(numbers) == 1 else tuple(numbers)  # type: ignore[return-value]


def _selected(names: Optional[list[str]]):
    return [get_level(n) for n in names] if names else list(levels())


def cmd_bench(args: argparse.Namespace) -> None:
    from gemm_course.measure.bench import bench

    configs = [parse_config(c) for c in args.config]
    if not configs:
        raise SystemExit("name at least one --config LEVEL[:name=value,...]")
    bench(configs, [parse_size(s) for s in args.sizes.split(",")], out=args.out, dtype=args.dtype)


SWEEP_TIMING = {"min_reps": 5, "max_reps": 20, "budget_s": 0.5}  # many configurations: shorter runs
SWEEP_TIMING_FP8 = {"reps": 5, "max_reps": 20, "budget_s": 0.5}  # the same, in fp8.gemm.record_fp8's names


def record_plan(level_ids: Optional[list[str]], showcase_only: bool = False,
                sizes: Optional[list] = None, sweep_only: bool = False) -> list[tuple[list, list, dict]]:
    """(configs, sizes, timing) batches that `record` measures: showcase settings over the default
    sizes (or `sizes`) unless sweep_only, then, unless showcase_only, the sweep (the tuner's search space)
    at the level's sweep shapes."""
    from gemm_course.measure.autotune import search_space, sweep_shapes  # one definition for the tuner and record

    if showcase_only and sweep_only:
        raise ValueError("--showcase-only and --sweep-only exclude each other: give one · "
                         "--showcase-only 与 --sweep-only 互斥：只给一个")
    plan = []
    for lv in _selected(level_ids):
        if not sweep_only:
            plan.append(([(lv.id, dict(s)) for s in lv.showcase], sizes or [*DEFAULT_SIZES, *lv.record_shapes], {}))
        if lv.sweep is not None and not showcase_only:
            plan.append(([(lv.id, s) for s in search_space(lv)], sweep_shapes(lv), SWEEP_TIMING))
    return plan


def cmd_record(args: argparse.Namespace) -> None:
    from pathlib import Path

    from gemm_course.measure.bench import _write_json, bench, bench_fusion
    from gemm_course.inspect.sass import find_disassembler

    result = None
    sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else None
    if args.sweep_only and sizes:
        raise ValueError("--sweep-only times each level's sweep shapes (autotune.sweep_shapes): leave out --sizes · "
                         "--sweep-only 只测各级的扫描形状（autotune.sweep_shapes）：请去掉 --sizes")
    for configs, plan_sizes, timing in record_plan(args.levels, args.showcase_only, sizes, args.sweep_only):
        level_dtypes = get_level(configs[0][0]).dtypes
        if args.dtype and args.dtype not in level_dtypes:
            print(f"skipping {configs[0][0]}: it takes {', '.join(level_dtypes)}, not {args.dtype}")
            continue
        result = bench(configs, plan_sizes, out=args.out, result=result, dtype=args.dtype, **timing)
        if result.get("interrupted"):
            break
    if result is None or args.showcase_only or args.sweep_only:
        if result is not None:
            print(f"wrote {len(result['records'])} records to {args.out}")
        return
    chosen = _selected(args.levels)
    if any(lv.epilogue for lv in chosen):
        result["fusion"] = bench_fusion()
    if find_disassembler():
        from . import device

        cc = device.compute_capability()
        result["sass"] = [sass_record(lv.id, lv.resolve(**s)) for lv in chosen for s in lv.showcase
                          if lv.build_arch or lv.setting_runs_on(cc, lv.resolve(**s))]
    _write_json(Path(args.out), result)
    print(f"wrote {len(result['records'])} records to {args.out}")


def sass_record(level: str, params: dict) -> dict:
    """The instruction mix of a kernel as compiled for this GPU (recorded beside its timings)."""
    from . import device
    from gemm_course.inspect.sass import disassemble, instruction_mix, memory_summary

    lv = get_level(level)
    arch = lv.build_arch or device.arch()  # what disassemble() builds
    mix = instruction_mix(disassemble(level, arch=arch, **params))
    return {"level": level, "params": params, "arch": arch, "summary": memory_summary(mix), "mix": mix}


def cmd_sass(args: argparse.Namespace) -> None:
    from gemm_course.inspect.sass import disassemble, instruction_mix, memory_summary

    level, params = parse_config(args.config)
    text = disassemble(level, arch=args.arch, **params)
    print(text if args.full else json.dumps(memory_summary(instruction_mix(text)), indent=1))


CPU_EXTRA_SETTINGS = 8  # check --all-settings without a GPU: the showcase and this many more per level


def cmd_check(args: argparse.Namespace) -> None:
    from . import device
    from gemm_course.run.check import MULTIPLE_OF_8_SHAPES, ODD_SHAPES, check

    if args.max_settings is not None and not args.all_settings:
        raise ValueError(_plain("--max-settings goes with --all-settings (without it, check runs the showcase and the "
                                "experiments only): python -m gemm_course check --all-settings --max-settings 4",
                                "--max-settings 须与 --all-settings 一起用（不带它时 check 只检查代表性配置和对照实验配置）："
                                "python -m gemm_course check --all-settings --max-settings 4"))
    if args.max_settings is not None and args.max_settings < 0:
        raise ValueError(f"--max-settings {args.max_settings}: write 0 (every setting) or a positive number · "
                         f"--max-settings {args.max_settings} 有误：请写 0（全部设置）或正整数")
    failures = 0
    gpu = device.gpu_available()
    cc = device.compute_capability() if gpu else 0
    lang = _lang(args)
    for lv in _selected(args.levels):
        if not gpu and lv.uses_tensor_cores:
            print(_in(lang, f"{lv.id}: skipped, its Tensor Core instructions need a GPU (the CPU backend runs Levels 1-8)",
                      f"{lv.id}：已跳过，它的张量核心指令需要 GPU（CPU 后端只能运行第 1-8 级）"))
            continue
        settings = [lv.resolve(**s) for s in (*lv.showcase, *lv.experiments)]
        if args.all_settings:
            rest = [s for s in lv.valid_settings() if s not in settings]
            cap = args.max_settings if args.max_settings is not None else (0 if gpu else CPU_EXTRA_SETTINGS)
            if cap and len(rest) > cap:  # the CPU backend compiles and runs each setting thread by thread
                print(_in(lang, f"{lv.id}: {len(settings) + cap} of {len(settings) + len(rest)} settings (the showcase "
                                f"and {cap} spread over the rest){'' if gpu else ' on the CPU backend, no GPU here'}; "
                                "--max-settings 0 checks every one (hours without a GPU)",
                          f"{lv.id}：检查 {len(settings) + len(rest)} 个设置中的 {len(settings) + cap} 个（代表性配置，"
                          f"另从其余设置中均匀选取 {cap} 个）{'' if gpu else '，在 CPU 后端上运行，这里没有 GPU'}；"
                          "--max-settings 0 检查全部设置（没有 GPU 时要几个小时）"), flush=True)
                rest = [rest[round(i * (len(rest) - 1) / max(cap - 1, 1))] for i in range(cap)]
            settings += rest
        if gpu:
            skipped = [s for s in settings if not lv.setting_runs_on(cc, s)]
            settings = [s for s in settings if lv.setting_runs_on(cc, s)]
            if skipped:
                print(_in(lang, f"{lv.id}: {len(skipped)} settings skipped, they need a newer GPU than sm_{cc}",
                          f"{lv.id}：跳过 {len(skipped)} 个设置，它们需要比 sm_{cc} 更新的 GPU"))
        shapes = ODD_SHAPES + MULTIPLE_OF_8_SHAPES if gpu else ODD_SHAPES[:4]  # the CPU backend runs thread by thread: small shapes
        if not gpu and len(settings) > 5:  # the CPU backend takes seconds per setting: say so before the minutes go by
            print(_in(lang, f"{lv.id}: {len(settings)} settings × {len(shapes)} shapes on the CPU backend (no GPU here), "
                            "a few seconds each; Ctrl-C stops, --levels picks fewer levels",
                      f"{lv.id}：{len(settings)} 个设置 × {len(shapes)} 个形状，在 CPU 后端上运行（这里没有 GPU），"
                      "每个需要几秒；按 Ctrl-C 停止，用 --levels 只选部分级别"), flush=True)
        checked = 0
        for n, params in enumerate(settings, 1):
            if not gpu and len(settings) > 5 and n % 5 == 0:
                print(_in(lang, f"  {lv.id}: {n} of {len(settings)} settings checked, {failures} failed so far",
                          f"  {lv.id}：已检查 {n}/{len(settings)} 个设置，目前 {failures} 个失败"), flush=True)
            for M, N, K in shapes:
                if lv.shape_rules(M, N, K, params):  # a precondition of the kernel (e.g. K % 8 == 0)
                    continue
                result = check(lv, M, N, K, **params)
                checked += 1
                failures += not result.passed
                if not result.passed or args.verbose:
                    print(result)
        print(_in(lang, f"{lv.id}: {len(settings)} settings, {checked} checks on odd shapes"
                        + ("" if gpu else " (CPU backend, no GPU here)"),
                  f"{lv.id}：{len(settings)} 个设置，在不规则形状上检查 {checked} 次"
                  + ("" if gpu else "（CPU 后端，这里没有 GPU）")))
    print(_in(lang, f"{failures} failed", f"{failures} 个失败"))
    if failures:
        sys.exit(1)


def cmd_fp8(args: argparse.Namespace) -> None:
    from gemm_course.fp8 import gemm as fp8_gemm

    if args.staged and (args.small_m or not (args.record or args.counters)):
        raise ValueError("--staged goes with --record or --counters, without --small-m (its shapes include the decode "
                         "shapes): python -m gemm_course fp8 --record --staged --out FILE · --staged 须与 --record 或 "
                         "--counters 一起用，且不带 --small-m（它的形状已含解码形状）")
    if args.splits and not (args.record and (args.staged or args.small_m) and not args.sweep_only):
        raise ValueError("--splits goes with --record and --staged or --small-m: python -m gemm_course fp8 --record "
                         "--staged --splits 1,2,3 --sizes 64x24576x1536 --out FILE · --splits 须与 --record 以及 "
                         "--staged 或 --small-m 一起用")
    if args.peer and (not args.record or args.small_m or args.staged or args.sweep_only or args.splits):
        raise ValueError("--peer goes with --record alone (it times its own shapes: the squares and the projections, "
                         "or --sizes): python -m gemm_course fp8 --record --peer deepgemm --out FILE · --peer 只与 "
                         "--record 一起用（形状自定：方阵与各投影形状，或 --sizes）")
    for flag, given in (("--tma-scales", args.tma_scales), ("--narrow-tiles", args.narrow_tiles)):
        if given and (not args.record or args.small_m or args.staged or args.sweep_only or args.splits
                      or (args.tma_scales and args.narrow_tiles)):
            raise ValueError(f"{flag} goes with --record (and --peer deepgemm, --sizes): python -m gemm_course fp8 "
                             f"--record {flag} --peer deepgemm --out FILE · {flag} 只与 --record（以及 --peer "
                             "deepgemm、--sizes）一起用")
    if (args.sizes or args.small_m) and not (args.record or (args.small_m and args.counters)):
        flag = "--sizes" if args.sizes else "--small-m"
        raise ValueError(_plain(f"{flag} goes with --record{'' if args.sizes else ' or --counters'} (without it, fp8 "
                                f"prints the recorded results): python -m gemm_course fp8 --record {flag}"
                                f"{' 4096' if args.sizes else ''} --out FILE",
                                f"{flag} 须与 --record{'' if args.sizes else ' 或 --counters'} 一起用（不带它时 fp8 只打印"
                                f"实测记录）：python -m gemm_course fp8 --record {flag}{' 4096' if args.sizes else ''} "
                                "--out FILE"))
    if args.sweep_only and not args.record:
        raise ValueError("--sweep-only goes with --record: python -m gemm_course fp8 --record --sweep-only --out FILE · "
                         "--sweep-only 须与 --record 一起用")
    if args.record or args.counters or args.accuracy:
        if not args.out:
            raise ValueError("give --out FILE: the result file to write")
        if args.record:
            sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else None
            if args.tma_scales:
                from gemm_course.fp8.tma_scales import record_tma_scales

                record_tma_scales(args.out, sizes, peer=args.peer)
            elif args.narrow_tiles:
                from gemm_course.fp8.narrow_tiles import record_narrow_tiles

                record_narrow_tiles(args.out, sizes, peer=args.peer)
            elif args.peer:
                from gemm_course.fp8 import deepgemm

                deepgemm.record_peer(args.out, sizes, peer=args.peer)
            elif args.sweep_only:
                if sizes or args.small_m or args.staged:
                    raise ValueError("--sweep-only times the autotuner's shapes (fp8.gemm.SWEEP_SHAPES): leave out "
                                     "--sizes, --small-m and --staged · --sweep-only 只测调优器的形状"
                                     "（fp8.gemm.SWEEP_SHAPES）：请去掉 --sizes、--small-m 和 --staged")
                fp8_gemm.record_fp8(args.out, fp8_gemm.SWEEP_SHAPES, fp8_gemm.search_space(), bf16_baselines=False,
                                    **SWEEP_TIMING_FP8)
            elif args.staged or args.small_m:
                steps = fp8_gemm.STAGED_STEPS if args.staged else fp8_gemm.SMALL_M_STEPS
                if args.splits:
                    steps = fp8_gemm.with_split_counts(steps, _int_list(args.splits, "--splits", "--splits", "1,2,3"))
                fp8_gemm.record_fp8(args.out, sizes or (fp8_gemm.STAGED_SHAPES if args.staged else
                                                        fp8_gemm.SMALL_M_SHAPES), steps, bf16_baselines=False)
            else:
                fp8_gemm.record_fp8(args.out, sizes)
        elif args.counters:
            if args.staged:
                from gemm_course.measure.ncu_probes import STAGED_COUNTER_PLAN, record_promotion_counters

                record_promotion_counters(args.out, plan=STAGED_COUNTER_PLAN)
            elif args.small_m:
                fp8_gemm.record_fp8_counters(args.out, ((64, 7168, 16384),), fp8_gemm.SMALL_M_STEPS)
            else:
                fp8_gemm.record_fp8_counters(args.out)
        else:
            from gemm_course.fp8.accuracy import record_accuracy

            record_accuracy(args.out)
        return
    rows = fp8_gemm.recorded_fp8()
    if not rows:
        print("no recorded FP8 results; on an H100/H200: python -m gemm_course fp8 --record --out FILE")
    for r in rows:
        print(fp8_gemm._row_text(r) + f"  {r['gpu']}, {r['date']}")


def cmd_dsl(args: argparse.Namespace) -> None:
    """Level 14: --record checks and times the Triton and Gluon kernels on a GPU (gemm_course.dsl.record); without
    it, the tiled Triton kernel is checked in Triton's interpreter on the CPU (gemm_course.dsl.interpreter)."""
    if args.counters:
        if args.record or args.check_only or args.sizes:
            raise ValueError(_plain("--counters profiles its own fixed targets: leave out --record, --check-only and "
                                    "--sizes (python -m gemm_course dsl --counters --out FILE)",
                                    "--counters 分析的是固定的一组内核：请去掉 --record、--check-only 和 --sizes"
                                    "（python -m gemm_course dsl --counters --out FILE）"))
        if not args.out:
            raise ValueError(_plain("give --out FILE: the counters file to write (python -m gemm_course dsl --counters "
                                    "--out FILE)", "请给出 --out FILE：要写入的计数器文件（python -m gemm_course dsl "
                                    "--counters --out FILE）"))
        from gemm_course.dsl.counters import record_counters

        record_counters(args.out)
        return
    for flag, given in (("--check-only", args.check_only), ("--sizes", args.sizes), ("--out", args.out)):
        if given and not args.record:
            raise ValueError(_plain(f"{flag} goes with --record: python -m gemm_course dsl --record --out FILE",
                                    f"{flag} 须与 --record 一起用：python -m gemm_course dsl --record --out FILE"))
    if args.record:
        if not args.out:
            raise ValueError(_plain("give --out FILE: the result file to write (python -m gemm_course dsl --record "
                                    "--out FILE)", "请给出 --out FILE：要写入的结果文件（python -m gemm_course dsl "
                                    "--record --out FILE）"))
        if args.check_only and args.sizes:
            raise ValueError(_plain("--check-only times nothing: leave out --sizes",
                                    "--check-only 不计时：请去掉 --sizes"))
        sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else None
        shapes = [(s, s, s) if isinstance(s, int) else s for s in sizes] if sizes else None
        from gemm_course.dsl.record import record_dsl

        record_dsl(args.out, shapes, check_only=args.check_only)
        return
    from gemm_course.dsl.interpreter import check_tiled

    lang = _lang(args)
    rows = check_tiled()
    for r in rows:
        verdict = _in(lang, "PASS", "通过") if r["passed"] else _in(lang, "FAIL", "失败")
        print(f"{verdict} triton_tiled float32 {r['M']}×{r['N']}×{r['K']}: "
              + _in(lang, f"relative error {r['relative_error']:.2e} (bound {r['tolerance']:.2e}), "
                          f"{r['unwritten']} unwritten, {r['seconds']:.2f} s in Triton's interpreter",
                    f"相对误差 {r['relative_error']:.2e}（上限 {r['tolerance']:.2e}），{r['unwritten']} 个未写入，"
                    f"在 Triton 解释器中用时 {r['seconds']:.2f} s"))
    if not all(r["passed"] for r in rows):
        sys.exit(1)


def _summary_level(text: str) -> str:
    """A level as `summary --level` takes it: a registry level (5, 05, 05_register_blocking) or Level 13."""
    from gemm_course.levels import FP8_LEVEL_ID, is_fp8_level

    return FP8_LEVEL_ID if is_fp8_level(text) else get_level(text).id


def _summary_table(rows: list[dict]) -> list[str]:
    """Every recorded row: setting, type, size, TFLOPS, baseline and ratio, GPU and date."""
    lines = [f"{'level':<20} {'params':<44} {'dtype':<11} {'size':>16} {'TFLOPS':>8} {'baseline':<18} {'TFLOPS':>8} "
             f"{'ratio':>7}  GPU, date"]
    for r in rows:
        size = f"{r['M']}×{r['N']}×{r['K']}"
        params = ",".join(f"{k}={v}" for k, v in r["params"].items())
        lines.append(f"{r['level']:<20} {params:<44} {r['dtype']:<11} {size:>16} {r['tflops']:8.2f} {r['baseline']:<18} "
                     f"{r['baseline_tflops']:8.2f} {r['ratio_to_baseline']:7.1%}  {r['gpu']}, {r['date']}")
    return lines


def _summary_short(rows: list[dict]) -> list[str]:
    """One line per level: its fastest recorded run, the ratio to the baseline timed in the same run, the clock."""
    best: dict[str, dict] = {}
    for r in rows:
        if r["level"] not in best or r["tflops"] > best[r["level"]]["tflops"]:
            best[r["level"]] = r
    lines = [f"{'level':<20} {'best TFLOPS':>11}  {'dtype':<11} {'size':>16}  {'ratio to baseline':<28} {'SM clock':<15} "
             "GPU, date"]
    for r in best.values():
        size = f"{r['M']}×{r['N']}×{r['K']}"
        ratio = f"{r['ratio_to_baseline']:.1%} of {r['baseline']}"
        clock = (f"{r['sm_clock_mhz']:.0f} MHz ({r['clock_source']})" if r["sm_clock_mhz"] is not None
                 else "not recorded")
        lines.append(f"{r['level']:<20} {r['tflops']:11.2f}  {r['dtype']:<11} {size:>16}  {ratio:<28} {clock:<15} "
                     f"{r['gpu']}, {r['date']}")
    lines.append("every recorded run: summary --all; one level's: summary --level N; as JSON: summary --json")
    return lines


def cmd_summary(args: argparse.Namespace) -> None:
    from gemm_course.measure.results import summary

    level = _summary_level(args.level) if args.level else None
    rows = summary(level, baseline=args.baseline)
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return
    print("\n".join(_summary_table(rows) if args.all or level else _summary_short(rows)))


def cmd_report(args: argparse.Namespace) -> None:
    from gemm_course.run.compile import compile_report

    from gemm_course.levels import is_fp8_level

    if is_fp8_level(_split_config(args.config)[0]):
        from gemm_course.fp8.gemm import ARCH, fp8_compile_report  # Level 13 lives outside the registry (see `fp8`)

        params = _split_config(args.config)[1]
        if set(params) - {"scaling", "stages", "block_n", "block_m", "overlap", "staged_scales"}:
            raise ValueError(f"Level 13 takes scaling, stages, block_n, block_m, overlap and staged_scales, not "
                             f"{', '.join(params)}; its recorded runs: python -m gemm_course fp8 · 第 13 级的参数是 "
                             f"scaling、stages、block_n、block_m、overlap 和 staged_scales，不是 {'、'.join(params)}；"
                             "它的实测记录：python -m gemm_course fp8")
        print(fp8_compile_report(arch=args.arch or ARCH, **params))
        return
    level, params = parse_config(args.config)
    print(compile_report(level, arch=args.arch, **params))


def cmd_batched(args: argparse.Namespace) -> None:
    from pathlib import Path

    from gemm_course.measure.bench import METHOD, SETTLE_S, _write_json, bench_batched, provenance

    method = METHOD.format(min_reps=5, max_reps=50, budget_s=2.0, tf32=0, settle_s=SETTLE_S).replace(
        "cuBLAS (cupy.matmul", "cuBLAS strided-batched (cupy.matmul on 3-D arrays", 1)
    rows = bench_batched()
    if args.out:
        _write_json(Path(args.out), {"schema": 1, "provenance": provenance(method), "records": [], "batched": rows})
        print(f"wrote {len(rows)} batched cases to {args.out}")


def cmd_peak(args: argparse.Namespace) -> None:
    from pathlib import Path

    from gemm_course.measure.bench import _write_json, provenance
    from gemm_course.measure.peak import METHOD, PROBES, launch_overhead, measure_peaks, pipeline_parts

    overhead = launch_overhead()
    rows = measure_peaks(args.probes.split(",") if args.probes else tuple(PROBES))
    parts = pipeline_parts()
    if args.out:
        _write_json(Path(args.out), {"schema": 1, "provenance": provenance(METHOD), "records": [],
                                     "launch_overhead": overhead, "peaks": rows, "level_10_parts": parts})
        print(f"wrote {len(rows)} probe measurements and {len(parts)} Level 10 decompositions to {args.out}")


EXPERIMENT_SIZES = (4096, 8192)


def cmd_experiments(args: argparse.Namespace) -> None:
    """Settings that separate causes the showcase changes together, each timed beside the showcase
    setting it is compared with, cuBLAS in the same run; and Level 6 against a one-kernel epilogue."""
    from pathlib import Path

    from gemm_course.measure.bench import _write_json, bench, bench_fusion

    result = None
    for lv in _selected(args.levels):
        if lv.experiments:
            configs = [(lv.id, dict(s)) for s in (*lv.showcase, *lv.experiments)]
            result = bench(configs, EXPERIMENT_SIZES, out=args.out, result=result)
            if result.get("interrupted"):
                break
    if result is not None and not result.get("interrupted"):
        if any(lv.epilogue for lv in _selected(args.levels)):
            result["fusion_one_kernel"] = bench_fusion([(n, n, n) for n in EXPERIMENT_SIZES], one_kernel=True)
        _write_json(Path(args.out), result)
        print(f"wrote {len(result['records'])} records to {args.out}")


def cmd_counters(args: argparse.Namespace) -> None:
    from gemm_course.measure import counters, results

    if args.record:
        if not args.out:
            raise SystemExit("counters --record needs --out FILE.json")
        try:
            counters.record(args.out, args.levels or None, size=args.size, missing_only=args.missing_only)
        except RuntimeError as err:
            raise SystemExit(str(err))
        return
    rows = counters.table_rows(get_level(args.level).id if args.level else None)
    if not rows:
        raise SystemExit("no recorded counters" + (f" for {args.level}" if args.level else "")
                         + "; record them on a GPU with: python -m gemm_course counters --record --out FILE.json")
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
                         indent=1, ensure_ascii=False))
        return
    print(counters.format_table(rows))
    print()
    for p in {r["file"]: r["provenance"] for r in rows}.values():  # one line per file the rows come from
        print(f"recorded on {p['gpu']}, {p['date'][:10]}, {p['ncu']}; `{results.command_line(p)}`")


def _lang(args: Optional[argparse.Namespace] = None) -> str:
    """The language of what the command prints: "en", "zh" or "both", the one order of every output
    (gemm_course.bilingual.language): --en / --zh, else gc.language's choice, GEMM_COURSE_LANG, a Chinese
    locale, else English. main() applies the command line's flags and default around every command."""
    from gemm_course.bilingual.language import current_language

    return current_language()


def _in(lang: str, en: str, zh: str) -> str:
    """en or zh for lang; both ("English · 中文", or English then Chinese for text on several lines) for "both"."""
    if lang in ("en", "zh") or en == zh:
        return zh if lang == "zh" else en
    return f"{en} · {zh}" if "\n" not in en + zh else f"{en}\n{zh}"


def _each(lang: str, lines: Any) -> list[str]:
    """lines(lang) for one language; for "both", the English lines, an empty line, then the Chinese ones."""
    return lines(lang) if lang in ("en", "zh") else [*lines("en"), "", *lines("zh")]


def _find_exercise(exercise_id: str, lang: str) -> Any:
    """The exercise of that id, or ValueError with one line in the reader's language naming the closest ids."""
    from .exercises import get_exercise, unknown_exercise

    try:
        return get_exercise(exercise_id)
    except ValueError:
        raise ValueError(unknown_exercise(exercise_id, lang)) from None


SEED_LIMIT = 2**32  # what NumPy's default_rng takes, and more seeds than anyone will try


def _seed(text: Optional[str], lang: str) -> Optional[int]:
    """--seed as an int in [0, SEED_LIMIT), None when not given; ValueError with one line otherwise."""
    if text is None:
        return None
    try:
        seed = int(text)
    except ValueError:
        seed = None
    if seed is None or not 0 <= seed < SEED_LIMIT:
        raise ValueError(_in(lang, f"--seed {text}: a seed is a whole number from 0 to {SEED_LIMIT - 1}; give one in "
                                   "that range (a verdict prints the seed it used), or leave --seed out for a fresh one",
                             f"--seed {text}：随机种子是 0 到 {SEED_LIMIT - 1} 之间的整数；请给出这个范围内的数"
                             "（评分结果会打印它所用的种子），或者不加 --seed，使用新的随机种子"))
    return seed


def _reveal(exercise: Any, lang: str) -> None:
    """exercises reveal ID: give a prediction exercise up, show its measured values with their reasons."""
    from .exercises import predict, progress

    if not predict.is_prediction(exercise):
        raise ValueError(_in(lang, f"{exercise.id} has no measured predictions to reveal: reveal is for the exercises "
                                   "whose answer is numbers the grader measures; `python -m gemm_course grade "
                                   f"{exercise.id} --solution --print` shows this one's reference answer",
                             f"{exercise.id} 没有可以揭晓的实测预测值：reveal 只用于答案是评分器实测数值的练习；"
                             f"`python -m gemm_course grade {exercise.id} --solution --print` 显示本练习的参考答案"))
    lines = _each(lang, lambda one: predict.reveal_lines(exercise, one))
    warning = progress.record_reveal(exercise.id)
    print(_in(lang, f"{exercise.id}: given up; the measured values and why (a right answer from now on is shown as "
                    "right but does not count as solved):",
              f"{exercise.id}：已放弃；以下是实测值及其原因（此后答对会显示为正确，但不计为已完成）："))
    print("\n".join(f"  {line}" if line else "" for line in lines))
    if warning:
        print(one_language(warning), file=sys.stderr)


def cmd_exercises(args: argparse.Namespace) -> None:
    from .exercises import exercises, progress

    lang = _lang(args)
    if args.action in ("show", "hint", "reveal"):
        if not args.exercise:
            example = "01_predict_sectors" if args.action == "reveal" else "02_missing_barrier"
            example += " 1" if args.action == "hint" else ""
            raise ValueError(_in(lang, f"say which exercise, e.g. `exercises {args.action} {example}`",
                                 f"请指明是哪个练习，例如 `exercises {args.action} {example}`"))
        ex = _find_exercise(args.exercise, lang)
        if args.action == "reveal":
            _reveal(ex, lang)
            return
        if args.action == "show":
            mine = "my_kernel.cu" if ex.answer_suffix == ".cu" else "my_answer.txt"

            def shown(one: str) -> list[str]:
                if one == "en":
                    return [f"Exercise {ex.id} (Level {ex.number}, {ex.kind}): {ex.title_en}", "", ex.statement_en, "",
                            f"Start: python -m gemm_course grade {ex.id} --starter --print > {mine}; then edit {mine} "
                            f"and run python -m gemm_course grade {ex.id} {mine}; hints: exercises hint {ex.id} 1 … "
                            f"{len(ex.hints)}"]
                return [f"练习 {ex.id}（第 {ex.number} 级）：{ex.title_zh}", "", ex.statement_zh, "",
                        f"开始：python -m gemm_course grade {ex.id} --starter --print > {mine}；修改 {mine} 后运行 "
                        f"python -m gemm_course grade {ex.id} {mine}；提示：exercises hint {ex.id} 1 … {len(ex.hints)}"]

            print("\n".join(_each(lang, shown)))
            return
        if args.n is None or not (str(args.n).isascii() and str(args.n).isdigit()) or not 1 <= int(args.n) <= len(ex.hints):
            raise ValueError(_in(lang, f"{ex.id} has hints 1 to {len(ex.hints)}: `exercises hint {ex.id} 1` shows the first",
                                 f"{ex.id} 的提示编号是 1 到 {len(ex.hints)}：`exercises hint {ex.id} 1` 显示第一条"))
        en, zh = ex.hints[int(args.n) - 1]
        print(_in(lang, f"Hint {args.n} of {len(ex.hints)}: {en}", f"提示 {args.n}/{len(ex.hints)}：{zh}"))
        return
    if args.action not in (None, "list"):
        import difflib

        close = difflib.get_close_matches(args.action, ["list", "show", "hint", "reveal"], n=1)
        guess = _in(lang, f" (did you mean {close[0]}?)", f"（是不是 {close[0]}？）") if close else ""
        raise ValueError(_in(lang, f"unknown action {args.action!r}{guess}: use list, show ID, hint ID N or reveal ID",
                             f"未知的操作 {args.action!r}{guess}：请用 list、show 练习、hint 练习 N 或 reveal 练习"))
    if args.status:
        done, warning = progress.read()
        if warning:
            print(one_language(warning), file=sys.stderr)
        rows = progress.status_rows(args.level, done)
        if args.json:
            print(json.dumps(rows, indent=1, ensure_ascii=False))
            return
        for r in rows:
            label = _in(lang, *progress.LABELS[r["best"]])
            tries = _in(lang, f"{r['attempts']} attempt{'s' if r['attempts'] != 1 else ''}", f"尝试 {r['attempts']} 次")
            note = _in(lang, r["note_en"], r["note_zh"])
            print(f"{r['id']:<28} {label:<40} {tries if r['attempts'] else ''}" + (f"  ({note})" if note else ""))
        print("\n" + _in(lang, progress.summary_line(rows, "en"), progress.summary_line(rows, "zh"))
              + f"  ({progress.progress_path()})")
        return
    rows = [e.as_row() for e in exercises(args.level)]
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return
    for r in rows:
        print(f"{r['id']:<28} {r['level']:<22} {r['kind']:<7} {_in(lang, r['title_en'], r['title_zh'])}")


def _read_answer(path_text: str) -> str:
    """A learner's file as text, or one line saying why it cannot be read (ValueError)."""
    from pathlib import Path

    path = Path(path_text)
    if not path.is_file():
        raise ValueError(f"{path_text}: no such file / 没有这个文件")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path_text} is not UTF-8 text (byte {data[err.start]:#04x} at offset {err.start}): save it "
                         f"as UTF-8 / {path_text} 不是 UTF-8 文本（偏移 {err.start} 处的字节 {data[err.start]:#04x}）："
                         "请以 UTF-8 编码保存") from None


class UsageError(ValueError):
    """A command line a command refuses before any work (an unknown id, a wrong seed, a missing file): main's
    one error line, with exit status 2 as argparse gives."""


def cmd_grade(args: argparse.Namespace) -> None:
    from .exercises import grade, progress

    lang = _lang(args)
    try:
        exercise = _find_exercise(args.exercise, lang)
        seed = _seed(args.seed, lang)
        if sum([bool(args.file), args.solution, args.starter]) != 1:
            raise ValueError(_in(lang, "give exactly one of FILE, --solution, --starter",
                                 "请在 FILE、--solution 和 --starter 中只给出一个"))
        source = (_read_answer(args.file) if args.file else
                  exercise.solution if args.solution else exercise.starter)
    except ValueError as err:
        raise UsageError(*err.args) from None
    if args.print:
        print(source, end="")
        return
    from pathlib import Path

    verdict = grade(exercise.id, source, file_name=Path(args.file).name if args.file else None, seed=seed)
    print(verdict.text(lang))
    if args.file:  # your own answer counts towards your progress; the shipped ones do not
        warning = progress.record(verdict)
        if warning:
            print(one_language(warning), file=sys.stderr)
    sys.exit(verdict.exit_code)


def _int_list(text: str, what_en: str, what_zh: str, example: str) -> list[int]:
    """'1,2' → [1, 2]; anything else a bilingual one-line error."""
    items = [t.strip() for t in text.split(",")]
    if not all(t.isascii() and t.isdigit() and int(t) > 0 for t in items):
        raise ValueError(f"bad {what_en} {text!r}: write positive integers separated by commas, e.g. {example} · "
                         f"{what_zh} {text!r} 有误：请写用逗号分隔的正整数，例如 {example}")
    return [int(t) for t in items]


def parse_layer_shape(text: str) -> tuple[int, int, int]:
    """'8192x8192x32768' → (M tokens, hidden H, feed-forward F)."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"bad layer shape {text!r}: write MxHxF (tokens × hidden × feed-forward), e.g. 8192x8192x32768 · "
                         f"层形状 {text!r} 有误：请写 MxHxF（词元数 × 隐藏维度 × 前馈维度），例如 8192x8192x32768")
    return int(parts[0]), int(parts[1]), int(parts[2])


def cmd_multigpu(args: argparse.Namespace) -> None:
    from gemm_course.multigpu.schemes import bench_multigpu

    local, _, rest = args.local.partition(":")
    local_params = parse_config(args.local)[1] if local != "cublas" else {}
    if local != "cublas":
        local = get_level(local).id
    elif rest:
        raise ValueError("cuBLAS takes no parameters · cuBLAS 没有参数")
    forms = {"all-reduce": "all-reduce", "ar": "all-reduce", "reduce-scatter": "reduce-scatter/all-gather",
             "rs": "reduce-scatter/all-gather", "reduce-scatter/all-gather": "reduce-scatter/all-gather"}
    chosen_forms = [f.strip() for f in args.forms.split(",")]
    bad = [f for f in chosen_forms if f not in forms]
    if bad:
        raise ValueError(f"unknown form {', '.join(bad)}: choose all-reduce or reduce-scatter · "
                         f"未知的形式 {', '.join(bad)}：可选 all-reduce 或 reduce-scatter")
    bench_multigpu(_int_list(args.sizes, "sizes", "尺寸", "8192,16384"),
                   _int_list(args.gpus, "GPU counts", "GPU 数", "1,2") if args.gpus else None, local, args.out,
                   local_params=local_params,
                   schemes=[s.strip() for s in args.schemes.split(",")],
                   tp_shapes=[parse_layer_shape(s) for s in args.tp_shape.split(",")],
                   chunks=_int_list(args.chunks, "chunk counts", "分块数", "1,4"),
                   dtypes=[d.strip() for d in args.dtype.split(",")],
                   forms=[forms[f] for f in chosen_forms], activation=args.activation)


def cmd_hostcost(args: argparse.Namespace) -> None:
    from gemm_course.measure.host_cost import host_cost, host_cost_plan

    if args.size < 1:
        raise ValueError(f"--size must be a positive whole number, not {args.size} (e.g. --size 4096) / "
                         f"--size 必须是正整数，而不是 {args.size}（例如 --size 4096）")
    plan = host_cost_plan(args.levels, args.all_showcase, args.size)  # a wrong level is named before any GPU work
    result = host_cost(plan, args.size, out=args.out)
    print(f"wrote {len(result['records'])} settings to {args.out}")


def cmd_levels(args: argparse.Namespace) -> None:
    from gemm_course.bilingual.language import current_language

    lang = current_language()  # GEMM_COURSE_LANG=en|zh: one language
    for lv in levels():
        params = ", ".join(f"{p.name}={p.default}" for p in lv.params)
        title = {"en": lv.title_en, "zh": lv.title_zh}.get(lang, f"{lv.title_en} · {lv.title_zh}")
        print(f"{lv.id:<14} {title}  [{lv.source}; {params}; {lv.needs}]")
    # The levels after the registry's: their own commands and packages (exercises.CHAPTERS holds their titles).
    from gemm_course.exercises import CHAPTERS

    beyond = {"12_multi_gpu": ("python -m gemm_course multigpu", "gemm_course/multigpu",
                               ("2+ GPUs, NCCL", "2 块及以上 GPU，NCCL")),
              "13_fp8_blockscaled": ("python -m gemm_course fp8", "13_fp8_blockscaled.cu", ("sm_90a", "sm_90a")),
              "14_triton_gluon": ("python -m gemm_course dsl", "gemm_course/dsl",
                                  ("the triton extra; the TMA and Gluon kernels sm_90",
                                   "triton 扩展；TMA 内核与 Gluon 内核需要 sm_90"))}
    for cid, (command, source, (needs_en, needs_zh)) in beyond.items():
        _, en, zh = CHAPTERS[cid]
        title = {"en": en, "zh": zh}.get(lang, f"{en} · {zh}")
        needs = {"en": needs_en, "zh": needs_zh}.get(lang, f"{needs_en} · {needs_zh}")
        print(f"{cid:<14} {title}  [{source}; {command}; {needs}]")


def _refuse_shipped_out(out: Optional[str]) -> None:
    """--out inside the course's recorded results would replace (or sit among) the shipped measurements."""
    from pathlib import Path

    from gemm_course.measure.results import RESULTS_DIR

    if out and RESULTS_DIR.resolve() in Path(out).resolve().parents:
        raise ValueError(f"--out {out} is inside the course's recorded results ({RESULTS_DIR}): your run would replace "
                         "the shipped measurements; write your own file, e.g. --out mine.json · "
                         f"--out {out} 位于课程附带的实测结果目录中，会覆盖随包附带的测量数据：请写到你自己的文件，例如 --out mine.json")


def _refuse_repeated(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """An option that takes a value given twice (`--sizes 1024 --sizes 4096`): argparse keeps the last and drops
    the first without a word. Refused in one line; --config, which collects, may repeat."""
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0 or isinstance(action, argparse._AppendAction):
            continue
        given = [a.split("=", 1)[0] for a in argv if a.split("=", 1)[0] in action.option_strings]
        if len(given) > 1:
            name = action.option_strings[-1]
            raise ValueError(_plain(f"{name} is given {len(given)} times: give it once (the last would silently "
                                    "replace the others)" + (", with every value after it" if action.nargs == "*"
                                                             else ""),
                                    f"{name} 出现了 {len(given)} 次：只写一次（否则只有最后一次生效，前面的会被悄悄丢掉）"
                                    + ("，把所有的值都写在它后面" if action.nargs == "*" else "")))


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gemm_course", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("bench", help="time levels against cuBLAS")
    p.add_argument("--config", action="append", default=[], help="LEVEL[:name=value,...] (repeatable)")
    p.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="e.g. 1024,4096x4096x1024")
    p.add_argument("--out", help="result file (JSON)")
    p.add_argument("--dtype", default=None, help="input type, e.g. bfloat16 (default: the first level's first)")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("record", help="measure the course's recorded set")
    p.add_argument("--levels", nargs="*", help="level ids (default: all)")
    p.add_argument("--out", required=True)
    p.add_argument("--showcase-only", action="store_true",
                   help="the showcase settings only (no sweep, no fusion table, no disassembly)")
    p.add_argument("--sweep-only", action="store_true",
                   help="the autotuner's search space only, at each level's sweep shapes (no showcase, no disassembly)")
    p.add_argument("--sizes", help="square sizes or MxNxK, e.g. 4096,8192 (default: the recorded set of sizes)")
    p.add_argument("--dtype", help="input type, e.g. bfloat16 (default: each level's first)")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("check", help="correctness on odd shapes")
    p.add_argument("--levels", nargs="*")
    p.add_argument("--all-settings", action="store_true",
                   help="every valid parameter setting (without a GPU: the showcase and "
                        f"{CPU_EXTRA_SETTINGS} more per level)")
    p.add_argument("--max-settings", type=int, default=None,
                   help="with --all-settings: at most this many settings beyond the showcase per level (0: all)")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("summary", help="the recorded ladder")
    p.add_argument("--level", help="every recorded run of one level, e.g. 5 or 05_register_blocking, or 13")
    p.add_argument("--all", action="store_true", help="every recorded run of every level (default: one line per level)")
    p.add_argument("--json", action="store_true", help="the rows as JSON (every run, or --level's)")
    p.add_argument("--baseline", help="only the rows against this baseline (e.g. deepgemm: Level 13 against DeepGEMM "
                                      "timed in the same run, from `fp8 --record --peer deepgemm`)")
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("report", help="compile report (no GPU needed)")
    p.add_argument("config", help="LEVEL[:name=value,...]")
    p.add_argument("--arch", default=None, help="e.g. sm_75, sm_90 (default: this GPU, else sm_90)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("sass", help="disassembly / instruction mix (needs cuobjdump or nvdisasm)")
    p.add_argument("config", help="LEVEL[:name=value,...]")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--full", action="store_true", help="print the whole SASS listing")
    p.set_defaults(func=cmd_sass)

    p = sub.add_parser("batched", help="batched GEMM against one launch per product and cuBLAS batched")
    p.add_argument("--out")
    p.set_defaults(func=cmd_batched)

    p = sub.add_parser("multigpu", help="Level 12: one GEMM, and a tensor-parallel MLP block, over several GPUs with NCCL")
    p.add_argument("--sizes", default="8192,16384", help="n for the n³ row split and SUMMA, e.g. 8192,16384")
    p.add_argument("--gpus", default=None, help="GPU counts, e.g. 1,2 (default: 1, 2, 4, 8 up to what is visible)")
    p.add_argument("--local", default="cublas",
                   help="local GEMM of the row split: cublas or LEVEL[:name=value,...], e.g. 08_warp_tiling")
    p.add_argument("--schemes", default="row,summa,tp",
                   help="any of row (row split), summa (SUMMA), tp (tensor-parallel MLP block); default all")
    p.add_argument("--tp-shape", default="8192x8192x32768",
                   help="tensor-parallel block(s) MxHxF: tokens × hidden × feed-forward, comma-separated")
    p.add_argument("--chunks", default="1,4", help="token chunks for the overlap, e.g. 1,4 (1: no overlap possible)")
    p.add_argument("--dtype", default="float16", help="tensor-parallel input type(s): float16, float32")
    p.add_argument("--forms", default="all-reduce,reduce-scatter",
                   help="tensor-parallel form(s): all-reduce, reduce-scatter (then all-gather)")
    p.add_argument("--activation", default="none", help="between the two GEMMs: none or relu")
    p.add_argument("--out")
    p.set_defaults(func=cmd_multigpu)

    p = sub.add_parser("peak", help="measured instruction ceilings (FFMA, mma.sync, Level 10's warp tile)")
    p.add_argument("--probes", default=None, help="comma-separated probe names (default: all)")
    p.add_argument("--out")
    p.set_defaults(func=cmd_peak)

    p = sub.add_parser("experiments", help="settings that separate two causes, timed beside the showcase (GPU)")
    p.add_argument("--out", required=True)
    p.add_argument("--levels", nargs="*", help="level ids (default: every level with experiments)")
    p.set_defaults(func=cmd_experiments)

    p = sub.add_parser("counters", help="hardware counters (Nsight Compute): the recorded table, or --record (GPU)")
    p.add_argument("--level", help="one level (with cuBLAS), e.g. 03 or 03_coalescing_banks")
    p.add_argument("--json", action="store_true", help="the rows as JSON")
    p.add_argument("--record", action="store_true", help="profile every showcase setting with ncu (GPU)")
    p.add_argument("--out", help="with --record: the counters file to write")
    p.add_argument("--levels", nargs="*", help="with --record: level ids (default: all)")
    p.add_argument("--size", type=int, default=4096, help="with --record: problem size n for n³ (default 4096)")
    p.add_argument("--missing-only", action="store_true",
                   help="with --record: only settings that no recorded counters file holds yet")
    p.set_defaults(func=cmd_counters)

    p = sub.add_parser("fp8", help="Level 13: FP8 GEMM; the recorded results, or --record/--counters/--accuracy (H100/H200)")
    p.add_argument("--record", action="store_true", help="check and time every FP8 step against cuBLASLt")
    p.add_argument("--counters", action="store_true", help="Nsight Compute counters of every step")
    p.add_argument("--accuracy", action="store_true", help="error against K with and without promotion; outliers")
    p.add_argument("--sizes", help="with --record: n or MxNxK, comma-separated (default: squares + projections)")
    p.add_argument("--small-m", action="store_true",
                   help="with --record or --counters: the decode shapes (M = 64, 128) and the steps made for them")
    p.add_argument("--sweep-only", action="store_true",
                   help="with --record: the autotuner's search space at its shapes (4096³ and the decode shapes)")
    p.add_argument("--staged", action="store_true",
                   help="with --record: the blockwise kernels with and without staged scales (squares and decode "
                        "shapes); with --counters: the same at 4096³ and the 64-row kernel at 64×7168×16384, beside cuBLASLt, "
                        "in Nsight Compute")
    p.add_argument("--splits", help="with --record and --staged or --small-m: time each blockwise step at these "
                                    "split counts (comma-separated, e.g. 1,2,3) instead of the split-K model's choice")
    p.add_argument("--tma-scales", action="store_true",
                   help="with --record: check every way to the scales on odd shapes and the split-K counters after a "
                        "launch cut short, then time A's scales by TMA beside the best recorded setting, cuBLASLt "
                        "(and --peer) at the record's shapes (fp8.tma_scales)")
    p.add_argument("--narrow-tiles", action="store_true",
                   help="with --record: check the 64-row kernel's narrow tiles (block_n 64, 32, 16) on odd shapes, "
                        "then time them beside the best recorded setting, cuBLASLt (and --peer) at the decode shapes "
                        "(fp8.narrow_tiles)")
    p.add_argument("--peer", choices=("deepgemm",),
                   help="with --record: time this library (deepgemm: DeepGEMM, installed from its own repository), "
                        "block-scaled cuBLASLt and Level 13's best recorded setting, interleaved shape by shape")
    p.add_argument("--out", help="the result file to write")
    p.set_defaults(func=cmd_fp8)

    p = sub.add_parser("dsl", help="Level 14: the GEMM in Triton and Gluon; --record checks and times them on a GPU "
                                   "(needs triton); without it, the tiled kernel in Triton's interpreter on the CPU")
    p.add_argument("--record", action="store_true",
                   help="check every Triton and Gluon kernel on odd shapes, then time them beside cuBLAS and Levels 8, "
                        "10, 11 (gemm_course.dsl.record; a few minutes on an H100)")
    p.add_argument("--counters", action="store_true",
                   help="read hardware counters (ncu) of one setting of each DSL kernel beside Levels 10 and 11 and "
                        "cuBLAS at 8192³ in bf16 (gemm_course.dsl.counters; a GPU and Nsight Compute)")
    p.add_argument("--check-only", action="store_true", help="with --record: the checks only, nothing timed")
    p.add_argument("--sizes", help="with --record: n or MxNxK, comma-separated (default: 4096, 8192 and two "
                                   "projection shapes)")
    p.add_argument("--out", help="with --record or --counters: the result file to write (JSON)")
    p.set_defaults(func=cmd_dsl)

    p = sub.add_parser("exercises", help="the exercises: list, show ID, hint ID N, reveal ID, --status (no GPU needed)")
    p.add_argument("action", nargs="?", help="list (default), show ID (the statement), hint ID N, or reveal ID (give a "
                                             "prediction exercise up and see the measured values)")
    p.add_argument("exercise", nargs="?", help="with show, hint or reveal: the exercise id, e.g. 02_missing_barrier")
    p.add_argument("n", nargs="?", help="with hint: which hint, 1, 2, ...")
    p.add_argument("--level", help="one level, e.g. 2 or 02_smem_tiling")
    p.add_argument("--status", action="store_true", help="your progress: solved, not solved, not verified")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_exercises)

    p = sub.add_parser("grade", help="grade your answer for an exercise (exit 0 solved, 1 failed, 3 compiled but "
                                     "not verified without a GPU, 2 usage)")
    p.add_argument("exercise", help="exercise id, e.g. 02_missing_barrier")
    p.add_argument("file", nargs="?", help="your kernel file (.cu) or answer (.txt)")
    p.add_argument("--solution", action="store_true", help="grade the reference solution")
    p.add_argument("--starter", action="store_true", help="grade the starter")
    p.add_argument("--print", action="store_true", help="print the starter (or solution, or file) instead of grading it")
    p.add_argument("--seed", help=f"the seed of the random shape and inputs, 0 to {SEED_LIMIT - 1} (a verdict prints "
                                  "its seed; a pass with a seed you chose does not count in your progress)")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("hostcost", help="what a repeated gc.gemm call costs on the host beside its kernel, "
                                        "against the prepared launch the recorded timings use (GPU)")
    p.add_argument("--out", required=True, help="the result file to write (JSON)")
    p.add_argument("--levels", nargs="*", help="level ids or numbers, 13 for FP8 (default: all)")
    p.add_argument("--size", type=int, default=4096, help="problem size n for n³ (default 4096)")
    p.add_argument("--all-showcase", action="store_true",
                   help="every showcase setting (default: each level's fastest recorded setting at n³)")
    p.set_defaults(func=cmd_hostcost)

    p = sub.add_parser("levels", help="list the levels")
    p.set_defaults(func=cmd_levels)

    from gemm_course import support
    p = sub.add_parser("support", help="which levels run live on which GPU architecture, and why (no GPU needed)")
    support.add_arguments(p)
    p.set_defaults(func=support.run)

    for each in (parser, *sub.choices.values()):  # before the command or after it: python -m gemm_course --zh levels
        _language_flags(each)
    args = parser.parse_args(argv)
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # from here Ctrl-C is KeyboardInterrupt (caught below)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    with command_line(getattr(args, "lang", None)):  # --en / --zh, else the one order, else English
        fallback = _console_fallback()
        with chosen(fallback) if fallback else command_line():
            _run(args, lambda: _refuse_repeated(sub.choices[args.command],
                                                sys.argv[1:] if argv is None else list(argv)))


def _language_flags(parser: argparse.ArgumentParser) -> None:
    """--en / --zh: what the command prints, errors included, in one language. Without them: GEMM_COURSE_LANG
    (en, zh or both), else a Chinese locale (LC_ALL, LC_MESSAGES or LANG starting with zh), else English."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--zh", dest="lang", action="store_const", const="zh", default=argparse.SUPPRESS,
                       help="print in Chinese (default: GEMM_COURSE_LANG, else the locale, else English)")
    group.add_argument("--en", dest="lang", action="store_const", const="en", default=argparse.SUPPRESS,
                       help="print in English")


CONSOLE_ADVICE = ("python -m gemm_course: this console cannot show Chinese (its encoding is {encoding}): set "
                  "PYTHONIOENCODING=utf-8 or use --en; English follows")


def _console_fallback() -> Optional[str]:
    """"en" when the output would hold Chinese that stdout cannot encode (LANG=C, PYTHONIOENCODING=ascii): one
    ASCII line of advice on stderr first; None otherwise. On such a console the symbols English lines use too
    (×, ✓, –) come out as ? instead of a traceback."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"

    def shows(text: str) -> bool:
        try:
            text.encode(encoding)
        except (UnicodeError, LookupError):
            return False
        return True

    if not shows("×✓✗–·—…³"):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(errors="replace")
            except (AttributeError, ValueError, OSError):  # not a text stream Python opened
                pass
    if _lang() == "en" or shows("中文：（）"):
        return None
    print(CONSOLE_ADVICE.format(encoding=encoding), file=sys.stderr)
    return "en"


def _run(args: argparse.Namespace, refuse_repeated: Any = lambda: None) -> None:
    """The command, and the command line's one error path: a wrong input or a missing tool is one line in the
    language in force (exit status 1; 2 for a UsageError), never a traceback."""
    try:
        refuse_repeated()
        _refuse_shipped_out(getattr(args, "out", None))
        args.func(args)
    except (ValueError, KeyError, RuntimeError) as err:  # a wrong input or a missing tool: one line, no traceback
        localize_error(err)
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        line = f"python -m gemm_course {args.command}: {message}"
        if isinstance(err, UsageError):
            print(line, file=sys.stderr)
            raise SystemExit(2) from None
        raise SystemExit(line)
    except SystemExit as done:  # a command's own message ("English / 中文") in the language in force
        if isinstance(done.code, str):
            done.code = one_language(done.code)
        raise
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback
        raise SystemExit(f"python -m gemm_course {args.command}: "
                         + one_language("interrupted (Ctrl-C) / 已中断（Ctrl-C）")) from None
    except BrokenPipeError:  # the reader went away (`summary | head`): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0)


if __name__ == "__main__":
    main()
