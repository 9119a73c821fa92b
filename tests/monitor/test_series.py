"""The Monitor's series, sources and link weights (hermes.monitor.series)."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.errors import ScenarioError
from hermes.monitor.series import Monitor, link_weights

nan = np.nan


def bw_matrix(p, pairs):
    m = np.full((p, p), nan)
    for (i, j), v in pairs.items():
        m[i, j] = m[j, i] = v
    return m


def test_sources_nominal_measured_forecast_oracle():
    mon = Monitor(3, forecaster="mean")
    nominal = np.array([1.0, 1.0, 2.0])
    nom_bw = 100.0
    # before any measurement every source but oracle falls back to nominal
    assert np.array_equal(mon.view(nominal, nom_bw, source="forecast").rates, nominal)
    mon.observe([1.0, 2.0, 1.0], bw_matrix(3, {(0, 1): 50.0}))
    mon.observe([3.0, 2.0, 1.0], bw_matrix(3, {(1, 2): 80.0}))
    v = mon.view(nominal, nom_bw, source="measured")
    np.testing.assert_array_equal(v.rates, [3.0, 2.0, 1.0])
    np.testing.assert_array_equal(v.capacities, np.array([3.0, 2.0, 1.0]) / 6.0)
    # links: the last measurement of each (0-1 at step 0, 1-2 at step 1), never measured 0-2: nominal
    assert (v.bandwidth[0, 1], v.bandwidth[1, 0], v.bandwidth[1, 2], v.bandwidth[0, 2]) == (50.0, 50.0, 80.0, 100.0)
    v = mon.view(nominal, nom_bw)  # the monitor's own source: forecast with the running mean
    np.testing.assert_array_equal(v.rates, [2.0, 2.0, 1.0])
    assert v.source == "forecast"
    np.testing.assert_array_equal(mon.view(nominal, nom_bw, source="nominal").rates, nominal)
    o = mon.view(nominal, nom_bw, source="oracle", oracle_rates=[5.0, 1.0, 1.0])
    np.testing.assert_array_equal(o.rates, [5.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="oracle_rates"):
        mon.view(nominal, nom_bw, source="oracle")


def test_forecast_errors_are_recorded_per_step():
    mon = Monitor(2, forecaster="last")
    o0 = mon.observe([1.0, 1.0], bw_matrix(2, {(0, 1): 10.0}))
    assert np.isnan(o0.capacity_error) and o0.forecast_rates is None
    o1 = mon.observe([1.0, 1.0], bw_matrix(2, {(0, 1): 10.0}))
    assert o1.capacity_error == 0.0 and o1.bandwidth_error == 0.0
    # forecast (last) 1:1 -> capacities .5/.5; truth 3:1 -> .75/.25; errors |.5-.75|/.75, |.5-.25|/.25 -> mean 2/3
    o2 = mon.observe([3.0, 1.0], bw_matrix(2, {(0, 1): 20.0}))
    assert o2.capacity_error == pytest.approx((1 / 3 + 1) / 2, rel=1e-12)
    assert o2.bandwidth_error == pytest.approx(0.5, rel=1e-12)  # forecast 10 vs 20
    # a separate truth (e.g. the model's integrated value) can be given
    o3 = mon.observe([3.0, 1.0], None, true_rates=[1.0, 1.0])
    assert o3.capacity_error == pytest.approx(0.5, rel=1e-12)
    assert [e[0] for e in mon.errors()] == [0, 1, 2, 3]
    assert mon.rate_series().shape == (4, 2) and mon.bandwidth_series().shape == (4, 1)


def test_adaptive_monitor_forecasts_a_noisy_level_better_than_the_last_value():
    # a processor whose measured rate is 2 plus Gaussian noise (σ = 0.2): the last value misses by the
    # difference of two draws (E|e| = 2σ/√π ≈ 1.13σ), a mean by about one draw (≈ 0.80σ); the adaptive
    # forecaster learns to average. Over 40 steps the ratio's sampling spread is ~0.1, so require < 0.9.
    rng = np.random.default_rng(1)
    mon = Monitor(2, forecaster="adaptive_mse")
    last = Monitor(2, forecaster="last")
    for _ in range(60):
        r = [2.0 + 0.2 * rng.normal(), 1.0]
        mon.observe(r)
        last.observe(r)
    err = np.mean([o.capacity_error for o in mon.observations[20:]])
    err_last = np.mean([o.capacity_error for o in last.observations[20:]])
    assert err < 0.9 * err_last


def test_link_weights_mappings():
    bw = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(link_weights(bw, "conductance"), [0.25, 0.5, 1.0], rtol=0)
    np.testing.assert_allclose(link_weights(bw, "inverse_square"), [1.0, 0.25, 0.0625], rtol=0)
    mon = Monitor(3, link_weight="inverse_square")
    v = mon.view([1, 1, 1], bw_matrix(3, {(0, 1): 1.0, (1, 2): 2.0, (0, 2): 4.0}), source="nominal")
    np.testing.assert_allclose(v.weights([[0, 1], [1, 2]], "inverse_square"), [1.0, 0.25], rtol=0)
    with pytest.raises(ScenarioError, match="monitor.link_weight"):
        link_weights(bw, "square")
    with pytest.raises(ValueError):
        link_weights([1.0, 0.0])


def test_bad_configuration_is_one_line():
    with pytest.raises(ScenarioError, match="monitor.source: unknown source 'guess'"):
        Monitor(2, source="guess")
    with pytest.raises(ScenarioError, match="monitor.link_weight"):
        Monitor(2, link_weight="x")
    with pytest.raises(ScenarioError, match="monitor.forecaster"):
        Monitor(2, forecaster="median")
    mon = Monitor(2)
    with pytest.raises(ValueError, match="positive"):
        mon.observe([1.0, 0.0])


def test_monitor_spec_validates_and_builds():
    from pydantic import ValidationError

    from hermes.monitor.series import MonitorSpec

    spec = MonitorSpec.model_validate({"source": "measured", "forecaster": "exp:0.5", "windows": [2]})
    mon = spec.build(4)
    assert (mon.p, mon.source, mon.forecaster) == (4, "measured", "exp:0.5")
    assert [m.name for m in mon.members][:4] == ["last", "mean", "window_mean:2", "window_median:2"]
    for bad in ({"source": "guess"}, {"forecaster": "median"}, {"gains": [0]}, {"windows": []}, {"colour": 1}):
        with pytest.raises(ValidationError):
            MonitorSpec.model_validate(bad)
