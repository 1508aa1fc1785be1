"""Chapter 0, the residual stream: read the residual stream after one layer.

The chapter's prediction exercise is 0.1 (prose only, on the page); this is 0.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

from .core import _LAYER_INPUT, _NEXT_LAYER, Exercise, register
from .inputs import _hidden, batch


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

register(EXERCISE)
