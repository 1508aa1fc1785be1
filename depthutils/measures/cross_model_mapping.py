"""P1 §7: map a shallow model's residual stream onto a deeper model's, layer by layer.

For every source layer ``s`` and target layer ``j`` one affine map ``ŷ = W x + b``
from ``x = h_{s+1}`` (source, the output of layer ``s``) to ``y = h_{j+1}`` (target, the output of layer ``j``) is
fitted in closed form on the same text fed to both models (BOS excluded):
ridge regression with a small penalty ``λ`` on ``W`` (not on ``b``), from normal
equations ``XᵀX`` and ``XᵀY`` accumulated prompt by prompt, so no layer's
residuals for all tokens are ever held at once. On held-out text the error is
the token mean of ``‖ŷ − y‖ / ‖y‖``, a matrix ``[L_src, L_tgt]``.

P1's claim: the best target for source layer ``s`` lies at the same *relative*
depth, ``(j+1)/L_tgt ≈ (s+1)/L_src``: a deeper model stretches the same
computation over more layers.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.depth import layer_depth
from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError
from depthutils.core.prompts import Prompt, encode
from depthutils.core.results import Result, bootstrap, make_meta
from depthutils.core.ridge import fit_maps, with_bias  # noqa: F401  (with_bias, fit_maps: chapter 7's exercise reads them here)
from depthutils.cost.accounting import BYTES, Acc, Cost, Shape, total, with_requests
from depthutils.cost.passes import trace_pass
from depthutils.measures import counted
from depthutils.measures.example import TOKENS, Example, held_out_texts
from depthutils.models.architectures import check_residual
from depthutils.models.each import each
from depthutils.models.requests import batches


@dataclass
class MappingResult(Result):
    """``error [L_src, L_tgt]`` (held-out relative error of the best affine map), ``best [L_src]``
    (the target layer with the least error for each source layer) and their relative depths.

    ``error_by_prompt [N_held_out, L_src, L_tgt]`` keeps each held-out prompt's token mean, so an
    interval resamples the held-out prompts with the fitted maps fixed.
    """

    error: np.ndarray = None
    best: np.ndarray = None
    error_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    kind: ClassVar[str] = "cross_model_mapping"
    PER_PROMPT: ClassVar[dict] = {"error": ("error_by_prompt", "tokens")}
    INTERVAL_FACTS: ClassVar[tuple] = ("distance", "mean_best_error", "rank_corr", "diagonal_gap")

    def with_aggregates(self) -> "MappingResult":
        """The error from the held-out prompts' errors (the maps stay fixed), then the best matches."""
        super().with_aggregates()
        self.best = self.error.argmin(axis=1)
        return self

    @property
    def shape(self) -> tuple[int, int]:
        return self.error.shape

    def relative(self) -> tuple[np.ndarray, np.ndarray]:
        """``((s+1)/L_src, (best_s+1)/L_tgt)`` for every source layer: both are layers' outputs, at
        :func:`~depthutils.core.depth.layer_depth`."""
        Ls, Lt = self.shape
        return layer_depth(np.arange(Ls), Ls), layer_depth(self.best, Lt)

    def diagonal_distance(self) -> float:
        """Mean |relative depth of the best target − relative depth of the source| over source layers."""
        src, tgt = self.relative()
        return float(np.abs(tgt - src).mean())

    def diagonal_targets(self) -> np.ndarray:
        """For every source layer ``s``, the target layer at its relative depth: ``round((s+1)·L_tgt/L_src) − 1``."""
        Ls, Lt = self.shape
        return np.clip(np.round((np.arange(Ls) + 1) * Lt / Ls).astype(int) - 1, 0, Lt - 1)

    def diagonal_gap(self) -> float | None:
        """Mean over source layers of (the row's mean error over the other target layers − the error at its
        :meth:`diagonal_targets` layer): above 0 where the target at the same relative depth is mapped better than
        the row's average (None for a single target layer)."""
        Ls, Lt = self.shape
        if Lt < 2:
            return None
        diag = self.error[np.arange(Ls), self.diagonal_targets()]
        return float(((self.error.sum(axis=1) - diag) / (Lt - 1) - diag).mean())

    def rank_correlation(self) -> float | None:
        """Spearman's correlation of source depth and best-target depth: "deeper source, deeper target", which
        can hold where "the same relative depth" does not (None when every source shares one target)."""
        return spearman(np.arange(self.shape[0]), self.best)

    def shared_target(self) -> tuple[int, float]:
        """The target layer that most source layers map to best, and the share of source layers that do."""
        counts = np.bincount(self.best, minlength=self.shape[1])
        return int(counts.argmax()), float(counts.max() / self.shape[0])

    def null_distances(self, n: int = 2000, seed: int = 0) -> np.ndarray:
        """The diagonal distance under ``n`` random permutations of the target layers (chance): each permutation
        relabels the target columns, so source layers that share a best target still share one."""
        rng = np.random.default_rng(seed)
        Ls, Lt = self.shape
        perms = np.argsort(rng.random((n, Lt)), axis=1)         # [n, Lt]: target layer j -> perms[:, j]
        src = layer_depth(np.arange(Ls), Ls)
        return np.abs(layer_depth(perms[:, self.best], Lt) - src).mean(axis=1)

    def best_band(self, level: float = 0.95, n_boot: int = 1000, seed: int = 0) -> list[np.ndarray]:
        """For each source layer, the target layers whose held-out error is within the noise of the row's
        minimum: those whose paired bootstrap interval (held-out prompts resampled, maps fixed) of
        ``error[s, j] − error[s, best_s]`` reaches 0. A flat row gives a wide band: its argmin is noise."""
        Ls, _ = self.shape
        if not self.n_prompts:
            return [np.array([b]) for b in self.best]
        rows = np.arange(Ls)
        gap = lambda idx: (lambda e: e - e[rows, self.best][:, None])(self.aggregate("error", idx))
        lo, _ = bootstrap(self.n_prompts, gap, level=level, n_boot=n_boot, seed=seed)
        return [np.flatnonzero(lo[s] <= 0) for s in range(Ls)]

    def facts(self) -> dict:
        shared, frac = self.shared_target()
        rho, gap = self.rank_correlation(), self.diagonal_gap()
        return {"L_src": self.shape[0], "L_tgt": self.shape[1], "distance": round(self.diagonal_distance(), 3),
                "min_error": round(float(self.error.min()), 3), "best": [int(b) for b in self.best],
                "mean_best_error": round(float(self.error[np.arange(self.shape[0]), self.best].mean()), 3),
                "rank_corr": None if rho is None else round(rho, 2), "shared_layer": shared,
                "shared_frac": round(frac, 2), "diagonal_gap": None if gap is None else round(gap, 3)}

    def findings(self) -> str:
        f = self.facts()
        pairs = ", ".join(f"{s}→{b}" for s, b in enumerate(f["best"]))
        bands = ", ".join(f"{s}: {_span(b)}" for s, b in enumerate(self.best_band()))
        shared = (f" {100 * f['shared_frac']:.0f}% of the source layers share the best target {f['shared_layer']}."
                  if f["shared_frac"] > 0.5 else "")
        return (f"{self.meta['params']['source']} ({f['L_src']} layers) → {self.meta['params']['target']} ({f['L_tgt']} layers): "
                f"best target layer for each source layer {pairs}; mean distance from the relative-depth "
                f"diagonal {f['distance']:.3f}; mean held-out error at the best match {f['mean_best_error']:.3f}. "
                f"Target layers within the noise of each row's minimum (95% paired bootstrap over held-out "
                f"prompts): {bands}.{shared}")


def _span(layers) -> str:
    """``"3"``, ``"1–10"`` or ``"1–4, 9"``: a set of layers as runs."""
    runs, out = [], []
    for l in layers:
        if runs and l == runs[-1][1] + 1:
            runs[-1][1] = l
        else:
            runs.append([l, l])
    for a, b in runs:
        out.append(f"{a}" if a == b else f"{a}–{b}")
    return ", ".join(out)


def spearman(x, y) -> float | None:
    """Spearman's rank correlation (ties get their mean rank); None when either side is constant."""
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(v) -> np.ndarray:
    v = np.asarray(v, float)
    order = v.argsort(kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v))
    for value in np.unique(v):  # ties: the mean of their ranks
        tied = v == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def same_tokenizer(a, b) -> bool:
    """Whether two models read the same ids for the same text: the same vocabulary and, after
    depthutils' BOS rule (:func:`~depthutils.core.prompts.encode`), the same encoding."""
    probe = Prompt("The spouse of 5 + 7 = 12.", 0)
    return (a.tokenizer.get_vocab() == b.tokenizer.get_vocab()
            and encode(a.tokenizer, probe, prepend_bos=a.prepend_bos).input_ids.tolist()
            == encode(b.tokenizer, probe, prepend_bos=b.prepend_bos).input_ids.tolist())


def residuals(model, ids: torch.Tensor) -> torch.Tensor:
    """``[L, T, H]``: the output of every layer (``h_1 … h_L``) for one prompt, in float64."""
    return _layer_outputs(model, ids).double()


def _layer_outputs(model, ids: torch.Tensor) -> torch.Tensor:
    """``[L, T, H]``: the output of every layer for one prompt, in the model's dtype (one trace)."""
    L, T = model.n_layers, ids.shape[1]
    with model.no_grad(), model.trace(ids):
        outs = nnsight.save([])  # made and saved inside the trace: a remote trace returns only saved names
        for l in range(L):
            outs.append(check_residual(model.layers_output(l), 1, T, f"layer {l} output")[0].save())
    return torch.stack(list(outs))


def _residual_bytes(model, enc) -> int:
    """The size of one prompt's :func:`_layer_outputs` (what a request downloads for it)."""
    return model.n_layers * enc.n_tokens * model.text_config.hidden_size * model.dtype.itemsize


def _traced(model, ids: list, cache: dict | None, enabled: bool) -> list:
    """:func:`_layer_outputs` of ``model`` for every prompt of ``ids``; with ``cache``, each prompt traced at most
    once per model (kept in ``cache`` under the model's ``id``, beside the model itself so that the id stays its)."""
    what = f"mapping: residuals of {model.name}"
    if cache is None:
        return each(model, _layer_outputs, ids, what, enabled=enabled)
    memo = cache.setdefault(id(model), (model, {}))[1]
    keys = [tuple(i.flatten().tolist()) for i in ids]
    todo = {k: i for k, i in zip(keys, ids) if k not in memo}
    memo.update(zip(todo, each(model, _layer_outputs, list(todo.values()), what, enabled=enabled and bool(todo))))
    return [memo[k] for k in keys]


@counted
def cross_model_mapping(source, target, texts, *, held_out: float = 0.5, ridge: float = 1e-4, seed: int = 0,
                        max_tokens: int | None = None, progress_bar: bool = True,
                        cache: dict | None = None) -> MappingResult:
    """Fit affine maps from every layer of ``source`` to every layer of ``target`` and score them.

    Args:
        source, target: two loaded models that share a tokenizer (else one clear error).
        texts: prompts or strings; a ``seed``-shuffled ``1 - held_out`` of them fit the maps, the rest
            score them.
        ridge: the penalty λ, relative to the mean diagonal of ``XᵀX`` (default 1e-4: nearly plain
            least squares, but well-posed when a residual has fewer tokens than dimensions).
        max_tokens: a text longer than this (default: the shorter context of the two) is cut.
        cache: one dict passed to several calls on the same texts (as
            :func:`~depthutils.analysis.mapping_null.map_against_null` does): each model's residuals of each prompt
            are traced once and kept there, so a source mapped onto several targets, or a target from several
            sources, is traced once; the maps are the same without it. Whoever passes it drops a model's entry
            (``cache.pop(id(model))``) once it is no longer needed.

    Memory: ``XᵀX`` and ``XᵀY`` for all source layers, ``L_src·(H_src+1)·(H_src+1 + L_tgt·H_tgt)``
    float64 numbers, plus one prompt's residuals at a time.
    """
    if not same_tokenizer(source, target):
        raise DepthError(f"{source.name} and {target.name} do not share a tokenizer, so the same text gives them "
                         "different tokens; map models of one family (e.g. Qwen2.5-1.5B → Qwen2.5-14B).")
    if not 0 < held_out < 1:
        raise DepthError(f"held_out must be a fraction between 0 and 1, got {held_out!r}.")
    limits = [m for m in (source.max_length, target.max_length) if m]
    max_tokens = max_tokens or (min(limits) if limits else None)
    texts, encs, fit = encode_all(source, texts, max_tokens=max_tokens)
    n_fit = int(round(len(encs) * (1 - held_out)))
    if n_fit < 1 or n_fit >= len(encs):
        raise DepthError(f"Need texts both to fit and to score the maps; got {len(encs)} text(s) with "
                         f"held_out={held_out}: pass more texts.")
    encs = [encs[i] for i in random.Random(seed).sample(range(len(encs)), len(encs))]
    Ls, Lt = source.n_layers, target.n_layers
    xtx = xty = W = None
    tokens = 0
    errors, counts = [], []
    # residuals a request at a time (each under the size budget of depthutils.models.requests.REQUEST_BYTES): the
    # fitting prompts come first, so the maps are solved before the first scoring prompt is reached
    size = lambda enc: max(_residual_bytes(source, enc), _residual_bytes(target, enc))  # noqa: E731
    done = 0
    for group in batches(encs, size):
        ids = [enc.input_ids for enc in group]
        xs = _traced(source, ids, cache, progress_bar)
        ys = xs if target is source else _traced(target, ids, cache, progress_bar)
        for x, y in zip(xs, ys):
            x = with_bias(x.double()[:, 1:])  # [Ls, T-1, Hs+1]: BOS excluded
            y = y.double()[:, 1:]               # [Lt, T-1, Ht]
            if done < n_fit:
                flat = y.permute(1, 0, 2).reshape(y.shape[1], -1)  # [T-1, Lt*Ht]
                a, b = x.transpose(1, 2) @ x, x.transpose(1, 2) @ flat
                xtx, xty = (a, b) if xtx is None else (xtx.add_(a), xty.add_(b))  # in place: XᵀY is the big one
                tokens += x.shape[1]
            else:
                W = fit_maps(xtx, xty, ridge) if W is None else W  # [Ls, Hs+1, Lt*Ht]
                pred = (x @ W).reshape(Ls, x.shape[1], Lt, -1).permute(0, 2, 1, 3)  # [Ls, Lt, T', Ht]
                errors.append(((pred - y[None]).norm(dim=-1) / y[None].norm(dim=-1)).mean(-1).cpu().numpy())
                counts.append(x.shape[1])
            done += 1
    count = sum(counts)
    meta = make_meta(source, dataset="+".join(sorted({p.source or "custom" for p in texts})), n=len(texts),
                     seed=seed, fit=fit, source=source.name, target=target.name, target_revision=target.revision,
                     ridge=ridge, held_out=held_out, fit_tokens=tokens, scored_tokens=count)
    return MappingResult(meta=meta, error_by_prompt=np.stack(errors), prompt_tokens=np.array(counts)).with_aggregates()


def cost(src: Shape, tgt: Shape | None, Ts, dtype: str, remote: bool, held_out: float = 0.5,
                        same: bool = False) -> Cost:
    """Residuals of both models on every text (one trace when a model is mapped onto itself, ``same``), then
    the float64 work of :func:`depthutils.measures.cross_model_mapping.cross_model_mapping`, product by product:

    * per fitting text, ``XᵀX`` and ``XᵀY`` (``[H_src+1]`` rows each, ``product_rows``), ``XᵀY`` a fresh
      ``[L_src, H_src+1, L_tgt·H_tgt]`` tensor (``fresh_bytes``) added in place into the sum (``stream_bytes``);
    * once, :func:`~depthutils.core.ridge.fit_maps`: the penalised ``XᵀX`` (two fresh copies), one
      solve per source layer (``solve_flops``), whose right-hand side is copied into a fresh buffer, and the
      result copied into the fresh maps ``W``;
    * per held-out text, the predictions ``x @ W`` (``T-1`` rows per source layer) into a fresh
      ``[L_src, T-1, L_tgt·H_tgt]`` tensor, their difference from the targets (fresh) and its norm."""
    tgt = src if tgt is None else tgt  # None: the source's own (a model mapped onto itself)
    Ls, Lt, Hs, Ht = src.layers, tgt.layers, src.hidden + 1, tgt.hidden
    K, n_fit = Lt * Ht, round(len(Ts) * (1 - held_out))
    O = Ls * Hs * K * 8  # bytes of XᵀY (and of the maps W)
    costs = []
    for i, T in enumerate(Ts):
        for sh in ((src,) if same else (src, tgt)):
            a = Acc(sh, "cross_model_mapping", T)
            work = trace_pass(a, sh, 1, T, dtype) + sh.layers * T * sh.hidden * (BYTES[dtype] + 8)
            costs.append(a.done(0.0, work, download=sh.layers * T * sh.hidden * BYTES[dtype]))
        c, n = costs[-1], T - 1  # the BOS is left out of the fit
        if i < n_fit:
            products = {Hs: 2 * Ls * n * Hs * (Hs + K)}
            c.fresh_bytes += O
            c.stream_bytes += 3 * O if i else 0.0
        else:
            products = {n: 2 * Ls * n * Hs * K}
            P = Ls * n * K * 8  # bytes of one text's predictions
            c.fresh_bytes += 2 * P
            c.stream_bytes += 2 * P
            c.work = max(c.work, 2 * P)
        for rows, f in products.items():
            c.flops_fwd += f
            c.linalg_flops += f
            c.product_rows[rows] += f
    out = total(costs)
    solve = Ls * (2 / 3 * Hs ** 3 + 2 * Hs ** 2 * K)
    out.flops_fwd += solve
    out.solve_flops += solve
    out.fresh_bytes += 2 * Ls * Hs * Hs * 8 + 2 * O  # the penalised XᵀX; the solves' buffers and W
    out.stream_bytes += 2 * O  # the right-hand sides read into the buffers, the buffers read into W
    out.saved = Ls * Hs * (Hs + K) * 8 * 2  # XᵀX, XᵀY and the maps W
    out.work = max(out.work, Ls * Hs * (Hs + K) * 8)  # one text's XᵀX and XᵀY before they are added
    out.what = "cross_model_mapping"
    return with_requests(out, remote)


def example(model, **options) -> Example:
    """A few held-out windows, cut to a few tokens, the model mapped onto itself
    (:mod:`depthutils.measures.example`)."""
    texts, Ts = held_out_texts(model)
    return Example(lambda: cross_model_mapping(model, model, texts, max_tokens=TOKENS, progress_bar=False, **options),
                   {"tgt": None, "Ts": Ts, "same": True})
