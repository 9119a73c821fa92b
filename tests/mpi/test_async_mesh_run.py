"""``hermes run`` with ``application.mode: async`` under real mpiexec: deterministic virtual runs, conservation,
Jacobi that differs from serial but stays within the monotone bounds and converges, async faster than sync when
nobody waits, the wall clock and the synthetic kernel."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from hermes.app.mesh.kernels import jacobi_serial
from hermes.data.generators import grid
from tests.conftest import ROOT, run_mpi

SCENARIO = str(ROOT / "scenarios" / "async-mesh.yaml")
#: fields that measure real time
WALL = {"wall_seconds", "adapt_wall_seconds"}


def hermes(out, *args, processes=2, timeout=300):
    """``hermes run`` on 2 MPI processes hosting the scenario's processors (results identical to one process per
    processor: tests/test_hosting.py); the wall clock needs one process per processor."""
    return run_mpi(processes, ["run", *args, "--out", str(out), "--no-launch", "--quiet", "--no-pictures"],
                   timeout=timeout)


def summary(out) -> dict:
    return json.loads((Path(out) / "summary.json").read_text())


@pytest.mark.mpi
@pytest.mark.slow
def test_async_quickstart_is_deterministic_conserves_and_converges(tmp_path):
    runs = {}
    for name in ("a", "b", "sync"):
        mode = "sync" if name == "sync" else "async"
        # b runs one process per processor (4): the same run whatever the processes and their scheduling
        res = hermes(tmp_path / name, "--set", f"application.mode={mode}", "--set", "output.vtu=true",
                     processes=4 if name == "b" else 2)
        assert res.returncode == 0, res.stderr
        runs[name] = summary(tmp_path / name)
    a, b, sync = runs["a"], runs["b"], runs["sync"]
    # the virtual clock: bit for bit the same run, on 2 processes or 4, whatever the processes' scheduling
    assert {k: v for k, v in a.items() if k not in WALL} == {k: v for k, v in b.items() if k not in WALL}
    assert (tmp_path / "a" / "phases.csv").read_bytes() == (tmp_path / "b" / "phases.csv").read_bytes()
    assert a["mode"] == "async" and "mode" not in sync
    assert a["cells_final"] == a["cells_initial"] == 1200 and a["cells_moved"] > 0
    # the adaptation does not read u (a front): async and sync see the same weights
    assert a["weight_final"] == pytest.approx(sync["weight_final"], rel=1e-12)
    pa, ps = np.load(tmp_path / "a" / "partitions.npz"), np.load(tmp_path / "sync" / "partitions.npz")
    for k in range(5):
        assert np.array_equal(np.sort(pa[f"weight_{k:03d}"]), np.sort(ps[f"weight_{k:03d}"]))
        assert np.all(np.bincount(pa[f"owner_{k:03d}"], minlength=4) > 0)
    # Jacobi: the sync run is serial Jacobi exactly; the async one differs (stale ghosts) and is reported
    mesh = grid(40, 30)
    sweeps = 4 * 20
    assert sync["jacobi_max_rel_error"] == 0.0 and 0.0 < a["jacobi_max_rel_error"] < 1.0
    assert a["final_residual"] > 0.0
    u = pa["u_004"]
    assert not np.array_equal(u, ps["u_004"])
    # from u = 0 the map is monotone: one sync sweep ≤ u ≤ p·(all sweeps) sync sweeps (hermes/app/mesh/async_mesh.py)
    assert np.all(u >= jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, 1))
    assert np.all(u <= jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, 4 * sweeps))
    # and the distance to the solution shrinks phase after phase
    star = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, 3000)
    dist = [float(np.max(np.abs(star - pa[f"u_{k:03d}"]))) for k in range(5)]
    assert all(x > y for x, y in zip(dist, dist[1:])), dist
    rows = list(csv.DictReader((tmp_path / "a" / "phases.csv").open()))
    assert len(rows) == 16


@pytest.mark.mpi
@pytest.mark.slow
def test_async_takes_less_virtual_time_when_nobody_waits(tmp_path):
    """Homogeneous capacities and no balancer: sync pays an exchange and a reduction per sweep, async only the
    first exchange and the last reduction (its sends overlap the sweeps)."""
    t = {}
    for mode in ("sync", "async"):
        res = hermes(tmp_path / mode, SCENARIO, "--set", "processors=3", "--set", "platform.capacities=homo",
                     "--set", "platform.links=[]", "--set", "balancer.algorithm=none", "--set",
                     "adaptation.phases=2", "--set", f"application.mode={mode}")
        assert res.returncode == 0, res.stderr
        s = summary(tmp_path / mode)
        t[mode] = s["total_time"]
        compute = [ph["compute_time"] for ph in s["phases"]]
        t[mode + "_compute"] = compute
    assert t["async"] < t["sync"], t
    assert t["async_compute"] == pytest.approx(t["sync_compute"], rel=1e-12)  # the same work per sweep


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("extra", [["--set", "clock=wall"], ["--set", "application.kernel=synthetic"]])
def test_async_wall_clock_and_synthetic_kernel_finish(tmp_path, extra):
    out = tmp_path / "o"
    res = hermes(out, SCENARIO, "--set", "processors=3", "--set", "platform.capacities=[0.5, 0.3, 0.2]",
                 "--set", "platform.links=[]", "--set", "adaptation.phases=2", "--set", "application.iterations=5",
                 *extra, processes=3 if "clock=wall" in extra else 2, timeout=240)
    assert res.returncode == 0, res.stderr
    s = summary(out)
    assert s["mode"] == "async" and s["cells_final"] == 1200 and len(s["phases"]) == 2
    if s["kernel"] == "synthetic":
        assert s["jacobi_max_rel_error"] is None and s["final_residual"] > 0
    else:
        assert s["clock"] == "wall" and 0.0 < s["jacobi_max_rel_error"] < 1.0
        assert all(ph["compute_time"] > 0 for ph in s["phases"])


@pytest.mark.mpi
@pytest.mark.slow
def test_async_with_link_congestion_is_deterministic(tmp_path):
    """The extra load's congested links give the async messages their durations (ProcessorLoad.preview_send)."""
    scen = str(ROOT / "scenarios" / "extra-load-congestion.yaml")
    got = []
    for name in ("a", "b"):
        res = hermes(tmp_path / name, scen, "--set", "application.mode=async", "--set", "adaptation.phases=2",
                     timeout=400)
        assert res.returncode == 0, res.stderr
        got.append(summary(tmp_path / name))
    a, b = ({k: v for k, v in s.items() if k not in WALL} for s in got)
    assert a == b and a["mode"] == "async" and a["cells_final"] == 380 and len(a["phases"]) == 2
    assert (tmp_path / "a" / "phases.csv").read_bytes() == (tmp_path / "b" / "phases.csv").read_bytes()
