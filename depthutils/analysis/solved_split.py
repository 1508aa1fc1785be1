"""A reviewer's question on P1's depth score: do problems that only a deeper model solves use more of its depth?

Two models of the ladder (the same data and tokens, differing only in depth) are given the same problems, all held
out of the ladder's training (:func:`heldout_only`), so that "solved" means composed, not recalled: addition chains
of 3–6 operands and the held-out 2- and 3-hop compositions (:data:`HELDOUT_FAMILIES`), drawn for both by the same
seeded loaders of :func:`depthutils.measures.depth_score.depth_score` (the same ``{family: levels}``, ``n`` per
level, all where fewer exist, and ``seed``) and measured on both. Each problem falls in one of four groups by the two
models' greedy, teacher-free correctness (``prompt_correct``, judged as the depth score judges it): solved by neither
model, only by the deeper, only by the shallower, or by both. The deeper model's normalised depth score of each
problem (P1's depth score of the problem's future-effect matrix ``D``, divided by ``L − 1`` as chapter 6 does) is
then compared between "only the deeper solves" and "both solve": the difference of the two groups' means, with a
95% percentile bootstrap interval over problems (:func:`depthutils.core.results.bootstrap`).

Stratified by task family: each family is its own comparison, with its own bootstrap over its own problems.
Families differ in their scores, so a difference pooled over families would also measure which families the
only-deeper problems come from; the pooled difference is kept beside the families' (not graded). A group of
fewer than :data:`MIN_GROUP` problems with a defined score leaves its family's comparison untested.

Against its noise: greedy correctness at 20–30% accuracy flips between two models for reasons that have nothing to
do with depth, and such flips fall as often into "only the shallower" as into "only the deeper". The only-shallower
group is that noise's baseline: the share of the deeper model among a family's flips (``only_deeper / (only_deeper
+ only_shallower)``) is 0.5 under symmetric noise, and its exact (Clopper–Pearson) interval says whether the
only-deeper group holds more than noise (:func:`flip_share`, a McNemar-style test). :func:`flips_needed` gives how
many flips, and so how many problems, a share of the observed size needs for its interval to clear 0.5 at a given
power.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import ClassVar

import numpy as np

from depthutils.core.errors import DepthError
from depthutils.core.numbers import interval
from depthutils.core.results import Result, bootstrap
from depthutils.ladder.tasks import heldout_check
from depthutils.measures.depth_score import depth_score, draw, levels_of
from depthutils.measures.depth_score_result import DepthScoreResult
from depthutils.models.handle import load_model

__all__ = ["GROUPS", "MIN_GROUP", "HELDOUT_FAMILIES", "N_PER_LEVEL", "LADDER_TASK", "heldout_only", "SolvedSplit",
           "split", "solved_split", "flip_share", "flips_needed", "problems_needed"]

#: the four groups, by (solved by the shallower model, solved by the deeper): index ``2·shallower + deeper``
GROUPS = ("neither", "only_deeper", "only_shallower", "both")
#: the fewest problems (with a defined depth score) a compared group may hold (ours: a mean over fewer rests on one
#: or two problems, and a percentile bootstrap interval of it is too narrow to trust; it is half of P1's 20
#: problems per level)
MIN_GROUP = 10
#: the ladder's held-out problems (MATH and MQuAKE are solved by neither model): addition chains of 3–6 operands
#: (every two-operand chain is trained) and the held-out 2- and 3-hop compositions (every single fact is trained)
HELDOUT_FAMILIES = {"addition": (3, 4, 5, 6), "multihop_heldout": (2, 3)}
#: problems per level (ours: about 50, where the held-out sets allow; 48 compositions of 3 hops exist)
N_PER_LEVEL = 50
#: each ladder family of the depth score, by the ladder task whose held-out rule it follows
LADDER_TASK = {"addition": "addition", "multihop": "multihop", "multihop_heldout": "multihop"}


def heldout_only(groups: dict) -> dict:
    """``groups`` (``{family: {level: [Prompt, ...]}}``) without the problems the ladder was trained on
    (:func:`depthutils.ladder.tasks.heldout_check` of each prompt's context); a level left empty is dropped."""
    unknown = [t for t in groups if t not in LADDER_TASK]
    if unknown:
        raise DepthError(f"The split uses the ladder's held-out problems only; tasks {unknown} are not the ladder's "
                         f"(choose from {', '.join(LADDER_TASK)}).")
    out = {t: {lv: [p for p in ps if heldout_check(LADDER_TASK[t], p.context)] for lv, ps in by_level.items()}
           for t, by_level in groups.items()}
    return {t: {lv: ps for lv, ps in by_level.items() if ps} for t, by_level in out.items()}


@dataclass
class SolvedSplit(Result):
    """The problems split by which of two models solves them, with the deeper model's depth score of each.

    ``prompt_scores``: the deeper model's normalised depth score per problem (NaN where undefined), with
    ``prompt_tasks`` and ``prompt_levels``; ``shallow_correct`` and ``deep_correct``: whether each model solved it
    (1.0 or 0.0). ``meta`` is the deeper model's result's, its ``params`` naming the shallower model too.
    """

    prompt_scores: np.ndarray = None
    prompt_tasks: np.ndarray = None
    prompt_levels: np.ndarray = None
    shallow_correct: np.ndarray = None
    deep_correct: np.ndarray = None
    kind: ClassVar[str] = "solved_split"

    @property
    def n_layers(self) -> int:
        return int(self.meta["n_layers"])

    @property
    def models(self) -> tuple[str, str]:
        """(shallower, deeper) model names."""
        return self.meta["params"]["shallow"], self.meta["model"]

    def tasks(self) -> list:
        return list(dict.fromkeys(self.prompt_tasks.tolist()))

    def groups(self) -> np.ndarray:
        """Each problem's group name (:data:`GROUPS`)."""
        code = 2 * (np.asarray(self.shallow_correct) == 1) + (np.asarray(self.deep_correct) == 1)
        return np.array(GROUPS)[code]

    def _where(self, task=None, level=None) -> np.ndarray:
        """Indices of the problems of ``task`` (and ``level``); all by default."""
        keep = np.ones(len(self.prompt_scores), bool)
        if task is not None:
            keep &= self.prompt_tasks == task
        if level is not None:
            keep &= self.prompt_levels == level
        return np.flatnonzero(keep)

    def counts(self, task=None, level=None, scored: bool = False) -> dict:
        """``{group: number of problems}`` of ``task`` (and ``level``; all by default); ``scored``: only those whose
        depth score is defined."""
        idx = self._where(task, level)
        if scored:
            idx = idx[np.isfinite(self.prompt_scores[idx])]
        g = self.groups()[idx]
        return {name: int((g == name).sum()) for name in GROUPS}

    def mean(self, group: str, idx=None) -> float | None:
        """The mean normalised depth score of the problems of ``group`` among ``idx`` (repeats allowed; default all)
        whose score is defined; None if there is none."""
        idx = np.arange(len(self.prompt_scores)) if idx is None else np.asarray(idx)
        v = self.prompt_scores[idx][self.groups()[idx] == group]
        v = v[np.isfinite(v)]
        return float(v.mean()) if v.size else None

    def difference(self, idx=None) -> float | None:
        """Mean score of "only the deeper solves" minus that of "both solve", among problems ``idx``."""
        a, b = self.mean("only_deeper", idx), self.mean("both", idx)
        return None if a is None or b is None else a - b

    def _band(self, idx, statistic, level: float, n_boot: int, seed: int):
        """Percentile bootstrap interval of ``statistic(problem indices)`` over the problems ``idx``."""
        if not len(idx) or statistic(idx) is None:
            return None
        lo, hi = bootstrap(len(idx), lambda j: statistic(idx[j]), level=level, n_boot=n_boot, seed=seed)
        return None if np.isnan(lo) else (lo, hi)

    def difference_interval(self, task=None, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """Bootstrap interval of :meth:`difference` over the problems of ``task`` (all: pooled), resampled with
        replacement; a draw without one of the two groups is left out. None where the difference is undefined."""
        return self._band(self._where(task), self.difference, level, n_boot, seed)

    def mean_interval(self, group: str, task=None, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """Bootstrap interval of :meth:`mean` of ``group`` over the problems of ``task`` (all by default)."""
        return self._band(self._where(task), lambda i: self.mean(group, i), level, n_boot, seed)

    def tested(self, task=None) -> bool:
        """Whether both compared groups of ``task`` (all: pooled) hold at least :data:`MIN_GROUP` scored problems."""
        n = self.counts(task, scored=True)
        return min(n["only_deeper"], n["both"]) >= MIN_GROUP

    def _facts(self) -> dict:
        """The facts, computed once per result and kept on the instance (not by ``functools.cached_property``, whose
        lock cannot be pickled, and NDIF pickles the registered result classes)."""
        if "_facts_done" not in self.__dict__:
            self.__dict__["_facts_done"] = self._compute_facts()
        return self.__dict__["_facts_done"]

    def _compute_facts(self) -> dict:
        out = {"L": self.n_layers, "shallow_L": int(self.meta["params"]["shallow_layers"]), "min_group": MIN_GROUP,
               "n": len(self.prompt_scores), "undefined": int((~np.isfinite(self.prompt_scores)).sum())}
        for where, task in [("", None)] + [(f"{t}_", t) for t in self.tasks()]:
            out.update({f"{where}n_{g}": v for g, v in self.counts(task).items()})
            if task is not None:
                lvs = self.prompt_levels[self._where(task)].tolist()
                out[f"{task}_n_by_level"] = ", ".join(f"{lvs.count(lv)} at level {lv}" for lv in dict.fromkeys(lvs))
            out.update({f"{where}scored_{g}": v for g, v in self.counts(task, scored=True).items()})
            idx = self._where(task)
            out.update({f"{where}mean_{g}": _r3(self.mean(g, idx)) for g in GROUPS})
            band = self.difference_interval(task)
            out[f"{where}diff"] = _r3(self.difference(idx))
            out[f"{where}diff_lo"], out[f"{where}diff_hi"] = (None, None) if band is None else map(_r3, band)
            out[f"{where}tested"] = self.tested(task)
            n_od, n_os = out[f"{where}n_only_deeper"], out[f"{where}n_only_shallower"]
            share, lo, hi = flip_share(n_od, n_os)
            out[f"{where}flips"] = n_od + n_os
            out[f"{where}share"], out[f"{where}share_lo"], out[f"{where}share_hi"] = _r3(share), _r3(lo), _r3(hi)
        return out

    def facts(self) -> dict:
        return dict(self._facts())

    def table(self) -> str:
        """The groups' counts per task family and level, as plain text."""
        w = max([len(t) for t in self.tasks()] + [4]) + 2
        lines = [f"{'task':<{w}}{'level':>6}" + "".join(f"{g:>16}" for g in GROUPS)]
        for t in self.tasks():
            for lv in dict.fromkeys(self.prompt_levels[self._where(t)].tolist()):
                n = self.counts(t, lv)
                lines.append(f"{t:<{w}}{lv:>6}" + "".join(f"{n[g]:>16}" for g in GROUPS))
        return "\n".join(lines)

    def findings(self) -> str:
        f, (shallow, deep) = self.facts(), self.models
        parts = [f"{deep} against {shallow} on the same {f['n']} problems: neither solves {f['n_neither']}, only "
                 f"{deep} {f['n_only_deeper']}, only {shallow} {f['n_only_shallower']}, both {f['n_both']}."]
        for t in self.tasks():
            d = interval(f[f"{t}_diff"], f[f"{t}_diff_lo"], f[f"{t}_diff_hi"], fmt="+.3f")
            parts.append(f"{t}: {deep}'s mean normalised depth score {interval(f[f'{t}_mean_only_deeper'], fmt='+.3f')} where only it "
                         f"solves ({f[f'{t}_scored_only_deeper']} scored), {interval(f[f'{t}_mean_both'], fmt='+.3f')} where both "
                         f"do ({f[f'{t}_scored_both']}); difference {d}"
                         + ("." if f[f"{t}_tested"] else f" (a group below {MIN_GROUP} problems: not compared)."))
        return " ".join(parts)

    def summary(self) -> str:
        return "\n".join([super().summary(), self.table()])


def _binomial(m: int, p: float) -> np.ndarray:
    """The probabilities of 0, 1, …, m successes in ``m`` trials of success probability ``p`` (log space: exact
    for thousands of trials)."""
    if p <= 0 or p >= 1:
        return np.eye(m + 1)[0 if p <= 0 else m]
    lg = np.array([math.lgamma(i + 1) for i in range(m + 1)])
    k = np.arange(m + 1)
    return np.exp(lg[m] - lg - lg[::-1] + k * math.log(p) + (m - k) * math.log1p(-p))


def _solve(f, steps: int = 60) -> float:
    """The p in [0, 1] where the monotone ``f(p)`` turns True, by bisection."""
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if f(mid) else (mid, hi)
    return (lo + hi) / 2


def flip_share(n_deeper: int, n_shallower: int, level: float = 0.95):
    """The deeper model's share of the flips, ``n_deeper / (n_deeper + n_shallower)``, with its exact
    (Clopper–Pearson) ``level`` interval: ``(share, lo, hi)``; ``(None, None, None)`` without a flip. Under symmetric
    noise (a flip as likely either way) the share is 0.5; an interval wholly above 0.5 is an only-deeper group larger
    than noise (McNemar's exact test at ``1 − level``, two-sided)."""
    k, m = int(n_deeper), int(n_deeper) + int(n_shallower)
    if m == 0:
        return None, None, None
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else _solve(lambda p: _binomial(m, p)[k:].sum() >= a)
    hi = 1.0 if k == m else _solve(lambda p: _binomial(m, p)[: k + 1].sum() <= a)
    return k / m, lo, hi


def flips_needed(share: float | None, level: float = 0.95, power: float = 0.8, most: int = 100_000) -> int | None:
    """The fewest flips at which, if each falls to the deeper model with probability ``share``, the exact ``level``
    interval of :func:`flip_share` lies wholly above 0.5 with probability at least ``power``: the flips a share of
    that size needs to be told from symmetric noise. None for a share at or below 0.5 (no excess to tell), or if more
    than ``most`` flips would be needed."""
    if share is None or share <= 0.5:
        return None
    if share >= 1:
        return next(m for m in range(1, most) if 0.5 ** m < (1 - level) / 2)  # every flip to the deeper model
    z = NormalDist().inv_cdf
    approx = ((z(1 - (1 - level) / 2) * 0.5 + z(power) * math.sqrt(share * (1 - share))) / (share - 0.5)) ** 2
    for m in range(max(1, int(0.5 * approx)), most + 1):
        null = np.cumsum(_binomial(m, 0.5)[::-1])[::-1]  # P(X ≥ k) under symmetric noise, k = 0 … m
        above = np.flatnonzero(null < (1 - level) / 2)  # the k whose interval's lower end lies above 0.5
        if above.size and _binomial(m, share)[above[0]:].sum() >= power:
            return m
    return None


def problems_needed(flips: int | None, n_flips: int, n_problems: int) -> int | None:
    """The problems that give ``flips`` flips at the observed rate of ``n_flips`` flips in ``n_problems`` problems;
    None if either is undefined."""
    if flips is None or not n_flips:
        return None
    return math.ceil(flips * n_problems / n_flips)


def _r3(v):
    return None if v is None else round(float(v), 3) + 0.0


def split(shallow: DepthScoreResult, deep: DepthScoreResult) -> SolvedSplit:
    """The split of two depth-score results on the same problems (the same task families, levels, problems per
    level and seed, with ``accuracy=True``); ``deep`` must have more layers."""
    for r in (shallow, deep):
        if r.prompt_correct is None or np.isnan(r.prompt_correct).any():
            raise DepthError(f"{r.meta.get('model')}'s depth score has no correctness per problem; run it with "
                             "accuracy=True.")
    same = ("seed", "n_per_level", "levels", "tasks")
    ps, pd_ = shallow.meta.get("params", {}), deep.meta.get("params", {})
    if (len(shallow.prompt_scores) != len(deep.prompt_scores) or (shallow.prompt_tasks != deep.prompt_tasks).any()
            or (shallow.prompt_levels != deep.prompt_levels).any() or shallow.meta.get("seed") != deep.meta.get("seed")
            or any(ps.get(k) != pd_.get(k) for k in same)):
        raise DepthError("The two depth-score results are not on the same problems; run depth_score with the same "
                         "tasks, n and seed on both models (or pass the models to solved_split).")
    if deep.n_layers <= shallow.n_layers:
        raise DepthError(f"deep ({deep.meta.get('model')}, {deep.n_layers} layers) must have more layers than "
                         f"shallow ({shallow.meta.get('model')}, {shallow.n_layers} layers).")
    meta = {**deep.meta, "params": {**pd_, "shallow": shallow.meta.get("model"), "shallow_layers": shallow.n_layers}}
    return SolvedSplit(meta=meta, prompt_scores=deep.prompt_scores / (deep.n_layers - 1),
                       prompt_tasks=np.asarray(deep.prompt_tasks), prompt_levels=np.asarray(deep.prompt_levels),
                       shallow_correct=np.asarray(shallow.prompt_correct, float),
                       deep_correct=np.asarray(deep.prompt_correct, float))


def solved_split(shallow, deep, tasks=None, *, n: int = N_PER_LEVEL, seed: int = 0, max_tokens: int | None = None,
                 device: str = "auto", dtype="auto", progress_bar: bool = True) -> SolvedSplit:
    """Split problems by which of two models solves them and compare the deeper model's depth score between
    "only the deeper solves" and "both solve" (see the module's docstring).

    Args:
        shallow, deep: the shallower and the deeper model (names, as :func:`depthutils.models.load_model` takes
            them, or handles), or two :class:`~depthutils.measures.depth_score_result.DepthScoreResult` on the same
            problems (split as they are: which problems they hold is the caller's choice). Models are given the
            same problems: the deeper model's ``tasks`` resolved to one
            ``{family: levels}``, drawn once by the depth score's seeded loaders (``n``, ``seed``), the problems
            the ladder was trained on left out (:func:`heldout_only`), then checked by :func:`split`.
        tasks, n, seed, max_tokens: as :func:`depthutils.measures.depth_score.depth_score` takes them (default: the
            ladder's held-out problems, :data:`HELDOUT_FAMILIES`, :data:`N_PER_LEVEL` per level).
        device, dtype: how a model given by name is loaded.
    """
    if isinstance(shallow, DepthScoreResult) and isinstance(deep, DepthScoreResult):
        return split(shallow, deep)
    if isinstance(shallow, DepthScoreResult) or isinstance(deep, DepthScoreResult):
        raise DepthError("Pass two models or two DepthScoreResults as shallow and deep, not one of each.")
    handles = [load_model(m, device=device, dtype=dtype) if isinstance(m, str) else m for m in (shallow, deep)]
    groups = heldout_only(draw(levels_of(handles[1], HELDOUT_FAMILIES if tasks is None else tasks), n, seed))
    shallow_r, deep_r = (depth_score(h, groups=groups, n=n, seed=seed, max_tokens=max_tokens, progress_bar=progress_bar)
                         for h in handles)
    return split(shallow_r, deep_r)
