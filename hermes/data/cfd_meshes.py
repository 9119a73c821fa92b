"""Generated 2-D CFD meshes of the kinds used in the thesis' experiments (thesis Table 10.2).

The partitioning test meshes of the thesis (grid20x19, stufe, L, airfoil, 3elt, whitaker) are not
shipped with hermes, so hermes generates meshes *of the same kinds* with gmsh (PyPI wheel, headless):

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
coordinates, unit weights and counter-clockwise cell polygons (:mod:`hermes.data.polygons`).
:func:`write_mesh` (from :mod:`hermes.data.io`) writes any such mesh with meshio (``.vtu``, ``.msh``,
...); :func:`hermes.data.io.read_mesh` reads it back identically.

The ``size`` parameter is the approximate number of cells. For the gmsh meshes a global mesh-size
factor is adjusted (``N ∝ factor⁻²``) until the count is within ``SIZE_TOLERANCE`` of the target.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hermes.data.generators import grid, lshape_triangles
from hermes.data.mesh import Mesh, csr_from_edges
from hermes.data.polygons import (
    mesh_from_cells,
)
from hermes.errors import MeshError

__all__ = ["CFD_MESHES", "SIZE_TOLERANCE", "CfdMesh", "get_generator", "naca4", "grid_mesh", "stufe", "lshape",
           "airfoil", "three_element", "cylinder", "large"]

log = logging.getLogger(__name__)

SIZE_TOLERANCE = 0.1  # relative deviation of the cell count from the requested size (gmsh meshes)
_MIN_SIZE = 50
_MAX_GMSH_SIZE = 500_000  # beyond this, gmsh takes minutes: use large()
_MAX_ITER = 8


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
    xadj, adjncy = csr_from_edges(n, edges)
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
        from hermes.suggest import did_you_mean

        raise MeshError(f"unknown mesh generator {name!r}{did_you_mean(str(name), CFD_MESHES)}: expected one of "
                        f"{', '.join(CFD_MESHES)}") from None
