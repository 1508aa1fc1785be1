"""Which quadrature rule to trust for integrated gradients, on this run: errors, costs and the path itself.

* :func:`rule_error` and :func:`rule_comparison`: how far a rule's attribution is from a converged
  reference (chapter 5's "P1's rule against Gauss–Legendre").
* :func:`rule_table` and :func:`rule_figure`: every rule's cost (evaluations per layer, batched passes,
  seconds), its error against the reference and its own error estimate, per layer.
* :func:`path_profile` and :func:`path_steps`: the integrand of one layer along ``α``, where its steps are
  and how many Gauss–Legendre nodes land on them (chapter 5's exercise on why Gauss misses them).
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError
from depthutils.core.numbers import rounded, significant
from depthutils.core.prompts import as_prompt
from depthutils.measures import quadrature as quad
from depthutils.measures.ig_path import Integrand
from depthutils.measures.integrated_gradients import IGResult
from depthutils.models import stack

#: the figures' width in inches: the book's text column (``depthutils.book.plotstyle.COLUMN_IN``, which a
#: measurement cannot import: the book's layer lies above it); their text keeps matplotlib's sizes, 10 pt and up
FIGURE_WIDTH = 6.4


def rule_error(result: IGResult, reference: IGResult) -> float:
    """``max |A − A_ref| / max |A_ref|``: how far an attribution is from a converged reference
    (e.g. Gauss–Legendre with many nodes), BOS column excluded as in the figure."""
    a, ref = result.attribution[:, 1:], reference.attribution[:, 1:]
    return float(np.abs(a - ref).max() / np.abs(ref).max())


def _name(r: IGResult) -> str:
    p = r.meta["params"]
    if p["rule"] == "adaptive":
        return f"adaptive ({r.evaluations / r.attribution.shape[0]:.0f} evaluations per layer)"
    return {"riemann": f"Riemann with {p['steps']} points", "gauss": f"Gauss–Legendre with {p['steps']} nodes"}[p["rule"]]


def rule_comparison(riemann: IGResult, gauss: IGResult, reference: IGResult) -> dict:
    """How far P1's Riemann sum and a Gauss–Legendre rule each are from a converged ``reference`` on this
    run (:func:`rule_error`), which of the two is closer, and that said in one sentence."""
    err = {"riemann": round(rule_error(riemann, reference), 4), "gauss": round(rule_error(gauss, reference), 4)}
    closer = "gauss" if err["gauss"] < err["riemann"] else "riemann"
    names = {"riemann": _name(riemann), "gauss": _name(gauss)}
    other = "riemann" if closer == "gauss" else "gauss"
    sentence = (f"Against {_name(reference)}, {names[closer]} is closer (error "
                f"{err[closer]:.4f} of the largest attribution) than {names[other]} ({err[other]:.4f}).")
    return {**err, "riemann_steps": riemann.meta["params"]["steps"], "gauss_steps": gauss.meta["params"]["steps"],
            "closer": names[closer], "farther": names[other], "sentence": sentence}


def rule_table(rules: dict[str, IGResult], reference: IGResult, seconds: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per rule: evaluations per layer, batched passes (NDIF requests when remote), seconds (when
    given), the error against ``reference`` and the rule's own error estimate, both as a share of the
    largest |attribution| (BOS apart), each to two significant digits (:func:`~depthutils.core.numbers.significant`:
    ``0.001``, ``0.31``, ``7.1e-05``, not padded to one number of decimals). Short column names keep the table inside
    the book's text column."""
    rows = []
    for name, r in rules.items():
        L = r.attribution.shape[0]
        rows.append({"rule": name, "evals/layer": rounded(r.evaluations / L), "passes": r.rounds,
                     "seconds": None if seconds is None else round(seconds[name], 1),
                     "error": significant(rule_error(r, reference), 2),
                     "own estimate": significant(r.facts()["max_error"], 2)})
    df = pd.DataFrame(rows).set_index("rule")
    return df if seconds is not None else df.drop(columns="seconds")


def rule_figure(rules: dict[str, IGResult], reference: IGResult):
    """Per layer, each rule's error against ``reference`` (dots) and its own error estimate (line), as a share of
    the largest |attribution|, on a log scale: the error bars of every rule, and whether they hold. Drawn at the
    book's text column's width (:data:`FIGURE_WIDTH`), the key below the axes: a colour per rule, a style per
    error."""
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.4), layout="constrained")
    scale = float(np.abs(reference.attribution[:, 1:]).max())
    layers = np.arange(reference.attribution.shape[0])
    floor = 1e-9
    key = []
    for (name, r), color in zip(rules.items(), plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        true = np.abs(r.attribution - reference.attribution)[:, 1:].max(1) / scale
        est = r.error_bars() / scale
        ax.plot(layers, np.maximum(est, floor), "-", color=color)
        ax.plot(layers, np.maximum(true, floor), "o", color=color, ms=5)
        key.append(Line2D([], [], color=color, marker="o", ms=5, label=name))
    key += [Line2D([], [], color="k", label="its own estimate"),
            Line2D([], [], color="k", marker="o", ms=5, ls="none", label=f"against {_name(reference)}")]
    ax.set_yscale("log")
    ax.set(xlabel="layer l", ylabel="error / max |attribution|")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.legend(handles=key, loc="outside lower center", ncol=2)  # the rules in one column, the styles in the other
    m = reference.meta
    prompt = " ".join(m["params"]["prompt"].split())
    prompt = prompt if len(prompt) <= 36 else prompt[:35] + "…"
    fig.suptitle(f"Integrated gradients: each rule's error per layer\n{prompt!r} → {m['params']['answer']!r} · "
                 f"{m.get('model')}")
    return fig


@dataclass
class Profile:
    """One layer's integrand along the path: ``alpha [K]``, ``f [K]`` (the answer probability at
    ``z(α)``) and ``df [K]`` (``Σ_t g_t(α) = df/dα``, what integrated gradients integrates, summed over
    positions)."""

    layer: int
    alpha: np.ndarray
    f: np.ndarray
    df: np.ndarray


def path_profile(model, prompt, answer: str | None = None, layer: int = 0, points: int = 513, *,
                 max_tokens: int | None = None) -> Profile:
    """The integrand of ``layer`` at ``points`` equally spaced ``α`` in ``[0, 1]`` (one batched pass)."""
    if not 0 <= layer < model.n_layers:
        raise DepthError(f"layer must be in 0 … {model.n_layers - 1}, got {layer}.")
    if points < 3:
        raise DepthError(f"points must be at least 3, got {points}.")
    (p,), (enc,), _ = encode_all(model, [as_prompt(prompt, answer)], need_answer=True, max_tokens=max_tokens)
    path = Integrand(model, enc.input_ids, torch.tensor(enc.predict_positions), torch.tensor(enc.answer_ids),
                     "layer", stack.usable(model), 64, None, False)
    alpha = np.linspace(0, 1, points)
    asks = [alpha if l == layer else np.zeros(0) for l in range(model.n_layers)]
    g, f = path.evaluate(asks)[layer]
    return Profile(layer=layer, alpha=alpha, f=f, df=g.sum(1))


def path_steps(profile: Profile, nodes: int = 16, sharp: float = 5.0) -> dict:
    """Where ``df/dα`` has its steps: every local maximum of ``|df/dα|`` above ``sharp`` times its median
    (a narrow rise of ``f``), with its width at half height and the number of ``nodes``-point Gauss–Legendre
    nodes inside that width; and that said in one sentence, true for any run (no steps is a finding too)."""
    a, d = profile.alpha, np.abs(profile.df)
    med = float(np.median(d)) or 1e-12
    gauss, _ = quad.quadrature("gauss", nodes)
    peaks = []
    for i in range(1, len(a) - 1):
        if d[i] >= d[i - 1] and d[i] > d[i + 1] and d[i] > sharp * med:
            half = d[i] / 2
            lo, hi = i, i
            while lo > 0 and d[lo - 1] > half:
                lo -= 1
            while hi < len(a) - 1 and d[hi + 1] > half:
                hi += 1
            peaks.append({"alpha": round(float(a[i]), 3), "width": round(float(a[hi] - a[lo]), 3),
                          "gauss_nodes_inside": int(((gauss >= a[lo]) & (gauss <= a[hi])).sum())})
    spacing = float(np.diff(gauss).max())
    narrow = [p for p in peaks if p["width"] < spacing]
    if peaks:
        where = ", ".join(f"α ≈ {p['alpha']:.2f} (width {p['width']:.3f}, {p['gauss_nodes_inside']} "
                          f"node{'s' * (p['gauss_nodes_inside'] != 1)})" for p in peaks)
        sentence = (f"Layer {profile.layer}'s integrand has {len(peaks)} step{'s' * (len(peaks) != 1)} "
                    f"(|df/dα| above {sharp:g}× its median): {where}. Gauss–Legendre's {nodes} nodes are up to "
                    f"{spacing:.3f} apart; ")
        if narrow:
            sentence += (f"{len(narrow)} of these steps {'is' if len(narrow) == 1 else 'are'} narrower than that, "
                         f"with {sum(p['gauss_nodes_inside'] for p in narrow)} node(s) on them in all, so the "
                         f"polynomial of degree {2 * nodes - 1} that the rule integrates exactly cannot follow them.")
        else:
            sentence += "every step is wider than that, so the rule's nodes can follow them here."
    else:
        sentence = (f"Layer {profile.layer}'s integrand has no narrow step on this run (|df/dα| never exceeds "
                    f"{sharp:g}× its median at a local maximum): here the path is smooth, and Gauss–Legendre's "
                    f"{nodes} nodes, up to {spacing:.3f} apart, can follow it.")
    return {"steps": peaks, "n_steps": len(peaks), "n_narrow": len(narrow), "max_spacing": round(spacing, 3),
            "sentence": sentence}


def plot_profile(profile: Profile, nodes: int = 16):
    """``f`` and ``df/dα`` along the path of one layer, with Gauss–Legendre's ``nodes`` nodes marked, at the book's
    text column's width (:data:`FIGURE_WIDTH`)."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(FIGURE_WIDTH, 4.6), sharex=True, layout="constrained")
    top.plot(profile.alpha, profile.f, color="C0")
    top.set(ylabel="f(z(α))")
    bottom.plot(profile.alpha, profile.df, color="C1")
    bottom.set(xlabel="α (0: the baseline b, 1: the layer's output x)", ylabel="df/dα = Σ_t g_t(α)")
    for x in quad.quadrature("gauss", nodes)[0]:
        for ax in (top, bottom):
            ax.axvline(x, color="0.5", lw=0.6, ls=":")
    fig.suptitle(f"Layer {profile.layer}'s integrand along the path\n(dotted: Gauss–Legendre's {nodes} nodes)")
    return fig


def prefer_adaptive(riemann: IGResult, adaptive: IGResult, reference: IGResult) -> dict:
    """Whether, on this run, the adaptive rule bought P1's accuracy for less: its error and P1's against
    ``reference``, their evaluations per layer, and one sentence saying what this run found (on its one prompt: no
    advice for another model, whose cost on NDIF also counts requests, one per round of the adaptive rule)."""
    L = riemann.attribution.shape[0]
    e_r, e_a = rule_error(riemann, reference), rule_error(adaptive, reference)
    n_r, n_a = riemann.evaluations / L, adaptive.evaluations / L
    if e_a <= e_r and n_a <= n_r / 2:
        sentence = (f"So on this prompt the adaptive rule was at least as accurate as P1's with {n_a / n_r:.0%} of "
                    "its evaluations.")
    else:
        sentence = ("So on this prompt the adaptive rule did not reach P1's accuracy with half of its evaluations "
                    "or fewer.")
    return {"riemann_error": float(f"{e_r:.2g}"), "adaptive_error": float(f"{e_a:.2g}"),
            "riemann_per_layer": rounded(n_r), "adaptive_per_layer": rounded(n_a), "sentence": sentence}


def seconds(rules: dict[str, IGResult]) -> dict:
    """Each rule's wall time on this run (``{name}_seconds``), to glue apart from the deterministic facts."""
    return {f"{name}_seconds": round(r.seconds, 1) for name, r in rules.items()}
