"""Chapter 10's figures: the objectives experiment's measures side by side, its training dynamics, and its
accuracy per step count (the shared look is :mod:`depthutils.book.plotstyle`'s)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from depthutils.analysis.objectives import MEASURE_LABELS, MEASURES, ObjectivesResult
from depthutils.ladder.objectives import EVAL_STEPS, OBJECTIVE_LABELS, OBJECTIVES, TRAIN_STEPS

COLORS = dict(zip(OBJECTIVES, sns.color_palette("colorblind", len(OBJECTIVES))))


def measures(result: ObjectivesResult) -> plt.Figure:
    """One panel per measure: each objective's seed mean (bar) with its 95% interval over seeds and prompts,
    and each seed's own value (dots)."""
    fig, axes = plt.subplots(1, len(MEASURES), figsize=(3.1 * len(MEASURES), 3.6))
    objs = result.objectives()
    for ax, m in zip(axes, MEASURES):
        per, seeds = result.per_objective(m), result.seed_values(m)
        for i, o in enumerate(objs):
            mean, lo, hi = per[o]
            if mean is None:
                ax.text(i, 0, "undefined", ha="center", rotation=90, fontsize=7)
                continue
            ax.bar(i, mean, color=COLORS[o], alpha=0.55, width=0.7)
            if lo is not None:
                ax.errorbar(i, mean, yerr=[[mean - lo], [hi - mean]], color="k", capsize=4, lw=1.2)
            vals = [v for v in seeds[o] if v is not None]
            ax.scatter(np.full(len(vals), i) + np.linspace(-0.15, 0.15, len(vals)), vals, color="k", s=12, zorder=3)
        ax.set_xticks(range(len(objs)), [OBJECTIVE_LABELS[o].split(" (")[0] for o in objs])
        ax.set(title=MEASURE_LABELS[m], xlabel="objective")
    axes[0].set_ylabel("value (larger: later layers do more)")
    fig.suptitle(f"Depth used by objective: seed means, 95% intervals over seeds and prompts, dots = seeds "
                 f"({len(result.seeds)} seeds)", y=1.02)
    fig.tight_layout()
    return fig


def dynamics(result: ObjectivesResult) -> plt.Figure:
    """The training snapshots: accuracy over the trained step counts, the contribution ratio and the lens
    effective-depth ratios against the training step (log scale), one line per objective with the seeds'
    range as a band."""
    rows = result.dynamics or []
    panels = [("accuracy_trained", "accuracy (trained step counts)"), ("contributions", MEASURE_LABELS["contributions"]),
              ("ed_kl", MEASURE_LABELS["ed_kl"]), ("ed_overlap", MEASURE_LABELS["ed_overlap"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.6))
    for ax, (key, label) in zip(axes, panels):
        for o in OBJECTIVES:
            mine = [r for r in rows if r["objective"] == o and r[key] is not None]
            steps = sorted({r["step"] for r in mine})
            if not steps:
                continue
            vals = [[r[key] for r in mine if r["step"] == s] for s in steps]
            ax.plot(steps, [np.mean(v) for v in vals], color=COLORS[o], marker="o", ms=3, label=OBJECTIVE_LABELS[o])
            ax.fill_between(steps, [min(v) for v in vals], [max(v) for v in vals], color=COLORS[o], alpha=0.2, lw=0)
        ax.set(xscale="log", xlabel="training step", title=label)
    axes[0].axhline(0.1, color="k", lw=0.8, ls=":", label="chance")
    axes[0].legend(fontsize=7)
    fig.suptitle("When in training does the second half go idle? (mean over seeds; band: the seeds' range)", y=1.02)
    fig.tight_layout()
    return fig


def accuracy(result: ObjectivesResult) -> plt.Figure:
    """Greedy accuracy per step count (100 held-out chains each), seed mean and range, trained range shaded;
    beside it P1's depth score per step count."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    acc = result.accuracy()
    for o in result.objectives():
        ks = list(EVAL_STEPS)
        a.plot(ks, [acc[o][k][0] for k in ks], color=COLORS[o], marker="o", label=OBJECTIVE_LABELS[o])
        a.fill_between(ks, [acc[o][k][1] for k in ks], [acc[o][k][2] for k in ks], color=COLORS[o], alpha=0.2, lw=0)
        runs = [r for r in (result.run(o, s) for s in result.seeds) if r is not None]
        scores = [[r.depth_scores().get(k) for r in runs] for k in ks]
        b.plot(ks, [np.mean([v for v in sc if v is not None]) if any(v is not None for v in sc) else np.nan
                    for sc in scores], color=COLORS[o], marker="o", label=OBJECTIVE_LABELS[o])
    for ax in (a, b):
        ax.axvspan(TRAIN_STEPS[0] - 0.5, TRAIN_STEPS[-1] + 0.5, color="0.9", zorder=0, label="trained range")
        ax.set(xlabel="operations in the chain (k)")
    a.axhline(0.1, color="k", lw=0.8, ls=":", label="chance")
    a.set(ylabel="greedy accuracy", title="accuracy per step count (band: seeds' range)", ylim=(0, 1.02))
    b.set(ylabel="depth score / (L − 1)", title="P1's depth score per step count (seed mean)", ylim=(0, 1))
    a.legend(fontsize=7)
    fig.tight_layout()
    return fig
