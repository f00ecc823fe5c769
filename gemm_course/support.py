"""What each architecture can run, level by level: live, a fallback, or the recorded run, and why.

    from gemm_course import support
    support.support(10, "sm_75")      # Support(status="recorded", en="mma.sync with bf16 ... need sm_80", zh=...)
    support.setting_refusal(10, gc.get_level(10).resolve(copy="tma"), "sm_89")  # ("TMA needs sm_90", ...) or None
    python -m gemm_course.support [--arch sm_120] [--level 11]   # the matrix, in the reader's language

One source for the notebooks' live-or-recorded decisions (display.runs), the refusals of Levels 11 and 13, the
command line and the table of the how-to-run page. The limits themselves (registers, shared memory, warps and
blocks per SM) live in models.ARCHS.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from gemm_course.levels import FP8_LEVEL_ID, Level, get_level, is_fp8_level, levels
from gemm_course.models import arch_limits

# The architectures of the matrix: what learners have (Colab's T4, L4 and A100; RTX 30, 40 and 50 cards;
# Blackwell workstations) and the data-centre cards the course was measured on or is asked about.
MATRIX_ARCHS: tuple[str, ...] = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120", "sm_121")

# A few GPUs of each architecture, as a reader recognises them.
EXAMPLE_GPUS: dict[str, str] = {
    "sm_75": "T4, RTX 20", "sm_80": "A100", "sm_86": "RTX 30, A10", "sm_89": "L4, RTX 40",
    "sm_90": "H100, H200", "sm_100": "B200, GB200", "sm_103": "B300", "sm_120": "RTX 50, RTX PRO 6000",
    "sm_121": "DGX Spark",
}

MULTI_GPU_LEVEL_ID = "12_multi_gpu"  # Level 12 runs outside the registry (gemm_course.multigpu)
DSL_LEVEL_ID = "14_triton_gluon"     # Level 14 runs outside the registry (gemm_course.dsl), with the triton extra
_DSL_LEVEL_NAMES = ("14", DSL_LEVEL_ID, "dsl", "triton", "triton_gluon")
HOPPER_CC = 90                        # Levels 11 and 13: wgmma and setmaxnreg exist on sm_90a only

STATUSES = {  # status: (English, Chinese)
    "live": ("live", "实时运行"),
    "fallback": ("live, some settings recorded", "实时运行，部分配置用实测记录"),
    "recorded": ("recorded run", "展示实测记录"),
}


@dataclass(frozen=True)
class Support:
    """Whether a level runs on an architecture: "live" (every setting the page runs), "fallback" (the settings
    this architecture can run, live; the others shown from the recorded run) or "recorded" (the recorded run
    only), with why in both languages."""

    level: str
    number: int
    arch: str
    status: str
    en: str
    zh: str

    @property
    def label_en(self) -> str:
        return STATUSES[self.status][0]

    @property
    def label_zh(self) -> str:
        return STATUSES[self.status][1]

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "number": self.number, "arch": self.arch, "status": self.status,
                "en": self.en, "zh": self.zh}


def cc_of(arch: str) -> int:
    """75 from "sm_75", 90 from "sm_90a", 120 from "sm_120"."""
    return int(str(arch).lower().removeprefix("sm_").rstrip("af"))


def _family(arch: str) -> str:
    return f"sm_{cc_of(arch)}"


# --- why one instruction is missing ----------------------------------------------------------------------

def wgmma_missing(arch: str, what_en: str = "wgmma and setmaxnreg", what_zh: str = "wgmma 和 setmaxnreg") -> tuple[str, str]:
    """Why an architecture cannot run an sm_90a kernel, in its own terms (one clause, both languages)."""
    cc = cc_of(arch)
    if cc >= 120:
        return (f"{arch} has no wgmma: its Tensor Cores take mma.sync (and it has TMA), and {what_en} exist in the "
                "sm_90a target only",
                f"{arch} 没有 wgmma：它的张量核心用 mma.sync（也有 TMA），而 {what_zh} 只存在于 sm_90a 目标中")
    if cc >= 100:
        return (f"{arch} has no wgmma: data-centre Blackwell replaced it with tcgen05 (UMMA, accumulators in tensor "
                f"memory), and {what_en} exist in the sm_90a target only",
                f"{arch} 没有 wgmma：数据中心 Blackwell 用 tcgen05（UMMA，累加器放在张量内存中）取代了它，而 "
                f"{what_zh} 只存在于 sm_90a 目标中")
    return (f"{what_en} exist in the sm_90a target only (Hopper: H100, H200, GH200), and {arch} is older",
            f"{what_zh} 只存在于 sm_90a 目标中（Hopper：H100、H200、GH200），而 {arch} 更早")


def hopper_refusal(level: str, arch: str) -> tuple[str, str]:
    """The one-line refusal of Level 11 or 13 on another architecture: why, and what to do instead."""
    fp8 = is_fp8_level(level)
    number, what_en, what_zh = (13, "FP8 wgmma and setmaxnreg", "FP8 wgmma 和 setmaxnreg") if fp8 else \
        (11, "wgmma and setmaxnreg", "wgmma 和 setmaxnreg")
    en, zh = wgmma_missing(arch, what_en, what_zh)
    report = "fp8_compile_report()" if fp8 else "compile_report(11, arch='sm_90a')"
    return (f"Level {number} runs on sm_90 (H100, H200, GH200) only: {en}. Its page shows the recorded H200 run; "
            f"{report} works on any machine",
            f"第 {number} 级只能在 sm_90（H100、H200、GH200）上运行：{zh}。页面展示的是 H200 上的实测记录；"
            f"{report} 在任何机器上都能用")


def hopper_refusal_text(level: str, arch: str) -> str:
    """hopper_refusal as the one line an error carries, in the package's form "English / 中文": the display
    helpers and the command line show the half of the language in force (bilingual.text.from_message)."""
    return " / ".join(hopper_refusal(level, arch))


def _setting_need(lv: Level, p: Mapping[str, Any], needed: int) -> tuple[str, str]:
    """What a setting of a registry level uses that needs compute capability `needed`, as a sentence."""
    if p.get("copy") == "tma":
        return "TMA needs sm_90", "TMA 需要 sm_90"
    if lv.id in ("08_warp_tiling", "10_mma_pipeline"):  # what these settings need more is shared memory
        kb = lv.geometry(1024, 1024, 1024, p).dynamic_shared_bytes // 1024
        return (f"{kb} KB of shared memory per block needs sm_{needed}", f"每个线程块 {kb} KB 共享内存需要 sm_{needed}")
    if p.get("copy") == "cp_async" or p.get("staging") == "pipelined":
        return "cp.async needs sm_80", "cp.async 需要 sm_80"
    return f"the setting needs sm_{needed}", f"该配置需要 sm_{needed}"


def setting_refusal(level: str | int | Level, params: Mapping[str, Any], arch: str,
                    dtype: Optional[str] = None) -> Optional[tuple[str, str]]:
    """Why one resolved setting of a registry level cannot run on an architecture (en, zh), or None if it can.

    Checks the level's own needs (its least compute capability, sm_90a for an arch-specific level), the
    setting's (cp.async, TMA), the input type's (bf16 needs sm_80) and the architecture's shared memory per
    block (the opt-in maximum of models.ARCHS: 99 KB on sm_86, sm_89 and sm_120)."""
    from gemm_course.run.dtypes import min_cc

    lv = get_level(level)
    cc = cc_of(arch)
    if lv.arch_specific and cc != lv.min_cc:
        return wgmma_missing(arch)
    if cc < lv.min_cc:
        return _level_need(lv)
    needed = lv.required_cc(params)
    if cc < needed:
        return _setting_need(lv, params, needed)
    if dtype and cc < min_cc(dtype):
        return (f"{dtype} inputs need sm_{min_cc(dtype)}", f"{dtype} 输入需要 sm_{min_cc(dtype)}")
    if lv.arch_specific:  # built for its one architecture, whose shared memory it fits (and its geometry may ask the GPU)
        return None
    lim = arch_limits(arch)
    shared = lv.geometry(1024, 1024, 1024, params).dynamic_shared_bytes
    if shared > lim.max_shared_per_block:
        return (f"{shared // 1024} KB of shared memory per block is over {arch}'s {lim.max_shared_per_block // 1024} KB",
                f"每个线程块 {shared // 1024} KB 共享内存，超过 {arch} 的上限 {lim.max_shared_per_block // 1024} KB")
    return None


def _level_need(lv: Level) -> tuple[str, str]:
    """Why a registry level needs its least architecture."""
    if lv.id == "10_mma_pipeline":
        return ("its mma.sync shape (m16n8k16, fp16 and bf16) and cp.async need sm_80",
                "它用的 mma.sync 形状（m16n8k16，fp16 与 bf16）和 cp.async 需要 sm_80")
    if lv.id == "09_wmma":
        return "WMMA needs sm_70 (Volta's Tensor Cores)", "WMMA 需要 sm_70（Volta 的张量核心）"
    return f"the level needs sm_{lv.min_cc}", f"这一级需要 sm_{lv.min_cc}"


def _registry_support(lv: Level, arch: str) -> Support:
    cc = cc_of(arch)
    if lv.arch_specific and cc != lv.min_cc or cc < lv.min_cc:
        en, zh = setting_refusal(lv, lv.resolve(), arch) or ("", "")
        return Support(lv.id, lv.number, arch, "recorded", en, zh)
    missing: dict[tuple[str, str], list[str]] = {}
    for dtype in lv.dtypes:
        for setting in lv.showcase:
            params = lv.resolve_for(arch, **setting)
            why = setting_refusal(lv, params, arch, dtype)
            if why:
                missing.setdefault(why, []).append(dtype)
    if not missing:
        if lv.arch_specific:
            return Support(lv.id, lv.number, arch, "live", "wgmma, TMA and setmaxnreg (sm_90a)",
                           "wgmma、TMA 和 setmaxnreg（sm_90a）")
        needs = {"04_double_buffering": ("plain CUDA, and cp.async (sm_80)", "普通 CUDA，以及 cp.async（sm_80）"),
                 "09_wmma": ("WMMA (sm_70), bf16 and cp.async (sm_80)", "WMMA（sm_70），bf16 和 cp.async（sm_80）"),
                 "10_mma_pipeline": ("mma.sync, ldmatrix, cp.async (sm_80), TMA (sm_90)",
                                     "mma.sync、ldmatrix、cp.async（sm_80），TMA（sm_90）")}
        en, zh = needs.get(lv.id, ("plain CUDA: any GPU from sm_50", "普通 CUDA：sm_50 起的任何 GPU"))
        return Support(lv.id, lv.number, arch, "live", en, zh)
    reasons = _merge_shared(list(missing))
    return Support(lv.id, lv.number, arch, "fallback",
                   "; ".join(en for en, _ in reasons) + " (those settings show the recorded run)",
                   "；".join(zh for _, zh in reasons) + "（这些配置展示实测记录）")


def _merge_shared(reasons: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Reasons that differ only in a setting's shared memory as one, with the range of sizes."""
    import re

    out: list[tuple[str, str]] = []
    groups: dict[tuple[str, str], list[int]] = {}
    for en, zh in reasons:
        m, z = re.match(r"(\d+) KB (of shared memory per block .*)", en), re.match(r"每个线程块 (\d+) KB (.*)", zh)
        if m and z:
            key = (m.group(2), z.group(2))
            if key not in groups:
                groups[key] = []
                out.append(key)
            groups[key].append(int(m.group(1)))
        else:
            out.append((en, zh))
    merged = []
    for en, zh in out:
        sizes = groups.get((en, zh))
        if sizes is None:
            merged.append((en, zh))
            continue
        span = f"{min(sizes)}" if len(set(sizes)) == 1 else f"{min(sizes)} to {max(sizes)}"
        span_zh = f"{min(sizes)}" if len(set(sizes)) == 1 else f"{min(sizes)}–{max(sizes)}"
        merged.append((f"{span} KB {en}", f"每个线程块 {span_zh} KB {zh}"))
    return merged


def support(level: str | int | Level, arch: str) -> Support:
    """Whether a level (1 to 14) runs live on an architecture, runs the settings it can with the others
    recorded (a fallback), or shows the recorded run, and why."""
    arch = _family(arch)
    arch_limits(arch)  # a one-line error for an architecture without a table
    if isinstance(level, (int, str)) and str(level).strip() in ("12", MULTI_GPU_LEVEL_ID, "multi_gpu"):
        return Support(MULTI_GPU_LEVEL_ID, 12, arch, "recorded",
                       "on one GPU; two or more GPUs of any architecture run it live (NCCL and cuBLAS)",
                       "只有一块 GPU 时如此；两块及以上任意架构的 GPU 实时运行它（NCCL 和 cuBLAS）")
    if isinstance(level, (int, str)) and str(level).strip() in _DSL_LEVEL_NAMES:
        return dsl_support(arch)
    if is_fp8_level(level):
        if cc_of(arch) == HOPPER_CC:
            return Support(FP8_LEVEL_ID, 13, arch, "live", "FP8 wgmma, TMA and setmaxnreg (sm_90a)",
                           "FP8 wgmma、TMA 和 setmaxnreg（sm_90a）")
        en, zh = wgmma_missing(arch, "FP8 wgmma and setmaxnreg", "FP8 wgmma 和 setmaxnreg")
        return Support(FP8_LEVEL_ID, 13, arch, "recorded", en, zh)
    return _registry_support(get_level(level), arch)


def dsl_support(arch: str) -> Support:
    """Level 14 (with the triton extra installed): the tiled Triton kernel runs from sm_75 (bf16 from sm_80);
    the Hopper Triton kernel and the Gluon kernel use wgmma and TMA as Level 11 does, so they run on sm_90 only
    and show the recorded run elsewhere."""
    arch = _family(arch)
    cc = cc_of(arch)
    if cc == HOPPER_CC:
        return Support(DSL_LEVEL_ID, 14, arch, "live", "with the triton extra: the tiled, Hopper (TMA) and Gluon "
                       "kernels (wgmma, TMA)", "装有 triton 扩展时：分块内核、Hopper（TMA）内核和 Gluon 内核"
                       "（wgmma、TMA）")
    en, zh = wgmma_missing(arch, "the Hopper Triton kernel's and the Gluon kernel's wgmma and TMA",
                           "Hopper Triton 内核和 Gluon 内核用到的 wgmma 与 TMA")
    if cc < 80:
        en, zh = f"bf16 needs sm_80, and {en}", f"bf16 需要 sm_80，而且 {zh}"
    return Support(DSL_LEVEL_ID, 14, arch, "fallback",
                   f"the tiled Triton kernel runs (with the triton extra); {en} (those show the recorded run)",
                   f"分块 Triton 内核可以运行（需装 triton 扩展）；{zh}（这些展示实测记录）")


def all_levels() -> list[str]:
    """Levels 1 to 14 by id, in teaching order."""
    ids = [lv.id for lv in levels()]
    return ids + [MULTI_GPU_LEVEL_ID, FP8_LEVEL_ID, DSL_LEVEL_ID]


def matrix(archs: Sequence[str] = MATRIX_ARCHS, level_ids: Optional[Sequence[str]] = None) -> list[Support]:
    """support() for every level and architecture, level by level."""
    return [support(lv, arch) for lv in (level_ids or all_levels()) for arch in archs]


def limits_rows(archs: Sequence[str] = MATRIX_ARCHS) -> list[list[str]]:
    """Per architecture: registers per SM and per thread, shared memory (static per block, the opt-in maximum
    per block, per SM), warps and blocks per SM, as models.ARCHS holds them."""
    rows = []
    for arch in archs:
        lim = arch_limits(arch)
        rows.append([arch, EXAMPLE_GPUS.get(arch, ""), f"{lim.registers_per_sm // 1024} K", str(lim.max_registers_per_thread),
                     f"{lim.static_shared_limit // 1024} KB", f"{lim.max_shared_per_block // 1024} KB",
                     f"{lim.max_shared_per_sm // 1024} KB", str(lim.max_warps_per_sm), str(lim.max_blocks_per_sm)])
    return rows


LIMIT_HEADS = (("architecture", "架构"), ("GPUs", "GPU"), ("registers per SM", "每 SM 寄存器"),
               ("per thread", "每线程"), ("static shared / block", "每块静态共享内存"),
               ("opt-in shared / block", "每块共享内存上限（动态申请）"), ("shared / SM", "每 SM 共享内存"),
               ("warps / SM", "每 SM 线程束"), ("blocks / SM", "每 SM 线程块"))


def table(archs: Sequence[str] = MATRIX_ARCHS, level_ids: Optional[Sequence[str]] = None):
    """The matrix as a bilingual Table (one language per mode): a row per level, a column per architecture;
    a cell is ✓ (live), ◐ (live, some settings recorded) or ○ (recorded run)."""
    from gemm_course.bilingual.text import Table, text

    marks = {"live": "✓", "fallback": "◐", "recorded": "○"}
    rows = []
    for lv in (level_ids or all_levels()):
        cells = [support(lv, arch) for arch in archs]
        rows.append([text(f"Level {cells[0].number}", f"第 {cells[0].number} 级"), cells[0].level,
                     *(marks[c.status] for c in cells)])
    caption = text("✓ runs live · ◐ runs live, some settings shown from the recorded run · ○ shows the recorded "
                   "run; `python -m gemm_course.support --level N` says why",
                   "✓ 实时运行 · ◐ 实时运行，部分配置展示实测记录 · ○ 展示实测记录；"
                   "`python -m gemm_course.support --level N` 说明原因")
    return Table([text("level", "级别"), "id", *archs], rows, caption=caption)


def limits_table(archs: Sequence[str] = MATRIX_ARCHS):
    """models.ARCHS for the matrix's architectures as a bilingual Table."""
    from gemm_course.bilingual.text import Table, text

    return Table([text(en, zh) for en, zh in LIMIT_HEADS], limits_rows(archs))


def lines(archs: Sequence[str] = MATRIX_ARCHS, level_ids: Optional[Sequence[str]] = None) -> list[str]:
    """The listing of the command line, in the language in force (bilingual.language): one line per level and
    architecture, with why."""
    from gemm_course.bilingual.text import plain

    out = []
    for s in matrix(archs, level_ids):
        out.append(f"{s.level:<20} {s.arch:<7} " + plain(f"{s.label_en}: {s.en}", f"{s.label_zh}：{s.zh}"))
    return out


def add_arguments(parser: Any) -> None:
    """The listing's options on an argparse parser: `python -m gemm_course.support` uses them, and so can a
    `support` subcommand of `python -m gemm_course` (set_defaults(func=support.run))."""
    parser.add_argument("--arch", nargs="*", help="architectures, e.g. sm_86 sm_120 (default: the matrix's)")
    parser.add_argument("--level", nargs="*", help="levels, e.g. 8 11 13 (default: 1 to 14)")
    parser.add_argument("--limits", action="store_true", help="the per-architecture limits the models use")
    parser.add_argument("--json", action="store_true")


def run(args: Any) -> None:
    """Print the listing for parsed arguments (add_arguments); a wrong architecture or level is a ValueError
    in the package's one-line "English / 中文" form."""
    import json

    archs = [_family(a if str(a).lower().startswith("sm_") else f"sm_{a}") for a in args.arch] if args.arch \
        else list(MATRIX_ARCHS)
    for a in archs:
        arch_limits(a)
    ids = [_level_id(n) for n in args.level] if args.level else None
    if args.limits:
        print(limits_table(archs).text())
    elif args.json:
        print(json.dumps([s.as_dict() for s in matrix(archs, ids)], indent=1, ensure_ascii=False))
    else:
        print("\n".join(lines(archs, ids)))


def main(argv: Optional[list[str]] = None) -> None:
    """python -m gemm_course.support [--arch ARCH ...] [--level N ...] [--limits] [--json]"""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m gemm_course.support",
                                     description="what each architecture runs, level by level, and why (no GPU needed)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run(args)
    except (ValueError, KeyError) as err:  # one line in the language in force, no traceback, as `python -m gemm_course`
        from gemm_course.bilingual.text import from_message

        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        raise SystemExit(f"python -m gemm_course.support: {from_message(str(message)).text()}")
    except BrokenPipeError:
        sys.exit(0)


def _level_id(text: str) -> str:
    if str(text).strip() in ("12", MULTI_GPU_LEVEL_ID, "multi_gpu"):
        return MULTI_GPU_LEVEL_ID
    if str(text).strip() in _DSL_LEVEL_NAMES:
        return DSL_LEVEL_ID
    if is_fp8_level(text):
        return FP8_LEVEL_ID
    return get_level(text).id


if __name__ == "__main__":
    main()
