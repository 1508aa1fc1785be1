"""``python -m depthutils bench``: the project's algorithms against the reference algorithm.

The reference is a faithful re-implementation of how P1's code and the nnsight
notebooks run: every intervention is its own batch-1 nnsight trace (future
effects ``N·(1+4L)`` passes, erasure ``(L+1)·T``, integrated gradients
``L·K/16`` forward+backward passes at batch 16). Both run on the same model,
prompts and positions; each measurement × algorithm runs in a fresh process so
that its peak memory (max RSS) is its own.

Counted per run: forward passes (calls of the last decoder layer), layer-passes
(one layer over one whole sequence: a layer call on B rows of T' of the T
positions counts B·T'/T), and the floor: the layer-passes the measurement needs
at the least (spec §2, §4, §5).

Integrated gradients also gets a rule table (:mod:`depthutils.perf.ig_table`): P1's
left Riemann sum, Gauss–Legendre with K = 8, 16, 32, 64 nodes and the adaptive
rule, each timed and scored against a converged reference by
``max |A − A_conv| / max |A_conv|``, on the trained default model and ``ladder-16``
(``ig_models``). ``only="ig-rules"`` runs that table alone.

The logit lens is timed against its floor, the unembedding's products alone, at Gemma 3 270M's shape
(:mod:`depthutils.perf.lens_floor`); ``only="lens"`` runs that row alone.

The trainer's step (objective A) is timed against every position's logits at each of the depth-necessity sweep's
layer counts (:mod:`depthutils.perf.train_step`); ``only="train"`` runs that table alone.

``--device cuda --dtype bfloat16`` runs everything on a GPU where one is
available (the fast stack path is float32-only; in bf16 the measurements take
their batched path).
"""
from __future__ import annotations

import json
import resource
import statistics
from pathlib import Path

import numpy as np
import torch

from depthutils.core.prompts import P1_ARITHMETIC
from depthutils.models.architectures import check_residual
from depthutils.perf.counting import Counter, floors
from depthutils.perf.harness import isolated, setup_model, timed
from depthutils.perf.ig_table import ig_rule_table, ig_rules_measured, print_rules
from depthutils.perf.lens_floor import GEMMA_LENS, lens_floor, print_lens_floor
from depthutils.perf.real_table import REAL_MODELS, batch_rows, real_rows
from depthutils.perf.train_step import print_train_step, train_step

# ------------------------------------------------------------------ reference algorithms (batch-1 traces)

def ref_future_effects(model, prompts, positions):
    """P1's algorithm: per prompt one clean trace, then one batch-1 trace per (t, s); part = layer."""
    from depthutils.core.prompts import encode

    L = model.n_layers
    D, O = np.full((L, L), -np.inf), np.full(L, -np.inf)
    for p, ts in zip(prompts, positions):
        ids = encode(model.tokenizer, p).input_ids
        T = ids.shape[1]
        clean = []
        with torch.no_grad(), model.trace(ids):
            for j in range(L):
                h = check_residual(model.layers_input(j), 1, T)
                clean.append((check_residual(model.layers_output(j), 1, T) - h).save())
            p0 = model.logits().float().softmax(-1).save()
        for t in ts:
            for s in range(L):
                deltas = []
                with torch.no_grad(), model.trace(ids):
                    for j in range(L):
                        h = model.layers_input(j)
                        out = model.layers_output(j)
                        if j == s:
                            out = out.clone()
                            out[:, 1:t] = h[:, 1:t]
                            model.set_layers_output(j, out)
                        deltas.append((out - h).save())
                    p1 = model.logits().float().softmax(-1).save()
                for j in range(s + 1, L):
                    r = ((deltas[j] - clean[j]).norm(dim=-1) / clean[j].norm(dim=-1))[0, t:].max()
                    D[s, j] = max(D[s, j], float(r))
                O[s] = max(O[s], float((p1 - p0).norm(dim=-1)[0, t:].max()))
    D[~np.triu(np.ones((L, L), bool), 1)] = np.nan
    return {"layer_effect": D, "output_effect": O}


def ref_residual_erasure(model, prompt, baseline):
    """One batch-1 trace per (l, t)."""
    from depthutils.core.prompts import encode

    enc = encode(model.tokenizer, prompt, need_answer=True)
    ids, T, L = enc.input_ids, enc.n_tokens, model.n_layers
    pred = torch.tensor(enc.predict_positions)
    base = torch.as_tensor(baseline).to(model.device)
    with torch.no_grad(), model.trace(ids):
        p0 = model.logits()[:, pred].float().softmax(-1).save()
    E = np.zeros((L + 1, T))
    for l in range(L + 1):
        for t in range(1, T):
            with torch.no_grad(), model.trace(ids):
                x = (model.layers_input(l) if l < L else model.layers_output(L - 1)).clone()
                x[:, t] = base[l].to(x.dtype)
                model.set_layers_input(l, x) if l < L else model.set_layers_output(L - 1, x)
                p1 = model.logits()[:, pred].float().softmax(-1).save()
            E[l, t] = float((p1 - p0).norm(dim=-1).max())
    return {"effect": E}


def ref_integrated_gradients(model, prompt, steps, batch_size=16):
    """Per layer, K/batch_size traces of the whole model with a backward pass each."""
    from depthutils.core.prompts import encode

    enc = encode(model.tokenizer, prompt, need_answer=True)
    ids, T, L = enc.input_ids, enc.n_tokens, model.n_layers
    pred, gold = torch.tensor(enc.predict_positions), torch.tensor(enc.answer_ids)
    A = np.zeros((L, T))
    for l in range(L):
        for start in range(0, steps, batch_size):
            ks = torch.arange(start, min(start + batch_size, steps))
            B = len(ks)
            with model.trace(ids.expand(B, T)):
                out = model.layers_output(l)
                x = out[0:1].detach()
                b = x.mean(dim=1, keepdim=True)
                alpha = (ks.float() / steps).view(B, 1, 1).to(x.device, x.dtype)
                z = (b + alpha * (x - b)).detach().requires_grad_(True)
                model.set_layers_output(l, z)
                probs = model.logits()[:, pred].float().softmax(-1)
                f = probs[:, torch.arange(len(gold)), gold].sum(-1)
                with f.sum().backward():
                    g = z.grad.save()
                c = (g * (x - b)).sum(-1).sum(0).save()
            A[l] += c.double().cpu().numpy() / steps
    return {"attribution": A}


# ------------------------------------------------------------------ one run, in its own process

def _measure(model_spec, measurement, algorithm, repeats, steps, threads, device="cpu", dtype="float32"):
    import depthutils as du
    from depthutils.core.prompts import encode
    from depthutils.measures.future_effects import sample_positions

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    handle, gsm = setup_model(model_spec, device, dtype)
    arith = du.Prompt.from_parts(*P1_ARITHMETIC, "bench")
    L = handle.n_layers
    baseline = np.zeros((L + 1, handle.config.hidden_size), dtype=np.float32) + 0.01
    positions = [sample_positions(encode(handle.tokenizer, p).n_tokens, 123) for p in gsm]
    if measurement == "future_effects":
        run = (lambda: ref_future_effects(handle, gsm, positions)) if algorithm == "reference" else \
            (lambda: du.future_effects(handle, gsm, positions=positions[0], progress_bar=False))
    elif measurement == "residual_erasure":
        run = (lambda: ref_residual_erasure(handle, arith, baseline)) if algorithm == "reference" else \
            (lambda: du.residual_erasure(handle, arith, baseline=baseline, progress_bar=False))
    else:
        run = (lambda: ref_integrated_gradients(handle, arith, steps)) if algorithm == "reference" else \
            (lambda: du.integrated_gradients(handle, arith, steps=steps, progress_bar=False))
    counter = Counter(handle)
    times, out = timed(handle, run, repeats, before=counter.reset)
    counter.close()
    arrays = out if isinstance(out, dict) else out.arrays()
    T_fe = [encode(handle.tokenizer, p).n_tokens for p in gsm]
    return {"times": times, "passes": counter.passes, "layer_passes": counter.layer_passes,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "arrays": {k: np.asarray(v).tolist() for k, v in arrays.items() if k != "tokens"},
               "L": L, "T_fe": T_fe, "n_t": [len(p) for p in positions], "positions": positions,
               "T_er": max(encode(handle.tokenizer, arith, need_answer=True).predict_positions) + 1}


def _max_diff(a: dict, b: dict) -> float:
    diffs = []
    for k in a:
        if k in b:
            x, y = np.asarray(a[k], float), np.asarray(b[k], float)
            n = min(x.shape[-1], y.shape[-1])
            d = np.abs(x[..., :n] - y[..., :n])
            diffs.append(float(np.nanmax(d)) if np.isfinite(d).any() else 0.0)
    return max(diffs)


def logit_lens_memory(vocab: int = 32768, depths=(4, 16), tokens: int = 256) -> dict:
    """Peak RSS of logit_lens on random Llamas of two depths with a large vocabulary."""
    return {L: isolated(_lens_memory, vocab, L, tokens) for L in depths}


def _lens_memory(vocab, L, tokens):
    import depthutils as du
    from depthutils.models.random_init import random_model

    path = random_model("llama", vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=L,
                        num_attention_heads=4, max_position_embeddings=1024)
    handle = du.load_model(str(path), device="cpu", dtype="float32")
    prompt = du.Prompt.from_parts("5 + 7 + " * (tokens // 4), "1")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    du.logit_lens(handle, [prompt], progress_bar=False)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    T = du.core.prompts.encode(handle.tokenizer, prompt).n_tokens
    return {"peak_rss_mb": after, "growth_mb": after - before, "T": T,
            "L_x_T_x_V_fp32_mb": L * T * vocab * 4 / 2**20}


def bench(models=("default", "b"), repeats: int = 5, steps: int = 256, json_path: str | None = None,
          threads: int | None = None, device: str = "cpu", dtype: str = "float32",
          ig_models=("default", "ladder-16"), only: str = "all", real=REAL_MODELS) -> dict:
    """Run every measurement with both algorithms on every model; print a table, optionally write JSON.
    ``real``: the cached real models whose chapter 2, 3 and 5 headline calls get a row
    (:mod:`depthutils.perf.real_table`); ``only="real"`` runs those rows alone, ``only="batch"`` chapter 2's call
    on them at several batches (:func:`~depthutils.perf.real_table.batch_rows`).

    Each row reports the median of ``repeats`` timed runs and their spread (fastest, slowest); the
    speed-up's spread pairs the reference's slowest with ours' fastest and the other way round.
    """
    import os

    threads = threads or os.cpu_count() or 1
    report = {"models": {}, "logit_lens_memory": None, "torch_threads": threads, "repeats": repeats, "steps": steps,
              "device": device, "dtype": dtype,
              "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") and torch.cuda.is_available() else None}
    for spec in models if only == "all" else ():
        rows = {}
        for meas in ("future_effects", "residual_erasure", "integrated_gradients"):
            ref = isolated(_measure, spec, meas, "reference", repeats, steps, threads, device, dtype)
            ours = isolated(_measure, spec, meas, "ours", repeats, steps, threads, device, dtype)
            floor = floors(ref["L"], ref["T_fe"], ref["positions"], ref["T_er"], steps)[meas]
            rows[meas] = {
                alg: {"median_s": statistics.median(r["times"]), "min_s": min(r["times"]), "max_s": max(r["times"]),
                      "passes": r["passes"], "layer_passes": round(r["layer_passes"], 1),
                      "peak_rss_mb": round(r["peak_rss_mb"], 1)}
                for alg, r in (("reference", ref), ("ours", ours))}
            rows[meas]["floor_layer_passes"] = round(floor, 1)
            rows[meas]["speedup"] = rows[meas]["reference"]["median_s"] / rows[meas]["ours"]["median_s"]
            rows[meas]["speedup_spread"] = [min(ref["times"]) / max(ours["times"]), max(ref["times"]) / min(ours["times"])]
            rows[meas]["work_ratio_floor"] = ref["layer_passes"] / floor
            rows[meas]["ours_over_floor"] = ours["layer_passes"] / floor
            rows[meas]["max_abs_diff"] = _max_diff(ref["arrays"], ours["arrays"])
            _print_row(spec, meas, rows[meas])
        report["models"][spec] = rows
    if only in ("all", "real") and real:
        report["real_models"] = real_rows(real, threads)
    if only == "batch" and real:
        report["batch"] = batch_rows(real, threads)
    for spec in ig_models if only in ("all", "ig-rules") else ():
        table = ig_rule_table(isolated(ig_rules_measured, spec, repeats, threads, device, dtype))
        print_rules(spec, table)
        report["models"].setdefault(spec, {})["ig_rules"] = table
    if only in ("all", "train"):
        report["train_step"] = isolated(train_step)
        print_train_step(report["train_step"])
    if only in ("all", "lens"):
        report["lens_floor"] = isolated(lens_floor, *GEMMA_LENS.values(), "bfloat16", repeats, threads)
        print_lens_floor(report["lens_floor"])
    if only == "all":
        report["logit_lens_memory"] = logit_lens_memory()
        for L, r in report["logit_lens_memory"].items():
            print(f"logit lens, V=32768, T={r['T']}, L={L:>2}: peak RSS {r['peak_rss_mb']:.0f} MB "
                  f"(an L×T×V fp32 tensor would be {r['L_x_T_x_V_fp32_mb']:.0f} MB)")
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=1))
    return report


def _print_row(spec, meas, r):
    ref, ours = r["reference"], r["ours"]
    lo, hi = r["speedup_spread"]
    print(f"[{spec}] {meas:<22} ref {ref['median_s']:7.2f}s {ref['passes']:>5} passes {ref['layer_passes']:>8} lp | "
          f"ours {ours['median_s']:6.2f}s {ours['passes']:>4} passes {ours['layer_passes']:>7} lp | "
          f"floor {r['floor_layer_passes']:>8} lp (ours {r['ours_over_floor']:.2f}x it) | speedup {r['speedup']:5.2f}x "
          f"[{lo:.2f}–{hi:.2f}] (ref/floor {r['work_ratio_floor']:.2f}x) | max|Δ| {r['max_abs_diff']:.1e}", flush=True)
