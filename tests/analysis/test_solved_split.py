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
