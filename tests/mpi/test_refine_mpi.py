from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_mpi

SCRIPT = Path(__file__).with_name("refine_script.py")


@pytest.mark.parametrize("ranks, seed, kind", [(3, 0, "lshape"), (4, 1, "delaunay")])
@pytest.mark.slow
def test_distributed_refinement_equals_serial_and_coarsening_stays_conforming(ranks, seed, kind):
    res = run_mpi(ranks, [str(seed), kind], script=SCRIPT, timeout=180)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "OK"
