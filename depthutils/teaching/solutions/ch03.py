"""Chapter 3, the logit lens: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

__all__ = ["lens_kl", "lens_overlap"]


def lens_kl(lm, input_ids, layer):
    """The logit lens on ``h_l``, the residual entering ``layer``: ``KL(q_l ‖ q_L)`` at every token, ``[B, T]``
    (chapter 3), with ``q_l = softmax(unembed(final_norm(h_l)))`` and ``q_L`` the model's output. Read with nnsight."""
    with torch.no_grad(), lm.nn.trace(input_ids):
        h = lm.layer(layer).input                            # h_l, [B, T, d]: the layer's input
        lens_logits = lm.unembed(lm.final_norm(h)).save()    # the lens: the model's own head on h
        final_logits = lm.unembed.output.save()              # the model's output logits
    log_q = lens_logits.float().log_softmax(-1)
    log_p = final_logits.float().log_softmax(-1)
    return (log_q.exp() * (log_q - log_p)).sum(-1)          # KL(q_l ‖ q_L): the lens first


def lens_overlap(lm, input_ids):
    """P1's second lens statistic: ``|top5(q_l) ∩ top5(q_L)| / 5`` at every layer ``l = 0 … L-1`` and token,
    ``[B, L, T]``, with ``q_l`` the lens on ``h_l``, the residual entering layer ``l`` (chapter 3). Read with nnsight."""
    L, k = lm.n_layers, 5
    lens = []                                                   # made before the trace, filled inside it
    with torch.no_grad(), lm.nn.trace(input_ids):
        for l in range(L):
            lens.append(lm.unembed(lm.final_norm(lm.layer(l).input)).save())    # the lens on h_l, [B, T, V]
        final = lm.unembed.output.save()
    top_final = final.topk(k, dim=-1).indices                                 # [B, T, k]
    rows = []
    for logits in lens:
        top = logits.topk(k, dim=-1).indices                                  # [B, T, k]
        shared = (top[..., :, None] == top_final[..., None, :]).any(-1)       # each lens token: in the output's?
        rows.append(shared.float().sum(-1) / k)                               # an unordered intersection
    out = torch.stack(rows, dim=1)
    assert out.shape == (input_ids.shape[0], L, input_ids.shape[1]), out.shape
    return out
