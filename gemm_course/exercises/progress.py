"""Your progress through the exercises: one small JSON file that the command line and the notebooks
update each time they grade an answer, and read for `python -m gemm_course exercises --status`.

Where it lives: $GEMM_COURSE_PROGRESS if set, else $XDG_STATE_HOME/gemm_course/progress.json (by
default ~/.local/state/gemm_course/progress.json). Per exercise it keeps (ROW_FIELDS)

    best                    the best status that counts ("solved" beats "not_verified" beats "failed")
    last, attempts          the last status, and how many gradings were recorded
    seed, time              the seed and time of the last grading
    last_pass_seed_chosen   the last grading that passed used a seed you chose (--seed): it did not count,
                            since a chosen seed can pick the one shape a wrong answer gets right
    tries                   prediction exercises: gradings that compared the predictions with measurements
    late_pass               prediction exercises: right after the first predict.COUNTED_TRIES tries, or after
                            revealing the values: shown as right, not counted as solved
    revealed                prediction exercises: you gave up and saw the measured values (exercises reveal ID)

Only a regular file of at most MAX_BYTES is read (a device, a folder or a pipe is refused in one line).
A row with a malformed field is reported in one line and ignored (left in the file as it is, until the
exercise is graded again). A file that cannot be read or written is reported in one line and left
alone: grading never fails because of it, and its exit code is the verdict's.
"""
from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any, Optional

PROGRESS_ENV = "GEMM_COURSE_PROGRESS"
MAX_BYTES = 1 << 20  # a file for every exercise many times over; a larger one is not this file
RANK = {"failed": 0, "not_verified": 1, "solved": 2}
LABELS = {"solved": ("solved", "已完成"), "not_verified": ("compiled, not verified without a GPU", "已编译，没有 GPU 无法验证"),
          "failed": ("not solved yet", "尚未完成"), None: ("not tried", "未尝试")}

# Each field of a row: (the test its value must pass, what it must be in English, in Chinese, its default or
# REQUIRED).
REQUIRED = object()
_STATUS = lambda v: v in RANK  # noqa: E731
_COUNT = lambda v: type(v) is int and v >= 0  # noqa: E731
_FLAG = lambda v: type(v) is bool  # noqa: E731
ROW_FIELDS: dict[str, tuple[Any, str, str, Any]] = {
    "best": (_STATUS, "solved, not_verified or failed", "solved、not_verified 或 failed", REQUIRED),
    "last": (lambda v: v is None or v in RANK, "solved, not_verified, failed or null", "solved、not_verified、failed 或 null",
             None),
    "attempts": (_COUNT, "a whole number ≥ 0", "不小于 0 的整数", REQUIRED),
    "seed": (lambda v: v is None or type(v) is int, "a whole number or null", "整数或 null", None),
    "time": (lambda v: v is None or isinstance(v, str), "text or null", "文本或 null", None),
    "last_pass_seed_chosen": (_FLAG, "true or false", "true 或 false", False),
    "tries": (_COUNT, "a whole number ≥ 0", "不小于 0 的整数", 0),
    "late_pass": (_FLAG, "true or false", "true 或 false", False),
    "revealed": (_FLAG, "true or false", "true 或 false", False),
}


class ProgressError(ValueError):
    """The progress file cannot be used at all (not a regular file, too large, not JSON): en, zh, one line each;
    str() is both, in the course's "English / 中文" form."""

    def __init__(self, en: str, zh: str):
        super().__init__(f"{en} / {zh}")
        self.en, self.zh = en, zh


def progress_path() -> Path:
    env = os.environ.get(PROGRESS_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "gemm_course" / "progress.json"


def _unusable(path: Path, en: str, zh: str) -> ProgressError:
    return ProgressError(f"cannot use the progress file {path}: {en}; fix or delete it, or point {PROGRESS_ENV} at "
                         "another file", f"无法使用进度文件 {path}：{zh}；请修复或删除它，或者用 {PROGRESS_ENV} 指定另一个文件")


def _file_kind(mode: int) -> tuple[str, str]:
    for test, en, zh in ((stat.S_ISDIR, "a folder", "文件夹"), (stat.S_ISCHR, "a character device", "字符设备"),
                         (stat.S_ISBLK, "a block device", "块设备"), (stat.S_ISFIFO, "a pipe", "管道"),
                         (stat.S_ISSOCK, "a socket", "套接字")):
        if test(mode):
            return en, zh
    return "not a regular file", "不是普通文件"


def _read_text(path: Path) -> Optional[bytes]:
    """The file's bytes; None when there is none. Opened without blocking (a pipe with no writer would wait
    for ever) and checked on the open file, so what is read is what was checked."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as err:
        raise _unusable(path, f"it cannot be opened ({err.strerror})", f"无法打开（{err.strerror}）") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            en, zh = _file_kind(mode)
            raise _unusable(path, f"it is {en}, not a regular file", f"它是{zh}，不是普通文件")
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            raise _unusable(path, f"it is larger than {MAX_BYTES >> 20} MB, far more than any progress",
                            f"它大于 {MAX_BYTES >> 20} MB，远超任何进度记录的大小")
        return b"".join(chunks)
    except OSError as err:
        raise _unusable(path, f"it cannot be read ({err.strerror})", f"无法读取（{err.strerror}）") from None
    finally:
        os.close(fd)


def row_problem(row: Any) -> Optional[tuple[str, str]]:
    """What is wrong with one row (English, Chinese), or None."""
    if not isinstance(row, dict):
        return "not a table of fields", "不是字段表"
    for name, (valid, want_en, want_zh, default) in ROW_FIELDS.items():
        if name not in row:
            if default is REQUIRED:
                return f"no {name}", f"缺少 {name}"
            continue
        if not valid(row[name]):
            return f"{name} must be {want_en}, not {json.dumps(row[name])[:40]}", \
                f"{name} 应为{want_zh}，而不是 {json.dumps(row[name], ensure_ascii=False)[:40]}"
    return None


def _complete(row: dict) -> dict:
    return {**{k: d for k, (_, _, _, d) in ROW_FIELDS.items() if d is not REQUIRED}, **row}


def _read() -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[tuple[str, str, str]]]:
    """(the file's table as it is, its valid rows with every field, the rows ignored: (id, English, Chinese)).
    Raises ProgressError when the file cannot be used at all."""
    path = progress_path()
    data = _read_text(path)
    if data is None:
        return {}, {}, []
    try:
        table = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise _unusable(path, "it is not UTF-8 text", "它不是 UTF-8 文本") from None
    except ValueError as err:
        raise _unusable(path, f"it is not JSON ({err})", f"它不是 JSON（{err}）") from None
    if not isinstance(table, dict):
        raise _unusable(path, "it holds no table of exercises", "其中没有练习表")
    rows, ignored = {}, []
    for exercise_id, row in table.items():
        problem = row_problem(row)
        if problem:
            ignored.append((exercise_id, *problem))
        else:
            rows[exercise_id] = _complete(row)
    return table, rows, ignored


def _ignored_line(ignored: list[tuple[str, str, str]]) -> Optional[str]:
    """One line, both languages, naming the rows ignored (the first three) and what to do; None when none were."""
    if not ignored:
        return None
    path, shown, n = progress_path(), ignored[:3], len(ignored)
    more_en = f" and {n - 3} more" if n > 3 else ""
    more_zh = f"等 {n} 条" if n > 3 else ""
    return (f"progress file {path}: ignored {n} malformed row{'s' if n > 1 else ''} ("
            + "; ".join(f"{i}: {en}" for i, en, _ in shown) + f"{more_en}); fix or delete "
            f"{'them' if n > 1 else 'it'}, or grade the exercise again to start its row afresh / "
            f"进度文件 {path}：忽略了 {n} 条格式不对的记录（" + "；".join(f"{i}：{zh}" for i, _, zh in shown)
            + f"{more_zh}）；请修复或删除，或者重新评分该练习以重建这条记录")


def read() -> tuple[dict[str, dict[str, Any]], Optional[str]]:
    """(exercise id -> its row with every field of ROW_FIELDS, a one-line warning about rows ignored or None).
    Raises ProgressError (one line) when the file cannot be used at all."""
    _, rows, ignored = _read()
    return rows, _ignored_line(ignored)


def load() -> dict[str, dict[str, Any]]:
    """Exercise id -> its row (every field of ROW_FIELDS); empty when there is no file yet. Malformed rows are
    left out; ProgressError when the file cannot be used at all."""
    return read()[0]


def _new_row() -> dict[str, Any]:
    return _complete({"best": "failed", "attempts": 0})


def _write(table: dict[str, Any], path: Path) -> Optional[str]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        return (f"progress not saved: cannot write {path} ({err.strerror}); set {PROGRESS_ENV} to a writable file"
                f" / 进度未保存：无法写入 {path}（{err.strerror}）；请把 {PROGRESS_ENV} 设为一个可写的文件")
    return None


def _update(exercise_id: str, change: Any) -> Optional[str]:
    """Read the file, change(row) one exercise's row (a fresh one where it had none or a malformed one), write
    it back. Returns None, or one line (both languages) saying what went wrong or which rows were ignored."""
    path = progress_path()
    try:
        table, rows, ignored = _read()
    except ProgressError as err:
        return f"progress not saved: {err.en} / 进度未保存：{err.zh}"
    row = rows.get(exercise_id) or _new_row()
    change(row)
    table[exercise_id] = row
    return _write(table, path) or _ignored_line([i for i in ignored if i[0] != exercise_id])


def prediction_tries(exercise_id: str) -> tuple[int, bool]:
    """(the prediction tries recorded for an exercise, whether its values were revealed); (0, False) when the
    file has no row for it or cannot be read (then nothing will be recorded either)."""
    try:
        row = load().get(exercise_id)
    except ProgressError:
        return 0, False
    return (row["tries"], row["revealed"]) if row else (0, False)


def record(verdict: Any) -> Optional[str]:
    """Add one graded attempt. Returns None, or a one-line warning when the file could not be written (or had
    rows that were ignored).

    What counts: a pass raises `best`, except a pass with a seed you chose (Verdict.seed_chosen; recorded in
    last_pass_seed_chosen) and a right prediction after the first predict.COUNTED_TRIES tries or after the
    values were revealed (recorded in late_pass)."""
    from .predict import COUNTED_TRIES

    status = verdict.status
    chosen = bool(getattr(verdict, "seed_chosen", False))
    # A try is a grading that compared predictions with measurements (not one refused for its form).
    predicted = any(step.name == "predict" and step.passed is not None for step in verdict.steps)

    def change(row: dict[str, Any]) -> None:
        counts = True
        if predicted:
            late = row["tries"] >= COUNTED_TRIES or row["revealed"]
            row["tries"] += 1
            if late and status != "failed":
                row["late_pass"], counts = True, False
        if status != "failed":
            row["last_pass_seed_chosen"] = chosen
            counts = counts and not chosen
        row.update(last=status, attempts=row["attempts"] + 1, seed=verdict.seed, time=time.strftime("%Y-%m-%d %H:%M:%S"))
        if counts and RANK[status] > RANK[row["best"]]:
            row["best"] = status

    return _update(verdict.exercise, change)


def record_reveal(exercise_id: str) -> Optional[str]:
    """Mark a prediction exercise given up (its measured values shown): a right answer after it does not count."""
    return _update(exercise_id, lambda row: row.update(revealed=True))


def note(row: dict[str, Any], lang: str = "en") -> str:
    """Why a row is not solved although an answer passed or the exercise was given up; "" when none applies."""
    from .predict import COUNTED_TRIES

    if row.get("best") == "solved":
        return ""
    if row.get("revealed"):
        return "gave up: the measured values were shown" if lang == "en" else "已放弃：已查看实测值"
    if row.get("late_pass"):
        return (f"right after the first {COUNTED_TRIES} tries: not counted as solved" if lang == "en"
                else f"在前 {COUNTED_TRIES} 次尝试之后才答对：不计为已完成")
    if row.get("last_pass_seed_chosen"):
        return ("passed with a seed you chose: grade again without --seed to count it" if lang == "en"
                else "用你指定的随机种子通过：不加 --seed 再评分一次才算数")
    return ""


def status_rows(level: Any = None, done: Optional[dict[str, dict[str, Any]]] = None) -> list[dict[str, Any]]:
    """One row per exercise (one level's if given): id, level number, titles, best and last status, attempts,
    and the note (note_en, note_zh) on a pass that did not count. done: the rows of read() (default: load())."""
    from . import exercises

    done = load() if done is None else done
    rows = []
    for ex in exercises(level):
        mine = done.get(ex.id, {})
        rows.append({"id": ex.id, "number": ex.number, "kind": ex.kind, "title_en": ex.title_en,
                     "title_zh": ex.title_zh, "best": mine.get("best"), "last": mine.get("last"),
                     "attempts": int(mine.get("attempts", 0)), "note_en": note(mine, "en"), "note_zh": note(mine, "zh")})
    return rows


def summary_line(rows: list[dict[str, Any]], lang: str = "en") -> str:
    solved = sum(r["best"] == "solved" for r in rows)
    unverified = sum(r["best"] == "not_verified" for r in rows)
    if lang == "zh":
        return f"共 {len(rows)} 个练习：已完成 {solved} 个，已编译但未验证 {unverified} 个"
    return f"{solved} of {len(rows)} exercises solved, {unverified} compiled but not verified without a GPU"
