"""Chapter 7, cross-model mapping: a linear map between two layers, scored on held-out text.

The chapter's prediction exercise is 7.1 (prose only, on the page); this is 7.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from .. import data
from ..cross_model_mapping import _with_bias, fit_maps, residuals
from .core import Exercise, register
from .inputs import _encoded, _model


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
    Xb = _with_bias(X)
    W = fit_maps((Xb.T @ Xb)[None], (Xb.T @ Y)[None], ridge=0.0)[0]
    pred = _with_bias(torch.as_tensor(case["X_test"])) @ W
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

register(EXERCISE)
