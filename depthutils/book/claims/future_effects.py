"""Chapter 2's claim (P1: skipping a second-half layer has a much smaller effect on future computations and output
predictions): its verdict, its figure and its run on the real models."""
from __future__ import annotations

import numpy as np
import seaborn as sns

from depthutils.book.claim_table import CLAIMS, LEVEL, MIN_HALF, OUTPUT_AGAINST, OUTPUT_SHOWN
from depthutils.book.claims.run import Run
from depthutils.book.grading import COMBINED, Verdict, combine, interval_text, judge, not_tested, verdict_of
from depthutils.book.plotstyle import BAND, CMAPS, COLORS, LABELS, heatmap, integer_ticks, long_form, subplots, title
from depthutils.core.numbers import numbered
from depthutils.measures.future_effects import FutureEffectsResult
from depthutils.measures.future_effects import future_effects as measure

__all__ = ["RUN", "figure", "verdict"]


def verdict(result: FutureEffectsResult) -> Verdict:
    """Chapter 2: skipping a second-half layer against a first-half one, on later layers and on the output,
    each graded against its own thresholds; shown only if both are, mixed if one is. An output ratio that is
    undefined (a half left empty by structural zeros, or a first half that never moves the output) is
    *not tested* for that part and not counted."""
    c, f = CLAIMS["future_effects"], result.facts()
    if f["half_size"] < MIN_HALF:  # the last layer has no later layers
        return not_tested("future_effects", f"{f['L']} layers: the {f['L'] - 1} layers with later layers cannot "
                                            f"form two halves of at least {MIN_HALF} layers each.")
    outcome, value, lo, hi = judge(c, result, "later_ratio")
    out, ovalue, olo, ohi = judge(c, result, "out_ratio", shown=OUTPUT_SHOWN.value, against=OUTPUT_AGAINST.value)
    params = result.meta.get("params", {})
    notes = []
    if f["structural"]:
        local = ", direct only" if params.get("local") else ""
        notes.append(f"Left out of the output halves: {numbered('layer', f['structural'])}, whose output effect is 0 "
                     f"by construction in this variant ({params.get('mode')} tokens{local}).")
    if ovalue is None:
        notes.append("The output half is not tested: " + (
            "after the structural zeros are left out, a half has no layer left." if f["out_first"] is None
            or f["out_second"] is None else "skipping a first-half layer never moves the output, so there is no "
                                            "ratio to take."))
    later_text, out_text = interval_text(value, lo, hi), interval_text(ovalue, olo, ohi)
    criterion = (f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval over prompts. Later layers: shown if "
                 f"the interval lies at or below {c.shown.value:.2f} ({c.shown.source}), not shown if wholly above "
                 f"{c.against.value:.2f} ({c.against.source}), mixed otherwise. Output: shown if it lies at or below "
                 f"{OUTPUT_SHOWN.value:.2f} ({OUTPUT_SHOWN.source}), not shown if wholly above "
                 f"{OUTPUT_AGAINST.value:.2f} ({OUTPUT_AGAINST.source}), mixed otherwise. The two parts combined: "
                 f"{COMBINED}; an output ratio that is undefined is not tested and not counted.")
    return verdict_of(c, combine([outcome, out]),
                    f"second half {f['later_second']:.3f}, first half {f['later_first']:.3f}, ratio {later_text} "
                    f"({params.get('part', 'layer')}, {params.get('mode', 'future')} tokens; {outcome}); on the "
                    f"output: ratio {out_text} ({out}).", notes, criterion=criterion,
                    value=f"later layers {later_text}; output {out_text}" + (" (not tested)" if ovalue is None else ""))


def figure(result):
    """P1 Fig. 3: effect of skipping layer s on later layer j (heatmap, max over prompts) and on the
    output: P1's max over prompts (bars) and the mean over prompts with its 95% interval (points)."""
    D, O = result.layer_effect, result.output_effect
    L = len(O)
    p = result.meta.get("params", {})
    fig, (a, b) = subplots(2, 1, height=7.0, gridspec_kw={"height_ratios": [1.6, 1]})
    heatmap(a, D, "max relative change of Δ_j", cmap=CMAPS["future_effect"], vmin=0, robust=True)
    a.axhline((L + 1) // 2, color="w", lw=1.2, ls="--")  # the verdict compares the rows above and below it
    a.set(xlabel="later layer j", ylabel="skipped layer s",
          title="(a) on later layers, max over prompts; dashed: the halves")
    b.bar(np.arange(L), O, color=COLORS.get(p.get("part", "layer"), "gray"), alpha=0.5, label="max over prompts (P1)")
    df = long_form(result, {"output_effect": "mean over prompts"})
    sns.pointplot(df, x="x", y="value", color="k", linestyle="none", markersize=4, native_scale=True, ax=b,
                  label="mean over prompts (95% CI)", **BAND)
    b.set(xlabel="skipped layer s", ylabel="max ‖p − p′‖₂", title="(b) effect on the output distribution")
    integer_ticks(b)
    if b.get_legend() is not None:  # seaborn's own, drawn over the bars
        b.get_legend().remove()
    fig.legend(*b.get_legend_handles_labels(), loc="outside lower center", ncol=2)
    variant = f"skip {LABELS.get(p.get('part'), p.get('part'))}, {p.get('mode', 'future')} tokens"
    if p.get("local"):
        variant += ", direct paths only"
    fig.suptitle(title(result, f"What breaks downstream when a layer is skipped?\n({variant})"))
    return fig


#: the chapter's headline run on each real model (:func:`depthutils.book.realruns.section`)
RUN = Run.on_gsm8k(
    10, measure, verdict, figure,
    "The effect of skipping each layer (rows) on each later layer (columns) and on the output (P1 Fig. 3), "
    "on this model.", note=", 4 positions each (P1's N); the headline variant: whole layers, effect on future tokens",
    options=dict(part="layer", mode="future"), chapter="02")
