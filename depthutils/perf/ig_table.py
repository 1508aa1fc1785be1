"""Integrated gradients' rule table for ``python -m depthutils bench``: P1's left Riemann sum (K = 256),
Gauss–Legendre with K = 8, 16, 32, 64 nodes and the adaptive rule at its defaults, on a few prompts.

Each rule is timed (one warm-up, then ``repeats`` runs; median, fastest and slowest, all prompts in one run)
and scored against a converged reference per prompt (the adaptive rule at ``tol = 1e-9`` with up to 1024
evaluations per layer and 40 rounds; its own error bound is reported, and its distance from Gauss–Legendre
with 256 nodes) by
:func:`~depthutils.measures.ig_rules.rule_error`, the largest over the prompts. The goal:
the adaptive rule at most Riemann-256's error, with at most a quarter of its evaluations, at least 2× faster,
idle and beside a CPU-bound job (:data:`LOADED`: timed again with :func:`depthutils.perf.harness.neighbour` running).
"""
from __future__ import annotations

import contextlib
import statistics

import numpy as np
import torch

from depthutils.core.prompts import P1_ARITHMETIC
from depthutils.measures.ig_rules import rule_error
from depthutils.measures.integrated_gradients import integrated_gradients
from depthutils.perf.harness import neighbour, setup_model, timed

IG_RULES = (("riemann", 256), ("gauss", 8), ("gauss", 16), ("gauss", 32), ("gauss", 64), ("adaptive", None))
#: chapter 5's two prompts and two more of the embedded models' tasks (the models know these answers)
IG_PROMPTS = (P1_ARITHMETIC, ("The spouse of the performer of Crystal Wings is", " Freya Vance"),
              ("3 + 8 + 6 + 2 = ", "19"), ("The birth city of Felix Sorel is", " Aldmoor"))
REFERENCE = dict(tol=1e-9, budget=1024, max_rounds=40)
#: the rules timed a second time beside a CPU-bound job (rows ``"<rule> loaded"``)
LOADED = (("riemann", 256), ("adaptive", None))


def _run(handle, rule, k, prompts, **kw):
    steps = {} if k is None else {"steps": k}
    return [integrated_gradients(handle, p, a, rule=rule, progress_bar=False, **steps, **kw) for p, a in prompts]


def ig_rules_measured(model_spec, repeats, threads, device="cpu", dtype="float32", prompts=IG_PROMPTS):
    """Time every rule of :data:`IG_RULES` and score it against the converged reference."""
    torch.set_num_threads(threads)
    handle, _ = setup_model(model_spec, device, dtype)
    refs = _run(handle, "adaptive", None, prompts, **REFERENCE)
    check = _run(handle, "gauss", 256, prompts)
    L = handle.n_layers
    rows = {"reference": {"vs_gauss_256": max(rule_error(c, r) for c, r in zip(check, refs)),
                          "bound": max(r.facts()["max_error"] for r in refs),
                          "evaluations_per_layer": float(np.mean([r.evaluations / L for r in refs])),
                          "stopped": [r.meta["params"]["stopped"] for r in refs]}}
    runs = [(rule, k, False) for rule, k in IG_RULES] + [(rule, k, True) for rule, k in LOADED]
    for rule, k, loaded in runs:
        with neighbour() if loaded else contextlib.nullcontext():
            times, res = timed(handle, lambda: _run(handle, rule, k, prompts), repeats)  # noqa: B023
        errors = [rule_error(r, ref) for r, ref in zip(res, refs)]
        rows[(f"{rule}-{k}" if k else rule) + (" loaded" if loaded else "")] = {
            "rule": rule, "K": k, "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "error": max(errors), "errors": errors, "evaluations_per_layer": float(np.mean([r.evaluations / L for r in res])),
            "rounds": max(r.rounds for r in res),
            "estimated_error": max(r.facts()["max_error"] or float("nan") for r in res)}
    return rows


def ig_rule_table(rows: dict) -> dict:
    """Adds each rule's speed-up over Riemann-256, picks the smallest Gauss K at no larger error, and says
    whether the adaptive rule meets the goal (the module docstring)."""
    rules = {k: v for k, v in rows.items() if k != "reference"}
    for name, r in rules.items():  # a loaded row against the loaded Riemann-256
        ref = rows["riemann-256 loaded" if name.endswith(" loaded") and "riemann-256 loaded" in rows else "riemann-256"]
        r["speedup_vs_riemann_256"] = ref["median_s"] / r["median_s"]
        r["speedup_spread"] = [ref["min_s"] / r["max_s"], ref["max_s"] / r["min_s"]] if "min_s" in r else None
    ref = rows["riemann-256"]
    ok = [r for r in rules.values() if r["rule"] == "gauss" and r["error"] <= ref["error"]]
    best = min(ok, key=lambda r: r["K"]) if ok else None
    table = {"rules": rules, "reference": rows.get("reference"),
             "smallest_gauss_at_riemann_error": None if best is None else f"gauss-{best['K']}"}
    if "adaptive" in rules:
        a = rules["adaptive"]
        table["adaptive_goal"] = {
            "error_at_most_riemann_256": a["error"] <= ref["error"],
            "quarter_of_evaluations": a["evaluations_per_layer"] <= ref["evaluations_per_layer"] / 4,
            "twice_as_fast": a["speedup_vs_riemann_256"] >= 2}
        if "adaptive loaded" in rules:
            table["adaptive_goal"]["twice_as_fast_loaded"] = rules["adaptive loaded"]["speedup_vs_riemann_256"] >= 2
    return table


def print_rules(spec, table):
    ref = table.get("reference")
    if ref:
        print(f"[{spec}] IG reference: adaptive, tol 1e-9, {ref['evaluations_per_layer']:.0f} evaluations per layer, "
              f"its own error bound {ref['bound']:.1e}; vs gauss-256 {ref['vs_gauss_256']:.1e}", flush=True)
    for name, r in table["rules"].items():
        lo, hi = r.get("speedup_spread") or (float("nan"), float("nan"))
        print(f"[{spec}] IG {name:<12} {r['median_s']:7.2f}s [{r['min_s']:.2f}–{r['max_s']:.2f}]  "
              f"{r['speedup_vs_riemann_256']:5.2f}x [{lo:.2f}–{hi:.2f}] vs riemann-256  "
              f"{r['evaluations_per_layer']:6.1f} evals/layer  error {r['error']:.2e} (estimated {r['estimated_error']:.1e})",
              flush=True)
    print(f"[{spec}] IG smallest Gauss K at no larger error than riemann-256: "
          f"{table['smallest_gauss_at_riemann_error']}", flush=True)
    if "adaptive_goal" in table:
        g = table["adaptive_goal"]
        print(f"[{spec}] IG adaptive goal: error ≤ riemann-256 {g['error_at_most_riemann_256']}, "
              f"≤ ¼ of its evaluations {g['quarter_of_evaluations']}, ≥ 2× faster {g['twice_as_fast']}"
              + (f", ≥ 2× faster beside a CPU-bound job {g['twice_as_fast_loaded']}" if "twice_as_fast_loaded" in g else ""),
              flush=True)
