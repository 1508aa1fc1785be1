"""P2's effective-depth thresholds on a per-layer curve (spec §8), as P2's released code computes them.

A curve has ``L`` entries, one per layer ``l = 0 … L−1`` (the lens on ``h_l``, the residual entering layer
``l``; the cosines of layer ``l``'s updates), and every search runs over ``l = 0 … L−2``. Plain functions of a
curve, shared by the logit lens (which reports where its curves cross) and by
:mod:`depthutils.measures.effective_depth`. Each returns ``None`` when no layer qualifies: undefined, never 0.
"""
from __future__ import annotations

import numpy as np

from depthutils.core.depth import layer_depth


def ed_cos(mean_cos) -> int | None:
    """The last ``l`` in ``0 … L−2`` with ``c̄_l < 0`` and ``c̄_{l+1} ≥ 0``; None if there is none."""
    c = np.asarray(mean_cos, dtype=float)
    hits = [l for l in range(len(c) - 1) if c[l] < 0 <= c[l + 1]]
    return hits[-1] if hits else None


def ed_kl(kl) -> int | None:
    """The first ``l`` in ``0 … L−2`` with ``KL_l < 0.5 · max KL`` (the maximum over all ``L`` entries); None if
    there is none."""
    v = np.asarray(kl, dtype=float)
    if v.size == 0 or not np.isfinite(v).all():
        return None
    hits = np.flatnonzero(v[:-1] < 0.5 * v.max())
    return int(hits[0]) if hits.size else None


def peaks_at_embedding(kl) -> bool:
    """Whether the KL curve's maximum is its first entry, the lens on ``h_0`` (the embedding, before any layer has
    written). ED_KL is then the first layer that halves the embedding's KL, whatever the later layers do: 1 on a
    curve that falls at once, at every depth, so it says nothing about how deep the model computes."""
    v = np.asarray(kl, dtype=float)
    return bool(v.size) and bool(np.isfinite(v).all()) and int(np.argmax(v)) == 0


#: P2's overlap threshold: ED_overlap is the first layer whose top-5 overlap exceeds it
OVERLAP_THRESHOLD = 0.3


def ed_overlap(overlap, threshold: float = OVERLAP_THRESHOLD) -> int | None:
    """The first ``l`` in ``0 … L−2`` with ``overlap_l > threshold`` (P2: 0.3); None if there is none."""
    hits = np.flatnonzero(np.asarray(overlap, dtype=float)[:-1] > threshold)
    return int(hits[0]) if hits.size else None


def ratio(ed: int | None, n_layers: int) -> float | None:
    """P2's ratio ``(ED + 1) / L``, layer ED's relative depth (:func:`depthutils.core.depth.layer_depth`), or None
    when ED is undefined."""
    return layer_depth(ed, n_layers)
