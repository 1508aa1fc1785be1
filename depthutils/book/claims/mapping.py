"""Chapter 7's claim (P1 §7): the mapping's best targets lie at the same relative depth, graded against two nulls.

The statistic is each mapping's distance from the relative-depth diagonal
(:meth:`~depthutils.measures.cross_model_mapping.MappingResult.diagonal_distance`) with its bootstrap interval over
held-out prompts (the maps fixed). A mapping shows P1's diagonal only if it passes both of:

* **the untrained target** (the null, :mod:`depthutils.analysis.mapping_null`): the same source mapped by the same
  call onto :data:`~depthutils.analysis.mapping_null.N_INITS` untrained initialisations of the deeper model (its own
  initial weights and draws from the next seeds), a spread rather than one draw. *Shown* if the trained pair's whole
  interval lies below every initialisation's interval; *not shown* if its distance is no smaller than the smallest
  of theirs (inside their spread or beyond it); *mixed* otherwise, and at best mixed with fewer initialisations
  (:data:`~depthutils.book.claim_table.UNTRAINED_RULE`, the rule's words);
* **chance**: the same best targets with the target layers permuted; *shown* if the interval lies at or below the
  5th percentile of the permuted distances, *not shown* if wholly above it, *mixed* otherwise.

A mapping's grade is the worse of the two tests, and at best mixed where most source layers share one best target;
the claim's is the worst over the mappings. Without an untrained target a mapping is graded on chance alone and at
best mixed. Beside the distance, ours and not graded: the error gap at the diagonal target
(:meth:`~depthutils.measures.cross_model_mapping.MappingResult.diagonal_gap`), a number that does not move in
whole-layer steps. The second seed (the positive control: a source mapped onto another seed of itself) is graded by the
same two tests, its untrained target being initialisations of the second seed (the source's shape, not the deeper
model's), and reported beside the verdict, not counted: it says whether the rule finds a diagonal where the
computation is the same. Its figures are here too: one mapping's heatmap (:func:`figure`), the best-match curves
(:func:`curves_figure`) and the trained pair beside its nulls (:func:`null_figure`), each at the book's text column's
width, its key in a legend outside the heatmaps.
"""
from __future__ import annotations

import numpy as np

from depthutils.analysis.mapping_null import N_INITS
from depthutils.book.claim_table import CLAIMS, LEVEL, N_PERMUTATIONS, OUTCOMES, SHARED_TARGET, UNTRAINED_RULE
from depthutils.book.grading import band, grade, interval_text, not_tested, verdict_of
from depthutils.book.legends import below
from depthutils.book.plotstyle import CMAPS, ROBUST_PERCENTILE, heatmap, robust_max, subplots, yerr
from depthutils.core.depth import layer_depth
from depthutils.core.errors import DepthError
from depthutils.core.numbers import enclose
from depthutils.measures.cross_model_mapping import MappingResult

__all__ = ["NULL_WORDS", "against_null", "curves_figure", "distance_band", "figure", "null_facts", "null_figure",
           "null_lines", "pair_name", "verdict"]

#: the untrained-target test's outcome in words, for the chapter's prose ("the trained pair's best targets lie ...")
NULL_WORDS = {"shown": "nearer the diagonal than every untrained initialisation's, its interval apart from all of theirs",
              "mixed": "nearer the diagonal than every untrained initialisation's, but not apart from all their "
                       "intervals (or with too few initialisations to say)",
              "not shown": "no nearer the diagonal than the nearest untrained initialisation's"}


def pair_name(r: MappingResult) -> str:
    """``"ladder-4 → ladder-16"``: a mapping by its source and target."""
    p = r.meta["params"]
    return f"{p['source']} → {p['target']}"


def distance_band(r: MappingResult) -> tuple[float, float, float]:
    """``(distance, lo, hi)``: the distance from the diagonal with its bootstrap interval over held-out prompts
    (the point twice where there is no interval), the interval widened to hold the point as it is printed."""
    d = r.facts()["distance"]
    lo, hi = band(r, "distance")
    return (d, d, d) if lo is None else (d, *enclose(d, lo, hi))


def against_null(trained: tuple[float, float, float], *untrained: tuple[float, float, float]) -> str:
    """The untrained-target test on :func:`distance_band` triples, the trained pair's and one per untrained
    initialisation: *shown* if the trained pair's interval lies wholly below every initialisation's interval, *not
    shown* if its distance is no smaller than the smallest of theirs (inside their spread or beyond it), *mixed*
    otherwise (:data:`~depthutils.book.claim_table.UNTRAINED_RULE`; the count of initialisations is the caller's)."""
    if not untrained:
        raise DepthError("against_null needs at least one untrained initialisation's distance.")
    d, _, hi = trained
    return ("shown" if hi < min(lo0 for _, lo0, _ in untrained)
            else "not shown" if d >= min(d0 for d0, _, _ in untrained) else "mixed")


def _by_null(dist: tuple, inits: list[tuple]) -> str:
    """:func:`against_null`, at best mixed with fewer than :data:`N_INITS` initialisations."""
    outcome = against_null(dist, *inits)
    return _worse(outcome, "mixed") if len(inits) < N_INITS else outcome


def _spread(results: list[MappingResult], dist: dict) -> str:
    """``"0.375 (interval of zero width), 0.375 [...], 0.312 [...]"``: every initialisation's distance."""
    return ", ".join(interval_text(*dist[id(r)], ".3f") for r in results)


def _against_chance(r: MappingResult, dist: tuple[float, float, float], n_permutations: int,
                    seed: int) -> tuple[str, str]:
    """The chance test of ``r`` on its :func:`distance_band` ``dist``: ``(outcome, words)``."""
    null = r.null_distances(n_permutations, seed)
    q05 = float(np.percentile(null, 5))
    return grade(*dist, q05, q05), (f"chance's 5th percentile {q05:.3f} (median {np.median(null):.3f}; "
                                    f"{100 * np.mean(null <= dist[0]):.0f}% of permutations are as close)")


def _gap(r: MappingResult) -> str:
    """The row's mean error minus the error at the diagonal target, with its interval (``diagonal_gap``)."""
    return interval_text(r.facts()["diagonal_gap"], *band(r, "diagonal_gap"), "+.3f")


def _worse(*outcomes: str) -> str:
    return max(outcomes, key=OUTCOMES.index)


def verdict(results: list[MappingResult], untrained: list[MappingResult] | None = None,
            control: MappingResult | None = None, control_untrained: list[MappingResult] | None = None,
            n_permutations: int = N_PERMUTATIONS, seed: int = 0):
    """Chapter 7's verdict: each mapping of ``results`` against its source's mappings onto the untrained
    initialisations of the target (``untrained``, matched by source) and against permuted targets, with the rank
    correlation beside it; ``control`` (a source onto its second seed) is graded alike against its own untrained
    initialisations (``control_untrained``: the second seed's, which have the control's shape) and reported, not
    counted."""
    c = CLAIMS["mapping"]
    results = [r for r in results if r.meta["params"]["source"] != r.meta["params"]["target"]]
    if not results:
        return not_tested("mapping", "one model only: a model mapped onto itself is the sanity check, not a test; "
                                     "give two models that share a tokenizer.")
    nulls: dict[str, list[MappingResult]] = {}
    for n in untrained or []:
        nulls.setdefault(n.meta["params"]["source"], []).append(n)
    ctrl_nulls = list(control_untrained or []) if control is not None else []
    if any(n.shape != control.shape for n in ctrl_nulls):
        raise DepthError(f"the positive control {pair_name(control)} maps {control.shape[0]} onto "
                         f"{control.shape[1]} layers; its untrained target must have that shape, got "
                         + ", ".join(f"{pair_name(n)} ({n.shape[0]} onto {n.shape[1]})" for n in ctrl_nulls) + ".")
    everything = [*results, *(n for ns in nulls.values() for n in ns), *([control] if control else []), *ctrl_nulls]
    dist = {id(r): distance_band(r) for r in everything}
    grades, parts, notes, values = [], [], [], []
    for r in results:
        f, name, inits = r.facts(), pair_name(r), nulls.get(r.meta["params"]["source"], [])
        d, lo, hi = dist[id(r)]
        by_chance, chance_words = _against_chance(r, dist[id(r)], n_permutations, seed)
        rho_lo, rho_hi = band(r, "rank_corr")
        text = f"{name}: distance {interval_text(d, lo, hi, '.3f')}"
        if not inits:
            by_null = "mixed"
            notes.append(f"{name}: no untrained target was mapped, so nothing says what the architecture gives "
                         "without training: graded on chance alone, at best mixed.")
            text += f"; no untrained target; against {chance_words} ({by_chance})"
        else:
            by_null = _by_null(dist[id(r)], [dist[id(n)] for n in inits])
            if len(inits) < N_INITS:
                notes.append(f"{name}: only {len(inits)} untrained initialisation(s) of the target (fewer than "
                             f"{N_INITS}), too few to show how the untrained distance varies from draw to draw: the "
                             "untrained-target test is at best mixed.")
            text += (f"; onto {len(inits)} untrained initialisation(s), "
                     f"{', '.join(n.meta['params']['target'] for n in inits)}: {_spread(inits, dist)} ({by_null}); "
                     f"against {chance_words} ({by_chance}); error gap at the diagonal target (ours, not graded) "
                     f"{_gap(r)} against {', '.join(_gap(n) for n in inits)} untrained")
        outcome = _worse(by_null, by_chance)
        if f["shared_frac"] > SHARED_TARGET:
            notes.append(f"{name}: {100 * f['shared_frac']:.0f}% of the source layers share one best target (layer "
                         f"{f['shared_layer']}), so the map cannot place them at distinct depths: graded at best "
                         "mixed.")
            outcome = _worse(outcome, "mixed")
        grades.append(outcome)
        values.append(f"{name}: {interval_text(d, lo, hi, '.3f')}" + (
            f" (untrained initialisations {', '.join(f'{dist[id(n)][0]:.3f}' for n in inits)})" if inits else ""))
        parts.append(f"{text}; rank correlation of source and best-target depth "
                     f"{interval_text(f['rank_corr'], rho_lo, rho_hi)} ({outcome})")
    rows = {"untrained target (null)": "; ".join(
        f"{pair_name(ns[0])} ({len(ns)} initialisation{'s' * (len(ns) > 1)}): {_spread(ns, dist)}"
        for ns in nulls.values()) or "—"}
    if control is not None:
        d, lo, hi = dist[id(control)]
        by_chance = _against_chance(control, dist[id(control)], n_permutations, seed)[0]
        rows["second seed (positive control)"] = f"{pair_name(control)}: {interval_text(d, lo, hi, '.3f')}"
        if ctrl_nulls:
            by_null = (f"{_by_null(dist[id(control)], [dist[id(n)] for n in ctrl_nulls])} against its own untrained "
                       f"target ({len(ctrl_nulls)} initialisation(s) of its shape, "
                       f"{', '.join(n.meta['params']['target'] for n in ctrl_nulls)}: {_spread(ctrl_nulls, dist)})")
            rows["second seed (positive control)"] += (f"; its untrained target {pair_name(ctrl_nulls[0])} "
                                                       f"({len(ctrl_nulls)} initialisations): "
                                                       f"{_spread(ctrl_nulls, dist)}")
        else:
            by_null = "not graded against an untrained target (none of its shape was mapped)"
        notes.append(f"Positive control (not counted): {pair_name(control)}, a model onto another seed of itself, "
                     f"lies {interval_text(d, lo, hi, '.3f')} from the diagonal; the rule grades it {by_null} and "
                     f"{by_chance} against chance.")
    return verdict_of(c, _worse(*grades), "; ".join(parts) + ".", notes, value="; ".join(values), rows=rows,
                    criterion=f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval over held-out prompts "
                              f"(maps fixed). {UNTRAINED_RULE}. Against chance: shown if the interval lies at or "
                              f"below {c.shown.source}; not shown if it lies wholly above it; mixed otherwise. A "
                              "mapping's grade is the worse of the two; every mapping must show it.")


def null_facts(m) -> dict:
    """The chapter's words for a :class:`~depthutils.analysis.mapping_null.MappingNull`: ``test0`` and ``test1``,
    the first and last source's untrained-target test (:data:`NULL_WORDS`), ``target`` the untrained model's name (its
    own initial weights), ``inits`` how many initialisations of it were mapped, ``dist0`` and ``dist1`` the first and
    last source's distance onto each of them; ``ctrl`` the second seed's name, ``ctrl_test`` the positive control's
    test against its own untrained target (the second seed's initialisations), ``ctrl_target`` that target's name and
    ``ctrl_dist`` the distances onto each of its initialisations (absent parts left out)."""
    pairs, out = [(t, u) for t, u in m.pairs() if u], {}
    words = lambda t, inits: NULL_WORDS[_by_null(distance_band(t), [distance_band(u) for u in inits])]  # noqa: E731
    dists = lambda inits: [round(distance_band(u)[0], 3) for u in inits]  # noqa: E731
    if pairs:
        out.update(test0=words(*pairs[0]), test1=words(*pairs[-1]), target=pairs[0][1][0].meta["params"]["target"],
                   inits=len(pairs[0][1]), dist0=dists(pairs[0][1]), dist1=dists(pairs[-1][1]))
    if m.control is not None:
        out["ctrl"] = m.control.meta["params"]["target"]
        out["ctrl_test"] = "not graded against an untrained target of its shape (none was mapped)"
        if m.control_untrained:
            out.update(ctrl_test=words(m.control, m.control_untrained), ctrl_inits=len(m.control_untrained),
                       ctrl_target=m.control_untrained[0].meta["params"]["target"],
                       ctrl_dist=dists(m.control_untrained))
    return out


def null_lines(m) -> str:
    """Every untrained initialisation's mapping in one line each: its distance from the diagonal with its interval
    and its best targets, so that the spread of the null is read beside the trained pairs'."""
    lines = []
    for trained, inits in [*m.pairs(), *([(m.control, m.control_untrained)] if m.control is not None else [])]:
        if not inits:
            continue
        lines.append(f"{pair_name(trained)} against {len(inits)} untrained initialisations: "
                     f"{interval_text(*distance_band(trained), '.3f')} from the diagonal, best targets "
                     f"{[int(b) for b in trained.best]}")
        lines += [f"  onto {n.meta['params']['target']}: {interval_text(*distance_band(n), '.3f')}, best targets "
                  f"{[int(b) for b in n.best]}" for n in inits]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ figures

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


def figure(result):
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


def curves_figure(results):
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


def null_figure(trained, untrained, control=None):
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
