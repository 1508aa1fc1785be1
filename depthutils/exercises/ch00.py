"""Chapter 0, the residual stream: read the residual stream after one layer.

The chapter's prediction exercise is 0.1 (prose only, on the page); this is 0.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

from .core import _LAYER_INPUT, _NEXT_LAYER, Exercise, register
from .inputs import _hidden, batch


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
    shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}},
    number="0.2")

register(EXERCISE)
