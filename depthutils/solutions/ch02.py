"""Chapter 2, future effects: the reference solutions of its implement-it exercises."""
from __future__ import annotations

from .common import _output_probs

__all__ = ["skip_effect"]


def skip_effect(lm, input_ids, layer, position):
    """P1 Fig. 3's effect on the output of skipping ``layer`` on positions ``[1, position)``:
    ``max over p ≥ position of ‖softmax(z[p]) − softmax(z'[p])‖₂`` for one prompt (``input_ids`` ``[1, T]``).

    Skipping sets ``h_{s+1}[p] := h_s[p]``: the layer's output is replaced by its input there.
    Position 0 (BOS, the attention sink) is never touched.
    """
    def skip(h_in, h_out):
        h_new = h_out.clone()
        h_new[:, 1:position] = h_in[:, 1:position]
        return h_new

    clean = _output_probs(lm, input_ids)
    skipped = _output_probs(lm, input_ids, layer, skip)
    diff = (clean - skipped)[0, position:].norm(dim=-1)   # [T - position]: the positions p ≥ t
    return float(diff.max())
