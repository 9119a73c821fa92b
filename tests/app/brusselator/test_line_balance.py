"""The line balancer of 003 Alg. 3–4 with residual and time estimators (hermes.app.brusselator.line_balance)."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.app.brusselator.line_balance import (LineBalance, apply_transfers, decide_transfer, sync_transfers,
                                                 transfer_amount)
from hermes.errors import BalancerError


def test_sends_to_the_lighter_neighbour_above_the_threshold():
    bal = LineBalance(threshold=2.0, fraction=1.0)
    assert decide_transfer(8.0, 100, (1.0, 100), (3.0, 100), bal)[0] == -1
    assert decide_transfer(8.0, 100, (3.0, 100), (1.0, 100), bal)[0] == 1
    assert decide_transfer(8.0, 100, (5.0, 100), (4.5, 100), bal) is None  # ratio 1.78 < 2
    assert decide_transfer(8.0, 100, (2.0, 100), (2.0, 100), bal)[0] == -1  # tie: left first (003)
    assert decide_transfer(8.0, 100, None, None, bal) is None
    assert decide_transfer(0.0, 100, (0.0, 100), None, bal) is None  # 0/0 is balanced


def test_zero_estimate_neighbour_gives_infinite_ratio():
    bal = LineBalance(threshold=50.0, fraction=0.5)
    side, count = decide_transfer(1e-3, 40, (0.0, 40), None, bal)
    assert side == -1 and count == 20  # half of the equalising amount n_i


def test_time_estimator_amount_equalises_iteration_times():
    """With time ∝ components, moving the amount leaves the two times within one component's time."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n_i, n_j = rng.integers(10, 500, 2)
        c_i, c_j = rng.uniform(0.1, 3.0, 2)  # time per component
        t_i, t_j = n_i * c_i, n_j * c_j
        m = transfer_amount(t_i, n_i, t_j, n_j, 1.0)
        if t_i <= t_j:
            assert m == 0
            continue
        after_i, after_j = (n_i - m) * c_i, (n_j + m) * c_j
        assert after_i >= after_j - c_i - c_j
        assert abs(after_i - after_j) <= c_i + c_j + 1e-9 * t_i


def test_min_keep_prevents_famine():
    bal = LineBalance(threshold=1.0, fraction=1.0, min_keep=30)
    side, count = decide_transfer(100.0, 40, (1.0, 40), None, bal)
    assert count == 10
    assert decide_transfer(100.0, 30, (1.0, 40), None, bal) is None


@pytest.mark.parametrize("seed", range(6))
def test_synchronous_step_keeps_the_line_and_conserves_components(seed):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 12))
    counts = rng.integers(5, 60, p)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    bal = LineBalance(estimator="residual", threshold=1.2, fraction=float(rng.uniform(0.2, 1.0)), min_keep=5)
    for _ in range(20):
        loads = rng.lognormal(0.0, 2.0, p) * rng.integers(0, 2, p)  # some zero residuals
        moves = sync_transfers(loads, np.diff(bounds), bal)
        assert all(abs(i - j) == 1 and c >= 1 for i, j, c in moves)
        new = apply_transfers(bounds, moves)
        assert new[0] == 0 and new[-1] == bounds[-1]  # conserved, same ends
        assert np.all(np.diff(new) >= bal.min_keep)  # order kept, nobody starved
        for i, j, c in moves:  # only the bound between sender and receiver moved, by c
            assert new[max(i, j)] == bounds[max(i, j)] + (c if j < i else -c)
        bounds = new


def test_apply_transfers_refuses_broken_lines():
    b = np.array([0, 10, 20, 30])
    with pytest.raises(BalancerError, match="neighbours"):
        apply_transfers(b, [(0, 2, 3)])
    with pytest.raises(BalancerError, match="two transfers"):
        apply_transfers(b, [(0, 1, 3), (1, 0, 2)])
    with pytest.raises(BalancerError, match="without components"):
        apply_transfers(b, [(1, 2, 10)])


@pytest.mark.parametrize("kw, msg", [({"estimator": "load"}, "estimator"), ({"every": 0}, "every"),
                                     ({"threshold": 0.5}, "threshold"), ({"fraction": 0.0}, "fraction"),
                                     ({"min_keep": 0}, "min_keep"), ({"residual": "median"}, "residual")])
def test_bad_parameters_are_one_line_errors(kw, msg):
    with pytest.raises(BalancerError, match=msg):
        LineBalance(**kw)
