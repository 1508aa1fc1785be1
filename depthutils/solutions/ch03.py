"""Chapter 3, the logit lens: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

__all__ = ["lens_kl"]


def lens_kl(lm, input_ids, layer):
    """The logit lens at the output of ``layer``: ``KL(q_l ‖ q_L)`` at every token, ``[B, T]`` (chapter 3),
    with ``q_l = softmax(unembed(final_norm(h_{l+1})))`` and ``q_L`` the model's output. Read with nnsight."""
    with torch.no_grad(), lm.nn.trace(input_ids):
        h = lm.layer(layer).output                           # h_{l+1}, [B, T, d]
        lens_logits = lm.unembed(lm.final_norm(h)).save()    # the lens: the model's own head on h
        final_logits = lm.unembed.output.save()              # the model's output logits
    log_q = lens_logits.float().log_softmax(-1)
    log_p = final_logits.float().log_softmax(-1)
    return (log_q.exp() * (log_q - log_p)).sum(-1)          # KL(q_l ‖ q_L): the lens first
