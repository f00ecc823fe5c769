"""Exercises: one folder per exercise, the registry that reads them, and the grader (grade.py).

Each folder under gemm_course/exercises/ holds
    exercise.json   id, level, kind (write / fix / design), the level's parameters the kernel is
                    launched with, title, statement and hints in English and Chinese, the checks
    starter.cu      the kernel the learner starts from (a copy of the level's file with gaps or a bug)
    solution.cu     a reference solution

The grader runs the learner's kernel through the CPU backend on odd shapes (no GPU needed), with
the race detector on, then the checks the lesson is about: the warp access profile (sectors per
global request, bank wavefronts per shared instruction: `warp_access`), the instruction mix of the
GPU build (`sass`), the compile report (registers, spills). Tensor Core exercises, whose
instructions the CPU cannot run, are graded by their GPU build's instruction mix and compile
report, and on a GPU by a run as well.

    python -m gemm_course exercises [--level 3] [--json]
    python -m gemm_course grade 02_missing_barrier my_kernel.cu
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..levels import get_level

EXERCISE_DIR = Path(__file__).parent
KINDS = ("write", "fix", "design")


@dataclass(frozen=True)
class Exercise:
    id: str
    level: str
    kind: str
    params: dict
    title_en: str
    title_zh: str
    statement_en: str
    statement_zh: str
    hints: tuple[tuple[str, str], ...]   # (english, chinese), in the order to reveal them
    checks: tuple[dict, ...]
    folder: Path

    @property
    def starter(self) -> str:
        return (self.folder / "starter.cu").read_text(encoding="utf-8")

    @property
    def solution(self) -> str:
        return (self.folder / "solution.cu").read_text(encoding="utf-8")

    def as_row(self) -> dict[str, Any]:
        return {"id": self.id, "level": self.level, "kind": self.kind, "title_en": self.title_en,
                "title_zh": self.title_zh, "params": self.params, "checks": [c["type"] for c in self.checks],
                "hints": len(self.hints)}


def _load(folder: Path) -> Exercise:
    data = json.loads((folder / "exercise.json").read_text(encoding="utf-8"))
    if data["id"] != folder.name:
        raise ValueError(f"{folder}: its exercise.json says id {data['id']!r}; the folder name must match")
    if data["kind"] not in KINDS:
        raise ValueError(f"{folder}: kind must be one of {KINDS}")
    lv = get_level(data["level"])
    lv.resolve(**data.get("params", {}))  # the setting must be valid
    return Exercise(data["id"], lv.id, data["kind"], data.get("params", {}), data["title"]["en"], data["title"]["zh"],
                    data["statement"]["en"], data["statement"]["zh"],
                    tuple((h["en"], h["zh"]) for h in data.get("hints", [])), tuple(data.get("checks", [])), folder)


@functools.lru_cache(maxsize=1)
def _all() -> tuple[Exercise, ...]:
    folders = sorted(p for p in EXERCISE_DIR.iterdir() if (p / "exercise.json").is_file())
    return tuple(sorted((_load(f) for f in folders), key=lambda e: (get_level(e.level).number, e.id)))


def exercises(level: Optional[Any] = None) -> list[Exercise]:
    """Every exercise, in level order (one level's if given: id, number or short name)."""
    if level is None:
        return list(_all())
    lv = get_level(level)
    return [e for e in _all() if e.level == lv.id]


def get_exercise(exercise_id: str) -> Exercise:
    for e in _all():
        if e.id == exercise_id:
            return e
    raise ValueError(f"no exercise {exercise_id!r}; `python -m gemm_course exercises` lists them")


from .grade import Verdict, grade  # noqa: E402  (the grader needs the registry above)

__all__ = ["Exercise", "Verdict", "exercises", "get_exercise", "grade"]
