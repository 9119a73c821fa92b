"""Under mpiexec: the distributed boundary refinement makes exactly the moves of its serial oracle.

A grid partitioned with METIS is made ragged by swapping a checkerboard of boundary cells between ranks
(seeded); :func:`hermes.balance.realisation.boundary.refine_boundary` must then give the owner array of
:func:`~hermes.balance.realisation.boundary.refine_serial`, keep every cell, weight and field, leave every ghost owner
exact without the directory, lower the edge cut and keep every load within the tolerance of its fair share.
Prints "OK" on rank 0 when every check passes; raises otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.balance.realisation.boundary import RefineOptions, refine_boundary, refine_serial
from hermes.runtime.clock import Links, VirtualClock
from hermes.data.distributed import gather_to_root, scatter_domain
from hermes.data.generators import grid
from hermes.data.partition import metis_partition
from hermes.metrics import edge_cut

comm = plain(MPI.COMM_WORLD)
rank, p = comm.Get_rank(), comm.Get_size()
seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
mesh = grid(24, 20)
rng = np.random.default_rng(seed)
weights = rng.choice([1.0, 2.0], size=mesh.n_cells)
mesh = mesh.with_weights(weights)
owner = None
if rank == 0:
    owner = metis_partition(mesh.xadj, mesh.adjncy, weights, p, seed=seed)
    # ragged boundaries: every boundary cell goes to a random neighbouring rank with probability 1/2
    rows = np.repeat(np.arange(mesh.n_cells), np.diff(mesh.xadj))
    other = owner[mesh.adjncy] != owner[rows]
    cand, first = np.unique(rows[other], return_index=True)
    target = owner[mesh.adjncy[other]][first]  # the owner of each candidate's first foreign neighbour
    flip = rng.random(cand.size) < 0.5
    owner[cand[flip]] = target[flip]
owner = comm.bcast(owner, root=0)
fields = {"u": np.arange(mesh.n_cells) * 0.5} if rank == 0 else None
dom = scatter_domain(comm, mesh if rank == 0 else None, owner if rank == 0 else None, fields)
fair = np.full(p, weights.sum() / p)
loads0 = np.bincount(owner, weights=weights, minlength=p)
cost = np.ones((p, p)) - np.eye(p)
tol = 0.05

for geometric, below in ((0.0, None), (1.0, None), (1.0, 0.15)):
    options = RefineOptions(tolerance=tol, passes=4, geometric=geometric, below=below)
    ref, _ = refine_serial(mesh.xadj, mesh.adjncy, mesh.coords, weights, owner, fair, cost, options)
    clock = VirtualClock(rank, p, Links(), 1e6, 1.0 / p)
    new, stats = refine_boundary(comm, dom, fair, cost, clock, options)
    assert comm.allreduce(new.n) == mesh.n_cells, "cells lost or duplicated"
    assert np.array_equal(new.weight, weights[new.gid]) and np.array_equal(new.fields["u"], new.gid * 0.5)
    g = gather_to_root(comm, new, mesh.n_cells)
    truth = comm.bcast(g[0] if rank == 0 else None, root=0)
    bad = np.flatnonzero(new.nbr_owner != truth[new.adjncy])
    assert bad.size == 0, f"stale ghost owner rank {rank}: cells {new.gid[new.rows[bad]]} nbrs {new.adjncy[bad]} have {new.nbr_owner[bad]} truth {truth[new.adjncy[bad]]} before {owner[new.adjncy[bad]]} {owner[new.gid[new.rows[bad]]]}"
    assert clock.elapsed() > 0, "the refinement's messages are charged"
    if rank == 0:
        assert np.array_equal(truth, ref), f"geometric {geometric} below {below}: {int((truth != ref).sum())} cells differ"
        loads = np.bincount(truth, weights=weights, minlength=p)
        hi = np.maximum((1 + tol) * fair, loads0)
        lo = np.minimum((1 - (tol if below is None else below)) * fair, loads0)
        assert np.all(loads <= hi + 1e-9) and np.all(loads >= lo - 1e-9), (loads, fair)
        before, after = edge_cut(mesh.xadj, mesh.adjncy, owner), edge_cut(mesh.xadj, mesh.adjncy, truth)
        if geometric == 0.0:
            assert after < before, (before, after)
        print(f"geometric {geometric} below {below}: cut {before} -> {after}, {stats.passes} passes")
if rank == 0:
    print("OK")
