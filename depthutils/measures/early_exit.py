"""Is the second half's refinement needed, or could it be cut? (a reviewer's question on P1's late layers)

Early exit: at every answer token, the residual ``h_l`` entering layer ``l`` is decoded directly with the model's
final norm and unembedding (the logit lens of chapter 3, ``l = 0 … L−1``; exit ``L`` is the model's own output),
and its top-1 token is compared with the gold token (*gold accuracy*) and with the full model's top-1 (*top-1
agreement*). The model with its whole second half skipped (layers ``L//2 … L−1`` pass their input through) outputs
the lens on ``h_{L//2}``: its final norm and unembedding see the residual after the first half (the tests run
that model and check it).

With a cheap readout (the tuned readout of :mod:`depthutils.measures.tuned_lens`: the same final norm, an affine map
per layer fitted on held-out prompts, then the same unembedding), each exit ``l`` is decoded from
``A_l norm(h_l) + b_l`` instead, and the model cut after its first half outputs that readout on ``h_{L//2}``: the
model with its second half replaced by one affine map after the final norm.

The graded statistic (:mod:`depthutils.book.reviews.early_exit`) is the share of the answer tokens the full model
gets right that the cut model with the tuned readout gets wrong (``tuned_lost``); the raw lens's share (``lost``)
stands beside it. Each is the accuracy the second half adds, as a share of the full model's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.depth import residual_depth
from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.results import Result, describe, make_meta
from depthutils.core.softmax import logsumexp, probabilities
from depthutils.cost.accounting import Acc, Cost, Shape
from depthutils.cost.passes import one_trace_per_prompt
from depthutils.measures import counted
from depthutils.measures.example import Example, addition
from depthutils.measures.tuned_lens import Readouts, final_norm, fit_time
from depthutils.models.architectures import check_residual, get_path
from depthutils.models.each import each

__all__ = ["EarlyExitResult", "early_exit", "prompt_exits", "cost", "example", "FORMED"]

#: "the prediction has formed" at the first exit whose gold accuracy reaches this share of the full model's (ours)
FORMED = 0.5


@dataclass
class EarlyExitResult(Result):
    """Per prompt (a mean over its answer tokens) and exit ``l = 0 … L`` (``L``: the full model's output):
    ``gold_by_prompt`` ``[N, L+1]`` (top-1 is the gold token) and ``agree_by_prompt`` ``[N, L+1]`` (top-1 is the full
    model's). With the second half skipped: ``skip_gold_by_prompt``, ``skip_agree_by_prompt`` ``[N]``. The counts
    behind the graded share: ``correct_by_prompt`` (answer tokens the full model gets right) and ``kept_by_prompt``
    (those the half model gets right too). With the tuned readout (NaN where none was given):
    ``tuned_gold_by_prompt`` ``[N, L]`` (exits ``0 … L−1``), ``tuned_skip_gold_by_prompt``,
    ``tuned_skip_agree_by_prompt`` and ``tuned_kept_by_prompt`` ``[N]`` (the cut model with the readout on
    ``h_{L//2}``). The readout check (:mod:`depthutils.book.reviews.readout_check`), per exit
    ``l = 0 … L−1``, also with the tuned readout only: ``kept_at_by_prompt`` and ``tuned_kept_at_by_prompt``
    ``[N, L]`` (answer tokens the full model gets right that the raw lens / the tuned readout on ``h_l`` gets right
    too) and ``kl_by_prompt`` and ``tuned_kl_by_prompt`` ``[N, L]`` (``KL(q_L ‖ q_l)`` and ``KL(q_L ‖ q̃_l)`` in
    nats, the model's output first, averaged over the answer tokens). Aggregates: plain means over prompts."""

    gold: np.ndarray = None
    agree: np.ndarray = None
    skip_gold: np.ndarray = None
    skip_agree: np.ndarray = None
    correct: np.ndarray = None
    kept: np.ndarray = None
    gold_by_prompt: np.ndarray = None
    agree_by_prompt: np.ndarray = None
    skip_gold_by_prompt: np.ndarray = None
    skip_agree_by_prompt: np.ndarray = None
    correct_by_prompt: np.ndarray = None
    kept_by_prompt: np.ndarray = None
    tuned_gold: np.ndarray = None
    tuned_skip_gold: np.ndarray = None
    tuned_skip_agree: np.ndarray = None
    tuned_kept: np.ndarray = None
    tuned_gold_by_prompt: np.ndarray = None
    tuned_skip_gold_by_prompt: np.ndarray = None
    tuned_skip_agree_by_prompt: np.ndarray = None
    tuned_kept_by_prompt: np.ndarray = None
    kept_at: np.ndarray = None
    tuned_kept_at: np.ndarray = None
    kl: np.ndarray = None
    tuned_kl: np.ndarray = None
    kept_at_by_prompt: np.ndarray = None
    tuned_kept_at_by_prompt: np.ndarray = None
    kl_by_prompt: np.ndarray = None
    tuned_kl_by_prompt: np.ndarray = None
    kind: ClassVar[str] = "early_exit"
    PER_PROMPT: ClassVar[dict] = {k: (f"{k}_by_prompt", "mean")
                                  for k in ("gold", "agree", "skip_gold", "skip_agree", "correct", "kept",
                                            "tuned_gold", "tuned_skip_gold", "tuned_skip_agree", "tuned_kept",
                                            "kept_at", "tuned_kept_at", "kl", "tuned_kl")}
    INTERVAL_FACTS: ClassVar[tuple] = ("full_gold", "skip_gold", "added", "lost", "skip_agree", "tuned_skip_gold",
                                       "tuned_lost")

    def __post_init__(self):
        n = 0 if self.gold_by_prompt is None else len(self.gold_by_prompt)
        L = 0 if self.gold_by_prompt is None else self.gold_by_prompt.shape[-1] - 1
        for k, shape in (("tuned_gold", (n, L)), ("tuned_skip_gold", (n,)), ("tuned_skip_agree", (n,)),
                         ("tuned_kept", (n,)), ("kept_at", (n, L)), ("tuned_kept_at", (n, L)), ("kl", (n, L)),
                         ("tuned_kl", (n, L))):
            if getattr(self, f"{k}_by_prompt") is None:  # measured without a tuned readout
                setattr(self, f"{k}_by_prompt", np.full(shape, np.nan))

    def facts(self) -> dict:
        """The numbers the prose states, rounded as printed (None: undefined, e.g. ``lost`` when the full model
        gets no answer token right)."""
        L = len(self.gold) - 1
        full = float(self.gold[L])
        reach = [l for l in range(L + 1) if full > 0 and self.gold[l] >= FORMED * full]
        formed = reach[0] if reach else None
        lost = None if self.correct <= 0 else 1 - float(self.kept) / float(self.correct)
        tuned = None if self.correct <= 0 or not np.isfinite(self.tuned_kept) else \
            1 - float(self.tuned_kept) / float(self.correct)
        t_reach = [l for l in range(L) if full > 0 and self.tuned_gold[l] >= FORMED * full]
        nan = lambda x: None if not np.isfinite(x) else round(float(x), 3)  # noqa: E731
        return {"tuned_skip_gold": nan(self.tuned_skip_gold), "tuned_skip_agree": nan(self.tuned_skip_agree),
                "tuned_lost": None if tuned is None else round(tuned, 3),
                "tuned_formed_layer": t_reach[0] if t_reach else None,
                "fit_tokens": self.meta.get("params", {}).get("fit_tokens") if self.meta else None,
                "fit_time": fit_time(self.meta),
                "L": L, "half": L // 2, "full_gold": round(full, 3), "skip_gold": round(float(self.skip_gold), 3),
                "added": round(full - float(self.skip_gold), 3), "skip_agree": round(float(self.skip_agree), 3),
                "lost": None if lost is None else round(lost, 3), "formed_layer": formed,
                "formed_rel": None if formed is None else round(residual_depth(formed, L), 2),
                "n": self.n_prompts, "answer_tokens": int(self.meta.get("params", {}).get("answer_tokens", 0))}

    def findings(self) -> str:
        f = self.facts()
        lost = "undefined (the full model gets no answer token right)" if f["lost"] is None else f"{f['lost']:.2f}"
        formed = "never" if f["formed_layer"] is None else f"at exit {f['formed_layer']} of {f['L']}"
        tuned = "" if f["tuned_skip_gold"] is None else (
            f" With the tuned readout on h_{f['half']} instead: gold accuracy {f['tuned_skip_gold']:.2f}, share lost "
            + ("undefined" if f["tuned_lost"] is None else f"{f['tuned_lost']:.2f}") + ".")
        return (f"Gold accuracy: full model {f['full_gold']:.2f}, second half skipped {f['skip_gold']:.2f} (the half "
                f"model agrees with the full one on {f['skip_agree']:.2f} of the answer tokens); share of the full "
                f"model's correct answer tokens lost without the second half: {lost}. The lens reaches {FORMED} of "
                f"the full accuracy {formed}.{tuned}")


def prompt_exits(model, item) -> torch.Tensor:
    """``[L + 1, P]`` for one prompt's ``P`` answer tokens: the top-1 token of the lens on each ``h_l``
    (``l = 0 … L−1``) and of the model's output (one trace). Row ``L // 2`` is also the output of the model with
    layers ``L//2 … L−1`` skipped: skipping a layer passes its input through, so that model's final norm and
    unembedding see ``h_{L//2}`` (the tests run the skipped model and check it).

    ``item`` is the prompt's encoding, or ``(encoding, readouts)``: then ``3L`` more rows follow, computed after
    the trace from each ``h_l`` and the model's logits (:func:`_readout_rows`)."""
    enc, readouts = item if isinstance(item, tuple) else (item, None)
    L, T = model.n_layers, enc.n_tokens
    pp = list(enc.predict_positions)
    with model.no_grad(), model.trace(enc.input_ids):
        tops, hs = nnsight.save([]), nnsight.save([])
        for l in range(L):
            h = check_residual(model.layers_input(l), 1, T, f"layer {l} input")
            tops.append(model.lens(h[:, pp]).float().argmax(-1)[0].save())
            hs.append(h[0, pp].save())
        logits = model.logits()[0, pp]
        tops.append(logits.float().argmax(-1).save())
        final = logits.save() if readouts is not None else None  # a name set inside the trace is set by a value
    rows = list(tops)
    if readouts is not None:
        rows += _readout_rows(model, readouts, torch.stack(list(hs)), final.float().cpu())
    return torch.stack(rows).cpu().to(torch.float64)


def _readout_rows(model, readouts: Readouts, hs: torch.Tensor, final: torch.Tensor) -> list:
    """``3L`` rows ``[P]`` from the layer inputs ``hs`` ``[L, P, H]`` at ``P`` positions and the model's logits
    there, ``final`` ``[P, V]``: the tuned readout's top-1 on each ``h_l``, then ``KL(q_L ‖ q_l)`` of the raw lens on
    each, then ``KL(q_L ‖ q̃_l)`` of the tuned readout, the output first (the tuned lens's objective):
    ``KL(q_L ‖ q) = Σ_v q_L(v)(z_L(v) − z(v)) − lse(z_L) + lse(z)``, with no subnormal term
    (:mod:`depthutils.core.softmax`)."""
    head = get_path(model.nn._module, model.arch.unembed)
    q_final, lse_final = probabilities(final), logsumexp(final)
    tops, kls = [], {"raw": [], "tuned": []}
    with torch.no_grad():
        for l in range(hs.shape[0]):
            for who, x in (("raw", final_norm(model, hs[l])), ("tuned", readouts.apply(model, hs[l:l + 1], [l])[0])):
                z = model.finish_logits(head(x)).float().cpu()  # [P, V]
                kls[who].append((q_final * (final - z)).sum(-1) - lse_final + logsumexp(z))
                if who == "tuned":
                    tops.append(z.argmax(-1))
    return tops + kls["raw"] + kls["tuned"]


@counted
def early_exit(model, prompts, *, readouts: Readouts | None = None, max_tokens: int | None = None,
               progress_bar: bool = True) -> EarlyExitResult:
    """Gold accuracy and top-1 agreement with the full model of every early exit, and of the model with its
    second half skipped, at the answer tokens of ``prompts`` (each needs an answer); with ``readouts`` (from
    :func:`~depthutils.measures.tuned_lens.fit_readouts`, on held-out prompts) the same for the tuned readout. One
    forward per prompt; a prompt longer than ``max_tokens`` (default: the model's context) is skipped (its answer
    would be cut)."""
    if model.n_layers < 2:
        raise DepthError(f"early_exit needs at least 2 layers to skip a second half; the model has {model.n_layers}.")
    prompts, encs, fit = encode_all(model, prompts, need_answer=True, max_tokens=max_tokens)
    L = model.n_layers
    per = {k: [] for k in EarlyExitResult.PER_PROMPT}
    items = encs if readouts is None else [(e, readouts) for e in encs]
    for enc, s in zip(encs, each(model, prompt_exits, items, "early exit", enabled=progress_bar)):
        gold_ids = torch.tensor(enc.answer_ids, dtype=torch.float64)
        exits, skip = s[:L + 1], s[L // 2]
        full_ok, skip_ok = exits[L] == gold_ids, skip == gold_ids
        per["gold"].append((exits == gold_ids).double().mean(-1).numpy())
        per["agree"].append((exits == exits[L]).double().mean(-1).numpy())
        per["skip_gold"].append(float(skip_ok.double().mean()))
        per["skip_agree"].append(float((skip == exits[L]).double().mean()))
        per["correct"].append(float(full_ok.sum()))
        per["kept"].append(float((full_ok & skip_ok).sum()))
        if readouts is not None:
            tuned, raw_kl, tuned_kl = s[L + 1:2 * L + 1], s[2 * L + 1:3 * L + 1], s[3 * L + 1:]
            t_ok = tuned[L // 2] == gold_ids
            per["tuned_gold"].append((tuned == gold_ids).double().mean(-1).numpy())
            per["tuned_skip_gold"].append(float(t_ok.double().mean()))
            per["tuned_skip_agree"].append(float((tuned[L // 2] == exits[L]).double().mean()))
            per["tuned_kept"].append(float((full_ok & t_ok).sum()))
            per["kept_at"].append((full_ok & (exits[:L] == gold_ids)).double().sum(-1).numpy())
            per["tuned_kept_at"].append((full_ok & (tuned == gold_ids)).double().sum(-1).numpy())
            per["kl"].append(check_finite("early-exit KL of the raw lens", raw_kl.mean(-1).numpy()))
            per["tuned_kl"].append(check_finite("early-exit KL of the tuned readout", tuned_kl.mean(-1).numpy()))
    if not encs:
        raise DepthError("early_exit has no prompt left to measure: every prompt was longer than max_tokens.")
    ds, n = describe(prompts)
    fitted = {} if readouts is None else {"fit_tokens": readouts.tokens, "fit_seconds": round(readouts.seconds, 1),
                                          "fit_texts": readouts.n_texts, "fit_dataset": readouts.dataset,
                                          "fit_at": readouts.at}
    return EarlyExitResult(meta=make_meta(model, dataset=ds, n=n, fit=fit,
                                          answer_tokens=sum(len(e.answer_ids) for e in encs), **fitted),
                           **{f"{k}_by_prompt": np.asarray(v, float) for k, v in per.items() if v}
                           ).with_aggregates()


def cost(s: Shape, Ts, answers, dtype: str, remote: bool, readouts: bool = False) -> Cost:
    """What :func:`early_exit` runs on prompts of ``Ts`` tokens with ``answers`` answer tokens each: one nnsight
    forward per prompt, the lens decoded in the trace at the answer's positions of every layer; with ``readouts``,
    the model's logits there saved, and after the trace ``2L`` rows per answer token decoded (the tuned readout, and
    the raw lens again for its KL)."""
    c = one_trace_per_prompt(s, Ts, dtype, remote, "early_exit", lens="traced", per_token=0, lens_at=answers)
    c.download += sum(4 * s.layers * P * s.hidden for P in answers)  # each layer's residual at the answer
    if not readouts:
        return c
    c.download += sum(4 * P * s.vocab for P in answers)  # the logits at the answer
    after = Acc(s, "early_exit", max(Ts))  # after the trace: one affine map per layer and token, 2L decodings
    for P in answers:
        after.unembed(2 * s.layers * P, 1)
        after.c.flops_fwd += s.layers * P * 2 * s.hidden * s.hidden
    return c + after.done(0.0, 0.0)


def example(model, **options) -> Example:
    """One three-operand addition prompt with its answer (:mod:`depthutils.measures.example`)."""
    prompts, enc = addition(model)
    return Example(lambda: early_exit(model, prompts, progress_bar=False, **options),
                   {"Ts": [enc.n_tokens], "answers": [len(enc.answer_ids)]})
