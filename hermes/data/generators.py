"""Generated meshes: structured grids of quadrilateral cells.

The thesis' smallest test mesh, ``grid20x19`` (thesis Table 10.2: 380 vertices, 1442 = 2 × 721
directed edges), is the dual graph of a 20 × 19 grid of square cells with 4-neighbour adjacency.
:func:`grid` builds it (and any other size) with drawable cell polygons; :func:`parse_grid_spec`
reads the ``"20x19"`` spelling used in scenarios (``mesh: {grid: 20x19}``).
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

from hermes.data.mesh import Mesh, csr_from_edges, validate_graph
from hermes.errors import MeshError

__all__ = ["grid", "parse_grid_spec", "lshape_triangles"]

_GRID_SPEC = re.compile(r"^\s*(?:grid)?\s*([+-]?\d+)\s*[xX×]\s*([+-]?\d+)\s*$")


def parse_grid_spec(spec: str) -> tuple[int, int]:
    """Parse a grid size written ``"NXxNY"`` (e.g. ``"20x19"``, also ``"grid20x19"``).

    Parameters
    ----------
    spec : str
        The size; the separator may be ``x``, ``X`` or ``×``; surrounding blanks are ignored.

    Returns
    -------
    (nx, ny) : tuple of int
        Number of cells along x and along y.

    Raises
    ------
    MeshError
        If ``spec`` is not of that form or a size is not positive.
    """
    match = _GRID_SPEC.match(spec) if isinstance(spec, str) else None
    if match is None:
        raise MeshError(f"malformed grid size {spec!r}: expected NXxNY, e.g. '20x19'")
    nx, ny = int(match.group(1)), int(match.group(2))
    if nx < 1 or ny < 1:
        raise MeshError(f"grid size {spec!r}: both sizes must be positive")
    return nx, ny


def grid(nx: int, ny: int, *, name: str | None = None) -> Mesh:
    """A structured ``nx × ny`` grid of unit square cells on ``[0, nx] × [0, ny]``.

    Parameters
    ----------
    nx, ny : int
        Number of cells along x (columns) and along y (rows), both ≥ 1.
    name : str, optional
        Mesh name; default ``f"grid{nx}x{ny}"``.

    Returns
    -------
    Mesh
        ``nx * ny`` work units (the cells), cell ``row * nx + col`` at row ``row`` (along y) and
        column ``col``; the dual graph is the 4-neighbour adjacency, with ``nx (ny - 1) + ny (nx - 1)``
        undirected edges; ``coords`` are cell centroids ``(col + ½, row + ½)``; each cell's polygon is
        its four corners in counter-clockwise order; all weights are 1.

    Raises
    ------
    MeshError
        If a size is not a positive integer.

    Notes
    -----
    ``grid(20, 19)`` is the thesis' ``grid20x19`` (Table 10.2): 380 units and 721 undirected
    (1442 directed) edges. Node ``r * (nx + 1) + c`` of ``points`` is the corner ``(c, r)``.
    """
    if isinstance(nx, bool) or isinstance(ny, bool) or not all(isinstance(v, (int, np.integer)) for v in (nx, ny)):
        raise MeshError(f"grid sizes must be integers, got {nx!r} x {ny!r}")
    nx, ny = int(nx), int(ny)
    if nx < 1 or ny < 1:
        raise MeshError(f"grid sizes must be positive, got {nx}x{ny}")
    n = nx * ny
    ids = np.arange(n, dtype=np.int64).reshape(ny, nx)
    edges = np.concatenate(
        [
            np.column_stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()]),  # left-right neighbours
            np.column_stack([ids[:-1, :].ravel(), ids[1:, :].ravel()]),  # bottom-top neighbours
        ]
    )
    xadj, adjncy = csr_from_edges(n, edges)

    col, row = np.meshgrid(np.arange(nx, dtype=np.float64), np.arange(ny, dtype=np.float64))
    coords = np.column_stack([col.ravel() + 0.5, row.ravel() + 0.5])

    px, py = np.meshgrid(np.arange(nx + 1, dtype=np.float64), np.arange(ny + 1, dtype=np.float64))
    points = np.column_stack([px.ravel(), py.ravel()])
    r, c = np.divmod(np.arange(n, dtype=np.int64), nx)
    lower_left = r * (nx + 1) + c
    cell_nodes = np.column_stack(
        [lower_left, lower_left + 1, lower_left + nx + 2, lower_left + nx + 1]
    ).ravel()
    cell_ptr = np.arange(0, 4 * n + 1, 4, dtype=np.int64)

    mesh = Mesh(
        name=name if name is not None else f"grid{nx}x{ny}",
        xadj=xadj,
        adjncy=adjncy,
        weights=np.ones(n),
        coords=coords,
        points=points,
        cell_ptr=cell_ptr,
        cell_nodes=cell_nodes,
        meta={"generator": "grid", "nx": nx, "ny": ny},
    )
    validate_graph(mesh)
    return mesh


def lshape_triangles(n: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Points and triangles of an L-shaped domain: [0,2]² minus the upper-right quadrant [1,2]×[1,2].

    Each of the ``3 n²`` squares of side 1/n is split into two triangles along alternating
    diagonals, so the mesh has ``6 n²`` triangles. Returned as (points (N, 2), triangles (T, 3)),
    ready for :func:`meshio.Mesh` and the meshio reader's dual-graph construction.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise MeshError(f"L-shape resolution must be a positive integer, got {n!r}")
    m = 2 * n
    px, py = np.meshgrid(np.arange(m + 1), np.arange(m + 1))
    node = (py * (m + 1) + px).astype(np.int64)
    r, c = np.divmod(np.arange(m * m, dtype=np.int64), m)
    keep = ~((r >= n) & (c >= n))  # drop the upper-right quadrant
    r, c = r[keep], c[keep]
    a, b = node[r, c], node[r, c + 1]
    d, e = node[r + 1, c], node[r + 1, c + 1]
    flip = (r + c) % 2 == 1
    t1 = np.where(flip[:, None], np.column_stack([a, b, e]), np.column_stack([a, b, d]))
    t2 = np.where(flip[:, None], np.column_stack([a, e, d]), np.column_stack([b, e, d]))
    tris = np.concatenate([t1, t2])
    used = np.unique(tris)
    renum = np.full(node.size, -1, dtype=np.int64)
    renum[used] = np.arange(used.size)
    points = np.column_stack([px.ravel(), py.ravel()]).astype(np.float64)[used] / n
    return points, renum[tris]
