"""Processor sharing and link congestion against hand-computed cases (hermes.extraload.sharing).

Every expected value below is worked out by hand in the comment next to it. The model integrates piecewise
constant rates; each segment adds one rounding of relative size ≤ ε = 2.2e-16 to a time, and the cases
have at most ~10 segments, so times agree with the hand values to within 10 ε relative: we use
``rel=1e-13`` (a margin of ~45x over that bound).
"""

from __future__ import annotations

import numpy as np
import pytest

from hermes.runtime.clock import Links, VirtualClock
from hermes.extraload.sharing import ExtraLoadError, ProcessorLoad
from hermes.extraload.tasks import parse_tasks

REL = 1e-13


def load(tasks, *, rate=100.0, links=None, prio=1.0, processor=0):
    return ProcessorLoad(processor, parse_tasks(tasks), links or Links(latency=0.0, bandwidth=1e6), rate=rate,
                         application_priority=prio)


def test_no_task_gives_the_plain_alpha_beta_numbers_bit_for_bit():
    links = Links(latency=1e-4, bandwidth=1.25e7, overrides={(0, 2): (3e-3, 1e6)})
    m = ProcessorLoad(0, [], links, rate=7.0e4 * 15 / 15)
    for w in (1.0, 3.7e5, 1e-3):
        assert m.compute(m.t, w) == w / m.rate  # same floating-point division
    for d, b in ((1, 640.0), (2, 12345.0), (1, 0.0)):
        assert m.send(m.t, [d], [b])[0] == links.cost(0, d, b)


def test_one_cpu_bound_task_halves_the_application_rate():
    # task always runnable, equal weights: the application runs at 100/2 = 50 units/s -> 100 units in 2 s
    m = load([{"processor": 0, "repeat": "forever", "script": [{"work": 1e3}]}])
    assert m.compute(0.0, 100.0) == pytest.approx(2.0, rel=REL)
    assert m.app_work == pytest.approx(100.0, rel=REL) and m.app_busy == pytest.approx(2.0, rel=REL)


def test_priority_weights_the_shares():
    # task priority 3, application 1: the application gets 1/4 of 100 -> 100 units in 4 s
    m = load([{"processor": 0, "priority": 3, "repeat": "forever", "script": [{"work": 1e3}]}])
    assert m.compute(0.0, 100.0) == pytest.approx(4.0, rel=REL)
    # application priority 3, task 1: 3/4 of 100 = 75 units/s -> 150 units in 2 s
    m = load([{"processor": 0, "repeat": "forever", "script": [{"work": 1e3}]}], prio=3.0)
    assert m.compute(0.0, 150.0) == pytest.approx(2.0, rel=REL)


def test_task_that_finishes_during_the_computation():
    # task: 50 units once. [0,1]: both at 50/s -> task done at t=1, application has 50;
    # then alone at 100/s: 50 more in 0.5 s -> 1.5 s
    m = load([{"processor": 0, "script": [{"work": 50}]}])
    assert m.compute(0.0, 100.0) == pytest.approx(1.5, rel=REL)
    assert m.running() == []


def test_duty_cycle_task_work_then_wait():
    # task (work 50, wait 1) forever; application 200 units from t=0 at rate 100:
    # [0,1] shared: task 50 (done), application 50; [1,2] task waits: application +100 = 150;
    # [2,3] shared: task 50, application +50 = 200 -> both end at t=3
    m = load([{"processor": 0, "repeat": "forever", "script": [{"work": 50, "wait": 1}]}])
    assert m.compute(0.0, 200.0) == pytest.approx(3.0, rel=REL)


def test_idle_application_lets_the_task_run_alone():
    # same task, the application idle until 1.25: task alone: work [0,0.5], wait [0.5,1.5] -> at 1.25 it waits.
    # application 100 units from 1.25: [1.25,1.5] alone 25 (75 left); [1.5,2.5] shared at 50/s: the task's 50
    # units end at 2.5, application has 25 left; [2.5,2.75] alone (task waits until 3.5) -> ends at 2.75
    m = load([{"processor": 0, "repeat": "forever", "script": [{"work": 50, "wait": 1}]}])
    assert m.compute(1.25, 100.0) == pytest.approx(1.5, rel=REL)
    assert m.t == pytest.approx(2.75, rel=REL)


def test_start_and_stop_by_time():
    # CPU-bound task in [1, 2]; 300 units from 0: [0,1] 100, [1,2] 50, then 150 alone in 1.5 s -> 3.5 s
    m = load([{"processor": 0, "start": {"time": 1}, "stop": {"time": 2}, "repeat": "forever",
               "script": [{"work": 1e4}]}])
    assert m.compute(0.0, 300.0) == pytest.approx(3.5, rel=REL)
    assert m.running() == []


def test_start_and_stop_by_phase():
    m = load([{"processor": 0, "start": {"phase": 2}, "stop": {"phase": 2}, "repeat": "forever",
               "script": [{"work": 1e4}]}])
    m.begin_phase(1, 0.0)
    assert m.compute(0.0, 100.0) == pytest.approx(1.0, rel=REL)  # alone
    m.begin_phase(2, 1.0)
    assert m.running() == ["task"]
    assert m.compute(1.0, 100.0) == pytest.approx(2.0, rel=REL)  # shared
    m.begin_phase(3, 3.0)  # stopped at the end of phase 2
    assert m.compute(3.0, 100.0) == pytest.approx(1.0, rel=REL)


def test_tasks_of_other_processors_are_ignored_and_several_tasks_share():
    # two CPU-bound tasks on processor 0, one on processor 1: the application gets 1/3 of 90 = 30 units/s
    tasks = [{"processor": [0, 1], "repeat": "forever", "script": [{"work": 1e4}]},
             {"name": "b", "processor": 0, "repeat": "forever", "script": [{"work": 1e4}]}]
    m = load(tasks, rate=90.0)
    assert len(m.tasks) == 2
    assert m.compute(0.0, 60.0) == pytest.approx(2.0, rel=REL)
    assert m.share() == pytest.approx(1 / 3, rel=REL)


def test_available_rate_is_the_mean_share_and_leaves_the_model_unchanged():
    # (work 50, wait 1) task, application computing throughout [0,3]: 50 + 100 + 50 units -> 200/3 units/s
    m = load([{"processor": 0, "repeat": "forever", "script": [{"work": 50, "wait": 1}]}])
    assert m.available_rate(0.0, 3.0) == pytest.approx(200.0 / 3.0, rel=REL)
    assert m.t == 0.0 and m.app_work == 0.0
    # from an idle start at 1.25 (see the idle test): [1.25,1.5] 100/s, [1.5,2.5] 50/s, [2.5,3.5] 100/s
    assert m.available_rate(1.25, 3.5) == pytest.approx((25 + 50 + 100) / 2.25, rel=REL)


def test_congestion_two_flows_share_the_channel():
    # a task floods channel 0->1 with 1e6-byte messages; B = 1e6 B/s, α = 0.01 s. An application message of
    # 1e6 bytes at t=0 shares: both at 5e5 B/s, both transferred at t=2, delivered α later -> 2.01 s
    links = Links(latency=0.01, bandwidth=1e6)
    m = load([{"processor": 0, "repeat": "forever", "script": [{"data": [[1, 1e6]]}]}], links=links)
    assert m.send(0.0, [1], [1e6])[0] == pytest.approx(2.01, rel=REL)
    # a message to processor 2 at the same time does not cross the busy channel: α + b/B
    m = load([{"processor": 0, "repeat": "forever", "script": [{"data": [[1, 1e6]]}]}], links=links)
    d = m.send(0.0, [1, 2], [1e6, 1e6])
    assert d[1] == links.cost(0, 2, 1e6)
    assert d[0] == pytest.approx(2.01, rel=REL)


def test_preview_send_gives_the_shared_durations_and_leaves_the_model_alone():
    # the flooded channel of the test above: 2.01 s (shared) and α + b/B (free), the model's time and the
    # channels' counters unchanged; then the application computes from t = 0 as if nothing had been sent
    links = Links(latency=0.01, bandwidth=1e6)
    flood = [{"processor": 0, "repeat": "forever", "script": [{"data": [[1, 1e6]]}]}]
    m = load(flood, links=links)
    d = m.preview_send(0.0, [1, 2], [1e6, 1e6])
    assert d[0] == pytest.approx(2.01, rel=REL) and d[1] == links.cost(0, 2, 1e6)
    assert m.t == 0.0 and m.channel_stats() == load(flood, links=links).channel_stats()
    assert m.compute(0.0, 100.0) == load(flood, links=links).compute(0.0, 100.0)


def test_congestion_task_flow_ends_first():
    # task: 5e5 bytes to 1 then waits 10 s. Application 1e6 bytes at t=0: [0,1] 5e5 B/s each, the task's flow
    # is transferred at t=1; then the application alone: 5e5 bytes in 0.5 s -> 1.5 + α (0.01) = 1.51 s
    links = Links(latency=0.01, bandwidth=1e6)
    m = load([{"processor": 0, "repeat": "forever", "script": [{"data": {1: 5e5}, "wait": 10}]}], links=links)
    assert m.send(0.0, [1], [1e6])[0] == pytest.approx(1.51, rel=REL)
    b, t = m.channel_stats()[1]
    assert b == pytest.approx(1e6, rel=REL) and t == pytest.approx(1.5, rel=REL)  # 1e6 B in 1.5 s of transfer


def test_latency_is_not_shared():
    # the task's flow is in its latency phase (transferred, not yet delivered) -> the channel is free
    links = Links(latency=1.0, bandwidth=1e6)
    m = load([{"processor": 0, "script": [{"data": [[1, 1e5]]}]}], links=links)
    m.advance(0.1)  # transferred at 0.1, delivered at 1.1
    assert m.send(0.1, [1], [1e6])[0] == pytest.approx(2.0, rel=REL)  # 1 s transfer + 1 s latency


def test_cpu_and_network_are_coupled():
    # task: triples (work 100), (data 1e6 bytes to 1), forever; rate 100, B = 1e6, α = 0.
    # compute 100 at 0: shared 50/s -> both end at t=2; the task starts sending.
    # send 1e6 at 2: channel shared, 5e5 B/s each -> 2 s; the task's flow ends at 4 too, it computes again.
    # compute 100 at 4: shared -> 2 s.
    m = load([{"processor": 0, "repeat": "forever", "script": [{"work": 100}, {"data": [[1, 1e6]]}]}])
    assert m.compute(0.0, 100.0) == pytest.approx(2.0, rel=REL)
    assert m.send(2.0, [1], [1e6])[0] == pytest.approx(2.0, rel=REL)
    assert m.compute(4.0, 100.0) == pytest.approx(2.0, rel=REL)
    # within a triple Data comes first: the task sends 1e6 B in [0,1] with its CPU idle, so the application
    # computes alone then (10 units in 0.1 s)
    m = load([{"processor": 0, "repeat": "forever", "script": [{"data": [[1, 1e6]], "work": 1}]}])
    m.advance(0.5)
    assert m.compute(0.5, 10.0) == pytest.approx(0.1, rel=REL)


def test_repeat_counts_passes():
    # 2 passes of 25 units: the task competes for 50 units of CPU, then leaves.
    # application 100 units: [0,1] shared -> task 50 done; application 50, then 50 alone in 0.5 s -> 1.5 s
    m = load([{"processor": 0, "repeat": 2, "script": [{"work": 25}]}])
    assert m.compute(0.0, 100.0) == pytest.approx(1.5, rel=REL)


def test_work_is_conserved_on_random_scripts():
    # while the application computes the CPU is never idle: application + task work = rate x time
    rng = np.random.default_rng(11)
    for _ in range(5):
        tasks = [{"name": f"t{k}", "processor": 0, "priority": float(rng.uniform(0.2, 3)), "repeat": "forever",
                  "script": [{"work": float(rng.uniform(1, 50)), "wait": float(rng.uniform(0, 1)),
                              "data": [[1, float(rng.uniform(0, 1e5))]]} for _ in range(3)]} for k in range(3)]
        m = load(tasks, rate=100.0, links=Links(latency=1e-3, bandwidth=1e6))
        before = m.task_work
        dt = m.compute(0.0, 500.0)
        assert m.app_work + (m.task_work - before) == pytest.approx(100.0 * dt, rel=1e-12)


def test_clock_charges_compute_through_the_load():
    links = Links(latency=0.0, bandwidth=1e6)
    tasks = parse_tasks([{"processor": 1, "repeat": "forever", "script": [{"work": 1e6}]}])
    # rank 1 of 2 with capacity 0.5: rate = speed * p * c = 100 * 2 * 0.5 = 100; one task -> 50 units/s
    c = VirtualClock(1, 2, links, 100.0, 0.5, load=ProcessorLoad(1, tasks, links))
    assert c.compute(100.0) == pytest.approx(2.0, rel=REL) and c.now == pytest.approx(2.0, rel=REL)
    c.set_capacity(1.0)  # rate 200 -> 100 units/s
    assert c.compute(100.0) == pytest.approx(1.0, rel=REL)
    assert c.message_costs([0], [1e6])[0] == pytest.approx(1.0, rel=REL)  # channel 1->0 is free
    plain = VirtualClock(1, 2, links, 100.0, 0.5)
    assert plain.compute(100.0) == 100.0 / plain.rate
    assert plain.message_costs([0], [1e6])[0] == links.cost(1, 0, 1e6)


def test_time_never_goes_back_and_steps_too_short_are_refused():
    m = load([{"processor": 0, "repeat": "forever", "script": [{"work": 1}]}])
    m.advance(2.0)
    with pytest.raises(ValueError, match="went back"):
        m.compute(1.0, 1.0)
    tiny = ProcessorLoad(0, parse_tasks([{"processor": 0, "repeat": "forever", "script": [{"work": 1e-6}]}]),
                         Links(), rate=1e6, max_events=1000)
    with pytest.raises(ExtraLoadError, match="far too short"):
        tiny.compute(0.0, 1e6)


def test_shipped_table_10_6_tasks_reproduce_the_table():
    """configs/extraload-table-10.6.yaml: the capacities the application gets are thesis Table 10.6's."""
    from pathlib import Path

    from hermes.extraload.schedule import read_schedule_csv
    from hermes.extraload.tasks import load_tasks

    root = Path(__file__).resolve().parents[2]
    tasks = load_tasks(root / "configs" / "extraload-table-10.6.yaml")
    table = read_schedule_csv(root / "configs" / "thesis-table-10.6.csv")
    links = Links()
    loads = [ProcessorLoad(q, tasks, links, rate=1e4) for q in range(15)]
    t = 0.0
    for k in range(1, 8):
        for m in loads:
            m.begin_phase(k, t)
        work = 1e4
        got = np.array([work / m.compute(t, work) for m in loads])  # rate each rank achieved in this phase
        t += 20.0
        caps = got / got.sum()
        # the table prints 4 digits (|printed - exact| < 1e-4) and its rows sum to 1 within 1e-3
        assert np.allclose(caps, table[k - 1] / table[k - 1].sum(), rtol=0, atol=2e-4), k
        # exactly: shares n_i / max n of the integer units behind the table (phase 3: 6, 5, 4, 3, 2, 1 x 1/51;
        # every row's smallest entry is one unit)
        units = np.round(table[k - 1] / table[k - 1].min())
        assert np.allclose(got / 1e4, units / units.max(), rtol=1e-13, atol=0), k
