"""The claims table and its criteria, on synthetic results that the earlier rules graded wrongly.

Each test builds the result a measurement would return (through its public class) and grades it
through :mod:`depthutils.book.claims`, the one place a verdict is built.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from depthutils.analysis.mapping_null import N_INITS, MappingNull
from depthutils.analysis.p2_table import reference_spread
from depthutils.analysis.study import Study
from depthutils.book import claims
from depthutils.book.claims import CLAIMS, OUTCOMES, combine, grade
from depthutils.book.claims.mapping import against_null, null_facts
from depthutils.book.grading import verdict_of
from depthutils.core.errors import DepthError
from depthutils.measures.contributions import KEYS, ContributionsResult
from depthutils.measures.cross_model_mapping import MappingResult, spearman
from depthutils.measures.curves import peaks_at_embedding
from depthutils.measures.depth_score_result import DepthScoreResult
from depthutils.measures.effective_depth import EffectiveDepthResult
from depthutils.measures.future_effects import FutureEffectsResult
from depthutils.measures.logit_lens import LogitLensResult

RNG = np.random.default_rng(0)


# ------------------------------------------------------------------------------ the table and the rule

def test_every_claim_states_its_source_and_every_threshold_its_origin():
    for c in CLAIMS.values():
        assert c.paper in ("P1", "P2") and c.where and c.sentence and c.statistic
        assert c.sentence.startswith("“") or c.sentence.startswith("in our words")
        for t in (c.shown, c.against):
            assert len(t.source) > 10, (c.key, t)  # a sentence, not a bare number


def test_the_rule_can_fail_and_says_not_tested_when_it_cannot_speak():
    assert grade(0.3, 0.2, 0.4, 0.5, 1.0) == "shown"
    assert grade(1.4, 1.3, 1.5, 0.5, 1.0) == "not shown"
    assert grade(0.8, 0.4, 1.2, 0.5, 1.0) == "mixed"
    assert grade(0.7, 0.6, 0.8, 0.5, 0.5, below=False) == "shown"
    assert grade(0.3, 0.2, 0.4, 0.5, 0.5, below=False) == "not shown"
    assert grade(None, None, None, 0.5, 1.0) == "not tested"
    assert grade(float("nan"), None, None, 0.5, 1.0) == "not tested"
    assert grade(0.6, None, None, 0.5, 1.0) == "mixed"  # no interval: the point decides
    # where both tests hold (a tolerance above the against threshold), the default decides against first
    assert grade(0.01, 0.005, 0.02, 0.03, 0.0) == "not shown"
    assert grade(0.01, 0.005, 0.02, 0.03, 0.0, shown_first=True) == "shown"


def test_not_tested_parts_are_never_counted():
    assert combine(["shown", "not tested"]) == "shown"
    assert combine(["not shown", "not tested", "not tested"]) == "not shown"
    assert combine(["not tested", "not tested"]) == "not tested"
    assert combine(["shown", "not shown"]) == "mixed"  # both ways
    assert combine(["shown", "mixed"]) == "mixed"  # inconclusive
    assert combine(["mixed", "mixed"]) == "mixed"
    assert combine(["not shown", "mixed", "not shown"]) == "not shown"  # nothing for it, something against it
    assert set(OUTCOMES) == {"shown", "mixed", "not shown", "not tested"}


def test_a_mixed_verdict_says_which_kind():
    """A mixed verdict is both ways when a graded part is shown and another not shown, inconclusive otherwise; the
    parts are those :func:`combine` recorded (flattened where parts were combined twice), never read from text."""
    from depthutils.book.grading import Verdict
    v = lambda outcome, *parts: Verdict("a claim", "a criterion", outcome, "numbers", parts=parts)  # noqa: E731
    both = v("mixed", "shown", "not shown")
    assert both.mixed_kind() == "both ways"
    undecided = v("mixed", "mixed", "not tested")
    assert undecided.mixed_kind() == "inconclusive"
    assert v("mixed").mixed_kind() == "inconclusive"  # one statistic, between the thresholds
    assert v("not shown", "shown", "not shown").mixed_kind() == ""
    nested = combine([combine(["shown", "shown"]), combine(["not shown", "mixed"])])  # chapter 9's size verdict
    assert nested == "mixed" and nested.parts == ("shown", "shown", "not shown", "mixed")
    c = next(iter(CLAIMS.values()))
    assert verdict_of(c, nested, "numbers").mixed_kind() == "both ways"
    assert verdict_of(c, combine(["shown", "mixed"]), "numbers").mixed_kind() == "inconclusive"


# ------------------------------------------------------------------------------ chapter 6: unsolved groups

def _effect(y: float, L: int) -> np.ndarray:
    """A prompt's ``D [L, L]`` whose normalised depth score is ``y``: layer 0 affects every later layer by 1,
    layer L−2 the last by ``b``, so the score is (L−2)·b/(1+b); the max of such matrices over prompts has
    the score of their largest ``b``, so a level's P1 score is the largest of its prompts' scores."""
    q = y * (L - 1) / (L - 2)
    D = np.full((L, L), np.nan)
    D[np.triu_indices(L, 1)] = 0.0
    D[0, 1:], D[L - 2, L - 1] = 1.0, q / (1 - q)
    return D


def _depth_scores(groups: dict, L: int = 8, n: int = 20) -> DepthScoreResult:
    """``groups = {task: [(level, normalised score, accuracy), ...]}``, n prompts per level with noise below
    the score, one prompt at it; or ``(level, [per-prompt normalised scores], accuracy)``. Each level's
    P1 score (of ``D`` maxed over its prompts) is its largest prompt score."""
    scores, levels, tasks, correct, rows, effects = [], [], [], [], [], []
    for task, spec in groups.items():
        for level, ys, acc in spec:
            if np.ndim(ys) == 0:
                ys = ys - 0.01 * np.abs(RNG.standard_normal(n)) * (np.arange(n) > 0)
            ys = np.asarray(ys, float)
            Ds = [_effect(y, L) for y in ys]
            s = ys * (L - 1)
            scores += list(s)
            levels += [level] * len(ys)
            tasks += [task] * len(ys)
            effects += Ds
            correct += [i < round(acc * len(ys)) for i in range(len(ys))]
            rows.append({"task": task, "level": level, "score": float(s.max()), "norm_score": float(ys.max()),
                         "mean_score": float(s.mean()), "accuracy": acc, "n": len(ys)})
    return DepthScoreResult(meta={"n_layers": L}, prompt_scores=np.array(scores), prompt_levels=np.array(levels),
                            prompt_tasks=np.array(tasks), prompt_correct=np.array(correct),
                            prompt_effects=np.array(effects), rows=rows)


def test_the_effect_matrices_of_the_helper_have_the_scores_they_stand_for():
    from depthutils.measures.depth_score_result import score
    r = _depth_scores({"t": [(1, [0.2, 0.5, 0.3], 1.0)]})
    assert [score(D) / 7 for D in r.prompt_effects] == pytest.approx([0.2, 0.5, 0.3])
    assert score(np.fmax.reduce(r.prompt_effects)) / 7 == pytest.approx(0.5)


def test_the_verdict_grades_p1s_level_max_not_the_mean_of_the_prompts_scores():
    """Spec §6: a level has one score, that of ``D`` maxed over its prompts. Here 10 of every level's 100
    prompts sit at 0.6 and the others rise by 0.1 per level: P1's score is flat (shown), while the mean of
    the prompts' scores rises past one layer over the levels (1/28 per level), which would read "not shown"."""
    flat_max = [(lv, [0.6] * 10 + [0.1 * (i + 1) - 0.0001 * k for k in range(90)], 1.0)
                for i, lv in enumerate((2, 3, 4, 5, 6))]
    r = _depth_scores({"addition": flat_max})
    f = r.facts()
    assert f["addition_slope"] == pytest.approx(0.0, abs=1e-9) and f["addition_slope_hi"] == pytest.approx(0.0, abs=1e-9)
    assert f["addition_mean_slope_lo"] > 1 / 28  # graded on the mean of the prompts' scores, "not shown"
    v = claims.depth_score.verdict(r)
    assert v.outcome == "shown", v.numbers
    assert v.value.startswith("addition: +0.000") and "ours and not graded" in v.numbers
    assert "maxed over its prompts and positions" in v.criterion
    # the other way round: the level max rises by 0.1 per level while the mean of the scores stays flat
    rising_max = [(lv, [0.3 + 0.1 * i] * 25 + [0.3 - 0.1 * i / 3] * 75, 1.0) for i, lv in enumerate((2, 3, 4, 5, 6))]
    r = _depth_scores({"addition": rising_max})
    f = r.facts()
    assert f["addition_mean_slope"] == pytest.approx(0.0, abs=1e-9) and f["addition_slope_lo"] > 1 / 28
    assert claims.depth_score.verdict(r).outcome == "not shown"


def test_a_group_the_model_never_solves_is_not_counted_for_the_claim():
    flat_unsolved = [(lv, 0.33, 0.0) for lv in (1, 2, 3, 4, 5)]
    v = claims.depth_score.verdict(_depth_scores({"math": flat_unsolved, "mquake": [(1, 0.32, 0.0), (4, 0.32, 0.0)]}))
    assert v.outcome == "not tested"  # the old rule read these two flat, unsolved groups as "shown"
    assert any("math is not informative" in n for n in v.notes) and any("cannot test" in n for n in v.notes)


def test_a_rise_inside_one_layer_supports_the_claim_and_a_larger_one_counts_against_it():
    """P1 claims harder problems do not use more depth, so a slope inside one layer over the
    levels supports it even when its interval lies above 0; a rise past one layer outside the noise does not."""
    small = [(lv, 0.26 + 0.012 * i, 1.0) for i, lv in enumerate((2, 3, 4, 5, 6))]  # one layer: 1/(7·4) ≈ 0.036
    v = claims.depth_score.verdict(_depth_scores({"addition": small}))
    assert v.outcome == "shown", v.numbers  # main graded +0.012 [+0.009, +0.015] "not shown"
    assert "decided first" in v.criterion and "a rise inside one layer supports the claim" in v.criterion
    rising = [(lv, 0.20 + 0.06 * i, 1.0) for i, lv in enumerate((2, 3, 4, 5, 6))]
    assert claims.depth_score.verdict(_depth_scores({"addition": rising})).outcome == "not shown"
    flat = [(lv, 0.30, 0.9) for lv in (1, 2, 3)]
    assert claims.depth_score.verdict(_depth_scores({"multihop": flat})).outcome == "shown"
    both = claims.depth_score.verdict(_depth_scores({"addition": rising, "multihop": flat, "math": [(1, .3, 0.), (2, .3, 0.)]}))
    assert both.outcome == "mixed" and "math: " in both.numbers and "(not counted)" in both.value and "(not counted; beside it" in both.numbers


@pytest.mark.parametrize("lo, hi, outcome", [
    (0.005, 0.015, "shown"),       # inside one layer and wholly above 0: the tolerance is decided first
    (-0.010, 0.030, "shown"),      # inside one layer, reaching below 0
    (-0.050, -0.010, "shown"),     # a fall
    (0.000, 1 / 28, "shown"),      # at the tolerance exactly
    (0.020, 0.050, "not shown"),   # above 0, past one layer
    (0.040, 0.060, "not shown"),   # wholly past one layer
    (0.000, 0.040, "mixed"),       # touches 0 and passes one layer: not wholly above 0
    (-0.010, 0.040, "mixed"),      # reaches below 0 and past one layer
])
def test_chapter_6_grading_order_on_each_side_of_each_threshold(lo, hi, outcome):
    delta = 1 / 28  # one layer over the levels: L = 8, five levels
    c = CLAIMS["depth_score"]
    assert grade((lo + hi) / 2, lo, hi, delta, c.against.value, shown_first=True) == outcome


# ------------------------------------------------------------------------------ chapter 2: structural zeros

def _future(out_effect, mode="future", L=8, n=6) -> FutureEffectsResult:
    layer = np.full((n, L, L), np.nan)
    for s in range(L):
        layer[:, s, s + 1:] = 1.0 if s < L // 2 else 0.4
    out = np.tile(np.asarray(out_effect, float), (n, 1)) * (1 + 0.01 * RNG.random((n, 1)))
    return FutureEffectsResult(meta={"params": {"part": "layer", "mode": mode, "local": False}},
                               layer_effect_by_prompt=layer, output_effect_by_prompt=out).with_aggregates()


def test_the_last_layers_structural_zero_is_left_out_of_the_output_halves():
    out = [1.2] * 4 + [1.0, 1.0, 1.0, 0.0]  # future tokens: the last layer's output effect is 0 by construction
    f = _future(out).facts()
    assert f["structural"] == [7]
    assert f["out_second"] == pytest.approx(1.0, rel=0.02)       # not 0.75, the mean with the zero
    assert f["out_ratio"] == pytest.approx(1.0 / 1.2, abs=0.02)
    g = _future(out, mode="all").facts()  # every position skipped: the zero would be a measurement
    assert g["structural"] == [] and g["out_second"] == pytest.approx(0.75, rel=0.02)
    v = claims.future_effects.verdict(_future(out))
    # later layers 0.4 (shown), output 1.0 / 1.2 (between half and 1): the whole claim is mixed
    assert any("0 by construction" in n for n in v.notes) and v.outcome == "mixed"


def test_too_few_layers_for_halves_is_not_tested():
    r = ContributionsResult(prompt_tokens=np.array([5, 5]),
                            **{f"{k}_by_prompt": RNG.random((2, 4)) + 0.1 for k in KEYS}).with_aggregates()
    assert claims.contributions.verdict(r).outcome == "not tested"
    assert claims.future_effects.verdict(_future([1.0, 1.0, 1.0, 0.0], L=4)).outcome == "not tested"


def test_a_lens_that_never_crosses_is_not_counted():
    n, L = 4, 8
    kl = np.tile(np.linspace(4, 0, L), (n, 1))  # halves at the middle
    overlap = np.full((n, L), 0.1)              # never passes 0.3
    r = LogitLensResult(kl_by_prompt=kl, overlap_by_prompt=overlap, prompt_tokens=np.full(n, 9)).with_aggregates()
    v = claims.logit_lens.verdict(r)
    assert "at no layer (not counted)" in v.numbers and v.outcome != "not shown"


# ------------------------------------------------------------------------------ chapter 7: the mapping

def _mapping(best_of_row, Ls=8, Lt=16, n=10, depth=0.3, flat=0.0) -> MappingResult:
    """Held-out errors whose row minimum sits at ``best_of_row[s]``; ``flat`` adds per-prompt noise that can
    reorder a row whose well is shallow."""
    base = np.ones((Ls, Lt))
    for s, b in enumerate(best_of_row):
        base[s] -= depth * np.exp(-0.5 * (np.arange(Lt) - b) ** 2)
    noise = flat * RNG.standard_normal((n, Ls, Lt))
    err = base[None] + noise - noise.mean(axis=0)  # the token mean is the base: the noise only moves resamples
    meta = {"params": {"source": "a", "target": "b"}}
    return MappingResult(meta=meta, error_by_prompt=err, prompt_tokens=np.full(n, 20)).with_aggregates()


DIAG = [round((s + 1) / 8 * 16) - 1 for s in range(8)]


def _untrained(best_of_row, init=0, source="a", target="b", **kw) -> MappingResult:
    """A mapping onto initialisation ``init`` of the untrained ``target`` (0: its own initial weights)."""
    r = _mapping(best_of_row, **kw)
    r.meta = {"params": {"source": source, "target": f"{target}-untrained" + (f"-seed{init}" if init else "")}}
    return r


def _inits(*rows, **kw) -> list[MappingResult]:
    """One untrained initialisation per row of best targets (as many as :data:`N_INITS` unless given)."""
    rows = rows or ([15] * 8,) * N_INITS
    return [_untrained(row, init=k, **kw) for k, row in enumerate(rows)]


#: best targets two target layers off the diagonal (below it, the first above): distance 0.125
OFF = [b - 2 if b >= 2 else b + 2 for b in DIAG]


def test_a_diagonal_map_is_shown_against_permuted_targets_and_an_untrained_target():
    v = claims.mapping.verdict([_mapping(DIAG)], _inits())
    assert v.outcome == "shown" and "rank correlation" in v.numbers
    assert f"onto {N_INITS} untrained initialisation(s), b-untrained, b-untrained-seed1" in v.numbers
    assert "(shown); against chance" in v.numbers


def test_without_an_untrained_target_a_diagonal_is_at_best_mixed():
    v = claims.mapping.verdict([_mapping(DIAG)])
    assert v.outcome == "mixed" and any("no untrained target" in n for n in v.notes)


def test_a_map_no_nearer_the_diagonal_than_its_untrained_target_is_not_shown():
    """The null decides where chance alone would show the claim: the untrained target is as diagonal."""
    v = claims.mapping.verdict([_mapping(DIAG)], _inits(DIAG, [15] * 8, [0] * 8))
    assert v.outcome == "not shown" and "(not shown); against chance" in v.numbers


def test_the_untrained_target_test_on_intervals():
    assert against_null((0.1, 0.05, 0.2), (0.4, 0.3, 0.5)) == "shown"      # wholly below
    assert against_null((0.1, 0.05, 0.3), (0.4, 0.3, 0.5)) == "mixed"      # nearer, the intervals touch
    assert against_null((0.4, 0.2, 0.45), (0.4, 0.3, 0.5)) == "not shown"  # no nearer
    assert against_null((0.5, 0.45, 0.6), (0.4, 0.3, 0.5)) == "not shown"
    spread = [(0.2, 0.15, 0.25), (0.4, 0.3, 0.5), (0.6, 0.55, 0.65)]
    assert against_null((0.1, 0.05, 0.12), *spread) == "shown"             # below every initialisation's interval
    assert against_null((0.1, 0.05, 0.16), *spread) == "mixed"             # below all, touching the lowest
    assert against_null((0.3, 0.28, 0.32), *spread) == "not shown"         # inside the spread: below two of three
    assert against_null((0.7, 0.65, 0.75), *spread) == "not shown"         # beyond it
    with pytest.raises(DepthError):
        against_null((0.1, 0.05, 0.12))


def test_a_trained_pair_inside_the_untrained_spread_is_not_shown_against_untrained():
    """The rule can fail: one and the same trained map (0.125 from the diagonal, far nearer than chance) is shown
    against initialisations that all lie farther, and not shown where one of them lies nearer."""
    trained = _mapping(OFF)
    assert trained.diagonal_distance() == pytest.approx(0.125)
    far = claims.mapping.verdict([trained], _inits([15] * 8, [0] * 8, [15, 0] * 4))
    assert "(shown); against chance" in far.numbers and far.outcome == "shown"
    spread = _inits([15] * 8, DIAG, [0] * 8)  # the diagonal draw lies nearer: the trained map is inside the spread
    near = claims.mapping.verdict([trained], spread)
    assert "(not shown); against chance" in near.numbers and near.outcome == "not shown"
    assert min(r.diagonal_distance() for r in spread) < 0.125 < max(r.diagonal_distance() for r in spread)


def test_one_untrained_initialisation_is_at_best_mixed():
    """One draw of the untrained target says nothing of its spread: where every draw lies far, one is not enough."""
    v = claims.mapping.verdict([_mapping(DIAG)], _inits([15] * 8))
    assert v.outcome == "mixed" and "(mixed); against chance" in v.numbers
    assert any(f"fewer than {N_INITS}" in n for n in v.notes)
    assert claims.mapping.verdict([_mapping(DIAG)], _inits(*[[15] * 8] * N_INITS)).outcome == "shown"


def _control(best_of_row=tuple(range(8))) -> MappingResult:
    control = _mapping(list(best_of_row), Lt=8)
    control.meta = {"params": {"source": "a", "target": "a-seed2"}}
    return control


def test_the_positive_control_is_reported_and_not_counted():
    """A second seed that is perfectly diagonal does not lift a trained pair that shows nothing."""
    own = _inits(*[[7] * 8] * N_INITS, target="a-seed2", Lt=8)
    v = claims.mapping.verdict([_mapping(DIAG)], _inits(DIAG, DIAG, DIAG), _control(), own)
    assert v.outcome == "not shown"
    assert any(n.startswith("Positive control (not counted): a → a-seed2") and "shown against its own untrained" in n
               for n in v.notes)
    assert v.rows["second seed (positive control)"].startswith("a → a-seed2: 0.000")
    assert f"a → a-seed2-untrained ({N_INITS} initialisations)" in v.rows["second seed (positive control)"]
    assert v.rows["untrained target (null)"].startswith(f"a → b-untrained ({N_INITS} initialisations): ")


def test_the_positive_control_is_graded_against_a_null_of_its_own_shape():
    """The control (8 onto 8 layers) is graded against initialisations of its own target, not against the deeper
    model's (8 onto 16): here those are as diagonal as the control, its own are not; without its own it is not graded
    against an untrained target at all, and a null of another shape is refused."""
    deep_nulls = _inits(DIAG, DIAG, DIAG)  # 8 → 16 and on the diagonal: the control would be "not shown" against them
    own = _inits(*[[7] * 8] * N_INITS, target="a-seed2", Lt=8)
    v = claims.mapping.verdict([_mapping(DIAG)], deep_nulls, _control(), own)
    note = next(n for n in v.notes if n.startswith("Positive control"))
    assert "shown against its own untrained target" in note and "a-seed2-untrained" in note
    assert all(r.shape == _control().shape for r in own)
    alone = claims.mapping.verdict([_mapping(DIAG)], deep_nulls, _control())
    assert "not graded against an untrained target" in next(n for n in alone.notes if n.startswith("Positive"))
    with pytest.raises(DepthError, match="must have that shape"):
        claims.mapping.verdict([_mapping(DIAG)], deep_nulls, _control(), deep_nulls)


def test_the_chapters_words_for_the_nulls():
    """null_facts: the spread of every source's initialisations and the control's own null, for the prose."""
    m = MappingNull(trained=[_mapping(OFF)], untrained=[_inits([15] * 8, DIAG, [0] * 8)], control=_control(),
                    control_untrained=_inits(*[[7] * 8] * N_INITS, target="a-seed2", Lt=8))
    f = null_facts(m)
    assert f["inits"] == N_INITS and len(f["dist0"]) == N_INITS and f["dist0"][1] == 0.0
    assert f["target"] == "b-untrained" and f["test0"] == claims.mapping.NULL_WORDS["not shown"]
    assert f["ctrl"] == "a-seed2" and f["ctrl_target"] == "a-seed2-untrained" and f["ctrl_inits"] == N_INITS
    assert f["ctrl_test"] == claims.mapping.NULL_WORDS["shown"]
    lines = claims.mapping.null_lines(m).splitlines()
    assert len(lines) == 2 + 2 * N_INITS and lines[1].startswith("  onto b-untrained: 0.438")
    assert len(m.results()) == 2 + 2 * N_INITS


def test_a_random_map_is_not_shown_where_a_fixed_threshold_could_not_fail():
    best = np.random.default_rng(3).integers(0, 16, 8)
    r = _mapping(best)
    null = r.null_distances()
    assert r.diagonal_distance() > np.percentile(null, 5)
    assert claims.mapping.verdict([r]).outcome == "not shown"


def test_flat_rows_that_share_one_target_are_flagged_and_at_best_mixed():
    best = [1, 1, 1, 1, 1, 1, 14, 15]
    r = _mapping(best, depth=0.02, flat=0.02)  # shallow wells: the rows are flat within the noise
    bands = r.best_band(n_boot=200)
    assert max(len(b) for b in bands[:6]) >= 3  # the band of target layers within the noise is wide
    v = claims.mapping.verdict([r])
    assert any("share one best target" in n for n in v.notes) and v.outcome != "shown"
    assert r.facts()["shared_frac"] >= 0.5


def test_spearman_with_ties_and_without_variation():
    assert spearman([0, 1, 2, 3], [1, 1, 1, 1]) is None
    assert spearman([0, 1, 2, 3], [0, 2, 1, 3]) == pytest.approx(0.8)
    assert spearman([0, 1, 2, 3], [1, 1, 2, 2]) == pytest.approx(np.corrcoef([0, 1, 2, 3], [.5, .5, 2.5, 2.5])[0, 1])


def test_one_model_alone_is_not_tested():
    r = _mapping(list(range(8)), Lt=8)
    r.meta["params"]["target"] = "a"
    v = claims.mapping.verdict([r])
    assert v.outcome == "not tested" and "one model" in v.numbers


# ------------------------------------------------------------------------------ chapter 9: degenerate metrics

def _ed(L: int, kl_cross: int, n: int = 6, embedding_kl: float = 3.0) -> EffectiveDepthResult:
    """Curves whose KL crosses half its maximum at ``kl_cross``; the lens on h_0 has KL ``embedding_kl`` (below the
    next layers' 4.0, as on P2's models, unless given larger)."""
    cos = np.full((n, L), -0.1)  # never turns non-negative: ED_cos undefined
    kl = np.tile(np.where(np.arange(L) < kl_cross, 4.0, 0.5), (n, 1)) + 0.01 * RNG.random((n, L))
    kl[:, 0] = embedding_kl
    if kl_cross < 2 and embedding_kl < 4.0:  # halved at layer 1 without peaking at h_0: the peak comes later (here
        kl[:, -1] = 4.0                      # the last lens, which the search skips)
    overlap = np.tile(np.where(np.arange(L) < kl_cross, 0.1, 0.9), (n, 1))
    return EffectiveDepthResult(mean_cos_by_prompt=cos, kl_by_prompt=kl, overlap_by_prompt=overlap,
                                prompt_tokens=np.full(n, 10)).with_aggregates()


def test_a_degenerate_metric_is_named_and_not_counted():
    models, tasks = ["m4", "m8"], ["gsm8k", "hellaswag", "aime24"]
    results = {("m4", t): _ed(4, 2) for t in tasks} | {("m8", t): _ed(8, 5) for t in tasks}
    s = Study(models, tasks, results, n_boot=200)
    v = claims.effective_depth.verdicts(s, models)
    assert any("cos is degenerate" in n and "undefined" in n for n in v["scale"].notes)
    assert "cos:" not in v["scale"].numbers and "kl:" in v["scale"].numbers
    # the ratio is 0.75 at both depths: the spread 0 is within P2's own
    assert v["scale"].outcome == "shown"
    assert v["cot"].outcome == "not tested"  # no chain-of-thought model in this run
    assert claims.degenerate_note(s, models, tasks).startswith("cos (6 of 6 cells undefined")


def test_a_kl_curve_that_peaks_at_the_embedding_is_degenerate():
    """ED_KL on a curve whose maximum is the lens on h_0 is the first layer that halves the embedding's KL: 1 at
    every depth, a ratio of 2/L by construction, so its trend is not graded (P2's Table 1 has such a cell)."""
    models, tasks = ["m4", "m8"], ["gsm8k", "hellaswag", "aime24"]
    results = {(m, t): _ed(L, 1, embedding_kl=12.0) for m, L in (("m4", 4), ("m8", 8)) for t in tasks}
    s = Study(models, tasks, results, n_boot=200)
    assert {s.cell(m, t, "kl")[0] for m in models for t in tasks} == {1}
    assert peaks_at_embedding(results[("m8", "gsm8k")].kl) and not peaks_at_embedding(_ed(8, 5).kl)
    v = claims.effective_depth.verdicts(s, models)
    note = next(n for n in v["scale"].notes if n.startswith("kl is degenerate"))
    assert "6 of 6 cells with the KL maximum at h_0" in note and "DS-R1-Qwen-1.5B on gsm8k, KL ED 1" in note
    assert "kl:" not in v["scale"].numbers and "overlap:" in v["scale"].numbers
    assert claims.informative_metric(s, models, tasks) == "overlap"
    assert "kl (6 of 6 cells with the KL maximum at h_0)" in claims.degenerate_note(s, models, tasks)


class _Use:
    """Two models' three numbers and their differences, as :class:`~depthutils.analysis.depth_use.DepthUse` gives
    them: the late effect and the depth score rise, the KL ratio is 2/8 on both (``kl_peak``: where it peaks at h_0)."""
    models = ["stacked", "shared"]

    def __init__(self, kl_peak):
        self.kl_peak = kl_peak

    def numbers(self, m):
        return {"late_effect": 1.0 if m == "stacked" else 1.5, "kl_ratio": 0.25,
                "depth_score": 0.5 if m == "stacked" else 0.7}

    def facts(self):
        d = {"late_effect": (0.5, 0.3, 0.7), "kl_ratio": (0.0, 0.0, 0.0), "depth_score": (0.2, 0.1, 0.3)}
        return {"kl_peak": self.kl_peak} | {k: v for m, (x, lo, hi) in d.items()
                                             for k, v in ((f"diff_{m}", x), (f"diff_{m}_lo", lo), (f"diff_{m}_hi", hi))}


def test_the_shared_layer_verdict_leaves_out_a_degenerate_kl_ratio():
    counted = claims.shared_layers.verdict(_Use("none"))
    assert counted.outcome == "mixed"  # a KL difference of exactly 0 is not above 0
    left_out = claims.shared_layers.verdict(_Use("stacked, shared"))
    assert left_out.outcome == "shown" and "kl_ratio: 0.25 vs 0.25, degenerate (not tested)" in left_out.numbers
    assert any("degenerate on stacked, shared" in n and "h_0" in n for n in left_out.notes)


def test_p2s_own_spread_is_the_scale_tolerance():
    assert 0.05 < reference_spread("kl") < 0.15
    assert all(reference_spread(m) >= 0 for m in ("cos", "kl", "overlap"))


# ------------------------------------------------------------------------------ paper vs this run

def test_the_paper_vs_run_table_puts_the_same_statistic_side_by_side():
    """The row named by the graded statistic holds the paper's value of it and this run's value with its
    interval; the claim row holds the outcome, not a fragment of the numbers (main showed their first
    fragment: in chapter 2, the second half's mean, which is not the graded ratio)."""
    v = claims.future_effects.verdict(_future([1.2] * 4 + [1.0, 1.0, 1.0, 0.0]))
    f = _future([1.2] * 4 + [1.0, 1.0, 1.0, 0.0]).facts()
    table = claims.paper_vs_run(v, [{"model": "ladder-8", "n_layers": 8, "n": 6, "dataset": "gsm8k"}])
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    c = CLAIMS["future_effects"]
    stat = rows[c.short].split(" | ")
    assert stat[1] == c.paper_says() and "read off Fig. 3" in stat[1]
    assert stat[2].rstrip(" |") == v.value and v.value.startswith(f"later layers {f['later_ratio']:.2f} ")
    assert f"; output {f['out_ratio']:.2f} " in v.value
    assert rows["claim"].split(" | ")[2].rstrip(" |") == "graded in the verdict box below"  # the word is said once, there


def test_every_claim_names_its_statistic_and_the_papers_value_of_it():
    for c in CLAIMS.values():
        said = c.paper_says()
        assert c.short and said, c.key
        assert "'" not in c.short, c.key  # the label a browser test finds: the page sets a typographic ’ for it
        if c.paper == "P1":  # read off a figure, or said to have no number, never a number we cannot source
            assert "read off Fig." in said or "no number" in said or said.startswith("—"), (c.key, said)
        else:
            assert "P2's Table 1" in said, (c.key, said)


def test_p2s_values_are_computed_from_its_table():
    """Independently of :mod:`depthutils.analysis.study`: P2's Table 1 read with the csv module."""
    import csv

    from depthutils.analysis.p2_table import REFERENCE_CSV, reference_gains
    rows = {r["model"]: r for r in csv.DictReader(REFERENCE_CSV.open())}
    tasks = ("hellaswag", "gsm8k", "aime24")
    mean = lambda name, m, ts=tasks: sum(float(rows[name][f"{m}_{t}_ratio"]) for t in ts) / len(ts)  # noqa: E731
    for m in ("cos", "kl", "overlap"):
        g = reference_gains(m)
        assert g["cot_gain"]["1.5B"] == pytest.approx(mean("DS-R1-Qwen-1.5B", m) - mean("Qwen2.5-Math-1.5B", m), abs=1e-3)
        assert g["cot_gain"]["32B"] == pytest.approx(mean("DS-R1-Qwen-32B", m) - mean("Qwen2.5-32B", m), abs=1e-3)
        inst = [f"Qwen2.5-{s}-Instruct" for s in ("1.5B", "7B", "14B", "32B")]
        hard = sum(mean(n, m, ("aime24",)) for n in inst) / 4 - sum(mean(n, m, ("hellaswag", "gsm8k")) for n in inst) / 4
        assert g["hard_gain"] == pytest.approx(hard, abs=1e-3)
        means = [mean(n, m) for n in inst]
        assert g["scale_spread"] == pytest.approx(max(means) - min(means), abs=1e-3)


def test_an_integrated_gradients_prompt_whose_sums_miss_completeness_is_not_counted():
    """Chapter 5 on a rule too coarse for the model (here one Riemann point: the attribution is the gradient at
    the baseline): its layer sums miss f(x) − f(b) by more than the limit, so that prompt reads "not tested" with
    the number, while P1's rule on the same prompt is graded."""
    import depthutils
    from depthutils.book.claim_table import COMPLETENESS_LIMIT

    handle = depthutils.load_model("ladder-4")
    coarse = depthutils.integrated_gradients(handle, "5 + 7 + 5 = ", "17", steps=1, progress_bar=False)
    fine = depthutils.integrated_gradients(handle, "5 + 7 + 5 = ", "17", rule="adaptive", progress_bar=False)
    assert coarse.facts()["completeness"] > COMPLETENESS_LIMIT >= fine.facts()["completeness"]
    v = claims.context.verdict({"arithmetic": coarse}, "the |attribution|")
    assert v.outcome == "not tested"
    assert any(f"{coarse.facts()['completeness']:.2f}" in n and "not informative" in n for n in v.notes), v.notes
    assert claims.context.verdict({"arithmetic": fine}, "the |attribution|").outcome != "not tested"


SHARED_REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "effective_depth_table1.csv"


def _shared_table() -> dict:
    """P2's Table 1 as ``../shared/reference`` holds it, read with the csv module (not with depthutils.analysis.study)."""
    with SHARED_REFERENCE.open(newline="") as f:
        return {r["model"]: r for r in csv.DictReader(f)}


def test_the_carried_table_is_the_shared_reference():
    from depthutils.analysis.p2_table import REFERENCE_CSV
    if not SHARED_REFERENCE.exists():
        pytest.skip("no ../shared/reference beside the repository")
    with REFERENCE_CSV.open(newline="") as f:
        assert {r["model"]: r for r in csv.DictReader(f)} == _shared_table()


def test_chapter_9s_table_sets_each_of_its_three_verdicts_beside_p2s_value():
    """Chapter 9's one "paper vs this run" table holds a claim row and a statistic row for the size, chain-of-thought
    and difficulty verdicts; this run's values are the closed-form gains of synthetic curves whose effective
    depths are known, and P2's are recomputed here from ``../shared/reference``."""
    tasks = ["gsm8k", "hellaswag", "aime24"]
    L = {"m4": 4, "m8": 8, "m8cot": 8}
    cross = {"m4": {"gsm8k": 1, "hellaswag": 1, "aime24": 2}, "m8": {"gsm8k": 3, "hellaswag": 3, "aime24": 5},
             "m8cot": {t: 6 for t in tasks}}  # ED_KL = ED_overlap = the crossing layer (≤ L − 2); cos is undefined
    s = Study(list(L), tasks, {(m, t): _ed(L[m], cross[m][t]) for m in L for t in tasks}, n_boot=200)
    v = claims.effective_depth.verdicts(s, ["m4", "m8"], base="m8", cot="m8cot")
    table = claims.paper_vs_run(v["scale"], [{"model": m, "n_layers": L[m]} for m in L])
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in table.splitlines()}
    ratio = lambda m, ts: np.mean([(cross[m][t] + 1) / L[m] for t in ts])  # P2's (ED + 1) / L
    gains = {"scale": 0.0, "cot": ratio("m8cot", tasks) - ratio("m8", tasks),
             "difficulty": np.mean([ratio(m, ["aime24"]) - ratio(m, ["gsm8k", "hellaswag"]) for m in ("m4", "m8")])}
    for key, gain in gains.items():
        c = CLAIMS[key]
        assert rows[f"claim on {c.question}"][2] == "graded in the verdict box below |", key
        paper, run = rows[c.short][1], rows[c.short][2].rstrip(" |")
        assert paper == c.paper_says() and "P2's Table 1" in paper, key
        if key == "scale":  # two parts: ED against L (closed form: the crossings' mean), then the spread
            slope = np.polyfit([4, 8], [np.mean([cross[m][t] for t in tasks]) for m in ("m4", "m8")], 1)[0]
            assert run == v[key].value and run.startswith(f"ED slope: kl {slope:+.2f} ") and (
                f"; ratio spread: kl {gain:+.2f} " in run and ", overlap " in run), run
            continue
        assert run == v[key].value and run.startswith(f"kl {gain:+.2f} ") and "; overlap " in run, (key, run)
    if SHARED_REFERENCE.exists():
        t = _shared_table()
        mean = lambda name, m, ts=tuple(tasks): np.mean([float(t[name][f"{m}_{x}_ratio"]) for x in ts])  # noqa: E731
        assert f"kl 1.5B {mean('DS-R1-Qwen-1.5B', 'kl') - mean('Qwen2.5-Math-1.5B', 'kl'):+.2f}" in rows[CLAIMS['cot'].short][1]
        inst = [f"Qwen2.5-{n}-Instruct" for n in ("1.5B", "7B", "14B", "32B")]
        hard = np.mean([mean(n, "kl", ("aime24",)) - mean(n, "kl", ("hellaswag", "gsm8k")) for n in inst])
        assert f"kl {hard:+.2f}" in rows[CLAIMS["difficulty"].short][1]


def test_a_companion_verdict_that_is_not_tested_says_why_in_the_table():
    models, tasks = ["m4", "m8"], ["gsm8k", "hellaswag", "aime24"]
    s = Study(models, tasks, {(m, t): _ed(L, 2) for m, L in (("m4", 4), ("m8", 8)) for t in tasks}, n_boot=50)
    v = claims.effective_depth.verdicts(s, models)
    row = next(line for line in claims.paper_vs_run(v["scale"], []).splitlines()
               if line.startswith(f"| {CLAIMS['cot'].short} |"))
    assert row.endswith("| — (not tested: this run needs a base and a chain-of-thought model.) |"), row
