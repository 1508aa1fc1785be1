"""P1 §6's depth score of a future-effect matrix, and the result of :func:`depthutils.measures.depth_score.depth_score`
with its slopes over the difficulty levels and their bootstrap intervals.

P1's statistic (spec §6) is one score per level: that of the level's effect matrix ``D``, maxed over the
level's prompts and positions. Its slope over the levels is graded; its interval resamples the prompts
within each level and recomputes each level's max and score. The slope of the level means of the
per-prompt scores (ours) is kept beside it as a smooth companion.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar

import numpy as np

from depthutils.core.numbers import number
from depthutils.core.results import Result


def score(D: np.ndarray) -> float | None:
    """P1's depth score of a future-effect matrix ``D [L, L]`` (NaN or anything at ``j ≤ s`` ignored).

    None when no layer has an effect (``Σ r_s = 0``).
    """
    D = np.asarray(D, float)
    L = D.shape[0]
    above = np.triu(np.where(np.isnan(D), 0.0, D), 1)  # only j > s counts; a NaN counts 0
    r = above[:L - 1].sum(axis=1) / (L - 1 - np.arange(L - 1))
    total = r.sum()
    return None if total <= 0 else float((np.arange(L - 1) * r).sum() / total)


@dataclass
class DepthScoreResult(Result):
    """Depth scores per task family and level (long-form rows), with the per-prompt values behind them.

    ``rows``: one dict per (task, level) with ``score`` (of ``D`` maxed over the level's prompts, P1),
    ``mean_score`` (mean of the per-prompt scores, ours), their values ``/ (L-1)`` (``norm_score``,
    ``norm_mean_score``), ``accuracy`` and ``n``.
    ``prompt_effects``: ``[n_prompts, L, L]``, each prompt's ``D`` (maxed over its positions), from which a
    level's max is recomputed on a resample; None in a result saved without it (P1's slope then has no interval).
    ``prompt_scores``: ``[n_prompts]`` scores of those matrices, with ``prompt_tasks``, ``prompt_levels``
    and ``prompt_correct`` beside them.
    """

    prompt_scores: np.ndarray = None
    prompt_levels: np.ndarray = None
    prompt_tasks: np.ndarray = None
    prompt_correct: np.ndarray = None
    prompt_effects: np.ndarray = None
    rows: list = field(default_factory=list)
    kind: ClassVar[str] = "depth_score"

    @property
    def n_layers(self) -> int:
        return int(self.meta["n_layers"])

    def _levels(self, task: str) -> list:
        """The levels of ``task`` in the order of its rows (rank 0, 1, …)."""
        return [r["level"] for r in self.rows if r["task"] == task]

    def _groups(self, task: str, idx=None) -> list:
        """Per level of ``task`` (rank 0, 1, … in the rows' order), the indices of its prompts among ``idx``
        (prompt indices, repeats allowed; default all)."""
        idx = np.arange(len(self.prompt_scores)) if idx is None else np.asarray(idx)
        tasks, levels = self.prompt_tasks[idx], self.prompt_levels[idx]
        return [idx[(tasks == task) & (levels == lv)] for lv in self._levels(task)]

    @staticmethod
    def _fit(value: Callable, groups: list) -> float | None:
        """Least-squares slope of ``value(prompt indices of a level)`` against the level's rank (its place in
        ``groups``); a level without prompts, or whose value is None or not finite, is left out."""
        pts = []
        for rank, g in enumerate(groups):
            v = value(g) if len(g) else None
            if v is not None and np.isfinite(v):
                pts.append((rank, v))
        if len(pts) < 2:
            return None
        x, y = np.array(pts, float).T
        return float(np.polyfit(x, y, 1)[0])

    def level_score(self, idx) -> float | None:
        """P1's normalised score of one level's prompts ``idx``: ``score(D maxed over them) / (L-1)``."""
        if not len(idx):
            return None
        s = score(np.fmax.reduce(self.prompt_effects[np.asarray(idx)], axis=0))
        return None if s is None else s / (self.n_layers - 1)

    def slope(self, task: str, idx=None) -> float | None:
        """P1's statistic: the least-squares slope of the level's normalised score (of ``D`` maxed over the
        level's prompts) against the level rank (0, 1, …) of one task family, from ``prompt_effects``: each
        level's max over its prompts among ``idx`` (prompt indices, repeats allowed; default all). A result
        saved without them gives the slope of its rows' ``norm_score`` (and ignores ``idx``)."""
        if self.prompt_effects is not None:
            return self._fit(self.level_score, self._groups(task, idx))
        pts = [(i, r["norm_score"]) for i, r in enumerate(r for r in self.rows if r["task"] == task)
               if r["norm_score"] is not None]  # a result saved without prompt_effects: its rows' scores
        if len(pts) < 2:
            return None
        x, y = np.array(pts, float).T
        return float(np.polyfit(x, y, 1)[0])

    def mean_score(self, idx=None) -> float | None:
        """The mean normalised score of the prompts ``idx`` (None: every prompt) whose score is defined (ours, not
        P1's per-level statistic, :meth:`slope`); None if none is defined."""
        v = self.prompt_scores if idx is None else self.prompt_scores[np.asarray(idx)]
        v = v[np.isfinite(v)]
        return float(v.mean() / (self.n_layers - 1)) if v.size else None

    def mean_slope(self, task: str, idx=None) -> float | None:
        """Ours: the slope of the level means of the per-prompt normalised scores (prompts ``idx``) against
        the level rank, a smooth companion of P1's :meth:`slope`."""
        return self._fit(self.mean_score, self._groups(task, idx))

    def _interval(self, task: str, value: Callable, level: float, n_boot: int, seed: int):
        """Percentile bootstrap interval of the slope of ``value`` (of one level's prompt indices) over the
        levels, resampling prompts within each level (stratified): per draw, for each level in the rows'
        order, ``rng.choice(its prompts, their number)``, and ``value`` recomputed on each level's draw."""
        groups = self._groups(task)
        if not any(g.size for g in groups):
            return None
        rng = np.random.default_rng(seed)
        draws = [self._fit(value, [rng.choice(g, g.size) if g.size else g for g in groups]) for _ in range(n_boot)]
        draws = np.array([np.nan if d is None else d for d in draws])
        if np.isnan(draws).all():
            return None
        lo, hi = np.nanpercentile(draws, [50 * (1 - level), 50 * (1 + level)])
        return float(lo), float(hi)

    def slope_interval(self, task: str, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """Bootstrap interval of P1's :meth:`slope`: prompts resampled within each level, each level's max of
        ``D`` and its score recomputed per draw (None without ``prompt_effects``).

        A resampled max never exceeds the level's observed one, so the interval says how much the slope
        hangs on a few prompts rather than where a population's max would lie."""
        if self.prompt_effects is None:
            return None
        return self._interval(task, self.level_score, level, n_boot, seed)

    def mean_slope_interval(self, task: str, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """Bootstrap interval of :meth:`mean_slope` (ours), resampling prompts within each level (stratified)."""
        return self._interval(task, self.mean_score, level, n_boot, seed)

    def facts(self) -> dict:
        tasks = list(dict.fromkeys(r["task"] for r in self.rows))
        out = {"L": self.n_layers}
        for t in tasks:
            rows = [r for r in self.rows if r["task"] == t]
            out[f"{t}_slope"] = _r3(self.slope(t))
            band = self.slope_interval(t)
            out[f"{t}_slope_lo"], out[f"{t}_slope_hi"] = (None, None) if band is None else map(_r3, band)
            out[f"{t}_n_by_level"] = ", ".join(f"{r['n']} at level {r['level']}" for r in rows)
            out[f"{t}_first"] = _r3(rows[0]["norm_score"])
            out[f"{t}_last"] = _r3(rows[-1]["norm_score"])
            out[f"{t}_acc_first"] = _r3(rows[0]["accuracy"])
            out[f"{t}_acc_last"] = _r3(rows[-1]["accuracy"])
            out[f"{t}_mean_slope"] = _r3(self.mean_slope(t))
            band = self.mean_slope_interval(t)
            out[f"{t}_mean_slope_lo"], out[f"{t}_mean_slope_hi"] = (None, None) if band is None else map(_r3, band)
        return out

    def findings(self) -> str:
        parts = []
        for t in dict.fromkeys(r["task"] for r in self.rows):
            rows = [r for r in self.rows if r["task"] == t]
            s, m = self.slope(t), self.mean_slope(t)
            levels = ", ".join(f"{r['level']}: {_fmt(r['norm_score'])} ({_fmt(r['accuracy'], pct=True)})"
                               for r in rows)
            parts.append(f"{t}: normalised depth score of D maxed over the level's prompts (accuracy) by level "
                         f"{levels}; P1's slope per level {number(s, '+.3f')}, the slope "
                         f"of the level means of the prompts' scores (ours) {number(m, '+.3f')}.")
        return " ".join(parts)


def _r3(v):
    """``v`` rounded to 3 digits (a rounded -0.0 is 0.0, so a flat slope reads +0.000)."""
    return None if v is None else round(float(v), 3) + 0.0


def _fmt(v, pct: bool = False) -> str:
    if v is None:
        return "—"
    return f"{100 * v:.0f}%" if pct else f"{v:.3f}"
