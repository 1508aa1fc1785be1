"""The logit lens against its floor: the unembedding's matrix products alone.

:func:`depthutils.measures.logit_lens.chunked_lens` multiplies every layer's residual (``L·T`` rows) by the
unembedding, ``2·L·T·H·V`` floating-point operations, and reduces each block of logits to the KL and the top-``k``.
The floor is the same products over the same blocks with nothing else, in the same dtype. Both run on a random
head of a real model's width and vocabulary whose logits spread as a trained model's do (a standard deviation of
about 10), so that the exponentials of far-off tokens underflow as they do on a real model.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import torch

from depthutils.cost.chunks import LENS_CHUNK_BYTES, lens_blocks
from depthutils.measures.logit_lens import chunked_lens

__all__ = ["GEMMA_LENS", "head_model", "lens_floor", "print_lens_floor"]

#: Gemma 3 270M's lens on a GSM8K problem of its tokenizer's length (P1's first problem: 174 tokens)
GEMMA_LENS = dict(layers=18, tokens=174, hidden=640, vocab=262_144)


def head_model(hidden: int, vocab: int, dtype: torch.dtype, seed: int = 0):
    """A stand-in handle for :func:`chunked_lens`: an identity norm and a random unembedding whose logits on
    unit-variance residuals have a standard deviation of about 10."""
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(hidden, vocab, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, hidden, generator=g) * (10 / hidden ** 0.5))
    module = torch.nn.Module()
    module.norm, module.head = torch.nn.Identity(), head.to(dtype)
    return SimpleNamespace(nn=SimpleNamespace(_module=module), arch=SimpleNamespace(final_norm="norm", unembed="head"),
                           finish_logits=lambda z: z)


def lens_floor(layers: int, tokens: int, hidden: int, vocab: int, dtype: str = "bfloat16", repeats: int = 3,
               threads: int | None = None) -> dict:
    """Seconds (the median of ``repeats``) and GFLOP/s of :func:`chunked_lens` and of its products alone."""
    if threads:
        torch.set_num_threads(threads)
    dt = getattr(torch, dtype)
    model = head_model(hidden, vocab, dt)
    g = torch.Generator().manual_seed(1)
    hs = torch.randn(layers, tokens, hidden, generator=g).to(dt)
    weight = model.nn._module.head.weight
    with torch.no_grad():
        final = torch.nn.functional.linear(hs[-1], weight).float()
        x = hs.transpose(0, 1).reshape(tokens * layers, hidden)
        per_block, step = lens_blocks(layers, tokens, vocab, 5, LENS_CHUNK_BYTES)

        def products():
            for v0 in range(0, vocab, step):
                for t0 in range(0, tokens, per_block):
                    torch.nn.functional.linear(x[t0 * layers:(t0 + per_block) * layers], weight[v0:v0 + step])

        out = {}
        for name, run in (("products", products), ("lens", lambda: chunked_lens(model, hs, final, 5))):
            run()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
            out[name] = sorted(times)[len(times) // 2]
    flop = 2 * layers * tokens * hidden * vocab
    return {"shape": dict(layers=layers, tokens=tokens, hidden=hidden, vocab=vocab, dtype=dtype),
            "block": [per_block * layers, step], "tflop": flop / 1e12,
            **{f"{k}_s": v for k, v in out.items()}, **{f"{k}_gflops": flop / v / 1e9 for k, v in out.items()},
            "lens_over_floor": out["lens"] / out["products"]}


def print_lens_floor(r: dict) -> None:
    s = r["shape"]
    print(f"logit lens, L={s['layers']} T={s['tokens']} H={s['hidden']} V={s['vocab']} {s['dtype']} "
          f"({r['tflop']:.2f} TFLOP; blocks of {r['block'][0]} rows × {r['block'][1]} tokens): "
          f"products alone {r['products_s']:.2f} s ({r['products_gflops']:.0f} GFLOP/s), "
          f"the lens {r['lens_s']:.2f} s ({r['lens_gflops']:.0f} GFLOP/s), {r['lens_over_floor']:.2f}× the floor",
          flush=True)
