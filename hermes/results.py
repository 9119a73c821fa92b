"""Result files and run directories.

Every file is written atomically (a temporary file in the same directory, fsync, rename): an interrupted
run never leaves a half-written summary, a reader sees the old file or the new one. Files get the mode the
user's umask gives a new file (``0666 & ~umask``), like any file the user creates.

A run directory is marked as hermes' by :data:`MARKER`; :func:`check_run_dir` and :func:`open_run_dir`
decide what happens to an existing directory (README, "What a run writes"): a non-empty directory that is
not a hermes run is refused, a finished hermes run is replaced wholesale, an unfinished one (records of
finished phases, perhaps a checkpoint to resume from) is refused unless ``force``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from hermes.errors import HermesError

__all__ = ["write_atomic", "write_json", "write_csv", "write_npz", "write_run", "default_run_dir", "file_mode",
           "MARKER", "run_dir_for", "check_run_dir", "open_run_dir", "write_records", "read_summary",
           "RunDirError"]

#: the file that marks a directory as a hermes run (written before the first phase)
MARKER = ".hermes-run"


class RunDirError(HermesError):
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
    """Write ``data`` to ``path`` atomically (same-directory temp file + fsync + os.replace), with the mode
    of :func:`file_mode` (``mkstemp`` alone would leave it 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), file_mode())
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


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


def default_run_dir(name: str) -> Path:
    """``runs/<name>-<timestamp>`` (relative to the current directory)."""
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
    return default_run_dir(sc.name), "run directory"


def read_summary(path: str | Path) -> dict | None:
    """The run's summary.json if it is a hermes summary, else None."""
    try:
        doc = json.loads((Path(path) / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("phases"), list) else None


def _exists(path: Path) -> bool:
    try:
        return path.exists() or path.is_symlink()
    except OSError:
        return False


def _probe(directory: Path, key: str) -> None:
    """Create and remove a file in ``directory``: the one test of writability that also holds for root, a
    read-only file system and an immutable directory."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".hermes-probe-", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        raise RunDirError(f"{key}: cannot write in {directory} ({err.strerror or type(err).__name__})") from None


def check_run_dir(path: str | Path, key: str = "--out", *, force: bool = False) -> Path:
    """Check, before any work, that ``path`` can become the run directory; change nothing.

    It can if it does not exist and its nearest existing ancestor is a writable directory, or if it is a
    writable directory that is empty, holds a finished hermes run (replaced wholesale by
    :func:`open_run_dir`), or holds an unfinished one and ``force`` is given.

    Raises
    ------
    RunDirError
        One line naming ``key`` (``--out`` or ``output.dir``): not a directory, not writable, not empty and
        not a hermes run, or an unfinished run without ``force``.
    """
    path = Path(path)
    if not _exists(path):
        anc = path.parent
        while not _exists(anc) and anc != anc.parent:
            anc = anc.parent
        if not anc.is_dir():
            raise RunDirError(f"{key}: {anc} is not a directory (cannot create {path} in it)")
        _probe(anc, key)
        return path
    if not path.is_dir():
        raise RunDirError(f"{key}: {path} exists and is not a directory")
    try:
        entries = [e.name for e in path.iterdir()]
    except OSError as err:
        raise RunDirError(f"{key}: cannot read {path} ({err.strerror or type(err).__name__})") from None
    _probe(path, key)
    if not entries:
        return path
    summary = read_summary(path)
    if summary is None and MARKER not in entries:
        raise RunDirError(f"{key}: {path} is not empty and holds no hermes run (give a new or empty directory)")
    if summary is not None and summary.get("complete", True):  # runs of earlier versions have no 'complete'
        return path
    done = len(summary["phases"]) if summary is not None else 0
    checkpoint = (summary or {}).get("checkpoint")
    if (done or checkpoint) and not force:
        what = f"{done} phase{'s' * (done != 1)} recorded"
        how = (f"resume it with 'hermes run --resume {path}' or replace it with --force" if checkpoint else
               "replace it with --force or choose another directory")
        raise RunDirError(f"{key}: {path} holds an unfinished hermes run ({what}"
                          f"{f', a checkpoint at phase {checkpoint}' if checkpoint else ''}): {how}")
    return path


def open_run_dir(path: str | Path, key: str = "--out", *, force: bool = False) -> Path:
    """Make ``path`` the run directory (rank 0, before the first phase): check it (:func:`check_run_dir`),
    remove a previous hermes run's files — all of them, so no picture or VTU file of an earlier, longer run
    stays beside the new ones —, create it and mark it (:data:`MARKER`). Returns the directory."""
    path = check_run_dir(path, key, force=force)
    try:
        if path.is_dir():
            for entry in path.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunDirError(f"{key}: cannot prepare {path} ({err.strerror or type(err).__name__})") from None
    write_atomic(path / MARKER, "a hermes run directory: 'hermes run --out' replaces it when the run is finished\n")
    return path


def write_records(out: Path, summary: dict, rows: list[dict], columns: list[str]) -> None:
    """The records so far (rank 0, after every phase): phases.csv, then summary.json (``complete`` false
    until the end), each atomically, so the summary never lists a phase the CSV lacks."""
    write_csv(out / "phases.csv", rows, columns)
    write_json(out / "summary.json", summary)


def write_run(sc, summary: dict, rows: list[dict], columns: list[str], partitions: dict, mesh,
              out_dir: str | Path | None, geometry: dict | None = None) -> Path:
    """Write a run directory (rank 0): scenario.yaml, phases.csv, geometry.npz and partitions.npz (when the
    scenario records them) and summary.json, each atomically. Returns the directory.

    The default directory is ``runs/<scenario>-<timestamp>``.
    """
    import yaml

    out = Path(out_dir) if out_dir is not None else default_run_dir(sc.name)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "scenario.yaml", yaml.safe_dump(sc.to_dict(), sort_keys=False))
    write_csv(out / "phases.csv", rows, columns)
    if sc.output.partitions or sc.output.pictures or sc.output.vtu:
        geo = {"coords": mesh.coords, "xadj": mesh.xadj, "adjncy": mesh.adjncy}
        if mesh.has_polygons:
            geo.update(points=mesh.points, cell_ptr=mesh.cell_ptr, cell_nodes=mesh.cell_nodes)
        geo.update(geometry or {})
        write_npz(out / "geometry.npz", **geo)
        write_npz(out / "partitions.npz", **partitions)
    write_json(out / "summary.json", dict(summary))
    return out
