"""Chapter 8, shared layers: the effect of skipping one layer on a later layer.

The chapter's prediction exercise is 8.1 (prose only, on the page); this is 8.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import torch

from .ch02 import _future_of
from .core import Exercise, register
from .inputs import _one


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

register(EXERCISE)
