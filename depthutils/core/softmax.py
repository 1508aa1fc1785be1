"""Softmax over a large vocabulary on a CPU without subnormal floats.

The exponentials of tokens far below the largest logit are subnormal float32s (below about 1.2e-38), and x86
CPUs compute with those many times more slowly: on Gemma 3's 262,144-token vocabulary a float32 softmax or lens
spends most of its time there. Every term ``e^{z−max}`` below ``e^{SUBNORMAL}`` is taken at that value, which adds
less than 1e-31 to a sum over a million tokens.
"""
from __future__ import annotations

import torch

__all__ = ["SUBNORMAL", "probabilities"]

#: ``z − max`` below which ``e^{z−max}`` is taken at ``e^{SUBNORMAL}`` (≈ 1.6e-38, the smallest normal float32s)
SUBNORMAL = -87.0


def probabilities(logits: torch.Tensor) -> torch.Tensor:
    """``softmax(logits, -1)`` in float32 (a new tensor), with no subnormal term (:data:`SUBNORMAL`)."""
    p = logits.float()
    if p.data_ptr() == logits.data_ptr():
        p = p.clone()
    p = p.sub_(p.amax(-1, keepdim=True)).clamp_min_(SUBNORMAL).exp_()
    return p.div_(p.sum(-1, keepdim=True))
