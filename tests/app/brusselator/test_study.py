"""SISC and AIAC runs of the Brusselator in one process (hermes.app.brusselator.sisc, hermes.app.brusselator.aiac,
hermes.app.brusselator.study).

The AIAC checks are the ones of the issue: the result matches the serial solution to the accuracy, runs are
deterministic, and the convergence detection never accepts a window whose state is not converged — also when
messages are delayed so much that every processor reports local convergence while new data are still in flight.
"""

from __future__ import annotations

import numpy as np
import pytest

from hermes.app.brusselator.aiac import aiac_serial
from hermes.app.brusselator.study import build, load_spec, parse_spec, simulate, summarise
from hermes.app.brusselator.brusselator import SolverError, block_map, window_steps
from hermes.app.brusselator.iteration import (DelayedLinks, IterConfig, StaticLinks, assemble, line_tree,
                                              tree_allreduce_times)
from hermes.app.brusselator.sisc import sisc_serial
from hermes.runtime.clock import Links
from hermes.errors import ScenarioError

SMALL = {"name": "t", "processors": 4, "problem": {"points": 120, "t_end": 1.0}, "solver": {"window": 5},
         "platform": {"capacities": [1, 2, 1, 3], "speed": 1.0e4}}


def spec(mode: str = "async", **over):
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in SMALL.items()}
    data["application"] = {"kernel": "brusselator", "mode": mode}
    for key, val in over.items():
        sect, _, sub = key.partition("__")
        if sub:
            data.setdefault(sect, {})[sub] = val
        else:
            data[sect] = val
    return parse_spec(data)


def window_residuals(cfg: IterConfig, records) -> list[float]:
    """‖F(Y) − Y‖∞ of every accepted window state Y, F the block map of that window's partition."""
    pb = cfg.problem
    y = assemble(pb, cfg.window, records)
    out = []
    for w, (s, m) in enumerate(window_steps(pb.n_steps, cfg.window)):
        parts = sorted((a, b) for rec in records for (wi, a, b, _) in rec.windows if wi == w)
        bounds = np.array([a for a, _ in parts] + [parts[-1][1]])
        assert np.all(np.diff(bounds) >= cfg.min_points) and bounds[0] == 0 and bounds[-1] == pb.n
        fy, _ = block_map(pb, y[s:s + m + 1], bounds, cfg.overlap)
        out.append(float(np.max(np.abs(fy - y[s:s + m + 1]))))
    return out


def test_line_tree_is_rooted_in_the_middle():
    assert line_tree(0, 1) == (None, [])
    assert [line_tree(r, 5) for r in range(5)] == [(1, []), (2, [0]), (None, [1, 3]), (2, [4]), (3, [])]
    assert line_tree(0, 2) == (None, [1]) and line_tree(1, 2) == (0, [])


def test_tree_allreduce_times():
    links = StaticLinks(Links(latency=1.0, bandwidth=1e30))
    out = tree_allreduce_times(np.zeros(4), links, 8)
    assert np.allclose(out, [2.0, 3.0, 3.0, 4.0])
    assert tree_allreduce_times(np.array([5.0]), links, 8)[0] == 5.0
    slow = np.array([0.0, 0.0, 10.0, 0.0])
    assert np.all(tree_allreduce_times(slow, links, 8) >= 10.0 + 1.0)


def test_sisc_is_the_block_jacobi_iteration_bit_for_bit():
    sp = spec(mode="sync")
    cfg, platform, bounds = build(sp)
    records = sisc_serial(cfg, platform, bounds)
    pb = cfg.problem
    y = np.tile(pb.initial(), (1, 1, 1))
    got = assemble(pb, cfg.window, records)
    iters = 0
    for s, m in window_steps(pb.n_steps, cfg.window):
        w = np.tile(y[-1], (m + 1, 1, 1))
        while True:
            fw, _ = block_map(pb, w, bounds, cfg.overlap)
            iters += 1
            done = np.max(np.abs(fw - w)) < cfg.accuracy
            w = fw
            if done:
                break
        assert np.array_equal(got[s:s + m + 1], w)
        y = w
    assert all(r.iterations == iters for r in records)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_result_matches_the_serial_solution_to_the_accuracy(mode):
    sp = spec(mode=mode)
    records, rounds = simulate(sp)
    out = summarise(sp, records, rounds)
    assert out["error_vs_serial"] <= sp.solver.accuracy
    cfg, _, _ = build(sp)
    assert max(window_residuals(cfg, records)) < cfg.accuracy


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_whole_interval_sweeps_as_in_003(mode):
    """window: all — every sweep covers [0, t_end] (003 Alg. 2), one detection for the whole run."""
    sp = spec(mode=mode, solver={"window": "all"})
    out = summarise(sp, *simulate(sp))
    assert out["windows"] == 1 and out["window"] == 20
    assert out["error_vs_serial"] <= sp.solver.accuracy


def test_async_is_deterministic():
    sp = spec(balancing__enabled=True, balancing__every=3, balancing__threshold=1.5)
    cfg, platform, bounds = build(sp)
    a, ra = aiac_serial(cfg, platform, bounds)
    b, rb = aiac_serial(cfg, platform, bounds)
    assert ra == rb
    for x, y in zip(a, b):
        assert (x.time, x.iterations, x.sent_points, x.timeline) == (y.time, y.iterations, y.sent_points, y.timeline)
        assert all(np.array_equal(p[3], q[3]) and p[:3] == q[:3] for p, q in zip(x.windows, y.windows))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_detection_never_stops_early_with_delayed_messages(seed):
    """Messages get up to 20 iterations of extra delay (deterministic, per message).

    The rule that stops when every processor has reported local convergence would stop early here: the detection
    rounds that fail verification had a global residual ‖F(X) − X‖ above ε at the moment all had reported
    (asserted, so the test can fail if the delays do not provoke it). The verified detection accepts only states
    whose residual, recomputed independently with the serial block map, is below ε.
    """
    sp = spec(platform={"capacities": [1, 2, 1, 3], "speed": 1.0e4, "delay": {"max": 2.0, "seed": seed}})
    cfg, platform, bounds = build(sp)
    assert isinstance(platform.links, DelayedLinks)
    records, rounds = aiac_serial(cfg, platform, bounds)
    failed = [r for r in rounds if not r[3]]
    assert failed and all(r[2] >= cfg.accuracy for r in failed)
    assert max(window_residuals(cfg, records)) < cfg.accuracy
    assert summarise(sp, records, rounds)["error_vs_serial"] <= cfg.accuracy


@pytest.mark.parametrize("estimator", ["residual", "time"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_balancing_keeps_the_line_and_converges(mode, estimator):
    sp = spec(mode=mode, balancing__enabled=True, balancing__estimator=estimator, balancing__every=2,
              balancing__threshold=1.2, problem={"points": 120, "t_end": 1.0})
    records, rounds = simulate(sp)
    cfg, _, _ = build(sp)
    out = summarise(sp, records, rounds)
    assert out["migrated_points"] > 0
    assert sum(r.sent_points for r in records) == sum(r.received_points for r in records)
    assert max(window_residuals(cfg, records)) < cfg.accuracy  # every window: bounds valid and converged
    assert out["error_vs_serial"] <= cfg.accuracy


def test_one_processor_runs_alone():
    for mode in ("sync", "async"):
        sp = spec(mode, processors=1, platform={"capacities": "homo", "speed": 1.0e4})
        out = summarise(sp, *simulate(sp))
        assert out["error_vs_serial"] <= sp.solver.accuracy


@pytest.mark.parametrize("over, msg", [
    ({"processors": 3}, "platform.capacities: 4 values for 3 processors"),
    ({"solver": {"window": 0}}, "solver.window"),
    ({"balancing": {"estimator": "load"}}, "balancing.estimator"),
    ({"balancing": {"residual": "median"}}, "balancing.residual: must be 'mean' or 'last'"),
    ({"platform": {"sites": [2, 2]}}, "inter_site"),
    ({"bogus": 1}, "bogus: unknown key"),
    ({"problem": {"points": 10**9}}, "problem.points: must be at most 1e\\+07"),
    ({"solver": {"accuracy": float("nan")}}, "solver.accuracy: must be a finite number"),
    ({"problem": {"t_end": 1e6, "dt": 1e-3}}, "problem: t_end / dt is 1e\\+09 time steps"),
    ({"application": {"mode": "eventually"}}, "application.mode: must be 'sync' or 'async'"),
])
def test_bad_specs_are_one_line_errors(over, msg):
    with pytest.raises(ScenarioError, match=msg):
        parse_spec({**SMALL, **over})


def test_sync_is_the_default_mode_and_specs_are_recognised(tmp_path):
    from hermes.app.brusselator import is_spec_file
    from tests.conftest import ROOT

    assert parse_spec({}).mode == "sync"
    assert is_spec_file(ROOT / "scenarios" / "bahi-grid.yaml")
    assert not is_spec_file(ROOT / "scenarios" / "quickstart.yaml") and not is_spec_file(tmp_path / "none.yaml")


def test_too_many_processors_for_the_points():
    sp = spec(processors=4, problem={"points": 20}, solver={"overlap": 6})
    with pytest.raises(SolverError, match="cannot give 4 processors 7 points each"):
        build(sp)


def test_sites_make_slow_links_between_sites():
    sp = spec(processors=6, platform={"capacities": "homo", "sites": [2, 3, 1],
                                      "inter_site": {"latency": 0.01, "bandwidth": 1e6}})
    _, platform, _ = build(sp)
    lat = [platform.links.min_cost(i, i + 1) for i in range(5)]
    assert lat == [1e-4, 0.01, 1e-4, 1e-4, 0.01]


@pytest.mark.parametrize("name", ["bahi-homogeneous.yaml", "bahi-grid.yaml", "bahi-homogeneous-windowed.yaml",
                                  "bahi-grid-windowed.yaml"])
def test_shipped_specs_validate(name):
    from tests.conftest import ROOT

    sp = load_spec(ROOT / "scenarios" / name)
    cfg, platform, bounds = build(sp)
    assert len(bounds) == sp.processors + 1


@pytest.mark.parametrize("caps, overlap", [([1.0, 4.0, 1.8, 3.0, 1.2], 10), ([1, 1, 1, 1], 3), ([5.0], 0),
                                           ([1.0, 10.0, 1.0], 20)])
def test_capacity_partition_equalises_sweep_times(caps, overlap):
    """Static balancing: (n_i + o_i)/c_i equal except where a block is held at its minimum."""
    from hermes.app.brusselator.iteration import capacity_bounds

    n, keep = 400, overlap + 1
    b = capacity_bounds(n, caps, overlap, keep)
    counts = np.diff(b)
    assert b[0] == 0 and b[-1] == n and np.all(counts >= keep)
    p = len(caps)
    o = np.array([overlap * ((i > 0) + (i < p - 1)) for i in range(p)])
    t = (counts + o) / np.asarray(caps, dtype=float)
    free = counts > keep
    if free.sum() > 1:  # rounding to whole points: within one point per capacity
        assert np.ptp(t[free]) <= 2.0 / min(caps) + 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("name, mode, smaller", [
    ("bahi-homogeneous-windowed.yaml", "async", ["problem.points=500"]),
    ("bahi-homogeneous-windowed.yaml", "sync", ["problem.points=500"]),
    ("bahi-grid-windowed.yaml", "async", ["problem.t_end=5.0"])], ids=["homogeneous-async", "homogeneous-sync", "grid-async"])
def test_windowed_scenarios_match_the_serial_solution_to_the_accuracy(name, mode, smaller):
    """The windowed variant: the whole trajectory within 7e-4 of the serial solution, with the residual threshold
    derived from it.

    The shipped scenarios made smaller: the homogeneous one on 500 points instead of 2000 (its 40 windows kept; the
    iteration depends on N only through δ/ℓ, and its overlap is auto: δ = ⌈2ℓ⌉), the grid one over t_end 5 (20
    windows; its cost is in its 15 processors' messages, not in N). With 003's criterion read literally (window
    residual below the accuracy) the homogeneous runs end 1.0e-3 (AIAC) and 2.4e-3 (SISC) away from the serial
    solution (1.5e-3 and 2.5e-3 on 2000 points): the 40 windows' errors add up. Asserted too, so the test shows
    that the derived threshold is what makes the difference."""
    from tests.conftest import ROOT

    sp = load_spec(ROOT / "scenarios" / name, [f"application.mode={mode}", *smaller])
    out = summarise(sp, *simulate(sp))
    assert out["residual_threshold"] < out["accuracy"] / 10
    assert out["error_vs_serial"] <= out["accuracy"]
    if name == "bahi-homogeneous-windowed.yaml":
        literal = load_spec(ROOT / "scenarios" / name, [f"application.mode={mode}", "solver.residual=7e-4",
                                                         *smaller])
        assert summarise(literal, *simulate(literal))["error_vs_serial"] > literal.solver.accuracy


def test_papers_form_stops_far_from_the_solution_and_residual_balancing_pays():
    """scenarios/bahi-homogeneous.yaml (003's form) on 4 processors and 400 points: the literal criterion (every
    residual below 7e-4) ends more than 10x the accuracy away from the serial solution (measured 0.027 AIAC, 0.038
    SISC), and 003's residual balancing as printed (``balancing.residual: last``) shortens the AIAC run (measured
    46.05 s -> 27.38 s, 1.68x; the ratio grows with N, docs/ASYNC.md; hermes' ``mean`` rule gains 1.26x here, 36.55
    s). Fails if the paper's form loses its mechanism (e.g. Newton restarted from the previous time level or ghosts
    read during the sweep: then the ratio falls), or if ``last`` stops being 003's rule."""
    from tests.conftest import ROOT

    small = ["processors=4", "problem.points=400"]
    plain = load_spec(ROOT / "scenarios" / "bahi-homogeneous.yaml", small)
    balanced = load_spec(ROOT / "scenarios" / "bahi-homogeneous.yaml",
                         [*small, "balancing.enabled=true", "balancing.residual=last"])
    a, b = (summarise(sp, *simulate(sp)) for sp in (plain, balanced))
    assert a["form"] == "paper" and a["window"] == 200 and a["overlap"] == 0 and a["residual_threshold"] == 7e-4
    assert a["error_vs_serial"] > 10 * a["accuracy"] and b["error_vs_serial"] > 10 * b["accuracy"]
    assert a["time"] / b["time"] > 1.4 and b["migrated_points"] > 0


def test_residual_threshold_from_accuracy_windows_and_contraction():
    from hermes.app.brusselator.study import contraction_estimate, residual_threshold

    assert residual_threshold(7e-4, 1, 0.1) == 7e-4                      # capped at the accuracy
    assert residual_threshold(7e-4, 40, 0.5) == pytest.approx(7e-4 / 40, rel=4 * np.finfo(float).eps)
    sp = spec(solver={"window": 5, "accuracy": 1e-3})                    # 4 windows of 5 steps (t_end 1, dt 0.05)
    cfg, _, _ = build(sp)
    rho = contraction_estimate(cfg.problem, cfg.overlap)
    assert 0 < rho < 1 and cfg.accuracy == pytest.approx(1e-3 * (1 - rho) / (rho * 4), rel=4 * np.finfo(float).eps)
    assert build(spec(solver={"window": 5, "residual": 2e-4}))[0].accuracy == 2e-4
    assert build(spec(solver={"window": 5, "contraction": 0.5, "accuracy": 1e-3}))[0].accuracy == \
        pytest.approx(1e-3 / 4, rel=4 * np.finfo(float).eps)


@pytest.mark.parametrize("key, value, msg", [("residual", -1, "solver.residual: must be at least 1e-15, got -1"),
                                             ("contraction", 1.5, "solver.contraction: must be below 1, got 1.5"),
                                             ("contraction", 0, "solver.contraction: must be above 0, got 0")])
def test_bad_residual_settings_are_one_line_errors(key, value, msg):
    with pytest.raises(ScenarioError) as err:
        spec(solver={key: value})
    assert str(err.value) == msg
