"""Which cells realise a flow: the gain function of thesis §10.1, boundary peeling, a wavefront.

A *selection strategy* is a function ``select(dom, outflow, cost) -> dest`` run by one rank: given
its :class:`~hermes.data.distributed.LocalDomain` and the weight ``outflow[q]`` it must send to each
neighbouring rank q, it returns the destination rank of every local cell (``dom.rank`` = stays).
Every strategy here is deterministic, keeps at least one cell home, offers a cell to q only where
moving it brings q closer to its flow (``½ w(v) ≤`` what q still needs), and so serves every target
within half the heaviest cell's weight of its flow wherever the boundary offers enough cells. They
differ in *which* cells go:

``gain`` (:func:`select_gain`, the default)
    The heterogeneous gain function of thesis §10.1. For a cell v in subdomain S_p and a target
    subdomain S_q,

        g(v, q) = Σ_i |e_i(v)| (w̃_pi − w̃_qi),

    where ``e_i(v)`` are v's edges to cells in S_i and ``w̃`` is the p×p link-cost matrix (``w̃_ij``
    the cost of the link {i, j} when i and j are adjacent in the subdomain graph, 0 otherwise; 0 on
    the diagonal). In the homogeneous case it reduces to ``|e_q(v)| − |e_p(v)|`` (plus terms for
    third subdomains), the classical edge-cut gain. The thesis defines ``w̃`` with the model's
    weights ``w_k``; hermes uses link *costs* here (relative per-byte time, ``bandwidth_max /
    bandwidth``), because the gain measures communication cost while the model's weights are
    conductances. On a uniform network both readings coincide. The boundary is peeled in rounds:
    each round offers every home cell that touches a target still short of its flow (counting cells
    already chosen for q as part of S_q) to the target it fits with the largest gain (ties to the
    lower rank); each target takes its offers by decreasing gain (ties by global id) while the
    moved weight gets closer to its flow. Cells chosen for q expose new candidates for the next round.

    *Hand-on*, against starvation: where S_q shares only a short boundary with the rank, the cells
    chosen for other targets can close q's frontier — no home cell touching S_q or the cells chosen
    for q fits q any more — and plain peeling would leave q short for good. After each round's
    takes, every target still short whose frontier is closed (in increasing rank, each on the state
    the previous ones left) therefore takes cells already chosen for another target r that touch
    its side and fit it, by decreasing g(v, q) (ties by global id) while it gets closer to its
    flow; r's outstanding flow grows by their weight and r makes it up from its own frontier in the
    next rounds (q's frontier continues through r's cells: an augmenting path of length two). A
    hand-on stands only if every donor that then still needs weight keeps a fitting home cell on
    its frontier, and a cell is handed on at most once, so the rounds end. Where no frontier
    closes, the result is that of plain peeling.

    *Behind heavy cells*: when a round moves nothing while a target still misses at least half its
    flow and 3 % of the rank's load (:data:`BEHIND_HEAVY_MIN`, the tolerance METIS and Scotch are given)
    — every home cell on its side is too heavy for what it still needs (weights up to 128 on 25
    cells a rank, as in the thesis' experiment) — the first such target takes the home cells nearest
    its side that fit, by BFS layer through the home cells, then decreasing gain, then global id
    (what layered peeling would take), and the rounds go on from there. Such cells do not touch the
    target: a smaller residue is left as it is rather than fragment the subdomain (on the CFD meshes of
    docs/DATA.md the step without these bounds raised the edge cut by up to 28 % for no gain in balance).
``peel`` (:func:`select_peel`)
    Layered boundary peeling: cells go layer by layer from the boundary shared with S_q inward, in
    increasing BFS distance (:func:`layer_distance`) from S_q through the rank's own cells, ties by
    global id. The cost matrix is not used.
``wavefront`` (:func:`select_wavefront`)
    A straight front perpendicular to the direction from the rank towards S_q sweeps inward from the
    shared boundary; cells go in the order the front reaches them (:func:`front_key`), ties by
    global id. The cost matrix is not used.

:data:`SELECTIONS` maps the scenario names to the functions; reports and the serial replay of a
realisation are in :mod:`hermes.balance.realisation.realise`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.data.distributed import LocalDomain, csr_ranges
from hermes.errors import BalancerError

__all__ = ["BEHIND_HEAVY_MIN", "gain", "select_gain", "layer_distance", "select_peel", "front_key", "select_wavefront",
           "SELECTIONS", "get_selection", "Selection"]

Selection = Callable[[LocalDomain, "dict[int, float]", NDArray[np.float64]], NDArray[np.int64]]


def gain(dom: LocalDomain, owner_of_edge: NDArray[np.int64], cells: NDArray[np.int64], q: int,
         cost: NDArray[np.float64]) -> NDArray[np.float64]:
    """g(v, q) for the local cells ``cells`` given the (current) owner of every adjacency entry."""
    p = dom.rank
    term = cost[p, owner_of_edge] - cost[q, owner_of_edge]
    per_cell = np.bincount(dom.rows, weights=term, minlength=dom.n)
    return per_cell[cells]


def select_gain(dom: LocalDomain, outflow: dict[int, float], cost: NDArray[np.float64],
                *, max_rounds: int = 10_000) -> NDArray[np.int64]:
    """Destination rank of every local cell so that about ``outflow[q]`` weight goes to each q.

    Parameters
    ----------
    dom : LocalDomain
    outflow : dict
        ``outflow[q]``: the weight to send to neighbouring rank q.
    cost : (p, p) array
        The link-cost matrix ``w̃`` of the gain function (see the module docstring).
    max_rounds : int
        Upper bound on the number of rounds.

    Returns
    -------
    dest : array of int64, one rank per local cell (``dom.rank`` = stays).

    Notes
    -----
    The rounds, the hand-on and the step behind heavy cells are those of the module docstring. The
    peeling is incremental (:class:`_EdgeCounts`): a round updates the counts and gains of the
    neighbours of the cells it moved only and scans only the frontier. Gains are summed rank by rank,
    so cells with equal counts tie exactly (:func:`gain` sums edge by edge).
    """
    me, n = dom.rank, dom.n
    dest = np.full(n, me, dtype=np.int64)
    targets = np.array(sorted(outflow), dtype=np.int64)
    if targets.size == 0 or n == 0:
        return dest
    remaining = np.array([float(outflow[int(q)]) for q in targets], dtype=np.float64)
    flows = remaining.copy()
    counts = _EdgeCounts(dom, targets, np.asarray(cost, dtype=np.float64))
    w, gid = dom.weight, dom.gid
    handed = np.zeros(n, dtype=bool)
    front = np.flatnonzero(counts.touches(np.arange(n)).any(axis=1))  # home cells touching a target
    n_home, least = n, 0.5 * float(w.min())
    for _ in range(max_rounds):
        active = (remaining > 0) & (remaining >= least)  # not active: no cell could fit any more
        if not active.any():
            break
        valid = counts.touches(front) & active & (0.5 * w[front, None] <= remaining)
        offered = valid.any(axis=1)
        val = np.where(valid, counts.gain[front], -np.inf)[offered]
        cells, to = front[offered], np.argmax(val, axis=1)
        key = -val[np.arange(cells.size), to]
        moved = []
        for t in np.flatnonzero(active):
            mine = to == t
            left = n_home - sum(c.size for c in moved)
            if not mine.any() or left <= 1:
                continue
            cand = cells[mine][np.lexsort((gid[cells[mine]], key[mine]))]
            k = min(_fits(w[cand], remaining[t]), left - 1)
            dest[cand[:k]] = targets[t]
            remaining[t] -= float(w[cand[:k]].sum())
            moved.append(cand[:k])
        moved = np.concatenate(moved) if moved else np.zeros(0, dtype=np.int64)
        n_home -= moved.size
        if moved.size:
            changed = counts.move(moved, np.full(moved.size, me), dest[moved])
            front = _union(n, front[dest[front] == me], changed[dest[changed] == me])
        for t in range(targets.size):  # targets still short whose frontier is closed: hand on
            if remaining[t] > 0 and remaining[t] >= least and not (
                    (counts.count[front, counts.tcol[t]] > 0) & (0.5 * w[front] <= remaining[t])).any():
                take, front = _hand_on(counts, t, remaining, dest, handed, front, n_home > 1)
                moved = np.concatenate((moved, take))
        if moved.size == 0:  # closed by cells too heavy for what is left: look behind them
            take = _behind_heavy(counts, remaining, flows, dest, w, gid, n_home, least)
            if take.size == 0:
                break
            n_home -= take.size
            changed = counts.move(take, np.full(take.size, me), dest[take])
            front = _union(n, front[dest[front] == me], changed[dest[changed] == me])
    return dest


def _behind_heavy(counts: _EdgeCounts, remaining: NDArray[np.float64], flows: NDArray[np.float64],
                  dest: NDArray[np.int64], w: NDArray[np.float64], gid: NDArray[np.int64], n_home: int,
                  least: float) -> NDArray[np.int64]:
    """The first target (in increasing rank) still missing at least half its flow and
    :data:`BEHIND_HEAVY_MIN` of the rank's load, whose frontier holds
    only cells too heavy for it takes the home cells nearest its side that fit it, by BFS layer through the home cells, then
    decreasing gain, then global id (a layered peel behind the heavy cells); returns the cells taken.
    ``dest`` and ``remaining`` are updated in place; at least one cell stays home."""
    dom, me = counts.dom, counts.dom.rank
    home, load = dest == me, float(w.sum())
    for t in range(counts.targets.size):
        material = remaining[t] >= max(least, 0.5 * flows[t], BEHIND_HEAVY_MIN * load)
        if not (remaining[t] > 0 and material) or n_home <= 1:
            continue
        src = np.flatnonzero(home & (counts.count[:, counts.tcol[t]] > 0))
        if src.size == 0:
            continue
        g = _local_graph(dom)
        keep = sp.diags_array(home.astype(np.float64))
        from scipy.sparse.csgraph import dijkstra  # on first use: csgraph imports scipy.linalg (0.15 s of CPU)

        dist = dijkstra(keep @ g @ keep, directed=True, unweighted=True, indices=src, min_only=True)
        cand = np.flatnonzero(home & np.isfinite(dist) & (0.5 * w <= remaining[t]))
        if cand.size == 0:
            continue
        cand = cand[np.lexsort((gid[cand], -counts.gain[cand, t], dist[cand]))]
        k = min(_fits(w[cand], remaining[t]), n_home - 1)
        if k > 0:
            dest[cand[:k]] = counts.targets[t]
            remaining[t] -= float(w[cand[:k]].sum())
            return cand[:k]
    return np.zeros(0, dtype=np.int64)


def _hand_on(counts: _EdgeCounts, t: int, remaining: NDArray[np.float64], dest: NDArray[np.int64],
             handed: NDArray[np.bool_], front: NDArray[np.int64],
             can_take: bool) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Hand cells chosen for other targets on to target t; returns (cells handed on, new frontier).

    Candidates: cells chosen for another target r, never handed on before, with an edge to t's
    side, that fit t; t takes them in decreasing ``g(v, t)`` (ties by global id) while it gets
    closer to its flow. A source r must keep a way to make up its loss: if after the hand-on r
    still needs weight (``remaining[r] > 0``) but no home cell on its frontier fits it (or
    ``can_take`` is false: a single cell is left home), the hand-on is undone and retried without
    r's cells. ``dest``, ``handed``, ``remaining`` and the counts are updated in place; the cells' weights
    and global ids are those of ``counts.dom``.
    """
    targets, me = counts.targets, counts.dom.rank
    w, gid = counts.dom.weight, counts.dom.gid
    near = (counts.count[:, counts.tcol[t]] > 0) & ~handed & (dest != me) & (0.5 * w <= remaining[t])
    donors = np.ones(targets.size, dtype=bool)
    donors[t] = False
    while donors.any():
        cand = np.flatnonzero(near & _among(dest, targets, donors))
        cand = cand[np.lexsort((gid[cand], -counts.gain[cand, t]))]
        take = cand[:_fits(w[cand], remaining[t])]
        if take.size == 0:
            break
        src, before = np.searchsorted(targets, dest[take]), remaining.copy()
        np.add.at(remaining, src, w[take])
        remaining[t] -= float(w[take].sum())
        dest[take] = targets[t]
        changed = counts.move(take, targets[src], dest[take])
        grown = _union(dest.size, front, changed[dest[changed] == me])
        fits = counts.touches(grown) & (0.5 * w[grown, None] <= remaining)
        can_grow = (fits.any(axis=0) & can_take) | (remaining <= 0)
        closed = np.unique(src[~can_grow[src]])
        if closed.size == 0:
            handed[take] = True
            return take, grown
        dest[take] = targets[src]  # undo, and retry without the sources it would close
        counts.move(take, np.full(take.size, targets[t]), targets[src])
        remaining[:] = before
        donors[closed] = False
    return np.zeros(0, dtype=np.int64), front


def _union(n: int, *sets: NDArray[np.int64]) -> NDArray[np.int64]:
    """The sorted union of sets of cells among ``n`` (``np.union1d``'s or ``np.unique``'s answer, through a mask)."""
    mask = np.zeros(n, dtype=bool)
    for s in sets:
        mask[s] = True
    return np.flatnonzero(mask)


def _among(dest: NDArray[np.int64], targets: NDArray[np.int64], chosen: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Whether each ``dest`` is one of the ``targets`` (sorted) that ``chosen`` marks (``np.isin(dest,
    targets[chosen])``, through a binary search)."""
    pos = np.minimum(np.searchsorted(targets, dest), targets.size - 1)
    return (targets[pos] == dest) & chosen[pos]


def _fits(w: NDArray[np.float64], need: float) -> int:
    """How many of the cells of weights ``w`` (in order) to take so the moved weight gets closer to ``need``."""
    take = (np.cumsum(w) - 0.5 * w) <= need
    return take.size if take.all() else int(np.argmin(take))


class _EdgeCounts:
    """``|e_i(v)|`` of every local cell v to every rank i that matters, and the gains ``g(v, t)``.

    Columns are the ranks ``ranks`` (sorted: home, ghost owners, targets); ``gain[v, t]`` is
    ``Σ_i count[v, i] (w̃_pi − w̃_qi)`` for target ``q = targets[t]``.
    """

    def __init__(self, dom: LocalDomain, targets: NDArray[np.int64], cost: NDArray[np.float64]):
        self.dom, self.targets = dom, targets
        owner = np.where(dom.local_index >= 0, dom.rank, dom.nbr_owner)
        self.ranks = np.unique(np.concatenate((owner, targets, [dom.rank])))
        m = self.ranks.size
        self.tcol = np.searchsorted(self.ranks, targets)
        self.diff = cost[dom.rank, self.ranks][None, :] - cost[np.ix_(targets, self.ranks)]  # (t, m)
        self._diff_t = self.diff.T[None, :, :]  # (1, m, t)
        col = np.searchsorted(self.ranks, owner)
        self.count = np.bincount(dom.rows * m + col, minlength=dom.n * m).astype(np.int32).reshape(dom.n, m)
        self.gain = self._gain(np.arange(dom.n))
        # each cell's neighbours among the local cells, in adjacency order (what a move updates)
        loc = dom.local_index >= 0
        self.lnb = dom.local_index[loc]
        self.ldeg = np.bincount(dom.rows[loc], minlength=dom.n)
        self.lptr = np.concatenate(([0], np.cumsum(self.ldeg)))

    def _gain(self, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        # Σ_i count[v, i] · diff[t, i] summed over the ranks i in a fixed order from 0.0, whatever the subset of
        # cells: a cumulative sum (numpy accumulates left to right, never pairwise) of the products
        terms = np.zeros((cells.size, self.ranks.size + 1, self.tcol.size))
        np.multiply(self.count[cells][:, :, None], self._diff_t, out=terms[:, 1:, :])
        return np.cumsum(terms, axis=1)[:, -1, :]

    def touches(self, cells: NDArray[np.int64]) -> NDArray[np.bool_]:
        """(len(cells), t) mask: the cell has an edge to target t's side (S_q or cells chosen for q)."""
        return self.count[cells[:, None], self.tcol] > 0

    def move(self, cells: NDArray[np.int64], old: NDArray[np.int64], new: NDArray[np.int64]) -> NDArray[np.int64]:
        """Record that ``cells`` went from ranks ``old`` to ``new``; returns the cells whose counts changed."""
        m = self.ranks.size
        ldeg = self.ldeg[cells]
        nb = self.lnb[csr_ranges(self.lptr[cells], ldeg)]
        src = np.repeat(np.searchsorted(self.ranks, old), ldeg)
        dst = np.repeat(np.searchsorted(self.ranks, new), ldeg)
        flat = self.count.reshape(-1)
        np.add.at(flat, np.concatenate((nb * m + src, nb * m + dst)),
                  np.concatenate((np.full(nb.size, -1, np.int32), np.ones(nb.size, np.int32))))
        changed = _union(self.count.shape[0], nb)
        self.gain[changed] = self._gain(changed)
        return changed


def _take_offers(dom: LocalDomain, offer: NDArray[np.int64], order: NDArray[np.float64], active: NDArray[np.bool_],
                 targets: NDArray[np.int64], remaining: NDArray[np.float64], dest: NDArray[np.int64],
                 n_home: int) -> int:
    """One round of takes of the ordered strategies; returns the number of cells moved.

    Each active target t takes the cells offered to it (``offer == t``) in increasing
    (``order[t]``, global id) order while the moved weight gets closer to ``remaining[t]``, leaving
    at least one of the ``n_home`` home cells home. ``dest`` and ``remaining`` are updated in place.
    """
    w = dom.weight
    moved = 0
    for t in np.flatnonzero(active):
        cand = np.flatnonzero(offer == t)
        left = n_home - moved
        if cand.size == 0 or left <= 1:
            continue
        cand = cand[np.lexsort((dom.gid[cand], order[t, cand]))]
        k = min(_fits(w[cand], remaining[t]), left - 1)
        if k > 0:
            dest[cand[:k]] = targets[t]
            remaining[t] -= float(w[cand[:k]].sum())
            moved += k
    return moved


# -- shared machinery of the ordered strategies ------------------------------------------------------

def _local_graph(dom: LocalDomain) -> sp.csr_array:
    """The rank's own cells as a (directed, symmetric) CSR graph on local indices."""
    li = dom.local_index
    loc = li >= 0
    return sp.csr_array((np.ones(int(loc.sum())), (dom.rows[loc], li[loc])), shape=(dom.n, dom.n))


def layer_distance(dom: LocalDomain, targets) -> NDArray[np.float64]:
    """BFS layer of every local cell counted from each target subdomain, through the rank's cells.

    Parameters
    ----------
    dom : LocalDomain
    targets : sequence of int
        Neighbouring ranks q.

    Returns
    -------
    ndarray of float64, shape (len(targets), dom.n)
        ``1`` for a cell with a neighbour in S_q (the shared boundary), ``d + 1`` for a cell whose
        nearest such cell is d edges away inside the rank's own subdomain, ``inf`` where no path
        through the rank's cells leads to S_q.

    Notes
    -----
    One multi-source shortest path per target (unit weights, :func:`scipy.sparse.csgraph.dijkstra`
    from a virtual source linked to the boundary cells, so the paths never leave the subdomain).
    """
    targets = [int(q) for q in targets]
    n, t = dom.n, len(targets)
    if t == 0:
        return np.zeros((0, n))
    g = _local_graph(dom).tocoo()
    cut = dom.local_index < 0
    rows, cols = [g.row], [g.col]
    for k, q in enumerate(targets):  # virtual source n + k -> boundary cells of q (one direction only)
        b = np.unique(dom.rows[cut & (dom.nbr_owner == q)])
        rows.append(np.full(b.size, n + k, dtype=np.int64))
        cols.append(b)
    r, c = np.concatenate(rows), np.concatenate(cols)
    big = sp.csr_array((np.ones(r.size), (r, c)), shape=(n + t, n + t))
    from scipy.sparse.csgraph import dijkstra  # on first use (above)

    dist = dijkstra(big, directed=True, unweighted=True, indices=np.arange(n, n + t))
    return np.asarray(dist, dtype=np.float64).reshape(t, n + t)[:, :n]


def front_key(dom: LocalDomain, targets, reach: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """When the wavefront of each target reaches each local cell (smaller = earlier).

    Parameters
    ----------
    dom : LocalDomain
    targets : sequence of int
    reach : (len(targets), dom.n) array, optional
        :func:`layer_distance` of the same targets (computed if omitted); cells it marks ``inf``
        are never reached.

    Returns
    -------
    ndarray of float64, shape (len(targets), dom.n)
        ``τ_q(v) = (c_B − x_v) · d̂``, the distance of cell v behind the straight front through
        ``c_B`` perpendicular to ``d̂``, where ``c_B`` is the weight centroid of the rank's cells
        on the boundary with S_q, ``c_p`` the weight centroid of all the rank's cells and
        ``d̂ = (c_B − c_p) / ‖c_B − c_p‖`` the direction from the rank towards S_q. The front
        starts at the shared boundary (the weighted mean of τ over the boundary cells is 0) and
        moves against ``d̂``; all targets' fronts move at the same unit speed.

    Notes
    -----
    A rank knows only its own cells' coordinates, so the direction between the two subdomains'
    weight centroids is approximated by the direction from its own centroid to the centroid of the
    shared boundary (the other subdomain lies beyond that boundary). Where ``‖c_B − c_p‖`` is below
    ``10⁻⁹`` times the subdomain's extent (a boundary all around the rank), the front is a circle
    growing from ``c_B``: ``τ_q(v) = ‖x_v − c_B‖``.
    """
    targets = [int(q) for q in targets]
    if reach is None:
        reach = layer_distance(dom, targets)
    x, w = dom.coords, dom.weight
    c_p = _centroid(x, w)
    extent = float(np.ptp(x, axis=0).max()) if dom.n else 0.0
    keys = np.full((len(targets), dom.n), np.inf)
    for k in range(len(targets)):
        b = reach[k] == 1
        if not b.any():
            continue
        c_b = _centroid(x[b], w[b])
        d = c_b - c_p
        norm = float(np.linalg.norm(d))
        tau = (c_b - x) @ (d / norm) if norm > 1e-9 * max(extent, 1e-300) else np.linalg.norm(x - c_b, axis=1)
        keys[k] = np.where(np.isfinite(reach[k]), tau, np.inf)
    return keys


def _centroid(x: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Weight centroid of the points ``x`` (plain centroid when all weights are 0)."""
    w = w if w.sum() > 0 else np.ones(w.size)
    return (w[:, None] * x).sum(axis=0) / w.sum()


def _serve_in_order(dom: LocalDomain, outflow: dict[int, float],
                    keys: Callable[[LocalDomain, list[int]], NDArray[np.float64]],
                    max_rounds: int) -> NDArray[np.int64]:
    """Serve each target t from its cells in increasing ``keys(dom, targets)[t]`` (ties by global id).

    Every round, each home cell with a finite key that fits an active target (``½ w ≤`` what the
    target still needs) is offered to the fitting target with the smallest key — ties to the target
    needing more, then to the lower rank — and each target takes its offered cells in (key, global
    id) order while the moved weight gets closer to its flow. Cells a target does not take are
    offered elsewhere in the next round. At least one cell stays home.
    """
    me = dom.rank
    dest = np.full(dom.n, me, dtype=np.int64)
    targets = np.array(sorted(outflow), dtype=np.int64)
    if targets.size == 0 or dom.n == 0:
        return dest
    remaining = np.array([float(outflow[int(q)]) for q in targets], dtype=np.float64)
    key = keys(dom, targets.tolist())
    w = dom.weight
    n_home = dom.n
    for _ in range(max_rounds):
        active = remaining > 0
        if not active.any() or n_home <= 1:
            break
        home = dest == me
        ok = active[:, None] & home[None, :] & np.isfinite(key) & (0.5 * w[None, :] <= remaining[:, None])
        offered = ok.any(axis=0)
        if not offered.any():
            break
        pref = np.lexsort((targets, -remaining))  # preference among ties: needs more, then lower rank
        k_pref = np.where(ok, key, np.inf)[pref]
        best = np.where(offered, pref[np.argmin(k_pref, axis=0)], -1)
        moved = _take_offers(dom, best, key, active, targets, remaining, dest, n_home)
        if moved == 0:
            break
        n_home -= moved
    return dest


def select_peel(dom: LocalDomain, outflow: dict[int, float], cost: NDArray[np.float64] | None = None,
                *, max_rounds: int = 10_000) -> NDArray[np.int64]:
    """Layered boundary peeling: cells leave layer by layer from the boundary with each target.

    Parameters and result as :func:`select_gain` (``outflow[q]``: the weight to send to rank q;
    ``dest``: one rank per local cell); ``cost`` is not used.

    Notes
    -----
    The key of cell v for target q is its BFS layer :func:`layer_distance` (1 = touches S_q),
    computed once on the subdomain as it is when the selection starts. Target q takes its cells in
    increasing (layer, global id) — the whole first layer before any of the second, and so on —
    while the moved weight gets closer to its flow; a cell equally deep for several targets goes to
    the one needing more (see :func:`_serve_in_order`). Cells that cannot reach S_q through the
    rank's own cells are never sent to q.
    """
    return _serve_in_order(dom, outflow, layer_distance, max_rounds)


def select_wavefront(dom: LocalDomain, outflow: dict[int, float], cost: NDArray[np.float64] | None = None,
                     *, max_rounds: int = 10_000) -> NDArray[np.int64]:
    """Wavefront selection: a straight front sweeps from each target's boundary into the subdomain.

    Parameters and result as :func:`select_gain` (``outflow[q]``: the weight to send to rank q;
    ``dest``: one rank per local cell); ``cost`` is not used.

    Notes
    -----
    The key of cell v for target q is the front arrival ``τ_q(v) = (c_B − x_v)·d̂`` of
    :func:`front_key`: the front is the line (plane) through the weight centroid ``c_B`` of the
    boundary cells shared with S_q, perpendicular to the direction ``d̂`` from the rank's weight
    centroid to ``c_B``, and it moves inward at unit speed. Target q takes cells in increasing
    (τ, global id) while the moved weight gets closer to its flow, so the new boundary is a
    straight cut rather than a copy of the old one; a cell reached by several fronts at the same
    time goes to the target needing more. Only cells connected to S_q through the rank's own cells
    are eligible.
    """
    return _serve_in_order(dom, outflow, front_key, max_rounds)


#: the smallest residue, as a fraction of the rank's load, for which the gain selection takes cells
#: behind cells too heavy for it (module docstring)
BEHIND_HEAVY_MIN = 0.03

SELECTIONS: dict[str, Selection] = {"gain": select_gain, "peel": select_peel, "wavefront": select_wavefront}


def get_selection(name: str) -> Selection:
    """The selection strategy called ``name`` in :data:`SELECTIONS`.

    Raises
    ------
    BalancerError
        If ``name`` is not a known strategy (the message lists the valid names).
    """
    try:
        return SELECTIONS[name]
    except (KeyError, TypeError):
        raise BalancerError(f"unknown selection {name!r}; valid: {', '.join(sorted(SELECTIONS))}") from None
