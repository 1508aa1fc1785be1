"""One look for every chapter: each figure function takes a result and returns a Figure (the shared look,
bands, heatmaps and saving are in :mod:`depthutils.book.plotstyle`).

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
    BAND,
    BAND_NOTE,
    CMAPS,
    COLORS,
    COLUMN_IN,
    LABELS,
    ROBUST_PERCENTILE,
    heatmap,
    integer_ticks,
    lineplot,
    lines,
    long_form,
    model_name,
    robust_max,
    subplots,
    title,
    yerr,
)
from depthutils.core.depth import LENS_AXIS, layer_depth
from depthutils.measures.residual_stream import ROUNDING


def contributions(result):
    """P1 Fig. 2: relative contribution (a) and cosine with the residual (b) per layer, 95% bands."""
    fig, (a, b) = subplots(1, 2, height=4.6)
    palette = {LABELS[p]: COLORS[p] for p in COLORS}
    lines(a, long_form(result, {f"{p}_ratio": LABELS[p] for p in COLORS}), palette, legend=False)
    lines(b, long_form(result, {f"{p}_cos": LABELS[p] for p in COLORS}), palette, legend=False)
    f = result.facts()
    mid, L = f["mid"], f["L"]
    a.hlines([f["first"], f["second"]], [1, mid], [mid - 1, L - 1], colors="k", lw=1.5,
             label="whole layer, each half's mean")
    a.hlines(0.5 * f["first"], mid, L - 1, colors="k", lw=1, linestyles=":", label="2nd half shown at or below 0.5× the 1st")
    a.hlines(f["first"], mid, L - 1, colors="k", lw=1, linestyles="--", label="2nd half not shown above 1× the 1st")
    a.set(xlabel="layer l", ylabel="‖contribution‖ / ‖h_l‖ (log)", title="(a) relative contribution", yscale="log")
    b.axhline(0, color="k", lw=0.8)
    b.set(xlabel="layer l", ylabel="cos(contribution, h_l)", title="(b) cosine with the residual")
    integer_ticks(a, b)
    handles = [Line2D([], [], color=COLORS[p], marker="o", ms=4, label=LABELS[p]) for p in COLORS]
    fig.legend(handles=handles + a.get_legend_handles_labels()[0], loc="outside lower center", ncol=2)
    fig.suptitle(title(result, "How much does each layer write into the residual stream?", BAND_NOTE))
    return fig


def future_effects(result):
    """P1 Fig. 3: effect of skipping layer s on later layer j (heatmap, max over prompts) and on the
    output: P1's max over prompts (bars) and the mean over prompts with its 95% interval (points)."""
    D, O = result.layer_effect, result.output_effect
    L = len(O)
    p = result.meta.get("params", {})
    fig, (a, b) = subplots(2, 1, height=7.0, gridspec_kw={"height_ratios": [1.6, 1]})
    heatmap(a, D, "max relative change of Δ_j", cmap=CMAPS["future_effect"], vmin=0, robust=True)
    a.axhline((L + 1) // 2, color="w", lw=1.2, ls="--")  # the verdict compares the rows above and below it
    a.set(xlabel="later layer j", ylabel="skipped layer s",
          title="(a) on later layers, max over prompts; dashed: the halves")
    b.bar(np.arange(L), O, color=COLORS.get(p.get("part", "layer"), "gray"), alpha=0.5, label="max over prompts (P1)")
    df = long_form(result, {"output_effect": "mean over prompts"})
    sns.pointplot(df, x="x", y="value", color="k", linestyle="none", markersize=4, native_scale=True, ax=b,
                  label="mean over prompts (95% CI)", **BAND)
    b.set(xlabel="skipped layer s", ylabel="max ‖p − p′‖₂", title="(b) effect on the output distribution")
    integer_ticks(b)
    if b.get_legend() is not None:  # seaborn's own, drawn over the bars
        b.get_legend().remove()
    fig.legend(*b.get_legend_handles_labels(), loc="outside lower center", ncol=2)
    variant = f"skip {LABELS.get(p.get('part'), p.get('part'))}, {p.get('mode', 'future')} tokens"
    if p.get("local"):
        variant += ", direct paths only"
    fig.suptitle(title(result, f"What breaks downstream when a layer is skipped?\n({variant})"))
    return fig


def logit_lens(result):
    """P1 Fig. 4: KL(q_l ‖ q_L) and top-k overlap of the logit lens per layer, 95% bands."""
    fig, (a, b) = subplots(1, 2, height=4.4)
    lines(a, long_form(result, {"kl": "KL"}), {"KL": "#9467bd"}, legend=False)
    a.set(xlabel=LENS_AXIS, ylabel="KL(q_l ‖ q_L)  [nats]", title="(a) KL to the output")
    lines(b, long_form(result, {"overlap": "overlap"}), {"overlap": "#8c564b"}, legend=False)
    b.set(xlabel=LENS_AXIS, ylabel=f"top-{result.k} overlap", ylim=(-0.03, 1.03),
          title=f"(b) top-{result.k} overlap")
    L = len(result.kl)
    a.axhline(0.5 * result.kl.max(), color="k", lw=1, ls="--", label="threshold (P2): half the maximum KL; overlap 0.3")
    b.axhline(0.3, color="k", lw=1, ls="--")
    for ax in (a, b):  # the verdict: a crossing at or after the middle, (l + 1) / L ≥ 0.5, counts for P1
        ax.axvline(L / 2 - 1, color="gray", lw=1, ls=":",
                   label=f"middle: layer {L // 2 - 1}, (l + 1) / L = 0.5" if ax is a else None)
    integer_ticks(a, b)
    fig.legend(*a.get_legend_handles_labels(), loc="outside lower center", ncol=1)
    fig.suptitle(title(result, "When does the residual stream already hold the output?", BAND_NOTE))
    return fig


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


# ------------------------------------------------------------------ chapter 6 (P1; spec §6)
def _scores(result) -> pd.DataFrame:
    """Per-prompt normalised depth scores and correctness of a depth-score result, long form."""
    return pd.DataFrame({"level": result.prompt_levels.astype(float), "task": result.prompt_tasks,
                         "score": result.prompt_scores / (result.n_layers - 1),
                         "correct": 100 * result.prompt_correct})


def depth_score(result):
    """Depth score against difficulty per task family: the mean over prompts with its 95% band (each
    prompt a dot) and P1's max-over-prompts score (dashed); accuracy with its band beside it."""
    fig, (a, b) = subplots(1, 2, height=4.8)
    df = _scores(result)
    tasks = list(dict.fromkeys(r["task"] for r in result.rows))
    palette = dict(zip(tasks, sns.color_palette("tab10", len(tasks))))
    sns.lineplot(df, x="level", y="score", hue="task", palette=palette, marker="o", ax=a, legend=False, **BAND)
    sns.stripplot(df, x="level", y="score", hue="task", palette=palette, native_scale=True, size=3, alpha=0.35,
                  jitter=0.12, legend=False, ax=a)
    for task in tasks:
        rows = [r for r in result.rows if r["task"] == task]
        a.plot([r["level"] for r in rows], [np.nan if r["norm_score"] is None else r["norm_score"] for r in rows],
               ls="--", marker="x", color=palette[task], label=f"{task}: P1's max over prompts")
    if df["correct"].notna().any():
        sns.lineplot(df.dropna(subset=["correct"]), x="level", y="correct", hue="task", palette=palette, marker="o",
                     ax=b, legend=False, **BAND)
    a.set(xlabel="difficulty level", ylabel="depth score / (L − 1)", title="(a) centre of mass of\nthe future effects",
          ylim=(0, 1))
    b.set(xlabel="difficulty level", ylabel="greedy accuracy (%)", title="(b) does the model\nsolve them?",
          ylim=(-5, 105))
    integer_ticks(a, b)
    handles = [h for t in tasks for h in (Line2D([], [], color=palette[t], marker="o", ms=4, label=f"{t}: mean (95% CI)"),
                                          Line2D([], [], color=palette[t], marker="x", ls="--",
                                                 label=f"{t}: P1's max over prompts"))]
    fig.legend(handles=handles, loc="outside lower center", ncol=2)
    fig.suptitle(title(result, "Does a harder problem use more depth?") + "\nlevels: operands, hops or MATH level; "
                 "dots: single prompts")
    return fig


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
        df = _scores(result.score[m]).rename(columns={"level": "x", "score": "value"})
        for j, task in enumerate(dict.fromkeys(df["task"])):
            draw(score, df[df["task"] == task], f"{m}: {task}", colors[m], ("-", ":", "--")[j % 3], False)
    lens.set(xlabel="(l + 1) / L, lens on hₗ", ylabel="KL / max · overlap", title="logit lens")
    score.set(xlabel="difficulty level", ylabel="depth score / (L − 1)", title="depth score", ylim=(0, 1))
    integer_ticks(score)
    fig.legend(handles=keys[lens] + keys[score], loc="outside lower center", ncol=2)
    fig.suptitle(f"Does a shared-layer model use more of its depth?\n({BAND_NOTE})")
    return fig


def residual_stream(result) -> plt.Figure:
    """Chapter 0: (a) the decomposition error per layer (added parts, raw module outputs; log scale),
    (b) the attention share on position 0 against even attention, (c) ‖h_l‖ at position 0 and elsewhere."""
    fig, axes = subplots(3, 1, height=8.4, sharex=True)
    tiny = 1e-12  # a log axis cannot show an exact 0
    df = long_form(result, {"error": "h_l + a_l + m_l (what is added)", "raw_error": "h_l + raw module outputs"})
    df["value"] = df["value"].clip(lower=tiny)
    sns.lineplot(df, x="x", y="value", hue="what", estimator="max", errorbar=None, marker="o", ax=axes[0])
    axes[0].axhline(ROUNDING, color="gray", ls="--", lw=1,
                    label=f"{ROUNDING:.0e}: float32 rounding; the text reports an error below it as this bound")
    axes[0].set(yscale="log", xlabel="layer l", ylabel="relative error",
                title=r"(a) $h_{l+1} = h_l + a_l + m_l$? largest relative error over prompts")  # mathtext
    if np.isfinite(result.sink).any():
        lines(axes[1], long_form(result, {"sink": "attention on position 0", "uniform": "even attention"}),
              weighted=False)
        axes[1].set(xlabel="layer l", ylabel="attention weight", title=f"(b) position 0's share ({BAND_NOTE})")
    else:
        axes[1].text(0.5, 0.5, "attention weights not measured\n(remote model)", ha="center", va="center")
        axes[1].set(title="(b) position 0's share")
    L1 = len(result.norm0)
    axes[2].plot(np.arange(L1), result.norm0, "o-", label="position 0 (BOS)")
    axes[2].plot(np.arange(L1), result.norm_rest, "o-", label="median of positions ≥ 1")
    axes[2].set(yscale="log", xlabel="l (h_0: embedding; h_L: the last layer's output)", ylabel="‖h_l‖",
                title="(c) residual norm, first prompt")
    integer_ticks(*axes)
    for ax in axes:
        ax.legend()
    fig.suptitle(title(result, "The residual stream"))
    return fig
