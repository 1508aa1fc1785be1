"""Chapters 4 and 5's claim on a sample of prompts (depthutils.book.claims.context): the mean over a kind's prompts
and its bootstrap interval against an independent numpy computation, every outcome the verdict can take, and the
book's well-known two-hop facts (data/prompts/two_hop_facts.json) well-formed."""
from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest

from depthutils.analysis import known_facts as kf
from depthutils.book import claims
from depthutils.book.claim_table import CLAIMS, COMPLETENESS_LIMIT
from depthutils.book.claims import context as cc


class _Prompt:
    """A graded prompt as the claim reads it: its facts, and the meta a figure reads."""

    def __init__(self, rel, text="2 + 3 = "):
        self.rel, self.meta = rel, {"model": "test-model", "params": {"prompt": text}}

    def facts(self):
        return {"deepest_rel": self.rel}


def _sample(kind: str, values) -> dict:
    return {kind if i == 0 else f"{kind}_{i + 1}": _Prompt(v, f"prompt {i}") for i, v in enumerate(values)}


REAL = kf.FactPrompts({}, [])  # a model's check (its sentences read the empty candidate list)


def _numpy_interval(values, n_boot=1000, seed=0, level=0.95):
    """The percentile bootstrap of the mean over prompts, written out: n prompts drawn with replacement n_boot
    times from numpy's seeded generator, the mean of each resample, and the two percentiles."""
    v = np.asarray(values, float)
    rng = np.random.default_rng(seed)
    means = np.array([v[rng.integers(0, len(v), len(v))].mean() for _ in range(n_boot)])
    return np.percentile(means, [50 * (1 - level), 50 * (1 + level)])


def test_the_mean_and_its_interval_match_an_independent_bootstrap():
    rng = np.random.default_rng(7)
    for n in (2, 10, 23):
        values = rng.uniform(0.2, 0.9, n).round(2)
        mean, lo, hi = cc.sample_mean(values)
        assert mean == pytest.approx(values.mean(), abs=1e-12)
        assert (lo, hi) == pytest.approx(tuple(_numpy_interval(values)), abs=1e-12)
        assert lo <= mean <= hi
    # and the interval is the mean's: on many prompts it matches the normal approximation mean ± 1.96 s/√n
    values = rng.normal(0.5, 0.1, 400)
    mean, lo, hi = cc.sample_mean(values)
    half = 1.96 * values.std(ddof=1) / np.sqrt(len(values))
    assert lo == pytest.approx(mean - half, abs=0.2 * half) and hi == pytest.approx(mean + half, abs=0.2 * half)
    # one prompt: no interval
    assert cc.sample_mean([0.4]) == (0.4, None, None)
    with pytest.raises(ValueError):
        cc.sample_mean([])


def test_the_verdict_rests_on_each_kinds_mean_and_interval():
    arith = [0.3, 0.35, 0.4, 0.45, 0.5, 0.3, 0.4, 0.35, 0.45, 0.5, 0.4, 0.3]
    hop = [0.4, 0.5, 0.45, 0.55, 0.5, 0.4, 0.45, 0.5, 0.55, 0.5]
    v = claims.context.verdict({**_sample("arithmetic", arith), **_sample("multihop", hop)}, "erasing the residual", facts=REAL)
    assert v.outcome == "shown", v.numbers
    for label, values in (("arithmetic", arith), ("two-hop", hop)):
        lo, hi = _numpy_interval(values)
        assert f"{label}: mean {np.mean(values):.2f} [{lo:.2f}, {hi:.2f}] over {len(values)} prompts" in v.value
    # one kind straddles the shown threshold: mixed
    straddle = [0.45, 0.55, 0.65, 0.75, 0.5, 0.6, 0.7, 0.55, 0.65, 0.6]
    lo, hi = _numpy_interval(straddle)
    assert lo < CLAIMS["context"].shown.value < hi <= CLAIMS["context"].against.value
    v = claims.context.verdict({**_sample("arithmetic", arith), **_sample("multihop", straddle)}, "the |attribution|",
                       facts=REAL)
    assert v.outcome == "mixed" and "two-hop" in v.value and "(mixed)" in v.numbers
    # one kind wholly past the against threshold: not shown, whatever the other kind says
    late = [0.85, 0.9, 0.95, 0.9, 0.85, 0.9, 1.0, 0.95, 0.9, 0.85]
    v = claims.context.verdict({**_sample("arithmetic", late), **_sample("multihop", hop)}, "erasing the residual", facts=REAL)
    assert v.outcome == "not shown"
    # the same numbers on too few prompts of a real model: that kind is not tested, with the count
    v = claims.context.verdict({**_sample("arithmetic", late[:4]), **_sample("multihop", hop)}, "erasing the residual",
                       facts=REAL)
    assert v.outcome == "shown" and "arithmetic: not tested (4 prompts counted)" in v.value
    assert any(f"fewer than the {cc.MIN_PROMPTS}" in n for n in v.notes)
    v = claims.context.verdict({**_sample("arithmetic", late[:4]), **_sample("multihop", hop[:9])}, "erasing the residual",
                       facts=REAL)
    assert v.outcome == "not tested"


def test_one_prompt_per_kind_is_graded_on_its_point_only_without_a_check():
    # results alone (no fact check) are graded however many they are, one prompt on its point
    v = claims.context.verdict({"arithmetic": _Prompt(0.5), "multihop": _Prompt(0.7)}, "erasing the residual")
    assert v.outcome == "mixed"
    assert "arithmetic: 0.50 (one prompt: no interval)" in v.value and "two-hop: 0.70 (one prompt" in v.value
    assert claims.context.verdict({"arithmetic": _Prompt(0.5)}, "erasing the residual").outcome == "shown"
    # with the check that chose them (any model's, the embedded one's too), one prompt per kind is not tested
    v = claims.context.verdict({"arithmetic": _Prompt(0.5), "multihop": _Prompt(0.7)}, "erasing the residual", facts=REAL)
    assert v.outcome == "not tested" and "arithmetic: not tested (1 prompt counted)" in v.value


def test_sums_of_three_numbers_are_a_kind_of_their_own_beside_the_sums_of_two():
    cands = kf.candidates(tried=1, seed=3, n_arithmetic=6, operands=2, chain_operands=3)
    pairs = [c for c in cands if c.kind == "arithmetic" and c.source == "generated"]
    chains = [c for c in cands if c.kind == "chains"]
    assert len(pairs) == 5 and all(c.context.count("+") == 1 for c in pairs)
    assert len(chains) == 6 and all(c.context.count("+") == 2 for c in chains)
    assert all(int(c.forms[0]) == sum(int(x) for x in c.context.rstrip("= ").split(" + ")) for c in chains)
    assert not [c for c in kf.candidates(tried=1, seed=3, n_arithmetic=6, operands=2) if c.kind == "chains"]
    facts = kf.FactPrompts({}, cands)
    assert facts.kinds() == ["arithmetic", "chains", "multihop"]
    n = cc.MIN_PROMPTS
    v = claims.context.verdict({**_sample("arithmetic", [0.4] * n), **_sample("chains", [0.5] * (n - 1))},
                       "erasing the residual", facts=facts)
    assert "arithmetic: mean 0.40" in v.value and "sums of three or more numbers: not tested (9 prompts counted)" in v.value
    assert "two-hop: not tested (0 prompts counted)" in v.value and v.outcome == "shown"


def test_prompts_that_cannot_inform_are_not_counted():
    from depthutils.measures.integrated_gradients import IGResult

    def _broken(rel, share):
        """An IG result whose layer sums miss completeness (an instance, not a subclass: a subclass of a Result
        would register itself in place of IGResult for every later load)."""
        r = IGResult.__new__(IGResult)
        r.meta, r.facts = {}, lambda: {"deepest_rel": rel, "completeness": share}
        return r

    values = [0.4] * 10
    results = {**_sample("arithmetic", values), "arithmetic_11": _Prompt(None),
               "arithmetic_12": _broken(0.9, 2 * COMPLETENESS_LIMIT)}
    sample = cc.KindSample("arithmetic", results)
    assert sample.stats()["n"] == 10 and set(sample.stats()["dropped"]) == {"arithmetic_11", "arithmetic_12"}
    v = claims.context.verdict(results, "the |attribution|", facts=REAL)
    assert "over 10 prompts" in v.value
    assert any("2 prompts not informative" in n and f"arithmetic_12, completeness gap {2 * COMPLETENESS_LIMIT:.2f}"
               in n for n in v.notes), v.notes
    fig = cc.sample_figure(sample)
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() == "prompt" and "not counted: 2" in fig.get_suptitle()
    assert len(ax.get_yticklabels()) == 12  # every prompt measured; the two not counted drawn hollow (one defined)
    assert [len(coll.get_offsets()) for coll in ax.collections[:2]] == [10, 1]
    plt.close(fig)


def test_the_well_known_two_hop_facts_are_well_formed():
    with open(kf.CURATED, encoding="utf-8") as f:
        facts = json.load(f)["facts"]
    assert len(facts) >= 30
    prompts = [x["prompt"] for x in facts]
    assert len(set(prompts)) == len(prompts)
    for x in facts:
        assert set(x) == {"prompt", "answer", "aliases", "hops"}, x
        assert len(x["hops"]) == 2 and all(len(h) == 3 and h[0] and h[1] for h in x["hops"]), x["prompt"]
        (cloze1, bridge, aliases1), (cloze2, answer2, aliases2) = x["hops"]
        assert x["answer"] == answer2 and x["aliases"] == aliases2, x["prompt"]  # the composition's answer is hop 2's
        assert bridge in cloze2, x["prompt"]                                     # hop 2 asks about hop 1's answer
        assert bridge.lower() not in x["prompt"].lower(), x["prompt"]            # the composition does not name it
        assert x["answer"].lower() not in x["prompt"].lower(), x["prompt"]
        assert not x["prompt"].endswith(" ") and not cloze1.endswith(" ") and not cloze2.endswith(" ")
    cands = kf.curated_pairs()
    assert [c.context for c in cands] == prompts
    assert all(c.kind == "multihop" and len(c.hops) == 2 and c.forms[0] == c.hops[1].forms[0] for c in cands)
    tried = kf.candidates(tried=5, seed=0, n_arithmetic=3, operands=2, curated=True)
    contexts = [c.context for c in tried]
    assert len(set(contexts)) == len(contexts)
    assert [c.source for c in tried if c.kind == "multihop"][:2] == ["P1", "well-known fact"]
    assert all(c.context.count("+") == 1 for c in tried if c.kind == "arithmetic" and c.source == "generated")


def test_a_sample_stops_a_kind_that_can_no_longer_be_graded():
    """run_sample measures a kind's prompts in order and stops once too many are not counted to reach MIN_PROMPTS;
    the verdict says how many were not measured."""
    n = cc.MIN_PROMPTS
    rels = {**_sample("arithmetic", [None] * 3 + [0.4] * n), **_sample("multihop", [0.5] * n)}
    prompts = {name: name for name in rels}
    measured = cc.run_sample(prompts, lambda name: rels[name])
    assert list(measured) == list(rels)  # three misses of n + 3: the rest can still make n counted
    rels["arithmetic_4"] = _Prompt(None)  # a fourth miss: n - 1 prompts are left, too few
    measured = cc.run_sample(prompts, lambda name: rels[name])
    assert [k for k in measured if k.startswith("arithmetic")] == ["arithmetic", "arithmetic_2", "arithmetic_3",
                                                                   "arithmetic_4"]
    assert sum(k.startswith("multihop") for k in measured) == n
    facts = kf.FactPrompts(dict.fromkeys(rels), [])
    v = claims.context.verdict(measured, "erasing the residual", facts=facts)
    assert "arithmetic: not tested (0 prompts counted)" in v.value and "two-hop: mean 0.50" in v.value
    assert any(f"{n - 1} of its {n + 3} prompts were not measured" in x for x in v.notes), v.notes
    few = {f"multihop_{i + 1}" if i else "multihop": f"p{i}" for i in range(n - 1)}
    assert cc.run_sample(few, lambda p: pytest.fail("a kind that cannot reach the minimum is not measured")) == {}


def test_a_sample_drawn_larger_stops_a_kind_once_it_has_enough_counted():
    """With ``enough``, a prompt that is not counted is replaced by the next one, and no prompt past the
    ``enough``-th counted one is measured."""
    n = cc.MIN_PROMPTS
    rels = {**_sample("arithmetic", [0.4, None, 0.4, None] + [0.4] * (2 * n)), **_sample("multihop", [0.5] * (2 * n))}
    measured = cc.run_sample({name: name for name in rels}, lambda name: rels[name], enough=n)
    arith = [k for k in measured if k.startswith("arithmetic")]
    assert len(arith) == n + 2 and arith == [k for k in rels if k.startswith("arithmetic")][:n + 2]
    assert sum(k.startswith("multihop") for k in measured) == n
    v = claims.context.verdict(measured, "erasing the residual", facts=kf.FactPrompts(dict.fromkeys(rels), []))
    assert "arithmetic: mean 0.40" in v.value and f"over {n} prompts" in v.value
    assert any(f"{n + 2} of its {2 * n + 4} prompts were not measured" in x for x in v.notes), v.notes
    small = cc.run_sample({name: name for name in rels}, lambda name: rels[name], enough=1)  # a test run's sample
    assert list(small) == ["arithmetic", "multihop"]
