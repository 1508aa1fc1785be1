"""Do problems only a deeper model solves use more of its depth? The split of chapter 6's problems by which of two
ladder models solves them (:mod:`depthutils.analysis.solved_split`): the verdict and the figure. It needs two models
that differ only in depth, so it runs on the controlled ladder alone (no real-model run)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from depthutils.analysis.solved_split import GROUPS, MIN_GROUP, SolvedSplit, flips_needed, problems_needed
from depthutils.book.claim_table import CLAIMS, FLIP_NULL, LEVEL, NOISE_GATE, POWER
from depthutils.book.grading import COMBINED, Verdict, combine, grade, interval_text, verdict_of
from depthutils.book.legends import below
from depthutils.book.plotstyle import subplots, title

__all__ = ["verdict", "figure", "noise_facts"]


def noise_facts(result: SolvedSplit) -> dict:
    """Per task family (``{task}_…``), the only-deeper group against its noise: ``beyond_noise``, whether the exact
    interval of the deeper model's share of the flips (``share``, ``share_lo``, ``share_hi`` of ``facts()``) lies
    wholly above :data:`~depthutils.book.claim_table.FLIP_NULL`; ``flips_needed``, the flips a share of the observed
    size needs to clear it at :data:`~depthutils.book.claim_table.POWER` (None: no excess to tell); ``problems_needed``,
    the problems that give so many flips at the family's observed flip rate, beside ``problems``, the family's problems
    on this run; and ``power_pct``, that power in percent."""
    f, out = result.facts(), {"power_pct": round(100 * POWER)}
    for t in result.tasks():
        lo = f[f"{t}_share_lo"]
        need = flips_needed(f[f"{t}_share"], LEVEL, POWER)
        out[f"{t}_beyond_noise"] = lo is not None and lo > FLIP_NULL.value
        out[f"{t}_flips_needed"] = need
        out[f"{t}_problems"] = sum(f[f"{t}_n_{g}"] for g in GROUPS)
        out[f"{t}_problems_needed"] = problems_needed(need, f[f"{t}_flips"], out[f"{t}_problems"])
    return out


def _noise_text(t: str, f: dict, noise: dict, deep: str) -> str:
    """A family's share of the flips, with its interval and the flips and problems it needs, in words."""
    share = interval_text(f[f"{t}_share"], f[f"{t}_share_lo"], f[f"{t}_share_hi"], ".2f")
    n, need, problems = noise[f"{t}_problems"], noise[f"{t}_flips_needed"], noise[f"{t}_problems_needed"]
    power = (f"a share of this size needs {need} flips to clear {FLIP_NULL.value} at {noise['power_pct']}% power, "
             f"about {problems} problems at this run's rate of {f[f'{t}_flips']} flips in {n}" if need is not None
             else "no excess over the only-shallower group to tell from noise")
    return f"{deep}'s share of the {f[f'{t}_flips']} flips {share} ({power})"


def verdict(result: SolvedSplit) -> Verdict:
    """Do problems only the deeper model solves use more of its depth than those both models solve?

    Per task family, the deeper model's mean normalised depth score over "only the deeper solves" minus that over
    "both solve", with its bootstrap interval over the family's problems: *shown* (for P1: no more depth) if the
    interval lies at or below one layer of the deeper model, ``1 / (L − 1)`` (decided first, as chapter 6 does);
    *not shown* if it lies wholly above 0; *mixed* otherwise. A family where either group holds fewer than
    :data:`~depthutils.analysis.solved_split.MIN_GROUP` scored problems is *not tested*, with its counts; so, next, is
    a family whose only-deeper group is not larger than its only-shallower group beyond noise (the noise gate,
    :data:`~depthutils.book.claim_table.NOISE_GATE`), with the problems a share of its size would need.
    """
    c, f, noise = CLAIMS["only_deeper"], result.facts(), noise_facts(result)
    shallow, deep = result.models
    step = 1.0 / (result.n_layers - 1)
    grades, parts, values, counts = [], [], [], []
    for t in result.tasks():
        n = {g: f[f"{t}_n_{g}"] for g in ("neither", "only_deeper", "only_shallower", "both")}
        counts.append(f"{t}: neither {n['neither']}, only {deep} {n['only_deeper']}, only {shallow} "
                      f"{n['only_shallower']}, both {n['both']}")
        d, lo, hi = f[f"{t}_diff"], f[f"{t}_diff_lo"], f[f"{t}_diff_hi"]
        text = f"{t}: {interval_text(d, lo, hi, '+.3f')}"
        flips = _noise_text(t, f, noise, deep)
        if not f[f"{t}_tested"]:
            grades.append("not tested")
            parts.append(f"{text} (only {deep} {f[f'{t}_scored_only_deeper']} and both {f[f'{t}_scored_both']} "
                         f"scored problems; a group below {MIN_GROUP}: not tested; {flips})")
            values.append(f"{t}: not tested ({f[f'{t}_scored_only_deeper']} only-{deep} and "
                          f"{f[f'{t}_scored_both']} both problems)")
            continue
        if not noise[f"{t}_beyond_noise"]:
            grades.append("not tested")
            parts.append(f"{text} (not graded: {flips}, not wholly above {FLIP_NULL.value}, so the only-{deep} group "
                         "is not beyond noise: not tested)")
            values.append(f"{t}: not tested (only-{deep} {n['only_deeper']} against only-{shallow} "
                          f"{n['only_shallower']}: not beyond noise; difference {interval_text(d, lo, hi, '+.3f')}, "
                          "not graded)")
            continue
        g = grade(d, lo, hi, step, c.against.value, shown_first=True)
        grades.append(g)
        parts.append(f"{text} against one layer of {deep}, {step:.3f} ({g}; {flips}, wholly above {FLIP_NULL.value})")
        values.append(text)
    outcome = combine(grades)
    notes = [] if outcome != "not tested" else [
        f"No task family has an only-{deep} group beyond noise with {MIN_GROUP} or more problems in both compared "
        "groups (the counts above), so this run cannot answer the question."]
    pooled = interval_text(f["diff"], f["diff_lo"], f["diff_hi"], "+.3f")
    numbers = (f"groups per family ({'; '.join(counts)}); only-{deep} minus both: " + "; ".join(parts) + f"; pooled "
               f"over families (not graded: families differ in their scores) {pooled}.")
    criterion = (f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval over the family's problems: a family "
                 f"counts for P1 if the interval lies at or below one layer of the deeper model, {step:.3f} "
                 f"({c.shown.source}); this is decided first. Otherwise it counts against P1 if the interval lies "
                 f"wholly above 0 ({c.against.source}), and is mixed otherwise. Families are combined: {COMBINED}; a family whose "
                 f"only-deeper or both group holds fewer than {MIN_GROUP} problems is not tested (ours: a mean over "
                 f"fewer rests on one or two problems). Then, before the difference is graded, the noise gate: {NOISE_GATE}.")
    problems = "; ".join(f"{t}: {f[f'{t}_n_by_level']}" for t in result.tasks())
    return verdict_of(c, outcome, numbers, notes, criterion=criterion, value="; ".join(values),
                    rows={"models": f"{shallow} ({f['shallow_L']} layers) and {deep} ({f['L']} layers)",
                          "problems per level": problems,
                          "groups": "; ".join(counts),
                          f"only-deeper share of the flips (noise: {FLIP_NULL.value})": "; ".join(
                              f"{t}: {interval_text(f[f'{t}_share'], f[f'{t}_share_lo'], f[f'{t}_share_hi'], '.2f')} "
                              f"of {f[f'{t}_flips']}" for t in result.tasks())})


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
