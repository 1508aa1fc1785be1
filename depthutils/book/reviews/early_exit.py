"""Is the second half's refinement needed, or could it be cut? Early exit (:mod:`depthutils.analysis.early_exit`):
the verdict, the figure, the real-model run."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from depthutils.analysis.early_exit import EarlyExitResult, early_exit_on
from depthutils.analysis.known_facts import KINDS, FactPrompts
from depthutils.book.claim_table import CLAIMS
from depthutils.book.grading import Verdict, _verdict, combine, interval_text, judge
from depthutils.book.plotstyle import BAND_NOTE, lines, long_form, title
from depthutils.book.realruns import FACT_CHECK_DTYPE, facts_for

__all__ = ["verdict", "figure", "headline", "REAL_RUN", "MIN_CORRECT"]

#: the fewest answer tokens the full model must get right for the share it loses to mean something (ours: below
#: five one token moves the share by more than a fifth)
MIN_CORRECT = 5


def verdict(results: dict[str, EarlyExitResult], facts: FactPrompts | None = None) -> Verdict:
    """Per set of prompts (``{name: result}``), the share of the full model's correct answer tokens that the
    model without its second half gets wrong; a set where the full model gets fewer than :data:`MIN_CORRECT`
    answer tokens right is not tested, and so are the facts when ``facts`` (the check that chose them) found
    none the model answers."""
    c = CLAIMS["early_exit"]
    outcomes, parts, values, notes = [], [], [], []
    if facts is not None and not facts.prompts:
        outcomes.append("not tested")
        parts.append("facts it knows: not tested")
        notes.append("facts it knows: the model answers none of the sums and two-hop questions it was given. "
                     + " ".join(facts.sentence(k) for k in facts.kinds()))
    for name, r in results.items():
        f = r.facts()
        correct = int(round(float(r.correct_by_prompt.sum())))
        if correct < MIN_CORRECT:
            outcomes.append("not tested")
            parts.append(f"{name}: not tested")
            notes.append(f"{name}: the full model gets {correct} answer token(s) right, fewer than {MIN_CORRECT} "
                         "(ours: below that one token moves the share by more than a fifth), so the share it loses "
                         "says nothing.")
            continue
        outcome, value, lo, hi = judge(c, r, c.fact)
        outcomes.append(outcome)
        parts.append(f"{name}: {interval_text(value, lo, hi)} of {correct} correct answer tokens lost (full model "
                     f"{f['full_gold']:.2f}, second half skipped {f['skip_gold']:.2f} gold accuracy; {outcome})")
        values.append(f"{name} {interval_text(value, lo, hi)}")
    if not results:
        outcomes.append("not tested")
        parts.append("no set of prompts measured")
        notes.append("No set of prompts could be measured: none fits the model's context with its answer, or the "
                     "model answers none of the facts it was given.")
    return _verdict(c, combine(outcomes), "; ".join(parts) + ".", notes, value="; ".join(values))


def headline(results: dict[str, EarlyExitResult]) -> dict:
    """The first set's facts and their intervals, for a chapter's prose (every key None, glued as "never", when no
    set was measured)."""
    if results:
        r = next(iter(results.values()))
        return {**r.facts(), **r.intervals()}
    keys = ("L", "half", "full_gold", "skip_gold", "added", "skip_agree", "lost", "formed_layer", "formed_rel", "n",
            "answer_tokens")
    return dict.fromkeys(keys + tuple(f"{k}_{e}" for k in EarlyExitResult.INTERVAL_FACTS for e in ("lo", "hi")))


def figure(results: dict[str, EarlyExitResult]) -> plt.Figure:
    """One panel per set of prompts: gold accuracy and top-1 agreement with the full model of the early exit at
    every ``h_l`` (x: relative depth ``l / L``; 1 is the model's output), and the model with its second half
    skipped (a star at 0.5, with its 95% interval)."""
    fig, axes = plt.subplots(1, max(len(results), 1), figsize=(5.5 * max(len(results), 1), 3.8), squeeze=False)
    if not results:
        axes[0, 0].text(0.5, 0.5, "no set of prompts measured\n(see the verdict)", ha="center", va="center")
        axes[0, 0].set(xlabel="early exit at hₗ, relative depth l / L", ylabel="share of answer tokens")
    colors = {"gold accuracy": "#2ca02c", "top-1 agreement with the full model": "#1f77b4"}
    for i, (ax, (name, r)) in enumerate(zip(axes[0], results.items())):
        L = len(r.gold) - 1
        df = long_form(r, {"gold": "gold accuracy", "agree": "top-1 agreement with the full model"},
                       x=np.arange(L + 1) / L)
        lines(ax, df, colors, weighted=False)
        f, band = r.facts(), r.intervals()
        ax.errorbar([f["half"] / L], [f["skip_gold"]], yerr=[[f["skip_gold"] - band["skip_gold_lo"]],
                                                             [band["skip_gold_hi"] - f["skip_gold"]]],
                    fmt="*", color="k", markersize=10, capsize=3, label="second half skipped: gold accuracy (95% CI)")
        ax.axvline(0.5, color="k", lw=0.8, ls=":")
        ax.set(xlabel="early exit at hₗ, relative depth l / L (1: the model's output)",
               ylabel="share of answer tokens", ylim=(-0.03, 1.03), title=title(r, f"({'abcdefgh'[i]}) {name}"))
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Could the second half be cut? Early exit · {BAND_NOTE}", y=1.08)
    return fig


def _real(lm):
    """The answers of 20 GSM8K problems, and the sample of facts the model knows that chapters 4 and 5 measure
    (the same check, read from its store when chapter 4 ran first)."""
    return early_exit_on(lm, n=20, facts=facts_for(lm))


# in float32, as chapters 4 and 5: the facts are theirs
REAL_RUN = dict(
    key="03-exit", what="the answers of N = 20 GSM8K test problems, and the sums and two-hop facts the model answers "
                        "that chapters 4 and 5 measure (the same check)",
    measure=_real, claim=lambda rs, f: verdict(rs, facts=f), figure=figure, dtype=FACT_CHECK_DTYPE,
    caption="Gold accuracy and top-1 agreement with the full model when each residual hₗ is decoded directly (early "
            "exit), and the model with its second half skipped (star), with 95% bootstrap intervals over prompts.",
    together=True)
