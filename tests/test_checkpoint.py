"""Checkpoint and resume on one rank, in this process (the kill-and-resume test under mpiexec is in
tests/mpi/test_lifecycle.py): records phase by phase, a crash after a checkpoint, resume to the same
results, and the one-line refusals of a checkpoint that cannot be resumed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpi4py import MPI

from hermes import driver
from hermes.checkpoint import read_manifest
from hermes.errors import HermesError
from hermes.scenario import QUICKSTART, parse_scenario

WALL = {"wall_seconds", "adapt_wall_seconds"}


class Crash(Exception):
    """Stands for a kill: raised where the test's fault would kill a rank."""


def _scenario(**extra):
    sets = ["processors=1", "platform.capacities=homo", "mesh.grid=12x10", "adaptation.phases=5",
            "output.pictures=false", "output.checkpoint_every=2", *[f"{k}={v}" for k, v in extra.items()]]
    return parse_scenario(QUICKSTART, overrides=sets)


def _crash_after(monkeypatch, phase: int) -> list[dict]:
    """Make the run stop after ``phase``'s records; return what summary.json said after every phase."""
    seen: list[dict] = []

    def fault(r, k):
        seen.append(json.loads((r_out[0] / "summary.json").read_text()))
        if k == phase:
            raise Crash

    r_out: list = []
    real_open = driver._open

    def spy_open(r, path, *args, **kwargs):
        r_out.append(path)
        return real_open(r, path, *args, **kwargs)

    monkeypatch.setattr(driver, "_fault", fault)
    monkeypatch.setattr(driver, "_open", spy_open)
    return seen


def _same_run(a, b) -> None:
    assert {k: v for k, v in a.summary.items() if k not in WALL} == {k: v for k, v in b.summary.items()
                                                                       if k not in WALL}
    assert (a.out_dir / "phases.csv").read_bytes() == (b.out_dir / "phases.csv").read_bytes()
    with np.load(a.out_dir / "partitions.npz") as x, np.load(b.out_dir / "partitions.npz") as y:
        assert sorted(x.files) == sorted(y.files) and all(np.array_equal(x[k], y[k]) for k in x.files)


@pytest.mark.parametrize("extra", [{}, {"adaptation.kind": "refine"}])
def test_a_crashed_run_resumes_to_the_results_of_an_uninterrupted_one(tmp_path, monkeypatch, extra):
    sc = _scenario(**extra)
    ref = driver.run(sc, MPI.COMM_SELF, out_dir=tmp_path / "ref", quiet=True)
    seen = _crash_after(monkeypatch, 3)
    with pytest.raises(Crash):
        driver.run(sc, MPI.COMM_SELF, out_dir=tmp_path / "crashed", quiet=True)
    # the records were written as the phases ended, the summary incomplete, the checkpoint of phase 2 kept
    assert [len(s["phases"]) for s in seen] == [1, 2, 3]
    assert [s["checkpoint"] for s in seen] == [None, 2, 2] and not any(s["complete"] for s in seen)
    assert len((tmp_path / "crashed" / "phases.csv").read_text().splitlines()) == 1 + 3
    assert read_manifest(tmp_path / "crashed").phase == 2
    monkeypatch.undo()
    out = driver.resume(tmp_path / "crashed", MPI.COMM_SELF, quiet=True)
    assert out.summary["complete"] is True
    _same_run(out, ref)
    assert not (tmp_path / "crashed" / "checkpoint").exists()
    with pytest.raises(HermesError, match="holds a finished run"):
        driver.resume(tmp_path / "crashed", MPI.COMM_SELF)


def test_a_checkpoint_that_cannot_be_resumed_is_refused_in_one_line(tmp_path, monkeypatch):
    _crash_after(monkeypatch, 2)
    with pytest.raises(Crash):
        driver.run(_scenario(), MPI.COMM_SELF, out_dir=tmp_path / "c", quiet=True)
    monkeypatch.undo()
    man = tmp_path / "c" / "checkpoint" / "manifest.json"
    doc = json.loads(man.read_text())
    state = tmp_path / "c" / "checkpoint" / "phase-0002" / "rank-00000.npz"
    good = state.read_bytes()
    state.write_bytes(good[:-10] + b"0123456789")
    with pytest.raises(HermesError, match=r"^--resume: .*rank-00000.npz is damaged"):
        driver.resume(tmp_path / "c", MPI.COMM_SELF)
    state.write_bytes(good)
    four = [{**doc["files"][0], "name": f"rank-{r:05d}.npz"} for r in range(4)]
    man.write_text(json.dumps({**doc, "ranks": 4, "files": four}))
    with pytest.raises(HermesError, match=r"the checkpoint holds 4 ranks, the job has 1"):
        driver.resume(tmp_path / "c", MPI.COMM_SELF)
    man.write_text(json.dumps({**doc, "hermes": "0.0.1"}))
    with pytest.raises(HermesError, match=r"written by hermes 0.0.1, this is hermes "):
        driver.resume(tmp_path / "c", MPI.COMM_SELF)
    man.write_text("{")
    with pytest.raises(HermesError, match=r"^--resume: .*manifest.json: not JSON \("):
        driver.resume(tmp_path / "c", MPI.COMM_SELF)
    man.write_text(json.dumps(doc))
    assert driver.resume(tmp_path / "c", MPI.COMM_SELF, quiet=True).summary["complete"] is True


class Plugin:
    """A plug-in's own object: not data a checkpoint holds."""


#: (what a plug-in balancer keeps in ctx.state, where the message says it is, the type it names)
NOT_DATA = {
    "closure": (lambda tmp: lambda: None, "state.balancer_state['hook']", "function"),
    "open file": (lambda tmp: open(tmp / "log.txt", "w"), "state.balancer_state['hook']", "_io.TextIOWrapper"),
    "object in a list": (lambda tmp: [1, {"x": Plugin()}], "state.balancer_state['hook'][1]['x']",
                         f"{__name__}.Plugin"),
}


@pytest.mark.parametrize("case", sorted(NOT_DATA))
def test_state_that_is_not_data_is_reported_in_one_line(tmp_path, monkeypatch, case):
    make, where, kind = NOT_DATA[case]
    real = driver.start

    def start(comm, sc, **kw):
        r = real(comm, sc, **kw)
        r.balancer_state["hook"] = make(tmp_path)
        return r

    monkeypatch.setattr(driver, "start", start)
    with pytest.raises(HermesError) as err:
        driver.run(_scenario(), MPI.COMM_SELF, out_dir=tmp_path / "c", quiet=True)
    assert str(err.value) == (f"checkpoint: the state of rank 0 cannot be saved: {where} holds a {kind} (checkpoints "
                              f"hold arrays, numbers, strings, lists, mappings and hermes' own records)")
    assert not (tmp_path / "c" / "checkpoint" / "manifest.json").exists()
