"""Run a local model's decoder stack from any layer, reusing a clean prefix.

An intervention at layer ``s`` leaves every layer below ``s`` unchanged, so the
fast algorithms of ``future_effects``, ``residual_erasure`` and
``integrated_gradients`` run the clean forward once, keep each layer's input
and call arguments, and then run only layers ``s … L-1`` on a batch of
intervened residuals. This needs the model's weights here (not NDIF) and a clean
run that computes the same alone as inside a batch: float32, where the kernels'
batch-dependent summation order stays below float32 rounding, or bfloat16 where
this machine's kernels compute a row the same whatever the rows around it
(checked once per model, :func:`batch_invariant`); otherwise the measurements
use their batched nnsight path, clean row in batch.

An intervention at position ``t`` also leaves every position before ``t``
unchanged (attention is causal), so :meth:`Stack.suffix` runs a layer on
positions ``t … T-1`` only, attending to the clean run's keys and values for
positions ``< t``. :meth:`Stack.suffix_ok` checks, once per prompt, that this
reproduces the clean run layer by layer; families whose attention does not take
a cache this way fall back to whole sequences.
"""
from __future__ import annotations

import contextlib

import torch

from depthutils.models.architectures import check_residual, get_path, rewrap, unwrap


def usable(handle) -> bool:
    """Whether the fast path applies: a local model in float32, or in bfloat16 where :func:`batch_invariant`."""
    if handle.remote:
        return False
    return handle.dtype == torch.float32 or (handle.dtype == torch.bfloat16 and batch_invariant(handle))


#: rows and positions of :func:`batch_invariant`'s check: one row alone against the same row among others
INVARIANCE_ROWS, INVARIANCE_TOKENS = (1, 3, 17), 40
#: the check's random tokens come from the first this many ids: a row's numbers need not cover the vocabulary,
#: and ids drawn from all of it would map most of a memory-mapped untied embedding into memory (0.75 GB of an
#: 8B-width bfloat16 folder's 1.05 GB, measured), which a run otherwise reads only for its prompts' tokens
INVARIANCE_IDS = 4096


def batch_invariant(handle) -> bool:
    """Whether this model's clean run gives every layer the same input alone and inside batches of
    :data:`INVARIANCE_ROWS` rows (exactly, up to 1e-6 of the residual's norm): then the fast path may compare
    intervened rows, run in batches, with a clean run made alone. In float32 the kernels' batch-dependent
    order of additions moves a row by ~1e-7 (below any effect); in bfloat16 it can move it by a rounding
    unit (~4e-3), which is why the answer is measured, once per handle, on random tokens (of the first
    :data:`INVARIANCE_IDS` ids)."""
    known = getattr(handle, "_batch_invariant", None)
    if known is not None:
        return known
    module = handle.nn._module
    layers = list(get_path(module, handle.arch.layers))
    vocab = int(handle.text_config.vocab_size)
    gen = torch.Generator().manual_seed(0)
    seen: list = []
    hooks = [layer.register_forward_pre_hook(
        lambda mod, args, kwargs: seen.append((args[0] if args else kwargs["hidden_states"])[0].float()),
        with_kwargs=True) for layer in layers]
    try:
        runs = []
        for rows in INVARIANCE_ROWS:
            ids = torch.randint(1, min(vocab, INVARIANCE_IDS), (max(INVARIANCE_ROWS), INVARIANCE_TOKENS), generator=gen)
            ids[0] = runs[0][0] if runs else ids[0]  # row 0 is the same sequence in every run
            seen.clear()
            with torch.no_grad():
                try:
                    module(ids[:rows].to(handle.device), use_cache=False, logits_to_keep=1)
                except TypeError:  # a family without logits_to_keep
                    module(ids[:rows].to(handle.device), use_cache=False)
            runs.append((ids[0], [h.clone() for h in seen]))
    finally:
        for h in hooks:
            h.remove()
    alone = runs[0][1]
    handle._batch_invariant = all(
        float((b - a).norm()) <= 1e-6 * float(a.norm()) for _, hs in runs[1:] for a, b in zip(alone, hs))
    return handle._batch_invariant


class _Stop(Exception):
    """Raised by a stopping :class:`Recorder` to end a layer call once its keys and values are made."""


class Recorder:
    """Stands in for a KV cache in a layer call and keeps the keys and values it is given; with
    ``stop`` it then ends the call (the rest of the layer is not computed)."""

    def __init__(self, stop: bool = False, keep_graph: bool = False):
        self.stop, self.keep_graph = stop, keep_graph

    def update(self, key_states, value_states, layer_idx=None, cache_kwargs=None):
        keep = (lambda x: x) if self.keep_graph else (lambda x: x.detach())
        self.k, self.v = keep(key_states), keep(value_states)
        if self.stop:
            raise _Stop
        return key_states, value_states


class Prefix:
    """Stands in for a KV cache in a suffix call: the clean keys and values of the positions before
    ``t`` (the same for every row), then the rows' own. Nothing is stored."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor):
        self.k, self.v = k, v

    def update(self, key_states, value_states, layer_idx=None, cache_kwargs=None):
        B = key_states.shape[0]
        return (torch.cat([self.k.expand(B, -1, -1, -1), key_states], dim=-2),
                torch.cat([self.v.expand(B, -1, -1, -1), value_states], dim=-2))


#: Keyword arguments of a decoder layer that run along the sequence, and the axis to cut at ``t``.
_SEQ_AXIS = {"position_ids": -1, "cache_position": -1, "position_embeddings": -2, "attention_mask": -2}


class Stack:
    """The clean forward of one prompt, and the means to re-run its upper layers on a batch."""

    def __init__(self, handle, input_ids: torch.Tensor):
        self.handle = handle
        module = handle.nn._module
        self.layers = list(get_path(module, handle.arch.layers))
        self.norm = get_path(module, handle.arch.final_norm)
        self.head = get_path(module, handle.arch.unembed)
        self.L = len(self.layers)
        self.calls, self.inputs, self.outputs = [None] * self.L, [None] * self.L, [None] * self.L
        hooks = []
        for i, layer in enumerate(self.layers):
            hooks.append(layer.register_forward_pre_hook(self._capture(i), with_kwargs=True))
            hooks.append(layer.register_forward_hook(self._keep(i)))
        try:
            with torch.no_grad():
                logits = module(input_ids.to(handle.device), use_cache=False).logits
        finally:
            for h in hooks:
                h.remove()
        self.logits = logits  # [1, T, V]
        self._clean_probs = None
        self.deltas = [o - i for i, o in zip(self.inputs, self.outputs)]  # clean Δ_j, compared against often
        self.T = input_ids.shape[1]
        self._kv: list = [None] * self.L
        self._suffix_ok: bool | None = None

    @property
    def clean_probs(self) -> torch.Tensor:
        """The clean output distribution ``[1, T, V]`` in float32 (made on first use). A plain property, not
        ``functools.cached_property``: on Python 3.11 that holds an RLock, which cloudpickle cannot send to NDIF."""
        if self._clean_probs is None:
            self._clean_probs = self.logits.float().softmax(-1)
        return self._clean_probs

    def _capture(self, i):
        def hook(mod, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            kwargs = {k: v for k, v in kwargs.items() if k != "hidden_states"}
            self.calls[i] = (tuple(args[1:]), kwargs)
            self.inputs[i] = x.detach()
        return hook

    def _keep(self, i):
        def hook(mod, args, out):
            x = self.inputs[i]
            self.outputs[i] = check_residual(unwrap(out), x.shape[0], x.shape[1], f"layer {i} output").detach()
        return hook

    def h(self, l: int) -> torch.Tensor:
        """``h_l`` of the clean run, ``[1, T, H]`` (``h_L`` is the last layer's output)."""
        return self.inputs[l] if l < self.L else self.outputs[-1]

    def layer(self, j: int, x: torch.Tensor) -> torch.Tensor:
        """Layer ``j`` applied to a batch ``x`` ``[B, hi, H]`` of positions ``0 … hi-1`` with the clean run's
        arguments (``hi < T`` cuts them to those positions; it needs :meth:`suffix_ok`)."""
        hi = x.shape[1]
        args, kwargs = self.calls[j] if hi == self.T else ((), self._window_kwargs(j, 0, hi))
        return check_residual(unwrap(self.layers[j](x, *args, **kwargs)), x.shape[0], hi, f"layer {j} output")

    def run(self, x: torch.Tensor, start: int, on_layer=None) -> torch.Tensor:
        """Layers ``start … L-1`` on ``x``; ``on_layer(j, x_in, out)`` sees each; returns ``h_L``."""
        for j in range(start, self.L):
            out = self.layer(j, x)
            if on_layer is not None:
                on_layer(j, x, out)
            x = out
        return x

    def kv(self, j: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``j``'s keys and values ``[1, heads, T, d]`` on the clean run (one extra layer call)."""
        if self._kv[j] is None:
            args, kwargs = self.calls[j]
            rec = Recorder()
            with torch.no_grad():
                self.layers[j](self.inputs[j], *args, **{**kwargs, "past_key_values": rec})
            self._kv[j] = (rec.k, rec.v)
        return self._kv[j]

    def _window_kwargs(self, j: int, lo: int, hi: int, prefix=None) -> dict:
        """Layer ``j``'s clean arguments for queries at positions ``lo … hi-1`` over keys ``0 … hi-1``; the
        keys and values of positions ``< lo`` are ``prefix`` (a cache stand-in; default the clean run's)."""
        args, kwargs = self.calls[j]
        if args or "past_key_values" not in kwargs:
            raise TypeError("this family's layers take positional or cache arguments the suffix path does not know")
        out = {}
        for key, value in kwargs.items():
            if key == "past_key_values":
                out[key] = prefix if prefix is not None else (
                    Prefix(*(x[:, :, :lo] for x in self.kv(j))) if lo > 0 else value)
            elif key == "attention_mask" and value is None:
                if lo > 0:  # a causal mask over the hi keys, for the hi - lo queries
                    blocked = torch.arange(hi).view(1, -1) > torch.arange(lo, hi).view(-1, 1)
                    dtype = self.inputs[j].dtype
                    value = torch.zeros(blocked.shape, dtype=dtype).masked_fill(
                        blocked, torch.finfo(dtype).min).view(1, 1, hi - lo, hi).to(self.inputs[j].device)
                out[key] = value
            elif key == "attention_mask":
                out[key] = value[..., lo:hi, :hi]
            elif key in _SEQ_AXIS and value is not None:
                cut = lambda x: x.narrow(_SEQ_AXIS[key], lo, hi - lo)  # noqa: E731
                out[key] = tuple(cut(x) for x in value) if isinstance(value, (tuple, list)) else cut(value)
            elif torch.is_tensor(value) and self.T in value.shape:
                raise TypeError(f"layer argument {key!r} runs along the sequence and the suffix path cannot cut it")
            else:
                out[key] = value
        return out

    def suffix(self, j: int, x: torch.Tensor, t: int, hi: int | None = None, prefix=None) -> torch.Tensor:
        """Layer ``j`` on positions ``t … hi-1`` (default ``hi = T``) of a batch, ``x`` ``[B, hi-t, H]``;
        positions ``< t`` enter through their keys and values: the clean run's, or ``prefix``'s."""
        hi = self.T if hi is None else hi
        return check_residual(unwrap(self.layers[j](x, **self._window_kwargs(j, t, hi, prefix))),
                              x.shape[0], x.shape[1], f"layer {j} output (positions {t}…{hi - 1})")

    def run_to(self, x: torch.Tensor, start: int, first: int) -> torch.Tensor:
        """Layers ``start … L-1`` on ``x`` ``[B, hi, H]`` (positions ``0 … hi-1``, ``hi ≤ T``), returning
        ``h_L`` at positions ``first … hi-1`` only.

        Later positions cannot change earlier ones, so the caller may pass a prefix of the prompt. In
        the last layer the positions before ``first`` only lend their keys and values: the layer is
        stopped inside its attention once it has made them (its MLP never runs there). Where the
        family's attention cannot be run so (:meth:`suffix_ok`), the last layer runs whole.
        """
        for j in range(start, self.L - 1):
            x = self.layer(j, x)
        j = self.L - 1
        if start > j:
            return x[:, first:]
        if first == 0 or not self.suffix_ok():
            return self.layer(j, x)[:, first:]
        rec = Recorder(stop=True, keep_graph=True)
        try:
            self.layers[j](x[:, :first], **self._window_kwargs(j, 0, first, prefix=rec))
        except _Stop:
            pass
        return self.suffix(j, x[:, first:], first, x.shape[1], prefix=Prefix(rec.k, rec.v))

    def run_joined(self, entries: list, first: int) -> torch.Tensor:
        """:meth:`run_to` for rows that enter at different layers, in one batch. ``entries`` is
        ``[(start, x)]`` with ``x [k, hi, H]`` entering layer ``start`` (``start = L``: past the last layer),
        in increasing ``start``. A row joins the batch when the layers reach it, so it runs exactly the layers
        :meth:`run_to` would run for it, and the rows share each layer's call. Returns ``h_L`` at positions
        ``first … hi-1`` for every row, in the order of ``entries``."""
        starts = [start for start, _ in entries]
        if starts != sorted(starts):
            raise ValueError("entries must come in increasing start layer")
        live = [x for start, x in entries if start < self.L]
        past = [x[:, first:] for start, x in entries if start >= self.L]
        if not live:
            return torch.cat(past)
        x, k = None, 0
        for j in range(starts[0], self.L - 1):
            while k < len(live) and entries[k][0] == j:
                x = live[k] if x is None else torch.cat([x, live[k]])
                k += 1
            if x is not None:
                x = self.layer(j, x)
        x = torch.cat(([] if x is None else [x]) + live[k:])  # the rows that enter the last layer join here
        return torch.cat([self.run_to(x, self.L - 1, first)] + past)

    def suffix_ok(self) -> bool:
        """Whether :meth:`suffix` reproduces the clean run (checked once, at ``t = T // 2``) in the first
        layer of each kind of attention mask the layers get (sliding-window and global layers differ)
        and in the last layer."""
        if self._suffix_ok is None:
            t = self.T // 2
            kinds = {}
            for j, (_, kwargs) in enumerate(self.calls):
                mask = kwargs.get("attention_mask")
                kinds.setdefault(id(mask) if mask is not None else None, j)
            check = sorted({*kinds.values(), self.L - 1})
            try:
                with torch.no_grad():
                    self._suffix_ok = t >= 1 and all(
                        torch.allclose(self.suffix(j, self.inputs[j][:, t:], t), self.outputs[j][:, t:],
                                       rtol=1e-4, atol=1e-4 * float(self.outputs[j].abs().max()))
                        for j in check)
            except (TypeError, AttributeError, RuntimeError, ValueError):
                self._suffix_ok = False
        return self._suffix_ok

    def unembed(self, h: torch.Tensor) -> torch.Tensor:
        return self.handle.finish_logits(self.head(self.norm(h)))

    @contextlib.contextmanager
    def zeroed(self, j: int, part: str, rows_spans: list[tuple[int, int]]):
        """Within the block, layer ``j``'s ``part`` ("attn"/"mlp") output is 0 on ``[1, t)`` of row r."""
        path = self.handle.arch.attn if part == "attn" else self.handle.arch.mlp
        sub = get_path(self.layers[j], path)

        def hook(mod, args, out):
            y = unwrap(out).clone()
            for r, t in rows_spans:
                y[r, 1:t] = 0.0
            return rewrap(out, y)
        handle = sub.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()
