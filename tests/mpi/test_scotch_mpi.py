"""hermes run with the Scotch balancer under real mpiexec: cells conserved, balanced, fewer moves than METIS."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hermes.data.adapt import adapt_weights, region_mask
from hermes.data.generators import grid
from hermes.scenario import QUICKSTART, parse_scenario
from tests.conftest import run_mpi
from tests.tolerances import flops

pytestmark = pytest.mark.slow  # both tests share a module fixture of two runs (4 processors on 2 processes)


def hermes_run(out: Path, *overrides: str):
    res = run_mpi(2, ["run", "--out", str(out), "--no-launch", "--quiet", "--no-pictures",
                      *[a for o in overrides for a in ("--set", o)]], timeout=240)
    assert res.returncode == 0, res.stderr
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("scotch")
    return {name: (base / name, hermes_run(base / name, f"balancer.algorithm={name}")) for name in ("scotch", "metis")}


def test_scotch_run_conserves_cells_and_weights_and_balances(runs):
    out, s = runs["scotch"]
    assert s["balancer"] == "scotch" and s["processors"] == 4 and len(s["phases"]) == 4
    assert s["balancer_params"] == {"targets": "fair", "migration_cost": 1.0, "ufactor": 30}
    assert s["cells_final"] == s["cells_initial"] == 1200
    partitions = np.load(out / "partitions.npz")
    mesh = grid(40, 30)
    region = parse_scenario(QUICKSTART).adaptation.region
    bbox = (mesh.coords.min(axis=0), mesh.coords.max(axis=0))
    expected = mesh.weights.copy()
    for k in range(5):  # every cell keeps its weight through every migration
        if k:
            expected = adapt_weights(expected, region_mask(region, mesh.coords, np.arange(1200), k, 1, bbox), 2.0)
        assert np.array_equal(partitions[f"weight_{k:03d}"], expected)
        owner = partitions[f"owner_{k:03d}"]
        assert owner.size == 1200 and owner.min() == 0 and owner.max() == 3 and np.all(np.bincount(owner) > 0)
    assert s["weight_final"] == pytest.approx(expected.sum(), rel=2 * flops(expected.size))  # another order
    assert s["jacobi_max_rel_error"] == 0.0  # unrefined: both sum every row left to right, bit for bit
    after = [p["imbalance_after"] for p in s["phases"]]
    assert max(after) < 1.1, after  # measured ≤ 1.042
    assert all(p["imbalance_after"] < p["imbalance_before"] for p in s["phases"])
    assert all(p["balance_counters"]["collectives"].get("gather", 0) >= 1 for p in s["phases"])


def test_scotch_moves_fewer_cells_than_metis_scratch_remap(runs):
    scotch_moved = runs["scotch"][1]["cells_moved"]
    metis_moved = runs["metis"][1]["cells_moved"]
    assert 0 < scotch_moved < 0.6 * metis_moved, (scotch_moved, metis_moved)  # measured 364 vs 1,114
