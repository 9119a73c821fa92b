"""Adaptive refinement and coarsening of triangle meshes by newest-vertex bisection (NVB).

A :class:`TriMesh` is a conforming triangulation in *NVB form*: every triangle is stored as
``(a, b, c)``, counter-clockwise, with ``a–b`` its refinement edge and ``c`` its newest vertex.
Bisecting it at the midpoint ``m`` of ``a–b`` gives the children ``(c, a, m)`` and ``(b, c, m)``,
whose refinement edges are the parent's two other edges (Mitchell 1991; Binev, Dahmen & DeVore 2004;
the numbering of Funken, Praetorius & Wissgott 2011, "Efficient implementation of adaptive P1-FEM in
Matlab", §4).

Refinement (:func:`refine`)
    The edges of the marked triangles are marked (all three — "bisec3", 4 children — or only the
    refinement edge). The *closure* then marks the refinement edge of every triangle having a marked
    edge, until nothing changes; every triangle is then bisected at its refinement edge and, in a
    second round, each child at its own refinement edge if marked. Both triangles on an edge bisect
    it at the same midpoint, so the mesh stays conforming; NVB descendants of a triangle fall into at
    most four similarity classes, so angles stay bounded away from 0.
Coarsening (:func:`coarsen`)
    Undoes bisections: a newest vertex ``m`` is removed when every triangle around it belongs to a
    sibling pair (two leaves with the same parent) whose newest vertex is ``m`` and whose both cells
    may be coarsened — 1 pair on the boundary, 2 inside. The parent ``(a, b, c)`` is rebuilt from its
    children ``(c, a, m)`` and ``(b, c, m)`` exactly (Chen & Zhang 2010, "A coarsening algorithm on
    adaptive grids by newest vertex bisection"). Coarsening everything repeatedly returns the
    original mesh, ids included.
Identity
    Cells are sorted by global id. The children of a bisection get fresh ids ``next_gid + 2k`` and
    ``next_gid + 2k + 1`` (the first child ``(c, a, m)`` the even one), in the order of the parents'
    ids, round by round; ``next_gid`` is one more than every id alive or remembered. ``lineage[i, k]``
    is the id of cell ``i``'s ancestor at level ``k < level[i]`` (−1 beyond), so a coarsened parent
    gets its old id back. The distributed form (:mod:`hermes.data.refine_dist`) numbers alike, so a
    cell's id never depends on the partition.
Transfer
    Each operation returns an :class:`Adaptation` with a transfer matrix ``P`` (new × old cells,
    rows summing to 1): refinement copies the parent's value to its children, coarsening averages
    the two children. Hence weights: every child costs as much as its parent (work per cell is
    constant in a cell-centred solver), a coarsened parent gets the mean of its children; the
    Jacobi kernel's ``u`` and ``f`` follow the same rule. Non-float fields take the first source.
Quadrilaterals
    Quad meshes are converted to triangles first (:func:`triangulate_quads`, each quad split along
    its shorter diagonal); the triangles become the work units.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.data.mesh import Mesh, csr_from_edges
from hermes.errors import MeshError

__all__ = [
    "TriMesh", "Adaptation", "nvb_mesh", "from_mesh", "triangulate_quads", "edge_table", "nvb_closure",
    "refine", "coarsen", "dual_graph", "areas", "min_angles", "conformity_problems", "transfer_values",
    "edge_key", "edge_ends", "mark_edges", "bisect_marked", "merge_pairs", "forbidden_edges", "nvb_blocked",
    "capped_marks",
]

_K = np.int64(1 << 31)  # edge key = lo * _K + hi: vertex ids must stay below 2**31


def edge_key(u: NDArray[np.int64], v: NDArray[np.int64]) -> NDArray[np.int64]:
    """Key of the undirected edges ``u–v`` (same on every rank for the same global vertex ids)."""
    return np.minimum(u, v) * _K + np.maximum(u, v)


def edge_ends(keys: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The vertices (lo, hi) of edge keys."""
    return np.divmod(keys, _K)


def edge_table(tris: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Sorted unique edge keys and, per triangle, the index of its edges ``a–b``, ``b–c``, ``c–a``."""
    k = edge_key(tris, tris[:, [1, 2, 0]])
    keys, inv = np.unique(k.ravel(), return_inverse=True)
    return keys, inv.reshape(-1, 3).astype(np.int64)


def nvb_closure(tri2edge: NDArray[np.int64], marked: NDArray[np.bool_]) -> tuple[NDArray[np.bool_], int]:
    """Smallest superset of the marked edges in which every triangle with a marked edge has its refinement
    edge (column 0 of ``tri2edge``) marked. Returns (marked edges, number of sweeps)."""
    marked = np.array(marked, dtype=bool, copy=True)
    sweeps = 0
    while True:
        m = marked[tri2edge]
        need = (m[:, 1] | m[:, 2]) & ~m[:, 0]
        if not need.any():
            return marked, sweeps
        marked[tri2edge[need, 0]] = True
        sweeps += 1


def areas(points: NDArray[np.float64], tris: NDArray[np.int64]) -> NDArray[np.float64]:
    """Signed areas (positive for counter-clockwise triangles)."""
    p = points[tris] if points.ndim == 2 else points
    d1, d2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
    return 0.5 * (d1[:, 0] * d2[:, 1] - d1[:, 1] * d2[:, 0])


def min_angles(points: NDArray[np.float64], tris: NDArray[np.int64]) -> NDArray[np.float64]:
    """Smallest interior angle of each triangle, in radians."""
    p = points[tris]
    ang = []
    for i in range(3):
        u, v = p[:, (i + 1) % 3] - p[:, i], p[:, (i + 2) % 3] - p[:, i]
        ang.append(np.arctan2(np.abs(u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0]), np.sum(u * v, axis=1)))
    return np.min(ang, axis=0)


def dual_graph(tris: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """CSR (xadj, adjncy) of the cells sharing an edge."""
    _, t2e = edge_table(tris)
    e = t2e.ravel()
    order = np.argsort(e, kind="stable")
    same = np.flatnonzero(e[order][1:] == e[order][:-1])
    cells = order // 3
    return csr_from_edges(tris.shape[0], np.column_stack([cells[same], cells[same + 1]]))


@dataclass(frozen=True, eq=False)
class TriMesh:
    """A conforming triangle mesh in NVB form with its refinement history (see module docstring).

    Attributes
    ----------
    points : ndarray (N, 2)
        Vertex coordinates; refinement appends midpoints, coarsening removes them (order kept).
    tris : ndarray of int64 (T, 3)
        ``(a, b, c)`` counter-clockwise, refinement edge ``a–b``, newest vertex ``c``.
    gid : ndarray of int64 (T,)
        Global ids, increasing.
    level : ndarray of int64 (T,)
        Number of bisections since the initial mesh.
    lineage : ndarray of int64 (T, D), D ≥ max level
        Ids of the ancestors by level (−1 beyond ``level``).
    """

    points: NDArray[np.float64]
    tris: NDArray[np.int64]
    gid: NDArray[np.int64]
    level: NDArray[np.int64]
    lineage: NDArray[np.int64]

    @property
    def n_cells(self) -> int:
        return int(self.tris.shape[0])

    @property
    def parent(self) -> NDArray[np.int64]:
        """Id of each cell's parent, −1 for initial cells."""
        lv = np.maximum(self.level - 1, 0)
        par = self.lineage[np.arange(self.n_cells), lv] if self.lineage.shape[1] else np.full(self.n_cells, -1)
        return np.where(self.level > 0, par, -1)

    @property
    def next_gid(self) -> int:
        return int(max(self.gid.max(initial=-1), self.lineage.max(initial=-1))) + 1

    @cached_property
    def areas(self) -> NDArray[np.float64]:
        return areas(self.points, self.tris)

    @cached_property
    def centroids(self) -> NDArray[np.float64]:
        return self.points[self.tris].mean(axis=1)

    @cached_property
    def graph(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The dual graph (xadj, adjncy), by position."""
        return dual_graph(self.tris)

    def to_mesh(self, name: str = "refined", weights: NDArray[np.float64] | None = None) -> Mesh:
        """The hermes :class:`Mesh` of the cells (unit ``i`` is cell ``i``; ``meta["gid"]`` the ids)."""
        xadj, adjncy = self.graph
        w = np.ones(self.n_cells) if weights is None else np.asarray(weights, dtype=np.float64)
        return Mesh(name=name, xadj=xadj, adjncy=adjncy, weights=w, coords=self.centroids, points=self.points,
                    cell_ptr=np.arange(0, 3 * self.n_cells + 1, 3, dtype=np.int64), cell_nodes=self.tris.ravel(),
                    meta={"gid": self.gid, "level": self.level})


@dataclass(frozen=True, eq=False)
class Adaptation:
    """A refined or coarsened mesh and how values move from the old cells to the new ones.

    ``transfer`` is a sparse (new × old) matrix, rows summing to 1; ``changed`` counts bisections
    (refinement) or merges (coarsening); ``rounds`` the closure sweeps or coarsening passes done.
    """

    mesh: TriMesh
    transfer: sp.csr_array
    changed: int
    rounds: int

    @property
    def origin(self) -> NDArray[np.int64]:
        """The first (smallest-id) old cell each new cell comes from."""
        return self.transfer.indices[self.transfer.indptr[:-1]]

    def apply(self, values: NDArray) -> NDArray:
        return transfer_values(self.transfer, values)


def transfer_values(transfer: sp.csr_array, values: NDArray) -> NDArray:
    """Floats: ``transfer @ values`` (copy on refinement, mean on coarsening); others: the first source."""
    v = np.asarray(values)
    if not np.issubdtype(v.dtype, np.floating):
        return v[transfer.indices[transfer.indptr[:-1]]]
    flat = v.reshape(v.shape[0], -1)
    return np.asarray(transfer @ flat).reshape((transfer.shape[0],) + v.shape[1:])


def nvb_mesh(points: NDArray[np.float64], tris: NDArray[np.int64]) -> TriMesh:
    """An initial :class:`TriMesh`: triangles made counter-clockwise, the longest edge as refinement edge.

    Raises
    ------
    MeshError
        On malformed arrays, out-of-range vertices or a degenerate triangle.
    """
    p = np.asarray(points, dtype=np.float64)
    t = np.asarray(tris, dtype=np.int64)
    if p.ndim != 2 or p.shape[1] < 2 or t.ndim != 2 or t.shape[1] != 3 or t.shape[0] == 0:
        raise MeshError(f"refinement needs points (N, 2) and triangles (T, 3), got {p.shape} and {t.shape}")
    p = np.ascontiguousarray(p[:, :2])
    if t.min() < 0 or t.max() >= p.shape[0] or p.shape[0] >= _K:
        raise MeshError(f"triangle vertex out of range 0..{p.shape[0] - 1}")
    a = areas(p, t)
    if np.any(a == 0):
        raise MeshError(f"degenerate triangle {int(np.flatnonzero(a == 0)[0])} (zero area)")
    t = np.where((a < 0)[:, None], t[:, [0, 2, 1]], t)
    q = p[t]
    length = np.sum((q[:, [1, 2, 0]] - q) ** 2, axis=2)  # edges a-b, b-c, c-a
    j = np.argmax(length, axis=1)
    t = np.take_along_axis(t, (j[:, None] + np.arange(3)) % 3, axis=1)
    n = t.shape[0]
    return TriMesh(p, t, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros((n, 0), np.int64))


def triangulate_quads(points: NDArray[np.float64], cell_ptr: NDArray[np.int64],
                      cell_nodes: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Triangles of a mesh of triangles and quadrilaterals; quads split along their shorter diagonal.

    Returns (triangles (T, 3), origin (T,): the polygon each triangle comes from).
    """
    size = np.diff(cell_ptr)
    if np.any((size != 3) & (size != 4)):
        raise MeshError("refinement handles triangles and quadrilaterals only")
    start = cell_ptr[:-1]
    tri_i = np.flatnonzero(size == 3)
    quad_i = np.flatnonzero(size == 4)
    tri = cell_nodes[start[tri_i, None] + np.arange(3)]
    q = cell_nodes[start[quad_i, None] + np.arange(4)]
    d02 = np.sum((points[q[:, 2]] - points[q[:, 0]]) ** 2, axis=1)
    d13 = np.sum((points[q[:, 3]] - points[q[:, 1]]) ** 2, axis=1)
    alt = d13 < d02
    q = np.where(alt[:, None], q[:, [1, 2, 3, 0]], q)
    halves = np.stack([q[:, [0, 1, 2]], q[:, [0, 2, 3]]], axis=1).reshape(-1, 3)
    tris = np.concatenate([tri, halves])
    origin = np.concatenate([tri_i, np.repeat(quad_i, 2)])
    order = np.argsort(origin, kind="stable")
    return tris[order], origin[order]


def from_mesh(mesh: Mesh) -> tuple[TriMesh, NDArray[np.int64]]:
    """The :class:`TriMesh` of a cell mesh with polygons and, per triangle, the unit it comes from.

    Quadrilaterals become two triangles each (new work units); triangle meshes keep their numbering.
    """
    if not mesh.has_polygons or mesh.cell_nodes is None:
        raise MeshError(f"mesh '{mesh.name}' has no cell polygons: refinement needs a triangle or quad mesh")
    tris, origin = triangulate_quads(mesh.points[:, :2], mesh.cell_ptr, mesh.cell_nodes)
    return nvb_mesh(mesh.points, tris), origin


# -- the array kernels shared by the serial and the distributed versions ------------------------------------------

def _pad(lineage: NDArray[np.int64], width: int) -> NDArray[np.int64]:
    if lineage.shape[1] >= width:
        return lineage
    return np.concatenate([lineage, np.full((lineage.shape[0], width - lineage.shape[1]), -1, np.int64)], axis=1)


def bisect_marked(tris: NDArray[np.int64], gid: NDArray[np.int64], level: NDArray[np.int64],
                  lineage: NDArray[np.int64], mid_keys: NDArray[np.int64], mid_vid: NDArray[np.int64],
                  next_gid: int, number=None):
    """Bisect, round after round, every triangle whose refinement edge is in ``mid_keys`` (sorted) at the
    vertex ``mid_vid``. Returns (tris, gid, level, lineage, src, bisections, rounds); ``src[i]`` is the
    index of the old cell new cell ``i`` descends from; cells stay sorted by id.

    The children of a round's ``k``-th bisected parent in id order get the ids ``next + 2k`` and
    ``next + 2k + 1``, ``next`` being one more than every id before the round (module docstring). In
    the distributed form the parents of a round lie on several ranks: ``number(parent ids)`` — a
    collective, called once per round on every rank until it reports no parent anywhere — returns the
    first child's id of each local parent and the number of parents of all ranks; without it the
    numbering is the serial one, ``next_gid + 2k``.
    """
    src = np.arange(tris.shape[0], dtype=np.int64)
    done = rounds = 0
    while True:
        hit, pos = np.zeros(tris.shape[0], dtype=bool), np.zeros(tris.shape[0], dtype=np.int64)
        if mid_keys.size:
            k = edge_key(tris[:, 0], tris[:, 1])
            pos = np.minimum(np.searchsorted(mid_keys, k), mid_keys.size - 1)
            hit = mid_keys[pos] == k
        h = np.flatnonzero(hit)
        if number is None:
            if h.size == 0:
                break
            first = next_gid + 2 * np.arange(h.size, dtype=np.int64)
            next_gid += 2 * h.size
        else:
            first, total = number(gid[h])
            if total == 0:
                break
        a, b, c = tris[h].T
        m = mid_vid[pos[h]]
        kids = np.empty((2 * h.size, 3), dtype=np.int64)
        kids[0::2] = np.column_stack([c, a, m])
        kids[1::2] = np.column_stack([b, c, m])
        klev = np.repeat(level[h] + 1, 2)
        lineage = _pad(lineage, int(klev.max(initial=0)))
        klin = np.repeat(lineage[h], 2, axis=0)
        klin[np.arange(klin.shape[0]), klev - 1] = np.repeat(gid[h], 2)
        kgid = np.column_stack([first, first + 1]).ravel()
        keep = ~hit
        tris = np.concatenate([tris[keep], kids])
        gid = np.concatenate([gid[keep], kgid])
        level = np.concatenate([level[keep], klev])
        lineage = np.concatenate([lineage[keep], klin])
        src = np.concatenate([src[keep], np.repeat(src[h], 2)])
        done += h.size
        rounds += 1
    return tris, gid, level, lineage, src, done, rounds


def merge_pairs(tris: NDArray[np.int64], gid: NDArray[np.int64], level: NDArray[np.int64],
                lineage: NDArray[np.int64], mask: NDArray[np.bool_], frozen: NDArray[np.int64] | None = None):
    """One coarsening pass (see module docstring); vertices in ``frozen`` are never removed.

    Returns (tris, gid, level, lineage, transfer (new × old, CSR), merges, removed vertex ids).
    """
    n = tris.shape[0]
    cand = np.flatnonzero(mask & (level > 0))
    none = np.zeros(0, dtype=np.int64)
    if cand.size < 2:
        return tris, gid, level, lineage, sp.eye_array(n, format="csr"), 0, none
    par = lineage[cand, level[cand] - 1]
    order = np.lexsort((gid[cand], par))
    c, p = cand[order], par[order]
    j = np.flatnonzero(p[1:] == p[:-1])
    i1, i2 = c[j], c[j + 1]  # first child (c, a, m) has the smaller id
    m = tris[i1, 2]
    if np.any(tris[i2, 2] != m) or np.any(tris[i1, 0] != tris[i2, 1]):
        raise RuntimeError("NVB invariant broken: siblings do not share their newest vertex")
    vid, inv = np.unique(tris, return_inverse=True)
    valence = np.bincount(inv.ravel(), minlength=vid.size)
    mloc = np.searchsorted(vid, m)
    pairs_at = np.bincount(mloc, minlength=vid.size)
    ok = valence[mloc] == 2 * pairs_at[mloc]
    if frozen is not None and frozen.size:
        ok &= ~np.isin(m, frozen)
    i1, i2, pgid = i1[ok], i2[ok], p[j][ok]
    if i1.size == 0:
        return tris, gid, level, lineage, sp.eye_array(n, format="csr"), 0, none
    ptri = np.column_stack([tris[i1, 1], tris[i2, 0], tris[i1, 0]])
    plev = level[i1] - 1
    plin = lineage[i1].copy()
    plin[np.arange(i1.size), plev] = -1
    keep = np.ones(n, dtype=bool)
    keep[i1] = keep[i2] = False
    k = np.flatnonzero(keep)
    new_gid = np.concatenate([gid[k], pgid])
    order = np.argsort(new_gid, kind="stable")
    rows = np.concatenate([np.arange(k.size), np.repeat(np.arange(k.size, k.size + i1.size), 2)])
    cols = np.concatenate([k, np.column_stack([i1, i2]).ravel()])
    vals = np.concatenate([np.ones(k.size), np.full(2 * i1.size, 0.5)])
    rank_of = np.empty(order.size, dtype=np.int64)
    rank_of[order] = np.arange(order.size)
    transfer = sp.csr_array((vals, (rank_of[rows], cols)), shape=(order.size, n))
    transfer.sort_indices()
    out_lev = np.concatenate([level[k], plev])[order]
    width = int(out_lev.max(initial=0))
    out_lin = np.concatenate([lineage[k], plin])[order][:, :max(width, 0)]
    return (np.concatenate([tris[k], ptri])[order], new_gid[order], out_lev, out_lin, transfer, int(i1.size),
            np.unique(m[ok]))


# -- serial refinement and coarsening ---------------------------------------------------------------------------

def _cell_mask(mesh: TriMesh, marked: NDArray) -> NDArray[np.bool_]:
    m = np.asarray(marked)
    if m.dtype != bool or m.shape != (mesh.n_cells,):
        raise MeshError(f"marking must be {mesh.n_cells} booleans, got {m.dtype} {m.shape}")
    return m


def mark_edges(tri2edge: NDArray[np.int64], n_edges: int, marked: NDArray[np.bool_], edges: str) -> NDArray[np.bool_]:
    """The edges of the marked cells: ``"all"`` three (4 children) or only the ``"refinement"`` edge."""
    if edges not in ("all", "refinement"):
        raise MeshError(f"edges must be 'all' or 'refinement', got {edges!r}")
    out = np.zeros(n_edges, dtype=bool)
    out[tri2edge[marked] if edges == "all" else tri2edge[marked, 0]] = True
    return out


def forbidden_edges(tri2edge: NDArray[np.int64], n_edges: int, level: NDArray[np.int64],
                    max_level: int | None) -> NDArray[np.bool_]:
    """The edges whose bisection would take a cell beyond ``max_level``: every edge of a cell at the cap,
    the two edges other than the refinement edge of a cell one level below it (bisecting one of them
    bisects that cell twice)."""
    out = np.zeros(n_edges, dtype=bool)
    if max_level is not None:
        out[tri2edge[level >= max_level]] = True
        out[tri2edge[level >= max_level - 1][:, 1:]] = True
    return out


def nvb_blocked(tri2edge: NDArray[np.int64], blocked: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """The edges whose NVB closure reaches a blocked edge: the backward closure of :func:`nvb_closure`
    (a triangle whose refinement edge is blocked blocks its two other edges), to a fixed point."""
    blocked = np.array(blocked, dtype=bool, copy=True)
    while True:
        b = blocked[tri2edge]
        need = b[:, 0] & ~(b[:, 1] & b[:, 2])
        if not need.any():
            return blocked
        blocked[tri2edge[need, 1:]] = True


def capped_marks(tri2edge: NDArray[np.int64], n_edges: int, level: NDArray[np.int64], marked: NDArray[np.bool_],
                 edges: str, max_level: int | None, blocked: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """The edges of the marked cells that refinement under ``max_level`` may bisect.

    A marked cell one level below the cap bisects its refinement edge only (whatever ``edges``); a marked
    cell at the cap, or whose edges' closure would reach a ``blocked`` edge (:func:`nvb_blocked` of
    :func:`forbidden_edges`), is dropped from the marking. The closure of what remains never bisects a
    cell beyond the cap: a triangle with an unblocked edge has an unblocked refinement edge.
    """
    if max_level is None:
        return mark_edges(tri2edge, n_edges, marked, edges)
    marked = marked & (level < max_level)
    last = marked & (level == max_level - 1)
    sel = np.zeros(tri2edge.shape, dtype=bool)
    sel[:, 0] = marked
    if edges == "all":
        sel[:, 1:] = (marked & ~last)[:, None]
    elif edges != "refinement":
        raise MeshError(f"edges must be 'all' or 'refinement', got {edges!r}")
    keep = marked & ~np.any(sel & blocked[tri2edge], axis=1)
    out = np.zeros(n_edges, dtype=bool)
    out[tri2edge[sel & keep[:, None]]] = True
    return out


def refine(mesh: TriMesh, marked: NDArray[np.bool_], *, edges: str = "all",
           max_level: int | None = None) -> Adaptation:
    """Refine the marked cells by newest-vertex bisection, with closure (module docstring).

    Parameters
    ----------
    mesh : TriMesh
    marked : bool array (T,)
        Cells to refine.
    edges : {"all", "refinement"}
        Bisect all three edges of a marked cell (≥ 4 children) or only its refinement edge (≥ 2).
    max_level : int, optional
        No cell gets beyond this level: marked cells whose refinement would force one there, through
        the conforming closure, are not refined (:func:`capped_marks`).

    Returns
    -------
    Adaptation
        New midpoints are appended to ``points`` in edge-key order; children get new ids.
    """
    marked = _cell_mask(mesh, marked)
    keys, t2e = edge_table(mesh.tris)
    blocked = nvb_blocked(t2e, forbidden_edges(t2e, keys.size, mesh.level, max_level))
    em, sweeps = nvb_closure(t2e, capped_marks(t2e, keys.size, mesh.level, marked, edges, max_level, blocked))
    mid_keys = keys[em]
    lo, hi = edge_ends(mid_keys)
    mid_vid = mesh.points.shape[0] + np.arange(mid_keys.size, dtype=np.int64)
    points = np.concatenate([mesh.points, 0.5 * (mesh.points[lo] + mesh.points[hi])])
    tris, gid, level, lineage, src, done, _ = bisect_marked(mesh.tris, mesh.gid, mesh.level, mesh.lineage,
                                                            mid_keys, mid_vid, mesh.next_gid)
    transfer = sp.csr_array((np.ones(src.size), (np.arange(src.size), src)), shape=(src.size, mesh.n_cells))
    return Adaptation(TriMesh(points, tris, gid, level, lineage), transfer, done, sweeps)


def coarsen(mesh: TriMesh, mask: NDArray[np.bool_], *, passes: int | None = 1) -> Adaptation:
    """Merge sibling pairs whose both cells are in ``mask`` where conformity allows (module docstring).

    ``passes`` passes (each removes one generation of bisections where possible); ``None``: until
    nothing changes. A merged parent counts as coarsenable in the next pass. Unused vertices are
    removed from ``points`` (the others keep their order).
    """
    mask = _cell_mask(mesh, mask)
    tris, gid, level, lineage = mesh.tris, mesh.gid, mesh.level, mesh.lineage
    transfer = sp.eye_array(mesh.n_cells, format="csr")
    merged = rounds = 0
    while passes is None or rounds < passes:
        tris, gid, level, lineage, P, k, _ = merge_pairs(tris, gid, level, lineage, mask)
        if k == 0:
            break
        transfer = sp.csr_array(P @ transfer)
        mask = (P @ mask.astype(np.float64)) > 0.75  # a merged parent: both children were in the mask
        merged += k
        rounds += 1
    used = np.zeros(mesh.points.shape[0], dtype=bool)
    used[tris.ravel()] = True
    renum = np.cumsum(used) - 1
    transfer.sort_indices()
    return Adaptation(TriMesh(mesh.points[used], renum[tris], gid, level, lineage), transfer, merged, rounds)


# -- validity ---------------------------------------------------------------------------------------------------------

def conformity_problems(points: NDArray[np.float64], tris: NDArray[np.int64], *, tol: float = 1e-12) -> list[str]:
    """What makes a triangulation non-conforming (empty list if none).

    Checks: counter-clockwise positive areas; every edge in at most two triangles, traversed in
    opposite directions (a consistently oriented manifold); no vertex strictly inside an edge used
    once (a hanging node sits on such an edge), found with a k-d tree.
    """
    from scipy.spatial import cKDTree

    out: list[str] = []
    a = areas(points, tris)
    if np.any(a <= 0):
        out.append(f"{int(np.sum(a <= 0))} triangles with non-positive area")
    directed = tris * _K + tris[:, [1, 2, 0]]
    if np.unique(directed).size != directed.size:
        out.append("an edge is traversed twice in the same direction")
    keys, t2e = edge_table(tris)
    count = np.bincount(t2e.ravel(), minlength=keys.size)
    if np.any(count > 2):
        out.append(f"{int(np.sum(count > 2))} edges shared by more than two triangles")
    lo, hi = edge_ends(keys[count == 1])
    if lo.size:
        p, q = points[lo], points[hi]
        mid, half = 0.5 * (p + q), 0.5 * np.sqrt(np.sum((q - p) ** 2, axis=1))
        near = cKDTree(points).query_ball_point(mid, half * (1 + 1e-9))
        e = np.repeat(np.arange(lo.size), [len(x) for x in near])
        v = np.fromiter(chain.from_iterable(near), dtype=np.int64, count=e.size)
        inner = (v != lo[e]) & (v != hi[e])
        e, v = e[inner], v[inner]
        d, w = q[e] - p[e], points[v] - p[e]
        cross = np.abs(d[:, 0] * w[:, 1] - d[:, 1] * w[:, 0])
        t = np.sum(d * w, axis=1)
        l2 = np.sum(d * d, axis=1)
        hang = (cross <= tol * l2) & (t > 0) & (t < l2)
        if hang.any():
            out.append(f"{int(np.unique(v[hang]).size)} hanging nodes")
    return out
