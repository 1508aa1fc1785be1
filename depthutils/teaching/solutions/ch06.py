"""Chapter 6, the depth score: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import numpy as np

__all__ = ["depth_score", "slope_interval"]


def depth_score(D):
    """P1's depth score of a future-effect matrix ``D [L, L]`` (only ``j > s`` counts):
    ``r_s = Σ_{j>s} D[s, j] / (L−1−s)`` and ``Σ_s s·r_s / Σ_s r_s`` (chapter 6)."""
    D = np.asarray(D, dtype=float)
    L = D.shape[0]
    r = np.array([np.nansum(D[s, s + 1:]) / (L - 1 - s) for s in range(L - 1)])
    return float((np.arange(L - 1) * r).sum() / r.sum())


def _level_slope(scores, levels, order, n_layers):
    """Least-squares slope of the level means of ``scores / (n_layers − 1)`` against the level's rank."""
    x, y = [], []
    for rank, level in enumerate(order):
        v = scores[levels == level] / (n_layers - 1)
        v = v[np.isfinite(v)]                            # an undefined score (NaN) is left out
        if v.size:
            x.append(rank)
            y.append(v.mean())
    return np.polyfit(x, y, 1)[0] if len(x) >= 2 else np.nan


def slope_interval(scores, levels, n_layers, n_boot, seed):
    """The companion of P1's "does harder mean deeper?" statistic (ours; chapter 6 grades the slope of each
    level's max instead): the 95% bootstrap interval ``[lo, hi]`` of
    the slope of the level means of the normalised depth scores ``score / (L − 1)`` against the level's rank
    (0, 1, … in increasing level), resampling prompts *within* each level (stratified) with
    ``rng = np.random.default_rng(seed)``: per draw, for each level in increasing order,
    ``rng.choice(idx, idx.size)`` of that level's prompt indices ``idx``; the interval is ``np.nanpercentile``
    of the ``n_boot`` slopes at 2.5 and 97.5."""
    scores, levels = np.asarray(scores, float), np.asarray(levels)
    order = sorted(set(levels.tolist()))                 # levels in increasing difficulty
    strata = [np.flatnonzero(levels == lv) for lv in order]
    rng = np.random.default_rng(seed)
    slopes = []
    for _ in range(n_boot):
        idx = np.concatenate([rng.choice(g, g.size) for g in strata])   # resample inside each level
        slopes.append(_level_slope(scores[idx], levels[idx], order, n_layers))
    lo, hi = np.nanpercentile(slopes, [2.5, 97.5])
    return np.array([lo, hi])
