"""``python -m depthutils student OUT``: the chapters as a student gets them, solutions stripped.

The book's chapters are the instructor's copy: every exercise is followed by its solution, collapsed on
the web page but in plain view in the notebook a student opens. The student copy keeps every exercise,
its task and its checker cell, and drops:

* every ``{solution-start}`` … ``{solution-end}`` span of cells (implement-it solutions: the reference
  code that ``exercises.show`` prints and the check that runs it);
* every ``{solution}`` block inside a Markdown cell (the prediction exercises' answers, glued from the run);
* every output, so that no figure or number of the instructor's run gives an answer away.

The chapters in ``chapters/`` are not changed.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

from depthutils.book.chapters import CHAPTER_DIR, chapters
from depthutils.core.errors import DepthError

#: a ``{solution}`` directive block in Markdown: from its opening fence to the matching closing fence
SOLUTION_BLOCK = re.compile(r"^(`{3,}|:{3,})\{solution\}[^\n]*\n.*?^\1[ \t]*$\n?", re.M | re.S)
START = re.compile(r"^(`{3,}|:{3,})\{solution-start\}")
END = re.compile(r"^(`{3,}|:{3,})\{solution-end\}[^\n]*\n\1[ \t]*$\n?", re.M)


def strip(nb) -> tuple[object, int]:
    """``nb`` without solutions and outputs, and how many solutions were removed."""
    cells, inside, removed = [], False, 0
    for cell in nb.cells:
        text = cell.source.lstrip()
        if cell.cell_type == "markdown" and START.match(text):
            inside, removed = True, removed + 1
            continue
        if inside:
            end = END.search(cell.source) if cell.cell_type == "markdown" else None
            if end:  # the span ends in this cell; anything after its closing fence stays
                inside = False
                cell.source = cell.source[end.end():]
                if cell.source.strip():
                    cells.append(cell)
            continue
        if cell.cell_type == "markdown":
            cell.source, n = SOLUTION_BLOCK.subn("", cell.source)
            removed += n
            if not cell.source.strip():
                continue
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    if inside:
        raise DepthError("A {solution-start} has no {solution-end}: the chapter's solution cells are not closed.")
    nb.cells = cells
    return nb, removed


def student_copy(out: str | Path) -> list[Path]:
    """Write every chapter, stripped (:func:`strip`), into ``out/chapters`` and return the paths."""
    dest = Path(out) / CHAPTER_DIR.name
    if dest.resolve() == CHAPTER_DIR.resolve():
        raise DepthError("out must not be the project's own folder: the student copy would replace the chapters.")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in chapters().values():
        nb, _ = strip(nbformat.read(path, as_version=4))
        target = dest / path.name
        nbformat.write(nb, target)
        written.append(target)
    return written
