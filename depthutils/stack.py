"""Run a local model's decoder stack from any layer, reusing a clean prefix.

An intervention at layer ``s`` leaves every layer below ``s`` unchanged, so the
fast algorithms of ``future_effects``, ``residual_erasure`` and
``integrated_gradients`` run the clean forward once, keep each layer's input
and call arguments, and then run only layers ``s … L-1`` on a batch of
intervened residuals. This needs the model's weights here (not NDIF) and is
used in float32, where a clean run computed apart from the batch is exact;
otherwise the measurements use their batched nnsight path, clean row in batch.
"""
from __future__ import annotations

import contextlib

import torch

from .models import _get, check_residual, rewrap, unwrap


def usable(handle) -> bool:
    """Whether the fast path applies: a local model in float32."""
    return not handle.remote and handle.dtype == torch.float32


class Stack:
    """The clean forward of one prompt, and the means to re-run its upper layers on a batch."""

    def __init__(self, handle, input_ids: torch.Tensor):
        self.handle = handle
        module = handle.nn._module
        self.layers = list(_get(module, handle.arch.layers))
        self.norm = _get(module, handle.arch.final_norm)
        self.head = _get(module, handle.arch.unembed)
        self.L = len(self.layers)
        self.calls, self.inputs, self.outputs = [None] * self.L, [None] * self.L, [None] * self.L
        hooks = []
        for i, layer in enumerate(self.layers):
            hooks.append(layer.register_forward_pre_hook(self._capture(i), with_kwargs=True))
            hooks.append(layer.register_forward_hook(self._keep(i)))
        try:
            with torch.no_grad():
                logits = module(input_ids.to(handle.device), use_cache=False).logits
        finally:
            for h in hooks:
                h.remove()
        self.logits = logits  # [1, T, V]
        self.clean_probs = logits.float().softmax(-1)
        self.deltas = [o - i for i, o in zip(self.inputs, self.outputs)]  # clean Δ_j, compared against often

    def _capture(self, i):
        def hook(mod, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            kwargs = {k: v for k, v in kwargs.items() if k != "hidden_states"}
            self.calls[i] = (tuple(args[1:]), kwargs)
            self.inputs[i] = x.detach()
        return hook

    def _keep(self, i):
        def hook(mod, args, out):
            x = self.inputs[i]
            self.outputs[i] = check_residual(unwrap(out), x.shape[0], x.shape[1], f"layer {i} output").detach()
        return hook

    def h(self, l: int) -> torch.Tensor:
        """``h_l`` of the clean run, ``[1, T, H]`` (``h_L`` is the last layer's output)."""
        return self.inputs[l] if l < self.L else self.outputs[-1]

    def layer(self, j: int, x: torch.Tensor) -> torch.Tensor:
        """Layer ``j`` applied to a batch ``x`` ``[B, T, H]`` with the clean run's arguments."""
        args, kwargs = self.calls[j]
        return check_residual(unwrap(self.layers[j](x, *args, **kwargs)), x.shape[0], x.shape[1], f"layer {j} output")

    def run(self, x: torch.Tensor, start: int, on_layer=None) -> torch.Tensor:
        """Layers ``start … L-1`` on ``x``; ``on_layer(j, x_in, out)`` sees each; returns ``h_L``."""
        for j in range(start, self.L):
            out = self.layer(j, x)
            if on_layer is not None:
                on_layer(j, x, out)
            x = out
        return x

    def unembed(self, h: torch.Tensor) -> torch.Tensor:
        return self.handle.finish_logits(self.head(self.norm(h)))

    @contextlib.contextmanager
    def zeroed(self, j: int, part: str, rows_spans: list[tuple[int, int]]):
        """Within the block, layer ``j``'s ``part`` ("attn"/"mlp") output is 0 on ``[1, t)`` of row r."""
        path = self.handle.arch.attn if part == "attn" else self.handle.arch.mlp
        sub = _get(self.layers[j], path)

        def hook(mod, args, out):
            y = unwrap(out).clone()
            for r, t in rows_spans:
                y[r, 1:t] = 0.0
            return rewrap(out, y)
        handle = sub.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()
