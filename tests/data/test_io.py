from __future__ import annotations

import time
from pathlib import Path

import meshio
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from hermes.data.formats import read_chaco, read_matrix_market, write_chaco
from hermes.data.generators import grid
from hermes.data.io import read_mesh, read_meshio
from hermes.errors import MeshError

SHARED = Path(__file__).parents[2] / ".." / "shared" / "meshes"


def edge_set(mesh) -> set[tuple[int, int]]:
    rows = np.repeat(np.arange(mesh.n_cells), mesh.degree)
    return {(int(i), int(j)) for i, j in zip(rows, mesh.adjncy) if i < j}


def assert_one_line_error(err: pytest.ExceptionInfo, *fragments: str) -> None:
    msg = str(err.value)
    assert msg and "\n" not in msg, msg
    for fragment in fragments:
        assert fragment in msg, msg


# --------------------------------------------------------------------------------------------
# Chaco / METIS
# --------------------------------------------------------------------------------------------


def test_chaco_round_trip_plain(tmp_path):
    mesh = grid(6, 5)
    path = write_chaco(mesh, tmp_path / "g.graph")
    assert path.read_text().splitlines()[0] == "30 49"
    back = read_chaco(path)
    assert back.name == "g"
    np.testing.assert_array_equal(back.xadj, mesh.xadj)
    np.testing.assert_array_equal(back.adjncy, mesh.adjncy)
    np.testing.assert_array_equal(back.weights, mesh.weights)
    np.testing.assert_array_equal(back.coords, mesh.coords)
    assert back.edge_weights is None
    assert back.meta["has_coords"] is True


@pytest.mark.parametrize("integral", [True, False])
def test_chaco_round_trip_weights(tmp_path, integral):
    rng = np.random.default_rng(1)
    mesh = grid(5, 4)
    w = rng.integers(1, 9, mesh.n_cells).astype(float) if integral else rng.uniform(0.1, 5, mesh.n_cells)
    # symmetric edge weights: a function of the unordered pair
    rows = np.repeat(np.arange(mesh.n_cells), mesh.degree)
    ew = 1.0 + (np.minimum(rows, mesh.adjncy) * 7 + np.maximum(rows, mesh.adjncy)) % 5
    if not integral:
        ew = ew / 3
    from dataclasses import replace

    mesh = replace(mesh.with_weights(w), edge_weights=ew)
    path = write_chaco(mesh, tmp_path / "w.graph")
    assert path.read_text().splitlines()[0] == f"20 {mesh.n_edges} 11"
    back = read_chaco(path)
    np.testing.assert_array_equal(back.adjncy, mesh.adjncy)
    np.testing.assert_array_equal(back.weights, w)
    np.testing.assert_array_equal(back.edge_weights, ew)


def test_chaco_all_format_fields(tmp_path):
    # triangle 1-2-3 plus vertex 4 hanging on 3; sizes, 2 weights per vertex, edge weights; comments
    text = """% a comment before the header
4 4 111 2
% a comment inside the body
7 1 0 2 5 3 6
8 2 1 3 4 1 5
9 0 1 1 6 2 4 4 2
10 3 0 3 2
"""
    (tmp_path / "f.graph").write_text(text)
    mesh = read_chaco(tmp_path / "f.graph")
    assert (mesh.n_cells, mesh.n_edges) == (4, 4)
    assert edge_set(mesh) == {(0, 1), (0, 2), (1, 2), (2, 3)}
    np.testing.assert_array_equal(mesh.weights, [1, 2, 1, 3])  # the 0 became 1
    assert mesh.meta["zero_weights_replaced"] == 1
    np.testing.assert_array_equal(mesh.meta["vertex_weights_extra"], [[0], [1], [1], [0]])
    np.testing.assert_array_equal(mesh.meta["vertex_sizes"], [7, 8, 9, 10])
    # neighbour lists keep file order (vertex 2 lists 3 before 1), edge weights stay aligned
    np.testing.assert_array_equal(mesh.adjncy, [1, 2, 2, 0, 0, 1, 3, 2])
    np.testing.assert_array_equal(mesh.edge_weights, [5, 6, 4, 5, 6, 4, 2, 2])
    expected = {(0, 1): 5, (0, 2): 6, (1, 2): 4, (2, 3): 2}
    a = mesh.adjacency
    for (i, j), wij in expected.items():
        assert a[i, j] == wij and a[j, i] == wij
    assert mesh.meta["has_coords"] is False
    np.testing.assert_array_equal(mesh.coords, np.zeros((4, 2)))


@pytest.mark.parametrize(
    "coord_name, text, expected",
    [
        ("p.graph.xyz", "0 0 0\n1 0 0\n2 0 0\n", [[0, 0], [1, 0], [2, 0]]),
        ("p.xyz", "0 0 1\n1 0 2\n2 0 3\n", [[0, 0, 1], [1, 0, 2], [2, 0, 3]]),
        ("p.coords", "0.5 1\n1.5 1\n2.5 1\n\n", [[0.5, 1], [1.5, 1], [2.5, 1]]),
        ("p.coords", "3\n4\n5\n", [[3, 0], [4, 0], [5, 0]]),
    ],
)
def test_chaco_coordinate_files(tmp_path, coord_name, text, expected):
    (tmp_path / "p.graph").write_text("3 2\n2\n1 3\n2\n")
    (tmp_path / coord_name).write_text(text)
    mesh = read_mesh(tmp_path / "p.graph")
    assert mesh.meta["has_coords"] is True
    np.testing.assert_array_equal(mesh.coords, expected)


def test_chaco_prefers_graph_xyz(tmp_path):
    (tmp_path / "p.graph").write_text("2 1\n2\n1\n")
    (tmp_path / "p.graph.xyz").write_text("1 1\n2 2\n")
    (tmp_path / "p.coords").write_text("9 9\n9 9\n")
    np.testing.assert_array_equal(read_chaco(tmp_path / "p.graph").coords, [[1, 1], [2, 2]])


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("", ["empty graph file"]),
        ("hello world\n1\n", ["line 1", "bad Chaco/METIS header"]),
        ("3 2 12\n2\n1 3\n2\n", ["format code"]),
        ("3 2\n2\n1 3\n", ["announces 3 vertices", "2 vertex lines"]),
        ("2 1\n2\n1\n1\n", ["line 4", "more vertex lines"]),
        ("3 3\n2\n1 3\n2\n", ["announces 3 edges", "4 entries"]),
        ("3 2\n2\n1 4\n2\n", ["line 3", "out of range 1..3"]),
        ("3 2\n2\n1 0\n2\n", ["line 3", "out of range"]),
        ("3 2\n2\n1 3\n2 x\n", ["line 4", "not a number"]),
        ("3 2\n2\n1 2.5\n2\n", ["line 3", "integers"]),
        ("3 2\n2\n1 2\n2\n", ["line 3", "self loop"]),
        ("3 2\n2 3\n1\n2\n", ["line 2", "lists 3 but vertex 3 does not list 1"]),
        ("3 2\n2 2\n1 1\n\n", ["line 2", "duplicate"]),
        ("3 2 1\n2 1\n1 1 3\n2 1\n", ["line 3", "do not match format"]),
        ("3 2 1\n2 1\n1 2 3 1\n2 1\n", ["edge weights are not symmetric"]),
        ("3 2 1\n2 0\n1 0 3 1\n2 1\n", ["line 2", "edge weights must be positive"]),
        ("3 2 10\n1 2\n-1 1 3\n1 2\n", ["line 3", "non-negative"]),
        ("4 2\n2\n1\n4\n3\n", ["disconnected (2 components; hermes run needs a connected graph"]),
        ("\x00\x01\x02garbage\xff\n", ["bad Chaco/METIS header"]),
    ],
)
def test_chaco_errors(tmp_path, text, fragments):
    path = tmp_path / "bad.graph"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(MeshError) as err:
        read_mesh(path)
    assert_one_line_error(err, str(path), *fragments)


def test_chaco_isolated_vertex_line_is_blank_not_skipped(tmp_path):
    # vertex 2 has no neighbour: its line is empty and must still count as a vertex line
    (tmp_path / "iso.graph").write_text("3 1\n3\n\n1\n")
    with pytest.raises(MeshError) as err:
        read_chaco(tmp_path / "iso.graph")
    assert_one_line_error(err, "disconnected")


def test_chaco_bad_coordinate_file(tmp_path):
    (tmp_path / "c.graph").write_text("3 2\n2\n1 3\n2\n")
    (tmp_path / "c.xyz").write_text("0 0\n1 1\n")
    with pytest.raises(MeshError) as err:
        read_chaco(tmp_path / "c.graph")
    assert_one_line_error(err, "c.xyz", "2 coordinate lines for 3 vertices")
    (tmp_path / "c.xyz").write_text("0 0\n1 1\n2\n")
    with pytest.raises(MeshError) as err:
        read_chaco(tmp_path / "c.graph")
    assert_one_line_error(err, "c.xyz", "line 3")


def test_chaco_parses_1e5_vertices_fast(tmp_path):
    # circulant graph C_n(1, 2): vertex i is adjacent to i ± 1 and i ± 2 (mod n); 4 neighbours a line
    n = 100_000
    i = np.arange(n)
    nbrs = np.column_stack([(i - 2) % n, (i - 1) % n, (i + 1) % n, (i + 2) % n]) + 1
    path = tmp_path / "big.graph"
    with path.open("w") as f:
        f.write(f"{n} {2 * n}\n")
        np.savetxt(f, nbrs, fmt="%d")
    start = time.process_time()  # CPU time: robust to other processes sharing the cores
    mesh = read_chaco(path)
    elapsed = time.process_time() - start
    assert (mesh.n_cells, mesh.n_edges) == (n, 2 * n)
    np.testing.assert_array_equal(mesh.adjncy[:8], [99998, 99999, 1, 2, 99999, 0, 2, 3])  # file order
    assert elapsed < 2.0, f"reading 1e5 vertices took {elapsed:.2f} s of CPU"


# --------------------------------------------------------------------------------------------
# Matrix Market
# --------------------------------------------------------------------------------------------


def test_matrix_market_pattern_is_symmetrised(tmp_path):
    # a non-symmetric "general" matrix with a diagonal: path 0-1-2-3 given one-way, plus (3, 1)
    rows = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    cols = np.array([0, 1, 2, 3, 1, 2, 3, 1])
    a = sp.coo_matrix((np.ones(8), (rows, cols)), shape=(4, 4))
    scipy.io.mmwrite(str(tmp_path / "m.mtx"), a)
    scipy.io.mmwrite(str(tmp_path / "m_coord.mtx"), np.array([[0.0, 0], [1, 0], [2, 0], [3, 1]]))
    mesh = read_mesh(tmp_path / "m.mtx")
    assert edge_set(mesh) == {(0, 1), (1, 2), (2, 3), (1, 3)}
    np.testing.assert_array_equal(mesh.coords, [[0, 0], [1, 0], [2, 0], [3, 1]])
    assert mesh.meta["has_coords"] is True


def test_matrix_market_without_coordinates(tmp_path):
    a = sp.coo_matrix((np.ones(2), ([1, 2], [0, 1])), shape=(3, 3))  # lower triangle
    scipy.io.mmwrite(str(tmp_path / "n.mtx"), a, symmetry="symmetric")
    mesh = read_matrix_market(tmp_path / "n.mtx")
    assert edge_set(mesh) == {(0, 1), (1, 2)}
    assert mesh.meta["has_coords"] is False


@pytest.mark.parametrize(
    "setup, fragments",
    [
        ("garbage", ["cannot read Matrix Market file"]),
        ("dense", ["dense"]),
        ("rectangular", ["not square (2 x 3)"]),
        ("bad_coords", ["m_coord.mtx", "shape (2, 2)"]),
        ("disconnected", ["disconnected"]),
    ],
)
def test_matrix_market_errors(tmp_path, setup, fragments):
    path = tmp_path / "m.mtx"
    if setup == "garbage":
        path.write_text("this is not a matrix\n1 2 3\n")
    elif setup == "dense":
        scipy.io.mmwrite(str(path), np.eye(3))
    elif setup == "rectangular":
        scipy.io.mmwrite(str(path), sp.coo_matrix(np.ones((2, 3))))
    elif setup == "bad_coords":
        scipy.io.mmwrite(str(path), sp.coo_matrix(np.ones((3, 3))))
        scipy.io.mmwrite(str(tmp_path / "m_coord.mtx"), np.zeros((2, 2)))
    else:
        scipy.io.mmwrite(str(path), sp.coo_matrix(np.eye(3)))
    with pytest.raises(MeshError) as err:
        read_mesh(path)
    assert_one_line_error(err, *fragments)


# --------------------------------------------------------------------------------------------
# meshio
# --------------------------------------------------------------------------------------------

# two triangles sharing the edge (1, 2) of the unit square, plus boundary lines and a vertex cell
SQUARE = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]])
TWO_TRIANGLES = [("triangle", np.array([[0, 1, 2], [1, 3, 2]]))]
BOUNDARY = [("line", np.array([[0, 1], [1, 3], [3, 2], [2, 0]])), ("vertex", np.array([[0]]))]

# a quad, a triangle on its right edge, a triangle on that triangle's upper edge
MIXED_POINTS = np.array([[0.0, 0], [1, 0], [1, 1], [0, 1], [2, 0.5], [2, 2]])
MIXED_CELLS = [
    ("quad", np.array([[0, 1, 2, 3]])),
    ("triangle", np.array([[1, 4, 2], [2, 4, 5]])),
]


def write(tmp_path: Path, name: str, points, cells, **kw) -> Path:
    path = tmp_path / name
    meshio.write(str(path), meshio.Mesh(points, cells), **kw)
    return path


@pytest.mark.parametrize("name, fmt", [("t.vtu", None), ("t.vtk", None), ("t.msh", "gmsh22"), ("t.msh", "gmsh")])
def test_meshio_two_triangles_dual_graph(tmp_path, name, fmt):
    cells = TWO_TRIANGLES if fmt == "gmsh" else TWO_TRIANGLES + BOUNDARY  # gmsh 4 needs tags for >1 type
    path = write(tmp_path, name, SQUARE, cells, file_format=fmt)
    mesh = read_mesh(path)
    assert mesh.n_cells == 2
    assert edge_set(mesh) == {(0, 1)}
    assert mesh.dim == 2  # z == 0 everywhere
    np.testing.assert_allclose(mesh.coords, [[1 / 3, 1 / 3], [2 / 3, 2 / 3]])
    assert mesh.has_polygons
    np.testing.assert_array_equal(mesh.cell_ptr, [0, 3, 6])
    np.testing.assert_array_equal(mesh.cell_nodes, [0, 1, 2, 1, 3, 2])
    assert mesh.points.shape == (4, 2)


@pytest.mark.parametrize("name", ["mixed.vtu", "mixed.msh"])
def test_meshio_mixed_quad_triangle(tmp_path, name):
    kw = {"file_format": "gmsh22"} if name.endswith(".msh") else {}
    path = write(tmp_path, name, MIXED_POINTS, MIXED_CELLS, **kw)
    mesh = read_mesh(path)
    assert mesh.n_cells == 3
    assert edge_set(mesh) == {(0, 1), (1, 2)}  # quad–tri via (1, 2); tri–tri via (2, 4)
    np.testing.assert_array_equal(mesh.cell_ptr, [0, 4, 7, 10])
    np.testing.assert_allclose(mesh.coords[0], [0.5, 0.5])
    np.testing.assert_allclose(mesh.coords[2], [(1 + 2 + 2) / 3, (1 + 0.5 + 2) / 3])


@pytest.mark.parametrize("name, fmt", [("q.vtu", None), ("q.msh", "gmsh")])
def test_meshio_quad_grid_round_trip(tmp_path, name, fmt):
    nx, ny = 7, 5
    g = grid(nx, ny)
    path = write(tmp_path, name, g.points, [("quad", g.cell_nodes.reshape(-1, 4))], file_format=fmt)
    mesh = read_mesh(path)
    np.testing.assert_array_equal(mesh.xadj, g.xadj)
    np.testing.assert_array_equal(mesh.adjncy, g.adjncy)
    np.testing.assert_allclose(mesh.coords, g.coords)
    np.testing.assert_array_equal(mesh.cell_nodes, g.cell_nodes)
    np.testing.assert_array_equal(mesh.cell_ptr, g.cell_ptr)
    # the nodal graph of an nx × ny quad grid is the dual graph of an (nx+1) × (ny+1) grid
    nodal = read_mesh(path, units="nodes")
    lattice = grid(nx + 1, ny + 1)
    np.testing.assert_array_equal(nodal.xadj, lattice.xadj)
    np.testing.assert_array_equal(nodal.adjncy, lattice.adjncy)
    assert "node_ids" not in nodal.meta


@pytest.mark.parametrize("nx, ny", [(1, 1), (6, 4), (30, 20)])
def test_meshio_triangulated_grid_edge_count(tmp_path, nx, ny):
    g = grid(nx, ny)
    q = g.cell_nodes.reshape(-1, 4)
    tris = np.concatenate([q[:, [0, 1, 2]], q[:, [0, 2, 3]]])
    mesh = read_mesh(write(tmp_path, "tri.vtu", g.points, [("triangle", tris)]))
    n_mesh_edges = nx * (ny + 1) + ny * (nx + 1) + nx * ny  # horizontal, vertical, diagonal
    assert mesh.n_cells == 2 * nx * ny
    assert mesh.n_edges == n_mesh_edges - 2 * (nx + ny)  # interior mesh edges
    assert np.all(mesh.degree <= 3)


def test_meshio_nodal_graph(tmp_path):
    points = np.vstack([MIXED_POINTS, [[5.0, 5]]])  # point 6 is used by no cell
    path = write(tmp_path, "nodes.vtu", points, MIXED_CELLS)
    mesh = read_mesh(path, units="nodes")
    assert mesh.n_cells == 6
    assert edge_set(mesh) == {(0, 1), (1, 2), (2, 3), (0, 3), (1, 4), (2, 4), (4, 5), (2, 5)}
    np.testing.assert_array_equal(mesh.coords, MIXED_POINTS)
    np.testing.assert_array_equal(mesh.meta["node_ids"], np.arange(6))
    assert not mesh.has_polygons


def test_meshio_3d_hexahedra_and_wedge(tmp_path):
    # two unit cubes stacked along x, a wedge on top of the second one
    x, y, z = np.meshgrid([0.0, 1, 2], [0.0, 1], [0.0, 1, 2], indexing="ij")
    pts = np.column_stack([x.ravel(), y.ravel(), z.ravel()])
    idx = lambda i, j, k: i * 6 + j * 3 + k  # noqa: E731
    hexes = [
        [idx(i, 0, 0), idx(i + 1, 0, 0), idx(i + 1, 1, 0), idx(i, 1, 0),
         idx(i, 0, 1), idx(i + 1, 0, 1), idx(i + 1, 1, 1), idx(i, 1, 1)]
        for i in (0, 1)
    ]
    # wedge on the top face z=1 of the second cube: triangles (1,0,1)(2,0,1)(2,1,1) lifted to z=2
    wedge = [[idx(1, 0, 1), idx(2, 0, 1), idx(2, 1, 1), idx(1, 0, 2), idx(2, 0, 2), idx(2, 1, 2)]]
    path = write(tmp_path, "h.vtu", pts, [("hexahedron", np.array(hexes)), ("wedge", np.array(wedge))])
    with pytest.raises(MeshError) as err:  # the wedge's bottom triangle is half of a quad face: no facet shared
        read_mesh(path)
    assert_one_line_error(err, "disconnected")
    path = write(tmp_path, "h2.vtu", pts, [("hexahedron", np.array(hexes))])
    mesh = read_mesh(path)
    assert mesh.n_cells == 2 and edge_set(mesh) == {(0, 1)}
    assert mesh.dim == 3 and not mesh.has_polygons
    np.testing.assert_allclose(mesh.coords, [[0.5, 0.5, 0.5], [1.5, 0.5, 0.5]])
    nodal = read_mesh(path, units="nodes")
    assert nodal.n_cells == 12 and nodal.n_edges == 20


def test_meshio_tetra_pair(tmp_path):
    pts = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]])
    path = write(tmp_path, "t.vtu", pts, [("tetra", np.array([[0, 1, 2, 3], [1, 2, 3, 4]]))])
    mesh = read_meshio(path)
    assert edge_set(mesh) == {(0, 1)}


def test_meshio_non_manifold(tmp_path):
    pts = np.array([[0.0, 0], [1, 0], [0.5, 1], [0.5, -1], [1.5, 0.5]])
    cells = [("triangle", np.array([[0, 1, 2], [0, 1, 3], [0, 1, 4]]))]
    path = write(tmp_path, "nm.vtu", pts, cells)
    with pytest.raises(MeshError) as err:
        read_mesh(path)
    assert_one_line_error(err, "non-manifold", "facet with nodes 0 1")


def test_meshio_no_cells(tmp_path):
    path = write(tmp_path, "lines.vtu", SQUARE, BOUNDARY[:1])
    with pytest.raises(MeshError) as err:
        read_mesh(path)
    assert_one_line_error(err, "no 2-D or 3-D cells")


@pytest.mark.parametrize("name", ["g.vtu", "g.msh", "g.vtk", "empty.vtu"])
def test_meshio_garbage_files(tmp_path, capsys, name):
    path = tmp_path / name
    path.write_text("" if name.startswith("empty") else "garbage\nmore garbage\n")
    with pytest.raises(MeshError) as err:
        read_mesh(path)
    assert_one_line_error(err, str(path), "cannot read mesh file")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""  # meshio's console chatter is captured


def test_meshio_unsupported_suffix(tmp_path):
    path = tmp_path / "mesh.foo"
    path.write_text("whatever")
    with pytest.raises(MeshError) as err:
        read_mesh(path)
    assert_one_line_error(err, "unsupported mesh format '.foo'", str(path))


@pytest.mark.parametrize("name", ["nope.graph", "nope.mtx", "nope.vtu", "nope.msh"])
def test_missing_file(tmp_path, name):
    with pytest.raises(MeshError) as err:
        read_mesh(tmp_path / name)
    assert_one_line_error(err, "not found", name)


def test_directory_is_not_a_mesh(tmp_path):
    (tmp_path / "dir.graph").mkdir()
    with pytest.raises(MeshError) as err:
        read_mesh(tmp_path / "dir.graph")
    assert_one_line_error(err, "not a file")


def test_unknown_units(tmp_path):
    with pytest.raises(MeshError) as err:
        read_mesh(tmp_path / "x.vtu", units="faces")
    assert_one_line_error(err, "faces")


# --------------------------------------------------------------------------------------------
# third-party meshes (only where the shared directory exists)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, n, m, dim",
    [
        ("hammond2.graph", 4362, 12624, 2),
        ("whitaker3.mtx", 9800, 28989, 2),
        ("rotation-00000.graph", 10361, 15411, 2),
        ("slowrot-00000.graph", 13112, 19507, 2),
        ("bubbles-00010.graph", 15036, 22383, 2),
        ("trace-00008.graph", 8993, 13370, 2),
    ],
)
def test_shared_meshes_published_counts(name, n, m, dim):
    if not SHARED.is_dir():
        pytest.skip(f"shared meshes directory {SHARED} is absent")
    mesh = read_mesh(SHARED / name)
    assert (mesh.n_cells, mesh.n_edges, mesh.dim) == (n, m, dim)
    assert mesh.meta["has_coords"] is True
    assert np.ptp(mesh.coords[:, 0]) > 0 and np.ptp(mesh.coords[:, 1]) > 0


def test_hammond2_weights():
    if not SHARED.is_dir():
        pytest.skip(f"shared meshes directory {SHARED} is absent")
    mesh = read_mesh(SHARED / "hammond2.graph")
    np.testing.assert_array_equal(mesh.weights, 1.0)  # first constraint: always one
    extra = mesh.meta["vertex_weights_extra"]
    assert extra.shape == (4362, 1)
    assert set(np.unique(extra)) == {0.0, 1.0} and 0 < extra.sum() < 4362  # surface nodes


# -- coordinates and weights that would break the run's arithmetic (issue 8 item 6) ----------------------------
def _quads(tmp_path, bad_point=None, value=np.nan):
    pts = np.array([[x, y, 0.0] for y in range(3) for x in range(3)])
    if bad_point is not None:
        pts[bad_point, 1] = value
    quads = np.array([[0, 1, 4, 3], [1, 2, 5, 4], [3, 4, 7, 6], [4, 5, 8, 7]])
    path = tmp_path / "q.vtu"
    meshio.write(path, meshio.Mesh(pts, [("quad", quads)]))
    return path


@pytest.mark.parametrize("units", ["cells", "nodes"])
@pytest.mark.parametrize("value, words", [(np.nan, "must be finite"), (np.inf, "must be finite"),
                                          (1e150, "at most 1e+100 in magnitude")])
def test_meshio_non_finite_or_huge_coordinates_are_refused(tmp_path, units, value, words):
    read_mesh(_quads(tmp_path), units=units)  # the same mesh without the bad point is fine
    with pytest.raises(MeshError) as err:
        read_mesh(_quads(tmp_path, bad_point=4, value=value), units=units)
    assert str(err.value).startswith(f"{tmp_path / 'q.vtu'}: unit ") and words in str(err.value)


def test_an_unused_non_finite_node_is_refused_too(tmp_path):
    pts = np.array([[x, y, 0.0] for y in range(2) for x in range(2)] + [[np.nan, 0.0, 0.0]])
    path = tmp_path / "u.vtu"
    meshio.write(path, meshio.Mesh(pts, [("triangle", np.array([[0, 1, 2], [1, 3, 2]]))]))
    with pytest.raises(MeshError, match="node 4 has non-finite coordinates"):
        read_mesh(path)


def test_matrix_market_non_finite_coordinates(tmp_path):
    a = sp.coo_array(([1.0, 1.0, 1.0], ([0, 1, 2], [1, 2, 0])), shape=(3, 3))
    scipy.io.mmwrite(tmp_path / "m.mtx", a)
    scipy.io.mmwrite(tmp_path / "m_coord.mtx", np.array([[0.0, 0.0], [1.0, np.nan], [2.0, 0.0]]))
    with pytest.raises(MeshError, match="unit 1 has coordinates"):
        read_matrix_market(tmp_path / "m.mtx")


def test_chaco_weights_beyond_the_bound(tmp_path):
    (tmp_path / "w.graph").write_text("3 2 10\n1 2\n1e101 1 3\n1 2\n")
    with pytest.raises(MeshError, match=r"unit weights must be at most 1e\+100 \(cell 1 has 1e\+101\)"):
        read_chaco(tmp_path / "w.graph")
