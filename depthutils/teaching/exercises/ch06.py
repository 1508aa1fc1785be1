"""Chapter 6, the depth score: the depth score of a future-effect matrix (6.2, core) and the bootstrap
interval of the slope of its level means over the difficulty levels (6.3, stretch; ours, the smooth
companion of P1's slope of each level's max, which the chapter grades).

The chapter's prediction exercise is 6.1 (prose only, on the page); 6.2 and 6.3 are checked by
:func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import numpy as np

from depthutils.measures.depth_score_result import DepthScoreResult, score
from depthutils.teaching.exercises.core import Exercise, register


def _random_D(L: int, seed: int, zero_rows: tuple = ()) -> np.ndarray:
    D = np.random.default_rng(seed).uniform(0.0, 1.0, (L, L))
    D[np.tril_indices(L)] = np.nan
    for s in zero_rows:
        D[s] = np.where(np.isnan(D[s]), np.nan, 0.0)
    return D


def _depth_mistakes(lm, case):
    D = np.asarray(case["D"], float)
    L = D.shape[0]
    sums = np.array([np.nansum(D[s, s + 1:]) for s in range(L - 1)])
    r = sums / (L - 1 - np.arange(L - 1))
    s = np.arange(L - 1)
    return {"you did not average r_s over the later layers: divide each row's sum by L−1−s": (s * sums).sum() / sums.sum(),
            "this is the normalised score, divided by L−1: return the score in layers": (s * r).sum() / r.sum() / (L - 1),
            "off by one: the weight of row s is s (layer 0 weighs 0), not s+1": ((s + 1) * r).sum() / r.sum(),
            "off by one in the average: row s has L−1−s later layers, so divide its sum by L−1−s, not L−s":
            (s * sums / (L - s)).sum() / (sums / (L - s)).sum(),
            "your answer is NaN: D is NaN where j ≤ s, so sum each row with `np.nansum`, and let s run over "
            "0 … L−2 (the last layer has no later layer)": np.nan}


EXERCISE = Exercise(
    "depth_score", "06_depth_score", "The depth score of a future-effect matrix",
    "depth_score(D) -> float",
    "Σ_s s·r_s / Σ_s r_s with r_s = Σ_{j>s} D[s, j] / (L−1−s), for D [L, L] (`NaN` where j ≤ s)",
    difficulty=1, importance=3,
    hints=("Row s of D holds the effects of skipping layer s on the later layers j > s; `np.nansum` "
           "ignores the NaNs below the diagonal.",
           "The last layer has no later layer: s runs over 0 … L−2."),
    cases=lambda lm: [dict(D=_random_D(8, 0)), dict(D=_random_D(6, 1, zero_rows=(0, 1)))],
    reference=lambda lm, case: score(case["D"]), mistakes=_depth_mistakes, model=None,
    number="6.2")

register(EXERCISE)


# ------------------------------------------------------------------------------- 6.3, the slope's interval
def _scores(seed: int, sizes: dict, nan_at: int | None = None) -> dict:
    """Synthetic per-prompt depth scores of an 8-layer model for levels ``sizes`` ({level: prompts}), the
    prompts of the levels interleaved (so the order of the levels must be taken from their values)."""
    rng = np.random.default_rng(seed)
    levels = np.concatenate([[lv] * n for lv, n in sizes.items()])
    levels = levels[rng.permutation(len(levels))]
    scores = rng.uniform(1.0, 5.0, len(levels)) + 0.3 * levels
    if nan_at is not None:
        scores[nan_at] = np.nan  # a prompt whose score is undefined (no layer had an effect)
    return dict(scores=scores, levels=levels, n_layers=8)


def _slope_reference(lm, case):
    levels = np.asarray(case["levels"])
    rows = [dict(task="t", level=lv) for lv in sorted(set(levels.tolist()))]
    r = DepthScoreResult(meta={"n_layers": case["n_layers"]}, prompt_scores=np.asarray(case["scores"], float),
                         prompt_levels=levels, prompt_tasks=np.array(["t"] * len(levels)), rows=rows)
    return np.array(r.mean_slope_interval("t", n_boot=case["n_boot"], seed=case["seed"]))


def _boot(case, stratified=True, by_rank=True, norm=lambda L: L - 1, q=(2.5, 97.5), means=True, order=None) -> np.ndarray:
    """The interval with one step done wrong (each keyword is one step; the defaults are right)."""
    scores, levels = np.asarray(case["scores"], float), np.asarray(case["levels"])
    L = case["n_layers"]
    order = sorted(set(levels.tolist())) if order is None else order
    strata = [np.flatnonzero(levels == lv) for lv in order]
    rng = np.random.default_rng(case["seed"])

    def slope(idx):
        s, lv = scores[idx] / norm(L), levels[idx]
        x = [(i if by_rank else v) for i, v in enumerate(sorted(set(levels.tolist())))]
        where = {v: x[i] for i, v in enumerate(sorted(set(levels.tolist())))}
        ok = np.isfinite(s)
        if not means:
            return np.polyfit([where[v] for v in lv[ok]], s[ok], 1)[0]
        pts = [(where[v], s[(lv == v) & ok].mean()) for v in sorted(set(lv.tolist())) if ((lv == v) & ok).any()]
        return np.polyfit(*np.array(pts).T, 1)[0]

    n = len(scores)
    draws = [slope(np.concatenate([rng.choice(g, g.size) for g in strata]) if stratified else rng.choice(n, n))
             for _ in range(case["n_boot"])]
    return np.nanpercentile(draws, list(q))


def _slope_mistakes(lm, case):
    levels = np.asarray(case["levels"])
    return {"you resampled all the prompts together: resample within each level (stratified), "
            "`rng.choice(idx, idx.size)` per level": _boot(case, stratified=False),
            "you drew the levels in the order the prompts list them: draw them in increasing level":
            _boot(case, order=list(dict.fromkeys(levels.tolist()))),
            "you regressed on the level's value: the slope is against its rank 0, 1, … (levels need not be "
            "consecutive)": _boot(case, by_rank=False),
            "you did not normalise: divide each score by L − 1": _boot(case, norm=lambda L: 1),
            "off by one: the normalised score is score / (L − 1), not score / L":
            _boot(case, norm=lambda L: L),
            "you fitted the slope to every prompt: fit it to the level means": _boot(case, means=False),
            "this is a 90% interval (5th–95th percentiles): the 95% interval is the 2.5th–97.5th":
            _boot(case, q=(5, 95)),
            "this is the 25th–75th percentile, not a 95% interval: use 2.5 and 97.5": _boot(case, q=(25, 75))}


EXERCISE_SLOPE = Exercise(
    "slope_interval", "06_depth_score", "The bootstrap interval of the depth score's slope over levels",
    "slope_interval(scores, levels, n_layers, n_boot, seed) -> np.ndarray",
    "[lo, hi], the 95% bootstrap interval (percentiles 2.5 and 97.5 of `n_boot` draws) of the slope of the "
    "level means of score / (L − 1) against the level's rank (ours: the smooth companion of P1's slope of each "
    "level's max), resampling the prompts within each level with "
    "`rng = np.random.default_rng(seed)` (per draw, for each level in increasing order, `rng.choice(idx, "
    "idx.size)` of its prompt indices); `NaN` scores are undefined and left out",
    difficulty=3, importance=4,
    hints=("Draw the levels in increasing order, each from its own prompts: one resample keeps every level's "
           "size, so no level can go missing from a draw.",
           "Per draw: the mean of each level's finite normalised scores, then `np.polyfit(ranks, means, 1)[0]`.",
           "`np.nanpercentile(draws, [2.5, 97.5])` gives the interval."),
    cases=lambda lm: [dict(_scores(0, {1: 6, 2: 5, 4: 7}), n_boot=200, seed=0),
                      dict(_scores(1, {2: 5, 3: 4, 5: 6, 6: 5}, nan_at=3), n_boot=200, seed=7)],
    reference=_slope_reference, mistakes=_slope_mistakes, model=None,
    number="6.3")

register(EXERCISE_SLOPE)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
