"""The quadrature rules of integrated gradients (depthutils.measures.quadrature) on integrals with closed forms, and
the adaptive rule inside integrated gradients against the plain-PyTorch oracle."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
from conftest import ATOL

import depthutils
from depthutils.core.errors import DepthError
from depthutils.core.prompts import encode
from depthutils.measures import quadrature as quad


def evaluator(g, F, calls=None):
    """``evaluate`` for :func:`quad.adaptive` from closed forms: ``g(row, α) [K, T]`` and ``F(row, α) [K]``."""
    def evaluate(new):
        if calls is not None:
            calls.append([len(a) for a in new])
        return [(g(r, np.asarray(a)), F(r, np.asarray(a))) for r, a in enumerate(new)]
    return evaluate


def softplus(x):
    return np.logaddexp(0.0, x)


def sigmoid(x):
    return 0.5 * (1 + np.tanh(x / 2))


def staircase(rng, rows=3, T=4, steps=(1, 4)):
    """A trained model's integrand, as measured on the embedded models: per row and column a few sigmoid steps of width
    0.01–0.02 in α at random places in [0.1, 0.9], on a smooth background; its integral and antiderivative
    in closed form. The steps of a row are at the same α in every column (position), as when an attention
    pattern saturates; their heights differ."""
    n = rng.integers(*steps, size=(rows, 1)) if steps[1] > steps[0] else np.full((rows, 1), steps[0])
    J = int(n.max())
    c = rng.uniform(0.1, 0.9, size=(rows, 1, J))  # a row's steps sit at the same α in every column
    w = rng.uniform(0.01, 0.02, size=(rows, 1, J)) / 4  # sigmoid scale: 10–90% rise over ~4.4 w
    a = rng.normal(size=(rows, T, J)) * (np.arange(J) < n[..., None])
    p = rng.normal(size=(rows, T, 3))  # background p0 + p1 α + p2 α²

    def g(r, al):
        al = al[:, None, None]
        return (a[r] * sigmoid((al - c[r]) / w[r])).sum(-1) + p[r, :, 0] + p[r, :, 1] * al[..., 0] \
            + p[r, :, 2] * al[..., 0] ** 2

    def antider(r, al):  # [K, T]
        al = al[:, None, None]
        steps_ = (a[r] * w[r] * (softplus((al - c[r]) / w[r]) - softplus(-c[r] / w[r]))).sum(-1)
        x = al[..., 0]
        return steps_ + p[r, :, 0] * x + p[r, :, 1] * x ** 2 / 2 + p[r, :, 2] * x ** 3 / 3

    exact = np.stack([antider(r, np.array([1.0]))[0] for r in range(rows)])
    return g, (lambda r, al: antider(r, al).sum(-1)), exact


@pytest.mark.parametrize("degree", [3, 5])
def test_polynomials_are_exact(degree):
    """Boole's panels integrate a quintic exactly. Simpson's, on which the error estimate rests, are exact to
    degree 3, so a cubic meets any tol at the first round with a zero estimate; a quintic's estimate is not
    zero (it is the error of the uncorrected Simpson sum), and it still bounds the true error, 0."""
    rng = np.random.default_rng(degree)
    coef = rng.normal(size=(2, 3, degree + 1))  # rows, columns, coefficients
    P = np.polynomial.polynomial
    g = lambda r, al: np.stack([P.polyval(al, coef[r, t]) for t in range(3)], -1)  # noqa: E731
    F_t = lambda r, al: np.stack([P.polyval(al, P.polyint(coef[r, t])) for t in range(3)], -1)  # noqa: E731
    exact = np.stack([F_t(r, np.array([1.0]))[0] for r in range(2)])
    q = quad.adaptive(evaluator(g, lambda r, al: F_t(r, al).sum(-1)), 2, tol=1e-12, budget=64)
    np.testing.assert_allclose(q.integral, exact, atol=1e-12)
    assert q.residual.max() < 1e-12
    if degree == 3:
        assert q.rounds == 1 and q.stopped == "tol" and q.error.max() < 1e-12
        assert (q.evaluations == 4 * quad.PANELS + 1).all()
    else:
        assert q.error.max() > 1e-8


@pytest.mark.parametrize("rule,steps,degree", [("gauss", 8, 15), ("riemann", 256, 0)])
def test_fixed_rules_on_polynomials(rule, steps, degree):
    """Gauss–Legendre with K nodes is exact to degree 2K − 1; the left Riemann sum to degree 0; both weight sums
    are 1; the half-resolution weights also sum to 1 and are exact to a lower degree."""
    nodes, w, half = quad.fixed_rule(rule, steps)
    assert w.sum() == pytest.approx(1) and half.sum() == pytest.approx(1)
    for n in range(degree + 1):
        assert w @ nodes ** n == pytest.approx(1 / (n + 1), abs=1e-12)
    assert abs(w @ nodes ** (degree + 1) - 1 / (degree + 2)) > 1e-11  # the next degree is not exact
    if rule == "gauss":
        for n in range(steps // 2):
            assert half @ nodes ** n == pytest.approx(1 / (n + 1), abs=1e-10)


def test_fixed_rules_error_estimates_on_a_smooth_integral():
    """On a smooth integrand the half-resolution estimate of the Riemann sum is its error to first order
    (``E_K ≈ c/K``, so ``A_{K/2} − A_K ≈ E_K``: within a factor of 1.5 here), and Gauss–Legendre's (a lower-degree
    rule on every other node) is at least its true error."""
    f = lambda al: np.exp(2 * al) * np.cos(3 * al)  # noqa: E731
    exact = (np.exp(2) * (2 * np.cos(3) + 3 * np.sin(3)) - 2) / 13
    for rule, K in [("riemann", 64), ("riemann", 256), ("gauss", 4), ("gauss", 8)]:
        nodes, w, half = quad.fixed_rule(rule, K)
        true, est = abs(w @ f(nodes) - exact), abs((w - half) @ f(nodes))
        if rule == "riemann":
            assert true / 1.5 <= est <= 1.5 * true, (rule, K, est, true)
        else:
            assert est >= true, (rule, K, est, true)
    assert quad.fixed_rule("riemann", 1)[2] is None  # one point: no estimate


def test_adaptive_reaches_tol_and_its_estimate_bounds_the_error():
    """100 random staircases: the rule stops at tol within its budget in every case, and its error bound
    (largest estimate plus the completeness residual) is at least the true error in at least 95."""
    rng = np.random.default_rng(1234)
    bounded, tol, budget = 0, 1e-4, 256
    for _ in range(100):
        g, F, exact = staircase(rng)
        calls = []
        q = quad.adaptive(evaluator(g, F, calls), 3, tol=tol, budget=budget, max_rounds=40)
        scale = np.abs(exact).max()
        true = np.abs(q.integral - exact).max(1)
        assert q.stopped == "tol", (q.stopped, q.rounds, q.bound().max() / scale)
        assert q.bound().max() <= tol * np.abs(q.integral).max()
        assert q.evaluations.sum() <= budget * 3 and sum(map(sum, calls)) == q.evaluations.sum()
        assert len(calls) == q.rounds  # one evaluate call (one batched pass) per round
        bounded += bool(np.all(q.bound() >= true))
    assert bounded >= 95, bounded


def test_adaptive_beats_the_riemann_sum_on_a_staircase():
    """At a quarter of the Riemann sum's points, the adaptive rule is closer to the exact integral."""
    rng = np.random.default_rng(7)
    wins = 0
    for _ in range(20):
        g, F, exact = staircase(rng, rows=4, T=6, steps=(2, 5))
        q = quad.adaptive(evaluator(g, F), 4, tol=1e-9, budget=64)
        nodes, w, _ = quad.fixed_rule("riemann", 256)
        riemann = np.stack([w @ g(r, nodes) for r in range(4)])
        wins += np.abs(q.integral - exact).max() < np.abs(riemann - exact).max()
        assert q.evaluations.sum() <= 64 * 4
    assert wins >= 18, wins


def test_adaptive_stays_in_budget_and_is_deterministic():
    rng = np.random.default_rng(3)
    g, F, exact = staircase(rng, rows=5, T=3, steps=(3, 4))
    a = quad.adaptive(evaluator(g, F), 5, tol=1e-12, budget=40)
    b = quad.adaptive(evaluator(g, F), 5, tol=1e-12, budget=40)
    assert a.stopped == "budget" and a.evaluations.sum() <= 40 * 5
    np.testing.assert_array_equal(a.integral, b.integral)
    np.testing.assert_array_equal(a.evaluations, b.evaluations)
    assert a.edges == b.edges
    for edges in a.edges:  # panels tile [0, 1] on the dyadic grid
        assert edges[0] == 0 and edges[-1] == 1 and np.all(np.diff(edges) > 0)
        assert all(float(e * 2 ** 20).is_integer() for e in edges)


def test_adaptive_refuses_what_it_cannot_do():
    g, F, _ = staircase(np.random.default_rng(0))
    with pytest.raises(DepthError, match=f"budget must be at least {4 * quad.PANELS + 1}"):
        quad.adaptive(evaluator(g, F), 3, budget=4 * quad.PANELS)
    with pytest.raises(DepthError, match="tol must be"):
        quad.adaptive(evaluator(g, F), 3, tol=0)
    with pytest.raises(DepthError, match="rule must be one of"):
        quad.fixed_rule("simpson", 8)


@pytest.mark.parametrize("family", ["llama", "gpt_neox"])
@pytest.mark.parametrize("method", ["stack", "batched"])
def test_adaptive_integrated_gradients_match_oracle(tiny, prompts, family, method):
    """The adaptive rule's attribution equals the plain-PyTorch oracle's converged one (Gauss–Legendre, 64 nodes)
    within its own error bound plus the oracle tolerance; it satisfies completeness; its rounds are its passes."""
    handle, hf = tiny(family)
    p = prompts[1]
    got = depthutils.integrated_gradients(handle, p, rule="adaptive", tol=1e-5, budget=64, batch_size=6,
                                          layers_per_pass=2, method=method)
    enc = encode(handle.tokenizer, p)
    want = oracle.integrated_gradients(hf, family, enc.input_ids, enc.predict_positions, enc.answer_ids, steps=64,
                                       gauss=True)
    assert np.abs(want).max() > 20 * ATOL  # the tiny model's attribution is ~1e-3: a real comparison
    bound = got.error_bars()[:, None] + ATOL
    assert np.all(np.abs(got.attribution - want)[:, 1:] <= bound)
    delta = got.f_x - got.f_b
    np.testing.assert_allclose(got.attribution.sum(1), delta, atol=1e-5 * np.abs(got.attribution).max() + ATOL)
    assert got.meta["params"]["rule"] == "adaptive" and got.evaluations <= 64 * handle.n_layers
    assert 1 <= got.rounds <= quad.MAX_ROUNDS
    assert "evaluations" in got.findings() and "estimated error" in got.findings()


def test_every_rule_reports_an_error_and_a_residual(tiny, prompts):
    """Riemann and Gauss carry a half-resolution error estimate per cell and the completeness residual; the
    estimate of the Riemann sum bounds its true error against a converged reference on a tiny model."""
    handle, _ = tiny("llama")
    ref = depthutils.integrated_gradients(handle, prompts[1], steps=64, rule="gauss")
    for rule, K in [("riemann", 64), ("gauss", 8)]:
        r = depthutils.integrated_gradients(handle, prompts[1], steps=K, rule=rule)
        assert r.error.shape == r.attribution.shape and r.residual.shape == (handle.n_layers,)
        np.testing.assert_allclose(r.residual, np.abs(r.attribution.sum(1) - (r.f_x - r.f_b)), atol=1e-12)
        assert r.evaluations == handle.n_layers * (K + (rule == "gauss")) and r.rounds == 1
    riemann = depthutils.integrated_gradients(handle, prompts[1], steps=8)
    true = np.abs(riemann.attribution - ref.attribution)[:, 1:].max(1)
    assert np.all(riemann.error_bars() >= true - ATOL)
    assert true.max() > 2 * ATOL  # the Riemann error is real, so the bound is tested


def test_a_bump_between_the_first_points_is_refined_where_it_is():
    """A narrow bump of the integrand that falls between the first grid's points (every Simpson sum is 0 there)
    is seen only by the completeness residual of the panel that holds it: the second round halves that panel
    alone (4 new points in row 1, none elsewhere), and the rule then reaches tol with the bump's integral."""
    c, w, height = 0.28, 0.002, 1.0  # between the first grid's points 0.25 and 0.3125
    bump = lambda al: height * np.exp(-0.5 * ((al - c) / w) ** 2)  # noqa: E731
    area = height * w * np.sqrt(2 * np.pi)
    smooth = lambda al: 0.1 * np.ones_like(al)  # noqa: E731

    def g(r, al):
        return np.stack([smooth(al) + (bump(al) if r == 1 else 0.0), smooth(al)], -1)

    def F(r, al):
        from math import erf
        rise = np.array([0.5 * area * (1 + erf((a - c) / (w * np.sqrt(2)))) - 0.5 * area * (1 + erf(-c / (w * np.sqrt(2))))
                         for a in np.atleast_1d(al)])
        return 0.2 * al + (rise if r == 1 else 0.0)

    calls = []
    q = quad.adaptive(evaluator(g, F, calls), 3, tol=1e-4, budget=128, max_rounds=40)
    assert calls[0] == [4 * quad.PANELS + 1] * 3
    assert calls[1] == [0, 4, 0], calls[1]  # only the panel [0.25, 0.5] of row 1
    assert q.stopped == "tol"
    np.testing.assert_allclose(q.integral[1].sum(), 0.2 + area, rtol=1e-3)
