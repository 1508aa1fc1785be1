"""Chapter 2, future effects: the effect on the output of skipping one layer.

The chapter's prediction exercise is 2.1 (prose only, on the page); this is 2.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import functools

import torch

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


def _skipping(positions):
    """An edit for :func:`depthutils.solutions._output_probs` that skips the layer at ``positions`` (a slice)."""
    def edit(h_in, h_out):
        h_new = h_out.clone()
        h_new[:, positions] = h_in[:, positions]
        return h_new
    return edit


def _skip_mistakes(lm, case):
    ids, s, t = case["input_ids"], case["layer"], case["position"]
    clean = solutions._output_probs(lm, ids)
    diff = lambda skipped: (clean - skipped)[0].norm(dim=-1)  # noqa: E731  [T]
    right = diff(solutions._output_probs(lm, ids, s, _skipping(slice(1, t))))
    return {"you skipped position 0 too: position 0 is the BOS attention sink; skip positions 1 … t−1 only":
            float(diff(solutions._output_probs(lm, ids, s, _skipping(slice(0, t))))[t:].max()),
            "you skipped the positions p ≥ t: skip the earlier positions 1 … t−1 and measure the later ones p ≥ t":
            float(diff(solutions._output_probs(lm, ids, s, _skipping(slice(t, None))))[t:].max()),
            "you took the maximum over every position: measure only the positions p ≥ t, after the skipped ones":
            float(right.max()),
            "this is the mean over the positions p ≥ t: the effect is their maximum": float(right[t:].mean()),
            "this is a norm of the difference of logits: compare the probabilities, softmax(z)": float(
                (_logits(lm, ids) - _logits(lm, ids, s, _skipping(slice(1, t))))[0, t:].norm(dim=-1).max())}


def _logits(lm, ids, layer=None, edit=None):
    """The model's logits ``[B, T, V]`` (log-probabilities would hide the mistake: a shift per position)."""
    hook = lm.hf_layer(layer).register_forward_hook(lambda m, a, o: edit(a[0], o)) if edit else None
    try:
        with torch.no_grad():
            return lm.hf(ids).logits.float()
    finally:
        if hook is not None:
            hook.remove()


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
