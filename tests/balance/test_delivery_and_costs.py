"""Direct delivery (``balancer.delivery``) and the price list (hermes.balance.central, docs/COSTS.md), in whole runs.

- Direct delivery plans a phase's realisation on identity records and ships every cell once: the partitions, the
  solution and the loads are those of the hop-by-hop realisation (the same selections), and every phase's cell
  sends equal its distinct cells moved (hop by hop they exceed them where cells are passed on).
- One price list: a balancer — a plug-in included — pays the model's gather in a round only if it reads
  ``ctx.model``; a flow's assembly is paid by every flow; a central solve (METIS) advances rank 0's clock by its law's
  work at rank 0's rate, which the others then wait for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hermes.balance.central import LAWS, law_terms, metis_units

ROOT = Path(__file__).resolve().parents[2]

#: 12 processors on a 60 x 40 grid, heterogeneous: flows of several levels (cells passed on hop by hop)
BASE = ["run", "--no-launch", "--no-pictures", "--quiet", "--set", "processors=12", "--set", "mesh.grid=60x40",
        "--set", "adaptation.phases=3", "--set", "platform.capacities=[1,2,3,1,2,3,4,1,1,2,2,3]"]


def _run(out: Path, *args: str, env=None) -> dict:
    res = subprocess.run([sys.executable, "-m", "hermes", *BASE, *args, "--out", str(out)], capture_output=True,
                         text=True, timeout=600, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("algorithm", ["pcg", "gda0"])
def test_direct_delivery_sends_each_cell_once_and_ends_where_hops_do(tmp_path, algorithm):
    got = {d: _run(tmp_path / d, "--set", f"balancer.algorithm={algorithm}", "--set", f"balancer.delivery={d}")
           for d in ("direct", "hops")}
    direct, hops = got["direct"], got["hops"]
    a, b = np.load(tmp_path / "direct" / "partitions.npz"), np.load(tmp_path / "hops" / "partitions.npz")
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:  # every phase's owners and weights
        assert np.array_equal(a[k], b[k]), k
    assert direct["jacobi_max_rel_error"] == hops["jacobi_max_rel_error"]  # the fields travelled with the cells
    passed_on = 0
    for pd, ph in zip(direct["phases"], hops["phases"]):
        assert pd["cells_moved"] == ph["cells_moved"] and pd["imbalance_after"] == ph["imbalance_after"]
        assert pd["cell_sends"] == pd["cells_moved"]  # each cell once, from its owner to its final rank
        assert ph["cell_sends"] >= ph["cells_moved"]
        passed_on += ph["cell_sends"] - ph["cells_moved"]
    assert passed_on > 0  # the case is one where hop by hop passes cells on (else the test shows nothing)


PLUGINS = textwrap.dedent('''
    import numpy as np
    from hermes.balance import Decision


    class Reads:
        """A zero flow on the model's edges: reads ctx.model."""

        def run(self, ctx):
            return Decision(flow=np.zeros(ctx.model.q))


    class Blind:
        """Every cell stays: reads nothing beyond its rank."""

        def run(self, ctx):
            return Decision(dest=np.full(ctx.dom.n, ctx.comm.Get_rank(), dtype=np.int64))
''')


def test_the_model_is_charged_to_a_plugin_that_reads_it_and_only_then(tmp_path):
    (tmp_path / "pricing.py").write_text(PLUGINS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    seen = {}
    for name in ("Reads", "Blind"):
        s = _run(tmp_path / name, "--set", f"balancer.algorithm=pricing:{name}", "--set", "adaptation.phases=1",
                 env=env)
        seen[name] = s["phases"][0]["balance_counters"]["collectives"]
    assert seen["Reads"].get("model") == 1 and seen["Reads"].get("flow") == 1
    assert "model" not in seen["Blind"] and "flow" not in seen["Blind"]


def test_metis_pays_its_partitioning_at_rank_0_s_rate(tmp_path):
    """The law's work at rank 0's rate, every phase: METIS' balancing time grows by exactly that over a run whose
    law is zero (the same partitions: the clock does not steer METIS)."""
    s = _run(tmp_path / "m", "--set", "balancer.algorithm=metis", "--set", "platform.capacities=homo")
    n, nnz, p = 60 * 40, 2 * (59 * 40 + 60 * 39), 12
    speed = 1.0e5  # the quickstart platform's work units per second of an average processor (rank 0: c = 1/p)
    units = metis_units(n, nnz, p)
    assert units == pytest.approx(sum(c * t for c, t in zip(LAWS["metis"][0], law_terms("metis", n=n, nnz=nnz, k=p))))
    for ph in s["phases"]:
        # the phase's balance time (mean over the ranks) holds rank 0's partitioning, which every rank waits for
        assert ph["balance_time"] >= units / speed
