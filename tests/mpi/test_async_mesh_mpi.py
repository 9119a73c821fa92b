"""The asynchronous mesh sweeps under real mpiexec (async_mesh_script.py): the virtual clock equals the serial
oracle bit for bit, with and without random real sleeps; the wall clock finishes, and its halos are no older than
the module's bound, hosted (async_halo_age.py)."""

from __future__ import annotations

import pytest

from tests.mpi.harness import check_script


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("nranks, seed", [(3, 3), (4, 5)])
def test_async_mesh_under_mpiexec(mpirun, nranks, seed):
    check_script(mpirun, "async_mesh_script.py", "async_mesh", nranks, [seed], timeout=300)


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 4])
def test_async_mesh_wall_clock_halos_are_no_older_than_the_bound(mpirun, nranks):
    """4 processors hosted 2 per process (2 processes) or 1 per process (4, what ``clock: wall`` runs), on the wall
    clock: every sweep uses, from each neighbour, at least every version that neighbour handed to MPI more than
    0.1 s before the sweep's poll of it (hermes/app/mesh/async_mesh.py; async_halo_age.py). Before hosted polls read
    the bridge, a hosted rank kept version 0 of its neighbours on other processes (ages up to 0.6 s, the
    bound broken in most sweeps)."""
    check_script(mpirun, "async_halo_age.py", "async_halo_age", nranks, [], timeout=180)
