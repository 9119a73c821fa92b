"""The minimal balancing flow oracle, topological order and the shared cost helpers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from hermes.balance.flow import (
    alpha_beta_time,
    check_balancing,
    flow_error,
    minimal_flow,
    neighbour_table,
    ordered_row_sums,
    topological_order,
)
from hermes.balance.model import Model
from hermes.runtime.clock import Links, VirtualClock
from hermes.errors import GraphError
from tests.balance.graphs import KINDS, random_model, unusable_models
from tests.tolerances import (
    EPS,
    balancing_floor,
    flops,
    flow_map_condition,
    flow_tol,
    gamma,
    laplacian_condition,
    matvec_tol,
)


def cost(model: Model, f) -> float:
    return float(np.sum(f**2 / model.weights))


CASES = [(k, p, s) for k in KINDS for p, s in [(6, 1), (12, 2), (25, 3)]]


@pytest.mark.parametrize("kind,p,seed", CASES)
def test_minimal_flow_balances_and_matches_closed_forms(kind, p, seed):
    m = random_model(kind, p, seed)
    f = minimal_flow(m)
    b = m.loads - m.fair_loads
    # two refinement steps reach the round-off floor of the defect (tests/tolerances.py::balancing_floor):
    # componentwise, A f − b is evaluated within γ_2 |A||f| + γ_{p+1}(|l| + c Σ|l|), f known to γ_2 |f|
    assert check_balancing(m, f) <= balancing_floor(m, f)
    loads = np.abs(m.loads)
    floor = 2 * matvec_tol(m.incidence, f) + gamma(m.p + 1) * (loads + m.capacities * loads.sum())
    assert np.all(np.abs(m.incidence @ f - b) <= floor)
    assert np.all(np.abs(m.apply_flow(f) - m.fair_loads) <= floor + matvec_tol(m.incidence, f))
    # f = W Aᵀ L⁺ (l − l̄): two backward-stable solutions, each within 4 p u κ(L)
    a = m.incidence.toarray()
    ref = m.weights * (a.T @ np.linalg.pinv(m.laplacian.toarray()) @ b)
    assert np.linalg.norm(f - ref) <= flow_tol(m) * np.linalg.norm(ref)
    # thesis eq. (8.1.5): φ = W Aᵀ D^{-1/2} (𝓛 + c^{1/2} c^{1/2ᵀ})^{-1} D^{-1/2} l; the solve with 𝓛 + c^{1/2}c^{1/2ᵀ}
    # errs by 4 p u κ of that matrix, amplified by the D^{-1/2} scalings (κ(D^{-1/2}) = √(c_max/c_min))
    dm = np.diag(1 / np.sqrt(m.capacities))
    gl = dm @ m.laplacian.toarray() @ dm + np.outer(np.sqrt(m.capacities), np.sqrt(m.capacities))
    phi = m.weights * (a.T @ dm @ np.linalg.solve(gl, dm @ m.loads))
    phi_tol = flow_tol(m) + 4 * m.p * EPS / 2 * np.linalg.cond(gl) * m.capacities.max() / m.capacities.min()
    assert np.linalg.norm(f - phi) <= phi_tol * np.linalg.norm(phi)
    assert flow_error(m, phi) <= phi_tol


@pytest.mark.parametrize("kind,p,seed", [c for c in CASES if c[0] in ("tree+", "ring", "mesh")])
def test_minimal_flow_is_minimal(kind, p, seed):
    m = random_model(kind, p, seed)
    f = minimal_flow(m)
    cycles = sla.null_space(m.incidence.toarray())  # cycle flows: A z = 0
    assert cycles.shape[1] == m.q - m.p + 1
    rng = np.random.default_rng(seed + 100)
    base = cost(m, f)
    # the SVD's null space satisfies ‖A z‖ ≤ q u ‖A‖₂ ‖z‖ (backward stable), so z has a component of relative
    # size ≤ q u κ(A) = q u √κ(L)·√(w_max/w_min)… outside the cycle space; f is within flow_tol of f*
    norm_a, nb = np.linalg.norm(m.incidence.toarray(), 2), np.linalg.norm(m.loads - m.fair_loads)
    off = m.q * EPS * np.sqrt(laplacian_condition(m))
    for _ in range(20):
        z = cycles @ rng.normal(size=cycles.shape[1])
        z *= rng.choice([1e-3, 1.0, 10.0]) * np.linalg.norm(f) / np.linalg.norm(z)
        # still balancing: the floor of f + z, plus A z
        assert check_balancing(m, f + z) <= balancing_floor(m, f + z) + m.q * EPS * norm_a * np.linalg.norm(z) / nb
        assert cost(m, f + z) > base
        # first-order optimality: f is W^{-1}-orthogonal to every cycle, up to f's and z's errors in the W^{-1}
        # inner product (Cauchy–Schwarz) and the rounding of the sum
        rel_tol = (flow_tol(m) + off) * flow_map_condition(m)
        assert abs(np.sum(f * z / m.weights)) <= (rel_tol * np.sqrt(base * cost(m, z))
                                                  + gamma(m.q + 2) * np.sum(np.abs(f * z / m.weights)))


@pytest.mark.parametrize("seed", range(40))
def test_minimal_flow_orientation_is_acyclic(seed):
    rng = np.random.default_rng(seed)
    kind = KINDS[seed % len(KINDS)]
    m = random_model(kind, int(rng.integers(2, 40)), seed)
    f = minimal_flow(m)
    levels = topological_order(m, f)
    ranks = np.concatenate(levels)
    assert np.array_equal(np.sort(ranks), np.arange(m.p))
    level = np.empty(m.p, dtype=int)
    for d, lv in enumerate(levels):
        level[lv] = d
    tol = 1e-9 * np.abs(f).max()  # topological_order's documented default threshold for "no flow"
    src = np.where(f > 0, m.edges[:, 0], m.edges[:, 1])
    dst = np.where(f > 0, m.edges[:, 1], m.edges[:, 0])
    on = np.abs(f) > tol
    assert np.all(level[src[on]] < level[dst[on]])
    # a rank's level is 1 + the largest level of its senders (0 without senders)
    expect = np.zeros(m.p, dtype=int)
    np.maximum.at(expect, dst[on], level[src[on]] + 1)
    assert np.array_equal(level, expect)


def test_topological_order_detects_a_cycle():
    m = Model.create(4, [(0, 1), (1, 2), (2, 3), (0, 3)], np.ones(4), np.ones(4))
    # edges sorted: (0,1), (0,3), (1,2), (2,3)
    circulation = np.array([1.0, -1.0, 1.0, 1.0])  # 0→1→2→3→0
    with pytest.raises(GraphError, match="cycle"):
        topological_order(m, circulation)
    levels = topological_order(m, np.array([1.0, 1.0, 1.0, 1.0]))  # 0→1→2→3, 0→3
    assert [lv.tolist() for lv in levels] == [[0], [1], [2], [3]]
    assert [lv.tolist() for lv in topological_order(m, np.zeros(4))] == [[0, 1, 2, 3]]


def test_balanced_and_single_processor_models():
    m = Model.create(5, [(0, 1), (1, 2), (2, 3), (3, 4)], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5])
    f = minimal_flow(m)
    # l − l̄ is zero up to its rounding γ_{p+1}(|l| + c Σ|l|); the flow map W Aᵀ L⁺ has norm ≤ √(w_max / λ_2)
    lam = np.linalg.eigvalsh(m.laplacian.toarray())
    residue = gamma(m.p + 1) * np.linalg.norm(np.abs(m.loads) + m.capacities * np.abs(m.loads).sum())
    assert np.abs(f).max() <= 2 * np.sqrt(m.weights.max() / lam[1]) * residue
    one = Model.create(1, np.zeros((0, 2)), [3.0], [1.0])
    assert minimal_flow(one).shape == (0,)
    assert topological_order(one, np.zeros(0))[0].tolist() == [0]


def test_errors_surface_as_graph_errors():
    with pytest.raises(GraphError, match="disconnected"):
        Model.create(4, [(0, 1), (2, 3)], np.ones(4), np.ones(4))
    with pytest.raises(GraphError, match="capacity"):
        Model.create(3, [(0, 1), (1, 2)], np.ones(3), [1.0, 0.0, 1.0])
    for bad, match in unusable_models():
        with pytest.raises(GraphError, match=match):
            minimal_flow(bad)


def test_neighbour_table_is_sorted_and_consistent():
    m = random_model("tree+", 15, 4)
    nbr, edge, sign = neighbour_table(m)
    for i in range(m.p):
        deg = int(np.count_nonzero(sign[i]))
        assert nbr[i, :deg].tolist() == m.neighbours[i].tolist()
        for t in range(deg):
            a, b = m.edges[edge[i, t]]
            assert (a, b) == ((i, nbr[i, t]) if sign[i, t] > 0 else (nbr[i, t], i))
    wdeg = ordered_row_sums(np.where(sign != 0, m.weights[edge], 0.0))
    assert np.allclose(wdeg, m.weighted_degree, rtol=2 * flops(int(m.degree.max())), atol=0)  # positive sums


def test_alpha_beta_time_replays_the_virtual_clock():
    m = random_model("tree+", 7, 5)
    e = m.edges
    links = Links(latency=2e-4, bandwidth=5e7, overrides={(int(e[0, 0]), int(e[0, 1])): (1e-3, 1e6),
                                                          (int(e[3, 0]), int(e[3, 1])): (3e-5, 1e9)})
    schedule = [(1, [("allreduce", 2), ("exchange", 3)]), (4, [("exchange", 1), ("exchange", 1), ("allreduce", 1)]),
                (2, [("exchange", 2)])]
    got = alpha_beta_time(m, links, schedule)
    # replay with the clock's own methods, rank by rank
    clocks = [VirtualClock(r, m.p, links, speed=1.0, capacity=float(m.capacities[r])) for r in range(m.p)]
    for repeat, block in schedule:
        for _ in range(repeat):
            for kind, words in block:
                if kind == "allreduce":
                    stamps = np.array([c.stamp() for c in clocks])
                    for c in clocks:
                        c.synchronised(stamps, links.collective_cost(m.p, 8.0 * words))
                else:
                    stamps = np.array([c.stamp() for c in clocks])
                    for r, c in enumerate(clocks):
                        nb = m.neighbours[r]
                        c.exchanged(np.array([links.cost(r, int(j), 8.0 * words) for j in nb]),
                                    np.array([stamps[j] + links.cost(int(j), r, 8.0 * words) for j in nb]))
    # sums of the same ≤ 32 positive α-β terms (each ≤ 3 flops), differently grouped, on each side
    assert np.allclose(got, [c.now for c in clocks], rtol=2 * flops(3 * 32), atol=0)
    assert len(set(got.tolist())) > 1  # the last exchanges leave the ranks at different times
