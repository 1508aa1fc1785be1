"""Chapter 6's claim (P1: problems with more hops use no more depth): its verdict, its figure and its run on the real
models."""
from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from depthutils.book.claim_table import ACCURACY_FLOOR, CLAIMS, LEVEL
from depthutils.book.claims.run import Run
from depthutils.book.grading import Verdict, combine, grade, interval_text, verdict_of
from depthutils.book.plotstyle import BAND, integer_ticks, subplots, title
from depthutils.measures.depth_score import DepthScoreResult
from depthutils.measures.depth_score import depth_score as measure

__all__ = ["RUN", "figure", "score_frame", "verdict"]


def verdict(result: DepthScoreResult, floor: float = ACCURACY_FLOOR) -> Verdict:
    """Chapter 6: per family, does P1's level depth score (that of ``D`` maxed over the level's prompts) rise
    with the level? The slope of the level means of the prompts' scores (ours) is reported beside it, not
    graded. Families the model does not solve (accuracy below ``floor`` at a level compared) carry no
    evidence and are not counted."""
    c, f = CLAIMS["depth_score"], result.facts()
    L = result.n_layers
    grades, parts, notes, values = [], [], [], []
    for t in dict.fromkeys(r["task"] for r in result.rows):
        rows = [r for r in result.rows if r["task"] == t]
        acc = [r["accuracy"] for r in rows]
        key = c.fact.format(task=t)
        slope, lo, hi = f[key], f[f"{key}_lo"], f[f"{key}_hi"]
        text = f"{t}: {interval_text(slope, lo, hi, '+.3f')}"
        values.append(text)
        mean = f"{t}_mean_slope"
        ours = (f"beside it, ours and not graded, the slope of the level means of the prompts' scores "
                f"{interval_text(f[mean], f[f'{mean}_lo'], f[f'{mean}_hi'], '+.3f')}")
        if any(a is not None and a < floor for a in acc):
            notes.append(f"{t} is not informative: accuracy " + ", ".join(
                f"{100 * a:.0f}%" for a in acc if a is not None) + f" by level, below the floor of {100 * floor:.0f}% "
                "(ours: at a level the model rarely solves, the score measures failed attempts).")
            parts.append(text + f" (not counted; {ours})")
            values[-1] += " (not counted)"
            continue
        if len(rows) < 2:
            parts.append(text + f" (one level: not counted; {ours})")
            values[-1] += " (not counted)"
            continue
        delta = 1.0 / ((L - 1) * (len(rows) - 1))
        g = grade(slope, lo, hi, delta, c.against.value, shown_first=True)
        grades.append(g)
        parts.append(text + f" against one layer over the levels, {delta:.3f} ({g}; {ours})")
    outcome = combine(grades)
    if outcome == "not tested":
        notes.append("No task family is informative, so this run cannot test the claim.")
    return verdict_of(c, outcome, "; ".join(parts) + ".", notes, value="; ".join(values),
                    criterion=f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval (a resampled max never "
                              "exceeds the level's observed one, so the interval says how much the slope hangs on a "
                              "few prompts): a family counts for the "
                              f"claim if the interval lies at or below one layer over its levels ({c.shown.source}); "
                              "this is decided first, so a rise inside one layer supports the claim even when its "
                              "interval lies above 0, because P1's claim is that harder problems do not use more "
                              f"depth. Otherwise the family counts against the claim if the interval lies wholly "
                              f"above 0 ({c.against.source}), and is mixed otherwise (an interval that reaches both 0 "
                              "and past one layer). Families are combined, "
                              f"and a family below {100 * floor:.0f}% accuracy at any level is not counted.")


def score_frame(result) -> pd.DataFrame:
    """Per-prompt normalised depth scores and correctness of a depth-score result, long form."""
    return pd.DataFrame({"level": result.prompt_levels.astype(float), "task": result.prompt_tasks,
                         "score": result.prompt_scores / (result.n_layers - 1),
                         "correct": 100 * result.prompt_correct})


def figure(result):
    """Depth score against difficulty per task family: the mean over prompts with its 95% band (each
    prompt a dot) and P1's max-over-prompts score (dashed); accuracy with its band beside it."""
    fig, (a, b) = subplots(1, 2, height=4.8)
    df = score_frame(result)
    tasks = list(dict.fromkeys(r["task"] for r in result.rows))
    palette = dict(zip(tasks, sns.color_palette("tab10", len(tasks))))
    sns.lineplot(df, x="level", y="score", hue="task", palette=palette, marker="o", ax=a, legend=False, **BAND)
    sns.stripplot(df, x="level", y="score", hue="task", palette=palette, native_scale=True, size=3, alpha=0.35,
                  jitter=0.12, legend=False, ax=a)
    for task in tasks:
        rows = [r for r in result.rows if r["task"] == task]
        a.plot([r["level"] for r in rows], [np.nan if r["norm_score"] is None else r["norm_score"] for r in rows],
               ls="--", marker="x", color=palette[task], label=f"{task}: P1's max over prompts")
    if df["correct"].notna().any():
        sns.lineplot(df.dropna(subset=["correct"]), x="level", y="correct", hue="task", palette=palette, marker="o",
                     ax=b, legend=False, **BAND)
    a.set(xlabel="difficulty level", ylabel="depth score / (L − 1)", title="(a) centre of mass of\nthe future effects",
          ylim=(0, 1))
    b.set(xlabel="difficulty level", ylabel="greedy accuracy (%)", title="(b) does the model\nsolve them?",
          ylim=(-5, 105))
    integer_ticks(a, b)
    handles = [h for t in tasks for h in (Line2D([], [], color=palette[t], marker="o", ms=4, label=f"{t}: mean (95% CI)"),
                                          Line2D([], [], color=palette[t], marker="x", ls="--",
                                                 label=f"{t}: P1's max over prompts"))]
    fig.legend(handles=handles, loc="outside lower center", ncol=2)
    fig.suptitle(title(result, "Does a harder problem use more depth?") + "\nlevels: operands, hops or MATH level; "
                 "dots: single prompts")
    return fig


#: the chapter's headline run on each real model (:func:`depthutils.book.realruns.section`)
RUN = Run(lambda sample: f"N = {sample} problems per difficulty level"
          + (" (P1's N)" if sample == 20 else " (a sample; the book runs 20)")
          + ": few-shot sums of one digit + one digit (level 1) and two digits + one (level 2), the two levels of "
          "depth_tasks.tasks_for; a level this model solves less than a quarter of is not counted (the verdict gives "
          "its accuracy)", lambda lm, sample=20: measure(lm, "auto", n=sample, seed=123),
          lambda r, f: verdict(r), figure,
          "The depth score per difficulty level on this model, with its 95% bootstrap interval where the model "
          "solved enough problems.", chapter="06", options={"sample": 20})
