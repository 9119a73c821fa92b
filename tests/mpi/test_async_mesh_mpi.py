"""The asynchronous mesh sweeps under real mpiexec (async_mesh_script.py): the virtual clock equals the serial
oracle bit for bit, with and without random real sleeps; the wall clock finishes."""

from __future__ import annotations

import pytest

from tests.mpi.harness import check_script


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("nranks, seed", [(3, 3), (4, 5)])
def test_async_mesh_under_mpiexec(mpirun, nranks, seed):
    check_script(mpirun, "async_mesh_script.py", "async_mesh", nranks, [seed], timeout=300)
