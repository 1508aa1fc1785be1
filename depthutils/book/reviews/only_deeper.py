"""Do problems only a deeper model solves use more of its depth? The split of chapter 6's problems by which of two
ladder models solves them (:mod:`depthutils.analysis.solved_split`): the verdict and the figure. It needs two models
that differ only in depth, so it runs on the controlled ladder alone (no real-model run)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from depthutils.analysis.solved_split import GROUPS, MIN_GROUP, SolvedSplit
from depthutils.book.claim_table import CLAIMS, LEVEL
from depthutils.book.grading import COMBINED, Verdict, _verdict, combine, grade, interval_text
from depthutils.book.legends import below
from depthutils.book.plotstyle import subplots, title

__all__ = ["verdict", "figure"]


def verdict(result: SolvedSplit) -> Verdict:
    """Do problems only the deeper model solves use more of its depth than those both models solve?

    Per task family, the deeper model's mean normalised depth score over "only the deeper solves" minus that over
    "both solve", with its bootstrap interval over the family's problems: *shown* (for P1: no more depth) if the
    interval lies at or below one layer of the deeper model, ``1 / (L − 1)`` (decided first, as chapter 6 does);
    *not shown* if it lies wholly above 0; *mixed* otherwise. A family where either group holds fewer than
    :data:`~depthutils.analysis.solved_split.MIN_GROUP` scored problems is *not tested*, with its counts.
    """
    c, f = CLAIMS["only_deeper"], result.facts()
    shallow, deep = result.models
    step = 1.0 / (result.n_layers - 1)
    grades, parts, values, counts = [], [], [], []
    for t in result.tasks():
        n = {g: f[f"{t}_n_{g}"] for g in ("neither", "only_deeper", "only_shallower", "both")}
        counts.append(f"{t}: neither {n['neither']}, only {deep} {n['only_deeper']}, only {shallow} "
                      f"{n['only_shallower']}, both {n['both']}")
        d, lo, hi = f[f"{t}_diff"], f[f"{t}_diff_lo"], f[f"{t}_diff_hi"]
        text = f"{t}: {interval_text(d, lo, hi, '+.3f')}"
        if not f[f"{t}_tested"]:
            grades.append("not tested")
            parts.append(f"{text} (only {deep} {f[f'{t}_scored_only_deeper']} and both {f[f'{t}_scored_both']} "
                         f"scored problems; a group below {MIN_GROUP}: not tested)")
            values.append(f"{t}: not tested ({f[f'{t}_scored_only_deeper']} only-{deep} and "
                          f"{f[f'{t}_scored_both']} both problems)")
            continue
        g = grade(d, lo, hi, step, c.against.value, shown_first=True)
        grades.append(g)
        parts.append(f"{text} against one layer of {deep}, {step:.3f} ({g})")
        values.append(text)
    outcome = combine(grades)
    notes = [] if outcome != "not tested" else [
        f"No task family has {MIN_GROUP} or more problems in both compared groups (the counts above), so this run "
        "cannot answer the question."]
    pooled = interval_text(f["diff"], f["diff_lo"], f["diff_hi"], "+.3f")
    numbers = (f"groups per family ({'; '.join(counts)}); only-{deep} minus both: " + "; ".join(parts) + f"; pooled "
               f"over families (not graded: families differ in their scores) {pooled}.")
    criterion = (f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval over the family's problems: a family "
                 f"counts for P1 if the interval lies at or below one layer of the deeper model, {step:.3f} "
                 f"({c.shown.source}); this is decided first. Otherwise it counts against P1 if the interval lies "
                 f"wholly above 0 ({c.against.source}), and is mixed otherwise. Families are combined: {COMBINED}; a family whose "
                 f"only-deeper or both group holds fewer than {MIN_GROUP} problems is not tested (ours: a mean over "
                 "fewer rests on one or two problems).")
    problems = "; ".join(f"{t}: {f[f'{t}_n_by_level']}" for t in result.tasks())
    return _verdict(c, outcome, numbers, notes, criterion=criterion, value="; ".join(values),
                    rows={"models": f"{shallow} ({f['shallow_L']} layers) and {deep} ({f['L']} layers)",
                          "problems per level": problems,
                          "groups": "; ".join(counts)})


def figure(result: SolvedSplit) -> plt.Figure:
    """The deeper model's normalised depth score per problem (dots, coloured by task family) in each group of
    the split, with each group's mean and its 95% bootstrap interval over problems (hollow for a group of fewer
    than :data:`~depthutils.analysis.solved_split.MIN_GROUP` problems); the counts label the groups, the key is below
    the axes."""
    shallow, deep = result.models
    names = {"neither": "neither solves", "only_deeper": f"only {deep}", "only_shallower": f"only {shallow}",
             "both": "both solve"}
    tasks = result.tasks()
    palette = dict(zip(tasks, sns.color_palette("tab10", len(tasks))))
    groups, n = result.groups(), result.counts()
    rng = np.random.default_rng(0)  # the dots' horizontal jitter only
    fig, ax = subplots(height=4.6)
    for i, g in enumerate(GROUPS):
        for t in tasks:
            keep = (groups == g) & (result.prompt_tasks == t)
            y = result.prompt_scores[keep]
            ax.scatter(i + rng.uniform(-0.18, 0.18, y.size), y, s=12, alpha=0.45, color=palette[t],
                       label=f"one {t} problem" if i == 0 else None)
        mean, band = result.mean(g), result.mean_interval(g)
        if mean is not None:
            err = None if band is None else [[mean - band[0]], [band[1] - mean]]
            small = result.counts(scored=True)[g] < MIN_GROUP  # hollow: too few problems to compare
            ax.errorbar(i + 0.3, mean, yerr=err, fmt="D", color="k", capsize=4, ms=5, mfc="white" if small else "k",
                        label=f"group mean, 95% CI (hollow: < {MIN_GROUP} problems)" if g == "both" else None)
    ax.set_xticks(range(len(GROUPS)), [f"{names[g]}\nn = {n[g]}" for g in GROUPS])
    ax.set(xlabel="which model solves the problem (greedy)", ylabel=f"{deep}'s depth score / (L − 1)", ylim=(0, 1),
           xlim=(-0.5, len(GROUPS) - 0.5))
    below(fig, [ax])
    fig.suptitle(title(result, f"Do problems only {deep} solves use more of its depth?"))
    return fig
