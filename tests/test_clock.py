from __future__ import annotations

import numpy as np
import pytest

from hermes.runtime.clock import Links, VirtualClock


def test_virtual_compute_is_work_over_rate_and_categories_follow_activity():
    c = VirtualClock(rank=1, size=4, links=Links(), speed=1000.0, capacity=0.5)
    assert c.rate == pytest.approx(2000.0)  # speed * p * c_i
    c.compute(4000)
    assert c.now == pytest.approx(2.0) and c.totals["compute"] == pytest.approx(2.0)
    with c.activity("balance"):
        c.compute(2000)
    assert c.totals["balance"] == pytest.approx(1.0) and c.totals["compute"] == pytest.approx(2.0)


def test_exchange_waits_for_late_message_as_sync():
    links = Links(latency=1e-3, bandwidth=1e6)
    c = VirtualClock(0, 2, links, 1.0, 0.5)
    c.exchanged(np.array([links.cost(0, 1, 1000)]), np.array([5.0]))
    assert c.totals["comm"] == pytest.approx(2e-3)
    assert c.now == pytest.approx(5.0) and c.totals["sync"] == pytest.approx(5.0 - 2e-3)


def test_link_overrides_are_symmetric_and_collective_cost_logarithmic():
    links = Links(1e-4, 1e8, {(1, 2): (1e-2, 1e3)})
    assert links.cost(2, 1, 1000) == links.cost(1, 2, 1000) == pytest.approx(1e-2 + 1.0)
    assert links.collective_cost(8, 0) == pytest.approx(3e-4)
    assert links.collective_cost(1, 0) == 0.0


def test_balancing_without_a_profile_or_its_prices_charges_nothing_more():
    """No ``balance_links``: a call's name, degree and diameter change nothing (the diameter is never asked for);
    links without ``balance_prices``: the profile's links themselves, no set-up charged."""
    from hermes.runtime.clock import BalancePrices, Links, VirtualClock

    def never() -> int:
        raise AssertionError("the diameter was computed")

    plain = VirtualClock(0, 4, Links(), 1.0, 0.25)
    with plain.balancing("pcg", max_degree=7, diameter=never):
        assert plain.links == Links()
    assert plain.now == 0.0 and plain.totals["balance"] == 0.0
    prof = Links(0.0, 1e8, collective_latency=1e-3)
    plain.balance_links = prof
    with plain.balancing("pcg", max_degree=7, diameter=never):
        assert plain.links is prof
    assert plain.now == 0.0
    plain.balance_prices = BalancePrices(setup={"pcg": 0.5}, message=1e-3, allreduce_hop=0.0)
    with plain.balancing("pcg", max_degree=7, diameter=never):
        assert plain.links.cost(0, 1, 0.0) == 7e-3 and plain.links.collective_cost(4, 0.0) == 1e-3
    with plain.balancing():  # not a balancer's call (e.g. the policy's granularity reduction): unpriced
        assert plain.links is prof
    assert plain.now == 0.5 and plain.totals["balance"] == 0.5


def test_a_profile_less_run_never_prices_a_call(monkeypatch, tmp_path):
    """With every price made to fail, a run without a profile completes (nothing priced) and one with thesis2003
    fails (the prices are reached): the new terms cannot leak into profile-less runs."""
    import hermes
    from hermes.runtime.clock import BalancePrices

    def leaked(*a, **k):
        raise RuntimeError("a balancing call was priced")

    monkeypatch.setattr(BalancePrices, "links", leaked)
    monkeypatch.setattr(BalancePrices, "setup_of", leaked)

    def run(name: str, **extra):  # 4 processors hosted in this process (hermes.runtime.start), where the patch holds
        from hermes.lifecycle.driver import run as run_here
        from hermes.runtime.start import start

        sc = hermes.scenario(None, **{"balancer.algorithm": "pcg", "output.pictures": False, "adaptation.phases": 1,
                                      "processors": 4, **extra})
        return start(4, lambda c: run_here(sc, c, out_dir=tmp_path / name, quiet=True))[0]

    assert run("plain").summary["phases"][0]["balance_rounds"] >= 1
    with pytest.raises(Exception, match="a balancing call was priced"):
        run("profile", **{"platform.profile": "thesis2003"})
