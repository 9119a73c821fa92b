"""Distributed LPS / LPA / MPA / AdA under real mpiexec agree with their serial references (polynomial_script.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("polynomial_script.py")


@pytest.mark.parametrize("nranks", [4, 5])
def test_distributed_matches_serial(mpirun, nranks):
    proc = mpirun(nranks, ["11"], script=SCRIPT, timeout=120)
    out = proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout, out
    assert proc.returncode == 0, out
    assert f"OK polynomial {nranks}" in proc.stdout.splitlines(), out
