"""P2: effective depth from the cosine, KL and top-5-overlap curves (spec §8).

The three metrics are plain functions of a curve, so the book can recompute a
table from cached curves; each returns ``None`` when no layer qualifies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .results import Result

METRICS = ("cos", "kl", "overlap")


def ed_cos(mean_cos) -> int | None:
    """The last ``l`` with ``c̄_l < 0`` and ``c̄_{l+1} ≥ 0``; None if there is none."""
    c = np.asarray(mean_cos, dtype=float)
    hits = [l for l in range(len(c) - 1) if c[l] < 0 <= c[l + 1]]
    return hits[-1] if hits else None


def ed_kl(kl) -> int | None:
    """The first ``l`` with ``KL_l < 0.5 · max KL``; None if there is none."""
    v = np.asarray(kl, dtype=float)
    if v.size == 0 or not np.isfinite(v).all():
        return None
    hits = np.flatnonzero(v < 0.5 * v.max())
    return int(hits[0]) if hits.size else None


def ed_overlap(overlap, threshold: float = 0.3) -> int | None:
    """The first ``l`` with ``overlap_l > threshold`` (P2: 0.3); None if there is none."""
    hits = np.flatnonzero(np.asarray(overlap, dtype=float) > threshold)
    return int(hits[0]) if hits.size else None


def ratio(ed: int | None, n_layers: int) -> float | None:
    """``(ED + 1) / L``, or None when ED is undefined."""
    return None if ed is None else (ed + 1) / n_layers


@dataclass
class EffectiveDepthResult(Result):
    """The three per-layer curves (``[L]`` each) and P2's effective depths and ratios."""

    mean_cos: np.ndarray = None
    kl: np.ndarray = None
    overlap: np.ndarray = None
    ed_cos: int | None = None
    ed_kl: int | None = None
    ed_overlap: int | None = None
    kind: ClassVar[str] = "effective_depth"

    @property
    def n_layers(self) -> int:
        return len(self.mean_cos)

    def ed(self, metric: str) -> int | None:
        return getattr(self, f"ed_{metric}")

    def ratio(self, metric: str) -> float | None:
        return ratio(self.ed(metric), self.n_layers)

    @classmethod
    def from_curves(cls, mean_cos, kl, overlap, meta: dict | None = None) -> "EffectiveDepthResult":
        return cls(meta=meta or {}, mean_cos=np.asarray(mean_cos, float), kl=np.asarray(kl, float),
                   overlap=np.asarray(overlap, float), ed_cos=ed_cos(mean_cos), ed_kl=ed_kl(kl),
                   ed_overlap=ed_overlap(overlap))


def effective_depth(model, prompts, *, k: int = 5, progress_bar: bool = True) -> EffectiveDepthResult:
    """P2's three effective depths of ``model`` on ``prompts`` (contributions + logit lens)."""
    from .contributions import contributions
    from .logit_lens import logit_lens

    c = contributions(model, prompts, progress_bar=progress_bar)
    lens = logit_lens(model, prompts, k=k, progress_bar=progress_bar)
    meta = {**c.meta, "params": {"k": k}}
    return EffectiveDepthResult.from_curves(c.mean_cos, lens.kl, lens.overlap, meta)
