"""Chapter 4, residual erasure: erase one position of the residual.

The chapter's prediction exercise is 4.1 (prose only, on the page); 4.2 (core) erases one position of the
residual and 4.3 (stretch) every position at every layer, the whole map of P1 Fig. 6b, both checked by
:func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import functools

import torch

from depthutils import data
from depthutils.core.prompts import Prompt
from depthutils.measures.residual_erasure import residual_erasure, residual_means
from depthutils.teaching import solutions
from depthutils.teaching.exercises.core import Exercise, register
from depthutils.teaching.exercises.inputs import _answer, _model


def _erased(lm, ids, layer: int, position, vector, output: bool = False):
    """The next-token probabilities ``[B, T, V]`` with the input of decoder layer ``layer`` (or its output,
    ``output=True``) replaced by ``vector`` at ``position`` (an index or a slice; or a list, one position per
    batch row)."""
    def erase(h):
        h = h.clone()
        if isinstance(position, list):
            h[torch.arange(len(position)), position] = vector
        else:
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


def _map(lm, case, value="mean", at="input", read="predict", first=1):
    """The erasure map ``[L+1, T]`` as a known mistake computes it (the defaults compute it right): one forward
    per layer, a batch row per erased position."""
    ids, L, T, P = case["input_ids"], lm.n_layers, case["input_ids"].shape[1], list(case["predict_positions"])
    reads = {"predict": P, "answer": [p + 1 for p in P], "all": slice(None)}[read]
    clean = solutions._output_probs(lm, ids)[0, reads]
    E = torch.zeros(L + 1, T)
    for l in range(L + 1):
        vector = torch.as_tensor(case["means"][l], dtype=torch.float32)
        vector = torch.zeros_like(vector) if value == "zeros" else vector
        layer, output = (l, at == "output") if l < L else (L - 1, True)
        ts = list(range(first, T))
        probs = _erased(lm, ids.expand(len(ts), -1), layer, ts, vector, output)[:, reads]  # [T - first, P, V]
        E[l, first:] = (probs - clean).norm(dim=-1).amax(dim=-1)
    return E


def _map_mistakes(lm, case):
    right = _map(lm, case)
    return {"you erased position 0 too: position 0 is BOS, the attention sink, and is never erased; its column "
            "stays 0": _map(lm, case, first=0),
            "you replaced h_l[t] by zeros: the baseline is the mean residual `means[l]`": _map(lm, case, value="zeros"),
            "you erased each layer's output h_{l+1} with means[l]: row l erases h_l, the input of decoder layer l "
            "(a forward pre-hook)": _map(lm, case, at="output"),
            "you read the answer at its own positions: its distribution is read at the positions that predict "
            "it, `predict_positions` (one before each answer token)": _map(lm, case, read="answer"),
            "you took the maximum over every position: read only the positions that predict the answer, "
            "`predict_positions`": _map(lm, case, read="all"),
            "your map has no row for h_L, the last layer's output: the rows are h_0 … h_L, L + 1 of them": right[:-1],
            "your map is transposed: rows are the layers l = 0 … L, columns the positions": right.T}


STRETCH = Exercise(
    "erasure_matrix", "04_residual_erasure", "The whole erasure map of one prompt",
    "erasure_matrix(lm, input_ids, means, predict_positions) -> torch.Tensor",
    "[L+1, T]: E[l, t] = max over predict_positions of ‖p − p′‖₂ when h_l[t] is replaced by means[l] (h_l: the "
    "input of decoder layer l; l = L: the last layer's output), for every position t ≥ 1; column 0 (BOS) is 0",
    difficulty=4, importance=3,
    hints=("Batch it: for one layer, a batch of T − 1 copies of the prompt in which row r erases position r + 1 "
           "costs one forward pass, so the map costs L + 1 passes, not (L + 1)·T.",
           "A forward pre-hook on `lm.hf_layer(l)` edits h_l; for l = L, a forward hook on the last layer edits its "
           "output. Index the batch rows and positions together: `h[rows, positions] = means[l]`.",
           "Position 0 is BOS, the attention sink: never erase it."),
    cases=lambda lm: [dict(_answer(lm, _erasure(lm.name)[0]), means=_erasure(lm.name)[1])],
    reference=lambda lm, case: torch.as_tensor(_erasure(lm.name)[2]),
    axes=("layer", "position"),
    mistakes=_map_mistakes,
    number="4.3")

register(EXERCISE, STRETCH)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
