"""Independent plain-PyTorch implementations of every measurement (the test oracle).

Written straight from the spec with forward hooks on a plain ``transformers``
model, one batch-1 forward per intervention, full softmaxes and Python sets:
slow and obvious, and sharing no code with ``depthutils``.
"""
from __future__ import annotations

import contextlib

import torch


def parts(hf, family: str) -> dict:
    """The family's decoder layers, attention/MLP contribution modules, final norm and unembedding,
    the factor by which the layer scales a sublayer's output before adding it, and what the model
    does to the unembedding's output (read off each family's modeling code)."""
    cfg = hf.config.get_text_config()
    scale, finish = 1.0, (lambda z: z)
    if family == "gpt2":
        layers, norm = hf.transformer.h, hf.transformer.ln_f
        attn, mlp = [b.attn for b in layers], [b.mlp for b in layers]
    elif family == "gpt_neox":
        layers, norm = hf.gpt_neox.layers, hf.gpt_neox.final_layer_norm
        attn, mlp = [b.attention for b in layers], [b.mlp for b in layers]
    elif family == "falcon":
        layers, norm = hf.transformer.h, hf.transformer.ln_f
        attn, mlp = [b.self_attention for b in layers], [b.mlp for b in layers]
    elif family in ("olmo2", "gemma2", "gemma3_text", "gemma3"):  # norms after the sublayers
        stack = hf.model.language_model if family == "gemma3" else hf.model
        layers, norm = stack.layers, stack.norm
        attn = [b.post_attention_layernorm for b in layers]
        mlp = [b.post_feedforward_layernorm for b in layers]
        if family in ("gemma2", "gemma3_text") and cfg.final_logit_softcapping:
            cap = cfg.final_logit_softcapping
            finish = lambda z: cap * torch.tanh(z / cap)  # noqa: E731
    else:
        layers, norm = hf.model.layers, hf.model.norm
        attn, mlp = [b.self_attn for b in layers], [b.mlp for b in layers]
        if family == "granite":
            scale = cfg.residual_multiplier
            finish = lambda z: z / cfg.logits_scaling  # noqa: E731
        if family == "cohere":
            finish = lambda z: z * cfg.logit_scale  # noqa: E731
    return {"layers": list(layers), "attn": attn, "mlp": mlp, "norm": norm, "head": hf.lm_head,
            "scale": scale, "finish": finish}


def _hidden(out):
    return out[0] if isinstance(out, tuple) else out


@contextlib.contextmanager
def hooks(*handles):
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def record(hf, family, ids, edit=None):
    """One forward; returns (h [L+1,T,H], a [L,T,H], m [L,T,H], logits [T,V]) of batch row 0.

    ``edit(kind, index, tensor) -> tensor`` may replace a layer input ("in"), layer
    output ("out"), attention ("attn") or MLP ("mlp") output.
    """
    P = parts(hf, family)
    L = len(P["layers"])
    h_in, h_out, a, m = [None] * L, [None] * L, [None] * L, [None] * L
    edit = edit or (lambda kind, i, x: x)

    def pre(i):
        def f(mod, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            x = edit("in", i, x)
            h_in[i] = x
            if args:
                return (x,) + tuple(args[1:]), kwargs
            return args, {**kwargs, "hidden_states": x}
        return f

    def post(kind, store, i):
        def f(mod, args, out):
            x = edit(kind, i, _hidden(out))
            # a copy, scaled as the layer scales it: Falcon adds into its MLP output in place later
            store[i] = x.clone() * (P["scale"] if kind in ("attn", "mlp") else 1.0)
            return (x,) + tuple(out[1:]) if isinstance(out, tuple) else x
        return f

    hs = []
    for i in range(L):
        hs.append(P["layers"][i].register_forward_pre_hook(pre(i), with_kwargs=True))
        hs.append(P["layers"][i].register_forward_hook(post("out", h_out, i)))
        hs.append(P["attn"][i].register_forward_hook(post("attn", a, i)))
        hs.append(P["mlp"][i].register_forward_hook(post("mlp", m, i)))
    with hooks(*hs):
        logits = hf(ids).logits
    h = torch.stack([x[0] for x in h_in] + [h_out[-1][0]])
    return h, torch.stack([x[0] for x in a]), torch.stack([x[0] for x in m]), logits[0]


def contributions(hf, family, ids_list):
    rows = {k: [] for k in ("attn_ratio", "attn_cos", "mlp_ratio", "mlp_cos", "layer_ratio", "layer_cos")}
    for ids in ids_list:
        with torch.no_grad():
            h, a, m, _ = record(hf, family, ids)
        L = a.shape[0]
        for l in range(L):
            d = h[l + 1] - h[l]
            for name, x, ref in (("attn", a[l], h[l]), ("mlp", m[l], h[l] + a[l]), ("layer", d, h[l])):
                rows[f"{name}_ratio"].append((l, x.norm(dim=-1) / ref.norm(dim=-1)))
                rows[f"{name}_cos"].append((l, (x * ref).sum(-1) / (x.norm(dim=-1) * ref.norm(dim=-1))))
    out = {}
    for k, items in rows.items():
        L = max(l for l, _ in items) + 1
        out[k] = torch.stack([torch.cat([v for l, v in items if l == i]).mean() for i in range(L)]).numpy()
    return out


def logit_lens(hf, family, ids_list, k=5):
    P = parts(hf, family)
    kls, ovs = [], []
    for ids in ids_list:
        with torch.no_grad():
            h, _, _, logits = record(hf, family, ids)
            qL = torch.softmax(logits.double(), -1)
            per_kl, per_ov = [], []
            for l in range(h.shape[0] - 1):  # inputs of layers 0..L-1: h_0 (the embedding) … h_{L-1}
                q = torch.softmax(P["finish"](P["head"](P["norm"](h[l]))).double(), -1)
                per_kl.append((q * (q.log() - qL.log())).sum(-1))
                per_ov.append(torch.tensor([len(set(q[t].topk(k).indices.tolist()) & set(qL[t].topk(k).indices.tolist())) / k
                                            for t in range(q.shape[0])], dtype=torch.float64))
        kls.append(torch.stack(per_kl))
        ovs.append(torch.stack(per_ov))
    return torch.cat(kls, 1).mean(1).numpy(), torch.cat(ovs, 1).mean(1).numpy()


def future_effects(hf, family, ids, ts, part="layer", mode="future"):
    """Naive: one batch-1 forward per (s, t); returns D [L, L] (NaN at j ≤ s) and O [L]."""
    with torch.no_grad():
        h, a, m, logits = record(hf, family, ids)
    L, T = a.shape[0], ids.shape[1]
    delta = h[1:] - h[:-1]
    p = torch.softmax(logits, -1)
    D = torch.full((L, L), float("nan"))
    O = torch.zeros(L)
    for s in range(L):
        for t in ts:
            cut, first = (T, 1) if mode == "all" else (t, t)
            saved = {}

            def edit(kind, i, x, s=s, cut=cut):
                if kind == "in" and i == s:
                    saved["h"] = x.clone()
                if i == s and ((part == "layer" and kind == "out") or kind == part):
                    x = x.clone()
                    x[:, 1:cut] = saved["h"][:, 1:cut] if part == "layer" else 0.0
                return x
            with torch.no_grad():
                h2, _, _, logits2 = record(hf, family, ids, edit)
            d2 = h2[1:] - h2[:-1]
            for j in range(s + 1, L):
                r = ((delta[j, first:] - d2[j, first:]).norm(dim=-1) / delta[j, first:].norm(dim=-1)).max()
                D[s, j] = r if torch.isnan(D[s, j]) else max(D[s, j], r)
            O[s] = max(O[s], (p[first:] - torch.softmax(logits2, -1)[first:]).norm(dim=-1).max())
    return D.numpy(), O.numpy()


def answer_target(logits, pred, gold):
    probs = torch.softmax(logits.float(), -1)
    return sum(probs[p, g] for p, g in zip(pred, gold))


def residual_erasure(hf, family, ids, pred, baseline):
    """Naive: one batch-1 forward per (l, t); baseline [L+1, H] or [L+1, T, H]."""
    with torch.no_grad():
        _, _, _, logits = record(hf, family, ids)
    L, T = len(parts(hf, family)["layers"]), ids.shape[1]
    p = torch.softmax(logits[pred], -1)
    E = torch.zeros(L + 1, T)
    for l in range(L + 1):
        for t in range(1, T):
            value = baseline[l] if baseline.ndim == 2 else baseline[l, t]

            def edit(kind, i, x, l=l, t=t, value=value):
                if (l < L and kind == "in" and i == l) or (l == L and kind == "out" and i == L - 1):
                    x = x.clone()
                    x[:, t] = value
                return x
            with torch.no_grad():
                _, _, _, logits2 = record(hf, family, ids, edit)
            E[l, t] = (p - torch.softmax(logits2[pred], -1)).norm(dim=-1).max()
    return E.numpy()


def integrated_gradients(hf, family, ids, pred, gold, steps, gauss=False):
    """Per layer and per step: a batch-1 forward with the layer output replaced, then autograd.
    ``gauss``: Gauss–Legendre nodes and weights on [0, 1] instead of the left Riemann sum."""
    import numpy as np

    if gauss:
        nodes, w = np.polynomial.legendre.leggauss(steps)
        points = [((float(a) + 1) / 2, float(c) / 2) for a, c in zip(nodes, w)]
    else:
        points = [(k / steps, 1 / steps) for k in range(steps)]
    with torch.no_grad():
        h, _, _, _ = record(hf, family, ids)
    L, T = h.shape[0] - 1, ids.shape[1]
    A = torch.zeros(L, T, dtype=torch.float64)
    for l in range(L):
        x = h[l + 1]
        b = x.mean(0, keepdim=True)
        for alpha, weight in points:
            z = (b + alpha * (x - b)).clone().requires_grad_(True)

            def edit(kind, i, y, l=l, z=z):
                return z[None] if (kind == "out" and i == l) else y
            _, _, _, logits = record(hf, family, ids, edit)
            (g,) = torch.autograd.grad(answer_target(logits, pred, gold), z)
            A[l] += (g * (x - b)).sum(-1).double() * weight
    return A.numpy()


def residual_stream(hf, family, ids_list):
    """The decomposition with the raw attention/MLP module outputs, position 0's attention share and the
    residual norms, per prompt: eager attention with ``output_attentions`` (llama-like and post-norm families)."""
    P = parts(hf, family)
    L = len(P["layers"])
    hf.set_attn_implementation("eager")
    raw, sink, norms = [], [], None
    for ids in ids_list:
        a_raw, m_raw = [None] * L, [None] * L

        def keep(store, i):
            def f(mod, args, out):
                store[i] = _hidden(out)
            return f
        hs = []
        for i, layer in enumerate(P["layers"]):
            hs.append(layer.self_attn.register_forward_hook(keep(a_raw, i)))
            hs.append(layer.mlp.register_forward_hook(keep(m_raw, i)))
        with hooks(*hs), torch.no_grad():
            att = hf(ids, output_attentions=True).attentions
            h, _, _, _ = record(hf, family, ids)
        raw.append([float(((h[l + 1] - h[l] - a_raw[l][0] - m_raw[l][0]).norm(dim=-1) / h[l + 1].norm(dim=-1)).max())
                    for l in range(L)])
        sink.append([float(att[l][0, :, 1:, 0].mean()) for l in range(L)])
        if norms is None:
            norms = h.norm(dim=-1)  # [L+1, T] of the first prompt
    return {"raw_error": torch.tensor(raw).amax(0), "sink": torch.tensor(sink).mean(0),
            "norm0": norms[:, 0], "norm_rest": torch.quantile(norms[:, 1:].double(), 0.5, dim=1)}  # numpy's median
