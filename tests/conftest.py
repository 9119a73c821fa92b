"""Shared test helpers: run a Python script or hermes itself under real mpiexec with a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes.launch import mpiexec_command

ROOT = Path(__file__).resolve().parents[1]
SHARED_MESHES = ROOT.parent / "shared" / "meshes"


def run_mpi(n: int, args: list[str], *, module: str | None = None, script: str | Path | None = None,
            timeout: float = 180, cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m mpi4py <script> args`` (or ``-m module``) on ``n`` ranks; never hangs past ``timeout``."""
    if script is not None:
        cmd = mpiexec_command(n, [str(script), *args], module="hermes")
        # replace "-m hermes" by the script path
        i = cmd.index("-m", cmd.index("mpi4py") + 1)
        cmd = cmd[:i] + [str(script), *args]
    else:
        cmd = mpiexec_command(n, args, module=module or "hermes")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("MPLBACKEND", "Agg")
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT, env=env)
    except subprocess.TimeoutExpired as err:  # the job hung: that is a failure, not a pass
        pytest.fail(f"mpiexec timed out after {timeout}s: {' '.join(cmd)}\n{err.stdout}\n{err.stderr}")


@pytest.fixture
def mpirun():
    return run_mpi
