"""Distributed LPS / LPA / MPA / AdA under real mpiexec agree with their serial references (polynomial_script.py)."""

from __future__ import annotations

import pytest

from tests.mpi.harness import check_script


@pytest.mark.parametrize("nranks", [4, 5])
@pytest.mark.slow
def test_distributed_matches_serial(mpirun, nranks):
    check_script(mpirun, "polynomial_script.py", "polynomial", nranks, [11])
