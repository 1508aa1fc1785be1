"""What a measurement costs, from a model's config alone (no weights): layer-passes, FLOPs, memory, NDIF.

A :class:`Shape` is read from a ``config.json`` dictionary (:meth:`Shape.from_config`). Each measurement's
``cost`` (in its module, :data:`depthutils.measures.MEASUREMENTS`) returns a :class:`Cost` for one call of that
measurement with the algorithm the measurement itself picks: the fast ``stack`` path for a local model in float32, or
in bfloat16 on a CPU (only the layers above an intervention, see :mod:`depthutils.models.stack`), the ``batched``
nnsight path for a GPU or NDIF (the clean row in every batch, the whole model per row).

Counted, per call:

* ``layer_tokens``: rows × positions through one decoder layer, summed over layers and calls;
  ``layer_passes`` divides each by its prompt's length, as ``python -m depthutils bench`` counts
  them. ``grad_tokens`` is the part that also runs backward (integrated gradients).
* ``unembed_tokens``: rows × positions through the final norm and unembedding (``2·V·H`` FLOPs each,
  more than a decoder layer's ``2·P_layer`` for an 8B model's 128k vocabulary).
* memory: ``saved`` (what the call keeps for its whole length: the clean run's residuals, logits and
  probabilities for the stack path, a KV cache for generation) and ``work`` (the largest step: one
  layer's activations on a batch, the batch's logits in float32, the activations backward needs).
* NDIF: requests (one per call, split under :data:`depthutils.models.requests.REQUEST_BYTES`) and the bytes
  the requests' saved results download.

The activation constants (:data:`ACT_H`, :data:`ACT_I`, :data:`SAVED_H`, :data:`SAVED_I`, …) count
tensors of one Llama-style layer (norm, q/k/v, attention output, gate/up/act products); they are
checked against measured peaks by ``python -m depthutils plan --check`` (:mod:`depthutils.perf.check`).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

from depthutils.core.errors import DepthError
from depthutils.models.requests import REQUEST_BYTES

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: live tensors of one layer call, per row and position, in units of H and of the MLP width I
#: (forward without gradients: residual in/out, normed input, q, attention output, o-proj; gate, up, act·up)
ACT_H, ACT_I = 6, 3
#: tensors autograd keeps per layer, row and position for the backward pass (inputs of every matmul,
#: norms, rotary q/k, the attention output; the gate, up, activation and product of the MLP)
SAVED_H, SAVED_I = 10, 4
#: float32 copies of a batch's logits alive at once (logits, their float copy, softmax, a difference)
LOGIT_COPIES = 3


@dataclass(frozen=True)
class Shape:
    """The numbers of a decoder-only transformer that its cost depends on."""
    name: str
    model_type: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    context: int | None = None
    gated: bool = True
    experts: int = 1          # MoE: experts per layer (weights held) …
    experts_active: int = 1   # … and per token (FLOPs)
    stored_dtype: str | None = None  # the checkpoint's dtype (config "dtype" / "torch_dtype")
    qkv_bias: bool = False    # biases on q, k and v (Qwen2; config "attention_bias")

    @classmethod
    def from_config(cls, cfg: dict, name: str = "") -> "Shape":
        """From a ``config.json`` dictionary (a multimodal wrapper's ``text_config`` is used)."""
        if "text_config" in cfg and "hidden_size" not in cfg:
            cfg = {**cfg["text_config"], "tie_word_embeddings": cfg.get("tie_word_embeddings", True)}
        get = lambda *keys, default=None: next((cfg[k] for k in keys if cfg.get(k) is not None), default)  # noqa: E731
        hidden = get("hidden_size", "n_embd", "d_model")
        layers = get("num_hidden_layers", "n_layer", "num_layers")
        heads = get("num_attention_heads", "n_head")
        if not (hidden and layers and heads):
            raise DepthError(f"The config of {name or 'this model'} has no hidden_size, num_hidden_layers or "
                             "num_attention_heads, so its cost cannot be computed; give a decoder-only model's config.")
        mt = cfg.get("model_type", "")
        gated = mt not in ("gpt2", "gpt_neox", "falcon", "starcoder2")
        return cls(name=name, model_type=mt, layers=layers, hidden=hidden,
                   intermediate=get("intermediate_size", "n_inner", "ffn_hidden_size", default=4 * hidden),
                   heads=heads, kv_heads=get("num_key_value_heads", "num_kv_heads", default=heads),
                   head_dim=get("head_dim", default=hidden // heads), vocab=get("vocab_size"),
                   tied=bool(cfg.get("tie_word_embeddings", mt in ("gpt2",))),
                   context=get("max_position_embeddings", "n_positions", "seq_length"), gated=gated,
                   experts=get("num_local_experts", "num_experts", default=1),
                   experts_active=get("num_experts_per_tok", default=1),
                   qkv_bias=bool(cfg.get("attention_bias", mt == "qwen2")),
                   stored_dtype=str(get("dtype", "torch_dtype", default="")).replace("torch.", "") or None)

    # ---------------------------------------------------------------- parameters
    @property
    def attn_params(self) -> int:
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return 2 * self.hidden * q + 2 * self.hidden * kv + ((q + 2 * kv) if self.qkv_bias else 0)

    @property
    def mlp_params(self) -> int:
        return (3 if self.gated else 2) * self.hidden * self.intermediate

    @property
    def layer_params(self) -> int:
        """Weights of one decoder layer (every expert of an MoE layer)."""
        router = self.hidden * self.experts if self.experts > 1 else 0
        return self.attn_params + self.experts * self.mlp_params + router + 2 * self.hidden

    @property
    def kv_share(self) -> float:
        """The share of a layer's weights a call stopped once it has its keys and values multiplies
        (its q, k and v projections)."""
        return (self.heads + 2 * self.kv_heads) * self.head_dim * self.hidden / self.active_layer_params

    @property
    def active_layer_params(self) -> int:
        """Weights one token multiplies in a layer (the active experts of an MoE layer)."""
        return self.attn_params + self.experts_active * self.mlp_params + 2 * self.hidden

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def resident_bytes(self, dtype: str, device: str = "cpu") -> int:
        """The weights a run keeps in memory. On a CPU, a checkpoint already in ``dtype`` is memory-mapped
        (safetensors), so an untied input embedding stays on disk but for the rows of the tokens read;
        converted weights (e.g. a bf16 checkpoint run in fp32), tied ones, and a GPU's copy are all resident."""
        mapped = device == "cpu" and not self.tied and self.stored_dtype == dtype
        return (self.params - (self.vocab * self.hidden if mapped else 0)) * BYTES[dtype]

    def load_bytes(self, dtype: str, device: str = "cpu") -> int:
        """What loading holds besides :meth:`resident_bytes`, at its peak: on a CPU, a checkpoint stored in another
        dtype is read whole (its memory-mapped pages count as resident) while its weights are converted, and
        released after (e.g. the real models' float32 folders run in bfloat16)."""
        converted = device == "cpu" and self.stored_dtype in BYTES and self.stored_dtype != dtype
        return self.params * BYTES[self.stored_dtype] if converted else 0

    def kv_bytes_per_token(self, dtype: str) -> int:
        """Keys and values of every layer for one position of one row (the KV cache of generation)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * BYTES[dtype]

    # ---------------------------------------------------------------- per token
    def layer_flops(self, context: float) -> float:
        """Forward FLOPs of one layer for one position attending to ``context`` positions."""
        return 2 * self.active_layer_params + 4 * self.heads * self.head_dim * context

    @property
    def unembed_flops(self) -> float:
        return 2 * self.vocab * self.hidden

    def act_bytes(self, rows: int, T: int, dtype: str) -> float:
        """Live activations of one layer call without gradients (attention scores included)."""
        per = (ACT_H * self.hidden + ACT_I * self.intermediate * self.experts_active) * BYTES[dtype]
        return rows * T * per + rows * self.heads * T * T * 4

    def saved_bytes(self, rows: int, T: int, layers: int, dtype: str) -> float:
        """What autograd keeps for backward over ``layers`` layers (probabilities of attention included)."""
        per = (SAVED_H * self.hidden + SAVED_I * self.intermediate * self.experts_active) * BYTES[dtype]
        return layers * (rows * T * per + rows * self.heads * T * T * 4)

    def logit_bytes(self, rows: int, T: int) -> float:
        return LOGIT_COPIES * rows * T * self.vocab * 4


@dataclass
class Cost:
    """The cost of one call of a measurement (or a sum of calls: ``a + b``)."""
    what: str
    layer_tokens: float = 0.0
    layer_passes: float = 0.0
    grad_tokens: float = 0.0
    unembed_tokens: float = 0.0
    flops_fwd: float = 0.0
    flops_bwd: float = 0.0
    layer_calls: int = 0
    unembed_calls: int = 0
    traces: int = 0           # nnsight traces and generate calls (their python overhead grows with the layers)
    stat_layers: int = 0      # layers whose contributions statistics a trace computes (contributions.read_stats)
    forwards: int = 0         # whole-model forwards (traces, clean runs, decoding steps): embedding, masks, norm
    lens_rows: int = 0        # positions whose lens statistics a trace computes (logit_lens.read_lens), per layer
    windows: int = 0          # layer calls on a suffix of the positions (arguments cut, a causal mask built)
    results: int = 0          # measurement calls (each makes one result, with its metadata)
    gen_steps: int = 0        # decoding steps of greedy generation (each a whole-model call with its overhead)
    linalg_flops: float = 0.0  # float64 matrix products outside the model (the mapping's fit and predictions)
    solve_flops: float = 0.0   # float64 linear solves (the mapping's normal equations: LU, then the right-hand sides)
    fresh_bytes: float = 0.0   # large tensors allocated afresh and written (their pages are zeroed on first touch)
    stream_bytes: float = 0.0  # bytes read and written by passes over large tensors already in memory
    calls: Counter = field(default_factory=Counter)          # tokens per layer call -> number of such calls
    grad_calls: Counter = field(default_factory=Counter)     # the same, for calls that also run backward
    unembed_sizes: Counter = field(default_factory=Counter)  # tokens per unembedding call -> calls
    grad_unembed: Counter = field(default_factory=Counter)   # the same, for calls that also run backward
    product_rows: Counter = field(default_factory=Counter)   # rows of a float64 product -> its FLOPs (in linalg_flops)
    saved: float = 0.0        # bytes held through the call
    work: float = 0.0         # bytes of its largest step
    requests: int = 0
    download: float = 0.0     # bytes the NDIF requests download
    batch_size: int | None = None
    notes: list = field(default_factory=list)

    @property
    def peak(self) -> float:
        """Bytes above the weights at the call's peak."""
        return self.saved + self.work

    def __add__(self, other: "Cost") -> "Cost":
        add = lambda k: getattr(self, k) + getattr(other, k)  # noqa: E731
        return Cost(what=self.what if self.what == other.what else f"{self.what}+{other.what}",
                    **{k: add(k) for k in ("layer_tokens", "layer_passes", "grad_tokens", "unembed_tokens",
                                           "flops_fwd", "flops_bwd", "layer_calls", "unembed_calls", "traces",
                                           "stat_layers", "forwards", "windows", "lens_rows", "results",
                                           "gen_steps", "linalg_flops", "solve_flops", "fresh_bytes",
                                           "stream_bytes", "requests", "download")},
                    saved=max(self.saved, other.saved), work=max(self.work, other.work),
                    calls=self.calls + other.calls, grad_calls=self.grad_calls + other.grad_calls,
                    unembed_sizes=self.unembed_sizes + other.unembed_sizes,
                    grad_unembed=self.grad_unembed + other.grad_unembed,
                    product_rows=self.product_rows + other.product_rows,
                    batch_size=min((b for b in (self.batch_size, other.batch_size) if b), default=None),
                    notes=self.notes + [n for n in other.notes if n not in self.notes])


class Acc:
    """Accumulates layer calls of one prompt of ``T`` tokens into a :class:`Cost`."""

    def __init__(self, shape: Shape, what: str, T: int):
        self.s, self.T, self.c = shape, T, Cost(what)

    def layers(self, n_layers: int, rows: int, positions: int, context: float | None = None, grad: bool = False,
               share: float = 1.0):
        """``n_layers`` layer calls on ``rows`` rows of ``positions`` positions each; ``share`` < 1 for a call
        stopped part-way (it counts as a call for layer-passes, and for ``share`` of a call's time and FLOPs)."""
        tok = n_layers * rows * positions
        ctx = context if context is not None else positions / 2
        f = tok * self.s.layer_flops(ctx) * share
        self.c.layer_tokens += tok
        self.c.layer_passes += tok / self.T
        self.c.flops_fwd += f
        self.c.layer_calls += n_layers
        if n_layers and rows * positions:
            self.c.calls[rows * positions] += n_layers * share
        if grad:
            if n_layers and rows * positions:
                self.c.grad_calls[rows * positions] += n_layers * share
            self.c.grad_tokens += tok
            self.c.flops_bwd += f  # gradients of the inputs only: the weights need none

    def unembed(self, rows: int, positions: int, grad: bool = False):
        f = rows * positions * self.s.unembed_flops
        self.c.unembed_tokens += rows * positions
        self.c.unembed_calls += 1
        self.c.unembed_sizes[rows * positions] += 1
        if grad:
            self.c.grad_unembed[rows * positions] += 1
        self.c.flops_fwd += f
        self.c.flops_bwd += f if grad else 0.0

    def done(self, saved: float, work: float, requests: int = 0, download: float = 0.0, batch: int | None = None,
             note: str | None = None) -> Cost:
        self.c.saved, self.c.work, self.c.requests, self.c.download = saved, work, requests, download
        self.c.batch_size = batch
        if note:
            self.c.notes.append(note)
        return self.c


def total(costs) -> Cost:
    costs = list(costs)
    out = costs[0]
    for c in costs[1:]:
        out = out + c
    return out


def requests_for(download: float) -> int:
    """Requests of one call on NDIF: one, or as many as keep each under ``REQUEST_BYTES``."""
    return max(1, math.ceil(download / REQUEST_BYTES))


def with_requests(cost: Cost, remote: bool) -> Cost:
    """``cost`` as one measurement call's: its NDIF requests, and one result."""
    return replace(cost, requests=requests_for(cost.download) if remote else 0, results=1)
