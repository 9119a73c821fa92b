"""Under mpiexec: random migrations conserve cells, weights, fields and adjacency; ghost owners are exact.

Prints "OK" on rank 0 when every check passes; raises (aborting the job) otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.runtime.clock import Links, VirtualClock
from hermes.data.distributed import gather_to_root, scatter_domain
from hermes.data.generators import grid
from hermes.data.migrate import migrate
from hermes.data.partition import metis_partition

comm = plain(MPI.COMM_WORLD)
rank, p = comm.Get_rank(), comm.Get_size()
seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
mesh = grid(17, 13)
rng = np.random.default_rng(seed)
weights = rng.uniform(0.5, 3.0, mesh.n_cells)
mesh = mesh.with_weights(weights)
owner = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, p, seed=seed) if rank == 0 else None
fields = {"u": np.arange(mesh.n_cells) * 1.5, "tag": np.arange(mesh.n_cells) % 7} if rank == 0 else None
dom = scatter_domain(comm, mesh if rank == 0 else None, owner, fields)
clock = VirtualClock(rank, p, Links(), 1e6, 1.0 / p)
local_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(p)[rank])

for step in range(4):
    dest = local_rng.integers(0, p, dom.n)
    dest[0] = rank  # nobody is left empty
    dom, st = migrate(comm, dom, dest, clock)
    sent = comm.allreduce(st.cells_sent)
    recv = comm.allreduce(st.cells_received)
    assert sent == recv, (sent, recv)
    assert np.all(np.diff(dom.gid) > 0)
    g = gather_to_root(comm, dom, mesh.n_cells, extra={"u": dom.fields["u"], "tag": dom.fields["tag"]})
    # ghost owners agree with the true owners
    truth = comm.bcast(g[0] if rank == 0 else None, root=0)
    assert np.array_equal(dom.nbr_owner, truth[dom.adjncy]), "stale ghost owner"
    # each cell carries its own adjacency, weight and coordinates
    for i in range(dom.n):
        gi = dom.gid[i]
        assert np.array_equal(dom.adjncy[dom.xadj[i]:dom.xadj[i + 1]], mesh.adjncy[mesh.xadj[gi]:mesh.xadj[gi + 1]])
    assert np.array_equal(dom.weight, weights[dom.gid]) and np.array_equal(dom.coords, mesh.coords[dom.gid])
    if rank == 0:
        own, w, ex = g
        assert own.min() >= 0, "a cell got lost"
        assert np.array_equal(w, weights) and np.array_equal(ex["u"], np.arange(mesh.n_cells) * 1.5)
        assert np.array_equal(ex["tag"], np.arange(mesh.n_cells) % 7)
assert comm.allreduce(dom.n) == mesh.n_cells
assert clock.totals["comm"] > 0
if rank == 0:
    print("OK")
