"""Pictures of a partition: the units of a 2-D mesh (or graph) coloured by the rank that owns them.

Like thesis Figs. 10.9–10.11: cell polygons filled with one colour per rank, partition boundaries drawn
as dark lines; pure graphs (Chaco/METIS ``.graph``, Matrix Market) are drawn as light-grey edges and
vertices coloured by owner. matplotlib is imported inside the functions (the core never needs it) and
figures are rendered with the Agg canvas directly, without pyplot and its global state.
"""

from __future__ import annotations

import functools
import io
import logging
import os
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.errors import HermesError
from hermes.files import write_atomic
from hermes.viz.panels import (EDGE_LIMIT, Raster, domain_box, draw_graph, draw_loads, draw_overview,
                               draw_rank_key, draw_side_panel, drawable_box, finite_coords, fit_canvas, frame_axes,
                               graph_segments, marker_sizes, paint_panels, panel_layout, plane_coords,
                               visible_units, weight_colors)
from hermes.viz.rundir import MAX_PROCESSORS, csr_problem, one_line
from hermes.viz.zoom import Box, check_zoom

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "plot_partition",
    "PictureOptions",
    "picture_options",
    "Units",
    "check_units",
    "draw_plane",
    "draw_volume",
    "ZOOM_3D",
    "rank_colors",
    "cell_polygons",
    "partition_boundaries",
    "graph_segments",
    "save_figure",
    "check_dpi",
    "plain",
    "DPI_RANGE",
]

log = logging.getLogger(__name__)

#: The resolutions a picture may have (``--dpi``): 10 is a thumbnail, 1200 a print (an 18 × 13 inch figure at
#: 1200 dpi is 22 000 × 16 000 pixels, within Agg's 65 536 and about 1.4 GB of canvas).
DPI_RANGE = (10, 1200)
_GOLDEN = 0.618033988749895
#: zlib level of the PNGs: 1 encodes a partition picture ~5x faster than PIL's default 6 for files ~1.3x larger
PNG_COMPRESSION = 1


def rank_colors(nparts: int) -> NDArray[np.float64]:
    """Distinct RGBA colours for ranks ``0..nparts-1``, shape ``(nparts, 4)``.

    The sequence does not depend on ``nparts`` (``rank_colors(k)`` is a prefix of ``rank_colors(m)``
    for ``k < m``), so the pictures of one run keep a rank's colour across phases.

    Notes
    -----
    Ranks 0–9 get the ten saturated ``tab20`` colours (= ``tab10``), ranks 10–19 their light partners,
    so consecutive ranks always differ in hue. From rank 20 on, hues follow the golden-ratio sequence
    ``h_k = 0.1 + k·φ⁻¹ mod 1`` with alternating saturation and value, which keeps any two ranks apart.
    """
    from matplotlib import colormaps
    from matplotlib.colors import hsv_to_rgb

    nparts = int(nparts)
    tab20 = np.asarray(colormaps["tab20"].colors, dtype=np.float64)
    base = np.concatenate([tab20[0::2], tab20[1::2]])  # darks (tab10) first, then the light partners
    out = np.ones((max(nparts, 0), 4))
    m = min(nparts, base.shape[0])
    out[:m, :3] = base[:m]
    if nparts > m:
        k = np.arange(m, nparts)
        hsv = np.stack(
            [(0.1 + k * _GOLDEN) % 1.0, np.array([0.75, 0.5, 0.95])[k % 3], np.array([0.92, 0.7])[k % 2]],
            axis=1,
        )
        out[m:, :3] = hsv_to_rgb(hsv)
    return out


def cell_polygons(
    points: NDArray[np.float64], cell_ptr: NDArray[np.int64], cell_nodes: NDArray[np.int64]
) -> NDArray[np.float64] | list[NDArray[np.float64]]:
    """The polygon of every unit from the CSR arrays ``cell_ptr``/``cell_nodes``.

    Returns an ``(n, k, 2)`` array when all cells have ``k`` nodes (the fast path of
    :class:`~matplotlib.collections.PolyCollection`), else a list of ``(k_i, 2)`` arrays.
    """
    xy = np.asarray(points, dtype=np.float64)[:, :2]
    ptr = np.asarray(cell_ptr, dtype=np.int64)
    corners = xy[np.asarray(cell_nodes, dtype=np.int64)[ptr[0] : ptr[-1]]]
    sizes = np.diff(ptr)
    if sizes.size == 0:
        return np.zeros((0, 3, 2))
    if np.all(sizes == sizes[0]):
        return corners.reshape(sizes.size, int(sizes[0]), 2)
    return np.split(corners, ptr[1:-1] - ptr[0])


def partition_boundaries(
    points: NDArray[np.float64],
    cell_ptr: NDArray[np.int64],
    cell_nodes: NDArray[np.int64],
    owner: NDArray[np.int64],
) -> NDArray[np.float64]:
    """Segments ``(m, 2, 2)`` of the polygon sides shared by two cells with different owners.

    Notes
    -----
    Every side ``(a, b)`` of every polygon gets the key ``min(a,b)·N + max(a,b)``; after sorting the keys,
    equal neighbours are the sides shared by two cells. Sides that are split by hanging nodes are not
    matched (the colours still show the boundary there).
    """
    xy = np.asarray(points, dtype=np.float64)[:, :2]
    ptr = np.asarray(cell_ptr, dtype=np.int64)
    nodes = np.asarray(cell_nodes, dtype=np.int64)
    sizes = np.diff(ptr)
    cell_of = np.repeat(np.arange(sizes.size), sizes)
    pos = np.arange(ptr[0], ptr[-1])
    nxt = pos + 1
    filled = sizes > 0
    nxt[ptr[1:][filled] - 1 - ptr[0]] = ptr[:-1][filled]  # last corner of each polygon closes on its first one
    a, b = nodes[pos], nodes[nxt]
    key = np.minimum(a, b) * np.int64(xy.shape[0]) + np.maximum(a, b)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    same = ks[1:] == ks[:-1]
    s1, s2 = order[:-1][same], order[1:][same]
    cut = np.asarray(owner)[cell_of[s1]] != np.asarray(owner)[cell_of[s2]]
    s1 = s1[cut]
    return np.stack([xy[a[s1]], xy[b[s1]]], axis=1)


def plain(text: object, limit: int = 60, *, tex: bool = False) -> str:
    """A name from a run's files as one line of at most ``limit`` characters (whitespace collapsed).

    ``tex``: the text goes where matplotlib reads ``$...$`` as TeX (legends, tick labels); its dollars are
    escaped, so a name cannot start math mode (a malformed formula fails only when the figure is drawn).
    """
    s = " ".join(str(text).split())
    s = s if len(s) <= limit else s[:limit - 1] + "…"
    return s.replace("$", r"\$") if tex else s


def check_dpi(dpi: object) -> int:
    """``dpi`` as an int, if it is an integer (not a boolean) in :data:`DPI_RANGE`.

    Raises
    ------
    HermesError
        ``--dpi: must be an integer between 10 and 1200, got 0``.
    """
    lo, hi = DPI_RANGE
    if not (isinstance(dpi, Integral) and not isinstance(dpi, (bool, np.bool_)) and lo <= dpi <= hi):
        shown = repr(dpi) if len(repr(dpi)) <= 40 else repr(dpi)[:37] + "..."
        raise HermesError(f"--dpi: must be an integer between {lo} and {hi}, got {shown}")
    return int(dpi)


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` as a PNG atomically: rendered in memory, then written by :func:`hermes.files.write_atomic`.

    The file is created next to ``path`` under an unpredictable name with exclusive creation (``mkstemp``,
    which neither follows nor reuses anything planted there), gets the umask's mode and is renamed onto
    ``path`` (``os.replace``: a symbolic link at ``path`` is replaced, its target untouched). A reader never
    sees a half-written picture; a failed render leaves no file behind.
    """
    fit_canvas(fig, Path(path).name)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=fig.dpi, pil_kwargs={"compress_level": PNG_COMPRESSION})
    except (ValueError, ArithmeticError) as err:  # LinAlgError is a ValueError
        # a last guard: the inputs are checked (hermes.viz.rundir) and windows kept drawable, so matplotlib
        # should never refuse; if it does, the user gets one line and --verbose the traceback
        log.debug("drawing %s failed", Path(path).name, exc_info=True)
        raise HermesError(f"cannot draw {Path(path).name}: {one_line(err)}") from None
    path = write_atomic(path, buf.getvalue())
    log.debug("wrote %s", path)
    return path


def plot_partition(
    path: str | os.PathLike[str],
    coords: ArrayLike,
    owner: ArrayLike,
    *,
    points: ArrayLike | None = None,
    cell_ptr: ArrayLike | None = None,
    cell_nodes: ArrayLike | None = None,
    xadj: ArrayLike | None = None,
    adjncy: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    levels: ArrayLike | None = None,
    nparts: int | None = None,
    title: str = "",
    show_weights: bool = False,
    zoom: Box | None = None,
    loads: ArrayLike | None = None,
    fair: ArrayLike | None = None,
    dpi: int = 150,
    cell_types: ArrayLike | None = None,
) -> Path:
    """Draw the units coloured by owner rank and write the picture to ``path`` (PNG, atomically).

    Parameters
    ----------
    path : path-like
        Output PNG file; its directory is created if needed.
    coords : array_like, shape (n, d)
        A representative point per unit; 3-D coordinates are projected onto the first two axes.
    owner : array_like of int, shape (n,)
        The rank owning each unit.
    points, cell_ptr, cell_nodes : array_like, optional
        Drawable geometry (see :class:`hermes.data.mesh.Mesh`). Used when given and planar (2 columns,
        or 3 with constant z); otherwise the units are drawn as a graph.
    xadj, adjncy : array_like, optional
        CSR adjacency, drawn as light-grey edges in graph mode (up to 20 000 vertices).
    weights : array_like of float, shape (n,), optional
        Unit weights, needed for ``show_weights``.
    levels : array_like of int, shape (n,), optional
        Refinement level of every cell: with ``show_weights`` the second panel shows the levels instead of
        the weights.
    nparts : int, optional
        Number of ranks (default ``owner.max() + 1``). Pass the run's processor count so that a rank
        keeps its colour in every picture of the run.
    title : str
        Figure title.
    show_weights : bool
        Add a second panel beside the partition: the unit weights on a logarithmic colour scale (or the
        refinement levels).
    zoom : (x0, x1, y0, y1), optional
        Show only this window (:func:`hermes.viz.zoom.auto_zoom` finds one where every rank is legible); a
        small overview of the whole domain with the window outlined is drawn beside the legend.
    loads, fair : array_like of float, shape (nparts,), optional
        Each rank's load and its fair load ``c_i · Σ l``: drawn under the partition as bars in the rank's
        colour, the fair load as a black tick on each bar; above ``BAR_LIMIT`` (64) ranks as the sorted load
        profile (:func:`hermes.viz.panels.draw_load_profile`).
    dpi : int
        Resolution of the PNG.
    cell_types : array_like of int, shape (n,), optional
        VTK types of 3-D cells (10 tetra, 12 hexahedron, 13 wedge, 14 pyramid) whose corners are
        ``points``/``cell_ptr``/``cell_nodes`` with 3-D points: the partition is drawn in 3-D
        (:mod:`hermes.viz.solid`: the outer surface and the ranks pulled apart, shaded; ``show_weights``
        colours the outer surface by weight or level). ``zoom`` does not apply to it: the mesh is drawn whole,
        with a warning (:data:`ZOOM_3D`).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    HermesError
        If the arrays do not fit together (shapes, CSR arrays that index outside their range), coordinates are
        not finite or beyond ``COORD_MAX``, a rank id is negative or at least ``nparts`` (at most
        ``MAX_PROCESSORS``, :mod:`hermes.viz.rundir`), ``zoom`` is not a box (:func:`hermes.viz.zoom.check_zoom`),
        ``dpi`` is outside :data:`DPI_RANGE`, or ``show_weights`` is set without ``weights``.

    Notes
    -----
    Cells are painted as pixels at each panel's own resolution (:mod:`hermes.viz.raster`: ~0.05 s for
    17 000 cells where a matplotlib polygon per cell cost ~0.5 s a picture): the partition boundaries in
    black, the cells' sides darkened, dropped above 20 000 visible cells.
    Graph vertices are markers whose area is about the panel area per vertex.
    Ranks ``0..nparts-1`` have the colours of :func:`rank_colors`; a legend lists them for up to
    ``LEGEND_LIMIT`` (64) ranks, a short key above that (:func:`hermes.viz.panels.draw_rank_key`).

    The steps: :func:`picture_options` and :func:`check_units` check the inputs, :func:`draw_plane` (a planar
    mesh or a graph) or :func:`draw_volume` (a 3-D mesh) draw the figure, :func:`save_figure` writes it.
    """
    opts = picture_options(title=title, show_weights=show_weights, zoom=zoom, dpi=dpi)
    units = check_units(coords, owner, points=points, cell_ptr=cell_ptr, cell_nodes=cell_nodes, xadj=xadj,
                        adjncy=adjncy, weights=weights, levels=levels, nparts=nparts, loads=loads, fair=fair,
                        cell_types=cell_types, show_weights=opts.show_weights)
    if units.solid is not None:
        if opts.zoom is not None:
            log.warning(ZOOM_3D)
        return save_figure(draw_volume(units, opts), path)
    return save_figure(draw_plane(units, opts), path)


#: the warning when a window is asked of a 3-D mesh's picture (it is drawn whole, in 3-D)
ZOOM_3D = "--zoom applies to 2-D meshes; a 3-D mesh is drawn whole"


@dataclass(frozen=True)
class PictureOptions:
    """What a partition picture shows besides the owners: its title, the weights panel, the window (a checked
    box, or None: the whole domain) and the resolution (checked, in :data:`DPI_RANGE`)."""

    title: str = ""
    show_weights: bool = False
    zoom: Box | None = None
    dpi: int = 150


def picture_options(*, title: str = "", show_weights: bool = False, zoom: Box | None = None,
                    dpi: int = 150) -> PictureOptions:
    """:class:`PictureOptions` with ``dpi`` and ``zoom`` checked (``--dpi``, ``--zoom`` in one line)."""
    dpi = check_dpi(dpi)
    zoom = check_zoom(zoom)
    if zoom == "auto":
        raise HermesError("--zoom: plot_partition takes a box or None (hermes.viz.auto_zoom finds one)")
    return PictureOptions(title, bool(show_weights), zoom, dpi)


@dataclass(frozen=True)
class Units:
    """The checked arrays of a partition picture (:func:`check_units`).

    ``xy`` the units' points in the plane; ``owner`` their ranks (int64) among ``nparts``; ``weights`` and
    ``levels`` per unit (optional); ``loads`` and ``fair`` per rank (optional); ``cells`` the polygons of a
    planar mesh ``(points, cell_ptr, cell_nodes)`` or ``solid`` the cells of a volume mesh ``(points, cell_ptr,
    cell_nodes, cell_types)``, else None (a graph: ``xadj``/``adjncy`` its edges); ``full`` the whole domain's
    drawable box.
    """

    xy: NDArray[np.float64]
    owner: NDArray[np.int64]
    nparts: int
    weights: NDArray[np.float64] | None = None
    levels: NDArray[np.int64] | None = None
    loads: NDArray[np.float64] | None = None
    fair: NDArray[np.float64] | None = None
    cells: tuple | None = None
    solid: tuple | None = None
    xadj: ArrayLike | None = None
    adjncy: ArrayLike | None = None
    full: Box = (0.0, 1.0, 0.0, 1.0)

    @property
    def n(self) -> int:
        return int(self.xy.shape[0])

    @functools.cached_property
    def colors(self) -> NDArray[np.float64]:
        """The colour of every rank (:func:`rank_colors`)."""
        return rank_colors(self.nparts)


def check_units(coords: ArrayLike, owner: ArrayLike, *, points=None, cell_ptr=None, cell_nodes=None, xadj=None,
                adjncy=None, weights=None, levels=None, nparts: int | None = None, loads=None, fair=None,
                cell_types=None, show_weights: bool = False) -> Units:
    """The arrays of :func:`plot_partition` checked and fitted together as :class:`Units` (its Raises)."""
    xy = plane_coords(coords)
    n = xy.shape[0]
    own = np.asarray(owner)
    if own.shape != (n,) or (n and own.dtype.kind not in "iu"):
        raise HermesError(f"owner must be {n} integer ranks, got shape {own.shape} dtype {own.dtype}")
    if n and own.min() < 0:
        raise HermesError(f"owner has negative rank {int(own.min())}")
    top = int(own.max()) + 1 if n else 1
    if nparts is not None and not (isinstance(nparts, Integral) and not isinstance(nparts, bool)
                                   and 1 <= nparts <= MAX_PROCESSORS):
        raise HermesError(f"nparts must be an integer between 1 and {MAX_PROCESSORS}, got {nparts!r}")
    nparts = top if nparts is None else int(nparts)
    if nparts < top:
        raise HermesError(f"owner has rank {top - 1} but nparts is {nparts}")
    if nparts > MAX_PROCESSORS:
        raise HermesError(f"owner has rank {top - 1}; hermes draws at most {MAX_PROCESSORS} ranks")
    own = own.astype(np.int64)
    w = _per_unit(weights, n, "weights", np.float64)
    lev = _per_unit(levels, n, "levels", np.int64)
    if show_weights and w is None and lev is None:
        raise HermesError("show_weights needs the unit weights")
    per_rank = {}
    if loads is not None:
        per_rank = dict(loads=_per_unit(loads, nparts, "loads", np.float64),
                        fair=None if fair is None else _per_unit(fair, nparts, "fair", np.float64))
    common = dict(xy=xy, owner=own, nparts=nparts, weights=w, levels=lev, xadj=xadj, adjncy=adjncy, **per_rank)

    if xadj is not None and adjncy is not None:
        problem = csr_problem(np.asarray(xadj), np.asarray(adjncy), n, n, names=("xadj", "adjncy"))
        if problem:
            raise HermesError(problem)
    if points is not None and cell_ptr is not None and cell_nodes is not None:
        pts = finite_coords(points, "points")
        if pts.ndim != 2 or pts.shape[1] not in (2, 3):
            raise HermesError(f"points must have shape (m, 2) or (m, 3), got {pts.shape}")
        problem = csr_problem(np.asarray(cell_ptr), np.asarray(cell_nodes), n, pts.shape[0],
                              names=("cell_ptr", "cell_nodes"))
        if problem:
            raise HermesError(problem)
        ptr, nodes = np.asarray(cell_ptr, dtype=np.int64), np.asarray(cell_nodes, dtype=np.int64)
        if cell_types is not None:
            types = np.asarray(cell_types)
            if types.shape != (n,) or pts.shape[1] != 3:
                raise HermesError(f"cell_types must be {n} VTK types of cells with 3-D points, got shape "
                                  f"{types.shape} with points {pts.shape}")
            return Units(**common, solid=(pts, ptr, nodes, types))
        if pts.shape[1] == 2 or np.ptp(pts[:, 2]) == 0:
            return Units(**common, cells=(pts, ptr, nodes), full=drawable_box(domain_box(pts[:, :2])))
        log.warning("3-D cells without their types: drawing %d units as a graph projected on (x, y)", n)
    elif xy.shape[0] and np.asarray(coords).ndim == 2 and np.asarray(coords).shape[1] == 3 \
            and np.ptp(np.asarray(coords, dtype=np.float64)[:, 2]) > 0:
        log.warning("3-D graph: drawing %d units projected on (x, y)", n)
    return Units(**common, full=drawable_box(domain_box(xy, pad=0.04)))  # room for the markers on the border


def draw_plane(u: Units, opts: PictureOptions) -> Figure:
    """The picture of a planar mesh or a graph: the partition panel, the rank key, the overview of the whole
    domain (zoomed), the weights or levels (``show_weights``) and the loads (``u.loads``), then the cells
    painted once the layout has placed the panels."""
    from matplotlib.figure import Figure

    zoom = opts.zoom
    bounds = u.full if zoom is None else drawable_box(zoom)
    geom = panel_layout(bounds, opts.show_weights, u.loads is not None, u.full if zoom is not None else None,
                        u.nparts)
    msize = marker_sizes(u.xy, bounds, geom.panel) if u.cells is None else 1.0
    fig = Figure(figsize=geom.size, dpi=opts.dpi, layout="constrained")
    axes = fig.subplot_mosaic(geom.mosaic, height_ratios=geom.heights, width_ratios=geom.widths)
    raster: list[Raster] | None = [] if u.cells is not None else None  # painted once the layout placed them
    facecolors = u.colors[u.owner]
    _owner_panel(axes["P"], u, facecolors, bounds, raster, msize, opts)
    draw_rank_key(fig, axes["K"], u.colors, u.nparts)
    if zoom is not None:
        draw_overview(axes["O"], raster, u.xy, facecolors, u.full, bounds, geom.overview)
    if opts.show_weights:
        draw_side_panel(fig, axes["W"], raster, u.xy, u.xadj, u.adjncy, u.weights, u.levels, msize, bounds)
    if u.loads is not None:
        draw_loads(axes["L"], u.colors, u.loads, u.fair)
    if opts.title:
        fig.suptitle(opts.title, parse_math=False)  # a run's names are text, never TeX
    if raster:
        paint_panels(fig, raster, *u.cells)
    return fig


def _owner_panel(ax: Axes, u: Units, facecolors, bounds: Box, raster: list[Raster] | None, msize,
                 opts: PictureOptions) -> None:
    """The units coloured by owner: a mesh's cells go to ``raster`` (outlines and boundaries thinner when the
    cells are many), a graph's vertices and edges are drawn."""
    if raster is not None:
        thin = u.n > EDGE_LIMIT or visible_units(u.xy, bounds) > EDGE_LIMIT
        # outlines: black at 35 % (none when the cells are too many to see); boundaries 1 pt (0.5 when thin)
        raster.append(Raster(ax, facecolors, u.owner, 0.0 if thin else 0.35,
                             (0.5 if thin else 1.0) * opts.dpi / 72.0))
    else:
        draw_graph(ax, u.xy, u.xadj, u.adjncy, facecolors, msize)
    frame_axes(ax, bounds)
    if opts.show_weights or opts.zoom is not None:
        ax.set_title("owner rank" + (" (zoomed; the whole domain on the right)" if opts.zoom is not None else ""),
                     fontsize="medium")


def draw_volume(u: Units, opts: PictureOptions) -> Figure:
    """The 3-D picture of a volume mesh's partition (:func:`hermes.viz.solid.draw_solid`: the outer surface and
    the ranks pulled apart), the rank key, with ``show_weights`` the outer surface coloured by the unit weights
    or the refinement levels (:func:`hermes.viz.solid.draw_surface`), and the loads under them."""
    from matplotlib.figure import Figure

    from hermes.viz.solid import draw_solid

    pts, ptr, nodes, types = u.solid
    mosaic, heights, size = [["O", "S"]], [5.0], [13.0, 6.0]
    if opts.show_weights:
        mosaic[0].append("W")
        size[0] += 6.0
    if u.loads is not None:
        mosaic.append(["L"] * len(mosaic[0]))
        heights.append(1.9)
        size[1] += 2.2
    three_d = {"projection": "3d"}
    fig = Figure(figsize=size, dpi=opts.dpi, layout="constrained")
    axes = fig.subplot_mosaic(mosaic, height_ratios=heights,
                              per_subplot_kw={k: three_d for k in mosaic[0]})
    draw_solid(axes["O"], axes["S"], pts, ptr, nodes, types, u.owner, u.colors)
    draw_rank_key(fig, axes["S"], u.colors, u.nparts)
    if opts.show_weights:
        _solid_weights(fig, axes["W"], u)
    if u.loads is not None:
        draw_loads(axes["L"], u.colors, u.loads, u.fair)
    if opts.title:
        fig.suptitle(opts.title, parse_math=False)
    return fig


def _solid_weights(fig: Figure, ax: Axes, u: Units) -> None:
    """The outer surface coloured by the refinement levels (when recorded) or the unit weights, the colours
    and colour bar of :func:`hermes.viz.panels.weight_colors` (as the 2-D panel)."""
    from matplotlib.cm import ScalarMappable

    from hermes.viz.solid import draw_surface

    norm, cmap, values, name = weight_colors(u.weights, u.levels)
    draw_surface(ax, *u.solid, cmap(norm(values)), name)
    cb = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.6, label=name)
    if u.levels is not None:
        cb.set_ticks(np.arange(int(u.levels.max(initial=0)) + 1))


def _per_unit(values: ArrayLike | None, n: int, what: str, dtype) -> NDArray | None:
    if values is None:
        return None
    try:
        v = np.asarray(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise HermesError(f"{what} must be numbers") from None
    if v.shape != (n,):
        raise HermesError(f"{what} must have shape ({n},), got {v.shape}")
    return v


# ----------------------------------------------------------------------------------------- helpers