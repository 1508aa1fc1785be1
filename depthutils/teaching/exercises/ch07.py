"""Chapter 7, cross-model mapping: a linear map between two layers, scored on held-out text (7.2, core), and
how far a heatmap's best matches lie from the relative-depth diagonal, against chance (7.3, stretch).

The chapter's prediction exercise is 7.1 (prose only, on the page); 7.2 and 7.3 are checked by
:func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from depthutils import data
from depthutils.measures.cross_model_mapping import MappingResult, fit_maps, residuals, with_bias
from depthutils.teaching.exercises.core import Exercise, register
from depthutils.teaching.exercises.inputs import _encoded, _model


@functools.lru_cache(maxsize=None)
def _mapping_data(name: str, source: int, target: int):
    """Residuals of the embedded model (BOS excluded): layer ``source``'s output → layer ``target``'s,
    fitted on 6 GSM8K problems and scored on 2 others, float64 ``[tokens, d]``."""
    lm = _model(name)
    hs = [residuals(lm, _encoded(lm, p, 96).input_ids)[:, 1:] for p in data.gsm8k(8)]
    X = [h[source].numpy() for h in hs]
    Y = [h[target].numpy() for h in hs]
    return np.vstack(X[:6]), np.vstack(Y[:6]), np.vstack(X[6:]), np.vstack(Y[6:])


def _map_reference(lm, case):
    X, Y = torch.as_tensor(case["X_fit"]), torch.as_tensor(case["Y_fit"])
    Xb = with_bias(X)
    W = fit_maps((Xb.T @ Xb)[None], (Xb.T @ Y)[None], ridge=0.0)[0]
    pred = with_bias(torch.as_tensor(case["X_test"])) @ W
    y = torch.as_tensor(case["Y_test"])
    return float(((pred - y).norm(dim=-1) / y.norm(dim=-1)).mean())


def _map_mistakes(lm, case):
    X, Y, Xt, Yt = (np.asarray(case[k], float) for k in ("X_fit", "Y_fit", "X_test", "Y_test"))
    W, *_ = np.linalg.lstsq(X, Y, rcond=None)
    no_bias = float(np.mean(np.linalg.norm(Xt @ W - Yt, axis=1) / np.linalg.norm(Yt, axis=1)))
    Wt, *_ = np.linalg.lstsq(np.hstack([Xt, np.ones((len(Xt), 1))]), Yt, rcond=None)
    pred = np.hstack([Xt, np.ones((len(Xt), 1))]) @ Wt
    on_test = float(np.mean(np.linalg.norm(pred - Yt, axis=1) / np.linalg.norm(Yt, axis=1)))
    ones = lambda A: np.hstack([A, np.ones((len(A), 1))])  # noqa: E731
    Wb, *_ = np.linalg.lstsq(ones(X), Y, rcond=None)
    err, fit_err = ones(Xt) @ Wb - Yt, ones(X) @ Wb - Y
    n, ny = np.linalg.norm(err, axis=1), np.linalg.norm(Yt, axis=1)
    return {"the map has no bias: append a column of ones to X (y ≈ W x + c)": no_bias,
            "you fitted the map on the held-out tokens: fit on X_fit, Y_fit and score on X_test, Y_test": on_test,
            "you scored the map on the tokens it was fitted on: score it on the held-out X_test, Y_test":
            float(np.mean(np.linalg.norm(fit_err, axis=1) / np.linalg.norm(Y, axis=1))),
            "this is the absolute error ‖ŷ − y‖: divide each token's error by its ‖y‖": float(n.mean()),
            "this is mean ‖ŷ − y‖ / mean ‖y‖, a ratio of means: divide per token, then average": float(n.mean() / ny.mean()),
            "this is the squared relative error ‖ŷ − y‖² / ‖y‖²: take norms, not their squares": float(np.mean(n**2 / ny**2)),
            "these norms run over the tokens (axis=0): take them over the hidden axis (axis=1), one per token":
            float(np.mean(np.linalg.norm(err, axis=0) / np.linalg.norm(Yt, axis=0)))}


EXERCISE = Exercise(
    "map_error", "07_cross_model_mapping", "A linear map between two layers, scored on held-out text",
    "map_error(X_fit, Y_fit, X_test, Y_test) -> float",
    "fit y ≈ W x + c by least squares on the fitting tokens ([N, d] each) and return the token mean of "
    "‖ŷ − y‖ / ‖y‖ on the held-out tokens",
    difficulty=2, importance=3,
    hints=("`np.linalg.lstsq` solves least squares; a column of ones appended to X gives the bias.",
           "The error is relative per token (norm over the hidden axis), then averaged over tokens."),
    cases=lambda lm: [dict(zip(("X_fit", "Y_fit", "X_test", "Y_test"), _mapping_data(lm.name, s, j)))
                      for s, j in ((1, 5), (3, 2))],
    reference=_map_reference, mistakes=_map_mistakes,
    number="7.2")


# --------------------------------------------------------------------- 7.3, distance from the diagonal
def _heatmap(Ls: int, Lt: int, seed: int) -> np.ndarray:
    """A synthetic held-out error heatmap ``[Ls, Lt]``: smallest near the relative-depth diagonal, with noise
    (and, for a deeper target, rows that are nearly flat over several target layers, as the book's models give)."""
    rng = np.random.default_rng(seed)
    src, tgt = (np.arange(Ls) + 1) / Ls, (np.arange(Lt) + 1) / Lt
    return 0.3 + 0.5 * np.abs(src[:, None] - tgt[None] - 0.1) + 0.08 * rng.random((Ls, Lt))


def _distance_reference(lm, case):
    E = np.asarray(case["error"], float)
    r = MappingResult(error=E, best=E.argmin(axis=1))
    return np.array([r.diagonal_distance(), np.percentile(r.null_distances(case["n_perm"], case["seed"]), 5)])


def _distance(E, n_perm, seed, best=None, src=None, tgt=None, signed=False, q=5):
    """:func:`depthutils.teaching.solutions.diagonal_distance` with one step replaced (``best``, the relative depths
    ``src(L)`` and ``tgt(L)``, the sign, the percentile)."""
    Ls, Lt = E.shape
    best = E.argmin(axis=1) if best is None else best
    rel = (lambda L: (np.arange(L) + 1) / L)  # noqa: E731
    s, t = (src or rel)(Ls), (tgt or rel)(Lt)
    gap = lambda b: (b - s) if signed else np.abs(b - s)  # noqa: E731
    perms = np.argsort(np.random.default_rng(seed).random((n_perm, Lt)), axis=1)
    return np.array([gap(t[best]).mean(), np.percentile(gap(t[perms[:, best]]).mean(axis=1), q)])


def _distance_mistakes(lm, case):
    E, n, seed = np.asarray(case["error"], float), case["n_perm"], case["seed"]
    zero_based = lambda L: np.arange(L) / L  # noqa: E731
    return {"you took the best source for each target layer (the argmin over axis 0, the transposed heatmap): "
            "the best match is per source layer, `error.argmin(axis=1)`": _distance(E.T, n, seed),
            "you took the worst match (argmax): the best target has the least error, `argmin`":
            _distance(E, n, seed, best=E.argmax(axis=1)),
            "your relative depth is l / L: layer l is at (l + 1) / L, so the last layer is at 1":
            _distance(E, n, seed, src=zero_based, tgt=zero_based),
            "your relative depth is l / (L − 1): P1 places layer l at (l + 1) / L":
            _distance(E, n, seed, src=lambda L: np.arange(L) / (L - 1), tgt=lambda L: np.arange(L) / (L - 1)),
            "you averaged the signed distances: take |best − source| before the mean, or shallow and deep "
            "misses cancel": _distance(E, n, seed, signed=True),
            "this compares with the median of chance: the verdict's threshold is its 5th percentile":
            _distance(E, n, seed, q=50),
            "this is chance's 95th percentile: the verdict's threshold is its 5th": _distance(E, n, seed, q=95)}


EXERCISE_DISTANCE = Exercise(
    "diagonal_distance", "07_cross_model_mapping", "How far the best matches lie from the diagonal, against chance",
    "diagonal_distance(error, n_perm, seed) -> np.ndarray",
    "[d, q05]: d = mean over source layers s of |(best_s + 1)/L_tgt − (s + 1)/L_src| with best_s = argmin_{j} "
    "error[s, j], and q05 the 5th percentile of d over `n_perm` permutations of the target layers, "
    "`perms = np.argsort(np.random.default_rng(seed).random((n_perm, L_tgt)), axis=1)` (target j → perms[:, j])",
    difficulty=3, importance=4,
    hints=("Rows are source layers, columns target layers: the best target of source s is the argmin of row s.",
           "Relative depth: layer l of an L-layer model is at (l + 1) / L, so both models' last layers are at 1.",
           "A permutation relabels the target columns: apply it to `best` (perms[:, best]), so source layers that "
           "share a best target still share one."),
    cases=lambda lm: [dict(error=_heatmap(6, 10, 0), n_perm=500, seed=0),
                      dict(error=_heatmap(8, 16, 1), n_perm=500, seed=3)],
    reference=_distance_reference, mistakes=_distance_mistakes, model=None,
    number="7.3")

register(EXERCISE, EXERCISE_DISTANCE)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
