"""Realising a balancing flow: which cells move where, in what order, and how closely the moves match the flow.

:func:`realise_flow` turns a flow on the subdomain graph into cell moves (collective): the flow's
orientation is acyclic (thesis Th. 21), so ranks act level by level in topological order
(:func:`hermes.balance.flow.topological_order`) — a rank sends only once everything it must receive has
arrived, and may pass on cells it has just received. Each sending rank chooses its cells with a
selection strategy of :mod:`hermes.balance.realisation.selection` (the gain function of thesis §10.1 by default) and
:func:`hermes.data.migrate.migrate` moves them.

:func:`realisation_report` compares a flow with the transfer a selection actually made (and its edge
cut); :func:`simulate_realisation` replays :func:`realise_flow` serially on a whole mesh, so the
strategies can be compared without MPI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.balance.flow import topological_order
from hermes.balance.model import Model
from hermes.balance.realisation.selection import BEHIND_HEAVY_MIN, Selection, get_selection
from hermes.runtime.clock import ClockBank
from hermes.runtime.comm import NeighbourComm, allreduce
from hermes.data.distributed import LocalDomain, refresh_owners
from hermes.data.migrate import (MigrationStats, announce_group, announce_moves, migrate, migrate_group, settle,
                                  unchanged)
from hermes.errors import GraphError
from hermes.metrics import boundary_cells, edge_cut, imbalance, migration_volume

__all__ = ["SubdomainFlow", "RealiseOptions", "realise_flow", "select_adaptive", "realisation_report",
           "simulate_realisation"]


@dataclass(frozen=True)
class SubdomainFlow:
    """A flow on the subdomain graph: ``values[k] > 0`` moves load from ``edges[k, 0]`` to ``edges[k, 1]``
    (``values[k] < 0`` the other way)."""

    edges: NDArray[np.int64]
    values: NDArray[np.float64]


@dataclass(frozen=True)
class RealiseOptions:
    """How a flow is realised.

    Attributes
    ----------
    select : Selection or str
        The selection strategy, or its name in :data:`hermes.balance.realisation.selection.SELECTIONS`
        (default ``"gain"``: :func:`hermes.balance.realisation.selection.select_gain`).
    exact : bool
        Keep every rank's ghost owners exact from level to level (:func:`realise_flow`; the serial replay
        :func:`simulate_realisation` always does).
    adaptive : bool
        Each rank's selection is corrected by :func:`select_adaptive`; False: the literal realisation of
        thesis §10.1.
    bulk : bool
        With ``exact``, the announcements of each level run once per MPI process for the processors it hosts
        (:func:`hermes.data.migrate.announce_moves_bulk`: the same bits) when the clock allows it (virtual, no
        extra load); the scenario's ``run.bulk: auto``.
    """

    select: Selection | str = "gain"
    exact: bool = False
    adaptive: bool = True
    bulk: bool = False

    @property
    def selection(self) -> Selection:
        """The strategy itself (``select`` looked up if it is a name)."""
        return get_selection(self.select) if isinstance(self.select, str) else self.select


def realise_flow(comm, dom: LocalDomain, flow: SubdomainFlow, cost: NDArray[np.float64], clock=None, *,
                 levels: list[NDArray[np.int64]],
                 options: RealiseOptions = RealiseOptions()) -> tuple[LocalDomain, MigrationStats, NDArray[np.float64]]:
    """Move cells so that the load crossing each subdomain edge approximates ``flow`` (collective).

    Parameters
    ----------
    flow : SubdomainFlow
        The global flow on the subdomain graph (same on every rank).
    cost : (p, p) array
        The link cost matrix w̃ of the gain function (thesis §10.1), 0 off the subdomain graph.
    levels : topological levels of the flow DAG (from :func:`hermes.balance.flow.topological_order`).
    options : RealiseOptions
        ``select``: the selection strategy (default :func:`hermes.balance.realisation.selection.select_gain`).
        ``exact``: keep every rank's ghost owners exact from level to level: before each level's migration the
        ranks tell their neighbours which of their ghosts move where (:func:`hermes.data.migrate.announce_moves`,
        one neighbour message each, charged), so every selection sees the subdomains as they are — the moves
        of :func:`simulate_realisation` — and no directory refresh is needed at the end. Default: ghosts
        are patched only with what a rank sent and received, and refreshed once at the end (a selection may
        see a ghost that moved between two other ranks at an earlier level where it was).
        ``adaptive``: each rank's selection is corrected by :func:`select_adaptive` (passes on what arrived
        beyond the flow's inflow, reroutes what a target it cannot reach any more was to get). False: the
        literal realisation of thesis §10.1, each rank sending each edge's flow as computed.

    Returns
    -------
    (domain, stats, realised) where ``realised[k]`` is the weight actually moved along edge k.
    """
    exact = options.exact
    edges, flow = flow.edges, flow.values
    if options.bulk and clock is not None and ClockBank.bankable([clock]):
        # the levels once per MPI process for the processors it hosts: the same selections, moves and clocks
        dom, stats, realised = comm.bulk("realise_flow", (comm, dom, clock),
                                         partial(_realise_kernel, edges, flow, cost, levels, options))
    else:
        dom, stats, realised = _realise_levels(comm, dom, edges, flow, cost, clock, levels, options)
    if not exact:
        dom = refresh_owners(comm, dom)
        allreduce(comm, 0.0, clock)  # the directory's all-to-alls, charged as one synchronising collective
    return dom, stats, realised


def _realise_levels(comm, dom: LocalDomain, edges, flow, cost, clock, levels, options: RealiseOptions):
    """:func:`realise_flow`'s levels on one processor (its own loop: ``run.bulk: off``, a wall clock, an extra
    load): the domain after the last level (ghosts not refreshed), the stats and the realised flow."""
    exact = options.exact
    rank = comm.Get_rank()
    stats = MigrationStats()
    realised = np.zeros(len(edges))
    load0 = dom.load  # before any level: what arrives beyond the flow's inflow is passed on (select_adaptive)
    # a level none of whose ranks sends is skipped by all, as their agreement on it would
    sends = _senders(comm.Get_size(), edges, flow)
    for level in levels:
        level = np.asarray(level, dtype=np.int64)
        if not sends[level].any():
            continue
        dest = np.full(dom.n, rank, dtype=np.int64)
        if np.any(level == rank):
            picked = _select(rank, dom, edges, flow, cost, options, load0)
            if picked is not None:
                dest = picked
                _tally(realised, realised, rank, edges, _moved_to(rank, dom, dest))
        if exact:
            nc = NeighbourComm(comm, dom.neighbour_ranks, _clock(comm, clock))
            dom = announce_moves(nc, dom, dest)
        dom, st = migrate(comm, dom, dest, clock, refresh=False)
        stats.add(st)
    # every rank knows its own part of `realised`; combine (each edge has exactly one sender)
    realised = comm.allreduce(realised)
    return dom, stats, realised


def _realise_kernel(edges, flow, cost, levels, options: RealiseOptions, group, parts: list) -> list:
    """:func:`realise_flow`'s levels run once per MPI process for the processors ``group.lo`` to ``group.hi`` it
    hosts (``parts``: each one's ``(comm, dom, clock)``; a bulk kernel, ``run.bulk: auto``).

    Per level only the processors that select or receive do any work: the senders select as their own call would,
    their packets to co-hosted processors are handed over, those to other processes travel as one message per
    pair of processes, and each processor that sent or received charges its clock and settles its domain as
    :func:`hermes.data.migrate.migrate` does (the same calls: :func:`~hermes.data.migrate.packs`,
    :func:`~hermes.data.migrate.receive`, :func:`~hermes.data.migrate.settle`). A processor outside a level is
    charged nothing there and keeps its domain, as its own call would (an exchange with nothing to send or receive
    charges 0.0). With exact ghosts the level's announcements run as :func:`~hermes.data.migrate.announce_moves_bulk`
    does. ``realised`` is summed as the processors' own allreduce sums it: each edge's two endpoints, each its own
    sequence over the levels."""
    exact = options.exact
    lo, hi = group.lo, group.hi
    comms = [c for c, _, _ in parts]
    doms = [d for _, d, _ in parts]
    clocks = [c for _, _, c in parts]
    n_local = len(parts)
    stats = [MigrationStats() for _ in parts]
    load0 = [d.load for d in doms]
    known = [d if unchanged(d) else None for d in doms]  # domains a migration without moves leaves as they are
    pos, neg = np.zeros(len(edges)), np.zeros(len(edges))
    sends = _senders(group.size, edges, flow)
    others = [q for q in range(group.processes) if q != group.pid]
    rounds = 0
    for level in levels:
        level = np.asarray(level, dtype=np.int64)
        if not sends[level].any():
            continue
        rounds += 1
        dests: dict[int, NDArray[np.int64]] = {}
        for r in np.sort(level[(level >= lo) & (level < hi)]).tolist():
            i = r - lo
            dest = _select(r, doms[i], edges, flow, cost, options, load0[i])
            if dest is not None:
                dests[i] = dest
                _tally(pos, neg, r, edges, _moved_to(r, doms[i], dest))
        if exact:
            nbs = [NeighbourComm(comms[i], doms[i].neighbour_ranks, clocks[i]) for i in range(n_local)]
            doms = announce_group(group, [(nbs[i], doms[i], dests.get(i)) for i in range(n_local)],
                                    settled=lambda i, d: known[i] is d)
        st = migrate_group(group, doms, clocks, dests, stats)
        for i in range(n_local):  # outside the level: as migrate leaves them (rebuilt once if not yet settled)
            if i in st or known[i] is doms[i]:
                continue
            doms[i] = settle(doms[i], np.full(doms[i].n, lo + i, dtype=np.int64), [])
            known[i] = doms[i] if unchanged(doms[i]) else None
    for s in stats:
        s.rounds += rounds
    mine = pos + neg  # each edge: its sender's sum and its receiver's, the endpoints' own accumulations
    if group.processes > 1:
        rows = group.allgather(mine)
        realised = np.cumsum(np.vstack((np.zeros((1, mine.size)), rows)), axis=0)[-1]
    else:
        realised = mine
    realised.flags.writeable = False
    return [(doms[i], stats[i], realised) for i in range(n_local)]


def _senders(p: int, edges, flow) -> NDArray[np.bool_]:
    """The ranks with something to send in the global flow (the same on every rank)."""
    sends = np.zeros(p, dtype=bool)
    if len(edges):
        f = np.asarray(flow, dtype=np.float64)
        sends[edges[:, 0][f > 0]] = True
        sends[edges[:, 1][f < 0]] = True
    return sends


def _select(r: int, dom: LocalDomain, edges, flow, cost, options: RealiseOptions, load0: float):
    """Rank r's destinations at its level (None when the flow sends nothing from it)."""
    out = _outflow(r, edges, flow)
    if not out:
        return None
    select = options.selection
    return select_adaptive(select, dom, out, cost, inflow=_inflow(r, edges, flow), load0=load0) \
        if options.adaptive else select(dom, out, cost)


def _moved_to(r: int, dom: LocalDomain, dest) -> dict[int, float]:
    """The weight rank r sends to each other rank under ``dest``."""
    return {int(q): float(dom.weight[dest == q].sum()) for q in np.unique(dest) if q != r}


def _tally(out_sums, in_sums, r: int, edges, moved_to: dict[int, float]) -> None:
    """Add what rank r moved to each edge it ends: along its out-edges to ``out_sums``, against its in-edges from
    ``in_sums`` (each rank's own running sums, in level order: the realised flow of :func:`realise_flow`)."""
    if not moved_to:
        return
    for k in np.flatnonzero(edges[:, 0] == r).tolist():
        j = int(edges[k, 1])
        if j in moved_to:
            out_sums[k] += moved_to[j]
    for k in np.flatnonzero(edges[:, 1] == r).tolist():
        j = int(edges[k, 0])
        if j != r and j in moved_to:
            in_sums[k] -= moved_to[j]


def _clock(comm, clock):
    """The run's clock, or a private virtual one (unit speed, default links) when the caller has none."""
    if clock is not None:
        return clock
    from hermes.runtime.clock import Links, VirtualClock

    return VirtualClock(comm.Get_rank(), comm.Get_size(), Links(), 1.0, 1.0 / comm.Get_size())


def _inflow(rank: int, edges, flow) -> float:
    """The weight the flow brings to ``rank`` (the sum over its incoming edges)."""
    f = np.asarray(flow, dtype=np.float64)
    return float(f[(edges[:, 1] == rank) & (f > 0)].sum() - f[(edges[:, 0] == rank) & (f < 0)].sum())


def select_adaptive(select: Selection, dom: LocalDomain, outflow: dict[int, float], cost: NDArray[np.float64], *,
                    inflow: float, load0: float) -> NDArray[np.int64]:
    """One rank's selection at its level, corrected so that the rank ends where the flow means it to.

    The flow sends ``outflow[q]`` to each q after the rank received ``inflow``; the rank should end at
    ``load0 + inflow − Σ outflow``. Two corrections keep a failed realisation upstream from piling load up:

    * *Passing on what arrived.* If what arrived (the rank's load now minus ``load0``) differs from ``inflow``
      by more than the rank's slack (:func:`_slack`: its heaviest cell, and :data:`BEHIND_HEAVY_MIN` of its
      load), the outflows are scaled together so that their sum is the load now minus the rank's planned end
      (none if that is negative): an upstream rank that could not deliver, or delivered more, is made up here.
    * *Rerouting.* If, after the selection, targets are short by more than the slack in total (their
      frontier closed: a corner contact, cut off by the cells chosen for other targets), their shortfall goes
      to the other targets in proportion to their outflows and the selection runs once more on that plan,
      the short targets asking only what they got (up to :data:`REROUTES` times, while it sends more): the
      rank still sends its total downstream, where the targets pass it on in turn.

    Where neither applies (every realisation within its slack) the result is ``select(dom, outflow, cost)``.
    On 256 subdomains of a 320×240 grid the realisation of a front's flow ended at imbalance 2.57 without
    these corrections: a rank holding 5.4 times its share after its inflow could send only 16 of the 580
    its flow asked over a corner contact of 4 mesh edges.
    """
    load = float(dom.weight.sum())
    slack = _slack(dom, load)
    planned_out = float(sum(outflow.values()))
    arrived = load - load0
    if abs(arrived - inflow) > slack and planned_out > 0:
        scale = max(planned_out + arrived - inflow, 0.0) / planned_out
        outflow = {q: f * scale for q, f in outflow.items()}
    dest = select(dom, outflow, cost)
    want = sum(outflow.values())
    for _ in range(REROUTES):
        got = {q: float(dom.weight[dest == q].sum()) for q in outflow}
        missing = want - sum(got.values())
        open_ = [q for q in outflow if outflow[q] - got[q] <= 0.5 * slack]
        if missing <= slack or not open_ or len(open_) == len(outflow):
            break
        base = sum(outflow[q] for q in open_)
        if base <= 0.0:
            break  # the open targets were asked nothing (e.g. after an inflow shortfall scaled every outflow to 0)
        outflow = {q: (outflow[q] + missing * outflow[q] / base if q in open_ else got[q]) for q in outflow}
        again = select(dom, {q: f for q, f in outflow.items() if f > 0}, cost)
        if float(dom.weight[again != dom.rank].sum()) <= want - missing:
            break  # no closer: keep the first answer
        dest = again
    return dest


#: how many times :func:`select_adaptive` reroutes the shortfall of closed targets
REROUTES = 3


def _slack(dom: LocalDomain, load: float) -> float:
    """What a rank's realisation may miss by without correction: its heaviest cell, or
    :data:`hermes.balance.realisation.selection.BEHIND_HEAVY_MIN` of its load if that is more."""
    return max(float(dom.weight.max(initial=0.0)), BEHIND_HEAVY_MIN * load)


def _outflow(rank: int, edges, flow) -> dict[int, float]:
    """What ``rank`` sends along each of its edges, in the edges' order (the neighbour: the weight)."""
    edges, flow = np.asarray(edges), np.asarray(flow, dtype=np.float64)
    if not len(edges):
        return {}
    first = (edges[:, 0] == rank) & (flow > 0)
    second = (edges[:, 1] == rank) & (flow < 0)
    idx = np.flatnonzero(first | second)
    return {int(edges[k, 1]) if first[k] else int(edges[k, 0]): (f if first[k] else -f)
            for k, f in zip(idx.tolist(), flow[idx].tolist())}


def realisation_report(xadj, adjncy, owner_before, owner_after, weights, flow: SubdomainFlow, *,
                       realised=None, capacities=None) -> dict[str, Any]:
    """How closely a change of ownership realises a flow, and what it does to the partition.

    Parameters
    ----------
    xadj, adjncy : CSR adjacency of the whole mesh.
    owner_before, owner_after : int arrays, one rank per cell.
    weights : float array, one weight per cell.
    flow : SubdomainFlow
        The computed flow: ``edges`` (q, 2) and ``values`` (q,).
    realised : (q,) array, optional
        The weight moved along each edge hop by hop, as :func:`realise_flow`
        and :func:`simulate_realisation` count it. Default: the net transfer below.
    capacities : (p,) array, optional
        For the imbalances (default: equal).

    Returns
    -------
    dict with
        ``net_transfer`` (q,) weight of the cells owned by ``edges[k,0]`` before and by
        ``edges[k,1]`` after, minus the reverse — equal to the hop-wise transfer unless a cell was
        passed on through an intermediate rank; ``realised`` (q,) the ``realised`` argument or
        ``net_transfer``; ``deviation`` (q,) ``|realised − flow|``;
        ``relative_deviation`` ``Σ|realised − flow| / Σ|flow|`` (0 for a zero flow);
        ``max_deviation``; ``off_graph_weight``, weight whose old and new owners are not adjacent
        in the subdomain graph (cells passed on through an intermediate rank);
        ``edge_cut_before/after``, ``boundary_cells_before/after``, ``migrated_cells``,
        ``migrated_weight``, ``imbalance_before/after``.

    Raises
    ------
    GraphError
        On arrays of inconsistent lengths or ranks out of range.
    """
    xadj, adjncy = np.asarray(xadj, dtype=np.int64), np.asarray(adjncy, dtype=np.int64)
    before, after = np.asarray(owner_before, dtype=np.int64), np.asarray(owner_after, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    e = np.asarray(flow.edges, dtype=np.int64).reshape(-1, 2)
    f = np.asarray(flow.values, dtype=np.float64).reshape(-1)
    n = xadj.size - 1
    if before.shape != (n,) or after.shape != (n,) or w.shape != (n,):
        raise GraphError(f"realisation report: need {n} owners (before and after) and weights")
    if f.shape != (len(e),):
        raise GraphError(f"realisation report: {f.size} flow values for {len(e)} edges")
    p = int(max(before.max(initial=0), after.max(initial=0), e.max(initial=-1)) + 1)
    if n and min(before.min(), after.min()) < 0 or (len(e) and e.min() < 0):
        raise GraphError("realisation report: negative rank")
    moved = before != after
    transfer = np.bincount(before[moved] * p + after[moved], weights=w[moved], minlength=p * p).reshape(p, p)
    net = transfer[e[:, 0], e[:, 1]] - transfer[e[:, 1], e[:, 0]]
    realised = net if realised is None else np.asarray(realised, dtype=np.float64).reshape(-1)
    if realised.shape != f.shape:
        raise GraphError(f"realisation report: {realised.size} realised values for {len(e)} edges")
    on_graph = np.zeros((p, p), dtype=bool)
    on_graph[e[:, 0], e[:, 1]] = on_graph[e[:, 1], e[:, 0]] = True
    dev = np.abs(realised - f)
    total = float(np.abs(f).sum())
    cells, weight = migration_volume(before, after, w)
    caps = np.ones(p) if capacities is None else np.asarray(capacities, dtype=np.float64)
    return {
        "edges": e, "flow": f, "net_transfer": net, "realised": realised, "deviation": dev,
        "relative_deviation": float(dev.sum() / total) if total > 0 else 0.0,
        "max_deviation": float(dev.max(initial=0.0)),
        "off_graph_weight": float(transfer[~on_graph].sum()),
        "edge_cut_before": edge_cut(xadj, adjncy, before), "edge_cut_after": edge_cut(xadj, adjncy, after),
        "boundary_cells_before": boundary_cells(xadj, adjncy, before),
        "boundary_cells_after": boundary_cells(xadj, adjncy, after),
        "migrated_cells": cells, "migrated_weight": weight,
        "imbalance_before": imbalance(np.bincount(before, weights=w, minlength=p), caps),
        "imbalance_after": imbalance(np.bincount(after, weights=w, minlength=p), caps),
    }


def _local_view(xadj, adjncy, coords, weights, owner, rank: int) -> LocalDomain:
    """The LocalDomain rank ``rank`` holds for a whole-mesh owner array, with exact ghost owners."""
    idx = np.flatnonzero(owner == rank)
    deg = np.diff(xadj)
    ent = np.flatnonzero(np.repeat(owner == rank, deg))
    return LocalDomain(rank=rank, size=int(owner.max()) + 1, gid=idx.astype(np.int64), weight=weights[idx],
                       coords=coords[idx], xadj=np.concatenate(([0], np.cumsum(deg[idx]))).astype(np.int64),
                       adjncy=adjncy[ent], nbr_owner=owner[adjncy[ent]])


def simulate_realisation(xadj, adjncy, coords, weights, owner, flow: SubdomainFlow,
                         options: RealiseOptions = RealiseOptions(),
                         cost: NDArray[np.float64] | None = None, *,
                         observe: Callable[[int, NDArray[np.int64], NDArray[np.int64]], None] | None = None,
                         ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Serial replay of :func:`realise_flow` on a whole mesh.

    Ranks act level by level in the topological order of the flow
    (:func:`hermes.balance.flow.topological_order`); at each level every rank with an outflow runs
    ``select`` on its current cells and the moves are applied together. Ghost owners are exact
    here: the moves are those of :func:`realise_flow` with ``exact=True`` (tests/mpi/selection_script.py
    checks it); without it a rank may see stale owners of ghosts that moved between two other ranks at an
    earlier level, and its selection may differ.

    Parameters
    ----------
    xadj, adjncy, coords, weights, owner : the whole mesh and its partition (owner per cell).
    flow : SubdomainFlow
        The flow on the subdomain graph.
    options : RealiseOptions
        ``select`` (a strategy or its name in :data:`SELECTIONS`) and ``adaptive`` as :func:`realise_flow`'s;
        ``exact`` is not read (ghost owners are always exact here).
    cost : (p, p) link-cost matrix for the gain; default 1 on the flow's edges.
    observe : callable, optional
        ``observe(k, before, after)`` after level k of the topological order: every cell's owner before and after it
        (read-only views; benchmarks/realisation_depth.py measures what each level hands over).

    Returns
    -------
    (owner, realised) : the owner of every cell afterwards, and the weight moved along each edge
    (counted hop by hop, positive from ``edges[k, 0]`` to ``edges[k, 1]``).
    """
    select, adaptive = options.selection, options.adaptive
    xadj, adjncy = np.asarray(xadj, dtype=np.int64), np.asarray(adjncy, dtype=np.int64)
    coords, weights = np.asarray(coords, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    owner = np.asarray(owner, dtype=np.int64).copy()
    e = np.asarray(flow.edges, dtype=np.int64).reshape(-1, 2)
    f = np.asarray(flow.values, dtype=np.float64).reshape(-1)
    p = int(max(owner.max(), e.max(initial=-1)) + 1)
    if cost is None:
        cost = np.zeros((p, p))
        cost[e[:, 0], e[:, 1]] = cost[e[:, 1], e[:, 0]] = 1.0
    # topological_order reads only p, q and the edges, so the caller's edge order is kept
    loads = np.bincount(owner, weights=weights, minlength=p)
    model = Model(p=p, edges=e, loads=loads, capacities=np.full(p, 1.0 / p), weights=np.ones(len(e)))
    realised = np.zeros(len(e))
    for k, level in enumerate(topological_order(model, f, 1e-12 * max(float(loads.sum()), 1.0))):
        new = owner.copy()
        for r in level.tolist():
            out = _outflow(r, e, f)
            if out:
                dom = _local_view(xadj, adjncy, coords, weights, owner, r)
                new[dom.gid] = select_adaptive(select, dom, out, cost, inflow=_inflow(r, e, f),
                                               load0=float(loads[r])) if adaptive else select(dom, out, cost)
        moved = new != owner
        transfer = np.bincount(owner[moved] * p + new[moved], weights=weights[moved], minlength=p * p).reshape(p, p)
        realised += transfer[e[:, 0], e[:, 1]] - transfer[e[:, 1], e[:, 0]]
        if observe is not None:
            observe(k, owner, new)
        owner = new
    return owner, realised
