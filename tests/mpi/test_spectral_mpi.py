"""Distributed eigen-form polynomial schemes and Chebyshev diffusion agree with their serial references
(spectral_script.py)."""

from __future__ import annotations

import pytest

from tests.mpi.harness import check_script


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [4, 5])
def test_distributed_matches_serial(mpirun, nranks):
    check_script(mpirun, "spectral_script.py", "spectral", nranks, [13])
