"""Chapter 6, the depth score: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import numpy as np

__all__ = ["depth_score"]


def depth_score(D):
    """P1's depth score of a future-effect matrix ``D [L, L]`` (only ``j > s`` counts):
    ``r_s = Σ_{j>s} D[s, j] / (L−1−s)`` and ``Σ_s s·r_s / Σ_s r_s`` (chapter 6)."""
    D = np.asarray(D, dtype=float)
    L = D.shape[0]
    r = np.array([np.nansum(D[s, s + 1:]) / (L - 1 - s) for s in range(L - 1)])
    return float((np.arange(L - 1) * r).sum() / r.sum())
