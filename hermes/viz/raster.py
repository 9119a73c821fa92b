"""The cells of a planar mesh as a picture of pixels: which cell covers each pixel, computed with numpy.

A partition picture recolours the same cells three ways (owner, weight or level, overview): drawing them as
matplotlib polygons costs ~0.5 s of CPU a picture for 17 000 cells (a path per cell, every panel), most of a
picture's price. Here every cell is cut into triangles (a fan from its first corner), every triangle marks the
pixel centres it covers, and a panel is the cells' colours looked up through that map: ~0.05 s for the same
mesh, and the outlines and partition boundaries are where neighbouring pixels belong to different cells or
owners. The image goes into its panel with ``imshow`` at the panel's own pixel size, one pixel per pixel.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["cell_index_map", "paint", "CHUNK"]

#: rows of triangles spanned at once (bounded memory: ~100 bytes each, and the pixels they fill)
CHUNK = 1 << 18


def cell_index_map(points: NDArray[np.float64], cell_ptr: NDArray[np.int64], cell_nodes: NDArray[np.int64],
                   box: tuple[float, float, float, float], width: int, height: int) -> NDArray[np.int32]:
    """The cell covering the centre of every pixel of a ``height × width`` picture of ``box`` = (x0, x1, y0, y1),
    row 0 at the top; -1 where no cell does (outside the mesh, a hole).

    A pixel centre on a side shared by two cells goes to the one of higher index (later triangles overwrite),
    so a covered region has no gaps. Cells are drawn as the fan of triangles from their first corner: exact
    for convex cells and for those star-shaped from that corner (every cell hermes reads or refines).
    """
    width, height = int(width), int(height)
    index = np.full((height, width), -1, dtype=np.int32)
    ptr = np.asarray(cell_ptr, dtype=np.int64)
    nodes = np.asarray(cell_nodes, dtype=np.int64)
    sizes = np.diff(ptr)
    n = sizes.size
    if n == 0 or width <= 0 or height <= 0:
        return index
    x0, x1, y0, y1 = (float(v) for v in box)
    xy = np.asarray(points, dtype=np.float64)[:, :2]
    # pixel coordinates: pixel centres at integers, rows downwards
    px = (xy[:, 0] - x0) * (width / (x1 - x0)) - 0.5
    py = (y1 - xy[:, 1]) * (height / (y1 - y0)) - 0.5
    ntri = np.maximum(sizes - 2, 0)
    cell = np.repeat(np.arange(n, dtype=np.int64), ntri)
    if cell.size == 0:
        return index
    first = np.repeat(ptr[:-1], ntri)
    step = np.arange(cell.size) - np.repeat(np.cumsum(ntri) - ntri, ntri)  # 0 .. k-3 within each cell
    corners = [nodes[first], nodes[first + step + 1], nodes[first + step + 2]]
    tx = np.stack([px[v] for v in corners], axis=1)  # (triangles, 3)
    ty = np.stack([py[v] for v in corners], axis=1)
    ilo = np.maximum(np.ceil(ty.min(axis=1)), 0).astype(np.int64)
    ihi = np.minimum(np.floor(ty.max(axis=1)), height - 1).astype(np.int64)
    rows = np.maximum(ihi - ilo + 1, 0)
    keep = np.flatnonzero((rows > 0) & (tx.max(axis=1) >= -0.5) & (tx.min(axis=1) <= width - 0.5))
    if keep.size == 0:
        return index
    ends = np.cumsum(rows[keep])
    start = 0
    while start < keep.size:  # chunks of about CHUNK rows of triangles (their spans are filled after)
        base = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, base + CHUNK, side="right")), start + 1)
        t = keep[start:stop]
        m = rows[t]
        tri = np.repeat(t, m)
        y = (np.repeat(ilo[t], m) + np.arange(int(m.sum())) - np.repeat(np.cumsum(m) - m, m)).astype(np.float64)
        # the row's span: where it crosses the triangle's sides (a side lying on the row adds nothing: its ends
        # are the other sides' ends)
        lo = np.full(y.size, np.inf)
        hi = np.full(y.size, -np.inf)
        for e in range(3):
            xa, ya = tx[tri, e], ty[tri, e]
            xb, yb = tx[tri, (e + 1) % 3], ty[tri, (e + 1) % 3]
            dy = yb - ya
            on = (np.minimum(ya, yb) <= y) & (y <= np.maximum(ya, yb)) & (dy != 0)
            x = xa + (y - ya) * (xb - xa) / np.where(dy != 0, dy, 1.0)
            lo = np.where(on, np.minimum(lo, x), lo)
            hi = np.where(on, np.maximum(hi, x), hi)
        ok = np.isfinite(lo)
        jl = np.maximum(np.ceil(np.where(ok, lo, 0.0) - 1e-9), 0).astype(np.int64)
        jr = np.minimum(np.floor(np.where(ok, hi, -1.0) + 1e-9), width - 1).astype(np.int64)
        span = np.where(ok, np.maximum(jr - jl + 1, 0), 0)
        flat = np.repeat(y.astype(np.int64) * width + jl, span)
        flat += np.arange(flat.size) - np.repeat(np.cumsum(span) - span, span)
        index.flat[flat] = np.repeat(cell[tri], span)  # later triangles overwrite: a shared side goes to one
        start = stop
    return index


def paint(index: NDArray[np.int32], colors: NDArray[np.float64], *, owner: NDArray[np.int64] | None = None,
          outline: float = 0.0, boundary: int = 0) -> NDArray[np.uint8]:
    """An RGBA image (uint8) of ``index`` (from :func:`cell_index_map`) with every cell in its colour (``colors``:
    RGB or RGBA in [0, 1], one row per cell); transparent where no cell is.

    ``outline`` darkens by that fraction the pixels where a cell meets another or the outside (the cells'
    sides);
    ``boundary`` pixels wide, in black, where cells of different ``owner`` meet (the partition boundaries).
    """
    inside = index >= 0
    col = np.clip(np.asarray(colors, dtype=np.float64), 0.0, 1.0)
    palette = np.zeros((col.shape[0] + 1, 4), dtype=np.uint8)  # row 0: no cell, transparent
    palette[1:, :3] = np.round(col[:, :3] * 255.0)
    palette[1:, 3] = np.round(col[:, 3] * 255.0) if col.shape[1] > 3 else 255
    img = palette[index + 1]
    if outline > 0:  # the sides between cells, and those on the mesh's border (outside, a hole)
        edge = _meets(index, index, inside) | (inside & _grown(~inside))
        img[edge, :3] = np.round(img[edge, :3] * (1.0 - outline)).astype(np.uint8)
    if boundary > 0 and owner is not None:
        own = np.where(inside, np.asarray(owner, dtype=np.int64)[np.maximum(index, 0)], -1)
        edge = _meets(own, index, inside, both=boundary > 1)
        for _ in range((int(boundary) - 2) // 2):  # wider: grown by a pixel each side, within the cells
            edge = _grown(edge) & inside
        img[edge, :3] = 0
    return img


def _meets(label: NDArray, index: NDArray, inside: NDArray[np.bool_], both: bool = False) -> NDArray[np.bool_]:
    """Pixels whose right or lower neighbour (and, ``both``, left or upper one too) is inside with another
    ``label``."""
    mark = np.zeros(label.shape, dtype=bool)
    for axis in (0, 1):
        lo = [slice(None), slice(None)]
        hi = [slice(None), slice(None)]
        lo[axis], hi[axis] = slice(None, -1), slice(1, None)
        lo, hi = tuple(lo), tuple(hi)
        diff = (label[lo] != label[hi]) & inside[lo] & inside[hi]
        mark[lo] |= diff
        if both:
            mark[hi] |= diff
    return mark


def _grown(mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``mask`` and the pixels beside it (left, right, above, below)."""
    out = mask.copy()
    out[1:] |= mask[:-1]
    out[:-1] |= mask[1:]
    out[:, 1:] |= mask[:, :-1]
    out[:, :-1] |= mask[:, 1:]
    return out
