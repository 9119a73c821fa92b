"""PCG (thesis Alg. 8): minimal flow, iteration bound, counters, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.balance.flow import check_balancing, flow_error, minimal_flow
from hermes.balance.model import Model
from hermes.balance.potential.pcg import pcg, pcg_counters, pcg_iter
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from tests.balance.graphs import KINDS, random_weighted_model, unusable_models
from tests.tolerances import balancing_floor, eig_tol, flops, gamma, potential_flow_tol


def distinct_nonzero_eigenvalues(m: Model) -> int:
    """Eigenvalues are computed within ``eig_tol`` each: 0 is below it, equal ones differ by at most twice it."""
    tol = eig_tol(m.laplacian)
    lam = np.linalg.eigvalsh(m.laplacian.toarray())
    lam = lam[lam > tol]
    return int(1 + np.count_nonzero(np.diff(np.sort(lam)) > 2 * tol))


def defect_tol(m: Model, res, tol: float) -> float:
    """Bound on ``‖L x − b‖ / ‖b‖`` when PCG stopped on its recursive residual ``√ρ ≤ tol ‖b‖`` (Alg. 8).

    The true residual drifts from the recursive one by at most ``(k + 2) γ_{δ+2} (‖|L| |x|‖ + ‖b‖)`` after
    k iterations (each updates r and x with one product by L of ≤ δ + 1 terms; Greenbaum 1997, §7.3), and
    evaluating it adds the floor of :func:`~tests.tolerances.balancing_floor`.
    """
    b = m.loads - m.fair_loads
    x = res.extra["potential"]
    drift = (res.iterations + 2) * gamma(int(m.degree.max()) + 2) * (
        np.linalg.norm(abs(m.laplacian) @ np.abs(x)) + np.linalg.norm(b))
    return tol + drift / np.linalg.norm(b) + balancing_floor(m, res.flow)


CASES = [(k, p, s) for k in KINDS for p, s in [(5, 1), (12, 2), (30, 3), (64, 4)]]


@pytest.mark.parametrize("kind,p,seed", CASES)
def test_pcg_reproduces_the_minimal_flow(kind, p, seed):
    m = random_weighted_model(kind, p, seed)
    res = pcg(m, tolerance=1e-12)
    assert res.converged
    assert check_balancing(m, res.flow) <= defect_tol(m, res, 1e-12)
    assert flow_error(m, res.flow) <= potential_flow_tol(m, res.flow)  # a potential flow: cond × its defect
    assert res.convergence_factor is None
    # the potentials solve L x = l − l̄
    b = m.loads - m.fair_loads
    assert np.linalg.norm(m.laplacian @ res.extra["potential"] - b) <= defect_tol(m, res, 1e-12) * np.linalg.norm(b)


@pytest.mark.parametrize("kind", ["path", "ring", "star", "mesh"])
@pytest.mark.parametrize("unit", [True, False])
@pytest.mark.parametrize("p", [9, 16, 25])
def test_iterations_bounded_by_distinct_eigenvalues(kind, unit, p):
    # Golub & Van Loan; thesis §8.1: CG takes at most as many steps as L has distinct eigenvalues
    m = random_weighted_model(kind, p, p, unit_weights=unit)
    res = pcg(m, tolerance=1e-10)
    assert res.converged
    assert res.iterations <= distinct_nonzero_eigenvalues(m) + 2
    if kind == "star" and unit:  # eigenvalues 0, 1 (p−2 times), p
        assert res.iterations <= 2 + 1


def test_star_with_unit_weights_takes_two_steps():
    m = Model.create(8, [(0, i) for i in range(1, 8)], np.arange(8.0), np.ones(8))
    res = pcg(m, tolerance=1e-12)
    assert res.iterations == 2
    assert check_balancing(m, res.flow) <= defect_tol(m, res, 1e-12)
    assert flow_error(m, res.flow) <= potential_flow_tol(m, res.flow)


def test_counters_and_generator():
    m = random_weighted_model("tree+", 14, 6)
    res = pcg(m, tolerance=1e-10)
    n, p, q = res.iterations, m.p, m.q
    cnt = res.counters
    assert cnt.iterations == n > 0
    assert cnt.exchange_rounds == n + 1
    assert cnt.collectives == {"allreduce": 3 + 2 * n}
    assert cnt.messages == 2 * q * (n + 1)
    assert cnt.bytes == 32 * p + 16 * q * (n + 1) + 16 * p * n
    assert cnt.time == 0.0
    states = list(pcg_iter(m, tolerance=1e-10))
    assert [s.iteration for s in states] == list(range(n + 1))
    assert states[-1].converged and not any(s.converged for s in states[:-1])
    assert np.array_equal(states[-1].flow, res.flow)
    # the α-β time with uniform links: every round and collective costs the same on every rank
    links = Links(latency=1e-4, bandwidth=1e8)
    a = links.latency + 8 / links.bandwidth
    ar = math.ceil(math.log2(p))
    expect = ar * (links.latency + 16 / links.bandwidth) + 2 * ar * a + n * (a + 2 * ar * a) + a
    timed = pcg(m, tolerance=1e-10, links=links)
    tol = 2 * flops(3 * (3 * n + 5))  # the same α-β terms, differently grouped, on each side
    assert timed.counters.time == pytest.approx(expect, rel=tol)
    assert pcg_counters(m, n, links).time == pytest.approx(expect, rel=tol)


def test_max_iter_and_balanced_model():
    m = random_weighted_model("path", 30, 2)
    res = pcg(m, tolerance=1e-14, max_iterations=5)
    assert res.iterations == 5 and not res.converged
    assert pcg(m).converged  # default max_iter = 10 p
    flat = Model.create(4, [(0, 1), (1, 2), (2, 3)], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
    res = pcg(flat)
    assert res.iterations == 0 and res.converged and np.all(res.flow == 0)
    assert res.counters.exchange_rounds == 1 and res.counters.collectives == {"allreduce": 3}
    assert np.array_equal(pcg(Model.create(1, np.zeros((0, 2)), [2.0], [1.0])).flow, np.zeros(0))


def test_errors():
    m = random_weighted_model("ring", 6, 0)
    with pytest.raises(BalancerError):
        pcg(m, tolerance=-1.0)
    with pytest.raises(BalancerError):
        pcg(m, max_iterations=-3)
    for bad, match in unusable_models():
        with pytest.raises(GraphError, match=match):
            pcg(bad)


def test_pcg_and_minimal_flow_agree_on_a_large_mesh():
    m = random_weighted_model("mesh", 400, 9)
    res = pcg(m, tolerance=1e-12)
    assert res.converged and check_balancing(m, res.flow) <= defect_tol(m, res, 1e-12)
    assert flow_error(m, res.flow) <= potential_flow_tol(m, res.flow)
    assert np.linalg.norm(minimal_flow(m)) > 0


@pytest.mark.parametrize("kind, p, seed", [("tree+", 14, 6), ("mesh", 36, 2), ("ring", 50, 4), ("star", 20, 3)])
def test_single_reduction_form_computes_the_same_flow_with_half_the_reductions(kind, p, seed):
    """Chronopoulos–Gear's recurrence: the Krylov iterates of Alg. 8 in exact arithmetic, so the same minimal flow
    (to the potential-flow bound of tests/tolerances.py) in about as many iterations; one allreduce of two words per
    iteration instead of two of one."""
    m = random_weighted_model(kind, p, seed)
    classic = pcg(m, tolerance=1e-10)
    single = pcg(m, tolerance=1e-10, form="single-reduction")
    assert single.converged and abs(single.iterations - classic.iterations) <= 2
    assert flow_error(m, single.flow) <= potential_flow_tol(m, single.flow)
    n, q = single.iterations, m.q
    cnt = single.counters
    assert cnt.collectives == {"allreduce": 3 + n} and cnt.exchange_rounds == n + 2
    assert cnt.messages == 2 * q * (n + 2) and cnt.bytes == 40 * m.p + 16 * q * (n + 2) + 16 * m.p * n
    states = list(pcg_iter(m, tolerance=1e-10, form="single-reduction"))
    assert [s.iteration for s in states] == list(range(n + 1)) and np.array_equal(states[-1].flow, single.flow)
    links = Links(latency=1e-4, bandwidth=1e8)
    assert pcg(m, tolerance=1e-10, links=links, form="single-reduction").counters.time < \
        pcg(m, tolerance=1e-10, links=links).counters.time


def test_an_unknown_form_is_refused():
    with pytest.raises(BalancerError, match="form must be one of thesis, single-reduction"):
        pcg(random_weighted_model("mesh", 9, 1), form="pipelined")
