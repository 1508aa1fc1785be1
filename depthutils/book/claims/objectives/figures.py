"""Chapter 10's figures: the measures by objective and task, the training dynamics around matched accuracy, and
the accuracy per step count (the shared look is :mod:`depthutils.book.plotstyle`'s). Each is drawn at the book's
text column's width (:data:`~depthutils.book.plotstyle.COLUMN_IN`), its keys in a legend below the panels."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from depthutils.book.claims.objectives import CONDITIONS, LEARNED, PAIRS, SHORT, SHORT_LABELS, SHOWN, UNGRADED, Grading
from depthutils.book.legends import below
from depthutils.book.plotstyle import COLUMN_IN, subplots
from depthutils.ladder.objectives import EVAL_STEPS, NULL, OBJECTIVES, TRAIN_STEPS
from depthutils.ladder.word_problems import TASKS

COLORS = {**dict(zip(OBJECTIVES, sns.color_palette("colorblind", len(OBJECTIVES)))), NULL: "0.6"}
#: the null control's run in a tick label
NULL_SHORT = "A′"
#: the measures' panels of one task: two rows of three
ROWS, COLS = 2, 3


def _log_ticks(steps, apart: float = 2.5) -> list:
    """The training steps to label on a log axis: from the last down, each at least ``apart`` times below the
    one labelled before it, so that no two labels meet."""
    kept = []
    for s in sorted(steps, reverse=True):
        if not kept or s * apart <= kept[-1]:
            kept.append(s)
    return kept[::-1]


def measures(g: Grading, condition: str = "matched") -> plt.Figure:
    """Per task, two rows of three panels: the graded measures, then those not graded (:data:`SHOWN`). Each
    panel: every objective's seed mean (bar) with its 95% interval over seeds and prompts, and each seed's value
    (dots); where the null control ran, A′ beside them (hatched)."""
    tasks, cols = g.result.tasks(), SHOWN
    fig = plt.figure(figsize=(COLUMN_IN, 3.9 * len(tasks) + 1.1), layout="constrained")
    nulls = False
    for sub, t in zip(np.atleast_1d(fig.subfigures(len(tasks), 1)), tasks):
        c = g.conditions[(t, condition)]
        sub.suptitle(TASKS[t].label, fontweight="bold")
        for j, (ax, m) in enumerate(zip(sub.subplots(ROWS, COLS).ravel(), cols)):
            ax.set_title(SHORT_LABELS[m] + ("\n(not graded)" if m in UNGRADED else ""))
            if c.why:
                ax.text(0.5, 0.5, "not tested", ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            first, second = (c.comparisons[(p, m)] for p in PAIRS)
            per = {first.a: (first.mean_a, first.band_a, first.seed_a), first.b: (first.mean_b, first.band_b, first.seed_b),
                   second.b: (second.mean_b, second.band_b, second.seed_b)}
            shown = list(OBJECTIVES)
            if m in c.null:  # the null control's A′ beside the objectives
                x = c.null[m]
                per[NULL] = (x.mean_b, x.band_b, x.seed_b)
                shown.append(NULL)
                nulls = True
            for i, o in enumerate(shown):
                mean, (lo, hi), seeds = per[o]
                if mean is None:
                    ax.text(i, 0, "undef.", ha="center", rotation=90)
                    continue
                ax.bar(i, mean, color=COLORS[o], alpha=0.55, width=0.75, hatch="//" if o == NULL else None)
                if lo is not None:
                    ax.errorbar(i, mean, yerr=[[mean - lo], [hi - mean]], color="k", capsize=3, lw=1)
                vals = [v for v in seeds.values() if v is not None]
                ax.scatter(np.full(len(vals), i) + np.linspace(-0.2, 0.2, len(vals)), vals, color="k", s=7, zorder=3)
            ax.set_xticks(range(len(shown)), [NULL_SHORT if o == NULL else SHORT[o] for o in shown])
            if j % COLS == 0:
                ax.set_ylabel("value")
    key = [Patch(facecolor="0.6", alpha=0.55, label="seed mean, 95% CI over seeds and prompts"),
           Line2D([], [], color="k", marker="o", ms=3, ls="none", label="one seed")]
    if nulls:
        key.append(Patch(facecolor="0.6", alpha=0.55, hatch="//", label="A′: A on other examples (null)"))
    below(fig, extra=key)
    fig.suptitle(f"At the answer position, {CONDITIONS[condition]}")
    return fig


def dynamics(g: Grading, measure: str = "depth") -> plt.Figure:
    """Rows: tasks. Left: accuracy on the matched step count against the training step (log scale), per
    objective (seed mean, band: the seeds' range), the matched level dashed; right: ``measure`` at every
    snapshot on the graded step counts; a ring marks each run's matched snapshot."""
    tasks = g.result.tasks()
    fig, axes = subplots(len(tasks), 2, height=2.5 * len(tasks) + 1.3, squeeze=False)
    for r, t in enumerate(tasks):
        c = g.conditions[(t, "matched")]
        k = c.match_k or TRAIN_STEPS[-1]
        levels = c.levels or TRAIN_STEPS
        a, b = axes[r]
        for o in OBJECTIVES:
            runs = g.result.runs(t, o)
            steps = sorted(set.intersection(*(set(g.result.snapshots[n]) for n in runs)))
            acc = np.array([[g.result.accuracy(n, s)[k] for s in steps] for n in runs])
            val = np.array([[np.nan if (v := g.result.value(n, s, measure, levels)) is None else v for s in steps]
                            for n in runs])
            for ax, y in ((a, acc), (b, val)):
                ax.plot(steps, np.nanmean(y, 0), color=COLORS[o], marker="o", ms=2.5, lw=1.2, label=SHORT[o])
                ax.fill_between(steps, np.nanmin(y, 0), np.nanmax(y, 0), color=COLORS[o], alpha=0.15, lw=0)
            for n in runs:
                s = c.steps.get(n)
                if s is not None and not c.why:
                    v = g.result.value(n, s, measure, levels)
                    a.scatter([s], [g.result.accuracy(n, s)[k]], s=22, facecolors="none", edgecolors=COLORS[o], lw=1)
                    if v is not None:
                        b.scatter([s], [v], s=22, facecolors="none", edgecolors=COLORS[o], lw=1)
        if c.match_level is not None:
            a.axhline(c.match_level, color="k", lw=0.8, ls="--", label="matched level")
        a.axhline(TASKS[t].chance, color="k", lw=0.8, ls=":", label="chance")
        a.set(xscale="log", ylim=(0, 1.02), ylabel=f"{TASKS[t].name.upper()}: accuracy, k = {k}")
        b.set(xscale="log", ylabel=SHORT_LABELS[measure])
        ticks = _log_ticks(set.union(*(set(g.result.snapshots[n]) for n in g.result.runs(t))))
        for ax in (a, b):
            ax.set_xticks(ticks, [str(x) for x in ticks])
            ax.xaxis.set_minor_formatter(NullFormatter())
            if r == len(tasks) - 1:
                ax.set_xlabel("training step")
    ring = Line2D([], [], marker="o", mfc="none", mec="k", ls="none", label="a run's matched snapshot")
    below(fig, axes.ravel(), extra=[ring], ncol=3)
    fig.suptitle("Training dynamics: seed means; bands: the seeds' range")
    return fig


def accuracy(g: Grading) -> plt.Figure:
    """Per task: greedy accuracy per step count of the last snapshot (100 held-out chains each; 2-operation S5
    chains: every held-out one), seed mean and the seeds as dots; the trained range shaded, chance and the
    accuracy a graded run must reach."""
    tasks = g.result.tasks()
    fig, axes = subplots(1, len(tasks), height=3.4, squeeze=False, sharey=True)
    for ax, t in zip(axes[0], tasks):
        steps = g.result.final_steps(t)
        for j, o in enumerate(OBJECTIVES):
            runs = g.result.runs(t, o)
            acc = np.array([[g.result.accuracy(n, steps[n])[k] for k in EVAL_STEPS] for n in runs])
            x = np.array(EVAL_STEPS) + (j - 1) * 0.12
            ax.plot(x, acc.mean(0), color=COLORS[o], marker="o", ms=3, lw=1.2, label=SHORT[o])
            ax.scatter(np.repeat(x, len(runs)), acc.T.ravel(), color=COLORS[o], s=5, alpha=0.6)
        ax.axvspan(TRAIN_STEPS[0] - 0.5, TRAIN_STEPS[-1] + 0.5, color="0.92", zorder=0, label="trained")
        ax.axhline(TASKS[t].chance, color="k", lw=0.8, ls=":", label="chance")
        ax.axhline(LEARNED, color="k", lw=0.8, ls="--", label="learned")
        ax.set_xticks(EVAL_STEPS)
        ax.set(ylim=(0, 1.02), title=TASKS[t].label, xlabel="operations in the chain (k)")
    axes[0, 0].set_ylabel("greedy accuracy")
    below(fig, axes[0, :1], ncol=6)
    return fig
