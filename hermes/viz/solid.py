"""Pictures of the partition of a 3-D (volume) mesh: the cells' faces in 3-D, coloured by owner rank.

A projection on (x, y) of a volume mesh puts a column of cells on one dot and hides the ranks inside. Here two
3-D panels (:mod:`mpl_toolkits.mplot3d`) are drawn instead:

* **outer surface** — the faces on the domain's boundary, coloured by the rank owning their cell and shaded
  by a light source (the shade is the depth cue: faces turned away are darker), the mesh as a researcher
  knows it;
* **ranks pulled apart** — the surface of every rank's part (its faces on the boundary or against another
  rank), each part moved away from the mesh centre along the line through its own centre and shrunk
  about it (:data:`SHRINK`: gaps open, so a part near the centre is seen between the others). Every rank is
  seen whole, the inner ones too, and the size and shape of each part (and how the parts fit together) are
  read at a glance, which no single slice shows.

Faces come from the cells' facets in VTK order (tetra, hexahedron, wedge, pyramid); a facet is identified by
its sorted corner ids (``np.unique`` over rows), so no per-cell Python loop is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["solid_faces", "draw_solid", "draw_surface", "SOLID_FACETS", "EXPLODE"]

#: facets of the 3-D cells by VTK type id (10 tetra, 12 hexahedron, 13 wedge, 14 pyramid), local corners in
#: VTK order, each listed counter-clockwise seen from outside or its reverse (only the polygon matters here)
SOLID_FACETS = {
    10: [(0, 1, 2), (0, 1, 3), (1, 2, 3), (0, 2, 3)],
    12: [(0, 1, 2, 3), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)],
    13: [(0, 1, 2), (3, 4, 5), (0, 1, 4, 3), (1, 2, 5, 4), (2, 0, 3, 5)],
    14: [(0, 1, 2, 3), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)],
}
#: how far the parts are pulled apart: each moves by this fraction of its centre's offset from the mesh centre
EXPLODE = 0.8
#: and each part is shrunk about its own centre to this fraction of its size: gaps open between parts, so
#: a part near the mesh centre (which hardly moves) is seen between the others
SHRINK = 0.7
#: up to this many faces in a panel they get dark outlines (above, outlines only darken the picture)
OUTLINE_LIMIT = 6_000


def solid_faces(
    cell_ptr: NDArray[np.int64], cell_nodes: NDArray[np.int64], cell_types: NDArray[np.integer],
    owner: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """The faces that bound the ranks' parts.

    Returns
    -------
    faces : ndarray of int64, shape (f, 4)
        Corner ids of each face (a triangle repeats its last corner).
    cell : ndarray of int64, shape (f,)
        The cell each face belongs to (its colour is ``owner[cell]``).
    outer : ndarray of bool, shape (f,)
        The face is on the domain's boundary (no other cell shares it); the others separate two ranks.

    Notes
    -----
    A facet shared by two cells of one rank is interior to that rank's part and dropped; a facet shared by two
    ranks is kept once for each side (each part is closed).
    """
    ptr = np.asarray(cell_ptr, dtype=np.int64)
    nodes = np.asarray(cell_nodes, dtype=np.int64)
    types = np.asarray(cell_types, dtype=np.int64)
    own = np.asarray(owner, dtype=np.int64)
    faces, cells = [], []
    for t, facets in SOLID_FACETS.items():
        idx = np.flatnonzero(types == t)
        if idx.size == 0:
            continue
        k = max(max(f) for f in facets) + 1
        conn = nodes[ptr[idx][:, None] + np.arange(k)]
        for f in facets:
            local = list(f) + [f[-1]] * (4 - len(f))
            faces.append(conn[:, local])
            cells.append(idx)
    if not faces:
        return np.zeros((0, 4), dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    face = np.concatenate(faces)
    cell = np.concatenate(cells)
    _, inv, count = np.unique(np.sort(face, axis=1), axis=0, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    lo = np.full(count.size, np.iinfo(np.int64).max)
    hi = np.full(count.size, -1)
    np.minimum.at(lo, inv, own[cell])
    np.maximum.at(hi, inv, own[cell])
    outer = count[inv] == 1
    keep = outer | (lo[inv] != hi[inv])
    return face[keep], cell[keep], outer[keep]


def _panel(ax: Axes, polys, facecolors, box_lo, box_hi, title: str) -> None:
    """Shaded faces on a 3-D axes over the box ``box_lo``–``box_hi`` at its true proportions."""
    from matplotlib.colors import LightSource
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    light = LightSource(azdeg=315, altdeg=45)
    edges = dict(edgecolors=(0, 0, 0, 0.35), linewidths=0.3) if len(polys) <= OUTLINE_LIMIT else \
        dict(edgecolors="face", linewidths=0.1)
    ax.add_collection3d(Poly3DCollection(polys, facecolors=facecolors, shade=True, lightsource=light, **edges))
    ax.set_xlim(box_lo[0], box_hi[0])
    ax.set_ylim(box_lo[1], box_hi[1])
    ax.set_zlim(box_lo[2], box_hi[2])
    ax.set_box_aspect(np.maximum(box_hi - box_lo, 1e-12 * max(float(np.max(box_hi - box_lo)), 1e-300)))
    ax.set_xlabel("x", fontsize="small", labelpad=-8)
    ax.set_ylabel("y", fontsize="small", labelpad=-8)
    ax.set_zlabel("z", fontsize="small", labelpad=-8)
    ax.tick_params(labelsize="xx-small", pad=-2)
    ax.set_title(title, fontsize="medium")


def draw_surface(ax: Axes, points: NDArray[np.float64], cell_ptr: NDArray[np.int64], cell_nodes: NDArray[np.int64],
                 cell_types: NDArray[np.integer], cell_colors: NDArray[np.float64], title: str) -> None:
    """The outer surface of a volume mesh on the 3-D axes ``ax``, each face in the colour of its cell
    (``cell_colors``, RGBA per cell: the unit weights or refinement levels of the pictures' weights panel)."""
    pts = np.asarray(points, dtype=np.float64)
    n = np.asarray(cell_types).shape[0]
    face, cell, outer = solid_faces(cell_ptr, cell_nodes, cell_types, np.zeros(n, dtype=np.int64))
    _panel(ax, pts[face[outer]], np.asarray(cell_colors)[cell[outer]], pts.min(axis=0), pts.max(axis=0), title)


def draw_solid(
    ax_outer: Axes, ax_parts: Axes, points: NDArray[np.float64], cell_ptr: NDArray[np.int64],
    cell_nodes: NDArray[np.int64], cell_types: NDArray[np.integer], owner: NDArray[np.int64],
    colors: NDArray[np.float64],
) -> None:
    """Draw the outer surface on ``ax_outer`` and the parts pulled apart on ``ax_parts`` (both 3-D axes)."""
    pts = np.asarray(points, dtype=np.float64)
    own = np.asarray(owner, dtype=np.int64)
    face, cell, outer = solid_faces(cell_ptr, cell_nodes, cell_types, own)
    rank = own[cell]
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    _panel(ax_outer, pts[face[outer]], colors[rank[outer]], lo, hi, "outer surface")

    # every part moved along the line from the mesh centre through the part's centre
    ranks = np.unique(own)
    centre = 0.5 * (lo + hi)
    cc = np.zeros((int(own.max(initial=0)) + 1, 3))
    ncell = np.bincount(own, minlength=cc.shape[0]).astype(np.float64)
    ptr = np.asarray(cell_ptr, dtype=np.int64)
    sizes = np.diff(ptr)
    cell_centre = np.add.reduceat(pts[np.asarray(cell_nodes, dtype=np.int64)[ptr[0]:ptr[-1]]], ptr[:-1] - ptr[0],
                                  axis=0) / np.maximum(sizes, 1)[:, None]
    for d in range(3):
        cc[:, d] = np.bincount(own, weights=cell_centre[:, d], minlength=cc.shape[0])
    cc /= np.maximum(ncell, 1)[:, None]
    shift = EXPLODE * (cc - centre)
    part_centre = cc[rank][:, None, :]
    moved = part_centre + SHRINK * (pts[face] - part_centre) + shift[rank][:, None, :]
    span = hi - lo
    pad = np.abs(shift[ranks]).max(axis=0) if ranks.size else np.zeros(3)
    _panel(ax_parts, moved, colors[rank], lo - pad - 0.02 * span, hi + pad + 0.02 * span,
           f"{ranks.size} ranks pulled apart")
