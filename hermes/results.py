"""Atomic result files: write to a temporary file in the same directory, then rename.

An interrupted run never leaves a half-written summary: a reader sees the old file or the new one.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["write_atomic", "write_json", "write_csv", "write_npz", "write_run", "default_run_dir"]


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` atomically (same-directory temp file + fsync + os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
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
