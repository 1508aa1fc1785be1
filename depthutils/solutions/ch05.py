"""Chapter 5, integrated gradients: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

from .common import _residual_around

__all__ = ["ig_riemann"]


def ig_riemann(lm, input_ids, layer, predict_positions, answer_ids, steps):
    """P1 Fig. 6a: integrated gradients of ``f = Σ_answer p(gold)`` with respect to the output of ``layer``,
    summed over the hidden axis, ``[T]`` (chapter 5): the left Riemann sum over ``k = 0 … steps-1`` of
    ``∂f/∂x (b + (k/K)(x − b)) · (x − b) / K`` with ``b`` the mean of ``x`` over positions."""
    _, x = _residual_around(lm, input_ids, layer)      # x: the layer's output, [1, T, d]
    b = x.mean(dim=1, keepdim=True)                     # mean over positions (dim 1), not over the hidden axis
    total = torch.zeros(x.shape[1])
    for k in range(steps):
        point = (b + (k / steps) * (x - b)).detach().requires_grad_(True)

        def put(module, args, output):
            return point                                 # the layer outputs the interpolated point

        hook = lm.hf_layer(layer).register_forward_hook(put)
        try:
            probs = lm.hf(input_ids).logits.float().softmax(-1)
        finally:
            hook.remove()
        f = probs[0, predict_positions, answer_ids].sum()
        (grad,) = torch.autograd.grad(f, point)
        total += (grad * (x - b)).sum(-1)[0].detach() / steps
    return total
