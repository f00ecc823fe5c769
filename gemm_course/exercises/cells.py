"""The exercise section of each level notebook, written from the registry (one source of truth).

    python -m gemm_course.exercises.cells      # rewrite every level notebook's exercise section

The section sits before the notebook's "Takeaways" (or at its end) and is made of cells tagged
"exercise": an introduction in both languages, then per exercise a title, the statement, an
editable cell holding the starter kernel, the grading call, the hint call and the folded solution.
tests/test_exercises.py checks that the notebooks match the registry.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from . import CHAPTERS, Exercise, exercises

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
TAG = "exercise"

INTRO_EN = ("## Exercises\n\n"
            "Practise this level's idea on a kernel of your own. Each exercise below shows its task, then a cell "
            "holding the starter kernel: edit it there and run the grading cell. The grader runs your kernel on "
            "the CPU (no GPU needed) on odd shapes, with out-of-bounds accesses, broken barriers and "
            "shared-memory races reported by line, and then checks what the lesson is about (sectors, bank "
            "wavefronts, the instruction mix, registers). Ask for hints one at a time (`hint(..., 2)` gives the "
            "second); the reference solution is folded at the end. From a terminal: "
            "`python -m gemm_course grade EXERCISE my_kernel.cu`.")
INTRO_ZH = ("## 练习\n\n"
            "在你自己的内核上练习本级的思路。下面每个练习先给出任务，再给出一个存放初始内核的单元格：直接在其中修改，"
            "然后运行评分单元格。评分器在 CPU 上（无需 GPU）用不规则形状运行你的内核，越界访问、屏障误用和共享内存竞争"
            "都会报出行号；随后检查本课关注的内容（扇区数、存储体轮数、指令构成、寄存器）。提示可以逐条查看"
            "（`hint(..., 2)` 给出第二条）；参考答案折叠在最后。在终端中也可以运行："
            "`python -m gemm_course grade 练习编号 my_kernel.cu`。")


def _markdown(text: str, lang: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {"tags": [f"lang-{lang}", TAG]}, "source": text.splitlines(True)}


def _code(text: str) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "metadata": {"tags": [TAG]}, "outputs": [],
            "source": text.splitlines(True)}


def exercise_cells(ex: Exercise, number: int) -> list[dict[str, Any]]:
    level = ex.number
    return [
        _markdown(f"### Exercise {level}.{number}: {ex.title_en}", "en"),
        _markdown(f"### 练习 {level}.{number}：{ex.title_zh}", "zh"),
        _code(f'gc.notebook.exercise("{ex.id}")'),
        _code(f'my_kernel = r"""{ex.starter}"""'),
        _code(f'gc.notebook.grade("{ex.id}", my_kernel)'),
        _code(f'gc.notebook.hint("{ex.id}", 1)  # 2, 3, ... for the next hints'),
        _code(f'gc.notebook.solution("{ex.id}")'),
    ]


def section(level: Any) -> list[dict[str, Any]]:
    mine = exercises(level)
    if not mine:
        return []
    cells = [_markdown(INTRO_EN, "en"), _markdown(INTRO_ZH, "zh")]
    for i, ex in enumerate(mine, 1):
        cells += exercise_cells(ex, i)
    return cells


def _is_takeaways(cell: dict[str, Any]) -> bool:
    text = "".join(cell.get("source", [])).lstrip()
    return cell["cell_type"] == "markdown" and (text.startswith("## Takeaways") or text.startswith("## 小结"))


def sync(notebook: Path) -> bool:
    """Rewrite one notebook's exercise section from the registry; True if the file changed."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    kept = [c for c in nb["cells"] if TAG not in c.get("metadata", {}).get("tags", [])]
    where = next((i for i, c in enumerate(kept) if _is_takeaways(c)), len(kept))
    nb["cells"] = kept[:where] + section(notebook.stem) + kept[where:]
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if text == notebook.read_text(encoding="utf-8"):
        return False
    notebook.write_text(text, encoding="utf-8")
    return True


def main() -> None:
    from ..levels import levels

    for level in [*(lv.id for lv in levels()), *CHAPTERS]:
        path = NOTEBOOK_DIR / f"{level}.ipynb"
        if path.exists() and sync(path):
            print(f"updated {path.name}")


if __name__ == "__main__":
    sys.exit(main())
