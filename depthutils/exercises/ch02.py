"""Chapter 2, future effects: the effect on the output of skipping one layer.

The chapter's prediction exercise is 2.1 (prose only, on the page); this is 2.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import functools

from .. import solutions
from ..future_effects import future_effects
from ..prompts import Prompt
from .core import Exercise, register
from .inputs import _model, _one


@functools.lru_cache(maxsize=None)
def _future(name: str, text: str, answer_start: int, position: int, tokens: int):
    lm = _model(name)
    r = future_effects(lm, [Prompt(text, answer_start)], positions=[position], max_tokens=tokens, progress_bar=False)
    return r.output_effect_by_prompt[0], r.layer_effect_by_prompt[0]


def _future_of(lm, case):
    p = case["_prompt"]
    return _future(lm.name, p.text, p.answer_start, case["position"], case["input_ids"].shape[1])


def _skip_mistakes(lm, case):
    ids, s, t = case["input_ids"], case["layer"], case["position"]

    def from_bos(h_in, h_out):
        h_new = h_out.clone()
        h_new[:, :t] = h_in[:, :t]
        return h_new

    clean = solutions._output_probs(lm, ids)
    skipped = solutions._output_probs(lm, ids, s, from_bos)
    return {"you skipped position 0 too: position 0 is the BOS attention sink; skip positions 1 … t−1 only":
            float((clean - skipped)[0, t:].norm(dim=-1).max())}


EXERCISE = Exercise(
    "skip_effect", "02_future_effects", "The effect on the output of skipping one layer",
    "skip_effect(lm, input_ids, layer, position) -> float",
    "max over p ≥ position of ‖softmax(z[p]) − softmax(z′[p])‖₂ when layer `layer` is skipped on "
    "positions 1 … position−1 (one prompt, input_ids [1, T])",
    difficulty=3, importance=4,
    hints=("Skipping layer s sets h_{s+1}[p] := h_s[p]: a forward hook on `lm.hf_layer(layer)` can return "
           "the layer's output with its input copied in at those positions.",
           "Compare with a clean run of the same input; measure only the positions p ≥ t.",
           "Position 0 is BOS, the attention sink: the skip starts at position 1."),
    cases=lambda lm: [dict(zip(("input_ids", "_prompt"), _one(lm)), layer=l, position=t) for l, t in ((2, 12), (5, 16))],
    reference=lambda lm, case: float(_future_of(lm, case)[0][case["layer"]]),
    mistakes=_skip_mistakes,
    shifts={"layer": {-1: "you skipped the previous layer", 1: "you skipped the next layer"},
            "position": {-1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t",
                         1: "off by one in the positions: skip 1 … t−1 (range(1, t)) and measure p ≥ t"}},
    number="2.2")

register(EXERCISE)
