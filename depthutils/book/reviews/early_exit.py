"""With a cheap readout, could the second half be cut? Early exit (:mod:`depthutils.measures.early_exit`) with the
raw lens and with the tuned readout (:mod:`depthutils.measures.tuned_lens`): the verdict, the figures, the
real-model run."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from depthutils import data
from depthutils.analysis.known_facts import FACT_CHECK_DTYPE, SAMPLE_CANDIDATES, FactPrompts, prompts_for
from depthutils.book.claim_table import CLAIMS
from depthutils.book.grading import COMBINED, Verdict, _verdict, combine, interval_text, judge
from depthutils.book.legends import band_key, below
from depthutils.book.plotstyle import COLUMN_IN, lines, long_form, subplots, title
from depthutils.core.depth import RESIDUAL_AXIS, residual_depth
from depthutils.core.errors import DepthError, NothingFits
from depthutils.ladder.registry import is_embedded
from depthutils.measures.early_exit import EarlyExitResult, early_exit
from depthutils.measures.tuned_lens import Readouts, TunedLensResult, fit_readouts, tuned_lens

__all__ = ["verdict", "figure", "lens_figure", "lens_panels", "headline", "tuned_on", "early_exit_on", "real_facts",
           "REAL_RUN", "FIT_TEXTS",
           "REAL_FACTS", "REAL_FIT_TEXTS", "REAL_POSITIONS", "MIN_CORRECT", "READINGS", "LENS_KEY", "better_readout"]

#: the fewest answer tokens the full model must get right for the share it loses to mean something (ours: below
#: five one token moves the share by more than a fifth)
MIN_CORRECT = 5
#: which reading each outcome supports (the claim is graded as the reviewer's reading)
READINGS = {"shown": "the reviewers' reading: the second half's refinement is needed even with a cheap readout",
            "not shown": "P1's suggestion that the second half might be wasteful: a cheap readout on the first "
                         "half keeps most of the full model's correct answers",
            "mixed": "neither reading at this many prompts",
            "not tested": "neither reading: the run cannot speak to the question"}
#: on a real model: the held-out corpus windows the tuned readout is fitted on (~90 tokens each), and the positions
#: per GSM8K problem its KL and overlap are evaluated at (the decoding of 2L rows over a 49k–262k vocabulary is
#: the cost; the book's tests run this section, so it stays within about a minute per model)
REAL_FIT_TEXTS, REAL_POSITIONS = 40, 8
#: the held-out corpus windows (60 words each, :func:`depthutils.data.heldout_text`) the tuned readout is fitted on
FIT_TEXTS = 100
#: the key of the tuned readout's own result (KL and top-5 per layer on GSM8K text) among a real run's results
LENS_KEY = "tuned readout, GSM8K text"


def verdict(results: dict, facts: FactPrompts | None = None) -> Verdict:
    """Per set of prompts (``{name: EarlyExitResult}``; a :class:`TunedLensResult` among them, under
    :data:`LENS_KEY`, adds its numbers at mid-depth), the share of the full model's correct answer tokens that the
    model cut after its first half, read out by the tuned readout, gets wrong, with the raw lens's share beside it;
    a set where the full model gets fewer than :data:`MIN_CORRECT` answer tokens right is not tested, and so are
    the facts when ``facts`` (the check that chose them) found none the model answers. The last note says which
    reading the outcome supports (:data:`READINGS`)."""
    c = CLAIMS["early_exit"]
    lens = next((r for r in results.values() if isinstance(r, TunedLensResult)), None)
    results = {k: r for k, r in results.items() if isinstance(r, EarlyExitResult)}
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
        tuned, value, lo, hi = judge(c, r, c.fact)
        if value is None:
            notes.append(f"{name}: no tuned readout was fitted, so the cut model with one is not measured.")
        outcome = better_readout(tuned, judge(c, r, "lost")[0])
        outcomes.append(outcome)
        band = r.intervals()
        raw = interval_text(f["lost"], band.get("lost_lo"), band.get("lost_hi"))
        parts.append(f"{name}: {interval_text(value, lo, hi)} of {correct} correct answer tokens lost with the tuned "
                     f"readout on h_{f['half']} (raw lens: {raw}; gold accuracy: full model {f['full_gold']:.2f}, "
                     f"cut with the tuned readout {_num(f['tuned_skip_gold'])}, with the raw lens "
                     f"{f['skip_gold']:.2f}; {outcome})")
        values.append(f"{name} {interval_text(value, lo, hi)}")
    if not results:
        outcomes.append("not tested")
        parts.append("no set of prompts measured")
        notes.append("No set of prompts could be measured: none fits the model's context with its answer, or the "
                     "model answers none of the facts it was given.")
    fitted = next((r.facts() for r in results.values() if r.facts()["fit_tokens"]), None)
    if fitted:
        notes.append(f"The tuned readout was fitted on {fitted['fit_tokens']} tokens of held-out corpus text in "
                     f"{fitted['fit_time']}, and evaluated on the prompts above (other text).")
    if lens is not None:
        lf = lens.facts()
        notes.append(f"On GSM8K text at h_{lf['mid_layer']}: KL(output ‖ readout) {lf['mid_kl']:.2f} nats with the "
                     f"tuned readout, {lf['mid_raw_kl']:.2f} with the raw lens; top-{lens.k} overlap "
                     f"{lf['mid_overlap']:.2f} and {lf['mid_raw_overlap']:.2f}.")
    outcome = combine(outcomes)
    notes.append(f"This outcome supports {READINGS[outcome]}.")
    return _verdict(c, outcome, "; ".join(parts) + ".", notes, value="; ".join(values),
                    criterion=c.criterion() + " The raw lens on the same residual, the cheapest readout, is graded "
                    "alike, and a set is shown only if both readouts lose most, not shown if either keeps most, "
                    f"mixed otherwise; the sets combined: {COMBINED}.")


def better_readout(tuned: str, raw: str) -> str:
    """One set's outcome from the tuned readout's and the raw lens's (both cheap readouts): the question is whether
    *a* cheap readout keeps the answers, so *not shown* if either keeps most of them, *shown* only if both lose
    most, *mixed* otherwise; *not tested* without a tuned readout (the raw lens alone is not the question)."""
    if tuned == "not tested":
        return "not tested"
    return "not shown" if "not shown" in (tuned, raw) else "shown" if tuned == raw == "shown" else "mixed"


def _num(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def headline(results: dict) -> dict:
    """The first set's facts and their intervals, for a chapter's prose (every key None, glued as "undefined", when no
    set was measured)."""
    results = {k: r for k, r in results.items() if isinstance(r, EarlyExitResult)}
    if results:
        r = next(iter(results.values()))
        return {**r.facts(), **r.intervals()}
    keys = ("L", "half", "full_gold", "skip_gold", "added", "skip_agree", "lost", "formed_layer", "formed_rel", "n",
            "answer_tokens", "tuned_skip_gold", "tuned_skip_agree", "tuned_lost", "tuned_formed_layer", "fit_tokens",
            "fit_time")
    return dict.fromkeys(keys + tuple(f"{k}_{e}" for k in EarlyExitResult.INTERVAL_FACTS for e in ("lo", "hi")))


def figure(results: dict) -> plt.Figure:
    """One panel per set of prompts (two a row): gold accuracy and top-1 agreement with the full model of the early
    exit at every ``h_l`` (x: relative depth ``l / L``; 1 is the model's output), the gold accuracy of the tuned
    readout at every ``h_l``, and the model cut after its first half with either readout (markers at 0.5, 95%
    intervals), with one legend below them; a :class:`TunedLensResult` among ``results`` adds a row of two panels
    below (:func:`lens_panels`)."""
    lens = [r for r in results.values() if isinstance(r, TunedLensResult)]
    results = {k: r for k, r in results.items() if isinstance(r, EarlyExitResult)}
    rows = -(-max(len(results), 1) // 2)
    fig = plt.figure(figsize=(COLUMN_IN, 3.4 * rows + 1.9 + (4.3 if lens else 0)), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[3.4 * rows + 1.9, 4.3]) if lens else (fig, None)
    axes = np.atleast_1d(top.subplots(rows, min(max(len(results), 1), 2), squeeze=False).ravel())
    for ax in axes[len(results):]:
        ax.set_axis_off()
    if not results:
        axes[0].set_axis_on()
        axes[0].text(0.5, 0.5, "no set of prompts measured\n(see the verdict)", ha="center", va="center")
        axes[0].set(xlabel="exit at " + RESIDUAL_AXIS, ylabel="share of answer tokens")
    colors = {"gold accuracy, raw lens": "#2ca02c", "top-1 agreement, raw lens": "#1f77b4"}
    for i, (ax, (name, r)) in enumerate(zip(axes, results.items())):
        L = len(r.gold) - 1
        df = long_form(r, {"gold": "gold accuracy, raw lens", "agree": "top-1 agreement, raw lens"},
                       x=residual_depth(np.arange(L + 1), L))
        lines(ax, df, colors, weighted=False)
        ax.get_legend().remove()
        if np.isfinite(r.tuned_gold).all():
            ax.plot(residual_depth(np.arange(L), L), r.tuned_gold, color="#d62728", marker=".", label="gold accuracy, tuned readout")
        f = r.facts()
        for key, marker, color, label in (("skip_gold", "*", "k", "raw lens"),
                                          ("tuned_skip_gold", "D", "#d62728", "tuned readout")):
            if f[key] is None:
                continue
            # the fact is the mean over prompts: its interval as :meth:`~Result.intervals` rounds it
            lo, hi = (round(float(v), 3) for v in r.interval(key))
            ax.errorbar([residual_depth(f["half"], L)], [f[key]], yerr=[[f[key] - lo], [hi - f[key]]], fmt=marker, color=color,
                        markersize=7, capsize=3, label=f"cut at L/2, {label} (95% CI)")
        ax.axvline(0.5, color="k", lw=0.8, ls=":", label=r"the middle, $h_{L/2}$ at 0.5")
        ax.set(xlabel="exit at " + RESIDUAL_AXIS, ylabel="share of answer tokens" if i % 2 == 0 else "",
               ylim=(-0.03, 1.03), title=f"({'abcdefgh'[i]}) {name}, n={r.meta.get('n', '?')}")
    below(top, axes, extra=[band_key()])
    model = next((r.meta.get("model") for r in results.values()), None)
    top.suptitle("With a cheap readout, could the second half be cut?" + (f"\n{model}" if model else ""))
    if lens:
        lens_panels(bottom.subplots(1, 2), lens[0], first=len(results))
        bottom.suptitle(title(lens[0], "The tuned readout and the raw lens per layer"))
    return fig


def lens_figure(r: TunedLensResult) -> plt.Figure:
    """:func:`lens_panels` as a figure of its own."""
    fig, axes = subplots(1, 2, height=4.3)
    lens_panels(axes, r)
    fig.suptitle(title(r, "The tuned readout and the raw lens per layer"))
    return fig


def lens_panels(axes, r: TunedLensResult, first: int = 0) -> None:
    """On two axes: ``KL(output ‖ readout)`` per layer (log scale) and the top-``k`` overlap with the output, of the
    tuned readout and the raw lens (x: relative depth ``l / L``), with 95% bootstrap bands over prompts and their
    legend below the (sub)figure that holds them; dashed: P2's overlap threshold; dotted: the middle. ``first``: the
    panels' letters start after that many."""
    L = len(r.kl)
    colors = {"tuned readout": "#d62728", "raw lens": "#7f7f7f"}
    p = r.meta.get("params", {})
    for i, (ax, (key, raw, label)) in enumerate(zip(axes, (("kl", "raw_kl", "KL(output ‖ readout), nats"),
                                                           ("overlap", "raw_overlap", f"top-{r.k} overlap")))):
        df = long_form(r, {key: "tuned readout", raw: "raw lens"}, x=residual_depth(np.arange(L), L))
        lines(ax, df, colors)
        ax.get_legend().remove()
        ax.axvline(0.5, color="k", lw=0.8, ls=":", label=r"the middle, $h_{L/2}$ at 0.5")
        if key == "overlap":
            ax.axhline(0.3, color="k", lw=0.8, ls="--", label="P2's threshold, 0.3")
            ax.set_ylim(-0.03, 1.03)
        else:
            ax.set_yscale("log")  # the raw lens on the embedding sits far above every other point
        what = f"fit on {p.get('fit_tokens')} tokens" if key == "kl" else "agreement with the output"
        ax.set(xlabel=RESIDUAL_AXIS, ylabel=label, title=f"({'abcdefgh'[first + i]}) {what}")
    below(axes[0].get_figure(root=False), axes, extra=[band_key()])


def early_exit_on(model, sets="auto", *, n: int = 20, seed: int = 123, facts=None, readouts: Readouts | None = None,
                  max_tokens: int | None = None, progress_bar: bool = True) -> tuple[dict, object]:
    """:func:`early_exit` on each set of prompts of ``sets`` (``{name: prompts}``), or with ``"auto"`` the sets a
    model can be graded on: an embedded model's own tasks (``n`` addition chains and ``n`` invented-world
    questions), another model's ``n`` GSM8K answers and the facts it knows (``facts``, a
    :class:`~depthutils.analysis.known_facts.FactPrompts`, by default up to ``n`` sums and ``n`` two-hop questions
    it answers among the book's candidates, each checked). The tuned readout is ``readouts``, or fitted here on
    :data:`FIT_TEXTS` windows of the held-out corpus (:func:`depthutils.data.heldout_text`). Returns ``({name: result}, FactPrompts or None)``; a
    set with no prompt, or none that fits ``max_tokens`` (default: the model's context) with its answer, is left
    out (the fact check, or the verdict, says why)."""
    if isinstance(sets, str):
        if sets != "auto":
            raise DepthError(f"sets must be 'auto' or a dict of name → prompts, got {sets!r}.")
        if is_embedded(model):
            sets = {"addition": data.load("addition", n, seed=seed), "multihop": data.load("multihop", n, seed=seed)}
        else:
            if facts is None:
                facts = prompts_for(model, n=n, n_arithmetic=n, seed=seed, progress_bar=progress_bar,
                                    **SAMPLE_CANDIDATES)
            sets = {"GSM8K answers": data.load("gsm8k", n), "facts it knows": list(facts.prompts.values())}
    if readouts is None:
        readouts = fit_readouts(model, data.heldout_text(FIT_TEXTS), max_tokens=max_tokens, progress_bar=progress_bar)
    out = {}
    for name, prompts in sets.items():
        try:
            out[name] = early_exit(model, prompts, readouts=readouts, max_tokens=max_tokens,
                                   progress_bar=progress_bar) if prompts else None
        except NothingFits:
            out[name] = None
    return {k: r for k, r in out.items() if r is not None}, facts


def tuned_on(lm, *, n: int = 20, fit_texts: int = FIT_TEXTS, positions: int | None = None, seed: int = 123,
             facts=None, max_tokens=None, progress_bar: bool = True) -> tuple[dict, object]:
    """One fit of the tuned readout (``fit_texts`` held-out corpus windows), then :func:`tuned_lens` on ``n``
    GSM8K problems (at ``positions`` per problem; None: all) under :data:`LENS_KEY`, and :func:`early_exit_on` with the same
    readout: ``({name: result}, FactPrompts or None)``."""
    from depthutils.ladder.registry import is_embedded

    if is_embedded(lm):
        facts = None
    elif facts is None:  # a real model's facts: chapters 4 and 5's check
        from depthutils.book.claims.context.runs import SAMPLE, facts_for

        facts = facts_for(lm, SAMPLE)
    readouts = fit_readouts(lm, data.heldout_text(fit_texts), max_tokens=max_tokens, progress_bar=progress_bar)
    lens = tuned_lens(lm, data.load("gsm8k", n), readouts=readouts, positions=positions, max_tokens=max_tokens,
                      progress_bar=progress_bar)
    exits, facts = early_exit_on(lm, n=n, seed=seed, facts=facts,
                                 readouts=readouts, max_tokens=max_tokens, progress_bar=progress_bar)
    return {**exits, LENS_KEY: lens}, facts


#: the numbers a real model's run glues for the chapter's prose (:func:`real_facts`)
REAL_FACTS = ("L", "mid_layer", "fit_tokens", "fit_time", "mid_kl", "mid_raw_kl", "mid_overlap", "mid_raw_overlap",
              "overlap_layer", "raw_overlap_layer", "kl_layer", "raw_kl_layer", "lost", "tuned_lost", "reading")


def real_facts(results: dict) -> dict:
    """:data:`REAL_FACTS` of a real model's run: the tuned readout's on GSM8K text, and the first set's shares lost
    when cut after the first half (raw lens and tuned readout)."""
    lens = next((r.facts() for r in results.values() if isinstance(r, TunedLensResult)), {})
    exits = headline(results)
    out = {k: exits[k] if k in ("lost", "tuned_lost") else lens.get(k) for k in REAL_FACTS if k != "reading"}
    out["reading"] = reading(out, next(iter(k for k, r in results.items() if isinstance(r, EarlyExitResult)), None))
    return out


def reading(f: dict, first: str | None) -> str:
    """One sentence of :func:`real_facts`' numbers, for a chapter's prose."""
    say = lambda l: "no layer" if l is None else f"layer {l}"  # noqa: E731
    if f.get("fit_tokens") is None:
        return "no tuned readout was fitted."
    lost = ("" if first is None or f["tuned_lost"] is None else
            f" Cut after its first half, it loses {f['tuned_lost']:.2f} of the full model's correct answer tokens on "
            f"the {first} with the tuned readout, {_num(f['lost'])} with the raw lens.")
    return (f"the tuned readout, fitted on {f['fit_tokens']} tokens in {f['fit_time']}, is at "
            f"KL(output ‖ readout) {f['mid_kl']:.2f} nats at h_{f['mid_layer']} of {f['L']} layers (the raw lens "
            f"{f['mid_raw_kl']:.2f}), with top-5 overlap {f['mid_overlap']:.2f} (raw {f['mid_raw_overlap']:.2f}); "
            f"its overlap first exceeds P2's 0.3 at {say(f['overlap_layer'])} (raw lens: {say(f['raw_overlap_layer'])})."
            + lost)


# in float32, as chapters 4 and 5: the facts are theirs
REAL_RUN = dict(
    key="03-exit", what=f"the tuned readout fitted on {REAL_FIT_TEXTS} windows of 60 words of held-out corpus text "
                        "(King James Bible and Shakespeare), then evaluated on other text: the answers of N = 20 GSM8K "
                        "test problems, the sums and two-hop facts the model answers that chapters 4 and 5 measure "
                        f"(the same check), and the KL and top-5 overlap at {REAL_POSITIONS} evenly spaced positions "
                        "of each of those 20 problems",
    measure=lambda lm: tuned_on(lm, fit_texts=REAL_FIT_TEXTS, positions=REAL_POSITIONS, progress_bar=False), claim=lambda rs, f: verdict(rs, facts=f), figure=figure,
    dtype=FACT_CHECK_DTYPE,
    caption="Top: gold accuracy and top-1 agreement with the full model when each residual hₗ is decoded by the raw "
            "lens, the gold accuracy of the tuned readout, and the model cut after its first half with either "
            "(markers), with 95% bootstrap intervals over prompts. Bottom: KL(output ‖ readout) and top-5 overlap of "
            "the tuned readout and the raw lens per layer on GSM8K text.",
    together=True, glue=real_facts, glue_keys=REAL_FACTS)
