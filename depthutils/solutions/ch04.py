"""Chapter 4, residual erasure: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

from .common import _output_probs

__all__ = ["erasure_effect"]


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
