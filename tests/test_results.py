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
                                          r"checkpoint at phase 2\): resume it with 'hermes resume "):
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
    fd = os.open(d, os.O_RDONLY)  # the first run's lock (on the directory, its holder named in LOCK), no marker yet
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        (d / LOCK).write_text(json.dumps({"pid": 4242, "host": "h", "token": "t"}))
        (d / ".hermes-probe-x1y2z3w4").write_text("")
        for call in (check_run_dir, claim_dir):  # one message whichever check finds the lock (CI saw two)
            with pytest.raises(RunDirError, match=r"^--out: .*run is in use by another hermes run \(pid 4242 on h\): "
                                                  r"wait for it to end"):
                call(d, "--out")
        # a lock that names its holder's kind: an experiment claiming the directory
        (d / LOCK).write_text(json.dumps({"pid": 4242, "host": "h", "what": "experiment", "token": "t"}))
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


# -- the lock is the directory's, not its file's (issue 38, class 8) -------------------------------------------
def _other_process_claims(path, *extra: str):
    """``claim_dir(path)`` in another Python process: its one line (or ``claimed``) and exit status."""
    import subprocess
    import sys

    code = ("import sys\nfrom hermes.claims import claim_dir\nfrom hermes.errors import HermesError\n"
            "try:\n    claim_dir(sys.argv[1], force=True).release()\n    print('claimed')\n"
            "except HermesError as err:\n    print(err)\n    sys.exit(2)\n")
    res = subprocess.run([sys.executable, "-c", code, str(path), *extra], capture_output=True, text=True, timeout=60)
    return res.stdout.strip(), res.returncode


def test_deleting_or_replacing_the_lock_file_releases_nothing(tmp_path):
    """The lock is ``flock`` on the directory's own descriptor: deleting LOCK (or writing another holder into it)
    leaves the directory locked — another process claiming it with --force is refused in one line. Before, the
    lock was the file's, and deleting it let a second run share the directory."""
    d = tmp_path / "run"
    lock = claim_dir(d, name="first")
    (d / "summary.json").write_text(json.dumps({"complete": False, "phases": [{}]}))  # an unfinished run
    try:
        (d / LOCK).unlink()
        line, code = _other_process_claims(d)
        assert code == 2 and line.startswith(f"--out: {d} is in use by another hermes run"), line
        (d / LOCK).write_text(json.dumps({"pid": 1, "host": "h", "token": "forged"}))
        line, code = _other_process_claims(d)
        assert code == 2 and "is in use by another hermes run (pid 1 on h)" in line, line
        with pytest.raises(RunDirError, match="in use"):  # in this process too (another open file)
            check_run_dir(d, force=True)
    finally:
        lock.release()
    assert _other_process_claims(d) == ("claimed", 0)


def test_a_released_directory_carries_no_lock_file(tmp_path):
    """The holder's LOCK file goes with the lock: a finished directory does not look held; a LOCK left by a holder
    that was killed is ignored (its lock died with it) and replaced."""
    d = tmp_path / "run"
    lock = claim_dir(d)
    assert (d / LOCK).is_file() and json.loads((d / LOCK).read_text())["pid"] == os.getpid()
    assert stat.S_IMODE((d / LOCK).stat().st_mode) == 0o600  # it holds the token
    (d / "summary.json").write_text("{}")
    lock.release(remove_if_unused=True)
    assert sorted(p.name for p in d.iterdir()) == [MARKER, "summary.json"]
    (d / LOCK).write_text(json.dumps({"pid": 4242, "host": "h", "token": "stale"}))  # a killed holder's
    assert check_run_dir(d) == d
    lock = claim_dir(d)
    assert json.loads((d / LOCK).read_text())["token"] == lock.token
    lock.release()
    assert not (d / LOCK).exists()


def test_a_joined_lock_does_not_need_the_lock_file(tmp_path):
    """The job joined its launcher's lock by the token in LOCK; once joined, the file deleted changes nothing
    for it (the process knows the directory by its inode), and a forged token still cannot join."""
    d = tmp_path / "run"
    lock = claim_dir(d)
    joined = claim_dir(d, token=lock.token)
    (d / LOCK).unlink()
    assert check_run_dir(d, token=lock.token) == d and open_run_dir(d, token=lock.token) == d
    with pytest.raises(RunDirError, match="in use"):
        claim_dir(d, token="0" * 32)
    joined.release()
    lock.refresh()  # the holder writes its file again (what hermes compare does before each of its runs)
    assert json.loads((d / LOCK).read_text())["token"] == lock.token
    lock.release()
    assert not (d / LOCK).exists()


def test_a_run_directory_moved_away_is_never_written_under_its_old_name(tmp_path):
    """The directory renamed while held, and a new one made at its name (a second run): the holder's writes stop
    with one line instead of going into the new directory; releasing removes the lock file of the moved one."""
    from hermes.claims import confirm
    from hermes.errors import HermesError
    from hermes.lifecycle.directory import write_records

    d = tmp_path / "run"
    lock = claim_dir(d)
    write_records(d, {"complete": False, "phases": []}, [], ["phase"])
    d.rename(tmp_path / "moved")
    d.mkdir()
    (d / "theirs.txt").write_text("keep")
    with pytest.raises(HermesError, match=r"^--out: .*/run was moved or removed while this hermes process held it"):
        confirm(d)
    with pytest.raises(HermesError, match="was moved or removed"):
        write_records(d, {"complete": False, "phases": []}, [], ["phase"])
    assert sorted(p.name for p in d.iterdir()) == ["theirs.txt"]
    lock.release(remove_if_unused=True)
    assert not (tmp_path / "moved" / LOCK).exists() and (tmp_path / "moved" / "summary.json").is_file()
    assert sorted(p.name for p in d.iterdir()) == ["theirs.txt"]


def test_a_directory_renamed_between_the_check_and_the_write_gets_the_write(tmp_path):
    """The window the check alone left open (CI stopped a run there): the directory is checked and opened, then
    renamed and another made at its name before the files are written. Written through the opened directory,
    they land in the renamed one (the holder's own), none in the new one; the next check stops the holder."""
    from hermes.claims import opened
    from hermes.errors import HermesError

    d = tmp_path / "run"
    lock = claim_dir(d)
    with opened(d) as fd:
        d.rename(tmp_path / "moved")
        d.mkdir()
        write_json(d / "summary.json", {"complete": False}, dir_fd=fd)
        write_csv(d / "phases.csv", [{"phase": 1}], dir_fd=fd)
        write_atomic(d / "scenario.yaml", "name: x\n", dir_fd=fd)
    assert list(d.iterdir()) == []
    moved = tmp_path / "moved"
    assert json.loads((moved / "summary.json").read_text()) == {"complete": False}
    assert (moved / "phases.csv").read_text() == "phase\n1\n" and not list(moved.glob(".*.tmp"))
    assert stat.S_IMODE((moved / "summary.json").stat().st_mode) == file_mode()
    with pytest.raises(HermesError, match="was moved or removed"):
        with opened(d):
            pass
    d.rmdir()
    with pytest.raises(HermesError, match="was moved or removed"):  # nothing at the name at all
        with opened(d):
            pass
    lock.release()


@pytest.mark.parametrize("value, message", [
    ("a\nb", "the control character U+000A at position 2"),
    ("runs/\x1b[31mred", "the control character U+001B at position 6"),
    ("x\x85", "the control character U+0085"),
    ("x\u2028y", "the line separator U+2028"),
    ("a\udcffb", "a byte that is not UTF-8 at position 2"),
    ("a\0b", "a NUL byte"),
    ("", "an empty path"),
])
def test_a_path_that_cannot_be_shown_on_one_line_is_refused(tmp_path, monkeypatch, value, message):
    """One function (check_path) for every path the user gives; every claim of a directory passes through it."""
    import re

    from hermes.files import check_path

    with pytest.raises(RunDirError, match="^--out: .*" + re.escape(message)) as err:
        check_path(value, "--out")
    assert len(str(err.value).splitlines()) == 1
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunDirError, match="^--out: .*" + re.escape(message)):
        claim_dir(value)
    assert sorted(os.listdir(tmp_path)) == []
    assert check_path("out/", "--out") == check_path("out", "--out") and str(check_path("-x", "--out")) == "-x"
