"""Distributed GDA and PCG under real mpiexec agree with their serial references (balance_script.py)."""

from __future__ import annotations

import pytest

from tests.mpi.harness import check_script


@pytest.mark.parametrize("nranks", [4, 5])
@pytest.mark.slow
def test_distributed_matches_serial(mpirun, nranks):
    check_script(mpirun, "balance_script.py", "balance", nranks, [11])
