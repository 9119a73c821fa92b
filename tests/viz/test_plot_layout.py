"""hermes plot's pictures: where they go (--out), --zoom with negative corners, the rank key and the overview
in panels of their own, the time stacks of phases.png within their axis, the Pareto plot of compare, and
graphs without polygons zoomed like meshes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hermes.viz.partition_picture as partition
import hermes.viz.timeline as timeline
from hermes.claims import write_marker
from hermes.cli import main
from hermes.viz import plot_partition, plot_run
from hermes.viz.compare_plots import BALANCE_TOL, imbalance_reduction, plot_pareto
from hermes.viz.partition_picture import rank_colors
from hermes.viz.zoom import auto_zoom, cell_areas, point_areas
from tests.viz.test_viz import DPI, block_owner, grid, make_summary, read_png, shows_colors
from tests.viz.test_zoom import airfoil_like, graded


@pytest.fixture
def figures(monkeypatch):
    """The figures the pictures are rendered from (to measure their artists' extents)."""
    caught = []
    save = partition.save_figure

    def keep(fig, path):
        caught.append(fig)
        return save(fig, path)

    monkeypatch.setattr(partition, "save_figure", keep)
    monkeypatch.setattr(timeline, "save_figure", keep)
    return caught


def rcb_owner(coords: np.ndarray, k: int) -> np.ndarray:
    """k parts of equal counts by recursive coordinate bisection (small parts where the mesh is fine)."""
    out = np.zeros(len(coords), dtype=np.int64)

    def split(ids, lo, n):
        if n == 1:
            out[ids] = lo
            return
        c = coords[ids]
        o = ids[np.argsort(c[:, int(np.ptp(c[:, 0]) < np.ptp(c[:, 1]))], kind="stable")]
        cut = len(o) * (n // 2) // n
        split(o[:cut], lo, n // 2)
        split(o[cut:], lo + n // 2, n - n // 2)

    split(np.arange(len(coords)), 0, k)
    return out


def _run(tmp_path, geo, owners, name="run"):
    d = tmp_path / name
    d.mkdir()
    np.savez(d / "geometry.npz", **geo)
    np.savez(d / "partitions.npz", **{f"owner_{k:03d}": o for k, o in enumerate(owners)})
    s = make_summary()
    s["processors"] = int(max(o.max() for o in owners)) + 1
    (d / "summary.json").write_text(json.dumps(s))
    write_marker(d, "run")
    return d


# -- 1. --out, and the run's own pictures left alone ---------------------------------------------------------
def test_plot_writes_into_out_or_plots_and_leaves_the_runs_pictures(tmp_path, monkeypatch, capsys):
    geo = grid()
    run = _run(tmp_path, geo, [block_owner(geo["coords"], 0.0), block_owner(geo["coords"], 0.5)])
    own = run / "partition-000.png"
    own.write_bytes(b"the run's own picture")
    (run / "phases.png").write_bytes(b"the run's own phases")
    monkeypatch.chdir(tmp_path)
    assert main(["plot", str(run), "--out", "pics/a", "--dpi", "40", "--show", "none"]) == 0
    # the pictures, beside hermes' marker and lock (a plots directory of hermes' own, as every --out)
    assert sorted(p.name for p in (tmp_path / "pics" / "a").iterdir() if not p.name.startswith(".")) == [
        "partition-000.png", "partition-001.png", "phases.png"]
    assert main(["plot", str(run), "--phase", "0", "--dpi", "40", "--show", "none"]) == 0
    assert (run / "plots" / "partition-000.png").is_file()
    assert own.read_bytes() == b"the run's own picture"
    assert (run / "phases.png").read_bytes() == b"the run's own phases"
    # a directory hermes did not make is only read, with --out
    foreign = tmp_path / "archive"
    foreign.mkdir()
    for f in ("geometry.npz", "partitions.npz", "summary.json"):
        (foreign / f).write_bytes((run / f).read_bytes())
    capsys.readouterr()
    assert main(["plot", str(foreign), "--phase", "1", "--dpi", "40"]) == 2
    assert "give --out DIR" in capsys.readouterr().err
    assert main(["plot", str(foreign), "--phase", "1", "--dpi", "40", "--out", "pics/b"]) == 0
    assert sorted(p.name for p in foreign.iterdir()) == ["geometry.npz", "partitions.npz", "summary.json"]


# -- 2. --zoom with negative corners -------------------------------------------------------------------------
def test_zoom_with_negative_corners_needs_no_equals_sign(tmp_path, capsys):
    g = graded(12)
    run = _run(tmp_path, g, [airfoil_like(g["coords"])])
    assert main(["plot", str(run), "--zoom", "-0.5,-0.5,0.5,0.5", "--dpi", "40", "--show", "none"]) == 0
    capsys.readouterr()
    assert main(["plot", str(run), "--zoom", "-1,2", "--dpi", "40"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hermes: error: --zoom '-1,2': expected auto, none or x0,y0,x1,y1"]


# -- 3. the rank key and the overview never overlap, never leave the figure -----------------------------------
@pytest.mark.parametrize("nparts", [5, 12, 32, 64, 100])
@pytest.mark.parametrize("weights", [False, True])
def test_rank_key_and_overview_apart_and_inside(tmp_path, figures, nparts, weights):
    g = graded(32)
    owner = airfoil_like(g["coords"]) if nparts == 5 else rcb_owner(g["coords"], nparts)
    areas = cell_areas(g["points"], g["cell_ptr"], g["cell_nodes"])
    box = auto_zoom(g["coords"], [owner], areas=areas, nparts=nparts)
    assert box is not None
    plot_partition(tmp_path / "p.png", g["coords"], owner, points=g["points"], cell_ptr=g["cell_ptr"],
                   cell_nodes=g["cell_nodes"], zoom=box, nparts=nparts, weights=np.ones(owner.size),
                   show_weights=weights, loads=np.bincount(owner, minlength=nparts).astype(float), dpi=40)
    fig = figures[-1]
    r = fig.canvas.get_renderer()
    page = fig.bbox
    every = [a for ax in fig.axes for a in [ax, *ax.child_axes] if a.get_visible()]
    overview = [a for a in every if a.get_title() == "whole domain"]
    assert len(overview) == 1
    view = overview[0].get_tightbbox(r)
    # the rank key: a legend titled "rank" (every rank named) or, above 64 ranks, "100 ranks" (a short key)
    title = "rank" if nparts <= 64 else f"{nparts} ranks"
    key_axes = [a for a in every if a.get_legend() is not None and a.get_legend().get_title().get_text() == title]
    assert len(key_axes) == 1
    keys = [key_axes[0].get_tightbbox(r)]  # the legend and, in the short key, its note
    # up to 64 ranks the key lists every rank by name; above, a few (a colour bar of 100 hues cannot be read)
    texts = [t.get_text() for t in key_axes[0].get_legend().get_texts()]
    assert texts == ([str(k) for k in range(nparts)] if nparts <= 64 else ["0", "1", "2", "3", "4", "5", "⋮",
                                                                           str(nparts - 1)])
    partition_box = [a for a in every if a.get_title().startswith("owner rank")][0].get_window_extent(r)
    for name, b in (("rank key", keys[0]), ("whole domain", view)):
        assert not b.overlaps(partition_box), name
        assert page.x0 - 1 <= b.x0 and b.x1 <= page.x1 + 1 and page.y0 - 1 <= b.y0 and b.y1 <= page.y1 + 1, name
    assert not keys[0].overlaps(view)
    # nor does either cover another panel (the weights and their colour bar, the load bars)
    others = [a.get_tightbbox(r) for a in every if a is not overview[0] and a.get_title() != "whole domain"
              and a.get_title() and not a.get_title().startswith("owner rank")]
    for b in others:
        assert not view.overlaps(b) and not keys[0].overlaps(b)


# -- 4. the time stacks of phases.png within their axis ---------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 500])
def test_phases_stacks_within_their_axis(tmp_path, figures, n):
    rng = np.random.default_rng(n)
    phases = [dict(phase=k + 1, imbalance_before=1.5, imbalance_after=1.01, time=1.0,
                   **{key: float(rng.random()) for key, _, _ in timeline.TIME_PARTS}) for k in range(n)]
    summary = dict(scenario="s", balancer="b", processors=4, clock="virtual", phases=phases)
    timeline.plot_phases(tmp_path / "phases.png", summary, dpi=30)
    ax = figures[-1].axes[1]
    totals = np.sum([[p[key] for key, _, _ in timeline.TIME_PARTS] for p in phases], axis=1)
    lo, hi = ax.get_ylim()
    assert lo == 0.0 and totals.max() <= hi <= 1.1 * totals.max()
    r = figures[-1].canvas.get_renderer()
    inside = ax.get_window_extent(r)
    for patch in ax.patches:
        b = patch.get_window_extent(r)
        assert inside.x0 - 0.5 <= b.x0 and b.x1 <= inside.x1 + 0.5 and inside.y0 - 0.5 <= b.y0 \
            and b.y1 <= inside.y1 + 0.5


# -- 5. compare's Pareto plot among the balancers that balance -----------------------------------------------
def _summary(bal, migrated, total, before=1.6, after=None):
    after = before if after is None else after
    return dict(balancer=bal, clock="virtual", total_time=total, final_imbalance=after,
                phases=[dict(phase=k, imbalance_before=before, imbalance_after=after, migrated_cells=migrated / 3)
                        for k in (1, 2, 3)])


def test_pareto_front_among_balancers_that_balance(tmp_path, monkeypatch):
    import hermes.viz.compare_plots as compare

    drawn = []
    save = compare.save_figure
    monkeypatch.setattr(compare, "save_figure", lambda fig, path: (drawn.append(fig), save(fig, path))[1])
    cols = ["none", "gda0", "pcg", "sos"]
    cells = {("grid", "none"): [_summary("none", 0, 10.0)], ("grid", "gda0"): [_summary("gda0", 900, 7.5, after=1.01)],
             ("grid", "pcg"): [_summary("pcg", 500, 7.0, after=1.0)], ("grid", "sos"): [_summary("sos", 300, 8.0, after=1.05)]}
    assert imbalance_reduction(cells[("grid", "none")][0]) == 0.0
    assert imbalance_reduction(cells[("grid", "pcg")][0]) == pytest.approx(1.0)
    assert imbalance_reduction(cells[("grid", "sos")][0]) >= BALANCE_TOL
    plot_pareto(tmp_path / "pareto.png", ["grid"], cols, cells, dpi=40)
    ax = drawn[-1].axes[0]
    filled = [c for c in ax.collections if c.get_facecolor().size and c.get_facecolor()[0][3] > 0
              and c.get_offsets().size]
    labels = [t.get_text() for t in ax.texts]
    assert any("none" in t and "does not balance" in t for t in labels)
    assert all(t.split(" ")[0] in cols for t in labels)
    # on the front: sos (fewest cells moved among balancers) and pcg (fastest); not none, not gda0
    coloured = {tuple(map(float, c.get_offsets()[0])) for c in filled
                if not np.allclose(c.get_facecolor()[0][:3], 0.5)}
    assert coloured == {(300.0, 8.0), (500.0, 7.0)}
    assert "Pareto front" in drawn[-1].get_suptitle() and "total time" in drawn[-1].get_suptitle()
    assert ax.get_xlabel() == "cells moved, all phases"


# -- 6. graphs without polygons: zoomed where the small ranks live, and legible ----------------------------------
def test_graph_without_polygons_is_zoomed_like_a_mesh(tmp_path):
    g = graded(24)
    owner = airfoil_like(g["coords"])
    mesh_box = auto_zoom(g["coords"], [owner], areas=cell_areas(g["points"], g["cell_ptr"], g["cell_nodes"]))
    graph_box = auto_zoom(g["coords"], [owner], areas=point_areas(g["coords"]))
    assert mesh_box is not None and graph_box is not None
    assert graph_box[1] - graph_box[0] < 1.5 * (mesh_box[1] - mesh_box[0])
    run = _run(tmp_path, {"coords": g["coords"]}, [owner])  # coordinates only, as from a .graph and its .xyz
    png = plot_run(run, dpi=DPI, timeline=False)[0]
    # every rank's colour fills a share of the picture: the central rank is no speck
    assert shows_colors(read_png(png), rank_colors(5), min_share=0.005)


# -- 7. the load panel at many ranks: the sorted profile, not a bar per rank ---------------------------------------
@pytest.mark.parametrize("nparts", [8, 300])
def test_load_panel_draws_bars_up_to_64_ranks_then_the_sorted_profile(tmp_path, figures, nparts):
    from matplotlib.collections import PolyCollection

    geo = grid(60, 50)
    owner = rcb_owner(geo["coords"], nparts)
    rng = np.random.default_rng(nparts)
    loads = rng.uniform(80.0, 120.0, nparts)
    fair = np.full(nparts, loads.mean())
    plot_partition(tmp_path / "p.png", geo["coords"], owner, points=geo["points"], cell_ptr=geo["cell_ptr"],
                   cell_nodes=geo["cell_nodes"], nparts=nparts, loads=loads, fair=fair, dpi=30)
    fig = figures[-1]
    (ax,) = [a for a in fig.axes if a.get_ylabel() in ("load", "load / fair")]
    polys = [c for c in ax.collections if isinstance(c, PolyCollection)]
    if nparts <= 64:  # one bar per rank, in the rank's colour
        assert len(polys) == 1 and len(polys[0].get_paths()) == nparts
        assert np.allclose(polys[0].get_facecolor(), rank_colors(nparts))
        return
    # the ratios load / fair sorted, heaviest first: two filled areas (above, below the fair share), no bar per rank
    assert ax.get_ylabel() == "load / fair" and all(len(p.get_paths()) <= nparts // 4 for p in polys)
    (line,) = [ln for ln in ax.lines if ln.get_drawstyle() == "steps-mid"]
    ratios = line.get_ydata()
    assert np.allclose(ratios, np.sort(loads / fair)[::-1])
    assert f"max {np.max(loads / fair):.3f}" in ax.get_title() and f"the {nparts} ranks" in ax.get_title()
    lo, hi = ax.get_ylim()
    assert lo > 0.5 and lo < ratios.min() and 1.0 < hi and ratios.max() < hi  # the ratios' span, not from 0


# -- 8. a refining run records its refinement levels (with or without VTU files): the weights panel shows them ----
def test_a_refining_run_without_vtu_records_levels_and_draws_them(tmp_path, figures):
    from mpi4py import MPI

    from hermes.lifecycle import driver
    from hermes.outputs import RUN_OUTPUTS
    from hermes.runtime.plain import plain
    from hermes.scenario import load_scenario

    root = Path(__file__).resolve().parents[2]
    sc = load_scenario(root / "scenarios" / "refine-lshape.yaml",
                       overrides=["adaptation.phases=2", "processors=1", "output.vtu=false",
                                  "output.pictures=false"])
    out = tmp_path / "run"
    driver.run(sc, plain(MPI.COMM_SELF), out_dir=out, quiet=True, outputs=RUN_OUTPUTS)
    with np.load(out / "partitions.npz") as parts:
        levels = {k: parts[k] for k in parts.files if k.startswith("level_")}
        owners = {k for k in parts.files if k.startswith("owner_")}
        assert sorted(levels) == sorted(k.replace("owner", "level") for k in owners) == \
            ["level_000", "level_001", "level_002"]
        assert all(levels[k].shape == parts[k.replace("level", "owner")].shape for k in levels)
        assert levels["level_000"].max() == 0 and levels["level_002"].max() > 0  # the front refined cells
    plot_run(out, phases=[2], timeline=False, dpi=30)
    titles = [a.get_title() for a in figures[-1].axes]
    assert "refinement level" in titles and "unit weight" not in titles


# -- 9. compare's plots: legends and titles inside the figure, clear of each other and of the axes -----------------
@pytest.mark.parametrize("shape", [None, (1, 2), (2, 7), (7, 4)])
def test_compare_plots_keep_legends_and_titles_inside_and_apart(tmp_path, monkeypatch, shape):
    import hermes.viz.compare_plots as compare

    drawn = []
    save = compare.save_figure
    monkeypatch.setattr(compare, "save_figure", lambda fig, path: (drawn.append(fig), save(fig, path))[1])
    if shape is None:  # hermes compare --set-axis balancer=none,pcg on the quickstart
        rows, cols = ["all runs"], ["none", "pcg"]
    else:
        rows = [f"mesh-{k} with a longer name" for k in range(shape[0])]
        cols = ["none"] + [f"balancer-{k}-long" for k in range(shape[1] - 1)]
    cells = {(r, c): [_summary(c, 100.0 * j, 10.0 - j, after=1.0 + 0.1 * (j == 0))] for r in rows
             for j, c in enumerate(cols)}
    for plot in (compare.plot_totals, compare.plot_imbalance, compare.plot_breakdown, compare.plot_pareto):
        plot(tmp_path / f"{plot.__name__}.png", rows, cols, cells, dpi=120 if shape is None else 40)
        fig = drawn[-1]
        r = fig.canvas.get_renderer()
        page = fig.bbox
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
        assert len(legends) == 1, plot.__name__
        box = legends[0].get_window_extent(r)
        assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1 and page.y0 - 1 <= box.y0 and box.y1 <= page.y1 + 1, \
            plot.__name__
        # every entry's text inside too (a label cut at the figure's edge was the bug)
        for t in legends[0].get_texts():
            b = t.get_window_extent(r)
            assert page.x0 - 1 <= b.x0 and b.x1 <= page.x1 + 1, (plot.__name__, t.get_text())
        titles = [t for t in (fig._suptitle, *(ax.title for ax in fig.axes if ax.get_visible())) if t is not None
                  and t.get_text()]
        for t in titles:
            b = t.get_window_extent(r)
            assert not b.overlaps(box), (plot.__name__, t.get_text())
            assert page.y0 - 1 <= b.y0 and b.y1 <= page.y1 + 1, (plot.__name__, t.get_text())
        for ax in fig.axes:
            if ax.get_visible():
                assert not ax.get_window_extent(r).overlaps(box), plot.__name__
                # under the panels, not beside them (beside, it took half a narrow figure's width)
                assert box.y1 <= ax.get_tightbbox(r).y0 + 1, plot.__name__
