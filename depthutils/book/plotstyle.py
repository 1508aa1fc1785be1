"""The book's one look, shared by every figure: colours and colour maps per quantity, seaborn's theme,
long-form data, line plots with 95% bootstrap bands over prompts (token-weighted where the measurement
averages over tokens), heatmaps with a labelled colorbar, titles and saving as PNG and PDF.

The figures of each chapter are in :mod:`depthutils.book.plotting`.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns

from depthutils.core.results import atomic_write

COLORS = {"attn": "#1f77b4", "mlp": "#ff7f0e", "layer": "#2ca02c"}
LABELS = {"attn": "attention", "mlp": "MLP", "layer": "whole layer"}
#: one colour map per quantity, across the book
CMAPS = {"future_effect": "viridis", "erasure": "magma", "attribution": "RdBu_r", "mapping_error": "viridis_r"}
#: the band every line plot draws: a 95% percentile bootstrap over prompts, seeded
BAND = dict(errorbar=("ci", 95), n_boot=1000, seed=0)
BAND_NOTE = "bands: 95% bootstrap CI over prompts"
sns.set_theme(context="notebook", style="whitegrid", font_scale=0.85,
              rc={"figure.dpi": 100, "savefig.dpi": 150, "grid.alpha": 0.3, "axes.spines.top": False,
                  "axes.spines.right": False})


def long_form(result, names: dict[str, str], x=None) -> pd.DataFrame:
    """Per-prompt values of ``result`` as long-form rows (``x``, ``value``, ``what``, ``prompt``,
    ``tokens``): ``names`` maps an aggregate field to its label; ``x`` (default the layer index)
    labels the last axis. A result without per-prompt values gives its aggregate as one prompt."""
    frames = []
    for name, label in names.items():
        per, _ = result.PER_PROMPT.get(name, (None, None))
        values = getattr(result, per, None) if per else None
        values = np.atleast_2d(getattr(result, name)) if values is None else np.asarray(values, float)
        tokens = getattr(result, "prompt_tokens", None)
        tokens = np.ones(len(values)) if tokens is None or len(tokens) != len(values) else np.asarray(tokens, float)
        n, L = values.shape
        frames.append(pd.DataFrame({"x": np.tile(np.arange(L) if x is None else np.asarray(x), n),
                                    "value": values.ravel(), "what": label, "prompt": np.repeat(np.arange(n), L),
                                    "tokens": np.repeat(tokens, L)}))
    return pd.concat(frames, ignore_index=True)


def lines(ax, df: pd.DataFrame, palette=None, weighted: bool = True, **kw):
    """Mean line per ``what`` with its 95% band (token-weighted when ``weighted``)."""
    lineplot(ax, df, weighted=weighted, hue="what", palette=palette, marker="o", markersize=4, markeredgewidth=0,
             **kw)


def lineplot(ax, df: pd.DataFrame, *, weighted: bool, hue: str | None = None, palette: dict | None = None, **kw):
    """``sns.lineplot`` of ``value`` against ``x`` with the :data:`BAND` of every line plot.

    Token-weighted, seaborn draws the lines and this function the bands: the same resamples and
    percentiles as seaborn's weighted bootstrap (:func:`weighted_band`), drawn as seaborn draws them
    (``fill_between``, the line's colour, alpha 0.2). Seaborn's own loops over pandas in Python,
    which took a minute of chapter 9.
    """
    if not weighted:
        sns.lineplot(df, x="x", y="value", hue=hue, palette=palette, ax=ax, **BAND, **kw)
        return
    sns.lineplot(df, x="x", y="value", hue=hue, palette=palette, weights="tokens", errorbar=None, ax=ax, **kw)
    groups = ([(df, kw.get("color"))] if hue is None
              else [(df[df[hue] == h], palette[h]) for h in df[hue].dropna().unique()])
    for sub, color in groups:
        x, lo, hi = weighted_band(sub)
        ax.fill_between(x, lo, hi, color=color, alpha=0.2)


@functools.lru_cache(maxsize=64)
def _resamples(n: int, n_boot: int, seed: int) -> np.ndarray:
    """``[n_boot, n]`` row indices: seaborn's bootstrap draws for ``n`` rows (a generator seeded anew per call)."""
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.integers(0, n, n, dtype=np.intp) for _ in range(n_boot)])
    idx.flags.writeable = False
    return idx


def weighted_band(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per ``x``: the 95% percentile bootstrap band of the ``tokens``-weighted mean of ``value``, as seaborn
    computes it with :data:`BAND` (rows sorted by ``x`` then ``value``, stably; ``n_boot`` resamples of each
    ``x``'s rows drawn by a generator seeded anew per ``x``; NaN where an ``x`` has one row), vectorised.
    Returns the sorted ``x`` values and the band's lower and upper edges."""
    d = df[["x", "value", "tokens"]].dropna()
    x, v, w = (d[c].to_numpy(float) for c in ("x", "value", "tokens"))
    order = np.lexsort((v, x))
    x, v, w = x[order], v[order], w[order]
    xs, starts = np.unique(x, return_index=True)
    bounds = list(starts[1:]) + [len(x)]
    (_, level), n_boot = BAND["errorbar"], BAND["n_boot"]
    lo, hi = np.full(len(xs), np.nan), np.full(len(xs), np.nan)
    if len(xs) == len(x):  # one row per x: seaborn aggregates nothing and draws no band
        return xs, lo, hi
    for i, (a, b) in enumerate(zip(starts, bounds)):
        n = b - a
        if n > 1:
            idx = _resamples(n, n_boot, BAND["seed"])
            vv, ww = v[a:b][idx], w[a:b][idx]
            boots = np.multiply(vv, ww).sum(axis=1) / ww.sum(axis=1)
            lo[i], hi[i] = np.nanpercentile(boots, [(100 - level) / 2, 100 - (100 - level) / 2])
    return xs, lo, hi


def heatmap(ax, data, label: str, *, cmap="viridis", vmin=None, vmax=None, center=None, **kw):
    """``sns.heatmap`` with a labelled colorbar; NaN cells (e.g. ``j ≤ s``) are left blank."""
    data = np.asarray(data, float)
    sns.heatmap(data, mask=~np.isfinite(data), cmap=cmap, vmin=vmin, vmax=vmax, center=center, ax=ax,
                cbar_kws={"label": label}, **kw)
    ax.tick_params(axis="y", labelrotation=0)
    ax.grid(False)


def yerr(values, bands):
    """Matplotlib ``yerr`` (distances below and above) from values and ``(lo, hi)`` bands (None: no bar)."""
    lo = [0 if v is None or b is None else max(v - b[0], 0) for v, b in zip(values, bands)]
    hi = [0 if v is None or b is None else max(b[1] - v, 0) for v, b in zip(values, bands)]
    return np.array([lo, hi])


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
