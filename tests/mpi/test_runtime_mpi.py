"""The runtime's choice under real mpiexec (hermes.runtime.start): as many processes as processors run on mpi4py's
own communicator and never import the hosting; fewer host the processors."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT, run_mpi

SCRIPT = ROOT / "tests" / "mpi" / "plain_run.py"


def _run(n: int, p: int, out) -> list[str]:
    res = run_mpi(n, ["run", "--set", f"processors={p}", "--set", "adaptation.phases=2", "--processes", str(n),
                      "--out", str(out), "--no-launch", "--quiet", "--no-pictures"], script=SCRIPT, timeout=300)
    assert res.returncode == 0, res.stderr
    # one line per rank, but MPICH's Hydra may forward two ranks' lines joined: read the records, not the lines
    return sorted(" ".join(m) for m in re.findall(r"(rank \d+ exit \d+ hosting) (\S+?)(?=rank \d|\s|$)", res.stdout))


@pytest.mark.mpi
def test_processes_equal_to_processors_run_no_hosting_code(tmp_path):
    lines = _run(4, 4, tmp_path / "plain")
    assert lines == [f"rank {r} exit 0 hosting none" for r in range(4)]
    assert json.loads((tmp_path / "plain" / "summary.json").read_text())["processors"] == 4


@pytest.mark.mpi
def test_fewer_processes_than_processors_host_them(tmp_path):
    lines = _run(2, 4, tmp_path / "hosted")
    assert [line.split(" hosting ")[0] for line in lines] == ["rank 0 exit 0", "rank 1 exit 0"]
    assert all("hermes.runtime.hosting" in line and "greenlet" in line for line in lines)
    # the same bits either way (tests/test_hosting.py checks every balancer family)
    plain = tmp_path / "plain"
    _run(4, 4, plain)
    for f in ("phases.csv",):
        assert (plain / f).read_bytes() == (tmp_path / "hosted" / f).read_bytes()


@pytest.mark.mpi
def test_the_plain_communicator_gives_the_hosted_bits():
    res = run_mpi(3, [], script=ROOT / "tests" / "mpi" / "plain_comm.py", timeout=120)
    assert res.returncode == 0, res.stderr
    assert sorted(re.findall(r"ok\d+", res.stdout)) == ["ok0", "ok1", "ok2"], res.stdout
