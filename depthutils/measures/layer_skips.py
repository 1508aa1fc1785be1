"""The rows of skipped layers, and the paths that run them: what future effects (P1 §2, Fig. 3), the depth score
and the measurement at the answer share.

A row skips layer ``s`` on positions ``[1, t)`` (or zeroes its attention or MLP there; with ``target``, only the
input of that one later layer loses it: the direct-only variant). :func:`work` cuts one prompt's rows into chunks,
:func:`run` runs each chunk and reduces it to each row's maxima over the positions it measures, and :func:`fold`
folds those into the prompt's ``layer_effect [L, L]`` and ``output_effect [L]``. A chunk runs on one of three paths:

* a batched nnsight trace whose row 0 is the clean run (:func:`_run_chunk`), so the clean reference always
  comes from the same batch; it runs on NDIF too;
* the stack path (:mod:`depthutils.models.stack`), where every row skips the same layer and the layers below it
  are reused from the clean run (:func:`_stack_chunk`), or the shared prefix of
  :mod:`depthutils.measures.shared_prefix`;
* for the layer effect alone, one pass up the stack for every skipped layer (:func:`_stack_wave`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from depthutils.core.errors import check_finite
from depthutils.core.softmax import probabilities
from depthutils.measures import shared_prefix
from depthutils.models import stack
from depthutils.models.architectures import check_residual

__all__ = ["Work", "work", "run", "fold", "skip_rows"]


@dataclass(frozen=True)
class _Row:
    s: int                 # skipped layer
    t: int                 # skip positions [1, t); measure [t, T) (mode "future") or [1, T)
    target: int | None     # local variant: the one layer (or L for the output) that sees the skip


def skip_rows(L: int, ts: Sequence[int], local: bool) -> list[_Row]:
    if not local:
        return [_Row(s, t, None) for t in ts for s in range(L)]
    return [_Row(s, t, j) for t in ts for s in range(L) for j in range(s + 1, L + 1)]


def _skip(x: torch.Tensor, rows: list[tuple[int, _Row]], value) -> torch.Tensor:
    """A copy of ``x`` with ``value(r, row)`` written on positions ``[1, t)`` of each listed row."""
    x2 = x.clone()
    for r, row in rows:
        x2[r, 1:row.t] = value(r, row)
    return x2


def _measured(chunk: list[_Row], T: int, mode: str) -> torch.Tensor:
    """``[B, T]``: the positions each row measures (row 0, the clean run, measures none): ``p ≥ t``
    (mode ``"future"``) or every non-BOS position (``"all"``)."""
    first = torch.tensor([T] + [1 if mode == "all" else row.t for row in chunk])
    return torch.arange(T)[None, :] >= first[:, None]


def _row_maxima(ratios: torch.Tensor, out_diff: torch.Tensor, keep: torch.Tensor):
    """Each row's maxima over the positions it measures: ``[L, B, T]`` ratios and ``[B, T]`` output
    differences to ``[L, B]`` and ``[B]`` (-inf for row 0)."""
    keep = keep.to(ratios.device)
    return (ratios.float().masked_fill(~keep, -torch.inf).amax(-1),
            out_diff.float().masked_fill(~keep, -torch.inf).amax(-1))


def _run_chunk(model, ids: torch.Tensor, chunk: list[_Row], part: str, local: bool, keep: torch.Tensor):
    """One batched forward: row 0 clean, row ``i+1`` is ``chunk[i]``. Returns each row's maxima over the
    positions ``keep`` marks (:func:`_row_maxima`), reduced inside the trace: ``[L, B]`` and ``[B]``."""
    L, T, B = model.n_layers, ids.shape[1], len(chunk) + 1
    measured = keep.any(0)
    first = int(measured.float().argmax()) if measured.any() else T - 1
    get = {"attn": model.attentions_output, "mlp": model.mlps_output}
    put = {"attn": model.set_attentions_output, "mlp": model.set_mlps_output}
    with model.no_grad(), model.trace(ids.expand(B, T)):
        ratios = []  # reduced to each row's maxima inside the trace, which saves only those
        clean = []  # local: the clean contribution of each layer (row 0)
        for j in range(L):
            h = check_residual(model.layers_input(j), B, T, f"layer {j} input")
            if local:
                at_j = [(r + 1, row) for r, row in enumerate(chunk) if row.target == j]
                if at_j:
                    h = _skip(h, at_j, lambda r, row: h[r, 1:row.t] - clean[row.s][1:row.t])
                    model.set_layers_input(j, h)
            mine = [] if local else [(r + 1, row) for r, row in enumerate(chunk) if row.s == j]
            if part in get:
                sub = check_residual(get[part](j), B, T, f"{part} {j} output")
                if mine:
                    sub = _skip(sub, mine, lambda r, row: 0.0)
                    put[part](j, sub)
            out = check_residual(model.layers_output(j), B, T, f"layer {j} output")
            if part == "layer" and mine:
                out = _skip(out, mine, lambda r, row: h[r, 1:row.t])
                model.set_layers_output(j, out)
            delta = out - h
            if local:
                clean.append((delta if part == "layer" else sub)[0])
            d0 = delta[0:1].float()
            ratios.append((delta.float() - d0).norm(dim=-1) / d0.norm(dim=-1))
        if local:
            last = [(r + 1, row) for r, row in enumerate(chunk) if row.target == L]
            if last:
                out = _skip(out, last, lambda r, row: out[r, 1:row.t] - clean[row.s][1:row.t])
                model.set_layers_output(L - 1, out)
        probs = probabilities(model.logits()[:, first:])  # only the positions some row measures
        clean = probs[0:1].clone()
        out_diff = torch.nn.functional.pad(probs.sub_(clean).norm(dim=-1), (first, 0))
        layer_max, out_max = _row_maxima(torch.stack(ratios), out_diff, keep)
        layer_max, out_max = layer_max.save(), out_max.save()
    return layer_max, out_max  # [L, B], [B]


def _stack_chunk(st, chunk: list[_Row], part: str, first: int, output: bool = True):
    """The fast path: all rows skip the same layer s; layers below s are reused from the clean run.

    Returns ``[L, B+1, T]`` ratios and ``[B+1, T]`` output differences (row 0 stands for the clean
    run, with zeros), for :func:`_row_maxima`; the output distribution is only computed from position
    ``first`` on, where it is measured, and not at all without ``output`` (the differences stay 0).
    """
    s, B, T, L = chunk[0].s, len(chunk), st.h(0).shape[1], st.L
    spans = [(r, row.t) for r, row in enumerate(chunk)]
    x = st.h(s).expand(B, -1, -1)
    if part == "layer":
        out = st.outputs[s].expand(B, -1, -1).clone()
        for r, t in spans:
            out[r, 1:t] = x[r, 1:t]
    else:
        with st.zeroed(s, part, spans):
            out = st.layer(s, x)
    ratios = torch.zeros(L, B + 1, T)

    def compare(j, x_in, o):
        d, d0 = o - x_in, st.deltas[j]
        ratios[j, 1:] = ((d.float() - d0.float()).norm(dim=-1) / d0.float().norm(dim=-1))
    h_L = st.run(out, s + 1, compare)
    out_diff = torch.zeros(B + 1, T)
    if output:
        probs = st.unembed(h_L[:, first:]).float().softmax(-1)
        out_diff[1:, first:] = (probs - st.clean_probs[:, first:]).norm(dim=-1)
    return ratios, out_diff


def _stack_wave(st, chunks: list, mode: str) -> list:
    """The fast path for the layer effect alone (no output), all skipped layers in one pass up the stack:
    layer ``j`` runs once on the batch of every row that skipped a layer below it (the row skipping
    ``s`` joins at ``s + 1``), so each layer call is one large product instead of one per skipped layer,
    at the same count of layer-passes, ``Σ_s (L-1-s)`` rows, as :func:`_stack_chunk`. Returns what
    :func:`run` returns for ``chunks``: each chunk's maxima (:func:`_row_maxima`)."""
    L, T = st.L, st.T
    rows = [row for chunk in chunks for row in chunk]
    ratios = torch.zeros(L, len(rows), T)
    x, active = None, []
    for j in range(1, L):
        enter = [i for i, row in enumerate(rows) if row.s == j - 1]
        if enter:
            new = st.outputs[j - 1].expand(len(enter), -1, -1).clone()
            for k, i in enumerate(enter):
                new[k, 1:rows[i].t] = st.h(j - 1)[0, 1:rows[i].t]
            x, active = (new if x is None else torch.cat([x, new])), active + enter
        out = st.layer(j, x)
        d0 = st.deltas[j].float()
        ratios[j, active] = (out.float() - x.float() - d0).norm(dim=-1) / d0.norm(dim=-1)
        x = out
    maxima, start = [], 0
    for chunk in chunks:
        mine = torch.cat([torch.zeros(L, 1, T), ratios[:, start:start + len(chunk)]], 1)
        maxima.append(_row_maxima(mine, torch.zeros(len(chunk) + 1, T), _measured(chunk, T, mode)))
        start += len(chunk)
    return maxima


@dataclass(frozen=True)
class Work:
    """One prompt's interventions: ``chunks`` of rows, each one forward (or, ``fast``, one stack run).
    Without ``output`` only the layer effect is wanted (:func:`fold` leaves the output effect NaN)."""
    ids: torch.Tensor
    chunks: list
    part: str
    mode: str
    local: bool
    fast: bool
    output: bool = True
    shared: bool = True
    work_bytes: int | None = None  # the stack path's working chunks (None: shared_prefix's sizes)


def work(model, enc, ts: Sequence[int], *, part: str = "layer", mode: str = "future", local: bool = False,
         fast: bool = False, batch_size: int | None = None, output: bool = True, shared: bool = True,
         work_bytes: int | None = None) -> Work:
    """The interventions that measure one prompt at positions ``ts``; ``output=False`` when only the
    layer effect is wanted (the fast path then skips the unembedding, the costliest step of a short model).
    ``shared=False`` keeps the fast path per skipped layer instead of :mod:`depthutils.measures.shared_prefix`'s."""
    L = model.n_layers
    rows = skip_rows(L, ts, local)
    if fast:
        chunks = [[r for r in rows if r.s == s] for s in range(L)]
    else:
        size = len(rows) if batch_size is None else batch_size - 1
        chunks = [rows[start:start + size] for start in range(0, len(rows), size)]
    return Work(enc.input_ids, chunks, part, mode, local, fast, output, shared, work_bytes)


def run(model, w: Work) -> list:
    """Every chunk of ``w``: each row's maxima, ``([L, B], [B])`` per chunk (see :func:`_row_maxima`).
    Batched chunks are nnsight traces, so :func:`depthutils.models.each.each` can send them to NDIF."""
    T = w.ids.shape[1]
    st = stack.Stack(model, w.ids) if w.fast else None
    if w.fast and w.part == "layer" and not w.local and not w.output:  # the depth score's skips: one wave up the stack
        return _stack_wave(st, w.chunks, w.mode)
    if w.fast and w.shared and w.chunks:
        ts = [row.t for row in w.chunks[0]]
        if shared_prefix.applies(st, ts):
            return shared_prefix.prompt_maxima(st, ts, w.part, w.mode, w.output, w.work_bytes)
    out = []
    for chunk in w.chunks:
        keep = _measured(chunk, T, w.mode)
        if w.fast:
            with torch.no_grad():
                first = 1 if w.mode == "all" else min(row.t for row in chunk)
                out.append(_row_maxima(*_stack_chunk(st, chunk, w.part, first, w.output), keep))
        else:
            out.append(_run_chunk(model, w.ids, chunk, w.part, w.local, keep))
    return out


def fold(L: int, w: Work, maxima: list) -> tuple[np.ndarray, np.ndarray]:
    """One prompt's ``layer_effect [L, L]`` (NaN where ``j ≤ s``) and ``output_effect [L]`` (NaN without
    ``w.output``): the maxima of :func:`run` over its rows, checked finite."""
    D, O = np.full((L, L), -np.inf), np.full(L, -np.inf)
    for chunk, (layer_max, out_max) in zip(w.chunks, maxima):
        layer_max, out_max = layer_max.double().cpu().numpy(), out_max.double().cpu().numpy()
        for i, row in enumerate(chunk):
            r, o = layer_max[:, i + 1], float(out_max[i + 1])
            if row.target is None:
                D[row.s, row.s + 1:] = np.maximum(D[row.s, row.s + 1:], r[row.s + 1:])
                O[row.s] = max(O[row.s], o)
            elif row.target < L:
                D[row.s, row.target] = max(D[row.s, row.target], r[row.target])
            else:
                O[row.s] = max(O[row.s], o)
    upper = np.triu(np.ones((L, L), bool), k=1)
    check_finite("future-effects layer effect", D[upper])
    if w.output:
        check_finite("future-effects output effect", O)
    else:
        O[:] = np.nan
    D[~upper] = np.nan
    return D, O
