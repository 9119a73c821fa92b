"""Mesh and graph readers and the mesh writer: meshio formats → dual graph, dispatch by suffix.

Every reader returns a :class:`~hermes.data.mesh.Mesh` whose work units are numbered ``0..n-1`` in
file order, checked by :func:`~hermes.data.mesh.validate_graph` (symmetric, no self loops, positive
weights, connected). Every failure — missing file, unreadable or corrupt content, unsupported
format, no cells — raises :class:`~hermes.errors.MeshError` with one line naming the file.

Formats
-------
``.graph`` / ``.chaco`` / ``.metis``
    Chaco/METIS adjacency lists (:func:`read_chaco`), coordinates from a sibling ``.xyz``/``.coords``.
``.mtx``
    Matrix Market sparsity pattern (:func:`read_matrix_market`), coordinates from ``<stem>_coord.mtx``.
anything else
    Cell meshes read by meshio (``.msh``, ``.vtk``, ``.vtu``, ``.xdmf``, ...; :func:`read_meshio`).

The two graph formats are read (and Chaco written) by :mod:`hermes.data.formats`, re-exported here;
:func:`write_mesh` writes a mesh with cell polygons through meshio.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from hermes.data.formats import (
    GRAPH_SUFFIXES,
    existing_file,
    one_line,
    planar_coords,
    read_chaco,
    read_matrix_market,
    validated_mesh,
)
from hermes.data.mesh import SOLID_TYPES, Mesh, Solid, csr_from_edges
from hermes.errors import MeshError, OutputError
from hermes.files import write_through

__all__ = ["check_writable_format", "dropped_text", "read_mesh", "read_meshio", "write_mesh"]

log = logging.getLogger(__name__)

_UNITS = ("cells", "nodes")

# Facets (edges in 2-D, faces in 3-D) and edges of the linear cells, by local corner index,
# in meshio/VTK node ordering. Higher-order cells use their corner nodes, which come first.
_CORNERS = {"triangle": 3, "quad": 4, "tetra": 4, "hexahedron": 8, "wedge": 6, "pyramid": 5}
_FACETS_3D = {
    "tetra": [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)],
    "hexahedron": [(0, 1, 2, 3), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)],
    "wedge": [(0, 1, 2), (3, 4, 5), (0, 1, 4, 3), (1, 2, 5, 4), (2, 0, 3, 5)],
    "pyramid": [(0, 1, 2, 3), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)],
}
_EDGES_3D = {
    "tetra": [(0, 1), (1, 2), (2, 0), (0, 3), (1, 3), (2, 3)],
    "hexahedron": [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4),
                   (0, 4), (1, 5), (2, 6), (3, 7)],
    "wedge": [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (0, 3), (1, 4), (2, 5)],
    "pyramid": [(0, 1), (1, 2), (2, 3), (3, 0), (0, 4), (1, 4), (2, 4), (3, 4)],
}


# --------------------------------------------------------------------------------------------
# dispatch
# --------------------------------------------------------------------------------------------


def read_mesh(path: str | os.PathLike, *, units: str = "cells", connected: bool = True) -> Mesh:
    """Read a mesh or graph file, choosing the reader by the file suffix.

    Parameters
    ----------
    path : str or path-like
        ``.graph``, ``.chaco``, ``.metis`` → :func:`read_chaco`; ``.mtx`` → :func:`read_matrix_market`;
        any other suffix → :func:`read_meshio`.
    units : {"cells", "nodes"}
        For cell meshes: whether work units are the cells (dual graph) or the nodes (nodal graph).
        Graph files (Chaco, Matrix Market) already are graphs of work units; ``units`` is ignored.
    connected : bool
        Refuse a disconnected graph (what ``hermes run`` needs); False reads it anyway, for ``hermes mesh info``
        to count its components.

    Returns
    -------
    Mesh

    Raises
    ------
    MeshError
        One line naming the file, for any missing, unreadable, unsupported or invalid input.

    Examples
    --------
    The shipped 20×19 grid (from a clone's top directory): 380 cells, the graph of cells sharing an edge:

    >>> from hermes.data.io import read_mesh
    >>> mesh = read_mesh("meshes/grid20x19.vtu")
    >>> mesh.xadj.size - 1, mesh.coords.shape, int(mesh.adjncy.size // 2)
    (380, (380, 2), 721)
    >>> read_mesh("meshes/grid20x19.vtu", units="nodes").xadj.size - 1
    420
    >>> read_mesh("meshes/absent.vtu")
    Traceback (most recent call last):
    ...
    hermes.errors.MeshError: ...absent.vtu...
    """
    if units not in _UNITS:
        raise MeshError(f"unknown work units {units!r}: expected one of {', '.join(_UNITS)}")
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in GRAPH_SUFFIXES:
        return read_chaco(p, connected=connected)
    if suffix == ".mtx":
        return read_matrix_market(p, connected=connected)
    return read_meshio(p, units=units, connected=connected)


# --------------------------------------------------------------------------------------------
# meshio
# --------------------------------------------------------------------------------------------


def meshio_read(path: Path):
    """``meshio.read`` with its console output captured and every failure turned into MeshError.

    meshio 5.3 prints to the console and calls ``sys.exit(1)`` when no reader accepts a file, so
    ``SystemExit`` is caught here too; the message it printed becomes the one-line reason.
    """
    import meshio

    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            mesh = meshio.read(str(path))
    except (Exception, SystemExit) as err:
        printed = [line.strip() for line in captured.getvalue().splitlines() if line.strip()]
        reason = next((line for line in printed if not line.startswith("Error:")), "")
        reason = reason or (one_line(err) if not isinstance(err, SystemExit) else "")
        reason = reason or (printed[0] if printed else type(err).__name__)
        if "deduce file format" in reason or "Unknown file format" in reason:
            raise MeshError(f"unsupported mesh format '{path.suffix}' of {path}") from None
        raise MeshError(f"cannot read mesh file {path}: {reason}") from None
    for line in captured.getvalue().splitlines():
        if line.strip():
            log.debug("meshio: %s", line.strip())
    return mesh


def _cell_dim(cell_type: str) -> int:
    from meshio._mesh import topological_dimension

    if cell_type.startswith("polygon"):
        return 2
    if cell_type.startswith("polyhedron"):
        return 3
    return topological_dimension.get(cell_type, -1)


def _base_type(cell_type: str) -> str:
    """The linear cell type whose corners a (possibly higher-order) cell type starts with."""
    if cell_type.startswith("polygon"):
        return "polygon"
    for base in ("triangle", "quad", "tetra", "hexahedron", "wedge", "pyramid"):
        if cell_type.startswith(base):
            return base
    return cell_type


def _blocks(mesh, path: Path) -> tuple[int, list[tuple[str, NDArray[np.int64]]], dict[str, int]]:
    """The top dimension, its cell blocks as (base type, corner node array) pairs, and the cells of lower
    dimensions left out, counted by meshio type in file order (gmsh's boundary lines and vertices, the faces
    of a volume mesh: ``{"line": 40, "vertex": 4}``)."""
    dims = {block.type: _cell_dim(block.type) for block in mesh.cells if len(block.data)}
    if not dims or max(dims.values()) < 2:
        raise MeshError(f"{path}: no 2-D or 3-D cells")
    dim = max(dims.values())
    blocks, dropped = [], {}
    for block in mesh.cells:
        if dims.get(block.type) != dim:
            if len(block.data):
                dropped[block.type] = dropped.get(block.type, 0) + len(block.data)
            continue
        base = _base_type(block.type)
        if base == "polygon":
            data = np.asarray(block.data, dtype=np.int64)
            if data.ndim != 2:
                raise MeshError(f"{path}: unsupported variable-size polygon block")
        elif base in _CORNERS:
            data = np.asarray(block.data, dtype=np.int64)[:, : _CORNERS[base]]
        else:
            raise MeshError(f"{path}: unsupported cell type '{block.type}'")
        blocks.append((base, data))
    return dim, blocks, dropped


def _local_facets(base: str, k: int, dim: int) -> list[tuple[int, ...]]:
    if dim == 2:
        return [(i, (i + 1) % k) for i in range(k)]
    return _FACETS_3D[base]


def _local_edges(base: str, k: int, dim: int) -> list[tuple[int, ...]]:
    if dim == 2:
        return [(i, (i + 1) % k) for i in range(k)]
    return _EDGES_3D[base]


def _dual_edges(blocks: list[tuple[str, NDArray[np.int64]]], dim: int, path: Path) -> NDArray[np.int64]:
    """Pairs of cells sharing a facet, by sorting every facet's node tuple (vectorised)."""
    width = 2 if dim == 2 else 4
    facets, owners = [], []
    offset = 0
    for base, data in blocks:
        ncell, k = data.shape
        for local in _local_facets(base, k, dim):
            f = np.full((ncell, width), -1, dtype=np.int64)
            f[:, width - len(local) :] = data[:, list(local)]
            facets.append(f)
            owners.append(np.arange(offset, offset + ncell, dtype=np.int64))
        offset += ncell
    fac = np.sort(np.concatenate(facets), axis=1)  # padding −1 sorts first: a triangle ≠ any quad
    own = np.concatenate(owners)
    order = np.lexsort(fac.T[::-1])  # facets in lexicographic order: equal facets are adjacent
    fs = fac[order]
    same = np.all(fs[1:] == fs[:-1], axis=1)  # same[i]: sorted facet i equals facet i + 1
    triple = np.flatnonzero(same[1:] & same[:-1])
    if triple.size:
        nodes = " ".join(str(v) for v in fs[triple[0]] if v >= 0)
        raise MeshError(f"{path}: non-manifold mesh: facet with nodes {nodes} is shared by more than 2 cells")
    pairs = np.flatnonzero(same)
    return np.column_stack([own[order[pairs]], own[order[pairs + 1]]])


def read_meshio(path: str | os.PathLike, *, units: str = "cells", connected: bool = True) -> Mesh:
    """Read a cell mesh with meshio and build the graph of its work units.

    Parameters
    ----------
    path : str or path-like
        Any format meshio reads (gmsh ``.msh``, ``.vtk``, ``.vtu``, ``.xdmf`` with h5py, ...).
    units : {"cells", "nodes"}
        ``"cells"``: work units are the cells of the highest topological dimension present
        (triangles/quads/polygons in 2-D, tetrahedra/hexahedra/wedges/pyramids in 3-D; lines and
        vertices, which gmsh files carry for boundaries, are ignored), numbered block by block in
        file order; the graph is the dual graph (cells sharing an edge in 2-D, a face in 3-D);
        ``coords`` are the cells' vertex averages; in 2-D each unit's polygon is its corner nodes.
        ``"nodes"``: work units are the mesh nodes used by those cells (renumbered in point order
        if some points are unused; ``meta["node_ids"]`` then maps unit → point index); the graph is
        the mesh edges; ``coords`` are the node positions; no polygons.
    connected : bool
        Refuse a disconnected graph (False: read it anyway, as ``hermes mesh info`` does).

    Returns
    -------
    Mesh
        Unit weights. Points whose third coordinate is zero everywhere are kept as 2-D. ``meta["dropped"]``
        counts the cells of lower dimensions left out by meshio type (``{"line": 40, "vertex": 4}``; empty when
        the file holds one dimension): :func:`dropped_text` says it in words, ``hermes mesh info`` and
        ``hermes run`` (one warning) tell the user.

    Raises
    ------
    MeshError
        Missing, unreadable or unsupported file; no 2-D/3-D cells; unsupported cell type; a facet
        shared by more than two cells (non-manifold); a disconnected graph.

    Notes
    -----
    Dual graph: every facet of every cell is written as its sorted node tuple (3-D triangles padded
    with −1 so they never match a quadrilateral); sorting the tuples lexicographically
    (``np.lexsort``, about twice as fast as ``np.unique(..., axis=0)``) makes equal facets adjacent,
    and the two cells of every facet occurring twice are neighbours.
    Higher-order cells (``triangle6``, ``tetra10``, ...) use their corner nodes.
    """
    if units not in _UNITS:
        raise MeshError(f"unknown work units {units!r}: expected one of {', '.join(_UNITS)}")
    path = existing_file(path)
    raw = meshio_read(path)
    points = np.asarray(raw.points, dtype=np.float64)
    if points.ndim != 2 or points.shape[0] == 0 or not 1 <= points.shape[1] <= 3:
        raise MeshError(f"{path}: no usable points")
    points = planar_coords(points)
    dim, blocks, dropped = _blocks(raw, path)
    all_nodes = np.concatenate([data.ravel() for _, data in blocks])
    if all_nodes.min() < 0 or all_nodes.max() >= points.shape[0]:
        raise MeshError(f"{path}: cell node index out of range 0..{points.shape[0] - 1}")
    meta: dict = {"format": "meshio", "path": str(path), "units": units, "dim": dim,
                  "cell_types": [base for base, _ in blocks], "dropped": dropped}

    if units == "nodes":
        used = np.unique(all_nodes)
        renumber = np.full(points.shape[0], -1, dtype=np.int64)
        renumber[used] = np.arange(used.size)
        edges = [
            data[:, list(local)]
            for base, data in blocks
            for local in _local_edges(base, data.shape[1], dim)
        ]
        xadj, adjncy = csr_from_edges(used.size, renumber[np.concatenate(edges)])
        if used.size != points.shape[0]:
            meta["node_ids"] = used
        mesh = Mesh(name=path.stem, xadj=xadj, adjncy=adjncy, weights=np.ones(used.size),
                    coords=points[used], meta=meta)
        return validated_mesh(mesh, path, connected=connected)

    n = sum(data.shape[0] for _, data in blocks)
    xadj, adjncy = csr_from_edges(n, _dual_edges(blocks, dim, path))
    coords = np.concatenate([points[data].mean(axis=1) for _, data in blocks])
    cell_ptr = cell_nodes = poly_points = None
    if dim == 2:
        sizes = np.concatenate([np.full(data.shape[0], data.shape[1], dtype=np.int64) for _, data in blocks])
        cell_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=cell_ptr[1:])
        cell_nodes = np.concatenate([data.ravel() for _, data in blocks])
        poly_points = points
    solid = None
    if dim == 3 and points.shape[1] == 3 and all(base in SOLID_TYPES for base, _ in blocks):
        sizes = np.concatenate([np.full(data.shape[0], data.shape[1], dtype=np.int64) for _, data in blocks])
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=ptr[1:])
        types = np.concatenate([np.full(data.shape[0], SOLID_TYPES[base][0], dtype=np.uint8) for base, data in blocks])
        solid = Solid(points, ptr, np.concatenate([data.ravel() for _, data in blocks]).astype(np.int64), types)
    mesh = Mesh(name=path.stem, xadj=xadj, adjncy=adjncy, weights=np.ones(n), coords=coords,
                points=poly_points, cell_ptr=cell_ptr, cell_nodes=cell_nodes, meta=meta, solid=solid)
    return validated_mesh(mesh, path, connected=connected)


def dropped_text(mesh: Mesh) -> str | None:
    """The cells the meshio reader left out of ``mesh``, in words (``"40 line, 4 vertex"``), or None when it
    kept every cell of the file (or the mesh is not a meshio file's)."""
    dropped = mesh.meta.get("dropped") or {}
    return ", ".join(f"{count} {kind}" for kind, count in dropped.items()) or None


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------


_MESHIO_TYPES = {3: "triangle", 4: "quad"}


def check_writable_format(path: str | os.PathLike) -> Path:
    """``path`` if its suffix names a format meshio writes, else MeshError listing the common ones."""
    import meshio

    p = Path(path)
    suffix = "".join(p.suffixes[-2:]).lower() if p.suffix.lower() == ".gz" else p.suffix.lower()
    if suffix not in meshio.extension_to_filetypes:
        raise MeshError(f"{p}: unknown mesh format {suffix or '(no suffix)'!r}; use .vtu, .msh, .vtk, .xdmf or "
                        f"another meshio suffix")
    return p


def write_mesh(mesh: Mesh, path: str | os.PathLike) -> Path:
    """Write a mesh with cell polygons through meshio; the format follows the suffix.

    Parameters
    ----------
    mesh : Mesh
        Must have polygons (``points``, ``cell_ptr``, ``cell_nodes``).
    path : str or path-like
        ``.vtu`` (binary, zlib-compressed), ``.msh`` (gmsh 2.2 binary) or any meshio format.

    Returns
    -------
    Path

    Notes
    -----
    Consecutive cells with the same number of nodes form one meshio block, so the cell order (the
    global ids) survives a round trip through :func:`hermes.data.io.read_mesh`. Points are written
    with a zero third coordinate, which the reader drops again.
    """
    import meshio

    if not mesh.has_polygons or mesh.cell_nodes is None:
        raise MeshError(f"mesh '{mesh.name}' has no cell polygons to write")
    p = check_writable_format(path)
    sizes = np.diff(mesh.cell_ptr)
    breaks = np.flatnonzero(np.diff(sizes)) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [sizes.size]])
    blocks = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        k = int(sizes[s])
        data = mesh.cell_nodes[mesh.cell_ptr[s] : mesh.cell_ptr[e]].reshape(e - s, k)
        blocks.append((_MESHIO_TYPES.get(k, f"polygon{k}" if k > 4 else "polygon"), data))
    pts = mesh.points
    if pts.shape[1] == 2:
        pts = np.column_stack([pts, np.zeros(pts.shape[0])])
    out = meshio.Mesh(pts, blocks)
    suffix = p.suffix.lower()
    def write(tmp: str) -> None:
        if suffix == ".msh":  # gmsh wants physical / geometrical tags: one surface, tag 1
            tags = [np.ones(len(data), dtype=np.int32) for _, data in blocks]
            out.cell_data = {"gmsh:physical": tags, "gmsh:geometrical": tags}
            meshio.write(tmp, out, file_format="gmsh22", binary=True)
        elif suffix == ".vtu":
            meshio.write(tmp, out, file_format="vtu", binary=True, compression="zlib")
        else:
            meshio.write(tmp, out)

    # written in a private directory and renamed onto p: a file already at p stays as it was if the writer
    # fails, and a symlink at p is replaced, never written through
    try:
        write_through(p, write)
    except OutputError as err:
        raise MeshError(str(err)) from None
    except Exception as err:  # a meshio writer that cannot take this mesh (e.g. su2 in meshio 5.3: TypeError)
        raise MeshError(f"cannot write {p} as {suffix}: meshio's writer failed ({one_line(err) or type(err).__name__})"
                        ) from None
    return p
