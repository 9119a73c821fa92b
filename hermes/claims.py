"""The directories hermes owns: markers, locks and claims.

A directory is marked as hermes' by :data:`MARKER`; :func:`claim_dir` takes its lock (:class:`DirLock`), and
:func:`check_run_dir` (and, for a run after its set-up, :func:`hermes.lifecycle.directory.open_run_dir`) decide
what happens to an existing directory (docs/RUNNING.md, "What a run writes"): a non-empty directory that is not
a hermes run is refused, a finished hermes run is replaced wholesale, an unfinished one (records of finished
phases, perhaps a checkpoint to resume from) is refused unless ``force``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any

from hermes.errors import HermesError, OutputError
from hermes.files import RunDirError, output_error, read_summary, safe_name, write_atomic

__all__ = ["MARKER", "LOCK", "KINDS", "DEFAULT_KEY", "EXPERIMENT_TOKEN", "read_marker", "write_marker",
           "marker_name", "DirLock", "check_run_dir", "subdir", "claim_dir", "clear_dir"]

#: the file that marks a directory as hermes' (a run or an experiment; :func:`read_marker`)
MARKER = ".hermes-run"
#: the lock file of a hermes directory (:class:`DirLock`)
LOCK = ".hermes-lock"
#: the key of the default run directory (:func:`hermes.lifecycle.directory.run_dir_for`): claimed new, never
#: reused (:func:`claim_dir`)
DEFAULT_KEY = "run directory"


def _exists(path: Path) -> bool:
    try:
        return path.exists() or path.is_symlink()
    except (OSError, ValueError):
        return False


#: the kinds of directories hermes makes: a run (``hermes run``), an experiment (``hermes compare``), the
#: figure families of ``hermes flow-bench``, a trace's replay (``hermes replay``) and an experiment on a trace
#: (``hermes compare --trace``)
KINDS = ("run", "experiment", "flow-bench", "replay", "trace-experiment", "plots")
#: the environment variable through which hermes compare lets its own runs into its locked experiment
EXPERIMENT_TOKEN = "HERMES_EXPERIMENT_TOKEN"
#: the legacy marker's text (hermes 0.1 before the JSON marker)
_LEGACY = "a hermes run directory"


def _read_small(path: Path) -> str | None:
    """The first 4 kB of the regular file ``path`` as text (None: missing, a symlink, not a file, not UTF-8)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_marker(path: str | Path) -> str | None:
    """The kind of hermes directory ``path`` is (``run`` or ``experiment``) by its :data:`MARKER`, or None: no
    marker, a marker that is not a regular file (a symlink), or one hermes did not write."""
    text = _read_small(Path(path) / MARKER)
    if text is None:
        return None
    if text.startswith(_LEGACY):
        return "run"
    kind = _small_json(text).get("hermes")
    return kind if kind in KINDS else None


def marker_name(path: Path) -> str | None:
    name = _small_json(_read_small(path / MARKER) or "").get("name")
    return name if isinstance(name, str) else None


def write_marker(path: Path, kind: str, name: str | None = None) -> None:
    """Mark ``path`` as a hermes directory of ``kind`` (:data:`KINDS`)."""
    from hermes.version import __version__

    doc = {"hermes": kind, "name": name, "version": __version__,
           "note": f"a hermes {kind} directory: hermes replaces or deletes only directories that carry this file"}
    write_atomic(path / MARKER, json.dumps(doc, indent=1) + "\n")


class DirLock:
    """An exclusive lock on a hermes directory (``flock`` on its :data:`LOCK` file), held for the life of a run
    or an experiment: a second run into the same directory is refused while it is held. The kernel releases it
    when the holder dies, however it dies.

    A launcher that holds the lock hands it to its MPI job with :attr:`token`: the job's rank 0 finds the lock
    held and the file naming that token, and goes on under the launcher's lock.
    """

    def __init__(self, path: Path, fd: int | None, token: str, created: bool):
        self.path, self.fd, self.token, self.created = path, fd, token, created

    @classmethod
    def acquire(cls, path: str | Path, key: str, *, token: str | None = None, what: str = "run",
                created: bool = False) -> DirLock:
        """Lock the directory ``path`` (which exists) or join the lock its launcher holds with ``token``.

        Raises
        ------
        RunDirError
            One line: another hermes run or experiment holds it, or the lock file cannot be made.
        """
        path = Path(path)
        lock = path / LOCK
        try:
            # 0600: the token inside lets a job join its launcher's lock, so only the user may read it
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                         0o600)
        except OSError as err:
            raise RunDirError(f"{key}: cannot lock {path} ({err.strerror or type(err).__name__})") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RunDirError(f"{key}: {lock} is not a regular file")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            if token is not None and holder.get("token") == token:
                return cls(path, None, token, created)
            raise _in_use(key, path, holder, what) from None
        except BaseException:
            os.close(fd)
            raise
        mine = token if token is not None else secrets.token_hex(16)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": what,
                                       "token": mine}).encode(), 0)
        except OSError as err:
            os.close(fd)
            raise RunDirError(f"{key}: cannot lock {path} ({err.strerror or type(err).__name__})") from None
        return cls(path, fd, mine, created)

    def release(self, *, remove_if_unused: bool = False) -> None:
        """Release the lock; with ``remove_if_unused``, remove the directory if this lock created it and it
        holds nothing but hermes' marker and lock (a run that failed before it recorded anything)."""
        if self.fd is None:
            return
        try:
            if remove_if_unused and self.created:
                try:
                    names = {e.name for e in os.scandir(self.path)}
                    if names <= {MARKER, LOCK}:
                        for name in names:
                            os.unlink(self.path / name)
                        os.rmdir(self.path)
                except OSError:
                    pass
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> DirLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _in_use(key: str, path: Path, holder: dict[str, Any], kind: str) -> RunDirError:
    """The one error for a directory whose lock another process holds, whatever check found it: the holder's
    kind as its lock names it (``kind`` if the lock does not say), its pid and host when known."""
    what = holder.get("what") if holder.get("what") in ("run", "experiment") else kind
    who = f" (pid {holder['pid']} on {holder.get('host', '?')})" if isinstance(holder.get("pid"), int) else ""
    return RunDirError(f"{key}: {path} is in use by another hermes {what}{who}: wait for it to end or choose "
                       f"another directory")


def _lock_holder(fd: int) -> dict[str, Any]:
    try:
        return _small_json(os.pread(fd, 4096, 0).decode("utf-8"))
    except (OSError, ValueError):
        return {}


def _small_json(text: str) -> dict[str, Any]:
    """A small JSON object of hermes' own (a marker, a lock), {} if it is anything else (read with the limits of
    :mod:`hermes.loaders`: no nesting bomb)."""
    from hermes.loaders import parse_json

    try:
        doc = parse_json(text, "marker", error=HermesError, max_depth=4)
    except HermesError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _locked(path: Path, token: str | None) -> dict[str, Any] | None:
    """The holder of ``path``'s lock if another process holds it (None if it is free or held for ``token``)."""
    try:
        fd = os.open(path / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {"pid": "?", "host": "not a regular file"}
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            return None if token is not None and holder.get("token") == token else holder
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _transient(name: str) -> bool:
    """A file hermes makes and removes at once while it claims a directory — a writability probe
    (:func:`_probe`) or the marker's temporary file — from this process or another one claiming it at the same
    moment: it makes a directory neither foreign nor non-empty. Only the exact names ``tempfile.mkstemp`` gives
    (8 characters of its alphabet), so a user's file that merely starts alike still makes the directory foreign."""
    return _TRANSIENT.fullmatch(name) is not None


#: ``_probe``'s and ``write_atomic``'s temporary names for the marker (``tempfile``: 8 of [a-z0-9_])
_TRANSIENT = re.compile(r"\.hermes-probe-[a-z0-9_]{8}|" + re.escape(f".{MARKER}.") + r"[a-z0-9_]{8}\.tmp")


def _probe(directory: Path, key: str) -> None:
    """Create and remove a file in ``directory``: the one test of writability that also holds for root, a
    read-only file system and an immutable directory."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".hermes-probe-", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        raise RunDirError(f"{key}: cannot write in {directory} ({err.strerror or type(err).__name__})") from None


def check_run_dir(path: str | Path, key: str = "--out", *, force: bool = False, kind: str = "run",
                  token: str | None = None) -> Path:
    """Check, before any work, that ``path`` can become a hermes directory of ``kind``; change nothing.

    It can if it does not exist and its nearest existing ancestor is a writable directory, or if it is a
    writable directory that is empty or carries hermes' :data:`MARKER` of the same kind, is not in use by
    another hermes process (its lock, :class:`DirLock`; ``token``: the lock this process's launcher holds),
    and — a run — is finished (replaced wholesale by :func:`hermes.lifecycle.directory.open_run_dir`) or
    unfinished with ``force``.

    Raises
    ------
    RunDirError
        One line naming ``key`` (``--out``, ``output.dir``, ...): not a directory, not writable, not empty
        and without hermes' marker, a directory of the other kind, in use, or an unfinished run without
        ``force``.
    """
    path = Path(path)
    if "\0" in str(path):
        raise RunDirError(f"{key}: a path cannot hold a NUL byte")
    if kind == "run" and path.parent.name == "runs" and read_marker(path.parent.parent) == "experiment":
        holder = _locked(path.parent.parent, os.environ.get(EXPERIMENT_TOKEN))
        if holder is not None:  # a run of an experiment that hermes compare is running: its runs are compare's
            raise RunDirError(f"{key}: {path} belongs to the experiment {path.parent.parent}, which hermes compare "
                              f"is running (pid {holder.get('pid', '?')}): wait for it to end")
    if not _exists(path):
        _creatable(path, key)
        return path
    if not path.is_dir():
        raise RunDirError(f"{key}: {path} exists and is not a directory")
    try:
        entries = {e.name for e in os.scandir(path) if not _transient(e.name)}
    except OSError as err:
        raise RunDirError(f"{key}: cannot read {path} ({err.strerror or type(err).__name__})") from None
    _probe(path, key)
    if not entries - {LOCK}:
        holder = _locked(path, token)
        if holder is not None:
            raise _in_use(key, path, holder, kind)
        return path
    found = read_marker(path)
    if found is None:
        holder = _locked(path, token) if LOCK in entries else None
        if holder is not None:  # another hermes process is claiming it: its lock is taken, its marker not yet written
            raise _in_use(key, path, holder, kind)
        raise RunDirError(f"{key}: {path} is not empty and carries no hermes marker ({MARKER}): hermes writes only "
                          f"into a new or empty directory or one it made (give another directory)")
    if found != kind:
        raise RunDirError(f"{key}: {path} is a hermes {found} directory, not {'an' if kind[0] in 'aeiou' else 'a'} "
                          f"{kind} directory (give another directory)")
    holder = _locked(path, token)
    if holder is not None:
        raise _in_use(key, path, holder, kind)
    if kind != "run":  # an experiment holds its runs' directories; only a run's directory is replaced whole
        return path
    nested = _nested_hermes_dir(path)
    if nested is not None:
        raise RunDirError(f"{key}: {path} holds another hermes directory, {nested}: hermes replaces a directory only "
                          f"as a whole and never one that holds another (move it out first)")
    summary = read_summary(path)
    if summary is None or summary.get("complete", True):  # runs of earlier versions have no 'complete'
        return path
    done = len(summary["phases"])
    checkpoint = summary.get("checkpoint")
    if (done or checkpoint) and not force:
        what = f"{done} phase{'s' * (done != 1)} recorded"
        how = (f"resume it with 'hermes run --resume {path}' or replace it with --force" if checkpoint else
               "replace it with --force or choose another directory")
        raise RunDirError(f"{key}: {path} holds an unfinished hermes run ({what}"
                          f"{f', a checkpoint at phase {checkpoint}' if checkpoint else ''}): {how}")
    return path


def _nested_hermes_dir(path: Path) -> Path | None:
    """A hermes directory (its marker) below ``path``, not following symlinks; None if there is none."""
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        if Path(dirpath) != Path(path) and (MARKER in filenames or LOCK in filenames):
            return Path(dirpath)
    return None


def subdir(root: str | Path, *parts: str) -> Path:
    """``root/part/...``, each part a real directory inside ``root`` (made if missing): a symlink or a file at
    any of them is refused, so that nothing hermes writes or deletes in its own directory leaves it.

    Raises
    ------
    OutputError
        One line naming the part that is not a directory of hermes' own.
    """
    cur = Path(root)
    for part in parts:
        safe_name(part, str(cur))
        cur = cur / part
        try:
            os.mkdir(cur)
        except FileExistsError:
            pass
        except OSError as err:
            raise output_error(cur, err) from None
        try:
            st = os.lstat(cur)
        except OSError as err:
            raise output_error(cur, err) from None
        if not stat.S_ISDIR(st.st_mode):
            what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
            raise OutputError(f"{cur} is {what}: hermes writes only into directories it made (move it away)")
    return cur


def claim_dir(path: str | Path, key: str = "--out", *, force: bool = False, kind: str = "run",
              token: str | None = None, name: str | None = None) -> DirLock:
    """Make ``path`` a hermes directory of ``kind`` held by this process: :func:`check_run_dir`, create it
    if needed, take its lock (or join the launcher's with ``token``), check again under the lock, and mark
    it. Nothing else in it changes (:func:`hermes.lifecycle.directory.open_run_dir` clears a run's old files once
    its set-up is done).

    Returns
    -------
    DirLock
        Held until released (or the process ends); ``release(remove_if_unused=True)`` removes a directory it
        created if nothing was written in it.

    Raises
    ------
    RunDirError
        One line (see :func:`check_run_dir`).
    """
    path = Path(path)
    if key == DEFAULT_KEY and token is None:  # the default directory is a new one, whatever ran in this second
        path, created = _new_dir(path, key), True
    else:
        check_run_dir(path, key, force=force, kind=kind, token=token)
        created = not _exists(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunDirError(f"{key}: cannot create {path} ({err.strerror or type(err).__name__})") from None
    lock = DirLock.acquire(path, key, token=token, what=kind, created=created)
    try:
        check_run_dir(path, key, force=force, kind=kind, token=lock.token)  # what another process did meanwhile
        if read_marker(path) is None:
            write_marker(path, kind, name)
    except OSError as err:
        lock.release(remove_if_unused=True)
        raise RunDirError(f"{key}: cannot write in {path} ({err.strerror or type(err).__name__})") from None
    except BaseException:
        lock.release(remove_if_unused=True)
        raise
    return lock


def _creatable(path: Path, key: str) -> None:
    """``path`` can be created: its nearest existing ancestor is a directory this process can write in."""
    anc = path.parent
    while not _exists(anc) and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise RunDirError(f"{key}: {anc} is not a directory (cannot create {path} in it)")
    _probe(anc, key)


def _new_dir(path: Path, key: str) -> Path:
    """Create ``path`` — or ``path-2``, ``path-3``, ... if it exists — exclusively; the one created."""
    _creatable(path, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunDirError(f"{key}: cannot create {path.parent} ({err.strerror or type(err).__name__})") from None
    for k in range(1, 10_000):
        candidate = path if k == 1 else path.with_name(f"{path.name}-{k}")
        try:
            os.mkdir(candidate)
            return candidate
        except FileExistsError:
            continue
        except OSError as err:
            raise RunDirError(f"{key}: cannot create {candidate} ({err.strerror or type(err).__name__})") from None
    raise RunDirError(f"{key}: {path} and 9,999 others like it exist")


def clear_dir(path: Path, keep: tuple[str, ...] = ()) -> None:
    """Remove every entry of the hermes directory ``path`` but its marker, its lock and ``keep``; a symlink is
    removed, never followed; nothing outside ``path`` is touched. The caller holds the lock."""
    if read_marker(path) is None:
        raise RunDirError(f"{path}: carries no hermes marker; not cleared")
    nested = _nested_hermes_dir(path)
    if nested is not None:
        raise RunDirError(f"{path} holds another hermes directory, {nested}: not cleared (move it out first)")
    for entry in os.scandir(path):
        if entry.name in (MARKER, LOCK, *keep):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


