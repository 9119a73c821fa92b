"""The cost model of ``balancer.trigger: auto`` (hermes.balance.payoff)."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.balance.flow import minimal_flow
from hermes.balance.model import Model
from hermes.balance.payoff import (History, PhaseCost, excess, first_estimate, iteration_time, migration_time,
                                   payoff)
from hermes.balance.registry import get_balancer
from hermes.runtime.clock import Links


def _path(loads, caps=None):
    p = len(loads)
    return Model.create(p, [(i, i + 1) for i in range(p - 1)], loads, caps if caps is not None else np.ones(p))


def test_gain_is_the_time_the_slowest_rank_saves_over_the_phase():
    m = _path([30.0, 10.0, 20.0])  # L = 60, fair 20, imbalance 1.5
    assert excess(m) == 10.0
    t = iteration_time(m, work_per_weight=2.0, speed=10.0)
    assert t == pytest.approx(2.0 * 60 / (10.0 * 3))  # κ L / (s p): the iteration at fair loads
    pay = payoff(0, m, PhaseCost(iterations=50, work_per_weight=2.0, speed=10.0, bytes_per_edge=64.0),
                 expected_after=1.0, balance_cost=0.5, migrate_cost=0.25, source="test")
    # the slowest rank computes 30 units at rate 10 (capacity 1/3 of s p = 30): 2 s per iteration → 4 at fair
    assert pay.gain == pytest.approx(50 * (2.0 * 30 / 10.0 - 2.0 * 20 / 10.0))
    assert pay.cost == 0.75 and pay.balance and pay.as_dict()["choice"] == "balance"
    short = payoff(0, m, PhaseCost(iterations=1, work_per_weight=2.0, speed=10.0, bytes_per_edge=64.0),
                   expected_after=1.0, balance_cost=5.0, migrate_cost=0.0, source="test")
    assert not short.balance and short.as_dict()["choice"] == "skip"


def test_no_gain_when_the_round_cannot_do_better_than_the_last():
    m = _path([21.0, 20.0, 19.0])
    pay = payoff(1, m, PhaseCost(iterations=1000, work_per_weight=1.0, speed=1.0, bytes_per_edge=64.0),
                 expected_after=1.2, balance_cost=0.0, migrate_cost=1e-9, source="test")
    assert pay.expected_after == pytest.approx(m.imbalance) and pay.gain == 0.0 and not pay.balance


def test_migration_time_is_levels_latencies_plus_the_largest_outflow():
    m = _path([30.0, 10.0, 20.0])
    f = minimal_flow(m)  # 10 from 0 to 1, nothing on (1, 2)
    assert migration_time(m, f, levels=2, bytes_per_weight=100.0, latency=1e-3, bandwidth=1e6) == \
        pytest.approx(2e-3 + 10 * 100.0 / 1e6)


def test_first_estimate_from_the_serial_reference_or_nothing():
    m = _path([30.0, 10.0, 20.0, 5.0])
    links = Links(1e-4, 1e8)
    tb, tm, src = first_estimate(get_balancer("pcg"), m, {}, links, 100.0)
    ref = get_balancer("pcg").flow(m, links=links)
    assert tb == ref.counters.time > 0 and tm > 0 and "serial" in src
    assert first_estimate(get_balancer("metis"), m, {}, links, 100.0)[:2] == (0.0, 0.0)


def test_migration_rate_is_over_the_last_balanced_phase_not_its_last_round():
    # phase 1: a round from excess 1000 migrating in 0.1 s, then a correction from excess 0.01 in 0.002 s
    # (latencies); the rate of the last round alone would predict 0.002 * 1000 / 0.01 = 200 s for phase 2
    h = History()
    h.record(0.01, 0.1, 1000.0, phase=1)
    h.record(0.01, 0.002, 0.01, phase=1)
    assert h.migrate_estimate(1000.0) == pytest.approx(0.102 * 1000.0 / 1000.01)
    h.record(0.02, 0.05, 500.0, phase=2)  # a new phase restarts the sums
    assert h.balance_time == 0.02 and h.migrate_estimate(250.0) == pytest.approx(0.025)
    assert History().migrate_estimate(5.0) == 0.0


def test_a_fixed_cost_is_added_once_not_scaled_by_the_excess():
    # a refinement of 0.05 s (latency-bound) beside rounds that moved 1000 units of excess in 0.1 s: it must
    # not enter the rate, or 10 units of excess would be priced 0.15 * 10 / 1000 instead of 0.001 + 0.05
    h = History()
    h.record(0.01, 0.1, 1000.0, phase=1)
    assert h.migrate_estimate(10.0, fixed=0.05) == pytest.approx(0.1 * 10.0 / 1000.0 + 0.05)
    assert h.migrate_estimate(10.0) == pytest.approx(0.001)
    assert History().migrate_estimate(5.0, fixed=0.05) == 0.05
