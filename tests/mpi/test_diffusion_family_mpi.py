"""Every diffusion-family registry entry under real mpiexec agrees with its serial reference.

Flow (bit for bit), iterations, convergence, per-rank counters and α-β times, and collective errors:
see diffusion_family_script.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("diffusion_family_script.py")


@pytest.mark.parametrize("nranks,seed", [(4, 11)])
def test_distributed_matches_serial(mpirun, nranks, seed):
    proc = mpirun(nranks, [str(seed)], script=SCRIPT, timeout=240)
    out = proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout, out
    assert proc.returncode == 0, out
    assert f"OK diffusion-family {nranks}" in proc.stdout.splitlines(), out
