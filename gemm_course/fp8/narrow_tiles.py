"""Level 13's narrow tiles for decode shapes (block_m=64 with block_n 64, 32 or 16), checked and measured in one run:

    python -m gemm_course fp8 --record --narrow-tiles [--peer deepgemm] --out FILE

At a decode shape (M = 64 or 128 tokens) C has few 128-wide tiles: 64×2112 has 17 of them for 132 SMs. The 64-row
kernel then cuts each tile's k-blocks into split-K ranges, which costs a workspace round trip and a fixup. A
narrower tile fills the SMs instead (BN = 16 makes 132 tiles of 64×2112) and needs no split, but reads A again for
every BN columns and gives each wgmma less work (m64n8k32 for BN = 16). Which wins is measured here, on one GPU, in
one process:

1. checks every narrow width, every way to the scales and split-K (forced and chosen by the model) against
   fp8.reference_gemm_fp8 (float64) at tma_scales.CHECK_SHAPES (odd M, N, K), every ring depth of the narrowest
   width, and the split-K counters after a launch cut short: random inputs (never zero), C poisoned and guarded on
   both sides (fp8.tma_scales.check_shape);
2. times, at each decode shape of `fp8 --record` (M = 64, 128), Level 13's best recorded setting, the narrow widths
   (without split-K and with the model's split-K, with the scales staged by small copies and by one TMA box, at 10
   stages and at the deepest ring that fits), block-scaled cuBLASLt and, with --peer deepgemm, DeepGEMM, through deepgemm.record_peer (every output
   checked, the order rotated shape by shape).

Checks go under "checks", timings under "narrow_records". A failed check stops the run before timing.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from gemm_course.fp8 import gemm as fg
from gemm_course.fp8 import tma_scales

RECORDS_KEY = "narrow_records"
NARROW_WIDTHS = tuple(bn for bn in fg.BLOCK_N_CHOICES["blockwise"] if bn < fg.SCALE_TILE)  # 64, 32, 16
SHALLOW = 10  # a ring depth every width and way fits (6 stages lost to 10 nearly everywhere in a first run); each
# width is also timed at the deepest ring its stages fit (up to 21 at 16 columns: fp8.gemm.stage_choices)
WAYS = (True, "tma")  # the ways to the scales timed: staged by small copies (the 64-row kernel's tuner winner), one TMA box

CHECK_SETTINGS = tuple(
    {"block_m": 64, "block_n": bn, "splits": splits, **({"staged_scales": way} if way is not False else {})}
    for bn in NARROW_WIDTHS for way in fg.STAGED_SCALES for splits in (1, 3, "auto"))
CUT_SHORT_SETTINGS = ({"block_m": 64, "block_n": 32, "splits": 3}, {"block_m": 64, "block_n": 16, "splits": 2,
                                                                     "staged_scales": "tma"})


def decode_shapes() -> list[tuple[int, int, int]]:
    """The shapes of `fp8 --record` with M = 64 or 128 (deepgemm._default_sizes), where narrow tiles can matter."""
    from gemm_course.fp8.deepgemm import _default_sizes

    return [s for s in _default_sizes() if s[0] <= 128]


def variants(M: int, N: int, K: int, best: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The settings timed beside the best recorded one: each narrow width at SHALLOW stages and at the deepest ring
    that fits, with each way to the scales of WAYS, without split-K and with the model's (only where the model
    splits); the best itself is not repeated."""
    from gemm_course import device

    sm_count = fg._sm_count() if device.gpu_available() else 132  # without a GPU: an H100's, for listing only
    out = []
    for bn in NARROW_WIDTHS:
        for way in WAYS:
            for depth in dict.fromkeys((SHALLOW, fg.stage_choices("blockwise", bn, 64, staged_scales=way)[-1])):
                for splits in (1, "auto"):
                    resolved = fg.resolve_splits(splits, M, N, K, sm_count, 64, bn)
                    if splits == "auto" and resolved == 1:
                        continue
                    p = fg.setting_params("blockwise", stages=depth, block_n=bn, block_m=64, splits=resolved,
                                          staged_scales=way)
                    if p != best:
                        out.append((p, f"variant: 64×{bn} tiles, {depth} stages, splits={resolved}"
                                       f"{' (the model)' if splits == 'auto' else ''}, staged_scales={way!r}"))
    return out


def kernel_names() -> list[str]:
    """Every Level 13 kernel this run compiles (tma_scales.warm_compile builds them in parallel first)."""
    from gemm_course.fp8.deepgemm import level13_best

    names = {fg.kernel_name("blockwise", None, block_n=s["block_n"], block_m=64,
                            staged_scales=s.get("staged_scales", False)) for s in CHECK_SETTINGS}
    names |= {fg.kernel_name("blockwise", st, block_n=NARROW_WIDTHS[-1], block_m=64, staged_scales="tma")
              for st in fg.stage_choices("blockwise", NARROW_WIDTHS[-1], 64, staged_scales="tma")}
    for shape in decode_shapes():
        best, _ = level13_best(*shape)
        for p in [best] + [v for v, _ in variants(*shape, best)]:
            names.add(fg.kernel_name("blockwise", p["stages"], block_n=p.get("block_n"), overlap=p.get("overlap", True),
                                     block_m=p.get("block_m"), staged_scales=p.get("staged_scales", False)))
    return sorted(names)


def run_checks(progress: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Step 1 of the module's run; one row per check."""
    rows = [tma_scales.check_shape(setting, shape, seed=i + 1)
            for setting in CHECK_SETTINGS for i, shape in enumerate(tma_scales.CHECK_SHAPES)]
    narrowest = NARROW_WIDTHS[-1]
    for st in fg.stage_choices("blockwise", narrowest, 64, staged_scales="tma"):
        setting = {"block_m": 64, "block_n": narrowest, "splits": 1, "staged_scales": "tma"}
        rows.append(tma_scales.check_shape(setting, tma_scales.DEPTH_SHAPE, seed=st, stages=st))
    for options in CUT_SHORT_SETTINGS:
        rows += tma_scales.check_counters_cut_short(options)
    return tma_scales.reported(rows, progress)


def record_narrow_tiles(out: str, sizes: Optional[Sequence[Any]] = None, peer: Optional[str] = None,
                        progress: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole run (see the module's docstring): compile, check, then time; the result file at `out`."""
    return tma_scales.checked_then_timed(out, kernel_names(), run_checks, sizes or decode_shapes(), peer, variants,
                                         RECORDS_KEY, progress)
