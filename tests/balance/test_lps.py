"""LPS, LPA, MPA (thesis §8.2–8.5): coefficients, closed forms, minimal flow, step counts, counters, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hermes.balance.flow import check_balancing, flow_error
from hermes.balance.model import Model
from hermes.balance.polynomial.balancing_operator import operator_rows
from hermes.balance.polynomial.charpoly import (
    COEFFICIENT_METHODS,
    berlekamp_massey,
    charpoly_berkowitz,
    charpoly_faddeev,
    charpoly_newton,
    generalized_laplacian,
    laplacian_polynomial,
)
from hermes.balance.polynomial.lps import lpa, lpa_iter, lps, lps_iter
from hermes.balance.polynomial.mpa import MPAParams, mpa, mpa_iter
from hermes.balance.registry import BALANCERS, check_params
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from tests.balance.graphs import KINDS, random_model, unusable_models
from tests.tolerances import (
    balancing_floor,
    balancing_tol,
    charpoly_exact,
    charpoly_tol,
    eig_tol,
    flops,
    gamma,
    monomial_tol,
    mpa_coefficient_tol,
    mpa_flow_tol,
    polynomial_flow_tol,
    potential_flow_tol,
)

#: the balancers this family registers
REGISTRY = {name: BALANCERS[name] for name in
            ("lps", "lpa", "mpa", "chebyshev")}

CHARPOLY = {"faddeev": charpoly_faddeev, "newton": charpoly_newton, "berkowitz": charpoly_berkowitz}


def lap_d(m: Model) -> np.ndarray:
    """``A = L D⁻¹`` (dense)."""
    return m.laplacian.toarray() / m.capacities[None, :]


def distinct_eigenvalues(m: Model) -> int:
    """Equal eigenvalues are computed within ``eig_tol`` each: a gap over twice that separates two."""
    gl = generalized_laplacian(m)
    return 1 + int(np.sum(np.diff(np.linalg.eigvalsh(gl)) > 2 * eig_tol(gl)))


# -- coefficients --------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", COEFFICIENT_METHODS)
@pytest.mark.parametrize("kind,p", [(k, p) for k in KINDS for p in (2, 5, 9)])
def test_coefficients_agree_with_the_exact_polynomial(method, kind, p):
    # the reference is exact (rational arithmetic); the bound E_k is Newton's power-sum error bound: it grows
    # like u ‖A‖ᵏ, so a_p (= 0) is known only to ~u ‖A‖ᵖ absolutely (tests/tolerances.py::charpoly_tol)
    m = random_model(kind, p, 10 + p)
    a = laplacian_polynomial(m, method)
    gl = generalized_laplacian(m)
    ref, tol = charpoly_exact(gl), charpoly_tol(gl)
    assert a.shape == (p + 1,) and a[0] == 1.0
    assert np.all(np.abs(a - ref) <= tol)
    assert abs(a[p]) <= tol[p] + abs(ref[p])  # a_p = μ_1 ⋯ μ_p = 0, up to rounding (ref[p]: 𝓛 as stored)
    assert np.all(a[1:p] * (-1.0) ** np.arange(1, p) > 0)  # a_k = (−1)^k e_k(μ) ≠ 0 for k < p


@pytest.mark.parametrize("method", COEFFICIENT_METHODS)
def test_coefficients_of_a_general_matrix(method):
    # the three are characteristic-polynomial algorithms for any square matrix, not only Laplacians
    a = np.random.default_rng(3).standard_normal((7, 7))
    assert np.all(np.abs(CHARPOLY[method](a) - charpoly_exact(a)) <= charpoly_tol(a))
    assert CHARPOLY[method](np.zeros((1, 1))).tolist() == [1.0, 0.0]
    # L D⁻¹ is similar to 𝓛: same coefficients, each side within its own bound of the common exact ones
    m = random_model("tree+", 8, 4)
    ld, gl = lap_d(m), generalized_laplacian(m)
    tol = charpoly_tol(ld) + charpoly_tol(gl)
    assert np.all(np.abs(CHARPOLY[method](ld) - laplacian_polynomial(m, "berkowitz"))[:-1] <= tol[:-1])


# -- Berlekamp–Massey (Alg. 14) ------------------------------------------------------------------------
def test_berlekamp_massey_on_exact_sequences():
    assert berlekamp_massey([0, 1, 1, 2, 3, 5, 8, 13, 21]).tolist() == [1, -1, -1]  # Fibonacci
    assert berlekamp_massey([3, 6, 12, 24, 48]).tolist() == [1, -2]
    assert berlekamp_massey([1, 0, 1, 0, 1, 0, 1]).tolist() == [1, 0, -1]  # a zero discrepancy midway
    assert berlekamp_massey([0, 0, 0, 0]).tolist() == [1]
    # a random integer recurrence of order 4 (small integers: exact in double precision)
    rng = np.random.default_rng(5)
    coef = rng.integers(-2, 3, 4).astype(float)
    coef[-1] = 1.0
    s = list(rng.integers(-3, 4, 4).astype(float))
    for n in range(4, 12):
        s.append(-sum(coef[i] * s[n - 1 - i] for i in range(4)))
    assert berlekamp_massey(s).tolist() == [1.0, *coef]


def test_berlekamp_massey_tolerance_and_early_termination():
    z = np.random.default_rng(0).standard_normal(6)
    s = 2.0 ** np.arange(6) * (1 + 1e-15 * z)
    assert len(berlekamp_massey(s)) > 2  # exact test: rounding noise raises the degree
    # α₁ = −s_n / s_{n−1} of terms perturbed by ≤ 1e-15 max|z| relative each, plus a few roundings
    assert np.allclose(berlekamp_massey(s, 1e-13), [1, -2], rtol=2 * (1e-15 * np.abs(z).max() + flops(4)), atol=0)
    noisy = np.concatenate([2.0 ** np.arange(6), [7.0, -3.0, 11.0]])  # junk after six good terms
    assert len(berlekamp_massey(noisy, 1e-13)) > 2
    assert berlekamp_massey(noisy, 1e-13, stop_after=2).tolist() == [1, -2]


# -- closed forms (Th. 23–25, Alg. 12, Alg. 13) --------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_faddeev_rows_match_the_closed_form(kind):
    m = random_model(kind, 6, 21)
    p, c = m.p, m.capacities
    steps = list(operator_rows(m))
    assert [k for k, _, y in steps if y is None] == list(range(1, p))  # p − 1 steps
    mat = lap_d(m)
    coef, coef_tol = charpoly_exact(mat), charpoly_tol(mat)
    assert np.all(np.abs(np.array([a for _, a, y in steps if y is None]) - coef[1:p]) <= coef_tol[1:p])
    rows = steps[-1][2]
    # U = Σ_t a_{p−2−t} Aᵗ / a_{p−1} (Cayley–Hamilton): rows and the test's U each within the monomial
    # bound of the exact polynomial, plus the relative error E_{p−1}/|a_{p−1}| of the divisor
    u, u_tol = monomial_tol(mat, coef[p - 2::-1], coef_tol[p - 2::-1], np.eye(p))
    u_tol = (u_tol + np.abs(u) * coef_tol[p - 1] / abs(coef[p - 1])) / abs(coef[p - 1])
    u = u / coef[p - 1]
    rows_tol = 2 * u_tol / c[:, None]
    assert np.all(np.abs(rows - u / c[:, None]) <= rows_tol)
    # Θ = −W Aᵀ Y is the balancing operator W Aᵀ (L + c cᵀ)⁻¹ of Th. 24: A Θ = I − c eᵀ, Θ c = 0
    a_inc = m.incidence.toarray()
    wat = m.weights[:, None] * np.abs(a_inc.T)
    theta = -(m.weights[:, None] * (a_inc.T @ rows))
    theta_tol = wat @ rows_tol + gamma(p + 2) * wat @ np.abs(rows)
    full = m.laplacian.toarray() + np.outer(c, c)
    closed = m.weights[:, None] * (a_inc.T @ np.linalg.inv(full))
    # a backward-stable inverse: relative error ≤ 4 p u κ(L + c cᵀ) in norm
    inv_tol = 4 * p * flops(1) * np.linalg.cond(full) * wat @ np.abs(np.linalg.inv(full))
    assert np.all(np.abs(theta - closed) <= theta_tol + inv_tol)
    assert np.all(np.abs(a_inc @ theta - (np.eye(p) - np.outer(c, np.ones(p))))
                  <= np.abs(a_inc) @ theta_tol + gamma(p) * np.abs(a_inc) @ np.abs(theta))
    assert np.all(np.abs(theta @ c) <= theta_tol @ c + gamma(p) * np.abs(theta) @ c)


def test_printed_alg12_update_is_not_faddeev():
    # Alg. 12 as printed accumulates into the old row: arr ← arr + A arr, i.e. (I + A) M_k
    m = random_model("ring", 5, 2)
    mat, p = lap_d(m), m.p
    x, printed = np.eye(p), []
    for k in range(1, p):
        x = x + mat @ x
        printed.append(-np.trace(x) / k)
        x[np.diag_indices(p)] += printed[-1]
    exact, tol = charpoly_exact(mat), charpoly_tol(mat)
    assert np.all(np.abs(np.array(printed) - exact[1:p]) > 1e6 * tol[1:p])  # wrong, not a rounding difference
    assert np.all(np.abs(np.array([a for _, a, y in operator_rows(m) if y is None]) - exact[1:p]) <= tol[1:p])


def test_mpa_minimal_polynomial_identity():
    # thesis §8.5: α_d = 0, α_{d−1} ≠ 0 and α_0 b_{d−1} + … + α_{d−1} b_0 = α_{d−1} (eᵀl) c
    m = random_model("mesh", 4, 8)
    *states, last = mpa_iter(m, polynomial="berlekamp-massey", scale=1.0)
    alpha, d = last.info["alpha"], last.info["degree"]
    assert d == distinct_eigenvalues(m) == 4
    alpha_tol = mpa_coefficient_tol(m, alpha, 0, 2 * m.p, 1.0)  # first order, from the Hankel system
    assert abs(alpha[d]) <= 10 * alpha_tol[d] and abs(alpha[d - 1]) > 1e3 * alpha_tol[d - 1]
    b = [s.value for s in states]
    lhs = sum(alpha[i] * b[d - 1 - i] for i in range(d))
    _, lhs_tol = monomial_tol(lap_d(m), alpha[d - 1::-1], 10 * alpha_tol[d - 1::-1], m.loads)
    rhs = alpha[d - 1] * m.loads.sum() * m.capacities
    assert np.all(np.abs(lhs - rhs) <= lhs_tol + 10 * alpha_tol[d - 1] * np.abs(rhs / alpha[d - 1]))


# -- the flows -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", COEFFICIENT_METHODS)
@pytest.mark.parametrize("kind,p", [(k, p) for k in KINDS for p in (2, 3, 5, 7)])
def test_lps_and_lpa_give_the_minimal_flow(method, kind, p):
    m = random_model(kind, p, 100 + p)
    tol = polynomial_flow_tol(m)  # the monomial basis' condition times u, with the coefficients' E_k
    for res in (lps(m, method), lpa(m, method)):
        assert res.converged
        assert flow_error(m, res.flow) <= tol
        assert check_balancing(m, res.flow) <= balancing_tol(m, tol)


@pytest.mark.parametrize("kind", ["path", "ring", "mesh", "tree+"])
def test_refinement_extends_the_accurate_range(kind):
    # p = 12: the monomial basis loses up to 8 digits; two sweeps with the computed operator recover them
    # (the a-priori bound of the plain flow, polynomial_flow_tol, is 3e-5 … 1e-2 here)
    for seed in range(2):
        m = random_model(kind, 12, 3000 + seed)
        plain = flow_error(m, lpa(m, "faddeev").flow)
        for res in (lpa(m, "faddeev", refine=2), lps(m, "faddeev", refine=2)):
            assert check_balancing(m, res.flow) <= balancing_floor(m, res.flow)  # refined to the round-off floor
            assert flow_error(m, res.flow) <= potential_flow_tol(m, res.flow)  # hence minimal to cond × floor
            assert flow_error(m, res.flow) < plain


@pytest.mark.parametrize("kind,p", [(k, p) for k in KINDS for p in (2, 3, 4)])
def test_mpa_gives_the_minimal_flow(kind, p):
    m = random_model(kind, p, 200 + p)
    res = mpa(m, MPAParams.of(polynomial="berlekamp-massey"), seed=p)
    assert flow_error(m, res.flow) <= min(mpa_flow_tol(m, res, p), potential_flow_tol(m, res.flow))
    assert res.extra["degree"] == distinct_eigenvalues(m)
    m5 = random_model(kind, 5, 300 + p)
    refined = mpa(m5, MPAParams.of(polynomial="berlekamp-massey", refine=1), seed=p)
    assert flow_error(m5, refined.flow) <= min(mpa_flow_tol(m5, refined, p), potential_flow_tol(m5, refined.flow))


def _hypercube(d: int) -> list[tuple[int, int]]:
    return [(i, i ^ (1 << b)) for i in range(2 ** d) for b in range(d) if i < i ^ (1 << b)]


@pytest.mark.parametrize("name,p,edges", [
    ("complete", 12, list(itertools.combinations(range(12), 2))),
    ("star", 20, [(0, i) for i in range(1, 20)]),
    ("hypercube", 16, _hypercube(4)),
    ("ring", 8, [(i, (i + 1) % 8) for i in range(8)]),
])
def test_mpa_on_symmetric_topologies(name, p, edges):
    # homogeneous: the minimal polynomial has degree = number of distinct eigenvalues ≪ p, and MPA stays
    # accurate at any p; a known bound cuts the 2p steps to 2d
    m = Model.create(p, edges, np.random.default_rng(p).uniform(0, 10, p), np.ones(p))
    d = distinct_eigenvalues(m)
    assert d == {"complete": 2, "star": 3, "hypercube": 5, "ring": 5}[name]
    full = mpa(m, MPAParams.of(polynomial="berlekamp-massey"), seed=1)
    assert full.extra["degree"] == d and full.iterations == 2 * p
    assert flow_error(m, full.flow) <= min(mpa_flow_tol(m, full, 1), potential_flow_tol(m, full.flow))
    short = mpa(m, MPAParams.of(polynomial="berlekamp-massey", max_degree=d), seed=1)
    assert short.iterations == 2 * d and short.counters.exchange_rounds == 2 * d + 1
    assert flow_error(m, short.flow) <= min(mpa_flow_tol(m, short, 1), potential_flow_tol(m, short.flow))


def test_single_processor():
    m = Model.create(1, np.zeros((0, 2)), [5.0], [1.0])
    for res in (lps(m), lpa(m), mpa(m)):
        assert res.flow.shape == (0,) and res.counters.collectives == {"allreduce": 1}
        assert res.counters.exchange_rounds == 0


# -- step counts, counters, generators -----------------------------------------------------------------
def test_counters():
    m = random_model("tree+", 9, 6)
    p, q = m.p, m.q
    c = lps(m, "faddeev").counters
    assert (c.iterations, c.exchange_rounds, c.collectives) == (p - 2, p - 1, {"allreduce": 1})
    assert (c.messages, c.bytes) == (2 * q * (p - 1), 16 * p + 16 * q * (p - 1))
    assert lps(m, "faddeev", refine=2).counters.exchange_rounds == 3 * (p - 1)
    c = lpa(m, "faddeev").counters
    assert (c.iterations, c.exchange_rounds, c.collectives) == (p - 1, p, {"allreduce": p, "allgather": 1})
    assert c.bytes == 16 * p + (p - 1) * (16 * q * p + 8 * p) + 16 * q * p + 8 * p * p
    assert lpa(m, "newton", refine=2).counters.collectives == {"allreduce": 1, "allgather": 3}
    res = mpa(m, MPAParams.of(polynomial="berlekamp-massey"))
    c, d = res.counters, res.extra["degree"]
    assert (c.iterations, c.exchange_rounds, c.collectives) == (2 * p, 2 * p + 1, {"allreduce": 1, "allgather": 1})
    assert c.bytes == 16 * p + 16 * q * (2 * p + 1) + 8 * p * (2 * p + 1)
    refined = mpa(m, MPAParams.of(polynomial="berlekamp-massey", refine=1))
    assert refined.counters.exchange_rounds == 2 * p + 1 + max(d - 2, 0) + 1
    # α-β time with uniform links: every exchange α + 8w/bw, every collective ⌈log2 p⌉ (α + 8w/bw)
    links = Links(latency=1e-4, bandwidth=1e8)
    ar = math.ceil(math.log2(p))
    hop = links.latency + 8 / links.bandwidth
    expect = ar * (links.latency + 16 / links.bandwidth) + (p - 1) * hop
    # a sum of p positive α-β terms on each side, differently grouped
    assert lps(m, "faddeev", links=links).counters.time == pytest.approx(expect, rel=2 * flops(2 * p + 4))


def test_generators():
    m = random_model("mesh", 6, 2)
    mat = lap_d(m)
    states = list(lps_iter(m, "faddeev"))
    assert [s.iteration for s in states[:-1]] == list(range(m.p - 1))
    for s in states[:-1]:  # both within γ_{(t+1)n} |A|ᵗ |l| of Aᵗ l
        _, tol = monomial_tol(mat, np.eye(s.iteration + 1)[-1], np.zeros(s.iteration + 1), m.loads)
        assert np.all(np.abs(s.value - np.linalg.matrix_power(mat, s.iteration) @ m.loads) <= 2 * tol)
    assert np.array_equal(states[-1].flow, lps(m, "faddeev").flow) and all(s.flow is None for s in states[:-1])
    states = list(lpa_iter(m, "faddeev"))
    assert len(states) == m.p
    assert np.all(np.abs(states[-2].value - charpoly_exact(mat)[:m.p]) <= charpoly_tol(mat)[:m.p])
    assert np.array_equal(states[-1].flow, lpa(m, "faddeev").flow)
    states = list(mpa_iter(m, polynomial="berlekamp-massey"))
    assert len(states) == 2 * m.p + 2
    assert np.array_equal(states[-1].flow, mpa(m, MPAParams.of(polynomial="berlekamp-massey")).flow)


# -- errors and registry -------------------------------------------------------------------------------
@pytest.mark.parametrize("model,match", unusable_models())
def test_unusable_models(model, match):
    for fn in (lps, lpa, mpa):
        with pytest.raises(GraphError, match=match):
            fn(model)


def test_bad_parameters():
    m = random_model("path", 4, 1)
    for call, match in [(lambda: lps(m, "cramer"), "coefficients"), (lambda: lpa(m, refine=-1), "refine"),
                        (lambda: lpa(m, refine=1.5), "refine"),
                        (lambda: mpa(m, MPAParams.of(tolerance=2.0)), "tolerance"),
                        (lambda: mpa(m, MPAParams.of(max_degree=0)), "max_degree")]:
        with pytest.raises(BalancerError, match=match):
            call()
    for name, params, key in [("lpa", {"coefficients": "eig"}, "coefficients"), ("lps", {"refine": True}, "refine"),
                              ("mpa", {"max_degree": -2}, "max_degree"), ("mpa", {"degree": 2}, "degree")]:
        with pytest.raises(BalancerError, match=f"^balancer.{key}:"):
            check_params(name, params)


def test_numerical_breakdown_is_an_error():
    # a_{p−1} rounded to 0 (Berkowitz on a 24-path does that) must not give an inf/nan flow
    m = random_model("path", 6, 3)
    a = laplacian_polynomial(m)
    a[m.p - 1] = 0.0
    with pytest.raises(BalancerError, match="numerically unusable"):
        lps(m, a)


def test_registry_serial_forms():
    m = random_model("ring", 6, 9)
    assert set(REGISTRY) == {"lps", "lpa", "mpa", "chebyshev"}
    assert np.array_equal(REGISTRY["lps"].serial(m, **check_params("lps", {"coefficients": "newton"})).flow,
                          lps(m, "newton").flow)

    assert np.array_equal(REGISTRY["lpa"].serial(m, **check_params("lpa", {})).flow, lpa(m).flow)
    assert np.array_equal(REGISTRY["mpa"].serial(m, **check_params("mpa", {})).flow, mpa(m).flow)
