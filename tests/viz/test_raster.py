"""The cells as pixels (hermes.viz.raster) and the partition picture's panels painted with them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.spatial import Delaunay

from hermes.data.generators import grid
from hermes.viz import panels, partition_picture as partition
from hermes.viz.raster import cell_index_map, paint


def test_a_grid_gives_every_cell_its_own_pixels():
    """12 x 10 unit squares on 120 x 100 pixels: every pixel centre lies inside one square, 100 each, and the
    pixel (row i, column j) belongs to the square that holds its centre (row 0 at the top)."""
    mesh = grid(12, 10)
    index = cell_index_map(mesh.points, mesh.cell_ptr, mesh.cell_nodes, (0.0, 12.0, 0.0, 10.0), 120, 100)
    assert (index >= 0).all()
    assert (np.bincount(index.ravel(), minlength=mesh.n_cells) == 100).all()
    i, j = 37, 85  # centre (8.55, 10 - 3.75) lies in the cell whose centroid is (8.5, 6.5)
    assert np.allclose(mesh.coords[index[i, j], :2], [8.5, 6.5])


def test_a_triangulation_covers_its_hull_and_each_pixel_lies_in_its_cell():
    rng = np.random.default_rng(7)
    pts = rng.random((300, 2))
    tri = Delaunay(pts).simplices.astype(np.int64)
    ptr = np.arange(0, 3 * len(tri) + 1, 3, dtype=np.int64)
    index = cell_index_map(pts, ptr, tri.ravel(), (0.0, 1.0, 0.0, 1.0), 200, 160)
    jj, ii = np.meshgrid(np.arange(200), np.arange(160))
    centres = np.column_stack([(jj.ravel() + 0.5) / 200, 1.0 - (ii.ravel() + 0.5) / 160])
    found = Delaunay(pts).find_simplex(centres)  # -1 outside the hull
    got = index.ravel()
    assert ((got >= 0) == (found >= 0)).all()
    # the cell a pixel got contains its centre (a centre on a shared side may go to either cell)
    inside = got >= 0
    corners = pts[tri[got[inside]]]
    c = centres[inside]
    cross = [(corners[:, (k + 1) % 3, 0] - corners[:, k, 0]) * (c[:, 1] - corners[:, k, 1])
             - (corners[:, (k + 1) % 3, 1] - corners[:, k, 1]) * (c[:, 0] - corners[:, k, 0]) for k in range(3)]
    cross = np.array(cross)
    # rounding: the edge functions of a centre on a side are ~1e-16 off; 1e-12 is far below a pixel's 1/160²
    assert ((cross >= -1e-12).all(axis=0) | (cross <= 1e-12).all(axis=0)).all()


def test_holes_stay_empty_and_quads_are_split_into_triangles():
    mesh = grid(4, 4)
    keep = np.array([c for c in range(16) if c != 5])  # the cell at (1.5, 1.5) is a hole
    sizes = np.diff(mesh.cell_ptr)[keep]
    nodes = np.concatenate([mesh.cell_nodes[mesh.cell_ptr[c]:mesh.cell_ptr[c + 1]] for c in keep])
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    index = cell_index_map(mesh.points, ptr, nodes, (0.0, 4.0, 0.0, 4.0), 40, 40)
    assert (index[20:30, 10:20] == -1).all()  # rows from the top: y in (1, 2), x in (1, 2)
    assert (index >= 0).sum() == 15 * 100


def test_paint_colours_outlines_and_boundaries():
    mesh = grid(4, 2)
    index = cell_index_map(mesh.points, mesh.cell_ptr, mesh.cell_nodes, (0.0, 4.0, 0.0, 2.0), 40, 20)
    owner = (mesh.coords[:, 0] > 2).astype(np.int64)  # left half rank 0, right half rank 1
    colors = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])[owner]
    plain = paint(index, colors)
    assert (plain[..., 3] == 255).all()
    assert (plain[:, :20, 0] == 255).all() and (plain[:, 20:, 2] == 255).all()
    img = paint(index, colors, owner=owner, outline=0.5, boundary=2)
    assert (img[:, 19:21, :3] == 0).all()  # the boundary at x = 2: a pixel either side, black
    assert (img[:, 9, 0] == 128).all()  # a cell side at x = 1, inside rank 0: darkened by half
    assert (img[9, :19, 0] == 128).all()  # and the side at y = 1
    assert (img[1:9, 5, 0] == 255).all() and (img[10:19, 5, 0] == 255).all()  # inside a cell: its colour
    padded = cell_index_map(mesh.points, mesh.cell_ptr, mesh.cell_nodes, (-1.0, 5.0, -1.0, 3.0), 60, 40)
    img = paint(padded, colors, outline=0.5)
    assert (img[10:30, 10, 0] == 128).all() and (img[10, 10:29, 0] == 128).all()  # the mesh's border
    assert (img[:10, :, 3] == 0).all() and (img[11:19, 11:19, 0] == 255).all()
    holed = index.copy()
    holed[5, 5] = -1
    img = paint(holed, colors, outline=0.5)
    assert img[5, 5, 3] == 0 and img[4, 5, 0] == img[6, 5, 0] == img[5, 4, 0] == img[5, 6, 0] == 128
    empty = paint(np.full((3, 3), -1, dtype=np.int32), colors)
    assert (empty[..., 3] == 0).all()


def _picture(tmp_path, monkeypatch, **kw):
    mesh = grid(12, 10)
    figures = []
    real = partition.save_figure
    monkeypatch.setattr(partition, "save_figure", lambda fig, path: figures.append(fig) or real(fig, path))
    owner = (mesh.coords[:, 0] > 6).astype(np.int64) + 2 * (mesh.coords[:, 1] > 5)
    path = partition.plot_partition(tmp_path / "p.png", mesh.coords, owner, points=mesh.points,
                                    cell_ptr=mesh.cell_ptr, cell_nodes=mesh.cell_nodes,
                                    weights=np.ones(mesh.n_cells), show_weights=True, zoom=(0.0, 6.0, 0.0, 5.0), **kw)
    return figures[0], path


def test_the_cell_panels_are_images_drawn_pixel_for_pixel(tmp_path, monkeypatch):
    """The partition, weights and overview panels are images of their panel's own pixel size under their axes;
    no panel draws a polygon per cell (what cost ~0.5 s a picture)."""
    import matplotlib.image as mimage

    fig, path = _picture(tmp_path, monkeypatch)
    assert len(fig.images) == 3
    assert fig.get_layout_engine() is None  # laid out once, then drawn once
    for im in fig.images:
        ax = next(a for a in fig.axes if a.bbox.contains(im.ox + 1, im.oy + 1))
        assert not ax.patch.get_visible()
        h, w = im.get_array().shape[:2]
        assert abs(ax.bbox.width - w) <= 1 and abs(ax.bbox.height - h) <= 1
    from matplotlib.collections import PathCollection, PolyCollection

    assert not any(isinstance(c, (PathCollection, PolyCollection)) and len(c.get_paths()) >= 120
                   for ax in fig.axes for c in ax.collections)
    # the picture holds the ranks' colours where the panels are
    pixels = mimage.imread(path)
    colors = partition.rank_colors(4)[:, :3]
    for r in range(4):
        assert (np.abs(pixels[..., :3] - colors[r]).max(axis=-1) < 1 / 255 + 1e-6).sum() > 100


def test_a_huge_panel_is_painted_at_a_bounded_resolution(tmp_path, monkeypatch):
    monkeypatch.setattr(panels, "RASTER_PIXELS", 5_000)
    fig, path = _picture(tmp_path, monkeypatch)
    assert not fig.images  # the panels' images are resampled by their axes instead
    ims = [im for ax in fig.axes for im in ax.images]
    assert len(ims) == 3 and all(im.get_array().shape[0] * im.get_array().shape[1] <= 5_000 for im in ims)
    assert Path(path).stat().st_size > 0
