"""The distributed least-cost flow equals its serial reference on every rank (mincost_script.py)."""

from __future__ import annotations

import pytest

from tests.mpi.harness import check_script


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [3, 5])
def test_distributed_matches_serial(mpirun, nranks):
    check_script(mpirun, "mincost_script.py", "mincost", nranks, [17])
