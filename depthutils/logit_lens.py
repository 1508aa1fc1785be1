"""P1 §3 / Fig. 4: the logit lens, KL to the final distribution and top-k overlap per layer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from ._run import encode_all
from .curves import ed_kl, ed_overlap, ratio
from .errors import check_finite
from .models import check_residual
from .remote import each
from .results import Result, describe, make_meta


@dataclass
class LogitLensResult(Result):
    """``kl[l] = KL(q_l ‖ q_L)`` and ``overlap[l] = |topk(q_l) ∩ topk(q_L)| / k``, token means, ``[L]``.

    Index ``l`` is the *output* of layer ``l`` (``h_{l+1}``), so the last entry
    is the model's own output distribution: KL 0 and overlap 1 by construction. The
    per-prompt token means (``kl_by_prompt``, ``overlap_by_prompt``, ``[N, L]``) and
    ``prompt_tokens`` ``[N]`` sit beside them.
    """

    kl: np.ndarray = None
    overlap: np.ndarray = None
    kl_by_prompt: np.ndarray = None
    overlap_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    k: int = 5
    kind: ClassVar[str] = "logit_lens"
    PER_PROMPT: ClassVar[dict] = {"kl": ("kl_by_prompt", "tokens"), "overlap": ("overlap_by_prompt", "tokens")}
    INTERVAL_FACTS: ClassVar[tuple] = ("kl_rel", "overlap_rel", "mid_overlap")

    def facts(self) -> dict:
        """The numbers the chapter's prose states, rounded as printed (None: never)."""
        L = len(self.kl)
        kl_at, ov_at = ed_kl(self.kl), ed_overlap(self.overlap)
        rel = lambda l: None if l is None else round(ratio(l, L), 2)
        return {"L": L, "kl_layer": kl_at, "kl_rel": rel(kl_at), "overlap_layer": ov_at, "overlap_rel": rel(ov_at),
                "mid_layer": (L - 1) // 2, "mid_overlap": round(float(self.overlap[(L - 1) // 2]), 2)}

    def findings(self) -> str:
        f = self.facts()
        say = lambda l, r: "never" if l is None else f"at layer {l} of {f['L']} (relative depth {r:.2f})"
        return (f"The lens KL falls below half its maximum {say(f['kl_layer'], f['kl_rel'])}; the top-{self.k} "
                f"overlap first exceeds 0.3 {say(f['overlap_layer'], f['overlap_rel'])}. Overlap at the middle "
                f"layer: {f['mid_overlap']:.2f}.")


def lens_stats(log_q: torch.Tensor, log_final: torch.Tensor, top_final: torch.Tensor, k: int):
    """Per-token KL(q ‖ q_final) and top-k overlap from log-probabilities ``[..., V]``.

    The overlap intersects top-k *index sets* (``[..., k] × [..., k]``), never a
    vocabulary-wide one-hot.
    """
    kl = (log_q.exp() * (log_q - log_final)).sum(-1)
    top = log_q.topk(k, dim=-1).indices
    overlap = (top[..., :, None] == top_final[..., None, :]).any(-1).float().sum(-1) / k
    return kl, overlap


def read_lens(model, hs: list, k: int) -> list:
    """Inside a trace of one prompt, given every layer's output ``hs`` (read in the trace): each layer's
    ``[2, T]`` KL and top-``k`` overlap (a list made and saved inside the trace: a remote trace returns
    only saved names)."""
    per_layer = nnsight.save([])
    log_final = model.logits().float().log_softmax(-1)
    top_final = log_final.topk(k, dim=-1).indices
    for h in hs:
        log_q = model.lens(h).float().log_softmax(-1)
        per_layer.append(torch.stack(lens_stats(log_q, log_final, top_final, k))[:, 0].save())
    return per_layer


def prompt_lens(model, item) -> torch.Tensor:
    """``[L, 2, T]``: KL and top-``k`` overlap of every layer's lens at every token of one prompt (one trace);
    ``item`` is the prompt's encoding and ``k``."""
    enc, k = item
    L, T = model.n_layers, enc.n_tokens
    with model.no_grad(), model.trace(enc.input_ids):
        hs = [check_residual(model.layers_output(l), 1, T, f"layer {l} output") for l in range(L)]
        per_layer = read_lens(model, hs, k)
    return torch.stack(list(per_layer))


def logit_lens(model, prompts, k: int = 5, *, max_tokens: int | None = None,
               progress_bar: bool = True) -> LogitLensResult:
    """KL divergence and top-``k`` overlap of every layer's logit-lens distribution with the output.

    Memory is O(T·V): the lens of one layer at a time is compared with the final
    distribution and reduced to ``[T]`` before the next layer is read. A prompt longer than
    ``max_tokens`` (default: the model's context) is cut to its first tokens.
    """
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    return logit_lens_of(model, prompts, encs, fit, k,
                         each(model, prompt_lens, [(e, k) for e in encs], "logit lens", enabled=progress_bar))


def logit_lens_of(model, prompts, encs, fit, k: int, stats) -> LogitLensResult:
    """The result from each prompt's ``[L, 2, T]`` statistics (:func:`prompt_lens`)."""
    means = [s.double().mean(-1).cpu().numpy() for s in stats]  # [L, 2] each: a prompt's token means
    tokens = [enc.n_tokens for enc in encs]
    ds, n = describe(prompts)
    return LogitLensResult(meta=make_meta(model, dataset=ds, n=n, fit=fit, k=k, tokens=sum(tokens)),
                           kl_by_prompt=check_finite("logit-lens KL", np.stack([m[:, 0] for m in means])),
                           overlap_by_prompt=check_finite("logit-lens overlap", np.stack([m[:, 1] for m in means])),
                           prompt_tokens=np.array(tokens), k=k).with_aggregates()
