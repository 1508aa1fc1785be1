"""Chapter 7's claim (P1 §7): the mapping's best targets lie at the same relative depth, graded against two nulls.

The statistic is each mapping's distance from the relative-depth diagonal
(:meth:`~depthutils.measures.cross_model_mapping.MappingResult.diagonal_distance`) with its bootstrap interval over
held-out prompts (the maps fixed). A mapping shows P1's diagonal only if it passes both of:

* **the untrained target** (the null, :mod:`depthutils.analysis.mapping_null`): the same source mapped by the same
  call onto the deeper model's untrained initial weights. *Shown* if the trained pair's whole interval lies below
  the untrained pair's whole interval (nearer the diagonal than what the architecture gives without training);
  *not shown* if the trained pair's distance is no smaller than the untrained pair's; *mixed* otherwise;
* **chance**: the same best targets with the target layers permuted; *shown* if the interval lies at or below the
  5th percentile of the permuted distances, *not shown* if wholly above it, *mixed* otherwise.

A mapping's grade is the worse of the two tests, and at best mixed where most source layers share one best target;
the claim's is the worst over the mappings. Without an untrained target a mapping is graded on chance alone and at
best mixed. Beside the distance, ours and not graded: the error gap at the diagonal target
(:meth:`~depthutils.measures.cross_model_mapping.MappingResult.diagonal_gap`), a number that does not move in
whole-layer steps. The second seed (the positive control: a source mapped onto another seed of itself) is graded by the
same two tests and reported beside the verdict, not counted: it says whether the rule finds a diagonal where the
computation is the same. :func:`mapping` is re-exported by :mod:`depthutils.book.claims` (``claims.mapping``).
"""
from __future__ import annotations

import numpy as np

from depthutils.book.claim_table import CLAIMS, LEVEL, N_PERMUTATIONS, OUTCOMES, SHARED_TARGET
from depthutils.book.grading import _verdict, band, grade, interval_text, not_tested
from depthutils.core.numbers import enclose
from depthutils.measures.cross_model_mapping import MappingResult

__all__ = ["NULL_WORDS", "against_null", "distance_band", "mapping", "null_facts", "pair_name"]

#: the untrained-target test's outcome in words, for the chapter's prose ("the trained pair's best targets lie ...")
NULL_WORDS = {"shown": "nearer the diagonal than the untrained pair's, the two intervals apart",
              "mixed": "nearer the diagonal than the untrained pair's, but not outside its interval",
              "not shown": "no nearer the diagonal than the untrained pair's"}


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


def against_null(trained: tuple[float, float, float], untrained: tuple[float, float, float]) -> str:
    """The untrained-target test on two :func:`distance_band` triples: *shown* if the trained pair's interval lies
    wholly below the untrained pair's, *not shown* if its distance is no smaller than the untrained pair's, *mixed*
    otherwise."""
    (d, _, hi), (d0, lo0, _) = trained, untrained
    return "shown" if hi < lo0 else "not shown" if d >= d0 else "mixed"


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


def mapping(results: list[MappingResult], untrained: list[MappingResult] | None = None,
            control: MappingResult | None = None, n_permutations: int = N_PERMUTATIONS, seed: int = 0):
    """Chapter 7's verdict: each mapping of ``results`` against its source's mapping onto the untrained target
    (``untrained``, matched by source) and against permuted targets, with the rank correlation beside it;
    ``control`` (a source onto its second seed) is graded alike and reported, not counted."""
    c = CLAIMS["mapping"]
    results = [r for r in results if r.meta["params"]["source"] != r.meta["params"]["target"]]
    if not results:
        return not_tested("mapping", "one model only: a model mapped onto itself is the sanity check, not a test; "
                                     "give two models that share a tokenizer.")
    nulls = {r.meta["params"]["source"]: r for r in untrained or []}
    dist = {id(r): distance_band(r) for r in [*results, *nulls.values(), *([control] if control else [])]}
    grades, parts, notes, values = [], [], [], []
    for r in results:
        f, name, null = r.facts(), pair_name(r), nulls.get(r.meta["params"]["source"])
        d, lo, hi = dist[id(r)]
        by_chance, chance_words = _against_chance(r, dist[id(r)], n_permutations, seed)
        rho_lo, rho_hi = band(r, "rank_corr")
        text = f"{name}: distance {interval_text(d, lo, hi, '.3f')}"
        if null is None:
            by_null = "mixed"
            notes.append(f"{name}: no untrained target was mapped, so nothing says what the architecture gives "
                         "without training: graded on chance alone, at best mixed.")
            text += f"; no untrained target; against {chance_words} ({by_chance})"
        else:
            by_null = against_null(dist[id(r)], dist[id(null)])
            text += (f"; onto {null.meta['params']['target']} {interval_text(*dist[id(null)], '.3f')} ({by_null}); "
                     f"against {chance_words} ({by_chance}); error gap at the diagonal target (ours, not graded) "
                     f"{_gap(r)} against {_gap(null)} untrained")
        outcome = _worse(by_null, by_chance)
        if f["shared_frac"] > SHARED_TARGET:
            notes.append(f"{name}: {100 * f['shared_frac']:.0f}% of the source layers share one best target (layer "
                         f"{f['shared_layer']}), so the map cannot place them at distinct depths: graded at best "
                         "mixed.")
            outcome = _worse(outcome, "mixed")
        grades.append(outcome)
        values.append(f"{name}: {interval_text(d, lo, hi, '.3f')}"
                      + ("" if null is None else f" (untrained target {dist[id(null)][0]:.3f})"))
        parts.append(f"{text}; rank correlation of source and best-target depth "
                     f"{interval_text(f['rank_corr'], rho_lo, rho_hi)} ({outcome})")
    rows = {"untrained target (null)": "; ".join(
        f"{pair_name(n)}: {interval_text(*dist[id(n)], '.3f')}" for n in nulls.values()) or "—"}
    if control is not None:
        d, lo, hi = dist[id(control)]
        null = nulls.get(control.meta["params"]["source"])
        by_null = ("no untrained target" if null is None
                   else f"{against_null(dist[id(control)], dist[id(null)])} against the untrained target")
        by_chance = _against_chance(control, dist[id(control)], n_permutations, seed)[0]
        rows["second seed (positive control)"] = f"{pair_name(control)}: {interval_text(d, lo, hi, '.3f')}"
        notes.append(f"Positive control (not counted): {pair_name(control)}, a model onto another seed of itself, "
                     f"lies {interval_text(d, lo, hi, '.3f')} from the diagonal; the rule grades it {by_null} and "
                     f"{by_chance} against chance.")
    return _verdict(c, _worse(*grades), "; ".join(parts) + ".", notes, value="; ".join(values), rows=rows,
                    criterion=f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval over held-out prompts "
                              f"(maps fixed). Against the untrained target: shown if the interval lies wholly below "
                              "the untrained pair's interval, not shown if the distance is no smaller than the "
                              "untrained pair's, mixed otherwise. Against chance: shown if the interval lies at or "
                              f"below {c.shown.source}; not shown if it lies wholly above it; mixed otherwise. A "
                              "mapping's grade is the worse of the two; every mapping must show it.")


def null_facts(m) -> dict:
    """The chapter's words for a :class:`~depthutils.analysis.mapping_null.MappingNull`: ``test0`` and ``test1``,
    the first and last source's untrained-target test (:data:`NULL_WORDS`), ``target`` the untrained model's name,
    ``ctrl_test`` the positive control's test against the first source's untrained pair and ``ctrl`` the second
    seed's name (absent parts left out)."""
    pairs, out = m.pairs(), {}
    if not pairs:
        return out
    words = lambda t, u: NULL_WORDS[against_null(distance_band(t), distance_band(u))]  # noqa: E731
    out.update(test0=words(*pairs[0]), test1=words(*pairs[-1]), target=m.untrained[0].meta["params"]["target"])
    if m.control is not None:
        out.update(ctrl_test=words(m.control, m.untrained[0]), ctrl=m.control.meta["params"]["target"])
    return out
