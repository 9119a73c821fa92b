"""003's residual balancing of AIAC on unequal machines (hermes.bahi.aiac, hermes.bahi.line_balance).

The shipped Table I scenario (``scenarios/bahi-grid.yaml`` with ``balancing.enabled=true``) did not converge: read
at one iteration, the residual of a processor that iterates faster than its neighbours' data arrive is 0 or a
spike, so the fast processors sent their components to the slow ones whenever they read a spike, the slowest
machine ended with 625 of the 1,500 points and a fast one passed 100,000 iterations. These tests reproduce the
mechanism on 4 processors in a few seconds and check the fix (docs/ASYNC.md, "Residual balancing on unequal
machines").
"""

from __future__ import annotations

import numpy as np
import pytest

from hermes.bahi.aiac import AiacRank
from hermes.bahi.iteration import Event
from hermes.bahi.line_balance import residual_estimate
from hermes.bahi.study import build, load_spec, simulate, summarise
from tests.conftest import ROOT

#: scenarios/bahi-grid.yaml (003's form: whole-interval sweeps, no overlap, the literal criterion) on 4 processors
#: whose speeds alternate 1, 4, 1, 4 — every neighbour of a slow machine is 4x faster, as on Table I's grid
UNEQUAL = ["processors=4", "platform.sites=null", "platform.inter_site=null", "platform.capacities=[1,4,1,4]",
           "problem.points=200"]


def test_residual_estimate_is_the_mean_over_the_balancing_period():
    # a fast processor: one spike per arrival of its neighbours' data, zeros in between
    assert residual_estimate([8e-3, 0.0, 0.0, 0.0], 4) == pytest.approx(2e-3, rel=1e-15)
    assert residual_estimate([0.0, 0.0, 0.0, 8e-3], 4) == residual_estimate([8e-3, 0.0, 0.0, 0.0], 4)
    assert residual_estimate([5.0, 1e-3, 1e-3, 1e-3, 1e-3], 4) == pytest.approx(1e-3, rel=1e-15)  # last `every`
    assert residual_estimate([3e-3], 20) == 3e-3
    assert residual_estimate([], 20) is None


def test_residual_balancing_on_unequal_machines_converges_near_the_serial_solution():
    """Before the fix, the slow machines (ranks 0 and 2) ended with 162 of the 200 points, the fastest processor
    spun through 18,056 iterations (5.3x the unbalanced run's 3,426) and the run exceeded this test's bound of
    5,000 iterations; on N = 400 it passed 20,000. Now: 49 points on the slow machines, at most 1,000 iterations,
    14.5 s of virtual time against 25.3 s unbalanced.

    Bound on the result: 003's criterion (every residual below 7e-4, read literally) does not bound the error of
    this overlap-free iteration (docs/ASYNC.md: 0.02-0.07 at N = 400); the balanced result must be as close to the
    serial solution as the unbalanced one within a factor 2 (measured 0.012 against 0.026).
    """
    grid = ROOT / "scenarios" / "bahi-grid.yaml"
    plain = load_spec(grid, UNEQUAL)
    balanced = load_spec(grid, [*UNEQUAL, "balancing.enabled=true", "balancing.estimator=residual",
                                "solver.max_iterations=5000"])
    a, b = (summarise(sp, *simulate(sp)) for sp in (plain, balanced))
    assert b["form"] == "paper" and b["residual_threshold"] == 7e-4 and b["migrated_points"] > 0
    sizes = [hi - lo for lo, hi in zip(b["final_bounds"], b["final_bounds"][1:])]
    assert sizes[0] + sizes[2] < sizes[1] + sizes[3]          # the slow machines hold fewer points than the fast
    assert max(b["iterations"]) <= max(a["iterations"])       # no processor spins more than without balancing
    assert b["time"] < a["time"]                              # and the run is shorter: 003's direction
    assert b["error_vs_serial"] <= 2 * a["error_vs_serial"]


def test_a_neighbours_estimate_from_before_the_last_transfer_does_not_count():
    """Every estimate carries the number of transfers its sender made on the link; a processor decides only with
    an estimate made since the last transfer between them (a slow neighbour's estimate from before it received
    the last components would make a fast processor send again and again on the same stale figure: seen on
    Table I's grid, five transfers in 0.4 s of virtual time on one estimate of the slowest machine)."""
    sp = load_spec(ROOT / "scenarios" / "bahi-grid.yaml",
                   [*UNEQUAL[:-1], "processors=2", "platform.capacities=[1,1]", "problem.points=40",
                    "balancing.enabled=true", "balancing.every=1"])
    cfg, platform, bounds = build(sp)
    rank = AiacRank(0, 2, cfg, bounds, platform.rates[0], platform.links)
    rank.begin(0.0)
    rank.moves[1] = 1  # one transfer already happened on the link to rank 1

    def neighbour(k: int, moves: int) -> Event:
        """Rank 1's border trajectory (changing, so rank 0 keeps a residual well above 0) and a zero estimate."""
        traj = np.tile([1.0 + 0.05 * k, 3.0], (rank.block.levels, 1))
        t = rank.next_end
        return Event(t, 1, k, 0, "data", (0, rank.block.ghost_pos(1), traj, (0.0, 20, moves)), t, traj.nbytes)

    offers = []
    for k in range(4):
        rank.on_arrival(neighbour(k, 0))
        offers += [ev for ev in rank.on_boundary() if ev.kind == "offer"]
    assert rank.load > 1e-3 and not offers   # rank 1's estimate predates the transfer: it does not count
    rank.on_arrival(neighbour(4, 1))
    offers = [ev for ev in rank.on_boundary() if ev.kind == "offer"]
    assert len(offers) == 1 and offers[0].dest == 1 and offers[0].payload[1] >= 1
