"""Chapter 1, contributions: the relative contribution of one layer.

The chapter's prediction exercise is 1.1 (prose only, on the page); 1.2 (core) is one layer's relative
contribution and 1.3 (stretch) the cosines of its attention, MLP and whole update with the residual each is
added to, both checked by :func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from depthutils.teaching.exercises.core import _NEXT_LAYER, Exercise, register
from depthutils.teaching.exercises.inputs import _hidden, _stats, batch


def _relative_mistakes(lm, case):
    h = _hidden(lm, case["input_ids"])
    l = case["layer"]
    d = h[l + 1] - h[l]
    return {"this is ‖Δ_l‖ / ‖h_{l+1}‖: divide by the norm of the residual the layer *receives*, h_l, not of "
            "its output": d.norm(dim=-1) / h[l + 1].norm(dim=-1),
            "this is ‖h_{l+1}‖ / ‖h_l‖: the norm of the layer's output, not of its update Δ_l = h_{l+1} − h_l":
            h[l + 1].norm(dim=-1) / h[l].norm(dim=-1),
            "this is ‖Δ_l‖ alone: divide it by ‖h_l‖, the norm of the residual the layer receives": d.norm(dim=-1),
            "this is (‖Δ_l‖ / ‖h_l‖)², a ratio of squared norms: take `.norm(dim=-1)`, not the sum of squares":
            (d.norm(dim=-1) / h[l].norm(dim=-1)) ** 2,
            "these norms run over the positions (dim=1), not over the hidden axis: `.norm(dim=-1)`, one per token":
            d.norm(dim=1) / h[l].norm(dim=1),
            "this subtracts h_l from batch row 0's output: `output[0]` is batch row 0 of the tensor [B, T, d], "
            "not the first element of a tuple": (h[l + 1][:1] - h[l]).norm(dim=-1) / h[l].norm(dim=-1)}


EXERCISE = Exercise(
    "relative_contribution", "01_contributions", "The relative contribution of one layer",
    "relative_contribution(lm, input_ids, layer) -> torch.Tensor",
    "‖Δ_l‖ / ‖h_l‖ at every token, with Δ_l = h_{l+1} − h_l: [B, T]",
    difficulty=2, importance=4,
    hints=("You need the layer's input h_l and its output h_{l+1}: with hooks, a forward pre-hook "
           "(`args[0]`) and a forward hook (`output`) on `lm.hf_layer(layer)`; with nnsight, "
           "`lm.layer(layer).input` and `.output` (read the input first).",
           "Norms over the hidden axis: `.norm(dim=-1)`, one per token."),
    cases=lambda lm: [dict(input_ids=batch(lm), layer=l) for l in (2, 6)],
    reference=lambda lm, case: _stats(lm, case)[:, case["layer"], 4],
    axes=("batch row", "position"), mistakes=_relative_mistakes,
    shifts={"layer": {-1: "you measured the previous layer", 1: _NEXT_LAYER}},
    number="1.2")


def _parts(lm, ids, l):
    """``h_l``, ``a_l``, ``m_l``, ``h_{l+1}`` of layer ``l`` (the library's accessors) and the attention's own input."""
    with lm.no_grad(), lm.trace(ids):
        h = lm.layers_input(l).save()
        normed = lm.layer(l).self_attn.inputs[1]["hidden_states"].save()
        a = lm.attentions_output(l).save()
        m = lm.mlps_output(l).save()
        out = lm.layers_output(l).save()
    return h, a, m, out, normed


def _cosine_mistakes(lm, case):
    h, a, m, out, normed = _parts(lm, case["input_ids"], case["layer"])
    cos = lambda x, y, dim=-1: F.cosine_similarity(x, y, dim=dim)  # noqa: E731
    three = lambda *rows: torch.stack(rows, dim=1)  # noqa: E731
    dot = lambda x, y: (x * y).sum(-1)  # noqa: E731
    d = out - h
    return {"your MLP cosine compares m_l with h_l: the MLP is added to h_l + a_l, the residual after the "
            "attention, so compare with that": three(cos(a, h), cos(m, h), cos(d, h)),
            "your MLP cosine compares m_l with h_{l+1}, the layer's output: compare with h_l + a_l, the residual "
            "the MLP is added to": three(cos(a, h), cos(m, out), cos(d, h)),
            "your whole-layer cosine compares Δ_l with h_{l+1}, the layer's output: compare with h_l, the residual "
            "the layer receives": three(cos(a, h), cos(m, h + a), cos(d, out)),
            "these are dot products, not cosines: divide x·y by ‖x‖ ‖y‖ (or use `F.cosine_similarity(..., dim=-1)`)":
            three(dot(a, h), dot(m, h + a), dot(d, h)),
            "these are the norm ratios ‖part‖ / ‖residual‖ (exercise 1.2's statistic), not cosines":
            three(a.norm(dim=-1) / h.norm(dim=-1), m.norm(dim=-1) / (h + a).norm(dim=-1),
                  d.norm(dim=-1) / h.norm(dim=-1)),
            "these cosines run over the positions (dim=1), not over the hidden axis: one cosine per token, dim=-1":
            three(cos(a, h, 1), cos(m, h + a, 1), cos(d, h, 1)),
            "your attention cosine compares a_l with the attention's own input, norm(h_l) (the output of "
            "`input_layernorm`): compare with the residual h_l, the layer's input":
            three(cos(a, normed), cos(m, h + a), cos(d, h)),
            "your rows are in another order: return [attention, MLP, whole layer] along dim 1":
            three(cos(d, h), cos(m, h + a), cos(a, h))}


STRETCH = Exercise(
    "layer_cosines", "01_contributions", "The cosine of each part with its residual",
    "layer_cosines(lm, input_ids, layer) -> torch.Tensor",
    "[B, 3, T]: at every token, cos(a_l, h_l), cos(m_l, h_l + a_l) and cos(Δ_l, h_l) for l = layer, with a_l "
    "and m_l what the attention and the MLP add and Δ_l = h_{l+1} − h_l",
    difficulty=3, importance=4,
    hints=("Four reads of one forward pass: the layer's input h_l, the attention's output a_l (`self_attn` returns "
           "a tuple: take `[0]`), the MLP's output m_l and the layer's output h_{l+1}. Plain hooks on "
           "`lm.hf_layer(layer)`, its `.self_attn` and its `.mlp` do it.",
           "Each part is compared with the residual it is *added to*: the MLP sees h_l + a_l, not h_l.",
           "`torch.nn.functional.cosine_similarity(x, y, dim=-1)`: one cosine per token."),
    cases=lambda lm: [dict(input_ids=batch(lm), layer=l) for l in (1, 6)],
    reference=lambda lm, case: _stats(lm, case)[:, case["layer"], 1::2],
    axes=("batch row", "part", "position"), mistakes=_cosine_mistakes,
    shifts={"layer": {-1: "you measured the previous layer", 1: _NEXT_LAYER}},
    number="1.3")

register(EXERCISE, STRETCH)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
