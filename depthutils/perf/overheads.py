"""The costs of a run besides its model's layers and unembedding, measured on this machine for the CPU
calibration (:func:`depthutils.perf.timing.calibration`).

* **nnsight and decoding.** The python cost, per decoder layer, of one nnsight trace and of one step of
  greedy decoding, *beyond* the model's own forward: the embedded default model (whose layers compute next
  to nothing) is traced, and decoded through nnsight ``generate``, and the same forward run as a plain
  ``torch.nn.Module`` call (the whole prompt, and one cached decoding step) is subtracted. The cost model
  counts the layer and unembedding calls of a trace or a step itself (at the calibrated time per call), so
  what is left here is only what nnsight and ``generate`` add.
* **float64 linear algebra** (the mapping's, :mod:`depthutils.measures.cross_model_mapping`). A product's rate
  depends on its rows: a product of few rows ``[M, K] @ [K, N]`` streams its right-hand matrix once for
  little arithmetic, so it runs at a fraction of a square product's rate; :func:`float64` times
  :data:`PRODUCT_ROWS` rows. A solve's rate (an LU of ``[hidden+1]²`` and :data:`SOLVE_COLUMNS` right-hand
  sides). And the memory: a tensor larger than the allocator keeps (tens of MB) is mapped afresh, and the
  kernel zeroes each of its pages on the first write (``fresh_seconds_per_byte``, measured by filling a new
  :data:`PROBE_BYTES` tensor); an in-place pass over tensors already in memory streams at
  ``stream_bytes_per_second`` (reads and writes counted).
"""
from __future__ import annotations

import resource
import statistics

import torch

from depthutils.core.results import make_meta
from depthutils.measures.contributions import read_stats
from depthutils.models.handle import load_model
from depthutils.models.stack import Stack

#: right-hand sides of the calibrated float64 solve
SOLVE_COLUMNS = 2048
#: rows of the calibrated float64 products ``[M, 2048] @ [2048, 4096]``
PRODUCT_ROWS = (8, 32, 128, 512)
#: bytes of the fresh tensor and of each operand of the in-place pass that time the memory
PROBE_BYTES = 128 * 2**20


def cpu_clock() -> float:
    """CPU seconds (user + system) this process has used so far, over all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _best(fn, *args, n: int = 15) -> float:
    """The median of ``n`` calls of ``fn`` (which returns its own CPU seconds) after one that warms up: what a
    typical call costs, as a run pays it call after call (see :func:`depthutils.perf.timing.calibrate`)."""
    fn(*args)
    return statistics.median(fn(*args) for _ in range(n))


def timed(fn, *args) -> float:
    t0 = cpu_clock()
    fn(*args)
    return cpu_clock() - t0


def python(threads: int) -> dict:
    """Per decoder layer, in CPU seconds: what one nnsight trace (saving every layer's output) adds to the
    plain forward of the same prompt (``trace_layer_seconds``); what the contributions' statistics add to that
    trace (:func:`depthutils.measures.contributions.read_stats`: four reads and a score of small tensor operations
    per layer, ``stats_layer_seconds``); and what one step of nnsight ``generate`` adds to a plain cached
    forward of one token (``step_layer_seconds``); on the embedded default model. And what every measurement
call pays once for its result: its metadata (:func:`depthutils.core.results.make_meta`, which reads the
installed packages' versions), ``result_seconds``; and what a model's forward costs besides its layer and
unembedding calls (the embedding, rotary tables, masks, final norm), ``forward_seconds``: the plain forward
less the same layer calls (with the forward's own arguments) and unembedding made one by one; and what a
layer call on a suffix of the positions pays to cut its arguments and build its causal mask
(:meth:`depthutils.models.stack.Stack.suffix`), ``window_seconds``."""
    torch.set_num_threads(threads)
    h = load_model("default", device="cpu")
    module, ids, L = h.nn._module, torch.tensor([[1, 5, 6, 7]]), h.n_layers

    def trace():
        t0 = cpu_clock()
        with h.no_grad(), h.trace(ids):
            [h.layers_output(l).save() for l in range(L)]
        return cpu_clock() - t0

    def stats():
        t0 = cpu_clock()
        with h.no_grad(), h.trace(ids):
            read_stats(h, ids.shape[1])
        return cpu_clock() - t0

    def plain():
        with torch.no_grad():
            return timed(module, ids)

    def step():  # one cached decoding step, after a prefill that is not timed
        with torch.no_grad():
            out = module(ids, use_cache=True)
            return timed(lambda: module(out.logits[:, -1:].argmax(-1), past_key_values=out.past_key_values,
                                         use_cache=True))

    decode = lambda n: timed(h.greedy_batch, [ids], n)  # noqa: E731
    t_trace, t_plain, t_stats = _best(trace), _best(plain), _best(stats)
    t1, t9, t_step = _best(decode, 1, n=8), _best(decode, 9, n=8), _best(step)
    t_result = _best(lambda: timed(lambda: make_meta(h, dataset="gsm8k", n=1)))
    st = Stack(h, ids)  # the same layer calls with the forward's own arguments, and the unembedding, alone
    with torch.no_grad():
        t_parts = _best(lambda: timed(st.run, st.h(0), 0)) + _best(lambda: timed(st.unembed, st.h(L)))
        t_window = _best(lambda: timed(st._window_kwargs, 1, 2, ids.shape[1]))  # a suffix call's arguments
    return {"trace_layer_seconds": max(t_trace - t_plain, 0.0) / L,
            "stats_layer_seconds": max(t_stats - t_trace, 0.0) / L,
            "step_layer_seconds": max((t9 - t1) / 8 - t_step, 0.0) / L, "result_seconds": t_result,
            "forward_seconds": max(t_plain - t_parts, 0.0), "window_seconds": t_window}


def float64(threads: int, hidden: int) -> dict:
    """This machine's float64 rates: products by rows (FLOP per CPU second), the solve at the width ``hidden``,
    a fresh tensor's cost per byte and an in-place pass's bytes per second (see the module's docstring)."""
    torch.set_num_threads(threads)
    f64 = torch.float64
    b = torch.randn(2048, 4096, dtype=f64)
    rows = {}
    for M in PRODUCT_ROWS:
        a = torch.randn(M, 2048, dtype=f64)
        rows[M] = 2 * M * 2048 * 4096 / min(timed(torch.matmul, a, b) for _ in range(3))
    n = hidden + 1
    lhs = torch.randn(n, n, dtype=f64) / n ** 0.5 + torch.eye(n, dtype=f64)
    rhs = torch.randn(n, SOLVE_COLUMNS, dtype=f64)
    solve = min(timed(torch.linalg.solve, lhs, rhs) for _ in range(3))
    k = PROBE_BYTES // 8
    fresh = min(timed(lambda: torch.empty(k, dtype=f64).fill_(1.0)) for _ in range(3))
    x, y = torch.ones(k, dtype=f64), torch.ones(k, dtype=f64)
    stream = min(timed(x.add_, y) for _ in range(3))
    return {"product_flops_per_second": rows, "linalg_flops_per_second": rows[max(rows)],
            "solve_flops_per_second": (2 / 3 * n ** 3 + 2 * n * n * SOLVE_COLUMNS) / solve,
            "fresh_seconds_per_byte": fresh / PROBE_BYTES, "stream_bytes_per_second": 3 * PROBE_BYTES / stream}


def overheads(threads: int, hidden: int = 2048) -> dict:
    """:func:`python` and :func:`float64` (at the width ``hidden``), for the calibration."""
    return {**python(threads), **float64(threads, hidden)}


def rate_at(points: dict, m: float) -> float:
    """A rate at ``m`` rows: piecewise linear between the timed row counts, held constant beyond them."""
    xs = sorted((float(k), v) for k, v in points.items())
    if m <= xs[0][0]:
        return xs[0][1]
    for (x0, y0), (x1, y1) in zip(xs, xs[1:]):
        if m <= x1:
            return y0 + (y1 - y0) * (m - x0) / (x1 - x0)
    return xs[-1][1]
