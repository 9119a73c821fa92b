"""Faults that once destroyed data: one test per class of deletion, as real ``hermes`` processes.

Each test plants what a hostile user (or an unlucky one) would — a foreign directory that looks like a run, an
axis label ``..``, a second run into the same directory, a symlink at a temporary name, a full disk — and checks
that nothing outside a hermes-marked directory changes, that the command says why in one line, and that the
records of what was finished are kept.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes.claims import LOCK, MARKER, read_marker
from hermes.runtime.launch import _LAUNCHER_ENV
from tests.conftest import ROOT

SMALL = ["--set", "mesh.grid=8x6", "--set", "platform.capacities=homo", "--set", "adaptation.phases=2"]
# an experiment's runs of 2 processors each on one process, two at a time: what these tests check (names, links,
# directories) does not depend on the processes, and a run of one process costs one start of Python less
ONE_PROCESS = ["--set", "run.processes=1", "--jobs", "2"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("MPLBACKEND", "Agg")
    return env


def hermes(*args, cwd=None, timeout=300, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes", *map(str, args)], capture_output=True, text=True,
                          check=False, timeout=timeout, cwd=cwd or ROOT, env=_env(), preexec_fn=preexec)


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root`` (not following symlinks): file bytes, link targets, directories."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


def _without_mpi_frames(text: str) -> list[str]:
    """The lines of ``text`` outside Open MPI's framed messages (``-----`` ... ``-----``); under a file-size limit
    Open MPI warns that it cannot size its shared-memory file, which is its own message, not hermes'."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("-" * 20):
            inside = not inside
            continue
        if not inside and line.strip():
            out.append(line)
    return out


def one_line(res: subprocess.CompletedProcess, words: str, code: int = 2) -> None:
    lines = _without_mpi_frames(res.stderr)
    assert res.returncode == code, res.stdout + res.stderr
    assert lines and lines[0].startswith("hermes: error: ") and words in lines[0], res.stderr
    assert "Traceback" not in res.stderr + res.stdout


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """One finished run (one processor, in process, no pictures), made once: the tests that only need a finished
    run directory work on copies of it (:func:`finished_at`)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    res = hermes("run", "--no-launch", "--set", "processors=1", *SMALL, "--no-pictures", "--out", out)
    assert res.returncode == 0, res.stderr
    return out


def finished_at(finished: Path, out: Path) -> Path:
    """A copy of the shared finished run at ``out`` (its symlinks as symlinks): what the run would have written."""
    shutil.copytree(finished, out, symlinks=True)
    return out


def test_a_foreign_directory_that_looks_like_a_run_is_never_touched(tmp_path):
    """A directory whose summary.json has a ``phases`` key, with other files, symlinks and subdirectories: run,
    run --force, a Brusselator spec, compare and plot all refuse it, and not a byte of it changes."""
    foreign = tmp_path / "foreign"
    (foreign / "sub").mkdir(parents=True)
    (foreign / "summary.json").write_text(json.dumps({"scenario": "x", "phases": [{"phase": 1}], "complete": True}))
    (foreign / "partition-001.png").write_bytes(b"not a picture of ours")
    (foreign / "sub" / "thesis.tex").write_text("three years of work")
    (foreign / "link").symlink_to(tmp_path)
    before = snapshot(tmp_path)
    for args in (["run", "--no-launch", "--set", "processors=1", *SMALL, "--out", foreign],
                 ["run", *SMALL, "--out", foreign, "--force"],
                 ["run", ROOT / "scenarios" / "bahi-homogeneous.yaml", "--out", foreign],
                 ["compare", "--out", foreign], ["plot", foreign]):
        res = hermes(*args)
        assert res.returncode == 2 and "hermes: error:" in res.stderr, (args, res.stderr)
        assert "launching" not in res.stdout, args
    assert snapshot(tmp_path) == before


@pytest.mark.mpi
@pytest.mark.slow
def test_axis_labels_dot_and_dotdot_stay_inside_the_experiment(tmp_path):
    """Labels ``..`` and ``.`` once made compare remove its own ``--out`` directory (on a second run) and another
    run's directory; they become safe names, and a second invocation finds its runs complete."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("beside the experiment")
    (work / "other").mkdir()
    (work / "other" / "summary.json").write_text("{}")
    for label, out in (("..", work / "exp"), (".", work / "other" / "exp")):
        axis = f"balancer=[{{label: '{label}', algorithm: none}}, {{label: x, algorithm: pcg}}]"
        args = ["compare", "--set-axis", axis, *SMALL, "--set", "processors=2", *ONE_PROCESS, "--out", out,
                "--no-report"]
        first = hermes(*args, cwd=work)
        assert first.returncode == 0, first.stdout + first.stderr
        runs = sorted(p.name for p in (out / "runs").iterdir() if p.is_dir())
        assert runs == ["_", "x"], runs
        before = snapshot(work)
        second = hermes(*args, cwd=work)
        assert second.returncode == 0, second.stdout + second.stderr
        assert second.stdout.count("complete ") == 2, second.stdout  # skipped: nothing ran, nothing was removed
        after = snapshot(work)
        assert {k: v for k, v in before.items() if "/runs/" in k and k.endswith(".json")} == \
            {k: v for k, v in after.items() if "/runs/" in k and k.endswith(".json")}
        assert (work / "keep.txt").read_text() == "beside the experiment"
        assert (work / "other" / "summary.json").read_text() == "{}"


def test_an_experiment_named_dotdot_is_refused(tmp_path):
    (tmp_path / "e.yaml").write_text("name: '..'\naxes: {seed: [1, 2]}\n")
    before = snapshot(tmp_path)
    one_line(hermes("compare", tmp_path / "e.yaml", cwd=tmp_path), "experiment: name '..' may only contain")
    assert snapshot(tmp_path) == before


@pytest.mark.mpi
@pytest.mark.slow
def test_two_runs_into_one_directory_one_is_refused_and_nothing_is_lost(tmp_path):
    """Two ``hermes run --out D`` started at the same moment: exactly one runs (its records complete), the other
    is refused in one line — before, both exited 0 and one run was lost."""
    out = tmp_path / "run"
    args = [sys.executable, "-m", "hermes", "run", "--set", "mesh.grid=30x30", "--set", "platform.capacities=homo",
            "--set", "processors=2", "--set", "adaptation.phases=25", "--no-pictures", "--out", str(out)]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env())
             for _ in range(2)]
    results = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], results
    loser = results[[p.returncode for p in procs].index(2)]
    assert "is in use by another hermes run" in loser[1] and len(loser[1].strip().splitlines()) == 1, loser
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and len(summary["phases"]) == 25
    assert read_marker(out) == "run"


def test_a_run_holding_its_directory_refuses_a_second_and_plot(tmp_path):
    """While a run writes its directory, a second run and ``hermes plot`` into it are refused; afterwards both
    work (the lock dies with its holder)."""
    out = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "hermes", "run", "--no-launch", "--set", "processors=1",
                              "--set", "mesh.grid=40x40", "--set", "platform.capacities=homo", "--set",
                              "adaptation.phases=20", "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env())
    try:
        line = first.stdout.readline()  # the set-up line: the directory is claimed by now
        assert line.startswith("hermes:"), line + first.stderr.read()
        one_line(hermes("run", "--no-launch", "--set", "processors=1", *SMALL, "--out", out, "--force"),
                 "is in use by another hermes run")
        one_line(hermes("plot", out), "is in use by another hermes run")
    finally:
        rest, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    assert json.loads((out / "summary.json").read_text())["complete"] is True
    res = hermes("plot", out, "--phase", "0", "--show", "none")
    assert res.returncode == 0, res.stderr


def test_plot_never_writes_through_a_planted_symlink(tmp_path, finished):
    """Symlinks planted at the old fixed temporary name and at every picture's name point outside; plot
    replaces the links where it draws (RUN/plots/) and the files outside stay as they were."""
    out = finished_at(finished, tmp_path / "run")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    plots = out / "plots"
    plots.mkdir()
    for where in (out, plots):
        for k in range(3):
            (where / f"partition-{k:03d}.png.tmp").symlink_to(victim)
        (where / "partition-001.png").symlink_to(victim)
        (where / "phases.png.tmp").symlink_to(victim)
    res = hermes("plot", out)
    assert res.returncode == 0, res.stderr
    assert victim.read_text() == "precious"
    assert (plots / "partition-001.png").is_file() and not (plots / "partition-001.png").is_symlink()
    assert (out / "partition-001.png").is_symlink()  # the run's own pictures are not plot's to replace


def _limit_files(nbytes: int):
    def preexec():  # runs in the child: files larger than nbytes fail with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return preexec


@pytest.fixture
def small_disk(tmp_path):
    """A 96 kB file system (tmpfs) that fills up: a real full disk. Skipped where mounting is not allowed."""
    where = tmp_path / "disk"
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(where)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.decode().strip()[:80]})")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=[pytest.mark.mpi, pytest.mark.slow])])
def test_a_full_disk_while_drawing_is_one_line_and_keeps_the_records(small_disk, ranks):
    """The run directory on a 96 kB file system: the records (a few kB) are complete, a picture does not fit
    (ENOSPC); one line, exit 2 — on every rank, agreed —, and the records stay."""
    out = small_disk / "run"
    launch = ["--no-launch", "--set", "processors=1"] if ranks == 1 else ["--set", "processors=2"]
    res = hermes("run", *launch, *SMALL, "--out", out)
    one_line(res, "cannot write the pictures in")
    assert "No space left on device" in res.stderr and "the run's records are complete" in res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and len(summary["phases"]) == 2
    assert (out / "phases.csv").read_text().count("\n") == 1 + 2 * ranks
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


def test_a_read_only_medium_is_refused_before_launching(small_disk):
    """A directory on a file system mounted read-only: one line before mpiexec starts, nothing written."""
    (small_disk / "old").mkdir()
    ro = subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], capture_output=True)
    if ro.returncode != 0:
        pytest.skip("cannot remount read-only here")
    for out in (small_disk / "old", small_disk / "new"):
        res = hermes("run", *SMALL, "--out", out)
        one_line(res, "Read-only file system")
        assert "launching" not in res.stdout


def test_a_full_disk_during_the_phases_keeps_the_finished_phases(tmp_path):
    """A limit the growing summary.json crosses after some phases (RLIMIT_FSIZE: a write beyond 12 kB fails
    with EFBIG as it fails with ENOSPC on a full disk; one rank: Open MPI's own files of a multi-rank job would
    hit the limit first): one line naming the records, exit 2, and the summary of the phases finished before is
    intact (each file is replaced atomically or not at all)."""
    out = tmp_path / "run"
    res = hermes("run", "--no-launch", "--set", "processors=1", "--set", "mesh.grid=8x6", "--set",
                 "platform.capacities=homo", "--set", "adaptation.phases=30", "--no-pictures", "--out", out,
                 preexec=_limit_files(12_000))
    one_line(res, "cannot write the records in")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and 1 <= len(summary["phases"]) < 30
    assert [p["phase"] for p in summary["phases"]] == list(range(1, len(summary["phases"]) + 1))
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_the_marker_and_lock_are_hermes_own_files(tmp_path, finished):
    doc = json.loads((finished / MARKER).read_text())
    assert doc["hermes"] == "run" and doc["name"] == "quickstart"
    assert not (finished / LOCK).exists()  # the lock's file goes with the lock: a finished run does not look held
    stamp = (finished_at(finished, tmp_path / "r") / "summary.json").stat().st_mtime_ns  # copied with its times
    t0 = time.perf_counter()
    res = hermes("run", "--no-launch", "--set", "processors=1", *SMALL, "--no-pictures", "--out", tmp_path / "r")
    assert res.returncode == 0 and time.perf_counter() - t0 < 120, res.stderr  # a finished run is replaced
    assert (tmp_path / "r" / "summary.json").stat().st_mtime_ns != stamp


# -- symlinks and nested directories inside what hermes owns (a hostile review's cases) -------------------------
@pytest.mark.mpi
@pytest.mark.slow
def test_symlinked_subdirectories_of_an_experiment_are_never_written_through(tmp_path):
    """An experiment whose ``runs/`` or ``plots/`` has become a symlink to a foreign directory: compare and
    --report refuse to write there (runs fail with one line each, the report says why), and not a byte of the
    foreign directory changes."""
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "pcg.log").write_text("mine")
    (foreign / "pcg.error.txt").write_text("mine too")
    (foreign / "total-time.png").write_bytes(b"my picture")
    exp = tmp_path / "exp"
    args = ["compare", "--set-axis", "balancer=pcg,none", *SMALL, "--set", "processors=2", *ONE_PROCESS, "--out",
            exp]
    first = hermes(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    before = snapshot(foreign)
    for sub in ("runs", "plots"):
        real = exp / f"{sub}.real"
        (exp / sub).rename(real)
        (exp / sub).symlink_to(foreign)
        res = hermes(*args) if sub == "runs" else hermes("compare", "--report", exp)
        assert "Traceback" not in res.stderr + res.stdout, res.stderr
        assert snapshot(foreign) == before, sub
        (exp / sub).unlink()
        real.rename(exp / sub)
    assert snapshot(foreign) == before


@pytest.mark.mpi
@pytest.mark.slow
def test_a_symlinked_checkpoint_directory_is_never_written_through(tmp_path):
    """A run killed after a checkpoint whose ``checkpoint/`` then points at a foreign directory: resuming
    refuses in one line; the foreign directory (holding a phase-0042 of its own) is untouched."""
    out = tmp_path / "run"
    env = {**_env(), "HERMES_FAULT": "kill:1:1"}
    res = subprocess.run([sys.executable, "-m", "hermes", "run", *SMALL, "--set", "processors=2", "--set",
                          "adaptation.phases=3", "--set", "output.checkpoint_every=1", "--no-pictures", "--out",
                          str(out)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert res.returncode != 0 and (out / "checkpoint" / "manifest.json").is_file(), res.stderr
    foreign = tmp_path / "foreign"
    (foreign / "phase-0042").mkdir(parents=True)
    (foreign / "phase-0042" / "keep").write_text("mine")
    for item in (out / "checkpoint").iterdir():
        item.rename(foreign / item.name) if not (foreign / item.name).exists() else None
    (out / "checkpoint").rmdir()
    (out / "checkpoint").symlink_to(foreign)
    before = snapshot(foreign)
    res = hermes("resume", out)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert snapshot(foreign) == before


def test_a_run_directory_holding_another_hermes_directory_is_not_replaced(tmp_path, finished):
    """A finished run with another run nested in it (running or not): a new run into the outer one is refused
    in one line, and nothing of either is removed."""
    outer = finished_at(finished, tmp_path / "outer")
    finished_at(finished, outer / "inner")
    before = snapshot(outer)
    one_line(hermes("run", "--no-launch", "--set", "processors=1", *SMALL, "--out", outer, "--force"),
             "holds another hermes directory")
    assert snapshot(outer) == before


def test_mesh_generate_never_writes_through_a_link_nor_deletes_on_failure(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("precious")
    (tmp_path / "link.vtu").symlink_to(target)
    res = hermes("mesh", "generate", "grid", "--size", "50", "--out", tmp_path / "link.vtu")
    assert res.returncode == 0, res.stderr
    assert target.read_text() == "precious" and not (tmp_path / "link.vtu").is_symlink()
    mine = tmp_path / "important.su2"  # meshio's su2 writer fails on this mesh: the file must stay
    mine.write_text("precious")
    res = hermes("mesh", "generate", "grid", "--size", "50", "--out", mine)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert mine.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["important.su2", "link.vtu", "target.txt"]


def test_plot_out_never_overwrites_a_directory_hermes_did_not_make(tmp_path, finished):
    """hermes plot --out DIR writes only into a new or empty directory or one hermes plot made (marked), like
    every directory hermes writes: a user's file of a picture's name is never replaced."""
    out = finished_at(finished, tmp_path / "run")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "phases.png").write_text("precious")
    res = hermes("plot", out, "--out", mine)
    assert res.returncode == 2 and "carries no hermes marker" in res.stderr
    assert (mine / "phases.png").read_text() == "precious"
    pics = tmp_path / "pics"
    for _ in range(2):  # a new directory, then the same again: hermes' own now
        res = hermes("plot", out, "--out", pics, "--phase", "0")
        assert res.returncode == 0, res.stderr
    assert (pics / "partition-000.png").is_file() and (pics / MARKER).is_file()
    res = hermes("plot", out, "--out", out / "plots", "--phase", "0")  # the run's own plots directory
    assert res.returncode == 0, res.stderr
    assert not (out / "plots" / MARKER).exists()


# -- the lock cannot be removed from under a run; finished directories do not look held (issue 38, class 8) -----
LONG = ["--set", "mesh.grid=40x40", "--set", "platform.capacities=homo", "--set", "adaptation.phases=60",
        "--no-pictures"]


def _running(out: Path, *args: str) -> subprocess.Popen:
    """``hermes run`` into ``out``, returned once its first phase is recorded (its job holds the lock, or has
    joined its launcher's, by then)."""
    proc = subprocess.Popen([sys.executable, "-m", "hermes", "run", *LONG, *args, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env())
    for line in proc.stdout:
        if line.startswith("phase 1/"):
            return proc
    proc.wait()
    raise AssertionError(f"the run did not start: {proc.stderr.read()}")


def _paused(out: Path, *args: str) -> subprocess.Popen:
    """:func:`_running` with ``--no-launch`` on one processor, stopped (SIGSTOP) after its first phase: it holds
    its directory's lock, however slow this machine, until :func:`_resumed`."""
    proc = _running(out, "--no-launch", "--set", "processors=1", *args)
    proc.send_signal(signal.SIGSTOP)
    return proc


def _resumed(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGCONT)
    return proc.communicate(timeout=600)


@pytest.mark.parametrize("launch", ["--no-launch", pytest.param("mpiexec", marks=[pytest.mark.mpi,
                                                                                   pytest.mark.slow])])
def test_deleting_the_lock_file_mid_run_lets_no_second_run_in(tmp_path, launch):
    """The issue's case: ``rm .hermes-lock`` while a run writes its directory, then ``hermes run --force`` into
    it. Before, both exited 0 and one overwrote the other; now the lock is the directory's (the file only names
    the holder): the second is refused in one line, the first finishes whole, and leaves no lock file. Under
    mpiexec the launcher holds the lock and the job has joined it (a longer run: a job cannot be paused whole)."""
    out = tmp_path / "run"
    if launch == "mpiexec":
        first, phases = _running(out, "--set", "processors=2", "--set", "mesh.grid=80x80", "--set",
                                 "adaptation.phases=150"), 150
    else:
        first, phases = _paused(out), 60
    try:
        (out / LOCK).unlink()
        res = hermes("run", "--no-launch", "--set", "processors=1", *SMALL, "--out", out, "--force")
        one_line(res, f"{out} is in use by another hermes run")
        assert first.poll() is None, "the first run ended before the second was tried: the test proves nothing"
    finally:
        rest, err = _resumed(first)
    assert first.returncode == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and len(summary["phases"]) == phases
    assert not (out / LOCK).exists() and read_marker(out) == "run"


def test_a_run_whose_directory_is_moved_away_never_writes_into_the_new_one(tmp_path):
    """The run directory renamed mid-run and a second run made at its name: the lock went with the directory, so
    the second runs; the first stops at its next phase in one line instead of writing its records into the
    second's directory (before, both exited 0 and the first's records replaced the second's)."""
    out = tmp_path / "run"
    first = _paused(out)
    try:
        out.rename(tmp_path / "moved")
        second = hermes("run", "--no-launch", "--set", "processors=1", *SMALL, "--no-pictures", "--out", out)
        assert second.returncode == 0, second.stderr
    finally:
        rest, err = _resumed(first)
    assert first.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"hermes: error: --out: {out} was moved or removed while this hermes process held it")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and len(summary["phases"]) == 2  # the second run's, untouched
    assert json.loads((tmp_path / "moved" / "summary.json").read_text())["complete"] is False
    assert not (out / LOCK).exists() and not (tmp_path / "moved" / LOCK).exists()


@pytest.mark.mpi
def test_a_resumed_run_leaves_no_lock_file(tmp_path):
    """A run killed (kill -9) after its first checkpoint leaves the file naming its dead holder; resuming (under
    mpiexec: the launcher holds the lock, the job joins it) is not held up by that file and leaves none."""
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "hermes", "run", "--no-launch", "--set", "processors=1", *SMALL,
                          "--set", "adaptation.phases=3", "--set", "output.checkpoint_every=1", "--no-pictures",
                          "--out", str(out)], capture_output=True, text=True, cwd=ROOT,
                         env={**_env(), "HERMES_FAULT": "kill:0:1"}, timeout=300)
    assert res.returncode == -signal.SIGKILL and (out / LOCK).is_file(), res.stderr
    res = hermes("resume", out)
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "summary.json").read_text())["complete"] is True and not (out / LOCK).exists()


def test_trace_write_claims_its_directory_and_waits_for_no_run(tmp_path, finished):
    """``hermes trace write RUN --out DIR`` writes DIR/data.<rank>.json into a new or empty directory or one it
    made (``DIR/`` is DIR; a user's non-empty directory is refused, an earlier trace replaced whole), and on a
    run in progress says it is in use (before: a misleading "no partitions.npz" and, with ``--out DIR/``, files
    written next to DIR)."""
    run = finished_at(finished, tmp_path / "done")
    res = hermes("run", "--no-launch", "--set", "processors=1", *SMALL, "--no-pictures", "--set",
                 "output.partitions=true", "--out", run)
    assert res.returncode == 0, res.stderr
    res = hermes("trace", "write", run, "--out", f"{tmp_path / 'trace'}/")
    assert res.returncode == 0 and res.stdout.strip() == f"1 rank files: {tmp_path / 'trace'}/data.<rank>.json", \
        res.stdout + res.stderr
    assert sorted(p.name for p in (tmp_path / "trace").iterdir()) == [MARKER, "data.0.json"]
    assert not (tmp_path / "trace.0.json").exists() and not (run / LOCK).exists()
    (tmp_path / "trace" / "data.7.json").write_text("{}")  # an earlier trace of more ranks: replaced whole
    assert hermes("trace", "write", run, "--out", tmp_path / "trace").returncode == 0
    assert sorted(p.name for p in (tmp_path / "trace").iterdir()) == [MARKER, "data.0.json"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    one_line(hermes("trace", "write", run, "--out", mine), "mine is not empty and carries no hermes marker")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    live = tmp_path / "live"
    first = _paused(live, "--set", "output.partitions=true")
    try:
        one_line(hermes("trace", "write", live), f"trace write: {live} is in use by another hermes run (pid "
                                                   f"{first.pid} on ")
        one_line(hermes("trace", "write", live, "--out", tmp_path / "t2"), "is in use by another hermes run")
    finally:
        _resumed(first)
    assert not (tmp_path / "t2").exists() and not (live / "lbdatafile").exists()


BAD_PATHS = {"newline": "a\nb", "escape": "x\x1b[2Jy", "carriage return": "runs/x\r", "NEL": "x\x85",
             "line separator": "x\u2028", "not UTF-8": "x\udcff", "empty": ""}


@pytest.mark.parametrize("argv", [
    ["run", "--out", "{p}"], ["resume", "{p}"], ["run", "{p}"], ["plot", "{p}"], ["plot", "R", "--out", "{p}"],
    ["compare", "--out", "{p}"], ["compare", "--report", "{p}"], ["compare", "--trace", "{p}"], ["compare", "{p}"],
    ["trace", "replay", "{p}"], ["trace", "replay", "T", "--out", "{p}"], ["trace", "info", "{p}"],
    ["trace", "write", "{p}"],
    ["trace", "write", "R", "--out", "{p}"], ["scenario", "{p}"], ["mesh", "info", "{p}"],
    ["mesh", "generate", "grid", "--out", "{p}"], ["lab", "bench", "--out", "{p}"],
    ["lab", "gossip", "--ranks", "2", "--objects", "4", "--write-trace", "{p}"],
], ids=lambda a: " ".join(a).replace("{p}", "P"))
def test_every_path_option_refuses_what_one_line_cannot_show(tmp_path, monkeypatch, capsys, argv):
    """A path holding a newline or another control character, a line separator or bytes that are not UTF-8 (or
    an empty one) is refused in one line naming the option, exit 2, whatever the command, before anything is
    read or written — before, ``--out 'a<newline>b'`` made that directory and every message naming it took two
    lines."""
    from hermes.cli import main

    monkeypatch.chdir(tmp_path)
    for what, bad in BAD_PATHS.items():
        code = main([a.replace("{p}", bad) for a in argv])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("hermes: error: ") and err.count("\n") == 1, (what, err)
        assert ("an empty path" if not bad else "holds ") in err, (what, err)
    assert list(tmp_path.iterdir()) == []


def test_an_output_directory_with_a_trailing_slash_is_that_directory(tmp_path, finished, monkeypatch, capsys):
    """``DIR/`` names DIR for every output option: run, plot, trace write and replay write into DIR (never
    DIR.<something> beside it); a trace's stem cannot be a directory (``gossip --write-trace DIR/`` would have
    written DIR.0.json beside DIR), which is one line."""
    from hermes.cli import main

    run = finished_at(finished, tmp_path / "done")
    res = hermes("run", "--no-launch", "--set", "processors=1", *SMALL, "--no-pictures", "--set",
                 "output.partitions=true", "--out", f"{tmp_path / 'fresh'}/")
    assert res.returncode == 0 and (tmp_path / "fresh" / "summary.json").is_file(), res.stderr
    for argv in (["plot", run, "--phase", "0", "--out", f"{tmp_path / 'pics'}/"],
                 ["trace", "write", tmp_path / "fresh", "--out", f"{tmp_path / 'trace'}/"]):
        res = hermes(*argv)
        assert res.returncode == 0, res.stderr
    res = hermes("replay", tmp_path / "trace" / "data", "--algorithm", "none", "--no-plot", "--out",
                 f"{tmp_path / 'replayed'}/")
    assert res.returncode == 0 and (tmp_path / "replayed" / "replay.csv").is_file(), res.stderr
    (tmp_path / "gossip").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["lab", "gossip", "--ranks", "2", "--objects", "4", "--write-trace", "gossip/"]) == 2
    assert capsys.readouterr().err.startswith("hermes: error: --write-trace: 'gossip/' names a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done", "fresh", "gossip", "pics", "replayed", "trace"]
    assert list((tmp_path / "gossip").iterdir()) == []
