"""Chapter 1, contributions: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

from depthutils.teaching.solutions.common import _residual_around, _run_hooked

__all__ = ["relative_contribution", "layer_cosines"]


def relative_contribution(lm, input_ids, layer):
    """``‖Δ_l‖ / ‖h_l‖`` at every token, ``[B, T]``, where ``Δ_l = h_{l+1} − h_l`` (P1 Fig. 2; chapter 1)."""
    h_in, h_out = _residual_around(lm, input_ids, layer)
    delta = h_out - h_in                                  # what the whole layer adds
    return delta.norm(dim=-1) / h_in.norm(dim=-1)         # norms over the hidden axis, one per token


def layer_cosines(lm, input_ids, layer):
    """``[B, 3, T]``: at every token, ``cos(a_l, h_l)``, ``cos(m_l, h_l + a_l)`` and ``cos(Δ_l, h_l)`` for
    ``l = layer`` (P1 Fig. 2b; chapter 1): each part against the residual it is added to. Plain forward hooks."""
    seen = {}
    block = lm.hf_layer(layer)
    hooks = [block.register_forward_pre_hook(lambda m, args: seen.update(h=args[0])),         # h_l
             block.self_attn.register_forward_hook(lambda m, a, out: seen.update(a=out[0])),  # a_l (a tuple)
             block.mlp.register_forward_hook(lambda m, a, out: seen.update(m=out)),          # m_l
             block.register_forward_hook(lambda m, a, out: seen.update(out=out))]            # h_{l+1}
    _run_hooked(lm, input_ids, hooks)
    h, a, m = seen["h"], seen["a"], seen["m"]
    cos = lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=-1)  # noqa: E731  over the hidden axis
    out = torch.stack([cos(a, h), cos(m, h + a), cos(seen["out"] - h, h)], dim=1)
    assert out.shape == (input_ids.shape[0], 3, input_ids.shape[1]), out.shape
    return out
