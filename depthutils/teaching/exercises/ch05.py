"""Chapter 5, integrated gradients: integrated gradients on one layer, by a Riemann sum (5.2, core) and by
Gauss–Legendre quadrature (5.4, stretch).

The chapter's prediction exercise is 5.1 and its "Where are the steps?" 5.3 (prose only, on the page); 5.2
and 5.4 are checked by :func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from depthutils.core.prompts import Prompt
from depthutils.measures.integrated_gradients import integrated_gradients
from depthutils.teaching import solutions
from depthutils.teaching.exercises.core import _LAYER_INPUT, _NEXT_LAYER, Exercise, register
from depthutils.teaching.exercises.inputs import _answer, _model


def _ig_terms(lm, case, baseline, alphas, weights=None) -> torch.Tensor:
    """``Σ_k w_k ∂f/∂x(b + α_k(x − b)) ⊙ (x − b)`` per hidden unit, ``[T, d]``, for the output ``x`` of layer
    ``case["layer"]``, a baseline ``baseline(x)``, the points ``alphas`` and the weights ``weights`` (default
    ``1/K`` each, ``K = len(alphas)``)."""
    ids, l = case["input_ids"], case["layer"]
    _, x = solutions._residual_around(lm, ids, l)
    b = baseline(x)
    total = torch.zeros(x.shape[1:])
    weights = [1 / len(alphas)] * len(alphas) if weights is None else weights
    for a, w in zip(alphas, weights):
        grad = solutions._answer_gradient(lm, ids, l, b + float(a) * (x - b), case["predict_positions"],
                                          case["answer_ids"])
        total += float(w) * (grad * (x - b))[0].detach()
    return total


@functools.lru_cache(maxsize=None)
def _ig_mistaken(name: str, layer: int, steps: int) -> dict:
    lm = _model(name)
    case = dict(_answer(lm, _ig(name, steps)[0]), layer=layer)
    K = steps
    left, right = [k / K for k in range(K)], [k / K for k in range(1, K + 1)]
    by_position = lambda x: x.mean(dim=1, keepdim=True)  # noqa: E731
    per_unit = _ig_terms(lm, case, by_position, left)
    return {"you averaged the baseline over the hidden axis: b is x's mean over the positions, "
            "`x.mean(dim=1, keepdim=True)`": _ig_terms(lm, case, lambda x: x.mean(dim=-1, keepdim=True), left).sum(-1),
            "this is a right Riemann sum (k = 1 … K): the left sum runs over k = 0 … K−1, so x itself "
            "(α = 1) is not a point": _ig_terms(lm, case, by_position, right).sum(-1),
            "your baseline is zero: b is x's mean over the positions": _ig_terms(lm, case, torch.zeros_like, left).sum(-1),
            "you did not divide by K: each of the K terms is weighted 1/K": K * per_unit.sum(-1),
            "you did not sum over the hidden axis: A[l, t] is one number per position, `.sum(-1)`": per_unit}


@functools.lru_cache(maxsize=None)
def _ig(name: str, steps: int):
    lm = _model(name)
    p = Prompt.from_parts("The spouse of the performer of Imagine is", " Yoko Ono")
    return p, integrated_gradients(lm, p, steps=steps, progress_bar=False).attribution


def _ig_mistakes(lm, case):
    """What the common wrong IG sums return (the cases all take the chapter's prompt, so they are cached)."""
    return _ig_mistaken(lm.name, case["layer"], case["steps"])


EXERCISE = Exercise(
    "ig_riemann", "05_integrated_gradients", "Integrated gradients on one layer, by a Riemann sum",
    "ig_riemann(lm, input_ids, layer, predict_positions, answer_ids, steps) -> torch.Tensor",
    "A[l, t] for every position t, [T]: the left Riemann sum over k = 0 … K−1 of ∂f/∂x(b + (k/K)(x − b)) · "
    "(x − b) / K, summed over the hidden axis, with x the output of layer `layer`, b its mean over positions "
    "and f = Σ p(answer token)",
    difficulty=4, importance=3,
    hints=("A forward hook that *returns* a tensor replaces the layer's output: return the interpolated "
           "point, made with `requires_grad_(True)`, and take `torch.autograd.grad(f, point)`.",
           "The baseline is the mean over positions (dim=1 of [1, T, d]), not over the hidden axis.",
           "Left Riemann sum: k = 0 … K−1, so the point at α = 1 (x itself) is not included."),
    cases=lambda lm: [dict(_answer(lm, _ig(lm.name, 8)[0]), layer=l, steps=8) for l in (2, 6)],
    reference=lambda lm, case: _ig(lm.name, case["steps"])[1][case["layer"]],
    axes=("position",), mistakes=_ig_mistakes,
    shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}},
    number="5.2")


@functools.lru_cache(maxsize=None)
def _ig_gauss(name: str, steps: int):
    """The library's Gauss–Legendre attribution ``[L, T]`` of the chapter's prompt."""
    lm = _model(name)
    p, _ = _ig(name, 8)
    return integrated_gradients(lm, p, steps=steps, rule="gauss", progress_bar=False).attribution


@functools.lru_cache(maxsize=None)
def _gauss_mistaken(name: str, layer: int, steps: int) -> dict:
    lm = _model(name)
    case = dict(_answer(lm, _ig(name, 8)[0]), layer=layer)
    u, v = np.polynomial.legendre.leggauss(steps)
    nodes, w = (u + 1) / 2, v / 2
    by_position = lambda x: x.mean(dim=1, keepdim=True)  # noqa: E731
    per_unit = _ig_terms(lm, case, by_position, nodes, w)
    return {"these are the Legendre nodes and weights of [−1, 1]: move them to [0, 1], α_k = (u_k + 1)/2 and "
            "w_k = v_k/2": _ig_terms(lm, case, by_position, u, v).sum(-1),
            "your weights sum to 2, not 1: on [0, 1] the Legendre weights are halved, w_k = v_k/2": 2 * per_unit.sum(-1),
            "you weighted every node 1/K: each Gauss–Legendre node has its own weight w_k = v_k/2":
            _ig_terms(lm, case, by_position, nodes).sum(-1),
            "this is 5.2's left Riemann sum (α = k/K): use the Gauss–Legendre nodes, "
            "`np.polynomial.legendre.leggauss(steps)`": _ig_terms(lm, case, by_position, np.arange(steps) / steps).sum(-1),
            "your baseline is zero: b is x's mean over the positions":
            _ig_terms(lm, case, torch.zeros_like, nodes, w).sum(-1),
            "you did not sum over the hidden axis: A[t] is one number per position, `.sum(-1)`": per_unit}


EXERCISE_GAUSS = Exercise(
    "ig_gauss", "05_integrated_gradients", "Integrated gradients by Gauss–Legendre quadrature",
    "ig_gauss(lm, input_ids, layer, predict_positions, answer_ids, steps) -> torch.Tensor",
    "A[t] for every position t, [T]: Σ_k w_k · ∂f/∂x(b + α_k(x − b)) · (x − b), summed over the hidden axis, "
    "with the `steps`-point Gauss–Legendre nodes α_k and weights w_k moved from [−1, 1] to [0, 1], x the output "
    "of layer `layer`, b its mean over positions and f = Σ p(answer token)",
    difficulty=4, importance=2,
    hints=("`u, v = np.polynomial.legendre.leggauss(steps)` gives nodes and weights on [−1, 1]; on [0, 1] the "
           "nodes are (u + 1)/2 and the weights v/2 (they must sum to 1, the length of the path).",
           "The path, the baseline and f are 5.2's: only the points and their weights change.",
           "No node is at α = 0 or α = 1: Gauss–Legendre puts its nodes inside the interval."),
    cases=lambda lm: [dict(_answer(lm, _ig(lm.name, 8)[0]), layer=l, steps=4) for l in (3, 6)],
    reference=lambda lm, case: _ig_gauss(lm.name, case["steps"])[case["layer"]],
    axes=("position",), mistakes=lambda lm, case: _gauss_mistaken(lm.name, case["layer"], case["steps"]),
    shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}},
    number="5.4")

register(EXERCISE, EXERCISE_GAUSS)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
