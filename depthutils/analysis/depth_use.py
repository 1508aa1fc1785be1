"""P1's MoEUT outlook in miniature: does a shared-layer model use more of its depth?

Runs the book's depth measurements on two (or more) models side by side: the
future effects of skipping a layer (P1 Fig. 3, spec §2), the logit lens (§3),
P2's effective depth (§8) and the depth score (§6). Each gives one number for
"how much of the depth is used", larger meaning later layers matter more:

* ``late_effect``: mean effect on later layers of skipping a second-half layer,
  over that of a first-half layer (future-tokens variant);
* ``kl_ratio``: P2's KL effective-depth ratio ``(ED + 1) / L``;
* ``depth_score``: the mean over the graded prompts of their normalised depth
  scores (ours; chapter 6 grades P1's statistic, the score of each level's
  effect matrix maxed over its prompts).

Each difference between two models comes with a paired 95% bootstrap interval
over prompts (both models are measured on the same prompts, and each resample
draws the same prompts for both).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from depthutils.core.errors import NothingFits
from depthutils.core.results import bootstrap, paired_interval
from depthutils.measures.curves import peaks_at_embedding
from depthutils.measures.depth_score import depth_score
from depthutils.measures.depth_score_result import DepthScoreResult
from depthutils.measures.effective_depth import EffectiveDepthResult, effective_depth
from depthutils.measures.future_effects import FutureEffectsResult, future_effects
from depthutils.measures.logit_lens import LogitLensResult, logit_lens

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
        kl = self.ed[model].ratio("kl") if self.ed[model] is not None else None
        score = self.score[model].mean_score()
        return {"late_effect": self.future[model].facts()["later_ratio"], "kl_ratio": None if kl is None else round(kl, 3),
                "depth_score": None if score is None else round(score, 3)}

    def difference(self, measure: str, a: str, b: str, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """Paired bootstrap interval of ``measure(a) − measure(b)`` over prompts (None: not measurable)."""
        if measure == "late_effect":
            pair, stat = (self.future[a], self.future[b]), lambda r: r.facts()["later_ratio"]
        elif measure == "kl_ratio":
            pair, stat = (self.ed[a], self.ed[b]), lambda r: r.ratio("kl")
        else:
            sa, sb = self.score[a], self.score[b]
            if len(sa.prompt_scores) != len(sb.prompt_scores):
                return None
            n = len(sa.prompt_scores)

            def diff(idx):
                x, y = sa.mean_score(idx), sb.mean_score(idx)
                return None if x is None or y is None else x - y
            return bootstrap(n, diff, level=level, n_boot=n_boot, seed=seed)
        if None in pair or pair[0].n_prompts != pair[1].n_prompts:
            return None
        lo, hi = paired_interval(*pair, stat, level=level, n_boot=n_boot, seed=seed)
        return None if np.isnan(lo) else (lo, hi)

    def facts(self) -> dict:
        """Each model's three numbers (``m{i}_*``), the last minus the first with paired intervals (``diff_*``), and
        ``kl_peak``: the models whose lens KL is largest at ``h_0``, where the KL ratio is degenerate (words);
        ``n_prompts``: the prompts of the future effects."""
        peaked = [m for m in self.models if self.ed[m] is not None and peaks_at_embedding(self.ed[m].kl)]
        out = {"kl_peak": ", ".join(peaked) or "none",
               "n_prompts": max((r.n_prompts for r in self.future.values()), default=0)}  # the future effects' N
        for i, m in enumerate(self.models):
            out.update({f"m{i}_{k}": v for k, v in self.numbers(m).items()})
        if len(self.models) > 1:
            a, b = self.models[-1], self.models[0]
            na, nb = self.numbers(a), self.numbers(b)
            for k in MEASURES:
                band = self.difference(k, a, b)
                out[f"diff_{k}"] = None if None in (na[k], nb[k]) else round(na[k] - nb[k], 3)
                out[f"diff_{k}_lo"], out[f"diff_{k}_hi"] = (None, None) if band is None else (
                    round(band[0], 3), round(band[1], 3))
        return out

    def summary(self) -> str:
        lines = [f"{'model':<24}" + "".join(f"{k:>14}" for k in MEASURES)]
        for m in self.models:
            n = self.numbers(m)
            lines.append(f"{m[-24:]:<24}" + "".join(f"{'—' if n[k] is None else f'{n[k]:.3f}':>14}" for k in MEASURES))
        lines.append(self.future[self.models[0]].fitting())
        return "\n".join(lines)

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
