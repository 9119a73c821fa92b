"""Under mpiexec (2 or 4 processes): 4 processors hosted (2 per process, or 1 each) run the asynchronous mesh
sweeps of hermes/app/mesh/async_mesh.py on the wall clock, and rank 0 checks the bound on the age of the halos its
docstring states (run by tests/mpi/test_async_mesh_mpi.py).

Usage: ``mpiexec -n N python -m mpi4py tests/mpi/async_halo_age.py``

Each processor sleeps after each sweep (15 or 30 ms: two speeds), so its neighbours send versions faster than it
polls. The bound, for every sweep of every processor i and every neighbour j: if the sweep used j's version v and j
sent a version v + 1, j handed v + 1 to MPI no earlier than DELTA before i's last poll of j (else i would have used
it). DELTA (0.1 s) stands for MPI's delivery time within a machine (microseconds) with room for a loaded machine.
Rank 0 prints ``FAIL ...`` lines or ``OK async_halo_age N``, and the largest age seen.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from hermes.app.mesh.async_mesh import ASYNC_TAG, async_sweeps
from hermes.app.mesh.kernels import initial_fields
from hermes.runtime.clock import Links, WallClock
from hermes.data.distributed import halo_plan, scatter_domain
from hermes.data.generators import grid
from hermes.data.partition import metis_partition
from hermes.runtime.hosting import host_run
from tests.mpi.harness import finish

world = MPI.COMM_WORLD
P, K, DELTA = 4, 12, 0.1
mesh = grid(24, 18)
owner = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, P, seed=1)
fields = initial_fields(mesh.coords)


def job(comm):
    r = comm.Get_rank()
    dom = scatter_domain(comm, mesh if r == 0 else None, owner, fields if r == 0 else None)
    clock = WallClock(r, P, Links(latency=2e-4, bandwidth=1e7), 1.0e5, 1.0 / P)
    sweeps = []
    for sw in async_sweeps(comm, dom, clock, kernel="jacobi", iterations=K, work_per_weight=1.0,
                           bytes_per_edge=64.0, tag=ASYNC_TAG + 9):
        sweeps.append((sw.k, sw.versions, sw.polled, sw.sent, sw.ages))
        time.sleep(0.015 * (1 + r % 2))
    return [int(j) for j in halo_plan(dom).ranks], sweeps


mine = host_run(P, job, world)
runs = {r: v for part in world.allgather(mine) for r, v in part.items()}
failures: list[str] = []
sent = {r: {k: t for k, _, _, t, _ in sweeps} for r, (_, sweeps) in runs.items()}
oldest = 0.0  # the largest age of a halo whose sender had sent a newer version by then
for i, (nbrs, sweeps) in runs.items():
    for k, versions, polled, _, ages in sweeps:
        for j, v, t, age in zip(nbrs, versions, polled, ages):
            newer = sent[j].get(int(v) + 1)
            if newer is not None and newer <= t:
                oldest = max(oldest, float(age))
            if newer is not None and newer <= t - DELTA:
                failures.append(f"processor {i} sweep {k} used version {v} of processor {j}, whose version {v + 1} "
                                f"was sent {t - newer:.3f} s before the poll")
if world.Get_rank() == 0:
    print(f"largest age of a halo with a newer version sent {oldest:.4f} s", flush=True)
sys.exit(finish(world, "async_halo_age", failures[:20] if world.Get_rank() == 0 else []))
