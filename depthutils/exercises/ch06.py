"""Chapter 6, the depth score: the depth score of a future-effect matrix.

The chapter's prediction exercise is 6.1 (prose only, on the page); this is 6.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import numpy as np

from ..depth_score import score
from .core import Exercise, register


def _random_D(L: int, seed: int, zero_rows: tuple = ()) -> np.ndarray:
    D = np.random.default_rng(seed).uniform(0.0, 1.0, (L, L))
    D[np.tril_indices(L)] = np.nan
    for s in zero_rows:
        D[s] = np.where(np.isnan(D[s]), np.nan, 0.0)
    return D


def _depth_mistakes(lm, case):
    D = np.asarray(case["D"], float)
    L = D.shape[0]
    sums = np.array([np.nansum(D[s, s + 1:]) for s in range(L - 1)])
    r = sums / (L - 1 - np.arange(L - 1))
    s = np.arange(L - 1)
    return {"you did not average r_s over the later layers: divide each row's sum by L−1−s": (s * sums).sum() / sums.sum(),
            "this is the normalised score, divided by L−1: return the score in layers": (s * r).sum() / r.sum() / (L - 1),
            "off by one: the weight of row s is s (layer 0 weighs 0), not s+1": ((s + 1) * r).sum() / r.sum(),
            "off by one in the average: row s has L−1−s later layers, so divide its sum by L−1−s, not L−s":
            (s * sums / (L - s)).sum() / (sums / (L - s)).sum(),
            "your answer is NaN: D is NaN where j ≤ s, so sum each row with `np.nansum`, and let s run over "
            "0 … L−2 (the last layer has no later layer)": np.nan}


EXERCISE = Exercise(
    "depth_score", "06_depth_score", "The depth score of a future-effect matrix",
    "depth_score(D) -> float",
    "Σ_s s·r_s / Σ_s r_s with r_s = Σ_{j>s} D[s, j] / (L−1−s), for D [L, L] (NaN where j ≤ s)",
    difficulty=1, importance=3,
    hints=("Row s of D holds the effects of skipping layer s on the later layers j > s; `np.nansum` "
           "ignores the NaNs below the diagonal.",
           "The last layer has no later layer: s runs over 0 … L−2."),
    cases=lambda lm: [dict(D=_random_D(8, 0)), dict(D=_random_D(6, 1, zero_rows=(0, 1)))],
    reference=lambda lm, case: score(case["D"]), mistakes=_depth_mistakes, model=None,
    number="6.2")

register(EXERCISE)
