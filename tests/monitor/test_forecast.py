"""NWS forecasters against hand-computed series and a loop-by-loop reference (hermes.monitor.forecast).

The predictors add, average or smooth a handful of numbers of size ~10: results carry a rounding error of a
few ε·10 ≈ 1e-14, so the hand values are compared with ``rel=1e-12`` (or exactly where no rounding occurs).
"""

from __future__ import annotations

import numpy as np
import pytest

from hermes.errors import ScenarioError
from hermes.monitor.forecast import (DEFAULT_FAMILY, Predictor, adaptive, family, forecast, mean_abs_rel_error,
                                     parse_forecaster, predict)

nan = np.nan
X = np.array([1.0, 2.0, 3.0, 4.0, 10.0])


@pytest.mark.parametrize("pred, expected", [
    (Predictor("last"), [nan, 1, 2, 3, 4, 10]),
    (Predictor("mean"), [nan, 1, 1.5, 2, 2.5, 4]),
    (Predictor("window_mean", 3), [nan, 1, 1.5, 2, 3, 17 / 3]),
    (Predictor("window_median", 3), [nan, 1, 1.5, 2, 3, 4]),
    (Predictor("window_median", 2), [nan, 1, 1.5, 2.5, 3.5, 7]),
    # s1 = 1, s2 = 1 + .5 (2 - 1) = 1.5, s3 = 2.25, s4 = 3.125, s5 = 3.125 + .5 (10 - 3.125) = 6.5625
    (Predictor("exp", 0.5), [nan, 1, 1.5, 2.25, 3.125, 6.5625]),
    # gain 1 is the last value
    (Predictor("exp", 1.0), [nan, 1, 2, 3, 4, 10]),
])
def test_each_predictor_on_a_known_series(pred, expected):
    P = predict(X, pred)
    assert P.shape == (6, 1)
    np.testing.assert_allclose(P[:, 0], expected, rtol=1e-12, equal_nan=True)


def test_missing_measurements_are_skipped():
    Y = np.array([1.0, nan, 3.0, nan])
    np.testing.assert_array_equal(predict(Y, Predictor("last"))[:, 0], [nan, 1, 1, 3, 3])
    np.testing.assert_array_equal(predict(Y, Predictor("mean"))[:, 0], [nan, 1, 1, 2, 2])
    np.testing.assert_array_equal(predict(Y, Predictor("exp", 0.5))[:, 0], [nan, 1, 1, 2, 2])
    # a window with no measurement falls back to the last one
    np.testing.assert_array_equal(predict(Y, Predictor("window_mean", 1))[:, 0], [nan, 1, 1, 3, 3])
    np.testing.assert_array_equal(predict(Y, Predictor("window_median", 1))[:, 0], [nan, 1, 1, 3, 3])


def test_predictors_are_vectorised_over_series():
    rng = np.random.default_rng(3)
    Z = rng.uniform(1, 2, size=(12, 4))
    Z[rng.random(Z.shape) < 0.2] = nan
    for pred in DEFAULT_FAMILY:
        whole = predict(Z, pred)
        for s in range(Z.shape[1]):
            np.testing.assert_array_equal(whole[:, s], predict(Z[:, s], pred)[:, 0], err_msg=pred.name)


def test_adaptive_switches_to_the_member_with_the_lower_cumulative_error():
    # alternating series: last is always 10 off; the running mean's errors are 10, 5, 6.67, 5, 6 (MAE)
    Y = np.array([0.0, 10, 0, 10, 0, 10])
    members = (Predictor("last"), Predictor("mean"))
    P, choice = adaptive(Y, members, "mae")
    # t=1: no error yet -> first member; t=2: both 10 -> tie -> first; t=3: last 20 > mean 15 -> mean
    assert choice[:, 0].tolist() == [0, 0, 0, 1, 1, 1, 1]
    np.testing.assert_allclose(P[3:, 0], predict(Y, members[1])[3:, 0], rtol=0)


def _reference_adaptive(Y, members, metric):
    """Loop-by-loop reference: for each series and step, sum the past errors of each member."""
    T, S = Y.shape
    Ps = [predict(Y, m) for m in members]
    out = np.full((T + 1, S), nan)
    for s in range(S):
        for t in range(T + 1):
            best, best_err = None, None
            for f, Pf in enumerate(Ps):
                if np.isnan(Pf[t, s]):
                    continue
                e = 0.0
                for u in range(t):
                    if not (np.isnan(Pf[u, s]) or np.isnan(Y[u, s])):
                        d = Pf[u, s] - Y[u, s]
                        e += d * d if metric == "mse" else abs(d)
                if best_err is None or e < best_err:
                    best, best_err = f, e
            if best is not None:
                out[t, s] = Ps[best][t, s]
    return out


@pytest.mark.parametrize("metric", ["mse", "mae"])
def test_adaptive_equals_the_loop_reference(metric):
    rng = np.random.default_rng(5)
    Y = np.cumsum(rng.normal(size=(30, 6)), axis=0) + 20 + rng.normal(scale=3, size=(30, 6))
    Y[rng.random(Y.shape) < 0.15] = nan
    P, _ = adaptive(Y, DEFAULT_FAMILY, metric)
    # the cumulative sums are added in the same order as the loop: equal up to the last bits
    np.testing.assert_allclose(P, _reference_adaptive(Y, DEFAULT_FAMILY, metric), rtol=1e-12, equal_nan=True)


def test_mse_and_mae_can_choose_differently():
    # squared errors weigh the occasional large miss more than absolute ones (errors 1,1,1,1 beat 0,0,0,3
    # under MSE, lose under MAE), so on noisy series the two adaptive forecasters pick different members
    rng = np.random.default_rng(9)
    Y = rng.uniform(0, 10, size=(40, 50))
    _, c_mse = adaptive(Y, DEFAULT_FAMILY, "mse")
    _, c_mae = adaptive(Y, DEFAULT_FAMILY, "mae")
    assert np.any(c_mse != c_mae)


def test_adaptive_tracks_a_level_shift_better_than_the_running_mean():
    # level 1 for 20 steps, then 3: after the shift the running mean lags; the adaptive forecaster moves to a
    # tracking member (last / strong smoothing) and its error over the last 10 steps is far below the mean's
    Y = np.r_[np.full(20, 1.0), np.full(20, 3.0)]
    P = forecast(Y, "adaptive_mse")[:, 0]
    M = forecast(Y, "mean")[:, 0]
    late = slice(30, 40)
    assert np.max(np.abs(P[late] - Y[late])) < 1e-12  # the window members have forgotten the old level
    assert np.min(np.abs(M[late] - Y[late])) > 0.5


def test_parse_and_family():
    assert parse_forecaster("exp:0.3") == Predictor("exp", 0.3)
    assert parse_forecaster("window_median:5") == Predictor("window_median", 5)
    assert parse_forecaster("adaptive") == ("adaptive", "mse")
    assert parse_forecaster("adaptive_mae") == ("adaptive", "mae")
    for bad in ("exp:0", "exp:1.5", "window_mean:0", "median", "exp:x"):
        with pytest.raises(ScenarioError, match="monitor.forecaster: unknown forecaster"):
            parse_forecaster(bad)
    names = [m.name for m in family(windows=(2,), gains=(0.25,))]
    assert names == ["last", "mean", "window_mean:2", "window_median:2", "exp:0.25"]


def test_mean_abs_rel_error():
    assert mean_abs_rel_error([1.1, 2.0, nan], [1.0, 2.5, 3.0]) == pytest.approx((0.1 + 0.2) / 2, rel=1e-12)
    assert np.isnan(mean_abs_rel_error([nan], [1.0]))
