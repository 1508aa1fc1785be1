"""The students' copy: every exercise, no solution, no output; the chapters untouched."""
from __future__ import annotations

import hashlib
import re

import nbformat
import papermill
import pytest

from depthutils.book.runner import CHAPTER_DIR, chapters, kernel_config
from depthutils.book.student import strip, student_copy
from depthutils.core.errors import DepthError

LABEL = re.compile(r"^:label: (\S+)", re.M)


def _labels(nb, kind: str) -> list[str]:
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return [m for block in re.findall(r"\{" + kind + r"(?:-start)?\}[^\n]*\n((?::[^\n]*\n)*)", text)
            for m in LABEL.findall(block)]


def test_the_students_copy_keeps_every_exercise_and_no_solution(tmp_path):
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in chapters().values()}
    written = student_copy(tmp_path)
    assert [p.name for p in written] == [p.name for p in chapters().values()]
    for path in written:
        original = nbformat.read(CHAPTER_DIR / path.name, as_version=4)
        nb = nbformat.read(path, as_version=4)
        assert _labels(nb, "exercise") == _labels(original, "exercise") != [], path.name
        assert any("{solution" in c.source for c in original.cells), "the chapter has solutions to strip"
        text = "\n".join(c.source for c in nb.cells)
        assert "{solution" not in text and "exercises.solution(" not in text and "exercises.show(" not in text
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), path.name
        assert any("exercises.check(" in c.source for c in nb.cells), "the student's checker cell stays"
    assert before == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in chapters().values()}


def test_strip_removes_a_solution_inside_a_cell_and_spans_of_cells():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("```{exercise} 1.1 · Predict\n:label: ex\n\nWhat?\n```\n\n"
                                      "```{solution} ex\n:class: dropdown\n\nThe answer.\n```\nAfter."),
        nbformat.v4.new_markdown_cell("```{solution-start} ex2\n:class: dropdown\n```"),
        nbformat.v4.new_code_cell("secret()"),
        nbformat.v4.new_markdown_cell("More of the answer.\n\n```{solution-end}\n```\nKept."),
        nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output("stream", text="1")]),
    ])
    out, n = strip(nb)
    assert n == 2
    text = "\n".join(c.source for c in out.cells)
    assert "The answer" not in text and "secret" not in text and "More of the answer" not in text
    assert "What?" in text and "After." in text and "Kept." in text and out.cells[-1].outputs == []


def test_an_unclosed_solution_is_refused():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("```{solution-start} ex\n```"),
                                         nbformat.v4.new_code_cell("secret()")])
    with pytest.raises(DepthError, match="no \\{solution-end\\}"):
        strip(nb)


def test_a_students_chapter_runs(tmp_path):
    """Stripping leaves no name undefined: chapter 0 of the students' copy runs from top to bottom, and its
    checker meets the unimplemented exercise with a message, not an error."""
    path = next(p for p in student_copy(tmp_path) if p.name.startswith("00_"))
    out = tmp_path / "ran.ipynb"
    papermill.execute_notebook(str(path), str(out), kernel_name="python3", progress_bar=False, cwd=str(tmp_path),
                               config=kernel_config())
    text = "\n".join(o.get("text", "") for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", []))
    assert "not implemented yet" in text
