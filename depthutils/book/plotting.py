"""The figures of the chapters whose claims are graded on several results or a sample (chapters 4, 5, 7, 8, 9):
each figure function takes a result and returns a Figure. A claim with a module of its own draws its figure there
(:mod:`depthutils.book.claims`); the shared look, bands, heatmaps and saving are in
:mod:`depthutils.book.plotstyle`.

Drawn with seaborn on long-form data (one row per prompt × layer): lines carry
95% bootstrap bands over prompts (``errorbar=("ci", 95)``, 1000 resamples, seed
0; token-weighted where the measurement averages over tokens, so the line is the
result's own aggregate), heatmaps come from ``sns.heatmap`` with a labelled
colorbar. Titles name the model, the data set and n (from the result's metadata);
:func:`save` writes PNG and PDF. A figure of a single prompt (erasure, integrated
gradients) has no interval over prompts and says so. Chapter 7's figures are in
:mod:`depthutils.book.mapping_plots`, re-exported here.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from depthutils.book.mapping_plots import mapping, mapping_curves, mapping_null  # noqa: F401  chapter 7's figures
from depthutils.book.plotstyle import (
    BAND_NOTE,
    CMAPS,
    COLUMN_IN,
    ROBUST_PERCENTILE,
    heatmap,
    integer_ticks,
    lineplot,
    lines,
    long_form,
    model_name,
    robust_max,
    subplots,
    yerr,
)
from depthutils.core.depth import layer_depth

#: the most token labels a layer × token map names along the column's width (10 pt, turned upright)
MAX_TOKEN_LABELS = 32


def _token_map(result, matrix, *, cmap, label, ylabel, what, vmin, vmax, center=None, rel_row=None):
    """A layer × token heatmap with the prompt's tokens on the x axis (one prompt: no interval), layer 0 at
    the bottom as in P1; ``rel_row(r)`` is the last row at relative depth ``r``, where the verdict's
    thresholds (0.6 shown, 0.8 not shown) are drawn."""
    fig, ax = subplots(height=4.8)
    tokens = [t.replace("Ġ", "·").replace("Ċ", "\\n") for t in result.tokens]
    heatmap(ax, matrix, label, cmap=cmap, vmin=vmin, vmax=vmax, center=center, xticklabels=tokens,
            yticklabels="auto")
    ax.invert_yaxis()
    if rel_row is not None:
        for r, ls in ((0.6, "--"), (0.8, ":")):
            ax.axhline(rel_row(r) + 1, color="w", lw=1.2, ls=ls)
        ax.set_title("white lines: relative depth 0.6 (- -) and 0.8 (···)", loc="right", fontsize=10)
    ax.tick_params(axis="x", labelrotation=90)
    step = -(-len(tokens) // MAX_TOKEN_LABELS)  # a long prompt: every step-th token named, so labels never collide
    for i, label in enumerate(ax.get_xticklabels()):
        label.set_visible(i % step == 0)
    ax.set(ylabel=ylabel, xlabel="position" if step == 1 else f"position (every {step}th token named)")
    m = result.meta.get("params", {})
    prompt = f"{m.get('prompt', '')!r} → {m.get('answer', '')!r}"
    if len(prompt) > 60:
        prompt = prompt[:59] + "…"
    fig.suptitle(f"{what}\n{prompt}\n{model_name(result.meta.get('model'))} · one prompt (no interval over prompts)")
    return fig


def residual_erasure(result):
    """P1 Fig. 6b: effect of erasing h_l[t] on the answer distribution, layer × token."""
    return _token_map(result, result.effect, cmap=CMAPS["erasure"], label="max ‖p − p′‖₂ over answer positions",
                      ylabel="residual hₗ, relative depth l / L", what="Where is the answer computed? Erasing one residual vector",
                      vmin=0, vmax=None, rel_row=lambda r: int(np.floor(r * (result.effect.shape[0] - 1))))


def integrated_gradients(result):
    """P1 Fig. 6a: attribution per layer × token; diverging colours, BOS excluded from the scale."""
    A = result.attribution
    lim = robust_max(np.abs(A[:, 1:])) or 1.0  # a symmetric scale that one large cell cannot stretch
    label = "attribution to the answer probability"
    if np.abs(A[:, 1:]).max() > lim:
        label += f"\n(scale capped at the {ROBUST_PERCENTILE}th percentile of |attribution|)"
    p = result.meta.get("params", {})
    rule = (f"adaptive rule, {result.evaluations / A.shape[0]:.0f} evaluations per layer" if p.get("rule") == "adaptive"
            else f"{p.get('steps')} steps" + (" (Gauss–Legendre)" if p.get("rule") == "gauss" else ""))
    return _token_map(result, A, cmap=CMAPS["attribution"], label=label,
                      ylabel="layer l's output, (l + 1) / L", vmin=-lim, vmax=lim, center=0.0,
                      rel_row=lambda r: int(np.floor(r * A.shape[0])) - 1,
                      what=f"Integrated gradients, {rule}\n(BOS column outside the colour scale)")


# ------------------------------------------------------------------ chapter 9 (P2)
METRICS = ("cos", "kl", "overlap")
METRIC_LABELS = {"cos": "mean cosine c̄_l", "kl": "KL(q_l ‖ q_L) / max", "overlap": "top-5 overlap"}


def effective_depth_curves(study, task: str):
    """The per-layer curves behind one task's effective depths, one panel per metric: each model's
    token-weighted mean curve with its 95% band over prompts (KL divided by its curve's max), the
    metric's threshold (dashed) and each model's effective depth (dotted)."""
    fig, axes = subplots(1, 3, height=3.6, sharex=True)
    colors = dict(zip(study.models, sns.color_palette("tab10", len(study.models))))
    for model in study.models:
        r = study.results[(model, task)]
        if r is None:  # no prompt of this task fits the model's context
            continue
        x = layer_depth(np.arange(r.n_layers), r.n_layers)
        for ax, curve, metric in zip(axes, ("mean_cos", "kl", "overlap"), METRICS):
            df = long_form(r, {curve: model}, x=x)
            if curve == "kl" and r.kl.max() > 0:
                df["value"] /= r.kl.max()
            lines(ax, df, {model: colors[model]}, legend=False)
            ed = r.ed(metric)
            if ed is not None:
                ax.axvline(layer_depth(ed, r.n_layers), color=colors[model], ls=":", lw=1)
    for ax, metric, thr in zip(axes, METRICS, (0.0, 0.5, 0.3)):
        ax.axhline(thr, color="k", lw=0.8, ls="--")
        ax.set(xlabel="(l + 1) / L, lens on hₗ", ylabel=METRIC_LABELS[metric], title=f"ED from {metric}")
    handles = [Line2D([], [], color=colors[m], marker="o", ms=4, label=m) for m in study.models]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)))
    fig.suptitle(f"{task}: P2's three metrics per layer l (read at its input hₗ), at relative depth (l + 1) / L\n"
                 "dashed: threshold; dotted: "
                 "each model's ED; bands: 95% CI over prompts")
    return fig


def ratio_vs_depth(study, models, uncontrolled=None):
    """P2's scale question: effective-depth ratio against the number of layers, per metric and task,
    with each cell's 95% bootstrap interval over prompts. ``uncontrolled`` (a study of other models, e.g. the
    real pretrained ones) adds their cells as hollow markers: other data, training and tokenizer, so they are
    shown beside the controlled ladder, never joined to it."""
    fig, axes = subplots(1, 3, height=3.8, sharey=True)
    depths = [study.n_layers(m) for m in models]
    extra = list(uncontrolled.models) if uncontrolled is not None else []
    for ax, metric in zip(axes, METRICS):
        for j, task in enumerate(study.tasks):
            ratios = [study.cell(m, task, metric)[1] for m in models]
            bands = [study.cell_interval(m, task, metric) for m in models]
            shift = (j - (len(study.tasks) - 1) / 2) * 0.12  # keep the bars of different tasks apart
            line = ax.errorbar(np.array(depths, float) + shift, [np.nan if r is None else r for r in ratios],
                               yerr=yerr(ratios, bands), marker="o", ms=4, capsize=2, label=task)
            for m in (extra if extra and task in uncontrolled.tasks else []):
                r = uncontrolled.cell(m, task, metric)[1]
                if r is not None:
                    ax.errorbar([uncontrolled.n_layers(m) + shift], [r], yerr=yerr([r], [uncontrolled.cell_interval(m, task, metric)]),
                                marker="D", ms=5, mfc="none", ls="none", capsize=2, color=line[0].get_color())
        ax.set(xlabel="layers L", title=f"ED from {metric}", ylim=(0, 1.05))
        integer_ticks(ax)
    axes[0].set_ylabel("ratio (ED + 1) / L")
    handles, labels = axes[0].get_legend_handles_labels()
    if extra:
        handles.append(Line2D([], [], marker="D", mfc="none", ls="none", color="0.3",
                              label="real models (uncontrolled): " + ", ".join(f"{m} (L = {uncontrolled.n_layers(m)})"
                                                                               for m in extra)))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)))
    fig.suptitle("Does effective depth keep up with total depth?\n(bars: 95% bootstrap CI over prompts; "
                 "missing points: undefined)")
    return fig


def base_vs_cot(study, base: str, cot: str):
    """P2's training question: effective-depth ratio of a base model and its CoT fine-tune, with 95% CIs;
    one panel per metric, and an undefined effective depth written as such, not drawn as a bar of 0."""
    fig, axes = subplots(1, 3, height=3.8, sharey=True)
    x = np.arange(len(study.tasks))
    for ax, metric in zip(axes, METRICS):
        for off, name, color in ((-0.2, base, "C0"), (0.2, cot, "C1")):
            vals = [study.cell(name, t, metric)[1] for t in study.tasks]
            ax.bar(x + off, [np.nan if v is None else v for v in vals], width=0.4, label=name, color=color,
                   yerr=yerr(vals, [study.cell_interval(name, t, metric) for t in study.tasks]), capsize=2)
            for xi, v in zip(x + off, vals):
                if v is None:
                    ax.text(xi, 0.02, "undefined", rotation=90, ha="center", va="bottom", color=color)
        ax.set_xticks(x, study.tasks, rotation=90)
        ax.set(title=f"ED from {metric}", ylim=(0, 1.1))
    axes[0].set_ylabel("ratio (ED + 1) / L")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    fig.suptitle(f"Base vs chain-of-thought: {base} vs {cot}\n(bars: 95% bootstrap CI over prompts)")
    return fig


# ------------------------------------------------------------------ chapters 6 and 8: the depth score
def score_frame(result) -> pd.DataFrame:
    """Per-prompt normalised depth scores and correctness of a depth-score result, long form."""
    return pd.DataFrame({"level": result.prompt_levels.astype(float), "task": result.prompt_tasks,
                         "score": result.prompt_scores / (result.n_layers - 1),
                         "correct": 100 * result.prompt_correct})


# ------------------------------------------------------------------ chapter 8 (P1's outlook)
def depth_use(result):
    """Stacked against shared layers: each model's future-effect matrix (top), then the logit lens
    and the depth score by level for all of them, with 95% bands over prompts (bottom)."""
    models = result.models
    fig = plt.figure(figsize=(COLUMN_IN, 3.2 * (-(-len(models) // 2)) + 4.6), layout="constrained")
    rows = -(-len(models) // 2)  # the future-effect matrices two a row, then the lens and the depth score
    grid = fig.add_gridspec(rows + 1, 2, height_ratios=[1] * rows + [1.3])
    vmax = max(np.nanmax(result.future[m].layer_effect) for m in models)  # one scale for every model
    for i, m in enumerate(models):
        ax = fig.add_subplot(grid[i // 2, i % 2])
        heatmap(ax, result.future[m].layer_effect, "max rel. change of Δ_j", cmap=CMAPS["future_effect"],
                vmin=0, vmax=vmax)
        ax.set(xlabel="later layer j", ylabel="skipped layer s", title=f"future effects · {m}")
    lens = fig.add_subplot(grid[rows, 0])
    score = fig.add_subplot(grid[rows, 1])
    colors = dict(zip(models, sns.color_palette("tab10", len(models))))
    keys = {lens: [], score: []}  # legend entries drawn as they are plotted (seaborn's own ignore linestyle)

    def draw(ax, df, label, color, ls, weighted):
        lineplot(ax, df, weighted=weighted, color=color, linestyle=ls, marker="o", markersize=4, legend=False)
        keys[ax].append(Line2D([], [], color=color, ls=ls, marker="o", ms=4, label=label))
    for m in models:
        r = result.lens[m]
        x = layer_depth(np.arange(len(r.kl)), len(r.kl))
        kl = long_form(r, {"kl": m}, x=x)
        kl["value"] /= max(r.kl.max(), 1e-12)
        draw(lens, kl, f"{m}: KL / max", colors[m], "-", True)
        draw(lens, long_form(r, {"overlap": m}, x=x), f"{m}: top-5 overlap", colors[m], "--", True)
        df = score_frame(result.score[m]).rename(columns={"level": "x", "score": "value"})
        for j, task in enumerate(dict.fromkeys(df["task"])):
            draw(score, df[df["task"] == task], f"{m}: {task}", colors[m], ("-", ":", "--")[j % 3], False)
    lens.set(xlabel="(l + 1) / L, lens on hₗ", ylabel="KL / max · overlap", title="logit lens")
    score.set(xlabel="difficulty level", ylabel="depth score / (L − 1)", title="depth score", ylim=(0, 1))
    integer_ticks(score)
    fig.legend(handles=keys[lens] + keys[score], loc="outside lower center", ncol=2)
    fig.suptitle(f"Does a shared-layer model use more of its depth?\n({BAND_NOTE})")
    return fig


