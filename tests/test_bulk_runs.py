"""Whole runs with the bulk forms (run.bulk: auto, the default) against every processor's own loop (off), hosted in
one process: summary.json, phases.csv and partitions.npz bit for bit — for the balancers with a bulk form, the
realisation and migration in bulk (gain and peel selections, adaptive and literal, exact ghosts with the boundary
refinement; METIS' and Grapevine's destinations), on
heterogeneous capacities that change by phase and with a platform profile (the balancer's messages on their own
links, a collective's own latency). Across MPI processes: tests/test_hosting.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_hosting import _results

ROOT = Path(__file__).resolve().parents[1]


COMPACT = ["--set", "balancer.ghosts=exact", "--set", "balancer.conductance=boundary", "--set",
           "balancer.refinement.passes=12"]


#: the variants of a balancer: the compact setting (exact ghosts, refinement), the cells travelling hop by hop
#: (``delivery: hops``; direct delivery is the default), the literal realisation by peeling
VARIANTS = {"": [], "compact": COMPACT, "hops": ["--set", "balancer.delivery=hops"],
            "single": ["--set", "balancer.pcg.form=single-reduction"],
            "peel": ["--set", "balancer.selection=peel", "--set", "balancer.realisation=literal"]}


@pytest.mark.parametrize("balancer", ["pcg", "pcg+hops", "pcg+single", "chebyshev", "lps", "mpa", "none",
                                      "mincost+compact", "gda0+peel", "metis", "grapevine"])
@pytest.mark.parametrize("platform", ["profile", "table"])
def test_a_run_in_bulk_is_each_processor_s_own_loop(tmp_path, balancer, platform):
    algorithm, _, variant = balancer.partition("+")
    base = ["run", "--no-launch", "--no-pictures", "--quiet", "--set", "processors=7", "--set", "mesh.grid=40x30",
            "--set", f"balancer.algorithm={algorithm}", "--set", "adaptation.phases=3", *VARIANTS[variant]]
    base += (["--set", "platform.profile=thesis2003", "--set", "platform.capacities=homo"] if platform == "profile"
             else ["--set", "platform.capacities=[1,2,3,1,2,3,4]", "--set",
                   "platform.schedule=[[1,2,3,1,2,3,4],[4,3,2,1,1,1,1],[1,1,1,1,5,5,5]]"])
    got = {}
    for mode in ("off", "auto"):
        out = tmp_path / mode
        res = subprocess.run([sys.executable, "-m", "hermes", *base, "--set", f"run.bulk={mode}", "--out", str(out)],
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert res.returncode == 0, res.stderr
        got[mode] = _results(out)
    assert got["auto"] == got["off"]
    assert json.loads(got["off"][0])["total_time"] > 0
