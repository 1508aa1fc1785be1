"""The one exception type users meet, and the finite-value check every measurement runs."""
from __future__ import annotations

import numpy as np


class DepthError(ValueError):
    """A problem the user can fix; its message names the problem and the fix in one sentence."""


class NothingFits(DepthError):
    """No prompt fits in ``max_tokens`` (a study reports such a task as not measured)."""


def check_finite(name: str, array: np.ndarray) -> np.ndarray:
    """Raise if ``array`` holds NaN or inf where a value was expected (never plot those as zeros).

    NaN entries that a result uses on purpose (e.g. the ``j <= s`` half of the
    future-effects matrix) must be masked out by the caller before the check.
    """
    a = np.asarray(array)
    bad = ~np.isfinite(a)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DepthError(
            f"{name} has {int(bad.sum())} non-finite value(s) (first at index {idx}): the model produced "
            "NaN/inf activations; try dtype='float32' or a shorter prompt."
        )
    return a
