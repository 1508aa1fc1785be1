"""Chapter 1, contributions: the relative contribution of one layer.

The chapter's prediction exercise is 1.1 (prose only, on the page); this is 1.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

from .core import _NEXT_LAYER, Exercise, register
from .inputs import _hidden, _stats, batch


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

register(EXERCISE)
