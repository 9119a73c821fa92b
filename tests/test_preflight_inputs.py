"""Inputs refused before launching, or used honestly: a multi-constraint graph's vertex weights
(mesh.constraint), refinement on meshes newest-vertex bisection cannot refine (3-D cells, a surface in 3-D,
a graph) — one line, exit 2, no mpiexec started; the driver's set-up (what runs under mpiexec) checks the same."""

from __future__ import annotations

import meshio
import numpy as np
import pytest

import hermes.cli
from hermes.errors import MeshError, ScenarioError
from hermes.lifecycle.preflight import mesh_cells
from hermes.lifecycle.setup import _read_and_partition, load_mesh
from hermes.scenario import QUICKSTART, parse_scenario

# 4 vertices, 2 weights each ('10 2'): the second is 0 on three vertices
MULTI = "% two vertex weights\n4 3 10 2\n1 0 2\n1 3 1 3\n2 0 2 4\n1 0 3\n"
REFINE = {"kind": "refine", "phases": 2, "max_level": 2, "region": {"kind": "front", "start": 0.1, "speed": 0.3,
                                                                     "width": 0.3}}


def _sc(tmp_path, **top):
    return parse_scenario({**QUICKSTART, "processors": 2, "platform": {"capacities": "homo"}, **top},
                          base_dir=tmp_path)


def _load(sc):
    """The driver's reader (rank 0 under mpiexec) of the scenario's mesh."""
    return load_mesh(sc.mesh, sc.resolve)


def _run_refused(tmp_path, monkeypatch, capsys, args) -> str:
    monkeypatch.setattr("hermes.runtime.launch.run_job", lambda cmd: pytest.fail(f"mpiexec started: {cmd}"))
    code = hermes.cli.main(["run", *args, "--processes", "2", "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("hermes: error: "), err
    return lines[0]


def test_a_multi_constraint_graph_is_refused_in_one_line_naming_the_file_and_ncon(tmp_path, monkeypatch, capsys):
    (tmp_path / "m.graph").write_text(MULTI)
    line = _run_refused(tmp_path, monkeypatch, capsys,
                        ["--set", f"mesh.file={tmp_path / 'm.graph'}", "--set", "processors=2",
                         "--set", "platform.capacities=homo"])
    assert "m.graph has 2 vertex weights per vertex (ncon = 2)" in line and "mesh.constraint" in line, line
    with pytest.raises(MeshError, match=r"ncon = 2.*mesh\.constraint to 1\.\.2"):
        _load(_sc(tmp_path, mesh={"file": "m.graph"}))  # the driver's reader (rank 0 under mpiexec)


@pytest.mark.parametrize("constraint, weights", [(1, [1, 1, 2, 1]), (2, [1, 3, 1, 1]), ("sum", [1, 4, 2, 1])])
def test_mesh_constraint_picks_or_sums_the_vertex_weights(tmp_path, constraint, weights):
    (tmp_path / "m.graph").write_text(MULTI)
    sc = _sc(tmp_path, mesh={"file": "m.graph", "constraint": constraint})
    assert np.array_equal(_load(sc).weights, weights)  # zeros become 1, as for a single weight
    assert mesh_cells(sc.mesh, sc.adaptation, sc.resolve) == (4, (1.0, float(max(weights))))


def test_mesh_constraint_beyond_ncon_or_on_a_single_weight_mesh_is_refused(tmp_path):
    (tmp_path / "m.graph").write_text(MULTI)
    with pytest.raises(MeshError, match=r"has 2 vertex weights \(ncon = 2\): give 1\.\.2, 'sum' or 'all', got 3"):
        _load(_sc(tmp_path, mesh={"file": "m.graph", "constraint": 3}))
    (tmp_path / "one.graph").write_text("4 3\n2\n1 3\n2 4\n3\n")
    with pytest.raises(MeshError, match="one vertex weight per vertex"):
        _load(_sc(tmp_path, mesh={"file": "one.graph", "constraint": 2}))
    with pytest.raises(ScenarioError, match="mesh: constraint picks a vertex weight"):
        _sc(tmp_path, mesh={"grid": "4x4", "constraint": 1})


def _tet(path):
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], float)
    meshio.write(path, meshio.Mesh(pts, [("tetra", np.array([[0, 1, 2, 3], [1, 2, 3, 4]]))]))


def _surface(path):
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0.5], [1, 1, 0.2]], float)
    meshio.write(path, meshio.Mesh(pts, [("triangle", np.array([[0, 1, 2], [1, 3, 2]]))]))


@pytest.mark.parametrize("make, message", [(_tet, "has 3-D cells (tetra): 3-D refinement is not implemented"),
                                           (_surface, "is a surface in 3-D (z from 0 to 0.5)")])
def test_refinement_of_a_mesh_bisection_cannot_refine_is_refused_before_launching(tmp_path, monkeypatch, capsys,
                                                                                   make, message):
    make(tmp_path / "m.vtu")
    line = _run_refused(tmp_path, monkeypatch, capsys,
                        ["--set", f"mesh.file={tmp_path / 'm.vtu'}", "--set", "processors=2",
                         "--set", "platform.capacities=homo", "--set", "adaptation.kind=refine"])
    assert line.startswith("hermes: error: adaptation.kind: refine bisects 2-D triangles and quadrilaterals; "
                           "mesh.file ") and message in line, line
    sc = _sc(tmp_path, mesh={"file": "m.vtu"}, adaptation=REFINE)
    with pytest.raises(MeshError, match="refine bisects 2-D triangles"):  # the set-up under mpiexec, any file size
        _read_and_partition(sc, 2)
    _sc(tmp_path, mesh={"file": "m.vtu"})  # weights adaptation on the same mesh: fine


def test_refinement_of_a_graph_is_refused_before_launching(tmp_path, monkeypatch, capsys):
    (tmp_path / "g.graph").write_text("4 4\n2 4\n1 3\n2 4\n1 3\n")
    line = _run_refused(tmp_path, monkeypatch, capsys,
                        ["--set", f"mesh.file={tmp_path / 'g.graph'}", "--set", "processors=2",
                         "--set", "platform.capacities=homo", "--set", "adaptation.kind=refine"])
    assert "is a graph without polygons" in line
