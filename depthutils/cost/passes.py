"""The cost of the passes every measurement is made of: one nnsight trace, the stack path's clean run, the
logit lens's matrix products, a teacher-forced forward, greedy decoding.

Each measurement states its own cost in its module (``depthutils.measures.<name>.cost``) from these pieces;
the measurement's run calls the same function to size its batches (:func:`depthutils.cost.budget.pick_batch`).
Every function takes a :class:`~depthutils.cost.accounting.Shape`, the prompts' token counts and the run's
``dtype`` and returns a :class:`~depthutils.cost.accounting.Cost` or a number of bytes.
"""
from __future__ import annotations

from depthutils.cost.accounting import BYTES, Acc, Cost, Shape, total, with_requests
from depthutils.cost.chunks import LENS_CHUNK_BYTES, lens_blocks

__all__ = ["stack_bytes", "stack_pass", "trace_pass", "lens_bytes", "forward_batch", "one_trace_per_prompt",
           "generate"]


def stack_bytes(s: Shape, T: int, dtype: str) -> float:
    """What :class:`depthutils.models.stack.Stack` keeps of a prompt of ``T`` tokens: every layer's input, output
    and delta, the logits and their float32 probabilities."""
    return 3 * s.layers * T * s.hidden * BYTES[dtype] + T * s.vocab * (BYTES[dtype] + 4)


def stack_pass(a: Acc, s: Shape, T: int, dtype: str) -> float:
    """The clean run of :class:`depthutils.models.stack.Stack`: L layers, the logits; returns the bytes it keeps."""
    a.c.forwards += 1
    a.layers(s.layers, 1, T)
    a.unembed(1, T)
    return stack_bytes(s, T, dtype)


def trace_pass(a: Acc, s: Shape, rows: int, T: int, dtype: str) -> float:
    """One nnsight forward of the whole model on ``rows`` rows; returns its working memory (one layer's
    activations, the logits in the model's dtype and one float32 copy)."""
    a.c.traces += 1
    a.c.forwards += 1
    a.layers(s.layers, rows, T)
    a.unembed(rows, T)
    return s.act_bytes(rows, T, dtype) + rows * T * s.vocab * (BYTES[dtype] + 4)


def lens_bytes(s: Shape, T: int, dtype: str) -> float:
    """What :func:`depthutils.measures.logit_lens.chunked_lens` keeps of a prompt of ``T`` tokens besides its slices:
    the ``L`` saved layer inputs and their float32 norm, the final logits and their float32 copy."""
    return s.layers * T * s.hidden * (BYTES[dtype] + 4) + T * s.vocab * 4 * 2


def forward_batch(s: Shape, rows: int, T: int, dtype: str) -> Cost:
    """One nnsight forward of ``rows`` prompts padded to ``T`` tokens that reads the logits (a teacher-forced
    check, :func:`depthutils.analysis.known_facts.check`)."""
    a = Acc(s, "forward", T)
    return a.done(0.0, trace_pass(a, s, rows, T, dtype), download=8 * rows * T, batch=rows)


def one_trace_per_prompt(s: Shape, Ts, dtype: str, remote: bool, what: str, *, stats: bool = False,
                          lens: str | None = None, per_token: int = 6, lens_at=None, rows: int = 1) -> Cost:
    """One nnsight forward per prompt, of ``rows`` rows of it (one: the prompt alone), that saves ``per_token``
    float32 numbers per layer and token.

    ``stats``: the per-layer statistics read inside the trace (:func:`depthutils.measures.contributions.read_stats`).
    ``lens``: ``"traced"`` decodes every layer's lens inside the trace, one ``[T, V]`` product per layer (effective
    depth, and the logit lens on NDIF); ``"chunked"`` is :func:`depthutils.measures.logit_lens.chunked_lens`: the
    ``L`` layer inputs' ``L·T`` rows in blocks of rows and slices of the vocabulary (a block's logits, their
    float32 copy and exponentials; ``lens_blocks``). ``lens_at``: the positions per prompt a traced lens decodes (one
    number per prompt, or one for all; default: every position), each row's (``"traced"`` only)."""
    costs = []
    at = list(lens_at) if isinstance(lens_at, (list, tuple)) else [lens_at] * len(Ts)
    for T, P in zip(Ts, at):
        P = T if P is None else min(P, T)
        a = Acc(s, what, T)
        work = trace_pass(a, s, rows, T, dtype)
        if stats:
            a.c.stat_layers += s.layers
        if lens == "traced":
            for _ in range(s.layers):
                a.unembed(rows, P)
                a.c.lens_rows += rows * P
            work += (1 + 3) * rows * P * s.vocab * 4  # the final log-probabilities, one layer's lens and its stats
        elif lens == "chunked":
            M = s.layers * T
            a.unembed(M, 1)
            per_block, step = lens_blocks(s.layers, T, s.vocab, 5, LENS_CHUNK_BYTES)
            block = s.layers * per_block * step
            work = max(work, lens_bytes(s, T, dtype) + block * (BYTES[dtype] + 8))  # a block's logits, float32 and e
        costs.append(a.done(0.0, work, download=4 * s.layers * per_token * T, batch=rows))
    return with_requests(total(costs), remote)


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
