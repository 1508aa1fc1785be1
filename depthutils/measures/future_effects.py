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

The rows of skipped layers and the paths that run them are :mod:`depthutils.measures.layer_skips`'s.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError
from depthutils.core.results import describe, make_meta
from depthutils.cost.accounting import BYTES, Acc, Cost, Shape, total, with_requests
from depthutils.cost.budget import budget_bytes, dtype_of, pick_batch, shape_of, work_bytes
from depthutils.cost.chunks import BATCH_BYTES, GROUP_BYTES
from depthutils.cost.passes import stack_bytes, stack_pass, trace_pass
from depthutils.measures import counted, shared_prefix
from depthutils.measures.example import Example, on_gsm
from depthutils.measures.future_effects_result import FutureEffectsResult
from depthutils.measures.layer_skips import fold, run, skip_rows, work
from depthutils.measures.shared_prefix import sample_positions
from depthutils.models import stack
from depthutils.models.each import each

PARTS = ("layer", "attn", "mlp")
MODES = ("future", "all")


def planned_batch(model, encs, used: list, part: str, mode: str, local: bool, budget: float, say: bool) -> int:
    """The batched path's rows per forward: the largest whose memory above the weights, on the longest prompt,
    the cost model (:func:`cost`) fits in ``budget`` bytes and :data:`~depthutils.cost.chunks.BATCH_BYTES` (the
    size tuned for speed), at most every
    intervention of a prompt and its clean row (:func:`depthutils.cost.budget.pick_batch`, which says so)."""
    shape, dtype = shape_of(model), dtype_of(model)
    i = max(range(len(encs)), key=lambda k: encs[k].n_tokens if used[k] else -1)
    largest = max(len(skip_rows(model.n_layers, ts, local)) for ts in used) + 1
    extra = lambda b: cost(shape, [encs[i].n_tokens], dtype, False, False, part=part,  # noqa: E731
                           mode=mode, positions=[used[i]], batch=b).peak
    return pick_batch("future effects", extra, largest, min(budget, BATCH_BYTES), say=say)


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
    :func:`~depthutils.measures.shared_prefix.positions_for_cost`). The fast path is :func:`~depthutils.measures.layer_skips._stack_wave` without
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
