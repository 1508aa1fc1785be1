"""Chapter 7's figures (P1 §7): one mapping's heatmap, the best-match curves, and the trained pair beside its
nulls (:mod:`depthutils.analysis.mapping_null`). Re-exported by :mod:`depthutils.book.plotting`. Each is drawn at
the book's text column's width, its key in a legend outside the heatmaps."""
from __future__ import annotations

import numpy as np

from depthutils.book.legends import below
from depthutils.book.plotstyle import CMAPS, ROBUST_PERCENTILE, heatmap, robust_max, subplots, yerr
from depthutils.core.depth import layer_depth

__all__ = ["mapping", "mapping_curves", "mapping_null"]

ERROR_LABEL = "held-out ‖ŷ − y‖ / ‖y‖"
#: the legend's background: a grey on which the white diagonal shows
KEY_FACE = "0.85"


def _step(n: int, most: int) -> int:
    """The tick step for ``n`` layers: the smallest of 1, 2, 3, 5, 10, 15, 20, … that labels at most ``most``."""
    return next(s for s in (1, 2, 3, 5, *range(10, n + 10, 5)) if -(-n // s) <= most)


def _draw(ax, r, *, band: bool, ticks: tuple[int, int], **heat) -> None:
    """One mapping's error heatmap on ``ax``, source layer 0 at the bottom: the relative-depth diagonal (dashed),
    each row's best target (red dots) and, with ``band``, the targets within the noise of its minimum (squares);
    at most ``ticks`` = (target, source) layers labelled; ``heat`` goes to
    :func:`~depthutils.book.plotstyle.heatmap`."""
    Ls, Lt = r.shape
    heatmap(ax, r.error, ERROR_LABEL, cmap=CMAPS["mapping_error"], **heat)
    ax.invert_yaxis()
    # heatmap cells are centred at i + 0.5
    ax.plot(layer_depth(np.arange(Ls), Ls) * Lt - 0.5, np.arange(Ls) + 0.5, "w--", lw=1.5, label="same relative depth")
    if band:
        cells = [(s, j) for s, b in enumerate(r.best_band()) for j in b]
        ax.plot([j + 0.5 for _, j in cells], [s + 0.5 for s, _ in cells], "s", mfc="none", mec="orange", ms=7,
                mew=1.2, label="within the noise of the row's minimum")
    ax.plot(r.best + 0.5, np.arange(Ls) + 0.5, "o", color="red", ms=5, label="best target layer")
    for axis, n, most in ((ax.xaxis, Lt, ticks[0]), (ax.yaxis, Ls, ticks[1])):
        layers = np.arange(0, n, _step(n, most))
        axis.set_ticks(layers + 0.5, [str(l) for l in layers], rotation=0)


def mapping(result):
    """Held-out error of the affine map from each source layer to each target layer of one mapping, with
    the relative-depth diagonal (dashed), the best match of each source layer (dots) and the target layers
    within the noise of its minimum (squares, :meth:`~depthutils.measures.cross_model_mapping.MappingResult.best_band`);
    source layer 0 at the bottom; a colour scale one cell cannot stretch."""
    p = result.meta["params"]
    fig, ax = subplots(height=5.0)
    _draw(ax, result, band=True, ticks=(12, 12), robust=True)
    ax.set(xlabel=f"target layer of {p['target']}", ylabel=f"source layer of {p['source']}")
    below(fig, [ax], facecolor=KEY_FACE)
    fig.suptitle(f"{p['source']} → {p['target']}\nwhich target layer does each source layer map to?")
    return fig


def mapping_curves(results):
    """The best-match curve of every mapping against the relative-depth diagonal, each best match with its
    95% bootstrap interval over held-out prompts; the legend below the axes."""
    fig, ax = subplots(height=4.8)
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="same relative depth")
    for r in results:
        src, tgt = r.relative()
        Lt = r.shape[1]
        band = r.interval(lambda x: layer_depth(x.best, Lt)) if r.n_prompts else None
        ax.errorbar(src, tgt, yerr=None if band is None else yerr(list(tgt), list(zip(*band))), marker="o",
                    capsize=2, label=f"{r.meta['params']['source']} → {r.meta['params']['target']}")
    ax.set(xlabel="source layer s, relative depth (s + 1) / L", ylabel="its best target j, (j + 1) / L",
           title="Best-match curves (bars: 95% CI over held-out prompts)", xlim=(0, 1.05), ylim=(0, 1.05))
    below(fig, [ax], ncol=min(len(results) + 1, 3))
    return fig


def mapping_null(trained, untrained, control=None):
    """One source mapped onto the trained deeper model, onto its untrained initial weights (the null) and, with
    ``control``, onto a second seed of itself (the positive control): heatmaps two a row on one colour scale (which
    stops at the :data:`~depthutils.book.plotstyle.ROBUST_PERCENTILE`-th percentile of all their cells), each with
    the relative-depth diagonal (dashed) and each row's best target (red dots); the key in the free corner, or
    below."""
    panels = [("trained", trained), ("untrained (null)", untrained)]
    panels += [("second seed (control)", control)] if control is not None else []
    cells = np.concatenate([np.ravel(r.error) for _, r in panels])
    vmin, vmax = float(np.nanmin(cells)), robust_max(cells)
    capped = vmax is not None and float(np.nanmax(cells)) > vmax
    rows = 1 if len(panels) == 2 else 2
    fig, axes = subplots(rows, 2, height=3.2 * rows + 0.9, squeeze=False)
    source = trained.meta["params"]["source"]
    for i, (ax, (what, r)) in enumerate(zip(axes.flat, panels)):
        _draw(ax, r, band=False, ticks=(6, 8), vmin=vmin, vmax=vmax, cbar=False)
        ax.set_xlabel(f"target layer of\n{r.meta['params']['target']}")
        ax.set_ylabel(f"source layer of {source}" if i % 2 == 0 else "")
        ax.set_title(f"({'abc'[i]}) {what}")
    label = ERROR_LABEL + (f"\n(scale capped at the {ROBUST_PERCENTILE}th percentile)" if capped else "")
    fig.colorbar(axes[0, 0].collections[0], ax=axes.ravel().tolist(), label=label, extend="max" if capped else "neither",
                 fraction=0.05, shrink=0.8, aspect=30)
    if len(panels) == 3:
        axes[1, 1].set_axis_off()
        axes[1, 1].legend(*axes[0, 0].get_legend_handles_labels(), loc="center", facecolor=KEY_FACE)
    else:
        below(fig, axes[0, :1], facecolor=KEY_FACE)
    fig.suptitle(f"{source} mapped onto a trained model and onto its nulls")
    return fig
