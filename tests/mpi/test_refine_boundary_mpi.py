from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_mpi

SCRIPT = Path(__file__).with_name("refine_boundary_script.py")


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("n, seed", [(4, 0), (6, 2)])
def test_distributed_refinement_equals_its_serial_oracle(n, seed):
    res = run_mpi(n, [str(seed)], script=SCRIPT, timeout=180)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "OK"
