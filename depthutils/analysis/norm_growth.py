"""Is "the second half contributes less" only the residual's norm growing? (a reviewer's question on P1 Fig. 2)

P1's relative contribution ``‖Δ_l‖ / ‖h_l‖`` (chapter 1) falls when ``‖h_l‖`` grows even if ``‖Δ_l‖`` does not.
This analysis reads, at every token but the first, the residual's norm ``‖h_l‖`` (``h_l`` the input of layer ``l``,
``h_L`` the last layer's output), the norm of what layer ``l`` adds, ``‖Δ_l‖ = ‖h_{l+1} − h_l‖``, and their ratio,
and grades P1's claim on the *absolute* contribution with chapter 1's halves (layer 0, which writes onto the
bare embedding, apart). Position 0 is kept apart (``h_first``): where a model makes it an attention sink its
norm is many times the others' and would dominate every token mean.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.results import Result, describe, half_sizes, halves, make_meta
from depthutils.models.architectures import check_residual
from depthutils.models.remote import each

__all__ = ["NormGrowthResult", "norm_growth", "prompt_norms"]


@dataclass
class NormGrowthResult(Result):
    """Token means over positions ``1 … T−1`` per layer: ``h_norm`` ``[L+1]`` (``‖h_l‖``, ``l = 0 … L``),
    ``delta_norm`` ``[L]`` (``‖Δ_l‖``) and ``ratio`` ``[L]`` (the token mean of ``‖Δ_l‖ / ‖h_l‖``, chapter 1's
    statistic without position 0); ``h_first`` ``[L+1]``, ``‖h_l‖`` at position 0 alone. Each has its per-prompt
    values (``<name>_by_prompt``) beside it, weighed by ``prompt_tokens`` (the positions counted, ``T − 1``)."""

    h_norm: np.ndarray = None
    delta_norm: np.ndarray = None
    ratio: np.ndarray = None
    h_first: np.ndarray = None
    h_norm_by_prompt: np.ndarray = None
    delta_norm_by_prompt: np.ndarray = None
    ratio_by_prompt: np.ndarray = None
    h_first_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    kind: ClassVar[str] = "norm_growth"
    PER_PROMPT: ClassVar[dict] = {"h_norm": ("h_norm_by_prompt", "tokens"),
                                  "delta_norm": ("delta_norm_by_prompt", "tokens"),
                                  "ratio": ("ratio_by_prompt", "tokens"),
                                  "h_first": ("h_first_by_prompt", "mean")}
    INTERVAL_FACTS: ClassVar[tuple] = ("abs_ratio", "rel_ratio", "growth")

    def facts(self) -> dict:
        """The numbers the prose states, rounded as printed: the second half of layers ``1 … L−1`` over the first
        half, of ``‖Δ_l‖`` (``abs_ratio``), of ``‖Δ_l‖ / ‖h_l‖`` (``rel_ratio``) and of ``‖h_l‖`` (``growth``);
        ``first_over_rest``: ``‖h‖`` at position 0 over the other positions' mean, at its largest layer."""
        L = len(self.delta_norm)
        a1, a2 = halves(self.delta_norm[1:])
        r1, r2 = halves(self.ratio[1:])
        g1, g2 = halves(self.h_norm[1:L])
        first = self.h_first / self.h_norm
        top = int(np.argmax(first))
        return {"L": L, "mid": 1 + L // 2, "half_size": min(half_sizes(self.delta_norm[1:])),
                "abs_first": round(a1, 3), "abs_second": round(a2, 3), "abs_ratio": round(a2 / a1, 2),
                "rel_ratio": round(r2 / r1, 2), "growth": round(g2 / g1, 2),
                "h_in": round(float(self.h_norm[1]), 2), "h_out": round(float(self.h_norm[L]), 2),
                "first_over_rest": round(float(first[top]), 1), "first_layer": top}

    def findings(self) -> str:
        f = self.facts()
        return (f"Second half over first half (layers 1–{f['L'] - 1}, position 0 apart): ‖Δ‖ {f['abs_ratio']:.2f}, "
                f"‖Δ‖/‖h‖ {f['rel_ratio']:.2f}, ‖h‖ {f['growth']:.2f}. ‖h‖ grows from {f['h_in']} (h_1) to "
                f"{f['h_out']} (h_{f['L']}); at position 0 it is {f['first_over_rest']}× the other positions' "
                f"(h_{f['first_layer']}).")


def prompt_norms(model, enc) -> torch.Tensor:
    """``[L, 4, T]`` for one prompt (one trace): per layer ``l`` and token, ``‖h_l‖``, ``‖Δ_l‖``, ``‖Δ_l‖ / ‖h_l‖``
    and ``‖h_{l+1}‖``, in float32."""
    T = enc.n_tokens
    with model.no_grad(), model.trace(enc.input_ids):
        rows = nnsight.save([])  # a list made inside the trace must be saved to outlive it
        for l in range(model.n_layers):
            h = check_residual(model.layers_input(l), 1, T, f"layer {l} input").float()
            out = check_residual(model.layers_output(l), 1, T, f"layer {l} output").float()
            hn, dn, on = h.norm(dim=-1), (out - h).norm(dim=-1), out.norm(dim=-1)
            rows.append(torch.stack([hn, dn, dn / hn, on])[:, 0].save())
    return torch.stack(list(rows))


def norm_growth(model, prompts, *, max_tokens: int | None = None, progress_bar: bool = True) -> NormGrowthResult:
    """``‖h_l‖``, ``‖Δ_l‖`` and ``‖Δ_l‖ / ‖h_l‖`` per layer at every token but the first (which is kept apart), one
    forward per prompt; a prompt longer than ``max_tokens`` (default: the model's context) is cut."""
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    if any(e.n_tokens < 2 for e in encs):
        raise DepthError("norm_growth needs prompts of at least two tokens: position 0 is kept apart.")
    stats = each(model, prompt_norms, encs, "norm growth", enabled=progress_bar)
    per = {k: [] for k in ("h_norm", "delta_norm", "ratio", "h_first")}
    for s in stats:
        s = s.double().cpu()
        rest = s[:, :, 1:].mean(-1)  # [L, 4]: the token means, position 0 apart
        per["h_norm"].append(torch.cat([rest[:, 0], rest[-1:, 3]]).numpy())
        per["delta_norm"].append(rest[:, 1].numpy())
        per["ratio"].append(rest[:, 2].numpy())
        per["h_first"].append(torch.cat([s[:, 0, 0], s[-1:, 3, 0]]).numpy())
    arrays = {f"{k}_by_prompt": check_finite(f"norm growth {k}", np.stack(v)) for k, v in per.items()}
    ds, n = describe(prompts)
    tokens = [e.n_tokens - 1 for e in encs]
    return NormGrowthResult(meta=make_meta(model, dataset=ds, n=n, fit=fit, tokens=sum(tokens)),
                            prompt_tokens=np.array(tokens), **arrays).with_aggregates()
