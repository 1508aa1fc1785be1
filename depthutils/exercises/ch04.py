"""Chapter 4, residual erasure: erase one position of the residual.

The chapter's prediction exercise is 4.1 (prose only, on the page); this is 4.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import functools

import torch

from .. import data, solutions
from ..prompts import Prompt
from ..residual_erasure import residual_erasure, residual_means
from .core import Exercise, register
from .inputs import _answer, _model


def _erased(lm, ids, layer: int, position, vector, output: bool = False):
    """The next-token probabilities ``[1, T, V]`` with the input of decoder layer ``layer`` (or its output,
    ``output=True``) replaced by ``vector`` at ``position`` (an index or a slice)."""
    def erase(h):
        h = h.clone()
        h[:, position] = vector
        return h
    block = lm.hf_layer(layer)
    hook = (block.register_forward_hook(lambda m, a, o: erase(o)) if output
            else block.register_forward_pre_hook(lambda m, a: (erase(a[0]), *a[1:])))
    try:
        with torch.no_grad():
            return lm.hf(ids).logits.float().softmax(-1)
    finally:
        hook.remove()


def _erasure_mistakes(lm, case):
    ids, l, t, P = case["input_ids"], case["layer"], case["position"], list(case["predict_positions"])
    mean = torch.as_tensor(case["means"][l], dtype=torch.float32)
    clean = solutions._output_probs(lm, ids)
    effect = lambda p, at=P: float((clean - p)[0, at].norm(dim=-1).max())  # noqa: E731
    right = _erased(lm, ids, l, t, mean) if l < lm.n_layers else None
    found = {"you replaced h_layer[position] by zeros: the baseline is the mean residual `means[layer]`":
             effect(_erased(lm, ids, min(l, lm.n_layers - 1), t, torch.zeros_like(mean), output=l == lm.n_layers))}
    if right is None:
        return found
    found.update({
        "you replaced the output of decoder layer `layer` (h_{l+1}) by means[layer]: erase its input h_l, "
        "with a forward pre-hook": effect(_erased(lm, ids, l, t, mean, output=True)),
        "you read the answer at its own positions: its distribution is read at the positions that predict "
        "it, `predict_positions` (one before each answer token)": effect(right, [p + 1 for p in P]),
        "you took the maximum over every position: read only the positions that predict the answer, "
        "`predict_positions`": effect(right, slice(None)),
        "you erased every position from `position` on: replace h_layer at that one position only":
        effect(_erased(lm, ids, l, slice(t, None), mean))})
    return found



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
                      for l, t in ((4, 5), (6, 16), (3, 16))],  # (3, 16): its largest change is at the
    # first predicting position, so reading the answer one position late gives another value
    reference=lambda lm, case: float(_erasure(lm.name)[2][case["layer"], case["position"]]),
    mistakes=_erasure_mistakes,
    shifts={"layer": {-1: "you erased h_{l−1}: the input of layer `layer` is h_l", 1: "you erased the layer's "
                      "output h_{l+1}; h_l is the input of decoder layer `layer` (a forward pre-hook)"},
            "position": {-1: "off by one: you erased the position before `position`",
                         1: "off by one: you erased the position after `position`"}},
    number="4.2")

register(EXERCISE)
