"""The oracle's equal-finish horizon (hermes.monitor.oracle) on extra-load models with hand solutions."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.runtime.clock import Links
from hermes.extraload.sharing import make_loads
from hermes.extraload.tasks import parse_tasks
from hermes.monitor.oracle import equal_finish


def test_hand_solved_horizon():
    # processor 0 shares with a CPU-bound task during [0, 1], processor 1 is free; both rate 100, W = 300.
    # A_0(H) = 50 + 100 (H - 1), A_1(H) = 100 H (H >= 1): 200 H - 50 = 300 -> H = 1.75, loads 125 and 175
    tasks = parse_tasks([{"processor": 0, "stop": {"time": 1}, "repeat": "forever", "script": [{"work": 1e4}]}])
    loads = make_loads(tasks, 2, Links(), [100.0, 100.0])
    h, caps = equal_finish(lambda H: np.array([m.available_work(0.0, H) for m in loads]), 300.0, guess=1.5)
    # brentq stops within rtol = 1e-12 of the root; A is linear there with slope 200, so caps are as close
    assert h == pytest.approx(1.75, rel=1e-11)
    np.testing.assert_allclose(caps, [125 / 300, 175 / 300], rtol=1e-11)
    # every processor computing its share from t0 = 0 finishes at H (the models are unchanged by the oracle)
    for m, c in zip(loads, caps):
        assert m.compute(0.0, 300.0 * c) == pytest.approx(h, rel=1e-11)


def test_random_tasks_finish_together():
    rng = np.random.default_rng(4)
    tasks = parse_tasks([{"name": f"t{k}", "processor": int(rng.integers(0, 5)), "priority": float(rng.uniform(.5, 2)),
                          "start": {"time": float(rng.uniform(0, 3))}, "repeat": "forever",
                          "script": [{"work": float(rng.uniform(10, 200)), "wait": float(rng.uniform(0, 1))}]}
                         for k in range(8)])
    loads = make_loads(tasks, 5, Links(), rng.uniform(50, 150, size=5))
    for m in loads:
        m.advance(2.0)
    W = 2000.0
    h, caps = equal_finish(lambda H: np.array([m.available_work(2.0, 2.0 + H) for m in loads]), W, guess=0.5)
    ends = [m.compute(2.0, W * c) for m, c in zip(loads, caps)]
    # the work functions are piecewise linear with slopes <= 150; a root within rtol 1e-12 moves a finishing
    # time by at most ~1e-11 relative
    np.testing.assert_allclose(ends, h, rtol=1e-9)


def test_no_capacity_is_an_error():
    with pytest.raises(ValueError, match="total work"):
        equal_finish(lambda H: np.array([H]), 0.0, guess=1.0)
    with pytest.raises(ValueError, match="no capacity"):
        equal_finish(lambda H: np.array([0.0]), 1.0, guess=1.0, max_doublings=20)
