"""Is "the second half contributes less" only the residual's norm growing? Chapter 1's claim graded on the
absolute contribution ‖Δₗ‖ (:mod:`depthutils.analysis.norm_growth`): the verdict, the figure, the real-model run."""
from __future__ import annotations

import matplotlib.pyplot as plt

from depthutils import data
from depthutils.analysis import norm_growth as measure
from depthutils.analysis.norm_growth import NormGrowthResult
from depthutils.book.claim_table import CLAIMS, MIN_HALF
from depthutils.book.grading import Verdict, _verdict, interval_text, judge, not_tested
from depthutils.book.plotstyle import BAND_NOTE, COLORS, lines, long_form, title

__all__ = ["verdict", "figure", "REAL_RUN"]


def verdict(result: NormGrowthResult) -> Verdict:
    """The second half's mean ‖Δₗ‖ over the first half's (layer 0 and position 0 apart), graded with chapter 1's
    thresholds."""
    c, f = CLAIMS["norm_growth"], result.facts()
    if f["half_size"] < MIN_HALF:
        return not_tested("norm_growth", f"{f['L']} layers: layers 1–{f['L'] - 1} cannot form two halves of at "
                                         f"least {MIN_HALF} layers each.")
    outcome, value, lo, hi = judge(c, result, c.fact)
    rel, grow = interval_text(f["rel_ratio"]), interval_text(f["growth"])
    return _verdict(c, outcome,
                    f"second half {f['abs_second']:.3f}, first half {f['abs_first']:.3f}, ratio "
                    f"{interval_text(value, lo, hi)}; the residual's norm grows {grow}× from the first half to the "
                    f"second, and the relative contribution's ratio (chapter 1's, position 0 apart) is {rel}.",
                    value=interval_text(value, lo, hi),
                    rows={"norm growth": f"‖hₗ‖ second half over first {grow}; ‖Δₗ‖ / ‖hₗ‖ ratio {rel}"})


def figure(result: NormGrowthResult) -> plt.Figure:
    """‖hₗ‖ (position 0 apart, and at position 0), ‖Δₗ‖, and ‖Δₗ‖ / ‖hₗ‖ per layer, with 95% bands over prompts;
    dotted: where the second half begins (layer 0 apart, as the verdict splits)."""
    f = result.facts()
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 3.8))
    lines(a, long_form(result, {"h_norm": "‖hₗ‖, positions 1…T−1", "h_first": "‖hₗ‖ at position 0"}),
          {"‖hₗ‖, positions 1…T−1": "k", "‖hₗ‖ at position 0": "#d62728"})
    a.set(xlabel="l (hₗ enters layer l; the last point is the last layer's output)", ylabel="‖hₗ‖ (log scale)",
          yscale="log", title="(a) the residual's norm")
    lines(b, long_form(result, {"delta_norm": "‖Δₗ‖"}), {"‖Δₗ‖": COLORS["layer"]})
    b.hlines([f["abs_first"], f["abs_second"]], [1, f["mid"]], [f["mid"] - 1, f["L"] - 1], colors="k", lw=1.5,
             label="mean of each half")
    b.set(xlabel="layer l", ylabel="‖Δₗ‖ = ‖hₗ₊₁ − hₗ‖ (log scale)", yscale="log",
          title="(b) what each layer writes, absolute")
    lines(c, long_form(result, {"ratio": "‖Δₗ‖ / ‖hₗ‖"}), {"‖Δₗ‖ / ‖hₗ‖": COLORS["attn"]})
    c.set(xlabel="layer l", ylabel="‖Δₗ‖ / ‖hₗ‖ (log scale)", yscale="log", title="(c) relative (chapter 1)")
    for ax in (a, b, c):
        ax.axvline(f["mid"] - 0.5, color="k", lw=0.8, ls=":")
        ax.legend(fontsize=7)
    fig.suptitle(title(result, "Is it only the norm growing?") + f" · {BAND_NOTE}", y=1.08)
    return fig


REAL_RUN = dict(
    key="01-norms", what="N = 20 GSM8K test problems, every token but the first",
    measure=lambda lm: measure.norm_growth(lm, data.load("gsm8k", 20)), claim=lambda r, f: verdict(r), figure=figure,
    caption="The residual's norm ‖hₗ‖ (position 0 apart, and at position 0), what each layer writes ‖Δₗ‖, and their "
            "ratio (chapter 1's statistic), with 95% bootstrap bands over prompts.")
