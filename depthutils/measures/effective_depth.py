"""P2: effective depth from the cosine, KL and top-5-overlap curves (spec §8).

The three metrics are plain functions of a curve (:mod:`depthutils.measures.curves`), so the book can
recompute a table from cached curves; each returns ``None`` when no layer qualifies. P2's study
over models × tasks is :mod:`depthutils.analysis.study`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError
from depthutils.core.results import Result
from depthutils.cost.accounting import Cost, Shape
from depthutils.cost.passes import one_trace_per_prompt
from depthutils.measures import counted
from depthutils.measures.contributions import contributions_of, read_stats
from depthutils.measures.curves import ed_cos, ed_kl, ed_overlap, ratio
from depthutils.measures.example import Example, addition
from depthutils.measures.logit_lens import chunkable, chunked_lens, logit_lens_of, read_lens, save_for_lens
from depthutils.models.each import each

METRICS = ("cos", "kl", "overlap")
#: metric -> (the curve it reads, its effective depth)
CURVES = {"cos": ("mean_cos", ed_cos), "kl": ("kl", ed_kl), "overlap": ("overlap", ed_overlap)}


@dataclass
class EffectiveDepthResult(Result):
    """The three per-layer curves (``[L]`` each) and P2's effective depths and ratios.

    The curves are token means; the per-prompt curves behind them (``<curve>_by_prompt``,
    ``[N, L]``, weighed back by ``prompt_tokens``) give each effective depth an interval:
    :meth:`ratio_interval` resamples the prompts, recomputes the curve and its effective depth.
    """

    mean_cos: np.ndarray = None
    kl: np.ndarray = None
    overlap: np.ndarray = None
    ed_cos: int | None = None
    ed_kl: int | None = None
    ed_overlap: int | None = None
    mean_cos_by_prompt: np.ndarray = None
    kl_by_prompt: np.ndarray = None
    overlap_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    kind: ClassVar[str] = "effective_depth"
    PER_PROMPT: ClassVar[dict] = {c: (f"{c}_by_prompt", "tokens") for c in ("mean_cos", "kl", "overlap")}

    def with_aggregates(self) -> "EffectiveDepthResult":
        """The curves from the per-prompt curves, then the effective depths from the curves."""
        super().with_aggregates()
        self.ed_cos, self.ed_kl, self.ed_overlap = ed_cos(self.mean_cos), ed_kl(self.kl), ed_overlap(self.overlap)
        return self

    def ratio_interval(self, metric: str, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """``(lo, hi)`` of the ``metric`` ratio over prompt resamples (NaN if undefined in all of them)."""
        return self.interval(lambda r: r.ratio(metric), level=level, n_boot=n_boot, seed=seed)

    def ratio_draws(self, metric: str, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
        """The ``metric`` ratio in each of ``n_boot`` prompt resamples (NaN where undefined): the ratio of
        :meth:`resample`, from the one curve it needs (the same numbers, without the other two)."""
        rng = np.random.default_rng(seed)
        n, (curve, ed) = self.n_prompts, CURVES[metric]
        draws = [ratio(ed(self.aggregate(curve, rng.integers(0, n, n))), self.n_layers) for _ in range(n_boot)]
        return np.array([np.nan if d is None else d for d in draws])

    @property
    def n_layers(self) -> int:
        return len(self.mean_cos)

    def ed(self, metric: str) -> int | None:
        return getattr(self, f"ed_{metric}")

    def ratio(self, metric: str) -> float | None:
        return ratio(self.ed(metric), self.n_layers)

    @classmethod
    def from_curves(cls, mean_cos, kl, overlap, meta: dict | None = None) -> "EffectiveDepthResult":
        """From aggregate curves alone (no per-prompt values, so no intervals)."""
        return cls(meta=meta or {}, mean_cos=np.asarray(mean_cos, float), kl=np.asarray(kl, float),
                   overlap=np.asarray(overlap, float), ed_cos=ed_cos(mean_cos), ed_kl=ed_kl(kl),
                   ed_overlap=ed_overlap(overlap))

    @classmethod
    def from_prompts(cls, contributions, lens, meta: dict | None = None) -> "EffectiveDepthResult":
        """From a contributions and a logit-lens result on the same prompts (per-prompt curves kept)."""
        if not np.array_equal(contributions.prompt_tokens, lens.prompt_tokens):
            raise DepthError("The contributions and the logit lens were measured on different prompts.")
        cos = (contributions.attn_cos_by_prompt + contributions.mlp_cos_by_prompt
               + contributions.layer_cos_by_prompt) / 3
        return cls(meta=meta or {}, mean_cos_by_prompt=cos, kl_by_prompt=lens.kl_by_prompt,
                   overlap_by_prompt=lens.overlap_by_prompt, prompt_tokens=lens.prompt_tokens).with_aggregates()


def curves_and_lens(model, item) -> tuple:
    """One prompt's contributions (``[L, 6, T]``) and logit-lens (``[L, 2, T]``) statistics, from one trace (a
    local model's lens decoded after it: :func:`~depthutils.measures.logit_lens.chunkable`)."""
    enc, k = item
    local = chunkable(model)
    with model.no_grad(), model.trace(enc.input_ids):
        stats, hs = read_stats(model, enc.n_tokens)
        if local:
            saved, final = save_for_lens(model, hs)
        else:
            lens = read_lens(model, hs, k)
    if local:
        with torch.no_grad():
            return torch.stack(list(stats)), chunked_lens(model, torch.stack(list(saved)), final, k)
    return torch.stack(list(stats)), torch.stack(list(lens))


@counted
def effective_depth(model, prompts, *, k: int = 5, max_tokens: int | None = None, n: int | None = None,
                    progress_bar: bool = True) -> EffectiveDepthResult:
    """P2's three effective depths of ``model`` on ``prompts`` (contributions + logit lens).

    A task prompt is context plus gold answer, so a prompt whose answer would fall beyond
    ``max_tokens`` (default: the model's context) is skipped, not cut; ``n`` keeps the first
    ``n`` prompts that fit. The result's ``meta["fit"]`` says how many were used and skipped.
    """
    prompts, _, fit = encode_all(model, prompts, max_tokens=max_tokens, limit=n, rule="skip")
    prompts, encs, cut = encode_all(model, prompts, max_tokens=max_tokens)  # as the two measurements read them
    both = each(model, curves_and_lens, [(e, k) for e in encs], "effective depth", enabled=progress_bar)  # NDIF: one request
    c = contributions_of(model, prompts, encs, cut, [b[0] for b in both])
    lens = logit_lens_of(model, prompts, encs, cut, k, [b[1] for b in both])
    meta = {**c.meta, "fit": fit.as_dict(), "params": {"k": k, "n": n}}
    return EffectiveDepthResult.from_prompts(c, lens, meta)


def cost(s: Shape, Ts, dtype: str, remote: bool) -> Cost:
    """What :func:`effective_depth` runs on prompts of ``Ts`` tokens: one nnsight forward per prompt, then locally
    the lens as :func:`~depthutils.measures.logit_lens.chunked_lens`, on NDIF each layer's lens in the trace."""
    return one_trace_per_prompt(s, Ts, dtype, remote, "effective_depth", stats=True,
                                lens="traced" if remote else "chunked", per_token=3)


def example(model, **options) -> Example:
    """One three-operand addition prompt with its answer (:mod:`depthutils.measures.example`)."""
    prompts, enc = addition(model)
    return Example(lambda: effective_depth(model, prompts, progress_bar=False, **options), {"Ts": [enc.n_tokens]})
