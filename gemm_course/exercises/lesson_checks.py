"""The checks of what a SIMT exercise teaches, measured from the learner's kernel as the CPU backend ran
it: every memory access of the profiled blocks, in program order, with its barrier interval, thread,
array element and source line (warp_access.access_log and sequences).

Each check looks at two shapes (profile_shapes: one of whole tiles, one with partial tiles and three
blocks in each direction) and at several blocks of each launch (the first, the last and a sample drawn
with the attempt's seed), so a kernel that does the right thing in one block or at one shape only does
not pass (the barrier count and the block order use shapes of their own: barrier_shapes, ORDER_TILES).
The profiles are made once per grading and shared by the checks. A check that finds nothing to judge
(no access of its kind, no block that wrote C, no A tile in shared memory, fewer barriers than k-tiles)
fails, saying what it expected to see. The checks (the "type" in exercise.json):

    sectors, wavefronts   sectors per global request / bank wavefronts per shared instruction of the
                          chosen accesses, within max_excess × the ideal (the course's models)
    reuse                 the bytes a block reads from A and B are at most max_ratio × the bytes of the
                          rows of A and columns of B its tile of C needs: each element fetched once per
                          block, the rest of the reuse coming from shared memory or registers
    barriers              barriers over 4 and 5 k-tiles (barrier_shapes): at least one per k-tile, at most
                          max_per_tile per k-tile and one before the loop
    prefetch              in every barrier interval where a thread computes on a tile, its loads of the
                          next tile from global memory come before its first shared-memory read
    transposed            the A tile is stored transposed in shared memory: the elements of one k share
                          a row of the tile (where each element lands is followed through the data)
    block_order           each blockIdx.x computes the tile the grouped order (GROUP_M) gives it, read from
                          the C stores of every block of one launch of 10 × 3 tiles
"""
from __future__ import annotations

from typing import Any, Optional

from ..levels import get_level
from .grade import Attempt, Step, tile_shape

PROFILED_BLOCKS = 3  # per launch: the first, the last and one drawn with the attempt's seed


def profile_shapes(lv: Any, resolved: dict[str, Any]) -> list[tuple[int, int, int]]:
    """Two shapes: whole tiles (2 × 2 blocks, 2 k-tiles), and partial tiles with 3 × 3 blocks and a partial
    last k-tile. Rows of A and B stay multiples of 32 bytes long (K, N multiples of 8), so that every row
    starts a sector: a coalesced warp then touches the fewest sectors its bytes can take, and the ideal is
    exact. Two k-tiles are enough to see every access pattern of a k-loop; counting barriers takes more
    (barrier_shapes)."""
    tm, tn, tk = tile_shape(lv, resolved)
    tk = max(tk, 16)  # Level 1 has no k-tile; 16 steps of k are plenty for its access pattern
    return [(2 * tm, 2 * tn, 2 * tk), (3 * tm - 3, 3 * tn - 8, tk + 8)]


def barrier_shapes(lv: Any, resolved: dict[str, Any]) -> list[tuple[int, int, int]]:
    """The barrier count's own two shapes: 4 whole k-tiles (2 × 2 blocks), and partial tiles with 3 × 3 blocks
    and 5 k-tiles, the last one partial. Over 2 k-tiles one buffer with two barriers per step (3 or 4) is
    hard to tell from double buffering (2 or 3); over 4 or 5 it takes 7 or more where double buffering
    takes at most 5 or 6."""
    tm, tn, tk = tile_shape(lv, resolved)
    return [(2 * tm, 2 * tn, 4 * tk), (3 * tm - 3, 3 * tn - 8, 4 * tk + 8)]


def _logs(attempt: Attempt, shapes: Optional[list[tuple[int, int, int]]] = None
          ) -> list[tuple[tuple[int, int, int], Any]]:
    """(shape, AccessLog) of the learner's kernel at each profile shape (default profile_shapes), each made
    once per grading."""
    from gemm_course.inspect import warp_access

    ex = attempt.exercise
    lv = get_level(ex.level)
    if shapes is None:
        shapes = profile_shapes(lv, lv.resolve(**ex.params))
    made = attempt.cache.setdefault("access_logs", {})
    for shape in shapes:
        if shape not in made:
            made[shape] = warp_access.access_log(ex.level, *shape, source=attempt.source, blocks=PROFILED_BLOCKS,
                                                 rng=attempt.grader_seed, source_name=attempt.file_name, **ex.params)
    return [(shape, made[shape]) for shape in shapes]


def _summaries(attempt: Attempt) -> list[tuple[tuple[int, int, int], list]]:
    """warp_access.summary of each profile (sectors and wavefronts per line), made once per grading."""
    if "summaries" not in attempt.cache:
        from gemm_course.inspect import warp_access

        attempt.cache["summaries"] = [(shape, warp_access.summary(log)) for shape, log in _logs(attempt)]
    return attempt.cache["summaries"]


def _sequences(attempt: Attempt) -> list[tuple[tuple[int, int, int], dict]]:
    """warp_access.sequences of each profile (every thread's accesses in order), made once per grading."""
    if "sequences" not in attempt.cache:
        from gemm_course.inspect import warp_access

        attempt.cache["sequences"] = [(shape, warp_access.sequences(log)) for shape, log in _logs(attempt)]
    return attempt.cache["sequences"]


def _where(shape: tuple[int, int, int], block: tuple[int, ...]) -> tuple[str, str]:
    M, N, K = shape
    b = ",".join(map(str, block))
    return f"block ({b}) at {M}×{N}×{K}", f"{M}×{N}×{K} 时的线程块 ({b})"


def profile_check(attempt: Attempt, check: dict) -> Step:
    """Sectors per global request ("sectors") or bank wavefronts per shared instruction ("wavefronts") of the
    chosen accesses (array, load or store), at both profile shapes, in every profiled block."""
    space = "global" if check["type"] == "sectors" else "shared"
    limit = float(check.get("max_excess", 1.0))
    what_en = "sectors per request" if space == "global" else "bank wavefronts per instruction"
    what_zh = "每次请求的扇区数" if space == "global" else "每条指令的存储体波前数（wavefront）"
    seen = 0
    for shape, summary in _summaries(attempt):
        rows = [r for r in summary if r.space == space and check.get("write") in (None, r.write)
                and check.get("array") in (None, r.array)]
        seen += len(rows)
        bad = [r for r in rows if r.worst_excess > limit + 1e-9]
        if bad:
            worst = max(bad, key=lambda r: r.worst_excess)
            en, zh = _where(shape, worst.worst_block)
            kind_zh = "写入" if worst.write else "读取"
            target_zh = worst.array if space == "global" else "共享内存"
            return Step(check["type"], False,
                        f"{worst.line}: the {worst.width}-byte {'store' if worst.write else 'load'} of "
                        f"{worst.array if space == 'global' else 'shared memory'} takes {worst.worst_per_access:.2f} "
                        f"{what_en} in {en}, {worst.worst_excess:.1f}× the ideal (allowed {limit:g}×)",
                        f"{worst.line}：{zh}中，对{target_zh}的 {worst.width} 字节{kind_zh}{what_zh}为 "
                        f"{worst.worst_per_access:.2f}，是理想值的 {worst.worst_excess:.1f} 倍（允许 {limit:g} 倍）")
    if not seen:
        what = " ".join(filter(None, [{True: "store", False: "load"}.get(check.get("write"), "access"),
                                       f"of {check['array']}" if check.get("array") else None]))
        what_zh = {True: "写入", False: "读取"}.get(check.get("write"), "访问")
        return Step(check["type"], False, f"found no {space}-memory {what} in the profiled blocks at either shape, so "
                    "there is nothing to measure: the check expects the kernel's own accesses of this kind",
                    f"在两个形状下被分析的线程块中都没有找到{check['array'] + ' 的' if check.get('array') else ''}"
                    f"{'全局' if space == 'global' else '共享'}内存{what_zh}，无从测量：此项检查针对的是内核自己的这类访问")
    return Step(check["type"], True, f"every checked access within {limit:g}× the ideal {what_en}, at two shapes "
                "and in every profiled block",
                f"在两个形状、所有被分析的线程块中，被检查的访问都不超过理想{what_zh}的 {limit:g} 倍")


def _block_traffic(log: Any) -> list[tuple[tuple[int, int, int], int, int, int]]:
    """Per profiled block: the rows and the columns of C it stores, and the bytes of A and B it reads from
    global memory (cp.async copies included), counted from the log's records with NumPy."""
    import numpy as np

    from gemm_course.inspect.warp_access import _array_codes

    rec = log.records
    flags = rec["flags"].astype(np.int64)
    address = rec["address"].astype(np.uint64)
    code, names = _array_codes(log, address, (flags & 2) != 0)
    write = (flags & 1) != 0
    block = rec["block"].astype(np.int64)
    size = rec["size"].astype(np.int64)
    reads = np.isin(code, [names.index(n) for n in ("A", "B") if n in names]) & ~write
    out = []
    c = names.index("C") if "C" in names else -1
    base, _, item = log.arrays["C"] if "C" in log.arrays else (0, 0, 4)
    width = (log.shapes.get("C") or (0, 1))[-1] or 1
    for b, where in enumerate(log.blocks):
        mine = block == b
        stores = np.nonzero(mine & write & (code == c))[0]
        element = (address[stores].astype(np.int64) - int(base)) // int(item)
        rows = len(np.unique(element // width))
        spans = np.maximum(1, size[stores] // 4)  # a float4 store covers 4 columns
        columns = [element[spans > i] % width + i for i in range(int(spans.max()) if len(spans) else 0)]
        cols = len(np.unique(np.concatenate(columns))) if columns else 0
        out.append((tuple(where), rows, cols, int(size[mine & reads].sum())))
    return out


def reuse_check(attempt: Attempt, check: dict) -> Step:
    """Bytes read from A and B per block against what its tile of C needs (each element once). Fails with
    nothing to judge: no profiled block wrote C, or one wrote C without reading A or B."""
    limit = float(check.get("max_ratio", 1.0))
    worst: Optional[tuple[float, tuple, tuple, int, int]] = None
    for shape, log in _logs(attempt):
        K = shape[2]
        for block, rows, cols, got in _block_traffic(log):
            if not rows:
                continue
            needed = (rows * K + K * cols) * 4
            if not got:  # C written without reading A or B: nothing measured, so nothing shown reused
                en, zh = _where(shape, block)
                return Step("reuse", False,
                            f"{en} wrote C but read no bytes of A or B from global memory, so there is no reuse to "
                            "measure: the block's threads should load the rows of A and columns of B its tile needs",
                            f"{zh} 写了 C，却没有从全局内存读取 A 或 B 的任何字节，无从测量复用：线程块的线程应当加载它那块 C "
                            "所需的 A 的行和 B 的列")
            if worst is None or got / needed > worst[0]:
                worst = (got / needed, shape, block, got, needed)
    if worst is None:
        return Step("reuse", False, "no profiled block wrote C, so there is nothing to measure: each block should store "
                    "its tile of C", "被分析的线程块都没有写 C，无从测量：每个线程块都应当写出它那块 C")
    ratio, shape, block, got, needed = worst
    en, zh = _where(shape, block)
    if ratio > limit + 1e-9:
        return Step("reuse", False,
                    f"{en} read {got:,} bytes of A and B from global memory, {ratio:.1f}× the {needed:,} bytes its tile "
                    f"of C needs (allowed {limit:g}×): some values are fetched from global memory again and again "
                    "instead of being reused from shared memory (or registers)",
                    f"{zh} 从全局内存读取了 {got:,} 字节的 A 和 B，是它那块 C 所需的 {needed:,} 字节的 {ratio:.1f} 倍"
                    f"（允许 {limit:g} 倍）：有些数据被一遍又一遍地从全局内存读取，而没有从共享内存（或寄存器）中复用")
    return Step("reuse", True, f"every block reads from global memory at most {limit:g}× the bytes of A and B its "
                f"tile of C needs (worst {ratio:.2f}×, {en})",
                f"每个线程块从全局内存读取的 A 和 B 不超过它那块 C 所需字节数的 {limit:g} 倍（最多 {ratio:.2f} 倍，{zh}）")


def barriers_check(attempt: Attempt, check: dict) -> Step:
    """Barriers a block passes over its k-loop, counted at barrier_shapes (4 and 5 k-tiles), in every
    profiled block: at most max_per_tile × tiles + 1. The level's kernel and the shipped solutions pass
    `tiles` (one publishes tile 0 before the loop, one ends every iteration but the last); a kernel that
    also syncs after its last tile passes tiles + 1, the most allowed. One buffer with two barriers per
    step passes 2 × tiles - 1 or more, and fails from 3 k-tiles up. Fewer barriers than k-tiles fail too:
    such a block does not stage its tiles through shared memory, and there is no double buffering to judge."""
    from gemm_course.inspect import warp_access

    ex = attempt.exercise
    lv = get_level(ex.level)
    resolved = lv.resolve(**ex.params)
    tk = tile_shape(lv, resolved)[2]
    per_tile = float(check.get("max_per_tile", 1))
    worst: Optional[tuple[int, int, tuple, tuple, int]] = None  # (barriers, allowed, shape, block, k-tiles)
    for shape, log in _logs(attempt, barrier_shapes(lv, resolved)):
        tiles = -(-shape[2] // tk)
        allowed = int(per_tile * tiles) + 1  # + 1: the barrier that publishes the first tile before the loop
        for block, intervals in warp_access.barrier_intervals(log).items():
            barriers = intervals - 1
            if barriers < tiles:  # too few to have published every k-tile through shared memory: nothing to judge
                en, zh = _where(shape, block)
                return Step("barriers", False,
                            f"{en} passed {barriers} barrier{'s' if barriers != 1 else ''} for {tiles} k-tiles: a block "
                            "that stages its k-tiles in shared memory needs at least one per k-tile, to publish each "
                            "tile before its threads read it; the lesson is a double-buffered k-loop over shared tiles",
                            f"{zh} 为 {tiles} 个 k 分块只经过了 {barriers} 道屏障：把 k 分块放进共享内存的线程块，每个 k 分块"
                            "至少需要一道屏障，在线程读取之前让这个分块对所有线程可见；本练习要的是在共享分块上双缓冲的 k 循环")
            if worst is None or barriers - allowed > worst[0] - worst[1]:
                worst = (barriers, allowed, shape, block, tiles)
    if worst is None:
        return Step("barriers", False, "no block was profiled: the grader expected to count the barriers of at least "
                    "one block over 4 k-tiles", "没有分析任何线程块：评分器需要在 4 个 k 分块上数出至少一个线程块的屏障数")
    barriers, allowed, shape, block, tiles = worst
    en, zh = _where(shape, block)
    if barriers > allowed:
        return Step("barriers", False,
                    f"{en} passed {barriers} barriers for {tiles} k-tiles; at most {allowed} allowed ({per_tile:g} per "
                    "k-tile and one before the loop): with two buffers one barrier per k-tile is enough (it both "
                    "publishes tile t and frees the buffer of tile t-1)",
                    f"{zh} 为 {tiles} 个 k 分块经过了 {barriers} 道屏障；最多允许 {allowed} 道（每个 k 分块 {per_tile:g} 道，"
                    "外加循环前的一道）：有两块缓冲区时，每个 k 分块一道屏障就够了（它既让第 t 个分块对所有线程可见，"
                    "也腾出了第 t-1 个分块的缓冲区）")
    return Step("barriers", True, f"at most {per_tile:g} barrier per k-tile and one before the loop ({barriers} for "
                f"{tiles} k-tiles, {en})",
                f"每个 k 分块至多 {per_tile:g} 道屏障，外加循环前的一道（{zh}：{tiles} 个 k 分块共 {barriers} 道）")


def prefetch_check(attempt: Attempt, check: dict) -> Step:
    """In each barrier interval where a thread reads shared memory and loads A or B from global memory, the
    loads come first: they are in flight while the thread computes on the current tile."""
    checked = 0
    for shape, sequences in _sequences(attempt):
        for block, threads in sequences.items():
            for thread, seq in threads.items():
                for interval in sorted({a.interval for a in seq}):
                    here = [a for a in seq if a.interval == interval]
                    reads = [i for i, a in enumerate(here) if a.space == "shared" and not a.write]
                    loads = [i for i, a in enumerate(here) if a.space == "global" and a.array in ("A", "B")
                             and not a.write]
                    if not reads or not loads:
                        continue
                    checked += 1
                    if loads[-1] > reads[0]:
                        en, zh = _where(shape, block)
                        t = ",".join(map(str, thread))
                        load, read = here[loads[-1]], here[reads[0]]
                        return Step("prefetch", False,
                                    f"in {en}, thread ({t}) loads {load.element} at {load.line} after it has started "
                                    f"reading shared memory ({read.element} at {read.line}): issue the loads of the "
                                    "next tile before the compute loop, so that they are in flight while it runs",
                                    f"{zh} 中，线程 ({t}) 已经在 {read.line} 开始读共享内存（{read.element}）之后，才在 "
                                    f"{load.line} 加载 {load.element}：请在计算循环之前发出下一个分块的加载，让它们在计算"
                                    "期间传输")
    if not checked:
        return Step("prefetch", False, "no barrier interval both loads A or B from global memory and reads shared "
                    "memory: the next tile is not loaded while this one is computed on",
                    "没有哪个屏障区间既从全局内存加载 A 或 B、又读取共享内存：计算当前分块时并没有加载下一个分块")
    return Step("prefetch", True, f"the next tile's loads come before the compute loop ({checked} thread intervals "
                "checked)", f"下一个分块的加载都在计算循环之前（检查了 {checked} 个线程区间）")


def _packed(*columns: Any) -> tuple[Any, list[int]]:
    """Non-negative integer columns as one int64 key that sorts as the columns do, one after another (NumPy's
    unique over rows sorts far slower), and the radix of each column."""
    import numpy as np

    key = np.zeros(len(columns[0]), dtype=np.int64)
    radices, total = [], 1
    for column in columns:
        radix = int(column.max()) + 1 if len(column) else 1
        total *= radix
        if total >= 1 << 62:
            raise OverflowError("columns too wide to pack into one int64")
        key = key * radix + column
        radices.append(radix)
    return key, radices


def _unpacked(key: Any, radices: list[int]) -> list[Any]:
    out = []
    for radix in reversed(radices):
        key, column = key // radix, key % radix
        out.append(column)
    return out[::-1]


def a_tile_places(log: Any, tile: int) -> dict[tuple[int, int, int], dict[tuple[int, int], int]]:
    """Per profiled block, where each A element (m % tile, k % tile) lands in shared memory, found by following the
    data: a shared word is A's element of row m when every thread that reads it (in the first barrier interval from
    its store on) computes row m of C and no other (a word of B is read by threads of several rows); its k is the
    one A element of row m the storing thread loaded in the store's interval (or the interval before, for a copy
    parked in registers across a barrier). Words with no such single element (a float4 copy, a thread that loaded
    none) are left out; of several stores of one (m, k), the first names the word (threads in the order they first
    appear, each in program order). Computed from the log's records with NumPy."""
    import numpy as np

    from gemm_course.inspect.warp_access import _array_codes

    rec = log.records
    blocks = [tuple(b) for b in (getattr(log, "blocks", None) or [(0, 0, 0)])]
    out: dict[tuple[int, int, int], dict[tuple[int, int], int]] = {b: {} for b in blocks}
    if len(rec) == 0:
        return out
    flags = rec["flags"].astype(np.int64)
    shared, write = (flags & 2) != 0, (flags & 1) != 0
    address = rec["address"].astype(np.uint64)
    code, names = _array_codes(log, address, shared)
    shapes = getattr(log, "shapes", {}) or {}
    size = rec["size"].astype(np.int64)
    block, thread = rec["block"].astype(np.int64), rec["thread"].astype(np.int64)
    interval = rec["interval"].astype(np.int64)

    def index01(name: str, rows: Any) -> tuple[Any, Any]:
        """warp_access._global_index's first two entries for the records `rows` of array `name`."""
        base, _, item = log.arrays[name]
        element = (address[rows] - np.uint64(base)).astype(np.int64) // int(item)
        shape = tuple(shapes.get(name, ()))
        if len(shape) == 2 and shape[-1] > 0:
            return element // shape[-1], element % shape[-1]
        if len(shape) >= 3 and shape[-1] > 0:
            return element // (shape[-2] * shape[-1]), element % (shape[-2] * shape[-1]) // shape[-1]
        return element, np.zeros_like(element)

    def spread(rows: Any, count: Any) -> tuple[Any, Any]:
        """Each of `rows` repeated count times, and the repeat's number (0, 1, ...)."""
        which = np.repeat(rows, count)
        return which, np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count)

    def words(rows: Any) -> tuple[Any, Any, Any]:
        """(record, shared word, the word's place among the record's words) for every word the records touch."""
        first = address[rows].astype(np.int64) // 4
        which, step = spread(rows, (address[rows].astype(np.int64) + size[rows] + 3) // 4 - first)
        return which, address[which].astype(np.int64) // 4 + step, step

    c_code = names.index("C") if "C" in names else -2
    a_code = names.index("A") if "A" in names else -2
    for b, where in enumerate(blocks):
        mine = (block == b) & (code >= 0)
        stores = np.nonzero(mine & ~shared & write & (code == c_code))[0]
        reads = np.nonzero(mine & shared & ~write)[0]
        if not len(stores) or not len(reads):
            continue
        # The C rows each thread writes: (thread, row) pairs, sorted by thread.
        pair_key, pair_radices = _packed(thread[stores], index01("C", stores)[0])
        pair_thread, pair_row = _unpacked(np.unique(pair_key), pair_radices)
        first_pair = np.searchsorted(pair_thread, np.arange(thread.max() + 2))
        reads = reads[(first_pair[thread[reads] + 1] - first_pair[thread[reads]]) > 0]
        if not len(reads):
            continue
        # Readers of each (word, interval) that write C, and the C rows all of them compute.
        r, w, _ = words(reads)
        triple_key, triple_radices = _packed(w, interval[r], thread[r])
        tw, ti, tt = _unpacked(np.unique(triple_key), triple_radices)
        keys, key_of = np.unique(tw * triple_radices[1] + ti, return_inverse=True)  # (word, interval), sorted
        key_of = key_of.reshape(-1)
        readers = np.bincount(key_of, minlength=len(keys))
        n_rows = first_pair[tt + 1] - first_pair[tt]
        joined, nth = spread(np.arange(len(tt)), n_rows)
        kr_key, kr_radices = _packed(key_of[joined], pair_row[first_pair[tt[joined]] + nth])
        kr, kr_count = np.unique(kr_key, return_counts=True)
        kr_key_of, kr_row = _unpacked(kr, kr_radices)
        full = kr_count == readers[kr_key_of]
        n_full = np.bincount(kr_key_of[full], minlength=len(keys))
        the_row = np.full(len(keys), -1, dtype=np.int64)
        the_row[kr_key_of[full]] = kr_row[full]  # the one row, where n_full == 1
        # Each store's word: the first interval from the store on in which threads that write C read it.
        stored = np.nonzero(mine & shared & write)[0]
        s, sw, step = words(stored)
        si = interval[s]
        found = np.searchsorted(keys, sw * triple_radices[1] + np.minimum(si, triple_radices[1] - 1))
        ok = (found < len(keys)) & (si < triple_radices[1])
        found = np.where(ok, found, 0)
        ok &= (keys[found] // triple_radices[1] == sw) & (n_full[found] == 1)
        s, sw, step, si, row = s[ok], sw[ok], step[ok], si[ok], the_row[found[ok]]
        ts = thread[s]
        # The A elements of row m each thread loads in an interval: how many distinct k, and the k when one.
        loads = np.nonzero(mine & ~shared & ~write & (code == a_code))[0]
        if not len(loads) or not len(s):
            continue
        m, k = index01("A", loads)
        which, j = spread(np.arange(len(loads)), np.maximum(1, size[loads] // 4))
        load_key, load_radices = _packed(thread[loads][which], interval[loads][which] + 1, m[which], k[which] + j)
        lt, li, lm, lk = _unpacked(np.unique(load_key), load_radices)
        group_key = (lt * load_radices[1] + li) * load_radices[2] + lm
        groups, group_start, group_count = np.unique(group_key, return_index=True, return_counts=True)

        def group_of(iv: Any) -> Any:
            """The group (thread, interval iv, row) of each store, or -1."""
            inside = (ts < load_radices[0]) & (iv + 1 >= 0) & (iv + 1 < load_radices[1]) & (row < load_radices[2])
            query = (np.where(inside, ts, 0) * load_radices[1] + np.where(inside, iv + 1, 0)) * load_radices[2] \
                + np.where(inside, row, 0)
            at = np.minimum(np.searchsorted(groups, query), len(groups) - 1)
            return np.where(inside & (groups[at] == query), at, -1)

        here, before = group_of(si), group_of(si - 1)
        use = np.where(here >= 0, here, before)
        keep = use >= 0
        keep[keep] = group_count[use[keep]] == 1
        s, sw, step, row, ts, use = s[keep], sw[keep], step[keep], row[keep], ts[keep], use[keep]
        kk = lk[group_start[use]]
        # The loop's order: threads as they first appear, each in program order; the first store of an (m, k) counts.
        seen, first_at = np.unique(thread[np.nonzero(mine)[0]], return_index=True)
        rank = np.zeros(thread.max() + 1, dtype=np.int64)
        rank[seen] = np.argsort(np.argsort(first_at))
        walk = np.lexsort([step, s, rank[ts]])
        mk, first = np.unique((row[walk] % tile) * tile + kk[walk] % tile, return_index=True)
        out[where] = {(int(v) // tile, int(v) % tile): int(sw[walk][i]) for v, i in zip(mk.tolist(), first.tolist())}
    return out


def transposed_check(attempt: Attempt, check: dict) -> Step:
    """The A tile stored transposed: where each A element (m, k) lands in shared memory is found by
    a_tile_places (which threads read the word, which element its writer loaded), not by the order of
    the instructions; then for each k the words of the tile's m lie within one padded row (less than
    2 × tile words apart), and the rows of consecutive k are at least a tile's width apart. Fails when
    no profiled block shows 2 × tile A elements in shared memory: there is nothing to judge."""
    ex = attempt.exercise
    lv = get_level(ex.level)
    tile = tile_shape(lv, lv.resolve(**ex.params))[0]
    judged = 0
    for shape, log in _logs(attempt):
        for block, place in a_tile_places(log, tile).items():
            if len(place) < 2 * tile:
                continue
            judged += 1
            words: dict[int, list[int]] = {}
            for (m, k), w in place.items():
                words.setdefault(k, []).append(w)
            spans = [max(ws) - min(ws) for ws in words.values() if len(ws) > 1]
            starts = sorted((k, min(ws)) for k, ws in words.items())
            steps = [b[1] - a[1] for a, b in zip(starts, starts[1:]) if b[0] == a[0] + 1]
            if (spans and max(spans) >= 2 * tile) or (steps and min(abs(d) for d in steps) < tile):
                en, zh = _where(shape, block)
                return Step("transposed", False,
                            f"in {en} the A tile is not stored transposed: the elements (m, k) of one k should share a "
                            "row of the tile (As[k][m]), as this level's compute loop reads them; keep that layout and "
                            "change only how a row is padded or where its elements go within it",
                            f"{zh} 中 A 分块没有按转置存放：同一个 k 的元素 (m, k) 应当位于分块的同一行（As[k][m]），"
                            "本级的计算循环正是这样读取的；请保留这种布局，只改变行的填充方式或行内元素的位置")
    if not judged:
        return Step("transposed", False,
                    f"found no block where {2 * tile} or more elements of A go into shared memory one by one and are "
                    "read there by the threads of their row of C: load each element of A with its own load, store it "
                    "into the shared tile, and compute from the tile",
                    f"没有找到这样的线程块：其中至少 {2 * tile} 个 A 元素被逐个存入共享内存，并由计算 C 中对应行的线程"
                    "从那里读取：请用单独的读取加载 A 的每个元素，存入共享分块，并从分块中计算")
    return Step("transposed", True, f"the A tile is stored transposed (As[k][m]) in every profiled block ({judged} "
                "judged)", f"在所有被分析的线程块中，A 分块都按转置（As[k][m]）存放（判断了 {judged} 个）")


def grouped_tile(block: int, tiles_m: int, tiles_n: int, group_m: int) -> tuple[int, int]:
    """(tile row, tile column) block number `block` computes in the grouped order: groups of group_m tile
    rows (the last one may be shorter), each walked down one column of the group before the next."""
    per_group = group_m * tiles_n
    first_m = block // per_group * group_m
    rows = min(group_m, tiles_m - first_m)
    within = block % per_group
    return first_m + within % rows, within // rows


ORDER_TILES = (10, 3)  # the statement's example: two groups of 8 rows, the second 2 rows high


def block_order_check(attempt: Attempt, check: dict) -> Step:
    """Which tile of C each blockIdx.x computes, read from the C stores of every block of one launch of
    ORDER_TILES tiles (one k-tile deep), against grouped_tile. Fails when a block stores no element of C,
    or parts of several tiles, or another tile than the grouped order gives it."""
    from gemm_course.inspect import warp_access

    ex = attempt.exercise
    lv = get_level(ex.level)
    resolved = lv.resolve(**ex.params)
    tm, tn, tk = tile_shape(lv, resolved)
    tiles_m, tiles_n = ORDER_TILES
    group = int(resolved.get("group_m", 1))
    shape = (tiles_m * tm, tiles_n * tn, tk)
    every_block = [(b, 0, 0) for b in range(tiles_m * tiles_n)]
    log = warp_access.access_log(ex.level, *shape, source=attempt.source, blocks=every_block, rng=attempt.seed,
                                 source_name=attempt.file_name, **ex.params)
    where_en = f"at {shape[0]}×{shape[1]}×{shape[2]} ({tiles_m}×{tiles_n} tiles of {tm}×{tn}, GROUP_M = {group})"
    where_zh = f"{shape[0]}×{shape[1]}×{shape[2]} 时（{tiles_m}×{tiles_n} 个 {tm}×{tn} 分块，GROUP_M = {group}）"
    computed: dict[int, tuple[int, int]] = {}
    for (b, _, _), threads in sorted(warp_access.sequences(log).items()):
        tiles = {(a.index[0] // tm, a.index[1] // tn) for seq in threads.values() for a in seq
                 if a.space == "global" and a.array == "C" and a.write}
        if len(tiles) != 1:
            what_en = "no element of C" if not tiles else f"parts of {len(tiles)} tiles"
            what_zh = "没有写 C 的任何元素" if not tiles else f"写了 {len(tiles)} 个分块的各一部分"
            return Step("order", False, f"{where_en}: block {b} stored {what_en}; each block computes exactly one tile, "
                        f"here {grouped_tile(b, tiles_m, tiles_n, group)}",
                        f"{where_zh}：线程块 {b} {what_zh}；每个线程块恰好计算一个分块，这里应为 "
                        f"{grouped_tile(b, tiles_m, tiles_n, group)}")
        computed[b] = tiles.pop()
    wrong = [b for b, tile in computed.items() if tile != grouped_tile(b, tiles_m, tiles_n, group)]
    if wrong:
        shown = wrong[:4]
        got = ", ".join(f"block {b} computed {computed[b]}" for b in shown)
        got_zh = "，".join(f"线程块 {b} 计算的是 {computed[b]}" for b in shown)
        want = ", ".join(f"{grouped_tile(b, tiles_m, tiles_n, group)}" for b in shown)
        return Step("order", False,
                    f"{where_en}, tiles as (tile row, tile column): {got}; the grouped order gives them {want}: "
                    f"blocks 0..{group - 1} go down tile column 0 of the first {group} tile rows, block {group} starts "
                    "column 1, and the last group has only the rows that are left",
                    f"{where_zh}，分块记作（分块行，分块列）：{got_zh}；按分组顺序它们应当是 {want}：线程块 "
                    f"0..{group - 1} 沿前 {group} 个分块行的第 0 列向下，线程块 {group} 开始第 1 列，最后一组只有剩下的那几行")
    return Step("order", True, f"{where_en}: every block computes the tile the grouped order gives it",
                f"{where_zh}：每个线程块计算的都是分组顺序分给它的分块")
