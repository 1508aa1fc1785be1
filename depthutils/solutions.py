"""Reference solutions of the book's implement-it exercises (see :mod:`depthutils.exercises`).

Written to be read by a student, not to be fast: one forward pass per intervention, every
tensor's shape asserted, and the formula the chapter defines in the docstring. Some read the model with
nnsight (``lm.nn.trace`` and the accessors ``lm.layer(l)``, ``lm.final_norm``, ``lm.unembed``),
others with plain PyTorch forward hooks on the ``transformers`` model (``lm.hf``,
``lm.hf_layer(l)``), so that both ways are shown. They are written for the book's
Llama-shaped models (a pre-norm decoder whose sublayer outputs are added as they are); the
library's measurements also handle the families that post-norm or scale what a layer adds.

A decoder layer of today's ``transformers`` returns a tensor ``[batch, tokens, hidden]``, not
a tuple: ``output[0]`` would be batch row 0.
"""
from __future__ import annotations

import numpy as np
import torch


def layer_output(lm, input_ids, layer):
    """``h_{layer+1}``: the residual stream after decoder layer ``layer``, ``[B, T, d]``, read with nnsight."""
    with torch.no_grad(), lm.nn.trace(input_ids):
        h_out = lm.layer(layer).output.save()  # a tensor [B, T, d]: no [0] here
    assert h_out.shape[:2] == input_ids.shape, h_out.shape
    return h_out


def _residual_around(lm, input_ids, layer):
    """``(h_l, h_{l+1})`` of decoder layer ``layer``, ``[B, T, d]`` each, read with plain forward hooks."""
    seen = {}

    def before(module, args):
        seen["in"] = args[0]            # the layer's input: h_l

    def after(module, args, output):
        seen["out"] = output            # the layer's output: h_{l+1} (a tensor, not a tuple)

    block = lm.hf_layer(layer)
    hooks = [block.register_forward_pre_hook(before), block.register_forward_hook(after)]
    try:
        with torch.no_grad():
            lm.hf(input_ids)
    finally:
        for h in hooks:
            h.remove()
    assert seen["in"].shape == seen["out"].shape and seen["in"].shape[:2] == input_ids.shape
    return seen["in"], seen["out"]


def relative_contribution(lm, input_ids, layer):
    """``‖Δ_l‖ / ‖h_l‖`` at every token, ``[B, T]``, where ``Δ_l = h_{l+1} − h_l`` (P1 Fig. 2; chapter 1)."""
    h_in, h_out = _residual_around(lm, input_ids, layer)
    delta = h_out - h_in                                  # what the whole layer adds
    return delta.norm(dim=-1) / h_in.norm(dim=-1)         # norms over the hidden axis, one per token


def _output_probs(lm, input_ids, layer=None, edit=None):
    """The model's next-token probabilities ``[B, T, V]``; ``edit(h_in, h_out)`` may return a new output
    for decoder layer ``layer`` (plain forward hook)."""
    hooks = []
    if edit is not None:
        def replace(module, args, output):
            return edit(args[0], output)
        hooks.append(lm.hf_layer(layer).register_forward_hook(replace))
    try:
        with torch.no_grad():
            logits = lm.hf(input_ids).logits
    finally:
        for h in hooks:
            h.remove()
    return logits.float().softmax(-1)


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


def later_effect(lm, input_ids, layer, later, position):
    """P1 Fig. 3's effect of skipping ``layer`` (on positions ``[1, position)``) on a later layer ``later``:
    ``max over p ≥ position of ‖Δ_j[p] − Δ'_j[p]‖ / ‖Δ_j[p]‖`` with ``j = later`` (one prompt, ``[1, T]``)."""
    assert later > layer
    seen = {}

    def record(module, args, output):
        seen.setdefault("runs", []).append(output - args[0])      # Δ_j = h_{j+1} − h_j

    def skip(module, args, output):
        h_new = output.clone()
        h_new[:, 1:position] = args[0][:, 1:position]
        return h_new

    watch = lm.hf_layer(later).register_forward_hook(record)
    try:
        with torch.no_grad():
            lm.hf(input_ids)                                        # clean run: Δ_j
            hook = lm.hf_layer(layer).register_forward_hook(skip)
            try:
                lm.hf(input_ids)                                    # skipped run: Δ'_j
            finally:
                hook.remove()
    finally:
        watch.remove()
    clean, skipped = seen["runs"]
    ratio = (clean - skipped).norm(dim=-1) / clean.norm(dim=-1)   # [1, T]
    return float(ratio[0, position:].max())


def lens_kl(lm, input_ids, layer):
    """The logit lens at the output of ``layer``: ``KL(q_l ‖ q_L)`` at every token, ``[B, T]`` (chapter 3),
    with ``q_l = softmax(unembed(final_norm(h_{l+1})))`` and ``q_L`` the model's output. Read with nnsight."""
    with torch.no_grad(), lm.nn.trace(input_ids):
        h = lm.layer(layer).output                           # h_{l+1}, [B, T, d]
        lens_logits = lm.unembed(lm.final_norm(h)).save()    # the lens: the model's own head on h
        final_logits = lm.unembed.output.save()              # the model's output logits
    log_q = lens_logits.float().log_softmax(-1)
    log_p = final_logits.float().log_softmax(-1)
    return (log_q.exp() * (log_q - log_p)).sum(-1)          # KL(q_l ‖ q_L): the lens first


def erasure_effect(lm, input_ids, layer, position, means, predict_positions):
    """P1 Fig. 6b: replace ``h_layer[position]`` by the mean residual ``means[layer]`` and return
    ``max over the predicting positions of ‖p − p'‖₂`` (chapter 4). ``h_layer`` is the input of decoder layer
    ``layer``; ``layer = L`` is the last layer's output."""
    L = lm.n_layers
    vector = torch.as_tensor(means[layer], dtype=torch.float32)

    def erase(h):
        h = h.clone()
        h[:, position] = vector
        return h

    if layer < L:
        hook = lm.hf_layer(layer).register_forward_pre_hook(lambda module, args: (erase(args[0]), *args[1:]))
    else:
        hook = lm.hf_layer(L - 1).register_forward_hook(lambda module, args, output: erase(output))
    try:
        with torch.no_grad():
            erased = lm.hf(input_ids).logits.float().softmax(-1)
    finally:
        hook.remove()
    clean = _output_probs(lm, input_ids)
    return float((clean - erased)[0, predict_positions].norm(dim=-1).max())


def ig_riemann(lm, input_ids, layer, predict_positions, answer_ids, steps):
    """P1 Fig. 6a: integrated gradients of ``f = Σ_answer p(gold)`` with respect to the output of ``layer``,
    summed over the hidden axis, ``[T]`` (chapter 5): the left Riemann sum over ``k = 0 … steps-1`` of
    ``∂f/∂x (b + (k/K)(x − b)) · (x − b) / K`` with ``b`` the mean of ``x`` over positions."""
    _, x = _residual_around(lm, input_ids, layer)      # x: the layer's output, [1, T, d]
    b = x.mean(dim=1, keepdim=True)                     # mean over positions (dim 1), not over the hidden axis
    total = torch.zeros(x.shape[1])
    for k in range(steps):
        point = (b + (k / steps) * (x - b)).detach().requires_grad_(True)

        def put(module, args, output):
            return point                                 # the layer outputs the interpolated point

        hook = lm.hf_layer(layer).register_forward_hook(put)
        try:
            probs = lm.hf(input_ids).logits.float().softmax(-1)
        finally:
            hook.remove()
        f = probs[0, predict_positions, answer_ids].sum()
        (grad,) = torch.autograd.grad(f, point)
        total += (grad * (x - b)).sum(-1)[0].detach() / steps
    return total


def depth_score(D):
    """P1's depth score of a future-effect matrix ``D [L, L]`` (only ``j > s`` counts):
    ``r_s = Σ_{j>s} D[s, j] / (L−1−s)`` and ``Σ_s s·r_s / Σ_s r_s`` (chapter 6)."""
    D = np.asarray(D, dtype=float)
    L = D.shape[0]
    r = np.array([np.nansum(D[s, s + 1:]) / (L - 1 - s) for s in range(L - 1)])
    return float((np.arange(L - 1) * r).sum() / r.sum())


def map_error(X_fit, Y_fit, X_test, Y_test):
    """P1's cross-model mapping error: fit ``y ≈ W x + c`` by least squares on the fitting tokens
    (``[N, d_x]``, ``[N, d_y]``), return the token mean of ``‖ŷ − y‖ / ‖y‖`` on the held-out tokens (chapter 7)."""
    def with_bias(X):
        return np.hstack([X, np.ones((X.shape[0], 1))])          # a column of ones: the bias c

    W, *_ = np.linalg.lstsq(with_bias(np.asarray(X_fit, float)), np.asarray(Y_fit, float), rcond=None)
    pred = with_bias(np.asarray(X_test, float)) @ W
    Y_test = np.asarray(Y_test, float)
    return float(np.mean(np.linalg.norm(pred - Y_test, axis=1) / np.linalg.norm(Y_test, axis=1)))


def effective_depth_kl(kl):
    """P2's ED_KL: the first layer ``l`` with ``KL_l < 0.5 · max KL``, or None when no layer qualifies
    (undefined, not 0) (chapter 9)."""
    kl = np.asarray(kl, dtype=float)
    for l, value in enumerate(kl):
        if value < 0.5 * kl.max():
            return l
    return None
