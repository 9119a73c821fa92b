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

The parallel iteration (used by :mod:`hermes.app.sisc` and :mod:`hermes.app.asynchronous`)
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
:class:`BlockState` is one processor's block during a window (iterate, ghosts, the overlap zones' starting
values, and the moves of border points between neighbours, 003 Alg. 3–5), shared by every driver.

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

__all__ = ["Brusselator", "SolverError", "solve_block", "serial_solution", "block_map", "window_steps",
           "auto_overlap", "implicit_step", "BlockState", "SweepRun", "Sweep", "Transfer", "EdgeZone"]


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


@dataclass(frozen=True)
class _Solve:
    """A block solve: the extended trajectory, the ghost values used at each level and the Newton counts."""

    ext: NDArray[np.float64]
    left: NDArray[np.float64]
    right: NDArray[np.float64]
    newton: NDArray[np.int64]


@dataclass
class SweepRun:
    """A sweep in progress (:meth:`BlockState.begin_sweep`): levels 0..k computed."""

    ext: NDArray[np.float64]
    left: NDArray[np.float64]
    right: NDArray[np.float64]
    newton: NDArray[np.int64]
    frozen: tuple | None = None
    k: int = 0
    reuse: bool = True


@dataclass(frozen=True)
class Sweep:
    """A finished sweep of a block, not yet installed (:meth:`BlockState.end_sweep`)."""

    y: NDArray[np.float64]
    residual: float
    work: float
    solve: _Solve
    solved: bool


@dataclass(frozen=True)
class EdgeZone:
    """A block's border values sent to a neighbour: points ``[start, start + len(values))`` at one time level."""

    start: int
    values: NDArray[np.float64]  # (k, 2)


@dataclass(frozen=True)
class Transfer:
    """Border points moved to a neighbour (003 Alg. 4: "the first NbToSend+2 data").

    ``points`` are the moved points ``[start, start + count)`` with their current iterate over the window; the
    receiver's new overlap zone on that side (``zone``: starting values) and new ghost (``ghost_pos``,
    ``ghost``: trajectory) come with them — the "+2 for data dependencies" of the paper.
    """

    window: int
    start: int
    points: NDArray[np.float64]  # (m + 1, count, 2)
    zone: EdgeZone
    ghost_pos: int  # −1: the physical boundary
    ghost: NDArray[np.float64] | None

    @property
    def count(self) -> int:
        return int(self.points.shape[1])

    @property
    def nbytes(self) -> int:
        g = 0 if self.ghost is None else self.ghost.nbytes
        return int(self.points.nbytes + self.zone.values.nbytes + g + 32)


@dataclass
class BlockState:
    """One processor's block in the current window (see the module docstring).

    Attributes
    ----------
    a, b : int
        Owned points ``[a, b)``.
    y : ndarray, shape (m + 1, b − a, 2)
        Current iterate over the window (row 0: the window's starting values, never changed by a sweep).
    zone_left, zone_right : ndarray
        Starting values of the overlap points ``[lo, a)`` and ``[b, hi)``.
    ghost_left, ghost_right : ndarray or None
        Latest known trajectories of the points ``lo − 1`` and ``hi`` (None: physical boundary).
    """

    problem: Brusselator
    overlap: int
    window: int
    a: int
    b: int
    y: NDArray[np.float64]
    zone_left: NDArray[np.float64]
    zone_right: NDArray[np.float64]
    ghost_left: NDArray[np.float64] | None
    ghost_right: NDArray[np.float64] | None
    cache: _Solve | None = None  # the solve that produced y (None once y has changed otherwise)
    sweeps: int = 0
    solves: int = 0

    # -- construction -------------------------------------------------------------------------------------
    @classmethod
    def start(cls, problem: Brusselator, overlap: int, a: int, b: int, levels: int) -> BlockState:
        """The first window's block: initial values (003 §V), ghosts and zones from the initial condition."""
        init = problem.initial()
        return cls._fresh(problem, overlap, 0, a, b, levels, init, problem.n)

    @classmethod
    def _fresh(cls, problem, overlap, window, a, b, levels, start_values, n_pts) -> BlockState:
        """A window's block whose iterate starts constant in time (``start_values`` indexed by global point)."""
        lo, hi = max(a - overlap, 0), min(b + overlap, n_pts)
        const = lambda k: np.tile(start_values[k], (levels, 1))  # noqa: E731
        return cls(problem, overlap, window, a, b, np.tile(start_values[a:b], (levels, 1, 1)),
                   start_values[lo:a].copy(), start_values[b:hi].copy(),
                   None if lo == 0 else const(lo - 1), None if hi == n_pts else const(hi))

    # -- geometry -----------------------------------------------------------------------------------------
    @property
    def n_points(self) -> int:
        return self.b - self.a

    @property
    def levels(self) -> int:
        return self.y.shape[0]

    @property
    def lo(self) -> int:
        return max(self.a - self.overlap, 0)

    @property
    def hi(self) -> int:
        return min(self.b + self.overlap, self.problem.n)

    def ghost_pos(self, side: int) -> int:
        """Global index of the ghost on ``side`` (−1 left, +1 right); −1 when it is the physical boundary."""
        if side < 0:
            return self.lo - 1 if self.lo > 0 else -1
        return self.hi if self.hi < self.problem.n else -1

    def send_pos(self, side: int) -> int:
        """The point the neighbour on ``side`` needs as its ghost: ``a + δ`` (left), ``b − 1 − δ`` (right)."""
        return self.a + self.overlap if side < 0 else self.b - 1 - self.overlap

    def trajectory(self, pos: int) -> NDArray[np.float64]:
        """This block's current trajectory of its owned point ``pos``."""
        return self.y[:, pos - self.a]

    def edge_zone(self, side: int, level: int = -1) -> EdgeZone:
        """Values at time ``level`` of the δ + 1 border points the neighbour on ``side`` overlaps or uses as ghost."""
        if side < 0:
            start, stop = self.a, min(self.a + self.overlap + 1, self.b)
        else:
            start, stop = max(self.b - self.overlap - 1, self.a), self.b
        return EdgeZone(start, self.y[level, start - self.a:stop - self.a].copy())

    # -- the iteration ------------------------------------------------------------------------------------
    @property
    def inputs(self) -> tuple | None:
        """Ghost values (left, right), shape (m + 1, 2) each, of the solve that produced :attr:`y` (or None)."""
        return None if self.cache is None else (self.cache.left, self.cache.right)

    def ghost_values(self, side: int) -> NDArray[np.float64]:
        """Current ghost trajectory on ``side``, the boundary values for the physical boundary."""
        g = self.ghost_left if side < 0 else self.ghost_right
        return self.problem.boundary(self.levels) if g is None else g

    def begin_sweep(self, frozen: tuple | None = None) -> SweepRun:
        """Start ``X_i ← F_i(X_i, ghosts)``; the steps (:meth:`sweep_step`) read the ghosts when they are computed.

        ``frozen``: (left, right) trajectories to use instead (None entries: the physical boundary).
        """
        init = np.concatenate([self.zone_left, self.y[0], self.zone_right])
        m = self.levels - 1
        ext = np.empty((m + 1,) + init.shape)
        ext[0] = init
        if frozen is not None:
            frozen = tuple(self.problem.boundary(self.levels) if g is None else g for g in frozen)
        return SweepRun(ext, np.empty((m + 1, 2)), np.empty((m + 1, 2)), np.zeros(m, dtype=np.int64), frozen)

    def sweep_step(self, run: SweepRun) -> tuple[float, bool]:
        """Compute the next level of a sweep with the ghost values known now; returns (work, computed).

        While every level so far used the same ghost values as the solve that produced :attr:`y`, the cached level
        is taken instead of solving (F is a pure function; the work is the same, ``computed`` False).
        """
        k = run.k + 1
        left = (run.frozen[0] if run.frozen else self.ghost_values(-1))[k]
        right = (run.frozen[1] if run.frozen else self.ghost_values(1))[k]
        run.left[k], run.right[k] = left, right
        c = self.cache
        if run.reuse and c is not None and np.array_equal(c.left[k], left) and np.array_equal(c.right[k], right):
            run.ext[k], run.newton[k - 1] = c.ext[k], c.newton[k - 1]
            computed = False
        else:
            run.reuse = False
            run.ext[k], run.newton[k - 1] = implicit_step(run.ext[k - 1], left, right, self.problem, k)
            computed = True
        run.k = k
        return float(run.newton[k - 1]) * run.ext.shape[1], computed

    def end_sweep(self, run: SweepRun) -> Sweep:
        """The finished sweep: new owned iterate, its residual ‖X_i^k − X_i^{k−1}‖∞ and total work."""
        run.left[0], run.right[0] = self.ghost_values(-1)[0], self.ghost_values(1)[0]
        lo = self.lo
        new = run.ext[:, self.a - lo:self.b - lo]
        residual = float(np.max(np.abs(new - self.y))) if new.size else 0.0
        return Sweep(new, residual, float(run.newton.sum()) * run.ext.shape[1],
                     _Solve(run.ext, run.left, run.right, run.newton), not run.reuse)

    def commit(self, sw: Sweep) -> None:
        """Install a finished sweep's iterate (the block must not have changed since it began)."""
        self.sweeps += 1
        self.y, self.cache = sw.y, sw.solve
        self.solves += int(sw.solved)

    def sweep(self) -> tuple[float, float]:
        """One whole iteration with the current ghosts; returns (residual, work)."""
        run = self.begin_sweep()
        while run.k < self.levels - 1:
            self.sweep_step(run)
        sw = self.end_sweep(run)
        self.commit(sw)
        return sw.residual, sw.work

    def is_fixed(self, inputs: tuple | None, left, right) -> bool:
        """Whether ``F_i(X) = X_i`` is known without solving: X_i came from a solve with exactly these ghosts.

        ``inputs`` is :attr:`inputs` when X_i was recorded; F_i depends on X only through the ghost values at the
        levels 1..m (None: the physical boundary).
        """
        if inputs is None:
            return False
        bc = self.problem.boundary(self.levels)
        return all(np.array_equal(used[1:], (bc if g is None else g)[1:]) for used, g in zip(inputs, (left, right)))

    def set_ghost(self, side: int, pos: int, traj: NDArray[np.float64]) -> bool:
        """Take a neighbour's boundary trajectory if it is the ghost this block needs now (003 Alg. 6)."""
        if pos != self.ghost_pos(side) or pos < 0:
            return False
        if side < 0:
            self.ghost_left = traj
        else:
            self.ghost_right = traj
        return True

    # -- moving border points (003 Alg. 3–5) --------------------------------------------------------------
    def _known(self, pos: int) -> NDArray[np.float64]:
        """Best trajectory this block knows of any point near it (owned, overlap solution, ghost or start)."""
        if self.a <= pos < self.b:
            return self.y[:, pos - self.a].copy()
        if self.cache is not None and self.lo <= pos < self.hi:
            return self.cache.ext[:, pos - self.lo].copy()
        if pos == self.ghost_pos(-1) and self.ghost_left is not None:
            return self.ghost_left.copy()
        if pos == self.ghost_pos(+1) and self.ghost_right is not None:
            return self.ghost_right.copy()
        start = self.zone_left[pos - self.lo] if pos < self.a else self.zone_right[pos - self.b]
        return np.tile(start, (self.levels, 1))

    def give(self, side: int, count: int) -> Transfer:
        """Remove ``count`` border points on ``side`` and return them for the neighbour there.

        The block keeps at least δ + 1 points (the neighbour's new ghost and overlap must be this block's).
        Its own new ghost on that side is the best value it knows (003 §VI-B: the moved points continue with
        the values they had when sent until the neighbour's updates arrive).
        """
        if not 1 <= count <= self.n_points - self.overlap - 1:
            raise SolverError(f"cannot move {count} of {self.n_points} points with overlap {self.overlap}")
        n_pts, d = self.problem.n, self.overlap
        if side > 0:
            cut = self.b - count
            moved = self.y[:, cut - self.a:].copy()
            zlo = max(cut - d, 0)
            zone = EdgeZone(zlo, self.y[0, zlo - self.a:cut - self.a].copy())
            gpos = zlo - 1 if zlo > 0 else -1
            ghost = self.y[:, gpos - self.a].copy() if gpos >= 0 else None
            new_hi = min(cut + d, n_pts)
            tail = np.concatenate([moved[0], self.zone_right])  # starting values of [cut, old hi)
            new_zone = tail[:new_hi - cut].copy()
            new_ghost = self._known(new_hi) if new_hi < n_pts else None
            self.y, self.b = self.y[:, :cut - self.a].copy(), cut
            self.zone_right, self.ghost_right = new_zone, new_ghost
            out = Transfer(self.window, cut, moved, zone, gpos, ghost)
        else:
            cut = self.a + count
            moved = self.y[:, :count].copy()
            zhi = min(cut + d, n_pts)
            zone = EdgeZone(cut, self.y[0, cut - self.a:zhi - self.a].copy())
            gpos = zhi if zhi < n_pts else -1
            ghost = self.y[:, gpos - self.a].copy() if gpos >= 0 else None
            new_lo = max(cut - d, 0)
            head = np.concatenate([self.zone_left, moved[0]])  # starting values of [old lo, cut)
            new_zone = head[new_lo - self.lo:].copy()
            new_ghost = self._known(new_lo - 1) if new_lo > 0 else None
            self.y, self.a = self.y[:, count:].copy(), cut
            self.zone_left, self.ghost_left = new_zone, new_ghost
            out = Transfer(self.window, self.a - count, moved, zone, gpos, ghost)
        self.cache = None
        return out

    def take(self, side: int, tr: Transfer) -> None:
        """Append the points of a neighbour's :class:`Transfer` on ``side`` (003 Alg. 3 "resize ... complete")."""
        if tr.window != self.window:
            raise SolverError(f"transfer of window {tr.window} reached a block in window {self.window}")
        if side > 0:
            if tr.start != self.b:
                raise SolverError(f"transfer starts at {tr.start}, block ends at {self.b}")
            self.y = np.concatenate([self.y, tr.points], axis=1)
            self.b += tr.count
            self.zone_right = tr.zone.values.copy()
            self.ghost_right = None if tr.ghost_pos < 0 else tr.ghost.copy()
        else:
            if tr.start + tr.count != self.a:
                raise SolverError(f"transfer ends at {tr.start + tr.count}, block starts at {self.a}")
            self.y = np.concatenate([tr.points, self.y], axis=1)
            self.a = tr.start
            self.zone_left = tr.zone.values.copy()
            self.ghost_left = None if tr.ghost_pos < 0 else tr.ghost.copy()
        self.cache = None

    # -- windows ------------------------------------------------------------------------------------------
    def next_window(self, final: NDArray[np.float64], levels: int, left: EdgeZone | None,
                    right: EdgeZone | None) -> None:
        """Start the next window from the accepted ``final`` values (b − a, 2) and the neighbours' border zones."""
        n_pts, d = self.problem.n, self.overlap
        lo, hi = max(self.a - d, 0), min(self.b + d, n_pts)
        self.window += 1
        self.y = np.tile(final, (levels, 1, 1))
        if left is not None:
            self.zone_left = left.values[lo - left.start:].copy()
            self.ghost_left = np.tile(left.values[lo - 1 - left.start], (levels, 1)) if lo > 0 else None
        if right is not None:
            self.zone_right = right.values[:hi - right.start].copy()
            self.ghost_right = np.tile(right.values[hi - right.start], (levels, 1)) if hi < n_pts else None
        if left is None and lo > 0 or right is None and hi < n_pts:
            raise SolverError("next window: a neighbour's border zone is missing")
        self.cache = None


if __name__ == "__main__":  # python -m hermes.app.brusselator SPEC.yaml: the runner of hermes.app.bahi
    from hermes.app.bahi import main

    raise SystemExit(main())
