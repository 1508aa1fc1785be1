"""The book's one look, shared by every figure: colours and colour maps per quantity, seaborn's theme,
long-form data, line plots with 95% bootstrap bands over prompts (token-weighted where the measurement
averages over tokens), heatmaps with a labelled colorbar and a colour scale one cell cannot stretch, titles
and saving as PNG and PDF, where lines drawn on the same points are made visible (:func:`coinciding`).

Every figure is drawn for the width it is shown at: :data:`COLUMN_IN` inches, the width a figure takes in the
book's text column (636–660 px of its 676–688 px at 1280 px and wider), with no text smaller than
:data:`MIN_FONT_PT`. :func:`save` records in the PNG
what the rendered page needs to check that (:func:`legibility`: the smallest font, the resolution, and how
many tick labels overlap), and the book's browser test reads it back from every figure of the page.

Each claim draws its figures in its own module (:mod:`depthutils.book.claims`, :mod:`depthutils.book.reviews`).
"""
from __future__ import annotations

import functools
import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import to_hex
from matplotlib.lines import Line2D

from depthutils.core.results import atomic_write

COLORS = {"attn": "#1f77b4", "mlp": "#ff7f0e", "layer": "#2ca02c"}
LABELS = {"attn": "attention", "mlp": "MLP", "layer": "whole layer"}
#: one colour map per quantity, across the book
CMAPS = {"future_effect": "viridis", "erasure": "magma", "attribution": "RdBu_r", "mapping_error": "viridis_r"}
#: the band every line plot draws: a 95% percentile bootstrap over prompts, seeded
BAND = dict(errorbar=("ci", 95), n_boot=1000, seed=0)
BAND_NOTE = "bands: 95% bootstrap CI over prompts"
#: the width every figure is drawn at, in inches: the width a figure is shown at in the book's text column
#: (636–660 px at 1280 px: a captioned figure has margins) at 100 px an inch
COLUMN_IN = 6.4
#: the margin :func:`save` keeps around the drawn figure, in inches (matplotlib's default, 0.1, shrinks it on the page)
PAD_IN = 0.02
#: the full-size PNG's resolution (the page shows it shrunk to the column: sharp on high-density screens)
PNG_DPI = 150
#: the smallest text a figure may have, in points: at the column's scale (99–103 px an inch), 10 pt is 13.7–14.3 px,
#: the size of the page's code (14 px)
MIN_FONT_PT = 10
#: a colour scale stops at this percentile of the finite cells (the rest drawn in the top colour, the colorbar
#: extended), so that one large cell cannot leave the others dark
ROBUST_PERCENTILE = 98
sns.set_theme(context="notebook", style="whitegrid", font_scale=1.0,
              rc={"figure.dpi": 100, "savefig.dpi": PNG_DPI, "grid.alpha": 0.3, "axes.spines.top": False,
                  "axes.spines.right": False, "legend.fontsize": MIN_FONT_PT, "legend.title_fontsize": MIN_FONT_PT,
                  "figure.titlesize": 12, "axes.titlesize": 11, "axes.labelsize": 11, "xtick.labelsize": 10,
                  "ytick.labelsize": 10})


def subplots(nrows: int = 1, ncols: int = 1, *, height: float, **kw):
    """``plt.subplots`` at the column's width (:data:`COLUMN_IN`), ``height`` inches tall, with matplotlib's
    constrained layout (nothing spills out of the figure)."""
    return plt.subplots(nrows, ncols, figsize=(COLUMN_IN, height), layout="constrained", **kw)


def integer_ticks(*axes, which: str = "x") -> None:
    """Whole-number ticks on the ``which`` axis (``"x"``, ``"y"`` or ``"both"``) of each axes: layers, levels,
    counts. An axis spanning less than two units (one level alone) is widened to one unit each side of its
    centre, where a whole number lies, so it is not ticked in fractions."""
    from matplotlib.ticker import MaxNLocator
    for ax in axes:
        for name in ("x", "y") if which == "both" else (which,):
            getattr(ax, f"{name}axis").set_major_locator(MaxNLocator(integer=True))
            lo, hi = getattr(ax, f"get_{name}lim")()
            if abs(hi - lo) < 2:
                mid = round((lo + hi) / 2)
                getattr(ax, f"set_{name}lim")((mid - 1, mid + 1) if hi >= lo else (mid + 1, mid - 1))


def robust_max(data) -> float | None:
    """The colour scale's top for ``data``: its :data:`ROBUST_PERCENTILE`-th percentile over the finite cells
    (None where there are none)."""
    finite = np.asarray(data, float)[np.isfinite(np.asarray(data, float))]
    return float(np.percentile(finite, ROBUST_PERCENTILE)) if finite.size else None


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


def heatmap(ax, data, label: str, *, cmap="viridis", vmin=None, vmax=None, center=None, robust: bool = False,
            **kw):
    """``sns.heatmap`` with a labelled colorbar; NaN cells (e.g. ``j ≤ s``) are left blank. ``robust``: the
    scale stops at :func:`robust_max` (where ``vmax`` is not given), the colorbar is extended and its label says
    so, when a cell lies above it."""
    data = np.asarray(data, float)
    extend = "neither"
    if robust and vmax is None:
        vmax = robust_max(data)
        if vmax is not None and np.nanmax(data) > vmax:
            extend = "max"
            label = f"{label}\n(scale capped at the {ROBUST_PERCENTILE}th percentile)"
    sns.heatmap(data, mask=~np.isfinite(data), cmap=cmap, vmin=vmin, vmax=vmax, center=center, ax=ax,
                cbar_kws={"label": label, "extend": extend}, **kw)
    ax.tick_params(axis="y", labelrotation=0)
    ax.grid(False)


def yerr(values, bands):
    """Matplotlib ``yerr`` (distances below and above) from values and ``(lo, hi)`` bands (None: no bar)."""
    lo = [0 if v is None or b is None else max(v - b[0], 0) for v, b in zip(values, bands)]
    hi = [0 if v is None or b is None else max(b[1] - v, 0) for v, b in zip(values, bands)]
    return np.array([lo, hi])


#: the most characters a title's line holds at the column's width (12 pt)
TITLE_CHARS = 72


def model_name(name) -> str:
    """A model as a figure names it: an alias or hub id as it is, a local folder by its own name (never the
    machine's path to it)."""
    name = str(name)
    return Path(name).name if name.startswith(("/", ".", "~")) else name


def title(result, what: str, note: str | None = None) -> str:
    """``what``, then the model, the data set and n (from the result's metadata), then ``note`` (e.g. what the
    bands are), each line at most :data:`TITLE_CHARS` long: a note that would not fit goes on a line of its own."""
    m = result.meta
    name = model_name(m.get("model", "?"))
    if len(name) > 40:
        name = "…" + name[-39:]
    data = m.get("dataset") or "custom prompts"
    line = f"{name} · {data} · n={m.get('n', '?')}"
    if note:
        line += f" · {note}" if len(line) + 3 + len(note) <= TITLE_CHARS else f"\n{note}"
    return f"{what}\n{line}"


def _texts(fig):
    """Every visible, non-empty text of ``fig``."""
    from matplotlib.text import Text
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def legibility(fig) -> dict:
    """What the page needs to know of ``fig`` to tell whether it can be read: its width in inches as saved (text
    outside the figure widens it), its smallest font in points, and the pairs of tick labels of one axis that
    overlap (as ``"label | label"``)."""
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    overlaps = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            boxes = [t.get_window_extent(renderer) for t in labels]
            for (a, ba), (b, bb) in itertools.combinations(zip(labels, boxes), 2):
                if ba.overlaps(bb) and ba.intersection(ba, bb).width * ba.intersection(ba, bb).height > 1:
                    overlaps.append(f"{a.get_text()} | {b.get_text()}")
    sizes = [t.get_fontsize() for t in _texts(fig)]
    drawn = fig.get_tightbbox(renderer)  # in inches: wider than the figure where text spills out of it
    return {"width_in": float(max(fig.get_size_inches()[0], drawn.width)),
            "min_font_pt": float(min(sizes, default=MIN_FONT_PT)), "overlaps": overlaps}


#: two lines of one axes coincide where they differ by at most this share of the axes' y range at every point
COINCIDE_SHARE = 0.005


def _same(a, b, tol: float) -> bool:
    """Whether lines ``a`` and ``b`` are drawn on the same points (x equal, y within ``tol``, NaN at the same places)."""
    (xa, ya), (xb, yb) = (np.asarray(line.get_data(), float) for line in (a, b))
    if xa.shape != xb.shape or xa.size < 2 or a.get_transform() != b.get_transform():
        return False
    return bool(np.array_equal(xa, xb, equal_nan=True) and np.array_equal(np.isnan(ya), np.isnan(yb))
                and np.nanmax(np.abs(ya - yb), initial=0) <= tol)


def _entry(legend, line):
    """The one entry (handle, text) of ``legend`` drawn as ``line`` is (same colour, line style and marker), else
    None."""
    style = (to_hex(line.get_color()), line.get_linestyle(), line.get_marker())
    found = [(h, t) for h, t in zip(legend.legend_handles, legend.texts)
             if isinstance(h, Line2D) and (to_hex(h.get_color()), h.get_linestyle(), h.get_marker()) == style]
    return found[0] if len(found) == 1 else None


def coinciding(fig) -> list[tuple[str, str]]:
    """Make lines that one axes of ``fig`` draws on the same points (within :data:`COINCIDE_SHARE` of its y range)
    visible: the later of two is drawn dashed, with smaller markers, over the earlier, and so is its entry in each
    legend (its text is left as it is: a longer entry would widen the figure past the column). :func:`save` calls
    it on every figure, after its legends are drawn.
    Returns the pairs found as the legends name them (earlier, later; "?" where no legend has the line)."""
    legends = [leg for f in (fig, *fig.subfigs) for leg in f.legends]
    legends += [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    pairs = []
    for ax in fig.axes:
        lo, hi = ax.get_ylim()
        drawn = [line for line in ax.get_lines() if line.get_visible() and np.asarray(line.get_xdata()).size > 1]
        for i, later in enumerate(drawn):
            earlier = next((e for e in drawn[:i] if _same(e, later, COINCIDE_SHARE * abs(hi - lo))), None)
            if earlier is None or later.get_linestyle() != earlier.get_linestyle():
                continue
            entries = [(_entry(leg, earlier), _entry(leg, later)) for leg in legends]
            names = [(a[1].get_text() if a else "?", b[1].get_text() if b else "?") for a, b in entries]
            pairs.append(next((n for n in names if "?" not in n), names[0] if names else ("?", "?")))
            handles = [b[0] for _, b in entries if b]
            for artist in [later, *handles]:
                artist.set_linestyle((0, (4, 3)))
                artist.set_markersize(artist.get_markersize() * 0.6)
    return pairs


#: the PNG text chunks :func:`save` writes (read back by the browser test)
PNG_KEYS = ("depthutils:dpi", "depthutils:min_font_pt", "depthutils:overlaps")


def fit_titles(fig) -> None:
    """Wrap every title of ``fig`` (the figure's, its subfigures' and each axes') whose line is wider than the
    place it has (the figure's width; the axes' width), at word boundaries, so that a long model or task name
    never widens the saved figure beyond the column."""
    import textwrap

    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    titles = [(t, fig.get_size_inches()[0] * fig.dpi) for t in
              [getattr(f, "_suptitle", None) for f in [fig, *fig.subfigs]] if t is not None and t.get_text()]
    titles += [(t, ax.get_window_extent(renderer).width) for ax in fig.axes
               for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
    for text, room in titles:
        lines = text.get_text().split("\n")
        width = text.get_window_extent(renderer).width
        longest = max(len(line) for line in lines)
        if width <= room or longest < 12:
            continue
        chars = max(12, int(longest * room / width) - 1)
        text.set_text("\n".join(w for line in lines for w in textwrap.wrap(line, chars) or [""]))


def save(fig, out_dir: str | Path, name: str) -> list[Path]:
    """Write ``name.png`` and ``name.pdf`` into ``out_dir`` (atomically) and return the paths; titles wider than
    their place are wrapped first (:func:`fit_titles`); the PNG carries its resolution, its smallest font and the
    number of overlapping tick labels (:func:`legibility`). Lines drawn on the same points are made visible first
    (:func:`coinciding`)."""
    coinciding(fig)
    fit_titles(fig)
    seen = legibility(fig)
    meta = dict(zip(PNG_KEYS, (str(PNG_DPI), f"{seen['min_font_pt']:g}", str(len(seen["overlaps"])))))
    out = []
    for ext in ("png", "pdf"):
        path = Path(out_dir) / f"{name}.{ext}"
        atomic_write(path, lambda tmp, ext=ext: fig.savefig(tmp, format=ext, bbox_inches="tight", pad_inches=PAD_IN, dpi=PNG_DPI,
                                                            metadata=meta if ext == "png" else None))
        out.append(path)
    return out
