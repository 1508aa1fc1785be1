"""What ``bench`` counts: layer-passes through hooks on the decoder layers, and each measurement's floor."""
from __future__ import annotations

import torch

from depthutils.models.architectures import get_path


class Counter:
    """Counts forward passes and layer-passes through forward hooks on the decoder layers.

    A layer call on ``B`` rows of ``T'`` positions adds ``B·T'`` layer-tokens; layer-passes are
    layer-tokens over the longest sequence seen (the whole prompt, which every run starts with).
    """

    def __init__(self, model):
        self.layers = list(get_path(model.nn._module, model.arch.layers))
        self.reset()
        self.hooks = [layer.register_forward_pre_hook(self._hook(i), with_kwargs=True)
                      for i, layer in enumerate(self.layers)]

    def reset(self):
        self.passes = self.tokens = self.longest = 0

    @property
    def layer_passes(self) -> float:
        return self.tokens / max(self.longest, 1)

    def _hook(self, i):
        def hook(mod, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            b, t = (x.shape[0], x.shape[1]) if torch.is_tensor(x) and x.ndim == 3 else (1, 1)
            self.tokens += b * t
            self.longest = max(self.longest, t)
            if i == len(self.layers) - 1:
                self.passes += 1
        return hook

    def close(self):
        for h in self.hooks:
            h.remove()


def floors(L: int, T_fe: list[int], positions: list[list[int]], T_er: int, steps: int) -> dict:
    """The least layer-passes each measurement needs (clean run included); ``positions`` are each future-effects
    prompt's ``t``; ``T_er`` is the erasure's prompt up to its last answer-predicting position (later
    positions cannot change the answer)."""
    # clean + layers s+1…L-1 per (t, s): skipping layer s means its output is its input, nothing to run; and
    # rows with a smaller t share the prefix before it with the largest t's row (depthutils.measures.shared_prefix)
    fe = sum(L + sum(L - 1 - s for s in range(L)) * (len(ts) * T - sum(ts) + max(ts)) / T
             for T, ts in zip(T_fe, positions))
    # erasure: layers l…L-1 over positions t…T-1 only, as a fraction of a sequence, plus one clean run
    er = L + sum((L - l) * (T_er - t) / T_er for l in range(L + 1) for t in range(1, T_er))
    ig = L + sum((L - 1 - l) * steps for l in range(L))  # layers above l for every interpolation point
    return {"future_effects": fe, "residual_erasure": er, "integrated_gradients": ig}
