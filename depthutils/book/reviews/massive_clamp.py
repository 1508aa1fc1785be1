"""Does the second half's sharpening need position 0's massive activations? (:mod:`depthutils.measures.massive_clamp`):
the verdict, the figure, the real-model run."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from depthutils import data
from depthutils.book.claim_table import CLAIMS, MIN_HALF
from depthutils.book.claim_types import LEVEL
from depthutils.book.grading import Verdict, grade, interval_text, not_tested, verdict_of
from depthutils.book.legends import band_key, below
from depthutils.book.plotstyle import integer_ticks, lines, long_form, subplots, title, yerr
from depthutils.core.numbers import as_shown
from depthutils.measures import massive_clamp as measure
from depthutils.measures.massive_clamp import ROWS, MassiveClampResult
from depthutils.measures.norm_growth import MASSIVE

__all__ = ["verdict", "figure", "reading", "LABELS", "REAL_RUN", "SAMPLE", "THRESHOLD"]

#: the rows as the figure and the prose name them, and their colours
LABELS = {"clean": "clean", "clamp": "massive components clamped", "control": "control: as many others clamped"}
COLORS = {"clean": "k", "clamp": "#d62728", "control": "#1f77b4"}
#: the graded ratio and its control's (:meth:`~depthutils.measures.massive_clamp.MassiveClampResult.facts`)
GRADED = ("survive", "control_survive")
#: the graded ratio's threshold (the claim's, :data:`depthutils.book.claim_table.CLAIMS`), glued for the prose
THRESHOLD = CLAIMS["massive_clamp"].shown.value
#: the prompts of the real-model run (the chapter's ``real_sample``): the chapter's N
SAMPLE = 20


def verdict(result: MassiveClampResult) -> Verdict:
    """Does the second half's sharpening need position 0's massive activations? Not tested where position 0 has
    none (nothing to clamp), where the layers cannot form two halves or on one prompt (no interval); then the lens
    KL on ``h_mid`` of the clamped model over the clean model's is graded against 0.5, and the control (as many other
    components of position 0 clamped) must leave its own ratio wholly above 0.5, or the outcome is at most mixed."""
    c, f = CLAIMS["massive_clamp"], result.facts()
    if f["half_size"] < MIN_HALF:
        return not_tested("massive_clamp", f"{f['L']} layers: layers 1–{f['L'] - 1} cannot form two halves of at "
                                           f"least {MIN_HALF} layers each.")
    if f["onset"] is None:
        return not_tested("massive_clamp", f"no component of position 0 reaches {MASSIVE:.0f}× the token median at "
                                           f"any layer's input (the largest: {f['peak_clean_max']:g}×), so there is "
                                           "nothing to clamp.")
    if result.n_prompts < 2:
        return not_tested("massive_clamp", "one prompt: no interval over prompts (the book's run grades "
                                           f"{SAMPLE}). " + result.findings())
    bands = result.fact_intervals(GRADED + ("rel_clean", "rel_clamp", "output_kl"), level=LEVEL)
    text = {k: interval_text(f[k], *bands[k]) for k in bands}
    outcome, control = (grade(f[k], *bands[k], c.shown.value, c.against.value, c.below) for k in GRADED)
    notes = []
    if control != "not shown" and outcome != "not tested":
        notes.append(f"The control did not leave the sharpening in place (its ratio {text['control_survive']} is "
                     f"not wholly above {c.against.value}): what the clamp does is not specific to the massive "
                     "components, so the outcome is at most mixed.")
        outcome = "mixed"
    numbers = (f"position 0's components {f['dims']} are clamped from h_{f['onset']} on (at most {f['n_dims']} at "
               f"a layer; its largest component over the token median from there on: {f['peak_before']:g}× clean, "
               f"{f['peak_after']:g}× clamped); the lens KL on h_{f['mid']}, what the second half still sharpens: "
               f"clean {f['sharp_clean']:.2f}, clamped {f['sharp_clamp']:.2f}, control {f['sharp_control']:.2f}; "
               f"clamped over clean {text['survive']}, control over clean {text['control_survive']}; "
               f"the late layers' relative contribution (second-to-first ‖Δₗ‖ / ‖hₗ‖): clean {text['rel_clean']}, "
               f"clamped {text['rel_clamp']}; the clamped model's output against the clean one: KL "
               f"{text['output_kl']} nats, top-1 agreement {f['output_agree']:.2f}.")
    rows = {"massive activations": f"position 0, components {f['dims']}, from h_{f['onset']}"}
    return verdict_of(c, outcome, numbers, notes, rows=rows, value=text["survive"])


def figure(result: MassiveClampResult) -> plt.Figure:
    """(a) the lens's KL to each row's own output per layer, with ``h_mid`` marked; (b) position 0's largest component
    over the token median, with the massive threshold; (c) ``‖Δ_l‖ / ‖h_l‖``; (d) the graded ratio and the control's,
    with their 95% intervals and the threshold. Bands over prompts in (a) and (c); dashed: the first layer clamped.
    One legend below the four panels."""
    f = result.facts()
    fig, ((a, b), (c, d)) = subplots(2, 2, height=7.4)
    palette = {LABELS[r]: COLORS[r] for r in ROWS}
    lines(a, long_form(result, {f"lens_kl_{r}": LABELS[r] for r in ROWS}), palette, weighted=False)
    a.axvline(f["mid"], color="k", lw=0.8, ls=":", label="h_mid, the second half's input")
    a.set(xlabel="l (the lens on hₗ)", ylabel="KL(q_l ‖ q_L) (nats)", title="(a) the lens against its output")
    for r in ROWS:
        b.plot(np.arange(f["L"]), getattr(result, f"peak_{r}"), "-o", ms=3, color=COLORS[r], label=LABELS[r])
    b.axhline(MASSIVE, color="grey", ls="--", lw=1, label=f"massive (≥ {MASSIVE:.0f}× the median)")
    b.set(xlabel="l (hₗ enters layer l)", ylabel="largest |hₗ[0, d]| / median (log)", yscale="log",
          title="(b) what the clamp removes")
    lines(c, long_form(result, {f"ratio_{r}": LABELS[r] for r in ROWS}), palette)
    c.set(xlabel="layer l", ylabel="‖Δₗ‖ / ‖hₗ‖ (log)", yscale="log", title="(c) relative contribution")
    bands = result.fact_intervals(GRADED, level=LEVEL)
    for x, (key, r) in enumerate(zip(GRADED, ROWS[1:])):  # one point each, with its 95% interval
        v, lo_hi = f[key], bands[key] if bands[key][0] is not None else None
        d.errorbar([x], [np.nan if v is None else v], yerr=yerr([v], [lo_hi]), fmt="o", ms=7, capsize=4,
                   color=COLORS[r])
    d.axhline(CLAIMS["massive_clamp"].shown.value, color="grey", ls="--", lw=1, label="threshold (0.5)")
    d.axhline(1.0, color="k", lw=0.8, label="as clean (1)")
    d.set(xticks=[0, 1], xticklabels=["clamped", "control"], xlim=(-0.6, 1.6), ylim=(0, None),
          ylabel=f"KL on h_{f['mid']}, over clean", title="(d) graded: what survives")
    for ax in (a, c):
        ax.get_legend().remove()  # seaborn's, one per panel: the figure has one below
    if f["onset"] is not None:
        for ax in (a, b, c):
            ax.axvline(f["onset"], color=COLORS["clamp"], lw=0.8, ls="--", label="the first layer clamped")
    integer_ticks(a, b, c)
    below(fig, (a, b, d), extra=[band_key()])
    none = "no massive component at position 0: nothing clamped" if f["onset"] is None else None
    fig.suptitle(title(result, "Clamping position 0's massive activations", none))
    return fig


def reading(result: MassiveClampResult) -> str:
    """What a run clamped and what it measured, in one sentence for the chapter's prose (a real model's numbers)."""
    f = result.facts()
    if f["onset"] is None:
        return (f"Position 0 ({f['start']}) has no component of {MASSIVE:.0f}× the token median at any layer's input, "
                "so nothing is clamped.")
    return (f"Position 0 holds {f['start']}; its components {as_shown(f['dims'])} are clamped from h_{f['onset']} on; "
            f"the lens KL on h_{f['mid']} is {f['sharp_clean']:.2f} clean and {f['sharp_clamp']:.2f} clamped "
            f"({interval_text(f['survive'])} of the clean one; the control keeps {interval_text(f['control_survive'])}), "
            "and the clamped "
            f"model's output is {f['output_kl']:.2f} nats (KL) from the clean one, with top-1 agreement "
            f"{f['output_agree']:.2f}.")


#: what a real model's run glues for the chapter's prose (``verdict_clamp_<slug>_<key>``)
GLUE_KEYS = ("reading",)

REAL_RUN = dict(
    key="01-clamp", what=lambda sample: f"N = {sample} GSM8K test problems, three rows of each in one forward",
    measure=lambda lm, sample=SAMPLE: measure.massive_clamp(lm, data.load("gsm8k", sample)),
    claim=lambda r, f: verdict(r), figure=figure, options={"sample": SAMPLE}, glue=lambda r: {"reading": reading(r)}, glue_keys=GLUE_KEYS,
    caption="The logit lens's KL to each model's own output, position 0's largest component over the token median, "
            "and the relative contribution ‖Δₗ‖ / ‖hₗ‖, per layer, for the clean model, the model with position 0's "
            "massive components clamped to the median from the layer where they appear, and a control with as many "
            "other components clamped (95% bootstrap bands over prompts); and the graded ratio, the lens KL on h_mid "
            "clamped over clean, beside the control's, with their 95% intervals.")
