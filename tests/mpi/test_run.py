"""hermes run end to end under real mpiexec: outputs, conservation, determinism, errors, thesis claims."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from hermes.data.adapt import adapt_weights, region_mask
from hermes.data.generators import grid
from hermes.scenario import QUICKSTART, parse_scenario
from tests.conftest import ROOT, run_mpi
from tests.tolerances import EPS, flops, gamma

PHASE_KEYS = {"phase", "time", "compute_time", "comm_time", "sync_time", "balance_time", "migrate_time",
              "imbalance_before", "imbalance_after", "cells_moved", "cell_sends", "migrated_cells", "migrated_weight",
              "edge_cut", "balance_iterations"}
TOP_KEYS = {"scenario", "processors", "balancer", "clock", "seed", "versions", "total_time", "final_imbalance",
            "cells_initial", "cells_final", "weight_initial", "weight_final", "cells_moved", "cell_sends",
            "migrated_cells", "phases"}


def hermes(n, out, *args, timeout=240):
    res = run_mpi(n, ["run", *args, "--out", str(out), "--no-launch", "--quiet"], timeout=timeout)
    return res


def summary(out):
    return json.loads((Path(out) / "summary.json").read_text())


ALL_BALANCERS = ["none", "pcg", "gda0", "gda1", "gda2", "gda3", "gda4", "gda5", "gda6", "sos", "sos_opt", "implicit",
                 "implicit_watts", "lps", "lpa", "mpa", "ada", "fos", "grapevine", "metis", "scotch", "auto", "chebyshev",
                 "mincost"]


def test_every_registered_balancer_is_exercised_here():
    """Every built-in a mesh run can use; the replay-only ones (informandtransfer) are exercised by tests/trace."""
    from hermes.balance.registry import BALANCERS, mesh_balancers

    assert sorted(mesh_balancers()) == sorted(ALL_BALANCERS)
    assert sorted(set(BALANCERS) - set(mesh_balancers())) == ["informandtransfer"]


@pytest.mark.parametrize("balancer", ALL_BALANCERS)
@pytest.mark.slow
def test_quickstart_each_balancer_conserves_and_matches_serial_jacobi(tmp_path, balancer):
    out = tmp_path / balancer
    res = hermes(2, out, "--set", f"balancer.algorithm={balancer}", "--no-pictures")
    assert res.returncode == 0, res.stderr
    s = summary(out)
    assert TOP_KEYS <= set(s) and all(PHASE_KEYS <= set(p) for p in s["phases"])
    assert s["processors"] == 4 and s["balancer"] == balancer and len(s["phases"]) == 4
    assert s["cells_final"] == s["cells_initial"] == 1200
    # weights: every cell keeps its weight through every migration; adaptation multiplies exactly the
    # region's cells by the factor — recomputed here on the whole mesh, independently of the distribution
    partitions = np.load(out / "partitions.npz")
    mesh = grid(40, 30)
    region = parse_scenario(QUICKSTART).adaptation.region
    bbox = (mesh.coords.min(axis=0), mesh.coords.max(axis=0))
    expected = mesh.weights.copy()
    assert np.array_equal(partitions["weight_000"], expected)
    for k in range(1, 5):
        expected = adapt_weights(expected, region_mask(region, mesh.coords, np.arange(1200), k, 1, bbox), 2.0)
        assert np.array_equal(partitions[f"weight_{k:03d}"], expected)
    # the same positive weights (exact products by 2) summed in another order: γ_n on each side
    assert s["weight_final"] == pytest.approx(expected.sum(), rel=2 * flops(expected.size))
    for k in range(5):
        owner = partitions[f"owner_{k:03d}"]
        assert owner.min() == 0 and owner.max() == 3 and np.all(np.bincount(owner) > 0)
    # the real kernel: distributed Jacobi equals the serial sweeps on the whole mesh, bit for bit (both sum
    # every row left to right, hermes/app/mesh/kernels.py)
    assert s["jacobi_max_rel_error"] == 0.0
    rows = list(csv.DictReader((out / "phases.csv").open()))
    assert len(rows) == 16
    # the movement of cells: cells_moved counts the cells whose owner changed (the partitions say which),
    # cell_sends the cells the messages carried (the ranks' cells_sent); the old names are aliases of them
    for k, ph in enumerate(s["phases"], start=1):
        changed = int((partitions[f"owner_{k:03d}"] != partitions[f"owner_{k - 1:03d}"]).sum())
        assert ph["cells_moved"] == ph["quality"]["migration_cells"] == changed
        assert ph["cell_sends"] == ph["migrated_cells"] == sum(int(r["cells_sent"]) for r in rows
                                                                if int(r["phase"]) == k)
        assert ph["cell_sends"] >= ph["cells_moved"]
    assert s["cells_moved"] == sum(ph["cells_moved"] for ph in s["phases"])
    assert s["cell_sends"] == s["migrated_cells"] == sum(ph["cell_sends"] for ph in s["phases"])
    if balancer == "ada":  # Θ is computed once, then reused while the subdomain graph stays the same
        cases = [i["ada_case"] for ph in s["phases"] for i in ph["balance_info"]]
        assert cases[0] == "recompute" and "reuse-loads" in cases[1:]
    if balancer == "auto":
        assert all(i["auto_choice"] in ("pcg", "lps", "lpa", "chebyshev") for ph in s["phases"] for i in ph["balance_info"])
    if balancer == "none":
        assert s["cells_moved"] == s["cell_sends"] == 0
    else:
        assert s["cells_moved"] > 0
        after = [p["imbalance_after"] for p in s["phases"]]
        assert max(after) < 1.1, after
        # the driver applies a flow only if it lowers the imbalance: compare up to the imbalances' evaluation
        # (ratios of sums of ≤ 1200 positive weights, γ_{n+4} × (ratio + 1) on each side)
        assert all(p["imbalance_after"] <= p["imbalance_before"] + 2 * gamma(1204) * (1 + p["imbalance_before"])
                   for p in s["phases"])


@pytest.mark.slow
def test_virtual_clock_is_deterministic_and_outputs_are_complete(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        res = hermes(4, out)
        assert res.returncode == 0, res.stderr
    sa, sb = summary(a), summary(b)
    for key in ("total_time", "final_imbalance", "cells_moved", "cell_sends", "phases"):
        assert sa[key] == sb[key]
    assert (a / "phases.csv").read_text() == (b / "phases.csv").read_text()
    pngs = sorted(p.name for p in a.glob("*.png"))
    assert pngs == ["partition-000.png", "partition-001.png", "partition-002.png", "partition-003.png",
                    "partition-004.png", "phases.png"]
    assert not list(a.glob("*.tmp")) and not list(a.glob(".*.tmp"))


@pytest.mark.slow
def test_monitor_recovers_configured_capacities(tmp_path):
    out = tmp_path / "m"
    res = hermes(4, out, "--set", "adaptation.phases=1", "--no-pictures")
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader((out / "phases.csv").open()))
    est = np.array([float(r["capacity_estimate"]) for r in rows])
    # rate = work / Δt with Δt the difference of two clock totals of size ≤ T (the rank's time in the phase),
    # so its relative error is ≤ 2 u T / Δt + 2 u; the normalisation adds γ_p. The driver's probe is
    # speed × 1e-3 work units, i.e. Δt = 1e-3 / (p c) of virtual time (hermes/lifecycle/driver.py, monitor)
    cols = ("compute_time", "comm_time", "sync_time", "balance_time", "migrate_time", "adapt_time")
    t_max = max(sum(float(r[c]) for c in cols) for r in rows)
    dt_min = 1e-3 / (4 * 0.4)
    assert np.allclose(est, [0.4, 0.2, 0.2, 0.2], rtol=2 * (EPS * t_max / dt_min + gamma(4 + 3)), atol=0)


@pytest.mark.slow
def test_more_processes_than_processors_is_one_line_on_every_rank(tmp_path):
    """The one bad input that needs a job of its own size (4 processes for 3 processors); the rest of the
    catalogue runs in one job (tests/test_bad_input.py)."""
    res = hermes(4, tmp_path / "bad", "--set", "processors=3", "--set", "platform.capacities=homo", timeout=120)
    assert res.returncode != 0
    err_lines = [l for l in res.stderr.splitlines() if l.startswith("hermes: error:")]
    assert len(err_lines) == 1, res.stderr  # only rank 0 prints
    assert "asks for 3 processors but the job has 4" in err_lines[0]
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    assert not (tmp_path / "bad" / "summary.json").exists()


@pytest.mark.slow
def test_thesis_heterogeneous_fair_balancing_pays_off(tmp_path):
    """Thesis Table 10.7: with varying capacities, fair balancers beat no balancing and equal-target METIS."""
    scen = str(ROOT / "scenarios" / "thesis-heterogeneous.yaml")
    times, finals = {}, {}
    for name, extra in (("none", []), ("pcg", []), ("metis", ["--set", "balancer.targets=equal"])):
        out = tmp_path / name
        res = run_mpi(2, ["run", scen, "--set", f"balancer.algorithm={name}", *extra, "--out", str(out),
                           "--no-launch", "--quiet", "--no-pictures"], timeout=400)
        assert res.returncode == 0, res.stderr
        s = summary(out)
        times[name], finals[name] = s["total_time"], s["final_imbalance"]
        assert s["cells_final"] == 380
    assert times["pcg"] < 0.5 * times["none"], times
    assert times["pcg"] < 0.7 * times["metis"], times
    assert finals["pcg"] < finals["none"], finals
    # after every balanced phase the distribution is fair within what 25 cells per rank allow: no rank
    # exceeds its fair load by half the heaviest cell (what a selection can guarantee; weights reach 128)
    rows = list(csv.DictReader((tmp_path / "pcg" / "phases.csv").open()))
    parts = np.load(tmp_path / "pcg" / "partitions.npz")
    for k in range(1, 8):
        over = max(float(r["load"]) - float(r["fair_load"]) for r in rows if int(r["phase"]) == k)
        assert over <= 0.5 * parts[f"weight_{k:03d}"].max(), (k, over)
    after = [p["imbalance_after"] for p in summary(tmp_path / "pcg")["phases"]]
    assert max(after) < 1.15, after


@pytest.mark.slow
def test_thesis_homogeneous_balancing_pays_off(tmp_path):
    """Thesis Table 10.5: constant capacities, the adaptation alone unbalances; PCG restores fairness."""
    scen = str(ROOT / "scenarios" / "thesis-homogeneous.yaml")
    got = {}
    for name in ("none", "pcg"):
        out = tmp_path / name
        res = run_mpi(2, ["run", scen, "--set", f"balancer.algorithm={name}", "--out", str(out), "--no-launch",
                           "--quiet", "--no-pictures"], timeout=400)
        assert res.returncode == 0, res.stderr
        got[name] = summary(out)
    assert got["pcg"]["total_time"] < 0.6 * got["none"]["total_time"]
    assert got["none"]["final_imbalance"] > 1.5 and got["pcg"]["final_imbalance"] < 1.1


@pytest.mark.slow
def test_lshape_vtu_scenario_runs_with_file_mesh(tmp_path):
    out = tmp_path / "l"
    res = run_mpi(6, ["run", str(ROOT / "scenarios" / "lshape.yaml"), "--out", str(out), "--no-launch", "--quiet"],
                  timeout=240)
    assert res.returncode == 0, res.stderr
    s = summary(out)
    assert s["cells_final"] == 1536 and s["jacobi_max_rel_error"] == 0.0  # unrefined: bit for bit
    assert s["final_imbalance"] < 1.05
    assert (out / "partition-003.png").stat().st_size > 10_000


@pytest.mark.slow
def test_wall_clock_fills_the_same_columns(tmp_path):
    out = tmp_path / "w"
    res = hermes(4, out, "--set", "clock=wall", "--set", "adaptation.phases=2", "--set", "application.iterations=3",
                 "--no-pictures")
    assert res.returncode == 0, res.stderr
    s = summary(out)
    assert s["clock"] == "wall" and s["cells_final"] == 1200 and s["jacobi_max_rel_error"] == 0.0
    for ph in s["phases"]:
        assert ph["time"] > 0 and ph["compute_time"] > 0 and ph["comm_time"] > 0 and ph["balance_time"] > 0
        parts = sum(ph[f"{c}_time"] for c in ("compute", "comm", "sync", "balance", "migrate"))
        assert parts <= ph["time"] * 1.05
