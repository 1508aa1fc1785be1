"""Chapter 0, the residual stream: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

__all__ = ["layer_output"]


def layer_output(lm, input_ids, layer):
    """``h_{layer+1}``: the residual stream after decoder layer ``layer``, ``[B, T, d]``, read with nnsight."""
    with torch.no_grad(), lm.nn.trace(input_ids):
        h_out = lm.layer(layer).output.save()  # a tensor [B, T, d]: no [0] here
    assert h_out.shape[:2] == input_ids.shape, h_out.shape
    return h_out
