"""ParaView output of a run: the partitioned mesh of every phase as VTU, and a ``.pvd`` time series.

:func:`write_run_vtu` turns a run directory into ``vtu/phase-000.vtu``, ``vtu/phase-001.vtu``, ... and
``partition.pvd``; opening the ``.pvd`` in ParaView shows the whole run, one time step per phase.

What is read (see ``docs/ARCHITECTURE.md``, "Run directory"):

``geometry.npz``
    ``coords`` (required; one point per unit) and, for cell meshes, ``points``, ``cell_ptr``,
    ``cell_nodes`` (unit ``i`` is the polygon ``points[cell_nodes[cell_ptr[i]:cell_ptr[i+1]]]``).
    A phase whose mesh differs from the initial one (refinement) may carry its own geometry:
    ``coords_XXX``, ``points_XXX``, ``cell_ptr_XXX``, ``cell_nodes_XXX`` override the arrays above
    for phase ``XXX``. ``xadj``/``adjncy`` (and ``xadj_XXX``/``adjncy_XXX``) draw the edges of pure
    graphs.
``partitions.npz``
    ``owner_XXX`` (required, one per recorded phase), ``weight_XXX``, and any other array
    ``NAME_XXX`` (``NAME`` an identifier, ``XXX`` the phase): a per-unit field of that phase, written
    under ``NAME`` — e.g. ``u_XXX`` (the solution), ``level_XXX`` (the refinement level).
    ``gid_XXX`` gives the units' persistent global ids (default ``0..n-1``; a refined mesh keeps a
    cell's id while it lives and gives children new ones).
    ``migrated_XXX``, when present, is the migrated flag of phase ``XXX``; otherwise the flag is
    "owner differs from the previous recorded phase", matched by ``gid_XXX`` when both phases have one
    (units new in this phase, e.g. children of a refinement, count as not migrated) or by index when
    both phases have the same units (same count, no per-phase geometry); else it is left out.
    Missing optional arrays are skipped.

Both archives are read through :class:`hermes.viz.rundir.NpzArchive` (no pickle, a size limit, every array's
dtype and declared size checked before it is read) and checked like the pictures' input
(:func:`hermes.viz.rundir.phase_geometry`: finite coordinates, consistent CSR arrays; owners integers in
``[0, MAX_PROCESSORS)``; fields numbers of shape ``(n,)`` or ``(n, k)``); a damaged file is one line.

Cells become meshio cell blocks — ``triangle``, ``quad`` and one ``polygon`` block per larger node
count, so mixed meshes work — with the cell data ``owner`` (rank), ``weight``, ``migrated`` (0/1),
``gid`` (the unit's global id: blocks group cells by type, so the VTU order may differ from the id
order on mixed meshes) and the extra fields. Pure graphs (no polygons) become ``vertex`` cells (plus
``line`` cells for the edges) and the same arrays as point data.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from hermes.errors import HermesError
from hermes.files import file_mode, write_atomic
from hermes.viz.rundir import NpzArchive, check_owner, check_unit_array, phase_arrays, phase_geometry

__all__ = ["write_run_vtu", "partition_mesh", "write_vtu", "write_pvd", "PVD_NAME", "VTU_DIR"]

log = logging.getLogger(__name__)

#: The time-series file in the run directory, and the folder of the per-phase VTU files.
PVD_NAME = "partition.pvd"
VTU_DIR = "vtu"

#: per-phase arrays read with their own check (hermes.viz.rundir.check_unit_array); any other is a "field"
_KNOWN = {"weight": "weight", "migrated": "migrated", "gid": "gid", "level": "level"}
_BLOCK_TYPE = {3: "triangle", 4: "quad"}
#: VTK id of a 3-D cell (a run directory's ``cell_types``) → meshio block name
_SOLID_TYPE = {10: "tetra", 12: "hexahedron", 13: "wedge", 14: "pyramid"}


def write_run_vtu(run_dir: str | os.PathLike[str], *, graph_edges: bool = True) -> list[Path]:
    """Write the partitioned mesh of every recorded phase of a run directory for ParaView.

    Parameters
    ----------
    run_dir : path-like
        A run directory with ``geometry.npz`` and ``partitions.npz`` (module docstring).
    graph_edges : bool
        For pure graphs, also write the edges as ``line`` cells (from ``xadj``/``adjncy``).

    Returns
    -------
    list of pathlib.Path
        ``vtu/phase-XXX.vtu`` in phase order, then ``partition.pvd`` (timestep = phase).

    Raises
    ------
    HermesError
        If a file or required array is missing, unreadable or damaged (module docstring), an array does not
        match its phase's unit count, or ``vtu`` in the run directory is a symbolic link. Every phase is
        checked before anything is written.

    Notes
    -----
    Each file is written to a temporary file in the same directory and renamed, so a reader sees a
    complete file or none (:func:`write_vtu`, :func:`hermes.files.write_atomic`).
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise HermesError(f"run directory not found: {run}")
    with NpzArchive(run / "geometry.npz") as geo, NpzArchive(run / "partitions.npz") as parts:
        per_phase = phase_arrays(parts)
        phases = sorted(k for k, names in per_phase.items() if "owner" in names)
        if not phases:
            raise parts.error("no owner_XXX arrays")
        plans = _plans(run, geo, parts, per_phase, phases)

    out = run / VTU_DIR
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise HermesError(f"{out} is a symbolic link or not a directory: no VTU files written through it")
    out.mkdir(exist_ok=True)
    written = []
    for k, g, fields in plans:
        mesh = partition_mesh(
            g.coords, fields, points=g.points, cell_ptr=g.cell_ptr, cell_nodes=g.cell_nodes,
            cell_types=g.cell_types, xadj=g.xadj if graph_edges else None, adjncy=g.adjncy if graph_edges else None,
        )
        written.append(write_vtu(out / f"phase-{k:03d}.vtu", mesh))
    written.append(write_pvd(run / PVD_NAME, [(k, f"{VTU_DIR}/phase-{k:03d}.vtu") for k in phases]))
    log.info("wrote %d VTU files and %s in %s", len(phases), PVD_NAME, run)
    return written


def _plans(run: Path, geo: NpzArchive, parts: NpzArchive, per_phase: dict[int, list[str]],
           phases: list[int]) -> list[tuple]:
    """``(phase, geometry, fields)`` of every recorded phase, every array read and checked."""
    plans = []
    shared: dict = {}
    prev: tuple[NDArray, bool, NDArray | None] | None = None
    for k in phases:
        g = phase_geometry(geo, k, shared)
        own_geometry = any(f"{name}_{k:03d}" in geo
                           for name in ("coords", "points", "cell_ptr", "cell_nodes", "cell_types"))
        n = g.n
        owner = check_owner(parts, f"owner_{k:03d}", n, None)
        arrays = {name: check_unit_array(parts, f"{name}_{k:03d}", n, _KNOWN.get(name, "field"))
                  for name in per_phase[k] if name != "owner"}
        fields: dict[str, NDArray] = {"owner": owner.astype(np.int32)}
        if "weight" in arrays:
            fields["weight"] = arrays["weight"]
        if "migrated" in arrays:
            fields["migrated"] = arrays["migrated"]
        elif prev is None:
            fields["migrated"] = np.zeros(n, dtype=np.uint8)
        elif prev[2] is not None and "gid" in arrays:
            fields["migrated"] = _moved_by_gid(prev[2], prev[0], arrays["gid"], owner, run, k)
        elif prev[0].shape == owner.shape and not (own_geometry or prev[1]):
            fields["migrated"] = (prev[0] != owner).astype(np.uint8)
        else:
            log.info("phase %d: units renumbered and no migrated_%03d recorded: no migrated flag", k, k)
        fields.update({name: a for name, a in sorted(arrays.items()) if name not in fields})
        fields.setdefault("gid", np.arange(n, dtype=np.int64))
        plans.append((k, g, {name: _vtk_dtype(a) for name, a in fields.items()}))
        prev = (owner, own_geometry, arrays.get("gid"))
    return plans


def partition_mesh(coords: NDArray[np.float64], fields: dict[str, NDArray], *,
                   points: NDArray[np.float64] | None = None, cell_ptr: NDArray[np.int64] | None = None,
                   cell_nodes: NDArray[np.int64] | None = None, xadj: NDArray[np.int64] | None = None,
                   adjncy: NDArray[np.int64] | None = None, cell_types: NDArray[np.uint8] | None = None):
    """A :class:`meshio.Mesh` of the units with one value per unit of every field.

    Parameters
    ----------
    coords : ndarray, shape (n, d)
        A point per unit (d = 1, 2 or 3).
    fields : dict of str to ndarray of shape (n,) or (n, k)
        Per-unit values (booleans are written as uint8).
    points, cell_ptr, cell_nodes : ndarray, optional
        Cell polygons (module docstring). Given: the units are cells and ``fields`` become cell data;
        cells are grouped in blocks by node count (3 → ``triangle``, 4 → ``quad``, k ≥ 5 →
        ``polygon``), keeping the id order within a block.
    cell_types : ndarray of uint8, shape (n,), optional
        The VTK type of every 3-D cell (10 ``tetra``, 12 ``hexahedron``, 13 ``wedge``, 14 ``pyramid``): the
        cells are grouped by type instead, with their 3-D points.
    xadj, adjncy : ndarray, optional
        For pure graphs: the edges, written as ``line`` cells after the ``vertex`` cells.

    Returns
    -------
    meshio.Mesh
        Points padded to 3-D. Pure graphs: one ``vertex`` cell per unit and ``fields`` as point data.
    """
    import meshio

    data = {name: (a.astype(np.uint8) if a.dtype == bool else a) for name, a in fields.items()}
    if points is None:
        n = coords.shape[0]
        cells = [meshio.CellBlock("vertex", np.arange(n, dtype=np.int64)[:, None])]
        if xadj is not None and adjncy is not None:
            rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(xadj))
            upper = rows < adjncy
            if upper.any():
                cells.append(meshio.CellBlock("line", np.column_stack([rows[upper], adjncy[upper]])))
        return meshio.Mesh(_pad3(coords), cells, point_data=data)
    sizes = np.diff(cell_ptr)
    blocks, order = [], []
    kinds = sizes if cell_types is None else np.asarray(cell_types, dtype=np.int64)
    for t in np.unique(kinds):
        idx = np.flatnonzero(kinds == t)
        k = int(sizes[idx[0]])
        conn = cell_nodes[cell_ptr[idx][:, None] + np.arange(k)]
        name = _BLOCK_TYPE.get(k, "polygon") if cell_types is None else _SOLID_TYPE[int(t)]
        blocks.append(meshio.CellBlock(name, conn.astype(np.int64)))
        order.append(idx)
    cell_data = {name: [a[idx] for idx in order] for name, a in data.items()}
    return meshio.Mesh(_pad3(points), blocks, cell_data=cell_data)


def write_vtu(path: str | os.PathLike[str], mesh) -> Path:
    """Write a meshio mesh as binary, zlib-compressed VTU, atomically (temporary file + rename).

    meshio writes by file name (it opens the name itself), so the name is inside a fresh private directory
    (``mkdtemp``: an unpredictable name, mode 0700, created exclusively next to ``path``) where nobody else can
    plant a link; the file gets the umask's mode and is renamed onto ``path`` (``os.replace``: a symbolic
    link at ``path`` is replaced, its target untouched), then the directory is removed.
    """
    import meshio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    private = tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        tmp = os.path.join(private, "mesh.vtu")
        meshio.write(tmp, mesh, file_format="vtu")
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, file_mode())  # the umask's mode, as any file hermes writes
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return path


def write_pvd(path: str | os.PathLike[str], entries: list[tuple[float, str]]) -> Path:
    """Write a ParaView collection (``<VTKFile type="Collection">``) of ``(timestep, relative file)``.

    ParaView's PVD reader opens it as a time series: one data set per timestep.
    """
    root = ET.Element("VTKFile", type="Collection", version="0.1", byte_order="LittleEndian")
    coll = ET.SubElement(root, "Collection")
    for t, file in entries:
        ET.SubElement(coll, "DataSet", timestep=f"{t:g}", group="", part="0", file=str(file))
    ET.indent(root)
    return write_atomic(path, '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n")


# ----------------------------------------------------------------------------------------- helpers
def _vtk_dtype(a: NDArray) -> NDArray:
    """``a`` in a dtype VTK has: native byte order, booleans as uint8, half floats as float32."""
    if a.dtype == bool:
        return a.astype(np.uint8)
    if a.dtype.kind == "f" and a.dtype.itemsize < 4:
        return a.astype(np.float32)
    return a.astype(a.dtype.newbyteorder("="), copy=False)


def _pad3(x: NDArray) -> NDArray[np.float64]:
    x = np.asarray(x, dtype=np.float64)
    x = x[:, None] if x.ndim == 1 else x
    return np.column_stack([x, np.zeros((x.shape[0], 3 - x.shape[1]))]) if x.shape[1] < 3 else x[:, :3]


def _moved_by_gid(gid0: NDArray, owner0: NDArray, gid1: NDArray, owner1: NDArray, run: Path,
                  k: int) -> NDArray[np.uint8]:
    """1 where a unit of ``gid1`` existed in ``gid0`` with another owner (units new in ``gid1``: 0)."""
    if gid0.shape != owner0.shape or np.unique(gid0).size != gid0.size or np.unique(gid1).size != gid1.size:
        raise HermesError(f"cannot read {run / 'partitions.npz'}: gid arrays before phase {k} are not "
                          f"unique ids, one per unit")
    order = np.argsort(gid0)
    pos = np.minimum(np.searchsorted(gid0, gid1, sorter=order), max(gid0.size - 1, 0))
    found = gid0[order[pos]] == gid1 if gid0.size else np.zeros(gid1.size, bool)
    return (found & (owner0[order[pos]] != owner1)).astype(np.uint8)
