"""hermes lab flow's engine: serial references on spec-built models, the result dict, the report, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hermes.balance.diffusion.gda import gda_counters
from hermes.balance.diffusion.matrices import diffusion_scalars
from hermes.balance.flow import FlowResult
from hermes.balance.interface import BalancerInfo, NoParams, Params
from hermes.balance.potential.pcg import pcg
from hermes.balance.registry import BALANCERS
from hermes.runtime.clock import Links
from hermes.runtime.comm import Counters
from hermes.errors import BalancerError, GraphError, ScenarioError
from hermes.lab.flow_lab import REPORT_ROWS, flow_algorithms, flow_lab, format_flow_report
from hermes.lab.specs import parse_model
from tests.tolerances import conservation_tol, converged_flow_tol, flops, potential_flow_tol, sum_tol

KEYS = {"algorithm", "p", "edges", "flow", "initial_loads", "fair_loads", "final_loads", "iterations",
        "convergence_factor", "flow_error", "exchange_rounds", "collectives", "messages", "bytes", "time"}

CASES = [("path:9", "hcuw", "kmod4", "one"), ("tree:2:15", "hcuw", "ijmod3", "high"),
         ("mesh:3x4", "homo", "1", "half"), ("torus:3x4", "hcuw", "kmod4", "random:5"),
         ("wheel:6", "1,2,3,1,2,3", "ijmod3", "random:2")]


@pytest.mark.parametrize("algorithm", ["gda0", "gda1", "pcg"])
@pytest.mark.parametrize("specs", CASES, ids=[c[0] for c in CASES])
def test_result_is_consistent_and_json_ready(algorithm, specs):
    r = flow_lab(*specs, algorithm)
    assert KEYS <= set(r) and r["algorithm"] == algorithm
    json.dumps(r, allow_nan=False)
    m = parse_model(*specs)
    assert r["edges"] == m.edges.tolist() and r["initial_loads"] == m.loads.tolist()
    # final loads recomputed here from the edges and the flow
    f, final = np.asarray(r["flow"]), m.loads.copy()
    np.add.at(final, m.edges[:, 0], -f)
    np.add.at(final, m.edges[:, 1], f)
    drift = conservation_tol(m, f, r["iterations"])  # the iteration's loads against l − A f (tests/tolerances.py)
    assert np.all(np.abs(np.asarray(r["final_loads"]) - final) <= drift)
    # every edge moves load between two ranks: the total is conserved up to the drift and the two sums' rounding
    assert abs(sum(r["final_loads"]) - m.loads.sum()) <= drift.sum() + sum_tol(r["final_loads"]) + sum_tol(m.loads)
    assert np.allclose(r["fair_loads"], m.capacities * m.loads.sum(), rtol=2 * flops(m.p + 1), atol=0)
    assert r["converged"] and r["imbalance_final"] < 1.01 < r["imbalance_initial"]
    assert r["exchange_rounds"] == r["iterations"] + 1
    if algorithm == "pcg":  # a potential flow: minimal to cond × its defect
        assert r["convergence_factor"] is None and r["flow_error"] <= potential_flow_tol(m, f)
    else:
        assert 0 < r["convergence_factor"] < 1
        assert r["messages"] == gda_counters(m, r["iterations"]).messages
        if specs[0].startswith(("path", "tree")):  # on a tree the balancing flow is unique
            rates = diffusion_scalars(m, "eps0" if algorithm == "gda0" else 1.0) * m.weights
            assert r["flow_error"] <= converged_flow_tol(m, rates, r["final_loads"])


def test_tolerance_is_passed_to_the_serial_reference():
    loose = flow_lab("path:16", "hcuw", "kmod4", "one", "gda0", tol=1e-1)
    tight = flow_lab("path:16", "hcuw", "kmod4", "one", "gda0", tol=1e-6)
    assert loose["params"]["tolerance"] == 1e-1 and tight["params"]["tolerance"] == 1e-6
    assert loose["iterations"] < tight["iterations"]
    assert tight["flow_error"] < loose["flow_error"]


@pytest.mark.parametrize("caps", ["homo", "hcuw"])
def test_gda0_beats_gda1_on_paths(caps):
    # thesis §5.7, Figs. 5.1–5.4: "GDA0 needed a significant fewer number of iterations than GDA1"
    it = {a: flow_lab("path:32", caps, "1", "high", a, tol=1e-4)["iterations"] for a in ("gda0", "gda1")}
    assert it["gda0"] < 0.8 * it["gda1"], it


@pytest.mark.parametrize("algorithm", ["gda0", "gda1", "pcg"])
def test_eq_is_balanced_on_a_homogeneous_system(algorithm):
    # JPDC §4: "for a load distribution of type EQ, all algorithms performed 0" iterations
    r = flow_lab("mesh:4x4", "homo", "1", "eq", algorithm)
    assert r["iterations"] == 0 and not any(r["flow"])
    # with HCUW speeds the same loads are unbalanced
    assert flow_lab("mesh:4x4", "hcuw", "1", "eq", algorithm)["iterations"] > 0


def test_links_give_the_alpha_beta_time():
    links = Links(latency=1e-5, bandwidth=1e9)
    r = flow_lab("ring:12", "hcuw", "ijmod3", "one", "pcg", tol=1e-10, links=links)
    ref = pcg(parse_model("ring:12", "hcuw", "ijmod3", "one"), tolerance=1e-10, links=links)
    assert r["time"] > 0 and r["time"] == ref.counters.time and r["iterations"] == ref.iterations
    assert flow_lab("ring:12", "hcuw", "ijmod3", "one", "pcg", tol=1e-10)["time"] == 0


def test_only_accepted_parameters_reach_the_serial_reference(monkeypatch):
    seen = {}

    def serial(model, *, tolerance):  # no links, no max_iterations
        seen["tolerance"] = tolerance
        return FlowResult(np.zeros(model.q), 0, True, Counters())

    class ToyParams(Params):
        tolerance: float = 0.5
        rounds: int = 3

    monkeypatch.setitem(BALANCERS, "toy", BalancerInfo("toy", lambda ctx: None, ToyParams, "toy", serial))
    monkeypatch.setitem(BALANCERS, "exact", BalancerInfo("exact", lambda ctx: None, NoParams, "exact", serial))
    r = flow_lab("path:3", "homo", "1", "one", "toy", tol=0.25, links=Links())
    assert seen == {"tolerance": 0.25} and r["params"] == {"tolerance": 0.25, "rounds": 3}
    assert "toy" in flow_algorithms() and "metis" not in flow_algorithms()
    with pytest.raises(BalancerError, match="--tol: algorithm 'exact' has no tolerance"):
        flow_lab("path:3", "homo", "1", "one", "exact", tol=0.1)


def test_errors():
    with pytest.raises(BalancerError,
                       match=r"unknown algorithm 'gda9' \(did you mean 'gda6' or 'gda5'\?\); valid: .*pcg") as err:
        flow_lab("path:4", "homo", "1", "one", "gda9")
    assert "metis" not in str(err.value)
    with pytest.raises(BalancerError, match="'metis' computes no flow"):
        flow_lab("path:4", "homo", "1", "one", "metis")
    with pytest.raises(BalancerError, match="tolerance"):
        flow_lab("path:4", "homo", "1", "one", "pcg", tol=2.0)
    with pytest.raises(BalancerError, match="unknown parameter"):
        flow_lab("path:4", "homo", "1", "one", "pcg", params={"eps": 1})
    with pytest.raises(GraphError, match="'path:0'"):
        flow_lab("path:0", "homo", "1", "one", "pcg")
    with pytest.raises(ScenarioError, match="'1,2'"):
        flow_lab("path:4", "1,2", "1", "one", "pcg")


def test_report():
    small = flow_lab("path:5", "hcuw", "kmod4", "one", "gda0")
    text = format_flow_report(small)
    assert text.startswith("hermes lab flow: gda0 on path:5 — 5 processors, 4 edges")
    assert f"iterations          {small['iterations']} (converged)" in text
    assert f"convergence factor  {small['convergence_factor']:.6g}" in text and "processor  capacity" in text
    assert "     0 -> 1     " in text and "--json" not in text
    big = format_flow_report(flow_lab("mesh:6x6", "homo", "1", "one", "pcg"))
    assert "convergence factor  n/a" in big and "processor  capacity" not in big
    assert f"... {60 - REPORT_ROWS} more edges (--json for all)" in big
