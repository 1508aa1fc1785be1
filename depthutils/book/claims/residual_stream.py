"""Chapter 0's check of P1's notation, hₗ₊₁ = hₗ + aₗ + mₗ: its verdict, its figure and its run on the real models."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from depthutils.book.claim_table import CLAIMS
from depthutils.book.claims.run import Run
from depthutils.book.grading import Verdict, interval_text, judge, verdict_of
from depthutils.book.plotstyle import BAND_NOTE, integer_ticks, lines, long_form, subplots, title
from depthutils.core.numbers import significant
from depthutils.measures.residual_stream import ROUNDING, ResidualStreamResult
from depthutils.measures.residual_stream import residual_stream as measure

__all__ = ["RUN", "figure", "verdict"]


def verdict(result: ResidualStreamResult) -> Verdict:
    """Chapter 0: the residual stream's decomposition into what each sublayer adds."""
    c, f = CLAIMS["residual_stream"], result.facts()
    outcome, value, lo, hi = judge(c, result, c.fact)
    shown = interval_text(value, lo, hi, _two_digits)
    return verdict_of(c, outcome, f"largest relative error {shown}; with the raw module outputs instead: "
                                f"{_two_digits(f['max_raw_error'])}.",
                    criterion=c.criterion(fmt=".0e"), value=shown)


def _two_digits(x) -> str:
    """An error to two significant digits: ``1.0e-06`` below 0.001, ``6`` or ``0.47`` above (never ``6.0e+00``)."""
    return significant(x, 2)


def figure(result) -> plt.Figure:
    """Chapter 0: (a) the decomposition error per layer (added parts, raw module outputs; log scale),
    (b) the attention share on position 0 against even attention, (c) ‖h_l‖ at position 0 and elsewhere."""
    fig, axes = subplots(3, 1, height=8.4, sharex=True)
    tiny = 1e-12  # a log axis cannot show an exact 0
    df = long_form(result, {"error": "h_l + a_l + m_l (what is added)", "raw_error": "h_l + raw module outputs"})
    df["value"] = df["value"].clip(lower=tiny)
    sns.lineplot(df, x="x", y="value", hue="what", estimator="max", errorbar=None, marker="o", ax=axes[0])
    axes[0].axhline(ROUNDING, color="gray", ls="--", lw=1,
                    label=f"{ROUNDING:.0e}: float32 rounding; the text reports an error below it as this bound")
    axes[0].set(yscale="log", xlabel="layer l", ylabel="relative error",
                title=r"(a) $h_{l+1} = h_l + a_l + m_l$? largest relative error over prompts")  # mathtext
    if np.isfinite(result.sink).any():
        lines(axes[1], long_form(result, {"sink": "attention on position 0", "uniform": "even attention"}),
              weighted=False)
        axes[1].set(xlabel="layer l", ylabel="attention weight", title=f"(b) position 0's share ({BAND_NOTE})")
    else:
        axes[1].text(0.5, 0.5, "attention weights not measured\n(remote model)", ha="center", va="center")
        axes[1].set(title="(b) position 0's share")
    L1 = len(result.norm0)
    axes[2].plot(np.arange(L1), result.norm0, "o-", label="position 0 (BOS)")
    axes[2].plot(np.arange(L1), result.norm_rest, "o-", label="median of positions ≥ 1")
    axes[2].set(yscale="log", xlabel="l (h_0: embedding; h_L: the last layer's output)", ylabel="‖h_l‖",
                title="(c) residual norm, first prompt")
    integer_ticks(*axes)
    for ax in axes:
        ax.legend()
    fig.suptitle(title(result, "The residual stream"))
    return fig


#: the chapter's headline run on each real model (:func:`depthutils.book.realruns.section`)
RUN = Run.on_gsm8k(
    20, measure, verdict, figure,
    "The residual stream's norm per layer, and the largest error of hₗ₊₁ = hₗ + aₗ + mₗ, on this model.",
    # the identity holds to the dtype's rounding: bfloat16's (~4e-3 per addition) fails a test set
    # at float32's, and this run takes seconds in either
    dtype="float32", chapter="00")
