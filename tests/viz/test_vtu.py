"""Tests of hermes.viz.vtu: per-phase VTU files and the .pvd time series, read back with meshio."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import meshio
import numpy as np
import pytest

from hermes.data.generators import grid
from hermes.errors import HermesError
from hermes.files import write_npz
from hermes.viz.vtu import PVD_NAME, partition_mesh, write_run_vtu

NPHASES = 3


def owners(coords: np.ndarray, phase: int) -> np.ndarray:
    """Three column blocks whose borders shift right by one column per phase."""
    return np.clip(((coords[:, 0] - 0.2 * phase) // 0.34).astype(np.int64), 0, 2)


def make_run(tmp: Path, geo: dict, n: int, *, extra: bool = True, phases: int = NPHASES, **more) -> Path:
    """A run directory: geometry + partitions of ``phases + 1`` recorded phases with owner, weight, u, level."""
    write_npz(tmp / "geometry.npz", **geo)
    parts = {}
    for k in range(phases + 1):
        parts[f"owner_{k:03d}"] = owners(geo["coords"], k).astype(np.int32)
        parts[f"weight_{k:03d}"] = 1.0 + k * np.arange(n) / n
        if extra:
            parts[f"u_{k:03d}"] = np.sin(np.arange(n) + k)
            if k >= 2:  # a field that only some phases have
                parts[f"level_{k:03d}"] = (np.arange(n) % 3).astype(np.int8)
    parts.update(more)
    write_npz(tmp / "partitions.npz", **parts)
    return tmp


def grid_geometry(nx: int = 6, ny: int = 5) -> tuple[dict, int]:
    m = grid(nx, ny)
    scale = np.array([1.0 / nx, 1.0 / ny])  # unit square, so owners() splits it in thirds
    return dict(coords=m.coords * scale, xadj=m.xadj, adjncy=m.adjncy, points=m.points * scale,
                cell_ptr=m.cell_ptr, cell_nodes=m.cell_nodes), m.n_cells


def mixed_geometry(tmp: Path) -> tuple[dict, int]:
    """A unit square: quads on the right half, each quad of the left half cut into two triangles."""
    nx, ny = 6, 4
    pts = np.stack(np.meshgrid(np.linspace(0, 1, nx + 1), np.linspace(0, 1, ny + 1), indexing="xy"), -1)
    pts = pts.reshape(-1, 2)
    tris, quads = [], []
    for j in range(ny):
        for i in range(nx):
            a, b, c, d = j * (nx + 1) + i, j * (nx + 1) + i + 1, (j + 1) * (nx + 1) + i + 1, (j + 1) * (nx + 1) + i
            if i < nx // 2:
                tris += [(a, b, c), (a, c, d)]
            else:
                quads.append((a, b, c, d))
    path = tmp / "mixed.vtu"
    meshio.write(path, meshio.Mesh(np.column_stack([pts, np.zeros(len(pts))]),
                                   [("triangle", np.array(tris)), ("quad", np.array(quads))]))
    from hermes.data.io import read_meshio

    m = read_meshio(path)
    assert m.has_polygons and set(np.diff(m.cell_ptr)) == {3, 4}
    return dict(coords=m.coords, xadj=m.xadj, adjncy=m.adjncy, points=m.points, cell_ptr=m.cell_ptr,
                cell_nodes=m.cell_nodes), m.n_cells


def read_cells(path: Path) -> tuple[meshio.Mesh, dict[str, np.ndarray]]:
    """The VTU file and its cell data in global-id order (through the ``gid`` field)."""
    mesh = meshio.read(path)
    data = {k: np.concatenate(v) for k, v in mesh.cell_data.items()}
    order = np.argsort(data["gid"])
    return mesh, {k: v[order] for k, v in data.items()}


def read_pvd(path: Path) -> list[tuple[float, str]]:
    root = ET.parse(path).getroot()
    assert root.tag == "VTKFile" and root.get("type") == "Collection"
    (coll,) = list(root)
    assert coll.tag == "Collection"
    return [(float(d.get("timestep")), d.get("file")) for d in coll.findall("DataSet")]


@pytest.mark.parametrize("kind", ["quads", "mixed"])
def test_round_trip(tmp_path, kind):
    geo, n = grid_geometry() if kind == "quads" else mixed_geometry(tmp_path)
    run = make_run(tmp_path, geo, n)
    written = write_run_vtu(run)
    assert [p.name for p in written] == [f"phase-{k:03d}.vtu" for k in range(NPHASES + 1)] + [PVD_NAME]
    assert read_pvd(run / PVD_NAME) == [(float(k), f"vtu/phase-{k:03d}.vtu") for k in range(NPHASES + 1)]
    assert sorted(p.name for p in (run / "vtu").iterdir()) == [p.name for p in written[:-1]]  # no temp files
    sizes = np.diff(geo["cell_ptr"])
    with np.load(run / "partitions.npz") as z:
        parts = {k: z[k] for k in z.files}
    for k in range(NPHASES + 1):
        mesh, data = read_cells(run / "vtu" / f"phase-{k:03d}.vtu")
        counts = {b.type: len(b) for b in mesh.cells}
        assert counts == ({"quad": n} if kind == "quads" else
                          {"triangle": int((sizes == 3).sum()), "quad": int((sizes == 4).sum())})
        assert np.array_equal(data["gid"], np.arange(n))
        # each VTU cell is the unit's polygon
        nodes = np.concatenate([b.data.ravel() for b in mesh.cells])
        ptr = np.concatenate([[0], np.cumsum([b.data.shape[1] for b in mesh.cells for _ in b.data])])
        gid_vtu = np.concatenate(mesh.cell_data["gid"])
        for c in (0, n // 2, n - 1):
            pos = int(np.flatnonzero(gid_vtu == c)[0])
            assert np.array_equal(nodes[ptr[pos]:ptr[pos + 1]], geo["cell_nodes"][geo["cell_ptr"][c]:
                                                                                   geo["cell_ptr"][c + 1]])
        assert np.allclose(mesh.points[:, :2], geo["points"]) and np.all(mesh.points[:, 2] == 0)
        owner = parts[f"owner_{k:03d}"]
        assert np.array_equal(data["owner"], owner)
        assert np.array_equal(data["weight"], parts[f"weight_{k:03d}"])
        assert np.array_equal(data["u"], parts[f"u_{k:03d}"])
        expected = np.zeros(n, bool) if k == 0 else owner != parts[f"owner_{k - 1:03d}"]
        assert np.array_equal(data["migrated"], expected.astype(np.uint8))
        assert k == 0 or expected.any()  # the owners do shift: the flag is not trivially zero
        assert ("level" in data) == (k >= 2)
        if k >= 2:
            assert np.array_equal(data["level"], np.arange(n) % 3)


def test_pure_graph(tmp_path):
    geo, n = grid_geometry(5, 4)
    graph = {k: geo[k] for k in ("coords", "xadj", "adjncy")}
    run = make_run(tmp_path, graph, n)
    write_run_vtu(run)
    for k in range(NPHASES + 1):
        mesh = meshio.read(run / "vtu" / f"phase-{k:03d}.vtu")
        blocks = {b.type: b.data for b in mesh.cells}
        assert np.array_equal(blocks["vertex"].ravel(), np.arange(n))
        assert len(blocks["line"]) == geo["adjncy"].size // 2
        assert np.allclose(mesh.points[:, :2], geo["coords"])
        with np.load(run / "partitions.npz") as z:
            owner, prev = z[f"owner_{k:03d}"], z[f"owner_{max(k - 1, 0):03d}"]
        assert np.array_equal(mesh.point_data["owner"], owner)
        assert np.array_equal(mesh.point_data["migrated"], (owner != prev).astype(np.uint8))
        assert not mesh.cell_data
    write_run_vtu(run, graph_edges=False)
    assert [b.type for b in meshio.read(run / "vtu" / "phase-001.vtu").cells] == ["vertex"]


def test_general_polygons_and_vector_fields(tmp_path):
    """Triangle, quad, two pentagons and a hexagon: one polygon block per node count."""
    pts = np.random.default_rng(0).uniform(size=(12, 2))
    sizes = np.array([5, 3, 6, 4, 5])
    cell_ptr = np.concatenate([[0], np.cumsum(sizes)])
    cell_nodes = np.arange(cell_ptr[-1]) % 12
    fields = {"owner": np.array([0, 1, 0, 1, 1]), "vel": np.arange(10.0).reshape(5, 2),
              "flag": np.array([True, False, True, False, False])}
    m = partition_mesh(np.zeros((5, 2)), fields, points=pts, cell_ptr=cell_ptr, cell_nodes=cell_nodes)
    path = tmp_path / "poly.vtu"
    meshio.write(path, m)
    back = meshio.read(path)
    assert [(b.type, len(b), b.data.shape[1]) for b in back.cells] == [
        ("triangle", 1, 3), ("quad", 1, 4), ("polygon", 2, 5), ("polygon", 1, 6)]
    assert np.array_equal(np.concatenate(back.cell_data["owner"]), [1, 1, 0, 1, 0])
    assert np.array_equal(np.concatenate(back.cell_data["vel"]), fields["vel"][[1, 3, 0, 4, 2]])
    assert np.concatenate(back.cell_data["flag"]).dtype == np.uint8
    assert np.array_equal(back.cells[3].data[0], cell_nodes[cell_ptr[2]:cell_ptr[3]])


def test_refined_phase_has_its_own_geometry(tmp_path):
    """Phase 2 splits cell 0 of a 3 × 2 grid into two triangles: no computed migrated flag unless recorded."""
    m = grid(3, 2)
    geo = dict(coords=m.coords, xadj=m.xadj, adjncy=m.adjncy, points=m.points, cell_ptr=m.cell_ptr,
               cell_nodes=m.cell_nodes)
    a, b, c, d = m.cell_nodes[:4]
    geo["cell_ptr_002"] = np.concatenate([[0, 3, 6], 6 + m.cell_ptr[2:] - m.cell_ptr[1]])
    geo["cell_nodes_002"] = np.concatenate([[a, b, c, a, c, d], m.cell_nodes[4:]])
    geo["coords_002"] = np.concatenate([[[0.6, 0.3], [0.3, 0.6]], m.coords[1:]])
    write_npz(tmp_path / "geometry.npz", **geo)
    parts = {"owner_000": np.zeros(6, np.int32), "owner_001": np.array([0, 0, 1, 0, 1, 1]),
             "owner_002": np.array([0, 0, 1, 1, 0, 0, 1]), "level_002": np.array([1, 1, 0, 0, 0, 0, 0])}
    write_npz(tmp_path / "partitions.npz", **parts)
    write_run_vtu(tmp_path)
    m1, d1 = read_cells(tmp_path / "vtu" / "phase-001.vtu")
    m2, d2 = read_cells(tmp_path / "vtu" / "phase-002.vtu")
    assert np.array_equal(d1["migrated"], [0, 0, 1, 0, 1, 1])
    assert {bl.type: len(bl) for bl in m2.cells} == {"triangle": 2, "quad": 5}
    assert "migrated" not in d2 and np.array_equal(d2["level"], parts["level_002"])
    # persistent ids (any unique labels): cell 0 (gid 0) became children 6 and 7, the others kept theirs
    parts.update(gid_001=np.array([0, 5, 4, 3, 2, 1]), gid_002=np.array([6, 7, 1, 2, 3, 4, 5]))
    write_npz(tmp_path / "partitions.npz", **parts)
    write_run_vtu(tmp_path)
    _, d2 = read_cells(tmp_path / "vtu" / "phase-002.vtu")  # in gid order 1..7
    assert np.array_equal(d2["gid"], np.arange(1, 8))
    assert np.array_equal(d2["migrated"], [0, 0, 0, 1, 1, 0, 0])  # gids 4 and 5 changed owner; 6, 7 are new
    parts["migrated_002"] = np.array([0, 0, 0, 0, 1, 0, 0], np.uint8)  # a recorded flag wins
    write_npz(tmp_path / "partitions.npz", **parts)
    write_run_vtu(tmp_path)
    assert np.array_equal(read_cells(tmp_path / "vtu" / "phase-002.vtu")[1]["migrated"], [0, 0, 1, 0, 0, 0, 0])
    parts.update(gid_002=np.array([6, 6, 1, 2, 3, 4, 5]))
    parts.pop("migrated_002")
    write_npz(tmp_path / "partitions.npz", **parts)
    with pytest.raises(HermesError, match="not unique ids"):
        write_run_vtu(tmp_path)


def test_bad_inputs_write_nothing(tmp_path):
    geo, n = grid_geometry()
    with pytest.raises(HermesError, match="missing geometry.npz"):
        write_run_vtu(tmp_path)
    run = make_run(tmp_path, geo, n, u_002=np.zeros(n - 1))
    with pytest.raises(HermesError, match=r"u_002 has shape \(29,\) for 30 units"):
        write_run_vtu(run)
    assert not (run / "vtu").exists() and not (run / PVD_NAME).exists()
    write_npz(run / "partitions.npz", weight_000=np.ones(n))
    with pytest.raises(HermesError, match="no owner_XXX arrays"):
        write_run_vtu(run)
    with pytest.raises(HermesError, match="run directory not found"):
        write_run_vtu(tmp_path / "nowhere")
