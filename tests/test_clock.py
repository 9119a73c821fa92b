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
