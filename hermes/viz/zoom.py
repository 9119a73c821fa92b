"""Where to look in a partition picture: the automatic zoom onto the cells that matter.

CFD meshes are graded: on the airfoil a far-field box a dozen chords wide holds a few large cells and the
profile holds most of them, so a picture of the whole domain shows the two or three ranks that own the far
field and leaves the others a few pixels around the profile. :func:`auto_zoom` picks the largest window in
which every rank covers a legible share of the picture; on a uniform mesh that window is the whole domain
and nothing is zoomed.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Real

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.errors import HermesError

__all__ = ["Box", "auto_zoom", "parse_zoom", "check_zoom", "domain_box", "cell_areas", "point_spacing",
           "point_areas", "coverage", "MIN_SHARE", "BOX_MAX"]

#: (x0, x1, y0, y1), the order of :meth:`matplotlib.axes.Axes.axis`
Box = tuple[float, float, float, float]

#: a rank is legible when it covers at least this share of the picture (2 % of a 6.5-inch panel ≈ 0.9 inch²)
MIN_SHARE = 0.02
#: the corners of a zoom box (hermes.data.mesh.COORD_MAX, the largest coordinate of a mesh)
BOX_MAX = 1e100


def cell_areas(points: ArrayLike, cell_ptr: ArrayLike, cell_nodes: ArrayLike) -> NDArray[np.float64]:
    """The (unsigned) area of every CSR polygon (shoelace formula)."""
    from hermes.data.polygons import polygon_areas

    return np.abs(polygon_areas(np.asarray(points, dtype=np.float64)[:, :2], np.asarray(cell_ptr, dtype=np.int64),
                                np.asarray(cell_nodes, dtype=np.int64)))


def point_spacing(coords: ArrayLike, k: int = 4) -> NDArray[np.float64]:
    """The spacing of every point of a cloud: the geometric mean of its distances to its ``k`` nearest
    neighbours (in the plane of the first two coordinates; a k-d tree, :class:`scipy.spatial.cKDTree`).

    A graph without polygons (a Chaco ``.graph`` with its ``.xyz`` file, a Matrix Market mesh) has no cell
    areas; the spacing stands for a cell's side: ``h`` on a uniform grid of step ``h``, ``√(hx·hy)`` on a
    stretched one (its square is the cell's area, where an arithmetic mean would take a thin cell for a
    square of its long side). Coincident points
    get the smallest positive spacing of the cloud (or 10⁻⁶ of its extent), a lone point the extent.
    """
    from scipy.spatial import cKDTree

    xy = np.asarray(coords, dtype=np.float64)
    xy = xy[:, :2] if xy.ndim == 2 and xy.shape[1] >= 2 else np.column_stack([xy.reshape(-1), np.zeros(xy.size)])
    n = xy.shape[0]
    if n == 0:
        return np.zeros(0)
    extent = float(max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1]))) or 1.0
    if n == 1:
        return np.full(1, extent)
    kk = min(k, n - 1)
    dist, _ = cKDTree(xy).query(xy, k=kk + 1)  # the first neighbour is the point itself
    d = np.asarray(dist, dtype=np.float64).reshape(n, kk + 1)[:, 1:]
    pos = d[d > 0]
    d = np.maximum(d, float(pos.min()) if pos.size else 1e-6 * extent)  # coincident points
    return np.exp(np.log(d).mean(axis=1))


def point_areas(coords: ArrayLike, k: int = 4) -> NDArray[np.float64]:
    """The area a point of a cloud stands for: its spacing squared (:func:`point_spacing`); the cell areas of
    :func:`auto_zoom` for a graph drawn as points."""
    return point_spacing(coords, k) ** 2


def domain_box(xy: NDArray[np.float64], areas: NDArray[np.float64] | None = None) -> Box:
    """The bounding box of the units, widened by half a cell (``√area / 2``) so border cells are inside."""
    if xy.shape[0] == 0:
        return 0.0, 1.0, 0.0, 1.0
    half = 0.5 * np.sqrt(areas) if areas is not None else np.zeros(xy.shape[0])
    return (float((xy[:, 0] - half).min()), float((xy[:, 0] + half).max()),
            float((xy[:, 1] - half).min()), float((xy[:, 1] + half).max()))


def coverage(xy: NDArray[np.float64], areas: NDArray[np.float64], owner: NDArray[np.int64], nparts: int,
             box: Box) -> NDArray[np.float64]:
    """The share of ``box`` each rank covers, shape ``(nparts,)``.

    A cell is taken as the square of its area centred on its centroid, clipped to the box: exact for the
    cells inside, an estimate for the few that straddle the border.
    """
    x0, x1, y0, y1 = box
    s = 0.5 * np.sqrt(areas)
    ox = np.clip(np.minimum(xy[:, 0] + s, x1) - np.maximum(xy[:, 0] - s, x0), 0.0, None)
    oy = np.clip(np.minimum(xy[:, 1] + s, y1) - np.maximum(xy[:, 1] - s, y0), 0.0, None)
    return np.bincount(owner, weights=ox * oy, minlength=nparts)[:nparts] / max((x1 - x0) * (y1 - y0), 1e-300)


def _weighted_median(v: NDArray[np.float64], w: NDArray[np.float64]) -> float:
    order = np.argsort(v, kind="stable")
    c = np.cumsum(w[order])
    return float(v[order][np.searchsorted(c, 0.5 * c[-1])])


def auto_zoom(coords: ArrayLike, owners: Sequence[ArrayLike], *, areas: ArrayLike | None = None,
              nparts: int | None = None, min_share: float = MIN_SHARE, steps: int = 48) -> Box | None:
    """The window of a partition picture in which every rank is legible, or None for the whole domain.

    Parameters
    ----------
    coords : array_like, shape (n, d)
        Unit centroids (the first two columns are used).
    owners : sequence of array_like of int, shape (n,)
        The partitions the window must serve (e.g. every phase of a run, so all its pictures share one window).
    areas : array_like, shape (n,), optional
        Cell areas (:func:`cell_areas`; for a graph drawn as points, :func:`point_areas`); default: the
        domain's area shared equally.
    nparts : int, optional
        Number of ranks (default: the largest owner + 1). Ranks owning nothing are not asked to be visible.
    min_share : float
        The share of the window a rank must cover to count as legible.
    steps : int
        Number of window sizes tried, from the whole domain down to 1/1000 of it (geometrically).

    Returns
    -------
    (x0, x1, y0, y1) or None
        None when the whole domain already shows every rank (a uniform mesh), or the zoom would cut less than
        a fifth of either side.

    Notes
    -----
    Windows keep the domain's aspect ratio and are centred on the density-weighted median of the centroids
    (weights 1/area: where the cells are small, the mesh was graded for a reason), shifted to stay inside the
    domain. The largest window in which every rank covers at least ``min_share`` (:func:`coverage`) wins; if
    none does, the one whose least visible rank covers the most.
    """
    xy = np.asarray(coords, dtype=np.float64)
    xy = xy[:, :2] if xy.ndim == 2 and xy.shape[1] >= 2 else np.column_stack([xy.reshape(-1), np.zeros(xy.size)])
    n = xy.shape[0]
    owns = [np.asarray(o, dtype=np.int64) for o in owners]
    if n == 0 or not owns:
        return None
    if any(o.shape != (n,) for o in owns):
        raise HermesError(f"auto_zoom: every owner array must have {n} entries")
    p = int(nparts) if nparts is not None else max(int(o.max()) for o in owns) + 1
    if areas is None:
        x0, x1, y0, y1 = domain_box(xy)
        a = np.full(n, max((x1 - x0) * (y1 - y0), 1e-300) / n)
    else:
        a = np.clip(np.asarray(areas, dtype=np.float64), 1e-300, None)
    full = domain_box(xy, a)
    fw, fh = full[1] - full[0], full[3] - full[2]
    if fw <= 0 or fh <= 0:
        return None
    cx, cy = _weighted_median(xy[:, 0], 1.0 / a), _weighted_median(xy[:, 1], 1.0 / a)
    present = [np.bincount(o, minlength=p)[:p] > 0 for o in owns]

    best, best_share = None, -1.0
    for t in np.geomspace(1.0, 1e-3, steps):
        w, h = t * fw, t * fh
        x0 = float(np.clip(cx - w / 2, full[0], full[1] - w))
        y0 = float(np.clip(cy - h / 2, full[2], full[3] - h))
        box = (x0, float(x0 + w), y0, float(y0 + h))
        least = min(float(coverage(xy, a, o, p, box)[m].min()) for o, m in zip(owns, present))
        if least >= min_share:
            best = box
            break
        if least > best_share:
            best, best_share = box, least
    if best is None or (best[1] - best[0]) > 0.8 * fw:
        return None
    return best


def parse_zoom(text: str | None) -> Box | str | None:
    """``--zoom``: ``auto``, ``none`` (or None) or ``x0,y0,x1,y1`` → ``"auto"``, None or a :data:`Box`.

    Raises
    ------
    HermesError
        A malformed, non-finite or empty box (one line).
    """
    if text is None or text.strip().lower() in ("none", "off", "full", ""):
        return None
    if text.strip().lower() == "auto":
        return "auto"
    shown = text if len(text) <= 60 else text[:57] + "..."
    try:
        x0, y0, x1, y1 = (float(v) for v in text.split(","))
    except ValueError:
        raise HermesError(f"--zoom {shown!r}: expected auto, none or x0,y0,x1,y1") from None
    return check_zoom((x0, x1, y0, y1))


def check_zoom(zoom: object) -> Box | str | None:
    """A zoom argument of the Python API checked: ``"auto"``, None, a ``--zoom`` text (:func:`parse_zoom`) or
    a box ``(x0, x1, y0, y1)`` of four finite numbers (not booleans) at most :data:`BOX_MAX` in magnitude with
    ``x0 < x1`` and ``y0 < y1``.

    Raises
    ------
    HermesError
        ``--zoom: ...`` (one line).
    """
    if zoom is None:
        return None
    if isinstance(zoom, str):
        return parse_zoom(zoom)
    try:
        values = list(zoom)  # type: ignore[call-overload]
    except TypeError:
        raise HermesError(f"--zoom: expected auto, none or a box (x0, x1, y0, y1), got {type(zoom).__name__}") \
            from None
    if len(values) != 4 or not all(isinstance(v, Real) and not isinstance(v, (bool, np.bool_)) for v in values):
        raise HermesError("--zoom: a box is 4 numbers (x0, x1, y0, y1)")
    x0, x1, y0, y1 = (float(v) for v in values)
    if not all(np.isfinite(v) and abs(v) <= BOX_MAX for v in (x0, x1, y0, y1)):
        raise HermesError(f"--zoom: the box's corners must be finite numbers of magnitude at most {BOX_MAX:g}, "
                          f"got {x0:g}, {y0:g}, {x1:g}, {y1:g}")
    if not (x1 - x0 > 0 and y1 - y0 > 0):
        raise HermesError(f"--zoom: the box is empty (need x0 < x1 and y0 < y1), got x {x0:g}..{x1:g}, "
                          f"y {y0:g}..{y1:g}")
    return x0, x1, y0, y1
