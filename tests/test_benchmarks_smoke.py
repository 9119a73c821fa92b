"""Smoke tests of the comparison benchmarks on tiny inputs: they run, and their table and CSV say what they must."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from hermes.runtime.launch import _LAUNCHER_ENV
from tests.conftest import ROOT, SHARED_MESHES

def bench(module: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -m benchmarks.<module> ARGS`` from the repository's top, as the docs run it."""
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    try:
        res = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", *args], capture_output=True, text=True,
                             timeout=timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{module} timed out after {timeout}s\n{err.stderr}")
    assert res.returncode == 0, res.stderr
    return res


def table(stdout: str) -> tuple[list[str], list[list[str]]]:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    return cells[0], cells[2:]


@pytest.mark.mpi  # starts mpiexec itself
@pytest.mark.slow
def test_partition_compare_tiny(tmp_path):
    out = tmp_path / "c.csv"
    res = bench("partition_compare", "--meshes", "grid20x19", "--ranks", "3", "--phases", "1",
                "--iterations", "1", "--methods", "none,pcg+gain,metis", "--out", str(out))
    head, rows = table(res.stdout)
    assert head == ["mesh", "cells", "method", "imbalance", "edge cut", "cells moved", "migrated weight",
                    "balance (s)", "sim. time (s)"]
    assert [r[2] for r in rows] == ["none", "pcg+gain", "metis"]
    with out.open() as f:
        data = list(csv.DictReader(f))
    assert list(data[0]) == ["mesh", "cells", "cells_final", "method", "algorithm", "selection", "params",
                             "final_imbalance", "edge_cut", "edge_cut_max", "boundary_cells", "neighbours_max",
                             "cells_moved", "migration_weight", "migration_bytes", "cell_sends", "total_time",
                             "balance_time", "migrate_time", "wall_seconds", "run_seconds"]
    by = {r["method"]: r for r in data}
    assert all(r["mesh"] == "grid20x19" and r["cells"] == "380" for r in data)
    # no balancing: nothing moves and the imbalance stays; a balancer lowers it by moving cells
    assert int(by["none"]["cells_moved"]) == int(by["none"]["cell_sends"]) == 0
    assert float(by["none"]["migration_weight"]) == 0
    for m in ("pcg+gain", "metis"):
        assert float(by[m]["final_imbalance"]) < float(by["none"]["final_imbalance"])
        assert int(by[m]["cell_sends"]) >= int(by[m]["cells_moved"]) > 0 and int(by[m]["edge_cut"]) > 0
    assert by["metis"]["params"] == "targets=fair" and by["pcg+gain"]["selection"] == "gain"


@pytest.mark.mpi  # starts mpiexec itself
@pytest.mark.slow
def test_partition_compare_refine_reports_the_grown_mesh(tmp_path):
    out = tmp_path / "r.csv"
    res = bench("partition_compare", "--kind", "refine", "--meshes", "lshape", "--ranks", "2", "--phases", "1",
                "--iterations", "1", "--methods", "pcg+gain", "--out", str(out))
    head, rows = table(res.stdout)
    assert head[:4] == ["mesh", "cells", "cells final", "method"]
    with out.open() as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["cells_final"]) > int(row["cells"]) == 1536  # the front's cells were bisected
    assert float(row["final_imbalance"]) < 1.1


@pytest.mark.slow
def test_partition_compare_rejects_unknown_method():
    res = subprocess.run([sys.executable, "-m", "benchmarks.partition_compare", "--methods", "nosuch"],
                         capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert res.returncode != 0 and "unknown nosuch" in res.stderr


@pytest.mark.skipif(not (SHARED_MESHES / "hammond2.graph").is_file(), reason="../shared/meshes absent")
@pytest.mark.mpi  # starts mpiexec itself
def test_shared_meshes_tiny(tmp_path):
    out = tmp_path / "s.csv"
    res = bench("shared_meshes", "--meshes", "hammond2", "--balancers", "pcg+gain", "--ranks", "2",
                "--phases", "1", "--iterations", "1", "--out", str(out))
    head, rows = table(res.stdout)
    assert head[:5] == ["mesh", "cells", "edges", "load (s)", "balancer"] and "edge cut" in head
    assert rows[0][:3] == ["hammond2", "4,362", "12,624"]  # the counts of ../shared/meshes/README.md
    with out.open() as f:
        (row,) = list(csv.DictReader(f))
    assert float(row["final_imbalance"]) >= 1.0 and int(row["edge_cut"]) > 0 and float(row["load_seconds"]) > 0


@pytest.mark.slow
def test_shared_meshes_skips_cleanly_without_directory(tmp_path):
    res = bench("shared_meshes", "--dir", str(tmp_path / "absent"))
    assert "not found" in res.stdout and "skipped" in res.stdout


@pytest.mark.mpi
@pytest.mark.slow
def test_scale_quick():
    res = bench("scale", "--quick", "--processes", "1", timeout=240)  # each run's 4 ranks on one process
    head, rows = table(res.stdout)
    assert head[:3] == ["p", "method", "total (s)"] and "edge cut per phase" in head
    assert [r[1] for r in rows] == ["pcg", "auto+compact+trigger"]
    for r in rows:
        assert r[0] == "4" and float(r[2]) > 0 and int(r[6].replace(",", "")) > 0


def test_scale_frontier_plot(tmp_path):
    from benchmarks import scale
    base = dict(setup="quickstart", kind="weights", capacities="homo", iterations=200, phases=3, ranks=64,
                mesh="grid160x120")
    rows = [dict(base, method="metis", distinct_cells=100, cuts=[10, 10], total_time=3.0),
            dict(base, method="mincost+compacta+trigger", distinct_cells=90, cuts=[11, 10], total_time=2.9),
            dict(base, method="scotch", distinct_cells=50, cuts=[13, 12], total_time=3.1)]
    out = tmp_path / "f.png"
    scale.frontier(rows, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no METIS run at 64 ranks"):
        scale.frontier(rows[1:], tmp_path / "g.png")


def test_numpy_bound_is_jacobi_sweeps_bit_for_bit():
    """The bound's arithmetic is hermes.app.mesh.kernels.jacobi_sweeps' on the run's own mesh: the same u, bit for
    bit."""
    from benchmarks import scale
    from hermes.app.mesh.kernels import jacobi_serial
    from hermes.data.generators import grid

    m = grid(20, 19)
    u = scale.bound_sweeps(*scale.bound_problem("grid20x19"), 5)
    ref = jacobi_serial(m.xadj, m.adjncy, m.coords, 5)
    assert u.dtype == ref.dtype and u.tobytes() == ref.tobytes()
    assert not np.array_equal(u, scale.bound_sweeps(*scale.bound_problem("grid20x19"), 4))  # the sweeps count


def test_numpy_bound_is_cached_and_reused(tmp_path):
    """numpy_bound writes out/bound-<mesh>-<sweeps>.json once and reads it after (a sweep of runs pays once)."""
    import json

    from benchmarks import scale

    b = scale.numpy_bound("grid20x20", 5, repeats=1, out=tmp_path)
    assert isinstance(b, float) and b > 0
    path = tmp_path / "bound-grid20x20-5.json"
    cached = json.loads(path.read_text())
    assert cached["seconds"] == b and cached["cells"] == 400 and cached["sweeps"] == 5
    path.write_text(json.dumps({**cached, "seconds": 1234.5}))
    assert scale.numpy_bound("grid20x20", 5, repeats=1, out=tmp_path) == 1234.5  # read, not measured again
    assert scale.numpy_bound("grid20x20", 6, repeats=1, out=tmp_path) != 1234.5  # another key: measured
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bound-grid20x20-5.json", "bound-grid20x20-6.json"]
    assert scale.load(tmp_path) == []  # the bounds are not runs


def test_scale_run_times_the_bound_once_before_the_runs(tmp_path, monkeypatch, capsys):
    """``run`` measures each (mesh, sweeps) bound before the first job starts, once for every run of it, and each run's
    line and JSON carry it (the jobs are stubbed: no mpiexec)."""
    import json

    from benchmarks import scale

    started = []

    def fake_run_hermes(sc, **kw):
        assert (tmp_path / "bound-grid20x20-6.json").is_file()  # measured before any job
        started.append(sc["processors"])
        kw["measured"]["peak_rss"] = 2**30
        phase = {"edge_cut": 10, "balance_time": 0.1, "migrate_time": 0.2, "compute_time": 1.0,
                 "imbalance_after": 1.01}
        return {"cells_initial": 400, "total_time": 2.0, "final_imbalance": 1.01, "phases": [phase] * 3}, 3.0

    monkeypatch.setattr(scale, "run_hermes", fake_run_hermes)
    args = ["run", "--out", str(tmp_path), "--meshes", "grid20x20", "--ranks", "2,4", "--methods", "pcg",
            "--iterations", "2", "--phases", "3"]
    assert scale.main(args) == 0
    err = capsys.readouterr().err
    assert started == [2, 4] and err.count("numpy bound of grid20x20, 6 sweeps: ") == 1
    assert "(scipy CSR mat-vec, 1 core, best of 3)" in err
    bound = json.loads((tmp_path / "bound-grid20x20-6.json").read_text())["seconds"]
    assert err.count(f", numpy bound {bound:.3g} s ({3.0 / bound:,.1f} x)") == 2
    for p in (2, 4):
        run = json.loads((tmp_path / f"grid20x20_homo_weights_it2_ph3_p{p}_pcg.json").read_text())
        assert run["bound_seconds"] == bound
    (tmp_path / "grid20x20_homo_weights_it2_ph3_p4_pcg.json").unlink()
    assert scale.main(args) == 0
    assert started == [2, 4, 4] and "1 core, best of 3; cached)" in capsys.readouterr().err


def test_scale_report_with_and_without_the_bound(tmp_path, capsys):
    """A run cached before the yardstick still reports, its bound and ratio cells blank; a newer one shows both."""
    import json

    from benchmarks import scale

    phase = {"edge_cut": 10, "balance_time": 0.1, "migrate_time": 0.2, "compute_time": 1.0, "imbalance_after": 1.01}
    summary = {"cells_initial": 400, "total_time": 2.0, "final_imbalance": 1.01, "phases": [phase],
               "wall_seconds": 7.0}
    case = dict(setup="quickstart", mesh="grid20x20", capacities="homo", kind="weights", iterations=5, phases=1,
                ranks=4)
    (tmp_path / "old.json").write_text(json.dumps({"case": {**case, "method": "pcg"}, "summary": summary,
                                                   "seconds": 8.0, "peak_rss": 2**30}))
    (tmp_path / "new.json").write_text(json.dumps({"case": {**case, "method": "metis"}, "summary": summary,
                                                   "seconds": 8.0, "peak_rss": 2**30, "bound_seconds": 0.5}))
    (tmp_path / "bound-grid20x20-5.json").write_text(json.dumps({"seconds": 0.5}))
    assert scale.main(["report", "--out", str(tmp_path)]) == 0
    head, rows = table(capsys.readouterr().out)
    assert head[-2:] == ["numpy bound (s)", "wall / bound"]
    got = {r[1]: r[-2:] for r in rows}
    assert got == {"pcg": ["", ""], "metis": ["0.5", "16.0"]}
    with (tmp_path / "scale.csv").open() as f:
        by = {r["method"]: r for r in csv.DictReader(f)}
    assert by["metis"]["bound_seconds"] == "0.5" and by["pcg"]["bound_seconds"] == ""


@pytest.mark.mpi  # starts mpiexec itself
@pytest.mark.slow
def test_async_mesh_tiny(tmp_path):
    out = tmp_path / "c.csv"
    res = bench("async_mesh", "--ranks", "2", "--balancers", "none", "--platforms", "hetero", "--iterations", "5",
                "--out", str(tmp_path / "runs"), "--csv", str(out), timeout=300)
    head, rows = table(res.stdout)
    assert head[:3] == ["platform (2 ranks)", "balancer", "mode"] and head[-2:] == ["worth sync sweeps", "cell sends"]
    assert [r[2] for r in rows] == ["sync", "async"]
    with out.open() as f:
        sync, asy = list(csv.DictReader(f))
    # the sync run is serial Jacobi exactly: worth all its sweeps; async differs (stale ghosts), worth fewer
    assert float(sync["dist_sync"]) == 0.0 and sync["sync_sweeps_equal"] == sync["sweeps"] == "20"
    assert float(asy["dist_sync"]) > 0.0 and 0 < int(asy["sync_sweeps_equal"]) < 20
    assert float(asy["total_time"]) < float(sync["total_time"])


def test_migration_bound_on_a_hand_made_run(tmp_path):
    """An 8 × 4 grid in two halves, the left half's weights doubled: excess 8 on the one subdomain edge, so every
    flow carries 8 load-hops and at least 4 cells of weight 2 move; the 'METIS' run moved 4 such cells."""
    import numpy as np

    run = tmp_path / "run"
    run.mkdir()
    (run / "scenario.yaml").write_text("name: t\nprocessors: 2\nmesh: {grid: 8x4}\nplatform: {capacities: homo}\n")
    x = np.arange(32) % 8  # the grid numbers its cells row by row
    owner0 = (x >= 4).astype(np.int64)
    w1 = np.where(owner0 == 0, 2.0, 1.0)
    owner1 = owner0.copy()
    owner1[np.flatnonzero(x == 3)] = 1  # the left half's column next to the boundary: 4 cells of weight 2
    np.savez(run / "partitions.npz", owner_000=owner0, owner_001=owner1, weight_000=np.ones(32), weight_001=w1)
    res = bench("migration_bound", str(run), "--metis", str(run))
    got = dict(line.split(": ") for line in res.stdout.strip().splitlines())
    assert got["subdomain edges"] == "1" and got["excess"] == "8"
    assert got["fewest load-hops (uniform costs)"] == "8" and got["load-hops of the minimal flow"] == "8"
    assert got["cells moved, at least (one boundary each)"] == "4" and got["METIS cells moved"] == "4"
    assert got["METIS weight moved"] == "8" and got["hops per unit of excess"] == "1"
    bad = subprocess.run([sys.executable, "-m", "benchmarks.migration_bound", str(tmp_path)], capture_output=True,
                         text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no partitions.npz" in bad.stderr
