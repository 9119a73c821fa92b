"""hermes run with real refinement (adaptation.kind: refine) under mpiexec: conforming meshes every phase,
cells and weights accounted for exactly, the distributed Jacobi solution equal to a serial replay after
refinement, coarsening and migration by several balancers, pictures and VTU files of the refined meshes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from hermes.app.mesh.kernels import SIGMA
from hermes.data.adapt import region_mask
from hermes.data.io import read_mesh
from hermes.data.refine import areas, conformity_problems, from_mesh, refine
from hermes.errors import ScenarioError
from hermes.scenario import parse_scenario
from tests.conftest import ROOT, run_mpi
from tests.tolerances import area_tol, jacobi_replay_tol

LSHAPE = ROOT / "meshes" / "lshape.vtu"
MAX_LEVEL = 3
SCENARIO = {
    "name": "refine-test", "processors": 4, "seed": 2, "clock": "virtual",
    "mesh": {"file": str(LSHAPE)},
    "platform": {"capacities": [2, 1, 1, 1], "speed": 2.0e4},
    "application": {"kernel": "jacobi", "iterations": 5},
    "adaptation": {"kind": "refine", "phases": 3, "max_level": MAX_LEVEL, "edges": "all", "coarsen": True,
                   "region": {"kind": "front", "start": 0.2, "speed": 0.3, "width": 0.25}},
    "balancer": {"algorithm": "pcg"},
}


def run(tmp_path: Path, balancer: str, *args: str) -> tuple[Path, dict]:
    scen = tmp_path / "scenario.yaml"
    scen.write_text(yaml.safe_dump(SCENARIO))
    out = tmp_path / balancer
    # 2 processes host the 4 processors (results identical to one process per processor: tests/test_hosting.py)
    res = run_mpi(2, ["run", str(scen), "--set", f"balancer.algorithm={balancer}", "--out", str(out), "--no-launch",
                      "--quiet", *args], timeout=180)
    assert res.returncode == 0, res.stderr
    return out, json.loads((out / "summary.json").read_text())


def cell_rows(points: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Cells as their vertices' coordinates in NVB order, rows sorted (independent of ids)."""
    r = points[tris].reshape(-1, 6)
    return r[np.lexsort(r.T[::-1])]


@pytest.mark.parametrize("balancer", ["pcg", "gda0", "metis", "scotch"])
@pytest.mark.slow
def test_refined_run_conforming_accounted_and_equal_to_serial(tmp_path, balancer):
    pictures = balancer == "pcg"  # one run draws everything; the others only record the arrays
    out, s = run(tmp_path, balancer, "--set", f"output.vtu={str(pictures).lower()}",
                 *([] if pictures else ["--set", "output.pictures=false"]))
    phases = s["phases"]
    assert s["adaptation"] == "refine" and len(phases) == 3
    # cells: initial + bisections − merges, phase by phase; the front moves on, so coarsening happens
    assert s["cells_initial"] == 1536
    cells = s["cells_initial"]
    for ph in phases:
        cells += ph["refined"] - ph["coarsened"]
        assert ph["cells"] == cells
    assert s["cells_final"] == cells
    assert all(ph["refined"] > 0 for ph in phases) and sum(ph["coarsened"] for ph in phases) > 0
    assert phases[0]["coarsened"] == 0  # nothing to merge before the first refinement
    # weights: unit weights stay 1 (children copy, merged parents take the mean), and the totals move by
    # exactly what the bisections added and the merges removed
    assert s["weight_initial"] == 1536.0 and s["weight_final"] == float(s["cells_final"])
    assert all(ph["weight_refined"] == ph["refined"] and ph["weight_coarsened"] == -ph["coarsened"]
               for ph in phases)
    # the real kernel after refinement, coarsening and migration equals the serial replay on the whole mesh
    assert s["jacobi_max_rel_error"] <= jacobi_replay_tol(len(phases), 3, SIGMA)
    # the ranks coarsened exactly what the serial pass coarsens (split families are united first) and
    # refined exactly the cells the serial marking marks
    assert s["replay_mismatches"] == {"refine": 0, "coarsen": 0}
    assert sum(ph["united_cells"] for ph in phases) > 0
    assert s["final_imbalance"] < 1.1 and s["cells_moved"] > 0

    geo, parts = np.load(out / "geometry.npz"), np.load(out / "partitions.npz")
    tm0, _ = from_mesh(read_mesh(LSHAPE))
    area = tm0.areas.sum()
    assert np.array_equal(geo["cell_nodes"].reshape(-1, 3), tm0.tris)
    for k, ph in enumerate(phases, start=1):
        pts, tris = geo[f"points_{k:03d}"], geo[f"cell_nodes_{k:03d}"].reshape(-1, 3)
        gid, owner = parts[f"gid_{k:03d}"], parts[f"owner_{k:03d}"]
        assert tris.shape[0] == gid.size == owner.size == ph["cells"]
        assert conformity_problems(pts, tris) == [], f"phase {k}"
        assert abs(areas(pts, tris).sum() - area) <= area_tol(pts[tris]) + area_tol(tm0.points[tm0.tris])
        assert np.all(np.diff(gid) > 0) and np.array_equal(np.bincount(owner, minlength=4) > 0, [True] * 4)
        assert np.all(parts[f"weight_{k:03d}"] == 1.0)
        assert np.array_equal(geo[f"coords_{k:03d}"], pts[tris].mean(axis=1))
    # phase 1 (nothing coarsened yet) is exactly the serial refinement of the front's cells
    sc = parse_scenario(SCENARIO)
    c = tm0.centroids
    mark = region_mask(sc.adaptation.region, c, tm0.gid, 1, sc.seed, (c.min(axis=0), c.max(axis=0)))
    serial = refine(tm0, mark, edges="all").mesh
    assert np.array_equal(cell_rows(geo["points_001"], geo["cell_nodes_001"].reshape(-1, 3)),
                          cell_rows(serial.points, serial.tris))
    if pictures:
        for k in range(4):
            assert (out / f"partition-{k:03d}.png").stat().st_size > 10_000
            assert (out / "vtu" / f"phase-{k:03d}.vtu").stat().st_size > 1_000
        import meshio

        vtu = meshio.read(out / "vtu" / "phase-002.vtu")
        assert sum(len(b.data) for b in vtu.cells) == phases[1]["cells"]
        level = np.concatenate(vtu.cell_data["level"])
        assert level.max() <= MAX_LEVEL and level.max() >= 1
        assert "migrated" in vtu.cell_data and "u" in vtu.cell_data
        assert "partition.pvd" in {p.name for p in out.iterdir()}


@pytest.mark.slow
def test_refined_run_quads_thinned_region_no_coarsening(tmp_path):
    """A quad grid (each quad becomes two triangles), a thinned region, refinement-edge marking, no coarsening."""
    out, s = run(tmp_path, "gda0", "--set", "mesh.file=null", "--set", "mesh.grid=24x16",
                 "--set", "adaptation.coarsen=false", "--set", "adaptation.edges=refinement",
                 "--set", "adaptation.region={kind: disc, center: [0.5, 0.5], radius: 0.3, fraction: 0.5}",
                 "--set", "output.pictures=false")
    assert s["cells_initial"] == 2 * 24 * 16
    assert all(ph["coarsened"] == 0 for ph in s["phases"])
    assert s["cells_final"] == s["cells_initial"] + sum(ph["refined"] for ph in s["phases"]) > s["cells_initial"]
    # the thinning hashes positions, so the serial replay agrees
    assert s["jacobi_max_rel_error"] <= jacobi_replay_tol(len(s["phases"]), 3, SIGMA)


@pytest.mark.slow
def test_refined_run_marked_by_the_error_indicator(tmp_path):
    """Marking from the Jacobi solution's jumps: nothing before the first solve, then refinement where the
    jump is large and coarsening where it is small, identical to the serial marking of the replay."""
    out, s = run(tmp_path, "gda0", "--set", "mesh.file=" + str(ROOT / "meshes" / "stufe.vtu"),
                 "--set", "adaptation.region={kind: indicator, threshold: 0.7, coarsen_threshold: 0.3}",
                 "--set", "adaptation.phases=4", "--set", "application.iterations=20",
                 "--set", "output.pictures=false")
    ph = s["phases"]
    assert ph[0]["refined"] == 0 and ph[0]["adapt_time"] > 0  # u = 0 before the first solve: no jump
    assert all(p["refined"] > 0 for p in ph[1:])
    # local refinement, not everywhere: far fewer bisections than cells would need for one level
    assert s["cells_final"] < 3 * s["cells_initial"]
    assert s["replay_mismatches"] == {"refine": 0, "coarsen": 0}
    assert s["jacobi_max_rel_error"] <= jacobi_replay_tol(len(ph), 3, SIGMA)
    assert s["final_imbalance"] < 1.1


@pytest.mark.slow
def test_refinement_needs_cell_polygons(tmp_path):
    with pytest.raises(ScenarioError, match=r"^adaptation.kind: refine needs mesh.units: cells"):
        parse_scenario({**SCENARIO, "mesh": {"file": str(LSHAPE), "units": "nodes"}})
    for bad, key in (({"max_level": 0}, "adaptation.max_level"), ({"edges": "some"}, "adaptation.edges"),
                     ({"kind": "split"}, "adaptation.kind"), ({"coarsen": "maybe"}, "adaptation.coarsen")):
        with pytest.raises(ScenarioError, match=rf"^{key}:"):
            parse_scenario({**SCENARIO, "adaptation": {**SCENARIO["adaptation"], **bad}})
    graph = tmp_path / "g.graph"
    graph.write_text("4 4\n2 4\n1 3\n2 4\n1 3\n")
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump({**SCENARIO, "processors": 2, "platform": {"capacities": "homo"},
                                  "mesh": {"file": str(graph)}}))
    with pytest.raises(ScenarioError, match="is a graph without polygons"):  # found by validation, before MPI
        parse_scenario({**SCENARIO, "mesh": {"file": str(graph)}})
    res = run_mpi(2, ["run", str(scen), "--out", str(tmp_path / "o"), "--no-launch", "--quiet"], timeout=120)
    lines = [line for line in res.stderr.splitlines() if line.startswith("hermes: error:")]
    assert res.returncode != 0 and len(lines) == 1 and "is a graph without polygons" in lines[0], res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("meshes, balancers", [("grid20x19", "all"),
                                               ("grid20x19,lshape,stufe,airfoil,3elt,cylinder", "pcg")])
@pytest.mark.slow
def test_refine_matrix_every_balancer_and_every_shipped_mesh(tmp_path, meshes, balancers):
    """benchmarks/refine_all.py (the whole matrix is its default) on a slice: conforming, accounted for,
    equal to the serial replay and to its serial marking, for every balancer / every shipped mesh."""
    out = tmp_path / "matrix.csv"
    # 3 processors hosted on 2 processes (results identical to one process per processor: tests/test_hosting.py)
    res = run_mpi(2, ["--meshes", meshes, "--balancers", balancers, "--phases", "2", "--processors", "3",
                      "--out", str(out)],
                  script=ROOT / "benchmarks" / "refine_all.py", timeout=400)
    assert res.returncode == 0 and "OK:" in res.stdout, res.stderr[-2000:]
    import csv

    rows = list(csv.DictReader(out.open()))
    from hermes.balance.registry import mesh_balancers

    want = len(mesh_balancers()) if balancers == "all" else 1
    assert len(rows) == want * len(meshes.split(","))
    for r in rows:
        assert int(r["bisections"]) > 0 and float(r["jacobi_max_rel_error"]) <= jacobi_replay_tol(2, 3, SIGMA)
        assert int(r["cells_final"]) == int(r["cells_initial"]) + int(r["bisections"]) - int(r["merges"])
