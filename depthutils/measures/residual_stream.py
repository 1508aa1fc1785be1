"""The residual stream, read: ``h_{l+1} = h_l + a_l + m_l`` checked layer by layer, and position 0's sink.

For every layer ``l`` of every prompt, with ``a_l`` and ``m_l`` what the attention and the MLP *add* to
the residual (the family adapter's reading: post-norms and multipliers included):

* ``error[l]``: ``max over tokens of ‖h_{l+1} − (h_l + a_l + m_l)‖ / ‖h_{l+1}‖``, 0 up to rounding;
* ``raw_error[l]``: the same with the raw module outputs in place of ``a_l`` and ``m_l``; it equals
  ``error`` on a plain pre-norm model (Llama) and is of order 1 where the family normalises or scales
  a sublayer's output before adding it (OLMo 2, Gemma 2/3, Granite);
* ``sink[l]``: the mean attention weight that queries at positions ≥ 1 put on position 0 (over heads
  and queries), beside ``uniform[l]``, what attention spread evenly over the visible positions would
  put there: ``mean over t ≥ 1 of 1/(t+1)``;
* ``norm0[l]`` and ``norm_rest[l]``: ``‖h_l‖`` at position 0 and its median over the other positions.

:func:`depthutils.models.random_init.tiny_model` builds a small random-weight model of another family (OLMo 2 by default) for the
one check that needs no training: which tensor a layer adds.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.numbers import significant
from depthutils.core.results import Result, describe, make_meta
from depthutils.cost.accounting import Cost, Shape
from depthutils.cost.passes import one_trace_per_prompt
from depthutils.measures import counted
from depthutils.measures.example import Example, on_gsm
from depthutils.models.architectures import check_residual, unwrap
from depthutils.models.each import each

#: errors below this are float32 rounding, whose size depends on the CPU's kernels: reported as this bound
ROUNDING = 1e-6


@dataclass
class ResidualStreamResult(Result):
    """Per layer ``[L]``: ``error``, ``raw_error`` (maxima over prompts of ``*_by_prompt [N, L]``),
    ``sink`` and ``uniform`` (means over prompts), ``norm0`` and ``norm_rest`` ``[L+1]`` (first prompt)."""

    error: np.ndarray = None
    raw_error: np.ndarray = None
    error_by_prompt: np.ndarray = None
    raw_error_by_prompt: np.ndarray = None
    sink: np.ndarray = None
    uniform: np.ndarray = None
    sink_by_prompt: np.ndarray = None
    uniform_by_prompt: np.ndarray = None
    norm0: np.ndarray = None
    norm_rest: np.ndarray = None
    kind: ClassVar[str] = "residual_stream"
    LOCAL_ONLY: ClassVar[tuple] = ("sink", "sink_by_prompt", "uniform", "uniform_by_prompt")
    PER_PROMPT: ClassVar[dict] = {"error": ("error_by_prompt", "max"), "raw_error": ("raw_error_by_prompt", "max"),
                                  "sink": ("sink_by_prompt", "mean"), "uniform": ("uniform_by_prompt", "mean")}

    def facts(self) -> dict:
        """The numbers the chapter states, rounded as printed (an error below :data:`ROUNDING` as that bound)."""
        finite = np.isfinite(self.sink)
        above = int((self.sink[finite] > 2 * self.uniform[finite]).sum())
        shown = lambda x: float(f"{max(float(x), ROUNDING):.1g}")  # noqa: E731
        return {"L": len(self.error), "max_error": shown(self.error.max()), "max_raw_error": shown(self.raw_error.max()),
                "sink_mean": round(float(np.nanmean(self.sink)), 2) if finite.any() else None,
                "uniform_mean": round(float(np.nanmean(self.uniform)), 2) if finite.any() else None,
                "sink_layers": above, "sink_measured": int(finite.sum()),
                "norm_ratio": round(float(np.max(self.norm0[1:] / self.norm_rest[1:])), 1)}

    def findings(self) -> str:
        f = self.facts()
        sink = ("not measured (remote model)" if f["sink_mean"] is None else
                f"on average {f['sink_mean']:.2f} of each query's attention goes to position 0, against "
                f"{f['uniform_mean']:.2f} under even attention; {f['sink_layers']} of {f['sink_measured']} layers "
                "put more than twice the even share there")
        return (f"h_(l+1) = h_l + a_l + m_l holds to a relative error of at most {significant(f['max_error'])} (raw "
                f"module outputs: {significant(f['max_raw_error'])}); {sink}; ‖h_l‖ at position 0 is up to "
                f"{f['norm_ratio']:.1f}× the median of the other positions.")


@contextlib.contextmanager
def eager_attention(model):
    """Local models: attention that returns its weights (``eager``) for the duration; remote: unchanged."""
    hf = None if model.remote else model.hf
    old = hf.config._attn_implementation if hf is not None else None
    switch = hf is not None and old != "eager"
    if switch:
        hf.set_attn_implementation("eager")
    try:
        yield hf is not None
    finally:
        if switch:
            hf.set_attn_implementation(old)


#: where a decoder layer keeps its attention module, by family (the adapter's ``attn`` may be a post-norm)
ATTENTION_NAMES = ("self_attn", "attention", "self_attention", "attn")


def _submodule(layer, names):
    for name in names:
        if hasattr(layer, name):
            return getattr(layer, name)
    raise DepthError(f"No attention module among {names} in {type(layer).__name__}.")


def _prompt(model, item) -> tuple:
    """One prompt's ``[L, 2]`` errors (added, raw), ``[L, 2]`` sink and uniform shares, ``[L+1, T]`` norms."""
    enc, weights = item
    L, T = model.n_layers, enc.n_tokens
    with model.no_grad(), model.trace(enc.input_ids):
        rows, norms = nnsight.save([]), nnsight.save([])
        for l in range(L):
            h = check_residual(model.layers_input(l), 1, T, f"layer {l} input")
            attn_out = _submodule(model.layer(l), ATTENTION_NAMES).output  # the attention module itself
            a_raw = unwrap(attn_out)
            att = attn_out[1] if weights else None
            a = check_residual(model.attentions_output(l), 1, T, f"attention {l} output")  # what it adds
            m_raw = unwrap(model.layer(l).mlp.output)
            m = check_residual(model.mlps_output(l), 1, T, f"MLP {l} output")
            out = check_residual(model.layers_output(l), 1, T, f"layer {l} output")
            scale = out.float().norm(dim=-1)
            err = ((out - h - a - m).float().norm(dim=-1) / scale).max()
            raw = ((out - h - a_raw - m_raw).float().norm(dim=-1) / scale).max()
            share = att[0, :, 1:, 0].float().mean() if weights else torch.tensor(float("nan"))
            rows.append(torch.stack([err, raw, share]).save())
            norms.append(h[0].float().norm(dim=-1).save())
        norms.append(model.layers_output(L - 1)[0].float().norm(dim=-1).save())
    uniform = float(np.mean(1.0 / (np.arange(1, T) + 1))) if weights else float("nan")
    return torch.stack(list(rows)), uniform, torch.stack(list(norms))


@counted
def residual_stream(model, prompts, *, max_tokens: int | None = None, progress_bar: bool = True) -> ResidualStreamResult:
    """Check ``h_{l+1} = h_l + a_l + m_l`` at every layer and token, with the family's reading of what a
    sublayer adds and with the raw module outputs, and measure position 0's share of attention (local
    models; eager attention for the duration) and its residual norm. A prompt longer than ``max_tokens``
    (default: the model's context) is cut to its first tokens."""
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    if min(e.n_tokens for e in encs) < 2:
        raise DepthError("Every prompt needs at least 2 tokens (position 0 and one other); pass longer prompts.")
    with eager_attention(model) as weights:
        out = each(model, _prompt, [(e, weights) for e in encs], "residual stream", enabled=progress_bar)
    rows = np.stack([r.double().cpu().numpy() for r, _, _ in out])  # [N, L, 3]
    uniform = np.array([[u] * model.n_layers for _, u, _ in out])
    norms = out[0][2].double().cpu().numpy()  # [L+1, T] of the first prompt
    ds, n = describe(prompts)
    return ResidualStreamResult(
        meta=make_meta(model, dataset=ds, n=n, fit=fit, attention_weights=weights),
        error_by_prompt=check_finite("decomposition error", rows[..., 0]),
        raw_error_by_prompt=check_finite("raw decomposition error", rows[..., 1]),
        sink_by_prompt=rows[..., 2], uniform_by_prompt=uniform,
        norm0=norms[:, 0], norm_rest=np.median(norms[:, 1:], axis=1)).with_aggregates()


def cost(s: Shape, Ts, dtype: str, remote: bool) -> Cost:
    """What :func:`residual_stream` runs on prompts of ``Ts`` tokens: one nnsight forward per prompt."""
    return one_trace_per_prompt(s, Ts, dtype, remote, "residual_stream")


def example(model, **options) -> Example:
    """One GSM8K problem cut to a few tokens (:mod:`depthutils.measures.example`)."""
    return on_gsm(residual_stream, model, options)
