"""The Brusselator kernel of 003: implicit Euler + Newton, the serial reference, the block map and its contraction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.app.brusselator.brusselator import (Brusselator, SolverError, auto_overlap, block_map, serial_solution,
                                    solve_block, window_steps)
from hermes.app.brusselator.iteration import even_bounds

EPS = np.finfo(np.float64).eps


def test_boundary_values_are_one_and_three_not_the_printed_typo():
    """003 prints u_0 = α(N+1)²; hermes uses Hairer–Wanner's u = 1, v = 3 (module docstring)."""
    pb = Brusselator(100)
    assert (pb.u_boundary, pb.v_boundary) == (1.0, 3.0)
    assert np.array_equal(pb.boundary(3), np.tile([1.0, 3.0], (3, 1)))


def test_initial_condition_of_003():
    pb = Brusselator(9)
    y0 = pb.initial()
    x = np.arange(1, 10) / 10
    assert np.allclose(y0[:, 0], 1 + np.sin(2 * np.pi * x), rtol=0, atol=4 * EPS)
    assert np.all(y0[:, 1] == 3.0)


def test_homogeneous_steady_state_is_kept():
    """u = 1, v = 3 with the same boundary values is an equilibrium of eq. (4): f = 0 and the Laplacian is 0.

    Newton's first update is exactly 0 up to rounding of f (a few ε times the terms, ≤ 10 |D| ε with D = α(N+1)²
    entering the Laplacian); the bound is 100 ε D dt / (1 + 2 D dt) ≤ 100 ε per step, over 20 steps 2000 ε.
    """
    pb = Brusselator(50, t_end=1.0)
    init = np.tile([1.0, 3.0], (pb.n, 1))
    y, newton = solve_block(init, pb.boundary(pb.n_steps + 1), pb.boundary(pb.n_steps + 1), pb)
    assert np.max(np.abs(y - init)) <= 2000 * EPS
    assert np.all(newton >= 1)


def test_newton_solves_each_implicit_step():
    """Each step satisfies y^k − y^{k−1} − dt f(y^k) = 0 to the Newton tolerance times ‖J‖∞.

    Newton stops when its update is at most tol·max(1, ‖y‖); by quadratic convergence the remaining error is far
    smaller, so ‖G(y)‖ ≤ ‖J‖∞ · tol · scale with ‖J‖∞ ≤ 1 + dt (4D + 2 u v + 4 + u² + 3).
    """
    pb = Brusselator(40, t_end=0.5)
    y = serial_solution(pb)
    D, dt = pb.diffusion, pb.dt
    for k in range(1, pb.n_steps + 1):
        u, v = y[k, :, 0], y[k, :, 1]
        pu = np.concatenate([[1.0], u, [1.0]])
        pv = np.concatenate([[3.0], v, [3.0]])
        fu = 1 + u * u * v - 4 * u + D * (pu[:-2] - 2 * u + pu[2:])
        fv = 3 * u - u * u * v + D * (pv[:-2] - 2 * v + pv[2:])
        g = np.concatenate([u - y[k - 1, :, 0] - dt * fu, v - y[k - 1, :, 1] - dt * fv])
        scale = max(1.0, float(np.abs(y[k]).max()))
        jnorm = 1 + dt * (4 * D + float(np.max(2 * u * v + 4 + u * u + 3)))
        assert np.max(np.abs(g)) <= jnorm * pb.newton_tol * scale


def test_implicit_euler_is_first_order_in_time():
    """Halving dt halves the error at t = 1 (implicit Euler, order 1): ratio in [1.7, 2.3] for dt 0.05 → 0.0125."""
    def at_one(dt):
        pb = Brusselator(20, t_end=1.0, dt=dt)
        return serial_solution(pb)[-1]

    fine = at_one(0.05 / 32)
    errs = [np.max(np.abs(at_one(dt) - fine)) for dt in (0.05, 0.025, 0.0125)]
    ratios = [errs[0] / errs[1], errs[1] / errs[2]]
    assert all(1.7 <= r <= 2.3 for r in ratios), ratios


def test_newton_failure_is_a_solver_error():
    pb = Brusselator(10, t_end=0.05, max_newton=1)
    with pytest.raises(SolverError, match="Newton did not converge"):
        serial_solution(pb)


@pytest.mark.parametrize("kw, msg", [({"n": 0}, "points"), ({"n": 5, "dt": 0.03}, "whole number"),
                                     ({"n": 5, "alpha": -1.0}, "positive")])
def test_bad_problem_is_one_line_error(kw, msg):
    with pytest.raises(SolverError, match=msg):
        Brusselator(**kw)


def test_windows_cover_the_interval():
    assert window_steps(12, 5) == [(0, 5), (5, 5), (10, 2)]
    with pytest.raises(SolverError):
        window_steps(12, 0)


@pytest.mark.parametrize("overlap", [0, 3, 9])
def test_serial_solution_is_the_fixed_point_of_the_block_map(overlap):
    """Restricted to an extended block with exact ghosts, the serial solution solves the block system.

    The block solve starts Newton elsewhere than the global solve, so the two agree to the Newton tolerance
    amplified by the step-to-step propagation over a window (≤ 10 steps here): bound 1e3 · newton_tol.
    """
    pb = Brusselator(60, t_end=0.5)
    ref = serial_solution(pb)
    bounds = even_bounds(pb.n, 4, overlap + 1)
    for s, m in window_steps(pb.n_steps, 5):
        y = ref[s:s + m + 1]
        fy, _ = block_map(pb, y, bounds, overlap)
        assert np.max(np.abs(fy - y)) <= 1e3 * pb.newton_tol


def _contraction(pb: Brusselator, overlap: int, sweeps: int = 6) -> float:
    """Geometric mean ratio of consecutive residuals of the synchronous block iteration on the first window."""
    bounds = even_bounds(pb.n, 4, overlap + 1)
    y = np.tile(pb.initial(), (6, 1, 1))
    res = []
    for _ in range(sweeps):
        fy, _ = block_map(pb, y, bounds, overlap)
        res.append(float(np.max(np.abs(fy - y))))
        y = fy
    return (res[-1] / res[1]) ** (1.0 / (sweeps - 2))


def test_overlap_makes_the_block_iteration_contract():
    """Without overlap (003 as printed) the factor is 1 − O(1/ℓ); with δ = 2ℓ it is about e⁻⁴ (module docstring)."""
    pb = Brusselator(400, t_end=0.25)
    ell = pb.screening_length
    assert auto_overlap(pb) == math.ceil(2 * ell)
    slow = _contraction(pb, 0)
    fast = _contraction(pb, auto_overlap(pb))
    assert slow > 0.6
    assert fast < 0.15
    assert fast < slow / 4
