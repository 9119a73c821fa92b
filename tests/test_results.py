"""Result files and run directories: the umask's modes, what happens to an existing directory, where a run
directory is."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from hermes.claims import DEFAULT_KEY, LOCK, DirLock, MARKER, check_run_dir, claim_dir, read_marker, write_marker
from hermes.files import (RunDirError, file_mode, read_summary, safe_name, slug, write_atomic, write_csv, write_json,
                          write_npz)
from hermes.lifecycle.directory import open_run_dir, run_dir_for
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


def _run(path, *, complete=True, phases=2, checkpoint=None, marker=True):
    """A fake hermes run directory (``complete`` None: a summary of an earlier version, without the flag;
    ``marker`` "legacy": the text marker of earlier versions)."""
    path.mkdir(parents=True)
    summary = {"scenario": "x", "phases": [{"phase": k + 1} for k in range(phases)]}
    if complete is not None:
        summary.update(complete=complete, checkpoint=checkpoint)
    (path / "summary.json").write_text(json.dumps(summary))
    if marker == "legacy":
        (path / MARKER).write_text("a hermes run directory: 'hermes run --out' replaces it when the run is finished\n")
    elif marker:
        write_marker(path, "run")
    (path / "partition-003.png").write_bytes(b"png")
    (path / "vtu").mkdir()
    (path / "vtu" / "phase-004.vtu").write_text("<VTKFile/>")
    return path


def _left(path):
    return sorted(p.name for p in path.iterdir() if p.name != LOCK)


def test_absent_and_empty_directories_are_used(tmp_path):
    assert check_run_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b" and not (tmp_path / "a").exists()
    out = open_run_dir(tmp_path / "a" / "b")
    assert out.is_dir() and _left(out) == [MARKER] and read_marker(out) == "run"
    (tmp_path / "empty").mkdir()
    assert open_run_dir(tmp_path / "empty") == tmp_path / "empty"


@pytest.mark.parametrize("complete, marker", [(True, True), (None, "legacy"), (True, "legacy")])
def test_a_finished_run_is_replaced_wholesale(tmp_path, complete, marker):
    old = _run(tmp_path / "r", complete=complete, marker=marker)
    out = open_run_dir(old, "--out")
    assert _left(out) == [MARKER]  # no picture or VTU file of the old run stays


def test_an_unfinished_run_is_kept_unless_forced(tmp_path):
    run = _run(tmp_path / "r", complete=False, phases=3, checkpoint=2)
    with pytest.raises(RunDirError, match=r"^--out: .* holds an unfinished hermes run \(3 phases recorded, a "
                                          r"checkpoint at phase 2\): resume it with 'hermes run --resume "):
        open_run_dir(run, "--out")
    assert (run / "vtu" / "phase-004.vtu").exists()
    plain = _run(tmp_path / "p", complete=False, phases=1)
    with pytest.raises(RunDirError, match=r"\(1 phase recorded\): replace it with --force or choose another"):
        check_run_dir(plain, "output.dir")
    assert _left(open_run_dir(run, "--out", force=True)) == [MARKER]
    # an unfinished run that recorded nothing (it failed during the set-up) is replaced without --force
    empty = _run(tmp_path / "e", complete=False, phases=0)
    assert _left(open_run_dir(empty)) == [MARKER]


@pytest.mark.parametrize("planted", ["nothing", "summary", "forged marker", "marker symlink", "experiment"])
def test_a_directory_hermes_did_not_mark_is_refused_whatever_it_holds(tmp_path, planted):
    """Only hermes' own marker makes a directory hermes' — not a summary.json that looks like a run's (with a
    ``phases`` key), not a marker file another program wrote, not a symlink to hermes' marker elsewhere, not
    a marker of the other kind."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    if planted == "summary":
        (mine / "summary.json").write_text('{"scenario": "x", "phases": [], "complete": true}')
    elif planted == "forged marker":
        (mine / MARKER).write_text("hermes")
    elif planted == "marker symlink":
        elsewhere = _run(tmp_path / "real", marker=True)
        (mine / MARKER).symlink_to(elsewhere / MARKER)
    elif planted == "experiment":
        write_marker(mine, "experiment")
    before = {p.name: p.read_bytes() if p.is_file() else None for p in mine.iterdir()}
    for force in (False, True):
        with pytest.raises(RunDirError, match=r"^--out: .*mine is (not empty and carries no hermes marker|a hermes "
                                              r"experiment directory, not a run directory)"):
            open_run_dir(mine, force=force)
        with pytest.raises(RunDirError):
            claim_dir(mine, force=force)
    assert {p.name: p.read_bytes() if p.is_file() else None for p in mine.iterdir()} == before


def test_other_files_are_refused(tmp_path):
    afile = tmp_path / "f"
    afile.write_text("x")
    with pytest.raises(RunDirError, match=r"^output.dir: .*/f exists and is not a directory$"):
        check_run_dir(afile, "output.dir")
    with pytest.raises(RunDirError, match=r"^--out: .*/f is not a directory \(cannot create .*/f/a/b in it\)$"):
        check_run_dir(afile / "a" / "b")
    with pytest.raises(RunDirError, match="NUL byte"):
        check_run_dir(tmp_path / "a\0b")


def test_clearing_never_follows_a_symlink_out_of_the_directory(tmp_path):
    """A symlink planted in a run directory (to a file, to a directory) is removed; what it points to stays."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    run = _run(tmp_path / "r")
    (run / "link-dir").symlink_to(outside)
    (run / "link-file").symlink_to(outside / "precious.txt")
    (run / "vtu" / "deep-link").symlink_to(outside)
    assert _left(open_run_dir(run)) == [MARKER]
    assert (outside / "precious.txt").read_text() == "keep"


def test_a_locked_directory_is_refused_and_the_lock_is_handed_over_by_token(tmp_path):
    """The lock of a run directory refuses a second run while the first holds it (another process here: a
    flock taken by another open file, as a second ``hermes run`` would take it); the token of the holder lets
    its own job in; released, the directory is free again, and one that nothing was written in is removed."""
    d = tmp_path / "run"
    lock = claim_dir(d, "--out", name="first")
    assert read_marker(d) == "run" and (d / LOCK).is_file()
    with pytest.raises(RunDirError, match=r"^--out: .*run is in use by another hermes run \(pid \d+ on "):
        claim_dir(d, "--out")
    with pytest.raises(RunDirError, match="in use"):
        check_run_dir(d, "--out")
    joined = claim_dir(d, "--out", token=lock.token)  # the launcher's job, with the token it was given
    assert joined.fd is None and check_run_dir(d, token=lock.token) == d
    with pytest.raises(RunDirError, match="in use"):
        claim_dir(d, "--out", token="another-token")
    joined.release()
    lock.release(remove_if_unused=True)
    assert not d.exists()  # created by the lock, nothing written: removed
    kept = claim_dir(d)
    (d / "summary.json").write_text("{}")
    kept.release(remove_if_unused=True)
    assert d.is_dir() and (d / "summary.json").exists()


def test_a_directory_being_claimed_is_in_use_not_foreign(tmp_path):
    """Between another run's lock and its marker (its writability probe or the marker's temporary file in the
    directory), a second run is told the directory is in use, not that it is someone else's directory."""
    import fcntl

    d = tmp_path / "run"
    d.mkdir()
    fd = os.open(d / LOCK, os.O_RDWR | os.O_CREAT, 0o600)  # the first run's lock, not yet its marker
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, json.dumps({"pid": 4242, "host": "h", "token": "t"}).encode())
        (d / ".hermes-probe-x1y2z3w4").write_text("")
        for call in (check_run_dir, claim_dir):  # one message whichever check finds the lock (CI saw two)
            with pytest.raises(RunDirError, match=r"^--out: .*run is in use by another hermes run \(pid 4242 on h\): "
                                                  r"wait for it to end"):
                call(d, "--out")
        os.ftruncate(fd, 0)  # a lock that names its holder's kind: an experiment claiming the directory
        os.pwrite(fd, json.dumps({"pid": 4242, "host": "h", "what": "experiment", "token": "t"}).encode(), 0)
        for call in (check_run_dir, claim_dir):
            with pytest.raises(RunDirError, match=r"in use by another hermes experiment \(pid 4242 on h\)"):
                call(d, "--out")
        (d / ".hermes-probe-x1y2z3w4").unlink()  # the empty directory (only the lock): the same message
        with pytest.raises(RunDirError, match=r"in use by another hermes experiment \(pid 4242 on h\)"):
            check_run_dir(d, "--out")
    finally:
        os.close(fd)
    # the lock released and still no marker: a directory hermes did not make
    (d / "notes.txt").write_text("")
    with pytest.raises(RunDirError, match="carries no hermes marker"):
        check_run_dir(d, "--out")


def test_the_claimer_ignores_another_claimers_probe(tmp_path):
    """The run holding the lock checks its directory again before it writes its marker; a second run probing
    the same directory at that moment (its ``.hermes-probe-`` file) or a marker's temporary file must not make
    the directory look foreign to the holder — else both runs fail (the race CI's two-runs test can hit)."""
    d = tmp_path / "run"
    d.mkdir()
    lock = DirLock.acquire(d, "--out")
    try:
        (d / ".hermes-probe-abc12_yz").write_text("")
        (d / f".{MARKER}.x1y2z3w4.tmp").write_text("")  # write_atomic's temporary name
        assert check_run_dir(d, "--out", token=lock.token) == d
        (d / ".hermes-probe-mine.txt").write_text("")  # a user's file that merely starts alike is foreign
        with pytest.raises(RunDirError, match="carries no hermes marker"):
            check_run_dir(d, "--out", token=lock.token)
        (d / ".hermes-probe-mine.txt").unlink()
        (d / "notes.txt").write_text("")  # a file of someone else's still is foreign
        with pytest.raises(RunDirError, match="carries no hermes marker"):
            check_run_dir(d, "--out", token=lock.token)
    finally:
        lock.release()


def test_the_lock_ends_with_its_process(tmp_path):
    """A holder killed with SIGKILL leaves no stale lock (the kernel releases a flock with its process)."""
    import subprocess
    import sys

    d = tmp_path / "run"
    code = ("import sys, time; from hermes.claims import claim_dir; claim_dir(sys.argv[1]); print('held', "
            "flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(d)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(RunDirError, match="in use"):
            claim_dir(d)
    finally:
        proc.kill()
        proc.wait()
    claim_dir(d).release()


@pytest.mark.parametrize("name", [".", "..", "", "a/b", "../x", "a\0b", "-x", ".hidden", "x" * 201, "a b", 7, None])
def test_unsafe_names_are_refused(name):
    with pytest.raises(RunDirError, match="not a safe file name"):
        safe_name(name, "label")


@pytest.mark.parametrize("label", [".", "..", "...", "../..", "a/../b", "/", "\0", "-", " . ", ".hidden", "ok"])
def test_labels_become_safe_names(label):
    s = slug(label)
    assert safe_name(s, "x") == s and s not in (".", "..") and "/" not in s


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
    assert run_dir_for(sc.output, sc.name, sc.resolve) == (base / "results" / "x", "output.dir")
    assert run_dir_for(sc.output, sc.name, sc.resolve, "here") == (type(base)("here"), "--out")
    sc = parse_scenario({**QUICKSTART, "output": {"dir": str(tmp_path / "abs")}}, base_dir=base)
    assert run_dir_for(sc.output, sc.name, sc.resolve)[0] == tmp_path / "abs"
    quick = parse_scenario(QUICKSTART)
    path, key = run_dir_for(quick.output, quick.name, quick.resolve)
    assert key == "run directory" and path.parent.name == "runs" and path.name.startswith("quickstart-")


def test_read_summary_accepts_only_hermes_summaries(tmp_path):
    assert read_summary(tmp_path) is None
    (tmp_path / "summary.json").write_text("[1, 2]")
    assert read_summary(tmp_path) is None
    (tmp_path / "summary.json").write_text('{"phases": []}')
    assert read_summary(tmp_path) == {"phases": []}


def test_the_default_run_directory_is_always_a_new_one(tmp_path):
    """Runs started in the same second share runs/<name>-<timestamp>: each gets its own (-2, -3, ...) instead of
    replacing the one before."""
    base = tmp_path / "runs" / "x-20260101-000000"
    locks = [claim_dir(base, DEFAULT_KEY) for _ in range(3)]
    assert [lk.path.name for lk in locks] == ["x-20260101-000000", "x-20260101-000000-2", "x-20260101-000000-3"]
    for lk in locks:
        lk.release()


def test_subdirectories_are_real_directories_of_the_owner(tmp_path):
    from hermes.claims import subdir
    from hermes.errors import OutputError

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "own").mkdir()
    assert subdir(tmp_path / "own", "a", "b") == tmp_path / "own" / "a" / "b"
    (tmp_path / "own" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputError, match="link is a symlink"):
        subdir(tmp_path / "own", "link", "c")
    assert not (tmp_path / "elsewhere" / "c").exists()
    with pytest.raises(RunDirError, match="not a safe file name"):
        subdir(tmp_path / "own", "..")
