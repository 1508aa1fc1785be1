"""Chapter 7, cross-model mapping: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import numpy as np

__all__ = ["map_error", "diagonal_distance"]


def map_error(X_fit, Y_fit, X_test, Y_test):
    """P1's cross-model mapping error: fit ``y ≈ W x + c`` by least squares on the fitting tokens
    (``[N, d_x]``, ``[N, d_y]``), return the token mean of ``‖ŷ − y‖ / ‖y‖`` on the held-out tokens (chapter 7)."""
    def with_bias(X):
        return np.hstack([X, np.ones((X.shape[0], 1))])          # a column of ones: the bias c

    W, *_ = np.linalg.lstsq(with_bias(np.asarray(X_fit, float)), np.asarray(Y_fit, float), rcond=None)
    pred = with_bias(np.asarray(X_test, float)) @ W
    Y_test = np.asarray(Y_test, float)
    return float(np.mean(np.linalg.norm(pred - Y_test, axis=1) / np.linalg.norm(Y_test, axis=1)))


def diagonal_distance(error, n_perm, seed):
    """How far the best matches of a mapping heatmap ``error [L_src, L_tgt]`` lie from P1's relative-depth
    diagonal, and how often chance does as well (chapter 7): ``best_s = argmin_j error[s, j]``,
    ``d = mean_s |(best_s + 1)/L_tgt − (s + 1)/L_src|``; chance permutes the target layers ``n_perm`` times
    (``perms = np.argsort(np.random.default_rng(seed).random((n_perm, L_tgt)), axis=1)``, target ``j`` →
    ``perms[:, j]``), and the chapter's verdict compares ``d`` with the 5th percentile ``q05`` of those permuted
    distances (``d < q05``: closer to the diagonal than chance). Returns ``[d, q05]``."""
    error = np.asarray(error, float)
    Ls, Lt = error.shape
    best = error.argmin(axis=1)                          # for each SOURCE layer (row), its best target
    src = (np.arange(Ls) + 1) / Ls                       # relative depth of layer s: (s+1)/L, the last is 1
    d = np.abs((best + 1) / Lt - src).mean()
    perms = np.argsort(np.random.default_rng(seed).random((n_perm, Lt)), axis=1)   # [n_perm, Lt]
    null = np.abs((perms[:, best] + 1) / Lt - src).mean(axis=1)                    # [n_perm]
    return np.array([d, np.percentile(null, 5)])
