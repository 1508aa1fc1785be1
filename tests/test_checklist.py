"""CONTRIBUTING.md's "Adding a measurement", checked: every registered measurement has an example (run by
``plan --check``, the remote tests and ``tests/measures/test_examples.py``), a cost its chapter's plan counts, and
a claim that grades it (or the measurement it feeds), whose verdict has its row in the intro's overview."""
from __future__ import annotations

import pytest

from depthutils.book.claim_table import CLAIMS
from depthutils.book.overview import ROWS
from depthutils.book.runner import find_chapter, parameters
from depthutils.measures import MEASUREMENTS
from depthutils.perf.plan import chapter_parameters, make_plan
from depthutils.perf.workloads import workload

_PLANNED: dict[tuple, set] = {}


def planned(chapter: str, remote: bool = False) -> set[str]:
    """The measurements the plan of ``chapter`` counts, on its own parameters, locally or on NDIF (computed once)."""
    if (chapter, remote) not in _PLANNED:
        path = find_chapter(chapter)
        num, p = chapter_parameters(path, parameters(path), None, None, {"remote": True} if remote else {})
        _PLANNED[chapter, remote] = {row["measurement"] for row in make_plan(num, p, workload(num), timing=False).rows}
    return _PLANNED[chapter, remote]


@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_every_measurement_is_whole(name):
    m = MEASUREMENTS[name]
    assert callable(m.measure()) and callable(m.cost_function())
    assert callable(getattr(__import__(m.module, fromlist=["_"]), m.example_name)), f"{name} has no example"
    assert m.chapter is not None, f"{name} names no chapter"
    assert name in planned(m.chapter), f"the plan of chapter {m.chapter} does not count {name}"
    if m.runs_remotely and "remote" in parameters(find_chapter(m.chapter)):
        assert name in planned(m.chapter, remote=True), f"chapter {m.chapter}'s plan on NDIF does not count {name}"
    if m.claim.startswith("feeds "):
        assert m.claim.removeprefix("feeds ") in MEASUREMENTS, m.claim
        return
    assert m.claim in CLAIMS, f"{name}'s claim {m.claim!r} is not in the claim table"
    assert any(r.claim == m.claim and r.chapter == m.chapter for r in ROWS), \
        f"the intro's overview has no row for {m.claim!r} in chapter {m.chapter}"


def test_the_checklist_can_fail(monkeypatch):
    """A measurement registered without its plan cost, claim or overview row is caught."""
    from dataclasses import replace

    import depthutils.measures as registry

    bad = replace(MEASUREMENTS["norm_growth"], claim="no such claim")
    monkeypatch.setitem(registry.MEASUREMENTS, "norm_growth", bad)
    with pytest.raises(AssertionError, match="not in the claim table"):
        test_every_measurement_is_whole("norm_growth")
    monkeypatch.setitem(registry.MEASUREMENTS, "norm_growth", replace(bad, claim="norm_growth", chapter="02"))
    with pytest.raises(AssertionError, match="does not count"):
        test_every_measurement_is_whole("norm_growth")


def test_no_module_but_the_registry_and_the_claim_table_lists_the_measurements():
    """A module that names four or more measurements (as strings) is a second list of them, which a new
    measurement would have to join: the registry and the claim table are the only lists."""
    import ast
    from pathlib import Path

    import depthutils

    root = Path(depthutils.__file__).resolve().parent
    # the registry, the claims, and the plan's statement of each chapter's calls (a chapter's entry names what it calls)
    # and the package root, which names every measurement for its readers (tests/test_layers.py holds it to the registry)
    allowed = {root / "measures" / "__init__.py", root / "book" / "claim_table.py", root / "perf" / "workloads.py",
               root / "__init__.py"}
    lists = {}
    for path in sorted(root.rglob("*.py")) + sorted((root.parent / "tests").rglob("*.py")):
        named = {n.value for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in MEASUREMENTS}
        if len(named) >= 4 and path not in allowed:
            lists[str(path.relative_to(root.parent))] = sorted(named)
    assert not lists, f"modules that list measurements beside the registry: {lists}"
