"""Chapter 8, shared layers: the effect of skipping one layer on a later layer.

The chapter's prediction exercise is 8.1 (prose only, on the page); this is 8.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

from .ch02 import _future_of
from .core import Exercise, register
from .inputs import _one


EXERCISE = Exercise(
    "later_effect", "08_shared_layers", "The effect of skipping one layer on a later layer",
    "later_effect(lm, input_ids, layer, later, position) -> float",
    "max over p ≥ position of ‖Δ_j[p] − Δ′_j[p]‖ / ‖Δ_j[p]‖ for j = later, when layer `layer` is skipped "
    "on positions 1 … position−1 (one prompt, on the shared-layer model)",
    difficulty=3, importance=3,
    hints=("Record Δ_j = h_{j+1} − h_j of layer `later` in a clean run and in a run where layer `layer` "
           "is skipped; one forward hook on each layer does both.",
           "On the shared-layer model two layers share their weights, but they are still two calls: hook "
           "the layer (a position in the stack), and check that your hook runs once per forward."),
    cases=lambda lm: [dict(zip(("input_ids", "_prompt"), _one(lm)), layer=s, later=j, position=t)
                      for s, j, t in ((1, 4, 12), (3, 6, 16))],
    reference=lambda lm, case: float(_future_of(lm, case)[1][case["layer"], case["later"]]),
    shifts={"later": {-1: "you measured the layer before `later`", 1: "you measured the layer after `later`"},
            "layer": {-1: "you skipped the previous layer", 1: "you skipped the next layer"},
            "position": {-1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t",
                         1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t"}},
    model="ladder-8-shared",
    number="8.2")

register(EXERCISE)
