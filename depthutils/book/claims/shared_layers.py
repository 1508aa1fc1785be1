"""Chapter 8's claim (P1's outlook, preliminary: a shared-layer model uses more of its depth): its verdict and its
figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.lines import Line2D

from depthutils.analysis.depth_use import MEASURES, DepthUse
from depthutils.book.claim_table import CLAIMS
from depthutils.book.claims import embedding_peak_words
from depthutils.book.claims.depth_score import score_frame
from depthutils.book.grading import COMBINED, Verdict, combine, grade, interval_text, not_tested, verdict_of
from depthutils.book.plotstyle import BAND_NOTE, CMAPS, COLUMN_IN, heatmap, integer_ticks, lineplot, long_form
from depthutils.core.depth import layer_depth

__all__ = ["figure", "verdict"]


def verdict(result: DepthUse) -> Verdict:
    """Chapter 8: the shared-layer model (the last) minus the stacked one (the first), three numbers."""
    c = CLAIMS["shared_layers"]
    stacked, shared = result.models[0], result.models[-1]
    if stacked == shared:
        return not_tested("shared_layers", "one model only: the claim compares a stacked and a shared-layer model.")
    a, b, f = result.numbers(stacked), result.numbers(shared), result.facts()
    grades, parts, values, notes = [], [], [], []
    peaked = f["kl_peak"]
    for k in MEASURES:
        key = c.fact.format(measure=k)
        d, lo, hi = f[key], f[f"{key}_lo"], f[f"{key}_hi"]
        if k == "kl_ratio" and peaked != "none":
            grades.append("not tested")
            parts.append(f"{k}: {b[k]} vs {a[k]}, degenerate (not tested)")
            notes.append(f"kl_ratio is degenerate on {peaked}: {embedding_peak_words()}; not counted.")
            continue
        g = grade(d, lo, hi, c.shown.value, c.against.value, below=False)
        if g == "shown" and (lo if lo is not None else d) <= c.shown.value:  # touching 0 is not above it
            g = "mixed"
        grades.append(g)
        fmt = lambda v: "—" if v is None else f"{v:.3f}"
        parts.append(f"{k}: {fmt(b[k])} vs {fmt(a[k])}, difference {interval_text(d, lo, hi, '+.3f')} ({g})")
        values.append(f"{k}: {interval_text(d, lo, hi, '+.3f')}")
    return verdict_of(c, combine(grades), "; ".join(parts) + ".", notes, value="; ".join(values),
                    criterion=f"{shared} minus {stacked}: " + c.criterion().replace("at or above", "wholly above")
                    + f" Each of the three is graded and combined: {COMBINED}; a measure "
                              "that is degenerate on these models (the KL ratio where a model's lens KL peaks at "
                              "h_0) is not counted.")


def figure(result):
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
