"""The spectral precomputation of the eigen forms (lps, lpa, mpa) and of Chebyshev's exact bounds is charged to the
clock when computed, not when reused, not at all with ``spectrum: free``, and never for the thesis' monomial forms
or Chebyshev's cheap bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.balance.polynomial.leja import leja_order, log_amplification, spectral_plan
from hermes.balance.registry import BALANCERS, check_params
from hermes.runtime.clock import Links
from hermes.errors import BalancerError
from hermes.runtime.start import start
from hermes.lab.specs import parse_model
from tests.mpi.harness import RankView

EPS = float(np.finfo(np.float64).eps)
EIGEN = [("lps", {}), ("lpa", {}), ("mpa", {}), ("chebyshev", {"bounds": "exact"})]
LITERAL = [("lps", {"coefficients": "newton"}), ("lpa", {"coefficients": "faddeev"}),
           ("mpa", {"polynomial": "berlekamp-massey"})]
LINKS = Links(latency=2e-4, bandwidth=5e7)


def _serial(name, params, model, **extra):
    return BALANCERS[name].serial(model, **check_params(name, {**params, **extra}), links=LINKS)


def _expected(model, steps: int, trial: bool = True) -> float:
    """Gather of p + 2q words, 4/3 p³ flops at 256 flops per unit and 10⁶ units/s · p · c_0, broadcast of n + 1;
    where the discrete Leja orders' error bound 30 ε (p Γ + κ) is ≥ 1 the interval order (9 n² logarithms of 20
    flops), and where the chosen order's is ≥ 1 the trial: 4 sweeps of n steps, 4 flops per entry of the graph
    (p + 2q), all at the same rate."""
    p, levels = model.p, math.ceil(math.log2(model.p))
    gather = levels * (LINKS.latency + 8.0 * (p + 2 * model.q) / LINKS.bandwidth)
    solve = (4.0 / 3.0) * p ** 3 / (256.0 * 1e6 * p * model.capacities[0])
    plan = spectral_plan(model)
    rate = 256.0 * 1e6 * p * model.capacities[0]
    discrete = min(log_amplification(leja_order(plan.nodes, s), plan.eigenvalues[1:]) for s in ("max", "min"))
    if trial and 30 * EPS * (p * 10.0 ** discrete + plan.condition) >= 1.0:  # the interval order: 9 n² logs of 20
        solve += 9 * plan.steps ** 2 * 20.0 / rate
    if trial and plan.bound_error >= 1.0:
        solve += 4 * plan.steps * (p + 2 * model.q) * 4.0 / rate
    return gather + solve + levels * (LINKS.latency + 8.0 * (steps + 1) / LINKS.bandwidth)


@pytest.mark.parametrize("name, params", EIGEN)
@pytest.mark.parametrize("graph, caps", [("path:16", "homo"), ("mesh:4x5", "hcuw")])
def test_eigen_forms_charge_the_precomputation(name, params, graph, caps):
    model = parse_model(graph, caps, "1", "one")
    charged, free = _serial(name, params, model), _serial(name, params, model, spectrum="free")
    assert np.array_equal(charged.flow, free.flow)
    dt = _expected(model, _plan_steps(name, charged), name != "chebyshev")
    # the same schedule shifted by the precomputation on every rank (α-β sums: rounding only)
    assert charged.counters.time - free.counters.time == pytest.approx(dt, rel=1e-12)
    assert np.allclose(charged.extra["rank_times"] - free.extra["rank_times"], dt, rtol=1e-12, atol=0)
    assert charged.extra["spectrum_time"] == pytest.approx(dt, rel=1e-12) and free.extra["spectrum_time"] == 0.0
    extra = {k: v for k, v in charged.counters.collectives.items() if free.counters.collectives.get(k) != v}
    assert extra == {"gather": 1, "bcast": 1}


def _plan_steps(name, result) -> int:
    """Words rank 0 broadcasts after the eigensolve, less one: the nodes and refine count (n + 1), or
    Chebyshev's a, b, k (3)."""
    return 2 if name == "chebyshev" else result.extra["steps"]


@pytest.mark.parametrize("name, params", LITERAL + [("chebyshev", {"bounds": "cheap"})])
def test_monomial_forms_compute_no_spectrum(name, params):
    model = parse_model("path:8", "hcuw", "1", "one")
    a, b = _serial(name, params, model), _serial(name, params, model, spectrum="free")
    assert a.counters == b.counters and "gather" not in a.counters.collectives
    assert "spectrum_time" not in (a.extra or {})


def test_bad_spectrum_value_is_one_line():
    with pytest.raises(BalancerError, match=r"^balancer\.spectrum: .*'charged'.*'free'") as err:
        check_params("lpa", {"spectrum": "paid"})
    assert "\n" not in str(err.value)


def _calls(name: str, params: dict, models: list):
    """Rank r's (counters.time, collectives, spectrum info) of the registry run on each model in turn, one state."""
    def body(comm):
        state, out = {}, []
        for m in models:
            d = BALANCERS[name].run(RankView.of(comm, m, LINKS).context(check_params(name, params), state=state))
            out.append((d.counters.time, dict(d.counters.collectives), d.info["spectrum_computed"],
                        d.info["spectrum_time"]))
        return out
    return body


@pytest.mark.parametrize("name, params", EIGEN)
def test_distributed_charges_once_then_reuses(name, params):
    # the same graph with new loads reuses the plan (nothing charged); new capacities compute it again
    m0 = parse_model("mesh:2x3", "hcuw", "1", "random:1")
    m1 = m0.with_loads(np.arange(1.0, 7.0))
    m2 = parse_model("mesh:2x3", "homo", "1", "random:2")
    got = start(m0.p, _calls(name, params, [m0, m1, m2]))
    for k, (m, fresh) in enumerate([(m0, True), (m1, False), (m2, True)]):
        ref = _serial(name, params, m, spectrum="charged" if fresh else "free")
        for r in range(m.p):
            t, coll, computed, spent = got[r][k]
            # distributed = serial per rank (rank 0's solve reaches the others through the broadcast)
            assert t == pytest.approx(float(ref.extra["rank_times"][r]), rel=1e-12)
            assert coll == ref.counters.collectives and computed is fresh
            want = _expected(m, _plan_steps(name, ref), name != "chebyshev")
            assert spent == (pytest.approx(want, rel=1e-12) if fresh else 0.0)


def test_distributed_free_is_the_old_timing():
    m = parse_model("mesh:2x3", "hcuw", "1", "random:1")
    got = start(m.p, _calls("lpa", {"spectrum": "free"}, [m]))
    ref = _serial("lpa", {}, m, spectrum="free")
    assert all(got[r][0][:4] == (pytest.approx(float(ref.extra["rank_times"][r]), rel=1e-12),
                                 ref.counters.collectives, True, 0.0) for r in range(m.p))
    assert "gather" not in ref.counters.collectives


@pytest.mark.parametrize("graph, caps, chosen", [("path:12", "homo", "lps"), ("mesh:8x8", "hcuw", "chebyshev")])
def test_auto_charges_the_spectrum_it_decides_by(graph, caps, chosen):
    # auto computes the plan (charged there); the scheme it runs reuses it (Chebyshev's exact bounds too: one
    # gather, not two); with PCG the charge stays
    m = parse_model(graph, caps, "1", "random:1")

    def body(comm):
        d = BALANCERS["auto"].run(RankView.of(comm, m, LINKS).context(check_params("auto", {}), state={}))
        return d.counters.time, dict(d.counters.collectives), d.info["auto_choice"], d.info["spectrum_time"]

    got = start(m.p, body)
    ref = BALANCERS["auto"].serial(m, links=LINKS)
    assert ref.extra["auto_choice"] == chosen and ref.counters.collectives["gather"] == 1
    assert ref.counters.collectives["bcast"] == 1
    for r in range(m.p):
        assert got[r][0] == pytest.approx(float(ref.extra["rank_times"][r]), rel=1e-12)
        assert got[r][1:3] == (ref.counters.collectives, chosen) and got[r][1]["gather"] == 1
        assert got[r][3] == pytest.approx(ref.extra["spectrum_time"], rel=1e-12) and got[r][3] > 0
    assert ref.extra["spectrum_time"] == pytest.approx(_expected(m, spectral_plan(m).steps), rel=1e-12)
