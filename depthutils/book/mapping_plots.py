"""Chapter 7's figures (P1 §7): one mapping's heatmap, the best-match curves, and the trained pair beside its
nulls (:mod:`depthutils.analysis.mapping_null`). Re-exported by :mod:`depthutils.book.plotting`."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from depthutils.book.plotstyle import CMAPS, heatmap, yerr

__all__ = ["mapping", "mapping_curves", "mapping_null"]

ERROR_LABEL = "held-out ‖ŷ − y‖ / ‖y‖"


def _draw(ax, r, *, band: bool, ticks: int, **heat) -> None:
    """One mapping's error heatmap on ``ax``, source layer 0 at the bottom: the relative-depth diagonal (dashed),
    each row's best target (red dots) and, with ``band``, the targets within the noise of its minimum (squares);
    a target tick every ``ticks`` layers; ``heat`` goes to :func:`~depthutils.book.plotstyle.heatmap`."""
    Ls, Lt = r.shape
    heatmap(ax, r.error, ERROR_LABEL, cmap=CMAPS["mapping_error"], **heat)
    ax.invert_yaxis()
    # heatmap cells are centred at i + 0.5
    ax.plot((np.arange(Ls) + 1) / Ls * Lt - 0.5, np.arange(Ls) + 0.5, "w--", lw=1.5, label="same relative depth")
    if band:
        cells = [(s, j) for s, b in enumerate(r.best_band()) for j in b]
        ax.plot([j + 0.5 for _, j in cells], [s + 0.5 for s, _ in cells], "s", mfc="none", mec="orange", ms=7,
                mew=1.2, label="within the noise of the row's minimum")
    ax.plot(r.best + 0.5, np.arange(Ls) + 0.5, "o", color="red", ms=5, label="best target layer")
    step = max(1, ticks)
    ax.set_xticks(np.arange(0, Lt, step) + 0.5, np.arange(0, Lt, step))


def mapping(result):
    """Held-out error of the affine map from each source layer to each target layer of one mapping, with
    the relative-depth diagonal (dashed), the best match of each source layer (dots) and the target layers
    within the noise of its minimum (squares, :meth:`~depthutils.measures.cross_model_mapping.MappingResult.best_band`);
    source layer 0 at the bottom."""
    p = result.meta["params"]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    _draw(ax, result, band=True, ticks=result.shape[1] // 8)
    ax.set(xlabel=f"target layer of {p['target']}", ylabel=f"source layer of {p['source']}",
           title=f"{p['source']} → {p['target']}: which target layer does each source layer map to?")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3)
    return fig


def mapping_curves(results):
    """The best-match curve of every mapping against the relative-depth diagonal, each best match with its
    95% bootstrap interval over held-out prompts."""
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="same relative depth")
    for r in results:
        src, tgt = r.relative()
        Lt = r.shape[1]
        band = r.interval(lambda x: (x.best + 1) / Lt) if r.n_prompts else None
        ax.errorbar(src, tgt, yerr=None if band is None else yerr(list(tgt), list(zip(*band))), marker="o",
                    capsize=2, label=f"{r.meta['params']['source']} → {r.meta['params']['target']}")
    ax.set(xlabel="relative depth of the source layer (s+1)/L", ylabel="relative depth of its best target",
           title="Best-match curves (bars: 95% CI over held-out prompts)", xlim=(0, 1.05), ylim=(0, 1.05))
    ax.legend(fontsize=8)
    return fig


def mapping_null(trained, untrained, control=None):
    """One source mapped onto the trained deeper model, onto its untrained initial weights (the null) and, with
    ``control``, onto a second seed of itself (the positive control): three heatmaps side by side on one colour
    scale, each with the relative-depth diagonal (dashed) and each row's best target (red dots), for a page
    column about 680 px wide."""
    panels = [("trained", trained), ("untrained (null)", untrained)]
    panels += [("second seed (control)", control)] if control is not None else []
    vmin = min(float(np.nanmin(r.error)) for _, r in panels)
    vmax = max(float(np.nanmax(r.error)) for _, r in panels)
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(7.6, 2.9),
                             gridspec_kw={"width_ratios": [1] * len(panels) + [0.06], "wspace": 0.3})
    source = trained.meta["params"]["source"]
    for i, (ax, (what, r)) in enumerate(zip(axes, panels)):
        last = i == len(panels) - 1
        _draw(ax, r, band=False, ticks=r.shape[1] // 4, vmin=vmin, vmax=vmax, cbar=last,
              **({"cbar_ax": axes[-1]} if last else {}))
        ax.set_xlabel(f"target layer of\n{r.meta['params']['target']}", fontsize=8)
        ax.set_ylabel(f"source layer of {source}" if i == 0 else "", fontsize=8)
        ax.set_title(f"({'abc'[i]}) {what}", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[-1].tick_params(labelsize=7)
    axes[-1].yaxis.label.set_size(8)
    fig.suptitle(f"{source} mapped onto a trained model and onto its nulls\n(red dots: each row's best target; "
                 "dashed: the same relative depth)", fontsize=9, y=1.08)
    return fig
