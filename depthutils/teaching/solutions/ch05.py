"""Chapter 5, integrated gradients: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import numpy as np
import torch

from depthutils.teaching.solutions.common import _answer_gradient, _residual_around

__all__ = ["ig_riemann", "ig_gauss"]


def ig_riemann(lm, input_ids, layer, predict_positions, answer_ids, steps):
    """P1 Fig. 6a: integrated gradients of ``f = Σ_answer p(gold)`` with respect to the output of ``layer``,
    summed over the hidden axis, ``[T]`` (chapter 5): the left Riemann sum over ``k = 0 … steps-1`` of
    ``∂f/∂x (b + (k/K)(x − b)) · (x − b) / K`` with ``b`` the mean of ``x`` over positions."""
    _, x = _residual_around(lm, input_ids, layer)      # x: the layer's output, [1, T, d]
    b = x.mean(dim=1, keepdim=True)                     # mean over positions (dim 1), not over the hidden axis
    total = torch.zeros(x.shape[1])
    for k in range(steps):
        point = b + (k / steps) * (x - b)                 # the point at α = k/K on the path
        grad = _answer_gradient(lm, input_ids, layer, point, predict_positions, answer_ids)   # the layer outputs it
        total += (grad * (x - b)).sum(-1)[0].detach() / steps
    return total


def ig_gauss(lm, input_ids, layer, predict_positions, answer_ids, steps):
    """Integrated gradients of ``f = Σ_answer p(gold)`` with respect to the output ``x`` of ``layer`` by
    ``steps``-point Gauss–Legendre quadrature on ``[0, 1]``, summed over the hidden axis, ``[T]`` (chapter 5):
    ``A[t] = Σ_k w_k Σ_d ∂f/∂x(b + α_k(x − b))[t, d] · (x − b)[t, d]``, with the Legendre nodes ``u_k`` and
    weights ``v_k`` of ``[−1, 1]`` moved to ``[0, 1]``: ``α_k = (u_k + 1)/2``, ``w_k = v_k/2`` (they sum to 1);
    ``b`` is the mean of ``x`` over positions."""
    u, v = np.polynomial.legendre.leggauss(steps)       # nodes and weights on [-1, 1]
    alphas, weights = (u + 1) / 2, v / 2                 # on [0, 1]: the weights now sum to 1, not 2
    _, x = _residual_around(lm, input_ids, layer)        # x: the layer's output, [1, T, d]
    b = x.mean(dim=1, keepdim=True)                      # mean over positions
    total = torch.zeros(x.shape[1])
    for a, w in zip(alphas, weights):
        grad = _answer_gradient(lm, input_ids, layer, b + float(a) * (x - b), predict_positions, answer_ids)
        assert grad.shape == x.shape
        total += float(w) * (grad * (x - b)).sum(-1)[0].detach()
    return total
