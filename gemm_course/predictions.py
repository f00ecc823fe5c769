"""Predict, then measure: what the course's models say a kernel's counters should be.

Each prediction names a counter key of `counters` (or one of its derived ratios), the value a model
gives for one setting at n³, and why, in both languages. `predict(level, params)` returns the
generic predictions every level has (compulsory DRAM bytes, the tile-traffic model for L2, the
occupancy the compile report allows) and the level's own (sectors per request, wavefronts per shared
instruction, ...), registered with @predicts. `compare` sets them beside the recorded counters; the
notebooks show the result with `gc.notebook.predict_vs_measure`.

A prediction is a model, not a measurement: where the counter differs, the level's page says why.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from . import counters
from .dtypes import storage_dtype
from .levels import HOPPER_STEPS, get_level
from .models import tile_traffic


@dataclass(frozen=True)
class Prediction:
    key: str          # a key of counters.METRICS or of counters.derived()
    value: float
    why_en: str
    why_zh: str


Predictor = Callable[[Mapping[str, Any], int], list[Prediction]]
_PREDICTORS: dict[str, Predictor] = {}


def predicts(level_id: str) -> Callable[[Predictor], Predictor]:
    """Register a level's own predictions (sectors, wavefronts, ...)."""
    def register(fn: Predictor) -> Predictor:
        _PREDICTORS[level_id] = fn
        return fn
    return register


def block_tile(level: str, params: Mapping[str, Any]) -> tuple[int, int]:
    """(rows, columns) of C one thread block computes: what the tile-traffic model divides by."""
    lv = get_level(level)
    if lv.number == 1:
        return 1, 1
    if lv.number in (2, 3, 4):
        return params["tile"], params["tile"]
    if lv.number == 10:
        return 128, params["BN"]
    if lv.number == 11:
        bm, bn, _ = HOPPER_STEPS[params["step"]]
        return bm, bn
    if lv.number == 9 and params["staging"] == "none":
        return params["BM"], params["BN"]
    return params["BM"], params["BN"]


def generic(level: str, params: Mapping[str, Any], n: int, dtype: str) -> list[Prediction]:
    """Predictions every level has: the least DRAM reads, the L2 reads of the tile-traffic model, and
    the occupancy the compile report allows (an upper bound for the achieved one)."""
    import numpy as np

    size = np.dtype(storage_dtype(dtype)).itemsize
    tm, tn = block_tile(level, params)
    least = size * 2 * n * n
    tiled = tile_traffic(n, n, n, tm, tn, size) - size * n * n  # reads only: C is written, not read
    out = [
        Prediction("dram_read_bytes", least,
                   "A and B read from HBM once each: the least any kernel can read",
                   "A 和 B 各从 HBM 读取一次：任何内核都不可能读得更少"),
        Prediction("l2_read_bytes", tiled,
                   f"tile-traffic model: each {tm}×{tn} block reads a strip of A and of B, no cache reuse between blocks",
                   f"分块流量模型：每个 {tm}×{tn} 的线程块读取 A 的一条行带和 B 的一条列带，线程块之间不经缓存复用"),
    ]
    try:
        from .compile import compile_report

        lv = get_level(level)
        occ = compile_report(lv, arch=lv.build_arch or "sm_90", **params).occupancy
        out.append(Prediction("achieved_occupancy_pct", 100 * occ.fraction,
                              f"occupancy calculator: {occ.warps_per_sm} of {occ.max_warps_per_sm} warps per SM "
                              f"(limited by {occ.limited_by})",
                              f"占用率计算：每 SM {occ.warps_per_sm}/{occ.max_warps_per_sm} 个线程束（受限于"
                              f"{_LIMITS_ZH.get(occ.limited_by, occ.limited_by)}）"))
    except Exception:  # no NVRTC here: the table shows the counters without this one prediction
        pass
    return out


_LIMITS_ZH = {"threads": "线程数", "blocks": "线程块数", "registers": "寄存器", "shared memory": "共享内存"}


def predict(level: str, params: Mapping[str, Any], n: int = counters.COUNTER_SIZE,
            dtype: Optional[str] = None) -> list[Prediction]:
    """Every prediction for one resolved setting at n³: the generic ones, then the level's own."""
    lv = get_level(level)
    dtype = dtype or lv.dtypes[0]
    own = _PREDICTORS.get(lv.id)
    return generic(lv.id, params, n, dtype) + (own(params, n) if own else [])


def compare(level: str, part: Optional[str] = None, **params: Any) -> list[dict[str, Any]]:
    """The recorded counters of one setting beside the predictions: one row per predicted quantity
    (key, predicted, measured, measured ÷ predicted, why), from the recorded counters file."""
    lv = get_level(level)
    row = counters.find(lv.id, part=part, **params)
    values = {**row["metrics"], **counters.derived(row["metrics"])}
    out = []
    for p in predict(lv.id, row["params"], row["M"], row["dtype"]):
        measured = values.get(p.key)
        out.append({"key": p.key, "predicted": p.value, "measured": measured,
                    "ratio": measured / p.value if measured is not None and p.value else None,
                    "why_en": p.why_en, "why_zh": p.why_zh})
    return out


# --- each level's own predictions ------------------------------------------------------------------
# One section per level, registered with @predicts("NN_name"); each returns a list of Prediction.
