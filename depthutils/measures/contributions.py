"""P1 §1 / Fig. 2: relative contribution and cosine of attention, MLP and whole layers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.encoding import encode_all
from depthutils.core.errors import check_finite
from depthutils.core.norms import cosine, rel_norm
from depthutils.core.results import Result, describe, half_sizes, halves, make_meta
from depthutils.cost.accounting import Cost, Shape
from depthutils.cost.passes import one_trace_per_prompt
from depthutils.measures import counted
from depthutils.measures.example import Example, on_gsm
from depthutils.models.architectures import check_residual
from depthutils.models.each import each

PARTS = ("attn", "mlp", "layer")


KEYS = tuple(f"{p}_{q}" for p in PARTS for q in ("ratio", "cos"))


@dataclass
class ContributionsResult(Result):
    """Token-averaged ``‖part‖/‖residual‖`` and ``cos(part, residual)`` per layer, each ``[L]``.

    attention: ``a_l`` against ``h_l``; MLP: ``m_l`` against ``h_l + a_l``;
    layer: ``Δ_l = h_{l+1} - h_l`` against ``h_l``. Each has its per-prompt token means
    (``<name>_by_prompt``, ``[N, L]``) beside it, and ``prompt_tokens`` ``[N]`` weighs them back
    into the token average.
    """

    attn_ratio: np.ndarray = None
    attn_cos: np.ndarray = None
    mlp_ratio: np.ndarray = None
    mlp_cos: np.ndarray = None
    layer_ratio: np.ndarray = None
    layer_cos: np.ndarray = None
    attn_ratio_by_prompt: np.ndarray = None
    attn_cos_by_prompt: np.ndarray = None
    mlp_ratio_by_prompt: np.ndarray = None
    mlp_cos_by_prompt: np.ndarray = None
    layer_ratio_by_prompt: np.ndarray = None
    layer_cos_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    kind: ClassVar[str] = "contributions"
    PER_PROMPT: ClassVar[dict] = {k: (f"{k}_by_prompt", "tokens") for k in KEYS}
    INTERVAL_FACTS: ClassVar[tuple] = ("first", "second", "ratio")

    @property
    def mean_cos(self) -> np.ndarray:
        """``c̄_l``, the mean of the three cosines (P2's effective-depth input)."""
        return (self.attn_cos + self.mlp_cos + self.layer_cos) / 3

    def half_ratio(self) -> float:
        """P1's statistic unrounded: the whole layers' mean relative contribution over the second half of
        layers 1 … L−1 divided by that over the first half (layer 0 writes onto the bare embedding: apart)."""
        first, second = halves(self.layer_ratio[1:])
        return second / first

    def facts(self) -> dict:
        """The numbers the chapter's prose states, rounded as printed."""
        L = len(self.layer_ratio)
        first, second = halves(self.layer_ratio[1:])  # layer 0 writes onto the bare embedding: apart
        mid = 1 + L // 2
        # ours (P1 gives no number on it): how much does the last layer alone move the second half?
        wo_last = float(np.mean(self.layer_ratio[mid:-1])) if L - mid > 1 else None
        return {"L": L, "layer0": round(float(self.layer_ratio[0]), 3), "first": round(first, 3),
                "second": round(second, 3), "ratio": round(self.half_ratio(), 2), "mid": mid, "first_end": mid - 1,
                "second_wo_last": None if wo_last is None else round(wo_last, 3),
                "ratio_wo_last": None if wo_last is None else round(wo_last / first, 2),
                "last": L - 1, "half_size": min(half_sizes(self.layer_ratio[1:])),
                "n_negative": int((self.layer_cos < 0).sum())}

    def findings(self) -> str:
        f = self.facts()
        neg = [l for l, c in enumerate(self.layer_cos) if c < 0]
        return (f"Whole-layer relative contribution: layer 0 {f['layer0']:.3f}; layers 1–{f['mid'] - 1} "
                f"{f['first']:.3f} on average; layers {f['mid']}–{f['L'] - 1} {f['second']:.3f} (ratio "
                f"{f['ratio']:.2f}). Layers whose update points against the residual (cos < 0): {neg or 'none'}.")


def read_stats(model, T: int) -> tuple[list, list]:
    """Inside a trace of one prompt of ``T`` tokens: each layer's ``[6, T]`` statistics of :data:`KEYS`
    (a list made and saved inside the trace: a remote trace returns only saved names) and each layer's
    input ``h_l`` ``[1, T, H]`` (for a measurement that shares the trace, such as the logit lens)."""
    stats, ins = nnsight.save([]), []
    for l in range(model.n_layers):
        h = check_residual(model.layers_input(l), 1, T, f"layer {l} input")
        a = check_residual(model.attentions_output(l), 1, T, f"attention {l} output")
        m = check_residual(model.mlps_output(l), 1, T, f"MLP {l} output")
        out = check_residual(model.layers_output(l), 1, T, f"layer {l} output")
        d, ha = out - h, h + a
        stats.append(torch.stack([rel_norm(a, h), cosine(a, h), rel_norm(m, ha), cosine(m, ha),
                                  rel_norm(d, h), cosine(d, h)])[:, 0].save())
        ins.append(h)
    return stats, ins


def prompt_stats(model, enc) -> torch.Tensor:
    """``[L, 6, T]``: the six statistics of :data:`KEYS` at every token of one prompt (one trace)."""
    with model.no_grad(), model.trace(enc.input_ids):
        stats, _ = read_stats(model, enc.n_tokens)
    return torch.stack(list(stats))


@counted
def contributions(model, prompts, *, max_tokens: int | None = None, progress_bar: bool = True) -> ContributionsResult:
    """Relative contribution and cosine of each layer's attention, MLP and whole layer.

    One forward pass per prompt (on NDIF: all in one request); every token of every prompt counts once. A prompt longer
    than ``max_tokens`` (default: the model's context) is cut to its first tokens.
    """
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    return contributions_of(model, prompts, encs, fit,
                            each(model, prompt_stats, encs, "contributions", enabled=progress_bar))


def contributions_of(model, prompts, encs, fit, stats) -> ContributionsResult:
    """The result from each prompt's ``[L, 6, T]`` statistics (:func:`prompt_stats`)."""
    per_prompt = {k: [] for k in KEYS}
    for s in stats:
        means = s.double().mean(-1)  # [L, 6]: this prompt's token means
        for k, key in enumerate(KEYS):
            per_prompt[key].append(means[:, k].cpu().numpy())
    tokens = [enc.n_tokens for enc in encs]
    arrays = {f"{k}_by_prompt": check_finite(f"contributions {k}", np.stack(v)) for k, v in per_prompt.items()}
    ds, n = describe(prompts)
    return ContributionsResult(meta=make_meta(model, dataset=ds, n=n, fit=fit, tokens=sum(tokens)),
                               prompt_tokens=np.array(tokens), **arrays).with_aggregates()


def cost(s: Shape, Ts, dtype: str, remote: bool) -> Cost:
    """What :func:`contributions` runs on prompts of ``Ts`` tokens: one nnsight forward per prompt."""
    return one_trace_per_prompt(s, Ts, dtype, remote, "contributions", stats=True)


def example(model, **options) -> Example:
    """One GSM8K problem cut to a few tokens (:mod:`depthutils.measures.example`)."""
    return on_gsm(contributions, model, options)
