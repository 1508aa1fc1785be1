"""Does modelling the question end feature building earlier? The objectives experiment, measured (ours).

P1's authors hypothesise that a model trained on a task that needs depth, "without modeling the input
question", uses all its layers, and that modelling the question (Q+A) or adding language modelling (LM)
ends the feature-building stage earlier. :mod:`depthutils.ladder.objectives` trains one architecture on one
task (chains of operations mod 10) under the three objectives, three seeds each; this module measures the
final models and the training snapshots with the book's measurements:

* ``contributions``: P1's relative contribution ``‖Δ_l‖/‖h_l‖``, second half over first (chapter 1);
* ``later``: the effect of skipping a second-half layer on the later layers over that of a first-half one
  (chapter 2, future tokens);
* ``ed_kl`` and ``ed_overlap``: P2's effective-depth ratios ``(ED + 1)/L`` on the lens (chapter 3);
* ``depth``: P1's depth score (chapter 6) of each step count (1–6 operations, the trained range),
  normalised by ``L − 1``, averaged over the step counts; its slope against the step count is reported beside it.

Each is larger when the later layers do more of the work. The first four are read on held-out 6-operation
chains, answer included, every token counted (as P1 counts every token of a GSM8K text); the depth score on
held-out chains of every step count, at the answer's first token.

Intervals are over seeds and prompts: a draw resamples the seeds, and for each drawn seed the prompts (the
depth score's within each step count); a difference between two objectives pairs them by seed and prompt
(the same seed means the same initial weights and task examples).
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from depthutils.core.progress import progress
from depthutils.core.prompts import Prompt
from depthutils.ladder import registry
from depthutils.ladder.objectives import (EVAL_STEPS, MOD, OBJECTIVE_LABELS, OBJECTIVES, TRAIN_STEPS, accuracy,
                                          eval_chains)
from depthutils.measures.curves import OVERLAP_THRESHOLD
from depthutils.measures.contributions import ContributionsResult, contributions
from depthutils.measures.depth_score import depth_score
from depthutils.measures.depth_score_result import DepthScoreResult
from depthutils.measures.effective_depth import EffectiveDepthResult
from depthutils.measures.future_effects import FutureEffectsResult, future_effects
from depthutils.measures.logit_lens import logit_lens

#: the measures, in the order of the verdict; each larger when the later layers do more
MEASURES = ("contributions", "later", "ed_kl", "ed_overlap", "depth")
MEASURE_LABELS = {"contributions": "contribution ratio (2nd/1st half)", "later": "later-layer effect ratio",
                  "ed_kl": "ED_KL ratio", "ed_overlap": "ED_overlap ratio",
                  "depth": "normalised depth score"}
#: the training-dynamics table the training command writes
DYNAMICS_CSV = registry.REPO_ROOT / "data" / "experiments" / "objectives_dynamics.csv"
DYNAMICS_FIELDS = ("run", "objective", "seed", "step", "contributions", "ed_kl", "ed_overlap", "accuracy_trained",
                   *(f"accuracy_{k}" for k in EVAL_STEPS))
DEPTH_TASK = "opchain"
#: the training-dynamics table's "learned" mark: accuracy over the trained step counts above this share
LEARNED = 0.5


def chain_prompts(n: int, steps: int, seed: int = 0) -> list[Prompt]:
    """``n`` held-out chains of ``steps`` operations as teacher-forced prompts (answer included)."""
    return [Prompt.from_parts(e.prompt, e.answer, DEPTH_TASK, steps=steps) for e in eval_chains(n, steps, seed)]


@dataclass
class Measured:
    """One model's measurements."""

    name: str
    objective: str
    seed: int
    contributions: ContributionsResult
    future: FutureEffectsResult
    ed: EffectiveDepthResult
    score: DepthScoreResult
    accuracy: dict  # step count -> greedy accuracy on 100 chains (the model's card)

    def value(self, measure: str, idx=None, levels=None) -> float | None:
        """``measure`` on prompts ``idx`` (repeats allowed; default all) and depth-score prompts ``levels``."""
        if measure == "contributions":
            r = self.contributions if idx is None else self.contributions.resample(idx)
            return r.half_ratio()
        if measure == "later":
            r = self.future if idx is None else self.future.resample(idx)
            return r.later_ratio()
        if measure in ("ed_kl", "ed_overlap"):
            r = self.ed if idx is None else self.ed.resample(idx)
            return r.ratio(measure[3:])
        picked = np.arange(len(self.score.prompt_scores)) if levels is None else levels
        scores = [self.score.level_score(picked[self.score.prompt_levels[picked] == k]) for k in TRAIN_STEPS]
        scores = [s for s in scores if s is not None]
        return float(np.mean(scores)) if scores else None

    def depth_scores(self) -> dict:
        """P1's normalised depth score per step count (every measured count, trained or longer)."""
        return {int(r["level"]): r["norm_score"] for r in self.score.rows}

    def trained_accuracy(self) -> float:
        """Mean greedy accuracy over the trained step counts."""
        return float(np.mean([self.accuracy[k] for k in TRAIN_STEPS]))


@dataclass
class ObjectivesResult:
    """Every run's measurements, and the training-dynamics table (None where it was not found)."""

    runs: list[Measured]
    dynamics: list[dict] | None = None
    n_boot: int = 400
    level: float = 0.95
    _draws: dict = field(default_factory=dict, repr=False)

    @property
    def seeds(self) -> list[int]:
        return sorted({r.seed for r in self.runs})

    def run(self, objective: str, seed: int) -> Measured | None:
        return next((r for r in self.runs if r.objective == objective and r.seed == seed), None)

    def objectives(self) -> list[str]:
        return [o for o in OBJECTIVES if any(r.objective == o for r in self.runs)]

    def _draw(self, measure: str) -> np.ndarray:
        """``[n_boot, objectives]`` draws of each objective's seed mean of ``measure`` (NaN: undefined), the
        same resampled seeds and prompts for every objective (so differences are paired)."""
        if measure in self._draws:
            return self._draws[measure]
        rng, objs, seeds = np.random.default_rng(0), self.objectives(), self.seeds
        n = len(self.runs[0].contributions.prompt_tokens)
        levels = self.runs[0].score.prompt_levels
        out = np.full((self.n_boot, len(objs)), np.nan)
        for b in range(self.n_boot):
            drawn = rng.choice(seeds, len(seeds))
            idx = [rng.integers(0, n, n) for _ in drawn]
            lv = [np.concatenate([rng.choice(np.flatnonzero(levels == k), (levels == k).sum())
                                  for k in np.unique(levels)]) for _ in drawn]
            for j, o in enumerate(objs):
                runs = [self.run(o, s) for s in drawn]
                vals = [None if r is None else r.value(measure, i, l) for r, i, l in zip(runs, idx, lv)]
                if all(v is not None for v in vals):
                    out[b, j] = np.mean(vals)
        self._draws[measure] = out
        return out

    def _band(self, draws) -> tuple[float | None, float | None]:
        draws = draws[np.isfinite(draws)]
        if draws.size < 0.9 * self.n_boot:  # undefined in over a tenth of the draws: no interval
            return None, None
        lo, hi = np.percentile(draws, [50 * (1 - self.level), 50 * (1 + self.level)])
        return float(lo), float(hi)

    def mean(self, measure: str, objective: str) -> float | None:
        """The seed mean of ``measure`` (None where a seed's run is missing or its value undefined)."""
        vals = [None if r is None else r.value(measure) for r in (self.run(objective, s) for s in self.seeds)]
        return None if any(v is None for v in vals) else float(np.mean(vals))

    def per_objective(self, measure: str) -> dict:
        """``{objective: (seed mean, lo, hi)}`` of ``measure``."""
        draws = self._draw(measure)
        return {o: (self.mean(measure, o), *self._band(draws[:, j])) for j, o in enumerate(self.objectives())}

    def difference(self, measure: str, a: str, b: str) -> tuple:
        """``(mean, lo, hi)`` of ``measure(a) − measure(b)``, paired by seed and prompt."""
        objs = self.objectives()
        if a not in objs or b not in objs:
            return None, None, None
        ma, mb = self.mean(measure, a), self.mean(measure, b)
        draws = self._draw(measure)
        d = draws[:, objs.index(a)] - draws[:, objs.index(b)]
        return (None if None in (ma, mb) else ma - mb, *self._band(d))

    def seed_values(self, measure: str) -> dict:
        """``{objective: [value per seed]}``."""
        return {o: [r.value(measure) for r in (self.run(o, s) for s in self.seeds) if r is not None]
                for o in self.objectives()}

    def accuracy(self) -> dict:
        """``{objective: {step count: (seed mean, min, max)}}`` of the cards' greedy accuracy."""
        out = {}
        for o in self.objectives():
            rows = [r.accuracy for r in (self.run(o, s) for s in self.seeds) if r is not None]
            out[o] = {k: (float(np.mean([r[k] for r in rows])), min(r[k] for r in rows), max(r[k] for r in rows))
                      for k in EVAL_STEPS}
        return out

    def facts(self) -> dict:
        """The numbers the chapter states, rounded as printed."""
        r3 = lambda v: None if v is None else round(v, 3)
        out = {"n_seeds": len(self.seeds), "n_runs": len(self.runs), "L": self.runs[0].contributions.facts()["L"],
               "chance": round(1 / MOD, 2), "overlap_threshold": OVERLAP_THRESHOLD, "learned": LEARNED}
        for m in MEASURES:
            for o, (mean, lo, hi) in self.per_objective(m).items():
                out.update({f"{o}_{m}": r3(mean), f"{o}_{m}_lo": r3(lo), f"{o}_{m}_hi": r3(hi)})
            for a, b in (("a", "qa"), ("qa", "lm")):
                d, lo, hi = self.difference(m, a, b)
                out.update({f"d_{a}_{b}_{m}": r3(d), f"d_{a}_{b}_{m}_lo": r3(lo), f"d_{a}_{b}_{m}_hi": r3(hi)})
        for o, by_k in self.accuracy().items():
            out[f"{o}_acc_trained"] = round(float(np.mean([by_k[k][0] for k in TRAIN_STEPS])), 2)
            out[f"{o}_acc_longer"] = round(float(np.mean([by_k[k][0] for k in EVAL_STEPS if k not in TRAIN_STEPS])), 2)
            slopes = [r.score.slope(DEPTH_TASK) for r in (self.run(o, s) for s in self.seeds) if r is not None]
            out[f"{o}_slope"] = None if None in slopes else round(float(np.mean(slopes)), 3) + 0.0  # no "-0.0"
        return {**out, **self.dynamics_facts()}

    def dynamics_facts(self) -> dict:
        """Per objective, from the training-dynamics table (seed means): the contribution ratio and the KL
        effective-depth ratio at the first and the last snapshot, and the first step at which the accuracy over
        the trained step counts passes :data:`LEARNED` (None: never)."""
        out = {}
        for o in self.objectives():
            mine = [r for r in self.dynamics or [] if r["objective"] == o]
            steps = sorted({r["step"] for r in mine})
            if not steps:
                continue
            at = lambda s, k: [r[k] for r in mine if r["step"] == s and r[k] is not None]  # noqa: E731
            mean = lambda v: round(float(np.mean(v)), 3) if v else None  # noqa: E731
            for k in ("contributions", "ed_kl"):
                out[f"{o}_{k}_first"], out[f"{o}_{k}_last"] = mean(at(steps[0], k)), mean(at(steps[-1], k))
            passed = [s for s in steps if (mean(at(s, "accuracy_trained")) or 0) > LEARNED]
            out[f"{o}_learned_at"] = int(passed[0]) if passed else None
            out["first_step"], out["last_step"] = int(steps[0]), int(steps[-1])
        return out

    def summary(self) -> str:
        """One line per objective and measure: the seed mean and its interval over seeds and prompts."""
        lines = [f"{'objective':<18}{'measure':<36}seed mean [95% interval]"]
        for m in MEASURES:
            for o, (mean, lo, hi) in self.per_objective(m).items():
                cell = "—" if mean is None else f"{mean:.3f}" + ("" if lo is None else f" [{lo:.2f}, {hi:.2f}]")
                lines.append(f"{OBJECTIVE_LABELS[o]:<18}{MEASURE_LABELS[m]:<36}{cell}")
        return "\n".join(lines)

def measure_run(name: str, *, n: int = 20, n_per_level: int = 10, seed: int = 0, max_tokens: int | None = None,
                progress_bar: bool = False, **load) -> Measured:
    """Every measurement of one shipped run (an embedded model folder name, e.g. ``"objective-a-1"``);
    ``max_tokens`` as every measurement takes it (default: the model's context)."""
    from depthutils.models import load_model

    lm = load_model(name, **load)
    folder = registry.resolve_alias(name)
    card = json.loads((folder / "card.json").read_text())
    prompts = chain_prompts(n, TRAIN_STEPS[-1], seed)
    contrib = contributions(lm, prompts, max_tokens=max_tokens, progress_bar=progress_bar)
    lens = logit_lens(lm, prompts, max_tokens=max_tokens, progress_bar=progress_bar)
    groups = {DEPTH_TASK: {k: chain_prompts(n_per_level, k, seed + 1) for k in EVAL_STEPS}}
    return Measured(name, card["objective"], int(card["seed"]), contrib,
                    future_effects(lm, prompts, max_tokens=max_tokens, progress_bar=progress_bar),
                    EffectiveDepthResult.from_prompts(contrib, lens, meta=dict(contrib.meta)),
                    depth_score(lm, groups=groups, n=n_per_level, seed=seed, max_tokens=max_tokens,
                                progress_bar=progress_bar),
                    {int(k): v for k, v in card["accuracy"].items()})


def shipped_runs() -> list[str]:
    """The experiment's runs whose final model is in ``data/models`` (with its card)."""
    return [n for n in registry.OBJECTIVE_RUNS if (registry.MODELS_DIR / n / "card.json").is_file()]


def read_dynamics(path: Path = DYNAMICS_CSV) -> list[dict] | None:
    """The training-dynamics table (None if it has not been written)."""
    if not Path(path).is_file():
        return None
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    num = lambda v: None if v in ("", None) else float(v)
    return [{k: v if k in ("run", "objective") else int(v) if k in ("seed", "step") else num(v) for k, v in r.items()}
            for r in rows]


def objectives(runs=None, *, n: int = 20, n_per_level: int = 10, seed: int = 0, n_boot: int = 400,
               max_tokens: int | None = None, dynamics: Path | None = DYNAMICS_CSV, progress_bar: bool = True,
               **load) -> ObjectivesResult:
    """Measure the experiment's shipped runs (``runs``: folder names; default all shipped) and read the
    training-dynamics table.

    Args:
        n: held-out 6-operation chains for the contributions, future effects and lens.
        n_per_level: held-out chains per step count (1–8) for the depth score.
        n_boot: draws of the seed-and-prompt bootstrap.
        max_tokens: as every measurement takes it (default: each model's context).
        load: passed to :func:`depthutils.load_model` (``device``, ``dtype``, ``remote``, ``prepend_bos``).
    """
    names = list(runs) if runs is not None else shipped_runs()
    if not names:
        raise FileNotFoundError("No run of the objectives experiment is in data/models; train them with "
                                "`python -m depthutils objectives`.")
    measured = [measure_run(name, n=n, n_per_level=n_per_level, seed=seed, max_tokens=max_tokens, **load)
                for name in progress(names, "objectives", enabled=progress_bar)]
    return ObjectivesResult(measured, read_dynamics(dynamics) if dynamics else None, n_boot=n_boot)


def snapshot_row(folder: Path, run: str, step: int, *, n: int = 10, seed: int = 0) -> dict:
    """One row of the training-dynamics table: a snapshot's contribution ratio, lens EDs and accuracy."""
    from depthutils.models import load_model

    lm = load_model(str(folder), dtype="float32")
    prompts = chain_prompts(n, TRAIN_STEPS[-1], seed)
    contrib = contributions(lm, prompts, progress_bar=False)
    ed = EffectiveDepthResult.from_prompts(contrib, logit_lens(lm, prompts, progress_bar=False))
    acc = accuracy(lm.hf, lm.tokenizer)
    spec = registry.SPECS[run]
    return dict(run=run, objective=spec["objective"], seed=spec["seed"], step=step,
                contributions=round(contrib.half_ratio(), 4), ed_kl=ed.ratio("kl"), ed_overlap=ed.ratio("overlap"),
                accuracy_trained=round(float(np.mean([acc[k] for k in TRAIN_STEPS])), 3),
                **{f"accuracy_{k}": acc[k] for k in EVAL_STEPS})


def write_dynamics(ckpt_root: Path = registry.DEFAULT_CKPT_DIR, out: Path = DYNAMICS_CSV, *, n: int = 10,
                   progress_bar: bool = True) -> list[dict]:
    """Measure every kept snapshot of every run under ``ckpt_root`` and write the table to ``out``. A snapshot
    whose row the table at ``out`` already holds keeps that row (delete the table to measure everything again)."""
    todo = [(run, p) for run in registry.OBJECTIVE_RUNS
            for p in sorted((Path(ckpt_root) / run / "snapshots").glob("step-*"))]
    done = {(r["run"], int(r["step"])): r for r in read_dynamics(out) or []}
    rows = [done.get((run, int(p.name.split("-")[1]))) or snapshot_row(p, run, int(p.name.split("-")[1]), n=n)
            for run, p in progress(todo, "snapshots", enabled=progress_bar)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, DYNAMICS_FIELDS)
        w.writeheader()
        w.writerows(rows)
    return rows
