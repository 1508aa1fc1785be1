"""Each measurement states what it runs once, in its own module (``cost``): the run sizes its batches with that
function, and the plan, its check and the benchmark count with the same one. Nothing in ``depthutils.cost``
restates a measurement.
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import depthutils as du
from depthutils.cost.budget import shape_of
from depthutils.cost.model_info import model_info
from depthutils.measures import MEASUREMENTS, cost_of
from depthutils.measures import future_effects as fe
from depthutils.perf.plan import Knobs, chapter_costs
from depthutils.perf.workloads import workload

#: chapter 2's call, as the plan reads it: one part, one mode, two GSM8K prompts
CH02 = {"parts": ["layer"], "modes": ["future"], "n_examples": 2, "dataset": "gsm8k"}


def _plan_passes(**kw) -> float:
    return sum(c.layer_passes for _, c in chapter_costs("02", [model_info("default")], CH02, Knobs("float32", **kw), workload("02")))


def test_changing_a_measurement_s_passes_changes_the_plan_and_its_own_batches(monkeypatch, tmp_path):
    """One more pass per call in ``future_effects.cost`` (and twice its memory) moves the plan's layer-passes,
    and the batch the measurement's own batched path picks, without a change to any module of ``depthutils.cost``
    or ``depthutils.perf``."""
    before_fast, before_batched = _plan_passes(fast=True, remote=False), _plan_passes(fast=False, remote=False)
    handle = du.load_model("default")
    prompts = du.data.gsm8k(1)
    _, encs, _ = du.core.encoding.encode_all(handle, prompts)
    used = [[4, 8, 12]]
    T = encs[0].n_tokens
    peak = lambda b: fe.cost(shape_of(handle), [T], "float32", False, False, positions=used, batch=b).peak  # noqa: E731
    budget = peak(12) + 1.0  # room for about 12 rows of the 25 (every skip at 3 positions and the clean row)
    chosen = fe.planned_batch(handle, encs, used, "layer", "future", False, budget, False)
    assert 2 < chosen <= 12

    original = fe.cost

    def one_more_pass(s, Ts, *args, **kwargs):
        c = original(s, Ts, *args, **kwargs)
        return dataclasses.replace(c, layer_passes=c.layer_passes + len(Ts), work=2 * c.work + c.saved)

    monkeypatch.setattr(fe, "cost", one_more_pass)
    assert _plan_passes(fast=True, remote=False) == pytest.approx(before_fast + CH02["n_examples"])
    assert _plan_passes(fast=False, remote=False) == pytest.approx(before_batched + CH02["n_examples"])
    assert fe.planned_batch(handle, encs, used, "layer", "future", False, budget, False) < chosen
    assert cost_of("future_effects") is one_more_pass


def test_every_measurement_has_its_cost_beside_it():
    for name, m in MEASUREMENTS.items():
        assert callable(m.measure()), name
        assert callable(m.cost_function()), name
        assert m.cost_function().__module__ == m.module, f"{name}'s cost is not in its own module"
        assert getattr(du, name) is m.measure(), f"depthutils.{name} is not the registered function"


def test_no_cost_module_restates_a_measurement():
    """The cost package holds the passes measurements are made of, not a measurement: no code in it names one
    (its docstrings may point at them)."""
    cost_dir = Path(du.__file__).parent / "cost"
    bad = []
    for path in cost_dir.glob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                bad += [f"{path.name}:{node.lineno} {node.value!r}" for name in MEASUREMENTS if name == node.value]
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("depthutils.measures"):
                bad.append(f"{path.name}:{node.lineno} imports {node.module}")
    assert not bad, bad
