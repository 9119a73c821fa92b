from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_mpi

SCRIPT = Path(__file__).with_name("migrate_script.py")


@pytest.mark.parametrize("ranks, seed", [(3, 0), (5, 1)])
@pytest.mark.slow
def test_random_migrations_conserve_everything(ranks, seed):
    res = run_mpi(ranks, [str(seed)], script=SCRIPT, timeout=180)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "OK"
