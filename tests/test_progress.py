"""Progress a person sees: the step in progress repeated while it lasts (piped output), silence on demand, the
Python API's default, and hermes compare's per-run status."""

from __future__ import annotations

import json
import time
import warnings

import pytest

import hermes
from hermes.compare.runner import run_step
from hermes.progress import Progress, using, wanted


def _slowed(fn, seconds: float):
    """``fn`` made to last at least ``seconds`` longer (a step long enough for its status to be repeated)."""
    def slow(*args, **kw):
        time.sleep(seconds)
        return fn(*args, **kw)

    return slow


def test_a_long_step_is_repeated_with_its_elapsed_time():
    lines: list[str] = []
    with Progress(lines.append, every=0.1) as p:
        p.line("phase 1 done")
        p.status("phase 2: balancing round 1/5 (pcg)")
        time.sleep(0.6)
    assert lines[0] == "phase 1 done"
    repeated = [ln for ln in lines[1:] if ln.startswith("phase 2: balancing round 1/5 (pcg) … ")]
    assert len(repeated) >= 2, lines  # at least every 0.1 s of silence (polled every 0.025 s)
    assert len(repeated) == len(lines) - 1


def test_a_counted_step_says_how_far_it_is():
    lines: list[str] = []
    with Progress(lines.append, every=0.05) as p:
        p.status("drawing pictures", 3, 9)
        time.sleep(0.3)
    assert lines and all(ln.startswith("drawing pictures (3/9) … ") for ln in lines), lines


def test_disabled_says_nothing():
    lines: list[str] = []
    with Progress(lines.append, every=0.05, enabled=False) as p:
        p.line("a line")
        p("another")
        p.status("a step")
        time.sleep(0.2)
    assert lines == []


def test_using_a_printer_starts_and_closes_its_own():
    lines: list[str] = []
    with using(lines.append) as p:
        p.every = 0.05
        p("an event")
        p.status("a step")
        time.sleep(0.3)
    n = len(lines)
    time.sleep(0.2)
    assert lines[0] == "an event" and n >= 2 and len(lines) == n  # nothing after the block


def test_quiet_is_deprecated_for_progress_false():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wanted(True, None, "hermes.run") is True
        assert wanted(False, None, "hermes.run") is False
    with pytest.warns(DeprecationWarning, match=r"hermes\.run\(progress=False\)"):
        assert wanted(True, True, "hermes.run") is False
    with pytest.warns(DeprecationWarning):
        assert wanted(True, False, "hermes.compare") is True


def _tiny(tmp_path, **kw):
    return hermes.run(None, 1, out=tmp_path / "run", platform__capacities="homo", adaptation__phases=2,
                      output__pictures=False, **kw)


def test_the_api_shows_progress_by_default(tmp_path, capsys):
    res = _tiny(tmp_path)
    out = capsys.readouterr().out
    assert res.summary["complete"] is True
    assert "hermes: quickstart on 1 processor" in out and "phase 2/2: imbalance " in out, out


def test_the_api_is_silent_with_progress_false(tmp_path, capsys):
    _tiny(tmp_path, progress=False)
    assert capsys.readouterr().out == ""
    with pytest.warns(DeprecationWarning):
        _tiny(tmp_path, quiet=True)
    assert capsys.readouterr().out == ""


def test_the_run_names_its_step_while_it_lasts(tmp_path, monkeypatch):
    """A phase's compute lasting longer than ``every``: its status line is repeated while it runs."""
    from mpi4py import MPI

    from hermes.lifecycle import phase
    from hermes.lifecycle.driver import run
    from hermes.runtime.plain import plain

    monkeypatch.setattr(phase, "solve_phase", _slowed(phase.solve_phase, 0.5))
    sc = hermes.scenario(None, processors=1, platform__capacities="homo", adaptation__phases=1,
                         output__pictures=False)
    lines: list[str] = []
    with Progress(lines.append, every=0.1) as shown:
        run(sc, plain(MPI.COMM_SELF), out_dir=tmp_path / "run", progress=shown)
    compute = [ln for ln in lines if ln.startswith("phase 1/1: compute (20 iterations) … ")]
    assert len(compute) >= 2, lines
    assert any(ln.startswith("phase 1/1: imbalance ") for ln in lines)  # the phase's line stays


def test_run_step_reads_a_runs_log(tmp_path):
    log = tmp_path / "r.log"
    assert run_step(log) is None  # not there yet
    log.write_text("$ mpiexec -n 2 python -m hermes run r.yaml --no-launch --out r\n")
    assert run_step(log) is None
    with log.open("a") as f:
        f.write("hermes: r on 4 processors, balancer pcg, 3 phases, clock virtual\n")
        f.write("phase 2/3: balancing round 2/10 (pcg) … 15 s\n")
    assert run_step(log) == "phase 2/3: balancing round 2/10 (pcg)"
    with log.open("a") as f:
        f.write("phase 2/3: imbalance 1.2 -> 1.0, moved 5 cells (5 sends), virtual time 1 s | wall 3.0 s, ETA 2 s\n")
    assert run_step(log) == "phase 2/3 done"
    log.write_text("$ cmd\n" + "x" * 5000 + "\nset-up: partitioning 1000 cells (METIS, 4 parts) … 5 s\n")
    assert run_step(log) == "set-up: partitioning 1000 cells (METIS, 4 parts)"


@pytest.mark.mpi
def test_compare_piped_shows_each_running_runs_step(tmp_path, monkeypatch):
    from hermes.compare import make_experiment, run_experiment

    monkeypatch.setenv("HERMES_PROGRESS_EVERY", "0.2")  # the runs' own status lines, in their logs
    exp = make_experiment({"name": "progress", "scenario": {
        "processors": 1, "platform": {"capacities": "homo"}, "mesh": {"grid": "300x300"},
        "application": {"iterations": 300},
        "adaptation": {"phases": 3}, "output": {"pictures": False}}}, axes={"balancer": ["pcg"]})
    lines: list[str] = []
    with Progress(lines.append, every=0.2) as shown:
        run_experiment(exp, tmp_path / "exp", say=shown, report=False)
    status = [ln for ln in lines if ln.startswith("0 done, 1 running, 0 failed of 1")]
    assert status, lines
    steps = [ln.split(" | ", 1)[1] for ln in status if " | " in ln]
    assert any(s.split(": ", 1)[1].startswith(("phase ", "set-up: ", "hermes: ")) for s in steps), status
    assert any("done" in ln and "pcg" in ln for ln in lines)  # the run's event line stays


# -- hermes replay, hermes trace info ---------------------------------------------------------------------------
def _small_trace(tmp_path):
    from tests.trace.test_replay import _trace

    return _trace(tmp_path)


def test_replay_names_the_phase_and_the_balancer_while_it_balances(tmp_path, monkeypatch):
    from hermes.trace import read_trace, replay as replay_module
    from hermes.trace.replay import replay_trace

    monkeypatch.setattr(replay_module, "_balance", _slowed(replay_module._balance, 0.3))
    trace = read_trace(_small_trace(tmp_path))  # phases 1 and 2, 6 ranks
    lines: list[str] = []
    with Progress(lines.append, every=0.1) as shown:
        table = replay_trace(trace, ["none", "pcg", "metis"], progress=shown)
    steps = {ln.split(" … ")[0] for ln in lines}
    assert steps >= {"phase 1 (1/2): pcg (1/2)", "phase 1 (1/2): metis (2/2)", "phase 2 (2/2): pcg (1/2)",
                     "phase 2 (2/2): metis (2/2)"}, lines
    assert len(table.rows()) == 6  # the table as without a Progress: none, pcg, metis on phases 1 and 2


def test_reading_a_trace_names_the_rank_file(tmp_path, monkeypatch):
    from hermes.trace import lbdatafile

    monkeypatch.setattr(lbdatafile, "_read_rank", _slowed(lbdatafile._read_rank, 0.15))
    lines: list[str] = []
    with Progress(lines.append, every=0.1) as shown:
        lbdatafile.read_trace(_small_trace(tmp_path), progress=shown)
    assert any(ln.startswith("reading t.3.json (4/6) … ") for ln in lines), lines


@pytest.mark.slow
def test_replay_piped_repeats_its_step_and_quiet_prints_only_the_directory(tmp_path, monkeypatch):
    from tests.test_cli import cli

    stem = _small_trace(tmp_path)
    monkeypatch.setenv("HERMES_PROGRESS_EVERY", "0.05")
    res = cli("trace", "replay", str(stem), "--algorithm", "pcg", "--out", str(tmp_path / "a"))
    assert res.returncode == 0, res.stderr
    assert f"drawing {tmp_path / 'a' / 'replay.png'} … " in res.stdout, res.stdout  # drawing lasts > 0.05 s
    res = cli("trace", "replay", str(stem), "--algorithm", "pcg", "--out", str(tmp_path / "b"), "--quiet")
    assert res.returncode == 0 and res.stdout == f"{tmp_path / 'b'}\n", res.stdout
    res = cli("trace", "info", str(stem), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["ranks"] == 6  # statuses, if any, on stderr


# -- hermes mesh generate ---------------------------------------------------------------------------------------
def test_mesh_generate_names_its_step_while_it_lasts(tmp_path, monkeypatch):
    import dataclasses

    from hermes.data import meshinfo
    from hermes.data.cfd_meshes import CFD_MESHES

    slow_build = _slowed(meshinfo.get_generator("large").build, 0.3)
    monkeypatch.setattr(meshinfo, "get_generator", lambda name: dataclasses.replace(CFD_MESHES[name], build=slow_build))
    monkeypatch.setattr(meshinfo, "write_mesh", _slowed(meshinfo.write_mesh, 0.3))
    lines: list[str] = []
    out = tmp_path / "m.vtu"
    with Progress(lines.append, every=0.1) as shown:
        mesh = meshinfo.generate("large", 2000, out, progress=shown)
    steps = {ln.split(" … ")[0] for ln in lines}
    assert steps == {"generating large, ~2,000 cells", f"writing {out} ({mesh.n_cells:,} cells)"}, lines
    assert out.stat().st_size > 0


# -- hermes run's launcher --------------------------------------------------------------------------------------
@pytest.mark.mpi  # starts mpiexec itself
def test_the_launcher_says_it_is_starting_the_job_until_the_job_speaks(tmp_path, monkeypatch):
    from tests.test_cli import cli

    monkeypatch.setenv("HERMES_PROGRESS_EVERY", "0.1")  # mpiexec and the ranks' imports take a second or more
    res = cli("run", "--set", "processors=4", "--processes", "2", "--set", "platform.capacities=homo",
              "--set", "adaptation.phases=1", "--no-pictures", "--out", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("hermes: launching: ")
    first = next(k for k, ln in enumerate(lines) if ln.startswith("hermes: quickstart on 4 processors"))
    waiting = [ln for ln in lines if ln.startswith("starting 2 MPI processes for 4 processors … ")]
    assert waiting and lines[1:first] == waiting, lines  # repeated until the job's first line, never after it
    assert lines[-1].startswith("results:  ")
