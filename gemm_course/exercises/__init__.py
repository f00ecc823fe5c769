"""Exercises: one folder per exercise, the registry that reads them, and the grader (grade.py).

Each folder under gemm_course/exercises/ holds
    exercise.json   id, level, kind (write / fix / design / predict), the level's parameters the kernel
                    is launched with, title, statement and hints in English and Chinese, the checks;
                    optionally "runner" (how the answer is run: by default "level_kernel", the level's
                    kernel on the CPU backend, or "tensor_core" for a Tensor Core level; the others
                    are listed in grade.RUNNERS)
    starter.cu      the kernel the learner starts from (a copy of the level's file with gaps or a bug;
                    starter.txt for an answer that is not a kernel, e.g. a prediction)
    solution.cu     a reference solution (solution.txt likewise)

An exercise's level is a level of the registry (levels.py), or one of the chapters outside it
(CHAPTERS: Level 0, the CUDA basics; Level 12, several GPUs; Level 13, FP8; Level 14, Triton and
Gluon), whose exercises name their own runner.

The grader runs the learner's kernel through the CPU backend on odd shapes (no GPU needed), with
the race detector on, then the checks the lesson is about: the warp access profile (sectors per
global request, bank wavefronts per shared instruction: `warp_access`), the instruction mix of the
GPU build (`sass`), the compile report (registers, spills). Tensor Core exercises, whose
instructions the CPU cannot run, are graded by their index math (the named integer functions the
kernel calls, run on the CPU over every lane, register and stage: `index_math`), their GPU build's
instruction mix, and on a GPU by a run as well.

    python -m gemm_course exercises [--level 3] [--json]
    python -m gemm_course grade 02_missing_barrier my_kernel.cu
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..levels import get_level, levels

EXERCISE_DIR = Path(__file__).parent
KINDS = ("write", "fix", "design", "predict")

# Chapters with exercises that are not levels of the registry: id -> (number, English title, Chinese title).
CHAPTERS: dict[str, tuple[int, str, str]] = {
    "00_cuda_basics": (0, "The CUDA programming model", "CUDA 编程模型"),
    "12_multi_gpu": (12, "One GEMM on several GPUs", "多 GPU 上的 GEMM"),
    "13_fp8_blockscaled": (13, "FP8 with fine-grained scales", "细粒度缩放的 FP8"),
    "14_triton_gluon": (14, "The same GEMM in Triton and Gluon", "用 Triton 和 Gluon 写同一个 GEMM"),
}


def level_id(level: Any) -> str:
    """The id of a registry level or of a chapter in CHAPTERS (by id, number or short name)."""
    for cid, (number, _, _) in CHAPTERS.items():
        if level in (cid, number, cid.split("_", 1)[1]) or str(level) == str(number) or \
                (isinstance(level, str) and level.isdigit() and int(level) == number):
            return cid
    try:
        return get_level(level).id
    except ValueError:
        known = sorted([*CHAPTERS, *(lv.id for lv in levels())])
        raise ValueError(f"unknown level {level!r}; levels with exercises: {', '.join(known)}") from None


def level_number(level: str) -> int:
    return CHAPTERS[level][0] if level in CHAPTERS else get_level(level).number


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
    runner: str = "level_kernel"
    data: Optional[dict] = None          # the whole exercise.json, for runners and checks that need more

    @property
    def number(self) -> int:
        """The level's number (0 to 14)."""
        return level_number(self.level)

    def _file(self, stem: str) -> Path:
        found = [p for p in (self.folder / f"{stem}.cu", self.folder / f"{stem}.txt") if p.is_file()]
        if not found:
            raise FileNotFoundError(f"{self.folder}: no {stem}.cu or {stem}.txt")
        return found[0]

    @property
    def starter(self) -> str:
        return self._file("starter").read_text(encoding="utf-8")

    @property
    def solution(self) -> str:
        return self._file("solution").read_text(encoding="utf-8")

    @property
    def answer_suffix(self) -> str:
        """".cu" for a kernel, ".txt" for another kind of answer (a prediction, a Python function)."""
        return self._file("starter").suffix

    def as_row(self) -> dict[str, Any]:
        return {"id": self.id, "level": self.level, "number": self.number, "kind": self.kind, "title_en": self.title_en,
                "title_zh": self.title_zh, "params": self.params, "checks": [c["type"] for c in self.checks],
                "hints": len(self.hints)}


def _load(folder: Path) -> Exercise:
    data = json.loads((folder / "exercise.json").read_text(encoding="utf-8"))
    if data["id"] != folder.name:
        raise ValueError(f"{folder}: its exercise.json says id {data['id']!r}; the folder name must match")
    if data["kind"] not in KINDS:
        raise ValueError(f"{folder}: kind must be one of {KINDS}")
    level = level_id(data["level"])
    if level in CHAPTERS:
        runner = data.get("runner")
        if not runner:
            raise ValueError(f"{folder}: level {level} is not in the registry; name a runner")
    else:
        lv = get_level(level)
        lv.resolve(**data.get("params", {}))  # the setting must be valid
        runner = data.get("runner", "tensor_core" if lv.uses_tensor_cores else "level_kernel")
    return Exercise(data["id"], level, data["kind"], data.get("params", {}), data["title"]["en"], data["title"]["zh"],
                    data["statement"]["en"], data["statement"]["zh"],
                    tuple((h["en"], h["zh"]) for h in data.get("hints", [])), tuple(data.get("checks", [])), folder,
                    runner, data)


@functools.lru_cache(maxsize=1)
def _all() -> tuple[Exercise, ...]:
    folders = sorted(p for p in EXERCISE_DIR.iterdir() if (p / "exercise.json").is_file())
    return tuple(sorted((_load(f) for f in folders), key=lambda e: (e.number, e.id)))


def exercises(level: Optional[Any] = None) -> list[Exercise]:
    """Every exercise, in level order (one level's if given: id, number or short name)."""
    if level is None:
        return list(_all())
    wanted = level_id(level)
    return [e for e in _all() if e.level == wanted]


def get_exercise(exercise_id: str) -> Exercise:
    for e in _all():
        if e.id == exercise_id:
            return e
    raise ValueError(unknown_exercise(exercise_id))


def close_ids(exercise_id: Any) -> list[str]:
    """Up to three exercise ids close to a mistyped one (02_missing_barier, missing_barrier, 2_missing...)."""
    import difflib

    text, ids = str(exercise_id), [e.id for e in _all()]
    return difflib.get_close_matches(text, ids, n=3, cutoff=0.5) or [i for i in ids if text and text in i][:3]


def unknown_exercise(exercise_id: Any, lang: Optional[str] = None) -> str:
    """One line, in the reader's language (lang, else the one in force), for an id that names no exercise:
    the closest ids, and where they are all listed."""
    from gemm_course.bilingual.text import plain

    close = close_ids(exercise_id)
    en = (f"no exercise {exercise_id!r}" + (f": did you mean {' or '.join(close)}?" if close else "")
          + " (`python -m gemm_course exercises` lists them)")
    zh = (f"没有练习 {exercise_id!r}" + (f"：是不是 {' 或 '.join(close)}？" if close else "")
          + "（`python -m gemm_course exercises` 列出全部练习）")
    return {"en": en, "zh": zh}.get(lang or "", None) or plain(en, zh)


from ..bilingual.text import one_language_errors  # noqa: E402
from .grade import Verdict, grade  # noqa: E402  (the grader needs the registry above)

grade = one_language_errors(grade)  # an unknown exercise or a wrong argument, in the language in force

__all__ = ["CHAPTERS", "Exercise", "Verdict", "exercises", "get_exercise", "grade", "level_id"]
