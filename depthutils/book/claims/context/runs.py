"""Chapters 4 and 5 on the named real models (:data:`RUNS`, which :func:`depthutils.book.realruns.run_of` collects):
a sample of the prompts each model answers (the fact check, :func:`facts_for`), erased or attributed prompt by
prompt, graded per kind."""
from __future__ import annotations

from depthutils import data
from depthutils.analysis.known_facts import CHAIN_OPERANDS, FACT_CHECK_DTYPE, KINDS, SAMPLE_CANDIDATES, prompts_for
from depthutils.book.claim_table import COMPLETENESS_LIMIT
from depthutils.book.claims.context.figures import sample_figure
from depthutils.book.claims.context.sample import MIN_PROMPTS, by_kind, run_sample, verdict
from depthutils.book.claims.run import Run
from depthutils.measures.integrated_gradients import integrated_gradients
from depthutils.measures.residual_erasure import residual_erasure, residual_means
from depthutils.models.real.catalog import cache_root

__all__ = ["FACT_CHECK_DTYPE", "SAMPLE", "DRAWN", "SUMS_TRIED", "FACTS", "IG_RULE", "facts_for", "twice", "RUNS"]


#: chapters 4 and 5 on a real model grade a sample: the first ``SAMPLE`` counted prompts of each kind the model
#: answers (the fewest the verdict grades, ``claims.context.MIN_PROMPTS``: each prompt costs seconds per chapter),
#: from up to twice as many of them, so that a prompt that is not counted (chapter 5: its layer sums miss
#: completeness) does not end its kind: P1's own, 59 sums of two one-digit numbers (the sums small models solve;
#: SmolLM2 answered 25 of 42 distinct ones), 60 sums of three (their own kind, beside the sums of two: SmolLM2
#: answered 12 of 59), the book's well-known two-hop facts and 39 MQuAKE compositions
#: (:func:`depthutils.analysis.known_facts.prompts_for`). A chapter's ``real_sample`` parameter sets another size.
SAMPLE = MIN_PROMPTS
#: the candidates drawn per counted prompt of the sample
DRAWN = 2
SUMS_TRIED = 60
FACTS = dict(seed=123, **{**SAMPLE_CANDIDATES, "tried_arithmetic": SUMS_TRIED}, chain_operands=CHAIN_OPERANDS)
#: chapter 5's sample: the adaptive rule (:func:`depthutils.measures.quadrature.adaptive`) until its error bound, the
#: completeness residual included, is within the completeness limit the grading applies (``tol``: a share of the
#: largest |attribution|), within this many evaluations per layer on average and this many rounds. The paths of both
#: real models have steps far narrower than P1's spacing of 1/256: on SmolLM2's sums, in its lower layers near α ≈
#: 0.16–0.25 (f rises within about 0.002 of α, the largest share of df/dα there at position 0, the start token), in
#: its upper layers in the last third of the path. Two prompts of each kind (float32, 2 cores, 64 rows a pass),
#: against this rule with an error target of 0.01: P1's left Riemann sum with K = 256 missed completeness by
#: 0.05–0.61 of f(x) − f(b) on SmolLM2 (all six prompts over the limit) and by 0–0.055 on Gemma 3 270M, in 68–106 s
#: and 73–86 s a prompt; the rule at 0.01 by 0–0.007 in 22–47 s (SmolLM2) and 11–17 s (Gemma); at this target by
#: 0.006–0.038 in 16–27 s and 8–13 s, its attributions within 0.012 (SmolLM2) and 0.003 (Gemma) of the largest
#: |attribution| of the rule at 0.01, and the graded depth the same on all twelve prompts under all three rules. On 2
#: of SmolLM2's first 11 sums the rule at 0.01 spent its budget halfway through resolving a step (completeness gaps
#: 0.16 and 0.46: not counted), where at this target it had stopped before; a reference at 0.003 (128–155 evaluations
#: per layer, gap ≤ 0.001) agreed with this target's attributions within 0.007 of the largest and on the graded depth
#: (0.93, 0.77). Products in bfloat16 (float32 accumulation) are not used: they move SmolLM2's steps, and on layer 7
#: of a sum the trapezoid on 257 points missed f(x) − f(b) by 43% where float32's missed by 5%
#:
#: The error target is the completeness limit itself, so the two are one number but not one test. The rule stops
#: when every layer's bound (its panels' Simpson disagreement plus its completeness residual) is within ``tol`` of
#: the largest |attribution|; the grading drops a prompt whose largest residual exceeds the limit of the largest
#: |f(x) − f(b_l)|. A prompt the rule finished is then dropped only where its largest |attribution| (BOS apart) exceeds its
#: largest |f(x) − f(b_l)| (attributions of opposite signs), so a drop is in practice a prompt whose budget or
#: rounds ran out: the sharpest integrands, not a random few. Hence the retry at twice the budget (:func:`twice`)
#: and the verdict's bounds with the still dropped prompts at either end of the scale
#: (:meth:`~depthutils.book.claims.context.KindSample.bounds`). A lower target would not give a drop another
#: meaning: a prompt past the limit has missed every target at or below it too (where its largest |attribution| is
#: at most its largest |f(x) − f(b_l)|), so it still ran out; the lower target would only spend more evaluations on
#: prompts already within the limit.
IG_RULE = dict(rule="adaptive", tol=COMPLETENESS_LIMIT, budget=96, max_rounds=40)


def twice(rule: dict) -> dict:
    """Integrated gradients' options at twice the budget: a fixed rule's ``steps``, or the adaptive rule's ``budget``
    of evaluations and its ``max_rounds`` (it stops at whichever runs out first, so doubling one alone can buy
    nothing)."""
    if rule.get("rule") == "adaptive":
        return {**rule, "budget": 2 * rule["budget"], "max_rounds": 2 * rule["max_rounds"]}
    return {**rule, "steps": 2 * rule.get("steps", 256)}


def _by_kind(results: dict) -> dict:
    """``{kind's label: KindSample}``: a section shows one figure and one summary per kind of prompt."""
    return {KINDS[k]: sample for k, sample in by_kind(results).items()}


def facts_for(lm, per_kind: int = DRAWN * SAMPLE):
    """The prompts on ``lm`` that the model answers, up to ``per_kind`` of each kind; the check is stored beside the
    model cache (``$XDG_CACHE_HOME/depthutils/facts``), so chapter 5 reads chapter 4's
    (:func:`depthutils.analysis.known_facts.cached_check`)."""
    return prompts_for(lm, n=per_kind, n_arithmetic=per_kind, **FACTS, cache_dir=cache_root().parent / "facts")


def _drawn(lm, sample) -> object:
    """The sample's candidates: up to :data:`DRAWN` times ``sample`` prompts of each kind."""
    return facts_for(lm, DRAWN * sample)


def _erasure(lm, sample: int = SAMPLE):
    facts = _drawn(lm, sample)
    base = residual_means(lm, data.load("gsm8k", 10))
    return _by_kind(run_sample(facts.prompts, lambda p: residual_erasure(lm, p, baseline=base, progress_bar=False),
                               "erasure", enough=sample)), facts


def _ig(lm, sample: int = SAMPLE):
    facts = _drawn(lm, sample)
    return _by_kind(run_sample(facts.prompts, lambda p: integrated_gradients(lm, p, **IG_RULE, progress_bar=False),
                               "integrated gradients", enough=sample,
                               retry=lambda p: integrated_gradients(lm, p, **twice(IG_RULE), progress_bar=False))), facts


def _words(sample: int) -> str:
    return f"the first {sample} counted of up to {DRAWN * sample} prompts per kind that the model answers"


RUNS: dict[str, Run] = {
    "04": Run(lambda sample: f"{_words(sample)} (two-hop: and knows both single hops of), "
              f"from P1's two, {SUMS_TRIED - 1} sums of two one-digit numbers, {SUMS_TRIED} sums of {CHAIN_OPERANDS} (a "
              "kind of their own), the book's well-known two-hop facts and 39 MQuAKE compositions; the baseline from 10 "
              "GSM8K problems",
              _erasure,
              lambda rs, f: verdict(rs, "erasing the residual", facts=f),
              lambda s: sample_figure(s, "erasing a context position still moves the answer"),
              "Per prompt (rows), the relative depth of the deepest residual at which erasing a context position "
              "still moves the answer by more than 10% of the largest effect (P1 Fig. 6b's reading, one dot per "
              "prompt), the mean over the kind's prompts with its 95% bootstrap interval (line and band), and the "
              "claim's thresholds (dashed: shown at or below; dotted: not shown above), on this model. Position 0 "
              "(the BOS, an attention sink) is never erased here, while NDIF's reproduction notebook of P1 "
              "erases every position, BOS included.",
              dtype=FACT_CHECK_DTYPE, chapter="04", options={"sample": SAMPLE}),
    "05": Run(lambda sample: f"{_words(sample)}, chosen as in chapter 4; the adaptive rule "
              f"(error {IG_RULE['tol']} of the largest |attribution|, at most {IG_RULE['budget']} evaluations per "
              f"layer), a prompt whose layer sums miss f(x) − f(b) by more than {COMPLETENESS_LIMIT:.0%} retried once at twice "
              "the budget, and not counted if it still misses", _ig,
              lambda rs, f: verdict(rs, "the |attribution|", facts=f),
              lambda s: sample_figure(s, "a context position carries a tenth of the |attribution|"),
              "Per prompt (rows), the relative depth of the deepest layer whose output at a context position still "
              "carries more than 10% of the largest |integrated-gradients attribution| of the answer (P1 Fig. 6a's "
              "reading, one dot per prompt, the adaptive rule; hollow: not counted, its layer sums missing completeness), "
              "the mean over the counted prompts with its 95% bootstrap "
              "interval (line and band), and the claim's thresholds (dashed: shown at or below; dotted: not shown "
              "above), on this model.", dtype=FACT_CHECK_DTYPE, chapter="05", options={"sample": SAMPLE}),
}

