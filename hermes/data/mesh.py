"""The global (serial) view of a mesh: work units, their dual graph, weights and geometry.

A :class:`Mesh` is what a reader or generator produces on one rank before distribution. Work units
("cells") are numbered ``0..n-1``; that number is their *global id* for the whole run. Adjacency is
stored in CSR form (``xadj``, ``adjncy``), symmetric, without self loops, as METIS expects.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.errors import MeshError

__all__ = ["COORD_MAX", "WEIGHT_MAX", "Mesh", "Solid", "SOLID_TYPES", "csr_from_edges", "validate_graph"]

#: largest coordinate magnitude: squared distances (disc regions, areas) stay finite (hermes.scenario.BIG)
COORD_MAX = 1e100
#: largest unit weight a mesh file may give: the run's loads stay finite (hermes.scenario.BIG)
WEIGHT_MAX = 1e100


#: the 3-D cell types hermes reads, by meshio name, with their VTK type id and corner count
SOLID_TYPES = {"tetra": (10, 4), "hexahedron": (12, 8), "wedge": (13, 6), "pyramid": (14, 5)}


@dataclass(frozen=True, eq=False)
class Solid:
    """The 3-D cells of a volume mesh, for its pictures and VTU files (the work units are its cells).

    Attributes
    ----------
    points : ndarray of float64, shape (m, 3)
        Node coordinates.
    cell_ptr, cell_nodes : ndarray of int64
        CSR corner lists: cell ``i`` has the corners ``cell_nodes[cell_ptr[i]:cell_ptr[i+1]]`` in VTK order.
    cell_types : ndarray of uint8, shape (n,)
        The VTK type id of every cell (:data:`SOLID_TYPES`: 10 tetra, 12 hexahedron, 13 wedge, 14 pyramid).
    """

    points: NDArray[np.float64]
    cell_ptr: NDArray[np.int64]
    cell_nodes: NDArray[np.int64]
    cell_types: NDArray[np.uint8]


@dataclass(frozen=True, eq=False)
class Mesh:
    """A graph of work units with coordinates and, optionally, drawable cell polygons.

    Attributes
    ----------
    name : str
        A short name (file stem or generator spec) used in outputs.
    xadj, adjncy : ndarray of int64
        Symmetric CSR adjacency of the work units (the dual graph for a cell mesh).
    weights : ndarray of float64
        Work weight of each unit (computational complexity, thesis §10.2).
    coords : ndarray of float64, shape (n, d)
        A representative point of each unit (cell centroid or vertex position), d = 2 or 3.
    edge_weights : ndarray of float64 or None
        Optional weight per CSR entry (same length as ``adjncy``), symmetric.
    points, cell_ptr, cell_nodes : ndarray or None
        Optional drawable geometry: node coordinates and, per unit ``i``, the polygon
        ``points[cell_nodes[cell_ptr[i]:cell_ptr[i+1]]]``. ``None`` for pure graphs (.graph, .mtx).
    solid : Solid or None
        The 3-D cells of a volume mesh (``points`` etc. stay ``None``: the units are not polygons).
    """

    name: str
    xadj: NDArray[np.int64]
    adjncy: NDArray[np.int64]
    weights: NDArray[np.float64]
    coords: NDArray[np.float64]
    edge_weights: NDArray[np.float64] | None = None
    points: NDArray[np.float64] | None = None
    cell_ptr: NDArray[np.int64] | None = None
    cell_nodes: NDArray[np.int64] | None = None
    meta: dict = field(default_factory=dict)
    solid: Solid | None = None

    @property
    def n_cells(self) -> int:
        return int(self.xadj.size - 1)

    @property
    def n_edges(self) -> int:
        """Number of undirected edges."""
        return int(self.adjncy.size // 2)

    @property
    def dim(self) -> int:
        return int(self.coords.shape[1])

    @cached_property
    def degree(self) -> NDArray[np.int64]:
        return np.diff(self.xadj)

    @cached_property
    def adjacency(self) -> sp.csr_array:
        """The adjacency as a scipy CSR array (entries are edge weights, or 1)."""
        data = self.edge_weights if self.edge_weights is not None else np.ones(self.adjncy.size)
        n = self.n_cells
        return sp.csr_array((data, self.adjncy, self.xadj), shape=(n, n))

    @property
    def has_polygons(self) -> bool:
        return self.cell_ptr is not None and self.points is not None

    def with_weights(self, weights: NDArray[np.float64]) -> Mesh:
        """A new mesh with other unit weights (same graph and geometry)."""
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (self.n_cells,):
            raise MeshError(f"weights must have shape ({self.n_cells},), got {w.shape}")
        return replace(self, weights=w)


def csr_from_edges(n: int, edges: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Symmetric CSR (xadj, adjncy) from an (m, 2) array of undirected edges.

    Duplicates and self loops are removed; neighbour lists are sorted. Edges become 1-D keys ``i·n + j``
    sorted once (np.unique on rows hashes first and is ~30× slower on 3·10⁶ edges).
    """
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    e = e[e[:, 0] != e[:, 1]]
    keys = np.sort(np.concatenate([e[:, 0] * n + e[:, 1], e[:, 1] * n + e[:, 0]]))
    if keys.size:
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // n, minlength=n), out=xadj[1:])
    return xadj, keys % n


def validate_graph(mesh: Mesh, *, require_connected: bool = True) -> None:
    """Raise :class:`MeshError` with one line if the mesh graph is unusable.

    Checks shapes, index ranges, symmetry, self loops, positive finite weights up to :data:`WEIGHT_MAX`,
    finite coordinates up to :data:`COORD_MAX` in magnitude (and finite polygon nodes), and (by default)
    connectivity — a disconnected dual graph cannot be balanced by diffusion on its subdomains.
    """
    n = mesh.n_cells
    if n <= 0:
        raise MeshError(f"mesh '{mesh.name}' has no cells")
    if mesh.xadj[0] != 0 or np.any(np.diff(mesh.xadj) < 0) or mesh.xadj[-1] != mesh.adjncy.size:
        raise MeshError(f"mesh '{mesh.name}': malformed CSR adjacency")
    if mesh.adjncy.size and (mesh.adjncy.min() < 0 or mesh.adjncy.max() >= n):
        raise MeshError(f"mesh '{mesh.name}': neighbour index out of range 0..{n - 1}")
    if mesh.weights.shape != (n,) or not np.all(np.isfinite(mesh.weights)) or np.any(mesh.weights <= 0):
        raise MeshError(f"mesh '{mesh.name}': unit weights must be {n} positive finite numbers")
    if mesh.weights.max() > WEIGHT_MAX:
        raise MeshError(f"mesh '{mesh.name}': unit weights must be at most {WEIGHT_MAX:g} (cell "
                        f"{int(np.argmax(mesh.weights))} has {mesh.weights.max():g})")
    if mesh.coords.ndim != 2 or mesh.coords.shape[0] != n:
        raise MeshError(f"mesh '{mesh.name}': {mesh.coords.shape[0]} coordinates for {n} units")
    bad = ~np.isfinite(mesh.coords).all(axis=1) | (np.abs(mesh.coords) > COORD_MAX).any(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise MeshError(f"mesh '{mesh.name}': unit {i} has coordinates {mesh.coords[i].tolist()}; coordinates must "
                        f"be finite and at most {COORD_MAX:g} in magnitude")
    if mesh.points is not None and not np.isfinite(mesh.points).all():
        i = int(np.flatnonzero(~np.isfinite(mesh.points).all(axis=1))[0])
        raise MeshError(f"mesh '{mesh.name}': node {i} has non-finite coordinates {mesh.points[i].tolist()}")
    rows = np.repeat(np.arange(n), np.diff(mesh.xadj))
    if np.any(rows == mesh.adjncy):
        raise MeshError(f"mesh '{mesh.name}': graph has self loops")
    a = sp.csr_array((np.ones(mesh.adjncy.size), mesh.adjncy, mesh.xadj), shape=(n, n))
    if (a - a.T).count_nonzero():
        raise MeshError(f"mesh '{mesh.name}': adjacency is not symmetric")
    if require_connected and n > 1:
        ncomp, _ = sp.csgraph.connected_components(a, directed=False)
        if ncomp > 1:
            raise MeshError(f"mesh '{mesh.name}': graph is disconnected ({ncomp} components; hermes run needs a "
                            f"connected graph: docs/LIMITS.md)")
