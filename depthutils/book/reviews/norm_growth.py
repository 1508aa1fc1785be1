"""Is the second half's smaller relative contribution only the residual's norm growing, and where do massive
activations appear? (:mod:`depthutils.measures.norm_growth`): the verdict, the figure, the real-model run."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from depthutils import data
from depthutils.book.claim_table import CLAIMS, MIN_HALF
from depthutils.book.grading import Verdict, band, interval_text, judge, not_tested, verdict_of
from depthutils.book.legends import band_key, below
from depthutils.book.plotstyle import COLORS, integer_ticks, lines, long_form, subplots, title
from depthutils.core.depth import residual_depth
from depthutils.measures import norm_growth as measure
from depthutils.measures.norm_growth import MASSIVE, NormGrowthResult

__all__ = ["verdict", "figure", "depth_words", "REAL_RUN"]


def verdict(result: NormGrowthResult) -> Verdict:
    """Is the second half's smaller relative contribution only the norm growing? Not tested unless the relative
    contribution falls (its second-to-first ratio's interval wholly below 1); then the second half's mean ‖Δₗ‖ over
    the first half's (layer 0 and position 0 apart) is graded against 1. Where massive activations appear and where
    the lens starts to agree with the output are stated beside it."""
    c, f = CLAIMS["norm_growth"], result.facts()
    if f["half_size"] < MIN_HALF:
        return not_tested("norm_growth", f"{f['L']} layers: layers 1–{f['L'] - 1} cannot form two halves of at "
                                         f"least {MIN_HALF} layers each.")
    rlo, rhi = band(result, "rel_ratio")
    rel, grow = interval_text(f["rel_ratio"], rlo, rhi), interval_text(f["growth"])
    where = depth_words(f)
    rows = {"norm growth": f"‖hₗ‖ second half over first {grow}; ‖Δₗ‖ / ‖hₗ‖ ratio {rel}",
            "massive activations": where}
    if rhi is None or rhi >= 1:
        return verdict_of(c, "not tested",
                        f"the relative contribution does not fall: its second-to-first ratio is {rel}, not wholly "
                        f"below 1, so there is no drop for norm growth to explain (‖Δₗ‖ ratio "
                        f"{interval_text(f['abs_ratio'], *band(result, 'abs_ratio'))}; ‖hₗ‖ grows {grow}×). {where}", rows=rows)
    outcome, value, lo, hi = judge(c, result, c.fact)
    return verdict_of(c, outcome,
                    f"the relative contribution falls (second-to-first ratio {rel}); what a layer writes, ‖Δₗ‖: "
                    f"second half {f['abs_second']:.3f}, first half {f['abs_first']:.3f}, ratio "
                    f"{interval_text(value, lo, hi)}; the residual's norm grows {grow}× from the first half to the "
                    f"second. {where}", value=interval_text(value, lo, hi), rows=rows)


def depth_words(f: dict) -> str:
    """Where, in depth, massive activations appear, against where the lens starts to agree with the output."""
    L = f["L"]
    at = lambda l: f"h_{l} (relative depth {residual_depth(l, L):.2f})"
    massive = (f"No layer holds massive activations (the largest component is {f['peak_over_median']:g}× a token's "
               f"median, at h_{f['peak_layer']}, {f['peak_at']}; massive: ≥ {MASSIVE:.0f}×, ours after Sun et al.)"
               if f["massive_layer"] is None else
               f"Massive activations (a component ≥ {MASSIVE:.0f}× a token's median, ours after Sun et al.) appear "
               f"from {at(f['massive_layer'])}; the largest is {f['peak_over_median']:g}×, at h_{f['peak_layer']}, "
               f"{f['peak_at']}")
    agree = ("the lens's top-5 overlap with the output never exceeds 0.3 before the last layer"
             if f["agree_layer"] is None else
             f"the lens's top-5 overlap with the output first exceeds 0.3 (P2's threshold) at {at(f['agree_layer'])}")
    return f"{massive}; {agree}."


def figure(result: NormGrowthResult) -> plt.Figure:
    """(a) ‖h_l‖ at position 0 and at the others; (b) ‖Δ_l‖ with each half's mean; (c) ‖Δ_l‖ / ‖h_l‖; (d) the largest
    component over a token's median, at position 0 and at the others, with the massive threshold and where the lens
    starts to agree with the output. 95% bands over prompts; dotted: where the second half begins. One legend below
    the four panels."""
    f = result.facts()
    fig, ((a, b), (c, d)) = subplots(2, 2, height=7.2)
    positions = {"positions 1…T−1": "k", "position 0": "#d62728"}
    lines(a, long_form(result, {"h_norm": "positions 1…T−1", "h_first": "position 0"}), positions)
    a.set(xlabel="l (hₗ enters layer l; L: the output)", ylabel="‖hₗ‖ (log)", yscale="log",
          title="(a) the residual's norm")
    lines(b, long_form(result, {"delta_norm": "‖Δₗ‖"}), {"‖Δₗ‖": COLORS["layer"]})
    halves = b.hlines([f["abs_first"], f["abs_second"]], [1, f["mid"]], [f["mid"] - 1, f["L"] - 1], colors="k",
                      lw=1.5, label="mean of each half")
    b.set(xlabel="layer l", ylabel="‖Δₗ‖ = ‖hₗ₊₁ − hₗ‖ (log)", yscale="log", title="(b) what a layer writes")
    lines(c, long_form(result, {"ratio": "‖Δₗ‖ / ‖hₗ‖"}), {"‖Δₗ‖ / ‖hₗ‖": COLORS["attn"]})
    c.set(xlabel="layer l", ylabel="‖Δₗ‖ / ‖hₗ‖ (log)", yscale="log", title="(c) relative (chapter 1)")
    x = np.arange(len(result.median_abs))
    for key, label in (("peak_rest", "positions 1…T−1"), ("peak_first", "position 0")):
        d.plot(x, getattr(result, key) / result.median_abs, "-o", color=positions[label], ms=3)
    d.axhline(MASSIVE, color="grey", ls="--", lw=1, label=f"massive (≥ {MASSIVE:.0f}× the median)")
    if f["agree_layer"] is not None:
        d.axvline(f["agree_layer"], color="#8c564b", lw=1.2, label="lens top-5 overlap > 0.3 from here")
    d.set(xlabel="l (hₗ enters layer l; L: the output)", ylabel="largest |hₗ[d]| / median (log)", yscale="log",
          title="(d) massive activations")
    for ax in (a, b, c):
        ax.get_legend().remove()  # seaborn's, one per panel: the figure has one below
    for ax in (a, b, c, d):
        ax.axvline(f["mid"] - 0.5, color="k", lw=0.8, ls=":", label="the second half begins")
    integer_ticks(a, b, c, d)
    below(fig, (a, d), extra=[halves, band_key()])  # (b) and (c) have one line each: their y label names it
    fig.suptitle(title(result, "Is it only the norm growing?"))
    return fig


REAL_RUN = dict(
    key="01-norms", options={"sample": 20},
    what=lambda sample: f"N = {sample} GSM8K test problems{'' if sample == 20 else ' (a sample; the book runs 20)'}, "
                        "every token but the first",
    measure=lambda lm, sample=20: measure.norm_growth(lm, data.load("gsm8k", sample)), claim=lambda r, f: verdict(r),
    figure=figure,
    caption="The residual's norm ‖hₗ‖ (position 0 apart, and at position 0), what each layer writes ‖Δₗ‖, their "
            "ratio (chapter 1's statistic), with 95% bootstrap bands over prompts, and the largest component of hₗ over "
            "a token's median (massive activations), with where the lens starts to agree with the output.")
