"""Chapter 3's claim (P1: the logit lens converges in the second half): its verdict, its figure and its run on the real
models."""
from __future__ import annotations

from depthutils.book.claim_table import CLAIMS
from depthutils.book.claims.run import Run
from depthutils.book.grading import Verdict, combine, interval_text, judge, verdict_of
from depthutils.book.plotstyle import BAND_NOTE, integer_ticks, lines, long_form, subplots, title
from depthutils.core.depth import LENS_AXIS
from depthutils.measures.logit_lens import LogitLensResult
from depthutils.measures.logit_lens import logit_lens as measure

__all__ = ["RUN", "figure", "verdict"]


def verdict(result: LogitLensResult) -> Verdict:
    """Chapter 3: where the lens KL halves and where the top-5 overlap passes 0.3, against the middle."""
    c, f = CLAIMS["logit_lens"], result.facts()
    outcomes, parts, values = [], [], []
    for key, what in (("kl_rel", "KL halves"), ("overlap_rel", "overlap passes 0.3")):
        if f[key] is None:  # never crosses: as late as it gets, which favours the claim only at the very end
            outcomes.append("not tested")
            parts.append(f"{what} at no layer (not counted)")
            values.append(f"{what}: at no layer")
            continue
        outcome, value, lo, hi = judge(c, result, key)
        outcomes.append(outcome)
        parts.append(f"{what} at relative depth {interval_text(value, lo, hi)} ({outcome})")
        values.append(f"{what}: {interval_text(value, lo, hi)}")
    return verdict_of(c, combine(outcomes), "; ".join(parts) + ".", value="; ".join(values))


def figure(result):
    """P1 Fig. 4: KL(q_l ‖ q_L) and top-k overlap of the logit lens per layer, 95% bands."""
    fig, (a, b) = subplots(1, 2, height=4.4)
    lines(a, long_form(result, {"kl": "KL"}), {"KL": "#9467bd"}, legend=False)
    a.set(xlabel=LENS_AXIS, ylabel="KL(q_l ‖ q_L)  [nats]", title="(a) KL to the output")
    lines(b, long_form(result, {"overlap": "overlap"}), {"overlap": "#8c564b"}, legend=False)
    b.set(xlabel=LENS_AXIS, ylabel=f"top-{result.k} overlap", ylim=(-0.03, 1.03),
          title=f"(b) top-{result.k} overlap")
    L = len(result.kl)
    a.axhline(0.5 * result.kl.max(), color="k", lw=1, ls="--", label="threshold (P2): half the maximum KL; overlap 0.3")
    b.axhline(0.3, color="k", lw=1, ls="--")
    for ax in (a, b):  # the verdict: a crossing at or after the middle, (l + 1) / L ≥ 0.5, counts for P1
        ax.axvline(L / 2 - 1, color="gray", lw=1, ls=":",
                   label=f"middle: layer {L // 2 - 1}, (l + 1) / L = 0.5" if ax is a else None)
    integer_ticks(a, b)
    fig.legend(*a.get_legend_handles_labels(), loc="outside lower center", ncol=1)
    fig.suptitle(title(result, "When does the residual stream already hold the output?", BAND_NOTE))
    return fig


#: the chapter's headline run on each real model (:func:`depthutils.book.realruns.section`)
RUN = Run.on_gsm8k(
    20, measure, verdict, figure,
    "The logit lens on each layer's input hₗ (P1 Fig. 4) on this model: KL to the output and top-5 "
    "overlap, with 95% bootstrap bands over prompts.", note=" (P1's N)", chapter="03")
