"""A tuned readout at every layer (the tuned lens of Belrose et al. 2023, "Eliciting Latent Predictions from
Transformers with the Tuned Lens"), fitted in closed form, beside the raw logit lens.

The spec has no tuned-lens section; the definition here is ours. For every layer ``l = 0 … L−1``, ``h_l`` is the
residual entering layer ``l`` (as the logit lens of chapter 3 reads it; ``h_0`` is the embedding) and ``h_L`` the
final residual (the last layer's output, before the final norm).

* **Fit** (on one text): an affine map per layer, ``A_l h_l + b_l ≈ h_L``, by ridge least squares,
  ``min Σ_t ‖A_l h_{l,t} + b_l − h_{L,t}‖² + λ·s_l·‖A_l‖²`` (``s_l`` the mean diagonal of ``XᵀX``, ``λ`` = ``ridge``,
  no penalty on ``b_l``), solved in closed form from normal equations summed in float64 over the fit text's tokens,
  position 0 (the BOS, an attention sink) excluded (:mod:`depthutils.core.ridge`, as chapter 7's mapping).
  Belrose et al. train theirs by gradient descent on the KL below; least squares on the residual is the
  closed-form version of the same affine family, and a map that reproduces ``h_L`` reproduces the output.
* **Readout**: ``q̃_l = softmax(W_U norm(A_l h_l + b_l))``, the final norm and unembedding (finished as the
  model's own logits); the raw lens is ``q_l = softmax(W_U norm(h_l))``.
* **Evaluate** (on other text): per layer, token means over positions ``1 … T−1`` (or an even sample of them) of ``KL(q_L ‖ q̃_l)`` in nats
  (the output first, the tuned lens's objective) and of the top-``k`` overlap ``|top_k(q̃_l) ∩ top_k(q_L)| / k``,
  and the same two for the raw lens. Note the KL's direction: chapter 3's raw-lens curve puts the lens first
  (P1's), so its numbers differ from the raw lens here; the overlap is the same.

Where a readout "reaches the output" is read with P2's thresholds (:mod:`~depthutils.measures.curves`): the first
layer whose KL falls below half its curve's maximum, and the first whose top-5 overlap exceeds 0.3.

The field's package, ``tuned-lens`` 0.2.0, is not used. Its training loop imports ``torchdata.dataloader2`` and
``torchdata.datapipes``, which the torchdata on the package index (0.11.0) no longer has; it finds a model's final
norm and layers by its Hugging Face class (OPT, GPT-NeoX, BLOOM, GPT-2, GPT-Neo, GPT-J, Llama: not Gemma 3) where the
book reaches its models through nnsight's handle, and its readout does not finish the logits as Gemma's
soft-capping does; it also pulls in ``wandb`` and ``plotly``. The closed-form fit needs none of them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.progress import progress
from depthutils.core.results import Result, describe, make_meta
from depthutils.core.ridge import NormalEquations, with_bias
from depthutils.cost.accounting import Acc, Cost, Shape, total, with_requests
from depthutils.cost.chunks import LENS_CHUNK_BYTES
from depthutils.cost.passes import lens_bytes, trace_pass
from depthutils.measures import counted
from depthutils.measures.curves import ed_kl, ed_overlap, ratio
from depthutils.measures.example import TOKENS, Example, gsm, held_out_texts
from depthutils.measures.logit_lens import chunked_lens
from depthutils.models.architectures import check_residual, get_path

#: the ridge penalty, relative to the mean diagonal of XᵀX (as chapter 7's mapping): nearly plain least squares,
#: well posed when a fit has fewer tokens than the residual has dimensions
RIDGE = 1e-4


@dataclass
class Readouts:
    """The fitted maps ``[L, H+1, H]`` (float64; row ``H`` is the bias ``b_l``), and what the fit cost."""

    maps: torch.Tensor
    tokens: int      #: fit tokens (position 0 of each text excluded)
    seconds: float   #: wall seconds of the fit (the forward passes and the solve)
    n_texts: int
    dataset: str
    ridge: float

    def apply(self, hs: torch.Tensor, layers=None) -> torch.Tensor:
        """``A_l h_l + b_l`` for ``hs`` ``[L', T, H]`` (``layers``: the ``L'`` layers they enter; default all),
        in the dtype of ``hs``."""
        maps = self.maps if layers is None else self.maps[list(layers)]
        return (with_bias(hs.double()) @ maps).to(hs.dtype)


def _residuals(model, enc, logits: bool = False) -> tuple:
    """One trace: the layer inputs ``[L, T, H]`` and the final residual ``[T, H]`` (the last layer's output), and
    with ``logits`` the model's logits ``[T, V]``."""
    L, T = model.n_layers, enc.n_tokens
    with model.no_grad(), model.trace(enc.input_ids):
        hs = nnsight.save([])
        for l in range(L):
            hs.append(check_residual(model.layers_input(l), 1, T, f"layer {l} input")[0].save())
        last = check_residual(model.layers_output(L - 1), 1, T, f"layer {L - 1} output")[0].save()
        final = model.logits()[0].save() if logits else last  # a name set inside the trace is set by a value
    return torch.stack(list(hs)), last, (final if logits else None)


def _local(model, what: str) -> None:
    if model.remote:
        raise DepthError(f"{what} runs on a local model (it decodes every layer with the model's own unembedding "
                         "after the trace); load the model with remote=False.")


def fit_readouts(model, texts, *, ridge: float = RIDGE, max_tokens: int | None = None,
                 progress_bar: bool = True) -> Readouts:
    """Fit the tuned readout of every layer on ``texts`` (strings or prompts; see the module's definition)."""
    _local(model, "fit_readouts")
    t0 = time.perf_counter()
    texts, encs, _ = encode_all(model, texts, max_tokens=max_tokens)
    normal = NormalEquations()
    for enc in progress(encs, "tuned readout: fit", enabled=progress_bar):
        if enc.n_tokens < 2:
            continue
        hs, last, _ = _residuals(model, enc)
        normal.add(hs[:, 1:], last[1:])  # position 0 excluded
    if not normal.rows:
        raise DepthError("fit_readouts needs text beyond position 0: every text given was a single token.")
    maps = normal.solve(ridge)
    ds, n = describe(texts)
    return Readouts(maps, normal.rows, time.perf_counter() - t0, n, ds, ridge)


@dataclass
class TunedLensResult(Result):
    """Per layer ``l = 0 … L−1`` (token means over the evaluated positions, :func:`evaluated`): ``kl`` =
    ``KL(q_L ‖ q̃_l)`` and ``overlap`` (top-``k`` with the output) of the tuned readout, ``raw_kl`` and ``raw_overlap`` of the raw lens, each ``[L]``
    with its per-prompt rows ``[N, L]``; the fit's tokens, seconds and text in ``meta['params']``."""

    kl: np.ndarray = None
    overlap: np.ndarray = None
    raw_kl: np.ndarray = None
    raw_overlap: np.ndarray = None
    kl_by_prompt: np.ndarray = None
    overlap_by_prompt: np.ndarray = None
    raw_kl_by_prompt: np.ndarray = None
    raw_overlap_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    k: int = 5
    kind: ClassVar[str] = "tuned_lens"
    PER_PROMPT: ClassVar[dict] = {n: (f"{n}_by_prompt", "tokens") for n in ("kl", "overlap", "raw_kl", "raw_overlap")}
    INTERVAL_FACTS: ClassVar[tuple] = ("mid_kl", "mid_raw_kl", "mid_overlap", "mid_raw_overlap")

    def facts(self) -> dict:
        """The numbers the prose states, rounded as printed (None: never)."""
        L, mid = len(self.kl), len(self.kl) // 2
        p = self.meta.get("params", {}) if self.meta else {}
        rel = lambda l: None if l is None else round(ratio(l, L), 2)  # noqa: E731
        out = {"L": L, "mid_layer": mid, "fit_tokens": p.get("fit_tokens"), "fit_time": fit_time(self.meta),
               "fit_texts": p.get("fit_texts")}
        for who, kl, ov in (("", self.kl, self.overlap), ("raw_", self.raw_kl, self.raw_overlap)):
            kl_at, ov_at = ed_kl(kl), ed_overlap(ov)
            out.update({f"{who}kl_layer": kl_at, f"{who}kl_rel": rel(kl_at), f"{who}overlap_layer": ov_at,
                        f"{who}overlap_rel": rel(ov_at), f"mid_{who}kl": round(float(kl[mid]), 2),
                        f"mid_{who}overlap": round(float(ov[mid]), 2)})
        return out

    def findings(self) -> str:
        f = self.facts()
        say = lambda l: "never" if l is None else f"at layer {l} of {f['L']}"  # noqa: E731
        return (f"Tuned readout (fit on {f['fit_tokens']} tokens in {f['fit_time']}): KL(output ‖ readout) "
                f"falls below half its maximum {say(f['kl_layer'])}, top-{self.k} overlap exceeds 0.3 "
                f"{say(f['overlap_layer'])}; raw lens: {say(f['raw_kl_layer'])} and {say(f['raw_overlap_layer'])}. "
                f"At h_{f['mid_layer']}: KL {f['mid_kl']:.2f} nats (raw {f['mid_raw_kl']:.2f}), top-{self.k} overlap "
                f"{f['mid_overlap']:.2f} (raw {f['mid_raw_overlap']:.2f}).")


def fit_time(meta: dict | None) -> str | None:
    """The fit's wall time as the prose states it, ``"12 s"`` (a string: a time differs between two runs of a
    chapter, and its tests read "N s" as a time), from a result's ``meta`` (None without a fit)."""
    seconds = (meta or {}).get("params", {}).get("fit_seconds")
    return None if seconds is None else f"{seconds:.0f} s"


def _prompt_stats(model, item) -> torch.Tensor:
    """``[2, L, 2, T−1]``: the tuned readout's and the raw lens's KL(output ‖ ·) and overlap on one prompt."""
    enc, readouts, k, positions = item
    hs, _, final = _residuals(model, enc, logits=True)
    keep = evaluated(enc.n_tokens, positions)
    hs, final = hs[:, keep], final[keep].float()
    with torch.no_grad():
        both = torch.cat([readouts.apply(hs), hs])  # [2L, T-1, H]: tuned, then raw
        return chunked_lens(model, both, final, k, output_first=True).view(2, hs.shape[0], 2, -1)


def evaluated(n_tokens: int, positions: int | None) -> list[int]:
    """The positions a prompt of ``n_tokens`` is evaluated at: ``1 … T−1``, or ``positions`` of them evenly spaced
    (the last always among them)."""
    every = list(range(1, n_tokens))
    if positions is None or positions >= len(every):
        return every
    return sorted({every[round(i * (len(every) - 1) / max(positions - 1, 1))] for i in range(positions)})


@counted
def tuned_lens(model, prompts, k: int = 5, *, fit_texts=None, readouts: Readouts | None = None,
               ridge: float = RIDGE, positions: int | None = None, max_tokens: int | None = None,
               progress_bar: bool = True) -> TunedLensResult:
    """The tuned readout and the raw lens on every layer's input, evaluated on ``prompts``.

    The readouts are ``readouts`` (from :func:`fit_readouts`) or fitted here on ``fit_texts`` (other text than
    ``prompts``: the comparison is held out). ``positions``: evaluate each prompt at that many positions, evenly
    spaced (default every position but the first; the decoding of ``2L`` rows per position over the vocabulary is
    the cost). A prompt longer than ``max_tokens`` is cut to its first tokens."""
    _local(model, "tuned_lens")
    if readouts is None:
        if fit_texts is None:
            raise DepthError("tuned_lens needs readouts= (from fit_readouts) or fit_texts= to fit them on; pass text "
                             "other than the prompts it evaluates, e.g. depthutils.data.heldout_text(100).")
        readouts = fit_readouts(model, fit_texts, ridge=ridge, max_tokens=max_tokens, progress_bar=progress_bar)
    if not isinstance(get_path(model.nn._module, model.arch.unembed), torch.nn.Linear):
        raise DepthError(f"tuned_lens decodes through the unembedding as a linear layer; {model.name}'s is not one.")
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    encs = [e for e in encs if e.n_tokens > 1]
    if not encs:
        raise DepthError("tuned_lens has no prompt with a token after position 0 to evaluate on.")
    if positions is not None and positions < 1:
        raise DepthError(f"positions must be a positive number of positions per prompt or None, got {positions!r}.")
    stats = [_prompt_stats(model, (e, readouts, k, positions))
             for e in progress(encs, "tuned readout", enabled=progress_bar)]
    means = np.stack([s.double().mean(-1).cpu().numpy() for s in stats])  # [N, 2, L, 2]
    ds, n = describe(prompts)
    counts = [len(evaluated(e.n_tokens, positions)) for e in encs]
    meta = make_meta(model, dataset=ds, n=n, fit=fit, k=k, tokens=sum(counts), positions=positions,
                     fit_tokens=readouts.tokens, fit_seconds=round(readouts.seconds, 1), fit_texts=readouts.n_texts,
                     fit_dataset=readouts.dataset, ridge=readouts.ridge)
    rows = {f"{who}{what}_by_prompt": check_finite(f"tuned-lens {who}{what}", means[:, i, :, j])
            for i, who in enumerate(("", "raw_")) for j, what in enumerate(("kl", "overlap"))}
    return TunedLensResult(meta=meta, prompt_tokens=np.array(counts), k=k,
                           **rows).with_aggregates()


def cost(s: Shape, Ts, dtype: str, remote: bool, fit_Ts=()) -> Cost:
    """What :func:`tuned_lens` runs: one trace per fit text (``fit_Ts``; its residuals summed into the float64
    normal equations, then one solve per layer) and one per evaluated prompt (``Ts``), whose ``2L`` rows (the tuned
    readout and the raw lens) are decoded by :func:`~depthutils.measures.logit_lens.chunked_lens`."""
    H1, costs = s.hidden + 1, []
    for T in Ts:
        a = Acc(s, "tuned_lens", T)
        work = trace_pass(a, s, 1, T, dtype)
        a.unembed(2 * s.layers * (T - 1), 1)
        a.c.lens_rows += 2 * s.layers * (T - 1)
        a.c.flops_fwd += 2 * s.layers * (T - 1) * H1 * s.hidden  # the maps
        work = max(work, 2 * lens_bytes(s, T, dtype) + 2 * LENS_CHUNK_BYTES)
        costs.append(a.done(0.0, work, download=4 * 2 * s.layers * 2 * T, batch=1))
    for T in fit_Ts:
        a = Acc(s, "tuned_lens", T)
        work = trace_pass(a, s, 1, T, dtype)
        a.c.flops_fwd += 2 * s.layers * (T - 1) * H1 * (2 * H1 - 1)  # XᵀX and XᵀY
        c = a.done(2 * s.layers * H1 * H1 * 8, max(work, s.layers * T * H1 * 8 * 2), batch=1)
        costs.append(c)
    if not costs:
        raise DepthError("tuned_lens.cost needs at least one prompt (Ts) or fit text (fit_Ts).")
    out = total(costs)
    if fit_Ts:
        out.flops_fwd += s.layers * (2 / 3 * H1 ** 3 + 2 * H1 * H1 * s.hidden)  # one solve per layer
    return with_requests(out, remote)


def example(model, **options) -> Example:
    """One GSM8K problem cut to a few tokens, its readouts fitted on a few held-out windows
    (:mod:`depthutils.measures.example`)."""
    prompts, Ts = gsm(model)
    texts, fit_Ts = held_out_texts(model)
    return Example(lambda: tuned_lens(model, prompts, fit_texts=texts, max_tokens=TOKENS, progress_bar=False,
                                      **options), {"Ts": Ts, "fit_Ts": fit_Ts})
