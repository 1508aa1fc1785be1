"""Chapter 8, shared layers: the effect of skipping one layer on a later layer (8.2, core), and the chapter's
first depth-use number, the later layers' effect over the earlier layers' (8.3, stretch).

The chapter's prediction exercise is 8.1 (prose only, on the page); 8.2 and 8.3 are checked by
:func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import numpy as np
import torch

from depthutils.core.results import halves
from depthutils.teaching.exercises.ch02 import _future_of
from depthutils.teaching.exercises.core import Exercise, register
from depthutils.teaching.exercises.inputs import _one


def _runs(lm, ids, layer: int, later: int, skipped) -> tuple:
    """``(h_j, h_{j+1})`` of layer ``later`` (``[1, T, d]`` each), clean and with ``layer`` skipped at the
    positions ``skipped`` (a slice)."""
    seen = []

    def skip(module, args, output):
        h_new = output.clone()
        h_new[:, skipped] = args[0][:, skipped]
        return h_new

    watch = lm.hf_layer(later).register_forward_hook(lambda m, a, o: seen.append((a[0], o)))
    try:
        with torch.no_grad():
            lm.hf(ids)
            hook = lm.hf_layer(layer).register_forward_hook(skip)
            try:
                lm.hf(ids)
            finally:
                hook.remove()
    finally:
        watch.remove()
    return seen[0], seen[1]


def _later_mistakes(lm, case):
    ids, s, j, t = case["input_ids"], case["layer"], case["later"], case["position"]
    (h, h1), (hs, hs1) = _runs(lm, ids, s, j, slice(1, t))
    d, ds = h1 - h, hs1 - hs
    ratio = ((d - ds).norm(dim=-1) / d.norm(dim=-1))[0]
    (z, z1), (zs, zs1) = _runs(lm, ids, s, j, slice(0, t))
    from_bos = ((z1 - z) - (zs1 - zs)).norm(dim=-1) / (z1 - z).norm(dim=-1)
    return {"you skipped position 0 too: position 0 is the BOS attention sink; skip positions 1 … t−1 only":
            float(from_bos[0, t:].max()),
            "this is ‖Δ_j − Δ′_j‖ alone: divide it by ‖Δ_j‖, the clean run's update": float((d - ds).norm(dim=-1)[0, t:].max()),
            "you divided by ‖Δ′_j‖, the skipped run's update: divide by the clean run's ‖Δ_j‖":
            float(((d - ds).norm(dim=-1) / ds.norm(dim=-1))[0, t:].max()),
            "you compared the residuals h_{j+1}, not the layer's updates Δ_j = h_{j+1} − h_j":
            float(((h1 - hs1).norm(dim=-1) / h1.norm(dim=-1))[0, t:].max()),
            "you took the maximum over every position: measure only the positions p ≥ t": float(ratio.max()),
            "this is the mean over the positions p ≥ t: the effect is their maximum": float(ratio[t:].mean())}



EXERCISE = Exercise(
    "later_effect", "08_shared_layers", "The effect of skipping one layer on a later layer",
    "later_effect(lm, input_ids, layer, later, position) -> float",
    "max over p ≥ position of ‖Δ_j[p] − Δ′_j[p]‖ / ‖Δ_j[p]‖ for j = later, when layer `layer` is skipped "
    "on positions 1 … position−1 (one prompt, on the shared-layer model)",
    difficulty=3, importance=3,
    hints=("Record Δ_j = h_{j+1} − h_j of layer `later` in a clean run and in a run where layer `layer` "
           "is skipped; one forward hook on each layer does both.",
           "On the shared-layer model two layers share their weights, but they are still two calls: hook "
           "the layer (a position in the stack), and check that your hook runs once per forward."),
    cases=lambda lm: [dict(zip(("input_ids", "_prompt"), _one(lm)), layer=s, later=j, position=t)
                      for s, j, t in ((1, 4, 12), (3, 6, 16))],
    reference=lambda lm, case: float(_future_of(lm, case)[1][case["layer"], case["later"]]),
    mistakes=_later_mistakes,
    shifts={"later": {-1: "you measured the layer before `later`", 1: "you measured the layer after `later`"},
            "layer": {-1: "you skipped the previous layer", 1: "you skipped the next layer"},
            "position": {-1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t",
                         1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t"}},
    model="ladder-8-shared",
    number="8.2")


# ------------------------------------------------------------------ 8.3, the first depth-use number
def _future_D(L: int, seed: int, lower=np.nan) -> np.ndarray:
    """A synthetic future-effect matrix ``[L, L]`` (``lower`` where ``j ≤ s``: the chapter's D leaves it NaN,
    another may hold 0), larger for the later layers' skips, with one undefined entry above the diagonal."""
    rng = np.random.default_rng(seed)
    D = rng.uniform(0.05, 0.4, (L, L)) * (1 + np.arange(L))[:, None] / L
    D[np.tril_indices(L)] = lower
    D[1, L - 1] = np.nan
    return D


def _later_ratio_reference(lm, case):
    D = np.asarray(case["D"], float)
    L = D.shape[0]
    on_later = [np.nanmean(D[s, s + 1:]) if s < L - 1 else np.nan for s in range(L)]  # as FutureEffectsResult.facts
    first, second = halves(on_later)
    return second / first


def _ratio_of(D, per_row=np.nanmean, mid=None, last=np.nan, whole_row=False, invert=False):
    """The later ratio with one step replaced: how a row is summed, where the halves split, the last layer."""
    L = D.shape[0]
    e = np.array([per_row(D[s] if whole_row else D[s, s + 1:]) for s in range(L - 1)] + [last])
    mid = (L + 1) // 2 if mid is None else mid
    first, second = np.nanmean(e[:mid]), np.nanmean(e[mid:])
    return first / second if invert else second / first


def _later_ratio_mistakes(lm, case):
    D = np.asarray(case["D"], float)
    L = D.shape[0]
    return {"the middle layer of an odd L goes to the first half: split at (L + 1) // 2, not L // 2":
            _ratio_of(D, mid=L // 2),
            "the last layer has no later layer, so its effect is undefined (left out), not 0": _ratio_of(D, last=0.0),
            "you summed each row: e_s is the mean over the later layers j > s (`np.nanmean`)": _ratio_of(D, per_row=np.nansum),
            "you took each row's maximum: e_s is the mean over the later layers j > s": _ratio_of(D, per_row=np.nanmax),
            "you averaged the whole row: only the later layers j > s count, `D[s, s + 1:]`":
            _ratio_of(D, whole_row=True),
            "this is first half / second half: the ratio is second half / first half (larger: later layers "
            "matter more)": _ratio_of(D, invert=True),
            "a row with an undefined (NaN) entry came out NaN, so its layer dropped out of its half: average each "
            "row with `np.nanmean`": _ratio_of(D, per_row=np.mean),
            "your answer is NaN: an undefined entry of D is NaN, so average with `np.nanmean`": np.nan}


EXERCISE_RATIO = Exercise(
    "later_ratio", "08_shared_layers", "The first depth-use number: second half over first half",
    "later_ratio(D) -> float",
    "mean over the second half of the layers of e_s = mean_{j>s} D[s, j], divided by its mean over the first "
    "half (the middle layer of an odd L in the first half; the last layer, with no later layer, and `NaN` "
    "entries left out), for D [L, L] whose entries at j ≤ s do not count",
    difficulty=3, importance=3,
    hints=("Row s of D is the effect of skipping layer s on every layer j; only j > s is an effect on a later "
           "layer. `np.nanmean` leaves out an undefined (`NaN`) entry.",
           "The first half is layers 0 … (L + 1)//2 − 1; the last layer has no later layer, so its e_s is "
           "undefined, not 0."),
    cases=lambda lm: [dict(D=_future_D(8, 0)), dict(D=_future_D(7, 1, lower=0.0))],
    reference=_later_ratio_reference, mistakes=_later_ratio_mistakes, model=None,
    number="8.3")

register(EXERCISE, EXERCISE_RATIO)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
