"""Practical FOS of Jeannot & Vernier (001 §3–4): M_r, the cost/benefit gate, the shaker, detection, counters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.balance.diffusion.detection import bfs_tree, graph_center
from hermes.balance.diffusion.fos_serial import (DEFAULT_KAPPA, FOSParams, benefit, fos, fos_iter, program_time,
                                                 relative_speed_matrix)
from hermes.balance.flow import alpha_beta_time, minimal_flow
from hermes.balance.model import Model
from hermes.balance.registry import BALANCERS
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from hermes.metrics import imbalance
from tests.balance.graphs import KINDS, random_model, unusable_models
from tests.tolerances import conservation_tol, flops, flow_tol, gamma, matvec_tol, sum_tol

#: the balancers this family registers
REGISTRY = {name: BALANCERS[name] for name in
            ("fos",)}

SMALL = [(k, p, s) for k in KINDS for p, s in [(6, 1), (12, 2)]]
LAN = Links(latency=1.5e-4, bandwidth=100e6 / 8)  # 001 §4.2.1: 100 Mb/s, 0.15 ms
DSL = Links(latency=4e-2, bandwidth=1e6 / 8)  # 001 §4.2.2: 1 Mb/s, 40 ms


def four_cycle(loads) -> Model:
    return Model.create(4, [(0, 1), (1, 2), (2, 3), (0, 3)], loads, np.ones(4))


def point_source_path(p: int, wstar: int) -> Model:
    """001 §4.2's worst case: a homogeneous line with all the load (p · w*) on the first node."""
    loads = np.zeros(p)
    loads[0] = p * wstar
    return Model.create(p, [(i, i + 1) for i in range(p - 1)], loads, np.ones(p))


# -- the relative-speed matrix M_r ------------------------------------------------------------------
@pytest.mark.parametrize("kind,p,seed", SMALL)
@pytest.mark.parametrize("variant", ["A", "B"])
def test_relative_speed_matrix(kind, p, seed, variant):
    m = random_model(kind, p, seed)
    M = relative_speed_matrix(m, variant).toarray()
    c = m.capacities
    # the diagonal is 1 − Σ of the row: non-negative and summing to 1 up to twice the row's summation bound
    row_tol = 2 * sum_tol(M, axis=1)
    assert np.all(M >= -row_tol[:, None])
    assert np.all(np.abs(M.sum(axis=1) - 1.0) <= row_tol)  # stochastic (rows: senders)
    cm = c[:, None] * M  # C_i Mr_ij = C_j Mr_ji: the same ≤ 6-flop rate on both sides
    assert np.all(np.abs(cm - cm.T) <= 2 * flops(6) * np.abs(cm))
    # the fair loads are the fixed point (Σ_i Mr_ij C_i = C_j exactly; see test_diffusion for the terms)
    assert np.all(np.abs(M.T @ c - c) <= matvec_tol(M.T, c) + gamma(p + 6) * c)
    adj = np.zeros((p, p), dtype=bool)
    adj[m.edges[:, 0], m.edges[:, 1]] = adj[m.edges[:, 1], m.edges[:, 0]] = True
    off = ~np.eye(p, dtype=bool)
    assert np.all((M[off] > 0) == adj[off])
    if variant == "B":  # the self term C_i/2C_i keeps the diagonal ≥ δ_i/2 > 0 (aperiodic)
        assert np.all(np.diag(M) > 0.05)
    # the handshake sends speeds, not loads: M_r does not depend on the loads
    other = m.with_loads(np.arange(p, dtype=float))
    assert np.array_equal(relative_speed_matrix(other, variant).toarray(), M)


def test_relative_speed_matrix_values():
    # path 0-1-2 with speeds 1, 2, 1: Cr_01 = 2/3, δ_0 = 3/2 (A) or 6/7 (B), δ_1 = 1/(2/3) or 1/(2/3 + 1/2)
    m = Model.create(3, [(0, 1), (1, 2)], np.ones(3), [1.0, 2.0, 1.0])
    A, B = relative_speed_matrix(m, "A").toarray(), relative_speed_matrix(m, "B").toarray()
    assert A[0, 1] == pytest.approx(min(3 / 2, 3 / 2) * 2 / 3) and A[1, 0] == pytest.approx(3 / 2 * 1 / 3)
    assert B[0, 1] == pytest.approx(min(6 / 7, 6 / 7) * 2 / 3) and B[1, 1] == pytest.approx(1 - 2 * 6 / 7 / 3)


@pytest.mark.parametrize("kind,p,seed", SMALL[:6])
def test_one_iteration_is_equation_3(kind, p, seed):
    """Without gate and dead band one iteration is W ← M_rᵀ W, i.e. eq. (3) with α_ij = C_i Mr_ij, f_ij = 1."""
    m = random_model(kind, p, seed)
    states = fos_iter(m, FOSParams.of(k=None, tolerance=0.0, detection=False, max_iterations=1))
    s0, s1 = next(states), next(states)
    M = relative_speed_matrix(m).toarray()
    # each side sums ≤ δ + 1 terms of ≤ 5 flops (α_ij (w_i/c_i − w_j/c_j)): γ_{δ+6} |M|ᵀ |w| each
    c, w = m.capacities, s0.loads
    tol = 2 * gamma(int(m.degree.max()) + 6) * (np.abs(M.T) @ np.abs(w))
    assert np.all(np.abs(s1.loads - M.T @ w) <= tol)
    alpha = c[:, None] * M
    eq3 = w - np.array([sum(alpha[i, j] * (w[i] / c[i] - w[j] / c[j]) for j in m.neighbours[i]) for i in range(p)])
    assert np.all(np.abs(s1.loads - eq3) <= tol)
    assert np.all(np.abs(m.apply_flow(s1.flow) - s1.loads) <= conservation_tol(m, s1.flow, 1))


@pytest.mark.parametrize("integer", [False, True])
def test_variant_A_oscillates_on_a_4_cycle_while_B_converges(integer):
    m = four_cycle([8.0, 0.0, 8.0, 0.0])
    a = fos(m, variant="A", k=None, integer=integer, max_iterations=50)
    b = fos(m, variant="B", k=None, integer=integer, max_iterations=50)
    assert a.convergence_factor == pytest.approx(1.0) and b.convergence_factor < 0.5
    assert not a.converged and a.iterations == 50 and a.extra["t_stable"] is None
    *_, s49, s50 = fos_iter(m, FOSParams.of(variant="A", k=None, integer=integer, max_iterations=50))
    assert np.array_equal(s49.loads, [0, 8, 0, 8]) and np.array_equal(s50.loads, [8, 0, 8, 0])  # period 2
    assert b.converged and b.iterations < 15
    assert np.all(np.abs(b.extra["loads"] - 4.0) <= 1e-3 * 4.0)  # its stopping rule: max |l − l̄| / l̄ ≤ 1e-3


# -- flows ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,p,seed", SMALL)
def test_ungated_fos_gives_a_balancing_flow(kind, p, seed):
    m = random_model(kind, p, seed)
    tol = 1e-3
    r = fos(m, k=None, tolerance=tol, max_iterations=20000)
    final = r.extra["loads"]
    assert r.converged
    drift = conservation_tol(m, r.flow, r.iterations)
    assert np.all(np.abs(m.apply_flow(r.flow) - final) <= drift)
    assert np.max(np.abs(final - m.fair_loads) / m.fair_loads) <= tol
    assert np.all(final >= 0)
    excess = float(np.sum(np.abs(final - m.fair_loads)))
    if kind in ("tree", "path", "star"):  # one balancing flow per final loads: f* up to the leftover excess
        ref = minimal_flow(m)  # (an edge of a tree carries at most the excess and the drift of one side)
        assert np.max(np.abs(r.flow - ref)) <= excess + drift.sum() + flow_tol(m) * np.linalg.norm(ref)


def test_flow_is_not_the_minimal_flow_on_graphs_with_cycles():
    m = random_model("tree+", 12, 2)
    r = fos(m, k=None, tolerance=1e-6, max_iterations=50000)
    ref = minimal_flow(m)
    assert r.converged
    assert np.linalg.norm(r.flow - ref) / np.linalg.norm(ref) > 0.05


@pytest.mark.parametrize("kind,p,seed", SMALL)
def test_integer_loads(kind, p, seed):
    m0 = random_model(kind, p, seed)
    m = Model.create(p, m0.edges, np.round(m0.loads * 10), m0.capacities, m0.weights)
    r = fos(m, integer=True, k=None, max_iterations=5000)
    final = r.extra["loads"]
    assert r.converged
    assert np.array_equal(final, np.round(final)) and np.all(final >= 0) and final.sum() == m.loads.sum()
    assert np.array_equal(r.flow, np.round(r.flow)) and np.array_equal(m.apply_flow(r.flow), final)
    M = relative_speed_matrix(m).toarray()  # quiet: no pair predicts a whole unit any more
    a, b = m.edges[:, 0], m.edges[:, 1]
    assert np.all(np.abs(M[a, b] * final[a] - M[b, a] * final[b]) < 1)


# -- the cost/benefit gate --------------------------------------------------------------------------
def test_every_transfer_passes_the_gate():
    m = point_source_path(8, 10)
    k, ub, ut = 20.0, 1e3, 1e-3
    prev = None
    for st in fos_iter(m, FOSParams.of(k=k, k_schedule="constant", integer=True, unit_bytes=ub, unit_time=ut),
                       links=DSL):
        if prev is not None:
            g = ut / (m.p * m.capacities)
            for e, x in zip(m.edges.tolist(), st.step):
                if x != 0:
                    s, r = e if x > 0 else e[::-1]
                    cost = DSL.latency + abs(x) * ub / DSL.bandwidth
                    assert cost < k * benefit(prev.loads[s], prev.loads[r], g[s], g[r], abs(x))
        prev = st


def test_benefit_single_form():
    # L > 0 from i to j and the same exchange seen as L < 0 from j to i give the same benefit
    assert benefit(10.0, 2.0, 1.0, 1.0, 3.0) == pytest.approx(3.0)
    assert benefit(2.0, 10.0, 1.0, 1.0, -3.0) == pytest.approx(3.0)
    assert benefit(11.0, 10.0, 1.0, 1.0, 1.0) == 0.0  # 001 §3.1: [11, 10] → [10, 11] has no benefit
    assert benefit(10.0, 2.0, 1.0, 1.0, 9.0) == pytest.approx(-1.0)  # overshoot: 10, 2 → 1, 11


def test_gate_stops_useless_balancing_on_a_slow_network():
    m = point_source_path(16, 10)
    common = {"integer": True, "unit_bytes": 1e3, "unit_time": 1e-4, "max_iterations": 400}
    plain = fos(m, k=None, links=DSL, **common)
    slow = fos(m, k=200.0, k_schedule="constant", links=DSL, **common)
    fast = fos(m, k=200.0, k_schedule="constant", links=LAN, **common)
    assert 0 < slow.extra["transfers"] < fast.extra["transfers"] <= plain.extra["transfers"]
    assert slow.iterations < plain.iterations
    assert np.abs(slow.flow).sum() < np.abs(plain.flow).sum()
    used = [np.count_nonzero(r.extra["loads"]) for r in (slow, fast)]
    assert used[0] < used[1]  # 001 Table 1: a slow network uses fewer processors


def test_gate_routes_around_a_slow_link():
    """001 §3.1: f_ij favours the fast edges — a 6-ring with one DSL link among LAN links."""
    p = 6
    m = Model.create(p, [(i, (i + 1) % p) for i in range(p)], [600.0] + [0.0] * (p - 1), np.ones(p))
    links = Links(latency=1.5e-4, bandwidth=12.5e6, overrides={(0, 1): (DSL.latency, DSL.bandwidth)})
    common = {"integer": True, "unit_bytes": 1e3, "unit_time": 1e-4, "links": links}
    plain = fos(m, k=None, **common)
    gated = fos(m, k=50.0, k_schedule="constant", **common)
    assert plain.flow[0] > 200 and gated.flow[0] == 0  # edge (0, 1) is the slow one
    assert plain.converged and gated.converged
    assert imbalance(gated.extra["loads"], m.capacities) < 1.1


def test_gain_of_gate_and_detection_over_plain_fos():
    """001 §4.2: gain (T1 − T2)/T1 of cost/benefit + detection (Algo2) over plain FOS (Algo1), 300 steps."""
    m = point_source_path(16, 10)
    common = {"integer": True, "unit_bytes": 1e3, "unit_time": 1e-4, "max_iterations": 300}

    def t(links, **kw):
        states = fos_iter(m, FOSParams.of(common, **kw), links=links, root=8)
        return program_time(m, states, 1000, unit_time=1e-4, unit_bytes=1e3, links=links)

    for links, floor in ((DSL, 0.1), (LAN, -0.01)):
        t1 = t(links, k=None, detection=False)
        t2 = t(links, k=1000.0, k_schedule="decrement")
        t3 = t(links, k=1000.0, k_schedule="halving")
        assert (t1 - t2) / t1 > floor
        if links is DSL:  # Fig. 5: halving k when the iteration time grows does better still
            assert (t1 - t3) / t1 > (t1 - t2) / t1
        else:  # Fig. 2: on a LAN the gate and the detection cost (almost) nothing
            assert abs(t1 - t2) / t1 < 0.01


def test_k_schedules():
    m = point_source_path(16, 10)
    common = {"integer": True, "unit_bytes": 1e3, "unit_time": 1e-4, "links": DSL, "max_iterations": 300}
    const = fos(m, k=1000.0, k_schedule="constant", **common)
    dec = fos(m, k=1000.0, k_schedule="decrement", **common)
    half = fos(m, k=1000.0, k_schedule="halving", **common)
    assert const.extra["k"] == 1000.0 and dec.extra["k"] == 1000.0 - dec.iterations
    assert half.extra["k"] < 1000.0 - half.iterations  # halved at least once
    assert half.extra["transfers"] < dec.extra["transfers"]
    with pytest.raises(BalancerError, match="halving"):
        fos(m, k_schedule="halving", detection=False)


# -- the shaker -------------------------------------------------------------------------------------
def test_shaker_reduces_the_integer_imbalance():
    p = 8
    stairs = Model.create(p, [(i, i + 1) for i in range(p - 1)], np.arange(p, 0, -1) - 1.0, np.ones(p))
    locked = fos(stairs, integer=True, k=None)
    assert locked.extra["transfers"] == 0  # 001 §3.3: every step of 1 blocks integer diffusion
    assert imbalance(locked.extra["loads"], stairs.capacities) == pytest.approx(2.0)
    for seed in range(4):
        r = fos(stairs, integer=True, k=None, shaker=True, kappa=0.05, seed=seed, max_iterations=3000)
        final = r.extra["loads"]
        assert final.sum() == stairs.loads.sum() and np.all(final >= 0)
        assert imbalance(final, stairs.capacities) < 2.0 - 0.2


def test_shaker_is_seeded():
    m = four_cycle([3.0, 2.0, 1.0, 0.0])
    runs = [fos(m, integer=True, k=None, shaker=True, kappa=0.1, seed=s, max_iterations=200) for s in (5, 5, 6, 7)]
    assert np.array_equal(runs[0].flow, runs[1].flow)
    assert any(not np.array_equal(runs[0].flow, r.flow) for r in runs[2:])


# -- detection --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,p,seed", SMALL)
def test_detection_stops_2h_minus_1_rounds_after_stability(kind, p, seed):
    m = random_model(kind, p, seed)
    root = graph_center(m)
    h = int(bfs_tree(m, root)[1].max())
    r = fos(m, k=None, tolerance=1e-3, root=root, max_iterations=20000)
    assert r.converged and r.extra["height"] == h
    assert r.iterations - r.extra["t_stable"] == 2 * h - 1
    if kind in ("tree", "path", "star"):  # root at the center of a tree: h = ⌈diam/2⌉
        diam = max(int(bfs_tree(m, v)[1].max()) for v in range(p))
        assert r.iterations - r.extra["t_stable"] <= diam
    # nothing moved in the 2h − 1 rounds the detection took, and the loads are those of a run without it
    plain = fos(m, k=None, tolerance=1e-3, detection=False, max_iterations=r.extra["t_stable"] + 5)
    assert np.array_equal(plain.extra["loads"], r.extra["loads"])
    assert r.extra["detection_messages"] == 2 * m.q * (h + 1) + 2 * (p - 1) * r.iterations


def test_detection_messages_and_time_match_the_alpha_beta_model():
    m = random_model("tree+", 10, 4)
    links = Links(latency=1e-4, bandwidth=1e8, overrides={(int(m.edges[0, 0]), int(m.edges[0, 1])): (5e-3, 1e6)})
    plain = fos(m, k=None, detection=False, max_iterations=30, links=links)
    ref = alpha_beta_time(m, links, [(1, [("allreduce", 2), ("exchange", 1), ("exchange", 1)]),
                                     (30, [("exchange", 1)])])
    # the same 33 α-β terms summed in a different grouping: γ of their number on each side
    assert np.allclose(plain.extra["rank_times"], ref, rtol=2 * flops(3 * 33), atol=0)
    assert plain.counters.messages == 2 * m.q * 32 and plain.counters.bytes == 16 * m.p + 8 * 2 * m.q * 32
    assert plain.counters.collectives == {"allreduce": 1} and plain.extra["detection_messages"] == 0
    det = fos(m, k=None, max_iterations=30, links=links, root=graph_center(m))
    assert det.counters.exchange_rounds == 2 + det.extra["height"] + 1 + 2 * det.iterations
    kept = fos(m, k=None, max_iterations=30, links=links, root=graph_center(m), build_tree=False)
    assert kept.counters.time < det.counters.time and kept.counters.collectives == {"allreduce": 1}


def test_single_processor():
    m = Model.create(1, np.zeros((0, 2)), [5.0], [1.0])
    r = fos(m)
    assert r.converged and r.iterations == 1 and r.flow.shape == (0,)


# -- errors and the registry ------------------------------------------------------------------------
@pytest.mark.parametrize("params,match", [
    ({"variant": "C"}, "variant"), ({"k": -1.0}, "k: must"), ({"k_schedule": "linear"}, "k_schedule"),
    ({"shaker": True}, "integer"), ({"integer": True, "shaker": True, "kappa": math.log(0.5) / 2}, "kappa"),
    ({"tolerance": 1.5}, "tolerance"), ({"max_iterations": -1}, "max_iterations"), ({"seed": -3}, "seed"),
    ({"unit_time": 0.0}, "unit_time"), ({"integer": 1}, "integer"), ({"root": 99}, "root"),
])
def test_bad_parameters(params, match):
    with pytest.raises(BalancerError, match=match):
        fos(four_cycle([1.0, 2.0, 3.0, 4.0]), **params)


def test_integer_mode_needs_integral_loads():
    with pytest.raises(BalancerError, match="integral"):
        fos(four_cycle([1.5, 2.0, 3.0, 4.0]), integer=True)


@pytest.mark.parametrize("model,match", unusable_models())
def test_unusable_models(model, match):
    with pytest.raises(GraphError, match=match):
        fos(model)


def test_registry_entry():
    info = REGISTRY["fos"]
    assert set(info.defaults) == {"variant", "k", "k_schedule", "integer", "shaker", "kappa", "detection",
                                  "tolerance", "max_iterations", "seed", "unit_bytes", "unit_time"}
    info.check(dict(info.defaults))

    assert math.exp(-DEFAULT_KAPPA * 2) == pytest.approx(0.5)  # κ = −ln(0.5)/2: 50 % at U = 2
    with pytest.raises(BalancerError, match="balancer.variant"):
        info.check({**info.defaults, "variant": "Z"})
    m = random_model("mesh", 12, 3)
    r = info.serial(m, links=LAN, **info.defaults)
    assert r.extra["root"] == graph_center(m) and r.converged
    assert r.extra["stop"] == r.iterations
