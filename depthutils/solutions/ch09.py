"""Chapter 9, depth across scale: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import numpy as np

__all__ = ["effective_depth_kl"]


def effective_depth_kl(kl):
    """P2's ED_KL: the first layer ``l`` with ``KL_l < 0.5 · max KL``, or None when no layer qualifies
    (undefined, not 0) (chapter 9)."""
    kl = np.asarray(kl, dtype=float)
    for l, value in enumerate(kl):
        if value < 0.5 * kl.max():
            return l
    return None
