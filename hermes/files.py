"""The files hermes writes: atomic writes, and the names it gives files and directories.

Every part of hermes that writes (a run, an experiment, a trace, pictures) writes through here; the directories
it owns are claimed and marked by :mod:`hermes.claims`, and what a run's directory holds is
:mod:`hermes.lifecycle.directory`'s. Every file is written atomically (a temporary file in
the same directory, fsync, rename): an interrupted run never leaves a half-written summary, a reader sees the
old file or the new one. Files get the mode the user's umask gives a new file (``0666 & ~umask``), like any
file the user creates.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import re
import shutil
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes.errors import HermesError, OutputError

__all__ = ["write_atomic", "write_through", "write_json", "write_csv", "write_npz", "file_mode", "read_summary",
           "safe_name", "slug", "check_path", "RunDirError", "output_error", "reason"]


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


def write_atomic(path: str | Path, data: bytes | str, *, dir_fd: int | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (an exclusive temporary file of an unpredictable name in the same
    directory + fsync + os.replace, which replaces a symlink at ``path`` itself, never its target), with the
    mode of :func:`file_mode` (``mkstemp`` alone would leave it 0600).

    With ``dir_fd`` (an open directory, e.g. :func:`hermes.claims.opened`) the file is ``path``'s name in that
    directory, whatever name the directory has by then: a directory renamed mid-write, and another made at its
    name, never receives a file meant for the first.

    Raises
    ------
    OutputError
        One line naming the file and why it cannot be written (a full disk, a read-only medium, a directory at
        its name); the file is then as it was.
    """
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    if dir_fd is not None:
        return _write_in(dir_fd, path, raw)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise output_error(path, err) from None
    try:
        return _write_in(fd, path, raw)
    finally:
        os.close(fd)


def _write_in(dir_fd: int, path: Path, raw: bytes) -> Path:
    """:func:`write_atomic` of ``path.name`` in the open directory ``dir_fd``: an exclusive (``O_EXCL``) temporary
    file of an unpredictable name there, removed if anything fails."""
    import secrets

    tmp = None
    try:
        name = f".{path.name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600,
                     dir_fd=dir_fd)
        tmp = name
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), file_mode())
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(name, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as err:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
        if isinstance(err, OSError):
            raise output_error(path, err) from None
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


def _default(o: Any):
    import numpy as np  # numpy only where a value is numpy's (the command line's path checks need none)

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
    if isinstance(o, float) and not math.isfinite(o):
        logging.getLogger(__name__).warning("%s is %s: written as null", where or "value", o)
        return None
    if type(o).__module__ != "numpy":
        return o
    import numpy as np

    if isinstance(o, np.ndarray):
        return _finite(o.tolist(), where)
    if isinstance(o, np.floating) and not np.isfinite(o):
        logging.getLogger(__name__).warning("%s is %s: written as null", where or "value", o)
        return None
    return o


def write_json(path: str | Path, obj: Any, *, dir_fd: int | None = None) -> Path:
    """Strict JSON (RFC 8259: no NaN or Infinity literals; non-finite numbers become null)."""
    return write_atomic(path, json.dumps(_finite(obj), indent=2, default=_default, allow_nan=False) + "\n",
                        dir_fd=dir_fd)


def write_csv(path: str | Path, rows: list[dict[str, Any]], columns: list[str] | None = None, *,
              dir_fd: int | None = None) -> Path:
    cols = columns or (list(rows[0]) if rows else [])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.12g}" if isinstance(v, float) else v) for k, v in r.items()})
    return write_atomic(path, buf.getvalue(), dir_fd=dir_fd)


def write_npz(path: str | Path, *, dir_fd: int | None = None, **arrays) -> Path:
    import numpy as np

    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return write_atomic(path, buf.getvalue(), dir_fd=dir_fd)


def read_summary(path: str | Path) -> dict | None:
    """The run's summary.json if it is a hermes summary, else None."""
    from hermes.loaders import load_json

    try:
        doc = load_json(Path(path) / "summary.json", error=HermesError)
    except HermesError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("phases"), list) else None


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


def check_path(value: Any, key: str) -> Path:
    """``value``, a path the user gave (``key``: the option or scenario key naming it), as a :class:`Path` —
    ``DIR/`` is ``DIR`` — if it is not empty and every character of it can be shown in a one-line message: no
    control character (C0, DEL, C1: NUL, newline, ESC, ...), no line or paragraph separator (U+2028, U+2029),
    no byte that is not UTF-8 (the surrogates Python gives such bytes). A name starting with ``-`` is a name like
    any other (argparse takes one only as ``--out=-x``; hermes hands paths on to its jobs as the user spelled
    them, each its own argument).

    Raises
    ------
    RunDirError
        One line naming ``key``, the character and where it is.
    """
    text = os.fspath(value)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text:
        raise RunDirError(f"{key}: an empty path (give a file or directory name; '.' is the current directory)")
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if cat in _UNSHOWN:
            what = ("a byte that is not UTF-8" if cat == "Cs" else "a NUL byte" if ch == "\0" else
                    f"the {_UNSHOWN[cat]} U+{ord(ch):04X}")
            raise RunDirError(f"{key}: {_shown(text)} holds {what} at position {i + 1}: give a path of printable "
                              f"characters")
    return Path(text)


#: the Unicode categories a path may not hold (:func:`check_path`)
_UNSHOWN = {"Cc": "control character", "Zl": "line separator", "Zp": "paragraph separator", "Cs": "surrogate"}


def _shown(text: str) -> str:
    """``text`` quoted with every unprintable character escaped (one line, at most 80 characters)."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:76] + "...'"


def slug(label: str) -> str:
    """A safe file name made from a label (:func:`safe_name`): runs of other characters become ``-``, leading
    dots and dashes go; ``_`` if nothing is left."""
    text = re.sub(r"[^A-Za-z0-9_.\-]+", "-", str(label)).lstrip(".-").rstrip("-")[:120]
    return text or "_"


# -- what hermes owns ------------------------------------------------------------------------------------------
