"""Chapters 4 and 5's claim (P1 Fig. 6): per prompt, the deepest layer at which a context position still matters,
graded per kind of prompt (arithmetic, sums of three or more numbers, two-hop) on the mean over that kind's prompts with its bootstrap interval.

P1's Fig. 6 shows one prompt per kind; the book grades a sample of prompts the model answers
(:func:`depthutils.analysis.known_facts.prompts_for`: on an embedded model, the chapter's prompt and the ladder's
held-out chains and compositions; on a real model, real facts and sums), so that the verdict says how the model
typically computes, not how it computed one answer. :class:`KindSample` and :func:`sample_figure` are how a real-model section shows one kind; the
worked prompt's layer × token maps are :func:`erasure_figure` (chapter 4) and :func:`attribution_figure` (chapter 5)
(:mod:`~depthutils.book.claims.context.figures`); the real-model runs are :data:`RUNS`
(:mod:`~depthutils.book.claims.context.runs`, imported when first used: chapter 5's page needs no erasure).

**What a sample drops.** A prompt is not counted when no context position ever matters, or (integrated gradients)
when its layer sums miss completeness; those are retried once at twice the budget (:func:`run_sample`'s ``retry``).
Per kind, :meth:`KindSample.drops` counts the prompts drawn, graded and dropped, and :meth:`KindSample.bounds`
grades the kind with the dropped prompts counted at either end of the scale; the verdict states both, and
:func:`drop_table` shows them per model.

**Why the mean.** The claim's thresholds are relative depths (0.6, 0.8), so the mean of the per-prompt relative
depths is graded on the scale the thresholds are stated on, with no new number; the share of prompts at or below
0.6 would need a second threshold (which share makes the claim hold) that neither P1 nor we can source. The mean
is also a smooth statistic, which the percentile bootstrap estimates well (:meth:`depthutils.core.results.Result.interval`
explains why a max is not).
"""
from __future__ import annotations

from depthutils.book.claim_table import COMPLETENESS_LIMIT
from depthutils.book.claims.context.figures import (
    FIGURES,
    attribution_figure,
    erasure_figure,
    sample_figure,
)
from depthutils.book.claims.context.sample import (
    MIN_PROMPTS,
    Drops,
    KindSample,
    by_kind,
    drop_table,
    extremes,
    per_prompt,
    run_sample,
    sample_facts,
    sample_mean,
    verdict,
    worked,
)

__all__ = ["COMPLETENESS_LIMIT", "MIN_PROMPTS", "Drops", "KindSample", "by_kind", "drop_table", "extremes",
           "verdict", "per_prompt", "run_sample", "sample_facts", "sample_figure", "sample_mean", "worked",
           "erasure_figure", "attribution_figure", "FIGURES", "RUNS"]


def __getattr__(name: str):
    """:data:`RUNS`, imported when first used (:func:`depthutils.book.realruns.run_of`): it brings chapter 4's
    erasure, which a page of chapter 5 does not otherwise load."""
    if name == "RUNS":
        from depthutils.book.claims.context.runs import RUNS

        return RUNS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
