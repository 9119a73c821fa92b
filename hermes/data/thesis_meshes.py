"""Stand-ins for the thesis' AG-Monien graphs with their exact vertex and edge counts (thesis Table 10.2).

The thesis ran its adaptive experiment (§10.2, Tables 10.5 and 10.7) on the *node* graphs of six meshes:
grid20x19 (380 vertices, 1442 adjacency entries = 2|E|), stufe (1036, 3736), airfoil (4253, 24578), 3elt
(4720, 27444), Whitaker (9800, 57978) and L9 (17983, 71192). hermes ships grid20x19 (``meshes/grid20x19.vtu``;
its *cells* are the 380 vertices) and reads whitaker3 from the shared meshes; stufe, airfoil and 3elt (SuiteSparse, group AG-Monien) are not
reachable from here, and the generic generators of :mod:`hermes.data.cfd_meshes` give other sizes. The generators
here build meshes whose node graph (``mesh: {file: ..., units: nodes}``) has the thesis' counts exactly:

- ``thesis-stufe``: a backward-facing step of unit squares; its node graph has average degree
  3736 / 1036 = 3.61, which pins the mesh down: a simply connected quadrilateral mesh of ``n`` nodes and ``e``
  edges has ``b = 4(n − 1) − 2e`` = 404 boundary edges and ``(2e − b) / 4`` = 833 cells;
- ``thesis-airfoil``: a NACA0012 airfoil in a far-field box (one hole), triangles by gmsh;
- ``thesis-3elt``: a slat / main / flap airfoil (three holes), triangles by gmsh.

Notes
-----
A triangulation with ``n`` nodes, ``h`` holes and ``b`` boundary edges has ``e = 3n − 3 + 3h − b`` edges
(Euler: ``n − e + f = 1 − h`` with ``3f = 2e − b``). The airfoil's 24578 / 2 = 12289 edges on 4253 nodes ask
for ``b`` = 470, 3elt's 13722 on 4720 with three holes for ``b`` = 444. The boundary curves are given exactly
that many points (gmsh transfinite curves), the interior is meshed a little coarser than the target (a scan
of gmsh's largest cell size), and the missing nodes are added one per triangle at the centroids of the
largest triangles (each adds one node and three edges and keeps the boundary): node and edge counts are
exact, and every step is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hermes.data.cfd_meshes import _ELEMENTS, _FARFIELD, _gmsh_triangulate, _place, naca4
from hermes.data.mesh import Mesh
from hermes.data.polygons import mesh_from_cells
from hermes.errors import MeshError

__all__ = ["THESIS_MESHES", "ThesisMesh", "thesis_stufe", "thesis_airfoil", "thesis_3elt", "node_graph_counts"]

#: the largest cell sizes tried (the far field is 12 × 10)
_MAX_SIZES = np.geomspace(0.15, 0.6, 48)


@dataclass(frozen=True)
class ThesisMesh:
    """A stand-in for a graph of thesis Table 10.2: the counts it reproduces and the file it is shipped as.

    Attributes
    ----------
    graph : str
        The thesis' name of the graph (Table 10.2).
    vertices, entries : int
        Its vertex count and adjacency entries (2|E|), as printed in Table 10.2.
    holes : int
        Holes of the stand-in's domain.
    file : str
        File name in ``meshes/`` (written by ``meshes/make_meshes.py``; read with ``units: nodes``).
    """

    graph: str
    vertices: int
    entries: int
    holes: int
    file: str

    @property
    def degree(self) -> float:
        """Average degree of the thesis' graph."""
        return self.entries / self.vertices

    def build(self) -> Mesh:
        return _BUILDERS[self.file](self)


def node_graph_counts(mesh: Mesh) -> tuple[int, int]:
    """(nodes used by cells, adjacency entries 2|E| of the mesh edges) of a cell mesh: its node graph's size.

    Examples
    --------
    The shipped stand-in for stufe (from a clone's top directory), read as cells, has the node graph of thesis
    Table 10.2's stufe:

    >>> from hermes.data.io import read_mesh
    >>> mesh = read_mesh("meshes/thesis-stufe.vtu")
    >>> mesh.n_cells, node_graph_counts(mesh), (THESIS_MESHES["stufe"].vertices, THESIS_MESHES["stufe"].entries)
    (833, (1036, 3736), (1036, 3736))
    """
    k = np.diff(mesh.cell_ptr)
    starts = np.repeat(mesh.cell_ptr[:-1], k)
    local = np.arange(mesh.cell_nodes.size) - starts
    nxt = mesh.cell_nodes[starts + (local + 1) % np.repeat(k, k)]
    edges = np.unique(np.sort(np.column_stack([mesh.cell_nodes, nxt]), axis=1), axis=0)
    return int(np.unique(mesh.cell_nodes).size), int(2 * edges.shape[0])


def _step_rows(vertices: int, entries: int) -> tuple[int, int, int, int]:
    """(inlet rows, outlet rows, inlet columns, outlet columns) of a step of unit squares with ``vertices``
    nodes and ``entries / 2`` edges.

    Among the solutions with a step and an inlet at least two rows high and an outlet longer than the inlet,
    the one closest to the step of :func:`hermes.data.cfd_meshes.stufe` (an inlet half as high and a fifth
    as long as the outlet) in the sum of the two ratios' log distances.
    """
    boundary = 4 * (vertices - 1) - entries  # boundary edges of a simply connected quadrilateral mesh
    cells, odd = divmod(entries - boundary, 4)
    if boundary <= 0 or boundary % 2 or odd:
        raise MeshError(f"no quadrilateral step mesh has {vertices} nodes and {entries // 2} edges")
    best = None
    half = boundary // 2  # = inlet columns + outlet columns + outlet rows
    for rows in range(4, half):
        for inlet in range(2, rows - 1):
            cols, rem = divmod(cells - inlet * (half - rows), rows - inlet)
            first = half - rows - cols
            if rem or first <= inlet or cols <= max(first, rows):  # channels longer than high, outlet longest
                continue
            shape = abs(math.log(2 * inlet / rows)) + abs(math.log(5 * first / cols))
            if best is None or shape < best[0]:
                best = (shape, inlet, rows, first, cols)
    if best is None:
        raise MeshError(f"no quadrilateral step mesh has {vertices} nodes and {entries // 2} edges")
    return best[1:]


def thesis_stufe(spec: ThesisMesh) -> Mesh:
    """A backward-facing step of unit squares with the node and edge counts of ``spec``.

    An inlet channel of ``c1`` × ``r1`` squares, [−c1, 0] × [r2 − r1, r2], opens onto the outlet channel
    [0, c2] × [0, r2]; the inlet's rows continue as the outlet's upper rows (a conforming mesh), the rows and
    columns found by :func:`_step_rows` (for the thesis' stufe: 3 and 5 rows, 76 and 121 columns).
    """
    r1, r2, c1, c2 = _step_rows(spec.vertices, spec.entries)
    xs, ys = np.arange(-c1, c2 + 1, dtype=float), np.arange(r2 + 1, dtype=float)
    nx, ny = xs.size, ys.size
    px, py = np.meshgrid(xs, ys)
    points = np.column_stack([px.ravel(), py.ravel()])
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1))
    i, j = i.ravel(), j.ravel()
    keep = (i >= c1) | (j >= r2 - r1)  # the block below the inlet is solid
    i, j = i[keep], j[keep]
    a = j * nx + i
    quads = np.column_stack([a, a + 1, a + nx + 1, a + nx])
    return mesh_from_cells(points, quads, name=spec.file.removesuffix(".vtu"),
                           meta={"generator": spec.file, "rows": [int(r1), int(r2)], "columns": [int(c1), int(c2)]})


def _transfinite_loop(geo, xy: NDArray[np.float64], counts: list[int], lc: float) -> int:
    """A closed polyline whose i-th side carries ``counts[i]`` points (ends included)."""
    pts = [geo.addPoint(float(x), float(y), 0.0, lc) for x, y in xy]
    lines = [geo.addLine(pts[i], pts[(i + 1) % len(pts)]) for i in range(len(pts))]
    for line, n in zip(lines, counts):
        geo.mesh.setTransfiniteCurve(line, n)
    return geo.addCurveLoop(lines)


def _transfinite_airfoil(geo, upper, lower, n: int, lc: float) -> int:
    """An airfoil as two splines (TE → LE, LE → TE) of ``n`` points each (ends shared), clustered at both ends."""
    up = [geo.addPoint(float(x), float(y), 0.0, lc) for x, y in upper[::-1]]
    low = [up[-1]] + [geo.addPoint(float(x), float(y), 0.0, lc) for x, y in lower[1:-1]] + [up[0]]
    curves = [geo.addSpline(up), geo.addSpline(low)]
    for c in curves:
        geo.mesh.setTransfiniteCurve(c, n, "Bump", 0.25)
    return geo.addCurveLoop(curves)


def _fill_to(points: NDArray[np.float64], tris: NDArray[np.int64], n: int) -> tuple[NDArray, NDArray]:
    """Add ``n − len(points)`` nodes at the centroids of the largest triangles, one per triangle (each splits
    its triangle in three: one node, three edges; the boundary is untouched)."""
    missing = n - points.shape[0]
    if missing <= 0:
        return points, tris
    p = points[tris]
    area = 0.5 * np.abs((p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1])
                        - (p[:, 2, 0] - p[:, 0, 0]) * (p[:, 1, 1] - p[:, 0, 1]))
    pick = np.argsort(-area, kind="stable")[:missing]
    new = points.shape[0] + np.arange(missing)
    a, b, c = tris[pick].T
    keep = np.ones(tris.shape[0], dtype=bool)
    keep[pick] = False
    split = np.concatenate([np.column_stack([a, b, new]), np.column_stack([b, c, new]),
                            np.column_stack([c, a, new])])
    return np.vstack([points, p[pick].mean(axis=1)]), np.vstack([tris[keep], split])


def _used(points: NDArray[np.float64], tris: NDArray[np.int64]) -> tuple[NDArray, NDArray]:
    """The points the triangles use (gmsh also returns the splines' control points), renumbered in order."""
    used, inverse = np.unique(tris, return_inverse=True)
    return points[used], inverse.reshape(tris.shape)


def _triangulated(spec: ThesisMesh, build, meta: dict) -> Mesh:
    """Scan gmsh's largest cell size (:data:`_MAX_SIZES`) for the most nodes not above ``spec.vertices``, then
    fill up to it.

    The sizes grow from the boundary's spacing (``Mesh.MeshSizeExtendFromBoundary``) up to the largest size;
    the count is not monotonic in it, hence a scan. A mesh whose triangle count breaks Euler's relation for the
    domain's holes and boundary (``f = 2n − 2 + 2h − b``) is skipped.
    """
    import gmsh

    b = 3 * spec.vertices - 3 + 3 * spec.holes - spec.entries // 2
    best = None
    for h in _MAX_SIZES:
        def sized(geo, h=float(h)):
            gmsh.option.setNumber("Mesh.MeshSizeMax", h)
            build(geo)

        points, tris = _used(*_gmsh_triangulate(sized, 1.0))
        n = points.shape[0]
        if n > spec.vertices or tris.shape[0] != 2 * n - 2 + 2 * spec.holes - b:
            continue
        if best is None or n > best[0].shape[0]:
            best = (points, tris, float(h))
    if best is None:
        raise MeshError(f"{spec.file}: gmsh gave no valid mesh of at most {spec.vertices} nodes")
    points, tris, h = best
    if spec.vertices - points.shape[0] > tris.shape[0]:
        raise MeshError(f"{spec.file}: gmsh gave at most {points.shape[0]} of the {spec.vertices} nodes")
    points, tris = _fill_to(points, tris, spec.vertices)
    return mesh_from_cells(points, tris, name=spec.file.removesuffix(".vtu"),
                           meta={"generator": spec.file, "max_size": h,
                                 "centroids_added": int(spec.vertices - best[0].shape[0]), **meta})


def _boundary_split(total: int, weights: list[float]) -> list[int]:
    """``total`` boundary edges shared among curves in proportion to ``weights`` (largest remainders)."""
    w = np.asarray(weights, dtype=float)
    raw = total * w / w.sum()
    out = np.floor(raw).astype(int)
    out[np.argsort(-(raw - out), kind="stable")[:total - out.sum()]] += 1
    return out.tolist()


def _farfield_points(edges: int) -> list[int]:
    """Points (ends included) of the far-field box's four sides for ``edges`` boundary edges in all."""
    return [k + 1 for k in _boundary_split(edges, [12.0, 10.0, 12.0, 10.0])]


def thesis_airfoil(spec: ThesisMesh) -> Mesh:
    """A NACA0012 airfoil in the far-field box [−5, 7] × [−5, 5] with the node and edge counts of ``spec``.

    The boundary carries ``b = 3n − 3 + 3h − e`` edges (module Notes): 48 on the box, the rest on the airfoil's
    two surfaces.
    """
    b = 3 * spec.vertices - 3 + 3 * spec.holes - spec.entries // 2
    box = 48
    per_side = (b - box) // 2
    if (b - box) % 2 or per_side < 10:
        raise MeshError(f"{spec.file}: {b} boundary edges cannot be shared as box {box} + 2 equal surfaces")
    upper, lower = naca4("0012", 200)

    def build(geo):
        outer = _transfinite_loop(geo, _FARFIELD, _farfield_points(box), 1.0)
        geo.addPlaneSurface([outer, _transfinite_airfoil(geo, upper, lower, per_side + 1, 0.02)])

    return _triangulated(spec, build, {"boundary_edges": b})


def thesis_3elt(spec: ThesisMesh) -> Mesh:
    """A slat / main / flap airfoil (the elements of :func:`hermes.data.cfd_meshes.three_element`) in the
    far-field box with the node and edge counts of ``spec``: 24 boundary edges on the box, the others on the
    elements in proportion to their chords (each element's two surfaces alike)."""
    b = 3 * spec.vertices - 3 + 3 * spec.holes - spec.entries // 2
    box = 24
    chords = [e[2] for e in _ELEMENTS]
    per_element = _boundary_split((b - box) // 2, chords)
    if (b - box) % 2:
        raise MeshError(f"{spec.file}: {b} boundary edges cannot be shared as box {box} + equal surfaces")
    shapes = []
    for (_, code, chord, angle, lead), k in zip(_ELEMENTS, per_element):
        upper, lower = naca4(code, 150, chord=chord)
        shapes.append((_place(upper, angle, lead), _place(lower, angle, lead), k + 1, 0.02 * chord))

    def build(geo):
        outer = _transfinite_loop(geo, _FARFIELD, _farfield_points(box), 1.0)
        holes = [_transfinite_airfoil(geo, up, low, n, lc) for up, low, n, lc in shapes]
        geo.addPlaneSurface([outer, *holes])

    return _triangulated(spec, build, {"boundary_edges": b})


_BUILDERS = {"thesis-stufe.vtu": thesis_stufe, "thesis-airfoil.vtu": thesis_airfoil,
             "thesis-3elt.vtu": thesis_3elt}

#: name -> the graph of thesis Table 10.2 it stands for (vertices, adjacency entries as printed, p. 169)
THESIS_MESHES: dict[str, ThesisMesh] = {
    "stufe": ThesisMesh("stufe", 1036, 3736, 0, "thesis-stufe.vtu"),
    "airfoil": ThesisMesh("airfoil", 4253, 24578, 1, "thesis-airfoil.vtu"),
    "3elt": ThesisMesh("3elt", 4720, 27444, 3, "thesis-3elt.vtu"),
}
