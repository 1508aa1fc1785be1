"""P1 §3 / Fig. 4: the logit lens, KL to the final distribution and top-k overlap per layer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.encoding import encode_all
from depthutils.core.errors import check_finite
from depthutils.core.fused import fused
from depthutils.core.results import Result, describe, make_meta
from depthutils.core.softmax import EXP_FLOOR, logsumexp, probabilities
from depthutils.cost.accounting import Cost, Shape
from depthutils.cost.budget import dtype_of, shape_of, work_bytes
from depthutils.cost.chunks import LENS_CHUNK_BYTES, lens_blocks
from depthutils.cost.passes import lens_bytes, one_trace_per_prompt
from depthutils.measures import counted
from depthutils.measures.curves import ed_kl, ed_overlap, ratio
from depthutils.measures.example import Example, on_gsm
from depthutils.models.architectures import check_residual, get_path
from depthutils.models.each import each


@dataclass
class LogitLensResult(Result):
    """``kl[l] = KL(q_l ‖ q_L)`` and ``overlap[l] = |topk(q_l) ∩ topk(q_L)| / k``, token means, ``[L]``.

    Index ``l`` is the lens on ``h_l``, the residual *entering* layer ``l`` (``h_0`` is the embedding), for
    ``l = 0 … L−1``, as NDIF's reproduction notebook of P1 and P2's code read it; ``q_L``, the model's output
    distribution, is the reference, not a row. The per-prompt token means (``kl_by_prompt``,
    ``overlap_by_prompt``, ``[N, L]``) and ``prompt_tokens`` ``[N]`` sit beside them.
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
        mid = L // 2  # h_mid is the residual after the first half of the layers
        return {"L": L, "kl_layer": kl_at, "kl_rel": rel(kl_at), "overlap_layer": ov_at, "overlap_rel": rel(ov_at),
                "mid_layer": mid, "mid_overlap": round(float(self.overlap[mid]), 2)}

    def findings(self) -> str:
        f = self.facts()
        say = lambda l, r: "never" if l is None else f"at layer {l} of {f['L']} (relative depth {r:.2f})"
        return (f"The lens KL falls below half its maximum {say(f['kl_layer'], f['kl_rel'])}; the top-{self.k} "
                f"overlap first exceeds 0.3 {say(f['overlap_layer'], f['overlap_rel'])}. Overlap after the first half "
                f"(h_{f['mid_layer']}): {f['mid_overlap']:.2f}.")


def lens_stats(log_q: torch.Tensor, log_final: torch.Tensor, top_final: torch.Tensor, k: int):
    """Per-token KL(q ‖ q_final) and top-k overlap from log-probabilities ``[..., V]``.

    The overlap intersects top-k *index sets* (``[..., k] × [..., k]``), never a
    vocabulary-wide one-hot.
    """
    kl = (log_q.exp() * (log_q - log_final)).sum(-1)
    top = log_q.topk(k, dim=-1).indices
    overlap = (top[..., :, None] == top_final[..., None, :]).any(-1).float().sum(-1) / k
    return kl, overlap


def read_lens(model, hs: list, k: int, last: int | None = None, batch: bool = False) -> list:
    """Inside a trace of one prompt, given every layer's input ``hs`` (``h_0 … h_{L−1}``, read in the trace): each
    layer's ``[2, T]`` KL and top-``k`` overlap (a list made and saved inside the trace: a remote trace returns
    only saved names). With ``last``, only the prompt's last ``last`` positions are read (``hs`` given so sliced).
    With ``batch``, every row of the trace's batch, each against its own output: ``[2, B, T]``."""
    per_layer = nnsight.save([])
    logits = model.logits() if last is None else model.logits()[:, -last:]
    log_final = logits.float().log_softmax(-1)
    top_final = log_final.topk(k, dim=-1).indices
    for h in hs:
        log_q = model.lens(h).float().log_softmax(-1)
        stats = torch.stack(lens_stats(log_q, log_final, top_final, k))
        per_layer.append((stats if batch else stats[:, 0]).save())
    return per_layer


def chunkable(model) -> bool:
    """Whether ``model``'s lens runs as :func:`chunked_lens` after its trace (a local model whose unembedding is a
    linear layer), not inside the trace one layer at a time (:func:`read_lens`: NDIF, or another unembedding)."""
    return not model.remote and isinstance(get_path(model.nn._module, model.arch.unembed), torch.nn.Linear)


def save_for_lens(model, hs: list) -> tuple:
    """Inside a trace of one prompt, given every layer's input ``hs`` (``[1, T, H]`` each, read in the trace):
    the saved ``[T, H]`` inputs and the saved ``[T, V]`` logits that :func:`chunked_lens` takes after it."""
    saved = nnsight.save([])  # a list made inside the trace must be saved to outlive it
    for h in hs:
        saved.append(h[0].save())
    return saved, model.logits()[0].save()


def prompt_lens(model, item) -> torch.Tensor:
    """``[L, 2, T]``: KL and top-``k`` overlap of the lens on every ``h_l`` (``l = 0 … L−1``, the residual entering
    layer ``l``) at every token of one prompt (one trace);
    ``item`` is the prompt's encoding, ``k`` and, optionally, the bytes of one block's float32 logits
    (default :data:`LENS_CHUNK_BYTES`). A local model takes :func:`chunked_lens` after the trace (:func:`chunkable`)."""
    enc, k, *chunk = item
    L, T, local = model.n_layers, enc.n_tokens, chunkable(model)
    with model.no_grad(), model.trace(enc.input_ids):
        hs = [check_residual(model.layers_input(l), 1, T, f"layer {l} input") for l in range(L)]
        if local:
            saved, final = save_for_lens(model, hs)
        else:
            per_layer = read_lens(model, hs, k)
    if not local:
        return torch.stack(list(per_layer))
    with torch.no_grad():
        return chunked_lens(model, torch.stack(list(saved)), final, k, *chunk)


#: a :func:`chunked_lens` call of at least this many logits (its rows × the vocabulary) reduces its blocks with the
#: compiled :func:`block_stats` (compiled once per process): a real model's lens on one prompt, not an embedded
#: model's (8 layers × a 2,048-token vocabulary)
LENS_FUSED_LOGITS = 2 ** 27


@fused
def block_stats(z: torch.Tensor, final: torch.Tensor, p_final: torch.Tensor | None):
    """One block's float32 statistics per row ``[tokens, L]``, from its logits ``z`` ``[tokens, L, width]`` (any
    float dtype) and the model's float32 logits ``final`` ``[tokens, 1, width]`` on the same slice of the vocabulary:
    the block's maximum ``z_max``, ``s = Σ e`` and ``w = Σ e·(z − z_final)`` with ``e = e^{z − z_max}`` (no
    subnormal term: :data:`~depthutils.core.softmax.EXP_FLOOR`), and ``r = Σ q_final·z`` from the probabilities
    ``p_final`` (shaped as ``final``), or zeros without them. Compiled into one pass where the machine can
    (:func:`~depthutils.core.fused.fused`)."""
    z = z.float()
    z_max = z.amax(-1)
    e = (z - z_max.unsqueeze(-1)).clamp_min(EXP_FLOOR).exp()
    r = torch.zeros_like(z_max) if p_final is None else (z * p_final).sum(-1)
    return z_max, e.sum(-1), (e * (z - final)).sum(-1), r


def chunked_lens(model, hs: torch.Tensor, final: torch.Tensor, k: int, chunk_bytes: int | None = None,
                 output_first: bool = False, normed: bool = False) -> torch.Tensor:
    """``[L, 2, T]`` as :func:`read_lens` gives it, from the layer inputs ``hs`` ``[L, T, H]`` (``h_0 … h_{L−1}``)
    and the model's logits ``final`` ``[T, V]``: every layer's lens as matrix products over blocks of rows (every
    layer of some tokens) and slices of the vocabulary (:func:`depthutils.cost.chunks.lens_blocks`, within
    ``chunk_bytes``, :data:`LENS_CHUNK_BYTES`), never a whole ``[L, T, V]``.

    The products run in the model's dtype; each block's statistics in float32 (:func:`block_stats`, compiled for a
    call of at least :data:`LENS_FUSED_LOGITS` logits), rescaled to the running max ``m`` and accumulated over the
    slices per row in float64: ``S = Σ e^{z−m}`` (no subnormal term: :mod:`depthutils.core.softmax`) and
    ``W = Σ e^{z−m}(z − z_final)``, and the running top-``k`` (a slice's top-``k`` is taken only for the rows whose
    slice maximum beats their ``k``-th value); then
    ``KL(q ‖ q_final) = W/S − lse(z) + lse(z_final)``. With ``output_first`` the KL row is the other direction,
    ``KL(q_final ‖ q) = Σ q_final (z_final − z) − lse(z_final) + lse(z)``, from ``R = Σ q_final·z`` summed over
    the slices (the tuned readout's objective). With ``normed`` the rows of ``hs`` are already what the unembedding
    reads (the final norm applied, or the tuned readout's maps after it).
    """
    module = model.nn._module
    norm, head = get_path(module, model.arch.final_norm), get_path(module, model.arch.unembed)
    Lh, T, _ = hs.shape
    x = hs.to(head.weight.device)
    x = (x if normed else norm(x)).transpose(0, 1).reshape(T * Lh, -1)  # row t·L + l: a token's layers together
    final = final.float()
    V, M = final.shape[-1], T * Lh
    per_block, step = lens_blocks(Lh, T, V, k, chunk_bytes or LENS_CHUNK_BYTES)
    stats = block_stats if M * V >= LENS_FUSED_LOGITS else block_stats.eager
    m = torch.full((M,), -torch.inf)
    S, W, R = (torch.zeros(M, dtype=torch.float64) for _ in range(3))
    p_final = probabilities(final) if output_first else None
    top_v, top_i = torch.full((M, k), -torch.inf), torch.zeros(M, k, dtype=torch.long)
    for v0 in range(0, V, step):
        weight = head.weight[v0:v0 + step]
        bias = None if head.bias is None else head.bias[v0:v0 + step]
        for t0 in range(0, T, per_block):
            t1 = min(T, t0 + per_block)
            r0, r1 = t0 * Lh, t1 * Lh
            z = model.finish_logits(torch.nn.functional.linear(x[r0:r1], weight, bias)).cpu()
            width = z.shape[-1]
            q = None if p_final is None else p_final[t0:t1, None, v0:v0 + width]
            z_max, s, w, r = (a.reshape(-1) for a in stats(z.view(t1 - t0, Lh, width),
                                                           final[t0:t1, None, v0:v0 + width], q))
            beat = (z_max > top_v[r0:r1, -1]).nonzero().squeeze(-1)
            if beat.numel():
                rows = beat + r0
                cv, ci = z.index_select(0, beat).float().topk(min(k, width), dim=-1)
                top, idx = torch.cat([top_v[rows], cv], -1).topk(k, dim=-1)
                top_v[rows], top_i[rows] = top, torch.cat([top_i[rows], ci + v0], -1).gather(-1, idx)
            m_new = torch.maximum(m[r0:r1], z_max)
            old, new = (m[r0:r1] - m_new).double().exp(), (z_max - m_new).double().exp()
            S[r0:r1] = S[r0:r1] * old + s.double() * new
            W[r0:r1] = W[r0:r1] * old + w.double() * new
            if output_first:
                R[r0:r1] += r.double()
            m[r0:r1] = m_new
    lse = (m.double() + S.log()).view(T, Lh)
    lse_final = logsumexp(final).double()[:, None]
    if output_first:
        own = (p_final * final).sum(-1).double()[:, None] - lse_final  # Σ q_final log q_final
        kl = own - (R.view(T, Lh) - lse)
    else:
        kl = (W / S).view(T, Lh) - lse + lse_final
    top_final = final.topk(k, dim=-1).indices  # [T, k]
    overlap = (top_i.view(T, Lh, k, 1) == top_final[:, None, None, :]).any(-1).float().sum(-1) / k
    return torch.stack([kl.float().T, overlap.T], 1)  # [L, 2, T]


@counted
def logit_lens(model, prompts, k: int = 5, *, max_tokens: int | None = None, max_memory=None,
               progress_bar: bool = True) -> LogitLensResult:
    """KL divergence and top-``k`` overlap of the logit lens on every layer's input ``h_l`` (``l = 0 … L−1``)
    with the model's output distribution.

    Memory is O(T·V): on NDIF the lens of one layer at a time is compared with the final distribution and reduced
    to ``[T]`` before the next layer is read; on a local model :func:`chunked_lens` decodes blocks of rows and
    slices of the vocabulary whose logits are at most :data:`LENS_CHUNK_BYTES`, less where ``max_memory`` (bytes
    or a size such as ``"8GB"``; default what the device has free) leaves less above the saved residuals
    (:func:`depthutils.cost.budget.work_bytes`, which says so).
    """
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    items = [(e, k) for e in encs]
    if not model.remote and encs:
        T = max(e.n_tokens for e in encs)
        kept = lens_bytes(shape_of(model), T, dtype_of(model))
        chunk = work_bytes(model, max_memory, kept, LENS_CHUNK_BYTES, "logit lens", progress_bar)
        items = [(e, k, chunk) for e in encs]
    return logit_lens_of(model, prompts, encs, fit, k,
                         each(model, prompt_lens, items, "logit lens", enabled=progress_bar))


def logit_lens_of(model, prompts, encs, fit, k: int, stats) -> LogitLensResult:
    """The result from each prompt's ``[L, 2, T]`` statistics (:func:`prompt_lens`)."""
    means = [s.double().mean(-1).cpu().numpy() for s in stats]  # [L, 2] each: a prompt's token means
    tokens = [enc.n_tokens for enc in encs]
    ds, n = describe(prompts)
    return LogitLensResult(meta=make_meta(model, dataset=ds, n=n, fit=fit, k=k, tokens=sum(tokens)),
                           kl_by_prompt=check_finite("logit-lens KL", np.stack([m[:, 0] for m in means])),
                           overlap_by_prompt=check_finite("logit-lens overlap", np.stack([m[:, 1] for m in means])),
                           prompt_tokens=np.array(tokens), k=k).with_aggregates()


def cost(s: Shape, Ts, dtype: str, remote: bool) -> Cost:
    """What :func:`logit_lens` runs on prompts of ``Ts`` tokens: one forward per prompt, then locally
    :func:`chunked_lens` (one product per slice of the vocabulary), on NDIF each layer's lens in the trace."""
    return one_trace_per_prompt(s, Ts, dtype, remote, "logit_lens", lens="traced" if remote else "chunked",
                                per_token=2)


def example(model, **options) -> Example:
    """One GSM8K problem cut to a few tokens (:mod:`depthutils.measures.example`)."""
    return on_gsm(logit_lens, model, options)
