from __future__ import annotations

import numpy as np
import pytest

from hermes.data.cfd_meshes import (
    CFD_MESHES,
    SIZE_TOLERANCE,
    get_generator,
    large,
    naca4,
)
from hermes.data.generators import lshape_triangles
from hermes.data.io import read_mesh, write_mesh
from hermes.data.mesh import csr_from_edges, validate_graph
from hermes.data.meshinfo import mesh_info
from hermes.data.polygons import mesh_from_cells
from hermes.errors import MeshError
from tests.conftest import ROOT
from tests.tolerances import area_tol

SHIPPED = {name: entry for name, entry in CFD_MESHES.items() if entry.file is not None}
HOLES = {"grid": 0, "stufe": 0, "lshape": 0, "airfoil": 1, "3elt": 3, "cylinder": 1}
ARRAYS = ("xadj", "adjncy", "coords", "points", "cell_ptr", "cell_nodes")


def _corners(mesh):
    k = int(np.diff(mesh.cell_ptr)[0])
    assert np.all(np.diff(mesh.cell_ptr) == k)
    return mesh.points[mesh.cell_nodes.reshape(-1, k)]


def _areas(mesh):
    p = _corners(mesh)
    x, y = p[..., 0], p[..., 1]
    return 0.5 * np.sum(x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y, axis=1)


def _check_cell_mesh(mesh, name):
    validate_graph(mesh)  # symmetric, no loops, positive weights, connected
    assert mesh.has_polygons and mesh.dim == 2
    assert _areas(mesh).min() > 0  # counter-clockwise, nothing degenerate
    info = mesh_info(mesh)
    assert info["valid"], info["problems"]
    assert info["holes"] == HOLES[name]  # Euler: the geometry's holes, no overlapping elements
    assert info["cells"] == mesh.n_cells and info["edges"] == mesh.n_edges
    # the dual graph of a triangle mesh has degree ≤ 3 (≤ 4 for squares)
    assert mesh.degree.max() <= np.diff(mesh.cell_ptr).max()


def test_registry_covers_the_thesis_kinds():
    assert {"grid", "airfoil", "3elt", "stufe", "lshape", "cylinder"} <= set(CFD_MESHES)
    with pytest.raises(MeshError, match="unknown mesh generator 'naca'.*airfoil.*cylinder"):
        get_generator("naca")


@pytest.mark.parametrize("name", list(SHIPPED))
@pytest.mark.parametrize("size", [300, 2500])
def test_generator_is_valid_and_near_the_size(name, size):
    mesh = CFD_MESHES[name].build(size)
    _check_cell_mesh(mesh, name)
    assert abs(mesh.n_cells - size) <= SIZE_TOLERANCE * size
    assert mesh.meta["generator"] == name


@pytest.mark.parametrize("name", ["airfoil", "3elt", "stufe", "cylinder"])
def test_gmsh_meshes_are_deterministic(name):
    a, b = CFD_MESHES[name].build(400), CFD_MESHES[name].build(400)
    for attr in ARRAYS:
        assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr


def test_grid_default_is_grid20x19():
    m = CFD_MESHES["grid"].build(380)
    assert (m.n_cells, m.n_edges, m.meta["nx"], m.meta["ny"]) == (380, 721, 20, 19)  # thesis Table 10.2


def test_lshape_default_is_the_shipped_lshape():
    m = CFD_MESHES["lshape"].build(1536)
    points, tris = lshape_triangles(16)
    assert np.array_equal(m.points, points) and np.array_equal(m.cell_nodes, tris.ravel())


def test_naca0012_shape():
    upper, lower = naca4("0012", 80)
    assert np.allclose(upper[:, 0], lower[:, 0]) and np.allclose(upper[:, 1], -lower[:, 1])
    thickness = upper[:, 1] - lower[:, 1]
    assert abs(thickness.max() - 0.12) < 2e-3 and 0.25 < upper[np.argmax(thickness), 0] < 0.35
    assert tuple(upper[0]) == (0.0, 0.0) and tuple(upper[-1]) == tuple(lower[-1]) == (1.0, 0.0)
    with pytest.raises(MeshError):
        naca4("12", 10)


@pytest.mark.parametrize("size", [10, 10**7, 2.5, True])
def test_bad_sizes_are_one_line_errors(size):
    with pytest.raises(MeshError, match="size"):
        CFD_MESHES["airfoil"].build(size)


@pytest.mark.parametrize("suffix", [".vtu", ".msh"])
@pytest.mark.parametrize("name", ["grid", "3elt"])
def test_write_then_read_is_the_same_mesh(tmp_path, name, suffix):
    mesh = CFD_MESHES[name].build(300)
    back = read_mesh(write_mesh(mesh, tmp_path / f"m{suffix}"))
    for attr in ARRAYS:
        assert np.array_equal(getattr(mesh, attr), getattr(back, attr)), attr


def test_mesh_from_cells_reorients_and_rejects_non_manifold():
    pts = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [2, 2]], dtype=float)
    m = mesh_from_cells(pts, np.array([[0, 2, 1], [1, 2, 3]]), name="t")  # first one clockwise
    assert _areas(m).min() > 0 and m.n_edges == 1 and m.points.shape[0] == 4  # unused point dropped
    with pytest.raises(MeshError, match="non-manifold"):
        mesh_from_cells(pts, np.array([[0, 1, 2], [1, 3, 2], [1, 4, 2]]), name="t")


def test_large_structure_is_the_dual_graph_of_its_triangles():
    m = large(20_000)
    ny = round(np.sqrt(20_000 / 4))
    assert m.n_cells == 4 * ny * ny and m.meta["nx"] == 2 * ny
    validate_graph(m)
    assert _areas(m).min() > 0 and abs(_areas(m).sum() - 2.0) <= area_tol(_corners(m))
    # oracle: the dual graph built by matching triangle sides
    ref = mesh_from_cells(m.points, m.cell_nodes.reshape(-1, 3), name="ref")
    assert np.array_equal(ref.xadj, m.xadj) and np.array_equal(ref.adjncy, m.adjncy)
    # the fast CSR builder agrees with the general one
    rows = np.repeat(np.arange(m.n_cells), m.degree)
    xadj, adjncy = csr_from_edges(m.n_cells, np.column_stack([rows, m.adjncy]))
    assert np.array_equal(xadj, m.xadj) and np.array_equal(adjncy, m.adjncy)
    assert large(4 * 50 * 50).n_cells == 10_000


@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_meshes_load(name):
    entry = SHIPPED[name]
    path = ROOT / "meshes" / entry.file
    mesh = read_mesh(path)
    _check_cell_mesh(mesh, name)
    assert abs(mesh.n_cells - entry.default_size) <= SIZE_TOLERANCE * entry.default_size
    nodal = read_mesh(path, units="nodes")  # the thesis' graphs count mesh vertices
    assert nodal.n_cells == mesh.points.shape[0]
