"""A tuned readout at every layer (after the tuned lens of Belrose et al. 2023, "Eliciting Latent Predictions from
Transformers with the Tuned Lens"), fitted in closed form on held-out prompts, beside the raw logit lens.

The spec has no tuned-lens section; the definition here is ours. For every layer ``l = 0 … L−1``, ``h_l`` is the
residual entering layer ``l`` (as the logit lens of chapter 3 reads it; ``h_0`` is the embedding) and ``h_L`` the
final residual (the last layer's output); ``n = norm(h)`` is a residual after the model's final norm (its scale
divided out, its gain applied): what the unembedding reads.

* **Readout**: ``q̃_l = softmax(W_U (A_l n_l + b_l))``: the model's own final norm, one affine map, the model's own
  unembedding (finished as its logits are). The raw lens ``q_l = softmax(W_U n_l)`` is the readout with
  ``A_l = I``, ``b_l = 0``.
* **Fit** (on held-out prompts of the kind it is evaluated on, at the positions that predict their answers, or at
  every position but 0): per layer, ridge least squares from the identity,
  ``min Σ_t ‖A_l n_{l,t} + b_l − n_{L,t}‖² + λ·s_l·(‖A_l − I‖² + ‖b_l‖²)`` (``s_l`` the mean diagonal of ``XᵀX``,
  ``λ`` = ``ridge``), solved in closed form from normal equations summed in float64 (:mod:`depthutils.core.ridge`,
  as chapter 7's mapping). ``W_U n_L`` are the model's logits (before any soft-capping), so the fit matches logits
  in the space the unembedding reads.
* **KL step** (ours): per layer, two numbers mix the fitted map with the raw lens,
  ``q̃_l = softmax(W_U (α_l (A_l n_l + b_l) + β_l n_l))``, chosen by L-BFGS from ``(α_l, β_l) = (0, 1)`` (the raw
  lens) to lower the mean ``KL(q_L ‖ q̃_l)`` over :data:`KL_ROWS` of the fit's rows, evenly spaced (:func:`kl_step`):
  the tuned lens's objective, on two numbers per layer instead of a whole map; the maps stored are the mixed ones.

Why this fit (ours; issue 75). Belrose et al. train their translators by gradient descent on ``KL(q_L ‖ q̃_l)`` from
an identity start. That needs the whole unembedding in every step's forward and backward pass (Gemma 3's has 262,144
rows): minutes a step for the book's real models on a CPU, where the book's tests run this fit. The closed form keeps
two of its choices, and the KL step a third, its objective: it starts from the identity (a large ``λ`` gives back the
raw lens, so a fit on few tokens stays near it), and it fits what the unembedding reads (``n``, not ``h``: a
least-squares fit on ``h`` is ruled by a few tokens of very large norm, which the norm divides away, and by directions
the norm's gain shrinks). And it is fitted where it is used: the readout of chapter 3's early exit was first fitted on
every position of Bible and Shakespeare text and evaluated on sums and GSM8K answers, and there it kept fewer answers
than the raw lens although its KL on GSM8K text was lower. Whether a fit is good enough is measured, not assumed:
chapter 3 counts the readout only where it beats the raw lens at every layer on the prompts it grades
(:mod:`depthutils.book.reviews.readout_check`).

* **Evaluate** (on other prompts): per layer, token means over positions ``1 … T−1`` (or an even sample of them) of
  ``KL(q_L ‖ q̃_l)`` in nats, the output first (the tuned lens's objective), and of the top-``k`` overlap
  ``|top_k(q̃_l) ∩ top_k(q_L)| / k``, and the same two for the raw lens. The KL's direction is the reverse of
  chapter 3's raw-lens curve, ``KL(q_l ‖ q_L)`` (P1's, the lens first), so its numbers differ from the raw lens's
  here; the overlap is the same.

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

from depthutils.core.encoding import as_prompts, encode_all
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

#: the ridge penalty towards the identity, relative to the mean diagonal of XᵀX (ours: on ladder-8's held-out sums and
#: invented-world questions, 0.01 beat the raw lens at every layer of both sets of graded prompts after the KL step,
#: 0.1 not at one layer; it keeps a fit on fewer tokens than dimensions near the identity)
RIDGE = 1e-2
#: where a fit reads its prompts: the positions that predict their answers, or every position but 0
FIT_AT = ("answers", "all")
#: the fit's rows (evenly spaced among them) the KL step is fitted on: each costs ``2L`` decodings over the vocabulary
KL_ROWS = 64
#: the most L-BFGS iterations of the KL step, per layer
KL_ITERS = 25


@dataclass
class Readouts:
    """The fitted maps ``[L, H+1, H]`` (float64; row ``H`` is the bias ``b_l``), and what the fit cost."""

    maps: torch.Tensor
    tokens: int      #: fit positions (rows of the normal equations)
    seconds: float   #: wall seconds of the fit (the forward passes and the solve)
    n_texts: int
    dataset: str
    ridge: float
    at: str = "answers"  #: the positions fitted (:data:`FIT_AT`)
    scales: torch.Tensor | None = None  #: ``[L, 2]``: the KL step's ``(α_l, β_l)`` (:func:`kl_step`)

    def apply(self, model, hs: torch.Tensor, layers=None) -> torch.Tensor:
        """``A_l norm(h_l) + b_l`` for ``hs`` ``[L', T, H]`` (``layers``: the ``L'`` layers they enter; default all),
        in the dtype of ``hs``: what the unembedding of ``model`` then reads."""
        maps = self.maps if layers is None else self.maps[list(layers)]
        return (with_bias(final_norm(model, hs).double()) @ maps).to(hs.dtype)


def final_norm(model, hs: torch.Tensor) -> torch.Tensor:
    """The model's final norm applied to residuals ``hs`` ``[..., H]`` (no gradient), on their device."""
    with torch.no_grad():
        return get_path(model.nn._module, model.arch.final_norm)(hs)


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


def fit_readouts(model, prompts, *, at: str = "answers", ridge: float = RIDGE, kl_rows: int = KL_ROWS, not_on=(),
                 max_tokens: int | None = None, progress_bar: bool = True) -> Readouts:
    """Fit the tuned readout of every layer on ``prompts`` (see the module's definition), at the positions that
    predict their answers (``at="answers"``: each prompt needs one) or at every position but 0 (``at="all"``); then
    its KL step on ``kl_rows`` of those rows (0: none). ``not_on``: the prompts the readout will be evaluated on; a
    fit prompt among them (the same context) is an error, so that the evaluation is held out."""
    _local(model, "fit_readouts")
    if at not in FIT_AT:
        raise DepthError(f"at must be one of {', '.join(map(repr, FIT_AT))}, got {at!r}.")
    t0 = time.perf_counter()
    prompts = as_prompts(prompts)
    evaluated = {p.context for p in as_prompts(not_on)} if not_on else set()
    shared = [p.context for p in prompts if p.context in evaluated]
    if shared:
        raise DepthError(f"fit_readouts was given {len(shared)} prompt(s) it will be evaluated on (e.g. "
                         f"{shared[0][:60]!r}); fit on held-out prompts.")
    prompts, encs, _ = encode_all(model, prompts, need_answer=at == "answers", max_tokens=max_tokens)
    rows = [list(e.predict_positions) if at == "answers" else list(range(1, e.n_tokens)) for e in encs]
    sample = set(kl_sample(sum(map(len, rows)), kl_rows))
    normal, xs, ys, seen = NormalEquations(), [], [], 0
    for enc, at_rows in progress(list(zip(encs, rows)), "tuned readout: fit", enabled=progress_bar):
        if not at_rows:
            continue
        hs, last, _ = _residuals(model, enc)
        x, y = final_norm(model, hs[:, at_rows]), final_norm(model, last[at_rows])  # [L, R, H], [R, H]
        normal.add(x.double(), y.double())
        keep = [i for i in range(len(at_rows)) if seen + i in sample]
        xs.append(x[:, keep].float())
        ys.append(y[keep].float())
        seen += len(at_rows)
    if not normal.rows:
        raise DepthError("fit_readouts needs text beyond position 0: every text given was a single token.")
    maps = normal.solve(ridge, toward_identity=True)
    scales = kl_step(model, maps, torch.cat(xs, 1), torch.cat(ys)) if kl_rows else None
    if scales is not None:
        eye = torch.cat([torch.eye(maps.shape[-1], dtype=maps.dtype), torch.zeros(1, maps.shape[-1], dtype=maps.dtype)])
        maps = scales[:, 0, None, None] * maps + scales[:, 1, None, None] * eye
    ds, n = describe(prompts)
    return Readouts(maps, normal.rows, time.perf_counter() - t0, n, ds, ridge, at, scales)


def kl_sample(n_rows: int, k: int) -> list[int]:
    """The ``k`` fit rows the KL step reads, evenly spaced among ``n_rows`` (all of them when there are fewer)."""
    if n_rows <= k:
        return list(range(n_rows))
    return sorted({round(i * (n_rows - 1) / max(k - 1, 1)) for i in range(k)})


def kl_step(model, maps: torch.Tensor, xs: torch.Tensor, ys: torch.Tensor, iters: int = KL_ITERS) -> torch.Tensor:
    """``[L, 2]``: per layer the ``(α_l, β_l)`` of the readout ``W_U(α_l(A_l n + b_l) + β_l n)`` that minimise the
    mean ``KL(q_L ‖ q̃_l)`` over rows ``xs`` ``[L, R, H]`` (the normed layer inputs) whose normed final residuals are
    ``ys`` ``[R, H]`` (``q_L`` the model's output there), by L-BFGS from ``(0, 1)``, the raw lens; in float64."""
    head = get_path(model.nn._module, model.arch.unembed)
    weight = head.weight.detach().double()
    bias = 0.0 if head.bias is None else head.bias.detach().double()
    with torch.no_grad():
        log_q = model.finish_logits(ys.double() @ weight.T + bias).log_softmax(-1)
    q = log_q.exp()
    out = []
    for l in range(xs.shape[0]):
        with torch.no_grad():
            fitted, raw = (with_bias(xs[l].double()) @ maps[l]) @ weight.T, xs[l].double() @ weight.T
        ab = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([ab], max_iter=iters, line_search_fn="strong_wolfe")

        def loss():
            opt.zero_grad()
            z = model.finish_logits(ab[0] * fitted + ab[1] * raw + bias).log_softmax(-1)
            value = (q * (log_q - z)).sum(-1).mean()
            value.backward()
            return value

        opt.step(loss)
        out.append(ab.detach().clone())
    return torch.stack(out)


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
        return (f"Tuned readout (fit on {f['fit_tokens']} tokens in {f['fit_time']}): KL(q_L ‖ ·), the output first, "
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
    """``[2, L, 2, T−1]``: the tuned readout's and the raw lens's KL(q_L ‖ ·) and overlap on one prompt."""
    enc, readouts, k, positions = item
    hs, _, final = _residuals(model, enc, logits=True)
    keep = evaluated(enc.n_tokens, positions)
    hs, final = hs[:, keep], final[keep].float()
    with torch.no_grad():
        both = torch.cat([readouts.apply(model, hs), final_norm(model, hs)])  # [2L, T-1, H]: tuned, then raw
        return chunked_lens(model, both, final, k, output_first=True, normed=True).view(2, hs.shape[0], 2, -1)


def evaluated(n_tokens: int, positions: int | None) -> list[int]:
    """The positions a prompt of ``n_tokens`` is evaluated at: ``1 … T−1``, or ``positions`` of them evenly spaced
    (the last always among them)."""
    every = list(range(1, n_tokens))
    if positions is None or positions >= len(every):
        return every
    return sorted({every[round(i * (len(every) - 1) / max(positions - 1, 1))] for i in range(positions)})


@counted
def tuned_lens(model, prompts, k: int = 5, *, fit_texts=None, readouts: Readouts | None = None,
               fit_at: str = "answers", ridge: float = RIDGE, positions: int | None = None,
               max_tokens: int | None = None, progress_bar: bool = True) -> TunedLensResult:
    """The tuned readout and the raw lens on every layer's input, evaluated on ``prompts``.

    The readouts are ``readouts`` (from :func:`fit_readouts`) or fitted here on ``fit_texts`` at ``fit_at``
    (held-out prompts, not ``prompts``: the comparison is held out; a fit prompt among ``prompts`` is an error).
    ``positions``: evaluate each prompt at that many positions, evenly spaced (default every position but the
    first; the decoding of ``2L`` rows per position over the vocabulary is the cost). A prompt longer than
    ``max_tokens`` is cut to its first tokens."""
    _local(model, "tuned_lens")
    if readouts is None:
        if fit_texts is None:
            raise DepthError("tuned_lens needs readouts= (from fit_readouts) or fit_texts= to fit them on; pass "
                             "held-out prompts of the kind it evaluates, e.g. GSM8K problems other than these.")
        readouts = fit_readouts(model, fit_texts, at=fit_at, ridge=ridge, not_on=prompts, max_tokens=max_tokens,
                                progress_bar=progress_bar)
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
                     fit_dataset=readouts.dataset, ridge=readouts.ridge, fit_at=readouts.at)
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
    """One GSM8K problem cut to a few tokens, its readouts fitted at every position of a few held-out windows
    (:mod:`depthutils.measures.example`)."""
    prompts, Ts = gsm(model)
    texts, fit_Ts = held_out_texts(model)
    return Example(lambda: tuned_lens(model, prompts, fit_texts=texts, fit_at="all", max_tokens=TOKENS,
                                      progress_bar=False, **options), {"Ts": Ts, "fit_Ts": fit_Ts})
