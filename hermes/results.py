"""Result files and run directories.

Every file is written atomically (a temporary file in the same directory, fsync, rename): an interrupted
run never leaves a half-written summary, a reader sees the old file or the new one. Files get the mode the
user's umask gives a new file (``0666 & ~umask``), like any file the user creates.

A run directory is marked as hermes' by :data:`MARKER`; :func:`check_run_dir` and :func:`open_run_dir`
decide what happens to an existing directory (docs/RUNNING.md, "What a run writes"): a non-empty directory that is
not a hermes run is refused, a finished hermes run is replaced wholesale, an unfinished one (records of
finished phases, perhaps a checkpoint to resume from) is refused unless ``force``.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import logging
import os
import re
import secrets
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hermes.errors import HermesError, OutputError

__all__ = ["write_atomic", "write_json", "write_csv", "write_npz", "write_run", "default_run_dir", "file_mode",
           "MARKER", "LOCK", "KINDS", "run_dir_for", "check_run_dir", "claim_dir", "open_run_dir", "clear_dir",
           "DirLock", "read_marker", "write_marker", "safe_name", "slug", "write_records", "read_summary",
           "RunDirError", "output_error", "reason", "subdir", "DEFAULT_KEY", "write_through"]

#: the file that marks a directory as hermes' (a run or an experiment; :func:`read_marker`)
MARKER = ".hermes-run"
#: the lock file of a hermes directory (:class:`DirLock`)
LOCK = ".hermes-lock"


class RunDirError(OutputError):
    """The run directory cannot be used (not a directory, not writable, holds other files or an unfinished
    run)."""


def file_mode() -> int:
    """The mode a new file gets under the current umask (``0o666 & ~umask``)."""
    try:  # Linux: read it without changing it (os.umask would, for a moment, for every thread)
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` atomically (an exclusive temporary file of an unpredictable name in the same
    directory + fsync + os.replace, which replaces a symlink at ``path`` itself, never its target), with the
    mode of :func:`file_mode` (``mkstemp`` alone would leave it 0600).

    Raises
    ------
    OutputError
        One line naming the file and why it cannot be written (a full disk, a read-only medium, a directory at
        its name); the file is then as it was.
    """
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), file_mode())
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        _discard(tmp)
        raise output_error(path, err) from None
    except BaseException:
        _discard(tmp)
        raise
    return path


def write_through(path: str | Path, write: Callable[[str], Any], name: str | None = None) -> Path:
    """Write ``path`` atomically with a writer that opens a file by name itself (meshio, numpy.savetxt):
    ``write(tmp)`` writes into a fresh private directory next to ``path`` (``mkdtemp``: an unpredictable name,
    mode 0700, where nobody can plant a link), then the file gets the umask's mode and is renamed onto
    ``path`` (replacing a symlink there, never its target). If ``write`` fails nothing at ``path`` changes.

    Raises
    ------
    OutputError
        The file cannot be written (one line); the writer's own exceptions pass unchanged.
    """
    path = Path(path)
    private = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        private = tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        tmp = os.path.join(private, name or path.name)
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, file_mode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as err:
        raise output_error(path, err) from None
    finally:
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
    return path


def output_error(path: str | Path, err: OSError) -> OutputError:
    """The one-line OutputError of a file that cannot be written; ``reason`` holds the system's word for why."""
    out = OutputError(f"cannot write {path} ({err.strerror or type(err).__name__})")
    out.reason = err.strerror or type(err).__name__
    return out


def reason(err: BaseException) -> str:
    """Why a write failed, in the system's words (an OSError's or an OutputError's)."""
    return getattr(err, "reason", None) or getattr(err, "strerror", None) or str(err)


def _discard(tmp: str | None) -> None:
    if tmp is not None:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _default(o: Any):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _finite(o: Any, where: str = "") -> Any:
    """``o`` with every non-finite float replaced by None (JSON null), each replacement logged: the
    scenario's bounds keep a run's numbers finite (hermes.scenario, Bounds), so this is a last guard
    that keeps the file strict JSON, never a way to hide a value."""
    if isinstance(o, dict):
        return {k: _finite(v, f"{where}.{k}" if where else str(k)) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v, f"{where}[{i}]") for i, v in enumerate(o)]
    if isinstance(o, np.ndarray):
        return _finite(o.tolist(), where)
    if isinstance(o, (float, np.floating)) and not np.isfinite(o):
        logging.getLogger(__name__).warning("%s is %s: written as null", where or "value", o)
        return None
    return o


def write_json(path: str | Path, obj: Any) -> Path:
    """Strict JSON (RFC 8259: no NaN or Infinity literals; non-finite numbers become null)."""
    return write_atomic(path, json.dumps(_finite(obj), indent=2, default=_default, allow_nan=False) + "\n")


def write_csv(path: str | Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> Path:
    cols = columns or (list(rows[0]) if rows else [])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.12g}" if isinstance(v, float) else v) for k, v in r.items()})
    return write_atomic(path, buf.getvalue())


def write_npz(path: str | Path, **arrays) -> Path:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return write_atomic(path, buf.getvalue())


#: the key of the default run directory (:func:`run_dir_for`): claimed new, never reused (:func:`claim_dir`)
DEFAULT_KEY = "run directory"


def default_run_dir(name: str) -> Path:
    """``runs/<name>-<timestamp>`` (relative to the current directory; :func:`claim_dir` adds ``-2``, ``-3``, ...
    when runs started in the same second would share it)."""
    import datetime as _dt

    return Path("runs") / f"{name}-{_dt.datetime.now():%Y%m%d-%H%M%S}"


def run_dir_for(sc, out_dir: str | Path | None = None) -> tuple[Path, str]:
    """The run directory and the name the user gave it in (for error lines): ``--out`` (relative to the
    current directory), else ``output.dir`` (relative to the scenario file, like every path in a scenario),
    else the default ``runs/<name>-<timestamp>`` (relative to the current directory)."""
    if out_dir is not None:
        return Path(out_dir).expanduser(), "--out"
    if sc.output.dir is not None:
        return sc.resolve(sc.output.dir), "output.dir"
    return default_run_dir(sc.name), DEFAULT_KEY


def read_summary(path: str | Path) -> dict | None:
    """The run's summary.json if it is a hermes summary, else None."""
    from hermes.loaders import load_json

    try:
        doc = load_json(Path(path) / "summary.json", error=HermesError)
    except HermesError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("phases"), list) else None


def _exists(path: Path) -> bool:
    try:
        return path.exists() or path.is_symlink()
    except (OSError, ValueError):
        return False


# -- names -----------------------------------------------------------------------------------------------------
_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")


def safe_name(name: Any, what: str) -> str:
    """``name`` if it is a safe file name — letters, digits, ``.``, ``_``, ``-``, not starting with a dot, at
    most 200 characters: never ``.``, ``..``, a separator, a NUL byte or a name that leaves its directory —,
    else RunDirError naming ``what``."""
    if not isinstance(name, str) or not _SAFE.fullmatch(name):
        shown = repr(name)[:60]
        raise RunDirError(f"{what}: {shown} is not a safe file name (letters, digits, '.', '_', '-', not starting "
                          f"with '.', at most 200 characters)")
    return name


def slug(label: str) -> str:
    """A safe file name made from a label (:func:`safe_name`): runs of other characters become ``-``, leading
    dots and dashes go; ``_`` if nothing is left."""
    text = re.sub(r"[^A-Za-z0-9_.\-]+", "-", str(label)).lstrip(".-").rstrip("-")[:120]
    return text or "_"


# -- what hermes owns ------------------------------------------------------------------------------------------
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


def _marker_name(path: Path) -> str | None:
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
            who = f" (pid {holder['pid']} on {holder.get('host', '?')})" if isinstance(holder.get("pid"), int) else ""
            raise RunDirError(f"{key}: {path} is in use by another hermes {what}{who}: wait for it to end or "
                              f"choose another directory") from None
        except BaseException:
            os.close(fd)
            raise
        mine = token if token is not None else secrets.token_hex(16)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "token": mine}).encode(), 0)
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
    and — a run — is finished (replaced wholesale by :func:`open_run_dir`) or unfinished with ``force``.

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
        entries = {e.name for e in os.scandir(path)}
    except OSError as err:
        raise RunDirError(f"{key}: cannot read {path} ({err.strerror or type(err).__name__})") from None
    _probe(path, key)
    if not entries - {LOCK}:
        holder = _locked(path, token)
        if holder is not None:
            raise RunDirError(f"{key}: {path} is in use by another hermes process (pid {holder.get('pid', '?')})")
        return path
    found = read_marker(path)
    if found is None:
        raise RunDirError(f"{key}: {path} is not empty and carries no hermes marker ({MARKER}): hermes writes only "
                          f"into a new or empty directory or one it made (give another directory)")
    if found != kind:
        raise RunDirError(f"{key}: {path} is a hermes {found} directory, not {'an' if kind[0] in 'aeiou' else 'a'} "
                          f"{kind} directory (give another directory)")
    holder = _locked(path, token)
    if holder is not None:
        who = f" (pid {holder['pid']} on {holder.get('host', '?')})" if isinstance(holder.get("pid"), int) else ""
        raise RunDirError(f"{key}: {path} is in use by another hermes {kind}{who}: wait for it to end or choose "
                          f"another directory")
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
    it. Nothing else in it changes (:func:`open_run_dir` clears a run's old files once its set-up is done).

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


def open_run_dir(path: str | Path, key: str = "--out", *, force: bool = False, token: str | None = None) -> Path:
    """Make ``path`` the run directory (rank 0, after the set-up, holding its lock from :func:`claim_dir`, or
    ``token`` naming it): check it again (:func:`check_run_dir`), remove a previous hermes run's files — all of
    them, so no picture or VTU file of an earlier, longer run stays beside the new ones —, and mark it.
    Returns the directory."""
    path = Path(path)
    check_run_dir(path, key, force=force, token=token)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if read_marker(path) is None:
            write_marker(path, "run")
        clear_dir(path)
        write_marker(path, "run", _marker_name(path))  # this version's marker, with this run's file mode
    except OSError as err:
        raise RunDirError(f"{key}: cannot prepare {path} ({err.strerror or type(err).__name__})") from None
    return path


def write_records(out: Path, summary: dict, rows: list[dict], columns: list[str]) -> None:
    """The records so far (rank 0, after every phase): phases.csv, then summary.json (``complete`` false
    until the end), each atomically, so the summary never lists a phase the CSV lacks."""
    write_csv(out / "phases.csv", rows, columns)
    write_json(out / "summary.json", summary)


def base_geometry(mesh) -> dict[str, np.ndarray]:
    """The arrays of ``geometry.npz`` that every phase shares: the units' coordinates and graph, and the cells
    (polygons, or a volume mesh's 3-D cells with their VTK types) when the mesh has them."""
    geo = {"coords": mesh.coords, "xadj": mesh.xadj, "adjncy": mesh.adjncy}
    if mesh.has_polygons:
        geo.update(points=mesh.points, cell_ptr=mesh.cell_ptr, cell_nodes=mesh.cell_nodes)
    elif mesh.solid is not None:  # a volume mesh: its 3-D cells, with their VTK types
        s = mesh.solid
        geo.update(points=s.points, cell_ptr=s.cell_ptr, cell_nodes=s.cell_nodes, cell_types=s.cell_types)
    return geo


def write_run(sc, summary: dict, rows: list[dict], columns: list[str], partitions: dict, mesh,
              out_dir: str | Path | None, geometry: dict | None = None) -> Path:
    """Write a run directory (rank 0): scenario.yaml, phases.csv, geometry.npz and partitions.npz (when the
    scenario records them) and summary.json, each atomically. Returns the directory.

    The default directory is ``runs/<scenario>-<timestamp>``.
    """
    from hermes.loaders import dump_yaml

    out = Path(out_dir) if out_dir is not None else default_run_dir(sc.name)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "scenario.yaml", dump_yaml(sc.to_dict(), sort_keys=False))
    write_csv(out / "phases.csv", rows, columns)
    if sc.output.partitions or sc.output.pictures or sc.output.vtu or sc.output.trace_spec is not None:
        geo = base_geometry(mesh)
        geo.update(geometry or {})
        write_npz(out / "geometry.npz", **geo)
        write_npz(out / "partitions.npz", **partitions)
    write_json(out / "summary.json", dict(summary))
    return out
