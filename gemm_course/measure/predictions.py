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

from gemm_course.measure import counters
from gemm_course.run.dtypes import storage_dtype
from gemm_course.levels import HOPPER_CLUSTER, HOPPER_STEPS, get_level
from gemm_course.models import tile_traffic


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
        if params["step"] >= 5:  # each k-tile of B is fetched once for two blocks (TMA multicast)
            return HOPPER_CLUSTER * bm, bn
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
        from gemm_course.run.compile import compile_report

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
    return compare_row(counters.find(get_level(level).id, part=part, **params))


def compare_row(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """compare() for a counter row already read (counters.find)."""
    values = {**row["metrics"], **counters.derived(row["metrics"])}
    out = []
    for p in predict(row["level"], row["params"], row["M"], row["dtype"]):
        measured = values.get(p.key)
        out.append({"key": p.key, "predicted": p.value, "measured": measured,
                    "ratio": measured / p.value if measured is not None and p.value else None,
                    "why_en": p.why_en, "why_zh": p.why_zh})
    return out


# --- each level's own predictions ------------------------------------------------------------------
# One section per level, registered with @predicts("NN_name"); each returns a list of Prediction.


# --- Levels 1-4: sectors per request, L1 reuse, wavefronts per shared instruction --------------------

def _sector_model(requests: list[list[int]]) -> tuple[float, float]:
    """requests: the byte addresses of each warp-wide load. Returns the sectors per request and the
    share (%) of sector accesses an L1 that kept everything would serve: all but each sector's first."""
    from gemm_course.models import SECTOR_BYTES

    touched = [{a // SECTOR_BYTES for a in req} for req in requests]
    total = sum(len(t) for t in touched)
    return total / len(touched), 100 * (1 - len(set().union(*touched)) / total)


@predicts("01_naive")
def _level1(params: Mapping[str, Any], n: int) -> list[Prediction]:
    bx, by = params["block_x"], params["block_y"]
    threads = [(t % bx, t // bx) for t in range(bx * by)]
    warps = [threads[w:w + 32] for w in range(0, len(threads), 32)]
    cols = params["mapping"] == "cols"

    def row_col(tx: int, ty: int) -> tuple[int, int]:
        return (ty, tx) if cols else (tx, ty)

    # block (0, 0), eight k steps: one 32-byte sector holds 8 consecutive floats of a row
    loads = [[4 * (row_col(*t)[0] * n + k) for t in warp] for k in range(8) for warp in warps] + \
            [[4 * (n * n + k * n + row_col(*t)[1]) for t in warp] for k in range(8) for warp in warps]  # B after A
    per_request, hit = _sector_model(loads)
    stores, _ = _sector_model([[4 * (row_col(*t)[0] * n + row_col(*t)[1]) for t in warp] for warp in warps])
    a, b = (1, 4) if cols else (32, 1)
    return [
        Prediction("sectors_per_load_request", per_request,
                   f"lane addresses: A[row][k] touches {a} sector(s) per warp, B[k][col] {b}; half the loads are each",
                   f"按各线程地址计算：每个线程束读 A[row][k] 涉及 {a} 个扇区，读 B[k][col] 涉及 {b} 个；两者各占一半"),
        Prediction("sectors_per_store_request", stores,
                   "lane addresses of C[row][col]", "按 C[row][col] 的各线程地址计算"),
        Prediction("global_load_l1_hit_pct", hit,
                   "an L1 that keeps what one block read: over 8 k steps, every sector after its first access hits; "
                   "no reuse between blocks",
                   "假设 L1 保留一个线程块读过的数据：8 个 k 步内，每个扇区除第一次外都命中；不计线程块之间的复用"),
    ]


_A_READ = {  # the inner loop's read of the A tile, As(m = ty, k), as (row, col, pad, swizzle)
    "mk": ("ty", "k", 0, False), "mk_padded": ("ty", "k", 1, False), "km": ("k", "ty", 0, False),
    "km_padded": ("k", "ty", 1, False), "km_swizzled": ("k", "ty", 0, True)}


def _a_store(a_layout: str, r: str, c: str) -> tuple[str, str, int, bool]:
    """Where the copy writes A tile element (m = r, k = c): (row, col, pad, swizzle)."""
    row, col, pad, swizzle = _A_READ[a_layout]
    return (r, c, pad, swizzle) if row == "ty" else (c, r, pad, swizzle)


def _predicated_off_lds_per_group(level: str, params: Mapping[str, Any]) -> float:
    """SASS: LDS with a never-true predicate (@!PT) the compiler places beside cp.async copies, per
    commit group (LDGDEPBAR). They execute as shared-load instructions and move nothing."""
    try:
        from gemm_course.inspect.sass import disassemble

        text = disassemble(level, **params)
    except Exception:  # no NVRTC or disassembler here
        return 0.0
    groups = text.count("LDGDEPBAR")
    return text.count("@!PT LDS") / groups if groups else 0.0


def _tiled_predictions(level: str, params: Mapping[str, Any], n: int) -> list[Prediction]:
    """Levels 2-4: one TILE×TILE block per tile of C; per k-tile each thread copies one element of A
    and one of B and does TILE multiply-adds from shared memory."""
    from gemm_course.models import bank_access
    from gemm_course.inspect.sass import kernel_mix

    t = params["tile"]
    strided = params.get("load", "coalesced") == "strided"
    a_layout, b_pad = params.get("a_layout", "mk"), int(params.get("b_layout", "kn") == "kn_padded")
    r, c = ("tx", "ty") if strided else ("ty", "tx")
    threads = [(i % t, i // t) for i in range(t * t)]
    element = [(tx, ty) if strided else (ty, tx) for tx, ty in threads]  # (row, col) each thread copies
    requests = [[4 * (er * n + ec) for er, ec in element[w:w + 32]] for w in range(0, t * t, 32)]
    b_requests = [[4 * n * n + a for a in req] for req in requests]  # B: the same pattern in another array
    per_request, hit = _sector_model(requests + b_requests)
    order_en, order_zh = ("down columns", "纵向（沿一列）") if strided else ("along rows", "横向（沿一行）")
    out = [Prediction("sectors_per_load_request", per_request,
                      f"lane addresses: a warp copies its tile elements {order_en}, "
                      f"{per_request:g} sectors per load",
                      f"按各线程地址计算：线程束{order_zh}拷贝分块元素，每次加载 {per_request:g} 个扇区")]
    if level == "03_coalescing_banks":
        out.append(Prediction("global_load_l1_hit_pct", hit,
                              "an L1 that keeps what one block read during a k-tile: every sector after its first "
                              "access hits; no reuse between blocks",
                              "假设 L1 保留一个线程块在一个 k 分块内读过的数据：每个扇区除第一次外都命中；不计线程块之间的复用"))

    def wavefronts(row: str, col: str, pad: int = 0, swizzle: bool = False, width: int = 4) -> int:
        return bank_access(row, col, shape=(t, t), pad=pad, swizzle=swizzle, block=(t, t), width=width, k=0).wavefronts

    try:
        mix, _ = kernel_mix(level, **params)
    except (KeyError, OSError):
        return out
    cp_async = params.get("copy") == "cp_async"
    off_per_tile = _predicated_off_lds_per_group(level, params) if cp_async else 0.0
    off_static = off_per_tile * mix.get("LDGDEPBAR", 0)
    scale = t / mix["FFMA"]  # the SASS may unroll several k-tiles' worth of the loop: count per k-tile
    wide, scalar = mix.get("LDS.128", 0) * scale, (mix["LDS"] - off_static) * scale
    a_row, a_col, a_pad, a_swz = _A_READ[a_layout]
    wf_a16 = wavefronts(a_row, a_col, a_pad, a_swz, width=16) if wide else 0
    wf_a4, wf_b = wavefronts(a_row, a_col, a_pad, a_swz), wavefronts("k", "tx", b_pad)
    load_wf = wide * wf_a16 + (scalar - t) * wf_a4 + t * wf_b
    load_instr = wide + scalar + off_per_tile
    warps = (n // t) ** 2 * (t * t // 32) * (n // t)  # warps × k-tiles
    off_en = f" + {off_per_tile:g} predicated-off LDS (@!PT, no data) beside the cp.async copies" if off_per_tile else ""
    off_zh = f" + {off_per_tile:g} 条谓词恒假的 LDS（@!PT，不传输数据，位于 cp.async 拷贝旁）" if off_per_tile else ""
    mix_en = f"SASS per warp and k-tile: {wide:g} LDS.128 + {scalar:g} LDS{off_en}"
    mix_zh = f"SASS 中每个线程束每个 k 分块：{wide:g} 条 LDS.128 + {scalar:g} 条 LDS{off_zh}"
    out.append(Prediction("shared_load_instructions", warps * load_instr, mix_en, mix_zh))
    wide_en = f"{wide:g} × {wf_a16} (a 16-byte load every lane of a half-warp shares: 2 half-warps) + " if wide else ""
    wide_zh = f"{wide:g} × {wf_a16}（半个线程束内所有线程共享的 16 字节加载：2 个半线程束）+ " if wide else ""
    out.append(Prediction(
        "wavefronts_per_shared_load", load_wf / load_instr,
        f"bank model (models.BankAccess) × SASS mix: {wide_en}{scalar - t:g} × {wf_a4} + {t} × {wf_b} "
        f"wavefronts over {load_instr:g} instructions",
        f"存储体模型（models.BankAccess）× SASS 指令构成：{wide_zh}{scalar - t:g} × {wf_a4} + {t} × {wf_b} 个波前，"
        f"除以 {load_instr:g} 条指令"))
    if not cp_async:
        a_st = _a_store(a_layout, r, c)
        wf_sa, wf_sb = wavefronts(*a_st), wavefronts(r, c, b_pad)
        out.append(Prediction(
            "wavefronts_per_shared_store", (wf_sa + wf_sb) / 2,
            f"bank model: the A tile store As[{a_st[0]}][{a_st[1]}] takes {wf_sa}, the B store "
            f"Bs[{r}][{c}] {wf_sb}",
            f"存储体模型：A 分块写入 As[{a_st[0]}][{a_st[1]}] 需要 {wf_sa} 个波前，B 写入 Bs[{r}][{c}] 需要 {wf_sb} 个波前"))
    return out


for _level_id in ("02_smem_tiling", "03_coalescing_banks", "04_double_buffering"):
    predicts(_level_id)(lambda params, n, _id=_level_id: _tiled_predictions(_id, params, n))


# --- Levels 5-7: register blocking, fused epilogue, vectorized --------------------------------------

def _shared_passes(addresses: list[int], width: int) -> tuple[int, int]:
    """(passes, least passes) of one warp's shared-memory instruction, `width` bytes per lane at these
    byte addresses: models.BankAccess's wavefront model (a model fitted to the H200 counters: 16-byte
    accesses served half a warp at a time, broadcasts shared). Passes above the least are conflicts."""
    from gemm_course.models import BankAccess

    access = BankAccess("", tuple(range(len(addresses))), tuple(a // 4 for a in addresses), width)
    return access.wavefronts, access.ideal_wavefronts


def _register_tile_reads(params: Mapping[str, Any]) -> list[list[int]]:
    """Byte addresses, per warp instruction, of one k-tile's LDS.128 in Levels 5-7's inner loop:
    As[k][tr·TM + i] (rows padded to BM + 4 floats) and Bs[k][tc·TN + j], four floats at a time."""
    bm, bn, bk, tm, tn = (params[k] for k in ("BM", "BN", "BK", "TM", "TN"))
    threads = (bm // tm) * (bn // tn)
    out = []
    for warp in range(threads // 32):
        tids = range(warp * 32, warp * 32 + 32)
        for k in range(bk):
            out += [[4 * (k * (bm + 4) + (t // (bn // tn)) * tm + i) for t in tids] for i in range(0, tm, 4)]
            out += [[4 * (k * bn + (t % (bn // tn)) * tn + j) for t in tids] for j in range(0, tn, 4)]
    return out


def _copy_addresses(params: Mapping[str, Any], n: int, vector: int) -> list[list[int]]:
    """Byte addresses, per warp instruction, of one k-tile's global loads of A (row-major, K = n) and
    B (N = n): Level 5's cp.async copies one float per thread (vector 1), Level 7 a float4 (vector 4)."""
    bm, bn, bk, tm, tn = (params[k] for k in ("BM", "BN", "BK", "TM", "TN"))
    threads = (bm // tm) * (bn // tn)
    out = []
    for rows, cols, stride in ((bm, bk, n), (bk, bn, n)):  # A tile: BM × BK of A; B tile: BK × BN of B
        per_row = cols // vector
        for i in range(-(-rows * per_row // threads)):
            for warp in range(threads // 32):
                es = [e for e in range(i * threads + warp * 32, i * threads + warp * 32 + 32) if e < rows * per_row]
                if es:
                    out.append([4 * ((e // per_row) * stride + (e % per_row) * vector) for e in es])
    return out


def _level5_family(params: Mapping[str, Any], n: int, vectorized: bool, epilogue: str = "none") -> list[Prediction]:
    bm, bn, bk, tm, tn = (params[k] for k in ("BM", "BN", "BK", "TM", "TN"))
    threads = (bm // tm) * (bn // tn)
    warps = (n // bm) * (n // bn) * threads // 32
    ktiles = n // bk
    width = 16 if vectorized else 4
    copies = _copy_addresses(params, n, 4 if vectorized else 1)  # aligned: a lane's bytes lie in one sector
    per_copy, _ = _sector_model(copies)
    requests = len(copies) * (n // bm) * (n // bn) * ktiles
    sectors = per_copy * requests
    op = "LDG.128" if vectorized else "LDGSTS.32 (cp.async)"
    why_en = (f"{op}, {width} bytes per lane: the 32 lanes of a tile copy read {32 * width} bytes in runs "
              f"that fill whole 32-byte sectors, {per_copy:g} sectors per instruction")
    why_zh = (f"{op}，每线程 {width} 字节：分块拷贝中 32 个线程读取 {32 * width} 字节，"
              f"连续的段正好填满整个 32 字节扇区，每条指令 {per_copy:g} 个扇区")
    if epilogue != "none":
        # the epilogue's LDG.32, once per output element (SASS: TM·TN per thread): bias[c] or the old C[r][c]
        tids = range(32)
        tr = [t // (bn // tn) for t in tids]
        tc = [t % (bn // tn) for t in tids]
        if epilogue == "bias":
            loads = [[4 * (c * tn + j) for c in tc] for i in range(tm) for j in range(tn)]
            what_en, what_zh, rows = "the bias", "偏置", 1
        else:
            loads = [[4 * ((r * tm + i) * n + c * tn + j) for r, c in zip(tr, tc)] for i in range(tm) for j in range(tn)]
            what_en, what_zh, rows = "the old C", " C 的旧值", len(set(tr))
        per, _ = _sector_model(loads)
        requests += warps * len(loads)
        sectors += warps * len(loads) * per
        why_en += (f"; the epilogue adds {tm * tn} LDG.32 per thread, reading {what_en} once per output element: "
                   f"a warp's lanes ask for {rows} row(s) × {bn // tn} columns {4 * tn} bytes apart, "
                   f"{per:.0f} sectors per instruction")
        why_zh += (f"；尾处理每线程再加 {tm * tn} 条 LDG.32，每个输出元素读一次{what_zh}：一个线程束的各线程要 "
                   f"{rows} 行 × {bn // tn} 列、列间相隔 {4 * tn} 字节，每条指令 {per:.0f} 个扇区")
    out = [Prediction("sectors_per_load_request", sectors / requests, why_en, why_zh)]
    if tm % 4 or tn % 4:
        return out
    reads = _register_tile_reads(params)
    passes = [_shared_passes(a, 16) for a in reads]
    per_warp_tile = len(reads) // (threads // 32)  # LDS.128 per warp per k-tile
    # SASS (read, not modelled): before each group of cp.async copies the compiler puts three LDS that
    # never execute (@!PT LDS RZ, [RZ]); the warp still issues them, and ncu counts them as shared
    # loads. The copy loops (trip count t per matrix) run as t // 4 four-way unrolled passes plus t % 4
    # single copies, each group with its three.
    trips = [bm * bk // threads, bk * bn // threads]
    dummies = 0 if vectorized else sum(3 * (t // 4 + t % 4) for t in trips)
    avg = sum(p for p, _ in passes) / len(passes)
    least = sum(q for _, q in passes) / len(passes)
    instructions = warps * ktiles * (per_warp_tile + dummies)
    wavefronts = warps * ktiles * per_warp_tile * avg
    a_p, b_p = _split_reads(params, passes)
    out += [
        Prediction("shared_load_instructions", instructions,
                   f"SASS: {per_warp_tile} LDS.128 per warp per k-tile"
                   + (f" and {dummies} LDS that never execute (@!PT, before the cp.async copies) but are issued and counted"
                      if dummies else "") + f", × {ktiles} k-tiles × {warps} warps",
                   f"SASS：每个线程束每个 k 分块 {per_warp_tile} 条 LDS.128"
                   + (f"，外加 {dummies} 条永不执行（@!PT，位于 cp.async 拷贝之前）却照样发射、被计数的 LDS" if dummies else "")
                   + f"，× {ktiles} 个 k 分块 × {warps} 个线程束"),
        Prediction("wavefronts_per_shared_load", wavefronts / instructions,
                   f"bank model, 16-byte loads served half a warp at a time: an A read takes {a_p:g} passes (16 lanes "
                   f"share one vector), a B read {b_p:g} ({bn // tn} different vectors {4 * tn} bytes apart put "
                   f"{b_p // 2:g} in each group of 4 banks); average {avg:.2f} per LDS.128"
                   + (f", spread over the {dummies} issued-but-skipped LDS as well" if dummies else ""),
                   f"存储体模型，16 字节加载每次服务半个线程束：一次 A 读取 {a_p:g} 个波前（16 个线程共用一个向量），"
                   f"一次 B 读取 {b_p:g} 个波前（{bn // tn} 个相隔 {4 * tn} 字节的不同向量，每组 4 个存储体落 {b_p // 2:g} 个）；"
                   f"平均每条 LDS.128 {avg:.2f} 个波前" + (f"，再摊到 {dummies} 条发射却跳过的 LDS 上" if dummies else "")),
        Prediction("shared_load_conflicts", warps * ktiles * per_warp_tile * (avg - least),
                   f"the same model: passes above what the distinct bytes need at 128 bytes a pass, "
                   f"{avg - least:.2f} per LDS.128" + (" (all on the B reads)" if avg > least else ""),
                   f"同一模型：超出“不同字节数 ÷ 每个波前 128 字节”的波前数，每条 LDS.128 {avg - least:.2f} 个波前"
                   + ("（全在 B 的读取上）" if avg > least else "")),
    ]
    if vectorized:
        out.append(_vector_stores(params, n))
    return out


def _split_reads(params: Mapping[str, Any], passes: list[tuple[int, int]]) -> tuple[float, float]:
    """Average passes of the A reads and of the B reads (the order _register_tile_reads yields them)."""
    tm, tn = params["TM"], params["TN"]
    a, b = [], []
    per_k = tm // 4 + tn // 4
    for idx, (p, _) in enumerate(passes):
        (a if idx % per_k < tm // 4 else b).append(p)
    return sum(a) / len(a), sum(b) / len(b)


def _vector_stores(params: Mapping[str, Any], n: int) -> Prediction:
    """Level 7's shared stores per k-tile: A transposed as 4 STS.32 per float4, B as one STS.128."""
    bm, bn, bk, tm, tn = (params[k] for k in ("BM", "BN", "BK", "TM", "TN"))
    threads = (bm // tm) * (bn // tn)
    scalar, vector = [], []
    for warp in range(threads // 32):
        for i in range(-(-bm * bk // 4 // threads)):
            es = [e for e in range(i * threads + warp * 32, i * threads + warp * 32 + 32) if e < bm * bk // 4]
            for c in range(4):  # As[k + c][m] = a.x, .y, .z, .w
                scalar.append(_shared_passes([4 * (((e % (bk // 4)) * 4 + c) * (bm + 4) + e // (bk // 4))
                                              for e in es], 4)[0])
        for i in range(-(-bk * bn // 4 // threads)):
            es = [e for e in range(i * threads + warp * 32, i * threads + warp * 32 + 32) if e < bk * bn // 4]
            vector.append(_shared_passes([4 * ((e // (bn // 4)) * bn + (e % (bn // 4)) * 4) for e in es], 16)[0])
    s_avg, v_avg = sum(scalar) / len(scalar), sum(vector) / len(vector)
    return Prediction("wavefronts_per_shared_store", (sum(scalar) + sum(vector)) / (len(scalar) + len(vector)),
                      f"bank model: A's float4 go in transposed as {len(scalar) // (threads // 32)} STS.32 per warp per "
                      f"k-tile at {s_avg:g} pass{'es' if s_avg != 1 else ''} each (rows of As are {bm + 4} floats apart), "
                      f"B's as {len(vector) // (threads // 32)} STS.128 of 32 contiguous vectors at {v_avg:g} passes",
                      f"存储体模型：A 的 float4 转置写入，每个线程束每个 k 分块 {len(scalar) // (threads // 32)} 条 STS.32，"
                      f"每条 {s_avg:g} 个波前（As 的行距为 {bm + 4} 个 float）；B 的写入是 "
                      f"{len(vector) // (threads // 32)} 条 STS.128，每条 32 个连续向量，{v_avg:g} 个波前")


@predicts("05_register_blocking")
def _level5(params: Mapping[str, Any], n: int) -> list[Prediction]:
    return _level5_family(params, n, vectorized=False)


@predicts("06_fused_epilogue")
def _level6(params: Mapping[str, Any], n: int) -> list[Prediction]:
    epilogue = "accumulate" if params.get("accumulate") else "bias" if params.get("bias") else "none"
    return _level5_family(params, n, vectorized=False, epilogue=epilogue)


@predicts("07_vectorized")
def _level7(params: Mapping[str, Any], n: int) -> list[Prediction]:
    return _level5_family(params, n, vectorized=True)


@predicts("08_warp_tiling")
def _warp_tiling(params: Mapping[str, Any], n: int) -> list[Prediction]:
    """Level 8: 16-byte global loads, 16-byte shared loads with broadcasts (the width-16 bank model),
    and an FFMA count fixed by the product (one per multiply-add per thread)."""
    bm, bn, bk, wm, wn = (params[k] for k in ("BM", "BN", "BK", "WM", "WN"))
    warps = (n // bm) * (n // bn) * (bm // wm) * (bn // wn)
    ktiles = n // bk
    a_reads, b_reads = _warp_tile_reads(params)
    a_p = [_shared_passes(x, 16) for x in a_reads]
    b_p = [_shared_passes(x, 16) for x in b_reads]
    a_avg, b_avg = (sum(p for p, _ in ps) / len(ps) for ps in (a_p, b_p))
    least = sum(q for _, q in a_p + b_p)
    block_warps = (bm // wm) * (bn // wn)
    per_warp_tile = (len(a_reads) + len(b_reads)) // block_warps  # LDS.128 per warp per k-tile
    a_k, b_k = wm // 32, wn // 16  # LDS.128 of A and of B per warp per k
    passes = sum(p for p, _ in a_p + b_p) // block_warps  # per warp per k-tile
    no_conflict = passes * block_warps == least
    why_en = (f"bank model, 16-byte loads served half a warp at a time: in each half the 16 lanes of an A read "
              f"ask for 4 distinct vectors (64 contiguous bytes, one pass), as do those of a B read, so a read "
              f"of A takes {a_avg:g} passes and a read of B {b_avg:g}")
    why_zh = (f"存储体模型，16 字节加载每次服务半个线程束：每一半中，一次 A 读取的 16 个线程只要 4 个不同的向量"
              f"（64 个连续字节，一个波前），一次 B 读取也是如此，所以每次读取 A 需 {a_avg:g} 个波前、B 需 {b_avg:g} 个波前")
    out = [
        Prediction("sectors_per_load_request", 512 / 32,
                   "every global load is an LDG.128 of A: 32 lanes × 16 contiguous bytes = 512 B = 16 sectors",
                   "每条全局加载都是 A 的 LDG.128：32 个线程 × 16 个连续字节 = 512 B = 16 个扇区"),
        Prediction("wavefronts_per_shared_load", passes / per_warp_tile,
                   why_en + f"; per k {a_k} reads of A and {b_k} of B, average {passes / per_warp_tile:.2f} per LDS.128"
                   + (", none of it a conflict" if no_conflict else ""),
                   why_zh + f"；每个 k 读 A {a_k} 次、读 B {b_k} 次，平均每条 LDS.128 {passes / per_warp_tile:.2f} 个波前"
                   + ("，其中没有冲突" if no_conflict else "")),
        Prediction("shared_load_wavefronts", passes * ktiles * warps,
                   f"the same model: {a_k} × {a_avg:g} + {b_k} × {b_avg:g} = {passes // bk} passes per warp per k, "
                   f"× {n} k × {warps} warps",
                   f"同一模型：每个线程束每个 k {a_k} × {a_avg:g} + {b_k} × {b_avg:g} = {passes // bk} 个波前，"
                   f"× {n} 个 k × {warps} 个线程束"),
        Prediction("instructions", n ** 3 / 32,
                   "if the kernel issued nothing but FFMA: one per multiply-add per thread, n³/32 warp instructions",
                   "假如内核只发射 FFMA：每个线程每次乘加一条，共 n³/32 条线程束指令"),
    ]
    try:
        from gemm_course.inspect.sass import kernel_mix

        mix, _ = kernel_mix("08_warp_tiling", **params)
        out.append(Prediction("shared_load_instructions", mix["LDS.128"] * ktiles * warps,
                              f"SASS: {mix['LDS.128']} LDS.128 per warp per k-tile of {bk}, × {ktiles} k-tiles × {warps} warps",
                              f"SASS：每个线程束每个深度为 {bk} 的 k 分块 {mix['LDS.128']} 条 LDS.128，× {ktiles} 个 k 分块 × {warps} 个线程束"))
    except (KeyError, OSError):  # no disassembler and no recorded mix for this setting
        pass
    return out


def _warp_tile_reads(params: Mapping[str, Any]) -> tuple[list[list[int]], list[list[int]]]:
    """Byte addresses, per warp instruction, of one k-tile's LDS.128 in Level 8's inner loop (all warps
    of a block): As[k][wm0 + wi·32 + lm·4] (rows of A_STRIDE = BM + 4 floats) and Bs[k][wn0 + wj·16 + ln·4],
    with lm = lane / 4, ln = lane % 4. Returns (reads of A, reads of B)."""
    bm, bn, bk, wm, wn = (params[k] for k in ("BM", "BN", "BK", "WM", "WN"))
    a, b = [], []
    for warp in range((bm // wm) * (bn // wn)):
        wm0, wn0 = (warp // (bn // wn)) * wm, (warp % (bn // wn)) * wn
        for k in range(bk):
            a += [[4 * (k * (bm + 4) + wm0 + wi * 32 + (lane // 4) * 4) for lane in range(32)] for wi in range(wm // 32)]
            b += [[4 * (k * bn + wn0 + wj * 16 + (lane % 4) * 4) for lane in range(32)] for wj in range(wn // 16)]
    return a, b


# --- Levels 9-11: Tensor Cores ----------------------------------------------------------------------

def _blocks(n: int, tm: int, tn: int) -> int:
    return -(-n // tm) * -(-n // tn)


def _ldmatrix_wavefronts(count: int) -> Prediction:
    """ldmatrix.x4 moves 4 × 8 rows × 16 bytes = 512 bytes; with no bank conflict that is 4 passes of 128."""
    return Prediction("shared_load_wavefronts", 4 * count,
                      "bank model: an ldmatrix.x4 moves 512 bytes, 4 passes of 128 bytes when no two of its rows "
                      "share a bank slot (ncu reports ldmatrix's passes among the shared-load passes)",
                      "存储体模型：一条 ldmatrix.x4 读取 512 字节，若各行不落在同一存储体槽上，需要 4 个波前、每个波前 128 字节"
                      "（ncu 把 ldmatrix 的波前数计入共享内存加载的波前数）")


@predicts("09_wmma")
def _level9(params: Mapping[str, Any], n: int) -> list[Prediction]:
    if params["staging"] == "none":
        warps = (n // 16) ** 2  # one 16×16 tile of C per warp
        return [
            Prediction("global_load_requests", warps * (n // 16) * 8,
                       "SASS: 8 four-byte loads (LDG.32) per warp per 16-deep step, 4 for the A fragment and 4 for B",
                       "SASS：每个线程束每个深度为 16 的 k 步 8 条 4 字节加载（LDG.32），A 片段 4 条，B 片段 4 条"),
            Prediction("sectors_per_load_request", 8,
                       "fragment layout: one LDG.32 gives 4 lanes 16 consecutive bytes of each of 8 rows: 8 sectors, each half used",
                       "片段布局：一条 LDG.32 让每 4 个线程读取 8 行中每一行的 16 个连续字节：8 个扇区，每个只用一半"),
            Prediction("global_load_l1_hit_pct", 100 * 7 / 8,
                       "each 32-byte sector is asked for 8 times (for its two halves, by each of the 4 warps of a block "
                       "that share the strip) and fetched once: 7 of 8 hit",
                       "每个 32 字节扇区被请求 8 次（它的两半各一次，再乘以线程块中共享这一条带的 4 个线程束），只取一次：8 次中 7 次命中"),
        ]
    bm, bn = params["BM"], params["BN"]
    # a warp's tile: 32×32 with staging="shared", WM×WN pipelined; per 16-deep k-step it loads WM/16 A and
    # WN/16 B fragments, one ldmatrix.x4 each
    wm, wn = (params["WM"], params["WN"]) if params["staging"] == "pipelined" else (32, 32)
    blocks, k_tiles, warps = _blocks(n, bm, bn), n // 32, (bm // wm) * (bn // wn)
    ldsm = blocks * warps * (n // 16) * (wm + wn) // 16
    return [
        Prediction("global_load_requests", blocks * k_tiles * (bm * 32 + 32 * bn) * 2 // 512,
                   "a block copies a BM×32 tile of A and a 32×BN tile of B per k-tile, 512 bytes per 16-byte warp load",
                   "每个 k 分块，线程块拷贝 A 的 BM×32 分块和 B 的 32×BN 分块，每条 16 字节的线程束加载读取 512 字节"),
        Prediction("sectors_per_load_request", 16,
                   "a 16-byte load per lane, consecutive lanes on consecutive bytes: 512 bytes, 16 sectors, all used",
                   "每个线程 16 字节加载，相邻线程访问相邻字节：512 字节，16 个扇区，全部用上"),
        Prediction("ldmatrix_instructions", ldsm,
                   f"SASS: {(wm + wn) // 16} LDSM per warp per 16-deep k-step ({wm // 16} A and {wn // 16} B fragments)",
                   f"SASS：每个线程束每个深度为 16 的 k 步 {(wm + wn) // 16} 条 LDSM（A 片段 {wm // 16} 个，B 片段 {wn // 16} 个）"),
        _ldmatrix_wavefronts(ldsm),
    ]


@predicts("10_mma_pipeline")
def _level10(params: Mapping[str, Any], n: int) -> list[Prediction]:
    from gemm_course.levels import _mma_overlapped

    bn = params["BN"]
    blocks = _blocks(n, 128, bn)
    # per warp and 16-deep k-step: 4 ldmatrix.x4 for A (64 rows) and one per 16 columns of the warp's tile for
    # B: 8 warps of 64 × bn/4, or in the overlapped kernel bn/32 warps of 64×64
    warps, b_loads = (bn // 32, 4) if _mma_overlapped(params) else (8, bn // 64)
    ldsm = blocks * warps * (n // 16) * (4 + b_loads)
    out = [Prediction("ldmatrix_instructions", ldsm,
                      f"per warp and 16-deep k-step: 4 ldmatrix.x4 for A and {b_loads} for B, {warps} warps per block",
                      f"每个线程束每个深度为 16 的 k 步：A 用 4 条 ldmatrix.x4，B 用 {b_loads} 条；每个线程块 {warps} 个线程束"),
           _ldmatrix_wavefronts(ldsm)]
    if params["copy"] in ("cp_async", "cp_async_mbarrier"):
        out += [Prediction("global_load_requests", blocks * (n // 32) * (128 * 32 + 32 * bn) * 2 // 512,
                           "each cp.async (LDGSTS.128) a warp issues moves 512 bytes of the 128×32 A and 32×BN B tiles",
                           "线程束发出的每条 cp.async（LDGSTS.128）传输 128×32 的 A 分块和 32×BN 的 B 分块中的 512 字节"),
                Prediction("sectors_per_load_request", 16,
                           "16 bytes per lane, consecutive lanes on consecutive bytes: 16 sectors, all used",
                           "每个线程 16 字节，相邻线程访问相邻字节：16 个扇区，全部用上")]
    return out


@predicts("11_hopper_wgmma")
def _level11(params: Mapping[str, Any], n: int) -> list[Prediction]:
    step = params["step"]
    tm, tn, _ = HOPPER_STEPS[step]
    if params.get("c_type") == "input":
        out = [Prediction("dram_write_bytes", 2 * n * n,
                          "C written once, in the inputs' 2-byte type", "C 以输入的 2 字节类型写回一次")]
    else:
        out = [Prediction("dram_write_bytes", 4 * n * n,
                          "C written once, in fp32", "C 以 fp32 写回一次")]
    if step == 1:
        out += [Prediction("global_load_requests", _blocks(n, tm, tn) * (n // 64) * (tm * 64 + 64 * tn) * 2 // 512,
                           "the threads copy a 64×64 slice of A and a 64×128 slice of B per k-tile, 512 bytes per warp load",
                           "每个 k 分块，线程拷贝 A 的 64×64 切片和 B 的 64×128 切片，每条线程束加载 512 字节"),
                Prediction("sectors_per_load_request", 16,
                           "16-byte loads, consecutive lanes on consecutive bytes: 16 sectors, all used",
                           "16 字节加载，相邻线程访问相邻字节：16 个扇区，全部用上")]
    else:
        out.append(Prediction("global_load_requests", 0,
                              "TMA copies: no thread executes a global load", "TMA 拷贝：没有线程执行全局加载"))
    if step in (3, 4):
        out.append(Prediction("achieved_occupancy_pct", 100 * 9 / 64,
                              "source: 3 of the producer's 4 warps return at once, so 8 consumer warps and 1 producer "
                              "warp stay: 9 of 64",
                              "源码：生产者的 4 个线程束中有 3 个立即返回，留下 8 个消费者线程束和 1 个生产者线程束：64 个中的 9 个"))
    return out
