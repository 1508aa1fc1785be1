"""P1's MoEUT outlook in miniature: does a shared-layer model use more of its depth?

Runs the book's depth measurements on two (or more) models side by side: the
future effects of skipping a layer (P1 Fig. 3, spec §2), the logit lens (§3),
P2's effective depth (§8) and the depth score (§6). Each gives one number for
"how much of the depth is used", larger meaning later layers matter more:

* ``late_effect``: mean effect on later layers of skipping a second-half layer,
  over that of a first-half layer (future-tokens variant);
* ``kl_ratio``: P2's KL effective-depth ratio ``(ED + 1) / L``;
* ``depth_score``: the normalised depth score, averaged over task levels.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .depth_score import DepthScoreResult, depth_score
from .effective_depth import EffectiveDepthResult, effective_depth
from .future_effects import FutureEffectsResult, future_effects
from .logit_lens import LogitLensResult, logit_lens
from .errors import NothingFits
from .results import Verdict, combine

#: the numbers compared, in the order of the verdict
MEASURES = ("late_effect", "kl_ratio", "depth_score")


@dataclass
class DepthUse:
    """Per model: its future effects, logit lens, effective depth and depth score."""

    future: dict[str, FutureEffectsResult]
    lens: dict[str, LogitLensResult]
    ed: dict[str, EffectiveDepthResult | None]  # None: no prompt fits the model's context
    score: dict[str, DepthScoreResult]

    @property
    def models(self) -> list[str]:
        return list(self.future)

    def numbers(self, model: str) -> dict:
        """The three depth-use numbers of one model (None where undefined)."""
        f = self.future[model].facts()
        scores = [r["norm_score"] for r in self.score[model].rows if r["norm_score"] is not None]
        kl = self.ed[model].ratio("kl") if self.ed[model] is not None else None
        return {"late_effect": f["later_ratio"], "kl_ratio": None if kl is None else round(kl, 3),
                "depth_score": round(float(np.mean(scores)), 3) if scores else None}

    def facts(self) -> dict:
        out = {}
        for i, m in enumerate(self.models):
            out.update({f"m{i}_{k}": v for k, v in self.numbers(m).items()})
        return out

    def summary(self) -> str:
        lines = [f"{'model':<24}" + "".join(f"{k:>14}" for k in MEASURES)]
        for m in self.models:
            n = self.numbers(m)
            lines.append(f"{m[-24:]:<24}" + "".join(f"{'—' if n[k] is None else f'{n[k]:.3f}':>14}" for k in MEASURES))
        lines.append(self.future[self.models[0]].fitting())
        return "\n".join(lines)

    def verdict(self, margin: float = 0.02) -> Verdict:
        """P1's MoEUT claim: the shared model (the last) uses more of its depth than the stacked one (the first)."""
        stacked, shared = self.models[0], self.models[-1]
        claim = ("P1 (outlook): a shared-layer model (MoEUT) uses more of its depth than a standard transformer "
                 "trained on the same data; P1 calls this preliminary.")
        if stacked == shared:
            return Verdict(claim=claim, criterion="needs two models, a stacked one first and a shared-layer one last.",
                           outcome="not shown", numbers="one model only.")
        a, b = self.numbers(stacked), self.numbers(shared)
        outcomes = ["shown" if None not in (a[k], b[k]) and b[k] - a[k] > margin else "not shown" for k in MEASURES]
        fmt = lambda v: "—" if v is None else f"{v:.3f}"
        return Verdict(
            claim=claim,
            criterion=f"{shared} against {stacked} on three numbers where larger means later layers matter more "
                      f"(late/early future-effect ratio, KL effective-depth ratio, mean normalised depth score): "
                      f"each counts when {shared}'s exceeds {stacked}'s by more than {margin}; shown if all three "
                      "do, not shown if none does, mixed otherwise.",
            outcome=combine(outcomes),
            numbers="; ".join(f"{k}: {fmt(b[k])} vs {fmt(a[k])}" for k in MEASURES) + ".")

    def save(self, out_dir: str | Path) -> None:
        for m in self.models:
            slug = m.replace("/", "_")
            for what, res in (("future", self.future), ("lens", self.lens), ("ed", self.ed), ("score", self.score)):
                if res[m] is not None:
                    res[m].save(Path(out_dir) / f"depth_use_{what}_{slug}")


def depth_use(models: dict, prompts, *, tasks=("addition", "multihop"), n_per_level: int = 10, seed: int = 123,
              max_tokens: int | None = None, progress_bar: bool = True) -> DepthUse:
    """Every depth measurement on every model of ``models`` (``{name: handle}``; the stacked model
    first, the shared-layer one last): future effects and the logit lens on ``prompts``, effective
    depth on the same prompts, and the depth score on the graded ``tasks``."""
    fut, lens, ed, score = {}, {}, {}, {}
    for name, lm in models.items():
        fut[name] = future_effects(lm, prompts, seed=seed, max_tokens=max_tokens, progress_bar=progress_bar)
        lens[name] = logit_lens(lm, prompts, max_tokens=max_tokens, progress_bar=progress_bar)
        try:
            ed[name] = effective_depth(lm, prompts, max_tokens=max_tokens, progress_bar=progress_bar)
        except NothingFits:  # no prompt's whole text fits this model's context
            ed[name] = None
        score[name] = depth_score(lm, tasks, n=n_per_level, seed=seed, max_tokens=max_tokens,
                                  progress_bar=progress_bar)
    return DepthUse(fut, lens, ed, score)
