"""Quadrature rules on ``[0, 1]`` for integrated gradients, each with an error estimate.

Integrated gradients integrates, for every layer (a *row*), a vector-valued integrand ``g(α) ∈ R^T`` (one
value per position) along the straight path ``α ∈ [0, 1]``. The rules live here, apart from the model code,
as captum keeps ``approximation_methods.py`` apart from its attribution classes:

* :func:`fixed_rule`: P1's left Riemann sum and Gauss–Legendre, each with a second set of weights on
  every other one of *the same points* (half resolution), so ``|A_K − A_half|`` estimates the error at no
  extra evaluation.
* :func:`adaptive`: a globally adaptive composite rule for integrands that are a staircase of narrow
  steps (trained models: attention saturating as the residual is scaled), where global polynomial rules
  put their nodes where nothing happens. It starts from ``panels`` (:data:`PANELS`) equal panels of 5
  equally spaced points on a dyadic grid. Per panel it compares Simpson on the whole panel (``S1``) with
  composite Simpson on its halves (``S2``): the Richardson-corrected (Boole) value
  ``S2 + (S2 − S1)/15`` is the estimate and ``|S2 − S1|`` its error bound (see :func:`_panel_sums`).
  Integrated gradients knows the antiderivative of the summed integrand (``F``: ``f`` along the path), at
  every point it evaluates, so each panel has its own completeness residual ``|Σ_t I_panel[t] − (F(right) −
  F(left))|``: a step that falls between a panel's points leaves its two Simpson sums in agreement, and only
  that residual sees it, in the panel that holds the step. A panel's score is its largest error over the
  columns plus its residual; every panel whose score is at least ``1/REFINE`` of the largest one is halved
  (its 5 points are reused, 4 new ones per panel), until every row's bound (its largest error plus its
  whole completeness residual ``|Σ_t I[t] − (F(1) − F(0))|``) is below ``tol`` times the largest |integral|,
  or the shared budget of evaluations is spent, or ``max_rounds`` rounds have run. Each round asks for all
  its new points, of every row, in one call of ``evaluate``: one batched pass, and one NDIF request.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from depthutils.core.errors import DepthError

RULES = ("riemann", "gauss", "adaptive")
#: the adaptive rule's defaults: error target (a share of the largest |attribution|), evaluations per layer
#: on average (a quarter of P1's K = 256), starting panels, refinement rounds
TOL, BUDGET, PANELS, MAX_ROUNDS = 1e-4, 64, 4, 16
#: a round halves every panel whose score is at least the largest one's ``1/REFINE``
REFINE = 4
# These were chosen on the integrands of five prompt × model cases (chapter 5's two prompts on the default
# model and on ladder-16, and "3 + 8 + 6 + 2 = " on ladder-16, whose layers 2 and 8 have a step of width
# 0.02 that the first grid misses), sampled at 4097–8193 points per layer: with 4 panels and 1/4, 64
# evaluations per layer gave 0.01–0.66 of Riemann-256's error in all five; with 8 panels up to 5.4 times it,
# with 2 panels up to 280 times. Each panel's own completeness residual replaced the row's residual charged to
# the panels by their width, which halves every panel of a row alike (tests/measures/test_quadrature.py's
# bump): on SmolLM2 (steps narrower than 0.01 in α) the width-charged rule missed completeness by 0.14–1.04 at
# these defaults; with each panel's own residual, by 0.002–0.095 on five of six prompts and 0.82 on one (out
# of rounds), and by 0.003–0.028 at 96 evaluations and 40 rounds (chapter 5's real-model sample).


def interpolatory_weights(nodes: np.ndarray) -> np.ndarray:
    """Weights on ``[0, 1]`` that integrate every polynomial of degree ``< len(nodes)`` exactly on ``nodes``
    (solved in the Legendre basis, which stays well conditioned)."""
    x = 2 * np.asarray(nodes, dtype=float) - 1
    V = np.polynomial.legendre.legvander(x, len(x) - 1).T  # [degree, node]
    moments = np.zeros(len(x))
    moments[0] = 1.0  # ∫_0^1 P_0 = 1; ∫_0^1 P_n(2α − 1) dα = 0 for n > 0
    return np.linalg.solve(V, moments)


def fixed_rule(rule: str, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Nodes ``α_k`` in ``[0, 1]``, weights ``w_k`` (summing to 1) and half-resolution weights of ``steps``-point
    ``rule``: P1's left Riemann sum (``α_k = k/K``, ``w_k = 1/K``; half: the even ``k`` at ``2/K``) or
    Gauss–Legendre (half: the interpolatory rule on every other node). The half weights are ``None`` when
    ``steps < 2`` (no error estimate)."""
    if rule == "riemann":
        nodes, w = np.arange(steps) / steps, np.full(steps, 1.0 / steps)
        half_on = lambda keep: np.full(len(keep), 1.0 / len(keep))  # noqa: E731
    elif rule == "gauss":
        x, w = np.polynomial.legendre.leggauss(steps)
        nodes, w = (x + 1) / 2, w / 2
        half_on = lambda keep: interpolatory_weights(nodes[keep])  # noqa: E731
    else:
        raise DepthError(f"rule must be one of {RULES}, got {rule!r}.")
    if steps < 2:
        return nodes, w, None
    keep = np.arange(0, steps, 2)
    half = np.zeros(steps)
    half[keep] = half_on(keep)
    return nodes, w, half


def quadrature(rule: str, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of a fixed ``rule`` (see :func:`fixed_rule`)."""
    nodes, w, _ = fixed_rule(rule, steps)
    return nodes, w


#: what ``evaluate`` gets and gives: one array of new α per row in, per row ``(g [K, T], F [K])`` out
Evaluate = Callable[[list[np.ndarray]], list[tuple[np.ndarray, np.ndarray]]]


@dataclass
class Adaptive:
    """What :func:`adaptive` found, per row: ``integral [R, T]``, ``error [R, T]`` (the panels' summed
    ``|S2 − S1|``), ``residual [R]`` (completeness), ``evaluations [R]``, the panels' edges, ``F(0)`` and
    ``F(1)``; and overall the ``rounds`` run and why it ``stopped`` ("tol", "budget" or "rounds")."""

    integral: np.ndarray
    error: np.ndarray
    residual: np.ndarray
    evaluations: np.ndarray
    rounds: int
    stopped: str
    edges: list = field(default_factory=list)
    F0: np.ndarray = None
    F1: np.ndarray = None

    def bound(self, skip: int = 0) -> np.ndarray:
        """Per row, the error bound of any one entry: ``max_t error[t] + residual`` (columns from ``skip``)."""
        return self.error[:, skip:].max(1) + self.residual


def _panel_sums(v: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boole's value and the error bound ``|S2 − S1|`` of panels ``[P]`` of width ``h`` from values ``v [P, 5, T]``.

    ``|S2 − S1|/15`` is Richardson's estimate of ``S2``'s error, but on narrow steps a panel can look
    converged before it is: on 100 random staircases (tests/measures/test_quadrature.py) it fell below the true error
    of the result in 35, and ``|S2 − S1|/3`` in 5. ``|S2 − S1|`` (the cruder ``S1``'s error) fell below it in
    3, so it is the bound. The bound does not change which panels are refined (they are ranked by it), only
    when the rule stops and what it reports."""
    h = h[:, None]
    s1 = h / 6 * (v[:, 0] + 4 * v[:, 2] + v[:, 4])
    s2 = h / 12 * (v[:, 0] + 4 * v[:, 1] + 2 * v[:, 2] + 4 * v[:, 3] + v[:, 4])
    return s2 + (s2 - s1) / 15, np.abs(s2 - s1)


def adaptive(evaluate: Evaluate, rows: int, *, tol: float = TOL, budget: int = BUDGET, panels: int = PANELS,
             max_rounds: int = MAX_ROUNDS, skip: int = 0) -> Adaptive:
    """Integrate ``rows`` vector-valued integrands on ``[0, 1]`` adaptively (see the module's docstring).

    Args:
        evaluate: gets one array of α per row (possibly empty) and returns, per row, the integrand at
            those α ``[K, T]`` and its antiderivative's total ``F(α) [K]`` (for the completeness residual;
            pass zeros where it is not known, and the residual then measures nothing).
        tol: stop when every row's error bound is below ``tol`` × the largest |integral|.
        budget: evaluations per row on average, shared by all rows (at least ``4·panels + 1``).
        skip: columns left out of the error norm and the scale (integrated gradients: the BOS column).
    """
    first = 4 * panels + 1
    if budget < first:
        raise DepthError(f"budget must be at least {first} evaluations per layer (4·panels + 1), got {budget}.")
    if tol <= 0:
        raise DepthError(f"tol must be a positive share of the largest attribution, got {tol}.")
    edges = [[(p / panels, 1.0 / panels) for p in range(panels)] for _ in range(rows)]  # (start, width)
    values: list[dict[float, np.ndarray]] = [{} for _ in range(rows)]
    Fs: list[dict[float, float]] = [{} for _ in range(rows)]
    new = [np.linspace(0.0, 1.0, first) for _ in range(rows)]
    total, used, rounds, stopped = budget * rows, 0, 0, "rounds"
    while True:
        out = evaluate(new)
        rounds += 1
        for r, (alphas, (g, F)) in enumerate(zip(new, out)):
            g, F = np.asarray(g, dtype=float), np.asarray(F, dtype=float)
            if g.shape[0] != len(alphas) or F.shape != (len(alphas),):
                raise DepthError(f"evaluate returned {g.shape[0]} values for {len(alphas)} points of row {r}.")
            for a, gv, Fv in zip(alphas, g, F):
                values[r][float(a)], Fs[r][float(a)] = gv, float(Fv)
            used += len(alphas)
        integral, error, residual, scores = _estimate(values, Fs, edges, skip)
        scale = np.abs(integral[:, skip:]).max() if integral[:, skip:].size else 0.0
        bound = error[:, skip:].max(1) + residual if integral[:, skip:].size else residual
        if bound.max() <= tol * scale:
            stopped = "tol"
            break
        if rounds >= max_rounds:
            break
        flat = [(s, r, i) for r, row in enumerate(scores) for i, s in enumerate(row)]
        top = max(s for s, _, _ in flat)
        chosen = sorted((x for x in flat if x[0] >= top / REFINE), reverse=True)[:(total - used) // 4]
        if not chosen:
            stopped = "budget"
            break
        new = [[] for _ in range(rows)]
        by_row: dict[int, set] = {}
        for _, r, i in chosen:
            by_row.setdefault(r, set()).add(i)
        for r, idx in by_row.items():
            kept = []
            for i, (a, h) in enumerate(edges[r]):
                if i in idx:  # halve: 4 new points at the quarter-steps of the half panels
                    kept += [(a, h / 2), (a + h / 2, h / 2)]
                    new[r] += [a + h * q / 8 for q in (1, 3, 5, 7)]
                else:
                    kept.append((a, h))
            edges[r] = kept
        new = [np.array(sorted(n), dtype=float) for n in new]
    return Adaptive(integral=integral, error=error, residual=residual,
                    evaluations=np.array([len(v) for v in values]), rounds=rounds, stopped=stopped,
                    edges=[[a for a, _ in e] + [1.0] for e in edges],
                    F0=np.array([F[0.0] for F in Fs]), F1=np.array([F[1.0] for F in Fs]))


def _estimate(values, Fs, edges, skip):
    """Per row: the integral, the error vector, the completeness residual and each panel's refinement score:
    its largest error over the columns plus its own completeness residual ``|Σ_t I_panel[t] − (F(right) − F(left))|``."""
    integral, error, residual, scores = [], [], [], []
    for vals, F, panels in zip(values, Fs, edges):
        a = np.array([p[0] for p in panels])
        h = np.array([p[1] for p in panels])
        v = np.stack([np.stack([vals[float(x)] for x in ai + hi * np.arange(5) / 4]) for ai, hi in zip(a, h)])
        boole, err = _panel_sums(v, h)
        I, E = boole.sum(0), err.sum(0)
        res = abs(I.sum() - (F[1.0] - F[0.0]))
        integral.append(I)
        error.append(E)
        residual.append(res)
        own = err[:, skip:].max(1) if err[:, skip:].size else np.zeros(len(h))
        # each panel's own completeness residual: F is known at both of its edges
        rise = np.array([F[float(ai + hi)] - F[float(ai)] for ai, hi in zip(a, h)])
        scores.append(own + np.abs(boole.sum(1) - rise))
    return np.stack(integral), np.stack(error), np.array(residual), scores
