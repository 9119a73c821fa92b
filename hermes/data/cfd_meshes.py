"""Generated 2-D CFD meshes of the kinds used in the thesis' experiments (thesis Table 10.2).

The partitioning test meshes of the thesis (grid20x19, stufe, L, airfoil, 3elt, whitaker) are not
redistributable, so hermes generates meshes *of the same kinds* with gmsh (PyPI wheel, headless):

- ``grid``: structured grid of squares (:func:`~hermes.data.generators.grid`); 380 cells, ``grid20x19.vtu``;
- ``stufe``: backward-facing step (German *Stufe*), refined at the step corner; ~2,000, ``stufe.vtu``;
- ``lshape``: L-shaped domain, structured triangles; 1,536, ``lshape.vtu``;
- ``airfoil``: NACA0012 airfoil in a far-field box; ~8,000, ``airfoil.vtu``;
- ``3elt``: slat / main / flap airfoil in a far-field box; ~9,000, ``3elt.vtu``;
- ``cylinder``: channel with a cylinder (DFG benchmark geometry); ~20,000, ``cylinder.vtu``;
- ``large``: structured triangles of [0, 2] × [0, 1], vectorised, no gmsh; 10⁶ by default, not shipped.

(name: geometry; default size in cells, shipped file in ``meshes/``, made by ``meshes/make_meshes.py``.)

Every generator is deterministic and returns a :class:`~hermes.data.mesh.Mesh` whose work units are
the cells (triangles; squares for ``grid``) with the dual graph (cells sharing an edge), centroids as
coordinates, unit weights and counter-clockwise cell polygons. :func:`write_mesh` writes any such mesh
with meshio (``.vtu``, ``.msh``, ...); :func:`hermes.data.io.read_mesh` reads it back identically.

The ``size`` parameter is the approximate number of cells. For the gmsh meshes a global mesh-size
factor is adjusted (``N ∝ factor⁻²``) until the count is within ``SIZE_TOLERANCE`` of the target.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from hermes.data.generators import grid, lshape_triangles
from hermes.data.mesh import Mesh, validate_graph
from hermes.errors import MeshError

__all__ = [
    "CFD_MESHES",
    "SIZE_TOLERANCE",
    "CfdMesh",
    "get_generator",
    "mesh_from_cells",
    "mesh_from_polygons",
    "polygon_areas",
    "polygon_facets",
    "write_mesh",
    "naca4",
    "grid_mesh",
    "stufe",
    "lshape",
    "airfoil",
    "three_element",
    "cylinder",
    "large",
]

log = logging.getLogger(__name__)

SIZE_TOLERANCE = 0.1  # relative deviation of the cell count from the requested size (gmsh meshes)
_MIN_SIZE = 50
_MAX_GMSH_SIZE = 500_000  # beyond this, gmsh takes minutes: use large()
_MAX_ITER = 8


# --------------------------------------------------------------------------------------------
# cells → Mesh
# --------------------------------------------------------------------------------------------


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


def _csr(n: int, edges: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Symmetric CSR from undirected edges without self loops (duplicates merged), via 1-D keys.

    Same result as :func:`hermes.data.mesh.csr_from_edges`, several times faster on 10⁶ edges.
    """
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    keys = np.sort(np.concatenate([e[:, 0] * n + e[:, 1], e[:, 1] * n + e[:, 0]]))
    if keys.size:  # np.sort + mask: np.unique hashes first and is ~30x slower on 3·10⁶ keys
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // n, minlength=n), out=xadj[1:])
    return xadj, keys % n


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
    xadj, adjncy = _csr(n, np.column_stack([owner[order[same]], owner[order[same + 1]]]))
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


_MESHIO_TYPES = {3: "triangle", 4: "quad"}


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
    p = Path(path)
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
    try:
        if suffix == ".msh":  # gmsh wants physical / geometrical tags: one surface, tag 1
            tags = [np.ones(len(data), dtype=np.int32) for _, data in blocks]
            out.cell_data = {"gmsh:physical": tags, "gmsh:geometrical": tags}
            meshio.write(p, out, file_format="gmsh22", binary=True)
        elif suffix == ".vtu":
            meshio.write(p, out, file_format="vtu", binary=True, compression="zlib")
        else:
            meshio.write(p, out)
    except OSError as err:
        raise MeshError(f"cannot write {p}: {err.strerror or err}") from err
    return p


# --------------------------------------------------------------------------------------------
# gmsh
# --------------------------------------------------------------------------------------------


def _gmsh_options(gmsh, factor: float) -> None:
    """Set every option the meshes depend on: options are global and persist between models."""
    opt = gmsh.option.setNumber
    opt("General.Terminal", 0)
    opt("General.Verbosity", 1)
    opt("General.NumThreads", 1)
    opt("Mesh.Algorithm", 6)  # frontal-Delaunay
    opt("Mesh.RandomSeed", 1)
    opt("Mesh.MeshSizeFactor", factor)
    opt("Mesh.MeshSizeMin", 0.0)
    opt("Mesh.MeshSizeMax", 1e22)
    opt("Mesh.MeshSizeFromPoints", 1)
    opt("Mesh.MeshSizeFromCurvature", 0)
    opt("Mesh.MeshSizeExtendFromBoundary", 1)
    opt("Mesh.RecombineAll", 0)
    opt("Mesh.ElementOrder", 1)
    opt("Mesh.Smoothing", 1)


def _gmsh_triangulate(build: Callable, factor: float) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Run ``build(gmsh.model.geo)`` in a fresh model and mesh it in 2-D: (points, triangles).

    gmsh is initialised (without reading user configuration files, without a SIGINT handler) and
    finalised here unless the caller already holds a session; then only the temporary model is
    removed, and the mesh options set by :func:`_gmsh_options` stay changed.
    """
    try:
        import gmsh
    except ImportError as err:  # pragma: no cover - gmsh is a dependency
        raise MeshError(f"the mesh generators need gmsh ({err}): pip install gmsh") from None
    own = not gmsh.isInitialized()
    if own:
        gmsh.initialize(argv=[], readConfigFiles=False, interruptible=False)
    else:
        current = gmsh.model.getCurrent()
    try:
        gmsh.model.add("hermes")
        _gmsh_options(gmsh, factor)
        build(gmsh.model.geo)
        gmsh.model.geo.synchronize()
        gmsh.model.mesh.generate(2)
        tags, xyz, _ = gmsh.model.mesh.getNodes()
        _, nodes = gmsh.model.mesh.getElementsByType(2)
    except Exception as err:  # gmsh reports failures as plain Exceptions
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise MeshError(f"gmsh could not mesh the geometry: {reason}") from err
    finally:
        if own:
            gmsh.finalize()
        else:
            gmsh.model.remove()
            gmsh.model.setCurrent(current)
    tags = np.asarray(tags, dtype=np.int64)
    order = np.argsort(tags)
    lookup = np.full(tags.max() + 1, -1, dtype=np.int64)
    lookup[tags[order]] = np.arange(tags.size)
    points = np.asarray(xyz, dtype=np.float64).reshape(-1, 3)[order, :2]
    tris = lookup[np.asarray(nodes, dtype=np.int64).reshape(-1, 3)]
    return points, tris


def _to_size(name: str, build: Callable, size: int, factor0: float, meta: dict) -> Mesh:
    """Mesh with the global size factor adjusted until the cell count is near ``size``.

    Starts from ``factor0`` and rescales by ``√(count / size)`` (``N ∝ factor⁻²``); once one factor
    gives too many cells and another too few, bisects between them geometrically, since near a
    coarse boundary discretisation the count jumps. Keeps the closest mesh after ``_MAX_ITER`` tries.
    """
    size = _check_size(name, size, _MAX_GMSH_SIZE)
    factor, too_fine, too_coarse = factor0, None, None
    best = None
    for _ in range(_MAX_ITER):
        points, tris = _gmsh_triangulate(build, factor)
        count = tris.shape[0]
        if best is None or abs(count - size) < abs(best[1].shape[0] - size):
            best = (points, tris, factor)
        if abs(count - size) <= SIZE_TOLERANCE * size:
            break
        if count > size:
            too_fine = factor if too_fine is None else max(too_fine, factor)
        else:
            too_coarse = factor if too_coarse is None else min(too_coarse, factor)
        if too_fine is not None and too_coarse is not None:
            factor = math.sqrt(too_fine * too_coarse)
        else:
            factor *= math.sqrt(count / size)
    points, tris, factor = best
    log.debug("%s: %d triangles for size %d (factor %.4g)", name, tris.shape[0], size, factor)
    return mesh_from_cells(points, tris, name=name,
                           meta={"generator": name, "size": size, "size_factor": factor, **meta})


def _check_size(name: str, size: int, upper: int) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise MeshError(f"mesh '{name}': size must be an integer number of cells, got {size!r}")
    if not _MIN_SIZE <= size <= upper:
        hint = " (use 'large' for bigger meshes)" if upper == _MAX_GMSH_SIZE else ""
        raise MeshError(f"mesh '{name}': size {size} outside {_MIN_SIZE}..{upper}{hint}")
    return int(size)


def naca4(code: str, n: int = 60, *, chord: float = 1.0) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Upper and lower surface points of a NACA 4-digit airfoil with a closed trailing edge.

    Parameters
    ----------
    code : str
        Four digits ``MPTT``: maximum camber M % at P/10 of the chord, thickness TT % (``"0012"``).
    n : int
        Number of intervals per surface (cosine spacing, clustered at both edges).
    chord : float

    Returns
    -------
    upper, lower : ndarray, shape (n + 1, 2)
        Both from the leading edge (0, 0) to the trailing edge (chord, 0).

    Notes
    -----
    Thickness ``y_t = 5 t (0.2969 √x − 0.1260 x − 0.3516 x² + 0.2843 x³ − 0.1036 x⁴)`` (the last
    coefficient closes the trailing edge), applied normal to the camber line.
    """
    if len(code) != 4 or not code.isdigit():
        raise MeshError(f"NACA code must be 4 digits, got {code!r}")
    m, p, t = int(code[0]) / 100, int(code[1]) / 10, int(code[2:]) / 100
    x = 0.5 * (1 - np.cos(np.linspace(0, np.pi, n + 1)))
    yt = 5 * t * (0.2969 * np.sqrt(x) - 0.1260 * x - 0.3516 * x**2 + 0.2843 * x**3 - 0.1036 * x**4)
    yc = np.zeros_like(x)
    dyc = np.zeros_like(x)
    if m > 0 and p > 0:
        fore = x < p
        yc = np.where(fore, m / p**2 * (2 * p * x - x**2), m / (1 - p) ** 2 * (1 - 2 * p + 2 * p * x - x**2))
        dyc = np.where(fore, 2 * m / p**2 * (p - x), 2 * m / (1 - p) ** 2 * (p - x))
    th = np.arctan(dyc)
    upper = np.column_stack([x - yt * np.sin(th), yc + yt * np.cos(th)]) * chord
    lower = np.column_stack([x + yt * np.sin(th), yc - yt * np.cos(th)]) * chord
    upper[-1] = lower[-1] = (chord, 0.0)
    return upper, lower


def _place(xy: NDArray[np.float64], angle_deg: float, at: tuple[float, float]) -> NDArray[np.float64]:
    """Rotate by ``angle_deg`` clockwise (positive = trailing edge down) about (0,0), then shift."""
    a = -math.radians(angle_deg)
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return xy @ rot.T + np.asarray(at)


def _add_loop(geo, xy: NDArray[np.float64], lc: float | NDArray[np.float64]) -> int:
    """A closed polyline of points (first point not repeated) as straight lines; the loop tag."""
    lcs = np.broadcast_to(np.asarray(lc, dtype=np.float64), (xy.shape[0],))
    pts = [geo.addPoint(float(x), float(y), 0.0, float(s)) for (x, y), s in zip(xy, lcs)]
    lines = [geo.addLine(pts[i], pts[(i + 1) % len(pts)]) for i in range(len(pts))]
    return geo.addCurveLoop(lines)


def _add_airfoil(geo, upper: NDArray[np.float64], lower: NDArray[np.float64], lc: float) -> int:
    """An airfoil as two splines (upper: TE → LE, lower: LE → TE) sharing LE and TE points."""
    up = [geo.addPoint(float(x), float(y), 0.0, lc) for x, y in upper[::-1]]  # TE ... LE
    low = [up[-1]] + [geo.addPoint(float(x), float(y), 0.0, lc) for x, y in lower[1:-1]] + [up[0]]
    return geo.addCurveLoop([geo.addSpline(up), geo.addSpline(low)])


_FARFIELD = np.array([[-5.0, -5.0], [7.0, -5.0], [7.0, 5.0], [-5.0, 5.0]])


# --------------------------------------------------------------------------------------------
# the generators
# --------------------------------------------------------------------------------------------


def grid_mesh(size: int = 380) -> Mesh:
    """A structured grid of ``≈ size`` unit squares with the 20:19 aspect of ``grid20x19``.

    ``nx = round(√(size · 20/19))``, ``ny = round(size / nx)``; ``grid_mesh(380)`` is the thesis'
    grid20x19 (380 cells, 721 dual edges), built by :func:`hermes.data.generators.grid`.
    """
    size = _check_size("grid", size, 10**8)
    nx = max(1, round(math.sqrt(size * 20 / 19)))
    ny = max(1, round(size / nx))
    return grid(nx, ny)


def stufe(size: int = 2000) -> Mesh:
    """A backward-facing step: inlet channel [−2, 0] × [½, 1] opening onto [0, 10] × [0, 1].

    The mesh is finest at the step corner (0, ½), where the flow separates, and coarsens towards the
    outlet (sizes 1 : 2 : 6 : 12 from the corner to the walls' far ends).
    """
    h = 0.02
    outline = np.array([[-2.0, 0.5], [0.0, 0.5], [0.0, 0.0], [10.0, 0.0], [10.0, 1.0], [0.0, 1.0], [-2.0, 1.0]])
    lcs = np.array([6, 1, 2, 12, 12, 2, 6]) * h

    def build(geo):
        geo.addPlaneSurface([_add_loop(geo, outline, lcs)])

    return _to_size("stufe", build, size, 1.0, {"step_corner": [0.0, 0.5]})


def lshape(size: int = 1536) -> Mesh:
    """The L-shaped domain [0, 2]² minus [1, 2]² in ``6 n²`` structured triangles, ``n = round(√(size/6))``.

    ``lshape(1536)`` is ``meshes/lshape.vtu`` (n = 16), from :func:`hermes.data.generators.lshape_triangles`.
    """
    size = _check_size("lshape", size, 10**8)
    n = max(1, round(math.sqrt(size / 6)))
    points, tris = lshape_triangles(n)
    return mesh_from_cells(points, tris, name="lshape", meta={"generator": "lshape", "size": size, "n": n})


def airfoil(size: int = 8000) -> Mesh:
    """A NACA0012 airfoil (chord 1, at 0° incidence) in the far-field box [−5, 7] × [−5, 5].

    Cell size 0.01 on the wall, 1.0 in the far field (before scaling to ``size``); the airfoil is two
    splines through 61 cosine-spaced points per surface, meeting at a sharp trailing edge.
    """
    upper, lower = naca4("0012", 60)

    def build(geo):
        box = _add_loop(geo, _FARFIELD, 1.0)
        geo.addPlaneSurface([box, _add_airfoil(geo, upper, lower, 0.01)])

    return _to_size("airfoil", build, size, 1.0, {"airfoil": "NACA0012"})


# element, NACA code, chord, deflection (degrees, positive = trailing edge down), leading edge
_ELEMENTS = (
    ("slat", "2412", 0.16, -25.0, (-0.16, -0.075)),
    ("main", "2412", 1.00, 0.0, (0.0, 0.0)),
    ("flap", "2412", 0.30, 25.0, (0.95, -0.075)),
)


def three_element(size: int = 9000) -> Mesh:
    """A slat / main / flap high-lift airfoil (like the classic ``3elt``) in a far-field box.

    Three NACA2412 elements: a slat (chord 0.16, deflected 25° nose down) ahead of the main element
    (chord 1) and a flap (chord 0.30, deflected 25° trailing edge down) below its trailing edge, with
    gaps of a few hundredths of a chord. Wall cell size 0.005 on slat and flap, 0.01 on the main
    element, 1.0 in the far field (before scaling to ``size``).
    """
    shapes = []
    for _, code, chord, angle, lead in _ELEMENTS:
        upper, lower = naca4(code, 50 if chord < 1 else 60, chord=chord)
        shapes.append((_place(upper, angle, lead), _place(lower, angle, lead), 0.01 if chord == 1 else 0.005))

    def build(geo):
        box = _add_loop(geo, _FARFIELD, 1.0)
        holes = [_add_airfoil(geo, up, low, lc) for up, low, lc in shapes]
        geo.addPlaneSurface([box, *holes])

    return _to_size("3elt", build, size, 1.0, {"elements": [e[0] for e in _ELEMENTS]})


def cylinder(size: int = 20000) -> Mesh:
    """A channel [0, 2.2] × [0, 0.41] with a cylinder of radius 0.05 at (0.2, 0.2).

    The geometry of the DFG flow-around-a-cylinder benchmark (Schäfer & Turek 1996); cell size 0.005
    on the cylinder, 0.02 at the inlet, 0.04 at the outlet (before scaling to ``size``).

    References
    ----------
    M. Schäfer, S. Turek, "Benchmark computations of laminar flow around a cylinder", Notes on
    Numerical Fluid Mechanics 52 (1996) 547–566.
    """
    cx, cy, r = 0.2, 0.2, 0.05

    def build(geo):
        box = _add_loop(geo, np.array([[0.0, 0.0], [2.2, 0.0], [2.2, 0.41], [0.0, 0.41]]), [0.02, 0.04, 0.04, 0.02])
        c = geo.addPoint(cx, cy, 0.0, 0.005)
        rim = [geo.addPoint(cx + r * math.cos(a), cy + r * math.sin(a), 0.0, 0.005)
               for a in np.arange(4) * (math.pi / 2)]
        arcs = [geo.addCircleArc(rim[i], c, rim[(i + 1) % 4]) for i in range(4)]
        geo.addPlaneSurface([box, geo.addCurveLoop(arcs)])

    return _to_size("cylinder", build, size, 1.0, {"cylinder": [cx, cy, r]})


def large(n_cells: int = 1_000_000) -> Mesh:
    """A large structured triangulation of [0, 2] × [0, 1], built without gmsh (vectorised).

    ``ny = round(√(n_cells / 4))``, ``nx = 2 ny`` squares, each split along its rising diagonal into
    two triangles: ``4 ny²`` cells (exactly 10⁶ for ``n_cells = 10**6``).

    Notes
    -----
    The dual graph is written down directly: in square ``s``, the lower triangle ``2s`` neighbours
    the upper triangle ``2s + 1`` (diagonal), the upper triangle of the square below (bottom side)
    and the upper triangle of the square to the right (right side).
    """
    n_cells = _check_size("large", n_cells, 10**9)
    ny = max(1, round(math.sqrt(n_cells / 4)))
    nx = 2 * ny
    h = 1.0 / ny
    px, py = np.meshgrid(np.arange(nx + 1) * h, np.arange(ny + 1) * h)
    points = np.column_stack([px.ravel(), py.ravel()])
    s = np.arange(nx * ny, dtype=np.int64)
    r, c = np.divmod(s, nx)
    a = r * (nx + 1) + c  # lower-left corner node
    b, d, e = a + 1, a + nx + 1, a + nx + 2
    tris = np.empty((2 * s.size, 3), dtype=np.int64)
    tris[0::2] = np.column_stack([a, b, e])  # lower triangle
    tris[1::2] = np.column_stack([a, e, d])  # upper triangle
    low, up = 2 * s, 2 * s + 1
    below = r > 0
    right = c < nx - 1
    edges = np.concatenate([
        np.column_stack([low, up]),
        np.column_stack([low[below], up[below] - 2 * nx]),
        np.column_stack([low[right], up[right] + 2]),
    ])
    n = tris.shape[0]
    xadj, adjncy = _csr(n, edges)
    mesh = Mesh(
        name="large",
        xadj=xadj,
        adjncy=adjncy,
        weights=np.ones(n),
        coords=points[tris].mean(axis=1),
        points=points,
        cell_ptr=np.arange(0, 3 * n + 1, 3, dtype=np.int64),
        cell_nodes=tris.ravel(),
        meta={"generator": "large", "size": n_cells, "nx": nx, "ny": ny},
    )
    return mesh


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CfdMesh:
    """A registered mesh generator.

    Attributes
    ----------
    build : callable
        ``build(size) -> Mesh``.
    default_size : int
        Approximate number of cells of the shipped mesh.
    file : str or None
        File name in ``meshes/`` (``None``: not shipped).
    doc : str
    """

    build: Callable[[int], Mesh]
    default_size: int
    file: str | None
    doc: str


CFD_MESHES: dict[str, CfdMesh] = {
    "grid": CfdMesh(grid_mesh, 380, "grid20x19.vtu", "structured grid of squares (20x19 for 380 cells)"),
    "stufe": CfdMesh(stufe, 2000, "stufe.vtu", "backward-facing step, refined at the step corner"),
    "lshape": CfdMesh(lshape, 1536, "lshape.vtu", "L-shaped domain, structured triangles"),
    "airfoil": CfdMesh(airfoil, 8000, "airfoil.vtu", "NACA0012 airfoil in a far-field box"),
    "3elt": CfdMesh(three_element, 9000, "3elt.vtu", "slat / main / flap airfoil in a far-field box"),
    "cylinder": CfdMesh(cylinder, 20000, "cylinder.vtu", "channel with a cylinder (DFG benchmark geometry)"),
    "large": CfdMesh(large, 1_000_000, None, "structured triangles of [0,2]x[0,1], fast for 10^6+ cells"),
}


def get_generator(name: str) -> CfdMesh:
    """The registered generator ``name``; :class:`MeshError` listing the valid names otherwise."""
    try:
        return CFD_MESHES[name]
    except (KeyError, TypeError):
        raise MeshError(f"unknown mesh generator {name!r}: expected one of {', '.join(CFD_MESHES)}") from None
