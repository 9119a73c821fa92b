from __future__ import annotations

import csv

import pytest

from hermes.lab.bench import diffusion_family, polynomial_family
from tests.test_cli import cli


def test_diffusion_family_rows_and_eps0_beats_one_on_paths():
    rows = diffusion_family([16, 32], topologies=("path",), environments=("HCUW",), loads=("one",),
                            algorithms=("gda0", "gda1"))
    it = {(r["p"], r["algorithm"]): r["iterations"] for r in rows}
    assert len(rows) == 4 and all(r["converged"] for r in rows)
    for p in (16, 32):
        assert it[(p, "gda0")] < it[(p, "gda1")]


def test_polynomial_family_reports_time_and_topology_characteristics():
    rows = polynomial_family([15], topologies=("path", "star", "complete"), algorithms=("pcg",))
    by = {r["topology"]: r for r in rows}
    assert (by["path"]["diameter"], by["path"]["max_degree"]) == (14, 2)
    assert (by["star"]["diameter"], by["star"]["max_degree"]) == (2, 14)
    assert by["complete"]["connectivity"] == 1.0 and by["complete"]["diameter"] == 1
    assert all(r["time"] > 0 and r["exchange_rounds"] == r["iterations"] + 1 for r in rows)


@pytest.mark.slow
def test_flow_bench_cli_quick_writes_csv_and_plots(tmp_path):
    res = cli("flow-bench", "--quick", "--family", "polynomial", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader((tmp_path / "polynomial.csv").open()))
    assert {r["algorithm"] for r in rows} == {"pcg", "lpa", "mpa"}
    assert (tmp_path / "polynomial-table-8.7.png").stat().st_size > 20_000
