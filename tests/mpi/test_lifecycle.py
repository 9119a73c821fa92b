"""A run's life: its directory checked before any work and replaced wholesale, records written as phases
end, kill-and-resume, signals to the launcher, the watchdog — under real mpiexec, each with a time-out."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hermes.claims import LOCK
from hermes.runtime.launch import _LAUNCHER_ENV
from tests.conftest import ROOT

QUICK = ["--no-pictures", "--quiet"]
WALL = {"wall_seconds", "adapt_wall_seconds"}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV and k != "HERMES_FAULT"}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("MPLBACKEND", "Agg")
    return {**env, **extra}


def hermes(*args, timeout: float = 240, env=None):
    """``hermes`` as a user starts it, self-launching under mpiexec; never hangs past ``timeout``."""
    try:
        return subprocess.run([sys.executable, "-m", "hermes", *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, env=env or _env())
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"hermes {' '.join(map(str, args))} timed out after {timeout}s\n{err.stderr}")


def _job_pids(tag: str) -> list[int]:
    """Processes whose command line holds ``tag`` (the run directory: the launcher, mpiexec, every rank)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag in cmd and state != "Z":
            out.append(int(d.name))
    return out


def _is_rank(pid: int) -> bool:
    """A rank's command line: ``python -m mpi4py -m hermes ...`` (not mpiexec's, which holds it)."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return "python" in Path(argv[0].decode()).name and b"mpi4py" in argv[1:4]


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _one_error(res, start: str) -> None:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hermes: error: {start}"), res.stderr
    assert "launching" not in res.stdout and "Traceback" not in res.stderr


@pytest.fixture
def here(capsys, monkeypatch):
    """``hermes`` in this process, as a user outside MPI starts it (the checks before launching, and runs
    with --no-launch on one rank): returns (status, stdout, stderr)."""
    for key in _LAUNCHER_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")

    def call(*args):
        from hermes.cli import main

        capsys.readouterr()
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)

    return call


def _summary(path: Path) -> dict:
    return {k: v for k, v in json.loads((path / "summary.json").read_text()).items() if k not in WALL}


# -- the output location, checked before launching ------------------------------------------------------------
def test_output_problems_are_found_before_launching(tmp_path, here):
    afile = tmp_path / "file"
    afile.write_text("x")
    _one_error(here("run", "--out", afile), f"--out: {afile} exists and is not a directory")
    _one_error(here("run", "--out", afile / "sub"), f"--out: {afile} is not a directory")
    _one_error(here("run", "--set", f"output.dir={afile}"), f"output.dir: {afile} exists and is not a directory")
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("mine")
    _one_error(here("run", "--out", other), f"--out: {other} is not empty and carries no hermes marker")
    _one_error(here("run", "--out", other, "--force"), f"--out: {other} is not empty and carries no hermes marker")
    assert (other / "thesis.tex").read_text() == "mine"
    _one_error(here("run", "--timeout", "0"), "run: argument --timeout: must be a number in (0, 1e+07]")
    _one_error(here("resume", other), f"resume: {other} is not a run directory hermes made")
    _one_error(here("resume", other, "--set", "seed=2"), "resume: the scenario and the directory come from RUN_DIR")


def test_an_unwritable_output_directory_is_found_before_launching(tmp_path, here):
    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() == 0:  # root writes in a 0555 directory: make it immutable instead
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(locked)]).returncode != 0:
            pytest.skip("chattr +i is not available here (root ignores permissions)")
    else:
        locked.chmod(0o555)
    try:
        _one_error(here("run", "--out", locked), f"--out: cannot write in {locked}")
        _one_error(here("run", "--out", locked / "new" / "run"), f"--out: cannot write in {locked}")
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(locked)], capture_output=True)
        locked.chmod(0o755)


def test_a_relative_output_dir_is_relative_to_the_scenario_file(tmp_path, here, monkeypatch):
    (tmp_path / "study").mkdir()
    (tmp_path / "elsewhere").mkdir()
    spec = tmp_path / "study" / "s.yaml"
    spec.write_text("processors: 1\nmesh: {grid: 6x5}\nadaptation: {phases: 1}\nbalancer: {algorithm: none}\n"
                    "output: {dir: results/one, pictures: false}\n")
    monkeypatch.chdir(tmp_path / "elsewhere")
    res = here("run", spec, "--no-launch", "--quiet")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "study" / "results" / "one" / "summary.json").is_file()
    assert not (tmp_path / "elsewhere" / "results").exists()
    # a path given on the command line is relative to the current directory (docs/SCENARIOS.md, "Paths")
    res = here("run", spec, "--no-launch", "--quiet", "--set", "output.dir=results/two")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "elsewhere" / "results" / "two" / "summary.json").is_file()
    assert not (tmp_path / "study" / "results" / "two").exists()
    (tmp_path / "study" / "results" / "three").write_text("a file")
    spec.write_text(spec.read_text().replace("results/one", "results/three"))
    res = here("run", spec)
    _one_error(res, f"output.dir: {tmp_path / 'study' / 'results' / 'three'} exists and is not a directory")


@pytest.mark.slow
def test_a_new_run_replaces_a_finished_one_wholesale_and_files_get_the_umask(tmp_path, here):
    out = tmp_path / "run"
    sets = ["--no-launch", "--quiet", "--set", "processors=1", "--set", "platform.capacities=homo",
            "--set", "mesh.grid=8x6", "--set", "output.vtu=true", "--out", out]
    old = os.umask(0o027)
    try:
        res = here("run", *sets, "--set", "adaptation.phases=3")
    finally:
        os.umask(old)
    assert res.returncode == 0, res.stderr
    assert (out / "vtu" / "phase-003.vtu").is_file() and (out / "partition-003.png").is_file()
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.suffix for p in files} >= {".json", ".csv", ".npz", ".vtu", ".png", ".pvd", ".yaml"}
    assert not (out / LOCK).exists()  # the lock's file (0600: it holds a token) goes with the lock
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o640)}  # 0666 & ~027, every kind of file
    res = here("run", *sets, "--set", "adaptation.phases=2", "--no-pictures")
    assert res.returncode == 0, res.stderr
    assert not (out / "vtu" / "phase-003.vtu").exists() and not (out / "partition-003.png").exists()
    assert not list(out.glob("*.png")) and (out / "vtu" / "phase-002.vtu").is_file()
    assert len(_summary(out)["phases"]) == 2 and _summary(out)["complete"] is True
    # every file of the new run
    assert {oct(p.stat().st_mode & 0o777) for p in out.rglob("*") if p.is_file()} == {oct(0o666 & ~old)}


# -- kill a rank, resume ---------------------------------------------------------------------------------------
CASES = {
    # a balancer that keeps state from phase to phase (AdA), heterogeneous capacities, jacobi replay
    "quickstart-ada": ["--set", "balancer.algorithm=ada", "--set", "adaptation.phases=4"],
    # refinement: the adapter's accounts, ids with gaps, the serial replay's records on rank 0
    "refine-lshape": [ROOT / "scenarios" / "refine-lshape.yaml", "--set", "output.vtu=false"],
}


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_killed_after_a_checkpoint_resumes_to_the_same_results(tmp_path, case):
    args = [*CASES[case], *QUICK, "--set", "output.checkpoint_every=1"]
    killed, ref = tmp_path / "killed", tmp_path / "ref"
    res = hermes("run", *args, "--out", killed, env=_env(HERMES_FAULT="kill:1:2"))
    assert res.returncode != 0 and not _job_pids(str(killed))
    # what a killed run leaves: the records of its finished phases, and the checkpoint
    s = _summary(killed)
    assert s["complete"] is False and s["checkpoint"] == 2 and [ph["phase"] for ph in s["phases"]] == [1, 2]
    rows = (killed / "phases.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 4 and rows[-1].startswith("2,3,")
    assert json.loads((killed / "checkpoint" / "manifest.json").read_text())["phase"] == 2
    _one_error(hermes("run", *args, "--out", killed), f"--out: {killed} holds an unfinished hermes run (2 phases "
                                                      "recorded, a checkpoint at phase 2): resume it")
    res = hermes("resume", killed, "--quiet")
    assert res.returncode == 0, res.stderr
    assert hermes("run", *args, "--out", ref).returncode == 0
    assert _summary(killed) == _summary(ref)
    assert (killed / "phases.csv").read_bytes() == (ref / "phases.csv").read_bytes()
    with np.load(killed / "partitions.npz") as a, np.load(ref / "partitions.npz") as b:
        assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)
    assert not (killed / "checkpoint").exists()  # a finished run has nothing to resume


# -- signals and the watchdog ----------------------------------------------------------------------------------
def _start(out: Path, *args) -> tuple[subprocess.Popen, Path]:
    """Start a long self-launching run, a process per processor (4); return once its first phase is recorded."""
    log = out.with_suffix(".log")
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "hermes", "run", "--no-pictures", "--set",
                                 "adaptation.phases=500", "--set", "adaptation.factor=1", "--processes", "4",
                                 "--out", str(out), *args],
                                cwd=ROOT, env=_env(),
                                stdout=fh, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "summary.json").exists() or not json.loads((out / "summary.json").read_text())["phases"]:
        if time.monotonic() > deadline or proc.poll() is not None:
            _kill_all(_job_pids(str(out)))
            pytest.fail(f"the run did not record a phase: {proc.poll()} {log.read_text()}")
        time.sleep(0.2)
    return proc, log


def _signal_launcher(proc: subprocess.Popen, out: Path, sig: int) -> str:
    """Send ``sig`` to the launcher of the run in ``out``; its stderr once every process of the job has ended."""
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while _job_pids(str(out)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _job_pids(str(out)), "processes of the job survived the launcher"
    finally:
        _kill_all(_job_pids(str(out)))
    return err


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_the_launcher_ends_every_rank(tmp_path, sig):
    out = tmp_path / "run"
    proc, _ = _start(out)
    ranks = [pid for pid in _job_pids(str(out)) if pid != proc.pid]
    assert len(ranks) >= 5  # mpiexec and 4 ranks
    err = _signal_launcher(proc, out, sig)
    assert proc.returncode == 128 + sig
    assert err.strip().splitlines()[-1].startswith(f"hermes: stopped by {sig.name}: the job was ended")
    assert json.loads((out / "summary.json").read_text())["complete"] is False


@pytest.mark.mpi
@pytest.mark.slow
def test_a_stopped_rank_ends_the_job_through_the_watchdog(tmp_path):
    out = tmp_path / "run"
    timeout = 6.0
    proc, _ = _start(out, "--timeout", str(timeout))
    ranks = [pid for pid in _job_pids(str(out)) if _is_rank(pid)]
    assert len(ranks) == 4
    victim = max(ranks)
    os.kill(victim, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        _, err = proc.communicate(timeout=timeout + 60)
        waited = time.monotonic() - t0
        time.sleep(1)
        assert not _job_pids(str(out)), "processes of the job survived the watchdog"
    finally:
        _kill_all(_job_pids(str(out)))
    # the limit, the staggered grace of the ranks (at most 3 × 2 s) and the time Open MPI takes to kill
    assert timeout <= waited < timeout + 6 + 30
    assert proc.returncode == 124
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"hermes: error: no progress for {timeout:g} s since phase ")
    assert lines[0].endswith("a rank is stopped or hung; ending the job")
    shutil.rmtree(out, ignore_errors=True)


@pytest.mark.mpi
@pytest.mark.slow
def test_a_stopped_process_hosting_processors_ends_the_job(tmp_path):
    """4 processors on 2 processes: a stopped process leaves the other's processors waiting; its watchdog (one per
    process) ends the job with one line; a signal to the launcher ends both processes."""
    out = tmp_path / "run"
    timeout = 6.0
    proc, _ = _start(out, "--timeout", str(timeout), "--processes", "2")
    ranks = [pid for pid in _job_pids(str(out)) if _is_rank(pid)]
    assert len(ranks) == 2
    os.kill(max(ranks), signal.SIGSTOP)
    try:
        _, err = proc.communicate(timeout=timeout + 60)
        time.sleep(1)
        assert not _job_pids(str(out)), "processes of the job survived the watchdog"
    finally:
        _kill_all(_job_pids(str(out)))
    assert proc.returncode == 124
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"hermes: error: no progress for {timeout:g} s since phase ")
    out2 = tmp_path / "run2"
    proc, _ = _start(out2, "--processes", "2")
    _signal_launcher(proc, out2, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM
