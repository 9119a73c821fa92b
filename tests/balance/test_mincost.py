"""The least-cost (l1) balancing flow ``mincost`` (hermes.balance.potential.mincost).

Oracle: networkx's network simplex on the same transportation problem with integer loads and integer edge costs
(an exact integer algorithm, independent of the linear-programming solver used by hermes). Bounds: the flow is
re-solved on its support (a forest, whose incidence has condition number at most about p, Grone–Merris), so the
balancing defect ``‖A f − (l − l̄)‖ / ‖l − l̄‖`` is at most a small multiple of ``p · ε``; the cost agrees with the
integer optimum to ``q · ε`` relative (a sum of q terms). Both asserted with a factor 100 of margin.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from hermes.balance.flow import check_balancing, minimal_flow, topological_order
from hermes.balance.model import Model
from hermes.balance.potential.mincost import edge_costs, mincost, mincost_flow
from hermes.balance.registry import BALANCERS
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from tests.balance.graphs import KINDS, graph_edges, random_model, unusable_models

EPS = np.finfo(np.float64).eps


def integer_model(kind: str, p: int, seed: int) -> Model:
    """Integer loads whose total p divides, equal capacities, weights 1/k (k = 1..3) so that costs are k."""
    rng = np.random.default_rng(seed)
    edges = graph_edges(kind, p, rng)
    loads = rng.integers(0, 40, p).astype(float)
    loads[-1] += (-loads.sum()) % p
    k = rng.integers(1, 4, len(edges))
    k[0] = 1
    return Model.create(p, edges, loads, np.ones(p), 1.0 / k)


def network_simplex_cost(m: Model, costs) -> float:
    g = nx.DiGraph()
    fair = m.fair_loads
    for i in range(m.p):
        g.add_node(i, demand=int(round(fair[i] - m.loads[i])))  # networkx: a negative demand supplies
    for (i, j), c in zip(m.edges.tolist(), costs):
        g.add_edge(i, j, weight=int(round(c)))
        g.add_edge(j, i, weight=int(round(c)))
    return float(nx.min_cost_flow_cost(g))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", [5, 16, 30])
def test_cost_equals_the_network_simplex_optimum(kind, p):
    m = integer_model(kind, p, 7 * p + len(kind))
    for cost in ("conductance", "hops"):
        c = edge_costs(m, cost)
        assert np.allclose(c, np.round(c)) and c.min() == 1.0
        f = mincost_flow(m, cost)
        want = network_simplex_cost(m, c)
        got = float(np.sum(c * np.abs(f)))
        assert abs(got - want) <= 100 * m.q * EPS * max(want, 1.0), (cost, got, want)
        assert check_balancing(m, f) <= 100 * p * EPS
        topological_order(m, f)  # an optimum has no cycle: raises GraphError if the orientation had one


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", [4, 12, 25])
def test_heterogeneous_models_balance_and_never_cost_more_than_the_minimal_flow(kind, p):
    m = random_model(kind, p, 3 * p)
    f, star = mincost_flow(m), minimal_flow(m)
    c = edge_costs(m)
    assert check_balancing(m, f) <= 100 * p * EPS
    assert np.sum(c * np.abs(f)) <= np.sum(c * np.abs(star)) * (1 + 100 * m.q * EPS)
    levels = topological_order(m, f)
    assert sorted(np.concatenate(levels).tolist()) == list(range(p))


def test_on_a_tree_the_balancing_flow_is_unique_and_equals_the_minimal_flow():
    for kind in ("path", "tree", "star"):
        m = random_model(kind, 20, 11)
        star = minimal_flow(m)
        assert np.linalg.norm(mincost_flow(m) - star) <= 100 * m.p * EPS * np.linalg.norm(m.loads)


def test_a_band_of_heavy_ranks_is_shifted_no_further_than_needed():
    # 8 × 8 processor mesh, row 3 twice as loaded: every row-3 rank sends 150 up and 150 down; rows beyond
    # are reached by shifting, so the l1 cost is exactly Σ over rows of |cumulative excess| · 8 columns
    p, edges = 64, []
    for i in range(8):
        for j in range(8):
            r = 8 * i + j
            edges += [(r, r + 1)] if j < 7 else []
            edges += [(r, r + 8)] if i < 7 else []
    loads = np.full(p, 300.0)
    loads[24:32] = 600.0
    m = Model.create(p, edges, loads, np.ones(p))
    f = mincost_flow(m, "hops")
    excess_per_row = np.full(8, 300.0 - 337.5)
    excess_per_row[3] = 600.0 - 337.5
    cum = np.cumsum(excess_per_row)[:-1]  # flow across each horizontal cut, per column
    assert np.sum(np.abs(f)) == pytest.approx(8 * np.abs(cum).sum(), rel=100 * m.q * EPS)


@pytest.mark.parametrize(("model", "match"), unusable_models())
def test_unusable_models_are_refused(model, match):
    with pytest.raises(GraphError, match=match):
        mincost_flow(model)


def test_registered_with_a_serial_reference_that_counts_one_broadcast():
    """One broadcast of the flow, after rank 0's linear program priced by its law (docs/COSTS.md) at the serial
    references' speed."""
    from hermes.balance.central import lp_units
    from hermes.balance.polynomial.precompute import DEFAULT_SPEED

    m = random_model("mesh", 16, 5)
    res = BALANCERS["mincost"].flow(m, links=Links())
    assert np.array_equal(res.flow, mincost_flow(m))
    assert res.counters.collectives == {"bcast": 1} and res.counters.bytes == 8 * m.q
    lp = lp_units(m.p, m.q) / (DEFAULT_SPEED * m.p * float(m.capacities[0]))
    assert lp > 0
    assert res.counters.time == pytest.approx(Links().collective_cost(16, 8.0 * m.q) + lp)
    with pytest.raises(BalancerError, match="cost"):
        edge_costs(m, "euclid")


@pytest.mark.parametrize("kind", ["mesh", "tree+", "ring"])
def test_slack_moves_only_the_excess_above_the_bound_and_costs_no_more(kind):
    m = random_model(kind, 24, 9)
    exact = mincost_flow(m)
    c = edge_costs(m)
    for s in (0.02, 0.2):
        f = mincost_flow(m, slack=s)
        after = m.loads - m.incidence @ f
        # the bound holds to the solver's feasibility tolerance (HiGHS: 1e-7 absolute) on loads of size ≤ 10·p
        assert np.all(after <= (1 + s) * m.fair_loads + 1e-6)
        assert after.sum() == pytest.approx(m.loads.sum(), rel=100 * m.p * EPS)
        assert np.sum(c * np.abs(f)) <= np.sum(c * np.abs(exact)) * (1 + 1e-9)
        topological_order(m, f)
    assert np.sum(c * np.abs(mincost_flow(m, slack=0.2))) < np.sum(c * np.abs(exact))
    with pytest.raises(BalancerError, match="slack"):
        mincost_flow(m, slack=1.0)


def test_large_meshes_are_solved_exactly_on_the_forest():
    m = random_model("mesh", 400, 2)
    f = mincost_flow(m)
    assert check_balancing(m, f) <= 100 * m.p * EPS
    assert np.count_nonzero(f) <= m.p - 1  # a forest: at most p − 1 edges carry flow
