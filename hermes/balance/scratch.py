"""Scratch-remap repartitioning: METIS from scratch, relabelled to keep as many cells home as possible.

The thesis compares its methods with ParMETIS (Tables 10.5, 10.7); ParMETIS is not redistributable
(see ANCHORS.md), so hermes' baseline gathers the current graph on rank 0, partitions it with METIS
(``targets: fair`` — target fractions equal to the measured capacities — or ``targets: equal``, as
the thesis' ParMETIS column did), remaps the part labels to maximise the weight that stays on its
rank, and sends every rank its cells' destinations. The gather is what a centralised scratch method
costs; it is charged to the balancing time under the virtual clock.
"""

from __future__ import annotations

import numpy as np

from hermes.balance.registry import BalanceContext, Decision
from hermes.comm import Counters, allreduce
from hermes.data.partition import metis_partition, remap

__all__ = ["metis_scratch_remap"]


def metis_scratch_remap(ctx: BalanceContext) -> Decision:
    """Repartition with METIS on rank 0 and remap (collective)."""
    comm, dom, clock = ctx.comm, ctx.dom, ctx.clock
    size = comm.Get_size()
    counters = Counters()
    parts = comm.gather((dom.gid, np.diff(dom.xadj), dom.adjncy, dom.weight), root=0)
    nbytes = dom.gid.nbytes + dom.xadj.nbytes + dom.adjncy.nbytes + dom.weight.nbytes
    counters.count_collective("gather")
    counters.messages += 1
    counters.bytes += nbytes
    dest_parts = None
    if comm.Get_rank() == 0:
        n = sum(p[0].size for p in parts)
        deg = np.zeros(n, dtype=np.int64)
        w = np.zeros(n)
        old = np.zeros(n, dtype=np.int64)
        for r, (g, d, _, wt) in enumerate(parts):
            deg[g], w[g], old[g] = d, wt, r
        xadj = np.concatenate(([0], np.cumsum(deg))).astype(np.int64)
        adjncy = np.empty(xadj[-1], dtype=np.int64)
        for g, d, a, _ in parts:  # loop over ranks; rows of each rank scattered vectorised
            starts = xadj[g]
            offs = np.repeat(starts - np.concatenate(([0], np.cumsum(d)[:-1])), d)
            adjncy[np.arange(a.size) + offs] = a
        targets = ctx.model.capacities if ctx.params["targets"] == "fair" else np.full(size, 1.0 / size)
        new = metis_partition(xadj, adjncy, w, size, targets=targets, seed=ctx.seed,
                              ufactor=ctx.params["ufactor"])
        new = remap(old, new, w, size, targets=targets)
        dest_parts = [new[g] for g, *_ in parts]
    dest = comm.scatter(dest_parts, root=0)
    counters.count_collective("scatter")
    if clock.kind == "virtual":
        # gather + scatter through rank 0: every rank's data crosses one link each way
        total = comm.allreduce(float(nbytes + dest.nbytes))
        before = clock.now
        allreduce(comm, 0.0, clock)
        clock.charge(clock.links.cost(0, 1 if size > 1 else 0, total), "comm")
        counters.time += clock.now - before
    return Decision(dest=np.asarray(dest, dtype=np.int64), iterations=1, counters=counters,
                    info={"targets": ctx.params["targets"]})
