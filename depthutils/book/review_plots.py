"""Figures of the reviewers' questions (the shared look is :mod:`depthutils.book.plotstyle`'s)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from depthutils.analysis.solved_split import GROUPS, MIN_GROUP, SolvedSplit
from depthutils.book.plotstyle import title


def only_deeper(result: SolvedSplit) -> plt.Figure:
    """The deeper model's normalised depth score per problem (dots, coloured by task family) in each group of
    the split, with each group's mean and its 95% bootstrap interval over problems (hollow for a group of fewer
    than :data:`~depthutils.analysis.solved_split.MIN_GROUP` problems); the counts label the groups."""
    shallow, deep = result.models
    names = {"neither": "neither solves", "only_deeper": f"only {deep}", "only_shallower": f"only {shallow}",
             "both": "both solve"}
    tasks = result.tasks()
    palette = dict(zip(tasks, sns.color_palette("tab10", len(tasks))))
    groups, n = result.groups(), result.counts()
    rng = np.random.default_rng(0)  # the dots' horizontal jitter only
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for i, g in enumerate(GROUPS):
        for t in tasks:
            keep = (groups == g) & (result.prompt_tasks == t)
            y = result.prompt_scores[keep]
            ax.scatter(i + rng.uniform(-0.18, 0.18, y.size), y, s=12, alpha=0.45, color=palette[t],
                       label=t if i == 0 else None)
        mean, band = result.mean(g), result.mean_interval(g)
        if mean is not None:
            err = None if band is None else [[mean - band[0]], [band[1] - mean]]
            small = result.counts(scored=True)[g] < MIN_GROUP  # hollow: too few problems to compare
            ax.errorbar(i + 0.3, mean, yerr=err, fmt="D", color="k", capsize=4, ms=5, mfc="white" if small else "k",
                        label=f"group mean, 95% CI (hollow: < {MIN_GROUP} problems)" if g == "both" else None)
    ax.set_xticks(range(len(GROUPS)), [f"{names[g]}\nn = {n[g]}" for g in GROUPS])
    ax.set(xlabel="which model solves the problem (greedy)", ylabel=f"{deep}'s depth score / (L − 1)", ylim=(0, 1),
           xlim=(-0.5, len(GROUPS) - 0.5))
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    fig.suptitle(title(result, f"Do problems only {deep} solves use more of its depth? (dots: single problems; "
                               f"against {shallow})"), y=1.04)
    return fig
