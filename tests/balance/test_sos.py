"""The second-order scheme (thesis Alg. 4, eq. 7.1.7): recursion, flow, ω*, ω_opt, speed, counters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.balance.diffusion.gda import StopParams, gda, gda_iter
from hermes.balance.diffusion.matrices import diffusion_flow, diffusion_matrix, edge_rates
from hermes.balance.diffusion.sos import (
    omega_opt,
    omega_star,
    sos,
    sos_counters,
    sos_iter,
)
from hermes.balance.diffusion.spectral import convergence_factor, edge_connectivity, epsilon0
from hermes.balance.model import Model
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from tests.balance.graphs import KINDS, disconnected_model, random_model
from tests.tolerances import conservation_tol, converged_flow_tol, eig_tol, flops, gamma

SMALL = [(k, p, s) for k in KINDS for p, s in [(6, 1), (12, 3)]]


def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def omega_opt_tol(lam: float, delta: float) -> float:
    """Bound on the error of ``ω_opt = 2 / (1 + √(1 − λ²))`` from an error δ in λ and 8 rounded operations.

    ``dω/dλ = 2λ / (√(1 − λ²) (1 + √(1 − λ²))²)`` grows without bound as λ → 1, and ``1 − λ²`` loses
    ``λ² / (1 − λ²)`` of relative accuracy to cancellation.
    """
    root = math.sqrt(1 - lam**2)
    omega = 2 / (1 + root)
    return 2 * lam / (root * (1 + root) ** 2) * delta + omega * flops(8) / (1 - lam**2)


def mesh_edges(r: int, s: int) -> list[tuple[int, int]]:
    idx = np.arange(r * s).reshape(r, s)
    return ([(int(a), int(b)) for a, b in zip(idx[:, :-1].ravel(), idx[:, 1:].ravel())]
            + [(int(a), int(b)) for a, b in zip(idx[:-1].ravel(), idx[1:].ravel())])


@pytest.mark.parametrize("mk,lazy,omega", [(1, False, 1.7), (1, True, "star"), (3, False, "opt"), (6, False, 0.6)])
def test_sos_is_the_second_order_recursion(mk, lazy, omega):
    # l¹ = M l⁰, lᵏ = ω M lᵏ⁻¹ + (1 − ω) lᵏ⁻² (thesis §7.1.2), with the flow consistent with the loads
    m = random_model("tree+", 10, 4)
    M = diffusion_matrix(m, "eps0", mk, lazy=lazy)
    states = list(sos_iter(m, "eps0", StopParams.of(lazy=lazy, tolerance=0.0, max_iterations=6), omega=omega, kind=mk))
    w = {"star": omega_star(m, lazy=lazy), "opt": omega_opt(m, "eps0", mk)}.get(omega, omega)
    # both sides evaluate the recursion in a different order: an error bound e_k carried through
    # e_k = |ω| |M| e_{k−1} + |1 − ω| e_{k−2} + γ_{δ+4} (|ω| |M| |l_{k−1}| + |1 − ω| |l_{k−2}|), doubled
    absm, g = abs(M), gamma(int(m.degree.max()) + 4)
    prev, cur = m.loads, M @ m.loads
    err_prev, err = np.zeros(m.p), g * (absm @ np.abs(m.loads))
    assert np.all(np.abs(states[1].loads - cur) <= 2 * err)
    for k, s in enumerate(states[2:], start=2):
        err_prev, err = err, (abs(w) * (absm @ err) + abs(1 - w) * err_prev
                              + g * (abs(w) * (absm @ np.abs(cur)) + abs(1 - w) * np.abs(prev)))
        prev, cur = cur, w * (M @ cur) + (1 - w) * prev
        assert np.all(np.abs(s.loads - cur) <= 2 * err)
        assert np.all(np.abs(m.apply_flow(s.flow) - s.loads) <= conservation_tol(m, s.flow, k, growth=4.0))
    assert len(states) == 7


def test_omega_one_is_gda_bit_for_bit():
    m = random_model("mesh", 12, 2)
    stop = StopParams.of(tolerance=1e-8)
    for s, g in zip(sos_iter(m, "eps0", stop, omega=1.0), gda_iter(m, "eps0", stop), strict=True):
        assert s.iteration == g.iteration and np.array_equal(s.loads, g.loads) and np.array_equal(s.flow, g.flow)


@pytest.mark.parametrize("kind,p,seed", SMALL)
@pytest.mark.parametrize("mk,omega", [(1, "star"), (1, "opt"), (4, 1.5), (6, "opt")])
def test_sos_converges_to_the_gda_flow(kind, p, seed, mk, omega):
    # Th. 17: every polynomial scheme on M produces the GDA flow of M
    m = random_model(kind, p, seed)
    res = sos(m, "eps0", StopParams.of(tolerance=1e-10), omega=omega, kind=mk)
    assert res.converged and res.extra["residual"] <= 1e-10
    # SOS increments lie in range(U Aᵀ) too: the flow still to come is the U-minimal flow of what is left
    tol = converged_flow_tol(m, edge_rates(m, "eps0", mk), res.extra["loads"])
    assert rel(res.flow, diffusion_flow(m, "eps0", mk)) <= tol
    assert np.all(np.abs(m.apply_flow(res.flow) - res.extra["loads"])
                  <= conservation_tol(m, res.flow, res.iterations, growth=4.0))
    assert 0 < res.extra["omega"] < 2


@pytest.mark.parametrize("kind,p,seed", SMALL + [("path", 20, 5), ("mesh", 36, 6)])
@pytest.mark.parametrize("eps", ["eps0", 1.0, 0.5])
def test_omega_star_and_omega_opt(kind, p, seed, eps):
    m = random_model(kind, p, seed)
    e = epsilon0(m) if eps == "eps0" else eps
    c = m.capacities
    K = (4 * edge_connectivity(m) * m.weights.min() / (m.weighted_degree.max() + e) * c.min() / c.max()
         * math.sin(math.pi / (2 * p)) ** 2)
    ws = omega_star(m, eps)
    # eq. 7.1.7: K from ≤ 12 flops (the weighted degree a sum of ≤ δ terms) on each side; ω = 2/(1 + √(K(2−K)))
    # is no worse conditioned in K than √ (relative factor ≤ 1/2)
    tol = 2 * flops(16 + int(m.degree.max()))
    assert ws == pytest.approx(2 / (1 + math.sqrt(K * (2 - K))), rel=tol)
    assert 1 < ws < 2
    assert omega_star(m, eps, lazy=True) == pytest.approx(2 / (1 + math.sqrt(K / 2 * (2 - K / 2))), rel=tol)
    M = diffusion_matrix(m, eps)
    lam = convergence_factor(M, c)
    wo = omega_opt(m, eps)
    assert wo == pytest.approx(2 / (1 + math.sqrt(1 - lam**2)), abs=2 * omega_opt_tol(lam, 0.0))  # the same λ
    assert ws >= wo - omega_opt_tol(lam, eig_tol(M)) - ws * tol  # 1 − K bounds λ_M (Cor. 2): ω* over-relaxes
    res = sos(m, eps, StopParams.of(tolerance=1e-3), omega="opt")
    # at ω_opt the two roots of r² − ωλr + (ω − 1) coincide: the discriminant D = ω²λ² − 4(ω − 1) is 0 up to
    # its rounding γ_4 (ω²λ² + 4|ω − 1|) and to what the balancer's own λ and ω differ from the test's (its
    # eigensolver: |δλ| ≤ eig_tol(M), moving D by 2ω²λ|δλ|; ω by omega_opt_tol, moving D by |2ωλ² − 4| |δω|);
    # a double root is known only to the square root of that
    d_err = (gamma(4) * ((wo * lam) ** 2 + 4 * abs(wo - 1)) + 2 * wo**2 * lam * eig_tol(M)
             + abs(2 * wo * lam**2 - 4) * omega_opt_tol(lam, eig_tol(M)))
    root_tol = math.sqrt(d_err) / 2
    assert res.extra["rate"] == pytest.approx(math.sqrt(wo - 1), abs=root_tol) and res.extra["rate"] < lam


@pytest.mark.parametrize("p", [5, 16, 40])
def test_omega_star_is_optimal_on_homogeneous_paths(p):
    # thesis §5.6 B: the bound (5.2.7) is the exact λ of M¹(ε₀) on a homogeneous chain, so ω* = ω_opt
    m = random_model("path", p, 0, homogeneous=True)
    lam = convergence_factor(diffusion_matrix(m, "eps0"), m.capacities)  # within eig_tol of the exact bound
    wo = omega_opt(m)
    assert omega_star(m) == pytest.approx(wo, abs=omega_opt_tol(lam, eig_tol(diffusion_matrix(m, "eps0"))
                                                               + flops(16)) + wo * 2 * flops(18))


SOS_WINS = ([("path", p, s, h) for p, s in [(12, 1), (24, 2)] for h in (True, False)]
            + [("ring", p, s, h) for p, s in [(12, 1), (24, 2)] for h in (True, False)])


@pytest.mark.parametrize("kind,p,seed,homogeneous", SOS_WINS)
def test_sos_star_beats_gda_on_paths_and_rings(kind, p, seed, homogeneous):
    # thesis §7.3, Fig. 7.1: SOS with ω* needs fewer steps than GDA on the same matrix
    m = random_model(kind, p, seed, homogeneous=homogeneous)
    for eps in ("eps0", 1.0):
        stop = StopParams.of(tolerance=1e-6)
        s, g = sos(m, eps, stop, compute_factor=False), gda(m, eps, stop, compute_factor=False)
        assert s.converged and g.converged and s.iterations < g.iterations


@pytest.mark.parametrize("k", [8, 16])
@pytest.mark.parametrize("heterogeneous", [False, True])
def test_sos_star_beats_gda_on_4xk_meshes(k, heterogeneous):
    # JPDC §4 meshes with one dimension 4 (speeds r mod 4 + 1 for the heterogeneous case). On square
    # meshes ω* (built on sin²(π/2p)) over-relaxes too much and SOS* is not faster (8×8: 187 vs 184)
    p = 4 * k
    caps = np.arange(p) % 4 + 1.0 if heterogeneous else np.ones(p)
    m = Model.create(p, mesh_edges(4, k), np.random.default_rng(k).uniform(0, 10, p), caps)
    stop = StopParams.of(tolerance=1e-4)
    s, g = sos(m, stop=stop, compute_factor=False), gda(m, stop=stop, compute_factor=False)
    assert s.iterations < g.iterations


@pytest.mark.parametrize("tree", ["binary", "4-tree", "star"])
def test_sos1_beats_gda1_on_the_trees_of_figures_7_2_to_7_4(tree):
    arity = {"binary": 2, "4-tree": 4, "star": 31}[tree]
    m = Model.create(32, [((i - 1) // arity, i) for i in range(1, 32)], np.random.default_rng(3).uniform(0, 10, 32),
                     np.ones(32))
    stop = StopParams.of(tolerance=1e-4)
    s, g = sos(m, 1.0, stop, compute_factor=False), gda(m, 1.0, stop, compute_factor=False)
    assert s.iterations < g.iterations


@pytest.mark.parametrize("kind", KINDS)
def test_sos_opt_beats_gda_everywhere(kind):
    m = random_model(kind, 16, 3)
    stop = StopParams.of(tolerance=1e-6)
    s, g = sos(m, stop=stop, omega="opt", compute_factor=False), gda(m, stop=stop, compute_factor=False)
    assert s.iterations < g.iterations


def test_counters_are_those_of_gda():
    m = random_model("tree+", 10, 5)
    links = Links(latency=1e-4, bandwidth=1e8)
    for mk, ce in ((1, 1), (2, 3), (6, 4)):
        res = sos(m, "eps0", StopParams.of(tolerance=1e-5, check_every=ce), omega="opt", kind=mk, links=links,
                  compute_factor=False)
        n, g = res.iterations, 1 if mk == 2 else 0
        checks = 1 + -(-n // ce)
        cnt = res.counters
        assert cnt.iterations == n and cnt.exchange_rounds == 1 + n and cnt.messages == 2 * m.q * (1 + n)
        assert cnt.collectives == {"allreduce": 1 + g + checks}
        assert cnt.bytes == 16 * m.p + 32 * m.q + 24 * m.p * g + 16 * m.q * n + 8 * m.p * checks
        # the same α-β terms summed in a different grouping: γ of their number on each side
        tol = 2 * flops(3 * (n + checks + 3))
        assert cnt.time == pytest.approx(sos_counters(m, n, ce, links, kind=mk).time, rel=tol)
        assert cnt.time > 0
    stopped = sos(m, stop=StopParams.of(tolerance=1e-12, max_iterations=10, check_every=4), omega=1.5,
                  compute_factor=False)
    assert stopped.iterations == 10 and not stopped.converged
    assert stopped.counters.collectives == {"allreduce": 1 + 1 + 3}


def test_errors():
    m = random_model("ring", 6, 0)
    for bad in (0.0, 2.0, -1.0, 2.5, float("nan"), "fast", None):
        with pytest.raises(BalancerError, match="ω"):
            sos(m, omega=bad)
    with pytest.raises(BalancerError, match="M¹"):
        sos(m, omega="star", kind=3)
    with pytest.raises(BalancerError):
        sos(m, -1.0)
    with pytest.raises(BalancerError):
        sos(m, stop=StopParams.of(check_every=0))
    with pytest.raises(GraphError, match="disconnected"):
        sos(disconnected_model())


def test_balanced_and_single_processor_models():
    m = Model.create(3, [(0, 1), (1, 2)], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    res = sos(m)
    assert res.iterations == 0 and res.converged and np.all(res.flow == 0)
    one = Model.create(1, np.zeros((0, 2)), [4.0], [1.0])
    assert omega_star(one) == 1.0 and sos(one).iterations == 0
