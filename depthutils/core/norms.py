"""Per-token norms over the hidden axis, in float32."""
from __future__ import annotations

import torch

__all__ = ["rel_norm", "cosine"]


def rel_norm(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per-token ``‖x‖ / ‖ref‖`` over the hidden axis, in float32."""
    return x.float().norm(dim=-1) / ref.float().norm(dim=-1)


def cosine(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per-token cosine similarity over the hidden axis, in float32."""
    return torch.nn.functional.cosine_similarity(x.float(), ref.float(), dim=-1)
