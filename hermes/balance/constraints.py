"""Several vertex weights at once (``mesh.constraint: all``): the cells' further weights, their imbalances, and
the repair that balances them after any balancer (ParMETIS' multi-constraint problem for methods that balance one
load).

A multi-weight graph (Chaco/METIS ``ncon > 1``) keeps its first weight as the cells' load (``LocalDomain.weight``:
what the application computes, what adaptation multiplies) and every further weight ``k = 2..ncon`` as a per-cell
field ``weight_k`` that migrates with its cell and is never changed by the run. The imbalance of weight ``k`` is
the load's formula on its per-rank sums: ``max_r W_r / (c_r Σ W)`` (1.0 is fair; a weight that sums to zero is
1.0).

The repair (:func:`repair_constraints`), run after a phase's balancing when the mesh has further weights, is
hermes' documented approach for the balancers that see one load (the flow methods, Grapevine, Scotch): every weight
above ``1 + tolerance`` gets the minimal balancing flow of its per-rank sums on the phase's subdomain graph
(:func:`hermes.balance.flow.minimal_flow`, the same on every rank), and each rank realises the flows on its
edges by selection:

1. for every further weight whose flow leaves this rank on an edge, the cells carrying that weight (those with
   most neighbours on the other side first, then by global id) up to the flow, each cell taken while the sum
   before it plus half its weight stays within the flow; the edges in decreasing flow, what an edge could not
   take (a fraction of a cell) added to the next edge's flow;
2. the two ranks of each edge tell each other what their step 1 sends (one exchange of ``ncon`` numbers per edge),
   and the first weight's remainder (its own flow, zero if it is balanced, minus what step 1 moves net) is sent
   by the side it leaves, in cells without further weight first (then the lightest in them), nearest the other
   side first (edges in decreasing remainder, fractions carried as in step 1);
3. one migration of the selected cells.

A rank sends at most its own surplus of a weight in step 1 (a flow through it waits for the next pass, when what it
received is its surplus). Passes repeat until every weight is within ``1 + tolerance`` or no rank's excess over its
share exceeds the weight's heaviest cell (rounding to whole cells can do no better), a pass selects nothing, or
:data:`PASSES` passes ran; a rank always keeps at least one cell. Charged: the per-rank sums (one allgather), the
exchange, the migration (``migrate``); the flows are solved on every rank from the gathered sums (replicated
arithmetic of the order of a balancer's, uncharged like the model's derived values). Cells and every weight are
conserved (the migration moves cells with their fields).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from hermes.data.distributed import LocalDomain
from hermes.data.migrate import MigrationStats, migrate
from hermes.runtime.comm import Counters, allgather, exchange_arrays

__all__ = ["FIELD", "constraint_fields", "constraint_columns", "constraint_sums", "constraint_imbalances",
           "repair_constraints", "RepairResult", "TOLERANCE", "PASSES"]

#: the per-cell field of weight k (k = 2..ncon)
FIELD = "weight_{}"
#: a weight is balanced when its imbalance is at most 1 + this (the repair's stopping rule)
TOLERANCE = 0.02
#: at most this many repair passes per phase
PASSES = 6


def constraint_fields(fields) -> list[str]:
    """The further weights' field names among ``fields`` (a dict or names), in weight order."""
    names = [k for k in fields if k.startswith("weight_") and k[7:].isdigit()]
    return sorted(names, key=lambda k: int(k[7:]))


def constraint_columns(dom: LocalDomain) -> NDArray[np.float64]:
    """The cells' weights as columns (n, ncon): the load, then every further weight."""
    cols = [dom.weight] + [np.asarray(dom.fields[k], dtype=np.float64) for k in constraint_fields(dom.fields)]
    return np.column_stack(cols) if dom.n else np.zeros((0, len(cols)))


def constraint_sums(dom: LocalDomain) -> NDArray[np.float64]:
    """This rank's sum of every weight (ncon,)."""
    return constraint_columns(dom).sum(axis=0)


def constraint_imbalances(sums: NDArray[np.float64], capacities: NDArray[np.float64]) -> list[float]:
    """``max_r W_r / (c_r Σ W)`` per weight from the per-rank sums (p, ncon); 1.0 for a weight summing to 0."""
    from hermes.metrics import imbalance

    return [imbalance(col, capacities) for col in np.asarray(sums, dtype=np.float64).T]


@dataclass
class RepairResult:
    """What :func:`repair_constraints` did on this rank: its migrations' stats and, the same on every rank, the
    imbalance of every weight before and after and the passes that moved cells."""

    stats: MigrationStats = field(default_factory=MigrationStats)
    before: list[float] = field(default_factory=list)
    after: list[float] = field(default_factory=list)
    passes: int = 0
    cells: int = 0

    def as_dict(self) -> dict:
        return {"passes": self.passes, "cells": self.cells, "imbalance_before": self.before,
                "imbalance_after": self.after}


def _gain(dom: LocalDomain, j: int) -> NDArray[np.float64]:
    """Per cell: its neighbours on rank ``j`` minus its neighbours here."""
    own = dom.nbr_owner
    score = (own == j).astype(np.float64) - (own == dom.rank)
    return np.bincount(dom.rows, weights=score, minlength=dom.n) if dom.n else np.zeros(0)


def _take(order: NDArray[np.int64], w: NDArray[np.float64], amount: float, room: int) -> NDArray[np.int64]:
    """The prefix of ``order`` whose cells are taken: each while the sum before it plus half its weight is within
    ``amount``, at most ``room`` cells."""
    if amount <= 0 or order.size == 0 or room <= 0:
        return order[:0]
    ww = w[order]
    before = np.cumsum(ww) - ww
    k = int(np.searchsorted(before + 0.5 * ww > amount, True))
    return order[:min(k, room)]


def _edges_of(model, rank: int) -> list[tuple[int, int, float]]:
    """(edge index, neighbour, sign) of this rank's edges: sign +1 when a positive flow leaves this rank."""
    e = model.edges
    out = []
    for k in np.flatnonzero((e[:, 0] == rank) | (e[:, 1] == rank)).tolist():
        a, b = int(e[k, 0]), int(e[k, 1])
        out.append((k, b, 1.0) if a == rank else (k, a, -1.0))
    return out


def repair_constraints(comm, dom: LocalDomain, model, clock=None, counters: Counters | None = None, *,
                       tolerance: float = TOLERANCE, passes: int = PASSES,
                       bulk: bool = False) -> tuple[LocalDomain, RepairResult]:
    """Balance every weight of the cells (module docstring; collective). ``model`` gives the subdomain graph and
    the capacities (its loads are not read). Returns the new domain and what was done."""
    from hermes.balance.flow import minimal_flow

    res = RepairResult()
    rank = comm.Get_rank()
    caps = np.asarray(model.capacities, dtype=np.float64) / float(np.sum(model.capacities))
    for it in range(passes + 1):
        cols = constraint_columns(dom)
        ncon = cols.shape[1]
        gathered = allgather(comm, np.concatenate((cols.sum(axis=0), cols.max(axis=0, initial=0.0))), clock,
                             counters=counters)
        sums, heaviest = gathered[:, :ncon], gathered[:, ncon:].max(axis=0)
        imb = constraint_imbalances(sums, caps)
        if it == 0:
            res.before = imb
        res.after = imb
        excess = (sums - caps[:, None] * sums.sum(axis=0)).max(axis=0)
        todo = [c for c in range(ncon) if imb[c] > 1.0 + tolerance and excess[c] > heaviest[c]]
        if it == passes or not todo or model.q == 0:
            break
        flows = np.zeros((ncon, model.q))
        for c in todo:
            flows[c] = minimal_flow(model.with_loads(sums[:, c]))
        surplus = sums[rank] - caps[rank] * sums.sum(axis=0)
        free = np.ones(dom.n, dtype=bool)
        dest = np.full(dom.n, rank, dtype=np.int64)
        room = dom.n - 1
        mine = _edges_of(model, rank)
        gains = {j: _gain(dom, j) for _, j, _ in mine}
        sent = {j: np.zeros(ncon) for _, j, _ in mine}
        for c in range(1, ncon):  # step 1: the further weights, the largest outflow first
            out = sorted(((sign * flows[c, k], j) for k, j, sign in mine if sign * flows[c, k] > 0),
                         key=lambda t: (-t[0], t[1]))
            carry, budget = 0.0, float(surplus[c])  # only a surplus leaves: transit waits for the next pass
            for amount, j in out:
                cand = np.flatnonzero(free & (cols[:, c] > 0))
                order = cand[np.lexsort((dom.gid[cand], -gains[j][cand]))]
                take = _take(order, cols[:, c], min(amount + carry, budget), room)
                moved = float(cols[take, c].sum())
                carry, budget = amount + carry - moved, budget - moved
                free[take], dest[take] = False, j
                room -= take.size
                sent[j] += cols[take].sum(axis=0)
        got = exchange_arrays(comm, {j: s for j, s in sent.items()}, clock, counters=counters)
        others = cols[:, 1:].sum(axis=1)
        rests = [(sign * flows[0, k] - (sent[j][0] - got.get(j, np.zeros(ncon))[0]), j) for k, j, sign in mine]
        carry = 0.0
        for rest, j in sorted((t for t in rests if t[0] > 0), key=lambda t: (-t[0], t[1])):  # step 2: the load
            cand = np.flatnonzero(free)
            order = cand[np.lexsort((dom.gid[cand], -gains[j][cand], others[cand]))]
            take = _take(order, cols[:, 0], rest + carry, room)
            carry = rest + carry - float(cols[take, 0].sum())
            free[take], dest[take] = False, j
            room -= take.size
        moving = int(np.count_nonzero(dest != rank))
        total = int(round(float(allgather(comm, float(moving), clock, counters=counters).sum())))
        if total == 0:
            break
        dom, st = migrate(comm, dom, dest, clock, bulk=bulk)
        res.stats.add(st)
        res.passes += 1
        res.cells += total
    return dom, res
