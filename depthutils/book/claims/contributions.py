"""Chapter 1's claim (P1: layers in the second half contribute much less): its verdict, its figure and its run on the
real models."""
from __future__ import annotations

from matplotlib.lines import Line2D

from depthutils.book.claim_table import CLAIMS, MIN_HALF
from depthutils.book.claims.run import Run
from depthutils.book.grading import Verdict, interval_text, judge, not_tested, verdict_of
from depthutils.book.plotstyle import BAND_NOTE, COLORS, LABELS, integer_ticks, lines, long_form, subplots, title
from depthutils.measures.contributions import ContributionsResult
from depthutils.measures.contributions import contributions as measure

__all__ = ["RUN", "figure", "verdict"]


def verdict(result: ContributionsResult) -> Verdict:
    """Chapter 1: the second half's relative contribution against the first half's (layer 0 apart)."""
    c, f = CLAIMS["contributions"], result.facts()
    if f["half_size"] < MIN_HALF:
        return not_tested("contributions", f"{f['L']} layers: layers 1–{f['L'] - 1} cannot form two halves of at "
                                           f"least {MIN_HALF} layers each.")
    outcome, value, lo, hi = judge(c, result, c.fact)
    return verdict_of(c, outcome,
                    f"second half {f['second']:.3f}, first half {f['first']:.3f}, ratio {interval_text(value, lo, hi)}; "
                    f"without the last layer (ours: how much one layer moves the ratio), the second half is "
                    f"{f['second_wo_last']:.3f} and the ratio {interval_text(f['ratio_wo_last'])}.",
                    rows={"last layers": f"ratio {f['ratio']:.2f} with the last layer, {f['ratio_wo_last']:.2f} "
                                         "without (ours)"},
                    value=interval_text(value, lo, hi))


def figure(result):
    """P1 Fig. 2: relative contribution (a) and cosine with the residual (b) per layer, 95% bands."""
    fig, (a, b) = subplots(1, 2, height=4.6)
    palette = {LABELS[p]: COLORS[p] for p in COLORS}
    lines(a, long_form(result, {f"{p}_ratio": LABELS[p] for p in COLORS}), palette, legend=False)
    lines(b, long_form(result, {f"{p}_cos": LABELS[p] for p in COLORS}), palette, legend=False)
    f = result.facts()
    mid, L = f["mid"], f["L"]
    a.hlines([f["first"], f["second"]], [1, mid], [mid - 1, L - 1], colors="k", lw=1.5,
             label="whole layer, each half's mean")
    a.hlines(0.5 * f["first"], mid, L - 1, colors="k", lw=1, linestyles=":", label="2nd half shown at or below 0.5× the 1st")
    a.hlines(f["first"], mid, L - 1, colors="k", lw=1, linestyles="--", label="2nd half not shown above 1× the 1st")
    a.set(xlabel="layer l", ylabel="‖contribution‖ / ‖h_l‖ (log)", title="(a) relative contribution", yscale="log")
    b.axhline(0, color="k", lw=0.8)
    b.set(xlabel="layer l", ylabel="cos(contribution, h_l)", title="(b) cosine with the residual")
    integer_ticks(a, b)
    handles = [Line2D([], [], color=COLORS[p], marker="o", ms=4, label=LABELS[p]) for p in COLORS]
    fig.legend(handles=handles + a.get_legend_handles_labels()[0], loc="outside lower center", ncol=2)
    fig.suptitle(title(result, "How much does each layer write into the residual stream?", BAND_NOTE))
    return fig


#: the chapter's headline run on each real model (:func:`depthutils.book.realruns.section`)
RUN = Run.on_gsm8k(
    20, measure, verdict, figure,
    "Each layer's write into the residual stream (P1 Fig. 2) on this model: ‖part‖ / ‖residual‖ per layer "
    "and its cosine with the residual, with 95% bootstrap bands over prompts.", note=" (P1's N)", chapter="01")
