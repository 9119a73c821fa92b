from __future__ import annotations

import numpy as np
import pytest

from hermes.balance.flow import minimal_flow
from hermes.balance.model import Model
from hermes.balance.realisation.realise import RealiseOptions, SubdomainFlow, realisation_report, simulate_realisation
from hermes.balance.realisation.selection import (
    SELECTIONS,
    front_key,
    gain,
    get_selection,
    layer_distance,
    select_gain,
    select_peel,
    select_wavefront,
)
from hermes.data.distributed import LocalDomain
from hermes.data.generators import grid
from hermes.data.partition import metis_partition
from hermes.errors import BalancerError, GraphError
from tests.tolerances import sum_tol


def _local(mesh, owner, rank, weights=None):
    """The LocalDomain rank ``rank`` would hold for a whole-mesh owner array (no MPI needed)."""
    idx = np.flatnonzero(owner == rank)
    deg = np.diff(mesh.xadj)[idx]
    ent = np.concatenate([np.arange(mesh.xadj[i], mesh.xadj[i + 1]) for i in idx])
    w = mesh.weights if weights is None else weights
    return LocalDomain(rank=rank, size=int(owner.max()) + 1, gid=idx.astype(np.int64), weight=w[idx],
                       coords=mesh.coords[idx], xadj=np.concatenate(([0], np.cumsum(deg))).astype(np.int64),
                       adjncy=mesh.adjncy[ent], nbr_owner=owner[mesh.adjncy[ent]])


def test_homogeneous_gain_is_edge_cut_gain():
    m = grid(6, 3)
    owner = (m.coords[:, 0] > 3).astype(np.int64)  # columns 0-2 rank 0, 3-5 rank 1
    dom = _local(m, owner, 0)
    cost = np.array([[0.0, 1.0], [1.0, 0.0]])
    cells = np.arange(dom.n)
    g = gain(dom, dom.nbr_owner, cells, 1, cost)
    # g(v, q) = |e_q(v)| - |e_p(v)| on two subdomains
    eq = np.bincount(dom.rows, weights=(dom.nbr_owner == 1), minlength=dom.n)
    ep = np.bincount(dom.rows, weights=(dom.nbr_owner == 0), minlength=dom.n)
    assert np.array_equal(g, eq - ep)


@pytest.mark.parametrize("amount", [1.0, 3.0, 7.5, 15.0])
def test_selection_meets_flow_within_one_cell_and_peels_layers(amount):
    m = grid(10, 4)
    owner = (m.coords[:, 0] > 5).astype(np.int64)
    dom = _local(m, owner, 0)
    dest = select_gain(dom, {1: amount}, np.array([[0.0, 1.0], [1.0, 0.0]]))
    moved = dom.weight[dest == 1].sum()
    assert abs(moved - amount) <= 0.5 + sum_tol(dom.weight)  # half a (unit) cell, plus the sum's rounding
    assert np.all(np.isin(dest, [0, 1])) and (dest == 0).any()
    # deterministic
    assert np.array_equal(dest, select_gain(dom, {1: amount}, np.array([[0.0, 1.0], [1.0, 0.0]])))


def test_selection_never_empties_the_rank_and_serves_every_target():
    m = grid(6, 6)
    x, y = m.coords.T
    owner = np.where(x < 3, np.where(y < 3, 0, 2), 1).astype(np.int64)
    dom = _local(m, owner, 0)
    cost = np.ones((3, 3)) - np.eye(3)
    dest = select_gain(dom, {1: 3.0, 2: 3.0}, cost)
    assert dom.weight[dest == 1].sum() == pytest.approx(3.0)
    assert dom.weight[dest == 2].sum() == pytest.approx(3.0)
    dest = select_gain(dom, {1: 100.0, 2: 100.0}, cost)
    assert (dest == 0).sum() == 1


def test_heavy_cells_are_offered_only_where_they_fit():
    m = grid(4, 1)
    owner = np.array([0, 0, 1, 2])
    # rank 0 owns cells 0 and 1; only cell 1 touches rank 1 (cell 2)
    dom = _local(m, owner, 0, weights=np.array([1.0, 10.0, 1.0, 1.0]))
    cost = np.ones((3, 3)) - np.eye(3)
    # moving weight 10 for a flow of 2 is worse: the heavy boundary cell stays, and the light cell
    # behind it goes instead (the "behind heavy cells" step)
    assert select_gain(dom, {1: 2.0}, cost).tolist() == [1, 0]
    assert select_gain(dom, {1: 9.0}, cost).tolist() == [0, 1]
    # nothing fits a flow below half the lightest cell
    assert (select_gain(dom, {1: 0.4}, cost) == 0).all()
    # the light cell behind a heavy one on a longer path: nearest layer first
    m5 = grid(5, 1)
    dom5 = _local(m5, np.array([0, 0, 0, 1, 2]), 0, weights=np.array([1.0, 1.0, 10.0, 1.0, 1.0]))
    assert select_gain(dom5, {1: 1.0}, cost).tolist() == [0, 1, 0]


# -- the three strategies --------------------------------------------------------------------------

NAMES = sorted(SELECTIONS)


def _layout(kind: str):
    """A 12×12 grid where rank 0 has 1, 2 or 3 neighbouring parts (long shared boundaries)."""
    m = grid(12, 12)
    x, y = m.coords.T
    if kind == "two":  # left half / right half
        owner = (x > 6).astype(np.int64)
    elif kind == "three":  # left half, right-bottom, right-top
        owner = np.where(x < 6, 0, np.where(y < 6, 1, 2)).astype(np.int64)
    else:  # rank 0 in the bottom middle, ranks 1 (left), 2 (right), 3 (top) around it
        owner = np.where(x < 3, 1, np.where(x > 9, 2, np.where(y > 8, 3, 0))).astype(np.int64)
    return m, owner


def _cost(p):
    return np.ones((p, p)) - np.eye(p)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", ["two", "three", "four"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_strategy_serves_every_target_within_half_a_cell(name, kind, seed):
    m, owner = _layout(kind)
    p = int(owner.max()) + 1
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 2.0, m.n_cells)
    dom = _local(m, owner, 0, weights=w)
    shares = rng.dirichlet(np.ones(p - 1)) * rng.uniform(0.2, 0.6) * dom.load
    out = {q: float(s) for q, s in zip(range(1, p), shares)}
    dest = get_selection(name)(dom, out, _cost(p))
    assert np.all(np.isin(dest, np.arange(p))) and (dest == 0).any()
    for q, f in out.items():
        assert abs(dom.weight[dest == q].sum() - f) <= 0.5 * w.max() + sum_tol(w), (q, f)
    # deterministic, also on an equal copy of the domain
    again = get_selection(name)(_local(m, owner, 0, weights=w), dict(reversed(list(out.items()))), _cost(p))
    assert np.array_equal(dest, again)


@pytest.mark.parametrize("name", NAMES)
def test_no_strategy_empties_a_rank(name):
    m, owner = _layout("four")
    dom = _local(m, owner, 0)
    dest = get_selection(name)(dom, {1: 1e6, 2: 1e6, 3: 1e6}, _cost(4))
    assert (dest == 0).sum() == 1  # every cell of the connected subdomain is reachable: exactly one stays
    one = _local(m, np.where(np.arange(m.n_cells) == 0, 0, 1), 0)  # a rank holding a single cell
    assert get_selection(name)(one, {1: 5.0}, _cost(2)).tolist() == [0]


def test_layer_distance_is_bfs_from_the_shared_boundary():
    import networkx as nx

    m = grid(20, 20)
    owner = metis_partition(m.xadj, m.adjncy, None, 4, seed=3)
    dom = _local(m, owner, 0)
    targets = dom.neighbour_ranks.tolist()
    dist = layer_distance(dom, targets)
    g = nx.Graph()
    g.add_nodes_from(range(dom.n))
    li = dom.local_index
    g.add_edges_from(zip(dom.rows[li >= 0].tolist(), li[li >= 0].tolist()))
    for k, q in enumerate(targets):
        src = np.unique(dom.rows[dom.nbr_owner == q])
        ref = nx.multi_source_dijkstra_path_length(g, set(src.tolist()))
        expect = np.array([ref.get(i, np.inf) + 1 for i in range(dom.n)])
        assert np.array_equal(dist[k], expect)


@pytest.mark.parametrize("amount", [3.0, 7.0, 13.0])
def test_peel_takes_whole_layers_then_the_lowest_ids(amount):
    m = grid(10, 4)
    owner = (m.coords[:, 0] > 5).astype(np.int64)
    dom = _local(m, owner, 0)
    dest = select_peel(dom, {1: amount}, None)
    col = (dom.coords[:, 0] - 0.5).astype(int)
    layer = 5 - col  # column 4 touches rank 1
    full, extra = divmod(int(amount), 4)
    expect = layer <= full
    expect[np.flatnonzero(layer == full + 1)[:extra]] = True  # gid order within the next layer
    assert np.array_equal(dest == 1, expect)


@pytest.mark.parametrize("seed", [0, 1])
def test_peel_follows_bfs_layers_on_a_metis_partition(seed):
    m = grid(24, 24)
    owner = metis_partition(m.xadj, m.adjncy, None, 4, seed=seed)
    dom = _local(m, owner, 0)
    q = int(dom.neighbour_ranks[0])
    dest = select_peel(dom, {q: 0.3 * dom.load}, None)
    layer = layer_distance(dom, [q])[0]
    moved = dest == q
    assert moved.sum() == round(0.3 * dom.load)
    assert layer[moved].max() <= layer[~moved].min()  # layer by layer
    edge = layer == layer[moved].max()
    assert dom.gid[moved & edge].max() < dom.gid[~moved & edge].min(initial=np.iinfo(np.int64).max)


def test_front_key_matches_its_definition():
    m = grid(10, 4)
    owner = (m.coords[:, 0] > 5).astype(np.int64)
    dom = _local(m, owner, 0)
    # c_B = (4.5, 2), c_p = (2.5, 2): the front is vertical and starts on the boundary column
    assert np.allclose(front_key(dom, [1])[0], 4.5 - dom.coords[:, 0])
    dest = select_wavefront(dom, {1: 8.0}, None)
    assert np.array_equal(dest == 1, dom.coords[:, 0] > 3)


def test_wavefront_sweeps_a_straight_front():
    m = grid(30, 30)
    x, y = m.coords.T
    owner = (x + 0.5 * y > 25).astype(np.int64)  # a slanted boundary
    dom = _local(m, owner, 0)
    tau = front_key(dom, [1])[0]
    dest = select_wavefront(dom, {1: 100.0}, None)
    moved = dest == 1
    assert moved.sum() == 100
    assert tau[moved].max() <= tau[~moved].min()


def test_get_selection_lists_valid_names():
    assert set(SELECTIONS) == {"gain", "peel", "wavefront"}
    assert get_selection("gain") is select_gain
    with pytest.raises(BalancerError, match="gain, peel, wavefront"):
        get_selection("fifo")


def test_realisation_report_counts_transfers_and_cut():
    m = grid(6, 1)  # a chain 0-1-2-3-4-5
    before = np.array([0, 0, 1, 1, 2, 2])
    after = np.array([0, 1, 1, 2, 2, 2])
    w = np.arange(1.0, 7.0)
    edges = np.array([[0, 1], [1, 2]])
    r = realisation_report(m.xadj, m.adjncy, before, after, w, SubdomainFlow(edges, np.array([2.0, 5.0])))
    assert r["realised"].tolist() == [2.0, 4.0] and r["deviation"].tolist() == [0.0, 1.0]
    assert r["relative_deviation"] == pytest.approx(1 / 7) and r["max_deviation"] == 1.0
    assert r["edge_cut_before"] == 2 and r["edge_cut_after"] == 2
    assert (r["migrated_cells"], r["migrated_weight"]) == (2, 6.0) and r["off_graph_weight"] == 0.0
    # a cell passed on 0 -> 1 -> 2 shows as an off-graph transfer unless the hop-wise count is given
    r = realisation_report(m.xadj, m.adjncy, before, np.array([2, 0, 1, 1, 2, 2]), w,
                           SubdomainFlow(edges, np.array([1.0, 1.0])))
    assert r["off_graph_weight"] == 1.0 and r["relative_deviation"] == 1.0
    r = realisation_report(m.xadj, m.adjncy, before, np.array([2, 0, 1, 1, 2, 2]), w,
                           SubdomainFlow(edges, np.array([1.0, 1.0])), realised=[1.0, 1.0])
    assert r["relative_deviation"] == 0.0 and r["net_transfer"].tolist() == [0.0, 0.0]
    with pytest.raises(GraphError):
        realisation_report(m.xadj, m.adjncy, before[:-1], after, w, SubdomainFlow(edges, np.array([1.0, 1.0])))
    with pytest.raises(GraphError):
        realisation_report(m.xadj, m.adjncy, before, after, w, SubdomainFlow(edges, np.array([1.0])))


def _partitioned(m, w, p: int):
    """METIS's p parts of mesh ``m`` (seed 0) and their subdomain model with weights ``w``, homogeneous."""
    owner = metis_partition(m.xadj, m.adjncy, None, p, seed=0)
    rows = np.repeat(np.arange(m.n_cells), np.diff(m.xadj))
    cut = owner[rows] != owner[m.adjncy]
    pairs = np.unique(np.sort(np.column_stack([owner[rows][cut], owner[m.adjncy][cut]]), axis=1), axis=0)
    return owner, Model.create(p, pairs, np.bincount(owner, weights=w, minlength=p), np.ones(p))


@pytest.mark.parametrize("name", NAMES)
def test_simulated_realisation_conserves_and_balances(name):
    m = grid(32, 32)
    x, y = m.coords.T
    w = np.where((x - 10) ** 2 + (y - 20) ** 2 < 64, 3.0, 1.0)
    p = 4
    owner, model = _partitioned(m, w, p)
    flow = minimal_flow(model)
    after, hop = simulate_realisation(m.xadj, m.adjncy, m.coords, w, owner, SubdomainFlow(model.edges, flow),
                                      RealiseOptions(name))
    assert after.shape == owner.shape and np.all(np.bincount(after, minlength=p) > 0)
    r = realisation_report(m.xadj, m.adjncy, owner, after, w, SubdomainFlow(model.edges, flow), realised=hop)
    assert r["imbalance_before"] > 1.1
    assert r["imbalance_after"] < 1.01
    assert r["max_deviation"] <= 0.5 * w.max() * p  # each hop within half a cell


def test_the_replay_shows_every_level_it_applies():
    """``observe`` sees each level's owners before and after, in order: chained, they are the replay's answer, and
    the weight moved level by level along each edge is the replay's hop-wise ``realised``."""
    m = grid(24, 16)
    x = m.coords[:, 0]
    w = np.where(x < 6, 3.0, 1.0)
    p = 8
    owner, model = _partitioned(m, w, p)
    flow = SubdomainFlow(model.edges, minimal_flow(model))
    seen = []
    after, hop = simulate_realisation(m.xadj, m.adjncy, m.coords, w, owner, flow,
                                      observe=lambda k, before, new: seen.append((k, before.copy(), new.copy())))
    plain, plain_hop = simulate_realisation(m.xadj, m.adjncy, m.coords, w, owner, flow)
    assert np.array_equal(after, plain) and np.array_equal(hop, plain_hop)  # observing changes nothing
    assert [k for k, _, _ in seen] == list(range(len(seen))) and len(seen) > 1
    assert np.array_equal(seen[0][1], owner) and np.array_equal(seen[-1][2], after)
    assert all(np.array_equal(seen[i][2], seen[i + 1][1]) for i in range(len(seen) - 1))
    e = model.edges
    moved = np.zeros(len(e))
    for _, before, new in seen:
        t = np.zeros((p, p))
        np.add.at(t, (before, new), w)
        moved += t[e[:, 0], e[:, 1]] - t[e[:, 1], e[:, 0]]
    assert np.allclose(moved, hop, rtol=0, atol=sum_tol(np.tile(w, 2 * len(seen))))  # any order of the same sums


@pytest.mark.parametrize("name", NAMES)
def test_gain_starves_a_short_boundary(name):
    m = grid(30, 30)
    x, y = m.coords.T
    w = np.where((x - 9) ** 2 + (y - 20) ** 2 < 8 ** 2, 4.0, 1.0)
    owner = metis_partition(m.xadj, m.adjncy, None, 4, seed=0)
    dom = _local(m, owner, 3, weights=w)
    lengths = dict(zip(dom.neighbour_ranks.tolist(), dom.boundary_lengths.tolist()))
    assert lengths[1] <= 4 < min(lengths[0], lengths[2])  # the case: a short boundary with rank 1
    out = {0: 110.0, 1: 128.0, 2: 118.0}
    dest = get_selection(name)(dom, out, _cost(4))
    for q, f in out.items():
        assert abs(dom.weight[dest == q].sum() - f) <= 0.5 * w.max(), (q, dom.weight[dest == q].sum())


# -- the incremental gain selection against its definition -----------------------------------------

def _reference_gain(dom, outflow, cost):
    """The gain peeling by its definition: every round recomputes every gain; no hand-on."""
    me, w, li = dom.rank, dom.weight, dom.local_index
    dest = np.full(dom.n, me)
    targets = sorted(outflow)
    remaining = np.array([outflow[q] for q in targets], dtype=float)
    while (remaining > 0).any():
        owner = np.where(li >= 0, dest[np.maximum(li, 0)], dom.nbr_owner)
        best, pref = np.full(dom.n, -np.inf), np.full(dom.n, -1)
        for t, q in enumerate(targets):
            touches = np.isin(np.arange(dom.n), dom.rows[owner == q])
            cand = np.flatnonzero(touches & (dest == me) & (0.5 * w <= remaining[t]) & (remaining[t] > 0))
            g = gain(dom, owner, cand, q, cost)
            better = g > best[cand]
            best[cand[better]], pref[cand[better]] = g[better], t
        n_home, moved = int((dest == me).sum()), 0
        for t, q in enumerate(targets):
            cand = np.flatnonzero(pref == t)
            cand = cand[np.lexsort((dom.gid[cand], -best[cand]))]
            for v in cand:  # one cell at a time: take while the moved weight gets closer to the flow
                if n_home - moved <= 1 or 0.5 * w[v] > remaining[t]:
                    break
                dest[v], remaining[t], moved = q, remaining[t] - w[v], moved + 1
        if moved == 0:
            break
    return dest


def _closed_out(dom, dest, outflow):
    """Whether a target is short of its flow with no fitting home cell on its frontier while a
    fitting cell chosen for another target touches its side (where the hand-on applies) or a
    fitting home cell lies behind the heavy ones (where the "behind heavy cells" step applies)."""
    li = dom.local_index
    owner = np.where(li >= 0, dest[np.maximum(li, 0)], dom.nbr_owner)
    for q, f in outflow.items():
        need = f - dom.weight[dest == q].sum()
        touches = np.isin(np.arange(dom.n), dom.rows[owner == q]) & (0.5 * dom.weight <= need)
        home, others = dest == dom.rank, (dest != dom.rank) & (dest != q)
        behind = home & (0.5 * dom.weight <= need)
        if need > 0 and not (touches & home).any() and ((touches & others).any() or behind.any()):
            return True
    return False


@pytest.mark.parametrize("costs", ["unit", "integer", "dyadic"])
def test_incremental_gain_is_the_definition_unless_a_frontier_closes(costs):
    same, closed, total = 0, 0, np.zeros(2)
    for seed in range(40):
        rng = np.random.default_rng(seed)
        m = grid(*(int(k) for k in rng.integers(6, 16, 2)))
        p = int(rng.integers(3, 7))
        owner = metis_partition(m.xadj, m.adjncy, None, p, seed=seed)
        w = np.ones(m.n_cells) if costs == "unit" else rng.choice([1.0, 2.0, 3.0], m.n_cells)
        dom = _local(m, owner, int(rng.integers(p)), weights=w)
        q = dom.neighbour_ranks
        out = dict(zip(q.tolist(), (rng.dirichlet(np.ones(q.size)) * rng.uniform(0.3, 0.9) * dom.load).tolist()))
        cost = {"unit": _cost(p), "integer": rng.integers(1, 4, (p, p)),
                "dyadic": rng.choice([0.25, 0.5, 1.25, 2.0], (p, p))}[costs]
        cost = np.triu(cost, 1) + np.triu(cost, 1).T  # exact sums: ties are ties in both forms
        ref, dest = _reference_gain(dom, out, cost), select_gain(dom, out, cost)
        if not _closed_out(dom, ref, out):
            assert np.array_equal(dest, ref), seed
            same += 1
            continue
        closed += 1  # the hand-on: every target within half a cell, or closer to the flows in total
        dev = [np.array([abs(dom.weight[d == q].sum() - f) for q, f in out.items()]) for d in (ref, dest)]
        assert (dev[1].max() <= 0.5 * w.max() + sum_tol(w)
                or dev[1].sum() <= dev[0].sum() + 2 * len(out) * sum_tol(w)), seed
        assert (dest == dom.rank).any() and np.all(np.isin(dest, [dom.rank, *out]))
        total += [dev[0].sum(), dev[1].sum()]
    assert same >= 25 and closed >= 1, (same, closed)  # both branches exercised
    assert total[1] < 0.5 * total[0]  # the hand-on brings the closed-out targets much closer


def _chain(second_link: bool):
    """Home cells v, u, x (gids 0, 1, 2) in a chain; v touches rank 1 (gid 10) and rank 2 (gid 11),
    and with ``second_link`` u touches rank 1 too (gid 12)."""
    adj = [[10, 11, 1], [0, 2] + ([12] if second_link else []), [1]]
    owner = {0: 0, 1: 0, 2: 0, 10: 1, 11: 2, 12: 1}
    adjncy = np.array([g for a in adj for g in a])
    return LocalDomain(rank=0, size=3, gid=np.arange(3), weight=np.ones(3), coords=np.zeros((3, 2)),
                       xadj=np.cumsum([0] + [len(a) for a in adj]), adjncy=adjncy,
                       nbr_owner=np.array([owner[g] for g in adjncy.tolist()]))


def test_hand_on_serves_a_closed_target_only_if_the_donor_can_make_up():
    out, cost = {1: 1.0, 2: 1.0}, _cost(3)
    # v ties between 1 and 2 and goes to 1 (lower rank): 2's only frontier cell is gone
    for second_link in (False, True):
        assert _reference_gain(_chain(second_link), out, cost).tolist() == [1, 0, 0]
    # 1 could not make up for v: no hand-on
    assert select_gain(_chain(False), out, cost).tolist() == [1, 0, 0]
    # 1 can grow through u: v is handed on to 2, and 1 takes u
    assert select_gain(_chain(True), out, cost).tolist() == [2, 1, 0]


# -- corrections of a realisation at depth (hermes.balance.realisation.realise.select_adaptive) ------------------------

def _front_case(nx: int, ny: int, p: int, start: float, factor: float):
    """A METIS partition of an nx×ny grid, the cells of the band start ≤ x < start + 0.2 (x scaled to [0, 1])
    weighted ``factor``, and the minimal balancing flow of that load."""
    m = grid(nx, ny)
    x = m.coords[:, 0]
    x = (x - x.min()) / (x.max() - x.min())
    w = np.where((x >= start) & (x < start + 0.2), factor, 1.0)
    owner, model = _partitioned(m, w, p)
    return m, owner, w, model, minimal_flow(model)


def test_deep_flow_is_realised_without_piling_load_up():
    """64 subdomains of 75 cells, a band of 4-fold weights (imbalance 2.57): the flow passes several times a
    subdomain's load through some ranks over contacts of a few mesh edges. Without the corrections the gain
    selection leaves a rank at 1.44 times its share of 120 (measured with this partition); with them 1.083 —
    the bound 1.1 is the fair load plus 12, three heavy cells of 4: the slack of one rank's correction (its
    heaviest cell, or 3 % of its load) and the residues of two neighbours it could not pass on."""
    m, owner, w, model, flow = _front_case(80, 60, 64, 0.1, 4.0)
    fair = w.sum() / 64
    after, hop = simulate_realisation(m.xadj, m.adjncy, m.coords, w, owner, SubdomainFlow(model.edges, flow))
    corrected = np.bincount(after, weights=w, minlength=64)
    assert corrected.sum() == w.sum() and np.bincount(after, minlength=64).sum() == m.n_cells
    plain, _ = simulate_realisation(m.xadj, m.adjncy, m.coords, w, owner, SubdomainFlow(model.edges, flow),
                                    RealiseOptions("gain", adaptive=False))
    plain_loads = np.bincount(plain, weights=w, minlength=64)
    assert model.imbalance > 2.5
    assert plain_loads.max() / fair > 1.4  # the failure the corrections exist for
    assert corrected.max() / fair < 1.1


def _capped(cap_target: int, cap: int):
    """A selection that peels like ``peel`` but gives ``cap_target`` at most ``cap`` cells (a closed frontier)."""
    def select(dom, outflow, cost):
        out = dict(outflow)
        dest = select_peel(dom, out, cost)
        to_cap = np.flatnonzero(dest == cap_target)
        dest[to_cap[cap:]] = dom.rank
        return dest
    return select


def test_select_adaptive_reroutes_a_closed_target_and_passes_on_surplus():
    from hermes.balance.realisation.realise import select_adaptive

    m = grid(12, 12)
    x, y = m.coords.T
    owner = np.where(x < 4, 0, np.where(y < 6, 1, 2)).astype(np.int64)  # rank 1 (south-east) and 2 (north-east)
    dom = _local(m, owner, 0, weights=np.ones(m.n_cells))
    cost = np.ones((3, 3)) - np.eye(3)
    out = {1: 10.0, 2: 10.0}
    # what arrived equals the plan, every target served: the selection's own answer
    plain = select_peel(dom, out, cost)
    same = select_adaptive(select_peel, dom, out, cost, inflow=5.0, load0=dom.load - 5.0)
    assert np.array_equal(same, plain)
    # target 1 can take 2 cells only: its shortfall (8) goes to target 2, the rank still sends 20
    dest = select_adaptive(_capped(1, 2), dom, out, cost, inflow=0.0, load0=dom.load)
    assert (dest == 1).sum() == 2 and (dest == 2).sum() == 18
    # 12 more arrived than the flow planned (more than the slack, one cell or 3 % of 48): passed on
    dest = select_adaptive(select_peel, dom, out, cost, inflow=0.0, load0=dom.load - 12.0)
    assert (dest == 1).sum() == 16 and (dest == 2).sum() == 16
    # 1 more (within the slack): the plan stands
    dest = select_adaptive(select_peel, dom, out, cost, inflow=0.0, load0=dom.load - 1.0)
    assert np.array_equal(dest, plain)


def test_select_adaptive_keeps_its_answer_when_the_open_targets_were_asked_nothing():
    # target 1 can take 2 of its 10; the only other target (2) was asked 0: no share to reroute to (it divided by 0)
    from hermes.balance.realisation.realise import select_adaptive

    m = grid(12, 12)
    x, y = m.coords.T
    owner = np.where(x < 4, 0, np.where(y < 6, 1, 2)).astype(np.int64)
    dom = _local(m, owner, 0, weights=np.ones(m.n_cells))
    cost = np.ones((3, 3)) - np.eye(3)
    dest = select_adaptive(_capped(1, 2), dom, {1: 10.0, 2: 0.0}, cost, inflow=0.0, load0=dom.load)
    assert (dest == 1).sum() == 2 and (dest == 2).sum() == 0 and (dest == 0).sum() == dom.n - 2
