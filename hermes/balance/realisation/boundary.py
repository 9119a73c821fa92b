"""Boundary refinement after a realisation: FM-style gain moves kept within a load tolerance.

A flow realised cell by cell (:mod:`hermes.balance.realisation.realise`) shifts whole strips of cells between
subdomains; where the flow is large (many processors, a strong adaptation) the new boundaries come out ragged
and the edge cut grows by a third or more (issue 10: 2,171 → 2,938 cut edges on a 160×120 grid over 64 ranks
after one phase). HeRMeS selected its cells with a multilevel scheme inspired by ParMETIS (thesis §10.1); what
keeps subdomains compact in such schemes is their refinement: greedy Fiduccia–Mattheyses / Kernighan–Lin moves
of boundary cells with a positive gain, constrained by the balance. This module is that refinement, run on the
distributed partition after the flow's cells have moved.

One *pass* is two *sweeps*. In the upward sweep a cell may move only to a higher rank, in the downward sweep
only to a lower one (the greedy refinement of ParMETIS: two neighbouring ranks never trade cells in the same
sweep, so a move is not undone by the opposite move it assumed away). In a sweep every rank, on its own cells:

1. offers each neighbour r that may send to it (lower ranks in an upward sweep) a share of its *room*
   ``max(0, (1 + τ)·l̄_j − l_j)``, in proportion to the cut edges they share (:func:`room_shares`), and sends
   it its centroid; one neighbour message each;
2. moves the boundary cells with a positive gain (below) to the best target q of the sweep's direction, in
   decreasing gain (ties by global id), while the weight sent to q stays within q's offer and the weight sent
   in all within the rank's *surplus* ``max(0, l_i − (1 − τ)·l̄_i)``; at least one cell stays home
   (:func:`sweep_moves`);
3. tells its neighbours which of their ghosts moved where (one neighbour message each), then the cells
   migrate; every rank's ghost owners stay exact without the directory.

A rank's load thus stays within ``[(1 − τ)·l̄, (1 + τ)·l̄]`` when it starts there, and never moves further from
that interval otherwise: the refinement never raises the imbalance above ``max(1 + τ, imbalance before)``.
The interval may be lopsided — ``[(1 − τ₋)·l̄, (1 + τ)·l̄]`` with ``below = τ₋`` — since only the most loaded
rank sets a synchronous iteration's time: a rank may shed more than it may take, and the moves that straighten
a boundary keep their freedom while the imbalance they may leave stays small.
The refinement stops at the first check that finds a pass moved nothing; the checks (one allreduce each) come
after passes 1, 2, 4, 8, … (:func:`_check`): at scale most refinements use all their passes, and an idle pass
(two neighbour messages a sweep) costs less than an allreduce over 64 ranks.

The gain of moving cell v from rank p to rank q is

    g(v, q) = Σ_u ( w̃[p, o(u)] − w̃[q, o(u)] )  +  γ · ((x_v − m_pq) · u_pq) / h,

the first term the heterogeneous gain of thesis §10.1 (:mod:`hermes.balance.realisation.selection`) over v's neighbours
u and their owners o(u) — the drop in communication cost, on a uniform network the edge-cut gain
``|e_q(v)| − |e_p(v)|`` — with the link cost ``w̃`` completed off the subdomain graph by the largest known
cost (the selection's 0 there would reward opening a boundary between ranks that share none; see
:func:`complete_costs`). The second term is *geometric*: ``m_pq`` is the midpoint of the centroids of S_p and
S_q, ``u_pq`` the unit vector from S_p's centroid to S_q's, and ``h`` the rank's median distance between
adjacent cells, so the term counts how many cell widths v lies beyond the bisector of the two centroids on
S_q's side. It is the gain of a balanced k-means (a centroidal power diagram, as in geometric repartitioners):
cut gains alone stall on the plateaus of a ragged boundary, where a move changes the cut by 0 or −1 now and
pays only after its neighbours follow; the geometric term pulls boundaries towards the straight bisectors.
``γ = 0`` gives plain greedy FM on the communication cost.

:func:`refine_serial` replays the refinement on a whole mesh (the oracle); :func:`refine_boundary` is the
distributed form over an explicit communicator.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from hermes.data.distributed import LocalDomain
from hermes.data.migrate import MigrationStats, announce_moves, announce_moves_bulk, migrate

__all__ = ["RefineOptions", "RefineStats", "complete_costs", "refine_gain", "cell_spacing", "centroid", "room_shares",
           "sweep_moves", "local_view", "refine_serial", "refine_boundary"]




@dataclass(frozen=True)
class RefineOptions:
    """How a refinement runs (module docstring): the load tolerance τ, the largest number of passes, the weight
    γ of the geometric gain, and τ₋, how far below its fair share a rank's load may fall (None: τ)."""

    tolerance: float = 0.03
    passes: int = 12
    geometric: float = 0.25
    below: float | None = None
    #: the announcements and migrations of each sweep once per MPI process for the processors it hosts (the same
    #: bits; the scenario's ``run.bulk: auto``)
    bulk: bool = False

    @property
    def low(self) -> float:
        """τ₋: ``below``, or the tolerance when it is None."""
        return self.tolerance if self.below is None else self.below


@dataclass
class RefineStats:
    """What a refinement did: the passes run and the cells and weight sent — by this rank
    (:func:`refine_boundary`, whose ``migration`` holds its full migration figures) or by all
    (:func:`refine_serial`)."""

    passes: int = 0
    cells_sent: int = 0
    weight_sent: float = 0.0
    migration: MigrationStats = field(default_factory=MigrationStats)


def complete_costs(cost: NDArray[np.float64]) -> NDArray[np.float64]:
    """The link-cost matrix with its zeros off the diagonal replaced by the largest known cost (1 if none)."""
    cost = np.asarray(cost, dtype=np.float64)
    known = cost[cost > 0]
    top = float(known.max()) if known.size else 1.0
    out = np.where(cost > 0, cost, top)
    np.fill_diagonal(out, 0.0)
    return out


def centroid(dom: LocalDomain) -> NDArray[np.float64]:
    """The (unweighted) centroid of the rank's cells: the centre of its subdomain's shape."""
    return dom.coords.mean(axis=0) if dom.n else np.zeros(dom.coords.shape[1])


def cell_spacing(dom: LocalDomain) -> float:
    """The median distance between the centroids of two adjacent cells of this rank (1 if it has none)."""
    loc = dom.local_index >= 0
    if not loc.any():
        return 1.0
    d = np.linalg.norm(dom.coords[dom.rows[loc]] - dom.coords[dom.local_index[loc]], axis=1)
    h = float(np.median(d))
    return h if h > 0 else 1.0


def refine_gain(dom: LocalDomain, targets: NDArray[np.int64], cost: NDArray[np.float64],
                centroids: NDArray[np.float64] | None = None, geometric: float = 0.0,
                spacing: float = 1.0) -> NDArray[np.float64]:
    """``g(v, q)`` of every local cell v for every q of ``targets`` (module docstring).

    Parameters
    ----------
    dom : LocalDomain
        The rank's cells with current ghost owners.
    targets : int array
        Neighbouring ranks q.
    cost : (p, p) array
        The complete link-cost matrix (:func:`complete_costs`).
    centroids : (1 + len(targets), d) array, optional
        The centroid of this rank (row 0) and of each target; needed when ``geometric > 0``.
    geometric : float
        γ, the weight of the geometric term.
    spacing : float
        h, the distance between adjacent cells (:func:`cell_spacing`).

    Returns
    -------
    ndarray of float64, shape (dom.n, len(targets))
    """
    targets = np.asarray(targets, dtype=np.int64)
    owner = np.where(dom.local_index >= 0, dom.rank, dom.nbr_owner)
    ranks, col = np.unique(owner, return_inverse=True)
    count = np.zeros((dom.n, ranks.size))
    np.add.at(count, (dom.rows, col), 1.0)
    diff = cost[dom.rank, ranks][None, :] - cost[np.ix_(targets, ranks)]  # (t, m)
    g = count @ diff.T
    if geometric > 0 and targets.size:
        c = np.asarray(centroids, dtype=np.float64)
        axis = c[1:] - c[0]  # (t, d)
        norm = np.linalg.norm(axis, axis=1)
        unit = np.divide(axis, norm[:, None], out=np.zeros_like(axis), where=norm[:, None] > 0)
        mid = 0.5 * (c[1:] + c[0])
        beyond = (dom.coords[:, None, :] - mid[None]) * unit[None]
        g = g + geometric * beyond.sum(axis=2) / spacing
    return g


def room_shares(dom: LocalDomain, load: float, fair: float, tolerance: float, upward: bool) -> dict[int, float]:
    """The weight this rank accepts from each neighbour allowed to send to it in the sweep.

    Senders are the neighbours below this rank in an upward sweep, above it in a downward one. The room
    ``max(0, (1 + τ)·l̄ − l)`` is shared in proportion to the number of cut edges with each sender.
    """
    me = dom.rank
    nb, length = dom.neighbour_ranks, dom.boundary_lengths
    senders = nb < me if upward else nb > me
    room = max(0.0, (1.0 + tolerance) * fair - load)
    if not senders.any() or room <= 0:
        return {}
    share = room * length[senders] / length[senders].sum()
    return {int(r): float(s) for r, s in zip(nb[senders], share)}


def sweep_moves(dom: LocalDomain, offers: dict[int, float], surplus: float, cost: NDArray[np.float64], *,
                centroids: dict[int, NDArray[np.float64]] | None = None, geometric: float = 0.0,
                spacing: float = 1.0, min_gain: float = 1e-9) -> NDArray[np.int64]:
    """Destination of every local cell in one sweep (``dom.rank`` = stays).

    Parameters
    ----------
    dom : LocalDomain
        This rank's cells, with current ghost owners.
    offers : dict
        ``offers[q]``: the weight rank q accepts from this rank in the sweep (:func:`room_shares` on q).
    surplus : float
        The most weight this rank may send in all.
    cost : (p, p) array
        The complete link-cost matrix (:func:`complete_costs`).
    centroids : dict, optional
        Centroid of this rank and of every rank in ``offers`` (needed when ``geometric > 0``).
    geometric, spacing : γ and h of :func:`refine_gain`.
    min_gain : float
        Only moves with ``g(v, q) > min_gain`` are made.

    Returns
    -------
    dest : ndarray of int64, one rank per local cell.

    Notes
    -----
    Each boundary cell goes to the target of the largest gain among the offering ranks it touches (ties to the
    lower rank). Cells are taken in decreasing gain (ties by global id) while the weight sent to each target
    stays within its offer, then while the total stays within ``surplus``; at least one cell stays home.
    """
    me = dom.rank
    dest = np.full(dom.n, me, dtype=np.int64)
    targets = np.array(sorted(q for q, a in offers.items() if a > 0), dtype=np.int64)
    if targets.size == 0 or surplus <= 0 or dom.n <= 1:
        return dest
    hit = (dom.local_index < 0) & np.isin(dom.nbr_owner, targets)
    cells = np.unique(dom.rows[hit])  # the boundary cells facing a target
    touch = np.zeros((dom.n, targets.size), dtype=bool)
    touch[dom.rows[hit], np.searchsorted(targets, dom.nbr_owner[hit])] = True
    cen = None
    if geometric > 0:
        cen = np.stack([centroids[me], *(centroids[int(q)] for q in targets)])
    g = refine_gain(dom, targets, cost, cen, geometric, spacing)[cells]
    g = np.where(touch[cells], g, -np.inf)
    best = np.argmax(g, axis=1)
    gbest = g[np.arange(cells.size), best]
    keep = gbest > min_gain
    cells, best, gbest = cells[keep], best[keep], gbest[keep]
    if cells.size == 0:
        return dest
    order = np.lexsort((dom.gid[cells], -gbest))
    cells, best = cells[order], best[order]
    w = dom.weight
    room = np.array([offers[int(q)] for q in targets])
    ok = np.zeros(cells.size, dtype=bool)
    for t in np.unique(best):  # per target, a prefix of its candidates within its offer
        mine = np.flatnonzero(best == t)
        ok[mine] = np.cumsum(w[cells[mine]]) <= room[t]
    cells, best = cells[ok], best[ok]
    k = min(int(np.searchsorted(np.cumsum(w[cells]), surplus, side="right")), dom.n - 1)
    dest[cells[:k]] = targets[best[:k]]
    return dest


def local_view(xadj, adjncy, coords, weights, owner, rank: int, size: int | None = None) -> LocalDomain:
    """The :class:`LocalDomain` rank ``rank`` holds for a whole-mesh owner array, with exact ghost owners."""
    idx = np.flatnonzero(owner == rank)
    deg = np.diff(xadj)
    ent = np.flatnonzero(np.repeat(owner == rank, deg))
    return LocalDomain(rank=rank, size=int(owner.max()) + 1 if size is None else size, gid=idx.astype(np.int64),
                       weight=weights[idx], coords=coords[idx],
                       xadj=np.concatenate(([0], np.cumsum(deg[idx]))).astype(np.int64),
                       adjncy=adjncy[ent], nbr_owner=owner[adjncy[ent]])


def _check(passes: int) -> bool:
    """Whether the ranks check for a pass without moves after ``passes`` passes (1, 2, 4, 8, …)."""
    return passes & (passes - 1) == 0


def _surplus(load: float, fair: float, tolerance: float) -> float:
    return max(0.0, load - (1.0 - tolerance) * fair)


def refine_serial(xadj, adjncy, coords, weights, owner, fair, cost=None,
                  options: RefineOptions = RefineOptions()) -> tuple[NDArray[np.int64], RefineStats]:
    """Serial replay of :func:`refine_boundary` on a whole mesh (the oracle: the same moves).

    Parameters
    ----------
    xadj, adjncy, coords, weights, owner : the mesh and its partition.
    fair : (p,) fair loads ``l̄ = c·Σl``.
    cost : (p, p) link costs (0 = unknown, :func:`complete_costs`); default 1 between every two ranks.
    options : RefineOptions
        τ, the largest number of passes, γ and τ₋ (module docstring).

    Returns
    -------
    (owner, stats) with ``stats.cells_sent`` / ``weight_sent`` summed over the ranks.
    """
    xadj, adjncy = np.asarray(xadj, dtype=np.int64), np.asarray(adjncy, dtype=np.int64)
    w, x = np.asarray(weights, dtype=np.float64), np.asarray(coords, dtype=np.float64)
    owner = np.asarray(owner, dtype=np.int64).copy()
    fair = np.asarray(fair, dtype=np.float64)
    p = fair.size
    tolerance, geometric, low = options.tolerance, options.geometric, options.low
    cost = complete_costs(np.ones((p, p)) if cost is None else cost)
    stats = RefineStats()
    for _ in range(options.passes):
        moved = 0
        for upward in (True, False):
            views = [local_view(xadj, adjncy, x, w, owner, r, p) for r in range(p)]
            cen = {r: centroid(v) for r, v in enumerate(views)}
            accepts = [room_shares(v, v.load, float(fair[r]), tolerance, upward) for r, v in enumerate(views)]
            new = owner.copy()
            for r, v in enumerate(views):
                offers = {q: accepts[q][r] for q in v.neighbour_ranks.tolist() if r in accepts[q]}
                new[v.gid] = sweep_moves(v, offers, _surplus(v.load, float(fair[r]), low), cost,
                                         centroids=cen, geometric=geometric, spacing=cell_spacing(v))
            step = new != owner
            moved += int(step.sum())
            stats.cells_sent += int(step.sum())
            stats.weight_sent += float(w[step].sum())
            owner = new
        stats.passes += 1
        if _check(stats.passes) and moved == 0:
            break
    return owner, stats


def refine_boundary(comm, dom: LocalDomain, fair: NDArray[np.float64], cost: NDArray[np.float64], clock=None,
                    options: RefineOptions = RefineOptions(), *, counters=None) -> tuple[LocalDomain, RefineStats]:
    """The refinement of the module docstring on the distributed partition (collective).

    Parameters
    ----------
    comm : mpi4py communicator
    dom : LocalDomain
        This rank's cells; its ghost owners must be exact (as after
        :func:`hermes.data.distributed.refresh_owners`). They are exact again on return.
    fair : (p,) array
        Fair loads ``l̄ = c·Σl``, the same on every rank.
    cost : (p, p) array
        Link costs (0 = unknown), the same on every rank.
    clock : the run's clock (messages are charged to it), optional
    options : RefineOptions
        τ, the largest number of passes, γ and τ₋ (module docstring).
    counters : hermes.runtime.comm.Counters, optional
        Message counts of the neighbour exchanges.

    Returns
    -------
    (domain, stats) : the refined domain and what this rank sent.

    Notes
    -----
    Per sweep: one neighbour exchange of offers and centroids, one of moved ghosts, one migration
    (:func:`hermes.data.migrate.migrate` without the directory); after passes 1, 2, 4, 8, … one charged
    allreduce of the number of cells moved in the pass (to stop together).
    """
    from hermes.runtime.clock import ClockBank, Links, VirtualClock
    from hermes.runtime.comm import NeighbourComm, allreduce

    me = dom.rank
    fair_me = float(np.asarray(fair, dtype=np.float64)[me])
    tolerance, geometric, low = options.tolerance, options.geometric, options.low
    # the same on every rank: completed once by the processors hosted together (the communicator's shared_value)
    cost = comm.shared_value("completed-costs", [], np.asarray(cost), lambda: complete_costs(cost),
                             freeze=lambda a: setattr(a.flags, "writeable", False))
    clock = clock if clock is not None else VirtualClock(me, comm.Get_size(), Links(), 1.0, 1.0 / comm.Get_size())
    bulk = options.bulk and ClockBank.bankable([clock])
    stats = RefineStats()
    d = dom.coords.shape[1]
    for _ in range(options.passes):
        moved = 0
        for upward in (True, False):
            nb = dom.neighbour_ranks
            nc = NeighbourComm(comm, nb, clock, counters)
            accept = room_shares(dom, dom.load, fair_me, tolerance, upward)
            mine = centroid(dom)
            got = nc.exchange([np.concatenate(([accept.get(int(q), 0.0)], mine)) for q in nb],
                              recv_sizes=np.full(nb.size, 1 + d))
            offers = {int(q): float(g[0]) for q, g in zip(nb, got) if g[0] > 0}
            cen = {me: mine, **{int(q): g[1:] for q, g in zip(nb, got)}}
            dest = sweep_moves(dom, offers, _surplus(dom.load, fair_me, low), cost, centroids=cen,
                               geometric=geometric, spacing=cell_spacing(dom))
            dom = (announce_moves_bulk if bulk else announce_moves)(nc, dom, dest)
            dom, st = migrate(comm, dom, dest, clock, refresh=False, bulk=bulk)
            moved += st.cells_sent
            stats.cells_sent += st.cells_sent
            stats.weight_sent += st.weight_sent
            stats.migration.add(st)
        stats.passes += 1
        if _check(stats.passes) and allreduce(comm, float(moved), clock, counters=counters) == 0:
            break
    return dom, stats
