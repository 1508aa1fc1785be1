"""Chapter 2, future effects: the reference solutions of its implement-it exercises."""
from __future__ import annotations

import torch

from depthutils.teaching.solutions.common import _output_probs, _run_hooked

__all__ = ["skip_effect", "skip_matrix"]


def skip_effect(lm, input_ids, layer, position):
    """P1 Fig. 3's effect on the output of skipping ``layer`` on positions ``[1, position)``:
    ``max over p ≥ position of ‖softmax(z[p]) − softmax(z'[p])‖₂`` for one prompt (``input_ids`` ``[1, T]``).

    Skipping sets ``h_{s+1}[p] := h_s[p]``: the layer's output is replaced by its input there.
    Position 0 (BOS, the attention sink) is never touched.
    """
    def skip(h_in, h_out):
        h_new = h_out.clone()
        h_new[:, 1:position] = h_in[:, 1:position]
        return h_new

    clean = _output_probs(lm, input_ids)
    skipped = _output_probs(lm, input_ids, layer, skip)
    diff = (clean - skipped)[0, position:].norm(dim=-1)   # [T - position]: the positions p ≥ t
    return float(diff.max())


def skip_matrix(lm, input_ids, position):
    """P1 Fig. 3's matrix for one prompt (``input_ids`` ``[1, T]``) and one ``t = position``, ``[L, L]``:
    ``D[s, j] = max over p ≥ t of ‖Δ_j[p] − Δ'_j[p]‖ / ‖Δ_j[p]‖`` for ``j > s``, where ``Δ'`` comes from the run
    that skips layer ``s`` on positions ``[1, t)``; NaN where ``j ≤ s``. One batched forward pass: row 0 is the
    clean run and row ``s + 1`` skips layer ``s``."""
    L, t = lm.n_layers, position
    rows = input_ids.expand(L + 1, -1)                      # [L+1, T]: the clean row, then one per skipped layer
    updates = {}

    def hook(s):
        def fn(module, args, output):
            h_new = output.clone()
            h_new[s + 1, 1:t] = args[0][s + 1, 1:t]        # row s+1 skips layer s: h_{s+1}[p] := h_s[p]
            updates[s] = h_new - args[0]                    # Δ_s in every row, [L+1, T, d]
            return h_new
        return fn

    _run_hooked(lm, rows, [lm.hf_layer(s).register_forward_hook(hook(s)) for s in range(L)])
    D = torch.full((L, L), float("nan"))
    for j in range(L):
        clean = updates[j][0, t:]                           # Δ_j of the clean run at p ≥ t, [T - t, d]
        for s in range(j):                                  # only the layers before j can change it
            D[s, j] = ((clean - updates[j][s + 1, t:]).norm(dim=-1) / clean.norm(dim=-1)).max()
    return D
