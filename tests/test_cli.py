"""The command line says what the book does: its help names the chapters that take a list of models."""
from __future__ import annotations

import re

import nbformat

from depthutils.__main__ import build_parser
from depthutils.book.runner import chapters


def _takes_models(path) -> bool:
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    return re.search(r"^models\s*=", cell.source, re.M) is not None


def test_help_names_the_chapters_that_compare_several_models():
    want = sorted(num for num, path in chapters().items() if _takes_models(path))
    assert want, "no chapter takes a list of models: the test would mean nothing"
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for command in ("run", "book"):
        text = sub.choices[command].format_help()
        named = re.search(r"compare\s+several\s+\(([^)]*)\)", text)
        assert named, text
        assert sorted(re.findall(r"\d\d", named.group(1))) == want, (command, named.group(1), want)


def test_no_page_promises_a_run_time():
    """A run time is glued from the run ("This chapter ran in … s"), never promised in prose or a parameter
    comment: a 135M model takes minutes where the embedded ladder takes seconds."""
    from depthutils.book.runner import ROOT

    promise = re.compile(r"\b(under|within|in less than) (a|one|\d+) (minute|second|hour)s?\b", re.I)
    pages = [*chapters().values(), ROOT / "intro.md", ROOT / "instructors.md", ROOT / "using_depthutils.md"]
    found = []
    for path in pages:
        text = path.read_text() if path.suffix == ".md" else "\n".join(
            c.source for c in nbformat.read(path, as_version=4).cells)
        found += [f"{path.name}: {m.group(0)}" for m in promise.finditer(text)]
    assert not found, found


def test_the_intro_says_what_the_small_models_cannot_show():
    """The intro promised that the embedded models make every measurement meaningful, while
    several of their verdicts read "not tested"; it must say what they cannot show, beside the verdicts."""
    from depthutils.book.runner import ROOT

    text = (ROOT / "intro.md").read_text()
    assert "every measurement meaningful" not in text
    assert "*not tested*" in text and "cannot speak to every claim" in text


def test_the_prediction_comes_before_the_measurement_and_its_answer_after():
    """Each chapter's "Predict, then run" exercise sits before its Measure section, and its
    solution (the run's answer) after the measurement, in the Exercises section."""
    for num, path in chapters().items():
        cells = nbformat.read(path, as_version=4).cells
        md = [(i, c.source) for i, c in enumerate(cells) if c.cell_type == "markdown"]
        exercise = next(i for i, s in md if re.search(r"\{exercise\} \d+\.1 · Predict, then run", s))
        solution = next(i for i, s in md if re.search(r"\{solution\} ex-\d\d-predict", s))
        measure = next(i for i, s in md if s.startswith("## Measure"))
        first_code_after = next(i for i, c in enumerate(cells) if i > measure and c.cell_type == "code")
        assert exercise < measure < first_code_after < solution, (num, exercise, measure, solution)
