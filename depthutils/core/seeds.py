"""Statistics over seeds, the unit of replication of a trained run: Student's t band of a mean of a few values.

    t_band(values, spread=None) -> (lo, hi)    mean ± t95(n − 1) · max(sd(values), spread) / √n
"""
from __future__ import annotations

import math

__all__ = ["t95", "sd", "t_band"]

#: Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom 1–10
_T95 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281)


def t95(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom: the table to 10, then the Cornish–Fisher
    series in ``1/df`` around the normal's 1.959964 (within 1e-3 from 11 on)."""
    if df < 1:
        raise ValueError(f"df must be at least 1, got {df}.")
    if df <= len(_T95):
        return _T95[df - 1]
    z = 1.959964
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


def sd(values) -> float:
    """The sample standard deviation (``n − 1`` in the denominator) of at least two values."""
    values = list(values)
    if len(values) < 2:
        raise ValueError(f"sd needs at least two values, got {len(values)}.")
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def t_band(values, spread: float | None = None) -> tuple[float, float]:
    """``mean ± t95(n − 1) · σ / √n`` of ``n ≥ 2`` values, ``σ`` the larger of their standard deviation and
    ``spread`` (another sample's, to grade against; None: their own)."""
    values = list(values)
    s = sd(values) if spread is None else max(sd(values), spread)
    mean, half = sum(values) / len(values), t95(len(values) - 1) * s / math.sqrt(len(values))
    return mean - half, mean + half
