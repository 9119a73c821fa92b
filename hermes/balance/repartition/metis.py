"""Scratch-remap repartitioning: METIS from scratch, relabelled to keep as many cells home as possible.

The thesis compares its methods with ParMETIS (Tables 10.5, 10.7); ParMETIS is not redistributable
(see ANCHORS.md), so hermes' baseline gathers the current graph on rank 0, partitions it with METIS
(``targets: fair`` — target fractions equal to the measured capacities — or ``targets: equal``, as
the thesis' ParMETIS column did), remaps the part labels to maximise the weight that stays on its
rank, and sends every rank its cells' destinations. The gather is what a centralised scratch method
costs; it is charged to the balancing time under the virtual clock.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from hermes.balance.central import charge_central, metis_units
from hermes.balance.constraints import constraint_columns, constraint_fields
from hermes.balance.interface import BalanceContext, Decision, Params, integer_type
from hermes.balance.registry import register
from hermes.runtime.comm import Counters, allreduce
from hermes.data.partition import metis_partition, remap
from hermes.errors import BalancerError, HermesError

__all__ = ["metis_scratch_remap", "gather_graph", "scatter_destinations", "Targets", "MetisParams"]


def gather_graph(ctx: BalanceContext, counters: Counters, *, constraints: bool = False):
    """Gather every rank's cells on rank 0 as one CSR graph indexed by global id (collective).

    Returns ``(parts, graph, nbytes)``: on rank 0 ``parts`` is the list of per-rank
    ``(gid, degree, adjncy, weight)`` and ``graph`` is ``(xadj, adjncy, weights, old_owner)``;
    both None elsewhere. ``nbytes`` is what this rank sent; ``counters`` gets the gather. With ``constraints``
    the cells' further weights travel too (:mod:`hermes.balance.constraints`) and ``graph`` ends with them,
    ``(n, ncon − 1)``.
    """
    comm, dom = ctx.comm, ctx.dom
    extra = constraint_columns(dom)[:, 1:] if constraints else None
    parts = comm.gather((dom.gid, np.diff(dom.xadj), dom.adjncy, dom.weight, extra), root=0)
    nbytes = dom.gid.nbytes + dom.xadj.nbytes + dom.adjncy.nbytes + dom.weight.nbytes
    nbytes += extra.nbytes if extra is not None else 0
    counters.count_collective("gather")
    counters.messages += 1
    counters.bytes += nbytes
    if comm.Get_rank() != 0:
        return None, None, nbytes
    n = sum(p[0].size for p in parts)
    deg = np.zeros(n, dtype=np.int64)
    w = np.zeros(n)
    old = np.zeros(n, dtype=np.int64)
    cons = np.zeros((n, parts[0][4].shape[1])) if constraints else None
    for r, (g, d, _, wt, ex) in enumerate(parts):
        deg[g], w[g], old[g] = d, wt, r
        if cons is not None:
            cons[g] = ex
    xadj = np.concatenate(([0], np.cumsum(deg))).astype(np.int64)
    adjncy = np.empty(xadj[-1], dtype=np.int64)
    for g, d, a, *_ in parts:  # loop over ranks; rows of each rank scattered vectorised
        offs = np.repeat(xadj[g] - np.concatenate(([0], np.cumsum(d)[:-1])), d)
        adjncy[np.arange(a.size) + offs] = a
    return parts, (xadj, adjncy, w, old) + ((cons,) if constraints else ()), nbytes


def scatter_destinations(ctx: BalanceContext, dest_parts, counters: Counters, nbytes: int) -> NDArray[np.int64]:
    """Send every rank its cells' destinations from rank 0 (collective); charge the virtual clock.

    ``dest_parts`` (rank 0 only) holds per rank an int array, or the same error message for all
    ranks: it is then raised as :class:`BalancerError` on every rank (no rank is left waiting).
    """
    comm, clock = ctx.comm, ctx.clock
    size = comm.Get_size()
    dest = comm.scatter(dest_parts, root=0)
    counters.count_collective("scatter")
    if isinstance(dest, str):
        raise BalancerError(dest)
    if clock.kind == "virtual":
        # gather + scatter through rank 0: every rank's data crosses one link each way
        total = comm.allreduce(float(nbytes + dest.nbytes))
        before = clock.now
        allreduce(comm, 0.0, clock)
        clock.charge(clock.links.cost(0, 1 if size > 1 else 0, total), "comm")
        counters.time += clock.now - before
    return np.asarray(dest, dtype=np.int64)


#: the target fractions of a repartitioner: the capacities (fair) or 1/p each (equal, as the thesis' ParMETIS)
Targets = Literal["fair", "equal"]


class MetisParams(Params):
    """Parameters of ``metis``."""

    targets: Targets = Field("fair", description="part sizes: the measured capacities (fair) or equal")
    ufactor: integer_type(ge=1, le=1000) = Field(30, description="METIS load imbalance (1/1000)")


@register("none", doc="no dynamic load balancing")
def no_balancing(ctx: BalanceContext) -> Decision:
    """The null balancer: no flow."""
    return Decision(flow=np.zeros(ctx.model.q), iterations=0, info={"skipped": True})


@register("metis", params=MetisParams,
          doc="METIS from scratch, remapped to keep cells home (targets fair | equal)")
def metis_scratch_remap(ctx: BalanceContext) -> Decision:
    """Repartition with METIS on rank 0 and remap (collective)."""
    size = ctx.comm.Get_size()
    counters = ctx.nb.counters  # the phase's balancing counters, as for the flow balancers
    several = bool(constraint_fields(ctx.dom.fields))  # mesh.constraint: all: METIS balances every weight
    parts, graph, nbytes = gather_graph(ctx, counters, constraints=several)
    dest_parts = None
    if ctx.comm.Get_rank() == 0:
        xadj, adjncy, w, old, *extra = graph
        targets = ctx.model.capacities if ctx.params["targets"] == "fair" else np.full(size, 1.0 / size)
        # rank 0 partitions: its clock pays the work, the others wait for it in the scatter (docs/COSTS.md)
        charge_central(ctx.comm, ctx.clock, counters, metis_units(xadj.size - 1, adjncy.size, size))
        try:
            new = metis_partition(xadj, adjncy, w, size, targets=targets, seed=ctx.seed,
                                  ufactor=ctx.params["ufactor"], constraints=extra[0] if extra else None)
            new = remap(old, new, w, size, targets=targets)
            dest_parts = [new[g] for g, *_ in parts]
        except HermesError as err:  # agreed through the scatter
            dest_parts = [str(err)] * size
    dest = scatter_destinations(ctx, dest_parts, counters, nbytes)
    return Decision(dest=dest, iterations=1, counters=counters, info={"targets": ctx.params["targets"]})
