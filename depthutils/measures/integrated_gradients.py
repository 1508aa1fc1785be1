"""P1 §5 / Fig. 6a: integrated gradients of the answer probability w.r.t. each layer's output.

``f`` is the sum over answer tokens of ``p(gold token)`` (teacher-forced). For
layer ``l`` the input ``x`` is the layer's output at every position and the
baseline ``b`` is its mean over positions (this prompt only). Along the path
``z(α) = b + α(x − b)`` the integrand at position ``t`` is
``g_t(α) = Σ_d ∂f/∂x(z(α))[t, d] · (x − b)[t, d]``, and ``Σ_t g_t(α) = df(z(α))/dα``,
so ``Σ_t ∫_0^1 g_t = f(x) − f(b)`` (completeness). P1's attribution is the left Riemann sum

    A[l, t] = (1/K) Σ_{k<K} g_t(k/K),

run ``batch_size`` interpolation points per forward+backward (P1: 16; here, by default, the fastest batch
on the stack path, :data:`depthutils.cost.chunks.IG_ROWS`, and P1's on the batched path). The rules live in
:mod:`depthutils.measures.quadrature`: ``rule="riemann"`` (P1's, the default, so the book's
numbers stay P1's), ``rule="gauss"`` (Gauss–Legendre) and ``rule="adaptive"``
(composite Simpson/Boole panels refined where the integrand has its steps, with
``tol`` and ``budget``). Every result carries, per layer, an error estimate of its
rule (the fixed rules: the same points at half resolution; the adaptive rule: its
panels) and the completeness residual ``|Σ_t A − (f(x) − f(b))|``.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from depthutils.core.depth import layer_depth
from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.numbers import rounded
from depthutils.core.progress import bars_wanted
from depthutils.core.prompts import as_prompt
from depthutils.core.results import Result, context_depth, describe, make_meta
from depthutils.core.threads import spare_threads
from depthutils.cost.accounting import BYTES, Acc, Cost, Shape, with_requests
from depthutils.cost.budget import budget_bytes, dtype_of, pick_batch, shape_of
from depthutils.cost.chunks import IG_ROWS
from depthutils.cost.passes import stack_pass, trace_pass
from depthutils.measures import counted
from depthutils.measures import quadrature as quad
from depthutils.measures.example import STEPS, Example, arithmetic
from depthutils.measures.ig_path import Integrand
from depthutils.models import stack

PARTS = ("layer", "attn", "mlp")
#: interpolation points per forward+backward of P1's code (and of the batched path, by default)
P1_BATCH = 16
RULES = quad.RULES


@dataclass
class IGResult(Result):
    """``attribution [L, T]``, ``tokens``, ``f_x`` (scalar), ``f_b [L]``, ``completeness_gap [L]`` and the
    rule's error: ``error [L, T]`` (its estimate of ``|A − A_exact|`` per cell; NaN where the rule has none)
    and ``residual [L]`` (``|Σ_t A[l, t] − (f(x) − f(b_l))|``), with ``evaluations`` (interpolation points,
    summed over layers), ``rounds`` (batched passes, NDIF requests on a remote model, ``f(x)`` aside) and
    ``seconds`` (wall time of the call).

    ``completeness_gap[l] = residual[l] / |f(x) − f(b_l)|``.
    """

    attribution: np.ndarray = None
    tokens: np.ndarray = None
    f_b: np.ndarray = None
    completeness_gap: np.ndarray = None
    error: np.ndarray = None
    residual: np.ndarray = None
    f_x: float = None
    evaluations: int = None
    rounds: int = None
    seconds: float = None
    kind: ClassVar[str] = "integrated_gradients"

    def error_bars(self) -> np.ndarray:
        """Per layer, the error bound of any one cell (BOS column apart): the rule's largest estimate
        ``max_t error[l, t]`` plus the completeness residual ``residual[l]``."""
        return (self.error[:, 1:].max(1) if self.error.shape[1] > 1 else self.error.max(1)) + self.residual

    def facts(self) -> dict:
        """f(x), the layer with the most |attribution|, the completeness gap (per layer's own ``f(x) − f(b_l)``,
        and ``completeness``: the largest residual as a share of the largest ``|f(x) − f(b_l)|``, which no
        near-zero denominator inflates), the deepest layer at which a context position carries more than 10%
        of the largest |attribution| (BOS excluded), and the rule's cost and estimated error (a share of the
        largest |attribution|, BOS excluded)."""
        A = self.attribution[:, 1:]  # BOS apart, as in the figure's colour scale
        deep = context_depth(np.pad(A, ((0, 0), (1, 0))), min(self.meta["params"]["predict_positions"]))
        L = self.attribution.shape[0]
        scale = float(np.abs(A).max()) if A.size else 0.0
        err = float(self.error_bars().max()) / scale if scale > 0 else float("nan")
        delta = float(np.abs(self.f_x - self.f_b).max())
        return {"f_x": round(self.f_x, 3), "top_layer": int(np.abs(A).sum(1).argmax()),
                "max_gap": round(float(self.completeness_gap.max()), 3), "deepest": deep,
                "completeness": round(float(self.residual.max()) / delta, 3) if delta > 0 else None,
                "deepest_rel": None if deep is None else round(layer_depth(deep, L), 2),  # layer deep's output
                "rule": self.meta["params"]["rule"], "evaluations": int(self.evaluations),
                "per_layer": rounded(self.evaluations / L), "rounds": int(self.rounds),
                "max_error": None if np.isnan(err) else float(f"{err:.2g}")}

    def findings(self) -> str:
        f = self.facts()
        err = ("no error estimate (fewer than 2 points)" if f["max_error"] is None
               else f"estimated error at most {f['max_error']:.1e} of the largest |attribution| in any cell")
        return (f"f(x) = {f['f_x']:.3f}; the largest total |attribution| sits at layer {f['top_layer']}. "
                f"Completeness gap (|Σ_t A − (f(x) − f(b))| relative): max {f['max_gap']:.3f} over layers. "
                f"Rule {f['rule']}: {f['evaluations']} evaluations ({f['per_layer']} per layer, "
                f"{f['rounds']} batched pass{'es' if f['rounds'] != 1 else ''}), {err}.")


def _fast(model, method: str, part: str) -> bool:
    """Whether ``method`` runs the stack path (:mod:`depthutils.models.stack`) on ``model``."""
    return method == "stack" or (method == "auto" and stack.usable(model) and part == "layer")


@counted
def integrated_gradients(model, prompt, answer: str | None = None, steps: int = 256, part: str = "layer", *,
                         rule: str = "riemann", tol: float = quad.TOL, budget: int = quad.BUDGET,
                         max_rounds: int = quad.MAX_ROUNDS,
                         batch_size: int | None = None, layers_per_pass: int | None = None, method: str = "auto",
                         max_tokens: int | None = None, max_memory=None, progress_bar: bool = True) -> IGResult:
    """Attribution of the answer probability to every (layer, position) of ``part``'s output.

    Args:
        steps: K, the number of interpolation points of a fixed rule (P1: 256); unused by ``"adaptive"``.
        rule: ``"riemann"`` (P1's left Riemann sum), ``"gauss"`` (Gauss–Legendre; it also evaluates
            ``α = 0`` once per layer, for ``f(b)``) or ``"adaptive"`` (see :func:`depthutils.measures.quadrature.adaptive`).
        tol: the adaptive rule stops when every layer's estimated error is below ``tol`` × the largest
            |attribution| (default 1e-4) ...
        budget: ... or when it has spent ``budget`` evaluations per layer on average (default 64, a quarter
            of P1's K) ...
        max_rounds: ... or after this many rounds (default 16), each one batched pass (one NDIF request on a
            remote model).
        batch_size: interpolation points per forward+backward (P1: 16). Default: on the batched path P1's
            :data:`P1_BATCH` for one layer; on the stack path the rows of every layer share the batches, up to
            :data:`depthutils.cost.chunks.IG_ROWS` (the fastest on a CPU, measured) and as many as the cost model
            fits in ``max_memory``. It changes the memory and the time, not the result.
        layers_per_pass: how many layers share one forward+backward (their rows are independent);
            default: the most whose memory the cost model fits in ``max_memory`` (``"batched"`` method; the
            ``"stack"`` method runs each layer's rows on the layers above it).
        method: ``"stack"`` runs only the layers above ``l`` (local fp32 models, ``part="layer"``);
            ``"batched"`` runs nnsight traces of the whole model (remote, bf16, sublayer parts);
            ``"auto"`` picks ``"stack"`` where it applies.
        max_tokens: the prompt's answer must end within this many tokens (default: the model's context).
        max_memory: bytes (or a size such as ``"8GB"``) the batched path may use above the weights (default:
            what the device has free; :func:`depthutils.cost.budget.pick_batch`, which says so).
    Beside other CPU-bound processes a local model runs on the threads they leave free
    (:func:`depthutils.core.threads.spare_threads`, which says so).
    """
    if part not in PARTS:
        raise DepthError(f"part must be one of {PARTS}, got {part!r}.")
    if rule not in RULES:
        raise DepthError(f"rule must be one of {RULES}, got {rule!r}.")
    if steps < 1 or (batch_size is not None and batch_size < 1) or (layers_per_pass is not None and layers_per_pass < 1):
        raise DepthError("steps and batch_size must be positive whole numbers.")
    if method not in ("auto", "stack", "batched"):
        raise DepthError(f"method must be 'auto', 'stack' or 'batched', got {method!r}.")
    t0 = time.perf_counter()
    p = as_prompt(prompt, answer)
    (p,), (enc,), fit = encode_all(model, [p], need_answer=True, max_tokens=max_tokens)
    ids = enc.input_ids  # all of it: the baseline is the mean over every position
    pred, gold = torch.tensor(enc.predict_positions), torch.tensor(enc.answer_ids)
    fast = _fast(model, method, part)
    if fast and not (stack.usable(model) and part == "layer"):
        raise DepthError("method='stack' needs a local model in float32 (or in bfloat16 on batch-invariant kernels, see "
                         "depthutils.models.stack.batch_invariant) and part='layer'; use method='batched'.")
    n_fixed = steps if rule != "adaptive" else budget
    if batch_size is None:
        largest = _largest_batch(fast, n_fixed, model.n_layers)
        batch_size = largest if not fast else pick_batch(
            "integrated gradients (rows per pass)",
            lambda b: cost(shape_of(model), ids.shape[1], len(pred), dtype_of(model), True, False, steps=n_fixed,
                           batch=b).peak,
            largest, budget_bytes(model, max_memory), smallest=1, say=progress_bar)
    if not fast and layers_per_pass is None and not getattr(model, "remote", False):
        layers_per_pass = pick_batch(
            "integrated gradients (layers per pass)",
            lambda g: cost(shape_of(model), ids.shape[1], len(pred), dtype_of(model), False, False,
                                              steps=n_fixed, batch=batch_size, layers_per_pass=g).peak,
            model.n_layers, budget_bytes(model, max_memory), smallest=1, say=progress_bar)
    remote = getattr(model, "remote", False)
    with contextlib.nullcontext() if remote else spare_threads("integrated gradients", say=progress_bar and bars_wanted()):
        path = Integrand(model, ids, pred, gold, part, fast, batch_size, layers_per_pass, progress_bar)
        if rule == "adaptive":
            q = quad.adaptive(path.evaluate, path.L, tol=tol, budget=budget, max_rounds=max_rounds, skip=1)
            A, err, f_b, evals, rounds = q.integral, q.error, q.F0, int(q.evaluations.sum()), q.rounds
        else:
            A, err, f_b, evals = _fixed(path, rule, steps)
            rounds = 1
    fx = path.f_x
    residual = np.abs(A.sum(1) - (fx - f_b))
    gap = residual / np.maximum(np.abs(fx - f_b), 1e-12)
    check_finite("integrated-gradients attribution", A)
    extra = dict(tol=tol, budget=budget, max_rounds=max_rounds, stopped=q.stopped) if rule == "adaptive" else {}
    meta = make_meta(model, dataset=describe([p])[0], n=1, fit=fit, prompt=p.context, answer=p.answer,
                     predict_positions=enc.predict_positions, steps=steps, rule=rule, **extra,
                     part=part, batch_size=batch_size, layers_per_pass=layers_per_pass,
                     method="stack" if fast else "batched")
    return IGResult(meta=meta, attribution=A, tokens=np.array(enc.tokens), f_b=f_b, completeness_gap=gap,
                    error=err, residual=residual, f_x=fx, evaluations=evals, rounds=rounds,
                    seconds=time.perf_counter() - t0)


def _largest_batch(fast: bool, steps: int, layers: int) -> int:
    """Interpolation points per pass before a memory budget lowers them: on the stack path, where the layers' rows
    share the batches, :data:`~depthutils.cost.chunks.IG_ROWS` (or all of them, if fewer); P1's 16 otherwise."""
    return min(IG_ROWS, steps * layers) if fast else P1_BATCH


def _fixed(path: Integrand, rule: str, steps: int):
    """A fixed rule in one batched pass: the attribution, its half-resolution error estimate, ``f(b_l)`` and
    the number of evaluations. Rules without an ``α = 0`` node evaluate it as well, for ``f(b_l)``."""
    nodes, w, half = quad.fixed_rule(rule, steps)
    with_zero = nodes[0] != 0
    alphas = np.concatenate([[0.0], nodes]) if with_zero else nodes
    out = path.evaluate([alphas] * path.L)
    g = np.stack([o[0] for o in out])  # [L, K(+1), T]
    f_b = np.array([o[1][0] for o in out])
    g = g[:, 1:] if with_zero else g
    A = np.einsum("k,lkt->lt", w, g)
    err = np.full_like(A, np.nan) if half is None else np.abs(A - np.einsum("k,lkt->lt", half, g))
    return A, err, f_b, len(alphas) * path.L


def cost(s: Shape, T: int, n_pred: int, dtype: str, fast: bool, remote: bool, *, steps: int = 256,
         batch: int | None = None, rule: str = "riemann", layers_per_pass: int | None = None) -> Cost:
    """One prompt's attribution: ``steps`` interpolation points (evaluations) per layer, ``batch`` per pass
    (default: :func:`integrated_gradients`'s largest, before a memory budget lowers it). An adaptive rule's
    ``budget`` of evaluations per layer is ``steps`` here."""
    L = s.layers
    if batch is None:
        batch = _largest_batch(fast, steps, L)
    a = Acc(s, "integrated_gradients", T)
    trace_pass(a, s, 1, T, dtype)  # f(x)
    if fast:
        saved = stack_pass(a, s, T, dtype)
        a.layers(2, 1, T // 2)  # suffix_ok
        hi = T - 1  # positions up to the last one that predicts an answer token
        for l in range(L):
            for start in range(0, steps, batch):
                r = min(batch, steps - start)
                a.layers(max(L - 2 - l, 0), r, hi, grad=True)
                if l < L - 1:  # the last layer: keys and values of the earlier positions, then the answer's
                    a.layers(1, r, hi - n_pred, grad=True, share=s.kv_share)
                    a.layers(1, r, n_pred, context=hi, grad=True)
                a.unembed(r, n_pred, grad=True)
        # a batch holds the rows of several layers (stack path), the lowest one's running the most layers
        r = min(batch, steps * L)
        work = s.saved_bytes(r, hi, L - 1, dtype) + 3 * r * hi * s.hidden * BYTES[dtype] + s.act_bytes(r, hi, dtype) \
            + 2 * s.logit_bytes(r, n_pred)
        if rule != "riemann":  # f(b) of each layer
            for l in range(L):
                a.layers(L - 1 - l, 1, hi)
        return with_requests(a.done(saved, work, batch=batch), remote)
    g = L if layers_per_pass is None else layers_per_pass
    work, download, groups = 0.0, 0.0, [list(range(i, min(i + g, L))) for i in range(0, L, g)]
    for ls in groups:
        for start in range(0, steps, batch):
            rows = len(ls) * min(batch, steps - start)
            a.layers(L - ls[0], rows, T, grad=True)  # the backward reaches down to the lowest layer
            a.layers(ls[0], rows, T)
            a.unembed(rows, T, grad=True)
            work = max(work, s.saved_bytes(rows, T, L - ls[0], dtype) + s.act_bytes(rows, T, dtype)
                       + rows * T * s.vocab * BYTES[dtype] * 2 + 2 * s.logit_bytes(rows, n_pred))
            download += 4 * len(ls) * (T + 1)
        if rule != "riemann":
            trace_pass(a, s, len(ls), T, dtype)
    return with_requests(a.done(0.0, work, download=download, batch=batch,
                                note=f"{g} layer(s) per pass"), remote)


def example(model, **options) -> Example:
    """P1's arithmetic prompt at a few steps (:mod:`depthutils.measures.example`)."""
    prompt, T, n_pred = arithmetic(model)
    return Example(lambda: integrated_gradients(model, prompt, steps=STEPS, progress_bar=False, **options),
                   {"T": T, "n_pred": n_pred, "fast": _fast(model, options.get("method", "auto"), "layer"),
                    "steps": STEPS})
