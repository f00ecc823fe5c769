"""The "why faster" box at the top of Levels 12 and 13, as Levels 1-11 have (tests/test_level_boxes.py):
right after the title, twin lang-en / lang-zh cells, one MyST admonition each, every number recomputed
here from the recorded files, and nothing else numeric in them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from test_prose_level12 import MAIN, _row  # tests/ is on sys.path (rootdir-less test modules)
from test_prose_level13 import R, cublaslt, fr, step

REPO = Path(__file__).resolve().parents[1]
TITLES = {"en": "Why faster", "zh": "为什么更快"}
# spellings that hold digits but are names, not numbers: H200, bf16, FP8, C, α-β
NAMES = re.compile(r"H200s?|bf16|FP8|fp8|sm_\d+")


def _box(notebook: str) -> dict[str, str]:
    cells = json.loads((REPO / "notebooks" / f"{notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
    assert "".join(cells[0]["source"]).startswith("# Level")
    boxes = {}
    for cell, lang in zip(cells[1:3], ("en", "zh")):
        text = "".join(cell["source"])
        assert cell["cell_type"] == "markdown" and cell["metadata"].get("tags") == [f"lang-{lang}"]
        assert text.startswith(f"```{{admonition}} {TITLES[lang]}\n:class: tip\n") and text.rstrip().endswith("```")
        boxes[lang] = text
    return boxes


def _numbers(text: str) -> list[str]:
    body = NAMES.sub(" ", text.split("\n", 2)[2])
    return re.findall(r"\d+(?:\.\d+)?", body)


def _expected(notebook: str) -> list[str]:
    if notebook == "12_multi_gpu":
        one, two = (_row(MAIN, "row split", p, 16384)["tflops"] for p in (1, 2))
        return [f"{two:.2f}", "16384", "2", f"{two / one:.2f}", f"{one:.2f}", "2"]
    lt4, bf4, pt4 = cublaslt(4096, True), fr.cublas_bf16(R, (4096,) * 3), step(4096, "per_tensor_256")
    return ["4096", f"{pt4['tflops']:.1f}", f"{pt4['tflops'] / bf4['tflops']:.2f}", f"{bf4['tflops']:.1f}",
            f"{lt4['tflops']:.1f}", f"{lt4['tflops'] / bf4['tflops']:.2f}", "32", "16"]


@pytest.mark.parametrize("notebook", ["12_multi_gpu", "13_fp8_blockscaled"])
def test_the_box_quotes_the_recorded_numbers_and_nothing_else(notebook):
    boxes, want = _box(notebook), _expected(notebook)
    assert _numbers(boxes["en"]) == want, boxes["en"]
    assert sorted(_numbers(boxes["zh"])) == sorted(want), boxes["zh"]
