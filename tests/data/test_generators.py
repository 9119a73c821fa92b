from __future__ import annotations

import numpy as np
import pytest

from hermes.data.generators import grid, parse_grid_spec
from hermes.data.mesh import validate_graph
from hermes.errors import MeshError

SIZES = [(20, 19), (1, 1), (1, 6), (6, 1), (7, 3), (4, 4)]


def _edges(mesh):
    rows = np.repeat(np.arange(mesh.n_cells), mesh.degree)
    return rows, mesh.adjncy


@pytest.mark.parametrize("nx, ny", SIZES)
def test_grid_counts(nx, ny):
    mesh = grid(nx, ny)
    assert mesh.n_cells == nx * ny
    assert mesh.n_edges == nx * (ny - 1) + ny * (nx - 1)
    assert mesh.adjncy.size == 2 * mesh.n_edges
    assert mesh.name == f"grid{nx}x{ny}"
    np.testing.assert_array_equal(mesh.weights, np.ones(nx * ny))
    validate_graph(mesh)


def test_grid20x19_is_the_thesis_graph():
    mesh = grid(20, 19)
    assert (mesh.n_cells, mesh.n_edges, mesh.adjncy.size) == (380, 721, 1442)
    # degree distribution: 4 corners of degree 2, boundary cells of degree 3, interior of degree 4
    assert np.bincount(mesh.degree).tolist() == [0, 0, 4, 2 * (18 + 17), 18 * 17]


@pytest.mark.parametrize("nx, ny", SIZES)
def test_grid_adjacency_is_symmetric_four_neighbour(nx, ny):
    mesh = grid(nx, ny)
    a = mesh.adjacency
    assert (a != a.T).nnz == 0
    rows, cols = _edges(mesh)
    assert np.all(rows != cols)
    # neighbours are exactly one unit apart along one axis
    d = np.abs(mesh.coords[rows] - mesh.coords[cols])
    np.testing.assert_allclose(d.sum(axis=1), 1.0)
    assert np.all((d[:, 0] == 0) | (d[:, 1] == 0))


@pytest.mark.parametrize("nx, ny", SIZES)
def test_grid_ids_and_centroids(nx, ny):
    mesh = grid(nx, ny)
    ids = np.arange(nx * ny)
    row, col = np.divmod(ids, nx)
    np.testing.assert_array_equal(mesh.coords, np.column_stack([col + 0.5, row + 0.5]))


@pytest.mark.parametrize("nx, ny", SIZES)
def test_grid_polygons_are_ccw_unit_squares(nx, ny):
    mesh = grid(nx, ny)
    assert mesh.has_polygons
    np.testing.assert_array_equal(np.diff(mesh.cell_ptr), 4)
    quads = mesh.points[mesh.cell_nodes.reshape(-1, 4)]  # (n, 4, 2)
    x, y = quads[..., 0], quads[..., 1]
    area = 0.5 * np.sum(x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y, axis=1)
    np.testing.assert_allclose(area, 1.0)  # positive: counter-clockwise
    np.testing.assert_allclose(quads.mean(axis=1), mesh.coords)
    assert mesh.points[:, 0].min() == 0 and mesh.points[:, 0].max() == nx
    assert mesh.points[:, 1].min() == 0 and mesh.points[:, 1].max() == ny
    assert mesh.points.shape == ((nx + 1) * (ny + 1), 2)


def test_grid_name_override():
    assert grid(3, 2, name="tiny").name == "tiny"


@pytest.mark.parametrize("nx, ny", [(0, 3), (3, 0), (-1, 2), (2.5, 2), ("3", 2)])
def test_grid_rejects_bad_sizes(nx, ny):
    with pytest.raises(MeshError):
        grid(nx, ny)


@pytest.mark.parametrize(
    "spec, expected",
    [("20x19", (20, 19)), ("1x1", (1, 1)), (" 8 X 4 ", (8, 4)), ("grid20x19", (20, 19)), ("3×5", (3, 5))],
)
def test_parse_grid_spec(spec, expected):
    assert parse_grid_spec(spec) == expected


@pytest.mark.parametrize("spec", ["", "20", "20x", "x19", "20x19x3", "a x b", "20,19", "0x5", "5x0", "-2x3", "2.5x3"])
def test_parse_grid_spec_rejects(spec):
    with pytest.raises(MeshError) as err:
        parse_grid_spec(spec)
    assert "\n" not in str(err.value)
    assert repr(spec) in str(err.value)


def test_parse_grid_spec_rejects_non_strings():
    with pytest.raises(MeshError):
        parse_grid_spec(20)  # type: ignore[arg-type]
