"""The figures of the reviewers' questions (:mod:`depthutils.book.reviews`), in the book's one look
(:mod:`depthutils.book.plotstyle`): lines with 95% bootstrap bands over prompts, labelled axes."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from depthutils.book.plotstyle import BAND_NOTE, COLORS, lines, long_form, title

__all__ = ["early_exit", "norm_growth"]


def early_exit(results: dict, what: str = "") -> plt.Figure:
    """One panel per set of prompts (``{name: EarlyExitResult}``): gold accuracy and top-1 agreement with the full
    model of the early exit at every ``h_l`` (x: relative depth ``l / L``; 1 is the model's output), and the model
    with its second half skipped (a marker at 0.5)."""
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 3.8), squeeze=False)
    for ax, (name, r) in zip(axes[0], results.items()):
        L = len(r.gold) - 1
        x = np.arange(L + 1) / L
        df = long_form(r, {"gold": "gold accuracy", "agree": "top-1 agreement with the full model"}, x=x)
        lines(ax, df, {"gold accuracy": "#2ca02c", "top-1 agreement with the full model": "#1f77b4"},
              weighted=False)
        f, lo_hi = r.facts(), r.intervals()
        half = f["half"] / L
        ax.errorbar([half], [f["skip_gold"]], yerr=[[f["skip_gold"] - lo_hi["skip_gold_lo"]],
                                                     [lo_hi["skip_gold_hi"] - f["skip_gold"]]],
                    fmt="*", color="k", markersize=10, capsize=3, label="second half skipped: gold accuracy (95% CI)")
        ax.axvline(0.5, color="k", lw=0.8, ls=":")
        ax.set(xlabel="early exit at hₗ, relative depth l / L (1: the model's output)", ylabel="share of answer tokens",
               ylim=(-0.03, 1.03), title=title(r, f"({'abcd'[list(results).index(name)]}) {name}"))
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Could the second half be cut? Early exit{what} · {BAND_NOTE}", y=1.08)
    return fig


def norm_growth(result) -> plt.Figure:
    """‖hₗ‖ (position 0 apart, and at position 0), ‖Δₗ‖, and ‖Δₗ‖ / ‖hₗ‖ per layer, with 95% bands over prompts;
    dotted: where the second half begins (layer 0 apart, as the verdict splits)."""
    f = result.facts()
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 3.8))
    lines(a, long_form(result, {"h_norm": "‖hₗ‖, positions 1…T−1", "h_first": "‖hₗ‖ at position 0"}),
          {"‖hₗ‖, positions 1…T−1": "k", "‖hₗ‖ at position 0": "#d62728"})
    a.set(xlabel="l (hₗ enters layer l; h_L is the output of the last layer)", ylabel="‖hₗ‖ (log scale)",
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
