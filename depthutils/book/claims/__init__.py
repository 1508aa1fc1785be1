"""The book's verdicts, one module per claim: its ``verdict`` (or ``verdicts``), its figure(s) and, where the real
models run it, its ``RUN`` (:class:`~depthutils.book.claims.run.Run`, which :func:`depthutils.book.realruns.run_of`
collects). The papers' claims: :mod:`~depthutils.book.claims.residual_stream` (chapter 0), ``contributions`` (1),
``future_effects`` (2), ``logit_lens`` (3), ``context`` (4 and 5, on a sample of prompts), ``depth_score`` (6),
``mapping`` (7), ``shared_layers`` (8) and ``effective_depth`` (9, P2's three claims). The reviewers' questions are
graded in :mod:`depthutils.book.reviews`, chapter 10's hypothesis in :mod:`depthutils.book.claims.objectives`.

Here: :func:`verdict` (a claim graded on its statistic alone: ``claims.verdict("<key>", result)``), the degenerate
effective-depth metrics chapters 8 and 9 leave out, and the claim table's and grading's names, re-exported so
``claims.grade`` and ``claims.CLAIMS`` keep working. A chapter imports its claim's module:
``from depthutils.book.claims import contributions as claim``.
"""
from __future__ import annotations

from depthutils.analysis.p2_table import reference_floor_cells
from depthutils.book.claim_table import (
    CLAIMS,
    OUTCOMES,
)
from depthutils.book.grading import (
    Verdict,
    combine,
    grade,
    interval_text,
    judge,
    paper_vs_run,
    verdict_of,
)
from depthutils.measures.curves import peaks_at_embedding
from depthutils.measures.effective_depth import METRICS

#: the verdict and grading names; each claim module (``claims.contributions`` and the others) is reached as an
#: attribute
__all__ = [
    # defined here
    "verdict", "degenerate", "degenerate_note", "degenerate_sentence",
    "embedding_peak_words", "informative_metric",
    # the claim table's and grading's names that callers read here
    "CLAIMS", "OUTCOMES", "Verdict", "combine", "grade", "interval_text", "judge", "paper_vs_run",
]

def verdict(key: str, result) -> Verdict:
    """The verdict of claim ``key`` of :data:`~depthutils.book.claim_table.CLAIMS` graded on its statistic alone
    (``result.facts()[claim.fact]`` and its bootstrap interval): what a claim needs when nothing else decides it."""
    c = CLAIMS[key]
    outcome, value, lo, hi = judge(c, result, c.fact)
    return verdict_of(c, outcome, f"{c.statistic}: {interval_text(value, lo, hi)}.", value=interval_text(value, lo, hi))


# ------------------------------------------------------------------------------------ P2's claims

_PEAK = "with the KL maximum at h_0"


def embedding_peak_words() -> str:
    """Why an ED_KL whose curve peaks at ``h_0`` is degenerate, with P2's own cells of the same kind (its Table 1)."""
    cells = ", ".join(f"{m} on {t}, KL ED {ed}" for m, t, ed in reference_floor_cells("kl"))
    return ("where the lens's KL is largest at h_0 (the embedding), ED_KL is the first layer that halves the "
            "embedding's KL, 1 on a curve that falls at once, whatever the depth, so the KL ratio is 2/L by "
            "construction" + (f"; P2's Table 1 has the same behaviour ({cells})" if cells else ""))


def degenerate(study, models, tasks, metric: str) -> str | None:
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


def degenerate_note(study, models, tasks) -> str:
    """Which metrics are degenerate on ``models`` × ``tasks`` and why, as a phrase ("none" if all inform)."""
    why = {m: degenerate(study, models, tasks, m) for m in METRICS}
    bad = [f"{m} ({w})" for m, w in why.items() if w]
    peak = any(w and _PEAK in w for w in why.values())
    return ("; ".join(bad) + (f" ({embedding_peak_words()})" if peak else "")) if bad else "none"


def informative_metric(study, models, tasks, order=("kl", "overlap", "cos")) -> str | None:
    """The first metric of ``order`` that is not degenerate on ``models`` × ``tasks`` (:func:`degenerate`): the one a
    chapter's prose reads; None when none informs."""
    return next((m for m in order if not degenerate(study, models, tasks, m)), None)


def degenerate_sentence(metric: str, why: str) -> str:
    """The verdict's note on a metric left out as degenerate (:func:`degenerate`)."""
    return (f"{metric} is degenerate on these models ({why}): not counted."
            + (f" ({embedding_peak_words()[0].upper()}{embedding_peak_words()[1:]}.)" if _PEAK in why else ""))


def __getattr__(name: str):
    """``claims.contributions`` and the other claim modules, each imported when first used (a chapter imports its
    own: ``from depthutils.book.claims import contributions as claim``)."""
    import importlib
    import importlib.util

    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


