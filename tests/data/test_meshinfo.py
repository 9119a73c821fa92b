from __future__ import annotations

import json
from dataclasses import replace

import meshio
import numpy as np
import pytest

from hermes.data.cfd_meshes import large
from hermes.data.formats import write_chaco
from hermes.data.generators import grid, lshape_triangles
from hermes.data.io import read_mesh
from hermes.data.meshinfo import (
    PROBLEMS,
    format_mesh_info,
    generate,
    mesh_info,
    mesh_info_file,
)
from hermes.data.polygons import mesh_from_polygons
from hermes.errors import MeshError
from tests.conftest import ROOT

PTS, TRIS = lshape_triangles(2)  # 24 triangles, 21 nodes


def _tri_mesh(points, tris):
    tris = np.asarray(tris)
    return mesh_from_polygons(points, np.arange(0, 3 * len(tris) + 1, 3), tris.ravel(), name="t", check=False)


def _problems(mesh):
    return {k: v for k, v in mesh_info(mesh)["problems"].items() if v}


def _drop_entries(mesh, pairs):
    """The mesh without the adjacency entries (i, j) in ``pairs``."""
    rows = np.repeat(np.arange(mesh.n_cells), mesh.degree)
    keep = np.ones(mesh.adjncy.size, dtype=bool)
    for i, j in pairs:
        keep &= ~((rows == i) & (mesh.adjncy == j))
    xadj = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=mesh.n_cells))])
    return replace(mesh, xadj=xadj, adjncy=mesh.adjncy[keep])


def test_valid_mesh_counts():
    m = _tri_mesh(PTS, TRIS)
    info = mesh_info(m)
    assert info["valid"] and set(info["problems"]) == set(PROBLEMS)
    assert (info["cells"], info["nodes"], info["edges"]) == (24, 21, m.n_edges)
    assert info["components"] == 1 and info["largest_component"] == 24 and info["holes"] == 0
    assert info["degree"] == {"min": int(m.degree.min()), "max": 3, "mean": pytest.approx(2 * m.n_edges / 24)}
    assert info["bbox"] == {"min": [0.0, 0.0], "max": [2.0, 2.0]}
    assert info["area"] == pytest.approx(3.0) and info["orientation"] == "ccw"
    assert info["cell_types"] == {"triangle": 24}
    # boundary sides = 3·cells − 2·interior sides
    assert info["boundary_facets"] == 3 * 24 - 2 * m.n_edges
    json.dumps(info)  # JSON-ready
    assert "problems    none" in format_mesh_info(info)


def test_quads_and_large_are_valid():
    info = mesh_info(grid(5, 4))
    assert info["valid"] and info["cell_types"] == {"quad": 20} and info["edges"] == 5 * 3 + 4 * 4
    info = mesh_info(large(5000))
    assert info["valid"] and info["holes"] == 0 and info["area"] == pytest.approx(2.0)


def test_duplicate_cell():
    p = _problems(_tri_mesh(PTS, np.vstack([TRIS, TRIS[5]])))
    assert p["duplicate_cells"] == 1 and p["non_manifold_facets"] >= 1


def test_inverted_cell():
    tris = TRIS.copy()
    tris[5] = tris[5, ::-1]
    m = _tri_mesh(PTS, tris)
    assert _problems(m) == {"inverted_cells": 1}
    assert mesh_info(m)["orientation"] == "mixed" and mesh_info(m)["holes"] is None


def test_consistently_clockwise_mesh_is_valid():
    info = mesh_info(_tri_mesh(PTS, TRIS[:, ::-1]))
    assert info["valid"] and info["orientation"] == "cw"


def test_zero_area_isolated_cell():
    n = len(PTS)
    pts = np.vstack([PTS, [[3.0, 0.0], [3.5, 0.0], [4.0, 0.0]]])
    p = _problems(_tri_mesh(pts, np.vstack([TRIS, [n, n + 1, n + 2]])))
    assert p == {"zero_area_cells": 1, "isolated_cells": 1, "extra_components": 1}


def test_non_manifold_side():
    m = _tri_mesh(PTS, TRIS)
    j = int(m.adjncy[m.xadj[0]])
    a, b = np.intersect1d(TRIS[0], TRIS[j])  # an interior side, already shared by 2 cells
    pts = np.vstack([PTS, [[0.3, 0.9]]])
    p = _problems(_tri_mesh(pts, np.vstack([TRIS, [a, b, len(PTS)]])))
    assert p["non_manifold_facets"] == 1


def test_hanging_node():
    sq = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]], dtype=float)
    assert _problems(_tri_mesh(sq[:4], [[0, 1, 3], [1, 2, 3]])) == {}
    # the upper triangle is split at the middle of the diagonal; the lower one is not
    p = _problems(_tri_mesh(sq, [[0, 1, 3], [1, 2, 4], [2, 3, 4]]))
    assert p == {"hanging_nodes": 1, "isolated_cells": 1, "extra_components": 1}
    text = format_mesh_info(mesh_info(_tri_mesh(sq, [[0, 1, 3], [1, 2, 4], [2, 3, 4]])))
    assert "hanging nodes" in text and "problems    3" in text


def test_degenerate_cell():
    tris = np.vstack([TRIS, [[0, 1, 1]]])
    assert _problems(_tri_mesh(PTS, tris))["degenerate_cells"] == 1


def test_graph_problems():
    m = _tri_mesh(PTS, TRIS)
    j = int(m.adjncy[m.xadj[0]])
    assert _problems(_drop_entries(m, [(0, j)])) == {"asymmetric_entries": 1}
    p = _problems(_drop_entries(m, [(0, j), (j, 0)]))
    assert p["dual_graph_mismatch"] == 1
    loop = replace(m, xadj=np.r_[0, m.xadj[1:] + 1], adjncy=np.r_[0, m.adjncy])
    assert _problems(loop) == {"self_loops": 1}
    dup = replace(m, xadj=np.r_[0, m.xadj[1:] + 1], adjncy=np.r_[j, m.adjncy])
    assert _problems(dup) == {"duplicate_neighbours": 1}
    assert _problems(m.with_weights(np.r_[0.0, np.nan, np.ones(22)])) == {"bad_weights": 2}
    assert _problems(replace(m, xadj=np.r_[m.xadj[:-1], m.xadj[-1] + 1])) == {"malformed_adjacency": 1}
    bad = m.cell_nodes.copy()
    bad[0] = 999
    assert _problems(replace(m, cell_nodes=bad)) == {"bad_node_indices": 1}


def test_file_that_the_strict_reader_rejects_is_still_described(tmp_path):
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [5, 5, 0], [6, 5, 0], [5, 6, 0]], dtype=float)
    path = tmp_path / "two.vtu"
    meshio.write(path, meshio.Mesh(pts, [("triangle", np.array([[0, 1, 2], [3, 4, 5]]))]))
    with pytest.raises(MeshError, match="disconnected"):
        read_mesh(path)
    info = mesh_info_file(path)
    assert info["problems"]["extra_components"] == 1 and info["cells"] == 2 and not info["valid"]
    assert info["path"] == str(path)
    with pytest.raises(MeshError, match="not found"):
        mesh_info_file(tmp_path / "missing.vtu")


def test_graph_file_and_node_units(tmp_path):
    g = write_chaco(grid(4, 3), tmp_path / "g.graph")
    info = mesh_info_file(g)
    assert info["valid"] and info["cells"] == 12 and info["edges"] == 17 and "nodes" not in info
    nodal = mesh_info_file(ROOT / "meshes" / "lshape.vtu", units="nodes")
    assert nodal["cells"] == 833 and nodal["valid"]


def test_generate_writes_a_readable_mesh(tmp_path):
    mesh = generate("stufe", 400, tmp_path / "s.msh")
    back = read_mesh(tmp_path / "s.msh")
    assert back.n_cells == mesh.n_cells and np.array_equal(back.adjncy, mesh.adjncy)
    assert generate("grid", None, tmp_path / "g.vtu").n_cells == 380
    with pytest.raises(MeshError, match="unknown mesh generator.*grid"):
        generate("nope", 100, tmp_path / "x.vtu")


# -- what hermes run would refuse, what the reader dropped, every weight, the true extent ----------------------
def _two_triangles_apart(path):
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [5, 5, 0], [6, 5, 0], [5, 6, 0]], dtype=float)
    meshio.write(path, meshio.Mesh(pts, [("triangle", np.array([[0, 1, 2], [3, 4, 5]]))]))
    return path


def test_disconnected_graph_is_named_as_refused_by_run(tmp_path):
    g = grid(3, 2)
    two = tmp_path / "two.graph"  # a Chaco file: read without the connectivity check, not leniently
    xadj = np.concatenate([g.xadj, g.xadj[1:] + g.xadj[-1]])
    adjncy = np.concatenate([g.adjncy, g.adjncy + g.n_cells])
    two.write_text(f"{2 * g.n_cells} {g.adjncy.size}\n" + "".join(
        " ".join(str(int(v) + 1) for v in adjncy[xadj[i]:xadj[i + 1]]) + "\n" for i in range(2 * g.n_cells)))
    for path in (two, _two_triangles_apart(tmp_path / "two.vtu")):
        with pytest.raises(MeshError, match=r"disconnected \(2 components; hermes run needs a connected graph"):
            read_mesh(path)
        info = mesh_info_file(path)
        assert info["components"] == 2 and info["problems"]["extra_components"] == 1
        assert info["refused_by_run"] == ["the graph is disconnected (2 components; hermes run needs a connected "
                                          "graph)"]
        text = format_mesh_info(info)
        assert "  refused by run: the graph is disconnected (2 components; hermes run needs a connected graph)" in text
        assert "extra connected components" not in text  # said once, in run's words
        assert json.loads(json.dumps(info))["refused_by_run"] == info["refused_by_run"]
    assert mesh_info_file(ROOT / "meshes" / "lshape.vtu")["refused_by_run"] == []


def test_every_vertex_weight_is_listed(tmp_path):
    g = grid(4, 3)
    vw = np.column_stack([np.ones(g.n_cells), np.arange(g.n_cells) % 3, np.full(g.n_cells, 2.5)])
    info = mesh_info_file(write_chaco(g, tmp_path / "w.graph", vertex_weights=vw))
    w = info["weights"]
    assert w["count"] == 3 and w["total"] == g.n_cells
    assert w["each"] == [{"min": float(c.min()), "max": float(c.max()), "sum": float(c.sum())} for c in vw.T]
    text = format_mesh_info(info)
    assert "weights     3 per vertex" in text and "mesh.constraint" in text
    assert f"  w2        sum {vw[:, 1].sum():.6g}  min 0  max 2" in text
    assert "problems    none" in text
    single = mesh_info_file(write_chaco(g, tmp_path / "s.graph"))["weights"]
    assert single["count"] == 1 and "each" not in single


def test_dropped_cells_and_true_extent_of_a_gmsh_volume(tmp_path):
    pts = np.array([[0, 0, 0], [2, 0, 0], [0, 3, 0], [0, 0, 5], [2, 3, 5]], dtype=float)
    tets = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    cells = [("vertex", np.array([[0], [1]])), ("line", np.array([[0, 1], [1, 2], [2, 0]])),
             ("triangle", np.array([[0, 1, 2]])), ("tetra", tets)]
    path = tmp_path / "v.msh"
    meshio.write(path, meshio.Mesh(pts, cells), file_format="gmsh22", binary=False)
    mesh = read_mesh(path)
    assert mesh.n_cells == 2 and mesh.meta["dropped"] == {"vertex": 2, "line": 3, "triangle": 1}
    info = mesh_info_file(path)
    assert info["bbox"] == {"min": [0.0, 0.0, 0.0], "max": [2.0, 3.0, 5.0]}  # the points, not the centroids
    assert info["cell_types"] == {"tetra": 2} and info["nodes"] == 5
    assert "dropped     2 vertex, 3 line, 1 triangle  (the tetra cells are the work units)" in format_mesh_info(info)
    assert mesh_info_file(ROOT / "meshes" / "lshape.vtu")["dropped"] == {}


def test_dropped_lines_of_a_disconnected_surface_mesh(tmp_path):
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [5, 5, 0], [6, 5, 0], [5, 6, 0]], dtype=float)
    meshio.write(tmp_path / "l.vtu", meshio.Mesh(pts, [("triangle", np.array([[0, 1, 2], [3, 4, 5]])),
                                                       ("line", np.array([[0, 1]]))]))
    assert mesh_info_file(tmp_path / "l.vtu")["dropped"] == {"line": 1}
