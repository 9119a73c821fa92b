"""Result files and run directories: the umask's modes, what happens to an existing directory, where a run
directory is."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from hermes.results import (
    MARKER,
    RunDirError,
    check_run_dir,
    file_mode,
    open_run_dir,
    read_summary,
    run_dir_for,
    write_atomic,
    write_csv,
    write_json,
    write_npz,
)
from hermes.scenario import QUICKSTART, parse_scenario


@pytest.fixture
def umask():
    """Set the process umask for one test (restored after)."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0o002])
def test_result_files_get_the_mode_of_the_umask(tmp_path, umask, mask):
    umask(mask)
    assert file_mode() == 0o666 & ~mask
    paths = [write_atomic(tmp_path / "a.txt", "x"), write_json(tmp_path / "s.json", {"a": 1}),
             write_csv(tmp_path / "p.csv", [{"a": 1.5}]), write_npz(tmp_path / "z.npz", a=np.arange(3))]
    for p in paths:
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~mask, p
    assert not list(tmp_path.glob(".*.tmp"))


def test_vtu_files_get_the_mode_of_the_umask(tmp_path, umask):
    import meshio

    from hermes.viz.vtu import write_vtu

    umask(0o027)
    mesh = meshio.Mesh(np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]]), [("triangle", np.array([[0, 1, 2]]))])
    assert stat.S_IMODE(write_vtu(tmp_path / "m.vtu", mesh).stat().st_mode) == 0o640


def _run(path, *, complete: bool | None = True, phases: int = 2, checkpoint: int | None = None, marker=True):
    """A fake hermes run directory (``complete`` None: a summary of an earlier version, without the flag)."""
    path.mkdir(parents=True)
    summary = {"scenario": "x", "phases": [{"phase": k + 1} for k in range(phases)]}
    if complete is not None:
        summary.update(complete=complete, checkpoint=checkpoint)
    (path / "summary.json").write_text(json.dumps(summary))
    if marker:
        (path / MARKER).write_text("hermes")
    (path / "partition-003.png").write_bytes(b"png")
    (path / "vtu").mkdir()
    (path / "vtu" / "phase-004.vtu").write_text("<VTKFile/>")
    return path


def test_absent_and_empty_directories_are_used(tmp_path):
    assert check_run_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b" and not (tmp_path / "a").exists()
    out = open_run_dir(tmp_path / "a" / "b")
    assert out.is_dir() and [p.name for p in out.iterdir()] == [MARKER]
    (tmp_path / "empty").mkdir()
    assert open_run_dir(tmp_path / "empty") == tmp_path / "empty"


@pytest.mark.parametrize("complete, marker", [(True, True), (None, False), (True, False)])
def test_a_finished_run_is_replaced_wholesale(tmp_path, complete, marker):
    old = _run(tmp_path / "r", complete=complete, marker=marker)
    out = open_run_dir(old, "--out")
    assert sorted(p.name for p in out.iterdir()) == [MARKER]  # no picture or VTU file of the old run stays


def test_an_unfinished_run_is_kept_unless_forced(tmp_path):
    run = _run(tmp_path / "r", complete=False, phases=3, checkpoint=2)
    with pytest.raises(RunDirError, match=r"^--out: .* holds an unfinished hermes run \(3 phases recorded, a "
                                          r"checkpoint at phase 2\): resume it with 'hermes run --resume "):
        open_run_dir(run, "--out")
    assert (run / "vtu" / "phase-004.vtu").exists()
    plain = _run(tmp_path / "p", complete=False, phases=1)
    with pytest.raises(RunDirError, match=r"\(1 phase recorded\): replace it with --force or choose another"):
        check_run_dir(plain, "output.dir")
    assert sorted(p.name for p in open_run_dir(run, "--out", force=True).iterdir()) == [MARKER]
    # an unfinished run that recorded nothing (it failed during the set-up) is replaced without --force
    empty = _run(tmp_path / "e", complete=False, phases=0)
    assert sorted(p.name for p in open_run_dir(empty).iterdir()) == [MARKER]


def test_other_directories_and_files_are_refused(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    (mine / "summary.json").write_text('{"not": "hermes"}')
    for force in (False, True):
        with pytest.raises(RunDirError, match=r"^--out: .*mine is not empty and holds no hermes run"):
            open_run_dir(mine, force=force)
    assert (mine / "notes.txt").read_text() == "keep"
    afile = tmp_path / "f"
    afile.write_text("x")
    with pytest.raises(RunDirError, match=r"^output.dir: .*/f exists and is not a directory$"):
        check_run_dir(afile, "output.dir")
    with pytest.raises(RunDirError, match=r"^--out: .*/f is not a directory \(cannot create .*/f/a/b in it\)$"):
        check_run_dir(afile / "a" / "b")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only directory")
def test_a_read_only_directory_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        for path in (ro, ro / "new"):
            with pytest.raises(RunDirError, match=r"^--out: cannot write in .*ro \(Permission denied\)$"):
                check_run_dir(path)
    finally:
        ro.chmod(0o755)


def test_where_the_run_directory_is(tmp_path):
    base = tmp_path / "study"
    sc = parse_scenario({**QUICKSTART, "output": {"dir": "results/x"}}, base_dir=base)
    assert run_dir_for(sc) == (base / "results" / "x", "output.dir")
    assert run_dir_for(sc, "here") == (type(base)("here"), "--out")
    sc = parse_scenario({**QUICKSTART, "output": {"dir": str(tmp_path / "abs")}}, base_dir=base)
    assert run_dir_for(sc)[0] == tmp_path / "abs"
    path, key = run_dir_for(parse_scenario(QUICKSTART))
    assert key == "run directory" and path.parent.name == "runs" and path.name.startswith("quickstart-")


def test_read_summary_accepts_only_hermes_summaries(tmp_path):
    assert read_summary(tmp_path) is None
    (tmp_path / "summary.json").write_text("[1, 2]")
    assert read_summary(tmp_path) is None
    (tmp_path / "summary.json").write_text('{"phases": []}')
    assert read_summary(tmp_path) == {"phases": []}
