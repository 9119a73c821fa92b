"""Cell meshes from polygons: CSR polygons or same-size cells → :class:`~hermes.data.mesh.Mesh`.

A 2-D cell mesh is stored as CSR polygons (cell ``i`` has the nodes
``cell_nodes[cell_ptr[i]:cell_ptr[i+1]]`` of ``points``, in order). :func:`mesh_from_polygons` builds
its dual graph (cells sharing a side) with vertex-average coordinates, :func:`mesh_from_cells` does
the same for triangles or quadrilaterals after orienting them counter-clockwise;
:func:`polygon_facets` and :func:`polygon_areas` give the sides and signed areas (shoelace formula).
Used by the mesh generators (:mod:`hermes.data.cfd_meshes`, which re-exports every public name here)
and by :mod:`hermes.data.meshinfo`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hermes.data.mesh import Mesh, csr_from_edges, validate_graph
from hermes.errors import MeshError

__all__ = [
    "mesh_from_cells",
    "mesh_from_polygons",
    "polygon_areas",
    "polygon_facets",
]


def _next_positions(cell_ptr: NDArray[np.int64]) -> NDArray[np.int64]:
    """For each position in ``cell_nodes``, the position of the next node of the same polygon."""
    sizes = np.diff(cell_ptr)
    nxt = np.arange(int(cell_ptr[-1]), dtype=np.int64) + 1
    nonempty = sizes > 0
    nxt[cell_ptr[1:][nonempty] - 1] = cell_ptr[:-1][nonempty]  # the last side closes the polygon
    return nxt


def polygon_facets(
    cell_ptr: NDArray[np.int64], cell_nodes: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The sides (facets) of 2-D cell polygons.

    Parameters
    ----------
    cell_ptr, cell_nodes : ndarray of int64
        CSR polygons: cell ``i`` has nodes ``cell_nodes[cell_ptr[i]:cell_ptr[i+1]]`` in order.

    Returns
    -------
    facets : ndarray of int64, shape (F, 2)
        One row per polygon side, the node pair sorted (smaller first); ``F = len(cell_nodes)``.
    owner : ndarray of int64, shape (F,)
        The cell of each side.
    """
    owner = np.repeat(np.arange(cell_ptr.size - 1, dtype=np.int64), np.diff(cell_ptr))
    nxt = _next_positions(cell_ptr)
    return np.sort(np.column_stack([cell_nodes, cell_nodes[nxt]]), axis=1), owner


def polygon_areas(
    points: NDArray[np.float64], cell_ptr: NDArray[np.int64], cell_nodes: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Signed area of each CSR polygon (shoelace formula); positive when counter-clockwise."""
    nxt = _next_positions(cell_ptr)
    x, y = points[cell_nodes, 0], points[cell_nodes, 1]
    owner = np.repeat(np.arange(cell_ptr.size - 1, dtype=np.int64), np.diff(cell_ptr))
    return 0.5 * np.bincount(owner, weights=x * y[nxt] - x[nxt] * y, minlength=cell_ptr.size - 1)


def mesh_from_polygons(
    points: NDArray[np.float64],
    cell_ptr: NDArray[np.int64],
    cell_nodes: NDArray[np.int64],
    *,
    name: str,
    meta: dict | None = None,
    check: bool = True,
) -> Mesh:
    """A cell mesh from CSR polygons: dual graph (cells sharing a side), vertex-average coordinates.

    Parameters
    ----------
    points : ndarray, shape (N, 2)
    cell_ptr, cell_nodes : ndarray of int64
        Cell ``i`` is the polygon ``points[cell_nodes[cell_ptr[i]:cell_ptr[i+1]]]``.
    name : str
    meta : dict, optional
    check : bool
        Raise on a side shared by more than two cells and run
        :func:`~hermes.data.mesh.validate_graph`. With ``check=False`` nothing is checked (node
        indices must be in range): :mod:`hermes.data.meshinfo` builds broken meshes this way to
        report their problems; the cells of a side shared ``k > 2`` times get ``k − 1`` edges.

    Returns
    -------
    Mesh
        Unit weights; the polygons as given.
    """
    pts = np.ascontiguousarray(np.asarray(points, dtype=np.float64)[:, :2])
    cell_ptr = np.asarray(cell_ptr, dtype=np.int64)
    cell_nodes = np.asarray(cell_nodes, dtype=np.int64)
    n = cell_ptr.size - 1
    facets, owner = polygon_facets(cell_ptr, cell_nodes)
    keys = facets[:, 0] * pts.shape[0] + facets[:, 1]
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    if check and ks.size > 2 and np.any(ks[2:] == ks[:-2]):
        raise MeshError(f"mesh '{name}': non-manifold: an edge is shared by more than 2 cells")
    same = np.flatnonzero(ks[1:] == ks[:-1])
    xadj, adjncy = csr_from_edges(n, np.column_stack([owner[order[same]], owner[order[same + 1]]]))
    sizes = np.diff(cell_ptr)
    if n and np.all(sizes == sizes[0]):  # same arithmetic as the meshio reader: exact round trips
        coords = pts[cell_nodes.reshape(n, int(sizes[0]))].mean(axis=1)
    else:
        coords = np.zeros((n, 2))
        np.add.at(coords, owner, pts[cell_nodes])
        coords /= np.maximum(sizes, 1)[:, None]
    mesh = Mesh(name=name, xadj=xadj, adjncy=adjncy, weights=np.ones(n), coords=coords, points=pts,
                cell_ptr=cell_ptr, cell_nodes=cell_nodes, meta=dict(meta or {}))
    if check:
        validate_graph(mesh)
    return mesh


def mesh_from_cells(
    points: NDArray[np.float64],
    cells: NDArray[np.int64],
    *,
    name: str,
    meta: dict | None = None,
) -> Mesh:
    """A checked cell mesh from points and same-size cells, oriented counter-clockwise.

    Parameters
    ----------
    points : ndarray, shape (N, 2) or (N, 3)
        Only x and y are used; points no cell uses are removed.
    cells : ndarray of int64, shape (T, k)
        Triangles (k = 3) or quadrilaterals (k = 4). Clockwise cells are reversed.
    name : str
    meta : dict, optional

    Returns
    -------
    Mesh
        See :func:`mesh_from_polygons`; validated (symmetric, connected).

    Raises
    ------
    MeshError
        Out-of-range node, a side shared by more than two cells, a disconnected dual graph.
    """
    pts = np.asarray(points, dtype=np.float64)[:, :2]
    c = np.asarray(cells, dtype=np.int64)
    if c.ndim != 2 or c.shape[1] < 3 or c.size == 0:
        raise MeshError(f"mesh '{name}': cells must be a non-empty (T, k ≥ 3) array")
    if c.min() < 0 or c.max() >= pts.shape[0]:
        raise MeshError(f"mesh '{name}': cell node index out of range 0..{pts.shape[0] - 1}")
    used = np.unique(c)
    if used.size != pts.shape[0]:
        renum = np.full(pts.shape[0], -1, dtype=np.int64)
        renum[used] = np.arange(used.size)
        pts, c = pts[used], renum[c]
    n, k = c.shape
    cell_ptr = np.arange(0, k * n + 1, k, dtype=np.int64)
    cw = polygon_areas(pts, cell_ptr, c.ravel()) < 0
    if np.any(cw):
        c = c.copy()
        c[cw] = c[cw, ::-1]
    return mesh_from_polygons(pts, cell_ptr, c.ravel(), name=name, meta=meta)
