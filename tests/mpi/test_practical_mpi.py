"""Distributed practical FOS under real mpiexec agrees with its serial reference (practical_script.py)."""

from __future__ import annotations

import pytest

from tests.mpi.harness import check_script


@pytest.mark.parametrize("nranks,seed", [(4, 3), (5, 8)])
@pytest.mark.slow
def test_distributed_matches_serial(mpirun, nranks, seed):
    check_script(mpirun, "practical_script.py", "practical", nranks, [seed])
