"""Every :class:`Verdict` the book prints, one function per claim (see :mod:`depthutils.book.claim_table` for the
claims and their thresholds, :mod:`depthutils.book.grading` for the one grading rule and the "paper vs this run"
table; both are re-exported here, so ``claims.grade`` and ``claims.CLAIMS`` keep working). Chapters 4 and 5's claim
lives in :mod:`depthutils.book.context_claim`, re-exported here as ``claims.context``; chapter 7's in
:mod:`depthutils.book.mapping_claim`, re-exported as ``claims.mapping``.
"""
from __future__ import annotations

import numpy as np

from depthutils.analysis.depth_use import MEASURES, DepthUse
from depthutils.analysis.study import METRICS, Study, reference_floor_cells, reference_spread
from depthutils.book.claim_table import (
    ACCURACY_FLOOR,
    CLAIMS,
    COMPLETENESS_LIMIT,
    GROWS,
    LEVEL,
    MIN_HALF,
    N_PERMUTATIONS,
    OUTCOMES,
    OUTPUT_AGAINST,
    OUTPUT_SHOWN,
    SCALE_WORDS,
    SHARED_TARGET,
    WHOLE_LAYER,
    Claim,
    Threshold,
)
from depthutils.book.context_claim import CONTEXT_MEASURES, context
from depthutils.book.grading import (
    COMBINED,
    Verdict,
    _verdict,
    band,
    combine,
    grade,
    interval_text,
    judge,
    not_tested,
    paper_vs_run,
)
from depthutils.book.mapping_claim import mapping
from depthutils.core.numbers import enclose, listing, numbered, plain
from depthutils.measures.contributions import ContributionsResult
from depthutils.measures.curves import peaks_at_embedding
from depthutils.measures.depth_score_result import DepthScoreResult
from depthutils.measures.future_effects import FutureEffectsResult
from depthutils.measures.logit_lens import LogitLensResult
from depthutils.measures.residual_stream import ResidualStreamResult

# ------------------------------------------------------------------------------------ P1's claims

def verdict(key: str, result) -> Verdict:
    """The verdict of claim ``key`` of :data:`~depthutils.book.claim_table.CLAIMS` graded on its statistic alone
    (``result.facts()[claim.fact]`` and its bootstrap interval): what a claim needs when nothing else decides it."""
    c = CLAIMS[key]
    outcome, value, lo, hi = judge(c, result, c.fact)
    return _verdict(c, outcome, f"{c.statistic}: {interval_text(value, lo, hi)}.", value=interval_text(value, lo, hi))


def residual_stream(result: ResidualStreamResult) -> Verdict:
    """Chapter 0: the residual stream's decomposition into what each sublayer adds."""
    c, f = CLAIMS["residual_stream"], result.facts()
    outcome, value, lo, hi = judge(c, result, c.fact)
    return _verdict(c, outcome, f"largest relative error {interval_text(value, lo, hi, '.1e')}; with the raw module "
                                f"outputs instead: {f['max_raw_error']:.1e}.",
                    criterion=c.criterion(fmt=".0e"), value=interval_text(value, lo, hi, '.1e'))



def contributions(result: ContributionsResult) -> Verdict:
    """Chapter 1: the second half's relative contribution against the first half's (layer 0 apart)."""
    c, f = CLAIMS["contributions"], result.facts()
    if f["half_size"] < MIN_HALF:
        return not_tested("contributions", f"{f['L']} layers: layers 1–{f['L'] - 1} cannot form two halves of at "
                                           f"least {MIN_HALF} layers each.")
    outcome, value, lo, hi = judge(c, result, c.fact)
    return _verdict(c, outcome,
                    f"second half {f['second']:.3f}, first half {f['first']:.3f}, ratio {interval_text(value, lo, hi)}; "
                    f"without the last layer (ours: how much one layer moves the ratio), the second half is "
                    f"{f['second_wo_last']:.3f} and the ratio {interval_text(f['ratio_wo_last'])}.",
                    rows={"last layers": f"ratio {f['ratio']:.2f} with the last layer, {f['ratio_wo_last']:.2f} "
                                         "without (ours)"},
                    value=interval_text(value, lo, hi))


def future_effects(result: FutureEffectsResult) -> Verdict:
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
    return _verdict(c, combine([outcome, out]),
                    f"second half {f['later_second']:.3f}, first half {f['later_first']:.3f}, ratio {later_text} "
                    f"({params.get('part', 'layer')}, {params.get('mode', 'future')} tokens; {outcome}); on the "
                    f"output: ratio {out_text} ({out}).", notes, criterion=criterion,
                    value=f"later layers {later_text}; output {out_text}" + (" (not tested)" if ovalue is None else ""))


def logit_lens(result: LogitLensResult) -> Verdict:
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
    return _verdict(c, combine(outcomes), "; ".join(parts) + ".", value="; ".join(values))


def depth_score(result: DepthScoreResult, floor: float = ACCURACY_FLOOR) -> Verdict:
    """Chapter 6: per family, does P1's level depth score (that of ``D`` maxed over the level's prompts) rise
    with the level? The slope of the level means of the prompts' scores (ours) is reported beside it, not
    graded. Families the model does not solve (accuracy below ``floor`` at a level compared) carry no
    evidence and are not counted."""
    c, f = CLAIMS["depth_score"], result.facts()
    L = result.n_layers
    grades, parts, notes, values = [], [], [], []
    for t in dict.fromkeys(r["task"] for r in result.rows):
        rows = [r for r in result.rows if r["task"] == t]
        acc = [r["accuracy"] for r in rows]
        key = c.fact.format(task=t)
        slope, lo, hi = f[key], f[f"{key}_lo"], f[f"{key}_hi"]
        text = f"{t}: {interval_text(slope, lo, hi, '+.3f')}"
        values.append(text)
        mean = f"{t}_mean_slope"
        ours = (f"beside it, ours and not graded, the slope of the level means of the prompts' scores "
                f"{interval_text(f[mean], f[f'{mean}_lo'], f[f'{mean}_hi'], '+.3f')}")
        if any(a is not None and a < floor for a in acc):
            notes.append(f"{t} is not informative: accuracy " + ", ".join(
                f"{100 * a:.0f}%" for a in acc if a is not None) + f" by level, below the floor of {100 * floor:.0f}% "
                "(ours: at a level the model rarely solves, the score measures failed attempts).")
            parts.append(text + f" (not counted; {ours})")
            values[-1] += " (not counted)"
            continue
        if len(rows) < 2:
            parts.append(text + f" (one level: not counted; {ours})")
            values[-1] += " (not counted)"
            continue
        delta = 1.0 / ((L - 1) * (len(rows) - 1))
        g = grade(slope, lo, hi, delta, c.against.value, shown_first=True)
        grades.append(g)
        parts.append(text + f" against one layer over the levels, {delta:.3f} ({g}; {ours})")
    outcome = combine(grades)
    if outcome == "not tested":
        notes.append("No task family is informative, so this run cannot test the claim.")
    return _verdict(c, outcome, "; ".join(parts) + ".", notes, value="; ".join(values),
                    criterion=f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval (a resampled max never "
                              "exceeds the level's observed one, so the interval says how much the slope hangs on a "
                              "few prompts): a family counts for the "
                              f"claim if the interval lies at or below one layer over its levels ({c.shown.source}); "
                              "this is decided first, so a rise inside one layer supports the claim even when its "
                              "interval lies above 0, because P1's claim is that harder problems do not use more "
                              f"depth. Otherwise the family counts against the claim if the interval lies wholly "
                              f"above 0 ({c.against.source}), and is mixed otherwise (an interval that reaches both 0 "
                              "and past one layer). Families are combined, "
                              f"and a family below {100 * floor:.0f}% accuracy at any level is not counted.")


def shared_layers(result: DepthUse) -> Verdict:
    """Chapter 8: the shared-layer model (the last) minus the stacked one (the first), three numbers."""
    c = CLAIMS["shared_layers"]
    stacked, shared = result.models[0], result.models[-1]
    if stacked == shared:
        return not_tested("shared_layers", "one model only: the claim compares a stacked and a shared-layer model.")
    a, b, f = result.numbers(stacked), result.numbers(shared), result.facts()
    grades, parts, values, notes = [], [], [], []
    peaked = f["kl_peak"]
    for k in MEASURES:
        key = c.fact.format(measure=k)
        d, lo, hi = f[key], f[f"{key}_lo"], f[f"{key}_hi"]
        if k == "kl_ratio" and peaked != "none":
            grades.append("not tested")
            parts.append(f"{k}: {b[k]} vs {a[k]}, degenerate (not tested)")
            notes.append(f"kl_ratio is degenerate on {peaked}: {embedding_peak_words()}; not counted.")
            continue
        g = grade(d, lo, hi, c.shown.value, c.against.value, below=False)
        if g == "shown" and (lo if lo is not None else d) <= c.shown.value:  # touching 0 is not above it
            g = "mixed"
        grades.append(g)
        fmt = lambda v: "—" if v is None else f"{v:.3f}"
        parts.append(f"{k}: {fmt(b[k])} vs {fmt(a[k])}, difference {interval_text(d, lo, hi, '+.3f')} ({g})")
        values.append(f"{k}: {interval_text(d, lo, hi, '+.3f')}")
    return _verdict(c, combine(grades), "; ".join(parts) + ".", notes, value="; ".join(values),
                    criterion=f"{shared} minus {stacked}: " + c.criterion().replace("at or above", "wholly above")
                    + f" Each of the three is graded and combined: {COMBINED}; a measure "
                              "that is degenerate on these models (the KL ratio where a model's lens KL peaks at "
                              "h_0) is not counted.")


# ------------------------------------------------------------------------------------ P2's claims

_PEAK = "with the KL maximum at h_0"


def embedding_peak_words() -> str:
    """Why an ED_KL whose curve peaks at ``h_0`` is degenerate, with P2's own cells of the same kind (its Table 1)."""
    cells = ", ".join(f"{m} on {t}, KL ED {ed}" for m, t, ed in reference_floor_cells("kl"))
    return ("where the lens's KL is largest at h_0 (the embedding), ED_KL is the first layer that halves the "
            "embedding's KL, 1 on a curve that falls at once, whatever the depth, so the KL ratio is 2/L by "
            "construction" + (f"; P2's Table 1 has the same behaviour ({cells})" if cells else ""))


def degenerate(study: Study, models, tasks, metric: str) -> str | None:
    """Why ``metric`` cannot inform a comparison of ``models`` × ``tasks`` (None: it can): an effective depth
    that is undefined (no layer meets the condition) or at layer 0 (met already on ``h_0``, the embedding, for the
    lens curves; at the first layer's update for the cosine) in a measured cell says nothing about how deep the
    model computes; nor does a KL effective depth whose curve peaks at ``h_0``
    (:func:`~depthutils.measures.curves.peaks_at_embedding`)."""
    measured = [(m, t) for m in models for t in tasks if study.results.get((m, t)) is not None]
    cells = [study.cell(m, t, metric)[0] for m, t in measured]
    undefined, floor = sum(ed is None for ed in cells), sum(ed == 0 for ed in cells)
    peak = sum(peaks_at_embedding(study.results[c].kl) for c in measured) if metric == "kl" else 0
    if not cells:
        return "no cell measured"
    why = [(f"{undefined} of {len(cells)} cells undefined, {floor} at layer 0" if undefined and floor else
            f"{undefined} of {len(cells)} cells undefined" if undefined else
            f"{floor} of {len(cells)} cells at layer 0" if floor else ""),
           f"{peak} of {len(cells)} cells {_PEAK}" if peak else ""]
    return ", ".join(w for w in why if w) or None


def degenerate_note(study: Study, models, tasks) -> str:
    """Which metrics are degenerate on ``models`` × ``tasks`` and why, as a phrase ("none" if all inform)."""
    why = {m: degenerate(study, models, tasks, m) for m in METRICS}
    bad = [f"{m} ({w})" for m, w in why.items() if w]
    peak = any(w and _PEAK in w for w in why.values())
    return ("; ".join(bad) + (f" ({embedding_peak_words()})" if peak else "")) if bad else "none"


def informative_metric(study: Study, models, tasks, order=("kl", "overlap", "cos")) -> str | None:
    """The first metric of ``order`` that is not degenerate on ``models`` × ``tasks`` (:func:`degenerate`): the one a
    chapter's prose reads; None when none informs."""
    return next((m for m in order if not degenerate(study, models, tasks, m)), None)


def degenerate_sentence(metric: str, why: str) -> str:
    """The verdict's note on a metric left out as degenerate (:func:`degenerate`)."""
    return (f"{metric} is degenerate on these models ({why}): not counted."
            + (f" ({embedding_peak_words()[0].upper()}{embedding_peak_words()[1:]}.)" if _PEAK in why else ""))


def _grows(slope, lo, hi) -> str:
    """The ED-against-L slope graded against :data:`GROWS`: shown if its interval lies wholly above 0, not
    shown if wholly at or below it, mixed otherwise (:func:`grade` with the boundary on the other side: a
    slope exactly 0, an ED that does not grow, is no rise); the interval widened to hold the slope, as printed."""
    if slope is None:
        return "not tested"
    lo, hi = (slope, slope) if lo is None or hi is None else enclose(slope, lo, hi)
    return "shown" if lo > GROWS.value else "not shown" if hi <= GROWS.value else "mixed"


def _scale_criterion(c: Claim) -> str:
    """The scale claim's two-part rule in words, with each metric's tolerance and P2's words on that metric."""
    groups = {}  # the metrics P2 speaks of in the same words share them
    for m in METRICS:
        groups.setdefault(SCALE_WORDS[m], []).append(f"{m} {reference_spread(m):.3f}")
    tolerances = "; ".join(f"{', '.join(ms)} ({words})" for words, ms in groups.items())
    return (f"{c.statistic}, per metric (cos, KL, overlap) that is informative for the models compared, with its "
            f"{100 * LEVEL:.0f}% bootstrap interval over prompts. ED grows: shown if the slope's interval lies wholly "
            f"above 0, not shown if wholly at or below 0, mixed otherwise ({GROWS.source}). The ratio is stable: "
            f"shown if the spread's interval lies at or below the metric's tolerance, not shown if wholly above it, "
            f"mixed otherwise; the tolerance is {c.shown.source}: {tolerances}. Metrics are combined within each "
            f"part, and the two parts into the claim: {COMBINED}.")


def effective_depth(study: Study, ladder, base: str | None = None, cot: str | None = None) -> dict[str, Verdict]:
    """Chapter 9: P2's three questions, each graded on every metric that is informative for the models compared.
    Scale is graded in two parts, ED grows with L (:func:`_grows`) and the ratio is stable (within P2's own
    spread of that metric), and is shown only if both are."""
    step = lambda models: float(np.mean([1.0 / study.n_layers(m) for m in models]))
    easy = [t for t in ("hellaswag", "gsm8k") if t in study.tasks]
    questions = {
        "scale": (ladder if len(ladder) >= 2 else None, study.tasks, reference_spread),
        "cot": ([base, cot] if base and cot else None, study.tasks, lambda m: CLAIMS["cot"].shown.value),
        "difficulty": (ladder if easy and "aime24" in study.tasks else None, easy + ["aime24"], lambda m: step(ladder)),
    }
    why_not = {"scale": "needs at least two ladder models", "cot": "needs a base and a chain-of-thought model",
               "difficulty": "needs AIME24 and HellaSwag or GSM8K"}
    out = {}
    for name, (models, tasks, tol) in questions.items():
        c = CLAIMS[name]
        key = c.fact.split(", ")[-1]
        if models is None:
            out[name] = not_tested(name, f"this run {why_not[name]}.")
            continue
        grades, parts, notes, values = [], [], [], []
        growth, grown, grown_values = [], [], []  # scale only: does ED grow with L
        for metric in METRICS:
            why = degenerate(study, models, tasks, metric)
            if why:
                notes.append(degenerate_sentence(metric, why))
                continue
            f = study.facts(ladder, base, cot, metric)
            t = tol(metric)
            g = grade(f[key], f[f"{key}_lo"], f[f"{key}_hi"], t, t)
            grades.append(g)
            parts.append(f"{metric}: {interval_text(f[key], f[f'{key}_lo'], f[f'{key}_hi'])} against {t:.2f} ({g})")
            values.append(f"{metric} {interval_text(f[key], f[f'{key}_lo'], f[f'{key}_hi'], '+.2f')}")
            if name == "scale":
                slope = interval_text(f["scale_ed_slope"], f["scale_ed_slope_lo"], f["scale_ed_slope_hi"], "+.2f")
                growth.append(_grows(f["scale_ed_slope"], f["scale_ed_slope_lo"], f["scale_ed_slope_hi"]))
                mean_ed = listing(plain(ed, 2) for ed in f["scale_ed"])
                grown.append(f"{metric}: {slope} layers per layer, mean ED {mean_ed} ({growth[-1]})")
                grown_values.append(f"{metric} {slope}")
        numbers = "; ".join(parts) or "no metric is informative"
        outcome = combine(grades)
        value = "; ".join(values)
        criterion = (f"{c.statistic}, per metric (cos, KL, overlap) that is informative for the models compared, "
                     f"with its {100 * LEVEL:.0f}% bootstrap interval over prompts: shown if it lies at or below the "
                     f"tolerance{'' if c.shown.value is None else f', {c.shown.value:.2f}'} ({c.shown.source}), "
                     f"not shown if wholly above it, mixed otherwise; metrics combined: {COMBINED}.")
        if name == "scale":
            numbers = (f"ED against L: {'; '.join(grown) or 'no metric is informative'}; ED grows: "
                       f"{combine(growth)}. Ratio spread: {numbers}; ratio stable: {outcome}")
            value = f"ED slope: {', '.join(grown_values)}; ratio spread: {', '.join(values)}"
            outcome = combine([combine(growth), outcome])
            criterion = _scale_criterion(c)
        if outcome == "not tested":
            notes.append("No metric is informative for these models, so this run cannot test the claim.")
        out[name] = _verdict(c, outcome, numbers + ".", notes, value=value, criterion=criterion)
    out["scale"].also = [out["cot"], out["difficulty"]]  # the chapter's one paper-vs-run table shows all three
    return out
