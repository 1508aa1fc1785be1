"""The integrand of integrated gradients along every layer's path (:class:`Integrand`), for
:func:`depthutils.measures.integrated_gradients.integrated_gradients` and its rules: ``g_t(α)`` and ``f(z(α))`` at
any α of any layer, on the stack path (only the layers above ``l``, batches shared by the layers) or on batched
nnsight traces (remote, bfloat16, sublayer parts), each call one batched pass (one NDIF request).
"""
from __future__ import annotations

import numpy as np
import torch

from depthutils.core.progress import progress
from depthutils.models import stack
from depthutils.models.architectures import check_residual
from depthutils.models.each import each


def _answer_probability(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """``f`` per batch row from the logits at the answer-predicting positions ``[B, P, V]``: Σ over answer
    tokens of the gold token's probability."""
    return logits.float().softmax(-1)[:, torch.arange(len(gold)), gold].sum(-1)


def _target(model, pred: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """``f`` per batch row of a trace (:func:`_answer_probability` of the model's logits)."""
    return _answer_probability(model.logits()[:, pred], gold)



class Integrand:
    """The integrand of every layer along its path: ``evaluate`` takes one array of α per layer and returns,
    per layer, ``g(α) [K, T]`` and ``f(z(α)) [K]``, all of it in one batched pass (one NDIF request).
    ``f_x`` is ``f`` on the clean prompt (in the first request on the batched path)."""

    def __init__(self, model, ids, pred, gold, part, fast, batch_size, layers_per_pass, progress_bar):
        self.model, self.ids, self.pred, self.gold, self.part = model, ids, pred, gold, part
        self.fast, self.batch_size, self.bar = fast, batch_size, progress_bar
        self.L, self.T = model.n_layers, ids.shape[1]
        self.group = self.L if layers_per_pass is None else layers_per_pass
        self.f_x = None
        if fast:
            self.f_x = float(_f_of_x(model, (ids, pred, gold))[0])
            self.st = stack.Stack(model, ids)

    def evaluate(self, alphas: list) -> list:
        if self.fast:
            return self._stack(alphas)
        return self._batched(alphas)

    def _stack(self, alphas):
        """Fast path: for layer l, only layers l+1 … L-1 run on the interpolated rows, and only on the
        positions up to the last one that predicts an answer token (later ones cannot change ``f``, and
        their attribution is 0); in the last layer only the answer-predicting positions are computed
        whole (see :meth:`~depthutils.models.stack.Stack.run_to`). The rows of every layer, in layer order, are
        cut into batches of ``batch_size``; a batch that spans several layers runs them in one pass, each
        row joining where its layer's output is (:meth:`~depthutils.models.stack.Stack.run_joined`), so the few
        new points per layer of an adaptive round still fill whole batches."""
        st, pred, gold = self.st, self.pred, self.gold
        cut = st.suffix_ok()  # whether layers can be run on a window of positions
        hi, first = (int(pred.max()) + 1, int(pred.min())) if cut else (self.T, 0)
        out = [(np.zeros((len(a), self.T)), np.zeros(len(a))) for a in alphas]
        rows = [(l, k) for l, a in enumerate(alphas) for k in range(len(a))]
        batches = [rows[s:s + self.batch_size] for s in range(0, len(rows), self.batch_size)]
        for batch in progress(batches, "integrated gradients (batch)", enabled=self.bar):
            spans = [(l, [k for m, k in batch if m == l]) for l in sorted({l for l, _ in batch})]
            zs, diffs = [], []
            for l, ks in spans:
                x = st.outputs[l]
                b = x.mean(dim=1, keepdim=True)  # mean over all positions (the sequence axis)
                # the interpolation point in float32 (a bfloat16 alpha would move the quadrature's nodes), then
                # in the model's dtype
                alpha = torch.as_tensor(np.asarray(alphas[l])[ks], dtype=torch.float32, device=x.device).view(-1, 1, 1)
                z = b.float() + alpha * (x[:, :hi] - b).float()
                zs.append(z.to(x.dtype).detach().requires_grad_(True))
                diffs.append(x[:, :hi].float() - b.float())
            with torch.enable_grad():
                h = st.run_joined([(l + 1, z) for (l, _), z in zip(spans, zs)], first)
                f = _answer_probability(st.unembed(h[:, pred - first]), gold)
                grads = torch.autograd.grad(f.sum(), zs)
            r = 0
            for (l, ks), grad, diff in zip(spans, grads, diffs):
                out[l][0][ks, :hi] = (grad.float() * diff.float()).sum(-1).double().cpu().numpy()
                out[l][1][ks] = f[r:r + len(ks)].detach().double().cpu().numpy()
                r += len(ks)
        return out

    def _batched(self, alphas):
        """nnsight path: interpolation rows of several layers share one forward+backward; the whole call
        (and ``f(x)`` on the first one) goes to NDIF as one request."""
        groups = [list(range(i, min(i + self.group, self.L))) for i in range(0, self.L, self.group)]
        bs = self.batch_size
        traces = []
        for ls in groups:
            n = max((len(alphas[l]) for l in ls), default=0)
            for s in range(0, n, bs):
                rows = [(l, np.asarray(alphas[l][s:s + bs])) for l in ls if len(alphas[l][s:s + bs])]
                if rows:
                    traces.append(rows)
        first = self.f_x is None
        common = (self.ids, self.pred, self.gold, self.part)
        items = ([("f", *common, [])] if first else []) + [("pass", *common, rows) for rows in traces]
        outs = each(self.model, _ig_trace, items, f"integrated gradients ({self.part})", enabled=self.bar)
        if first:
            self.f_x = float(outs.pop(0)[0])
        out = [(np.zeros((len(a), self.T)), np.zeros(len(a))) for a in alphas]
        filled = [0] * self.L
        for rows, (g, f) in zip(traces, outs):
            g, f = g.double().cpu().numpy(), f.double().cpu().numpy()
            r = 0
            for l, a in rows:
                k = len(a)
                out[l][0][filled[l]:filled[l] + k] = g[r:r + k]
                out[l][1][filled[l]:filled[l] + k] = f[r:r + k]
                filled[l] += k
                r += k
        return out


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


def _ig_trace(model, item):
    """One trace of the batched path. ``item = (what, ids, pred, gold, part, rows)``: ``"f"`` gives ``f(x)``;
    ``"pass"`` interpolates, for each ``(l, alphas)`` of ``rows`` (layers in forward order, each once), layer
    ``l``'s output at ``alphas`` in consecutive batch rows, and returns ``g [B, T]`` and ``f [B]`` per row."""
    what, ids, pred, gold, part, rows = item
    if what == "f":
        return _f_of_x(model, (ids, pred, gold))
    get, put = _sublayer(model, part)
    T = ids.shape[1]
    B = sum(len(a) for _, a in rows)
    # made here on the CPU; moved inside the trace to wherever the model runs (a GPU, or NDIF's)
    alpha_of = [torch.as_tensor(alphas, dtype=torch.float32).view(-1, 1, 1) for _, alphas in rows]
    zs, diffs, grads = [], [], []
    with model.trace(ids.expand(B, T)):
        start = 0
        for (l, alphas), alpha in zip(rows, alpha_of):
            K = len(alphas)
            out = check_residual(get(l), B, T, f"{part} {l} output")
            x = out[start:start + 1].detach()  # this layer's own rows are still clean at layer l
            b = x.mean(dim=1, keepdim=True)  # mean over positions (the sequence axis)
            z = (b + alpha.to(x.device, x.dtype) * (x - b)).detach().requires_grad_(True)
            put(l, torch.cat([out[:start], z, out[start + K:]]))
            zs.append(z)
            diffs.append(x - b)
            start += K
        f = _target(model, pred, gold)
        with f.sum().backward():
            for z in reversed(zs):  # gradients arrive in reverse forward order
                grads.append(z.grad.save())
        g = torch.cat([(gr.float() * d.float()).sum(-1) for gr, d in zip(reversed(grads), diffs)]).save()
        fs = f.detach().save()
    return g, fs
