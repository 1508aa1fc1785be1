"""Relative depth: the book's one convention, stated once here and in chapter 0.

A model has ``L`` layers, ``0 … L−1``; layer ``l`` reads the residual ``h_l`` and writes ``h_{l+1}``. Relative
depth counts the layers that have run:

* the residual ``h_l`` sits at ``l / L`` (:func:`residual_depth`): ``h_0``, the embedding, at 0, and ``h_L``, the
  last layer's output, at 1; an early exit at ``h_l`` and an erasure of ``h_l`` are placed there;
* layer ``l`` sits at ``(l + 1) / L`` (:func:`layer_depth`), the depth of the residual it writes: the first layer
  at ``1 / L``, the last at 1. A layer's output (integrated gradients, the cross-model mapping) is placed there.

P2's effective depth ``ED`` is a layer, found on curves that P2's code reads at each layer's *input* ``h_l``; its
ratio ``(ED + 1) / L`` is :func:`layer_depth` of that layer, one step (``1 / L``) past the residual the curve
was read at. The book keeps P2's ratio and, on every lens axis, says that layer ``l``'s point reads ``h_l``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["residual_depth", "layer_depth", "RESIDUAL_AXIS", "LENS_AXIS", "LENS_POSITIONS"]

#: the x label of a quantity read on the residual ``h_l``
RESIDUAL_AXIS = "hₗ, relative depth l / L"
#: the x label of P2's lens curves: layer ``l``'s point reads its input ``h_l``
LENS_AXIS = "layer l (the lens on its input hₗ)"
#: the positions, at the end of each prompt, where the norm-growth and clamp sections read the lens (ours: enough
#: tokens for a mean per prompt, few enough that the lens costs seconds on a real model's vocabulary)
LENS_POSITIONS = 8


def residual_depth(l, n_layers: int):
    """``l / L``: the relative depth of the residual ``h_l`` (an int, an array, or None for None)."""
    if l is None:
        return None
    return np.asarray(l) / n_layers if not isinstance(l, (int, np.integer)) else l / n_layers


def layer_depth(l, n_layers: int):
    """``(l + 1) / L``: the relative depth of layer ``l``, that of the residual it writes (None for None)."""
    if l is None:
        return None
    return (np.asarray(l) + 1) / n_layers if not isinstance(l, (int, np.integer)) else (l + 1) / n_layers
