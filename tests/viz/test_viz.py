"""Tests of hermes.viz on a small hand-made run directory (6x5 quad grid, 3 ranks, 3 phases)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hermes.claims import write_marker
from hermes.errors import HermesError
from hermes.viz import plot_comparison, plot_partition, plot_phases, plot_run
from hermes.viz.partition_picture import cell_polygons, graph_segments, partition_boundaries, rank_colors

NX, NY, NPARTS, NPHASES = 6, 5, 3, 3
DPI = 72  # small pictures keep the tests fast
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def grid(nx: int = NX, ny: int = NY) -> dict[str, np.ndarray]:
    """Geometry of an nx × ny grid of unit squares: nodes, quads (CSR), centroids and dual graph."""
    points = np.stack(np.meshgrid(np.arange(nx + 1.0), np.arange(ny + 1.0), indexing="xy"), -1).reshape(-1, 2)
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="xy")
    i, j = i.ravel(), j.ravel()  # cell c = j * nx + i
    ll = j * (nx + 1) + i
    cell_nodes = np.stack([ll, ll + 1, ll + nx + 2, ll + nx + 1], axis=1).ravel()
    n = nx * ny
    cell_ptr = np.arange(0, 4 * n + 1, 4)
    coords = np.column_stack([i + 0.5, j + 0.5])
    c = np.arange(n)
    right, up = c[i < nx - 1], c[j < ny - 1]
    edges = np.concatenate([np.stack([right, right + 1], 1), np.stack([up, up + nx], 1)])
    both = np.concatenate([edges, edges[:, ::-1]])
    both = both[np.lexsort((both[:, 1], both[:, 0]))]
    xadj = np.concatenate([[0], np.cumsum(np.bincount(both[:, 0], minlength=n))])
    return dict(coords=coords, xadj=xadj, adjncy=both[:, 1], points=points, cell_ptr=cell_ptr, cell_nodes=cell_nodes)


def block_owner(coords: np.ndarray, shift: float) -> np.ndarray:
    """Column blocks of width 2 shifted by ``shift`` (3 ranks)."""
    return np.clip(((coords[:, 0] + shift) // 2).astype(np.int64), 0, NPARTS - 1)


def make_summary() -> dict:
    phases = [
        dict(
            phase=k,
            time=1.0 + 0.1 * k,
            compute_time=0.8,
            comm_time=0.1,
            sync_time=0.05 * k,
            balance_time=0.02,
            migrate_time=0.03,
            imbalance_before=[8.0, 1.6, 1.3][k - 1],
            imbalance_after=[1.2, 1.05, 1.02][k - 1],
            cells_moved=4 * k,
            cell_sends=5 * k,
            migrated_cells=5 * k,
            migrated_weight=5.0 * k,
            edge_cut=10 - k,
            balance_iterations=3,
            quality=dict(migration_cells=4 * k),
        )
        for k in range(1, NPHASES + 1)
    ]
    return dict(
        scenario="grid-6x5",
        processors=NPARTS,
        balancer="gda0",
        clock="virtual",
        total_time=sum(p["time"] for p in phases),
        final_imbalance=1.02,
        phases=phases,
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    geo = grid()
    np.savez(tmp_path / "geometry.npz", **geo)
    parts = {}
    rng = np.random.default_rng(0)
    for k in range(NPHASES + 1):
        parts[f"owner_{k:03d}"] = block_owner(geo["coords"], shift=0.5 * k)
        parts[f"weight_{k:03d}"] = rng.uniform(1.0, 10.0, NX * NY)
    np.savez(tmp_path / "partitions.npz", **parts)
    (tmp_path / "summary.json").write_text(json.dumps(make_summary()))
    write_marker(tmp_path, "run")  # a run directory hermes made: plot_run draws into it
    return tmp_path


def read_png(path: Path) -> np.ndarray:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_MAGIC
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100 and img.shape[2] in (3, 4)
    return img


def shows_colors(img: np.ndarray, colors: np.ndarray, min_share: float = 0.01) -> bool:
    """Every colour of ``colors`` fills at least ``min_share`` of the image (8-bit exact; more than a legend)."""
    rgb = np.round(img[..., :3] * 255).astype(np.int64).reshape(-1, 3)
    codes, npix = np.unique((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2], return_counts=True)
    present = np.stack([codes >> 16, (codes >> 8) & 255, codes & 255], axis=1)
    want = np.round(colors[:, :3] * 255).astype(np.int64)
    counts = [npix[np.abs(present - c).max(axis=1) <= 1].sum() for c in want]
    return min(counts) >= min_share * rgb.shape[0]


def no_tmp_files(directory: Path) -> bool:
    return not list(directory.glob("*.tmp"))


def test_rank_colors_distinct_and_prefix_stable():
    c32 = rank_colors(32)
    assert c32.shape == (32, 4)
    assert np.allclose(rank_colors(7), c32[:7])
    rgb = np.round(c32[:, :3] * 255)
    assert len(np.unique(rgb, axis=0)) == 32
    assert np.all(np.abs(np.diff(rgb, axis=0)).max(axis=1) > 30)  # consecutive ranks clearly apart


def test_geometry_helpers():
    geo = grid()
    polys = cell_polygons(geo["points"], geo["cell_ptr"], geo["cell_nodes"])
    assert polys.shape == (NX * NY, 4, 2)
    assert np.allclose(polys.mean(axis=1), geo["coords"])
    owner = block_owner(geo["coords"], 0.0)  # cuts at x = 2 and x = 4, each NY sides long
    seg = partition_boundaries(geo["points"], geo["cell_ptr"], geo["cell_nodes"], owner)
    assert seg.shape == (2 * NY, 2, 2)
    assert set(np.unique(seg[:, :, 0])) == {2.0, 4.0}
    assert graph_segments(geo["coords"], geo["xadj"], geo["adjncy"]).shape == (geo["adjncy"].size // 2, 2, 2)
    # mixed polygon sizes: the list path
    ptr = np.array([0, 3, 7])
    pts = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [2, 1], [2, 0.0]])
    polys = cell_polygons(pts, ptr, np.array([0, 1, 2, 1, 5, 4, 3]))
    assert [p.shape for p in polys] == [(3, 2), (4, 2)]


@pytest.mark.slow
def test_plot_run_writes_valid_pictures(run_dir: Path):
    written = plot_run(run_dir, dpi=DPI)
    names = [p.name for p in written]
    assert names == [f"partition-{k:03d}.png" for k in range(NPHASES + 1)] + ["phases.png"]
    owners = np.load(run_dir / "partitions.npz")
    for p in written:
        assert p.parent == run_dir and p.is_file()
        img = read_png(p)
        if p.name.startswith("partition-"):  # the colour of every rank present fills its cells
            present = np.unique(owners[f"owner_{p.stem[-3:]}"])
            assert shows_colors(img, rank_colors(NPARTS)[present])
    assert no_tmp_files(run_dir)


def test_plot_run_selected_phases_and_weights(run_dir: Path):
    written = plot_run(run_dir, phases=[2], show=("weights",), dpi=DPI)
    assert [p.name for p in written] == ["partition-002.png", "phases.png"]
    assert not (run_dir / "partition-000.png").exists()
    with pytest.raises(HermesError, match="phase 9 not recorded"):
        plot_run(run_dir, phases=[9])


@pytest.mark.parametrize("show_weights", [False, True])
def test_pure_graph_mode(tmp_path: Path, show_weights: bool):
    geo = grid()
    owner = block_owner(geo["coords"], 0.0)  # 10 vertices per rank
    out = plot_partition(
        tmp_path / "graph.png",
        np.column_stack([geo["coords"], np.zeros(NX * NY)]),  # 3-D coordinates are projected
        owner,
        xadj=geo["xadj"],
        adjncy=geo["adjncy"],
        weights=np.arange(1.0, NX * NY + 1),
        title="pure graph",
        show_weights=show_weights,
        dpi=DPI,
    )
    assert out == tmp_path / "graph.png"
    # 10 markers of a rank cover > 0.1 % of the picture, its legend patch < 0.02 % (half with two panels)
    assert shows_colors(read_png(out), rank_colors(NPARTS), min_share=0.0005 if show_weights else 0.001)
    assert no_tmp_files(tmp_path)


def test_plot_run_graph_geometry(run_dir: Path):
    geo = grid()
    np.savez(run_dir / "geometry.npz", coords=geo["coords"], xadj=geo["xadj"], adjncy=geo["adjncy"])
    written = plot_run(run_dir, phases=[0], dpi=DPI)  # phase 0: 10 vertices per rank
    assert shows_colors(read_png(written[0]), rank_colors(NPARTS), min_share=0.001)


def test_many_parts_use_colorbar(tmp_path: Path):
    geo = grid(12, 10)
    owner = np.arange(120) % 24
    out = plot_partition(
        tmp_path / "p.png", geo["coords"], owner, points=geo["points"], cell_ptr=geo["cell_ptr"],
        cell_nodes=geo["cell_nodes"], dpi=DPI,
    )
    assert shows_colors(read_png(out), rank_colors(24), min_share=0.002)


def test_plot_partition_rejects_bad_owner(tmp_path: Path):
    geo = grid()
    with pytest.raises(HermesError, match="owner"):
        plot_partition(tmp_path / "x.png", geo["coords"], np.zeros(3, dtype=int))
    with pytest.raises(HermesError, match="nparts"):
        plot_partition(tmp_path / "x.png", geo["coords"], block_owner(geo["coords"], 0.0), nparts=2)
    assert not list(tmp_path.iterdir())


def test_plot_phases_and_comparison(tmp_path: Path):
    s = make_summary()
    read_png(plot_phases(tmp_path / "phases.png", s, dpi=DPI))
    read_png(plot_phases(tmp_path / "empty.png", {**s, "phases": []}, dpi=DPI))
    other = {**s, "balancer": "pcg", "total_time": 2.5, "final_imbalance": 1.1}
    read_png(plot_comparison(tmp_path / "compare.png", [s, other, {**other, "processors": 4}], dpi=DPI))
    assert no_tmp_files(tmp_path)


def test_plot_run_errors(run_dir: Path, tmp_path: Path):
    with pytest.raises(HermesError, match="run directory not found"):
        plot_run(tmp_path / "nope")
    (tmp_path / "foreign").mkdir()
    with pytest.raises(HermesError, match="foreign: not a run directory hermes made"):
        plot_run(tmp_path / "foreign")
    (run_dir / "geometry.npz").write_bytes(b"not an npz")
    with pytest.raises(HermesError, match="cannot read .*geometry.npz") as err:
        plot_run(run_dir)
    assert "\n" not in str(err.value)
    (run_dir / "summary.json").unlink()
    with pytest.raises(HermesError, match="missing summary.json"):
        plot_run(run_dir)
    assert not list(run_dir.glob("*.png")) and no_tmp_files(run_dir)


def test_partition_titles_name_the_cells_moved_and_the_sends():
    """A partition picture's title: the distinct cells that changed owner and the cell sends, read from a summary
    of either age (before cells_moved and cell_sends: their aliases)."""
    from hermes.viz.pictures import _partition_title

    s = make_summary()
    new = s["phases"][0]
    assert _partition_title(s, 1, new).endswith("after phase 1: imbalance 1.200, edge cut 9, moved 4 cells (5 sends)")
    old = {"phase": 1, "migrated_cells": 5, "quality": {"migration_cells": 4}}
    assert _partition_title(s, 1, old).endswith("after phase 1: moved 4 cells (5 sends)")
    assert _partition_title(s, 1, {"phase": 1, "migrated_cells": 5}).endswith("after phase 1: 5 cell sends")
    assert _partition_title(s, 1, {"phase": 1, "quality": [4]}).endswith("after phase 1")


@pytest.mark.slow
def test_import_does_not_load_matplotlib():
    code = "import sys, hermes.viz; assert 'matplotlib' not in sys.modules"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=env)


def test_the_timeline_draws_every_further_weight_under_constraint_all(tmp_path):
    """mesh.constraint: all: each phase's imbalance_per_constraint adds one line per further weight; a damaged
    entry (not a list, or lists of different lengths) adds none and still draws."""
    from PIL import Image

    from hermes.viz import plot_phases

    base = make_summary()
    with_weights = json.loads(json.dumps(base))
    for ph in with_weights["phases"]:
        ph["imbalance_per_constraint"] = [ph["imbalance_after"], 1.5, 1.25]
    damaged = json.loads(json.dumps(base))
    for k, ph in enumerate(damaged["phases"]):
        ph["imbalance_per_constraint"] = [1.0, 2.0] if k else "1.5"
    a = np.asarray(Image.open(plot_phases(tmp_path / "a.png", base, dpi=50)).convert("L"), dtype=float)
    b = np.asarray(Image.open(plot_phases(tmp_path / "b.png", with_weights, dpi=50)).convert("L"), dtype=float)
    c = np.asarray(Image.open(plot_phases(tmp_path / "c.png", damaged, dpi=50)).convert("L"), dtype=float)
    assert a.shape == b.shape == c.shape
    assert np.abs(a - b).sum() > 1000  # two more lines and their legend entries
    np.testing.assert_array_equal(a, c)
