"""A refined run's partition pictures are drawn while its phases run (hermes.viz.ahead), and they are the pictures a
drawing at the end makes; a worker that cannot draw leaves its pictures to the end, and nothing of the hand-over
stays in the run directory."""

from __future__ import annotations

import csv
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hermes.viz.ahead import DIR, DrawAhead

ROOT = Path(__file__).resolve().parents[2]
HERMES = [sys.executable, "-m", "hermes"]


@pytest.fixture(scope="module")
def refined_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One refined run of 3 phases (launched, its pictures drawn while the phases run), made once: the tests
    read it and write elsewhere."""
    run = tmp_path_factory.mktemp("ahead") / "run"
    done = subprocess.run([*HERMES, "run", str(ROOT / "scenarios/refine-lshape.yaml"), "--out", str(run),
                           "--set", "adaptation.phases=3", "--set", "output.vtu=false"],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    return run, done


@pytest.mark.slow
@pytest.mark.mpi
def test_a_refined_run_draws_its_pictures_while_the_phases_run_and_they_equal_hermes_plot(tmp_path, refined_run):
    run, done = refined_run
    assert done.returncode == 0, done.stderr
    ahead = [line for line in done.stdout.splitlines() if "partition pictures while the phases ran" in line]
    assert ahead and int(ahead[0].split()[1]) >= 1, done.stdout  # the worker drew some before the end
    assert not (run / DIR).exists()
    again = tmp_path / "again"
    plotted = subprocess.run([*HERMES, "plot", str(run), "--out", str(again)], capture_output=True, text=True,
                             timeout=300, stdin=subprocess.DEVNULL)
    assert plotted.returncode == 0, plotted.stderr
    names = sorted(p.name for p in run.glob("partition-*.png"))
    assert names == [f"partition-{k:03d}.png" for k in range(4)]
    for name in names + ["phases.png"]:
        assert (run / name).read_bytes() == (again / name).read_bytes(), name


@pytest.mark.slow
@pytest.mark.mpi
def test_the_run_takes_over_the_pictures_the_worker_has_not_started(tmp_path, refined_run):
    """At the end the run's process draws, from the last back, the phases the worker has not claimed: each
    picture is drawn once, by one of them, and is the picture hermes plot draws."""
    import shutil

    from hermes.viz import plot_run
    from hermes.viz.rundir import NpzArchive

    run, done = refined_run  # its data; the pictures compared are drawn here, from them
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    out.mkdir()
    for name in ("summary.json", "phases.csv", "scenario.yaml"):
        shutil.copy(run / name, out / name)
    with NpzArchive(run / "geometry.npz") as g, NpzArchive(run / "partitions.npz") as p:
        geometry = {k: g.get(k) for k in g.names}
        partitions = {k: p.get(k) for k in p.names}
    base = {k: v for k, v in geometry.items() if not k[-4:-3] == "_" or not k[-3:].isdigit()}
    summary = json.loads((run / "summary.json").read_text())
    with open(run / "phases.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows, columns = list(reader), list(reader.fieldnames or [])
    ahead = DrawAhead(out, base)
    ahead.submit([0, 1, 2, 3], geometry, partitions, summary, rows, columns)
    here = ahead.take_over()  # the worker is still importing matplotlib: it has started at most the first
    there = ahead.finish()
    assert sorted(here + there) == [0, 1, 2, 3] and not set(here) & set(there), (here, there)
    assert here and here == sorted(here, reverse=True) and min(here) > max(there, default=-1)
    assert not (out / DIR).exists()
    again = plot_run(run, out_dir=tmp_path / "again", timeline=False)
    for pic in again:
        assert (out / pic.name).read_bytes() == pic.read_bytes(), pic.name


def test_a_worker_that_cannot_draw_leaves_the_pictures_to_the_end(tmp_path, caplog):
    """A phase handed over without coordinates: the worker reports it and goes on; finish() says which phases
    were drawn (none), warns, ends the worker and removes the hand-over directory."""
    out = tmp_path / "run"
    out.mkdir()
    ahead = DrawAhead(out, {"xadj": np.zeros(1, dtype=np.int64), "adjncy": np.zeros(0, dtype=np.int64)})
    ahead.submit([2], {}, {"owner_002": np.zeros(3, dtype=np.int32)}, {"phases": []}, [], ["phase"])
    assert (out / DIR / "phase-002" / "partitions.npz").is_file()
    with caplog.at_level(logging.WARNING, logger="hermes.viz.ahead"):
        assert ahead.finish() == []
    assert "drew 0 of 1 pictures" in caplog.text
    assert not (out / DIR).exists()
    assert not list(out.glob("partition-*.png"))
    assert ahead.proc is not None and ahead.proc.returncode is not None


def test_a_failed_hand_over_is_a_warning_and_removes_what_it_wrote(tmp_path, caplog):
    """Rank 0 alone hands over: an error there must not raise (the other ranks would wait for it)."""
    out = tmp_path / "run"
    out.mkdir()
    ahead = DrawAhead(out, {"coords": np.zeros((2, 2))})
    with caplog.at_level(logging.WARNING, logger="hermes.viz.ahead"):
        ahead.submit([1], {}, {}, {"bad": object()}, [], [])  # summary.json cannot hold an object
    assert ahead.broken and "drawn at the end" in caplog.text
    assert not (out / DIR).exists()
    ahead.submit([2], {}, {}, {}, [], [])  # a broken hand-over takes nothing more
    assert ahead.sent == [] and ahead.finish() == []
