"""The stand-ins for thesis Table 10.2's stufe, airfoil and 3elt: their node graphs have the thesis' counts."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.data.io import read_mesh
from hermes.data.thesis_meshes import THESIS_MESHES, _fill_to, _step_rows, node_graph_counts
from hermes.errors import MeshError
from tests.conftest import ROOT

#: thesis Table 10.2 (p. 169): graph -> (vertices, edges as printed: adjacency entries 2|E|)
TABLE_10_2 = {"stufe": (1036, 3736), "airfoil": (4253, 24578), "3elt": (4720, 27444)}


@pytest.mark.parametrize("name", list(TABLE_10_2))
def test_the_shipped_file_read_as_nodes_has_the_thesis_counts(name):
    spec = THESIS_MESHES[name]
    assert (spec.vertices, spec.entries) == TABLE_10_2[name]
    mesh = read_mesh(ROOT / "meshes" / spec.file, units="nodes")
    assert (mesh.xadj.size - 1, mesh.adjncy.size) == TABLE_10_2[name]
    cells = read_mesh(ROOT / "meshes" / spec.file)
    assert node_graph_counts(cells) == TABLE_10_2[name]


def test_the_step_is_rebuilt_identically():
    built = THESIS_MESHES["stufe"].build()
    shipped = read_mesh(ROOT / "meshes" / "thesis-stufe.vtu")
    assert np.array_equal(built.points, shipped.points) and np.array_equal(built.cell_nodes, shipped.cell_nodes)
    assert built.meta["rows"] == [3, 5] and built.meta["columns"] == [76, 121]


def test_step_counts_that_no_quadrilateral_mesh_has_are_refused():
    with pytest.raises(MeshError, match="no quadrilateral step mesh"):
        _step_rows(1036, 3737)


def test_filling_adds_one_node_and_three_edges_per_triangle():
    pts = np.array([[0, 0], [1, 0], [0, 1], [1, 1]], dtype=float)
    tris = np.array([[0, 1, 3], [0, 3, 2]])
    p, t = _fill_to(pts, tris, 6)
    assert p.shape[0] == 6 and t.shape[0] == 6
    edges = {tuple(sorted(e)) for tri in t for e in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0]))}
    assert len(edges) == 5 + 6
