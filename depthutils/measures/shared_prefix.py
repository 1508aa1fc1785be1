"""Chapter 2's fast path at the floor: every skipped layer of a prompt in one batch, and the rows that
share a prefix computing it once.

The per-layer fast path (:func:`depthutils.measures.layer_skips._stack_chunk`) re-runs layers ``s+1 … L-1`` on
the whole prompt for each skipped layer ``s`` and each sampled position ``t``. Two things are left:

* **Shared prefixes.** Skipping ``[1, t)`` and skipping ``[1, t')`` with ``t < t'`` give the same residual
  at every position ``< t`` in every layer (attention is causal, and both runs skip all of ``[1, t)``).
  So only the row with the largest ``t`` runs the whole prompt; every other row runs positions
  ``t … T-1`` only, attending to that row's keys and values for the positions before ``t``
  (:meth:`depthutils.models.stack.Stack.suffix`). A prompt's layer work falls from ``Σ_s (L-1-s)·K·T`` token-layers
  to ``Σ_s (L-1-s)·(K·T − Σ t_k + t_max)``.
* **One batch per layer.** Every skipped layer ``s`` whose intervention has started is a batch row of the
  same layer call, so layer ``j`` is called ``K`` times per prompt (not once per ``s < j``): larger matrix
  products, far fewer calls. Rows are grouped so that one group's activations stay within
  :data:`~depthutils.cost.chunks.GROUP_BYTES`.

The output distribution is computed only at the positions each row measures, in chunks of positions
bounded by :data:`~depthutils.cost.chunks.UNEMBED_BYTES` (a 262k vocabulary makes one position's distribution 1 MB). In the
future-tokens mode skipping the last layer leaves every measured position unchanged, so its output effect
is 0 without computing it (it is one of the result's structural zeros).

Used where :meth:`~depthutils.models.stack.Stack.suffix_ok` holds, or where no row needs the suffix (one ``t``);
otherwise :mod:`depthutils.measures.future_effects` keeps its per-layer path. The values equal that path's up to
fp32 rounding (the tests compare both with the plain-PyTorch oracle).
"""
from __future__ import annotations

import contextlib
import random
from typing import Sequence

import torch

from depthutils.cost.accounting import BYTES, Acc, Shape
from depthutils.cost.chunks import limits
from depthutils.models.stack import Prefix, Recorder, Stack


def sample_positions(n_tokens: int, seed: int = 123, k: int = 4) -> list[int]:
    """P1's positions: ``k`` of ``range(8, T-4, 8)``, shuffled with ``seed``, sorted."""
    cand = list(range(8, n_tokens - 4, 8))
    random.Random(seed).shuffle(cand)
    return sorted(cand[:k])


def applies(st: Stack, ts: Sequence[int]) -> bool:
    """Whether :func:`prompt_maxima` can run this prompt: one ``t``, or a family whose layers run on a suffix."""
    return len(set(ts)) <= 1 or st.suffix_ok()


def group_size(layers: int, heads: int, intermediate: int, rows: int, T: int, limit: int) -> int:
    """How many skipped layers share one batch: their rows' attention scores and MLP activations
    (``rows × T × (heads·T + 3·intermediate)`` floats) within ``limit`` bytes (:data:`~depthutils.cost.chunks.GROUP_BYTES`)."""
    per_s = 4 * rows * T * (heads * T + 3 * intermediate)
    return int(max(1, min(layers, limit // max(per_s, 1))))


def output_chunk(vocab: int, limit: int) -> int:
    """Positions per chunk of output distributions: their logits, probabilities and the clean ones (three float32
    ``[vocab]`` rows each) within ``limit`` bytes (:data:`~depthutils.cost.chunks.UNEMBED_BYTES`)."""
    return max(1, limit // (12 * vocab))


def _group_size(st: Stack, n_rows: int, limit: int) -> int:
    """:func:`group_size` for the model of ``st``."""
    cfg = st.handle.text_config
    heads = getattr(cfg, "num_attention_heads", 1) or 1
    inter = getattr(cfg, "intermediate_size", None) or 4 * st.inputs[0].shape[-1]
    return group_size(st.L, heads, inter, n_rows, st.T, limit)


def prompt_maxima(st: Stack, ts: Sequence[int], part: str, mode: str, output: bool = True,
                  work_bytes: int | None = None) -> list:
    """Each skipped layer's maxima over its rows, one ``(layer_max [L, K+1], out_max [K+1])`` per ``s``
    (column 0 stands for the clean row, ``-inf``; rows in the order of ``ts``), as
    :func:`depthutils.measures.layer_skips.run` returns them for the per-layer path."""
    L, K = st.L, len(ts)
    layer_max = torch.full((L, L, K + 1), -torch.inf)  # [s, j, row]
    out_max = torch.full((L, K + 1), -torch.inf)
    if output:
        out_max[:, 1:] = 0.0
    first = [1 if mode == "all" else t for t in ts]  # the first measured position of each row
    group_bytes, unembed_bytes = limits(work_bytes)
    g = _group_size(st, K, group_bytes)
    with torch.no_grad():
        for s0 in range(0, L, g):
            _group(st, list(range(s0, min(L, s0 + g))), ts, first, part, mode, output, layer_max, out_max,
                   unembed_bytes)
    return [(layer_max[s], out_max[s]) for s in range(L)]


def _entering(st: Stack, s: int, ts, full: int, part: str):
    """The inputs of skipped layer ``s``'s rows at the layer where they start (``s+1`` for a skipped layer,
    ``s`` for a zeroed sublayer): the whole prompt for the ``full`` row, positions ``t_k …`` for the others
    (those positions are still clean there)."""
    if part == "layer":
        x = st.h(s + 1).clone()
        x[:, 1:ts[full]] = st.h(s)[:, 1:ts[full]]
        return x, {k: st.h(s + 1)[:, t:] for k, t in enumerate(ts) if k != full}
    return st.h(s), {k: st.h(s)[:, t:] for k, t in enumerate(ts) if k != full}


def _group(st: Stack, group: list[int], ts, first, part, mode, output, layer_max, out_max,
           unembed_bytes: int):
    """The skipped layers ``group`` as batch rows: layers from the lowest start to ``L-1``, then the output."""
    L = st.L
    full = max(range(len(ts)), key=lambda k: ts[k])
    start = {s: s + 1 if part == "layer" else s for s in group}
    members: list[int] = []  # skipped layers in the batch, in batch order
    x_full, x_suf = None, {}
    for j in range(min(start.values()), L):
        new = [s for s in group if start[s] == j]
        for s in new:
            xf, xs = _entering(st, s, ts, full, part)
            x_full = xf if x_full is None else torch.cat([x_full, xf])
            for k, x in xs.items():
                x_suf[k] = x if k not in x_suf else torch.cat([x_suf[k], x])
        members += new
        if not members:
            continue
        zero = [(members.index(s), ts[full]) for s in new] if part != "layer" else []
        out_full, out_suf = _layer(st, j, x_full, x_suf, ts, part, zero)
        d0 = st.deltas[j][0].float()  # [T, H], the clean Δ_j
        for k in range(len(ts)):
            if k == full:
                lo, xin, xout = first[k], x_full[:, first[k]:], out_full[:, first[k]:]
            else:
                lo, xin, xout = ts[k], x_suf[k], out_suf[k]
            ratio = ((xout - xin).float() - d0[lo:]).norm(dim=-1) / d0[lo:].norm(dim=-1)  # [B, T - lo]
            for b, s in enumerate(members):
                if j > s:
                    layer_max[s, j, k + 1] = ratio[b].max()
        x_full, x_suf = out_full, out_suf
    if part == "layer" and L - 1 in group:  # skipping the last layer: h_L is its input where skipped
        x_full = st.h(L).clone() if x_full is None else torch.cat([x_full, st.h(L)])
        x_full[-1:, 1:ts[full]] = st.h(L - 1)[:, 1:ts[full]]
        for k, t in enumerate(ts):
            if k != full:
                x_suf[k] = st.h(L)[:, t:] if k not in x_suf else torch.cat([x_suf[k], st.h(L)[:, t:]])
        members.append(L - 1)
    if output:
        _output(st, members, x_full, x_suf, ts, first, full, mode, out_max, unembed_bytes)


def _layer(st: Stack, j: int, x_full, x_suf: dict, ts, part: str, zero: list):
    """Layer ``j`` on the batch: the full row over the whole prompt (its keys and values recorded, and the
    sublayer zeroed on ``[1, t)`` of the rows in ``zero``), then each other row on its suffix."""
    ctx = st.zeroed(j, part, zero) if zero else contextlib.nullcontext()
    if not x_suf:
        with ctx:
            return st.layer(j, x_full), {}
    rec = Recorder()
    with ctx:
        out_full = st.suffix(j, x_full, 0, st.T, prefix=rec)
    out_suf = {k: st.suffix(j, x, ts[k], st.T, prefix=Prefix(rec.k[:, :, :ts[k]], rec.v[:, :, :ts[k]]))
               for k, x in x_suf.items()}
    return out_full, out_suf


def _output(st: Stack, members, x_full, x_suf, ts, first, full, mode, out_max, unembed_bytes: int):
    """``out_max[s, k+1]``: the max over row ``k``'s measured positions of ``‖p − p′‖₂``, unembedding only
    those positions, in chunks within ``unembed_bytes`` (:data:`~depthutils.cost.chunks.UNEMBED_BYTES`)."""
    L = st.L
    pieces = []  # (s, row, positions, h [n, H])
    for b, s in enumerate(members):
        if mode == "future" and s == L - 1:
            continue  # structural zero: no measured position changes (out_max stays 0)
        for k in range(len(ts)):
            h = x_full[b, first[k]:] if k == full else x_suf[k][b]
            pos = torch.arange(first[k] if k == full else ts[k], st.T)
            pieces.append((s, k, pos, h))
    if not pieces:
        return
    V = st.logits.shape[-1]
    chunk = output_chunk(V, unembed_bytes)
    owner = torch.cat([torch.full((len(p[2]),), i) for i, p in enumerate(pieces)])
    pos = torch.cat([p[2] for p in pieces]).to(st.logits.device)
    h = torch.cat([p[3] for p in pieces])
    diff = torch.empty(len(pos))
    clean = st.clean_probs[0]  # [T, V], once per prompt
    for a in range(0, len(pos), chunk):
        probs = st.unembed(h[a:a + chunk]).float().softmax(-1)
        diff[a:a + chunk] = probs.sub_(clean.index_select(0, pos[a:a + chunk])).norm(dim=-1).cpu()
    for i, (s, k, _, _) in enumerate(pieces):
        out_max[s, k + 1] = diff[owner == i].max()


def positions_for_cost(T: int, n_t: int) -> list[int]:
    """The ``t`` of one prompt the cost model assumes: P1's sample where the prompt has room for ``n_t`` of
    them, else the last ``n_t`` positions at stride 4 (the depth score's answer tokens)."""
    ts = sample_positions(T, 123, n_t)
    return ts if len(ts) == n_t else sorted({max(1, T - 1 - 4 * i) for i in range(n_t)})


def cost(a: Acc, s: Shape, T: int, ts, dtype: str, part: str, mode: str, output: bool,
         work_bytes: int | None) -> tuple[float, int]:
    """What :func:`prompt_maxima` runs on one prompt of ``T`` tokens at positions ``ts``, counted into ``a``:
    the suffix check (two layers' clean keys and values, two layers on the prompt's second half), then per
    group of skipped layers one layer call per row of ``ts`` (the full row and each suffix), and the output
    only at the measured positions, none for the last layer in the future-tokens mode. Returns the step's
    working bytes and the rows of one group."""
    L, k = s.layers, len(ts)
    ts = sorted(ts)
    if k > 1:  # the suffix check: two layers' clean keys and values, two layers on the second half
        a.layers(2, 1, T)
        a.layers(2, 1, T - T // 2, context=T)
    first = [1 if mode == "all" else t for t in ts]
    group_bytes, unembed_bytes = limits(work_bytes)
    group = group_size(L, s.heads, s.intermediate, k, T, group_bytes)
    out_rows = 0
    for s0 in range(0, L, group):  # _group: one layer call per row of ts, all skips as rows
        skips = range(s0, min(L, s0 + group))
        begin = {sk: sk + 1 if part == "layer" else sk for sk in skips}
        for j in range(min(begin.values()), L):
            members = sum(b <= j for b in begin.values())
            if members:
                a.layers(1, members, T)
                a.c.windows += k if k > 1 else 0  # _layer: the full row and each suffix
                for t in ts[:-1]:
                    a.layers(1, members, T - t, context=T)
        out_rows += sum(T - f for f in first) * sum(1 for sk in skips if not (mode == "future" and sk == L - 1))
    chunk = output_chunk(s.vocab, unembed_bytes)
    if output:
        for r0 in range(0, out_rows, chunk):
            a.unembed(min(chunk, out_rows - r0), 1)
    work = max(group * (2 * k * T * s.hidden * BYTES[dtype] + s.act_bytes(k, T, dtype)),
               s.logit_bytes(min(chunk, out_rows), 1) if output else 0.0)
    return work, k * group
