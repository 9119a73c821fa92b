"""3-D (volume) meshes: their cells reach geometry.npz, their VTU files are 3-D, their pictures are drawn in 3-D
with every rank visible; pictures are drawn with progress lines, in-process or in worker processes alike."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import meshio
import numpy as np
import pytest
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.data.io import read_meshio
from hermes.lifecycle import driver
from hermes.outputs import RUN_OUTPUTS
from hermes.scenario import load_scenario
from hermes.viz import partition_picture as partition, plot_run
from hermes.viz.partition_picture import rank_colors
from hermes.viz.solid import solid_faces

ROOT = Path(__file__).resolve().parents[2]


def hex_mesh(path: Path, n: int = 4) -> Path:
    """An n × n × n hexahedron mesh of the unit cube (VTK corner order)."""
    g = np.linspace(0.0, 1.0, n + 1)
    x, y, z = np.meshgrid(g, g, g, indexing="ij")
    pts = np.column_stack([x.ravel(), y.ravel(), z.ravel()])
    i, j, k = (a.ravel() for a in np.meshgrid(*[np.arange(n)] * 3, indexing="ij"))

    def idx(a, b, c):
        return (a * (n + 1) + b) * (n + 1) + c

    hexes = np.column_stack([idx(i, j, k), idx(i + 1, j, k), idx(i + 1, j + 1, k), idx(i, j + 1, k),
                             idx(i, j, k + 1), idx(i + 1, j, k + 1), idx(i + 1, j + 1, k + 1), idx(i, j + 1, k + 1)])
    meshio.write(path, meshio.Mesh(pts, [("hexahedron", hexes)]))
    return path


def test_a_volume_mesh_keeps_its_3d_cells(tmp_path):
    mesh = read_meshio(hex_mesh(tmp_path / "cube.vtu", 3))
    assert mesh.solid is not None and not mesh.has_polygons
    assert mesh.solid.points.shape == (64, 3)
    assert np.all(mesh.solid.cell_types == 12) and np.all(np.diff(mesh.solid.cell_ptr) == 8)


def test_solid_faces_close_every_part():
    # two hexes side by side, one per rank: 2 × 5 outer faces, and the shared face once for each side
    pts_ptr = np.array([0, 8, 16])
    nodes = np.array([0, 1, 2, 3, 4, 5, 6, 7, 1, 8, 9, 2, 5, 10, 11, 6])
    face, cell, outer = solid_faces(pts_ptr, nodes, np.array([12, 12]), np.array([0, 1]))
    assert face.shape == (12, 4) and outer.sum() == 10 and np.bincount(cell).tolist() == [6, 6]
    # one rank: the shared face is interior and dropped
    face, cell, outer = solid_faces(pts_ptr, nodes, np.array([12, 12]), np.array([0, 0]))
    assert face.shape == (10, 4) and outer.all()


@pytest.fixture(scope="module")
def hex_run(tmp_path_factory):
    """A finished 8-processor run on a 4 × 4 × 4 hex mesh (``hermes run``, its processors on one process), its
    pictures drawn."""
    tmp = tmp_path_factory.mktemp("hex")
    mesh = hex_mesh(tmp / "cube.vtu", 4)
    out = tmp / "run"
    done = subprocess.run([sys.executable, "-m", "hermes", "run", str(ROOT / "scenarios" / "lshape.yaml"),
                           "--out", str(out), "--set", f"mesh.file={mesh}", "--set", "processors=8",
                           "--set", "platform.capacities=homo", "--set", "adaptation.phases=2",
                           "--set", "output.vtu=true", "--processes", "1"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return out, done.stdout.splitlines()


def test_a_hex_run_records_and_writes_3d_cells(hex_run):
    out, _ = hex_run
    with np.load(out / "geometry.npz") as geo:
        assert geo["points"].shape == (125, 3) and np.all(geo["cell_types"] == 12)
    vtu = meshio.read(out / "vtu" / "phase-001.vtu")
    assert [(c.type, len(c.data)) for c in vtu.cells] == [("hexahedron", 64)]
    assert np.ptp(vtu.points[:, 2]) == 1.0  # z kept
    assert sorted(np.unique(vtu.cell_data["owner"][0])) == list(range(8))


def test_a_hex_run_is_drawn_in_3d_with_every_rank(hex_run, monkeypatch, tmp_path):
    out, lines = hex_run
    assert any(line.startswith("drawn partition-001.png") for line in lines)  # progress while drawing
    figures = []

    def keep(fig, path):
        figures.append(fig)
        return Path(path)

    monkeypatch.setattr(partition, "save_figure", keep)
    plot_run(out, phases=[1], out_dir=tmp_path, timeline=False)
    (fig,) = figures
    three_d = [ax for ax in fig.axes if ax.name == "3d"]
    # the outer surface and the ranks pulled apart, and (--show weights, a default) the surface by weight
    assert sorted(ax.get_label() for ax in three_d) == ["O", "S", "W"]
    colors = rank_colors(8)
    for ax in (a for a in three_d if a.get_label() != "W"):
        (coll,) = ax.collections
        # shading scales a face's RGB: its direction is the rank's colour; every rank is on the picture
        rgb = coll.get_facecolor()[:, :3]
        rgb = rgb / np.linalg.norm(rgb, axis=1, keepdims=True)
        ranks = colors[:, :3] / np.linalg.norm(colors[:, :3], axis=1, keepdims=True)
        nearest = np.argmax(rgb @ ranks.T, axis=1)
        assert np.allclose(rgb, ranks[nearest], atol=1e-6)
        assert sorted(set(nearest.tolist())) == list(range(8))
    legend = next(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)
    assert [t.get_text() for t in legend.get_texts()] == [str(r) for r in range(8)]


def test_quiet_runs_draw_without_lines():
    sc = load_scenario(ROOT / "scenarios" / "lshape.yaml", overrides=["adaptation.phases=1", "processors=1",
                                                                      "platform.capacities=homo"])
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        driver.run(sc, plain(MPI.COMM_SELF), out_dir=Path(tmp) / "q", quiet=True, progress=lines.append,
                   outputs=RUN_OUTPUTS)
        assert (Path(tmp) / "q" / "partition-001.png").is_file()
    assert lines == []
    with tempfile.TemporaryDirectory() as tmp:
        driver.run(sc, plain(MPI.COMM_SELF), out_dir=Path(tmp) / "q", progress=lines.append, outputs=RUN_OUTPUTS)
    assert sorted(s.split()[1] for s in lines if s.startswith("drawn ")) == ["partition-000.png",
                                                                              "partition-001.png", "phases.png"]


def test_workers_draw_the_same_pictures(hex_run, tmp_path):
    out, _ = hex_run
    seen: list[str] = []
    one = plot_run(out, out_dir=tmp_path / "one", timeline=False)
    two = plot_run(out, out_dir=tmp_path / "two", timeline=False, workers=2, progress=seen.append)
    assert [p.name for p in one] == [p.name for p in two] == ["partition-000.png", "partition-001.png",
                                                              "partition-002.png"]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(one, two))
    assert sorted(s.split()[1] for s in seen) == [p.name for p in one]


def test_a_failing_worker_is_one_line(tmp_path):
    from hermes.errors import HermesError
    from hermes.viz.parallel import draw_in_workers

    with pytest.raises(HermesError, match=r"^drawing the pictures failed: hermes: error: run directory not found"):
        draw_in_workers(tmp_path / "gone", tmp_path, [(0, None), (1, None)], show=[], dpi=50, workers=2)


def test_workers_only_on_idle_cores(monkeypatch):
    from hermes.viz import parallel

    assert 0.0 <= parallel.idle_cores(0.05) <= (os.cpu_count() or 1) + 1e-9
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(parallel, "idle_cores", lambda: 0.3)  # a machine busy with other jobs
    assert parallel.default_workers(7) == 1
    monkeypatch.setattr(parallel, "idle_cores", lambda: 5.8)
    assert parallel.default_workers(7) == 6 and parallel.default_workers(1) == 1
    monkeypatch.setattr(parallel, "idle_cores", lambda: None)  # no /proc/stat
    assert parallel.default_workers(7) == 7


@pytest.mark.parametrize("bad", [np.full(64, 10, dtype=np.uint8), np.full(63, 12, dtype=np.uint8),
                                 np.full(64, 12.0)])
def test_damaged_cell_types_are_one_error(hex_run, tmp_path, bad):
    import shutil

    from hermes.errors import HermesError
    from hermes.files import write_npz
    from hermes.viz.vtu import write_run_vtu

    out, _ = hex_run
    run = tmp_path / "run"
    shutil.copytree(out, run)
    with np.load(run / "geometry.npz") as geo:
        arrays = {k: geo[k] for k in geo.files}
    arrays["cell_types"] = bad
    write_npz(run / "geometry.npz", **arrays)
    for draw in (lambda: plot_run(run, out_dir=tmp_path / "p"), lambda: write_run_vtu(run)):
        with pytest.raises(HermesError, match="cell_types"):
            draw()


@pytest.mark.parametrize("show", [["weights"], ["loads"]])
def test_show_weights_on_a_3d_mesh_draws_the_surface_by_weight(hex_run, monkeypatch, tmp_path, show):
    out, _ = hex_run
    figures = []
    monkeypatch.setattr(partition, "save_figure", lambda fig, path: (figures.append(fig), Path(path))[1])
    plot_run(out, phases=[1], out_dir=tmp_path, timeline=False, show=show)
    (fig,) = figures
    weights = [ax for ax in fig.axes if ax.get_label() == "W"]
    assert len(weights) == (show == ["weights"])
    if weights:
        (ax,) = weights
        assert ax.name == "3d" and ax.get_title() == "unit weight"
        from hermes.viz.panels import weight_colors

        with np.load(out / "partitions.npz") as parts, np.load(out / "geometry.npz") as geo:
            w = parts["weight_001"]
            _, cell, outer = solid_faces(geo["cell_ptr"], geo["cell_nodes"], geo["cell_types"], np.zeros(64, int))
        # each outer face in its cell's weight colour (shaded: its RGB is that colour scaled; drawn in depth
        # order): as many faces of each weight's colour as the outer faces of the cells of that weight
        norm, cmap, values, _ = weight_colors(w, None)
        palette = np.unique(cmap(norm(values))[:, :3], axis=0)
        want = cmap(norm(values))[cell[outer], :3]
        rgb = ax.collections[0].get_facecolor()[:, :3]
        assert rgb.shape == want.shape == (6 * 4 * 4, 3) and len(palette) == len(np.unique(w)) == 2
        unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
        drawn = np.argmax(unit(rgb) @ unit(palette).T, axis=1)
        assert np.allclose(unit(rgb), unit(palette)[drawn], atol=1e-6)
        assert np.bincount(drawn, minlength=2).tolist() == \
            np.bincount(np.argmax(unit(want) @ unit(palette).T, axis=1), minlength=2).tolist()
        assert len([a for a in fig.axes if a.get_ylabel() == "unit weight"]) == 1


def test_a_3d_mesh_refinement_levels_colour_its_weights_panel(hex_run, tmp_path):
    """A run that records levels shows them on a 3-D mesh too (the panel's title and colour bar say so)."""
    from hermes.viz.partition_picture import check_units, draw_volume, picture_options

    out, _ = hex_run
    with np.load(out / "geometry.npz") as geo, np.load(out / "partitions.npz") as parts:
        units = check_units(geo["coords"], parts["owner_001"], points=geo["points"], cell_ptr=geo["cell_ptr"],
                            cell_nodes=geo["cell_nodes"], cell_types=geo["cell_types"],
                            weights=parts["weight_001"], levels=np.arange(64) % 3, show_weights=True)
    fig = draw_volume(units, picture_options(show_weights=True, dpi=30))
    (ax,) = [a for a in fig.axes if a.get_label() == "W"]
    assert ax.get_title() == "refinement level"
    (bar,) = [a for a in fig.axes if a.get_ylabel() == "refinement level"]
    assert list(bar.get_yticks()) == [0, 1, 2]


def test_zoom_on_a_3d_mesh_is_one_warning_on_stderr(hex_run, tmp_path):
    from hermes.interpreter import child_env, python_command
    from hermes.viz.partition_picture import ZOOM_3D

    out, _ = hex_run
    done = subprocess.run(python_command("-m", "hermes", "plot", str(out), "--zoom", "0,0,0.5,0.5", "--phase", "0,1",
                                         "--out", str(tmp_path / "p")),
                          capture_output=True, text=True, timeout=300, env=child_env(path=[ROOT]))
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "--zoom" in line] == [ZOOM_3D]
    assert sorted(p.name for p in (tmp_path / "p").glob("*.png")) == ["partition-000.png", "partition-001.png",
                                                                        "phases.png"]
