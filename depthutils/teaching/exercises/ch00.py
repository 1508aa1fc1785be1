"""Chapter 0, the residual stream: read the residual stream after one layer.

The chapter's prediction exercise is 0.1 (prose only, on the page); 0.2 (core) reads the residual after one
layer and 0.3 (stretch) writes it as a sum of the embedding and every sublayer's term, both checked by
:func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import torch

from depthutils.teaching.exercises.core import _LAYER_INPUT, _NEXT_LAYER, Exercise, register
from depthutils.teaching.exercises.inputs import _hidden, batch


def _output_mistakes(lm, case):
    """What the common wrong readings of the residual after layer ``layer`` return."""
    ids, l = case["input_ids"], case["layer"]
    with lm.no_grad(), lm.trace(ids):
        h_in = lm.layers_input(l).save()
        attn = lm.attentions_output(l).save()
        mlp = lm.mlps_output(l).save()
        h_out = lm.layers_output(l).save()
        final = lm.layers_output(lm.n_layers - 1).save()
    return {"this is the layer's update Δ_l = h_{l+1} − h_l (what it adds), not the residual h_{l+1} after it: "
            "return `lm.layer(layer).output` itself": h_out - h_in,
            "this is what the attention sublayer adds (`self_attn`'s output), not the residual after the whole "
            "layer: read `lm.layer(layer).output`": attn,
            "this is what the MLP sublayer adds (`mlp`'s output), not the residual after the whole layer: read "
            "`lm.layer(layer).output`": mlp,
            "this is the last layer's output h_L whatever `layer` is: index the layer, `lm.layer(layer)`": final,
            "this is batch row 0 repeated for every row: `output[0]` is batch row 0 of the tensor [B, T, d], not "
            "the first element of a tuple": h_out[:1].expand_as(h_out)}


EXERCISE = Exercise(
    "layer_output", "00_residual_stream", "Read the residual stream after one layer",
    "layer_output(lm, input_ids, layer) -> torch.Tensor",
    "h_{layer+1}, the output of decoder layer `layer`, for every prompt of the batch: [B, T, d]",
    difficulty=1, importance=5,
    hints=("Inside `with lm.nn.trace(input_ids):` the layer is `lm.layer(layer)`; its `.output` is the "
           "residual after it. Call `.save()` on what you want to keep after the trace.",
           "A decoder layer returns a tensor [B, T, d] on today's transformers, not a tuple: `output[0]` "
           "is batch row 0, and a batch of one hides the mistake."),
    cases=lambda lm: [dict(input_ids=batch(lm), layer=l) for l in (3, 0)],
    reference=lambda lm, case: _hidden(lm, case["input_ids"])[case["layer"] + 1],
    axes=("batch row", "position", "hidden unit"),
    mistakes=_output_mistakes,
    shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}},
    number="0.2")


def _terms(lm, ids) -> tuple:
    """The library's ``h_0 … h_L`` ``[L+1, B, T, d]``, and what each attention and MLP adds, ``[L, B, T, d]`` each."""
    a, m = [], []  # filled in forward order: each layer's attention, then its MLP
    with lm.no_grad(), lm.trace(ids):
        for l in range(lm.n_layers):
            a.append(lm.attentions_output(l).save())
            m.append(lm.mlps_output(l).save())
    return _hidden(lm, ids), torch.stack(a), torch.stack(m)


def _interleave(first, a, m):
    return torch.stack([first, *[x for pair in zip(a, m) for x in pair]])


def _terms_reference(lm, case):
    h, a, m = _terms(lm, case["input_ids"])
    return _interleave(h[0], a, m)


def _terms_mistakes(lm, case):
    h, a, m = _terms(lm, case["input_ids"])
    return {"this is h_0 followed by each layer's update Δ_l = a_l + m_l: split every layer into its two terms, "
            "the attention's a_l and then the MLP's m_l": torch.stack([h[0], *(h[1:] - h[:-1])]),
            "this is the residual stream h_0 … h_L itself, not the terms that add up to it: return h_0, then "
            "what each attention and each MLP adds": h,
            "your terms have no h_0: the sum starts from the embedding h_0, the input of layer 0 "
            "(`lm.layer(0).input`)": _interleave(h[0], a, m)[1:],
            "the first term is h_1, layer 0's output: start from h_0, the input of layer 0": _interleave(h[1], a, m),
            "in each layer you put the MLP's term before the attention's: the attention runs first, so the order "
            "is a_l, m_l": _interleave(h[0], m, a),
            "your attention terms are h_l + a_l, the residual between the two sublayers (the input of "
            "`post_attention_layernorm`), not what the attention adds: read `self_attn`'s output":
            _interleave(h[0], h[:-1] + a, m),
            "your MLP terms are h_{l+1}, the layer's output, not what the MLP adds: read `mlp`'s output":
            _interleave(h[0], a, h[1:])}


STRETCH = Exercise(
    "residual_terms", "00_residual_stream", "The residual stream as a sum of its terms",
    "residual_terms(lm, input_ids) -> torch.Tensor",
    "[h_0, a_0, m_0, a_1, m_1, …, a_{L−1}, m_{L−1}], stacked: [2L+1, B, T, d], with a_l what layer l's "
    "attention adds and m_l what its MLP adds, so that the terms sum to h_L, the last layer's output",
    difficulty=3, importance=4,
    hints=("In one `lm.nn.trace`, read `lm.layer(0).input` (h_0), then each layer's `self_attn.output` and "
           "`mlp.output`, in forward order. `.save()` each one.",
           "The attention module returns a tuple (output, weights): its `[0]` is the tensor [B, T, d]. The MLP "
           "returns the tensor itself.",
           "Check yourself before the checker does: the stack's sum over its first axis equals "
           "`lm.layer(L − 1).output`."),
    cases=lambda lm: [dict(input_ids=batch(lm))],
    reference=_terms_reference,
    axes=("term", "batch row", "position", "hidden unit"),
    mistakes=_terms_mistakes,
    number="0.3")

register(EXERCISE, STRETCH)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
