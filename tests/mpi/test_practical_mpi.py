"""Distributed practical FOS under real mpiexec agrees with its serial reference (practical_script.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("practical_script.py")


@pytest.mark.parametrize("nranks,seed", [(4, 3), (5, 8)])
def test_distributed_matches_serial(mpirun, nranks, seed):
    proc = mpirun(nranks, [str(seed)], script=SCRIPT, timeout=120)
    out = proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout, out
    assert proc.returncode == 0, out
    assert f"OK practical {nranks}" in proc.stdout.splitlines(), out
