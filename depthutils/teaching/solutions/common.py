"""Helpers the reference solutions share: the residual around one layer, every layer's parts, the output
probabilities and the gradient of the answer's probability, read with plain forward hooks."""
from __future__ import annotations

import torch


def _run_hooked(lm, input_ids, hooks):
    """One forward pass without gradients, with ``hooks`` (the handles of hooks just registered) removed
    afterwards, even when the pass fails. Returns the model's output (``.logits``)."""
    try:
        with torch.no_grad():
            return lm.hf(input_ids)
    finally:
        for h in hooks:
            h.remove()


def _residual_around(lm, input_ids, layer):
    """``(h_l, h_{l+1})`` of decoder layer ``layer``, ``[B, T, d]`` each, read with plain forward hooks."""
    seen = {}

    def before(module, args):
        seen["in"] = args[0]            # the layer's input: h_l

    def after(module, args, output):
        seen["out"] = output            # the layer's output: h_{l+1} (a tensor, not a tuple)

    block = lm.hf_layer(layer)
    _run_hooked(lm, input_ids, [block.register_forward_pre_hook(before), block.register_forward_hook(after)])
    assert seen["in"].shape == seen["out"].shape and seen["in"].shape[:2] == input_ids.shape
    return seen["in"], seen["out"]


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


def _layer_parts(lm, input_ids):
    """Every decoder layer's ``(h_l, a_l, m_l, h_{l+1})``, ``[B, T, d]`` each, read with plain forward hooks:
    the layer's input, what its attention and its MLP add, and its output (Llama-shaped layers)."""
    seen = {}

    def keep(key, l, take):
        def hook(module, args, output=None):
            seen[key, l] = take(args, output)
        return hook

    hooks = []
    for l in range(lm.n_layers):
        block = lm.hf_layer(l)
        hooks += [block.register_forward_pre_hook(keep("h", l, lambda args, out: args[0])),
                  block.self_attn.register_forward_hook(keep("a", l, lambda args, out: out[0])),  # (output, weights)
                  block.mlp.register_forward_hook(keep("m", l, lambda args, out: out)),
                  block.register_forward_hook(keep("out", l, lambda args, out: out))]
    _run_hooked(lm, input_ids, hooks)
    return [tuple(seen[k, l] for k in ("h", "a", "m", "out")) for l in range(lm.n_layers)]


def _answer_gradient(lm, input_ids, layer, point, predict_positions, answer_ids):
    """``∂f/∂point`` with ``f = Σ_answer p(gold)``, when decoder layer ``layer`` outputs ``point`` (a forward
    hook that returns a tensor replaces the layer's output)."""
    point = point.detach().requires_grad_(True)
    hook = lm.hf_layer(layer).register_forward_hook(lambda module, args, output: point)
    try:
        probs = lm.hf(input_ids).logits.float().softmax(-1)
    finally:
        hook.remove()
    f = probs[0, predict_positions, answer_ids].sum()
    (grad,) = torch.autograd.grad(f, point)
    return grad
