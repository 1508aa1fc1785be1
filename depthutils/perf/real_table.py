"""``bench``'s rows for the real models: chapters 2, 3 and 5's headline calls on SmolLM2-135M
and Gemma 3 270M, timed once each in a fresh process, with layer-passes against the floor and peak memory.

* chapter 2: ``future_effects`` (layer skipped, future tokens) on ``N_FUTURE`` GSM8K problems (P1's N);
* chapter 3: ``logit_lens`` on ``N_LENS`` GSM8K problems (P1's N);
* chapter 5: ``integrated_gradients`` with the adaptive rule (tol 1e-4, budget 64) on the arithmetic prompt.

``batch_rows`` times chapter 2's call again at each of :data:`BATCHES` rows per forward (its batched path, the one
a bfloat16 load takes), beside the batch the memory budget picks, with the bytes the cost model counts for each:
the batch that is fastest on this CPU, and the cap (:data:`depthutils.cost.chunks.BATCH_BYTES`) that picks it.

A layer-pass is one layer over one whole prompt (bench's :class:`~depthutils.perf.counting.Counter`, here summed over
prompts as layer-tokens over each prompt's own length). The floors: chapter 2's is
:func:`~depthutils.perf.counting.floors`' (clean run, the layers above each skipped one, prefixes shared); the lens
needs one forward (``L`` per prompt) and ``L`` projections of every token onto the vocabulary; integrated
gradients' floor takes the adaptive rule's evaluations as spread evenly over the layers. A model that is not
in the cache (or whose terms are not accepted) is skipped with one sentence; nothing is fetched here.
"""
from __future__ import annotations

import resource
import time

import numpy as np
import torch

import depthutils as du
from depthutils.core.encoding import encode_all
from depthutils.core.prompts import P1_ARITHMETIC
from depthutils.cost.budget import budget_bytes, dtype_of, shape_of
from depthutils.measures import future_effects as fe
from depthutils.models.real.catalog import MANIFEST, cache_root, terms_accepted
from depthutils.perf.counting import Counter, floors
from depthutils.perf.harness import isolated

REAL_MODELS = ("smollm2-135m", "gemma3-270m")
N_FUTURE, N_LENS = 10, 20
#: chapter 2's rows per forward that ``batch_rows`` times (the clean row included), up to one skipped position's
#: layers of a 30-layer model; ``None`` is the batch the memory budget picks (15 rows for SmolLM2 at a 6 GB cap)
BATCHES = (None, 4, 8, 16, 31)
IG = dict(rule="adaptive", tol=1e-4, budget=64)


def unavailable(name: str) -> str | None:
    """Why ``name`` cannot be benched from the cache (one sentence), or None."""
    folder = cache_root() / name
    if not (folder / MANIFEST).exists():
        return f"{name} is not in the cache ({folder}); `python -m depthutils fetch {name}` puts it there."
    if not terms_accepted(name):
        return f"{name}'s terms are not accepted here; see `python -m depthutils fetch {name} --accept-terms`."
    return None


def _measure(name: str, chapter: str, threads: int, batch: int | None = None) -> dict:
    torch.set_num_threads(threads)
    lm = du.load_model(name)
    L = lm.n_layers
    counter = Counter(lm)
    t0 = time.perf_counter()
    extra = {}
    if chapter == "02":
        prompts = du.data.load("gsm8k", N_FUTURE)
        out = du.future_effects(lm, prompts, part="layer", mode="future", progress_bar=False, batch_size=batch)
        seconds = time.perf_counter() - t0
        encs = encode_all(lm, prompts)[1]
        Ts = [e.n_tokens for e in encs]  # as measured: cut to the context
        positions = out.meta["params"]["positions"]
        floor = sum(floors(L, [T], [ts], 1, 1)["future_effects"] * T for T, ts in zip(Ts, positions))
        per_layer = sum((L + 4 * sum(L - 1 - s for s in range(L))) * T for T in Ts)  # before the shared prefixes
        verdict = out.facts()
        extra = _batch_facts(lm, encs, positions, batch, out.meta["params"]["method"])
    elif chapter == "03":
        prompts = du.data.load("gsm8k", N_LENS)
        out = du.logit_lens(lm, prompts, progress_bar=False)
        seconds = time.perf_counter() - t0
        Ts = [e.n_tokens for e in encode_all(lm, prompts)[1]]
        floor = per_layer = L * sum(Ts)
        verdict = out.facts()
    else:
        p = du.Prompt.from_parts(*P1_ARITHMETIC, "bench")
        out = du.integrated_gradients(lm, p, progress_bar=False, **IG)
        Ts = [len(out.tokens)]
        seconds = time.perf_counter() - t0
        per_eval = out.evaluations / L
        floor = Ts[0] * (L + per_eval * sum(L - 1 - l for l in range(L)))
        per_layer = None
        verdict = {"evaluations": out.evaluations, "rounds": out.rounds,
                   "completeness_gap_max": round(float(np.max(out.completeness_gap)), 4)}
    counter.close()
    # the counter's unit is the longest sequence it saw; count in layer-tokens, then per prompt length
    mean_T = float(np.mean(Ts))
    return {"model": name, "chapter": chapter, "L": L, "N": len(Ts), "tokens": Ts, "seconds": seconds,
            "layer_passes": counter.tokens / mean_T, "floor_layer_passes": floor / mean_T,
            "per_layer_path_layer_passes": None if per_layer is None else per_layer / mean_T,
            "lens_projections": L * sum(Ts) if chapter == "03" else None,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "facts": {k: v for k, v in verdict.items() if isinstance(v, (int, float, str, type(None)))}, **extra}


def _batch_facts(lm, encs, positions, batch, method) -> dict:
    """Chapter 2's batched path on the encoded prompts ``encs``: the rows per forward (``batch``, or the one the
    memory budget picks) and the bytes above the weights the cost model counts for it on the longest prompt."""
    if method != "batched":
        return {"method": method}
    chosen = batch or fe.planned_batch(lm, encs, positions, "layer", "future", False, budget_bytes(lm, None), False)
    i = max(range(len(encs)), key=lambda k: encs[k].n_tokens)
    planned = fe.cost(shape_of(lm), [encs[i].n_tokens], dtype_of(lm), False, False, positions=[positions[i]],
                      batch=chosen).peak
    return {"method": method, "batch": chosen, "picked": batch is None, "planned_gb": planned / 1e9}


def _cached(models, report: dict):
    """The models of ``models`` that can be benched from the cache, one by one; each other one gets
    ``{"skipped": sentence}`` in ``report``, printed."""
    for name in models:
        why = unavailable(name)
        if why:
            print(f"[{name}] skipped: {why}", flush=True)
            report[name] = {"skipped": why}
        else:
            yield name


def batch_rows(models=REAL_MODELS, threads: int = 2, batches=BATCHES) -> dict:
    """Chapter 2's call on each cached real model at each of ``batches`` rows per forward, each in a fresh process,
    printed as they finish (``{"skipped": sentence}`` for a model that is not cached)."""
    report = {}
    for name in _cached(models, report):
        report[name] = []
        for b in batches:
            r = isolated(_measure, name, "02", threads, b)
            report[name].append(r)
            if "batch" in r:
                print(f"[{name}] chapter 02, batch {r['batch']:>3}{' (picked)' if r['picked'] else '':9}: "
                      f"{r['seconds']:7.1f}s | planned {r['planned_gb']:.2f} GB above the weights | peak RSS "
                      f"{r['peak_rss_mb']:.0f} MB", flush=True)
            else:
                print(f"[{name}] chapter 02 takes the {r['method']} path here, not the batched one: no batch to "
                      "choose", flush=True)
                break
    return report


def real_rows(models=REAL_MODELS, threads: int = 2, chapters=("02", "03", "05")) -> dict:
    """Each cached real model's rows (``{"skipped": sentence}`` for one that is not), printed as they finish."""
    report = {}
    for name in _cached(models, report):
        report[name] = {}
        for ch in chapters:
            r = isolated(_measure, name, ch, threads)
            report[name][ch] = r
            print_row(r)
    return report


def print_row(r: dict) -> None:
    before = r["per_layer_path_layer_passes"]
    was = "" if before is None else f", per-layer path {before:.0f}"
    print(f"[{r['model']}] chapter {r['chapter']} N={r['N']}: {r['seconds']:7.1f}s | {r['layer_passes']:8.1f} "
          f"layer-passes, floor {r['floor_layer_passes']:.1f} ({r['layer_passes'] / r['floor_layer_passes']:.2f}x "
          f"it{was}) | peak RSS {r['peak_rss_mb']:.0f} MB", flush=True)
