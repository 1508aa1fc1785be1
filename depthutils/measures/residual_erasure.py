"""P1 §4 / Fig. 6b: erase the residual at one (layer, position) and watch the answer change.

For every ``l = 0 … L`` and non-BOS position ``t``, ``h_l[t]`` is replaced by a
baseline ``ĥ_l`` (by default the mean residual over every token of the first
10 GSM8K prompts), and the effect is ``max over answer positions of ‖p − p'‖₂``.

The text is cut after the last position that predicts an answer token, since
later tokens cannot change those logits; erasing them has effect 0.

Algorithms. On a local model whose fast path applies (``method="stack"``: float32, or bfloat16 on
batch-invariant kernels, :func:`depthutils.models.stack.usable`) the clean run is
computed once; an erasure at ``(l, t)`` changes nothing below layer ``l`` nor at
positions before ``t``, so for each ``t`` the erasures at every layer share one
pass over positions ``t … T-1`` that reuses the clean keys and values of the
positions before ``t`` (row ``l`` joins at layer ``l``): the least work the
measurement needs (spec §4), up to the few clean positions recomputed when two
neighbouring ``t`` share a pass (``SUFFIX_BLOCK``). Where a family's attention cannot reuse them, each
layer's erasures run positions ``0 … T-1`` instead. Otherwise (remote, bf16:
``method="batched"``) each layer's interventions share one batched nnsight
forward: row ``t`` erases position ``t``, row 0 (BOS, never intervened on) is the
clean run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils import data
from depthutils.core.depth import residual_depth
from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.progress import progress
from depthutils.core.prompts import as_prompt
from depthutils.core.results import Result, context_depth, describe, make_meta
from depthutils.cost.accounting import BYTES, Acc, Cost, Shape, with_requests
from depthutils.cost.budget import budget_bytes, dtype_of, pick_batch, shape_of
from depthutils.cost.passes import one_trace_per_prompt, stack_pass, trace_pass
from depthutils.measures import counted
from depthutils.measures.example import Example, arithmetic, on_gsm
from depthutils.models import stack
from depthutils.models.architectures import check_residual
from depthutils.models.each import each


@dataclass
class ErasureResult(Result):
    """``effect [L+1, T]`` (row ``l`` erases ``h_l``; column 0, BOS, is 0) and the ``tokens``."""

    effect: np.ndarray = None
    tokens: np.ndarray = None
    kind: ClassVar[str] = "residual_erasure"

    def facts(self) -> dict:
        """Largest effect and the deepest residual at which a context position still matters."""
        E = self.effect
        deep = context_depth(E, min(self.meta["params"]["predict_positions"]))
        rows = E.shape[0]
        return {"max_effect": round(float(E.max()), 3), "deepest": deep, "rows": rows,
                "deepest_rel": None if deep is None else round(residual_depth(deep, rows - 1), 2)}

    def findings(self) -> str:
        f = self.facts()
        where = (f"up to residual h_{f['deepest']} of h_0…h_{f['rows'] - 1}" if f["deepest"] is not None
                 else "at no layer")
        return (f"Largest effect {f['max_effect']:.3f}. Erasing a context position (before the answer is "
                f"predicted) changes the answer distribution by more than 10% of that {where}; above it, only "
                "the positions that predict the answer matter.")


def _prompt_sums(model, enc) -> torch.Tensor:
    """``[L+1, H]``: the sum of ``h_l`` over the tokens of one prompt, in float64 (one trace)."""
    L, T = model.n_layers, enc.n_tokens
    with model.no_grad(), model.trace(enc.input_ids):
        sums = nnsight.save([])  # made and saved inside the trace: a remote trace returns only saved names
        for l in range(L):
            sums.append(check_residual(model.layers_input(l), 1, T, f"layer {l} input")[0].double().sum(0).save())
        sums.append(check_residual(model.layers_output(L - 1), 1, T, "last layer output")[0].double().sum(0).save())
    return torch.stack(list(sums))


@counted
def residual_means(model, prompts, *, max_tokens: int | None = None, progress_bar: bool = True) -> np.ndarray:
    """``ĥ_l``: the mean of ``h_l`` over every token of ``prompts``, for ``l = 0 … L`` → ``[L+1, H]``.

    A prompt longer than ``max_tokens`` (default: the model's context) is cut to its first tokens.
    """
    prompts, encs, _ = encode_all(model, prompts, max_tokens=max_tokens)
    sums = each(model, _prompt_sums, encs, "residual means", enabled=progress_bar)
    total, count = torch.stack(sums).sum(0), sum(enc.n_tokens for enc in encs)
    return (total / count).float().cpu().numpy()


METHODS = ("auto", "stack", "stack-whole", "batched")


def _baseline_at(baseline: torch.Tensor, l: int, t: int) -> torch.Tensor:
    return baseline[l] if baseline.ndim == 2 else baseline[l, t]


#: Positions whose erasures share one pass (see :func:`_erase_suffixes`). 2 was the fastest on the
#: bench's 12x512 model on 2 CPU cores (about 1.4 s against 1.8 s for 1), for 5 % more layer-passes.
SUFFIX_BLOCK = 2


def _erase_suffixes(st, base: torch.Tensor, pred: torch.Tensor, effect: np.ndarray, progress_bar: bool,
                    block: int = SUFFIX_BLOCK) -> None:
    """Fill ``effect[:, t]`` for every ``t ≥ 1``. Positions are taken ``block`` at a time: for
    ``t0 … t0+block-1`` one pass runs positions ``t0 … T-1`` over the clean keys and values of the
    positions before ``t0``; row ``(l, t)`` erases ``h_l[t]`` and joins the batch at layer ``l``.
    ``block=1`` is the least work; a larger block trades a few clean positions recomputed for fewer,
    larger layer calls."""
    L, T = st.L, st.T
    H = st.h(0).shape[-1]
    clean = st.clean_probs[0, pred]  # [P, V]
    starts = [t0 for t0 in range(1, T, block) if bool((pred >= t0).any())]
    for t0 in progress(starts, "residual erasure", enabled=progress_bar):
        ts = torch.arange(t0, min(t0 + block, T))
        k, after = len(ts), pred >= t0
        rows = st.h(0).new_empty(((L + 1) * k, T - t0, H))  # row l*k + i erases h_l[t0 + i]
        with torch.inference_mode():
            for j in range(L + 1):
                rows[j * k:(j + 1) * k] = st.h(j)[0, t0:]
                for i, t in enumerate(ts.tolist()):
                    rows[j * k + i, t - t0] = _baseline_at(base, j, t).to(rows.dtype)
                if j < L:
                    rows[:(j + 1) * k] = st.suffix(j, rows[:(j + 1) * k], t0)
            probs = st.unembed(rows[:, pred[after] - t0]).float().softmax(-1)  # [(L+1)k, P', V]
            diff = (probs - clean[after]).norm(dim=-1).view(L + 1, k, -1)
            diff = diff.masked_fill(pred[after].view(1, 1, -1) < ts.view(1, k, 1), 0.0)  # answers before t
            effect[:, ts.numpy()] = diff.amax(dim=-1).double().cpu().numpy()


def _erase_batch(model, item) -> torch.Tensor:
    """One batched forward (row 0 clean): row ``r`` replaces ``h_l[ts[r-1]]`` by its baseline; returns each
    row's largest ``‖p − p_clean‖₂`` over the answer-predicting positions ``pred``, ``[B]``."""
    ids, pred, base, l, ts = item
    L, B, T = model.n_layers, len(ts) + 1, ids.shape[1]
    with model.no_grad(), model.trace(ids.expand(B, T)):
        x = model.layers_input(l) if l < L else model.layers_output(L - 1)
        x = check_residual(x, B, T, f"residual {l}").clone()
        for r, t in enumerate(ts, start=1):
            x[r, t] = _baseline_at(base, l, t).to(x.device, x.dtype)
        if l < L:
            model.set_layers_input(l, x)
        else:
            model.set_layers_output(L - 1, x)
        probs = model.logits()[:, pred].float().softmax(-1)
        diff = (probs - probs[0:1]).norm(dim=-1).amax(dim=-1).save()  # [B]
    return diff


def _fast(model, method: str) -> bool:
    """Whether ``method`` runs the stack path (:mod:`depthutils.models.stack`) on ``model``."""
    return method in ("stack", "stack-whole") or (method == "auto" and stack.usable(model))


@counted
def residual_erasure(model, prompt, answer: str | None = None, baseline=None, *, batch_size: int | None = None,
                     method: str = "auto", max_tokens: int | None = None, max_memory=None,
                     progress_bar: bool = True) -> ErasureResult:
    """The effect of erasing each residual ``h_l[t]`` on the answer's probability distribution.

    Args:
        prompt: a :class:`~depthutils.core.prompts.Prompt`, or the context string with ``answer``.
        baseline: ``[L+1, H]`` (one vector per layer) or ``[L+1, T, H]`` (per position);
            by default the mean residual of the first 10 GSM8K prompts.
        batch_size: rows per forward, clean row included, for the whole-sequence paths (the suffix path's
            batch is ``L + 1`` rows per position, at most :data:`SUFFIX_BLOCK` positions per pass, fewer where
            the cost model does not fit them in ``max_memory``); by default the largest that the cost model
            (:func:`cost`) fits in ``max_memory`` on a local model, at
            most all positions of a layer (:func:`depthutils.cost.budget.pick_batch`, which says so).
        max_memory: the memory budget of that choice, bytes or a size such as ``"8GB"`` (default: what
            the device has free).
        method: ``"stack"`` runs only layers ``l … L-1`` and positions ``t … T-1`` for an erasure at
            ``h_l[t]`` (local fp32 models; all positions where the family's attention cannot reuse the
            clean keys and values); ``"stack-whole"`` always runs all positions; ``"batched"`` runs the
            whole model with the clean run as row 0 (remote, bf16); ``"auto"`` picks ``"stack"`` where
            it applies.
        max_tokens: the prompt's answer must end within this many tokens (default: the model's
            context); the default baseline's prompts are cut to it.
    """
    p = as_prompt(prompt, answer)
    (p,), (enc,), fit = encode_all(model, [p], need_answer=True, max_tokens=max_tokens)
    L = model.n_layers
    if baseline is None:
        baseline = residual_means(model, data.gsm8k(10), max_tokens=max_tokens, progress_bar=progress_bar)
    # float32 here: a remote handle's dtype is what NDIF's GPUs run (bf16), not what its server may
    # run; each baseline vector is cast to the residual's own dtype where it is written
    base = torch.as_tensor(np.asarray(baseline), dtype=torch.float32)
    T_full = enc.n_tokens
    if base.shape[0] != L + 1 or base.ndim not in (2, 3) or (base.ndim == 3 and base.shape[1] < T_full):
        raise DepthError(f"baseline must be [L+1={L + 1}, H] or [L+1, T={T_full}, H], got {tuple(base.shape)}.")
    T = max(enc.predict_positions) + 1  # later tokens cannot change the answer's logits
    ids = enc.input_ids[:, :T]
    pred = torch.tensor(enc.predict_positions)
    effect = np.zeros((L + 1, T_full))
    size = (T - 1) if batch_size is None else batch_size - 1
    if size < 1:
        raise DepthError("batch_size must be at least 2 (the clean row plus one intervention).")
    if method not in METHODS:
        raise DepthError(f"method must be one of {METHODS}, got {method!r}.")
    fast = _fast(model, method)
    st = stack.Stack(model, ids) if fast else None
    suffix = fast and method != "stack-whole" and st.suffix_ok()
    if batch_size is None and not suffix and not model.remote:  # rows per forward from the plan and the budget
        extra = lambda b: cost(shape_of(model), T, len(pred), dtype_of(model), fast, False,  # noqa: E731
                                              batch=b, suffix=False).peak
        size = pick_batch("residual erasure", extra, T, budget_bytes(model, max_memory), say=progress_bar) - 1
    if suffix:  # positions per pass from the plan and the budget (at most SUFFIX_BLOCK)
        extra = lambda b: cost(shape_of(model), T, len(pred), dtype_of(model), True, False,  # noqa: E731
                                              suffix=True, block=b).peak
        block = pick_batch("residual erasure (positions per pass)", extra, SUFFIX_BLOCK,
                           budget_bytes(model, max_memory), smallest=1, say=progress_bar)
        _erase_suffixes(st, base, pred, effect, progress_bar, block)
    elif fast:
        for l in progress(range(L + 1), "residual erasure", enabled=progress_bar):
            for start in range(1, T, size):
                ts = list(range(start, min(start + size, T)))
                with torch.no_grad():
                    x = st.h(l).expand(len(ts), -1, -1).clone()
                    for r, t in enumerate(ts):
                        x[r, t] = _baseline_at(base, l, t).to(x.dtype)
                    probs = st.unembed(st.run(x, l)[:, pred]).float().softmax(-1)
                    effect[l, ts] = (probs - st.clean_probs[:, pred]).norm(dim=-1).amax(dim=-1).double().cpu().numpy()
    else:
        # every item holds the same baseline tensor, which a request therefore carries once
        items = [(ids, pred, base, l, list(range(start, min(start + size, T))))
                 for l in range(L + 1) for start in range(1, T, size)]
        for (*_, l, ts), diff in zip(items, each(model, _erase_batch, items, "residual erasure",
                                                     enabled=progress_bar)):
            effect[l, ts] = diff[1:].double().cpu().numpy()
    check_finite("erasure effect", effect)
    meta = make_meta(model, dataset=describe([p])[0], n=1, fit=fit, prompt=p.context, answer=p.answer,
                     predict_positions=enc.predict_positions,
                     baseline="custom" if baseline is not None else "gsm8k-10-mean", batch_size=batch_size,
                     method=("stack-suffix" if suffix else "stack") if fast else "batched")
    return ErasureResult(meta=meta, effect=effect, tokens=np.array(enc.tokens))


def cost(s: Shape, T: int, n_pred: int, dtype: str, fast: bool, remote: bool,
                     batch: int | None = None, suffix: bool = True, block: int = 2) -> Cost:
    """One prompt's erasure, ``T`` its tokens up to the last answer-predicting one."""
    L = s.layers
    a = Acc(s, "residual_erasure", T)
    if fast:
        saved = stack_pass(a, s, T, dtype)
        work = 0.0
        if suffix:
            a.layers(L, 1, T)  # the clean keys and values (Stack.kv)
            a.layers(2, 1, T // 2)  # suffix_ok
            for t0 in range(1, T, block):
                k = min(block, T - t0)
                for j in range(L):
                    a.layers(1, (j + 1) * k, T - t0, context=T)
                    a.c.windows += 1
                a.unembed((L + 1) * k, n_pred)
                rows = (L + 1) * k
                work = max(work, rows * (T - t0) * s.hidden * BYTES[dtype] + s.act_bytes(rows, T - t0, dtype)
                           + s.logit_bytes(rows, n_pred))
        else:
            size = T - 1 if batch is None else batch - 1
            for l in range(L + 1):
                for start in range(1, T, size):
                    r = min(size, T - start)
                    a.layers(L - l, r, T)
                    a.unembed(r, n_pred)
                    work = max(work, s.act_bytes(r, T, dtype) + s.logit_bytes(r, n_pred))
        return with_requests(a.done(saved, work, batch=(L + 1) * block if suffix else batch), remote)
    size = T - 1 if batch is None else max(1, batch - 1)
    items, work = 0, 0.0
    for _ in range(L + 1):
        for start in range(1, T, size):
            r = min(size, T - start) + 1
            work = max(work, trace_pass(a, s, r, T, dtype) + s.logit_bytes(r, n_pred))
            items += 1
    return with_requests(a.done(0.0, work, download=4 * (T + items), batch=size + 1), remote)


def means_cost(s: Shape, Ts, dtype: str, remote: bool) -> Cost:
    """What :func:`residual_means` runs: one forward per baseline prompt, nothing saved per token."""
    return one_trace_per_prompt(s, Ts, dtype, remote, "residual_means", per_token=0)


def example(model, **options) -> Example:
    """P1's arithmetic prompt erased against a constant baseline (:mod:`depthutils.measures.example`)."""
    prompt, T, n_pred = arithmetic(model)
    baseline = [[0.01] * model.config.hidden_size] * (model.n_layers + 1)
    return Example(lambda: residual_erasure(model, prompt, baseline=baseline, progress_bar=False, **options),
                   {"T": T - 1, "n_pred": n_pred, "fast": _fast(model, options.get("method", "auto"))})


def means_example(model, **options) -> Example:
    """One GSM8K problem cut to a few tokens (:mod:`depthutils.measures.example`)."""
    return on_gsm(residual_means, model, options)
