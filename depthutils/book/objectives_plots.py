"""Chapter 10's figures: the measures by objective and task, the training dynamics around matched accuracy, and
the accuracy per step count (the shared look is :mod:`depthutils.book.plotstyle`'s). Each is drawn for the book's
text column (about 7 inches), so its labels read at the size the page shows them."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter
import numpy as np
import seaborn as sns

from depthutils.book.objectives_claim import CONDITIONS, GRADED, PAIRS, SHORT, SHORT_LABELS, Grading, floor
from depthutils.ladder.objectives import EVAL_STEPS, NULL, OBJECTIVES, TRAIN_STEPS
from depthutils.ladder.word_problems import TASKS

COLORS = {**dict(zip(OBJECTIVES, sns.color_palette("colorblind", len(OBJECTIVES)))), NULL: "0.6"}
#: the null control's run in a tick label
NULL_SHORT = "A′"


def measures(g: Grading, condition: str = "matched") -> plt.Figure:
    """Rows: tasks; columns: the graded measures, then the contribution ratio (not graded). Each panel: every
    objective's seed mean (bar) with its 95% interval over seeds and prompts, and each seed's value (dots); where
    the null control ran, A′ beside them (hatched)."""
    tasks, cols = g.result.tasks(), (*GRADED, "contributions")
    fig, axes = plt.subplots(len(tasks), len(cols), figsize=(7.2, 2.3 * len(tasks) + 0.5), squeeze=False)
    for r, t in enumerate(tasks):
        c = g.conditions[(t, condition)]
        for j, m in enumerate(cols):
            ax = axes[r, j]
            if c.why:
                ax.text(0.5, 0.5, "not tested", ha="center", va="center", transform=ax.transAxes, fontsize=8)
                ax.set_axis_off()
                continue
            first, second = (c.contributions[p] if m == "contributions" else c.comparisons[(p, m)] for p in PAIRS)
            per = {first.a: (first.mean_a, first.band_a, first.seed_a), first.b: (first.mean_b, first.band_b, first.seed_b),
                   second.b: (second.mean_b, second.band_b, second.seed_b)}
            shown = list(OBJECTIVES)
            if m in c.null:  # the null control's A′ beside the objectives
                x = c.null[m]
                per[NULL] = (x.mean_b, x.band_b, x.seed_b)
                shown.append(NULL)
            for i, o in enumerate(shown):
                mean, (lo, hi), seeds = per[o]
                if mean is None:
                    ax.text(i, 0, "undef.", ha="center", rotation=90, fontsize=7)
                    continue
                ax.bar(i, mean, color=COLORS[o], alpha=0.55, width=0.75, hatch="//" if o == NULL else None)
                if lo is not None:
                    ax.errorbar(i, mean, yerr=[[mean - lo], [hi - mean]], color="k", capsize=3, lw=1)
                vals = [v for v in seeds.values() if v is not None]
                ax.scatter(np.full(len(vals), i) + np.linspace(-0.2, 0.2, len(vals)), vals, color="k", s=7, zorder=3)
            ax.set_xticks(range(len(shown)), [NULL_SHORT if o == NULL else SHORT[o] for o in shown], fontsize=6.5,
                          rotation=90)
            ax.tick_params(axis="y", labelsize=7)
            if r == 0:
                ax.set_title("contribution\nratio (not graded)" if m == "contributions" else SHORT_LABELS[m], fontsize=8)
        axes[r, 0].set_ylabel(f"{TASKS[t].name.upper()}\nvalue", fontsize=8)
    fig.suptitle(f"At the answer position, {CONDITIONS[condition]}\nbars: seed means with 95% intervals over seeds "
                 "and prompts; dots: seeds\nA′ (hatched): the null control, objective A on other examples", fontsize=8.5)
    fig.tight_layout()
    return fig


def dynamics(g: Grading, measure: str = "depth") -> plt.Figure:
    """Rows: tasks. Left: accuracy on the matched step count against the training step (log scale), per
    objective (seed mean, band: the seeds' range), the matched level dashed; right: ``measure`` at every
    snapshot on the graded step counts; a ring marks each run's matched snapshot."""
    tasks = g.result.tasks()
    fig, axes = plt.subplots(len(tasks), 2, figsize=(7.2, 2.6 * len(tasks) + 0.4), squeeze=False)
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
        ticks = sorted(set.union(*(set(g.result.snapshots[n]) for n in g.result.runs(t))))[::-2][::-1]
        for ax in (a, b):
            ax.set_xticks(ticks, [str(x) for x in ticks])
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.tick_params(labelsize=7)
            ax.yaxis.label.set_size(8)
            if r == len(tasks) - 1:
                ax.set_xlabel("training step", fontsize=8)
        if r == 0:
            a.legend(fontsize=6.5, ncol=2)
    fig.suptitle("Training dynamics: seed means; bands: the seeds' range; rings: each run's matched snapshot",
                 fontsize=8.5)
    fig.tight_layout()
    return fig


def accuracy(g: Grading) -> plt.Figure:
    """Per task: greedy accuracy per step count of the last snapshot (100 held-out chains each; 2-operation S5
    chains: every held-out one), seed mean and the seeds as dots; the trained range shaded, chance and the floor."""
    tasks = g.result.tasks()
    fig, axes = plt.subplots(1, len(tasks), figsize=(7.2, 2.8), squeeze=False)
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
        ax.axhline(floor(t), color="k", lw=0.8, ls="--", label="floor")
        ax.set_xticks(EVAL_STEPS)
        ax.set(ylim=(0, 1.02), title=TASKS[t].label)
        ax.set_xlabel("operations in the chain (k)", fontsize=8)
        ax.title.set_size(8.5)
        ax.tick_params(labelsize=7)
    axes[0, 0].set_ylabel("greedy accuracy", fontsize=8)
    axes[0, 0].legend(fontsize=6.5, ncol=2)
    fig.tight_layout()
    return fig
