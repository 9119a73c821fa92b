from __future__ import annotations

import numpy as np
import pytest

from hermes.balance.flow import check_balancing, flow_error
from hermes.balance.potential import auto
from hermes.balance.potential.auto import AUTO_TOLERANCE, choice, choose, graph_characteristics
from hermes.balance.registry import BALANCERS
from hermes.lab.specs import parse_model
from tests.tolerances import balancing_floor, potential_flow_tol


@pytest.mark.parametrize("graph, caps, expected", [
    ("complete:9", "homo", "lps"), ("path:22", "homo", "lps"), ("ring:8", "hcuw", "lps"), ("star:16", "homo", "lps"),
    ("path:22", "hcuw", "lpa"), ("mesh-file:meshes/airfoil.vtu:16", "hcuw", "lpa"), ("path:64", "hcuw", "chebyshev"),
    ("mesh:8x8", "hcuw", "chebyshev"), ("mesh:16x16", "homo", "chebyshev"),
])
def test_rule(graph, caps, expected):
    c = choice(parse_model(graph, caps, "1", "one"))
    assert c.name == expected and c.costs[expected] == min(c.costs.values())
    # the polynomial scheme is a candidate exactly when its predicted error is within the target
    assert ("lps" in c.costs) == ("inaccurate" not in c.reason)


def test_costs_are_the_modelled_times_of_the_schedules():
    # auto's cost of a method is the α-β time its serial reference reports under the default links
    from hermes.balance.registry import BALANCERS, check_params
    from hermes.runtime.clock import Links

    m = parse_model("path:22", "hcuw", "1", "one")
    c = choice(m)
    for name in ("lps", "lpa", "chebyshev"):
        # once auto holds the spectrum (charged when it computed it), a scheme costs its schedule alone
        params = {**(c.params if name in ("lps", "lpa") else auto.CHOSEN_PARAMS[name]), "spectrum": "free"}
        res = BALANCERS[name].serial(m, **check_params(name, params), links=Links())
        assert c.costs[name] == pytest.approx(res.counters.time, rel=1e-12)


def test_rule_above_the_spectrum_limit(monkeypatch):
    monkeypatch.setattr(auto, "SPECTRUM_LIMIT", 8)
    assert choose(parse_model("path:9", "homo", "1", "one"))[0] == "pcg"


def test_characteristics_match_table_8_7_for_15_vertices():
    # thesis Table 8.7 (p = 15): path diam 14? (the table prints 15: it counts vertices) — we count edges
    star = graph_characteristics(parse_model("star:15", "homo", "1", "one"))
    assert (star["diameter"], star["max_degree"]) == (2, 14) and star["density"] == pytest.approx(0.13, abs=0.01)
    comp = graph_characteristics(parse_model("complete:15", "homo", "1", "one"))
    assert (comp["diameter"], comp["max_degree"], comp["density"]) == (1, 14, 1.0)


@pytest.mark.parametrize("graph", ["path:5", "path:9", "path:40", "star:14", "mesh:4x5", "mesh:8x8", "tree:4:11",
                                   "complete:7", "ring:33"])
@pytest.mark.parametrize("seed", [0, 1])
def test_auto_reproduces_the_minimal_flow(graph, seed):
    # every candidate is accurate to 1e-10 by construction (predicted error, Chebyshev's step count) and
    # PCG runs to 1e-10 relative residual: 1e-8 leaves the margin of ‖L⁺‖-conditioning (κ ≤ 10⁴ here)
    model = parse_model(graph, "hcuw", "ijmod3", f"random:{seed}")
    res = BALANCERS["auto"].serial(model)
    assert res.extra["auto_choice"] in ("pcg", "lps", "lpa", "chebyshev")
    # auto runs a method only where its flow error is guaranteed (chebyshev: step count from the bounds; the
    # Leja forms: predicted error) or its residual is held (pcg) at AUTO_TOLERANCE: the balancing defect is then
    # at most twice that on the recursive residual (its drift from the true residual is below the tolerance
    # itself, tests/balance/test_pcg.py), and a potential flow is minimal to cond × its defect
    defect = 2 * AUTO_TOLERANCE + balancing_floor(model, res.flow)
    assert check_balancing(model, res.flow) <= defect
    assert flow_error(model, res.flow) <= potential_flow_tol(model, res.flow)
    b = np.linalg.norm(model.loads - model.fair_loads)
    off = np.linalg.norm(model.apply_flow(res.flow) - model.fair_loads)
    assert off <= (defect + balancing_floor(model, res.flow)) * b
