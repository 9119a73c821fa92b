"""The automatic zoom, the load bars and the weight / level panel of partition pictures; hermes plot's options."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hermes.claims import write_marker
from hermes.cli import main
from hermes.errors import HermesError
from hermes.viz import plot_partition, plot_run
from hermes.viz.partition_picture import rank_colors
from hermes.viz.zoom import MIN_SHARE, auto_zoom, cell_areas, coverage, parse_zoom
from tests.viz.test_viz import DPI, NPARTS, block_owner, grid, read_png, shows_colors


def graded(n: int = 24, power: float = 3.0) -> dict[str, np.ndarray]:
    """An n × n grid on [-1, 1]² graded towards the centre (x = sign(t)|t|^power): with power 3 the central
    cells are ~10⁴ times smaller than the outer ones, like the cells around an airfoil in its far-field box."""
    t = np.linspace(-1.0, 1.0, n + 1)
    s = np.sign(t) * np.abs(t) ** power
    px, py = np.meshgrid(s, s, indexing="xy")
    points = np.column_stack([px.ravel(), py.ravel()])
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="xy")
    ll = (j * (n + 1) + i).ravel()
    cell_nodes = np.stack([ll, ll + 1, ll + n + 2, ll + n + 1], axis=1).ravel()
    cell_ptr = np.arange(0, 4 * n * n + 1, 4)
    coords = points[cell_nodes.reshape(-1, 4)].mean(axis=1)
    return dict(points=points, cell_ptr=cell_ptr, cell_nodes=cell_nodes, coords=coords)


def airfoil_like(coords: np.ndarray) -> np.ndarray:
    """5 ranks as a partitioner cuts such a mesh: rank 0 the fifth of the cells nearest the centre (the ranks
    around the profile), ranks 1–4 the quadrants of the rest (the far field)."""
    r = np.hypot(coords[:, 0], coords[:, 1])
    return np.where(r <= np.quantile(r, 0.2), 0, 1 + (coords[:, 0] > 0) + 2 * (coords[:, 1] > 0)).astype(np.int64)


@pytest.mark.parametrize("power", [3.0, 4.0])
def test_auto_zoom_makes_every_rank_legible_on_a_graded_mesh(power):
    g = graded(power=power)
    owner = airfoil_like(g["coords"])
    areas = cell_areas(g["points"], g["cell_ptr"], g["cell_nodes"])
    assert np.isclose(areas.sum(), 4.0)
    full = coverage(g["coords"], areas, owner, 5, (-1.0, 1.0, -1.0, 1.0))
    # cells as squares of their area: exact inside, an estimate for elongated cells on the border (≤ 1 % here)
    assert abs(full.sum() - 1.0) < 0.01
    assert full.min() < MIN_SHARE / 3  # unzoomed, the central rank is a speck
    box = auto_zoom(g["coords"], [owner], areas=areas)
    assert box is not None
    x0, x1, y0, y1 = box
    assert -1.05 <= x0 < x1 <= 1.05 and -1.05 <= y0 < y1 <= 1.05 and x1 - x0 < 1.6  # (half a cell of slack)
    assert coverage(g["coords"], areas, owner, 5, box).min() >= MIN_SHARE
    # the largest such window: twice as wide, some rank is no longer legible
    wider = (1.5 * x0 - 0.5 * x1, 1.5 * x1 - 0.5 * x0, 1.5 * y0 - 0.5 * y1, 1.5 * y1 - 0.5 * y0)
    assert coverage(g["coords"], areas, owner, 5, wider).min() < MIN_SHARE


def test_auto_zoom_compromises_when_no_window_shows_every_rank():
    """Ranks as rings of equal cell counts: no window shows the innermost and the outermost legibly; the
    zoom still makes the least visible rank at least twice as visible as the whole domain does."""
    g = graded(power=3.0)
    r = np.hypot(g["coords"][:, 0], g["coords"][:, 1])
    owner = (np.argsort(np.argsort(r, kind="stable")) * 6 // r.size).astype(np.int64)
    areas = cell_areas(g["points"], g["cell_ptr"], g["cell_nodes"])
    box = auto_zoom(g["coords"], [owner], areas=areas)
    least = coverage(g["coords"], areas, owner, 6, box).min()
    assert least < MIN_SHARE
    assert least > 2 * coverage(g["coords"], areas, owner, 6, (-1.0, 1.0, -1.0, 1.0)).min()


def test_no_zoom_on_a_uniform_mesh():
    geo = grid()
    owner = block_owner(geo["coords"], 0.0)
    areas = cell_areas(geo["points"], geo["cell_ptr"], geo["cell_nodes"])
    assert np.allclose(areas, 1.0)
    assert auto_zoom(geo["coords"], [owner], areas=areas) is None
    assert auto_zoom(geo["coords"], [owner]) is None  # a graph: equal areas


def test_parse_zoom():
    assert parse_zoom("auto") == "auto" and parse_zoom("none") is None and parse_zoom(None) is None
    assert parse_zoom("0,1,2,3") == (0.0, 2.0, 1.0, 3.0)
    for bad in ("1,2,3", "0,0,0,1", "a,b,c,d"):
        with pytest.raises(HermesError, match="--zoom"):
            parse_zoom(bad)


def test_zoomed_picture_with_weights_and_load_bars(tmp_path):
    g = graded()
    owner = airfoil_like(g["coords"])
    areas = cell_areas(g["points"], g["cell_ptr"], g["cell_nodes"])
    w = np.ones(owner.size)
    loads = np.bincount(owner, weights=w, minlength=5)
    box = auto_zoom(g["coords"], [owner], areas=areas)
    out = plot_partition(tmp_path / "z.png", g["coords"], owner, points=g["points"], cell_ptr=g["cell_ptr"],
                         cell_nodes=g["cell_nodes"], weights=w, show_weights=True, zoom=box, loads=loads,
                         fair=np.full(5, loads.mean()), dpi=DPI)
    # every rank's colour fills ≥ 0.5 % of the picture (zoomed cells and its load bar), not just a legend patch
    assert shows_colors(read_png(out), rank_colors(5), min_share=0.005)
    plain = plot_partition(tmp_path / "p.png", g["coords"], owner, points=g["points"], cell_ptr=g["cell_ptr"],
                           cell_nodes=g["cell_nodes"], dpi=DPI)
    assert not shows_colors(read_png(plain), rank_colors(5), min_share=0.005)  # the check can fail
    with pytest.raises(HermesError, match="loads must have shape"):
        plot_partition(tmp_path / "x.png", g["coords"], owner, loads=np.ones(3))


def test_levels_panel(tmp_path):
    geo = grid()
    owner = block_owner(geo["coords"], 0.0)
    levels = (geo["coords"][:, 0] > 3).astype(int) * 2
    out = plot_partition(tmp_path / "l.png", geo["coords"], owner, points=geo["points"], cell_ptr=geo["cell_ptr"],
                         cell_nodes=geo["cell_nodes"], levels=levels, show_weights=True, dpi=DPI)
    read_png(out)


@pytest.fixture
def run_dir(tmp_path):
    from tests.viz.test_viz import make_summary

    geo = grid()
    np.savez(tmp_path / "geometry.npz", **geo)
    parts = {}
    for k in range(3):
        parts[f"owner_{k:03d}"] = block_owner(geo["coords"], shift=0.5 * k)
        parts[f"weight_{k:03d}"] = np.full(geo["coords"].shape[0], 1.0 + k)
    np.savez(tmp_path / "partitions.npz", **parts)
    (tmp_path / "summary.json").write_text(json.dumps(make_summary()))
    rows = ["phase,rank,capacity"] + [f"{k},{r},{[0.5, 0.25, 0.25][r]}" for k in (1, 2) for r in range(NPARTS)]
    (tmp_path / "phases.csv").write_text("\n".join(rows) + "\n")
    write_marker(tmp_path, "run")  # hermes plot draws only into a run directory hermes made
    return tmp_path


@pytest.mark.slow
def test_plot_command_options(run_dir, capsys):
    assert main(["plot", str(run_dir), "--phase", "1,2", "--zoom", "none", "--show", "none", "--dpi", "60"]) == 0
    printed = capsys.readouterr().out.split()
    assert [p.rsplit("/", 1)[-1] for p in printed] == ["partition-001.png", "partition-002.png", "phases.png"]
    assert main(["plot", str(run_dir), "--phase", "0", "--zoom", "1,1,4,4", "--dpi", "60"]) == 0
    assert main(["plot", str(run_dir), "--show", "weights,colours"]) == 2
    assert "--show 'colours'" in capsys.readouterr().err
    assert main(["plot", str(run_dir), "--phase", "x"]) == 2
    assert main(["plot", str(run_dir), "--zoom", "1,2"]) == 2


def test_plot_run_fair_loads_from_phases_csv(run_dir, monkeypatch):
    seen = {}
    import hermes.viz.pictures as viz

    def spy(path, coords, owner, **kw):
        seen[path.name] = (kw["loads"], kw["fair"], kw["zoom"], kw["show_weights"])
        return path

    monkeypatch.setattr(viz, "plot_partition", spy)
    plot_run(run_dir, timeline=False)
    loads, fair, zoom, weights = seen["partition-002.png"]
    assert np.isclose(loads.sum(), 3.0 * 30) and np.allclose(fair, [45.0, 22.5, 22.5]) and zoom is None and weights
    loads0, fair0, *_ = seen["partition-000.png"]  # phase 0: the capacities of phase 1
    assert np.allclose(fair0, np.array([0.5, 0.25, 0.25]) * loads0.sum())
