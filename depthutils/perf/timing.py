"""Seconds from a :class:`~depthutils.cost.accounting.Cost`: a CPU calibration measured here, or a GPU's data sheet.

**CPU.** :func:`calibrate` times one random decoder layer of the model's width (or, above
:data:`CALIBRATION_MAX_BYTES`, of Llama 3.1 8B's width) and an unembedding on this machine, at a few
sizes of call, one forward+backward, and the resident memory of a process that has imported depthutils.
It takes seconds (about a minute at 8B width) and is cached in
``$XDG_CACHE_HOME/depthutils/calibration.json`` per width, dtype and thread count.

Times are **process CPU seconds** (user + system, :func:`cpu_clock`), not wall seconds: on a machine
shared with other jobs, wall time grows with their load, while the CPU seconds a computation needs
do not (as long as idle OpenMP threads sleep rather than spin: run with ``OMP_WAIT_POLICY=PASSIVE``).
On an idle machine, wall seconds ≈ CPU seconds / threads (:func:`wall_estimate`).

**GPU.** :data:`DEVICES` holds an H100's figures from NVIDIA's data sheet; a pass takes the longer of
its FLOPs at :data:`GPU_EFFICIENCY` of the dense peak and its weights read at the memory bandwidth.
These are estimates, never measured here (the project has no GPU).
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from depthutils.cost.accounting import BYTES, Cost, Shape
from depthutils.measures.logit_lens import lens_stats
from depthutils.models.devices import proc_value
from depthutils.models.random_init import WIDTH_8B
from depthutils.perf.overheads import cpu_clock, overheads, rate_at

#: NVIDIA H100 SXM5 80 GB, "NVIDIA H100 Tensor Core GPU" data sheet: 989 TFLOPS dense BF16 (the
#: 1979 of the sheet is with 2:4 sparsity), 3.35 TB/s HBM3, 80 GB.
DEVICES = {"h100": dict(name="NVIDIA H100 SXM 80GB", flops=989e12, bandwidth=3.35e12, memory=80e9,
                        source="NVIDIA H100 Tensor Core GPU data sheet (SXM5: 989 TFLOPS dense BF16, 3.35 TB/s)")}
#: the fraction of the dense peak a transformer's matmuls reach (an assumption, typical of large-batch
#: inference; small batches are bandwidth-bound and take the bandwidth term instead)
GPU_EFFICIENCY = 0.5
#: the largest layer :func:`calibrate` builds; wider models calibrate at Llama 3.1 8B's width
CALIBRATION_MAX_BYTES = 1.2e9


#: the calibration's format; a cache written by another version is measured again
CALIBRATION_VERSION = "cpu-8"


def wall_estimate(cpu_seconds: float, threads: int) -> float:
    """Wall seconds on an idle machine: the CPU seconds spread over ``threads`` threads."""
    return cpu_seconds / max(threads, 1)


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "depthutils" / "calibration.json"


def _width(shape: Shape, dtype: str) -> dict:
    w = dict(hidden_size=shape.hidden, intermediate_size=shape.intermediate, num_attention_heads=shape.heads,
             num_key_value_heads=shape.kv_heads)
    return w if shape.layer_params * BYTES[dtype] <= CALIBRATION_MAX_BYTES else WIDTH_8B


def calibration_key(shape: Shape, dtype: str, threads: int) -> str:
    """The cache key of ``shape``'s calibration: the width it is timed at, the vocabulary, dtype and threads."""
    w = _width(shape, dtype)
    return f"{w['hidden_size']}x{w['intermediate_size']}x{w['num_attention_heads']}x" \
           f"{w['num_key_value_heads']}-V{min(shape.vocab, 128256)}-{dtype}-{threads}t-{CALIBRATION_VERSION}"


def calibration(shape: Shape, dtype: str, threads: int | None = None, refresh: bool = False) -> dict:
    """This machine's figures for ``shape``'s width and ``dtype`` (cached; measured on first use)."""
    threads = threads or torch.get_num_threads()
    width = _width(shape, dtype)
    key = calibration_key(shape, dtype, threads)
    path = cache_file()
    cached = json.loads(path.read_text()) if path.exists() else {}
    if key not in cached or refresh:
        cached[key] = calibrate(width, dtype, threads, min(shape.vocab, 128256))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached, indent=1))
    cal = cached[key]
    for k in ("layer_seconds", "grad_seconds", "unembed_seconds", "product_flops_per_second"):  # JSON keys: strings
        cal[k] = {int(m): v for m, v in cal[k].items()}
    return cal


#: tokens per call at which :func:`calibrate` times a layer, an unembedding, and a layer's backward
LAYER_POINTS = ((1, 1), (1, 8), (1, 32), (1, 128), (4, 128))
UNEMBED_POINTS = (1, 4, 16, 64, 256)
GRAD_POINTS = ((1, 32), (4, 128))
#: positions of the calibrated lens statistics (their cost is per position and vocabulary entry)
LENS_ROWS = 16
#: passes through the sizes when every call takes under LONG_CALL CPU seconds
ROUNDS, LONG_CALL = 3, 0.05


def calibrate(width: dict, dtype: str, threads: int, vocab: int = 128256) -> dict:
    """Time (in CPU seconds, :func:`cpu_clock`) one random Llama layer of ``width`` and one unembedding.

    A CPU's time per call is far from linear in the tokens of the call: one token is a matrix-vector
    product bound by reading the weights, a few tokens pay for packing the weights into the matmul's
    blocks, many tokens approach the matmul's throughput. So the layer is timed at
    :data:`LAYER_POINTS` (rows x positions), its backward (gradients of the input only, the weights
    frozen as :func:`depthutils.load_model` freezes them) at :data:`GRAD_POINTS`, and the unembedding
    ``[V, H]`` with its float32 softmax at :data:`UNEMBED_POINTS` rows; :func:`cpu_seconds`
    interpolates between them. The unembedding is ``F.linear`` on a 3-d input, as ``lm_head`` runs it: in
    bfloat16 on a CPU, one row that way takes ~100x longer than the 2-d product (torch takes a batched
    path that copies the weight), which is what a decoding step pays.
    """
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    torch.set_num_threads(threads)
    cfg = LlamaConfig(**width, num_hidden_layers=1, vocab_size=8)
    cfg._attn_implementation = "sdpa"
    dt = getattr(torch, dtype)
    with torch.device("meta"):
        layer = LlamaDecoderLayer(cfg, 0)
    layer = layer.to_empty(device="cpu").to(dt).eval()
    for p in layer.parameters():  # values do not change the time; uniform is the fastest fill
        p.data.uniform_(-0.02, 0.02)
        p.requires_grad_(False)
    rope = LlamaRotaryEmbedding(cfg)

    def call(B, T, grad=False):
        x = torch.randn(B, T, cfg.hidden_size, dtype=dt, requires_grad=grad)
        pos = torch.arange(T)[None]
        cos_sin = tuple(t.to(dt) for t in rope(x, pos))
        mask = torch.full((T, T), torch.finfo(dt).min, dtype=dt).triu(1)[None, None]
        t0 = cpu_clock()
        with torch.set_grad_enabled(grad):
            out = layer(x, attention_mask=mask, position_embeddings=cos_sin, position_ids=pos)  # noqa: F821 (deleted after its last call)
            out = out[0] if isinstance(out, tuple) else out
            if grad:
                torch.autograd.grad(out.float().sum(), x)
        return cpu_clock() - t0

    def best(fn, *args, n=3, budget=0.5):
        """The median of at least ``n`` calls after a warm-up, more while they take under ``budget`` seconds
        (short calls are the noisiest). The median, not the fastest: a run's time is the sum of its calls, so
        a typical call is what it pays; :func:`points` takes the quietest of several passes against load."""
        fn(*args)
        times = [fn(*args) for _ in range(n)]
        while sum(times) < budget and len(times) < 50:
            times.append(fn(*args))
        return statistics.median(times)

    def points(fn, sizes: dict) -> dict:
        """Each size's fastest call over :data:`ROUNDS` passes through the sizes where calls are short (a burst
        of other jobs' load then spoils one pass of a size, not all its calls); one pass where they are long."""
        out = {}
        for r in range(ROUNDS):
            for key, args in sizes.items():
                t = best(fn, *args)
                out[key] = min(out.get(key, t), t)
            if max(out.values()) > LONG_CALL:
                break
        return out

    layer_t = points(call, {B * T: (B, T) for B, T in LAYER_POINTS})
    grad_t = {B * T: max(best(call, B, T, True) - best(call, B, T), 0.0) for B, T in GRAD_POINTS}
    del layer
    W = torch.empty(vocab, width["hidden_size"], dtype=dt).uniform_(-0.02, 0.02)

    def unembed(M):
        x = torch.randn(1, M, width["hidden_size"], dtype=dt)  # [batch, positions, H], as the model's head sees it
        t0 = cpu_clock()
        torch.nn.functional.linear(x, W).float().softmax(-1)  # noqa: F821 (deleted after its last call)
        return cpu_clock() - t0

    unembed_t = points(unembed, {M: (M,) for M in UNEMBED_POINTS})
    del W
    z = torch.randn(1, LENS_ROWS, vocab)
    log_final = z.log_softmax(-1)
    top_final = log_final.topk(5, dim=-1).indices

    def lens():  # one layer's lens statistics inside a trace (depthutils.measures.logit_lens.read_lens), past its logits
        t0 = cpu_clock()
        lens_stats(z.float().log_softmax(-1), log_final, top_final, 5)
        return cpu_clock() - t0

    lens_row = points(lens, {LENS_ROWS: ()})[LENS_ROWS] / LENS_ROWS
    return {**overheads(threads, width["hidden_size"]), "width": width, "vocab": vocab, "dtype": dtype, "threads": threads, "clock": "process CPU seconds",
            "layer_seconds": layer_t, "grad_seconds": grad_t, "unembed_seconds": unembed_t,
            "lens_row_seconds": lens_row,
            "layer_params": Shape.from_config({**cfg.to_dict(), "vocab_size": vocab}).layer_params,
            "base_rss_bytes": base_rss(), "torch": torch.__version__}


def interpolate(points: dict, m: float) -> float:
    """Seconds of a call on ``m`` tokens: piecewise linear between the timed sizes, the last slope beyond."""
    xs = sorted((float(k), v) for k, v in points.items())
    if m <= xs[0][0]:
        return xs[0][1]
    for (x0, y0), (x1, y1) in zip(xs, xs[1:]):
        if m <= x1 or (x1, y1) == xs[-1]:
            return y0 + (y1 - y0) * (m - x0) / (x1 - x0)
    return xs[-1][1]


_BASE: list = []


def base_rss() -> int:
    """Peak RSS of a fresh process that has imported what a chapter's kernel imports (ipykernel, matplotlib,
    seaborn, depthutils and so torch, transformers, nnsight), loaded the embedded default model (a few MB) and
    traced one short prompt: the memory every run has besides its model's weights and its measurement's
    tensors. Measured once per process."""
    if _BASE:
        return _BASE[0]
    code = ("import importlib\n"
            "for m in ('ipykernel.ipkernel', 'matplotlib.pyplot', 'seaborn', 'IPython.display'):\n"
            "    try:\n        importlib.import_module(m)\n    except ImportError:\n        pass\n"
            "import depthutils as du; from depthutils.perf.timing import peak_rss_now; "
            "du.contributions(du.load_model('default', device='cpu'), ['5 + 7 = 12'], progress_bar=False); "
            "print(peak_rss_now())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    _BASE.append(int(out.stdout.split()[-1]))
    return _BASE[0]


def cpu_seconds(cost: Cost, shape: Shape, dtype: str, cal: dict) -> float:
    """Process CPU seconds: every layer and unembedding call at its size, from the calibration (scaled by
    weights where the calibration was made at another width or vocabulary); a backward layer call adds the
    calibrated backward at its size, an unembedding's backward to its input one matmul of its forward's size,
    a lens in a trace its statistics per position (scaled by the vocabulary).
    Besides (:mod:`depthutils.perf.overheads`): each trace and decoding step what nnsight adds per layer, each
    layer's contributions statistics their small operations, each result its metadata, each whole-model
    forward what it adds to its layers, each suffix call its arguments; float64 linear algebra its products at
    the calibrated rate of their rows, its solves at the calibrated solve rate, its fresh large tensors their
    pages and its in-place passes their bytes."""
    w = shape.layer_params / cal["layer_params"]
    u = shape.vocab * shape.hidden / (cal["vocab"] * cal["width"]["hidden_size"])
    lt, gt, ut = cal["layer_seconds"], cal["grad_seconds"], cal["unembed_seconds"]
    layer = sum(n * interpolate(lt, m) for m, n in cost.calls.items())
    grad = sum(n * interpolate(gt, m) for m, n in cost.grad_calls.items())
    unembed = sum(n * interpolate(ut, m) for m, n in cost.unembed_sizes.items())
    unembed += sum(n * interpolate(ut, m) for m, n in cost.grad_unembed.items())
    lens = cost.lens_rows * cal["lens_row_seconds"] * shape.vocab / cal["vocab"]
    python = shape.layers * (cost.traces * cal["trace_layer_seconds"] + cost.gen_steps * cal["step_layer_seconds"]) \
        + cost.stat_layers * cal["stats_layer_seconds"] + cost.results * cal["result_seconds"] \
        + cost.forwards * cal["forward_seconds"] + cost.windows * cal["window_seconds"]
    rows = cost.product_rows
    products = sum(f / rate_at(cal["product_flops_per_second"], m) for m, f in rows.items()) \
        + max(cost.linalg_flops - sum(rows.values()), 0.0) / cal["linalg_flops_per_second"]
    memory = cost.fresh_bytes * cal["fresh_seconds_per_byte"] + cost.stream_bytes / cal["stream_bytes_per_second"]
    return w * (layer + grad) + u * unembed + lens + python + products \
        + cost.solve_flops / cal["solve_flops_per_second"] + memory


def gpu_seconds(cost: Cost, shape: Shape, dtype: str, device: str = "h100") -> float:
    """Each layer call takes the longer of its FLOPs at :data:`GPU_EFFICIENCY` of the peak and reading the
    layer's weights once; the unembedding likewise (an estimate from the data sheet)."""
    d = DEVICES[device]
    flops = (cost.flops_fwd + cost.flops_bwd) / (d["flops"] * GPU_EFFICIENCY)
    reads = (cost.layer_calls * shape.layer_params + cost.unembed_calls * shape.vocab * shape.hidden) \
        * BYTES[dtype] / d["bandwidth"]
    return max(flops, reads) + (cost.layer_calls + cost.unembed_calls) * 20e-6  # ~20 µs of kernel launches per layer call


def peak_rss_now() -> int:
    """This process's peak RSS in bytes: ``VmHWM`` (reset by exec, unlike ``ru_maxrss``, which a child
    inherits from the parent it was forked from), else ``ru_maxrss``."""
    value = proc_value("/proc/self/status", "VmHWM")
    return value if value is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
