"""P1 §5 / Fig. 6a: integrated gradients of the answer probability w.r.t. each layer's output.

``f`` is the sum over answer tokens of ``p(gold token)`` (teacher-forced). For
layer ``l`` the input ``x`` is the layer's output at every position and the
baseline ``b`` is its mean over positions (this prompt only). The attribution
is the left Riemann sum

    A[l, t] = (1/K) Σ_{k<K} Σ_d ∂f/∂x (b + (k/K)(x − b))[t, d] · (x − b)[t, d],

run ``batch_size`` interpolation steps per forward+backward. Completeness:
``Σ_t A[l, t] → f(x) − f(b)`` as K grows; the result reports the relative gap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from ._run import encode_all, progress
from .errors import DepthError, check_finite
from .models import check_residual
from .prompts import as_prompt
from .results import Result, describe, make_meta

PARTS = ("layer", "attn", "mlp")


@dataclass
class IGResult(Result):
    """``attribution [L, T]``, ``tokens``, ``f_x`` (scalar), ``f_b [L]`` and ``completeness_gap [L]``.

    ``completeness_gap[l] = |Σ_t A[l, t] − (f(x) − f(b_l))| / |f(x) − f(b_l)|``.
    """

    attribution: np.ndarray = None
    tokens: np.ndarray = None
    f_b: np.ndarray = None
    completeness_gap: np.ndarray = None
    f_x: float = None
    kind: ClassVar[str] = "integrated_gradients"


def _target(model, pred: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """``f`` per batch row: Σ over answer tokens of the gold token's probability."""
    probs = model.unembed.output[:, pred].float().softmax(-1)  # [B, P, V]
    return probs[:, torch.arange(len(gold)), gold].sum(-1)


def integrated_gradients(model, prompt, answer: str | None = None, steps: int = 256, part: str = "layer", *,
                         batch_size: int = 16, progress_bar: bool = True) -> IGResult:
    """Attribution of the answer probability to every (layer, position) of ``part``'s output."""
    if part not in PARTS:
        raise DepthError(f"part must be one of {PARTS}, got {part!r}.")
    if steps < 1 or batch_size < 1:
        raise DepthError("steps and batch_size must be positive whole numbers.")
    p = as_prompt(prompt, answer)
    (p,), (enc,) = encode_all(model, [p], need_answer=True)
    L = model.n_layers
    get = {"layer": model.layers_output, "attn": model.attentions_output, "mlp": model.mlps_output}[part]
    put = {"layer": model.set_layers_output, "attn": model.set_attentions_output, "mlp": model.set_mlps_output}[part]
    T = max(enc.predict_positions) + 1  # later tokens cannot change the answer's logits
    ids = enc.input_ids[:, :T]
    pred, gold = torch.tensor(enc.predict_positions), torch.tensor(enc.answer_ids)
    with model.no_grad(), model.trace(ids):
        f_x = _target(model, pred, gold).save()
    A = np.zeros((L, enc.n_tokens))
    f_b = np.zeros(L)
    for l in progress(range(L), f"integrated gradients ({part})", enabled=progress_bar):
        for start in range(0, steps, batch_size):
            ks = torch.arange(start, min(start + batch_size, steps))
            B = len(ks)
            with model.trace(ids.expand(B, T)):
                x = check_residual(get(l), B, T, f"{part} {l} output")[0:1].detach()
                b = x.mean(dim=1, keepdim=True)  # mean over positions (the sequence axis)
                alpha = (ks.to(x.dtype) / steps).view(B, 1, 1)
                z = (b + alpha * (x - b)).detach().requires_grad_(True)
                put(l, z)
                f = _target(model, pred, gold)
                with f.sum().backward():
                    grad = z.grad.save()
                contrib = (grad.float() * (x - b).float()).sum(-1).sum(0).save()  # [T]
                f0 = f[0].detach().save()
            A[l, :T] += contrib.double().numpy() / steps
            if start == 0:
                f_b[l] = float(f0)
    fx = float(f_x[0])
    gap = np.abs(A.sum(1) - (fx - f_b)) / np.maximum(np.abs(fx - f_b), 1e-12)
    check_finite("integrated-gradients attribution", A)
    meta = make_meta(model, dataset=describe([p])[0], n=1, prompt=p.context, answer=p.answer, steps=steps,
                     part=part, batch_size=batch_size)
    return IGResult(meta=meta, attribution=A, tokens=np.array(enc.tokens), f_b=f_b, completeness_gap=gap, f_x=fx)
