"""Chapter 0, the residual stream: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

__all__ = ["layer_output", "residual_terms"]


def layer_output(lm, input_ids, layer):
    """``h_{layer+1}``: the residual stream after decoder layer ``layer``, ``[B, T, d]``, read with nnsight."""
    with torch.no_grad(), lm.nn.trace(input_ids):
        h_out = lm.layer(layer).output.save()  # a tensor [B, T, d]: no [0] here
    assert h_out.shape[:2] == input_ids.shape, h_out.shape
    return h_out


def residual_terms(lm, input_ids):
    """The residual stream as a sum: ``[h_0, a_0, m_0, a_1, m_1, …, a_{L-1}, m_{L-1}]``, ``[2L+1, B, T, d]``,
    with ``a_l`` what layer ``l``'s attention adds and ``m_l`` what its MLP adds, so that
    ``h_L = h_0 + Σ_l (a_l + m_l)`` (a Llama-shaped model adds its sublayers' outputs as they are). Read with
    nnsight, every module in forward order."""
    L = lm.n_layers
    terms = []                                                 # made before the trace, filled inside it
    with torch.no_grad(), lm.nn.trace(input_ids):
        h_0 = lm.layer(0).input.save()                         # the embedding, the input of layer 0
        for l in range(L):
            terms.append(lm.layer(l).self_attn.output[0].save())  # attention returns (output, weights)
            terms.append(lm.layer(l).mlp.output.save())           # the MLP returns a tensor
        h_L = lm.layer(L - 1).output.save()
    out = torch.stack([h_0, *terms])
    assert out.shape == (2 * L + 1, *input_ids.shape, h_0.shape[-1]), out.shape
    assert torch.allclose(out.sum(0), h_L, rtol=1e-4, atol=1e-4)  # the terms add up to the last layer's output
    return out
