"""The cost of each measurement, call by call, following the algorithm the measurement runs.

Every function takes a :class:`~depthutils.cost.Shape`, the prompts' token counts and the run's
``dtype``, ``fast`` (the float32 stack path of a local model) and ``remote`` (NDIF), and returns a
:class:`~depthutils.cost.Cost`. The loops mirror the measurement modules: a change of algorithm there
must be mirrored here, and ``python -m depthutils plan --check`` compares both on real runs.
"""
from __future__ import annotations

import math

from .cost import BYTES, Acc, Cost, Shape, total, with_requests
from .chunks import LENS_CHUNK_BYTES, limits
from .future_shared import sample_positions


def stack_bytes(s: Shape, T: int, dtype: str) -> float:
    """What :class:`depthutils.stack.Stack` keeps of a prompt of ``T`` tokens: every layer's input, output
    and delta, the logits and their float32 probabilities."""
    return 3 * s.layers * T * s.hidden * BYTES[dtype] + T * s.vocab * (BYTES[dtype] + 4)


def _stack(a: Acc, s: Shape, T: int, dtype: str) -> float:
    """The clean run of :class:`depthutils.stack.Stack`: L layers, the logits; returns the bytes it keeps."""
    a.c.forwards += 1
    a.layers(s.layers, 1, T)
    a.unembed(1, T)
    return stack_bytes(s, T, dtype)


def _trace(a: Acc, s: Shape, rows: int, T: int, dtype: str) -> float:
    """One nnsight forward of the whole model on ``rows`` rows; returns its working memory (one layer's
    activations, the logits in the model's dtype and one float32 copy)."""
    a.c.traces += 1
    a.c.forwards += 1
    a.layers(s.layers, rows, T)
    a.unembed(rows, T)
    return s.act_bytes(rows, T, dtype) + rows * T * s.vocab * (BYTES[dtype] + 4)


def lens_bytes(s: Shape, T: int, dtype: str) -> float:
    """What :func:`depthutils.logit_lens.chunked_lens` keeps of a prompt of ``T`` tokens besides its slices:
    the ``L`` saved layer inputs and their float32 norm, the final logits and their float32 copy."""
    return s.layers * T * s.hidden * (BYTES[dtype] + 4) + T * s.vocab * 4 * 2


def forward_batch(s: Shape, rows: int, T: int, dtype: str) -> Cost:
    """One nnsight forward of ``rows`` prompts padded to ``T`` tokens that reads the logits (a teacher-forced
    check, :func:`depthutils.known_facts.check`)."""
    a = Acc(s, "forward", T)
    return a.done(0.0, _trace(a, s, rows, T, dtype), download=8 * rows * T, batch=rows)


def forward_only(s: Shape, Ts, dtype: str, remote: bool, what: str, lens: bool = False, per_token: int = 6) -> Cost:
    """One forward per prompt (contributions, residual stream, residual means); ``lens`` adds the logit
    lens of every layer (logit lens, effective depth). Locally the logit lens is
    :func:`depthutils.logit_lens.chunked_lens`: the ``L`` layer inputs' ``L·T`` rows in one matrix
    product per slice of the vocabulary (a float32 slice and its exponentials, within ``LENS_CHUNK_BYTES``);
    on NDIF, and for effective depth, each layer's lens is its own ``[T, V]`` product inside the trace."""
    costs = []
    for T in Ts:
        a = Acc(s, what, T)
        work = _trace(a, s, 1, T, dtype)
        if what in ("contributions", "effective_depth"):  # contributions.read_stats, inside the trace
            a.c.stat_layers += s.layers
        if lens and (remote or what != "logit_lens"):  # effective depth reads every lens inside its trace
            for _ in range(s.layers):
                a.unembed(1, T)
                a.c.lens_rows += T
            work += (1 + 3) * T * s.vocab * 4  # the final log-probabilities, one layer's lens and its stats
        elif lens:
            M = s.layers * T
            a.unembed(M, 1)
            step = min(s.vocab, max(5, LENS_CHUNK_BYTES // (8 * M)))
            work = max(work, lens_bytes(s, T, dtype) + 2 * M * step * 4)  # what the lens keeps, a slice and its exponentials
        costs.append(a.done(0.0, work, download=4 * s.layers * per_token * T, batch=1))
    return with_requests(total(costs), remote)


def _positions(T: int, n_t: int) -> list[int]:
    """The ``t`` of one prompt: P1's sample where the prompt has room for ``n_t`` of them, else the last
    ``n_t`` positions at stride 4 (the depth score's answer tokens)."""
    ts = sample_positions(T, 123, n_t)
    return ts if len(ts) == n_t else sorted({max(1, T - 1 - 4 * i) for i in range(n_t)})


def future_effects(s: Shape, Ts, dtype: str, fast: bool, remote: bool, *, n_t: int = 4, part: str = "layer",
                   mode: str = "future", output: bool = True, batch: int | None = None, what="future_effects",
                   positions: list | None = None, work_bytes: int | None = None) -> Cost:
    """P1's future effects (and the depth score's interventions: ``output=False``, ``n_t`` per prompt);
    ``positions`` gives each prompt's ``t`` (default: :func:`_positions`); ``work_bytes`` bounds the stack
    path's groups and output chunks (:func:`depthutils.future_shared.limits`).

    The fast path is :mod:`depthutils.future_shared`'s: the row with the largest ``t`` runs the whole prompt,
    the others positions ``t …`` only, after the suffix check (two layers' clean keys and values and two
    layers on the prompt's second half); the output only at the measured positions, none for the last
    layer in the future-tokens mode."""
    L, costs = s.layers, []
    for i, T in enumerate(Ts):
        a = Acc(s, what, T)
        ts = [T] if mode == "all" else (positions[i] if positions is not None else _positions(T, n_t))
        k = len(ts)
        if fast:
            saved = _stack(a, s, T, dtype)
            if part == "layer" and not output:  # the depth score's wave: layer j on the k·j rows that skipped below it
                for j in range(1, L):
                    a.layers(1, k * j, T)
                rows = k * max(L - 1, 1)
                costs.append(a.done(saved, 2 * rows * T * s.hidden * BYTES[dtype] + s.act_bytes(rows, T, dtype),
                                    batch=k))
                continue
            ts = sorted(ts)
            if k > 1:  # the suffix check: two layers' clean keys and values, two layers on the second half
                a.layers(2, 1, T)
                a.layers(2, 1, T - T // 2, context=T)
            first = [1 if mode == "all" else t for t in ts]
            group_bytes, unembed_bytes = limits(work_bytes)
            group = min(L, max(1, int(group_bytes // max(4 * k * T * (s.heads * T + 3 * s.intermediate), 1))))
            out_rows = 0
            for s0 in range(0, L, group):  # future_shared._group: one layer call per row of ts, all skips as rows
                skips = range(s0, min(L, s0 + group))
                begin = {sk: sk + 1 if part == "layer" else sk for sk in skips}
                for j in range(min(begin.values()), L):
                    members = sum(b <= j for b in begin.values())
                    if members:
                        a.layers(1, members, T)
                        a.c.windows += k if k > 1 else 0  # future_shared._layer: the full row and each suffix
                        for t in ts[:-1]:
                            a.layers(1, members, T - t, context=T)
                out_rows += sum(T - f for f in first) * sum(1 for sk in skips if not (mode == "future" and sk == L - 1))
            chunk = max(1, unembed_bytes // (12 * s.vocab))
            if output:
                for r0 in range(0, out_rows, chunk):
                    a.unembed(min(chunk, out_rows - r0), 1)
            work = max(group * (2 * k * T * s.hidden * BYTES[dtype] + s.act_bytes(k, T, dtype)),
                       s.logit_bytes(min(chunk, out_rows), 1) if output else 0.0)
            costs.append(a.done(saved, work, batch=k * group))
        else:
            rows = k * L
            size = rows if batch is None else max(1, batch - 1)
            chunks = math.ceil(rows / size)
            work = 0.0
            for c in range(chunks):
                r = min(size, rows - c * size) + 1
                work = max(work, _trace(a, s, r, T, dtype) + s.logit_bytes(r, T))
            costs.append(a.done(0.0, work, download=4 * (L + 1) * (rows + chunks), batch=size + 1))
    return with_requests(total(costs), remote)


def residual_erasure(s: Shape, T: int, n_pred: int, dtype: str, fast: bool, remote: bool,
                     batch: int | None = None, suffix: bool = True, block: int = 2) -> Cost:
    """One prompt's erasure, ``T`` its tokens up to the last answer-predicting one."""
    L = s.layers
    a = Acc(s, "residual_erasure", T)
    if fast:
        saved = _stack(a, s, T, dtype)
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
            work = max(work, _trace(a, s, r, T, dtype) + s.logit_bytes(r, n_pred))
            items += 1
    return with_requests(a.done(0.0, work, download=4 * (T + items), batch=size + 1), remote)


def integrated_gradients(s: Shape, T: int, n_pred: int, dtype: str, fast: bool, remote: bool, *, steps: int = 256,
                         batch: int = 16, rule: str = "riemann", layers_per_pass: int | None = None) -> Cost:
    """One prompt's attribution: ``steps`` interpolation points (evaluations) per layer, ``batch`` per pass.
    An adaptive rule's ``budget`` of evaluations per layer is ``steps`` here."""
    L = s.layers
    a = Acc(s, "integrated_gradients", T)
    _trace(a, s, 1, T, dtype)  # f(x)
    if fast:
        saved = _stack(a, s, T, dtype)
        a.layers(2, 1, T // 2)  # suffix_ok
        hi = T - 1  # positions up to the last one that predicts an answer token
        work = 0.0
        for l in range(L):
            for start in range(0, steps, batch):
                r = min(batch, steps - start)
                a.layers(max(L - 2 - l, 0), r, hi, grad=True)
                if l < L - 1:  # the last layer: keys and values of the earlier positions, then the answer's
                    a.layers(1, r, hi - n_pred, grad=True, share=s.kv_share)
                    a.layers(1, r, n_pred, context=hi, grad=True)
                a.unembed(r, n_pred, grad=True)
                work = max(work, s.saved_bytes(r, hi, L - 1 - l, dtype) + 3 * r * hi * s.hidden * BYTES[dtype]
                           + s.act_bytes(r, hi, dtype) + 2 * s.logit_bytes(r, n_pred))
            if rule != "riemann":
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
            _trace(a, s, len(ls), T, dtype)
    return with_requests(a.done(0.0, work, download=download, batch=batch,
                                note=f"{g} layer(s) per pass"), remote)


def generate(s: Shape, contexts, new: list[int], dtype: str, remote: bool, batch: int = 32) -> Cost:
    """Greedy decodings in batches of ``batch`` (left-padded): the prompt once, then one position per new
    token over a KV cache of every layer."""
    order = sorted(range(len(contexts)), key=lambda i: (new[i], contexts[i]))
    costs = []
    for k in range(0, len(order), batch):
        g = order[k:k + batch]
        T, n = max(contexts[i] for i in g), max(new[i] for i in g)
        a = Acc(s, "generate", T)
        a.c.traces += 1
        a.c.gen_steps += n
        a.c.forwards += n  # the prompt, then one forward per further token
        a.layers(s.layers, len(g), T)
        a.unembed(len(g), 1)
        for step in range(n - 1):
            a.layers(s.layers, len(g), 1, context=T + step)
            a.unembed(len(g), 1)
        cache = len(g) * (T + n) * s.kv_bytes_per_token(dtype)
        costs.append(a.done(cache, s.act_bytes(len(g), T, dtype) + len(g) * s.vocab * 4 * 2,
                            download=8 * len(g) * (T + n), batch=len(g)))
    return with_requests(total(costs), remote) if costs else Cost("generate")


def depth_score(s: Shape, prompts, dtype: str, fast: bool, remote: bool, decode_batch: int = 32,
                batch: int | None = None) -> Cost:
    """``prompts``: ``(T, n_positions, context, n_new)`` per prompt (its tokens, the interventions' ``t``
    count, the decoded context's length and the tokens to decode)."""
    fe = [future_effects(s, [T], dtype, fast, False, n_t=k, output=False, what="depth_score", batch=batch)
          for T, k, _, _ in prompts]
    gen = generate(s, [c for *_, c, _ in prompts], [n for *_, n in prompts], dtype, False, decode_batch)
    out = total(fe + [gen])
    out.what = "depth_score"
    return with_requests(out, remote)


def cross_model_mapping(src: Shape, tgt: Shape, Ts, dtype: str, remote: bool, held_out: float = 0.5,
                        same: bool = False) -> Cost:
    """Residuals of both models on every text (one trace when a model is mapped onto itself, ``same``), then
    the float64 work of :func:`depthutils.cross_model_mapping.cross_model_mapping`, product by product:

    * per fitting text, ``XᵀX`` and ``XᵀY`` (``[H_src+1]`` rows each, ``product_rows``), ``XᵀY`` a fresh
      ``[L_src, H_src+1, L_tgt·H_tgt]`` tensor (``fresh_bytes``) added in place into the sum (``stream_bytes``);
    * once, :func:`~depthutils.cross_model_mapping.fit_maps`: the penalised ``XᵀX`` (two fresh copies), one
      solve per source layer (``solve_flops``), whose right-hand side is copied into a fresh buffer, and the
      result copied into the fresh maps ``W``;
    * per held-out text, the predictions ``x @ W`` (``T-1`` rows per source layer) into a fresh
      ``[L_src, T-1, L_tgt·H_tgt]`` tensor, their difference from the targets (fresh) and its norm."""
    Ls, Lt, Hs, Ht = src.layers, tgt.layers, src.hidden + 1, tgt.hidden
    K, n_fit = Lt * Ht, round(len(Ts) * (1 - held_out))
    O = Ls * Hs * K * 8  # bytes of XᵀY (and of the maps W)
    costs = []
    for i, T in enumerate(Ts):
        for sh in ((src,) if same else (src, tgt)):
            a = Acc(sh, "cross_model_mapping", T)
            work = _trace(a, sh, 1, T, dtype) + sh.layers * T * sh.hidden * (BYTES[dtype] + 8)
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
