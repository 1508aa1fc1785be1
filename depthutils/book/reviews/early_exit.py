"""With a cheap readout, could the second half be cut? Early exit (:mod:`depthutils.measures.early_exit`) with the
raw lens and with the tuned readout (:mod:`depthutils.measures.tuned_lens`): the verdict, the figures, the
real-model run."""
from __future__ import annotations

from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np

from depthutils import data
from depthutils.analysis.known_facts import FACT_CHECK_DTYPE, SAMPLE_CANDIDATES, FactPrompts, prompts_for
from depthutils.book.claim_table import CLAIMS
from depthutils.book.grading import COMBINED, Verdict, combine, interval_text, judge, verdict_of
from depthutils.book.legends import band_key, below
from depthutils.book.plotstyle import COLUMN_IN, lines, long_form, subplots, title
from depthutils.book.reviews import readout_check as check
from depthutils.core.depth import RESIDUAL_AXIS, residual_depth
from depthutils.core.errors import DepthError, NothingFits
from depthutils.core.prompts import Prompt
from depthutils.ladder.registry import is_embedded
from depthutils.measures.early_exit import EarlyExitResult, early_exit
from depthutils.measures.tuned_lens import Readouts, TunedLensResult, fit_readouts, fit_time, tuned_lens

__all__ = ["verdict", "figure", "lens_figure", "lens_panels", "headline", "prompt_sets", "own_sets", "tuned_on",
           "first_of_each_kind", "early_exit_on", "real_facts", "REAL_RUN", "FIT_PROMPTS", "REAL_FACTS", "REAL_FIT_PROMPTS", "REAL_POSITIONS", "MIN_CORRECT",
           "READINGS", "LENS_KEY", "better_readout", "check_lines", "check_sentence"]

#: the fewest answer tokens the full model must get right for the share it loses to mean something (ours: below
#: five one token moves the share by more than a fifth)
MIN_CORRECT = 5
#: which reading each outcome supports (the claim is graded as the reviewer's reading)
READINGS = {"shown": "the reviewers' reading: the second half's refinement is needed even with a cheap readout",
            "not shown": "P1's suggestion that the second half might be wasteful: a cheap readout on the first "
                         "half keeps most of the full model's correct answers",
            "mixed": "neither reading at this many prompts",
            "not tested": "neither reading: the run cannot speak to the question"}
#: the held-out prompts per graded set the tuned readout is fitted on (:func:`prompt_sets`), on an embedded model;
#: an addition chain or an invented-world question is a few tokens, so these cost little
FIT_PROMPTS = 200
#: on a real model: the held-out prompts per graded set (a GSM8K problem is about 250 tokens; a fact's candidates
#: run out near 170), and the positions per GSM8K problem the tuned readout's KL and overlap on GSM8K text are
#: evaluated at (the decoding of 2L rows over a 49k–262k vocabulary is the cost; the book's tests run this section)
REAL_FIT_PROMPTS, REAL_POSITIONS = 100, 8
#: the key of the tuned readout's own result (KL and top-5 per layer on GSM8K text) among a real run's results
LENS_KEY = "tuned readout, GSM8K text"


def verdict(results: dict, facts: FactPrompts | None = None) -> Verdict:
    """Per set of prompts (``{name: EarlyExitResult}``; a :class:`TunedLensResult` among them, under
    :data:`LENS_KEY`, adds its numbers at mid-depth), the share of the full model's correct answer tokens that the
    model cut after its first half, read out by the tuned readout, gets wrong, with the raw lens's share beside it.
    The tuned readout counts only where it beats the raw lens at every layer on the graded prompts
    (:func:`~depthutils.book.reviews.readout_check.readout_checks`): otherwise every set is not tested. A set where
    the full model gets fewer than :data:`MIN_CORRECT` answer tokens right is not tested, and so are the facts when
    ``facts`` (the check that chose them) found none the model answers. The last note says which reading the
    outcome supports (:data:`READINGS`)."""
    c = CLAIMS["early_exit"]
    lens = next((r for r in results.values() if isinstance(r, TunedLensResult)), None)
    results = {k: r for k, r in results.items() if isinstance(r, EarlyExitResult)}
    checks = check.readout_checks(results)
    counts = check.passes(checks)
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
        outcome = better_readout(tuned, judge(c, r, "lost")[0]) if counts else "not tested"
        outcomes.append(outcome)
        band = r.intervals()
        raw = interval_text(f["lost"], band.get("lost_lo"), band.get("lost_hi"))
        parts.append(f"{name}: {interval_text(value, lo, hi)} of {correct} correct answer tokens lost with the tuned "
                     f"readout on h_{f['half']} (raw lens: {raw}; gold accuracy: full model {f['full_gold']:.2f}, "
                     f"cut with the tuned readout {_num(f['tuned_skip_gold'])}, with the raw lens "
                     f"{f['skip_gold']:.2f}; {outcome})")
        if counts:
            values.append(f"{name} {interval_text(value, lo, hi)}")
    if not results:
        outcomes.append("not tested")
        parts.append("no set of prompts measured")
        notes.append("No set of prompts could be measured: none fits the model's context with its answer, or the "
                     "model answers none of the facts it was given.")
    fitted = next((r.meta["params"] for r in results.values() if r.facts()["fit_tokens"]), None)
    if fitted:
        where = "the positions that predict their answers" if fitted.get("fit_at") == "answers" else "every position"
        notes.append(f"The tuned readout was fitted at {fitted['fit_tokens']} positions ({where}) of "
                     f"{fitted['fit_texts']} held-out prompts of the kinds graded, never a graded one, in "
                     f"{fit_time(results[next(iter(results))].meta)}.")
    if checks:
        notes.append(check.sentence(checks) + (" Its tables, layer by layer, are printed with the run." if counts else
                                               " So the early exit is not tested on this model: this run could not "
                                               "fit a tuned readout that beats the raw lens at every layer, and the "
                                               "tables of the check, printed with the run, show where."))
    if lens is not None:
        lf = lens.facts()
        notes.append(f"On GSM8K text at h_{lf['mid_layer']} (every position, not only the answers): KL(q_L ‖ ·), the "
                     f"output first, {lf['mid_kl']:.2f} nats with the tuned readout, {lf['mid_raw_kl']:.2f} with the "
                     f"raw lens; top-{lens.k} overlap {lf['mid_overlap']:.2f} and {lf['mid_raw_overlap']:.2f}.")
    outcome = combine(outcomes)
    notes.append(f"This outcome supports {READINGS[outcome]}.")
    return verdict_of(c, outcome, "; ".join(parts) + ".", notes, value="; ".join(values),
                    criterion=c.criterion() + " The tuned readout counts only where it beats the raw lens at every "
                    "layer on each set of graded prompts (a lower KL(q_L ‖ ·), the output first, and at least as many "
                    "of the full model's correct answer tokens kept; the readout check); otherwise every set is not "
                    "tested. The raw lens on the same residual, the cheapest readout, is graded alike, and a set is "
                    "shown only if both readouts lose most, not shown if either keeps most, mixed otherwise; the sets "
                    f"combined: {COMBINED}.")


def check_lines(results: dict) -> list[str]:
    """The readout check of a run's results, as a real model's details print it (none without a tuned readout)."""
    checks = check.readout_checks(results)
    return [f"readout check: {check.summary(checks)}"] if checks else []


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
    """On two axes: ``KL(q_L ‖ ·)`` (the output first) per layer (log scale) and the top-``k`` overlap with the output, of the
    tuned readout and the raw lens (x: relative depth ``l / L``), with 95% bootstrap bands over prompts and their
    legend below the (sub)figure that holds them; dashed: P2's overlap threshold; dotted: the middle. ``first``: the
    panels' letters start after that many."""
    L = len(r.kl)
    colors = {"tuned readout": "#d62728", "raw lens": "#7f7f7f"}
    p = r.meta.get("params", {})
    for i, (ax, (key, raw, label)) in enumerate(zip(axes, (("kl", "raw_kl", "KL(q_L ‖ ·), nats (output first)"),
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


def prompt_sets(model, *, n: int = 20, fit_prompts: int = FIT_PROMPTS, seed: int = 123, facts=None,
                progress_bar: bool = True) -> tuple[dict, dict, object]:
    """The sets of prompts a model's early exit is graded on, ``{name: prompts}``, and for each up to
    ``fit_prompts`` held-out prompts of the same kind, never a graded one, that its tuned readout is fitted on:

    * an embedded model: its own tasks, ``n`` addition chains and ``n`` invented-world questions, the first of one
      shuffle (``seed``) of the project's evaluation rows; the fit's are the rows after them;
    * another model: the first ``n`` GSM8K test problems (the fit's: the last of the test split) and the facts it
      knows (``facts``, a :class:`~depthutils.analysis.known_facts.FactPrompts`, by default up to ``n`` sums and
      ``n`` two-hop questions it answers among the book's candidates, each checked; the fit's: the candidates of
      the same check that are not graded, with their gold answers).

    Returns ``(sets, held_out, FactPrompts or None)``."""
    sets, held_out = own_sets(is_embedded(model), n=n, fit_prompts=fit_prompts, seed=seed)
    if is_embedded(model):
        return sets, held_out, None
    if facts is None:
        facts = prompts_for(model, n=n, n_arithmetic=n, seed=seed, progress_bar=progress_bar, **SAMPLE_CANDIDATES)
    graded = list(facts.prompts.values())
    texts = {p.context for p in graded}
    spare = [Prompt.from_parts(c.context, c.answer or ("" if c.context.endswith(" ") else " ") + c.forms[0], c.source)
             for c in facts.candidates if not c.graded and c.context not in texts]
    return {**sets, "facts it knows": graded}, {**held_out, "facts it knows": spare[:fit_prompts]}, facts


def own_sets(embedded: bool, *, n: int = 20, fit_prompts: int = FIT_PROMPTS, seed: int = 123) -> tuple[dict, dict]:
    """The graded sets of :func:`prompt_sets` that need no fact check, and their held-out prompts: an embedded
    model's addition chains and invented-world questions, or another model's GSM8K answers."""
    if embedded:
        rows = {kind: data.project_task(kind, None, seed=seed) for kind in ("addition", "multihop")}
        return {k: r[:n] for k, r in rows.items()}, {k: r[n:n + fit_prompts] for k, r in rows.items()}
    gsm = data.gsm8k(None)
    if n + fit_prompts > len(gsm):
        raise DepthError(f"n + fit_prompts must keep the graded and the held-out GSM8K problems apart: at most "
                         f"{len(gsm)} together, got {n} + {fit_prompts}.")
    return {"GSM8K answers": gsm[:n]}, {"GSM8K answers": gsm[len(gsm) - fit_prompts:]}


def early_exit_on(model, sets: dict, *, readouts: Readouts, max_tokens: int | None = None,
                  progress_bar: bool = True) -> dict:
    """:func:`early_exit` with the tuned readout ``readouts`` on each set of prompts of ``sets`` (``{name:
    prompts}``, :func:`prompt_sets`): ``{name: result}``; a set with no prompt, or none that fits ``max_tokens``
    (default: the model's context) with its answer, is left out (the fact check, or the verdict, says why)."""
    out = {}
    for name, prompts in sets.items():
        try:
            out[name] = early_exit(model, prompts, readouts=readouts, max_tokens=max_tokens,
                                   progress_bar=progress_bar) if prompts else None
        except NothingFits:
            out[name] = None
    return {k: r for k, r in out.items() if r is not None}


def tuned_on(lm, *, n: int = 20, fit_prompts: int = FIT_PROMPTS, positions: int | None = None, seed: int = 123,
             facts=None, facts_per_kind: int | None = None, max_tokens=None,
             progress_bar: bool = True) -> tuple[dict, object]:
    """One fit of the tuned readout on the held-out prompts of :func:`prompt_sets` (``fit_prompts`` per set, at
    the positions that predict their answers; never a prompt it is evaluated on), then :func:`tuned_lens` on ``n``
    GSM8K problems (at ``positions`` per problem; None: all) under :data:`LENS_KEY`, and :func:`early_exit_on` on
    the graded sets with the same readout: ``({name: result}, FactPrompts or None)``. A real model's facts are
    chapters 4 and 5's check (``facts`` by default), the first ``facts_per_kind`` of each kind graded (None: all)."""
    if not is_embedded(lm) and facts is None:
        from depthutils.book.claims.context.runs import SAMPLE, facts_for

        facts = facts_for(lm, SAMPLE)
    if facts is not None and facts_per_kind is not None:
        facts = first_of_each_kind(facts, facts_per_kind)
    sets, held_out, facts = prompt_sets(lm, n=n, fit_prompts=fit_prompts, seed=seed, facts=facts,
                                        progress_bar=progress_bar)
    gsm = data.load("gsm8k", n)
    readouts = fit_readouts(lm, [p for ps in held_out.values() for p in ps], max_tokens=max_tokens,
                            not_on=gsm + [p for ps in sets.values() for p in ps], progress_bar=progress_bar)
    lens = tuned_lens(lm, gsm, readouts=readouts, positions=positions, max_tokens=max_tokens,
                      progress_bar=progress_bar)
    exits = early_exit_on(lm, sets, readouts=readouts, max_tokens=max_tokens, progress_bar=progress_bar)
    return {**exits, LENS_KEY: lens}, facts


def first_of_each_kind(facts: FactPrompts, n: int) -> FactPrompts:
    """``facts`` with only the first ``n`` graded prompts of each kind (``"multihop_2"`` is of kind ``"multihop"``)."""
    kinds = [k.split("_")[0] for k in facts.prompts]
    return replace(facts, prompts={k: p for i, (k, p) in enumerate(facts.prompts.items())
                                   if kinds[:i].count(kinds[i]) < n})


#: the numbers a real model's run glues for the chapter's prose (:func:`real_facts`)
REAL_FACTS = ("L", "mid_layer", "fit_tokens", "fit_time", "mid_kl", "mid_raw_kl", "mid_overlap", "mid_raw_overlap",
              "overlap_layer", "raw_overlap_layer", "kl_layer", "raw_kl_layer", "lost", "tuned_lost", "check",
              "reading")


def real_facts(results: dict) -> dict:
    """:data:`REAL_FACTS` of a real model's run: the tuned readout's on GSM8K text, the readout check's sentence, and
    the first set's shares lost when cut after the first half (raw lens and tuned readout)."""
    lens = next((r.facts() for r in results.values() if isinstance(r, TunedLensResult)), {})
    exits = headline(results)
    out = {k: exits[k] if k in ("lost", "tuned_lost") else lens.get(k) for k in REAL_FACTS[:-2]}
    out["check"] = check_sentence(results)
    out["reading"] = reading(out, next(iter(k for k, r in results.items() if isinstance(r, EarlyExitResult)), None))
    return out


def check_sentence(results: dict) -> str:
    """The readout check's outcome in one sentence (:mod:`~depthutils.book.reviews.readout_check`)."""
    return check.sentence(check.readout_checks(results))


def reading(f: dict, first: str | None) -> str:
    """A few sentences of :func:`real_facts`' numbers, for a chapter's prose."""
    if f.get("fit_tokens") is None:
        return "No tuned readout was fitted."
    lost = ("" if first is None or f["tuned_lost"] is None else
            f" Cut after its first half, the model loses {f['tuned_lost']:.2f} of its correct answer tokens on the "
            f"{first} with the tuned readout, {_num(f['lost'])} with the raw lens.")
    return (f"The tuned readout was fitted at {f['fit_tokens']} positions of held-out prompts in {f['fit_time']}. "
            f"{f['check']}{lost} On GSM8K text (every position, not only the answers), at h_{f['mid_layer']} of "
            f"{f['L']} layers, KL(q_L ‖ ·), the output first, is {f['mid_kl']:.2f} nats with the tuned readout and "
            f"{f['mid_raw_kl']:.2f} with the raw lens.")


def _real_words(sample: int) -> str:
    """The real run's prompts in words, for ``sample`` graded GSM8K problems (the book's 20)."""
    n = "N = 20" if sample == 20 else f"N = {sample} (a sample; the book runs 20)"
    return (f"the tuned readout fitted at the answers of held-out prompts of the kinds graded ({_fit_prompts(sample)} "
            "GSM8K test problems other than the graded ones, and the sums and two-hop facts of the same check that "
            f"are not graded), then evaluated on the graded ones: the answers of {n} GSM8K test problems, the sums "
            "and two-hop facts the model answers that chapters 4 and 5 measure (the same check"
            + ("" if sample == 20 else f"; the first {sample} of each kind") + "), with the readout "
            f"check at every layer beside them, and the KL and top-5 overlap at {REAL_POSITIONS} evenly spaced "
            "positions of each of those problems")


def _fit_prompts(sample: int) -> int:
    """The held-out prompts per set a real run of ``sample`` graded problems fits on: the book's
    :data:`REAL_FIT_PROMPTS` for its 20, in proportion for a sample (at least 5)."""
    return max(5, REAL_FIT_PROMPTS * sample // 20)


# in float32, as chapters 4 and 5: the facts are theirs
REAL_RUN = dict(
    key="03-exit", options={"sample": 20}, what=_real_words,
    measure=lambda lm, sample=20: tuned_on(lm, n=sample, fit_prompts=_fit_prompts(sample), positions=REAL_POSITIONS,
                                           facts_per_kind=None if sample == 20 else sample, progress_bar=False),
    claim=lambda rs, f: verdict(rs, facts=f), figure=figure, printed=check_lines,
    dtype=FACT_CHECK_DTYPE,
    caption="Top: gold accuracy and top-1 agreement with the full model when each residual hₗ is decoded by the raw "
            "lens, the gold accuracy of the tuned readout, and the model cut after its first half with either "
            "(markers), with 95% bootstrap intervals over prompts. Bottom: KL(q_L ‖ ·), the output first, and top-5 "
            "overlap of the tuned readout and the raw lens per layer on GSM8K text.",
    together=True, glue=real_facts, glue_keys=REAL_FACTS)
