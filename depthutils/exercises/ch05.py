"""Chapter 5, integrated gradients: integrated gradients on one layer, by a Riemann sum.

The chapter's prediction exercise is 5.1 (prose only, on the page); this is 5.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import functools

from ..integrated_gradients import integrated_gradients
from ..prompts import Prompt
from .core import _LAYER_INPUT, _NEXT_LAYER, Exercise, register
from .inputs import _answer, _model


@functools.lru_cache(maxsize=None)
def _ig(name: str, steps: int):
    lm = _model(name)
    p = Prompt.from_parts("The spouse of the performer of Imagine is", " Yoko Ono")
    return p, integrated_gradients(lm, p, steps=steps, progress_bar=False).attribution


EXERCISE = Exercise(
    "ig_riemann", "05_integrated_gradients", "Integrated gradients on one layer, by a Riemann sum",
    "ig_riemann(lm, input_ids, layer, predict_positions, answer_ids, steps) -> torch.Tensor",
    "A[l, t] for every position t, [T]: the left Riemann sum over k = 0 … K−1 of ∂f/∂x(b + (k/K)(x − b)) · "
    "(x − b) / K, summed over the hidden axis, with x the output of layer `layer`, b its mean over positions "
    "and f = Σ p(answer token)",
    difficulty=4, importance=3,
    hints=("A forward hook that *returns* a tensor replaces the layer's output: return the interpolated "
           "point, made with `requires_grad_(True)`, and take `torch.autograd.grad(f, point)`.",
           "The baseline is the mean over positions (dim=1 of [1, T, d]), not over the hidden axis.",
           "Left Riemann sum: k = 0 … K−1, so the point at α = 1 (x itself) is not included."),
    cases=lambda lm: [dict(_answer(lm, _ig(lm.name, 8)[0]), layer=l, steps=8) for l in (2, 6)],
    reference=lambda lm, case: _ig(lm.name, case["steps"])[1][case["layer"]],
    axes=("position",),
    shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}},
    number="5.2")

register(EXERCISE)
