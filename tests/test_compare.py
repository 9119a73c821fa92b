"""hermes compare: experiments, tables, the runner (resume, failures, interruption) and report.html in a browser."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml

from hermes.claims import write_marker
from hermes.compare import collect, load_experiment, make_experiment, render, run_experiment
from hermes.compare.experiment import ExperimentError, parse_axis_option
from hermes.compare.runner import error_line, read_summary
from hermes.compare.tables import format_time, make_grid, markdown_tables, phase_rows, run_row
from hermes.viz.compare_plots import pareto_front

ROOT = Path(__file__).resolve().parents[1]


# -- experiments ----------------------------------------------------------------------------------------------
def test_thesis_experiment_expands_to_the_readme_table():
    exp = load_experiment(ROOT / "experiments" / "thesis.yaml")
    runs = exp.runs()
    assert [a.name for a in exp.axes] == ["scenario", "mesh", "balancer"] and exp.column_axis == "balancer"
    assert len(runs) == 48
    assert [r.labels["balancer"] for r in runs[:6]] == ["No DLB", "GDA1", "GDA0", "PCG", "METIS equal", "METIS fair"]
    assert {r.labels["scenario"] for r in runs} == {"thesis-homogeneous", "thesis-heterogeneous"}
    assert [r.labels["mesh"] for r in runs[::6][:4]] == ["grid20x19", "stufe", "airfoil", "3elt"]
    grid, stufe = runs[0].scenario.mesh, runs[6].scenario.mesh
    assert (grid.grid, grid.file, grid.units) == ("20x19", None, "cells")  # the scenarios' own mesh
    assert Path(stufe.file).name == "thesis-stufe.vtu" and stufe.units == "nodes" and stufe.grid is None
    by = {r.id.replace("__grid20x19", ""): r.scenario for r in runs}
    eq, fair = by["thesis-heterogeneous__METIS-equal"], by["thesis-heterogeneous__METIS-fair"]
    assert eq.balancer.algorithm == "metis" and eq.balancer.params["targets"] == "equal"
    assert fair.balancer.params["targets"] == "fair"
    assert Path(eq.platform.schedule).is_absolute() and Path(eq.platform.schedule).is_file()
    assert by["thesis-homogeneous__PCG"].platform.schedule is None
    assert all(r.processors == 15 and r.scenario.output.pictures is False for r in runs)


def test_cfd_experiment_covers_the_six_meshes_at_8_ranks():
    exp = load_experiment(ROOT / "experiments" / "cfd.yaml")
    runs = exp.runs()
    meshes = {r.labels["mesh"] for r in runs}
    # every shipped cell mesh; meshes/thesis-*.vtu are node graphs for experiments/thesis.yaml
    assert meshes == {p.stem for p in (ROOT / "meshes").glob("*.vtu") if not p.stem.startswith("thesis-")}
    assert all(r.processors == 8 and Path(r.scenario.mesh.file).is_file() for r in runs)
    assert "none" in {r.scenario.balancer.algorithm for r in runs}


def test_axes_of_every_kind(tmp_path):
    exp = make_experiment({"scenario": {"name": "s", "mesh": {"grid": "8x6"}, "processors": 2}}, here=tmp_path,
                          set_axes=["balancer=none,pcg", "seed=1,2"],
                          axes={"mesh": ["6x4", {"label": "wide", "grid": "12x3"}],
                                "balancer2": [{"label": "few", "set": {"adaptation.phases": 1}}],
                                "platform": [{"label": "fast0", "capacities": [3, 1]}]},
                          sets={"application.iterations": 3})
    runs = exp.runs()
    assert len(runs) == 2 * 2 * 2 * 1 * 1
    r = runs[0]
    assert r.id == "none__seed-1__6x4__few__fast0"
    assert r.values["seed"] == 1 and r.labels["seed"] == "1"
    sc = r.scenario
    assert sc.mesh.grid == "6x4" and sc.adaptation.phases == 1 and sc.application.iterations == 3
    assert sc.platform.capacities == [3.0, 1.0]
    assert {x.scenario.mesh.grid for x in runs} == {"6x4", "12x3"}


def test_balancer_values_put_parameters_in_their_section():
    exp = make_experiment({"scenario": {"mesh": {"grid": "4x4"}, "processors": 2}},
                          axes={"balancer": [{"algorithm": "metis", "targets": "equal"},
                                             {"label": "peel", "algorithm": "pcg", "selection": "peel",
                                              "tolerance": 1e-6}]})
    a, b = exp.runs()
    assert a.labels["balancer"] == "metis targets=equal" and a.scenario.balancer.params["targets"] == "equal"
    assert b.scenario.balancer.selection == "peel" and b.scenario.balancer.params["tolerance"] == 1e-6
    assert b.scenario.to_dict()["balancer"]["pcg"] == {"tolerance": 1e-6}


def test_mesh_axis_switches_between_file_and_grid(tmp_path):
    exp = make_experiment({"scenario": {"mesh": {"grid": "4x4"}, "processors": 2}}, here=ROOT / "experiments",
                          axes={"mesh": ["../meshes/lshape.vtu", "5x5"]})
    a, b = exp.runs()
    assert a.labels["mesh"] == "lshape" and a.scenario.mesh.grid is None
    assert Path(a.scenario.mesh.file) == (ROOT / "meshes" / "lshape.vtu").resolve()
    assert b.scenario.mesh.file is None and b.scenario.mesh.grid == "5x5"


@pytest.mark.parametrize("data, axes, message", [
    ({"axis": {}}, None, "experiment: axis: unknown key"),
    ({}, {"balancer": []}, "axes.balancer: expected a non-empty list"),
    ({}, {"balancer": ["pcg", "pcg"]}, "the label 'pcg' is given twice"),
    ({}, {"balancer": ["a b", "a-b"]}, "make the same directory name"),
    ({}, {"balancer": ["nosuch"]}, "run nosuch: unknown balancer 'nosuch'"),
    ({}, {"adaptation.phases": [0]}, "run phases-0: adaptation.phases"),
    ({}, {"bad key!": [1]}, "not a scenario key path"),
    ({"table": {"columns": "seed"}}, {"balancer": ["pcg"]}, "table.columns: 'seed' is not an axis"),
])
def test_bad_experiments_fail_in_one_line(data, axes, message):
    with pytest.raises(ExperimentError) as err:
        make_experiment(data, axes=axes).runs()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_set_axis_option():
    assert parse_axis_option("balancer=pcg,gda0,metis") == ("balancer", ["pcg", "gda0", "metis"])
    assert parse_axis_option("seed=1,2") == ("seed", [1, 2])
    assert parse_axis_option("platform.capacities=[[1,1],homo]") == ("platform.capacities", [[1, 1], "homo"])
    with pytest.raises(ExperimentError, match="expected KEY=VALUE"):
        parse_axis_option("balancer")


# -- tables ---------------------------------------------------------------------------------------------------
def _summary(total: float, imb: float, algorithm: str = "pcg", moved: int = 10, cut: int = 50) -> dict:
    """A summary as hermes wrote it before ``cells_moved`` and ``cell_sends`` (only their aliases)."""
    phases = [{"phase": k, "time": total / 2, "compute_time": total / 2, "comm_time": 0.0, "sync_time": 0.0,
               "balance_time": 0.0, "migrate_time": 0.0, "adapt_time": 0.0, "imbalance_before": 2.0,
               "imbalance_after": imb, "migrated_cells": moved, "edge_cut": cut,
               "quality": {"migration_cells": moved, "edge_cut": cut}} for k in (1, 2)]
    return {"scenario": "s", "processors": 4, "balancer": algorithm, "clock": "virtual", "total_time": total,
            "final_imbalance": imb, "phases": phases, "balancer_params": {"tolerance": 1e-8}}


def _row(labels: dict, summary: dict | None, status: str = "done", error: str | None = None) -> dict:
    row = run_row("__".join(labels.values()), labels, status, error, summary, "runs/x")
    row["_labels"], row["_summary"] = labels, summary
    return row


def test_run_row_is_tidy():
    row = run_row("a", {"balancer": "PCG", "seed": 3}, "done", None, _summary(4.0, 1.05), "runs/a")
    assert row["balancer"] == "PCG" and row["algorithm"] == "pcg" and row["seed"] == 3
    assert row["total_time"] == 4.0 and row["compute_time"] == 4.0 and row["phases"] == 2
    assert row["migration_cells"] == 20 and row["edge_cut_final"] == 50 and row["param.tolerance"] == 1e-8
    # a summary written before the new names: they are read from the aliases
    assert row["cells_moved"] == row["cell_sends"] == 20
    failed = run_row("b", {"balancer": "X"}, "failed", "boom", None, "runs/b")
    assert failed["status"] == "failed" and failed["error"] == "boom" and "total_time" not in failed


def _moving(sends: tuple[int, int] = (7, 5), moved: tuple[int, int] = (6, 5)) -> dict:
    """A summary with both names of the movement of cells (sends exceed the distinct cells in phase 1)."""
    s = _summary(4.0, 1.05)
    for ph, n, m in zip(s["phases"], sends, moved):
        ph.update(cells_moved=m, cell_sends=n, migrated_cells=n)
        ph["quality"]["migration_cells"] = m
    return {**s, "cells_moved": sum(moved), "cell_sends": sum(sends), "migrated_cells": sum(sends)}


def test_results_and_phase_rows_name_the_movement_of_cells():
    """results.csv and phases.csv: cells_moved (distinct cells that changed owner) and cell_sends (cells the
    messages carried), beside migration_cells and migrated_cells, their deprecated aliases."""
    row = run_row("a", {"balancer": "pcg"}, "done", None, _moving(), "runs/a")
    assert (row["cells_moved"], row["cell_sends"]) == (11, 12)
    assert (row["migration_cells"], row["migrated_cells"]) == (11, 12)  # the aliases, same values
    rows = phase_rows("a", {"balancer": "pcg"}, _moving())
    assert [(r["cells_moved"], r["cell_sends"]) for r in rows] == [(6, 7), (5, 5)]
    assert [(r["quality.migration_cells"], r["migrated_cells"]) for r in rows] == [(6, 7), (5, 5)]
    old = phase_rows("b", {"balancer": "pcg"}, _summary(4.0, 1.05, moved=3))  # before the new names
    assert [(r["cells_moved"], r["cell_sends"]) for r in old] == [(3, 3), (3, 3)]


def test_table_like_the_thesis_with_ratios_failures_and_seed_means():
    rows = []
    for scen, (t_none, t_pcg) in (("homo", (465.2, 241.1)), ("hetero", (814.2, 247.8))):
        rows.append(_row({"scenario": scen, "balancer": "No DLB", "seed": "1"}, _summary(t_none, 2.15, "none")))
        for seed, dt in (("1", -1.0), ("2", 1.0)):
            rows.append(_row({"scenario": scen, "balancer": "PCG", "seed": seed}, _summary(t_pcg + dt, 1.05)))
        rows.append(_row({"scenario": scen, "balancer": "broken", "seed": "1"}, None, "failed", "no mesh"))
    g = make_grid(rows, ["scenario", "balancer", "seed"], "balancer")
    assert g.rows == ["homo", "hetero"] and g.cols == ["No DLB", "PCG", "broken"] and g.reference == "No DLB"
    text = markdown_tables(g, title="T", failures=[("homo__broken__1", "no mesh")])
    assert "| scenario | No DLB | PCG | broken |" in text
    assert "| homo | 465.2 s (2.15) | 241.1 s (1.05) | failed |" in text  # PCG: the mean over the two seeds
    assert f"| hetero | 1.00 | {247.8 / 814.2:.2f} | — |" in text  # ratio to none
    assert f"| homo | {465.2 / 241.1:.2f} | 1.00 | — |" in text  # ratio to the best of the row
    assert "mean over the seed axis" in text and "- `homo__broken__1`: no mesh" in text


def test_report_links_every_picture_to_its_full_size_png(tmp_path):
    """Each picture of report.html (plots and final partitions) is a thumbnail inside a link to its PNG, relative
    to the page, so one click opens it full size; a run without a picture has no link."""
    import html.parser

    from hermes.compare.report import write_report
    from hermes.viz.partition_picture import rank_colors, save_figure

    def png(path: Path) -> Path:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(2, 1), dpi=20)
        fig.patch.set_facecolor(rank_colors(1)[0])
        path.parent.mkdir(parents=True, exist_ok=True)
        return save_figure(fig, path)

    d = tmp_path / "exp"
    plots = [("total time", png(d / "plots" / "total-time.png")), ("pareto", png(d / "plots" / "pareto.png"))]
    parts = [("a run", png(d / "plots" / "partitions" / "8x6 pcg" / "partition-002.png")), ("failed", None)]
    rows = [_row({"balancer": "pcg"}, _summary(2.0, 1.01))]
    page = write_report(d / "report.html", title="t", description="", grid=make_grid(rows, ["balancer"], "balancer"),
                        plots=plots, partitions=parts, failures=[], counts={"done": 1}, clock="virtual",
                        experiment_dir=d).read_text()

    class Links(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.open: list[str | None] = []  # the href of each <a> we are inside
            self.images: list[tuple[str | None, str]] = []  # (enclosing link, src) of every <img>

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "a":
                self.open.append(a.get("href"))
            elif tag == "img":
                self.images.append((self.open[-1] if self.open else None, a["src"]))

        def handle_endtag(self, tag):
            if tag == "a":
                self.open.pop()

    links = Links()
    links.feed(page)
    assert len(links.images) == 3  # two plots, one partition (the failed run has no picture)
    expected = [png for _, png in plots] + [parts[0][1]]
    for (href, src), target in zip(links.images, expected):
        assert src.startswith("data:image/png;base64,")  # the page stays self-contained
        assert href is not None and href.endswith(".png") and not href.startswith(("/", "file:"))
        assert (d / urllib.parse.unquote(href)).resolve() == target.resolve()  # the full-size file beside the page
    assert page.count('<a class="full"') == 3 and "8x6%20pcg/partition-002.png" in page


def test_format_time():
    assert [format_time(v) for v in (465.24, 42.126, 0.54748, math.nan)] == ["465.2", "42.13", "0.5475", "—"]


def test_pareto_axis_counts_the_cells_moved():
    """The Pareto plot's cells: each phase's cells_moved, else quality.migration_cells, else its sends."""
    from hermes.viz.compare_plots import migration_volume

    assert migration_volume(_moving()) == 11  # cells_moved, not the 12 sends
    assert migration_volume(_summary(1.0, 1.0, moved=3)) == 6  # before cells_moved: the quality's alias
    assert migration_volume({"phases": [{"migrated_cells": 4}, {"cell_sends": 2}]}) == 6  # sends, nothing better


def test_pareto_front():
    pts = [(0, 100), (50, 60), (60, 60), (40, 90), (100, 50), (math.nan, 1)]
    assert pareto_front(pts) == [0, 1, 3, 4]


# -- the runner's pieces ----------------------------------------------------------------------------------------
def test_error_line():
    log = "$ mpiexec ...\nhermes: error: mesh.file: cannot read x.vtu\nmore\n"
    assert error_line(log, 2) == "mesh.file: cannot read x.vtu"
    tb = "Traceback (most recent call last):\n  File ...\nValueError: bad thing\n"
    assert error_line(tb, 1) == "ValueError: bad thing"
    assert error_line("", 137) == "exit status 137"


def test_read_summary_knows_complete_runs(tmp_path):
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump({"adaptation": {"phases": 2}}))
    assert read_summary(tmp_path) is None
    s = _summary(1.0, 1.0)
    (tmp_path / "summary.json").write_text(json.dumps({**s, "complete": False}))
    assert read_summary(tmp_path) is None  # a partial summary (written during the run)
    (tmp_path / "summary.json").write_text(json.dumps({**s, "phases": s["phases"][:1]}))
    assert read_summary(tmp_path) is None  # a phase missing
    (tmp_path / "summary.json").write_text(json.dumps(s)[:-5])
    assert read_summary(tmp_path) is None  # truncated
    (tmp_path / "summary.json").write_text(json.dumps(s))
    assert read_summary(tmp_path) is None  # no hermes marker: not a run directory of hermes
    write_marker(tmp_path, "run")
    assert read_summary(tmp_path)["total_time"] == 1.0


# -- real runs ------------------------------------------------------------------------------------------------
# 2 processors hosted on one process (hermes.runtime.hosting; the results are those of 2 processes): a run starts one
# Python less, and --jobs 2 runs two at once
SMALL = {"name": "small", "processors": 2, "run": {"processes": 1}, "seed": 1, "mesh": {"grid": "8x6"},
         "platform": {"capacities": [2, 1], "speed": 1.0e4},
         "application": {"kernel": "synthetic", "iterations": 2},
         "adaptation": {"phases": 2, "region": {"kind": "disc", "center": [0.3, 0.3], "radius": 0.4}}}


def _experiment(d: Path) -> Path:
    (d / "broken.vtu").write_text("this is not a mesh\n")
    (d / "small.yaml").write_text(yaml.safe_dump(SMALL))
    spec = {"name": "small", "description": "a test", "scenario": "small.yaml",
            "axes": {"mesh": ["8x6", "broken.vtu"], "balancer": ["none", "pcg"]}}
    (d / "exp.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "exp.yaml"


def _hermes(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


@pytest.fixture(scope="module")
def small_experiment(tmp_path_factory):
    """4 runs (2 meshes, one unreadable, × 2 balancers) on 2 ranks, through the command line."""
    d = tmp_path_factory.mktemp("cmp")
    res = _hermes("compare", str(_experiment(d)), "--out", str(d / "out"), "--jobs", "2")
    return d, res


@pytest.mark.mpi
@pytest.mark.slow
def test_compare_runs_reports_failures_as_rows_and_resumes(small_experiment):
    d, res = small_experiment
    out = d / "out"
    assert res.returncode == 3, res.stderr  # two runs failed (test_compare_exits_3_naming_each_failed_run)
    assert "virtual time" in res.stdout and "ETA" in res.stdout and "| mesh | none | pcg |" in res.stdout
    _, rows, prows = collect(out)
    status = {r["run"]: r["status"] for r in rows}
    assert status == {"8x6__none": "done", "8x6__pcg": "done", "broken__none": "failed", "broken__pcg": "failed"}
    assert all("broken.vtu" in r["error"] for r in rows if r["status"] == "failed")
    assert {p["run"] for p in prows} == {"8x6__none", "8x6__pcg"} and len(prows) == 4
    csv_head = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert csv_head[:5] == ["run", "mesh", "balancer", "status", "error"] and "total_time" in csv_head
    # the movement of cells by its names, and the deprecated aliases with the same values
    with (out / "results.csv").open(newline="") as f:
        done = {r["run"]: r for r in csv.DictReader(f) if r["status"] == "done"}
    assert int(done["8x6__pcg"]["cells_moved"]) > 0 and int(done["8x6__none"]["cell_sends"]) == 0
    for r in done.values():
        assert (r["cells_moved"], r["cell_sends"]) == (r["migration_cells"], r["migrated_cells"])
    with (out / "phases.csv").open(newline="") as f:
        phase_csv = list(csv.DictReader(f))
    assert len(phase_csv) == 4
    for r in phase_csv:
        assert (r["cells_moved"], r["cell_sends"]) == (r["quality.migration_cells"], r["migrated_cells"])
        assert int(r["cell_sends"]) >= int(r["cells_moved"])
    ran = json.loads((out / "runs" / "8x6__pcg" / "summary.json").read_text())  # the run wrote them itself
    assert ran["cells_moved"] == int(done["8x6__pcg"]["cells_moved"])
    assert all({"cells_moved", "cell_sends"} <= set(ph) for ph in ran["phases"])
    table = (out / "table.md").read_text()
    assert "| 8x6 | " in table and "| broken | failed | failed |" in table and "Failed runs:" in table
    for name in ("total-time", "imbalance", "time-breakdown", "pareto"):
        assert (out / "plots" / f"{name}.png").stat().st_size > 1000

    # a second invocation skips the complete runs (their summaries are not rewritten) and retries the failures
    stamp = {r: (out / "runs" / r / "summary.json").stat().st_mtime_ns for r in ("8x6__none", "8x6__pcg")}
    again = _hermes("compare", str(d / "exp.yaml"), "--out", str(out), "--no-report", "--jobs", "2")
    assert again.returncode == 3, again.stderr
    assert again.stdout.count("complete ") == 2 and again.stdout.count("FAILED") == 2
    assert stamp == {r: (out / "runs" / r / "summary.json").stat().st_mtime_ns for r in stamp}

    # a changed experiment makes the affected runs stale: they run again
    spec = yaml.safe_load((d / "exp.yaml").read_text())
    spec["axes"]["mesh"] = ["8x6"]
    spec["set"] = {"application.iterations": 3}
    (d / "exp2.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    third = _hermes("compare", str(d / "exp2.yaml"), "--out", str(out), "--no-report", "--quiet", "--jobs", "2")
    assert third.returncode == 0, third.stderr
    assert stamp["8x6__none"] != (out / "runs" / "8x6__none" / "summary.json").stat().st_mtime_ns


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.mpi
@pytest.mark.slow
def test_report_renders_every_image_in_a_headless_browser(small_experiment, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    d, res = small_experiment
    assert res.returncode == 3, res.stderr  # the report holds the runs that succeeded
    report = d / "out" / "report.html"
    page = report.read_text()
    assert "src=\"data:image/png;base64," in page and "src=\"plots/" not in page  # self-contained
    # 4 plots + the 2 complete runs' final partitions (the failed runs have none)
    dom = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'a'}", "--virtual-time-budget=10000",
                          "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'data-images="6"' in dom and 'data-broken-images="0"' in dom, dom[:300]
    # a broken image is seen as broken (the check can fail)
    bad = tmp_path / "bad.html"
    bad.write_text(page.replace('src="data:image/png;base64,', 'src="data:image/png;base64,AAAA', 1))
    dom = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'b'}", "--virtual-time-budget=10000",
                          "--dump-dom", bad.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'data-broken-images="1"' in dom
    shot = tmp_path / "report.png"
    subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'c'}", "--window-size=1280,2000",
                    f"--screenshot={shot}", report.as_uri()], capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


@pytest.mark.mpi
@pytest.mark.slow
def test_report_rerenders_from_the_runs(small_experiment):
    d, _ = small_experiment
    out = d / "out"
    (out / "report.html").unlink()
    (out / "table.md").unlink()
    res = _hermes("compare", "--report", str(out))
    assert res.returncode == 0, res.stderr
    assert (out / "report.html").is_file() and "| 8x6 |" in (out / "table.md").read_text()
    bad = _hermes("compare", "--report", str(d))
    assert bad.returncode == 2 and "not an experiment directory" in bad.stderr
    # a run directory that holds another scenario than planned (a run someone else wrote there) is not a result
    # of this experiment: reported stale, never as the planned run
    sc = out / "runs" / "8x6__pcg" / "scenario.yaml"
    saved = sc.read_text()
    try:
        sc.write_text(saved.replace("algorithm: pcg", "algorithm: gda0"))
        status = {r["run"]: (r["status"], r["error"]) for r in collect(out)[1]}
        assert status["8x6__pcg"] == ("stale", "the run directory holds another scenario than planned")
        assert status["8x6__none"][0] == "done"
    finally:
        sc.write_text(saved)


@pytest.mark.mpi
@pytest.mark.slow
def test_a_killed_compare_resumes(tmp_path):
    """SIGKILL the compare while a run executes: its mpiexec dies with it, the complete runs are kept, and the
    next invocation runs only what is left."""
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(SMALL))
    spec = {"scenario": "small.yaml", "axes": {"balancer": ["none", "pcg", "gda0"]}}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "hermes", "compare", str(tmp_path / "exp.yaml"), "--out", str(out),
                             "--no-report"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = out / "runs" / "none" / "summary.json"
    deadline = time.monotonic() + 300
    while not first.is_file() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert first.is_file(), "the first run did not complete"
    time.sleep(0.5)  # the second run is starting
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    pcg_log = out / "runs" / "pcg.log"
    if pcg_log.is_file():  # its job was started: it must not outlive compare (PR_SET_PDEATHSIG)
        time.sleep(3)
        jobs = subprocess.run(["pgrep", "-f", str(out / "runs" / "pcg")], capture_output=True, text=True).stdout
        assert not jobs.strip(), f"orphaned processes: {jobs}"
    res = subprocess.run([sys.executable, "-m", "hermes", "compare", str(tmp_path / "exp.yaml"), "--out", str(out),
                          "--no-report", "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "complete none" in res.stdout.replace("  ", " ").replace("  ", " ")
    assert res.stdout.count("done ") == 2
    assert {r["status"] for r in collect(out)[1]} == {"done"}


@pytest.mark.mpi
@pytest.mark.slow
def test_python_api_returns_the_results_table(tmp_path):
    import hermes

    table = hermes.compare(dict(SMALL), axes={"balancer": ["none", "pcg"]}, out=tmp_path / "api", report=False,
                           jobs=2, adaptation__phases=1)
    import pandas as pd  # a dependency of hermes: the table is a DataFrame

    assert isinstance(table, pd.DataFrame) and table.attrs["experiment_dir"] == str(tmp_path / "api")
    rows = table.to_dict("records")
    assert [r["balancer"] for r in rows] == ["none", "pcg"] and all(r["status"] == "done" for r in rows)
    assert all(r["phases"] == 1 for r in rows)
    assert rows[1]["final_imbalance"] < rows[0]["final_imbalance"]
    assert (tmp_path / "api" / "results.csv").is_file() and not (tmp_path / "api" / "report.html").exists()


def test_render_needs_an_experiment_directory(tmp_path):
    with pytest.raises(ExperimentError, match="not an experiment directory"):
        render(tmp_path)


def test_run_experiment_validates_before_running(tmp_path):
    exp = make_experiment({"scenario": dict(SMALL)}, axes={"processors": [2, 3]})
    with pytest.raises(ExperimentError, match="run processors-3: platform.capacities: 2 values for 3 processors"):
        run_experiment(exp, tmp_path / "x", say=lambda s: None)
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_cli_errors_are_one_line(tmp_path):
    res = _hermes("compare", str(tmp_path / "nope.yaml"))
    assert res.returncode == 2 and res.stderr.startswith("hermes: error: file not found") and \
        res.stderr.count("\n") == 1
    res = _hermes("compare", "--set-axis", "balancer=nosuch", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "run nosuch: unknown balancer" in res.stderr



@pytest.mark.mpi
@pytest.mark.slow
def test_readme_compare_example_runs():
    import re

    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- compare-example -->\s*```python\n(.*?)```\s*<!-- /compare-example -->", text, re.S)
    assert block, "the README lost its compare example"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    res = subprocess.run([sys.executable, "-c", block.group(1)], cwd=ROOT, capture_output=True, text=True, env=env,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout.strip().splitlines()
    assert any(ln.startswith("hermes compare: quickstart: 3 runs") for ln in out), out  # progress by default
    lines = [ln.split() for ln in out[-3:]]
    assert [ln[:2] for ln in lines] == [["none", "done"], ["pcg", "done"], ["gda0", "done"]]
    assert float(lines[1][3]) < float(lines[0][3])  # pcg ends fairer than no balancing


@pytest.mark.mpi
@pytest.mark.slow
def test_compare_exits_3_naming_each_failed_run(small_experiment):
    """Two of the four runs fail (an unreadable mesh): compare still writes the tables and the report of the two
    that succeeded and prints the table, names each failed run in one line on stderr, and exits 3 — before, it
    exited 0 even when every run had failed. The experiment and its runs hold no lock file afterwards."""
    from hermes.claims import LOCK
    from hermes.compare.runner import EXIT_RUNS_FAILED

    d, res = small_experiment
    out = d / "out"
    assert EXIT_RUNS_FAILED == 3 and res.returncode == 3, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert [ln.split(":")[2].strip() for ln in lines] == ["run broken__none failed", "run broken__pcg failed"], lines
    assert all(ln.startswith("hermes: error: run broken__") and "broken.vtu" in ln and
               ln.endswith(f"(its log: {out / 'runs' / ln.split()[3]}.log)") for ln in lines), lines
    assert "| 8x6 | " in res.stdout and (out / "report.html").is_file() and (out / "results.csv").is_file()
    assert not [p for p in out.rglob(LOCK)]
    ok = _hermes("compare", str(d / "exp.yaml"), "--out", str(d / "ok"), "--set-axis", "mesh=8x6", "--no-report",
                 "--quiet", "--jobs", "2")
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
