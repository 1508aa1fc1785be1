"""Chapter 9, depth across scale: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import numpy as np
import torch

from depthutils.teaching.solutions.common import _layer_parts

__all__ = ["effective_depth_kl", "mean_cosine"]


def effective_depth_kl(kl):
    """P2's ED_KL: the first layer ``l`` in ``0 … L−2`` with ``KL_l < 0.5 · max KL`` (the maximum over all ``L``
    entries), or None when no layer qualifies (undefined, not 0) (chapter 9). As P2's code, the search stops
    before the last entry."""
    kl = np.asarray(kl, dtype=float)
    for l in range(len(kl) - 1):
        if kl[l] < 0.5 * kl.max():
            return l
    return None


def mean_cosine(lm, input_ids):
    """P2's ``c̄_l`` for every layer, ``[L]`` (the curve ED_cos reads, chapter 9): the mean of the three
    cosines ``cos(a_l, h_l)``, ``cos(m_l, h_l + a_l)`` and ``cos(Δ_l, h_l)``, each taken per token over the
    hidden axis and averaged over every token of every prompt (BOS included)."""
    cos = torch.nn.functional.cosine_similarity
    curve = []
    for h, a, m, out in _layer_parts(lm, input_ids):      # h_l, a_l, m_l, h_{l+1} of each layer
        assert h.shape == a.shape == m.shape == (*input_ids.shape, h.shape[-1])
        delta = out - h                                   # Δ_l = h_{l+1} − h_l
        three = (cos(a, h, dim=-1) + cos(m, h + a, dim=-1) + cos(delta, h, dim=-1)) / 3   # [B, T]
        curve.append(three.mean())                        # over every token of every prompt
    return torch.stack(curve)
