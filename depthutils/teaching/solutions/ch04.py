"""Chapter 4, residual erasure: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

from depthutils.teaching.solutions.common import _output_probs

__all__ = ["erasure_effect", "erasure_matrix"]


def erasure_effect(lm, input_ids, layer, position, means, predict_positions):
    """P1 Fig. 6b: replace ``h_layer[position]`` by the mean residual ``means[layer]`` and return
    ``max over the predicting positions of ‖p − p'‖₂`` (chapter 4). ``h_layer`` is the input of decoder layer
    ``layer``; ``layer = L`` is the last layer's output."""
    L = lm.n_layers
    vector = torch.as_tensor(means[layer], dtype=torch.float32)

    def erase(h):
        h = h.clone()
        h[:, position] = vector
        return h

    if layer < L:
        hook = lm.hf_layer(layer).register_forward_pre_hook(lambda module, args: (erase(args[0]), *args[1:]))
    else:
        hook = lm.hf_layer(L - 1).register_forward_hook(lambda module, args, output: erase(output))
    try:
        with torch.no_grad():
            erased = lm.hf(input_ids).logits.float().softmax(-1)
    finally:
        hook.remove()
    clean = _output_probs(lm, input_ids)
    return float((clean - erased)[0, predict_positions].norm(dim=-1).max())


def erasure_matrix(lm, input_ids, means, predict_positions):
    """P1 Fig. 6b for one prompt: ``E[l, t] = max over the predicting positions of ‖p − p'‖₂`` when ``h_l[t]`` is
    replaced by ``means[l]``, for ``l = 0 … L`` and every position ``t``, ``[L+1, T]`` (chapter 4). Position 0 (BOS)
    is never erased: its column stays 0. One forward pass per layer, one batch row per erased position."""
    L, T = lm.n_layers, input_ids.shape[1]
    clean = _output_probs(lm, input_ids)[0, predict_positions]               # [P, V]
    E = torch.zeros(L + 1, T)
    ts = torch.arange(1, T)                                                  # every position but BOS
    for l in range(L + 1):
        vector = torch.as_tensor(means[l], dtype=torch.float32)

        def erase(h):
            h = h.clone()
            h[torch.arange(len(ts)), ts] = vector                           # row r erases position ts[r]
            return h
        if l < L:   # h_l is the input of decoder layer l
            hook = lm.hf_layer(l).register_forward_pre_hook(lambda module, args: (erase(args[0]), *args[1:]))
        else:       # h_L is the last layer's output
            hook = lm.hf_layer(L - 1).register_forward_hook(lambda module, args, output: erase(output))
        try:
            with torch.no_grad():
                probs = lm.hf(input_ids.expand(len(ts), -1)).logits.float().softmax(-1)
        finally:
            hook.remove()
        E[l, ts] = (probs[:, predict_positions] - clean).norm(dim=-1).amax(dim=-1)
    return E
