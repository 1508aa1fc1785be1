"""Chapter 9, effective depth across scale: P2's effective depth from a KL curve (9.2, core), and the mean
cosine curve that P2's ED_cos reads, from the model (9.3, stretch).

The chapter's prediction exercise is 9.1 (prose only, on the page); 9.2 and 9.3 are checked by
:func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from depthutils.measures.curves import ed_kl
from depthutils.teaching import solutions
from depthutils.teaching.exercises.core import Exercise, register
from depthutils.teaching.exercises.inputs import _model, _stats, batch


def _ed_mistakes(lm, case):
    kl = np.asarray(case["kl"], float)
    every = np.flatnonzero(kl < 0.5 * kl.max())
    hits = every[every < len(kl) - 1]
    if not hits.size:
        out = {"no layer qualifies here: return None (undefined), not 0": 0}
        if every.size:
            out["the search runs over l = 0 … L−2, as P2's code does: the last entry is never the effective depth"] \
                = int(every[0])
        return out
    return {"this is the last qualifying layer: ED_KL is the first l with KL_l < 0.5·max KL": int(hits[-1]),
            "off by one: return the layer index l itself, not l + 1 (the ratio uses ED + 1)": int(hits[0]) + 1,
            "this is P2's ratio (ED + 1) / L: return the layer index": (int(hits[0]) + 1) / len(kl),
            "a layer whose KL equals half the maximum does not qualify: the test is strict, KL_l < 0.5·max KL":
            int(np.flatnonzero(kl[:-1] <= 0.5 * kl.max())[0]),
            "this compares with half of the first layer's KL: the threshold is half of the curve's maximum, "
            "0.5·max KL": next((l for l, v in enumerate(kl[:-1]) if v < 0.5 * kl[0]), None)}


EXERCISE = Exercise(
    "effective_depth_kl", "09_depth_across_scale", "P2's effective depth from a KL curve",
    "effective_depth_kl(kl) -> int | None",
    "the first layer l in 0 … L−2 with KL_l < 0.5 · max KL (the maximum over all L entries; as P2's code, the "
    "last entry is never searched), or `None` when no layer qualifies",
    difficulty=1, importance=3,
    hints=("Compare each layer with half of the curve's maximum and stop at the first one below it.",
           "An undefined effective depth is `None`, never 0: 0 would claim the first layer already decides."),
    # each wrong answer differs from the right one first on a case where it equals no other known mistake
    # (2nd: the first layer is not the largest; 5th: a value exactly half the maximum; 6th: only the last
    # entry qualifies, which P2's search never reaches)
    cases=lambda lm: [dict(kl=np.array(k, float)) for k in ([5.1, 4.2, 3.0, 2.2, 1.1, 0.6, 0.3],
                                                             [3.0, 5.0, 4.0, 2.0, 1.8, 1.2, 0.9, 0.4],
                                                             [0.4, 3.0, 2.9, 1.2, 0.6, 0.1],
                                                             [1.0, 1.0, 1.0, 1.0],
                                                             [4.0, 3.0, 2.0, 1.5, 1.0, 0.2],
                                                             [3.0, 2.5, 2.0, 1.4])],
    reference=lambda lm, case: ed_kl(case["kl"]), mistakes=_ed_mistakes, model=None,
    number="9.2")


# ------------------------------------------------------------------- 9.3, the curve ED_cos reads
def _parts(lm, ids) -> dict:
    """Every layer's ``h_l``, ``a_l``, ``m_l`` and ``h_{l+1}`` (``[L, B, T, d]`` each), read with plain hooks."""
    parts = solutions._layer_parts(lm, ids)
    return {k: torch.stack([p[i] for p in parts]) for i, k in enumerate(("h", "a", "m", "out"))}


@functools.lru_cache(maxsize=None)
def _cos_reference(name: str, size: tuple) -> torch.Tensor:
    """The library's c̄_l ``[L]`` on :func:`batch` ``(n, tokens) = size`` (one nnsight trace per prompt: cached,
    so a second check, the solution's after the student's, costs only the student's function)."""
    lm = _model(name)
    return _stats(lm, dict(input_ids=batch(lm, *size)))[:, :, [1, 3, 5]].mean((0, 2, 3))


def _cosine_mistakes(lm, case):
    stats = _stats(lm, case)  # [B, L, 6, T]: attention, MLP, layer (ratio, cos) each
    cos3 = stats[:, :, [1, 3, 5]].mean(2)  # [B, L, T]
    p = _parts(lm, case["input_ids"])
    h, a, m, out = p["h"], p["a"], p["m"], p["out"]
    cos = torch.nn.functional.cosine_similarity
    return {"this is the whole layer's cosine cos(Δ_l, h_l) alone: c̄_l is the mean of the three cosines "
            "(attention, MLP, whole layer)": stats[:, :, 5].mean((0, 2)),
            "you compared the MLP's output with h_l: the MLP reads h_l + a_l, so take cos(m_l, h_l + a_l)":
            ((cos(a, h, dim=-1) + cos(m, h, dim=-1) + cos(out - h, h, dim=-1)) / 3).mean((1, 2)),
            "you compared h_{l+1} with h_l: the whole layer's cosine is cos(Δ_l, h_l) with Δ_l = h_{l+1} − h_l":
            ((cos(a, h, dim=-1) + cos(m, h + a, dim=-1) + cos(out, h, dim=-1)) / 3).mean((1, 2)),
            "you compared each part with the layer's output h_{l+1}: each cosine compares with the residual the "
            "part reads or is added to, cos(a_l, h_l), cos(m_l, h_l + a_l), cos(Δ_l, h_l)":
            ((cos(a, out, dim=-1) + cos(m, out, dim=-1) + cos(out - h, out, dim=-1)) / 3).mean((1, 2)),
            "these are the relative norms ‖part‖ / ‖residual‖: take the cosines": stats[:, :, [0, 2, 4]].mean((0, 2, 3)),
            "you left out position 0: c̄_l averages every token, BOS included": cos3[:, :, 1:].mean((0, 2)),
            "you kept batch row 0 only: average over every token of every prompt": cos3[0].mean(-1),
            "your cosines run over the tokens (dim=-2): take each token's cosine over the hidden axis (dim=-1)":
            ((cos(a, h, dim=-2) + cos(m, h + a, dim=-2) + cos(out - h, h, dim=-2)) / 3).mean((1, 2))}


EXERCISE_COS = Exercise(
    "mean_cosine", "09_depth_across_scale", "The mean cosine c̄_l that P2's ED_cos reads, from the model",
    "mean_cosine(lm, input_ids) -> torch.Tensor",
    "c̄_l for every layer, [L]: the mean of cos(a_l, h_l), cos(m_l, h_l + a_l) and cos(Δ_l, h_l), each per "
    "token over the hidden axis, averaged over every token of every prompt; ED_cos is then the last l with "
    "c̄_l < 0 ≤ c̄_{l+1} (`du.measures.curves.ed_cos`)",
    difficulty=3, importance=3,
    hints=("Four plain forward hooks per layer read h_l (a pre-hook on the layer), a_l (the attention module's "
           "output[0]: it returns a tuple), m_l (the MLP's output) and h_{l+1} (the layer's output, a tensor).",
           "The MLP reads the residual after attention, h_l + a_l; the whole layer adds Δ_l = h_{l+1} − h_l.",
           "`torch.nn.functional.cosine_similarity(x, y, dim=-1)` gives one cosine per token."),
    cases=lambda lm: [dict(input_ids=batch(lm, n, t), _size=(n, t)) for n, t in ((2, 24), (3, 10))],
    reference=lambda lm, case: _cos_reference(lm.name, case["_size"]),
    axes=("layer",), mistakes=_cosine_mistakes,
    number="9.3")

register(EXERCISE, EXERCISE_COS)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
