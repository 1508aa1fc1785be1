"""Relative depth, the book's one convention (depthutils.core.depth): a residual h_l at l / L, a layer l at
(l + 1) / L; each measurement places its rows by it, and no module computes the formula a second time."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import depthutils
from depthutils.core.depth import layer_depth, residual_depth
from depthutils.measures.cross_model_mapping import MappingResult
from depthutils.measures.curves import ratio
from depthutils.measures.residual_erasure import ErasureResult

PACKAGE = Path(depthutils.__file__).parent


def test_the_convention_counts_the_layers_that_have_run():
    L = 8
    assert residual_depth(0, L) == 0 and residual_depth(L, L) == 1 and residual_depth(4, L) == 0.5
    assert layer_depth(0, L) == 1 / L and layer_depth(L - 1, L) == 1 and layer_depth(3, L) == 0.5
    assert layer_depth(3, L) == residual_depth(4, L)  # layer l sits where the residual it writes, h_{l+1}, sits
    assert np.allclose(layer_depth(np.arange(L), L), residual_depth(np.arange(1, L + 1), L))
    assert residual_depth(None, L) is None and layer_depth(None, L) is None
    assert ratio(L - 1, L) == layer_depth(L - 1, L) == 1 and ratio(None, L) is None  # P2's (ED + 1) / L: a layer


def test_an_erasure_is_placed_at_the_residual_it_erases():
    L, T = 8, 6
    effect = np.zeros((L + 1, T))
    effect[:, -1] = 1.0                     # the answer position
    effect[L, 2] = 0.5                      # a context position matters at h_L, the output
    r = ErasureResult(meta={"params": {"predict_positions": [T - 1]}}, effect=effect, tokens=np.arange(T))
    assert r.facts()["deepest"] == L and r.facts()["deepest_rel"] == 1.0
    effect[L, 2], effect[0, 2] = 0.0, 0.5  # only at the embedding
    assert r.facts()["deepest_rel"] == 0.0


def test_a_mapping_places_both_models_layers_at_their_outputs():
    Ls, Lt = 4, 8
    error = np.ones((Ls, Lt))
    best = layer_depth(np.arange(Ls), Ls) * Lt - 1  # the target at the same relative depth: 1, 3, 5, 7
    error[np.arange(Ls), best.astype(int)] = 0.0
    r = MappingResult(meta={}, error_by_prompt=error[None], prompt_tokens=np.array([10])).with_aggregates()
    src, tgt = r.relative()
    assert np.allclose(src, [0.25, 0.5, 0.75, 1.0]) and np.allclose(tgt, src) and r.diagonal_distance() == 0.0


def _by_hand(source: str) -> list[int]:
    """The lines of ``source`` that divide ``(x + 1)`` or a layer index by a layer count."""
    counts = {"L", "Ls", "Lt", "n_layers"}
    is_count = lambda n: (isinstance(n, ast.Name) and n.id in counts) or \
        (isinstance(n, ast.Attribute) and n.attr == "n_layers") or \
        (isinstance(n, ast.Call) and getattr(n.func, "id", "") == "len")
    plus_one = lambda n: isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and \
        isinstance(n.right, ast.Constant) and n.right.value == 1
    index = lambda n: isinstance(n, ast.Name) and n.id in {"l", "deep", "formed", "ed", "layer"}
    return [n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and is_count(n.right)
            and (plus_one(n.left) or index(n.left))]


def test_no_module_computes_a_relative_depth_by_hand():
    # the teaching package is left out: its exercises ask a student to write the formula
    found = [f"{p.relative_to(PACKAGE)}:{line}" for p in PACKAGE.rglob("*.py")
             if p.name != "depth.py" and "teaching" not in p.parts for line in _by_hand(p.read_text())]
    assert not found, "compute a relative depth with depthutils.core.depth: " + ", ".join(found)
    assert _by_hand("x = (np.arange(r.n_layers) + 1) / r.n_layers") == [1] and _by_hand("y = round(deep / L, 2)") == [1]
    assert _by_hand('"""(l + 1) / L"""') == [] and _by_hand("share = count / n") == []
