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
from hermes.results import write_atomic
from hermes.viz.rundir import COORD_MAX, MAX_PROCESSORS, csr_problem, one_line
from hermes.viz.zoom import Box, check_zoom

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "plot_partition",
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

#: Above this many units, cell outlines and graph edges are dropped (they would paint the picture grey).
EDGE_LIMIT = 20_000
#: Up to this many parts the figure carries a legend with one entry per rank (16 per column, beside the
#: partition); above, a discrete colour bar.
LEGEND_LIMIT = 64
#: Legend entries per column.
LEGEND_ROWS = 16
#: Up to this many ranks the load panel draws one outlined bar per rank (above: one collection, no outlines).
BAR_LIMIT = 64
#: The resolutions a picture may have (``--dpi``): 10 is a thumbnail, 1200 a print (an 18 × 13 inch figure at
#: 1200 dpi is 22 000 × 16 000 pixels, within Agg's 65 536 and about 1.4 GB of canvas).
DPI_RANGE = (10, 1200)
#: The largest canvas rendered: Agg's limit of 65 536 pixels a side, and 4·10⁸ pixels (1.6 GB of RGBA); a
#: larger figure (a table of many rows, a huge dpi) is drawn at the resolution that fits, with a warning.
MAX_SIDE, MAX_PIXELS = 65_000, 400_000_000
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


def graph_segments(
    coords: NDArray[np.float64], xadj: NDArray[np.int64], adjncy: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Segments ``(m, 2, 2)`` of the undirected edges ``i < j`` of a CSR graph, in the plane."""
    xy = _plane(coords)
    xadj = np.asarray(xadj, dtype=np.int64)
    cols = np.asarray(adjncy, dtype=np.int64)
    rows = np.repeat(np.arange(xadj.size - 1), np.diff(xadj))
    keep = rows < cols
    return np.stack([xy[rows[keep]], xy[cols[keep]]], axis=1)


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


def _fit_canvas(fig: Figure, name: str) -> None:
    """Give ``fig`` an Agg canvas and, if it is larger than Agg draws (``MAX_SIDE``, ``MAX_PIXELS``), the
    largest dpi that fits, with a warning."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    w, h = (float(v) * fig.dpi for v in fig.get_size_inches())
    scale = min(1.0, MAX_SIDE / max(w, h, 1.0), (MAX_PIXELS / max(w * h, 1.0)) ** 0.5)
    if scale < 1.0:
        log.warning("%s: a %.0f x %.0f picture is too large; drawn at %.0f dpi", name, w, h, fig.dpi * scale)
        fig.set_dpi(fig.dpi * scale)


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` as a PNG atomically: rendered in memory, then written by :func:`hermes.results.write_atomic`.

    The file is created next to ``path`` under an unpredictable name with exclusive creation (``mkstemp``,
    which neither follows nor reuses anything planted there), gets the umask's mode and is renamed onto
    ``path`` (``os.replace``: a symbolic link at ``path`` is replaced, its target untouched). A reader never
    sees a half-written picture; a failed render leaves no file behind.
    """
    _fit_canvas(fig, Path(path).name)
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
        colour, the fair load as a black tick on each bar.
    dpi : int
        Resolution of the PNG.
    cell_types : array_like of int, shape (n,), optional
        VTK types of 3-D cells (10 tetra, 12 hexahedron, 13 wedge, 14 pyramid) whose corners are
        ``points``/``cell_ptr``/``cell_nodes`` with 3-D points: the partition is drawn in 3-D
        (:mod:`hermes.viz.solid`: the outer surface and the ranks pulled apart, shaded); ``zoom`` and the
        weights panel do not apply to it.

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
    Ranks ``0..nparts-1`` have the colours of :func:`rank_colors`; a legend lists them for up to 16
    ranks, a discrete colour bar above that.
    """
    from matplotlib.figure import Figure

    dpi = check_dpi(dpi)
    zoom = check_zoom(zoom)
    if zoom == "auto":
        raise HermesError("--zoom: plot_partition takes a box or None (hermes.viz.auto_zoom finds one)")
    xy = _plane(coords)
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
    bars = None
    if loads is not None:
        bars = (_per_unit(loads, nparts, "loads", np.float64),
                None if fair is None else _per_unit(fair, nparts, "fair", np.float64))

    cells = None  # (points, cell_ptr, cell_nodes) of a planar mesh, drawn as pixels (hermes.viz.raster)
    if xadj is not None and adjncy is not None:
        problem = csr_problem(np.asarray(xadj), np.asarray(adjncy), n, n, names=("xadj", "adjncy"))
        if problem:
            raise HermesError(problem)
    if points is not None and cell_ptr is not None and cell_nodes is not None:
        pts = _finite_coords(points, "points")
        if pts.ndim != 2 or pts.shape[1] not in (2, 3):
            raise HermesError(f"points must have shape (m, 2) or (m, 3), got {pts.shape}")
        problem = csr_problem(np.asarray(cell_ptr), np.asarray(cell_nodes), n, pts.shape[0],
                              names=("cell_ptr", "cell_nodes"))
        if problem:
            raise HermesError(problem)
        ptr, nodes = np.asarray(cell_ptr, dtype=np.int64), np.asarray(cell_nodes, dtype=np.int64)
        planar = pts.shape[1] == 2 or np.ptp(pts[:, 2]) == 0
        if cell_types is not None:
            types = np.asarray(cell_types)
            if types.shape != (n,) or pts.shape[1] != 3:
                raise HermesError(f"cell_types must be {n} VTK types of cells with 3-D points, got shape "
                                  f"{types.shape} with points {pts.shape}")
            return _plot_solid(path, pts, ptr, nodes, types, own, nparts, title, bars, dpi)
        if planar:
            cells = (pts, ptr, nodes)
            full = _bounds(pts[:, :2])
        else:
            log.warning("3-D cells without their types: drawing %d units as a graph projected on (x, y)", n)
    elif xy.shape[0] and np.asarray(coords).ndim == 2 and np.asarray(coords).shape[1] == 3 \
            and np.ptp(np.asarray(coords, dtype=np.float64)[:, 2]) > 0:
        log.warning("3-D graph: drawing %d units projected on (x, y)", n)
    if cells is None:
        full = _bounds(xy, pad=0.04)  # room for the markers on the border
    full = _drawable(full)
    bounds = full if zoom is None else _drawable(zoom)

    colors = rank_colors(nparts)
    facecolors = colors[own]
    big = n > EDGE_LIMIT
    geom = _layout(bounds, show_weights, bars is not None, full if zoom is not None else None, nparts)
    msize = _marker_sizes(xy, bounds, geom.panel) if cells is None else 1.0
    fig = Figure(figsize=geom.size, dpi=dpi, layout="constrained")
    axes = fig.subplot_mosaic(geom.mosaic, height_ratios=geom.heights, width_ratios=geom.widths)

    ax = axes["P"]
    raster: list[_Raster] = []  # the panels of cells, painted once the layout has placed them
    if cells is not None:
        thin = big or _visible_units(xy, bounds) > EDGE_LIMIT
        # outlines: black at 35 % (none when the cells are too many to see); boundaries 1 pt (0.5 when thin)
        raster.append(_Raster(ax, facecolors, own, 0.0 if thin else 0.35, (0.5 if thin else 1.0) * dpi / 72.0))
    else:
        _draw_graph(ax, xy, xadj, adjncy, facecolors, msize)
    _frame(ax, bounds)
    if show_weights or zoom is not None:
        ax.set_title("owner rank" + (" (zoomed; the whole domain on the right)" if zoom is not None else ""),
                     fontsize="medium")
    _rank_key(fig, axes["K"], colors, nparts)
    if zoom is not None:
        _overview(axes["O"], raster if cells is not None else None, xy, facecolors, full, bounds, geom.overview)

    if show_weights:
        _side_panel(fig, axes["W"], raster if cells is not None else None, xy, xadj, adjncy, w, lev, msize, bounds)
    if bars is not None:
        _load_bars(axes["L"], colors, *bars)

    if title:
        fig.suptitle(title, parse_math=False)  # a run's names are text, never TeX
    if raster:
        _paint_panels(fig, raster, *cells)
    return save_figure(fig, path)


def _plot_solid(path, pts, ptr, nodes, types, own, nparts: int, title: str, bars, dpi: int) -> Path:
    """The 3-D picture of a volume mesh's partition (:func:`hermes.viz.solid.draw_solid`), a legend of the
    ranks and, given ``bars``, the load per rank under it."""
    from matplotlib.figure import Figure

    from hermes.viz.solid import draw_solid

    colors = rank_colors(nparts)
    mosaic, heights, size = [["O", "S"]], [5.0], [13.0, 6.0]
    if bars is not None:
        mosaic.append(["L", "L"])
        heights.append(1.9)
        size[1] += 2.2
    fig = Figure(figsize=size, dpi=dpi, layout="constrained")
    axes = fig.subplot_mosaic(mosaic, height_ratios=heights,
                              per_subplot_kw={"O": {"projection": "3d"}, "S": {"projection": "3d"}})
    draw_solid(axes["O"], axes["S"], pts, ptr, nodes, types, own, colors)
    _rank_key(fig, axes["S"], colors, nparts)
    if bars is not None:
        _load_bars(axes["L"], colors, *bars)
    if title:
        fig.suptitle(title, parse_math=False)
    return save_figure(fig, path)


@dataclass(frozen=True)
class _Raster:
    """A panel of cells to paint: its axes, a colour per cell, and (the partition panel) the owners whose
    boundaries are drawn ``boundary`` pixels wide and the fraction by which cell sides are darkened."""

    ax: Axes
    colors: NDArray[np.float64]
    owner: NDArray[np.int64] | None = None
    outline: float = 0.0
    boundary: float = 0.0


#: the largest panel painted at the screen's resolution (pixels a side, and in all): a print at a huge dpi
#: gets its cells at this resolution, scaled up by matplotlib
RASTER_SIDE, RASTER_PIXELS = 8192, 32_000_000


@functools.cache
def _pixel_image() -> type:
    """A :class:`~matplotlib.image.FigureImage` put on the canvas pixel for pixel: the figure image resamples
    its array even at one pixel per pixel (~0.03 s a panel, and a masked copy); this one hands the renderer
    the array itself, rows from the bottom as Agg takes them, whenever it is drawn at the figure's dpi."""
    from matplotlib.image import FigureImage
    from matplotlib.transforms import IdentityTransform

    class _Pixels(FigureImage):
        def make_image(self, renderer, magnification=1.0, unsampled=False):
            if magnification != 1.0 or renderer.dpi != self.get_figure(root=True).dpi:
                return super().make_image(renderer, magnification, unsampled)
            rows = self.get_array()
            rows = rows[::-1] if self.origin == "upper" else rows
            return np.ascontiguousarray(rows), self.ox, self.oy, IdentityTransform()

    return _Pixels


def _paint_panels(fig: Figure, panels: list[_Raster], pts, ptr, nodes) -> None:
    """Paint the cells of every panel as an image of the panel's own pixel size (:mod:`hermes.viz.raster`).

    The constrained layout runs once here to place the panels, then is switched off: the images lie within
    their axes and change nothing, and the picture is drawn once. Panels of the same window and size share
    their map of cells.
    """
    from hermes.viz.raster import cell_index_map, paint

    _fit_canvas(fig, "the picture")
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
    maps: dict[tuple, NDArray[np.int32]] = {}
    for p in panels:
        p.ax.apply_aspect()
        bb = p.ax.bbox
        x0, y0 = int(round(bb.x0)), int(round(bb.y0))
        w, h = max(int(round(bb.x1)) - x0, 1), max(int(round(bb.y1)) - y0, 1)
        exact = w <= RASTER_SIDE and h <= RASTER_SIDE and w * h <= RASTER_PIXELS
        if exact:  # the data window of exactly these pixels, the image put there unresampled
            (bx0, by0), (bx1, by1) = p.ax.transData.inverted().transform([(x0, y0), (x0 + w, y0 + h)])
        else:  # a print of a huge dpi: the cells at the largest resolution painted, scaled up by matplotlib
            scale = min(RASTER_SIDE / max(w, h), (RASTER_PIXELS / (w * h)) ** 0.5)
            w, h = max(int(w * scale), 1), max(int(h * scale), 1)
            (bx0, bx1), (by0, by1) = p.ax.get_xlim(), p.ax.get_ylim()
        key = (p.ax.get_xlim(), p.ax.get_ylim(), w, h)  # the partition and weights panels: one map
        if key not in maps:
            maps[key] = cell_index_map(pts, ptr, nodes, (float(bx0), float(bx1), float(by0), float(by1)), w, h)
        width = max(int(round(p.boundary * (1.0 if exact else scale))), 1) if p.boundary > 0 else 0
        img = paint(maps[key], p.colors, owner=p.owner, outline=p.outline, boundary=width)
        if exact:  # under its axes (zorder -1), whose background is left out so that the image shows
            im = _pixel_image()(fig, offsetx=x0, offsety=y0, origin="upper", zorder=-1)
            im.set_array(img)
            fig.images.append(im)
            p.ax.patch.set_visible(False)
        else:
            lim = (*p.ax.get_xlim(), *p.ax.get_ylim())
            im = p.ax.imshow(img, extent=lim, origin="upper", interpolation="nearest",
                             aspect=p.ax.get_aspect(), zorder=0)
            im.set_in_layout(False)
            p.ax.set_xlim(lim[0], lim[1])
            p.ax.set_ylim(lim[2], lim[3])
    fig.set_layout_engine(None)  # no engine: savefig draws once (with a placeholder it draws twice)
    if fig.get_layout_engine() is not None:  # a matplotlibrc asking for a layout everywhere
        fig.set_layout_engine("none")


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


def _visible_units(xy: NDArray[np.float64], box: Box) -> int:
    x0, x1, y0, y1 = box
    return int(np.count_nonzero((xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)))


def _overview(ins: Axes, raster: list[_Raster] | None, xy, facecolors, full: Box, box: Box, area: float) -> None:
    """The whole domain, small, in its own panel under the rank key, with the zoom window outlined; its cells
    go to ``raster`` (a mesh) or are drawn as markers (a graph)."""
    from matplotlib.patches import Rectangle

    if raster is not None:
        raster.append(_Raster(ins, facecolors))
    else:
        ins.scatter(xy[:, 0], xy[:, 1], c=facecolors, s=_marker_sizes(xy, full, area, top=8.0), linewidths=0)
    ins.add_patch(Rectangle((box[0], box[2]), box[1] - box[0], box[3] - box[2], fill=False, edgecolor="k",
                            linewidth=1.2))
    _frame(ins, full)
    ins.set_title("whole domain", fontsize="x-small")


def _side_panel(fig: Figure, wax: Axes, raster: list[_Raster] | None, xy, xadj, adjncy, w, lev, msize,
                bounds: Box) -> None:
    """The unit weights (log colours) or, when recorded, the refinement levels (one colour per level); a
    mesh's cells go to ``raster``, a graph's vertices are drawn as markers."""
    from matplotlib.collections import LineCollection

    if lev is not None:
        from matplotlib.colors import BoundaryNorm

        top = int(lev.max(initial=0))
        norm = BoundaryNorm(np.arange(top + 2) - 0.5, 256)
        values, cmap, label, name = lev, "viridis", "refinement level", "refinement level"
    else:
        from matplotlib.colors import LogNorm, Normalize

        lo, hi = _log_range(w)
        norm = LogNorm(lo, hi) if hi > 10 * lo else Normalize(lo, hi)  # a log scale only over a decade or more
        values, cmap, label, name = np.clip(w, norm.vmin, None), "viridis", "weight", "unit weight"
    n = xy.shape[0]
    if raster is not None:
        from matplotlib import colormaps
        from matplotlib.cm import ScalarMappable

        coll = ScalarMappable(norm=norm, cmap=cmap)
        raster.append(_Raster(wax, colormaps[cmap](norm(values))))
    else:
        if xadj is not None and adjncy is not None and n <= EDGE_LIMIT:
            segs = graph_segments(xy, xadj, adjncy)
            wax.add_collection(LineCollection(segs, colors="0.8", linewidths=_lw(n), zorder=1), autolim=False)
        coll = wax.scatter(xy[:, 0], xy[:, 1], c=values, s=msize, cmap=cmap, norm=norm, linewidths=0, zorder=2)
    _frame(wax, bounds)
    wax.set_title(name, fontsize="medium")
    cb = fig.colorbar(coll, ax=wax, shrink=0.8, label=label)
    if lev is not None:
        cb.set_ticks(np.arange(int(lev.max(initial=0)) + 1))


def _load_bars(ax: Axes, colors: NDArray[np.float64], loads: NDArray[np.float64],
               fair: NDArray[np.float64] | None) -> None:
    """Per rank: its load as a bar in its colour, its fair load ``c_i Σ l`` as a black tick.

    The bars are one collection (a patch per bar costs ~1 ms to lay out: 100 000 ranks would take minutes);
    up to :data:`BAR_LIMIT` ranks they are outlined.
    """
    from matplotlib.collections import PolyCollection

    p = loads.size
    r = np.arange(p)
    h = np.where(np.isfinite(loads), loads, 0.0)
    x0, x1 = r - 0.4, r + 0.4
    bars = np.stack([np.column_stack([x0, np.zeros(p)]), np.column_stack([x0, h]), np.column_stack([x1, h]),
                     np.column_stack([x1, np.zeros(p)])], axis=1)
    outline = dict(edgecolors="0.3", linewidths=0.4) if p <= BAR_LIMIT else dict(edgecolors="face", linewidths=0)
    ax.add_collection(PolyCollection(bars, facecolors=colors[:p], **outline))
    top = float(h.max(initial=0.0))
    title = "load per rank"
    if fair is not None:
        ax.scatter(r, fair, marker="_", s=max(40.0, 3000.0 / max(p, 1)), color="k", linewidths=2, zorder=3,
                   label="fair load $c_i\\,\\Sigma l$")
        top = max(top, float(np.max(fair, where=np.isfinite(fair), initial=0.0)))
        ok = fair > 0
        if ok.any():
            title += f" (bars) against the fair load $c_i\\,\\Sigma l$ (black): max $l_i/\\bar l_i$ = " \
                     f"{float(np.max(loads[ok] / fair[ok])):.3f}"
    ax.set_title(title, fontsize="small")
    ax.set_xlim(-0.6, p - 0.4)
    ax.set_ylim(0.0, 1.05 * top if top > 0 else 1.0)
    ax.set_xlabel("rank", fontsize="small")
    ax.set_ylabel("load", fontsize="small")
    ax.tick_params(labelsize="x-small")
    if p <= 32:
        ax.set_xticks(r)
    ax.grid(True, axis="y", alpha=0.3)


# ----------------------------------------------------------------------------------------- helpers
def _finite_coords(values: ArrayLike, what: str) -> NDArray[np.float64]:
    """``values`` as floats, if they are finite and at most ``COORD_MAX`` in magnitude (the extent stays finite)."""
    try:
        c = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise HermesError(f"{what} must be numbers") from None
    if c.size and not (np.isfinite(c).all() and np.abs(c).max() <= COORD_MAX):
        raise HermesError(f"{what} must be finite and at most {COORD_MAX:g} in magnitude")
    return c


def _plane(coords: ArrayLike) -> NDArray[np.float64]:
    """Coordinates as ``(n, 2)``: 3-D projected on (x, y), 1-D padded with y = 0."""
    c = _finite_coords(coords, "coords")
    if c.ndim == 1:
        c = c[:, None]
    if c.ndim != 2 or c.shape[1] < 1:
        raise HermesError(f"coords must have shape (n, d), got {c.shape}")
    if c.shape[1] == 1:
        return np.column_stack([c[:, 0], np.zeros(c.shape[0])])
    return c[:, :2]


def _bounds(xy: NDArray[np.float64], pad: float = 0.02) -> tuple[float, float, float, float]:
    if xy.shape[0] == 0:
        return 0.0, 1.0, 0.0, 1.0
    x0, y0 = xy.min(axis=0)
    x1, y1 = xy.max(axis=0)
    size = max(x1 - x0, y1 - y0) or 1.0
    pad = pad * size
    return float(x0 - pad), float(x1 + pad), float(y0 - pad), float(y1 + pad)


#: the most elongated window drawn (height / width or its inverse): a thinner one is widened about its centre
#: (matplotlib's equal-aspect axes of a 10⁻¹² × 10¹² box are a singular transform)
MAX_ELONGATION = 1e4


def _drawable(box: Box) -> Box:
    """``box`` widened where it could not be drawn: a side shorter than ``1/MAX_ELONGATION`` of the other, or
    than ``10⁻⁹`` of its distance from 0 (beyond float64's resolution for a picture's ticks and transforms)."""
    x0, x1, y0, y1 = (float(v) for v in box)
    w, h = x1 - x0, y1 - y0
    tiny = 1e-300
    w_min = max(h / MAX_ELONGATION, 1e-9 * max(abs(x0), abs(x1)), tiny)
    h_min = max(w / MAX_ELONGATION, 1e-9 * max(abs(y0), abs(y1)), tiny)
    if w < w_min:
        cx = 0.5 * (x0 + x1)
        x0, x1 = cx - 0.5 * w_min, cx + 0.5 * w_min
    if h < h_min:
        cy = 0.5 * (y0 + y1)
        y0, y1 = cy - 0.5 * h_min, cy + 0.5 * h_min
    return x0, x1, y0, y1


@dataclass(frozen=True)
class _Layout:
    """Where the panels go: ``mosaic`` rows of panel keys (P partition, K rank key, O overview of the whole
    domain, W weights, L load bars, . empty), their heights and widths (inches, used as ratios)."""

    mosaic: list[list[str]]
    heights: list[float]
    widths: list[float]
    size: tuple[float, float]
    panel: float  # area of the partition panel, pt²
    overview: float = 0.0  # area of the overview panel, pt²


def _key_size(nparts: int) -> tuple[int, float, float]:
    """Columns, width and height (inches) of the rank key: a legend of ≤ LEGEND_LIMIT ranks (at font size
    "small", 8.3 pt: a row is 1.5 lines, a column a 1.2-em patch, the label and the spacing), else a colour bar."""
    if nparts > LEGEND_LIMIT:
        return 0, 1.0, 2.5
    ncols = 1 if nparts <= 8 else int(np.ceil(nparts / (8 if nparts <= 16 else LEGEND_ROWS)))
    rows = int(np.ceil(nparts / ncols))
    em = 8.33 / 72.0
    col = (1.2 + 0.8 + 0.6 * len(str(max(nparts - 1, 0))) + 0.8) * em
    return ncols, max(1.0, ncols * col + 0.2), rows * 1.5 * em + 0.45


def _layout(bounds: Box, two: bool, bars: bool = False, full: Box | None = None, nparts: int = 1) -> _Layout:
    """Panel grid, figure size (inches) and panel area (pt²) following the aspect ratio of the mesh.

    Beside the partition, a column of its own holds the rank key and, when zoomed (``full``: the whole
    domain), the overview under it, so neither covers the other nor leaves the figure. The weights panel goes
    beside the partition (under it for a wide mesh); the load bars span the bottom.
    """
    x0, x1, y0, y1 = bounds
    aspect = float(np.clip((y1 - y0) / max(x1 - x0, 1e-300), 0.25, 2.5))
    width = 6.5 if aspect <= 1.5 else 6.5 / (aspect / 1.5)
    height = width * aspect
    panel = width * height * 72.0**2
    _, key_w, key_h = _key_size(nparts)
    side = max(key_w, 1.9) if full is not None else key_w
    if full is not None:
        f_aspect = float(np.clip((full[3] - full[2]) / max(full[1] - full[0], 1e-300), 0.25, 2.5))
        ov_h = side * f_aspect + 0.35  # and its title
        tall = max(height, key_h + ov_h)
        rows, heights = [["P", "K"], ["P", "O"]], [tall - ov_h, ov_h]
        overview = side * (ov_h - 0.35) * 72.0**2
    else:
        overview = 0.0
        tall = max(height, key_h)
        rows, heights = [["P", "K"]], [tall]
    widths = [width, side]
    fig_w, fig_h = width + side + 0.5, tall + 0.9  # margins and the title
    if two and aspect >= 0.6:  # the weights (and their colour bar) beside
        rows = [r + ["W"] for r in rows]
        widths.append(width)
        fig_w += width + 1.1
    elif two:  # wide mesh: panels on top of each other
        rows.append(["W", "."])
        heights.append(height)
        fig_h += height + 0.4
    if bars:
        bar_h = 1.9
        rows.append(["L"] * len(rows[0]))
        heights.append(bar_h)
        fig_h += bar_h + 0.3
    return _Layout(rows, heights, widths, (fig_w, fig_h), panel, overview)


def _frame(ax: Axes, bounds: tuple[float, float, float, float]) -> None:
    ax.set_xlim(bounds[0], bounds[1])
    ax.set_ylim(bounds[2], bounds[3])
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


#: the smallest and the largest graph vertex drawn (marker area, pt²): 2 pt² is a dot of 1.6 pt (3 pixels at
#: 150 dpi), still a colour; 300 pt² a disc of 20 pt (a zoomed window of few vertices)
MARKER_RANGE = (2.0, 300.0)


def _marker_sizes(xy: NDArray[np.float64], bounds: Box, panel: float,
                  top: float = MARKER_RANGE[1]) -> NDArray[np.float64]:
    """Scatter marker areas (pt²), one per vertex: the square of its spacing to its neighbours
    (:func:`hermes.viz.zoom.point_spacing`) on the panel's scale, so a cloud is nearly filled where it is
    dense and where it is sparse alike, and the vertices of a rank that lives in a dense corner stay dots of
    their own instead of disappearing under the markers of its neighbours."""
    from hermes.viz.zoom import point_spacing

    bw, bh = bounds[1] - bounds[0], bounds[3] - bounds[2]
    pt_per_unit = np.sqrt(panel / max(bw * bh, 1e-300))
    return np.clip((0.85 * point_spacing(xy) * pt_per_unit) ** 2, MARKER_RANGE[0], max(top, MARKER_RANGE[0]))


def _lw(n: int) -> float:
    return float(np.clip(40.0 / np.sqrt(max(n, 1)), 0.1, 0.8))


def _draw_graph(ax: Axes, xy, xadj, adjncy, facecolors, msize) -> None:
    """Light-grey edges (up to EDGE_LIMIT vertices: above, they only paint the picture grey), coloured vertices."""
    from matplotlib.collections import LineCollection

    n = xy.shape[0]
    if xadj is not None and adjncy is not None and n <= EDGE_LIMIT:
        xadj = np.asarray(xadj, dtype=np.int64)
        if xadj.shape != (n + 1,):
            raise HermesError(f"xadj must have shape ({n + 1},), got {xadj.shape}")
        ax.add_collection(LineCollection(graph_segments(xy, xadj, adjncy), colors="0.75", linewidths=_lw(n), zorder=1))
    ax.scatter(xy[:, 0], xy[:, 1], c=facecolors, s=msize, linewidths=0, zorder=2)


def _rank_key(fig: Figure, kax: Axes, colors: NDArray[np.float64], nparts: int) -> None:
    """The ranks' colours in the key panel ``kax`` (its own, :func:`_layout` sizes it): a legend of up to
    LEGEND_LIMIT ranks (16 a column), else a discrete colour bar."""
    kax.set_axis_off()
    if nparts <= LEGEND_LIMIT:
        from matplotlib.patches import Patch

        handles = [Patch(facecolor=colors[r], edgecolor="0.3", label=str(r)) for r in range(nparts)]
        kax.legend(
            handles=handles,
            title="rank",
            loc="upper left",
            bbox_to_anchor=(0.0, 1.0),
            borderaxespad=0.0,
            ncols=_key_size(nparts)[0],
            fontsize="small",
            frameon=False,
            handlelength=1.2,
            columnspacing=0.8,
        )
        return
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap, Normalize

    # rank r fills [r - 0.5, r + 0.5): a linear norm over nparts colours (a BoundaryNorm would give every
    # rank a minor tick, minutes of layout for 10⁴ ranks, and its int16 colour index overflows above 32 767)
    cmap = ListedColormap(colors[:, :3])
    cax = kax.inset_axes([0.0, 0.02, 0.15, 0.96])
    cb = fig.colorbar(ScalarMappable(norm=Normalize(-0.5, nparts - 0.5), cmap=cmap), cax=cax, label="rank")
    cb.minorticks_off()
    step = max(1, int(np.ceil(nparts / 16)))
    cb.set_ticks(np.arange(0, nparts, step))


def _log_range(w: NDArray[np.float64]) -> tuple[float, float]:
    """(vmin, vmax) for a log colour scale: positive, and not equal."""
    pos = w[np.isfinite(w) & (w > 0)]
    if pos.size == 0:
        return 0.1, 10.0
    lo, hi = float(pos.min()), float(pos.max())
    if hi <= lo * (1 + 1e-9):
        lo, hi = lo / 1.5, hi * 1.5
    return lo, hi
