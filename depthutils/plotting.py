"""One look for every chapter: each figure function takes a result and returns a Figure.

Titles name the model, the data set and n (from the result's metadata);
colour always comes with a colorbar; :func:`save` writes PNG and PDF.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from .results import atomic_write

COLORS = {"attn": "#1f77b4", "mlp": "#ff7f0e", "layer": "#2ca02c"}
LABELS = {"attn": "attention", "mlp": "MLP", "layer": "whole layer"}
plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "axes.grid": True, "grid.alpha": 0.3,
                     "axes.spines.top": False, "axes.spines.right": False, "font.size": 10})


def title(result, what: str) -> str:
    m = result.meta
    name = str(m.get("model", "?"))
    if len(name) > 40:
        name = "…" + name[-39:]
    data = m.get("dataset") or "custom prompts"
    return f"{what}\n{name} · {data} · n={m.get('n', '?')}"


def save(fig, out_dir: str | Path, name: str) -> list[Path]:
    """Write ``name.png`` and ``name.pdf`` into ``out_dir`` (atomically) and return the paths."""
    out = []
    for ext in ("png", "pdf"):
        path = Path(out_dir) / f"{name}.{ext}"
        atomic_write(path, lambda tmp, ext=ext: fig.savefig(tmp, format=ext, bbox_inches="tight"))
        out.append(path)
    return out


def contributions(result):
    """P1 Fig. 2: relative contribution (a) and cosine with the residual (b) per layer."""
    L = len(result.layer_ratio)
    x = np.arange(L)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    for part in ("attn", "mlp", "layer"):
        kw = dict(color=COLORS[part], label=LABELS[part], marker="o", ms=3)
        a.plot(x, getattr(result, f"{part}_ratio"), **kw)
        b.plot(x, getattr(result, f"{part}_cos"), **kw)
    a.set(xlabel="layer", ylabel="‖contribution‖ / ‖residual‖ (log scale)", title="(a) relative contribution",
          yscale="log")
    b.axhline(0, color="k", lw=0.8)
    b.set(xlabel="layer", ylabel="cos(contribution, residual)", title="(b) cosine similarity")
    a.legend()
    fig.suptitle(title(result, "How much does each layer write into the residual stream?"), y=1.06)
    return fig


def _heat(ax, data, fig, cmap, label, vmin=None, vmax=None):
    im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, aspect="auto", vmin=vmin, vmax=vmax,
                   interpolation="nearest")
    fig.colorbar(im, ax=ax, label=label)
    ax.grid(False)
    return im


def future_effects(result):
    """P1 Fig. 3: effect of skipping layer s on later layer j (heatmap) and on the output."""
    D, O = result.layer_effect, result.output_effect
    L = len(O)
    p = result.meta.get("params", {})
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1.25, 1]})
    _heat(a, D, fig, "viridis", "max relative change of Δ_j", vmin=0)
    a.set(xlabel="later layer j", ylabel="skipped layer s", title="(a) effect on later layers")
    b.bar(np.arange(L), O, color=COLORS.get(p.get("part", "layer"), "gray"))
    b.set(xlabel="skipped layer s", ylabel="max ‖p − p′‖₂", title="(b) effect on the output distribution")
    variant = f"skip {LABELS.get(p.get('part'), p.get('part'))}, {p.get('mode', 'future')} tokens"
    if p.get("local"):
        variant += ", direct paths only"
    fig.suptitle(title(result, f"What breaks downstream when a layer is skipped? ({variant})"), y=1.06)
    return fig


def logit_lens(result):
    """P1 Fig. 4: KL(q_l ‖ q_L) and top-k overlap of the logit lens per layer."""
    L = len(result.kl)
    x = np.arange(L)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    a.plot(x, result.kl, marker="o", ms=3, color="#9467bd")
    a.set(xlabel="layer (output of)", ylabel="KL(q_l ‖ q_L)  [nats]", title="(a) KL to the final distribution")
    b.plot(x, result.overlap, marker="o", ms=3, color="#8c564b")
    b.set(xlabel="layer (output of)", ylabel=f"top-{result.k} overlap", ylim=(-0.03, 1.03),
          title=f"(b) overlap of the top-{result.k} tokens")
    fig.suptitle(title(result, "When does the residual stream already hold the final prediction?"), y=1.06)
    return fig


def _token_axis(ax, tokens):
    labels = [t.replace("Ġ", "·").replace("Ċ", "\\n") for t in tokens]
    ax.set_xticks(np.arange(len(labels)))
    ax.set_xticklabels(labels, rotation=90, fontsize=8)


def _token_map(result, matrix, *, cmap, label, ylabel, what, vmin, vmax):
    """A layer × token heatmap with the prompt's tokens on the x axis."""
    fig, ax = plt.subplots(figsize=(max(6, 0.42 * matrix.shape[1] + 2), 4))
    _heat(ax, matrix, fig, cmap, label, vmin=vmin, vmax=vmax)
    ax.set(ylabel=ylabel, xlabel="position")
    _token_axis(ax, result.tokens)
    m = result.meta.get("params", {})
    fig.suptitle(f"{what}\n{m.get('prompt', '')!r} → {m.get('answer', '')!r} · {result.meta.get('model')}", y=1.02)
    return fig


def residual_erasure(result):
    """P1 Fig. 6b: effect of erasing h_l[t] on the answer distribution, layer × token."""
    return _token_map(result, result.effect, cmap="magma", label="max ‖p − p′‖₂ over answer positions",
                      ylabel="residual h_l (layer l)", what="Where is the answer computed? Erasing one residual vector",
                      vmin=0, vmax=None)


def integrated_gradients(result):
    """P1 Fig. 6a: attribution per layer × token; diverging colours, BOS excluded from the scale."""
    A = result.attribution
    lim = float(np.abs(A[:, 1:]).max()) or 1.0
    steps = result.meta.get("params", {}).get("steps")
    return _token_map(result, A, cmap="RdBu_r", label="attribution to the answer probability",
                      ylabel="layer output (layer l)", vmin=-lim, vmax=lim,
                      what=f"Integrated gradients, {steps} steps (BOS column outside the colour scale)")


# ------------------------------------------------------------------ chapter 6 (P2)
METRIC_LABELS = {"cos": "mean cosine c̄_l", "kl": "KL(q_l ‖ q_L) / max", "overlap": "top-5 overlap"}


def effective_depth_curves(study):
    """The per-layer curves behind the effective depths: one row per task, one column per metric."""
    fig, axes = plt.subplots(len(study.tasks), 3, figsize=(12, 2.3 * len(study.tasks)), squeeze=False,
                             sharex=True)
    for i, task in enumerate(study.tasks):
        for model in study.models:
            r = study.results[(model, task)]
            if r is None:  # no prompt of this task fits the model's context
                continue
            x = (np.arange(r.n_layers) + 1) / r.n_layers
            kl = r.kl / r.kl.max() if r.kl.max() > 0 else r.kl
            for ax, y, metric in zip(axes[i], (r.mean_cos, kl, r.overlap), ("cos", "kl", "overlap")):
                line, = ax.plot(x, y, marker="o", ms=2.5, label=model)
                ed = r.ed(metric)
                if ed is not None:
                    ax.axvline((ed + 1) / r.n_layers, color=line.get_color(), ls=":", lw=1)
        for ax, metric in zip(axes[i], ("cos", "kl", "overlap")):
            ax.set_ylabel(f"{task}\n{METRIC_LABELS[metric]}", fontsize=8)
        axes[i][0].axhline(0, color="k", lw=0.7)
        axes[i][2].axhline(0.3, color="k", lw=0.7, ls="--")
    for ax in axes[-1]:
        ax.set_xlabel("relative depth (l + 1) / L")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Per-layer curves of P2's three metrics (dotted: each model's effective depth)", y=1.0)
    fig.tight_layout()
    return fig


def ratio_vs_depth(study, models):
    """P2's scale question: effective-depth ratio against the number of layers, per metric and task."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharey=True)
    depths = [study.n_layers(m) for m in models]
    for ax, metric in zip(axes, ("cos", "kl", "overlap")):
        for task in study.tasks:
            ratios = [study.cell(m, task, metric)[1] for m in models]
            ax.plot(depths, [np.nan if r is None else r for r in ratios], marker="o", label=task)
        ax.set(xlabel="number of layers L", title=f"ED from {metric}", xticks=depths, ylim=(0, 1.05))
    axes[0].set_ylabel("effective-depth ratio (ED + 1) / L")
    axes[-1].legend(fontsize=8)
    fig.suptitle("Does effective depth keep up with total depth? (missing points: undefined)", y=1.03)
    return fig


def base_vs_cot(study, base: str, cot: str):
    """P2's training question: effective-depth ratio of a base model and its CoT fine-tune."""
    labels = [f"{m}\n{t}" for m in ("cos", "kl", "overlap") for t in study.tasks]
    vals = {name: [study.cell(name, t, m)[1] for m in ("cos", "kl", "overlap") for t in study.tasks]
            for name in (base, cot)}
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(labels)), 3.6))
    for off, name in ((-0.2, base), (0.2, cot)):
        ax.bar(x + off, [np.nan if v is None else v for v in vals[name]], width=0.4, label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set(ylabel="effective-depth ratio", ylim=(0, 1.05), title=f"Base vs chain-of-thought: {base} vs {cot}")
    ax.legend()
    return fig


# ------------------------------------------------------------------ chapter 7 (P1 §6)
def depth_score(result):
    """Depth score against difficulty, one line per task family (each prompt a dot), accuracy beside it."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    L = result.n_layers
    rng = np.random.default_rng(0)
    for i, task in enumerate(dict.fromkeys(r["task"] for r in result.rows)):
        rows = [r for r in result.rows if r["task"] == task]
        lv = np.array([r["level"] for r in rows], float)
        color = f"C{i}"
        a.plot(lv, [np.nan if r["norm_score"] is None else r["norm_score"] for r in rows], marker="o",
               color=color, label=f"{task} (D maxed over prompts)")
        mask = result.prompt_tasks == task
        x = result.prompt_levels[mask].astype(float) + rng.uniform(-0.12, 0.12, mask.sum())
        a.scatter(x, result.prompt_scores[mask] / (L - 1), s=6, color=color, alpha=0.35)
        b.plot(lv, [np.nan if r["accuracy"] is None else 100 * r["accuracy"] for r in rows], marker="o",
               color=color, label=task)
    a.set(xlabel="difficulty level (operands, hops or MATH level)", ylabel="depth score / (L − 1)",
          title="(a) centre of mass of the future effects", ylim=(0, 1))
    b.set(xlabel="difficulty level", ylabel="greedy accuracy (%)", title="(b) does the model solve them?",
          ylim=(-5, 105))
    a.legend(fontsize=8)
    b.legend(fontsize=8)
    fig.suptitle(title(result, "Does a harder problem use more depth? (dots: single prompts)"), y=1.06)
    return fig


# ------------------------------------------------------------------ chapter 8 (P1 §7)
def mapping(results):
    """Held-out error of the affine map from each source layer to each target layer, with the
    relative-depth diagonal (dashed) and the best match of each source layer (dots)."""
    fig, axes = plt.subplots(1, len(results) + 1, figsize=(5 * len(results) + 4.5, 4), squeeze=False)
    axes = axes[0]
    for ax, r in zip(axes, results):
        Ls, Lt = r.shape
        _heat(ax, r.error, fig, "viridis_r", "held-out ‖ŷ − y‖ / ‖y‖")
        ax.plot((np.arange(Ls) + 1) / Ls * Lt - 1, np.arange(Ls), "w--", lw=1.5, label="same relative depth")
        ax.plot(r.best, np.arange(Ls), "o", color="red", ms=5, label="best target layer")
        ax.set_yticks(range(Ls))
        ax.set_xticks(range(0, Lt, max(1, Lt // 8)))
        ax.set(xlabel=f"target layer of {r.meta['params']['target']}",
               ylabel=f"source layer of {r.meta['params']['source']}",
               title=f"{r.meta['params']['source']} → {r.meta['params']['target']}")
        ax.legend(fontsize=7, loc="lower right")
    ax = axes[-1]
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="same relative depth")
    for r in results:
        src, tgt = r.relative()
        ax.plot(src, tgt, marker="o", label=f"{r.meta['params']['source']} → {r.meta['params']['target']}")
    ax.set(xlabel="relative depth of the source layer (s+1)/L", ylabel="relative depth of its best target",
           title="best-match curve", xlim=(0, 1.05), ylim=(0, 1.05))
    ax.legend(fontsize=8)
    fig.suptitle("Do deeper models stretch the same computation? Linear maps between residual streams", y=1.03)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ chapter 9 (P1's outlook)
def depth_use(result):
    """Stacked against shared layers: each model's future-effect matrix (top), then the logit lens
    and the depth score by level for all of them (bottom)."""
    models = result.models
    fig = plt.figure(figsize=(5.2 * max(2, len(models)), 8))
    grid = fig.add_gridspec(2, max(2, len(models)))
    vmax = max(np.nanmax(result.future[m].layer_effect) for m in models)
    for i, m in enumerate(models):
        ax = fig.add_subplot(grid[0, i])
        _heat(ax, result.future[m].layer_effect, fig, "magma", "max ‖Δ_j − Δ′_j‖ / ‖Δ_j‖", vmin=0, vmax=vmax)
        L = result.future[m].layer_effect.shape[0]
        ax.set(xlabel="later layer j", ylabel="skipped layer s", title=f"future effects · {m}",
               xticks=range(0, L, max(1, L // 8)), yticks=range(0, L, max(1, L // 8)))
    lens = fig.add_subplot(grid[1, 0])
    score = fig.add_subplot(grid[1, 1])
    for i, m in enumerate(models):
        r = result.lens[m]
        x = (np.arange(len(r.kl)) + 1) / len(r.kl)
        lens.plot(x, r.kl / max(r.kl.max(), 1e-12), marker="o", ms=3, color=f"C{i}", label=f"{m}: KL / max")
        lens.plot(x, r.overlap, marker="s", ms=3, ls="--", color=f"C{i}", label=f"{m}: top-5 overlap")
        rows = result.score[m].rows
        for task in dict.fromkeys(row["task"] for row in rows):
            pts = [(row["level"], row["norm_score"]) for row in rows if row["task"] == task]
            score.plot(*zip(*[(lv, np.nan if v is None else v) for lv, v in pts]), marker="o", color=f"C{i}",
                       ls="-" if task == rows[0]["task"] else ":", label=f"{m}: {task}")
    lens.set(xlabel="relative depth (l + 1) / L", ylabel="KL (normalised) · overlap", title="logit lens")
    score.set(xlabel="difficulty level", ylabel="depth score / (L − 1)", title="depth score", ylim=(0, 1))
    lens.legend(fontsize=7)
    score.legend(fontsize=7)
    fig.suptitle("Does a shared-layer model use more of its depth?", y=1.0)
    fig.tight_layout()
    return fig
