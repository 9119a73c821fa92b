from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_mpi

SCRIPT = Path(__file__).with_name("selection_script.py")


@pytest.mark.parametrize("seed", [0])
@pytest.mark.slow
def test_every_selection_realises_the_flow_under_mpi(seed):
    res = run_mpi(4, [str(seed)], script=SCRIPT, timeout=180)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "OK"
