"""The result of :func:`depthutils.measures.future_effects.future_effects`: P1's layer and output effects of
skipping each layer, with the facts the chapter's prose states."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from depthutils.core.numbers import numbered
from depthutils.core.results import Result, half_sizes, halves

__all__ = ["FutureEffectsResult"]


@dataclass
class FutureEffectsResult(Result):
    """``layer_effect [L, L]`` (NaN where ``j ≤ s``) and ``output_effect [L]``: P1's max over prompts
    of each prompt's ``layer_effect_by_prompt [N, L, L]`` and ``output_effect_by_prompt [N, L]``
    (themselves maxima over the prompt's positions and sampled ``t``)."""

    layer_effect: np.ndarray = None
    output_effect: np.ndarray = None
    layer_effect_by_prompt: np.ndarray = None
    output_effect_by_prompt: np.ndarray = None
    kind: ClassVar[str] = "future_effects"
    PER_PROMPT: ClassVar[dict] = {"layer_effect": ("layer_effect_by_prompt", "max"),
                                  "output_effect": ("output_effect_by_prompt", "max")}
    INTERVAL_FACTS: ClassVar[tuple] = ("later_ratio", "out_ratio")

    def structural_zeros(self) -> list[int]:
        """Skipped layers whose output effect is 0 by construction, not by measurement: in the future-tokens
        variant nothing above the last layer carries a change at positions ``< t`` to the output at ``p ≥ t``
        (and with ``local=True`` no direct path does for any layer). They are left out of the output halves."""
        p, L = self.meta.get("params", {}), len(self.output_effect)
        if p.get("mode", "future") != "future":
            return []
        return list(range(L)) if p.get("local") else [L - 1]

    def on_later(self) -> np.ndarray:
        """``[L]``: each layer's mean effect on the layers above it, ``mean_{j>s} D[s, j]`` (the last: NaN)."""
        L = len(self.output_effect)
        return np.array([np.nanmean(self.layer_effect[s, s + 1:]) if s < L - 1 else np.nan for s in range(L)])

    def later_ratio(self) -> float | None:
        """The later-layer effect ratio unrounded: :meth:`on_later`'s mean over the second half of the layers
        over that over the first (None when the first half has no effect)."""
        f1, f2 = halves(self.on_later())
        return f2 / f1 if f1 > 0 else None

    def facts(self) -> dict:
        """The numbers the chapter's prose states (means over each half of the layers), rounded; the output
        halves leave out :meth:`structural_zeros`."""
        L = len(self.output_effect)
        on_later = self.on_later()
        out = np.asarray(self.output_effect, float).copy()
        structural = self.structural_zeros()
        out[structural] = np.nan
        (f1, f2), (o1, o2) = halves(on_later), halves(out)
        r2 = lambda v: None if not np.isfinite(v) else round(float(v), 3)
        return {"L": L, "later_first": round(f1, 3), "later_second": round(f2, 3), "out_first": r2(o1),
                "out_second": r2(o2), "later_ratio": None if self.later_ratio() is None else round(self.later_ratio(), 2),
                "out_ratio": round(o2 / o1, 2) if np.isfinite(o1) and np.isfinite(o2) and o1 > 0 else None,
                "half_size": min(half_sizes(on_later)), "structural": structural}

    def findings(self) -> str:
        f = self.facts()
        fmt = lambda v: "—" if v is None else f"{v:.3f}"
        zeros = f" (left out: {numbered('layer', f['structural'])}, 0 by construction)" if f["structural"] else ""
        return (f"Skipping a first-half layer changes later layers by {f['later_first']:.3f} on average, a "
                f"second-half layer by {f['later_second']:.3f}; the output moves by {fmt(f['out_first'])} vs "
                f"{fmt(f['out_second'])} (max ‖p − p′‖₂, mean over the half{zeros}).")
