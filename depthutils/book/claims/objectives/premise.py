"""Chapter 10's premise, graded before any objective is compared: within a fixed budget, does S5 need more layers
than the C10 control at the lengths trained?

The depth-necessity sweep (:mod:`depthutils.ladder.sweep`) trains objective A on S5 and on C10 (additions mod 10,
which one attention layer can sum) at each layer count of :data:`~depthutils.ladder.registry.SWEEP_LAYERS`, three
seeds each, on chains of 1 to :data:`~depthutils.ladder.registry.SWEEP_LONGEST` operations at a constant learning
rate, and stores every snapshot's greedy accuracy per chain length in ``data/experiments/depth_sweep/rows.csv``.
Read from that table (ours):

* a run's accuracy on a length is the mean of its last :data:`READ` snapshots (a constant rate leaves the weights
  noisy from one snapshot to the next);
* its **frontier** ``k*`` is the longest trained length up to which it reaches :data:`LEARNED` on every length
  from :data:`~depthutils.book.claims.objectives.MIN_COMPOSED` operations on (one operation is a lookup);
  ``k* = 1`` when it does not reach it on two;
* a task and layer count is **complete** with :data:`MIN_SEEDS` seeds; its frontier is its seeds' smallest (every
  seed learns up to it);
* the **premise's lengths** are 2 … ``K``: ``K`` is the smaller of C10's frontier at the fewest layers and the
  longest S5 frontier at more layers, the lengths the control learns with the fewest layers and S5 with more;
* the premise is **shown** when every S5 seed at the fewest layers has a frontier below ``K``; **not shown** when
  every one reaches ``K``; **mixed** when the seeds disagree; **not tested** when ``K`` is below 2 (the control
  is not learned at the fewest layers, or S5 at no larger count), or while the fewest layers' cells are not
  complete. S5 cells with fewer seeds are left out of ``K``; while one is, only *shown* is graded (more runs can
  only lengthen ``K``), anything else is **not tested**.

The budget is part of the claim: whether more steps would teach S5 to two layers is a separate question, and each
run's frontier at every snapshot (:func:`figure`, :func:`table`) shows whether it was still moving.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from depthutils.book.claim_table import CLAIMS
from depthutils.book.claims.objectives import MIN_COMPOSED
from depthutils.book.grading import Verdict, verdict_of
from depthutils.book.legends import below
from depthutils.book.plotstyle import subplots
from depthutils.ladder.registry import (
    SWEEP_EVAL,
    SWEEP_EXAMPLES,
    SWEEP_LAYERS,
    SWEEP_LONGEST,
    SWEEP_STEPS,
    SWEEP_TABLE,
    SWEEP_TASKS,
)
from depthutils.ladder.word_problems import TASKS

__all__ = ["LEARNED", "MIN_SEEDS", "READ", "TRAINED", "CRITERION", "MODELS", "Run", "frontier", "load",
           "cell_frontier", "premise_length", "verdict", "facts", "table", "figure"]

#: a run learns a length at or above this accuracy (the standard the experiment's runs are held to: a model
#: compared must have learned what it is graded on)
LEARNED = 0.9
#: seeds per task and layer count
MIN_SEEDS = 3
#: a run's accuracy is the mean of its last this many snapshots
READ = 2
#: the lengths trained on
TRAINED = tuple(range(1, SWEEP_LONGEST + 1))
#: the task that needs depth and its control, in that order
HARD, CONTROL = tuple(SWEEP_TASKS)


def frontier(acc: dict) -> int:
    """``k*``: the longest trained length ``k`` with ``acc[j] >= LEARNED`` for every ``j`` from
    :data:`MIN_COMPOSED` to ``k``; ``MIN_COMPOSED - 1`` when ``acc[MIN_COMPOSED]`` falls short."""
    k = MIN_COMPOSED - 1
    while k + 1 in TRAINED and acc[k + 1] >= LEARNED:
        k += 1
    return k


@dataclass(frozen=True)
class Run:
    """One run of the sweep: its accuracy per length read at its last :data:`READ` snapshots (``acc[k]``), the
    steps read, whether its loss was flat over the last quarter, and its frontier at every snapshot (``curve``:
    ``(step, k*)``)."""

    task: str
    layers: int
    seed: int
    steps: tuple
    converged: bool
    acc: dict
    curve: tuple

    @property
    def frontier(self) -> int:
        """``k*`` of the accuracy read (:func:`frontier`)."""
        return frontier(self.acc)


def load(path: Path = SWEEP_TABLE) -> list[Run]:
    """The sweep's runs from its table (one row per run and snapshot); an empty list where there is no table."""
    if not Path(path).is_file():
        return []
    by_run: dict = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            by_run.setdefault((r["task"], int(r["layers"]), int(r["seed"])), []).append(r)
    runs = []
    for (task, layers, seed), rows in sorted(by_run.items()):
        rows.sort(key=lambda r: int(r["step"]))
        accs = [{k: float(r[f"acc_{k}"]) for k in SWEEP_EVAL} for r in rows]
        read = accs[-READ:]
        runs.append(Run(task, layers, seed, tuple(int(r["step"]) for r in rows[-READ:]),
                        rows[-1]["converged"] == "True", {k: float(np.mean([a[k] for a in read])) for k in SWEEP_EVAL},
                        tuple((int(r["step"]), frontier(a)) for r, a in zip(rows, accs))))
    return runs


def _cell(runs, task: str, layers: int) -> list[Run]:
    return [r for r in runs if r.task == task and r.layers == layers]


def cell_frontier(runs, task: str, layers: int) -> int | None:
    """The smallest frontier of the cell's seeds; None while it has fewer than :data:`MIN_SEEDS`."""
    cell = _cell(runs, task, layers)
    return min(r.frontier for r in cell) if len(cell) >= MIN_SEEDS else None


def premise_length(runs) -> int | None:
    """``K``: the smaller of C10's frontier at the fewest layers and the longest complete S5 frontier at more
    layers; None where either is missing."""
    control = cell_frontier(runs, CONTROL, SWEEP_LAYERS[0])
    deeper = [f for n in SWEEP_LAYERS[1:] if (f := cell_frontier(runs, HARD, n)) is not None]
    return min(control, max(deeper)) if control is not None and deeper else None


def _name(task: str) -> str:
    """``"S5"``, ``"C10"``: a task's group."""
    return TASKS[task].label.split(" (")[0]


#: the rule in words (the module's docstring)
CRITERION = (f"{CLAIMS['depth_premise'].statistic}. A run's accuracy is the mean of its last {READ} snapshots. "
             f"Shown when every S5 seed at {SWEEP_LAYERS[0]} layers falls short of the premise's lengths; not shown "
             "when every one learns them; mixed when the seeds disagree; not tested when the premise has no length "
             f"(C10 not learned at {SWEEP_LAYERS[0]} layers, or S5 at no larger count) or a cell it needs has fewer "
             f"than {MIN_SEEDS} seeds (while a larger S5 cell is incomplete, only shown is graded).")
#: the runs the premise is graded on, in the verdict's table
MODELS = (f"the sweep's runs (objective A; {', '.join(map(str, SWEEP_LAYERS))} layers; {MIN_SEEDS} seeds per task; "
          f"{SWEEP_STEPS:,} steps of {SWEEP_EXAMPLES} chains; trained, not shipped)")


def verdict(runs) -> Verdict:
    """The premise graded by the rule in this module's docstring."""
    c, few = CLAIMS["depth_premise"], SWEEP_LAYERS[0]
    said = dict(criterion=CRITERION, rows={"models": MODELS})
    planned = len(SWEEP_TASKS) * len(SWEEP_LAYERS) * MIN_SEEDS
    short = [f"{_name(t)} at {n} layers" for t in SWEEP_TASKS for n in SWEEP_LAYERS
             if len(_cell(runs, t, n)) < MIN_SEEDS]
    incomplete = (f" {len(runs)} of the sweep's {planned} runs are in its table; fewer than {MIN_SEEDS} seeds: "
                  f"{', '.join(short)}." if short else "")
    K = premise_length(runs)
    frontiers = "; ".join(f"{_name(t)} {n} layers {f}" for t in SWEEP_TASKS for n in SWEEP_LAYERS
                          if (f := cell_frontier(runs, t, n)) is not None)
    numbers = (f"Frontiers (every seed ≥ {LEARNED} from {MIN_COMPOSED} operations up to it): "
               f"{frontiers or 'no complete cell'}.")
    if cell_frontier(runs, HARD, few) is None or K is None:
        return verdict_of(c, "not tested", numbers + incomplete, **said)
    seeds = ", ".join(str(r.frontier) for r in _cell(runs, HARD, few))
    value = f"K = {K}; S5 at {few} layers {seeds}"
    if K < MIN_COMPOSED:
        why = (f" C10 is not learned on {MIN_COMPOSED} operations at {few} layers" if
               cell_frontier(runs, CONTROL, few) < MIN_COMPOSED else
               f" S5 is not learned on {MIN_COMPOSED} operations at any larger layer count")
        return verdict_of(c, "not tested", numbers + why + "; the premise has no length." + incomplete,
                          value=value, **said)
    at = _cell(runs, HARD, few)
    below_k = [r for r in at if r.frontier < K]
    outcome = "shown" if len(below_k) == len(at) else "not shown" if not below_k else "mixed"
    deeper_short = any(len(_cell(runs, HARD, n)) < MIN_SEEDS for n in SWEEP_LAYERS[1:])
    if outcome != "shown" and deeper_short:
        return verdict_of(c, "not tested", numbers + f" The premise's lengths so far: {MIN_COMPOSED}–{K}; S5 at "
                          f"{few} layers, frontier per seed: {seeds}; the missing S5 runs could lengthen "
                          "them." + incomplete, value=value, **said)
    moving = [r.seed for r in at if r.curve[-1][1] > max((f for _, f in r.curve[:-READ]), default=0)]
    detail = "; ".join(f"seed {r.seed}: k* {r.frontier}, {r.acc[K]:.2f} on {K} operations" for r in at)
    still = (f" S5 at {few} layers was still lengthening its frontier at the last snapshots (seed"
             f"{'s' if len(moving) > 1 else ''} {', '.join(map(str, moving))}): the outcome holds within the budget."
             if moving else "")
    return verdict_of(c, outcome, numbers + f" The premise's lengths: {MIN_COMPOSED}–{K}. S5 at {few} layers, per "
                      f"seed: {detail}.{still}{incomplete}", value=value, **said)


def facts(runs, v: Verdict) -> dict:
    """The numbers the chapter's premise section states: runs in the table, the premise's longest length, each
    complete cell's frontier, the outcome and its sentence."""
    K = premise_length(runs)
    return {"n_runs": len(runs), "n_planned": len(SWEEP_LAYERS) * len(SWEEP_TASKS) * MIN_SEEDS,
            "layers": ", ".join(map(str, SWEEP_LAYERS)), "learned": LEARNED, "longest": SWEEP_LONGEST,
            "steps": f"{SWEEP_STEPS:,}", "read": READ, "K": K if K is not None else "none",
            "lengths": f"{MIN_COMPOSED}–{K}" if K is not None and K >= MIN_COMPOSED else "none",
            "outcome": v.outcome, "numbers": v.numbers,
            **{f"{_name(t).lower()}_L{n}": f if (f := cell_frontier(runs, t, n)) is not None else "incomplete"
               for t in SWEEP_TASKS for n in SWEEP_LAYERS}}


def table(runs) -> str:
    """Every run as a Markdown table: its accuracy per length (mean of the last snapshots), its frontier, and its
    frontier at every snapshot."""
    head = ("| task | layers | seed | " + " | ".join(f"k={k}" for k in SWEEP_EVAL)
            + " | k* | k* by snapshot | loss flat |")
    out = [head, "|" + "---|" * (len(SWEEP_EVAL) + 6)]
    for r in runs:
        accs = " | ".join(f"{r.acc[k]:.2f}" for k in SWEEP_EVAL)
        out.append(f"| {_name(r.task)} | {r.layers} | {r.seed} | {accs} | **{r.frontier}** | "
                   f"{', '.join(str(f) for _, f in r.curve)} | {'yes' if r.converged else 'no'} |")
    return "\n".join(out)


def figure(runs) -> plt.Figure:
    """Per task, accuracy against the chain length, one line per layer count (seed mean, seeds as dots), the
    trained lengths shaded and the premise's longest marked; right, each run's frontier against the step."""
    colors = dict(zip(SWEEP_LAYERS, sns.color_palette("viridis", len(SWEEP_LAYERS))))
    K = premise_length(runs)
    fig, axes = subplots(1, len(SWEEP_TASKS) + 1, height=3.2, squeeze=False)
    for ax, t in zip(axes[0], SWEEP_TASKS):
        for j, n in enumerate(SWEEP_LAYERS):
            cell = _cell(runs, t, n)
            if not cell:
                continue
            acc = np.array([[r.acc[k] for k in SWEEP_EVAL] for r in cell])
            x = np.array(SWEEP_EVAL) + (j - 1) * 0.12
            ax.plot(x, acc.mean(0), color=colors[n], marker="o", ms=3, lw=1.2, label=f"{n} layers")
            ax.scatter(np.repeat(x, len(cell)), acc.T.ravel(), color=colors[n], s=5, alpha=0.6)
        ax.axvspan(TRAINED[0] - 0.5, TRAINED[-1] + 0.5, color="0.93", zorder=0, label="trained")
        if K is not None and K >= MIN_COMPOSED:
            ax.axvline(K + 0.5, color="C3", lw=1, label=f"premise: {MIN_COMPOSED}–{K}")
        ax.axhline(LEARNED, color="k", lw=0.8, ls="--", label=f"learned ({LEARNED})")
        ax.axhline(TASKS[t].chance, color="k", lw=0.8, ls=":", label="chance")
        ax.set_xticks([1, *range(4, SWEEP_EVAL[-1] + 1, 4)])
        ax.set(ylim=(0, 1.02), title=_name(t), xlabel="operations (k)")
    axes[0, 0].set_ylabel(f"greedy accuracy, last {READ} snapshots")
    ax = axes[0, -1]
    for t, ls in zip(SWEEP_TASKS, ("-", "--")):
        for r in [r for r in runs if r.task == t]:
            steps, front = zip(*r.curve)
            ax.plot(steps, np.array(front) + 0.08 * (r.seed - 2), color=colors[r.layers], ls=ls, lw=0.9, alpha=0.8,
                    drawstyle="steps-post")
    ax.set(ylim=(0, TRAINED[-1] + 0.5), yticks=range(0, TRAINED[-1] + 1, 2), title="training", xlabel="training step",
           ylabel="frontier k* (seeds offset)")
    styles = [plt.Line2D([], [], color="0.3", ls=ls, label=_name(t)) for t, ls in zip(SWEEP_TASKS, ("-", "--"))]
    below(fig, axes[0, :1], extra=styles, ncol=4)
    return fig
