"""P1 §2 / Fig. 3: the effect of skipping a layer on later layers and on the output.

To skip layer ``s`` on positions ``[1, t)`` set ``h_{s+1}[p] := h_s[p]`` there
(``part="layer"``), or zero ``a_s`` / ``m_s`` there (``part="attn"`` / ``"mlp"``).
Then, over the measured positions ``p ≥ t``:

* ``layer_effect[s, j] = max_p ‖Δ_j[p] − Δ'_j[p]‖ / ‖Δ_j[p]‖`` for ``j > s``;
* ``output_effect[s] = max_p ‖softmax(z[p]) − softmax(z'[p])‖₂``;

both maximised over the sampled ``t`` and then over prompts. Every
intervention of a prompt runs as one row of a batched forward whose row 0 is
the clean run, so the clean reference always comes from the same batch.

``local=True`` gives the direct-only variant: for each pair ``s < j`` only the
input of layer ``j`` loses ``s``'s contribution on the skipped positions
(``h_j − Δ_s``), every other layer sees the clean residual. Its output effect
removes ``Δ_s`` from the final residual on the skipped positions only, so in
``mode="future"`` it is exactly 0: no direct path leads from a position
``< t`` to the output at ``p ≥ t``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.results import describe, make_meta
from depthutils.core.softmax import probabilities
from depthutils.cost.accounting import BYTES, Acc, Cost, Shape, total, with_requests
from depthutils.cost.budget import budget_bytes, dtype_of, pick_batch, shape_of, work_bytes
from depthutils.cost.chunks import BATCH_BYTES, GROUP_BYTES
from depthutils.cost.passes import stack_bytes, stack_pass, trace_pass
from depthutils.measures import counted, shared_prefix
from depthutils.measures.example import Example, on_gsm
from depthutils.measures.future_effects_result import FutureEffectsResult
from depthutils.measures.shared_prefix import sample_positions
from depthutils.models import stack
from depthutils.models.architectures import check_residual
from depthutils.models.each import each

PARTS = ("layer", "attn", "mlp")
MODES = ("future", "all")


@dataclass(frozen=True)
class _Row:
    s: int                 # skipped layer
    t: int                 # skip positions [1, t); measure [t, T) (mode "future") or [1, T)
    target: int | None     # local variant: the one layer (or L for the output) that sees the skip


def _rows(L: int, ts: Sequence[int], local: bool) -> list[_Row]:
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


def planned_batch(model, encs, used: list, part: str, mode: str, local: bool, budget: float, say: bool) -> int:
    """The batched path's rows per forward: the largest whose memory above the weights, on the longest prompt,
    the cost model (:func:`cost`) fits in ``budget`` bytes and :data:`~depthutils.cost.chunks.BATCH_BYTES` (the
    size tuned for speed), at most every
    intervention of a prompt and its clean row (:func:`depthutils.cost.budget.pick_batch`, which says so)."""
    shape, dtype = shape_of(model), dtype_of(model)
    i = max(range(len(encs)), key=lambda k: encs[k].n_tokens if used[k] else -1)
    largest = max(len(_rows(model.n_layers, ts, local)) for ts in used) + 1
    extra = lambda b: cost(shape, [encs[i].n_tokens], dtype, False, False, part=part,  # noqa: E731
                           mode=mode, positions=[used[i]], batch=b).peak
    return pick_batch("future effects", extra, largest, min(budget, BATCH_BYTES), say=say)


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
    rows = _rows(L, ts, local)
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


def _fast(model, method: str, local: bool) -> bool:
    """Whether ``method`` runs the stack path (:mod:`depthutils.models.stack`) on ``model``."""
    return method == "stack" or (method == "auto" and stack.usable(model) and not local)


@counted
def future_effects(model, prompts, *, part: str = "layer", mode: str = "future",
                   positions: Sequence[int] | None = None, seed: int = 123, local: bool = False,
                   n_positions: int = 4, batch_size: int | None = None, method: str = "auto",
                   max_tokens: int | None = None, max_memory=None, progress_bar: bool = True) -> FutureEffectsResult:
    """How much skipping each layer changes every later layer and the output distribution.

    Args:
        part: ``"layer"`` skips the whole layer; ``"attn"`` / ``"mlp"`` zero that sublayer.
        mode: ``"future"`` skips ``[1, t)`` and measures ``p ≥ t``; ``"all"`` skips and
            measures every non-BOS position.
        positions: the ``t`` values; by default P1's sampling (:func:`sample_positions`).
        seed: the seed of P1's sampling (123).
        local: the direct-only variant (see the module docstring).
        batch_size: rows per forward, clean row included (default: on the batched path of a local model, the
            largest that the cost model fits in ``max_memory`` and ``BATCH_BYTES``, at most all interventions of a prompt;
            see :func:`planned_batch`).
        max_memory: the memory budget of that choice, bytes or a size such as ``"8GB"`` (default: what
            the device has free).
        method: ``"stack"`` re-runs only the layers above each skipped one (local fp32 models,
            see :mod:`depthutils.models.stack`), every skipped layer a row of one batch per layer, and the
            rows with a smaller ``t`` only from ``t`` on (:mod:`depthutils.measures.shared_prefix`); ``"batched"`` runs every intervention of a prompt as a
            row of one nnsight forward, clean row included (remote, bf16, ``local=True``);
            ``"auto"`` picks ``"stack"`` where it applies.
        max_tokens: a prompt longer than this (default: the model's context) is cut to its
            first ``max_tokens`` tokens; the result records how many were cut.
    """
    if part not in PARTS:
        raise DepthError(f"part must be one of {PARTS}, got {part!r}.")
    if mode not in MODES:
        raise DepthError(f"mode must be one of {MODES}, got {mode!r}.")
    if method not in ("auto", "stack", "batched"):
        raise DepthError(f"method must be 'auto', 'stack' or 'batched', got {method!r}.")
    fast = _fast(model, method, local)
    if fast and (local or not stack.usable(model)):
        raise DepthError("method='stack' needs a local model in float32 (or in bfloat16 on batch-invariant kernels, see "
                         "depthutils.models.stack.batch_invariant) and local=False; use method='batched'.")
    if batch_size is not None and batch_size < 2:
        raise DepthError("batch_size must be at least 2 (the clean row plus one intervention).")
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    L = model.n_layers
    used = []
    for enc in encs:
        T = enc.n_tokens
        if mode == "all":
            ts = [T]
        else:
            ts = sorted(positions) if positions is not None else sample_positions(T, seed, n_positions)
            bad = [t for t in ts if not 1 <= t < T]
            if bad:
                raise DepthError(f"Position(s) {bad} are out of range for a prompt of {T} tokens; use 1 ≤ t < {T}.")
        used.append(ts)
    if batch_size is None and not fast and not model.remote and any(used):
        batch_size = planned_batch(model, encs, used, part, mode, local, budget_bytes(model, max_memory), progress_bar)
    wb = None
    if fast and any(used):  # the stack path's groups of rows within what the budget leaves
        T_max = max(e.n_tokens for e, ts in zip(encs, used) if ts)
        wb = work_bytes(model, max_memory, stack_bytes(shape_of(model), T_max, dtype_of(model)),
                        GROUP_BYTES, "future effects (stack path)", progress_bar)
    works = [work(model, enc, ts, part=part, mode=mode, local=local, fast=fast, batch_size=batch_size, work_bytes=wb)
             for enc, ts in zip(encs, used) if ts]
    maxima = each(model, run, works, f"future effects ({part}, {mode})", enabled=progress_bar,
                  nbytes=lambda w: 4 * (L + 1) * sum(len(c) + 1 for c in w.chunks))
    Ds, Os = zip(*(fold(L, w, m) for w, m in zip(works, maxima))) if works else ((), ())
    if not Ds:
        raise DepthError("No prompt is long enough for P1's position sampling (needs ≥ 13 tokens); "
                         "pass positions=[...] or mode='all'.")
    ds, n = describe(prompts)
    meta = make_meta(model, dataset=ds, n=n, seed=seed, fit=fit, part=part, mode=mode, local=local,
                     positions=used, n_positions=n_positions, method="stack" if fast else "batched")
    return FutureEffectsResult(meta=meta, layer_effect_by_prompt=np.stack(Ds),
                               output_effect_by_prompt=np.stack(Os)).with_aggregates()


def cost(s: Shape, Ts, dtype: str, fast: bool, remote: bool, *, n_t: int = 4, part: str = "layer",
         mode: str = "future", output: bool = True, batch: int | None = None, what="future_effects",
         positions: list | None = None, work_bytes: int | None = None) -> Cost:
    """What :func:`future_effects` runs on prompts of ``Ts`` tokens (``output=False``, ``n_t`` per prompt: the
    depth score's interventions); ``positions`` gives each prompt's ``t`` (default:
    :func:`~depthutils.measures.shared_prefix.positions_for_cost`). The fast path is :func:`_stack_wave` without
    the output, else :func:`depthutils.measures.shared_prefix.cost`; the batched path runs ``k·L`` rows in
    forwards of ``batch`` rows, each with the clean row, and the output distributions from the chunk's first
    measured position on."""
    L, costs = s.layers, []
    for i, T in enumerate(Ts):
        a = Acc(s, what, T)
        ts = [T] if mode == "all" else (positions[i] if positions is not None else
                                        shared_prefix.positions_for_cost(T, n_t))
        k = len(ts)
        if fast:
            saved = stack_pass(a, s, T, dtype)
            if part == "layer" and not output:  # _stack_wave: layer j on the k·j rows that skipped below it
                for j in range(1, L):
                    a.layers(1, k * j, T)
                rows = k * max(L - 1, 1)
                costs.append(a.done(saved, 2 * rows * T * s.hidden * BYTES[dtype] + s.act_bytes(rows, T, dtype),
                                    batch=k))
                continue
            work, rows = shared_prefix.cost(a, s, T, ts, dtype, part, mode, output, work_bytes)
            costs.append(a.done(saved, work, batch=rows))
        else:
            rows = k * L
            size = rows if batch is None else max(1, batch - 1)
            chunks = math.ceil(rows / size)
            work = 0.0
            for c in range(chunks):
                r = min(size, rows - c * size) + 1
                first = 1 if mode == "all" else min(sorted(ts)[c * size // L], T - 1)  # the chunk's first measured
                work = max(work, trace_pass(a, s, r, T, dtype) + s.logit_bytes(r, T - first))
            costs.append(a.done(0.0, work, download=4 * (L + 1) * (rows + chunks), batch=size + 1))
    return with_requests(total(costs), remote)


def example(model, **options) -> Example:
    """One GSM8K problem cut to a few tokens (:mod:`depthutils.measures.example`)."""
    return on_gsm(future_effects, model, options, fast=_fast(model, options.get("method", "auto"), False))
