"""The run directory: where a run writes (:func:`run_dir_for`), opening it after the set-up
(:func:`open_run_dir`) and writing into it the records of the phases finished so far (:func:`write_records`) and
the result files at the end (:func:`write_run`). What a run records is :mod:`hermes.lifecycle.records`; how any
file is written (atomically) and a directory claimed is :mod:`hermes.files`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from hermes.claims import (DEFAULT_KEY, check_run_dir, clear_dir, confirm, marker_name, opened, read_marker,
                           write_marker)
from hermes.files import RunDirError, output_error, write_atomic, write_csv, write_json, write_npz

__all__ = ["default_run_dir", "run_dir_for", "open_run_dir", "write_records", "base_geometry", "records_partitions",
           "scenario_yaml", "write_run"]


def default_run_dir(name: str) -> Path:
    """``runs/<name>-<timestamp>`` (relative to the current directory; :func:`claim_dir` adds ``-2``, ``-3``, ...
    when runs started in the same second would share it)."""
    import datetime as _dt

    return Path("runs") / f"{name}-{_dt.datetime.now():%Y%m%d-%H%M%S}"


def run_dir_for(output, name: str, resolve: Callable[[str], Path],
                out_dir: str | Path | None = None) -> tuple[Path, str]:
    """The run directory of the scenario ``name`` and the name the user gave it in (for error lines):
    ``out_dir`` (``--out``, relative to the current directory), else the ``dir`` of its ``output`` section
    (:class:`hermes.sections.OutputSpec`; ``resolve`` makes it relative to the scenario file, like every path in
    a scenario), else the default ``runs/<name>-<timestamp>`` (relative to the current directory)."""
    if out_dir is not None:
        return Path(out_dir).expanduser(), "--out"
    if output.dir is not None:
        return resolve(output.dir), "output.dir"
    return default_run_dir(name), DEFAULT_KEY


def open_run_dir(path: str | Path, key: str = "--out", *, force: bool = False, token: str | None = None) -> Path:
    """Make ``path`` the run directory (rank 0, after the set-up, holding its lock from :func:`claim_dir`, or
    ``token`` naming it): check it again (:func:`check_run_dir`), remove a previous hermes run's files — all of
    them, so no picture or VTU file of an earlier, longer run stays beside the new ones —, and mark it.
    Returns the directory."""
    path = Path(path)
    check_run_dir(path, key, force=force, token=token)
    confirm(path, key)  # still the directory this process locked (not one made at its name since)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if read_marker(path) is None:
            write_marker(path, "run")
        clear_dir(path)
        write_marker(path, "run", marker_name(path))  # this version's marker, with this run's file mode
    except OSError as err:
        raise RunDirError(f"{key}: cannot prepare {path} ({err.strerror or type(err).__name__})") from None
    return path


def write_records(out: Path, summary: dict, rows: list[dict], columns: list[str]) -> None:
    """The records so far (rank 0, after every phase): phases.csv, then summary.json (``complete`` false
    until the end), each atomically, so the summary never lists a phase the CSV lacks — into the directory this
    process locked, never another one made at its name meanwhile (:func:`hermes.claims.opened`)."""
    with opened(out) as fd:
        write_csv(out / "phases.csv", rows, columns, dir_fd=fd)
        write_json(out / "summary.json", summary, dir_fd=fd)


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


def records_partitions(output) -> bool:
    """Whether a run keeps every phase's per-cell arrays (partitions.npz, geometry.npz), as its ``output``
    section asks: for themselves, the pictures, the VTU files or the trace."""
    return bool(output.partitions or output.pictures or output.vtu or output.trace_spec is not None)


def scenario_yaml(sc) -> str:
    """The text of the run directory's scenario.yaml (a checkpoint records its SHA-256)."""
    from hermes.loaders import dump_yaml

    return dump_yaml(sc.to_dict(), sort_keys=False)


def write_run(out_dir: str | Path, scenario_yaml: str, output, result, columns: list[str], partitions: dict, mesh,
              geometry: dict | None = None) -> Path:
    """Write a run directory's result files (rank 0): scenario.yaml (``scenario_yaml``: its text), phases.csv
    (the ``columns`` of the ``result``'s per-rank rows, :class:`hermes.lifecycle.records.RunResult`),
    geometry.npz and partitions.npz (when the scenario's ``output`` section records them,
    :func:`records_partitions`) and summary.json (the result's summary), each atomically. Returns the
    directory."""
    out = Path(out_dir)
    confirm(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise output_error(out, err) from None
    with opened(out) as fd:
        write_atomic(out / "scenario.yaml", scenario_yaml, dir_fd=fd)
        write_csv(out / "phases.csv", result.ranks, columns, dir_fd=fd)
        if records_partitions(output):
            geo = base_geometry(mesh)
            geo.update(geometry or {})
            write_npz(out / "geometry.npz", dir_fd=fd, **geo)
            write_npz(out / "partitions.npz", dir_fd=fd, **partitions)
        write_json(out / "summary.json", dict(result.summary), dir_fd=fd)
    return out

