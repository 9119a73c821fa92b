"""GDA with M¹(ε): the matrix, its spectrum and bounds, convergence to the minimal flow, counters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.balance.diffusion.gda import StopParams, gda, gda_counters, gda_iter
from hermes.balance.diffusion.matrices import (
    convergence_factor_bound,
    diffusion_flow,
    diffusion_matrix,
    diffusion_scalars,
    second_eigenvalue_bound,
)
from hermes.balance.diffusion.spectral import convergence_factor, edge_connectivity, epsilon0
from hermes.balance.flow import check_balancing, flow_error, minimal_flow
from hermes.balance.model import Model
from hermes.balance.registry import check_params, get_balancer
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from tests.balance.graphs import (
    KINDS,
    disconnected_model,
    random_model,
    zero_capacity_model,
)
from tests.tolerances import (
    balancing_floor,
    conservation_tol,
    converged_flow_tol,
    eig_tol,
    flops,
    gamma,
    matvec_tol,
    sum_tol,
)

SMALL = [(k, p, s) for k in KINDS for p, s in [(5, 1), (9, 2), (16, 3)]]


# -- the matrix ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,p,seed", SMALL)
@pytest.mark.parametrize("eps", ["eps0", 1.0, 0.0])
def test_diffusion_matrix_is_a_gdm(kind, p, seed, eps):
    m = random_model(kind, p, seed)
    M = diffusion_matrix(m, eps).toarray()
    c = m.capacities
    assert np.all(M >= 0)
    # the diagonal is 1 − Σ of the column's other entries: twice the summation bound of the column
    assert np.all(np.abs(M.sum(axis=0) - 1.0) <= 2 * sum_tol(M, axis=0))
    mc = M * c[None, :]  # m_ij c_j = u_k on both sides: a product and a quotient each (2 flops)
    assert np.all(np.abs(mc - mc.T) <= 2 * flops(2) * np.abs(mc))
    # Lemma 1: c is the Perron vector; Σ_j m_ij c_j = c_i exactly, so the stored entries' errors (γ_p for the
    # diagonal, a few flops off it) and the product's add to at most γ_{p+4} c_i
    assert np.all(np.abs(M @ c - c) <= matvec_tol(M, c) + gamma(p + 4) * c)
    adj = np.zeros((p, p), dtype=bool)
    adj[m.edges[:, 0], m.edges[:, 1]] = adj[m.edges[:, 1], m.edges[:, 0]] = True
    off = ~np.eye(p, dtype=bool)
    assert np.all((M[off] > 0) == adj[off])  # positive exactly on the edges
    assert np.all(np.diag(M) > 0) or eps == 0.0


def test_boillat_matrix_in_the_homogeneous_case():
    # thesis §5.5: c_i = 1/p, w = 1, ε = 1 gives m_ij = min{1/(δ_i+1), 1/(δ_j+1)}
    m = random_model("tree+", 10, 7, homogeneous=True)
    M = diffusion_matrix(m, 1.0).toarray()
    d = m.degree
    i, j = m.edges[:, 0], m.edges[:, 1]
    assert np.allclose(M[i, j], np.minimum(1 / (d[i] + 1), 1 / (d[j] + 1)), rtol=2 * flops(4), atol=0)


def test_one_sweep_is_l_times_m():
    m = random_model("tree+", 12, 3)
    M = diffusion_matrix(m, "eps0")
    states = gda_iter(m, "eps0", StopParams.of(tolerance=0.0, max_iterations=3))
    s0, s1 = next(states), next(states)
    assert s0.iteration == 0 and s1.iteration == 1
    # both sides sum ≤ δ + 1 terms of at most 4 flops (u (l_i/c_i − l_j/c_j)): γ_{δ+5} |M| |l| each
    delta = int(m.degree.max())
    scale = abs(M) @ np.abs(m.loads)
    assert np.all(np.abs(s1.loads - M @ m.loads) <= 2 * gamma(delta + 5) * scale)
    assert np.all(np.abs(m.apply_flow(s1.flow) - s1.loads) <= conservation_tol(m, s1.flow, 1))


# -- ε₀, spectrum and bounds ----------------------------------------------------------------------
def test_edge_connectivity_and_eps0():
    p = 10
    assert edge_connectivity(random_model("path", p, 0)) == 1
    assert edge_connectivity(random_model("ring", p, 0)) == 2
    assert edge_connectivity(random_model("star", p, 0)) == 1
    k5 = Model.create(5, [(i, j) for i in range(5) for j in range(i + 1, 5)], np.ones(5), np.ones(5))
    assert edge_connectivity(k5) == 4
    ring = random_model("ring", p, 0, homogeneous=True)
    # closed forms of ≤ 8 rounded operations (sin within an ulp) on each side
    assert epsilon0(ring) == pytest.approx(4 * math.sin(math.pi / (2 * p)) ** 2, rel=2 * flops(8))  # thesis §5.6 A
    het = random_model("mesh", 12, 1)
    c = het.capacities
    assert epsilon0(het) == pytest.approx(
        2 * 2 * het.weights.min() * c.min() / c.max() * math.sin(math.pi / 24) ** 2, rel=2 * flops(8))
    assert epsilon0(Model.create(1, np.zeros((0, 2)), [1.0], [1.0])) == 0.0


@pytest.mark.parametrize("p", [4, 9, 20])
def test_homogeneous_path_factor_is_exact(p):
    # thesis §5.6 B: for a homogeneous chain M* = I − L/(2+ε₀) and λ_M* = 1 − 4/(2+ε₀) sin²(π/2p),
    # which is also the value of the bound (5.2.7)
    m = random_model("path", p, 0, homogeneous=True)
    e0 = epsilon0(m)
    exact = 1 - 4 / (2 + e0) * math.sin(math.pi / (2 * p)) ** 2
    M = diffusion_matrix(m, e0)  # an eigenvalue: within eig_tol; the closed forms: ≤ 16 flops each side
    assert convergence_factor(M, m.capacities) == pytest.approx(exact, abs=eig_tol(M) + flops(16))
    assert convergence_factor_bound(m, e0) == pytest.approx(exact, rel=2 * flops(16))


@pytest.mark.parametrize("kind,p,seed", SMALL + [("tree+", 40, 9), ("mesh", 36, 10)])
@pytest.mark.parametrize("eps", ["eps0", 1.0, 0.3, 0.0])
def test_convergence_factor_below_its_bound(kind, p, seed, eps):
    m = random_model(kind, p, seed)
    M = diffusion_matrix(m, eps)
    S = M.toarray() * np.sqrt(m.capacities)[None, :] / np.sqrt(m.capacities)[:, None]
    lam = np.sort(np.linalg.eigvalsh(0.5 * (S + S.T)))
    tol = eig_tol(S) + gamma(p + 4)  # eigenvalues of the rounded S, whose entries carry a few flops each
    assert lam[-1] == pytest.approx(1.0, abs=tol)
    factor = convergence_factor(M, m.capacities)
    assert factor == pytest.approx(max(abs(lam[-2]), abs(lam[0])), abs=2 * tol)
    assert lam[-2] <= second_eigenvalue_bound(m, eps) + tol  # Cor. 1 / Th. 11
    assert factor <= convergence_factor_bound(m, eps) + 2 * tol
    e = epsilon0(m) if eps == "eps0" else eps
    if e >= epsilon0(m):  # Cor. 2, eq. (5.5.6)
        c = m.capacities
        cor2 = 1 - 4 * edge_connectivity(m) * m.weights.min() / (m.weighted_degree.max() + e) * (
            c.min() / c.max()) * math.sin(math.pi / (2 * p)) ** 2
        assert convergence_factor_bound(m, eps) <= cor2 * (1 + 2 * flops(16))
    assert factor < 1.0 or e == 0.0


# -- convergence ------------------------------------------------------------------------------------
def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("kind,p,seed", SMALL)
@pytest.mark.parametrize("eps", ["eps0", 1.0])
def test_gda_converges_to_its_minimal_flow(kind, p, seed, eps):
    # Th. 14: the GDA flow is the balancing flow minimising Σ f²/(s_k w_k)
    m = random_model(kind, p, seed)
    res = gda(m, eps, StopParams.of(tolerance=1e-10), compute_factor=False)
    assert res.converged
    assert res.extra["residual"] <= 1e-10
    ref = diffusion_flow(m, eps)
    # the flow still to come is the U-minimal flow of the imbalance left (tests/tolerances.py)
    u = diffusion_scalars(m, eps) * m.weights
    tol = converged_flow_tol(m, u, res.extra["loads"])
    assert rel(res.flow, ref) <= tol
    left = np.linalg.norm(res.extra["loads"] - m.fair_loads) / np.linalg.norm(m.loads - m.fair_loads)
    assert check_balancing(m, res.flow) <= left + balancing_floor(m, res.flow)
    assert np.all(np.abs(m.apply_flow(res.flow) - res.extra["loads"]) <= conservation_tol(m, res.flow, res.iterations))
    if kind in ("tree", "path", "star"):  # a tree has a single balancing flow
        assert flow_error(m, res.flow) <= tol
    # a looser tolerance gives a proportionally looser flow
    rough = gda(m, eps, StopParams.of(tolerance=1e-3), compute_factor=False)
    assert rough.iterations < res.iterations
    assert rel(rough.flow, ref) <= converged_flow_tol(m, u, rough.extra["loads"])


@pytest.mark.parametrize("p", [5, 8])
def test_gda_flow_is_the_weighted_minimal_flow_only_for_uniform_scalars(p):
    # homogeneous ring: all s_k equal, so U ∝ W and the GDA flow is the minimal flow of Th. 20
    ring = random_model("ring", p, 3, homogeneous=True)
    assert np.ptp(diffusion_scalars(ring, "eps0")) == 0
    res = gda(ring, "eps0", StopParams.of(tolerance=1e-11), compute_factor=False)
    u = diffusion_scalars(ring, "eps0") * ring.weights
    assert flow_error(ring, res.flow) <= converged_flow_tol(ring, u, res.extra["loads"])
    # heterogeneous ring: s_k differ around the cycle and the GDA flow is not minimal for w
    het = random_model("ring", p, 3)
    res = gda(het, "eps0", StopParams.of(tolerance=1e-11), compute_factor=False)
    f, tol = res.flow, converged_flow_tol(het, diffusion_scalars(het, "eps0") * het.weights, res.extra["loads"])
    assert rel(f, diffusion_flow(het, "eps0")) <= tol
    assert flow_error(het, f) > 1e3 * tol  # a different flow, not a rounding difference
    assert np.sum(f**2 / het.weights) > np.sum(minimal_flow(het) ** 2 / het.weights)


EPS_CASES = ([("path", p, s, h) for p, s in [(8, 1), (12, 2), (17, 3)] for h in (True, False)]
             + [("ring", p, s, False) for p, s in [(8, 1), (12, 2), (17, 3)]] + [("ring", 17, 4, True)])


@pytest.mark.parametrize("kind,p,seed,homogeneous", EPS_CASES)
def test_eps0_beats_eps1(kind, p, seed, homogeneous):
    # thesis Tables 5.1–5.3: GDA0 needs fewer iterations than GDA1
    m = random_model(kind, p, seed, homogeneous=homogeneous)
    g0 = gda(m, "eps0", StopParams.of(tolerance=1e-6))
    g1 = gda(m, 1.0, StopParams.of(tolerance=1e-6))
    assert g0.converged and g1.converged
    assert g0.iterations < g1.iterations
    assert g0.convergence_factor < g1.convergence_factor


@pytest.mark.parametrize("p", [8, 16, 32])
def test_eps1_beats_eps0_on_even_homogeneous_rings(p):
    # the exception: an even ring is bipartite, M(ε) = I − L/(2+ε) has λ_p = −(2−ε)/(2+ε), and
    # ε₀ = 4 sin²(π/2p) ≈ ε_opt/2 leaves |λ_p| = 1 − 2ε₀/(2+ε₀) above λ_M(1) = 1 − 4 sin²(π/p)/3
    m = random_model("ring", p, 1, homogeneous=True)
    e0 = epsilon0(m)
    g0 = convergence_factor(diffusion_matrix(m, e0), m.capacities)
    g1 = convergence_factor(diffusion_matrix(m, 1.0), m.capacities)
    tol = eig_tol(diffusion_matrix(m, 1.0)) + flops(8)  # an eigenvalue against a closed form of ≤ 8 flops
    assert g0 == pytest.approx((2 - e0) / (2 + e0), abs=tol)
    assert g1 == pytest.approx(max(1 / 3, 1 - 4 * math.sin(math.pi / p) ** 2 / 3), abs=tol)
    assert g1 < g0


def test_stopping_rule_and_counters():
    m = random_model("tree+", 10, 5)
    q, p = m.q, m.p
    for ce in (1, 3, 7):
        res = gda(m, "eps0", StopParams.of(tolerance=1e-4, check_every=ce), compute_factor=False)
        n = res.iterations
        assert res.converged and n % ce == 0
        states = list(gda_iter(m, "eps0", StopParams.of(tolerance=1e-4, check_every=ce)))
        checked = [s.iteration for s in states if s.checked]
        assert checked == list(range(0, n + 1, ce))
        assert all(s.residual > 1e-4 for s in states if s.checked and s.iteration < n)
        checks = 1 + -(-n // ce)
        cnt = res.counters
        assert cnt.iterations == n
        assert cnt.exchange_rounds == 1 + n
        assert cnt.collectives == {"allreduce": 1 + checks}
        assert cnt.messages == 2 * q * (1 + n)
        assert cnt.bytes == 16 * p + 32 * q + 16 * q * n + 8 * p * checks
        assert cnt.time == 0.0
    # max_iter not a multiple of check_every: a last check at max_iter
    res = gda(m, 1.0, StopParams.of(tolerance=1e-12, max_iterations=10, check_every=4), compute_factor=False)
    assert res.iterations == 10 and not res.converged
    assert res.counters.collectives == {"allreduce": 1 + 1 + 3}


def test_time_counter_with_uniform_links():
    m = random_model("mesh", 12, 2)
    links = Links(latency=1e-4, bandwidth=1e8)
    res = gda(m, "eps0", StopParams.of(tolerance=1e-3, check_every=2), links=links, compute_factor=False)
    n = res.iterations
    checks = 1 + -(-n // 2)
    ar = math.ceil(math.log2(m.p))
    expect = (ar * (links.latency + 16 / links.bandwidth) + (links.latency + 16 / links.bandwidth)
              + n * (links.latency + 8 / links.bandwidth) + checks * ar * (links.latency + 8 / links.bandwidth))
    # sums of n + checks + 2 positive α-β terms, differently grouped: γ of that many terms on each side
    tol = 2 * flops(3 * (n + checks + 2))
    assert res.counters.time == pytest.approx(expect, rel=tol)
    assert gda_counters(m, n, 2, links).time == pytest.approx(expect, rel=tol)
    assert np.allclose(res.extra["rank_times"], expect, rtol=tol, atol=0)


def test_balanced_model_does_no_iteration():
    m = Model.create(4, [(0, 1), (1, 2), (2, 3)], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
    res = gda(m, "eps0")
    assert res.iterations == 0 and res.converged
    assert np.all(res.flow == 0)
    assert res.counters.exchange_rounds == 1 and res.counters.collectives == {"allreduce": 2}
    zero = Model.create(3, [(0, 1), (1, 2)], np.zeros(3), [1.0, 2.0, 3.0])
    assert gda(zero, 1.0).iterations == 0


def test_errors():
    m = random_model("ring", 6, 0)
    for bad in (-0.1, float("nan"), "eps1", None):
        with pytest.raises(BalancerError):
            gda(m, bad)
    with pytest.raises(BalancerError):
        diffusion_matrix(m, -1.0)
    with pytest.raises(BalancerError):
        gda(m, 1.0, StopParams.of(check_every=0))
    with pytest.raises(BalancerError):
        gda(m, 1.0, StopParams.of(tolerance=-1.0))
    split = disconnected_model()
    with pytest.raises(GraphError, match="disconnected"):
        gda(split, "eps0")
    with pytest.raises(GraphError, match="disconnected"):
        epsilon0(split)
    raw = zero_capacity_model()
    with pytest.raises(GraphError, match="capacity"):
        gda(raw, 1.0)
    with pytest.raises(GraphError, match="capacity"):
        Model.create(3, [(0, 1), (1, 2)], np.ones(3), [1.0, 0.0, 1.0])


def test_tree_flow_does_not_depend_on_eps():
    m = random_model("tree", 12, 11)
    for eps in ("eps0", 0.5, 2.0):
        res = gda(m, eps, StopParams.of(tolerance=1e-11), compute_factor=False)
        tol = converged_flow_tol(m, diffusion_scalars(m, eps) * m.weights, res.extra["loads"])
        assert flow_error(m, res.flow) <= tol




# -- the registry entries gda0 / gda1 ----------------------------------------------------------------
@pytest.mark.parametrize("name,eps", [("gda0", "eps0"), ("gda1", 1.0)])
def test_registry_gda0_gda1_take_lazy(name, eps):
    info = get_balancer(name)
    assert info.defaults["lazy"] is False
    with pytest.raises(BalancerError, match="balancer.lazy"):
        check_params(name, {"lazy": "yes"})
    m = random_model("tree+", 9, 4)
    plain = info.serial(m, **check_params(name, {"tolerance": 1e-9}))
    lazy = info.serial(m, **check_params(name, {"tolerance": 1e-9, "lazy": True}))
    ref = gda(m, eps, StopParams.of(lazy=True, tolerance=1e-9))
    assert lazy.extra["lazy"] and not plain.extra["lazy"]
    assert np.array_equal(lazy.flow, ref.flow) and lazy.iterations == ref.iterations
    assert lazy.convergence_factor == ref.convergence_factor != plain.convergence_factor
    target = diffusion_flow(m, eps)  # the lazy matrix has the flow of M (u/2 has the same minimiser)
    tol = converged_flow_tol(m, diffusion_scalars(m, eps) * m.weights, lazy.extra["loads"])
    assert np.linalg.norm(lazy.flow - target) <= tol * np.linalg.norm(target)
