"""Monitoring as measurement under the virtual clock: what the clock charged equals what the model gave.

Two ranks simulated serially (each its own VirtualClock with its ProcessorLoad), running the compute and
halo-exchange loop of thesis Alg. 2 through the clock's hooks the way NeighbourComm will (the sender's
durations travel with the message; the receiver waits for the arrival). The measured compute rate
(work / compute seconds charged) and link bandwidths (bytes / (durations − α)) must equal the model's
integrated truth. Each phase sums ~40 segments, so the two agree to ~40 ε relative: ``rel=1e-12``.
"""

from __future__ import annotations

import numpy as np
import pytest

from hermes.runtime.clock import Links, VirtualClock
from hermes.extraload.sharing import ProcessorLoad
from hermes.extraload.tasks import parse_tasks
from hermes.monitor.series import Monitor, bandwidth_from_timings, undirected_bandwidth

ALPHA, BW = 1e-3, 1e6
TASKS = parse_tasks([
    {"name": "cpu", "processor": 0, "start": {"phase": 2}, "repeat": "forever",
     "script": [{"work": 40.0, "wait": 0.3}]},
    {"name": "net", "processor": 1, "start": {"time": 0.5}, "stop": {"time": 6.0}, "repeat": "forever",
     "script": [{"data": [[0, 4e5]], "wait": 0.1}]},
])


def run_phase(clocks, work, nbytes, iterations):
    """One phase on 2 ranks: compute, exchange (sender durations in the message), repeat."""
    meas = []
    starts = [(c.totals["compute"], c.load.app_work, c.load.app_busy, dict(c.load.channel_stats())) for c in clocks]
    sent = [[0.0, 0.0, 0] for _ in clocks]  # bytes, seconds, messages on the channel to the other rank
    for _ in range(iterations):
        for c, w in zip(clocks, work):
            c.compute(w)
        stamps = [c.stamp() for c in clocks]
        durs = [c.message_costs([1 - r], [nbytes]) for r, c in enumerate(clocks)]  # sender side
        for r, c in enumerate(clocks):
            sent[r][0] += nbytes
            sent[r][1] += durs[r][0]
            sent[r][2] += 1
            arrival = stamps[1 - r] + durs[1 - r][0]  # what travels in the message header
            c.exchanged(durs[r], np.array([arrival]))
        t = max(c.now for c in clocks)  # the reduction: every rank waits for the slowest
        for c in clocks:
            c.synchronised(np.array([t]), 0.0)
    for r, c in enumerate(clocks):
        comp0, w0, b0, ch0 = starts[r]
        rate = work[r] * iterations / (c.totals["compute"] - comp0)  # measured: work / charged time
        rate_true = (c.load.app_work - w0) / (c.load.app_busy - b0)  # the model's integral
        bw = bandwidth_from_timings(sent[r][0], sent[r][1], sent[r][2], ALPHA)
        by, sec = c.load.channel_stats()[1 - r]
        by0, sec0 = ch0.get(1 - r, (0.0, 0.0))
        meas.append((rate, rate_true, float(bw), (by - by0) / (sec - sec0)))
    return meas


def test_measured_equals_true_and_the_monitor_sees_the_load():
    links = Links(latency=ALPHA, bandwidth=BW)
    clocks = [VirtualClock(r, 2, links, 100.0, 0.5, load=ProcessorLoad(r, TASKS, links)) for r in range(2)]
    mon = Monitor(2, forecaster="last")
    seen = []
    for k in range(1, 5):
        for c in clocks:
            c.begin_phase(k)
        meas = run_phase(clocks, work=[50.0, 50.0], nbytes=2e5, iterations=8)
        for rate, rate_true, bw, bw_true in meas:
            assert rate == pytest.approx(rate_true, rel=1e-12)
            assert bw == pytest.approx(bw_true, rel=1e-12)
        directed = np.array([[np.nan, meas[0][2]], [meas[1][2], np.nan]])
        mon.observe([m[0] for m in meas], undirected_bandwidth(directed))
        seen.append(([m[0] for m in meas], directed[1, 0]))
    # phase 1: processor 0 alone (rate 100); from phase 2 its task takes part of the CPU
    assert seen[0][0][0] == pytest.approx(100.0, rel=1e-12) and seen[1][0][0] < 90.0
    # channel 1 -> 0 is congested while 'net' runs (t in [0.5, 6]), free afterwards: B = 1e6
    assert seen[0][1] < 0.9 * BW and seen[-1][1] == pytest.approx(BW, rel=1e-12)
    # the monitor's series hold exactly these measurements
    np.testing.assert_array_equal(mon.rate_series()[:, 0], [s[0][0] for s in seen])


def test_undirected_bandwidth_is_the_harmonic_mean():
    d = np.array([[np.nan, 1.0, np.nan], [3.0, np.nan, 2.0], [np.nan, np.nan, np.nan]])
    u = undirected_bandwidth(d)
    assert u[0, 1] == u[1, 0] == pytest.approx(1.5, rel=1e-15)  # 2 / (1 + 1/3)
    assert u[1, 2] == u[2, 1] == 2.0 and np.isnan(u[0, 2]) and np.isnan(u[0, 0])
    np.testing.assert_array_equal(bandwidth_from_timings([100.0, 0.0], [1.1, 0.0], [1, 0], [0.1, 0.1]),
                                  [100.0, np.nan])
