"""Your progress through the exercises: one small JSON file that the command line and the notebooks
update each time they grade an answer, and read for `python -m gemm_course exercises --status`.

Where it lives: $GEMM_COURSE_PROGRESS if set, else $XDG_STATE_HOME/gemm_course/progress.json (by
default ~/.local/state/gemm_course/progress.json). Per exercise it keeps the best status reached
("solved" beats "not_verified" beats "failed"), the last one, the number of attempts and the seed and
time of the last attempt. A file that cannot be read or written is reported in one line and left alone:
grading never fails because of it.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Optional

PROGRESS_ENV = "GEMM_COURSE_PROGRESS"
RANK = {"failed": 0, "not_verified": 1, "solved": 2}
LABELS = {"solved": ("solved", "已完成"), "not_verified": ("compiled, not verified without a GPU", "已编译，没有 GPU 无法验证"),
          "failed": ("not solved yet", "尚未完成"), None: ("not tried", "未尝试")}


def progress_path() -> Path:
    env = os.environ.get(PROGRESS_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "gemm_course" / "progress.json"


def load() -> dict[str, dict[str, Any]]:
    """Exercise id -> {"best", "last", "attempts", "seed", "time"}; empty when there is no file yet."""
    path = progress_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read the progress file {path} ({err}); fix or delete it, or point "
                         f"{PROGRESS_ENV} at another file / 无法读取进度文件 {path}（{err}）；请修复或删除它，"
                         f"或者用 {PROGRESS_ENV} 指定另一个文件") from None
    return data if isinstance(data, dict) else {}


def record(verdict: Any) -> Optional[str]:
    """Add one graded attempt. Returns None, or a one-line warning when the file could not be written."""
    path = progress_path()
    try:
        data = load()
    except ValueError as err:
        return str(err)
    row = data.get(verdict.exercise, {"best": "failed", "attempts": 0})
    status = verdict.status
    row.update(last=status, attempts=int(row.get("attempts", 0)) + 1, seed=verdict.seed,
               time=time.strftime("%Y-%m-%d %H:%M:%S"))
    if RANK[status] > RANK.get(row.get("best", "failed"), 0) or row["attempts"] == 1:
        row["best"] = status
    data[verdict.exercise] = row
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        return (f"progress not saved: cannot write {path} ({err.strerror}); set {PROGRESS_ENV} to a writable file"
                f" / 进度未保存：无法写入 {path}（{err.strerror}）；请把 {PROGRESS_ENV} 设为一个可写的文件")
    return None


def status_rows(level: Any = None) -> list[dict[str, Any]]:
    """One row per exercise (one level's if given): id, level number, titles, best and last status, attempts."""
    from . import exercises

    done = load()
    rows = []
    for ex in exercises(level):
        mine = done.get(ex.id, {})
        rows.append({"id": ex.id, "number": ex.number, "kind": ex.kind, "title_en": ex.title_en,
                     "title_zh": ex.title_zh, "best": mine.get("best"), "last": mine.get("last"),
                     "attempts": int(mine.get("attempts", 0))})
    return rows


def summary_line(rows: list[dict[str, Any]], lang: str = "en") -> str:
    solved = sum(r["best"] == "solved" for r in rows)
    unverified = sum(r["best"] == "not_verified" for r in rows)
    if lang == "zh":
        return f"共 {len(rows)} 个练习：已完成 {solved} 个，已编译但未验证 {unverified} 个"
    return f"{solved} of {len(rows)} exercises solved, {unverified} compiled but not verified without a GPU"
