"""Chapter 9, effective depth across scale: P2's effective depth from a KL curve.

The chapter's prediction exercise is 9.1 (prose only, on the page); this is 9.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import numpy as np

from ..curves import ed_kl
from .core import Exercise, register


def _ed_mistakes(lm, case):
    kl = np.asarray(case["kl"], float)
    hits = np.flatnonzero(kl < 0.5 * kl.max())
    if not hits.size:
        return {"no layer qualifies here: return None (undefined), not 0": 0}
    return {"this is the last qualifying layer: ED_KL is the first l with KL_l < 0.5·max KL": int(hits[-1]),
            "off by one: return the layer index l itself, not l + 1 (the ratio uses ED + 1)": int(hits[0]) + 1,
            "this is P2's ratio (ED + 1) / L: return the layer index": (int(hits[0]) + 1) / len(kl),
            "a layer whose KL equals half the maximum does not qualify: the test is strict, KL_l < 0.5·max KL":
            int(np.flatnonzero(kl <= 0.5 * kl.max())[0]),
            "this compares with half of the first layer's KL: the threshold is half of the curve's maximum, "
            "0.5·max KL": next((l for l, v in enumerate(kl) if v < 0.5 * kl[0]), None)}


EXERCISE = Exercise(
    "effective_depth_kl", "09_depth_across_scale", "P2's effective depth from a KL curve",
    "effective_depth_kl(kl) -> int | None",
    "the first layer l with KL_l < 0.5 · max KL, or None when no layer qualifies",
    difficulty=1, importance=3,
    hints=("Compare each layer with half of the curve's maximum and stop at the first one below it.",
           "An undefined effective depth is None, never 0: 0 would claim the first layer already decides."),
    # each wrong answer differs from the right one first on a case where it equals no other known mistake
    # (2nd: the first layer is not the largest; 5th: a value exactly half the maximum)
    cases=lambda lm: [dict(kl=np.array(k, float)) for k in ([5.1, 4.2, 3.0, 2.2, 1.1, 0.0],
                                                             [3.0, 5.0, 4.0, 2.0, 1.8, 1.2, 0.0],
                                                             [0.4, 3.0, 2.9, 1.2, 0.6, 0.0],
                                                             [1.0, 1.0, 1.0, 1.0],
                                                             [4.0, 3.0, 2.0, 1.5, 1.0, 0.2, 0.0])],
    reference=lambda lm, case: ed_kl(case["kl"]), mistakes=_ed_mistakes, model=None,
    number="9.2")

register(EXERCISE)
