from __future__ import annotations

import pytest

from pathlib import Path

from tests.conftest import run_mpi


@pytest.mark.slow
def test_monitor_recovers_capacities_and_links_under_mpiexec():
    res = run_mpi(4, [], script=Path(__file__).with_name("monitor_script.py"), timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "OK"
