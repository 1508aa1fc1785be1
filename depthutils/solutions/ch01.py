"""Chapter 1, contributions: the reference solutions of its implement-it exercises."""
from __future__ import annotations

from .common import _residual_around

__all__ = ["relative_contribution"]


def relative_contribution(lm, input_ids, layer):
    """``‖Δ_l‖ / ‖h_l‖`` at every token, ``[B, T]``, where ``Δ_l = h_{l+1} − h_l`` (P1 Fig. 2; chapter 1)."""
    h_in, h_out = _residual_around(lm, input_ids, layer)
    delta = h_out - h_in                                  # what the whole layer adds
    return delta.norm(dim=-1) / h_in.norm(dim=-1)         # norms over the hidden axis, one per token
