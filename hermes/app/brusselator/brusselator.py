"""The 1-D Brusselator of Bahi, Contassot-Vivier & Couturier (003 §V, eq. 4): kernel, block solver, serial reference.

The problem (003 eq. 4, from Hairer & Wanner II §IV.1): for N points ``x_i = i/(N+1)``,

    u_i' = 1 + u_i² v_i − 4 u_i + α (N+1)² (u_{i−1} − 2 u_i + u_{i+1})
    v_i' = 3 u_i − u_i² v_i      + α (N+1)² (v_{i−1} − 2 v_i + v_{i+1})

with ``u_i(0) = 1 + sin(2π x_i)``, ``v_i(0) = 3`` and the boundary values ``u_0 = u_{N+1} = 1``,
``v_0 = v_{N+1} = 3`` on ``t ∈ [0, 10]``, α = 1/50.

**Correction to the seed text.** 003 prints ``u_0(t) = u_{N+1}(t) = α(N+1)²``. That is the coefficient of the
diffusion term, not a boundary value: Hairer & Wanner's Brusselator (the paper's ref. [5]) has u = 1 at both ends
(A = 1, B = 3, so the homogeneous steady state is u = 1, v = 3), and with the printed value (7.2·10⁷ at the
paper's N = 60000) the reaction term u²v explodes on the first step. hermes uses 1; ``u_boundary`` can be set
to run anything else.

Time discretisation: implicit Euler with step ``dt`` (0.05 in 003 §VII); each step's nonlinear system is
solved by Newton's method (003 §VI-A: "implicit Euler ... Newton algorithm to solve the resulting nonlinear
system"). With the unknowns interleaved as ``y = (u_1, v_1, …, u_N, v_N)`` (003 §VI) the Jacobian is banded with
two sub- and two super-diagonals, so each Newton step is one banded LU solve (LAPACK ``gbsv`` through
:func:`scipy.linalg.solve_banded`), linear in the number of points.

The parallel iteration (used by :mod:`hermes.app.brusselator.sisc` and :mod:`hermes.app.brusselator.aiac`)
    Processor i owns the points ``[a_i, b_i)`` of a line partition (003 §VI-A: "processors in a linear way").
    The time interval is cut into windows of ``window`` steps. In a window, one *iteration* of processor i solves
    its block over the whole window — implicit Euler + Newton, step after step — with the neighbours' values
    at the two points just outside the block taken from the latest iterate it has ("ghost" trajectories,
    the two spatial components of 003 Fig. 4). This is the paper's Algorithm 2 (``for j … for t …
    Ynew[j,t] = Solve(Yold[j,t])``: each iteration sweeps the whole time range) — a block waveform relaxation,
    which is why it is the inner iteration here rather than a Newton iteration on the whole space-time system:
    a block waveform relaxation needs only the neighbours' boundary trajectories, exactly the data 003 exchanges,
    and its fixed point is the serial implicit-Euler solution (below), so the result can be checked against it.

    Two parameters the paper does not have, because without them the iteration cannot reach the stated accuracy:

    ``overlap`` δ
        Each block is solved on ``[a_i − δ, b_i + δ)``; only the owned part is kept (an overlapping multisplitting,
        003 refs. [2], [24]). The ghosts are then the neighbours' points ``a_i − δ − 1`` and ``b_i + δ``, still one
        point (two components) per side. For one implicit step the error at a block edge decays through the block
        like ``λ^k`` with ``λ ≈ 1 − 1/ℓ``, ``ℓ = √(dt α) (N+1)`` grid points (the screening length of
        ``I − dt α ∂xx``), so the iteration contracts by about ``exp(−2δ/ℓ)``. With δ = 0 (the paper) the
        factor is ``1 − O(1/ℓ)``: ℓ ≈ 1900 points at N = 60000, and a residual of 7·10⁻⁴ is reached far from the
        solution. ``overlap: auto`` takes δ = ⌈2ℓ⌉.
    ``window``
        Over the whole interval [0, 10] the blocks are coupled through the full diffusion length ``√(α T)``
        (half the domain) and the Brusselator's growing oscillation, and the relaxation converges very slowly;
        windows of a few steps (one detection of global convergence each) converge in a few iterations.
        ``window = n_steps`` is the paper's literal form.

    The fixed point of the block map F is the serial solution: restricted to an extended block, with the exact
    values at its ghosts, the serial solution solves the block's implicit-Euler system, whose Newton root is
    unique near it. The local residual ``‖X_i^k − X_i^{k−1}‖∞`` (003 §II-A) is the max norm over the block's
    points, both species and the window's time levels.

The numerics are pure functions of arrays (:func:`solve_block`, :func:`block_map`, :func:`serial_solution`);
:class:`hermes.app.brusselator.blocks.BlockState` is one processor's block during a window, shared by every driver.

References
----------
003: J. M. Bahi, S. Contassot-Vivier, R. Couturier, *Dynamic load balancing and efficient load estimators for
asynchronous iterative algorithms*, IEEE TPDS 16 (2005) 289–299.
E. Hairer, G. Wanner, *Solving ODEs II*, Springer 1991, §IV.1 (the Brusselator with diffusion).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray
from scipy.linalg.lapack import dgbsv as _gbsv

from hermes.errors import HermesError

__all__ = ["Brusselator", "SolverError", "solve_block", "implicit_step", "serial_solution", "block_map",
           "window_steps", "auto_overlap"]


class SolverError(HermesError):
    """Newton's method did not converge on a block (time step too large for the data, or bad parameters)."""


@dataclass(frozen=True)
class Brusselator:
    """The discretised problem (003 eq. 4) and the implicit-Euler / Newton parameters.

    Parameters
    ----------
    n : int
        Number of interior points N (unknowns 2N).
    alpha : float
        Diffusion coefficient α (1/50 in 003).
    t_end, dt : float
        Time interval [0, t_end] and implicit-Euler step (10 and 0.05 in 003 §VII); ``t_end / dt`` must be an
        integer.
    u_boundary, v_boundary : float
        Dirichlet values at x = 0 and x = 1 (1 and 3; see the module docstring for the seed's typo).
    newton_tol : float
        Newton stops when the max-norm of the update is at most ``newton_tol · max(1, ‖y‖∞)``.
    max_newton : int
        Newton iterations allowed per step before :class:`SolverError`.
    """

    n: int
    alpha: float = 1.0 / 50.0
    t_end: float = 10.0
    dt: float = 0.05
    u_boundary: float = 1.0
    v_boundary: float = 3.0
    newton_tol: float = 1e-10
    max_newton: int = 30

    def __post_init__(self):
        if self.n < 1:
            raise SolverError(f"problem.points must be at least 1, got {self.n}")
        if not (self.alpha > 0 and self.dt > 0 and self.t_end > 0):
            raise SolverError("problem.alpha, problem.dt and problem.t_end must be positive")
        steps = self.t_end / self.dt
        if abs(steps - round(steps)) > 1e-9 * max(1.0, steps) or round(steps) < 1:
            raise SolverError(f"problem.t_end / problem.dt must be a whole number of steps, got {steps:g}")

    @property
    def n_steps(self) -> int:
        """Implicit-Euler steps over [0, t_end]."""
        return int(round(self.t_end / self.dt))

    @property
    def diffusion(self) -> float:
        """``D = α (N+1)²``, the coefficient of the discrete Laplacian."""
        return self.alpha * (self.n + 1) ** 2

    @property
    def screening_length(self) -> float:
        """``ℓ = √(dt α) (N+1)``: grid points over which one implicit step's boundary influence decays by e."""
        return math.sqrt(self.dt * self.alpha) * (self.n + 1)

    @cached_property
    def x(self) -> NDArray[np.float64]:
        """Point coordinates ``x_i = i / (N+1)``, i = 1..N."""
        return np.arange(1, self.n + 1, dtype=np.float64) / (self.n + 1)

    def initial(self, start: int = 0, stop: int | None = None) -> NDArray[np.float64]:
        """Initial values of points ``[start, stop)`` as an array (points, 2) of (u, v) (003 §V)."""
        x = self.x[start:stop]
        return np.stack([1.0 + np.sin(2.0 * np.pi * x), np.full_like(x, 3.0)], axis=1)

    def boundary(self, levels: int) -> NDArray[np.float64]:
        """The Dirichlet boundary as a ghost trajectory: ``levels`` rows of (u_boundary, v_boundary)."""
        return np.tile(np.array([self.u_boundary, self.v_boundary]), (levels, 1))


def auto_overlap(problem: Brusselator) -> int:
    """δ = ⌈2ℓ⌉: the block iteration then contracts by about e⁻⁴ per sweep (module docstring)."""
    return int(math.ceil(2.0 * problem.screening_length))


def window_steps(n_steps: int, window: int) -> list[tuple[int, int]]:
    """The windows ``(first step, steps)``: ``window`` steps each, the last one possibly shorter."""
    if window < 1:
        raise SolverError(f"solver.window must be at least 1 step, got {window}")
    return [(s, min(window, n_steps - s)) for s in range(0, n_steps, window)]


def solve_block(init: NDArray[np.float64], left: NDArray[np.float64], right: NDArray[np.float64],
                problem: Brusselator) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Implicit Euler + Newton on a block of points over one window, with given ghost trajectories.

    Parameters
    ----------
    init : ndarray, shape (n, 2)
        (u, v) of the block's points at the window's first time level.
    left, right : ndarray, shape (m + 1, 2)
        (u, v) of the points just outside the block at the window's m + 1 time levels (row 0 is not used:
        implicit Euler takes the neighbours at the new level).
    problem : Brusselator

    Returns
    -------
    y : ndarray, shape (m + 1, n, 2)
        The block's trajectory; ``y[0] = init``.
    newton : ndarray of int, shape (m,)
        Newton iterations per step (the work measure of the drivers).

    Raises
    ------
    SolverError
        If Newton does not converge within ``problem.max_newton`` iterations.

    Notes
    -----
    Step k solves ``G(y) = y − y^{k−1} − dt f(y) = 0`` (003 §VI-A) by Newton from ``y^{k−1}``; the Jacobian
    ``I − dt ∂f/∂y`` in the interleaved order is stored in LAPACK band form (2 sub-, 2 super-diagonals) and
    factorised by ``dgbsv`` (partial pivoting; called directly, half the cost of :func:`scipy.linalg.solve_banded`).
    The result is a pure function of the inputs, so a block whose inputs have not changed need not be solved again.
    Each step is :func:`implicit_step`.
    """
    m = left.shape[0] - 1
    y = np.empty((m + 1,) + init.shape)
    y[0] = init
    newton = np.zeros(m, dtype=np.int64)
    for k in range(1, m + 1):
        y[k], newton[k - 1] = implicit_step(y[k - 1], left[k], right[k], problem, k)
    return y, newton


def implicit_step(prev: NDArray[np.float64], left: NDArray[np.float64], right: NDArray[np.float64],
                  problem: Brusselator, k: int = 0) -> tuple[NDArray[np.float64], int]:
    """One implicit-Euler step of a block by Newton: the values (n, 2) at the new level and the Newton iterations.

    ``left`` and ``right`` are the (u, v) of the two points just outside the block at the new level; ``k`` only
    labels the step in the error message. See :func:`solve_block`.
    """
    n = prev.shape[0]
    D, dt = problem.diffusion, problem.dt
    pu, pv = np.empty(n + 2), np.empty(n + 2)
    ab = np.empty((7, 2 * n))  # LAPACK gbsv band storage: 2 rows for the LU fill-in, then the 5 diagonals
    rhs = np.empty(2 * n)
    u, v = prev[:, 0].copy(), prev[:, 1].copy()
    uo, vo = prev[:, 0], prev[:, 1]
    pu[0], pv[0] = left
    pu[-1], pv[-1] = right
    for it in range(1, problem.max_newton + 1):
        pu[1:-1], pv[1:-1] = u, v
        u2v = u * u * v
        fu = 1.0 + u2v - 4.0 * u + D * (pu[:-2] - 2.0 * u + pu[2:])
        fv = 3.0 * u - u2v + D * (pv[:-2] - 2.0 * v + pv[2:])
        rhs[0::2] = uo - u + dt * fu
        rhs[1::2] = vo - v + dt * fv
        uv2 = 2.0 * u * v
        ab[:3] = 0.0
        ab[5:] = 0.0
        ab[2, 2:] = -dt * D
        ab[6, :-2] = -dt * D
        ab[4, 0::2] = 1.0 - dt * (uv2 - 4.0 - 2.0 * D)
        ab[4, 1::2] = 1.0 + dt * (u * u + 2.0 * D)
        ab[3, 1::2] = -dt * u * u
        ab[5, 0::2] = -dt * (3.0 - uv2)
        ab[3, 0::2] = 0.0
        _, _, d, info = _gbsv(2, 2, ab, rhs, overwrite_ab=1)
        if info != 0:
            raise SolverError(f"singular Newton system at step {k} of a {n}-point block")
        u += d[0::2]
        v += d[1::2]
        step = float(np.max(np.abs(d)))
        if not math.isfinite(step):
            raise SolverError(f"Newton did not converge at step {k} of a {n}-point block (non-finite update)")
        if step <= problem.newton_tol * max(1.0, float(np.max(np.abs(u))), float(np.max(np.abs(v)))):
            return np.stack([u, v], axis=1), it
    raise SolverError(f"Newton did not converge at step {k} of a {n}-point block ({problem.max_newton} iterations)")


def serial_solution(problem: Brusselator) -> NDArray[np.float64]:
    """The serial reference: implicit Euler + Newton on all N points over [0, t_end]; shape (n_steps + 1, N, 2)."""
    bc = problem.boundary(problem.n_steps + 1)
    y, _ = solve_block(problem.initial(), bc, bc, problem)
    return y


def block_map(problem: Brusselator, y: NDArray[np.float64], bounds: NDArray[np.int64],
              overlap: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """One synchronous sweep of the block iteration: ``F(y)`` for a window's global iterate.

    Parameters
    ----------
    y : ndarray, shape (m + 1, N, 2)
        Global iterate over a window; row 0 is the window's starting state.
    bounds : ndarray of int, shape (P + 1,)
        Line partition: block i owns ``[bounds[i], bounds[i+1])``.
    overlap : int
        δ: each block is solved on ``[a − δ, b + δ)`` (clipped to the domain).

    Returns
    -------
    (F(y), newton) : the new iterate (same shape) and the Newton iterations of each block (P,).

    Notes
    -----
    This is the block-Jacobi form of 003 eq. (2), ``X_i^{k+1} = F_i(X^k)``; :class:`BlockState` performs the same
    arithmetic block by block, so SISC runs reproduce it bit for bit.
    """
    n_pts = y.shape[1]
    out = np.empty_like(y)
    newton = np.zeros(len(bounds) - 1, dtype=np.int64)
    bc = problem.boundary(y.shape[0])
    for i in range(len(bounds) - 1):
        a, b = int(bounds[i]), int(bounds[i + 1])
        lo, hi = max(a - overlap, 0), min(b + overlap, n_pts)
        left = bc if lo == 0 else y[:, lo - 1]
        right = bc if hi == n_pts else y[:, hi]
        sol, its = solve_block(y[0, lo:hi], left, right, problem)
        out[:, a:b] = sol[:, a - lo:b - lo]
        newton[i] = int(its.sum()) * (hi - lo)
    return out, newton

