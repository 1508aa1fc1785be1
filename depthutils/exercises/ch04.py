"""Chapter 4, residual erasure: erase one position of the residual.

The chapter's prediction exercise is 4.1 (prose only, on the page); this is 4.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import functools

from .. import data
from ..prompts import Prompt
from ..residual_erasure import residual_erasure, residual_means
from .core import Exercise, register
from .inputs import _answer, _model


@functools.lru_cache(maxsize=None)
def _erasure(name: str):
    lm = _model(name)
    p = Prompt.from_parts("5 + 7 + 5 + 3 + 1 + 7 = ", "28")
    means = residual_means(lm, data.gsm8k(3), max_tokens=64, progress_bar=False)
    return p, means, residual_erasure(lm, p, baseline=means, progress_bar=False).effect


EXERCISE = Exercise(
    "erasure_effect", "04_residual_erasure", "Erase one position of the residual",
    "erasure_effect(lm, input_ids, layer, position, means, predict_positions) -> float",
    "replace h_layer[position] (the input of decoder layer `layer`; layer = L: the last layer's output) by "
    "means[layer], and return max over predict_positions of ‖p − p′‖₂",
    difficulty=3, importance=3,
    hints=("`means` is [L+1, d]: one mean residual per h_0 … h_L; take `means[layer]`.",
           "A forward pre-hook on `lm.hf_layer(layer)` can return new arguments: `(edited, *args[1:])`. "
           "For layer = L, edit the last layer's output instead.",
           "The answer's distribution is read at the positions that *predict* the answer tokens."),
    cases=lambda lm: [dict(_answer(lm, _erasure(lm.name)[0]), layer=l, position=t, means=_erasure(lm.name)[1])
                      for l, t in ((4, 5), (6, 16))],
    reference=lambda lm, case: float(_erasure(lm.name)[2][case["layer"], case["position"]]),
    shifts={"layer": {-1: "you erased h_{l−1}: the input of layer `layer` is h_l", 1: "you erased the layer's "
                      "output h_{l+1}; h_l is the input of decoder layer `layer` (a forward pre-hook)"},
            "position": {-1: "off by one: you erased the position before `position`",
                         1: "off by one: you erased the position after `position`"}},
    number="4.2")

register(EXERCISE)
