"""The panels of a partition picture (:mod:`hermes.viz.partition_picture`): their layout, the cells painted as pixels
(:mod:`hermes.viz.raster`) once the layout has placed them, the rank key, the overview of the whole domain, the
weights or levels, the load bars, and graphs drawn as vertices and edges. matplotlib is imported inside the
functions.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.errors import HermesError
from hermes.viz.rundir import COORD_MAX
from hermes.viz.zoom import Box

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

#: Above this many units, cell outlines and graph edges are dropped (they would paint the picture grey).
EDGE_LIMIT = 20_000
#: Up to this many parts the figure carries a legend with one entry per rank (16 per column, beside the
#: partition); above, a discrete colour bar.
LEGEND_LIMIT = 64
#: Legend entries per column.
LEGEND_ROWS = 16
#: Up to this many ranks the load panel draws one outlined bar per rank; above, the loads sorted (a profile).
BAR_LIMIT = 64


#: The largest canvas rendered: Agg's limit of 65 536 pixels a side, and 4·10⁸ pixels (1.6 GB of RGBA); a
#: larger figure (a table of many rows, a huge dpi) is drawn at the resolution that fits, with a warning.
MAX_SIDE, MAX_PIXELS = 65_000, 400_000_000


def graph_segments(
    coords: NDArray[np.float64], xadj: NDArray[np.int64], adjncy: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Segments ``(m, 2, 2)`` of the undirected edges ``i < j`` of a CSR graph, in the plane."""
    xy = plane_coords(coords)
    xadj = np.asarray(xadj, dtype=np.int64)
    cols = np.asarray(adjncy, dtype=np.int64)
    rows = np.repeat(np.arange(xadj.size - 1), np.diff(xadj))
    keep = rows < cols
    return np.stack([xy[rows[keep]], xy[cols[keep]]], axis=1)


def fit_canvas(fig: Figure, name: str) -> None:
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


@dataclass(frozen=True)
class Raster:
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
def pixel_image() -> type:
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


def paint_panels(fig: Figure, panels: list[Raster], pts, ptr, nodes) -> None:
    """Paint the cells of every panel as an image of the panel's own pixel size (:mod:`hermes.viz.raster`).

    The constrained layout runs once here to place the panels, then is switched off: the images lie within
    their axes and change nothing, and the picture is drawn once. Panels of the same window and size share
    their map of cells.
    """
    from hermes.viz.raster import cell_index_map, paint

    fit_canvas(fig, "the picture")
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
            im = pixel_image()(fig, offsetx=x0, offsety=y0, origin="upper", zorder=-1)
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


def visible_units(xy: NDArray[np.float64], box: Box) -> int:
    x0, x1, y0, y1 = box
    return int(np.count_nonzero((xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)))


def draw_overview(ins: Axes, raster: list[Raster] | None, xy, facecolors, full: Box, box: Box, area: float) -> None:
    """The whole domain, small, in its own panel under the rank key, with the zoom window outlined; its cells
    go to ``raster`` (a mesh) or are drawn as markers (a graph)."""
    from matplotlib.patches import Rectangle

    if raster is not None:
        raster.append(Raster(ins, facecolors))
    else:
        ins.scatter(xy[:, 0], xy[:, 1], c=facecolors, s=marker_sizes(xy, full, area, top=8.0), linewidths=0)
    ins.add_patch(Rectangle((box[0], box[2]), box[1] - box[0], box[3] - box[2], fill=False, edgecolor="k",
                            linewidth=1.2))
    frame_axes(ins, full)
    ins.set_title("whole domain", fontsize="x-small")


def weight_colors(w: NDArray[np.float64] | None, lev: NDArray[np.int64] | None):
    """The colours of the weights panel: ``(norm, cmap, values, name)`` — the refinement levels when recorded
    (one colour per level), else the unit weights (a log scale over a decade or more)."""
    from matplotlib import colormaps
    from matplotlib.colors import BoundaryNorm, LogNorm, Normalize

    cmap = colormaps["viridis"]
    if lev is not None:
        top = int(lev.max(initial=0))
        return BoundaryNorm(np.arange(top + 2) - 0.5, 256), cmap, lev, "refinement level"
    lo, hi = log_range(w)
    norm = LogNorm(lo, hi) if hi > 10 * lo else Normalize(lo, hi)  # a log scale only over a decade or more
    return norm, cmap, np.clip(w, norm.vmin, None), "unit weight"


def draw_side_panel(fig: Figure, wax: Axes, raster: list[Raster] | None, xy, xadj, adjncy, w, lev, msize,
                    bounds: Box) -> None:
    """The unit weights (log colours) or, when recorded, the refinement levels (one colour per level); a
    mesh's cells go to ``raster``, a graph's vertices are drawn as markers."""
    from matplotlib.collections import LineCollection

    norm, cmap, values, name = weight_colors(w, lev)
    n = xy.shape[0]
    if raster is not None:
        from matplotlib.cm import ScalarMappable

        coll = ScalarMappable(norm=norm, cmap=cmap)
        raster.append(Raster(wax, cmap(norm(values))))
    else:
        if xadj is not None and adjncy is not None and n <= EDGE_LIMIT:
            segs = graph_segments(xy, xadj, adjncy)
            wax.add_collection(LineCollection(segs, colors="0.8", linewidths=edge_width(n), zorder=1), autolim=False)
        coll = wax.scatter(xy[:, 0], xy[:, 1], c=values, s=msize, cmap=cmap, norm=norm, linewidths=0, zorder=2)
    frame_axes(wax, bounds)
    wax.set_title(name, fontsize="medium")
    cb = fig.colorbar(coll, ax=wax, shrink=0.8, label="weight" if lev is None else name)
    if lev is not None:
        cb.set_ticks(np.arange(int(lev.max(initial=0)) + 1))


def draw_loads(ax: Axes, colors: NDArray[np.float64], loads: NDArray[np.float64],
               fair: NDArray[np.float64] | None) -> None:
    """The load panel: one bar per rank up to :data:`BAR_LIMIT` ranks (:func:`draw_load_bars`), above it the
    sorted load profile (:func:`draw_load_profile`: hundreds of bars of one pixel each are a barcode)."""
    if loads.size <= BAR_LIMIT:
        draw_load_bars(ax, colors, loads, fair)
    else:
        draw_load_profile(ax, loads, fair)


def _load_axes(ax: Axes, title: str, xlabel: str, p: int, top: float) -> None:
    ax.set_title(title, fontsize="small")
    ax.set_xlim(-0.6, p - 0.4)
    ax.set_ylim(0.0, 1.05 * top if top > 0 else 1.0)
    ax.set_xlabel(xlabel, fontsize="small")
    ax.set_ylabel("load", fontsize="small")
    ax.tick_params(labelsize="x-small")
    ax.grid(True, axis="y", alpha=0.3)


def _worst(loads: NDArray[np.float64], fair: NDArray[np.float64]) -> float | None:
    """max l_i / fair_i over the ranks with a positive fair load (None: none has)."""
    ok = fair > 0
    return float(np.max(loads[ok] / fair[ok])) if ok.any() else None


def draw_load_bars(ax: Axes, colors: NDArray[np.float64], loads: NDArray[np.float64],
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
        worst = _worst(loads, fair)
        if worst is not None:
            title += f" (bars) against the fair load $c_i\\,\\Sigma l$ (black): max $l_i/\\bar l_i$ = {worst:.3f}"
    _load_axes(ax, title, "rank", p, top)
    if p <= 32:
        ax.set_xticks(r)


def draw_load_profile(ax: Axes, loads: NDArray[np.float64], fair: NDArray[np.float64] | None) -> None:
    """The loads of many ranks as a profile: each rank's load over its fair load ``c_i Σ l`` (over the mean
    load without ``fair``), sorted, heaviest first; the fair share 1 as a black line, the ranks above it red,
    those below blue, and in the title max ``l_i / c_i Σ l`` and max/mean.

    Read like a Lorenz curve: a flat profile on the line is a balanced run; the ranks that set the pace are
    its head, how many they are its width — which one bar per rank no longer shows at hundreds of ranks. The
    axis spans the ratios (not from 0), so a few per cent of imbalance are seen.
    """
    p = loads.size
    h = np.where(np.isfinite(loads), loads, 0.0)
    mean = float(h.mean()) if p else 0.0
    if fair is not None:
        ref = np.where(np.isfinite(fair) & (fair > 0), fair, np.nan)
        what = "their fair load $c_i\\,\\Sigma l$"
    else:
        ref = np.full(p, mean if mean > 0 else np.nan)
        what = "the mean load"
    ratio = h / ref
    known = np.isfinite(ratio)
    r = np.sort(ratio[known])[::-1]
    x = np.arange(r.size)
    ax.fill_between(x, 1.0, r, where=r >= 1.0, step="mid", color=(0.85, 0.35, 0.3), alpha=0.85, linewidth=0,
                    label="above fair")
    ax.fill_between(x, 1.0, r, where=r < 1.0, step="mid", color=(0.35, 0.55, 0.8), alpha=0.85, linewidth=0,
                    label="below fair")
    ax.step(x, r, where="mid", color="0.2", linewidth=0.6)
    ax.axhline(1.0, color="k", linewidth=1.2)
    top = float(r.max(initial=1.0))
    low = float(r.min(initial=1.0))
    title = f"load of the {p} ranks against {what}, sorted (heaviest first): max {top:.3f}"
    if fair is not None and mean > 0:
        title += f", max/mean load {float(h.max()) / mean:.3f}"
    if r.size < p:
        title += f" ({p - r.size} ranks without a fair load)"
    ax.set_title(title, fontsize="small")
    pad = 0.1 * max(max(top, 1.0) - min(low, 1.0), 0.02)
    ax.set_xlim(-0.6, max(r.size, 1) - 0.4)
    ax.set_ylim(max(min(low, 1.0) - pad, 0.0), max(top, 1.0) + pad)
    ax.set_xlabel("ranks, by load over " + ("fair load" if fair is not None else "mean load"), fontsize="small")
    ax.set_ylabel("load / " + ("fair" if fair is not None else "mean"), fontsize="small")
    ax.tick_params(labelsize="x-small")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="lower left", fontsize="x-small", frameon=True, framealpha=0.8, ncols=2)


def finite_coords(values: ArrayLike, what: str) -> NDArray[np.float64]:
    """``values`` as floats, if they are finite and at most ``COORD_MAX`` in magnitude (the extent stays finite)."""
    try:
        c = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise HermesError(f"{what} must be numbers") from None
    if c.size and not (np.isfinite(c).all() and np.abs(c).max() <= COORD_MAX):
        raise HermesError(f"{what} must be finite and at most {COORD_MAX:g} in magnitude")
    return c


def plane_coords(coords: ArrayLike) -> NDArray[np.float64]:
    """Coordinates as ``(n, 2)``: 3-D projected on (x, y), 1-D padded with y = 0."""
    c = finite_coords(coords, "coords")
    if c.ndim == 1:
        c = c[:, None]
    if c.ndim != 2 or c.shape[1] < 1:
        raise HermesError(f"coords must have shape (n, d), got {c.shape}")
    if c.shape[1] == 1:
        return np.column_stack([c[:, 0], np.zeros(c.shape[0])])
    return c[:, :2]


def domain_box(xy: NDArray[np.float64], pad: float = 0.02) -> tuple[float, float, float, float]:
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


def drawable_box(box: Box) -> Box:
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
class Layout:
    """Where the panels go: ``mosaic`` rows of panel keys (P partition, K rank key, O overview of the whole
    domain, W weights, L load bars, . empty), their heights and widths (inches, used as ratios)."""

    mosaic: list[list[str]]
    heights: list[float]
    widths: list[float]
    size: tuple[float, float]
    panel: float  # area of the partition panel, pt²
    overview: float = 0.0  # area of the overview panel, pt²


def key_size(nparts: int) -> tuple[int, float, float]:
    """Columns, width and height (inches) of the rank key: a legend of ≤ LEGEND_LIMIT ranks (at font size
    "small", 8.3 pt: a row is 1.5 lines, a column a 1.2-em patch, the label and the spacing), else the short
    key of :func:`draw_rank_key` (a few ranks and a note, in one column)."""
    em = 8.33 / 72.0
    if nparts > LEGEND_LIMIT:
        return 1, 1.6, (len(SHORT_KEY_RANKS) + 2) * 1.5 * em + 0.45 + 4 * 1.3 * em
    ncols = 1 if nparts <= 8 else int(np.ceil(nparts / (8 if nparts <= 16 else LEGEND_ROWS)))
    rows = int(np.ceil(nparts / ncols))
    col = (1.2 + 0.8 + 0.6 * len(str(max(nparts - 1, 0))) + 0.8) * em
    return ncols, max(1.0, ncols * col + 0.2), rows * 1.5 * em + 0.45


def panel_layout(bounds: Box, two: bool, bars: bool = False, full: Box | None = None, nparts: int = 1) -> Layout:
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
    _, key_w, key_h = key_size(nparts)
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
    return Layout(rows, heights, widths, (fig_w, fig_h), panel, overview)


def frame_axes(ax: Axes, bounds: tuple[float, float, float, float]) -> None:
    ax.set_xlim(bounds[0], bounds[1])
    ax.set_ylim(bounds[2], bounds[3])
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


#: the smallest and the largest graph vertex drawn (marker area, pt²): 2 pt² is a dot of 1.6 pt (3 pixels at
#: 150 dpi), still a colour; 300 pt² a disc of 20 pt (a zoomed window of few vertices)
MARKER_RANGE = (2.0, 300.0)


def marker_sizes(xy: NDArray[np.float64], bounds: Box, panel: float,
                  top: float = MARKER_RANGE[1]) -> NDArray[np.float64]:
    """Scatter marker areas (pt²), one per vertex: the square of its spacing to its neighbours
    (:func:`hermes.viz.zoom.point_spacing`) on the panel's scale, so a cloud is nearly filled where it is
    dense and where it is sparse alike, and the vertices of a rank that lives in a dense corner stay dots of
    their own instead of disappearing under the markers of its neighbours."""
    from hermes.viz.zoom import point_spacing

    bw, bh = bounds[1] - bounds[0], bounds[3] - bounds[2]
    pt_per_unit = np.sqrt(panel / max(bw * bh, 1e-300))
    return np.clip((0.85 * point_spacing(xy) * pt_per_unit) ** 2, MARKER_RANGE[0], max(top, MARKER_RANGE[0]))


def edge_width(n: int) -> float:
    return float(np.clip(40.0 / np.sqrt(max(n, 1)), 0.1, 0.8))


def draw_graph(ax: Axes, xy, xadj, adjncy, facecolors, msize) -> None:
    """Light-grey edges (up to EDGE_LIMIT vertices: above, they only paint the picture grey), coloured vertices."""
    from matplotlib.collections import LineCollection

    n = xy.shape[0]
    if xadj is not None and adjncy is not None and n <= EDGE_LIMIT:
        xadj = np.asarray(xadj, dtype=np.int64)
        if xadj.shape != (n + 1,):
            raise HermesError(f"xadj must have shape ({n + 1},), got {xadj.shape}")
        ax.add_collection(LineCollection(graph_segments(xy, xadj, adjncy), colors="0.75", linewidths=edge_width(n), zorder=1))
    ax.scatter(xy[:, 0], xy[:, 1], c=facecolors, s=msize, linewidths=0, zorder=2)


#: the ranks named in the short key of more than LEGEND_LIMIT ranks (then "⋮" and the last rank)
SHORT_KEY_RANKS = range(6)


def draw_rank_key(fig: Figure, kax: Axes, colors: NDArray[np.float64], nparts: int) -> None:
    """The ranks' colours in the key panel ``kax`` (its own, :func:`panel_layout` sizes it): a legend of up to
    LEGEND_LIMIT ranks (16 a column); above, a short key — the first ranks, "⋮", the last one, titled with the
    number of ranks, and a note that the colours are not told apart one by one (a colour bar of hundreds of
    golden-ratio hues is noise; the load panel then shows the loads sorted, not per colour)."""
    from matplotlib.patches import Patch

    kax.set_axis_off()
    style = dict(loc="upper left", bbox_to_anchor=(0.0, 1.0), borderaxespad=0.0, fontsize="small", frameon=False,
                 handlelength=1.2, columnspacing=0.8)
    if nparts <= LEGEND_LIMIT:
        handles = [Patch(facecolor=colors[r], edgecolor="0.3", label=str(r)) for r in range(nparts)]
        kax.legend(handles=handles, title="rank", ncols=key_size(nparts)[0], **style)
        return
    shown = [r for r in SHORT_KEY_RANKS if r < nparts - 1]
    handles = [Patch(facecolor=colors[r], edgecolor="0.3", label=str(r)) for r in shown]
    handles.append(Patch(facecolor="none", edgecolor="none", label="⋮"))
    handles.append(Patch(facecolor=colors[nparts - 1], edgecolor="0.3", label=str(nparts - 1)))
    legend = kax.legend(handles=handles, title=f"{nparts} ranks", **style)
    kax.annotate("one colour a rank,\ntoo many to tell\napart: the load panel\nsorts the ranks",
                 xy=(0.0, 0.0), xycoords=legend, xytext=(0, -4), textcoords="offset points", va="top",
                 fontsize="x-small", color="0.3")


def log_range(w: NDArray[np.float64]) -> tuple[float, float]:
    """(vmin, vmax) for a log colour scale: positive, and not equal."""
    pos = w[np.isfinite(w) & (w > 0)]
    if pos.size == 0:
        return 0.1, 10.0
    lo, hi = float(pos.min()), float(pos.max())
    if hi <= lo * (1 + 1e-9):
        lo, hi = lo / 1.5, hi * 1.5
    return lo, hi
