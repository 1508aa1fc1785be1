"""What chapters 4 and 5's samples drop (depthutils.book.claims.context): every prompt drawn counted once (graded,
dropped for completeness, dropped because no position matters), the retry at twice the budget, and the bounds with
the dropped prompts at either end of the scale, against an independent numpy bootstrap and the grading rule written
out."""
from __future__ import annotations

import numpy as np
import pytest

from depthutils.analysis import known_facts as kf
from depthutils.book.claim_table import CLAIMS, COMPLETENESS_LIMIT, OUTCOMES
from depthutils.book.claims import context as cc
from depthutils.book.claims.context import runs
from depthutils.measures.integrated_gradients import IGResult

L = 8  # the fake model's layers: layer 0's output sits at 1/8
REAL = kf.FactPrompts({}, [])


def _ig(rel, share=0.0, stopped="budget", layers=L):
    """An integrated-gradients result as the claim reads it (an instance, not a subclass: a subclass of a Result
    would register itself in place of IGResult for every later load)."""
    r = IGResult.__new__(IGResult)
    r.attribution = np.zeros((layers, 6))
    r.meta = {"model": "test-model", "params": {"prompt": "2 + 3 = ", "rule": "adaptive", "stopped": stopped}}
    r.facts = lambda: {"deepest_rel": rel, "completeness": share}
    return r


def _named(kind, results):
    return {kind if i == 0 else f"{kind}_{i + 1}": r for i, r in enumerate(results)}


def _retried(r, first=0.3):
    r.meta["retried"] = {"first_completeness": first}
    return r


def _numpy_mean_interval(values, n_boot=1000, seed=0, level=0.95):
    v = np.asarray(values, float)
    rng = np.random.default_rng(seed)
    means = np.array([v[rng.integers(0, len(v), len(v))].mean() for _ in range(n_boot)])
    lo, hi = np.percentile(means, [50 * (1 - level), 50 * (1 + level)])
    return v.mean(), lo, hi


def _grade(mean, lo, hi):
    """The context claim's rule written out (smaller favours it; the interval widened to hold the point as printed)."""
    c = CLAIMS["context"]
    lo, hi = min(lo, round(mean, 2)), max(hi, round(mean, 2))
    return "not shown" if lo > c.against.value else "shown" if hi <= c.shown.value else "mixed"


def test_every_prompt_drawn_is_graded_or_dropped_for_one_reason():
    gap = 2 * COMPLETENESS_LIMIT
    results = _named("arithmetic", [
        _ig(0.5), _ig(0.6), _ig(0.7),                       # graded
        _ig(0.9, gap), _retried(_ig(0.8, gap)),             # dropped for completeness (one after its retry)
        _ig(None), _ig(None, stopped="tol"),                # no context position ever matters
        _retried(_ig(0.4)), _retried(_ig(None)),            # retried: recovered, and retried into "no position"
    ])
    d = cc.KindSample("arithmetic", results).drops()
    assert (d.drawn, d.graded, d.completeness, d.no_position, d.retried, d.recovered) == (9, 4, 2, 3, 3, 1)
    assert d.drawn == d.graded + d.completeness + d.no_position
    # the verdict carries the same counts per kind, zeros for a kind tried and never drawn, and the table shows them
    facts = kf.FactPrompts({}, kf.candidates(tried=1, seed=3, n_arithmetic=6, operands=2, chain_operands=3))
    v = cc.verdict(results, "the |attribution|", facts=facts)
    assert v.drops["arithmetic"] == d and v.drops["two-hop"] == cc.Drops(0, 0, 0, 0, 0, 0)
    assert "| m | arithmetic | 9 | 4 | 2 | 3 | 3: 1 |" in cc.drop_table({"m": v}).data
    # a prompt dropped for completeness says it was retried and why the rule stopped
    why = cc.per_prompt(results["arithmetic_5"])[1]
    assert why.startswith(f"completeness gap {gap:.2f}") and "after a retry at twice the budget" in why
    assert "its budget of evaluations ran out" in why


def test_a_prompt_that_misses_completeness_is_retried_once_and_the_retry_kept():
    gap = 2 * COMPLETENESS_LIMIT
    first = {"arithmetic": _ig(0.9, gap), "arithmetic_2": _ig(0.5), "arithmetic_3": _ig(None),
             "arithmetic_4": _ig(0.9, 3 * gap)}
    second = {"arithmetic": _ig(0.4), "arithmetic_4": _ig(0.9, 2 * gap)}
    asked = []

    def retry(name):
        asked.append(name)
        return second[name]

    out = cc.run_sample({n: n for n in first}, lambda n: first[n], retry=retry, enough=3)
    assert asked == ["arithmetic", "arithmetic_4"]          # completeness only: not the prompt no position matters in
    assert out["arithmetic"] is second["arithmetic"] and out["arithmetic"].meta["retried"] == {"first_completeness": gap}
    assert out["arithmetic_4"].meta["retried"] == {"first_completeness": 3 * gap}
    assert out["arithmetic_3"] is first["arithmetic_3"] and "retried" not in out["arithmetic_3"].meta
    d = cc.KindSample("arithmetic", out).drops()
    assert (d.graded, d.completeness, d.no_position, d.retried, d.recovered) == (2, 1, 1, 2, 1)
    # without a retry the same prompts are dropped as they came, and nothing is asked twice
    fresh = {n: _ig(0.9, gap) if n == "arithmetic" else r for n, r in first.items()}
    plain = cc.run_sample({n: n for n in fresh}, lambda n: fresh[n], enough=3)
    assert cc.KindSample("arithmetic", plain).drops().retried == 0 and cc.per_prompt(plain["arithmetic"])[1]


def test_twice_the_budget_doubles_what_the_rule_can_spend():
    assert runs.twice(runs.IG_RULE) == {**runs.IG_RULE, "budget": 2 * runs.IG_RULE["budget"],
                                        "max_rounds": 2 * runs.IG_RULE["max_rounds"]}
    assert runs.twice({"rule": "riemann", "steps": 64}) == {"rule": "riemann", "steps": 128}


def test_the_retry_spends_twice_the_budget_of_integrated_gradients(tiny, prompts):
    import depthutils as du

    model, _ = tiny("llama")
    rule = dict(rule="adaptive", tol=1e-12, budget=17, max_rounds=4)  # a target no budget reaches: the budget binds
    first = du.integrated_gradients(model, prompts[0], **rule, progress_bar=False)
    again = du.integrated_gradients(model, prompts[0], **runs.twice(rule), progress_bar=False)
    assert first.meta["params"]["stopped"] == "budget" and first.evaluations == 17 * model.n_layers
    assert again.meta["params"]["budget"] == 34 and again.meta["params"]["max_rounds"] == 8
    assert 17 * model.n_layers < again.evaluations <= 34 * model.n_layers


def test_the_real_model_run_retries_at_twice_its_budget(monkeypatch):
    gap = 2 * COMPLETENESS_LIMIT
    calls = []

    def fake(lm, prompt, **options):
        calls.append((prompt, options["budget"], options["max_rounds"]))
        return _ig(0.5) if options["budget"] > runs.IG_RULE["budget"] or prompt != "p0" else _ig(0.9, gap)

    monkeypatch.setattr(runs, "integrated_gradients", fake)
    monkeypatch.setattr(runs, "_drawn", lambda lm, sample: kf.FactPrompts({"arithmetic": "p0", "arithmetic_2": "p1"}, []))
    samples, _ = runs.RUNS["05"].measure(None, sample=1)
    b, r = runs.IG_RULE["budget"], runs.IG_RULE["max_rounds"]
    assert calls == [("p0", b, r), ("p0", 2 * b, 2 * r)]  # retried, recovered: the second candidate is not needed
    assert samples["arithmetic"].drops() == cc.Drops(1, 1, 0, 0, 1, 1)


def _grade_bounds(values, dropped):
    """The bounds written out: the values with every dropped prompt at 1/L, then at 1, each graded."""
    out = []
    for end in (round(1 / L, 2), 1.0):
        mean, lo, hi = _numpy_mean_interval(list(values) + [end] * dropped)
        out.append((mean, lo, hi, _grade(mean, lo, hi)))
    return out


@pytest.mark.parametrize("values, dropped, expected", [
    ([0.3, 0.35, 0.3, 0.25, 0.3, 0.35, 0.3, 0.25, 0.3, 0.35], 1, ("shown", "shown", "shown")),  # one drop, far below
    ([0.5, 0.55, 0.6, 0.55, 0.5, 0.55, 0.6, 0.55, 0.5, 0.55], 4, ("shown", "shown", "mixed")),      # drops can move it
    ([0.9, 0.95, 0.9, 1.0, 0.95, 0.9, 0.95, 0.9, 1.0, 0.95], 3, ("not shown", "mixed", "not shown")),
])
def test_the_bounds_count_the_dropped_prompts_at_either_end_of_the_scale(values, dropped, expected):
    results = _named("arithmetic", [_ig(v) for v in values] + [_ig(None)] * dropped)
    sample = cc.KindSample("arithmetic", results)
    assert cc.extremes(results["arithmetic"]) == (round(1 / L, 2), 1.0)
    b = sample.bounds()
    for got, want in zip((b["favourable"], b["unfavourable"]), _grade_bounds(values, dropped)):
        assert got[:3] == pytest.approx(want[:3], abs=1e-12) and got[3] == want[3]
    v = cc.verdict(results, "the |attribution|", facts=REAL)
    assert (v.outcome, b["favourable"][3], b["unfavourable"][3]) == expected
    assert v.bounds["arithmetic"] == expected and v.either == expected[1:]
    assert f", {dropped} dropped (at either end of the scale: {expected[1]}, {expected[2]})" in v.value
    changes = len(set(expected)) > 1
    assert any(("could change its grade" if changes else "cannot change its grade") in n for n in v.notes), v.notes


def test_any_depths_of_the_dropped_prompts_grade_between_the_bounds():
    """The mean and both ends of the percentile bootstrap interval rise with each value, so every placement of the
    dropped prompts between the ends of the scale grades between the two bounds."""
    rng = np.random.default_rng(5)
    order = {g: i for i, g in enumerate(OUTCOMES)}
    for _ in range(30):
        values = list(rng.uniform(0.4, 0.9, 10).round(2))
        dropped = int(rng.integers(1, 6))
        b = cc.KindSample("arithmetic", _named("arithmetic", [_ig(v) for v in values] + [_ig(None)] * dropped)).bounds()
        lo_g, hi_g = order[b["favourable"][3]], order[b["unfavourable"][3]]
        for _ in range(10):
            placed = rng.uniform(round(1 / L, 2), 1.0, dropped).round(2)
            mean, lo, hi = _numpy_mean_interval(values + list(placed))
            assert b["favourable"][1] <= lo + 1e-12 and hi <= b["unfavourable"][2] + 1e-12
            assert lo_g <= order[_grade(mean, lo, hi)] <= hi_g


def test_a_kind_with_too_few_prompts_stays_untested_at_both_ends():
    results = _named("arithmetic", [_ig(0.5)] * 5 + [_ig(None)] * 3)  # 8 prompts in all, fewer than MIN_PROMPTS
    b = cc.KindSample("arithmetic", results).bounds()
    assert b["favourable"][3] == b["unfavourable"][3] == "not tested"
    assert cc.verdict(results, "the |attribution|", facts=REAL).bounds["arithmetic"] == ("not tested",) * 3
