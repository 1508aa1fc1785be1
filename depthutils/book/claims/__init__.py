"""The book's verdicts: :func:`verdict` (a claim graded on its statistic alone), one module per claim of the papers'
own measurements (:mod:`~depthutils.book.claims.residual_stream`, ``contributions``, ``future_effects``,
``logit_lens``, ``depth_score``: each its ``verdict``, its ``figure`` and its real-model ``RUN``), and the verdicts
of the claims graded on several results (chapter 8's :func:`shared_layers`, chapter 9's :func:`effective_depth`).

The claims and their thresholds are in :mod:`depthutils.book.claim_table`, the one grading rule and the "paper vs
this run" table in :mod:`depthutils.book.grading`; both are re-exported here, so ``claims.grade`` and
``claims.CLAIMS`` keep working. Chapters 4 and 5's claim lives in :mod:`depthutils.book.context_claim`, re-exported
here as ``claims.context``; chapter 7's in :mod:`depthutils.book.mapping_claim`, re-exported as ``claims.mapping``.
A chapter imports its claim's module: ``from depthutils.book.claims import contributions as claim``.
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
from depthutils.measures.curves import peaks_at_embedding

#: the verdict and grading names; each claim module (``claims.contributions`` and the others) is reached as an
#: attribute
__all__ = [
    # defined here
    "verdict", "shared_layers", "effective_depth", "degenerate", "degenerate_note", "degenerate_sentence",
    "embedding_peak_words", "informative_metric", "claim_modules",
    # the claim table's and grading's names, and the claims of their own modules
    "ACCURACY_FLOOR", "CLAIMS", "COMPLETENESS_LIMIT", "GROWS", "LEVEL", "MIN_HALF", "N_PERMUTATIONS", "OUTCOMES",
    "OUTPUT_AGAINST", "OUTPUT_SHOWN", "SCALE_WORDS", "SHARED_TARGET", "WHOLE_LAYER", "Claim", "Threshold",
    "COMBINED", "Verdict", "band", "combine", "grade", "interval_text", "judge", "not_tested", "paper_vs_run",
    "CONTEXT_MEASURES", "context", "mapping",
]

# ------------------------------------------------------------------------------------ P1's claims

def verdict(key: str, result) -> Verdict:
    """The verdict of claim ``key`` of :data:`~depthutils.book.claim_table.CLAIMS` graded on its statistic alone
    (``result.facts()[claim.fact]`` and its bootstrap interval): what a claim needs when nothing else decides it."""
    c = CLAIMS[key]
    outcome, value, lo, hi = judge(c, result, c.fact)
    return _verdict(c, outcome, f"{c.statistic}: {interval_text(value, lo, hi)}.", value=interval_text(value, lo, hi))



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


def claim_modules() -> list:
    """Every claim module of this package (:mod:`depthutils.book.claims.contributions` and the others), imported."""
    import importlib
    import pkgutil

    return [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)
            if m.name != "run"]


# the claim modules, reachable as ``claims.contributions`` and so on once the package is imported
from depthutils.book.claims import contributions, depth_score, future_effects, logit_lens, residual_stream  # noqa: E402
