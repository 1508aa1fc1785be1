"""The mutation table of chapters 5–9's stretch exercises (5.4, 6.3, 7.3, 8.3, 9.3).

As in ``tests/teaching/test_exercise_mutations.py``: each mutation is the reference solution
(:mod:`depthutils.teaching.solutions`) with one thing changed, written the way a student would write it (not by calling
the checker's own mistake functions), and the checker must fail it with a sentence that names the mistake
(never the generic "values differ" fallback). ``PYTHONPATH=tests python tests/teaching/test_stretch_mutations_5to9.py``
prints the table (exercise, mutation, the checker's message) as Markdown, with the seconds of each exercise's solution
check.
"""
from __future__ import annotations

import contextlib
import io
import time

import numpy as np
import pytest
import torch
from conftest import assert_named, message  # every mutation table's check

from depthutils.teaching import exercises, solutions

STRETCH = ("ig_gauss", "slope_interval", "diagonal_distance", "later_ratio", "mean_cosine")


# ----------------------------------------------------------------------------- 5.4 ig_gauss
def _gauss(nodes="unit", weights="half", baseline="mean", sum_hidden=True, shift=0):
    """:func:`solutions.ig_gauss` with one step written wrong."""
    def ig(lm, input_ids, layer, predict_positions, answer_ids, steps):
        layer += shift
        u, v = np.polynomial.legendre.leggauss(steps)
        alphas = {"unit": (u + 1) / 2, "raw": u, "riemann": np.arange(steps) / steps}[nodes]
        w = {"half": v / 2, "raw": v, "uniform": np.full(steps, 1 / steps)}[weights]
        _, x = solutions._residual_around(lm, input_ids, layer)
        b = x.mean(dim=1, keepdim=True) if baseline == "mean" else torch.zeros_like(x)
        total = torch.zeros(x.shape[1:]) if not sum_hidden else torch.zeros(x.shape[1])
        for a, wk in zip(alphas, w):
            grad = solutions._answer_gradient(lm, input_ids, layer, b + float(a) * (x - b), predict_positions,
                                              answer_ids)
            term = (grad * (x - b))[0].detach()
            total += float(wk) * (term.sum(-1) if sum_hidden else term)
        return total
    return ig


# ------------------------------------------------------------------------- 6.3 slope_interval
def _slope(stratified=True, by_rank=True, divide=lambda L: L - 1, q=(2.5, 97.5), means=True, order="sorted"):
    """:func:`solutions.slope_interval` with one step written wrong."""
    def interval(scores, levels, n_layers, n_boot, seed):
        scores, levels = np.asarray(scores, float), np.asarray(levels)
        values = sorted(set(levels.tolist()))
        drawn = values if order == "sorted" else list(dict.fromkeys(levels.tolist()))
        x_of = {v: (i if by_rank else v) for i, v in enumerate(values)}
        rng = np.random.default_rng(seed)
        slopes = []
        for _ in range(n_boot):
            idx = (np.concatenate([rng.choice(np.flatnonzero(levels == v), (levels == v).sum()) for v in drawn])
                   if stratified else rng.choice(len(scores), len(scores)))
            s, lv = scores[idx] / divide(n_layers), levels[idx]
            ok = np.isfinite(s)
            if means:
                pts = [(x_of[v], s[ok & (lv == v)].mean()) for v in values if (ok & (lv == v)).any()]
                slopes.append(np.polyfit(*np.array(pts).T, 1)[0])
            else:
                slopes.append(np.polyfit([x_of[v] for v in lv[ok]], s[ok], 1)[0])
        return np.nanpercentile(slopes, list(q))
    return interval


# --------------------------------------------------------------------- 7.3 diagonal_distance
def _diagonal(axis=1, pick=np.argmin, depth=lambda l, L: (l + 1) / L, signed=False, q=5):
    """:func:`solutions.diagonal_distance` with one step written wrong."""
    def distance(error, n_perm, seed):
        error = np.asarray(error, float)
        if axis == 0:
            error = error.T          # the best source of every target: rows and columns swapped
        Ls, Lt = error.shape
        best = pick(error, axis=1)
        src = depth(np.arange(Ls), Ls)
        gap = (lambda v: v) if signed else np.abs
        d = gap(depth(best, Lt) - src).mean()
        perms = np.argsort(np.random.default_rng(seed).random((n_perm, Lt)), axis=1)
        null = gap(depth(perms[:, best], Lt) - src).mean(axis=1)
        return np.array([d, np.percentile(null, q)])
    return distance


# --------------------------------------------------------------------------- 8.3 later_ratio
def _ratio(row=lambda D, s: np.nanmean(D[s, s + 1:]), split=lambda L: (L + 1) // 2, last=np.nan, flip=False):
    """:func:`solutions.later_ratio` with one step written wrong."""
    def later_ratio(D):
        D = np.asarray(D, float)
        L = len(D)
        e = np.array([row(D, s) for s in range(L - 1)] + [last])
        first, second = np.nanmean(e[:split(L)]), np.nanmean(e[split(L):])
        return float(first / second if flip else second / first)
    return later_ratio


# --------------------------------------------------------------------------- 9.3 mean_cosine
def _cosine(mlp_against="h+a", layer_part="delta", against_out=False, what="cos", dim=-1, tokens=slice(None),
            rows=slice(None)):
    """:func:`solutions.mean_cosine` with one step written wrong (what is compared, over which axis, which
    tokens and prompts are averaged)."""
    def mean_cosine(lm, input_ids):
        cos = torch.nn.functional.cosine_similarity
        ratio = lambda x, y, dim: x.norm(dim=dim) / y.norm(dim=dim)  # noqa: E731
        f = cos if what == "cos" else ratio
        curve = []
        for h, a, m, out in solutions._layer_parts(lm, input_ids):
            ref_a, ref_m = (out, out) if against_out else (h, h + a if mlp_against == "h+a" else h)
            part = out - h if layer_part == "delta" else out
            terms = [f(a, ref_a, dim), f(m, ref_m, dim), f(part, out if against_out else h, dim)]
            if layer_part == "alone":
                terms = [f(out - h, h, dim)] * 3
            three = sum(terms) / 3
            curve.append(three[rows][:, tokens].mean() if dim == -1 else three.mean())
        return torch.stack(curve)
    return mean_cosine


#: (exercise id, the mistake, the student's wrong function, a phrase the checker's message must contain)
MUTATIONS = [
    ("ig_gauss", "Legendre nodes and weights left on [−1, 1]", _gauss(nodes="raw", weights="raw"), "nodes and weights of [−1, 1]"),
    ("ig_gauss", "weights not halved (sum to 2)", _gauss(weights="raw"), "weights sum to 2"),
    ("ig_gauss", "every node weighted 1/K", _gauss(weights="uniform"), "weighted every node 1/K"),
    ("ig_gauss", "5.2's left Riemann points", _gauss(nodes="riemann", weights="uniform"), "left Riemann sum"),
    ("ig_gauss", "zero baseline", _gauss(baseline="zero"), "baseline is zero"),
    ("ig_gauss", "not summed over the hidden axis", _gauss(sum_hidden=False), "did not sum over the hidden axis"),
    ("ig_gauss", "the layer's input (layer − 1's output)", _gauss(shift=-1), "read the layer's input"),
    ("slope_interval", "resampled all prompts together", _slope(stratified=False), "resampled all the prompts together"),
    ("slope_interval", "levels drawn in the prompts' order", _slope(order="listed"), "increasing level"),
    ("slope_interval", "slope against the level's value", _slope(by_rank=False), "level's value"),
    ("slope_interval", "scores not normalised", _slope(divide=lambda L: 1), "did not normalise"),
    ("slope_interval", "normalised by L", _slope(divide=lambda L: L), "not score / L"),
    ("slope_interval", "slope fitted to every prompt", _slope(means=False), "level means"),
    ("slope_interval", "90% interval (5, 95)", _slope(q=(5, 95)), "90% interval"),
    ("diagonal_distance", "best source per target (axis 0)", _diagonal(axis=0), "argmin over axis 0"),
    ("diagonal_distance", "argmax (the worst match)", _diagonal(pick=np.argmax), "worst match"),
    ("diagonal_distance", "relative depth l / L", _diagonal(depth=lambda l, L: l / L), "is l / L"),
    ("diagonal_distance", "relative depth l / (L − 1)", _diagonal(depth=lambda l, L: l / (L - 1)), "l / (L − 1)"),
    ("diagonal_distance", "signed distances", _diagonal(signed=True), "signed distances"),
    ("diagonal_distance", "chance's median", _diagonal(q=50), "median of chance"),
    ("diagonal_distance", "chance's 95th percentile", _diagonal(q=95), "95th percentile"),
    ("later_ratio", "middle layer in the second half", _ratio(split=lambda L: L // 2), "middle layer of an odd L"),
    ("later_ratio", "the last layer counted as 0", _ratio(last=0.0), "not 0"),
    ("later_ratio", "row sums", _ratio(row=lambda D, s: np.nansum(D[s, s + 1:])), "summed each row"),
    ("later_ratio", "row maxima", _ratio(row=lambda D, s: np.nanmax(D[s, s + 1:])), "row's maximum"),
    ("later_ratio", "the whole row, j ≤ s too", _ratio(row=lambda D, s: np.nanmean(D[s])), "whole row"),
    ("later_ratio", "first half / second half", _ratio(flip=True), "first half / second half"),
    ("later_ratio", "`np.mean` over a row with a NaN", _ratio(row=lambda D, s: np.mean(D[s, s + 1:])), "np.nanmean"),
    ("mean_cosine", "the whole layer's cosine alone", _cosine(layer_part="alone"), "three cosines"),
    ("mean_cosine", "MLP against h_l", _cosine(mlp_against="h"), "MLP reads h_l + a_l"),
    ("mean_cosine", "cos(h_{l+1}, h_l) for the layer", _cosine(layer_part="output"), "compared h_{l+1} with h_l"),
    ("mean_cosine", "everything against h_{l+1}", _cosine(against_out=True), "the layer's output h_{l+1}"),
    ("mean_cosine", "relative norms instead of cosines", _cosine(what="ratio"), "relative norms"),
    ("mean_cosine", "BOS left out", _cosine(tokens=slice(1, None)), "position 0"),
    ("mean_cosine", "`output[0]`-style batch row 0", _cosine(rows=slice(0, 1)), "batch row 0"),
    ("mean_cosine", "cosine over the tokens (dim=-2)", _cosine(dim=-2), "over the tokens"),
]


def test_every_stretch_exercise_has_mutations():
    assert set(STRETCH) <= set(exercises.EXERCISES)
    assert {m[0] for m in MUTATIONS} == set(STRETCH)
    assert all(sum(m[0] == id for m in MUTATIONS) >= 4 for id in STRETCH)


@pytest.mark.parametrize("id, mistake, fn, phrase", MUTATIONS, ids=[f"{m[0]}: {m[1]}" for m in MUTATIONS])
def test_the_checker_fails_the_mistake_and_names_it(id, mistake, fn, phrase):
    assert_named(id, mistake, fn, phrase)


@pytest.mark.parametrize("id", STRETCH)
def test_stretch_numbers(id):
    """Each stretch exercise is its chapter's second implement-it exercise: N.3 (5.4 in chapter 5, whose 5.3 is
    prose), in the chapter of its core exercise N.2."""
    ex = exercises.EXERCISES[id]
    chapter = int(ex.chapter[:2])
    assert ex.number == (f"{chapter}.4" if chapter == 5 else f"{chapter}.3")
    assert 3 <= ex.difficulty <= 5
    assert exercises.EXERCISES[[k for k, e in exercises.EXERCISES.items() if e.number == f"{chapter}.2"][0]].chapter \
        == ex.chapter


if __name__ == "__main__":
    print("| exercise | the solution's check, first in this process: model loaded, library reference computed (s) "
          "| again, reference cached (s) |\n|---|---|---|")
    for id in STRETCH:
        seconds = []
        for _ in range(2):
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                exercises.check(id, exercises.solution(id))
            seconds.append(time.perf_counter() - t0)
        print(f"| {exercises.EXERCISES[id].number} `{id}` | {seconds[0]:.2f} | {seconds[1]:.2f} |")
    print("\n| exercise | mutation | the checker's message |\n|---|---|---|")
    for id, mistake, fn, _ in MUTATIONS:
        msg = message(id, fn) or "**passes**"
        print(f"| {exercises.EXERCISES[id].number} `{id}` | {mistake} | {msg.replace('|', '/')} |")
