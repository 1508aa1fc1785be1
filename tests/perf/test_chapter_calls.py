"""A chapter's calls against its plan, checked here and never in a reader's notebook.

Each chapter glues the measurement calls it made (``calls``, :func:`depthutils.book.report.ran_in`); the chapters
that this test run's nbval executed (``tests/nbval_book.py``) are read back, and every call must be one the
chapter's plan counts (:func:`depthutils.perf.workloads.unplanned`). A chapter itself runs any call a reader adds.
"""
from __future__ import annotations

import ast
import json

import nbformat
import pytest
from nbval_book import CHAPTERS, EXECUTED

from depthutils.book.chapters import chapters
from depthutils.perf.workloads import unplanned


def glued(nb, name: str):
    """The value glued as ``name`` in an executed notebook (None when nothing was)."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("metadata", {}).get("scrapbook", {}).get("name") == name:
                text = next(v for k, v in out["data"].items() if k.endswith("text/plain"))
                return ast.literal_eval(text)
    return None


@pytest.mark.parametrize("chapter", list(chapters()))
def test_each_chapter_calls_only_what_its_plan_counts(chapter):
    path = EXECUTED / chapters()[chapter].name
    if not path.exists() or path.stat().st_mtime < (CHAPTERS / path.name).stat().st_mtime:
        pytest.skip(f"nbval did not execute {path.name} in this run")
    calls = glued(nbformat.read(path, as_version=4), "calls")
    assert calls is not None, f"{path.name} glued no calls"
    calls = json.loads(calls)
    # chapter 10 measures through analysis.at_answer, which runs the measurements' parts (curves_and_lens,
    # layer_skips), not their counted functions; every other chapter calls its measurements
    assert calls or chapter == "10", f"{path.name} made no measurement call of its own"
    assert not unplanned(chapter, calls), f"chapter {chapter} called {unplanned(chapter, calls)}, which its plan " \
        "does not count: add the call to its workload in depthutils/perf/workloads.py"


def test_the_check_names_a_call_the_plan_does_not_count():
    assert unplanned("00", ["residual_stream"]) == []
    assert unplanned("00", ["residual_stream", "depth_score"]) == ["depth_score"]


def test_a_reader_cell_is_never_refused(tiny, prompts, monkeypatch):
    """A chapter that calls a measurement its plan does not count (a student's extra cell) still ends: its last
    cells glue the calls and show the verdict; calls inside ``uncounted`` (the real-model sections) are not the
    chapter's."""
    import depthutils as du
    from depthutils.book import report
    from depthutils.measures import CALLS, uncounted

    glues = {}
    monkeypatch.setattr(report, "_glue", lambda name, value, display: glues.__setitem__(name, value))
    model, _ = tiny("llama")
    report.start("00")
    du.residual_stream(model, prompts[:1], progress_bar=False)
    du.contributions(model, prompts[:1], progress_bar=False)  # not in chapter 0's plan
    with uncounted():
        du.residual_stream(model, prompts[:1], progress_bar=False)
    assert CALLS == {"residual_stream": 1, "contributions": 1}
    report.ran_in()
    assert json.loads(glues["calls"]) == {"contributions": 1, "residual_stream": 1}
    assert unplanned("00", json.loads(glues["calls"])) == ["contributions"]
    report.start()
    assert not CALLS
