"""Predict, then check: the learner writes numbers (sectors per request, bank wavefronts per shared
store, shared bytes, resident blocks per SM, loads per multiply-add, ...), the grader measures them.

An answer is text with one `name = value` per line (`#` starts a comment). The names, what each one
means, where it is measured and its tolerance come from the exercise's "predict" check:

    {"type": "predict", "shape": [M, N, K], "quantities": [
        {"name": "sectors_a", "what": {"en": ..., "zh": ...}, "why": {"en": ..., "zh": ...},
         "tolerance": {"abs": 0} (exact) | {"abs": 0.05} | {"rel": 0.03},
         "measure": {"from": "profile", "space": "global", "array": "A", "write": false,
                     "line": "source text on the line", "stat": "per_request"},
         "params": {...}, "shape": [M, N, K]},          # optional: another setting or shape
        ...]}

Measures, each taken live from the level's own kernel when grading (nothing recorded):

    profile  the CPU backend's access profile of the first block (warp_access.profile): the rows of
             one kind (space, load/store, array, a piece of the source line), then a statistic:
             per_request           sectors per request (global) or wavefronts per instruction (shared)
             per_thread            warp-wide accesses per warp, i.e. instructions per thread (÷ divide)
             per_thread_per_ktile  the same per k-tile of the block's main loop
             per_thread_per_k      the same per step k of the main loop
             per_fma               accesses per thread per multiply-add of the block's tile
             fma_per_access        multiply-adds per access (÷ vector: accesses per vector instruction)
    report   the sm_90 compile report (NVRTC, no GPU): registers, static_shared_bytes, blocks_per_sm,
             warps_per_sm, threads_per_block
    geometry the launch: threads_per_block, or blocks (the grid) at the quantity's shape
    traffic  the tile-traffic model (models.tile_traffic) for the setting's block tile: bytes of A and
             B read from global memory with no cache reuse, at the quantity's shape, in `unit` bytes
    triton   Level 14: the course's tiled Triton kernel compiled (no GPU) for the setting's target
             (triton_answers.measure_config): threads_per_block, cuda_level, ring_bytes, acc_per_thread

Predicting is what is rewarded, not searching. The tries are counted from the progress file (a try is a
recorded grading that compared the predictions with measurements; progress.record counts them):

    tries 1 to COUNTED_TRIES   a wrong answer names the quantities outside their tolerance (not the
                               measured values, nor the direction); a right one counts as solved
    later tries                a wrong answer says only how many are off; a right one is shown as right
                               and recorded as not counting (progress: late_pass; best is unchanged)
    reveal                     `python -m gemm_course exercises reveal ID` gives up: it shows the measured
                               values with their reasons (reveal_lines) and records the exercise as given up
                               (progress: revealed), after which a right answer does not count either

The measured values, with the reason each is what it is, are shown once every prediction is within its
tolerance."""
from __future__ import annotations

import difflib
import functools
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from ..levels import KERNEL_DIR, get_level
from .grade import Attempt, Step

ARCH = "sm_90"  # what the compile report measures: the course's H200
COUNTED_TRIES = 3  # tries whose verdict names the quantities off, and within which a right answer counts


class MeasureError(RuntimeError):
    """A quantity that cannot be measured here (no NVRTC, ...): the step is 'not verified'."""


# --- the answer ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Parsed:
    values: dict[str, float]
    problem: Optional[tuple[str, str]] = None  # (english, chinese): what to fix, one line


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?", re.IGNORECASE)


def parse_number(text: str) -> Optional[float]:
    """A prediction's value: 4, 0.25, .5, 1e9, 8.59e9, 1/8, 4,096 (thousands), 0,25 (decimal comma),
    12 544 or 12_544 (grouped digits). None when it is not a finite number."""
    t = text.strip().replace("_", "")
    t = re.sub(r"(?<=\d) (?=\d{3}\b)", "", t)  # 12 544 → 12544
    if re.fullmatch(r"[+-]?[1-9]\d{0,2}(,\d{3})+", t):  # 4,096 or 1,048,576: thousands separators
        t = t.replace(",", "")
    elif re.fullmatch(r"[+-]?\d+,\d+", t):  # 0,25: a decimal comma
        t = t.replace(",", ".")
    parts = t.split("/")
    if len(parts) == 2:  # a fraction: 1/8, 32/12
        num, den = parse_number(parts[0]), parse_number(parts[1])
        return num / den if num is not None and den not in (None, 0) else None
    if len(parts) != 1 or not _NUMBER.fullmatch(t):
        return None
    value = float(t)
    return value if math.isfinite(value) else None


def _normal_name(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().strip("`'\"").lower())


def parse_answer(text: str, names: Sequence[str]) -> Parsed:
    """Read `name = value` lines; on the first kind of problem found, say what to fix in one line:
    a line that is not an assignment, an unknown name, a name given twice, a value that is not a
    number, a prediction still missing (`?`)."""
    text = unicodedata.normalize("NFKC", text or "")  # full-width ＝ ： ０-９ from a Chinese input method
    known = {_normal_name(n): n for n in names}
    entries: list[tuple[int, str, str]] = []  # (line number, name as written, value text)
    malformed: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        for segment in (s for s in body.split(";") if s.strip()):
            pieces = re.split(r",\s*(?=[A-Za-z_][\w\- ]*\s*[=:])", segment) if segment.count("=") + segment.count(":") > 1 \
                else [segment]
            for piece in pieces:
                match = re.fullmatch(r"\s*([A-Za-z_][\w\- ]*?)\s*[=:]\s*(.*?)\s*", piece)
                if not match:
                    malformed.append(number)
                else:
                    entries.append((number, match.group(1), match.group(2)))
    listed = ", ".join(names)
    if malformed:
        where = sorted(set(malformed))
        lines = ", ".join(map(str, where[:5])) + (f" and {len(where) - 5} more" if len(where) > 5 else "")
        lines_zh = "、".join(map(str, where[:5])) + (f" 等 {len(where)}" if len(where) > 5 else "")
        head = f"line {lines} is" if len(where) == 1 else f"lines {lines} are"
        return Parsed({}, (f"{head} not of the form `name = value`: write one prediction per line, "
                           f"e.g. `{names[0]} = 4`", f"第 {lines_zh} 行不是 `名称 = 数值` 的形式：每行写一个预测，例如 "
                           f"`{names[0]} = 4`"))
    unknown = [(n, w) for n, w, _ in entries if _normal_name(w) not in known]
    if unknown:
        def guess(word: str) -> str:
            close = difflib.get_close_matches(_normal_name(word), list(known), n=1)
            return f" (did you mean `{known[close[0]]}`?)" if close else ""

        def guess_zh(word: str) -> str:
            close = difflib.get_close_matches(_normal_name(word), list(known), n=1)
            return f"（是不是 `{known[close[0]]}`？）" if close else ""

        en = "; ".join(f"`{w}` on line {n}{guess(w)}" for n, w in unknown)
        zh = "；".join(f"第 {n} 行的 `{w}`{guess_zh(w)}" for n, w in unknown)
        return Parsed({}, (f"unknown name {en}: this exercise asks for {listed}",
                           f"未知的名称 {zh}：本练习要预测的是 {'、'.join(names)}"))
    seen: dict[str, int] = {}
    for n, w, _ in entries:
        key = known[_normal_name(w)]
        if key in seen:
            return Parsed({}, (f"`{key}` is given twice (lines {seen[key]} and {n}): keep one",
                               f"`{key}` 出现了两次（第 {seen[key]} 行和第 {n} 行）：只保留一个"))
        seen[key] = n
    values: dict[str, float] = {}
    pending: list[str] = []
    bad: list[tuple[str, str]] = []
    for _, w, raw in entries:
        key = known[_normal_name(w)]
        if raw in ("", "?", "？"):
            pending.append(key)
            continue
        value = parse_number(raw)
        if value is None:
            bad.append((key, raw))
        else:
            values[key] = value
    if bad:
        shown = ", ".join(f"`{k} = {raw}`" for k, raw in bad)
        return Parsed({}, (f"{shown}: not a number; write digits (4, 0.25, 1/8 or 8.6e9), no units",
                           f"{shown}：不是数值；请写数字（4、0.25、1/8 或 8.6e9），不要带单位"))
    missing = [n for n in names if n not in values]
    if missing:
        todo, todo_zh = ", ".join(missing), "、".join(missing)
        return Parsed({}, (f"no prediction yet for {todo}: replace each `?` with a number (a line `name = value` "
                           "for each)", f"{todo_zh} 还没有预测值：把每个 `?` 换成一个数（每个名称一行 `名称 = 数值`）"))
    return Parsed(values)


def _quantities(exercise: Any) -> list[dict]:
    """Every quantity an exercise asks for, from its "predict" checks, in order."""
    return [q for c in exercise.checks if c["type"] == "predict" for q in c["quantities"]]


def starter_text(exercise_data: Mapping[str, Any]) -> str:
    """The starter.txt of a prediction exercise: a header, then per quantity its description in both
    languages (comments) and `name = ?`. Kept in the folder; the tests check it matches."""
    lines = ["# Replace each ? with your prediction (one `name = value` per line; # starts a comment).",
             "# 把每个 ? 换成你的预测值（每行一个 `名称 = 数值`；# 之后是注释）。"]
    for check in exercise_data["checks"]:
        for q in check.get("quantities", []):
            lines += ["", f"# {q['what']['en']} ({tolerance_text(q['tolerance'], 'en')})",
                      f"# {q['what']['zh']}（{tolerance_text(q['tolerance'], 'zh')}）", f"{q['name']} = ?"]
    return "\n".join(lines) + "\n"


def tolerance_text(tolerance: Mapping[str, float], lang: str) -> str:
    if "rel" in tolerance:
        pct = f"{100 * tolerance['rel']:g}%"
        return f"within {pct}" if lang == "en" else f"误差不超过 {pct}"
    if tolerance["abs"] == 0:
        return "exact" if lang == "en" else "须完全一致"
    return f"within ±{tolerance['abs']:g}" if lang == "en" else f"误差不超过 ±{tolerance['abs']:g}"


def within(predicted: float, measured: float, tolerance: Mapping[str, float]) -> bool:
    if "rel" in tolerance:
        return abs(predicted - measured) <= tolerance["rel"] * abs(measured) + 1e-9
    return abs(predicted - measured) <= tolerance["abs"] + 1e-9  # the slack: float rounding, not leniency


# --- measuring ------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _profile_rows(level: str, params_key: tuple, shape: tuple[int, int, int]) -> tuple:
    from gemm_course.inspect.warp_access import profile

    return tuple(profile(level, *shape, **dict(params_key)))


@functools.lru_cache(maxsize=256)
def _source_line(location: str) -> str:
    """The text of "file.cu:57" among the kernel files (a level's file or one it includes)."""
    name, _, number = location.rpartition(":")
    path = KERNEL_DIR / name.rsplit("/", 1)[-1]
    try:
        return path.read_text(encoding="utf-8").splitlines()[int(number) - 1]
    except (OSError, IndexError, ValueError):
        return ""


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _block_work(level: str, params: Mapping[str, Any], K: int) -> tuple[int, int, int, int]:
    """(warps, k-tile depth, k-tiles, warp-wide multiply-adds) of one full block: its tile of C times the K it
    walks (rounded up to whole k-tiles: a partial last tile still multiplies its zeros)."""
    from gemm_course.measure.predictions import block_tile

    lv = get_level(level)
    launch = lv.geometry(1, 1, 1, params)
    warps = -(-launch.threads_per_block // 32)
    ktile = params.get("BK") or params.get("tile") or 1
    ktiles = -(-K // ktile)
    rows, cols = (params["block_y"], params["block_x"]) if lv.number == 1 else block_tile(lv.id, params)
    return warps, ktile, ktiles, rows * cols * ktiles * ktile // 32


def measure(level: str, params: Mapping[str, Any], shape: Sequence[int], spec: Mapping[str, Any]) -> float:
    """One quantity of a level's own kernel at a setting (see the module docstring)."""
    if spec["from"] == "triton":  # Level 14: the course's tiled Triton kernel, compiled for the setting's target
        from .triton_answers import measure_config

        return measure_config(params, spec)
    lv = get_level(level)
    resolved = lv.resolve(**params)
    source = spec["from"]
    if source == "report":
        from gemm_course.run.compile import compile_report

        try:
            report = compile_report(lv, arch=ARCH, **resolved)
        except Exception as err:  # no NVRTC here, most likely
            raise MeasureError(str(err).splitlines()[0]) from None
        field = spec["field"]
        if field in ("blocks_per_sm", "warps_per_sm"):
            return float(getattr(report.occupancy, field))
        return float(getattr(report, field))
    if source == "geometry":
        return float(lv.geometry(*shape, resolved).threads_per_block if spec["field"] == "threads_per_block"
                     else math.prod(lv.geometry(*shape, resolved).grid))
    if source == "traffic":
        from ..models import tile_traffic
        from gemm_course.measure.predictions import block_tile

        M, N, K = spec.get("shape", shape)
        tm, tn = block_tile(lv.id, resolved)
        return (tile_traffic(M, N, K, tm, tn) - 4 * M * N) / spec.get("unit", 1)  # C is written, not read
    if source != "profile":
        raise ValueError(f"unknown measure {source!r}")
    try:
        profiled = _profile_rows(lv.id, tuple(sorted(resolved.items())), tuple(shape))
    except Exception as err:  # the CPU backend cannot build or run here (no C++ compiler, ...)
        raise MeasureError(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
    rows = [r for r in profiled
            if r.space == spec.get("space", "global") and r.write == spec.get("write", False)
            and spec.get("array") in (None, r.array)
            and _squash(spec.get("line", "")) in _squash(_source_line(r.line))]
    if not rows:
        raise ValueError(f"{lv.id} {resolved}: no access matches {dict(spec)}")  # the exercise is wrong
    accesses = sum(r.warp_accesses for r in rows)
    warps, ktile, ktiles, warp_fmas = _block_work(lv.id, resolved, shape[2])
    stat = spec["stat"]
    if stat == "per_request":
        return sum(r.units for r in rows) / accesses
    if stat == "per_thread":
        return accesses / warps / spec.get("divide", 1)
    if stat == "per_thread_per_ktile":
        return accesses / warps / ktiles / spec.get("divide", 1)
    if stat == "per_thread_per_k":
        return accesses / warps / (ktiles * ktile) / spec.get("divide", 1)
    if stat == "per_fma":
        return accesses / warp_fmas
    if stat == "fma_per_access":
        return warp_fmas / (accesses / spec.get("vector", 1))
    raise ValueError(f"unknown statistic {stat!r}")


# --- the runner and the check ---------------------------------------------------------------------

def run(attempt: Attempt) -> list[Step]:
    """Read the answer: every name once, each a number. The measuring is the check's."""
    names = [q["name"] for q in _quantities(attempt.exercise)]
    parsed = parse_answer(attempt.source, names)
    if parsed.problem:
        return [Step("answer", False, *parsed.problem)]
    return [Step("answer", True, f"{len(names)} predictions read: {', '.join(names)}",
                 f"读到 {len(names)} 个预测值：{'、'.join(names)}")]


def _show(value: float) -> str:
    return str(int(value)) if value == int(value) and abs(value) < 1e9 else f"{value:.4g}"


def _measure_all(exercise: Any, check_dict: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """(quantity -> measured value, quantity -> why it could not be measured here) for one "predict" check."""
    shape = tuple(check_dict.get("shape", (64, 64, 64)))
    measured: dict[str, float] = {}
    unmeasured: dict[str, str] = {}
    for q in check_dict["quantities"]:
        try:
            measured[q["name"]] = measure(exercise.level, {**exercise.params, **q.get("params", {})},
                                          tuple(q.get("shape", shape)), q["measure"])
        except MeasureError as err:
            unmeasured[q["name"]] = str(err)
    return measured, unmeasured


def _reveal_command(exercise_id: str) -> str:
    return f"python -m gemm_course exercises reveal {exercise_id}"


def _off_step(exercise_id: str, names: Sequence[str], off: Sequence[str], right: int, try_number: int,
              named: bool) -> Step:
    """The failed step: within the counted tries it names the quantities off; after them, only how many."""
    n, k = len(names), len(off)
    if named:
        left = COUNTED_TRIES - try_number
        later_en = (f"try {try_number} of {COUNTED_TRIES}: after {'this one' if left == 0 else f'{left} more tr' + ('y' if left == 1 else 'ies')}, a "
                    "verdict says how many predictions are off but not which, and a right answer no longer counts")
        later_zh = (f"第 {try_number} 次尝试，共 {COUNTED_TRIES} 次：{'这次' if left == 0 else f'再过 {left} 次'}之后，"
                    "评分结果只说有几个预测不对而不说是哪几个，答对也不再计为完成")
        return Step("predict", False,
                    (f"1 of {n} predictions is outside its tolerance: {off[0]} ({right} within). Work it out again"
                     if k == 1 else
                     f"{k} of {n} predictions are outside their tolerance: {', '.join(off)} ({right} within). Work "
                     "those out again") + f" ({later_en}); the measured values are shown once every prediction is "
                    "within its tolerance",
                    f"{n} 个预测中有 {k} 个超出允许误差：{'、'.join(off)}（{right} 个在误差范围内）。"
                    f"请重新推算{'它' if k == 1 else '这几个'}（{later_zh}）；所有预测都落在误差范围内之后，才会显示实测值")
    return Step("predict", False,
                f"{k} of {n} predictions {'is' if k == 1 else 'are'} outside {'its' if k == 1 else 'their'} tolerance "
                f"({right} within; try {try_number}: after the first {COUNTED_TRIES} tries a verdict no longer says "
                f"which). Work them out again, or give up and see the measured values with their reasons: "
                f"{_reveal_command(exercise_id)}",
                f"{n} 个预测中有 {k} 个超出允许误差（{right} 个在误差范围内；第 {try_number} 次尝试：前 {COUNTED_TRIES} "
                f"次之后，评分结果不再指出是哪几个）。请重新推算，或者放弃并查看实测值及其原因：{_reveal_command(exercise_id)}")


def check(attempt: Attempt, check_dict: dict) -> list[Step]:
    """Measure every quantity of one "predict" check and compare; the measured values only once every
    prediction is within its tolerance. Which try this is comes from the progress file (see the module
    docstring)."""
    from . import progress

    ex = attempt.exercise
    names = [q["name"] for q in check_dict["quantities"]]
    values = parse_answer(attempt.source, [q["name"] for q in _quantities(ex)]).values
    measured, unmeasured = _measure_all(ex, check_dict)
    tries, revealed = progress.prediction_tries(ex.id)
    try_number = tries + 1
    counts = try_number <= COUNTED_TRIES and not revealed
    off = [q["name"] for q in check_dict["quantities"]
           if q["name"] in measured and not within(values[q["name"]], measured[q["name"]], q["tolerance"])]
    if off:
        return [_off_step(ex.id, names, off, len(measured) - len(off), try_number, counts)]
    if not measured:
        return [Step(q["name"], None, f"could not be measured here ({unmeasured[q['name']]})",
                     f"这里无法测量（{unmeasured[q['name']]}）") for q in check_dict["quantities"]]
    some = "measured " if unmeasured else ""
    if counts:
        when_en, when_zh = f" (try {try_number} of {COUNTED_TRIES})", f"（第 {try_number} 次尝试，共 {COUNTED_TRIES} 次）"
    else:
        why_en = "after you revealed the values" if revealed else f"after the first {COUNTED_TRIES} tries"
        why_zh = "你已查看过实测值" if revealed else f"已超过前 {COUNTED_TRIES} 次尝试"
        when_en = (f" on try {try_number}: right, but {why_en}, so your progress records it as right without "
                   "counting it as solved")
        when_zh = f"（第 {try_number} 次尝试）：答对了，但{why_zh}，所以进度中记为答对而不计为已完成"
    steps = [Step("predict", True, f"all {len(measured)} {some}predictions are within their tolerance{when_en}",
                  f"{len(measured)} 个{'已测量的' if unmeasured else ''}预测全部在允许误差之内{when_zh}")]
    for q in check_dict["quantities"]:
        name = q["name"]
        if name in unmeasured:
            steps.append(Step(name, None, f"could not be measured here ({unmeasured[name]})",
                              f"这里无法测量（{unmeasured[name]}）"))
            continue
        got, you = _show(measured[name]), _show(values[name])
        steps.append(Step(name, True,
                          f"{q['what']['en']}: you said {you}, measured {got} "
                          f"({tolerance_text(q['tolerance'], 'en')}). {q['why']['en']}",
                          f"{q['what']['zh']}：你的预测 {you}，实测 {got}（{tolerance_text(q['tolerance'], 'zh')}）。"
                          f"{q['why']['zh']}"))
    return steps


def is_prediction(exercise: Any) -> bool:
    """Whether an exercise's answer is numbers measured by "predict" checks (what reveal_lines can show)."""
    return bool(_quantities(exercise))


def reveal_lines(exercise: Any, lang: str = "en") -> list[str]:
    """Every quantity's measured value with its tolerance and the reason it is what it is, one line each, in
    one language (what `exercises reveal ID` prints after giving the exercise up)."""
    lines = []
    for check_dict in (c for c in exercise.checks if c["type"] == "predict"):
        measured, unmeasured = _measure_all(exercise, check_dict)
        for q in check_dict["quantities"]:
            name, text = q["name"], q["what"][lang]
            if name in unmeasured:
                lines.append(f"{name}: {text}: could not be measured here ({unmeasured[name]})" if lang == "en" else
                             f"{name}：{text}：这里无法测量（{unmeasured[name]}）")
                continue
            tolerance = tolerance_text(q["tolerance"], lang)
            lines.append(f"{name} = {_show(measured[name])} ({tolerance}): {text}. {q['why']['en']}" if lang == "en"
                         else f"{name} = {_show(measured[name])}（{tolerance}）：{text}。{q['why']['zh']}")
    return lines
