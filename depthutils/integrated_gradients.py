"""P1 §5 / Fig. 6a: integrated gradients of the answer probability w.r.t. each layer's output.

``f`` is the sum over answer tokens of ``p(gold token)`` (teacher-forced). For
layer ``l`` the input ``x`` is the layer's output at every position and the
baseline ``b`` is its mean over positions (this prompt only). The attribution
is the left Riemann sum

    A[l, t] = (1/K) Σ_{k<K} Σ_d ∂f/∂x (b + (k/K)(x − b))[t, d] · (x − b)[t, d],

run ``batch_size`` interpolation steps per forward+backward. Completeness:
``Σ_t A[l, t] → f(x) − f(b)`` as K grows; the result reports the relative gap.

``rule="gauss"`` replaces P1's left Riemann sum by Gauss–Legendre quadrature on
``[0, 1]`` (nodes ``α_k``, weights ``w_k``): ``A = Σ_k w_k Σ_d ∂f/∂x(b + α_k(x − b))·(x − b)``.
The path integral is smooth, so K Gauss nodes are far more accurate than K
Riemann points (captum's default, ``method="gausslegendre"``). P1's rule stays
the default so that the book's numbers stay P1's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from . import stack
from ._run import encode_all, progress
from .errors import DepthError, check_finite
from .models import check_residual
from .remote import each
from .prompts import as_prompt
from .results import Result, context_depth, describe, make_meta

PARTS = ("layer", "attn", "mlp")
RULES = ("riemann", "gauss")


def quadrature(rule: str, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``α_k`` in ``[0, 1]`` and weights ``w_k`` (summing to 1) of ``steps``-point ``rule``:
    P1's left Riemann sum (``α_k = k/K``, ``w_k = 1/K``) or Gauss–Legendre."""
    if rule == "riemann":
        return np.arange(steps) / steps, np.full(steps, 1.0 / steps)
    if rule == "gauss":
        x, w = np.polynomial.legendre.leggauss(steps)
        return (x + 1) / 2, w / 2
    raise DepthError(f"rule must be one of {RULES}, got {rule!r}.")


@dataclass
class IGResult(Result):
    """``attribution [L, T]``, ``tokens``, ``f_x`` (scalar), ``f_b [L]`` and ``completeness_gap [L]``.

    ``completeness_gap[l] = |Σ_t A[l, t] − (f(x) − f(b_l))| / |f(x) − f(b_l)|``.
    """

    attribution: np.ndarray = None
    tokens: np.ndarray = None
    f_b: np.ndarray = None
    completeness_gap: np.ndarray = None
    f_x: float = None
    kind: ClassVar[str] = "integrated_gradients"

    def facts(self) -> dict:
        """f(x), the layer with the most |attribution|, the completeness gap and the deepest layer at
        which a context position carries more than 10% of the largest |attribution| (BOS excluded)."""
        A = self.attribution[:, 1:]  # BOS apart, as in the figure's colour scale
        deep = context_depth(np.pad(A, ((0, 0), (1, 0))), min(self.meta["params"]["predict_positions"]))
        L = self.attribution.shape[0]
        return {"f_x": round(self.f_x, 3), "top_layer": int(np.abs(A).sum(1).argmax()),
                "max_gap": round(float(self.completeness_gap.max()), 3), "deepest": deep,
                "deepest_rel": None if deep is None else round((deep + 1) / L, 2)}

    def findings(self) -> str:
        f = self.facts()
        return (f"f(x) = {f['f_x']:.3f}; the largest total |attribution| sits at layer {f['top_layer']}. "
                f"Completeness gap (|Σ_t A − (f(x) − f(b))| relative): max {f['max_gap']:.3f} over layers.")


def rule_error(result: IGResult, reference: IGResult) -> float:
    """``max |A − A_ref| / max |A_ref|``: how far an attribution is from a converged reference
    (e.g. Gauss–Legendre with many nodes), BOS column excluded as in the figure."""
    a, ref = result.attribution[:, 1:], reference.attribution[:, 1:]
    return float(np.abs(a - ref).max() / np.abs(ref).max())


def rule_comparison(riemann: IGResult, gauss: IGResult, reference: IGResult) -> dict:
    """How far P1's Riemann sum and a Gauss–Legendre rule each are from a converged ``reference`` on this
    run (:func:`rule_error`), which of the two is closer, and that said in one sentence."""
    n = lambda r: r.meta["params"]["steps"]
    err = {"riemann": round(rule_error(riemann, reference), 4), "gauss": round(rule_error(gauss, reference), 4)}
    closer = "gauss" if err["gauss"] < err["riemann"] else "riemann"
    names = {"riemann": f"Riemann with {n(riemann)} points", "gauss": f"Gauss–Legendre with {n(gauss)} nodes"}
    other = "riemann" if closer == "gauss" else "gauss"
    sentence = (f"Against Gauss–Legendre with {n(reference)} nodes, {names[closer]} is closer (error "
                f"{err[closer]:.4f} of the largest attribution) than {names[other]} ({err[other]:.4f}).")
    return {**err, "riemann_steps": n(riemann), "gauss_steps": n(gauss), "closer": names[closer],
            "farther": names[other], "sentence": sentence}


def _target(model, pred: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """``f`` per batch row: Σ over answer tokens of the gold token's probability."""
    probs = model.logits()[:, pred].float().softmax(-1)  # [B, P, V]
    return probs[:, torch.arange(len(gold)), gold].sum(-1)


def _groups(n: int, size: int) -> list[list[int]]:
    return [list(range(i, min(i + size, n))) for i in range(0, n, size)]


def integrated_gradients(model, prompt, answer: str | None = None, steps: int = 256, part: str = "layer", *,
                         rule: str = "riemann", batch_size: int = 16, layers_per_pass: int | None = None,
                         method: str = "auto", max_tokens: int | None = None, progress_bar: bool = True) -> IGResult:
    """Attribution of the answer probability to every (layer, position) of ``part``'s output.

    Args:
        steps: K, the number of interpolation points (P1: 256).
        rule: ``"riemann"`` (P1's left Riemann sum) or ``"gauss"`` (Gauss–Legendre: the same accuracy
            from far fewer points, see :func:`quadrature`).
        batch_size: interpolation points per forward+backward for one layer (P1: 16).
        layers_per_pass: how many layers share one forward+backward (their rows are independent);
            default all, lower it for large models to bound memory (``"batched"`` method).
        method: ``"stack"`` runs only the layers above ``l`` (local fp32 models, ``part="layer"``);
            ``"batched"`` runs nnsight traces of the whole model (remote, bf16, sublayer parts);
            ``"auto"`` picks ``"stack"`` where it applies.
        max_tokens: the prompt's answer must end within this many tokens (default: the model's context).
    """
    if part not in PARTS:
        raise DepthError(f"part must be one of {PARTS}, got {part!r}.")
    if steps < 1 or batch_size < 1 or (layers_per_pass is not None and layers_per_pass < 1):
        raise DepthError("steps and batch_size must be positive whole numbers.")
    alphas, weights = quadrature(rule, steps)
    p = as_prompt(prompt, answer)
    (p,), (enc,), fit = encode_all(model, [p], need_answer=True, max_tokens=max_tokens)
    ids = enc.input_ids  # all of it: the baseline is the mean over every position
    pred, gold = torch.tensor(enc.predict_positions), torch.tensor(enc.answer_ids)
    if method not in ("auto", "stack", "batched"):
        raise DepthError(f"method must be 'auto', 'stack' or 'batched', got {method!r}.")
    fast = method == "stack" or (method == "auto" and stack.usable(model) and part == "layer")
    if fast and not (stack.usable(model) and part == "layer"):
        raise DepthError("method='stack' needs a local float32 model and part='layer'; use method='batched'.")
    if fast:
        f_x = _f_of_x(model, (ids, pred, gold))
        A, f_b = _stack_ig(model, ids, pred, gold, alphas, weights, batch_size, progress_bar)
    else:
        f_x, A, f_b = _batched_ig(model, ids, pred, gold, alphas, weights, batch_size, layers_per_pass, part,
                                  progress_bar)
    fx = float(f_x[0])
    gap = np.abs(A.sum(1) - (fx - f_b)) / np.maximum(np.abs(fx - f_b), 1e-12)
    check_finite("integrated-gradients attribution", A)
    meta = make_meta(model, dataset=describe([p])[0], n=1, fit=fit, prompt=p.context, answer=p.answer,
                     predict_positions=enc.predict_positions, steps=steps, rule=rule,
                     part=part, batch_size=batch_size, layers_per_pass=layers_per_pass,
                     method="stack" if fast else "batched")
    return IGResult(meta=meta, attribution=A, tokens=np.array(enc.tokens), f_b=f_b, completeness_gap=gap, f_x=fx)


def _stack_ig(model, ids, pred, gold, alphas, weights, batch_size, progress_bar):
    """Fast path: for layer l, only layers l+1 … L-1 run on the interpolated batch, and only on the
    positions up to the last one that predicts an answer token (later ones cannot change ``f``, and
    their attribution is 0); in the last layer only the answer-predicting positions are computed
    whole (see :meth:`~depthutils.stack.Stack.run_to`)."""
    st = stack.Stack(model, ids)
    L, T, steps = st.L, ids.shape[1], len(alphas)
    cut = st.suffix_ok()  # whether layers can be run on a window of positions
    hi, first = (int(pred.max()) + 1, int(pred.min())) if cut else (T, 0)
    A, f_b = np.zeros((L, T)), np.zeros(L)
    chunks = [(l, start) for l in range(L) for start in range(0, steps, batch_size)]
    gold_at = torch.arange(len(gold))
    target = lambda z, l: st.unembed(st.run_to(z, l + 1, first)[:, pred - first]).float().softmax(-1)[  # noqa: E731
        :, gold_at, gold].sum(-1)
    for l, start in progress(chunks, "integrated gradients (layer)", enabled=progress_bar):
        ks = slice(start, min(start + batch_size, steps))
        x = st.outputs[l]
        b = x.mean(dim=1, keepdim=True)  # mean over all positions (the sequence axis)
        alpha = torch.as_tensor(alphas[ks], dtype=x.dtype, device=x.device).view(-1, 1, 1)
        z = (b + alpha * (x[:, :hi] - b)).detach().requires_grad_(True)
        with torch.enable_grad():
            f = target(z, l)
            (grad,) = torch.autograd.grad(f.sum(), z)
        w = torch.as_tensor(weights[ks], dtype=torch.float64)
        A[l, :hi] += (w[:, None] * (grad.float() * (x[:, :hi] - b).float()).sum(-1).double().cpu()).sum(0).numpy()
        if start == 0:
            with torch.no_grad():
                f_b[l] = f[0].item() if alphas[0] == 0 else target(b.expand(1, hi, -1), l)[0].item()
    return A, f_b


def _f_of_x(model, item) -> torch.Tensor:
    """``f`` on the clean prompt (one trace), ``[1]``."""
    ids, pred, gold = item
    with model.no_grad(), model.trace(ids):
        f_x = _target(model, pred, gold).save()
    return f_x


def _sublayer(model, part: str):
    """The read and the write of ``part``'s output (``(get, put)``)."""
    return ({"layer": model.layers_output, "attn": model.attentions_output, "mlp": model.mlps_output}[part],
            {"layer": model.set_layers_output, "attn": model.set_attentions_output,
             "mlp": model.set_mlps_output}[part])


def _batched_ig(model, ids, pred, gold, alphas, weights, batch_size, layers_per_pass, part, progress_bar):
    """nnsight path: interpolation rows of several layers share one forward+backward; ``f(x)``, every
    pass and (rules without an ``α = 0`` node) every ``f(b_l)`` go to NDIF in one request.
    Returns ``f(x)``, the attribution ``[L, T]`` and ``f(b_l)`` ``[L]``."""
    L, T, steps = model.n_layers, ids.shape[1], len(alphas)
    A = np.zeros((L, T))
    f_b = np.zeros(L)
    group = L if layers_per_pass is None else layers_per_pass
    passes = [("pass", ls, start) for ls in _groups(L, group) for start in range(0, steps, batch_size)]
    bases = [] if alphas[0] == 0 else [("base", ls, 0) for ls in _groups(L, group)]
    items = [(what, ids, pred, gold, part, ls, alphas[start:start + batch_size], weights[start:start + batch_size])
             for what, ls, start in [("f", [], 0)] + passes + bases]
    f_x, *outs = each(model, _ig_trace, items, f"integrated gradients ({part})", enabled=progress_bar)
    for (what, ls, start), out in zip(passes + bases, outs):
        if what == "pass":
            contrib, f0 = out
            A[ls] += contrib.double().cpu().numpy()
            if start == 0 and alphas[0] == 0:
                f_b[ls] = f0.double().cpu().numpy()  # row k = 0 of every layer: f(b_l)
        else:
            f_b[ls] = out
    return f_x, A, f_b


def _ig_trace(model, item):
    """One trace of the batched path. ``item = (what, ids, pred, gold, part, ls, alphas, weights)``: ``"f"``
    gives ``f(x)``; ``"pass"`` interpolates the outputs of layers ``ls`` at ``alphas`` and returns their
    weighted attribution ``[len(ls), T]`` and ``f`` at each layer's first row; ``"base"`` gives ``f(b_l)``
    for each layer of ``ls``."""
    what, ids, pred, gold, part, ls, alphas, weights = item
    if what == "f":
        return _f_of_x(model, (ids, pred, gold))
    get, put = _sublayer(model, part)
    if what == "base":
        return _f_at_baseline(model, ids, pred, gold, ls, get, put)
    T = ids.shape[1]
    # made here on the CPU; moved inside the trace to wherever the model runs (a GPU, or NDIF's)
    alpha = torch.as_tensor(alphas, dtype=torch.float32).view(-1, 1, 1)
    w = torch.as_tensor(weights, dtype=torch.float32).view(-1, 1)
    K = alpha.shape[0]
    B = len(ls) * K  # rows [i*K, (i+1)*K) interpolate layer ls[i]
    zs, diffs, grads = [], [], []
    with model.trace(ids.expand(B, T)):
        for i, l in enumerate(ls):
            out = check_residual(get(l), B, T, f"{part} {l} output")
            x = out[i * K:i * K + 1].detach()  # these rows are still clean at layer l
            b = x.mean(dim=1, keepdim=True)  # mean over positions (the sequence axis)
            z = (b + alpha.to(x.device, x.dtype) * (x - b)).detach().requires_grad_(True)
            put(l, torch.cat([out[:i * K], z, out[(i + 1) * K:]]))
            zs.append(z)
            diffs.append(x - b)
        f = _target(model, pred, gold)
        with f.sum().backward():
            for z in reversed(zs):  # gradients arrive in reverse forward order
                grads.append(z.grad.save())
        contrib = torch.stack([(w.to(g.device) * (g.float() * d.float()).sum(-1)).sum(0)
                               for g, d in zip(reversed(grads), diffs)]).save()
        f0 = f[::K].detach().save()  # row k = 0 of every layer: f(b_l) when α_0 = 0
    return contrib, f0


def _f_at_baseline(model, ids, pred, gold, ls, get, put) -> np.ndarray:
    """``f(b_l)`` for each layer of ``ls`` (row i replaces layer ls[i]'s output by its mean over positions),
    for rules without an ``α = 0`` node."""
    B, T = len(ls), ids.shape[1]
    with model.no_grad(), model.trace(ids.expand(B, T)):
        for i, l in enumerate(ls):
            out = check_residual(get(l), B, T, f"layer {l} output")
            b = out[i:i + 1].mean(dim=1, keepdim=True).expand(1, T, -1)
            put(l, torch.cat([out[:i], b, out[i + 1:]]))
        f = _target(model, pred, gold).save()
    return f.double().cpu().numpy()
