"""Statistics over seeds (``depthutils.core.seeds``) against independent formulas."""
from __future__ import annotations

import numpy as np
import pytest

from depthutils.core.seeds import sd, t95, t_band


def test_t95_is_students_quantile():
    """Against the t density integrated numerically (an independent formula): the CDF at t95(df) is 0.975."""
    from math import lgamma, pi

    for df in (1, 2, 4, 9, 10, 11, 15, 30, 100):
        q = t95(df)
        x = np.linspace(0, q, 200_001)
        pdf = np.exp(lgamma((df + 1) / 2) - lgamma(df / 2)) / np.sqrt(df * pi) * (1 + x ** 2 / df) ** (-(df + 1) / 2)
        assert 0.5 + np.trapezoid(pdf, x) == pytest.approx(0.975, abs=2e-5), df
    with pytest.raises(ValueError, match="df must be at least 1"):
        t95(0)


def test_the_band_is_the_mean_and_t_times_the_larger_spread():
    """numpy's mean and sample sd; a wider ``spread`` widens the band, a narrower one leaves the values' own."""
    x = [0.1, 0.3, 0.2, 0.25, 0.15]
    own = np.std(x, ddof=1)
    assert sd(x) == pytest.approx(own)
    half = 2.7764 * own / np.sqrt(5)
    assert t_band(x) == pytest.approx((np.mean(x) - half, np.mean(x) + half))
    assert t_band(x, own / 2) == pytest.approx(t_band(x))
    assert t_band(x, 3 * own) == pytest.approx((np.mean(x) - 3 * half, np.mean(x) + 3 * half))
    with pytest.raises(ValueError, match="at least two values"):
        sd([1.0])
