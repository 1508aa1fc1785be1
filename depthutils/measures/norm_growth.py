"""Is "the second half contributes less" only the residual's norm growing? (a reviewer's question on P1 Fig. 2)

P1's relative contribution ``‖Δ_l‖ / ‖h_l‖`` (chapter 1) falls when ``‖h_l‖`` grows even if ``‖Δ_l‖`` does not.
This analysis reads, at every token but the first, the residual's norm ``‖h_l‖`` (``h_l`` the input of layer ``l``,
``h_L`` the last layer's output), the norm of what layer ``l`` adds, ``‖Δ_l‖ = ‖h_{l+1} − h_l‖``, and their ratio,
with chapter 1's halves (layer 0, which writes onto the bare embedding, apart). Position 0 is kept apart
(``h_first``): where a model makes it an attention sink its norm is many times the others' and would dominate every
token mean.

Beside the norms, the question the reviewer tied them to: where in depth *massive activations* appear (Sun et al.,
"Massive activations in large language models", COLM 2024: a few components of the residual, far larger than the
rest), read per layer as the largest ``|h_l[d]|`` over components, at position 0 and at the others, against the
median ``|h_l[d]|`` of a token; and where the logit lens starts to agree with the output (its top-5 overlap with
the output, :func:`depthutils.measures.logit_lens.read_lens`, read in the same trace at each prompt's last
:data:`LENS_POSITIONS` positions: a lens costs a product with the unembedding per layer and token, which on a real
model's vocabulary would cost minutes over every token; chapter 3 reads every token).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.depth import LENS_POSITIONS, residual_depth
from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.results import Result, describe, half_sizes, halves, make_meta
from depthutils.cost.accounting import Cost, Shape
from depthutils.cost.passes import one_trace_per_prompt
from depthutils.measures import counted
from depthutils.measures.curves import ed_overlap
from depthutils.measures.example import Example, on_gsm
from depthutils.measures.logit_lens import read_lens
from depthutils.models.architectures import check_residual
from depthutils.models.each import each

__all__ = ["NormGrowthResult", "norm_growth", "prompt_norms", "cost", "example", "MASSIVE"]

#: a layer holds massive activations where its largest |component| is at least this many times the median
#: |component| of a token (the ratio part of Sun et al.'s definition, as we read it; their absolute floor, a
#: magnitude of 100, is for models of billions of parameters and is not used)
MASSIVE = 1000.0
#: the lens's top-k overlap with the output is read with P2's k
K = 5


@dataclass
class NormGrowthResult(Result):
    """Token means over positions ``1 … T−1`` per layer: ``h_norm`` ``[L+1]`` (``‖h_l‖``, ``l = 0 … L``),
    ``delta_norm`` ``[L]`` (``‖Δ_l‖``) and ``ratio`` ``[L]`` (the token mean of ``‖Δ_l‖ / ‖h_l‖``, chapter 1's
    statistic without position 0); ``h_first`` ``[L+1]``, ``‖h_l‖`` at position 0 alone; ``peak_first`` and
    ``peak_rest`` ``[L+1]``, the largest ``|h_l[d]|`` at position 0 and over positions ``1 … T−1`` (the largest over
    prompts); ``median_abs`` ``[L+1]``, the token mean of the median ``|h_l[d]|`` over a token's components
    (positions ``1 … T−1``); ``lens_kl`` and ``lens_overlap`` ``[L]``, the logit lens on ``h_l`` (``l = 0 … L−1``)
    against the output, KL and top-5 overlap (each prompt's mean over its last :data:`LENS_POSITIONS` positions,
    position 0 never; a plain mean over prompts). Each has its per-prompt values
    (``<name>_by_prompt``) beside it, weighed by ``prompt_tokens`` (the positions counted, ``T − 1``)."""

    h_norm: np.ndarray = None
    delta_norm: np.ndarray = None
    ratio: np.ndarray = None
    h_first: np.ndarray = None
    peak_first: np.ndarray = None
    peak_rest: np.ndarray = None
    median_abs: np.ndarray = None
    lens_kl: np.ndarray = None
    lens_overlap: np.ndarray = None
    h_norm_by_prompt: np.ndarray = None
    delta_norm_by_prompt: np.ndarray = None
    ratio_by_prompt: np.ndarray = None
    h_first_by_prompt: np.ndarray = None
    peak_first_by_prompt: np.ndarray = None
    peak_rest_by_prompt: np.ndarray = None
    median_abs_by_prompt: np.ndarray = None
    lens_kl_by_prompt: np.ndarray = None
    lens_overlap_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    kind: ClassVar[str] = "norm_growth"
    PER_PROMPT: ClassVar[dict] = {"h_norm": ("h_norm_by_prompt", "tokens"),
                                  "delta_norm": ("delta_norm_by_prompt", "tokens"),
                                  "ratio": ("ratio_by_prompt", "tokens"),
                                  "h_first": ("h_first_by_prompt", "mean"),
                                  "peak_first": ("peak_first_by_prompt", "max"),
                                  "peak_rest": ("peak_rest_by_prompt", "max"),
                                  "median_abs": ("median_abs_by_prompt", "tokens"),
                                  "lens_kl": ("lens_kl_by_prompt", "mean"),
                                  "lens_overlap": ("lens_overlap_by_prompt", "mean")}
    INTERVAL_FACTS: ClassVar[tuple] = ("abs_ratio", "rel_ratio", "growth")

    def facts(self) -> dict:
        """The numbers the prose states, rounded as printed: the second half of layers ``1 … L−1`` over the first
        half, of ``‖Δ_l‖`` (``abs_ratio``), of ``‖Δ_l‖ / ‖h_l‖`` (``rel_ratio``) and of ``‖h_l‖`` (``growth``);
        ``first_over_rest``: ``‖h‖`` at position 0 over the other positions' mean, at its largest layer;
        ``peak_over_median``: the largest ``|h_l[d]|`` over the median, at its largest layer ``peak_layer`` and
        where (``peak_at``: position 0 or the others); ``massive_layer``: the first ``l`` whose ratio reaches
        :data:`MASSIVE` (None: none does); ``agree_layer``: the first lens whose top-5 overlap exceeds 0.3 (None:
        none does); ``*_rel``: those layers over ``L``."""
        L = len(self.delta_norm)
        a1, a2 = halves(self.delta_norm[1:])
        r1, r2 = halves(self.ratio[1:])
        g1, g2 = halves(self.h_norm[1:L])
        first = self.h_first / self.h_norm
        top = int(np.argmax(first))
        peak = np.maximum(self.peak_first, self.peak_rest) / self.median_abs
        p = int(np.argmax(peak))
        hits = np.flatnonzero(peak >= MASSIVE)
        massive = int(hits[0]) if hits.size else None
        agree = ed_overlap(self.lens_overlap)
        rel = lambda l: None if l is None else round(residual_depth(l, L), 2)  # both read on h_l
        return {"L": L, "mid": 1 + L // 2, "half_size": min(half_sizes(self.delta_norm[1:])),
                "abs_first": round(a1, 3), "abs_second": round(a2, 3), "abs_ratio": round(a2 / a1, 2),
                "rel_ratio": round(r2 / r1, 2), "growth": round(g2 / g1, 2),
                "h_in": round(float(self.h_norm[1]), 2), "h_out": round(float(self.h_norm[L]), 2),
                "first_over_rest": round(float(first[top]), 1), "first_layer": top,
                "peak_over_median": round(float(peak[p]), 1), "peak_layer": p,
                "peak_at": "position 0" if self.peak_first[p] >= self.peak_rest[p] else "the other positions",
                "massive_layer": massive, "massive_rel": rel(massive), "agree_layer": agree, "agree_rel": rel(agree)}

    def findings(self) -> str:
        f = self.facts()
        return (f"Second half over first half (layers 1–{f['L'] - 1}, position 0 apart): ‖Δ‖ {f['abs_ratio']:.2f}, "
                f"‖Δ‖/‖h‖ {f['rel_ratio']:.2f}, ‖h‖ {f['growth']:.2f}. ‖h‖ grows from {f['h_in']} (h_1) to "
                f"{f['h_out']} (h_{f['L']}); at position 0 it is {f['first_over_rest']}× the other positions' "
                f"(h_{f['first_layer']}). The largest component is {f['peak_over_median']}× a token's median "
                f"|component| (h_{f['peak_layer']}, {f['peak_at']}); massive activations (≥ {MASSIVE:.0f}×) "
                + ("appear nowhere" if f["massive_layer"] is None else f"appear from h_{f['massive_layer']}")
                + "; the lens's top-5 overlap with the output first exceeds 0.3 "
                + ("nowhere." if f["agree_layer"] is None else f"at h_{f['agree_layer']}."))


def prompt_norms(model, enc) -> torch.Tensor:
    """``[L, 10, T]`` for one prompt (one trace): per layer ``l`` and token, ``‖h_l‖``, ``‖Δ_l‖``, ``‖Δ_l‖ / ‖h_l‖``,
    ``‖h_{l+1}‖``, the largest and the median ``|h_l[d]|`` and ``|h_{l+1}[d]|`` over components, and the logit
    lens on ``h_l``: its KL to the output and its top-5 overlap (NaN but at the last :data:`LENS_POSITIONS`
    positions), in float32."""
    T = enc.n_tokens
    P = min(LENS_POSITIONS, T - 1)
    with model.no_grad(), model.trace(enc.input_ids):
        rows = nnsight.save([])  # a list made inside the trace must be saved to outlive it
        hs = []
        for l in range(model.n_layers):
            h = check_residual(model.layers_input(l), 1, T, f"layer {l} input")
            hs.append(h[:, -P:])
            h, out = h.float(), check_residual(model.layers_output(l), 1, T, f"layer {l} output").float()
            hn, dn, on = h.norm(dim=-1), (out - h).norm(dim=-1), out.norm(dim=-1)
            ha, oa = h.abs(), out.abs()
            rows.append(torch.stack([hn, dn, dn / hn, on, ha.amax(-1), ha.median(dim=-1).values, oa.amax(-1),
                                     oa.median(dim=-1).values])[:, 0].save())
        lens = read_lens(model, hs, K, last=P)
    lens = torch.full((model.n_layers, 2, T), float("nan")).index_copy_(2, torch.arange(T - P, T),
                                                                        torch.stack(list(lens)).float().cpu())
    return torch.cat([torch.stack(list(rows)).float().cpu(), lens], 1)


@counted
def norm_growth(model, prompts, *, max_tokens: int | None = None, progress_bar: bool = True) -> NormGrowthResult:
    """``‖h_l‖``, ``‖Δ_l‖``, ``‖Δ_l‖ / ‖h_l‖``, the largest and median component and the logit lens's agreement with
    the output per layer at every token but the first (which is kept apart), one forward per prompt; a prompt longer than ``max_tokens`` (default: the model's context) is cut."""
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    if any(e.n_tokens < 2 for e in encs):
        raise DepthError("norm_growth needs prompts of at least two tokens: position 0 is kept apart.")
    stats = each(model, prompt_norms, encs, "norm growth", enabled=progress_bar)
    per = {k: [] for k in NormGrowthResult.PER_PROMPT}
    for s in stats:
        s = s.double().cpu()
        rest = s[:, :, 1:].mean(-1)  # [L, 10]: the token means, position 0 apart
        last = lambda row, col: torch.cat([row, col[-1:]]).numpy()  # h_0 … h_{L−1}, then h_L (the last output)
        per["h_norm"].append(last(rest[:, 0], rest[:, 3]))
        per["delta_norm"].append(rest[:, 1].numpy())
        per["ratio"].append(rest[:, 2].numpy())
        per["h_first"].append(last(s[:, 0, 0], s[:, 3, 0]))
        per["peak_first"].append(last(s[:, 4, 0], s[:, 6, 0]))
        per["peak_rest"].append(last(s[:, 4, 1:].amax(-1), s[:, 6, 1:].amax(-1)))
        per["median_abs"].append(last(rest[:, 5], rest[:, 7]))
        lens = s[:, 8:, 1:].nanmean(-1)  # [L, 2]: the lens's positions
        per["lens_kl"].append(lens[:, 0].numpy())
        per["lens_overlap"].append(lens[:, 1].numpy())
    arrays = {f"{k}_by_prompt": check_finite(f"norm growth {k}", np.stack(v)) for k, v in per.items()}
    ds, n = describe(prompts)
    tokens = [e.n_tokens - 1 for e in encs]
    return NormGrowthResult(meta=make_meta(model, dataset=ds, n=n, fit=fit, tokens=sum(tokens)),
                            prompt_tokens=np.array(tokens), **arrays).with_aggregates()


def cost(s: Shape, Ts, dtype: str, remote: bool) -> Cost:
    """What :func:`norm_growth` runs on prompts of ``Ts`` tokens: one nnsight forward per prompt, ten numbers per
    layer and token, and the lens decoded in the trace at the last :data:`LENS_POSITIONS` positions."""
    return one_trace_per_prompt(s, Ts, dtype, remote, "norm_growth", lens="traced", per_token=10,
                                lens_at=[min(LENS_POSITIONS, T - 1) for T in Ts])


def example(model, **options) -> Example:
    """One GSM8K problem cut to a few tokens (:mod:`depthutils.measures.example`)."""
    return on_gsm(norm_growth, model, options)
