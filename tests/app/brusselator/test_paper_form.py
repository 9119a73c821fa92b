"""003 Alg. 2's form of the Brusselator iteration (solver.form: paper): the compiled sweep, Newton from the previous
iterate with the work it actually does, ghosts read at the sweep's start, the left border sent during the sweep."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.app.brusselator.aiac import AiacRank
from hermes.app.brusselator.brusselator import Brusselator, SolverError, solve_block
from hermes.app.brusselator.iteration import IterConfig, Platform, StaticLinks
from hermes.app.brusselator.kernel import solve_sweep, sweep
from hermes.app.brusselator.study import parse_spec, simulate, summarise
from hermes.runtime.clock import Links


def _ghosts(pb: Brusselator, seed: int = 0):
    """Ghost trajectories near the solution's range (u in [0.5, 1.5], v in [2.5, 3.5]), varying in time."""
    rng = np.random.default_rng(seed)
    m1 = pb.n_steps + 1
    return (np.column_stack([0.5 + rng.random(m1), 2.5 + rng.random(m1)]),
            np.column_stack([0.5 + rng.random(m1), 2.5 + rng.random(m1)]))


@pytest.mark.parametrize("n", [1, 2, 37])
def test_compiled_sweep_solves_the_same_implicit_euler_system_as_lapack(n):
    """Both Newton iterations stop when the update is ≤ tol·max(1, ‖y‖∞) (tol = 1e-10); Newton converging
    quadratically, each result is within about tol·scale of the root, so the two differ by ≤ 2 tol·scale (tested with
    10 tol·scale, scale = max(1, ‖y‖∞) ≤ 10 here). The Newton counts are equal (same iterates up to rounding)."""
    pb = Brusselator(400, t_end=2.0)
    left, right = _ghosts(pb)
    init = pb.initial(100, 100 + n)
    y_ref, it_ref = solve_block(init, left, right, pb)
    y, its = solve_sweep(init, left, right, pb)
    scale = max(1.0, float(np.max(np.abs(y_ref))))
    assert np.max(np.abs(y - y_ref)) <= 10 * pb.newton_tol * scale
    assert np.array_equal(its, it_ref)


def test_newton_from_the_previous_iterate_does_one_iteration_on_a_converged_block():
    """Alg. 2's Solve(Yold[j,t]): from the block's own solution with the same ghosts the first update is below the
    tolerance at every level, so one iteration per level is done and charged; from the previous level it takes more."""
    pb = Brusselator(400, t_end=2.0)
    left, right = _ghosts(pb, 1)
    y, its = solve_sweep(pb.initial(0, 60), left, right, pb)
    again, its2 = sweep(y, left, right, pb, from_iterate=True)
    assert np.all(its2 == 1) and its.sum() > 1.5 * its2.sum()
    assert np.max(np.abs(again - y)) <= 10 * pb.newton_tol * max(1.0, float(np.max(np.abs(y))))


def test_the_compiled_sweep_reports_a_diverging_newton_in_one_line():
    pb = Brusselator(400, t_end=2.0, max_newton=1)
    left, right = _ghosts(pb)
    with pytest.raises(SolverError, match=r"Newton did not converge \(1 iterations\) at step 1 of a 50-point block"):
        solve_sweep(pb.initial(0, 50), left, right, pb)


def _paper_spec(mode: str, **solver):
    return parse_spec({"name": "p", "processors": 3, "application": {"kernel": "brusselator", "mode": mode},
                       "problem": {"points": 120, "t_end": 1.0},
                       "solver": {"window": "all", "overlap": 0, "residual": 1e-3, **solver},
                       "platform": {"capacities": [1.0, 2.0, 1.0], "speed": 1.0e4}})


def test_paper_form_charges_fewer_newton_iterations_for_the_same_sync_iterates():
    """SISC sweeps are block Jacobi in both forms: the same iterates up to the Newton tolerance (hence the same
    number of sweeps and an error vs serial equal to ~1e-10·scale), but the paper's form starts Newton from the
    previous iterate and charges only what it does, so its virtual time is smaller."""
    step = summarise(_paper_spec("sync"), *simulate(_paper_spec("sync")))
    paper = summarise(_paper_spec("sync", form="paper"), *simulate(_paper_spec("sync", form="paper")))
    assert paper["iterations"] == step["iterations"]
    assert abs(paper["error_vs_serial"] - step["error_vs_serial"]) <= 1e-8
    assert paper["time"] < 0.9 * step["time"]


def test_the_left_border_leaves_after_the_first_three_components():
    """003 Alg. 2 sends the first two local components left after component StartC+2: at 3/(2n) of the sweep."""
    pb = Brusselator(40, t_end=0.5)
    cfg = IterConfig(pb, 0, pb.n_steps, 1e-3, form="paper")
    plat = Platform.create(np.ones(2), 1.0e4, StaticLinks(Links(1e-4, 1e7, {})))
    rank = AiacRank(1, 2, cfg, np.array([0, 20, 40]), plat.rates[1], plat.links)
    out = rank.begin(0.0)
    data = [ev for ev in out if ev.kind == "data"]
    assert len(data) == 1 and data[0].dest == 0
    assert data[0].sent == pytest.approx(rank.next_end * 3 / 40, rel=1e-12)
    # the values sent are the new sweep's trajectory of the block's first point
    assert np.array_equal(data[0].payload[2], rank.run.ext[:, 0])
    # the right neighbour's border goes at the end of the sweep (rank 0 sends nothing at its start)
    rank0 = AiacRank(0, 2, cfg, np.array([0, 20, 40]), plat.rates[0], plat.links)
    assert [ev for ev in rank0.begin(0.0) if ev.kind == "data"] == []
    assert [ev.sent for ev in rank0.on_boundary() if ev.kind == "data"] == [rank0.sweep_start]


def test_a_bad_form_is_one_line():
    from hermes.errors import ScenarioError

    with pytest.raises(ScenarioError, match="solver.form"):
        _paper_spec("sync", form="literal")
