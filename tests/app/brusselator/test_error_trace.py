"""The error trace against the serial solution (simulate(trace=True)): the time to a converged result beside the
time to the stopping criterion (docs/ASYNC.md, "Gains to a converged result")."""

from __future__ import annotations

import pytest

from hermes.app.brusselator.iteration import BlockRecord, error_trace
from hermes.app.brusselator.study import error_times, parse_spec, simulate, summarise
from hermes.errors import ScenarioError

ACC = 7e-4


def _spec(mode: str, residual: float, balance: bool = False, **extra):
    return parse_spec({"processors": 3, "application": {"mode": mode},
                       "problem": {"points": 60, "t_end": 1.0, "dt": 0.05},
                       "solver": {"form": "paper", "accuracy": ACC, "residual": residual, "window": "all",
                                  "overlap": 0, **extra},
                       "balancing": {"enabled": balance, "every": 5, "residual": "last"}})


@pytest.mark.parametrize("mode,balance", [("sync", False), ("async", False), ("async", True)])
def test_converged_time_is_recorded_and_not_before_the_first_crossing(mode, balance):
    spec = _spec(mode, ACC / 1000, balance)
    out = summarise(spec, *simulate(spec, trace=True))
    assert out["error_vs_serial"] < ACC
    assert out["converged_time"] is not None and out["error_first_below"] is not None
    assert out["error_first_below"] <= out["converged_time"] <= out["time"]
    times, errs = error_trace(simulate(spec, trace=True)[0])
    # from the converged time on, the traced error stays below the accuracy; just before it, it was not
    after = times >= out["converged_time"]
    assert (errs[after] < ACC).all()
    assert not (errs < ACC).all()


def test_the_trace_ends_at_the_result_and_does_not_change_the_run():
    """SISC's result is the ranks' last blocks: the trace's last global error is the error of the result; the
    traced run is the untraced one (same time, same solution), and an untraced summary has no trace keys."""
    spec = _spec("sync", ACC)
    plain = summarise(spec, *simulate(spec))
    traced = summarise(spec, *simulate(spec, trace=True))
    assert traced["trace_final_error"] == traced["error_vs_serial"]
    assert (plain["time"], plain["solution_checksum"]) == (traced["time"], traced["solution_checksum"])
    assert "converged_time" not in plain and "converged_time" in traced


def test_converged_time_is_the_last_entry_below_the_accuracy():
    """An error that dips below, rises again and falls for good: first crossing at 2, converged from 4."""
    a, b = BlockRecord(0), BlockRecord(1)
    a.errors = [(1.0, 1e-2), (2.0, 1e-4), (3.0, 5e-3), (4.0, 1e-4), (5.0, 1e-5)]
    b.errors = [(0.5, 1e-4)]
    got = error_times([a, b], ACC)
    assert (got["error_first_below"], got["converged_time"], got["trace_sweeps"]) == (2.0, 4.0, 5)
    assert error_times([a, b], ACC, final_error=1e-3)["converged_time"] is None  # the result itself is above


def test_the_trace_needs_one_window():
    spec = _spec("sync", ACC, window=5)
    with pytest.raises(ScenarioError, match="solver.window"):
        simulate(spec, trace=True)
