"""The exercise section of each level notebook, written from the registry (one source of truth).

    python -m gemm_course.exercises.cells      # rewrite every level notebook's exercise section
    python -m gemm_course.exercises.cells --starters   # only the starter cells, in place, from starter.*

The section sits before the notebook's "Takeaways" (or at its end) and is made of cells tagged
"exercise": an introduction in both languages, then per exercise a title, the statement, an
editable cell holding the starter kernel, the grading call (run in a notebook and by the tests, not by the
book build), the hint call and the folded solution.
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
            "Practise this level's idea on a kernel of your own. Each exercise shows its task, then a cell holding "
            "the starter: edit it there and run the grading cell. The grader runs your kernel on the CPU (no GPU "
            "needed) on odd shapes, whole tiles, several blocks in each direction and one random shape per run (the "
            "verdict prints its seed), with out-of-bounds accesses, broken barriers, unawaited copies and "
            "shared-memory races reported by line. Then it measures what the lesson is about (sectors, bank "
            "wavefronts, bytes fetched per block, barriers per tile, the instruction mix, registers) in several "
            "blocks at two shapes. A prediction exercise asks for numbers first and measures them afterwards. Where "
            "a check needs a GPU and there is none, the verdict says *not verified* instead of passing. Ask for "
            "hints one at a time (`hint(..., 2)` gives the second); the reference solution is folded at the end, and "
            "`progress()` shows what you have solved. From a terminal: `python -m gemm_course exercises show "
            "EXERCISE`, then `python -m gemm_course grade EXERCISE my_kernel.cu`.")
INTRO_ZH = ("## 练习\n\n"
            "在你自己的内核上练习本级的思路。每个练习先给出任务，再给出一个存放初始代码的单元格：直接在其中修改，然后运行"
            "评分单元格。评分器在 CPU 上（无需 GPU）运行你的内核：不规则形状、整块的形状、每个方向都有多个线程块的形状，"
            "外加每次运行随机抽取的一个形状（评语会给出它的随机种子）；越界访问、屏障误用、没有等待的异步拷贝和共享内存"
            "竞争都会报出行号。随后它在两个形状的多个线程块中测量本课关注的内容（扇区数、存储体波前数、每个线程块读取的"
            "字节数、每个分块的屏障数、指令构成、寄存器）。预测类练习先让你给出数字，再去测量。某项检查需要 GPU 而这里没有"
            "时，评语会写“未验证”，而不是“通过”。提示可以逐条查看（`hint(..., 2)` 给出第二条）；参考答案折叠在最后，"
            "`progress()` 显示你已完成的练习。在终端中：先运行 `python -m gemm_course exercises show 练习编号`，再运行 "
            "`python -m gemm_course grade 练习编号 my_kernel.cu`。")


def _markdown(text: str, lang: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {"tags": [f"lang-{lang}", TAG]}, "source": text.splitlines(True)}


# The book build does not run the grading cells (each grades a starter, seconds of CPU time, and the page
# needs no verdict of a kernel nobody wrote yet); a reader's notebook and the tests (nbval) run them.
NOT_IN_THE_BOOK = "skip-execution"


def _code(text: str, *tags: str) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "metadata": {"tags": [TAG, *tags]}, "outputs": [],
            "source": text.splitlines(True)}


def answer_variable(ex: Exercise) -> str:
    """The notebook variable that holds the learner's answer: a kernel, or another kind of answer."""
    return "my_kernel" if ex.answer_suffix == ".cu" else "my_answer"


def exercise_cells(ex: Exercise, number: int) -> list[dict[str, Any]]:
    level = ex.number
    return [
        _markdown(f"### Exercise {level}.{number}: {ex.title_en}", "en"),
        _markdown(f"### 练习 {level}.{number}：{ex.title_zh}", "zh"),
        _code(f'gc.notebook.exercise("{ex.id}")'),
        _code(f'{answer_variable(ex)} = r"""{ex.starter}"""'),
        _code(f'gc.notebook.grade("{ex.id}", {answer_variable(ex)})', NOT_IN_THE_BOOK),
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
    return cells + [_code(f'gc.notebook.progress("{mine[0].level}")  # your exercises of this level so far')]


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


def starters(notebook: Path) -> bool:
    """Rewrite only the starter cells of one notebook from the exercises' starter files, where they stand and
    with their tags (after an edit of a starter's comments); True if the file changed."""
    from . import get_exercise

    nb = json.loads(notebook.read_text(encoding="utf-8"))
    current = None
    for cell in nb["cells"]:
        text = "".join(cell.get("source", []))
        if cell["cell_type"] != "code" or TAG not in cell.get("metadata", {}).get("tags", []):
            continue
        if text.startswith('gc.notebook.exercise("'):
            current = get_exercise(text.split('"')[1])
        elif current is not None and text.startswith(f'{answer_variable(current)} = r"""'):
            cell["source"] = f'{answer_variable(current)} = r"""{current.starter}"""'.splitlines(True)
            current = None
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if text == notebook.read_text(encoding="utf-8"):
        return False
    notebook.write_text(text, encoding="utf-8")
    return True


def main() -> int:
    from ..levels import levels

    args = sys.argv[1:]
    if any(a != "--starters" for a in args):  # --help, or an argument unknown: no rewrite of every section
        print(__doc__)
        return 0 if {"-h", "--help"} & set(args) else 2
    update = starters if "--starters" in args else sync
    for level in [*(lv.id for lv in levels()), *CHAPTERS]:
        path = NOTEBOOK_DIR / f"{level}.ipynb"
        if path.exists() and update(path):
            print(f"updated {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
