"""Chapter 7, cross-model mapping: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import numpy as np

__all__ = ["map_error"]


def map_error(X_fit, Y_fit, X_test, Y_test):
    """P1's cross-model mapping error: fit ``y ≈ W x + c`` by least squares on the fitting tokens
    (``[N, d_x]``, ``[N, d_y]``), return the token mean of ``‖ŷ − y‖ / ‖y‖`` on the held-out tokens (chapter 7)."""
    def with_bias(X):
        return np.hstack([X, np.ones((X.shape[0], 1))])          # a column of ones: the bias c

    W, *_ = np.linalg.lstsq(with_bias(np.asarray(X_fit, float)), np.asarray(Y_fit, float), rcond=None)
    pred = with_bias(np.asarray(X_test, float)) @ W
    Y_test = np.asarray(Y_test, float)
    return float(np.mean(np.linalg.norm(pred - Y_test, axis=1) / np.linalg.norm(Y_test, axis=1)))
