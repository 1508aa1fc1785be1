"""Softmax over a large vocabulary on a CPU without subnormal floats.

The exponentials of tokens far below the largest logit are subnormal float32s (below about 1.2e-38), and x86
CPUs compute with those many times more slowly: on Gemma 3's 262,144-token vocabulary a float32 softmax or lens
spends much of its time there. Every term ``e^{z−max}`` below ``e^{EXP_FLOOR}`` (≈ 5e-32) is taken at that value:
then a probability ``e^{z−max} / S`` stays a normal float for a vocabulary of up to three million tokens (``S`` is
at most the vocabulary's size), and the floor adds less than 1e-25 to a sum over a million tokens.
"""
from __future__ import annotations

import torch

__all__ = ["EXP_FLOOR", "logsumexp", "probabilities"]

#: ``z − max`` below which ``e^{z−max}`` is taken at ``e^{EXP_FLOOR}`` (see the module's docstring)
EXP_FLOOR = -72.0


def probabilities(logits: torch.Tensor) -> torch.Tensor:
    """``softmax(logits, -1)`` in float32 (a new tensor), with no subnormal term (:data:`EXP_FLOOR`)."""
    p = logits.to(torch.float32, copy=True)
    p = p.sub_(p.amax(-1, keepdim=True)).clamp_min_(EXP_FLOOR).exp_()
    return p.div_(p.sum(-1, keepdim=True))


def logsumexp(logits: torch.Tensor) -> torch.Tensor:
    """``logsumexp(logits, -1)`` in float32, with no subnormal term (:data:`EXP_FLOOR`)."""
    z = logits.to(torch.float32)
    m = z.amax(-1, keepdim=True)
    return (z - m).clamp_min_(EXP_FLOOR).exp_().sum(-1).log_().add_(m.squeeze(-1))
