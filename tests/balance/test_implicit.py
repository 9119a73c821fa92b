"""Implicit diffusion (thesis Alg. 5 — Watts et al. — and Alg. 6, eq. 7.2.2): steps, flow, sweeps, counters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.balance.diffusion.gda import StopParams, gda, gda_iter
from hermes.balance.diffusion.implicit import (
    WattsParams,
    implicit,
    implicit_counters,
    implicit_flow,
    implicit_iter,
    implicit_rates,
    inner_sweeps,
)
from hermes.balance.diffusion.matrices import diffusion_flow, edge_rates
from hermes.balance.flow import check_balancing, minimal_flow
from hermes.balance.model import Model
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from tests.balance.graphs import KINDS, random_model, zero_capacity_model
from tests.tolerances import EPS, balancing_floor, conservation_tol, converged_flow_tol, eig_tol, flops, flow_tol, gamma

SMALL = [(k, p, s) for k in KINDS for p, s in [(6, 1), (12, 3)]]


def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def system(m: Model, u: np.ndarray) -> np.ndarray:
    """``I + L D⁻¹`` with ``L = A U Aᵀ`` (eq. 7.2.2), dense."""
    a = m.incidence.toarray()
    return np.eye(m.p) + a @ np.diag(u) @ a.T @ np.diag(1 / m.capacities)


@pytest.mark.parametrize("watts", [False, True])
@pytest.mark.parametrize("alpha", [1.0, 5.0])
def test_one_outer_step_solves_the_implicit_system(watts, alpha):
    m = random_model("tree+", 10, 4)
    u = implicit_rates(m, "eps0", watts=watts, alpha=alpha)
    sys_mat = system(m, u)
    y = np.linalg.solve(sys_mat, m.loads)  # backward Euler: (I + L D⁻¹) l¹ = l⁰
    tau = 1e-14
    states = implicit_iter(m, "eps0", WattsParams.of(alpha=alpha, inner_tolerance=tau, tolerance=0.0, max_iterations=1),
                           watts=watts)
    next(states)
    s1 = next(states)
    # z = D⁻¹ l¹ by m Jacobi sweeps from D⁻¹ l⁰ with ∞-norm contraction γ, γᵐ ≤ τ (inner_sweeps): error
    # ≤ τ ‖D⁻¹(l⁰ − l¹)‖_∞, plus each sweep's rounding (≤ δ + 3 terms), plus the direct solve's 4 p u κ
    c, a = m.capacities, m.incidence.toarray()
    beta = float(np.max(1 + (np.abs(a) @ u) / c))
    sweeps = inner_sweeps(beta, tau)
    z_tol = (tau * np.max(np.abs((m.loads - y) / c))
             + (sweeps + 1) * gamma(int(m.degree.max()) + 3) * np.max(np.abs(m.loads / c))
             + 4 * m.p * EPS / 2 * np.linalg.cond(sys_mat) * np.max(np.abs(y / c)))
    # l¹ = l⁰ − L z with ‖L‖_∞ ≤ 2 max δ^u ≤ 2 (β_max − 1) c_max (or l¹ = c z: c_max)
    assert np.all(np.abs(s1.loads - y) <= z_tol * c.max() * (1 + 2 * beta))
    h = y / c
    assert np.all(np.abs(s1.flow - u * (h[m.edges[:, 0]] - h[m.edges[:, 1]])) <= 2 * u * z_tol)  # U Aᵀ D⁻¹ l¹


def test_rates_of_algorithms_5_and_6():
    m = random_model("mesh", 12, 2)
    c, e = m.capacities, m.edges
    ci, cj = c[e[:, 0]], c[e[:, 1]]
    # Alg. 5: u = α c_i c_j / (c_i + c_j), so T_ij = u/c_j = α c_i/(c_i+c_j) and β_i = 1 + α Σ_j c_j/(c_i+c_j)
    u = implicit_rates(m, watts=True, alpha=3.0)
    assert np.allclose(u, 3.0 * ci * cj / (ci + cj), rtol=2 * flops(4), atol=0)  # 4 flops on each side
    for i in range(m.p):
        nb = m.neighbours[i]
        beta_printed = 1 + 3.0 * np.sum(c[nb] / (c[i] + c[nb]))
        k = [int(np.flatnonzero((e[:, 0] == min(i, j)) & (e[:, 1] == max(i, j)))[0]) for j in nb]
        # sums of ≤ δ positive terms of ≤ 5 flops each, on each side
        assert 1 + np.sum(u[k]) / c[i] == pytest.approx(beta_printed, rel=2 * flops(len(nb) + 6))
    # the model's weights do not enter Watts' scheme; Alg. 6 is α times the M¹(ε) rates
    heavy = Model(m.p, m.edges, m.loads, m.capacities, 5 * m.weights)
    assert np.array_equal(implicit_rates(heavy, watts=True, alpha=3.0), u)
    assert np.allclose(implicit_rates(m, 1.0, alpha=2.0, lazy=True), 2.0 * edge_rates(m, 1.0, lazy=True),
                       rtol=flops(2), atol=0)  # scalings by 2 and ½ are exact, α one rounding


@pytest.mark.parametrize("kind,p,seed", SMALL)
@pytest.mark.parametrize("watts,alpha,inner", [(False, 1.0, 1e-2), (False, 8.0, 0.3), (True, 1.0, 1e-2),
                                               (True, 0.2, 0.5)])
def test_implicit_converges_to_the_gda_flow(kind, p, seed, watts, alpha, inner):
    # Th. 18: the flow of M = I − A U Aᵀ D⁻¹, whatever α and however inexact the inner solve
    m = random_model(kind, p, seed)
    res = implicit(m, "eps0", WattsParams.of(alpha=alpha, inner_tolerance=inner, tolerance=1e-10), watts=watts)
    assert res.converged and res.extra["residual"] <= 1e-10
    ref = implicit_flow(m, "eps0", watts=watts)
    u = implicit_rates(m, "eps0", watts=watts, alpha=alpha)
    conductance = Model(m.p, m.edges, m.loads, m.capacities, u)
    if not watts:  # two computations of the same minimal flow (rates scaled by α)
        assert np.array_equal(ref, diffusion_flow(m, "eps0")) or rel(ref, diffusion_flow(m, "eps0")) <= flow_tol(
            conductance)
    else:
        c, e = m.capacities, m.edges
        cc = c[e[:, 0]] * c[e[:, 1]] / (c[e[:, 0]] + c[e[:, 1]])
        assert rel(ref, minimal_flow(Model(m.p, m.edges, m.loads, c, cc))) <= flow_tol(conductance)
    # implicit increments U Aᵀ D⁻¹ y lie in range(U Aᵀ): the flow still to come is that of the imbalance left
    assert rel(res.flow, ref) <= converged_flow_tol(m, u, res.extra["loads"])
    left = np.linalg.norm(res.extra["loads"] - m.fair_loads) / np.linalg.norm(m.loads - m.fair_loads)
    assert check_balancing(m, res.flow) <= left + balancing_floor(m, res.flow)
    # conserved, consistent
    assert np.all(np.abs(m.apply_flow(res.flow) - res.extra["loads"]) <= conservation_tol(m, res.flow, res.iterations))


def test_outer_rate_and_time_step():
    # eigenvalues of (I + L D⁻¹)⁻¹ are 1/(1 + μ_k) (eq. 7.2.3): a longer step α converges in fewer outer
    # steps but needs more Jacobi sweeps per step
    m = random_model("path", 16, 2)
    small = implicit(m, params=WattsParams.of(alpha=1.0, tolerance=1e-6))
    large = implicit(m, params=WattsParams.of(alpha=20.0, tolerance=1e-6))
    assert large.convergence_factor < small.convergence_factor < 1
    assert large.iterations < small.iterations and large.extra["sweeps"] > small.extra["sweeps"]
    D = np.diag(1 / np.sqrt(m.capacities))
    u = implicit_rates(m, alpha=20.0)
    gen = D @ Model(m.p, m.edges, m.loads, m.capacities, u).laplacian.toarray() @ D
    mu = np.linalg.eigvalsh(gen)
    # μ₂ within eig_tol (d/dμ 1/(1 + μ) ≤ 1), the factor itself an eigenvalue of a matrix of norm ≤ 1
    assert large.convergence_factor == pytest.approx(1 / (1 + mu[1]), abs=eig_tol(gen) + eig_tol(np.eye(m.p))
                                                     + flops(4))
    # with alpha = 1 the implicit step is never faster than the explicit GDA step (1/(1+μ) ≥ 1 − μ)
    assert small.iterations >= gda(m, compute_factor=False, stop=StopParams.of(tolerance=1e-6)).iterations


def test_inner_sweeps():
    # m = max(1, ⌈ln(τ/A) / ln γ⌉), γ = 1 − 1/β_max, A = max(1, 2 (β_max − 1) √β_max)
    assert inner_sweeps(2.0, 1e-2) == math.ceil(math.log(1e-2 / (2 * math.sqrt(2))) / math.log(0.5)) == 9
    assert inner_sweeps(1.0, 1e-2) == 1 and inner_sweeps(1.1, 0.9) == 1
    # a fast processor among slow neighbours: the printed row sum β_i⁻¹ Σ_j T_ij exceeds 1 (Alg. 5's m
    # formula breaks down), γ = max δ^u/(c + δ^u) < 1 does not
    m = Model.create(3, [(0, 1), (1, 2)], [3.0, 0.0, 0.0], [1.0, 50.0, 1.0])
    u = implicit_rates(m, watts=True, alpha=10.0)
    c = m.capacities
    printed = (u[0] / c[0] + u[1] / c[2]) / (1 + (u[0] + u[1]) / c[1])
    assert printed > 1
    res = implicit(m, watts=True, params=WattsParams.of(alpha=10.0, inner_tolerance=1e-3, tolerance=1e-9))
    beta_max = max(1 + (u[0] + u[1]) / c[1], 1 + u[0] / c[0], 1 + u[1] / c[2])
    assert res.extra["sweeps"] == inner_sweeps(beta_max, 1e-3) and res.converged


@pytest.mark.parametrize("kind,p,seed", [("path", 6, 1), ("mesh", 12, 3)])
def test_thesis_sweep_count_can_diverge(kind, p, seed):
    # a long step (α = 8) and a loose inner tolerance: the printed m = ⌈ln τ / ln γ⌉ ignores that the inner
    # error reaches the loads multiplied by L D⁻¹, and the outer iteration blows up; hermes' m converges
    m = random_model(kind, p, seed)
    u = implicit_rates(m, alpha=8.0)
    a = m.incidence.toarray()
    beta_max = float(np.max(1 + (np.abs(a) @ u) / m.capacities))
    printed = math.ceil(math.log(0.3) / math.log(1 - 1 / beta_max))
    assert printed < inner_sweeps(beta_max, 0.3)
    states = implicit_iter(m, params=WattsParams.of(alpha=8.0, sweeps=printed, tolerance=0.0, max_iterations=200))
    assert max(s.residual for s in states) > 1e3
    res = implicit(m, params=WattsParams.of(alpha=8.0, inner_tolerance=0.3, tolerance=1e-9))
    assert res.converged and rel(res.flow, diffusion_flow(m, "eps0")) <= converged_flow_tol(m, u, res.extra["loads"])


def test_zero_sweeps_is_the_explicit_gda_step():
    m = random_model("tree+", 12, 2)
    for s, g in zip(implicit_iter(m, params=WattsParams.of(sweeps=0, tolerance=1e-8)),
                    gda_iter(m, stop=StopParams.of(tolerance=1e-8)), strict=True):
        assert s.iteration == g.iteration and np.array_equal(s.loads, g.loads) and np.array_equal(s.flow, g.flow)


def test_counters():
    m = random_model("tree+", 10, 5)
    links = Links(latency=1e-4, bandwidth=1e8)
    for watts, ce in ((False, 1), (True, 3)):
        res = implicit(m, watts=watts, links=links, params=WattsParams.of(tolerance=1e-5, check_every=ce))
        n, s = res.iterations, res.extra["sweeps"]
        checks = 1 + -(-n // ce)
        cnt = res.counters
        assert cnt.iterations == n and cnt.exchange_rounds == 1 + n * (s + 1)
        assert cnt.messages == 2 * m.q * (1 + n * (s + 1))
        assert cnt.collectives == {"allreduce": 2 + checks}
        assert cnt.bytes == 24 * m.p + 32 * m.q + 16 * m.q * n * (s + 1) + 8 * m.p * checks
        # the same α-β terms summed in a different grouping: γ of their number on each side
        tol = 2 * flops(3 * (n * (s + 1) + checks + 3))
        assert cnt.time == pytest.approx(implicit_counters(m, n, s, ce, links).time, rel=tol) and cnt.time > 0
        assert cnt.time == pytest.approx(float(np.max(res.extra["rank_times"])), rel=tol)


def test_errors_and_edge_cases():
    m = random_model("ring", 6, 0)
    for kw, match in [({"alpha": 0.0}, "α"), ({"alpha": math.inf}, "α"), ({"inner_tolerance": 1.0}, "inner"),
                      ({"inner_tolerance": 0.0}, "inner"), ({"lazy": "no"}, "lazy"), ({"check_every": 0}, "check_every"),
                      ({"sweeps": -1}, "sweeps"), ({"sweeps": 1.5}, "sweeps")]:
        with pytest.raises(BalancerError, match=match):  # unvalidated: the kernel's own checks
            implicit(m, params=WattsParams.model_construct(**kw))
    with pytest.raises(BalancerError):
        implicit(m, -1.0)
    with pytest.raises(GraphError, match="capacity"):
        implicit(zero_capacity_model())
    balanced = Model.create(3, [(0, 1), (1, 2)], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    res = implicit(balanced, watts=True)
    assert res.iterations == 0 and res.converged and np.all(res.flow == 0)
    lazy = implicit(m, params=WattsParams.of(lazy=True, tolerance=1e-9))
    tol = converged_flow_tol(m, implicit_rates(m, lazy=True), lazy.extra["loads"])
    assert rel(lazy.flow, diffusion_flow(m, "eps0")) <= tol
