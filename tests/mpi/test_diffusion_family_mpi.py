"""Every diffusion-family registry entry under real mpiexec agrees with its serial reference.

Flow (bit for bit), iterations, convergence, per-rank counters and α-β times, and collective errors:
see diffusion_family_script.py.
"""

from __future__ import annotations

import pytest

from tests.mpi.harness import check_script


@pytest.mark.parametrize("nranks,seed", [(4, 11)])
@pytest.mark.slow
def test_distributed_matches_serial(mpirun, nranks, seed):
    check_script(mpirun, "diffusion_family_script.py", "diffusion-family", nranks, [seed], timeout=240)
