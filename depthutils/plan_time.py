"""Seconds from a :class:`~depthutils.cost.Cost`: a CPU calibration measured here, or a GPU's data sheet.

**CPU.** :func:`calibrate` times one random decoder layer of the model's width (or, above
:data:`CALIBRATION_MAX_BYTES`, of Llama 3.1 8B's width) on this machine: a few forward calls at two
sizes (the time to read its weights, and a throughput), one forward+backward, and the resident memory of a
process that has imported depthutils. It takes a few seconds and is cached in
``$XDG_CACHE_HOME/depthutils/calibration.json`` per width, dtype and thread count.

**GPU.** :data:`DEVICES` holds an H100's figures from NVIDIA's data sheet; a pass takes the longer of
its FLOPs at :data:`GPU_EFFICIENCY` of the dense peak and its weights read at the memory bandwidth.
These are estimates, never measured here (the project has no GPU).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from .cost import BYTES, Cost, Shape

#: NVIDIA H100 SXM5 80 GB, "NVIDIA H100 Tensor Core GPU" data sheet: 989 TFLOPS dense BF16 (the
#: 1979 of the sheet is with 2:4 sparsity), 3.35 TB/s HBM3, 80 GB.
DEVICES = {"h100": dict(name="NVIDIA H100 SXM 80GB", flops=989e12, bandwidth=3.35e12, memory=80e9,
                        source="NVIDIA H100 Tensor Core GPU data sheet (SXM5: 989 TFLOPS dense BF16, 3.35 TB/s)")}
#: the fraction of the dense peak a transformer's matmuls reach (an assumption, typical of large-batch
#: inference; small batches are bandwidth-bound and take the bandwidth term instead)
GPU_EFFICIENCY = 0.5
#: the largest layer :func:`calibrate` builds; wider models calibrate at Llama 3.1 8B's width
CALIBRATION_MAX_BYTES = 1.2e9
WIDTH_8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8)


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "depthutils" / "calibration.json"


def _width(shape: Shape, dtype: str) -> dict:
    w = dict(hidden_size=shape.hidden, intermediate_size=shape.intermediate, num_attention_heads=shape.heads,
             num_key_value_heads=shape.kv_heads)
    return w if shape.layer_params * BYTES[dtype] <= CALIBRATION_MAX_BYTES else WIDTH_8B


def calibration(shape: Shape, dtype: str, threads: int | None = None, refresh: bool = False) -> dict:
    """This machine's figures for ``shape``'s width and ``dtype`` (cached; measured on first use)."""
    threads = threads or torch.get_num_threads()
    width = _width(shape, dtype)
    key = f"{width['hidden_size']}x{width['intermediate_size']}x{width['num_attention_heads']}x" \
          f"{width['num_key_value_heads']}-{dtype}-{threads}t"
    path = cache_file()
    cached = json.loads(path.read_text()) if path.exists() else {}
    if key not in cached or refresh:
        cached[key] = calibrate(width, dtype, threads)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached, indent=1))
    return cached[key]


def calibrate(width: dict, dtype: str, threads: int) -> dict:
    """Measure one random Llama layer of ``width`` on this machine.

    A layer call costs ``weights / read + FLOPs / throughput``: a call on a few tokens is bound by
    reading the layer's weights (``read_bytes_per_s``), a call on many by its matmuls (``flops_per_s``);
    the two are fitted to a call on 8 tokens and one on 4 x 128. ``bwd_flops_per_s`` is the backward's
    (gradients of the input only) from one forward+backward on 4 x 128.
    """
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    torch.set_num_threads(threads)
    cfg = LlamaConfig(**width, num_hidden_layers=1, vocab_size=8)
    cfg._attn_implementation = "sdpa"
    shape = Shape.from_config(cfg.to_dict())
    dt = getattr(torch, dtype)
    with torch.device("meta"):
        layer = LlamaDecoderLayer(cfg, 0)
    layer = layer.to_empty(device="cpu").to(dt).eval()
    for p in layer.parameters():  # values do not change the time; uniform is the fastest fill
        p.data.uniform_(-0.02, 0.02)
    rope = LlamaRotaryEmbedding(cfg)

    def call(B, T, grad=False):
        x = torch.randn(B, T, cfg.hidden_size, dtype=dt, requires_grad=grad)
        pos = torch.arange(T)[None]
        cos_sin = tuple(t.to(dt) for t in rope(x, pos))
        mask = torch.full((T, T), torch.finfo(dt).min, dtype=dt).triu(1)[None, None]
        t0 = time.perf_counter()
        with torch.set_grad_enabled(grad):
            out = layer(x, attention_mask=mask, position_embeddings=cos_sin, position_ids=pos)
            out = out[0] if isinstance(out, tuple) else out
            if grad:
                torch.autograd.grad(out.float().sum(), x)
        return time.perf_counter() - t0

    def best(B, T, grad=False):
        call(B, T, grad)
        return min(call(B, T, grad) for _ in range(2))

    small, big = (1, 8), (4, 128)
    t_small, t_big, t_grad = best(*small), best(*big), best(*big, grad=True)
    f = lambda B, T: B * T * shape.layer_flops(T / 2)  # noqa: E731
    per_flop = max((t_big - t_small) / (f(*big) - f(*small)), 1e-15)
    per_call = max(t_small - f(*small) * per_flop, 1e-6)
    bwd = max(t_grad - t_big, 1e-6)
    return {"width": width, "dtype": dtype, "threads": threads, "flops_per_s": 1 / per_flop,
            "bwd_flops_per_s": f(*big) / bwd, "read_bytes_per_s": shape.layer_params * BYTES[dtype] / per_call,
            "base_rss_bytes": base_rss(), "torch": torch.__version__,
            "measured": {"1x8_s": t_small, "4x128_s": t_big, "4x128_fwd_bwd_s": t_grad}}


def base_rss() -> int:
    """Peak RSS of a fresh process that has imported depthutils (and so torch, transformers, nnsight)."""
    code = "import resource, depthutils, depthutils.stack; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return int(out.stdout.split()[-1]) * 1024


def cpu_seconds(cost: Cost, shape: Shape, dtype: str, cal: dict) -> float:
    """FLOPs at the measured throughputs, plus every layer and unembedding call's weights read once."""
    reads = (cost.layer_calls * shape.layer_params + cost.unembed_calls * shape.vocab * shape.hidden) * BYTES[dtype]
    return cost.flops_fwd / cal["flops_per_s"] + cost.flops_bwd / cal["bwd_flops_per_s"] + reads / cal["read_bytes_per_s"]


def gpu_seconds(cost: Cost, shape: Shape, dtype: str, device: str = "h100") -> float:
    """Each layer call takes the longer of its FLOPs at :data:`GPU_EFFICIENCY` of the peak and reading the
    layer's weights once; the unembedding likewise (an estimate from the data sheet)."""
    d = DEVICES[device]
    flops = (cost.flops_fwd + cost.flops_bwd) / (d["flops"] * GPU_EFFICIENCY)
    reads = (cost.layer_calls * shape.layer_params + cost.unembed_calls * shape.vocab * shape.hidden) \
        * BYTES[dtype] / d["bandwidth"]
    return max(flops, reads) + (cost.layer_calls + cost.unembed_calls) * 20e-6  # ~20 µs of kernel launches per layer call


def available_memory() -> int:
    """Bytes this machine can still give a process (``MemAvailable``), or total RAM."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def peak_rss_now() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
