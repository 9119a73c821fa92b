"""Distributed Grapevine under real mpiexec gives the serial assignment, history and counters (gossip_script.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("gossip_script.py")


@pytest.mark.parametrize("nranks", [4, 5])
@pytest.mark.slow
def test_distributed_gossip_matches_serial(mpirun, nranks):
    proc = mpirun(nranks, ["3"], script=SCRIPT, timeout=120)
    out = proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout, out
    assert proc.returncode == 0, out
    assert f"OK gossip {nranks}" in proc.stdout.splitlines(), out


@pytest.mark.slow
def test_hermes_run_with_grapevine(mpirun, tmp_path):
    import json

    out = tmp_path / "run"
    proc = mpirun(2, ["run", "--set", "balancer.algorithm=grapevine", "--set", "balancer.criterion=modified",
                      "--out", str(out), "--no-launch", "--quiet", "--no-pictures"], timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    phases = json.loads((out / "summary.json").read_text())["phases"]
    assert all(ph["imbalance_after"] < ph["imbalance_before"] for ph in phases), phases
    assert all(ph["balance_counters"]["collectives"].get("alltoall", 0) > 0 for ph in phases)
