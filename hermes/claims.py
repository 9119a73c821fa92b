"""The directories hermes owns: markers, locks and claims.

A directory is marked as hermes' by :data:`MARKER`; :func:`claim_dir` takes its lock (:class:`DirLock`), and
:func:`check_run_dir` (and, for a run after its set-up, :func:`hermes.lifecycle.directory.open_run_dir`) decide
what happens to an existing directory (docs/RUNNING.md, "What a run writes"): a non-empty directory that is not
a hermes run is refused, a finished hermes run is replaced wholesale, an unfinished one (records of finished
phases, perhaps a checkpoint to resume from) is refused unless ``force``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hermes.errors import HermesError, OutputError
from hermes.files import RunDirError, check_path, output_error, read_summary, safe_name, write_atomic

__all__ = ["MARKER", "LOCK", "KINDS", "DEFAULT_KEY", "EXPERIMENT_TOKEN", "read_marker", "write_marker",
           "marker_name", "DirLock", "confirm", "refresh", "check_run_dir", "subdir", "claim_dir", "clear_dir"]

#: the file that marks a directory as hermes' (a run or an experiment; :func:`read_marker`)
MARKER = ".hermes-run"
#: the file that names the holder of a hermes directory's lock while it is held (:class:`DirLock`: the lock
#: itself is on the directory, and the file is removed when it is released)
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
#: figure families of ``hermes lab bench``, a trace's replay (``hermes trace replay``), an experiment on a trace
#: (``hermes compare --trace``), pictures (``hermes plot --out``) and a run written as a trace (``hermes trace
#: write --out``)
KINDS = ("run", "experiment", "flow-bench", "replay", "trace-experiment", "plots", "trace")
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
    """An exclusive lock on a hermes directory, held for the life of a run or an experiment: a second run (or
    compare, replay, plot, trace write) into the same directory is refused while it is held.

    The lock is ``flock(LOCK_EX)`` on an open descriptor of the directory itself, which the holder keeps open:
    the kernel holds it on the directory's inode for as long as that descriptor is open and releases it when the
    holder ends, however it ends (kill -9 included). Nothing a user can delete holds it: :data:`LOCK`, a small
    file beside the run's files, only *names* the holder — pid, host, kind (run or experiment: the words of the
    "in use" line) and the token of the hand-over below —, and deleting or replacing it releases nothing (the
    "in use" line then lacks the pid). The holder removes that file when it releases the lock, so a finished
    directory carries no lock file; one left by a holder that was killed names a lock nobody holds and is
    ignored (and replaced by the next holder).

    A launcher that holds the lock hands it to its MPI job with :attr:`token`: the job's rank 0 finds the
    directory locked and :data:`LOCK` naming that token, and goes on under the launcher's lock (a *joined* lock,
    ``fd`` None). Once joined, the process recognises the directory by its inode (a registry of the locks this
    process holds or joined), so later checks do not need the file.

    The directory itself, renamed or deleted while it is held: the lock follows the inode (a rename) or dies with
    it (``rm -r``), and a second run may then make a new directory of the old name. The holder never writes into
    that one: the writes of a run (:func:`confirm` before each phase's records, checkpoints and the result files)
    check that the path still names the locked directory and stop the run with one line if it does not.

    Semantics are those of a local file system (Linux: ext4, xfs, btrfs, tmpfs). On NFS, Linux keeps a
    ``flock`` on a directory in the client's kernel (NFS lends directories no byte-range locks): two runs started
    on one machine see each other's lock, two runs started on two machines into one directory on a shared file
    system do not.
    """

    def __init__(self, path: Path, fd: int | None, token: str, created: bool, ident: tuple[int, int] = (-1, -1),
                 key: str = "--out", what: str = "run"):
        self.path, self.fd, self.token, self.created = path, fd, token, created
        self.ident, self.key, self.what = ident, key, what

    @classmethod
    def acquire(cls, path: str | Path, key: str, *, token: str | None = None, what: str = "run",
                created: bool = False) -> DirLock:
        """Lock the directory ``path`` (which exists) or join the lock its launcher holds with ``token``.

        Raises
        ------
        RunDirError
            One line: another hermes run or experiment holds it, the directory cannot be opened, its
            :data:`LOCK` is not a regular file, or it was replaced while it was being locked.
        """
        path = Path(path)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as err:
            raise RunDirError(f"{key}: cannot lock {path} ({err.strerror or type(err).__name__})") from None
        try:
            st = os.fstat(fd)
            ident = (st.st_dev, st.st_ino)
            if not _take(fd, lambda: token is not None and (_holder(path).get("token") == token
                                                              or _joined(ident, token))):
                holder = _holder(path)
                if token is not None and (holder.get("token") == token or _joined(ident, token)):
                    os.close(fd)
                    return _register(cls(path, None, token, created, ident, key, what))
                raise _in_use(key, path, holder, what)
            if _ident(path) != ident:  # removed (a claimer that gave up) or replaced since it was opened
                raise RunDirError(f"{key}: {path} was removed or replaced while hermes locked it (try again)")
            mine = token if token is not None else secrets.token_hex(16)
            _write_holder(fd, path, key, {"pid": os.getpid(), "host": socket.gethostname(), "what": what,
                                          "token": mine})
        except BaseException:
            os.close(fd)
            raise
        return _register(cls(path, fd, mine, created, ident, key, what))

    def confirm(self, key: str | None = None) -> None:
        """HermesError (one line; not an OutputError, which the writers would report as a file they cannot
        write) if :attr:`path` no longer names the directory this lock holds (renamed, deleted, replaced by
        another of the same name): the holder stops rather than write into another directory."""
        if _ident(self.path) != self.ident:
            raise self.moved(key)

    def moved(self, key: str | None = None) -> HermesError:
        """The one-line error of a locked directory that :attr:`path` no longer names."""
        return HermesError(f"{key or self.key}: {self.path} was moved or removed while this hermes process held "
                           f"it; stopped (hermes never writes into another directory of the same name)")

    def refresh(self) -> None:
        """Write :data:`LOCK` again if it is missing or names another holder (a user deleted it): the processes
        this lock is handed to by token (an experiment's runs) find it again. Nothing for a joined lock."""
        if self.fd is None or _holder(self.path).get("token") == self.token:
            return
        try:
            self.confirm()
            _write_holder(self.fd, self.path, self.key, {"pid": os.getpid(), "host": socket.gethostname(),
                                                          "what": self.what, "token": self.token})
        except HermesError:
            pass

    def release(self, *, remove_if_unused: bool = False) -> None:
        """Release the lock (its :data:`LOCK` file removed first); with ``remove_if_unused``, remove the
        directory if this lock created it and it holds nothing but hermes' marker and lock file (a run that
        failed before it recorded anything). A joined lock changes nothing on disk."""
        _HELD[:] = [h for h in _HELD if h is not self]
        if self.fd is None:
            return
        try:
            names = {e.name for e in os.scandir(self.fd)}  # the locked directory, wherever it is now
            if remove_if_unused and self.created and names <= {MARKER, LOCK}:
                for name in names:
                    os.unlink(name, dir_fd=self.fd)
                if _ident(self.path) == self.ident:
                    os.rmdir(self.path)
            elif LOCK in names:
                os.unlink(LOCK, dir_fd=self.fd)
        except OSError:
            pass
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> DirLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


#: the locks this process holds or has joined (:meth:`DirLock.acquire`), in order
_HELD: list[DirLock] = []
#: how long a claimer retries a lock that another process holds for a moment (another claimer's check)
_RETRY_SECONDS = 0.2


def _register(lock: DirLock) -> DirLock:
    _HELD.append(lock)
    return lock


def _joined(ident: tuple[int, int], token: str) -> bool:
    """Whether this process holds or joined the lock of the directory ``ident`` with ``token``."""
    return any(h.ident == ident and h.token == token for h in _HELD)


def _ident(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the directory ``path`` names now (None: none)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _take(fd: int, ours: Callable[[], bool]) -> bool:
    """``flock(LOCK_EX)`` on ``fd`` without waiting for a holder — but a moment for a check's shared probe
    (:func:`_locked` of another claimer), unless ``ours()`` says the holder is the one to join: True if
    taken."""
    deadline = time.monotonic() + _RETRY_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if ours() or time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _write_holder(fd: int, path: Path, key: str, doc: dict[str, Any]) -> None:
    """:data:`LOCK` in the directory open as ``fd``: ``doc`` (0600: its token lets a job join its launcher's
    lock, so only the user may read it), replaced atomically. A :data:`LOCK` that is not a regular file (a
    planted symlink) is refused, never followed or replaced. A directory that cannot be written in keeps its
    lock without the file (a read-only run that ``hermes plot`` reads)."""
    try:
        st = os.lstat(LOCK, dir_fd=fd)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise RunDirError(f"{key}: cannot lock {path} ({err.strerror or type(err).__name__})") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise RunDirError(f"{key}: cannot lock {path} ({path / LOCK} is not a regular file: remove it)")
    tmp = f".{LOCK}.{secrets.token_hex(4)}.tmp"
    try:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                      0o600, dir_fd=fd)
    except OSError:
        return
    try:
        with os.fdopen(out, "w") as fh:
            fh.write(json.dumps(doc))
        os.replace(tmp, LOCK, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass


def _holder(path: Path) -> dict[str, Any]:
    """What :data:`LOCK` in ``path`` says of the lock's holder ({} if it is missing or not hermes')."""
    return _small_json(_read_small(path / LOCK) or "")


def confirm(path: str | Path, key: str | None = None) -> None:
    """HermesError (one line) if this process holds or joined the lock of a directory at ``path`` and ``path``
    no longer names it (:meth:`DirLock.confirm`); nothing if it holds none there (a directory written without
    a lock: tests, a library caller)."""
    where = os.path.abspath(path)
    for lock in reversed(_HELD):
        if os.path.abspath(lock.path) == where:
            lock.confirm(key)
            return


@contextlib.contextmanager
def opened(path: str | Path, key: str | None = None) -> Iterator[int]:
    """The directory at ``path`` opened (its descriptor yielded, closed after): the directory this process holds
    or joined the lock of at ``path``, checked on the open descriptor itself, so files written relative to it
    (:func:`hermes.files.write_atomic`'s ``dir_fd``) land in that directory even if it is renamed meanwhile.

    Raises
    ------
    HermesError
        One line (:meth:`DirLock.confirm`'s) if ``path`` no longer names the locked directory.
    OutputError
        One line if ``path`` cannot be opened and this process holds no lock there.
    """
    where = os.path.abspath(path)
    lock = next((h for h in reversed(_HELD) if os.path.abspath(h.path) == where), None)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        if lock is not None and _ident(Path(path)) != lock.ident:
            raise lock.moved(key) from None
        raise output_error(Path(path), err) from None
    try:
        if lock is not None:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != lock.ident:
                raise lock.moved(key)
        yield fd
    finally:
        os.close(fd)


def refresh(path: str | Path) -> None:
    """:meth:`DirLock.refresh` of the lock this process holds on ``path`` (nothing if it holds none)."""
    where = os.path.abspath(path)
    for lock in _HELD:
        if lock.fd is not None and os.path.abspath(lock.path) == where:
            lock.refresh()


def _in_use(key: str, path: Path, holder: dict[str, Any], kind: str) -> RunDirError:
    """The one error for a directory whose lock another process holds, whatever check found it: the holder's
    kind as its lock names it (``kind`` if the lock does not say), its pid and host when known."""
    what = holder.get("what") if holder.get("what") in ("run", "experiment") else kind
    who = f" (pid {holder['pid']} on {holder.get('host', '?')})" if isinstance(holder.get("pid"), int) else ""
    return RunDirError(f"{key}: {path} is in use by another hermes {what}{who}: wait for it to end or choose "
                       f"another directory")


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
    """The holder of ``path``'s lock if another process holds it (None if it is free, or held or joined for
    ``token``): a shared ``flock`` tried on the directory and let go at once."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(path)
            if token is not None and (holder.get("token") == token or _joined((st.st_dev, st.st_ino), token)):
                return None
            return holder
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _transient(name: str) -> bool:
    """A file hermes makes and removes at once while it claims a directory — a writability probe
    (:func:`_probe`), the marker's or the lock file's temporary file — from this process or another one claiming
    it at the same moment: it makes a directory neither foreign nor non-empty. Only the exact names hermes gives
    them (8 characters of ``tempfile``'s alphabet), so a user's file that merely starts alike still makes the
    directory foreign."""
    return _TRANSIENT.fullmatch(name) is not None


#: ``_probe``'s, ``write_atomic``'s (the marker) and ``_write_holder``'s temporary names (8 of [a-z0-9_])
_TRANSIENT = re.compile(r"\.hermes-probe-[a-z0-9_]{8}|(" + re.escape(f".{MARKER}.") + "|" + re.escape(f".{LOCK}.")
                        + r")[a-z0-9_]{8}\.tmp")


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
    path = check_path(path, key)
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
        holder = _locked(path, token)
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
        how = (f"resume it with 'hermes resume {path}' or replace it with --force" if checkpoint else
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
    path = check_path(path, key)
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


