"""Chapter 8, shared layers: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["later_effect", "later_ratio"]


def later_effect(lm, input_ids, layer, later, position):
    """P1 Fig. 3's effect of skipping ``layer`` (on positions ``[1, position)``) on a later layer ``later``:
    ``max over p ≥ position of ‖Δ_j[p] − Δ'_j[p]‖ / ‖Δ_j[p]‖`` with ``j = later`` (one prompt, ``[1, T]``)."""
    assert later > layer
    seen = {}

    def record(module, args, output):
        seen.setdefault("runs", []).append(output - args[0])      # Δ_j = h_{j+1} − h_j

    def skip(module, args, output):
        h_new = output.clone()
        h_new[:, 1:position] = args[0][:, 1:position]
        return h_new

    watch = lm.hf_layer(later).register_forward_hook(record)
    try:
        with torch.no_grad():
            lm.hf(input_ids)                                        # clean run: Δ_j
            hook = lm.hf_layer(layer).register_forward_hook(skip)
            try:
                lm.hf(input_ids)                                    # skipped run: Δ'_j
            finally:
                hook.remove()
    finally:
        watch.remove()
    clean, skipped = seen["runs"]
    ratio = (clean - skipped).norm(dim=-1) / clean.norm(dim=-1)   # [1, T]
    return float(ratio[0, position:].max())


def later_ratio(D):
    """Chapter 8's first depth-use number from a future-effect matrix ``D [L, L]`` (``D[s, j]``, only
    ``j > s`` counts): each layer's mean effect on the layers above it, ``e_s = mean_{j>s} D[s, j]`` (the last
    layer has none: undefined), then the mean of ``e_s`` over the second half of the layers divided by its
    mean over the first half (the middle layer of an odd ``L`` goes to the first half; undefined ``e_s``
    are left out)."""
    D = np.asarray(D, dtype=float)
    L = D.shape[0]
    assert D.shape == (L, L)
    e = np.array([np.nanmean(D[s, s + 1:]) for s in range(L - 1)] + [np.nan])   # [L]: e_{L-1} undefined
    mid = (L + 1) // 2                                   # first half: layers 0 … mid-1
    first, second = np.nanmean(e[:mid]), np.nanmean(e[mid:])
    return float(second / first)
