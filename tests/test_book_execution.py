"""How the book build executes the notebooks (myst-nb through nbclient).

Cells that build live widget panels (gc.widgets) show nothing in the book (remove-output: sliders need a
live kernel) and are not executed by the book build (skip-execution), nor by nbval (nbval-skip: the two run the
same cells, so .ci/run can build the book from the notebooks nbval executed; the widgets and the grading of an
exercise's starter are tested in tests/, not in the notebooks). nbclient answers an Output widget's messages on the kernel's shell socket, the socket it is
waiting on for the cell's reply; a build was seen waiting at such a cell with the kernel idle, until the
cell timeout (600 s), for an output the page drops anyway.
"""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_widget_cells_are_left_out_of_the_book_build(path):
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "code" and "gc.widgets." in cell.source:
            tags = cell.metadata.get("tags", [])
            assert "remove-output" in tags and "skip-execution" in tags, (
                f"{path.name} cell {i}: a widget cell needs the tags remove-output and skip-execution")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_nbval_runs_the_cells_the_book_runs(path):
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "code":
            tags = set(cell.metadata.get("tags", []))
            assert ("skip-execution" in tags) == ("nbval-skip" in tags), (
                f"{path.name} cell {i}: tag it both skip-execution and nbval-skip, or neither")
