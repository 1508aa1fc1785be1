"""Chapter 10's premise, graded before any objective is compared: at the lengths the experiment trains, does S5
need more layers than Z10?

The depth-necessity sweep (:mod:`depthutils.ladder.sweep`) trains objective A on both tasks at each layer count of
:data:`~depthutils.ladder.registry.SWEEP_LAYERS`, three seeds each, and stores every snapshot's greedy accuracy per
chain length in ``data/experiments/depth_sweep/rows.csv``. Read from that table (ours):

* a run **learns** the task when its last snapshot reaches :data:`LEARNED` on every trained length of at least
  :data:`~depthutils.book.claims.objectives.MIN_COMPOSED` operations (:data:`GRADED_LENGTHS`);
* a task's **layers needed** is the fewest layers at which every seed learns it;
* the premise is **shown** when, at the layers Z10 needs, every S5 seed fails to learn S5 with its training loss
  flat over the last quarter (:func:`depthutils.ladder.sweep.converged`: more steps would not change it); **not
  shown** when every S5 seed learns S5 there (S5 needs no more layers than Z10); **mixed** otherwise (the seeds
  disagree, or a failing run was still learning); **not tested** while a cell of the sweep has fewer than
  :data:`MIN_SEEDS` seeds.
* where no layer count teaches Z10 to every seed, the mirror question: at the layers S5 needs, the premise is **not
  shown** when every Z10 seed fails with its loss flat (the control is the harder task), **mixed** when one was
  still learning or one learns it; **not tested** when neither task is learned at any layer count.
* while a task and layer count has fewer than :data:`MIN_SEEDS` seeds, the rule is applied to every table the
  sweep could end with (each missing run learned, failed for good, or failed while still learning,
  :func:`completions`): the premise is graded when they all give the same outcome, and **not tested** otherwise
  or while fewer than half the runs are in.
"""
from __future__ import annotations

import csv
import itertools
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
from depthutils.ladder.objectives import EVAL_STEPS, TRAIN_STEPS
from depthutils.ladder.registry import SWEEP_LAYERS, SWEEP_TABLE, SWEEP_TASKS
from depthutils.ladder.word_problems import TASKS

__all__ = ["LEARNED", "MIN_SEEDS", "GRADED_LENGTHS", "CRITERION", "MODELS", "Run", "load", "layers_needed", "completions", "verdict", "facts", "table",
           "figure"]

#: a run learns the task at or above this accuracy on every graded length (the standard the experiment's runs
#: are held to: a model compared must have learned what it is graded on)
LEARNED = 0.9
#: seeds per task and layer count before the premise is graded
MIN_SEEDS = 3
#: the trained lengths that need composing: one operation is a lookup
GRADED_LENGTHS = tuple(k for k in TRAIN_STEPS if k >= MIN_COMPOSED)


@dataclass(frozen=True)
class Run:
    """One run of the sweep: its last snapshot's accuracy per length (``acc[k]``), whether its loss was flat over
    the last quarter, and its worst graded-length accuracy at every snapshot (``curve``: ``(step, worst)``)."""

    task: str
    layers: int
    seed: int
    step: int
    converged: bool
    acc: dict
    curve: tuple

    @property
    def worst(self) -> float:
        """The lowest accuracy over :data:`GRADED_LENGTHS` at the last snapshot."""
        return min(self.acc[k] for k in GRADED_LENGTHS)

    @property
    def learned(self) -> bool:
        return self.worst >= LEARNED


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
        curve = tuple((int(r["step"]), min(float(r[f"acc_{k}"]) for k in GRADED_LENGTHS)) for r in rows)
        last = rows[-1]
        runs.append(Run(task, layers, seed, int(last["step"]), last["converged"] == "True",
                        {k: float(last[f"acc_{k}"]) for k in EVAL_STEPS}, curve))
    return runs


def _cell(runs, task: str, layers: int) -> list[Run]:
    return [r for r in runs if r.task == task and r.layers == layers]


def layers_needed(runs, task: str) -> int | None:
    """The fewest layers of the sweep at which every seed of ``task`` learns it (None: at none)."""
    return next((n for n in SWEEP_LAYERS if _cell(runs, task, n) and all(r.learned for r in _cell(runs, task, n))),
                None)


def _name(task: str) -> str:
    """``"S5"``, ``"Z10"``: a task's group."""
    return TASKS[task].label.split(" (")[0]


def _tasks() -> tuple[str, str]:
    """The sweep's task that needs depth and its control, in that order."""
    return tuple(SWEEP_TASKS)


#: the rule in words (the module's docstring)
CRITERION = (f"{CLAIMS['depth_premise'].statistic}. Shown when, at the layers Z10 needs, every S5 seed fails to learn "
             "S5 with its training loss flat over the last quarter; not shown when every S5 seed learns it there; mixed "
             f"otherwise (the seeds disagree, or a failing run was still learning). Where no layer count teaches Z10 to "
             f"every seed: not shown when, at the layers S5 needs, every Z10 seed fails with its loss flat (the control "
             f"is the harder task), mixed otherwise. Not tested where neither task is learned at any layer count. While "
             f"a task and layer count has fewer than {MIN_SEEDS} seeds, graded only when every outcome its missing "
             "runs could have gives the same.")
#: the runs the premise is graded on, in the verdict's table
MODELS = "the sweep's runs (objective A; 2, 4 and 8 layers; 3 seeds per task; trained, not shipped)"


#: what a run missing from the table could show: its worst graded length and whether its loss was flat (learned;
#: failed for good; failed while still learning)
POSSIBLE = ((1.0, True), (0.0, True), (0.0, False))


def completions(runs):
    """Every table the sweep could end with: ``runs`` and, for each task and layer count with fewer than
    :data:`MIN_SEEDS` seeds, its missing runs, each one of :data:`POSSIBLE` (the rule reads a cell's runs as a set,
    so each cell's missing runs are taken as a multiset)."""
    cells = [[[Run(t, n, -i, 0, done, {k: acc for k in EVAL_STEPS}, ()) for i, (acc, done) in enumerate(states, 1)]
              for states in itertools.combinations_with_replacement(POSSIBLE, MIN_SEEDS - len(_cell(runs, t, n)))]
             for t in _tasks() for n in SWEEP_LAYERS]
    for added in itertools.product(*cells):
        yield list(runs) + [r for cell in added for r in cell]


def verdict(runs) -> Verdict:
    """The premise graded by the rule in this module's docstring."""
    v = _rule(runs)
    planned = len(SWEEP_TASKS) * len(SWEEP_LAYERS) * MIN_SEEDS
    missing = planned - len(runs)
    if missing <= 0:
        return v
    short = sum(len(_cell(runs, t, n)) < MIN_SEEDS for t in _tasks() for n in SWEEP_LAYERS)
    said = (f"The sweep is not complete: {len(runs)} of its {planned} runs are in its table, and {short} of the "
            f"{len(SWEEP_TASKS) * len(SWEEP_LAYERS)} task and layer counts have fewer than {MIN_SEEDS} seeds")
    outcomes = {_rule(table).outcome for table in completions(runs)} if len(runs) >= planned // 2 else set()
    if len(outcomes) == 1 and outcomes != {"not tested"}:
        (outcome,) = outcomes
        return verdict_of(CLAIMS["depth_premise"], outcome,
                          f"{said}; whatever the {missing} missing runs show, the outcome is the same. {v.numbers}",
                          value=v.value, criterion=CRITERION, rows={"models": MODELS})
    why = "the missing runs could change the outcome" if len(runs) >= planned // 2 else "fewer than half are in"
    return verdict_of(CLAIMS["depth_premise"], "not tested", f"{said}; {why}.", criterion=CRITERION,
                      rows={"models": MODELS})


def _rule(runs) -> Verdict:
    """The rule of this module's docstring on the runs in the table, whatever their number."""
    c, (hard, control) = CLAIMS["depth_premise"], _tasks()
    said = dict(criterion=CRITERION, rows={"models": MODELS})
    need = {t: layers_needed(runs, t) for t in (hard, control)}
    words = {t: f"{need[t]} layers" if need[t] else "at no layer count of the sweep" for t in need}
    value = f"{_name(hard)} {words[hard]}, {_name(control)} {words[control]}"
    numbers = (f"Layers needed (every seed ≥ {LEARNED} on {GRADED_LENGTHS[0]}–{GRADED_LENGTHS[-1]} operations): "
               f"{value}.")
    if need[hard] is None and need[control] is None:
        return verdict_of(c, "not tested", numbers + " Neither task is learned at any layer count of the sweep.",
                          value=value, **said)
    # at the layers the other task needs, does the one that needs more (by the premise: S5) fail for good?
    first, other = (control, hard) if need[control] is not None else (hard, control)
    at = _cell(runs, other, need[first])
    failed = [r for r in at if not r.learned and r.converged]
    if first == control:
        outcome = "shown" if len(failed) == len(at) else "not shown" if all(r.learned for r in at) else "mixed"
    else:  # S5 learned where Z10 is not: the control is the harder task, unless a Z10 run was still learning
        outcome = "not shown" if len(failed) == len(at) else "mixed"
    detail = "; ".join(f"seed {r.seed} {r.worst:.2f}" + ("" if r.converged or r.learned else " (still learning)")
                       for r in at)
    return verdict_of(c, outcome, numbers + f" {_name(other)} at {need[first]} layers, worst graded length per "
                                            f"seed: {detail}.", value=value, **said)


def facts(runs, v: Verdict) -> dict:
    """The numbers the chapter's premise section states: runs and seeds in the table, each task's layers needed,
    the outcome and its sentence."""
    hard, control = _tasks()
    need = {t: layers_needed(runs, t) for t in (hard, control)}
    return {"n_runs": len(runs), "n_planned": len(SWEEP_LAYERS) * len(SWEEP_TASKS) * MIN_SEEDS,
            "layers": ", ".join(map(str, SWEEP_LAYERS)), "learned": LEARNED,
            "lengths": f"{GRADED_LENGTHS[0]}–{GRADED_LENGTHS[-1]}", "outcome": v.outcome, "numbers": v.numbers,
            **{f"{_name(t).lower()}_needed": need[t] or "none" for t in need}}


def table(runs) -> str:
    """Every run's last snapshot as a Markdown table: accuracy per length, its worst graded length, converged."""
    head = ("| task | layers | seed | step | " + " | ".join(f"k={k}" for k in EVAL_STEPS)
            + f" | worst of {GRADED_LENGTHS[0]}–{GRADED_LENGTHS[-1]} | loss flat |")
    out = [head, "|" + "---|" * (len(EVAL_STEPS) + 6)]
    for r in runs:
        accs = " | ".join(f"{r.acc[k]:.2f}" for k in EVAL_STEPS)
        out.append(f"| {_name(r.task)} | {r.layers} | {r.seed} | {r.step} | {accs} | "
                   f"{'**' if r.learned else ''}{r.worst:.2f}{'**' if r.learned else ''} | "
                   f"{'yes' if r.converged else 'no'} |")
    return "\n".join(out)


def figure(runs) -> plt.Figure:
    """Per task, accuracy of the last snapshot against the chain length, one line per layer count (seed mean,
    seeds as dots), the trained lengths shaded; right, the worst graded length's accuracy against the step."""
    colors = dict(zip(SWEEP_LAYERS, sns.color_palette("viridis", len(SWEEP_LAYERS))))
    tasks = _tasks()
    fig, axes = subplots(1, len(tasks) + 1, height=3.2, squeeze=False)
    for ax, t in zip(axes[0], tasks):
        for j, n in enumerate(SWEEP_LAYERS):
            cell = _cell(runs, t, n)
            if not cell:
                continue
            acc = np.array([[r.acc[k] for k in EVAL_STEPS] for r in cell])
            x = np.array(EVAL_STEPS) + (j - 1) * 0.12
            ax.plot(x, acc.mean(0), color=colors[n], marker="o", ms=3, lw=1.2, label=f"{n} layers")
            ax.scatter(np.repeat(x, len(cell)), acc.T.ravel(), color=colors[n], s=5, alpha=0.6)
        ax.axvspan(GRADED_LENGTHS[0] - 0.5, GRADED_LENGTHS[-1] + 0.5, color="0.92", zorder=0, label="graded")
        ax.axhline(LEARNED, color="k", lw=0.8, ls="--", label=f"learned ({LEARNED})")
        ax.axhline(TASKS[t].chance, color="k", lw=0.8, ls=":", label="chance")
        ax.set_xticks(EVAL_STEPS)
        ax.set(ylim=(0, 1.02), title=_name(t), xlabel="operations (k)")
    axes[0, 0].set_ylabel("greedy accuracy, last snapshot")
    ax = axes[0, -1]
    for t, ls in zip(tasks, ("-", "--")):
        for r in [r for r in runs if r.task == t]:
            steps, worst = zip(*r.curve)
            ax.plot(steps, worst, color=colors[r.layers], ls=ls, lw=0.9, alpha=0.8)
    ax.axhline(LEARNED, color="k", lw=0.8, ls="--")
    ax.set(ylim=(0, 1.02), title="training", xlabel="training step",
           ylabel=f"worst accuracy, k = {GRADED_LENGTHS[0]}–{GRADED_LENGTHS[-1]}")
    styles = [plt.Line2D([], [], color="0.3", ls=ls, label=_name(t)) for t, ls in zip(tasks, ("-", "--"))]
    below(fig, axes[0, :1], extra=styles, ncol=4)
    return fig
