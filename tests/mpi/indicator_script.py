"""Under mpiexec: the distributed jump indicator equals the serial one bit for bit, after migrations.

Prints "OK" on rank 0 when every check passes; raises (aborting the job) otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.app.mesh.indicator import gradient_jump, jump_indicator_serial, mark_max_strategy
from hermes.runtime.clock import Links, VirtualClock
from hermes.data.distributed import gather_to_root, scatter_domain
from hermes.data.generators import grid
from hermes.data.migrate import migrate
from hermes.data.partition import metis_partition

comm = plain(MPI.COMM_WORLD)
rank, p = comm.Get_rank(), comm.Get_size()
seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
mesh = grid(23, 17)
rng = np.random.default_rng(seed)
u = rng.normal(size=mesh.n_cells)
owner = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, p, seed=seed) if rank == 0 else None
dom = scatter_domain(comm, mesh if rank == 0 else None, owner, {"u": u} if rank == 0 else None)
clock = VirtualClock(rank, p, Links(), 1e6, 1.0 / p)
ref = jump_indicator_serial(mesh.xadj, mesh.adjncy, u)
local_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(p)[rank])
for step in range(3):
    eta = gradient_jump(comm, dom, clock)
    assert np.array_equal(eta, ref[dom.gid]), f"step {step}: indicator differs from the serial one"
    r, c, top = mark_max_strategy(comm, eta, 0.6, 0.2, clock)
    assert top == ref.max() and np.array_equal(r, ref[dom.gid] >= 0.6 * top)
    assert np.array_equal(c, ref[dom.gid] < 0.2 * top)
    g = gather_to_root(comm, dom, mesh.n_cells, extra={"eta": eta})
    if rank == 0:
        assert np.array_equal(g[2]["eta"], ref)
    dest = local_rng.integers(0, p, dom.n)
    dest[0] = rank
    dom, _ = migrate(comm, dom, dest, clock)
assert clock.totals["comm"] > 0  # the ghost exchange is charged
if rank == 0:
    print("OK")
