"""P1 §3 / Fig. 4: the logit lens, KL to the final distribution and top-k overlap per layer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from ._run import encode_all, progress
from .errors import check_finite
from .models import check_residual
from .results import Result, describe, make_meta, wrap


@dataclass
class LogitLensResult(Result):
    """``kl[l] = KL(q_l ‖ q_L)`` and ``overlap[l] = |topk(q_l) ∩ topk(q_L)| / k``, token means, ``[L]``.

    Index ``l`` is the *output* of layer ``l`` (``h_{l+1}``), so the last entry
    is the model's own output distribution: KL 0 and overlap 1 by construction.
    """

    kl: np.ndarray = None
    overlap: np.ndarray = None
    k: int = 5
    kind: ClassVar[str] = "logit_lens"

    def summary(self) -> str:
        from .effective_depth import ed_kl, ed_overlap

        L = len(self.kl)
        kl_at, ov_at = ed_kl(self.kl), ed_overlap(self.overlap)
        say = lambda l: "never" if l is None else f"at layer {l} of {L} (relative depth {(l + 1) / L:.2f})"
        return wrap(f"The lens KL falls below half its maximum {say(kl_at)}; the top-{self.k} overlap first exceeds "
                f"0.3 {say(ov_at)}. Overlap at the middle layer: {self.overlap[(L - 1) // 2]:.2f}.")


def lens_stats(log_q: torch.Tensor, log_final: torch.Tensor, top_final: torch.Tensor, k: int):
    """Per-token KL(q ‖ q_final) and top-k overlap from log-probabilities ``[..., V]``.

    The overlap intersects top-k *index sets* (``[..., k] × [..., k]``), never a
    vocabulary-wide one-hot.
    """
    kl = (log_q.exp() * (log_q - log_final)).sum(-1)
    top = log_q.topk(k, dim=-1).indices
    overlap = (top[..., :, None] == top_final[..., None, :]).any(-1).float().sum(-1) / k
    return kl, overlap


def logit_lens(model, prompts, k: int = 5, *, progress_bar: bool = True) -> LogitLensResult:
    """KL divergence and top-``k`` overlap of every layer's logit-lens distribution with the output.

    Memory is O(T·V): the lens of one layer at a time is compared with the final
    distribution and reduced to ``[T]`` before the next layer is read.
    """
    prompts, encs = encode_all(model, prompts)
    L = model.n_layers
    kl_sum = torch.zeros(L, dtype=torch.float64)
    ov_sum = torch.zeros(L, dtype=torch.float64)
    count = 0
    for enc in progress(encs, "logit lens", enabled=progress_bar):
        T = enc.n_tokens
        per_layer = []
        with model.no_grad(), model.trace(enc.input_ids):
            hs = [check_residual(model.layers_output(l), 1, T, f"layer {l} output") for l in range(L)]
            log_final = model.unembed.output.float().log_softmax(-1)
            top_final = log_final.topk(k, dim=-1).indices
            for l in range(L):
                log_q = model.lens(hs[l]).float().log_softmax(-1)
                per_layer.append(torch.stack(lens_stats(log_q, log_final, top_final, k))[:, 0].save())
        for l, s in enumerate(per_layer):  # s: [2, T]
            kl_sum[l] += s[0].double().sum()
            ov_sum[l] += s[1].double().sum()
        count += T
    ds, n = describe(prompts)
    return LogitLensResult(meta=make_meta(model, dataset=ds, n=n, k=k, tokens=count),
                           kl=check_finite("logit-lens KL", (kl_sum / count).numpy()),
                           overlap=check_finite("logit-lens overlap", (ov_sum / count).numpy()), k=k)
