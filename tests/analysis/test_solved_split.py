"""The reviewer's split (neither / only the deeper / only the shallower / both) against a plain-numpy oracle built
from two independent depth-score runs, and its verdict's four outcomes."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import depthutils as du  # noqa: E402
from depthutils.analysis import solved_split as ss  # noqa: E402
from depthutils.analysis.solved_split import GROUPS, MIN_GROUP, SolvedSplit, heldout_only, solved_split, split  # noqa: E402,E501
from depthutils.book.reviews import only_deeper as review  # noqa: E402
from depthutils.core.errors import DepthError  # noqa: E402
from depthutils.core.results import Result  # noqa: E402
from depthutils.ladder.tasks import heldout_check  # noqa: E402
from depthutils.measures.depth_score import draw  # noqa: E402
from depthutils.measures.depth_score_result import DepthScoreResult  # noqa: E402

#: held-out problems only, so each model's own depth score draws exactly the split's problems
TASKS = {"addition": (3,), "multihop_heldout": (2, 3)}
N, SEED = 3, 7


@pytest.fixture(scope="module")
def pair():
    """ladder-4 and ladder-8 each measured on its own (the depth score with the same tasks, n and seed), and the
    split that draws the problems once and gives them to both."""
    shallow, deep = du.load_model("ladder-4"), du.load_model("ladder-8")
    alone = [du.depth_score(m, TASKS, n=N, seed=SEED, progress_bar=False) for m in (shallow, deep)]
    return alone, solved_split(shallow, deep, TASKS, n=N, seed=SEED, progress_bar=False)


def _oracle_groups(s_ok, d_ok) -> np.ndarray:
    out = np.empty(len(s_ok), object)
    out[~s_ok & ~d_ok], out[~s_ok & d_ok], out[s_ok & ~d_ok], out[s_ok & d_ok] = \
        "neither", "only_deeper", "only_shallower", "both"
    return out


def _oracle_interval(scores, groups, n_boot=1000, seed=0, level=0.95):
    """Percentile bootstrap of mean(only_deeper) − mean(both) over the problems given, plain numpy."""
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        i = rng.integers(0, len(scores), len(scores))
        a, b = scores[i][groups[i] == "only_deeper"], scores[i][groups[i] == "both"]
        if a.size and b.size:
            draws.append(a.mean() - b.mean())
    return tuple(np.percentile(draws, [50 * (1 - level), 50 * (1 + level)])) if draws else None


def test_the_split_matches_a_numpy_oracle_on_the_same_problems(pair):
    (shallow, deep), got = pair
    # both models saw the same problems: each one's own run, with the same tasks, n and seed, gives the split's
    assert list(shallow.prompt_tasks) == list(deep.prompt_tasks) == list(got.prompt_tasks)
    assert list(shallow.prompt_levels) == list(deep.prompt_levels) == list(got.prompt_levels)
    s_ok, d_ok = shallow.prompt_correct == 1, deep.prompt_correct == 1
    np.testing.assert_array_equal(got.shallow_correct == 1, s_ok)
    np.testing.assert_array_equal(got.deep_correct == 1, d_ok)
    L = deep.n_layers
    scores = deep.prompt_scores / (L - 1)
    np.testing.assert_allclose(got.prompt_scores, scores, atol=1e-5, equal_nan=True)
    groups = _oracle_groups(s_ok, d_ok)
    f = got.facts()
    for t in TASKS:
        assert f[f"{t}_n_by_level"] == ", ".join(f"{N} at level {lv}" for lv in TASKS[t])
        m = deep.prompt_tasks == t
        for lv in np.unique(deep.prompt_levels[m]):
            ml = m & (deep.prompt_levels == lv)
            assert got.counts(t, lv) == {g: int((groups[ml] == g).sum()) for g in GROUPS}, (t, lv)
        for g in GROUPS:
            assert f[f"{t}_n_{g}"] == int((groups[m] == g).sum())
            v = got.prompt_scores[m & (groups == g)]
            assert f[f"{t}_mean_{g}"] == (pytest.approx(v.mean(), abs=1e-3) if v.size else None)
        a, b = got.prompt_scores[m & (groups == "only_deeper")], got.prompt_scores[m & (groups == "both")]
        want = a.mean() - b.mean() if a.size and b.size else None
        assert f[f"{t}_diff"] == (None if want is None else pytest.approx(want, abs=1e-3))
    assert sum(f[f"n_{g}"] for g in GROUPS) == len(scores) == f["n"]


def _result(model, L, tasks, levels, scores, correct, seed=0) -> DepthScoreResult:
    """A depth-score result with given per-problem values (raw scores, so normalised by L − 1 in the split)."""
    params = {"seed": seed, "n_per_level": 1, "tasks": sorted(set(tasks)), "levels": {}}
    return DepthScoreResult(meta={"model": model, "n_layers": L, "seed": seed, "n": len(scores), "dataset": "synthetic",
                                  "params": params},
                            prompt_scores=np.asarray(scores, float), prompt_levels=np.asarray(levels),
                            prompt_tasks=np.asarray(tasks), prompt_correct=np.asarray(correct, float))


def _case(only_deeper, both, task="multihop", neither=(), only_shallower=(), L=16) -> SolvedSplit:
    """A split whose deeper model scores ``only_deeper``, ``both``, ... (normalised values) in each group."""
    values = [*only_deeper, *both, *neither, *only_shallower]
    s_ok = [0] * len(only_deeper) + [1] * len(both) + [0] * len(neither) + [1] * len(only_shallower)
    d_ok = [1] * len(only_deeper) + [1] * len(both) + [0] * len(neither) + [0] * len(only_shallower)
    tasks, levels = [task] * len(values), [1] * len(values)
    raw = np.asarray(values) * (L - 1)
    return split(_result("shallow", 4, tasks, levels, np.zeros(len(values)), s_ok),
                 _result("deep", L, tasks, levels, raw, d_ok))


def test_the_interval_is_the_oracles_bootstrap_and_families_are_compared_apart():
    rng = np.random.default_rng(1)
    # addition scores higher than multihop in every group: pooled, the only-deeper problems (mostly multihop) look
    # shallower; within each family they are deeper
    add_od, add_b = 0.62 + 0.02 * rng.standard_normal(3), 0.6 + 0.02 * rng.standard_normal(30)
    mh_od, mh_b = 0.32 + 0.02 * rng.standard_normal(20), 0.3 + 0.02 * rng.standard_normal(12)
    a, m = _case(add_od, add_b, "addition"), _case(mh_od, mh_b, "multihop")
    both = split(_result("shallow", 4, [*a.prompt_tasks, *m.prompt_tasks], [1] * 65, np.zeros(65),
                         [*a.shallow_correct, *m.shallow_correct]),
                 _result("deep", 16, [*a.prompt_tasks, *m.prompt_tasks], [1] * 65,
                         np.r_[a.prompt_scores, m.prompt_scores] * 15, [*a.deep_correct, *m.deep_correct]))
    f = both.facts()
    assert f["addition_diff"] > 0 and f["multihop_diff"] > 0 and f["diff"] < 0  # the reason to stratify
    groups = _oracle_groups(both.shallow_correct == 1, both.deep_correct == 1)
    for t in ("addition", "multihop"):
        keep = both.prompt_tasks == t
        want = _oracle_interval(both.prompt_scores[keep], groups[keep])
        np.testing.assert_allclose(both.difference_interval(t), want, atol=1e-9)
    np.testing.assert_allclose(both.difference_interval(), _oracle_interval(both.prompt_scores, groups), atol=1e-9)
    assert not f["addition_tested"] and f["multihop_tested"]  # 3 only-deeper addition problems: below the floor


def test_the_verdict_can_be_shown_not_shown_mixed_or_not_tested():
    rng = np.random.default_rng(0)
    noise = lambda k, sd: sd * rng.standard_normal(k)  # noqa: E731
    same = _case(0.4 + noise(15, 0.02), 0.4 + noise(15, 0.02))
    deeper = _case(0.7 + noise(15, 0.02), 0.4 + noise(15, 0.02))
    unsure = _case(0.45 + noise(12, 0.3), 0.4 + noise(12, 0.3))
    few = _case(0.7 + noise(MIN_GROUP - 1, 0.02), 0.4 + noise(30, 0.02), neither=[0.2], only_shallower=[0.3])
    assert review.verdict(same).outcome == "shown"
    assert review.verdict(deeper).outcome == "not shown"
    assert review.verdict(unsure).outcome == "mixed"
    v = review.verdict(few)
    assert v.outcome == "not tested" and f"only deep {MIN_GROUP - 1}" in v.numbers and "both 30" in v.numbers
    assert "only shallow 1" in v.numbers and "neither 1" in v.numbers
    lo, hi = unsure.difference_interval("multihop")
    assert lo < 0 < 1 / 15 < hi


def test_the_split_refuses_results_on_different_problems_and_saves(tmp_path):
    s = _result("a", 4, ["addition"] * 2, [2, 3], [1.0, 2.0], [1, 0])
    d = _result("b", 8, ["addition"] * 2, [2, 3], [3.0, 4.0], [1, 1])
    with pytest.raises(DepthError, match="same problems"):
        split(s, _result("b", 8, ["addition"] * 2, [2, 4], [3.0, 4.0], [1, 1]))
    with pytest.raises(DepthError, match="same problems"):
        split(s, _result("b", 8, ["addition"] * 2, [2, 3], [3.0, 4.0], [1, 1], seed=1))
    with pytest.raises(DepthError, match="more layers"):
        split(d, s)
    with pytest.raises(DepthError, match="accuracy=True"):
        split(s, _result("b", 8, ["addition"] * 2, [2, 3], [3.0, 4.0], [np.nan, 1]))
    with pytest.raises(DepthError, match="not one of each"):
        solved_split(s, "ladder-8")
    got = split(s, d)
    got.save(tmp_path / "split")
    back = Result.load(tmp_path / "split")
    assert isinstance(back, SolvedSplit) and back.facts() == got.facts()
    assert got.counts() == {"neither": 0, "only_deeper": 1, "only_shallower": 0, "both": 1}


def test_the_figure_labels_each_group_with_its_count(pair):
    fig = review.figure(pair[1])
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    n = pair[1].counts()
    assert len(labels) == len(GROUPS) and all(f"n = {n[g]}" in lab for g, lab in zip(GROUPS, labels))
    assert ax.get_ylabel() and ax.get_xlabel()


def test_the_split_keeps_held_out_problems_only(monkeypatch):
    # the depth score's plain multi-hop family mixes compositions the ladder was trained on with held-out ones
    mixed = draw({"multihop": (2, 3), "addition": (2, 3)}, 100, 0)
    trained = [p for by_level in mixed.values() for ps in by_level.values() for p in ps
               if not heldout_check(p.source if p.source == "addition" else "multihop", p.context)]
    assert trained and any(p.context == "0 + 0 = " for p in mixed["addition"][2])
    kept = heldout_only(mixed)
    texts = [p.context for by_level in kept.values() for ps in by_level.values() for p in ps]
    assert texts and not {p.context for p in trained} & set(texts)
    assert 2 not in kept["addition"]  # every two-operand chain is trained: the level is dropped
    assert all(heldout_check(t, p.context) for t, by_level in (("addition", kept["addition"]),
                                                                ("multihop", kept["multihop"]))
               for ps in by_level.values() for p in ps)
    with pytest.raises(DepthError, match="held-out problems only"):
        heldout_only({"math": {1: []}})
    # solved_split gives both models only held-out problems, by default the held-out families, all where fewer
    # than n exist
    seen = []
    monkeypatch.setattr(ss, "depth_score", lambda m, **kw: seen.append(kw["groups"]) or m)
    monkeypatch.setattr(ss, "split", lambda a, b: (a, b))
    solved_split(object(), object(), n=100, seed=0, tasks={"multihop": (2, 3)})
    solved_split(object(), object(), seed=0)
    assert seen[0] is seen[1] and seen[2] is seen[3]
    assert {k: len(v) for k, v in seen[0]["multihop"].items()} == {2: len(kept["multihop"][2]), 3: len(kept["multihop"][3])}
    assert {k: len(v) for k, v in seen[2]["multihop_heldout"].items()} == {2: 50, 3: 48}
    assert {k: len(v) for k, v in seen[2]["addition"].items()} == {3: 50, 4: 50, 5: 50, 6: 50}


def test_a_group_under_the_floor_is_not_tested_with_its_counts():
    v = review.verdict(_case([0.4] * 9, [0.4] * 40, "multihop_heldout", neither=[0.2] * 60, only_shallower=[0.3] * 8))
    assert v.outcome == "not tested"
    assert "neither 60, only deep 9, only shallow 8, both 40" in v.numbers and "9 only-deep and 40 both" in v.value


# ------------------------------------------------------------------------ the only-deeper group against its noise

def _tail_at_least(k: int, m: int, p: float) -> float:
    """P(X ≥ k) for X ~ Binomial(m, p), summed term by term from math.comb (independent of the module's log space)."""
    import math

    return sum(math.comb(m, j) * p ** j * (1 - p) ** (m - j) for j in range(k, m + 1))


def test_the_share_of_the_flips_and_its_exact_interval_match_a_plain_binomial():
    # textbook Clopper–Pearson values: 5 of 10, [0.1871, 0.8129]; all or none of m, closed forms
    share, lo, hi = ss.flip_share(5, 5)
    assert share == 0.5 and lo == pytest.approx(0.1871, abs=1e-4) and hi == pytest.approx(0.8129, abs=1e-4)
    assert ss.flip_share(4, 0) == pytest.approx((1.0, 0.025 ** (1 / 4), 1.0))
    assert ss.flip_share(0, 7) == pytest.approx((0.0, 0.0, 1 - 0.025 ** (1 / 7)))
    assert ss.flip_share(0, 0) == (None, None, None)
    # chapter 6's run: 16 held-out compositions only ladder-16 solves, 8 only ladder-4 solves; each end of the interval
    # leaves 2.5% in its tail, by the plain sum
    share, lo, hi = ss.flip_share(16, 8)
    assert share == pytest.approx(2 / 3)
    assert _tail_at_least(16, 24, lo) == pytest.approx(0.025, abs=1e-9)
    assert 1 - _tail_at_least(17, 24, hi) == pytest.approx(0.025, abs=1e-9)
    assert lo == pytest.approx(0.4468, abs=1e-4) and hi == pytest.approx(0.8437, abs=1e-4) and lo < 0.5
    # the facts: per family and pooled, rounded as printed
    f = _case([0.4] * 16, [0.4] * 24, "multihop_heldout", only_shallower=[0.3] * 8).facts()
    assert f["multihop_heldout_flips"] == f["flips"] == 24
    assert (f["multihop_heldout_share"], f["multihop_heldout_share_lo"], f["multihop_heldout_share_hi"]) == \
        (0.667, 0.447, 0.844)


def _power_scan(p: float, level=0.95, power=0.8) -> int:
    """The fewest flips at which the exact test tells share p from 0.5 at ``power``, by a plain scan from one flip:
    the interval's lower end lies above 0.5 exactly when P(X ≥ k | 0.5) < (1 − level) / 2."""
    m = 0
    while True:
        m += 1
        k = next((k for k in range(m + 1) if _tail_at_least(k, m, 0.5) < (1 - level) / 2), None)
        if k is not None and _tail_at_least(k, m, p) >= power:
            return m


def test_the_flips_and_problems_a_share_needs():
    from statistics import NormalDist

    assert ss.flips_needed(2 / 3) == _power_scan(2 / 3) == 72
    assert ss.flips_needed(0.75) == _power_scan(0.75)
    # all flips to the deeper model: 6, the fewest with 0.5^m below 2.5% (0.5^5 = 3.1%, 0.5^6 = 1.6%)
    assert ss.flips_needed(1.0) == 6
    assert ss.flips_needed(0.5) is None and ss.flips_needed(0.4) is None and ss.flips_needed(None) is None
    # near the normal approximation's ((z_.975·½ + z_.8·√(p(1−p))) / (p − ½))², 68.2 for p = 2/3
    z = NormalDist().inv_cdf
    approx = ((z(0.975) * 0.5 + z(0.8) * (2 / 9) ** 0.5) / (1 / 6)) ** 2
    assert approx == pytest.approx(68.2, abs=0.1) and abs(ss.flips_needed(2 / 3) - approx) < 0.1 * approx
    # chapter 6's held-out compositions: 24 flips in 98 problems, so 72 flips need 294 problems
    assert ss.problems_needed(72, 24, 98) == 294
    assert ss.problems_needed(None, 24, 98) is None and ss.problems_needed(72, 0, 98) is None


def test_the_noise_gate_leaves_a_symmetric_split_untested():
    # the same depth score in both groups, so the difference alone would be shown; the flips decide
    symmetric = _case([0.4] * 20, [0.4] * 20, "multihop_heldout", only_shallower=[0.3] * 20)
    observed = _case([0.4] * 16, [0.4] * 24, "multihop_heldout", only_shallower=[0.3] * 8)
    clear = _case([0.4] * 30, [0.4] * 24, "multihop_heldout", only_shallower=[0.3] * 5)
    for case in (symmetric, observed):
        v = review.verdict(case)
        assert v.outcome == "not tested" and "not beyond noise" in v.value, v.value
        assert "not graded" in v.numbers
    v = review.verdict(observed)
    noise = review.noise_facts(observed)
    assert not noise["multihop_heldout_beyond_noise"] and noise["multihop_heldout_flips_needed"] == 72
    assert noise["multihop_heldout_problems"] == 48 and noise["multihop_heldout_problems_needed"] == 144
    assert "0.67 [0.45, 0.84]" in v.numbers and "needs 72 flips" in v.numbers and "about 144 problems" in v.numbers
    assert "no excess" in review.verdict(symmetric).numbers
    assert review.noise_facts(clear)["multihop_heldout_beyond_noise"] and review.verdict(clear).outcome == "shown"
    assert "Clopper–Pearson" in v.criterion and "wholly above 0.5" in v.criterion
