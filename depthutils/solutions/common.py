"""Helpers the reference solutions share: the residual around one layer and the output probabilities,
read with plain forward hooks."""
from __future__ import annotations

import torch


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


def _run_hooked(lm, input_ids, hooks):
    """One forward pass without gradients, with ``hooks`` (the handles of hooks just registered) removed
    afterwards, even when the pass fails. Returns the model's output (``.logits``)."""
    try:
        with torch.no_grad():
            return lm.hf(input_ids)
    finally:
        for h in hooks:
            h.remove()
