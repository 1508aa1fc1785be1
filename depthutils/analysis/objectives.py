"""Does modelling the question end feature building earlier? The objectives experiment, measured (ours).

P1's authors hypothesise that a model trained on a task that needs depth, "without modeling the input
question", uses all its layers, and that modelling the question (Q+A) or adding language modelling (LM)
ends the feature-building stage earlier. :mod:`depthutils.ladder.objectives` trains one architecture under the
three objectives on two tasks (:mod:`depthutils.ladder.word_problems`: S5, which needs depth, and the Z10
control, which has a shortcut), five seeds each; the training command measures every run's snapshots at the
answer-predicting position (:mod:`depthutils.analysis.at_answer`) into tables
(:mod:`depthutils.analysis.objectives_tables`). This module reads them and compares the objectives:

* :meth:`ObjectivesResult.compare`: one measure, two objectives, on chosen snapshots and step counts: each
  objective's seed mean and its interval, the paired difference with its interval, and each seed's own
  difference. A draw of the bootstrap resamples the seeds, and for each drawn seed the prompts within each step
  count; a difference pairs the objectives by seed (same initial weights and examples) and prompt, and the
  null control's A′ (objective A on another draw of the examples, :data:`~depthutils.ladder.objectives.NULL`)
  pairs with A the same way;
* :meth:`ObjectivesResult.matched_steps`: per run, the first snapshot whose accuracy on a step count reaches a
  level, for comparisons at matched accuracy.

The grading (floors, which step counts count, the verdict) is the book's: :mod:`depthutils.book.claims.objectives`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from depthutils.analysis.at_answer import ARRAYS, MEASURES, AtAnswerResult, measure_of, measures_at
from depthutils.analysis.objectives_tables import TABLES_DIR, measure_model, read_tables
from depthutils.core.errors import DepthError
from depthutils.core.numbers import enclose
from depthutils.core.progress import progress
from depthutils.ladder import registry
from depthutils.ladder.objectives import NULL, OBJECTIVES


@dataclass
class Comparison:
    """One measure of two objectives ``a`` and ``b`` on one task: seed means with intervals, the paired
    difference ``a − b`` with its interval (widened to hold the difference, as printed), and each seed's difference
    (None: undefined)."""

    task: str
    measure: str
    a: str
    b: str
    levels: tuple
    mean_a: float | None
    mean_b: float | None
    band_a: tuple
    band_b: tuple
    diff: float | None
    lo: float | None
    hi: float | None
    seed_diffs: dict  # seed -> a − b on that seed's prompts (None: undefined)
    seed_a: dict      # seed -> a's value
    seed_b: dict

    @property
    def agree(self) -> int:
        """Seeds whose difference is above 0 (the direction the hypothesis predicts)."""
        return sum(d is not None and d > 0 for d in self.seed_diffs.values())

    @property
    def n_seeds(self) -> int:
        return len(self.seed_diffs)


@dataclass
class ObjectivesResult:
    """The experiment's tables (:func:`depthutils.analysis.objectives_tables.read_tables`) and, for the shipped
    runs re-measured live, their measures and the largest difference from their stored rows."""

    cards: dict
    snapshots: dict
    rows: dict
    live: dict = field(default_factory=dict)        # run -> AtAnswerResult measured now
    live_gap: dict = field(default_factory=dict)    # run -> largest relative |live − stored| (:func:`live_gap`)
    n_boot: int = 1000
    level: float = 0.95
    _cache: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ runs and snapshots
    def tasks(self) -> list[str]:
        """The tasks with at least one seed whose three objectives were all run."""
        return [t for t in registry.OBJECTIVE_TASKS if self.seeds(t)]

    def runs(self, task: str, objective: str | None = None) -> list[str]:
        """The runs of ``task`` (and ``objective``) whose seed ran every objective."""
        seeds = self.seeds(task)
        return [n for n, c in self.cards.items() if c["task"] == task and c["seed"] in seeds
                and (objective is None or c["objective"] == objective)]

    def seeds(self, task: str) -> list[int]:
        """The seeds of ``task`` whose three objectives were all run."""
        have = {(c["objective"], c["seed"]) for c in self.cards.values() if c["task"] == task}
        return sorted({s for _, s in have if all((o, s) in have for o in OBJECTIVES)})

    def run(self, task: str, objective: str, seed: int) -> str | None:
        return next((n for n in self.runs(task, objective) if self.cards[n]["seed"] == seed), None)

    def final_steps(self, task: str) -> dict:
        """``{run: its last step}``: the comparison at the same step."""
        return {n: self.cards[n]["steps"] for n in self.runs(task)}

    def accuracy(self, run: str, step: int) -> dict:
        """``{step count: greedy accuracy}`` of ``run`` at snapshot ``step`` (100 held-out chains each)."""
        return self.snapshots[run][step]

    def reachable(self, task: str, k: int) -> float:
        """The accuracy on ``k`` operations that every run of ``task`` reaches at some snapshot: the least, over
        runs, of the run's best."""
        return min(max(acc[k] for acc in self.snapshots[n].values()) for n in self.runs(task))

    def matched_steps(self, task: str, k: int, level: float) -> dict:
        """``{run: the first snapshot whose accuracy on k operations is at least level}`` (None: never)."""
        return {n: next((s for s in sorted(self.snapshots[n]) if self.snapshots[n][s][k] >= level), None)
                for n in self.runs(task)}

    # ------------------------------------------------------------------ measures
    def arrays(self, run: str, step: int) -> dict:
        """The per-prompt measures of ``run`` at ``step`` (``k`` [N]: each prompt's step count)."""
        return self.rows[(run, step)]

    def value(self, run: str, step: int, measure: str, levels) -> float | None:
        arr = self.arrays(run, step)
        return measure_of(arr, measure, np.flatnonzero(np.isin(arr["k"], levels)))

    def _weights(self, task: str, seeds: list, k_of: np.ndarray, levels: tuple) -> tuple:
        """The bootstrap's draws: ``drawn [n_boot, S]`` seeds (with replacement) and, per draw and slot, the
        counts ``W [n_boot, S, N]`` of the prompts resampled within each step count of ``levels``; one set for
        every measure and objective of a task (cached), so differences are paired."""
        key = ("weights", task, tuple(seeds), levels)
        if key not in self._cache:
            rng = np.random.default_rng(0)
            drawn = rng.choice(seeds, (self.n_boot, len(seeds)))
            W = np.zeros((self.n_boot * len(seeds), len(k_of)))
            rows = np.arange(len(W))
            for k in levels:
                x = np.flatnonzero(k_of == k)
                picks = x[rng.integers(0, len(x), (len(W), len(x)))]
                np.add.at(W, (np.repeat(rows, len(x)), picks.ravel()), 1.0)
            self._cache[key] = (drawn, W.reshape(self.n_boot, len(seeds), -1))
        return self._cache[key]

    def _seeds_at(self, task: str, steps: dict, objectives) -> list[int]:
        """The seeds of ``task`` whose runs of every objective of ``objectives`` have a snapshot in ``steps``."""
        return [s for s in self.seeds(task)
                if all((n := self.run(task, o, s)) is not None and steps.get(n) is not None for o in objectives)]

    def _column(self, task: str, objective: str, seeds: list) -> tuple:
        """``((seed, run), …)``: the run of ``objective`` each seed slot reads."""
        return tuple((s, self.run(task, objective, s)) for s in seeds)

    def _draws(self, task: str, steps: dict, measure: str, levels: tuple, column: tuple) -> np.ndarray:
        """``[n_boot]`` draws of the seed mean of ``measure`` over the runs of ``column`` (:meth:`_column`): the
        same resampled seeds and prompts for every column of a task and set of seeds, so differences are paired
        (NaN: undefined in a drawn seed)."""
        key = (task, tuple(sorted(steps.items(), key=lambda kv: kv[0])), measure, levels, column)
        if key not in self._cache:
            seeds = [s for s, _ in column]
            k_of = self.arrays(column[0][1], steps[column[0][1]])["k"]
            drawn, W = self._weights(task, seeds, k_of, levels)
            slots = np.full(drawn.shape, np.nan)
            for s, run in column:
                at = drawn == s
                slots[at] = measures_at(W[at], self.arrays(run, steps[run]), measure)
            self._cache[key] = slots.mean(1)
        return self._cache[key]

    def _band(self, draws) -> tuple:
        draws = draws[np.isfinite(draws)]
        if draws.size < 0.9 * self.n_boot:  # undefined in over a tenth of the draws: no interval
            return None, None
        lo, hi = np.percentile(draws, [50 * (1 - self.level), 50 * (1 + self.level)])
        return float(lo), float(hi)

    def compare(self, task: str, steps: dict, measure: str, a: str, b: str, levels) -> Comparison:
        """``measure`` of objectives ``a`` and ``b`` of ``task`` at the snapshots ``steps`` (``{run: step}``), on
        the prompts of the step counts ``levels``, paired by seed; a seed missing a run of any objective (or of
        ``a`` and ``b``: the null control's ``a2`` among them) or its snapshot is left out."""
        if measure not in MEASURES:
            raise DepthError(f"measure must be one of {MEASURES}, got {measure!r}.")
        levels = tuple(levels)
        seeds = self._seeds_at(task, steps, dict.fromkeys((*OBJECTIVES, a, b)))
        cols = (self._column(task, a, seeds), self._column(task, b, seeds))
        val = lambda run: self.value(run, steps[run], measure, levels)  # noqa: E731
        sa, sb = ({s: val(run) for s, run in col} for col in cols)
        mean = lambda v: None if not v or None in v.values() else float(np.mean(list(v.values())))  # noqa: E731
        ma, mb = mean(sa), mean(sb)
        diffs = {s: None if sa[s] is None or sb[s] is None else sa[s] - sb[s] for s in seeds}
        da, db = ((self._draws(task, steps, measure, levels, col) if seeds else np.full(self.n_boot, np.nan))
                  for col in cols)
        diff = None if ma is None or mb is None else ma - mb
        return Comparison(task, measure, a, b, levels, ma, mb, self._band(da), self._band(db), diff,
                          *enclose(diff, *self._band(da - db)), diffs, sa, sb)

    def has_null(self, task: str) -> bool:
        """Whether every seed of ``task`` has the null control's run (A on another draw of the examples), so the
        control is read on the seeds the objectives are compared on."""
        seeds = self.seeds(task)
        return bool(seeds) and all(self.run(task, NULL, s) is not None for s in seeds)

    def summary(self) -> str:
        lines = [f"{len(self.cards)} runs: " + ", ".join(
            f"{t} {len(self.runs(t))} ({len(self.seeds(t))} seeds)" for t in self.tasks())]
        if self.live_gap:
            worst = max(self.live_gap.items(), key=lambda kv: kv[1])
            lines.append(f"{len(self.live_gap)} shipped run(s) measured live: " + (
                f"each equals its stored rows within a relative {LIVE_RTOL:g}" if worst[1] < LIVE_RTOL else
                f"{worst[0]} differs from its stored rows by a relative {worst[1]:.1e}, above {LIVE_RTOL:g}"))
        return "\n".join(lines)


#: how far a live measurement may lie from its stored rows, relative to each array's largest stored value: the
#: tables keep 6 significant digits (5e-7), and the same weights differ by fp32 rounding only, whose order
#: depends on the thread count (3e-6 seen between one thread and two); another model or prompt differs by far more
LIVE_RTOL = 1e-4


def live_gap(live: AtAnswerResult, stored: dict) -> float:
    """The largest difference between a live measurement and its stored rows, over every array, relative to
    that array's largest stored magnitude (rounding scales with the values an array holds, so a value near 0
    is compared on its array's scale, not its own)."""
    gaps = [np.nanmax(np.abs(np.asarray(getattr(live, a), float) - stored[a])) / (np.nanmax(np.abs(stored[a])) + 1e-12)
            for a in (*ARRAYS, "depth")]
    return float(max(gaps))


def shipped_runs() -> list[str]:
    """The experiment's runs whose final model is in ``data/models``."""
    return [n for n in registry.SHIPPED_OBJECTIVE_RUNS if (registry.MODELS_DIR / n / "config.json").is_file()]


def objectives(tables=TABLES_DIR, *, live=None, n_boot: int = 1000, progress_bar: bool = True, **load) -> ObjectivesResult:
    """Read the experiment's tables and re-measure the shipped runs live.

    Args:
        tables: the folder of the tables (default ``data/experiments/objectives``).
        live: the shipped runs to measure again now (default: every shipped run in ``data/models``; ``[]``: none);
            each is compared with its stored rows (:attr:`ObjectivesResult.live_gap`).
        n_boot: draws of the bootstrap over seeds and prompts.
        load: passed to :func:`depthutils.load_model` (``device``, ``dtype``, ``remote``, ``prepend_bos``).
    """
    t = read_tables(tables)
    if t is None:
        raise DepthError(f"The objectives experiment's tables are not in {tables}; train and measure the runs with "
                         "`python -m depthutils objectives`.")
    result = ObjectivesResult(t["cards"], t["snapshots"], t["rows"], n_boot=n_boot)
    names = [n for n in shipped_runs() if n in t["cards"]] if live is None else list(live)
    for n in progress(names, "shipped runs, live", enabled=progress_bar):
        card = t["cards"][n]
        _, res = measure_model(n, card["task"], **load)
        result.live[n] = res
        result.live_gap[n] = live_gap(res, t["rows"][(n, card["steps"])])
    return result
